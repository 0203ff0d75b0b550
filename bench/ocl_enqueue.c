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
 * Usage: ctorch-bench-ocl-enqueue [ITERS]
 * H100 through NVIDIA's OpenCL (2026-11-24), host us per enqueue (wall the same: the host
 * is the bound): 1 buffer 5.2-5.5 (one kernel object or private ones, local size given or
 * not), 4 buffers 6.6, 8 buffers 8.1, 16 buffers 11.2 (16 x one cl_mem: 11.2, so each
 * buffer argument costs ~0.38 us whether or not it repeats another), a 200- or 400-byte
 * struct 5.3 (free), 15 longs 6.3. So the buffer arguments of the decode kernels (mv1x
 * 12, mv1r 15) are most of what an enqueue costs beyond the fixed ~5 us. PoCL: under 2 us. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/loader.h"

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
    "                long l, long m, long n, long o) { if (get_global_id(0) == 0) b0[0] = (float)(a + o); }\n";

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
    if (!strcmp(name, "l16"))
        for (int i = 1; i < 16; i++) err |= ocl_cl.clSetKernelArg(k, (cl_uint)i, sizeof(cl_long), blob);
    return err;
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

/* The first GPU of any platform, else the first device. */
static int pick(cl_device_id *dev, char *name, size_t len)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (ocl_cl.clGetPlatformIDs(8, plats, &np) != CL_SUCCESS || np == 0) return 0;
    int found = 0;
    for (cl_uint p = 0; p < np && found < 2; p++) {
        cl_device_id d;
        cl_uint nd = 0;
        if (ocl_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_GPU, 1, &d, &nd) == CL_SUCCESS && nd) *dev = d, found = 2;
        else if (!found && ocl_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 1, &d, &nd) == CL_SUCCESS && nd)
            *dev = d, found = 1;
    }
    if (found) ocl_cl.clGetDeviceInfo(*dev, CL_DEVICE_NAME, len, name, NULL);
    return found;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 2000;
    if (iters < 1) iters = 1;
    cl_device_id dev;
    char name[256] = "";
    if (!ocl_load() || !pick(&dev, name, sizeof name)) {
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
    printf("device: %s, %d launches per row, best of 3\n\n", name, iters);
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
