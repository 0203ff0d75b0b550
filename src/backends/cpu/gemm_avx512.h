/* What the built-in GEMMs' AVX-512 panel packing shares (gemm.c's f32/f16/bf16 B panels,
 * gemm_bf16.c's bf16 pair panels). x86-64 GCC/Clang only: include after <immintrin.h>. */
#ifndef CT_CPU_GEMM_AVX512_H
#define CT_CPU_GEMM_AVX512_H

#include <stdint.h>

/* r[i] holds 16 dwords of source row i; dst row j (rows `stride` dwords apart) gets dword j
 * of every source row: two unpack stages, then a 4 x 4 transpose of 128-bit lanes. */
static inline __attribute__((always_inline, target("avx512f"))) void gemm_store_tr16(__m512i r[16], uint32_t *dst,
                                                                                   int64_t stride)
{
    __m512i u[16];
    for (int i = 0; i < 16; i += 2) {
        u[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
        u[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
    }
    /* u[4q + c] lane L: rows 4q..4q+3 of dword 4L + c */
    for (int q = 0; q < 4; q++) {
        r[4 * q + 0] = _mm512_unpacklo_epi64(u[4 * q], u[4 * q + 2]);
        r[4 * q + 1] = _mm512_unpackhi_epi64(u[4 * q], u[4 * q + 2]);
        r[4 * q + 2] = _mm512_unpacklo_epi64(u[4 * q + 1], u[4 * q + 3]);
        r[4 * q + 3] = _mm512_unpackhi_epi64(u[4 * q + 1], u[4 * q + 3]);
    }
    for (int c = 0; c < 4; c++) {
        __m512i x0 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0x44), x1 = _mm512_shuffle_i32x4(r[c], r[4 + c], 0xEE);
        __m512i x2 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0x44), x3 = _mm512_shuffle_i32x4(r[8 + c], r[12 + c], 0xEE);
        _mm512_storeu_si512(dst + (0 + c) * stride, _mm512_shuffle_i32x4(x0, x2, 0x88));
        _mm512_storeu_si512(dst + (4 + c) * stride, _mm512_shuffle_i32x4(x0, x2, 0xDD));
        _mm512_storeu_si512(dst + (8 + c) * stride, _mm512_shuffle_i32x4(x1, x3, 0x88));
        _mm512_storeu_si512(dst + (12 + c) * stride, _mm512_shuffle_i32x4(x1, x3, 0xDD));
    }
}

#endif
