/* conv2d and conv_transpose2d against direct double-precision loops. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

typedef struct conv_case {
    int64_t N, C, H, W, O, kH, kW;
    ct_conv2d_params p;
    bool bias;
} conv_case;

static int def1(int v) { return v ? v : 1; }

/* The input as a view: 0 contiguous, 1 transposed H/W storage, 2 every other channel. */
static ct_tensor *conv_input(th_rng *r, const conv_case *c, ct_dtype dt, int layout)
{
    ct_tensor *base, *x = NULL;
    if (layout == 0) return th_random(r, 4, (int64_t[]){c->N, c->C, c->H, c->W}, dt, -1, 1);
    if (layout == 1) {
        base = th_random(r, 4, (int64_t[]){c->N, c->C, c->W, c->H}, dt, -1, 1);
        CHECK_OK(ct_transpose(base, 2, 3, &x));
    } else {
        base = th_random(r, 4, (int64_t[]){c->N, 2 * c->C, c->H, c->W}, dt, -1, 1);
        CHECK_OK(ct_slice(base, 1, 1, 2 * c->C, 2, &x));
    }
    ct_tensor_free(base);
    return x;
}

static void conv_ref(const conv_case *c, const double *x, const double *w, const double *b, int64_t Ho, int64_t Wo,
                     double *y)
{
    int G = def1(c->p.groups);
    int64_t Cg = c->C / G, Og = c->O / G;
    int sh = def1(c->p.stride[0]), sw = def1(c->p.stride[1]), dh = def1(c->p.dilation[0]), dw = def1(c->p.dilation[1]);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t oh = 0; oh < Ho; oh++)
                for (int64_t ow = 0; ow < Wo; ow++) {
                    double acc = b ? b[o] : 0;
                    int64_t g = o / Og;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t kh = 0; kh < c->kH; kh++)
                            for (int64_t kw = 0; kw < c->kW; kw++) {
                                int64_t ih = oh * sh - c->p.padding[0] + kh * dh, iw = ow * sw - c->p.padding[1] + kw * dw;
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) continue;
                                acc += x[((n * c->C + g * Cg + ci) * c->H + ih) * c->W + iw] *
                                       w[((o * Cg + ci) * c->kH + kh) * c->kW + kw];
                            }
                    y[((n * c->O + o) * Ho + oh) * Wo + ow] = acc;
                }
}

static void test_conv2d(void)
{
    th_rng r = {101};
    conv_case cases[] = {
        {2, 3, 7, 6, 4, 3, 3, {{0, 0}, {1, 1}, {0, 0}, 0, {0, 0}}, true},
        {2, 5, 4, 3, 6, 1, 1, {{0, 0}, {0, 0}, {0, 0}, 0, {0, 0}}, true},                                   /* 1x1: direct GEMM path when dense */
        {1, 2, 9, 8, 3, 2, 2, {{3, 3}, {0, 0}, {0, 0}, 1, {0, 0}}, false},     /* stride > kernel */
        {1, 2, 9, 10, 2, 3, 2, {{1, 2}, {2, 1}, {2, 3}, 1, {0, 0}}, true},     /* dilation, asymmetric */
        {2, 4, 5, 5, 6, 3, 3, {{2, 1}, {1, 0}, {0, 0}, 2, {0, 0}}, true},      /* groups 2 */
        {1, 4, 6, 6, 8, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 4, {0, 0}}, true},      /* depthwise x2 */
        {0, 3, 5, 5, 2, 3, 3, {{0, 0}, {0, 0}, {0, 0}, 0, {0, 0}}, true},                                    /* N = 0 */
        {1, 1, 1, 1, 1, 1, 1, {{0, 0}, {0, 0}, {0, 0}, 0, {0, 0}}, false},                                   /* all ones */
        {1, 3, 4, 4, 2, 5, 5, {{1, 1}, {2, 2}, {0, 0}, 1, {0, 0}}, false},     /* kernel larger than input, padded */
        {1, 3, 200, 200, 2, 3, 3, {{1, 1}, {1, 1}, {0, 0}, 1, {0, 0}}, true},  /* several column tiles */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int layout = 0; layout < 3; layout++) {
            const conv_case *c = &cases[ci];
            if (c->H * c->W > 1000 && layout) continue;
            ct_dtype dt = layout == 2 ? CT_F64 : CT_F32;
            int G = def1(c->p.groups);
            ct_tensor *x = conv_input(&r, c, dt, layout), *y = NULL;
            ct_tensor *w = th_random(&r, 4, (int64_t[]){c->O, c->C / G, c->kH, c->kW}, dt, -1, 1);
            ct_tensor *b = c->bias ? th_random(&r, 1, &c->O, dt, -1, 1) : NULL;
            CHECK_OK(ct_conv2d(x, w, b, &c->p, &y));
            if (!y) continue;
            int64_t Ho = (c->H + 2 * c->p.padding[0] - def1(c->p.dilation[0]) * (c->kH - 1) - 1) / def1(c->p.stride[0]) + 1;
            int64_t Wo = (c->W + 2 * c->p.padding[1] - def1(c->p.dilation[1]) * (c->kW - 1) - 1) / def1(c->p.stride[1]) + 1;
            const int64_t *ys = ct_tensor_shape(y);
            CHECK(ct_tensor_ndim(y) == 4 && ys[0] == c->N && ys[1] == c->O && ys[2] == Ho && ys[3] == Wo);
            CHECK(ct_tensor_dtype(y) == dt);
            int64_t n = c->N * c->O * Ho * Wo;
            double *xv = th_values(x), *wv = th_values(w), *bv = b ? th_values(b) : NULL, *yv = th_values(y);
            double *want = malloc(sizeof(double) * (size_t)(n + 1));
            conv_ref(c, xv, wv, bv, Ho, Wo, want);
            /* f32: sums of <= 76 products of values in [-1, 1]: error < 76 * 2^-24 * 76 ~ 4e-4 worst case, ~1e-6 typical */
            double tol = dt == CT_F64 ? 1e-12 : 1e-4;
            CHECK_MSG(th_allclose(yv, want, n, tol, tol), "case %zu layout %d", ci, layout);
            free(xv), free(wv), free(bv), free(yv), free(want);
            ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(y);
        }
}

static void convt_ref(const conv_case *c, const double *x, const double *w, const double *b, int64_t Ho, int64_t Wo,
                      double *y)
{
    int G = def1(c->p.groups);
    int64_t Cg = c->C / G, Og = c->O / G;
    int sh = def1(c->p.stride[0]), sw = def1(c->p.stride[1]), dh = def1(c->p.dilation[0]), dw = def1(c->p.dilation[1]);
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t i = 0; i < Ho * Wo; i++) y[(n * c->O + o) * Ho * Wo + i] = b ? b[o] : 0;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t ch = 0; ch < c->C; ch++)
            for (int64_t ih = 0; ih < c->H; ih++)
                for (int64_t iw = 0; iw < c->W; iw++) {
                    double xv = x[((n * c->C + ch) * c->H + ih) * c->W + iw];
                    int64_t g = ch / Cg;
                    for (int64_t o = 0; o < Og; o++)
                        for (int64_t kh = 0; kh < c->kH; kh++)
                            for (int64_t kw = 0; kw < c->kW; kw++) {
                                int64_t oh = ih * sh - c->p.padding[0] + kh * dh, ow = iw * sw - c->p.padding[1] + kw * dw;
                                if (oh < 0 || oh >= Ho || ow < 0 || ow >= Wo) continue;
                                y[((n * c->O + g * Og + o) * Ho + oh) * Wo + ow] += xv * w[((ch * Og + o) * c->kH + kh) * c->kW + kw];
                            }
                }
}

static void test_conv_transpose2d(void)
{
    th_rng r = {103};
    conv_case cases[] = {
        {2, 3, 4, 5, 4, 3, 3, {{1, 1}, {0, 0}, {0, 0}, 0, {0, 0}}, true},
        {1, 2, 4, 3, 3, 3, 3, {{2, 2}, {1, 1}, {0, 0}, 1, {1, 1}}, true},      /* stride 2, output_padding */
        {1, 4, 3, 3, 6, 2, 3, {{3, 2}, {0, 1}, {2, 1}, 2, {1, 0}}, false},     /* groups, dilation */
        {2, 4, 5, 4, 4, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 4, {0, 0}}, true},      /* depthwise */
        {1, 3, 3, 3, 2, 1, 1, {{3, 3}, {0, 0}, {0, 0}, 1, {2, 2}}, true},      /* 1x1, stride > kernel */
        {0, 2, 3, 3, 2, 3, 3, {{0, 0}, {0, 0}, {0, 0}, 0, {0, 0}}, true},                                    /* N = 0 */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int layout = 0; layout < 3; layout++) {
            const conv_case *c = &cases[ci];
            ct_dtype dt = layout == 2 ? CT_F64 : CT_F32;
            int G = def1(c->p.groups);
            ct_tensor *x = conv_input(&r, c, dt, layout), *y = NULL;
            ct_tensor *w = th_random(&r, 4, (int64_t[]){c->C, c->O / G, c->kH, c->kW}, dt, -1, 1);
            ct_tensor *b = c->bias ? th_random(&r, 1, &c->O, dt, -1, 1) : NULL;
            CHECK_OK(ct_conv_transpose2d(x, w, b, &c->p, &y));
            if (!y) continue;
            int64_t Ho = (c->H - 1) * def1(c->p.stride[0]) - 2 * c->p.padding[0] + def1(c->p.dilation[0]) * (c->kH - 1) +
                         c->p.output_padding[0] + 1;
            int64_t Wo = (c->W - 1) * def1(c->p.stride[1]) - 2 * c->p.padding[1] + def1(c->p.dilation[1]) * (c->kW - 1) +
                         c->p.output_padding[1] + 1;
            const int64_t *ys = ct_tensor_shape(y);
            CHECK(ys[0] == c->N && ys[1] == c->O && ys[2] == Ho && ys[3] == Wo);
            int64_t n = c->N * c->O * Ho * Wo;
            double *xv = th_values(x), *wv = th_values(w), *bv = b ? th_values(b) : NULL, *yv = th_values(y);
            double *want = malloc(sizeof(double) * (size_t)(n + 1));
            convt_ref(c, xv, wv, bv, Ho, Wo, want);
            double tol = dt == CT_F64 ? 1e-12 : 1e-5; /* f32: at most ~36 products in [-1, 1] per output */
            CHECK_MSG(th_allclose(yv, want, n, tol, tol), "case %zu layout %d", ci, layout);
            free(xv), free(wv), free(bv), free(yv), free(want);
            ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(y);
        }
}

/* f16/bf16 operands stay half (the result too): products and sums in f32 and one rounding,
 * against the double loops on the same (half) values. An f32 bias is added unrounded.
 * Tolerance: the output's rounding, half an ulp (relative 2^-11 for f16, 2^-8 for bf16),
 * with half as much again for the f32 sums (< 1e-6 relative on 19 terms), and 1e-6 absolute
 * for outputs near zero. */
static void test_conv_half(void)
{
    th_rng r = {102};
    conv_case c = {2, 4, 5, 6, 6, 3, 3, {{2, 1}, {1, 1}, {1, 2}, 2, {0, 0}}, true};
    conv_case ct = {2, 4, 4, 3, 6, 3, 2, {{2, 1}, {1, 0}, {1, 1}, 2, {1, 0}}, true};
    const ct_dtype dts[] = {CT_F16, CT_BF16};
    for (int di = 0; di < 2; di++)
        for (int tr = 0; tr < 2; tr++)
            for (int layout = 0; layout < 3; layout++) {
                const conv_case *k = tr ? &ct : &c;
                ct_dtype dt = dts[di], bdt = layout == 1 ? CT_F32 : dt;
                int64_t G = k->p.groups, wsh[4] = {tr ? k->C : k->O, tr ? k->O / G : k->C / G, k->kH, k->kW};
                ct_tensor *x = conv_input(&r, k, dt, layout), *y = NULL;
                ct_tensor *w = th_random(&r, 4, wsh, dt, -1, 1), *b = th_random(&r, 1, &k->O, bdt, -1, 1);
                CHECK_OK(tr ? ct_conv_transpose2d(x, w, b, &k->p, &y) : ct_conv2d(x, w, b, &k->p, &y));
                if (!y) continue;
                CHECK(ct_tensor_dtype(y) == dt);
                const int64_t *ys = ct_tensor_shape(y);
                int64_t n = ys[0] * ys[1] * ys[2] * ys[3];
                double *xv = th_values(x), *wv = th_values(w), *bv = th_values(b), *yv = th_values(y);
                double *want = malloc(sizeof(double) * (size_t)n);
                if (tr) convt_ref(k, xv, wv, bv, ys[2], ys[3], want);
                else conv_ref(k, xv, wv, bv, ys[2], ys[3], want);
                double rtol = 1.5 * (dt == CT_F16 ? 1.0 / 2048 : 1.0 / 256);
                CHECK_MSG(th_allclose(yv, want, n, 1e-6, rtol), "%s %s layout %d", tr ? "conv_transpose2d" : "conv2d",
                          ct_dtype_name(dt), layout);
                free(xv), free(wv), free(bv), free(yv), free(want);
                ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(b), ct_tensor_free(y);
            }
}

static void test_conv_errors(void)
{
    th_rng r = {104};
    ct_tensor *x = th_random(&r, 4, (int64_t[]){1, 4, 5, 5}, CT_F32, -1, 1), *y = NULL;
    ct_tensor *x3 = th_random(&r, 3, (int64_t[]){4, 5, 5}, CT_F32, -1, 1);
    ct_tensor *w = th_random(&r, 4, (int64_t[]){6, 4, 3, 3}, CT_F32, -1, 1);
    ct_tensor *w3 = th_random(&r, 4, (int64_t[]){6, 3, 3, 3}, CT_F32, -1, 1);
    ct_tensor *wg = th_random(&r, 4, (int64_t[]){6, 2, 3, 3}, CT_F32, -1, 1);
    ct_tensor *wbig = th_random(&r, 4, (int64_t[]){6, 4, 7, 3}, CT_F32, -1, 1);
    ct_tensor *b5 = th_random(&r, 1, (int64_t[]){5}, CT_F32, -1, 1), *xi = NULL;
    CHECK_OK(ct_zeros(4, (int64_t[]){1, 4, 5, 5}, CT_I32, &xi));
    CHECK_STATUS(ct_conv2d(x3, w, NULL, NULL, &y), CT_ERR_SHAPE);           /* rank */
    CHECK_STATUS(ct_conv2d(x, w3, NULL, NULL, &y), CT_ERR_SHAPE);           /* channel mismatch */
    CHECK_STATUS(ct_conv2d(x, wg, NULL, &(ct_conv2d_params){.groups = 3}, &y), CT_ERR_SHAPE); /* 3 does not divide 4 */
    CHECK_STATUS(ct_conv2d(x, wg, NULL, &(ct_conv2d_params){.groups = 4}, &y), CT_ERR_SHAPE); /* wrong C/groups */
    CHECK_STATUS(ct_conv2d(x, wbig, NULL, NULL, &y), CT_ERR_SHAPE);         /* kernel larger than padded input */
    CHECK_STATUS(ct_conv2d(x, w, b5, NULL, &y), CT_ERR_SHAPE);              /* bias length */
    CHECK_STATUS(ct_conv2d(xi, w, NULL, NULL, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_conv2d(x, w, NULL, &(ct_conv2d_params){.padding = {-1, 0}}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_conv2d(x, w, NULL, &(ct_conv2d_params){.groups = -2}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_conv2d(x, w, NULL, &(ct_conv2d_params){.output_padding = {1, 0}}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_conv2d(NULL, w, NULL, NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_conv2d(x, w, NULL, NULL, NULL), CT_ERR_INVALID_ARG);
    /* transposed: w [C, O/groups, kH, kW] */
    ct_tensor *wt = th_random(&r, 4, (int64_t[]){4, 3, 3, 3}, CT_F32, -1, 1);
    CHECK_STATUS(ct_conv_transpose2d(x, w, NULL, NULL, &y), CT_ERR_SHAPE);  /* w rows != C */
    CHECK_STATUS(ct_conv_transpose2d(x, wt, NULL, &(ct_conv2d_params){.groups = 3}, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_conv_transpose2d(x, wt, NULL, &(ct_conv2d_params){.stride = {2, 2}, .output_padding = {2, 0}}, &y),
                 CT_ERR_INVALID_ARG);                                       /* output_padding >= stride and dilation */
    CHECK_STATUS(ct_conv_transpose2d(x, wt, NULL, &(ct_conv2d_params){.padding = {5, 5}}, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_conv_transpose2d(x3, wt, NULL, NULL, &y), CT_ERR_SHAPE);
    ct_tensor *xs[] = {x, x3, w, w3, wg, wbig, b5, xi, wt};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) ct_tensor_free(xs[i]);
}

int main(void)
{
    RUN(test_conv2d);
    RUN(test_conv_half);
    RUN(test_conv_transpose2d);
    RUN(test_conv_errors);
    return th_finish();
}
