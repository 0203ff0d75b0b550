/* Creation ops, from_data/from_blob ownership, the counter-based RNG, and the
 * host accessors (item, format, to_host, residency). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static double item(const ct_tensor *t, int64_t i)
{
    double v = NAN;
    CHECK_OK(ct_tensor_item(t, i, &v));
    return v;
}

static void test_fill(void)
{
    static const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_BOOL, CT_C64, CT_I8};
    int64_t shape[3] = {3, 1, 5};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        ct_tensor *z = NULL, *o = NULL, *f = NULL;
        CHECK_OK(ct_zeros(3, shape, dts[i], &z));
        CHECK_OK(ct_ones(3, shape, dts[i], &o));
        CHECK_OK(ct_full(3, shape, dts[i], -2.0, &f));
        if (!z || !o || !f) continue;
        CHECK(ct_tensor_dtype(z) == dts[i] && ct_tensor_numel(z) == 15 && ct_tensor_is_contiguous(z));
        double fv = dts[i] == CT_BOOL ? 1.0 : -2.0; /* any non-zero is true */
        for (int k = 0; k < 15; k++) CHECK(item(z, k) == 0 && item(o, k) == 1 && item(f, k) == fv);
        ct_tensor_free(z);
        ct_tensor_free(o);
        ct_tensor_free(f);
    }
    /* rounding of the fill value follows the dtype */
    ct_tensor *h = NULL, *i8 = NULL, *big = NULL;
    CHECK_OK(ct_full(0, NULL, CT_F16, 0.1, &h));
    CHECK(h && item(h, 0) == ct_f16_to_f32(ct_f32_to_f16(0.1f)));
    CHECK_OK(ct_full(0, NULL, CT_I8, -7.9, &i8));
    CHECK(i8 && item(i8, 0) == -7);
    /* large enough to be split over the thread pool */
    int64_t n[1] = {100003};
    CHECK_OK(ct_full(1, n, CT_F64, 3.25, &big));
    if (big) {
        const double *p = NULL;
        CHECK_OK(ct_tensor_data(big, (const void **)&p));
        int bad = 0;
        for (int64_t k = 0; p && k < n[0]; k++) bad += p[k] != 3.25;
        CHECK(bad == 0);
    }
    /* size-0 and 8-d shapes */
    int64_t z0[2] = {4, 0}, d8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
    ct_tensor *e = NULL, *t8 = NULL;
    CHECK_OK(ct_zeros(2, z0, CT_F32, &e));
    CHECK(e && ct_tensor_numel(e) == 0 && ct_tensor_nbytes(e) == 0);
    CHECK_OK(ct_ones(8, d8, CT_F32, &t8));
    CHECK(t8 && ct_tensor_numel(t8) == 16 && item(t8, 15) == 1);
    ct_tensor_free(h);
    ct_tensor_free(i8);
    ct_tensor_free(big);
    ct_tensor_free(e);
    ct_tensor_free(t8);
}

static void check_range(const ct_tensor *t, int64_t n, double start, double step, double tol)
{
    CHECK_MSG(ct_tensor_ndim(t) == 1 && ct_tensor_numel(t) == n, "numel %lld want %lld", (long long)ct_tensor_numel(t), (long long)n);
    for (int64_t i = 0; i < n && i < ct_tensor_numel(t); i++) CHECK_NEAR(item(t, i), start + (double)i * step, tol);
}

static void test_arange_linspace_eye(void)
{
    ct_tensor *t = NULL;
    /* counts written out by hand (torch.arange agrees): [start, end) */
    struct { double a, b, s; int64_t n; ct_dtype dt; } cases[] = {
        {0, 5, 1, 5, CT_F32},     {5, 0, -1.5, 4, CT_F32}, {0, 1, 0.1, 10, CT_F64}, {0, 0.3, 0.1, 3, CT_F64},
        {-3, 3, 2, 3, CT_I64},    {2, 2, 1, 0, CT_F32},    {3, 0, 1, 0, CT_I32},    {0, 10, 3, 4, CT_I32},
        {1, -1, -0.25, 8, CT_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        t = NULL;
        CHECK_OK(ct_arange(cases[i].a, cases[i].b, cases[i].s, cases[i].dt, &t));
        /* f32 holds these to 1 ulp of ~10; f64 exact up to the multiply's rounding */
        if (t) check_range(t, cases[i].n, cases[i].a, cases[i].s, cases[i].dt == CT_F64 ? 1e-12 : 1e-6);
        ct_tensor_free(t);
    }
    CHECK_STATUS(ct_arange(0, 1, 0, CT_F32, &t), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_arange(0, NAN, 1, CT_F32, &t), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_arange(0, INFINITY, 1, CT_F32, &t), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_arange(0, 1e300, 1e-300, CT_F32, &t), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_arange(0, 4, 1, CT_Q8_0, &t), CT_ERR_DTYPE);
    CHECK_STATUS(ct_arange(0, 4, 1, CT_F32, NULL), CT_ERR_INVALID_ARG);

    /* linspace: endpoints included; 1 step gives start; 0 steps is empty */
    t = NULL;
    CHECK_OK(ct_linspace(0, 1, 5, CT_F32, &t));
    if (t) check_range(t, 5, 0, 0.25, 0);
    ct_tensor_free(t);
    t = NULL;
    CHECK_OK(ct_linspace(-1, 2, 7, CT_F64, &t));
    if (t) {
        check_range(t, 7, -1, 0.5, 1e-15);
        CHECK(item(t, 6) == 2.0);
    }
    ct_tensor_free(t);
    t = NULL;
    CHECK_OK(ct_linspace(3, 9, 1, CT_F32, &t));
    if (t) check_range(t, 1, 3, 0, 0);
    ct_tensor_free(t);
    t = NULL;
    CHECK_OK(ct_linspace(3, 9, 0, CT_F32, &t));
    if (t) CHECK(ct_tensor_numel(t) == 0 && ct_tensor_ndim(t) == 1);
    ct_tensor_free(t);
    CHECK_STATUS(ct_linspace(0, 1, -1, CT_F32, &t), CT_ERR_INVALID_ARG);

    /* eye, square and not */
    static const int64_t dims[][2] = {{3, 5}, {4, 2}, {3, 3}, {0, 3}, {1, 1}};
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) {
        t = NULL;
        CHECK_OK(ct_eye(dims[i][0], dims[i][1], i % 2 ? CT_I32 : CT_F32, &t));
        if (!t) continue;
        CHECK(ct_tensor_shape(t)[0] == dims[i][0] && ct_tensor_shape(t)[1] == dims[i][1]);
        for (int64_t r = 0; r < dims[i][0]; r++)
            for (int64_t c = 0; c < dims[i][1]; c++) CHECK(item(t, r * dims[i][1] + c) == (r == c));
        ct_tensor_free(t);
    }
    CHECK_STATUS(ct_eye(-1, 3, CT_F32, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_eye(3, -3, CT_F32, &t), CT_ERR_SHAPE);
}

static int g_deleted;
static void *g_deleted_ptr;
static void count_delete(void *data, void *ctx)
{
    g_deleted++;
    g_deleted_ptr = data;
    CHECK(ctx == &g_deleted);
}

static void test_from_data_blob(void)
{
    int64_t s[2] = {2, 3};
    int32_t src[6] = {1, -2, 3, -4, 5, -6};
    ct_tensor *t = NULL;
    CHECK_OK(ct_tensor_from_data(2, s, CT_I32, src, &t));
    src[0] = 100; /* copied: later writes to the source do not show */
    CHECK(t && item(t, 0) == 1 && item(t, 5) == -6);
    ct_tensor_free(t);

    float *blob = malloc(6 * sizeof(float));
    for (int i = 0; i < 6; i++) blob[i] = (float)i;
    ct_tensor *b = NULL, *tr = NULL, *al = NULL;
    g_deleted = 0;
    CHECK_OK(ct_tensor_from_blob(2, s, CT_F32, blob, count_delete, &g_deleted, &b));
    if (b) {
        const void *p = NULL;
        CHECK_OK(ct_tensor_data(b, &p));
        CHECK(p == blob); /* no copy */
        blob[4] = 40.0f;  /* shared */
        CHECK(item(b, 4) == 40.0);
        CHECK_OK(ct_transpose(b, 0, 1, &tr));
        CHECK_OK(ct_alias(tr, &al));
        ct_tensor_free(b);
        CHECK(g_deleted == 0);
        ct_tensor_free(tr);
        CHECK(g_deleted == 0);
        CHECK(item(al, 1) == 3.0);
        ct_tensor_free(al);
        CHECK(g_deleted == 1 && g_deleted_ptr == blob);
    }
    free(blob);
    /* a NULL deleter: the caller keeps the memory */
    float keep[6] = {0};
    CHECK_OK(ct_tensor_from_blob(2, s, CT_F32, keep, NULL, NULL, &b));
    ct_tensor_free(b);
    CHECK(g_deleted == 1);
    /* quantized data of whole blocks is fine (rows of 32 for q8_0) */
    int64_t q[2] = {2, 32};
    unsigned char qb[2 * 34] = {0};
    CHECK_OK(ct_tensor_from_data(2, q, CT_Q8_0, qb, &t));
    CHECK(t && ct_tensor_nbytes(t) == sizeof qb);
    double v;
    CHECK_STATUS(ct_tensor_item(t, 0, &v), CT_ERR_DTYPE);
    ct_tensor *qv = NULL;
    int64_t split[3] = {2, 2, 16}, merged[1] = {64};
    CHECK_STATUS(ct_view(t, 3, split, &qv), CT_ERR_SHAPE);
    CHECK_OK(ct_view(t, 1, merged, &qv));
    ct_tensor_free(qv);
    qv = NULL;
    CHECK_STATUS(ct_transpose(t, 0, 1, &qv), CT_ERR_SHAPE);
    CHECK_STATUS(ct_narrow(t, 1, 0, 16, &qv), CT_ERR_SHAPE);
    CHECK_OK(ct_select(t, 0, 1, &qv));
    ct_tensor_free(qv);
    ct_tensor_free(t);
    /* errors */
    int64_t q_bad[2] = {2, 30};
    CHECK_STATUS(ct_tensor_from_data(2, q_bad, CT_Q8_0, qb, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_tensor_from_data(0, NULL, CT_Q8_0, qb, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_tensor_from_data(2, s, CT_F32, NULL, &t), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_from_data(2, s, CT_F32, src, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_from_blob(2, s, CT_F32, NULL, NULL, NULL, &t), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_from_blob(2, s, CT_F32, keep, NULL, NULL, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_from_blob(2, s, CT_DTYPE_COUNT, keep, NULL, NULL, &t), CT_ERR_DTYPE);
    /* an empty tensor may have no data */
    int64_t z[1] = {0};
    CHECK_OK(ct_tensor_from_data(1, z, CT_F32, NULL, &t));
    ct_tensor_free(t);
}

static void test_rng(void)
{
    int64_t s1[1] = {1000}, s2[2] = {10, 100};
    ct_tensor *a = NULL, *b = NULL, *c = NULL, *an = NULL, *bn = NULL;
    CHECK_OK(ct_rand(1, s1, CT_F32, 1234, &a));
    CHECK_OK(ct_rand(2, s2, CT_F32, 1234, &b));
    CHECK_OK(ct_rand(1, s1, CT_F32, 1235, &c));
    CHECK_OK(ct_randn(1, s1, CT_F32, 1234, &an));
    CHECK_OK(ct_randn(2, s2, CT_F32, 1234, &bn));
    if (a && b && c && an && bn) {
        const float *pa, *pb, *pc, *pan, *pbn;
        CHECK_OK(ct_tensor_data(a, (const void **)&pa));
        CHECK_OK(ct_tensor_data(b, (const void **)&pb));
        CHECK_OK(ct_tensor_data(c, (const void **)&pc));
        CHECK_OK(ct_tensor_data(an, (const void **)&pan));
        CHECK_OK(ct_tensor_data(bn, (const void **)&pbn));
        CHECK(memcmp(pa, pb, 4000) == 0);
        CHECK(memcmp(pan, pbn, 4000) == 0);
        int same = 0;
        for (int i = 0; i < 1000; i++) same += pa[i] == pc[i];
        CHECK_MSG(same < 5, "%d of 1000 equal across seeds", same);
        /* a prefix is the same stream: element i depends on (seed, i) only */
        ct_tensor *p = NULL;
        int64_t s7[1] = {7};
        CHECK_OK(ct_rand(1, s7, CT_F32, 1234, &p));
        for (int i = 0; p && i < 7; i++) CHECK(item(p, i) == pa[i]);
        ct_tensor_free(p);
        /* f64 output carries the same f32 draws */
        CHECK_OK(ct_rand(1, s1, CT_F64, 1234, &p));
        for (int i = 0; p && i < 1000; i += 97) CHECK(item(p, i) == pa[i]);
        ct_tensor_free(p);
    }
    ct_tensor *all[] = {a, b, c, an, bn};
    for (int i = 0; i < 5; i++) ct_tensor_free(all[i]);

    /* statistics over n draws: each moment within 5 standard errors of its exact value
     * (a false failure has probability < 1e-6 per check) */
    const int64_t n = 200000;
    int64_t sn[1] = {n};
    ct_tensor *u = NULL, *g = NULL;
    CHECK_OK(ct_rand(1, sn, CT_F32, 99, &u));
    CHECK_OK(ct_randn(1, sn, CT_F32, 99, &g));
    if (u && g) {
        const float *pu, *pg;
        CHECK_OK(ct_tensor_data(u, (const void **)&pu));
        CHECK_OK(ct_tensor_data(g, (const void **)&pg));
        double m1 = 0, m2 = 0, g1 = 0, g2 = 0, in1 = 0, lo = 1, hi = 0;
        int bins[10] = {0};
        for (int64_t i = 0; i < n; i++) {
            double x = pu[i], y = pg[i];
            m1 += x;
            m2 += x * x;
            lo = x < lo ? x : lo;
            hi = x > hi ? x : hi;
            if (x >= 0 && x < 1) bins[(int)(x * 10)]++;
            g1 += y;
            g2 += y * y;
            in1 += fabs(y) < 1;
        }
        CHECK(lo >= 0 && hi < 1);
        CHECK_NEAR(m1 / n, 0.5, 5 * sqrt(1.0 / 12 / n));
        CHECK_NEAR(m2 / n, 1.0 / 3, 5 * sqrt(4.0 / 45 / n));          /* Var(U^2) = 1/5 - 1/9 */
        for (int k = 0; k < 10; k++) CHECK_NEAR(bins[k] / (double)n, 0.1, 5 * sqrt(0.09 / n));
        CHECK_NEAR(g1 / n, 0, 5 * sqrt(1.0 / n));
        CHECK_NEAR(g2 / n, 1, 5 * sqrt(2.0 / n));                     /* Var(Z^2) = 2 */
        CHECK_NEAR(in1 / n, 0.682689492, 5 * sqrt(0.2166 / n));       /* p(1-p) for P(|Z|<1) */
    }
    ct_tensor_free(u);
    ct_tensor_free(g);
    ct_tensor *x = NULL;
    CHECK_STATUS(ct_rand(1, s1, CT_I32, 1, &x), CT_ERR_DTYPE);
    CHECK_STATUS(ct_randn(1, s1, CT_Q4_K, 1, &x), CT_ERR_DTYPE);
    CHECK_STATUS(ct_rand(1, s1, CT_C64, 1, &x), CT_ERR_DTYPE);
    CHECK_STATUS(ct_rand(1, s1, CT_F32, 1, NULL), CT_ERR_INVALID_ARG);
}

/* U[0,1) must hold after rounding to the output dtype: f32 draws just below 1
 * round up to 1.0 in f16 (ulp 2^-11) and bf16 (ulp 2^-8). */
static void test_rand_half_below_one(void)
{
    static const ct_dtype halfs[2] = {CT_F16, CT_BF16};
    int64_t sn[1] = {100000};
    for (int k = 0; k < 2; k++) {
        ct_tensor *h = NULL;
        CHECK_OK(ct_rand(1, sn, halfs[k], 5, &h));
        double mx = 0;
        for (int64_t i = 0; h && i < sn[0]; i++) {
            double v = item(h, i);
            mx = v > mx ? v : mx;
        }
        CHECK_MSG(mx < 1.0, "%s rand reached %g", ct_dtype_name(halfs[k]), mx);
        ct_tensor_free(h);
    }
}

static void test_accessors(void)
{
    int64_t s[3] = {2, 3, 4};
    ct_tensor *t = NULL, *tr = NULL;
    CHECK_OK(ct_arange(0, 24, 1, CT_F32, &t));
    ct_tensor *v = NULL;
    CHECK_OK(ct_view(t, 3, s, &v));
    CHECK(ct_tensor_dim(v, 0) == 2 && ct_tensor_dim(v, -1) == 4 && ct_tensor_dim(v, 3) == -1 && ct_tensor_dim(v, -4) == -1);
    CHECK(ct_tensor_nbytes(v) == 96);
    CHECK_OK(ct_transpose(v, 0, 2, &tr));
    /* item walks strides */
    CHECK(item(tr, 1) == 12 && item(tr, 2) == 4);
    double d;
    CHECK_STATUS(ct_tensor_item(tr, 24, &d), CT_ERR_RANGE);
    CHECK_STATUS(ct_tensor_item(tr, -1, &d), CT_ERR_RANGE);
    CHECK_STATUS(ct_tensor_item(tr, 0, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_item(NULL, 0, &d), CT_ERR_INVALID_ARG);
    /* format */
    char buf[256];
    const char *f = ct_tensor_format(tr, 3, buf, sizeof buf);
    CHECK_MSG(strstr(f, "f32") && strstr(f, "[4, 3, 2]") && strstr(f, "0, 12, 4") && strstr(f, "..."), "format: %s", f);
    f = ct_tensor_format(tr, 100, buf, sizeof buf);
    CHECK_MSG(!strstr(f, "...") && strstr(f, "23"), "format: %s", f);
    char tiny[8];
    f = ct_tensor_format(tr, 100, tiny, sizeof tiny);
    CHECK(strlen(f) < sizeof tiny);
    CHECK(!strcmp(ct_tensor_format(NULL, 3, buf, sizeof buf), "(null)"));
    CHECK(!strcmp(ct_tensor_format(tr, 3, NULL, 0), ""));
    /* residency of host tensors */
    char res[64];
    CHECK(!strcmp(ct_tensor_residency(tr, res, sizeof res), "cpu"));
    CHECK(!strcmp(ct_tensor_residency(NULL, res, sizeof res), ""));
    CHECK(!strcmp(ct_tensor_residency(tr, res, 2), "c") || strlen(ct_tensor_residency(tr, res, 2)) < 2);
    /* NULL-tolerant accessors */
    CHECK(ct_tensor_ndim(NULL) == 0 && ct_tensor_numel(NULL) == 0 && ct_tensor_shape(NULL) == NULL && ct_tensor_nbytes(NULL) == 0);
    CHECK(!ct_tensor_is_contiguous(NULL) && ct_tensor_is_contiguous(v) && !ct_tensor_is_contiguous(tr));
    ct_tensor_free(NULL);
    const void *p;
    void *pm;
    CHECK_STATUS(ct_tensor_data(NULL, &p), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_data(t, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_data_mut(NULL, &pm), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_data_mut(t, NULL), CT_ERR_INVALID_ARG);
    /* an empty tensor (never written) still hands out a host pointer */
    ct_tensor *e = NULL;
    CHECK_OK(ct_empty(3, s, CT_F32, &e));
    CHECK_OK(ct_tensor_data_mut(e, &pm));
    ct_tensor_free(e);
    ct_tensor_free(t);
    ct_tensor_free(v);
    ct_tensor_free(tr);
}

static void test_creation_errors(void)
{
    ct_tensor *t = NULL;
    int64_t s[2] = {2, 3}, neg[2] = {2, -1}, nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_STATUS(ct_zeros(2, neg, CT_F32, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_zeros(9, nine, CT_F32, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_zeros(-1, s, CT_F32, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_zeros(2, NULL, CT_F32, &t), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_zeros(2, s, CT_F32, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_zeros(2, s, CT_DTYPE_COUNT, &t), CT_ERR_DTYPE);
    CHECK_STATUS(ct_zeros(2, s, (ct_dtype)-3, &t), CT_ERR_DTYPE);
    CHECK_STATUS(ct_full(2, s, CT_Q4_K, 1, &t), CT_ERR_DTYPE);
    CHECK_STATUS(ct_ones(2, s, CT_Q8_0, &t), CT_ERR_DTYPE);
    CHECK_STATUS(ct_empty(2, neg, CT_F32, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_empty(2, s, CT_F32, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_empty(2, s, CT_Q4_K, &t), CT_ERR_SHAPE); /* rows of 3 are not whole 256-blocks */
    CHECK_STATUS(ct_tensor_from_data(9, nine, CT_F32, s, &t), CT_ERR_SHAPE);
    CHECK_STATUS(ct_tensor_from_data(2, neg, CT_F32, s, &t), CT_ERR_SHAPE);
    CHECK(t == NULL);
}

int main(void)
{
    RUN(test_fill);
    RUN(test_arange_linspace_eye);
    RUN(test_from_data_blob);
    RUN(test_rng);
    RUN(test_rand_half_below_one);
    RUN(test_accessors);
    RUN(test_creation_errors);
    return th_finish();
}
