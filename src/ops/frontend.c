#include "ops/frontend.h"

#include <string.h>

ct_status ops_new_dst(int ndim, const int64_t *shape, ct_dtype dtype, ct_op *op)
{
    return tensor_new_shell(ndim, shape, dtype, &op->dst);
}

static _Thread_local ops_out_req *t_out;

static bool same_view(const ct_tensor *a, const ct_tensor *b)
{
    return a->st == b->st && a->dtype == b->dtype && a->offset == b->offset &&
           shape_equal(a->ndim, a->shape, b->ndim, b->shape) &&
           !memcmp(a->stride, b->stride, sizeof(int64_t) * (size_t)a->ndim);
}

static bool overlaps(const ct_tensor *a, const ct_tensor *b)
{
    if (a->st != b->st) return false;
    size_t alo, ahi, blo, bhi;
    tensor_byte_range(a, &alo, &ahi);
    tensor_byte_range(b, &blo, &bhi);
    return alo < bhi && blo < ahi;
}

ct_status ops_out_begin(ops_out_req *r, const char *name, ct_op_kind kind, ct_tensor *out,
                        const ct_tensor *const *ins, int n_in, bool elementwise)
{
    *r = (ops_out_req){.name = name, .kind = kind, .out = out};
    if (!out) return core_err(CT_ERR_INVALID_ARG, "%s: out is NULL", name);
    if (ct_dtype_is_quantized(out->dtype))
        return core_err(CT_ERR_DTYPE, "%s: out %s is %s; ops write plain dtypes", name, SHAPE_STR(out),
                        ct_dtype_name(out->dtype));
    for (int d = 0; d < out->ndim; d++)
        if (out->stride[d] == 0 && out->shape[d] > 1)
            return core_err(CT_ERR_INVALID_ARG, "%s: out %s is an expanded view (stride 0 on dim %d): its elements overlap",
                            name, SHAPE_STR(out), d);
    for (int i = 0; i < n_in; i++) {
        if (!ins[i] || !overlaps(ins[i], out)) continue;
        if (elementwise && same_view(ins[i], out)) continue; /* each element is read before it is written */
        return core_err(CT_ERR_INVALID_ARG, "%s: out %s overlaps input %d %s%s", name, SHAPE_STR(out), i,
                        SHAPE_STR(ins[i]),
                        elementwise ? " without being exactly its view" : " (the op reads it while writing out)");
    }
    r->prev = t_out;
    t_out = r;
    return CT_OK;
}

static ct_status out_mismatch(const ops_out_req *r, const ct_tensor *res)
{
    const ct_tensor *o = r->out;
    if (res->dtype != o->dtype)
        return core_err(CT_ERR_DTYPE, "%s: out is %s %s but the result is %s %s", r->name, ct_dtype_name(o->dtype),
                        SHAPE_STR(o), ct_dtype_name(res->dtype), SHAPE_STR(res));
    return core_err(CT_ERR_SHAPE, "%s: out has shape %s but the result has %s (out is never resized)", r->name,
                    SHAPE_STR(o), SHAPE_STR(res));
}

/* The first op of the requested kind: a view of out replaces its fresh shell when out can
 * take the result as it is (contiguous, same shape and dtype). A dtype or element-count
 * mismatch is refused before anything runs. */
static ct_status out_take(ct_op *op)
{
    ops_out_req *r = t_out;
    if (!r || r->taken || op->kind != r->kind) return CT_OK;
    r->taken = true;
    ct_tensor *o = r->out, *d = op->dst;
    if (d->dtype != o->dtype || ct_tensor_numel(d) != ct_tensor_numel(o)) return out_mismatch(r, d);
    if (!shape_equal(d->ndim, d->shape, o->ndim, o->shape) || !tensor_is_contiguous(o)) return CT_OK;
    int64_t stride[CT_MAX_DIMS], n = 1;
    for (int i = o->ndim - 1; i >= 0; i--) stride[i] = n, n *= o->shape[i];
    ct_tensor *v = NULL;
    ct_status s = tensor_new_view(o, o->ndim, o->shape, stride, o->offset, &v);
    if (s != CT_OK) return s;
    ct_tensor_free(d);
    op->dst = v;
    r->inplace = true;
    return CT_OK;
}

ct_status ops_out_end(ops_out_req *r, ct_status status, ct_tensor *res)
{
    if (t_out == r) t_out = r->prev;
    ct_status s = status;
    if (s == CT_OK && !res) s = core_err(CT_ERR_INVALID_ARG, "%s: no result", r->name);
    if (s == CT_OK && r->inplace && res->st == r->out->st && res->offset == r->out->offset &&
        shape_equal(res->ndim, res->shape, r->out->ndim, r->out->shape) && res->dtype == r->out->dtype) {
        ct_tensor_free(res);
        return CT_OK;
    }
    if (s == CT_OK && (res->dtype != r->out->dtype || !shape_equal(res->ndim, res->shape, r->out->ndim, r->out->shape)))
        s = out_mismatch(r, res);
    if (s == CT_OK) s = ct_copy_(r->out, res);
    ct_tensor_free(res);
    return s;
}

ct_status ops_submit(ct_op *op, ct_tensor **out)
{
    ct_status s = t_out ? out_take(op) : CT_OK;
    if (s == CT_OK) s = exec_run(op);
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
