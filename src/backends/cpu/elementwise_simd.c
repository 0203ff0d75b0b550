/* The f32 row kernel tables: portable C, AVX2+FMA and AVX-512. The vector
 * versions share one body (elementwise_simd.h) and are only handed out when
 * cpu_simd_level() reports the instruction set. */
#include <stdint.h>

#include "backends/cpu/elementwise.h"

static void ew_portable_vv(ct_op_kind k, float *d, const float *a, const float *b, int64_t n, bool stream)
{
    (void)stream;
    switch (k) {
    case CT_OP_ADD: for (int64_t i = 0; i < n; i++) d[i] = a[i] + b[i]; break;
    case CT_OP_SUB: for (int64_t i = 0; i < n; i++) d[i] = a[i] - b[i]; break;
    case CT_OP_MUL: for (int64_t i = 0; i < n; i++) d[i] = a[i] * b[i]; break;
    case CT_OP_DIV: for (int64_t i = 0; i < n; i++) d[i] = a[i] / b[i]; break;
    case CT_OP_SWIGLU:
    case CT_OP_GEGLU: for (int64_t i = 0; i < n; i++) d[i] = ew_gate_f(k, a[i]) * b[i]; break;
    default: for (int64_t i = 0; i < n; i++) d[i] = ew_binary_f(k, a[i], b[i]); break;
    }
}

static void ew_portable_vs(ct_op_kind k, float *d, const float *a, float s, bool rev, int64_t n, bool stream)
{
    (void)stream;
    switch (k) {
    case CT_OP_ADD: for (int64_t i = 0; i < n; i++) d[i] = a[i] + s; break;
    case CT_OP_MUL: for (int64_t i = 0; i < n; i++) d[i] = a[i] * s; break;
    default:
        if (rev)
            for (int64_t i = 0; i < n; i++) d[i] = ew_binary_f(k, s, a[i]);
        else
            for (int64_t i = 0; i < n; i++) d[i] = ew_binary_f(k, a[i], s);
        break;
    }
}

static void ew_portable_unary(ct_op_kind k, float *d, const float *a, int64_t n, float p0, float p1, bool stream)
{
    (void)stream;
    for (int64_t i = 0; i < n; i++) d[i] = ew_unary_f(k, a[i], p0, p1);
}

static float ew_portable_max(const float *a, int64_t n)
{
    float m = -INFINITY;
    for (int64_t i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
    return m;
}

static double ew_portable_exp_sum(float *d, const float *a, float m, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        float e = expf(a[i] - m);
        if (d) d[i] = e;
        sum += e;
    }
    return sum;
}

static const ew_f32_kernels ew_tab_portable = {ew_portable_vv, ew_portable_vs, ew_portable_unary, ew_portable_max,
                                               ew_portable_exp_sum};

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* ---- AVX2 + FMA: 8 lanes ---- */
#define EWS(name) ews_##name##_avx2
#define EWS_FN static inline __attribute__((target("avx2,fma")))
#define W 8
#define V __m256
#define VI __m256i
#define LD _mm256_loadu_ps
#define ST _mm256_storeu_ps
#define STNT _mm256_stream_ps
#define SET1 _mm256_set1_ps
#define ZERO _mm256_setzero_ps
#define ADD _mm256_add_ps
#define SUB _mm256_sub_ps
#define MUL _mm256_mul_ps
#define DIV _mm256_div_ps
#define MAXV _mm256_max_ps
#define MINV _mm256_min_ps
#define FMA _mm256_fmadd_ps
#define FNMA _mm256_fnmadd_ps
#define FMS _mm256_fmsub_ps
#define SQRT _mm256_sqrt_ps
#define ANDV _mm256_and_ps
#define ANDNOTV _mm256_andnot_ps
#define XORV _mm256_xor_ps
#define ROUND(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define CVTI _mm256_cvtps_epi32
#define IADD _mm256_add_epi32
#define ISUB _mm256_sub_epi32
#define ISRAI _mm256_srai_epi32
#define ISLLI _mm256_slli_epi32
#define ISET1 _mm256_set1_epi32
#define ITOF _mm256_castsi256_ps
#define SEL_LT(a, b, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (b), _CMP_LT_OQ))
#define SEL_UNORD(a, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (a), _CMP_UNORD_Q))
#define HSUM ews_hsum_avx2

EWS_FN float ews_hsum_avx2(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

#include "backends/cpu/elementwise_simd.h"

static const ew_f32_kernels ew_tab_avx2 = {ews_vv_avx2, ews_vs_avx2, ews_unary_avx2, ews_max_avx2, ews_exp_sum_avx2};

#undef EWS
#undef EWS_FN
#undef W
#undef V
#undef VI
#undef LD
#undef ST
#undef STNT
#undef SET1
#undef ZERO
#undef ADD
#undef SUB
#undef MUL
#undef DIV
#undef MAXV
#undef MINV
#undef FMA
#undef FNMA
#undef FMS
#undef SQRT
#undef ANDV
#undef ANDNOTV
#undef XORV
#undef ROUND
#undef CVTI
#undef IADD
#undef ISUB
#undef ISRAI
#undef ISLLI
#undef ISET1
#undef ITOF
#undef SEL_LT
#undef SEL_UNORD
#undef HSUM

/* ---- AVX-512: 16 lanes. Bitwise float ops go through the integer forms so
 * nothing here needs AVX512DQ. ---- */
#define EWS(name) ews_##name##_avx512
#define EWS_FN static inline __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define W 16
#define V __m512
#define VI __m512i
#define LD _mm512_loadu_ps
#define ST _mm512_storeu_ps
#define STNT _mm512_stream_ps
#define SET1 _mm512_set1_ps
#define ZERO _mm512_setzero_ps
#define ADD _mm512_add_ps
#define SUB _mm512_sub_ps
#define MUL _mm512_mul_ps
#define DIV _mm512_div_ps
#define MAXV _mm512_max_ps
#define MINV _mm512_min_ps
#define FMA _mm512_fmadd_ps
#define FNMA _mm512_fnmadd_ps
#define FMS _mm512_fmsub_ps
#define SQRT _mm512_sqrt_ps
#define EWS_BITS(op, a, b) _mm512_castsi512_ps(op(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define ANDV(a, b) EWS_BITS(_mm512_and_si512, a, b)
#define ANDNOTV(a, b) EWS_BITS(_mm512_andnot_si512, a, b)
#define XORV(a, b) EWS_BITS(_mm512_xor_si512, a, b)
#define ROUND(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define CVTI _mm512_cvtps_epi32
#define IADD _mm512_add_epi32
#define ISUB _mm512_sub_epi32
#define ISRAI _mm512_srai_epi32
#define ISLLI _mm512_slli_epi32
#define ISET1 _mm512_set1_epi32
#define ITOF _mm512_castsi512_ps
#define SEL_LT(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ), (y), (x))
#define SEL_UNORD(a, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (a), _CMP_UNORD_Q), (y), (x))
#define HSUM _mm512_reduce_add_ps
#define EWS_SCALEF _mm512_scalef_ps

#include "backends/cpu/elementwise_simd.h"

#undef EWS_SCALEF

static const ew_f32_kernels ew_tab_avx512 = {ews_vv_avx512, ews_vs_avx512, ews_unary_avx512, ews_max_avx512,
                                             ews_exp_sum_avx512};
#endif

const ew_f32_kernels *ew_f32_table(cpu_simd level)
{
    cpu_simd hw = cpu_simd_level();
    if (level > hw) level = hw;
#if defined(__x86_64__) || defined(__i386__)
    if (level == CPU_SIMD_AVX512) return &ew_tab_avx512;
    if (level == CPU_SIMD_AVX2) return &ew_tab_avx2;
#endif
    return &ew_tab_portable;
}
