/* matmul / matvec / outer / linear against plain double-precision references. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gemm.h"
#include "harness.h"
#include "quant/quant.h"

/* torch.matmul in double, written independently of the library's frontend. */
static double *ref_matmul(const double *av, int na, const int64_t *sa, const double *bv, int nb, const int64_t *sb,
                          int *nout, int64_t *sout)
{
    int64_t M = na == 1 ? 1 : sa[na - 2], K = sa[na - 1], N = nb == 1 ? 1 : sb[nb - 1];
    int ba = na > 2 ? na - 2 : 0, bb = nb > 2 ? nb - 2 : 0, nbat = ba > bb ? ba : bb;
    int64_t bshape[8];
    for (int i = 0; i < nbat; i++) {
        int ia = i - (nbat - ba), ib = i - (nbat - bb);
        int64_t da = ia >= 0 ? sa[ia] : 1, db = ib >= 0 ? sb[ib] : 1;
        bshape[i] = da == 1 ? db : da;
    }
    int64_t nbatch = 1;
    for (int i = 0; i < nbat; i++) nbatch *= bshape[i];
    *nout = 0;
    for (int i = 0; i < nbat; i++) sout[(*nout)++] = bshape[i];
    if (na > 1) sout[(*nout)++] = M;
    if (nb > 1) sout[(*nout)++] = N;
    double *c = calloc((size_t)(nbatch * M * N + 1), sizeof(double));
    for (int64_t bi = 0; bi < nbatch; bi++) {
        int64_t oa = 0, ob = 0, rem = bi, mula = M * K, mulb = K * N;
        for (int i = nbat - 1; i >= 0; i--) {
            int64_t idx = rem % bshape[i];
            rem /= bshape[i];
            int ia = i - (nbat - ba), ib = i - (nbat - bb);
            if (ia >= 0) {
                oa += (sa[ia] == 1 ? 0 : idx) * mula;
                mula *= sa[ia];
            }
            if (ib >= 0) {
                ob += (sb[ib] == 1 ? 0 : idx) * mulb;
                mulb *= sb[ib];
            }
        }
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0;
                for (int64_t k = 0; k < K; k++) s += av[oa + m * K + k] * bv[ob + k * N + n];
                c[(bi * M + m) * N + n] = s;
            }
    }
    return c;
}

static void check_matmul(const ct_tensor *a, const ct_tensor *b, double atol, double rtol)
{
    ct_tensor *c = NULL;
    CHECK_OK(ct_matmul(a, b, &c));
    if (!c) return;
    double *av = th_values(a), *bv = th_values(b);
    int nout;
    int64_t sout[8];
    double *want = ref_matmul(av, ct_tensor_ndim(a), ct_tensor_shape(a), bv, ct_tensor_ndim(b), ct_tensor_shape(b),
                              &nout, sout);
    CHECK_MSG(ct_tensor_ndim(c) == nout && (nout == 0 || !memcmp(ct_tensor_shape(c), sout, sizeof(int64_t) * (size_t)nout)),
              "result shape (ndim %d) differs from torch's (ndim %d)", ct_tensor_ndim(c), nout);
    double *got = th_values(c);
    CHECK(th_allclose(got, want, ct_tensor_numel(c), atol, rtol));
    free(av);
    free(bv);
    free(want);
    free(got);
    ct_tensor_free(c);
}

static ct_tensor *rnd(th_rng *r, int nd, const int64_t *s, ct_dtype t)
{
    return th_random(r, nd, s, t, -1, 1);
}

/* Shape pairs covering every rank combination, broadcast batches included. */
static void test_matmul_ranks(void)
{
    static const struct { int na; int64_t sa[4]; int nb; int64_t sb[4]; } cases[] = {
        {1, {7}, 1, {7}},           {1, {5}, 2, {5, 3}},       {2, {4, 5}, 1, {5}},     {2, {4, 5}, 2, {5, 6}},
        {4, {2, 1, 3, 4}, 3, {5, 4, 2}}, {1, {4}, 3, {2, 4, 3}}, {3, {2, 3, 4}, 1, {4}}, {3, {1, 3, 4}, 2, {4, 2}},
        {2, {3, 4}, 3, {2, 4, 5}},  {3, {3, 1, 4}, 3, {1, 4, 2}}, {2, {1, 1}, 2, {1, 1}},
    };
    th_rng r = {1};
    for (int dt = 0; dt < 2; dt++) {
        ct_dtype t = dt ? CT_F32 : CT_F64;
        /* inputs in [-1, 1], K <= 7: f32 products and sums stay within a few ulps of ~K */
        double tol = t == CT_F32 ? 1e-5 : 1e-12;
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            ct_tensor *a = rnd(&r, cases[i].na, cases[i].sa, t), *b = rnd(&r, cases[i].nb, cases[i].sb, t);
            check_matmul(a, b, tol, tol);
            ct_tensor_free(a);
            ct_tensor_free(b);
        }
    }
}

/* Transposed, sliced and expanded operands (BLAS Trans flags, packing, stride 0). */
static void test_matmul_views(void)
{
    th_rng r = {2};
    for (int dt = 0; dt < 2; dt++) {
        ct_dtype t = dt ? CT_F32 : CT_F64;
        double tol = t == CT_F32 ? 3e-5 : 1e-12; /* K <= 40 terms of |x| <= 1 */
        int64_t s1[2] = {40, 30}, s2[2] = {40, 20}, s3[3] = {3, 30, 40};
        ct_tensor *a0 = rnd(&r, 2, s1, t), *b0 = rnd(&r, 2, s2, t), *c0 = rnd(&r, 3, s3, t);
        ct_tensor *at = NULL, *bs = NULL, *as = NULL, *ct = NULL, *bt = NULL, *ex = NULL, *col = NULL;
        CHECK_OK(ct_transpose(a0, 0, 1, &at));   /* [30, 40], column-major */
        CHECK_OK(ct_slice(b0, 1, 0, 20, 2, &bs)); /* [40, 10], column stride 2 */
        check_matmul(at, b0, tol, tol);
        check_matmul(at, bs, tol, tol);
        CHECK_OK(ct_slice(a0, 0, 1, 40, 3, &as)); /* [13, 30], row stride 90 */
        CHECK_OK(ct_transpose(b0, 0, 1, &bt));    /* [20, 40] */
        check_matmul(bt, a0, tol, tol);
        check_matmul(as, at, tol, tol);
        CHECK_OK(ct_transpose(c0, 1, 2, &ct)); /* [3, 40, 30] batch of transposed */
        check_matmul(ct, at, tol, tol);
        int64_t es[3] = {4, 30, 40};
        CHECK_OK(ct_select(c0, 0, 1, &col));
        CHECK_OK(ct_expand(col, 3, es, &ex)); /* stride-0 batch on the left operand */
        check_matmul(ex, b0, tol, tol);
        check_matmul(bt, ct, tol, tol);
        ct_tensor *v[] = {a0, b0, c0, at, bs, as, ct, bt, ex, col};
        for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) ct_tensor_free(v[i]);
    }
}

static void test_matmul_empty(void)
{
    th_rng r = {3};
    int64_t sa[2] = {3, 0}, sb[2] = {0, 4}, sz[2] = {0, 5}, s5[2] = {5, 2}, sbat[3] = {0, 2, 2};
    ct_tensor *a = rnd(&r, 2, sa, CT_F32), *b = rnd(&r, 2, sb, CT_F32), *c = NULL;
    CHECK_OK(ct_matmul(a, b, &c)); /* K = 0: zeros */
    if (c) {
        CHECK(ct_tensor_numel(c) == 12);
        double *v = th_values(c);
        double z[12] = {0};
        CHECK(th_allclose(v, z, 12, 0, 0));
        free(v);
    }
    ct_tensor_free(c);
    ct_tensor *m0 = rnd(&r, 2, sz, CT_F64), *m5 = rnd(&r, 2, s5, CT_F64), *bat = rnd(&r, 3, sbat, CT_F64);
    c = NULL;
    CHECK_OK(ct_matmul(m0, m5, &c)); /* M = 0 */
    CHECK(c && ct_tensor_dim(c, 0) == 0 && ct_tensor_dim(c, 1) == 2);
    ct_tensor_free(c);
    c = NULL;
    CHECK_OK(ct_matmul(bat, bat, &c)); /* empty batch */
    CHECK(c && ct_tensor_numel(c) == 0 && ct_tensor_ndim(c) == 3);
    ct_tensor_free(c);
    ct_tensor *i0 = NULL, *i1 = NULL;
    c = NULL;
    int64_t s0[1] = {0};
    CHECK_OK(ct_zeros(1, s0, CT_I32, &i0));
    CHECK_OK(ct_zeros(1, s0, CT_I32, &i1));
    CHECK_OK(ct_matmul(i0, i1, &c)); /* empty dot product: 0-d zero */
    double v = -1;
    CHECK(c && ct_tensor_ndim(c) == 0);
    if (c) CHECK_OK(ct_tensor_item(c, 0, &v));
    CHECK(v == 0);
    ct_tensor *all[] = {a, b, c, m0, m5, bat, i0, i1};
    for (size_t i = 0; i < 8; i++) ct_tensor_free(all[i]);
}

static void test_matmul_dtypes(void)
{
    th_rng r = {4};
    int64_t sa[3] = {2, 9, 33}, sb[2] = {33, 17};
    /* inputs are exactly representable in the dtype (th_values reads them back); the only
     * errors are f32 accumulation (~K ulps) and the final rounding: 2^-11 (f16), 2^-8 (bf16) */
    const struct { ct_dtype t; double tol; } fl[] = {{CT_F16, 2e-3}, {CT_BF16, 1e-2}};
    for (int i = 0; i < 2; i++) {
        ct_tensor *a = rnd(&r, 3, sa, fl[i].t), *b = rnd(&r, 2, sb, fl[i].t);
        check_matmul(a, b, fl[i].tol, fl[i].tol);
        ct_tensor *c = NULL;
        CHECK_OK(ct_matmul(a, b, &c));
        CHECK(c && ct_tensor_dtype(c) == fl[i].t);
        ct_tensor_free(c);
        ct_tensor_free(a);
        ct_tensor_free(b);
    }
    for (int i = 0; i < 2; i++) { /* integers: exact */
        ct_dtype t = i ? CT_I64 : CT_I32;
        ct_tensor *a = th_random(&r, 3, sa, t, -50, 50), *b = th_random(&r, 2, sb, t, -50, 50);
        check_matmul(a, b, 0, 0);
        ct_tensor_free(a);
        ct_tensor_free(b);
    }
    /* mixed f32 x f64 promotes to f64 */
    ct_tensor *a = rnd(&r, 3, sa, CT_F32), *b = rnd(&r, 2, sb, CT_F64), *c = NULL;
    CHECK_OK(ct_matmul(a, b, &c));
    CHECK(c && ct_tensor_dtype(c) == CT_F64);
    check_matmul(a, b, 1e-12, 1e-12);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(c);
}

static void test_matmul_c64(void)
{
    th_rng r = {5};
    int64_t M = 5, K = 7, N = 3;
    float av[5 * 7 * 2], bv[7 * 3 * 2];
    for (int i = 0; i < 70; i++) av[i] = (float)th_uniform(&r, -1, 1);
    for (int i = 0; i < 42; i++) bv[i] = (float)th_uniform(&r, -1, 1);
    int64_t sa[2] = {M, K}, sb[2] = {K, N};
    ct_tensor *a = NULL, *b = NULL, *c = NULL, *bt = NULL, *btt = NULL, *c2 = NULL;
    CHECK_OK(ct_tensor_from_data(2, sa, CT_C64, av, &a));
    CHECK_OK(ct_tensor_from_data(2, sb, CT_C64, bv, &b));
    CHECK_OK(ct_matmul(a, b, &c));
    /* transposed twice: a non-contiguous view of the same values */
    CHECK_OK(ct_transpose(b, 0, 1, &bt));
    CHECK_OK(ct_contiguous(bt, &btt));
    ct_tensor_free(bt);
    bt = NULL;
    CHECK_OK(ct_transpose(btt, 0, 1, &bt));
    CHECK_OK(ct_matmul(a, bt, &c2));
    float got[30], got2[30];
    CHECK_OK(ct_tensor_to_host(c, got, sizeof got));
    CHECK_OK(ct_tensor_to_host(c2, got2, sizeof got2));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double re = 0, im = 0;
            for (int64_t k = 0; k < K; k++) {
                double ar = av[2 * (m * K + k)], ai = av[2 * (m * K + k) + 1];
                double br = bv[2 * (k * N + n)], bi = bv[2 * (k * N + n) + 1];
                re += ar * br - ai * bi;
                im += ar * bi + ai * br;
            }
            /* 2K f32 terms of magnitude <= 2 */
            CHECK_NEAR(got[2 * (m * N + n)], re, 1e-5);
            CHECK_NEAR(got[2 * (m * N + n) + 1], im, 1e-5);
            CHECK_NEAR(got2[2 * (m * N + n)], re, 1e-5);
            CHECK_NEAR(got2[2 * (m * N + n) + 1], im, 1e-5);
        }
    ct_tensor *all[] = {a, b, c, bt, btt, c2};
    for (int i = 0; i < 6; i++) ct_tensor_free(all[i]);
}

static void test_matmul_errors(void)
{
    th_rng r = {6};
    int64_t s34[2] = {3, 4}, s35[2] = {3, 5}, b234[3] = {2, 3, 4}, b345[3] = {3, 4, 5};
    ct_tensor *a = rnd(&r, 2, s34, CT_F32), *b = rnd(&r, 2, s35, CT_F32), *c = NULL;
    ct_tensor *x = rnd(&r, 3, b234, CT_F32), *y = rnd(&r, 3, b345, CT_F32), *bl = NULL, *sc = NULL;
    CHECK_STATUS(ct_matmul(a, b, &c), CT_ERR_SHAPE);  /* inner sizes */
    CHECK_STATUS(ct_matmul(x, y, &c), CT_ERR_SHAPE);  /* batch 2 vs 3 */
    CHECK_OK(ct_full(0, NULL, CT_F32, 1.0, &sc));
    CHECK_STATUS(ct_matmul(sc, a, &c), CT_ERR_SHAPE); /* 0-d */
    CHECK_OK(ct_zeros(2, s34, CT_BOOL, &bl));
    ct_tensor *bt = NULL;
    CHECK_OK(ct_transpose(bl, 0, 1, &bt));
    CHECK_STATUS(ct_matmul(bl, bt, &c), CT_ERR_DTYPE);
    CHECK_STATUS(ct_matmul(NULL, a, &c), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_matmul(a, b, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_matvec(a, a, &c), CT_ERR_SHAPE);
    CHECK_STATUS(ct_outer(a, a, &c), CT_ERR_SHAPE);
    CHECK(c == NULL);
    ct_tensor *all[] = {a, b, x, y, bl, sc, bt};
    for (int i = 0; i < 7; i++) ct_tensor_free(all[i]);
}

static void test_matvec_outer(void)
{
    th_rng r = {7};
    int64_t sm[2] = {6, 9}, sv[1] = {9}, su[1] = {6};
    ct_tensor *m = rnd(&r, 2, sm, CT_F32), *v = rnd(&r, 1, sv, CT_F32), *u = rnd(&r, 1, su, CT_F64), *mt = NULL;
    ct_tensor *y = NULL, *o = NULL;
    CHECK_OK(ct_matvec(m, v, &y));
    CHECK(y && ct_tensor_ndim(y) == 1 && ct_tensor_dim(y, 0) == 6);
    check_matmul(m, v, 1e-5, 1e-5); /* 9 f32 terms */
    CHECK_OK(ct_transpose(m, 0, 1, &mt));
    check_matmul(mt, u, 1e-5, 1e-5); /* [9, 6] column-major @ [6]: gemv Trans */
    CHECK_OK(ct_outer(u, v, &o));
    if (o) {
        CHECK(ct_tensor_ndim(o) == 2 && ct_tensor_dim(o, 0) == 6 && ct_tensor_dim(o, 1) == 9);
        CHECK(ct_tensor_dtype(o) == CT_F64);
        double *uv = th_values(u), *vv = th_values(v), *ov = th_values(o);
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 9; j++) CHECK_NEAR(ov[i * 9 + j], uv[i] * vv[j], 1e-15);
        free(uv);
        free(vv);
        free(ov);
    }
    ct_tensor *all[] = {m, v, u, mt, y, o};
    for (int i = 0; i < 6; i++) ct_tensor_free(all[i]);
}

/* The built-in GEMM at every SIMD level, edge tiles, K blocks, strides, accumulate. */
static void test_builtin_gemm(void)
{
    th_rng r = {8};
    static const int64_t dims[][3] = {{1, 1, 1}, {6, 32, 5}, {13, 37, 300}, {7, 4100, 3}, {100, 50, 20}, {2, 3, 0}};
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) {
            fprintf(stderr, "  skipped SIMD level %d: this CPU lacks it (or CTORCH_SIMD caps it)\n", lvl);
            continue;
        }
        for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++) {
            int64_t M = dims[c][0], N = dims[c][1], K = dims[c][2];
            float *A = malloc(sizeof(float) * (size_t)(M * K + 1)), *B = malloc(sizeof(float) * (size_t)(K * N + 1));
            float *C = malloc(sizeof(float) * (size_t)(M * N));
            for (int64_t i = 0; i < M * K; i++) A[i] = (float)th_uniform(&r, -1, 1);
            for (int64_t i = 0; i < K * N; i++) B[i] = (float)th_uniform(&r, -1, 1);
            for (int trans = 0; trans < 2; trans++)
                for (int acc = 0; acc < 2; acc++) {
                    for (int64_t i = 0; i < M * N; i++) C[i] = 0.5f;
                    /* trans: read A as column-major [M, K] (A^T storage) and B as [N, K] */
                    int64_t rsa = trans ? 1 : K, csa = trans ? M : 1, rsb = trans ? 1 : N, csb = trans ? K : 1;
                    CHECK_OK(cpu_gemm_f32_builtin(M, N, K, A, rsa, csa, B, rsb, csb, C, N, acc));
                    double worst = 0;
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = 0; j < N; j++) {
                            double s = acc ? 0.5 : 0.0;
                            for (int64_t k = 0; k < K; k++) s += (double)A[i * rsa + k * csa] * B[k * rsb + j * csb];
                            double e = fabs(C[i * N + j] - s);
                            if (e > worst) worst = e;
                        }
                    /* K terms of |x| <= 1 in f32: |error| <= K * 2^-24 * K-ish; 1e-6 * (K + 1) is loose enough */
                    CHECK_MSG(worst <= 1e-6 * (double)(K + 1) * 4, "level %d %lldx%lldx%lld trans %d acc %d: err %g", lvl,
                              (long long)M, (long long)N, (long long)K, trans, acc, worst);
                }
            free(A);
            free(B);
            free(C);
        }
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
}

/* v rounded to bf16's 8 significant bits, ties to even (nearbyint, default rounding mode) */
static double round_bf16(double v)
{
    if (v == 0 || !isfinite(v)) return v;
    int e;
    double f = frexp(v, &e);
    return ldexp(nearbyint(ldexp(f, 8)), e - 8);
}

/* One case of test_amx_gemm: C (+)= A B^T with B f16 or bf16 [N, K], A [M, K] (trans: stored
 * as [K, M]), against double. bf16 B: A rounded to bf16, exact products, f32 sums. f16 B:
 * both operands split into two bf16 terms, each product off by at most ~2^-15 of itself
 * (gemm_amx.c); a missing cross term would be off by up to 2^-8. Returns the worst error
 * over its bound; non-finite outputs must match the reference's class and sign. bad: 1 puts
 * -inf into A, 2 a NaN into B. */
static double amx_case(th_rng *r, int64_t M, int64_t N, int64_t K, bool bf16, bool trans, bool acc, int bad)
{
    float *A = malloc(sizeof(float) * (size_t)(M * K)), *C = malloc(sizeof(float) * (size_t)(M * N));
    uint16_t *B = malloc(sizeof(uint16_t) * (size_t)(N * K));
    for (int64_t i = 0; i < M * K; i++) A[i] = (float)th_uniform(r, -1, 1);
    for (int64_t i = 0; i < N * K; i++) {
        float v = (float)th_uniform(r, -1, 1);
        B[i] = bf16 ? ct_f32_to_bf16(v) : ct_f32_to_f16(v);
    }
    int64_t rsa = trans ? 1 : K, csa = trans ? M : 1;
    if (bad == 1) A[3 * rsa + (K / 2) * csa] = -INFINITY;      /* row 3 of A */
    if (bad == 2) B[5 * K + K - 1] = bf16 ? 0x7FC0 : 0x7E00; /* column 5 of B: NaN */
    for (int64_t i = 0; i < M * N; i++) C[i] = 0.5f;
    CHECK_OK(cpu_gemm_amx_half(M, N, K, A, rsa, csa, B, K, bf16, C, N, acc));
    double worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = acc ? 0.5 : 0.0, sabs = 0;
            for (int64_t k = 0; k < K; k++) {
                double a = A[i * rsa + k * csa], b = bf16 ? ct_bf16_to_f32(B[j * K + k]) : ct_f16_to_f32(B[j * K + k]);
                s += (bf16 ? round_bf16(a) : a) * b;
                sabs += fabs(a * b);
            }
            double got = C[i * N + j];
            if (!isfinite(s)) {
                CHECK_MSG(isnan(s) ? isnan(got) : got == s, "amx %s %lldx%lldx%lld: C[%lld,%lld] = %g, want %g",
                          bf16 ? "bf16" : "f16", (long long)M, (long long)N, (long long)K, (long long)i, (long long)j, got, s);
                continue;
            }
            double bound = sabs * ((bf16 ? 0.0 : 0x1p-15) + (double)(K + 2) * 0x1p-24) + 1e-7;
            double e = fabs(got - s) / bound;
            if (!(e <= worst)) worst = e;
        }
    free(A), free(B), free(C);
    return worst;
}

/* F16 / BF16 B through AMX tiles (gemm_amx.c): K, rows and columns off the tile sizes, a
 * second chunk of rows (M > 256), narrow B (rows split between tasks), A transposed,
 * accumulate, and values that are not finite (those chunks and panels take f32 paths).
 * Skipped where there is no AMX. */
static void test_amx_gemm(void)
{
    if (!cpu_gemm_amx_on()) {
        fprintf(stderr, "  skipped: no AMX-BF16 on this CPU (or CTORCH_AMX=0, or CTORCH_SIMD below avx512)\n");
        return;
    }
    th_rng r = {21};
    static const int64_t dims[][3] = {{1, 1, 1}, {17, 33, 70}, {64, 48, 2048}, {300, 40, 96}, {37, 256, 31}, {33, 16, 64}};
    for (size_t c = 0; c < sizeof dims / sizeof dims[0]; c++)
        for (int v = 0; v < 8; v++) {
            bool bf16 = v & 1, trans = v & 2, acc = v & 4;
            double e = amx_case(&r, dims[c][0], dims[c][1], dims[c][2], bf16, trans, acc, 0);
            CHECK_MSG(e <= 1.0, "amx %s %lldx%lldx%lld trans %d acc %d: error %.3g of the bound", bf16 ? "bf16" : "f16",
                      (long long)dims[c][0], (long long)dims[c][1], (long long)dims[c][2], trans, acc, e);
        }
    for (int v = 0; v < 4; v++) {
        bool bf16 = v & 1;
        int bad = 1 + (v >> 1);
        double e = amx_case(&r, 40, 40, 64, bf16, false, true, bad);
        CHECK_MSG(e <= 1.0, "amx %s with %s: finite outputs' error %.3g of the bound", bf16 ? "bf16" : "f16",
                  bad == 1 ? "-inf in A" : "NaN in B", e);
    }
}

/* xbf: the reference rounds x to bf16 first, as the AVX512-BF16 prompt GEMM does */
static void check_linear_x(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, double tol, bool xbf)
{
    ct_tensor *y = NULL;
    CHECK_OK(ct_linear(x, w, bias, &y));
    if (!y) return;
    int nd = ct_tensor_ndim(x);
    int64_t K = ct_tensor_dim(w, 1), N = ct_tensor_dim(w, 0), M = ct_tensor_numel(x) / (K ? K : 1);
    if (K == 0) M = ct_tensor_numel(y) / (N ? N : 1);
    CHECK(ct_tensor_ndim(y) == nd && ct_tensor_dim(y, -1) == N && ct_tensor_dtype(y) == CT_F32);
    double *xv = th_values(x), *wv = th_values(w), *bv = bias ? th_values(bias) : NULL, *yv = th_values(y);
    double *want = malloc(sizeof(double) * (size_t)(M * N + 1));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = bv ? bv[n] : 0.0;
            for (int64_t k = 0; k < K; k++) s += (xbf ? round_bf16(xv[m * K + k]) : xv[m * K + k]) * wv[n * K + k];
            want[m * N + n] = s;
        }
    CHECK(th_allclose(yv, want, M * N, tol, tol));
    free(xv);
    free(wv);
    free(bv);
    free(yv);
    free(want);
    ct_tensor_free(y);
}

static void check_linear(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, double tol)
{
    check_linear_x(x, w, bias, tol, false);
}

static void test_linear(void)
{
    th_rng r = {9};
    static const int64_t mk[][2] = {{1, 64}, {1, 70}, {3, 37}, {8, 128}, {20, 33}, {1, 1}};
    ct_dtype wts[] = {CT_F32, CT_F16, CT_BF16};
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) {
            fprintf(stderr, "  skipped SIMD level %d: this CPU lacks it (or CTORCH_SIMD caps it)\n", lvl);
            continue;
        }
        for (size_t c = 0; c < sizeof mk / sizeof mk[0]; c++) {
            int64_t M = mk[c][0], K = mk[c][1], N = 19;
            int64_t sx[2] = {M, K}, sw[2] = {N, K}, sb[1] = {N};
            ct_tensor *x = rnd(&r, 2, sx, CT_F32), *b = rnd(&r, 1, sb, CT_F32);
            for (int wi = 0; wi < 3; wi++) {
                ct_tensor *w = rnd(&r, 2, sw, wts[wi]);
                /* the weights are exact in their dtype; f32 accumulation over K <= 128 terms;
                 * bf16 weights in prompts (M > 8) may take the bf16 dots, x rounded to bf16 */
                bool amx = M > 8 && cpu_gemm_amx_on();
                bool xbf = wts[wi] == CT_BF16 && M > 8 && (cpu_gemm_bf16_dot_on() || amx);
                /* f16 weights in prompts through AMX: products off by up to ~2^-15 (K terms <= 1) */
                double tol = wts[wi] == CT_F16 && amx ? 2e-5 + (double)K * 0x1p-15 : 2e-5;
                check_linear_x(x, w, NULL, tol, xbf);
                check_linear_x(x, w, b, tol, xbf);
                ct_tensor_free(w);
            }
            ct_tensor_free(x);
            ct_tensor_free(b);
        }
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    /* batched x [2, 3, K] and a strided x (transposed view), transposed f32 w, f16 bias, f16 x */
    int64_t sx[3] = {2, 3, 24}, sxt[2] = {24, 5}, sw[2] = {7, 24}, swt[2] = {24, 7}, sb[1] = {7};
    ct_tensor *x = rnd(&r, 3, sx, CT_F32), *x0 = rnd(&r, 2, sxt, CT_F32), *w = rnd(&r, 2, sw, CT_F32);
    ct_tensor *w0 = rnd(&r, 2, swt, CT_F32), *b16 = rnd(&r, 1, sb, CT_F16), *xh = rnd(&r, 3, sx, CT_F16);
    ct_tensor *w16 = rnd(&r, 2, sw, CT_F16), *xt = NULL, *wt = NULL;
    CHECK_OK(ct_transpose(x0, 0, 1, &xt));
    CHECK_OK(ct_transpose(w0, 0, 1, &wt));
    check_linear(x, w, b16, 1e-5);
    check_linear(xt, w, NULL, 1e-5);
    check_linear(xt, wt, b16, 1e-5);
    check_linear(xt, w16, b16, 1e-5);
    check_linear(xh, w16, NULL, 1e-5);
    ct_tensor *all[] = {x, x0, w, w0, b16, xh, w16, xt, wt};
    for (int i = 0; i < 9; i++) ct_tensor_free(all[i]);
}

static void test_linear_errors(void)
{
    th_rng r = {10};
    int64_t sx[2] = {2, 8}, sw[2] = {4, 8}, sw2[2] = {4, 9}, sb[1] = {5}, s1[1] = {8};
    ct_tensor *x = rnd(&r, 2, sx, CT_F32), *w = rnd(&r, 2, sw, CT_F32), *w2 = rnd(&r, 2, sw2, CT_F32);
    ct_tensor *b = rnd(&r, 1, sb, CT_F32), *w1 = rnd(&r, 1, s1, CT_F32), *xi = th_random(&r, 2, sx, CT_I32, -3, 3);
    ct_tensor *wi = th_random(&r, 2, sw, CT_I32, -3, 3), *y = NULL;
    CHECK_STATUS(ct_linear(x, w2, NULL, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_linear(x, w1, NULL, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_linear(x, w, b, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_linear(xi, w, NULL, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_linear(x, wi, NULL, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_linear(NULL, w, NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_linear(x, w, NULL, NULL), CT_ERR_INVALID_ARG);
    CHECK(y == NULL);
    ct_tensor *all[] = {x, w, w2, b, w1, xi, wi};
    for (int i = 0; i < 7; i++) ct_tensor_free(all[i]);
}

/* Quantized weights: compared with dequantize(w) @ x in double. */
static void quant_case(ct_dtype wt, int64_t M, int64_t K, int64_t N, th_rng *r)
{
    float *wf = malloc(sizeof(float) * (size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++) wf[i] = (float)th_uniform(r, -1, 1);
    size_t rb = ct_dtype_row_bytes(wt, K);
    char *wq = malloc(rb * (size_t)N);
    for (int64_t n = 0; n < N; n++) CHECK_OK(quant_quantize_row(wt, wf + n * K, wq + (size_t)n * rb, K));
    int64_t sw[2] = {N, K}, sx[2] = {M, K}, sb[1] = {N};
    ct_tensor *w = NULL, *wd = NULL, *y = NULL, *bias = th_random(r, 1, sb, CT_F32, -1, 1);
    ct_tensor *x = th_random(r, 2, sx, CT_F32, -1, 1);
    CHECK_OK(ct_tensor_from_data(2, sw, wt, wq, &w));
    /* reference weights: the quant layer's own dequantizer, row by row */
    float *wdq = malloc(sizeof(float) * (size_t)(N * K));
    for (int64_t n = 0; n < N; n++) CHECK_OK(quant_dequantize_row(wt, wq + (size_t)n * rb, wdq + n * K, K));
    CHECK_OK(ct_tensor_from_data(2, sw, CT_F32, wdq, &wd));
    free(wdq);
    CHECK_OK(ct_linear(x, w, bias, &y));
    if (y && wd) {
        double *xv = th_values(x), *wv = th_values(wd), *yv = th_values(y), *bv = th_values(bias);
        double worst = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = bv[n], sabs = 0;
                for (int64_t k = 0; k < K; k++) {
                    s += xv[m * K + k] * wv[n * K + k];
                    sabs += fabs(wv[n * K + k]);
                }
                /* activations are rounded to 8-bit blocks: each |x| <= 1 moves by at most
                 * amax/127/2 <= 1/254, so |error| <= sum|w| / 254 (+ f32 rounding) */
                double e = fabs(yv[m * N + n] - s), bound = sabs / 254.0 + 1e-4;
                if (e / bound > worst) worst = e / bound;
            }
        CHECK_MSG(worst <= 1.0, "%s linear M=%lld: error %.3g of the bound", ct_dtype_name(wt), (long long)M, worst);
        free(xv);
        free(wv);
        free(yv);
        free(bv);
    }
    /* matmul(quantized w [N, K], x^T [K, M]) is the same product, transposed */
    ct_tensor *xt = NULL, *z = NULL, *yt = NULL;
    CHECK_OK(ct_transpose(x, 0, 1, &xt));
    CHECK_OK(ct_matmul(w, xt, &z));
    ct_tensor *yb = NULL;
    CHECK_OK(ct_linear(x, w, NULL, &yb));
    if (z && yb) {
        CHECK(ct_tensor_dim(z, 0) == N && ct_tensor_dim(z, 1) == M);
        CHECK_OK(ct_transpose(yb, 0, 1, &yt));
        double *zv = th_values(z), *tv = th_values(yt);
        CHECK(th_allclose(zv, tv, M * N, 0, 0));
        free(zv);
        free(tv);
    }
    ct_tensor *all[] = {w, wd, y, bias, x, xt, z, yt, yb};
    for (int i = 0; i < 9; i++) ct_tensor_free(all[i]);
    free(wf);
    free(wq);
}

static void test_quant_linear(void)
{
    if (!quant_get_vec_dot(CT_Q8_0)) {
        th_skip("quant_get_vec_dot(Q8_0) is NULL: quantized kernels not built yet");
        return;
    }
    th_rng r = {11};
    quant_case(CT_Q8_0, 1, 64, 40, &r);  /* decode */
    quant_case(CT_Q4_0, 3, 96, 33, &r);
    quant_case(CT_Q8_0, 37, 64, 70, &r); /* prefill tiles with partial blocks */
    /* prefill (packed panels where the CPU has them): an odd block count, partial panels,
     * a partial group of activation rows */
    quant_case(CT_Q8_0, 13, 96, 37, &r);
    quant_case(CT_Q4_0, 10, 96, 33, &r);
    if (quant_get_vec_dot(CT_Q4_K)) {
        quant_case(CT_Q4_K, 2, 256, 9, &r);
        quant_case(CT_Q6_K, 20, 512, 5, &r);
        quant_case(CT_Q4_K, 13, 512, 37, &r);
        quant_case(CT_Q5_K, 11, 256, 21, &r);
        quant_case(CT_Q6_K, 9, 256, 17, &r);
    }
    /* K not a multiple of the block size is refused when the weight is made */
    ct_tensor *w = NULL;
    int64_t sw[2] = {2, 31};
    char buf[256] = {0};
    CHECK(ct_tensor_from_data(2, sw, CT_Q8_0, buf, &w) != CT_OK);
    ct_tensor_free(w);
}

/* Weights the CPU keeps repacked for decode follow writes to the weight tensor, and two
 * views of one storage (a model's weights share its file's) keep separate panels. */
static void test_quant_linear_rewrite(void)
{
    th_rng r = {12};
    enum { K = 256, N = 20 };
    size_t rb = ct_dtype_row_bytes(CT_Q4_K, K);
    char *qa = malloc(rb * 2 * N), *qb = malloc(rb * N);
    float *wf = malloc(sizeof(float) * K);
    for (int n = 0; n < 3 * N; n++) {
        for (int k = 0; k < K; k++) wf[k] = (float)th_uniform(&r, -1, 1);
        CHECK_OK(quant_quantize_row(CT_Q4_K, wf, n < 2 * N ? qa + (size_t)n * rb : qb + (size_t)(n - 2 * N) * rb, K));
    }
    int64_t sw[2] = {2 * N, K}, sx[2] = {1, K}, sh[2] = {N, K};
    ct_tensor *w = NULL, *wb = NULL, *top = NULL, *bottom = NULL, *bottom_ref = NULL;
    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
    CHECK_OK(ct_tensor_from_data(2, sw, CT_Q4_K, qa, &w));
    CHECK_OK(ct_tensor_from_data(2, sh, CT_Q4_K, qb, &wb));
    CHECK_OK(ct_narrow(w, 0, 0, N, &top));
    CHECK_OK(ct_narrow(w, 0, N, N, &bottom));
    CHECK_OK(ct_tensor_from_data(2, sh, CT_Q4_K, qa + (size_t)N * rb, &bottom_ref));
    ct_tensor *y_top = NULL, *y_bot = NULL, *y_bot_ref = NULL, *y_new = NULL, *y_new_ref = NULL;
    CHECK_OK(ct_linear(x, top, NULL, &y_top));
    CHECK_OK(ct_linear(x, bottom, NULL, &y_bot));
    CHECK_OK(ct_linear(x, bottom_ref, NULL, &y_bot_ref));
    if (y_bot && y_bot_ref) {
        double *a = th_values(y_bot), *b = th_values(y_bot_ref);
        CHECK_MSG(th_allclose(a, b, N, 0, 0), "second view of one storage gave the first view's panels");
        free(a), free(b);
    }
    /* overwrite the top half with other weights: the next product must use them */
    void *p = NULL;
    CHECK_OK(ct_tensor_data_mut(w, &p));
    if (p) memcpy(p, qb, rb * N);
    CHECK_OK(ct_linear(x, top, NULL, &y_new));
    CHECK_OK(ct_linear(x, wb, NULL, &y_new_ref));
    if (y_new && y_new_ref && y_top) {
        double *a = th_values(y_new), *b = th_values(y_new_ref), *old = th_values(y_top);
        CHECK_MSG(th_allclose(a, b, N, 0, 0), "linear after a write used stale repacked weights");
        CHECK(!th_allclose(a, old, N, 0, 0));
        free(a), free(b), free(old);
    }
    ct_tensor *all[] = {w, wb, top, bottom, bottom_ref, x, y_top, y_bot, y_bot_ref, y_new, y_new_ref};
    for (int i = 0; i < 11; i++) ct_tensor_free(all[i]);
    free(qa), free(qb), free(wf);
}

int main(void)
{
    RUN(test_matmul_ranks);
    RUN(test_quant_linear_rewrite);
    RUN(test_matmul_views);
    RUN(test_matmul_empty);
    RUN(test_matmul_dtypes);
    RUN(test_matmul_c64);
    RUN(test_matmul_errors);
    RUN(test_matvec_outer);
    RUN(test_builtin_gemm);
    RUN(test_amx_gemm);
    RUN(test_linear);
    RUN(test_linear_errors);
    RUN(test_quant_linear);
    return th_finish();
}
