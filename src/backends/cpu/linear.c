/* LINEAR on the CPU: y [M, N] = x [M, K] (f32) @ w[N, K]^T + bias.
 *
 * Few rows (decode, M <= DECODE_ROWS) with f32/f16/bf16 w: a fused kernel loads
 * (and widens) each weight row once and dots it with every activation row, in
 * parallel over N, so the weights stream through memory once. More rows: f32 w
 * goes to one GEMM with w's own strides (transB, no copy); f16/bf16 w goes to the
 * built-in GEMM, which widens it while packing its panels. Both read f16/bf16 weights of
 * 1 MiB and more from a dense copy kept in 2 MiB pages (kept_dense), and so do quantized
 * weights of a type the SIMD level keeps no repacked layout for.
 * Quantized w: activations are quantized once per row to the weight type's dot-product
 * partner. Decode: one quant vec dot per output, in parallel over N. Prefill: where the
 * type has packed-panel kernels, each task unpacks 16 weight rows once and multiplies them
 * with every activation row; otherwise tiles of multi-row (or single) dots, so each weight
 * row is read once per block of activation rows. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

#include "backends/cpu/gemm.h"
#include "core/config.h"
#include "core/cpuid.h"
#include "quant/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LIN_X86 1
#endif

#define DECODE_ROWS 8   /* up to this many activation rows use the fused / per-row kernels */
#define QUANT_MBLOCK 16 /* prefill: activation rows sharing one pass over a weight tile */
#define QUANT_NBLOCK 32


/* x's leading dims fold into rows with one stride? */
static bool x_rows(const ct_tensor *x, int64_t *rs)
{
    int nd = x->ndim;
    int64_t K = x->shape[nd - 1], expect = -1, span = 1;
    for (int d = nd - 2; d >= 0; d--) {
        if (x->shape[d] == 1) continue;
        if (expect == -1) expect = x->stride[d];
        if (x->stride[d] != expect * span) return false;
        span *= x->shape[d];
    }
    *rs = expect == -1 ? max64(K, 1) : expect;
    return true;
}

/* Contiguous f32 copy of x as [M, K]. */
static float *pack_x(const ct_tensor *x, const float *px, int64_t M, int64_t K)
{
    float *d = malloc(sizeof(float) * (size_t)max64(1, M * K));
    if (!d) return NULL;
    int nd = x->ndim;
    for (int64_t r = 0; r < M; r++) {
        int64_t off = 0, idx = r;
        for (int dd = nd - 2; dd >= 0; dd--) {
            off += (idx % x->shape[dd]) * x->stride[dd];
            idx /= x->shape[dd];
        }
        for (int64_t k = 0; k < K; k++) d[r * K + k] = px[off + k * x->stride[nd - 1]];
    }
    return d;
}

/* ---------------- fused row dots (decode) ---------------- */
/* Each weight row is loaded (and widened) once and multiplied into every activation
 * row. The row count is a compile-time constant in each variant (switch below), so
 * the M accumulators stay in registers. */
typedef struct row_job {
    const void *w;
    ct_dtype wt;     /* f32, f16 or bf16 */
    int64_t ws0;     /* elements between weight rows (rows are contiguous) */
    const float *x;  /* [M, K], rows ldx apart */
    int64_t ldx, M, N, K;
    float *out;      /* [M, N] */
    const float *bias;
    bool l2; /* 16-bit rows of one activation row prefetched into L2 (core_prefetch_l2) */
} row_job;

static inline float w_elem(const void *w, ct_dtype wt, int64_t k)
{
    if (wt == CT_F32) return ((const float *)w)[k];
    uint16_t h = ((const uint16_t *)w)[k];
    return wt == CT_BF16 ? ct_bf16_to_f32(h) : ct_f16_to_f32(h);
}

static void rows_tail(const row_job *j, const void *w, const float *x, int64_t K, int64_t k0, float *res)
{
    for (int64_t k = k0; k < K; k++) {
        float wv = w_elem(w, j->wt, k);
        for (int64_t m = 0; m < j->M; m++) res[m] += wv * x[m * j->ldx + k];
    }
}

static void rows_portable(const row_job *j, const void *w, const float *x, int64_t K, float *res)
{
    for (int64_t m = 0; m < j->M; m++) res[m] = 0.0f;
    rows_tail(j, w, x, K, 0, res);
}

#ifdef LIN_X86
/* One x row, nw weight rows ws0 elements apart: elements k0.. of each row's sum. */
static void w1_tail(const row_job *j, const void *w, const float *x, int64_t K, int64_t k0, float *res, int nw)
{
    size_t es = ct_dtype_block_bytes(j->wt);
    for (int r = 0; r < nw; r++) {
        const void *wr = (const char *)w + (size_t)(r * j->ws0) * es;
        for (int64_t k = k0; k < K; k++) res[r] += w_elem(wr, j->wt, k) * x[k];
    }
}

static void w1_portable(const row_job *j, const void *w, const float *x, int64_t K, float *res, int nw)
{
    for (int r = 0; r < nw; r++) res[r] = 0.0f;
    w1_tail(j, w, x, K, 0, res, nw);
}
#endif

#ifdef LIN_X86
#define ROW_CASES(F, WT)                                                                                               \
    case WT * 16 + 1: F(j, w, x, K, res, 1, WT); break;                                                                      \
    case WT * 16 + 2: F(j, w, x, K, res, 2, WT); break;                                                                      \
    case WT * 16 + 3: F(j, w, x, K, res, 3, WT); break;                                                                      \
    case WT * 16 + 4: F(j, w, x, K, res, 4, WT); break;                                                                      \
    case WT * 16 + 5: F(j, w, x, K, res, 5, WT); break;                                                                      \
    case WT * 16 + 6: F(j, w, x, K, res, 6, WT); break;                                                                      \
    case WT * 16 + 7: F(j, w, x, K, res, 7, WT); break;                                                                      \
    case WT * 16 + 8: F(j, w, x, K, res, 8, WT); break;

static inline __attribute__((always_inline, target("avx512f"))) __m512 load16(const void *w, int64_t k, ct_dtype wt)
{
    if (wt == CT_F32) return _mm512_loadu_ps((const float *)w + k);
    __m256i h = _mm256_loadu_si256((const __m256i *)((const uint16_t *)w + k));
    return wt == CT_BF16 ? _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)) : _mm512_cvtph_ps(h);
}

static inline __attribute__((always_inline, target("avx512f"))) void rows512(const row_job *j, const void *w, const float *x, int64_t K,
                                                                              float *res, const int M, const ct_dtype wt)
{
    __m512 acc[DECODE_ROWS], acc2[DECODE_ROWS];
    int64_t ldx = j->ldx, k = 0;
#pragma GCC unroll 8
    for (int m = 0; m < M; m++) acc[m] = acc2[m] = _mm512_setzero_ps();
    /* two k-steps per iteration: independent chains for the FMA latency when M is small */
    for (; k + 32 <= K; k += 32) {
        /* f32 weights stream from memory faster than the hardware prefetchers run ahead;
         * for f16/bf16 rows the same prefetch cost 10-30% (Zen 4, 1 thread: 16 vs 18 GB/s on
         * 4 KiB pages, 17 vs 25 GB/s on 2 MiB pages, a 128 MiB matrix) */
        if (wt == CT_F32) {
            _mm_prefetch((const char *)w + (k + 32) * 4 + 4096, _MM_HINT_T0);
            _mm_prefetch((const char *)w + (k + 32) * 4 + 4096 + 64, _MM_HINT_T0);
        }
        __m512 w0 = load16(w, k, wt), w1 = load16(w, k + 16, wt);
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) {
            acc[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + m * ldx + k), acc[m]);
            acc2[m] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + m * ldx + k + 16), acc2[m]);
        }
    }
    for (; k + 16 <= K; k += 16) {
        __m512 w0 = load16(w, k, wt);
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) acc[m] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x + m * ldx + k), acc[m]);
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; m++) res[m] = _mm512_reduce_add_ps(_mm512_add_ps(acc[m], acc2[m]));
    rows_tail(j, w, x, K, k, res);
}

/* One activation row (decode): W1_ROWS weight rows per pass, one accumulator each.
 * Each x vector loaded serves all of them, where the per-row kernel loaded x once per
 * weight vector: for a 5,632-wide x (the down projection) that is twice the bytes of the
 * f16 weights, from L2 once the weight stream has pushed x out of L1. F16 TinyLlama
 * decode, 2 threads, medians of each linear over a traced run: down 690 -> 515 us
 * (34 -> 45 GB/s), gate/up 550 -> 495, the others ~5% faster. A row's sum does not
 * depend on the rows beside it, so results do not depend on how rows are split. */
#define W1_ROWS 8
/* 16-bit elements a row's L2 prefetch runs ahead (512 bytes), where core_prefetch_l2 says
 * so (Intel): eight row streams at once are more than an Intel core's hardware prefetchers
 * keep ahead of. F16 TinyLlama decode (tg48, CTORCH_PREFETCH=l1 / l2 alternated, three
 * rounds): 2-core Sapphire Rapids VM 13.0-13.2 -> 14.3-14.4 t/s (0.84 -> 0.95 of the read
 * bandwidth); the GPU host's 16-core Xeon, two rounds, 4 / 8 / 16 threads 20.1-20.3 /
 * 31.6-33.1 / 51.6-52.2 -> 21.1-21.2 / 34.9-36.2 / 54.5-57.3. 128 elements measured the
 * same, 512 less (13.9). Zen 4 is not measured and keeps the loop without it. */
#define W1_AHEAD 256

static inline __attribute__((always_inline, target("avx512f"))) void w1_512(const row_job *j, const void *w, const float *x, int64_t K,
                                                                             float *res, const int NW, const ct_dtype wt)
{
    size_t es = wt == CT_F32 ? 4 : 2;
    __m512 acc[W1_ROWS];
    int64_t k = 0;
#pragma GCC unroll 8
    for (int r = 0; r < NW; r++) acc[r] = _mm512_setzero_ps();
    if (es == 2 && j->l2)
        for (; k + 32 <= K; k += 32) {
            __m512 x0 = _mm512_loadu_ps(x + k), x1 = _mm512_loadu_ps(x + k + 16);
#pragma GCC unroll 8
            for (int r = 0; r < NW; r++) {
                const char *wr = (const char *)w + (size_t)(r * j->ws0) * es;
                _mm_prefetch(wr + (size_t)(k + W1_AHEAD) * 2, _MM_HINT_T1);
                acc[r] = _mm512_fmadd_ps(load16(wr, k, wt), x0, acc[r]);
                acc[r] = _mm512_fmadd_ps(load16(wr, k + 16, wt), x1, acc[r]);
            }
        }
    for (; k + 16 <= K; k += 16) {
        __m512 x0 = _mm512_loadu_ps(x + k);
#pragma GCC unroll 8
        for (int r = 0; r < NW; r++) acc[r] = _mm512_fmadd_ps(load16((const char *)w + (size_t)(r * j->ws0) * es, k, wt), x0, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < NW; r++) res[r] = _mm512_reduce_add_ps(acc[r]);
    w1_tail(j, w, x, K, k, res, NW);
}

__attribute__((target("avx512f"))) static void w1_avx512(const row_job *j, const void *w, const float *x, int64_t K, float *res, int nw)
{
    switch ((int)j->wt * 16 + nw) {
        ROW_CASES(w1_512, CT_F32)
        ROW_CASES(w1_512, CT_F16)
        ROW_CASES(w1_512, CT_BF16)
    default: w1_portable(j, w, x, K, res, nw); break;
    }
}

__attribute__((target("avx512f"))) static void rows_avx512(const row_job *j, const void *w, const float *x, int64_t K, float *res)
{
    switch ((int)j->wt * 16 + (int)j->M) {
        ROW_CASES(rows512, CT_F32)
        ROW_CASES(rows512, CT_F16)
        ROW_CASES(rows512, CT_BF16)
    default: rows_portable(j, w, x, K, res); break;
    }
}

static inline __attribute__((always_inline, target("avx2,fma,f16c"))) __m256 load8(const void *w, int64_t k, ct_dtype wt)
{
    if (wt == CT_F32) return _mm256_loadu_ps((const float *)w + k);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + k));
    return wt == CT_BF16 ? _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)) : _mm256_cvtph_ps(h);
}

__attribute__((target("avx2,fma,f16c"))) static float hsum256(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static inline __attribute__((always_inline, target("avx2,fma,f16c"))) void rows256(const row_job *j, const void *w, const float *x, int64_t K,
                                                                                    float *res, const int M,
                                                                                    const ct_dtype wt)
{
    __m256 acc[DECODE_ROWS];
    int64_t ldx = j->ldx, k = 0;
#pragma GCC unroll 8
    for (int m = 0; m < M; m++) acc[m] = _mm256_setzero_ps();
    for (; k + 8 <= K; k += 8) {
        __m256 w0 = load8(w, k, wt);
#pragma GCC unroll 8
        for (int m = 0; m < M; m++) acc[m] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + m * ldx + k), acc[m]);
    }
#pragma GCC unroll 8
    for (int m = 0; m < M; m++) res[m] = hsum256(acc[m]);
    rows_tail(j, w, x, K, k, res);
}

static inline __attribute__((always_inline, target("avx2,fma,f16c"))) void w1_256(const row_job *j, const void *w, const float *x, int64_t K,
                                                                                   float *res, const int NW,
                                                                                   const ct_dtype wt)
{
    size_t es = wt == CT_F32 ? 4 : 2;
    __m256 acc[W1_ROWS];
    int64_t k = 0;
#pragma GCC unroll 8
    for (int r = 0; r < NW; r++) acc[r] = _mm256_setzero_ps();
    for (; k + 8 <= K; k += 8) {
        __m256 x0 = _mm256_loadu_ps(x + k);
#pragma GCC unroll 8
        for (int r = 0; r < NW; r++) acc[r] = _mm256_fmadd_ps(load8((const char *)w + (size_t)(r * j->ws0) * es, k, wt), x0, acc[r]);
    }
#pragma GCC unroll 8
    for (int r = 0; r < NW; r++) res[r] = hsum256(acc[r]);
    w1_tail(j, w, x, K, k, res, NW);
}

__attribute__((target("avx2,fma,f16c"))) static void w1_avx2(const row_job *j, const void *w, const float *x, int64_t K, float *res, int nw)
{
    switch ((int)j->wt * 16 + nw) {
        ROW_CASES(w1_256, CT_F32)
        ROW_CASES(w1_256, CT_F16)
        ROW_CASES(w1_256, CT_BF16)
    default: w1_portable(j, w, x, K, res, nw); break;
    }
}

__attribute__((target("avx2,fma,f16c"))) static void rows_avx2(const row_job *j, const void *w, const float *x, int64_t K, float *res)
{
    switch ((int)j->wt * 16 + (int)j->M) {
        ROW_CASES(rows256, CT_F32)
        ROW_CASES(rows256, CT_F16)
        ROW_CASES(rows256, CT_BF16)
    default: rows_portable(j, w, x, K, res); break;
    }
}
#endif

/* Rows are processed in groups over K-blocks sized so the activation block stays in
 * L1 while the group's weight pieces stream past it; each weight byte is still read once. */
#define FUSED_GROUP 32

/* M == 1 at a SIMD level: W1_ROWS weight rows per x pass (w1_512). */
static bool one_x_rows(const row_job *j, int64_t n0, int64_t n1, cpu_simd lvl)
{
#ifdef LIN_X86
    if (j->M != 1 || lvl < CPU_SIMD_AVX2) return false;
    size_t es = ct_dtype_block_bytes(j->wt);
    float res[W1_ROWS];
    for (int64_t n = n0; n < n1; n += W1_ROWS) {
        int nw = (int)min64(W1_ROWS, n1 - n);
        const void *w = (const char *)j->w + (size_t)(n * j->ws0) * es;
        if (lvl >= CPU_SIMD_AVX512) w1_avx512(j, w, j->x, j->K, res, nw);
        else w1_avx2(j, w, j->x, j->K, res, nw);
        for (int r = 0; r < nw; r++) j->out[n + r] = res[r] + (j->bias ? j->bias[n + r] : 0.0f);
    }
    return true;
#else
    (void)j, (void)n0, (void)n1, (void)lvl;
    return false;
#endif
}

static void fused_rows(void *vctx, int64_t n0, int64_t n1)
{
    const row_job *j = vctx;
    cpu_simd lvl = cpu_simd_level();
    if (one_x_rows(j, n0, n1, lvl)) return;
    size_t es = ct_dtype_block_bytes(j->wt);
    int64_t kb = max64(256, (24576 / (4 * j->M)) & ~(int64_t)31);
    float res[DECODE_ROWS], sums[FUSED_GROUP][DECODE_ROWS];
    for (int64_t g0 = n0; g0 < n1; g0 += FUSED_GROUP) {
        int64_t g1 = min64(g0 + FUSED_GROUP, n1);
        for (int64_t k0 = 0; k0 < j->K; k0 += kb) {
            int64_t klen = min64(kb, j->K - k0);
            const float *x = j->x + k0;
            for (int64_t n = g0; n < g1; n++) {
                const void *w = (const char *)j->w + (size_t)(n * j->ws0 + k0) * es;
#ifdef LIN_X86
                if (lvl >= CPU_SIMD_AVX512) rows_avx512(j, w, x, klen, res);
                else if (lvl >= CPU_SIMD_AVX2) rows_avx2(j, w, x, klen, res);
                else rows_portable(j, w, x, klen, res);
#else
                (void)lvl;
                rows_portable(j, w, x, klen, res);
#endif
                for (int64_t m = 0; m < j->M; m++) sums[n - g0][m] = k0 ? sums[n - g0][m] + res[m] : res[m];
            }
        }
        for (int64_t n = g0; n < g1; n++) {
            float b = j->bias ? j->bias[n] : 0.0f;
            for (int64_t m = 0; m < j->M; m++) j->out[m * j->N + n] = sums[n - g0][m] + b;
        }
    }
}

/* ---------------- f16/bf16 weights (prefill) ---------------- */
/* The built-in GEMM widens w while packing its panels: no f32 copy of w, no BLAS. */
static ct_status linear_half_tiles(const ct_tensor *w, const uint16_t *pw, int64_t ws0, int64_t ws1, const float *x,
                                   int64_t rsx, int64_t csx, int64_t M, int64_t N, int64_t K, float *out, bool acc)
{
    return cpu_gemm_f32_bhalf(M, N, K, x, rsx, csx, pw, ws1, ws0, w->dtype == CT_BF16, out, N, acc);
}

/* ---------------- quantized weights ---------------- */
typedef struct quant_job {
    quant_vec_dot_fn dot;
    quant_vec_dot_nr_fn nr; /* multi-row dot for the prefill tiles, or NULL */
    const char *w;
    size_t wrow;        /* bytes between weight rows */
    const char *a;      /* quantized activations, M rows */
    size_t arow;
    int64_t M, N, K;
    int64_t n_nblocks;  /* prefill tiling */
    float *out;
    const float *bias;
} quant_job;

/* out[m][n] += bias[n] over rows m0..m1, columns n0..n1 of a tile the kernels wrote
 * without it (no-op without a bias). */
static void add_bias(float *out, int64_t N, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const float *bias)
{
    if (!bias) return;
    for (int64_t m = m0; m < m1; m++)
        for (int64_t n = n0; n < n1; n++) out[m * N + n] += bias[n];
}

static void quant_decode_rows(void *vctx, int64_t n0, int64_t n1)
{
    const quant_job *j = vctx;
    for (int64_t n = n0; n < n1; n++) {
        const char *w = j->w + (size_t)n * j->wrow;
        float b = j->bias ? j->bias[n] : 0.0f;
        for (int64_t m = 0; m < j->M; m++) {
            float s;
            j->dot(j->K, &s, w, j->a + (size_t)m * j->arow);
            j->out[m * j->N + n] = s + b;
        }
    }
}

static void quant_prefill_tiles(void *vctx, int64_t t0, int64_t t1)
{
    const quant_job *j = vctx;
    for (int64_t t = t0; t < t1; t++) {
        int64_t m0 = (t / j->n_nblocks) * QUANT_MBLOCK, nb0 = (t % j->n_nblocks) * QUANT_NBLOCK;
        int64_t m1 = min64(m0 + QUANT_MBLOCK, j->M), nb1 = min64(nb0 + QUANT_NBLOCK, j->N);
        if (j->nr) {
            /* each weight block is unpacked once per QUANT_NR_MAX_A activation rows */
            for (int64_t n = nb0; n < nb1; n += QUANT_NR_MAX_W) {
                int nw = (int)min64(QUANT_NR_MAX_W, nb1 - n);
                for (int64_t m = m0; m < m1; m += QUANT_NR_MAX_A) {
                    int na = (int)min64(QUANT_NR_MAX_A, m1 - m);
                    j->nr(j->K, j->out + m * j->N + n, (size_t)j->N, j->w + (size_t)n * j->wrow, j->wrow, nw,
                          j->a + (size_t)m * j->arow, j->arow, na);
                }
            }
            add_bias(j->out, j->N, m0, m1, nb0, nb1, j->bias);
            continue;
        }
        for (int64_t n = nb0; n < nb1; n++) {
            const char *w = j->w + (size_t)n * j->wrow;
            float b = j->bias ? j->bias[n] : 0.0f;
            for (int64_t m = m0; m < m1; m++) {
                float s;
                j->dot(j->K, &s, w, j->a + (size_t)m * j->arow);
                j->out[m * j->N + n] = s + b;
            }
        }
    }
}

/* Prefill through packed panels: each task packs QUANT_PANEL_ROWS weight rows once and
 * runs them against every activation row. */
typedef struct panel_job {
    const quant_panel_kernels *pk;
    const char *kept;   /* the weights repacked once (all panels), or NULL: pack per task */
    const char *w;
    size_t wrow;
    const char *a;
    size_t arow;
    const float *aux;   /* [M][K / block * aux_n] */
    int64_t M, N, K, nblk;
    float *out;
    const float *bias;
    bool oom;
    int64_t np, runs; /* panels, and the even runs of them handed out */
} panel_job;

static void panel_tasks(void *vctx, int64_t p0, int64_t p1)
{
    panel_job *j = vctx;
    size_t pbytes = (size_t)j->nblk * j->pk->block_bytes;
    void *panel = NULL;
    if (!j->kept && !(panel = aligned_alloc(64, (pbytes + 63) & ~(size_t)63))) {
        __atomic_store_n(&j->oom, true, __ATOMIC_RELAXED);
        return;
    }
    size_t auxrow = (size_t)j->nblk * (size_t)j->pk->aux_n;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n0 = p * QUANT_PANEL_ROWS;
        int nw = (int)min64(QUANT_PANEL_ROWS, j->N - n0);
        const void *pp = j->kept ? j->kept + (size_t)p * pbytes : panel;
        if (!j->kept) j->pk->pack(j->w + (size_t)n0 * j->wrow, j->wrow, nw, j->K, panel);
        int64_t step = quant_panel_max_a(j->pk);
        for (int64_t m = 0; m < j->M; m += step) {
            int na = (int)min64(step, j->M - m);
            j->pk->gemm(j->K, pp, j->a + (size_t)m * j->arow, j->arow, j->aux + (size_t)m * auxrow, auxrow, na,
                        j->out + m * j->N + n0, (size_t)j->N, nw);
        }
        add_bias(j->out, j->N, 0, j->M, n0, n0 + nw, j->bias);
    }
    free(panel);
}

static void panel_runs(void *vctx, int64_t r0, int64_t r1)
{
    const panel_job *j = vctx;
    for (int64_t r = r0; r < r1; r++) panel_tasks(vctx, r * j->np / j->runs, (r + 1) * j->np / j->runs);
}

/* ---- weights kept repacked: made on a weight's first use, kept with its storage until
 * the storage is written (CTORCH_REPACK=0 turns this off, e.g. to save the memory) ---- */
typedef struct repack_job {
    const quant_panel_kernels *pk;
    const char *w;
    size_t wrow, pbytes;
    int64_t N, K;
    char *dst;
} repack_job;

static void repack_tasks(void *vctx, int64_t p0, int64_t p1)
{
    const repack_job *j = vctx;
    for (int64_t p = p0; p < p1; p++) {
        int64_t n0 = p * QUANT_PANEL_ROWS;
        j->pk->pack(j->w + (size_t)n0 * j->wrow, j->wrow, (int)min64(QUANT_PANEL_ROWS, j->N - n0), j->K,
                    j->dst + (size_t)p * j->pbytes);
    }
}

static bool repack_enabled(void) { return config_current()->repack; }

/* Memory for weights kept in a layout of our own, in 2 MiB pages where the kernel gives
 * them (THP "madvise" mode): decode streams every byte once a token, and under a
 * hypervisor each 4 KiB TLB miss costs a two-level walk. One thread's f16 row dots read
 * 25 GB/s from 2 MiB pages against 16-19 GB/s from 4 KiB ones (anonymous or the model
 * file's page cache; Zen 4 VM, 128 MiB matrix). Freed with free(). */
#define HUGE_PAGE ((size_t)2 << 20)
static void *kept_alloc(size_t bytes)
{
    size_t round = bytes >= HUGE_PAGE / 2 ? HUGE_PAGE : 64;
    bytes = (bytes + round - 1) & ~(round - 1);
    void *p = aligned_alloc(round, bytes);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p && round == HUGE_PAGE) (void)madvise(p, bytes, MADV_HUGEPAGE); /* advice: failing changes nothing */
#endif
    return p;
}

static pthread_mutex_t g_repack_mu = PTHREAD_MUTEX_INITIALIZER;

/* The repacked panels of w (rows wrow bytes apart), or NULL when there is no memory
 * for them (the caller then packs per call). */
static const char *repacked(const ct_device *dev, const ct_tensor *w, const quant_panel_kernels *pk, const char *pw,
                            size_t wrow, int64_t N, int64_t K)
{
    /* the view the panels are made from (a model's weights are views of one storage) */
    const uint64_t key[STORAGE_DERIVED_KEY] = {(uint64_t)w->offset, (uint64_t)N, (uint64_t)K, wrow,
                                               (uint64_t)w->dtype, (uint64_t)(uintptr_t)pk};
    pthread_mutex_lock(&g_repack_mu);
    char *d = storage_derived(w->st, key);
    if (!d) {
        int64_t np = (N + QUANT_PANEL_ROWS - 1) / QUANT_PANEL_ROWS;
        size_t pbytes = (size_t)(K / ct_dtype_block_size(w->dtype)) * pk->block_bytes;
        size_t bytes = ((size_t)np * pbytes + 63) & ~(size_t)63;
        if ((d = kept_alloc(bytes))) {
            repack_job j = {pk, pw, wrow, pbytes, N, K, d};
            cpu_parallel_for(np, 1, repack_tasks, &j);
            /* kept beside the raw blocks (prompts read those): serves no op in their place */
            if (storage_set_layout(w->st, key, d, free, dev, bytes, -1, -1) != CT_OK) {
                free(d);
                d = NULL;
            }
        } else {
            core_log(CT_LOG_WARN, "linear: no memory to keep %s %s repacked; packing per call", ct_dtype_name(w->dtype),
                     SHAPE_STR(w));
        }
    }
    pthread_mutex_unlock(&g_repack_mu);
    return d;
}

/* ---- weights kept as a dense copy in 2 MiB pages (kept_alloc): the same rows, read by the
 * same kernels, from pages the TLB covers; a model's weights are otherwise read from the
 * file's mapping in 4 KiB pages. f16/bf16 weights, and quantized ones of a type with no
 * repacked layout at this SIMD level (the K formats at AVX2, Q2_K/Q3_K at AVX-512): a
 * TinyLlama-shaped Q6_K decoded at 15.3-17.1 t/s from the mapping and 18.8-19.5 from the
 * copy, Q4_K_M 22.5-23.2 -> 23.9-24.7 (Zen 3, 2 threads, alternated). ---- */
#define KEPT_DENSE_TAG 1          /* the key's last word (the repacked panels' is a kernel table's address) */
#define KEPT_DENSE_MIN (1 << 20)  /* bytes: smaller weights stay in the caches, keeping them gains nothing */

typedef struct copy_job {
    const char *src;
    size_t srow, drow;
    char *dst;
} copy_job;

static void copy_rows(void *vctx, int64_t r0, int64_t r1)
{
    const copy_job *j = vctx;
    for (int64_t r = r0; r < r1; r++) memcpy(j->dst + (size_t)r * j->drow, j->src + (size_t)r * j->srow, j->drow);
}

static bool dense_keepable(const ct_tensor *w)
{
    if (w->ndim != 2 || !repack_enabled() || (w->shape[1] > 1 && w->stride[1] != 1)) return false;
    int64_t N = w->shape[0], K = w->shape[1];
    if (w->dtype == CT_F16 || w->dtype == CT_BF16) return (N == 1 || w->stride[0] >= K) && N * K * 2 >= KEPT_DENSE_MIN;
    /* quantized: whole blocks and dense rows only, so the copy's rows sit where linear_quant
     * expects them */
    return ct_dtype_is_quantized(w->dtype) && !quant_get_repack(w->dtype) && K % ct_dtype_block_size(w->dtype) == 0 &&
           (N == 1 || w->stride[0] == K) && ct_dtype_row_bytes(w->dtype, K) * (size_t)N >= KEPT_DENSE_MIN;
}

/* The dense [N][K] copy of w (pw: its data), made on first use, or NULL (not keepable, or
 * no memory: the caller reads w itself). */
static const char *kept_dense(const ct_device *dev, const ct_tensor *w, const char *pw)
{
    if (!dense_keepable(w)) return NULL;
    int64_t N = w->shape[0], K = w->shape[1], rs = N > 1 ? w->stride[0] : K;
    const uint64_t key[STORAGE_DERIVED_KEY] = {(uint64_t)w->offset, (uint64_t)N, (uint64_t)K, (uint64_t)rs,
                                               (uint64_t)w->dtype, KEPT_DENSE_TAG};
    pthread_mutex_lock(&g_repack_mu);
    char *d = storage_derived(w->st, key);
    if (!d) {
        size_t drow = ct_dtype_row_bytes(w->dtype, K), bytes = drow * (size_t)N;
        if ((d = kept_alloc(bytes))) {
            copy_job j = {pw, ct_dtype_row_bytes(w->dtype, rs), drow, d};
            cpu_parallel_for(N, max64(1, 65536 / (int64_t)drow), copy_rows, &j);
            if (storage_set_layout(w->st, key, d, free, dev, bytes, -1, -1) != CT_OK) {
                free(d);
                d = NULL;
            }
        } else {
            core_log(CT_LOG_WARN, "linear: no memory to keep a copy of %s %s; reading it in place", ct_dtype_name(w->dtype),
                     SHAPE_STR(w));
        }
    }
    pthread_mutex_unlock(&g_repack_mu);
    return d;
}

/* Placement (ct_tensor_place on the CPU) makes the repacked decode layout of a weight
 * that has one (or its dense copy, kept_dense) now, so the first token does not pay for it. */
ct_status cpu_linear_import(ct_device *dev, const ct_tensor *w)
{
    if (dense_keepable(w)) {
        ct_status s = storage_make_valid(w->st, dev, NULL);
        if (s != CT_OK) return s;
        (void)kept_dense(dev, w, op_data(w, dev)); /* NULL: read in place */
        return CT_OK;
    }
    if (!ct_dtype_is_quantized(w->dtype) || w->ndim != 2 || !repack_enabled() || !quant_get_repack(w->dtype))
        return CT_OK;
    int64_t N = w->shape[0], K = w->shape[1];
    if (K == 0 || N == 0 || K % ct_dtype_block_size(w->dtype) != 0 || (K > 1 && w->stride[1] != 1)) return CT_OK;
    size_t wrow = N > 1 ? ct_dtype_row_bytes(w->dtype, w->stride[0]) : 0;
    if (N > 1 && !wrow) return CT_OK;
    ct_status s = storage_make_valid(w->st, dev, NULL);
    if (s != CT_OK) return s;
    (void)repacked(dev, w, quant_get_repack(w->dtype), op_data(w, dev), wrow, N, K); /* NULL: packed per call */
    return CT_OK;
}

static ct_status linear_panels(const quant_panel_kernels *pk, const char *kept, const char *pw, size_t wrow, const char *a,
                               size_t arow, const float *aux, int64_t M, int64_t N, int64_t K, int64_t blk, float *out,
                               const float *bias)
{
    panel_job j = {pk, kept, pw, wrow, a, arow, aux, M, N, K, K / blk, out, bias, false, 0, 0};
    j.np = (N + QUANT_PANEL_ROWS - 1) / QUANT_PANEL_ROWS;
    if (M <= DECODE_ROWS) {
        /* decode's few-microsecond panels keep the pool's finer chunks against late threads */
        cpu_parallel_for(j.np, 1, panel_tasks, &j);
    } else {
        /* prompts: two even runs of panels per thread; the pool's chunks of ceil(np / 4
         * threads) panels left some threads a whole chunk more (24 of 352 at 16, against 22) */
        j.runs = min64(j.np, 2 * (int64_t)cpu_num_threads());
        cpu_parallel_for(j.runs, 1, panel_runs, &j);
    }
    if (j.oom) return core_err(CT_ERR_OOM, "linear: no memory for a packed %d x %lld weight panel", QUANT_PANEL_ROWS, (long long)K);
    return CT_OK;
}

typedef struct act_job {
    ct_dtype at;
    const float *x;
    int64_t rsx;
    char *a;
    size_t arow;
    int64_t K;
    const quant_panel_kernels *pk; /* the panels' activation sums go to aux too, or NULL */
    float *aux;
    size_t auxrow;
} act_job;

/* The panels' per-block activation sums are made with the row's quantization, on the
 * same thread: made after it on the caller's thread alone (128 rows x 176 blocks for a
 * K = 5632 Q8_0 linear) they were an estimated tenth of that linear at 16 threads. */
static void act_aux(const act_job *j, int64_t m)
{
    if (j->pk) j->pk->act_aux(j->a + (size_t)m * j->arow, j->K, j->aux + (size_t)m * j->auxrow);
}

static void quantize_rows(void *vctx, int64_t r0, int64_t r1)
{
    const act_job *j = vctx;
    for (int64_t m = r0 + 1; m < r1 + 1; m++) {
        (void)quant_quantize_row(j->at, j->x + m * j->rsx, j->a + (size_t)m * j->arow, j->K);
        act_aux(j, m);
    }
}

static ct_status linear_quant(const ct_device *dev, const ct_tensor *w, const char *pw, const float *x, int64_t rsx, int64_t M, int64_t N,
                              int64_t K, float *out, const float *bias)
{
    ct_dtype wt = w->dtype;
    quant_vec_dot_fn dot = quant_get_vec_dot(wt);
    if (!dot) return core_err(CT_ERR_UNSUPPORTED, "linear: no CPU dot-product kernel for %s weights", ct_dtype_name(wt));
    ct_dtype at = quant_vec_dot_type(wt);
    int64_t abs_ = ct_dtype_block_size(at);
    if (K % ct_dtype_block_size(wt) != 0 || K % abs_ != 0)
        return core_err(CT_ERR_SHAPE, "linear: K = %lld is not a multiple of the %s / %s block size", (long long)K,
                        ct_dtype_name(wt), ct_dtype_name(at));
    size_t arow = ct_dtype_row_bytes(at, K);
    char *a = cpu_scratch(CPU_SCRATCH_LINEAR_ACT, arow * (size_t)M);
    if (!a) return core_err(CT_ERR_OOM, "linear: no memory for %lld quantized activation rows", (long long)M);
    size_t wrow = N > 1 ? ct_dtype_row_bytes(wt, w->stride[0]) : 0;
    /* prefill: panels packed per call (unpacked to bytes, the fastest for many rows; Q8_0's
     * kept panels, the same bytes, read in place of packing gave 0.86 / 0.96 / 1.11x the
     * pp128 of packing at 4 / 8 / 16 threads on the GPU host's Xeon, one run each, and
     * 0.64x in a 16-thread ct_linear [128, 2048] x [5632, 2048]: probably one stream per
     * panel from memory against the packer's 16); decode: the weights kept repacked */
    const quant_panel_kernels *pk = M > DECODE_ROWS ? quant_get_panel(wt) : NULL;
    const char *kept = NULL;
    if (!pk && repack_enabled() && (N == 1 || wrow) && (pk = quant_get_repack(wt)) &&
        !(kept = repacked(dev, w, pk, pw, wrow, N, K)))
        pk = NULL;
    act_job aj = {at, x, rsx, a, arow, K, pk, NULL, 0};
    if (pk) {
        aj.auxrow = (size_t)(K / ct_dtype_block_size(wt)) * (size_t)pk->aux_n;
        /* scratch, not malloc: decode (weights kept repacked) comes here every token */
        aj.aux = cpu_scratch(CPU_SCRATCH_LINEAR_AUX, sizeof(float) * (size_t)max64(1, M * (int64_t)aj.auxrow));
        if (!aj.aux) return core_err(CT_ERR_OOM, "linear: no memory for the activation sums of %lld rows", (long long)M);
    }
    /* row 0 on the caller's thread, so a quantizer error stays visible; the other rows
     * have the same type and length and cannot fail then */
    ct_status qs = quant_quantize_row(at, x, a, K);
    if (qs != CT_OK) return qs;
    act_aux(&aj, 0);
    if (M > 1) cpu_parallel_for(M - 1, max64(1, 16384 / K), quantize_rows, &aj);
    if (pk) return linear_panels(pk, kept, pw, wrow, a, arow, aj.aux, M, N, K, ct_dtype_block_size(wt), out, bias);
    quant_job j = {dot, quant_get_vec_dot_nr(wt), pw, wrow, a, arow, M, N, K, 0, out, bias};
    if (M <= DECODE_ROWS) {
        cpu_parallel_for(N, max64(1, 4096 / (K * M)), quant_decode_rows, &j);
    } else {
        j.n_nblocks = (N + QUANT_NBLOCK - 1) / QUANT_NBLOCK;
        cpu_parallel_for(((M + QUANT_MBLOCK - 1) / QUANT_MBLOCK) * j.n_nblocks, 1, quant_prefill_tiles, &j);
    }
    return CT_OK;
}

ct_status cpu_run_linear(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *bias = op->src[2];
    ct_tensor *dst = op->dst;
    if (x->dtype != CT_F32 || dst->dtype != CT_F32 || w->ndim != 2 || x->ndim < 1)
        return core_err(CT_ERR_DTYPE, "linear: kernel needs f32 x [..., K] and w [N, K], got %s %s and %s %s",
                        ct_dtype_name(x->dtype), SHAPE_STR(x), ct_dtype_name(w->dtype), SHAPE_STR(w));
    int64_t N = w->shape[0], K = w->shape[1], M = shape_numel(x->ndim - 1, x->shape);
    if (M == 0 || N == 0) return CT_OK;
    float *out = op_data(dst, dev);
    const float *px = op_data(x, dev);
    float *bvec = NULL, *xtmp = NULL;
    if (bias) {
        bvec = malloc(sizeof(float) * (size_t)N);
        if (!bvec) return core_err(CT_ERR_OOM, "linear: no memory for the bias");
        const char *pb = op_data(bias, dev);
        size_t be = ct_dtype_block_bytes(bias->dtype);
        for (int64_t n = 0; n < N; n++) bvec[n] = cpu_load_f32(pb + (size_t)(n * bias->stride[0]) * be, bias->dtype);
    }
    ct_status s = CT_OK;
    if (K == 0) {
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) out[m * N + n] = bvec ? bvec[n] : 0.0f;
        free(bvec);
        return CT_OK;
    }
    int64_t rsx, csx = K == 1 ? 1 : x->stride[x->ndim - 1];
    bool need_rows = ct_dtype_is_quantized(w->dtype) || M <= DECODE_ROWS; /* fused kernels read unit-stride rows */
    if (!x_rows(x, &rsx) || (need_rows && csx != 1)) {
        if (!(xtmp = pack_x(x, px, M, K))) {
            free(bvec);
            return core_err(CT_ERR_OOM, "linear: no memory to pack x %s", SHAPE_STR(x));
        }
        px = xtmp;
        rsx = K;
        csx = 1;
    }
    const char *pw = op_data(w, dev);
    int64_t ws0 = w->stride[0], ws1 = w->stride[1];
    const char *kd = kept_dense(dev, w, pw);
    if (kd) {
        pw = kd;
        ws0 = K; /* the copy's rows are dense (a quantized weight's were already) */
        ws1 = 1;
    }
    bool fused = M <= DECODE_ROWS && (ws1 == 1 || K == 1) && w->dtype != CT_F64 && !ct_dtype_is_quantized(w->dtype);
#ifdef CTORCH_HAVE_BLAS
    if (w->dtype == CT_F32 && M == 1) fused = false; /* OpenBLAS's sgemv streams f32 rows a bit faster */
#endif
    if (fused) {
        row_job j = {pw, w->dtype, ws0, px, rsx, M, N, K, out, bvec, core_prefetch_l2()};
        cpu_parallel_for(N, max64(1, 8192 / K), fused_rows, &j);
    } else if (w->dtype == CT_F32) {
        if (bvec)
            for (int64_t m = 0; m < M; m++) memcpy(out + m * N, bvec, sizeof(float) * (size_t)N);
        s = cpu_gemm_f32(M, N, K, px, rsx, csx, (const float *)pw, w->stride[1], w->stride[0], out, N, bvec != NULL);
    } else if (w->dtype == CT_F16 || w->dtype == CT_BF16) {
        if (bvec)
            for (int64_t m = 0; m < M; m++) memcpy(out + m * N, bvec, sizeof(float) * (size_t)N);
        s = linear_half_tiles(w, (const uint16_t *)pw, ws0, ws1, px, rsx, csx, M, N, K, out, bvec != NULL);
    } else if (ct_dtype_is_quantized(w->dtype)) {
        s = linear_quant(dev, w, pw, px, rsx, M, N, K, out, bvec);
    } else {
        s = core_err(CT_ERR_DTYPE, "linear: no CPU kernel for %s weights", ct_dtype_name(w->dtype));
    }
    free(xtmp);
    free(bvec);
    return s;
}
