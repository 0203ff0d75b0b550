/* The 256-element "K" formats (Q2_K Q3_K Q4_K Q5_K Q6_K Q8_K): dequantization and the
 * reference quantizers. The quantizers reproduce llama.cpp's quantize_row_*_ref bytes
 * (no importance matrix), so the scale searches keep the reference's iteration
 * constants and the exact order of every float operation; do not "simplify" an
 * expression here without re-running the bit-exactness tests (tests/formats/test_quant.c). */
#include <math.h>

#include "quant/quant_impl.h"

#define GROUP_EPS 1e-15f /* below this, a group counts as all zeros */

static inline int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* ---- scale searches ---- */

/* The value of largest magnitude among n (the first on ties; 0 when all are 0). */
static float max_magnitude(int n, const float *x)
{
    float amax = 0.f, max = 0.f;
    for (int i = 0; i < n; i++) {
        float ax = fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    return max;
}

/* x * iscale rounded onto [-nmax, nmax-1] (stored in L as q + off when L is set), and the
 * x^2-weighted sums of x q and of q^2 that the scale search compares. */
static void sym_round(int n, int nmax, const float *x, float iscale, int8_t *L, int off, float *sumlx, float *suml2)
{
    float lx = 0.f, l2 = 0.f;
    for (int i = 0; i < n; i++) {
        int l = clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1);
        if (L) L[i] = (int8_t)(l + off);
        float w = x[i] * x[i];
        lx += w * x[i] * (float)l;
        l2 += w * (float)l * (float)l;
    }
    *sumlx = lx, *suml2 = l2;
}

/* The searches' start: the scale that maps the largest-magnitude value to -nmax, its
 * rounding (L = q + off) and sums. False, with L zeroed, for a group of zeros. */
static bool sym_start(int n, int nmax, const float *x, int8_t *L, int off, float *max, float *sumlx, float *suml2)
{
    *max = max_magnitude(n, x);
    if (fabsf(*max) < GROUP_EPS) {
        memset(L, 0, (size_t)n);
        return false;
    }
    sym_round(n, nmax, x, (float)-nmax / *max, L, off, sumlx, suml2);
    return true;
}

/* Symmetric group of n values on [-nmax, nmax-1], weights x^2: start from the scale that
 * maps the largest-magnitude value to -nmax, then try 18 nearby scales and keep the
 * least-squares optimum. L gets q + nmax; returns the scale. */
static float search_sym(int n, int nmax, const float *x, int8_t *L)
{
    float max, sumlx, suml2;
    if (!sym_start(n, nmax, x, L, nmax, &max, &sumlx, &suml2)) return 0.f;
    float scale = suml2 != 0.f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; is++) {
        if (is == 0) continue;
        float iscale = -((float)nmax + 0.1f * (float)is) / max;
        sym_round(n, nmax, x, iscale, NULL, 0, &sumlx, &suml2);
        if (suml2 > 0.f && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; i++)
                L[i] = (int8_t)(nmax + clampi(quant_nearest_int(iscale * x[i]), -nmax, nmax - 1));
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q3_K's group search: symmetric start, then up to 5 passes of coordinate descent that
 * move one quant at a time when that raises the weighted correlation. L gets q + nmax. */
static float search_q3(int n, int nmax, const float *x, int8_t *L)
{
    float max, sumlx, suml2;
    if (!sym_start(n, nmax, x, L, 0, &max, &sumlx, &suml2)) return 0.f;
    for (int pass = 0; pass < 5; pass++) {
        int changed = 0;
        for (int i = 0; i < n; i++) {
            float w = x[i] * x[i];
            float slx = sumlx - w * x[i] * (float)L[i];
            if (slx > 0.f) {
                float sl2 = suml2 - w * (float)L[i] * (float)L[i];
                int nl = clampi(quant_nearest_int(x[i] * sl2 / slx), -nmax, nmax - 1);
                if (nl != L[i]) {
                    slx += w * x[i] * (float)nl;
                    sl2 += w * (float)nl * (float)nl;
                    if (sl2 > 0.f && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = (int8_t)nl;
                        sumlx = slx;
                        suml2 = sl2;
                        changed++;
                    }
                }
            }
        }
        if (!changed) break;
    }
    for (int i = 0; i < n; i++) L[i] = (int8_t)(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

/* Affine group (scale, min <= 0) on [0, nmax]: start from the min/max range, then scan
 * nstep+1 scales (rmin + rdelta*is + nmax)/(max - min), fitting scale and min by weighted
 * least squares each time and keeping the lowest weighted error (absolute when use_mad).
 * *the_min gets -min; returns the scale. */
static float search_affine(int n, int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                           float rmin, float rdelta, int nstep, bool use_mad)
{
    uint8_t Laux[32];
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; i++) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0.f) min = 0.f;
    if (max == min) {
        memset(L, 0, (size_t)n);
        *the_min = -min;
        return 0.f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1 / iscale;
    float best_error = 0.f;
    for (int i = 0; i < n; i++) {
        L[i] = (uint8_t)clampi(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
        float diff = scale * (float)L[i] + min - x[i];
        diff = use_mad ? fabsf(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    for (int is = 0; is <= nstep; is++) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0.f, sum_l2 = 0.f, sum_xl = 0.f;
        for (int i = 0; i < n; i++) {
            int l = clampi(quant_nearest_int(iscale * (x[i] - min)), 0, nmax);
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0.f) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0.f) {
                this_min = 0.f;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0.f;
            for (int i = 0; i < n; i++) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = use_mad ? fabsf(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                memcpy(L, Laux, (size_t)n);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* 2-bit fields of 4 groups of 32 (L[0..127]) into 32 bytes: element 32k + l in bits 2k of byte l. */
static void pack_2bit(const uint8_t *L, uint8_t *qs)
{
    for (int j = 0; j < QKK; j += 128)
        for (int l = 0; l < 32; l++)
            qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

/* ---- Q2_K ---- */

void quant_ref_q2_k(const float *x, void *dst, int64_t nb)
{
    blk_q2_k *y = dst;
    uint8_t L[QKK];
    float weights[16], mins[16], scales[16];
    for (int64_t i = 0; i < nb; i++, y++, x += QKK) {
        float max_scale = 0.f, max_min = 0.f;
        for (int j = 0; j < 16; j++) {
            for (int l = 0; l < 16; l++) weights[l] = fabsf(x[16 * j + l]);
            scales[j] = search_affine(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0.f) {
            float iscale = 15.f / max_scale;
            for (int j = 0; j < 16; j++) y->scales[j] = (uint8_t)quant_nearest_int(iscale * scales[j]);
            y->d = qh16(max_scale / 15.f);
        } else {
            memset(y->scales, 0, 16);
            y->d = qh16(0.f);
        }
        if (max_min > 0.f) {
            float iscale = 15.f / max_min;
            for (int j = 0; j < 16; j++) y->scales[j] |= (uint8_t)((unsigned)quant_nearest_int(iscale * mins[j]) << 4);
            y->dmin = qh16(max_min / 15.f);
        } else {
            y->dmin = qh16(0.f);
        }
        for (int j = 0; j < 16; j++) {
            float d = qf16(y->d) * (float)(y->scales[j] & 0xF);
            if (d == 0.f) continue;
            float dm = qf16(y->dmin) * (float)(y->scales[j] >> 4);
            for (int ii = 0; ii < 16; ii++)
                L[16 * j + ii] = (uint8_t)clampi(quant_nearest_int((x[16 * j + ii] + dm) / d), 0, 3);
        }
        pack_2bit(L, y->qs);
    }
}

void quant_deq_q2_k(const void *src, float *y, int64_t nb)
{
    const blk_q2_k *b = src;
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = qf16(b->d), dmin = qf16(b->dmin);
        for (int e = 0; e < QKK; e++) {
            int g = e / 16, q = (b->qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            float dl = d * (float)(b->scales[g] & 0xF), ml = dmin * (float)(b->scales[g] >> 4);
            *y++ = dl * (float)q - ml;
        }
    }
}

/* ---- Q3_K ---- */

/* The 16 groups' scales of a Q3_K (q3) or Q6_K block, their searches filling L, and the
 * scale of the largest magnitude (*amax: that magnitude; the first of equals wins). */
static float k16_group_scales(const float *x, bool q3, float *scales, int8_t *L, float *amax)
{
    float max_scale = 0.f;
    *amax = 0.f;
    for (int j = 0; j < 16; j++) {
        scales[j] = q3 ? search_q3(16, 4, x + 16 * j, L + 16 * j) : search_sym(16, 32, x + 16 * j, L + 16 * j);
        float a = fabsf(scales[j]);
        if (a > *amax) {
            *amax = a;
            max_scale = scales[j];
        }
    }
    return max_scale;
}

void quant_ref_q3_k(const float *x, void *dst, int64_t nb)
{
    blk_q3_k *y = dst;
    int8_t L[QKK];
    float scales[16];
    for (int64_t i = 0; i < nb; i++, y++, x += QKK) {
        float amax, max_scale = k16_group_scales(x, true, scales, L, &amax);
        memset(y->scales, 0, 12);
        if (max_scale != 0.f) {
            float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; j++) {
                int l = clampi((int8_t)quant_nearest_int(iscale * scales[j]), -32, 31) + 32;
                if (j < 8)
                    y->scales[j] = (uint8_t)(l & 0xF);
                else
                    y->scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
                y->scales[j % 4 + 8] |= (uint8_t)((l >> 4) << (2 * (j / 4)));
            }
            y->d = qh16(1 / iscale);
        } else {
            y->d = qh16(0.f);
        }
        int8_t sc[16];
        quant_k3_unpack(y->scales, sc);
        for (int j = 0; j < 16; j++) {
            float d = qf16(y->d) * (float)sc[j];
            if (d == 0.f) continue;
            for (int ii = 0; ii < 16; ii++)
                L[16 * j + ii] = (int8_t)(clampi(quant_nearest_int(x[16 * j + ii] / d), -4, 3) + 4);
        }
        /* high bit of element e goes to hmask[e % 32], bit e / 32 */
        memset(y->hmask, 0, 32);
        uint8_t u[QKK];
        for (int e = 0; e < QKK; e++) {
            int l = L[e];
            if (l > 3) {
                y->hmask[e % 32] |= (uint8_t)(1u << (e / 32));
                l -= 4;
            }
            u[e] = (uint8_t)l;
        }
        pack_2bit(u, y->qs);
    }
}

void quant_deq_q3_k(const void *src, float *y, int64_t nb)
{
    const blk_q3_k *b = src;
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = qf16(b->d);
        int8_t sc[16];
        quant_k3_unpack(b->scales, sc);
        for (int e = 0; e < QKK; e++) {
            int q = (b->qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            if (!(b->hmask[e % 32] & (1u << (e / 32)))) q -= 4;
            *y++ = d * (float)sc[e / 16] * (float)q;
        }
    }
}

/* ---- Q4_K / Q5_K ---- */

/* The shared scale search of Q4_K and Q5_K: per group of 32, an affine search weighted by
 * rms + |x|; then 6-bit scales/mins relative to the largest, packed into 12 bytes; then the
 * quants again against the rounded scales (L keeps the search's values where a scale is 0). */
static void k4_scales(const float *x, int nmax, float rmin, int nstep, uint8_t *L, uint8_t s12[12], uint16_t *dd,
                      uint16_t *dmin)
{
    float weights[32], mins[8], scales[8];
    float max_scale = 0.f, max_min = 0.f;
    for (int j = 0; j < 8; j++) {
        float sum_x2 = 0.f;
        for (int l = 0; l < 32; l++) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = sqrtf(sum_x2 / 32);
        for (int l = 0; l < 32; l++) weights[l] = av_x + fabsf(x[32 * j + l]);
        scales[j] = search_affine(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep, false);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    float inv_scale = max_scale > 0.f ? 63.f / max_scale : 0.f;
    float inv_min = max_min > 0.f ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; j++) {
        /* the reference stores nearest_int into a uint8 before clamping to 63 */
        uint8_t ls = (uint8_t)quant_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)quant_nearest_int(inv_min * mins[j]);
        if (ls > 63) ls = 63;
        if (lm > 63) lm = 63;
        if (j < 4) {
            s12[j] = ls;
            s12[j + 4] = lm;
        } else {
            s12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s12[j] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *dd = qh16(max_scale / 63.f);
    *dmin = qh16(max_min / 63.f);
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        quant_k4_scale_min(j, s12, &sc, &m);
        float d = qf16(*dd) * (float)sc;
        if (d == 0.f) continue;
        float dm = qf16(*dmin) * (float)m;
        for (int ii = 0; ii < 32; ii++)
            L[32 * j + ii] = (uint8_t)clampi(quant_nearest_int((x[32 * j + ii] + dm) / d), 0, nmax);
    }
}

void quant_ref_q4_k(const float *x, void *dst, int64_t nb)
{
    blk_q4_k *y = dst;
    uint8_t L[QKK];
    for (int64_t i = 0; i < nb; i++, y++, x += QKK) {
        k4_scales(x, 15, -1.f, 20, L, y->scales, &y->d, &y->dmin);
        for (int j = 0; j < QKK; j += 64)
            for (int l = 0; l < 32; l++) y->qs[j / 2 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
    }
}

void quant_deq_q4_k(const void *src, float *y, int64_t nb)
{
    const blk_q4_k *b = src;
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = qf16(b->d), dmin = qf16(b->dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_k4_scale_min(j, b->scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = b->qs + 32 * (j / 2);
            int shift = 4 * (j & 1);
            for (int l = 0; l < 32; l++) *y++ = dl * (float)((q[l] >> shift) & 0xF) - ml;
        }
    }
}

void quant_ref_q5_k(const float *x, void *dst, int64_t nb)
{
    blk_q5_k *y = dst;
    uint8_t L[QKK];
    for (int64_t i = 0; i < nb; i++, y++, x += QKK) {
        k4_scales(x, 31, -0.5f, 15, L, y->scales, &y->d, &y->dmin);
        /* low nibbles as Q4_K; the fifth bit of element e goes to qh[e % 32], bit e / 32 */
        memset(y->qh, 0, 32);
        for (int e = 0; e < QKK; e++)
            if (L[e] > 15) y->qh[e % 32] |= (uint8_t)(1u << (e / 32));
        for (int j = 0; j < QKK; j += 64)
            for (int l = 0; l < 32; l++)
                y->qs[j / 2 + l] = (uint8_t)((L[j + l] & 0xF) | ((L[j + l + 32] & 0xF) << 4));
    }
}

void quant_deq_q5_k(const void *src, float *y, int64_t nb)
{
    const blk_q5_k *b = src;
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = qf16(b->d), dmin = qf16(b->dmin);
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            quant_k4_scale_min(j, b->scales, &sc, &m);
            float dl = d * (float)sc, ml = dmin * (float)m;
            const uint8_t *q = b->qs + 32 * (j / 2);
            int shift = 4 * (j & 1);
            for (int l = 0; l < 32; l++) {
                int v = ((q[l] >> shift) & 0xF) | (((b->qh[l] >> j) & 1) << 4);
                *y++ = dl * (float)v - ml;
            }
        }
    }
}

/* ---- Q6_K ---- */

void quant_ref_q6_k(const float *x, void *dst, int64_t nb)
{
    blk_q6_k *y = dst;
    int8_t L[QKK];
    float scales[16];
    for (int64_t i = 0; i < nb; i++, y++, x += QKK) {
        float max_abs, max_scale = k16_group_scales(x, false, scales, L, &max_abs);
        if (max_abs < GROUP_EPS) {
            memset(y, 0, sizeof *y);
            continue;
        }
        float iscale = -128.f / max_scale;
        y->d = qh16(1 / iscale);
        for (int g = 0; g < 16; g++) {
            int v = quant_nearest_int(iscale * scales[g]);
            y->scales[g] = (int8_t)clampi(v, -128, 127);
        }
        for (int g = 0; g < 16; g++) {
            float d = qf16(y->d) * (float)y->scales[g];
            if (d == 0.f) continue;
            for (int ii = 0; ii < 16; ii++)
                L[16 * g + ii] = (int8_t)(clampi(quant_nearest_int(x[16 * g + ii] / d), -32, 31) + 32);
        }
        /* per 128: low nibbles of e and e+64 share ql[l] (e < 32) / ql[l+32]; the top two
         * bits of e + 32k go to qh[l] bits 2k */
        for (int h = 0; h < 2; h++) {
            const int8_t *Lh = L + 128 * h;
            uint8_t *ql = y->ql + 64 * h, *qh = y->qh + 32 * h;
            for (int l = 0; l < 32; l++) {
                ql[l] = (uint8_t)((Lh[l] & 0xF) | ((Lh[l + 64] & 0xF) << 4));
                ql[l + 32] = (uint8_t)((Lh[l + 32] & 0xF) | ((Lh[l + 96] & 0xF) << 4));
                qh[l] = (uint8_t)((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) | ((Lh[l + 64] >> 4) << 4) |
                                  ((Lh[l + 96] >> 4) << 6));
            }
        }
    }
}

void quant_deq_q6_k(const void *src, float *y, int64_t nb)
{
    const blk_q6_k *b = src;
    for (int64_t i = 0; i < nb; i++, b++) {
        float d = qf16(b->d);
        for (int e = 0; e < QKK; e++) {
            int h = e / 128, r = e % 128, k = r / 32, l = r % 32;
            int lo = (b->ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
            int hi = (b->qh[32 * h + l] >> (2 * k)) & 3;
            *y++ = d * (float)b->scales[e / 16] * (float)((lo | (hi << 4)) - 32);
        }
    }
}

/* ---- Q8_K (activations) ---- */

void quant_ref_q8_k(const float *x, void *dst, int64_t nb)
{
    blk_q8_k *y = dst;
    for (int64_t i = 0; i < nb; i++, y++, x += QKK) {
        float amax = 0.f, max = 0.f;
        for (int j = 0; j < QKK; j++) {
            float ax = fabsf(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.f) {
            memset(y, 0, sizeof *y);
            continue;
        }
        float iscale = -127.f / max;
        for (int j = 0; j < QKK; j++) {
            int v = quant_nearest_int(iscale * x[j]);
            y->qs[j] = (int8_t)clampi(v, -128, 127);
        }
        for (int g = 0; g < 16; g++) {
            int sum = 0;
            for (int l = 0; l < 16; l++) sum += y->qs[16 * g + l];
            y->bsums[g] = (int16_t)sum;
        }
        y->d = 1 / iscale;
    }
}

void quant_deq_q8_k(const void *src, float *y, int64_t nb)
{
    const blk_q8_k *b = src;
    for (int64_t i = 0; i < nb; i++, b++)
        for (int j = 0; j < QKK; j++) *y++ = b->d * (float)b->qs[j];
}
