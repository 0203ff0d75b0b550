/* Zero-copy on a device whose memory is the host's (CL_DEVICE_HOST_UNIFIED_MEMORY: PoCL on
 * the CPU, integrated GPUs): the device's copy of host data is a CL_MEM_USE_HOST_PTR buffer
 * over the host copy's own bytes, so making data valid there or back on the host moves
 * nothing (core/storage.c orders the accesses).
 *
 * The standard lets an implementation keep its own copy of such a buffer and reconcile it
 * only at map and unmap; reporting unified memory does not promise otherwise. So each device
 * is probed once: a buffer over host bytes that a device command fills must show the fill in
 * those bytes with no map, and bytes the host writes after must reach a device command. Only
 * a device that passes says CT_DEVICE_HOST_SHARED. CTORCH_OPENCL_ZERO_COPY=0 leaves every
 * device copying (to measure what the copies cost). */
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_dev.h"

#define PROBE_BYTES 4096
#define HOST_ALIGN 64 /* the host allocator's boundary (core/alloc.c): memory it hands out */

static bool zero_copy_wanted(void)
{
    const char *e = getenv("CTORCH_OPENCL_ZERO_COPY");
    return !(e && e[0] == '0');
}

/* One fill through the device into host bytes, one host write read back by the device. */
static bool probe_buffers(ocl_dev *od, unsigned char *host, cl_mem shared, cl_mem own)
{
    cl_uchar pattern = 0x5a;
    unsigned char back[PROBE_BYTES];
    memset(host, 0, PROBE_BYTES);
    if (ocl_cl.clEnqueueFillBuffer(od->q, shared, &pattern, 1, 0, PROBE_BYTES, 0, NULL, NULL) != CL_SUCCESS ||
        ocl_cl.clFinish(od->q) != CL_SUCCESS)
        return false;
    for (int i = 0; i < PROBE_BYTES; i++)
        if (host[i] != pattern) return false;
    for (int i = 0; i < PROBE_BYTES; i++) host[i] = (unsigned char)(i * 7 + 1);
    if (ocl_cl.clEnqueueCopyBuffer(od->q, shared, own, 0, 0, PROBE_BYTES, 0, NULL, NULL) != CL_SUCCESS ||
        ocl_cl.clEnqueueReadBuffer(od->q, own, CL_TRUE, 0, PROBE_BYTES, back, 0, NULL, NULL) != CL_SUCCESS)
        return false;
    return memcmp(back, host, PROBE_BYTES) == 0;
}

bool ocl_probe_zero_copy(ocl_dev *od)
{
    if (!od->info.unified || !zero_copy_wanted()) return false;
    /* at a 64-byte boundary that is not a 128-byte one: the least aligned host memory */
    unsigned char *mem = aligned_alloc(4096, 2 * PROBE_BYTES), *host = mem ? mem + HOST_ALIGN : NULL;
    if (!mem) return false;
    cl_int e1, e2;
    cl_mem shared = ocl_cl.clCreateBuffer(od->ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, PROBE_BYTES, host, &e1);
    cl_mem own = ocl_cl.clCreateBuffer(od->ctx, CL_MEM_READ_WRITE, PROBE_BYTES, NULL, &e2);
    bool ok = e1 == CL_SUCCESS && e2 == CL_SUCCESS && probe_buffers(od, host, shared, own);
    if (shared) ocl_cl.clReleaseMemObject(shared);
    if (own) ocl_cl.clReleaseMemObject(own);
    ocl_cl.clFinish(od->q); /* the buffers are gone before their memory */
    free(mem);
    return ok;
}

/* ct_buffer.priv is NULL for these (a buffer of the backend's own has its size there). */
ct_status ocl_alias(ct_device *dev, void *host, size_t bytes, ct_buffer *buf)
{
    ocl_dev *od = ocl_dev_of(dev);
    if (!od->zero_copy || (uintptr_t)host % HOST_ALIGN || bytes > od->info.max_alloc)
        return core_err(CT_ERR_UNSUPPORTED, "%s: no buffer over this host memory", dev->info.name);
    cl_int err;
    cl_mem m = ocl_cl.clCreateBuffer(od->ctx, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, bytes, host, &err);
    ct_status s = ocl_status(err, dev, "clCreateBuffer over host memory");
    if (s != CT_OK) return s;
    *buf = (ct_buffer){m, bytes, NULL, false, 0};
    return CT_OK;
}

bool ocl_is_alias(const ct_buffer *buf) { return buf->priv == NULL; }
