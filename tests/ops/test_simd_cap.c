/* CTORCH_SIMD caps every kernel family: once the CPU device is made with the cap set
 * (here: ct_exec_shutdown, then ct_exec_reinit), the CPU
 * backend's level and the quant level (dots, multi-row GEMM, packed panels, kept repacks,
 * activation quantizers) stay inside the capped family, no AVX-512 quant kernel is handed
 * out below the avx512 cap (the AVX2 packed panels are, for every block format), and quantized / f16 / bf16 linear layers still agree with a
 * double-precision reference at every cap. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gemm.h"
#include "harness.h"
#include "quant/quant.h"

static const char *const k_caps[] = {"portable", "avx2", "avx512"};
static const char *const k_desc[] = {"portable kernels", "AVX2 kernels", "AVX-512 kernels"};
static const ct_dtype k_qtypes[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q2_K,
                                    CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_Q8_K};
#define N_QTYPES ((int)(sizeof k_qtypes / sizeof k_qtypes[0]))

static void cpu_description(char *buf, size_t n)
{
    buf[0] = 0;
    for (int i = 0; i < ct_device_count(); i++) {
        ct_device_info info;
        if (ct_device_get(i, &info) == CT_OK && info.kind == CT_DEVICE_CPU) snprintf(buf, n, "%s", info.description);
    }
}

/* The family (core_simd_cap) a quant level belongs to. */
static int quant_family(quant_simd l)
{
    return l == QUANT_SIMD_SCALAR ? 0 : l == QUANT_SIMD_AVX512_VNNI || l == QUANT_SIMD_AVX512 ? 2 : 1;
}

/* y = x w^T + b for weights of type wt (quantized from uniform values, or exact for
 * f16/bf16) against a double reference from the dequantized weights. Quantized: the
 * activations are rounded to 8-bit blocks, each |x| <= 1 moving by at most 1/254, so
 * |error| <= sum|w| / 254 (+ f32 rounding); half weights: f32 rounding only, but bf16
 * weights in prompts through the AVX512-BF16 dots or AMX round x to bf16 (|x| moves by at
 * most 2^-9: sum|w| / 512 more), and f16 weights in prompts through AMX split both operands
 * into bf16 terms (each product off by up to ~2^-15: sum|w| / 32768 more). */
static void check_linear(ct_dtype wt, int64_t M, int64_t K, int64_t N, uint64_t seed, const char *cap)
{
    th_rng r = {seed};
    int64_t sw[2] = {N, K}, sx[2] = {M, K}, sb[1] = {N};
    bool amx = M > 8 && cpu_gemm_amx_on();
    bool quant = ct_dtype_is_quantized(wt), xbf = wt == CT_BF16 && M > 8 && (cpu_gemm_bf16_dot_on() || amx);
    bool x16 = wt == CT_F16 && amx;
    ct_tensor *w = NULL, *y = NULL, *wd = NULL;
    ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1), *bias = th_random(&r, 1, sb, CT_F32, -1, 1);
    if (quant) {
        float *wf = malloc(sizeof(float) * (size_t)(N * K)), *wdq = malloc(sizeof(float) * (size_t)(N * K));
        size_t rb = ct_dtype_row_bytes(wt, K);
        char *wq = malloc(rb * (size_t)N);
        for (int64_t i = 0; i < N * K; i++) wf[i] = (float)th_uniform(&r, -1, 1);
        for (int64_t n = 0; n < N; n++) {
            CHECK_OK(quant_quantize_row(wt, wf + n * K, wq + (size_t)n * rb, K));
            CHECK_OK(quant_dequantize_row(wt, wq + (size_t)n * rb, wdq + n * K, K));
        }
        CHECK_OK(ct_tensor_from_data(2, sw, wt, wq, &w));
        CHECK_OK(ct_tensor_from_data(2, sw, CT_F32, wdq, &wd));
        free(wf), free(wdq), free(wq);
    } else {
        w = th_random(&r, 2, sw, wt, -1, 1);
    }
    CHECK_OK(ct_linear(x, w, bias, &y));
    if (y && w) {
        double *xv = th_values(x), *wv = th_values(quant ? wd : w), *yv = th_values(y), *bv = th_values(bias);
        double worst = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = bv[n], sabs = 0;
                for (int64_t k = 0; k < K; k++) {
                    s += xv[m * K + k] * wv[n * K + k];
                    sabs += fabs(wv[n * K + k]);
                }
                double bound = quant ? sabs / 254.0 + 1e-4
                                     : 2e-6 * (sabs + 1) + (xbf ? sabs / 512.0 : 0.0) + (x16 ? sabs / 32768.0 : 0.0);
                double e = fabs(yv[m * N + n] - s);
                if (e / bound > worst) worst = e / bound;
            }
        CHECK_MSG(worst <= 1.0, "CTORCH_SIMD=%s: %s linear M=%lld K=%lld: error %.3g of the bound", cap,
                  ct_dtype_name(wt), (long long)M, (long long)K, worst);
        free(xv), free(wv), free(yv), free(bv);
    }
    ct_tensor_free(w), ct_tensor_free(wd), ct_tensor_free(x), ct_tensor_free(bias), ct_tensor_free(y);
}

static void check_linears(const char *cap)
{
    /* M = 1: decode (kept repacks where the level has them); M > 8: prefill (packed
     * panels / multi-row GEMM); f16 and bf16: the half GEMM and the fused decode rows */
    check_linear(CT_Q4_K, 1, 512, 40, 1, cap);
    check_linear(CT_Q4_K, 20, 512, 37, 2, cap);
    check_linear(CT_Q6_K, 12, 256, 17, 3, cap);
    check_linear(CT_Q5_K, 3, 256, 21, 4, cap);
    check_linear(CT_Q8_0, 1, 96, 33, 5, cap);
    check_linear(CT_Q8_0, 16, 96, 35, 6, cap);
    check_linear(CT_Q4_0, 9, 64, 19, 7, cap);
    check_linear(CT_Q4_1, 11, 96, 19, 11, cap);
    check_linear(CT_Q5_0, 14, 160, 21, 12, cap);
    check_linear(CT_Q5_1, 9, 64, 17, 13, cap);
    check_linear(CT_Q2_K, 10, 512, 18, 14, cap);
    check_linear(CT_Q3_K, 13, 256, 23, 15, cap);
    check_linear(CT_F16, 1, 70, 19, 8, cap);
    check_linear(CT_F16, 20, 300, 45, 9, cap);
    check_linear(CT_BF16, 13, 37, 33, 10, cap);
}

/* Below the avx512 cap no quant getter hands out an AVX-512 kernel. */
static void check_no_avx512_quant(const char *cap)
{
    for (int i = 0; i < N_QTYPES; i++) {
        ct_dtype t = k_qtypes[i];
        quant_vec_dot_fn z = quant_get_vec_dot_at(t, QUANT_SIMD_AVX512_VNNI);
        CHECK_MSG(!z || quant_get_vec_dot(t) != z, "CTORCH_SIMD=%s: AVX-512 %s vec dot in use", cap, ct_dtype_name(t));
        CHECK_MSG(quant_get_vec_dot_nr(t) == NULL, "CTORCH_SIMD=%s: %s multi-row GEMM in use", cap, ct_dtype_name(t));
        const quant_panel_kernels *zp = quant_get_panel_at(t, QUANT_SIMD_AVX512_VNNI);
        /* kept repacks: none, or the AVX2 level's own (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) */
        const quant_panel_kernels *r = quant_get_repack(t);
        CHECK_MSG((!zp || quant_get_panel(t) != zp) && (!r || r == quant_get_repack_at(t, QUANT_SIMD_AVX2)),
                  "CTORCH_SIMD=%s: %s AVX-512 panels in use", cap, ct_dtype_name(t));
        quant_vec_dot_fn y = quant_get_vec_dot_at(t, QUANT_SIMD_AVX512);
        const quant_panel_kernels *yp = quant_get_panel_at(t, QUANT_SIMD_AVX512);
        if (yp == quant_get_panel_at(t, QUANT_SIMD_AVX2)) yp = NULL; /* inherited (Q8_0), not its own */
        CHECK_MSG((!y || quant_get_vec_dot(t) != y) && (!yp || quant_get_panel(t) != yp),
                  "CTORCH_SIMD=%s: %s avx512 (no VNNI) kernels in use", cap, ct_dtype_name(t));
    }
}

/* Under the avx2 cap every block format has its AVX2 packed panels for prefill (so the
 * prompt shapes of check_linears run through them), under portable none. */
static void check_avx2_panels(int c)
{
    for (int i = 0; i < N_QTYPES; i++) {
        ct_dtype t = k_qtypes[i];
        if (t == CT_Q8_K) continue; /* an activation format, never a weight */
        if (c == 0) CHECK_MSG(quant_get_panel(t) == NULL, "CTORCH_SIMD=portable: %s panels in use", ct_dtype_name(t));
        if (c == 1) CHECK_MSG(quant_get_panel(t) != NULL, "CTORCH_SIMD=avx2: %s has no panels", ct_dtype_name(t));
    }
}

static cpu_simd g_hw;

/* The CPU device (and with it the SIMD level) is made again only after a shutdown. */
static ct_status restart(void)
{
    ct_exec_shutdown();
    return ct_exec_reinit();
}

static void test_caps(void)
{
    for (int c = 0; c < 3; c++) {
        if (c > (int)g_hw) {
            fprintf(stderr, "  skipped CTORCH_SIMD=%s: this CPU lacks it\n", k_caps[c]);
            continue;
        }
        setenv("CTORCH_SIMD", k_caps[c], 1);
        CHECK_OK(restart());
        char desc[128];
        cpu_description(desc, sizeof desc);
        CHECK_MSG(strstr(desc, k_desc[c]) != NULL, "CTORCH_SIMD=%s: cpu device says \"%s\"", k_caps[c], desc);
        CHECK((int)cpu_simd_level() == c);
        quant_simd q = quant_simd_level();
        CHECK_MSG(quant_family(q) <= c, "CTORCH_SIMD=%s: quant level %s", k_caps[c], quant_simd_name(q));
        if (c == 0)
            for (int i = 0; i < N_QTYPES; i++)
                CHECK(quant_get_vec_dot(k_qtypes[i]) == quant_get_vec_dot_at(k_qtypes[i], QUANT_SIMD_SCALAR));
        if (c < 2) check_no_avx512_quant(k_caps[c]), check_avx2_panels(c);
        /* the cap is the best level inside the family, not lower */
        if (c == 1) CHECK(q == (quant_simd_supported(QUANT_SIMD_AVX2_VNNI) ? QUANT_SIMD_AVX2_VNNI : QUANT_SIMD_AVX2));
        if (c == 2) CHECK(q == quant_simd_detected());
        if (c == 2 && q == QUANT_SIMD_AVX512_VNNI) CHECK(quant_get_panel(CT_Q4_K) && quant_get_repack(CT_Q4_K));
        fprintf(stderr, "  CTORCH_SIMD=%s: cpu \"%s\", quant %s\n", k_caps[c], desc, quant_simd_name(q));
        check_linears(k_caps[c]);
    }
    unsetenv("CTORCH_SIMD");
    CHECK_OK(restart());
    CHECK(cpu_simd_level() == g_hw && quant_simd_level() == quant_simd_detected());
}

/* An unknown value is an error naming the variable (ops refuse to run, as for every bad
 * setting), and the level in force stays; a level forced by a test survives a re-read. */
static void test_bad_value_and_forced(void)
{
    if (g_hw > CPU_SIMD_PORTABLE) {
        setenv("CTORCH_SIMD", "avx2", 1);
        CHECK_OK(restart());
        CHECK(cpu_simd_level() == CPU_SIMD_AVX2);
    }
    cpu_simd before = cpu_simd_level();
    setenv("CTORCH_SIMD", "avx9000", 1);
    CHECK_STATUS(restart(), CT_ERR_INVALID_ARG);
    CHECK_MSG(strstr(ct_last_error(), "CTORCH_SIMD='avx9000'") != NULL, "message: %s", ct_last_error());
    ct_tensor *t = NULL;
    int64_t n = 4;
    CHECK_STATUS(ct_ones(1, &n, CT_F32, &t), CT_ERR_INVALID_ARG);
    CHECK(t == NULL);
    CHECK_MSG(cpu_simd_level() == before, "a refused CTORCH_SIMD changed the level: %d, was %d", (int)cpu_simd_level(),
              (int)before);
    unsetenv("CTORCH_SIMD");
    CHECK_OK(restart());
    CHECK(cpu_simd_level() == g_hw && quant_simd_level() == quant_simd_detected());
    cpu_simd_set_level(CPU_SIMD_PORTABLE);
    CHECK(quant_simd_level() == QUANT_SIMD_SCALAR);
    CHECK_OK(restart());
    CHECK_OK(ct_exec_reinit());
    CHECK(cpu_simd_level() == CPU_SIMD_PORTABLE && quant_simd_level() == QUANT_SIMD_SCALAR);
    cpu_simd_set_level(CPU_SIMD_AVX512);
    CHECK(cpu_simd_level() == g_hw && quant_simd_level() == quant_simd_detected());
}

int main(void)
{
    /* the CPU's kernels are under test (a GPU rounds f16 products its own way) */
    setenv("CTORCH_DEVICES", "cpu", 1);
    unsetenv("CTORCH_SIMD");
    if (restart() != CT_OK) {
        fprintf(stderr, "skipped: the executor does not start: %s\n", ct_last_error());
        return 77;
    }
    g_hw = cpu_simd_level();
    RUN(test_caps);
    RUN(test_bad_value_and_forced);
    return th_finish();
}
