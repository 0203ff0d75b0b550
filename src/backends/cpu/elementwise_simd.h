/* f32 row kernels written once over a small vector vocabulary; elementwise_simd.c
 * includes this file once per instruction set after defining:
 *   EWS(name)   name with the level's suffix     EWS_FN  static + target attribute
 *   W, V, VI    lanes, float and int vector types
 *   LD ST STNT SET1 ZERO ADD SUB MUL DIV MAXV MINV FMA(a,b,c)=a*b+c FNMA(a,b,c)=c-a*b
 *   FMS(a,b,c)=a*b-c SQRT ANDV ANDNOTV(a,b)=~a&b XORV ROUND CVTI IADD ISUB ISRAI ISLLI
 *   ISET1 ITOF SEL_LT(a,b,x,y)=(a<b)?x:y SEL_UNORD(a,x,y)=isnan(a)?x:y HSUM
 *   EWS_SCALEF(p,n)  p * 2^n for integral n, when the set has it (AVX-512 vscalefps)
 * No include guard on purpose. */

#include "backends/cpu/simd_exp.h"

/* 1 / (1 + e^-|x|), times e^-|x| for negative x: exp never overflows, so
 * far negative inputs keep their (tiny) value instead of flushing to 0. */
EWS_FN V EWS(v_sigmoid)(V x)
{
    V sign = SET1(-0.0f), one = SET1(1.0f);
    V e = EWS(v_exp)(XORV(ANDNOTV(sign, x), sign)); /* e^-|x| */
    V s = DIV(one, ADD(one, e));
    return SEL_LT(x, ZERO(), MUL(e, s), s);
}

EWS_FN V EWS(v_silu)(V x) { return MUL(x, EWS(v_sigmoid)(x)); }

/* tanh|x| = -m / (2 + m) with m = expm1(-2|x|); near 0 m comes from its Taylor
 * series (no cancellation), elsewhere exp - 1 has none to lose. */
EWS_FN V EWS(v_tanh)(V x)
{
    V sign = SET1(-0.0f), a = ANDNOTV(sign, x), z = MUL(a, SET1(-2.0f));
    V q = SET1(1.0f / 40320.0f);
    q = FMA(q, z, SET1(1.0f / 5040.0f));
    q = FMA(q, z, SET1(1.0f / 720.0f));
    q = FMA(q, z, SET1(1.0f / 120.0f));
    q = FMA(q, z, SET1(1.0f / 24.0f));
    q = FMA(q, z, SET1(1.0f / 6.0f));
    q = FMA(q, z, SET1(0.5f));
    q = FMA(q, z, SET1(1.0f));
    V m = SEL_LT(a, SET1(0.3125f), MUL(q, z), SUB(EWS(v_exp)(z), SET1(1.0f)));
    V t = DIV(XORV(m, sign), ADD(SET1(2.0f), m));
    return XORV(t, ANDV(x, sign));
}

/* x * sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3): equal to the tanh form
 * without its cancellation for negative x. */
EWS_FN V EWS(v_gelu_tanh)(V x)
{
    V x2 = MUL(x, x);
    V w = MUL(MUL(x, SET1((float)(2.0 * EW_SQRT_2_OVER_PI))), FMA(x2, SET1((float)EW_GELU_CUBIC), SET1(1.0f)));
    return MUL(x, EWS(v_sigmoid)(w));
}

/* x * Phi(x) with Phi from erfc(z), z = |x|/sqrt2: erfc(z) = t P(t) exp(-z^2),
 * t = 1/(1 + z/2), P a degree-8 least-squares fit of erfc(z) exp(z^2) / t over
 * t in [0.14, 1] (relative error < 2e-7). z^2 = x^2/2 is taken exactly (FMS
 * gives the low part of x^2): rounding z first would cost ~2 z^2 ulp. */
EWS_FN V EWS(v_gelu_erf)(V x)
{
    V one = SET1(1.0f), half = SET1(0.5f);
    V ax = MINV(SET1(18.5f), ANDNOTV(SET1(-0.0f), x)); /* erfc(18.5/sqrt2) underflows */
    V t = DIV(one, FMA(MUL(ax, SET1(0.70710678118654752f)), half, one));
    V p = SET1(-0.060158827894183454f);
    p = FMA(p, t, SET1(0.2896903796395207f));
    p = FMA(p, t, SET1(-0.4973345657159876f));
    p = FMA(p, t, SET1(0.2890915748219542f));
    p = FMA(p, t, SET1(-0.0337949419218828f));
    p = FMA(p, t, SET1(0.20552733114747943f));
    p = FMA(p, t, SET1(0.24243738189542738f));
    p = FMA(p, t, SET1(0.28245958572063123f));
    p = FMA(p, t, SET1(0.282082031817285f));
    V xx = MUL(ax, ax), lo = FMS(ax, ax, xx);
    V e = MUL(EWS(v_exp)(MUL(xx, SET1(-0.5f))), FNMA(lo, half, one));
    V h = MUL(MUL(t, p), MUL(e, half)); /* erfc(z) / 2 = Phi(-|x|) */
    return MUL(x, SEL_LT(x, ZERO(), h, SUB(one, h)));
}

/* MAXV/MINV give b when either is NaN; a NaN in a must win too. */
EWS_FN V EWS(v_maximum)(V a, V b) { return SEL_UNORD(a, a, MAXV(a, b)); }

EWS_FN V EWS(v_minimum)(V a, V b) { return SEL_UNORD(a, a, MINV(a, b)); }

EWS_FN V EWS(v_clamp)(V x, V lo, V hi)
{
    V r = SEL_LT(x, lo, lo, x);
    return SEL_LT(hi, r, hi, r);
}

/* Full vectors from [from, to) of the row staged through zero-padded buffers. */
#define EWS_PART1(EXPR, from, to)                                                                  \
    do {                                                                                           \
        int64_t m_ = (to) - (from);                                                                \
        if (m_ > 0) {                                                                              \
            float ta_[W] = {0}, td_[W];                                                            \
            memcpy(ta_, a + (from), (size_t)m_ * sizeof(float));                                   \
            V x = LD(ta_);                                                                         \
            ST(td_, EXPR);                                                                         \
            memcpy(d + (from), td_, (size_t)m_ * sizeof(float));                                   \
        }                                                                                          \
    } while (0)

/* d[i] = EXPR(x = a[i]); streaming stores (after an unaligned head) when asked. */
#define EWS_MAP1(EXPR)                                                                             \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        if (stream) {                                                                              \
            int64_t h_ = (int64_t)(((uintptr_t)0 - (uintptr_t)d) % sizeof(V)) / 4;               \
            if (h_ > n) h_ = n;                                                                    \
            EWS_PART1(EXPR, 0, h_);                                                                \
            for (i = h_; i + W <= n; i += W) {                                                     \
                V x = LD(a + i);                                                                   \
                STNT(d + i, EXPR);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            for (; i + W <= n; i += W) {                                                           \
                V x = LD(a + i);                                                                   \
                ST(d + i, EXPR);                                                                   \
            }                                                                                      \
        }                                                                                          \
        EWS_PART1(EXPR, i, n);                                                                     \
    } while (0)

#define EWS_PART2(EXPR, from, to)                                                                  \
    do {                                                                                           \
        int64_t m_ = (to) - (from);                                                                \
        if (m_ > 0) {                                                                              \
            float ta_[W] = {0}, tb_[W] = {0}, td_[W];                                              \
            memcpy(ta_, a + (from), (size_t)m_ * sizeof(float));                                   \
            memcpy(tb_, b + (from), (size_t)m_ * sizeof(float));                                   \
            V x = LD(ta_), y = LD(tb_);                                                            \
            ST(td_, EXPR);                                                                         \
            memcpy(d + (from), td_, (size_t)m_ * sizeof(float));                                   \
        }                                                                                          \
    } while (0)

#define EWS_MAP2(EXPR)                                                                             \
    do {                                                                                           \
        int64_t i = 0;                                                                             \
        if (stream) {                                                                              \
            int64_t h_ = (int64_t)(((uintptr_t)0 - (uintptr_t)d) % sizeof(V)) / 4;               \
            if (h_ > n) h_ = n;                                                                    \
            EWS_PART2(EXPR, 0, h_);                                                                \
            for (i = h_; i + W <= n; i += W) {                                                     \
                V x = LD(a + i), y = LD(b + i);                                                    \
                STNT(d + i, EXPR);                                                                 \
            }                                                                                      \
        } else {                                                                                   \
            for (; i + W <= n; i += W) {                                                           \
                V x = LD(a + i), y = LD(b + i);                                                    \
                ST(d + i, EXPR);                                                                   \
            }                                                                                      \
        }                                                                                          \
        EWS_PART2(EXPR, i, n);                                                                     \
    } while (0)

EWS_FN void EWS(vv)(ct_op_kind k, float *d, const float *a, const float *b, int64_t n, bool stream)
{
    switch (k) {
    case CT_OP_ADD: EWS_MAP2(ADD(x, y)); break;
    case CT_OP_SUB: EWS_MAP2(SUB(x, y)); break;
    case CT_OP_MUL: EWS_MAP2(MUL(x, y)); break;
    case CT_OP_DIV: EWS_MAP2(DIV(x, y)); break;
    case CT_OP_MAXIMUM: EWS_MAP2(EWS(v_maximum)(x, y)); break;
    case CT_OP_MINIMUM: EWS_MAP2(EWS(v_minimum)(x, y)); break;
    case CT_OP_SWIGLU: EWS_MAP2(MUL(EWS(v_silu)(x), y)); break;
    case CT_OP_GEGLU: EWS_MAP2(MUL(EWS(v_gelu_tanh)(x), y)); break;
    default: ew_portable_vv(k, d, a, b, n, false); return;
    }
    if (stream) _mm_sfence();
}

EWS_FN void EWS(vs)(ct_op_kind k, float *d, const float *a, float s, bool rev, int64_t n, bool stream)
{
    V sv = SET1(s);
    switch (k) {
    case CT_OP_ADD: EWS_MAP1(ADD(x, sv)); break;
    case CT_OP_MUL: EWS_MAP1(MUL(x, sv)); break;
    case CT_OP_SUB:
        if (rev) EWS_MAP1(SUB(sv, x));
        else EWS_MAP1(SUB(x, sv));
        break;
    case CT_OP_DIV:
        if (rev) EWS_MAP1(DIV(sv, x));
        else EWS_MAP1(DIV(x, sv));
        break;
    case CT_OP_MAXIMUM:
        if (rev) EWS_MAP1(EWS(v_maximum)(sv, x));
        else EWS_MAP1(EWS(v_maximum)(x, sv));
        break;
    case CT_OP_MINIMUM:
        if (rev) EWS_MAP1(EWS(v_minimum)(sv, x));
        else EWS_MAP1(EWS(v_minimum)(x, sv));
        break;
    default: ew_portable_vs(k, d, a, s, rev, n, false); return;
    }
    if (stream) _mm_sfence();
}

EWS_FN void EWS(unary)(ct_op_kind k, float *d, const float *a, int64_t n, float p0, float p1, bool stream)
{
    V sign = SET1(-0.0f), one = SET1(1.0f), lo = SET1(p0), hi = SET1(p1);
    switch (k) {
    case CT_OP_NEG: EWS_MAP1(XORV(x, sign)); break;
    case CT_OP_ABS: EWS_MAP1(ANDNOTV(sign, x)); break;
    case CT_OP_EXP: EWS_MAP1(EWS(v_exp)(x)); break;
    case CT_OP_SQRT: EWS_MAP1(SQRT(x)); break;
    case CT_OP_RSQRT: EWS_MAP1(DIV(one, SQRT(x))); break;
    case CT_OP_RELU: EWS_MAP1(MAXV(ZERO(), x)); break; /* NaN (second operand) passes */
    case CT_OP_CLAMP: EWS_MAP1(EWS(v_clamp)(x, lo, hi)); break;
    case CT_OP_SIGMOID: EWS_MAP1(EWS(v_sigmoid)(x)); break;
    case CT_OP_SILU: EWS_MAP1(EWS(v_silu)(x)); break;
    case CT_OP_TANH: EWS_MAP1(EWS(v_tanh)(x)); break;
    case CT_OP_GELU:
        if (p0 != 0.0f) EWS_MAP1(EWS(v_gelu_tanh)(x));
        else EWS_MAP1(EWS(v_gelu_erf)(x));
        break;
    default: ew_portable_unary(k, d, a, n, p0, p1, false); return;
    }
    if (stream) _mm_sfence();
}

EWS_FN float EWS(max)(const float *a, int64_t n)
{
    V acc = SET1(-INFINITY);
    int64_t i = 0;
    for (; i + W <= n; i += W) acc = MAXV(acc, LD(a + i));
    float t[W];
    ST(t, acc);
    float m = -INFINITY;
    for (int l = 0; l < W; l++) m = t[l] > m ? t[l] : m;
    for (; i < n; i++) m = a[i] > m ? a[i] : m;
    return m;
}

/* Lanes sum blocks of 1024 in f32 (small error); the row total is kept in double. */
EWS_FN double EWS(exp_sum)(float *d, const float *a, float m, int64_t n)
{
    V mv = SET1(m);
    double total = 0.0;
    int64_t i = 0;
    while (i < n) {
        int64_t end = n - i > 1024 ? i + 1024 : n;
        V acc = ZERO();
        for (; i + W <= end; i += W) {
            V e = EWS(v_exp_neg)(SUB(LD(a + i), mv));
            if (d) ST(d + i, e);
            acc = ADD(acc, e);
        }
        if (i < end) {
            float ta[W], td[W];
            int64_t r = end - i;
            for (int l = 0; l < W; l++) ta[l] = l < r ? a[i + l] : -INFINITY; /* exp(-inf - m) = 0 */
            V e = EWS(v_exp_neg)(SUB(LD(ta), mv));
            ST(td, e);
            if (d) memcpy(d + i, td, (size_t)r * sizeof(float));
            acc = ADD(acc, e);
            i = end;
        }
        total += HSUM(acc);
    }
    return total;
}

#undef EWS_PART1
#undef EWS_MAP1
#undef EWS_PART2
#undef EWS_MAP2
