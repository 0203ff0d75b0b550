/* conv2d and conv_transpose2d through cuDNN's convolution API: f32 on FMA units unless
 * CTORCH_CUDA_TF32=1 allows TF32 (as for the GEMMs), f16 and bf16 on tensor cores with f32
 * accumulation. The transposed conv is cuDNN's backward-data pass of the conv it inverts.
 *
 * Optional twice over: built only where CMake found cudnn.h (CTORCH_HAVE_CUDNN), and the
 * library is opened at run time (CTORCH_CUDNN_LIB, else libcudnn.so.9, else the copy CMake
 * found), so the same binary runs where cuDNN is missing, on im2col + cuBLAS. CTORCH_CUDNN=0
 * keeps that path. The algorithms are cuDNN's ranked choices for the shape, asked once per
 * shape and kept (DNN_CACHE entries): by default cuDNN measures them (each candidate timed
 * once, on the first call of a shape: ONNX Runtime's default search, PyTorch's
 * cudnn.benchmark), CTORCH_CUDNN_FIND=0 takes its heuristics instead (no first-call cost,
 * slower picks: on ANCHORS.md's layer in f32 27 TFLOP/s against 131 measured, H200). The first
 * choice that runs wins, its workspace from the caching allocator; a choice cuDNN rejects at
 * run time (not supported, bad parameters) moves to the next, and none left hands the op
 * back to im2col. Inside a step capture cuDNN is not used (asking for choices may
 * synchronize). */
#include "backends/cuda/nn_conv.h"
#include "backends/cuda/nn_kernels.h"

#ifdef CTORCH_HAVE_CUDNN

#include <cudnn.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define DNN_WS_MAX ((size_t)1 << 30) /* an algorithm wanting more workspace is skipped */
#define DNN_ALGOS 8                  /* ranked choices kept per shape */
#define DNN_CACHE 64                 /* shapes whose choices are kept (then the oldest goes) */

#define DNN_FNS(X)                                                                                              \
    X(cudnnGetVersion) X(cudnnGetErrorString) X(cudnnCreate) X(cudnnDestroy) X(cudnnSetStream)                  \
    X(cudnnCreateTensorDescriptor) X(cudnnSetTensor4dDescriptorEx) X(cudnnDestroyTensorDescriptor)              \
    X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor) X(cudnnDestroyFilterDescriptor)                \
    X(cudnnCreateConvolutionDescriptor) X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount)     \
    X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor)                                         \
    X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnFindConvolutionForwardAlgorithm) X(cudnnConvolutionForward) \
    X(cudnnGetConvolutionBackwardDataAlgorithm_v7) X(cudnnFindConvolutionBackwardDataAlgorithm)                 \
    X(cudnnConvolutionBackwardData)

static struct {
#define DNN_MEMBER(f) __typeof__(f) *f;
    DNN_FNS(DNN_MEMBER)
#undef DNN_MEMBER
} g_dnn;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_loaded;
static int g_mode = -1; /* NN_CUDNN_*, -1 until the environment is read */

static void *dnn_open(void)
{
#ifdef CTORCH_CUDNN_HINT
    const char *hint = CTORCH_CUDNN_HINT;
#else
    const char *hint = NULL;
#endif
    const char *names[] = {getenv("CTORCH_CUDNN_LIB"), "libcudnn.so.9", hint};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = names[i] && *names[i] ? dlopen(names[i], RTLD_NOW | RTLD_LOCAL) : NULL;
        if (h) return h;
    }
    return NULL;
}

static void dnn_load(void)
{
    const char *off = getenv("CTORCH_CUDNN"), *find = getenv("CTORCH_CUDNN_FIND");
    if (g_mode < 0) g_mode = off && off[0] == '0' ? NN_CUDNN_OFF : find && find[0] == '0' ? NN_CUDNN_HEURISTIC : NN_CUDNN_MEASURE;
    if (g_mode == NN_CUDNN_OFF) return; /* not even opened: the switch also steps around a broken install */
    void *h = dnn_open();
    if (!h) {
        core_log(CT_LOG_DEBUG, "cuda: no cuDNN (%s): convolutions through im2col + cuBLAS", dlerror());
        return;
    }
#define DNN_SYM(f)                                                                                             \
    if (!(*(void **)&g_dnn.f = dlsym(h, #f))) {                                                                \
        core_log(CT_LOG_DEBUG, "cuda: cuDNN lacks %s: convolutions through im2col + cuBLAS", #f);              \
        dlclose(h);                                                                                            \
        return;                                                                                                \
    }
    DNN_FNS(DNN_SYM)
#undef DNN_SYM
    size_t v = g_dnn.cudnnGetVersion();
    if (v / 10000 != CUDNN_MAJOR) { /* another major version: another ABI than our headers' */
        core_log(CT_LOG_DEBUG, "cuda: cuDNN %zu found, built against %d.x: not used", v, CUDNN_MAJOR);
        dlclose(h);
        return;
    }
    g_loaded = true;
}

static bool dnn_ready(void)
{
    pthread_once(&g_once, dnn_load);
    return __atomic_load_n(&g_loaded, __ATOMIC_ACQUIRE) && g_mode != NN_CUDNN_OFF;
}

void nn_cudnn_mode(int mode)
{
    pthread_once(&g_once, dnn_load);
    g_mode = mode;
}

size_t nn_cudnn_version(void) { return dnn_ready() ? g_dnn.cudnnGetVersion() : 0; }

void nn_cudnn_release(cuda_dev *d)
{
    if (d->dnn) g_dnn.cudnnDestroy((cudnnHandle_t)d->dnn); /* made with the loaded functions */
    d->dnn = NULL;
}

/* A failure on the device as a status: out of memory for the executor's OOM retry, anything
 * else a device fault (the op is retried on the next device). */
static ct_status dnn_status(cudnnStatus_t st, const ct_device *dev, const ct_op *op)
{
    bool oom = st == CUDNN_STATUS_INTERNAL_ERROR_HOST_ALLOCATION_FAILED ||
               st == CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED;
    return core_err(oom ? CT_ERR_DEVICE_OOM : CT_ERR_DEVICE_FAULT, "%s: cuDNN %s failed: %s", dev->info.name,
                    op_kind_name(op->kind), g_dnn.cudnnGetErrorString(st));
}

/* Rejections that only mean "not this algorithm / not this shape" (cuDNN 9's codes come in
 * families of a thousand: 2xxx bad parameter, 3xxx not supported). */
static bool dnn_declined(cudnnStatus_t st)
{
    return st / 1000 == CUDNN_STATUS_BAD_PARAM / 1000 || st / 1000 == CUDNN_STATUS_NOT_SUPPORTED / 1000;
}

typedef struct dnn_descs {
    cudnnTensorDescriptor_t x, y; /* the op's input and output */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnDataType_t dt;
    bool tensor_ops; /* tensor-core algorithms allowed */
} dnn_descs;

static void descs_free(dnn_descs *d)
{
    if (d->x) g_dnn.cudnnDestroyTensorDescriptor(d->x);
    if (d->y) g_dnn.cudnnDestroyTensorDescriptor(d->y);
    if (d->w) g_dnn.cudnnDestroyFilterDescriptor(d->w);
    if (d->conv) g_dnn.cudnnDestroyConvolutionDescriptor(d->conv);
}

static bool fits_int(const int64_t *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] < 0 || v[i] > INT_MAX) return false;
    return true;
}

static cudnnStatus_t tensor_desc(cudnnTensorDescriptor_t *d, cudnnDataType_t dt, const ct_tensor *t)
{
    cudnnStatus_t st = g_dnn.cudnnCreateTensorDescriptor(d);
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const int64_t *n = t->shape, *s = t->stride;
    return g_dnn.cudnnSetTensor4dDescriptorEx(*d, dt, (int)n[0], (int)n[1], (int)n[2], (int)n[3], (int)s[0], (int)s[1],
                                              (int)s[2], (int)s[3]);
}

/* The descriptors of op; CUDNN_STATUS_NOT_SUPPORTED for what they cannot describe. */
static cudnnStatus_t descs_make(const cuda_dev *cd, const ct_op *op, dnn_descs *d)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *y = op->dst;
    const ct_conv2d_params *p = &op->p.conv;
    for (int i = 0; i < 3; i++) {
        const ct_tensor *t = i == 0 ? x : i == 1 ? w : y;
        if (!fits_int(t->shape, 4) || !fits_int(t->stride, 4)) return CUDNN_STATUS_NOT_SUPPORTED;
    }
    d->dt = y->dtype == CT_F16 ? CUDNN_DATA_HALF : y->dtype == CT_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
    d->tensor_ops = y->dtype != CT_F32 || cd->allow_tf32;
    cudnnStatus_t st = tensor_desc(&d->x, d->dt, x);
    if (st == CUDNN_STATUS_SUCCESS) st = tensor_desc(&d->y, d->dt, y);
    if (st == CUDNN_STATUS_SUCCESS) st = g_dnn.cudnnCreateFilterDescriptor(&d->w);
    /* [O, C/G, kh, kw] for conv2d; for the transposed conv the forward conv it inverts maps
     * the output's O channels to the input's C: the same [C, O/G, kh, kw] as stored */
    if (st == CUDNN_STATUS_SUCCESS)
        st = g_dnn.cudnnSetFilter4dDescriptor(d->w, d->dt, CUDNN_TENSOR_NCHW, (int)w->shape[0], (int)w->shape[1],
                                              (int)w->shape[2], (int)w->shape[3]);
    if (st == CUDNN_STATUS_SUCCESS) st = g_dnn.cudnnCreateConvolutionDescriptor(&d->conv);
    if (st == CUDNN_STATUS_SUCCESS)
        st = g_dnn.cudnnSetConvolution2dDescriptor(d->conv, p->padding[0], p->padding[1], p->stride[0], p->stride[1],
                                                   p->dilation[0], p->dilation[1], CUDNN_CROSS_CORRELATION,
                                                   CUDNN_DATA_FLOAT);
    if (st == CUDNN_STATUS_SUCCESS) st = g_dnn.cudnnSetConvolutionGroupCount(d->conv, p->groups);
    /* the choices asked for are those of this math: tensor cores for half types (and TF32) */
    if (st == CUDNN_STATUS_SUCCESS)
        st = g_dnn.cudnnSetConvolutionMathType(d->conv, d->tensor_ops ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH);
    return st;
}

/* One algorithm's run: forward (conv2d) or backward data (conv_transpose2d), y = conv(x). */
static cudnnStatus_t dnn_exec(const cuda_dev *cd, const ct_op *op, const dnn_descs *d, int algo, void *ws,
                              size_t ws_bytes, const void *x, const void *w, void *y)
{
    const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = cd->dnn;
    if (op->kind == CT_OP_CONV2D)
        return g_dnn.cudnnConvolutionForward(h, &one, d->x, x, d->w, w, d->conv, (cudnnConvolutionFwdAlgo_t)algo, ws,
                                             ws_bytes, &zero, d->y, y);
    return g_dnn.cudnnConvolutionBackwardData(h, &one, d->w, w, d->x, x, d->conv, (cudnnConvolutionBwdDataAlgo_t)algo,
                                              ws, ws_bytes, &zero, d->y, y);
}

/* cuDNN's ranked choices (algorithm, workspace, math type), those with status success. */
typedef struct dnn_choice {
    int algo;
    size_t ws;
    cudnnMathType_t math;
} dnn_choice;

/* What a shape's choices depend on: the op, the dtype, every extent, stride and parameter,
 * the device, and whether tensor cores may serve f32. */
typedef struct dnn_key {
    int64_t v[29];
} dnn_key;

static dnn_key key_of(const cuda_dev *cd, const ct_op *op, bool tensor_ops)
{
    dnn_key k = {{0}};
    const ct_tensor *x = op->src[0], *w = op->src[1], *y = op->dst;
    const ct_conv2d_params *p = &op->p.conv;
    int n = 0;
    k.v[n++] = op->kind, k.v[n++] = y->dtype, k.v[n++] = cd->ordinal, k.v[n++] = tensor_ops, k.v[n++] = g_mode;
    for (int i = 0; i < 4; i++) k.v[n++] = x->shape[i], k.v[n++] = x->stride[i], k.v[n++] = w->shape[i];
    for (int i = 0; i < 2; i++) k.v[n++] = p->stride[i], k.v[n++] = p->padding[i], k.v[n++] = p->dilation[i];
    k.v[n++] = p->groups, k.v[n++] = y->shape[2], k.v[n++] = y->shape[3];
    return k;
}

static struct {
    pthread_mutex_t mu;
    dnn_key key[DNN_CACHE];
    dnn_choice ch[DNN_CACHE][DNN_ALGOS];
    int n_ch[DNN_CACHE], used, next;
} g_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

static bool cache_get(const dnn_key *k, dnn_choice *out, int *n)
{
    bool hit = false;
    pthread_mutex_lock(&g_cache.mu);
    for (int i = 0; i < g_cache.used && !hit; i++)
        if (memcmp(&g_cache.key[i], k, sizeof *k) == 0) {
            *n = g_cache.n_ch[i];
            memcpy(out, g_cache.ch[i], sizeof(dnn_choice) * (size_t)*n);
            hit = true;
        }
    pthread_mutex_unlock(&g_cache.mu);
    return hit;
}

static void cache_put(const dnn_key *k, const dnn_choice *ch, int n)
{
    pthread_mutex_lock(&g_cache.mu);
    int i = g_cache.next;
    g_cache.next = (g_cache.next + 1) % DNN_CACHE;
    if (g_cache.used < DNN_CACHE) g_cache.used++;
    g_cache.key[i] = *k;
    g_cache.n_ch[i] = n;
    memcpy(g_cache.ch[i], ch, sizeof(dnn_choice) * (size_t)n);
    pthread_mutex_unlock(&g_cache.mu);
}

/* Keeps the perf entries cuDNN found usable: a perf array of either pass has the same
 * leading fields, so one macro reads both. */
#define DNN_KEEP(perf, n, out, k)                                                                              \
    for (int i_ = 0; i_ < (n); i_++)                                                                           \
        if ((perf)[i_].status == CUDNN_STATUS_SUCCESS)                                                         \
            (out)[(k)++] = (dnn_choice){(int)(perf)[i_].algo, (perf)[i_].memory, (perf)[i_].mathType};

static int dnn_ask(const cuda_dev *cd, const ct_op *op, const dnn_descs *d, bool measure, dnn_choice *out)
{
    int n = 0, k = 0;
    cudnnStatus_t st;
    if (op->kind == CT_OP_CONV2D) {
        cudnnConvolutionFwdAlgoPerf_t perf[DNN_ALGOS];
        st = measure ? g_dnn.cudnnFindConvolutionForwardAlgorithm(cd->dnn, d->x, d->w, d->conv, d->y, DNN_ALGOS, &n, perf)
                     : g_dnn.cudnnGetConvolutionForwardAlgorithm_v7(cd->dnn, d->x, d->w, d->conv, d->y, DNN_ALGOS, &n,
                                                                     perf);
        if (st == CUDNN_STATUS_SUCCESS) DNN_KEEP(perf, n, out, k);
    } else {
        cudnnConvolutionBwdDataAlgoPerf_t perf[DNN_ALGOS];
        st = measure ? g_dnn.cudnnFindConvolutionBackwardDataAlgorithm(cd->dnn, d->w, d->x, d->conv, d->y, DNN_ALGOS,
                                                                       &n, perf)
                     : g_dnn.cudnnGetConvolutionBackwardDataAlgorithm_v7(cd->dnn, d->w, d->x, d->conv, d->y,
                                                                          DNN_ALGOS, &n, perf);
        if (st == CUDNN_STATUS_SUCCESS) DNN_KEEP(perf, n, out, k);
    }
    return k;
}

/* The shape's choices, from the cache or asked now (then kept). Measuring allocates
 * outside the caching allocator (cuDNN's own buffers): where that fails, the heuristics
 * answer instead, so a full device does not cost the shape cuDNN for good. */
static int dnn_choices(const cuda_dev *cd, const ct_op *op, const dnn_descs *d, dnn_choice *out)
{
    dnn_key key = key_of(cd, op, d->tensor_ops);
    int n = 0;
    if (cache_get(&key, out, &n)) return n;
    if (g_mode == NN_CUDNN_MEASURE) n = dnn_ask(cd, op, d, true, out);
    if (n == 0) {
        cudaGetLastError(); /* a failed allocation inside cuDNN is not sticky */
        n = dnn_ask(cd, op, d, false, out);
    }
    cache_put(&key, out, n);
    return n;
}

/* Tries the choices in order; *done once one ran. Workspace that cannot be had skips a
 * choice. Without tensor cores allowed (f32, no TF32) every choice runs under FMA math:
 * cuDNN's default math lets f32 use TF32. */
static ct_status dnn_try(ct_device *dev, const ct_op *op, const dnn_descs *d, bool *done)
{
    cuda_dev *cd = cuda_of(dev);
    dnn_choice ch[DNN_ALGOS];
    int n = dnn_choices(cd, op, d, ch);
    const void *x = op_data(op->src[0], dev), *w = op_data(op->src[1], dev);
    void *y = op_data(op->dst, dev);
    for (int i = 0; i < n; i++) {
        if (ch[i].ws > DNN_WS_MAX) continue;
        cudnnMathType_t math = d->tensor_ops ? ch[i].math : CUDNN_FMA_MATH;
        if (g_dnn.cudnnSetConvolutionMathType(d->conv, math) != CUDNN_STATUS_SUCCESS) continue;
        void *ws = NULL;
        if (ch[i].ws && cuda_tmp_alloc(dev, ch[i].ws, &ws) != CT_OK) continue;
        cudnnStatus_t st = dnn_exec(cd, op, d, ch[i].algo, ws, ch[i].ws, x, w, y);
        if (ws) cuda_tmp_free(dev, ws, ch[i].ws);
        if (st == CUDNN_STATUS_SUCCESS) {
            *done = true;
            return CT_OK;
        }
        if (!dnn_declined(st)) return dnn_status(st, dev, op);
    }
    return CT_OK;
}

/* The device's handle, made at its first conv. A library that loads but cannot make one
 * (a sub-library missing, a driver it does not take) is left alone from then on, with one
 * warning: convolutions go to im2col rather than failing on this device one by one. */
static bool dnn_handle(ct_device *dev)
{
    cuda_dev *cd = cuda_of(dev);
    if (cd->dnn) return true;
    cudnnHandle_t h = NULL;
    cudnnStatus_t st = g_dnn.cudnnCreate(&h);
    if (st == CUDNN_STATUS_SUCCESS) st = g_dnn.cudnnSetStream(h, cd->stream);
    if (st != CUDNN_STATUS_SUCCESS) {
        if (h) g_dnn.cudnnDestroy(h);
        cudaGetLastError();
        core_log(CT_LOG_WARN, "%s: cuDNN cannot start (%s): convolutions through im2col + cuBLAS", dev->info.name,
                 g_dnn.cudnnGetErrorString(st));
        __atomic_store_n(&g_loaded, false, __ATOMIC_RELEASE);
        return false;
    }
    cd->dnn = h;
    return true;
}

ct_status nn_cudnn_conv(ct_device *dev, const ct_op *op, bool *done)
{
    *done = false;
    cuda_dev *cd = cuda_of(dev);
    if (!dnn_ready() || cd->capturing || !dnn_handle(dev)) return CT_OK;
    ct_status s = CT_OK;
    dnn_descs d = {0};
    if (descs_make(cd, op, &d) == CUDNN_STATUS_SUCCESS) s = dnn_try(dev, op, &d, done);
    descs_free(&d);
    const ct_tensor *b = op->src[2], *y = op->dst;
    if (s == CT_OK && *done && b) {
        cudaError_t e = nn_conv_bias(op_data(y, dev), y->dtype, op_data(b, dev), b->dtype, b->stride[0], y->shape[0],
                                     y->shape[1], y->shape[2] * y->shape[3], cd->stream);
        if (e != cudaSuccess) s = cuda_status(e, dev, "conv bias");
    }
    if (s == CT_OK && *done) s = cuda_check_launch(dev, op_kind_name(op->kind));
    return s;
}

#else /* no cuDNN headers at build time */

ct_status nn_cudnn_conv(ct_device *dev, const ct_op *op, bool *done)
{
    (void)dev, (void)op;
    *done = false;
    return CT_OK;
}
size_t nn_cudnn_version(void) { return 0; }
void nn_cudnn_mode(int mode) { (void)mode; }
void nn_cudnn_release(cuda_dev *d) { (void)d; }

#endif
