/* The CUDA nn group: unpacks ct_ops into the launchers of nn_kernels.cu / attention.cu, and
 * the cuBLAS products (nn_blas.c) and convolutions (nn_conv.c). supports() claims f32/f16/bf16
 * operands in the layouts the kernels read (any strides, up to NN_MAX_DIMS dims); f64 goes to
 * the next device. Data-dependent errors the CPU reports (an index out of range, an attended
 * length outside [0, Tk]) cannot be reported from an asynchronous kernel: embedding writes
 * NaN rows, sdpa a NaN output, set_rows writes nothing (see nn_kernels.h). */
#include <limits.h>

#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/nn_blas.h"
#include "backends/cuda/nn_conv.h"
#include "backends/cuda/nn_kernels.h"

static bool is_half_float(ct_dtype t) { return t == CT_F32 || t == CT_F16 || t == CT_BF16; }
static bool is_index(ct_dtype t) { return t == CT_I32 || t == CT_I64; }
static bool opt_float(const ct_tensor *t) { return !t || (is_half_float(t->dtype) && t->ndim <= 1); }

/* Row kernels cache rows up to the most dynamic shared memory a block may have: a cached
 * row is read from global memory once (rows that long get 1024 threads, nn_kernels.cu).
 * The opt-in limit counts static shared memory too: 1 KiB is left for the kernels' own
 * (a 33-float reduction buffer); asking for all of it fails (cudaErrorInvalidValue). */
static size_t row_smem(const ct_device *dev)
{
    size_t m = cuda_of(dev)->smem_optin;
    return m > 48 * 1024 ? m - 1024 : 46 * 1024;
}

/* Rows of dst/x over every dim but `skip` (-1: none). */
static nn_rows rows_except(const ct_tensor *dst, const ct_tensor *x, int nd, int skip, int64_t *n_rows)
{
    nn_rows r = {0};
    *n_rows = 1;
    for (int d = 0; d < nd; d++) {
        if (d == skip) continue;
        r.shape[r.nd] = x->shape[d];
        r.st[0][r.nd] = dst->stride[d];
        r.st[1][r.nd] = x->stride[d];
        r.nd++;
        *n_rows *= x->shape[d];
    }
    return r;
}

static nn_view view_of(const ct_tensor *t)
{
    nn_view v = {.nd = t->ndim};
    for (int d = 0; d < t->ndim; d++) v.shape[d] = t->shape[d], v.st[d] = t->stride[d];
    return v;
}

static ct_status launched(const ct_device *dev, cudaError_t e, const char *what)
{
    if (e != cudaSuccess) return cuda_status(e, dev, what);
    return cuda_check_launch(dev, what);
}

/* ---- supports ---- */

static bool rows_fit(int64_t n_rows) { return n_rows <= INT_MAX; }

static bool supports_rowwise(const ct_op *op)
{
    const ct_tensor *x = op->src[0];
    if (!is_half_float(x->dtype) || op->dst->dtype != x->dtype || x->ndim > NN_MAX_DIMS) return false;
    int64_t len = x->ndim ? x->shape[op->kind == CT_OP_SOFTMAX || op->kind == CT_OP_LOG_SOFTMAX ? op->p.dim.dim
                                                                                                : x->ndim - 1]
                          : 1;
    return rows_fit(len ? ct_tensor_numel(x) / len : 0);
}

static bool supports_sdpa(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3];
    const ct_tensor *len = op->n_src > 4 ? op->src[4] : NULL;
    if (op->n_src < 3 || !q || !k || !v || q->ndim != 4 || k->ndim != 4 || v->ndim != 4 || op->dst->ndim != 4)
        return false;
    if (q->dtype != CT_F32 || (k->dtype != CT_F32 && k->dtype != CT_F16) || (v->dtype != CT_F32 && v->dtype != CT_F16))
        return false;
    if (mask && mask->dtype != CT_F32) return false;
    if (len && !is_index(len->dtype)) return false;
    const ct_tensor *unit[3] = {q, k, v};
    for (int i = 0; i < 3; i++)
        if (unit[i]->stride[3] != 1 && unit[i]->shape[3] > 1) return false;
    int64_t D = q->shape[3], Dv = v->shape[3];
    /* past the default 48 KiB a block opts in once for the largest head dims (attention.cu) */
    if (D > 256 || Dv > 256 || (nn_sdpa_smem(D, Dv) > 48 * 1024 && nn_sdpa_smem(256, 256) > cuda_of(dev)->smem_optin))
        return false;
    int64_t G = q->shape[1] / (k->shape[1] ? k->shape[1] : 1);
    return q->shape[0] * k->shape[1] * ((G * q->shape[2] + 15) / 16) <= INT_MAX;
}

bool cuda_nn_supports(const ct_device *dev, const ct_op *op)
{
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && ct_dtype_is_quantized(op->src[i]->dtype)) return false;
    switch (op->kind) {
    case CT_OP_SOFTMAX:
    case CT_OP_LOG_SOFTMAX:
    case CT_OP_RMS_NORM: return supports_rowwise(op) && (op->kind != CT_OP_RMS_NORM || opt_float(op->src[1]));
    case CT_OP_LAYER_NORM:
        return is_half_float(op->src[0]->dtype) && op->dst->dtype == op->src[0]->dtype &&
               op->src[0]->ndim <= NN_MAX_DIMS && (!op->src[1] || is_half_float(op->src[1]->dtype)) &&
               (!op->src[2] || is_half_float(op->src[2]->dtype));
    case CT_OP_BATCH_NORM:
        for (int i = 1; i < 5; i++)
            if (!opt_float(op->src[i])) return false;
        return is_half_float(op->src[0]->dtype) && op->dst->dtype == op->src[0]->dtype && op->src[0]->ndim <= NN_MAX_DIMS;
    case CT_OP_ROPE:
        return is_half_float(op->src[0]->dtype) && is_half_float(op->dst->dtype) && op->src[0]->ndim <= NN_MAX_DIMS &&
               is_index(op->src[1]->dtype);
    case CT_OP_EMBEDDING:
        return is_half_float(op->src[0]->dtype) && is_index(op->src[1]->dtype) && op->src[1]->ndim <= NN_MAX_DIMS &&
               ct_tensor_numel(op->src[1]) <= INT_MAX;
    case CT_OP_SET_ROWS:
        return is_half_float(op->src[0]->dtype) && is_half_float(op->dst->dtype) && is_index(op->src[1]->dtype);
    case CT_OP_MAX_POOL2D:
    case CT_OP_AVG_POOL2D: return is_half_float(op->src[0]->dtype) && op->dst->dtype == op->src[0]->dtype;
    case CT_OP_SDPA: return supports_sdpa(dev, op);
    case CT_OP_MATMUL:
    case CT_OP_LINEAR: return nn_blas_supports(dev, op);
    case CT_OP_CONV2D:
    case CT_OP_CONV_TRANSPOSE2D: return nn_conv_supports(dev, op);
    default: return false;
    }
}

/* ---- run ---- */

static ct_status run_softmax(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst;
    int dim = x->ndim ? op->p.dim.dim : 0;
    int64_t n_rows;
    nn_rows rows = rows_except(y, x, x->ndim, dim, &n_rows);
    int64_t n = x->ndim ? x->shape[dim] : 1, xs = x->ndim ? x->stride[dim] : 1, ys = y->ndim ? y->stride[dim] : 1;
    cudaError_t e = nn_softmax(op_data(x, dev), op_data(y, dev), x->dtype, rows, n_rows, n, xs, ys,
                               op->kind == CT_OP_LOG_SOFTMAX, row_smem(dev), cuda_of(dev)->stream);
    return launched(dev, e, op_kind_name(op->kind));
}

static ct_status run_norm(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst, *w = op->src[1];
    const ct_tensor *b = op->kind == CT_OP_LAYER_NORM ? op->src[2] : NULL;
    if (x->ndim == 0 || ct_tensor_numel(x) == 0) return CT_OK;
    int k = op->kind == CT_OP_LAYER_NORM ? op->p.norm.norm_ndim : 1, outer = x->ndim - k;
    int64_t n_rows, n = shape_numel(k, x->shape + outer);
    nn_rows rows = rows_except(y, x, outer, -1, &n_rows);
    /* layer_norm's normalized dims are dense (the frontend made them so): one run */
    int64_t xs = k > 1 ? 1 : x->stride[outer], ys = k > 1 ? 1 : y->stride[outer];
    cudaError_t e = nn_norm(op->kind == CT_OP_LAYER_NORM, op_data(x, dev), op_data(y, dev), x->dtype, rows, n_rows, n,
                            xs, ys, w ? op_data(w, dev) : NULL, w ? w->dtype : CT_F32,
                            w ? (k > 1 ? 1 : w->stride[0]) : 0, b ? op_data(b, dev) : NULL, b ? b->dtype : CT_F32,
                            op->p.norm.eps, row_smem(dev), cuda_of(dev)->stream);
    return launched(dev, e, op_kind_name(op->kind));
}

static ct_status run_batch_norm(ct_device *dev, const ct_op *op)
{
    const void *prm[4];
    ct_dtype pdt[4];
    int64_t pst[4];
    for (int i = 0; i < 4; i++) {
        const ct_tensor *p = op->src[1 + i];
        prm[i] = p ? op_data(p, dev) : NULL;
        pdt[i] = p ? p->dtype : CT_F32;
        pst[i] = p ? p->stride[0] : 0;
    }
    cudaError_t e = nn_batch_norm(op_data(op->src[0], dev), op->src[0]->dtype, view_of(op->src[0]), op_data(op->dst, dev),
                                  op->dst->dtype, view_of(op->dst), prm, pdt, pst, op->p.norm.eps, cuda_of(dev)->stream);
    return launched(dev, e, "batch_norm");
}

static ct_status run_rope(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *pos = op->src[1], *y = op->dst;
    int nd = x->ndim;
    int64_t n_rows;
    nn_rows rows = rows_except(y, x, nd - 1, -1, &n_rows);
    const ct_rope_params *p = &op->p.rope;
    cudaError_t e = nn_rope(op_data(x, dev), x->dtype, op_data(y, dev), y->dtype, rows, n_rows, x->shape[nd - 3],
                            x->shape[nd - 2], x->shape[nd - 1], x->stride[nd - 1], y->stride[nd - 1], op_data(pos, dev),
                            pos->dtype, pos->stride[0], p->n_dims, p->freq_base, p->freq_scale,
                            p->mode == CT_ROPE_NEOX, cuda_of(dev)->stream);
    return launched(dev, e, "rope");
}

static ct_status run_embedding(ct_device *dev, const ct_op *op)
{
    const ct_tensor *w = op->src[0], *ids = op->src[1];
    cudaError_t e = nn_embedding(op_data(w, dev), w->dtype, w->shape[0], w->shape[1], w->stride[0], w->stride[1],
                                 op_data(ids, dev), ids->dtype, view_of(ids), op_data(op->dst, dev),
                                 ct_tensor_numel(ids), cuda_of(dev)->stream);
    return launched(dev, e, "embedding");
}

static ct_status run_set_rows(ct_device *dev, const ct_op *op)
{
    const ct_tensor *src = op->src[0], *idx = op->src[1], *dst = op->dst;
    cudaError_t e = nn_set_rows(op_data(src, dev), src->dtype, src->stride[0], src->stride[1], op_data(idx, dev),
                                idx->dtype, idx->stride[0], op_data(dst, dev), dst->dtype, dst->stride[0],
                                dst->stride[1], src->shape[0], src->shape[1], dst->shape[0], cuda_of(dev)->stream);
    return launched(dev, e, "set_rows");
}

static ct_status run_pool(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst;
    const ct_pool2d_params *pp = &op->p.pool;
    int nd = x->ndim;
    nn_pool p = {.C = nd == 4 ? x->shape[1] : x->shape[0], .xn = nd == 4 ? x->stride[0] : 0,
                 .xc = nd == 4 ? x->stride[1] : x->stride[0], .xh = x->stride[nd - 2], .xw = x->stride[nd - 1],
                 .H = x->shape[nd - 2], .W = x->shape[nd - 1], .Ho = y->shape[nd - 2], .Wo = y->shape[nd - 1],
                 .kh = pp->kernel[0], .kw = pp->kernel[1], .sh = pp->stride[0], .sw = pp->stride[1],
                 .ph = pp->padding[0], .pw = pp->padding[1], .is_max = op->kind == CT_OP_MAX_POOL2D,
                 .count_include_pad = pp->count_include_pad};
    p.planes = p.Ho * p.Wo > 0 ? ct_tensor_numel(y) / (p.Ho * p.Wo) : 0;
    cudaError_t e = nn_pool2d(op_data(x, dev), op_data(y, dev), x->dtype, p, cuda_of(dev)->stream);
    return launched(dev, e, op_kind_name(op->kind));
}

static nn_sdpa sdpa_args(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3];
    const ct_tensor *len = op->n_src > 4 ? op->src[4] : NULL;
    nn_sdpa a = {.q = op_data(q, dev), .k = op_data(k, dev), .v = op_data(v, dev),
                 .mask = mask ? op_data(mask, dev) : NULL, .len = len ? op_data(len, dev) : NULL,
                 .out = op_data(op->dst, dev), .kdt = k->dtype, .vdt = v->dtype, .ldt = len ? len->dtype : CT_I32,
                 .B = q->shape[0], .Hq = q->shape[1], .Hkv = k->shape[1], .Tq = q->shape[2], .Tk = k->shape[2],
                 .D = q->shape[3], .Dv = v->shape[3], .scale = (float)op->p.attn.scale, .causal = op->p.attn.causal,
                 .window = op->p.attn.window};
    for (int i = 0; i < 4; i++) {
        a.qs[i] = q->stride[i], a.ks[i] = k->stride[i], a.vs[i] = v->stride[i];
        a.ms[i] = mask ? mask->stride[i] : 0;
    }
    a.n_split = nn_sdpa_plan(&a, cuda_of(dev)->sm_count);
    return a;
}

static ct_status launch_sdpa(ct_device *dev, nn_sdpa a)
{
    cuda_dev *cd = cuda_of(dev);
    size_t part_bytes = 0;
    if (a.n_split > 1) {
        /* the partials, then (when the device's own zeroed counters are too few) one merge
         * counter per KV head, zeroed here in stream order */
        size_t floats = (size_t)a.n_split * (size_t)(a.B * a.Hq * a.Tq) * (size_t)((a.Dv + 3) / 4 * 4 + 2);
        size_t counters = a.B * a.Hkv <= CUDA_SDPA_COUNTERS ? 0 : (size_t)(a.B * a.Hkv);
        part_bytes = sizeof(float) * floats + sizeof(unsigned) * counters;
        void *p;
        ct_status s = cuda_tmp_alloc(dev, part_bytes, &p);
        if (s != CT_OK) return s;
        a.part = p;
        a.count = counters ? (unsigned *)(a.part + floats) : cd->sdpa_count;
        cudaError_t e = counters ? cudaMemsetAsync(a.count, 0, sizeof(unsigned) * counters, cd->stream) : cudaSuccess;
        if (e != cudaSuccess) {
            cuda_tmp_free(dev, p, part_bytes);
            return cuda_status(e, dev, "sdpa: zeroing the merge counters");
        }
    }
    ct_status s = launched(dev, nn_sdpa_run(&a, cd->stream), "sdpa");
    if (a.part) cuda_tmp_free(dev, a.part, part_bytes);
    return s;
}

static ct_status run_sdpa(ct_device *dev, const ct_op *op) { return launch_sdpa(dev, sdpa_args(dev, op)); }

ct_status cuda_sdpa_q8(ct_device *dev, const ct_op *op, int8_t *q, float *d, float *s8, bool early_next, bool *launched)
{
    nn_sdpa a = sdpa_args(dev, op);
    *launched = op->kind == CT_OP_SDPA && nn_sdpa_q8_ok(&a);
    if (!*launched) return CT_OK;
    a.oq = q, a.od = d, a.os8 = s8;
    a.early_next = early_next;
    return launch_sdpa(dev, a);
}

ct_status cuda_nn_run(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_SOFTMAX:
    case CT_OP_LOG_SOFTMAX: return run_softmax(dev, op);
    case CT_OP_RMS_NORM:
    case CT_OP_LAYER_NORM: return run_norm(dev, op);
    case CT_OP_BATCH_NORM: return run_batch_norm(dev, op);
    case CT_OP_ROPE: return run_rope(dev, op);
    case CT_OP_EMBEDDING: return run_embedding(dev, op);
    case CT_OP_SET_ROWS: return run_set_rows(dev, op);
    case CT_OP_MAX_POOL2D:
    case CT_OP_AVG_POOL2D: return run_pool(dev, op);
    case CT_OP_SDPA: return run_sdpa(dev, op);
    case CT_OP_MATMUL:
    case CT_OP_LINEAR: return nn_blas_run(dev, op);
    case CT_OP_CONV2D:
    case CT_OP_CONV_TRANSPOSE2D: return nn_conv_run(dev, op);
    default: break;
    }
    return core_err(CT_ERR_UNSUPPORTED, "cuda: %s is not an nn op", op_kind_name(op->kind));
}
