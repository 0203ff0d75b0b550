/* The OpenCL quant group (every op with a block-quantized source) on opencl:0 against
 * the CPU, for Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K Q3_K Q4_K Q5_K Q6_K; exits 77 without an
 * OpenCL device. Fresh device buffers are NaN-poisoned (CTORCH_OPENCL_POISON=1), so an
 * output element a kernel forgets to write fails the non-finite check.
 *
 * Tolerances (NMSE, sum (a-b)^2 / sum b^2):
 * - dequantizing copy and embedding: both sides compute d * q (+/- m) in f32 from the same
 *   bytes; the device may contract to an FMA (one rounding less), so 1e-12 for f32 output
 *   (observed 0); f16 output rounds those values to half, where a 1-ulp f32 difference can
 *   flip a half rounding (2^-11 relative): 1e-6.
 * - linear vs an f64 reference over the dequantized weights: f32 accumulation over K = 512
 *   (relative error ~ sqrt(K) 2^-24 ~ 1e-6, NMSE ~ 1e-12): 1e-9.
 * - linear vs the CPU: the CPU quantizes x to Q8_0 (legacy formats) or Q8_K (K formats)
 *   before its integer dots; the device multiplies f32 x. For x uniform in [-1, 1] a block's
 *   scale is ~1/127 and its rounding error has variance (1/127)^2 / 12 against Var(x) = 1/3:
 *   NMSE ~ 1.6e-5 for every output (the weights only scale both sums). Bound 1e-4, 6x that;
 *   with 37+ outputs the estimate's own spread is ~25%. The f64 check above is the tight one.
 * - the one-row products with x as bytes (ocl_quant_test_q8): against an f64 product of
 *   the same bytes (x rounded per 32 as the kernel rounds it, in f32): 1e-7, f32
 *   accumulation as above plus a rare rounding tie that the device's f32 reciprocal breaks
 *   the other way (one such value moves its outputs by ~1e-3 relative, NMSE ~1e-8 over
 *   37+ outputs); against the exact f64 product 1e-4 (the 8-bit rounding, as the CPU's).
 *   In fused steps, replays against eager runs: 1e-5, since eager rounds the norm's output
 *   where the fused launch rounds x * gamma and scales afterwards (ties again; observed 0
 *   to 4e-8). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#include "quant/quant.h"
#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/quant.h"
#else /* no backend: every test skips before using the hook */
typedef enum ocl_q_matvec { OCL_Q_MATVEC_AUTO, OCL_Q_MATVEC_GROUPS, OCL_Q_MATVEC_ROWS, OCL_Q_MATVEC_TILE32 } ocl_q_matvec;
static void ocl_quant_test_matvec(ocl_q_matvec mode) { (void)mode; }
static int ocl_quant_fused_total(void) { return 0; }
static void ocl_quant_test_fuse_rope(bool on) { (void)on; }
static int ocl_quant_packed_total(void) { return 0; }
static void ocl_quant_test_pack(bool on) { (void)on; }
static void ocl_quant_test_q8(int mode) { (void)mode; }
static int ocl_quant_q8_total(void) { return 0; }
static int ocl_quant_mv1_total(void) { return 0; }
#endif

static const ct_dtype FORMATS[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0,
                                   CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K};
#define N_FORMATS (int)(sizeof FORMATS / sizeof FORMATS[0])

/* CTORCH_OPENCL_MV1_ROWS: the one-row decode kernels' rows per work-group (quant_mv1.c) */
static const char *const MV1_ROWS[] = {"1", "2", "4", "8"};

static char g_dev[32];
static double g_worst_cpu; /* the largest linear NMSE against the CPU, reported per format */

static bool have_device(void) { return devcheck_device("opencl", g_dev, sizeof g_dev) != NULL; }

/* A quantized [N, K] weight from uniform values (the reference quantizer), and its
 * dequantized values in double (the CPU's reference dequantizer) when wd is given. */
static ct_tensor *qweight(th_rng *r, ct_dtype t, int64_t N, int64_t K, double **wd)
{
    size_t rb = ct_dtype_row_bytes(t, K);
    float *f = malloc(sizeof(float) * (size_t)(N * K)), *row = malloc(sizeof(float) * (size_t)K);
    char *q = malloc(rb * (size_t)N);
    for (int64_t i = 0; i < N * K; i++) f[i] = (float)th_uniform(r, -1, 1);
    if (wd) *wd = malloc(sizeof(double) * (size_t)(N * K));
    for (int64_t n = 0; n < N; n++) {
        CHECK_OK(quant_quantize_row(t, f + n * K, q + rb * (size_t)n, K));
        CHECK_OK(quant_dequantize_row(t, q + rb * (size_t)n, row, K));
        for (int64_t k = 0; wd && k < K; k++) (*wd)[n * K + k] = row[k];
    }
    int64_t shape[2] = {N, K};
    ct_tensor *w = NULL;
    CHECK_OK(ct_tensor_from_data(2, shape, t, q, &w));
    free(f), free(row), free(q);
    return w;
}

/* The fused-launch tests' weights: quantized as given (the K formats' kernels), or with
 * g_alt[0] in place of Q4_K and g_alt[1] in place of Q6_K when g_alt_on (f16 / bf16:
 * mv1xh and mv1rh; the 32-blocks: mv1xl and mv1rl; Q5_K with Q6_K: mv1xk and mv1rk; Q2_K /
 * Q3_K with Q4_K: mv1xs and mv1rs; two formats of a family in one launch). */
static bool g_alt_on;
static ct_dtype g_alt[2];

static ct_tensor *mweight(th_rng *r, ct_dtype t, int64_t N, int64_t K)
{
    if (!g_alt_on) return qweight(r, t, N, K, NULL);
    ct_dtype a = g_alt[t == CT_Q6_K];
    if (ct_dtype_is_quantized(a)) return qweight(r, a, N, K, NULL);
    int64_t shape[2] = {N, K};
    return th_random(r, 2, shape, a, -1, 1);
}

/* ---- dequantizing copy ---- */

static ct_status do_cast(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    return ct_cast(in[0], *(ct_dtype *)ctx, out);
}

/* Into a transposed f32 view: the copy writes dst elements a column stride apart. */
static ct_status do_copy_transposed(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n, (void)ctx;
    const ct_tensor *w = in[0];
    int64_t shape[2] = {ct_tensor_dim(w, 1), ct_tensor_dim(w, 0)};
    ct_tensor *buf = NULL, *view = NULL;
    ct_status s = ct_zeros(2, shape, CT_F32, &buf);
    if (s == CT_OK) s = ct_transpose(buf, 0, 1, &view);
    if (s == CT_OK) s = ct_copy_(view, w);
    ct_tensor_free(buf);
    *out = view;
    return s;
}

/* Into a quantized tensor of the same type (the blocks as they are), then dequantized on
 * the same device to be compared; the byte copy must have run where the cast did. */
static ct_status do_copy_blocks(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n, (void)ctx;
    const ct_tensor *w = in[0];
    size_t bytes = ct_tensor_nbytes(w);
    void *zeros = calloc(1, bytes);
    ct_tensor *dst = NULL;
    ct_exec_record copy_rec, cast_rec;
    ct_status s = ct_tensor_from_data(ct_tensor_ndim(w), ct_tensor_shape(w), ct_tensor_dtype(w), zeros, &dst);
    free(zeros);
    if (s == CT_OK) s = ct_copy_(dst, w);
    if (s == CT_OK) s = ct_exec_last(&copy_rec);
    if (s == CT_OK) s = ct_cast(dst, CT_F32, out);
    if (s == CT_OK) s = ct_exec_last(&cast_rec);
    CHECK_MSG(s != CT_OK || strcmp(copy_rec.device, cast_rec.device) == 0, "the block copy ran on %s, the cast on %s",
              copy_rec.device, cast_rec.device);
    ct_tensor_free(dst);
    return s;
}

static void test_dequantize(void)
{
    if (!have_device()) return;
    th_rng r = {0xdeca1};
    for (int f = 0; f < N_FORMATS; f++) {
        ct_dtype t = FORMATS[f];
        ct_tensor *w = qweight(&r, t, 9, 512, NULL), *rows = NULL, *cols = NULL;
        /* every other row: a view whose row stride is two rows of blocks */
        CHECK_OK(ct_slice(w, 0, 1, 9, 2, &rows));
        /* the second half of each row: a view starting past whole blocks */
        CHECK_OK(ct_narrow(w, 1, 256, 256, &cols));
        char what[64];
        ct_dtype f32 = CT_F32, f16 = CT_F16;
        snprintf(what, sizeof what, "dequantize %s -> f32", ct_dtype_name(t));
        devcheck_op(g_dev, what, do_cast, &w, 1, &f32, 1e-12);
        snprintf(what, sizeof what, "dequantize %s -> f16", ct_dtype_name(t));
        devcheck_op(g_dev, what, do_cast, &w, 1, &f16, 1e-6);
        snprintf(what, sizeof what, "dequantize %s (strided rows) -> f32", ct_dtype_name(t));
        devcheck_op(g_dev, what, do_cast, &rows, 1, &f32, 1e-12);
        snprintf(what, sizeof what, "dequantize %s (second half of the rows) -> f32", ct_dtype_name(t));
        devcheck_op(g_dev, what, do_cast, &cols, 1, &f32, 1e-12);
        snprintf(what, sizeof what, "dequantize %s into a transposed view", ct_dtype_name(t));
        devcheck_op(g_dev, what, do_copy_transposed, &w, 1, NULL, 1e-12);
        snprintf(what, sizeof what, "copy %s -> %s", ct_dtype_name(t), ct_dtype_name(t));
        devcheck_op(g_dev, what, do_copy_blocks, &w, 1, NULL, 0);
        ct_tensor_free(rows), ct_tensor_free(cols);
        ct_tensor_free(w);
    }
}

/* ---- embedding ---- */

static ct_status do_embed(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n, (void)ctx;
    return ct_embedding(in[0], in[1], out);
}

static void test_embedding(void)
{
    if (!have_device()) return;
    th_rng r = {0xe3bed};
    int32_t ids32[6] = {3, 0, 36, 5, 5, 17};
    int64_t ids64[12] = {36, -1, 1, -1, 2, -1, 35, -1, 0, -1, 20, -1};
    int64_t s6[2] = {2, 3}, s12[1] = {12};
    ct_tensor *i32 = NULL, *i64all = NULL, *i64 = NULL;
    CHECK_OK(ct_tensor_from_data(2, s6, CT_I32, ids32, &i32));
    CHECK_OK(ct_tensor_from_data(1, s12, CT_I64, ids64, &i64all));
    CHECK_OK(ct_slice(i64all, 0, 0, 12, 2, &i64)); /* strided ids: every other entry */
    for (int f = 0; f < N_FORMATS; f++) {
        ct_dtype t = FORMATS[f];
        ct_tensor *w = qweight(&r, t, 37, 256, NULL);
        char what[64];
        snprintf(what, sizeof what, "embedding %s, i32 ids [2, 3]", ct_dtype_name(t));
        devcheck_op(g_dev, what, do_embed, (ct_tensor *[]){w, i32}, 2, NULL, 1e-12);
        snprintf(what, sizeof what, "embedding %s, strided i64 ids", ct_dtype_name(t));
        devcheck_op(g_dev, what, do_embed, (ct_tensor *[]){w, i64}, 2, NULL, 1e-12);
        ct_tensor_free(w);
    }
    ct_tensor_free(i32), ct_tensor_free(i64all), ct_tensor_free(i64);
}

/* An id outside the table cannot be reported without a host wait on the device: its row
 * comes out NaN (never a read out of bounds), the other rows are right. */
static void test_embedding_bad_id(void)
{
    if (!have_device()) return;
    th_rng r = {0xbad1d};
    ct_tensor *w = qweight(&r, CT_Q4_0, 8, 64, NULL), *ids = NULL, *out = NULL, *ref = NULL;
    int32_t v[3] = {1, 99, 2};
    int64_t s[1] = {3};
    CHECK_OK(ct_tensor_from_data(1, s, CT_I32, v, &ids));
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_embedding(w, ids, &out));
    CHECK_OK(ct_exec_force_device(NULL));
    CHECK_OK(ct_cast(w, CT_F32, &ref));
    if (out && ref) {
        double *o = th_values(out), *rv = th_values(ref);
        for (int i = 0; i < 64; i++) {
            CHECK(isnan(o[64 + i]));
            CHECK(o[i] == rv[64 + i] && o[128 + i] == rv[128 + i]);
        }
        free(o), free(rv);
    }
    ct_tensor_free(w), ct_tensor_free(ids), ct_tensor_free(out), ct_tensor_free(ref);
}

/* ---- linear ---- */

static ct_status do_linear(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)ctx;
    return ct_linear(in[0], in[1], n > 2 ? in[2] : NULL, out);
}

/* y = x w^T + b in double from x's values xv (freed here) and the dequantized weights wd. */
static double *linear_ref_of(double *xv, const double *wd, const ct_tensor *b, int64_t M, int64_t N, int64_t K)
{
    double *bv = b ? th_values(b) : NULL, *y = malloc(sizeof(double) * (size_t)(M * N));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = bv ? bv[n] : 0;
            for (int64_t k = 0; k < K; k++) s += xv[m * K + k] * wd[n * K + k];
            y[m * N + n] = s;
        }
    free(xv), free(bv);
    return y;
}

/* The device's result against the f64 reference (tight), then against the CPU's (devcheck). */
static void check_linear_once(const char *what, ct_tensor *x, ct_tensor *w, const double *wd, ct_tensor *b, int64_t M)
{
    int64_t N = ct_tensor_dim(w, 0), K = ct_tensor_dim(w, 1);
    ct_tensor *y = NULL;
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_linear(x, w, b, &y));
    ct_exec_record rec;
    CHECK(ct_exec_last(&rec) == CT_OK && strcmp(rec.device, g_dev) == 0);
    CHECK_OK(ct_exec_force_device(NULL));
    if (y) {
        double *got = th_values(y), *ref = linear_ref_of(th_values(x), wd, b, M, N, K);
        int nonfinite = 0;
        double e = devcheck_nmse(got, ref, M * N, &nonfinite);
        CHECK_MSG(!nonfinite && e <= 1e-9, "%s: NMSE %.3g vs the f64 reference (non-finite %d)", what, e, nonfinite);
        free(got), free(ref);
    }
    ct_tensor_free(y);
    ct_tensor *in[3] = {x, w, b};
    double e = devcheck_op(g_dev, what, do_linear, in, b ? 3 : 2, NULL, 1e-4);
    if (!(e <= g_worst_cpu)) g_worst_cpu = e;
}

/* Through both kernel families, whichever this device would pick: the GPUs' (a work-group
 * per output row for decode, tiles for prompts: 64 x 64 ones from 64 rows of x and of the
 * weight, and again on the 32 x 32 ones) and CPU devices' (a work-item per weight row and up
 * to 8 rows of x). */
static void check_linear(const char *what, ct_tensor *x, ct_tensor *w, const double *wd, ct_tensor *b, int64_t M)
{
    static const struct { ocl_q_matvec mode; const char *name; } modes[] = {
        {OCL_Q_MATVEC_GROUPS, "GPU kernels"}, {OCL_Q_MATVEC_ROWS, "CPU-device kernel"},
        {OCL_Q_MATVEC_TILE32, "GPU kernels, 32 x 32 tiles"}};
    bool big = M >= 64 && ct_tensor_shape(w)[0] >= 64;
    for (int i = 0; i < (big ? 3 : 2); i++) {
        char w2[160];
        snprintf(w2, sizeof w2, "%s (%s)", what, modes[i].name);
        ocl_quant_test_matvec(modes[i].mode);
        check_linear_once(w2, x, w, wd, b, M);
    }
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
}

static void test_linear(void)
{
    if (!have_device()) return;
    th_rng r = {0x11ea7};
    /* M 70, N 70: a whole and a partial 64 x 64 tile each way, 16 steps along K */
    static const int64_t Ms[] = {1, 2, 7, 70};
    const int64_t N = 70, K = 512;
    int64_t sb[1] = {N};
    ct_tensor *b32 = th_random(&r, 1, sb, CT_F32, -1, 1), *b16 = th_random(&r, 1, sb, CT_F16, -1, 1);
    for (int f = 0; f < N_FORMATS; f++) {
        ct_dtype t = FORMATS[f];
        double *wd = NULL;
        ct_tensor *w = qweight(&r, t, N, K, &wd);
        g_worst_cpu = 0;
        for (size_t mi = 0; mi < sizeof Ms / sizeof Ms[0]; mi++) {
            int64_t M = Ms[mi], sx[2] = {M, K}, sxt[2] = {K, M}, sxw[2] = {M, K + 32};
            char what[96];
            ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
            snprintf(what, sizeof what, "linear %s M %lld", ct_dtype_name(t), (long long)M);
            check_linear(what, x, w, wd, NULL, M);
            snprintf(what, sizeof what, "linear %s M %lld + f32 bias", ct_dtype_name(t), (long long)M);
            check_linear(what, x, w, wd, b32, M);
            /* x rows with a gap after each (row stride K + 32) and an f16 bias */
            ct_tensor *xw = th_random(&r, 2, sxw, CT_F32, -1, 1), *xn = NULL;
            CHECK_OK(ct_narrow(xw, 1, 0, K, &xn));
            snprintf(what, sizeof what, "linear %s M %lld, padded rows + f16 bias", ct_dtype_name(t), (long long)M);
            check_linear(what, xn, w, wd, b16, M);
            /* x read through a transpose: elements M apart along K */
            ct_tensor *xt = th_random(&r, 2, sxt, CT_F32, -1, 1), *xtt = NULL;
            CHECK_OK(ct_transpose(xt, 0, 1, &xtt));
            snprintf(what, sizeof what, "linear %s M %lld, transposed x", ct_dtype_name(t), (long long)M);
            check_linear(what, xtt, w, wd, NULL, M);
            ct_tensor_free(x), ct_tensor_free(xw), ct_tensor_free(xn), ct_tensor_free(xt), ct_tensor_free(xtt);
        }
        fprintf(stderr, "  linear %s: worst NMSE vs the cpu %.3g (bound 1e-4)\n", ct_dtype_name(t), g_worst_cpu);
        ct_tensor_free(w);
        free(wd);
    }
    ct_tensor_free(b32), ct_tensor_free(b16);
}

/* The same for one row of x rounded to bytes per 32 as mv1_q8x rounds it (f32). */
static double *linear_q8_ref(const ct_tensor *x, const double *wd, const ct_tensor *b, int64_t N, int64_t K)
{
    double *xv = th_values(x);
    for (int64_t i = 0; i < K; i += 32) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf((float)xv[i + j]));
        float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;
        for (int j = 0; j < 32; j++) xv[i + j] = (double)rintf((float)xv[i + j] * id) * (double)d;
    }
    return linear_ref_of(xv, wd, b, 1, N, K);
}

/* One row of x through the byte-x kernels (forced on; form 1: the bytes from a launch of
 * their own, 2: made in the product's work-items), Q4_K and Q6_K, at every rows-per-group,
 * row counts that leave the last group partial, K of 2 and 3 blocks, a bias. */
static void linear_q8_form(int form)
{
    th_rng r = {0x98a7};
    static const struct { ct_dtype t; int64_t N, K; } cases[] = {
        {CT_Q4_K, 37, 512}, {CT_Q4_K, 70, 768}, {CT_Q6_K, 37, 512}, {CT_Q6_K, 70, 768}};
    ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS);
    ocl_quant_test_q8(form);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t N = cases[c].N, K = cases[c].K, sx[2] = {1, K}, sb[1] = {N};
        double *wd = NULL;
        ct_tensor *w = qweight(&r, cases[c].t, N, K, &wd), *x = th_random(&r, 2, sx, CT_F32, -1, 1);
        ct_tensor *b = th_random(&r, 1, sb, CT_F32, -1, 1);
        for (size_t ri = 0; ri < sizeof MV1_ROWS / sizeof MV1_ROWS[0]; ri++) {
            setenv("CTORCH_OPENCL_MV1_ROWS", MV1_ROWS[ri], 1);
            for (int hb = 0; hb < 2; hb++) {
                ct_tensor *y = NULL, *bias = hb ? b : NULL;
                int q0 = ocl_quant_q8_total();
                CHECK_OK(ct_exec_force_device(g_dev));
                CHECK_OK(ct_linear(x, w, bias, &y));
                ct_exec_record rec;
                CHECK(ct_exec_last(&rec) == CT_OK && strcmp(rec.device, g_dev) == 0);
                CHECK_OK(ct_exec_force_device(NULL));
                CHECK_MSG(ocl_quant_q8_total() - q0 == 1, "%s %lldx%lld: %d launches read x as bytes, expected 1",
                          ct_dtype_name(cases[c].t), (long long)N, (long long)K, ocl_quant_q8_total() - q0);
                if (!y) continue;
                double *got = th_values(y), *ref8 = linear_q8_ref(x, wd, bias, N, K), *ref = linear_ref_of(th_values(x), wd, bias, 1, N, K);
                int nf = 0;
                double e8 = devcheck_nmse(got, ref8, N, &nf), e = devcheck_nmse(got, ref, N, &nf);
                CHECK_MSG(!nf && e8 <= 1e-7 && e <= 1e-4,
                          "%s %lldx%lld, rows %s%s, form %d: NMSE %.3g vs the bytes' f64 product, %.3g vs f64 "
                          "(non-finite %d)",
                          ct_dtype_name(cases[c].t), (long long)N, (long long)K, MV1_ROWS[ri], hb ? ", bias" : "", form,
                          e8, e, nf);
                free(got), free(ref8), free(ref);
                ct_tensor_free(y);
            }
        }
        ct_tensor_free(w), ct_tensor_free(x), ct_tensor_free(b);
        free(wd);
    }
    unsetenv("CTORCH_OPENCL_MV1_ROWS");
    ocl_quant_test_q8(-1);
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
}

static void test_linear_q8(void)
{
    if (!have_device()) return;
    linear_q8_form(1);
    linear_q8_form(2);
}

/* Batched x [2, 3, K] (rows fold), a weight of odd N = 1 and N = 65 (two tiles at M = 64),
 * and K of one legacy block; plus row-strided and column-narrowed weight views. */
static void test_linear_shapes(void)
{
    if (!have_device()) return;
    th_rng r = {0x5a7e5};
    struct { ct_dtype t; int64_t N, K, M; } cases[] = {
        {CT_Q8_0, 1, 32, 1}, {CT_Q4_1, 65, 32, 64}, {CT_Q6_K, 65, 256, 33}, {CT_Q5_0, 3, 96, 9},
        /* the one-row Q4_K/Q6_K decode kernels: a row per work-group and 4 (a partial last
         * group), fewer 32-chunks than work-items and more */
        {CT_Q4_K, 5, 768, 1}, {CT_Q6_K, 3, 512, 1}, {CT_Q4_K, 70, 1280, 1}, {CT_Q6_K, 33, 2304, 1},
        /* TinyLlama's row lengths (one 32-chunk per work-item per row; 2.75), N no multiple of 8 */
        {CT_Q4_K, 37, 2048, 1}, {CT_Q6_K, 19, 2048, 1}, {CT_Q4_K, 11, 5632, 1}, {CT_Q6_K, 37, 5632, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double *wd = NULL;
        ct_tensor *w = qweight(&r, cases[c].t, cases[c].N, cases[c].K, &wd);
        int64_t sx[2] = {cases[c].M, cases[c].K};
        ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
        bool mv1 = cases[c].M == 1 && (cases[c].t == CT_Q4_K || cases[c].t == CT_Q6_K);
        for (int ri = 0; ri < (mv1 ? 5 : 1); ri++) { /* the one-row kernels at each rows-per-group */
            const char *rows = ri ? MV1_ROWS[ri - 1] : NULL;
            if (rows) setenv("CTORCH_OPENCL_MV1_ROWS", rows, 1);
            char what[96];
            snprintf(what, sizeof what, "linear %s N %lld K %lld M %lld%s%s", ct_dtype_name(cases[c].t),
                     (long long)cases[c].N, (long long)cases[c].K, (long long)cases[c].M, rows ? ", rows/group " : "",
                     rows ? rows : "");
            check_linear(what, x, w, wd, NULL, cases[c].M);
            unsetenv("CTORCH_OPENCL_MV1_ROWS");
        }
        ct_tensor_free(x), ct_tensor_free(w);
        free(wd);
    }
    /* batched x */
    double *wd = NULL;
    ct_tensor *w = qweight(&r, CT_Q4_K, 19, 256, &wd), *x = NULL;
    int64_t sx3[3] = {2, 3, 256};
    x = th_random(&r, 3, sx3, CT_F32, -1, 1);
    check_linear("linear Q4_K x [2, 3, 256]", x, w, wd, NULL, 6);
    ct_tensor_free(x), ct_tensor_free(w);
    free(wd);
    /* rows 1, 3, 5 .. of a weight: the row stride is two rows */
    ct_tensor *big = qweight(&r, CT_Q3_K, 22, 256, &wd), *rows = NULL;
    CHECK_OK(ct_slice(big, 0, 1, 22, 2, &rows));
    double *wrows = malloc(sizeof(double) * 11 * 256);
    for (int n = 0; n < 11; n++) memcpy(wrows + n * 256, wd + (2 * n + 1) * 256, sizeof(double) * 256);
    int64_t sx[2] = {7, 256};
    x = th_random(&r, 2, sx, CT_F32, -1, 1);
    check_linear("linear Q3_K, every other weight row", x, rows, wrows, NULL, 7);
    ct_tensor_free(x), ct_tensor_free(rows), ct_tensor_free(big);
    free(wd), free(wrows);
    /* columns 64 .. 127 of each row (K = 64 inside rows of 128): the view starts two blocks in */
    big = qweight(&r, CT_Q5_1, 13, 128, &wd);
    ct_tensor *cols = NULL;
    CHECK_OK(ct_narrow(big, 1, 64, 64, &cols));
    double *wcols = malloc(sizeof(double) * 13 * 64);
    for (int n = 0; n < 13; n++) memcpy(wcols + n * 64, wd + n * 128 + 64, sizeof(double) * 64);
    for (int64_t M = 3; M <= 40; M += 37) {
        int64_t sxc[2] = {M, 64};
        x = th_random(&r, 2, sxc, CT_F32, -1, 1);
        check_linear("linear Q5_1, columns 64 .. 127 of the weight", x, cols, wcols, NULL, M);
        ct_tensor_free(x);
    }
    ct_tensor_free(cols), ct_tensor_free(big);
    free(wd), free(wcols);
}

/* The one-row kernels read the half scales from registers (quant.cl's h16f), not through
 * vload_half: subnormal scales (weights of ~1e-4 in Q4_K, ~1e-3 in Q6_K) and NaN ones
 * (a row's d or dmin patched to 0x7E00: NaN outputs on both sides, where they must
 * agree) against the CPU. */
static void patch_half(ct_tensor *w, size_t byte, uint16_t h)
{
    void *p = NULL;
    CHECK_OK(ct_tensor_data_mut(w, &p));
    if (p) memcpy((char *)p + byte, &h, sizeof h);
}

static void test_linear_scales(void)
{
    if (!have_device()) return;
    th_rng r = {0x5ca1e};
    struct { ct_dtype t; double mag; size_t d_at, dmin_at; } cases[] = {
        {CT_Q4_K, 1e-4, 0, 2}, {CT_Q6_K, 1e-3, 208, 0}};
    const int64_t N = 9, K = 512;
    int64_t sx[2] = {1, K};
    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t rb = ct_dtype_row_bytes(cases[c].t, K), bb = rb / (size_t)(K / 256);
        float *f = malloc(sizeof(float) * (size_t)(N * K));
        char *q = malloc(rb * (size_t)N);
        for (int64_t i = 0; i < N * K; i++) f[i] = (float)(cases[c].mag * th_uniform(&r, -1, 1));
        for (int64_t n = 0; n < N; n++) CHECK_OK(quant_quantize_row(cases[c].t, f + n * K, q + rb * (size_t)n, K));
        ct_tensor *w = NULL;
        CHECK_OK(ct_tensor_from_data(2, (int64_t[]){N, K}, cases[c].t, q, &w));
        char what[96];
        for (int pass = 0; pass < 2 && w; pass++) {
            if (pass == 1) { /* NaN scales: row 2's d in its second block, row 5's dmin (Q4_K) */
                patch_half(w, 2 * rb + bb + cases[c].d_at, 0x7E00);
                if (cases[c].t == CT_Q4_K) patch_half(w, 5 * rb + cases[c].dmin_at, 0x7E00);
            }
            ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS);
            snprintf(what, sizeof what, "linear %s, weights ~%g%s", ct_dtype_name(cases[c].t), cases[c].mag,
                     pass ? ", NaN scales" : "");
            devcheck_op(g_dev, what, do_linear, (ct_tensor *[]){x, w}, 2, NULL, 1e-4);
            ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
        }
        ct_tensor_free(w);
        free(f), free(q);
    }
    ct_tensor_free(x);
}

/* ct_matmul(w, v) with a quantized w and a vector is a LINEAR of v by w. */
static ct_status do_matvec(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n, (void)ctx;
    return ct_matmul(in[0], in[1], out);
}

static void test_matmul_vector(void)
{
    if (!have_device()) return;
    th_rng r = {0x3a7e};
    int64_t sv[1] = {256};
    ct_tensor *v = th_random(&r, 1, sv, CT_F32, -1, 1);
    for (int f = 0; f < N_FORMATS; f++) {
        ct_tensor *w = qweight(&r, FORMATS[f], 21, 256, NULL);
        char what[64];
        snprintf(what, sizeof what, "matmul %s [21, 256] @ [256]", ct_dtype_name(FORMATS[f]));
        devcheck_op(g_dev, what, do_matvec, (ct_tensor *[]){w, v}, 2, NULL, 1e-4);
        ct_tensor_free(w);
    }
    ct_tensor_free(v);
}

/* ---- fused decode launches in a recorded step ---- */

/* A transformer layer's products at decode (one row of D): n1 = rms_norm(x) read by q, k
 * (Q6_K) and v; t = q + k + v; n2 = rms_norm(t) read by gate and up, h = swiglu(g, u) (geglu),
 * y = h Wd, z = y + x, o = z Wo, out = x + o. Captured on opencl:0 these become 4 fused
 * launches (norm + 3 linears, norm + gate/up/swiglu, 2 x linear + add: 12 ops) and 2 adds. */
typedef struct mlp_w {
    ct_tensor *g1, *g2, *wq, *wk, *wv, *wg, *wu, *wd, *wo;
} mlp_w;

static bool g_geglu; /* the gated products' activation: GEGLU (Gemma 3) in place of SWIGLU */

static ct_status glu(const ct_tensor *g, const ct_tensor *u, ct_tensor **out)
{
    return g_geglu ? ct_geglu(g, u, out) : ct_swiglu(g, u, out);
}

static ct_status mlp(const ct_tensor *x, const mlp_w *w, ct_tensor **out)
{
    ct_tensor *t[14] = {0}; /* n1 q k v qk s n2 g u h y z o */
    ct_status s = ct_rms_norm(x, w->g1, 1e-5, &t[0]);
    if (s == CT_OK) s = ct_linear(t[0], w->wq, NULL, &t[1]);
    if (s == CT_OK) s = ct_linear(t[0], w->wk, NULL, &t[2]);
    if (s == CT_OK) s = ct_linear(t[0], w->wv, NULL, &t[3]);
    if (s == CT_OK) s = ct_add(t[1], t[2], &t[4]);
    if (s == CT_OK) s = ct_add(t[4], t[3], &t[5]);
    if (s == CT_OK) s = ct_rms_norm(t[5], w->g2, 1e-5, &t[6]);
    if (s == CT_OK) s = ct_linear(t[6], w->wg, NULL, &t[7]);
    if (s == CT_OK) s = ct_linear(t[6], w->wu, NULL, &t[8]);
    if (s == CT_OK) s = glu(t[7], t[8], &t[9]);
    if (s == CT_OK) s = ct_linear(t[9], w->wd, NULL, &t[10]);
    if (s == CT_OK) s = ct_add(t[10], x, &t[11]);
    if (s == CT_OK) s = ct_linear(t[11], w->wo, NULL, &t[12]);
    if (s == CT_OK) s = ct_add(x, t[12], out);
    for (int i = 0; i < 14; i++) ct_tensor_free(t[i]);
    return s;
}

static double *mlp_on(const char *dev, const ct_tensor *x, const mlp_w *w)
{
    ct_tensor *out = NULL;
    CHECK_OK(ct_exec_force_device(dev));
    CHECK_OK(mlp(x, w, &out));
    ct_exec_force_device(NULL);
    double *v = out ? th_values(out) : NULL;
    ct_tensor_free(out);
    return v;
}

/* pack: the launches take each distinct buffer once (the packed kernels), or every
 * operand as its own argument; both must give the same outputs. q8: x as bytes (1: from
 * a launch of their own, 2: made in the product's work-items). */
static void fused_step_rows(const char *rows, bool pack, int q8)
{
    if (rows) setenv("CTORCH_OPENCL_MV1_ROWS", rows, 1);
    ocl_quant_test_pack(pack);
    ocl_quant_test_q8(q8);
    th_rng r = {0xf05ed};
    const int64_t D = 256, F = 512; /* 4 rows per work-group on a small device, a partial last one */
    int64_t sg[1] = {D};
    mlp_w w = {th_random(&r, 1, sg, CT_F32, 0.5, 1.5), th_random(&r, 1, sg, CT_F32, 0.5, 1.5),
               mweight(&r, CT_Q4_K, D, D),             mweight(&r, CT_Q6_K, D, D),
               mweight(&r, CT_Q4_K, D, D),             mweight(&r, CT_Q4_K, F, D),
               mweight(&r, CT_Q4_K, F, D),             mweight(&r, CT_Q6_K, D, F),
               mweight(&r, CT_Q4_K, D, D)};
    int64_t sx[2] = {1, D};
    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1), *out = NULL;
    ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS); /* the one-row kernels, which the planner fuses */
    ct_step *st = NULL;
    int fused0 = ocl_quant_fused_total(), packed0 = ocl_quant_packed_total(), q80 = ocl_quant_q8_total();
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_step_begin());
    CHECK_OK(mlp(x, &w, &out));
    CHECK_OK(ct_step_end(&st));
    ct_exec_force_device(NULL);
    /* packed: the launches whose operands are in at most 4 buffers (the step's arena, the
     * weights, a gamma): all but the first, whose x, gamma and 3 weights are 5 apart; with
     * the bytes of a launch (a buffer more, up to 8): all four */
    int packed = ocl_quant_packed_total() - packed0, want = pack ? (q8 == 1 ? 4 : 3) : 0;
    CHECK_MSG(packed == want, "rows %s: %d packed launches, expected %d", rows ? rows : "auto", packed, want);
    /* x as bytes: the 7 linears as the recording runs them, then the 4 captured launches */
    CHECK_MSG(ocl_quant_q8_total() - q80 == (q8 ? 11 : 0), "rows %s: %d launches read x as bytes, expected %d",
              rows ? rows : "auto", ocl_quant_q8_total() - q80, q8 ? 11 : 0);
    for (int k = 0; st && k < 3; k++) {
        void *p;
        CHECK_OK(ct_tensor_data_mut(x, &p));
        for (int64_t i = 0; i < D; i++) ((float *)p)[i] = (float)th_uniform(&r, -1, 1);
        CHECK_OK(ct_step_run(st));
        double *got = th_values(out), *eager = mlp_on(g_dev, x, &w), *cpu = mlp_on("cpu", x, &w);
        int nf1 = 0, nf2 = 0;
        double e1 = devcheck_nmse(got, eager, D, &nf1), e2 = devcheck_nmse(got, cpu, D, &nf2);
        /* the fused kernels do the eager kernels' arithmetic: only FMA contraction may differ
         * (x as bytes: rounding ties, see the top) */
        CHECK_MSG(!nf1 && e1 <= (q8 ? 1e-5 : 1e-10), "replay %d: NMSE %.3g vs eager on %s (non-finite %d)", k, e1,
                  g_dev, nf1);
        /* the CPU rounds x to 8 bits before each of its 4 linears (~1.6e-5 each, see the top),
         * and swiglu's product and the two residual adds compound them: observed 2.5e-4 to
         * 4.6e-4 on PoCL; 2e-3 bounds that, the eager check above is the tight one */
        CHECK_MSG(!nf2 && e2 <= 2e-3, "replay %d: NMSE %.3g vs the cpu (non-finite %d)", k, e2, nf2);
        free(got), free(eager), free(cpu);
    }
    CHECK_MSG(ocl_quant_fused_total() - fused0 == 12, "%d ops fused, expected 12", ocl_quant_fused_total() - fused0);
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
    ocl_quant_test_pack(true);
    ocl_quant_test_q8(-1);
    unsetenv("CTORCH_OPENCL_MV1_ROWS");
    ct_step_free(st);
    ct_tensor_free(out), ct_tensor_free(x);
    ct_tensor *all[] = {w.g1, w.g2, w.wq, w.wk, w.wv, w.wg, w.wu, w.wd, w.wo};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_fused_step(void)
{
    if (!have_device()) return;
    fused_step_rows(NULL, true, 0); /* the device's own choice */
    for (int form = 1; form <= 2; form++) {
        fused_step_rows(NULL, true, form);
        fused_step_rows(NULL, false, form);
    }
    for (size_t i = 0; i < sizeof MV1_ROWS / sizeof MV1_ROWS[0]; i++) {
        fused_step_rows(MV1_ROWS[i], true, 0);
        fused_step_rows(MV1_ROWS[i], false, 0);
        fused_step_rows(MV1_ROWS[i], true, 1);
        fused_step_rows(MV1_ROWS[i], true, 2);
    }
}

/* Each fused form alone with row counts that leave the last work-group partial at every
 * rows-per-group (37, 5, 11), the weights of one launch in both formats:
 *   rms_norm + 3 linears (37 Q4_K, 5 Q6_K, 11 Q4_K rows)        a, b, c
 *   rms_norm + gate/up (37 rows, Q6_K) + swiglu (or geglu)       h
 *   linear (37 Q4_K) + add of h                                  z
 * Every output of the recorded step against the CPU and against eager runs on the device. */
typedef struct odd_w {
    ct_tensor *g, *wa, *wb, *wc, *wg, *wu, *wy;
} odd_w;

static ct_status odd_ops(const ct_tensor *x, const odd_w *w, ct_tensor **o)
{
    ct_tensor *n1 = NULL, *n2 = NULL, *g = NULL, *u = NULL, *y = NULL;
    ct_status s = ct_rms_norm(x, w->g, 1e-5, &n1);
    if (s == CT_OK) s = ct_linear(n1, w->wa, NULL, &o[0]);
    if (s == CT_OK) s = ct_linear(n1, w->wb, NULL, &o[1]);
    if (s == CT_OK) s = ct_linear(n1, w->wc, NULL, &o[2]);
    if (s == CT_OK) s = ct_rms_norm(x, NULL, 1e-5, &n2);
    if (s == CT_OK) s = ct_linear(n2, w->wg, NULL, &g);
    if (s == CT_OK) s = ct_linear(n2, w->wu, NULL, &u);
    if (s == CT_OK) s = glu(g, u, &o[3]);
    if (s == CT_OK) s = ct_linear(x, w->wy, NULL, &y);
    if (s == CT_OK) s = ct_add(y, o[3], &o[4]);
    ct_tensor_free(n1), ct_tensor_free(n2), ct_tensor_free(g), ct_tensor_free(u), ct_tensor_free(y);
    return s;
}

static void odd_on(const char *dev, const ct_tensor *x, const odd_w *w, double **v)
{
    ct_tensor *o[5] = {0};
    CHECK_OK(ct_exec_force_device(dev));
    CHECK_OK(odd_ops(x, w, o));
    ct_exec_force_device(NULL);
    for (int i = 0; i < 5; i++) v[i] = o[i] ? th_values(o[i]) : NULL, ct_tensor_free(o[i]);
}

/* x uniform in [-1, 1] in even 32-blocks and in [-4, 4] in odd ones: a norm's sum of
 * squares taken from the wrong blocks shows. */
static void odd_fill(ct_tensor *x, th_rng *r)
{
    void *p;
    CHECK_OK(ct_tensor_data_mut(x, &p));
    for (int64_t i = 0; p && i < ct_tensor_numel(x); i++) ((float *)p)[i] = (float)th_uniform(r, -1, 1) * ((i / 32) % 2 ? 4.0f : 1.0f);
}

static int64_t g_odd_k = 512; /* the row length of fused_odd_rows's weights */

static void fused_odd_rows(const char *rows, int q8)
{
    if (rows) setenv("CTORCH_OPENCL_MV1_ROWS", rows, 1);
    ocl_quant_test_q8(q8);
    th_rng r = {0x0dd5};
    const int64_t K = g_odd_k, n[5] = {37, 5, 11, 37, 37};
    int64_t sg[1] = {K}, sx[2] = {1, K};
    odd_w w = {th_random(&r, 1, sg, CT_F32, 0.5, 1.5), mweight(&r, CT_Q4_K, 37, K), mweight(&r, CT_Q6_K, 5, K),
               mweight(&r, CT_Q4_K, 11, K),            mweight(&r, CT_Q6_K, 37, K), mweight(&r, CT_Q6_K, 37, K),
               mweight(&r, CT_Q4_K, 37, K)};
    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1), *o[5] = {0};
    ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS);
    ct_step *st = NULL;
    odd_fill(x, &r);
    int fused0 = ocl_quant_fused_total(), q80 = ocl_quant_q8_total();
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_step_begin());
    CHECK_OK(odd_ops(x, &w, o));
    CHECK_OK(ct_step_end(&st));
    ct_exec_force_device(NULL);
    /* x as bytes: the 6 linears as the recording runs them, then the 3 captured launches */
    CHECK_MSG(ocl_quant_q8_total() - q80 == (q8 ? 9 : 0), "rows %s: %d launches read x as bytes, expected %d",
              rows ? rows : "auto", ocl_quant_q8_total() - q80, q8 ? 9 : 0);
    CHECK_MSG(ocl_quant_fused_total() - fused0 == 10, "rows %s: %d ops fused, expected 10", rows ? rows : "auto",
              ocl_quant_fused_total() - fused0);
    for (int k = 0; st && k < 2; k++) {
        odd_fill(x, &r);
        CHECK_OK(ct_step_run(st));
        double *eager[5], *cpu[5];
        odd_on(g_dev, x, &w, eager);
        odd_on("cpu", x, &w, cpu);
        for (int i = 0; i < 5; i++) {
            double *got = o[i] ? th_values(o[i]) : NULL;
            int nf1 = 0, nf2 = 0;
            double e1 = got && eager[i] ? devcheck_nmse(got, eager[i], n[i], &nf1) : 1;
            double e2 = got && cpu[i] ? devcheck_nmse(got, cpu[i], n[i], &nf2) : 1;
            /* bounds as in fused_step_rows: the same arithmetic as eager; the CPU's 8-bit x */
            CHECK_MSG(!nf1 && e1 <= (q8 ? 1e-5 : 1e-10), "rows %s%s, output %d: NMSE %.3g vs eager (non-finite %d)",
                      rows ? rows : "auto", q8 ? ", x as bytes" : "", i, e1, nf1);
            CHECK_MSG(!nf2 && e2 <= 2e-3, "rows %s, output %d: NMSE %.3g vs the cpu (non-finite %d)", rows ? rows : "auto",
                      i, e2, nf2);
            free(got), free(eager[i]), free(cpu[i]);
        }
    }
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
    ocl_quant_test_q8(-1);
    unsetenv("CTORCH_OPENCL_MV1_ROWS");
    ct_step_free(st);
    for (int i = 0; i < 5; i++) ct_tensor_free(o[i]);
    ct_tensor_free(x);
    ct_tensor *all[] = {w.g, w.wa, w.wb, w.wc, w.wg, w.wu, w.wy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_fused_odd(void)
{
    if (!have_device()) return;
    fused_odd_rows(NULL, 0);
    for (size_t i = 0; i < sizeof MV1_ROWS / sizeof MV1_ROWS[0]; i++) {
        fused_odd_rows(MV1_ROWS[i], 0);
        fused_odd_rows(MV1_ROWS[i], 1);
        fused_odd_rows(MV1_ROWS[i], 2);
    }
}

/* ---- norm + q, k, v + RoPE + KV rows as one launch ----
 * A decode layer's attention input as forward.c issues it: n = rms_norm(x), q k v = n W,
 * RoPE of q and k (viewed [1, H, D]) at pos, rotated k and v written into cache rows
 * slot[h]. Recorded on opencl:0 the eight ops become one launch; with `hold` every op's
 * output is kept (each checked), without it the intermediates are freed before the step
 * ends, so the arena reuses their bytes within the group (rotated k over raw q in a real
 * step) and only qr and the caches are checked. Each replay runs at a new position into
 * caches refilled with random values (rows not written must keep theirs). */
enum { QR_HQ = 4, QR_HKV = 2, QR_D = 32, QR_K = 256, QR_CTX = 8 };

typedef struct qr_case {
    ct_rope_mode mode;
    ct_dtype cache, pos;
    bool hold;
    double freq_scale;
} qr_case;

typedef struct qr_w {
    ct_tensor *g, *wq, *wk, *wv;
} qr_w;

/* o: qr, then with hold n, q, k, v, kr (else NULL). */
static ct_status qr_ops(const ct_tensor *x, const qr_w *w, const qr_case *c, const ct_tensor *pos,
                        const ct_tensor *slot, ct_tensor *kc, ct_tensor *vc, ct_tensor **o)
{
    ct_tensor *t[9] = {0}; /* n q k v q3 k3 kr kr2 v2 */
    ct_rope_params rp = {.n_dims = QR_D, .freq_base = 10000.0, .freq_scale = c->freq_scale, .mode = c->mode};
    ct_status s = ct_rms_norm(x, w->g, 1e-5, &t[0]);
    if (s == CT_OK) s = ct_linear(t[0], w->wq, NULL, &t[1]);
    if (s == CT_OK) s = ct_linear(t[0], w->wk, NULL, &t[2]);
    if (s == CT_OK) s = ct_linear(t[0], w->wv, NULL, &t[3]);
    if (s == CT_OK) s = ct_view(t[1], 3, (int64_t[]){1, QR_HQ, QR_D}, &t[4]);
    if (s == CT_OK) s = ct_view(t[2], 3, (int64_t[]){1, QR_HKV, QR_D}, &t[5]);
    if (s == CT_OK) s = ct_rope(t[4], pos, &rp, &o[0]);
    if (s == CT_OK) s = ct_rope(t[5], pos, &rp, &t[6]);
    if (s == CT_OK) s = ct_view(t[6], 2, (int64_t[]){QR_HKV, QR_D}, &t[7]);
    if (s == CT_OK) s = ct_view(t[3], 2, (int64_t[]){QR_HKV, QR_D}, &t[8]);
    if (s == CT_OK) s = ct_set_rows(kc, t[7], slot);
    if (s == CT_OK) s = ct_set_rows(vc, t[8], slot);
    static const int held[5] = {0, 1, 2, 3, 6};
    for (int i = 0; i < 5; i++) {
        o[1 + i] = c->hold ? t[held[i]] : NULL;
        if (c->hold) t[held[i]] = NULL;
    }
    for (int i = 0; i < 9; i++) ct_tensor_free(t[i]);
    return s;
}

/* pos p, slot[h] = h * QR_CTX + p, and both caches refilled from rng state `seed`. */
static void qr_inputs(ct_tensor *pos, ct_tensor *slot, ct_tensor *kc, ct_tensor *vc, int p, uint64_t seed)
{
    void *d;
    CHECK_OK(ct_tensor_data_mut(pos, &d));
    if (ct_tensor_dtype(pos) == CT_I64) ((int64_t *)d)[0] = p;
    else ((int32_t *)d)[0] = p;
    CHECK_OK(ct_tensor_data_mut(slot, &d));
    for (int h = 0; h < QR_HKV; h++) {
        if (ct_tensor_dtype(slot) == CT_I64) ((int64_t *)d)[h] = h * QR_CTX + p;
        else ((int32_t *)d)[h] = h * QR_CTX + p;
    }
    th_rng r = {seed};
    ct_tensor *cs[2] = {kc, vc};
    for (int i = 0; i < 2; i++) {
        int64_t n = ct_tensor_numel(cs[i]);
        CHECK_OK(ct_tensor_data_mut(cs[i], &d));
        for (int64_t j = 0; j < n; j++) {
            float v = (float)th_uniform(&r, -2, 2);
            if (ct_tensor_dtype(cs[i]) == CT_F16) ((uint16_t *)d)[j] = ct_f32_to_f16(v);
            else ((float *)d)[j] = v;
        }
    }
}

static ct_tensor *qr_tensor(ct_dtype t, int ndim, const int64_t *shape)
{
    ct_tensor *o = NULL;
    CHECK_OK(ct_zeros(ndim, shape, t, &o));
    return o;
}

/* The step's inputs laid out as a decode step has them: the position and the slots views
 * of one tensor (decode_step.c's params), here both caches views of one tensor too. */
typedef struct qr_io {
    ct_tensor *params, *pos, *slot, *kv, *kc, *vc;
} qr_io;

static qr_io qr_io_new(const qr_case *c)
{
    qr_io io = {qr_tensor(c->pos, 1, (int64_t[]){1 + QR_HKV}), NULL, NULL,
                qr_tensor(c->cache, 2, (int64_t[]){2 * QR_HKV * QR_CTX, QR_D}), NULL, NULL};
    CHECK_OK(ct_narrow(io.params, 0, 0, 1, &io.pos));
    CHECK_OK(ct_narrow(io.params, 0, 1, QR_HKV, &io.slot));
    CHECK_OK(ct_narrow(io.kv, 0, 0, QR_HKV * QR_CTX, &io.kc));
    CHECK_OK(ct_narrow(io.kv, 0, QR_HKV * QR_CTX, QR_HKV * QR_CTX, &io.vc));
    return io;
}

static void qr_io_free(qr_io *io)
{
    ct_tensor *all[] = {io->params, io->pos, io->slot, io->kv, io->kc, io->vc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* Runs the ops eagerly on dev at position p from caches filled from seed: v[0..5] as
 * qr_ops's o, v[6], v[7] the caches. */
static void qr_on(const char *dev, const ct_tensor *x, const qr_w *w, const qr_case *c, int p, uint64_t seed,
                  double **v)
{
    qr_io io = qr_io_new(c);
    ct_tensor *o[6] = {0};
    qr_inputs(io.pos, io.slot, io.kc, io.vc, p, seed);
    CHECK_OK(ct_exec_force_device(dev));
    CHECK_OK(qr_ops(x, w, c, io.pos, io.slot, io.kc, io.vc, o));
    ct_exec_force_device(NULL);
    for (int i = 0; i < 6; i++) v[i] = o[i] ? th_values(o[i]) : NULL, ct_tensor_free(o[i]);
    v[6] = th_values(io.kc), v[7] = th_values(io.vc);
    qr_io_free(&io);
}

static void fused_qkv_rope(const qr_case *c, const char *rows, bool pack)
{
    if (rows) setenv("CTORCH_OPENCL_MV1_ROWS", rows, 1);
    ocl_quant_test_pack(pack);
    char what[96];
    snprintf(what, sizeof what, "%s%s%s, %s cache, %s pos, %s, scale %g, rows %s%s", g_alt_on ? ct_dtype_name(g_alt[0]) : "",
             g_alt_on ? " weights, " : "", c->mode == CT_ROPE_NEOX ? "neox" : "normal",
             c->cache == CT_F16 ? "f16" : "f32", c->pos == CT_I64 ? "i64" : "i32", c->hold ? "held" : "arena",
             c->freq_scale, rows ? rows : "auto", pack ? "" : ", unpacked");
    th_rng r = {0x90e + (uint64_t)c->mode * 7 + (uint64_t)c->hold};
    int64_t sg[1] = {QR_K}, sx[2] = {1, QR_K};
    qr_w w = {th_random(&r, 1, sg, CT_F32, 0.5, 1.5), mweight(&r, CT_Q4_K, QR_HQ * QR_D, QR_K),
              mweight(&r, CT_Q6_K, QR_HKV * QR_D, QR_K), mweight(&r, CT_Q4_K, QR_HKV * QR_D, QR_K)};
    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1), *o[6] = {0};
    qr_io io = qr_io_new(c);
    ct_tensor *pos = io.pos, *slot = io.slot, *kc = io.kc, *vc = io.vc;
    qr_inputs(pos, slot, kc, vc, 0, 1);
    ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS);
    ct_step *st = NULL;
    int fused0 = ocl_quant_fused_total(), packed0 = ocl_quant_packed_total();
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_step_begin());
    CHECK_OK(qr_ops(x, &w, c, pos, slot, kc, vc, o));
    CHECK_OK(ct_step_end(&st));
    ct_exec_force_device(NULL);
    /* 8 ops in one launch; with 1 row per work-group (pairs split) the norm and 3 linears only */
    int want = rows && !strcmp(rows, "1") ? 4 : 8;
    CHECK_MSG(ocl_quant_fused_total() - fused0 == want, "%s: %d ops fused, expected %d", what,
              ocl_quant_fused_total() - fused0, want);
    /* one launch either way; with the rope packed, its operands in 8 buffers: x, gamma, 3
     * weights, the params, the caches and the step's arena for the rest (held or not);
     * without, the norm and 3 linears take x, gamma, the arena and 3 weights: more than
     * mv1x's 4 */
    int packed = ocl_quant_packed_total() - packed0, want_packed = pack && want == 8;
    CHECK_MSG(packed == want_packed, "%s: %d packed launches, expected %d", what, packed, want_packed);
    const int64_t n[8] = {QR_HQ * QR_D, QR_K, QR_HQ * QR_D, QR_HKV * QR_D, QR_HKV * QR_D, QR_HKV * QR_D,
                          QR_HKV * QR_CTX * QR_D, QR_HKV * QR_CTX * QR_D};
    for (int k = 0; st && k < 3; k++) {
        int p = 3 + 2 * k;
        uint64_t seed = 100 + (uint64_t)k;
        void *d;
        CHECK_OK(ct_tensor_data_mut(x, &d));
        for (int64_t i = 0; i < QR_K; i++) ((float *)d)[i] = (float)th_uniform(&r, -1, 1);
        qr_inputs(pos, slot, kc, vc, p, seed);
        CHECK_OK(ct_step_run(st));
        double *got[8], *eager[8], *cpu[8];
        for (int i = 0; i < 6; i++) got[i] = o[i] ? th_values(o[i]) : NULL;
        got[6] = th_values(kc), got[7] = th_values(vc);
        qr_on(g_dev, x, &w, c, p, seed, eager);
        qr_on("cpu", x, &w, c, p, seed, cpu);
        for (int i = 0; i < 8; i++) {
            if (!got[i] || !eager[i] || !cpu[i]) {
                CHECK_MSG(!c->hold && i >= 1 && i <= 5, "%s: output %d missing", what, i);
                free(got[i]), free(eager[i]), free(cpu[i]);
                continue;
            }
            int nf1 = 0, nf2 = 0;
            double e1 = devcheck_nmse(got[i], eager[i], n[i], &nf1), e2 = devcheck_nmse(got[i], cpu[i], n[i], &nf2);
            /* against op-by-op on the device: the same arithmetic up to FMA contraction, 1e-10;
             * a cache in f16 may see a 1-ulp f32 difference flip a half rounding (2^-11
             * relative on a few of its elements), so 1e-6 there. Against the CPU as
             * fused_step_rows (its 8-bit x), 2e-3. */
            double tight = i >= 6 && c->cache == CT_F16 ? 1e-6 : 1e-10;
            CHECK_MSG(!nf1 && e1 <= tight, "%s, replay %d, output %d: NMSE %.3g vs eager (non-finite %d)", what, k, i, e1,
                      nf1);
            CHECK_MSG(!nf2 && e2 <= 2e-3, "%s, replay %d, output %d: NMSE %.3g vs the cpu (non-finite %d)", what, k, i,
                      e2, nf2);
            free(got[i]), free(eager[i]), free(cpu[i]);
        }
    }
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
    ocl_quant_test_pack(true);
    unsetenv("CTORCH_OPENCL_MV1_ROWS");
    ct_step_free(st);
    for (int i = 0; i < 6; i++) ct_tensor_free(o[i]);
    ct_tensor_free(x);
    qr_io_free(&io);
    ct_tensor *all[] = {w.g, w.wq, w.wk, w.wv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_fused_qkv_rope(void)
{
    if (!have_device()) return;
    static const qr_case cases[] = {
        {CT_ROPE_NORMAL, CT_F16, CT_I32, true, 1.0},  {CT_ROPE_NORMAL, CT_F16, CT_I32, false, 1.0},
        {CT_ROPE_NEOX, CT_F32, CT_I64, true, 0.25},   {CT_ROPE_NEOX, CT_F16, CT_I32, false, 1.0},
        {CT_ROPE_NORMAL, CT_F32, CT_I64, false, 0.5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) fused_qkv_rope(&cases[i], NULL, true);
    for (size_t i = 0; i < sizeof MV1_ROWS / sizeof MV1_ROWS[0]; i++) fused_qkv_rope(&cases[1], MV1_ROWS[i], true);
    fused_qkv_rope(&cases[3], "4", true);
    fused_qkv_rope(&cases[2], NULL, false);
    fused_qkv_rope(&cases[3], "2", false);
    ocl_quant_test_fuse_rope(false); /* the same ops with the norm and linears fused only */
    fused_qkv_rope(&cases[0], "1", true);
    ocl_quant_test_fuse_rope(true);
}

/* The fused launches with f16 / bf16 weights (mv1xh, mv1rh), the 32-blocks (mv1xl, mv1rl),
 * Q5_K with Q6_K (mv1xk, mv1rk) and Q2_K / Q3_K with Q4_K (mv1xs, mv1rs): the same steps and
 * bounds as Q4_K / Q6_K above, at every rows-per-group, packed and not (vs the CPU 2e-3 as
 * there: the CPU's 8-bit x for the quantized formats; its float-weight products keep f32 x). */
static void test_fused_other(void)
{
    if (!have_device()) return;
    static const ct_dtype alts[][2] = {{CT_F16, CT_BF16},  {CT_Q4_0, CT_Q5_0}, {CT_Q8_0, CT_Q4_1}, {CT_Q5_1, CT_Q8_0},
                                       {CT_Q5_K, CT_Q6_K}, {CT_Q3_K, CT_Q2_K}, {CT_Q2_K, CT_Q4_K}};
    static const qr_case cases[] = {{CT_ROPE_NORMAL, CT_F16, CT_I32, true, 1.0}, {CT_ROPE_NEOX, CT_F32, CT_I64, false, 0.5}};
    for (size_t a = 0; a < sizeof alts / sizeof alts[0]; a++) {
        g_alt_on = true, g_alt[0] = alts[a][0], g_alt[1] = alts[a][1];
        fused_step_rows(NULL, true, 0);
        fused_step_rows(NULL, false, 0);
        fused_odd_rows(NULL, 0);
        for (size_t i = 0; i < sizeof MV1_ROWS / sizeof MV1_ROWS[0]; i++) {
            fused_step_rows(MV1_ROWS[i], true, 0);
            fused_odd_rows(MV1_ROWS[i], 0);
        }
        for (size_t i = 0; i < 2; i++) fused_qkv_rope(&cases[i], NULL, true);
        fused_qkv_rope(&cases[0], "4", false);
        /* rows the K formats cannot take: 640 (whole 32-blocks), 200 (pieces of 8) */
        if (ct_dtype_block_size(g_alt[0]) == 256) continue;
        g_odd_k = ct_dtype_is_quantized(g_alt[0]) ? 640 : 200;
        fused_odd_rows(NULL, 0);
        fused_odd_rows("2", 0);
        g_odd_k = 512;
    }
    g_alt_on = false;
}

/* The gated launches with GEGLU (Gemma 3's MLP, gelu's tanh form on the gate): the K
 * formats, and the 32-blocks at Gemma 3 270M's width, 640. */
static void test_fused_geglu(void)
{
    if (!have_device()) return;
    g_geglu = true;
    fused_step_rows(NULL, true, 0);
    fused_odd_rows(NULL, 0);
    fused_odd_rows("4", 0);
    g_alt_on = true, g_alt[0] = CT_Q5_0, g_alt[1] = CT_Q8_0, g_odd_k = 640;
    fused_odd_rows(NULL, 0);
    g_alt_on = false, g_odd_k = 512, g_geglu = false;
}

/* Linears of one x whose formats no kernel family holds together (Q4_K, Q5_K, Q4_K: Q5_K's
 * kernels take Q6_K, not Q4_K): the planner fuses the norm with the first and leaves the
 * others to launches of their own (2 ops fused), and every output matches the CPU (2e-3,
 * its 8-bit x, as the fused tests above). */
static ct_status mixed_ops(const ct_tensor *x, const ct_tensor *g, ct_tensor *const *w, ct_tensor **o)
{
    ct_tensor *n = NULL;
    ct_status s = ct_rms_norm(x, g, 1e-5, &n);
    for (int i = 0; i < 3 && s == CT_OK; i++) s = ct_linear(n, w[i], NULL, &o[i]);
    ct_tensor_free(n);
    return s;
}

static void test_fused_mixed_families(void)
{
    if (!have_device()) return;
    th_rng r = {0x313};
    const int64_t K = 512, N = 37, sg[1] = {K}, sx[2] = {1, K};
    ct_tensor *g = th_random(&r, 1, sg, CT_F32, 0.5, 1.5), *x = th_random(&r, 2, sx, CT_F32, -1, 1);
    ct_tensor *w[3] = {qweight(&r, CT_Q4_K, N, K, NULL), qweight(&r, CT_Q5_K, N, K, NULL), qweight(&r, CT_Q4_K, N, K, NULL)};
    ct_tensor *o[3] = {0}, *c[3] = {0};
    ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS);
    int fused0 = ocl_quant_fused_total();
    ct_step *st = NULL;
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_step_begin());
    CHECK_OK(mixed_ops(x, g, w, o));
    CHECK_OK(ct_step_end(&st));
    CHECK_MSG(ocl_quant_fused_total() - fused0 == 2, "%d ops fused, expected 2 (the norm and the first Q4_K linear)",
              ocl_quant_fused_total() - fused0);
    if (st) CHECK_OK(ct_step_run(st));
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(mixed_ops(x, g, w, c));
    ct_exec_force_device(NULL);
    for (int i = 0; i < 3; i++) {
        double *got = o[i] ? th_values(o[i]) : NULL, *ref = c[i] ? th_values(c[i]) : NULL;
        int nf = 0;
        double e = got && ref ? devcheck_nmse(got, ref, N, &nf) : 1;
        CHECK_MSG(!nf && e <= 2e-3, "output %d (%s): NMSE %.3g vs the cpu (non-finite %d)", i, ct_dtype_name(w[i]->dtype),
                  e, nf);
        free(got), free(ref);
    }
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
    ct_step_free(st);
    for (int i = 0; i < 3; i++) ct_tensor_free(o[i]), ct_tensor_free(c[i]), ct_tensor_free(w[i]);
    ct_tensor_free(g), ct_tensor_free(x);
}

/* One row of x through f16 / bf16 weights (the nn group's LINEAR handed to mv1xh), the
 * 32-blocks (mv1xl), Q5_K (mv1xk) and Q2_K / Q3_K (mv1xs) with a bias. Float weights against the CPU, which
 * multiplies the same exact widened weights by f32 x (only the summation order differs:
 * 1e-10); the quantized ones against the f64 product of their dequantized weights (1e-9, as
 * test_linear: the CPU rounds x to 8 bits, which test_linear already bounds). */
static void linear_other_once(ct_dtype t, int64_t N, int64_t K, const char *rows, th_rng *r)
{
    int64_t sw[2] = {N, K}, sx[2] = {1, K}, sb[1] = {N};
    bool q = ct_dtype_is_quantized(t);
    double *wd = NULL;
    ct_tensor *w = q ? qweight(r, t, N, K, &wd) : th_random(r, 2, sw, t, -1, 1);
    ct_tensor *x = th_random(r, 2, sx, CT_F32, -1, 1), *b = th_random(r, 1, sb, CT_F32, -1, 1), *y = NULL;
    char what[96];
    snprintf(what, sizeof what, "linear %s N %lld K %lld M 1, rows/group %s", ct_dtype_name(t), (long long)N, (long long)K,
             rows ? rows : "auto");
    ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS);
    int mv0 = ocl_quant_mv1_total();
    if (!q) {
        devcheck_op(g_dev, what, do_linear, (ct_tensor *[]){x, w, b}, 3, NULL, 1e-10);
    } else {
        CHECK_OK(ct_exec_force_device(g_dev));
        CHECK_OK(ct_linear(x, w, b, &y));
        CHECK_OK(ct_exec_force_device(NULL));
        double *got = y ? th_values(y) : NULL, *ref = linear_ref_of(th_values(x), wd, b, 1, N, K);
        int nf = 0;
        double e = got ? devcheck_nmse(got, ref, N, &nf) : 1;
        CHECK_MSG(!nf && e <= 1e-9, "%s: NMSE %.3g vs the f64 reference (non-finite %d)", what, e, nf);
        free(got), free(ref);
    }
    CHECK_MSG(ocl_quant_mv1_total() - mv0 == 1, "%s: %d one-row launches, expected 1", what, ocl_quant_mv1_total() - mv0);
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
    ct_tensor_free(w), ct_tensor_free(x), ct_tensor_free(b), ct_tensor_free(y);
    free(wd);
}

static void test_linear_other_row(void)
{
    if (!have_device()) return;
    th_rng r = {0xf1f0};
    const ct_dtype ts[] = {CT_F16, CT_BF16, CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q5_K, CT_Q2_K, CT_Q3_K};
    /* TinyLlama's widths, and rows the K formats' kernels cannot take: Gemma 3 270M's 640,
     * SmolLM2's 576 (whole 32-blocks), 200 (whole pieces of 8 for float weights) */
    const int64_t shapes[][2] = {{37, 2048}, {5, 768}, {70, 5632}, {9, 640}, {13, 576}, {11, 200}};
    for (size_t ti = 0; ti < sizeof ts / sizeof ts[0]; ti++)
        for (int si = 0; si < 6; si++)
            for (int ri = 0; ri < 5; ri++) {
                if (shapes[si][1] % (ct_dtype_is_quantized(ts[ti]) ? ct_dtype_block_size(ts[ti]) : 8)) continue;
                const char *rows = ri ? MV1_ROWS[ri - 1] : NULL;
                if (rows) setenv("CTORCH_OPENCL_MV1_ROWS", rows, 1);
                linear_other_once(ts[ti], shapes[si][0], shapes[si][1], rows, &r);
                unsetenv("CTORCH_OPENCL_MV1_ROWS");
            }
}

int main(int argc, char **argv)
{
    setenv("CTORCH_OPENCL_POISON", "1", 1);
    th_args(argc, argv);
    RUN(test_dequantize);
    RUN(test_embedding);
    RUN(test_embedding_bad_id);
    RUN(test_linear);
    RUN(test_linear_shapes);
    RUN(test_linear_scales);
    RUN(test_linear_q8);
    RUN(test_matmul_vector);
    RUN(test_fused_step);
    RUN(test_fused_odd);
    RUN(test_fused_qkv_rope);
    RUN(test_fused_other);
    RUN(test_fused_geglu);
    RUN(test_fused_mixed_families);
    RUN(test_linear_other_row);
    return th_finish();
}
