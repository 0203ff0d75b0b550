/* Internal to src/quant: what the AVX2 and AVX-512 panel kernels share: a 16 x 16 byte
 * transpose (SSE2 only), with which the packers build their per-row side data (group
 * scales), and the decode kernels' software prefetch. Include only on
 * x86-64 GCC/Clang builds, inside the includer's target region. */
#ifndef CT_QUANT_X86_BYTES_H
#define CT_QUANT_X86_BYTES_H

#include <immintrin.h>

/* A decode kernel's software prefetch: into L2 where core_prefetch_l2 says so (Intel), else
 * into L1; l2 is read once per call, so the branch goes the same way on every line. */
#define QX_PREFETCH(p, l2) \
    ((l2) ? _mm_prefetch((const char *)(p), _MM_HINT_T1) : _mm_prefetch((const char *)(p), _MM_HINT_T0))

/* m[i] holds 16 bytes of row i; afterwards m[j] holds byte j of every row. */
static inline __attribute__((always_inline)) void qx_transpose16_bytes(__m128i m[16])
{
    __m128i t[16];
    for (int k = 0; k < 8; k++) t[k] = _mm_unpacklo_epi8(m[2 * k], m[2 * k + 1]), t[8 + k] = _mm_unpackhi_epi8(m[2 * k], m[2 * k + 1]);
    /* t[k]: bytes 0-7 of rows 2k, 2k+1 interleaved; t[8+k]: bytes 8-15 */
    for (int h = 0; h < 2; h++)
        for (int k = 0; k < 4; k++)
            m[8 * h + 2 * k] = _mm_unpacklo_epi16(t[8 * h + 2 * k], t[8 * h + 2 * k + 1]),
            m[8 * h + 2 * k + 1] = _mm_unpackhi_epi16(t[8 * h + 2 * k], t[8 * h + 2 * k + 1]);
    /* m[8h + 2k + e]: bytes 8h+4e .. 8h+4e+3 of rows 4k .. 4k+3 */
    for (int h = 0; h < 2; h++)
        for (int e = 0; e < 2; e++)
            for (int k = 0; k < 2; k++) {
                __m128i a = m[8 * h + 4 * k + e], b = m[8 * h + 4 * k + 2 + e];
                t[8 * h + 4 * e + 2 * k] = _mm_unpacklo_epi32(a, b), t[8 * h + 4 * e + 2 * k + 1] = _mm_unpackhi_epi32(a, b);
            }
    /* t[8h + 4e + 2k + f]: bytes 8h+4e+2f, +1 of rows 8k .. 8k+7 */
    for (int h = 0; h < 2; h++)
        for (int e = 0; e < 2; e++)
            for (int f = 0; f < 2; f++) {
                __m128i a = t[8 * h + 4 * e + f], b = t[8 * h + 4 * e + 2 + f];
                m[8 * h + 4 * e + 2 * f] = _mm_unpacklo_epi64(a, b), m[8 * h + 4 * e + 2 * f + 1] = _mm_unpackhi_epi64(a, b);
            }
}

#endif
