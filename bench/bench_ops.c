/* ctorch-bench-ops: throughput of the core ops against what the hardware or a
 * reference library does with the same work. Table on stdout (or --json),
 * progress on stderr. Every figure is the median of several timed repeats after
 * one warm-up; the repeat count is printed beside it. Timings are not asserted
 * anywhere: the bench/smoke test only checks that this runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch/ctorch.h"
#include "exec/exec.h"

#ifdef CTORCH_HAVE_BLAS
#include <cblas.h>
#endif

typedef struct result {
    char name[48];
    char size[40];
    char device[32];
    double value;     /* median, in unit */
    const char *unit;
    double ref;       /* reference figure in the same unit, 0 if none */
    const char *ref_name;
    int repeats;
} result;

#define MAX_RESULTS 32
static result g_res[MAX_RESULTS];
static int g_n_res;
static bool g_quick;
static const char *g_only; /* --only: run the groups whose name contains this */

static bool selected(const char *group) { return !g_only || strstr(group, g_only); }

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* How many repeats fit in about `budget` seconds given one run's time (3..max). */
static int repeats_for(double one, double budget, int max)
{
    int r = one > 0 ? (int)(budget / one) : max;
    if (g_quick) max = 3;
    return r < 3 ? 3 : r > max ? max : r;
}

static void die(const char *what)
{
    fprintf(stderr, "ctorch-bench-ops: %s failed: %s\n", what, ct_last_error());
    exit(1);
}
#define TRY(expr)                       \
    do {                                \
        if ((expr) != CT_OK) die(#expr); \
    } while (0)

static const char *last_device(void)
{
    static char buf[32];
    ct_exec_record r;
    snprintf(buf, sizeof buf, "%s", ct_exec_last(&r) == CT_OK ? r.device : "?");
    return buf;
}

static result *add_result(const char *name, const char *size, const char *unit)
{
    if (g_n_res == MAX_RESULTS) exit(1);
    result *r = &g_res[g_n_res++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->size, sizeof r->size, "%s", size);
    snprintf(r->device, sizeof r->device, "%s", last_device());
    r->unit = unit;
    r->ref_name = "";
    return r;
}

/* ---- matmul ---- */

/* Median seconds of ct_linear(x, w) over repeats sized to ~1.5 s (at most cap), after
 * `warm` untimed calls; the result is read back each time. */
static double time_linear(const ct_tensor *x, const ct_tensor *w, int warm, int cap, int *reps_out)
{
    double t[64];
    int reps = 0;
    for (int i = -warm; i < reps; i++) {
        ct_tensor *y = NULL;
        double t0 = now_s();
        TRY(ct_linear(x, w, NULL, &y));
        const void *p;
        TRY(ct_tensor_data(y, &p));
        double dt = now_s() - t0;
        ct_tensor_free(y);
        if (i < 0) reps = repeats_for(dt, 1.5, cap);
        else t[i] = dt;
    }
    *reps_out = reps;
    return median(t, reps);
}

/* Prefill-shaped (GFLOP/s) or, with decode, decode-shaped (GB/s of weight bytes: decode
 * streams each once; M of 1..8 and w larger than the last-level cache) linear with half
 * weights: x [M, K] f32, w [N, K] f16 or bf16. */
static void bench_linear_half_as(int64_t M, int64_t N, int64_t K, ct_dtype wt, bool decode)
{
    int64_t sx[2] = {M, K}, sw[2] = {N, K};
    ct_tensor *x = NULL, *w = NULL;
    TRY(ct_rand(2, sx, CT_F32, 3, &x));
    TRY(ct_rand(2, sw, wt, 4, &w));
    int reps = 0;
    double med = time_linear(x, w, decode ? 2 : 1, decode ? 40 : 25, &reps);
    char size[40], name[48];
    snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)M, (long long)N, (long long)K);
    if (decode) snprintf(name, sizeof name, "linear %s w decode", ct_dtype_name(wt));
    else snprintf(name, sizeof name, "linear %s w (ct_linear)", wt == CT_BF16 ? "bf16" : "f16");
    result *r = add_result(name, size, decode ? "GB/s" : "GFLOP/s");
    r->value = (decode ? 2.0 * (double)(N * K) : 2.0 * (double)(M * N * K)) / med * 1e-9;
    r->repeats = reps;
    ct_tensor_free(x);
    ct_tensor_free(w);
}

static void bench_linear_half(int64_t M, int64_t N, int64_t K, ct_dtype wt) { bench_linear_half_as(M, N, K, wt, false); }

static void bench_linear_half_decode(int64_t M, int64_t N, int64_t K, ct_dtype wt)
{
    bench_linear_half_as(M, N, K, wt, true);
}

/* ---- the core's arithmetic peak (one thread): what a GEMM can reach at best ---- */
#if defined(__x86_64__)
#include <immintrin.h>
#define PEAK_ACC 12 /* independent chains, more than FMA latency x issue width needs */
__attribute__((target("avx512f"), noinline)) static float peak_fma512(int64_t iters)
{
    __m512 acc[PEAK_ACC], a = _mm512_set1_ps(1.0000001f), b = _mm512_set1_ps(0.9999999f);
    for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_fmadd_ps(a, acc[i], b);
    for (int i = 1; i < PEAK_ACC; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}
__attribute__((target("avx512f,avx512bf16"), noinline)) static float peak_bf16(int64_t iters)
{
    __m512 acc[PEAK_ACC];
    __m512bh a = (__m512bh)_mm512_set1_epi16(0x3f80), b = (__m512bh)_mm512_set1_epi16(0x3c00);
    for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    for (int i = 1; i < PEAK_ACC; i++) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    return _mm512_reduce_add_ps(acc[0]);
}

__attribute__((target("avx512f,avx512vnni"), noinline)) static float peak_vnni(int64_t iters)
{
    __m512i acc[PEAK_ACC], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_set1_epi32(i);
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
    for (int i = 1; i < PEAK_ACC; i++) acc[0] = _mm512_add_epi32(acc[0], acc[i]);
    return (float)_mm_cvtsi128_si32(_mm512_castsi512_si128(acc[0])); /* lane 0: the lanes wrap (no signed-overflow sum) */
}

/* The Q4_K / Q5_K panels' mix: two FMAs (a sub-block's scale and min) for every 8 vpdpbusd.
 * On Zen 4 the FMAs take the same pipes (measured: 81% of the pure vpdpbusd rate), so this
 * is the ceiling of those panels; the int8 products alone are counted. */
#define PEAK_MIX 8
__attribute__((target("avx512f,avx512vnni"), noinline)) static float peak_vnni_fma(int64_t iters)
{
    __m512i acc[PEAK_MIX], a = _mm512_set1_epi8(3), b = _mm512_set1_epi8(-2);
    __m512 f0 = _mm512_set1_ps(1.f), f1 = _mm512_set1_ps(2.f), x = _mm512_set1_ps(0.9999999f), y = _mm512_set1_ps(1e-7f);
    for (int i = 0; i < PEAK_MIX; i++) acc[i] = _mm512_set1_epi32(i);
    for (int64_t it = 0; it < iters; it++) {
        for (int i = 0; i < PEAK_MIX; i++) acc[i] = _mm512_dpbusd_epi32(acc[i], a, b);
        f0 = _mm512_fmadd_ps(f0, x, y), f1 = _mm512_fmadd_ps(f1, x, y);
    }
    for (int i = 1; i < PEAK_MIX; i++) acc[0] = _mm512_add_epi32(acc[0], acc[i]);
    return (float)_mm_cvtsi128_si32(_mm512_castsi512_si128(acc[0])) + _mm512_reduce_add_ps(_mm512_add_ps(f0, f1));
}

/* AVX2 machines: the f32 FMA and the int8 multiply the AVX2 quant panels use (vpmaddubsw, 32
 * products a ymm vector). Each multiply takes its chain's previous result as its unsigned
 * operand, so the compiler cannot hoist it and PEAK_ACC chains cover its latency. */
__attribute__((target("avx2,fma"), noinline)) static float peak_fma256(int64_t iters)
{
    __m256 acc[PEAK_ACC], a = _mm256_set1_ps(1.0000001f), b = _mm256_set1_ps(0.9999999f);
    for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm256_set1_ps((float)i);
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm256_fmadd_ps(a, acc[i], b);
    for (int i = 1; i < PEAK_ACC; i++) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    return _mm256_cvtss_f32(acc[0]);
}

__attribute__((target("avx2"), noinline)) static float peak_maddubs(int64_t iters)
{
    __m256i acc[PEAK_ACC], b = _mm256_set1_epi8(-2);
    for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm256_set1_epi8((char)(i + 1));
    for (int64_t it = 0; it < iters; it++)
        for (int i = 0; i < PEAK_ACC; i++) acc[i] = _mm256_maddubs_epi16(acc[i], b);
    for (int i = 1; i < PEAK_ACC; i++) acc[0] = _mm256_add_epi16(acc[0], acc[i]);
    return (float)_mm256_extract_epi16(acc[0], 0);
}

static volatile float g_sink;

/* flops_per_iter: 2 per product; median of 7 runs of ~20 ms */
static void bench_peak_one(const char *name, float (*fn)(int64_t), double flops_per_iter)
{
    int64_t iters = 2000000;
    double t[7];
    g_sink = fn(iters / 10); /* warm-up (clock ramp) */
    for (int i = 0; i < 7; i++) {
        double t0 = now_s();
        g_sink = fn(iters);
        t[i] = now_s() - t0;
    }
    result *r = add_result(name, "1 thread", "GFLOP/s");
    snprintf(r->device, sizeof r->device, "cpu core"); /* no op ran: no device from the executor */
    r->value = flops_per_iter * (double)iters / median(t, 7) * 1e-9;
    r->repeats = 7;
}

static void bench_peak(void)
{
    if (__builtin_cpu_supports("avx512f")) bench_peak_one("peak f32 FMA (zmm)", peak_fma512, 2.0 * 16 * PEAK_ACC);
    if (__builtin_cpu_supports("avx512bf16")) bench_peak_one("peak bf16 dot (vdpbf16ps)", peak_bf16, 2.0 * 32 * PEAK_ACC);
    /* the quant panels' int8 products (GOP/s counted as their GFLOP/s are) */
    if (__builtin_cpu_supports("avx512vnni")) bench_peak_one("peak int8 dot (vpdpbusd)", peak_vnni, 2.0 * 64 * PEAK_ACC);
    if (__builtin_cpu_supports("avx512vnni"))
        bench_peak_one("peak int8 dot + 2 FMA / 8", peak_vnni_fma, 2.0 * 64 * PEAK_MIX);
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        bench_peak_one("peak f32 FMA (ymm)", peak_fma256, 2.0 * 8 * PEAK_ACC);
        bench_peak_one("peak int8 multiply (vpmaddubsw ymm)", peak_maddubs, 2.0 * 32 * PEAK_ACC);
    }
}
#else
static void bench_peak(void) {}
#endif

static double time_matmul(const ct_tensor *a, const ct_tensor *b)
{
    ct_tensor *c = NULL;
    double t0 = now_s();
    TRY(ct_matmul(a, b, &c));
    const void *p;
    TRY(ct_tensor_data(c, &p)); /* the result is ready on the host: a fair end point on any device */
    double t = now_s() - t0;
    ct_tensor_free(c);
    return t;
}

static void bench_matmul(int64_t n)
{
    int64_t shape[2] = {n, n};
    ct_tensor *a = NULL, *b = NULL;
    TRY(ct_rand(2, shape, CT_F32, 1, &a));
    TRY(ct_rand(2, shape, CT_F32, 2, &b));
    double flop = 2.0 * (double)n * (double)n * (double)n;
    double t[64];
    int reps = repeats_for(time_matmul(a, b), 1.5, 25);
    for (int i = 0; i < reps; i++) t[i] = time_matmul(a, b);
    char size[40];
    snprintf(size, sizeof size, "%lldx%lldx%lld", (long long)n, (long long)n, (long long)n);
    result *r = add_result("matmul f32 (ct_matmul)", size, "GFLOP/s");
    r->value = flop / median(t, reps) * 1e-9;
    r->repeats = reps;
#ifdef CTORCH_HAVE_BLAS
    const float *pa, *pb;
    TRY(ct_tensor_data(a, (const void **)&pa));
    TRY(ct_tensor_data(b, (const void **)&pb));
    float *pc = malloc(sizeof(float) * (size_t)(n * n));
    for (int i = 0; i <= reps; i++) {
        double t0 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)n, (int)n, (int)n, 1.0f, pa, (int)n, pb, (int)n, 0.0f, pc,
                    (int)n);
        if (i) t[i - 1] = now_s() - t0; /* the first call is the warm-up */
    }
    free(pc);
    r->ref = flop / median(t, reps) * 1e-9;
    r->ref_name = "cblas_sgemm";
#endif
    ct_tensor_free(a);
    ct_tensor_free(b);
}

/* ---- bandwidth-bound ops against memcpy of the same bytes ---- */

/* memcpy GB/s counting bytes read + written, over `bytes` of traffic. */
static double memcpy_gbs(size_t bytes, int reps)
{
    size_t half = bytes / 2;
    char *src = malloc(half), *dst = malloc(half);
    if (!src || !dst) die("malloc");
    memset(src, 1, half);
    memset(dst, 0, half);
    double t[64];
    for (int i = 0; i <= reps; i++) {
        double t0 = now_s();
        memcpy(dst, src, half);
        if (i) t[i - 1] = now_s() - t0;
    }
    volatile char sink = dst[half / 2];
    (void)sink;
    free(src);
    free(dst);
    return (double)bytes / median(t, reps) * 1e-9;
}

typedef enum { BW_ADD, BW_SOFTMAX } bw_op;

static double time_bw(bw_op op, const ct_tensor *a, const ct_tensor *b)
{
    ct_tensor *c = NULL;
    double t0 = now_s();
    if (op == BW_ADD) TRY(ct_add(a, b, &c));
    else TRY(ct_softmax(a, -1, &c));
    const void *p;
    TRY(ct_tensor_data(c, &p));
    double t = now_s() - t0;
    ct_tensor_free(c);
    return t;
}

static void bench_bandwidth(size_t mib)
{
    int64_t n = (int64_t)(mib << 20) / 4, shape[2] = {n / 1024, 1024};
    ct_tensor *a = NULL, *b = NULL;
    TRY(ct_rand(2, shape, CT_F32, 3, &a));
    TRY(ct_rand(2, shape, CT_F32, 4, &b));
    char size[40];
    snprintf(size, sizeof size, "%zu MiB f32 [%lld, 1024]", mib, (long long)shape[0]);
    static const struct { bw_op op; const char *name; int tensors; } ops[] = {
        {BW_ADD, "add (ct_add)", 3}, /* read a, b; write out */
        {BW_SOFTMAX, "softmax last dim (ct_softmax)", 2},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        fprintf(stderr, "  %s ...\n", ops[k].name);
        double bytes = (double)ops[k].tensors * (double)(mib << 20), t[64];
        int reps = repeats_for(time_bw(ops[k].op, a, b), 1.0, 20);
        for (int i = 0; i < reps; i++) t[i] = time_bw(ops[k].op, a, b);
        result *r = add_result(ops[k].name, size, "GB/s");
        r->value = bytes / median(t, reps) * 1e-9;
        r->repeats = reps;
        r->ref = memcpy_gbs((size_t)bytes, reps);
        r->ref_name = "memcpy";
    }
    ct_tensor_free(a);
    ct_tensor_free(b);
}

/* ---- conv2d, a ResNet stage-2 layer ---- */

static double time_conv(const ct_tensor *x, const ct_tensor *w, const ct_conv2d_params *p)
{
    ct_tensor *y = NULL;
    double t0 = now_s();
    TRY(ct_conv2d(x, w, NULL, p, &y));
    const void *d;
    TRY(ct_tensor_data(y, &d));
    double t = now_s() - t0;
    ct_tensor_free(y);
    return t;
}

static void bench_conv(int64_t batch, int64_t ch, int64_t hw)
{
    int64_t xs[4] = {batch, ch, hw, hw}, ws[4] = {ch, ch, 3, 3};
    ct_tensor *x = NULL, *w = NULL;
    TRY(ct_randn(4, xs, CT_F32, 5, &x));
    TRY(ct_randn(4, ws, CT_F32, 6, &w));
    ct_conv2d_params p = {.padding = {1, 1}};
    double flop = 2.0 * (double)(batch * ch * hw * hw) * (double)(ch * 9), t[64];
    int reps = repeats_for(time_conv(x, w, &p), 3.0, 10);
    for (int i = 0; i < reps; i++) t[i] = time_conv(x, w, &p);
    char size[40];
    snprintf(size, sizeof size, "N%lld %lld->%lld %lldx%lld k3 p1", (long long)batch, (long long)ch, (long long)ch,
             (long long)hw, (long long)hw);
    result *r = add_result("conv2d f32 (ct_conv2d)", size, "GFLOP/s");
    r->value = flop / median(t, reps) * 1e-9;
    r->repeats = reps;
    ct_tensor_free(x);
    ct_tensor_free(w);
}

/* ---- prefill attention ---- */

/* Causal self-attention over a T-token prompt with an f16 KV cache (the LLM's layout):
 * q [1, Hq, T, D] f32, k/v [1, Hkv, T, D] f16; GFLOP/s counts the two products over the
 * causal half (2 * Hq * T * T * D * 2 / 2) and nothing for the softmax. */
static void bench_sdpa(const char *model, int64_t Hq, int64_t Hkv, int64_t T, int64_t D)
{
    int64_t qs[4] = {1, Hq, T, D}, ks[4] = {1, Hkv, T, D};
    ct_tensor *q = NULL, *k32 = NULL, *v32 = NULL, *k = NULL, *v = NULL;
    TRY(ct_randn(4, qs, CT_F32, 11, &q));
    TRY(ct_randn(4, ks, CT_F32, 12, &k32));
    TRY(ct_randn(4, ks, CT_F32, 13, &v32));
    TRY(ct_cast(k32, CT_F16, &k));
    TRY(ct_cast(v32, CT_F16, &v));
    ct_sdpa_params p = {.causal = true};
    double t[64];
    int reps = 0;
    for (int i = -1; i < reps; i++) {
        ct_tensor *y = NULL;
        double t0 = now_s();
        TRY(ct_sdpa(q, k, v, NULL, &p, &y));
        const void *d;
        TRY(ct_tensor_data(y, &d));
        double dt = now_s() - t0;
        ct_tensor_free(y);
        if (i < 0) reps = repeats_for(dt, 1.5, 64);
        else t[i] = dt;
    }
    char size[64];
    snprintf(size, sizeof size, "%s T%lld %lld/%lld heads D%lld", model, (long long)T, (long long)Hq, (long long)Hkv,
             (long long)D);
    result *r = add_result("sdpa causal, f16 KV", size, "GFLOP/s");
    r->value = 2.0 * (double)(Hq * T * T * D) / median(t, reps) * 1e-9;
    r->repeats = reps;
    ct_tensor_free(q), ct_tensor_free(k32), ct_tensor_free(v32), ct_tensor_free(k), ct_tensor_free(v);
}

/* ---- eager dispatch overhead ---- */

static void bench_dispatch(int iters)
{
    int64_t one[1] = {1};
    ct_tensor *a = NULL, *b = NULL;
    TRY(ct_ones(1, one, CT_F32, &a));
    TRY(ct_ones(1, one, CT_F32, &b));
    double t[16];
    int reps = g_quick ? 3 : 9;
    for (int r = 0; r <= reps; r++) {
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            ct_tensor *c = NULL;
            if (ct_add(a, b, &c) != CT_OK) die("ct_add");
            ct_tensor_free(c);
        }
        if (r) t[r - 1] = (now_s() - t0) / iters * 1e9;
    }
    char size[40];
    snprintf(size, sizeof size, "[1] f32, %d ops per repeat", iters);
    result *res = add_result("dispatch: ct_add + ct_tensor_free", size, "ns/op");
    res->value = median(t, reps);
    res->repeats = reps;
    res->ref = 300;
    res->ref_name = "goal";
    ct_tensor_free(a);
    ct_tensor_free(b);
}

/* ---- replayed step overhead: the same 1-element adds recorded once and replayed ---- */

#define REPLAY_CHAIN 256
/* One timed run of fn: ns per op. */
static double time_one(int iters, void (*fn)(void *), void *ctx)
{
    double t0 = now_s();
    for (int i = 0; i < iters; i++) fn(ctx);
    return (now_s() - t0) / ((double)iters * REPLAY_CHAIN) * 1e9;
}

static void replay_once(void *step)
{
    if (ct_step_run(step) != CT_OK) die("ct_step_run");
}

typedef struct kernel_ctx {
    ct_device *cpu;
    ct_op op;
} kernel_ctx;

/* The CPU backend's add called directly: the kernel's own cost, without any executor. */
static void kernel_once(void *vctx)
{
    kernel_ctx *k = vctx;
    for (int i = 0; i < REPLAY_CHAIN; i++)
        if (k->cpu->ops->run(k->cpu, &k->op) != CT_OK) die("cpu run");
}

static void bench_replay(int iters)
{
    int64_t one[1] = {1};
    ct_tensor *a = NULL, *b = NULL, *c = NULL;
    TRY(ct_ones(1, one, CT_F32, &a));
    TRY(ct_ones(1, one, CT_F32, &b));
    TRY(ct_ones(1, one, CT_F32, &c));
    ct_step *step = NULL;
    TRY(ct_step_begin());
    ct_tensor *x = a;
    for (int i = 0; i < REPLAY_CHAIN; i++) {
        ct_tensor *y = NULL;
        if (ct_add(x, b, &y) != CT_OK) die("ct_add");
        if (x != a) ct_tensor_free(x);
        x = y;
    }
    TRY(ct_step_end(&step));
    /* alternated, so a noisy neighbour hits both alike; medians of each */
    double tr[16], tk[16], td[16];
    int reps = g_quick ? 3 : 15;
    kernel_ctx k = {exec_find_device("cpu"), {.kind = CT_OP_ADD, .n_src = 2, .src = {a, b}, .dst = c}};
    for (int r = 0; r <= reps; r++) {
        double x1 = time_one(iters, replay_once, step), x2 = time_one(iters, kernel_once, &k);
        if (r) tr[r - 1] = x1, tk[r - 1] = x2, td[r - 1] = x1 - x2;
    }
    double replay = median(tr, reps), kernel = median(tk, reps), diff = median(td, reps);
    char size[48];
    snprintf(size, sizeof size, "[1] f32, steps of %d adds", REPLAY_CHAIN);
    result *res = add_result("replayed step: ns per op", size, "ns/op");
    res->value = replay;
    res->repeats = reps;
    res = add_result("  the CPU kernel alone (backend run)", size, "ns/op");
    res->value = kernel;
    res->repeats = reps;
    res = add_result("  executor time per replayed op", size, "ns/op");
    res->value = diff; /* median of the per-run differences */
    res->repeats = reps;
    res->ref = 100;
    res->ref_name = "goal";
    ct_step_free(step);
    ct_tensor_free(x);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(c);
}

/* ---- output ---- */

static void print_table(void)
{
    printf("%-36s %-30s %-8s %12s %-9s %14s %-13s %7s %5s\n", "benchmark", "size", "device", "median", "unit", "reference",
           "", "ratio", "reps");
    for (int i = 0; i < g_n_res; i++) {
        const result *r = &g_res[i];
        char ref[24] = "-", ratio[16] = "-";
        if (r->ref > 0) {
            snprintf(ref, sizeof ref, "%.2f", r->ref);
            snprintf(ratio, sizeof ratio, "%.2f", r->value / r->ref);
        }
        printf("%-36s %-30s %-8s %12.2f %-9s %14s %-13s %7s %5d\n", r->name, r->size, r->device, r->value, r->unit, ref,
               r->ref_name, ratio, r->repeats);
    }
    printf("\nmedian of <reps> timed runs after one warm-up; ratio = median / reference\n"
           "(GB/s counts bytes read + written; memcpy moves the same number of bytes).\n");
}

static void json_str(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') putchar('\\');
        putchar(*s);
    }
    putchar('"');
}

static void print_json(void)
{
    ct_device_info head;
    bool have_head = ct_chain_get(0, &head) == CT_OK;
    printf("{\"chain_head\":");
    json_str(have_head ? head.name : "");
    printf(",\"quick\":%s,\"results\":[", g_quick ? "true" : "false");
    for (int i = 0; i < g_n_res; i++) {
        const result *r = &g_res[i];
        printf("%s\n {\"name\":", i ? "," : "");
        json_str(r->name);
        printf(",\"size\":");
        json_str(r->size);
        printf(",\"device\":");
        json_str(r->device);
        printf(",\"median\":%.6g,\"unit\":", r->value);
        json_str(r->unit);
        printf(",\"repeats\":%d", r->repeats);
        if (r->ref > 0) {
            printf(",\"reference\":%.6g,\"reference_name\":", r->ref);
            json_str(r->ref_name);
            printf(",\"ratio\":%.6g", r->value / r->ref);
        }
        printf("}");
    }
    printf("\n]}\n");
}

int main(int argc, char **argv)
{
    bool json = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) g_quick = true;
        else if (!strcmp(argv[i], "--json")) json = true;
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) g_only = argv[++i];
        else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            printf("usage: ctorch-bench-ops [--quick] [--json] [--only matmul|peak|decode|bandwidth|conv2d|sdpa|dispatch]\n"
                   "  matmul 256..2048 vs cblas_sgemm, f16/bf16-weight linear (prefill shapes), f16/bf16 decode-shaped linear (GB/s),\n"
                   "  one core's f32 FMA and bf16 dot peak,\n"
                   "  add/softmax on 64 MiB vs memcpy,\n"
                   "  a ResNet conv2d layer, causal prefill attention (TinyLlama and Gemma 3 shapes, f16 KV),\n"
                   "  and the eager dispatch cost of a 1-element add.\n"
                   "  --quick: tiny sizes and 3 repeats (smoke test); --json: machine-readable output.\n");
            return 0;
        } else {
            fprintf(stderr, "ctorch-bench-ops: unknown option '%s' (try --help)\n", argv[i]);
            return 2;
        }
    }
    ct_device_info head;
    if (ct_chain_get(0, &head) == CT_OK) fprintf(stderr, "ctorch-bench-ops: chain head %s (%s)\n", head.name, head.description);

    static const int64_t mm_full[] = {256, 512, 1024, 2048}, mm_quick[] = {32, 64};
    const int64_t *mm = g_quick ? mm_quick : mm_full;
    int n_mm = g_quick ? 2 : 4;
    for (int i = 0; i < n_mm && selected("matmul"); i++) {
        fprintf(stderr, "matmul %lld ...\n", (long long)mm[i]);
        bench_matmul(mm[i]);
    }
    if (selected("matmul")) {
        fprintf(stderr, "linear f16 / bf16 ...\n");
        for (int bf = 0; bf < 2; bf++) {
            ct_dtype wt = bf ? CT_BF16 : CT_F16;
            if (g_quick) bench_linear_half(16, 40, 48, wt);
            else {
                bench_linear_half(128, 2048, 2048, wt);
                bench_linear_half(128, 5632, 2048, wt);
                bench_linear_half(128, 2048, 5632, wt);
            }
        }
    }
    if (selected("peak")) {
        fprintf(stderr, "arithmetic peak ...\n");
        bench_peak();
    }
    if (selected("decode")) {
        fprintf(stderr, "linear f16/bf16 decode ...\n");
        if (g_quick) bench_linear_half_decode(1, 40, 48, CT_F16);
        else {
            /* 128 MiB of weights: far past the 32 MiB L3 of the machines measured */
            for (int64_t m = 1; m <= 4; m *= 2) bench_linear_half_decode(m, 32768, 2048, CT_F16);
            bench_linear_half_decode(1, 32768, 2048, CT_BF16);
        }
    }
    if (selected("bandwidth")) {
        fprintf(stderr, "bandwidth ops ...\n");
        bench_bandwidth(g_quick ? 1 : 64);
    }
    if (selected("conv2d")) {
        fprintf(stderr, "conv2d ...\n");
        if (g_quick) bench_conv(1, 8, 16);
        else bench_conv(8, 64, 56);
    }
    if (selected("sdpa")) {
        fprintf(stderr, "sdpa ...\n");
        if (g_quick) bench_sdpa("tiny", 4, 2, 40, 16);
        else {
            bench_sdpa("TinyLlama", 32, 4, 128, 64);
            bench_sdpa("TinyLlama", 32, 4, 512, 64);
            bench_sdpa("Gemma 3 270M", 4, 1, 512, 256);
        }
    }
    if (selected("dispatch")) {
        fprintf(stderr, "dispatch ...\n");
        bench_dispatch(g_quick ? 1000 : 200000);
        fprintf(stderr, "replayed step ...\n");
        bench_replay(g_quick ? 10 : 2000);
    }

    if (json) print_json();
    else print_table();
    ct_exec_shutdown();
    return 0;
}
