/* Device memory of the CUDA backend: the caching allocator, operand temporaries, and
 * host <-> device copies (pinned staging for large pageable copies). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/backend_priv.h"

/* ---- size classes: four per power of two, at least 512 bytes ---- */

size_t cuda_round(size_t bytes)
{
    if (bytes <= 512) return 512;
    int e = 63 - __builtin_clzll((unsigned long long)bytes);
    size_t step = e >= 11 ? (size_t)1 << (e - 2) : 512;
    return (bytes + step - 1) / step * step;
}

static int size_class(size_t rounded)
{
    int e = 63 - __builtin_clzll((unsigned long long)rounded);
    size_t sub = e >= 2 ? (rounded - ((size_t)1 << e)) >> (e - 2) : 0;
    return e * 4 + (int)sub;
}

void cuda_alloc_init(cuda_alloc *a, size_t cap)
{
    memset(a, 0, sizeof *a);
    pthread_mutex_init(&a->mu, NULL);
    a->cap = cap;
}

/* cudaFree of every cached block (it waits for the device, so no pending work still uses one). */
static void empty_locked(cuda_alloc *a)
{
    for (int c = 0; c < CUDA_CLASSES; c++) {
        while (a->free_list[c]) {
            cuda_block *b = a->free_list[c];
            a->free_list[c] = b->next;
            cudaFree(b->ptr);
            b->next = a->spare;
            a->spare = b;
        }
    }
    a->reserved -= a->cached;
    a->cached = 0;
    a->n_empty++;
}

void cuda_alloc_destroy(cuda_alloc *a)
{
    pthread_mutex_lock(&a->mu);
    empty_locked(a);
    while (a->spare) {
        cuda_block *b = a->spare;
        a->spare = b->next;
        free(b);
    }
    pthread_mutex_unlock(&a->mu);
    pthread_mutex_destroy(&a->mu);
}

static ct_status oom(const ct_device *dev, const cuda_alloc *a, size_t bytes, const char *why)
{
    return core_err(CT_ERR_DEVICE_OOM, "%s: out of memory allocating %zu bytes (%s; %zu MiB in use, cap %zu MiB)",
                    dev->info.name, bytes, why, a->in_use >> 20, a->cap >> 20);
}

ct_status cuda_block_get(ct_device *dev, size_t bytes, void **ptr)
{
    cuda_devx *x = cuda_x(dev);
    cuda_alloc *a = &x->alloc;
    size_t r = cuda_round(bytes);
    int c = size_class(r);
    *ptr = NULL;
    const core_config *cfg = config_current();
    pthread_mutex_lock(&a->mu);
    if (cfg != a->cfg) {
        a->cfg = cfg;
        a->cap = cfg->cuda_mem_bytes ? cfg->cuda_mem_bytes : a->default_cap;
    }
    for (cuda_block **pp = &a->free_list[c]; *pp; pp = &(*pp)->next) {
        cuda_block *b = *pp; /* a class is one rounded size (e <= 63: 256 classes hold all) */
        *pp = b->next;
        *ptr = b->ptr;
        b->next = a->spare;
        a->spare = b;
        a->cached -= r;
        a->in_use += r;
        a->n_reuse++;
        break;
    }
    ct_status s = CT_OK;
    if (!*ptr) {
        bool emptied = false;
        if (a->reserved + r > a->cap && !x->d.capturing) {
            empty_locked(a);
            emptied = true;
        }
        if (a->reserved + r > a->cap) {
            s = oom(dev, a, bytes, "the allocator's cap is reached (CTORCH_CUDA_MEM_MB)");
        } else {
            cudaError_t e = cudaMalloc(ptr, r);
            if (e == cudaErrorMemoryAllocation && !emptied && !x->d.capturing) {
                cudaGetLastError();
                empty_locked(a);
                e = cudaMalloc(ptr, r);
            }
            if (e == cudaErrorMemoryAllocation) {
                cudaGetLastError(); /* not sticky: the device stays usable */
                *ptr = NULL;
                s = oom(dev, a, bytes, "cudaMalloc failed");
            } else if (e != cudaSuccess) {
                *ptr = NULL;
                s = cuda_status(e, dev, "cudaMalloc");
            } else {
                a->reserved += r;
                a->in_use += r;
                a->n_malloc++;
            }
        }
    }
    pthread_mutex_unlock(&a->mu);
    if (s == CT_OK && cfg->cuda_poison) {
        cudaError_t e = cudaMemsetAsync(*ptr, 0xff, r, x->d.stream); /* all-ones: NaN in every float dtype */
        if (e != cudaSuccess) {
            cuda_block_put(dev, *ptr, bytes);
            *ptr = NULL;
            s = cuda_status(e, dev, "poisoning a fresh allocation");
        }
    }
    return s;
}

void cuda_block_put(ct_device *dev, void *ptr, size_t bytes)
{
    if (!ptr) return;
    cuda_alloc *a = &cuda_x(dev)->alloc;
    size_t r = cuda_round(bytes);
    pthread_mutex_lock(&a->mu);
    cuda_block *b = a->spare;
    if (b) a->spare = b->next;
    else b = malloc(sizeof *b);
    if (!b) { /* no node to keep it: give it back to the driver */
        cudaFree(ptr);
        a->reserved -= r;
    } else {
        int c = size_class(r);
        b->ptr = ptr;
        b->next = a->free_list[c];
        a->free_list[c] = b;
        a->cached += r;
    }
    a->in_use -= r;
    pthread_mutex_unlock(&a->mu);
}

/* ---- the table's alloc/release and the groups' temporaries ---- */

ct_status cuda_mem_alloc(ct_device *dev, size_t bytes, ct_buffer *buf)
{
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_fault_status(dev, "alloc");
    if (s == CT_OK) s = cuda_block_get(dev, bytes ? bytes : 1, &buf->ptr);
    buf->size = s == CT_OK ? bytes : 0;
    return s;
}

void cuda_mem_release(ct_device *dev, ct_buffer *buf)
{
    if (buf->ptr) cuda_block_put(dev, buf->ptr, buf->size ? buf->size : 1);
    buf->ptr = NULL;
}

ct_status cuda_tmp_alloc(ct_device *dev, size_t bytes, void **ptr)
{
    return cuda_block_get(dev, bytes ? bytes : 1, ptr);
}

void cuda_tmp_free(ct_device *dev, void *ptr, size_t bytes)
{
    cuda_devx *x = cuda_x(dev);
    cuda_graph *g = x->capture;
    if (g && ptr) { /* the graph's kernels keep this address: reserved until step_release */
        if (g->n_tmps == g->cap_tmps) {
            int cap = g->cap_tmps ? 2 * g->cap_tmps : 16;
            cuda_tmp *t = realloc(g->tmps, sizeof *t * (size_t)cap);
            if (!t) return; /* leaked rather than reused under the graph */
            g->tmps = t;
            g->cap_tmps = cap;
        }
        g->tmps[g->n_tmps++] = (cuda_tmp){ptr, bytes ? bytes : 1};
        return;
    }
    cuda_block_put(dev, ptr, bytes ? bytes : 1);
}

ct_status cuda_mem_info(ct_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    ct_status s = cuda_enter(dev);
    if (s != CT_OK) return s;
    size_t f = 0, t = 0;
    cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess) return cuda_status(e, dev, "cudaMemGetInfo");
    cuda_alloc *a = &cuda_x(dev)->alloc;
    pthread_mutex_lock(&a->mu);
    size_t cap = a->cap < t ? a->cap : t;
    size_t room = cap > a->in_use ? cap - a->in_use : 0, avail = f + a->cached;
    pthread_mutex_unlock(&a->mu);
    *free_bytes = room < avail ? room : avail;
    *total_bytes = cap;
    return CT_OK;
}

/* ---- copies ---- */

static bool is_pinned(const void *host)
{
    struct cudaPointerAttributes attr;
    if (cudaPointerGetAttributes(&attr, host) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    return attr.type == cudaMemoryTypeHost;
}

static ct_status stage_ready(const ct_device *dev, cuda_devx *x)
{
    for (int i = 0; i < CUDA_STAGE_N; i++) {
        if (x->stage[i]) continue;
        cudaError_t e = cudaHostAlloc(&x->stage[i], CUDA_STAGE_CHUNK, cudaHostAllocDefault);
        if (e == cudaSuccess) e = cudaEventCreateWithFlags(&x->stage_ev[i], cudaEventDisableTiming);
        if (e != cudaSuccess) {
            if (x->stage[i]) cudaFreeHost(x->stage[i]);
            x->stage[i] = NULL;
            return cuda_status(e, dev, "pinned staging buffers");
        }
    }
    return CT_OK;
}

void cuda_stage_free(cuda_devx *x)
{
    for (int i = 0; i < CUDA_STAGE_N; i++) {
        if (!x->stage[i]) continue;
        cudaEventSynchronize(x->stage_ev[i]);
        cudaEventDestroy(x->stage_ev[i]);
        cudaFreeHost(x->stage[i]);
        x->stage[i] = NULL;
    }
}

/* Host to device through the staging ring: the host fills chunk i while the copy engine
 * drains chunk i-1; a chunk is refilled once its previous copy finished. The caller's
 * buffer is free again when this returns. */
static ct_status upload_staged(const ct_device *dev, cuda_devx *x, char *d, const char *h, size_t bytes)
{
    for (size_t off = 0, i = 0; off < bytes; off += CUDA_STAGE_CHUNK, i = (i + 1) % CUDA_STAGE_N) {
        size_t n = bytes - off < CUDA_STAGE_CHUNK ? bytes - off : CUDA_STAGE_CHUNK;
        cudaError_t e = cudaEventSynchronize(x->stage_ev[i]);
        if (e != cudaSuccess) return cuda_status(e, dev, "upload (staging)");
        memcpy(x->stage[i], h + off, n);
        e = cudaMemcpyAsync(d + off, x->stage[i], n, cudaMemcpyHostToDevice, x->d.stream);
        if (e == cudaSuccess) e = cudaEventRecord(x->stage_ev[i], x->d.stream);
        if (e != cudaSuccess) return cuda_status(e, dev, "upload (staging)");
    }
    return CT_OK;
}

/* Device to host: CUDA_STAGE_N chunks in flight; each is copied out once it lands, and its
 * chunk is then queued again. Returns when the data is in `h`. */
static ct_status download_staged(const ct_device *dev, cuda_devx *x, char *h, const char *d, size_t bytes)
{
    size_t n_chunks = (bytes + CUDA_STAGE_CHUNK - 1) / CUDA_STAGE_CHUNK, queued = 0;
    cudaError_t e = cudaSuccess;
    for (size_t c = 0; c < n_chunks; c++) {
        for (; queued < n_chunks && queued < c + CUDA_STAGE_N; queued++) {
            size_t off = queued * CUDA_STAGE_CHUNK, i = queued % CUDA_STAGE_N;
            size_t n = bytes - off < CUDA_STAGE_CHUNK ? bytes - off : CUDA_STAGE_CHUNK;
            e = cudaMemcpyAsync(x->stage[i], d + off, n, cudaMemcpyDeviceToHost, x->d.stream);
            if (e == cudaSuccess) e = cudaEventRecord(x->stage_ev[i], x->d.stream);
            if (e != cudaSuccess) return cuda_status(e, dev, "download (staging)");
        }
        size_t off = c * CUDA_STAGE_CHUNK, i = c % CUDA_STAGE_N;
        size_t n = bytes - off < CUDA_STAGE_CHUNK ? bytes - off : CUDA_STAGE_CHUNK;
        e = cudaEventSynchronize(x->stage_ev[i]);
        if (e != cudaSuccess) return cuda_status(e, dev, "download (staging)");
        memcpy(h + off, x->stage[i], n);
    }
    return CT_OK;
}

ct_status cuda_mem_upload(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes)
{
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_fault_status(dev, "upload");
    if (s != CT_OK || !bytes) return s;
    cuda_devx *x = cuda_x(dev);
    char *d = (char *)buf->ptr + off;
    if (bytes >= CUDA_STAGE_MIN && !is_pinned(host)) {
        pthread_mutex_lock(&x->stage_mu);
        s = stage_ready(dev, x);
        if (s == CT_OK) s = upload_staged(dev, x, d, host, bytes);
        pthread_mutex_unlock(&x->stage_mu);
        return s;
    }
    return cuda_status(cudaMemcpyAsync(d, host, bytes, cudaMemcpyHostToDevice, x->d.stream), dev, "upload");
}

static ct_status download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes);

/* A download that finds the device broken (a sticky error, here or earlier) reads lost
 * data: CT_ERR_DEVICE_LOST, never bytes of a context that failed. */
ct_status cuda_mem_download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes)
{
    ct_status s = download(dev, buf, off, host, bytes);
    if (s != CT_OK && device_is_lost(dev)) return device_lost_error(dev, "download");
    return s;
}

static ct_status download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes)
{
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_fault_status(dev, "download");
    if (s != CT_OK || !bytes) return s;
    cuda_devx *x = cuda_x(dev);
    const char *d = (const char *)buf->ptr + off;
    if (bytes >= CUDA_STAGE_MIN && !is_pinned(host)) {
        pthread_mutex_lock(&x->stage_mu);
        s = stage_ready(dev, x);
        if (s == CT_OK) s = download_staged(dev, x, host, d, bytes);
        pthread_mutex_unlock(&x->stage_mu);
        return s;
    }
    return cuda_status(cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, x->d.stream), dev, "download");
}
