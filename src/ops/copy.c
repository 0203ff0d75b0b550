/* Copy-based ops: contiguous, clone, cast, copy_, reshape, concat, stack, to_host. */
#include <string.h>

#include "ops/frontend.h"

/* dst must exist; src broadcasts to dst. */
static ct_status run_copy(ct_tensor *dst, const ct_tensor *src)
{
    ct_op op = {.kind = CT_OP_COPY, .n_src = 1, .src = {src}, .dst = dst};
    return exec_run(&op);
}

/* A fresh tensor of t's shape and `dtype` filled from t. */
static ct_status copy_to_new(const char *name, const ct_tensor *t, ct_dtype dtype, ct_tensor **out)
{
    OPS_CHECK(name, t);
    OPS_CHECK_OUT(name, out);
    if (ct_dtype_is_quantized(dtype) && dtype != t->dtype)
        return core_err(CT_ERR_DTYPE, "%s: cannot convert %s to %s by casting; use the quantizer", name,
                        ct_dtype_name(t->dtype), ct_dtype_name(dtype));
    ct_tensor *dst;
    ct_status s = tensor_new_shell(t->ndim, t->shape, dtype, &dst);
    if (s != CT_OK) return s;
    s = run_copy(dst, t);
    if (s != CT_OK) {
        ct_tensor_free(dst);
        return s;
    }
    *out = dst;
    return CT_OK;
}

ct_status ct_clone(const ct_tensor *t, ct_tensor **out)
{
    OPS_CHECK("ct_clone", t);
    return copy_to_new("ct_clone", t, t->dtype, out);
}

ct_status ct_cast(const ct_tensor *t, ct_dtype dtype, ct_tensor **out)
{
    if ((unsigned)dtype >= CT_DTYPE_COUNT) return core_err(CT_ERR_DTYPE, "ct_cast: invalid dtype %d", (int)dtype);
    return copy_to_new("ct_cast", t, dtype, out);
}

ct_status ct_contiguous(const ct_tensor *t, ct_tensor **out)
{
    OPS_CHECK("ct_contiguous", t);
    OPS_CHECK_OUT("ct_contiguous", out);
    if (tensor_is_contiguous(t)) return ct_alias(t, out);
    return copy_to_new("ct_contiguous", t, t->dtype, out);
}

ct_status ct_copy_(ct_tensor *dst, const ct_tensor *src)
{
    OPS_CHECK("ct_copy_", dst);
    OPS_CHECK("ct_copy_", src);
    int n;
    int64_t shape[CT_MAX_DIMS];
    ct_status s = shape_broadcast("ct_copy_", src->ndim, src->shape, dst->ndim, dst->shape, &n, shape);
    if (s != CT_OK) return s;
    if (!shape_equal(n, shape, dst->ndim, dst->shape))
        return core_err(CT_ERR_SHAPE, "ct_copy_: source %s does not broadcast to destination %s", SHAPE_STR(src), SHAPE_STR(dst));
    for (int i = 0; i < dst->ndim; i++)
        if (dst->stride[i] == 0 && dst->shape[i] > 1)
            return core_err(CT_ERR_SHAPE, "ct_copy_: destination %s is an expanded view (stride 0 on dim %d)", SHAPE_STR(dst), i);
    return run_copy(dst, src);
}

ct_status ct_reshape(const ct_tensor *t, int ndim, const int64_t *shape, ct_tensor **out)
{
    OPS_CHECK("ct_reshape", t);
    OPS_CHECK_OUT("ct_reshape", out);
    ct_status s = ct_view(t, ndim, shape, out);
    if (s != CT_ERR_SHAPE || tensor_is_contiguous(t)) return s; /* done, or a real shape error */
    ct_tensor *c;
    s = ct_contiguous(t, &c);
    if (s != CT_OK) return s;
    s = ct_view(c, ndim, shape, out);
    ct_tensor_free(c);
    return s;
}

ct_status ct_concat(const ct_tensor *const *ts, int n, int dim, ct_tensor **out)
{
    OPS_CHECK_OUT("ct_concat", out);
    if (!ts || n <= 0) return core_err(CT_ERR_INVALID_ARG, "ct_concat: need at least one tensor");
    for (int i = 0; i < n; i++)
        if (!ts[i]) return core_err(CT_ERR_INVALID_ARG, "ct_concat: tensor %d is NULL", i);
    const ct_tensor *t0 = ts[0];
    if (!shape_norm_dim(&dim, t0->ndim))
        return core_err(CT_ERR_INVALID_ARG, "ct_concat: dim %d out of range for %s", dim, SHAPE_STR(t0));
    int64_t shape[CT_MAX_DIMS];
    memcpy(shape, t0->shape, sizeof shape);
    ct_dtype dt = t0->dtype;
    shape[dim] = 0;
    for (int i = 0; i < n; i++) {
        const ct_tensor *t = ts[i];
        bool ok = t->ndim == t0->ndim;
        for (int d = 0; ok && d < t0->ndim; d++) ok = d == dim || t->shape[d] == t0->shape[d];
        if (!ok)
            return core_err(CT_ERR_SHAPE, "ct_concat: tensor %d has shape %s, tensor 0 has %s (only dim %d may differ)", i,
                            SHAPE_STR(t), SHAPE_STR(t0), dim);
        shape[dim] += t->shape[dim];
        dt = ops_promote(dt, t->dtype);
    }
    ct_tensor *dst;
    ct_status s = tensor_new_shell(t0->ndim, shape, dt, &dst);
    for (int64_t at = 0, i = 0; s == CT_OK && i < n; i++) {
        ct_tensor *part;
        s = ct_narrow(dst, dim, at, ts[i]->shape[dim], &part);
        if (s == CT_OK) s = run_copy(part, ts[i]);
        ct_tensor_free(part);
        at += ts[i]->shape[dim];
    }
    if (s != CT_OK) {
        ct_tensor_free(dst);
        return s;
    }
    *out = dst;
    return CT_OK;
}

ct_status ct_stack(const ct_tensor *const *ts, int n, int dim, ct_tensor **out)
{
    OPS_CHECK_OUT("ct_stack", out);
    if (!ts || n <= 0) return core_err(CT_ERR_INVALID_ARG, "ct_stack: need at least one tensor");
    if (n > 64) return core_err(CT_ERR_INVALID_ARG, "ct_stack: at most 64 tensors, got %d", n);
    ct_tensor *views[64] = {0};
    ct_status s = CT_OK;
    for (int i = 0; i < n && s == CT_OK; i++) {
        if (!ts[i]) s = core_err(CT_ERR_INVALID_ARG, "ct_stack: tensor %d is NULL", i);
        else if (!shape_equal(ts[i]->ndim, ts[i]->shape, ts[0]->ndim, ts[0]->shape))
            s = core_err(CT_ERR_SHAPE, "ct_stack: tensor %d has shape %s, tensor 0 has %s", i, SHAPE_STR(ts[i]),
                         SHAPE_STR(ts[0]));
        else s = ct_unsqueeze(ts[i], dim, &views[i]);
    }
    if (s == CT_OK) s = ct_concat((const ct_tensor *const *)views, n, dim, out);
    for (int i = 0; i < n; i++) ct_tensor_free(views[i]);
    return s;
}

ct_status ct_tensor_to_host(const ct_tensor *t, void *dst, size_t bytes)
{
    OPS_CHECK("ct_tensor_to_host", t);
    size_t need = ct_tensor_nbytes(t);
    if (!dst && need) return core_err(CT_ERR_INVALID_ARG, "ct_tensor_to_host: dst is NULL");
    if (bytes < need)
        return core_err(CT_ERR_RANGE, "ct_tensor_to_host: buffer of %zu bytes, %s %s needs %zu", bytes,
                        ct_dtype_name(t->dtype), SHAPE_STR(t), need);
    size_t lo, hi;
    tensor_byte_range(t, &lo, &hi);
    if (tensor_is_contiguous(t) && hi - lo == need) {
        /* one download from the device that holds it into dst: no host copy made and copied
         * again, no handle allocated (a decode step reads its logits so every token) */
        bool done;
        ct_status s = storage_read_direct(t->st, lo, dst, need, &done);
        if (s != CT_OK || done) return s;
        const void *p;
        if ((s = ct_tensor_data(t, &p)) == CT_OK && need) memcpy(dst, p, need);
        return s;
    }
    ct_tensor *c;
    ct_status s = ct_contiguous(t, &c);
    if (s != CT_OK) return s;
    const void *p;
    s = ct_tensor_data(c, &p);
    if (s == CT_OK && need) memcpy(dst, p, need);
    ct_tensor_free(c);
    return s;
}

static bool set_rows_dtype(ct_dtype t) { return t == CT_F32 || t == CT_F64 || t == CT_F16 || t == CT_BF16; }

ct_status ct_set_rows(ct_tensor *dst, const ct_tensor *src, const ct_tensor *index)
{
    const char *name = "ct_set_rows";
    OPS_CHECK(name, dst);
    OPS_CHECK(name, src);
    OPS_CHECK(name, index);
    if (dst->ndim != 2 || src->ndim != 2 || src->shape[1] != dst->shape[1])
        return core_err(CT_ERR_SHAPE, "%s: dst %s and src %s must be [R, C] and [n, C]", name, SHAPE_STR(dst),
                        SHAPE_STR(src));
    if (index->ndim != 1 || index->shape[0] != src->shape[0])
        return core_err(CT_ERR_SHAPE, "%s: index %s must be [n] for src %s", name, SHAPE_STR(index), SHAPE_STR(src));
    if (!set_rows_dtype(dst->dtype) || (src->dtype != dst->dtype && src->dtype != CT_F32))
        return core_err(CT_ERR_DTYPE, "%s: dst %s must be f32, f64, f16 or bf16 and src %s of its dtype or f32", name,
                        ct_dtype_name(dst->dtype), ct_dtype_name(src->dtype));
    if (index->dtype != CT_I32 && index->dtype != CT_I64)
        return core_err(CT_ERR_DTYPE, "%s: index must be i32 or i64, got %s", name, ct_dtype_name(index->dtype));
    for (int i = 0; i < 2; i++)
        if (dst->stride[i] == 0 && dst->shape[i] > 1)
            return core_err(CT_ERR_SHAPE, "%s: dst %s is an expanded view (stride 0 on dim %d)", name, SHAPE_STR(dst), i);
    ct_op op = {.kind = CT_OP_SET_ROWS, .n_src = 2, .src = {src, index}, .dst = dst};
    return exec_run(&op);
}
