/* Quantized matrix-vector GB/s on the GPU, per block format: the CUDA quant group's
 * decode kernel (cuq_matvec) on a 4096 x 4096 weight and on TinyLlama's shapes, M = 1
 * (and M = 8 for the 4096 square).
 *
 * Each measurement replays a CUDA graph of REPS launches, each on another copy of the
 * weight (enough copies to exceed the L2 cache several times over, so every launch
 * streams its weight from DRAM, as a decode step does), timed with CUDA events; the
 * median of TRIALS graphs is reported. GB/s counts the weight bytes only (x and the
 * output are a few KiB). The reference is the device's own device-to-device
 * cudaMemcpy (read + write bytes / time) on 512 MiB.
 * Then prefill as the glue runs it (quant.c): the weight dequantized to f32, one cuBLAS
 * GemmEx with TF32 tensor cores, at M = 512 on 4096 x 4096, in TFLOP/s.
 *
 * Before those: the fused decode jobs (bench_fused), every format alone and the decode
 * step's jobs (qkv, gated gate/up, down, o, the output projection; Q4_K_M's and f16's;
 * with the job's own norm, and x quantized by the run: the separate norm / quantize kernels
 * first, or with CTORCH_CUDA_MVSTAGE=float|norm|all x staged by the job kernel), GB/s of
 * weight bytes.
 *
 * usage: [CTORCH_BENCH_JOB=SUBSTR] [CTORCH_BENCH_COPIES=N] ctorch-bench-cuda-quant [--quick] [--fused | --jobs]
 * (--fused: the fused kernel only; --jobs: its decode-step jobs only; CTORCH_BENCH_JOB:
 * only the jobs whose name holds SUBSTR, e.g. one to profile with ncu; CTORCH_BENCH_COPIES: that
 * many copies of each job's weights, 1 or 2 to see the job with its weights in L2) */
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/quant_kernels.h"
#include "quant/quant.h"

#include "cuda_check.h"

#define TRIALS 9

static int cmp_f(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static float median(float *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_f);
    return v[n / 2];
}

/* Device-to-device copy bandwidth (read + write) in GB/s. */
static double copy_bw(cudaStream_t s)
{
    size_t bytes = (size_t)512 << 20;
    void *a, *b;
    CHECK_CUDA(cudaMalloc(&a, bytes));
    CHECK_CUDA(cudaMalloc(&b, bytes));
    CHECK_CUDA(cudaMemsetAsync(a, 1, bytes, s));
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    float t[TRIALS];
    for (int i = 0; i < TRIALS; i++) {
        CHECK_CUDA(cudaEventRecord(e0, s));
        CHECK_CUDA(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s));
        CHECK_CUDA(cudaEventRecord(e1, s));
        CHECK_CUDA(cudaEventSynchronize(e1));
        CHECK_CUDA(cudaEventElapsedTime(&t[i], e0, e1));
    }
    CHECK_CUDA(cudaFree(a));
    CHECK_CUDA(cudaFree(b));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    return 2.0 * (double)bytes / (median(t, TRIALS) * 1e-3) / 1e9;
}

/* A host weight [N, K] of format t (rb bytes per row): 64 distinct rows of uniform values
 * in [-1, 1), tiled (the values do not change the speed, and the reference quantizers are
 * slow on 10^8 elements). f16 / bf16 / f32 too. */
static char *host_weight(ct_dtype t, int64_t N, int64_t K, size_t rb)
{
    char *hq = calloc((size_t)N, rb);
    float *hf = malloc(sizeof(float) * (size_t)K);
    unsigned seed = 12345;
    for (int64_t n = 0; n < N; n++) {
        if (n >= 64) {
            memcpy(hq + (size_t)n * rb, hq + (size_t)(n % 64) * rb, rb);
            continue;
        }
        for (int64_t k = 0; k < K; k++) {
            seed = seed * 1664525u + 1013904223u;
            hf[k] = (float)((int)(seed >> 9) - (1 << 22)) / (float)(1 << 22);
        }
        char *row = hq + (size_t)n * rb;
        if (t == CT_F32) memcpy(row, hf, sizeof(float) * (size_t)K);
        else if (t == CT_F16 || t == CT_BF16)
            for (int64_t k = 0; k < K; k++) {
                uint16_t v = t == CT_F16 ? ct_f32_to_f16(hf[k]) : ct_f32_to_bf16(hf[k]);
                memcpy(row + 2 * k, &v, 2);
            }
        else if (quant_quantize_row(t, hf, row, K) != CT_OK) {
            fprintf(stderr, "quantize %s failed\n", ct_dtype_name(t));
            exit(1);
        }
    }
    free(hf);
    return hq;
}

/* One fused job (cuq_mv_run) of up to 4 weights sharing x [M, K], x's q8 form given (as the
 * norm provides it): median us per launch and GB/s of weight bytes. Each launch of the
 * graph reads another copy of every weight, so the weights stream from DRAM. */
typedef struct job_shape {
    const char *name;
    int64_t M, K;
    int n;
    ct_dtype t[CUQ_MV_MAX_PARTS];
    int64_t N[CUQ_MV_MAX_PARTS];
    int glu;
    int f32_x; /* no q8 form given: the run quantizes x itself or (small, M = 1) dequantizes */
    int norm;  /* the job's own RMS norm of x first (f32 weight; implies f32_x) */
    int packed; /* rows as GGUF packs them (a Q6_K row of K 5632: 4620 bytes), not padded to 16 */
} job_shape;

static void time_job(const job_shape *js, int sm, cudaStream_t s, int quick, double *us, double *gbs)
{
    size_t rb[CUQ_MV_MAX_PARTS], total = 0;
    char *hw[CUQ_MV_MAX_PARTS];
    for (int i = 0; i < js->n; i++) {
        rb[i] = js->packed ? ct_dtype_row_bytes(js->t[i], js->K) : (ct_dtype_row_bytes(js->t[i], js->K) + 15) & ~(size_t)15;
        total += rb[i] * (size_t)js->N[i];
        hw[i] = host_weight(js->t[i], js->N[i], js->K, rb[i]);
    }
    int copies = (int)(((size_t)256 << 20) / total) + 2;
    if (copies > 64) copies = 64;
    /* CTORCH_BENCH_COPIES=1: the weight stays in L2 (the kernel's floor when its reads hit) */
    const char *ce = getenv("CTORCH_BENCH_COPIES");
    if (ce && atoi(ce) > 0) copies = atoi(ce);
    void **w = malloc(sizeof(void *) * (size_t)copies * CUQ_MV_MAX_PARTS);
    for (int c = 0; c < copies; c++)
        for (int i = 0; i < js->n; i++) {
            CHECK_CUDA(cudaMalloc(&w[c * CUQ_MV_MAX_PARTS + i], rb[i] * (size_t)js->N[i]));
            CHECK_CUDA(cudaMemcpy(w[c * CUQ_MV_MAX_PARTS + i], hw[i], rb[i] * (size_t)js->N[i], cudaMemcpyHostToDevice));
        }
    int64_t M = js->M, K = js->K;
    float *x, *outs;
    void *qmem;
    CHECK_CUDA(cudaMalloc((void **)&x, sizeof(float) * (size_t)(M * K)));
    CHECK_CUDA(cudaMemset(x, 0, sizeof(float) * (size_t)(M * K)));
    CHECK_CUDA(cudaMalloc(&qmem, cuq_q8_bytes(M, K)));
    CHECK_CUDA(cudaMalloc((void **)&outs, sizeof(float) * (size_t)(M * 65536) * 6));
    cuq_q8 q = cuq_q8_at(qmem, M, K);
    if (!cuq_quantize_q8(x, K, M, K, &q, s)) exit(1);
    cuq_mv_job job = {.M = M, .K = K, .x = x, .x_row = K, .xq = js->f32_x || js->norm ? NULL : &q, .n_parts = js->n,
                      .glu = js->glu, .glu_out = js->glu ? outs + 5 * M * 65536 : NULL};
    float *nw = NULL, *ny = NULL;
    if (js->norm) {
        float *ones = malloc(sizeof(float) * (size_t)K);
        for (int64_t k = 0; k < K; k++) ones[k] = 1.f;
        CHECK_CUDA(cudaMalloc((void **)&nw, sizeof(float) * (size_t)K));
        CHECK_CUDA(cudaMalloc((void **)&ny, sizeof(float) * (size_t)(M * K)));
        CHECK_CUDA(cudaMemcpy(nw, ones, sizeof(float) * (size_t)K, cudaMemcpyHostToDevice));
        free(ones);
        job.norm = (cuq_mv_norm){.on = true, .w = nw, .wdt = CT_F32, .eps = 1e-5f, .y = ny};
    }
    for (int i = 0; i < js->n; i++)
        job.part[i] = (cuq_mv_part){.wt = js->t[i], .w_row = rb[i], .N = js->N[i], .out = outs + i * M * 65536};
    int reps = quick ? copies : 4 * copies;
    if (reps < 64) reps = 64;
    void *tmp = NULL;
    for (int i = 0; i < js->n; i++) job.part[i].w = w[i];
    size_t tb = cuq_mv_tmp_bytes(&job);
    if (tb) CHECK_CUDA(cudaMalloc(&tmp, tb));
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int r = 0; r < reps; r++) {
        for (int i = 0; i < js->n; i++) job.part[i].w = w[(r % copies) * CUQ_MV_MAX_PARTS + i];
        if (!cuq_mv_run(&job, tmp, sm, s)) {
            fprintf(stderr, "no fused kernel for %s\n", js->name);
            exit(1);
        }
    }
    CHECK_CUDA(cudaStreamEndCapture(s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    CHECK_CUDA(cudaGraphLaunch(ge, s));
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    float tm[TRIALS];
    for (int i = 0; i < TRIALS; i++) {
        CHECK_CUDA(cudaEventRecord(e0, s));
        CHECK_CUDA(cudaGraphLaunch(ge, s));
        CHECK_CUDA(cudaEventRecord(e1, s));
        CHECK_CUDA(cudaEventSynchronize(e1));
        CHECK_CUDA(cudaEventElapsedTime(&tm[i], e0, e1));
    }
    double per = median(tm, TRIALS) * 1e-3 / reps;
    *us = per * 1e6;
    *gbs = (double)total / per / 1e9;
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK_CUDA(cudaGraphDestroy(g));
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    for (int c = 0; c < copies; c++)
        for (int i = 0; i < js->n; i++) CHECK_CUDA(cudaFree(w[c * CUQ_MV_MAX_PARTS + i]));
    for (int i = 0; i < js->n; i++) free(hw[i]);
    free(w);
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(qmem));
    CHECK_CUDA(cudaFree(outs));
    if (tmp) CHECK_CUDA(cudaFree(tmp));
    if (nw) CHECK_CUDA(cudaFree(nw));
    if (ny) CHECK_CUDA(cudaFree(ny));
}

/* The fused jobs: every format alone on TinyLlama's shapes, then the decode step's jobs. */
static void bench_fused_formats(int sm, cudaStream_t s, int quick, double bw)
{
    static const ct_dtype fmts[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q2_K, CT_Q3_K,
                                    CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_F16,  CT_BF16, CT_F32};
    static const struct { int64_t N, K; const char *name; } shapes[] = {
        {5632, 2048, "tl up 5632x2048"}, {2048, 5632, "tl down 2048x5632"}, {2048, 2048, "tl q/o 2048x2048"},
        {256, 2048, "tl k/v 256x2048"}, {4096, 4096, "4096x4096"}};
    int ns = quick ? 2 : (int)(sizeof shapes / sizeof shapes[0]);
    printf("\nfused job kernel (cuq_mv_run, x's q8 form given), one weight, M = 1: us, GB/s, %% of copy\n%-6s", "format");
    for (int j = 0; j < ns; j++) printf(" | %-20s", shapes[j].name);
    printf("\n");
    for (size_t f = 0; f < sizeof fmts / sizeof fmts[0]; f++) {
        printf("%-6s", ct_dtype_name(fmts[f]));
        for (int j = 0; j < ns; j++) {
            job_shape js = {shapes[j].name, 1, shapes[j].K, 1, {fmts[f]}, {shapes[j].N}, 0, 0, 0, 0};
            double us, gbs;
            time_job(&js, sm, s, quick, &us, &gbs);
            printf(" | %7.2f %6.0f %4.0f%%", us, gbs, 100.0 * gbs / bw);
        }
        printf("\n");
        fflush(stdout);
    }
}

static void bench_fused(int sm, cudaStream_t s, int quick, int jobs_only, double bw)
{
    if (!jobs_only) bench_fused_formats(sm, s, quick, bw);
    static const job_shape jobs[] = {
        {"tl qkv Q4_K 2048+256 + Q6_K 256, M=1", 1, 2048, 3, {CT_Q4_K, CT_Q4_K, CT_Q6_K}, {2048, 256, 256}, 0, 0, 0, 0},
        {"tl gate/up Q4_K 2x5632 SWIGLU, M=1", 1, 2048, 2, {CT_Q4_K, CT_Q4_K}, {5632, 5632}, 1, 0, 0, 0},
        {"tl down Q6_K 2048x5632, M=1", 1, 5632, 1, {CT_Q6_K}, {2048}, 0, 0, 0, 0},
        {"tl down Q6_K 2048x5632 packed rows, M=1", 1, 5632, 1, {CT_Q6_K}, {2048}, 0, 0, 0, 1},
        {"tl down Q4_K 2048x5632, M=1", 1, 5632, 1, {CT_Q4_K}, {2048}, 0, 0, 0, 0},
        {"tl output Q6_K 32000x2048, M=1", 1, 2048, 1, {CT_Q6_K}, {32000}, 0, 0, 0, 0},
        {"tl o Q4_K 2048x2048, M=1", 1, 2048, 1, {CT_Q4_K}, {2048}, 0, 0, 0, 0},
        {"tl qkv Q6_K 2048+256+256, M=1", 1, 2048, 3, {CT_Q6_K, CT_Q6_K, CT_Q6_K}, {2048, 256, 256}, 0, 0, 0, 0},
        {"tl gate/up Q6_K 2x5632 SWIGLU, M=1", 1, 2048, 2, {CT_Q6_K, CT_Q6_K}, {5632, 5632}, 1, 0, 0, 0},
        {"tl o Q6_K 2048x2048, M=1", 1, 2048, 1, {CT_Q6_K}, {2048}, 0, 0, 0, 0},
        {"tl gate/up Q4_K 2x5632 SWIGLU, M=8", 8, 2048, 2, {CT_Q4_K, CT_Q4_K}, {5632, 5632}, 1, 0, 0, 0},
        {"tl qkv F16 2048+256+256, M=1", 1, 2048, 3, {CT_F16, CT_F16, CT_F16}, {2048, 256, 256}, 0, 0, 0, 0},
        {"tl gate/up F16 2x5632 SWIGLU, M=1", 1, 2048, 2, {CT_F16, CT_F16}, {5632, 5632}, 1, 0, 0, 0},
        {"tl down F16 2048x5632, M=1", 1, 5632, 1, {CT_F16}, {2048}, 0, 0, 0, 0},
        {"tl norm+qkv Q4_K/Q6_K, M=1", 1, 2048, 3, {CT_Q4_K, CT_Q4_K, CT_Q6_K}, {2048, 256, 256}, 0, 1, 1, 0},
        {"tl norm+gate/up Q4_K SWIGLU, M=1", 1, 2048, 2, {CT_Q4_K, CT_Q4_K}, {5632, 5632}, 1, 1, 1, 0},
        {"tl norm+qkv F16, M=1", 1, 2048, 3, {CT_F16, CT_F16, CT_F16}, {2048, 256, 256}, 0, 1, 1, 0},
        {"tl norm+gate/up F16 SWIGLU, M=1", 1, 2048, 2, {CT_F16, CT_F16}, {5632, 5632}, 1, 1, 1, 0},
        {"tl norm+gate/up Q4_K SWIGLU, M=8", 8, 2048, 2, {CT_Q4_K, CT_Q4_K}, {5632, 5632}, 1, 1, 1, 0},
        {"eager k/v Q4_K 256x2048 f32 x (dequantizing)", 1, 2048, 1, {CT_Q4_K}, {256}, 0, 1, 0, 0},
        {"eager q/o Q4_K 2048x2048 f32 x (dequantizing)", 1, 2048, 1, {CT_Q4_K}, {2048}, 0, 1, 0, 0},
        {"up Q4_K 5632x2048 f32 x (run quantizes x)", 1, 2048, 1, {CT_Q4_K}, {5632}, 0, 1, 0, 0},
        {"down Q6_K 2048x5632 f32 x (run quantizes x)", 1, 5632, 1, {CT_Q6_K}, {2048}, 0, 1, 0, 0},
    };
    printf("\nfused decode jobs: us per launch, GB/s of weights, %% of copy\n");
    const char *only = getenv("CTORCH_BENCH_JOB"); /* the jobs whose name holds it (one to profile) */
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        if (only && !strstr(jobs[i].name, only)) continue;
        double us, gbs;
        time_job(&jobs[i], sm, s, quick, &us, &gbs);
        printf("%-40s | %7.2f us %6.0f GB/s %4.0f%%\n", jobs[i].name, us, gbs, 100.0 * gbs / bw);
        fflush(stdout);
    }
}

/* Median microseconds of one matvec launch, and GB/s of weight read. */
static void time_matvec(ct_dtype t, int64_t N, int64_t K, int64_t M, int sm, cudaStream_t s, int quick,
                        double us[2], double gbs[2])
{
    size_t rb = ct_dtype_row_bytes(t, K), wbytes = rb * (size_t)N;
    /* enough copies for 4x a 50 MiB L2 (H100) / 60 MiB (H200), at least 2 */
    int copies = (int)(((size_t)256 << 20) / wbytes) + 2;
    if (copies > 64) copies = 64;
    char *hq = host_weight(t, N, K, rb);
    void **w = malloc(sizeof(void *) * (size_t)copies);
    for (int c = 0; c < copies; c++) {
        CHECK_CUDA(cudaMalloc(&w[c], wbytes));
        CHECK_CUDA(cudaMemcpy(w[c], hq, wbytes, cudaMemcpyHostToDevice));
    }
    float *x, *out;
    void *tmp;
    CHECK_CUDA(cudaMalloc(&tmp, cuq_matvec_q8_tmp_bytes(M, K)));
    CHECK_CUDA(cudaMalloc((void **)&x, sizeof(float) * (size_t)(M * K)));
    CHECK_CUDA(cudaMalloc((void **)&out, sizeof(float) * (size_t)(M * N)));
    CHECK_CUDA(cudaMemset(x, 0, sizeof(float) * (size_t)(M * K)));
    int reps = quick ? copies : 4 * copies;
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    for (int q8 = 0; q8 < 2; q8++) {
        cudaGraph_t g;
        cudaGraphExec_t ge;
        CHECK_CUDA(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
        for (int r = 0; r < reps; r++)
            if (!(q8 ? cuq_matvec_q8(t, w[r % copies], rb, x, K, M, N, K, tmp, out, sm, s)
                     : cuq_matvec(t, w[r % copies], rb, x, K, M, N, K, out, sm, s))) {
                fprintf(stderr, "no matvec kernel for %s\n", ct_dtype_name(t));
                exit(1);
            }
        CHECK_CUDA(cudaStreamEndCapture(s, &g));
        CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
        CHECK_CUDA(cudaGraphLaunch(ge, s)); /* warm-up */
        float tm[TRIALS];
        for (int i = 0; i < TRIALS; i++) {
            CHECK_CUDA(cudaEventRecord(e0, s));
            CHECK_CUDA(cudaGraphLaunch(ge, s));
            CHECK_CUDA(cudaEventRecord(e1, s));
            CHECK_CUDA(cudaEventSynchronize(e1));
            CHECK_CUDA(cudaEventElapsedTime(&tm[i], e0, e1));
        }
        double per = median(tm, TRIALS) * 1e-3 / reps;
        us[q8] = per * 1e6;
        gbs[q8] = (double)wbytes / per / 1e9;
        CHECK_CUDA(cudaGraphExecDestroy(ge));
        CHECK_CUDA(cudaGraphDestroy(g));
    }
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    for (int c = 0; c < copies; c++) CHECK_CUDA(cudaFree(w[c]));
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(out));
    CHECK_CUDA(cudaFree(tmp));
    free(w);
    free(hq);
}

/* Milliseconds of the prefill path: dequantize w [N, K] to f32, then out [M, N] = x w^T in TF32. */
static double time_prefill(ct_dtype t, int64_t N, int64_t K, int64_t M, cudaStream_t s, cublasHandle_t h)
{
    size_t rb = ct_dtype_row_bytes(t, K);
    char *hq = malloc(rb * (size_t)N);
    float *hf = malloc(sizeof(float) * (size_t)K);
    for (int64_t k = 0; k < K; k++) hf[k] = (float)((k * 37) % 101) / 50.f - 1.f;
    for (int64_t n = 0; n < N; n++)
        if (quant_quantize_row(t, hf, hq + (size_t)n * rb, K) != CT_OK) exit(1);
    void *w;
    float *wf, *x, *out;
    CHECK_CUDA(cudaMalloc(&w, rb * (size_t)N));
    CHECK_CUDA(cudaMemcpy(w, hq, rb * (size_t)N, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMalloc((void **)&wf, sizeof(float) * (size_t)(N * K)));
    CHECK_CUDA(cudaMalloc((void **)&x, sizeof(float) * (size_t)(M * K)));
    CHECK_CUDA(cudaMalloc((void **)&out, sizeof(float) * (size_t)(M * N)));
    CHECK_CUDA(cudaMemset(x, 0, sizeof(float) * (size_t)(M * K)));
    cuq_rows rows = {.nd = 1, .shape = {N}, .dst_stride = {K}, .src_stride = {(int64_t)(rb / ct_dtype_block_bytes(t))}};
    const float one = 1.f, zero = 0.f;
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    float tm[TRIALS];
    for (int i = -1; i < TRIALS; i++) {
        CHECK_CUDA(cudaEventRecord(e0, s));
        if (!cuq_dequant(t, w, wf, CT_F32, &rows, K, 1, s)) exit(1);
        if (cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)N, (int)M, (int)K, &one, wf, CUDA_R_32F, (int)K, x, CUDA_R_32F,
                         (int)K, &zero, out, CUDA_R_32F, (int)N, CUBLAS_COMPUTE_32F_FAST_TF32,
                         CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
            exit(1);
        CHECK_CUDA(cudaEventRecord(e1, s));
        CHECK_CUDA(cudaEventSynchronize(e1));
        if (i >= 0) CHECK_CUDA(cudaEventElapsedTime(&tm[i], e0, e1));
    }
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    CHECK_CUDA(cudaFree(w));
    CHECK_CUDA(cudaFree(wf));
    CHECK_CUDA(cudaFree(x));
    CHECK_CUDA(cudaFree(out));
    free(hq);
    free(hf);
    return median(tm, TRIALS);
}

int main(int argc, char **argv)
{
    int quick = 0, fused_only = 0, jobs_only = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) quick = 1;
        else if (strcmp(argv[i], "--fused") == 0) fused_only = 1;
        else if (strcmp(argv[i], "--jobs") == 0) fused_only = jobs_only = 1;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        fprintf(stderr, "no CUDA device\n");
        return 77;
    }
    struct cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
    cudaStream_t s;
    CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double bw = copy_bw(s);
    printf("device: %s, %d SMs; device-to-device copy %.0f GB/s (read + write)\n", prop.name,
           prop.multiProcessorCount, bw);
    bench_fused(prop.multiProcessorCount, s, quick, jobs_only, bw);
    if (fused_only) return 0;
    static const ct_dtype fmts[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0,
                                    CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K};
    /* 4096^2 at M = 1 and 8, then TinyLlama's: q/o 2048^2, k/v 256x2048, gate/up 5632x2048,
     * down 2048x5632, output 32000x2048 */
    static const struct { int64_t N, K, M; const char *name; } shapes[] = {
        {4096, 4096, 1, "4096x4096 M=1"}, {4096, 4096, 8, "4096x4096 M=8"}, {2048, 2048, 1, "tl q/o 2048x2048"},
        {256, 2048, 1, "tl k/v 256x2048"}, {5632, 2048, 1, "tl up 5632x2048"}, {2048, 5632, 1, "tl down 2048x5632"},
        {32000, 2048, 1, "tl out 32000x2048"}};
    int nshapes = quick ? 2 : (int)(sizeof shapes / sizeof shapes[0]);
    enum { NF = sizeof fmts / sizeof fmts[0], NS = sizeof shapes / sizeof shapes[0] };
    static double us[NF][NS][2], gbs[NF][NS][2];
    for (int f = 0; f < NF; f++)
        for (int j = 0; j < nshapes; j++)
            time_matvec(fmts[f], shapes[j].N, shapes[j].K, shapes[j].M, prop.multiProcessorCount, s, quick, us[f][j],
                        gbs[f][j]);
    static const char *names[2] = {"dequantize + f32 FMA", "integer dots (x quantized to 8 bits per 32, __dp4a)"};
    for (int v = 0; v < 2; v++) {
        printf("\n%s: us per launch, weight GB/s, %% of the copy bandwidth\n%-6s", names[v], "format");
        for (int j = 0; j < nshapes; j++) printf(" | %-20s", shapes[j].name);
        printf("\n");
        for (int f = 0; f < NF; f++) {
            printf("%-6s", ct_dtype_name(fmts[f]));
            for (int j = 0; j < nshapes; j++)
                printf(" | %7.2f %6.0f %4.0f%%", us[f][j][v], gbs[f][j][v], 100.0 * gbs[f][j][v] / bw);
            printf("\n");
        }
    }
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS || cublasSetStream(h, s) != CUBLAS_STATUS_SUCCESS) {
        fprintf(stderr, "cuBLAS unavailable\n");
        return 1;
    }
    printf("\nprefill, 4096 x 4096 weight, M = 512: dequantize to f32 + GemmEx TF32 (ms, TFLOP/s)\n");
    for (int f = 0; f < NF; f++) {
        double ms = time_prefill(fmts[f], 4096, 4096, 512, s, h);
        printf("%-6s | %7.3f ms %6.1f TFLOP/s\n", ct_dtype_name(fmts[f]), ms, 2.0 * 4096 * 4096 * 512 / (ms * 1e-3) / 1e12);
    }
    cublasDestroy(h);
    CHECK_CUDA(cudaStreamDestroy(s));
    return 0;
}
