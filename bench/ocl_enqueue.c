/* ctorch-bench-ocl-enqueue: what one clEnqueueNDRangeKernel costs the host on an OpenCL
 * device, by the shape of the launch (not a timed test; run it on the GPU machine). A
 * replayed decode step is a list of launches whose arguments were set at capture
 * (src/backends/opencl/capture.c), and on NVIDIA's OpenCL the host's enqueue time per
 * launch, not the kernels, bounds the token rate; this isolates what that time depends on.
 * Each row enqueues a trivial kernel (one work-item stores one float) ITERS times, 64
 * work-groups of 64, and prints the host us per enqueue and the wall us per launch once
 * the queue has drained (clFinish after the batch). Variants:
 *   buffers N      N global pointer arguments, each its own cl_mem (or N x one cl_mem: "same")
 *   struct B       one by-value struct argument of B bytes beside one buffer
 *   kernels        one kernel object for all launches, or a private one per launch in a
 *                  list of 128 (as a captured step holds them)
 *   local NULL     no local size given (the driver picks)
 *   local arrays   four local-memory arguments beside one buffer
 *   addresses      16 buffers' device addresses in a by-value struct (read once by a kernel
 *                  that stores its pointer argument), one buffer argument
 *   held           the launches queued behind one busy kernel that outlasts their enqueues:
 *                  (wall - the busy kernel alone) / ITERS is the device's own cost a launch
 * Before the rows: the device's SVM capabilities, whether buffer addresses stay put across
 * launches and whether stores through addresses in a struct land.
 * Usage: ctorch-bench-ocl-enqueue [ITERS]
 * H100 through NVIDIA's OpenCL (2026-11-24), host us per enqueue (wall the same: the host
 * is the bound): 1 buffer 5.2-5.5 (one kernel object or private ones, local size given or
 * not), 4 buffers 6.6, 8 buffers 8.1, 16 buffers 11.2 (16 x one cl_mem: 11.2, so each
 * buffer argument costs ~0.38 us whether or not it repeats another), a 200- or 400-byte
 * struct 5.3 (free), 15 longs 6.3. So the buffer arguments of the decode kernels (mv1x
 * 12, mv1r 15) are most of what an enqueue costs beyond the fixed ~5 us. PoCL: under 2 us.
 * H200 (2026-11-29, two machines of one session): 1 buffer 4.3-5.9 us, 16 buffers 12.1, 4
 * local arrays 4.4 (free), 16 addresses in a struct 4.3-5.7 (as one buffer). Queued behind
 * a hold (the "held" rows: the device's own rate), a launch takes the device 2.06 us with 1
 * buffer and 3.91 with 16: each buffer argument costs the device ~0.12 us too. The device
 * reports coarse-grained buffer SVM (capabilities 0x1), and the addresses a kernel sees
 * stay put across launches, with stores through addresses in a struct landing: pointers
 * outside the argument list are possible there (spec-conformant through SVM). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/loader.h"
#include "ocl_bench.h"

#define NPRIV 128
#define MAXB 16

static const char *SRC =
    "typedef struct { ulong v[25]; } s200;\n"
    "typedef struct { ulong v[50]; } s400;\n"
    "#define P(i) global float *b##i\n"
    "kernel void b1(P(0)) { if (get_global_id(0) == 0) b0[0] = 1.0f; }\n"
    "kernel void b4(P(0), P(1), P(2), P(3)) { if (get_global_id(0) == 0) b0[0] = 1.0f; }\n"
    "kernel void b8(P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7)) { if (get_global_id(0) == 0) b0[0] = 1.0f; }\n"
    "kernel void b16(P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8), P(9), P(10), P(11), P(12), P(13),\n"
    "                P(14), P(15)) { if (get_global_id(0) == 0) b0[0] = 1.0f; }\n"
    "kernel void s1(P(0), s200 a) { if (get_global_id(0) == 0) b0[0] = (float)a.v[3]; }\n"
    "kernel void s2(P(0), s400 a) { if (get_global_id(0) == 0) b0[0] = (float)a.v[3]; }\n"
    "kernel void l16(P(0), long a, long b, long c, long d, long e, long f, long g, long h, long i, long j, long k,\n"
    "                long l, long m, long n, long o) { if (get_global_id(0) == 0) b0[0] = (float)(a + o); }\n"
    "kernel void loc4(P(0), local float *a, local float *b, local float *c, local float *d) {\n"
    "    a[get_local_id(0)] = 1.0f; barrier(CLK_LOCAL_MEM_FENCE); if (get_global_id(0) == 0) b0[0] = a[1]; }\n"
    "kernel void addr(P(0), global ulong *out, int i) { if (get_global_id(0) == 0) out[i] = (ulong)b0; }\n"
    "kernel void a16(P(0), s200 a) { if (get_global_id(0) == 0) *(global float *)a.v[3] = 1.0f; }\n"
    "kernel void hold(P(0), int n) { float a = 1.0f; for (int i = 0; i < n; i++) a = fma(a, 0.999999f, 1e-7f);\n"
    "    if (a == -1.0f) b0[0] = a; }\n"
    "kernel void a16w(P(0), s200 a) { if (get_global_id(0) < 16) *(global float *)a.v[get_global_id(0)] = 2.0f; }\n";

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e6 * (double)ts.tv_sec + 1e-3 * (double)ts.tv_nsec;
}

typedef struct env {
    cl_context ctx;
    cl_command_queue q;
    cl_program prog;
    cl_mem bufs[MAXB];
    cl_ulong addrs[25]; /* bufs' device addresses, as a kernel sees them (addresses()) */
} env;

static int fail(const char *what, cl_int err)
{
    fprintf(stderr, "ctorch-bench-ocl-enqueue: %s failed (%d)\n", what, (int)err);
    return 1;
}

/* Arguments of kernel `name` on k: nbuf buffers (distinct, or bufs[0] repeated), then the
 * kernel's by-value extras. */
static cl_int set_args(env *e, cl_kernel k, const char *name, int nbuf, int same)
{
    cl_int err = CL_SUCCESS;
    for (int i = 0; i < nbuf && err == CL_SUCCESS; i++)
        err = ocl_cl.clSetKernelArg(k, (cl_uint)i, sizeof(cl_mem), &e->bufs[same ? 0 : i]);
    unsigned char blob[400] = {0};
    if (!strcmp(name, "s1")) err |= ocl_cl.clSetKernelArg(k, 1, 200, blob);
    if (!strcmp(name, "s2")) err |= ocl_cl.clSetKernelArg(k, 1, 400, blob);
    if (!strcmp(name, "loc4"))
        for (int i = 1; i < 5; i++) err |= ocl_cl.clSetKernelArg(k, (cl_uint)i, 256 * sizeof(float), NULL);
    if (!strcmp(name, "a16") || !strcmp(name, "a16w")) err |= ocl_cl.clSetKernelArg(k, 1, 200, e->addrs);
    if (!strcmp(name, "l16"))
        for (int i = 1; i < 16; i++) err |= ocl_cl.clSetKernelArg(k, (cl_uint)i, sizeof(cl_long), blob);
    return err;
}

/* The device address of each buffer, read by a kernel that stores its pointer argument,
 * twice (a buffer that moved between launches would show), then a kernel that writes
 * through those addresses from a struct: whether pointers outside the argument list
 * work on this device at all (OpenCL 1.2 does not promise it; SVM would). */
static int addresses(env *e)
{
    cl_int err;
    cl_mem out = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, 2 * MAXB * sizeof(cl_ulong), NULL, &err);
    if (err != CL_SUCCESS) return fail("clCreateBuffer", err);
    cl_kernel k = ocl_cl.clCreateKernel(e->prog, "addr", &err);
    if (err != CL_SUCCESS) return fail("clCreateKernel addr", err);
    size_t g = 1;
    cl_ulong got[2 * MAXB];
    for (int i = 0; i < 2 * MAXB && err == CL_SUCCESS; i++) {
        cl_int idx = i;
        err = ocl_cl.clSetKernelArg(k, 0, sizeof(cl_mem), &e->bufs[i % MAXB]);
        err |= ocl_cl.clSetKernelArg(k, 1, sizeof(cl_mem), &out);
        err |= ocl_cl.clSetKernelArg(k, 2, sizeof idx, &idx);
        if (err == CL_SUCCESS) err = ocl_cl.clEnqueueNDRangeKernel(e->q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    }
    if (err == CL_SUCCESS) err = ocl_cl.clEnqueueReadBuffer(e->q, out, CL_TRUE, 0, sizeof got, got, 0, NULL, NULL);
    ocl_cl.clReleaseKernel(k);
    if (err != CL_SUCCESS) return fail("reading buffer addresses", err);
    int stable = 1;
    for (int i = 0; i < MAXB; i++) stable &= got[i] == got[MAXB + i], e->addrs[i] = got[i];
    float two[MAXB] = {0};
    k = ocl_cl.clCreateKernel(e->prog, "a16w", &err);
    if (err == CL_SUCCESS) err = set_args(e, k, "a16w", 1, 0);
    g = 64;
    if (err == CL_SUCCESS) err = ocl_cl.clEnqueueNDRangeKernel(e->q, k, 1, NULL, &g, NULL, 0, NULL, NULL);
    for (int i = 0; i < MAXB && err == CL_SUCCESS; i++)
        err = ocl_cl.clEnqueueReadBuffer(e->q, e->bufs[i], CL_TRUE, 0, sizeof(float), &two[i], 0, NULL, NULL);
    if (k) ocl_cl.clReleaseKernel(k);
    ocl_cl.clReleaseMemObject(out);
    int ok = err == CL_SUCCESS;
    for (int i = 0; i < MAXB; i++) ok &= two[i] == 2.0f;
    printf("buffer addresses stable across launches: %s; stores through addresses in a struct: %s\n\n",
           stable ? "yes" : "no", ok ? "landed" : "did not land");
    return 0;
}

/* Wall us of one `hold` launch of n steps alone (best of 3), and the kernel itself. */
static double hold_us(env *e, cl_kernel *hk, int n)
{
    cl_int err;
    *hk = ocl_cl.clCreateKernel(e->prog, "hold", &err);
    if (err != CL_SUCCESS) return -1;
    ocl_cl.clSetKernelArg(*hk, 0, sizeof(cl_mem), &e->bufs[0]);
    ocl_cl.clSetKernelArg(*hk, 1, sizeof n, &n);
    size_t one = 1;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        ocl_cl.clFinish(e->q);
        double t0 = now_us();
        ocl_cl.clEnqueueNDRangeKernel(e->q, *hk, 1, NULL, &one, &one, 0, NULL, NULL);
        ocl_cl.clFinish(e->q);
        double t = now_us() - t0;
        if (t < best) best = t;
    }
    return best;
}

/* The device's own rate: ITERS launches of `name` queued behind a hold that outlasts
 * their enqueueing, so they run back to back; (wall - the hold alone) / ITERS. */
static int drain_row(env *e, const char *label, const char *name, int nbuf, int iters)
{
    cl_kernel hk, k;
    cl_int err;
    int n = 1 << 20;
    double h = hold_us(e, &hk, n);
    while (h > 0 && h < 3.0 * iters * 15.0 && n < (1 << 30)) { /* outlast ~15 us an enqueue, 3x */
        ocl_cl.clReleaseKernel(hk);
        n *= 2;
        h = hold_us(e, &hk, n);
    }
    if (h < 0) return fail("the hold kernel", -1);
    k = ocl_cl.clCreateKernel(e->prog, name, &err);
    if (err != CL_SUCCESS || set_args(e, k, name, nbuf, 0) != CL_SUCCESS) return fail("clCreateKernel", err);
    size_t one = 1, local = 64, global = 64 * 64;
    double best = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        ocl_cl.clFinish(e->q);
        double t0 = now_us();
        ocl_cl.clEnqueueNDRangeKernel(e->q, hk, 1, NULL, &one, &one, 0, NULL, NULL);
        for (int i = 0; i < iters; i++) ocl_cl.clEnqueueNDRangeKernel(e->q, k, 1, NULL, &global, &local, 0, NULL, NULL);
        ocl_cl.clFinish(e->q);
        double t = now_us() - t0;
        if (t < best) best = t;
    }
    printf("| %-34s | %8s | %8.2f |\n", label, "(held)", (best - h) / iters);
    ocl_cl.clReleaseKernel(k);
    ocl_cl.clReleaseKernel(hk);
    return 0;
}

/* One row: ITERS launches of `name`; private: a list of NPRIV kernel objects cycled. */
static int row(env *e, const char *label, const char *name, int nbuf, int same, int priv, int local_null, int iters)
{
    cl_kernel ks[NPRIV];
    int nk = priv ? NPRIV : 1;
    cl_int err;
    for (int i = 0; i < nk; i++) {
        ks[i] = ocl_cl.clCreateKernel(e->prog, name, &err);
        if (err != CL_SUCCESS) return fail("clCreateKernel", err);
        if ((err = set_args(e, ks[i], name, nbuf, same)) != CL_SUCCESS) return fail("clSetKernelArg", err);
    }
    size_t local = 64, global = 64 * 64;
    double best_host = 1e30, best_wall = 1e30;
    for (int rep = 0; rep < 3; rep++) {
        ocl_cl.clFinish(e->q);
        double t0 = now_us();
        for (int i = 0; i < iters; i++) {
            err = ocl_cl.clEnqueueNDRangeKernel(e->q, ks[i % nk], 1, NULL, &global, local_null ? NULL : &local, 0, NULL,
                                                NULL);
            if (err != CL_SUCCESS) return fail("clEnqueueNDRangeKernel", err);
        }
        double t1 = now_us();
        ocl_cl.clFinish(e->q);
        double t2 = now_us();
        if ((t1 - t0) / iters < best_host) best_host = (t1 - t0) / iters;
        if ((t2 - t0) / iters < best_wall) best_wall = (t2 - t0) / iters;
    }
    printf("| %-34s | %8.2f | %8.2f |\n", label, best_host, best_wall);
    for (int i = 0; i < nk; i++) ocl_cl.clReleaseKernel(ks[i]);
    return 0;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (iters < 1) iters = 1;
    cl_device_id dev;
    char name[256] = "";
    if (!ocl_load() || !ob_pick_device(&dev, name, sizeof name)) {
        fprintf(stderr, "ctorch-bench-ocl-enqueue: no OpenCL device\n");
        return 77;
    }
    env e = {0};
    cl_int err;
    e.ctx = ocl_cl.clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err != CL_SUCCESS) return fail("clCreateContext", err);
    e.q = ocl_cl.clCreateCommandQueue(e.ctx, dev, 0, &err);
    if (err != CL_SUCCESS) return fail("clCreateCommandQueue", err);
    for (int i = 0; i < MAXB; i++) {
        e.bufs[i] = ocl_cl.clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
        if (err != CL_SUCCESS) return fail("clCreateBuffer", err);
    }
    e.prog = ocl_cl.clCreateProgramWithSource(e.ctx, 1, &SRC, NULL, &err);
    if (err == CL_SUCCESS) err = ocl_cl.clBuildProgram(e.prog, 1, &dev, "", NULL, NULL);
    if (err != CL_SUCCESS) return fail("building the kernels", err);
    cl_bitfield svm = 0;
    ocl_cl.clGetDeviceInfo(dev, 0x1053 /* CL_DEVICE_SVM_CAPABILITIES */, sizeof svm, &svm, NULL);
    printf("device: %s, %d launches per row, best of 3; SVM capabilities 0x%llx\n", name, iters,
           (unsigned long long)svm);
    if (addresses(&e)) return 1;
    printf("| launch | host us/enqueue | wall us/launch |\n| --- | ---: | ---: |\n");
    int rc = 0;
    rc |= row(&e, "1 buffer, one kernel object", "b1", 1, 0, 0, 0, iters);
    rc |= row(&e, "1 buffer, private objects", "b1", 1, 0, 1, 0, iters);
    rc |= row(&e, "1 buffer, private, local NULL", "b1", 1, 0, 1, 1, iters);
    rc |= row(&e, "4 buffers, private", "b4", 4, 0, 1, 0, iters);
    rc |= row(&e, "8 buffers, private", "b8", 8, 0, 1, 0, iters);
    rc |= row(&e, "16 buffers, private", "b16", 16, 0, 1, 0, iters);
    rc |= row(&e, "16 x the same buffer, private", "b16", 16, 1, 1, 0, iters);
    rc |= row(&e, "1 buffer + 200-byte struct, private", "s1", 1, 0, 1, 0, iters);
    rc |= row(&e, "1 buffer + 400-byte struct, private", "s2", 1, 0, 1, 0, iters);
    rc |= row(&e, "1 buffer + 15 longs, private", "l16", 1, 0, 1, 0, iters);
    rc |= row(&e, "1 buffer + 4 local arrays, private", "loc4", 1, 0, 1, 0, iters);
    rc |= row(&e, "1 buffer + 16 addresses in a struct", "a16", 1, 0, 1, 0, iters);
    rc |= drain_row(&e, "1 buffer, queued behind a hold", "b1", 1, iters);
    rc |= drain_row(&e, "16 buffers, queued behind a hold", "b16", 16, iters);
    for (int i = 0; i < MAXB; i++) ocl_cl.clReleaseMemObject(e.bufs[i]);
    ocl_cl.clReleaseProgram(e.prog);
    ocl_cl.clReleaseCommandQueue(e.q);
    ocl_cl.clReleaseContext(e.ctx);
    return rc;
}
#else
int main(void)
{
    fprintf(stderr, "ctorch-bench-ocl-enqueue: built without OpenCL\n");
    return 77;
}
#endif
