/* AVX-512 (F/BW/VL, with or without VNNI: quant_avx512_isa.h) vec dots: 512-bit kernels
 * for the formats that carry LLM decode (Q8_0, Q4_K, Q6_K), the 256-bit kernels of
 * quant_dot_x86.inc (with the EVEX vpdpbusd where there is VNNI) for the others. Only the
 * kernels carry the target; the table fill stays generic. */
#include "quant/quant_impl.h"
#include "quant/quant_target.h"
#include "quant/quant_avx512_isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

QUANT_TARGET_BEGIN(QZ_TARGET)
#define QD(name) avx512_##name
#if QZ_VNNI
#define QD_VNNI 2
#else
#define QD_VNNI 0
#endif
#include "quant_dot_x86.inc"

/* Decode streams weight rows from memory faster than the hardware prefetchers run ahead
 * of one core: fetch a fixed distance ahead (rows a thread handles are adjacent, so
 * running past a row's end fetches the next one). */
static inline void z_prefetch(const void *p, int lines)
{
    for (int l = 0; l < lines; l++) _mm_prefetch((const char *)p + 2048 + 64 * l, _MM_HINT_T0);
}

static inline __m512i z_load2(const void *lo, const void *hi)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)lo)),
                              _mm256_loadu_si256((const __m256i *)hi), 1);
}

/* Two Q8_0 blocks per register: |w| . (a negated where w < 0) through vpdpbusd. */
static inline __m512 z_q8_0_pair(const blk_q8_0 *w, const blk_q8_0 *a, __m512 acc)
{
    __m512i x = z_load2(w[0].qs, w[1].qs), y = z_load2(a[0].qs, a[1].qs);
    __m512i ys = _mm512_mask_sub_epi8(y, _mm512_movepi8_mask(x), _mm512_setzero_si512(), y);
    __m512i p = qz_dpbusd(_mm512_setzero_si512(), _mm512_abs_epi8(x), ys);
    float d0 = _cvtsh_ss(w[0].d) * _cvtsh_ss(a[0].d), d1 = _cvtsh_ss(w[1].d) * _cvtsh_ss(a[1].d);
    __m512 dv = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), dv, acc);
}

static void z_dot_q8_0(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q8_0 *w = vw, *a = va;
    int64_t nb = n / QK, i = 0;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 3 < nb; i += 4) {
        acc0 = z_q8_0_pair(w + i, a + i, acc0);
        acc1 = z_q8_0_pair(w + i + 2, a + i + 2, acc1);
    }
    if (i + 1 < nb) {
        acc0 = z_q8_0_pair(w + i, a + i, acc0);
        i += 2;
    }
    float tail = 0.f;
    if (i < nb) avx512_dot_q8_0(QK, &tail, w + i, a + i);
    *s = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + tail;
}

/* int16 lane i -> i / group: spreads consecutive scales over groups of lanes. */
static inline __m512i z_index16(int group)
{
    short idx[32];
    for (int i = 0; i < 32; i++) idx[i] = (short)(i / group);
    return _mm512_loadu_si512(idx);
}

static void z_dot_q4_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q4_k *w = vw;
    const blk_q8_k *a = va;
    const __m512i m4 = _mm512_set1_epi8(0xF);
    const __m512i idx0 = z_index16(16);
    __m512 acc = _mm512_setzero_ps();
    __m256 accm = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QKK; i++, w++, a++) {
        z_prefetch(w, 3);
        uint8_t sm[16];
        quant_k4_unpack(w->scales, sm);
        __m256i sm16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)sm));
        __m256i msum = avx512_k4_minsum(_mm256_extracti128_si256(sm16, 1), a->bsums);
        __m512i sc = _mm512_castsi256_si512(sm16);
        __m512i isum = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i q = _mm512_loadu_si512(w->qs + 64 * h);
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            /* [groups 4h, 4h+1] and [4h+2, 4h+3] in element order */
            __m512i w0 = _mm512_shuffle_i64x2(lo, hi, 0x44), w1 = _mm512_shuffle_i64x2(lo, hi, 0xEE);
            __m512i p0 = _mm512_maddubs_epi16(w0, _mm512_loadu_si512(a->qs + 128 * h));
            __m512i p1 = _mm512_maddubs_epi16(w1, _mm512_loadu_si512(a->qs + 128 * h + 64));
            /* idx0 + 2g: lanes 0-15 pick scale 2g, lanes 16-31 scale 2g+1 */
            __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(idx0, _mm512_set1_epi16((short)(4 * h))), sc);
            __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(idx0, _mm512_set1_epi16((short)(4 * h + 2))), sc);
            isum = qz_dpwssd(isum, p0, s0);
            isum = qz_dpwssd(isum, p1, s1);
        }
        float d = a->d * _cvtsh_ss(w->d), dm = a->d * _cvtsh_ss(w->dmin);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
        accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(msum), _mm256_set1_ps(dm), accm);
    }
    *s = _mm512_reduce_add_ps(acc) - avx512_hsum(accm);
}

static void z_dot_q6_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q6_k *w = vw;
    const blk_q8_k *a = va;
    const __m512i m4 = _mm512_set1_epi8(0xF), m3 = _mm512_set1_epi8(3);
    /* qh shifts per 256-bit half: low nibbles take bits 0-1 / 2-3, high nibbles 4-5 / 6-7 */
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    /* int16 lane i -> scale group i / 8 (four groups of 16 elements per 64) */
    const __m512i gidx = z_index16(8);
    __m512 acc = _mm512_setzero_ps();
    __m256 acco = _mm256_setzero_ps();
    for (int64_t i = 0; i < n / QKK; i++, w++, a++) {
        z_prefetch(w, 4);
        __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)w->scales));
        __m256i off = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)a->bsums), sc16);
        __m512i S = _mm512_castsi256_si512(sc16);
        __m512i isum = _mm512_setzero_si512();
        for (int h = 0; h < 2; h++) {
            __m512i L = _mm512_loadu_si512(w->ql + 64 * h);
            __m512i H = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(w->qh + 32 * h)));
            __m512i hl = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, sh_lo), m3), 4);
            __m512i hh = _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(H, sh_hi), m3), 4);
            __m512i q0 = _mm512_or_si512(_mm512_and_si512(L, m4), hl);
            __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(L, 4), m4), hh);
            __m512i p0 = _mm512_maddubs_epi16(q0, _mm512_loadu_si512(a->qs + 128 * h));
            __m512i p1 = _mm512_maddubs_epi16(q1, _mm512_loadu_si512(a->qs + 128 * h + 64));
            __m512i s0 = _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((short)(8 * h))), S);
            __m512i s1 = _mm512_permutexvar_epi16(_mm512_add_epi16(gidx, _mm512_set1_epi16((short)(8 * h + 4))), S);
            isum = qz_dpwssd(isum, p0, s0);
            isum = qz_dpwssd(isum, p1, s1);
        }
        float d = a->d * _cvtsh_ss(w->d);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d), acc);
        /* the -32 offset of every quant, through the activation's group sums */
        acco = _mm256_fmadd_ps(_mm256_cvtepi32_ps(off), _mm256_set1_ps(32.f * d), acco);
    }
    *s = _mm512_reduce_add_ps(acc) - avx512_hsum(acco);
}
QUANT_TARGET_END

void QZ_SYM(quant_dot_fill_avx512)(quant_dot_table tab)
{
    tab[CT_Q4_0] = avx512_dot_q4_0;
    tab[CT_Q4_1] = avx512_dot_q4_1;
    tab[CT_Q5_0] = avx512_dot_q5_0;
    tab[CT_Q5_1] = avx512_dot_q5_1;
    tab[CT_Q8_1] = avx512_dot_q8_1;
    tab[CT_Q8_0] = z_dot_q8_0;
    tab[CT_Q2_K] = avx512_dot_q2_k;
    tab[CT_Q3_K] = avx512_dot_q3_k;
    tab[CT_Q4_K] = z_dot_q4_k;
    tab[CT_Q5_K] = avx512_dot_q5_k;
    tab[CT_Q6_K] = z_dot_q6_k;
    tab[CT_Q8_K] = avx512_dot_q8_k;
}
#else
void QZ_SYM(quant_dot_fill_avx512)(quant_dot_table tab) { (void)tab; }
#endif
