/* Device memory of the CUDA backend: the caching allocator, operand temporaries, and
 * host <-> device copies on the device's stream. */
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

/* ---- copies ----
 * Pageable host memory goes through the driver's own staging: measured on an H100 host
 * (bench/cuda_transfer.c, 64 KiB-256 MiB), a staging ring filled by one host thread was
 * bound by that thread's memcpy (7-10 GB/s) and no faster than cudaMemcpyAsync from
 * pageable memory (9-14 GB/s); pinned memory reaches 55 GB/s either way. */

ct_status cuda_mem_upload(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes)
{
    ct_status s = cuda_enter(dev);
    if (s == CT_OK) s = cuda_fault_status(dev, "upload");
    if (s != CT_OK || !bytes) return s;
    cuda_devx *x = cuda_x(dev);
    char *d = (char *)buf->ptr + off;
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
    return cuda_status(cudaMemcpyAsync(host, d, bytes, cudaMemcpyDeviceToHost, x->d.stream), dev, "download");
}

/* ---- page-locked host memory (ct_host_pin) ----
 * Portable: one registration serves every CUDA device of the process. A download into
 * registered memory is a real asynchronous DMA (55 GB/s on the H100 host against 8-15 from
 * pageable memory); the storage layer's events already order the host after it. */

ct_status cuda_mem_host_pin(ct_device *dev, void *ptr, size_t bytes)
{
    ct_status s = cuda_enter(dev);
    if (s != CT_OK) return s;
    cudaError_t e = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable);
    if (e == cudaSuccess) return CT_OK;
    cudaGetLastError(); /* not sticky: the device stays usable, the memory pageable */
    return core_err(e == cudaErrorMemoryAllocation ? CT_ERR_DEVICE_OOM : CT_ERR_DEVICE_FAULT,
                    "%s: cudaHostRegister of %zu bytes at %p failed: %s (%s); the memory stays pageable",
                    dev->info.name, bytes, ptr, cudaGetErrorString(e), cudaGetErrorName(e));
}

void cuda_mem_host_unpin(ct_device *dev, void *ptr)
{
    /* a lost device's context may refuse: the registration then goes with the process */
    if (cuda_enter(dev) != CT_OK) return;
    if (cudaHostUnregister(ptr) != cudaSuccess) cudaGetLastError();
}
