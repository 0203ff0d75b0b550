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
    size_t wg; /* CL_KERNEL_WORK_GROUP_SIZE once asked (ocl_kernel_wg), else 0 */
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
    struct ocl_capture *cap;  /* a step being captured (capture.c): launches are recorded, not enqueued */
    struct ocl_prof *prof;    /* CTORCH_OPENCL_PROFILE (profile.c): per-kernel times */
    struct ocl_pins *pins;    /* pinned host ranges and reads landing in them (pin.c) */
    bool zero_copy;           /* buffers over host memory are that memory (shared.c's probe) */
} ocl_dev;

static inline ocl_dev *ocl_dev_of(const ct_device *dev) { return (ocl_dev *)dev->priv; }

/* shared.c: zero-copy buffers over the host's memory on a device that shares it */
bool ocl_probe_zero_copy(ocl_dev *od);
ct_status ocl_alias(ct_device *dev, void *host, size_t bytes, ct_buffer *buf);
bool ocl_is_alias(const ct_buffer *buf);

/* capture.c: while od->cap is set, program.c's ocl_kernel/ocl_args/ocl_launch record
 * instead of enqueueing (see there) */
void ocl_cap_note_kernel(ocl_dev *od, cl_kernel k, cl_program prog, const char *name);
ct_status ocl_cap_note_args(ct_device *dev, cl_kernel k, int n, const ocl_arg *args);
ct_status ocl_cap_launch(ct_device *dev, cl_kernel k, const char *name, cl_uint dims, const size_t *global,
                         const size_t *local);
bool ocl_cap_keep_tmp(ocl_dev *od, cl_mem mem);
ct_status ocl_step_capture(ct_device *dev, const ct_op *ops, int n, void **handle);
ct_status ocl_step_launch(ct_device *dev, void *handle);
void ocl_step_release(ct_device *dev, void *handle);

/* profile.c: CTORCH_OPENCL_PROFILE=1 makes the queue a profiling one; every kernel launch
 * gets an event whose device time is summed per kernel name, with the host time of the
 * enqueue call, and the host's waits and markers; the table goes to stderr at exit. */
/* 0: off, 1: events and host times, 2 (CTORCH_OPENCL_PROFILE=host): host times only */
int ocl_prof_wanted(void);
void ocl_prof_init(ocl_dev *od);
void ocl_prof_release(ocl_dev *od);
/* Enqueues k (profiled when od->prof is set). */
cl_int ocl_prof_enqueue(ocl_dev *od, cl_kernel k, const char *name, cl_uint dims, const size_t *global,
                        const size_t *local);
enum { OCL_PROF_MARKER, OCL_PROF_WAIT, OCL_PROF_RUN, OCL_PROF_STEP, OCL_PROF_UPLOAD, OCL_PROF_DOWNLOAD, OCL_PROF_N };
void ocl_prof_host(ocl_dev *od, int what, uint64_t ns);
uint64_t ocl_prof_now(void);

/* pin.c: host_pin gives a host range a mapped CL_MEM_ALLOC_HOST_PTR shadow; a download
 * into it lands in the shadow (ocl_pin_read: *done) and is copied on when the host waits
 * for the queue (ocl_pin_settle; all: the queue is idle). */
ct_status ocl_host_pin(ct_device *dev, void *ptr, size_t bytes);
void ocl_host_unpin(ct_device *dev, void *ptr);
cl_int ocl_pin_read(ocl_dev *od, cl_mem mem, size_t off, void *host, size_t bytes, bool *done);
void ocl_pin_settle(ocl_dev *od, bool all);
void ocl_pins_release(ocl_dev *od);

/* program.c */
ct_status ocl_programs_init(ocl_dev *od);
void ocl_programs_release(ocl_dev *od);

#endif
