/* N-d iteration setup: align each operand's strides to the iteration shape. */
#include "backends/cpu/cpu.h"

void cpu_nd_init(cpu_nd *it, int ndim, const int64_t *shape)
{
    memset(it, 0, sizeof *it);
    it->ndim = ndim;
    if (ndim) memcpy(it->shape, shape, sizeof(int64_t) * (size_t)ndim);
}

int cpu_nd_add(cpu_nd *it, const ct_tensor *t, const ct_device *dev)
{
    int k = it->n++;
    int lead = it->ndim - t->ndim;
    /* esize is a whole block for quantized types, so strides count blocks there
     * (rows are whole blocks, and kernels consume quantized rows whole) */
    int64_t bs = ct_dtype_block_size(t->dtype);
    for (int d = 0; d < it->ndim; d++) {
        int td = d - lead;
        it->stride[k][d] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td] / bs;
    }
    it->base[k] = op_data(t, dev);
    it->esize[k] = ct_dtype_block_bytes(t->dtype);
    return k;
}
