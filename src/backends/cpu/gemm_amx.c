/* F16 and BF16 weights in prompts on CPUs with AMX-BF16 tiles (Sapphire Rapids and later).
 *
 * One tdpbf16ps multiplies a 16 x 32 bf16 tile of x by a 32 x 16 tile of w into a 16 x 16
 * f32 tile, exact bf16 x bf16 products summed in f32: on a Xeon 16 times the products per
 * instruction of a 512-bit FMA. BF16 weights take x rounded to bf16, as cpu_gemm_bf16_dot
 * (and llama.cpp) do. F16 weights have 11 significant bits, bf16 8, so rounding them would
 * lose accuracy; instead each operand is split into two bf16 terms, w = wh + wl (exact: the
 * 3 bits below wh's fit wl) and x = xh + xl (|x - xh - xl| <= 2^-16 |x|), and three
 * passes sum wh xh + wl xh + wh xl. The dropped wl xl and x's remainder leave a relative
 * error near 2^-16 per product: finer than llama.cpp's, which rounds x to f16 (2^-11).
 *
 * Layout: A (x) is packed per chunk of rows as [16-row tile][k step of 32][16][32 bf16],
 * one 1 KiB tile load per step; each task packs a 32-column panel of B (w) as [k step][2
 * tiles][16 pairs][16 columns] dwords (pairs of consecutive k in one dword, the layout
 * tdpbf16ps reads), then runs 32 x 32 blocks of C (four accumulator tiles) over it. Zeros
 * pad K to the step, rows to a pair of tiles and columns to the panel. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm.h"
#include "core/cpuid.h"

#if defined(__x86_64__) && defined(__linux__)
#include <immintrin.h>

#include "backends/cpu/gemm_avx512.h"
#define AX_X86 1
#endif

#define AX_NR 32      /* columns of a task's panel: two B tiles */
#define AX_KS 32      /* k per tile step (16 pairs) */
#define AX_TILE 512   /* 16-bit elements of one tile (16 rows x 64 bytes) */
#define AX_MCHUNK 256 /* rows of A packed per pass over B */

bool cpu_gemm_amx_on(void) { return cpu_amx_usable(CPU_AMX_BF16) && cpu_simd_level() >= CPU_SIMD_AVX512; }

#ifdef AX_X86
typedef struct ax_job {
    int64_t N, K, KS; /* KS: k steps of 32 (K rounded up) */
    const float *A;
    int64_t rsa, csa;
    const uint16_t *B; /* column j of B (k = 0..K-1) at B + j * csb */
    int64_t csb;
    bool bf16;         /* B is bf16: one pass, no low terms */
    float *C;
    int64_t ldc;
    bool accumulate;
    int64_t m0, mc, mt; /* the current chunk of rows, its row tiles (even) */
    int64_t rgroups;    /* tasks per panel: tile pairs split for narrow B */
    uint16_t *ah, *al;  /* its packed A: high and (f16 B) low terms */
    bool a_bad;         /* the chunk's A has a value that is not finite */
    bool oom;
} ax_job;

/* f32 -> two bf16 terms, 16 lanes: hi rounded to nearest, lo = bf16(v - hi). Returns the
 * lanes whose hi is not finite (v infinite or NaN, or beyond bf16's range): there the
 * split's cross terms would make NaN from 0 x inf, so the caller takes another path. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static inline __mmask16 split16(__m512 v, __m256i *hi,
                                                                                     __m256i *lo)
{
    __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
    __m512 back = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    *hi = h;
    *lo = (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(v, back));
    return _mm512_cmp_ps_mask(_mm512_abs_ps(back), _mm512_set1_ps(__builtin_inff()), _CMP_NLT_UQ);
}

/* One row of A (K values, csa apart) as bf16 terms at hi / lo (lo may be NULL), k step s at
 * s * 16 * 32: the row's place in its tile. Zeros past K. False where a value is not finite. */
__attribute__((target("avx512f,avx512bw,avx512bf16"))) static bool row_terms(const ax_job *j, const float *a,
                                                                           uint16_t *hi, uint16_t *lo)
{
    float buf[AX_KS];
    __mmask16 bad = 0;
    for (int64_t s = 0; s < j->KS; s++) {
        int64_t k0 = s * AX_KS, n = min64(AX_KS, j->K - k0);
        const float *src = buf;
        if (j->csa == 1 && n == AX_KS) src = a + k0;
        else
            for (int64_t i = 0; i < AX_KS; i++) buf[i] = i < n ? a[(k0 + i) * j->csa] : 0.0f;
        uint16_t *dh = hi + s * AX_TILE, *dl = lo ? lo + s * AX_TILE : NULL;
        for (int h = 0; h < 2; h++) {
            __m256i th, tl;
            bad |= split16(_mm512_loadu_ps(src + 16 * h), &th, &tl);
            _mm256_storeu_si256((__m256i *)(dh + 16 * h), th);
            if (dl) _mm256_storeu_si256((__m256i *)(dl + 16 * h), tl);
        }
    }
    return bad == 0 || !lo; /* one term (bf16 B): inf and NaN meet w as they would in f32 */
}

static void pack_a_tiles(void *vctx, int64_t t0, int64_t t1)
{
    ax_job *j = vctx;
    size_t tile_elems = (size_t)j->KS * AX_TILE;
    for (int64_t t = t0; t < t1; t++)
        for (int i = 0; i < 16; i++) {
            int64_t m = t * 16 + i;
            uint16_t *hi = j->ah + t * tile_elems + i * 32, *lo = j->al ? j->al + t * tile_elems + i * 32 : NULL;
            if (m < j->mc) {
                if (!row_terms(j, j->A + (j->m0 + m) * j->rsa, hi, lo)) __atomic_store_n(&j->a_bad, true, __ATOMIC_RELAXED);
                continue;
            }
            for (int64_t s = 0; s < j->KS; s++) {
                memset(hi + s * AX_TILE, 0, 64);
                if (lo) memset(lo + s * AX_TILE, 0, 64);
            }
        }
}

/* Column c's 32 values of k step s as 16 dwords of bf16 pairs: high terms in *hi, low terms
 * (f16 B) in *lo. Zeros past K. False where a value is not finite. */
__attribute__((target("avx512f,avx512bw,avx512bf16,f16c"))) static inline bool column_pairs(const ax_job *j,
                                                                                          const uint16_t *col, int64_t s,
                                                                                          __m512i *hi, __m512i *lo)
{
    int64_t k0 = s * AX_KS, n = min64(AX_KS, j->K - k0);
    __mmask32 m = n >= 32 ? 0xFFFFFFFFu : (__mmask32)((1u << n) - 1);
    __m512i raw = _mm512_maskz_loadu_epi16(m, col + k0);
    if (j->bf16) { /* one term: inf and NaN meet x as they would in f32 */
        *hi = raw;
        return true;
    }
    __m256i h0, l0, h1, l1;
    __mmask16 bad = split16(_mm512_cvtph_ps(_mm512_castsi512_si256(raw)), &h0, &l0);
    bad |= split16(_mm512_cvtph_ps(_mm512_extracti64x4_epi64(raw, 1)), &h1, &l1);
    *hi = _mm512_inserti64x4(_mm512_castsi256_si512(h0), h1, 1);
    *lo = _mm512_inserti64x4(_mm512_castsi256_si512(l0), l1, 1);
    return bad == 0;
}

/* Columns j0..j0+nj of B, every k step, as [KS][2 tiles][16 pairs][16 columns] dwords
 * (high terms at bh, low at bl for f16 B); zeros past nj. False where a value is not finite. */
__attribute__((target("avx512f,avx512bw,avx512bf16,f16c"))) static bool pack_b_panel(const ax_job *j, uint32_t *bh,
                                                                                   uint32_t *bl, int64_t j0, int64_t nj)
{
    bool ok = true;
    for (int64_t s = 0; s < j->KS; s++)
        for (int t = 0; t < 2; t++) {
            __m512i h[16], l[16];
            for (int c = 0; c < 16; c++) {
                int64_t jc = t * 16 + c;
                h[c] = l[c] = _mm512_setzero_si512();
                if (jc < nj) ok &= column_pairs(j, j->B + (j0 + jc) * j->csb, s, &h[c], &l[c]);
            }
            size_t off = (size_t)(s * 2 + t) * 256;
            gemm_store_tr16(h, bh + off, 16);
            if (!j->bf16) gemm_store_tr16(l, bl + off, 16);
        }
    return ok;
}

/* C (+)= rows r0..r1 of the chunk times columns j0..j0+nj of B in plain f32 (a panel with
 * a weight that is not finite: its products must be what f32 makes of them). */
static void panel_plain(const ax_job *j, int64_t r0, int64_t r1, int64_t j0, int64_t nj)
{
    for (int64_t r = r0; r < r1; r++) {
        const float *a = j->A + (j->m0 + r) * j->rsa;
        float *c = j->C + (j->m0 + r) * j->ldc + j0;
        for (int64_t n = 0; n < nj; n++) {
            const uint16_t *col = j->B + (j0 + n) * j->csb;
            float s = 0.0f;
            for (int64_t k = 0; k < j->K; k++)
                s += a[k * j->csa] * (j->bf16 ? ct_bf16_to_f32(col[k]) : ct_f16_to_f32(col[k]));
            c[n] = j->accumulate ? c[n] + s : s;
        }
    }
}

/* Tiles 0..3: C rows 0-15 x cols 0-15, 0-15 x 16-31, 16-31 x 0-15, 16-31 x 16-31; 4, 5 the
 * two row tiles of A; 6, 7 the two column tiles of B. A constant in read-only data: GCC 12
 * drops stores into a local config that only ldtilecfg reads (it does not see the builtin
 * read the memory), leaving garbage that faults. */
static const cpu_amx_tilecfg g_cfg = {.palette = 1,
                                      .colsb = {64, 64, 64, 64, 64, 64, 64, 64},
                                      .rows = {16, 16, 16, 16, 16, 16, 16, 16}};

__attribute__((target("amx-tile"))) static void tiles_configure(void) { _tile_loadconfig(&g_cfg); }

/* The four accumulators += row tiles a0, a1 (NULL: those already in tiles 4, 5) times
 * column tiles b0, b1. */
static inline __attribute__((always_inline, target("amx-tile,amx-bf16"))) void tiles_pass(const void *a0, const void *a1,
                                                                                         const void *b0, const void *b1)
{
    if (a0) {
        _tile_loadd(4, a0, 64);
        _tile_loadd(5, a1, 64);
    }
    _tile_loadd(6, b0, 64);
    _tile_loadd(7, b1, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
}

/* The 32 x 32 block of C from row tiles a0, a0 + 1 (A terms at ah / al, row tile stride ts)
 * and the panel's B terms, into out (32 x 32 floats). */
__attribute__((target("amx-tile,amx-bf16"))) static void block_32x32(const ax_job *j, const uint16_t *ah,
                                                                   const uint16_t *al, size_t ts, const uint32_t *bh,
                                                                   const uint32_t *bl, float *out)
{
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t s = 0; s < j->KS; s++) {
        const uint16_t *a0 = ah + s * AX_TILE;
        const uint32_t *b0 = bh + s * 512;
        tiles_pass(a0, a0 + ts, b0, b0 + 256);
        if (!bl) continue;
        tiles_pass(NULL, NULL, bl + s * 512, bl + s * 512 + 256); /* xh wl */
        tiles_pass(al + s * AX_TILE, al + s * AX_TILE + ts, b0, b0 + 256); /* xl wh */
    }
    _tile_stored(0, out, 128);
    _tile_stored(1, out + 16, 128);
    _tile_stored(2, out + 16 * 32, 128);
    _tile_stored(3, out + 16 * 32 + 16, 128);
}

/* C (+)= the mi x nj corner of a 32 x 32 block. */
__attribute__((target("avx512f"))) static void write_block(const ax_job *j, const float *blk, float *c, int mi, int nj)
{
    __mmask16 m0, m1;
    gemm_masks32(nj, &m0, &m1);
    for (int i = 0; i < mi; i++)
        gemm_put_row32(c + i * j->ldc, m0, m1, _mm512_loadu_ps(blk + i * 32), _mm512_loadu_ps(blk + i * 32 + 16),
                       j->accumulate);
}

/* Task = panel p (32 columns) x group g of the chunk's tile pairs. The panel and the C
 * block live in the thread's scratch: a fresh allocation of that size per task was mapped
 * and faulted in each time (f16 128 x 2048 x 2048 on 16 threads: 406 GFLOP/s). */
__attribute__((target("amx-tile"))) static void panel_tasks(void *vctx, int64_t t0, int64_t t1)
{
    ax_job *j = vctx;
    size_t terms = j->bf16 ? 1 : 2, panel = (size_t)j->KS * 512;
    float *blk = cpu_scratch(CPU_SCRATCH_AMX_B, 32 * 32 * sizeof(float) + terms * panel * sizeof(uint32_t));
    if (!blk) {
        __atomic_store_n(&j->oom, true, __ATOMIC_RELAXED);
        return;
    }
    uint32_t *bp = (uint32_t *)(blk + 32 * 32);
    tiles_configure();
    int64_t pairs = j->mt / 2, last_p = -1;
    size_t ts = (size_t)j->KS * AX_TILE;
    bool b_ok = true;
    for (int64_t t = t0; t < t1; t++) {
        int64_t p = t / j->rgroups, g = t % j->rgroups;
        int64_t j0 = p * AX_NR, nj = min64(AX_NR, j->N - j0);
        if (p != last_p) b_ok = pack_b_panel(j, bp, j->bf16 ? NULL : bp + panel, j0, nj), last_p = p;
        int64_t q0 = pairs * g / j->rgroups, q1 = pairs * (g + 1) / j->rgroups;
        if (!b_ok) {
            panel_plain(j, min64(32 * q0, j->mc), min64(32 * q1, j->mc), j0, nj);
            continue;
        }
        for (int64_t q = q0; q < q1; q++) {
            block_32x32(j, j->ah + 2 * q * ts, j->al ? j->al + 2 * q * ts : NULL, ts, bp, j->bf16 ? NULL : bp + panel,
                        blk);
            int64_t r0 = 32 * q;
            write_block(j, blk, j->C + (j->m0 + r0) * j->ldc + j0, (int)min64(32, j->mc - r0), (int)nj);
        }
    }
    _tile_release();
}
#endif

ct_status cpu_gemm_amx_half(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                            const uint16_t *B, int64_t csb, bool bf16, float *C, int64_t ldc, bool accumulate)
{
#ifdef AX_X86
    if (M <= 0 || N <= 0 || K <= 0) return core_err(CT_ERR_INVALID_ARG, "amx gemm: empty product %lld x %lld x %lld",
                                                     (long long)M, (long long)N, (long long)K);
    ax_job j = {.N = N, .K = K, .KS = (K + AX_KS - 1) / AX_KS, .A = A, .rsa = rsa, .csa = csa, .B = B,
                .csb = csb, .bf16 = bf16, .C = C, .ldc = ldc, .accumulate = accumulate};
    int64_t chunk = min64(M, AX_MCHUNK), tiles = ((chunk + 31) / 32) * 2;
    size_t elems = (size_t)(tiles * j.KS * AX_TILE);
    j.ah = cpu_scratch(CPU_SCRATCH_AMX_A, sizeof(uint16_t) * elems * (bf16 ? 1 : 2));
    if (!j.ah)
        return core_err(CT_ERR_OOM, "amx gemm: no memory for %lld packed rows of K = %lld", (long long)chunk,
                        (long long)K);
    j.al = bf16 ? NULL : j.ah + elems;
    int64_t np = (N + AX_NR - 1) / AX_NR, threads = cpu_num_threads();
    for (j.m0 = 0; j.m0 < M && !j.oom; j.m0 += chunk) {
        j.mc = min64(chunk, M - j.m0);
        j.mt = ((j.mc + 31) / 32) * 2;
        /* narrow B (k and v projections): split the rows too, so every thread has work */
        j.rgroups = min64(j.mt / 2, max64(1, (2 * threads + np - 1) / np));
        j.a_bad = false;
        cpu_parallel_for(j.mt, 1, pack_a_tiles, &j);
        if (!j.a_bad) {
            cpu_parallel_for(np * j.rgroups, 1, panel_tasks, &j);
            continue;
        }
        ct_status s = cpu_gemm_f32_bhalf_vec(j.mc, N, K, A + j.m0 * rsa, rsa, csa, B, 1, csb, bf16, C + j.m0 * ldc, ldc,
                                             accumulate);
        if (s != CT_OK) return s;
    }
    if (j.oom) return core_err(CT_ERR_OOM, "amx gemm: no memory for a packed panel (K = %lld)", (long long)K);
    return CT_OK;
#else
    (void)M, (void)N, (void)K, (void)A, (void)rsa, (void)csa, (void)B, (void)csb, (void)bf16, (void)C, (void)ldc,
        (void)accumulate;
    return core_err(CT_ERR_UNSUPPORTED, "amx gemm: not built for this CPU");
#endif
}
