/* Packed-panel GEMM for prefill (AVX-512, with or without VNNI) of the 2- and 3-bit K-quants, which the
 * other panel files leave out. Both are 16 groups of 16 quants per 256-element block; the
 * panels hold them "row per 32-bit lane" like the Q6_K panels (quant_panel_avx512.c), one
 * byte per quant, so one vpdpbusd multiplies 16 rows by four broadcast activation values.
 *
 * Q2_K (w = d sc q - dmin m, sc and m 4-bit, q 2-bit): the packer stores sc * q (at most
 * 45, still an unsigned byte), so a whole block sums in one integer accumulator with no
 * per-group scaling; the mins go in as 16-bit pairs against the activations' 16-bit group
 * sums (vpdpwssd). Per block and row: d_a (d isum - dmin msum), both sums exact.
 *
 * Q3_K (w = d s (q - 4), s signed 6-bit, q 3-bit): the quants go in unsigned (0..7) with
 * f32 group scales d s: exactly the Q6_K panel layout and kernel with zero point 4 instead
 * of 32, so it uses that kernel (quant_panel_gemm_k16).
 *
 * Results agree with quant_get_vec_dot to f32 rounding, not bit for bit. */
#include <stddef.h>

#include "quant/quant_impl.h"
#include "quant/quant_target.h"
#include "quant/quant_avx512_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "quant/quant_panel_avx512.h"

QUANT_TARGET_BEGIN(QZ_TARGET)

#define Q2_QBYTES (64 * 64)                        /* 64 quad vectors per 256-element block */
#define Q2_BLOCK_BYTES (Q2_QBYTES + 8 * 64 + 2 * 64) /* + 8 vectors of min pairs, d, dmin */

/* Quants 64c .. 64c+63 of a Q2_K block, each times its group's 4-bit scale (0..45). The
 * four groups of the chunk are the four 128-bit lanes. */
P_INLINE __m512i k2_chunk(const blk_q2_k *b, int c)
{
    const __m256i m2 = _mm256_set1_epi8(3);
    __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * (c / 2)));
    int sh = 4 * (c % 2);
    __m512i v = p_join(_mm256_and_si256(_mm256_srli_epi16(q, sh), m2), _mm256_and_si256(_mm256_srli_epi16(q, sh + 2), m2));
    uint32_t s4;
    memcpy(&s4, b->scales + 4 * c, 4);
    /* byte k of lane L -> scale byte L */
    const __m512i lane = _mm512_set_epi32(0x03030303, 0x03030303, 0x03030303, 0x03030303, 0x02020202, 0x02020202,
                                          0x02020202, 0x02020202, 0x01010101, 0x01010101, 0x01010101, 0x01010101, 0, 0, 0, 0);
    __m512i sc = _mm512_shuffle_epi8(_mm512_set1_epi32((int)(s4 & 0x0F0F0F0Fu)), lane);
    /* sc * q for q in 0..3, without a byte multiply */
    __mmask64 b0 = _mm512_test_epi8_mask(v, _mm512_set1_epi8(1)), b1 = _mm512_test_epi8_mask(v, _mm512_set1_epi8(2));
    return _mm512_add_epi8(_mm512_maskz_mov_epi8(b0, sc), _mm512_maskz_mov_epi8(b1, _mm512_add_epi8(sc, sc)));
}

/* Quants 64c .. 64c+63 of a Q3_K block, unsigned (0..7): two low bits from qs, the third
 * from hmask (bit 4 (c / 2) + j of byte l for element 128 (c / 2) + 32 j + l). */
P_INLINE __m512i k3_chunk(const blk_q3_k *b, int c)
{
    const __m256i m2 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
    __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * (c / 2)));
    __m256i hm = _mm256_loadu_si256((const __m256i *)b->hmask);
    int sh = 4 * (c % 2), hs = 4 * (c / 2) + 2 * (c % 2);
    __m256i lo = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, sh), m2),
                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, hs), one), 2));
    __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, sh + 2), m2),
                                 _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hm, hs + 1), one), 2));
    return p_join(lo, hi);
}

/* Chunk c of block b of the 16 rows (zero past nw), transposed and stored as 16 vectors. */
P_INLINE void k23_store_chunk(const void *vw, size_t ws, int nw, int64_t b, int c, uint8_t *dst, const bool three)
{
    __m512i r[16];
    size_t bsz = three ? sizeof(blk_q3_k) : sizeof(blk_q2_k);
    for (int i = 0; i < 16; i++) {
        const char *blk = (const char *)vw + (size_t)i * ws + (size_t)b * bsz;
        r[i] = i >= nw ? _mm512_setzero_si512() : three ? k3_chunk((const blk_q3_k *)blk, c) : k2_chunk((const blk_q2_k *)blk, c);
    }
    p_transpose16(r);
    for (int j = 0; j < 16; j++) _mm512_storeu_si512(dst + (size_t)(16 * c + j) * 64, r[j]);
}

static void k2_pack(const void *vw, size_t ws, int nw, int64_t K, void *vpanel)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * Q2_BLOCK_BYTES;
        uint32_t *mv = (uint32_t *)(dst + Q2_QBYTES);
        float *dv = (float *)(mv + 8 * 16), *dmv = dv + 16;
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * sizeof(blk_q2_k), sizeof(blk_q2_k));
        for (int c = 0; c < 4; c++) k23_store_chunk(vw, ws, nw, b, c, dst, false);
        for (int i = 0; i < 16; i++) {
            const blk_q2_k *w = i < nw ? (const blk_q2_k *)((const char *)vw + (size_t)i * ws) + b : NULL;
            for (int k = 0; k < 8; k++) mv[16 * k + i] = w ? (uint32_t)(w->scales[2 * k] >> 4) | (uint32_t)(w->scales[2 * k + 1] >> 4) << 16 : 0;
            dv[i] = w ? qf16(w->d) : 0.f;
            dmv[i] = w ? qf16(w->dmin) : 0.f;
        }
    }
}

/* the activation block scales, one per block, so the kernel reads one array */
static void k2_aux(const void *va, int64_t K, float *aux)
{
    const blk_q8_k *a = va;
    for (int64_t b = 0; b < K / QKK; b++) aux[b] = a[b].d;
}

/* out = sum_b d_a (d isum - dmin msum), isum = sum (sc q) a, msum = sum_g m_g bsum_g */
P_INLINE void k2_gemm_body(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                           float *s, size_t ss, int nw, const int NA)
{
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * Q2_BLOCK_BYTES;
        const blk_q8_k *ab[QUANT_PANEL_MAX_A];
        __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A], im[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            ab[j] = (const blk_q8_k *)(a + (size_t)j * as) + b;
            i0[j] = i1[j] = im[j] = _mm512_setzero_si512();
        }
#pragma GCC unroll 4
        for (int t = 0; t < 64; t += 2) {
            __m512i w0 = _mm512_loadu_si512(pq + (size_t)t * 64), w1 = _mm512_loadu_si512(pq + (size_t)(t + 1) * 64);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                qz_dpbusd_x2(&i0[j], &i1[j], w0, p_bcast4(ab[j]->qs + 4 * t), w1, p_bcast4(ab[j]->qs + 4 * t + 4));
            }
        }
#pragma GCC unroll 8
        for (int k = 0; k < 8; k++) {
            __m512i mv = _mm512_loadu_si512(pq + Q2_QBYTES + (size_t)k * 64);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                int32_t pair;
                memcpy(&pair, ab[j]->bsums + 2 * k, 4);
                im[j] = qz_dpwssd(im[j], mv, _mm512_set1_epi32(pair));
            }
        }
        const float *dp = (const float *)(pq + Q2_QBYTES + 8 * 64);
        __m512 dw = _mm512_loadu_ps(dp), dmw = _mm512_loadu_ps(dp + 16);
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            __m512 blk = _mm512_fmsub_ps(dw, _mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j])),
                                         _mm512_mul_ps(dmw, _mm512_cvtepi32_ps(im[j])));
            tot[j] = _mm512_fmadd_ps(blk, _mm512_set1_ps(aux[(size_t)j * xs + b]), tot[j]);
        }
    }
    p_store(s, ss, tot, nw, NA);
}

P_ENTRY(k2_gemm, k2_gemm_body)

static void k3_pack(const void *vw, size_t ws, int nw, int64_t K, void *vpanel)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * P_K16_BLOCK_BYTES;
        float *scv = (float *)(dst + P_K16_QBYTES);
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * sizeof(blk_q3_k), sizeof(blk_q3_k));
        for (int c = 0; c < 4; c++) k23_store_chunk(vw, ws, nw, b, c, dst, true);
        __m128i sc[16];
        float d[16];
        for (int i = 0; i < 16; i++) {
            int8_t s8[16] = {0};
            d[i] = 0.f;
            if (i < nw) {
                const blk_q3_k *w = (const blk_q3_k *)((const char *)vw + (size_t)i * ws) + b;
                quant_k3_unpack(w->scales, s8);
                d[i] = qf16(w->d);
            }
            sc[i] = _mm_loadu_si128((const __m128i *)s8);
        }
        p_k16_scales(sc, d, scv);
    }
}

/* zero point 4 */
static void k3_aux(const void *va, int64_t K, float *aux) { p_k16_aux(va, K, aux, 4); }

QUANT_TARGET_END

static const quant_panel_kernels g_panel_q2_k = {Q2_BLOCK_BYTES, 1, k2_pack, k2_aux, k2_gemm, 0};
static const quant_panel_kernels g_panel_q3_k = {P_K16_BLOCK_BYTES, 16, k3_pack, k3_aux, QZ_SYM(quant_panel_gemm_k16),
                                                 0};

void QZ_SYM(quant_panel_k23_fill_avx512)(quant_panel_table tab)
{
    tab[CT_Q2_K] = &g_panel_q2_k;
    tab[CT_Q3_K] = &g_panel_q3_k;
}
#else
void QZ_SYM(quant_panel_k23_fill_avx512)(quant_panel_table tab) { (void)tab; }
#endif
