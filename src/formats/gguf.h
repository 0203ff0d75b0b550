/* GGUF (v2/v3) reader and writer. Internal to ctorch (gguf_ prefix).
 *
 * Reader: gguf_open maps the file read-only-private and validates the whole
 * header (metadata, tensor infos, alignment, bounds, overlaps) before it
 * returns, so every accessor afterwards is a cheap lookup that cannot run
 * past the mapping. Errors are CT_ERR_IO (open/map) or CT_ERR_FORMAT with a
 * message naming the file, the field and its byte offset.
 *
 * Strings returned by the reader point into the mapping and are NOT
 * NUL-terminated in general (GGUF strings carry a length) - except keys and
 * tensor names, which the reader copies and terminates. Use the len outputs.
 *
 * Lifetime: pointers from accessors are valid until gguf_close. Tensors made
 * by gguf_tensor_to_ct hold a reference on the mapping and stay valid after
 * gguf_close. */
#ifndef CT_FORMATS_GGUF_H
#define CT_FORMATS_GGUF_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch/core.h"

#define GGUF_MAGIC "GGUF"
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_DIMS 4

typedef enum gguf_type {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

/* "u8", "i32", "f32", "bool", "str", "arr", ... ("?" for an invalid id). */
const char *gguf_type_name(gguf_type t);
/* Bytes of one scalar of type t (0 for string/array/invalid). */
size_t gguf_type_size(gguf_type t);

/* ggml tensor type ids as stored in GGUF. */
enum {
    GGML_TYPE_F32 = 0, GGML_TYPE_F16 = 1, GGML_TYPE_Q4_0 = 2, GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6, GGML_TYPE_Q5_1 = 7, GGML_TYPE_Q8_0 = 8, GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10, GGML_TYPE_Q3_K = 11, GGML_TYPE_Q4_K = 12, GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14, GGML_TYPE_Q8_K = 15, GGML_TYPE_I8 = 24, GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26, GGML_TYPE_I64 = 27, GGML_TYPE_F64 = 28, GGML_TYPE_BF16 = 30,
};
/* ggml type id -> ct dtype; false when ctorch has no such dtype. */
bool gguf_ggml_to_dtype(uint32_t ggml_type, ct_dtype *out);
/* ct dtype -> ggml type id; false for dtypes GGUF cannot store (bool, c64). */
bool gguf_dtype_to_ggml(ct_dtype dt, uint32_t *out);
/* "Q4_K", "F32", "IQ2_XXS", ... or "type<N>" for unknown ids. */
const char *gguf_ggml_type_name(uint32_t ggml_type);

typedef struct gguf_file gguf_file;

/* Maps and validates a file. */
ct_status gguf_open(const char *path, gguf_file **out);
/* Parses a buffer the caller keeps alive until gguf_close and until every
 * tensor made by gguf_tensor_to_ct is freed (the buffer is borrowed, not
 * copied). `name` is used in error messages. */
ct_status gguf_open_memory(const void *data, size_t size, const char *name, gguf_file **out);
void gguf_close(gguf_file *f); /* NULL is fine */

const char *gguf_name(const gguf_file *f);   /* path or the name given */
uint32_t gguf_version(const gguf_file *f);
uint32_t gguf_alignment(const gguf_file *f);
uint64_t gguf_data_offset(const gguf_file *f); /* file offset of the tensor data section */
size_t gguf_file_size(const gguf_file *f);

/* ---- metadata ---- */
int64_t gguf_kv_count(const gguf_file *f);
const char *gguf_kv_key(const gguf_file *f, int64_t i); /* NUL-terminated */
gguf_type gguf_kv_type(const gguf_file *f, int64_t i);
int64_t gguf_find_key(const gguf_file *f, const char *key); /* -1 if absent */

/* Typed getters by key. Missing key: CT_ERR_NOT_FOUND; wrong type or a value
 * that does not fit: CT_ERR_FORMAT. Integer getters accept any integer type
 * whose value fits; gguf_get_f32/f64 accept f32 and f64 (and integers). */
ct_status gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out);
ct_status gguf_get_i32(const gguf_file *f, const char *key, int32_t *out);
ct_status gguf_get_u64(const gguf_file *f, const char *key, uint64_t *out);
ct_status gguf_get_i64(const gguf_file *f, const char *key, int64_t *out);
ct_status gguf_get_f32(const gguf_file *f, const char *key, float *out);
ct_status gguf_get_f64(const gguf_file *f, const char *key, double *out);
ct_status gguf_get_bool(const gguf_file *f, const char *key, bool *out);
/* s points into the mapping, not NUL-terminated: use len. */
ct_status gguf_get_str(const gguf_file *f, const char *key, const char **s, size_t *len);

/* With a default when the key is absent (a present key of the wrong type is still an error). */
ct_status gguf_get_u32_or(const gguf_file *f, const char *key, uint32_t def, uint32_t *out);
ct_status gguf_get_i64_or(const gguf_file *f, const char *key, int64_t def, int64_t *out);
ct_status gguf_get_f32_or(const gguf_file *f, const char *key, float def, float *out);
ct_status gguf_get_bool_or(const gguf_file *f, const char *key, bool def, bool *out);

/* Arrays. For numeric/bool element types, *data points at n packed
 * little-endian elements inside the mapping (may be unaligned: memcpy). For
 * string arrays *data is NULL: use gguf_get_arr_str. For arrays of arrays
 * *data is NULL: use gguf_kv_value for the nested walk. */
ct_status gguf_get_arr(const gguf_file *f, const char *key, gguf_type *elem, uint64_t *n, const void **data);
/* i-th string of a string array, O(1) (offset table built at open). */
ct_status gguf_get_arr_str(const gguf_file *f, const char *key, uint64_t i, const char **s, size_t *len);

/* Generic value access (for tools and nested arrays). A value is a typed
 * view of bytes inside the mapping. */
typedef struct gguf_value {
    gguf_type type;
    gguf_type elem;     /* arrays: element type */
    uint64_t n;         /* arrays: element count; strings: byte length */
    const uint8_t *ptr; /* scalars/strings: the payload; arrays: the first element */
    uint64_t size;      /* bytes the whole value spans from ptr */
    int64_t kv;         /* index of the KV when this is a top-level value, else -1 */
} gguf_value;
ct_status gguf_kv_value(const gguf_file *f, int64_t i, gguf_value *out);
/* i-th element of an array value (O(1) for fixed-size elements, O(i) for
 * strings/arrays inside nested arrays; top-level string arrays use the table). */
ct_status gguf_value_elem(const gguf_file *f, const gguf_value *arr, uint64_t i, gguf_value *out);
/* Scalar value converted to double / int64 (bools give 0/1). */
bool gguf_value_as_f64(const gguf_value *v, double *out);
bool gguf_value_as_i64(const gguf_value *v, int64_t *out);

/* ---- tensors ---- */
typedef struct gguf_tensor {
    const char *name;   /* NUL-terminated copy */
    uint32_t ggml_type; /* raw type id from the file */
    ct_dtype dtype;     /* CT_DTYPE_COUNT when unsupported by ctorch */
    int n_dims;         /* 1..4 */
    int64_t ne[GGUF_MAX_DIMS]; /* ggml order: ne[0] is the contiguous (row) dim; unused dims 1 */
    uint64_t offset;    /* relative to the data section */
    size_t size;        /* bytes */
    const void *data;   /* inside the mapping */
} gguf_tensor;

int64_t gguf_tensor_count(const gguf_file *f);
const gguf_tensor *gguf_tensor_at(const gguf_file *f, int64_t i);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name); /* NULL if absent */
int64_t gguf_tensor_numel(const gguf_tensor *t);
/* Zero-copy tensor over the mapping, shape ne reversed ([ne[n-1], ..., ne[0]],
 * row-major). Writes to it are private (copy-on-write), never reach the file.
 * CT_ERR_DTYPE for ggml types ctorch does not support. */
ct_status gguf_tensor_to_ct(gguf_file *f, const gguf_tensor *t, ct_tensor **out);

/* ---- writer ---- */
typedef struct gguf_writer gguf_writer;

/* NULL on allocation failure. Version 3 unless gguf_writer_set_version. */
gguf_writer *gguf_writer_new(void);
void gguf_writer_free(gguf_writer *w);
ct_status gguf_writer_set_version(gguf_writer *w, uint32_t version); /* 2 or 3 */
/* Setting an existing key replaces its value (keeps its position).
 * "general.alignment" set via gguf_writer_set_u32 also sets the data alignment. */
ct_status gguf_writer_set_u8(gguf_writer *w, const char *key, uint8_t v);
ct_status gguf_writer_set_i8(gguf_writer *w, const char *key, int8_t v);
ct_status gguf_writer_set_u16(gguf_writer *w, const char *key, uint16_t v);
ct_status gguf_writer_set_i16(gguf_writer *w, const char *key, int16_t v);
ct_status gguf_writer_set_u32(gguf_writer *w, const char *key, uint32_t v);
ct_status gguf_writer_set_i32(gguf_writer *w, const char *key, int32_t v);
ct_status gguf_writer_set_u64(gguf_writer *w, const char *key, uint64_t v);
ct_status gguf_writer_set_i64(gguf_writer *w, const char *key, int64_t v);
ct_status gguf_writer_set_f32(gguf_writer *w, const char *key, float v);
ct_status gguf_writer_set_f64(gguf_writer *w, const char *key, double v);
ct_status gguf_writer_set_bool(gguf_writer *w, const char *key, bool v);
ct_status gguf_writer_set_str(gguf_writer *w, const char *key, const char *v); /* NUL-terminated */
ct_status gguf_writer_set_strn(gguf_writer *w, const char *key, const char *v, size_t len);
/* Numeric/bool array of n elements of type elem (host-endian = little-endian), copied. */
ct_status gguf_writer_set_arr(gguf_writer *w, const char *key, gguf_type elem, const void *data, uint64_t n);
ct_status gguf_writer_set_arr_str(gguf_writer *w, const char *key, const char *const *strs, uint64_t n);
/* Raw pre-encoded value: the bytes as they appear in the file after the type
 * field (strings: u64 length + bytes; arrays: u32 element type + u64 count +
 * elements). Used for nested arrays. Validated before acceptance. */
ct_status gguf_writer_set_raw(gguf_writer *w, const char *key, gguf_type type, const void *payload, size_t size);
/* Copies the i-th kv of an open file (key, type and value, nested arrays included). */
ct_status gguf_writer_copy_kv(gguf_writer *w, const gguf_file *f, int64_t i);
/* Tensor with a row-major ct shape (ne is the reverse). The data
 * (ct_dtype_row_bytes(dtype, numel) bytes) is BORROWED: it must stay valid
 * until gguf_writer_write returns. Names must be unique, < 64 bytes. */
ct_status gguf_writer_add_tensor(gguf_writer *w, const char *name, ct_dtype dtype, int ndim, const int64_t *ct_shape,
                                 const void *data);
/* Same with a raw ggml type id and ggml-order ne (for types ctorch lacks). */
ct_status gguf_writer_add_tensor_raw(gguf_writer *w, const char *name, uint32_t ggml_type, int n_dims,
                                     const int64_t *ne, const void *data, size_t size);
/* Atomic: writes a temporary file in path's folder, syncs it and renames it
 * over path only when complete; on failure the temporary file is removed and
 * an existing file at path is left as it was. A symlink at path is followed. */
ct_status gguf_writer_write(gguf_writer *w, const char *path);
/* A flag (e.g. set by a SIGINT handler) checked between tensors while writing:
 * once nonzero, gguf_writer_write stops, removes its temporary file and fails. */
void gguf_writer_set_cancel(gguf_writer *w, volatile sig_atomic_t *flag);
/* Serializes to a malloc'ed buffer (caller frees with free()). */
ct_status gguf_writer_write_memory(gguf_writer *w, void **data, size_t *size);

#endif
