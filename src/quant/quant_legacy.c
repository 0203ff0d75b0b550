/* The 32-element formats (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q8_1): dequantization and the
 * reference quantizers. The quantizers reproduce llama.cpp's *_ref bytes, so every
 * float operation keeps the reference's order (this file must not be built with FMA
 * contraction: ISO C mode, which the project uses, keeps it off). */
#include <float.h>
#include <math.h>

#include "quant/quant_impl.h"

/* (int)v truncated toward zero for the reachable range, clamped outside it (NaN -> lo)
 * so that bad inputs give some value instead of undefined behaviour. */
static inline int trunc_clamp(float v, int lo, int hi)
{
    if (!(v > (float)lo - 1.f)) return lo;
    if (!(v < (float)hi + 1.f)) return hi;
    int i = (int)v;
    return i < lo ? lo : i > hi ? hi : i;
}

/* The value of largest magnitude (the first one on ties) and its magnitude. */
static inline float signed_absmax(const float *x, int n, float *amax_out)
{
    float amax = 0.f, max = 0.f;
    for (int j = 0; j < n; j++)
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    *amax_out = amax;
    return max;
}

static inline void min_max(const float *x, int n, float *mn, float *mx)
{
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo) lo = x[j];
        if (x[j] > hi) hi = x[j];
    }
    *mn = lo;
    *mx = hi;
}

/* ---- dequantization ---- */

void quant_deq_q4_0(const void *src, float *y, int64_t nb)
{
    const blk_q4_0 *b = src;
    for (int64_t i = 0; i < nb; i++, b++, y += QK) {
        float d = qf16(b->d);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = (float)((b->qs[j] & 0xF) - 8) * d;
            y[j + QK / 2] = (float)((b->qs[j] >> 4) - 8) * d;
        }
    }
}

void quant_deq_q4_1(const void *src, float *y, int64_t nb)
{
    const blk_q4_1 *b = src;
    for (int64_t i = 0; i < nb; i++, b++, y += QK) {
        float d = qf16(b->d), m = qf16(b->m);
        for (int j = 0; j < QK / 2; j++) {
            y[j] = (float)(b->qs[j] & 0xF) * d + m;
            y[j + QK / 2] = (float)(b->qs[j] >> 4) * d + m;
        }
    }
}

static inline uint32_t load_u32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

void quant_deq_q5_0(const void *src, float *y, int64_t nb)
{
    const blk_q5_0 *b = src;
    for (int64_t i = 0; i < nb; i++, b++, y += QK) {
        float d = qf16(b->d);
        uint32_t qh = load_u32(b->qh);
        for (int j = 0; j < QK / 2; j++) {
            int lo = (b->qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)(lo - 16) * d;
            y[j + QK / 2] = (float)(hi - 16) * d;
        }
    }
}

void quant_deq_q5_1(const void *src, float *y, int64_t nb)
{
    const blk_q5_1 *b = src;
    for (int64_t i = 0; i < nb; i++, b++, y += QK) {
        float d = qf16(b->d), m = qf16(b->m);
        uint32_t qh = load_u32(b->qh);
        for (int j = 0; j < QK / 2; j++) {
            int lo = (b->qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (b->qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            y[j] = (float)lo * d + m;
            y[j + QK / 2] = (float)hi * d + m;
        }
    }
}

void quant_deq_q8_0(const void *src, float *y, int64_t nb)
{
    const blk_q8_0 *b = src;
    for (int64_t i = 0; i < nb; i++, b++, y += QK) {
        float d = qf16(b->d);
        for (int j = 0; j < QK; j++) y[j] = (float)b->qs[j] * d;
    }
}

void quant_deq_q8_1(const void *src, float *y, int64_t nb)
{
    const blk_q8_1 *b = src;
    for (int64_t i = 0; i < nb; i++, b++, y += QK) {
        float d = qf16(b->d);
        for (int j = 0; j < QK; j++) y[j] = (float)b->qs[j] * d;
    }
}

/* ---- reference quantizers ---- */

/* Symmetric 4/5-bit: the scale maps the largest-magnitude value to -2^(bits-1). */
void quant_ref_q4_0(const float *x, void *dst, int64_t nb)
{
    blk_q4_0 *b = dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float amax, max = signed_absmax(x, QK, &amax);
        float d = max / -8, id = d != 0.f ? 1.0f / d : 0.0f;
        b->d = qh16(d);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = trunc_clamp(x[j] * id + 8.5f, 0, 15);
            int q1 = trunc_clamp(x[j + QK / 2] * id + 8.5f, 0, 15);
            b->qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quant_ref_q5_0(const float *x, void *dst, int64_t nb)
{
    blk_q5_0 *b = dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float amax, max = signed_absmax(x, QK, &amax);
        float d = max / -16, id = d != 0.f ? 1.0f / d : 0.0f;
        b->d = qh16(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            int q0 = trunc_clamp(x[j] * id + 16.5f, 0, 31);
            int q1 = trunc_clamp(x[j + QK / 2] * id + 16.5f, 0, 31);
            b->qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        memcpy(b->qh, &qh, 4);
    }
}

/* Affine 4/5-bit: min and (max - min) / (2^bits - 1). */
void quant_ref_q4_1(const float *x, void *dst, int64_t nb)
{
    blk_q4_1 *b = dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float mn, mx;
        min_max(x, QK, &mn, &mx);
        float d = (mx - mn) / 15, id = d != 0.f ? 1.0f / d : 0.0f;
        b->d = qh16(d);
        b->m = qh16(mn);
        for (int j = 0; j < QK / 2; j++) {
            int q0 = trunc_clamp((x[j] - mn) * id + 0.5f, 0, 15);
            int q1 = trunc_clamp((x[j + QK / 2] - mn) * id + 0.5f, 0, 15);
            b->qs[j] = (uint8_t)(q0 | (q1 << 4));
        }
    }
}

void quant_ref_q5_1(const float *x, void *dst, int64_t nb)
{
    blk_q5_1 *b = dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float mn, mx;
        min_max(x, QK, &mn, &mx);
        float d = (mx - mn) / 31, id = d != 0.f ? 1.0f / d : 0.0f;
        b->d = qh16(d);
        b->m = qh16(mn);
        uint32_t qh = 0;
        for (int j = 0; j < QK / 2; j++) {
            /* the reference truncates to uint8 without a clamp: its values stay in 0..31 */
            int q0 = trunc_clamp((x[j] - mn) * id + 0.5f, 0, 31);
            int q1 = trunc_clamp((x[j + QK / 2] - mn) * id + 0.5f, 0, 31);
            b->qs[j] = (uint8_t)((q0 & 0xF) | ((q1 & 0xF) << 4));
            qh |= (uint32_t)(q0 >> 4) << j;
            qh |= (uint32_t)(q1 >> 4) << (j + QK / 2);
        }
        memcpy(b->qh, &qh, 4);
    }
}

/* roundf (half away from zero) into int8 range; NaN -> 0. */
static inline int8_t round_i8(float v)
{
    if (!(v >= -127.f)) return v < 0 ? -127 : 0;
    if (!(v <= 127.f)) return 127;
    return (int8_t)roundf(v);
}

void quant_ref_q8_0(const float *x, void *dst, int64_t nb)
{
    blk_q8_0 *b = dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float amax = 0.f;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127, id = d != 0.f ? 1.0f / d : 0.0f;
        b->d = qh16(d);
        for (int j = 0; j < QK; j++) b->qs[j] = round_i8(x[j] * id);
    }
}

void quant_ref_q8_1(const float *x, void *dst, int64_t nb)
{
    blk_q8_1 *b = dst;
    for (int64_t i = 0; i < nb; i++, b++, x += QK) {
        float amax = 0.f;
        for (int j = 0; j < QK; j++) amax = fmaxf(amax, fabsf(x[j]));
        float d = amax / 127, id = d != 0.f ? 1.0f / d : 0.0f;
        b->d = qh16(d);
        int sum = 0;
        for (int j = 0; j < QK; j++) {
            b->qs[j] = round_i8(x[j] * id);
            sum += b->qs[j];
        }
        b->s = qh16((float)sum * d);
    }
}
