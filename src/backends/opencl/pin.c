/* Page-locked readbacks (the backend's host_pin / host_unpin). OpenCL cannot lock memory
 * the caller allocated, so a pinned range gets a shadow: a buffer made with
 * CL_MEM_ALLOC_HOST_PTR and mapped once, which NVIDIA's driver backs with page-locked
 * memory that the device writes by DMA. A download into a pinned range lands in its
 * shadow, and the host copies it on into the caller's bytes once the read is complete,
 * when the host waits for an event of that queue (ocl_pin_settle): the storage layer
 * always waits before it lets anyone read a download's destination. A read into pageable
 * memory is staged by the driver instead. On the H200 (TinyLlama-shaped Q4_K_M, `ctorch
 * bench -d opencl:0,cpu -p 0 -n 128 -r 3`, three rounds alternated with CTORCH_OPENCL_PIN=0)
 * decode went 650-665 -> 698-705 t/s, the logits' non-finite check 11-14 -> 2-3 us a
 * token. Devices whose memory is the host's (PoCL) gain nothing and are not pinned. A
 * range is pinned through one OpenCL device (the executor pins once per backend): reads
 * from the others stay staged. */
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_dev.h"

typedef struct ocl_pin {
    char *user;   /* the caller's range */
    size_t bytes;
    cl_mem mem;   /* its shadow */
    char *mapped; /* the shadow's host address */
    struct ocl_pin *next;
} ocl_pin;

typedef struct ocl_pending {
    cl_event ev; /* the read into the shadow */
    char *dst;
    const char *src;
    size_t bytes;
    struct ocl_pending *next;
} ocl_pending;

struct ocl_pins {
    pthread_mutex_t mu;
    ocl_pin *pins;
    ocl_pending *pending;
};

static struct ocl_pins *pins_of(ocl_dev *od, bool make)
{
    if (!od->pins && make) {
        struct ocl_pins *p = calloc(1, sizeof *p);
        if (!p) return NULL;
        pthread_mutex_init(&p->mu, NULL);
        od->pins = p;
    }
    return od->pins;
}

static bool g_force; /* ocl_test_pin: shadows on every device (PoCL's too) */

void ocl_test_pin(bool force) { __atomic_store_n(&g_force, force, __ATOMIC_RELAXED); }

/* CTORCH_OPENCL_PIN=0 (a diagnostic, like the capture's switches): no shadows, so reads
 * into pinned ranges are staged by the driver as before (A/B on one machine). */
static bool pin_off(void)
{
    const char *e = getenv("CTORCH_OPENCL_PIN");
    return e && !strcmp(e, "0");
}

ct_status ocl_host_pin(ct_device *dev, void *ptr, size_t bytes)
{
    ocl_dev *od = ocl_dev_of(dev);
    if (od->info.unified && !__atomic_load_n(&g_force, __ATOMIC_RELAXED)) return CT_OK; /* host memory already */
    if (pin_off()) return CT_OK;
    struct ocl_pins *ps = pins_of(od, true);
    ocl_pin *p = ps ? calloc(1, sizeof *p) : NULL;
    if (!p) return core_err(CT_ERR_OOM, "%s: out of memory pinning %zu bytes", dev->info.name, bytes);
    cl_int err = CL_SUCCESS;
    p->mem = ocl_cl.clCreateBuffer(od->ctx, CL_MEM_ALLOC_HOST_PTR | CL_MEM_READ_WRITE, bytes, NULL, &err);
    if (err == CL_SUCCESS)
        p->mapped = ocl_cl.clEnqueueMapBuffer(od->q, p->mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0, bytes, 0, NULL,
                                              NULL, &err);
    if (err != CL_SUCCESS) {
        if (p->mem) ocl_cl.clReleaseMemObject(p->mem);
        free(p);
        return ocl_status(err, dev, "pinning host memory (a mapped CL_MEM_ALLOC_HOST_PTR buffer)");
    }
    p->user = ptr, p->bytes = bytes;
    pthread_mutex_lock(&ps->mu);
    p->next = ps->pins, ps->pins = p;
    pthread_mutex_unlock(&ps->mu);
    return CT_OK;
}

/* Copies every completed read on into the caller's bytes (all of them when `all`: the
 * queue is idle) and forgets it; with `drop`, forgets them all uncopied (the caller's
 * memory may be gone). Called with ps->mu held. */
static void settle_locked(struct ocl_pins *ps, bool all, bool drop)
{
    for (ocl_pending **pp = &ps->pending; *pp;) {
        ocl_pending *q = *pp;
        cl_int status = CL_COMPLETE;
        if (!all && !drop)
            ocl_cl.clGetEventInfo(q->ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status, NULL);
        if (status > CL_COMPLETE) { /* queued, submitted or running */
            pp = &q->next;
            continue;
        }
        /* negative: the read failed, which the wait reports */
        if (status == CL_COMPLETE && !drop) memcpy(q->dst, q->src, q->bytes);
        ocl_cl.clReleaseEvent(q->ev);
        *pp = q->next;
        free(q);
    }
}

void ocl_pin_settle(ocl_dev *od, bool all)
{
    struct ocl_pins *ps = pins_of(od, false);
    if (!ps) return;
    pthread_mutex_lock(&ps->mu);
    settle_locked(ps, all, false);
    pthread_mutex_unlock(&ps->mu);
}

void ocl_host_unpin(ct_device *dev, void *ptr)
{
    ocl_dev *od = ocl_dev_of(dev);
    struct ocl_pins *ps = pins_of(od, false);
    if (!ps) return;
    ocl_cl.clFinish(od->q); /* reads still landing in the shadow finish first */
    pthread_mutex_lock(&ps->mu);
    settle_locked(ps, true, false);
    for (ocl_pin **pp = &ps->pins; *pp; pp = &(*pp)->next) {
        ocl_pin *p = *pp;
        if (p->user != ptr) continue;
        *pp = p->next;
        cl_event ev = NULL;
        if (ocl_cl.clEnqueueUnmapMemObject(od->q, p->mem, p->mapped, 0, NULL, &ev) == CL_SUCCESS && ev) {
            ocl_cl.clWaitForEvents(1, &ev);
            ocl_cl.clReleaseEvent(ev);
        }
        ocl_cl.clReleaseMemObject(p->mem);
        free(p);
        break;
    }
    pthread_mutex_unlock(&ps->mu);
}

cl_int ocl_pin_read(ocl_dev *od, cl_mem mem, size_t off, void *host, size_t bytes, bool *done)
{
    *done = false;
    struct ocl_pins *ps = pins_of(od, false);
    if (!ps) return CL_SUCCESS;
    char *h = host;
    pthread_mutex_lock(&ps->mu);
    ocl_pin *p = ps->pins;
    while (p && !(h >= p->user && h + bytes <= p->user + p->bytes)) p = p->next;
    ocl_pending *q = p ? malloc(sizeof *q) : NULL;
    cl_int err = CL_SUCCESS;
    if (q) {
        q->dst = h, q->src = p->mapped + (h - p->user), q->bytes = bytes, q->ev = NULL;
        err = ocl_cl.clEnqueueReadBuffer(od->q, mem, CL_FALSE, off, bytes, (void *)q->src, 0, NULL, &q->ev);
        if (err == CL_SUCCESS) {
            q->next = ps->pending, ps->pending = q;
            *done = true;
        } else {
            free(q);
        }
    }
    pthread_mutex_unlock(&ps->mu);
    return err;
}

void ocl_pins_release(ocl_dev *od)
{
    struct ocl_pins *ps = pins_of(od, false);
    if (!ps) return;
    pthread_mutex_lock(&ps->mu);
    settle_locked(ps, true, true);
    while (ps->pins) {
        ocl_pin *p = ps->pins;
        ps->pins = p->next;
        ocl_cl.clReleaseMemObject(p->mem); /* releasing a mapped buffer unmaps it */
        free(p);
    }
    pthread_mutex_unlock(&ps->mu);
    pthread_mutex_destroy(&ps->mu);
    free(ps);
    od->pins = NULL;
}
