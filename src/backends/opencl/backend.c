/* The OpenCL backend core: devices, memory, the in-order queue and events. Programs and
 * the kernel cache are in program.c, the op groups in ew.c, nn*.c and quant*.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/loader.h"
#include "backends/opencl/ocl_dev.h"
#include "core/config.h"

/* ---- discovery: GPUs and accelerators first, then CPU devices ---- */

#define OCL_MAX_DEVS 16
typedef struct ocl_found {
    cl_platform_id platform;
    cl_device_id id;
    cl_device_type type;
} ocl_found;

static ocl_found g_found[OCL_MAX_DEVS];
static int g_n_found;
static pthread_once_t g_found_once = PTHREAD_ONCE_INIT;

static int type_rank(cl_device_type t) { return (t & CL_DEVICE_TYPE_GPU) ? 0 : (t & CL_DEVICE_TYPE_CPU) ? 2 : 1; }

static void find_devices(void)
{
    if (!ocl_load()) return;
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (ocl_cl.clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) return; /* no platform: no device */
    for (int rank = 0; rank < 3; rank++)
        for (cl_uint p = 0; p < np && p < 8; p++) {
            cl_device_id ids[OCL_MAX_DEVS];
            cl_uint nd = 0;
            if (ocl_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, OCL_MAX_DEVS, ids, &nd) != CL_SUCCESS) continue;
            for (cl_uint d = 0; d < nd && d < OCL_MAX_DEVS && g_n_found < OCL_MAX_DEVS; d++) {
                cl_device_type t = 0;
                cl_bool avail = CL_FALSE;
                ocl_cl.clGetDeviceInfo(ids[d], CL_DEVICE_TYPE, sizeof t, &t, NULL);
                ocl_cl.clGetDeviceInfo(ids[d], CL_DEVICE_AVAILABLE, sizeof avail, &avail, NULL);
                if (!avail || type_rank(t) != rank) continue;
                g_found[g_n_found++] = (ocl_found){plats[p], ids[d], t};
            }
        }
}

static int ocl_device_count(void)
{
    pthread_once(&g_found_once, find_devices);
    return g_n_found;
}

/* ---- errors ---- */

static const char *cl_err_name(cl_int e)
{
    switch (e) {
    case CL_DEVICE_NOT_AVAILABLE: return "CL_DEVICE_NOT_AVAILABLE";
    case CL_MEM_OBJECT_ALLOCATION_FAILURE: return "CL_MEM_OBJECT_ALLOCATION_FAILURE";
    case CL_OUT_OF_RESOURCES: return "CL_OUT_OF_RESOURCES";
    case CL_OUT_OF_HOST_MEMORY: return "CL_OUT_OF_HOST_MEMORY";
    case CL_BUILD_PROGRAM_FAILURE: return "CL_BUILD_PROGRAM_FAILURE";
    case CL_INVALID_VALUE: return "CL_INVALID_VALUE";
    case CL_INVALID_MEM_OBJECT: return "CL_INVALID_MEM_OBJECT";
    case CL_INVALID_KERNEL_ARGS: return "CL_INVALID_KERNEL_ARGS";
    case CL_INVALID_ARG_SIZE: return "CL_INVALID_ARG_SIZE";
    case CL_INVALID_ARG_VALUE: return "CL_INVALID_ARG_VALUE";
    case CL_INVALID_ARG_INDEX: return "CL_INVALID_ARG_INDEX";
    case CL_INVALID_WORK_GROUP_SIZE: return "CL_INVALID_WORK_GROUP_SIZE";
    case CL_INVALID_WORK_ITEM_SIZE: return "CL_INVALID_WORK_ITEM_SIZE";
    case CL_INVALID_GLOBAL_WORK_SIZE: return "CL_INVALID_GLOBAL_WORK_SIZE";
    case CL_INVALID_BUFFER_SIZE: return "CL_INVALID_BUFFER_SIZE";
    case CL_INVALID_EVENT: return "CL_INVALID_EVENT";
    case CL_INVALID_KERNEL_NAME: return "CL_INVALID_KERNEL_NAME";
    case CL_INVALID_BINARY: return "CL_INVALID_BINARY";
    case CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: return "CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST";
    default: return "OpenCL error";
    }
}

ct_status ocl_status(cl_int err, const ct_device *dev, const char *what)
{
    if (err == CL_SUCCESS) return CT_OK;
    ct_status s = CT_ERR_DEVICE_FAULT;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_RESOURCES || err == CL_OUT_OF_HOST_MEMORY ||
        err == CL_INVALID_BUFFER_SIZE)
        s = CT_ERR_DEVICE_OOM;
    else if (err == CL_INVALID_WORK_GROUP_SIZE || err == CL_INVALID_WORK_ITEM_SIZE || err == CL_INVALID_GLOBAL_WORK_SIZE)
        s = CT_ERR_UNSUPPORTED;
    return core_err(s, "%s: %s failed: %s (%d)", dev ? dev->info.name : "opencl", what, cl_err_name(err), (int)err);
}

const ocl_dev_info *ocl_info(const ct_device *dev) { return &ocl_dev_of(dev)->info; }

/* ---- devices ---- */

static bool has_ext(cl_device_id id, const char *ext)
{
    size_t n = 0;
    if (ocl_cl.clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, 0, NULL, &n) != CL_SUCCESS || !n) return false;
    char *s = malloc(n + 1);
    if (!s) return false;
    bool found = false;
    if (ocl_cl.clGetDeviceInfo(id, CL_DEVICE_EXTENSIONS, n, s, NULL) == CL_SUCCESS) {
        s[n] = 0;
        size_t len = strlen(ext);
        for (const char *p = strstr(s, ext); p && !found; p = strstr(p + 1, ext))
            found = (p == s || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0);
    }
    free(s);
    return found;
}

static bool g_no_fp64;

void ocl_test_hide_fp64(bool hide) { __atomic_store_n(&g_no_fp64, hide, __ATOMIC_RELAXED); }

static void dev_string(cl_device_id id, cl_device_info what, char *out, size_t cap)
{
    out[0] = 0;
    if (ocl_cl.clGetDeviceInfo(id, what, cap, out, NULL) != CL_SUCCESS) out[0] = 0;
    out[cap - 1] = 0;
}


static void read_info(ocl_dev *od, const ocl_found *f)
{
    ocl_dev_info *in = &od->info;
    cl_bool unified = CL_FALSE;
    ocl_cl.clGetDeviceInfo(f->id, CL_DEVICE_HOST_UNIFIED_MEMORY, sizeof unified, &unified, NULL);
    ocl_cl.clGetDeviceInfo(f->id, CL_DEVICE_MAX_WORK_GROUP_SIZE, sizeof in->max_wg, &in->max_wg, NULL);
    ocl_cl.clGetDeviceInfo(f->id, CL_DEVICE_LOCAL_MEM_SIZE, sizeof in->local_mem, &in->local_mem, NULL);
    ocl_cl.clGetDeviceInfo(f->id, CL_DEVICE_MAX_MEM_ALLOC_SIZE, sizeof in->max_alloc, &in->max_alloc, NULL);
    ocl_cl.clGetDeviceInfo(f->id, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof in->compute_units, &in->compute_units, NULL);
    cl_ulong total = 0;
    ocl_cl.clGetDeviceInfo(f->id, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof total, &total, NULL);
    od->total_bytes = total;
    in->type = f->type;
    in->unified = unified == CL_TRUE;
    in->fp16 = has_ext(f->id, "cl_khr_fp16");
    in->fp64 = has_ext(f->id, "cl_khr_fp64") && !__atomic_load_n(&g_no_fp64, __ATOMIC_RELAXED);
    in->subgroups = has_ext(f->id, "cl_khr_subgroups");
    in->dp4a = has_ext(f->id, "cl_nv_device_attribute_query") && ocl_nv_dp4a(f->id);
    dev_string(f->id, CL_DEVICE_VENDOR, in->vendor, sizeof in->vendor);
    dev_string(f->id, CL_DEVICE_NAME, od->name, sizeof od->name);
    dev_string(f->id, CL_DRIVER_VERSION, od->driver, sizeof od->driver);
    dev_string(f->id, CL_DEVICE_VERSION, od->version, sizeof od->version);
    od->platform_name[0] = 0;
    ocl_cl.clGetPlatformInfo(f->platform, CL_PLATFORM_NAME, sizeof od->platform_name, od->platform_name, NULL);
    od->platform_name[sizeof od->platform_name - 1] = 0;
}

static void ocl_device_release(ct_device *dev)
{
    ocl_dev *od = ocl_dev_of(dev);
    if (!od) return;
    if (od->q) ocl_cl.clFinish(od->q); /* nothing may still use what is released below */
    ocl_pins_release(od);
    ocl_prof_release(od);
    ocl_programs_release(od);
    for (int i = 0; i < od->n_cache; i++) ocl_cl.clReleaseMemObject(od->cache[i].mem);
    if (od->q) ocl_cl.clReleaseCommandQueue(od->q);
    if (od->ctx) ocl_cl.clReleaseContext(od->ctx);
    pthread_mutex_destroy(&od->mu);
    free(od);
    dev->priv = NULL;
}

static ct_status ocl_device_init(ct_device *dev, int index)
{
    if (index < 0 || index >= ocl_device_count()) return core_err(CT_ERR_NOT_FOUND, "opencl: no device %d", index);
    const ocl_found *f = &g_found[index];
    ocl_dev *od = calloc(1, sizeof *od);
    if (!od) return core_err(CT_ERR_OOM, "opencl: no memory for device state");
    pthread_mutex_init(&od->mu, NULL);
    dev->priv = od;
    od->platform = f->platform;
    od->id = f->id;
    read_info(od, f);
    cl_int err;
    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)f->platform, 0};
    od->ctx = ocl_cl.clCreateContext(props, 1, &f->id, NULL, NULL, &err);
    ct_status s = ocl_status(err, dev, "clCreateContext");
    if (s == CT_OK) {
        int prof = ocl_prof_wanted();
        od->q = ocl_cl.clCreateCommandQueue(od->ctx, f->id, prof == 1 ? CL_QUEUE_PROFILING_ENABLE : 0, &err); /* in order */
        s = ocl_status(err, dev, "clCreateCommandQueue");
        if (s == CT_OK && prof) ocl_prof_init(od);
    }
    if (s == CT_OK) s = ocl_programs_init(od);
    if (s == CT_OK) od->zero_copy = ocl_probe_zero_copy(od);
    if (s != CT_OK) {
        ocl_device_release(dev);
        return s;
    }
    char desc[sizeof od->name + sizeof od->platform_name + 4];
    snprintf(desc, sizeof desc, "%s (%s)", od->name, od->platform_name);
    snprintf(dev->info.description, sizeof dev->info.description, "%.127s", desc);
    dev->info.memory_bytes = od->total_bytes;
    dev->info.dtype_mask = 0;
    for (int t = 0; t < CT_DTYPE_COUNT; t++)
        if (t != CT_C64 && (t != CT_F64 || od->info.fp64)) dev->info.dtype_mask |= 1u << t;
    dev->info.flags = 0;
    if (od->info.unified) dev->info.flags |= CT_DEVICE_UNIFIED;
    if (od->zero_copy) dev->info.flags |= CT_DEVICE_HOST_SHARED; /* its copies of host data are that data */
    if (f->type & CL_DEVICE_TYPE_CPU) dev->info.flags |= CT_DEVICE_HOST_CPU;
    return CT_OK;
}

/* ---- ops ---- */

static bool ocl_supports(const ct_device *dev, const ct_op *op)
{
    return ocl_quant_supports(dev, op) || ocl_nn_supports(dev, op) || ocl_ew_supports(dev, op);
}

static ct_status run_group(ct_device *dev, const ct_op *op)
{
    if (ocl_quant_supports(dev, op)) return ocl_quant_run(dev, op);
    if (ocl_nn_supports(dev, op)) return ocl_nn_run(dev, op);
    if (ocl_ew_supports(dev, op)) return ocl_ew_run(dev, op);
    return core_err(CT_ERR_UNSUPPORTED, "%s: %s is not supported here", dev->info.name, op_kind_name(op->kind));
}

static ct_status ocl_run(ct_device *dev, const ct_op *op)
{
    ocl_dev *od = ocl_dev_of(dev);
    if (!od->prof || od->cap) return run_group(dev, op);
    uint64_t t0 = ocl_prof_now();
    ct_status s = run_group(dev, op);
    ocl_prof_host(od, OCL_PROF_RUN, ocl_prof_now() - t0);
    return s;
}

/* ---- memory ---- */

/* A freed buffer of at least `bytes` and at most twice that, or NULL. Caller holds mu. */
static cl_mem take_cached(ocl_dev *od, size_t bytes, size_t *size)
{
    int best = -1;
    for (int i = 0; i < od->n_cache; i++)
        if (od->cache[i].size >= bytes && od->cache[i].size / 2 <= bytes &&
            (best < 0 || od->cache[i].size < od->cache[best].size))
            best = i;
    if (best < 0) return NULL;
    cl_mem m = od->cache[best].mem;
    *size = od->cache[best].size;
    od->cache_bytes -= *size;
    od->cache[best] = od->cache[--od->n_cache];
    return m;
}

static void drop_cache(ocl_dev *od)
{
    for (int i = 0; i < od->n_cache; i++) ocl_cl.clReleaseMemObject(od->cache[i].mem);
    od->n_cache = 0;
    od->cache_bytes = 0;
}

/* OpenCL allocates lazily (at first use); migrating the buffer to the device now makes a
 * failure show here, synchronously, where the executor can retry the op elsewhere. */
static ct_status make_resident(ct_device *dev, cl_mem m, size_t bytes)
{
    ocl_dev *od = ocl_dev_of(dev);
    cl_int err;
    if (config_current()->opencl_poison) {
        cl_uchar ff = 0xff; /* all-ones bytes: NaN in every float type, so unwritten output shows */
        err = ocl_cl.clEnqueueFillBuffer(od->q, m, &ff, 1, 0, bytes, 0, NULL, NULL);
    } else {
        err = ocl_cl.clEnqueueMigrateMemObjects(od->q, 1, &m, CL_MIGRATE_MEM_OBJECT_CONTENT_UNDEFINED, 0, NULL, NULL);
    }
    return ocl_status(err, dev, "making a new buffer resident");
}

static void free_mem(ct_device *dev, cl_mem m, size_t size);

static ct_status alloc_mem(ct_device *dev, size_t bytes, cl_mem *out, size_t *size)
{
    ocl_dev *od = ocl_dev_of(dev);
    if (bytes == 0) bytes = 1;
    if (bytes > od->info.max_alloc)
        return core_err(CT_ERR_DEVICE_OOM, "%s: %zu bytes exceed the largest allocation (%llu bytes)", dev->info.name,
                        bytes, (unsigned long long)od->info.max_alloc);
    pthread_mutex_lock(&od->mu);
    cl_mem m = take_cached(od, bytes, size);
    if (!m && od->live_bytes + od->cache_bytes + bytes > od->total_bytes) drop_cache(od);
    if (!m && od->live_bytes + bytes > od->total_bytes) {
        pthread_mutex_unlock(&od->mu);
        return core_err(CT_ERR_DEVICE_OOM, "%s: %zu bytes do not fit (%llu of %llu in use)", dev->info.name, bytes,
                        (unsigned long long)od->live_bytes, (unsigned long long)od->total_bytes);
    }
    if (m) od->live_bytes += *size;
    pthread_mutex_unlock(&od->mu);
    if (m && config_current()->opencl_poison) { /* a reused buffer is as fresh as a new one */
        ct_status s = make_resident(dev, m, *size);
        if (s != CT_OK) {
            free_mem(dev, m, *size);
            return s;
        }
    }
    if (m) {
        *out = m;
        return CT_OK;
    }
    cl_int err;
    m = ocl_cl.clCreateBuffer(od->ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    ct_status s = ocl_status(err, dev, "clCreateBuffer");
    if (s == CT_OK) s = make_resident(dev, m, bytes);
    if (s != CT_OK) {
        if (m) ocl_cl.clReleaseMemObject(m);
        return s == CT_ERR_DEVICE_FAULT ? core_err(CT_ERR_DEVICE_OOM, "%s", ct_last_error()) : s;
    }
    pthread_mutex_lock(&od->mu);
    od->live_bytes += bytes;
    pthread_mutex_unlock(&od->mu);
    *out = m;
    *size = bytes;
    return CT_OK;
}

/* Released in queue order by construction: the queue is in order, so work enqueued later
 * on a reused buffer runs after the work that used it before; OpenCL keeps a released
 * buffer alive until the commands using it are done. */
static void free_mem(ct_device *dev, cl_mem m, size_t size)
{
    ocl_dev *od = ocl_dev_of(dev);
    pthread_mutex_lock(&od->mu);
    od->live_bytes -= size;
    uint64_t cap = od->total_bytes / 8 < OCL_CACHE_MAX_BYTES ? od->total_bytes / 8 : OCL_CACHE_MAX_BYTES;
    bool keep = od->n_cache < OCL_CACHE_BUFS && od->cache_bytes + size <= cap;
    if (keep) {
        od->cache[od->n_cache++] = (ocl_cached_buf){m, size};
        od->cache_bytes += size;
    }
    pthread_mutex_unlock(&od->mu);
    if (!keep) ocl_cl.clReleaseMemObject(m);
}

static ct_status ocl_alloc(ct_device *dev, size_t bytes, ct_buffer *buf)
{
    cl_mem m = NULL;
    size_t size = 0;
    ct_status s = alloc_mem(dev, bytes, &m, &size);
    if (s != CT_OK) return s;
    buf->ptr = m;
    buf->size = bytes;
    buf->priv = (void *)(uintptr_t)size;
    return CT_OK;
}

static void ocl_release(ct_device *dev, ct_buffer *buf)
{
    if (buf->ptr && ocl_is_alias(buf)) ocl_cl.clReleaseMemObject((cl_mem)buf->ptr); /* never cached: not ours */
    else if (buf->ptr) free_mem(dev, (cl_mem)buf->ptr, (size_t)(uintptr_t)buf->priv);
    buf->ptr = NULL;
}

ct_status ocl_tmp_alloc(ct_device *dev, size_t bytes, cl_mem *out)
{
    size_t size = 0;
    return alloc_mem(dev, bytes, out, &size);
}

void ocl_tmp_free(ct_device *dev, cl_mem mem, size_t bytes)
{
    (void)bytes; /* a reused buffer may be larger than asked: its own size is what was counted */
    size_t size = 0;
    if (!mem || ocl_cap_keep_tmp(ocl_dev_of(dev), mem)) return; /* a captured step's: kept until its release */
    if (ocl_cl.clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof size, &size, NULL) != CL_SUCCESS) size = bytes;
    free_mem(dev, mem, size);
}

ct_status ocl_zero_now(ct_device *dev, cl_mem mem, size_t off, size_t bytes)
{
    cl_uchar zero = 0;
    cl_int err = ocl_cl.clEnqueueFillBuffer(ocl_dev_of(dev)->q, mem, &zero, 1, off, bytes, 0, NULL, NULL);
    return ocl_status(err, dev, "zeroing a buffer");
}

static ct_status ocl_mem_info(ct_device *dev, uint64_t *free_bytes, uint64_t *total_bytes)
{
    ocl_dev *od = ocl_dev_of(dev);
    pthread_mutex_lock(&od->mu);
    *total_bytes = od->total_bytes;
    *free_bytes = od->total_bytes > od->live_bytes ? od->total_bytes - od->live_bytes : 0;
    pthread_mutex_unlock(&od->mu);
    return CT_OK;
}

cl_mem ocl_mem(const ct_tensor *t, const ct_device *dev, cl_ulong *byte_off)
{
    ct_storage_copy *c = storage_find(t->st, dev);
    if (!c || !c->buf.ptr) return NULL;
    if (byte_off) *byte_off = tensor_byte_offset(t) + c->buf.offset;
    return (cl_mem)c->buf.ptr;
}

/* ---- transfers: non-blocking both ways; the storage layer keeps the host memory alive
 * and orders readers with events ---- */

static ct_status ocl_upload(ct_device *dev, ct_buffer *buf, size_t off, const void *host, size_t bytes)
{
    if (!bytes) return CT_OK;
    uint64_t t0 = ocl_dev_of(dev)->prof ? ocl_prof_now() : 0;
    cl_int err = ocl_cl.clEnqueueWriteBuffer(ocl_dev_of(dev)->q, (cl_mem)buf->ptr, CL_FALSE, buf->offset + off, bytes, host, 0, NULL,
                                             NULL);
    if (t0) ocl_prof_host(ocl_dev_of(dev), OCL_PROF_UPLOAD, ocl_prof_now() - t0);
    return ocl_status(err, dev, "upload (clEnqueueWriteBuffer)");
}

static ct_status ocl_download(ct_device *dev, const ct_buffer *buf, size_t off, void *host, size_t bytes)
{
    if (!bytes) return CT_OK;
    uint64_t t0 = ocl_dev_of(dev)->prof ? ocl_prof_now() : 0;
    bool pinned;
    cl_int err = ocl_pin_read(ocl_dev_of(dev), (cl_mem)buf->ptr, buf->offset + off, host, bytes, &pinned);
    if (err == CL_SUCCESS && !pinned)
        err = ocl_cl.clEnqueueReadBuffer(ocl_dev_of(dev)->q, (cl_mem)buf->ptr, CL_FALSE, buf->offset + off, bytes, host,
                                         0, NULL, NULL);
    if (t0) ocl_prof_host(ocl_dev_of(dev), OCL_PROF_DOWNLOAD, ocl_prof_now() - t0);
    return ocl_status(err, dev, "download (clEnqueueReadBuffer)");
}

/* ---- queue and events ---- */

static ct_status ocl_sync(ct_device *dev)
{
    uint64_t t0 = ocl_dev_of(dev)->prof ? ocl_prof_now() : 0;
    cl_int err = ocl_cl.clFinish(ocl_dev_of(dev)->q);
    if (t0) ocl_prof_host(ocl_dev_of(dev), OCL_PROF_WAIT, ocl_prof_now() - t0);
    if (err == CL_SUCCESS) ocl_pin_settle(ocl_dev_of(dev), true);
    return ocl_status(err, dev, "clFinish");
}

static ct_status ocl_event_record(ct_device *dev, void **handle)
{
    ocl_dev *od = ocl_dev_of(dev);
    cl_event ev = NULL;
    uint64_t t0 = od->prof ? ocl_prof_now() : 0;
    cl_int err = ocl_cl.clEnqueueMarkerWithWaitList(od->q, 0, NULL, &ev);
    if (err == CL_SUCCESS) err = ocl_cl.clFlush(od->q); /* so a host or another queue waiting on it sees progress */
    if (t0) ocl_prof_host(od, OCL_PROF_MARKER, ocl_prof_now() - t0);
    if (err != CL_SUCCESS && ev) ocl_cl.clReleaseEvent(ev);
    *handle = err == CL_SUCCESS ? ev : NULL;
    return ocl_status(err, dev, "recording an event (clEnqueueMarkerWithWaitList)");
}

/* A negative execution status is an error the device reported late. */
static ct_status event_outcome(ct_device *dev, cl_event ev)
{
    cl_int st = CL_COMPLETE;
    cl_int err = ocl_cl.clGetEventInfo(ev, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof st, &st, NULL);
    if (err != CL_SUCCESS) return ocl_status(err, dev, "clGetEventInfo");
    return st < 0 ? ocl_status(st, dev, "queued work") : CT_OK;
}

static ct_status ocl_event_sync(ct_device *dev, void *handle)
{
    cl_event ev = handle;
    uint64_t t0 = ocl_dev_of(dev)->prof ? ocl_prof_now() : 0;
    cl_int err = ocl_cl.clWaitForEvents(1, &ev);
    if (t0) ocl_prof_host(ocl_dev_of(dev), OCL_PROF_WAIT, ocl_prof_now() - t0);
    if (err == CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST) return event_outcome(dev, ev);
    if (err != CL_SUCCESS) return ocl_status(err, dev, "clWaitForEvents");
    ct_status s = event_outcome(dev, ev);
    if (s == CT_OK) ocl_pin_settle(ocl_dev_of(dev), false); /* reads into pinned rows that are done */
    return s;
}

/* Events of a device in the same context are waited for by the queue; each device has a
 * context of its own, so across devices the host waits (correct, and rare: two OpenCL
 * devices in one chain). */
static ct_status ocl_event_wait(ct_device *dev, ct_device *ev_dev, void *handle)
{
    ocl_dev *od = ocl_dev_of(dev), *oe = ocl_dev_of(ev_dev);
    cl_event ev = handle;
    if (od->ctx == oe->ctx) {
        cl_int err = ocl_cl.clEnqueueBarrierWithWaitList(od->q, 1, &ev, NULL);
        return ocl_status(err, dev, "waiting for an event (clEnqueueBarrierWithWaitList)");
    }
    return ocl_event_sync(ev_dev, handle);
}

static void ocl_event_release(ct_device *dev, void *handle)
{
    (void)dev;
    if (handle) ocl_cl.clReleaseEvent((cl_event)handle);
}

const ct_backend_ops opencl_backend_ops = {
    .name = "opencl",
    .kind = CT_DEVICE_OPENCL,
    .handle_buffers = true,
    .device_count = ocl_device_count,
    .device_init = ocl_device_init,
    .device_release = ocl_device_release,
    .supports = ocl_supports,
    .alloc = ocl_alloc,
    .release = ocl_release,
    .alias = ocl_alias,
    .upload = ocl_upload,
    .download = ocl_download,
    .run = ocl_run,
    .sync = ocl_sync,
    .mem_info = ocl_mem_info,
    .import = ocl_quant_import,
    .host_pin = ocl_host_pin,
    .host_unpin = ocl_host_unpin,
    .event_record = ocl_event_record,
    .event_wait = ocl_event_wait,
    .event_sync = ocl_event_sync,
    .event_release = ocl_event_release,
    .step_capture = ocl_step_capture,
    .step_launch = ocl_step_launch,
    .step_release = ocl_step_release,
};
