/* Internal view of tensors and their storage. Not installed. */
#ifndef CT_CORE_TENSOR_H
#define CT_CORE_TENSOR_H

#include <stdatomic.h>
#include <stdarg.h>

#include "ctorch/core.h"

struct ct_device;

/* One device's copy of a storage. */
typedef struct ct_buffer {
    void *ptr;   /* host pointer (cpu) or the backend's handle/device pointer */
    size_t size; /* bytes */
    void *priv;  /* backend's bookkeeping */
    bool borrowed; /* a piece of a recorded step's arena (exec/step.c): the step frees it, never the storage */
    size_t offset; /* on a backend whose ptr is a handle (ct_backend_ops.handle_buffers, e.g. a cl_mem): where
                      this buffer's bytes start within ptr's allocation (a piece of an arena); else 0 */
} ct_buffer;

struct ct_event;

/* Readers on other devices remembered per copy; one more makes the host wait for the oldest. */
#define CT_COPY_READERS 3

typedef struct ct_storage_copy {
    struct ct_device *dev;
    ct_buffer buf;
    bool valid;                                /* holds the data, but for the stale range */
    bool alias;                                /* buf is the host copy's own memory (ct_backend_ops.alias):
                                                  one set of bytes under two validity flags */
    size_t stale_lo, stale_hi;                 /* bytes written elsewhere since (empty: lo == hi) */
    struct ct_event *writer;                   /* the last write into this copy (NULL: done) */
    struct ct_event *readers[CT_COPY_READERS]; /* reads by other devices' queues since */
} ct_storage_copy;

/* What a derived layout was made from (the view, the layout's kind), compared exactly. */
#define STORAGE_DERIVED_KEY 6
typedef struct ct_storage_derived {
    uint64_t key[STORAGE_DERIVED_KEY];
    void *data;
    void (*free_fn)(void *data);
    /* A device's own layout of a view (storage_set_layout): the device owning it, the bytes
     * it holds (counted per device), and the op and source slot it serves in place of the
     * raw bytes (-1: none, it is kept beside them). */
    const struct ct_device *dev;
    size_t bytes;
    int serves_op, serves_src;
    struct ct_storage_derived *next;
} ct_storage_derived;

/* Reference-counted bytes with one copy per device visited. Copy 0, when
 * present, is always the host copy (dev->kind == CT_DEVICE_CPU). Writing on a
 * device leaves only that device's copy valid. */
typedef struct ct_storage {
    atomic_int refcnt;
    size_t nbytes;
    int n_copies, cap_copies;
    ct_storage_copy *copies;          /* inline_copies, or a larger array once a storage has
                                         visited more devices: there is no fixed limit */
    ct_storage_copy inline_copies[2];
    void (*deleter)(void *data, void *ctx); /* external host memory (from_blob) */
    void *deleter_ctx;
    bool host_external;                     /* host copy not ours to free */
    struct ct_device *home;                 /* ct_tensor_place: where its data lives (NULL: anywhere) */
    struct ct_device *written_on;           /* the device of the last op that wrote it (NULL: the
                                               caller's host data, or never written) */
    /* Backends' rearrangements of the host bytes (the CPU's repacked weight panels), one
     * per view (key; a model's weights are views of one mapped file): made on first
     * use, dropped when the storage is written, freed with it. */
    ct_storage_derived *derived;
    /* Storages with device copies are listed (core/storage.c), so a device out of memory
     * can evict copies that are valid elsewhere; `busy` (an op is using it) protects one. */
    struct ct_storage *dev_prev, *dev_next;
    bool dev_listed;
    int busy;
    /* Bumped whenever a copy may stop holding the data (a write, a copy dropped or evicted,
     * a new one): a check that found the data valid on a device still holds while it is
     * unchanged and no device is lost (storage_gen; a replay skips such checks). */
    uint64_t gen;
} ct_storage;

struct ct_tensor {
    ct_storage *st;
    ct_dtype dtype;
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    int64_t stride[CT_MAX_DIMS]; /* elements; for quantized dtypes stride[last] == 1 */
    int64_t offset;              /* elements */
};

/* ---- errors (core/status.c) ---- */
ct_status core_err(ct_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void core_log(ct_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool core_log_enabled(ct_log_level level);
/* A line for the trace (when tracing), through the hook the executor installs. */
typedef void (*core_note_fn)(const char *msg);
void core_set_note_hook(core_note_fn fn);
void core_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- shapes (core/shape.c) ---- */
int64_t shape_numel(int ndim, const int64_t *shape);
void shape_contiguous_strides(int ndim, const int64_t *shape, int64_t *stride);
bool shape_equal(int na, const int64_t *a, int nb, const int64_t *b);
/* Normalizes a possibly negative dim against ndim; false if out of range. */
bool shape_norm_dim(int *dim, int ndim);
/* PyTorch broadcasting of two shapes; CT_ERR_SHAPE (message names `op`) if they clash. */
ct_status shape_broadcast(const char *op, int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                          int64_t *out);
/* "[2, 3, 4]" into buf. */
const char *shape_str(int ndim, const int64_t *shape, char *buf, size_t len);
#define SHAPE_STR(t) shape_str((t)->ndim, (t)->shape, (char[96]){0}, 96)

/* ---- tensors (core/tensor.c) ---- */
/* A handle with a fresh, empty storage of the given shape (no copies yet). */
ct_status tensor_new_shell(int ndim, const int64_t *shape, ct_dtype dtype, ct_tensor **out);
/* A new handle on t's storage with the given geometry (storage ref taken). */
ct_status tensor_new_view(const ct_tensor *t, int ndim, const int64_t *shape, const int64_t *stride,
                          int64_t offset, ct_tensor **out);
size_t tensor_byte_offset(const ct_tensor *t);
/* The bytes of its storage a view spans: [*lo, *hi) (the whole storage for block
 * dtypes or negative strides; empty for a view with no elements). */
void tensor_byte_range(const ct_tensor *t, size_t *lo, size_t *hi);
bool tensor_is_contiguous(const ct_tensor *t);
/* Argument check helper: returns CT_ERR_INVALID_ARG naming `op` when t is NULL. */
ct_status tensor_check(const char *op, const char *what, const ct_tensor *t);

/* ---- storage (core/storage.c) ---- */
ct_storage *storage_new(size_t nbytes);
void storage_retain(ct_storage *st);
void storage_release(ct_storage *st);
ct_storage_copy *storage_find(ct_storage *st, const struct ct_device *dev);
bool storage_valid_on(const ct_storage *st, const struct ct_device *dev);
/* Any device holding a valid copy, or NULL for a never-written storage. */
struct ct_device *storage_valid_device(const ct_storage *st);
/* Allocates (if needed) and fills dev's copy from a valid one, and orders dev's queue
 * after that copy's last write (dev NULL or the CPU: the host waits). `moved` += bytes
 * copied. On failure *failed (when not NULL) names the device whose call failed: dev
 * itself, another device a transfer came from, or NULL (host memory, or data already
 * lost: CT_ERR_DEVICE_LOST). *allocated tells whether dev's buffer was made here. */
ct_status storage_make_valid_ex(ct_storage *st, struct ct_device *dev, uint64_t *moved, struct ct_device **failed,
                                bool *allocated);
ct_status storage_make_valid(ct_storage *st, struct ct_device *dev, uint64_t *moved);
/* Allocates dev's copy without filling it (for outputs). */
ct_status storage_alloc_on(ct_storage *st, struct ct_device *dev);
/* Orders dev's queue (or the host) before a write into dev's copy: after its last
 * write and after reads of it by other devices. */
ct_status storage_order_write(ct_storage *st, struct ct_device *dev);
/* After a write on dev of bytes [lo, hi) (ending at event ev, NULL when done): dev's
 * copy is complete, the others are stale in that range (invalid when it is all). */
void storage_mark_written_at(ct_storage *st, const struct ct_device *dev, struct ct_event *ev, size_t lo, size_t hi);
void storage_mark_written(ct_storage *st, const struct ct_device *dev);
/* Releases dev's copy (after its pending work), e.g. what a failed attempt allocated. */
void storage_drop_copy(ct_storage *st, const struct ct_device *dev);
/* Copies over the host memory (ct_backend_ops.alias) become empty slots, once the host has
 * waited for everything using them: before that memory is freed or replaced. */
void storage_unalias(ct_storage *st);
static inline uint64_t storage_gen(const ct_storage *st) { return __atomic_load_n(&st->gen, __ATOMIC_ACQUIRE); }
/* Copy i holds all the data (valid, no stale range, its device healthy). */
bool storage_copy_complete(const ct_storage *st, int i);
/* Bytes that making dev's copy complete would move: 0, the stale range, or all. */
size_t storage_bytes_to_move(const ct_storage *st, const struct ct_device *dev);
/* An op is (1) or is no longer (-1) using the storage: its copies are not evicted meanwhile. */
void storage_busy(ct_storage *st, int delta);
/* Releases copies on dev that are not needed (invalid, or complete elsewhere too), not
 * busy, until `want` bytes are freed; returns the bytes freed. */
size_t storage_evict(struct ct_device *dev, size_t want);
/* The device holding the storage's data when it is lost with it, else NULL. */
struct ct_device *storage_lost_on(const ct_storage *st);
/* The derived data made for `key` since the last write, or NULL. */
void *storage_derived(const ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY]);
/* Adds (or replaces) the derived data for `key`; it lives until the next write. */
ct_status storage_set_derived(ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY], void *data,
                              void (*free_fn)(void *data));
/* ---- per-device weight layouts (imported at placement: ct_backend_ops.import) ---- */
/* The key of view t's layout on dev (its geometry, dtype and the device). */
void storage_view_key(const ct_tensor *t, const struct ct_device *dev, uint64_t key[STORAGE_DERIVED_KEY]);
/* Like storage_set_derived, for a layout owned by dev holding `bytes` (counted in
 * storage_layout_bytes until it is dropped); when serves_op >= 0 it serves source slot
 * serves_src of that op kind on dev in place of the raw bytes, which are then not copied
 * there for it. Dropped, like all derived data, when the storage is written. */
ct_status storage_set_layout(ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY], void *data,
                             void (*free_fn)(void *data), const struct ct_device *dev, size_t bytes, int serves_op,
                             int serves_src);
/* dev holds a layout of view t that serves source `src` of op kind `op` (op -1: any). */
bool storage_layout_serves(const ct_tensor *t, const struct ct_device *dev, int op, int src);
/* Bytes of layouts dev holds now. */
uint64_t storage_layout_bytes(const struct ct_device *dev);

/* Host pointer of a storage after making the host copy valid: a sync point (the host
 * waits for the copy's last write). storage_host_mut also waits for devices still reading
 * the host copy, before the caller writes it. */
ct_status storage_host(ct_storage *st, void **ptr);
ct_status storage_host_mut(ct_storage *st, void **ptr);
/* Reads bytes [off, off + bytes) of the storage into dst straight from the device that
 * holds them when the host copy holds none of them (one download, after the copy's last
 * write; the host waits for it; no host copy is made). *done false and CT_OK when that
 * does not apply (a valid or partly valid host copy, no complete device copy, nothing to
 * read): the caller reads through storage_host then. */
ct_status storage_read_direct(ct_storage *st, size_t off, void *dst, size_t bytes, bool *done);
/* storage_read_direct without the wait: *ev (NULL when nothing is pending) marks the
 * download; the caller waits for it (event_order(NULL, ev)) before reading dst, keeps dst
 * valid until then, and releases it. dst should be page-locked where the device's download
 * from pageable memory would wait for the queue (CUDA). */
ct_status storage_read_begin(ct_storage *st, size_t off, void *dst, size_t bytes, bool *done, struct ct_event **ev);
/* Replaces all the storage's bytes from the host without reading any device's copy first
 * (ct_tensor_data_mut would: a wait for the device when it wrote last). The other copies
 * go stale; the host waits only for transfers still using its own copy. */
ct_status storage_host_overwrite(ct_storage *st, const void *src, size_t bytes);
/* Observer of every transfer (the executor's statistics). src/dst NULL = host;
 * method is a ct_transfer_method. */
typedef void (*storage_transfer_fn)(const struct ct_device *src, const struct ct_device *dst, uint64_t bytes, int method);
void storage_set_transfer_hook(storage_transfer_fn fn);

/* ---- host memory (core/alloc.c): 64-byte aligned, small sizes cached ---- */
void *host_alloc(size_t bytes);
void host_free(void *p, size_t bytes);
/* host_alloc calls since start (tests count the allocations of a replayed step). */
uint64_t host_alloc_count(void);

/* ---- Philox4x32-10 (core/rng.c) ---- */
/* Four 32-bit words for counter `ctr` under key `seed`. */
void rng_philox(uint64_t seed, uint64_t ctr, uint32_t out[4]);
/* The i-th uniform in [0,1) / standard normal of a seeded stream. */
float rng_uniform(uint64_t seed, uint64_t i);
float rng_normal(uint64_t seed, uint64_t i);

#endif
