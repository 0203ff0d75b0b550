/* Tensor handles: geometry over a shared storage, accessors and host data. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"

ct_status tensor_check(const char *op, const char *what, const ct_tensor *t)
{
    if (!t) return core_err(CT_ERR_INVALID_ARG, "%s: %s is NULL", op, what);
    return CT_OK;
}

static ct_status check_geometry(const char *op, ct_dtype dtype, int ndim, const int64_t *shape)
{
    if ((unsigned)dtype >= CT_DTYPE_COUNT) return core_err(CT_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
    if (ndim < 0 || ndim > CT_MAX_DIMS)
        return core_err(CT_ERR_SHAPE, "%s: %d dims (at most %d)", op, ndim, CT_MAX_DIMS);
    if (ndim && !shape) return core_err(CT_ERR_INVALID_ARG, "%s: shape is NULL", op);
    for (int i = 0; i < ndim; i++)
        if (shape[i] < 0) return core_err(CT_ERR_SHAPE, "%s: negative size %lld at dim %d", op, (long long)shape[i], i);
    int64_t bs = ct_dtype_block_size(dtype);
    if (bs > 1 && (ndim == 0 || shape[ndim - 1] % bs))
        return core_err(CT_ERR_SHAPE, "%s: %s rows must be a multiple of %lld elements, shape %s", op,
                        ct_dtype_name(dtype), (long long)bs, shape_str(ndim, shape, (char[96]){0}, 96));
    return CT_OK;
}

ct_status tensor_new_shell(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out)
{
    ct_status s = check_geometry("tensor", dtype, ndim, shape);
    if (s != CT_OK) return s;
    ct_tensor *t = calloc(1, sizeof *t);
    size_t nbytes = ct_dtype_row_bytes(dtype, shape_numel(ndim, shape));
    ct_storage *st = t ? storage_new(nbytes) : NULL;
    if (!st) {
        free(t);
        return core_err(CT_ERR_OOM, "tensor: out of host memory");
    }
    t->st = st;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    shape_contiguous_strides(ndim, shape, t->stride);
    *out = t;
    return CT_OK;
}

ct_status tensor_new_view(const ct_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                          int64_t offset, ct_tensor **out)
{
    int64_t bs = ct_dtype_block_size(t->dtype);
    if (bs > 1) {
        bool ok = ndim > 0 && stride[ndim - 1] == 1 && shape[ndim - 1] % bs == 0 && offset % bs == 0;
        for (int i = 0; ok && i < ndim - 1; i++) ok = stride[i] % bs == 0;
        if (!ok)
            return core_err(CT_ERR_SHAPE, "view of %s tensor %s: quantized tensors only allow views that keep whole blocks in rows",
                            ct_dtype_name(t->dtype), SHAPE_STR(t));
    }
    ct_tensor *v = calloc(1, sizeof *v);
    if (!v) return core_err(CT_ERR_OOM, "view: out of host memory");
    v->st = t->st;
    storage_retain(t->st);
    v->dtype = t->dtype;
    v->ndim = ndim;
    if (ndim) {
        memcpy(v->shape, shape, sizeof(int64_t) * (size_t)ndim);
        memcpy(v->stride, stride, sizeof(int64_t) * (size_t)ndim);
    }
    v->offset = offset;
    *out = v;
    return CT_OK;
}

void ct_tensor_free(ct_tensor *t)
{
    if (!t) return;
    storage_release(t->st);
    free(t);
}

int ct_tensor_ndim(const ct_tensor *t) { return t ? t->ndim : 0; }
const int64_t *ct_tensor_shape(const ct_tensor *t) { return t ? t->shape : NULL; }
const int64_t *ct_tensor_strides(const ct_tensor *t) { return t ? t->stride : NULL; }
int64_t ct_tensor_offset(const ct_tensor *t) { return t ? t->offset : 0; }
ct_dtype ct_tensor_dtype(const ct_tensor *t) { return t ? t->dtype : CT_F32; }
int64_t ct_tensor_numel(const ct_tensor *t) { return t ? shape_numel(t->ndim, t->shape) : 0; }
size_t ct_tensor_nbytes(const ct_tensor *t) { return t ? ct_dtype_row_bytes(t->dtype, ct_tensor_numel(t)) : 0; }

int64_t ct_tensor_dim(const ct_tensor *t, int dim)
{
    if (!t || !shape_norm_dim(&dim, t->ndim)) return -1;
    return t->shape[dim];
}

size_t tensor_byte_offset(const ct_tensor *t)
{
    int64_t bs = ct_dtype_block_size(t->dtype);
    return (size_t)(t->offset / bs) * ct_dtype_block_bytes(t->dtype);
}

void tensor_byte_range(const ct_tensor *t, size_t *lo, size_t *hi)
{
    *lo = 0, *hi = t->st->nbytes;
    if (ct_dtype_is_quantized(t->dtype)) return;
    int64_t last = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) {
            *hi = 0;
            return;
        }
        if (t->stride[d] < 0) return;
        last += (t->shape[d] - 1) * t->stride[d];
    }
    size_t es = ct_dtype_block_bytes(t->dtype);
    *lo = (size_t)t->offset * es;
    *hi = (size_t)(last + 1) * es;
    if (*hi > t->st->nbytes) *lo = 0, *hi = t->st->nbytes; /* never past the storage */
}

bool tensor_is_contiguous(const ct_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] != 1 && t->stride[i] != s) return false;
        s *= t->shape[i];
    }
    return true;
}

bool ct_tensor_is_contiguous(const ct_tensor *t) { return t && tensor_is_contiguous(t); }

const char *ct_tensor_residency(const ct_tensor *t, char *buf, size_t len)
{
    if (!buf || !len) return "";
    buf[0] = 0;
    if (!t) return buf;
    size_t pos = 0;
    for (int i = 0; i < t->st->n_copies; i++) {
        const ct_storage_copy *c = &t->st->copies[i];
        if (!storage_copy_complete(t->st, i)) continue; /* stale in part, or on a lost device */
        const char *name = c->dev ? c->dev->info.name : "cpu";
        pos += (size_t)snprintf(buf + pos, pos < len ? len - pos : 0, "%s%s", pos ? "," : "", name);
        if (pos >= len) break;
    }
    return buf;
}

ct_status ct_tensor_data(const ct_tensor *t, const void **data)
{
    ct_status s = tensor_check("ct_tensor_data", "tensor", t);
    if (s != CT_OK) return s;
    if (!data) return core_err(CT_ERR_INVALID_ARG, "ct_tensor_data: data is NULL");
    void *p;
    s = storage_host(t->st, &p);
    if (s != CT_OK) return s;
    *data = (char *)p + tensor_byte_offset(t);
    return CT_OK;
}

ct_status ct_tensor_data_mut(ct_tensor *t, void **data)
{
    ct_status s = tensor_check("ct_tensor_data_mut", "tensor", t);
    if (s != CT_OK) return s;
    if (!data) return core_err(CT_ERR_INVALID_ARG, "ct_tensor_data_mut: data is NULL");
    void *p;
    s = storage_host_mut(t->st, &p); /* devices still reading the old bytes finish first */
    if (s != CT_OK) return s;
    storage_mark_written(t->st, NULL);
    *data = (char *)p + tensor_byte_offset(t);
    return CT_OK;
}

ct_status ct_tensor_from_data(int ndim, const int64_t *shape, ct_dtype dtype, const void *data, ct_tensor **out)
{
    if (!out) return core_err(CT_ERR_INVALID_ARG, "ct_tensor_from_data: out is NULL");
    ct_tensor *t;
    ct_status s = tensor_new_shell(ndim, shape, dtype, &t);
    if (s != CT_OK) return s;
    if (t->st->nbytes && !data) {
        size_t nbytes = t->st->nbytes;
        ct_tensor_free(t);
        return core_err(CT_ERR_INVALID_ARG, "ct_tensor_from_data: data is NULL for %zu bytes", nbytes);
    }
    s = storage_alloc_on(t->st, NULL);
    if (s != CT_OK) {
        ct_tensor_free(t);
        return s;
    }
    if (t->st->nbytes) memcpy(t->st->copies[0].buf.ptr, data, t->st->nbytes);
    t->st->copies[0].valid = true;
    *out = t;
    return CT_OK;
}

ct_status ct_tensor_from_blob(int ndim, const int64_t *shape, ct_dtype dtype, void *data,
                              void (*deleter)(void *data, void *ctx), void *ctx, ct_tensor **out)
{
    if (!out) return core_err(CT_ERR_INVALID_ARG, "ct_tensor_from_blob: out is NULL");
    ct_tensor *t;
    ct_status s = tensor_new_shell(ndim, shape, dtype, &t);
    if (s != CT_OK) return s;
    if (!data && t->st->nbytes) {
        ct_tensor_free(t);
        return core_err(CT_ERR_INVALID_ARG, "ct_tensor_from_blob: data is NULL");
    }
    ct_storage *st = t->st;
    st->host_external = true;
    st->deleter = deleter;
    st->deleter_ctx = ctx;
    st->copies[0].buf.ptr = data;
    st->copies[0].buf.size = st->nbytes;
    st->copies[0].valid = true;
    *out = t;
    return CT_OK;
}

static double load_as_double(const void *p, ct_dtype dt)
{
    switch (dt) {
    case CT_F32: return *(const float *)p;
    case CT_F64: return *(const double *)p;
    case CT_F16: return ct_f16_to_f32(*(const uint16_t *)p);
    case CT_BF16: return ct_bf16_to_f32(*(const uint16_t *)p);
    case CT_I32: return *(const int32_t *)p;
    case CT_I64: return (double)*(const int64_t *)p;
    case CT_BOOL: return *(const uint8_t *)p != 0;
    case CT_I8: return *(const int8_t *)p;
    case CT_C64: return *(const float *)p;
    default: return 0;
    }
}

/* Element at a flat row-major index of the view, read through strides. */
ct_status ct_tensor_item(const ct_tensor *t, int64_t index, double *value)
{
    ct_status s = tensor_check("ct_tensor_item", "tensor", t);
    if (s != CT_OK) return s;
    if (!value) return core_err(CT_ERR_INVALID_ARG, "ct_tensor_item: value is NULL");
    int64_t n = ct_tensor_numel(t);
    if (index < 0 || index >= n)
        return core_err(CT_ERR_RANGE, "ct_tensor_item: index %lld out of range for %s", (long long)index, SHAPE_STR(t));
    if (ct_dtype_is_quantized(t->dtype))
        return core_err(CT_ERR_DTYPE, "ct_tensor_item: %s elements need dequantizing first", ct_dtype_name(t->dtype));
    void *base;
    s = storage_host(t->st, &base);
    if (s != CT_OK) return s;
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (index % t->shape[d]) * t->stride[d];
        index /= t->shape[d];
    }
    *value = load_as_double((const char *)base + off * (int64_t)ct_dtype_block_bytes(t->dtype), t->dtype);
    return CT_OK;
}

const char *ct_tensor_format(const ct_tensor *t, int max_items, char *buf, size_t len)
{
    if (!buf || !len) return "";
    if (!t) {
        snprintf(buf, len, "(null)");
        return buf;
    }
    size_t pos = (size_t)snprintf(buf, len, "tensor(%s, %s", ct_dtype_name(t->dtype), SHAPE_STR(t));
    int64_t n = ct_tensor_numel(t);
    if (!ct_dtype_is_quantized(t->dtype)) {
        for (int64_t i = 0; i < n && i < max_items && pos < len; i++) {
            double v = 0;
            if (ct_tensor_item(t, i, &v) != CT_OK) break;
            pos += (size_t)snprintf(buf + pos, len - pos, i ? ", %g" : ": %g", v);
        }
        if (n > max_items && pos < len) pos += (size_t)snprintf(buf + pos, len - pos, ", ...");
    }
    if (pos < len) snprintf(buf + pos, len - pos, ")");
    return buf;
}
