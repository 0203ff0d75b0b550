/* Internal to src/quant: which of the two AVX-512 levels a 512-bit kernel file is being
 * compiled for. Every AVX-512 kernel file is built twice: as itself for the avx512+vnni
 * level (QZ_VNNI 1, the default), and through a *_novnni.c wrapper that sets QZ_VNNI 0
 * first, for the avx512 level (F/BW/VL/DQ without AVX512-VNNI: Skylake-SP and Cascade
 * Lake servers without VNNI, the GPU machine's Xeon). The kernels call the dot primitives
 * below instead of vpdpbusd / vpdpwssd, so both builds share every line of kernel code.
 *
 * Without VNNI, vpdpbusd (u8 x s8, four products summed into an int32 lane) becomes
 * vpmaddubsw (pairs to int16, saturating) + vpmaddwd by ones + vpaddd. That is exact while
 * a pair of products stays inside int16: 2 * 128 * 127 < 2^15 holds for every caller of
 * qz_dpbusd (unsigned operands at most 128: |q8| in the Q8_0 dots, at most 63 in every
 * panel; signed operands activations from quant_quantize_row, in [-127, 127]). Q8_0
 * panels store q + 128, up to 255: they use qz_dpbusd_u8, which splits the byte into
 * its top bit and the rest so that each half keeps that bound. The panels' inner loops
 * take two weight vectors at a time through qz_dpbusd_x2, which without VNNI adds the two
 * vpmaddubsw results in int16 first (bound below). vpdpwssd is vpmaddwd + vpaddd, exact
 * with no bound (no caller multiplies two -32768 pairs). */
#ifndef CT_QUANT_AVX512_ISA_H
#define CT_QUANT_AVX512_ISA_H

#ifndef QZ_VNNI
#define QZ_VNNI 1
#endif

#if QZ_VNNI
#define QZ_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni"
#define QZ_SYM(name) name
#else
#define QZ_TARGET "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq"
#define QZ_SYM(name) name##_novnni
#endif

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "quant/quant_target.h"

QUANT_TARGET_BEGIN(QZ_TARGET)

#define QZ_INLINE static inline __attribute__((always_inline))

/* acc + the four-product sums of u (unsigned, at most 128) and s (signed, in [-127, 127]). */
QZ_INLINE __m512i qz_dpbusd(__m512i acc, __m512i u, __m512i s)
{
#if QZ_VNNI
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#endif
}

/* The same for any unsigned byte u (0..255). */
QZ_INLINE __m512i qz_dpbusd_u8(__m512i acc, __m512i u, __m512i s)
{
#if QZ_VNNI
    return _mm512_dpbusd_epi32(acc, u, s);
#else
    const __m512i top = _mm512_set1_epi8((char)0x80);
    acc = qz_dpbusd(acc, _mm512_andnot_si512(top, u), s);
    return qz_dpbusd(acc, _mm512_and_si512(top, u), s);
#endif
}

/* *acc0 + the four-product sums of (u0, s0) and *acc1 + those of (u1, s1), for unsigned
 * operands at most 63 (every panel but Q8_0's q + 128). Without VNNI the two vpmaddubsw
 * results are added in int16 before one vpmaddwd and one vpaddd serve both (4 * 63 * 127
 * = 32004 < 2^15, so no pair sum saturates): 5 instructions for 2 vectors instead of 6;
 * everything goes to *acc0 then and *acc1 is left as it was. With VNNI the two
 * accumulators stay separate chains, as two vpdpbusd in flight need. */
QZ_INLINE void qz_dpbusd_x2(__m512i *acc0, __m512i *acc1, __m512i u0, __m512i s0, __m512i u1, __m512i s1)
{
#if QZ_VNNI
    *acc0 = _mm512_dpbusd_epi32(*acc0, u0, s0);
    *acc1 = _mm512_dpbusd_epi32(*acc1, u1, s1);
#else
    (void)acc1;
    __m512i p = _mm512_add_epi16(_mm512_maddubs_epi16(u0, s0), _mm512_maddubs_epi16(u1, s1));
    *acc0 = _mm512_add_epi32(*acc0, _mm512_madd_epi16(p, _mm512_set1_epi16(1)));
#endif
}

QZ_INLINE __m256i qz_dpbusd256(__m256i acc, __m256i u, __m256i s)
{
#if QZ_VNNI
    return _mm256_dpbusd_epi32(acc, u, s);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* acc + the pair sums of int16 products of a and b. */
QZ_INLINE __m512i qz_dpwssd(__m512i acc, __m512i a, __m512i b)
{
#if QZ_VNNI
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

QUANT_TARGET_END
#endif

#endif
