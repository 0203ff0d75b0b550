#include "test_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"

#define TB_MAX 4
static int g_n;
static bool g_ops[CT_OP_COUNT];
static int g_runs[TB_MAX][CT_OP_COUNT];
static uint64_t g_up[TB_MAX], g_down[TB_MAX];
static int g_fail_allocs[TB_MAX];
static bool g_peer;
static uint64_t g_peer_bytes[TB_MAX];

static const ct_op_kind kernels[] = {CT_OP_ADD, CT_OP_SUB, CT_OP_MUL, CT_OP_RELU, CT_OP_MATMUL, CT_OP_COPY, CT_OP_FILL, CT_OP_SUM};

static bool has_kernel(ct_op_kind k)
{
    for (size_t i = 0; i < sizeof kernels / sizeof kernels[0]; i++)
        if (kernels[i] == k) return true;
    return false;
}

static int tb_count(void) { return g_n; }

static ct_status tb_init(ct_device *dev, int index)
{
    snprintf(dev->info.description, sizeof dev->info.description, "simulated test device %d", index);
    dev->info.memory_bytes = 1u << 30;
    dev->info.dtype_mask = 1u << CT_F32;
    return CT_OK;
}

static bool tb_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    if (!g_ops[op->kind] || op->dst->dtype != CT_F32) return false;
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && op->src[i]->dtype != CT_F32) return false;
    if (op->kind == CT_OP_SUM) return op->p.red.mask == (1u << op->src[0]->ndim) - 1;
    return true;
}

static ct_status tb_alloc(ct_device *dev, size_t bytes, ct_buffer *buf)
{
    int i = dev->info.index;
    if (g_fail_allocs[i] > 0) {
        g_fail_allocs[i]--;
        return core_err(CT_ERR_DEVICE_OOM, "%s: simulated out of memory (%zu bytes)", dev->info.name, bytes);
    }
    buf->ptr = malloc(bytes);
    buf->size = bytes;
    return buf->ptr ? CT_OK : core_err(CT_ERR_DEVICE_OOM, "%s: out of memory", dev->info.name);
}

static void tb_release(ct_device *dev, ct_buffer *buf)
{
    (void)dev;
    free(buf->ptr);
    buf->ptr = NULL;
}

static ct_status tb_upload(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes)
{
    memcpy((char *)buf->ptr + off, host, bytes);
    g_up[dev->info.index] += bytes;
    return CT_OK;
}

static ct_status tb_download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes)
{
    memcpy(host, (const char *)buf->ptr + off, bytes);
    g_down[dev->info.index] += bytes;
    return CT_OK;
}

/* Element of t at the flat index i of shape (ndim, shape), t broadcast to it. */
static float at(const ct_tensor *t, const ct_device *dev, int ndim, const int64_t *shape, int64_t i)
{
    const float *p = op_data(t, dev);
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t idx = i % shape[d];
        i /= shape[d];
        int td = d - (ndim - t->ndim);
        if (td >= 0 && t->shape[td] != 1) off += idx * t->stride[td];
    }
    return p[off];
}

static float *dst_at(const ct_tensor *t, const ct_device *dev, int64_t i)
{
    float *p = op_data(t, dev);
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->shape[d]) * t->stride[d];
        i /= t->shape[d];
    }
    return p + off;
}

static ct_status tb_run(ct_device *dev, const ct_op *op)
{
    const ct_tensor *d = op->dst;
    int64_t n = ct_tensor_numel(d);
    g_runs[dev->info.index][op->kind]++;
    switch (op->kind) {
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL:
        for (int64_t i = 0; i < n; i++) {
            float a = at(op->src[0], dev, d->ndim, d->shape, i), b = at(op->src[1], dev, d->ndim, d->shape, i);
            *dst_at(d, dev, i) = op->kind == CT_OP_ADD ? a + b : op->kind == CT_OP_SUB ? a - b : a * b;
        }
        return CT_OK;
    case CT_OP_RELU: case CT_OP_COPY:
        for (int64_t i = 0; i < n; i++) {
            float a = at(op->src[0], dev, d->ndim, d->shape, i);
            *dst_at(d, dev, i) = op->kind == CT_OP_RELU && a < 0 ? 0.0f : a;
        }
        return CT_OK;
    case CT_OP_FILL:
        for (int64_t i = 0; i < n; i++) *dst_at(d, dev, i) = (float)op->p.s.a;
        return CT_OK;
    case CT_OP_SUM: {
        double acc = 0;
        const ct_tensor *s = op->src[0];
        for (int64_t i = 0, m = ct_tensor_numel(s); i < m; i++) acc += at(s, dev, s->ndim, s->shape, i);
        *dst_at(d, dev, 0) = (float)acc;
        return CT_OK;
    }
    case CT_OP_MATMUL: {
        /* batch dims already broadcast by the frontend: a [..., M, K], b [..., K, N] */
        const ct_tensor *a = op->src[0], *b = op->src[1];
        int64_t M = d->shape[d->ndim - 2], N = d->shape[d->ndim - 1], K = a->shape[a->ndim - 1];
        int64_t mn = M * N, batch = mn > 0 ? n / mn : 0;
        for (int64_t bi = 0; bi < batch; bi++)
            for (int64_t m = 0; m < M; m++)
                for (int64_t j = 0; j < N; j++) {
                    double acc = 0;
                    for (int64_t k = 0; k < K; k++) {
                        int64_t ia = (bi * M + m) * K + k, ib = (bi * K + k) * N + j;
                        acc += (double)at(a, dev, a->ndim, a->shape, ia) * at(b, dev, b->ndim, b->shape, ib);
                    }
                    *dst_at(d, dev, (bi * M + m) * N + j) = (float)acc;
                }
        return CT_OK;
    }
    default:
        return core_err(CT_ERR_UNSUPPORTED, "%s: no kernel for %s", dev->info.name, op_kind_name(op->kind));
    }
}

static ct_status tb_copy_peer(ct_device *dst, ct_buffer *dst_buf, ct_device *src, const ct_buffer *src_buf, size_t bytes)
{
    if (!g_peer)
        return core_err(CT_ERR_UNSUPPORTED, "%s -> %s: peer access disabled", src->info.name, dst->info.name);
    memcpy(dst_buf->ptr, src_buf->ptr, bytes);
    g_peer_bytes[dst->info.index] += bytes;
    return CT_OK;
}

static ct_status tb_sync(ct_device *dev)
{
    (void)dev;
    return CT_OK;
}

static const ct_backend_ops test_backend_ops = {
    .name = "test", .kind = CT_DEVICE_TEST, .device_count = tb_count, .device_init = tb_init,
    .supports = tb_supports, .alloc = tb_alloc, .release = tb_release, .upload = tb_upload,
    .download = tb_download, .copy_peer = tb_copy_peer, .run = tb_run, .sync = tb_sync,
};

ct_status test_backend_install(int n, const char *ops)
{
    g_n = n < TB_MAX ? n : TB_MAX;
    memset(g_ops, 0, sizeof g_ops);
    memset(g_runs, 0, sizeof g_runs);
    memset(g_up, 0, sizeof g_up);
    memset(g_down, 0, sizeof g_down);
    memset(g_fail_allocs, 0, sizeof g_fail_allocs);
    memset(g_peer_bytes, 0, sizeof g_peer_bytes);
    g_peer = false;
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
    exec_unregister_backend(&test_backend_ops);
    return exec_register_backend(&test_backend_ops);
}

void test_backend_uninstall(void)
{
    g_n = 0;
    exec_unregister_backend(&test_backend_ops);
}

int test_backend_runs(int dev, ct_op_kind kind) { return g_runs[dev][kind]; }
uint64_t test_backend_uploaded(int dev) { return g_up[dev]; }
uint64_t test_backend_downloaded(int dev) { return g_down[dev]; }
void test_backend_fail_allocs(int dev, int n) { g_fail_allocs[dev] = n; }

void test_backend_set_peer(bool enabled) { g_peer = enabled; }
uint64_t test_backend_peer_bytes(int dev) { return g_peer_bytes[dev]; }
