/* Views: new geometry over the same storage; no data moves. */
#include <string.h>

#include "core/tensor.h"

#define CHECK_T(op, t, out)                                                              \
    do {                                                                                 \
        if (!(t)) return core_err(CT_ERR_INVALID_ARG, "%s: tensor is NULL", op);         \
        if (!(out)) return core_err(CT_ERR_INVALID_ARG, "%s: out is NULL", op);          \
    } while (0)

/* Resolves one -1 in shape against numel; CT_ERR_SHAPE if impossible. */
static ct_status infer_shape(const char *op, const ct_tensor *t, int ndim, const int64_t *in, int64_t *shape)
{
    if (ndim < 0 || ndim > CT_MAX_DIMS) return core_err(CT_ERR_SHAPE, "%s: %d dims", op, ndim);
    if (ndim && !in) return core_err(CT_ERR_INVALID_ARG, "%s: shape is NULL", op);
    int64_t known = 1, numel = shape_numel(t->ndim, t->shape);
    int neg = -1;
    for (int i = 0; i < ndim; i++) {
        shape[i] = in[i];
        if (in[i] == -1) {
            if (neg >= 0) return core_err(CT_ERR_SHAPE, "%s: more than one -1 in shape", op);
            neg = i;
        } else if (in[i] < 0) {
            return core_err(CT_ERR_SHAPE, "%s: negative size %lld", op, (long long)in[i]);
        } else {
            known *= in[i];
        }
    }
    if (neg >= 0) {
        if (known == 0 || numel % known)
            return core_err(CT_ERR_SHAPE, "%s: cannot infer -1 for %s from %lld elements", op,
                            shape_str(ndim, in, (char[96]){0}, 96), (long long)numel);
        shape[neg] = numel / known;
        known *= shape[neg];
    }
    if (known != numel)
        return core_err(CT_ERR_SHAPE, "%s: shape %s has %lld elements, tensor %s has %lld", op,
                        shape_str(ndim, in, (char[96]){0}, 96), (long long)known, SHAPE_STR(t), (long long)numel);
    return CT_OK;
}

ct_status ct_view(const ct_tensor *t, int ndim, const int64_t *shape_in, ct_tensor **out)
{
    CHECK_T("ct_view", t, out);
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    ct_status s = infer_shape("ct_view", t, ndim, shape_in, shape);
    if (s != CT_OK) return s;
    /* Walk old and new dims together, chunk by chunk (contiguous runs of old dims). */
    int64_t numel = shape_numel(ndim, shape);
    if (numel == 0) {
        shape_contiguous_strides(ndim, shape, stride);
        return tensor_new_view(t, ndim, shape, stride, t->offset, out);
    }
    int oi = t->ndim - 1, ni = ndim - 1;
    while (ni >= 0 || oi >= 0) {
        /* skip size-1 old dims: they carry no stride information */
        while (oi >= 0 && t->shape[oi] == 1) oi--;
        if (oi < 0) {
            for (; ni >= 0; ni--) {
                if (shape[ni] != 1) goto fail;
                stride[ni] = 1;
            }
            break;
        }
        /* a chunk: old dims oi..lo where each is contiguous over the next */
        int lo = oi;
        int64_t chunk = t->shape[oi];
        while (lo > 0) {
            int p = lo - 1;
            if (t->shape[p] == 1) { lo--; continue; }
            int q = lo; /* next non-1 dim inside the chunk */
            while (t->shape[q] == 1) q++;
            if (t->stride[p] != t->stride[q] * t->shape[q]) break;
            chunk *= t->shape[p];
            lo = p;
        }
        int64_t inner = t->stride[oi], acc = 1;
        while (ni >= 0 && acc < chunk) {
            stride[ni] = inner * acc;
            acc *= shape[ni];
            ni--;
        }
        if (acc != chunk) goto fail;
        /* size-1 new dims right after the chunk */
        while (ni >= 0 && shape[ni] == 1 && (lo == 0 || oi < 0)) {
            stride[ni] = inner * acc;
            ni--;
        }
        oi = lo - 1;
    }
    return tensor_new_view(t, ndim, shape, stride, t->offset, out);
fail:
    return core_err(CT_ERR_SHAPE, "ct_view: %s with strides incompatible with shape %s (use ct_reshape to copy)",
                    SHAPE_STR(t), shape_str(ndim, shape, (char[96]){0}, 96));
}

ct_status ct_permute(const ct_tensor *t, const int *dims, ct_tensor **out)
{
    CHECK_T("ct_permute", t, out);
    if (t->ndim && !dims) return core_err(CT_ERR_INVALID_ARG, "ct_permute: dims is NULL");
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    bool seen[CT_MAX_DIMS] = {0};
    for (int i = 0; i < t->ndim; i++) {
        int d = dims[i];
        if (!shape_norm_dim(&d, t->ndim) || seen[d])
            return core_err(CT_ERR_INVALID_ARG, "ct_permute: dims is not a permutation of %d dims of %s", t->ndim, SHAPE_STR(t));
        seen[d] = true;
        shape[i] = t->shape[d];
        stride[i] = t->stride[d];
    }
    return tensor_new_view(t, t->ndim, shape, stride, t->offset, out);
}

ct_status ct_transpose(const ct_tensor *t, int d0, int d1, ct_tensor **out)
{
    CHECK_T("ct_transpose", t, out);
    if (!shape_norm_dim(&d0, t->ndim) || !shape_norm_dim(&d1, t->ndim))
        return core_err(CT_ERR_INVALID_ARG, "ct_transpose: dims (%d, %d) out of range for %s", d0, d1, SHAPE_STR(t));
    int perm[CT_MAX_DIMS];
    for (int i = 0; i < t->ndim; i++) perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return ct_permute(t, perm, out);
}

ct_status ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step, ct_tensor **out)
{
    CHECK_T("ct_slice", t, out);
    if (!shape_norm_dim(&dim, t->ndim))
        return core_err(CT_ERR_INVALID_ARG, "ct_slice: dim %d out of range for %s", dim, SHAPE_STR(t));
    if (step <= 0) return core_err(CT_ERR_INVALID_ARG, "ct_slice: step must be positive, got %lld", (long long)step);
    int64_t n = t->shape[dim];
    if (start < 0) start += n;
    if (end < 0) end += n;
    start = start < 0 ? 0 : start > n ? n : start;
    end = end < start ? start : end > n ? n : end;
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(stride, t->stride, sizeof stride);
    shape[dim] = (end - start + step - 1) / step;
    stride[dim] = t->stride[dim] * step;
    return tensor_new_view(t, t->ndim, shape, stride, t->offset + start * t->stride[dim], out);
}

ct_status ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length, ct_tensor **out)
{
    CHECK_T("ct_narrow", t, out);
    if (!shape_norm_dim(&dim, t->ndim))
        return core_err(CT_ERR_INVALID_ARG, "ct_narrow: dim %d out of range for %s", dim, SHAPE_STR(t));
    /* written so that huge start/length cannot overflow */
    if (start < 0 || length < 0 || start > t->shape[dim] || length > t->shape[dim] - start)
        return core_err(CT_ERR_RANGE, "ct_narrow: start %lld, length %lld outside dim %d of %s", (long long)start,
                        (long long)length, dim, SHAPE_STR(t));
    return ct_slice(t, dim, start, start + length, 1, out);
}

ct_status ct_select(const ct_tensor *t, int dim, int64_t index, ct_tensor **out)
{
    CHECK_T("ct_select", t, out);
    if (!shape_norm_dim(&dim, t->ndim))
        return core_err(CT_ERR_INVALID_ARG, "ct_select: dim %d out of range for %s", dim, SHAPE_STR(t));
    if (index < 0) index += t->shape[dim];
    if (index < 0 || index >= t->shape[dim])
        return core_err(CT_ERR_RANGE, "ct_select: index %lld out of range for dim %d of %s", (long long)index, dim, SHAPE_STR(t));
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != dim) {
            shape[n] = t->shape[i];
            stride[n++] = t->stride[i];
        }
    return tensor_new_view(t, n, shape, stride, t->offset + index * t->stride[dim], out);
}

ct_status ct_expand(const ct_tensor *t, int ndim, const int64_t *shape_in, ct_tensor **out)
{
    CHECK_T("ct_expand", t, out);
    if (ndim < t->ndim || ndim > CT_MAX_DIMS || (ndim && !shape_in))
        return core_err(CT_ERR_SHAPE, "ct_expand: cannot expand %s to %d dims", SHAPE_STR(t), ndim);
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int64_t want = shape_in[i];
        if (i < lead) {
            if (want < 0) return core_err(CT_ERR_SHAPE, "ct_expand: -1 not allowed for a new dim %d", i);
            shape[i] = want;
            stride[i] = 0;
            continue;
        }
        int64_t have = t->shape[i - lead];
        if (want == -1) want = have;
        if (want != have && have != 1)
            return core_err(CT_ERR_SHAPE, "ct_expand: %s cannot expand to %s (dim %d)", SHAPE_STR(t),
                            shape_str(ndim, shape_in, (char[96]){0}, 96), i);
        shape[i] = want;
        stride[i] = want == have ? t->stride[i - lead] : 0;
    }
    return tensor_new_view(t, ndim, shape, stride, t->offset, out);
}

ct_status ct_squeeze(const ct_tensor *t, int dim, ct_tensor **out)
{
    CHECK_T("ct_squeeze", t, out);
    if (dim != CT_ALL_DIMS && !shape_norm_dim(&dim, t->ndim))
        return core_err(CT_ERR_INVALID_ARG, "ct_squeeze: dim %d out of range for %s", dim, SHAPE_STR(t));
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++) {
        bool drop = t->shape[i] == 1 && (dim == CT_ALL_DIMS || dim == i);
        if (drop) continue;
        shape[n] = t->shape[i];
        stride[n++] = t->stride[i];
    }
    return tensor_new_view(t, n, shape, stride, t->offset, out);
}

ct_status ct_unsqueeze(const ct_tensor *t, int dim, ct_tensor **out)
{
    CHECK_T("ct_unsqueeze", t, out);
    if (t->ndim == CT_MAX_DIMS) return core_err(CT_ERR_SHAPE, "ct_unsqueeze: %s already has %d dims", SHAPE_STR(t), CT_MAX_DIMS);
    if (!shape_norm_dim(&dim, t->ndim + 1))
        return core_err(CT_ERR_INVALID_ARG, "ct_unsqueeze: dim %d out of range for %s", dim, SHAPE_STR(t));
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == dim) {
            shape[i] = 1;
            stride[i] = j < t->ndim ? t->stride[j] * t->shape[j] : 1;
            continue;
        }
        shape[i] = t->shape[j];
        stride[i] = t->stride[j++];
    }
    return tensor_new_view(t, t->ndim + 1, shape, stride, t->offset, out);
}

ct_status ct_alias(const ct_tensor *t, ct_tensor **out)
{
    CHECK_T("ct_alias", t, out);
    return tensor_new_view(t, t->ndim, t->shape, t->stride, t->offset, out);
}
