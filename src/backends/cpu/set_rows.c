/* SET_ROWS: rows of src written into dst at indices read from a tensor (a KV-cache
 * append whose position lives on the device). Every index is checked before any
 * row is written, so a bad one leaves dst as it was. */
#include "backends/cpu/cpu.h"

static double load(const char *p, ct_dtype t)
{
    switch (t) {
    case CT_F64: return *(const double *)p;
    case CT_F16: return ct_f16_to_f32(*(const uint16_t *)p);
    case CT_BF16: return ct_bf16_to_f32(*(const uint16_t *)p);
    default: return *(const float *)p;
    }
}

static void store(char *p, ct_dtype t, double v)
{
    switch (t) {
    case CT_F64: *(double *)p = v; break;
    case CT_F16: *(uint16_t *)p = ct_f32_to_f16((float)v); break;
    case CT_BF16: *(uint16_t *)p = ct_f32_to_bf16((float)v); break;
    default: *(float *)p = (float)v; break;
    }
}

static int64_t index_at(const ct_tensor *idx, const char *base, int64_t i)
{
    const char *p = base + i * idx->stride[0] * (int64_t)ct_dtype_block_bytes(idx->dtype);
    return idx->dtype == CT_I32 ? *(const int32_t *)p : *(const int64_t *)p;
}

ct_status cpu_run_set_rows(ct_device *dev, const ct_op *op)
{
    const ct_tensor *src = op->src[0], *idx = op->src[1], *dst = op->dst;
    const char *ps = op_data(src, dev), *pi = op_data(idx, dev);
    char *pd = op_data(dst, dev);
    int64_t n = src->shape[0], cols = src->shape[1], rows = dst->shape[0];
    for (int64_t i = 0; i < n; i++) {
        int64_t r = index_at(idx, pi, i);
        if (r < 0 || r >= rows)
            return core_err(CT_ERR_RANGE, "set_rows: index %lld at position %lld is outside the %lld rows of dst %s",
                            (long long)r, (long long)i, (long long)rows, SHAPE_STR(dst));
    }
    size_t es = ct_dtype_block_bytes(src->dtype), ed = ct_dtype_block_bytes(dst->dtype);
    for (int64_t i = 0; i < n; i++) {
        int64_t r = index_at(idx, pi, i);
        for (int64_t c = 0; c < cols; c++) {
            const char *s = ps + (i * src->stride[0] + c * src->stride[1]) * (int64_t)es;
            store(pd + (r * dst->stride[0] + c * dst->stride[1]) * (int64_t)ed, dst->dtype, load(s, src->dtype));
        }
    }
    return CT_OK;
}
