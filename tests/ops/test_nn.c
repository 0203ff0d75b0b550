/* Pooling, batch/layer/RMS norm and embedding against plain double references. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "harness.h"

/* Layouts of a test input: contiguous, every other element of the last dim, or the
 * transpose of the last two dims. */
enum { L_CONTIG, L_SLICED, L_TRANSPOSED };

static ct_tensor *make_input(th_rng *r, int ndim, const int64_t *shape, ct_dtype dt, int layout)
{
    int64_t s[CT_MAX_DIMS];
    memcpy(s, shape, sizeof(int64_t) * (size_t)ndim);
    ct_tensor *base, *v = NULL;
    if (layout == L_CONTIG || ndim < 2) return th_random(r, ndim, shape, dt, -2, 2);
    if (layout == L_SLICED) {
        s[ndim - 1] *= 2;
        base = th_random(r, ndim, s, dt, -2, 2);
        CHECK_OK(ct_slice(base, ndim - 1, 0, s[ndim - 1], 2, &v));
    } else {
        s[ndim - 1] = shape[ndim - 2], s[ndim - 2] = shape[ndim - 1];
        base = th_random(r, ndim, s, dt, -2, 2);
        CHECK_OK(ct_transpose(base, ndim - 1, ndim - 2, &v));
    }
    ct_tensor_free(base);
    return v;
}

static void check_shape(const ct_tensor *t, int ndim, const int64_t *shape)
{
    CHECK(ct_tensor_ndim(t) == ndim);
    for (int i = 0; i < ndim && i < ct_tensor_ndim(t); i++) CHECK(ct_tensor_shape(t)[i] == shape[i]);
}

/* ---- pooling ---- */

static void pool_ref(bool is_max, const double *x, int64_t P, int64_t H, int64_t W, const ct_pool2d_params *p,
                     int64_t Ho, int64_t Wo, double *y)
{
    int sh = p->stride[0] ? p->stride[0] : p->kernel[0], sw = p->stride[1] ? p->stride[1] : p->kernel[1];
    for (int64_t pl = 0; pl < P; pl++)
        for (int64_t oh = 0; oh < Ho; oh++)
            for (int64_t ow = 0; ow < Wo; ow++) {
                double acc = is_max ? -INFINITY : 0;
                int64_t cnt = 0;
                for (int kh = 0; kh < p->kernel[0]; kh++)
                    for (int kw = 0; kw < p->kernel[1]; kw++) {
                        int64_t ih = oh * sh - p->padding[0] + kh, iw = ow * sw - p->padding[1] + kw;
                        if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                        double v = x[(pl * H + ih) * W + iw];
                        acc = is_max ? fmax(acc, v) : acc + v;
                        cnt++;
                    }
                if (!is_max) acc /= p->count_include_pad ? p->kernel[0] * p->kernel[1] : (double)cnt;
                y[(pl * Ho + oh) * Wo + ow] = acc;
            }
}

static void test_pool(void)
{
    th_rng r = {11};
    struct {
        int ndim;
        int64_t shape[4];
        ct_pool2d_params p;
    } cases[] = {
        {4, {2, 3, 7, 6}, {{2, 2}, {0, 0}, {0, 0}, false}},
        {4, {1, 2, 7, 9}, {{3, 3}, {2, 2}, {1, 1}, false}},
        {4, {1, 2, 7, 9}, {{3, 3}, {2, 2}, {1, 1}, true}},
        {4, {2, 1, 8, 8}, {{2, 3}, {3, 4}, {1, 1}, false}}, /* stride > kernel */
        {3, {3, 5, 5}, {{5, 5}, {1, 1}, {2, 2}, true}},
        {4, {1, 1, 1, 1}, {{1, 1}, {1, 1}, {0, 0}, false}},
        {4, {0, 2, 4, 4}, {{2, 2}, {0, 0}, {0, 0}, false}}, /* N = 0 */
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int layout = 0; layout < 3; layout++)
            for (int is_max = 0; is_max < 2; is_max++) {
                ct_dtype dt = layout == 2 ? CT_F64 : CT_F32;
                int nd = cases[ci].ndim;
                const int64_t *sh = cases[ci].shape;
                ct_tensor *x = make_input(&r, nd, sh, dt, layout), *y = NULL;
                const ct_pool2d_params *p = &cases[ci].p;
                ct_status s = is_max ? ct_max_pool2d(x, p, &y) : ct_avg_pool2d(x, p, &y);
                CHECK_OK(s);
                if (s != CT_OK) {
                    ct_tensor_free(x);
                    continue;
                }
                int64_t H = sh[nd - 2], W = sh[nd - 1], P = ct_tensor_numel(x) / (H * W);
                int sH = p->stride[0] ? p->stride[0] : p->kernel[0], sW = p->stride[1] ? p->stride[1] : p->kernel[1];
                int64_t Ho = (H + 2 * p->padding[0] - p->kernel[0]) / sH + 1, Wo = (W + 2 * p->padding[1] - p->kernel[1]) / sW + 1;
                int64_t os[4];
                memcpy(os, sh, sizeof os);
                os[nd - 2] = Ho, os[nd - 1] = Wo;
                check_shape(y, nd, os);
                CHECK(ct_tensor_dtype(y) == dt);
                double *xv = th_values(x), *yv = th_values(y), *want = malloc(sizeof(double) * (size_t)(P * Ho * Wo + 1));
                pool_ref(is_max, xv, P, H, W, p, Ho, Wo, want);
                /* f32 sums of at most 25 values in [-2, 2]: error < 25 * 2 * 2^-24 */
                CHECK_MSG(th_allclose(yv, want, P * Ho * Wo, 1e-5, 1e-6), "case %zu layout %d max %d", ci, layout, is_max);
                free(xv), free(yv), free(want);
                ct_tensor_free(x), ct_tensor_free(y);
            }
    /* NaN propagates through max pooling */
    float v[4] = {1, NAN, 3, 2};
    ct_tensor *x = NULL, *y = NULL;
    CHECK_OK(ct_tensor_from_data(4, (int64_t[]){1, 1, 2, 2}, CT_F32, v, &x));
    CHECK_OK(ct_max_pool2d(x, &(ct_pool2d_params){{2, 2}, {0, 0}, {0, 0}, false}, &y));
    double got = 0;
    CHECK_OK(ct_tensor_item(y, 0, &got));
    CHECK(isnan(got));
    ct_tensor_free(x), ct_tensor_free(y);
}

static void test_pool_errors(void)
{
    th_rng r = {12};
    ct_tensor *x = th_random(&r, 4, (int64_t[]){1, 2, 4, 4}, CT_F32, -1, 1), *y = NULL;
    ct_tensor *x2 = th_random(&r, 2, (int64_t[]){4, 4}, CT_F32, -1, 1);
    ct_tensor *xi = NULL;
    CHECK_OK(ct_zeros(4, (int64_t[]){1, 1, 4, 4}, CT_I32, &xi));
    ct_pool2d_params ok = {{2, 2}, {0, 0}, {0, 0}, false};
    CHECK_STATUS(ct_max_pool2d(x2, &ok, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_max_pool2d(xi, &ok, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_max_pool2d(x, NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_max_pool2d(NULL, &ok, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_avg_pool2d(x, &(ct_pool2d_params){{0, 2}, {0, 0}, {0, 0}, false}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_avg_pool2d(x, &(ct_pool2d_params){{2, 2}, {-1, 1}, {0, 0}, false}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_avg_pool2d(x, &(ct_pool2d_params){{2, 2}, {0, 0}, {2, 0}, false}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_max_pool2d(x, &(ct_pool2d_params){{5, 2}, {0, 0}, {0, 0}, false}, &y), CT_ERR_SHAPE);
    ct_tensor_free(x), ct_tensor_free(x2), ct_tensor_free(xi);
}

/* ---- norms ---- */

static void test_batch_norm(void)
{
    th_rng r = {21};
    int64_t shapes[][4] = {{2, 3, 4, 5}, {4, 3, 0, 0}, {2, 3, 6, 0}, {0, 3, 2, 2}};
    int ndims[] = {4, 2, 3, 4};
    for (int si = 0; si < 4; si++)
        for (int layout = 0; layout < 3; layout++)
            for (int opt = 0; opt < 2; opt++) {
                int nd = ndims[si];
                const int64_t *sh = shapes[si];
                int64_t C = sh[1];
                ct_tensor *x = make_input(&r, nd, sh, layout == 2 ? CT_F16 : CT_F32, layout), *y = NULL;
                ct_tensor *mean = th_random(&r, 1, &C, CT_F32, -1, 1), *var = th_random(&r, 1, &C, CT_F64, 0.1, 2);
                ct_tensor *w = opt ? th_random(&r, 1, &C, CT_F32, -2, 2) : NULL, *b = opt ? th_random(&r, 1, &C, CT_F32, -1, 1) : NULL;
                double eps = 1e-5;
                CHECK_OK(ct_batch_norm(x, mean, var, w, b, eps, &y));
                check_shape(y, nd, sh);
                CHECK(ct_tensor_dtype(y) == ct_tensor_dtype(x));
                int64_t n = ct_tensor_numel(x), inner = n / ((sh[0] ? sh[0] : 1) * C);
                double *xv = th_values(x), *yv = th_values(y), *mv = th_values(mean), *vv = th_values(var);
                double *wv = w ? th_values(w) : NULL, *bv = b ? th_values(b) : NULL;
                double *want = malloc(sizeof(double) * (size_t)(n + 1));
                for (int64_t i = 0; i < n; i++) {
                    int64_t c = (i / inner) % C;
                    want[i] = (xv[i] - mv[c]) / sqrt(vv[c] + eps) * (wv ? wv[c] : 1) + (bv ? bv[c] : 0);
                }
                /* f32: a few roundings of values < ~20; f16 output: half-precision rounding (2^-11 relative) */
                double tol = layout == 2 ? 2e-3 : 1e-5;
                CHECK_MSG(th_allclose(yv, want, n, tol, tol), "shape %d layout %d opt %d", si, layout, opt);
                free(xv), free(yv), free(mv), free(vv), free(wv), free(bv), free(want);
                ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(mean), ct_tensor_free(var), ct_tensor_free(w), ct_tensor_free(b);
            }
    ct_tensor *x = th_random(&r, 3, (int64_t[]){2, 3, 4}, CT_F32, -1, 1), *y = NULL;
    ct_tensor *m3 = th_random(&r, 1, (int64_t[]){3}, CT_F32, 0, 1), *m4 = th_random(&r, 1, (int64_t[]){4}, CT_F32, 0, 1);
    ct_tensor *x1 = th_random(&r, 1, (int64_t[]){3}, CT_F32, 0, 1);
    CHECK_STATUS(ct_batch_norm(x, m4, m3, NULL, NULL, 1e-5, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_batch_norm(x, m3, m3, m4, NULL, 1e-5, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_batch_norm(x1, m3, m3, NULL, NULL, 1e-5, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_batch_norm(x, m3, NULL, NULL, NULL, 1e-5, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_batch_norm(x, m3, m3, NULL, NULL, -1, &y), CT_ERR_INVALID_ARG);
    ct_tensor_free(x), ct_tensor_free(m3), ct_tensor_free(m4), ct_tensor_free(x1);
}

static void test_layer_norm(void)
{
    th_rng r = {31};
    int64_t sh[3] = {3, 5, 8};
    for (int k = 1; k <= 3; k++)
        for (int layout = 0; layout < 3; layout++)
            for (int opt = 0; opt < 3; opt++) {
                ct_dtype dt = layout == 1 ? CT_F64 : CT_F32;
                ct_tensor *x = make_input(&r, 3, sh, dt, layout), *y = NULL;
                ct_tensor *w = opt ? make_input(&r, k, sh + 3 - k, CT_F32, opt == 2 ? L_TRANSPOSED : L_CONTIG) : NULL;
                ct_tensor *b = opt == 2 ? th_random(&r, k, sh + 3 - k, CT_F32, -1, 1) : NULL;
                CHECK_OK(ct_layer_norm(x, k, w, b, 1e-5, &y));
                check_shape(y, 3, sh);
                int64_t n = 120, M = 1;
                for (int i = 3 - k; i < 3; i++) M *= sh[i];
                double *xv = th_values(x), *yv = th_values(y), *wv = w ? th_values(w) : NULL, *bv = b ? th_values(b) : NULL;
                double want[120];
                for (int64_t row = 0; row < n / M; row++) {
                    double mean = 0, var = 0;
                    for (int64_t i = 0; i < M; i++) mean += xv[row * M + i];
                    mean /= (double)M;
                    for (int64_t i = 0; i < M; i++) var += (xv[row * M + i] - mean) * (xv[row * M + i] - mean);
                    var /= (double)M;
                    for (int64_t i = 0; i < M; i++)
                        want[row * M + i] = (xv[row * M + i] - mean) / sqrt(var + 1e-5) * (wv ? wv[i] : 1) + (bv ? bv[i] : 0);
                }
                /* outputs are O(few); f32 rounding of the final products dominates */
                CHECK_MSG(th_allclose(yv, want, n, 1e-5, 1e-5), "k %d layout %d opt %d", k, layout, opt);
                free(xv), free(yv), free(wv), free(bv);
                ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(w), ct_tensor_free(b);
            }
    ct_tensor *x = th_random(&r, 3, sh, CT_F32, -1, 1), *y = NULL, *w = th_random(&r, 1, (int64_t[]){5}, CT_F32, 0, 1);
    CHECK_STATUS(ct_layer_norm(x, 0, NULL, NULL, 1e-5, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_layer_norm(x, 4, NULL, NULL, 1e-5, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_layer_norm(x, 1, w, NULL, 1e-5, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_layer_norm(x, 1, NULL, w, 1e-5, &y), CT_ERR_SHAPE);
    ct_tensor_free(x), ct_tensor_free(w);
    /* size-0 rows */
    CHECK_OK(ct_zeros(2, (int64_t[]){0, 4}, CT_F32, &x));
    CHECK_OK(ct_layer_norm(x, 1, NULL, NULL, 1e-5, &y));
    CHECK(ct_tensor_numel(y) == 0);
    ct_tensor_free(x), ct_tensor_free(y);
}

static void test_rms_norm(void)
{
    th_rng r = {41};
    int64_t Ds[] = {1, 7, 16, 64, 100, 4099};
    cpu_simd hw = cpu_simd_level();
    for (int lvl = 0; lvl <= (int)hw; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        for (size_t di = 0; di < sizeof Ds / sizeof Ds[0]; di++)
            for (int layout = 0; layout < 3; layout++)
                for (int wmode = 0; wmode < 3; wmode++) {
                    int64_t D = Ds[di], sh[2] = {3, D};
                    ct_dtype dt = (layout == 1 && wmode == 2) ? CT_BF16 : CT_F32;
                    ct_tensor *x = make_input(&r, 2, sh, dt, layout), *y = NULL, *w = NULL;
                    if (wmode == 1) w = th_random(&r, 1, &D, CT_F32, -2, 2);
                    if (wmode == 2) w = make_input(&r, 1, &D, CT_F16, L_CONTIG);
                    CHECK_OK(ct_rms_norm(x, w, 1e-6, &y));
                    check_shape(y, 2, sh);
                    CHECK(ct_tensor_dtype(y) == dt);
                    double *xv = th_values(x), *yv = th_values(y), *wv = w ? th_values(w) : NULL;
                    double *want = malloc(sizeof(double) * (size_t)(3 * D));
                    for (int64_t row = 0; row < 3; row++) {
                        double ss = 0;
                        for (int64_t i = 0; i < D; i++) ss += xv[row * D + i] * xv[row * D + i];
                        double s = 1 / sqrt(ss / (double)D + 1e-6);
                        for (int64_t i = 0; i < D; i++) want[row * D + i] = xv[row * D + i] * s * (wv ? wv[i] : 1);
                    }
                    /* f32 sum of squares over D <= 4099 in parallel lanes: relative error ~1e-6; bf16 output: 2^-8 */
                    double tol = dt == CT_BF16 ? 2e-2 : 2e-5;
                    CHECK_MSG(th_allclose(yv, want, 3 * D, tol, tol), "simd %d D %lld layout %d w %d", lvl, (long long)D,
                              layout, wmode);
                    free(xv), free(yv), free(wv), free(want);
                    ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(w);
                }
    }
    cpu_simd_set_level(hw);
    ct_tensor *x = th_random(&r, 2, (int64_t[]){2, 8}, CT_F32, -1, 1), *y = NULL;
    ct_tensor *w = th_random(&r, 1, (int64_t[]){7}, CT_F32, -1, 1), *xi = NULL;
    CHECK_OK(ct_zeros(2, (int64_t[]){2, 8}, CT_I64, &xi));
    CHECK_STATUS(ct_rms_norm(x, w, 1e-6, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_rms_norm(xi, NULL, 1e-6, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_rms_norm(x, NULL, NAN, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_rms_norm(x, NULL, 1e-6, NULL), CT_ERR_INVALID_ARG);
    ct_tensor_free(x), ct_tensor_free(w), ct_tensor_free(xi);
}

/* ---- embedding ---- */

static void test_embedding(void)
{
    th_rng r = {51};
    int64_t V = 11, D = 6;
    ct_dtype wdts[] = {CT_F32, CT_F16, CT_BF16, CT_F64};
    for (int wi = 0; wi < 4; wi++)
        for (int layout = 0; layout < 3; layout += 2)
            for (int idt = 0; idt < 2; idt++) {
                ct_tensor *w = make_input(&r, 2, (int64_t[]){V, D}, wdts[wi], layout), *y = NULL;
                int64_t raw[12] = {0, 10, 3, 3, 7, 1, 2, 9, 5, 4, 6, 8};
                int32_t raw32[12];
                for (int i = 0; i < 12; i++) raw32[i] = (int32_t)raw[i];
                ct_tensor *ids0 = NULL, *ids = NULL;
                CHECK_OK(ct_tensor_from_data(2, (int64_t[]){3, 4}, idt ? CT_I64 : CT_I32, idt ? (void *)raw : (void *)raw32, &ids0));
                CHECK_OK(ct_transpose(ids0, 0, 1, &ids)); /* strided ids [4, 3] */
                CHECK_OK(ct_embedding(w, ids, &y));
                check_shape(y, 3, (int64_t[]){4, 3, D});
                CHECK(ct_tensor_dtype(y) == CT_F32);
                double *wv = th_values(w), *yv = th_values(y), want[72];
                for (int a = 0; a < 4; a++)
                    for (int b = 0; b < 3; b++)
                        for (int64_t d = 0; d < D; d++) want[(a * 3 + b) * D + d] = wv[raw[b * 4 + a] * D + d];
                CHECK_MSG(th_allclose(yv, want, 72, 0, 1e-7), "wdt %d layout %d ids %d", wi, layout, idt); /* a copy (f64: one f32 rounding) */
                free(wv), free(yv);
                ct_tensor_free(w), ct_tensor_free(y), ct_tensor_free(ids0), ct_tensor_free(ids);
            }
    ct_tensor *w = th_random(&r, 2, (int64_t[]){V, D}, CT_F32, -1, 1), *y = NULL, *ids = NULL;
    int64_t bad[3] = {1, 11, 2}, neg[2] = {0, -1};
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){3}, CT_I64, bad, &ids));
    CHECK_STATUS(ct_embedding(w, ids, &y), CT_ERR_RANGE);
    CHECK(strstr(ct_last_error(), "11") != NULL);
    ct_tensor_free(ids);
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){2}, CT_I64, neg, &ids));
    CHECK_STATUS(ct_embedding(w, ids, &y), CT_ERR_RANGE);
    CHECK(strstr(ct_last_error(), "-1") != NULL);
    ct_tensor *idf = th_random(&r, 1, (int64_t[]){2}, CT_F32, 0, 1), *w1 = th_random(&r, 1, (int64_t[]){4}, CT_F32, 0, 1);
    CHECK_STATUS(ct_embedding(w, idf, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_embedding(w1, ids, &y), CT_ERR_SHAPE);
    ct_tensor_free(ids), ct_tensor_free(idf), ct_tensor_free(w1);
    /* empty ids */
    CHECK_OK(ct_zeros(2, (int64_t[]){0, 5}, CT_I32, &ids));
    CHECK_OK(ct_embedding(w, ids, &y));
    check_shape(y, 3, (int64_t[]){0, 5, D});
    ct_tensor_free(ids), ct_tensor_free(y), ct_tensor_free(w);
}

/* Q8_0 rows (f16 scale + 32 int8) go through quant_dequantize_row. */
static void test_embedding_q8_0(void)
{
    enum { V = 3, D = 64, NB = D / 32 };
    uint8_t blocks[V * NB * 34];
    double want[V * D];
    for (int b = 0; b < V * NB; b++) {
        float d = 0.25f * (float)(b + 1);
        uint16_t h = ct_f32_to_f16(d);
        memcpy(blocks + b * 34, &h, 2);
        for (int i = 0; i < 32; i++) {
            int8_t q = (int8_t)((i * 7 + b * 13) % 255 - 127);
            blocks[b * 34 + 2 + i] = (uint8_t)q;
            want[b * 32 + i] = (double)d * q;
        }
    }
    ct_tensor *w = NULL, *ids = NULL, *y = NULL;
    CHECK_OK(ct_tensor_from_data(2, (int64_t[]){V, D}, CT_Q8_0, blocks, &w));
    int32_t idv[4] = {2, 0, 1, 2};
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){4}, CT_I32, idv, &ids));
    ct_status s = ct_embedding(w, ids, &y);
    if (s == CT_OK) {
        double *yv = th_values(y), exp4[4 * D];
        for (int i = 0; i < 4; i++) memcpy(exp4 + i * D, want + idv[i] * D, sizeof(double) * D);
        CHECK(th_allclose(yv, exp4, 4 * D, 0, 1e-7)); /* d * q is exact in f32 */
        free(yv);
    } else {
        th_skip("quant_dequantize_row(q8_0) not available yet: %s", ct_last_error());
    }
    ct_tensor_free(w), ct_tensor_free(ids), ct_tensor_free(y);
}

int main(void)
{
    RUN(test_pool);
    RUN(test_pool_errors);
    RUN(test_batch_norm);
    RUN(test_layer_norm);
    RUN(test_rms_norm);
    RUN(test_embedding);
    RUN(test_embedding_q8_0);
    return th_finish();
}
