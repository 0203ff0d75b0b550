/* Recorded steps on OpenCL: "plan once, enqueue the list at launch". OpenCL 1.2 has no
 * graphs and NVIDIA reports no cl_khr_command_buffer, so a captured step is the list of its
 * kernel launches, each with a kernel object of its own whose arguments were set once at
 * capture. A launch is then one clEnqueueNDRangeKernel per kernel: no op dispatch, no
 * argument setting, no per-op event marker or flush (the executor records one event after
 * the whole list).
 *
 * Capture runs each op's ordinary run function with od->cap set: ocl_kernel notes which
 * program and name a shared kernel object stands for, ocl_args keeps a copy of the
 * arguments, and ocl_launch makes the private kernel and records the launch instead of
 * enqueueing it. Temporaries an op frees during capture stay with the step until it is
 * released (the launches read them every time). Anything that would enqueue by another
 * path (CLBlast) checks ocl_capturing() and takes its own kernels instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_dev.h"
#include "core/config.h"

#define CAP_MAX_ARGS 64

typedef struct cap_arg {
    size_t size;
    unsigned char *val; /* NULL: local memory of size bytes */
} cap_arg;

typedef struct cap_known { /* a shared kernel object seen during capture */
    cl_kernel k;
    cl_program prog;
    char name[64];
    cap_arg args[CAP_MAX_ARGS];
    int n_args;
} cap_known;

typedef struct cap_launch {
    cl_kernel k; /* owned */
    char name[64];
    cl_uint dims;
    size_t global[3], local[3];
    bool has_local;
} cap_launch;

typedef struct ocl_capture {
    cap_known *known;
    int n_known, cap_known;
    cap_launch *launches;
    int n_launches, cap_launches;
    cl_mem *tmps;
    int n_tmps, cap_tmps;
    bool failed; /* out of host memory noting something: the capture is declined */
} ocl_capture;

bool ocl_capturing(const ct_device *dev) { return ocl_dev_of(dev)->cap != NULL; }

static bool grow(void **arr, int *cap, int n, size_t elem)
{
    if (n < *cap) return true;
    int c = *cap ? *cap * 2 : 64;
    void *p = realloc(*arr, elem * (size_t)c);
    if (!p) return false;
    *arr = p;
    *cap = c;
    return true;
}

static cap_known *find_known(ocl_capture *c, cl_kernel k)
{
    for (int i = 0; i < c->n_known; i++)
        if (c->known[i].k == k) return &c->known[i];
    return NULL;
}

void ocl_cap_note_kernel(ocl_dev *od, cl_kernel k, cl_program prog, const char *name)
{
    ocl_capture *c = od->cap;
    if (find_known(c, k)) return;
    if (!grow((void **)&c->known, &c->cap_known, c->n_known, sizeof *c->known)) {
        c->failed = true;
        return;
    }
    cap_known *e = &c->known[c->n_known++];
    memset(e, 0, sizeof *e);
    e->k = k;
    e->prog = prog;
    snprintf(e->name, sizeof e->name, "%s", name);
}

ct_status ocl_cap_note_args(ct_device *dev, cl_kernel k, int n, const ocl_arg *args)
{
    ocl_capture *c = ocl_dev_of(dev)->cap;
    cap_known *e = find_known(c, k);
    if (!e) return core_err(CT_ERR_UNSUPPORTED, "%s: capture: arguments for a kernel not looked up", dev->info.name);
    if (n > CAP_MAX_ARGS)
        return core_err(CT_ERR_UNSUPPORTED, "%s: capture: kernel %s has %d arguments (at most %d)", dev->info.name,
                        e->name, n, CAP_MAX_ARGS);
    for (int i = 0; i < n; i++) {
        cap_arg *a = &e->args[i];
        free(a->val);
        a->val = NULL;
        a->size = args[i].size;
        if (args[i].value) {
            a->val = malloc(args[i].size ? args[i].size : 1);
            if (!a->val) return core_err(CT_ERR_OOM, "%s: capture: out of host memory", dev->info.name);
            memcpy(a->val, args[i].value, args[i].size);
        }
    }
    if (n > e->n_args) e->n_args = n;
    return CT_OK;
}

ct_status ocl_cap_launch(ct_device *dev, cl_kernel k, const char *name, cl_uint dims, const size_t *global,
                         const size_t *local)
{
    ocl_dev *od = ocl_dev_of(dev);
    ocl_capture *c = od->cap;
    cap_known *e = find_known(c, k);
    if (!e || dims > 3) return core_err(CT_ERR_UNSUPPORTED, "%s: capture: launch of %s not seen", dev->info.name, name);
    if (!grow((void **)&c->launches, &c->cap_launches, c->n_launches, sizeof *c->launches))
        return core_err(CT_ERR_OOM, "%s: capture: out of host memory", dev->info.name);
    cl_int err;
    cl_kernel own = ocl_cl.clCreateKernel(e->prog, e->name, &err);
    ct_status s = ocl_status(err, dev, "clCreateKernel (step capture)");
    for (int i = 0; s == CT_OK && i < e->n_args; i++)
        s = ocl_status(ocl_cl.clSetKernelArg(own, (cl_uint)i, e->args[i].size, e->args[i].val), dev,
                       "clSetKernelArg (step capture)");
    if (s != CT_OK) {
        if (own) ocl_cl.clReleaseKernel(own);
        return s;
    }
    cap_launch *l = &c->launches[c->n_launches++];
    memset(l, 0, sizeof *l);
    l->k = own;
    snprintf(l->name, sizeof l->name, "%s", name);
    l->dims = dims;
    l->has_local = local != NULL;
    for (cl_uint d = 0; d < dims; d++) {
        l->global[d] = global[d];
        if (local) l->local[d] = local[d];
    }
    return CT_OK;
}

bool ocl_cap_keep_tmp(ocl_dev *od, cl_mem mem)
{
    ocl_capture *c = od->cap;
    if (!c) return false;
    if (!grow((void **)&c->tmps, &c->cap_tmps, c->n_tmps, sizeof *c->tmps)) {
        c->failed = true; /* the step is declined; the buffer is then freed with the rest */
        return false;
    }
    c->tmps[c->n_tmps++] = mem;
    return true;
}

static void cap_free(ct_device *dev, ocl_capture *c)
{
    if (!c) return;
    for (int i = 0; i < c->n_known; i++)
        for (int j = 0; j < c->known[i].n_args; j++) free(c->known[i].args[j].val);
    free(c->known);
    for (int i = 0; i < c->n_launches; i++) ocl_cl.clReleaseKernel(c->launches[i].k);
    free(c->launches);
    for (int i = 0; i < c->n_tmps; i++) ocl_tmp_free(dev, c->tmps[i], 0);
    free(c->tmps);
    free(c);
}

/* The kernel-argument copies are only needed while capturing. */
static void drop_known(ocl_capture *c)
{
    for (int i = 0; i < c->n_known; i++)
        for (int j = 0; j < c->known[i].n_args; j++) free(c->known[i].args[j].val);
    free(c->known);
    c->known = NULL;
    c->n_known = c->cap_known = 0;
}

static bool capture_disabled(void)
{
    const char *e = getenv("CTORCH_OPENCL_CAPTURE"); /* a diagnostic switch: 0 replays op by op */
    return e && !strcmp(e, "0");
}

ct_status ocl_step_capture(ct_device *dev, const ct_op *ops, int n, void **handle)
{
    *handle = NULL;
    if (capture_disabled()) return core_err(CT_ERR_UNSUPPORTED, "%s: CTORCH_OPENCL_CAPTURE=0", dev->info.name);
    ocl_dev *od = ocl_dev_of(dev);
    ocl_capture *c = calloc(1, sizeof *c);
    if (!c) return core_err(CT_ERR_OOM, "%s: out of host memory capturing a step", dev->info.name);
    od->cap = c;
    ct_status s = CT_OK;
    int fused = 0;
    bool pairs_off = !config_current()->fuse; /* CTORCH_FUSE=0: op by op */
    for (int i = 0; i < n && s == CT_OK;) {
        int used = ocl_quant_fuse(dev, ops + i, n - i);
        if (!used && !pairs_off) used = ocl_nn_pair(dev, ops + i, n - i);
        if (used > 0) {
            fused += used;
            i += used;
        } else {
            s = dev->ops->run(dev, &ops[i++]);
        }
    }
    od->cap = NULL;
    if (s == CT_OK && c->failed) s = core_err(CT_ERR_OOM, "%s: out of host memory capturing a step", dev->info.name);
    if (s != CT_OK) {
        cap_free(dev, c); /* nothing was enqueued: the temporaries are free for anyone */
        return s == CT_ERR_DEVICE_FAULT ? core_err(CT_ERR_UNSUPPORTED, "%s", ct_last_error()) : s;
    }
    drop_known(c);
    core_log(CT_LOG_INFO, "%s: step of %d ops captured as %d kernel launches (%d ops in fused launches)",
             dev->info.name, n, c->n_launches, fused);
    for (int i = 0; i < c->n_launches; i++) /* the list the launch count is made of (CTORCH_LOG=debug) */
        core_log(CT_LOG_DEBUG, "%s: captured launch %d: %s", dev->info.name, i, c->launches[i].name);
    *handle = c;
    return CT_OK;
}

/* Launches between flushes (CTORCH_OPENCL_FLUSH_EVERY=N; 0, the default: only the
 * executor's flush after the step). Flushing as we go was meant to let the device start
 * while the host enqueues the rest, but NVIDIA's driver starts work without it: on the
 * H100 (TinyLlama Q4_K_M tg128, 2026-11-24) no flush gave 337 and 393 t/s in two runs,
 * every 8 launches 336 and 385, every 32 308 and 381, every 64-128 327-377; again with the
 * rope launch fused (113 launches a token, ocl8): none 554, every 8 548, every 32 525. */
static int flush_every(void)
{
    const char *e = getenv("CTORCH_OPENCL_FLUSH_EVERY");
    return e && *e ? atoi(e) : 0;
}

/* CTORCH_OPENCL_HOLD=N (a diagnostic): a kernel busy for N dependent steps goes ahead of
 * each replayed step, so the step's launches wait in the queue and then run back to back:
 * the wall time of a step minus the hold's own (CTORCH_OPENCL_PROFILE=1 shows it) is the
 * device's time for the step when the host's enqueue rate does not bound it. */
static ct_status hold(ct_device *dev)
{
    const char *e = getenv("CTORCH_OPENCL_HOLD");
    cl_int n = e && *e ? (cl_int)atoi(e) : 0;
    if (n <= 0) return CT_OK;
    cl_kernel k;
    cl_mem sink = NULL;
    cl_float seed = 1.0f;
    size_t one = 1;
    ct_status s = ocl_kernel(dev, "ew", "ew_hold", &k);
    if (s == CT_OK) s = ocl_tmp_alloc(dev, sizeof(float), &sink);
    if (s == CT_OK) s = OCL_SET_ARGS(dev, k, "ew_hold", OCL_ARG(sink), OCL_ARG(n), OCL_ARG(seed));
    if (s == CT_OK) s = ocl_launch(dev, k, "ew_hold", 1, &one, &one);
    if (sink) ocl_tmp_free(dev, sink, sizeof(float));
    return s;
}

/* CTORCH_OPENCL_STEP_CUT=N (a diagnostic, with CTORCH_OPENCL_HOLD): a replay enqueues only
 * the step's first N launches (the list is in CTORCH_LOG=debug), so that the held device
 * time of a step cut at N and at N + k gives the device time of those k launches where
 * they run, after their real predecessors; the step's outputs are then wrong. */
static int step_cut(int n)
{
    const char *e = getenv("CTORCH_OPENCL_STEP_CUT");
    int k = e && *e ? atoi(e) : n;
    return k >= 0 && k < n ? k : n;
}

ct_status ocl_step_launch(ct_device *dev, void *handle)
{
    ocl_dev *od = ocl_dev_of(dev);
    ocl_capture *c = handle;
    uint64_t t0 = od->prof ? ocl_prof_now() : 0;
    int every = flush_every(), n = step_cut(c->n_launches);
    ct_status hs = hold(dev);
    if (hs != CT_OK) return hs;
    for (int i = 0; i < n; i++) {
        const cap_launch *l = &c->launches[i];
        if (every > 0 && i > 0 && i % every == 0) {
            cl_int ferr = ocl_cl.clFlush(od->q);
            if (ferr != CL_SUCCESS) return ocl_status(ferr, dev, "clFlush (step launch)");
        }
        cl_int err = ocl_prof_enqueue(od, l->k, l->name, l->dims, l->global, l->has_local ? l->local : NULL);
        if (err != CL_SUCCESS) {
            char what[96];
            snprintf(what, sizeof what, "launching captured kernel %s", l->name);
            return ocl_status(err, dev, what);
        }
    }
    if (od->prof) ocl_prof_host(od, OCL_PROF_STEP, ocl_prof_now() - t0);
    return CT_OK;
}

/* The launches already enqueued keep their kernel objects alive (OpenCL retains what a
 * queued command uses), and a temporary freed here is reused only by later work. */
void ocl_step_release(ct_device *dev, void *handle) { cap_free(dev, handle); }
