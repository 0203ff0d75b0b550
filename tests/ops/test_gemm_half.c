/* f16 / bf16 weights in the built-in GEMM (prefill linear): ct_linear and
 * cpu_gemm_f32_bhalf against a double-precision reference at every SIMD level,
 * over micro-tile / K-block / column-block edges and strided weight views; bf16 weights
 * also through the AVX512-BF16 dots (activations rounded to bf16) where the CPU has them. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/gemm.h"
#include "core/cpuid.h"
#include "harness.h"

/* Exact decoders, written here so the reference does not share the library's. */
static double f16_bits_to_double(uint16_t h)
{
    int e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
    return (h & 0x8000) ? -v : v;
}

static double bf16_bits_to_double(uint16_t h)
{
    int e = (h >> 7) & 255, m = h & 127;
    double v = e == 0 ? ldexp(m, -133) : ldexp(128 + m, e - 134);
    return (h & 0x8000) ? -v : v;
}

/* Random finite halfs of magnitude ~2^-6..2, some of them zero or subnormal. */
static uint16_t rand_half(th_rng *r, bool bf)
{
    uint16_t sign = th_uniform(r, 0, 1) < 0.5 ? 0x8000 : 0;
    double u = th_uniform(r, 0, 1);
    if (bf) {
        int e = u < 0.02 ? 0 : 121 + (int)th_uniform(r, 0, 7);
        return (uint16_t)(sign | e << 7 | (int)th_uniform(r, 0, 128));
    }
    int e = u < 0.02 ? 0 : 9 + (int)th_uniform(r, 0, 7);
    return (uint16_t)(sign | e << 10 | (int)th_uniform(r, 0, 1024));
}

static double half_val(uint16_t h, bool bf) { return bf ? bf16_bits_to_double(h) : f16_bits_to_double(h); }

/* v rounded to bf16's 8 significant bits, to nearest with ties to even (nearbyint in the
 * default rounding mode): the activations of the AVX512-BF16 path (gemm_bf16.c). */
static double round_bf16(double v)
{
    if (v == 0 || !isfinite(v)) return v;
    int e;
    double f = frexp(v, &e);
    return ldexp(nearbyint(ldexp(f, 8)), e - 8);
}

/* Worst |got - want| / bound over the [M, N] output, where element (m, n) is
 * sum_k x[m, k] w[k, n] (+ c0). Bound: f32 accumulation of K + 1 terms (blocked
 * sums, the bias / accumulate term) gives |error| <= (K + 1) 2^-24 sum|terms|
 * (first order); the factor 2 covers the second-order terms and the blocking. x16: f16
 * weights through AMX (gemm_amx.c), each product off by up to ~2^-15 of itself more. */
static double worst_err(const float *got, int64_t ldc, int64_t M, int64_t N, int64_t K, const float *x, int64_t rsx,
                        int64_t csx, const uint16_t *w, int64_t rsw, int64_t csw, bool bf, bool xbf, bool x16,
                        const double *c0)
{
    double worst = 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double s = c0 ? c0[n] : 0.0, sabs = c0 ? fabs(c0[n]) : 0.0;
            for (int64_t k = 0; k < K; k++) {
                double xv = xbf ? round_bf16(x[m * rsx + k * csx]) : (double)x[m * rsx + k * csx];
                double t = xv * half_val(w[k * rsw + n * csw], bf);
                s += t;
                sabs += fabs(t);
            }
            double bound = (2.0 * (double)(K + 1) * ldexp(1, -24) + (x16 ? ldexp(1, -15) : 0.0)) * sabs + 1e-30;
            double e = fabs((double)got[m * ldc + n] - s) / bound;
            if (!(e <= worst)) worst = e; /* NaN counts as a failure */
        }
    return worst;
}

static const char *lvl_name(int lvl) { return lvl == 0 ? "portable" : lvl == 1 ? "avx2" : "avx512"; }

/* Passes 0..2: SIMD levels (AMX at 2 where the CPU has it); pass 3: AVX-512 with the bf16
 * dots and AMX turned off (bf16 weights widened to f32 like f16); pass 4: AVX-512 with AMX
 * off, the bf16 dots on (run only where AMX hid them at pass 2). False when this CPU (or
 * CTORCH_SIMD) lacks the level. */
#define N_PASSES 5
static bool set_pass(int pass)
{
    int lvl = pass > 2 ? 2 : pass;
    cpu_amx_disable(false);
    bool amx = cpu_amx_usable(CPU_AMX_BF16);
    cpu_simd_set_level((cpu_simd)lvl);
    cpu_gemm_bf16_dot_disable(pass == 3);
    cpu_amx_disable(pass >= 3);
    if ((int)cpu_simd_level() != lvl) {
        fprintf(stderr, "  skipped SIMD level %d: this CPU lacks it (or CTORCH_SIMD caps it)\n", lvl);
        return false;
    }
    if (pass == 4 && !amx) return false;
    if (pass >= 2)
        fprintf(stderr, "  avx512 pass %d: f16 / bf16 weights %s\n", pass,
                cpu_gemm_amx_on()         ? "through AMX tiles"
                : cpu_gemm_bf16_dot_on() ? "f16 widened to f32, bf16 through AVX512-BF16 dots"
                                         : "widened to f32");
    return true;
}

static void reset_passes(void)
{
    cpu_gemm_bf16_dot_disable(false);
    cpu_amx_disable(false);
    cpu_simd_set_level(CPU_SIMD_AVX512);
}

/* How the GEMM treats x for weights rows along k (rsb = 1): rounded to bf16 (bf16 weights
 * through AMX or the bf16 dots), split into bf16 terms (f16 weights through AMX), or exact. */
static void x_route(bool bf, bool rows_along_k, bool *xbf, bool *x16)
{
    bool amx = rows_along_k && cpu_gemm_amx_on();
    *xbf = bf && rows_along_k && (amx || cpu_gemm_bf16_dot_on());
    *x16 = !bf && amx;
}

/* ct_linear(x [M, K], w [N, K] half, bias) with w contiguous, a row slice (odd row
 * stride, still the transposing packer), a transposed storage and a stepped slice
 * (both the generic packer). */
static void linear_case(th_rng *r, int64_t M, int64_t N, int64_t K, bool bf, bool with_bias, int lvl)
{
    ct_dtype dt = bf ? CT_BF16 : CT_F16;
    /* storage big enough for every view below: [N, 2K + 3] and its transpose */
    int64_t KS = 2 * K + 3;
    uint16_t *wst = malloc(sizeof(uint16_t) * (size_t)(N * KS + 1));
    for (int64_t i = 0; i < N * KS; i++) wst[i] = rand_half(r, bf);
    float *xs = malloc(sizeof(float) * (size_t)(M * K + 1));
    for (int64_t i = 0; i < M * K; i++) xs[i] = (float)th_uniform(r, -1, 1);
    double *bias = malloc(sizeof(double) * (size_t)(N + 1));
    float *biasf = malloc(sizeof(float) * (size_t)(N + 1));
    for (int64_t n = 0; n < N; n++) biasf[n] = (float)th_uniform(r, -1, 1), bias[n] = biasf[n];

    int64_t sx[2] = {M, K}, sb[1] = {N}, sfull[2] = {N, KS}, sT[2] = {KS, N};
    ct_tensor *x = NULL, *b = NULL, *wfull = NULL, *wT = NULL;
    CHECK_OK(ct_tensor_from_data(2, sx, CT_F32, xs, &x));
    CHECK_OK(ct_tensor_from_data(1, sb, CT_F32, biasf, &b));
    CHECK_OK(ct_tensor_from_data(2, sfull, dt, wst, &wfull));
    CHECK_OK(ct_tensor_from_data(2, sT, dt, wst, &wT)); /* same bits read as [KS, N] */
    for (int view = 0; view < 4 && x && b && wfull && wT; view++) {
        ct_tensor *w = NULL, *tmp = NULL, *y = NULL;
        int64_t rsw, csw, off; /* reference: w[n, k] = wst[off + n * rsw' ...], as B[k, n] strides */
        if (view == 0) { /* contiguous [N, K]: copy of the narrow */
            CHECK_OK(ct_narrow(wfull, 1, 0, K, &tmp));
            if (tmp) CHECK_OK(ct_contiguous(tmp, &w));
            rsw = 1, csw = K, off = 0;
        } else if (view == 1) { /* columns 3..3+K of [N, KS]: rows KS apart */
            CHECK_OK(ct_narrow(wfull, 1, 3, K, &w));
            rsw = 1, csw = KS, off = 3;
        } else if (view == 2) { /* [KS, N] transposed, first K columns: w[n, k] at k * N + n */
            CHECK_OK(ct_transpose(wT, 0, 1, &tmp));
            if (tmp) CHECK_OK(ct_narrow(tmp, 1, 0, K, &w));
            rsw = N, csw = 1, off = 0;
        } else { /* every other column: stride 2 along K */
            CHECK_OK(ct_slice(wfull, 1, 1, 1 + 2 * K, 2, &w));
            rsw = 2, csw = KS, off = 1;
        }
        const uint16_t *wref = wst + off;
        uint16_t *wcopy = NULL;
        if (view == 0) { /* the contiguous copy has its own storage */
            wcopy = malloc(sizeof(uint16_t) * (size_t)(N * K + 1));
            for (int64_t n = 0; n < N; n++)
                for (int64_t k = 0; k < K; k++) wcopy[n * K + k] = wst[n * KS + k];
            wref = wcopy;
        }
        if (w) CHECK_OK(ct_linear(x, w, with_bias ? b : NULL, &y));
        if (y) {
            const float *py = NULL;
            CHECK_OK(ct_tensor_data(y, (const void **)&py));
            CHECK(ct_tensor_dim(y, 0) == M && ct_tensor_dim(y, 1) == N);
            if (py) {
                /* linear's GEMM (M > 8 here): weights with rows along k may take AMX or the bf16 dots */
                bool xbf, x16;
                x_route(bf, rsw == 1, &xbf, &x16);
                double e = worst_err(py, N, M, N, K, xs, K, 1, wref, rsw, csw, bf, xbf, x16, with_bias ? bias : NULL);
                CHECK_MSG(e <= 1.0, "%s %s M=%lld N=%lld K=%lld view %d bias %d: error %.3g of the bound",
                          lvl_name(lvl), bf ? "bf16" : "f16", (long long)M, (long long)N, (long long)K, view,
                          with_bias, e);
            }
        }
        free(wcopy);
        ct_tensor_free(y);
        ct_tensor_free(w);
        ct_tensor_free(tmp);
    }
    ct_tensor *all[] = {x, b, wfull, wT};
    for (int i = 0; i < 4; i++) ct_tensor_free(all[i]);
    free(wst);
    free(xs);
    free(bias);
    free(biasf);
}

static void test_linear_half(void)
{
    th_rng r = {0x5eed};
    /* M crosses the 6- and 8-row micro-tiles and the A blocks; N and K the 16/32-wide
     * panels, the 16 x 16 packer blocks and the 256-deep K blocks */
    static const int64_t mnk[][3] = {{9, 37, 45}, {17, 37, 45}, {64, 40, 33}, {130, 96, 300},
                                     {130, 37, 17}, {9, 1, 1}, {12, 64, 256}, {10, 33, 16}};
    for (int pass = 0; pass < N_PASSES; pass++) {
        if (!set_pass(pass)) continue;
        for (size_t c = 0; c < sizeof mnk / sizeof mnk[0]; c++)
            for (int bf = pass == 3; bf < 2; bf++)
                linear_case(&r, mnk[c][0], mnk[c][1], mnk[c][2], bf, (c + (size_t)bf) % 2 == 0, pass > 2 ? 2 : pass);
    }
    reset_passes();
}

/* The entry itself: accumulate, K = 0, more than 4096 columns, more than 256 rows
 * (the shared packed-B path, with its column blocks), a transposed x and output rows
 * wider than N (ldc > N). */
static void test_bhalf_entry(void)
{
    th_rng r = {77};
    /* and 1-4 rows against full and partial 32-column panels, odd K, K past one 32-k block */
    static const int64_t mnk[][3] = {{9, 4133, 20}, {33, 50, 270}, {1, 17, 40}, {5, 7, 0},  {300, 45, 40},
                                     {270, 4099, 3}, {2, 64, 97}, {3, 40, 64}, {4, 32, 33}, {1, 96, 1}};
    for (int pass = 0; pass < N_PASSES; pass++) {
        if (!set_pass(pass)) continue;
        int lvl = pass > 2 ? 2 : pass;
        for (size_t c = 0; c < sizeof mnk / sizeof mnk[0]; c++)
            for (int bf = pass == 3; bf < 2; bf++) {
                int64_t M = mnk[c][0], N = mnk[c][1], K = mnk[c][2], ldc = N + 3;
                uint16_t *w = malloc(sizeof(uint16_t) * (size_t)(N * K + 1));
                float *x = malloc(sizeof(float) * (size_t)(M * K + 1)), *C = malloc(sizeof(float) * (size_t)(M * ldc));
                double *c0 = malloc(sizeof(double) * (size_t)N);
                for (int64_t i = 0; i < N * K; i++) w[i] = rand_half(&r, bf);
                for (int64_t i = 0; i < M * K; i++) x[i] = (float)th_uniform(&r, -1, 1);
                for (int64_t n = 0; n < N; n++) c0[n] = 0.25;
                for (int acc = 0; acc < 2; acc++) {
                    for (int64_t i = 0; i < M * ldc; i++) C[i] = 0.25f;
                    /* x stored column-major (rsx = 1, csx = M), w as [N, K] (B = w^T) */
                    CHECK_OK(cpu_gemm_f32_bhalf(M, N, K, x, 1, M, w, 1, K, bf, C, ldc, acc));
                    bool xbf, x16;
                    x_route(bf, true, &xbf, &x16);
                    double e = worst_err(C, ldc, M, N, K, x, 1, M, w, 1, K, bf, xbf, x16, acc ? c0 : NULL);
                    CHECK_MSG(e <= 1.0, "%s %s %lldx%lldx%lld acc %d: error %.3g of the bound", lvl_name(lvl),
                              bf ? "bf16" : "f16", (long long)M, (long long)N, (long long)K, acc, e);
                    bool pad_ok = true; /* columns past N are not written */
                    for (int64_t i = 0; i < M; i++)
                        for (int64_t j = N; j < ldc; j++) pad_ok = pad_ok && C[i * ldc + j] == 0.25f;
                    CHECK(pad_ok);
                }
                free(w);
                free(x);
                free(C);
                free(c0);
            }
    }
    reset_passes();
}

/* cpu_gemm_f32 (BLAS or built-in, whichever it routes to) on a product large enough
 * for the routing rule, with B as w^T and as a plain row-major matrix. */
static void test_f32_route(void)
{
    th_rng r = {78};
    int64_t M = 130, N = 96, K = 300;
    float *x = malloc(sizeof(float) * (size_t)(M * K)), *w = malloc(sizeof(float) * (size_t)(N * K));
    float *C = malloc(sizeof(float) * (size_t)(M * N));
    for (int64_t i = 0; i < M * K; i++) x[i] = (float)th_uniform(&r, -1, 1);
    for (int64_t i = 0; i < N * K; i++) w[i] = (float)th_uniform(&r, -1, 1);
    for (int trans = 0; trans < 2; trans++) {
        int64_t rsb = trans ? 1 : N, csb = trans ? K : 1;
        CHECK_OK(cpu_gemm_f32(M, N, K, x, K, 1, w, rsb, csb, C, N, false));
        double worst = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = 0, sabs = 0;
                for (int64_t k = 0; k < K; k++) {
                    double t = (double)x[m * K + k] * w[k * rsb + n * csb];
                    s += t;
                    sabs += fabs(t);
                }
                /* same accumulation bound as worst_err */
                double e = fabs(C[m * N + n] - s) / (2.0 * (double)(K + 1) * ldexp(1, -24) * sabs + 1e-30);
                if (!(e <= worst)) worst = e;
            }
        CHECK_MSG(worst <= 1.0, "trans %d: error %.3g of the bound", trans, worst);
    }
    free(x);
    free(w);
    free(C);
}

int main(void)
{
    /* the CPU's kernels are under test (a GPU rounds f16 products its own way) */
    setenv("CTORCH_DEVICES", "cpu", 1);
    RUN(test_linear_half);
    RUN(test_bhalf_entry);
    RUN(test_f32_route);
    return th_finish();
}
