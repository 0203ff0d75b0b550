/* Lookups on a validated GGUF file: metadata getters and zero-copy tensors. */
#include <math.h>
#include <string.h>

#include "formats/gguf_internal.h"

const char *gguf_name(const gguf_file *f) { return f ? f->name : ""; }
uint32_t gguf_version(const gguf_file *f) { return f ? f->version : 0; }
uint32_t gguf_alignment(const gguf_file *f) { return f ? f->alignment : 0; }
uint64_t gguf_data_offset(const gguf_file *f) { return f ? f->data_off : 0; }
size_t gguf_file_size(const gguf_file *f) { return f ? f->size : 0; }

int64_t gguf_kv_count(const gguf_file *f) { return f ? f->n_kv : 0; }

const char *gguf_kv_key(const gguf_file *f, int64_t i)
{
    return f && i >= 0 && i < f->n_kv ? f->kvs[i].key : NULL;
}

gguf_type gguf_kv_type(const gguf_file *f, int64_t i)
{
    return f && i >= 0 && i < f->n_kv ? f->kvs[i].val.type : GGUF_TYPE_COUNT;
}

int64_t gguf_find_key(const gguf_file *f, const char *key) { return f ? gguf_index_find(&f->kv_index, key) : -1; }

ct_status gguf_kv_value(const gguf_file *f, int64_t i, gguf_value *out)
{
    if (!f || !out || i < 0 || i >= f->n_kv)
        return core_err(CT_ERR_RANGE, "gguf_kv_value: index %lld out of range", (long long)i);
    *out = f->kvs[i].val;
    return CT_OK;
}

/* Decodes the value that starts at p (type known) into a gguf_value. The bytes
 * were validated at open, so only the file end is checked (defensively). */
static ct_status decode_at(const gguf_file *f, const uint8_t *p, gguf_type type, gguf_value *out)
{
    gguf_cursor c = {f->base, f->size, (size_t)(p - f->base), f->name};
    ct_status s = gguf_skip_value(&c, type, 1, "array element");
    if (s != CT_OK) return s;
    memset(out, 0, sizeof *out);
    out->type = type;
    out->kv = -1;
    out->ptr = p;
    out->size = (uint64_t)(f->base + c.pos - p);
    out->n = 1;
    if (type == GGUF_TYPE_STRING) {
        out->n = gguf_rd64(p);
        out->ptr += 8;
        out->size -= 8;
    } else if (type == GGUF_TYPE_ARRAY) {
        out->elem = (gguf_type)gguf_rd32(p);
        out->n = gguf_rd64(p + 4);
        out->ptr += 12;
        out->size -= 12;
    }
    return CT_OK;
}

ct_status gguf_value_elem(const gguf_file *f, const gguf_value *arr, uint64_t i, gguf_value *out)
{
    if (!f || !arr || !out || arr->type != GGUF_TYPE_ARRAY)
        return core_err(CT_ERR_INVALID_ARG, "gguf_value_elem: not an array value");
    if (i >= arr->n)
        return core_err(CT_ERR_RANGE, "gguf '%s': array index %llu out of range (length %llu)", f->name,
                        (unsigned long long)i, (unsigned long long)arr->n);
    size_t es = gguf_type_size(arr->elem);
    if (es) {
        memset(out, 0, sizeof *out);
        out->type = arr->elem;
        out->kv = -1;
        out->ptr = arr->ptr + i * es;
        out->size = es;
        out->n = 1;
        return CT_OK;
    }
    if (arr->kv >= 0 && arr->kv < f->n_kv && f->kvs[arr->kv].str_offs)
        return decode_at(f, f->base + f->kvs[arr->kv].str_offs[i], arr->elem, out);
    const uint8_t *p = arr->ptr;
    for (uint64_t k = 0;; k++) {
        ct_status s = decode_at(f, p, arr->elem, out);
        if (s != CT_OK || k == i) return s;
        p = out->ptr + out->size;
    }
}

bool gguf_value_as_i64(const gguf_value *v, int64_t *out)
{
    const uint8_t *p = v->ptr;
    switch (v->type) {
    case GGUF_TYPE_UINT8: *out = p[0]; return true;
    case GGUF_TYPE_INT8: *out = (int8_t)p[0]; return true;
    case GGUF_TYPE_BOOL: *out = p[0] != 0; return true;
    case GGUF_TYPE_UINT16: *out = (uint16_t)(p[0] | p[1] << 8); return true;
    case GGUF_TYPE_INT16: *out = (int16_t)(uint16_t)(p[0] | p[1] << 8); return true;
    case GGUF_TYPE_UINT32: *out = gguf_rd32(p); return true;
    case GGUF_TYPE_INT32: *out = (int32_t)gguf_rd32(p); return true;
    case GGUF_TYPE_INT64: *out = (int64_t)gguf_rd64(p); return true;
    case GGUF_TYPE_UINT64: {
        uint64_t u = gguf_rd64(p);
        if (u > (uint64_t)INT64_MAX) return false;
        *out = (int64_t)u;
        return true;
    }
    default: return false;
    }
}

bool gguf_value_as_f64(const gguf_value *v, double *out)
{
    if (v->type == GGUF_TYPE_FLOAT32) {
        uint32_t u = gguf_rd32(v->ptr);
        float x;
        memcpy(&x, &u, 4);
        *out = x;
        return true;
    }
    if (v->type == GGUF_TYPE_FLOAT64) {
        uint64_t u = gguf_rd64(v->ptr);
        memcpy(out, &u, 8);
        return true;
    }
    if (v->type == GGUF_TYPE_UINT64) {
        *out = (double)gguf_rd64(v->ptr);
        return true;
    }
    int64_t i;
    if (!gguf_value_as_i64(v, &i)) return false;
    *out = (double)i;
    return true;
}

/* ---- getters by key ---- */

static ct_status find(const gguf_file *f, const char *key, const gguf_kv **kv)
{
    if (!f || !key) return core_err(CT_ERR_INVALID_ARG, "gguf: null file or key");
    int64_t i = gguf_find_key(f, key);
    if (i < 0) return core_err(CT_ERR_NOT_FOUND, "gguf '%s': metadata key '%s' not found", f->name, key);
    *kv = &f->kvs[i];
    return CT_OK;
}

static ct_status wrong_type(const gguf_file *f, const gguf_kv *kv, const char *want)
{
    return core_err(CT_ERR_FORMAT, "gguf '%s': metadata key '%s' (offset %llu) has type %s, expected %s", f->name, kv->key,
                    (unsigned long long)kv->key_off, gguf_type_name(kv->val.type), want);
}

static bool is_int_type(gguf_type t)
{
    return t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 || t == GGUF_TYPE_INT64;
}

/* Integer value in [lo, hi]; u64 values above INT64_MAX only fit a u64 request (hi_u). */
static ct_status get_int(const gguf_file *f, const char *key, int64_t lo, int64_t hi, const char *want, int64_t *out,
                         uint64_t *out_u)
{
    const gguf_kv *kv = NULL;
    ct_status s = find(f, key, &kv);
    if (s != CT_OK) return s;
    if (!is_int_type(kv->val.type) || kv->val.type == GGUF_TYPE_BOOL) return wrong_type(f, kv, want);
    if (out_u && kv->val.type == GGUF_TYPE_UINT64) {
        *out_u = gguf_rd64(kv->val.ptr);
        return CT_OK;
    }
    int64_t v = 0;
    if (!gguf_value_as_i64(&kv->val, &v) || v < lo || v > hi)
        return core_err(CT_ERR_FORMAT, "gguf '%s': metadata key '%s' (offset %llu): value does not fit in %s", f->name, key,
                        (unsigned long long)kv->key_off, want);
    if (out) *out = v;
    if (out_u) *out_u = (uint64_t)v;
    return CT_OK;
}

ct_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out)
{
    int64_t v = 0;
    ct_status s = get_int(f, key, 0, UINT32_MAX, "u32", &v, NULL);
    if (s == CT_OK) *out = (uint32_t)v;
    return s;
}

ct_status gguf_get_i32(const gguf_file *f, const char *key, int32_t *out)
{
    int64_t v = 0;
    ct_status s = get_int(f, key, INT32_MIN, INT32_MAX, "i32", &v, NULL);
    if (s == CT_OK) *out = (int32_t)v;
    return s;
}

ct_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out)
{
    return get_int(f, key, 0, INT64_MAX, "u64", NULL, out);
}

ct_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out)
{
    return get_int(f, key, INT64_MIN, INT64_MAX, "i64", out, NULL);
}

ct_status gguf_get_f64(const gguf_file *f, const char *key, double *out)
{
    const gguf_kv *kv = NULL;
    ct_status s = find(f, key, &kv);
    if (s != CT_OK) return s;
    if (kv->val.type == GGUF_TYPE_BOOL || !gguf_value_as_f64(&kv->val, out)) return wrong_type(f, kv, "a number");
    return CT_OK;
}

ct_status gguf_get_f32(const gguf_file *f, const char *key, float *out)
{
    double d = 0;
    ct_status s = gguf_get_f64(f, key, &d);
    if (s == CT_OK) *out = (float)d;
    return s;
}

ct_status gguf_get_bool(const gguf_file *f, const char *key, bool *out)
{
    const gguf_kv *kv = NULL;
    ct_status s = find(f, key, &kv);
    if (s != CT_OK) return s;
    if (kv->val.type != GGUF_TYPE_BOOL) return wrong_type(f, kv, "bool");
    *out = kv->val.ptr[0] != 0;
    return CT_OK;
}

ct_status gguf_get_str(const gguf_file *f, const char *key, const char **str, size_t *len)
{
    const gguf_kv *kv = NULL;
    ct_status s = find(f, key, &kv);
    if (s != CT_OK) return s;
    if (kv->val.type != GGUF_TYPE_STRING) return wrong_type(f, kv, "str");
    *str = (const char *)kv->val.ptr;
    if (len) *len = (size_t)kv->val.n;
    return CT_OK;
}

ct_status gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t def, uint32_t *out)
{
    if (gguf_find_key(f, key) < 0) return *out = def, CT_OK;
    return gguf_get_u32(f, key, out);
}

ct_status gguf_get_i64_or(const gguf_file *f, const char *key, int64_t def, int64_t *out)
{
    if (gguf_find_key(f, key) < 0) return *out = def, CT_OK;
    return gguf_get_i64(f, key, out);
}

ct_status gguf_get_f32_or(const gguf_file *f, const char *key, float def, float *out)
{
    if (gguf_find_key(f, key) < 0) return *out = def, CT_OK;
    return gguf_get_f32(f, key, out);
}

ct_status gguf_get_bool_or(const gguf_file *f, const char *key, bool def, bool *out)
{
    if (gguf_find_key(f, key) < 0) return *out = def, CT_OK;
    return gguf_get_bool(f, key, out);
}

ct_status gguf_get_arr(const gguf_file *f, const char *key, gguf_type *elem, uint64_t *n, const void **data)
{
    const gguf_kv *kv = NULL;
    ct_status s = find(f, key, &kv);
    if (s != CT_OK) return s;
    if (kv->val.type != GGUF_TYPE_ARRAY) return wrong_type(f, kv, "arr");
    if (elem) *elem = kv->val.elem;
    if (n) *n = kv->val.n;
    if (data) *data = gguf_type_size(kv->val.elem) ? kv->val.ptr : NULL;
    return CT_OK;
}

ct_status gguf_get_arr_str(const gguf_file *f, const char *key, uint64_t i, const char **str, size_t *len)
{
    const gguf_kv *kv = NULL;
    ct_status s = find(f, key, &kv);
    if (s != CT_OK) return s;
    if (kv->val.type != GGUF_TYPE_ARRAY || kv->val.elem != GGUF_TYPE_STRING) return wrong_type(f, kv, "arr[str]");
    if (i >= kv->val.n)
        return core_err(CT_ERR_RANGE, "gguf '%s': index %llu out of range for '%s' (length %llu)", f->name,
                        (unsigned long long)i, key, (unsigned long long)kv->val.n);
    const uint8_t *p = f->base + kv->str_offs[i];
    *str = (const char *)p + 8;
    if (len) *len = (size_t)gguf_rd64(p);
    return CT_OK;
}

/* ---- tensors ---- */

int64_t gguf_tensor_count(const gguf_file *f) { return f ? f->n_tensors : 0; }

const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i)
{
    return f && i >= 0 && i < f->n_tensors ? &f->tensors[i] : NULL;
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name)
{
    int64_t i = f ? gguf_index_find(&f->tensor_index, name) : -1;
    return i < 0 ? NULL : &f->tensors[i];
}

int64_t gguf_tensor_numel(const gguf_tensor *t)
{
    return t ? t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3] : 0;
}

static void release_map(void *data, void *ctx)
{
    (void)data;
    gguf_map_release(ctx);
}

ct_status gguf_tensor_to_ct(gguf_file *f, const gguf_tensor *t, ct_tensor **out)
{
    if (!f || !t || !out) return core_err(CT_ERR_INVALID_ARG, "gguf_tensor_to_ct: null argument");
    if (t->dtype >= CT_DTYPE_COUNT)
        return core_err(CT_ERR_DTYPE, "gguf '%s': tensor '%s' has ggml type %s (%u), which ctorch does not support",
                        f->name, t->name, gguf_ggml_type_name(t->ggml_type), t->ggml_type);
    /* kernels load elements (and the f16 scales of quantized blocks) directly */
    size_t bb = ct_dtype_block_bytes(t->dtype);
    size_t need = ct_dtype_is_quantized(t->dtype) ? (bb % 4 ? 2 : 4) : bb;
    if ((uintptr_t)t->data % need)
        return core_err(CT_ERR_FORMAT, "gguf '%s': tensor '%s' data at file offset %llu is not %zu-byte aligned "
                        "(general.alignment = %u)", f->name, t->name,
                        (unsigned long long)(f->data_off + t->offset), need, f->alignment);
    int64_t shape[GGUF_MAX_DIMS];
    for (int d = 0; d < t->n_dims; d++) shape[d] = t->ne[t->n_dims - 1 - d];
    atomic_fetch_add(&f->map->ref, 1);
    ct_status s = ct_tensor_from_blob(t->n_dims, shape, t->dtype, (void *)t->data, release_map, f->map, out);
    if (s != CT_OK) gguf_map_release(f->map);
    return s;
}
