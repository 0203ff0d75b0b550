/* Reductions against a plain double-precision reference. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "harness.h"

typedef enum { R_SUM, R_MEAN, R_PROD, R_MAX, R_MIN, R_VAR, R_STD, R_NORM, R_ARGMAX, R_ARGMIN } rop;

/* Reduces v (row-major, shape) over the dims in mask; output in row-major order of the kept dims. */
static double *ref_reduce(const double *v, int nd, const int64_t *shape, uint32_t mask, rop op, double p, bool unbiased,
                          int64_t *nout)
{
    int64_t kept = 1, red = 1, total = 1;
    for (int d = 0; d < nd; d++) {
        total *= shape[d];
        if (mask & (1u << d)) red *= shape[d];
        else kept *= shape[d];
    }
    *nout = kept;
    double *out = malloc(sizeof(double) * (size_t)(kept + 1));
    /* bucket the inputs by output, keeping row-major order inside each bucket */
    int64_t *ko_of = malloc(sizeof(int64_t) * (size_t)(total + 1)), *start = calloc((size_t)(kept + 1), sizeof(int64_t));
    double *sorted = malloc(sizeof(double) * (size_t)(total + 1));
    for (int64_t i = 0; i < total; i++) {
        int64_t rem = i, ko = 0, kmul = 1;
        for (int d = nd - 1; d >= 0; d--) {
            int64_t idx = rem % shape[d];
            rem /= shape[d];
            if (!(mask & (1u << d))) {
                ko += idx * kmul;
                kmul *= shape[d];
            }
        }
        ko_of[i] = ko;
        start[ko + 1]++;
    }
    for (int64_t o = 0; o < kept; o++) start[o + 1] += start[o];
    int64_t *fill = calloc((size_t)(kept + 1), sizeof(int64_t));
    for (int64_t i = 0; i < total; i++) sorted[start[ko_of[i]] + fill[ko_of[i]]++] = v[i];
    for (int64_t o = 0; o < kept; o++) {
        const double *vals = sorted + start[o];
        int64_t cnt = red;
        double r = 0, mean = 0;
        switch (op) {
        case R_SUM: for (int64_t i = 0; i < cnt; i++) r += vals[i]; break;
        case R_MEAN: for (int64_t i = 0; i < cnt; i++) r += vals[i]; r /= (double)cnt; break;
        case R_PROD: r = 1; for (int64_t i = 0; i < cnt; i++) r *= vals[i]; break;
        case R_MAX: case R_MIN: case R_ARGMAX: case R_ARGMIN: {
            int64_t bi = 0;
            for (int64_t i = 1; i < cnt; i++) {
                if (isnan(vals[bi])) break;
                bool better = (op == R_MAX || op == R_ARGMAX) ? vals[i] > vals[bi] : vals[i] < vals[bi];
                if (better || isnan(vals[i])) bi = i;
            }
            r = (op == R_MAX || op == R_MIN) ? vals[bi] : (double)bi;
            break;
        }
        case R_VAR: case R_STD:
            for (int64_t i = 0; i < cnt; i++) mean += vals[i];
            mean /= (double)cnt;
            for (int64_t i = 0; i < cnt; i++) r += (vals[i] - mean) * (vals[i] - mean);
            r /= (double)cnt - (unbiased ? 1 : 0);
            if (op == R_STD) r = sqrt(r);
            break;
        case R_NORM:
            if (isinf(p)) {
                for (int64_t i = 0; i < cnt; i++) r = fmax(r, fabs(vals[i]));
            } else {
                for (int64_t i = 0; i < cnt; i++) r += pow(fabs(vals[i]), p);
                r = pow(r, 1 / p);
            }
            break;
        }
        out[o] = r;
    }
    free(ko_of);
    free(start);
    free(fill);
    free(sorted);
    return out;
}

static ct_status call(rop op, const ct_tensor *a, const int *dims, int n, bool keepdim, double p, bool unbiased,
                      ct_tensor **out)
{
    switch (op) {
    case R_SUM: return ct_sum(a, dims, n, keepdim, out);
    case R_MEAN: return ct_mean(a, dims, n, keepdim, out);
    case R_PROD: return ct_prod(a, dims, n, keepdim, out);
    case R_MAX: return ct_max(a, dims, n, keepdim, out);
    case R_MIN: return ct_min(a, dims, n, keepdim, out);
    case R_VAR: return ct_var(a, dims, n, unbiased, keepdim, out);
    case R_STD: return ct_std(a, dims, n, unbiased, keepdim, out);
    case R_NORM: return ct_norm(a, p, dims, n, keepdim, out);
    case R_ARGMAX: return ct_argmax(a, n ? dims[0] : CT_ALL_DIMS, keepdim, out);
    case R_ARGMIN: return ct_argmin(a, n ? dims[0] : CT_ALL_DIMS, keepdim, out);
    }
    return CT_ERR_INVALID_ARG;
}

/* Runs op over dims and compares values, shape (with/without keepdim) and dtype. */
static void check(rop op, const ct_tensor *a, const int *dims, int n, double p, bool unbiased, ct_dtype want_dt,
                  double tol)
{
    int nd = ct_tensor_ndim(a);
    uint32_t mask = 0;
    for (int i = 0; i < n; i++) mask |= 1u << (dims[i] < 0 ? dims[i] + nd : dims[i]);
    if (n == 0) mask = (1u << nd) - 1;
    double *v = th_values(a);
    int64_t nout;
    double *want = ref_reduce(v, nd, ct_tensor_shape(a), mask, op, p, unbiased, &nout);
    for (int keep = 0; keep < 2; keep++) {
        ct_tensor *o = NULL;
        CHECK_OK(call(op, a, dims, n, keep, p, unbiased, &o));
        if (!o) continue;
        CHECK_MSG(ct_tensor_dtype(o) == want_dt, "op %d: dtype %s, want %s", op, ct_dtype_name(ct_tensor_dtype(o)),
                  ct_dtype_name(want_dt));
        CHECK(ct_tensor_numel(o) == nout);
        int ond = ct_tensor_ndim(o), expect_nd = 0;
        for (int d = 0; d < nd; d++) {
            bool red = mask & (1u << d);
            if (red && !keep) continue;
            if (expect_nd < ond) CHECK(ct_tensor_dim(o, expect_nd) == (red ? 1 : ct_tensor_shape(a)[d]));
            expect_nd++;
        }
        CHECK_MSG(ond == expect_nd, "op %d keepdim %d: ndim %d, want %d", op, keep, ond, expect_nd);
        double *got = th_values(o);
        CHECK_MSG(th_allclose(got, want, nout, tol, tol), "op %d mask 0x%x keepdim %d", op, mask, keep);
        free(got);
        ct_tensor_free(o);
    }
    free(v);
    free(want);
}

static const int dimsets[][4] = {{1, 0}, {1, 1}, {1, 2}, {2, 0, 2}, {2, -1, 1}, {3, 0, 1, 2}, {0}};

/* Every op over dim subsets of [3, 4, 5], contiguous and strided, f32 and f64. */
static void test_float_ops(void)
{
    th_rng r = {21};
    int64_t s[3] = {3, 4, 5}, sb[3] = {5, 4, 6};
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) {
            fprintf(stderr, "  skipped SIMD level %d: this CPU lacks it (or CTORCH_SIMD caps it)\n", lvl);
            continue;
        }
        for (int dt = 0; dt < 2; dt++) {
            ct_dtype t = dt ? CT_F32 : CT_F64;
            /* f32 results of <= 60 values of magnitude <= 2 rounded once from double: 1e-6 relative */
            double tol = t == CT_F32 ? 2e-6 : 1e-12;
            ct_tensor *a = th_random(&r, 3, s, t, -2, 2), *big = th_random(&r, 3, sb, t, -2, 2);
            ct_tensor *perm = NULL, *sl = NULL;
            int pd[3] = {2, 1, 0};
            ct_tensor *tmp = NULL;
            CHECK_OK(ct_permute(big, pd, &tmp));         /* [6, 4, 5], reversed strides */
            CHECK_OK(ct_slice(tmp, 0, 1, 6, 2, &perm)); /* [3, 4, 5] strided */
            ct_tensor_free(tmp);
            CHECK_OK(ct_narrow(big, 0, 1, 3, &sl)); /* [3, 4, 6] */
            const ct_tensor *ins[3] = {a, perm, sl};
            for (int in = 0; in < 3; in++)
                for (size_t d = 0; d < sizeof dimsets / sizeof dimsets[0]; d++) {
                    const int *dims = &dimsets[d][1];
                    int n = dimsets[d][0];
                    for (rop op = R_SUM; op <= R_NORM; op++) {
                        double p = op == R_NORM ? (d % 3 == 0 ? 2.0 : d % 3 == 1 ? INFINITY : 1.5) : 0;
                        check(op, ins[in], dims, n, p, d % 2 == 0, t, op == R_PROD ? tol * 10 : tol);
                    }
                    if (n <= 1) {
                        check(R_ARGMAX, ins[in], dims, n, 0, false, CT_I64, 0);
                        check(R_ARGMIN, ins[in], dims, n, 0, false, CT_I64, 0);
                    }
                }
            ct_tensor_free(a);
            ct_tensor_free(big);
            ct_tensor_free(perm);
            ct_tensor_free(sl);
        }
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
}

/* Long rows (SIMD paths) and outer-dim reductions (column schedule), with a NaN. */
static void test_fast_paths(void)
{
    th_rng r = {22};
    int64_t s[2] = {37, 1000}, s1[1] = {100003};
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) {
            fprintf(stderr, "  skipped SIMD level %d: this CPU lacks it (or CTORCH_SIMD caps it)\n", lvl);
            continue;
        }
        ct_tensor *a = th_random(&r, 2, s, CT_F32, -1, 1), *l = th_random(&r, 1, s1, CT_F32, 0, 1);
        int d0 = 0, d1 = 1;
        /* f32 output of sums accumulated in double: only the final rounding (2^-24 relative, |sum| <= 1000) */
        for (rop op = R_SUM; op <= R_MIN; op++) {
            if (op == R_PROD) continue;
            check(op, a, &d0, 1, 0, false, CT_F32, 1e-4);
            check(op, a, &d1, 1, 0, false, CT_F32, 1e-4);
        }
        check(R_ARGMAX, a, &d1, 1, 0, false, CT_I64, 0);
        check(R_ARGMIN, a, &d0, 1, 0, false, CT_I64, 0);
        check(R_SUM, l, NULL, 0, 0, false, CT_F32, 1e-3); /* |sum| ~ 5e4: f32 ulp 4e-3, tol relative */
        check(R_ARGMAX, l, NULL, 0, 0, false, CT_I64, 0);
        check(R_VAR, l, NULL, 0, 0, true, CT_F32, 1e-6);
        /* one long row split across threads: partial results merged in order */
        check(R_MEAN, l, NULL, 0, 0, false, CT_F32, 1e-6);
        check(R_MAX, l, NULL, 0, 0, false, CT_F32, 0);
        check(R_MIN, l, NULL, 0, 0, false, CT_F32, 0);
        check(R_ARGMIN, l, NULL, 0, 0, false, CT_I64, 0);
        float *lb = malloc(sizeof(float) * 100003);
        CHECK_OK(ct_tensor_to_host(l, lb, sizeof(float) * 100003));
        lb[70001] = NAN;
        lb[90000] = NAN;
        lb[3] = 5.0f; /* a larger value before the NaNs: NaN still wins */
        ct_tensor *ln = NULL;
        CHECK_OK(ct_tensor_from_data(1, s1, CT_F32, lb, &ln));
        check(R_ARGMAX, ln, NULL, 0, 0, false, CT_I64, 0);
        check(R_MAX, ln, NULL, 0, 0, false, CT_F32, 0);
        lb[70001] = lb[90000] = 0.5f;
        lb[99999] = 5.0f; /* tie across parts: the earlier index wins */
        ct_tensor_free(ln);
        ln = NULL;
        CHECK_OK(ct_tensor_from_data(1, s1, CT_F32, lb, &ln));
        check(R_ARGMAX, ln, NULL, 0, 0, false, CT_I64, 0);
        ct_tensor_free(ln);
        free(lb);
        /* NaN propagates through max/min and wins argmax */
        float *buf = malloc(sizeof(float) * 37 * 1000);
        CHECK_OK(ct_tensor_to_host(a, buf, sizeof(float) * 37 * 1000));
        buf[5 * 1000 + 777] = NAN;
        ct_tensor *n = NULL;
        CHECK_OK(ct_tensor_from_data(2, s, CT_F32, buf, &n));
        check(R_MAX, n, &d0, 1, 0, false, CT_F32, 0);
        check(R_MIN, n, &d1, 1, 0, false, CT_F32, 0);
        check(R_ARGMAX, n, &d1, 1, 0, false, CT_I64, 0);
        check(R_ARGMIN, n, NULL, 0, 0, false, CT_I64, 0);
        ct_tensor *mx = NULL;
        CHECK_OK(ct_max(n, NULL, 0, false, &mx));
        double v = 0;
        if (mx) CHECK_OK(ct_tensor_item(mx, 0, &v));
        CHECK(isnan(v));
        free(buf);
        ct_tensor_free(mx);
        ct_tensor_free(n);
        ct_tensor_free(a);
        ct_tensor_free(l);
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
}

static void test_half(void)
{
    th_rng r = {23};
    int64_t s[2] = {6, 50};
    int d1 = 1, d0 = 0;
    for (int i = 0; i < 2; i++) {
        ct_dtype t = i ? CT_BF16 : CT_F16;
        double tol = i ? 8e-3 : 1e-3; /* one rounding of the result to the dtype */
        ct_tensor *a = th_random(&r, 2, s, t, -1, 1);
        for (rop op = R_SUM; op <= R_NORM; op++) {
            if (op == R_PROD) continue;
            check(op, a, &d1, 1, 1.0, true, t, tol * 4);
            check(op, a, &d0, 1, 1.0, true, t, tol * 4);
        }
        check(R_ARGMAX, a, &d1, 1, 0, false, CT_I64, 0);
        ct_tensor_free(a);
    }
}

static void test_int_and_bool(void)
{
    th_rng r = {24};
    int64_t s[3] = {4, 3, 5};
    ct_dtype ts[] = {CT_I32, CT_I64, CT_I8, CT_BOOL};
    for (int i = 0; i < 4; i++) {
        ct_tensor *a = th_random(&r, 3, s, ts[i], ts[i] == CT_BOOL ? 0 : -9, ts[i] == CT_BOOL ? 2 : 9);
        for (size_t d = 0; d < sizeof dimsets / sizeof dimsets[0]; d++) {
            const int *dims = &dimsets[d][1];
            int n = dimsets[d][0];
            check(R_SUM, a, dims, n, 0, false, CT_I64, 0);
            check(R_PROD, a, dims, n, 0, false, CT_I64, 0);
            check(R_MAX, a, dims, n, 0, false, ts[i], 0);
            check(R_MIN, a, dims, n, 0, false, ts[i], 0);
            check(R_MEAN, a, dims, n, 0, false, CT_F32, 1e-6);
            check(R_VAR, a, dims, n, 0, true, CT_F32, 1e-6);
            check(R_NORM, a, dims, n, 2, false, CT_F32, 1e-6);
            if (n <= 1) check(R_ARGMAX, a, dims, n, 0, false, CT_I64, 0);
        }
        ct_tensor_free(a);
    }
    /* i64 extremes and sums beyond 2^53 stay exact */
    int64_t big[3] = {(int64_t)1 << 60, ((int64_t)1 << 60) + 1, 3}, s3[1] = {3};
    ct_tensor *b = NULL, *mx = NULL, *sm = NULL, *am = NULL;
    CHECK_OK(ct_tensor_from_data(1, s3, CT_I64, big, &b));
    CHECK_OK(ct_max(b, NULL, 0, false, &mx));
    CHECK_OK(ct_sum(b, NULL, 0, false, &sm));
    CHECK_OK(ct_argmax(b, 0, false, &am));
    int64_t got = 0;
    if (mx) CHECK_OK(ct_tensor_to_host(mx, &got, sizeof got));
    CHECK(got == big[1]);
    if (sm) CHECK_OK(ct_tensor_to_host(sm, &got, sizeof got));
    CHECK(got == ((int64_t)1 << 61) + 4);
    if (am) CHECK_OK(ct_tensor_to_host(am, &got, sizeof got));
    CHECK(got == 1);
    ct_tensor_free(b);
    ct_tensor_free(mx);
    ct_tensor_free(sm);
    ct_tensor_free(am);
}

static void test_argmax_ties(void)
{
    float v[8] = {1, 3, 3, 2, 0, -1, -1, 0};
    int64_t s[2] = {2, 4}, s1[1] = {8};
    ct_tensor *a = NULL, *f = NULL, *o = NULL;
    CHECK_OK(ct_tensor_from_data(2, s, CT_F32, v, &a));
    CHECK_OK(ct_tensor_from_data(1, s1, CT_F32, v, &f));
    int64_t got[2] = {-1, -1};
    CHECK_OK(ct_argmax(a, 1, false, &o));
    if (o) CHECK_OK(ct_tensor_to_host(o, got, sizeof got));
    CHECK(got[0] == 1 && got[1] == 0);
    ct_tensor_free(o);
    o = NULL;
    CHECK_OK(ct_argmin(a, -1, true, &o));
    CHECK(o && ct_tensor_ndim(o) == 2 && ct_tensor_dim(o, 1) == 1);
    if (o) CHECK_OK(ct_tensor_to_host(o, got, sizeof got));
    CHECK(got[0] == 0 && got[1] == 1);
    ct_tensor_free(o);
    o = NULL;
    CHECK_OK(ct_argmin(a, CT_ALL_DIMS, false, &o)); /* flat index */
    CHECK(o && ct_tensor_ndim(o) == 0);
    if (o) CHECK_OK(ct_tensor_to_host(o, got, sizeof(int64_t)));
    CHECK(got[0] == 5);
    ct_tensor_free(o);
    o = NULL;
    CHECK_OK(ct_argmax(a, CT_ALL_DIMS, true, &o));
    CHECK(o && ct_tensor_ndim(o) == 2 && ct_tensor_numel(o) == 1);
    ct_tensor_free(o);
    /* a long row of equal values: the SIMD path must still pick index 0 */
    int64_t sl[1] = {1000};
    CHECK_OK(ct_full(1, sl, CT_F32, 2.5, &o));
    ct_tensor *am = NULL;
    CHECK_OK(ct_argmax(o, 0, false, &am));
    if (am) CHECK_OK(ct_tensor_to_host(am, got, sizeof(int64_t)));
    CHECK(got[0] == 0);
    ct_tensor_free(am);
    ct_tensor_free(o);
    ct_tensor_free(a);
    ct_tensor_free(f);
}

static void test_empty(void)
{
    int64_t s[2] = {3, 0};
    ct_tensor *a = NULL, *o = NULL;
    CHECK_OK(ct_zeros(2, s, CT_F32, &a));
    int d1 = 1, d0 = 0;
    double want_sum[3] = {0, 0, 0}, want_prod[3] = {1, 1, 1};
    CHECK_OK(ct_sum(a, &d1, 1, false, &o));
    double *v = o ? th_values(o) : NULL;
    CHECK(o && ct_tensor_numel(o) == 3 && th_allclose(v, want_sum, 3, 0, 0));
    free(v);
    ct_tensor_free(o);
    o = NULL;
    CHECK_OK(ct_prod(a, &d1, 1, false, &o));
    v = o ? th_values(o) : NULL;
    CHECK(o && th_allclose(v, want_prod, 3, 0, 0));
    free(v);
    ct_tensor_free(o);
    o = NULL;
    CHECK_OK(ct_mean(a, &d1, 1, false, &o));
    v = o ? th_values(o) : NULL;
    CHECK(v && isnan(v[0]) && isnan(v[2]));
    free(v);
    ct_tensor_free(o);
    o = NULL;
    CHECK_OK(ct_max(a, &d0, 1, false, &o)); /* reducing the non-empty dim: empty result */
    CHECK(o && ct_tensor_numel(o) == 0);
    ct_tensor_free(o);
    o = NULL;
    CHECK_STATUS(ct_max(a, &d1, 1, false, &o), CT_ERR_SHAPE);
    CHECK_STATUS(ct_min(a, NULL, 0, false, &o), CT_ERR_SHAPE);
    CHECK_STATUS(ct_argmax(a, 1, false, &o), CT_ERR_SHAPE);
    CHECK_STATUS(ct_argmin(a, CT_ALL_DIMS, false, &o), CT_ERR_SHAPE);
    CHECK(o == NULL);
    /* 0-d input: every reduction is the value itself */
    ct_tensor *sc = NULL;
    CHECK_OK(ct_full(0, NULL, CT_F64, 4.0, &sc));
    int dz = 0;
    CHECK_OK(ct_sum(sc, &dz, 1, false, &o));
    double x = 0;
    if (o) CHECK_OK(ct_tensor_item(o, 0, &x));
    CHECK(x == 4.0 && o && ct_tensor_ndim(o) == 0);
    ct_tensor_free(o);
    o = NULL;
    CHECK_OK(ct_argmax(sc, CT_ALL_DIMS, false, &o));
    if (o) CHECK_OK(ct_tensor_item(o, 0, &x));
    CHECK(x == 0.0);
    ct_tensor_free(o);
    ct_tensor_free(sc);
    ct_tensor_free(a);
}

/* var/std over a size-1 dim: the population form (unbiased=false) is exactly 0, the
 * sample form divides 0 by 0 and is NaN, as in PyTorch. Checked value by value, since
 * th_allclose counts NaN == NaN as a match and would let a NaN population var through. */
static void test_var_size1(void)
{
    static const ct_dtype dts[4] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    static const int64_t shapes[3][3] = {{3, 1, 5}, {5, 1, 1}, {1, 1, 7}};
    static const int dims[3] = {1, 1, 0};
    th_rng r = {77};
    for (int k = 0; k < 4; k++)
        for (int s = 0; s < 3; s++) {
            ct_tensor *a = th_random(&r, 3, shapes[s], dts[k], -2, 2);
            for (int op = 0; op < 2; op++)
                for (int unbiased = 0; unbiased < 2; unbiased++) {
                    ct_tensor *o = NULL;
                    CHECK_OK(op ? ct_std(a, &dims[s], 1, unbiased, false, &o)
                                : ct_var(a, &dims[s], 1, unbiased, false, &o));
                    if (!o) continue;
                    double *v = th_values(o);
                    int64_t n = ct_tensor_numel(o), bad = 0;
                    for (int64_t i = 0; i < n; i++) bad += unbiased ? !isnan(v[i]) : v[i] != 0.0;
                    CHECK_MSG(bad == 0, "%s %s unbiased=%d over dim %d of [%lld, %lld, %lld]: %lld of %lld wrong (first %g)",
                              op ? "std" : "var", ct_dtype_name(dts[k]), unbiased, dims[s], (long long)shapes[s][0],
                              (long long)shapes[s][1], (long long)shapes[s][2], (long long)bad, (long long)n, v[0]);
                    free(v);
                    ct_tensor_free(o);
                }
            ct_tensor_free(a);
        }
}

/* all_reduce over a single process (no process group yet) leaves the values as they are,
 * for every reduce op, and still checks its arguments. */
static void test_all_reduce_single(void)
{
    th_rng r = {5};
    int64_t shape[2] = {3, 7};
    ct_tensor *t = th_random(&r, 2, shape, CT_F32, -3, 3);
    double *before = th_values(t);
    for (int op = CT_REDUCE_SUM; op <= CT_REDUCE_AVG; op++) {
        CHECK_OK(ct_all_reduce(t, (ct_reduce_op)op));
        double *after = th_values(t);
        CHECK_MSG(th_allclose(after, before, 21, 0, 0), "op %d changed the tensor", op);
        free(after);
    }
    CHECK_STATUS(ct_all_reduce(t, (ct_reduce_op)(CT_REDUCE_AVG + 1)), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_all_reduce(NULL, CT_REDUCE_SUM), CT_ERR_INVALID_ARG);
    free(before);
    ct_tensor_free(t);
}

static void test_errors(void)
{
    int64_t s[2] = {2, 3};
    ct_tensor *a = NULL, *z = NULL, *o = NULL;
    CHECK_OK(ct_ones(2, s, CT_F32, &a));
    CHECK_OK(ct_zeros(2, s, CT_C64, &z));
    int dup[2] = {1, -1}, oor[1] = {2}, neg[1] = {-3};
    CHECK_STATUS(ct_sum(a, dup, 2, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_sum(a, oor, 1, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_mean(a, neg, 1, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_sum(a, oor, -1, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_argmax(a, 2, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_norm(a, 0.0, NULL, 0, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_norm(a, -1.0, NULL, 0, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_norm(a, NAN, NULL, 0, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_max(z, NULL, 0, false, &o), CT_ERR_DTYPE);
    CHECK_STATUS(ct_argmax(z, 0, false, &o), CT_ERR_DTYPE);
    CHECK_STATUS(ct_var(z, NULL, 0, true, false, &o), CT_ERR_DTYPE);
    CHECK_STATUS(ct_sum(NULL, NULL, 0, false, &o), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_sum(a, NULL, 0, false, NULL), CT_ERR_INVALID_ARG);
    CHECK(o == NULL);
    /* complex sum is supported */
    CHECK_OK(ct_sum(z, NULL, 0, false, &o));
    CHECK(o && ct_tensor_dtype(o) == CT_C64);
    ct_tensor_free(o);
    ct_tensor_free(a);
    ct_tensor_free(z);
}

int main(void)
{
    RUN(test_float_ops);
    RUN(test_fast_paths);
    RUN(test_half);
    RUN(test_int_and_bool);
    RUN(test_argmax_ties);
    RUN(test_empty);
    RUN(test_var_size1);
    RUN(test_all_reduce_single);
    RUN(test_errors);
    return th_finish();
}
