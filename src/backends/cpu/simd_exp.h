/* exp over a vector type, written once over elementwise_simd.h's macro vocabulary: the
 * includer defines EWS(name), EWS_FN, V, SET1 MUL MAXV MINV FMA FNMA ROUND and either
 * EWS_SCALEF(p,n) or VI ZERO IADD ISUB ISRAI ISLLI ISET1 CVTI ITOF SEL_LT. Included by
 * elementwise_simd.h (every element-wise exp) and by attention_tile.c (the softmax of
 * prefill attention), so both round alike.
 * No include guard on purpose. */

/* e^r for x = n*ln2 + r, |r| <= ln2/2 (n returned through *pn): the degree-7 Taylor
 * polynomial, truncation < 1e-8. */
EWS_FN V EWS(v_exp_red)(V x, V *pn)
{
    V n = ROUND(MUL(x, SET1(1.44269504088896341f)));
    V r = FNMA(n, SET1(0.693359375f), x); /* ln2 split so n*hi is exact */
    r = FNMA(n, SET1(-2.12194440e-4f), r);
    V p = SET1(1.0f / 5040.0f);
    p = FMA(p, r, SET1(1.0f / 720.0f));
    p = FMA(p, r, SET1(1.0f / 120.0f));
    p = FMA(p, r, SET1(1.0f / 24.0f));
    p = FMA(p, r, SET1(1.0f / 6.0f));
    p = FMA(p, r, SET1(0.5f));
    p = FMA(p, r, SET1(1.0f));
    p = FMA(p, r, SET1(1.0f));
    *pn = n;
    return p;
}

/* exp with |relative error| < 2e-7: x = n*ln2 + r, |r| <= ln2/2, e^r by its
 * degree-7 Taylor polynomial (v_exp_red), 2^n applied as two factors
 * so results down in the subnormal range and up to overflow stay right.
 * Clamping first keeps n in [-150, 128]; NaN passes through MINV/MAXV. */
EWS_FN V EWS(v_exp)(V x)
{
    x = MAXV(SET1(-104.0f), MINV(SET1(88.8f), x));
    V n, p = EWS(v_exp_red)(x, &n);
#ifdef EWS_SCALEF
    return EWS_SCALEF(p, n);
#else
    VI ni = CVTI(n), n1 = ISRAI(ni, 1), n2 = ISUB(ni, n1);
    V s1 = ITOF(ISLLI(IADD(n1, ISET1(127)), 23)), s2 = ITOF(ISLLI(IADD(n2, ISET1(127)), 23));
    return MUL(MUL(p, s1), s2);
#endif
}

#ifdef EWS_SCALEF
EWS_FN V EWS(v_exp_neg)(V x) { return EWS(v_exp)(x); }
#else
/* exp for x <= 0 only (softmax's x - max): results below FLT_MIN flush to 0,
 * so n stays in [-126, 0] and one 2^n factor does; same polynomial. */
EWS_FN V EWS(v_exp_neg)(V x)
{
    V lo = SET1(-87.3365447f); /* ln(FLT_MIN) */
    V xc = MAXV(lo, x);
    V n, p = EWS(v_exp_red)(xc, &n);
    V s = ITOF(ISLLI(IADD(CVTI(n), ISET1(127)), 23));
    return SEL_LT(x, lo, ZERO(), MUL(p, s));
}
#endif
