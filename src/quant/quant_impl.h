/* Internal to src/quant: the per-type kernels and their helpers. The block structs are
 * in quant_blocks.h, which device kernels share. */
#ifndef CT_QUANT_IMPL_H
#define CT_QUANT_IMPL_H

#include <assert.h>
#include <stdint.h>
#include <string.h>

#include "quant/quant.h"
#include "quant/quant_blocks.h"

/* f16 bits <-> f32 with round-to-nearest-even, as ggml's conversion. */
static inline float qf16(uint16_t h) { return ct_f16_to_f32(h); }
static inline uint16_t qh16(float f) { return ct_f32_to_f16(f); }

/* Round to nearest, ties to even, through the f32 adder (exact for |x| < 2^22, as the
 * reference quantizers use it); out-of-range and NaN inputs give some value in range
 * instead of undefined behaviour. */
static inline int quant_nearest_int(float x)
{
    if (!(x > -4194303.f && x < 4194303.f)) return x > 0 ? 4194303 : -4194303;
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

/* The 6-bit scale and min of group j (0..7) of a Q4_K/Q5_K block. */
static inline void quant_k4_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* All 8 scales (out[0..7]) and mins (out[8..15]) of a Q4_K/Q5_K block at once. */
static inline void quant_k4_unpack(const uint8_t *s12, uint8_t out[16])
{
    uint32_t a, b, c, r[4];
    memcpy(&a, s12, 4);
    memcpy(&b, s12 + 4, 4);
    memcpy(&c, s12 + 8, 4);
    r[0] = a & 0x3f3f3f3fu;
    r[1] = (c & 0x0f0f0f0fu) | ((a >> 2) & 0x30303030u);
    r[2] = b & 0x3f3f3f3fu;
    r[3] = ((c >> 4) & 0x0f0f0f0fu) | ((b >> 2) & 0x30303030u);
    memcpy(out, r, 16);
}

/* The 16 signed 6-bit scales of a Q3_K block (already minus 32): low nibbles in bytes
 * 0-7 (scales 0-7 low, 8-15 high nibble), top two bits in bytes 8-11 (scale j: byte
 * 8 + j % 4, bits 2 * (j / 4)). */
static inline void quant_k3_unpack(const uint8_t *s12, int8_t out[16])
{
    uint32_t a, b, c, r[4];
    memcpy(&a, s12, 4);
    memcpy(&b, s12 + 4, 4);
    memcpy(&c, s12 + 8, 4);
    r[0] = (a & 0x0f0f0f0fu) | ((c & 0x03030303u) << 4);
    r[1] = (b & 0x0f0f0f0fu) | (((c >> 2) & 0x03030303u) << 4);
    r[2] = ((a >> 4) & 0x0f0f0f0fu) | (((c >> 4) & 0x03030303u) << 4);
    r[3] = ((b >> 4) & 0x0f0f0f0fu) | (((c >> 6) & 0x03030303u) << 4);
    uint8_t u[16];
    memcpy(u, r, 16);
    for (int j = 0; j < 16; j++) out[j] = (int8_t)(u[j] - 32);
}

/* ---- kernels (quant_legacy.c, quant_k.c) ---- */
void quant_deq_q4_0(const void *src, float *dst, int64_t nb);
void quant_deq_q4_1(const void *src, float *dst, int64_t nb);
void quant_deq_q5_0(const void *src, float *dst, int64_t nb);
void quant_deq_q5_1(const void *src, float *dst, int64_t nb);
void quant_deq_q8_0(const void *src, float *dst, int64_t nb);
void quant_deq_q8_1(const void *src, float *dst, int64_t nb);
void quant_deq_q2_k(const void *src, float *dst, int64_t nb);
void quant_deq_q3_k(const void *src, float *dst, int64_t nb);
void quant_deq_q4_k(const void *src, float *dst, int64_t nb);
void quant_deq_q5_k(const void *src, float *dst, int64_t nb);
void quant_deq_q6_k(const void *src, float *dst, int64_t nb);
void quant_deq_q8_k(const void *src, float *dst, int64_t nb);

void quant_ref_q4_0(const float *x, void *dst, int64_t nb);
void quant_ref_q4_1(const float *x, void *dst, int64_t nb);
void quant_ref_q5_0(const float *x, void *dst, int64_t nb);
void quant_ref_q5_1(const float *x, void *dst, int64_t nb);
void quant_ref_q8_0(const float *x, void *dst, int64_t nb);
void quant_ref_q8_1(const float *x, void *dst, int64_t nb);
void quant_ref_q2_k(const float *x, void *dst, int64_t nb);
void quant_ref_q3_k(const float *x, void *dst, int64_t nb);
void quant_ref_q4_k(const float *x, void *dst, int64_t nb);
void quant_ref_q5_k(const float *x, void *dst, int64_t nb);
void quant_ref_q6_k(const float *x, void *dst, int64_t nb);
void quant_ref_q8_k(const float *x, void *dst, int64_t nb);

/* Vec-dot tables, indexed by dtype; NULL entries fall back to a lower level. */
typedef quant_vec_dot_fn quant_dot_table[CT_DTYPE_COUNT];
void quant_dot_fill_scalar(quant_dot_table tab);
void quant_dot_fill_avx2(quant_dot_table tab);
void quant_dot_fill_avxvnni(quant_dot_table tab);
void quant_dot_fill_avx512(quant_dot_table tab);
void quant_dot_fill_avx512_novnni(quant_dot_table tab);

/* Multi-row dot tables (quant_gemm_*.c), indexed by dtype; no fallback between levels. */
typedef quant_vec_dot_nr_fn quant_nr_table[CT_DTYPE_COUNT];
void quant_nr_fill_avx512(quant_nr_table tab);
void quant_nr_fill_avx512_novnni(quant_nr_table tab);

/* Packed-panel kernels (quant_panel_*.c), indexed by dtype; a level's NULL panels come from
 * its parent level like the vec dots (AVX2_VNNI and AVX512: AVX2); repacks never do. The
 * _novnni fills are the same files built for the avx512 level (quant_avx512_isa.h). */
typedef const quant_panel_kernels *quant_panel_table[CT_DTYPE_COUNT];
void quant_panel_fill_avx512(quant_panel_table tab);
void quant_panel_legacy_fill_avx512(quant_panel_table tab); /* both called by quant_panel_fill_avx512 */
void quant_panel_k23_fill_avx512(quant_panel_table tab);
void quant_repack_fill_avx512(quant_panel_table tab);
void quant_repack_fill_avx2(quant_panel_table tab); /* for AVX2 and AVX2_VNNI */
void quant_repack_legacy_fill_avx512(quant_panel_table tab); /* called by quant_repack_fill_avx512 */
void quant_panel_fill_avx512_novnni(quant_panel_table tab);
void quant_panel_legacy_fill_avx512_novnni(quant_panel_table tab);
void quant_panel_k23_fill_avx512_novnni(quant_panel_table tab);
void quant_repack_fill_avx512_novnni(quant_panel_table tab);
void quant_repack_legacy_fill_avx512_novnni(quant_panel_table tab);
void quant_panel_fill_avx2(quant_panel_table tab);

/* Faster quantizers for the activation formats, byte-identical to quant_ref_*. */
typedef void (*quant_act_fn)(const float *src, void *dst, int64_t nb);
typedef quant_act_fn quant_act_table[CT_DTYPE_COUNT];
void quant_act_fill_avx2(quant_act_table tab);
/* The current level's fast quantizer for t, NULL where only the reference exists. */
quant_act_fn quant_get_act(ct_dtype t);

#endif
