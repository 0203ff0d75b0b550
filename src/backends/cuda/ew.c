/* The CUDA ew group: unpacks an op into the N-d operand layout of ew_kernels.h and calls
 * the launchers. */
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/ew_kernels.h"

static bool plain(ct_dtype t)
{
    switch (t) {
    case CT_F32: case CT_F64: case CT_F16: case CT_BF16: case CT_I32: case CT_I64: case CT_I8: case CT_BOOL:
        return true;
    default:
        return false;
    }
}

/* dst then the sources, aligned to dst's shape; merges dims contiguous across all. */
static void nd_init(ew_nd *nd, const ct_tensor *dst, const ct_tensor *const *src, int n_src)
{
    memset(nd, 0, sizeof *nd);
    const ct_tensor *ops[EW_MAX_OPS];
    ops[0] = dst;
    for (int i = 0; i < n_src; i++) ops[i + 1] = src[i];
    nd->n_ops = n_src + 1;
    nd->numel = 1;
    int out = 0;
    for (int d = 0; d < dst->ndim; d++) {
        int64_t n = dst->shape[d];
        nd->numel *= n;
        if (n == 1) continue;
        int64_t st[EW_MAX_OPS];
        for (int k = 0; k < nd->n_ops; k++) {
            const ct_tensor *t = ops[k];
            int td = d - (dst->ndim - t->ndim);
            st[k] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td];
        }
        bool merge = out > 0;
        for (int k = 0; merge && k < nd->n_ops; k++) merge = nd->stride[k][out - 1] == st[k] * n;
        if (merge) {
            nd->shape[out - 1] *= n;
            for (int k = 0; k < nd->n_ops; k++) nd->stride[k][out - 1] = st[k];
            continue;
        }
        nd->shape[out] = n;
        for (int k = 0; k < nd->n_ops; k++) nd->stride[k][out] = st[k];
        out++;
    }
    nd->ndim = out;
}

bool cuda_ew_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    const ct_tensor *d = op->dst;
    switch (op->kind) {
    case CT_OP_FILL:
        return plain(d->dtype);
    case CT_OP_COPY:
        return plain(d->dtype) && plain(op->src[0]->dtype);
    default:
        return false;
    }
}

ct_status cuda_ew_run(ct_device *dev, const ct_op *op)
{
    cuda_dev *cd = cuda_of(dev);
    const ct_tensor *d = op->dst;
    ew_nd nd;
    cudaError_t e;
    switch (op->kind) {
    case CT_OP_FILL:
        nd_init(&nd, d, NULL, 0);
        e = ew_launch_fill(op_data(d, dev), d->dtype, &nd, op->p.s.a, cd->stream);
        break;
    case CT_OP_COPY:
        nd_init(&nd, d, op->src, 1);
        e = ew_launch_copy(op_data(d, dev), d->dtype, op_data(op->src[0], dev), op->src[0]->dtype, &nd, cd->stream);
        break;
    default:
        return core_err(CT_ERR_UNSUPPORTED, "%s: ew has no kernel for %s", dev->info.name, op_kind_name(op->kind));
    }
    return cuda_status(e, dev, op_kind_name(op->kind));
}
