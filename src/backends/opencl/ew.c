/* The ew group: creation, copies, element-wise arithmetic, activations and reductions,
 * each one launch of a kernel of kernels/ew.cl over a generic strided N-d walk. */
#include <string.h>

#include "backends/opencl/ew.h"

_Static_assert(sizeof(ew_nd) == 8 * CT_MAX_DIMS * (1 + EW_OPS) + 16, "ew_nd must match kernels/ew.cl");
_Static_assert(CT_MAX_DIMS == 8, "kernels/ew.cl walks at most 8 dims");

void ew_nd_build(ew_nd *d, int ndim, const int64_t *shape, const ct_tensor *const *t, int n)
{
    memset(d, 0, sizeof *d);
    int nd = 0;
    for (int dim = 0; dim < ndim; dim++) {
        if (shape[dim] == 1) continue; /* contributes nothing to any offset */
        int64_t st[EW_OPS];
        for (int k = 0; k < n; k++) {
            int td = dim - (ndim - t[k]->ndim);
            st[k] = td >= 0 && t[k]->shape[td] != 1 ? t[k]->stride[td] : 0;
        }
        bool merge = nd > 0;
        for (int k = 0; k < n && merge; k++) merge = d->st[k][nd - 1] == st[k] * shape[dim];
        if (merge) {
            d->shape[nd - 1] *= shape[dim];
            for (int k = 0; k < n; k++) d->st[k][nd - 1] = st[k];
            continue;
        }
        d->shape[nd] = shape[dim];
        for (int k = 0; k < n; k++) d->st[k][nd] = st[k];
        nd++;
    }
    d->nd = nd;
    d->contig = 1;
    for (int k = 0; k < n && d->contig; k++) d->contig = nd == 0 || (nd == 1 && d->st[k][0] == 1);
}

ct_status ew_mem(const ct_tensor *t, const ct_device *dev, const char *op, cl_mem *mem, cl_ulong *off)
{
    *mem = ocl_mem(t, dev, off);
    if (*mem) return CT_OK;
    return core_err(CT_ERR_DEVICE_FAULT, "%s: %s operand %s has no copy on this device", dev->info.name, op,
                    SHAPE_STR(t));
}

bool ew_dtype_ok(const ct_device *dev, ct_dtype t)
{
    switch (t) {
    case CT_F32: case CT_F16: case CT_BF16: case CT_I32: case CT_I64: case CT_BOOL: case CT_I8: return true;
    case CT_F64: return ocl_info(dev)->fp64;
    default: return false;
    }
}

/* ---- fill and copy ---- */

static ct_status run_fill(ct_device *dev, const ct_op *op)
{
    const ct_tensor *dst = op->dst;
    ew_nd d;
    ew_nd_build(&d, dst->ndim, dst->shape, &dst, 1);
    cl_mem m;
    cl_ulong off;
    ct_status s = ew_mem(dst, dev, "fill", &m, &off);
    cl_kernel k;
    if (s == CT_OK) s = ocl_kernel(dev, "ew", "ew_fill", &k);
    if (s != CT_OK) return s;
    cl_int dt = dst->dtype;
    double v = op->p.s.a;
    cl_float fv = (float)v;
    cl_long iv = (cl_long)v, dbits;
    memcpy(&dbits, &v, sizeof dbits);
    s = ocl_args(dev, k, "ew_fill", 7,
                 (ocl_arg[]){OCL_ARG(d), OCL_ARG(m), OCL_ARG(off), OCL_ARG(dt), OCL_ARG(fv), OCL_ARG(iv), OCL_ARG(dbits)});
    size_t g = (size_t)shape_numel(dst->ndim, dst->shape);
    return s == CT_OK ? ocl_launch(dev, k, "ew_fill", 1, &g, NULL) : s;
}

static ct_status run_copy(ct_device *dev, const ct_op *op)
{
    const ct_tensor *dst = op->dst, *src = op->src[0];
    const ct_tensor *t[2] = {dst, src};
    ew_nd d;
    ew_nd_build(&d, dst->ndim, dst->shape, t, 2);
    cl_mem dm, sm;
    cl_ulong doff, soff;
    ct_status s = ew_mem(dst, dev, "copy", &dm, &doff);
    if (s == CT_OK) s = ew_mem(src, dev, "copy", &sm, &soff);
    cl_kernel k;
    if (s == CT_OK) s = ocl_kernel(dev, "ew", "ew_copy", &k);
    if (s != CT_OK) return s;
    cl_int ddt = dst->dtype, sdt = src->dtype;
    s = ocl_args(dev, k, "ew_copy", 7,
                 (ocl_arg[]){OCL_ARG(d), OCL_ARG(dm), OCL_ARG(doff), OCL_ARG(ddt), OCL_ARG(sm), OCL_ARG(soff), OCL_ARG(sdt)});
    size_t g = (size_t)shape_numel(dst->ndim, dst->shape);
    return s == CT_OK ? ocl_launch(dev, k, "ew_copy", 1, &g, NULL) : s;
}

/* ---- the group's entry points ---- */

static bool all_plain(const ct_device *dev, const ct_op *op)
{
    if (!ew_dtype_ok(dev, op->dst->dtype)) return false;
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && !ew_dtype_ok(dev, op->src[i]->dtype)) return false;
    return true;
}

bool ocl_ew_supports(const ct_device *dev, const ct_op *op)
{
    if (!all_plain(dev, op)) return false;
    switch (op->kind) {
    case CT_OP_FILL: case CT_OP_COPY: break;
    default: return false;
    }
    return ocl_program_ok(dev, "ew");
}

ct_status ocl_ew_run(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_FILL: return run_fill(dev, op);
    case CT_OP_COPY: return run_copy(dev, op);
    default: return core_err(CT_ERR_UNSUPPORTED, "%s: %s is not an ew op", dev->info.name, op_kind_name(op->kind));
    }
}
