/* Neural-network kernels: pooling, batch/layer/RMS norm and embedding (the
 * convolutions live in conv.c). rms_norm is on the LLM decode path, so its f32
 * rows get SIMD kernels chosen by cpu_simd_level(). */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "quant/quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define NN_X86 1
#endif

ct_status cpu_run_conv(ct_device *dev, const ct_op *op); /* conv.c */

/* Records the first failure of a parallel region. */
static void set_status(ct_status *dst, ct_status s)
{
    ct_status ok = CT_OK;
    __atomic_compare_exchange_n(dst, &ok, s, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* ---- pooling ---- */

typedef struct pool_ctx {
    const ct_op *op;
    const char *x;
    char *y;
    ct_dtype dt;
    size_t es;
    int64_t C;              /* dim 1 of a 4-D input (planes are (n, c)) */
    int64_t xs_n, xs_c;     /* plane strides (elements) */
    int64_t xs_h, xs_w;
    int64_t H, W, Ho, Wo;
} pool_ctx;

static void pool_rows(void *vctx, int64_t b, int64_t e)
{
    const pool_ctx *c = vctx;
    const ct_pool2d_params *p = &c->op->p.pool;
    bool is_max = c->op->kind == CT_OP_MAX_POOL2D;
    for (int64_t r = b; r < e; r++) { /* r = plane * Ho + oh */
        int64_t plane = r / c->Ho, oh = r % c->Ho;
        const char *xp = c->x + ((plane / c->C) * c->xs_n + (plane % c->C) * c->xs_c) * (int64_t)c->es;
        int64_t h0 = oh * p->stride[0] - p->padding[0], h1 = h0 + p->kernel[0];
        int64_t ha = h0 < 0 ? 0 : h0, hz = h1 > c->H ? c->H : h1;
        for (int64_t ow = 0; ow < c->Wo; ow++) {
            int64_t w0 = ow * p->stride[1] - p->padding[1], w1 = w0 + p->kernel[1];
            int64_t wa = w0 < 0 ? 0 : w0, wz = w1 > c->W ? c->W : w1;
            double acc = is_max ? -INFINITY : 0.0;
            for (int64_t ih = ha; ih < hz; ih++)
                for (int64_t iw = wa; iw < wz; iw++) {
                    double v = cpu_load_f64(xp + (ih * c->xs_h + iw * c->xs_w) * (int64_t)c->es, c->dt);
                    if (!is_max) acc += v;
                    else if (v > acc || isnan(v)) acc = v;
                }
            if (!is_max) {
                /* padded windows never reach past H + pad (no ceil mode), so the
                 * include-pad divisor is always the full kernel area */
                int64_t cnt = p->count_include_pad ? (int64_t)p->kernel[0] * p->kernel[1] : (hz - ha) * (wz - wa);
                acc = cnt > 0 ? acc / (double)cnt : 0.0;
            }
            cpu_store_f64(c->y + ((r * c->Wo) + ow) * (int64_t)c->es, c->dt, acc);
        }
    }
}

static ct_status run_pool(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst;
    int nd = x->ndim;
    pool_ctx c = {.op = op, .x = op_data(x, dev), .y = op_data(y, dev), .dt = x->dtype,
                  .es = ct_dtype_block_bytes(x->dtype), .C = nd == 4 ? x->shape[1] : x->shape[0],
                  .xs_n = nd == 4 ? x->stride[0] : 0, .xs_c = nd == 4 ? x->stride[1] : x->stride[0],
                  .xs_h = x->stride[nd - 2], .xs_w = x->stride[nd - 1], .H = x->shape[nd - 2], .W = x->shape[nd - 1],
                  .Ho = y->shape[nd - 2], .Wo = y->shape[nd - 1]};
    if (ct_tensor_numel(y) == 0) return CT_OK;
    int64_t planes = ct_tensor_numel(y) / (c.Ho * c.Wo);
    int64_t work = c.Wo * op->p.pool.kernel[0] * op->p.pool.kernel[1];
    cpu_parallel_for(planes * c.Ho, work > 0 ? 16384 / work + 1 : 1, pool_rows, &c);
    return CT_OK;
}

/* ---- SIMD helpers for f32 rows ---- */

static float sumsq_portable(const float *x, int64_t n)
{
    float a[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) a[j] += x[i + j] * x[i + j];
    float s = 0;
    for (; i < n; i++) s += x[i] * x[i];
    for (int j = 0; j < 8; j++) s += a[j];
    return s;
}

static void scale_row_portable(float *y, const float *x, const float *w, float s, int64_t n)
{
    if (w)
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * s * w[i];
    else
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * s;
}

#ifdef NN_X86
__attribute__((target("avx2,fma"))) static float sumsq_avx2(const float *x, int64_t n)
{
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
        __m256 v2 = _mm256_loadu_ps(x + i + 16), v3 = _mm256_loadu_ps(x + i + 24);
        a0 = _mm256_fmadd_ps(v0, v0, a0);
        a1 = _mm256_fmadd_ps(v1, v1, a1);
        a2 = _mm256_fmadd_ps(v2, v2, a2);
        a3 = _mm256_fmadd_ps(v3, v3, a3);
    }
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        a0 = _mm256_fmadd_ps(v, v, a0);
    }
    __m256 a = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float s = _mm_cvtss_f32(h);
    for (; i < n; i++) s += x[i] * x[i];
    return s;
}

__attribute__((target("avx2,fma"))) static void scale_row_avx2(float *y, const float *x, const float *w, float s,
                                                              int64_t n)
{
    __m256 vs = _mm256_set1_ps(s);
    int64_t i = 0;
    if (w)
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
    else
        for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; i++) y[i] = x[i] * s * (w ? w[i] : 1.0f);
}

__attribute__((target("avx512f"))) static float sumsq_avx512(const float *x, int64_t n)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m512 v0 = _mm512_loadu_ps(x + i), v1 = _mm512_loadu_ps(x + i + 16);
        __m512 v2 = _mm512_loadu_ps(x + i + 32), v3 = _mm512_loadu_ps(x + i + 48);
        a0 = _mm512_fmadd_ps(v0, v0, a0);
        a1 = _mm512_fmadd_ps(v1, v1, a1);
        a2 = _mm512_fmadd_ps(v2, v2, a2);
        a3 = _mm512_fmadd_ps(v3, v3, a3);
    }
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        a0 = _mm512_fmadd_ps(v, v, a0);
    }
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(m, x + i);
        a1 = _mm512_fmadd_ps(v, v, a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx512f"))) static void scale_row_avx512(float *y, const float *x, const float *w, float s,
                                                               int64_t n)
{
    __m512 vs = _mm512_set1_ps(s);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), vs);
        if (w) v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(m, w + i));
        _mm512_mask_storeu_ps(y + i, m, v);
    }
}
#endif

typedef float (*sumsq_fn)(const float *, int64_t);
typedef void (*scale_row_fn)(float *, const float *, const float *, float, int64_t);

/* ---- RMS / layer / batch norm ---- */

typedef struct norm_ctx {
    const ct_op *op;
    cpu_nd it;            /* operand 0 = dst, 1 = x; rows = all but the (collapsed) normalized dims */
    int64_t n;            /* elements normalized per row */
    const char *w, *b;    /* optional weight/bias */
    ct_dtype wdt, bdt;
    int64_t ws, bs;       /* element strides of weight/bias (flat) */
    sumsq_fn sumsq;
    scale_row_fn scale_row;
    bool fast;            /* f32 in/out, dense rows, f32 dense weight (or none) */
} norm_ctx;

static double param_at(const char *p, ct_dtype dt, int64_t stride, int64_t i)
{
    return cpu_load_f64(p + i * stride * (int64_t)ct_dtype_block_bytes(dt), dt);
}

static void rms_rows(void *vctx, int64_t b, int64_t e)
{
    const norm_ctx *c = vctx;
    double eps = c->op->p.norm.eps;
    int64_t n = c->n, xs = cpu_nd_inner(&c->it, 1), ds = cpu_nd_inner(&c->it, 0);
    ct_dtype xdt = c->op->src[0]->dtype, ddt = c->op->dst->dtype;
    size_t xe = c->it.esize[1], de = c->it.esize[0];
    for (int64_t r = b; r < e; r++) {
        const char *x = cpu_nd_row(&c->it, 1, r);
        char *y = cpu_nd_row(&c->it, 0, r);
        if (c->fast) {
            float ss = c->sumsq((const float *)x, n);
            float s = (float)(1.0 / sqrt((double)ss / (double)n + eps));
            c->scale_row((float *)y, (const float *)x, (const float *)c->w, s, n);
            continue;
        }
        double ss = 0;
        for (int64_t i = 0; i < n; i++) {
            double v = cpu_load_f64(x + i * xs * (int64_t)xe, xdt);
            ss += v * v;
        }
        double s = 1.0 / sqrt(ss / (double)n + eps);
        for (int64_t i = 0; i < n; i++) {
            double v = cpu_load_f64(x + i * xs * (int64_t)xe, xdt) * s;
            if (c->w) v *= param_at(c->w, c->wdt, c->ws, i);
            cpu_store_f64(y + i * ds * (int64_t)de, ddt, v);
        }
    }
}

static void layer_rows(void *vctx, int64_t b, int64_t e)
{
    const norm_ctx *c = vctx;
    double eps = c->op->p.norm.eps;
    int64_t n = c->n;
    ct_dtype xdt = c->op->src[0]->dtype, ddt = c->op->dst->dtype;
    size_t xe = c->it.esize[1], de = c->it.esize[0];
    for (int64_t r = b; r < e; r++) {
        const char *x = cpu_nd_row(&c->it, 1, r);
        char *y = cpu_nd_row(&c->it, 0, r);
        double mean = 0, var = 0;
        if (xdt == CT_F32) {
            const float *xf = (const float *)x;
            for (int64_t i = 0; i < n; i++) mean += xf[i];
            mean /= (double)n;
            for (int64_t i = 0; i < n; i++) var += (xf[i] - mean) * (xf[i] - mean);
        } else {
            for (int64_t i = 0; i < n; i++) mean += cpu_load_f64(x + i * (int64_t)xe, xdt);
            mean /= (double)n;
            for (int64_t i = 0; i < n; i++) {
                double d = cpu_load_f64(x + i * (int64_t)xe, xdt) - mean;
                var += d * d;
            }
        }
        double rstd = 1.0 / sqrt(var / (double)n + eps);
        for (int64_t i = 0; i < n; i++) {
            double v = (cpu_load_f64(x + i * (int64_t)xe, xdt) - mean) * rstd;
            if (c->w) v *= param_at(c->w, c->wdt, 1, i);
            if (c->b) v += param_at(c->b, c->bdt, 1, i);
            if (ddt == CT_F32) ((float *)y)[i] = (float)v;
            else cpu_store_f64(y + i * (int64_t)de, ddt, v);
        }
    }
}

static ct_status run_norm(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *bi = op->kind == CT_OP_LAYER_NORM ? op->src[2] : NULL;
    if (ct_tensor_numel(x) == 0) return CT_OK;
    norm_ctx c = {.op = op};
    /* collapse the normalized dims into one (the frontend made them dense) */
    int k = op->kind == CT_OP_LAYER_NORM ? op->p.norm.norm_ndim : 1, outer = x->ndim - k;
    ct_tensor xv = *x, yv = *op->dst;
    c.n = shape_numel(k, x->shape + outer);
    xv.ndim = yv.ndim = outer + 1;
    xv.shape[outer] = yv.shape[outer] = c.n;
    if (k > 1) xv.stride[outer] = yv.stride[outer] = 1;
    cpu_nd_init(&c.it, xv.ndim, xv.shape);
    cpu_nd_add(&c.it, &yv, dev);
    cpu_nd_add(&c.it, &xv, dev);
    if (w) c.w = op_data(w, dev), c.wdt = w->dtype, c.ws = w->stride[0];
    if (bi) c.b = op_data(bi, dev), c.bdt = bi->dtype, c.bs = 1;
    c.fast = x->dtype == CT_F32 && op->dst->dtype == CT_F32 && (cpu_nd_inner(&c.it, 1) == 1 || c.n == 1) &&
             (!w || (w->dtype == CT_F32 && (w->stride[0] == 1 || c.n == 1)));
    c.sumsq = sumsq_portable;
    c.scale_row = scale_row_portable;
#ifdef NN_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX2) c.sumsq = sumsq_avx2, c.scale_row = scale_row_avx2;
    if (lvl >= CPU_SIMD_AVX512) c.sumsq = sumsq_avx512, c.scale_row = scale_row_avx512;
#endif
    int64_t grain = 65536 / (c.n + 1) + 1;
    cpu_parallel_for(cpu_nd_rows(&c.it), grain, op->kind == CT_OP_RMS_NORM ? rms_rows : layer_rows, &c);
    return CT_OK;
}

typedef struct bn_ctx {
    cpu_nd it;
    const float *scale, *shift; /* per channel: y = x * scale + shift */
    int64_t C, inner_rows;      /* channel of a row = (row / inner_rows) % C; 2-D input: the column */
    bool by_col;
    ct_dtype xdt, ydt;
} bn_ctx;

static void bn_rows(void *vctx, int64_t b, int64_t e)
{
    const bn_ctx *c = vctx;
    int64_t n = cpu_nd_cols(&c->it), xs = cpu_nd_inner(&c->it, 1);
    size_t xe = c->it.esize[1], ye = c->it.esize[0];
    for (int64_t r = b; r < e; r++) {
        const char *x = cpu_nd_row(&c->it, 1, r);
        char *y = cpu_nd_row(&c->it, 0, r);
        int64_t ch = c->by_col ? 0 : (r / c->inner_rows) % c->C;
        for (int64_t i = 0; i < n; i++) {
            int64_t k = c->by_col ? i : ch;
            const char *xp = x + i * xs * (int64_t)xe;
            float v = c->xdt == CT_F32 ? *(const float *)xp : cpu_load_f32(xp, c->xdt);
            if (c->ydt == CT_F32) ((float *)y)[i] = v * c->scale[k] + c->shift[k];
            else cpu_store_f64(y + i * (int64_t)ye, c->ydt, (double)v * c->scale[k] + c->shift[k]);
        }
    }
}

static ct_status run_batch_norm(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0];
    int64_t C = x->shape[1];
    if (ct_tensor_numel(x) == 0) return CT_OK;
    float *buf = malloc(sizeof(float) * 2 * (size_t)C);
    if (!buf) return core_err(CT_ERR_OOM, "batch_norm: no memory for %lld channel factors", (long long)C);
    const char *p[4];
    for (int i = 0; i < 4; i++) p[i] = op->src[1 + i] ? op_data(op->src[1 + i], dev) : NULL;
    for (int64_t ch = 0; ch < C; ch++) {
        double v[4] = {0, 0, 1, 0};
        for (int i = 0; i < 4; i++)
            if (p[i]) v[i] = param_at(p[i], op->src[1 + i]->dtype, op->src[1 + i]->stride[0], ch);
        double sc = v[2] / sqrt(v[1] + op->p.norm.eps);
        buf[ch] = (float)sc;
        buf[C + ch] = (float)(v[3] - v[0] * sc);
    }
    bn_ctx c = {.scale = buf, .shift = buf + C, .C = C, .by_col = x->ndim == 2, .xdt = x->dtype, .ydt = op->dst->dtype};
    c.inner_rows = 1;
    for (int i = 2; i < x->ndim - 1; i++) c.inner_rows *= x->shape[i];
    cpu_nd_init(&c.it, x->ndim, x->shape);
    cpu_nd_add(&c.it, op->dst, dev);
    cpu_nd_add(&c.it, x, dev);
    cpu_parallel_for(cpu_nd_rows(&c.it), 32768 / (cpu_nd_cols(&c.it) + 1) + 1, bn_rows, &c);
    free(buf);
    return CT_OK;
}

/* ---- embedding ---- */

typedef struct emb_ctx {
    const ct_tensor *ids, *w;
    const char *idp, *wp;
    float *out;
    int64_t D;
    ct_status status;
} emb_ctx;

static int64_t id_at(const ct_tensor *ids, const char *base, int64_t flat)
{
    int64_t off = 0;
    for (int d = ids->ndim - 1; d >= 0; d--) {
        off += (flat % ids->shape[d]) * ids->stride[d];
        flat /= ids->shape[d];
    }
    return ids->dtype == CT_I32 ? ((const int32_t *)base)[off] : ((const int64_t *)base)[off];
}

static void emb_rows(void *vctx, int64_t b, int64_t e)
{
    emb_ctx *c = vctx;
    const ct_tensor *w = c->w;
    ct_dtype dt = w->dtype;
    bool quant = ct_dtype_is_quantized(dt);
    size_t es = ct_dtype_block_bytes(dt);
    int64_t bs = ct_dtype_block_size(dt), s1 = w->stride[1];
    for (int64_t r = b; r < e; r++) {
        int64_t id = id_at(c->ids, c->idp, r);
        float *y = c->out + r * c->D;
        if (quant) {
            const char *row = c->wp + (id * w->stride[0] / bs) * (int64_t)es;
            ct_status s = quant_dequantize_row(dt, row, y, c->D);
            if (s != CT_OK) {
                set_status(&c->status, s);
                return;
            }
            continue;
        }
        const char *row = c->wp + id * w->stride[0] * (int64_t)es;
        if (dt == CT_F32 && s1 == 1) memcpy(y, row, sizeof(float) * (size_t)c->D);
        else if (dt == CT_F16)
            for (int64_t i = 0; i < c->D; i++) y[i] = ct_f16_to_f32(((const uint16_t *)row)[i * s1]);
        else
            for (int64_t i = 0; i < c->D; i++) y[i] = cpu_load_f32(row + i * s1 * (int64_t)es, dt);
    }
}

static ct_status run_embedding(ct_device *dev, const ct_op *op)
{
    const ct_tensor *w = op->src[0], *ids = op->src[1];
    emb_ctx c = {.ids = ids, .w = w, .idp = op_data(ids, dev), .wp = op_data(w, dev), .out = op_data(op->dst, dev),
                 .D = w->shape[1], .status = CT_OK};
    int64_t n = ct_tensor_numel(ids), V = w->shape[0];
    if (n == 0) return CT_OK;
    /* ids are data: validated here, before anything is written */
    for (int64_t i = 0; i < n; i++) {
        int64_t id = id_at(ids, c.idp, i);
        if (id < 0 || id >= V)
            return core_err(CT_ERR_RANGE, "embedding: id %lld (at flat index %lld of ids %s) is outside [0, %lld) for weight %s",
                            (long long)id, (long long)i, SHAPE_STR(ids), (long long)V, SHAPE_STR(w));
    }
    if (c.D == 0) return CT_OK;
    cpu_parallel_for(n, 16384 / (c.D + 1) + 1, emb_rows, &c);
    return c.status;
}

ct_status cpu_run_nn(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_CONV2D:
    case CT_OP_CONV_TRANSPOSE2D: return cpu_run_conv(dev, op);
    case CT_OP_MAX_POOL2D:
    case CT_OP_AVG_POOL2D: return run_pool(dev, op);
    case CT_OP_BATCH_NORM: return run_batch_norm(dev, op);
    case CT_OP_LAYER_NORM:
    case CT_OP_RMS_NORM: return run_norm(dev, op);
    case CT_OP_EMBEDDING: return run_embedding(dev, op);
    default: break;
    }
    return core_err(CT_ERR_UNSUPPORTED, "cpu: %s is not a neural-network op", op_kind_name(op->kind));
}
