/* Packed-panel GEMM for prefill (AVX-512, with or without VNNI) of the legacy 32-element formats that
 * quant_panel_avx512.c leaves out: Q5_0 (Q4_0 plus a fifth bit), Q4_1 and Q5_1 (affine
 * weights d * q + m). The layout is Q8_0's: per block, 8 vectors hold the 32 quants of the
 * 16 rows as unsigned bytes, one row per 32-bit lane, so one vpdpbusd multiplies 16 rows by
 * four broadcast activation values; then the 16 rows' f32 scales d (and mins m).
 *
 * The quants go in unsigned as stored (0..15 or 0..31); what that leaves out comes back
 * through per-block activation sums made once per activation row (act_aux):
 *   Q5_0: sum (q - 16) a = isum - 16 * sum(a), all exact integers in f32;
 *   Q4_1/Q5_1: sum (d q + m) a_q da = d da isum + m (da sum(a_q)), the min folded into the
 *   activation block sum the way the K-quant panels fold their mins.
 * Integer sums are exact; the scale products round differently from the row dots, so
 * results agree with quant_get_vec_dot to f32 rounding, not bit for bit. */
#include <stddef.h>

#include "quant/quant_impl.h"
#include "quant/quant_target.h"
#include "quant/quant_avx512_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include "quant/quant_panel_avx512.h"

QUANT_TARGET_BEGIN(QZ_TARGET)

#define L_QBYTES (8 * 64)                   /* 8 quad vectors per block of 32 */
#define L_BLOCK_BYTES_D (L_QBYTES + 64)     /* + the 16 rows' d */
#define L_BLOCK_BYTES_DM (L_QBYTES + 2 * 64) /* + d, then m */

typedef enum l_type { L_Q4_1, L_Q5_0, L_Q5_1 } l_type;

static_assert(offsetof(blk_q4_1, m) == 2 && offsetof(blk_q5_1, m) == 2 && offsetof(blk_q5_0, d) == 0,
              "d (and m) lead every legacy block");

/* Low nibbles are elements 0..15, high nibbles 16..31: one byte each, in element order. */
P_INLINE __m256i l_nibbles(const uint8_t *qs)
{
    __m128i q = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0xF);
    return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
}

/* Bit j of qh is the fifth bit of element j. */
P_INLINE __m256i l_fifth(const uint8_t *qs, const uint8_t *qh)
{
    uint32_t h;
    memcpy(&h, qh, 4);
    return _mm256_or_si256(l_nibbles(qs), _mm256_maskz_mov_epi8((__mmask32)h, _mm256_set1_epi8(0x10)));
}

P_INLINE __m256i l_bytes(const char *blk, const l_type t)
{
    switch (t) {
    case L_Q4_1: return l_nibbles(((const blk_q4_1 *)blk)->qs);
    case L_Q5_0: return l_fifth(((const blk_q5_0 *)blk)->qs, ((const blk_q5_0 *)blk)->qh);
    default: return l_fifth(((const blk_q5_1 *)blk)->qs, ((const blk_q5_1 *)blk)->qh);
    }
}

/* Blocks b and b+1 (when pair) of 16 rows as bytes, transposed (r[8h + t]: quants 4t..4t+3 of
 * each row of block b+h); rows past nw are zero. nib: the nibbles alone (the decode repack
 * keeps the fifth bits apart). */
P_INLINE size_t l_bsz(const l_type t) { return t == L_Q4_1 ? sizeof(blk_q4_1) : t == L_Q5_0 ? sizeof(blk_q5_0) : sizeof(blk_q5_1); }

P_INLINE void l_gather(const void *vw, size_t ws, int nw, int64_t b, const l_type t, const bool pair, const bool nib,
                       __m512i r[16])
{
    const size_t bsz = l_bsz(t);
    const size_t qo = t == L_Q4_1 ? offsetof(blk_q4_1, qs) : t == L_Q5_0 ? offsetof(blk_q5_0, qs) : offsetof(blk_q5_1, qs);
    for (int i = 0; i < 16; i++) {
        const char *blk = (const char *)vw + (size_t)i * ws + (size_t)b * bsz;
        if (i >= nw) {
            r[i] = _mm512_setzero_si512();
            continue;
        }
        __m256i lo = nib ? l_nibbles((const uint8_t *)blk + qo) : l_bytes(blk, t);
        __m256i hi = !pair ? _mm256_setzero_si256() : nib ? l_nibbles((const uint8_t *)blk + bsz + qo) : l_bytes(blk + bsz, t);
        r[i] = p_join(lo, hi);
    }
    p_transpose16(r);
}

/* Two blocks of 16 rows per transpose, as the Q8_0 packer does; rows past nw are zero. */
P_INLINE void l_pack(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const l_type t)
{
    const size_t bsz = l_bsz(t);
    const size_t pbb = t == L_Q5_0 ? L_BLOCK_BYTES_D : L_BLOCK_BYTES_DM;
    uint8_t *panel = vpanel;
    int64_t nb = K / QK;
    for (int64_t b = 0; b < nb; b += 2) {
        bool pair = b + 1 < nb;
        if (b + 2 < nb) p_prefetch_rows(vw, ws, nw, (size_t)(b + 2) * bsz, 2 * bsz);
        __m512i r[16];
        l_gather(vw, ws, nw, b, t, pair, false, r);
        for (int h = 0; h < (pair ? 2 : 1); h++) {
            uint8_t *dst = panel + (size_t)(b + h) * pbb;
            float *dv = (float *)(dst + L_QBYTES), *mv = dv + 16;
            for (int j = 0; j < 8; j++) _mm512_storeu_si512(dst + (size_t)j * 64, r[8 * h + j]);
            for (int i = 0; i < 16; i++) {
                uint16_t dm[2] = {0, 0};
                if (i < nw) memcpy(dm, (const char *)vw + (size_t)i * ws + (size_t)(b + h) * bsz, t == L_Q5_0 ? 2 : 4);
                dv[i] = qf16(dm[0]);
                if (t != L_Q5_0) mv[i] = qf16(dm[1]);
            }
        }
    }
}

static void l_pack_q4_1(const void *vw, size_t ws, int nw, int64_t K, void *panel) { l_pack(vw, ws, nw, K, panel, L_Q4_1); }
static void l_pack_q5_0(const void *vw, size_t ws, int nw, int64_t K, void *panel) { l_pack(vw, ws, nw, K, panel, L_Q5_0); }
static void l_pack_q5_1(const void *vw, size_t ws, int nw, int64_t K, void *panel) { l_pack(vw, ws, nw, K, panel, L_Q5_1); }

/* sum of 32 int8 quants (|sum| <= 32 * 127: exact in f32) */
P_INLINE int l_qsum(const int8_t *qs)
{
    __m256i u = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
    __m256i sad = _mm256_sad_epu8(u, _mm256_setzero_si256());
    __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    return (int)(_mm_cvtsi128_si64(s2) + _mm_extract_epi64(s2, 1)) - 128 * QK;
}

/* Q5_0 against Q8_0 rows, per block: 16 * sum(a), then the block scale */
static void l_aux_q5_0(const void *va, int64_t K, float *aux)
{
    const blk_q8_0 *a = va;
    for (int64_t b = 0; b < K / QK; b++) {
        aux[2 * b] = 16.f * (float)l_qsum(a[b].qs);
        aux[2 * b + 1] = qf16(a[b].d);
    }
}

/* Q4_1/Q5_1 against Q8_1 rows, per block: the scale, then scale * sum(a) (from the quants,
 * as the row dots do, not the f16-rounded s field) */
static void l_aux_q8_1(const void *va, int64_t K, float *aux)
{
    const blk_q8_1 *a = va;
    for (int64_t b = 0; b < K / QK; b++) {
        float d = qf16(a[b].d);
        aux[2 * b] = d;
        aux[2 * b + 1] = d * (float)l_qsum(a[b].qs);
    }
}

/* The activation rows' blocks share one layout prefix: f16 d, then (Q8_1) f16 s, then qs. */
P_INLINE const int8_t *l_act_qs(const char *a, size_t as, int j, int64_t b, const bool affine)
{
    return affine ? ((const blk_q8_1 *)(a + (size_t)j * as) + b)->qs : ((const blk_q8_0 *)(a + (size_t)j * as) + b)->qs;
}

/* affine: out = sum_b d_w d_a isum + m_w (d_a sum a); else out = sum_b d_w d_a (isum - 16 sum a) */
P_INLINE void l_gemm(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                     size_t ss, int nw, const int NA, const bool affine)
{
    const size_t pbb = affine ? L_BLOCK_BYTES_DM : L_BLOCK_BYTES_D;
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * pbb;
        __m512 dw = _mm512_loadu_ps((const float *)(pq + L_QBYTES));
        __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) i0[j] = i1[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < 8; t += 2) {
            __m512i w0 = _mm512_loadu_si512(pq + (size_t)t * 64), w1 = _mm512_loadu_si512(pq + (size_t)(t + 1) * 64);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const int8_t *q = l_act_qs(a, as, j, b, affine) + 4 * t;
                qz_dpbusd_x2(&i0[j], &i1[j], w0, p_bcast4(q), w1, p_bcast4(q + 4));
            }
        }
        if (affine) {
            __m512 mw = _mm512_loadu_ps((const float *)(pq + L_QBYTES) + 16);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const float *x = aux + (size_t)j * xs + 2 * b;
                __m512 is = _mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j]));
                tot[j] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(x[0])), tot[j]);
                tot[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[1]), tot[j]);
            }
        } else {
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const float *x = aux + (size_t)j * xs + 2 * b;
                __m512 is = _mm512_sub_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j])), _mm512_set1_ps(x[0]));
                tot[j] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(x[1])), tot[j]);
            }
        }
    }
    p_store(s, ss, tot, nw, NA);
}

P_INLINE void l_gemm_off(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                         float *s, size_t ss, int nw, const int NA)
{
    l_gemm(K, panel, a, as, aux, xs, s, ss, nw, NA, false);
}

P_INLINE void l_gemm_aff(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs,
                         float *s, size_t ss, int nw, const int NA)
{
    l_gemm(K, panel, a, as, aux, xs, s, ss, nw, NA, true);
}

P_ENTRY(l_gemm_q5_0, l_gemm_off)
P_ENTRY(l_gemm_q8_1, l_gemm_aff)

/* ---- Q4_1, Q5_0 and Q5_1 kept for decode, at about the weights' size: per block of 32 and
 * 16 rows, 4 nibble vectors (low nibbles quants 8v..8v+3 of each row, high nibbles 8v+4..8v+7,
 * as the Q4_0 repack), Q5_0's and Q5_1's rows' qh words (byte v: the fifth bits of nibble
 * vector v), then the 16 rows' f16 d (and m). The activation sums are the panels'
 * (l_aux_q5_0, l_aux_q8_1). ---- */
#define LR_QBYTES (4 * 64)
#define LR_HBYTES(t) ((t) == L_Q4_1 ? 0 : 64)
#define LR_BLOCK_BYTES(t) (LR_QBYTES + LR_HBYTES(t) + ((t) == L_Q5_0 ? 32 : 64))
#define LR_PF 2048 /* bytes fetched ahead, as the other decode repacks */

P_INLINE void l_rpack(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const l_type t)
{
    const size_t bsz = l_bsz(t), qho = t == L_Q5_0 ? offsetof(blk_q5_0, qh) : offsetof(blk_q5_1, qh);
    uint8_t *panel = vpanel;
    int64_t nb = K / QK;
    for (int64_t b = 0; b < nb; b += 2) {
        bool pair = b + 1 < nb;
        if (b + 2 < nb) p_prefetch_rows(vw, ws, nw, (size_t)(b + 2) * bsz, 2 * bsz);
        __m512i r[16];
        l_gather(vw, ws, nw, b, t, pair, true, r);
        for (int h = 0; h < (pair ? 2 : 1); h++) {
            uint8_t *dst = panel + (size_t)(b + h) * LR_BLOCK_BYTES(t), *dm = dst + LR_QBYTES + LR_HBYTES(t);
            for (int v = 0; v < 4; v++)
                _mm512_storeu_si512(dst + (size_t)v * 64, _mm512_or_si512(r[8 * h + 2 * v], _mm512_slli_epi16(r[8 * h + 2 * v + 1], 4)));
            for (int i = 0; i < 16; i++) {
                const char *blk = (const char *)vw + (size_t)i * ws + (size_t)(b + h) * bsz;
                uint16_t dmi[2] = {0, 0};
                uint32_t qh = 0;
                if (i < nw) {
                    memcpy(dmi, blk, t == L_Q5_0 ? 2 : 4);
                    if (t != L_Q4_1) memcpy(&qh, blk + qho, sizeof qh);
                }
                if (t != L_Q4_1) memcpy(dst + LR_QBYTES + 4 * i, &qh, sizeof qh);
                memcpy(dm + 2 * i, &dmi[0], 2);
                if (t != L_Q5_0) memcpy(dm + 32 + 2 * i, &dmi[1], 2);
            }
        }
    }
}

static void l_rpack_q4_1(const void *vw, size_t ws, int nw, int64_t K, void *panel) { l_rpack(vw, ws, nw, K, panel, L_Q4_1); }
static void l_rpack_q5_0(const void *vw, size_t ws, int nw, int64_t K, void *panel) { l_rpack(vw, ws, nw, K, panel, L_Q5_0); }
static void l_rpack_q5_1(const void *vw, size_t ws, int nw, int64_t K, void *panel) { l_rpack(vw, ws, nw, K, panel, L_Q5_1); }

/* l_gemm's two formulas on the kept layout: Q4_1/Q5_1 d_w d_a isum + m_w (d_a sum a), Q5_0
 * d_w d_a (isum - 16 sum a) */
P_INLINE void l_rgemm(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                      size_t ss, int nw, const int NA, const l_type t)
{
    const bool affine = t != L_Q5_0;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    __m512 tot[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
    for (int j = 0; j < NA; j++) tot[j] = _mm512_setzero_ps();
    for (int64_t b = 0; b < K / QK; b++) {
        const uint8_t *pq = panel + (size_t)b * LR_BLOCK_BYTES(t), *dm = pq + LR_QBYTES + LR_HBYTES(t);
        for (int l = 0; l < LR_BLOCK_BYTES(t); l += 64) _mm_prefetch((const char *)pq + LR_PF + l, _MM_HINT_T0);
        __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dm));
        __m512 mw = affine ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(dm + 32))) : _mm512_setzero_ps();
        __m512i hv = t != L_Q4_1 ? _mm512_loadu_si512(pq + LR_QBYTES) : _mm512_setzero_si512();
        __m512i i0[QUANT_PANEL_MAX_A], i1[QUANT_PANEL_MAX_A];
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) i0[j] = i1[j] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int v = 0; v < 4; v++) {
            __m512i x = _mm512_loadu_si512(pq + (size_t)v * 64);
            __m512i lo = _mm512_and_si512(x, m4), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
            if (t != L_Q4_1) p_add_fifth(hv, v, &lo, &hi);
#pragma GCC unroll 4
            for (int j = 0; j < NA; j++) {
                const int8_t *q = l_act_qs(a, as, j, b, affine) + 8 * v;
                qz_dpbusd_x2(&i0[j], &i1[j], lo, p_bcast4(q), hi, p_bcast4(q + 4));
            }
        }
#pragma GCC unroll 4
        for (int j = 0; j < NA; j++) {
            const float *x = aux + (size_t)j * xs + 2 * b;
            __m512 is = _mm512_cvtepi32_ps(_mm512_add_epi32(i0[j], i1[j]));
            if (affine) {
                tot[j] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(x[0])), tot[j]);
                tot[j] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[1]), tot[j]);
            } else {
                is = _mm512_sub_ps(is, _mm512_set1_ps(x[0]));
                tot[j] = _mm512_fmadd_ps(is, _mm512_mul_ps(dw, _mm512_set1_ps(x[1])), tot[j]);
            }
        }
    }
    p_store(s, ss, tot, nw, NA);
}

P_INLINE void l_rgemm41(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                        size_t ss, int nw, const int NA)
{
    l_rgemm(K, panel, a, as, aux, xs, s, ss, nw, NA, L_Q4_1);
}

P_INLINE void l_rgemm50(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                        size_t ss, int nw, const int NA)
{
    l_rgemm(K, panel, a, as, aux, xs, s, ss, nw, NA, L_Q5_0);
}

P_INLINE void l_rgemm51(int64_t K, const uint8_t *panel, const char *a, size_t as, const float *aux, size_t xs, float *s,
                        size_t ss, int nw, const int NA)
{
    l_rgemm(K, panel, a, as, aux, xs, s, ss, nw, NA, L_Q5_1);
}

P_ENTRY(l_rgemm_q4_1, l_rgemm41)
P_ENTRY(l_rgemm_q5_0, l_rgemm50)
P_ENTRY(l_rgemm_q5_1, l_rgemm51)

QUANT_TARGET_END

static const quant_panel_kernels g_panel_q4_1 = {L_BLOCK_BYTES_DM, 2, l_pack_q4_1, l_aux_q8_1, l_gemm_q8_1, 0};
static const quant_panel_kernels g_panel_q5_0 = {L_BLOCK_BYTES_D, 2, l_pack_q5_0, l_aux_q5_0, l_gemm_q5_0, 0};
static const quant_panel_kernels g_panel_q5_1 = {L_BLOCK_BYTES_DM, 2, l_pack_q5_1, l_aux_q8_1, l_gemm_q8_1, 0};

static const quant_panel_kernels g_repack_q4_1 = {LR_BLOCK_BYTES(L_Q4_1), 2, l_rpack_q4_1, l_aux_q8_1, l_rgemm_q4_1, 0};
static const quant_panel_kernels g_repack_q5_0 = {LR_BLOCK_BYTES(L_Q5_0), 2, l_rpack_q5_0, l_aux_q5_0, l_rgemm_q5_0, 0};
static const quant_panel_kernels g_repack_q5_1 = {LR_BLOCK_BYTES(L_Q5_1), 2, l_rpack_q5_1, l_aux_q8_1, l_rgemm_q5_1, 0};

void QZ_SYM(quant_panel_legacy_fill_avx512)(quant_panel_table tab)
{
    tab[CT_Q4_1] = &g_panel_q4_1;
    tab[CT_Q5_0] = &g_panel_q5_0;
    tab[CT_Q5_1] = &g_panel_q5_1;
}

void QZ_SYM(quant_repack_legacy_fill_avx512)(quant_panel_table tab)
{
    tab[CT_Q4_1] = &g_repack_q4_1;
    tab[CT_Q5_0] = &g_repack_q5_0;
    tab[CT_Q5_1] = &g_repack_q5_1;
}
#else
void QZ_SYM(quant_panel_legacy_fill_avx512)(quant_panel_table tab) { (void)tab; }
void QZ_SYM(quant_repack_legacy_fill_avx512)(quant_panel_table tab) { (void)tab; }
#endif
