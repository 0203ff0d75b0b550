#include "ops/frontend.h"

ct_status ops_new_dst(int ndim, const int64_t *shape, ct_dtype dtype, ct_op *op)
{
    return tensor_new_shell(ndim, shape, dtype, &op->dst);
}

ct_status ops_submit(ct_op *op, ct_tensor **out)
{
    ct_status s = exec_run(op);
    if (s != CT_OK) {
        ct_tensor_free(op->dst);
        op->dst = NULL;
        return s;
    }
    *out = op->dst;
    return CT_OK;
}

static int rank(ct_dtype t)
{
    switch (t) {
    case CT_BOOL: return 0;
    case CT_I8: return 1;
    case CT_I32: return 2;
    case CT_I64: return 3;
    case CT_F16:
    case CT_BF16: return 4;
    case CT_F32: return 5;
    case CT_F64: return 6;
    case CT_C64: return 7;
    default: return 5;
    }
}

ct_dtype ops_promote(ct_dtype a, ct_dtype b)
{
    if (a == b) return a;
    if ((a == CT_F16 && b == CT_BF16) || (a == CT_BF16 && b == CT_F16)) return CT_F32;
    return rank(a) >= rank(b) ? a : b;
}

ct_status ops_as_dtype(const ct_tensor *t, ct_dtype dt, ct_tensor **tmp, const ct_tensor **use)
{
    *tmp = NULL;
    if (t->dtype == dt) {
        *use = t;
        return CT_OK;
    }
    ct_status s = ct_cast(t, dt, tmp);
    *use = *tmp;
    return s;
}

ct_status ops_require_plain(const char *opname, const ct_tensor *t)
{
    if (ct_dtype_is_quantized(t->dtype))
        return core_err(CT_ERR_DTYPE, "%s: %s tensor %s is quantized; dequantize it first (ct_cast to f32)", opname,
                        ct_dtype_name(t->dtype), SHAPE_STR(t));
    return CT_OK;
}
