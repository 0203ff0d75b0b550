/* complex64: construction, parts, conjugate, magnitude, arithmetic (with
 * broadcasting, strided views and real operands promoted), scalar forms,
 * equality, where, and the dtype errors; against double references. */
#include "ew_support.h"

/* (re, im) pairs of a c64 tensor, row-major (caller frees). */
static float *c64_values(const ct_tensor *t)
{
    int64_t n = ct_tensor_numel(t);
    float *v = malloc(sizeof(float) * 2 * (size_t)(n ? n : 1));
    ew_ok(ct_tensor_to_host(t, v, sizeof(float) * 2 * (size_t)n));
    return v;
}

/* A random c64 tensor built with ct_complex from f32 parts; lay applies to the result's view. */
static ct_tensor *c64_make(th_rng *r, int ndim, const int64_t *shape, double lo, double hi, ew_layout lay)
{
    ct_tensor *re = ew_make(r, ndim, shape, CT_F32, lo, hi, EW_CONTIG, false);
    ct_tensor *im = ew_make(r, ndim, shape, CT_F32, lo, hi, EW_CONTIG, false), *z = NULL, *v = NULL;
    ew_ok(ct_complex(re, im, &z));
    ct_tensor_free(re);
    ct_tensor_free(im);
    if (lay == EW_TRANSPOSED && ndim >= 2) {
        /* the same values seen through a transposed view of a transposed copy */
        ct_tensor *t = NULL, *c = NULL;
        ew_ok(ct_transpose(z, ndim - 2, ndim - 1, &t));
        ew_ok(ct_contiguous(t, &c));
        ew_ok(ct_transpose(c, ndim - 2, ndim - 1, &v));
        ct_tensor_free(t);
        ct_tensor_free(c);
        ct_tensor_free(z);
        return v;
    }
    return z;
}

/* |got - want| per component within a few f32 ulps of the magnitude. */
static void check_c64(const ct_tensor *t, const double *want, int64_t n, const char *label)
{
    CHECK_MSG(t && ct_tensor_dtype(t) == CT_C64 && ct_tensor_numel(t) == n, "%s: wrong result dtype/size", label);
    if (!t || ct_tensor_dtype(t) != CT_C64 || ct_tensor_numel(t) != n) return;
    float *g = c64_values(t);
    for (int64_t i = 0; i < n; i++) {
        double mag = hypot(want[2 * i], want[2 * i + 1]);
        double tol = 1e-6 + 4e-7 * mag; /* one or two f32 roundings of a value of size mag */
        bool ok = fabs(g[2 * i] - want[2 * i]) <= tol && fabs(g[2 * i + 1] - want[2 * i + 1]) <= tol;
        if (!ok) {
            CHECK_MSG(ok, "%s at %lld: got (%g, %g) want (%g, %g)", label, (long long)i, g[2 * i], g[2 * i + 1],
                      want[2 * i], want[2 * i + 1]);
            break;
        }
    }
    free(g);
}

static void test_complex_parts(void)
{
    th_rng r = {21};
    int64_t s[2] = {5, 7}, row[1] = {7};
    /* ct_complex broadcasts its parts and casts float parts to f32 */
    ct_tensor *re = ew_make(&r, 2, s, CT_F32, -3, 3, EW_TRANSPOSED, false);
    ct_tensor *im = ew_make(&r, 1, row, CT_F64, -3, 3, EW_SLICED, false), *z = NULL;
    CHECK_OK(ct_complex(re, im, &z));
    double *rv = ew_values(re), *iv = ew_values(im), want[70];
    for (int i = 0; i < 35; i++) {
        want[2 * i] = rv[i];
        want[2 * i + 1] = (float)iv[i % 7];
    }
    check_c64(z, want, 35, "complex(re, im)");
    ct_tensor *zt = NULL, *pr = NULL, *pi = NULL, *cj = NULL, *ab = NULL, *ng = NULL;
    CHECK_OK(ct_transpose(z, 0, 1, &zt)); /* strided c64 source */
    CHECK_OK(ct_real(zt, &pr));
    CHECK_OK(ct_imag(zt, &pi));
    CHECK_OK(ct_conj(zt, &cj));
    CHECK_OK(ct_abs(zt, &ab));
    CHECK_OK(ct_neg(zt, &ng));
    double wr[35], wi[35], wc[70], wa[35], wn[70];
    for (int i = 0; i < 35; i++) {
        int src = (i % 5) * 7 + i / 5; /* element (i/5, i%5) of the [7, 5] transpose */
        wr[i] = want[2 * src];
        wi[i] = want[2 * src + 1];
        wc[2 * i] = wr[i];
        wc[2 * i + 1] = -wi[i];
        wn[2 * i] = -wr[i];
        wn[2 * i + 1] = -wi[i];
        wa[i] = hypot(wr[i], wi[i]);
    }
    ew_check(pr, CT_F32, wr, 35, 0, 0, "real");
    ew_check(pi, CT_F32, wi, 35, 0, 0, "imag");
    ew_check(ab, CT_F32, wa, 35, 0, 4e-7, "abs"); /* one f32 rounding */
    check_c64(cj, wc, 35, "conj");
    check_c64(ng, wn, 35, "neg");
    /* real/conj of a real tensor are the tensor itself (as torch) */
    ct_tensor *rr = NULL, *rc = NULL;
    CHECK_OK(ct_real(re, &rr));
    CHECK_OK(ct_conj(re, &rc));
    ew_check(rr, CT_F32, rv, 35, 0, 0, "real of f32");
    ew_check(rc, CT_F32, rv, 35, 0, 0, "conj of f32");
    ct_tensor *all[] = {re, im, z, zt, pr, pi, cj, ab, ng, rr, rc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    free(rv);
    free(iv);
}

typedef ct_status (*bin_fn)(const ct_tensor *, const ct_tensor *, ct_tensor **);

static void ref_c(int op, double ar, double ai, double br, double bi, double *r, double *i)
{
    switch (op) {
    case 0: *r = ar + br; *i = ai + bi; break;
    case 1: *r = ar - br; *i = ai - bi; break;
    case 2: *r = ar * br - ai * bi; *i = ar * bi + ai * br; break;
    default: {
        double d = br * br + bi * bi;
        *r = (ar * br + ai * bi) / d;
        *i = (ai * br - ar * bi) / d;
    }
    }
}

static void test_complex_arith(void)
{
    th_rng r = {22};
    bin_fn fns[4] = {ct_add, ct_sub, ct_mul, ct_div};
    const char *names[4] = {"add", "sub", "mul", "div"};
    static const struct { int na; int64_t a[3]; int nb; int64_t b[3]; } shapes[] = {
        {2, {4, 6}, 2, {4, 6}}, {3, {2, 1, 5}, 2, {3, 1}}, {2, {0, 3}, 1, {3}}, {1, {1}, 0, {0}}, {2, {301, 400}, 1, {400}},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        ew_layout la = si % 2 ? EW_TRANSPOSED : EW_CONTIG;
        ct_tensor *a = c64_make(&r, shapes[si].na, shapes[si].a, -4, 4, la);
        ct_tensor *b = c64_make(&r, shapes[si].nb, shapes[si].b, 0.5, 3, EW_CONTIG);
        /* a real f32 operand promotes to c64 with imaginary part 0 */
        ct_tensor *br = ew_make(&r, shapes[si].nb, shapes[si].b, CT_F32, 0.5, 3, EW_SLICED, false);
        int na = shapes[si].na, nb = shapes[si].nb, on = na > nb ? na : nb;
        int64_t os[3], n = 1;
        for (int d = 0; d < on; d++) {
            int ia = d - (on - na), ib = d - (on - nb);
            int64_t da = ia >= 0 ? shapes[si].a[ia] : 1, db = ib >= 0 ? shapes[si].b[ib] : 1;
            os[d] = da == 1 ? db : da;
            n *= os[d];
        }
        float *av = c64_values(a), *bv = c64_values(b);
        double *rv = ew_values(br), *want = malloc(sizeof(double) * 2 * (size_t)(n ? n : 1));
        for (int op = 0; op < 4; op++) {
            for (int real_b = 0; real_b < 2; real_b++) {
                for (int64_t i = 0; i < n; i++) {
                    int64_t ia = ew_bidx(i, on, os, na, shapes[si].a), ib = ew_bidx(i, on, os, nb, shapes[si].b);
                    ref_c(op, av[2 * ia], av[2 * ia + 1], real_b ? rv[ib] : bv[2 * ib], real_b ? 0 : bv[2 * ib + 1],
                          &want[2 * i], &want[2 * i + 1]);
                }
                ct_tensor *out = NULL;
                CHECK_OK(fns[op](a, real_b ? br : b, &out));
                char label[96];
                snprintf(label, sizeof label, "c64 %s, shape %zu%s", names[op], si, real_b ? ", real b" : "");
                check_c64(out, want, n, label);
                ct_tensor_free(out);
            }
        }
        free(av);
        free(bv);
        free(rv);
        free(want);
        ct_tensor_free(a);
        ct_tensor_free(b);
        ct_tensor_free(br);
    }
}

static void test_complex_scalar_and_compare(void)
{
    th_rng r = {23};
    int64_t s[2] = {6, 5};
    ct_tensor *z = c64_make(&r, 2, s, -3, 3, EW_TRANSPOSED);
    float *zv = c64_values(z);
    ct_status (*fns[5])(const ct_tensor *, double, ct_tensor **) = {ct_add_scalar, ct_sub_scalar, ct_mul_scalar,
                                                                     ct_div_scalar, ct_pow_scalar};
    const double sc[5] = {1.5, -2, 3, -4, 2};
    double want[60];
    for (int op = 0; op < 5; op++) {
        for (int i = 0; i < 30; i++) {
            double a = zv[2 * i], b = zv[2 * i + 1];
            if (op == 4) ref_c(2, a, b, a, b, &want[2 * i], &want[2 * i + 1]); /* z**2 = z*z */
            else ref_c(op, a, b, sc[op], 0, &want[2 * i], &want[2 * i + 1]);
        }
        ct_tensor *out = NULL;
        CHECK_OK(fns[op](z, sc[op], &out));
        char label[64];
        snprintf(label, sizeof label, "c64 scalar op %d", op);
        check_c64(out, want, 30, label);
        ct_tensor_free(out);
    }
    /* equality: z == z, z != conj(z) where im != 0, z == real scalar */
    ct_tensor *cj = NULL, *eq = NULL, *ne = NULL, *eqs = NULL;
    CHECK_OK(ct_conj(z, &cj));
    CHECK_OK(ct_eq(z, z, &eq));
    CHECK_OK(ct_ne(z, cj, &ne));
    double w1[30], w2[30], w3[3] = {1, 1, 0};
    for (int i = 0; i < 30; i++) {
        w1[i] = 1;
        w2[i] = zv[2 * i + 1] != 0;
    }
    ew_check(eq, CT_BOOL, w1, 30, 0, 0, "c64 eq");
    ew_check(ne, CT_BOOL, w2, 30, 0, 0, "c64 ne");
    float pairs[6] = {2, 0, 2, 0, 2, 1};
    int64_t n3 = 3;
    ct_tensor *zz = NULL;
    CHECK_OK(ct_tensor_from_data(1, &n3, CT_C64, pairs, &zz));
    CHECK_OK(ct_compare_scalar(zz, CT_CMP_EQ, 2, &eqs));
    ew_check(eqs, CT_BOOL, w3, 3, 0, 0, "c64 == 2");
    /* where picks whole complex elements */
    uint8_t cv[3] = {1, 0, 1};
    ct_tensor *cond = NULL, *wh = NULL, *c2 = NULL;
    CHECK_OK(ct_tensor_from_data(1, &n3, CT_BOOL, cv, &cond));
    CHECK_OK(ct_conj(zz, &c2));
    CHECK_OK(ct_where(cond, zz, c2, &wh));
    double ww[6] = {2, 0, 2, -0.0, 2, 1};
    check_c64(wh, ww, 3, "c64 where");
    ct_tensor *all[] = {z, cj, eq, ne, eqs, zz, cond, wh, c2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    free(zv);
}

static void test_complex_errors(void)
{
    th_rng r = {24};
    int64_t s[2] = {2, 3}, s4[1] = {4};
    ct_tensor *z = c64_make(&r, 2, s, -1, 1, EW_CONTIG), *f = ew_make(&r, 2, s, CT_F32, -1, 1, EW_CONTIG, false);
    ct_tensor *i32 = ew_make(&r, 2, s, CT_I32, -3, 3, EW_CONTIG, true), *f4 = ew_make(&r, 1, s4, CT_F32, 0, 1, EW_CONTIG, false);
    ct_tensor *out = NULL;
    CHECK_STATUS(ct_complex(i32, f, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_complex(z, f, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_complex(f, f4, &out), CT_ERR_SHAPE);
    CHECK_STATUS(ct_complex(NULL, f, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_complex(f, f, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_imag(f, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_real(NULL, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_conj(z, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_relu(z, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_exp(z, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_maximum(z, z, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_pow(z, z, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_lt(z, z, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_compare_scalar(z, CT_CMP_GE, 0, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_clamp(z, 0, 1, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_mul(z, f4, &out), CT_ERR_SHAPE);
    CHECK(out == NULL);
    ct_tensor_free(z);
    ct_tensor_free(f);
    ct_tensor_free(i32);
    ct_tensor_free(f4);
}

int main(void)
{
    RUN(test_complex_parts);
    RUN(test_complex_arith);
    RUN(test_complex_scalar_and_compare);
    RUN(test_complex_errors);
    return th_finish();
}
