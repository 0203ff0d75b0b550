/* What the built-in GEMMs' AVX-512 panel packing shares (gemm.c's f32/f16/bf16 B panels,
 * gemm_bf16.c's bf16 pair panels, gemm_amx.c's tile panels) and their 32-column row
 * stores. x86-64 GCC/Clang only: include after <immintrin.h>. */
#ifndef CT_CPU_GEMM_AVX512_H
#define CT_CPU_GEMM_AVX512_H

#include <stdbool.h>
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

/* Masks of the first nj (0..32) columns of a 32-wide row of C, as two 16-lane halves. */
static inline __attribute__((always_inline, target("avx512f"))) void gemm_masks32(int nj, __mmask16 *m0, __mmask16 *m1)
{
    *m0 = nj >= 16 ? 0xFFFF : (__mmask16)((1u << nj) - 1);
    *m1 = nj >= 32 ? 0xFFFF : nj <= 16 ? 0 : (__mmask16)((1u << (nj - 16)) - 1);
}

/* c (+)= a row of 32 sums (s0, s1), only the columns the masks keep. */
static inline __attribute__((always_inline, target("avx512f"))) void gemm_put_row32(float *c, __mmask16 m0, __mmask16 m1,
                                                                                  __m512 s0, __m512 s1, bool acc)
{
    if (acc) {
        s0 = _mm512_add_ps(s0, _mm512_maskz_loadu_ps(m0, c));
        s1 = _mm512_add_ps(s1, _mm512_maskz_loadu_ps(m1, c + 16));
    }
    _mm512_mask_storeu_ps(c, m0, s0);
    _mm512_mask_storeu_ps(c + 16, m1, s1);
}

#endif
