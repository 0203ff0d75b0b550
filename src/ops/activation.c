/* Frontends of the unary math ops, activations, softmax and the gated units.
 * Float-only ops on integer or bool tensors compute in f32 and return f32
 * (like torch); neg/abs/relu/clamp keep integer dtypes; abs(c64) is f32. */
#include <math.h>

#include "ops/frontend.h"

typedef enum unary_class {
    UNARY_FLOAT,  /* float math: int/bool -> f32, c64 refused */
    UNARY_SIGNED, /* neg, abs: float, int, c64 */
    UNARY_REAL,   /* relu, clamp: float, int */
} unary_class;

static unary_class class_of(ct_op_kind k)
{
    switch (k) {
    case CT_OP_NEG: case CT_OP_ABS: return UNARY_SIGNED;
    case CT_OP_RELU: case CT_OP_CLAMP: return UNARY_REAL;
    default: return UNARY_FLOAT;
    }
}

/* Source dtype the kernel runs on; CT_DTYPE_COUNT if unsupported. */
static ct_dtype unary_dtype(ct_op_kind k, ct_dtype dt)
{
    bool intish = ct_dtype_is_int(dt) || dt == CT_BOOL;
    switch (class_of(k)) {
    case UNARY_FLOAT: return dt == CT_C64 ? CT_DTYPE_COUNT : intish ? CT_F32 : dt;
    case UNARY_SIGNED: return dt == CT_BOOL ? CT_DTYPE_COUNT : dt;
    case UNARY_REAL: return dt == CT_BOOL || dt == CT_C64 ? CT_DTYPE_COUNT : dt;
    }
    return CT_DTYPE_COUNT;
}

static ct_status unary(const char *name, ct_op_kind k, const ct_tensor *a, ct_op_params p, ct_tensor **out)
{
    OPS_CHECK(name, a);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    ct_status s = ops_require_plain(name, a);
    if (s != CT_OK) return s;
    ct_dtype dt = unary_dtype(k, a->dtype);
    /* integer clamp bounds must be whole (or infinite) to stay integral */
    if (k == CT_OP_CLAMP && ct_dtype_is_int(dt) &&
        ((isfinite(p.s.a) && p.s.a != floor(p.s.a)) || (isfinite(p.s.b) && p.s.b != floor(p.s.b))))
        dt = CT_F32;
    if (dt == CT_DTYPE_COUNT)
        return core_err(CT_ERR_DTYPE, "%s: not supported for %s %s", name, ct_dtype_name(a->dtype), SHAPE_STR(a));
    ct_tensor *tmp = NULL;
    ct_op op = {.kind = k, .n_src = 1, .p = p};
    s = ops_as_dtype(a, dt, &tmp, &op.src[0]);
    if (s == CT_OK) s = ops_new_dst(a->ndim, a->shape, k == CT_OP_ABS && dt == CT_C64 ? CT_F32 : dt, &op);
    if (s == CT_OK) s = ops_submit(&op, out);
    ct_tensor_free(tmp);
    return s;
}

static ct_op_params no_params(void) { return (ct_op_params){.s = {0, 0}}; }

ct_status ct_neg(const ct_tensor *a, ct_tensor **out) { return unary("ct_neg", CT_OP_NEG, a, no_params(), out); }
ct_status ct_abs(const ct_tensor *a, ct_tensor **out) { return unary("ct_abs", CT_OP_ABS, a, no_params(), out); }
ct_status ct_exp(const ct_tensor *a, ct_tensor **out) { return unary("ct_exp", CT_OP_EXP, a, no_params(), out); }
ct_status ct_log(const ct_tensor *a, ct_tensor **out) { return unary("ct_log", CT_OP_LOG, a, no_params(), out); }
ct_status ct_sqrt(const ct_tensor *a, ct_tensor **out) { return unary("ct_sqrt", CT_OP_SQRT, a, no_params(), out); }
ct_status ct_rsqrt(const ct_tensor *a, ct_tensor **out) { return unary("ct_rsqrt", CT_OP_RSQRT, a, no_params(), out); }
ct_status ct_sin(const ct_tensor *a, ct_tensor **out) { return unary("ct_sin", CT_OP_SIN, a, no_params(), out); }
ct_status ct_cos(const ct_tensor *a, ct_tensor **out) { return unary("ct_cos", CT_OP_COS, a, no_params(), out); }
ct_status ct_relu(const ct_tensor *a, ct_tensor **out) { return unary("ct_relu", CT_OP_RELU, a, no_params(), out); }
ct_status ct_silu(const ct_tensor *a, ct_tensor **out) { return unary("ct_silu", CT_OP_SILU, a, no_params(), out); }
ct_status ct_sigmoid(const ct_tensor *a, ct_tensor **out) { return unary("ct_sigmoid", CT_OP_SIGMOID, a, no_params(), out); }
ct_status ct_tanh(const ct_tensor *a, ct_tensor **out) { return unary("ct_tanh", CT_OP_TANH, a, no_params(), out); }

ct_status ct_clamp(const ct_tensor *a, double lo, double hi, ct_tensor **out)
{
    if (isnan(lo) || isnan(hi)) return core_err(CT_ERR_INVALID_ARG, "ct_clamp: bounds [%g, %g] contain NaN", lo, hi);
    return unary("ct_clamp", CT_OP_CLAMP, a, (ct_op_params){.s = {lo, hi}}, out);
}

ct_status ct_gelu(const ct_tensor *a, bool approximate, ct_tensor **out)
{
    return unary("ct_gelu", CT_OP_GELU, a, (ct_op_params){.s = {approximate ? 1.0 : 0.0, 0}}, out);
}

static ct_status softmax(const char *name, ct_op_kind k, const ct_tensor *a, int dim, ct_tensor **out)
{
    OPS_CHECK(name, a);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    ct_status s = ops_require_plain(name, a);
    if (s != CT_OK) return s;
    /* a 0-d tensor is a single row of one (dim 0 or -1, as in torch) */
    if (a->ndim == 0 ? dim != 0 && dim != -1 : !shape_norm_dim(&dim, a->ndim))
        return core_err(CT_ERR_INVALID_ARG, "%s: dim %d out of range for %s", name, dim, SHAPE_STR(a));
    if (a->ndim == 0) dim = 0;
    ct_dtype dt = unary_dtype(k, a->dtype);
    if (dt == CT_DTYPE_COUNT)
        return core_err(CT_ERR_DTYPE, "%s: not supported for %s %s", name, ct_dtype_name(a->dtype), SHAPE_STR(a));
    ct_tensor *tmp = NULL;
    ct_op op = {.kind = k, .n_src = 1};
    op.p.dim.dim = dim;
    s = ops_as_dtype(a, dt, &tmp, &op.src[0]);
    if (s == CT_OK) s = ops_new_dst(a->ndim, a->shape, dt, &op);
    if (s == CT_OK) s = ops_submit(&op, out);
    ct_tensor_free(tmp);
    return s;
}

ct_status ct_softmax(const ct_tensor *a, int dim, ct_tensor **out) { return softmax("ct_softmax", CT_OP_SOFTMAX, a, dim, out); }
ct_status ct_log_softmax(const ct_tensor *a, int dim, ct_tensor **out)
{
    return softmax("ct_log_softmax", CT_OP_LOG_SOFTMAX, a, dim, out);
}

/* act(gate) * up, broadcast together, float math (integer inputs -> f32). */
static ct_status gated(const char *name, ct_op_kind k, const ct_tensor *gate, const ct_tensor *up, ct_tensor **out)
{
    OPS_CHECK(name, gate);
    OPS_CHECK(name, up);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    ct_status s = ops_require_plain(name, gate);
    if (s == CT_OK) s = ops_require_plain(name, up);
    if (s != CT_OK) return s;
    ct_dtype dt = unary_dtype(k, ops_promote(gate->dtype, up->dtype));
    if (dt == CT_DTYPE_COUNT)
        return core_err(CT_ERR_DTYPE, "%s: not supported for %s gate %s and %s up %s", name, ct_dtype_name(gate->dtype),
                        SHAPE_STR(gate), ct_dtype_name(up->dtype), SHAPE_STR(up));
    int n;
    int64_t shape[CT_MAX_DIMS];
    s = shape_broadcast(name, gate->ndim, gate->shape, up->ndim, up->shape, &n, shape);
    if (s != CT_OK) return s;
    ct_tensor *tg = NULL, *tu = NULL;
    ct_op op = {.kind = k, .n_src = 2};
    s = ops_as_dtype(gate, dt, &tg, &op.src[0]);
    if (s == CT_OK) s = ops_as_dtype(up, dt, &tu, &op.src[1]);
    if (s == CT_OK) s = ops_new_dst(n, shape, dt, &op);
    if (s == CT_OK) s = ops_submit(&op, out);
    ct_tensor_free(tg);
    ct_tensor_free(tu);
    return s;
}

ct_status ct_swiglu(const ct_tensor *gate, const ct_tensor *up, ct_tensor **out)
{
    return gated("ct_swiglu", CT_OP_SWIGLU, gate, up, out);
}
ct_status ct_geglu(const ct_tensor *gate, const ct_tensor *up, ct_tensor **out)
{
    return gated("ct_geglu", CT_OP_GEGLU, gate, up, out);
}
