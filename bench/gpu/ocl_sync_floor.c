/* What one dependency between two stages of a decode step costs on an OpenCL GPU, the
 * OpenCL counterpart of sync_floor.cu (issue 11: on NVIDIA's OpenCL a decode step is ~135
 * dependent launches, and a launch costs the device ~3.4 us and the host ~5):
 *   queue     N dependent launches in one in-order queue, each work-group reading what
 *             another wrote in the launch before; timed twice: as enqueued (wall / N: the
 *             host's enqueues or the device, whichever is slower) and behind a busy kernel
 *             (all N queued before the device reaches them: (wall - the busy kernel's) / N
 *             is the device's own cost of a link);
 *   barrier   one launch of N stages separated by grid barriers (an arrival counter the
 *             work-groups spin on, OpenCL 1.2 atomics and fences): the stage boundary of a
 *             persistent layer kernel. Its work-groups must all be resident at once, which
 *             OpenCL does not promise: only G up to one or two per compute unit is run.
 * Prints microseconds per link, medians of 7 runs of N = 1,000 links, for G = 1 and 2 work-groups
 * of 256 per compute unit. Not part of the build: on the GPU machine,
 *   cc -O2 -o ocl_sync_floor bench/gpu/ocl_sync_floor.c -lOpenCL && ./ocl_sync_floor [platform [queue]]
 * (default: the first platform with a GPU device; `queue`: no persistent kernel, e.g. on PoCL,
 * whose work-groups may share a thread and then never pass the barrier). */
#define CL_TARGET_OPENCL_VERSION 120
#include <CL/cl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { LINKS = 1000, RUNS = 7, WI = 256 };

static const char *SRC =
    "__kernel void stage(__global int *buf, int s, int nb)\n"
    "{\n"
    "    int b = get_group_id(0);\n"
    "    if (get_local_id(0) != 0) return;\n"
    "    int v = s ? ((volatile __global int *)buf)[(s - 1) % 2 * nb + (b + 1) % nb] : 0;\n"
    "    buf[s % 2 * nb + b] = v + 1;\n"
    "}\n"
    "static void grid_barrier(volatile __global uint *count, uint target)\n"
    "{\n"
    "    barrier(CLK_GLOBAL_MEM_FENCE);\n"
    "    if (get_local_id(0) == 0) {\n"
    "        mem_fence(CLK_GLOBAL_MEM_FENCE);\n"
    "        atomic_inc(count);\n"
    "        while (*count < target) {}\n"
    "        mem_fence(CLK_GLOBAL_MEM_FENCE);\n"
    "    }\n"
    "    barrier(CLK_GLOBAL_MEM_FENCE);\n"
    "}\n"
    "__kernel void persistent(__global int *buf, volatile __global uint *count, int links)\n"
    "{\n"
    "    int nb = get_num_groups(0), b = get_group_id(0);\n"
    "    for (int s = 0; s < links; s++) {\n"
    "        if (get_local_id(0) == 0) {\n"
    "            int v = s ? ((volatile __global int *)buf)[(s - 1) % 2 * nb + (b + 1) % nb] : 0;\n"
    "            buf[s % 2 * nb + b] = v + 1;\n"
    "        }\n"
    "        grid_barrier(count, (uint)(s + 1) * (uint)nb);\n"
    "    }\n"
    "}\n"
    "__kernel void busy(__global float *sink, int n)\n"
    "{\n"
    "    float x = 1.0f;\n"
    "    for (int i = 0; i < n; i++) x = x * 0.999999f + 1e-7f;\n"
    "    sink[0] = x;\n"
    "}\n";

#define CK(e)                                                                                                  \
    do {                                                                                                       \
        cl_int e_ = (e);                                                                                       \
        if (e_ != CL_SUCCESS) {                                                                                \
            fprintf(stderr, "%s:%d: %s: OpenCL error %d\n", __FILE__, __LINE__, #e, (int)e_);                  \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[n / 2];
}

static cl_device_id pick(const char *want, char *name, size_t cap)
{
    cl_platform_id ps[8];
    cl_uint np = 0;
    CK(clGetPlatformIDs(8, ps, &np));
    for (cl_uint i = 0; i < np; i++) {
        char pn[256] = "";
        clGetPlatformInfo(ps[i], CL_PLATFORM_NAME, sizeof pn, pn, NULL);
        if (want && !strstr(pn, want)) continue;
        cl_device_id d;
        cl_uint nd = 0;
        if (clGetDeviceIDs(ps[i], want ? CL_DEVICE_TYPE_ALL : CL_DEVICE_TYPE_GPU, 1, &d, &nd) != CL_SUCCESS || !nd)
            continue;
        clGetDeviceInfo(d, CL_DEVICE_NAME, cap, name, NULL);
        return d;
    }
    return NULL;
}

typedef struct {
    cl_context ctx;
    cl_command_queue q;
    cl_kernel stage, pers, busy;
    cl_mem buf, count, sink;
} Env;

/* The busy kernel with n iterations, alone: its wall time (us). */
static double busy_alone(Env *e, int n)
{
    CK(clSetKernelArg(e->busy, 1, sizeof n, &n));
    size_t one = 1;
    double t0 = now_us();
    CK(clEnqueueNDRangeKernel(e->q, e->busy, 1, NULL, &one, &one, 0, NULL, NULL));
    CK(clFinish(e->q));
    return now_us() - t0;
}

/* LINKS dependent launches of G groups, behind a busy kernel of n iterations (n = 0: none).
 * *host: the enqueues' own time (us). Returns the wall time (us). */
static double chain(Env *e, int G, int n, double *host)
{
    size_t gl = (size_t)G * WI, lo = WI, one = 1;
    if (n > 0) {
        CK(clSetKernelArg(e->busy, 1, sizeof n, &n));
        CK(clEnqueueNDRangeKernel(e->q, e->busy, 1, NULL, &one, &one, 0, NULL, NULL));
    }
    double t0 = now_us();
    for (int s = 0; s < LINKS; s++) {
        CK(clSetKernelArg(e->stage, 1, sizeof s, &s));
        CK(clEnqueueNDRangeKernel(e->q, e->stage, 1, NULL, &gl, &lo, 0, NULL, NULL));
    }
    *host = now_us() - t0;
    CK(clFlush(e->q));
    CK(clFinish(e->q));
    return now_us() - t0;
}

static double persistent(Env *e, int G)
{
    size_t gl = (size_t)G * WI, lo = WI;
    cl_uint zero = 0;
    int links = LINKS;
    CK(clEnqueueWriteBuffer(e->q, e->count, CL_TRUE, 0, sizeof zero, &zero, 0, NULL, NULL));
    CK(clSetKernelArg(e->pers, 2, sizeof links, &links));
    double t0 = now_us();
    CK(clEnqueueNDRangeKernel(e->q, e->pers, 1, NULL, &gl, &lo, 0, NULL, NULL));
    CK(clFinish(e->q));
    return now_us() - t0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    bool with_barrier = !(argc > 2 && strcmp(argv[2], "queue") == 0);
    char name[256] = "";
    cl_device_id dev = pick(argc > 1 ? argv[1] : NULL, name, sizeof name);
    if (!dev) {
        printf("skipped: no OpenCL GPU device%s%s\n", argc > 1 ? " on a platform named like " : "", argc > 1 ? argv[1] : "");
        return 0;
    }
    cl_uint cu = 0;
    CK(clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cu, &cu, NULL));
    cl_int err;
    Env e;
    e.ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CK(err);
    e.q = clCreateCommandQueue(e.ctx, dev, 0, &err);
    CK(err);
    cl_program p = clCreateProgramWithSource(e.ctx, 1, &SRC, NULL, &err);
    CK(err);
    if (clBuildProgram(p, 1, &dev, "", NULL, NULL) != CL_SUCCESS) {
        char log[4096] = "";
        clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, NULL);
        fprintf(stderr, "build failed:\n%s\n", log);
        return 1;
    }
    e.stage = clCreateKernel(p, "stage", &err);
    CK(err);
    e.pers = clCreateKernel(p, "persistent", &err);
    CK(err);
    e.busy = clCreateKernel(p, "busy", &err);
    CK(err);
    int nbmax = 2 * (int)cu;
    e.buf = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, sizeof(int) * 2 * (size_t)nbmax, NULL, &err);
    CK(err);
    e.count = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, sizeof(cl_uint), NULL, &err);
    CK(err);
    e.sink = clCreateBuffer(e.ctx, CL_MEM_READ_WRITE, sizeof(float), NULL, &err);
    CK(err);
    CK(clSetKernelArg(e.stage, 0, sizeof e.buf, &e.buf));
    CK(clSetKernelArg(e.pers, 0, sizeof e.buf, &e.buf));
    CK(clSetKernelArg(e.pers, 1, sizeof e.count, &e.count));
    CK(clSetKernelArg(e.busy, 0, sizeof e.sink, &e.sink));
    printf("%s, %u compute units; us per link, median of %d runs of %d links\n", name, cu, RUNS, LINKS);
    printf("| groups of %d | queue (wall) | its enqueues (host) | queue behind a busy kernel (device) | one launch, grid barriers |\n",
           WI);
    printf("|---:|---:|---:|---:|---:|\n");
    /* a busy kernel long enough to cover the host's 1,000 enqueues */
    int n = 1 << 16;
    while (busy_alone(&e, n) < 30000.0 && n < (1 << 28)) n *= 2;
    for (int k = 1; k <= 2; k++) {
        int G = k * (int)cu;
        CK(clSetKernelArg(e.stage, 2, sizeof G, &G));
        double wall[RUNS], host[RUNS], dev_t[RUNS], bar[RUNS], h;
        chain(&e, G, 0, &h); /* warm-up */
        if (with_barrier) persistent(&e, G);
        for (int r = 0; r < RUNS; r++) {
            wall[r] = chain(&e, G, 0, &host[r]) / LINKS;
            double b0 = busy_alone(&e, n), held = chain(&e, G, n, &h);
            double b1 = busy_alone(&e, n);
            dev_t[r] = (held - (b0 + b1) / 2) / LINKS;
            bar[r] = with_barrier ? persistent(&e, G) / LINKS : 0.0;
        }
        char bs[32] = "not run";
        if (with_barrier) snprintf(bs, sizeof bs, "%.2f", median(bar, RUNS));
        printf("| %d | %.2f | %.2f | %.2f | %s |\n", G, median(wall, RUNS), median(host, RUNS) / LINKS,
               median(dev_t, RUNS), bs);
    }
    /* the last run (G = 2 cu): its last stage wrote LINKS into every slot */
    int *last = calloc(2 * (size_t)nbmax, sizeof(int)), bad = 0;
    CK(clEnqueueReadBuffer(e.q, e.buf, CL_TRUE, 0, sizeof(int) * 2 * (size_t)nbmax, last, 0, NULL, NULL));
    for (int b = 0; b < nbmax; b++) bad += last[(LINKS - 1) % 2 * nbmax + b] != LINKS;
    printf("check: %d of %d work-groups' last values wrong (each link adds one to its neighbour's)\n", bad, nbmax);
    free(last);
    return bad != 0;
}
