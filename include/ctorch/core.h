/* ctorch core: status codes, dtypes, tensors, views and creation.
 *
 * Conventions: every fallible call returns ct_status; on failure ct_last_error()
 * names the call, the shapes or file involved and the reason. Functions that
 * produce a tensor write a new handle to *out; the caller frees it with
 * ct_tensor_free(). A view shares storage with its base (storage is reference
 * counted), so freeing the base handle never invalidates a view. */
#ifndef CTORCH_CORE_H
#define CTORCH_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define CT_API __declspec(dllexport)
#else
#define CT_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CT_MAX_DIMS 8

typedef enum ct_status {
    CT_OK = 0,
    CT_ERR_INVALID_ARG,   /* null pointer, out-of-range dim, bad parameter */
    CT_ERR_SHAPE,         /* shapes that do not fit the op */
    CT_ERR_DTYPE,         /* dtype the op does not accept */
    CT_ERR_OOM,           /* host allocation failed */
    CT_ERR_DEVICE_OOM,    /* device allocation failed: retried on the next device */
    CT_ERR_DEVICE_FAULT,  /* launch/driver failure: retried on the next device */
    CT_ERR_UNSUPPORTED,   /* no device in the chain can run this op */
    CT_ERR_STRICT,        /* strict mode refused a fallback or a routing away from the chain head */
    CT_ERR_IO,            /* file could not be opened/read/written */
    CT_ERR_FORMAT,        /* malformed file contents */
    CT_ERR_NOT_FOUND,     /* named device, key or tensor does not exist */
    CT_ERR_RANGE,         /* index or value out of range */
    CT_ERR_DEVICE_LOST    /* a device failed late (at a sync point): the data that lived only
                             there is gone, and the device is out of the chain until ct_exec_reinit */
} ct_status;

CT_API const char *ct_status_name(ct_status s);
/* Message of the last failed call on this thread ("" if none). */
CT_API const char *ct_last_error(void);
CT_API void ct_clear_error(void);

typedef enum ct_log_level { CT_LOG_DEBUG, CT_LOG_INFO, CT_LOG_WARN, CT_LOG_ERROR } ct_log_level;
typedef void (*ct_log_fn)(ct_log_level level, const char *msg, void *ctx);
/* All library logging goes through this hook; the default writes WARN and
 * above to stderr (CTORCH_LOG=debug|info|warn|error changes the level). */
CT_API void ct_set_log_callback(ct_log_fn fn, void *ctx);
CT_API void ct_set_log_level(ct_log_level level);

/* CPU worker threads (default: CTORCH_THREADS or the number of cores). The pool
 * is created once; later calls can lower the count or raise it back to that size. */
CT_API void ct_set_num_threads(int n);
CT_API int ct_get_num_threads(void);

/* ---- dtypes ---- */
typedef enum ct_dtype {
    CT_F32 = 0, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_BOOL, CT_C64, CT_I8,
    /* GGUF block-quantized types: a row's length must be a multiple of the block size. */
    CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q8_1,
    CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_Q8_K,
    CT_DTYPE_COUNT
} ct_dtype;

CT_API const char *ct_dtype_name(ct_dtype t);
/* Case-insensitive: "f32", "q4_k", "bf16", ... */
CT_API ct_status ct_dtype_from_name(const char *name, ct_dtype *out);
CT_API int64_t ct_dtype_block_size(ct_dtype t);  /* elements per block, 1 for plain types */
CT_API size_t ct_dtype_block_bytes(ct_dtype t);  /* bytes per block (= element size for plain) */
CT_API bool ct_dtype_is_float(ct_dtype t);       /* f32 f64 f16 bf16 */
CT_API bool ct_dtype_is_int(ct_dtype t);         /* i8 i32 i64 (bool excluded) */
CT_API bool ct_dtype_is_complex(ct_dtype t);
CT_API bool ct_dtype_is_quantized(ct_dtype t);
/* Bytes for n elements (n must be a multiple of the block size for quantized types). */
CT_API size_t ct_dtype_row_bytes(ct_dtype t, int64_t n);

/* IEEE half and bfloat16 conversions (round to nearest even). */
CT_API float ct_f16_to_f32(uint16_t h);
CT_API uint16_t ct_f32_to_f16(float f);
CT_API float ct_bf16_to_f32(uint16_t h);
CT_API uint16_t ct_f32_to_bf16(float f);

/* ---- tensors ---- */
typedef struct ct_tensor ct_tensor;

CT_API void ct_tensor_free(ct_tensor *t); /* NULL is fine */
CT_API int ct_tensor_ndim(const ct_tensor *t);
CT_API const int64_t *ct_tensor_shape(const ct_tensor *t);
CT_API const int64_t *ct_tensor_strides(const ct_tensor *t); /* in elements */
CT_API int64_t ct_tensor_offset(const ct_tensor *t);         /* in elements */
/* Size of dim (negative counts from the end); -1 if out of range. */
CT_API int64_t ct_tensor_dim(const ct_tensor *t, int dim);
CT_API ct_dtype ct_tensor_dtype(const ct_tensor *t);
CT_API int64_t ct_tensor_numel(const ct_tensor *t);
CT_API size_t ct_tensor_nbytes(const ct_tensor *t); /* bytes of the elements the view covers */
CT_API bool ct_tensor_is_contiguous(const ct_tensor *t);
/* Comma-separated devices that hold a complete, usable copy, e.g. "cpu,cuda:0" (a copy
 * stale in part since a write elsewhere, or on a lost device, is not listed). */
CT_API const char *ct_tensor_residency(const ct_tensor *t, char *buf, size_t len);

/* Host pointer to the first element of the view, after making the host copy
 * valid (copies back from a device if needed). Strides apply. The bytes are the data as
 * of this call: an op that writes the tensor afterwards may change them in place (on a
 * device whose memory is the host's, CT_DEVICE_HOST_SHARED) or leave them stale; call
 * again after it. */
CT_API ct_status ct_tensor_data(const ct_tensor *t, const void **data);
/* Same, for writing: the host copy becomes the only valid one. */
CT_API ct_status ct_tensor_data_mut(ct_tensor *t, void **data);
/* Copies the view's elements in row-major order into dst (bytes >= nbytes). */
CT_API ct_status ct_tensor_to_host(const ct_tensor *t, void *dst, size_t bytes);
/* Element at a flat row-major index, converted to double (real part for c64). */
CT_API ct_status ct_tensor_item(const ct_tensor *t, int64_t index, double *value);
/* Makes the storage valid on a device ("cpu", "cuda:0", ...) now, ahead of the ops that need it. */
CT_API ct_status ct_tensor_prefetch(const ct_tensor *t, const char *device);
/* Places the tensor's storage on a device (a weight, a KV cache): its data lives there, and
 * routing follows it, so ops that read it run there unless that would move more bytes
 * than running elsewhere (`--gpu-layers N` = placing those layers' weights). The other
 * views of the storage share the placement. NULL removes it. */
CT_API ct_status ct_tensor_place(const ct_tensor *t, const char *device);
/* What ct_tensor_place_ex does beyond ct_tensor_place (flags, ORed; 0 = ct_tensor_place). */
typedef enum ct_place_flags {
    /* the device's own layout of the weight (a decode repack, a dense copy) is not made: its
     * ops there read the plain bytes (an embedding table that is only looked up) */
    CT_PLACE_NO_LAYOUT = 1u << 0,
    /* the placement (where ops follow the tensor) is left as it was: the device's layout or
     * copy is made now, ahead of the ops that will use it */
    CT_PLACE_KEEP_HOME = 1u << 1,
} ct_place_flags;
/* ct_tensor_place with flags; a NULL device (removing the placement) takes none. */
CT_API ct_status ct_tensor_place_ex(const ct_tensor *t, const char *device, unsigned flags);
/* The name of the device a tensor's storage is placed on (ct_tensor_place), or NULL where
 * none is; the string lives until ct_exec_reinit or ct_exec_shutdown. */
CT_API const char *ct_tensor_placement(const ct_tensor *t);
/* Human-readable dump (shape, dtype and up to `max_items` values) into buf. */
CT_API const char *ct_tensor_format(const ct_tensor *t, int max_items, char *buf, size_t len);

/* ---- creation (all run through the executor) ---- */
CT_API ct_status ct_empty(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out);
CT_API ct_status ct_zeros(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out);
CT_API ct_status ct_ones(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out);
CT_API ct_status ct_full(int ndim, const int64_t *shape, ct_dtype dtype, double value, ct_tensor **out);
/* [start, end) with step, like torch.arange. */
CT_API ct_status ct_arange(double start, double end, double step, ct_dtype dtype, ct_tensor **out);
CT_API ct_status ct_linspace(double start, double end, int64_t steps, ct_dtype dtype, ct_tensor **out);
CT_API ct_status ct_eye(int64_t n, int64_t m, ct_dtype dtype, ct_tensor **out);
/* Copies `data` (row-major, ct_dtype_row_bytes(dtype, numel) bytes). */
CT_API ct_status ct_tensor_from_data(int ndim, const int64_t *shape, ct_dtype dtype, const void *data,
                                     ct_tensor **out);
/* Wraps host memory without copying; `deleter(data, ctx)` runs when the last view goes
 * (NULL: the caller keeps ownership and must outlive the tensor). Used for mmapped weights.
 * A device whose memory is the host's (CT_DEVICE_HOST_SHARED) reads and writes `data` in
 * place when it is 64-byte aligned. */
CT_API ct_status ct_tensor_from_blob(int ndim, const int64_t *shape, ct_dtype dtype, void *data,
                                     void (*deleter)(void *data, void *ctx), void *ctx, ct_tensor **out);
/* Counter-based (Philox4x32-10): element i depends only on (seed, i), so results are
 * identical on every device and thread count. rand: U[0,1); randn: N(0,1). */
CT_API ct_status ct_rand(int ndim, const int64_t *shape, ct_dtype dtype, uint64_t seed, ct_tensor **out);
CT_API ct_status ct_randn(int ndim, const int64_t *shape, ct_dtype dtype, uint64_t seed, ct_tensor **out);

/* ---- views: share storage, no data movement ---- */
/* Shape may contain one -1. Fails with CT_ERR_SHAPE if the strides cannot express it. */
CT_API ct_status ct_view(const ct_tensor *t, int ndim, const int64_t *shape, ct_tensor **out);
/* Like ct_view, but copies (contiguous) when a view is impossible. */
CT_API ct_status ct_reshape(const ct_tensor *t, int ndim, const int64_t *shape, ct_tensor **out);
CT_API ct_status ct_permute(const ct_tensor *t, const int *dims, ct_tensor **out);
CT_API ct_status ct_transpose(const ct_tensor *t, int dim0, int dim1, ct_tensor **out);
CT_API ct_status ct_narrow(const ct_tensor *t, int dim, int64_t start, int64_t length, ct_tensor **out);
/* Python-style slice start:end:step on one dim (step > 0; start/end clamped, negatives wrap). */
CT_API ct_status ct_slice(const ct_tensor *t, int dim, int64_t start, int64_t end, int64_t step,
                          ct_tensor **out);
/* Removes dim `dim` by picking `index`. */
CT_API ct_status ct_select(const ct_tensor *t, int dim, int64_t index, ct_tensor **out);
/* Broadcast to shape (-1 keeps a size); new leading dims allowed. */
CT_API ct_status ct_expand(const ct_tensor *t, int ndim, const int64_t *shape, ct_tensor **out);
/* dim = CT_ALL_DIMS removes every size-1 dim. */
#define CT_ALL_DIMS (-100)
CT_API ct_status ct_squeeze(const ct_tensor *t, int dim, ct_tensor **out);
CT_API ct_status ct_unsqueeze(const ct_tensor *t, int dim, ct_tensor **out);
/* Another handle on the same view. */
CT_API ct_status ct_alias(const ct_tensor *t, ct_tensor **out);

/* ---- copies (ops) ---- */
/* A contiguous tensor: the same storage when t already is, else a copy. */
CT_API ct_status ct_contiguous(const ct_tensor *t, ct_tensor **out);
CT_API ct_status ct_clone(const ct_tensor *t, ct_tensor **out);
CT_API ct_status ct_cast(const ct_tensor *t, ct_dtype dtype, ct_tensor **out);
/* Writes src (broadcast to dst's shape, cast to dst's dtype) into the view dst. */
CT_API ct_status ct_copy_(ct_tensor *dst, const ct_tensor *src);
/* dst[index[i], :] = src[i, :] for every i: dst [R, C] (f32, f64, f16 or bf16), src [n, C] of
 * dst's dtype or f32, index [n] i32/i64 (a device tensor, so a recorded step can append to a
 * KV cache at a position that changes per token). An index outside [0, R) is CT_ERR_RANGE,
 * and nothing is written. */
CT_API ct_status ct_set_rows(ct_tensor *dst, const ct_tensor *src, const ct_tensor *index);
CT_API ct_status ct_concat(const ct_tensor *const *ts, int n, int dim, ct_tensor **out);
CT_API ct_status ct_stack(const ct_tensor *const *ts, int n, int dim, ct_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
