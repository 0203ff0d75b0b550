/* Kernels that write a fresh contiguous output: fill, arange, eye, rand. */
#include "backends/cpu/cpu.h"

typedef struct create_ctx {
    const ct_op *op;
    char *dst;
    size_t esize;
    int64_t cols; /* EYE: row length */
} create_ctx;

/* A uniform draw just below 1 rounds up to 1.0 in f16/bf16: clamp to the largest
 * value below 1 of the output dtype, so rand stays in [0, 1) for every dtype. */
static double uniform_below_one(const ct_op *op, int64_t i)
{
    double u = rng_uniform(op->p.rng.seed, (uint64_t)i);
    double top = op->dst->dtype == CT_F16 ? 1.0 - 1.0 / 2048 : op->dst->dtype == CT_BF16 ? 1.0 - 1.0 / 256 : 1.0;
    return u < top ? u : top;
}

static double create_value(const ct_op *op, int64_t i, int64_t cols)
{
    switch (op->kind) {
    case CT_OP_FILL: return op->p.s.a;
    case CT_OP_ARANGE: return op->p.s.a + (double)i * op->p.s.b;
    case CT_OP_EYE: return (i / cols) == (i % cols) ? 1.0 : 0.0;
    default:
        return op->p.rng.normal ? rng_normal(op->p.rng.seed, (uint64_t)i) : uniform_below_one(op, i);
    }
}

static void create_range(void *vctx, int64_t b, int64_t e)
{
    create_ctx *c = vctx;
    ct_dtype dt = c->op->dst->dtype;
    if (c->op->kind == CT_OP_FILL && dt == CT_F32) {
        float v = (float)c->op->p.s.a;
        float *d = (float *)c->dst;
        for (int64_t i = b; i < e; i++) d[i] = v;
        return;
    }
    for (int64_t i = b; i < e; i++) cpu_store_f64(c->dst + i * (int64_t)c->esize, dt, create_value(c->op, i, c->cols));
}

ct_status cpu_run_create(ct_device *dev, const ct_op *op)
{
    const ct_tensor *d = op->dst;
    if (ct_dtype_is_quantized(d->dtype))
        return core_err(CT_ERR_DTYPE, "%s: cannot create %s values directly", op_kind_name(op->kind), ct_dtype_name(d->dtype));
    create_ctx c = {op, op_data(d, dev), ct_dtype_block_bytes(d->dtype), d->ndim == 2 ? d->shape[1] : 1};
    cpu_parallel_for(ct_tensor_numel(d), 16384, create_range, &c);
    return CT_OK;
}
