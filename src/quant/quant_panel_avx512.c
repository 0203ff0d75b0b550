/* Packed-panel GEMM for prefill (AVX-512, with or without VNNI: quant_avx512_isa.h): QUANT_PANEL_ROWS weight rows are unpacked
 * once into integer quants laid out "row per 32-bit lane": vector t of a block holds the
 * four quants 4t..4t+3 of each of the 16 rows. One vpdpbusd then multiplies 16 rows by
 * four activation values broadcast from a Q8_K row, so the 16 outputs build up in the lanes
 * with no horizontal sums, and each unpacked weight vector serves several activation rows.
 * Compared with the row-by-row dots this does ~4x fewer instructions per multiply-add; the
 * unpacking (nibbles -> bytes, a 16x16 dword transpose, scales -> f32) is paid once per
 * panel and amortized over all activation rows of the prompt.
 *
 * Integer sums per sub-block are exact; the sub-block scales are applied in f32 in an
 * order different from the row dots, so results agree with quant_get_vec_dot to f32
 * rounding, not bit for bit. */
#include <stddef.h>

#include "quant/quant_impl.h"
#include "quant/quant_target.h"
#include "quant/quant_avx512_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "quant/quant_panel_avx512.h"

QUANT_TARGET_BEGIN(QZ_TARGET)

#define P_QVECS 64                  /* quant vectors per 256-element block */
#define P_QBYTES (P_QVECS * 64)     /* their bytes */
#define P_BLOCK_BYTES (P_QBYTES + 16 * 64) /* K-quants: + 16 vectors of f32 scales (Q4_K: 8 scales, 8 mins) */

/* ---- packing: rows beyond nw are zero ---- */

/* Q4_K and Q5_K share the block head (d, dmin, 12 bytes of 6-bit scales and mins). */
P_INLINE void p_pack_k4(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const size_t bsz, const bool five)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * P_BLOCK_BYTES;
        float *scv = (float *)(dst + P_QBYTES), *mnv = scv + 8 * 16;
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * bsz, bsz);
        for (int c = 0; c < 4; c++) {
            __m512i r[16];
            p_kchunk_rows(vw, ws, nw, b, c, five ? P_Q5_K : P_Q4_K, r);
            for (int j = 0; j < 16; j++) _mm512_storeu_si512(dst + (size_t)(16 * c + j) * 64, r[j]);
        }
        uint8_t sm[16][16];
        float d[16], dm[16];
        p_k4_heads(vw, ws, nw, b, bsz, sm, d, dm);
        for (int i = 0; i < 16; i++)
            for (int s = 0; s < 8; s++) scv[16 * s + i] = d[i] * sm[i][s], mnv[16 * s + i] = dm[i] * sm[i][8 + s];
    }
}

static void p_pack_q4_k(const void *vw, size_t ws, int nw, int64_t K, void *panel)
{
    p_pack_k4(vw, ws, nw, K, panel, sizeof(blk_q4_k), false);
}

static void p_pack_q5_k(const void *vw, size_t ws, int nw, int64_t K, void *panel)
{
    p_pack_k4(vw, ws, nw, K, panel, sizeof(blk_q5_k), true);
}


static void p_pack_q6_k(const void *vw, size_t ws, int nw, int64_t K, void *vpanel)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * P_BLOCK_BYTES;
        float *scv = (float *)(dst + P_QBYTES);
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * sizeof(blk_q6_k), sizeof(blk_q6_k));
        for (int c = 0; c < 4; c++) {
            __m512i r[16];
            p_kchunk_rows(vw, ws, nw, b, c, P_Q6_K, r);
            for (int j = 0; j < 16; j++) _mm512_storeu_si512(dst + (size_t)(16 * c + j) * 64, r[j]);
        }
        __m128i sc[16];
        float d[16];
        for (int i = 0; i < 16; i++) {
            const blk_q6_k *w = i < nw ? (const blk_q6_k *)((const char *)vw + (size_t)i * ws) + b : NULL;
            sc[i] = w ? _mm_loadu_si128((const __m128i *)w->scales) : _mm_setzero_si128();
            d[i] = w ? qf16(w->d) : 0.f;
        }
        p_k16_scales(sc, d, scv);
    }
}

/* ---- activation sums per sub-block, as f32 (exact: |sum| < 2^13) ---- */

static void p_aux_q4_k(const void *va, int64_t K, float *aux)
{
    const blk_q8_k *a = va;
    for (int64_t b = 0; b < K / QKK; b++)
        for (int s = 0; s < 8; s++) aux[8 * b + s] = (float)(a[b].bsums[2 * s] + a[b].bsums[2 * s + 1]);
}

static void p_aux_q6_k(const void *va, int64_t K, float *aux) { p_k16_aux(va, K, aux, 32); }

/* ---- kernels ---- */

/* out = sum_b d_a * sum_sub (scale * isum - min * asum), the Q4_K dot per lane. The scale and
 * the min are an FMA each per sub-block and row, on the pipes that run vpdpbusd. Session 31
 * measured a whole block's sum in int32 instead (the scale by vpmulld per sub-block, the
 * mins' term by four vpdpwssd a block, as the AMX panels take it): 3-4% faster on Zen 4,
 * where vpmulld costs what an FMA does, but 12% slower for Q4_K on the GPU host's Xeon
 * (AVX-512 VNNI panels, CTORCH_AMX=0), where it is two uops on the vpdpbusd port while
 * FMAs have a second port; not kept. */
P_INLINE void p_q4_k(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                     float *s, size_t ss, int nw, const int NA)
{
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * P_BLOCK_BYTES;
        const float *scv = (const float *)(pq + P_QBYTES), *mnv = scv + 8 * 16;
        const blk_q8_k *ab[QUANT_PANEL_MAX_A];
        __m512 bacc[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) ab[j] = (const blk_q8_k *)(a + (size_t)j * as) + b, bacc[j] = _mm512_setzero_ps();
        for (int sb = 0; sb < 8; sb++) {
            __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) i0[j] = i1[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int t = 8 * sb; t < 8 * sb + 8; t += 2) {
                __m512i w0 = _mm512_loadu_si512(pq + (size_t)t * 64), w1 = _mm512_loadu_si512(pq + (size_t)(t + 1) * 64);
#pragma GCC unroll 4
                for (int j = 0; j < NA; j++) {
                    qz_dpbusd_x2(&i0[j], &i1[j], w0, p_bcast4(ab[j]->qs + 4 * t), w1, p_bcast4(ab[j]->qs + 4 * t + 4));
                }
            }
            __m512 sc = _mm512_loadu_ps(scv + 16 * sb), mn = _mm512_loadu_ps(mnv + 16 * sb);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                __m512 is = _mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j]));
                bacc[j] = _mm512_fmadd_ps(is, sc, bacc[j]);
                bacc[j] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(aux[(size_t)j * xs + 8 * b + sb]), bacc[j]);
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) tot[j] = _mm512_fmadd_ps(bacc[j], _mm512_set1_ps(ab[j]->d), tot[j]);
    }
    p_store(s, ss, tot, nw, NA);
}

/* out = sum_b d_a * sum_sub scale * (isum - 32 * asum), the Q6_K dot per lane; the -32 asum
 * starts each group's integer sum (p_k16_aux) */
P_INLINE void p_q6_k(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                     float *s, size_t ss, int nw, const int NA)
{
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * P_BLOCK_BYTES;
        const float *scv = (const float *)(pq + P_QBYTES);
        const blk_q8_k *ab[QUANT_PANEL_MAX_A];
        __m512 bacc[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) ab[j] = (const blk_q8_k *)(a + (size_t)j * as) + b, bacc[j] = _mm512_setzero_ps();
        for (int sb = 0; sb < 16; sb++) {
            __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
            int t = 4 * sb;
            __m512i w0 = _mm512_loadu_si512(pq + (size_t)t * 64), w1 = _mm512_loadu_si512(pq + (size_t)(t + 1) * 64);
            __m512i w2 = _mm512_loadu_si512(pq + (size_t)(t + 2) * 64), w3 = _mm512_loadu_si512(pq + (size_t)(t + 3) * 64);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const int8_t *q = ab[j]->qs + 4 * t;
                int32_t zp;
                memcpy(&zp, aux + (size_t)j * xs + 16 * b + sb, 4);
                i0[j] = _mm512_set1_epi32(zp), i1[j] = _mm512_setzero_si512();
                qz_dpbusd_x2(&i0[j], &i1[j], w0, p_bcast4(q), w1, p_bcast4(q + 4));
                qz_dpbusd_x2(&i0[j], &i1[j], w2, p_bcast4(q + 8), w3, p_bcast4(q + 12));
            }
            __m512 sc = _mm512_loadu_ps(scv + 16 * sb);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                bacc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j])), sc, bacc[j]);
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) tot[j] = _mm512_fmadd_ps(bacc[j], _mm512_set1_ps(ab[j]->d), tot[j]);
    }
    p_store(s, ss, tot, nw, NA);
}

/* ---- Q8_0 and Q4_0: quants stored unsigned (Q8_0: q + 128, as vpdpbusd wants unsigned
 * weights; Q4_0: as is, 0..15); the zero point times sum(a) comes off with the activation
 * sums ---- */
#define P8_BLOCK_BYTES (8 * 64 + 64) /* 8 quad vectors + the 16 rows' scales */

P_INLINE __m256i p_q8_flip(const blk_q8_0 *b) { return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)b->qs), _mm256_set1_epi8((char)0x80)); }

/* Q4_0: quants 0..15 as stored (the -8 offset comes off like Q8_0's 128) */
P_INLINE __m256i p_q4_0_bytes(const blk_q4_0 *b)
{
    __m128i q = _mm_loadu_si128((const __m128i *)b->qs), m4 = _mm_set1_epi8(0xF);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

/* Blocks b and b+1 (when pair) of 16 rows (Q8_0, Q4_0) as unsigned bytes, transposed: r[8h + t]
 * holds quants 4t..4t+3 of each row of block b+h. */
P_INLINE void p_gather_32(const void *vw, size_t ws, int nw, int64_t b, const size_t bsz, const bool q4, const bool pair,
                          __m512i r[16])
{
    for (int i = 0; i < 16; i++) {
        const char *blk = (const char *)vw + (size_t)i * ws + (size_t)b * bsz;
        if (i >= nw) {
            r[i] = _mm512_setzero_si512();
            continue;
        }
        __m256i lo = q4 ? p_q4_0_bytes((const blk_q4_0 *)blk) : p_q8_flip((const blk_q8_0 *)blk);
        __m256i hi = !pair ? _mm256_setzero_si256()
                     : q4  ? p_q4_0_bytes((const blk_q4_0 *)(blk + bsz))
                           : p_q8_flip((const blk_q8_0 *)(blk + bsz));
        r[i] = p_join(lo, hi);
    }
    p_transpose16(r);
}

/* The f16 scale of block b of each of the 16 rows (0 past nw): both formats start with it. */
P_INLINE void p_scales_32(const void *vw, size_t ws, int nw, int64_t b, const size_t bsz, uint16_t d[16])
{
    for (int i = 0; i < 16; i++) {
        d[i] = 0;
        if (i < nw) memcpy(&d[i], (const char *)vw + (size_t)i * ws + (size_t)b * bsz, sizeof d[i]);
    }
}

/* Blocks of 32 (Q8_0, Q4_0): two blocks of 16 rows per transpose. */
P_INLINE void p_pack_32(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const size_t bsz, const bool q4)
{
    uint8_t *panel = vpanel;
    int64_t nb = K / QK;
    for (int64_t b = 0; b < nb; b += 2) {
        bool pair = b + 1 < nb;
        if (b + 2 < nb) p_prefetch_rows(vw, ws, nw, (size_t)(b + 2) * bsz, 2 * bsz);
        __m512i r[16];
        p_gather_32(vw, ws, nw, b, bsz, q4, pair, r);
        for (int h = 0; h < (pair ? 2 : 1); h++) {
            uint8_t *dst = panel + (size_t)(b + h) * P8_BLOCK_BYTES;
            float *dv = (float *)(dst + 8 * 64);
            uint16_t d[16];
            p_scales_32(vw, ws, nw, b + h, bsz, d);
            for (int j = 0; j < 8; j++) _mm512_storeu_si512(dst + (size_t)j * 64, r[8 * h + j]);
            for (int i = 0; i < 16; i++) dv[i] = qf16(d[i]);
        }
    }
}

static void p_pack_q8_0(const void *vw, size_t ws, int nw, int64_t K, void *panel)
{
    p_pack_32(vw, ws, nw, K, panel, sizeof(blk_q8_0), false);
}

static void p_pack_q4_0(const void *vw, size_t ws, int nw, int64_t K, void *panel)
{
    p_pack_32(vw, ws, nw, K, panel, sizeof(blk_q4_0), true);
}

/* per block: off * sum(q), then the block scale (off: the weights' zero point) */
P_INLINE void p_aux_32(const void *va, int64_t K, float *aux, const float off)
{
    const blk_q8_0 *a = va;
    for (int64_t b = 0; b < K / QK; b++) {
        __m256i sad = _mm256_sad_epu8(p_q8_flip(a + b), _mm256_setzero_si256());
        __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
        int64_t sum = _mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1) - 128 * QK;
        aux[2 * b] = off * (float)sum;
        aux[2 * b + 1] = qf16(a[b].d);
    }
}

static void p_aux_q8_0(const void *va, int64_t K, float *aux) { p_aux_32(va, K, aux, 128.f); }
static void p_aux_q4_0(const void *va, int64_t K, float *aux) { p_aux_32(va, K, aux, 8.f); }

/* full: the stored quants span 0..255 (Q8_0), not 0..15 (Q4_0) */
P_INLINE void p_q8_0(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                     float *s, size_t ss, int nw, const int NA, const bool full)
{
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * P8_BLOCK_BYTES;
        __m512 dw = _mm512_loadu_ps((const float *)(pq + 8 * 64));
        __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) i0[j] = i1[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < 8; t += 2) {
            __m512i w0 = _mm512_loadu_si512(pq + (size_t)t * 64), w1 = _mm512_loadu_si512(pq + (size_t)(t + 1) * 64);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const int8_t *q = ((const blk_q8_0 *)(a + (size_t)j * as) + b)->qs + 4 * t;
                if (full) {
                    i0[j] = qz_dpbusd_u8(i0[j], w0, p_bcast4(q));
                    i1[j] = qz_dpbusd_u8(i1[j], w1, p_bcast4(q + 4));
                } else {
                    qz_dpbusd_x2(&i0[j], &i1[j], w0, p_bcast4(q), w1, p_bcast4(q + 4));
                }
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            const float *x = aux + (size_t)j * xs + 2 * b;
            __m512 is = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j])), _mm512_set1_ps(x[0]));
            tot[j] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(x[1])), tot[j]);
        }
    }
    p_store(s, ss, tot, nw, NA);
}

#if !QZ_VNNI
/* Q8_0 without VNNI: the packed bytes q + 128 would take two vpmaddubsw each
 * (qz_dpbusd_u8). Instead |q| goes in as the unsigned operand and q's sign moves onto
 * the broadcast activation bytes (vpsubb from zero under vpmovb2m's mask), so one
 * vpmaddubsw serves: |q| <= 128 and |a| <= 127, a pair sum at most 2 * 128 * 127 < 2^15.
 * The integer sum is q . a itself, so the activation sums' zero-point term (aux[2b]) is
 * not used; ~4.75 instructions per vector and activation row against 6.5. */
P_INLINE void p_q8_0_sign(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                          float *s, size_t ss, int nw, const int NA)
{
    const __m512i flip = _mm512_set1_epi8((char)0x80), zero = _mm512_setzero_si512();
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * P8_BLOCK_BYTES;
        __m512 dw = _mm512_loadu_ps((const float *)(pq + 8 * 64));
        __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) i0[j] = i1[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < 8; t += 2) {
            __m512i q0 = _mm512_xor_si512(_mm512_loadu_si512(pq + (size_t)t * 64), flip);
            __m512i q1 = _mm512_xor_si512(_mm512_loadu_si512(pq + (size_t)(t + 1) * 64), flip);
            __mmask64 n0 = _mm512_movepi8_mask(q0), n1 = _mm512_movepi8_mask(q1);
            __m512i u0 = _mm512_abs_epi8(q0), u1 = _mm512_abs_epi8(q1);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const int8_t *q = ((const blk_q8_0 *)(a + (size_t)j * as) + b)->qs + 4 * t;
                __m512i b0 = p_bcast4(q), b1 = p_bcast4(q + 4);
                i0[j] = qz_dpbusd(i0[j], u0, _mm512_mask_sub_epi8(b0, n0, zero, b0));
                i1[j] = qz_dpbusd(i1[j], u1, _mm512_mask_sub_epi8(b1, n1, zero, b1));
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            __m512 is = _mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j]));
            tot[j] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(aux[(size_t)j * xs + 2 * b + 1])), tot[j]);
        }
    }
    p_store(s, ss, tot, nw, NA);
}
P_ENTRY(p_gemm_q8_0_sign, p_q8_0_sign)
#endif

/* ---- Q4_K, repacked for keeps: nibbles stay nibbles, so the panel is the size of the
 * weights (2368 bytes per 16 rows x 256 vs 2304) and can replace them for decode. Vector v
 * of a block: lane r holds 4 bytes whose low nibbles are quants 8v..8v+3 of row r and high
 * nibbles 8v+4..8v+7; then per-row 6-bit scales and mins as bytes [sub-block][row], d and
 * dmin as f16 [row]. Decode does ~16 instructions per row and block against ~60 for the
 * row-by-row dot. ---- */
#define R4_QBYTES (32 * 64)
#define R4_BLOCK_BYTES (R4_QBYTES + 128 + 128 + 32 + 32)
/* Q5_K adds its fifth bits after the nibbles: vector sb, lane r, byte j holds the fifth bits
 * of nibble vector 4sb + j of row r (bit t: quant 8v + t); 2,880 bytes per 16 rows x 256
 * against the weights' 2,816. */
#define R5_HBYTES (8 * 64)
#define R5_BLOCK_BYTES (R4_BLOCK_BYTES + R5_HBYTES)
#define RK_BLOCK_BYTES(five) ((five) ? R5_BLOCK_BYTES : R4_BLOCK_BYTES)

/* Vector 8c + i's fifth bits (Q6_K: bit 4 or 5), from the chunk's transposed quants (lo: r[2i],
 * hi: r[2i+1]) into the layout above: lane L's byte holds lo's four bits, then hi's. */
P_INLINE void r_high_plane(__m512i lo, __m512i hi, int v, uint8_t *hb, const int bit)
{
    /* << (7 - bit) moves each byte's bit to its sign bit (what crosses into the next byte does
     * not reach its sign bit); one mask bit per byte, four per lane */
    uint64_t ml = _mm512_movepi8_mask(_mm512_slli_epi16(lo, 7 - bit)), mh = _mm512_movepi8_mask(_mm512_slli_epi16(hi, 7 - bit));
    for (int L = 0; L < 16; L++)
        hb[(v / 4) * 64 + 4 * L + v % 4] = (uint8_t)(((ml >> (4 * L)) & 0xF) | (((mh >> (4 * L)) & 0xF) << 4));
}

/* Chunk c's transposed quants (r[j]: quants 64c + 4j .. +3 per lane) as nibble vectors
 * 8c .. 8c + 7 at dst (pair j = 2i, 2i+1 into vector 8c + i), and their bit 4 / bit 5 into
 * the planes p4 / p5 where given (Q5_K: p4; Q6_K: both). */
P_INLINE void r_nibble_chunk(const __m512i r[16], int c, uint8_t *dst, uint8_t *p4, uint8_t *p5)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    for (int i = 0; i < 8; i++) {
        _mm512_storeu_si512(dst + (size_t)(8 * c + i) * 64,
                            _mm512_or_si512(_mm512_and_si512(r[2 * i], m4), _mm512_slli_epi16(_mm512_and_si512(r[2 * i + 1], m4), 4)));
        if (p4) r_high_plane(r[2 * i], r[2 * i + 1], 8 * c + i, p4, 4);
        if (p5) r_high_plane(r[2 * i], r[2 * i + 1], 8 * c + i, p5, 5);
    }
}

/* Q4_K (five false) and Q5_K blocks of 16 rows, repacked: nibble vectors, Q5_K's fifth
 * bits, then the rows' scales, mins, d and dmin. */
P_INLINE void r_pack_k4(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const bool five)
{
    const size_t bsz = five ? sizeof(blk_q5_k) : sizeof(blk_q4_k);
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * RK_BLOCK_BYTES(five);
        uint8_t *hb = dst + R4_QBYTES, *sc = hb + (five ? R5_HBYTES : 0), *mn = sc + 128;
        uint16_t d[16] = {0}, dm[16] = {0};
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * bsz, bsz);
        for (int c = 0; c < 4; c++) {
            __m512i r[16];
            p_kchunk_rows(vw, ws, nw, b, c, five ? P_Q5_K : P_Q4_K, r);
            r_nibble_chunk(r, c, dst, five ? hb : NULL, NULL);
        }
        for (int i = 0; i < 16; i++) {
            uint8_t sm[16] = {0};
            if (i < nw) {
                /* d, dmin and scales sit at the same offsets in both block types */
                const blk_q4_k *w = (const blk_q4_k *)((const char *)vw + (size_t)i * ws + (size_t)b * bsz);
                quant_k4_unpack(w->scales, sm);
                d[i] = w->d, dm[i] = w->dmin;
            }
            for (int s = 0; s < 8; s++) sc[16 * s + i] = sm[s], mn[16 * s + i] = sm[8 + s];
        }
        memcpy(mn + 128, d, sizeof d);
        memcpy(mn + 128 + 32, dm, sizeof dm);
    }
}

static void r_pack_q4_k(const void *vw, size_t ws, int nw, int64_t K, void *panel) { r_pack_k4(vw, ws, nw, K, panel, false); }
static void r_pack_q5_k(const void *vw, size_t ws, int nw, int64_t K, void *panel) { r_pack_k4(vw, ws, nw, K, panel, true); }

/* ---- Q6_K, repacked for keeps at the weights' own size (3,360 bytes per 16 rows x 256):
 * the Q4_K repack's nibble vectors of each quant's low four bits, two planes of its high
 * bits in Q5_K's fifth-bit layout (bit 4, then bit 5), the rows' 16 int8 scales as bytes
 * [sub-block][row] and d as f16 [row]. Read in place, a Q6_K row dot is compute-bound on
 * many cores (the GPU host's Xeon decoded Q6_K at ~83 GB/s on 16 threads, the repacked
 * formats at 110-120). The activation sums are the panels' (p_aux_q6_k: -32 bsum a group
 * starts each group's integer sum). ---- */
#define R6_PLANE (8 * 64)
#define R6_BLOCK_BYTES (R4_QBYTES + 2 * R6_PLANE + 256 + 32)

static void r_pack_q6_k(const void *vw, size_t ws, int nw, int64_t K, void *vpanel)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * R6_BLOCK_BYTES, *h4 = dst + R4_QBYTES, *h5 = h4 + R6_PLANE;
        int8_t *sc = (int8_t *)(h5 + R6_PLANE);
        uint16_t d[16] = {0};
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * sizeof(blk_q6_k), sizeof(blk_q6_k));
        for (int c = 0; c < 4; c++) {
            __m512i r[16];
            p_kchunk_rows(vw, ws, nw, b, c, P_Q6_K, r);
            r_nibble_chunk(r, c, dst, h4, h5);
        }
        for (int i = 0; i < 16; i++) {
            const blk_q6_k *w = i < nw ? (const blk_q6_k *)((const char *)vw + (size_t)i * ws) + b : NULL;
            for (int g = 0; g < 16; g++) sc[16 * g + i] = w ? w->scales[g] : 0;
            d[i] = w ? w->d : 0;
        }
        memcpy(sc + 256, d, sizeof d);
    }
}

/* out = sum_b d_a d_w sum_g scale_g (isum_g - 32 bsum_g), per lane */
P_INLINE void r_q6_k(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                     size_t ss, int nw, const int NA)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const bool l2 = core_prefetch_l2();
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * R6_BLOCK_BYTES, *h4 = pq + R4_QBYTES, *h5 = h4 + R6_PLANE;
        const int8_t *sc = (const int8_t *)(h5 + R6_PLANE);
        const blk_q8_k *ab[QUANT_PANEL_MAX_A];
        __m512 bacc[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) ab[j] = (const blk_q8_k *)(a + (size_t)j * as) + b, bacc[j] = _mm512_setzero_ps();
        for (int sp = 0; sp < 8; sp++) { /* two groups of 16: four nibble vectors, one byte of each plane */
            /* two blocks ahead, as the Q4_K repack: a block's 53 lines over its 8 pairs */
            for (int l = 0; l < 7; l++) QX_PREFETCH(pq + 2 * R6_BLOCK_BYTES + (7 * sp + l) * 64, l2);
            __m512i hv4 = _mm512_loadu_si512(h4 + (size_t)sp * 64), hv5 = _mm512_loadu_si512(h5 + (size_t)sp * 64);
            for (int g = 2 * sp; g < 2 * sp + 2; g++) {
                __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
                for (int j = 0; j < NA; j++) {
                    int32_t zp;
                    memcpy(&zp, aux + (size_t)j * xs + 16 * b + g, 4);
                    i0[j] = _mm512_set1_epi32(zp), i1[j] = _mm512_setzero_si512();
                }
#pragma GCC unroll 2
                for (int v = 2 * g; v < 2 * g + 2; v++) {
                    __m512i q = _mm512_loadu_si512(pq + (size_t)v * 64);
                    __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
                    p_add_high(hv4, v - 4 * sp, 16, &lo, &hi);
                    p_add_high(hv5, v - 4 * sp, 32, &lo, &hi);
#pragma GCC unroll 4
                    for (int j = 0; j < NA; j++)
                        qz_dpbusd_x2(&i0[j], &i1[j], lo, p_bcast4(ab[j]->qs + 8 * v), hi, p_bcast4(ab[j]->qs + 8 * v + 4));
                }
                __m512 scv = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(sc + 16 * g))));
#pragma GCC unroll 4
                for (int j = 0; j < NA; j++)
                    bacc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j])), scv, bacc[j]);
            }
        }
        __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 256)));
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) tot[j] = _mm512_fmadd_ps(_mm512_mul_ps(bacc[j], dv), _mm512_set1_ps(ab[j]->d), tot[j]);
    }
    p_store(s, ss, tot, nw, NA);
}

P_INLINE __m512 p_u8x16_ps(const uint8_t *p) { return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p))); }

P_INLINE void r_k4(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                   size_t ss, int nw, const int NA, const bool five)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const bool l2 = core_prefetch_l2();
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * RK_BLOCK_BYTES(five), *hb = pq + R4_QBYTES;
        const uint8_t *sc = hb + (five ? R5_HBYTES : 0), *mn = sc + 128;
        const blk_q8_k *ab[QUANT_PANEL_MAX_A];
        __m512 bacc[QUANT_PANEL_MAX_A], macc[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++)
            ab[j] = (const blk_q8_k *)(a + (size_t)j * as) + b, bacc[j] = macc[j] = _mm512_setzero_ps();
        for (int sb = 0; sb < 8; sb++) {
            __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
            /* decode streams the panels from memory faster than the hardware prefetchers
             * run ahead: fetch two blocks ahead, a block's 37 (Q5_K: 45) lines over its 8 sub-blocks */
            for (int l = 0; l < (five ? 6 : 5); l++)
                QX_PREFETCH(pq + 2 * RK_BLOCK_BYTES(five) + ((five ? 6 : 5) * sb + l) * 64, l2);
            __m512i hv = five ? _mm512_loadu_si512(hb + (size_t)sb * 64) : _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) i0[j] = i1[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
            for (int v = 4 * sb; v < 4 * sb + 4; v++) {
                __m512i q = _mm512_loadu_si512(pq + (size_t)v * 64);
                __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
                if (five) p_add_fifth(hv, v - 4 * sb, &lo, &hi);
#pragma GCC unroll 4
                for (int j = 0; j < NA; j++) {
                    qz_dpbusd_x2(&i0[j], &i1[j], lo, p_bcast4(ab[j]->qs + 8 * v), hi, p_bcast4(ab[j]->qs + 8 * v + 4));
                }
            }
            __m512 scv = p_u8x16_ps(sc + 16 * sb), mnv = p_u8x16_ps(mn + 16 * sb);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                bacc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j])), scv, bacc[j]);
                macc[j] = _mm512_fmadd_ps(mnv, _mm512_set1_ps(aux[(size_t)j * xs + 8 * b + sb]), macc[j]);
            }
        }
        __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(mn + 128)));
        __m512 dmv = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(mn + 160)));
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            __m512 blk = _mm512_fmsub_ps(dv, bacc[j], _mm512_mul_ps(dmv, macc[j]));
            tot[j] = _mm512_fmadd_ps(blk, _mm512_set1_ps(ab[j]->d), tot[j]);
        }
    }
    p_store(s, ss, tot, nw, NA);
}

P_INLINE void r_q4_k(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                     float *s, size_t ss, int nw, const int NA)
{
    r_k4(K, panel, a, as, aux, xs, s, ss, nw, NA, false);
}

P_INLINE void r_q5_k(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                     float *s, size_t ss, int nw, const int NA)
{
    r_k4(K, panel, a, as, aux, xs, s, ss, nw, NA, true);
}

/* ---- Q8_0 and Q4_0 kept for decode, at the weights' own size (a Q4_0 panel of bytes is
 * twice that, and decode only streams): per block of 32 and 16 rows, Q8_0 keeps its 8
 * quad vectors of q + 128, Q4_0 4 vectors whose low nibbles hold quants 8v..8v+3 of each
 * row and high nibbles 8v+4..8v+7 (as the Q4_K repack); then the 16 rows' f16 scales.
 * The activation sums are the panels' (p_aux_q8_0 / p_aux_q4_0). Q5_0's, with Q4_1's and
 * Q5_1's, is in quant_panel_legacy_avx512.c. ---- */
#define R8_QBYTES(q4) ((q4) ? 4 * 64 : 8 * 64)
#define R8_BLOCK_BYTES(q4) (R8_QBYTES(q4) + 32)
#ifndef R8_PF
#define R8_PF 2048 /* bytes fetched ahead: about the Q4_K repack's distance */
#endif

P_INLINE void r_pack_32(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const size_t bsz, const bool q4)
{
    uint8_t *panel = vpanel;
    int64_t nb = K / QK;
    for (int64_t b = 0; b < nb; b += 2) {
        bool pair = b + 1 < nb;
        if (b + 2 < nb) p_prefetch_rows(vw, ws, nw, (size_t)(b + 2) * bsz, 2 * bsz);
        __m512i r[16];
        p_gather_32(vw, ws, nw, b, bsz, q4, pair, r);
        for (int h = 0; h < (pair ? 2 : 1); h++) {
            uint8_t *dst = panel + (size_t)(b + h) * R8_BLOCK_BYTES(q4);
            uint16_t d[16];
            p_scales_32(vw, ws, nw, b + h, bsz, d);
            for (int v = 0; v < (q4 ? 4 : 8); v++) {
                __m512i x = q4 ? _mm512_or_si512(r[8 * h + 2 * v], _mm512_slli_epi16(r[8 * h + 2 * v + 1], 4)) : r[8 * h + v];
                _mm512_storeu_si512(dst + (size_t)v * 64, x);
            }
            memcpy(dst + R8_QBYTES(q4), d, sizeof d);
        }
    }
}

static void r_pack_q8_0(const void *vw, size_t ws, int nw, int64_t K, void *panel)
{
    r_pack_32(vw, ws, nw, K, panel, sizeof(blk_q8_0), false);
}

static void r_pack_q4_0(const void *vw, size_t ws, int nw, int64_t K, void *panel)
{
    r_pack_32(vw, ws, nw, K, panel, sizeof(blk_q4_0), true);
}

P_INLINE void r_32(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                   size_t ss, int nw, const int NA, const bool q4)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const bool l2 = core_prefetch_l2();
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * R8_BLOCK_BYTES(q4);
        for (int l = 0; l < R8_BLOCK_BYTES(q4); l += 64) QX_PREFETCH(pq + R8_PF + l, l2);
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(pq + R8_QBYTES(q4))));
        __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) i0[j] = i1[j] = _mm512_setzero_si512();
        if (q4) {
#pragma GCC unroll 4
            for (int v = 0; v < 4; v++) {
                __m512i x = _mm512_loadu_si512(pq + (size_t)v * 64);
                __m512i lo = _mm512_and_si512(x, m4), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
#pragma GCC unroll 4
                for (int j = 0; j < NA; j++) {
                    const int8_t *q = ((const blk_q8_0 *)(a + (size_t)j * as) + b)->qs + 8 * v;
                    qz_dpbusd_x2(&i0[j], &i1[j], lo, p_bcast4(q), hi, p_bcast4(q + 4));
                }
            }
        } else {
#pragma GCC unroll 4
            for (int t = 0; t < 8; t += 2) {
                __m512i w0 = _mm512_loadu_si512(pq + (size_t)t * 64), w1 = _mm512_loadu_si512(pq + (size_t)(t + 1) * 64);
#pragma GCC unroll 4
                for (int j = 0; j < NA; j++) {
                    const int8_t *q = ((const blk_q8_0 *)(a + (size_t)j * as) + b)->qs + 4 * t;
                    i0[j] = qz_dpbusd_u8(i0[j], w0, p_bcast4(q));
                    i1[j] = qz_dpbusd_u8(i1[j], w1, p_bcast4(q + 4));
                }
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            const float *x = aux + (size_t)j * xs + 2 * b;
            __m512 is = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j])), _mm512_set1_ps(x[0]));
            tot[j] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(x[1])), tot[j]);
        }
    }
    p_store(s, ss, tot, nw, NA);
}

P_INLINE void r_q8_0(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                     size_t ss, int nw, const int NA)
{
    r_32(K, panel, a, as, aux, xs, s, ss, nw, NA, false);
}

P_INLINE void r_q4_0(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                     size_t ss, int nw, const int NA)
{
    r_32(K, panel, a, as, aux, xs, s, ss, nw, NA, true);
}

P_ENTRY(r_gemm_q8_0, r_q8_0)
P_ENTRY(r_gemm_q4_0, r_q4_0)
P_ENTRY(p_gemm_q4_k, p_q4_k)
P_ENTRY(p_gemm_q6_k, p_q6_k)
static_assert(P_BLOCK_BYTES == P_K16_BLOCK_BYTES, "Q3_K panels reuse the Q6_K layout");
void QZ_SYM(quant_panel_gemm_k16)(int64_t K, const void *panel, const void *a, size_t as, const float *aux, size_t xs, int na,
                          float *s, size_t ss, int nw)
{
    p_gemm_q6_k(K, panel, a, as, aux, xs, na, s, ss, nw);
}
P_INLINE void p_q8_0_full(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                          float *s, size_t ss, int nw, const int NA)
{
    p_q8_0(K, panel, a, as, aux, xs, s, ss, nw, NA, true);
}

P_INLINE void p_q4_0(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                     float *s, size_t ss, int nw, const int NA)
{
    p_q8_0(K, panel, a, as, aux, xs, s, ss, nw, NA, false);
}

P_ENTRY(p_gemm_q8_0, p_q8_0_full)
P_ENTRY(p_gemm_q4_0, p_q4_0)
P_ENTRY(r_gemm_q4_k, r_q4_k)
P_ENTRY(r_gemm_q5_k, r_q5_k)
P_ENTRY(r_gemm_q6_k, r_q6_k)

QUANT_TARGET_END

static const quant_panel_kernels g_panel_q4_k = {P_BLOCK_BYTES, 8, p_pack_q4_k, p_aux_q4_k, p_gemm_q4_k, 0};
static const quant_panel_kernels g_panel_q6_k = {P_BLOCK_BYTES, 16, p_pack_q6_k, p_aux_q6_k, p_gemm_q6_k, 0};
static const quant_panel_kernels g_panel_q5_k = {P_BLOCK_BYTES, 8, p_pack_q5_k, p_aux_q4_k, p_gemm_q4_k, 0};
static const quant_panel_kernels g_panel_q8_0 = {P8_BLOCK_BYTES, 2, p_pack_q8_0, p_aux_q8_0, p_gemm_q8_0, 0};
static const quant_panel_kernels g_panel_q4_0 = {P8_BLOCK_BYTES, 2, p_pack_q4_0, p_aux_q4_0, p_gemm_q4_0, 0};
#if !QZ_VNNI
static const quant_panel_kernels g_panel_q8_0_sign = {P8_BLOCK_BYTES, 2, p_pack_q8_0, p_aux_q8_0, p_gemm_q8_0_sign, 0};
#endif

static const quant_panel_kernels g_repack_q4_k = {R4_BLOCK_BYTES, 8, r_pack_q4_k, p_aux_q4_k, r_gemm_q4_k, 0};
static const quant_panel_kernels g_repack_q5_k = {R5_BLOCK_BYTES, 8, r_pack_q5_k, p_aux_q4_k, r_gemm_q5_k, 0};
static const quant_panel_kernels g_repack_q6_k = {R6_BLOCK_BYTES, 16, r_pack_q6_k, p_aux_q6_k, r_gemm_q6_k, 0};

static const quant_panel_kernels g_repack_q8_0 = {R8_BLOCK_BYTES(false), 2, r_pack_q8_0, p_aux_q8_0, r_gemm_q8_0, 0};
static const quant_panel_kernels g_repack_q4_0 = {R8_BLOCK_BYTES(true), 2, r_pack_q4_0, p_aux_q4_0, r_gemm_q4_0, 0};

void QZ_SYM(quant_repack_fill_avx512)(quant_panel_table tab)
{
    tab[CT_Q4_K] = &g_repack_q4_k;
    tab[CT_Q5_K] = &g_repack_q5_k;
    tab[CT_Q6_K] = &g_repack_q6_k;
    tab[CT_Q8_0] = &g_repack_q8_0;
    tab[CT_Q4_0] = &g_repack_q4_0;
    QZ_SYM(quant_repack_legacy_fill_avx512)(tab);
}

void QZ_SYM(quant_panel_fill_avx512)(quant_panel_table tab)
{
    tab[CT_Q4_K] = &g_panel_q4_k;
    tab[CT_Q6_K] = &g_panel_q6_k;
    tab[CT_Q5_K] = &g_panel_q5_k;
#if QZ_VNNI
    tab[CT_Q8_0] = &g_panel_q8_0;
#else
    /* the q + 128 bytes took two vpmaddubsw each (quant_avx512_isa.h): on the GPU
     * machine's Xeon prompts ran at 0.79-0.68x llama.cpp at 8-16 threads against the AVX2
     * panel's 0.97-0.85x; the sign-moved kernel takes one */
    (void)g_panel_q8_0;
    tab[CT_Q8_0] = &g_panel_q8_0_sign;
#endif
    tab[CT_Q4_0] = &g_panel_q4_0;
    QZ_SYM(quant_panel_legacy_fill_avx512)(tab);
    QZ_SYM(quant_panel_k23_fill_avx512)(tab);
}
#else
void QZ_SYM(quant_panel_fill_avx512)(quant_panel_table tab) { (void)tab; }
void QZ_SYM(quant_repack_fill_avx512)(quant_panel_table tab) { (void)tab; }
#endif
