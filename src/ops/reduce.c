/* Reduction frontends: sum, mean, prod, max, min, var, std, norm, argmax, argmin.
 *
 * The op record carries the set of reduced dims as a bit mask over src[0]'s dims
 * and keepdim; dst is contiguous with the reduced dims removed (or kept as 1).
 * Result dtypes follow torch: sum/prod of bool or ints -> i64; mean/var/std/norm
 * of bool or ints -> f32; max/min keep the dtype; argmax/argmin -> i64. */
#include <math.h>

#include "ops/frontend.h"

typedef enum red_out { RED_OUT_SUM, RED_OUT_FLOAT, RED_OUT_SAME } red_out;

/* The reduced-dims mask; CT_ERR_INVALID_ARG for out-of-range or repeated dims. */
static ct_status red_mask(const char *name, const ct_tensor *a, const int *dims, int ndims, uint32_t *mask)
{
    *mask = 0;
    if (ndims < 0) return core_err(CT_ERR_INVALID_ARG, "%s: ndims must be >= 0, got %d", name, ndims);
    if (!dims || ndims == 0) {
        *mask = a->ndim ? (uint32_t)((1u << a->ndim) - 1) : 0;
        return CT_OK;
    }
    for (int i = 0; i < ndims; i++) {
        int d = dims[i];
        if (a->ndim == 0 && (d == 0 || d == -1)) continue; /* a scalar reduces over "its" dim, like torch */
        if (!shape_norm_dim(&d, a->ndim))
            return core_err(CT_ERR_INVALID_ARG, "%s: dim %d out of range for %s", name, dims[i], SHAPE_STR(a));
        if (*mask & (1u << d))
            return core_err(CT_ERR_INVALID_ARG, "%s: dim %d appears more than once in the reduced dims", name, dims[i]);
        *mask |= 1u << d;
    }
    return CT_OK;
}

static ct_status red_run(const char *name, ct_op_kind kind, const ct_tensor *a, uint32_t mask, bool keepdim,
                         ct_dtype dt, bool need_nonempty, ct_op_params p, ct_tensor **out)
{
    int64_t shp[CT_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (mask & (1u << d)) {
            if (need_nonempty && a->shape[d] == 0)
                return core_err(CT_ERR_SHAPE, "%s: cannot reduce %s over dim %d of size 0 (no identity)", name,
                                SHAPE_STR(a), d);
            if (keepdim) shp[nd++] = 1;
        } else {
            shp[nd++] = a->shape[d];
        }
    }
    p.red.mask = mask;
    p.red.keepdim = keepdim;
    ct_op op = {.kind = kind, .n_src = 1, .src = {a}, .p = p};
    ct_status s = ops_new_dst(nd, shp, dt, &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

static ct_status reduce(const char *name, ct_op_kind kind, red_out rule, const ct_tensor *a, const int *dims,
                        int ndims, bool keepdim, ct_op_params p, ct_tensor **out)
{
    OPS_CHECK(name, a);
    OPS_CHECK_OUT(name, out);
    ct_status s = ops_require_plain(name, a);
    if (s != CT_OK) return s;
    bool cplx = ct_dtype_is_complex(a->dtype);
    if (cplx && kind != CT_OP_SUM && kind != CT_OP_MEAN && kind != CT_OP_PROD)
        return core_err(CT_ERR_DTYPE, "%s: %s input %s is not supported (complex values have no order / real result here)",
                        name, ct_dtype_name(a->dtype), SHAPE_STR(a));
    uint32_t mask;
    if ((s = red_mask(name, a, dims, ndims, &mask)) != CT_OK) return s;
    bool intlike = ct_dtype_is_int(a->dtype) || a->dtype == CT_BOOL;
    ct_dtype dt = a->dtype;
    if (rule == RED_OUT_SUM && intlike) dt = CT_I64;
    if (rule == RED_OUT_FLOAT && intlike) dt = CT_F32;
    return red_run(name, kind, a, mask, keepdim, dt, kind == CT_OP_MAX || kind == CT_OP_MIN, p, out);
}

ct_status ct_sum(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out)
{
    return reduce("ct_sum", CT_OP_SUM, RED_OUT_SUM, a, dims, ndims, keepdim, (ct_op_params){0}, out);
}

ct_status ct_mean(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out)
{
    return reduce("ct_mean", CT_OP_MEAN, RED_OUT_FLOAT, a, dims, ndims, keepdim, (ct_op_params){0}, out);
}

ct_status ct_prod(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out)
{
    return reduce("ct_prod", CT_OP_PROD, RED_OUT_SUM, a, dims, ndims, keepdim, (ct_op_params){0}, out);
}

ct_status ct_max(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out)
{
    return reduce("ct_max", CT_OP_MAX, RED_OUT_SAME, a, dims, ndims, keepdim, (ct_op_params){0}, out);
}

ct_status ct_min(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out)
{
    return reduce("ct_min", CT_OP_MIN, RED_OUT_SAME, a, dims, ndims, keepdim, (ct_op_params){0}, out);
}

ct_status ct_var(const ct_tensor *a, const int *dims, int ndims, bool unbiased, bool keepdim, ct_tensor **out)
{
    ct_op_params p = {0};
    p.red.unbiased = unbiased;
    return reduce("ct_var", CT_OP_VAR, RED_OUT_FLOAT, a, dims, ndims, keepdim, p, out);
}

ct_status ct_std(const ct_tensor *a, const int *dims, int ndims, bool unbiased, bool keepdim, ct_tensor **out)
{
    ct_op_params p = {0};
    p.red.unbiased = unbiased;
    return reduce("ct_std", CT_OP_STD, RED_OUT_FLOAT, a, dims, ndims, keepdim, p, out);
}

ct_status ct_norm(const ct_tensor *a, double pnorm, const int *dims, int ndims, bool keepdim, ct_tensor **out)
{
    if (!(pnorm > 0)) return core_err(CT_ERR_INVALID_ARG, "ct_norm: p must be > 0 (or INFINITY), got %g", pnorm);
    ct_op_params p = {0};
    p.red.p = pnorm;
    return reduce("ct_norm", CT_OP_NORM, RED_OUT_FLOAT, a, dims, ndims, keepdim, p, out);
}

static ct_status arg_reduce(const char *name, ct_op_kind kind, const ct_tensor *a, int dim, bool keepdim, ct_tensor **out)
{
    OPS_CHECK(name, a);
    OPS_CHECK_OUT(name, out);
    ct_status s = ops_require_plain(name, a);
    if (s != CT_OK) return s;
    if (ct_dtype_is_complex(a->dtype))
        return core_err(CT_ERR_DTYPE, "%s: %s values have no order", name, ct_dtype_name(a->dtype));
    uint32_t mask;
    if (dim == CT_ALL_DIMS) {
        if ((s = red_mask(name, a, NULL, 0, &mask)) != CT_OK) return s;
        if (ct_tensor_numel(a) == 0)
            return core_err(CT_ERR_SHAPE, "%s: cannot take the index of an extreme of the empty tensor %s", name,
                            SHAPE_STR(a));
    } else if ((s = red_mask(name, a, &dim, 1, &mask)) != CT_OK) {
        return s;
    }
    return red_run(name, kind, a, mask, keepdim, CT_I64, true, (ct_op_params){0}, out);
}

ct_status ct_argmax(const ct_tensor *a, int dim, bool keepdim, ct_tensor **out)
{
    return arg_reduce("ct_argmax", CT_OP_ARGMAX, a, dim, keepdim, out);
}

ct_status ct_argmin(const ct_tensor *a, int dim, bool keepdim, ct_tensor **out)
{
    return arg_reduce("ct_argmin", CT_OP_ARGMIN, a, dim, keepdim, out);
}
