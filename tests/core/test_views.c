/* Views checked element by element against index arithmetic written here.
 * Sources are views of arange(N) (value = storage index), so every element's
 * value names the storage slot it reads: comparisons are exact (tolerance 0). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAXE 4096

static void unravel(int64_t f, int ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? f % shape[d] : 0;
        f = shape[d] ? f / shape[d] : 0;
    }
}

static int64_t ravel(int ndim, const int64_t *shape, const int64_t *idx)
{
    int64_t f = 0;
    for (int d = 0; d < ndim; d++) f = f * shape[d] + idx[d];
    return f;
}

static double item(const ct_tensor *t, int64_t f)
{
    double v = NAN;
    ct_status s = ct_tensor_item(t, f, &v);
    if (s != CT_OK) fprintf(stderr, "  item(%lld): %s\n", (long long)f, ct_last_error());
    return v;
}

/* Maps a view index to the source index; false if the test's arithmetic says "no such element". */
typedef void (*map_fn)(const void *ctx, const int64_t *vidx, int64_t *sidx);

/* Every element of v equals src at map(index); returns mismatches. */
static int check_map(const ct_tensor *v, const ct_tensor *src, map_fn map, const void *ctx)
{
    int bad = 0, vn = ct_tensor_ndim(v), sn = ct_tensor_ndim(src);
    int64_t n = ct_tensor_numel(v), vidx[CT_MAX_DIMS], sidx[CT_MAX_DIMS];
    for (int64_t f = 0; f < n; f++) {
        unravel(f, vn, ct_tensor_shape(v), vidx);
        map(ctx, vidx, sidx);
        double got = item(v, f), want = item(src, ravel(sn, ct_tensor_shape(src), sidx));
        if (got != want && bad++ < 3) fprintf(stderr, "  element %lld: got %g want %g\n", (long long)f, got, want);
    }
    return bad;
}

/* Same storage: first-element pointers differ by exactly the offset difference. */
static bool shares_storage(const ct_tensor *a, const ct_tensor *b)
{
    const void *pa, *pb;
    if (ct_tensor_data(a, &pa) != CT_OK || ct_tensor_data(b, &pb) != CT_OK) return false;
    size_t es = ct_dtype_block_bytes(ct_tensor_dtype(a));
    return (const char *)pa - ct_tensor_offset(a) * (int64_t)es == (const char *)pb - ct_tensor_offset(b) * (int64_t)es;
}

static ct_tensor *arange_shaped(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    ct_tensor *a = NULL, *v = NULL;
    CHECK_OK(ct_arange(0, (double)n, 1, CT_F32, &a));
    CHECK_OK(ct_view(a, ndim, shape, &v));
    ct_tensor_free(a);
    return v;
}

/* ---- ct_view / ct_reshape against a brute-force "is it expressible" reference ---- */

static int64_t storage_index(const ct_tensor *t, int64_t f)
{
    return (int64_t)item(t, f); /* value of arange = storage slot */
}

/* Strides for `shape` reproducing src's row-major element order, if any exist. */
static bool ref_view_strides(const ct_tensor *src, int ndim, const int64_t *shape, int64_t *stride)
{
    int64_t n = ct_tensor_numel(src);
    if (n == 0) return true;
    int64_t base = storage_index(src, 0), idx[CT_MAX_DIMS] = {0};
    for (int d = 0; d < ndim; d++) {
        stride[d] = 0;
        if (shape[d] == 1) continue;
        idx[d] = 1;
        stride[d] = storage_index(src, ravel(ndim, shape, idx)) - base;
        idx[d] = 0;
    }
    for (int64_t f = 0; f < n; f++) {
        unravel(f, ndim, shape, idx);
        int64_t off = base;
        for (int d = 0; d < ndim; d++) off += idx[d] * stride[d];
        if (off != storage_index(src, f)) return false;
    }
    return true;
}

static int check_flat_equal(const ct_tensor *v, const ct_tensor *src)
{
    int bad = 0;
    int64_t n = ct_tensor_numel(v);
    if (n != ct_tensor_numel(src)) return 1;
    for (int64_t f = 0; f < n; f++)
        if (item(v, f) != item(src, f) && bad++ < 3) fprintf(stderr, "  flat %lld differs\n", (long long)f);
    return bad;
}

static int g_expressible, g_inexpressible;

/* One view attempt: success must match the reference exactly, failure must be CT_ERR_SHAPE. */
static void try_view(const ct_tensor *src, int ndim, const int64_t *shape)
{
    int64_t ref_stride[CT_MAX_DIMS];
    bool ok = ref_view_strides(src, ndim, shape, ref_stride);
    *(ok ? &g_expressible : &g_inexpressible) += 1;
    ct_tensor *v = NULL, *r = NULL;
    ct_status s = ct_view(src, ndim, shape, &v);
    char ss[96] = "", ts[96] = "";
    for (int i = 0, p = 0; i < ndim; i++) p += snprintf(ts + p, sizeof ts - (size_t)p, "%lld ", (long long)shape[i]);
    for (int i = 0, p = 0; i < ct_tensor_ndim(src); i++)
        p += snprintf(ss + p, sizeof ss - (size_t)p, "%lld/%lld ", (long long)ct_tensor_shape(src)[i], (long long)ct_tensor_strides(src)[i]);
    if (ok) {
        CHECK_MSG(s == CT_OK, "view of [%s] as [%s] should work: %s", ss, ts, ct_last_error());
        if (s == CT_OK) {
            CHECK(ct_tensor_ndim(v) == ndim);
            for (int d = 0; d < ndim; d++) {
                CHECK(ct_tensor_shape(v)[d] == shape[d]);
                if (shape[d] > 1 && ct_tensor_numel(v) > 0)
                    CHECK_MSG(ct_tensor_strides(v)[d] == ref_stride[d], "[%s] as [%s]: stride %d = %lld want %lld", ss, ts, d,
                              (long long)ct_tensor_strides(v)[d], (long long)ref_stride[d]);
            }
            CHECK(check_flat_equal(v, src) == 0);
            if (ct_tensor_numel(v)) CHECK(shares_storage(v, src));
        }
    } else {
        CHECK_MSG(s == CT_ERR_SHAPE, "view of [%s] as [%s] is not expressible but returned %s", ss, ts, ct_status_name(s));
        CHECK(s == CT_OK || ct_last_error()[0]);
    }
    /* reshape always works, shares storage exactly when a view exists */
    CHECK_OK(ct_reshape(src, ndim, shape, &r));
    if (r) {
        CHECK(check_flat_equal(r, src) == 0);
        if (ct_tensor_numel(r)) CHECK(shares_storage(r, src) == ok);
    }
    ct_tensor_free(v);
    ct_tensor_free(r);
}

/* A random source: a permuted / sliced / expanded view of an arange. */
static ct_tensor *random_source(th_rng *rng)
{
    int nd = 1 + (int)th_uniform(rng, 0, 4);
    int64_t shape[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) shape[i] = 1 + (int64_t)th_uniform(rng, 0, 4);
    if (th_uniform(rng, 0, 1) < 0.05) shape[(int)th_uniform(rng, 0, nd)] = 0;
    ct_tensor *t = arange_shaped(nd, shape), *u = NULL;
    double pick = th_uniform(rng, 0, 1);
    if (pick < 0.4) {
        int perm[CT_MAX_DIMS];
        for (int i = 0; i < nd; i++) perm[i] = i;
        for (int i = nd - 1; i > 0; i--) {
            int j = (int)th_uniform(rng, 0, i + 1), x = perm[i];
            perm[i] = perm[j];
            perm[j] = x;
        }
        CHECK_OK(ct_permute(t, perm, &u));
    } else if (pick < 0.6) {
        int d = (int)th_uniform(rng, 0, nd);
        CHECK_OK(ct_slice(t, d, (int64_t)th_uniform(rng, 0, 2), INT64_MAX, 1 + (int64_t)th_uniform(rng, 0, 2), &u));
    } else if (pick < 0.7 && nd < CT_MAX_DIMS) {
        int64_t es[CT_MAX_DIMS];
        es[0] = 2;
        for (int i = 0; i < nd; i++) es[i + 1] = shape[i] == 1 ? 3 : -1;
        CHECK_OK(ct_expand(t, nd + 1, es, &u));
    } else {
        return t;
    }
    ct_tensor_free(t);
    return u;
}

/* A random shape with the given number of elements (factors from its divisors, size-1 dims sprinkled). */
static int random_target(th_rng *rng, int64_t n, int64_t *shape)
{
    int nd = 0;
    int64_t left = n;
    while (nd < 5) {
        if (th_uniform(rng, 0, 1) < 0.2) {
            shape[nd++] = 1;
            continue;
        }
        if (left <= 1) break;
        int64_t f = 1 + (int64_t)th_uniform(rng, 0, (double)left);
        while (left % f) f++;
        shape[nd++] = f;
        left /= f;
    }
    if (left != 1 || n == 0) shape[nd++] = left;
    return nd;
}

static void test_view_random(void)
{
    th_rng rng = {7};
    for (int it = 0; it < 400; it++) {
        ct_tensor *src = random_source(&rng);
        if (!src) continue;
        int64_t shape[CT_MAX_DIMS];
        int nd = random_target(&rng, ct_tensor_numel(src), shape);
        try_view(src, nd, shape);
        ct_tensor_free(src);
    }
    /* the random cases must cover both outcomes to mean anything */
    CHECK_MSG(g_expressible > 100 && g_inexpressible > 30, "%d expressible, %d not", g_expressible, g_inexpressible);
}

static void test_view_cases(void)
{
    int64_t s234[3] = {2, 3, 4};
    ct_tensor *t = arange_shaped(3, s234), *p = NULL, *v = NULL;
    /* -1 inferred */
    int64_t m1[2] = {4, -1};
    CHECK_OK(ct_view(t, 2, m1, &v));
    CHECK(v && ct_tensor_shape(v)[1] == 6);
    ct_tensor_free(v);
    v = NULL;
    int64_t flat[1] = {-1};
    CHECK_OK(ct_view(t, 1, flat, &v));
    CHECK(v && ct_tensor_shape(v)[0] == 24);
    ct_tensor_free(v);
    /* permuted [4, 2, 3] with strides (1, 12, 4): [4, 6] is expressible, [24] and [8, 3] are not */
    int perm[3] = {2, 0, 1};
    CHECK_OK(ct_permute(t, perm, &p));
    int64_t ok_shape[2] = {4, 6}, bad1[1] = {24}, bad2[2] = {8, 3}, split[3] = {2, 2, 6};
    try_view(p, 2, ok_shape);
    try_view(p, 1, bad1);
    try_view(p, 2, bad2);
    try_view(p, 3, split);
    v = NULL;
    CHECK_STATUS(ct_view(p, 1, bad1, &v), CT_ERR_SHAPE);
    CHECK(v == NULL);
    CHECK(strstr(ct_last_error(), "ct_view") != NULL);
    /* errors */
    int64_t two_neg[2] = {-1, -1}, wrong[2] = {5, 5}, negs[2] = {-2, 12}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 24};
    int64_t zero_infer[2] = {0, -1};
    CHECK_STATUS(ct_view(t, 2, two_neg, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_view(t, 2, wrong, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_view(t, 2, negs, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_view(t, 9, nine, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_view(t, -1, nine, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_view(t, 2, zero_infer, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_view(t, 2, NULL, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_view(NULL, 2, m1, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_view(t, 2, m1, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_reshape(t, 2, wrong, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_reshape(p, 2, wrong, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_reshape(NULL, 2, m1, &v), CT_ERR_INVALID_ARG);
    /* a scalar views as [1] and [1, 1] and back */
    ct_tensor *sc = NULL, *s1 = NULL, *s0 = NULL;
    CHECK_OK(ct_full(0, NULL, CT_F32, 5, &sc));
    int64_t one[2] = {1, 1};
    CHECK_OK(ct_view(sc, 2, one, &s1));
    CHECK_OK(ct_view(s1, 0, NULL, &s0));
    CHECK(s0 && ct_tensor_ndim(s0) == 0 && item(s0, 0) == 5);
    ct_tensor_free(sc);
    ct_tensor_free(s1);
    ct_tensor_free(s0);
    ct_tensor_free(p);
    ct_tensor_free(t);
}

/* ---- the other view ops ---- */

typedef struct perm_ctx { int n; int perm[CT_MAX_DIMS]; } perm_ctx;
static void map_perm(const void *vc, const int64_t *v, int64_t *s)
{
    const perm_ctx *c = vc;
    for (int i = 0; i < c->n; i++) s[c->perm[i]] = v[i];
}

typedef struct slice_ctx { int n, dim; int64_t start, step; } slice_ctx;
static void map_slice(const void *vc, const int64_t *v, int64_t *s)
{
    const slice_ctx *c = vc;
    memcpy(s, v, sizeof(int64_t) * (size_t)c->n);
    s[c->dim] = c->start + v[c->dim] * c->step;
}

typedef struct select_ctx { int n, dim; int64_t index; } select_ctx; /* n = source ndim */
static void map_select(const void *vc, const int64_t *v, int64_t *s)
{
    const select_ctx *c = vc;
    for (int i = 0, j = 0; i < c->n; i++) s[i] = i == c->dim ? c->index : v[j++];
}

typedef struct expand_ctx { int n, lead; int64_t src_shape[CT_MAX_DIMS]; } expand_ctx; /* n = source ndim */
static void map_expand(const void *vc, const int64_t *v, int64_t *s)
{
    const expand_ctx *c = vc;
    for (int i = 0; i < c->n; i++) s[i] = c->src_shape[i] == 1 ? 0 : v[i + c->lead];
}

typedef struct dims_ctx { int n; bool keep[CT_MAX_DIMS + 1]; } dims_ctx; /* n = larger ndim */
/* squeeze: view has the kept dims of the source */
static void map_squeeze(const void *vc, const int64_t *v, int64_t *s)
{
    const dims_ctx *c = vc;
    for (int i = 0, j = 0; i < c->n; i++) s[i] = c->keep[i] ? v[j++] : 0;
}
/* unsqueeze: source has the kept dims of the view */
static void map_unsqueeze(const void *vc, const int64_t *v, int64_t *s)
{
    const dims_ctx *c = vc;
    for (int i = 0, j = 0; i < c->n; i++)
        if (c->keep[i]) s[j++] = v[i];
}

/* Python slice semantics, written out independently. */
static int64_t py_slice(int64_t n, int64_t start, int64_t end, int64_t step, int64_t *first)
{
    if (start < 0) start += n;
    if (start < 0) start = 0;
    if (start > n) start = n;
    if (end < 0) end += n;
    if (end < 0) end = 0;
    if (end > n) end = n;
    *first = start;
    int64_t len = 0;
    for (int64_t i = start; i < end; i += step) len++;
    return len;
}

static void check_view_ops_on(const ct_tensor *src)
{
    int n = ct_tensor_ndim(src);
    const int64_t *sh = ct_tensor_shape(src);
    ct_tensor *v = NULL;
    /* permute: reversed and rotated */
    perm_ctx pc = {n, {0}};
    for (int i = 0; i < n; i++) pc.perm[i] = n - 1 - i;
    CHECK_OK(ct_permute(src, pc.perm, &v));
    if (v) CHECK(check_map(v, src, map_perm, &pc) == 0);
    ct_tensor_free(v);
    v = NULL;
    for (int i = 0; i < n; i++) pc.perm[i] = (i + 1) % n;
    CHECK_OK(ct_permute(src, pc.perm, &v));
    if (v) CHECK(check_map(v, src, map_perm, &pc) == 0);
    ct_tensor_free(v);
    v = NULL;
    /* transpose first and last (negative dim) */
    for (int i = 0; i < n; i++) pc.perm[i] = i;
    pc.perm[0] = n - 1;
    pc.perm[n - 1] = 0;
    CHECK_OK(ct_transpose(src, 0, -1, &v));
    if (v) CHECK(check_map(v, src, map_perm, &pc) == 0);
    ct_tensor_free(v);
    v = NULL;
    for (int d = 0; d < n; d++) {
        /* narrow */
        if (sh[d] >= 1) {
            slice_ctx sc = {n, d, sh[d] > 1 ? 1 : 0, 1};
            int64_t len = sh[d] - sc.start;
            CHECK_OK(ct_narrow(src, d, sc.start, len, &v));
            if (v) {
                CHECK(ct_tensor_shape(v)[d] == len);
                CHECK(check_map(v, src, map_slice, &sc) == 0);
            }
            ct_tensor_free(v);
            v = NULL;
        }
        /* slices with steps, negative and clamped bounds */
        static const int64_t sl[][3] = {{0, INT64_MAX, 2}, {1, -1, 1}, {-2, 100, 1}, {-100, 3, 3}, {2, 1, 1}, {0, 0, 1}};
        for (size_t k = 0; k < sizeof sl / sizeof sl[0]; k++) {
            slice_ctx sc = {n, d, 0, sl[k][2]};
            int64_t len = py_slice(sh[d], sl[k][0], sl[k][1], sl[k][2], &sc.start);
            CHECK_OK(ct_slice(src, d, sl[k][0], sl[k][1], sl[k][2], &v));
            if (v) {
                CHECK_MSG(ct_tensor_shape(v)[d] == len, "slice %lld:%lld:%lld of %lld: %lld want %lld", (long long)sl[k][0],
                          (long long)sl[k][1], (long long)sl[k][2], (long long)sh[d], (long long)ct_tensor_shape(v)[d], (long long)len);
                if (ct_tensor_shape(v)[d] == len) CHECK(check_map(v, src, map_slice, &sc) == 0);
            }
            ct_tensor_free(v);
            v = NULL;
        }
        /* select first and last (negative index) */
        if (sh[d] > 0) {
            select_ctx sc = {n, d, sh[d] - 1};
            CHECK_OK(ct_select(src, d, -1, &v));
            if (v) {
                CHECK(ct_tensor_ndim(v) == n - 1);
                CHECK(check_map(v, src, map_select, &sc) == 0);
            }
            ct_tensor_free(v);
            v = NULL;
        }
        /* unsqueeze at every position, including the end */
        dims_ctx uc = {n + 1, {0}};
        for (int i = 0; i <= n; i++) uc.keep[i] = i != d;
        if (n < CT_MAX_DIMS) {
            CHECK_OK(ct_unsqueeze(src, d, &v));
            if (v) {
                CHECK(ct_tensor_ndim(v) == n + 1 && ct_tensor_shape(v)[d] == 1);
                CHECK(check_map(v, src, map_unsqueeze, &uc) == 0);
            }
            ct_tensor_free(v);
            v = NULL;
        }
        /* squeeze one dim (no-op when its size is not 1) */
        dims_ctx qc = {n, {0}};
        int kept = 0;
        for (int i = 0; i < n; i++) kept += qc.keep[i] = !(i == d && sh[i] == 1);
        CHECK_OK(ct_squeeze(src, d, &v));
        if (v) {
            CHECK(ct_tensor_ndim(v) == kept);
            CHECK(check_map(v, src, map_squeeze, &qc) == 0);
        }
        ct_tensor_free(v);
        v = NULL;
    }
    if (n < CT_MAX_DIMS) {
        dims_ctx uc = {n + 1, {0}};
        for (int i = 0; i < n; i++) uc.keep[i] = true;
        CHECK_OK(ct_unsqueeze(src, -1, &v));
        if (v) CHECK(check_map(v, src, map_unsqueeze, &uc) == 0);
        ct_tensor_free(v);
        v = NULL;
    }
    /* squeeze all */
    dims_ctx qc = {n, {0}};
    int kept = 0;
    for (int i = 0; i < n; i++) kept += qc.keep[i] = sh[i] != 1;
    CHECK_OK(ct_squeeze(src, CT_ALL_DIMS, &v));
    if (v) {
        CHECK(ct_tensor_ndim(v) == kept);
        CHECK(check_map(v, src, map_squeeze, &qc) == 0);
    }
    ct_tensor_free(v);
    v = NULL;
    /* expand: size-1 dims to 3, one new leading dim of 2 */
    if (n < CT_MAX_DIMS) {
        expand_ctx ec = {n, 1, {0}};
        int64_t es[CT_MAX_DIMS];
        es[0] = 2;
        for (int i = 0; i < n; i++) {
            ec.src_shape[i] = sh[i];
            es[i + 1] = sh[i] == 1 ? 3 : (i % 2 ? -1 : sh[i]);
        }
        CHECK_OK(ct_expand(src, n + 1, es, &v));
        if (v) {
            CHECK(ct_tensor_strides(v)[0] == 0);
            CHECK(check_map(v, src, map_expand, &ec) == 0);
        }
        ct_tensor_free(v);
        v = NULL;
    }
    /* alias */
    perm_ctx id = {n, {0}};
    for (int i = 0; i < n; i++) id.perm[i] = i;
    CHECK_OK(ct_alias(src, &v));
    if (v) {
        CHECK(check_map(v, src, map_perm, &id) == 0);
        CHECK(ct_tensor_offset(v) == ct_tensor_offset(src));
        if (ct_tensor_numel(v)) CHECK(shares_storage(v, src));
    }
    ct_tensor_free(v);
}

static void test_view_ops(void)
{
    int64_t s[4] = {2, 3, 1, 4};
    ct_tensor *base = arange_shaped(4, s);
    check_view_ops_on(base);
    /* strided sources: transposed, stepped with an offset, size-0 and size-1 dims */
    ct_tensor *t = NULL, *st = NULL, *z = NULL, *ones = NULL;
    CHECK_OK(ct_transpose(base, 0, 3, &t));
    check_view_ops_on(t);
    CHECK_OK(ct_slice(t, 0, 1, 4, 2, &st));
    CHECK(ct_tensor_offset(st) == 1);
    check_view_ops_on(st);
    int64_t zs[3] = {3, 0, 2}, os[3] = {1, 1, 1};
    z = arange_shaped(3, zs);
    check_view_ops_on(z);
    ones = arange_shaped(3, os);
    check_view_ops_on(ones);
    ct_tensor_free(base);
    ct_tensor_free(t);
    ct_tensor_free(st);
    ct_tensor_free(z);
    ct_tensor_free(ones);
}

static void test_view_errors(void)
{
    int64_t s[3] = {2, 3, 4};
    ct_tensor *t = arange_shaped(3, s), *v = NULL;
    int bad_perm[3] = {0, 0, 1}, oob_perm[3] = {0, 1, 3}, good_perm[3] = {2, 1, 0};
    CHECK_STATUS(ct_permute(t, bad_perm, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_permute(t, oob_perm, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_permute(t, NULL, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_permute(NULL, good_perm, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_permute(t, good_perm, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_transpose(t, 0, 3, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_transpose(t, -4, 0, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_narrow(t, 3, 0, 1, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_narrow(t, 1, 2, 2, &v), CT_ERR_RANGE);
    CHECK_STATUS(ct_narrow(t, 1, -1, 1, &v), CT_ERR_RANGE);
    CHECK_STATUS(ct_narrow(t, 1, 0, -1, &v), CT_ERR_RANGE);
    CHECK_STATUS(ct_narrow(t, 1, INT64_MAX, 2, &v), CT_ERR_RANGE);
    CHECK_STATUS(ct_slice(t, 0, 0, 1, 0, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_slice(t, 0, 0, 1, -1, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_slice(t, -4, 0, 1, 1, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_select(t, 1, 3, &v), CT_ERR_RANGE);
    CHECK_STATUS(ct_select(t, 1, -4, &v), CT_ERR_RANGE);
    CHECK_STATUS(ct_select(t, 3, 0, &v), CT_ERR_INVALID_ARG);
    int64_t e_bad[3] = {2, 5, 4}, e_few[2] = {3, 4}, e_newneg[4] = {-1, 2, 3, 4}, e_neg[3] = {2, -2, 4};
    CHECK_STATUS(ct_expand(t, 3, e_bad, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_expand(t, 2, e_few, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_expand(t, 4, e_newneg, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_expand(t, 3, e_neg, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_expand(t, 9, e_bad, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_expand(t, 3, NULL, &v), CT_ERR_SHAPE);
    CHECK_STATUS(ct_squeeze(t, 3, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_squeeze(t, -4, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_unsqueeze(t, 4, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_unsqueeze(t, -5, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_alias(NULL, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_alias(t, NULL), CT_ERR_INVALID_ARG);
    /* a NULL tensor or a NULL out: an error naming the call, never a crash */
    CHECK_STATUS(ct_transpose(NULL, 0, 1, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_transpose(t, 0, 1, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_slice(NULL, 0, 0, 1, 1, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_slice(t, 0, 0, 1, 1, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_narrow(NULL, 0, 0, 1, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_narrow(t, 0, 0, 1, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_select(NULL, 0, 0, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_select(t, 0, 0, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_expand(NULL, 3, s, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_expand(t, 3, s, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_squeeze(NULL, 0, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_squeeze(t, 0, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_unsqueeze(NULL, 0, &v), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_unsqueeze(t, 0, NULL), CT_ERR_INVALID_ARG);
    CHECK_MSG(strstr(ct_last_error(), "ct_unsqueeze") != NULL, "message: %s", ct_last_error());
    CHECK(v == NULL);
    /* the accessors answer for NULL without dereferencing it */
    CHECK(ct_tensor_strides(NULL) == NULL && ct_tensor_offset(NULL) == 0 && ct_tensor_dtype(NULL) == CT_F32);
    CHECK(ct_tensor_dim(NULL, 0) == -1 && ct_tensor_dim(t, 3) == -1 && ct_tensor_dim(t, -1) == 4);
    /* 8 dims is the limit */
    int64_t s8[8] = {1, 1, 1, 2, 1, 3, 1, 4};
    ct_tensor *t8 = NULL;
    CHECK_OK(ct_view(t, 8, s8, &t8));
    CHECK_STATUS(ct_unsqueeze(t8, 0, &v), CT_ERR_SHAPE);
    int64_t e9[9] = {2, 1, 1, 1, 2, 1, 3, 1, 4};
    CHECK_STATUS(ct_expand(t8, 9, e9, &v), CT_ERR_SHAPE);
    ct_tensor_free(t8);
    ct_tensor_free(t);
}

/* Writes through a view land in the base; the view outlives the freed base. */
static void test_view_write_through(void)
{
    int64_t s[2] = {3, 4};
    ct_tensor *t = arange_shaped(2, s), *tr = NULL, *col = NULL;
    CHECK_OK(ct_transpose(t, 0, 1, &tr));
    CHECK_OK(ct_select(tr, 0, 2, &col)); /* column 2 of t: 2, 6, 10 */
    ct_tensor_free(tr);
    void *p = NULL;
    CHECK_OK(ct_tensor_data_mut(col, &p));
    const int64_t *cs = ct_tensor_strides(col);
    CHECK(cs[0] == 4);
    ((float *)p)[cs[0] * 1] = -1.0f;
    CHECK(item(t, 6) == -1.0);
    ct_tensor_free(t);
    CHECK(item(col, 0) == 2 && item(col, 1) == -1 && item(col, 2) == 10);
    ct_tensor_free(col);
}

int main(void)
{
    RUN(test_view_cases);
    RUN(test_view_random);
    RUN(test_view_ops);
    RUN(test_view_errors);
    RUN(test_view_write_through);
    return th_finish();
}
