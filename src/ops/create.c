/* Creation ops: every one runs through the executor, so a GPU fills its own memory. */
#include <math.h>

#include "ops/frontend.h"

static ct_status create(const char *name, ct_op_kind kind, int ndim, const int64_t *shape, ct_dtype dtype,
                        ct_op_params p, ct_tensor **out)
{
    OPS_CHECK_OUT(name, out);
    if (ct_dtype_is_quantized(dtype))
        return core_err(CT_ERR_DTYPE, "%s: cannot create %s values directly; quantize an f32 tensor", name, ct_dtype_name(dtype));
    ct_op op = {.kind = kind, .p = p};
    ct_status s = ops_new_dst(ndim, shape, dtype, &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

ct_status ct_empty(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out)
{
    OPS_CHECK_OUT("ct_empty", out);
    return tensor_new_shell(ndim, shape, dtype, out);
}

ct_status ct_full(int ndim, const int64_t *shape, ct_dtype dtype, double value, ct_tensor **out)
{
    return create("ct_full", CT_OP_FILL, ndim, shape, dtype, (ct_op_params){.s = {value, 0}}, out);
}

ct_status ct_zeros(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out)
{
    return ct_full(ndim, shape, dtype, 0.0, out);
}

ct_status ct_ones(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out)
{
    return ct_full(ndim, shape, dtype, 1.0, out);
}

ct_status ct_arange(double start, double end, double step, ct_dtype dtype, ct_tensor **out)
{
    if (step == 0 || !isfinite(step) || !isfinite(start) || !isfinite(end))
        return core_err(CT_ERR_INVALID_ARG, "ct_arange: need finite start/end and a non-zero step (got %g, %g, %g)", start, end, step);
    double n = ceil((end - start) / step);
    if (n < 0) n = 0;
    if (n > 1e15) return core_err(CT_ERR_INVALID_ARG, "ct_arange: %g elements is too many", n);
    int64_t shape[1] = {(int64_t)n};
    return create("ct_arange", CT_OP_ARANGE, 1, shape, dtype, (ct_op_params){.s = {start, step}}, out);
}

ct_status ct_linspace(double start, double end, int64_t steps, ct_dtype dtype, ct_tensor **out)
{
    if (steps < 0) return core_err(CT_ERR_INVALID_ARG, "ct_linspace: steps must be >= 0, got %lld", (long long)steps);
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0.0;
    int64_t shape[1] = {steps};
    return create("ct_linspace", CT_OP_ARANGE, 1, shape, dtype, (ct_op_params){.s = {start, step}}, out);
}

ct_status ct_eye(int64_t n, int64_t m, ct_dtype dtype, ct_tensor **out)
{
    if (n < 0 || m < 0) return core_err(CT_ERR_SHAPE, "ct_eye: negative size %lld x %lld", (long long)n, (long long)m);
    int64_t shape[2] = {n, m};
    return create("ct_eye", CT_OP_EYE, 2, shape, dtype, (ct_op_params){.s = {0, 0}}, out);
}

static ct_status random_tensor(const char *name, int ndim, const int64_t *shape, ct_dtype dtype, uint64_t seed,
                               bool normal, ct_tensor **out)
{
    if (!ct_dtype_is_float(dtype))
        return core_err(CT_ERR_DTYPE, "%s: dtype must be floating point, got %s", name, ct_dtype_name(dtype));
    return create(name, CT_OP_RAND, ndim, shape, dtype, (ct_op_params){.rng = {seed, normal}}, out);
}

ct_status ct_rand(int ndim, const int64_t *shape, ct_dtype dtype, uint64_t seed, ct_tensor **out)
{
    return random_tensor("ct_rand", ndim, shape, dtype, seed, false, out);
}

ct_status ct_randn(int ndim, const int64_t *shape, ct_dtype dtype, uint64_t seed, ct_tensor **out)
{
    return random_tensor("ct_randn", ndim, shape, dtype, seed, true, out);
}
