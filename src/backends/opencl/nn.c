/* The OpenCL nn group: dispatch, and the row-wise ops (softmax/log_softmax, rms/layer/batch
 * norm, rope, embedding of a plain table, set_rows, max/avg pool2d) and convolutions. Matrix products are in
 * nn_linalg.c, attention in nn_attention.c; conv2d and conv_transpose2d are direct f32
 * kernels. Every kernel reads strided views in place; f16 and bf16 are storage only
 * (arithmetic in f32). Ops whose dtypes or layouts the kernels do not cover (f64, quantized
 * tables) are refused and run on the next device. */
#include <string.h>

#include "backends/opencl/nn_internal.h"

int nn_dt(ct_dtype t)
{
    switch (t) {
    case CT_F32: return 0;
    case CT_F16: return 1;
    case CT_BF16: return 2;
    default: return -1;
    }
}

ct_status nn_mem(const ct_tensor *t, const ct_device *dev, const char *what, cl_mem *mem, cl_ulong *off)
{
    *mem = ocl_mem(t, dev, off);
    if (!*mem)
        return core_err(CT_ERR_DEVICE_FAULT, "opencl: %s: operand %s has no copy on %s", what, SHAPE_STR(t),
                        dev->info.name);
    return CT_OK;
}

void nn_nd(cl_long8 *sh, cl_long8 *sd, int n, const int64_t *shape, const int64_t *stride)
{
    for (int i = 0; i < 8; i++) sh->s[i] = 1, sd->s[i] = 0;
    for (int i = 0; i < n; i++) {
        sh->s[8 - n + i] = shape[i];
        sd->s[8 - n + i] = stride[i];
    }
}

size_t nn_wg(const ct_device *dev, size_t cap)
{
    size_t lim = ocl_info(dev)->max_wg, w = 1;
    if (lim < cap) cap = lim;
    while (w * 2 <= cap) w *= 2;
    return w;
}

ct_status nn_launch(ct_device *dev, const char *program, const char *name, int n_args, const ocl_arg *args,
                    cl_uint dims, const size_t *global, const size_t *local)
{
    cl_kernel k;
    ct_status s = ocl_kernel(dev, program, name, &k);
    if (s == CT_OK) s = ocl_args(dev, k, name, n_args, args);
    if (s == CT_OK) s = ocl_launch(dev, k, name, dims, global, local);
    return s;
}

static bool g_force_gpu_kernels;

void nn_force_gpu_kernels(bool on) { g_force_gpu_kernels = on; }

bool nn_cpu_style(const ct_device *dev)
{
    return !g_force_gpu_kernels && (ocl_info(dev)->type & CL_DEVICE_TYPE_CPU);
}


/* The dims of t other than `skip` (-1: none), for nn_nd. */
static int drop_dim(const ct_tensor *t, int skip, int64_t *shape, int64_t *stride)
{
    int n = 0;
    for (int d = 0; d < t->ndim; d++)
        if (d != skip) shape[n] = t->shape[d], stride[n] = t->stride[d], n++;
    return n;
}

/* ---- softmax / log_softmax ---- */

static ct_status run_softmax(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst;
    const char *name = op_kind_name(op->kind);
    if (ct_tensor_numel(x) == 0) return CT_OK;
    int dim = x->ndim ? op->p.dim.dim : -1;
    cl_long n = dim >= 0 ? x->shape[dim] : 1, xs = dim >= 0 ? x->stride[dim] : 0, ys = dim >= 0 ? y->stride[dim] : 0;
    int64_t shp[CT_MAX_DIMS], xst[CT_MAX_DIMS], yst[CT_MAX_DIMS];
    int nd = drop_dim(x, dim, shp, xst);
    drop_dim(y, dim, shp, yst);
    cl_long8 osh, oxs, oys;
    nn_nd(&osh, &oxs, nd, shp, xst);
    nn_nd(&osh, &oys, nd, shp, yst);
    cl_mem xm, ym;
    cl_ulong xo, yo;
    ct_status s = nn_mem(x, dev, name, &xm, &xo);
    if (s == CT_OK) s = nn_mem(y, dev, name, &ym, &yo);
    if (s != CT_OK) return s;
    cl_int dtx = nn_dt(x->dtype), dty = nn_dt(y->dtype), logm = op->kind == CT_OP_LOG_SOFTMAX;
    size_t wg = nn_wg(dev, NN_ROW_WG), global = (size_t)(ct_tensor_numel(x) / n) * wg;
    ocl_arg a[] = {OCL_ARG(xm),  OCL_ARG(xo),  OCL_ARG(ym),  OCL_ARG(yo),   OCL_ARG(osh),
                   OCL_ARG(oxs), OCL_ARG(oys), OCL_ARG(n),   OCL_ARG(xs),   OCL_ARG(ys),
                   OCL_ARG(dtx), OCL_ARG(dty), OCL_ARG(logm), OCL_LOCAL(wg * sizeof(float))};
    return nn_launch(dev, "nn", "nn_softmax", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
}

/* ---- rms_norm / layer_norm ---- */

static ct_status run_norm(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst, *w = op->src[1];
    bool layer = op->kind == CT_OP_LAYER_NORM;
    const ct_tensor *bi = layer ? op->src[2] : NULL;
    const char *name = op_kind_name(op->kind);
    if (ct_tensor_numel(x) == 0) return CT_OK;
    /* the normalized dims are one dense run (the frontend made them so) */
    int k = layer ? op->p.norm.norm_ndim : 1, outer = x->ndim - k;
    cl_long n = shape_numel(k, x->shape + outer);
    cl_long xs = k > 1 ? 1 : x->stride[x->ndim - 1], ys = k > 1 ? 1 : y->stride[y->ndim - 1];
    cl_long ws = w && !layer ? w->stride[0] : 1;
    cl_long8 osh, oxs, oys;
    nn_nd(&osh, &oxs, outer, x->shape, x->stride);
    nn_nd(&osh, &oys, outer, y->shape, y->stride);
    cl_mem xm, ym, wm, bm;
    cl_ulong xo, yo, wo = 0, bo = 0;
    ct_status s = nn_mem(x, dev, name, &xm, &xo);
    if (s == CT_OK) s = nn_mem(y, dev, name, &ym, &yo);
    wm = bm = xm; /* absent weight/bias: any valid buffer, never read */
    if (s == CT_OK && w) s = nn_mem(w, dev, name, &wm, &wo);
    if (s == CT_OK && bi) s = nn_mem(bi, dev, name, &bm, &bo);
    if (s != CT_OK) return s;
    cl_int dtx = nn_dt(x->dtype), dty = nn_dt(y->dtype), dtw = w ? nn_dt(w->dtype) : 0, dtb = bi ? nn_dt(bi->dtype) : 0;
    cl_int has_w = w != NULL, has_b = bi != NULL, lay = layer;
    cl_float eps = (cl_float)op->p.norm.eps;
    size_t wg = nn_wg(dev, NN_ROW_WG), global = (size_t)(ct_tensor_numel(x) / n) * wg;
    ocl_arg a[] = {OCL_ARG(xm),  OCL_ARG(xo),    OCL_ARG(ym),    OCL_ARG(yo),  OCL_ARG(wm),  OCL_ARG(wo),
                   OCL_ARG(bm),  OCL_ARG(bo),    OCL_ARG(osh),   OCL_ARG(oxs), OCL_ARG(oys), OCL_ARG(n),
                   OCL_ARG(xs),  OCL_ARG(ys),    OCL_ARG(ws),    OCL_ARG(dtx), OCL_ARG(dty), OCL_ARG(dtw),
                   OCL_ARG(dtb), OCL_ARG(has_w), OCL_ARG(has_b), OCL_ARG(lay), OCL_ARG(eps),
                   OCL_LOCAL(wg * sizeof(float))};
    return nn_launch(dev, "nn", "nn_norm", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
}

/* ---- batch_norm ---- */

static ct_status run_batch_norm(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst;
    const char *name = "batch_norm";
    cl_long total = ct_tensor_numel(x);
    if (total == 0) return CT_OK;
    cl_long C = x->shape[1], inner = shape_numel(x->ndim - 2, x->shape + 2);
    cl_long8 sh, xsd, ysd;
    nn_nd(&sh, &xsd, x->ndim, x->shape, x->stride);
    nn_nd(&sh, &ysd, y->ndim, y->shape, y->stride);
    cl_mem xm, ym, pm[4];
    cl_ulong xo, yo, po[4] = {0};
    cl_long4 ps = {{0}};
    cl_int4 pdt = {{0}}, has = {{0}};
    ct_status s = nn_mem(x, dev, name, &xm, &xo);
    if (s == CT_OK) s = nn_mem(y, dev, name, &ym, &yo);
    for (int i = 0; i < 4 && s == CT_OK; i++) {
        const ct_tensor *p = op->src[1 + i];
        pm[i] = xm;
        if (!p) continue;
        s = nn_mem(p, dev, name, &pm[i], &po[i]);
        ps.s[i] = p->stride[0], pdt.s[i] = nn_dt(p->dtype), has.s[i] = 1;
    }
    if (s != CT_OK) return s;
    cl_int dtx = nn_dt(x->dtype), dty = nn_dt(y->dtype);
    cl_float eps = (cl_float)op->p.norm.eps;
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)total, wg);
    ocl_arg a[] = {OCL_ARG(xm),    OCL_ARG(xo),    OCL_ARG(ym),    OCL_ARG(yo),  OCL_ARG(pm[0]), OCL_ARG(po[0]),
                   OCL_ARG(pm[1]), OCL_ARG(po[1]), OCL_ARG(pm[2]), OCL_ARG(po[2]), OCL_ARG(pm[3]), OCL_ARG(po[3]),
                   OCL_ARG(sh),    OCL_ARG(xsd),   OCL_ARG(ysd),   OCL_ARG(C),   OCL_ARG(inner), OCL_ARG(ps),
                   OCL_ARG(pdt),   OCL_ARG(has),   OCL_ARG(dtx),   OCL_ARG(dty), OCL_ARG(eps),   OCL_ARG(total)};
    return nn_launch(dev, "nn", "nn_batch_norm", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
}

/* ---- rope ---- */

/* v as the float sum hi + lo: the kernel rebuilds it in double where it has doubles. */
static cl_float2 split_double(double v)
{
    cl_float2 r;
    r.s[0] = (float)v;
    r.s[1] = (float)(v - (double)r.s[0]);
    return r;
}

ct_status nn_rope_prepare(ct_device *dev, const ct_op *op, nn_rope_a *r, ocl_arg *a, cl_long *work)
{
    const ct_tensor *x = op->src[0], *pos = op->src[1], *y = op->dst;
    const ct_rope_params *p = &op->p.rope;
    int nd = x->ndim;
    r->T = x->shape[nd - 3], r->H = x->shape[nd - 2], r->D = x->shape[nd - 1], r->half = p->n_dims / 2;
    r->rows = ct_tensor_numel(x) / (r->D ? r->D : 1), r->xs = x->stride[nd - 1], r->ys = y->stride[nd - 1];
    r->ps = pos->stride[0];
    nn_nd(&r->rsh, &r->rxs, nd - 1, x->shape, x->stride);
    nn_nd(&r->rsh, &r->rys, nd - 1, y->shape, y->stride);
    ct_status s = nn_mem(x, dev, "rope", &r->xm, &r->xo);
    if (s == CT_OK) s = nn_mem(y, dev, "rope", &r->ym, &r->yo);
    if (s == CT_OK) s = nn_mem(pos, dev, "rope", &r->pm, &r->po);
    if (s != CT_OK) return s;
    r->p64 = pos->dtype == CT_I64, r->neox = p->mode == CT_ROPE_NEOX, r->dtx = nn_dt(x->dtype), r->dty = nn_dt(y->dtype);
    r->base = split_double(p->freq_base), r->scale = split_double(p->freq_scale);
    *work = ct_tensor_numel(x) ? r->rows * (r->D - r->half) : 0;
    ocl_arg l[NN_ROPE_NARGS] = {OCL_ARG(r->xm),   OCL_ARG(r->xo),    OCL_ARG(r->ym),  OCL_ARG(r->yo),  OCL_ARG(r->pm),
                                OCL_ARG(r->po),   OCL_ARG(r->rsh),   OCL_ARG(r->rxs), OCL_ARG(r->rys), OCL_ARG(r->xs),
                                OCL_ARG(r->ys),   OCL_ARG(r->ps),    OCL_ARG(r->p64), OCL_ARG(r->T),   OCL_ARG(r->H),
                                OCL_ARG(r->D),    OCL_ARG(r->half),  OCL_ARG(r->neox), OCL_ARG(r->base), OCL_ARG(r->scale),
                                OCL_ARG(r->dtx),  OCL_ARG(r->dty),   OCL_ARG(r->rows)};
    memcpy(a, l, sizeof l);
    return CT_OK;
}

static ct_status run_rope(ct_device *dev, const ct_op *op)
{
    nn_rope_a r;
    ocl_arg a[NN_ROPE_NARGS];
    cl_long work = 0;
    ct_status s = nn_rope_prepare(dev, op, &r, a, &work);
    if (s != CT_OK || work == 0) return s;
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)work, wg);
    return nn_launch(dev, "nn", "nn_rope", NN_ROPE_NARGS, a, 1, &global, &wg);
}

/* ---- embedding of a plain table ---- */

static ct_status run_embedding(ct_device *dev, const ct_op *op)
{
    const ct_tensor *w = op->src[0], *ids = op->src[1], *y = op->dst;
    cl_long V = w->shape[0], D = w->shape[1], total = ct_tensor_numel(ids) * D;
    if (total == 0) return CT_OK;
    cl_long ws0 = w->stride[0], ws1 = w->stride[1];
    cl_long8 ish, isd;
    nn_nd(&ish, &isd, ids->ndim, ids->shape, ids->stride);
    cl_mem wm, im, ym;
    cl_ulong wo, io, yo;
    ct_status s = nn_mem(w, dev, "embedding", &wm, &wo);
    if (s == CT_OK) s = nn_mem(ids, dev, "embedding", &im, &io);
    if (s == CT_OK) s = nn_mem(y, dev, "embedding", &ym, &yo);
    if (s != CT_OK) return s;
    cl_int i64 = ids->dtype == CT_I64, dtw = nn_dt(w->dtype);
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)total, wg);
    ocl_arg a[] = {OCL_ARG(wm), OCL_ARG(wo), OCL_ARG(im),  OCL_ARG(io),  OCL_ARG(ym),  OCL_ARG(yo),
                   OCL_ARG(ish), OCL_ARG(isd), OCL_ARG(i64), OCL_ARG(V), OCL_ARG(D), OCL_ARG(ws0),
                   OCL_ARG(ws1), OCL_ARG(dtw), OCL_ARG(total)};
    return nn_launch(dev, "nn", "nn_embedding", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
}

/* ---- set_rows ---- */

ct_status nn_set_rows_prepare(ct_device *dev, const ct_op *op, nn_set_rows_a *r, ocl_arg *a, cl_long *work)
{
    const ct_tensor *src = op->src[0], *idx = op->src[1], *dst = op->dst;
    r->C = src->shape[1], r->R = dst->shape[0], *work = src->shape[0] * r->C;
    r->ss0 = src->stride[0], r->ss1 = src->stride[1], r->is0 = idx->stride[0], r->ds0 = dst->stride[0],
    r->ds1 = dst->stride[1], r->total = *work;
    ct_status s = nn_mem(src, dev, "set_rows", &r->sm, &r->so);
    if (s == CT_OK) s = nn_mem(idx, dev, "set_rows", &r->im, &r->io);
    if (s == CT_OK) s = nn_mem(dst, dev, "set_rows", &r->dm, &r->dof);
    if (s != CT_OK) return s;
    r->i64 = idx->dtype == CT_I64, r->dts = nn_dt(src->dtype), r->dtd = nn_dt(dst->dtype);
    ocl_arg l[NN_SET_ROWS_NARGS] = {OCL_ARG(r->sm),  OCL_ARG(r->so),  OCL_ARG(r->im),  OCL_ARG(r->io), OCL_ARG(r->dm),
                                    OCL_ARG(r->dof), OCL_ARG(r->ss0), OCL_ARG(r->ss1), OCL_ARG(r->is0), OCL_ARG(r->i64),
                                    OCL_ARG(r->ds0), OCL_ARG(r->ds1), OCL_ARG(r->R),   OCL_ARG(r->C),  OCL_ARG(r->dts),
                                    OCL_ARG(r->dtd), OCL_ARG(r->total)};
    memcpy(a, l, sizeof l);
    return CT_OK;
}

static ct_status run_set_rows(ct_device *dev, const ct_op *op)
{
    nn_set_rows_a r;
    ocl_arg a[NN_SET_ROWS_NARGS];
    cl_long work = 0;
    ct_status s = nn_set_rows_prepare(dev, op, &r, a, &work);
    if (s != CT_OK || work == 0) return s;
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)work, wg);
    return nn_launch(dev, "nn", "nn_set_rows", NN_SET_ROWS_NARGS, a, 1, &global, &wg);
}

/* ---- pooling ---- */

static ct_status run_pool(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst;
    const ct_pool2d_params *p = &op->p.pool;
    int nd = x->ndim;
    cl_long total = ct_tensor_numel(y);
    if (total == 0) return CT_OK;
    cl_long C = nd == 4 ? x->shape[1] : x->shape[0], xsn = nd == 4 ? x->stride[0] : 0,
            xsc = nd == 4 ? x->stride[1] : x->stride[0], xsh = x->stride[nd - 2], xsw = x->stride[nd - 1],
            H = x->shape[nd - 2], W = x->shape[nd - 1], Ho = y->shape[nd - 2], Wo = y->shape[nd - 1];
    cl_int4 kp = {{p->kernel[0], p->kernel[1], p->stride[0], p->stride[1]}};
    cl_int2 pad = {{p->padding[0], p->padding[1]}};
    cl_int is_max = op->kind == CT_OP_MAX_POOL2D, incl = p->count_include_pad, dt = nn_dt(x->dtype);
    cl_mem xm, ym;
    cl_ulong xo, yo;
    ct_status s = nn_mem(x, dev, "pool2d", &xm, &xo);
    if (s == CT_OK) s = nn_mem(y, dev, "pool2d", &ym, &yo);
    if (s != CT_OK) return s;
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)total, wg);
    ocl_arg a[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(ym),  OCL_ARG(yo),     OCL_ARG(C),  OCL_ARG(xsn), OCL_ARG(xsc),
                   OCL_ARG(xsh), OCL_ARG(xsw), OCL_ARG(H), OCL_ARG(W),      OCL_ARG(Ho), OCL_ARG(Wo),  OCL_ARG(kp),
                   OCL_ARG(pad), OCL_ARG(is_max), OCL_ARG(incl), OCL_ARG(dt), OCL_ARG(total)};
    return nn_launch(dev, "nn", "nn_pool", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
}

/* ---- conv2d / conv_transpose2d (f32/f16/bf16; the frontend makes w contiguous) ---- */

static ct_status run_conv(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *bias = op->src[2], *y = op->dst;
    const ct_conv2d_params *p = &op->p.conv;
    cl_long total = ct_tensor_numel(y);
    if (total == 0) return CT_OK;
    cl_long4 g = {{x->shape[0], x->shape[1], x->shape[2], x->shape[3]}};
    cl_long4 o = {{y->shape[1], y->shape[2], y->shape[3], p->groups}};
    cl_long4 xs = {{x->stride[0], x->stride[1], x->stride[2], x->stride[3]}};
    cl_int4 k = {{(cl_int)w->shape[2], (cl_int)w->shape[3], p->stride[0], p->stride[1]}};
    cl_int4 pd = {{p->padding[0], p->padding[1], p->dilation[0], p->dilation[1]}};
    cl_long bias_s = bias ? bias->stride[0] : 0;
    cl_int has_bias = bias != NULL, transposed = op->kind == CT_OP_CONV_TRANSPOSE2D;
    cl_int4 dt = {{nn_dt(x->dtype), nn_dt(w->dtype), bias ? nn_dt(bias->dtype) : 0, nn_dt(y->dtype)}};
    const char *name = op_kind_name(op->kind);
    cl_mem xm, wm, bm, ym;
    cl_ulong xo, wo, bo = 0, yo;
    ct_status s = nn_mem(x, dev, name, &xm, &xo);
    if (s == CT_OK) s = nn_mem(w, dev, name, &wm, &wo);
    if (s == CT_OK) s = nn_mem(y, dev, name, &ym, &yo);
    bm = xm; /* absent bias: any valid buffer, never read */
    if (s == CT_OK && bias) s = nn_mem(bias, dev, name, &bm, &bo);
    if (s != CT_OK) return s;
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)total, wg);
    ocl_arg a[] = {OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(wm), OCL_ARG(wo), OCL_ARG(bm),     OCL_ARG(bo),
                   OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(g),  OCL_ARG(o),  OCL_ARG(xs),     OCL_ARG(k),
                   OCL_ARG(pd), OCL_ARG(bias_s), OCL_ARG(has_bias), OCL_ARG(transposed), OCL_ARG(dt),
                   OCL_ARG(total)};
    return nn_launch(dev, "nn", "nn_conv2d", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
}

/* ---- supports / run ---- */

static bool float_ok(const ct_tensor *t) { return !t || nn_dt(t->dtype) >= 0; }

static bool row_op_supported(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *y = op->dst;
    switch (op->kind) {
    case CT_OP_SOFTMAX:
    case CT_OP_LOG_SOFTMAX: return float_ok(x) && float_ok(y);
    case CT_OP_RMS_NORM: return float_ok(x) && float_ok(y) && float_ok(op->src[1]);
    case CT_OP_LAYER_NORM:
        /* weight and bias are read by flat index */
        for (int i = 1; i < 3; i++)
            if (op->src[i] && (!float_ok(op->src[i]) || !tensor_is_contiguous(op->src[i]))) return false;
        return float_ok(x) && float_ok(y);
    case CT_OP_BATCH_NORM:
        for (int i = 1; i < 5; i++)
            if (!float_ok(op->src[i])) return false;
        return x->ndim >= 2 && float_ok(x) && float_ok(y);
    case CT_OP_ROPE: return x->ndim >= 3 && float_ok(x) && float_ok(y);
    case CT_OP_EMBEDDING:
        return nn_dt(x->dtype) >= 0 && y->dtype == CT_F32 && tensor_is_contiguous(y) && op->src[1] &&
               op->src[1]->ndim <= 8;
    case CT_OP_SET_ROWS: return float_ok(x) && float_ok(y);
    case CT_OP_MAX_POOL2D:
    case CT_OP_AVG_POOL2D: return float_ok(x) && y->dtype == x->dtype && tensor_is_contiguous(y);
    case CT_OP_CONV2D:
    case CT_OP_CONV_TRANSPOSE2D:
        return float_ok(x) && float_ok(op->src[1]) && float_ok(op->src[2]) && float_ok(y) &&
               tensor_is_contiguous(op->src[1]) && tensor_is_contiguous(y);
    default: return false;
    }
    (void)dev;
}

bool ocl_nn_supports(const ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_MATMUL:
    case CT_OP_LINEAR: return nn_linalg_supports(dev, op);
    case CT_OP_SDPA: return nn_attention_supports(dev, op);
    default: break;
    }
    return row_op_supported(dev, op) && ocl_program_ok(dev, "nn");
}

ct_status ocl_nn_run(ct_device *dev, const ct_op *op)
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
    case CT_OP_CONV2D:
    case CT_OP_CONV_TRANSPOSE2D: return run_conv(dev, op);
    case CT_OP_MATMUL:
    case CT_OP_LINEAR: return nn_linalg_run(dev, op);
    case CT_OP_SDPA: return nn_attention_run(dev, op);
    default: break;
    }
    return core_err(CT_ERR_UNSUPPORTED, "opencl: %s is not an nn op", op_kind_name(op->kind));
}
