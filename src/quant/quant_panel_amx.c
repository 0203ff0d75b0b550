/* Q6_K prompts on AMX-INT8 tiles (Sapphire Rapids and later).
 *
 * A tile product (tdpb*d) sums 64 k at a time, so a scale that changes every 16 k (Q6_K's
 * sub-blocks) cannot be applied between its products. Storing each sub-block's sums and
 * scaling them in f32 made the tiles no faster than the VNNI panels (measured on the GPU
 * machine's Xeon: a 16 x 16 x 16 group stored and scaled took 33.5 ns against 5.9 ns for
 * its loads and product, ~122 multiply-adds a ns against VNNI's ~133). Here the packer
 * folds the sub-block scale into the weight instead: w' = (q - 32) * scale is an integer
 * of at most 13 bits, split as w' = 64 hi + lo with hi in [-64, 64] (signed bytes) and lo
 * in [0, 63] (unsigned bytes). Two products per 64 k (tdpbssd on hi, tdpbsud on lo) then
 * give the exact integer sum of a whole 256-element block, scaled once per block by the
 * activation's d and the weight's d. (Micro-benchmark: ~660 useful multiply-adds a ns.)
 *
 * Panel block (16 weight rows, 256 k): 64 rows of hi (row t: bytes 4t..4t+3 of the 16
 * weight rows, a tile of B for 64 k every 16 rows), 64 rows of lo, then the 16 rows' d in
 * f32. One gemm call takes up to 32 activation rows (two tiles of A: the Q8_K quants copied
 * into the rows' aux, qa_aux_q8); sums in four tiles (hi / lo x two row tiles).
 *
 * Integer sums are exact (|sum| <= 4096 * 127 * 256 < 2^31); results agree with the row
 * dots to f32 rounding. */
#include <stddef.h>
#include <string.h>

#include "core/cpuid.h"
#include "quant/quant_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include "quant/quant_avx512_isa.h"
#include "quant/quant_panel_avx512.h"
#define QA_X86 1
#endif

#define QA_ROWS 32                       /* activation rows per gemm call: two tiles */
#define QA_TERM (64 * 64)                /* bytes of hi (or lo) per block */
#define QA_BLOCK_BYTES (2 * QA_TERM + 64) /* hi, lo, 16 f32 d */

#ifdef QA_X86
#define QA_ATTR target("amx-tile,amx-int8,avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#define QA_FN static __attribute__((QA_ATTR))
#define QA_INLINE static inline __attribute__((always_inline, QA_ATTR))

/* Chunk c (k 64c .. 64c+63) of a Q6_K row block as hi and lo bytes: 16 dwords each. */
QA_INLINE void qa_q6k_terms(const blk_q6_k *w, int c, __m512i *hi, __m512i *lo)
{
    __m512i q = _mm512_sub_epi8(p_q6k_chunk(w, c), _mm512_set1_epi8(32));
    __m512i h[2], l[2];
    for (int half = 0; half < 2; half++) { /* 32 quants: sub-blocks 4c + 2 half and the next */
        __m512i q16 = _mm512_cvtepi8_epi16(half ? _mm512_extracti64x4_epi64(q, 1) : _mm512_castsi512_si256(q));
        int s0 = w->scales[4 * c + 2 * half], s1 = w->scales[4 * c + 2 * half + 1];
        __m512i sc = _mm512_inserti64x4(_mm512_set1_epi16((short)s0), _mm256_set1_epi16((short)s1), 1);
        __m512i v = _mm512_mullo_epi16(q16, sc);
        h[half] = _mm512_srai_epi16(v, 6);
        l[half] = _mm512_and_si512(v, _mm512_set1_epi16(63));
    }
    *hi = p_join(_mm512_cvtepi16_epi8(h[0]), _mm512_cvtepi16_epi8(h[1]));
    *lo = p_join(_mm512_cvtepi16_epi8(l[0]), _mm512_cvtepi16_epi8(l[1]));
}

QA_FN void qa_pack_q6_k(const void *vw, size_t ws, int nw, int64_t K, void *vpanel)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * QA_BLOCK_BYTES;
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * sizeof(blk_q6_k), sizeof(blk_q6_k));
        for (int c = 0; c < 4; c++) {
            __m512i hi[16], lo[16];
            for (int i = 0; i < 16; i++) {
                hi[i] = lo[i] = _mm512_setzero_si512();
                if (i < nw) qa_q6k_terms((const blk_q6_k *)((const char *)vw + (size_t)i * ws) + b, c, &hi[i], &lo[i]);
            }
            p_transpose16(hi);
            p_transpose16(lo);
            for (int j = 0; j < 16; j++) {
                _mm512_storeu_si512(dst + (size_t)(16 * c + j) * 64, hi[j]);
                _mm512_storeu_si512(dst + QA_TERM + (size_t)(16 * c + j) * 64, lo[j]);
            }
        }
        float *d = (float *)(dst + 2 * QA_TERM);
        for (int i = 0; i < 16; i++) d[i] = i < nw ? qf16(((const blk_q6_k *)((const char *)vw + (size_t)i * ws))[b].d) : 0.0f;
    }
}

/* The activation row's quants, block after block, in the row's aux: aux rows are 64-byte
 * aligned and K bytes apart, so a tile row is one cache line. Read in place, a Q8_K row's
 * 64 quants straddle two lines (blocks are 292 bytes), and the tiles loaded them from
 * there at a fraction of the rate. */
static void qa_aux_q8(const void *va, int64_t K, float *aux)
{
    const blk_q8_k *a = va;
    for (int64_t b = 0; b < K / QKK; b++) memcpy((char *)aux + b * QKK, a[b].qs, QKK);
}

/* Tiles 0, 1: rows 0-15's hi and lo sums; 2, 3: rows 16-31's; 4, 5: the two row tiles of
 * activation quants (64 bytes a row); 6, 7: hi and lo weights (16 rows of 64 bytes). With
 * na <= 16 the second row tile repeats the first (its sums are not used). The config
 * goes through memory the compiler must keep: GCC 12 drops stores that only ldtilecfg
 * reads. */
QA_FN void qa_configure(int na)
{
    cpu_amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    int r0 = na < 16 ? na : 16, r1 = na <= 16 ? r0 : na - 16;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64;
    c.rows[0] = c.rows[1] = c.rows[4] = (uint8_t)r0;
    c.rows[2] = c.rows[3] = c.rows[5] = (uint8_t)r1;
    c.rows[6] = c.rows[7] = 16;
    __asm__ volatile("" : : "m"(c) : "memory");
    _tile_loadconfig(&c);
}

/* acc[m] += d_a[m] * d_w * (64 hi + lo) for the block whose sums are in buf (rows past na
 * are zero in buf and add nothing that is stored). */
QA_INLINE void qa_scale(const int32_t (*buf)[16][16], const float *dw, const float *da, int na, float (*acc)[16])
{
    __m512 w = _mm512_loadu_ps(dw);
    for (int m = 0; m < na; m++) {
        int t = m >> 4, r = m & 15;
        __m512i v = _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(buf[2 * t][r]), 6), _mm512_load_si512(buf[2 * t + 1][r]));
        __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(v), w);
        _mm512_store_ps(acc[m], _mm512_fmadd_ps(p, _mm512_set1_ps(da[m]), _mm512_load_ps(acc[m])));
    }
}

QA_FN void qa_gemm_q6_k(int64_t K, const void *panel, const void *va, size_t as, const float *aux, size_t xs, int na,
                        float *s, size_t ss, int nw)
{
    const char *a = va, *aq = (const char *)aux;
    size_t row = xs * sizeof(float), second = na > 16 ? 16 * row : 0; /* the second row tile, or the first again */
    int32_t buf[2][4][16][16] __attribute__((aligned(64)));
    float acc[QA_ROWS][16] __attribute__((aligned(64)));
    float da[2][QA_ROWS];
    memset(acc, 0, sizeof acc);
    qa_configure(na);
    int64_t nb = K / QKK;
    for (int64_t b = 0; b <= nb; b++) {
        int cur = (int)(b & 1);
        if (b < nb) {
            const uint8_t *pq = (const uint8_t *)panel + (size_t)b * QA_BLOCK_BYTES;
            const char *qs = aq + (size_t)b * QKK;
            _tile_zero(0);
            _tile_zero(1);
            _tile_zero(2);
            _tile_zero(3);
            for (int st = 0; st < 4; st++) {
                _tile_loadd(4, qs + 64 * st, (long)row);
                _tile_loadd(5, qs + second + 64 * st, (long)row);
                _tile_loadd(6, pq + (size_t)st * 1024, 64);
                _tile_loadd(7, pq + QA_TERM + (size_t)st * 1024, 64);
                _tile_dpbssd(0, 4, 6);
                _tile_dpbsud(1, 4, 7);
                _tile_dpbssd(2, 5, 6);
                _tile_dpbsud(3, 5, 7);
            }
            for (int m = 0; m < na; m++) da[cur][m] = ((const blk_q8_k *)(a + (size_t)m * as))[b].d;
        }
        /* the previous block's scaling runs on the vector unit while these products run */
        if (b > 0)
            qa_scale((const int32_t(*)[16][16])buf[cur ^ 1],
                     (const float *)((const uint8_t *)panel + (size_t)(b - 1) * QA_BLOCK_BYTES + 2 * QA_TERM), da[cur ^ 1],
                     na, acc);
        if (b < nb) {
            _tile_stored(0, buf[cur][0], 64);
            _tile_stored(1, buf[cur][1], 64);
            _tile_stored(2, buf[cur][2], 64);
            _tile_stored(3, buf[cur][3], 64);
        }
    }
    _tile_release();
    __mmask16 mask = (__mmask16)((1u << nw) - 1u);
    for (int m = 0; m < na; m++) _mm512_mask_storeu_ps(s + (size_t)m * ss, mask, _mm512_load_ps(acc[m]));
}

static const quant_panel_kernels g_amx_q6_k = {QA_BLOCK_BYTES, QKK / 4, qa_pack_q6_k, qa_aux_q8, qa_gemm_q6_k, QA_ROWS};
#endif

const quant_panel_kernels *quant_get_panel_amx(ct_dtype t)
{
#ifdef QA_X86
    if (t == CT_Q6_K && cpu_amx_usable(CPU_AMX_INT8) && quant_simd_supported(QUANT_SIMD_AVX512_VNNI)) return &g_amx_q6_k;
#else
    (void)t;
#endif
    return NULL;
}
