/* Frontends of the binary element-wise ops, their scalar forms, comparisons,
 * where and the complex64 helpers. Shapes broadcast like PyTorch; sources are
 * promoted (and cast) to one dtype so kernels see equal source dtypes. */
#include <math.h>

#include "ops/frontend.h"

static bool is_int(ct_dtype t) { return ct_dtype_is_int(t); }

/* Integral and representable in int64 (inputs of the integer kernels). */
static bool scalar_is_int(double s) { return isfinite(s) && s == floor(s) && fabs(s) < 9223372036854775808.0; }

/* The dtype binary kind k computes in when its promoted source dtype is dt;
 * CT_DTYPE_COUNT when the combination is not supported. */
static ct_dtype binary_compute_dtype(ct_op_kind k, ct_dtype dt)
{
    switch (k) {
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL:
        return dt == CT_BOOL ? CT_DTYPE_COUNT : dt;
    case CT_OP_DIV:
        return is_int(dt) || dt == CT_BOOL ? CT_F32 : dt;
    case CT_OP_POW: case CT_OP_MAXIMUM: case CT_OP_MINIMUM:
        return dt == CT_BOOL || dt == CT_C64 ? CT_DTYPE_COUNT : dt;
    default:
        return dt;
    }
}

/* Runs op with sources src[0..n) cast to dt, output of shape/odt. */
static ct_status submit_cast(ct_op *op, int n, const ct_tensor *const *src, ct_dtype dt, int ndim,
                             const int64_t *shape, ct_dtype odt, ct_tensor **out)
{
    ct_tensor *tmp[3] = {0};
    ct_status s = CT_OK;
    for (int i = 0; i < n && s == CT_OK; i++) s = ops_as_dtype(src[i], dt, &tmp[i], &op->src[i]);
    op->n_src = n;
    if (s == CT_OK) s = ops_new_dst(ndim, shape, odt, op);
    if (s == CT_OK) s = ops_submit(op, out);
    for (int i = 0; i < n; i++) ct_tensor_free(tmp[i]);
    return s;
}

static ct_status binary(const char *name, ct_op_kind k, const ct_tensor *a, const ct_tensor *b, ct_cmp cmp,
                        ct_tensor **out)
{
    OPS_CHECK(name, a);
    OPS_CHECK(name, b);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    ct_status s = ops_require_plain(name, a);
    if (s == CT_OK) s = ops_require_plain(name, b);
    if (s != CT_OK) return s;
    ct_dtype dt = ops_promote(a->dtype, b->dtype), cdt = binary_compute_dtype(k, dt);
    if (k == CT_OP_CMP && dt == CT_C64 && cmp != CT_CMP_EQ && cmp != CT_CMP_NE)
        cdt = CT_DTYPE_COUNT;
    if (cdt == CT_DTYPE_COUNT)
        return core_err(CT_ERR_DTYPE, "%s: not supported for %s and %s (%s %s)", name, ct_dtype_name(a->dtype),
                        ct_dtype_name(b->dtype), SHAPE_STR(a), SHAPE_STR(b));
    int n;
    int64_t shape[CT_MAX_DIMS];
    s = shape_broadcast(name, a->ndim, a->shape, b->ndim, b->shape, &n, shape);
    if (s != CT_OK) return s;
    ct_op op = {.kind = k};
    op.p.cmp.cmp = cmp;
    const ct_tensor *src[2] = {a, b};
    return submit_cast(&op, 2, src, cdt, n, shape, k == CT_OP_CMP ? CT_BOOL : cdt, out);
}

ct_status ct_add(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return binary("ct_add", CT_OP_ADD, a, b, 0, out); }
ct_status ct_sub(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return binary("ct_sub", CT_OP_SUB, a, b, 0, out); }
ct_status ct_mul(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return binary("ct_mul", CT_OP_MUL, a, b, 0, out); }
ct_status ct_div(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return binary("ct_div", CT_OP_DIV, a, b, 0, out); }
ct_status ct_pow(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return binary("ct_pow", CT_OP_POW, a, b, 0, out); }
ct_status ct_maximum(const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    return binary("ct_maximum", CT_OP_MAXIMUM, a, b, 0, out);
}
ct_status ct_minimum(const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    return binary("ct_minimum", CT_OP_MINIMUM, a, b, 0, out);
}

static const char *cmp_name(ct_cmp c)
{
    static const char *names[] = {"ct_eq", "ct_ne", "ct_lt", "ct_le", "ct_gt", "ct_ge"};
    return (unsigned)c <= CT_CMP_GE ? names[c] : "ct_compare";
}

ct_status ct_compare(const ct_tensor *a, const ct_tensor *b, ct_cmp cmp, ct_tensor **out)
{
    if ((unsigned)cmp > CT_CMP_GE) return core_err(CT_ERR_INVALID_ARG, "ct_compare: invalid comparison %d", (int)cmp);
    return binary(cmp_name(cmp), CT_OP_CMP, a, b, cmp, out);
}
ct_status ct_eq(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return ct_compare(a, b, CT_CMP_EQ, out); }
ct_status ct_ne(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return ct_compare(a, b, CT_CMP_NE, out); }
ct_status ct_lt(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return ct_compare(a, b, CT_CMP_LT, out); }
ct_status ct_le(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return ct_compare(a, b, CT_CMP_LE, out); }
ct_status ct_gt(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return ct_compare(a, b, CT_CMP_GT, out); }
ct_status ct_ge(const ct_tensor *a, const ct_tensor *b, ct_tensor **out) { return ct_compare(a, b, CT_CMP_GE, out); }

/* tensor OP scalar. The scalar does not promote float tensors (like a Python
 * number in torch); integer and bool tensors stay integral for integral
 * scalars (bool -> i64) and become f32 otherwise; true division gives f32. */
static ct_status scalar_op(const char *name, ct_op_kind k, const ct_tensor *a, double sc, ct_tensor **out)
{
    OPS_CHECK(name, a);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    ct_status s = ops_require_plain(name, a);
    if (s != CT_OK) return s;
    ct_dtype dt = a->dtype;
    if (is_int(dt) || dt == CT_BOOL) {
        if (k == CT_OP_DIV_SCALAR || !scalar_is_int(sc)) dt = CT_F32;
        else if (dt == CT_BOOL) dt = CT_I64;
        if (k == CT_OP_POW_SCALAR && dt != CT_F32 && sc < 0)
            return core_err(CT_ERR_INVALID_ARG, "%s: integer %s %s to the negative integer power %g is not allowed",
                            name, ct_dtype_name(a->dtype), SHAPE_STR(a), sc);
    }
    ct_op op = {.kind = k};
    op.p.s.a = sc;
    return submit_cast(&op, 1, &a, dt, a->ndim, a->shape, dt, out);
}

ct_status ct_add_scalar(const ct_tensor *a, double s, ct_tensor **out) { return scalar_op("ct_add_scalar", CT_OP_ADD_SCALAR, a, s, out); }
ct_status ct_sub_scalar(const ct_tensor *a, double s, ct_tensor **out) { return scalar_op("ct_sub_scalar", CT_OP_SUB_SCALAR, a, s, out); }
ct_status ct_mul_scalar(const ct_tensor *a, double s, ct_tensor **out) { return scalar_op("ct_mul_scalar", CT_OP_MUL_SCALAR, a, s, out); }
ct_status ct_div_scalar(const ct_tensor *a, double s, ct_tensor **out) { return scalar_op("ct_div_scalar", CT_OP_DIV_SCALAR, a, s, out); }
ct_status ct_pow_scalar(const ct_tensor *a, double s, ct_tensor **out) { return scalar_op("ct_pow_scalar", CT_OP_POW_SCALAR, a, s, out); }

ct_status ct_compare_scalar(const ct_tensor *a, ct_cmp cmp, double sc, ct_tensor **out)
{
    const char *name = "ct_compare_scalar";
    OPS_CHECK(name, a);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    if ((unsigned)cmp > CT_CMP_GE) return core_err(CT_ERR_INVALID_ARG, "%s: invalid comparison %d", name, (int)cmp);
    ct_status s = ops_require_plain(name, a);
    if (s != CT_OK) return s;
    if (a->dtype == CT_C64 && cmp != CT_CMP_EQ && cmp != CT_CMP_NE)
        return core_err(CT_ERR_DTYPE, "%s: complex64 %s is only ordered by == and !=", name, SHAPE_STR(a));
    ct_op op = {.kind = CT_OP_CMP_SCALAR};
    op.p.cmp.cmp = cmp;
    op.p.cmp.a = sc;
    return submit_cast(&op, 1, &a, a->dtype, a->ndim, a->shape, CT_BOOL, out);
}

ct_status ct_where(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    const char *name = "ct_where";
    OPS_CHECK(name, cond);
    OPS_CHECK(name, a);
    OPS_CHECK(name, b);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    ct_status s = ops_require_plain(name, a);
    if (s == CT_OK) s = ops_require_plain(name, b);
    if (s != CT_OK) return s;
    if (cond->dtype != CT_BOOL)
        return core_err(CT_ERR_DTYPE, "%s: condition %s must be bool, got %s (compare it first, e.g. ct_ne with 0)",
                        name, SHAPE_STR(cond), ct_dtype_name(cond->dtype));
    int n1, n;
    int64_t s1[CT_MAX_DIMS], shape[CT_MAX_DIMS];
    s = shape_broadcast(name, cond->ndim, cond->shape, a->ndim, a->shape, &n1, s1);
    if (s == CT_OK) s = shape_broadcast(name, n1, s1, b->ndim, b->shape, &n, shape);
    if (s != CT_OK) return s;
    ct_dtype dt = ops_promote(a->dtype, b->dtype);
    ct_tensor *ta = NULL, *tb = NULL;
    ct_op op = {.kind = CT_OP_WHERE, .n_src = 3, .src = {cond}};
    s = ops_as_dtype(a, dt, &ta, &op.src[1]);
    if (s == CT_OK) s = ops_as_dtype(b, dt, &tb, &op.src[2]);
    if (s == CT_OK) s = ops_new_dst(n, shape, dt, &op);
    if (s == CT_OK) s = ops_submit(&op, out);
    ct_tensor_free(ta);
    ct_tensor_free(tb);
    return s;
}

/* ---- complex64 ---- */

ct_status ct_complex(const ct_tensor *re, const ct_tensor *im, ct_tensor **out)
{
    const char *name = "ct_complex";
    OPS_CHECK(name, re);
    OPS_CHECK(name, im);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    if (!ct_dtype_is_float(re->dtype) || !ct_dtype_is_float(im->dtype))
        return core_err(CT_ERR_DTYPE, "%s: real and imaginary parts must be float, got %s %s and %s %s", name,
                        ct_dtype_name(re->dtype), SHAPE_STR(re), ct_dtype_name(im->dtype), SHAPE_STR(im));
    int n;
    int64_t shape[CT_MAX_DIMS];
    ct_status s = shape_broadcast(name, re->ndim, re->shape, im->ndim, im->shape, &n, shape);
    if (s != CT_OK) return s;
    ct_op op = {.kind = CT_OP_COMPLEX};
    const ct_tensor *src[2] = {re, im};
    return submit_cast(&op, 2, src, CT_F32, n, shape, CT_C64, out);
}

/* REAL, IMAG, CONJ of a complex64 tensor. */
static ct_status complex_part(const char *name, ct_op_kind k, const ct_tensor *z, ct_tensor **out)
{
    OPS_CHECK(name, z);
    OPS_CHECK_OUT(name, out);
    *out = NULL;
    ct_status s = ops_require_plain(name, z);
    if (s != CT_OK) return s;
    if (z->dtype != CT_C64) {
        /* a real tensor is its own real part and conjugate (as in torch) */
        if (k != CT_OP_IMAG) return ct_clone(z, out);
        return core_err(CT_ERR_DTYPE, "%s: %s %s has no imaginary part (complex64 expected)", name,
                        ct_dtype_name(z->dtype), SHAPE_STR(z));
    }
    ct_op op = {.kind = k};
    return submit_cast(&op, 1, &z, CT_C64, z->ndim, z->shape, k == CT_OP_CONJ ? CT_C64 : CT_F32, out);
}

ct_status ct_real(const ct_tensor *z, ct_tensor **out) { return complex_part("ct_real", CT_OP_REAL, z, out); }
ct_status ct_imag(const ct_tensor *z, ct_tensor **out) { return complex_part("ct_imag", CT_OP_IMAG, z, out); }
ct_status ct_conj(const ct_tensor *z, ct_tensor **out) { return complex_part("ct_conj", CT_OP_CONJ, z, out); }
