/* The coarse capability query for tooling (ctorch devices): a probe op of one
 * row asked of the backend's supports(). Routing asks with the real shapes. */
#include "exec/exec.h"

bool ct_device_supports(const char *device, const char *op_name, ct_dtype dtype)
{
    ct_device *d = exec_find_device(device);
    ct_op_kind k;
    if (!d || !op_name || !op_kind_from_name(op_name, &k) || (unsigned)dtype >= CT_DTYPE_COUNT) return false;
    if (!(d->info.dtype_mask & (1u << dtype))) return false;
    /* probe with 1-row operands; a quantized dtype goes where ops take weights
     * (the other operands and the output stay f32), plain dtypes everywhere */
    bool q = ct_dtype_is_quantized(dtype);
    int64_t cols = ct_dtype_block_size(dtype);
    ct_tensor w = {.dtype = dtype, .ndim = 2, .shape = {1, cols}, .stride = {cols, 1}};
    ct_tensor f = {.dtype = q ? CT_F32 : dtype, .ndim = 2, .shape = {1, cols}, .stride = {cols, 1}};
    ct_op op = {.kind = k, .n_src = 2, .src = {&f, &f}, .dst = &f};
    op.src[k == CT_OP_LINEAR ? 1 : 0] = &w;
    /* reductions over the whole probe, the form every backend that has the op accepts */
    if (k >= CT_OP_SUM && k <= CT_OP_ARGMIN) op.p.red.mask = 3u;
    /* where chooses by a boolean condition between two operands */
    ct_tensor cond = {.dtype = CT_BOOL, .ndim = 2, .shape = {1, cols}, .stride = {cols, 1}};
    if (k == CT_OP_WHERE) {
        if (q) return false;
        op.n_src = 3;
        op.src[0] = &cond;
        op.src[1] = op.src[2] = &f;
    }
    /* attention: one query, key and value of one head, [1, 1, 1, cols] */
    ct_tensor head = {.dtype = f.dtype, .ndim = 4, .shape = {1, 1, 1, cols}, .stride = {cols, cols, cols, 1}};
    if (k == CT_OP_SDPA) {
        if (q) return false;
        op = (ct_op){.kind = k, .n_src = 3, .src = {&head, &head, &head}, .dst = &head};
        op.p.attn.scale = 1.0;
    }
    /* convolution and pooling see an image of one pixel, with their defaults filled in as
     * the frontend fills them (a backend divides by the groups) */
    ct_tensor img = {.dtype = f.dtype, .ndim = 4, .shape = {1, 1, 1, 1}, .stride = {1, 1, 1, 1}};
    if (k == CT_OP_CONV2D || k == CT_OP_CONV_TRANSPOSE2D || k == CT_OP_MAX_POOL2D || k == CT_OP_AVG_POOL2D) {
        if (q) return false;
        op = (ct_op){.kind = k, .n_src = k <= CT_OP_CONV_TRANSPOSE2D ? 2 : 1, .src = {&img, &img}, .dst = &img};
        if (k <= CT_OP_CONV_TRANSPOSE2D) op.p.conv = (ct_conv2d_params){{1, 1}, {0, 0}, {1, 1}, 1, {0, 0}};
        else op.p.pool = (ct_pool2d_params){{1, 1}, {1, 1}, {0, 0}, false};
    }
    return d->ops->supports(d, &op);
}
