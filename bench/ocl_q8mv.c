/* ctorch-bench-ocl-q8mv: what a one-row Q4_K product costs on an OpenCL GPU when x comes as
 * 8-bit integers (a scale per 32 and a sum per 16) and the dots run on packed byte dot
 * products (dp4a through inline PTX on NVIDIA, plain integer math elsewhere), next to the
 * library's own one-row kernels (mv1x in src/backends/opencl/kernels/mv1.cl, f32 x). Not a
 * timed test: a feasibility measurement before such a path goes into the backend. The
 * same work split as mv1x_r2 (64 work-items a group, 2 rows, a 32-element chunk of a row per
 * work-item and load, the block's header with it), so only x's form and the dot products
 * differ. Prints, per shape, the device us of the q8 kernels (x's quantization, the product)
 * from event profiling, and the NMSE of the product against a double-precision reference.
 * Run it with CTORCH_OPENCL_PROFILE=1: the library then prints mv1x's device time per
 * shape at exit ("mv1x_r2 q4k NxK"), the same kind of event time.
 * Usage: ctorch-bench-ocl-q8mv [ITERS]
 * H200 through NVIDIA's OpenCL (session 24), two runs in one call. Event-timed (300-500
 * launches, median; the profiler's own cost is ~4-5 us a launch): q8 product 7.9-9.3 us for
 * 5632 x 2048 against mv1x_r2's 13.2-14.5, 8.0-8.6 / 11.5-12.6 for 2048 x 5632, 6.7-8.4 /
 * 8.3-9.5 for 2048 x 2048, 19.4-20.2 / 35.8-36.0 (mv1x_r4) for 32,000 x 2048. Held (the
 * device's own pace, launches back to back behind a busy kernel), us a launch:
 *   N x K           x to q8 (parallel)   q8 product   both    mv1x_r2
 *   5632 x 2048     2.06-2.09            4.78-4.83    6.97    9.45
 *   2048 x 2048     2.09-2.11            3.55-3.56    5.73    5.30-5.34
 *   2048 x 5632     2.18                 4.90-4.91    7.18    8.52
 *   32000 x 2048    2.06-2.11            16.55-16.60  19.25   38.43 (mv1x_r4)
 * The library's own kernels (session 25, second table), held us a launch, f32 x (mv1x) /
 * x to bytes (mv1_q8x) / the byte product (mv1xq) / the last two: Q4_K 5632 x 2048 9.46 /
 * 1.93 / 5.93 / 7.92, 2048 x 2048 5.37 / 1.92 / 3.82 / 5.74, 2048 x 5632 8.56 / 1.93 / 5.36
 * / 7.30, 32000 x 2048 (4 rows a group) 42.4 / 1.94 / 22.7 / 25.3; Q6_K 9.41 / 1.93 / 8.01 /
 * 9.95, 5.08 / 1.94 / 4.73 / 6.67, 8.64 / 1.93 / 7.74 / 9.69, 46.4 / 1.93 / 32.2 / 34.9. The
 * Q6_K byte products stream their 1.46x larger rows at the Q4_K ones' ~1.1 TB/s, so they
 * gain less over the f32 form, which already ran near that rate.
 * NMSE 1.3e-5 to 1.8e-5 against f64 with either quantizer (x's 8-bit rounding, as the CPU's
 * and CUDA's decode products have). So even with a launch of its own for x's quantization
 * the 8-bit path is 16-50% faster on the large shapes (not on 2048 x 2048), and without that
 * launch (x's 8-bit form written by the kernel that produces x) faster on all. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/loader.h"
#include "ctorch/ctorch.h"
#include "dev_bench.h"
#include "ocl_bench.h"
#include "quant/quant.h"

static const char *SRC =
    "#if defined(cl_nv_pragma_unroll)\n"
    "inline int dp4(uint a, int b, int c) {\n"
    "    int d; asm(\"dp4a.u32.s32 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(c)); return d; }\n"
    "#else\n"
    "inline int dp4(uint a, int b, int c) {\n"
    "    for (int k = 0; k < 4; k++) c += (int)((a >> (8 * k)) & 255u) * (int)(char)(b >> (8 * k));\n"
    "    return c; }\n"
    "#endif\n"
    "inline float h16f(uint h) {\n"
    "    uint s = (h & 0x8000u) << 16, m = (h & 0x7FFFu) << 13;\n"
    "    return (h & 0x7C00u) == 0x7C00u ? as_float(s | 0x7F800000u | m) : as_float(s | m) * 0x1p112f; }\n"
    "inline void sm4(uint4 h, int j, float *sc, float *m) {\n"
    "    int sh = 8 * (j & 3); uint a = h.y >> sh, b = h.z >> sh, c = h.w >> sh;\n"
    "    if (j < 4) { *sc = (float)(a & 63); *m = (float)(b & 63); }\n"
    "    else { *sc = (float)((c & 0xF) | ((a >> 2) & 0x30)); *m = (float)(((c >> 4) & 0xF) | ((b >> 2) & 0x30)); } }\n"
    "kernel void q8x(global const float *x, int K, global char *xq, global float *xd, global float *xs) {\n"
    "    for (int b = get_global_id(0); b < K / 32; b += get_global_size(0)) {\n"
    "        float v[32], amax = 0.0f;\n"
    "        for (int i = 0; i < 32; i++) { v[i] = x[32 * b + i]; amax = fmax(amax, fabs(v[i])); }\n"
    "        float d = amax / 127.0f, id = d > 0.0f ? 1.0f / d : 0.0f;\n"
    "        int s0 = 0, s1 = 0;\n"
    "        for (int i = 0; i < 32; i++) {\n"
    "            int q = (int)rint(v[i] * id); xq[32 * b + i] = (char)q;\n"
    "            if (i < 16) s0 += q; else s1 += q; }\n"
    "        xd[b] = d; xs[2 * b] = d * (float)s0; xs[2 * b + 1] = d * (float)s1; } }\n"
    "/* a warp a 32-block: one element a work-item, the block's absmax and half sums through local memory */\n"
    "kernel void q8xp(global const float *x, global char *xq, global float *xd, global float *xs, local float *t) {\n"
    "    int l = get_local_id(0), lane = l & 31; long e = get_global_id(0), b = e / 32;\n"
    "    float v = x[e]; local float *m = t + (l & ~31);\n"
    "    m[lane] = fabs(v); barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int s = 16; s > 0; s >>= 1) { if (lane < s) m[lane] = fmax(m[lane], m[lane + s]); barrier(CLK_LOCAL_MEM_FENCE); }\n"
    "    float d = m[0] / 127.0f; barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    int q = d > 0.0f ? (int)rint(v / d) : 0; xq[e] = (char)q;\n"
    "    m[lane] = (float)q; barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int s = 8; s > 0; s >>= 1) { if ((lane & 15) < s) m[lane] += m[lane + s]; barrier(CLK_LOCAL_MEM_FENCE); }\n"
    "    if (lane == 0) { xd[b] = d; xs[2 * b] = d * m[0]; xs[2 * b + 1] = d * m[16]; } }\n"
    "kernel void hold(global float *o, int n) { float a = 1.0f;\n"
    "    for (int i = 0; i < n; i++) a = fma(a, 0.999999f, 1e-7f); if (a == -1.0f) o[0] = a; }\n"
    "inline float dot4k(uint4 h, uint4 q, int j, int4 xa, int4 xb, float da, float db, float sa, float sb) {\n"
    "    float sc0, m0, sc1, m1; sm4(h, j, &sc0, &m0); sm4(h, j + 1, &sc1, &m1);\n"
    "    float d = h16f(h.x), dmin = h16f(h.x >> 16); uint M = 0x0F0F0F0Fu;\n"
    "    int lo = dp4(q.x & M, xa.x, 0); lo = dp4(q.y & M, xa.y, lo); lo = dp4(q.z & M, xa.z, lo); lo = dp4(q.w & M, xa.w, lo);\n"
    "    int hi = dp4((q.x >> 4) & M, xb.x, 0); hi = dp4((q.y >> 4) & M, xb.y, hi);\n"
    "    hi = dp4((q.z >> 4) & M, xb.z, hi); hi = dp4((q.w >> 4) & M, xb.w, hi);\n"
    "    return d * (sc0 * da * (float)lo + sc1 * db * (float)hi) - dmin * (m0 * sa + m1 * sb); }\n"
    "kernel void mvq(global const uchar *restrict w, long wr, long N, int K, global const char *restrict xq,\n"
    "                global const float *restrict xd, global const float *restrict xs, global float *y, local float *red) {\n"
    "    int lid = get_local_id(0), c = lid % 8, p = c / 2, l0 = 16 * (c % 2);\n"
    "    long n0 = 2 * get_group_id(0);\n"
    "    global const uchar *r0 = w + n0 * wr, *r1 = w + min(n0 + 1, N - 1) * wr;\n"
    "    float a0 = 0.0f, a1 = 0.0f;\n"
    "    for (int ch = lid; ch < K / 32; ch += 64) {\n"
    "        int b = ch / 8, e0 = 256 * b + 64 * p + l0, e1 = e0 + 32;\n"
    "        uint4 h0 = *(global const uint4 *)(r0 + 144 * b), q0 = *(global const uint4 *)(r0 + 144 * b + 16 + 16 * c);\n"
    "        uint4 h1 = *(global const uint4 *)(r1 + 144 * b), q1 = *(global const uint4 *)(r1 + 144 * b + 16 + 16 * c);\n"
    "        int4 xa = *(global const int4 *)(xq + e0), xb = *(global const int4 *)(xq + e1);\n"
    "        float da = xd[e0 / 32], db = xd[e1 / 32], sa = xs[e0 / 16], sb = xs[e1 / 16];\n"
    "        a0 += dot4k(h0, q0, 2 * p, xa, xb, da, db, sa, sb);\n"
    "        a1 += dot4k(h1, q1, 2 * p, xa, xb, da, db, sa, sb); }\n"
    "    red[lid] = a0; red[64 + lid] = a1;\n"
    "    barrier(CLK_LOCAL_MEM_FENCE);\n"
    "    for (int s = 32; s > 0; s >>= 1) {\n"
    "        if (lid < s) { red[lid] += red[lid + s]; red[64 + lid] += red[64 + lid + s]; }\n"
    "        barrier(CLK_LOCAL_MEM_FENCE); }\n"
    "    if (lid == 0) y[n0] = red[0];\n"
    "    if (lid == 1 && n0 + 1 < N) y[n0 + 1] = red[64]; }\n";

static int fail(const char *what, cl_int err)
{
    fprintf(stderr, "ctorch-bench-ocl-q8mv: %s failed (%d)\n", what, (int)err);
    return 1;
}

/* The next value of a fixed-seed stream in [-1, 1). */
static float lcg_uniform(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xFFFF) / 32768.0f - 1.0f;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct q8env {
    cl_context ctx;
    cl_command_queue q;
    cl_kernel kx, kv, kxp, hold, mv1; /* mv1: the library's mv1x_r2_b4, built here from its source */
    cl_kernel lib[4], lq8; /* the library's mv1x_r2_b4, mv1x_r4_b4, mv1xq_r2_b4, mv1xq_r4_b4 and mv1_q8x */
} q8env;

/* The library's kernel sources (embed.cmake's table) and mv1x's argument block (mv1_args
 * in quant_mv1.c and mv1.cl: the same fields in the same order). */
typedef struct ocl_source {
    const char *name, *text;
    size_t len;
} ocl_source;
extern const ocl_source ocl_sources[];

typedef struct bench_mv1_args {
    cl_ulong xoff, gmoff, xnoff, boff, roff, zoff, qoff, wo[3], oo[3];
    cl_long K, bstride, wr[3], N[3];
    cl_int norm, has_gam, gated, nseg, bias_kind, epi, f[3];
    cl_int bi[13];
    cl_float eps;
} bench_mv1_args;
_Static_assert(sizeof(bench_mv1_args) == 264, "mv1_args has 264 bytes");

static cl_kernel mv1_kernel(q8env *e, cl_device_id dev)
{
    const char *src = NULL;
    for (int i = 0; ocl_sources[i].name; i++)
        if (!strcmp(ocl_sources[i].name, "mv1")) src = ocl_sources[i].text;
    cl_int err = CL_INVALID_VALUE;
    const char *opts = ocl_nv_dp4a(dev) ? "-cl-std=CL1.2 -DOCL_HAVE_DP4A" : "-cl-std=CL1.2"; /* as the library builds it */
    cl_program p = src ? ocl_cl.clCreateProgramWithSource(e->ctx, 1, &src, NULL, &err) : NULL;
    if (err == CL_SUCCESS) err = ocl_cl.clBuildProgram(p, 1, &dev, opts, NULL, NULL);
    cl_kernel k = err == CL_SUCCESS ? ocl_cl.clCreateKernel(p, "mv1x_r2_b4", &err) : NULL;
    for (int i = 0; i < 4 && err == CL_SUCCESS; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, i < 2 ? "mv1x_r%d_b4" : "mv1xq_r%d_b4", i % 2 ? 4 : 2);
        e->lib[i] = ocl_cl.clCreateKernel(p, nm, &err);
    }
    if (err == CL_SUCCESS) e->lq8 = ocl_cl.clCreateKernel(p, "mv1_q8x", &err);
    if (p) ocl_cl.clReleaseProgram(p);
    return err == CL_SUCCESS ? k : NULL;
}

/* Wall us of `n` launches of ks[0 .. nk) (one round each) queued behind a busy kernel that
 * outlasts their enqueueing, minus the busy kernel alone: the device's own time a round,
 * without event timing's cost. Best of 3. */
static double held_us(q8env *e, cl_kernel *ks, const size_t *global, const size_t *local, int nk, int n)
{
    cl_mem o = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, 64, NULL, NULL);
    cl_int steps = 1 << 22;
    size_t one = 1;
    double best = 1e30, alone = 1e30;
    ocl_cl.clSetKernelArg(e->hold, 0, sizeof o, &o);
    ocl_cl.clSetKernelArg(e->hold, 1, sizeof steps, &steps);
    for (int rep = 0; rep < 3; rep++) {
        ocl_cl.clFinish(e->q);
        double t0 = 1e6 * db_now();
        ocl_cl.clEnqueueNDRangeKernel(e->q, e->hold, 1, NULL, &one, &one, 0, NULL, NULL);
        ocl_cl.clFinish(e->q);
        double t1 = 1e6 * db_now();
        ocl_cl.clEnqueueNDRangeKernel(e->q, e->hold, 1, NULL, &one, &one, 0, NULL, NULL);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < nk; j++) ocl_cl.clEnqueueNDRangeKernel(e->q, ks[j], 1, NULL, &global[j], &local[j], 0, NULL, NULL);
        ocl_cl.clFinish(e->q);
        double t2 = 1e6 * db_now();
        if (t1 - t0 < alone) alone = t1 - t0;
        if (t2 - t1 < best) best = t2 - t1;
    }
    ocl_cl.clReleaseMemObject(o);
    return (best - alone) / n;
}

/* Median device us of `iters` launches of k (event profiling). */
static double median_us(q8env *e, cl_kernel k, size_t global, size_t local, int iters)
{
    double *t = malloc(sizeof(double) * (size_t)iters);
    int n = 0;
    for (int i = 0; i < iters && t; i++) {
        cl_event ev;
        if (ocl_cl.clEnqueueNDRangeKernel(e->q, k, 1, NULL, &global, &local, 0, NULL, &ev) != CL_SUCCESS) break;
        ocl_cl.clWaitForEvents(1, &ev);
        cl_ulong a = 0, b = 0;
        ocl_cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_START, sizeof a, &a, NULL);
        ocl_cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof b, &b, NULL);
        ocl_cl.clReleaseEvent(ev);
        t[n++] = (double)(b - a) * 1e-3;
    }
    double m = -1;
    if (n) {
        qsort(t, (size_t)n, sizeof(double), cmp_d);
        m = t[n / 2];
    }
    free(t);
    return m;
}

/* One shape: random Q4_K weights and x, the q8 kernels timed and checked against a double
 * reference, then the library's ct_linear on opencl:0 the same number of times. */
static int shape(q8env *e, int64_t N, int64_t K, int iters)
{
    size_t rb = ct_dtype_row_bytes(CT_Q4_K, K);
    unsigned char *wq = malloc(rb * (size_t)N);
    float *row = malloc(sizeof(float) * (size_t)K), *x = malloc(sizeof(float) * (size_t)K);
    float *y = malloc(sizeof(float) * (size_t)N);
    double *ref = calloc((size_t)N, sizeof(double));
    unsigned s = 12345u;
    for (int64_t k = 0; k < K; k++) x[k] = lcg_uniform(&s);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) row[k] = lcg_uniform(&s);
        quant_quantize_row(CT_Q4_K, row, wq + rb * (size_t)n, K);
        quant_dequantize_row(CT_Q4_K, wq + rb * (size_t)n, row, K);
        for (int64_t k = 0; k < K; k++) ref[n] += (double)row[k] * x[k];
    }
    cl_int err;
    cl_mem bw = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, rb * (size_t)N, wq, &err);
    cl_mem bx = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * (size_t)K, x, &err);
    cl_mem bq = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, (size_t)K, NULL, &err);
    cl_mem bd = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, sizeof(float) * (size_t)K / 32, NULL, &err);
    cl_mem bs = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, sizeof(float) * (size_t)K / 16, NULL, &err);
    cl_mem by = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, sizeof(float) * (size_t)N, NULL, &err);
    cl_int Ki = (cl_int)K;
    cl_long wr = (cl_long)rb, Nl = N;
    err = ocl_cl.clSetKernelArg(e->kx, 0, sizeof bx, &bx) | ocl_cl.clSetKernelArg(e->kx, 1, sizeof Ki, &Ki) |
          ocl_cl.clSetKernelArg(e->kx, 2, sizeof bq, &bq) | ocl_cl.clSetKernelArg(e->kx, 3, sizeof bd, &bd) |
          ocl_cl.clSetKernelArg(e->kx, 4, sizeof bs, &bs);
    err |= ocl_cl.clSetKernelArg(e->kv, 0, sizeof bw, &bw) | ocl_cl.clSetKernelArg(e->kv, 1, sizeof wr, &wr) |
           ocl_cl.clSetKernelArg(e->kv, 2, sizeof Nl, &Nl) | ocl_cl.clSetKernelArg(e->kv, 3, sizeof Ki, &Ki) |
           ocl_cl.clSetKernelArg(e->kv, 4, sizeof bq, &bq) | ocl_cl.clSetKernelArg(e->kv, 5, sizeof bd, &bd) |
           ocl_cl.clSetKernelArg(e->kv, 6, sizeof bs, &bs) | ocl_cl.clSetKernelArg(e->kv, 7, sizeof by, &by) |
           ocl_cl.clSetKernelArg(e->kv, 8, 128 * sizeof(float), NULL);
    if (err != CL_SUCCESS) return fail("setting arguments", err);
    double tx = median_us(e, e->kx, 64 * (size_t)((K / 32 + 63) / 64), 64, iters);
    double tv = median_us(e, e->kv, 64 * (size_t)((N + 1) / 2), 64, iters);
    ocl_cl.clEnqueueReadBuffer(e->q, by, CL_TRUE, 0, sizeof(float) * (size_t)N, y, 0, NULL, NULL);
    double num = 0, den = 0;
    for (int64_t n = 0; n < N; n++) num += (y[n] - ref[n]) * (y[n] - ref[n]), den += ref[n] * ref[n];
    /* held: the parallel quantizer, the product, both, and the library's mv1x_r2 (packed,
     * 4 buffers: x, w, y) on the same weights */
    bench_mv1_args ma = {.K = K, .wr = {(cl_long)rb, (cl_long)rb, (cl_long)rb}, .N = {N, N, N}, .nseg = 1,
                         .bi = {0, 0, 0, 1, 2, 1, 2, 1, 2, 0, 0, 0}};
    cl_mem mb[4] = {bx, bw, by, bx};
    for (int i = 0; i < 4; i++) ocl_cl.clSetKernelArg(e->mv1, (cl_uint)i, sizeof(cl_mem), &mb[i]);
    ocl_cl.clSetKernelArg(e->mv1, 4, sizeof ma, &ma);
    ocl_cl.clSetKernelArg(e->mv1, 5, sizeof(float) * 5 * 65, NULL);
    ocl_cl.clSetKernelArg(e->kxp, 0, sizeof bx, &bx);
    ocl_cl.clSetKernelArg(e->kxp, 1, sizeof bq, &bq);
    ocl_cl.clSetKernelArg(e->kxp, 2, sizeof bd, &bd);
    ocl_cl.clSetKernelArg(e->kxp, 3, sizeof bs, &bs);
    ocl_cl.clSetKernelArg(e->kxp, 4, sizeof(float) * 256, NULL);
    cl_kernel seq[2] = {e->kxp, e->kv};
    size_t g[2] = {(size_t)K, 64 * (size_t)((N + 1) / 2)}, l[2] = {256, 64}, gm = 64 * (size_t)((N + 1) / 2);
    int hn = 200;
    double hq = held_us(e, &seq[0], &g[0], &l[0], 1, hn), hp = held_us(e, &seq[1], &g[1], &l[1], 1, hn);
    double hb = held_us(e, seq, g, l, 2, hn);
    /* the parallel quantizer's product checked too (it ran last) */
    ocl_cl.clEnqueueReadBuffer(e->q, by, CL_TRUE, 0, sizeof(float) * (size_t)N, y, 0, NULL, NULL);
    double num2 = 0;
    for (int64_t n = 0; n < N; n++) num2 += (y[n] - ref[n]) * (y[n] - ref[n]);
    double hm = held_us(e, &e->mv1, &gm, &l[1], 1, hn);
    double gb = (double)(rb * (size_t)N) / (tv * 1e3);
    printf("| %lld x %lld | %.2f | %.2f | %.0f | %.2e / %.2e | %.2f | %.2f | %.2f | %.2f |\n", (long long)N,
           (long long)K, tx, tv, gb, den > 0 ? num / den : 0, den > 0 ? num2 / den : 0, hq, hp, hb, hm);
    /* the library's kernels on the same weights: their device time comes with its profile */
    ct_tensor *tw = NULL, *tx_ = NULL;
    int64_t ws[2] = {N, K}, xs[2] = {1, K};
    int rc = 0;
    if (ct_tensor_from_data(2, ws, CT_Q4_K, wq, &tw) != CT_OK || ct_tensor_from_data(2, xs, CT_F32, x, &tx_) != CT_OK ||
        ct_tensor_place(tw, "opencl:0") != CT_OK || ct_tensor_place(tx_, "opencl:0") != CT_OK ||
        ct_exec_force_device("opencl:0") != CT_OK)
        rc = fail("placing the library's operands", -1);
    for (int i = 0; i < iters && !rc; i++) {
        ct_tensor *out = NULL;
        if (ct_linear(tx_, tw, NULL, &out) != CT_OK) rc = fail("ct_linear", -1);
        ct_tensor_free(out);
    }
    ct_device_sync("opencl:0");
    ct_exec_force_device(NULL);
    ct_tensor_free(tw), ct_tensor_free(tx_);
    cl_mem all[] = {bw, bx, bq, bd, bs, by};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocl_cl.clReleaseMemObject(all[i]);
    free(wq), free(row), free(x), free(y), free(ref);
    return rc;
}

/* The library's own kernels on one format and shape, held us a launch: f32 x (mv1x), x to
 * bytes (mv1_q8x), the byte product (mv1xq) and the last two together. */
static int lib_shape(q8env *e, ct_dtype t, int64_t N, int64_t K)
{
    size_t rb = ct_dtype_row_bytes(t, K), qbytes = (size_t)K + 8 * (size_t)(K / 32);
    unsigned char *wq = malloc(rb * (size_t)N);
    float *row = malloc(sizeof(float) * (size_t)K), *x = malloc(sizeof(float) * (size_t)K);
    float *y0 = malloc(sizeof(float) * (size_t)N), *y1 = malloc(sizeof(float) * (size_t)N);
    unsigned s = 777u;
    for (int64_t k = 0; k < K; k++) x[k] = lcg_uniform(&s);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) row[k] = lcg_uniform(&s);
        quant_quantize_row(t, row, wq + rb * (size_t)n, K);
    }
    cl_int err;
    cl_mem bw = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, rb * (size_t)N, wq, &err);
    cl_mem bx = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof(float) * (size_t)K, x, &err);
    cl_mem bq = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, qbytes, NULL, &err);
    cl_mem by = ocl_cl.clCreateBuffer(e->ctx, CL_MEM_READ_WRITE, sizeof(float) * (size_t)N, NULL, &err);
    int R = N >= 16384 ? 4 : 2;
    cl_kernel kf = e->lib[R == 4], kq = e->lib[2 + (R == 4)];
    bench_mv1_args ma = {.K = K, .wr = {(cl_long)rb, (cl_long)rb, (cl_long)rb}, .N = {N, N, N}, .nseg = 1,
                         .f = {t == CT_Q6_K, t == CT_Q6_K, t == CT_Q6_K},
                         .bi = {0, 0, 0, 1, 2, 1, 2, 1, 2, 0, 0, 0, 3}};
    cl_mem mb[4] = {bx, bw, by, bq};
    size_t local = sizeof(float) * (size_t)(2 * R + 1) * 65;
    for (int j = 0; j < 2; j++) {
        cl_kernel k = j ? kq : kf;
        for (int i = 0; i < 4; i++) ocl_cl.clSetKernelArg(k, (cl_uint)i, sizeof(cl_mem), &mb[i]);
        ocl_cl.clSetKernelArg(k, 4, sizeof ma, &ma);
        ocl_cl.clSetKernelArg(k, 5, local, NULL);
    }
    cl_ulong z = 0;
    cl_int zero = 0;
    cl_long Kl = K;
    ocl_cl.clSetKernelArg(e->lq8, 0, sizeof bx, &bx), ocl_cl.clSetKernelArg(e->lq8, 1, sizeof z, &z);
    ocl_cl.clSetKernelArg(e->lq8, 2, sizeof bx, &bx), ocl_cl.clSetKernelArg(e->lq8, 3, sizeof z, &z);
    ocl_cl.clSetKernelArg(e->lq8, 4, sizeof zero, &zero), ocl_cl.clSetKernelArg(e->lq8, 5, sizeof Kl, &Kl);
    ocl_cl.clSetKernelArg(e->lq8, 6, sizeof bq, &bq), ocl_cl.clSetKernelArg(e->lq8, 7, sizeof z, &z);
    ocl_cl.clSetKernelArg(e->lq8, 8, sizeof(float) * 128, NULL);
    size_t gq = (size_t)K / 4, lq = 64, gp = 64 * (size_t)((N + R - 1) / R), lp = 64;
    gq = (gq + 63) / 64 * 64;
    cl_kernel seq[2] = {e->lq8, kq};
    size_t g[2] = {gq, gp}, l[2] = {lq, lp};
    int hn = 200;
    double hf = held_us(e, &kf, &gp, &lp, 1, hn);
    ocl_cl.clEnqueueReadBuffer(e->q, by, CL_TRUE, 0, sizeof(float) * (size_t)N, y0, 0, NULL, NULL);
    double hx = held_us(e, &seq[0], &g[0], &l[0], 1, hn), hp = held_us(e, &seq[1], &g[1], &l[1], 1, hn);
    double hb = held_us(e, seq, g, l, 2, hn);
    ocl_cl.clEnqueueReadBuffer(e->q, by, CL_TRUE, 0, sizeof(float) * (size_t)N, y1, 0, NULL, NULL);
    double num = 0, den = 0;
    for (int64_t n = 0; n < N; n++) num += (double)(y1[n] - y0[n]) * (y1[n] - y0[n]), den += (double)y0[n] * y0[n];
    printf("| %s %lld x %lld | %d | %.2f | %.2f | %.2f | %.2f | %.2e |\n", t == CT_Q6_K ? "Q6_K" : "Q4_K", (long long)N,
           (long long)K, R, hf, hx, hp, hb, den > 0 ? num / den : 0);
    cl_mem all[] = {bw, bx, bq, by};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ocl_cl.clReleaseMemObject(all[i]);
    free(wq), free(row), free(x), free(y0), free(y1);
    return 0;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    if (iters < 1) iters = 1;
    cl_device_id dev;
    char name[256] = "";
    if (!ocl_load() || !ob_pick_device(&dev, name, sizeof name) || ct_exec_init() != CT_OK) {
        fprintf(stderr, "ctorch-bench-ocl-q8mv: no OpenCL device\n");
        return 77;
    }
    q8env e = {0};
    cl_int err;
    e.ctx = ocl_cl.clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    if (err == CL_SUCCESS) e.q = ocl_cl.clCreateCommandQueue(e.ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS) return fail("a context and queue", err);
    cl_program prog = ocl_cl.clCreateProgramWithSource(e.ctx, 1, &SRC, NULL, &err);
    if (err == CL_SUCCESS) err = ocl_cl.clBuildProgram(prog, 1, &dev, "", NULL, NULL);
    if (err != CL_SUCCESS) return fail("building the kernels", err);
    e.kx = ocl_cl.clCreateKernel(prog, "q8x", &err);
    if (err == CL_SUCCESS) e.kv = ocl_cl.clCreateKernel(prog, "mvq", &err);
    if (err == CL_SUCCESS) e.kxp = ocl_cl.clCreateKernel(prog, "q8xp", &err);
    if (err == CL_SUCCESS) e.hold = ocl_cl.clCreateKernel(prog, "hold", &err);
    if (err != CL_SUCCESS) return fail("clCreateKernel", err);
    if (!(e.mv1 = mv1_kernel(&e, dev))) return fail("building the library's mv1 program", -1);
    printf("device: %s\n", name);
    printf("%d launches a shape, median device us (event profiling); held: us a launch (a round) queued behind a "
           "busy kernel\n", iters);
    printf("| Q4_K N x K | x to q8 us | q8 product us | weight GB/s | NMSE vs f64 (serial / parallel x) | held: x to q8 (parallel) | q8 "
           "product | both | mv1x_r2 |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    static const int64_t shapes[][2] = {{5632, 2048}, {2048, 2048}, {2048, 5632}, {32000, 2048}};
    int rc = 0;
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !rc; i++) rc = shape(&e, shapes[i][0], shapes[i][1], iters);
    printf("\nthe library's kernels (kernels/mv1.cl), held us a launch: f32 x (mv1x_rR_b4), x to bytes (mv1_q8x), the "
           "byte product (mv1xq_rR_b4), both; NMSE of the byte product against mv1x\n"
           "| weights N x K | R | mv1x | mv1_q8x | mv1xq | both | NMSE |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for (int f = 0; f < 2 && !rc; f++)
        for (size_t i = 0; i < sizeof shapes / sizeof shapes[0] && !rc; i++)
            rc = lib_shape(&e, f ? CT_Q6_K : CT_Q4_K, shapes[i][0], shapes[i][1]);
    cl_kernel ks[] = {e.kx, e.kv, e.kxp, e.hold, e.mv1, e.lib[0], e.lib[1], e.lib[2], e.lib[3], e.lq8};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) ocl_cl.clReleaseKernel(ks[i]);
    ocl_cl.clReleaseProgram(prog);
    ocl_cl.clReleaseCommandQueue(e.q);
    ocl_cl.clReleaseContext(e.ctx);
    return rc;
}
#else
int main(void)
{
    fprintf(stderr, "ctorch-bench-ocl-q8mv: built without OpenCL\n");
    return 77;
}
#endif
