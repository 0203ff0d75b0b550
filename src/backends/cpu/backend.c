/* The CPU backend's function table. Host memory is the CPU's memory, so the
 * storage layer owns allocation; run() dispatches to the kernel groups. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"

static int cpu_device_count(void) { return 1; }

static ct_status cpu_device_init(ct_device *dev, int index)
{
    (void)index;
    cpu_simd_reread();
    long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    dev->info.memory_bytes = pages > 0 && psize > 0 ? (uint64_t)pages * (uint64_t)psize : 0;
    static const char *simd[] = {"portable", "AVX2", "AVX-512"};
    snprintf(dev->info.description, sizeof dev->info.description, "host CPU, %d threads, %s kernels",
             cpu_num_threads(), simd[cpu_simd_level()]);
    dev->info.dtype_mask = 0;
    for (int t = 0; t < CT_DTYPE_COUNT; t++) dev->info.dtype_mask |= 1u << t;
    dev->info.flags = CT_DEVICE_HOST_SHARED;
    return CT_OK;
}

/* Quantized operands are weights: ops that read them row by row (dequantizing copy,
 * embedding lookup, quantized matmul/linear) take them, element-wise ops do not. */
static bool cpu_quantized_ok(ct_op_kind k, int slot)
{
    switch (k) {
    case CT_OP_COPY: case CT_OP_EMBEDDING: case CT_OP_MATMUL: return slot == 0;
    case CT_OP_LINEAR: return slot == 1;
    default: return false;
    }
}

/* The CPU is the chain's last resort: it accepts every op the frontends accept. */
static bool cpu_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && ct_dtype_is_quantized(op->src[i]->dtype) && !cpu_quantized_ok(op->kind, i)) return false;
    return op->kind == CT_OP_COPY || !ct_dtype_is_quantized(op->dst->dtype);
}

static ct_status cpu_alloc(ct_device *dev, size_t bytes, ct_buffer *buf)
{
    (void)dev;
    buf->ptr = host_alloc(bytes);
    buf->size = bytes;
    return buf->ptr ? CT_OK : core_err(CT_ERR_OOM, "cpu: allocation of %zu bytes failed", bytes);
}

static void cpu_release(ct_device *dev, ct_buffer *buf)
{
    (void)dev;
    host_free(buf->ptr, buf->size);
    buf->ptr = NULL;
}

static ct_status cpu_upload(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes)
{
    (void)dev;
    memcpy((char *)buf->ptr + off, host, bytes);
    return CT_OK;
}

static ct_status cpu_download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes)
{
    (void)dev;
    memcpy(host, (const char *)buf->ptr + off, bytes);
    return CT_OK;
}

static ct_status cpu_run(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_FILL: case CT_OP_ARANGE: case CT_OP_EYE: case CT_OP_RAND:
        return cpu_run_create(dev, op);
    case CT_OP_COPY:
        return cpu_run_copy(dev, op);
    case CT_OP_SET_ROWS:
        return cpu_run_set_rows(dev, op);
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_DIV: case CT_OP_POW: case CT_OP_MAXIMUM:
    case CT_OP_MINIMUM: case CT_OP_ADD_SCALAR: case CT_OP_SUB_SCALAR: case CT_OP_MUL_SCALAR:
    case CT_OP_DIV_SCALAR: case CT_OP_POW_SCALAR: case CT_OP_CMP: case CT_OP_CMP_SCALAR: case CT_OP_WHERE:
        return cpu_run_binary(dev, op);
    case CT_OP_NEG: case CT_OP_ABS: case CT_OP_EXP: case CT_OP_LOG: case CT_OP_SQRT: case CT_OP_RSQRT:
    case CT_OP_SIN: case CT_OP_COS: case CT_OP_CLAMP: case CT_OP_RELU: case CT_OP_GELU: case CT_OP_SILU:
    case CT_OP_SIGMOID: case CT_OP_TANH: case CT_OP_SWIGLU: case CT_OP_GEGLU:
        return cpu_run_unary(dev, op);
    case CT_OP_SOFTMAX: case CT_OP_LOG_SOFTMAX:
        return cpu_run_softmax(dev, op);
    case CT_OP_COMPLEX: case CT_OP_REAL: case CT_OP_IMAG: case CT_OP_CONJ:
        return cpu_run_complex(dev, op);
    case CT_OP_MATMUL:
        return cpu_run_matmul(dev, op);
    case CT_OP_LINEAR:
        return cpu_run_linear(dev, op);
    case CT_OP_SUM: case CT_OP_MEAN: case CT_OP_PROD: case CT_OP_MAX: case CT_OP_MIN: case CT_OP_VAR:
    case CT_OP_STD: case CT_OP_NORM: case CT_OP_ARGMAX: case CT_OP_ARGMIN:
        return cpu_run_reduce(dev, op);
    case CT_OP_CONV2D: case CT_OP_CONV_TRANSPOSE2D: case CT_OP_MAX_POOL2D: case CT_OP_AVG_POOL2D:
    case CT_OP_BATCH_NORM: case CT_OP_LAYER_NORM: case CT_OP_RMS_NORM: case CT_OP_EMBEDDING:
        return cpu_run_nn(dev, op);
    case CT_OP_ROPE: case CT_OP_SDPA:
        return cpu_run_attention(dev, op);
    case CT_OP_ALL_REDUCE:
        return CT_OK; /* single process: the tensor stays as it is */
    case CT_OP_COUNT:
        break;
    }
    return core_err(CT_ERR_UNSUPPORTED, "cpu: op %s has no kernel", op_kind_name(op->kind));
}

static void cpu_device_release(ct_device *dev)
{
    (void)dev;
    cpu_pool_shutdown();
}

static ct_status cpu_sync(ct_device *dev)
{
    (void)dev;
    return CT_OK;
}

static ct_status cpu_mem_info(ct_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    long avail = sysconf(_SC_AVPHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
    *total_bytes = dev->info.memory_bytes;
    *free_bytes = avail > 0 && psize > 0 ? (uint64_t)avail * (uint64_t)psize : 0;
    return CT_OK;
}

/* The CPU's queue is the caller: its work is done when run returns, so it has no
 * events (NULL), and never needs to wait for one. */
static ct_status cpu_event_record(ct_device *dev, void **handle)
{
    (void)dev;
    *handle = NULL;
    return CT_OK;
}

static ct_status cpu_event_wait(ct_device *dev, ct_device *ev_dev, void *handle)
{
    (void)dev, (void)ev_dev, (void)handle;
    return CT_OK;
}

static ct_status cpu_event_sync(ct_device *dev, void *handle)
{
    (void)dev, (void)handle;
    return CT_OK;
}

static void cpu_event_release(ct_device *dev, void *handle) { (void)dev, (void)handle; }

const ct_backend_ops cpu_backend_ops = {
    .name = "cpu",
    .kind = CT_DEVICE_CPU,
    .device_count = cpu_device_count,
    .device_init = cpu_device_init,
    .device_release = cpu_device_release,
    .supports = cpu_supports,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .upload = cpu_upload,
    .download = cpu_download,
    .run = cpu_run,
    .sync = cpu_sync,
    .mem_info = cpu_mem_info,
    .import = cpu_linear_import,
    .event_record = cpu_event_record,
    .event_wait = cpu_event_wait,
    .event_sync = cpu_event_sync,
    .event_release = cpu_event_release,
};
