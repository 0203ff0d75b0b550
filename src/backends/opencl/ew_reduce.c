/* Reductions (SUM MEAN PROD MAX MIN VAR STD NORM ARGMAX ARGMIN): one work-group per
 * output, its items striding over the reduced elements, then a tree in local memory.
 * Floating sources accumulate in double where the device has cl_khr_fp64 (the CPU's
 * rule), in float otherwise (the tree keeps the error near log2(n) roundings); integer
 * sums, products and extremes are exact (wrapping like the CPU's). */
#include <string.h>

#include "backends/opencl/ew.h"

#define RED_WG_MAX 256

/* Mirrors red_nd in kernels/ew.cl. */
typedef struct red_nd {
    int64_t kshape[CT_MAX_DIMS], kstride[CT_MAX_DIMS];
    int64_t rshape[CT_MAX_DIMS], rstride[CT_MAX_DIMS];
    int64_t nred;
    int32_t nk, nr;
} red_nd;
_Static_assert(sizeof(red_nd) == 8 * 4 * CT_MAX_DIMS + 16, "red_nd must match kernels/ew.cl");

bool ocl_ew_reduce_kind(ct_op_kind k)
{
    switch (k) {
    case CT_OP_SUM: case CT_OP_MEAN: case CT_OP_PROD: case CT_OP_MAX: case CT_OP_MIN: case CT_OP_VAR: case CT_OP_STD:
    case CT_OP_NORM: case CT_OP_ARGMAX: case CT_OP_ARGMIN:
        return true;
    default: return false;
    }
}

static int red_code(ct_op_kind k)
{
    switch (k) {
    case CT_OP_SUM: return 30;
    case CT_OP_MEAN: return 31;
    case CT_OP_PROD: return 32;
    case CT_OP_MAX: return 33;
    case CT_OP_MIN: return 34;
    case CT_OP_VAR: return 35;
    case CT_OP_STD: return 36;
    case CT_OP_NORM: return 37;
    case CT_OP_ARGMAX: return 38;
    default: return 39;
    }
}

static bool is_int(ct_dtype t) { return t == CT_I8 || t == CT_I32 || t == CT_I64 || t == CT_BOOL; }

static bool exact_int(const ct_op *op)
{
    ct_op_kind k = op->kind;
    return is_int(op->src[0]->dtype) && k != CT_OP_VAR && k != CT_OP_STD && k != CT_OP_NORM;
}

static size_t acc_bytes(const ct_device *dev) { return ocl_info(dev)->fp64 ? 8 : 4; }

/* The largest power of two that fits the device, the local memory and the work. */
static size_t group_size(const ct_device *dev, int64_t nred)
{
    const ocl_dev_info *in = ocl_info(dev);
    size_t wg = 1;
    size_t per_item = acc_bytes(dev) + 16;
    while (wg * 2 <= RED_WG_MAX && wg * 2 <= in->max_wg && (wg * 2) * per_item <= in->local_mem / 2 &&
           (int64_t)wg < nred)
        wg *= 2;
    return wg;
}

bool ocl_ew_reduce_supports(const ct_device *dev, const ct_op *op)
{
    if (!tensor_is_contiguous(op->dst)) return false; /* outputs are indexed flat */
    ct_dtype st = op->src[0]->dtype;
    if ((op->kind == CT_OP_ARGMAX || op->kind == CT_OP_ARGMIN) && op->dst->dtype != CT_I64) return false;
    (void)st;
    return ocl_info(dev)->local_mem >= 2 * (acc_bytes(dev) + 16);
}

/* Folds each dim into the one before it where the two are one run in memory (the outer
 * stride = the inner extent x stride): the flat index still maps to the same offsets, with
 * one division fewer per element; a contiguous reduced range becomes one dim, which the
 * kernel walks without dividing at all. */
static int red_fold(int64_t *shape, int64_t *stride, int n)
{
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0 && stride[m - 1] == shape[d] * stride[d]) {
            shape[m - 1] *= shape[d];
            stride[m - 1] = stride[d];
            continue;
        }
        shape[m] = shape[d];
        stride[m++] = stride[d];
    }
    return m;
}

static void red_build(const ct_tensor *src, uint32_t mask, red_nd *r)
{
    memset(r, 0, sizeof *r);
    r->nred = 1;
    for (int d = 0; d < src->ndim; d++) {
        bool red = (mask >> d) & 1u;
        if (red) r->nred *= src->shape[d];
        if (src->shape[d] == 1) continue;
        if (red) {
            r->rshape[r->nr] = src->shape[d];
            r->rstride[r->nr++] = src->stride[d];
        } else {
            r->kshape[r->nk] = src->shape[d];
            r->kstride[r->nk++] = src->stride[d];
        }
    }
    r->nr = red_fold(r->rshape, r->rstride, r->nr);
    r->nk = red_fold(r->kshape, r->kstride, r->nk);
}

ct_status ocl_ew_reduce_run(ct_device *dev, const ct_op *op)
{
    const ct_tensor *src = op->src[0], *dst = op->dst;
    red_nd r;
    red_build(src, op->p.red.mask, &r);
    cl_mem dm, sm;
    cl_ulong doff, soff;
    ct_status s = ew_mem(dst, dev, op_kind_name(op->kind), &dm, &doff);
    if (s == CT_OK) s = ew_mem(src, dev, op_kind_name(op->kind), &sm, &soff);
    cl_kernel k;
    if (s == CT_OK) s = ocl_kernel(dev, "ew", "ew_reduce", &k);
    if (s != CT_OK) return s;
    size_t wg = group_size(dev, r.nred), kwg = ocl_kernel_wg(dev, "ew", "ew_reduce");
    if (kwg)
        while (wg > 1 && wg > kwg) wg /= 2;
    cl_int ddt = dst->dtype, sdt = src->dtype, code = red_code(op->kind), ex = exact_int(op), unb = op->p.red.unbiased;
    double p = op->p.red.p;
    cl_float pf = (float)p;
    cl_long pb;
    memcpy(&pb, &p, sizeof pb);
    s = OCL_SET_ARGS(dev, k, "ew_reduce", OCL_ARG(r), OCL_ARG(dm), OCL_ARG(doff), OCL_ARG(ddt), OCL_ARG(sm),
                     OCL_ARG(soff), OCL_ARG(sdt), OCL_ARG(code), OCL_ARG(ex), OCL_ARG(unb), OCL_ARG(pf), OCL_ARG(pb),
                     OCL_LOCAL(wg * acc_bytes(dev)), OCL_LOCAL(wg * 8), OCL_LOCAL(wg * 8));
    if (s != CT_OK) return s;
    size_t nout = (size_t)shape_numel(dst->ndim, dst->shape), g = nout * wg;
    return ocl_launch(dev, k, "ew_reduce", 1, &g, &wg);
}
