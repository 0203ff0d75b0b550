/* Portable vec dots: integer sums inside a block, one float multiply-add per block (or
 * group). Written for clarity; the AVX2/AVX-512 files hold the fast versions and the
 * tests hold them to these results. */
#include "quant/quant_impl.h"

static void dot_q4_0(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q4_0 *w = vw;
    const blk_q8_0 *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QK; i++) {
        int sum = 0;
        for (int j = 0; j < QK / 2; j++)
            sum += ((w[i].qs[j] & 0xF) - 8) * a[i].qs[j] + ((w[i].qs[j] >> 4) - 8) * a[i].qs[j + QK / 2];
        acc += qf16(w[i].d) * qf16(a[i].d) * (float)sum;
    }
    *s = acc;
}

/* Affine weights (d*q + m): the m term needs the activation sum, taken from the quants
 * rather than the block's f16 s field, which is rounded. */
static void dot_q4_1(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q4_1 *w = vw;
    const blk_q8_1 *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QK; i++) {
        int sum = 0, asum = 0;
        for (int j = 0; j < QK / 2; j++) {
            sum += (w[i].qs[j] & 0xF) * a[i].qs[j] + (w[i].qs[j] >> 4) * a[i].qs[j + QK / 2];
            asum += a[i].qs[j] + a[i].qs[j + QK / 2];
        }
        float da = qf16(a[i].d);
        acc += qf16(w[i].d) * da * (float)sum + qf16(w[i].m) * da * (float)asum;
    }
    *s = acc;
}

static void dot_q5_0(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q5_0 *w = vw;
    const blk_q8_0 *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QK; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, 4);
        int sum = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = ((w[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4)) - 16;
            int hi = ((w[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4)) - 16;
            sum += lo * a[i].qs[j] + hi * a[i].qs[j + QK / 2];
        }
        acc += qf16(w[i].d) * qf16(a[i].d) * (float)sum;
    }
    *s = acc;
}

static void dot_q5_1(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q5_1 *w = vw;
    const blk_q8_1 *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QK; i++) {
        uint32_t qh;
        memcpy(&qh, w[i].qh, 4);
        int sum = 0, asum = 0;
        for (int j = 0; j < QK / 2; j++) {
            int lo = (w[i].qs[j] & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (w[i].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            sum += lo * a[i].qs[j] + hi * a[i].qs[j + QK / 2];
            asum += a[i].qs[j] + a[i].qs[j + QK / 2];
        }
        float da = qf16(a[i].d);
        acc += qf16(w[i].d) * da * (float)sum + qf16(w[i].m) * da * (float)asum;
    }
    *s = acc;
}

/* One block's signed quants against the activation's (Q8_0 and Q8_1 weights alike). */
static int dot_i8_block(const int8_t *w, const int8_t *a)
{
    int sum = 0;
    for (int j = 0; j < QK; j++) sum += w[j] * a[j];
    return sum;
}

static void dot_q8_0(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q8_0 *w = vw;
    const blk_q8_0 *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QK; i++) acc += qf16(w[i].d) * qf16(a[i].d) * (float)dot_i8_block(w[i].qs, a[i].qs);
    *s = acc;
}

static void dot_q8_1(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q8_1 *w = vw;
    const blk_q8_1 *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QK; i++) acc += qf16(w[i].d) * qf16(a[i].d) * (float)dot_i8_block(w[i].qs, a[i].qs);
    *s = acc;
}

/* ---- K formats against Q8_K; the mins use the activation's bsums ---- */

static void dot_q2_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q2_k *w = vw;
    const blk_q8_k *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QKK; i++) {
        int sum = 0, msum = 0;
        for (int g = 0; g < 16; g++) {
            int gs = 0;
            for (int l = 0; l < 16; l++) {
                int e = 16 * g + l;
                int q = (w[i].qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                gs += q * a[i].qs[e];
            }
            sum += (w[i].scales[g] & 0xF) * gs;
            msum += (w[i].scales[g] >> 4) * a[i].bsums[g];
        }
        acc += a[i].d * (qf16(w[i].d) * (float)sum - qf16(w[i].dmin) * (float)msum);
    }
    *s = acc;
}

static void dot_q3_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q3_k *w = vw;
    const blk_q8_k *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QKK; i++) {
        int8_t sc[16];
        quant_k3_unpack(w[i].scales, sc);
        int sum = 0;
        for (int g = 0; g < 16; g++) {
            int gs = 0;
            for (int l = 0; l < 16; l++) {
                int e = 16 * g + l;
                int q = (w[i].qs[(e / 128) * 32 + e % 32] >> (2 * ((e % 128) / 32))) & 3;
                if (!(w[i].hmask[e % 32] & (1u << (e / 32)))) q -= 4;
                gs += q * a[i].qs[e];
            }
            sum += sc[g] * gs;
        }
        acc += a[i].d * qf16(w[i].d) * (float)sum;
    }
    *s = acc;
}

/* One Q4_K or Q5_K block (they share d, dmin and the 6-bit scales; qh: Q5_K's fifth bits,
 * NULL for Q4_K) times a Q8_K block: the sub-blocks' integer sums scaled, less the mins
 * times the activation's sub-block sums. */
static float dot_k4_block(uint16_t d, uint16_t dmin, const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                          const blk_q8_k *a)
{
    uint8_t sm[16];
    quant_k4_unpack(scales, sm);
    int sum = 0, msum = 0;
    for (int j = 0; j < 8; j++) {
        const uint8_t *q = qs + 32 * (j / 2);
        const int8_t *y = a->qs + 32 * j;
        int shift = 4 * (j & 1), gs = 0;
        for (int l = 0; l < 32; l++) gs += (((q[l] >> shift) & 0xF) | (qh ? ((qh[l] >> j) & 1) << 4 : 0)) * y[l];
        sum += sm[j] * gs;
        msum += sm[8 + j] * (a->bsums[2 * j] + a->bsums[2 * j + 1]);
    }
    return a->d * (qf16(d) * (float)sum - qf16(dmin) * (float)msum);
}

static void dot_q4_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q4_k *w = vw;
    const blk_q8_k *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QKK; i++) acc += dot_k4_block(w[i].d, w[i].dmin, w[i].scales, w[i].qs, NULL, &a[i]);
    *s = acc;
}

static void dot_q5_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q5_k *w = vw;
    const blk_q8_k *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QKK; i++) acc += dot_k4_block(w[i].d, w[i].dmin, w[i].scales, w[i].qs, w[i].qh, &a[i]);
    *s = acc;
}

static void dot_q6_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q6_k *w = vw;
    const blk_q8_k *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QKK; i++) {
        int sum = 0;
        for (int g = 0; g < 16; g++) {
            int gs = 0;
            for (int l16 = 0; l16 < 16; l16++) {
                int e = 16 * g + l16, h = e / 128, r = e % 128, k = r / 32, l = r % 32;
                int lo = (w[i].ql[64 * h + l + 32 * (k & 1)] >> (4 * (k >> 1))) & 0xF;
                int hi = (w[i].qh[32 * h + l] >> (2 * k)) & 3;
                gs += ((lo | (hi << 4)) - 32) * a[i].qs[e];
            }
            sum += w[i].scales[g] * gs;
        }
        acc += a[i].d * qf16(w[i].d) * (float)sum;
    }
    *s = acc;
}

static void dot_q8_k(int64_t n, float *s, const void *vw, const void *va)
{
    const blk_q8_k *w = vw;
    const blk_q8_k *a = va;
    float acc = 0.f;
    for (int64_t i = 0; i < n / QKK; i++) {
        int sum = 0;
        for (int j = 0; j < QKK; j++) sum += w[i].qs[j] * a[i].qs[j];
        acc += w[i].d * a[i].d * (float)sum;
    }
    *s = acc;
}

void quant_dot_fill_scalar(quant_dot_table tab)
{
    tab[CT_Q4_0] = dot_q4_0;
    tab[CT_Q4_1] = dot_q4_1;
    tab[CT_Q5_0] = dot_q5_0;
    tab[CT_Q5_1] = dot_q5_1;
    tab[CT_Q8_0] = dot_q8_0;
    tab[CT_Q8_1] = dot_q8_1;
    tab[CT_Q2_K] = dot_q2_k;
    tab[CT_Q3_K] = dot_q3_k;
    tab[CT_Q4_K] = dot_q4_k;
    tab[CT_Q5_K] = dot_q5_k;
    tab[CT_Q6_K] = dot_q6_k;
    tab[CT_Q8_K] = dot_q8_k;
}
