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
    X(ALL_REDUCE, "all_reduce")

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
    struct { bool causal; double scale; int window; } attn; /* SDPA (scale resolved, never 0) */
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
} ct_device;

typedef struct ct_backend_ops {
    const char *name;           /* "cpu", "cuda", "opencl", "test" */
    ct_device_kind kind;
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
     * host). Copies `bytes` from src's buffer to dst's, both devices of this backend;
     * CT_ERR_UNSUPPORTED when this pair has no direct path (the caller then stages). */
    ct_status (*copy_peer)(ct_device *dst, ct_buffer *dst_buf, ct_device *src, const ct_buffer *src_buf, size_t bytes);
    ct_status (*run)(ct_device *dev, const ct_op *op);
    ct_status (*sync)(ct_device *dev);
} ct_backend_ops;

/* Address of a tensor's first element within dev's copy (host-style pointers only:
 * cpu, test, cuda). NULL if the storage has no copy on dev. */
void *op_data(const ct_tensor *t, const ct_device *dev);

/* Device errors are the ones the dispatcher retries elsewhere. */
static inline bool status_is_device_error(ct_status s)
{
    return s == CT_ERR_DEVICE_OOM || s == CT_ERR_DEVICE_FAULT || s == CT_ERR_UNSUPPORTED;
}

#endif
