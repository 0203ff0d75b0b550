/* conv2d (im2col + GEMM) and conv_transpose2d (GEMM + col2im), f32 and f64; f16/bf16
 * through f32 copies.
 * Work is split over (batch, group) tasks; the column buffer is tiled so its
 * size stays bounded whatever the image size. GEMM is OpenBLAS when available,
 * else a cache-blocked loop the compiler vectorizes. */
#include <stdlib.h>

#include "backends/cpu/cpu.h"

#ifdef CTORCH_HAVE_BLAS
#include <cblas.h>
#endif

#define CONV_COL_BUDGET (1 << 20) /* elements per column tile */

typedef struct conv_geom {
    int64_t N, C, H, W;       /* input */
    int64_t O, Ho, Wo;        /* output */
    int64_t kH, kW, G, Cg, Og;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t xs[4];            /* input strides (elements) */
} conv_geom;

typedef struct conv_ctx {
    conv_geom g;
    const void *x, *w, *bias;
    void *y;
    int64_t bias_stride;
    ct_status status;
} conv_ctx;

/* Generates the element-type specific pieces: GEMM fallback, im2col, col2im and
 * the two per-task drivers. C = op(A) * B with beta = 0 (row-major). */
#define CONV_DEFINE(T, SFX, CBLAS_GEMM)                                                                          \
    static void gemm_loop_##SFX(bool ta, int64_t M, int64_t Nn, int64_t K, const T *A, int64_t lda, const T *B, \
                                int64_t ldb, T *Cm, int64_t ldc)                                                 \
    {                                                                                                            \
        for (int64_t i = 0; i < M; i++)                                                                          \
            for (int64_t j = 0; j < Nn; j++) Cm[i * ldc + j] = 0;                                                \
        for (int64_t j0 = 0; j0 < Nn; j0 += 256) {                                                               \
            int64_t j1 = j0 + 256 < Nn ? j0 + 256 : Nn;                                                          \
            for (int64_t k0 = 0; k0 < K; k0 += 64) {                                                             \
                int64_t k1 = k0 + 64 < K ? k0 + 64 : K;                                                          \
                for (int64_t i = 0; i < M; i++) {                                                                \
                    T *c = Cm + i * ldc;                                                                         \
                    for (int64_t k = k0; k < k1; k++) {                                                          \
                        T a = ta ? A[k * lda + i] : A[i * lda + k];                                              \
                        const T *b = B + k * ldb;                                                                \
                        for (int64_t j = j0; j < j1; j++) c[j] += a * b[j];                                      \
                    }                                                                                            \
                }                                                                                                \
            }                                                                                                    \
        }                                                                                                        \
    }                                                                                                            \
    static void gemm_##SFX(bool ta, int64_t M, int64_t Nn, int64_t K, const T *A, int64_t lda, const T *B,      \
                           int64_t ldb, T *Cm, int64_t ldc)                                                      \
    {                                                                                                            \
        if (M == 0 || Nn == 0) return;                                                                           \
        if (K == 0) { /* BLAS may skip C entirely when K is 0 */                                                 \
            for (int64_t i = 0; i < M; i++)                                                                      \
                for (int64_t j = 0; j < Nn; j++) Cm[i * ldc + j] = 0;                                            \
            return;                                                                                              \
        }                                                                                                        \
        CBLAS_GEMM                                                                                               \
        gemm_loop_##SFX(ta, M, Nn, K, A, lda, B, ldb, Cm, ldc);                                                  \
    }                                                                                                            \
    /* col[k][l - l0] for k = (c, kh, kw) of one group, output positions l in [l0, l0 + lt) */                  \
    static void im2col_##SFX(const conv_geom *g, const T *x, T *col, int64_t l0, int64_t lt)                    \
    {                                                                                                            \
        int64_t K = g->Cg * g->kH * g->kW;                                                                       \
        for (int64_t k = 0; k < K; k++) {                                                                        \
            int64_t c = k / (g->kH * g->kW), kh = (k / g->kW) % g->kH, kw = k % g->kW;                           \
            const T *xc = x + c * g->xs[1];                                                                      \
            T *dst = col + k * lt;                                                                               \
            int64_t oh = l0 / g->Wo, ow = l0 % g->Wo;                                                            \
            for (int64_t l = 0; l < lt; l++) {                                                                   \
                int64_t ih = oh * g->sh - g->ph + kh * g->dh, iw = ow * g->sw - g->pw + kw * g->dw;              \
                dst[l] = (ih >= 0 && ih < g->H && iw >= 0 && iw < g->W) ? xc[ih * g->xs[2] + iw * g->xs[3]] : 0; \
                if (++ow == g->Wo) ow = 0, oh++;                                                                 \
            }                                                                                                    \
        }                                                                                                        \
    }                                                                                                            \
    /* scatter-adds col[r][p - p0] (r = (o, kh, kw), input positions p) into y [Og, Ho, Wo] */                  \
    static void col2im_##SFX(const conv_geom *g, const T *col, T *y, int64_t p0, int64_t pt)                    \
    {                                                                                                            \
        int64_t R = g->Og * g->kH * g->kW;                                                                       \
        for (int64_t r = 0; r < R; r++) {                                                                        \
            int64_t o = r / (g->kH * g->kW), kh = (r / g->kW) % g->kH, kw = r % g->kW;                           \
            T *yo = y + o * g->Ho * g->Wo;                                                                       \
            const T *src = col + r * pt;                                                                         \
            int64_t ih = p0 / g->W, iw = p0 % g->W;                                                              \
            for (int64_t p = 0; p < pt; p++) {                                                                   \
                int64_t oh = ih * g->sh - g->ph + kh * g->dh, ow = iw * g->sw - g->pw + kw * g->dw;              \
                if (oh >= 0 && oh < g->Ho && ow >= 0 && ow < g->Wo) yo[oh * g->Wo + ow] += src[p];               \
                if (++iw == g->W) iw = 0, ih++;                                                                  \
            }                                                                                                    \
        }                                                                                                        \
    }                                                                                                            \
    static void add_bias_##SFX(const conv_ctx *c, int64_t grp, T *y, int64_t L)                                  \
    {                                                                                                            \
        if (!c->bias) return;                                                                                    \
        const T *b = c->bias;                                                                                    \
        for (int64_t o = 0; o < c->g.Og; o++) {                                                                  \
            T v = b[(grp * c->g.Og + o) * c->bias_stride];                                                       \
            for (int64_t l = 0; l < L; l++) y[o * L + l] += v;                                                   \
        }                                                                                                        \
    }                                                                                                            \
    static void conv_tasks_##SFX(void *vctx, int64_t b, int64_t e)                                               \
    {                                                                                                            \
        conv_ctx *c = vctx;                                                                                      \
        const conv_geom *g = &c->g;                                                                              \
        int64_t K = g->Cg * g->kH * g->kW, L = g->Ho * g->Wo;                                                    \
        /* a 1x1, stride-1, unpadded conv reads the input planes as the column matrix */                        \
        bool direct = g->kH == 1 && g->kW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0 &&      \
                      g->xs[3] == 1 && (g->xs[2] == g->W || g->H == 1);                                          \
        int64_t lt = K > 0 ? CONV_COL_BUDGET / K : L;                                                            \
        if (lt < 1) lt = 1;                                                                                      \
        if (lt > L) lt = L;                                                                                      \
        T *col = NULL;                                                                                           \
        if (!direct && L > 0 && K > 0) {                                                                         \
            col = malloc(sizeof(T) * (size_t)(K * lt));                                                          \
            if (!col) {                                                                                          \
                ct_status no = CT_OK;                                                                            \
                ct_status s = core_err(CT_ERR_OOM, "conv2d: no memory for a %lld x %lld column tile",           \
                                       (long long)K, (long long)lt);                                             \
                __atomic_compare_exchange_n(&c->status, &no, s, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);       \
                return;                                                                                          \
            }                                                                                                    \
        }                                                                                                        \
        for (int64_t t = b; t < e; t++) {                                                                        \
            int64_t n = t / g->G, grp = t % g->G;                                                                \
            const T *x = (const T *)c->x + n * g->xs[0] + grp * g->Cg * g->xs[1];                                \
            const T *w = (const T *)c->w + grp * g->Og * K;                                                      \
            T *y = (T *)c->y + (n * g->O + grp * g->Og) * L;                                                     \
            if (direct) gemm_##SFX(false, g->Og, L, K, w, K, x, g->xs[1], y, L);                                 \
            else if (K == 0) gemm_##SFX(false, g->Og, L, 0, w, 1, NULL, 1, y, L);                                \
            else                                                                                                 \
                for (int64_t l0 = 0; l0 < L; l0 += lt) {                                                         \
                    int64_t n_l = l0 + lt <= L ? lt : L - l0;                                                    \
                    im2col_##SFX(g, x, col, l0, n_l);                                                            \
                    gemm_##SFX(false, g->Og, n_l, K, w, K, col, n_l, y + l0, L);                                 \
                }                                                                                                \
            add_bias_##SFX(c, grp, y, L);                                                                        \
        }                                                                                                        \
        free(col);                                                                                               \
    }                                                                                                            \
    /* transposed: x contiguous [N, C, H, W], w contiguous [C, Og, kH, kW] */                                   \
    static void convt_tasks_##SFX(void *vctx, int64_t b, int64_t e)                                              \
    {                                                                                                            \
        conv_ctx *c = vctx;                                                                                      \
        const conv_geom *g = &c->g;                                                                              \
        int64_t R = g->Og * g->kH * g->kW, P = g->H * g->W, L = g->Ho * g->Wo;                                   \
        int64_t pt = R > 0 ? CONV_COL_BUDGET / R : P;                                                            \
        if (pt < 1) pt = 1;                                                                                      \
        if (pt > P) pt = P;                                                                                      \
        T *col = R > 0 && P > 0 ? malloc(sizeof(T) * (size_t)(R * pt)) : NULL;                                   \
        if (R > 0 && P > 0 && !col) {                                                                            \
            ct_status no = CT_OK;                                                                                \
            ct_status s = core_err(CT_ERR_OOM, "conv_transpose2d: no memory for a %lld x %lld column tile",     \
                                   (long long)R, (long long)pt);                                                 \
            __atomic_compare_exchange_n(&c->status, &no, s, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);           \
            return;                                                                                              \
        }                                                                                                        \
        for (int64_t t = b; t < e; t++) {                                                                        \
            int64_t n = t / g->G, grp = t % g->G;                                                                \
            const T *x = (const T *)c->x + (n * g->C + grp * g->Cg) * P;                                         \
            const T *w = (const T *)c->w + grp * g->Cg * R;                                                      \
            T *y = (T *)c->y + (n * g->O + grp * g->Og) * L;                                                     \
            for (int64_t i = 0; i < g->Og * L; i++) y[i] = 0;                                                    \
            for (int64_t p0 = 0; R > 0 && p0 < P; p0 += pt) {                                                    \
                int64_t n_p = p0 + pt <= P ? pt : P - p0;                                                        \
                gemm_##SFX(true, R, n_p, g->Cg, w, R, x + p0, P, col, n_p);                                      \
                col2im_##SFX(g, col, y, p0, n_p);                                                                \
            }                                                                                                    \
            add_bias_##SFX(c, grp, y, L);                                                                        \
        }                                                                                                        \
        free(col);                                                                                               \
    }

#ifdef CTORCH_HAVE_BLAS
#define CONV_SGEMM                                                                                               \
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)M, (int)Nn, (int)K, 1.0f, A,   \
                (int)lda, B, (int)ldb, 0.0f, Cm, (int)ldc);                                                      \
    if (1) return;
#define CONV_DGEMM                                                                                               \
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, CblasNoTrans, (int)M, (int)Nn, (int)K, 1.0, A,    \
                (int)lda, B, (int)ldb, 0.0, Cm, (int)ldc);                                                       \
    if (1) return;
#else
#define CONV_SGEMM
#define CONV_DGEMM
#endif

CONV_DEFINE(float, f32, CONV_SGEMM)
CONV_DEFINE(double, f64, CONV_DGEMM)

static void conv_geom_of(const ct_op *op, conv_geom *g)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *y = op->dst;
    const ct_conv2d_params *p = &op->p.conv;
    g->N = x->shape[0], g->C = x->shape[1], g->H = x->shape[2], g->W = x->shape[3];
    g->O = y->shape[1], g->Ho = y->shape[2], g->Wo = y->shape[3];
    g->kH = w->shape[2], g->kW = w->shape[3], g->G = p->groups;
    g->Cg = g->C / g->G, g->Og = g->O / g->G;
    g->sh = p->stride[0], g->sw = p->stride[1], g->ph = p->padding[0], g->pw = p->padding[1];
    g->dh = p->dilation[0], g->dw = p->dilation[1];
    for (int i = 0; i < 4; i++) g->xs[i] = x->stride[i];
}

/* A contiguous f32 copy of t's elements (any float dtype, any strides), or NULL. */
static float *widen(const ct_tensor *t, const ct_device *dev)
{
    cpu_nd it;
    cpu_nd_init(&it, t->ndim, t->shape);
    cpu_nd_add(&it, t, dev);
    int64_t rows = cpu_nd_rows(&it), cols = cpu_nd_cols(&it), step = cpu_nd_inner(&it, 0) * (int64_t)it.esize[0];
    float *f = malloc(sizeof(float) * (size_t)(rows * cols > 0 ? rows * cols : 1));
    for (int64_t r = 0; f && r < rows; r++) {
        const char *p = cpu_nd_row(&it, 0, r);
        for (int64_t c = 0; c < cols; c++) f[r * cols + c] = cpu_load_f32(p + c * step, t->dtype);
    }
    return f;
}

/* f16/bf16 operands: the f32 kernels on widened copies, the result rounded once into y
 * (contiguous), the same bits as casts around an f32 op. */
static ct_status conv_half(const ct_device *dev, const ct_op *op, conv_ctx *c, cpu_range_fn fn)
{
    const ct_tensor *bias = op->src[2], *y = op->dst;
    int64_t ny = ct_tensor_numel(y);
    float *xf = widen(op->src[0], dev), *wf = widen(op->src[1], dev), *bf = bias ? widen(bias, dev) : NULL;
    float *yf = malloc(sizeof(float) * (size_t)ny);
    ct_status s = CT_OK;
    if (!xf || !wf || (bias && !bf) || !yf)
        s = core_err(CT_ERR_OOM, "%s: no memory for the f32 copies of its %s operands", op_kind_name(op->kind),
                     ct_dtype_name(y->dtype));
    if (s == CT_OK) {
        conv_geom *g = &c->g;
        g->xs[3] = 1, g->xs[2] = g->W, g->xs[1] = g->H * g->W, g->xs[0] = g->C * g->H * g->W;
        c->x = xf, c->w = wf, c->bias = bf, c->bias_stride = 1, c->y = yf;
        cpu_parallel_for(g->N * g->G, 1, fn, c);
        s = c->status;
    }
    uint16_t *yh = op_data(y, dev);
    if (s == CT_OK && y->dtype == CT_F16) cpu_f32_to_f16_row(yf, yh, ny);
    else if (s == CT_OK)
        for (int64_t i = 0; i < ny; i++) yh[i] = ct_f32_to_bf16(yf[i]);
    free(xf), free(wf), free(bf), free(yf);
    return s;
}

ct_status cpu_run_conv(ct_device *dev, const ct_op *op); /* called by cpu_run_nn (nn.c) */

ct_status cpu_run_conv(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *bias = op->src[2], *y = op->dst;
    bool tr = op->kind == CT_OP_CONV_TRANSPOSE2D, f64 = y->dtype == CT_F64;
    conv_ctx c = {.status = CT_OK};
    conv_geom_of(op, &c.g);
    if (ct_tensor_numel(y) == 0) return CT_OK;
    cpu_range_fn fn = tr ? (f64 ? convt_tasks_f64 : convt_tasks_f32) : (f64 ? conv_tasks_f64 : conv_tasks_f32);
    if (y->dtype == CT_F16 || y->dtype == CT_BF16) return conv_half(dev, op, &c, fn);
    c.x = op_data(x, dev), c.w = op_data(w, dev), c.y = op_data(y, dev);
    c.bias = bias ? op_data(bias, dev) : NULL, c.bias_stride = bias ? bias->stride[0] : 0;
    cpu_parallel_for(c.g.N * c.g.G, 1, fn, &c);
    return c.status;
}
