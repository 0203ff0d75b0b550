/* Packed-panel GEMM for prefill on AVX2 (no VNNI), for every block format. The quants have
 * the AVX-512 panels' layout (quant_panel_avx512.c, quant_panel_legacy_avx512.c,
 * quant_panel_k23_avx512.c): 64-byte vectors with weight row i in 32-bit lane i, so vector t
 * of a block holds quants 4t..4t+3 of the 16 rows; the K formats' side data is this file's
 * own (A_K4_*, A_K16_*). A 256-bit register takes half a vector, 8 rows: the kernels load
 * both halves and multiply each by the same activation broadcast, so one broadcast serves 16
 * rows (a pass per half paid one per product, and the broadcasts bounded the loop). Up to
 * four activation rows a pass where the accumulators fit the 16 ymm registers, two where
 * they do not (A_ENTRY's PA).
 *
 * Without vpdpbusd, a weight vector times four broadcast activation quants is vpmaddubsw
 * (u8 x s8 pairs summed to int16, saturating) then vpmaddwd (pairs of int16 to int32) by
 * ones, or for the K formats by the rows' group scales as int16 pairs, which leaves the f32
 * work to once a block. vpmaddubsw saturation never triggers: activations lie in
 * [-127, 127] and unsigned weights are at most 63, so a pair is below 2 * 63 * 127 < 2^15;
 * the int16 sums then run over as many vectors as stay below 2^15 before widening (A_RUN_*),
 * which is what makes these kernels cheaper than one vpmaddwd per product. Q8_0 keeps signed
 * weights and multiplies |w| by sign(a, w): |w| <= 128, a pair at most 2 * 128 * 127 < 2^15.
 * The int32 sums stay far from overflow: a Q6_K block's largest is 32 vpmaddwd of
 * 2 * 32004 * 128 plus 32 times its zero-point term, below 2^29.
 *
 * Integer sums per block are exact; the scales are applied in f32 in another order than the
 * row dots, so results agree with quant_get_vec_dot to f32 rounding. */
#include <stddef.h>

#include "quant/quant_impl.h"
#include "quant/quant_target.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "quant/quant_x86_bytes.h"

static_assert(QUANT_PANEL_ROWS == 16, "two 8-row halves of a 64-byte panel vector");
static_assert(QUANT_PANEL_MAX_A == 4, "the kernels' switches cover 1..4 activation rows");

/* Panel layouts: quant vectors, then per-row f32 (or int16-pair) side data. */
#define A_LEG_QBYTES (8 * 64)                   /* blocks of 32: 8 quad vectors */
#define A_LEG_BYTES_D (A_LEG_QBYTES + 64)       /* + the 16 rows' d */
#define A_LEG_BYTES_DM (A_LEG_QBYTES + 2 * 64)  /* + d, then m */
#define A_Q8_KEPT_BYTES (A_LEG_QBYTES + 32)     /* Q8_0 kept for decode: + the 16 rows' f16 d, the weights' size */
#define A_PF 2048                               /* bytes a kept-panel kernel fetches ahead */
#define A_K_QBYTES (64 * 64)                    /* blocks of 256: 64 quad vectors */
/* Q4_K/Q5_K: + 8 vectors of the sub-blocks' scales as int16 pairs (s, s), 4 of min pairs
 * (m_2p, m_2p+1), then f32 d and dmin; Q6_K/Q3_K: + 16 vectors of scale pairs (s_g, s_g), 8 of
 * (s_2p, s_2p+1), then f32 d. The scales multiply the int16 sums in vpmaddwd, where ones did,
 * so the f32 work is per block, not per group. */
#define A_K4_SC A_K_QBYTES
#define A_K4_MN (A_K4_SC + 8 * 64)
#define A_K4_D (A_K4_MN + 4 * 64)
#define A_K4_BYTES (A_K4_D + 2 * 64)
#define A_K16_SC A_K_QBYTES
#define A_K16_SP (A_K16_SC + 16 * 64)
#define A_K16_D (A_K16_SP + 8 * 64)
#define A_K16_BYTES (A_K16_D + 64)
#define A_Q2K_BYTES (A_K_QBYTES + 8 * 64 + 2 * 64) /* + 8 vectors of int16 min pairs, d, dmin */

/* How many vectors vpmaddubsw sums may add up in int16 (pair bound x run < 2^15). */
#define A_RUN_4BIT 8 /* 2 * 15 * 127 = 3810 */
#define A_RUN_5BIT 4 /* 2 * 31 * 127 = 7874 */
#define A_RUN_6BIT 2 /* 2 * 63 * 127 = 16002 */
#define A_RUN_Q2K 2  /* 2 * 45 * 127 = 11430 (scale times quant) */
#define A_RUN_Q3K 4  /* a whole group of 16 (2 * 7 * 127 = 1778 a pair) */

typedef enum a_fmt { A_Q8_0, A_Q4_0, A_Q4_1, A_Q5_0, A_Q5_1, A_Q2_K, A_Q3_K, A_Q4_K, A_Q5_K, A_Q6_K } a_fmt;

QUANT_TARGET_BEGIN("avx2,fma,f16c")

#define A_INLINE static inline __attribute__((always_inline))

/* r[k] holds 8 dwords of row k; afterwards r[j] holds dword j of every row. */
A_INLINE void a_transpose8(__m256i r[8])
{
    __m256i t[8], u[8];
    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    /* u[4k + c]: dword c (low lane) and c + 4 (high lane) of rows 4k .. 4k+3 */
    for (int k = 0; k < 2; k++) {
        u[4 * k + 0] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    for (int c = 0; c < 4; c++) {
        r[c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x20);
        r[4 + c] = _mm256_permute2x128_si256(u[c], u[4 + c], 0x31);
    }
}

A_INLINE __m256i a_load(const void *p) { return _mm256_loadu_si256((const __m256i *)p); }

/* 16 packed nibbles -> 32 bytes: low nibbles first, then high (the legacy element order). */
A_INLINE __m256i a_nibbles(const uint8_t *qs)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0xF);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

/* Byte j: 0x10 where bit j of the 32-bit qh is set (the fifth bit of element j). */
A_INLINE __m256i a_fifth(const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    const __m256i sel = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), sel);
    return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), _mm256_set1_epi8(0x10));
}

/* (x >> sh) & mask per byte */
A_INLINE __m256i a_bits(__m256i x, int sh, int mask) { return _mm256_and_si256(_mm256_srli_epi16(x, sh), _mm256_set1_epi8((char)mask)); }

/* Quants 32c .. 32c+31 of one block, one byte each, as the panel stores them. */
A_INLINE __m256i a_chunk(const char *blk, int c, const a_fmt f)
{
    switch (f) {
    case A_Q8_0: return a_load(((const blk_q8_0 *)blk)->qs);
    case A_Q4_0: return a_nibbles(((const blk_q4_0 *)blk)->qs);
    case A_Q4_1: return a_nibbles(((const blk_q4_1 *)blk)->qs);
    case A_Q5_0: return _mm256_or_si256(a_nibbles(((const blk_q5_0 *)blk)->qs), a_fifth(((const blk_q5_0 *)blk)->qh));
    case A_Q5_1: return _mm256_or_si256(a_nibbles(((const blk_q5_1 *)blk)->qs), a_fifth(((const blk_q5_1 *)blk)->qh));
    case A_Q4_K: return a_bits(a_load(((const blk_q4_k *)blk)->qs + 32 * (c / 2)), 4 * (c % 2), 0xF);
    case A_Q5_K: {
        const blk_q5_k *b = (const blk_q5_k *)blk;
        __m256i lo = a_bits(a_load(b->qs + 32 * (c / 2)), 4 * (c % 2), 0xF);
        return _mm256_or_si256(lo, _mm256_slli_epi16(a_bits(a_load(b->qh), c, 1), 4));
    }
    case A_Q6_K: { /* element 128h + 32k + l: ql[64h + 32(k%2) + l] nibble k/2, qh[32h + l] bits 2k */
        const blk_q6_k *b = (const blk_q6_k *)blk;
        int h = c / 4, k = c % 4;
        __m256i lo = a_bits(a_load(b->ql + 64 * h + 32 * (k % 2)), 4 * (k / 2), 0xF);
        return _mm256_or_si256(lo, _mm256_slli_epi16(a_bits(a_load(b->qh + 32 * h), 2 * k, 3), 4));
    }
    case A_Q3_K: { /* two low bits from qs, the third from bit c of hmask */
        const blk_q3_k *b = (const blk_q3_k *)blk;
        __m256i lo = a_bits(a_load(b->qs + 32 * (c / 4)), 2 * (c % 4), 3);
        return _mm256_or_si256(lo, _mm256_slli_epi16(a_bits(a_load(b->hmask), c, 1), 2));
    }
    default: { /* Q2_K: quant times its group's 4-bit scale (groups 2c, 2c+1 = the two 128-bit lanes) */
        const blk_q2_k *b = (const blk_q2_k *)blk;
        __m256i q = a_bits(a_load(b->qs + 32 * (c / 4)), 2 * (c % 4), 3);
        /* per lane a table 0, s, 2s, 3s (3s <= 45: no carries between the bytes) */
        uint32_t s0 = (b->scales[2 * c] & 0xFu) * 0x03020100u, s1 = (b->scales[2 * c + 1] & 0xFu) * 0x03020100u;
        __m256i tbl = _mm256_setr_epi32((int)s0, 0, 0, 0, (int)s1, 0, 0, 0);
        return _mm256_shuffle_epi8(tbl, q);
    }
    }
}

/* The 16 rows' quant vectors of block b (bsz bytes per block, nchunk chunks of 32 quants),
 * transposed into dst. A half with no rows (nw <= 8) is left unwritten: the gemm skips it. */
A_INLINE void a_pack_quants(const void *vw, size_t ws, int nw, int64_t b, size_t bsz, int nchunk, uint8_t *dst,
                            const a_fmt f)
{
    for (int h = 0; h < 2 && 8 * h < nw; h++)
        for (int c = 0; c < nchunk; c++) {
            __m256i r[8];
            for (int k = 0; k < 8; k++) {
                int i = 8 * h + k;
                r[k] = i < nw ? a_chunk((const char *)vw + (size_t)i * ws + (size_t)b * bsz, c, f) : _mm256_setzero_si256();
            }
            a_transpose8(r);
            for (int j = 0; j < 8; j++) _mm256_storeu_si256((__m256i *)(dst + (size_t)(8 * c + j) * 64 + 32 * h), r[j]);
        }
}

/* The 16 rows are 16 far-apart streams: fetch the next block of each row while this one
 * is unpacked. */
A_INLINE void a_prefetch_rows(const void *vw, size_t ws, int nw, size_t off, size_t bytes)
{
    for (int i = 0; i < nw; i++)
        for (size_t o = 0; o < bytes; o += 64) _mm_prefetch((const char *)vw + (size_t)i * ws + off + o, _MM_HINT_T0);
}

/* ---- packers (side data of rows past nw is zero) ---- */

/* Blocks of 32: quants, then f32 d (and m) of each row; both lead every legacy block. kept
 * (Q8_0 for decode): the rows' f16 d as they are. */
A_INLINE void a_pack_leg(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const a_fmt f, const bool kept)
{
    const size_t bsz = f == A_Q8_0 ? sizeof(blk_q8_0) : f == A_Q4_0 ? sizeof(blk_q4_0) : f == A_Q4_1 ? sizeof(blk_q4_1)
                       : f == A_Q5_0 ? sizeof(blk_q5_0) : sizeof(blk_q5_1);
    const bool affine = f == A_Q4_1 || f == A_Q5_1;
    const size_t pbb = kept ? A_Q8_KEPT_BYTES : affine ? A_LEG_BYTES_DM : A_LEG_BYTES_D;
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QK; b++) {
        uint8_t *dst = panel + (size_t)b * pbb;
        float *dv = (float *)(dst + A_LEG_QBYTES);
        if (b + 2 < K / QK) a_prefetch_rows(vw, ws, nw, (size_t)(b + 2) * bsz, bsz);
        a_pack_quants(vw, ws, nw, b, bsz, 1, dst, f);
        for (int i = 0; i < 16; i++) {
            uint16_t dm[2] = {0, 0};
            if (i < nw) memcpy(dm, (const char *)vw + (size_t)i * ws + (size_t)b * bsz, affine ? 4 : 2);
            if (kept) {
                memcpy(dst + A_LEG_QBYTES + 2 * i, dm, 2);
                continue;
            }
            dv[i] = qf16(dm[0]);
            if (affine) dv[16 + i] = qf16(dm[1]);
        }
    }
}

static_assert(offsetof(blk_q4_1, m) == 2 && offsetof(blk_q5_1, m) == 2 && offsetof(blk_q5_0, d) == 0 &&
                  offsetof(blk_q4_0, d) == 0 && offsetof(blk_q8_0, d) == 0,
              "d (and m) lead every legacy block");

/* The K formats' side data from 16 bytes of each of the 16 rows (rows past nw zero): vectors
 * [g][row] of int16 pairs (s_g, s_g) for g < NSAME at same, and (s_f+2q, s_f+2q+1) for q < NPAIR
 * at pairs, f = FIRST. */
A_INLINE void a_side_pairs(__m128i sc[16], uint8_t *same, const int NSAME, uint8_t *pairs, const int FIRST, const int NPAIR)
{
    qx_transpose16_bytes(sc);
    const __m256i lo16 = _mm256_set1_epi32(0xFFFF);
    for (int h = 0; h < 2; h++) {
        __m256i s[16];
        for (int g = 0; g < 16; g++) s[g] = _mm256_cvtepi8_epi32(h ? _mm_srli_si128(sc[g], 8) : sc[g]);
        for (int g = 0; g < NSAME; g++)
            _mm256_storeu_si256((__m256i *)(same + 64 * g + 32 * h), _mm256_or_si256(_mm256_and_si256(s[g], lo16), _mm256_slli_epi32(s[g], 16)));
        for (int q = 0; q < NPAIR; q++)
            _mm256_storeu_si256((__m256i *)(pairs + 64 * q + 32 * h),
                                _mm256_or_si256(_mm256_and_si256(s[FIRST + 2 * q], lo16), _mm256_slli_epi32(s[FIRST + 2 * q + 1], 16)));
    }
}

/* Q4_K/Q5_K: quants, then the A_K4_* side data [vector][row]. */
A_INLINE void a_pack_k4(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const a_fmt f)
{
    const size_t bsz = f == A_Q5_K ? sizeof(blk_q5_k) : sizeof(blk_q4_k);
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * A_K4_BYTES;
        float *dv = (float *)(dst + A_K4_D);
        if (b + 1 < K / QKK) a_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * bsz, bsz);
        a_pack_quants(vw, ws, nw, b, bsz, 8, dst, f);
        __m128i sm[16]; /* 6-bit scales and mins: the int8 conversion keeps them */
        for (int i = 0; i < 16; i++) {
            uint8_t u[16] = {0};
            float d = 0.f, dm = 0.f;
            if (i < nw) { /* d, dmin and scales sit at the same offsets in both block types */
                const blk_q4_k *w = (const blk_q4_k *)((const char *)vw + (size_t)i * ws + (size_t)b * bsz);
                quant_k4_unpack(w->scales, u);
                d = qf16(w->d), dm = qf16(w->dmin);
            }
            sm[i] = _mm_loadu_si128((const __m128i *)u);
            dv[i] = d, dv[16 + i] = dm;
        }
        a_side_pairs(sm, dst + A_K4_SC, 8, dst + A_K4_MN, 8, 4);
    }
}

static_assert(offsetof(blk_q4_k, scales) == offsetof(blk_q5_k, scales) && offsetof(blk_q4_k, dmin) == offsetof(blk_q5_k, dmin),
              "Q4_K and Q5_K block heads match");

/* Q6_K/Q3_K: unsigned quants, then the A_K16_* side data [vector][row]. */
A_INLINE void a_pack_k16(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const a_fmt f)
{
    const size_t bsz = f == A_Q6_K ? sizeof(blk_q6_k) : sizeof(blk_q3_k);
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * A_K16_BYTES;
        float *dv = (float *)(dst + A_K16_D);
        if (b + 1 < K / QKK) a_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * bsz, bsz);
        a_pack_quants(vw, ws, nw, b, bsz, 8, dst, f);
        __m128i sc[16];
        for (int i = 0; i < 16; i++) {
            const char *blk = i < nw ? (const char *)vw + (size_t)i * ws + (size_t)b * bsz : NULL;
            int8_t s3[16];
            sc[i] = _mm_setzero_si128(), dv[i] = 0.f;
            if (i < nw && f == A_Q6_K)
                sc[i] = _mm_loadu_si128((const __m128i *)((const blk_q6_k *)blk)->scales), dv[i] = qf16(((const blk_q6_k *)blk)->d);
            if (i < nw && f == A_Q3_K)
                quant_k3_unpack(((const blk_q3_k *)blk)->scales, s3), sc[i] = _mm_loadu_si128((const __m128i *)s3),
                dv[i] = qf16(((const blk_q3_k *)blk)->d);
        }
        a_side_pairs(sc, dst + A_K16_SC, 16, dst + A_K16_SP, 0, 8);
    }
}

/* Q2_K: scale times quant, then the 4-bit mins as int16 pairs [pair][row], f32 d, dmin. */
static void a_pack_q2_k(const void *vw, size_t ws, int nw, int64_t K, void *vpanel)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * A_Q2K_BYTES;
        uint32_t *mv = (uint32_t *)(dst + A_K_QBYTES);
        float *dv = (float *)(mv + 8 * 16), *dmv = dv + 16;
        if (b + 1 < K / QKK) a_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * sizeof(blk_q2_k), sizeof(blk_q2_k));
        a_pack_quants(vw, ws, nw, b, sizeof(blk_q2_k), 8, dst, A_Q2_K);
        for (int i = 0; i < 16; i++) {
            const blk_q2_k *w = i < nw ? (const blk_q2_k *)((const char *)vw + (size_t)i * ws) + b : NULL;
            for (int k = 0; k < 8; k++)
                mv[16 * k + i] = w ? (uint32_t)(w->scales[2 * k] >> 4) | (uint32_t)(w->scales[2 * k + 1] >> 4) << 16 : 0;
            dv[i] = w ? qf16(w->d) : 0.f;
            dmv[i] = w ? qf16(w->dmin) : 0.f;
        }
    }
}

static void a_pack_q8_0(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_leg(w, ws, nw, K, p, A_Q8_0, false); }
static void ak_pack_q8_0(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_leg(w, ws, nw, K, p, A_Q8_0, true); }
static void a_pack_q4_0(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_leg(w, ws, nw, K, p, A_Q4_0, false); }
static void a_pack_q4_1(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_leg(w, ws, nw, K, p, A_Q4_1, false); }
static void a_pack_q5_0(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_leg(w, ws, nw, K, p, A_Q5_0, false); }
static void a_pack_q5_1(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_leg(w, ws, nw, K, p, A_Q5_1, false); }
static void a_pack_q4_k(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_k4(w, ws, nw, K, p, A_Q4_K); }
static void a_pack_q5_k(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_k4(w, ws, nw, K, p, A_Q5_K); }
static void a_pack_q6_k(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_k16(w, ws, nw, K, p, A_Q6_K); }
static void a_pack_q3_k(const void *w, size_t ws, int nw, int64_t K, void *p) { a_pack_k16(w, ws, nw, K, p, A_Q3_K); }

/* ---- gemm: both 8-row halves of the panel in one pass, sharing each activation broadcast ----
 * Accumulators are indexed [2j + h] (activation row j, half h); H is 1 when the panel's
 * rows all sit in the first half. One broadcast feeds two vpmaddubsw: a pass over one half
 * at a time paid a broadcast per product, and the broadcasts, not the multiplies, bounded
 * the loop. NA activation rows a pass (A_ENTRY's PA) keep the accumulators in registers. */

A_INLINE __m256i a_bcast4(const int8_t *q)
{
    int32_t v;
    memcpy(&v, q, 4);
    return _mm256_set1_epi32(v);
}

A_INLINE void a_store(float *s, size_t ss, const __m256 *tot, int nw, const int NA, const int H)
{
#pragma GCC unroll 2
    for (int h = 0; h < H; h++) {
        int n8 = nw - 8 * h;
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32(n8), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            float *d = s + (size_t)j * ss + 8 * h;
            if (n8 >= 8) _mm256_storeu_ps(d, tot[2 * j + h]);
            else _mm256_maskstore_ps(d, m, tot[2 * j + h]);
        }
    }
}

/* An empty asm that "changes" v: GCC would otherwise reassociate the int16 sums into a tree
 * that keeps every product live, and spill them. */
A_INLINE void a_keep(__m256i *v) { __asm__("" : "+x"(*v)); }

A_INLINE __m256 a_ld_ps(const uint8_t *pq, size_t off, int h) { return _mm256_loadu_ps((const float *)(pq + off) + 8 * h); }

/* i32[2j + h] += sum over vectors t0 .. t0+V-1 of half h's unsigned panel quants times the
 * broadcast activation quads aq[j] + 4t; the int16 sums run RUN vectors before widening, by
 * vpmaddwd with half h of the int16 pair vector mul (the rows' scales; ones where NULL). */
A_INLINE void a_isum(const uint8_t *pq, int t0, const int V, const int RUN, const int8_t *const *aq, __m256i *i32,
                     const int NA, const int H, const uint8_t *mul)
{
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int u = t0; u < t0 + V; u += RUN) {
        __m256i a16[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 8
        for (int t = u; t < u + RUN; t++) {
            __m256i w[2];
#pragma GCC unroll 2
            for (int h = 0; h < H; h++) w[h] = a_load(pq + (size_t)t * 64 + 32 * h);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                __m256i bc = a_bcast4(aq[j] + 4 * t);
#pragma GCC unroll 2
                for (int h = 0; h < H; h++) {
                    __m256i p = _mm256_maddubs_epi16(w[h], bc);
                    a16[2 * j + h] = t == u ? p : _mm256_add_epi16(a16[2 * j + h], p);
                    a_keep(&a16[2 * j + h]);
                }
            }
        }
#pragma GCC unroll 8
        for (int k = 0; k < 2 * NA; k++)
            if (k % 2 < H) {
                i32[k] = _mm256_add_epi32(i32[k], _mm256_madd_epi16(a16[k], mul ? a_load(mul + 32 * (k % 2)) : ones));
            }
    }
}

/* a_isum one activation row at a time: only that row's two int16 sums are live and the
 * weights come again from L1 for each row (CSE would keep them all in registers), so the
 * int32 sums stay in registers instead of spilling. Faster for short runs (one 16-row panel by
 * 128 activation rows, K 2048, both kernels alternated in one process, best of 2,000 calls,
 * Zen 3: gemm Q6_K +3%, Q2_K +7%, Q5_0/Q5_1 +7%), slower for 8-vector runs (Q4_K -19%, Q4_0
 * and Q4_1 -11%: the extra weight loads cost more than the spills saved) and for Q5_K/Q3_K's
 * scaled 4-vector runs (-8%). A separate function, not a flag on a_isum: with one body for both
 * orders GCC scheduled the old order differently, and those formats lost 8-19% too. */
A_INLINE void a_isum_rows(const uint8_t *pq, int t0, const int V, const int RUN, const int8_t *const *aq, __m256i *i32,
                          const int NA, const int H, const uint8_t *mul)
{
    const __m256i ones = _mm256_set1_epi16(1);
#pragma GCC unroll 8
    for (int u = t0; u < t0 + V; u += RUN) {
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            __m256i a16[2];
            const uint8_t *pj = pq;
            __asm__("" : "+r"(pj)); /* a load per row: see above */
#pragma GCC unroll 8
            for (int t = u; t < u + RUN; t++) {
                __m256i bc = a_bcast4(aq[j] + 4 * t);
#pragma GCC unroll 2
                for (int h = 0; h < H; h++) {
                    __m256i p = _mm256_maddubs_epi16(a_load(pj + (size_t)t * 64 + 32 * h), bc);
                    a16[h] = t == u ? p : _mm256_add_epi16(a16[h], p);
                    a_keep(&a16[h]);
                }
            }
#pragma GCC unroll 2
            for (int h = 0; h < H; h++) {
                i32[2 * j + h] = _mm256_add_epi32(i32[2 * j + h], _mm256_madd_epi16(a16[h], mul ? a_load(mul + 32 * h) : ones));
                a_keep(&i32[2 * j + h]);
            }
        }
    }
}

#define A_FOR_JH(NA, H) for (int k = 0; k < 2 * (NA); k++) if (k % 2 < (H))

/* Q8_0: sum_b d_w d_a sum |w| sign(a, w); kept: the decode layout (f16 d, fetched ahead) */
A_INLINE void a_q8_0(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                     size_t ss, int nw, const int NA, const int H, const bool kept)
{
    const __m256i ones = _mm256_set1_epi16(1);
    const bool l2 = core_prefetch_l2();
    __m256 tot[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 8
    A_FOR_JH(NA, H) tot[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * (kept ? A_Q8_KEPT_BYTES : A_LEG_BYTES_D);
        if (kept)
            for (int l = 0; l < A_Q8_KEPT_BYTES; l += 64) QX_PREFETCH(pq + A_PF + l, l2);
        const int8_t *aq[QUANT_PANEL_MAX_A];
        __m256i i32[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) aq[j] = ((const blk_q8_0 *)(a + (size_t)j * as) + b)->qs;
#pragma GCC unroll 8
        A_FOR_JH(NA, H) i32[k] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) {
            __m256i w[2], aw[2];
#pragma GCC unroll 2
            for (int h = 0; h < H; h++) w[h] = a_load(pq + (size_t)t * 64 + 32 * h), aw[h] = _mm256_abs_epi8(w[h]);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                __m256i bc = a_bcast4(aq[j] + 4 * t);
#pragma GCC unroll 2
                for (int h = 0; h < H; h++) {
                    __m256i p = _mm256_maddubs_epi16(aw[h], _mm256_sign_epi8(bc, w[h]));
                    i32[2 * j + h] = _mm256_add_epi32(i32[2 * j + h], _mm256_madd_epi16(p, ones));
                    a_keep(&i32[2 * j + h]);
                }
            }
        }
#pragma GCC unroll 8
        A_FOR_JH(NA, H) {
            __m256 dw = kept ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(pq + A_LEG_QBYTES + 16 * (k % 2))))
                             : a_ld_ps(pq, A_LEG_QBYTES, k % 2);
            tot[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32[k]), _mm256_mul_ps(dw, _mm256_set1_ps(aux[(size_t)(k / 2) * xs + b])), tot[k]);
        }
    }
    a_store(s, ss, tot, nw, NA, H);
}

/* Block b's activation quants in row j: Q8_0 rows, or Q8_1 for the affine formats. */
A_INLINE const int8_t *a_leg_act(const char *a, size_t as, int j, int64_t b, const bool affine)
{
    const char *row = a + (size_t)j * as;
    return affine ? ((const blk_q8_1 *)row + b)->qs : ((const blk_q8_0 *)row + b)->qs;
}

/* tot[k] += block b's integer sums i32[k] with its scales: d_w d_a (isum - zero * sum a), or
 * (affine) d_w d_a isum + m_w (d_a sum a); aux row j holds the block's two activation terms.
 * dw[h], mw[h]: half h's 8 rows' d and m. */
A_INLINE void a_leg_scales(__m256 *tot, const __m256i *i32, const __m256 *dw, const __m256 *mw, const float *aux,
                           size_t xs, int64_t b, const int NA, const int H, const bool affine)
{
#pragma GCC unroll 8
    A_FOR_JH(NA, H) {
        const float *x = aux + (size_t)(k / 2) * xs + 2 * b;
        __m256 is = _mm256_cvtepi32_ps(i32[k]);
        if (affine) {
            tot[k] = _mm256_fmadd_ps(is, _mm256_mul_ps(dw[k % 2], _mm256_set1_ps(x[0])), tot[k]);
            tot[k] = _mm256_fmadd_ps(mw[k % 2], _mm256_set1_ps(x[1]), tot[k]);
        } else {
            tot[k] = _mm256_fmadd_ps(_mm256_sub_ps(is, _mm256_set1_ps(x[0])), _mm256_mul_ps(dw[k % 2], _mm256_set1_ps(x[1])), tot[k]);
        }
    }
}

/* Q4_0/Q5_0: sum_b d_w d_a (isum - zero * sum a); Q4_1/Q5_1 (affine): sum_b d_w d_a isum + m_w (d_a sum a) */
A_INLINE void a_leg(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                    size_t ss, int nw, const int NA, const int H, const int RUN, const bool affine)
{
    const size_t pbb = affine ? A_LEG_BYTES_DM : A_LEG_BYTES_D;
    __m256 tot[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 8
    A_FOR_JH(NA, H) tot[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * pbb;
        const int8_t *aq[QUANT_PANEL_MAX_A];
        __m256i i32[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) aq[j] = a_leg_act(a, as, j, b, affine);
#pragma GCC unroll 8
        A_FOR_JH(NA, H) i32[k] = _mm256_setzero_si256();
        if (RUN == A_RUN_5BIT) a_isum_rows(pq, 0, 8, RUN, aq, i32, NA, H, NULL);
        else a_isum(pq, 0, 8, RUN, aq, i32, NA, H, NULL);
        __m256 dw[2], mw[2];
#pragma GCC unroll 2
        for (int h = 0; h < H; h++)
            dw[h] = a_ld_ps(pq, A_LEG_QBYTES, h), mw[h] = affine ? a_ld_ps(pq, A_LEG_QBYTES + 64, h) : _mm256_setzero_ps();
        a_leg_scales(tot, i32, dw, mw, aux, xs, b, NA, H, affine);
    }
    a_store(s, ss, tot, nw, NA, H);
}

/* im[2j + h] += the NP int16 pair vectors at pv (half h) times activation row j's int16
 * pairs, NP of them as 4-byte words at pairs[j] (the activation's group sums). */
A_INLINE void a_pair_sums(__m256i *im, const uint8_t *pv, const int NP, const void *const *pairs, const int NA,
                          const int H)
{
#pragma GCC unroll 8
    for (int q = 0; q < NP; q++) {
#pragma GCC unroll 8
        A_FOR_JH(NA, H) {
            int32_t pair;
            memcpy(&pair, (const char *)pairs[k / 2] + 4 * q, 4);
            im[k] = _mm256_add_epi32(im[k], _mm256_madd_epi16(a_load(pv + 64 * (size_t)q + 32 * (k % 2)), _mm256_set1_epi32(pair)));
        }
    }
}

/* Block b of the NA Q8_K activation rows: its quants and its 16 group sums (as 8 int16 pairs). */
A_INLINE void a_k_act(const char *a, size_t as, int64_t b, const int NA, const int8_t **aq, const void **bsums)
{
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) {
        const blk_q8_k *ab = (const blk_q8_k *)(a + (size_t)j * as) + b;
        aq[j] = ab->qs, bsums[j] = ab->bsums;
    }
}

/* Q4_K/Q5_K: sum_b d_a (d_w sum_sub scale isum - dmin_w sum_sub min asum); aux holds per block
 * d_a, then the 8 sub-block activation sums as 4 int16 pairs. */
A_INLINE void a_k4(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                   size_t ss, int nw, const int NA, const int H, const int RUN)
{
    __m256 tot[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 8
    A_FOR_JH(NA, H) tot[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * A_K4_BYTES;
        const int8_t *aq[QUANT_PANEL_MAX_A];
        const void *sums[QUANT_PANEL_MAX_A]; /* aux's 4 pairs of sub-block sums */
        __m256i i32[2 * QUANT_PANEL_MAX_A], im[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) aq[j] = ((const blk_q8_k *)(a + (size_t)j * as) + b)->qs, sums[j] = aux + (size_t)j * xs + 5 * b + 1;
#pragma GCC unroll 8
        A_FOR_JH(NA, H) i32[k] = im[k] = _mm256_setzero_si256();
        for (int sb = 0; sb < 8; sb++) a_isum(pq, 8 * sb, 8, RUN, aq, i32, NA, H, pq + A_K4_SC + 64 * sb);
        a_pair_sums(im, pq + A_K4_MN, 4, sums, NA, H);
#pragma GCC unroll 8
        A_FOR_JH(NA, H) {
            __m256 da = _mm256_set1_ps(aux[(size_t)(k / 2) * xs + 5 * b]);
            __m256 dw = a_ld_ps(pq, A_K4_D, k % 2), dmw = a_ld_ps(pq, A_K4_D + 64, k % 2);
            tot[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(i32[k]), _mm256_mul_ps(dw, da), tot[k]);
            tot[k] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(im[k]), _mm256_mul_ps(dmw, da), tot[k]);
        }
    }
    a_store(s, ss, tot, nw, NA, H);
}

/* Q6_K/Q3_K: sum_b d_a d_w (sum_g scale_g isum_g - zero sum_g scale_g asum_g); the group sums
 * asum_g pair up straight from the activation block's bsums. */
A_INLINE void a_k16(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                    size_t ss, int nw, const int NA, const int H, const int RUN, const int ZSHIFT)
{
    __m256 tot[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 8
    A_FOR_JH(NA, H) tot[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * A_K16_BYTES;
        const int8_t *aq[QUANT_PANEL_MAX_A];
        const void *bsums[QUANT_PANEL_MAX_A];
        __m256i i32[2 * QUANT_PANEL_MAX_A], iz[2 * QUANT_PANEL_MAX_A];
        a_k_act(a, as, b, NA, aq, bsums);
#pragma GCC unroll 8
        A_FOR_JH(NA, H) i32[k] = iz[k] = _mm256_setzero_si256();
        for (int g = 0; g < 16; g++) {
            if (RUN == A_RUN_6BIT) a_isum_rows(pq, 4 * g, 4, RUN, aq, i32, NA, H, pq + A_K16_SC + 64 * g);
            else a_isum(pq, 4 * g, 4, RUN, aq, i32, NA, H, pq + A_K16_SC + 64 * g);
        }
        a_pair_sums(iz, pq + A_K16_SP, 8, bsums, NA, H);
#pragma GCC unroll 8
        A_FOR_JH(NA, H) {
            __m256 dd = _mm256_mul_ps(a_ld_ps(pq, A_K16_D, k % 2), _mm256_set1_ps(aux[(size_t)(k / 2) * xs + b]));
            __m256i net = _mm256_sub_epi32(i32[k], _mm256_slli_epi32(iz[k], ZSHIFT));
            tot[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(net), dd, tot[k]);
        }
    }
    a_store(s, ss, tot, nw, NA, H);
}

/* Q2_K: sum_b d_a (d isum - dmin msum), isum = sum (sc q) a, msum = sum_g m_g bsum_g */
A_INLINE void a_q2_k(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                     size_t ss, int nw, const int NA, const int H)
{
    __m256 tot[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 8
    A_FOR_JH(NA, H) tot[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QKK; b++) {
        const uint8_t *pq = panel + (size_t)b * A_Q2K_BYTES;
        const int8_t *aq[QUANT_PANEL_MAX_A];
        const void *bsums[QUANT_PANEL_MAX_A];
        __m256i i32[2 * QUANT_PANEL_MAX_A], im[2 * QUANT_PANEL_MAX_A];
        a_k_act(a, as, b, NA, aq, bsums);
#pragma GCC unroll 8
        A_FOR_JH(NA, H) i32[k] = im[k] = _mm256_setzero_si256();
        for (int g = 0; g < 64; g += 8) a_isum_rows(pq, g, 8, A_RUN_Q2K, aq, i32, NA, H, NULL);
        a_pair_sums(im, pq + A_K_QBYTES, 8, bsums, NA, H);
        const size_t dofs = A_K_QBYTES + 8 * 64;
#pragma GCC unroll 8
        A_FOR_JH(NA, H) {
            __m256 dw = a_ld_ps(pq, dofs, k % 2), dmw = a_ld_ps(pq, dofs + 64, k % 2);
            __m256 blk = _mm256_fmsub_ps(dw, _mm256_cvtepi32_ps(i32[k]), _mm256_mul_ps(dmw, _mm256_cvtepi32_ps(im[k])));
            tot[k] = _mm256_fmadd_ps(blk, _mm256_set1_ps(aux[(size_t)(k / 2) * xs + b]), tot[k]);
        }
    }
    a_store(s, ss, tot, nw, NA, H);
}

/* The kernel bodies with a fixed activation-row count and half count (and format constants). */
#define A_BODY_ARGS int64_t K, const uint8_t *p, const char *a, size_t as, const float *aux, size_t xs, float *s, size_t ss, int nw, const int NA, const int H
#define A_PASS K, p, a, as, aux, xs, s, ss, nw, NA, H
A_INLINE void a_b_q8_0(A_BODY_ARGS) { a_q8_0(A_PASS, false); }
A_INLINE void ak_b_q8_0(A_BODY_ARGS) { a_q8_0(A_PASS, true); }
A_INLINE void a_b_q4_0(A_BODY_ARGS) { a_leg(A_PASS, A_RUN_4BIT, false); }
A_INLINE void a_b_q5_0(A_BODY_ARGS) { a_leg(A_PASS, A_RUN_5BIT, false); }
A_INLINE void a_b_q4_1(A_BODY_ARGS) { a_leg(A_PASS, A_RUN_4BIT, true); }
A_INLINE void a_b_q5_1(A_BODY_ARGS) { a_leg(A_PASS, A_RUN_5BIT, true); }
A_INLINE void a_b_q4_k(A_BODY_ARGS) { a_k4(A_PASS, A_RUN_4BIT); }
A_INLINE void a_b_q5_k(A_BODY_ARGS) { a_k4(A_PASS, A_RUN_5BIT); }
A_INLINE void a_b_q6_k(A_BODY_ARGS) { a_k16(A_PASS, A_RUN_6BIT, 5); } /* zero 32 */
A_INLINE void a_b_q3_k(A_BODY_ARGS) { a_k16(A_PASS, A_RUN_Q3K, 2); }  /* zero 4 */
A_INLINE void a_b_q2_k(A_BODY_ARGS) { a_q2_k(A_PASS); }

/* body with the pass's activation-row count n as a constant (PA == 2: no 3- or 4-row copies) */
#define A_BY_NA(body, PA, H)                                                                                         \
    do {                                                                                                             \
        if (n == 1) body(K, p, aj, as, xj, xs, sj, ss, nw, 1, H);                                                    \
        else if (n == 2 || (PA) == 2) body(K, p, aj, as, xj, xs, sj, ss, nw, 2, H);                                  \
        else if (n == 3) body(K, p, aj, as, xj, xs, sj, ss, nw, 3, H);                                               \
        else body(K, p, aj, as, xj, xs, sj, ss, nw, 4, H);                                                           \
    } while (0)

/* A gemm entry: passes of up to PA activation rows over both halves (one half where nw <= 8),
 * each with its own unrolled kernel. */
#define A_ENTRY(name, body, PA)                                                                                      \
    static void name(int64_t K, const void *panel, const void *a, size_t as, const float *aux, size_t xs, int na,   \
                     float *s, size_t ss, int nw)                                                                    \
    {                                                                                                                \
        const uint8_t *p = panel;                                                                                    \
        for (int j0 = 0; j0 < na; j0 += PA) {                                                                        \
            int n = na - j0 < PA ? na - j0 : PA;                                                                     \
            const char *aj = (const char *)a + (size_t)j0 * as;                                                      \
            const float *xj = aux + (size_t)j0 * xs;                                                                 \
            float *sj = s + (size_t)j0 * ss;                                                                         \
            if (nw > 8) A_BY_NA(body, PA, 2);                                                                        \
            else A_BY_NA(body, PA, 1);                                                                               \
        }                                                                                                            \
    }

A_ENTRY(a_gemm_q8_0, a_b_q8_0, 2)
A_ENTRY(ak_gemm_q8_0, ak_b_q8_0, 2)
A_ENTRY(a_gemm_q4_0, a_b_q4_0, 4)
A_ENTRY(a_gemm_q5_0, a_b_q5_0, 4)
A_ENTRY(a_gemm_q4_1, a_b_q4_1, 4)
A_ENTRY(a_gemm_q5_1, a_b_q5_1, 4)
A_ENTRY(a_gemm_q4_k, a_b_q4_k, 4)
A_ENTRY(a_gemm_q5_k, a_b_q5_k, 4)
A_ENTRY(a_gemm_q6_k, a_b_q6_k, 4)
A_ENTRY(a_gemm_q3_k, a_b_q3_k, 4)
A_ENTRY(a_gemm_q2_k, a_b_q2_k, 4)

/* ---- Q4_0, Q4_1, Q5_0 and Q5_1 kept for decode at about their weights' size: the avx512
 * repacks' layout (quant_panel_avx512.c, quant_panel_legacy_avx512.c: per block of 32 and 16
 * rows, 4 vectors whose low nibbles hold quants 8v..8v+3 of each row and high nibbles
 * 8v+4..8v+7; Q5's rows' qh words, byte v holding the fifth bits of vector v; then the 16
 * rows' f16 d, and the affine formats' f16 m). The per-call panels above hold bytes, twice
 * that, and decode only streams. Row dots at this level decoded a TinyLlama-shaped Q4_0 at
 * 35-37 t/s where the avx512 repack gives 55 (Zen 4, 2 threads, CTORCH_SIMD=avx2). The pack
 * is scalar: it runs once, when the weight is placed. ---- */
typedef enum { AR_Q4_0, AR_Q4_1, AR_Q5_0, AR_Q5_1 } ar_type;
#define AR_AFFINE(t) ((t) == AR_Q4_1 || (t) == AR_Q5_1)
#define AR_FIFTH(t) ((t) >= AR_Q5_0)
#define AR_QBYTES (4 * 64)
#define AR_HBYTES(t) (AR_FIFTH(t) ? 64 : 0)
#define AR_BYTES(t) (AR_QBYTES + AR_HBYTES(t) + (AR_AFFINE(t) ? 64 : 32))
#define AR_PF A_PF /* bytes fetched ahead, as the avx512 repacks */

/* Quant e's low four bits (0..31) from a block's 16 bytes of nibbles. */
static uint8_t nib_quant(const uint8_t *qs, int e) { return e < 16 ? qs[e] & 0xF : qs[e - 16] >> 4; }

static void ar_pack(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const ar_type t)
{
    static const size_t bsz[] = {sizeof(blk_q4_0), sizeof(blk_q4_1), sizeof(blk_q5_0), sizeof(blk_q5_1)};
    static const size_t qso[] = {offsetof(blk_q4_0, qs), offsetof(blk_q4_1, qs), offsetof(blk_q5_0, qs), offsetof(blk_q5_1, qs)};
    static const size_t qho[] = {0, 0, offsetof(blk_q5_0, qh), offsetof(blk_q5_1, qh)};
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QK; b++) {
        uint8_t *dst = panel + (size_t)b * AR_BYTES(t), *dm = dst + AR_QBYTES + AR_HBYTES(t);
        for (int r = 0; r < 16; r++) {
            const uint8_t *blk = r < nw ? (const uint8_t *)vw + (size_t)r * ws + (size_t)b * bsz[t] : NULL;
            static const uint8_t zero[4] = {0, 0, 0, 0};
            memcpy(dm + 2 * r, blk ? blk : zero, 2); /* d first in every format */
            if (AR_AFFINE(t)) memcpy(dm + 32 + 2 * r, blk ? blk + 2 : zero, 2);
            if (AR_FIFTH(t)) memcpy(dst + AR_QBYTES + 4 * r, blk ? blk + qho[t] : zero, 4);
            for (int v = 0; v < 4; v++)
                for (int i = 0; i < 4; i++)
                    dst[64 * v + 4 * r + i] =
                        blk ? (uint8_t)(nib_quant(blk + qso[t], 8 * v + i) | nib_quant(blk + qso[t], 8 * v + 4 + i) << 4) : 0;
        }
    }
}

static void ar_pack_q4_0(const void *vw, size_t ws, int nw, int64_t K, void *p) { ar_pack(vw, ws, nw, K, p, AR_Q4_0); }
static void ar_pack_q4_1(const void *vw, size_t ws, int nw, int64_t K, void *p) { ar_pack(vw, ws, nw, K, p, AR_Q4_1); }
static void ar_pack_q5_0(const void *vw, size_t ws, int nw, int64_t K, void *p) { ar_pack(vw, ws, nw, K, p, AR_Q5_0); }
static void ar_pack_q5_1(const void *vw, size_t ws, int nw, int64_t K, void *p) { ar_pack(vw, ws, nw, K, p, AR_Q5_1); }

/* 16 added to the bytes of lo (hi) whose quant has its fifth bit set: byte v of each lane of
 * hv spread over the lane's four bytes, bit i for byte i of lo and bit 4 + i for hi. */
A_INLINE void ar_add_fifth(__m256i hv, const int v, __m256i *lo, __m256i *hi)
{
    const int rep = 0x01010101;
    const __m256i sixteen = _mm256_set1_epi8(16), blo = _mm256_set1_epi32(0x08040201), bhi = _mm256_set1_epi32((int)0x80402010u);
    __m256i spread = _mm256_shuffle_epi8(hv, _mm256_setr_epi32(v * rep, (4 + v) * rep, (8 + v) * rep, (12 + v) * rep, v * rep,
                                                              (4 + v) * rep, (8 + v) * rep, (12 + v) * rep));
    *lo = _mm256_add_epi8(*lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, blo), blo), sixteen));
    *hi = _mm256_add_epi8(*hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(spread, bhi), bhi), sixteen));
}

/* Q4_0/Q5_0 sum_b d_w d_a (isum - zero sum a), Q4_1/Q5_1 sum_b d_w d_a isum + m_w (d_a sum a),
 * both halves a pass as the panels above. vpmaddubsw results add up in int16 over RUN vectors:
 * 4-bit quants a whole block (8 * 2 * 15 * 127 = 30480 < 2^15), 5-bit ones half of it
 * (4 * 2 * 31 * 127 = 31496). */
A_INLINE void ar_kernel(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                        float *s, size_t ss, int nw, const int NA, const int H, const ar_type t)
{
    const bool affine = AR_AFFINE(t), l2 = core_prefetch_l2();
    const int run = AR_FIFTH(t) ? 2 : 4; /* nibble vectors per int16 run (two products each) */
    const __m256i m4 = _mm256_set1_epi8(0xF), ones = _mm256_set1_epi16(1);
    __m256 tot[2 * QUANT_PANEL_MAX_A];
#pragma GCC unroll 8
    A_FOR_JH(NA, H) tot[k] = _mm256_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * AR_BYTES(t);
        for (int l = 0; l < AR_BYTES(t); l += 64) QX_PREFETCH(pq + AR_PF + l, l2);
        __m256i a16[2 * QUANT_PANEL_MAX_A], i32[2 * QUANT_PANEL_MAX_A], hv[2];
#pragma GCC unroll 8
        A_FOR_JH(NA, H) i32[k] = _mm256_setzero_si256();
#pragma GCC unroll 2
        for (int h = 0; h < H; h++) hv[h] = AR_FIFTH(t) ? a_load(pq + AR_QBYTES + 32 * h) : _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            __m256i lo[2], hi[2];
#pragma GCC unroll 2
            for (int h = 0; h < H; h++) {
                __m256i x = a_load(pq + (size_t)v * 64 + 32 * h);
                lo[h] = _mm256_and_si256(x, m4), hi[h] = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
                if (AR_FIFTH(t)) ar_add_fifth(hv[h], v, &lo[h], &hi[h]);
            }
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const int8_t *q = a_leg_act(a, as, j, b, affine) + 8 * v;
                __m256i b0 = a_bcast4(q), b1 = a_bcast4(q + 4);
#pragma GCC unroll 2
                for (int h = 0; h < H; h++) {
                    __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], b0), _mm256_maddubs_epi16(hi[h], b1));
                    a16[2 * j + h] = v % run ? _mm256_add_epi16(a16[2 * j + h], p) : p;
                    a_keep(&a16[2 * j + h]);
                    if (v % run == run - 1) {
                        i32[2 * j + h] = _mm256_add_epi32(i32[2 * j + h], _mm256_madd_epi16(a16[2 * j + h], ones));
                        a_keep(&i32[2 * j + h]);
                    }
                }
            }
        }
        const uint8_t *dm = pq + AR_QBYTES + AR_HBYTES(t);
        __m256 dw[2], mw[2];
#pragma GCC unroll 2
        for (int h = 0; h < H; h++) {
            dw[h] = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dm + 16 * h)));
            mw[h] = affine ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(dm + 32 + 16 * h))) : _mm256_setzero_ps();
        }
        a_leg_scales(tot, i32, dw, mw, aux, xs, b, NA, H, affine);
    }
    a_store(s, ss, tot, nw, NA, H);
}

#define AR_BODY(name, t) \
    A_INLINE void name(A_BODY_ARGS) { ar_kernel(A_PASS, t); }
AR_BODY(ar_b_q4_0, AR_Q4_0)
AR_BODY(ar_b_q4_1, AR_Q4_1)
AR_BODY(ar_b_q5_0, AR_Q5_0)
AR_BODY(ar_b_q5_1, AR_Q5_1)
A_ENTRY(ar_gemm_q4_0, ar_b_q4_0, 2)
A_ENTRY(ar_gemm_q4_1, ar_b_q4_1, 2)
A_ENTRY(ar_gemm_q5_0, ar_b_q5_0, 2)
A_ENTRY(ar_gemm_q5_1, ar_b_q5_1, 2)

QUANT_TARGET_END

/* ---- activation side data, once per activation row ---- */

static int a_qsum(const int8_t *qs, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++) s += qs[i];
    return s;
}

static void a_aux_q8_0(const void *va, int64_t K, float *aux)
{
    const blk_q8_0 *a = va;
    for (int64_t b = 0; b < K / QK; b++) aux[b] = qf16(a[b].d);
}

/* per block: zero point * sum(a) (exact: |sum| <= 32 * 127), then the block scale */
static void a_aux_off(const void *va, int64_t K, float *aux, float zero)
{
    const blk_q8_0 *a = va;
    for (int64_t b = 0; b < K / QK; b++) aux[2 * b] = zero * (float)a_qsum(a[b].qs, QK), aux[2 * b + 1] = qf16(a[b].d);
}

static void a_aux_q4_0(const void *va, int64_t K, float *aux) { a_aux_off(va, K, aux, 8.f); }
static void a_aux_q5_0(const void *va, int64_t K, float *aux) { a_aux_off(va, K, aux, 16.f); }

/* Q8_1 rows: the scale, then scale * sum(a) from the quants (as the row dots, not the
 * f16-rounded s field) */
static void a_aux_q8_1(const void *va, int64_t K, float *aux)
{
    const blk_q8_1 *a = va;
    for (int64_t b = 0; b < K / QK; b++) {
        float d = qf16(a[b].d);
        aux[2 * b] = d, aux[2 * b + 1] = d * (float)a_qsum(a[b].qs, QK);
    }
}

/* per block d, then the 8 sub-block sums as 4 int16 pairs (|sum| <= 32 * 128) stored as
 * int32 bits */
static void a_aux_k4(const void *va, int64_t K, float *aux)
{
    const blk_q8_k *a = va;
    for (int64_t b = 0; b < K / QKK; b++) {
        aux[5 * b] = a[b].d;
        for (int q = 0; q < 4; q++) {
            const int16_t *s = a[b].bsums + 4 * q;
            uint32_t pair = (uint32_t)(uint16_t)(s[0] + s[1]) | (uint32_t)(uint16_t)(s[2] + s[3]) << 16;
            memcpy(aux + 5 * b + 1 + q, &pair, 4);
        }
    }
}

static void a_aux_kd(const void *va, int64_t K, float *aux)
{
    const blk_q8_k *a = va;
    for (int64_t b = 0; b < K / QKK; b++) aux[b] = a[b].d;
}

static const quant_panel_kernels g_q8_0 = {A_LEG_BYTES_D, 1, a_pack_q8_0, a_aux_q8_0, a_gemm_q8_0, 0};
static const quant_panel_kernels g_q4_0 = {A_LEG_BYTES_D, 2, a_pack_q4_0, a_aux_q4_0, a_gemm_q4_0, 0};
static const quant_panel_kernels g_q5_0 = {A_LEG_BYTES_D, 2, a_pack_q5_0, a_aux_q5_0, a_gemm_q5_0, 0};
static const quant_panel_kernels g_q4_1 = {A_LEG_BYTES_DM, 2, a_pack_q4_1, a_aux_q8_1, a_gemm_q4_1, 0};
static const quant_panel_kernels g_q5_1 = {A_LEG_BYTES_DM, 2, a_pack_q5_1, a_aux_q8_1, a_gemm_q5_1, 0};
static const quant_panel_kernels g_q4_k = {A_K4_BYTES, 5, a_pack_q4_k, a_aux_k4, a_gemm_q4_k, 0};
static const quant_panel_kernels g_q5_k = {A_K4_BYTES, 5, a_pack_q5_k, a_aux_k4, a_gemm_q5_k, 0};
static const quant_panel_kernels g_q6_k = {A_K16_BYTES, 1, a_pack_q6_k, a_aux_kd, a_gemm_q6_k, 0};
static const quant_panel_kernels g_q3_k = {A_K16_BYTES, 1, a_pack_q3_k, a_aux_kd, a_gemm_q3_k, 0};
static const quant_panel_kernels g_q2_k = {A_Q2K_BYTES, 1, a_pack_q2_k, a_aux_kd, a_gemm_q2_k, 0};

static const quant_panel_kernels g_r_q8_0 = {A_Q8_KEPT_BYTES, 1, ak_pack_q8_0, a_aux_q8_0, ak_gemm_q8_0, 0};
static const quant_panel_kernels g_r_q4_0 = {AR_BYTES(AR_Q4_0), 2, ar_pack_q4_0, a_aux_q4_0, ar_gemm_q4_0, 0};
static const quant_panel_kernels g_r_q4_1 = {AR_BYTES(AR_Q4_1), 2, ar_pack_q4_1, a_aux_q8_1, ar_gemm_q4_1, 0};
static const quant_panel_kernels g_r_q5_0 = {AR_BYTES(AR_Q5_0), 2, ar_pack_q5_0, a_aux_q5_0, ar_gemm_q5_0, 0};
static const quant_panel_kernels g_r_q5_1 = {AR_BYTES(AR_Q5_1), 2, ar_pack_q5_1, a_aux_q8_1, ar_gemm_q5_1, 0};

void quant_repack_fill_avx2(quant_panel_table tab)
{
    tab[CT_Q8_0] = &g_r_q8_0;
    tab[CT_Q4_0] = &g_r_q4_0;
    tab[CT_Q4_1] = &g_r_q4_1;
    tab[CT_Q5_0] = &g_r_q5_0;
    tab[CT_Q5_1] = &g_r_q5_1;
}

void quant_panel_fill_avx2(quant_panel_table tab)
{
    tab[CT_Q8_0] = &g_q8_0;
    tab[CT_Q4_0] = &g_q4_0;
    tab[CT_Q4_K] = &g_q4_k;
    tab[CT_Q6_K] = &g_q6_k;
    tab[CT_Q5_0] = &g_q5_0;
    tab[CT_Q4_1] = &g_q4_1;
    tab[CT_Q5_K] = &g_q5_k;
    tab[CT_Q5_1] = &g_q5_1;
    tab[CT_Q3_K] = &g_q3_k;
    tab[CT_Q2_K] = &g_q2_k;
}
#else
void quant_panel_fill_avx2(quant_panel_table tab) { (void)tab; }
void quant_repack_fill_avx2(quant_panel_table tab) { (void)tab; }
#endif
