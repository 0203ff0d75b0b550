/* COPY: src (broadcast to dst's shape) into the view dst, converting dtypes and
 * dequantizing quantized rows. */
#include <stdlib.h>

#include "backends/cpu/cpu.h"
#include "quant/quant.h"

typedef struct copy_ctx {
    cpu_nd it;
    ct_dtype sdt, ddt;
} copy_ctx;

static void copy_elems(const copy_ctx *c, const char *s, int64_t ss, char *d, int64_t ds, int64_t n)
{
    size_t se = c->it.esize[1], de = c->it.esize[0];
    if (c->sdt == c->ddt) {
        if (ss == 1 && ds == 1) {
            memcpy(d, s, (size_t)n * se);
            return;
        }
        for (int64_t i = 0; i < n; i++) memcpy(d + i * ds * (int64_t)de, s + i * ss * (int64_t)se, se);
        return;
    }
    if (c->sdt == CT_F32 && c->ddt == CT_F16 && ss == 1 && ds == 1) {
        cpu_f32_to_f16_row((const float *)s, (uint16_t *)d, n);
        return;
    }
    if (c->ddt == CT_F32 && ss == 1 && ds == 1 && (c->sdt == CT_F16 || c->sdt == CT_BF16)) {
        for (int64_t i = 0; i < n; i++)
            ((float *)d)[i] = c->sdt == CT_F16 ? ct_f16_to_f32(((const uint16_t *)s)[i]) : ct_bf16_to_f32(((const uint16_t *)s)[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        const char *sp = s + i * ss * (int64_t)se;
        char *dp = d + i * ds * (int64_t)de;
        if (c->ddt == CT_C64 && c->sdt != CT_C64) {
            ((float *)dp)[0] = (float)cpu_load_f64(sp, c->sdt);
            ((float *)dp)[1] = 0.0f;
        } else {
            cpu_store_f64(dp, c->ddt, cpu_load_f64(sp, c->sdt));
        }
    }
}

static void copy_rows(void *vctx, int64_t b, int64_t e)
{
    const copy_ctx *c = vctx;
    int64_t n = cpu_nd_cols(&c->it), ds = cpu_nd_inner(&c->it, 0), ss = cpu_nd_inner(&c->it, 1);
    for (int64_t r = b; r < e; r++) copy_elems(c, cpu_nd_row(&c->it, 1, r), ss, cpu_nd_row(&c->it, 0, r), ds, n);
}

/* Quantized source: dequantize whole rows (src rows are contiguous blocks). */
typedef struct dq_ctx {
    cpu_nd it;
    ct_dtype sdt, ddt;
    int64_t n;
    ct_status status;
} dq_ctx;

static void dequant_rows(void *vctx, int64_t b, int64_t e)
{
    dq_ctx *c = vctx;
    int64_t ds = cpu_nd_inner(&c->it, 0);
    bool direct = c->ddt == CT_F32 && ds == 1;
    float *tmp = direct ? NULL : malloc(sizeof(float) * (size_t)c->n);
    if (!direct && !tmp) {
        c->status = core_err(CT_ERR_OOM, "copy: no memory for a dequantized row");
        return;
    }
    for (int64_t r = b; r < e; r++) {
        char *d = cpu_nd_row(&c->it, 0, r);
        float *out = tmp ? tmp : (float *)d;
        ct_status s = quant_dequantize_row(c->sdt, cpu_nd_row(&c->it, 1, r), out, c->n);
        if (s != CT_OK) {
            c->status = s;
            break;
        }
        if (tmp)
            for (int64_t i = 0; i < c->n; i++) cpu_store_f64(d + i * ds * (int64_t)c->it.esize[0], c->ddt, tmp[i]);
    }
    free(tmp);
}

ct_status cpu_run_copy(ct_device *dev, const ct_op *op)
{
    const ct_tensor *src = op->src[0], *dst = op->dst;
    if (ct_dtype_is_quantized(dst->dtype)) {
        if (src->dtype != dst->dtype || !tensor_is_contiguous(src) || !tensor_is_contiguous(dst) ||
            !shape_equal(src->ndim, src->shape, dst->ndim, dst->shape))
            return core_err(CT_ERR_DTYPE, "copy: writing %s needs a contiguous %s source of the same shape (quantize through the quantizer)",
                            ct_dtype_name(dst->dtype), ct_dtype_name(dst->dtype));
        memcpy(op_data(dst, dev), op_data(src, dev), ct_tensor_nbytes(dst));
        return CT_OK;
    }
    if (ct_dtype_is_quantized(src->dtype)) {
        dq_ctx c = {.sdt = src->dtype, .ddt = dst->dtype, .n = dst->ndim ? dst->shape[dst->ndim - 1] : 1};
        cpu_nd_init(&c.it, dst->ndim, dst->shape);
        cpu_nd_add(&c.it, dst, dev);
        cpu_nd_add(&c.it, src, dev);
        /* quantized rows are consumed whole: the source must not be broadcast along them */
        if (dst->ndim == 0 || src->ndim == 0 || src->shape[src->ndim - 1] != c.n)
            return core_err(CT_ERR_SHAPE, "copy: cannot broadcast a %s row", ct_dtype_name(src->dtype));
        c.status = CT_OK;
        cpu_parallel_for(cpu_nd_rows(&c.it), 1, dequant_rows, &c);
        return c.status;
    }
    copy_ctx c = {.sdt = src->dtype, .ddt = dst->dtype};
    cpu_nd_init(&c.it, dst->ndim, dst->shape);
    cpu_nd_add(&c.it, dst, dev);
    cpu_nd_add(&c.it, src, dev);
    int64_t cols = cpu_nd_cols(&c.it);
    /* ~4096 elements a chunk: a prompt's K/V rows into the f16 cache (32K elements, from a
     * transposed view) were one chunk at 32768 and did not scale with threads */
    cpu_parallel_for(cpu_nd_rows(&c.it), cols > 0 ? (4096 + cols - 1) / cols : 1, copy_rows, &c);
    return CT_OK;
}
