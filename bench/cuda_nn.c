/* ctorch-bench-cuda-nn: the CUDA nn group's row kernels and GEMM against the device's own
 * yardsticks, on cuda:0 (not a timed test; a Release build on the GPU machine):
 *   softmax and rms_norm GB/s (bytes read + written per op / time) on large tensors, next to
 *   a device-to-device cudaMemcpy's GB/s (2 x bytes / time);
 *   f16 GEMM TFLOP/s through ct_matmul, next to cublasGemmEx called directly on the same
 *   shapes (f16 in/out, f32 accumulation).
 * Ops are forced onto cuda:0 with their inputs already there (placed), so no transfer is
 * timed; each figure is the best of 5 rounds of `iters` back-to-back ops ended by a sync.
 *   `ctorch-bench-cuda-nn rows`: the row ops alone.
 *   `ctorch-bench-cuda-nn sdpa [iters]`: attention alone, the TinyLlama layer (32 query
 *   heads, 4 KV heads, head dim 64, f16 cache): prefill pp512 (causal, 512 x 512) and decode
 *   (Tq 1, the length in a device tensor) over caches of 64..4096 slots; us per op (eager:
 *   the host's per-op cost included, so short kernels read long; ncu gives kernel times).
 *   `ctorch-bench-cuda-nn dec [rounds [case]]`: the decode kernel alone in a CUDA graph, old and
 *   new side by side (cuda_nn_dec.c).
 *   `ctorch-bench-cuda-nn conv [iters]`: conv2d on ../shared/ANCHORS.md's layer (N 32, 256 -> 256
 *   channels, 56x56, 3x3, pad 1) in TFLOP/s, f32, f16 and bf16 (cuDNN where it loads, tensor cores
 *   for the half types, TF32 for f32 only where CTORCH_CUDA_TF32=1; its measured algorithm picks,
 *   CTORCH_CUDNN_FIND=0 its heuristic ones; CTORCH_CUDNN=0: im2col +
 *   cuBLAS in f32), and 2x2 max / avg pooling of its input in GB/s (bytes read + written) next to
 *   a device copy; bench/gpu/conv_torch.py times PyTorch on the same.
 *   Measured on an H100 (2026-11-24), us per op, main 8286965 -> branch attn5:
 *     prefill pp512           844.5 -> 40.3  (1.3 -> 26.7 TFLOP/s; ncu: 847 -> 40.5 us)
 *     decode 64 (60 seen)      43.1 -> 10.5
 *     decode 256 (200)         47.4 -> 16.4
 *     decode 640 (600)         50.4 -> 21.4  (ncu in cache: 20.0 us)
 *     decode 1024 (1000)       50.8 -> 17.1
 *     decode 4096 (4000)       64.7 -> 24.9
 * Output: one table on stdout. */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch/ctorch.h"
#include "backends/cuda/nn_conv.h" /* nn_cudnn_version: which path the conv rows measure */
#include "dev_bench.h"

#define DEV "cuda:0"

static ct_status do_softmax(ct_tensor *const *in, ct_tensor **out) { return ct_softmax(in[0], -1, out); }
static ct_status do_rms(ct_tensor *const *in, ct_tensor **out) { return ct_rms_norm(in[0], in[1], 1e-6, out); }
static ct_status do_matmul(ct_tensor *const *in, ct_tensor **out) { return ct_matmul(in[0], in[1], out); }
/* The same ops written into a preallocated output (`out` forms): the kernel's bandwidth
 * without the eager path's per-op output allocation. */
static ct_status do_softmax_out(ct_tensor *const *in, ct_tensor **out) { return ct_softmax_out(in[0], -1, *out); }
static ct_status do_rms_out(ct_tensor *const *in, ct_tensor **out) { return ct_rms_norm_out(in[0], in[1], 1e-6, *out); }

static double time_op_into(db_op_fn fn, ct_tensor *const *in, ct_tensor *dst, int iters)
{
    return db_time(DEV, fn, in, dst, iters);
}

static double time_op(db_op_fn fn, ct_tensor *const *in, int iters) { return db_time(DEV, fn, in, NULL, iters); }

static ct_tensor *placed_randn(int nd, const int64_t *shape, ct_dtype dt, uint64_t seed)
{
    return db_placed_randn(DEV, nd, shape, dt, seed);
}

static double memcpy_gbps(size_t bytes)
{
    void *a, *b;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) db_die("cudaMalloc");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float best = 1e30f;
    for (int round = 0; round < 6; round++) {
        cudaEventRecord(e0, 0);
        for (int i = 0; i < 10; i++) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (round > 0 && ms / 10 < best) best = ms / 10;
    }
    cudaFree(a);
    cudaFree(b);
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return 2.0 * (double)bytes / (best * 1e-3) / 1e9;
}

static double cublas_tflops(int n)
{
    void *a, *b, *c;
    size_t bytes = (size_t)n * n * 2;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaMalloc(&c, bytes) != cudaSuccess)
        db_die("cudaMalloc");
    cudaMemset(a, 0, bytes);
    cudaMemset(b, 0, bytes);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) db_die("cublasCreate");
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0);
    cudaEventCreate(&e1);
    float one = 1, zero = 0, best = 1e30f;
    int iters = 20;
    for (int round = 0; round < 6; round++) {
        cudaEventRecord(e0, 0);
        for (int i = 0; i < iters; i++)
            cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, CUDA_R_16F, n, a, CUDA_R_16F, n, &zero, c,
                         CUDA_R_16F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        cudaEventRecord(e1, 0);
        cudaEventSynchronize(e1);
        float ms;
        cudaEventElapsedTime(&ms, e0, e1);
        if (round > 0 && ms / iters < best) best = ms / iters;
    }
    cublasDestroy(h);
    cudaFree(a);
    cudaFree(b);
    cudaFree(c);
    return 2.0 * (double)n * n * n / (best * 1e-3) / 1e12;
}

int bench_dec(int rounds, int only); /* cuda_nn_dec.c */

static ct_tensor *g_len; /* the attended length of the sdpa cases (NULL: all keys) */

static ct_status do_sdpa(ct_tensor *const *in, ct_tensor **out)
{
    ct_sdpa_params p = {.causal = true, .length = g_len};
    return ct_sdpa(in[0], in[1], in[2], NULL, &p, out);
}

/* us per sdpa of q [1, 32, Tq, 64] over an f16 cache [1, 4, Tk, 64] attended to L keys. */
static double sdpa_us(int64_t Tq, int64_t Tk, int64_t L, int iters)
{
    int64_t qs[4] = {1, 32, Tq, 64}, ks[4] = {1, 4, Tk, 64};
    ct_tensor *in[3] = {placed_randn(4, qs, CT_F32, 5), placed_randn(4, ks, CT_F16, 6), placed_randn(4, ks, CT_F16, 7)};
    g_len = NULL;
    if (L < Tk) {
        int32_t l = (int32_t)L;
        if (ct_tensor_from_data(1, (int64_t[]){1}, CT_I32, &l, &g_len) != CT_OK || ct_tensor_place(g_len, DEV) != CT_OK)
            db_die("length");
    }
    double t = time_op(do_sdpa, in, iters);
    for (int i = 0; i < 3; i++) ct_tensor_free(in[i]);
    ct_tensor_free(g_len);
    g_len = NULL;
    return t * 1e6;
}

static int bench_sdpa(int iters)
{
    printf("| sdpa (32 q heads, 4 kv heads, D 64, f16 cache) | Tq x Tk (attended) | us per op | |\n|---|---|---|---|\n");
    double t = sdpa_us(512, 512, 512, iters);
    /* causal: half the score matrix, 2 GEMMs of 2 flops per multiply-add */
    double flops = 4.0 * 32 * 64 * (512.0 * 513 / 2);
    printf("| prefill pp512 | 512 x 512 | %.1f | %.1f TFLOP/s |\n", t, flops / (t * 1e-6) / 1e12);
    static const int64_t dec[][2] = {{64, 60}, {256, 200}, {640, 600}, {1024, 1000}, {4096, 4000}};
    for (size_t i = 0; i < sizeof dec / sizeof dec[0]; i++)
        printf("| decode | 1 x %lld (%lld) | %.1f | |\n", (long long)dec[i][0], (long long)dec[i][1],
               sdpa_us(1, dec[i][0], dec[i][1], iters));
    return 0;
}

static const ct_conv2d_params g_conv = {.padding = {1, 1}};
static const ct_pool2d_params g_pool = {.kernel = {2, 2}};
static ct_status do_conv(ct_tensor *const *in, ct_tensor **out) { return ct_conv2d(in[0], in[1], NULL, &g_conv, out); }
static ct_status do_maxpool(ct_tensor *const *in, ct_tensor **out) { return ct_max_pool2d(in[0], &g_pool, out); }
static ct_status do_avgpool(ct_tensor *const *in, ct_tensor **out) { return ct_avg_pool2d(in[0], &g_pool, out); }

static int bench_conv(int iters)
{
    const int64_t xs[4] = {32, 256, 56, 56}, ws[4] = {256, 256, 3, 3};
    const double flop = 2.0 * 32 * 256 * 56 * 56 * 256 * 9;
    printf("| op | shape | ctorch | yardstick |\n|---|---|---|---|\n");
    const char *tf32 = getenv("CTORCH_CUDA_TF32");
    for (int dt = 0; dt < 3; dt++) {
        ct_dtype t = dt == 0 ? CT_F32 : dt == 1 ? CT_F16 : CT_BF16;
        ct_tensor *in[2] = {placed_randn(4, xs, t, 7), placed_randn(4, ws, t, 8)};
        double s = time_op(do_conv, in, iters);
        printf("| conv2d %s%s (%s) | 32x256x56x56, 3x3 pad 1 | %.1f TFLOP/s (%.2f ms) | PyTorch f16 681 TFLOP/s "
               "(ANCHORS.md; conv_torch.py in the same run) |\n",
               ct_dtype_name(t), t == CT_F32 && tf32 && tf32[0] == '1' ? " TF32" : "",
               nn_cudnn_version() ? "cuDNN" : "im2col + cuBLAS", flop / s / 1e12, s * 1e3);
        ct_tensor_free(in[0]);
        ct_tensor_free(in[1]);
    }
    ct_tensor *x = placed_randn(4, xs, CT_F32, 9);
    size_t bytes = (size_t)(32 * 256 * 56 * 56) * 4, moved = bytes + bytes / 4;
    double cp = memcpy_gbps(bytes);
    db_op_fn pools[2] = {do_maxpool, do_avgpool};
    for (int i = 0; i < 2; i++) {
        double s = time_op(pools[i], &x, 4 * iters);
        printf("| %s f32 | 32x256x56x56, 2x2 | %.0f GB/s | memcpy d2d %.0f GB/s (%.0f%%) |\n", i ? "avg_pool2d" : "max_pool2d",
               (double)moved / s / 1e9, cp, 100.0 * (double)moved / s / 1e9 / cp);
    }
    ct_tensor_free(x);
    return 0;
}

int main(int argc, char **argv)
{
    if (ct_exec_init() != CT_OK) db_die("init");
    if (argc > 1 && strcmp(argv[1], "sdpa") == 0) return bench_sdpa(argc > 2 ? atoi(argv[2]) : 50);
    if (argc > 1 && strcmp(argv[1], "conv") == 0) return bench_conv(argc > 2 ? atoi(argv[2]) : 10);
    if (argc > 1 && strcmp(argv[1], "dec") == 0) return bench_dec(argc > 2 ? atoi(argv[2]) : 20, argc > 3 ? atoi(argv[3]) : -1);
    printf("| op | shape | ctorch | yardstick | ratio |\n|---|---|---|---|---|\n");
    static const int64_t rows_cols[][2] = {{8192, 8192}, {32768, 4096}, {4096, 32000}};
    for (size_t i = 0; i < sizeof rows_cols / sizeof rows_cols[0]; i++) {
        for (int dt = 0; dt < 2; dt++) {
            ct_dtype t = dt ? CT_F16 : CT_F32;
            int64_t R = rows_cols[i][0], C = rows_cols[i][1];
            size_t bytes = (size_t)(R * C) * (dt ? 2 : 4);
            double cp = memcpy_gbps(bytes);
            ct_tensor *in[2] = {placed_randn(2, rows_cols[i], t, 1), placed_randn(1, &C, CT_F32, 2)};
            ct_tensor *y = placed_randn(2, rows_cols[i], t, 5);
            double ts = time_op_into(do_softmax_out, in, y, 20), tr = time_op_into(do_rms_out, in, y, 20);
            double es = time_op(do_softmax, in, 20), er = time_op(do_rms, in, 20);
            double gs = 2.0 * (double)bytes / ts / 1e9, gr = 2.0 * (double)bytes / tr / 1e9;
            double ges = 2.0 * (double)bytes / es / 1e9, ger = 2.0 * (double)bytes / er / 1e9;
            printf("| softmax %s | %lldx%lld | %.0f GB/s (eager, output allocated per op: %.0f) | memcpy d2d %.0f GB/s | "
                   "%.0f%% (%.0f%%) |\n",
                   ct_dtype_name(t), (long long)R, (long long)C, gs, ges, cp, 100 * gs / cp, 100 * ges / cp);
            printf("| rms_norm %s | %lldx%lld | %.0f GB/s (eager, output allocated per op: %.0f) | memcpy d2d %.0f GB/s | "
                   "%.0f%% (%.0f%%) |\n",
                   ct_dtype_name(t), (long long)R, (long long)C, gr, ger, cp, 100 * gr / cp, 100 * ger / cp);
            ct_tensor_free(y);
            ct_tensor_free(in[0]);
            ct_tensor_free(in[1]);
        }
    }
    if (argc > 1 && strcmp(argv[1], "rows") == 0) return 0; /* the row ops only */
    static const int gemm_n[] = {2048, 4096, 8192};
    for (size_t i = 0; i < sizeof gemm_n / sizeof gemm_n[0]; i++) {
        int64_t n = gemm_n[i], shape[2] = {n, n};
        ct_tensor *in[2] = {placed_randn(2, shape, CT_F16, 3), placed_randn(2, shape, CT_F16, 4)};
        double t = time_op(do_matmul, in, n >= 8192 ? 10 : 30);
        double ours = 2.0 * (double)(n * n * n) / t / 1e12, ref = cublas_tflops((int)n);
        printf("| matmul f16 | %lldx%lldx%lld | %.0f TFLOP/s | cublasGemmEx %.0f TFLOP/s | %.0f%% |\n", (long long)n,
               (long long)n, (long long)n, ours, ref, 100 * ours / ref);
        ct_tensor_free(in[0]);
        ct_tensor_free(in[1]);
    }
    return 0;
}
