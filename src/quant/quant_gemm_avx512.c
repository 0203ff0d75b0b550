/* AVX-512 (F/BW/VL, with or without VNNI) multi-row dots for prefill: each weight block is unpacked
 * (nibbles -> bytes, scales -> int16 lanes) once and then dotted with up to
 * QUANT_NR_MAX_A activation rows (Q8_0 also takes two weight rows at once, so each activation
 * block is loaded once for both; its scale products are formed as vectors, which rounds
 * them exactly as the scalar ones). Per (weight row, activation row) pair the integer sums,
 * the per-block f32 multiply-adds and the final reduction follow the single-row kernels
 * of quant_dot_avx512.c step for step, so the results are bit-identical to them. */
#include "quant/quant_impl.h"
#include "quant/quant_target.h"
#include "quant/quant_avx512_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

QUANT_TARGET_BEGIN(QZ_TARGET)

#define NR_INLINE static inline __attribute__((always_inline))

NR_INLINE __m512i g_load2(const void *lo, const void *hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

NR_INLINE float g_hsum256(__m256 v)
{
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

NR_INLINE __m512i g_index16(int group)
{
    short idx[32];
    for (int i = 0; i < 32; i++) idx[i] = (short)(i / group);
    return _mm512_loadu_si512(idx);
}

/* ---- Q8_0 x Q8_0 ---- */

/* One weight block pair, unpacked: |w| and the sign mask. */
typedef struct { __m512i ax; __mmask64 neg; __m512 wd; } g_q8_pair;

/* [f16 bits of block 0 x 8, of block 1 x 8] widened: the pair's scales as 2 x 8 f32 lanes */
NR_INLINE __m512 g_q8_scales(const blk_q8_0 *b)
{
    return _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16((short)b[1].d), _mm_set1_epi16((short)b[0].d)));
}

NR_INLINE g_q8_pair g_q8_unpack(const blk_q8_0 *w)
{
    __m512i x = g_load2(w[0].qs, w[1].qs);
    g_q8_pair p = {_mm512_abs_epi8(x), _mm512_movepi8_mask(x), g_q8_scales(w)};
    return p;
}

/* The lane products wd * ad are the single-row kernel's scalar d0 / d1, rounded the same. */
NR_INLINE __m512 g_q8_pair_dot(const g_q8_pair *wp, const blk_q8_0 *a, __m512 ad, __m512 acc)
{
    __m512i y = g_load2(a[0].qs, a[1].qs);
    __m512i ys = _mm512_mask_sub_epi8(y, wp->neg, _mm512_setzero_si512(), y);
    __m512i p = qz_dpbusd(_mm512_setzero_si512(), wp->ax, ys);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(wp->wd, ad), acc);
}

/* The single-row kernel's last odd block: one 256-bit block, reduced on its own. */
NR_INLINE float g_q8_tail(const blk_q8_0 *w, const blk_q8_0 *a)
{
    __m256i x = _mm256_loadu_si256((const __m256i *)w->qs), y = _mm256_loadu_si256((const __m256i *)a->qs);
    __m256i p = qz_dpbusd256(_mm256_setzero_si256(), _mm256_abs_epi8(x), _mm256_sign_epi8(y, x));
    float d = _cvtsh_ss(w->d) * _cvtsh_ss(a->d);
    return g_hsum256(_mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d), _mm256_setzero_ps()));
}

/* NW weight rows at once: each activation block pair is loaded once for both. */
NR_INLINE void g_q8_0_rows(int64_t n, float *s, size_t ss, const blk_q8_0 *w0, size_t ws, const char *a, size_t as,
                           const int NW, const int NA)
{
    int64_t nb = n / QK, i = 0;
    __m512 acc0[2][QUANT_NR_MAX_A], acc1[2][QUANT_NR_MAX_A];
    const blk_q8_0 *w[2] = {w0, (const blk_q8_0 *)((const char *)w0 + (NW > 1 ? ws : 0))};
#pragma GCC unroll 8
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 8
        for (int j = 0; j < NA; j++) acc0[r][j] = acc1[r][j] = _mm512_setzero_ps();
    for (; i + 3 < nb; i += 4) {
        g_q8_pair p0[2], p1[2];
#pragma GCC unroll 2
        for (int r = 0; r < NW; r++) p0[r] = g_q8_unpack(w[r] + i), p1[r] = g_q8_unpack(w[r] + i + 2);
#pragma GCC unroll 8
        for (int j = 0; j < NA; j++) {
            const blk_q8_0 *aj = (const blk_q8_0 *)(a + (size_t)j * as) + i;
            __m512 ad0 = g_q8_scales(aj), ad1 = g_q8_scales(aj + 2);
#pragma GCC unroll 2
            for (int r = 0; r < NW; r++) {
                acc0[r][j] = g_q8_pair_dot(&p0[r], aj, ad0, acc0[r][j]);
                acc1[r][j] = g_q8_pair_dot(&p1[r], aj + 2, ad1, acc1[r][j]);
            }
        }
    }
    if (i + 1 < nb) {
#pragma GCC unroll 2
        for (int r = 0; r < NW; r++) {
            g_q8_pair p0 = g_q8_unpack(w[r] + i);
#pragma GCC unroll 8
            for (int j = 0; j < NA; j++) {
                const blk_q8_0 *aj = (const blk_q8_0 *)(a + (size_t)j * as) + i;
                acc0[r][j] = g_q8_pair_dot(&p0, aj, g_q8_scales(aj), acc0[r][j]);
            }
        }
        i += 2;
    }
#pragma GCC unroll 2
    for (int r = 0; r < NW; r++)
#pragma GCC unroll 8
        for (int j = 0; j < NA; j++) {
            const blk_q8_0 *aj = (const blk_q8_0 *)(a + (size_t)j * as);
            float tail = i < nb ? g_q8_tail(w[r] + i, aj + i) : 0.f;
            s[(size_t)j * ss + r] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[r][j], acc1[r][j])) + tail;
        }
}

static void g_nr_q8_0(int64_t n, float *s, size_t ss, const void *vw, size_t ws, int nw, const void *va, size_t as,
                      int na)
{
    for (int r = 0; r < nw; r += 2) {
        const blk_q8_0 *w = (const blk_q8_0 *)((const char *)vw + (size_t)r * ws);
        const char *a = va;
        float *sr = s + r;
        if (nw - r >= 2) {
            switch (na) {
            case 1: g_q8_0_rows(n, sr, ss, w, ws, a, as, 2, 1); break;
            case 2: g_q8_0_rows(n, sr, ss, w, ws, a, as, 2, 2); break;
            case 3: g_q8_0_rows(n, sr, ss, w, ws, a, as, 2, 3); break;
            default: g_q8_0_rows(n, sr, ss, w, ws, a, as, 2, 4); break;
            }
        } else {
            switch (na) {
            case 1: g_q8_0_rows(n, sr, ss, w, ws, a, as, 1, 1); break;
            case 2: g_q8_0_rows(n, sr, ss, w, ws, a, as, 1, 2); break;
            case 3: g_q8_0_rows(n, sr, ss, w, ws, a, as, 1, 3); break;
            default: g_q8_0_rows(n, sr, ss, w, ws, a, as, 1, 4); break;
            }
        }
    }
}

/* ---- Q4_K x Q8_K ---- */

NR_INLINE void g_q4_k_rows(int64_t n, float *s, size_t ss, const blk_q4_k *w, const char *a, size_t as, const int NA)
{
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const __m512i idx0 = g_index16(16);
    __m512 acc[QUANT_NR_MAX_A];
    __m256 accm[QUANT_NR_MAX_A];
#pragma GCC unroll 8
    for (int j = 0; j < NA; j++) acc[j] = _mm512_setzero_ps(), accm[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QKK; i++, w++) {
        uint8_t sm[16];
        quant_k4_unpack(w->scales, sm);
        __m256i sm16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sm));
        __m128i mins16 = _mm256_extracti128_si256(sm16, 1);
        __m256i md = _mm256_set_m128i(_mm_unpackhi_epi16(mins16, mins16), _mm_unpacklo_epi16(mins16, mins16));
        __m512i sc = _mm512_castsi256_si512(sm16);
        __m512i wq[4], sv[4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i q = _mm512_loadu_si512(w->qs + 64 * h);
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            wq[2 * h] = _mm512_shuffle_i64x2(lo, hi, 0x44);
            wq[2 * h + 1] = _mm512_shuffle_i64x2(lo, hi, 0xEE);
            sv[2 * h] = _mm512_permutexvar_epi16(_mm512_add_epi16(idx0, _mm512_set1_epi16((short)(4 * h))), sc);
            sv[2 * h + 1] = _mm512_permutexvar_epi16(_mm512_add_epi16(idx0, _mm512_set1_epi16((short)(4 * h + 2))), sc);
        }
        float wd = _cvtsh_ss(w->d), wdm = _cvtsh_ss(w->dmin);
#pragma GCC unroll 8
        for (int j = 0; j < NA; j++) {
            const blk_q8_k *aj = (const blk_q8_k *)(a + (size_t)j * as) + i;
            __m256i msum = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)aj->bsums), md);
            __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i p0 = _mm512_maddubs_epi16(wq[2 * h], _mm512_loadu_si512(aj->qs + 128 * h));
                __m512i p1 = _mm512_maddubs_epi16(wq[2 * h + 1], _mm512_loadu_si512(aj->qs + 128 * h + 64));
                isum = qz_dpwssd(isum, p0, sv[2 * h]);
                isum = qz_dpwssd(isum, p1, sv[2 * h + 1]);
            }
            float d = aj->d * wd, dm = aj->d * wdm;
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc[j]);
            accm[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dm), accm[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NA; j++) s[(size_t)j * ss] = _mm512_reduce_add_ps(acc[j]) - g_hsum256(accm[j]);
}

/* ---- Q6_K x Q8_K ---- */

NR_INLINE void g_q6_k_rows(int64_t n, float *s, size_t ss, const blk_q6_k *w, const char *a, size_t as, const int NA)
{
    const __m512i m4 = _mm512_set1_epi8(0xF), m3 = _mm512_set1_epi8(3);
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    const __m512i gidx = g_index16(8);
    __m512 acc[QUANT_NR_MAX_A];
    __m256 acco[QUANT_NR_MAX_A];
#pragma GCC unroll 8
    for (int j = 0; j < NA; j++) acc[j] = _mm512_setzero_ps(), acco[j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QKK; i++, w++) {
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        __m512i S = _mm512_castsi256_si512(sc16);
        __m512i wq[4], sv[4];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m512i L = _mm512_loadu_si512(w->ql + 64 * h);
            __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * h)));
            __m512i hl = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, sh_lo), m3), 4);
            __m512i hh = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, sh_hi), m3), 4);
            wq[2 * h] = _mm512_or_si512(_mm512_and_si512(L, m4), hl);
            wq[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), hh);
            sv[2 * h] = _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((short)(8 * h))), S);
            sv[2 * h + 1] = _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((short)(8 * h + 4))), S);
        }
        float wd = _cvtsh_ss(w->d);
#pragma GCC unroll 8
        for (int j = 0; j < NA; j++) {
            const blk_q8_k *aj = (const blk_q8_k *)(a + (size_t)j * as) + i;
            __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)aj->bsums), sc16);
            __m512i isum = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m512i p0 = _mm512_maddubs_epi16(wq[2 * h], _mm512_loadu_si512(aj->qs + 128 * h));
                __m512i p1 = _mm512_maddubs_epi16(wq[2 * h + 1], _mm512_loadu_si512(aj->qs + 128 * h + 64));
                isum = qz_dpwssd(isum, p0, sv[2 * h]);
                isum = qz_dpwssd(isum, p1, sv[2 * h + 1]);
            }
            float d = aj->d * wd;
            acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc[j]);
            acco[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(off), _mm256_set1_ps(32.f * d), acco[j]);
        }
    }
#pragma GCC unroll 8
    for (int j = 0; j < NA; j++) s[(size_t)j * ss] = _mm512_reduce_add_ps(acc[j]) - g_hsum256(acco[j]);
}

/* One entry point per type: weight rows one after the other (each weight block is
 * unpacked once per call and row), the activation count as a compile-time constant so
 * the accumulators stay in registers. */
#define NR_ENTRY(name, body, wtype)                                                                                  \
    static void name(int64_t n, float *s, size_t ss, const void *vw, size_t ws, int nw, const void *va, size_t as,   \
                     int na)                                                                                         \
    {                                                                                                                \
        for (int r = 0; r < nw; r++) {                                                                               \
            const wtype *w = (const wtype *)((const char *)vw + (size_t)r * ws);                                     \
            float *sr = s + r;                                                                                       \
            const char *a = va;                                                                                      \
            switch (na) {                                                                                            \
            case 1: body(n, sr, ss, w, a, as, 1); break;                                                             \
            case 2: body(n, sr, ss, w, a, as, 2); break;                                                             \
            case 3: body(n, sr, ss, w, a, as, 3); break;                                                             \
            default: body(n, sr, ss, w, a, as, 4); break;                                                            \
            }                                                                                                        \
        }                                                                                                            \
    }

static_assert(QUANT_NR_MAX_A == 4, "NR_ENTRY's switch covers 1..4 activation rows");
NR_ENTRY(g_nr_q4_k, g_q4_k_rows, blk_q4_k)
NR_ENTRY(g_nr_q6_k, g_q6_k_rows, blk_q6_k)

QUANT_TARGET_END

void QZ_SYM(quant_nr_fill_avx512)(quant_nr_table tab)
{
    tab[CT_Q8_0] = g_nr_q8_0;
    tab[CT_Q4_K] = g_nr_q4_k;
    tab[CT_Q6_K] = g_nr_q6_k;
}
#else
void QZ_SYM(quant_nr_fill_avx512)(quant_nr_table tab) { (void)tab; }
#endif
