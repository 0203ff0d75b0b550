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
#include "backends/cpu/simd_vocab_avx2.h"
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
#undef HSUM
#include "backends/cpu/simd_vocab_undef.h"

/* ---- AVX-512: 16 lanes. Bitwise float ops go through the integer forms so
 * nothing here needs AVX512DQ. ---- */
#define EWS(name) ews_##name##_avx512
#define EWS_FN static inline __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#include "backends/cpu/simd_vocab_avx512.h"
#define HSUM _mm512_reduce_add_ps

#include "backends/cpu/elementwise_simd.h"

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
