/* The backend core's per-device state (backend.c, program.c); op groups use the
 * accessors of ocl_internal.h instead. */
#ifndef CT_OCL_DEV_H
#define CT_OCL_DEV_H

#include <pthread.h>

#include "backends/opencl/ocl_internal.h"

#define OCL_CACHE_BUFS 32 /* freed buffers kept for reuse */
#define OCL_CACHE_MAX_BYTES ((uint64_t)256 << 20) /* and at most this many bytes of them (1/8 of the device's below) */

typedef struct ocl_kernel_entry {
    char name[64];
    cl_kernel k;
} ocl_kernel_entry;

typedef struct ocl_prog {
    int state; /* 0: not tried, 1: built, -1: does not build here */
    cl_program prog;
    ocl_kernel_entry *kernels;
    int n_kernels, cap_kernels;
} ocl_prog;

typedef struct ocl_cached_buf {
    cl_mem mem;
    size_t size;
} ocl_cached_buf;

typedef struct ocl_dev {
    cl_platform_id platform;
    cl_device_id id;
    cl_context ctx;
    cl_command_queue q;
    ocl_dev_info info;
    char name[128], driver[64], version[128], platform_name[128];
    pthread_mutex_t mu;       /* programs, kernels and the buffer cache */
    ocl_prog *progs;          /* one per embedded source */
    ocl_cached_buf cache[OCL_CACHE_BUFS];
    int n_cache;
    uint64_t cache_bytes;     /* in the cache */
    uint64_t live_bytes;      /* handed out and not released */
    uint64_t total_bytes;     /* CL_DEVICE_GLOBAL_MEM_SIZE */
} ocl_dev;

static inline ocl_dev *ocl_dev_of(const ct_device *dev) { return (ocl_dev *)dev->priv; }

/* program.c */
ct_status ocl_programs_init(ocl_dev *od);
void ocl_programs_release(ocl_dev *od);

#endif
