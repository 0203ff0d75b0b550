/* The CUDA backend's function table: devices, the stream each has, events, syncs,
 * recorded steps as CUDA graphs, and dispatch of ops to the groups (ew, nn, quant).
 * Memory and copies are in backend_mem.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/backend_priv.h"
#include "backends/cuda/fuse.h"
#include "backends/cuda/nn_conv.h"

/* cuBLAS workspace: fixed up front, so cuBLAS never allocates while a step is captured. */
#define CUDA_BLAS_WS ((size_t)32 << 20)

/* ---- errors ---- */

static bool cuda_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress: case cudaErrorLaunchFailure: case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction: case cudaErrorMisalignedAddress: case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc: case cudaErrorAssert: case cudaErrorECCUncorrectable: case cudaErrorLaunchTimeout:
    case cudaErrorDevicesUnavailable: case cudaErrorContextIsDestroyed:
        return true;
    default:
        return false;
    }
}

ct_status cuda_status(cudaError_t e, const ct_device *dev, const char *what)
{
    if (e == cudaSuccess) return CT_OK;
    const char *name = dev ? dev->info.name : "cuda";
    ct_status s = CT_ERR_DEVICE_FAULT;
    switch (e) {
    case cudaErrorMemoryAllocation: s = CT_ERR_DEVICE_OOM; break;
    case cudaErrorInvalidConfiguration: case cudaErrorLaunchOutOfResources: case cudaErrorNoKernelImageForDevice:
    case cudaErrorInvalidDeviceFunction: case cudaErrorInvalidPitchValue:
        s = CT_ERR_UNSUPPORTED; break;
    default: break;
    }
    s = core_err(s, "%s: %s: %s (%s)", name, what, cudaGetErrorString(e), cudaGetErrorName(e));
    /* a sticky error: the context is broken and every later call fails; the executor keeps
     * the device out from now on, and its data reads as lost */
    if (dev && cuda_sticky(e)) device_mark_lost((ct_device *)dev, ct_last_error());
    return s;
}

ct_status cuda_blas_status(cublasStatus_t st, const ct_device *dev, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS) return CT_OK;
    const char *name = dev ? dev->info.name : "cuda";
    ct_status s = st == CUBLAS_STATUS_ALLOC_FAILED       ? CT_ERR_DEVICE_OOM
                  : st == CUBLAS_STATUS_NOT_SUPPORTED || st == CUBLAS_STATUS_ARCH_MISMATCH ||
                            st == CUBLAS_STATUS_INVALID_VALUE
                      ? CT_ERR_UNSUPPORTED
                      : CT_ERR_DEVICE_FAULT;
    return core_err(s, "%s: %s: %s", name, what, cublasGetStatusString(st));
}

ct_status cuda_check_launch(const ct_device *dev, const char *kernel)
{
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return CT_OK;
    char what[96];
    snprintf(what, sizeof what, "launch of %s", kernel);
    return cuda_status(e, dev, what);
}

static _Thread_local int tl_current = -1;

ct_status cuda_enter(const ct_device *dev)
{
    int o = cuda_of(dev)->ordinal;
    if (tl_current == o) return CT_OK;
    cudaError_t e = cudaSetDevice(o);
    if (e != cudaSuccess) return cuda_status(e, dev, "cudaSetDevice");
    tl_current = o;
    return CT_OK;
}

/* ---- the simulated late fault (CTORCH_CUDA_LATE_FAULT=op[:n]) ---- */

/* Re-arms from the current settings when a new snapshot was published (ct_exec_reinit),
 * which also heals a device broken by the previous one. Caller holds fault_mu. */
static void fault_rearm_locked(cuda_devx *x)
{
    const core_config *c = config_current();
    if (c == x->fault_cfg) return;
    x->fault_cfg = c;
    x->faulted = false;
    x->fault_kind = -1;
    if (!c->cuda_late_fault[0]) return;
    char op[64];
    snprintf(op, sizeof op, "%s", c->cuda_late_fault);
    char *colon = strchr(op, ':');
    long n = 1;
    if (colon) {
        *colon = 0;
        n = strtol(colon + 1, NULL, 10);
    }
    ct_op_kind k;
    if (op_kind_from_name(op, &k)) { /* config.c checked the form */
        x->fault_kind = (int)k;
        x->fault_left = n;
    }
}

/* Counts runs of the n kinds in order; true when one of them is the run that breaks the
 * device (the rest do not count). One lock for a whole step's ops: a lock per op made a
 * decode token's launch (377 ops) 18-20 us of host time on the H100 machine's host, one
 * lock 4-6 us (bench/gpu/step_timeline.py --host, TinyLlama-shaped Q4_K_M). */
static bool fault_hits_any(const ct_device *dev, const ct_op_kind *kinds, int n)
{
    cuda_devx *x = cuda_x(dev);
    pthread_mutex_lock(&x->fault_mu);
    fault_rearm_locked(x);
    bool hit = false;
    for (int i = 0; i < n && !x->faulted && x->fault_kind >= 0 && !hit; i++) {
        if (x->fault_kind != (int)kinds[i] || --x->fault_left != 0) continue;
        x->faulted = true;
        x->fault_kind = -1;
        snprintf(x->fault_msg, sizeof x->fault_msg,
                 "%s: simulated late fault in %s (CTORCH_CUDA_LATE_FAULT): the device stopped working", dev->info.name,
                 op_kind_name(kinds[i]));
        hit = true;
    }
    pthread_mutex_unlock(&x->fault_mu);
    return hit;
}

/* Counts a run of `kind`; true when it is the one that breaks the device. */
static bool fault_hits(const ct_device *dev, ct_op_kind kind) { return fault_hits_any(dev, &kind, 1); }

ct_status cuda_fault_status(const ct_device *dev, const char *what)
{
    cuda_devx *x = cuda_x(dev);
    if (!__atomic_load_n(&x->faulted, __ATOMIC_ACQUIRE)) return CT_OK;
    pthread_mutex_lock(&x->fault_mu);
    fault_rearm_locked(x);
    bool faulted = x->faulted;
    pthread_mutex_unlock(&x->fault_mu);
    if (!faulted) return CT_OK;
    /* as a real sticky error: every call fails from now on, and the device is lost */
    ct_status s = core_err(CT_ERR_DEVICE_FAULT, "%s (at %s)", x->fault_msg, what);
    device_mark_lost((ct_device *)dev, ct_last_error());
    return s;
}

/* ---- devices ---- */

static int cu_device_count(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) { /* no driver, no device, too old a driver */
        cudaGetLastError();
        return 0;
    }
    return n;
}

static void dev_free(cuda_devx *x)
{
    cuda_dev *d = &x->d;
    if (d->stream) cudaStreamSynchronize(d->stream);
    if (d->blas) cublasDestroy(d->blas);
    nn_cudnn_release(d);
    if (x->blas_ws) cudaFree(x->blas_ws);
    if (d->sdpa_count) cudaFree(d->sdpa_count);
    for (int i = 0; i < x->n_ev_pool; i++) cudaEventDestroy(x->ev_pool[i]);
    cuda_alloc_destroy(&x->alloc);
    if (d->stream) cudaStreamDestroy(d->stream);
    pthread_mutex_destroy(&x->ev_mu);
    pthread_mutex_destroy(&x->fault_mu);
    free(x);
}

static ct_status cu_device_init(ct_device *dev, int index)
{
    cuda_devx *x = calloc(1, sizeof *x);
    if (!x) return core_err(CT_ERR_OOM, "cuda:%d: out of host memory", index);
    x->d.ordinal = index;
    x->fault_kind = -1;
    pthread_mutex_init(&x->ev_mu, NULL);
    pthread_mutex_init(&x->fault_mu, NULL);
    cuda_alloc_init(&x->alloc, 0);
    dev->priv = x;
    struct cudaDeviceProp p;
    size_t free_b = 0, total_b = 0;
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_status(cudaGetDeviceProperties(&p, index), dev, "cudaGetDeviceProperties");
    if (s == CT_OK) s = cuda_status(cudaStreamCreateWithFlags(&x->d.stream, cudaStreamNonBlocking), dev, "stream");
    if (s == CT_OK) s = cuda_status(cudaMemGetInfo(&free_b, &total_b), dev, "cudaMemGetInfo");
    if (s == CT_OK) s = cuda_status(cudaMalloc(&x->blas_ws, CUDA_BLAS_WS), dev, "cuBLAS workspace");
    if (s == CT_OK)
        s = cuda_status(cudaMalloc((void **)&x->d.sdpa_count, sizeof(unsigned) * CUDA_SDPA_COUNTERS), dev,
                        "attention merge counters");
    if (s == CT_OK)
        s = cuda_status(cudaMemset(x->d.sdpa_count, 0, sizeof(unsigned) * CUDA_SDPA_COUNTERS), dev,
                        "zeroing the attention merge counters");
    if (s == CT_OK) s = cuda_blas_status(cublasCreate(&x->d.blas), dev, "cublasCreate");
    if (s == CT_OK) s = cuda_blas_status(cublasSetStream(x->d.blas, x->d.stream), dev, "cublasSetStream");
    if (s == CT_OK)
        s = cuda_blas_status(cublasSetWorkspace(x->d.blas, x->blas_ws, CUDA_BLAS_WS), dev, "cublasSetWorkspace");
    if (s != CT_OK) {
        cudaGetLastError();
        dev->priv = NULL;
        dev_free(x);
        return s;
    }
    const core_config *c = config_current();
    x->d.sm_count = p.multiProcessorCount;
    x->d.cc_major = p.major;
    x->d.cc_minor = p.minor;
    x->d.smem_optin = p.sharedMemPerBlockOptin;
    x->d.allow_tf32 = c->cuda_tf32;
    /* the cap: what the user says, else 90% of what is free now (the driver, other
     * processes and cuBLAS need the rest) */
    x->alloc.default_cap = free_b / 10 * 9;
    x->alloc.cap = c->cuda_mem_bytes ? c->cuda_mem_bytes : x->alloc.default_cap;
    x->alloc.cfg = c;
    dev->info.memory_bytes = total_b;
    dev->info.dtype_mask = (1u << CT_F32) | (1u << CT_F64) | (1u << CT_F16) | (1u << CT_BF16) | (1u << CT_I32) |
                           (1u << CT_I64) | (1u << CT_BOOL) | (1u << CT_I8) | (1u << CT_C64);
    size_t dnn = nn_cudnn_version();
    char dnn_s[32] = ", no cuDNN";
    if (dnn) snprintf(dnn_s, sizeof dnn_s, ", cuDNN %zu.%zu", dnn / 10000, dnn / 100 % 100);
    snprintf(dev->info.description, sizeof dev->info.description, "%.60s, %.1f GiB, cc %d.%d, %d SMs%s", p.name,
             (double)total_b / (1u << 30), p.major, p.minor, p.multiProcessorCount, dnn_s);
    return CT_OK;
}

static void cu_device_release(ct_device *dev)
{
    cuda_devx *x = cuda_x(dev);
    if (!x) return;
    cuda_enter(dev);
    dev_free(x);
    dev->priv = NULL;
}

/* ---- ops: the quant group takes every op with a block-quantized operand ---- */

static bool op_quantized(const ct_op *op)
{
    if (ct_dtype_is_quantized(op->dst->dtype)) return true;
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && ct_dtype_is_quantized(op->src[i]->dtype)) return true;
    return false;
}

typedef enum { GROUP_NONE, GROUP_EW, GROUP_NN, GROUP_QUANT } cuda_group;

static cuda_group group_of(const ct_op *op)
{
    if (op_quantized(op)) return GROUP_QUANT;
    switch (op->kind) {
    case CT_OP_SOFTMAX: case CT_OP_LOG_SOFTMAX: case CT_OP_MATMUL: case CT_OP_LINEAR: case CT_OP_CONV2D:
    case CT_OP_CONV_TRANSPOSE2D: case CT_OP_MAX_POOL2D: case CT_OP_AVG_POOL2D: case CT_OP_BATCH_NORM:
    case CT_OP_LAYER_NORM: case CT_OP_RMS_NORM: case CT_OP_EMBEDDING: case CT_OP_ROPE: case CT_OP_SDPA:
    case CT_OP_SET_ROWS:
        return GROUP_NN;
    case CT_OP_ALL_REDUCE: case CT_OP_COUNT:
        return GROUP_NONE;
    default:
        return GROUP_EW;
    }
}

static bool cu_supports(const ct_device *dev, const ct_op *op)
{
    switch (group_of(op)) {
    case GROUP_EW: return cuda_ew_supports(dev, op);
    case GROUP_NN: return cuda_nn_supports(dev, op);
    case GROUP_QUANT: return cuda_quant_supports(dev, op);
    default: return false;
    }
}

static ct_status run_group(ct_device *dev, const ct_op *op)
{
    switch (group_of(op)) {
    case GROUP_EW: return cuda_ew_run(dev, op);
    case GROUP_NN: return cuda_nn_run(dev, op);
    case GROUP_QUANT: return cuda_quant_run(dev, op);
    default: return core_err(CT_ERR_UNSUPPORTED, "%s: no kernel for %s", dev->info.name, op_kind_name(op->kind));
    }
}

static ct_status cu_run(ct_device *dev, const ct_op *op)
{
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_fault_status(dev, op_kind_name(op->kind));
    if (s != CT_OK) return s;
    /* the op that "breaks" the device does not run: its output stays garbage, as after
     * an illegal address; the error shows at the next sync */
    if (!cuda_of(dev)->capturing && fault_hits(dev, op->kind)) return CT_OK;
    return run_group(dev, op);
}

static ct_status cu_import(ct_device *dev, const ct_tensor *t)
{
    if (!ct_dtype_is_quantized(t->dtype)) return CT_OK; /* the raw bytes serve */
    ct_status s = cuda_enter(dev);
    return s == CT_OK ? cuda_quant_import(dev, t) : s;
}

/* ---- events and syncs ---- */

static ct_status cu_event_record(ct_device *dev, void **handle)
{
    cuda_devx *x = cuda_x(dev);
    *handle = NULL;
    ct_status s = cuda_enter(dev);
    if (s != CT_OK) return s;
    cudaEvent_t ev = NULL;
    pthread_mutex_lock(&x->ev_mu);
    if (x->n_ev_pool) ev = x->ev_pool[--x->n_ev_pool];
    pthread_mutex_unlock(&x->ev_mu);
    cudaError_t e = ev ? cudaSuccess : cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e == cudaSuccess) e = cudaEventRecord(ev, x->d.stream);
    if (e != cudaSuccess) {
        if (ev) cudaEventDestroy(ev);
        return cuda_status(e, dev, "cudaEventRecord");
    }
    *handle = ev;
    return CT_OK;
}

static ct_status cu_event_wait(ct_device *dev, ct_device *ev_dev, void *handle)
{
    (void)ev_dev;
    ct_status s = cuda_enter(dev);
    if (s != CT_OK) return s;
    return cuda_status(cudaStreamWaitEvent(cuda_of(dev)->stream, (cudaEvent_t)handle, 0), dev, "cudaStreamWaitEvent");
}

static ct_status cu_event_sync(ct_device *dev, void *handle)
{
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_status(cudaEventSynchronize((cudaEvent_t)handle), dev, "cudaEventSynchronize");
    if (s == CT_OK) s = cuda_fault_status(dev, "a sync");
    return s == CT_OK || s == CT_ERR_DEVICE_FAULT ? s : core_err(CT_ERR_DEVICE_FAULT, "%s", ct_last_error());
}

static void cu_event_release(ct_device *dev, void *handle)
{
    cuda_devx *x = cuda_x(dev);
    if (!handle) return;
    pthread_mutex_lock(&x->ev_mu);
    bool kept = x->n_ev_pool < CUDA_EVENT_POOL;
    if (kept) x->ev_pool[x->n_ev_pool++] = (cudaEvent_t)handle;
    pthread_mutex_unlock(&x->ev_mu);
    if (!kept) cudaEventDestroy((cudaEvent_t)handle);
}

/* Any error here is late (an earlier kernel failed): the executor marks the device lost. */
static ct_status cu_sync(ct_device *dev)
{
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_status(cudaStreamSynchronize(cuda_of(dev)->stream), dev, "cudaStreamSynchronize");
    if (s == CT_OK) s = cuda_fault_status(dev, "a sync");
    return s == CT_OK || s == CT_ERR_DEVICE_FAULT ? s : core_err(CT_ERR_DEVICE_FAULT, "%s", ct_last_error());
}

/* ---- recorded steps as CUDA graphs ---- */

static void graph_free(ct_device *dev, cuda_graph *g)
{
    if (!g) return;
    if (g->exec) cudaGraphExecDestroy(g->exec);
    for (int i = 0; i < g->n_tmps; i++) cuda_block_put(dev, g->tmps[i].ptr, g->tmps[i].bytes);
    free(g->tmps);
    free(g->kinds);
    free(g);
}

/* Stream capture of the ops' own run calls, with the groups the step planner matches
 * launched fused (fuse.c): every kernel, cuBLAS call and temporary of the step becomes
 * one graph, launched later with one call. */
static ct_status cu_step_capture(ct_device *dev, const ct_op *ops, int n, void **handle)
{
    *handle = NULL;
    ct_status s = cuda_enter(dev);
    if (s != CT_OK) return s;
    cuda_devx *x = cuda_x(dev);
    cuda_graph *g = calloc(1, sizeof *g);
    if (g) g->kinds = malloc(sizeof *g->kinds * (size_t)(n ? n : 1));
    if (!g || !g->kinds) {
        if (g) free(g);
        return core_err(CT_ERR_OOM, "%s: out of host memory capturing a step", dev->info.name);
    }
    g->n_ops = n;
    for (int i = 0; i < n; i++) g->kinds[i] = ops[i].kind;
    cudaGraph_t graph = NULL;
    s = cuda_status(cudaStreamBeginCapture(x->d.stream, cudaStreamCaptureModeRelaxed), dev, "begin capture");
    if (s == CT_OK) {
        x->d.capturing = true;
        x->capture = g;
        s = cuda_fuse_run(dev, ops, n, run_group);
        x->capture = NULL;
        x->d.capturing = false;
        ct_status e = cuda_status(cudaStreamEndCapture(x->d.stream, &graph), dev, "end capture");
        if (s == CT_OK) s = e;
    }
    size_t nodes = 0;
    if (s == CT_OK && cudaGraphGetNodes(graph, NULL, &nodes) == cudaSuccess)
        core_note("%s: step: %d ops captured as %zu graph nodes", dev->info.name, n, nodes);
    if (s == CT_OK) s = cuda_status(cudaGraphInstantiate(&g->exec, graph, 0), dev, "cudaGraphInstantiate");
    if (graph) cudaGraphDestroy(graph);
    if (s != CT_OK) {
        cudaGetLastError();
        /* a graph that never ran: its temporaries are free for anyone */
        graph_free(dev, g);
        return s == CT_ERR_DEVICE_FAULT ? core_err(CT_ERR_UNSUPPORTED, "%s", ct_last_error()) : s;
    }
    *handle = g;
    return CT_OK;
}

static ct_status cu_step_launch(ct_device *dev, void *handle)
{
    cuda_graph *g = handle;
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_fault_status(dev, "a step launch");
    if (s != CT_OK) return s;
    if (fault_hits_any(dev, g->kinds, g->n_ops)) return CT_OK; /* the launch "ran" and broke the device */
    return cuda_status(cudaGraphLaunch(g->exec, cuda_of(dev)->stream), dev, "cudaGraphLaunch");
}

static void cu_step_release(ct_device *dev, void *handle)
{
    if (!handle) return;
    cuda_enter(dev);
    cudaStreamSynchronize(cuda_of(dev)->stream); /* a launch in flight still uses the temporaries */
    graph_free(dev, handle);
}

const ct_backend_ops cuda_backend_ops = {
    .name = "cuda",
    .kind = CT_DEVICE_CUDA,
    .device_count = cu_device_count,
    .device_init = cu_device_init,
    .device_release = cu_device_release,
    .supports = cu_supports,
    .alloc = cuda_mem_alloc,
    .release = cuda_mem_release,
    .upload = cuda_mem_upload,
    .download = cuda_mem_download,
    .run = cu_run,
    .sync = cu_sync,
    .mem_info = cuda_mem_info,
    .import = cu_import,
    .host_pin = cuda_mem_host_pin,
    .host_unpin = cuda_mem_host_unpin,
    .event_record = cu_event_record,
    .event_wait = cu_event_wait,
    .event_sync = cu_event_sync,
    .event_release = cu_event_release,
    .step_capture = cu_step_capture,
    .step_launch = cu_step_launch,
    .step_release = cu_step_release,
};
