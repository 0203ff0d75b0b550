/* ct_linear's kernel paths that the model-shaped tests leave out, against a double
 * reference: the fused decode kernel for every row count 1..8 (and, for one row, every weight-row
 * group size 1..7) with f32/f16/bf16
 * weights at every SIMD level (each row count is its own unrolled variant), K past
 * the fused kernel's K-block; K = 0; x views that cannot be read as rows; f64 and
 * transposed weights; a quantized weight of one row; the kept copy of large half weights. Then the argument checks of
 * ct_linear, ct_matmul with a quantized operand, ct_matvec and ct_outer. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "harness.h"
#include "quant/quant.h"

/* y = x w^T + b in double from the tensors' own values (any layout). Returns the
 * worst |error| / (f32 accumulation bound) over the result. */
static double linear_err(const ct_tensor *x, const ct_tensor *w, const ct_tensor *b, const ct_tensor *y)
{
    int64_t K = ct_tensor_dim(w, 1), N = ct_tensor_dim(w, 0), M = K ? ct_tensor_numel(x) / K : ct_tensor_numel(y) / N;
    double *xv = th_values(x), *wv = th_values(w), *yv = th_values(y), *bv = b ? th_values(b) : NULL;
    double worst = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = bv ? bv[n] : 0, sabs = bv ? fabs(bv[n]) : 0;
            for (int64_t k = 0; k < K; k++) {
                s += xv[m * K + k] * wv[n * K + k];
                sabs += fabs(xv[m * K + k] * wv[n * K + k]);
            }
            double e = fabs(yv[m * N + n] - s) / (2.0 * (double)(K + 2) * ldexp(1, -24) * sabs + 1e-30);
            if (!(e <= worst)) worst = e;
        }
    free(xv), free(wv), free(yv), free(bv);
    return worst;
}

static void check(const ct_tensor *x, const ct_tensor *w, const ct_tensor *b, const char *what)
{
    ct_tensor *y = NULL;
    CHECK_OK(ct_linear(x, w, b, &y));
    if (!y) return;
    int64_t want_shape[8];
    int nd = ct_tensor_ndim(x);
    memcpy(want_shape, ct_tensor_shape(x), sizeof(int64_t) * (size_t)nd);
    want_shape[nd - 1] = ct_tensor_dim(w, 0);
    CHECK_MSG(ct_tensor_ndim(y) == nd && !memcmp(ct_tensor_shape(y), want_shape, sizeof(int64_t) * (size_t)nd),
              "%s: wrong result shape", what);
    double e = linear_err(x, w, b, y);
    CHECK_MSG(e <= 1.0, "%s: error %.3g of the bound", what, e);
    ct_tensor_free(y);
}

/* Every row count of the fused kernel (1..8), each weight dtype, K covering the 32- and
 * 16-wide steps, the scalar tail and (800 > 768 for 8 rows) more than one K-block;
 * N = 37 spans two row groups. */
static void test_fused_rows(void)
{
    th_rng r = {0xf05ed};
    static const int64_t ks[] = {7, 21, 53, 800};
    static const ct_dtype wts[] = {CT_F32, CT_F16, CT_BF16};
    const int64_t N = 37;
    cpu_simd saved = cpu_simd_level();
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) {
            fprintf(stderr, "  skipped SIMD level %d: this CPU lacks it (or CTORCH_SIMD caps it)\n", lvl);
            continue;
        }
        for (size_t ki = 0; ki < sizeof ks / sizeof ks[0]; ki++) {
            int64_t K = ks[ki], sw[2] = {N, K}, sb[1] = {N};
            ct_tensor *b = th_random(&r, 1, sb, CT_F32, -1, 1);
            for (int wi = 0; wi < 3; wi++) {
                ct_tensor *w = th_random(&r, 2, sw, wts[wi], -1, 1);
                for (int64_t M = 1; M <= 8; M++) {
                    int64_t sx[2] = {M, K};
                    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
                    char what[96];
                    snprintf(what, sizeof what, "level %d %s M %lld K %lld", lvl, ct_dtype_name(wts[wi]), (long long)M,
                             (long long)K);
                    check(x, w, (M & 1) ? b : NULL, what);
                    ct_tensor_free(x);
                }
                ct_tensor_free(w);
            }
            ct_tensor_free(b);
            /* one activation row against 1..7 weight rows: every group size of the kernel that
             * takes eight weight rows per pass over x (linear.c w1_512 / w1_256) */
            for (int wi = 0; wi < 3; wi++)
                for (int64_t n = 1; n < 8; n++) {
                    int64_t swn[2] = {n, K}, sx[2] = {1, K};
                    ct_tensor *w = th_random(&r, 2, swn, wts[wi], -1, 1), *x = th_random(&r, 2, sx, CT_F32, -1, 1);
                    char what[96];
                    snprintf(what, sizeof what, "level %d %s M 1 N %lld K %lld", lvl, ct_dtype_name(wts[wi]), (long long)n,
                             (long long)K);
                    check(x, w, NULL, what);
                    ct_tensor_free(x);
                    ct_tensor_free(w);
                }
        }
    }
    cpu_simd_set_level(saved);
}

/* Half weights of 1 MiB and more are read from a dense copy the CPU keeps (linear.c
 * kept_half): a row-strided view is copied row by row, decode (fused rows) and prompts
 * (GEMM) read the copy, and a write into the weights' storage drops it. */
static void test_kept_half(void)
{
    th_rng r = {0x4e97};
    const int64_t N = 300, KS = 2051, K = 1800; /* 300 x 1800 halfs: 1.08 MB */
    static const ct_dtype wts[] = {CT_F16, CT_BF16};
    static const int64_t ms[] = {1, 3, 20};
    for (int wi = 0; wi < 2; wi++) {
        int64_t sfull[2] = {N, KS};
        ct_tensor *wfull = th_random(&r, 2, sfull, wts[wi], -1, 1), *w = NULL, *w2 = NULL;
        CHECK_OK(ct_narrow(wfull, 1, 3, K, &w));
        if (!w) {
            ct_tensor_free(wfull);
            continue;
        }
        for (int pass = 0; pass < 2; pass++) {
            for (size_t mi = 0; mi < sizeof ms / sizeof ms[0]; mi++) {
                int64_t sx[2] = {ms[mi], K};
                ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
                char what[96];
                snprintf(what, sizeof what, "kept %s M %lld pass %d", ct_dtype_name(wts[wi]), (long long)ms[mi], pass);
                check(x, w, NULL, what);
                ct_tensor_free(x);
            }
            /* new weights in the same storage: the results must follow them */
            ct_tensor *fresh = th_random(&r, 2, sfull, wts[wi], -1, 1);
            CHECK_OK(ct_copy_(wfull, fresh));
            ct_tensor_free(fresh);
        }
        /* another view of the same storage (other offset) gets its own copy */
        CHECK_OK(ct_narrow(wfull, 1, 0, K, &w2));
        if (w2) {
            int64_t sx[2] = {2, K};
            ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
            check(x, w2, NULL, "kept second view");
            ct_tensor_free(x);
        }
        ct_tensor_free(w2);
        ct_tensor_free(w);
        ct_tensor_free(wfull);
    }
}

/* K = 0: every output is the bias (or 0), as torch gives. */
static void test_k_zero(void)
{
    int64_t sx[2] = {3, 0}, sw[2] = {4, 0}, sb[1] = {4};
    ct_tensor *x = NULL, *w = NULL, *b = NULL, *y = NULL, *y0 = NULL;
    CHECK_OK(ct_zeros(2, sx, CT_F32, &x));
    CHECK_OK(ct_zeros(2, sw, CT_F32, &w));
    CHECK_OK(ct_arange(1, 5, 1, CT_F32, &b));
    CHECK(b && ct_tensor_numel(b) == sb[0]);
    CHECK_OK(ct_linear(x, w, b, &y));
    CHECK_OK(ct_linear(x, w, NULL, &y0));
    if (y && y0) {
        CHECK(ct_tensor_dim(y, 0) == 3 && ct_tensor_dim(y, 1) == 4);
        double *v = th_values(y), *v0 = th_values(y0);
        for (int i = 0; i < 12; i++) {
            CHECK(v[i] == (double)(i % 4 + 1));
            CHECK(v0[i] == 0.0);
        }
        free(v), free(v0);
    }
    ct_tensor *all[] = {x, w, b, y, y0};
    for (int i = 0; i < 5; i++) ct_tensor_free(all[i]);
}

/* x views whose rows are not evenly spaced or not unit-stride are packed first; f64
 * weights are narrowed to f32; a transposed f32 w (stride[1] != 1) skips the fused kernel. */
static void test_layouts(void)
{
    th_rng r = {0x1a7};
    int64_t s3[3] = {3, 2, 24}, sw[2] = {5, 24}, swt[2] = {24, 5}, sxt[2] = {24, 4}, sb[1] = {5};
    ct_tensor *x3 = th_random(&r, 3, s3, CT_F32, -1, 1), *w = th_random(&r, 2, sw, CT_F32, -1, 1);
    ct_tensor *w0 = th_random(&r, 2, swt, CT_F32, -1, 1), *x0 = th_random(&r, 2, sxt, CT_F32, -1, 1);
    ct_tensor *w64 = th_random(&r, 2, sw, CT_F64, -1, 1), *b = th_random(&r, 1, sb, CT_F32, -1, 1);
    ct_tensor *xp = NULL, *xt = NULL, *wt = NULL;
    /* [2, 3, 24] with the leading dims swapped: strides (24, 48, 1) do not fold into one row stride */
    int perm[3] = {1, 0, 2};
    CHECK_OK(ct_permute(x3, perm, &xp));
    CHECK_OK(ct_transpose(x0, 0, 1, &xt)); /* [4, 24], column stride 4 */
    CHECK_OK(ct_transpose(w0, 0, 1, &wt)); /* [5, 24], stride[1] = 5 */
    check(xp, w, b, "permuted x");
    check(xt, w, NULL, "transposed x, decode");
    check(x3, wt, b, "transposed w, decode");
    check(xt, w64, b, "f64 w");
    ct_tensor *all[] = {x3, w, w0, x0, w64, b, xp, xt, wt};
    for (int i = 0; i < 9; i++) ct_tensor_free(all[i]);
}

/* A quantized weight with one output row (no row stride) at decode and prefill. */
static void test_quant_one_row(void)
{
    th_rng r = {0x9};
    static const ct_dtype types[] = {CT_Q4_K, CT_Q8_0, CT_Q4_0};
    const int64_t K = 256;
    for (size_t ti = 0; ti < 3; ti++) {
        ct_dtype wt = types[ti];
        float wf[256], wd[256];
        char q[512];
        for (int k = 0; k < K; k++) wf[k] = (float)th_uniform(&r, -1, 1);
        CHECK_OK(quant_quantize_row(wt, wf, q, K));
        CHECK_OK(quant_dequantize_row(wt, q, wd, K));
        int64_t sw[2] = {1, K};
        ct_tensor *w = NULL, *wref = NULL;
        CHECK_OK(ct_tensor_from_data(2, sw, wt, q, &w));
        CHECK_OK(ct_tensor_from_data(2, sw, CT_F32, wd, &wref));
        for (int64_t M = 1; M <= 17; M += 16) {
            int64_t sx[2] = {M, K};
            ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1), *y = NULL, *yref = NULL;
            CHECK_OK(ct_linear(x, w, NULL, &y));
            CHECK_OK(ct_linear(x, wref, NULL, &yref));
            if (y && yref) {
                double *a = th_values(y), *b = th_values(yref), sabs = 0;
                for (int k = 0; k < K; k++) sabs += fabs(wd[k]);
                /* activations rounded to 8-bit blocks: |error| <= sum|w| / 254 */
                for (int64_t m = 0; m < M; m++)
                    CHECK_MSG(fabs(a[m] - b[m]) <= sabs / 254.0 + 1e-4, "%s M %lld row %lld: %g vs %g",
                              ct_dtype_name(wt), (long long)M, (long long)m, a[m], b[m]);
                free(a), free(b);
            }
            ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(yref);
        }
        ct_tensor_free(w), ct_tensor_free(wref);
    }
}

static bool msg_has(const char *needle)
{
    bool ok = strstr(ct_last_error(), needle) != NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ct_last_error(), needle);
    return ok;
}

static void test_linear_args(void)
{
    th_rng r = {0xa};
    int64_t sx[2] = {2, 32}, sw[2] = {3, 32}, sb[1] = {3}, sb2[2] = {1, 3};
    char q[3 * 34] = {0}; /* three Q8_0 rows of one block */
    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1), *w = th_random(&r, 2, sw, CT_F32, -1, 1);
    ct_tensor *bi = th_random(&r, 1, sb, CT_I32, -3, 3), *b2 = th_random(&r, 2, sb2, CT_F32, -1, 1);
    ct_tensor *wq = NULL, *wk = NULL, *y = NULL, *wqt = NULL;
    CHECK_OK(ct_tensor_from_data(2, sw, CT_Q8_0, q, &wq));
    char qk[3 * 292] = {0};
    int64_t swk[2] = {3, 256};
    CHECK_OK(ct_tensor_from_data(2, swk, CT_Q8_K, qk, &wk));
    CHECK_STATUS(ct_linear(x, NULL, NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_linear(x, w, bi, &y), CT_ERR_DTYPE);
    CHECK(msg_has("bias") && msg_has("i32"));
    CHECK_STATUS(ct_linear(x, w, b2, &y), CT_ERR_SHAPE);
    CHECK(msg_has("bias") && msg_has("[1, 3]"));
    CHECK_STATUS(ct_linear(x, wk, NULL, &y), CT_ERR_DTYPE);
    CHECK(msg_has("weight dtype q8_k"));
    /* a quantized weight read through a transposed view has no whole-block rows */
    if (ct_transpose(wq, 0, 1, &wqt) == CT_OK) {
        int64_t sxt[2] = {2, 3};
        ct_tensor *xt = th_random(&r, 2, sxt, CT_F32, -1, 1);
        CHECK_STATUS(ct_linear(xt, wqt, NULL, &y), CT_ERR_SHAPE);
        CHECK(msg_has("whole-block rows"));
        ct_tensor_free(xt);
    }
    CHECK(y == NULL);
    ct_tensor *all[] = {x, w, bi, b2, wq, wk, wqt};
    for (int i = 0; i < 7; i++) ct_tensor_free(all[i]);
}

static void test_matmul_quant_args(void)
{
    th_rng r = {0xb};
    char q[4 * 34] = {0};
    int64_t sw[2] = {4, 32}, sw3[3] = {2, 2, 32}, sk[2] = {32, 3}, sk3[3] = {2, 32, 3}, sbad[2] = {31, 3};
    ct_tensor *wq = NULL, *wq3 = NULL, *y = NULL;
    CHECK_OK(ct_tensor_from_data(2, sw, CT_Q8_0, q, &wq));
    CHECK_OK(ct_tensor_from_data(3, sw3, CT_Q8_0, q, &wq3));
    ct_tensor *b = th_random(&r, 2, sk, CT_F32, -1, 1), *b64 = th_random(&r, 2, sk, CT_F64, -1, 1);
    ct_tensor *b3 = th_random(&r, 3, sk3, CT_F32, -1, 1), *bbad = th_random(&r, 2, sbad, CT_F32, -1, 1);
    ct_tensor *a = th_random(&r, 2, sw, CT_F32, -1, 1);
    CHECK_STATUS(ct_matmul(wq3, b, &y), CT_ERR_SHAPE);
    CHECK(msg_has("must be 2-D"));
    CHECK_STATUS(ct_matmul(wq, b64, &y), CT_ERR_DTYPE);
    CHECK(msg_has("f64"));
    CHECK_STATUS(ct_matmul(wq, b3, &y), CT_ERR_SHAPE);
    CHECK(msg_has("[K] or [K, N]"));
    CHECK_STATUS(ct_matmul(wq, bbad, &y), CT_ERR_SHAPE);
    CHECK(msg_has("inner sizes 32 and 31"));
    CHECK_STATUS(ct_matmul(a, wq, &y), CT_ERR_DTYPE);
    CHECK(msg_has("must be the first one"));
    CHECK_STATUS(ct_matmul(a, NULL, &y), CT_ERR_INVALID_ARG);
    /* the supported form agrees with the dequantized weights: all-zero blocks give 0 */
    CHECK_OK(ct_matmul(wq, b, &y));
    if (y) {
        CHECK(ct_tensor_dim(y, 0) == 4 && ct_tensor_dim(y, 1) == 3);
        double *v = th_values(y);
        for (int i = 0; i < 12; i++) CHECK(v[i] == 0.0);
        free(v);
    }
    ct_tensor *all[] = {wq, wq3, y, b, b64, b3, bbad, a};
    for (int i = 0; i < 8; i++) ct_tensor_free(all[i]);
}

static void test_matvec_outer_args(void)
{
    th_rng r = {0xc};
    int64_t s2[2] = {3, 4}, s1[1] = {4};
    char q[34] = {0};
    int64_t sq[1] = {32};
    ct_tensor *a = th_random(&r, 2, s2, CT_F32, -1, 1), *v = th_random(&r, 1, s1, CT_F32, -1, 1), *vq = NULL, *y = NULL;
    CHECK_OK(ct_tensor_from_data(1, sq, CT_Q8_0, q, &vq));
    CHECK_STATUS(ct_matvec(NULL, v, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_matvec(a, NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_matvec(a, v, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_matvec(v, v, &y), CT_ERR_SHAPE);
    CHECK(msg_has("ct_matvec"));
    CHECK_STATUS(ct_matvec(a, a, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_outer(NULL, v, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_outer(v, NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_outer(v, v, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_outer(a, v, &y), CT_ERR_SHAPE);
    CHECK(msg_has("ct_outer"));
    CHECK_STATUS(ct_outer(v, a, &y), CT_ERR_SHAPE);
    CHECK(ct_outer(v, vq, &y) != CT_OK);
    CHECK(msg_has("ct_outer"));
    CHECK(y == NULL);
    ct_tensor_free(a), ct_tensor_free(v), ct_tensor_free(vq);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_fused_rows);
    RUN(test_kept_half);
    RUN(test_k_zero);
    RUN(test_layouts);
    RUN(test_quant_one_row);
    RUN(test_linear_args);
    RUN(test_matmul_quant_args);
    RUN(test_matvec_outer_args);
    return th_finish();
}
