/* The contract between the executor and every backend: the op record, the
 * device and the backend function table. Backends include this and core
 * headers only, never each other. */
#ifndef CT_CORE_BACKEND_H
#define CT_CORE_BACKEND_H

#include "core/tensor.h"
#include "ctorch/exec.h"
#include "ctorch/ops.h"

/* X-macro: every op kind with its trace name. Keep grouped; append freely. */
#define CT_OP_LIST(X)                                                                              \
    /* creation / copies */                                                                        \
    X(FILL, "fill") X(ARANGE, "arange") X(EYE, "eye") X(RAND, "rand") X(COPY, "copy")              \
    /* binary (same dtype in, broadcast views) */                                                  \
    X(ADD, "add") X(SUB, "sub") X(MUL, "mul") X(DIV, "div") X(POW, "pow") X(MAXIMUM, "maximum")    \
    X(MINIMUM, "minimum")                                                                          \
    /* tensor OP scalar: p.s.a */                                                                  \
    X(ADD_SCALAR, "add_scalar") X(SUB_SCALAR, "sub_scalar") X(MUL_SCALAR, "mul_scalar")            \
    X(DIV_SCALAR, "div_scalar") X(POW_SCALAR, "pow_scalar")                                        \
    X(CMP, "compare") X(CMP_SCALAR, "compare_scalar") X(WHERE, "where")                            \
    /* unary */                                                                                    \
    X(NEG, "neg") X(ABS, "abs") X(EXP, "exp") X(LOG, "log") X(SQRT, "sqrt") X(RSQRT, "rsqrt")      \
    X(SIN, "sin") X(COS, "cos") X(CLAMP, "clamp") X(RELU, "relu") X(GELU, "gelu") X(SILU, "silu")  \
    X(SIGMOID, "sigmoid") X(TANH, "tanh") X(SOFTMAX, "softmax") X(LOG_SOFTMAX, "log_softmax")      \
    X(SWIGLU, "swiglu") X(GEGLU, "geglu")                                                          \
    /* linear algebra */                                                                           \
    X(MATMUL, "matmul") X(LINEAR, "linear")                                                        \
    /* reductions */                                                                               \
    X(SUM, "sum") X(MEAN, "mean") X(PROD, "prod") X(MAX, "max") X(MIN, "min") X(VAR, "var")        \
    X(STD, "std") X(NORM, "norm") X(ARGMAX, "argmax") X(ARGMIN, "argmin")                          \
    /* neural-network */                                                                           \
    X(CONV2D, "conv2d") X(CONV_TRANSPOSE2D, "conv_transpose2d") X(MAX_POOL2D, "max_pool2d")        \
    X(AVG_POOL2D, "avg_pool2d") X(BATCH_NORM, "batch_norm") X(LAYER_NORM, "layer_norm")            \
    X(RMS_NORM, "rms_norm") X(EMBEDDING, "embedding") X(ROPE, "rope") X(SDPA, "sdpa")              \
    /* complex */                                                                                  \
    X(COMPLEX, "complex") X(REAL, "real") X(IMAG, "imag") X(CONJ, "conj")                          \
    /* distributed */                                                                              \
    X(ALL_REDUCE, "all_reduce")                                                                    \
    /* row writes at indices held in a tensor: src[0] rows, src[1] indices, dst written in place */ \
    X(SET_ROWS, "set_rows")

typedef enum ct_op_kind {
#define CT_OP_ENUM(name, str) CT_OP_##name,
    CT_OP_LIST(CT_OP_ENUM)
#undef CT_OP_ENUM
    CT_OP_COUNT
} ct_op_kind;

const char *op_kind_name(ct_op_kind k);
/* Parses a trace name back; false if unknown. */
bool op_kind_from_name(const char *name, ct_op_kind *k);

#define CT_OP_MAX_SRC 6

/* Per-kind parameters. Which member a kind uses is stated beside it. */
typedef union ct_op_params {
    struct { double a, b; } s;           /* FILL a=value; *_SCALAR a; CLAMP [a,b]; ARANGE start=a step=b;
                                            CMP_SCALAR a; POW_SCALAR a; GELU a!=0 => tanh form */
    struct { ct_cmp cmp; double a; } cmp; /* CMP, CMP_SCALAR */
    struct { int dim; } dim;             /* SOFTMAX, LOG_SOFTMAX (normalized, >= 0) */
    struct {
        uint32_t mask;                   /* bit d set = dim d of src[0] is reduced */
        bool keepdim;                    /* dst shape keeps reduced dims as 1 */
        bool unbiased;                   /* VAR, STD */
        double p;                        /* NORM */
    } red;                               /* SUM..NORM, ARGMAX/ARGMIN (exactly one bit, or all bits = flat) */
    ct_conv2d_params conv;               /* CONV2D, CONV_TRANSPOSE2D (defaults filled in) */
    ct_pool2d_params pool;               /* MAX_POOL2D, AVG_POOL2D (defaults filled in) */
    struct { double eps; int norm_ndim; } norm; /* BATCH_NORM, LAYER_NORM, RMS_NORM */
    ct_rope_params rope;                 /* ROPE */
    struct { bool causal; double scale; int window; } attn; /* SDPA (scale resolved, never 0); src[4],
                                            when present, is the attended length [1] i32/i64 */
    struct { uint64_t seed; bool normal; } rng;  /* RAND */
    struct { ct_reduce_op op; } allreduce;       /* ALL_REDUCE */
} ct_op_params;

/* One operation. Sources are views whose storage the dispatcher has made valid
 * on the chosen device; dst's storage is allocated there (for a fresh output)
 * or made valid there (when writing into an existing view, e.g. COPY). Shapes
 * and dtypes were checked by the frontend; backends may rely on them.
 * Optional sources (bias, mask, weight) are NULL when absent, at fixed slots. */
typedef struct ct_op {
    ct_op_kind kind;
    int n_src;
    const ct_tensor *src[CT_OP_MAX_SRC];
    ct_tensor *dst;
    ct_op_params p;
} ct_op;

struct ct_backend_ops;

typedef struct ct_device {
    const struct ct_backend_ops *ops;
    ct_device_info info;
    int id;      /* index in the executor's device table */
    void *priv;  /* backend state (context, streams, handles) */
    /* Set (atomically) when the device reported an error late, at a sync point: it leaves
     * the chain and its copies are no longer data; cleared by ct_exec_reinit. */
    bool lost;
    char lost_reason[200];
    /* Bit per device id whose events this queue waited for on the device (event_wait) and
     * that no host sync has confirmed since: this queue's later results depend on them. */
    uint32_t waited;
} ct_device;

/* A point in one device's queue: the work submitted there before it was recorded.
 * Storage copies keep the event of their last writer and of readers on other devices,
 * so a consumer waits only for what it reads. Reference-counted (one event is shared
 * by every copy an op or transfer touched). */
typedef struct ct_event {
    ct_device *dev; /* whose queue recorded it */
    void *handle;   /* the backend's (a CUDA event, an OpenCL event) */
    int refcnt;     /* atomic */
    uint32_t deps;  /* dev->waited when recorded: the work it covers read other devices' results */
} ct_event;

typedef struct ct_backend_ops {
    const char *name;           /* "cpu", "cuda", "opencl", "test" */
    ct_device_kind kind;
    /* ct_buffer.ptr is an opaque handle (a cl_mem), not an address: a piece of an allocation
     * (a recorded step's arena) keeps the handle and sets ct_buffer.offset, which the
     * backend adds to every offset it passes its API. */
    bool handle_buffers;
    /* Number of devices; 0 when the driver/library is missing. Never fails hard. */
    int (*device_count)(void);
    /* Fills info (name/kind/index are set by the executor) and may set dev->priv. */
    ct_status (*device_init)(ct_device *dev, int index);
    void (*device_release)(ct_device *dev);
    /* Can this device run op with these dtypes and shapes? Must be cheap and pure. */
    bool (*supports)(const ct_device *dev, const ct_op *op);
    ct_status (*alloc)(ct_device *dev, size_t bytes, ct_buffer *buf);
    void (*release)(ct_device *dev, ct_buffer *buf);
    /* Host <-> device copies of `bytes` at byte offset `off` within buf. */
    ct_status (*upload)(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes);
    ct_status (*download)(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes);
    /* Optional (NULL: transfers between two devices of this backend stage through the
     * host). Copies `bytes` at byte offset `off` from src's buffer to the same place in
     * dst's, both devices of this backend, on dst's queue; CT_ERR_UNSUPPORTED when this
     * pair has no direct path (the caller then stages). */
    ct_status (*copy_peer)(ct_device *dst, ct_buffer *dst_buf, ct_device *src, const ct_buffer *src_buf, size_t off,
                           size_t bytes);
    /* Optional (NULL, or CT_ERR_UNSUPPORTED for this range: a copy of its own is allocated).
     * On a device whose memory is the host's (CT_DEVICE_HOST_SHARED), makes buf a buffer over
     * the host bytes [host, host + bytes) themselves: the device's kernels read and write that
     * memory, with no copy made when it is created, read or written (zero-copy). The storage
     * layer then never uploads or downloads between buf and those bytes, and keeps the host
     * memory alive until release(buf), which must free nothing of it. */
    ct_status (*alias)(ct_device *dev, void *host, size_t bytes, ct_buffer *buf);
    ct_status (*run)(ct_device *dev, const ct_op *op);
    /* Host waits for everything submitted to dev. An error here is a late one: the
     * executor marks the device lost. */
    ct_status (*sync)(ct_device *dev);

    /* Optional: free and total memory of the device, in bytes (the executor evicts copies
     * valid elsewhere when an allocation fails; ct_device_memory reports these). */
    ct_status (*mem_info)(ct_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);

    /* Optional: keep weight t, being placed on dev (ct_tensor_place), in the device's own
     * layout (repacked quant blocks, a transposed copy), made now so no op pays for it later.
     * The backend owns that memory and registers it with storage_set_layout(key from
     * storage_view_key, bytes, and the op/source it serves): the layout is counted in the
     * device's statistics, and when it serves an op's source the raw bytes are not copied to
     * dev for it (nor at placement). CT_OK having kept nothing when the raw bytes serve. */
    ct_status (*import)(ct_device *dev, const ct_tensor *t);

    /* Optional (NULL: this backend reads and writes pageable memory as fast): page-lock the
     * host range [ptr, ptr + bytes) so this backend's transfers to and from it run at full
     * speed (CUDA: cudaHostRegister, portable, so one call covers every device of the
     * backend), and undo it. The executor's pin table (exec/pin.c) calls host_pin once per
     * backend, through one of its devices, and host_unpin through the same device before the
     * user frees the memory or the device is released. host_unpin must not fail on a lost
     * device. A host_pin failure is reported, never fatal: the memory stays usable. */
    ct_status (*host_pin)(ct_device *dev, void *ptr, size_t bytes);
    void (*host_unpin)(ct_device *dev, void *ptr);

    /* ---- Queues and events ----
     * Each device has one in-order queue. run, upload, download, copy_peer and release
     * are submitted to it and may return before the work is done; an error they return
     * is synchronous (the executor retries the op on the next device), one found later
     * comes from event_sync or sync. Host memory passed to upload/download must stay
     * valid until the work is done: the storage layer guarantees it with events.
     * A synchronous device (the CPU: its queue is the caller) sets *handle = NULL in
     * event_record, and is never asked to wait or sync on an event. */
    /* An event after the work submitted to dev so far. */
    ct_status (*event_record)(ct_device *dev, void **handle);
    /* dev's queue waits for an event of another device of this backend (the host does not). */
    ct_status (*event_wait)(ct_device *dev, ct_device *ev_dev, void *handle);
    /* The host waits for an event of dev; a late error surfaces here. */
    ct_status (*event_sync)(ct_device *dev, void *handle);
    void (*event_release)(ct_device *dev, void *handle);

    /* ---- Recorded steps (optional; exec/step.c) ----
     * A run of consecutive ops of a step on this device (the whole step when every op runs
     * here) may be captured natively (a CUDA graph): step_capture gets the ops in order,
     * their operands bound to fixed addresses (the step's arena, the weights, the KV cache,
     * the step's parameter tensors) that stay put until step_release; step_launch submits
     * the whole list to the queue. Before a launch the executor has made every operand the
     * run reads valid on this device and ordered the queue after their writers; after it,
     * one event marks everything the run wrote. Declining (an error) or NULL: the executor
     * replays those ops one by one with `run`. */
    ct_status (*step_capture)(ct_device *dev, const ct_op *ops, int n, void **handle);
    ct_status (*step_launch)(ct_device *dev, void *handle);
    void (*step_release)(ct_device *dev, void *handle);
} ct_backend_ops;

/* Address of a tensor's first element within dev's copy (host-style pointers only:
 * cpu, test, cuda). NULL if the storage has no copy on dev. */
void *op_data(const ct_tensor *t, const ct_device *dev);

/* ---- events and device health (core/event.c) ---- */
/* An event after dev's submitted work, or NULL (*out) when dev is synchronous. */
ct_status event_record(ct_device *dev, ct_event **out);
ct_event *event_retain(ct_event *e);
void event_release(ct_event *e);
/* Makes dev's future work (dev NULL or the CPU: the calling thread) come after e.
 * CT_ERR_DEVICE_LOST when e's device failed (it is then marked lost). */
ct_status event_order(ct_device *dev, ct_event *e);
/* Host waits for everything submitted to dev; a failure marks it lost (CT_ERR_DEVICE_LOST). */
ct_status device_sync(ct_device *dev);
bool device_is_lost(const ct_device *dev);
/* The executor's device table (by id), for events that depend on other devices. */
void device_table_set(ct_device *const *devs, int n);
/* The lost device among the bits of `deps`, or NULL. */
ct_device *device_lost_among(uint32_t deps);
/* Whether any device of the table is lost. */
bool device_any_lost(void);
/* Marks dev lost for the rest of the process (until re-initialization); `why` is kept
 * for the messages of every later access to data that lived only there. */
void device_mark_lost(ct_device *dev, const char *why);
void device_clear_lost(ct_device *dev);
/* CT_ERR_DEVICE_LOST with a message naming dev and why it was lost. */
ct_status device_lost_error(const ct_device *dev, const char *what);

/* Device errors are the ones the dispatcher retries elsewhere. */
static inline bool status_is_device_error(ct_status s)
{
    return s == CT_ERR_DEVICE_OOM || s == CT_ERR_DEVICE_FAULT || s == CT_ERR_UNSUPPORTED;
}

/* dev's copies of host data may be buffers over that data itself (zero-copy). */
static inline bool device_aliases_host(const ct_device *dev)
{
    return dev->ops->alias && (dev->info.flags & CT_DEVICE_HOST_SHARED);
}

#endif
