/* Internal to src/quant: the building blocks every AVX-512 packed-panel file shares, at both
 * AVX-512 levels (quant_avx512_isa.h)
 * (quant_panel_avx512.c for Q4_0/Q8_0/Q4_K/Q5_K/Q6_K, quant_panel_legacy_avx512.c for
 * Q4_1/Q5_0/Q5_1, quant_panel_amx.c for the AMX tiles). Include only on x86-64 GCC/Clang
 * builds; the helpers carry their own target attributes, so the includer's target region
 * need not match. */
#ifndef CT_QUANT_PANEL_AVX512_H
#define CT_QUANT_PANEL_AVX512_H

#include <immintrin.h>
#include <stddef.h>
#include <string.h>

#include "quant/quant_impl.h"
#include "quant/quant_target.h"
#include "quant/quant_avx512_isa.h"
#include "quant/quant_x86_bytes.h"

QUANT_TARGET_BEGIN(QZ_TARGET)

#define P_INLINE static inline __attribute__((always_inline))

static_assert(QUANT_PANEL_ROWS == 16, "one panel row per 32-bit lane of a 512-bit vector");
static_assert(QUANT_PANEL_MAX_A == 4, "the kernels' switches cover 1..4 activation rows");

/* r[i] holds 16 dwords of row i; afterwards r[j] holds dword j of every row. */
P_INLINE void p_transpose16(__m512i r[16])
{
    __m512i t[16], u[16];
    for (int k = 0; k < 8; k++) {
        t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    /* in each 128-bit lane L of u[4k + c]: dword 4L + c of rows 4k .. 4k+3 */
    for (int k = 0; k < 4; k++) {
        u[4 * k + 0] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i v0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0x88), w0 = _mm512_shuffle_i32x4(u[c], u[4 + c], 0xDD);
        __m512i v1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0x88), w1 = _mm512_shuffle_i32x4(u[8 + c], u[12 + c], 0xDD);
        r[c] = _mm512_shuffle_i32x4(v0, v1, 0x88);
        r[8 + c] = _mm512_shuffle_i32x4(v0, v1, 0xDD);
        r[4 + c] = _mm512_shuffle_i32x4(w0, w1, 0x88);
        r[12 + c] = _mm512_shuffle_i32x4(w0, w1, 0xDD);
    }
}

P_INLINE __m512i p_join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

/* Quants 64c .. 64c+63 of a Q6_K block, unsigned (0..63; the -32 offset goes into the sums). */
P_INLINE __m512i p_q6k_chunk(const blk_q6_k *b, int c)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    int h = c / 2, shift_l = 4 * (c % 2), shift_h = 4 * (c % 2);
    __m256i l0 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h));
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(b->ql + 64 * h + 32));
    __m256i hb = _mm256_loadu_si256((const __m256i *)(b->qh + 32 * h));
    __m256i lo0 = _mm256_and_si256(_mm256_srli_epi16(l0, shift_l), m4);
    __m256i lo1 = _mm256_and_si256(_mm256_srli_epi16(l1, shift_l), m4);
    __m256i hi0 = _mm256_and_si256(_mm256_srli_epi16(hb, shift_h), m3);
    __m256i hi1 = _mm256_and_si256(_mm256_srli_epi16(hb, shift_h + 2), m3);
    return p_join(_mm256_or_si256(lo0, _mm256_slli_epi16(hi0, 4)), _mm256_or_si256(lo1, _mm256_slli_epi16(hi1, 4)));
}

/* Quants 64c .. 64c+63 of a Q4_K block, one byte each (0..15). */
P_INLINE __m512i p_q4k_chunk(const blk_q4_k *b, int c)
{
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
    return p_join(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
}

/* Quants 64c .. 64c+63 of a Q5_K block (0..31): the Q4_K nibbles plus bits 2c / 2c+1 of qh. */
P_INLINE __m512i p_q5k_chunk(const blk_q5_k *b, int c)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256i q = _mm256_loadu_si256((const __m256i *)(b->qs + 32 * c));
    __m256i h = _mm256_loadu_si256((const __m256i *)b->qh);
    __m256i h0 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c), one), 4);
    __m256i h1 = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2 * c + 1), one), 4);
    return p_join(_mm256_or_si256(_mm256_and_si256(q, m4), h0),
                  _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), h1));
}

/* The K-quant block types the packers read. */
typedef enum p_kquant { P_Q4_K, P_Q5_K, P_Q6_K } p_kquant;

/* Quants 64c .. 64c+63 of block b of each of the 16 rows (zero rows past nw), transposed:
 * afterwards r[j] holds quants 64c + 4j .. +3 of row i in lane i. */
P_INLINE void p_kchunk_rows(const void *vw, size_t ws, int nw, int64_t b, int c, const p_kquant t, __m512i r[16])
{
    size_t bsz = t == P_Q6_K ? sizeof(blk_q6_k) : t == P_Q5_K ? sizeof(blk_q5_k) : sizeof(blk_q4_k);
    for (int i = 0; i < 16; i++) {
        const char *blk = (const char *)vw + (size_t)i * ws + (size_t)b * bsz;
        r[i] = i >= nw       ? _mm512_setzero_si512()
               : t == P_Q6_K ? p_q6k_chunk((const blk_q6_k *)blk, c)
               : t == P_Q5_K ? p_q5k_chunk((const blk_q5_k *)blk, c)
                             : p_q4k_chunk((const blk_q4_k *)blk, c);
    }
    p_transpose16(r);
}

static_assert(offsetof(blk_q4_k, scales) == offsetof(blk_q5_k, scales) && offsetof(blk_q4_k, dmin) == offsetof(blk_q5_k, dmin),
              "Q4_K and Q5_K block heads match");

/* Block b's heads of the 16 rows (Q4_K and Q5_K share them; zero rows past nw): each row's
 * 8 sub-block scales then 8 mins (quant_k4_unpack), its d and dmin. */
P_INLINE void p_k4_heads(const void *vw, size_t ws, int nw, int64_t b, size_t bsz, uint8_t sm[16][16], float d[16],
                         float dmin[16])
{
    for (int i = 0; i < 16; i++) {
        memset(sm[i], 0, 16);
        d[i] = dmin[i] = 0.0f;
        if (i >= nw) continue;
        const blk_q4_k *w = (const blk_q4_k *)((const char *)vw + (size_t)i * ws + (size_t)b * bsz);
        quant_k4_unpack(w->scales, sm[i]);
        d[i] = qf16(w->d), dmin[i] = qf16(w->dmin);
    }
}

/* The 16 rows' sub-block mins (sm[row][8 + j], p_k4_heads) as int16 pairs: vector p holds
 * (m_2p, m_2p+1) of each row, for vpdpwssd against the activation's bsum pairs. */
P_INLINE void p_k4_min_pairs(const uint8_t sm[16][16], int32_t mins[4 * 16])
{
    for (int pr = 0; pr < 4; pr++)
        for (int i = 0; i < 16; i++) mins[16 * pr + i] = (int32_t)((uint32_t)sm[i][8 + 2 * pr] | (uint32_t)sm[i][9 + 2 * pr] << 16);
}

/* A Q8_K block's sums over each 32-quant sub-block j as int16 pairs (bsum_2p, bsum_2p+1) in
 * dword p (|bsum| <= 32 * 127: no saturation). */
P_INLINE void p_bsum_pairs(const blk_q8_k *a, int32_t out[4])
{
    __m256i s = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), _mm256_set1_epi16(1));
    _mm_storeu_si128((__m128i *)out, _mm_packs_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1)));
}

/* The 16 rows are 16 far-apart streams, more than the hardware prefetchers follow:
 * fetch the next block of each row while this one is unpacked. */
P_INLINE void p_prefetch_rows(const void *vw, size_t ws, int nw, size_t off, size_t bytes)
{
    for (int i = 0; i < nw; i++)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)vw + (size_t)i * ws + off + o, _MM_HINT_T0);
}

P_INLINE __m512i p_bcast4(const int8_t *q)
{
    int32_t v;
    memcpy(&v, q, 4);
    return _mm512_set1_epi32(v);
}

P_INLINE void p_store(float *s, size_t ss, const __m512 *tot, int nw, const int NA)
{
    __mmask16 m = (__mmask16)((1u << nw) - 1u);
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) _mm512_mask_storeu_ps(s + (size_t)j * ss, m, tot[j]);
}

/* Adds a high bit's value (add where set: 16 for a fifth bit, 32 for Q6_K's sixth) to a kept
 * nibble vector's quants (Q5_K, Q5_0, Q5_1, Q6_K repacks): byte j of each lane of hv, spread
 * over the lane's four bytes, selects bit b for byte b of lo and bit 4 + b for byte b of hi. */
P_INLINE void p_add_high(__m512i hv, const int j, const int add, __m512i *lo, __m512i *hi)
{
    const __m512i val = _mm512_set1_epi8((char)add);
    const int rep = 0x01010101;
    __m512i spread = _mm512_shuffle_epi8(hv, _mm512_set4_epi32((12 + j) * rep, (8 + j) * rep, (4 + j) * rep, j * rep));
    *lo = _mm512_mask_add_epi8(*lo, _mm512_test_epi8_mask(spread, _mm512_set1_epi32(0x08040201)), *lo, val);
    *hi = _mm512_mask_add_epi8(*hi, _mm512_test_epi8_mask(spread, _mm512_set1_epi32((int)0x80402010u)), *hi, val);
}
P_INLINE void p_add_fifth(__m512i hv, const int j, __m512i *lo, __m512i *hi) { p_add_high(hv, j, 16, lo, hi); }

/* A gemm entry point over a kernel body templated on the activation-row count, so each
 * count gets its own fully unrolled loops. */
#define P_ENTRY(name, body)                                                                                          \
    static void name(int64_t K, const void *panel, const void *a, size_t as, const float *aux, size_t xs, int na,   \
                     float *s, size_t ss, int nw)                                                                    \
    {                                                                                                                \
        switch (na) {                                                                                                \
        case 1: body(K, panel, a, as, aux, xs, s, ss, nw, 1); break;                                                 \
        case 2: body(K, panel, a, as, aux, xs, s, ss, nw, 2); break;                                                 \
        case 3: body(K, panel, a, as, aux, xs, s, ss, nw, 3); break;                                                 \
        default: body(K, panel, a, as, aux, xs, s, ss, nw, 4); break;                                                \
        }                                                                                                            \
    }

/* The k16 panels' 16 vectors of group scales [group][row] of one block: row i's d_i times its 16
 * int8 group scales sc[i] (rows past nw zero in both). */
P_INLINE void p_k16_scales(__m128i sc[16], const float d[16], float *scv)
{
    qx_transpose16_bytes(sc);
    __m512 dv = _mm512_loadu_ps(d);
    for (int g = 0; g < 16; g++) _mm512_storeu_ps(scv + 16 * g, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc[g]))));
}

/* aux for the k16 kernel: -zero * bsum_g of each of the 16 groups, as int32 bits */
P_INLINE void p_k16_aux(const void *va, int64_t K, float *aux, const int zero)
{
    const blk_q8_k *a = va;
    for (int64_t b = 0; b < K / QKK; b++)
        for (int g = 0; g < 16; g++) {
            int32_t z = -zero * a[b].bsums[g];
            memcpy(aux + 16 * b + g, &z, 4);
        }
}

/* The Q6_K panel kernel (quant_panel_avx512.c), shared with Q3_K: per 256-element block,
 * 64 vectors of unsigned quants (vector t: quants 4t..4t+3 of each row), then 16 vectors of
 * f32 group scales [group][row]; aux: 16 int32 per block (in the float slots), minus the zero
 * point times each group's activation sum, which starts each group's integer sum, so the
 * zero point costs no vector op. out = sum_b d_a sum_g scale_g (isum_g + aux_g). */
#define P_K16_QBYTES (64 * 64)
#define P_K16_BLOCK_BYTES (P_K16_QBYTES + 16 * 64)
void QZ_SYM(quant_panel_gemm_k16)(int64_t K, const void *panel, const void *a, size_t as, const float *aux, size_t xs, int na,
                          float *s, size_t ss, int nw);

QUANT_TARGET_END

#endif
