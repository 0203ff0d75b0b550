#include "test_backend.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "exec/exec.h"
#include "test_queue.h"

#define TB_MAX 4
#define TB_LOG 512
static int g_n;
static bool g_async;
static bool g_ops[CT_OP_COUNT];
static int g_runs[TB_MAX][CT_OP_COUNT];
static uint64_t g_up[TB_MAX], g_down[TB_MAX];
static int g_fail_allocs[TB_MAX];
static int g_alloc_ok_first[TB_MAX]; /* allocations that succeed before g_fail_allocs apply */
static bool g_peer;
static uint32_t g_shared;            /* devices whose memory is the host's (bit per device) */
static int g_aliases[TB_MAX];        /* buffers made over host memory (alias) since install */
static char g_alias_mark;            /* ct_buffer.priv of such a buffer */
static uint64_t g_peer_bytes[TB_MAX];
static unsigned g_delay_us[TB_MAX];
static int g_fail_late[TB_MAX];      /* runs left before a late fault; -1: none */
static int g_live_buffers[TB_MAX];   /* allocated and not yet released (by the worker, when async) */
static uint64_t g_capacity[TB_MAX];  /* bytes the device has (0: 1 GiB) */
static uint64_t g_used[TB_MAX];      /* bytes allocated and not released (as the host sees it) */
static int g_imports[TB_MAX];        /* weights imported into the device's layout */
static bool g_import;                /* import placed f32 weights (off after install) */
static int g_pinned[TB_MAX];         /* host ranges pinned through device i and not unpinned */
static int g_pin_calls[TB_MAX];      /* host_pin calls through device i since install */
static int g_fail_pins;              /* host_pin calls left to refuse */
static struct {
    int kind, after, n; /* kind -1: none */
    ct_status err;
} g_refuse[TB_MAX];                  /* runs refused at submission (test_backend_refuse_runs) */

/* Worker-side state of each simulated device. */
typedef struct tb_dev {
    int index;
    char name[32];
    tq *q;         /* NULL: synchronous device */
    bool faulted;  /* sticky, like a CUDA context after an illegal address */
    char fault_msg[160];
} tb_dev;

static pthread_mutex_t g_log_mu = PTHREAD_MUTEX_INITIALIZER;
static test_backend_log_entry g_log[TB_LOG];
static int g_n_log;

/* Enough parts to decompose the fused ops a GPU may lack (norms, softmax, gated units,
 * attention): exec/test_decompose.c. */
static const ct_op_kind kernels[] = {CT_OP_ADD, CT_OP_SUB, CT_OP_MUL, CT_OP_DIV, CT_OP_RELU, CT_OP_MATMUL, CT_OP_COPY,
                                     CT_OP_FILL, CT_OP_SUM, CT_OP_MEAN, CT_OP_MAX, CT_OP_EXP, CT_OP_LOG, CT_OP_RSQRT,
                                     CT_OP_SILU, CT_OP_GELU, CT_OP_ADD_SCALAR, CT_OP_MUL_SCALAR, CT_OP_LINEAR,
                                     CT_OP_ARGMAX, CT_OP_EMBEDDING};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static bool has_kernel(ct_op_kind k)
{
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i] == k) return true;
    return false;
}

/* ---- commands: everything a kernel needs is captured when it is submitted, since
 * the tensors may be gone by the time the worker runs it ---- */

typedef struct tb_view {
    float *p; /* first element */
    int ndim;
    int64_t shape[CT_MAX_DIMS], stride[CT_MAX_DIMS];
} tb_view;

typedef struct tb_cmd {
    enum { CMD_RUN, CMD_COPY, CMD_RELEASE, CMD_SIGNAL, CMD_WAIT } type;
    tb_dev *dev;
    /* CMD_RUN */
    ct_op_kind kind;
    tb_view src[3], dst;
    int n_src;
    const float *wt; /* LINEAR: the weight in the device's layout (transposed, [K, N]), or NULL */
    bool int_copy;   /* COPY from i64 to i32 */
    double a;
    uint32_t red_mask; /* reductions: dims of src[0] reduced */
    /* CMD_COPY (upload, download, peer) / CMD_RELEASE */
    void *to;
    const void *from;
    size_t bytes;
    /* CMD_SIGNAL / CMD_WAIT */
    tq_event *ev;
} tb_cmd;

static tb_view view_of(const ct_tensor *t, const ct_device *dev)
{
    tb_view v = {.p = op_data(t, dev), .ndim = t->ndim};
    memcpy(v.shape, t->shape, sizeof v.shape);
    memcpy(v.stride, t->stride, sizeof v.stride);
    return v;
}

static int64_t numel(const tb_view *v)
{
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}

/* Element of v at the flat index i of shape (ndim, shape), v broadcast to it. */
static float at(const tb_view *v, int ndim, const int64_t *shape, int64_t i)
{
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t idx = i % shape[d];
        i /= shape[d];
        int vd = d - (ndim - v->ndim);
        if (vd >= 0 && v->shape[vd] != 1) off += idx * v->stride[vd];
    }
    return v->p[off];
}

static float *dst_at(const tb_view *v, int64_t i)
{
    int64_t off = 0;
    for (int d = v->ndim - 1; d >= 0; d--) {
        off += (i % v->shape[d]) * v->stride[d];
        i /= v->shape[d];
    }
    return v->p + off;
}

static void kernel_matmul(const tb_cmd *c)
{
    /* batch dims already broadcast by the frontend: a [..., M, K], b [..., K, N] */
    const tb_view *a = &c->src[0], *b = &c->src[1], *d = &c->dst;
    int64_t n = numel(d), M = d->shape[d->ndim - 2], N = d->shape[d->ndim - 1], K = a->shape[a->ndim - 1];
    int64_t mn = M * N, batch = mn > 0 ? n / mn : 0;
    for (int64_t bi = 0; bi < batch; bi++)
        for (int64_t m = 0; m < M; m++)
            for (int64_t j = 0; j < N; j++) {
                double acc = 0;
                for (int64_t k = 0; k < K; k++) {
                    int64_t ia = (bi * M + m) * K + k, ib = (bi * K + k) * N + j;
                    acc += (double)at(a, a->ndim, a->shape, ia) * at(b, b->ndim, b->shape, ib);
                }
                *dst_at(d, (bi * M + m) * N + j) = (float)acc;
            }
}

/* SUM, MEAN, MAX over the dims in red_mask (keepdim or not: dst's shape tells). */
static void kernel_reduce(const tb_cmd *c)
{
    const tb_view *s = &c->src[0], *d = &c->dst;
    int64_t nd = numel(d), ns = numel(s);
    double *acc = malloc((size_t)(nd ? nd : 1) * sizeof *acc);
    if (!acc) return; /* the output stays NaN-poisoned: a test sees it */
    for (int64_t j = 0; j < nd; j++) acc[j] = c->kind == CT_OP_MAX ? -INFINITY : 0.0;
    for (int64_t i = 0; i < ns; i++) {
        int64_t rem = i, j = 0, mul = 1; /* j: dst's flat index; a reduced dim adds nothing, kept or not */
        for (int dm = s->ndim - 1; dm >= 0; dm--) {
            int64_t idx = rem % s->shape[dm];
            rem /= s->shape[dm];
            if ((c->red_mask >> dm) & 1u) continue;
            j += idx * mul;
            mul *= s->shape[dm];
        }
        double v = at(s, s->ndim, s->shape, i);
        if (c->kind == CT_OP_MAX) acc[j] = v > acc[j] ? v : acc[j];
        else acc[j] += v;
    }
    double per = nd ? (double)ns / (double)nd : 1;
    for (int64_t j = 0; j < nd; j++) *dst_at(d, j) = (float)(c->kind == CT_OP_MEAN ? acc[j] / per : acc[j]);
    free(acc);
}

static float unary(ct_op_kind k, float x, double a)
{
    switch (k) {
    case CT_OP_RELU: return x < 0 ? 0.0f : x;
    case CT_OP_EXP: return expf(x);
    case CT_OP_LOG: return logf(x);
    case CT_OP_RSQRT: return 1.0f / sqrtf(x);
    case CT_OP_SILU: return x / (1.0f + expf(-x));
    case CT_OP_GELU:
        if (a != 0) return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
        return 0.5f * x * (1.0f + erff(x * 0.70710678f));
    case CT_OP_ADD_SCALAR: return (float)(x + a);
    case CT_OP_MUL_SCALAR: return (float)(x * a);
    default: return x; /* COPY */
    }
}

/* y = x w^T + b over rows of x; w read from the imported layout when there is one. */
static void kernel_linear(const tb_cmd *c)
{
    const tb_view *x = &c->src[0], *w = &c->src[1], *d = &c->dst;
    int64_t K = x->shape[x->ndim - 1], N = d->shape[d->ndim - 1], M = N ? numel(d) / N : 0;
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < N; n++) {
            double acc = 0;
            for (int64_t k = 0; k < K; k++) {
                float wv = c->wt ? c->wt[k * N + n] : w->p[n * w->stride[0] + k * w->stride[1]];
                acc += (double)at(x, x->ndim, x->shape, m * K + k) * wv;
            }
            if (c->n_src > 2 && c->src[2].p) acc += c->src[2].p[n * c->src[2].stride[0]];
            *dst_at(d, m * N + n) = (float)acc;
        }
}

/* ARGMAX over the last dim of a contiguous f32 src into i64 (the lowest index of the
 * greatest value; NaN never greater). */
static void kernel_argmax(const tb_cmd *c)
{
    const tb_view *s = &c->src[0];
    int64_t N = s->shape[s->ndim - 1], rows = N ? numel(s) / N : 0;
    int64_t *d = (int64_t *)(void *)c->dst.p;
    for (int64_t r = 0; r < rows; r++) {
        const float *x = s->p + r * N;
        int64_t best = 0;
        for (int64_t j = 1; j < N; j++)
            if (x[j] > x[best]) best = j;
        d[r] = best;
    }
}

/* EMBEDDING: rows of a contiguous f32 table [V, E] picked by contiguous i32 ids. */
static void kernel_embedding(const tb_cmd *c)
{
    const tb_view *t = &c->src[0], *ids = &c->src[1];
    int64_t V = t->shape[0], E = t->shape[1], n = numel(ids);
    const int32_t *id = (const int32_t *)(const void *)ids->p;
    for (int64_t i = 0; i < n; i++)
        for (int64_t e = 0; e < E; e++) c->dst.p[i * E + e] = id[i] >= 0 && id[i] < V ? t->p[id[i] * E + e] : NAN;
}

static void kernel(const tb_cmd *c)
{
    if (c->kind == CT_OP_COPY && c->int_copy) { /* i64 -> i32, contiguous */
        for (int64_t i = 0; i < numel(&c->dst); i++)
            ((int32_t *)(void *)c->dst.p)[i] = (int32_t)((const int64_t *)(const void *)c->src[0].p)[i];
        return;
    }
    const tb_view *d = &c->dst;
    int64_t n = numel(d);
    switch (c->kind) {
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_DIV:
        for (int64_t i = 0; i < n; i++) {
            float a = at(&c->src[0], d->ndim, d->shape, i), b = at(&c->src[1], d->ndim, d->shape, i);
            *dst_at(d, i) = c->kind == CT_OP_ADD ? a + b : c->kind == CT_OP_SUB ? a - b : c->kind == CT_OP_MUL ? a * b : a / b;
        }
        break;
    case CT_OP_RELU: case CT_OP_COPY: case CT_OP_EXP: case CT_OP_LOG: case CT_OP_RSQRT: case CT_OP_SILU:
    case CT_OP_GELU: case CT_OP_ADD_SCALAR: case CT_OP_MUL_SCALAR:
        for (int64_t i = 0; i < n; i++) *dst_at(d, i) = unary(c->kind, at(&c->src[0], d->ndim, d->shape, i), c->a);
        break;
    case CT_OP_FILL:
        for (int64_t i = 0; i < n; i++) *dst_at(d, i) = (float)c->a;
        break;
    case CT_OP_SUM: case CT_OP_MEAN: case CT_OP_MAX: kernel_reduce(c); break;
    case CT_OP_MATMUL: kernel_matmul(c); break;
    case CT_OP_LINEAR: kernel_linear(c); break;
    case CT_OP_ARGMAX: kernel_argmax(c); break;
    case CT_OP_EMBEDDING: kernel_embedding(c); break;
    default: break;
    }
}

static void log_run(const tb_cmd *c, uint64_t t0, uint64_t t1)
{
    pthread_mutex_lock(&g_log_mu);
    if (g_n_log < TB_LOG)
        g_log[g_n_log++] = (test_backend_log_entry){c->dev->index, c->kind, t0, t1, c->dst.p, numel(&c->dst)};
    pthread_mutex_unlock(&g_log_mu);
}

/* Runs one command (on the worker when async, at once otherwise); frees it. */
static void execute(void *arg)
{
    tb_cmd *c = arg;
    tb_dev *dv = c->dev;
    switch (c->type) {
    case CMD_RUN: {
        if (dv->faulted) break; /* a faulted queue does nothing more */
        uint64_t t0 = now_ns();
        if (g_delay_us[dv->index]) usleep(g_delay_us[dv->index]);
        int *late = &g_fail_late[dv->index];
        if (*late == 0) { /* the late fault: the op "ran" and broke the device; its output is garbage */
            dv->faulted = true;
            snprintf(dv->fault_msg, sizeof dv->fault_msg, "%s: simulated late fault (illegal address) in %s",
                     dv->name, op_kind_name(c->kind));
            *late = -1;
            break;
        }
        if (*late > 0) (*late)--;
        kernel(c);
        log_run(c, t0, now_ns());
        break;
    }
    case CMD_COPY:
        if (!dv->faulted) memcpy(c->to, c->from, c->bytes);
        break;
    case CMD_RELEASE:
        memset(c->to, 0xff, c->bytes); /* a NaN pattern: a read after release shows */
        free(c->to);
        __atomic_fetch_sub(&g_live_buffers[dv->index], 1, __ATOMIC_RELAXED);
        break;
    case CMD_SIGNAL:
        tq_event_signal(c->ev, dv->faulted ? CT_ERR_DEVICE_FAULT : CT_OK, dv->faulted ? dv->fault_msg : "");
        break;
    case CMD_WAIT:
        tq_event_wait(c->ev, NULL, 0); /* a producer's failure is the producer's: core tracks it */
        tq_event_unref(c->ev);
        break;
    }
    free(c);
}

static ct_status submit(ct_device *dev, tb_cmd *c)
{
    c->dev = dev->priv;
    if (!c->dev->q) {
        execute(c);
        return CT_OK;
    }
    if (!tq_push(c->dev->q, execute, c)) {
        free(c);
        return core_err(CT_ERR_DEVICE_OOM, "%s: queue full", dev->info.name);
    }
    return CT_OK;
}

static tb_cmd *new_cmd(int type)
{
    tb_cmd *c = calloc(1, sizeof *c);
    if (c) c->type = type;
    return c;
}

/* ---- the backend table ---- */

static int tb_count(void) { return g_n; }

static ct_status tb_init(ct_device *dev, int index)
{
    snprintf(dev->info.description, sizeof dev->info.description, "simulated test device %d%s", index,
             g_async ? " (asynchronous)" : "");
    dev->info.memory_bytes = 1u << 30;
    dev->info.dtype_mask = 1u << CT_F32;
    if ((g_shared >> index) & 1u) dev->info.flags |= CT_DEVICE_HOST_SHARED;
    tb_dev *d = calloc(1, sizeof *d);
    if (!d) return core_err(CT_ERR_OOM, "test backend: out of memory");
    d->index = index;
    snprintf(d->name, sizeof d->name, "test:%d", index);
    if (g_async && !(d->q = tq_new())) {
        free(d);
        return core_err(CT_ERR_DEVICE_FAULT, "test backend: no worker thread");
    }
    dev->priv = d;
    return CT_OK;
}

static void tb_release_dev(ct_device *dev)
{
    tb_dev *d = dev->priv;
    if (!d) return;
    tq_free(d->q); /* runs what is queued first */
    free(d);
    dev->priv = NULL;
}

/* The ops a decode step ends and starts with, beyond f32: its argmax into i64, that
 * index copied into the i32 token, the token's embedding. */
static bool tb_supports_index(const ct_op *op)
{
    const ct_tensor *a = op->src[0], *d = op->dst;
    switch (op->kind) {
    case CT_OP_ARGMAX:
        return a->dtype == CT_F32 && d->dtype == CT_I64 && tensor_is_contiguous(a) && tensor_is_contiguous(d) &&
               a->ndim >= 1 && op->p.red.mask == 1u << (a->ndim - 1);
    case CT_OP_COPY:
        return a->dtype == CT_I64 && d->dtype == CT_I32 && tensor_is_contiguous(a) && tensor_is_contiguous(d);
    case CT_OP_EMBEDDING:
        return a->dtype == CT_F32 && a->ndim == 2 && tensor_is_contiguous(a) && op->src[1]->dtype == CT_I32 &&
               tensor_is_contiguous(op->src[1]) && d->dtype == CT_F32 && tensor_is_contiguous(d);
    default: return false;
    }
}

static bool tb_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    if (!g_ops[op->kind]) return false;
    if (op->kind == CT_OP_ARGMAX || op->kind == CT_OP_EMBEDDING || (op->kind == CT_OP_COPY && op->dst->dtype == CT_I32))
        return tb_supports_index(op);
    if (op->dst->dtype != CT_F32) return false;
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && op->src[i]->dtype != CT_F32) return false;
    return true;
}

static ct_status tb_alloc(ct_device *dev, size_t bytes, ct_buffer *buf)
{
    int i = dev->info.index;
    if (g_fail_allocs[i] > 0 && g_alloc_ok_first[i] > 0) {
        g_alloc_ok_first[i]--;
    } else if (g_fail_allocs[i] > 0) {
        g_fail_allocs[i]--;
        return core_err(CT_ERR_DEVICE_OOM, "%s: simulated out of memory (%zu bytes)", dev->info.name, bytes);
    }
    uint64_t cap = g_capacity[i] ? g_capacity[i] : 1u << 30;
    if (g_used[i] + bytes > cap)
        return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory (%zu bytes wanted, %llu of %llu in use)", dev->info.name,
                        bytes, (unsigned long long)g_used[i], (unsigned long long)cap);
    buf->ptr = malloc(bytes);
    buf->size = bytes;
    if (!buf->ptr) return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory", dev->info.name);
    g_used[i] += bytes;
    if (g_async) memset(buf->ptr, 0xff, bytes); /* NaN: a read before the producer wrote shows */
    __atomic_fetch_add(&g_live_buffers[i], 1, __ATOMIC_RELAXED);
    return CT_OK;
}

/* A shared device's buffer over host memory: the host copy's bytes, used as they are. As
 * PoCL's, only at a 64-byte boundary (the host allocator's: anything else is refused). */
static ct_status tb_alias(ct_device *dev, void *host, size_t bytes, ct_buffer *buf)
{
    int i = dev->info.index;
    if (!((g_shared >> i) & 1u) || (uintptr_t)host % 64)
        return core_err(CT_ERR_UNSUPPORTED, "%s: no buffer over this host memory", dev->info.name);
    *buf = (ct_buffer){host, bytes, &g_alias_mark, false, 0};
    g_aliases[i]++;
    return CT_OK;
}

static void tb_release(ct_device *dev, ct_buffer *buf)
{
    if (buf->priv == &g_alias_mark) { /* the host's memory: neither freed nor poisoned here */
        buf->ptr = NULL;
        return;
    }
    g_used[dev->info.index] -= buf->size;
    tb_cmd *c = new_cmd(CMD_RELEASE);
    if (c) {
        c->to = buf->ptr, c->bytes = buf->size;
        submit(dev, c); /* in queue order: after the work that uses it */
    }
    buf->ptr = NULL;
}

static ct_status tb_copy(ct_device *dev, void *to, const void *from, size_t bytes)
{
    tb_cmd *c = new_cmd(CMD_COPY);
    if (!c) return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory", dev->info.name);
    c->to = to, c->from = from, c->bytes = bytes;
    return submit(dev, c);
}

static ct_status tb_upload(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes)
{
    g_up[dev->info.index] += bytes;
    return tb_copy(dev, (char *)buf->ptr + off, host, bytes);
}

static ct_status tb_download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes)
{
    g_down[dev->info.index] += bytes;
    return tb_copy(dev, host, (const char *)buf->ptr + off, bytes);
}

static ct_status tb_copy_peer(ct_device *dst, ct_buffer *dst_buf, ct_device *src, const ct_buffer *src_buf, size_t off,
                              size_t bytes)
{
    if (!g_peer)
        return core_err(CT_ERR_UNSUPPORTED, "%s -> %s: peer access disabled", src->info.name, dst->info.name);
    g_peer_bytes[dst->info.index] += bytes;
    return tb_copy(dst, (char *)dst_buf->ptr + off, (const char *)src_buf->ptr + off, bytes);
}

static ct_status tb_run(ct_device *dev, const ct_op *op)
{
    if (!has_kernel(op->kind))
        return core_err(CT_ERR_UNSUPPORTED, "%s: no kernel for %s", dev->info.name, op_kind_name(op->kind));
    int di = dev->info.index;
    if (g_refuse[di].kind == (int)op->kind && g_refuse[di].n > 0) {
        if (g_refuse[di].after > 0) {
            g_refuse[di].after--;
        } else {
            g_refuse[di].n--;
            return core_err(g_refuse[di].err, "%s: %s refused (test_backend_refuse_runs)", dev->info.name,
                            op_kind_name(op->kind));
        }
    }
    g_runs[di][op->kind]++;
    tb_cmd *c = new_cmd(CMD_RUN);
    if (!c) return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory", dev->info.name);
    c->kind = op->kind;
    c->n_src = op->n_src < 3 ? op->n_src : 3;
    for (int i = 0; i < c->n_src; i++)
        if (op->src[i]) c->src[i] = view_of(op->src[i], dev);
    if (op->kind == CT_OP_LINEAR && storage_layout_serves(op->src[1], dev, CT_OP_LINEAR, 1)) {
        uint64_t key[STORAGE_DERIVED_KEY];
        storage_view_key(op->src[1], dev, key);
        const size_t *lay = storage_derived(op->src[1]->st, key);
        c->wt = (const float *)(lay + 2);
    }
    c->dst = view_of(op->dst, dev);
    c->int_copy = op->kind == CT_OP_COPY && op->dst->dtype == CT_I32;
    c->a = op->p.s.a;
    if (op->kind == CT_OP_SUM || op->kind == CT_OP_MEAN || op->kind == CT_OP_MAX) c->red_mask = op->p.red.mask;
    return submit(dev, c);
}

/* An imported weight: [bytes, device index] then the floats, transposed to [K, N] so the
 * linear kernel reads a column of w as a row (a stand-in for a GPU's reordered blocks). */
static void layout_free(void *data)
{
    size_t *h = data;
    g_used[h[1]] -= h[0];
    free(h);
}

static ct_status tb_import(ct_device *dev, const ct_tensor *t)
{
    if (!g_import || !g_ops[CT_OP_LINEAR] || t->dtype != CT_F32 || t->ndim != 2) return CT_OK; /* raw bytes serve */
    int i = dev->info.index;
    int64_t N = t->shape[0], K = t->shape[1];
    size_t bytes = (size_t)(N * K) * sizeof(float);
    uint64_t cap = g_capacity[i] ? g_capacity[i] : 1u << 30;
    if (g_used[i] + bytes > cap)
        return core_err(CT_ERR_DEVICE_OOM, "%s: no room to import a %zu-byte weight", dev->info.name, bytes);
    void *host;
    ct_status s = storage_host(t->st, &host);
    if (s != CT_OK) return s;
    size_t *h = malloc(2 * sizeof(size_t) + (bytes ? bytes : 1));
    if (!h) return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory", dev->info.name);
    h[0] = bytes, h[1] = (size_t)i;
    float *wt = (float *)(h + 2);
    const float *w = (const float *)host + t->offset;
    for (int64_t n = 0; n < N; n++)
        for (int64_t k = 0; k < K; k++) wt[k * N + n] = w[n * t->stride[0] + k * t->stride[1]];
    uint64_t key[STORAGE_DERIVED_KEY];
    storage_view_key(t, dev, key);
    g_used[i] += bytes;
    s = storage_set_layout(t->st, key, h, layout_free, dev, bytes, CT_OP_LINEAR, 1);
    if (s != CT_OK) {
        layout_free(h);
        return s;
    }
    g_imports[i]++;
    return CT_OK;
}

/* Pinning changes nothing for memory the simulated devices copy with memcpy: counted, so
 * the executor's pin table is checked (one call per backend, undone on unpin and release). */
static ct_status tb_host_pin(ct_device *dev, void *ptr, size_t bytes)
{
    int i = dev->info.index;
    g_pin_calls[i]++;
    if (g_fail_pins > 0) {
        g_fail_pins--;
        return core_err(CT_ERR_DEVICE_OOM, "%s: simulated refusal to pin %zu bytes at %p", dev->info.name, bytes, ptr);
    }
    g_pinned[i]++;
    return CT_OK;
}

static void tb_host_unpin(ct_device *dev, void *ptr)
{
    (void)ptr;
    g_pinned[dev->info.index]--;
}

/* A stand-in for a CUDA graph: the captured list is kept and submitted as a whole. */
static bool g_capture;
static int g_launches[TB_MAX];
typedef struct tb_graph {
    int n;
    ct_op *ops;
} tb_graph;

static ct_status tb_step_capture(ct_device *dev, const ct_op *ops, int n, void **handle)
{
    if (!g_capture) return core_err(CT_ERR_UNSUPPORTED, "%s: step capture is off", dev->info.name);
    tb_graph *g = calloc(1, sizeof *g);
    if (g) g->ops = malloc(sizeof *ops * (size_t)n);
    if (!g || !g->ops) {
        free(g);
        return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory capturing a step", dev->info.name);
    }
    memcpy(g->ops, ops, sizeof *ops * (size_t)n);
    g->n = n;
    *handle = g;
    return CT_OK;
}

static ct_status tb_step_launch(ct_device *dev, void *handle)
{
    tb_graph *g = handle;
    g_launches[dev->info.index]++;
    for (int i = 0; i < g->n; i++) {
        ct_status s = tb_run(dev, &g->ops[i]);
        if (s != CT_OK) return s;
    }
    return CT_OK;
}

static void tb_step_release(ct_device *dev, void *handle)
{
    (void)dev;
    tb_graph *g = handle;
    if (g) free(g->ops);
    free(g);
}

void test_backend_set_capture(bool enabled) { g_capture = enabled; }
int test_backend_launches(int dev) { return g_launches[dev]; }

static ct_status tb_mem_info(ct_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    int i = dev->info.index;
    *total_bytes = g_capacity[i] ? g_capacity[i] : 1u << 30;
    *free_bytes = *total_bytes - g_used[i];
    return CT_OK;
}

static ct_status tb_event_record(ct_device *dev, void **handle)
{
    tb_dev *d = dev->priv;
    *handle = NULL;
    if (!d->q) return CT_OK; /* synchronous: done already */
    tb_cmd *c = new_cmd(CMD_SIGNAL);
    tq_event *e = c ? tq_event_new() : NULL;
    if (!e) {
        free(c);
        return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory", dev->info.name);
    }
    c->ev = e;
    ct_status s = submit(dev, c);
    if (s != CT_OK) {
        tq_event_unref(e);
        tq_event_unref(e);
        return s;
    }
    *handle = e;
    return CT_OK;
}

static ct_status tb_event_wait(ct_device *dev, ct_device *ev_dev, void *handle)
{
    (void)ev_dev;
    tb_cmd *c = new_cmd(CMD_WAIT);
    if (!c) return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory", dev->info.name);
    c->ev = tq_event_ref(handle);
    return submit(dev, c);
}

static ct_status tb_event_sync(ct_device *dev, void *handle)
{
    char msg[200];
    ct_status s = tq_event_wait(handle, msg, sizeof msg);
    return s == CT_OK ? CT_OK : core_err(s, "%s (reported at a sync on %s)", msg, dev->info.name);
}

static void tb_event_release(ct_device *dev, void *handle)
{
    (void)dev;
    tq_event_unref(handle);
}

static ct_status tb_sync(ct_device *dev)
{
    void *h = NULL;
    ct_status s = tb_event_record(dev, &h);
    if (s != CT_OK || !h) return s;
    s = tb_event_sync(dev, h);
    tq_event_unref(h);
    return s;
}

static const ct_backend_ops test_backend_ops = {
    .name = "test", .kind = CT_DEVICE_TEST, .device_count = tb_count, .device_init = tb_init,
    .device_release = tb_release_dev, .supports = tb_supports, .alloc = tb_alloc, .release = tb_release,
    .upload = tb_upload, .download = tb_download, .copy_peer = tb_copy_peer, .alias = tb_alias, .run = tb_run, .sync = tb_sync,
    .event_record = tb_event_record, .event_wait = tb_event_wait, .event_sync = tb_event_sync,
    .event_release = tb_event_release, .mem_info = tb_mem_info, .import = tb_import,
    .host_pin = tb_host_pin, .host_unpin = tb_host_unpin,
    .step_capture = tb_step_capture, .step_launch = tb_step_launch, .step_release = tb_step_release,
};

static ct_status install(int n, const char *ops, bool async, uint32_t shared)
{
    /* The simulated devices are tested on the default chain (test devices first): a chain
     * from the environment (make test-opencl's CTORCH_DEVICES=opencl,cpu) would leave
     * them out. A test that wants another chain sets it after installing. */
    unsetenv("CTORCH_DEVICES");
    exec_unregister_backend(&test_backend_ops); /* stops the old devices' workers */
    g_n = n < TB_MAX ? n : TB_MAX;
    g_async = async;
    g_shared = shared;
    memset(g_aliases, 0, sizeof g_aliases);
    memset(g_ops, 0, sizeof g_ops);
    memset(g_runs, 0, sizeof g_runs);
    memset(g_up, 0, sizeof g_up);
    memset(g_down, 0, sizeof g_down);
    memset(g_fail_allocs, 0, sizeof g_fail_allocs);
    memset(g_alloc_ok_first, 0, sizeof g_alloc_ok_first);
    memset(g_peer_bytes, 0, sizeof g_peer_bytes);
    memset(g_delay_us, 0, sizeof g_delay_us);
    memset(g_capacity, 0, sizeof g_capacity);
    memset(g_imports, 0, sizeof g_imports);
    g_import = false;
    memset(g_pin_calls, 0, sizeof g_pin_calls);
    g_fail_pins = 0; /* g_pinned is not reset: the old devices' release brought it to 0 */
    for (int i = 0; i < TB_MAX; i++) g_fail_late[i] = -1;
    for (int i = 0; i < TB_MAX; i++) g_refuse[i].kind = -1;
    g_n_log = 0;
    g_peer = false;
    g_capture = false;
    memset(g_launches, 0, sizeof g_launches);
    char buf[512];
    snprintf(buf, sizeof buf, "%s", ops ? ops : "");
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        ct_op_kind k;
        if (!strcmp(t, "*")) {
            for (int i = 0; i < CT_OP_COUNT; i++) g_ops[i] = has_kernel((ct_op_kind)i);
        } else if (op_kind_from_name(t, &k)) {
            g_ops[k] = has_kernel(k);
        } else {
            return core_err(CT_ERR_INVALID_ARG, "test backend: unknown op '%s'", t);
        }
    }
    /* a machine's real GPUs would change the chain, the inventory and the routes */
    exec_hide_builtin_accelerators(true);
    return exec_register_backend(&test_backend_ops);
}

ct_status test_backend_install(int n, const char *ops) { return install(n, ops, false, 0); }
ct_status test_backend_install_async(int n, const char *ops) { return install(n, ops, true, 0); }
ct_status test_backend_install_shared(int n, const char *ops, bool async, uint32_t shared)
{
    return install(n, ops, async, shared);
}
int test_backend_aliases(int dev) { return g_aliases[dev]; }

void test_backend_uninstall(void)
{
    g_n = 0;
    exec_hide_builtin_accelerators(false);
    exec_unregister_backend(&test_backend_ops);
}

int test_backend_runs(int dev, ct_op_kind kind) { return g_runs[dev][kind]; }
int test_backend_imports(int dev) { return g_imports[dev]; }
void test_backend_set_import(bool enabled) { g_import = enabled; }
uint64_t test_backend_uploaded(int dev) { return g_up[dev]; }
uint64_t test_backend_downloaded(int dev) { return g_down[dev]; }
void test_backend_fail_allocs(int dev, int n) { test_backend_fail_allocs_after(dev, 0, n); }
void test_backend_fail_allocs_after(int dev, int ok, int n)
{
    g_alloc_ok_first[dev] = ok;
    g_fail_allocs[dev] = n;
}

void test_backend_set_peer(bool enabled) { g_peer = enabled; }
uint64_t test_backend_peer_bytes(int dev) { return g_peer_bytes[dev]; }

void test_backend_set_delay(int dev, unsigned us) { g_delay_us[dev] = us; }
void test_backend_set_capacity(int dev, uint64_t bytes) { g_capacity[dev] = bytes; }
void test_backend_refuse_runs(int dev, ct_op_kind kind, int after, int n, ct_status err)
{
    if (dev < 0 || dev >= TB_MAX) return;
    g_refuse[dev].kind = (int)kind;
    g_refuse[dev].after = after;
    g_refuse[dev].n = n;
    g_refuse[dev].err = err;
}

void test_backend_fail_late(int dev, int after_runs) { __atomic_store_n(&g_fail_late[dev], after_runs, __ATOMIC_RELAXED); }
int test_backend_live_buffers(int dev) { return __atomic_load_n(&g_live_buffers[dev], __ATOMIC_RELAXED); }

int test_backend_log(test_backend_log_entry *out, int cap)
{
    pthread_mutex_lock(&g_log_mu);
    int n = g_n_log;
    for (int i = 0; i < n && i < cap; i++) out[i] = g_log[i];
    pthread_mutex_unlock(&g_log_mu);
    return n;
}

int test_backend_pinned(int dev) { return g_pinned[dev]; }
int test_backend_pin_calls(int dev) { return g_pin_calls[dev]; }
void test_backend_fail_pins(int n) { g_fail_pins = n; }
