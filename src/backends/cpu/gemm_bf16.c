/* BF16 weights in prompts (the GEMM of LINEAR with many rows) on CPUs with AVX512-BF16.
 * The activations are rounded to bf16 (to nearest, ties to even), as llama.cpp does for
 * BF16 weights, and vdpbf16ps sums the exact bf16 x bf16 products into f32, two per lane
 * per instruction: twice the products per cycle of the f32 FMA (Zen 4, one core: 228
 * against 114 GFLOP/s, ctorch-bench-ops --only peak). F16 weights never come here:
 * rounding them to bf16 would drop 3 of their 11 significant bits.
 *
 * Layout: pairs of consecutive k share a 32-bit lane (bf16 k in the low half, k + 1 in
 * the high half). A is packed per chunk of rows as [8-row tile][K/2 pairs][8]; each task
 * packs the whole K of a 32-column B panel ([K/2][32], under 400 KiB for K <= 6144: it
 * stays in L2) and runs every row tile over it, so C is written once. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm.h"

#if defined(__x86_64__)
#include <immintrin.h>

#include "backends/cpu/gemm_avx512.h"
#define BF_X86 1
#endif

#define BF_MR 8
#define BF_NR 32
#define BF_MCHUNK 256 /* rows of A packed per pass over B */

static int g_off; /* cpu_gemm_bf16_dot_disable */

void cpu_gemm_bf16_dot_disable(bool off) { __atomic_store_n(&g_off, off ? 1 : 0, __ATOMIC_RELAXED); }

bool cpu_gemm_bf16_dot_on(void)
{
#ifdef BF_X86
    static int hw = -1;
    int h = __atomic_load_n(&hw, __ATOMIC_RELAXED);
    if (h < 0) {
        h = __builtin_cpu_supports("avx512bf16") ? 1 : 0;
        __atomic_store_n(&hw, h, __ATOMIC_RELAXED);
    }
    return h == 1 && !__atomic_load_n(&g_off, __ATOMIC_RELAXED) && cpu_simd_level() >= CPU_SIMD_AVX512;
#else
    return false;
#endif
}

#ifdef BF_X86
typedef struct bf_job {
    int64_t M, N, K, KP; /* KP: pairs of k, K rounded up to even over 2 */
    const float *A;
    int64_t rsa, csa;
    const uint16_t *B; /* column j of B (k = 0..K-1) at B + j * csb */
    int64_t csb;
    float *C;
    int64_t ldc;
    bool accumulate;
    int64_t m0, mc; /* the current chunk of rows */
    uint32_t *ap;   /* its packed A */
    bool oom;
} bf_job;

/* One row of A as bf16 pairs. The vector conversion treats f32 subnormals as zero; the
 * scalar tail keeps them (a difference below 2^-126 of one term). */
__attribute__((target("avx512f,avx512bf16"))) static void row_to_pairs(const float *a, int64_t csa, int64_t K,
                                                                      uint32_t *out)
{
    int64_t k = 0;
    if (csa == 1)
        for (; k + 32 <= K; k += 32) {
            __m512bh h = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(a + k + 16), _mm512_loadu_ps(a + k));
            _mm512_storeu_si512(out + k / 2, (__m512i)h);
        }
    for (; k < K; k += 2) {
        uint32_t lo = ct_f32_to_bf16(a[k * csa]), hi = k + 1 < K ? ct_f32_to_bf16(a[(k + 1) * csa]) : 0;
        out[k / 2] = lo | hi << 16;
    }
}

static void pack_a_tiles(void *vctx, int64_t t0, int64_t t1)
{
    bf_job *j = vctx;
    uint32_t *row = malloc(sizeof(uint32_t) * (size_t)j->KP);
    if (!row) {
        __atomic_store_n(&j->oom, true, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t t = t0; t < t1; t++) {
        uint32_t *d = j->ap + t * j->KP * BF_MR;
        for (int i = 0; i < BF_MR; i++) {
            int64_t m = t * BF_MR + i;
            if (m < j->mc) row_to_pairs(j->A + (j->m0 + m) * j->rsa, j->csa, j->K, row);
            else memset(row, 0, sizeof(uint32_t) * (size_t)j->KP);
            for (int64_t p = 0; p < j->KP; p++) d[p * BF_MR + i] = row[p];
        }
    }
    free(row);
}

/* 16 columns x 16 pairs (32 bf16 each, one column per register) -> 16 rows of the panel. */
__attribute__((target("avx512f"))) static void tr16x16(const uint16_t *src, int64_t csb, uint32_t *dst)
{
    __m512i r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_loadu_si512(src + i * csb);
    gemm_store_tr16(r, dst, BF_NR);
}

/* Columns j0..j0+nj of B, every k, as [KP][32] pairs; zero past nj and past K. */
static void pack_b_panel(const bf_job *j, uint32_t *bp, int64_t j0, int64_t nj)
{
    int64_t k32 = j->K & ~(int64_t)31, j16 = nj & ~(int64_t)15;
    for (int64_t c = 0; c < j16; c += 16)
        for (int64_t k = 0; k < k32; k += 32) tr16x16(j->B + (j0 + c) * j->csb + k, j->csb, bp + (k / 2) * BF_NR + c);
    for (int64_t c = 0; c < BF_NR; c++) {
        const uint16_t *col = c < nj ? j->B + (j0 + c) * j->csb : NULL;
        for (int64_t k = c < j16 ? k32 : 0; k < j->K; k += 2)
            bp[(k / 2) * BF_NR + c] = col ? (uint32_t)col[k] | (k + 1 < j->K ? (uint32_t)col[k + 1] << 16 : 0) : 0;
    }
}

/* c (+)= the mi x nj corner of an 8 x 32 tile over kp pairs. */
__attribute__((target("avx512f,avx512bf16"))) static void bf_tile(int64_t kp, const uint32_t *a, const uint32_t *b,
                                                                  float *c, int64_t ldc, bool acc, int mi, int nj)
{
    __m512 s0[BF_MR], s1[BF_MR];
#pragma GCC unroll 8
    for (int i = 0; i < BF_MR; i++) s0[i] = s1[i] = _mm512_setzero_ps();
    for (int64_t p = 0; p < kp; p++, a += BF_MR, b += BF_NR) {
        __m512bh b0 = (__m512bh)_mm512_loadu_si512(b), b1 = (__m512bh)_mm512_loadu_si512(b + 16);
#pragma GCC unroll 8
        for (int i = 0; i < BF_MR; i++) {
            __m512bh ai = (__m512bh)_mm512_set1_epi32((int)a[i]);
            s0[i] = _mm512_dpbf16_ps(s0[i], ai, b0);
            s1[i] = _mm512_dpbf16_ps(s1[i], ai, b1);
        }
    }
    __mmask16 m0, m1;
    gemm_masks32(nj, &m0, &m1);
#pragma GCC unroll 8
    for (int i = 0; i < BF_MR; i++) {
        if (i >= mi) break;
        gemm_put_row32(c + i * ldc, m0, m1, s0[i], s1[i], acc);
    }
}

static void panel_tasks(void *vctx, int64_t p0, int64_t p1)
{
    bf_job *j = vctx;
    uint32_t *bp = aligned_alloc(64, ((size_t)j->KP * BF_NR * sizeof(uint32_t) + 63) & ~(size_t)63);
    if (!bp) {
        __atomic_store_n(&j->oom, true, __ATOMIC_RELAXED);
        return;
    }
    int64_t tiles = (j->mc + BF_MR - 1) / BF_MR;
    for (int64_t p = p0; p < p1; p++) {
        int64_t j0 = p * BF_NR, nj = min64(BF_NR, j->N - j0);
        pack_b_panel(j, bp, j0, nj);
        for (int64_t t = 0; t < tiles; t++)
            bf_tile(j->KP, j->ap + t * j->KP * BF_MR, bp, j->C + (j->m0 + t * BF_MR) * j->ldc + j0, j->ldc,
                    j->accumulate, (int)min64(BF_MR, j->mc - t * BF_MR), (int)nj);
    }
    free(bp);
}
#endif

ct_status cpu_gemm_bf16_dot(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                            const uint16_t *B, int64_t csb, float *C, int64_t ldc, bool accumulate)
{
#ifdef BF_X86
    if (M <= 0 || N <= 0 || K <= 0) return core_err(CT_ERR_INVALID_ARG, "bf16 gemm: empty product %lld x %lld x %lld",
                                                     (long long)M, (long long)N, (long long)K);
    bf_job j = {.M = M, .N = N, .K = K, .KP = (K + 1) / 2, .A = A, .rsa = rsa, .csa = csa, .B = B, .csb = csb, .C = C,
                .ldc = ldc, .accumulate = accumulate};
    int64_t chunk = min64(M, BF_MCHUNK);
    j.ap = malloc(sizeof(uint32_t) * (size_t)(((chunk + BF_MR - 1) / BF_MR) * BF_MR * j.KP));
    if (!j.ap) return core_err(CT_ERR_OOM, "bf16 gemm: no memory for %lld packed rows of K = %lld", (long long)chunk, (long long)K);
    int64_t np = (N + BF_NR - 1) / BF_NR;
    for (j.m0 = 0; j.m0 < M && !j.oom; j.m0 += chunk) {
        j.mc = min64(chunk, M - j.m0);
        cpu_parallel_for((j.mc + BF_MR - 1) / BF_MR, 1, pack_a_tiles, &j);
        if (!j.oom) cpu_parallel_for(np, 1, panel_tasks, &j);
    }
    free(j.ap);
    if (j.oom) return core_err(CT_ERR_OOM, "bf16 gemm: no memory for a packed panel (K = %lld)", (long long)K);
    return CT_OK;
#else
    (void)M, (void)N, (void)K, (void)A, (void)rsa, (void)csa, (void)B, (void)csb, (void)C, (void)ldc, (void)accumulate;
    return core_err(CT_ERR_UNSUPPORTED, "bf16 gemm: not built for this CPU");
#endif
}
