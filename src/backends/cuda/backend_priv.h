/* backend.c's own state beside the shared cuda_dev (cuda_internal.h): the caching
 * allocator, an event pool, the simulated late
 * fault. Private to backend*.c; the op groups see only cuda_internal.h. */
#ifndef CT_CUDA_BACKEND_PRIV_H
#define CT_CUDA_BACKEND_PRIV_H

#include <pthread.h>

#include "backends/cuda/cuda_internal.h"
#include "core/config.h"

#define CUDA_EVENT_POOL 64

typedef struct cuda_block {
    void *ptr;
    struct cuda_block *next;
} cuda_block;

#define CUDA_CLASSES 256

/* The caching allocator: blocks of rounded sizes (four classes per power of two), kept
 * in per-class free lists once released and handed out again at once: every user of a
 * block is on the device's one stream, so a block released after its last use is free
 * for work submitted later (stream order). */
typedef struct cuda_alloc {
    pthread_mutex_t mu;
    size_t cap;         /* bytes the cache may hold from cudaMalloc, in use or cached */
    size_t default_cap; /* 90% of the memory free at initialization */
    const core_config *cfg; /* the settings the cap was taken from (re-read on ct_exec_reinit) */
    size_t reserved;    /* bytes held from cudaMalloc */
    size_t in_use;      /* bytes handed out and not yet released */
    size_t cached;      /* bytes in the free lists */
    uint64_t n_malloc, n_reuse, n_empty;
    cuda_block *free_list[CUDA_CLASSES];
    cuda_block *spare;  /* list nodes to reuse */
} cuda_alloc;

/* A captured step (CUDA graph) and the temporaries its ops took during capture, which
 * the graph keeps using until step_release. */
typedef struct cuda_tmp {
    void *ptr;
    size_t bytes;
} cuda_tmp;

typedef struct cuda_graph {
    cudaGraphExec_t exec;
    int n_ops;
    ct_op_kind *kinds;      /* counted by the simulated late fault at each launch */
    cuda_tmp *tmps;
    int n_tmps, cap_tmps;
} cuda_graph;

typedef struct cuda_devx {
    cuda_dev d;             /* first: cuda_of() casts dev->priv to it */
    void *blas_ws;          /* cuBLAS workspace (fixed, so cuBLAS never allocates in a graph) */
    cuda_alloc alloc;
    pthread_mutex_t ev_mu;
    cudaEvent_t ev_pool[CUDA_EVENT_POOL];
    int n_ev_pool;
    cuda_graph *capture;    /* the step being captured (its temporaries go to it) */
    /* CTORCH_CUDA_LATE_FAULT, re-armed whenever a new config snapshot is published */
    pthread_mutex_t fault_mu;
    const core_config *fault_cfg;
    int fault_kind;         /* -1: none armed */
    long fault_left;
    bool faulted;           /* sticky until re-armed (ct_exec_reinit) */
    char fault_msg[160];
} cuda_devx;

static inline cuda_devx *cuda_x(const ct_device *dev) { return (cuda_devx *)dev->priv; }

/* Makes dev's GPU current on the calling thread (cheap when it already is). */
ct_status cuda_enter(const ct_device *dev);

/* ---- backend_mem.c ---- */
void cuda_alloc_init(cuda_alloc *a, size_t cap);
void cuda_alloc_destroy(cuda_alloc *a);
/* A block of at least `bytes`; CT_ERR_DEVICE_OOM (after emptying the cache once) when the
 * cap or the device is exhausted. */
ct_status cuda_block_get(ct_device *dev, size_t bytes, void **ptr);
void cuda_block_put(ct_device *dev, void *ptr, size_t bytes);
size_t cuda_round(size_t bytes);
ct_status cuda_mem_alloc(ct_device *dev, size_t bytes, ct_buffer *buf);
void cuda_mem_release(ct_device *dev, ct_buffer *buf);
ct_status cuda_mem_upload(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes);
ct_status cuda_mem_download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes);
ct_status cuda_mem_info(ct_device *dev, uint64_t *free_bytes, uint64_t *total_bytes);
ct_status cuda_mem_host_pin(ct_device *dev, void *ptr, size_t bytes);
void cuda_mem_host_unpin(ct_device *dev, void *ptr);

/* ---- backend.c: the simulated late fault ---- */
/* CT_ERR_DEVICE_FAULT (with the message) once the device broke, else CT_OK. */
ct_status cuda_fault_status(const ct_device *dev, const char *what);

#endif
