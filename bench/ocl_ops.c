/* ctorch-bench-ocl-ops: the OpenCL backend's element-wise ops and GEMM against yardsticks on
 * the same machine (not a timed test; a Release build on the GPU machine):
 *   element-wise GB/s (bytes read + written per op / time) on 64M-element tensors, next to a
 *   device-to-device clEnqueueCopyBuffer of the same bytes in a context of our own on the
 *   same device (2 x bytes / time);
 *   host data through an op and back (the transfers both ways), zero-copy next to copied on a
 *   device whose memory is the host's (PoCL);
 *   f32 and f16 GEMM GFLOP/s through ct_matmul on the OpenCL device (CLBlast for f32 where
 *   it loads, own kernels otherwise), next to the same ops on cuda:0 (cuBLAS, f32 without
 *   TF32) when there is one.
 * Ops are forced onto the device with their inputs placed there (bench/dev_bench.h).
 * Usage: ctorch-bench-ocl-ops [DEVICE [LOG2_ELEMENTS [GEMM_N]]]   (default opencl:0 26 4096;
 * smaller for a CPU device). Output: one table on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ctorch.h"
#include "dev_bench.h"

#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/loader.h"

/* A copy between two buffers of `bytes` on the first device whose name matches `name`
 * (else the first GPU, else the first device): GB/s counting read + write. 0 on failure. */
static double cl_copy_gbps(const char *name, size_t bytes)
{
    cl_platform_id plats[8];
    cl_uint np = 0;
    if (!ocl_load() || ocl_cl.clGetPlatformIDs(8, plats, &np) != CL_SUCCESS) return 0;
    cl_device_id pick = NULL, gpu = NULL, any = NULL;
    for (cl_uint p = 0; p < np && p < 8; p++) {
        cl_device_id ids[8];
        cl_uint nd = 0;
        if (ocl_cl.clGetDeviceIDs(plats[p], CL_DEVICE_TYPE_ALL, 8, ids, &nd) != CL_SUCCESS) continue;
        for (cl_uint d = 0; d < nd && d < 8; d++) {
            char dn[256] = "";
            cl_device_type ty = 0;
            ocl_cl.clGetDeviceInfo(ids[d], CL_DEVICE_NAME, sizeof dn, dn, NULL);
            ocl_cl.clGetDeviceInfo(ids[d], CL_DEVICE_TYPE, sizeof ty, &ty, NULL);
            if (!pick && name && strstr(name, dn)) pick = ids[d];
            if (!gpu && (ty & CL_DEVICE_TYPE_GPU)) gpu = ids[d];
            if (!any) any = ids[d];
        }
    }
    cl_device_id dev = pick ? pick : gpu ? gpu : any;
    cl_int err = CL_SUCCESS;
    cl_context ctx = dev ? ocl_cl.clCreateContext(NULL, 1, &dev, NULL, NULL, &err) : NULL;
    if (!ctx) return 0;
    cl_command_queue q = ocl_cl.clCreateCommandQueue(ctx, dev, 0, &err);
    cl_mem a = ocl_cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem b = ocl_cl.clCreateBuffer(ctx, CL_MEM_READ_WRITE, bytes, NULL, &err);
    double best = 1e30;
    for (int round = 0; q && a && b && round < 6; round++) {
        double t0 = db_now();
        for (int i = 0; i < 10; i++) ocl_cl.clEnqueueCopyBuffer(q, a, b, 0, 0, bytes, 0, NULL, NULL);
        if (ocl_cl.clFinish(q) != CL_SUCCESS) break;
        double t = (db_now() - t0) / 10;
        if (round > 0 && t < best) best = t;
    }
    if (a) ocl_cl.clReleaseMemObject(a);
    if (b) ocl_cl.clReleaseMemObject(b);
    if (q) ocl_cl.clReleaseCommandQueue(q);
    ocl_cl.clReleaseContext(ctx);
    return best < 1e30 ? 2.0 * (double)bytes / best / 1e9 : 0;
}
#else
static double cl_copy_gbps(const char *name, size_t bytes)
{
    (void)name, (void)bytes;
    return 0;
}
#endif

static ct_status do_add(ct_tensor *const *in, ct_tensor **out) { return ct_add_out(in[0], in[1], *out); }
static ct_status do_mul_s(ct_tensor *const *in, ct_tensor **out) { return ct_mul_scalar_out(in[0], 1.5, *out); }
static ct_status do_exp(ct_tensor *const *in, ct_tensor **out) { return ct_exp_out(in[0], *out); }
static ct_status do_matmul(ct_tensor *const *in, ct_tensor **out) { return ct_matmul_out(in[0], in[1], *out); }

/* The device's description for the copy yardstick's device match (and its CT_DEVICE_*
 * flags), and whether it exists. */
static bool dev_desc(const char *dev, char *desc, size_t cap, uint32_t *flags)
{
    for (int i = 0; i < ct_device_count(); i++) {
        ct_device_info info;
        if (ct_device_get(i, &info) == CT_OK && !strcmp(info.name, dev)) {
            snprintf(desc, cap, "%s", info.description);
            if (flags) *flags = info.flags;
            return true;
        }
    }
    return false;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Host data through an op on dev and back: the host writes x, x *= 1 runs on dev in place,
 * the host reads x (the read waits for it). Microseconds a round, the median of 7 after one
 * warm-up: the transfers both ways and the op. */
static double round_trip_us(const char *dev, int64_t n)
{
    ct_tensor *x = NULL;
    if (ct_randn(1, &n, CT_F32, 7, &x) != CT_OK) db_die("randn");
    double t[8];
    for (int r = 0; r < 8; r++) {
        float *p = NULL;
        const void *d = NULL;
        if (ct_tensor_data_mut(x, (void **)&p) != CT_OK) db_die("write");
        p[0] = (float)r; /* new host data: the device's copy is stale */
        double t0 = db_now();
        if (ct_exec_force_device(dev) != CT_OK || ct_mul_scalar_out(x, 1.0, x) != CT_OK) db_die("mul_scalar");
        ct_exec_record rec;
        if (ct_exec_last(&rec) != CT_OK || strcmp(rec.device, dev) != 0) db_die("the op ran elsewhere");
        ct_exec_force_device(NULL);
        if (ct_tensor_data(x, &d) != CT_OK) db_die("read");
        t[r] = db_now() - t0;
    }
    ct_tensor_free(x);
    qsort(t + 1, 7, sizeof *t, cmp_double);
    return 1e6 * t[4];
}

/* Round trips of host data on dev; where its memory is the host's (zero-copy), the same with
 * the copies (CTORCH_OPENCL_ZERO_COPY=0, the devices made anew) beside them. */
static void host_rows(const char *dev, uint32_t flags)
{
    static const int lg[] = {16, 20, 24};
    enum { NS = sizeof lg / sizeof lg[0] };
    double zc[NS], cp[NS];
    for (int i = 0; i < NS; i++) zc[i] = round_trip_us(dev, (int64_t)1 << lg[i]);
    bool shared = flags & CT_DEVICE_HOST_SHARED;
    if (shared) {
        ct_exec_shutdown();
        setenv("CTORCH_OPENCL_ZERO_COPY", "0", 1);
        for (int i = 0; i < NS; i++) cp[i] = round_trip_us(dev, (int64_t)1 << lg[i]);
        unsetenv("CTORCH_OPENCL_ZERO_COPY");
        ct_exec_shutdown();
    }
    for (int i = 0; i < NS; i++) {
        printf("| host f32 in, x *= 1, read back | %lld | %.0f us (%s) | ", (long long)1 << lg[i], zc[i],
               shared ? "zero-copy" : "copied");
        if (shared) printf("copied both ways %.0f us | %.1fx |\n", cp[i], cp[i] / zc[i]);
        else printf("- | - |\n");
    }
}

static void ew_rows(const char *dev, const char *desc, int64_t n)
{
    for (int h = 0; h < 2; h++) {
        ct_dtype dt = h ? CT_F16 : CT_F32;
        size_t bytes = (size_t)n * (h ? 2 : 4);
        double cp = cl_copy_gbps(desc, bytes);
        ct_tensor *in[2] = {db_placed_randn(dev, 1, &n, dt, 1), db_placed_randn(dev, 1, &n, dt, 2)};
        ct_tensor *y = db_placed_randn(dev, 1, &n, dt, 3);
        struct {
            const char *name;
            db_op_fn fn;
            int moved; /* tensors read + written */
        } ops[] = {{"add", do_add, 3}, {"mul_scalar", do_mul_s, 2}, {"exp", do_exp, 2}};
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            double t = db_time(dev, ops[o].fn, in, y, 10), g = (double)ops[o].moved * (double)bytes / t / 1e9;
            printf("| %s %s | %lld | %.0f GB/s | clEnqueueCopyBuffer %.0f GB/s | %.0f%% |\n", ops[o].name,
                   ct_dtype_name(dt), (long long)n, g, cp, cp > 0 ? 100 * g / cp : 0.0);
        }
        ct_tensor_free(y);
        ct_tensor_free(in[0]);
        ct_tensor_free(in[1]);
    }
}

static double gemm_gflops(const char *dev, int64_t n, ct_dtype dt)
{
    int64_t shape[2] = {n, n};
    ct_tensor *in[2] = {db_placed_randn(dev, 2, shape, dt, 4), db_placed_randn(dev, 2, shape, dt, 5)};
    ct_tensor *y = db_placed_randn(dev, 2, shape, dt, 6);
    double t = db_time(dev, do_matmul, in, y, n >= 4096 ? 3 : 10);
    ct_tensor_free(y);
    ct_tensor_free(in[0]);
    ct_tensor_free(in[1]);
    return 2.0 * (double)(n * n * n) / t / 1e9;
}

int main(int argc, char **argv)
{
    const char *dev = argc > 1 ? argv[1] : "opencl:0";
    int lg = argc > 2 ? atoi(argv[2]) : 26;
    int64_t gmax = argc > 3 ? atoll(argv[3]) : 4096;
    char desc[256] = "";
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (ct_exec_init() != CT_OK) db_die("init");
    uint32_t flags = 0;
    if (!dev_desc(dev, desc, sizeof desc, &flags)) {
        fprintf(stderr, "bench ocl_ops: no device %s\n", dev);
        return 77;
    }
    char cdesc[256];
    bool cuda = dev_desc("cuda:0", cdesc, sizeof cdesc, NULL);
    printf("%s: %s\n\n| op | size | ctorch %s | yardstick | ratio |\n|---|---|---|---|---|\n", dev, desc, dev);
    ew_rows(dev, desc, (int64_t)1 << (lg > 10 && lg < 31 ? lg : 26));
    host_rows(dev, flags);
    static const int64_t ns[] = {256, 512, 1024, 2048, 4096};
    for (int h = 0; h < 2; h++)
        for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
            if (ns[i] > gmax || ns[i] * 4 < gmax) continue; /* the largest two up to GEMM_N */
            ct_dtype dt = h ? CT_F16 : CT_F32;
            double g = gemm_gflops(dev, ns[i], dt);
            printf("| matmul %s | %lld^3 | %.0f GFLOP/s | ", ct_dtype_name(dt), (long long)ns[i], g);
            if (!cuda) {
                printf("(no cuda:0) | - |\n");
                continue;
            }
            double c = gemm_gflops("cuda:0", ns[i], dt);
            printf("cuda:0 (cuBLAS) %.0f GFLOP/s | %.0f%% |\n", c, 100 * g / c);
        }
    return 0;
}
