/* AVX2 vec dots: the shared 256-bit kernels of quant_dot_x86.inc built for AVX2. Only the
 * kernels carry the target; the table fill stays generic, since it runs on every CPU. */
#include "quant/quant_impl.h"
#include "quant/quant_target.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <math.h>

QUANT_TARGET_BEGIN("avx2,fma,f16c")
#define QD(name) avx2_##name
#define QD_VNNI 0
#include "quant_dot_x86.inc"
/* ---- activation quantizers: the same bytes as quant_ref_q8_0 / q8_1 / q8_k ---- */

/* 4 x 8 int32 (elements 0-31) -> 32 int8 in element order (values already in range). */
static inline __m256i act_pack(__m256i a, __m256i b, __m256i c, __m256i d)
{
    __m256i r = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
    return _mm256_permutevar8x32_epi32(r, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

static inline float act_hmax(__m256 v)
{
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

/* roundf (half away from zero) of 8 floats: trunc, then one more step where the exact
 * remainder reaches a half. */
static inline __m256i act_roundf(__m256 v)
{
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 fr = _mm256_sub_ps(v, t);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 half = _mm256_cmp_ps(_mm256_andnot_ps(sign, fr), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    __m256 one = _mm256_or_ps(_mm256_and_ps(v, sign), _mm256_set1_ps(1.0f));
    return _mm256_cvttps_epi32(_mm256_add_ps(t, _mm256_and_ps(half, one)));
}

/* Q8_0/Q8_1 block: the int8 quants; returns d (amax / 127, before f16 rounding). */
static inline float act_q8_32(const float *x, int8_t *qs)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 v[4], m = _mm256_setzero_ps();
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        m = _mm256_max_ps(m, _mm256_andnot_ps(sign, v[k]));
    }
    float d = act_hmax(m) / 127, id = d != 0.f ? 1.0f / d : 0.0f;
    __m256 idv = _mm256_set1_ps(id);
    __m256i q[4];
    for (int k = 0; k < 4; k++) q[k] = act_roundf(_mm256_mul_ps(v[k], idv));
    _mm256_storeu_si256((__m256i *)qs, act_pack(q[0], q[1], q[2], q[3]));
    return d;
}

static void avx2_act_q8_0(const float *x, void *dst, int64_t nb)
{
    blk_q8_0 *y = dst;
    for (int64_t i = 0; i < nb; i++, x += QK) y[i].d = qh16(act_q8_32(x, y[i].qs));
}

static void avx2_act_q8_1(const float *x, void *dst, int64_t nb)
{
    blk_q8_1 *y = dst;
    for (int64_t i = 0; i < nb; i++, x += QK) {
        float d = act_q8_32(x, y[i].qs);
        y[i].d = qh16(d);
        int sum = 0;
        for (int j = 0; j < QK; j++) sum += y[i].qs[j];
        y[i].s = qh16((float)sum * d);
    }
}

static void avx2_act_q8_k(const float *x, void *dst, int64_t nb)
{
    blk_q8_k *y = dst;
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t i = 0; i < nb; i++, y++, x += QKK) {
        __m256 m = _mm256_setzero_ps();
        for (int k = 0; k < 32; k++) m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8 * k)));
        float amax = act_hmax(m);
        /* the reference scales by the first value of largest magnitude, sign included */
        int j0 = 0;
        while (j0 < QKK && !(fabsf(x[j0]) == amax)) j0++;
        if (amax == 0.f || j0 == QKK) { /* zeros, or NaNs that hid the maximum */
            quant_ref_q8_k(x, y, 1);
            continue;
        }
        float iscale = -127.f / x[j0];
        __m256 isv = _mm256_set1_ps(iscale);
        for (int c = 0; c < 8; c++) {
            __m256i q[4];
            for (int k = 0; k < 4; k++) {
                /* cvtps rounds to nearest even, as nearest_int's magic-number trick */
                q[k] = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + 32 * c + 8 * k), isv));
                q[k] = _mm256_min_epi32(q[k], _mm256_set1_epi32(127));
            }
            _mm256_storeu_si256((__m256i *)(y->qs + 32 * c), act_pack(q[0], q[1], q[2], q[3]));
            /* group sums: groups 2c (q0 + q1) and 2c+1 (q2 + q3) */
            __m256i g = _mm256_hadd_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            g = _mm256_hadd_epi32(g, g);
            __m128i g2 = _mm_add_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
            int32_t t[4];
            _mm_storeu_si128((__m128i *)t, g2);
            y->bsums[2 * c] = (int16_t)t[0];
            y->bsums[2 * c + 1] = (int16_t)t[1];
        }
        y->d = 1 / iscale;
    }
}
QUANT_TARGET_END

void quant_dot_fill_avx2(quant_dot_table tab)
{
    tab[CT_Q4_0] = avx2_dot_q4_0;
    tab[CT_Q4_1] = avx2_dot_q4_1;
    tab[CT_Q5_0] = avx2_dot_q5_0;
    tab[CT_Q5_1] = avx2_dot_q5_1;
    tab[CT_Q8_1] = avx2_dot_q8_1;
    tab[CT_Q8_0] = avx2_dot_q8_0;
    tab[CT_Q2_K] = avx2_dot_q2_k;
    tab[CT_Q3_K] = avx2_dot_q3_k;
    tab[CT_Q4_K] = avx2_dot_q4_k;
    tab[CT_Q5_K] = avx2_dot_q5_k;
    tab[CT_Q6_K] = avx2_dot_q6_k;
    tab[CT_Q8_K] = avx2_dot_q8_k;
}

void quant_act_fill_avx2(quant_act_table tab)
{
    tab[CT_Q8_0] = avx2_act_q8_0;
    tab[CT_Q8_1] = avx2_act_q8_1;
    tab[CT_Q8_K] = avx2_act_q8_k;
}
#else
void quant_dot_fill_avx2(quant_dot_table tab) { (void)tab; }
void quant_act_fill_avx2(quant_act_table tab) { (void)tab; }
#endif
