/* The fused decode kernels (the step planner's, see "Fused decode" in quant_kernels.h):
 * x in q8 form (quantize_q8, or rms_norm_q8 which quantizes the norm's output while it is
 * in registers), and one launch that multiplies every weight of a job by the same x.
 *
 * The job kernel lays the parts' rows end to end over the grid: a block serves R = 8 / S
 * rows of one part, S warps per row (S from the occupancy, as in quant_mv.cu), so small
 * parts (k, v) and big ones (q) share one wave. Quantized weights meet x's q8 form in
 * __dp4a (the chunk functions of quant_deq.cuh); f16 / bf16 / f32 weights are read 16
 * bytes per lane and multiplied with the f32 x in FMA (no rounding of x). A gated job has
 * each warp compute the gate row and the up row of the same output, so the activation
 * is applied in registers. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdlib.h>

#include "backends/cuda/quant_deq.cuh"
#include "backends/cuda/quant_kernels.h"

namespace {

constexpr int FU_THREADS = 256, FU_WARPS = FU_THREADS / 32;

/* Programmatic dependent launch (sm_90): every kernel here lets the next kernel of the
 * stream start at once (launch_dependents), and waits for its own predecessor only where
 * it first reads what that one wrote (wait: the predecessor has completed and its writes
 * are visible). A job kernel prefetches its weights into L2 before it waits, so the weight
 * stream overlaps the norm, the previous job or the launch latency. No-ops where the
 * kernel was launched without the attribute. */
__device__ __forceinline__ void pdl_launch_next()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Device facts read once: whether to launch with PDL (sm_90+, not CTORCH_CUDA_PDL=0) and
 * the L2 size (jobs up to half of it prefetch their weights). */
struct DevFacts {
    bool pdl;
    size_t l2;
};
const DevFacts &dev_facts()
{
    static DevFacts f;
    static bool done;
    if (!done) {
        int dev = 0, major = 0, l2 = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
        const char *e = getenv("CTORCH_CUDA_PDL");
        f.pdl = major >= 9 && !(e && e[0] == '0');
        f.l2 = l2 > 0 ? (size_t)l2 : 0;
        const char *pf = getenv("CTORCH_CUDA_PREFETCH");
        if (pf && pf[0] == '0') f.l2 = 0;
        done = true;
    }
    return f;
}

/* Launches kern<<<grid, threads>>>(args...) on st, with PDL where the device has it. */
template <typename... KArgs, typename... Args>
void launch_pdl(void (*kern)(KArgs...), unsigned grid, unsigned threads, cudaStream_t st, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(threads);
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = dev_facts().pdl ? 1 : 0;
    (void)cudaLaunchKernelEx(&cfg, kern, args...); /* an error stays for cuda_check_launch */
}

size_t round16(size_t n) { return (n + 15) & ~(size_t)15; }

bool float_weight(ct_dtype t) { return t == CT_F16 || t == CT_BF16 || t == CT_F32; }

/* ---- q8 form of x ---- */

/* One warp per 32-element block: lane i holds element i. The CPU's Q8_0 rounding of its
 * activations: d = amax / 127, q = round(v / d). */
__device__ __forceinline__ void q8_block(float v, int lane, int8_t *q, float *d, float *s8)
{
    float amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float dd = amax / 127.f, id = dd != 0.f ? 1.f / dd : 0.f;
    int qi = max(-127, min(127, __float2int_rn(v * id)));
    q[lane] = (int8_t)qi;
    int s = qi;
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) *d = dd;
    if ((lane & 7) == 0) s8[lane >> 3] = dd * (float)s;
}

__global__ void quantize_q8_kernel(const float *__restrict__ x, int64_t x_row, int64_t M, int64_t K,
                                   int8_t *__restrict__ q, float *__restrict__ d, float *__restrict__ s8)
{
    pdl_launch_next();
    int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nb = K / 32;
    int lane = threadIdx.x & 31;
    if (gw >= M * nb) return;
    int64_t m = gw / nb, b = gw % nb;
    pdl_wait();
    q8_block(x[m * x_row + b * 32 + lane], lane, q + m * K + b * 32, d + m * nb + b, s8 + m * (K / 8) + b * 4);
}

template <typename W> __device__ __forceinline__ float wload(const W *w, int64_t i);
template <> __device__ __forceinline__ float wload<float>(const float *w, int64_t i) { return w[i]; }
template <> __device__ __forceinline__ float wload<__half>(const __half *w, int64_t i) { return __half2float(w[i]); }
template <> __device__ __forceinline__ float wload<__nv_bfloat16>(const __nv_bfloat16 *w, int64_t i)
{
    return __bfloat162float(w[i]);
}

constexpr int RMS_THREADS = 512;

/* A block per row: the sum of squares, then each warp scales and quantizes whole 32-element
 * blocks (the CPU's order: x * s * w, s = 1 / sqrt(mean + eps) in double). */
template <typename W>
__global__ void __launch_bounds__(RMS_THREADS) rms_q8_kernel(const float *__restrict__ x, int64_t x_row, int64_t K,
                                                              const W *__restrict__ w, float eps, float *__restrict__ y,
                                                              int8_t *__restrict__ q, float *__restrict__ qd,
                                                              float *__restrict__ qs8)
{
    __shared__ float part[RMS_THREADS / 32];
    __shared__ float scale;
    int64_t m = blockIdx.x;
    const float *xr = x + m * x_row;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    pdl_launch_next();
    pdl_wait();
    float ss = 0.f;
    for (int64_t i = threadIdx.x; i < K; i += RMS_THREADS) ss = fmaf(xr[i], xr[i], ss);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) part[warp] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float t = 0.f;
        for (int i = 0; i < RMS_THREADS / 32; i++) t += part[i];
        scale = (float)(1.0 / sqrt((double)t / (double)K + (double)eps));
    }
    __syncthreads();
    float s = scale;
    int64_t nb = (K + 31) / 32;
    for (int64_t b = warp; b < nb; b += RMS_THREADS / 32) {
        int64_t i = b * 32 + lane;
        float v = 0.f;
        if (i < K) {
            v = xr[i] * s;
            if (w) v *= wload<W>(w, i);
            y[m * K + i] = v;
        }
        if (q) q8_block(v, lane, q + m * K + b * 32, qd + m * (K / 32) + b, qs8 + m * (K / 8) + b * 4);
    }
}

/* ---- the job kernel ---- */

struct FuPart {
    ct_dtype wt;
    const uint8_t *w;
    size_t w_row;
    int64_t N;
    float *out;
    const float *add;
    float *out2;
    unsigned rbytes; /* bytes of a row that the kernel reads (the prefetch's span) */
};

struct FuArgs {
    int n_parts; /* parts laid out over the grid (1 for a gated job: both rows per warp) */
    FuPart p[CUQ_MV_MAX_PARTS];
    unsigned first_unit[CUQ_MV_MAX_PARTS + 1]; /* units of R rows, part by part */
    int64_t K;
    const float *x;
    int64_t x_row;
    const int8_t *xq; /* NULL: quantized weights are dequantized and multiplied with f32 x */
    const float *xd, *xs8;
    int glu;
    float *glu_out;
    FuPart up; /* the gated job's second weight */
    int S;
    bool prefetch;
};

/* acc[m] += the products of x's q8 form with this lane's chunks of a quantized row. */
template <class F, int M>
__device__ __forceinline__ void dot_q(const uint8_t *__restrict__ row, int c0, int step, int64_t K,
                                      const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                      const float *__restrict__ xs8, float *acc)
{
    int nc = (int)(K / CUQ_CHUNK);
#pragma unroll 4
    for (int c = c0; c < nc; c += step) {
        uint32_t q[4];
        float a, b;
        int ea, eb;
        F::chunk(row, c, q, a, b, ea, eb);
#pragma unroll
        for (int m = 0; m < M; m++) {
            const int8_t *xm = xq + m * K;
            int2 xa = __ldg((const int2 *)(xm + ea)), xb = __ldg((const int2 *)(xm + eb));
            int si = __dp4a((int)q[0], xa.x, 0);
            si = __dp4a((int)q[1], xa.y, si);
            si = __dp4a((int)q[2], xb.x, si);
            si = __dp4a((int)q[3], xb.y, si);
            const float *sm = xs8 + m * (K / 8);
            float dx = __ldg(xd + m * (K / 32) + (ea >> 5)), xs = __ldg(sm + (ea >> 3)) + __ldg(sm + (eb >> 3));
            acc[m] = fmaf(a * dx, (float)si, fmaf(b, xs, acc[m]));
        }
    }
}

__device__ __forceinline__ float dot8(const float *__restrict__ x, const float *v, float s)
{
    float4 a = __ldg((const float4 *)x), b = __ldg((const float4 *)x + 1);
    s = fmaf(v[0], a.x, s);
    s = fmaf(v[1], a.y, s);
    s = fmaf(v[2], a.z, s);
    s = fmaf(v[3], a.w, s);
    s = fmaf(v[4], b.x, s);
    s = fmaf(v[5], b.y, s);
    s = fmaf(v[6], b.z, s);
    return fmaf(v[7], b.w, s);
}

/* acc[m] += this lane's chunks of a quantized row, dequantized, times x in f32 (one row of
 * x and a small weight: no launch to quantize x, and x exact). */
template <class F, int M>
__device__ __forceinline__ void dot_deq(const uint8_t *__restrict__ row, int c0, int step, int64_t K,
                                        const float *__restrict__ x, int64_t x_row, float *acc)
{
    int nc = (int)(K / CUQ_CHUNK);
#pragma unroll 4
    for (int c = c0; c < nc; c += step) {
        float v[16];
        int ea, eb;
        cuq::deq_chunk<F>(row, c, v, ea, eb);
#pragma unroll
        for (int m = 0; m < M; m++) acc[m] = dot8(x + m * x_row + eb, v + 8, dot8(x + m * x_row + ea, v, acc[m]));
    }
}

/* 8 weights of a float row (16 bytes: 8 f16 / bf16, or two loads of 4 f32) as floats. */
template <typename W> __device__ __forceinline__ void load8(const uint8_t *p, float *v);
template <> __device__ __forceinline__ void load8<float>(const uint8_t *p, float *v)
{
    float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
template <> __device__ __forceinline__ void load8<__half>(const uint8_t *p, float *v)
{
    uint4 r = __ldg((const uint4 *)p);
    uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(*(const __half2 *)&u[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
template <> __device__ __forceinline__ void load8<__nv_bfloat16>(const uint8_t *p, float *v)
{
    uint4 r = __ldg((const uint4 *)p);
    uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(u[i] << 16);
        v[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
    }
}

/* acc[m] += this lane's runs of 8 elements of a float row times x (f32). */
template <typename W, int M>
__device__ __forceinline__ void dot_f(const uint8_t *__restrict__ row, int u0, int step, int64_t K,
                                      const float *__restrict__ x, int64_t x_row, float *acc)
{
    int nu = (int)(K / 8);
#pragma unroll 4
    for (int u = u0; u < nu; u += step) {
        float v[8];
        load8<W>(row + (size_t)u * 8 * sizeof(W), v);
#pragma unroll
        for (int m = 0; m < M; m++) acc[m] = dot8(x + m * x_row + (int64_t)u * 8, v, acc[m]);
    }
}

/* acc = row n of part p times x, over this warp's share (slice s of S) of the row. */
template <int M>
__device__ __forceinline__ void row_dot(const FuPart &p, const FuArgs &a, int64_t n, int s, int lane, float *acc)
{
    const uint8_t *row = p.w + (size_t)n * p.w_row;
    int u0 = s * 32 + lane, step = 32 * a.S;
    switch (p.wt) {
    case CT_F32: dot_f<float, M>(row, u0, step, a.K, a.x, a.x_row, acc); return;
    case CT_F16: dot_f<__half, M>(row, u0, step, a.K, a.x, a.x_row, acc); return;
    case CT_BF16: dot_f<__nv_bfloat16, M>(row, u0, step, a.K, a.x, a.x_row, acc); return;
    default: break;
    }
    if (a.xq) {
#define FU_DOT_Q dot_q<F, M>(row, u0, step, a.K, a.xq, a.xd, a.xs8, acc)
        CUQ_DISPATCH(p.wt, FU_DOT_Q, return);
#undef FU_DOT_Q
    } else {
#define FU_DOT_DEQ dot_deq<F, M>(row, u0, step, a.K, a.x, a.x_row, acc)
        CUQ_DISPATCH(p.wt, FU_DOT_DEQ, return);
#undef FU_DOT_DEQ
    }
}

/* Asks L2 for this warp's share of row n (128-byte lines, lanes side by side). */
__device__ __forceinline__ void prefetch_row(const FuPart &p, int64_t n, int s, int S, int lane)
{
    const uint8_t *row = p.w + (size_t)n * p.w_row;
    for (unsigned o = (unsigned)(s * 32 + lane) * 128u; o < p.rbytes; o += 32u * 128u * (unsigned)S)
        asm volatile("prefetch.global.L2 [%0];" ::"l"(row + o));
}

/* The CPU's activations of SWIGLU and GEGLU (tanh form), same formulas in f32. */
__device__ __forceinline__ float sigmoid_cpu(float v)
{
    float e = expf(-fabsf(v)), s = 1.0f / (1.0f + e);
    return v < 0.0f ? e * s : s;
}
__device__ __forceinline__ float gate_act(int glu, float g)
{
    if (glu == 1) return g * sigmoid_cpu(g);
    return g * sigmoid_cpu((float)(2.0 * 0.7978845608028654) * (g + (float)0.044715 * g * g * g));
}

/* Sums acc over the warp and then over the S warps of the row: the result in every lane
 * of the row's first warp (s == 0); other warps' values are meaningless. */
template <int NA>
__device__ __forceinline__ void reduce_row(float *acc, float (*red)[2 * CUQ_MV_MAX_ROWS], int warp, int s, int S,
                                           int lane)
{
#pragma unroll
    for (int m = 0; m < NA; m++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
    if (S == 1) return;
    __syncthreads(); /* red is free (the previous unit's readers are done) */
    if (lane == 0)
#pragma unroll
        for (int m = 0; m < NA; m++) red[warp][m] = acc[m];
    __syncthreads();
    if (s == 0)
#pragma unroll
        for (int m = 0; m < NA; m++) {
            float t = 0.f;
            for (int i = 1; i < S; i++) t += red[warp + i][m];
            acc[m] += t;
        }
}

/* Unit u (R rows of one part) to its part and this warp's row. */
__device__ __forceinline__ int unit_part(const FuArgs &a, unsigned u)
{
    int pi = 0;
    while (pi + 1 < a.n_parts && u >= a.first_unit[pi + 1]) pi++;
    return pi;
}

/* Blocks loop over units of R rows (grid = at most one wave): first every warp asks L2
 * for all its rows (the prefetch, before waiting on the predecessor), then computes them. */
template <int M, bool GLU> __global__ void __launch_bounds__(FU_THREADS) job_kernel(const FuArgs a)
{
    __shared__ float red[FU_WARPS][2 * CUQ_MV_MAX_ROWS];
    pdl_launch_next();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int S = a.S, R = FU_WARPS / S, rb = warp / S, s = warp % S;
    unsigned units = a.first_unit[a.n_parts];
    if (a.prefetch)
        for (unsigned u = blockIdx.x; u < units; u += gridDim.x) {
            int pi = unit_part(a, u);
            int64_t n = (int64_t)(u - a.first_unit[pi]) * R + rb;
            if (n >= a.p[pi].N) continue;
            prefetch_row(a.p[pi], n, s, S, lane);
            if (GLU) prefetch_row(a.up, n, s, S, lane);
        }
    pdl_wait();
    for (unsigned u = blockIdx.x; u < units; u += gridDim.x) {
        int pi = unit_part(a, u);
        const FuPart &p = a.p[pi];
        int64_t n = (int64_t)(u - a.first_unit[pi]) * R + rb;
        constexpr int NA = GLU ? 2 * M : M;
        float acc[NA];
#pragma unroll
        for (int m = 0; m < NA; m++) acc[m] = 0.f;
        if (n < p.N) {
            row_dot<M>(p, a, n, s, lane, acc);
            if (GLU) row_dot<M>(a.up, a, n, s, lane, acc + M);
        }
        reduce_row<NA>(acc, red, warp, s, S, lane);
        if (s != 0 || n >= p.N) continue;
        /* lane m writes row m of x's outputs */
#pragma unroll
        for (int m = 0; m < M; m++) {
            if (lane != m) continue;
            int64_t o = (int64_t)m * p.N + n;
            p.out[o] = acc[m];
            if (p.add) p.out2[o] = p.add[o] + acc[m];
            if (GLU) {
                a.up.out[o] = acc[M + m];
                a.glu_out[o] = gate_act(a.glu, acc[m]) * acc[M + m];
            }
        }
    }
}

/* Warps per row: one wave of resident warps for all parts' rows together, every lane
 * keeping at least two chunks of its own (see split_of in quant_mv.cu). */
int split_for(int64_t rows, int64_t K, int64_t resident)
{
    int64_t nc = K / CUQ_CHUNK;
    int S = 1;
    while (S < FU_WARPS && rows * S * 2 <= resident && nc >= 32 * S * 2) S *= 2;
    return S;
}

template <int M, bool GLU> void launch_job(FuArgs &a, int64_t rows, int sm_count, cudaStream_t st)
{
    static int occ;
    if (occ == 0) {
        int nb = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, job_kernel<M, GLU>, FU_THREADS, 0) != cudaSuccess ||
            nb < 1)
            nb = 1;
        occ = nb;
    }
    int64_t resident_blocks = (int64_t)sm_count * occ;
    a.S = split_for(rows, a.K, resident_blocks * FU_WARPS);
    int R = FU_WARPS / a.S;
    unsigned u = 0;
    for (int i = 0; i < a.n_parts; i++) {
        a.first_unit[i] = u;
        u += (unsigned)((a.p[i].N + R - 1) / R);
    }
    a.first_unit[a.n_parts] = u;
    unsigned grid = (int64_t)u < resident_blocks ? u : (unsigned)resident_blocks;
    launch_pdl(job_kernel<M, GLU>, grid, FU_THREADS, st, a);
}

template <bool GLU> bool launch_m(FuArgs &a, int64_t M, int64_t rows, int sm_count, cudaStream_t st)
{
    switch (M) {
    case 1: launch_job<1, GLU>(a, rows, sm_count, st); return true;
    case 2: launch_job<2, GLU>(a, rows, sm_count, st); return true;
    case 3: launch_job<3, GLU>(a, rows, sm_count, st); return true;
    case 4: launch_job<4, GLU>(a, rows, sm_count, st); return true;
    case 5: launch_job<5, GLU>(a, rows, sm_count, st); return true;
    case 6: launch_job<6, GLU>(a, rows, sm_count, st); return true;
    case 7: launch_job<7, GLU>(a, rows, sm_count, st); return true;
    case 8: launch_job<8, GLU>(a, rows, sm_count, st); return true;
    default: return false;
    }
}

bool job_needs_q8(const cuq_mv_job *job)
{
    for (int i = 0; i < job->n_parts; i++)
        if (!float_weight(job->part[i].wt)) return true;
    return false;
}

size_t part_bytes(const cuq_mv_part *p, int64_t K) { return ct_dtype_row_bytes(p->wt, K); }

/* Quantized weights of one row of x and at most this many elements in all, with no q8
 * form given, are dequantized and multiplied in f32 (one launch: quantizing x would be a
 * second); the crossover of quant.c's MV_FMA_MAX_ELEMS (measured with bench/cuda_quant.c). */
#define FU_FMA_MAX_ELEMS ((int64_t)1 << 22)

bool use_fma(const cuq_mv_job *job)
{
    if (job->xq || job->M != 1) return false;
    int64_t n = 0;
    for (int i = 0; i < job->n_parts; i++) n += job->part[i].N;
    return n * job->K <= FU_FMA_MAX_ELEMS;
}

bool part_ok(const cuq_mv_part *p, int64_t K)
{
    if (!p->w || !p->out || p->N < 1 || p->N > INT32_MAX) return false;
    if ((p->add == NULL) != (p->out2 == NULL)) return false;
    if (float_weight(p->wt)) /* 16-byte loads of every row */
        return ((uintptr_t)p->w & 15) == 0 && (p->N == 1 || p->w_row % 16 == 0) &&
               p->w_row >= (size_t)K * ct_dtype_block_bytes(p->wt);
    if (!cuq_format_ok(p->wt) || K % ct_dtype_block_size(p->wt) != 0) return false;
    size_t al = (size_t)cuq_align(p->wt);
    return ((uintptr_t)p->w % al) == 0 && (p->N == 1 || p->w_row % al == 0) && p->w_row >= part_bytes(p, K);
}

} // namespace

extern "C" size_t cuq_q8_bytes(int64_t M, int64_t K)
{
    return round16((size_t)(M * K)) + round16(sizeof(float) * (size_t)(M * K / 32)) +
           sizeof(float) * (size_t)(M * K / 8);
}

extern "C" cuq_q8 cuq_q8_at(void *mem, int64_t M, int64_t K)
{
    cuq_q8 r;
    r.q = (int8_t *)mem;
    r.d = (float *)((char *)mem + round16((size_t)(M * K)));
    r.s8 = (float *)((char *)r.d + round16(sizeof(float) * (size_t)(M * K / 32)));
    r.M = M;
    r.K = K;
    return r;
}

extern "C" bool cuq_quantize_q8(const float *x, int64_t x_row, int64_t M, int64_t K, const cuq_q8 *q,
                                cudaStream_t stream)
{
    if (!x || !q || M < 1 || K < 32 || K % 32 != 0 || x_row < K || q->M != M || q->K != K) return false;
    int64_t threads = M * (K / 32) * 32;
    launch_pdl(quantize_q8_kernel, (unsigned)((threads + FU_THREADS - 1) / FU_THREADS), FU_THREADS, stream, x, x_row,
               M, K, q->q, q->d, q->s8);
    return true;
}

extern "C" bool cuq_rms_norm_q8(const float *x, int64_t x_row, int64_t M, int64_t K, const void *w, ct_dtype wdt,
                                float eps, float *y, const cuq_q8 *q, cudaStream_t stream)
{
    if (!x || !y || M < 1 || K < 1 || x_row < K || M > INT32_MAX) return false;
    if (q && (K % 32 != 0 || q->M != M || q->K != K)) return false;
    int8_t *qq = q ? q->q : NULL;
    float *qd = q ? q->d : NULL, *qs = q ? q->s8 : NULL;
    unsigned g = (unsigned)M;
    switch (w ? wdt : CT_F32) {
    case CT_F32: launch_pdl(rms_q8_kernel<float>, g, RMS_THREADS, stream, x, x_row, K, (const float *)w, eps, y, qq, qd, qs); break;
    case CT_F16: launch_pdl(rms_q8_kernel<__half>, g, RMS_THREADS, stream, x, x_row, K, (const __half *)w, eps, y, qq, qd, qs); break;
    case CT_BF16:
        launch_pdl(rms_q8_kernel<__nv_bfloat16>, g, RMS_THREADS, stream, x, x_row, K, (const __nv_bfloat16 *)w, eps, y,
                   qq, qd, qs);
        break;
    default: return false;
    }
    return true;
}

extern "C" bool cuq_mv_ok(const cuq_mv_job *job)
{
    if (!job || job->M < 1 || job->M > CUQ_MV_MAX_ROWS || job->K < 32 || job->K % 32 != 0 || job->K > INT32_MAX / 2)
        return false;
    if (job->n_parts < 1 || job->n_parts > CUQ_MV_MAX_PARTS) return false;
    /* f32 x is read by float weights, and quantized here when the caller has no q8 form */
    bool need_x = !job->xq;
    for (int i = 0; i < job->n_parts; i++) {
        if (!part_ok(&job->part[i], job->K)) return false;
        if (float_weight(job->part[i].wt)) need_x = true;
    }
    if (need_x && (!job->x || ((uintptr_t)job->x & 15) != 0 || job->x_row < job->K || job->x_row % 4 != 0))
        return false;
    if (job->xq && (job->xq->M != job->M || job->xq->K != job->K || !job->xq->q)) return false;
    if (job->glu) {
        if ((job->glu != 1 && job->glu != 2) || job->n_parts != 2 || !job->glu_out) return false;
        if (job->part[0].N != job->part[1].N || job->part[0].add || job->part[1].add) return false;
    }
    return true;
}

extern "C" size_t cuq_mv_tmp_bytes(const cuq_mv_job *job)
{
    return job->xq || !job_needs_q8(job) || use_fma(job) ? 0 : cuq_q8_bytes(job->M, job->K);
}

extern "C" bool cuq_mv_run(const cuq_mv_job *job, void *tmp, int sm_count, cudaStream_t stream)
{
    if (!cuq_mv_ok(job)) return false;
    cuq_q8 own;
    const cuq_q8 *xq = job->xq;
    if (!xq && job_needs_q8(job) && !use_fma(job)) {
        if (!tmp) return false;
        own = cuq_q8_at(tmp, job->M, job->K);
        if (!cuq_quantize_q8(job->x, job->x_row, job->M, job->K, &own, stream)) return false;
        xq = &own;
    }
    FuArgs a = {};
    a.K = job->K;
    a.x = job->x;
    a.x_row = job->x_row;
    if (xq) {
        a.xq = xq->q;
        a.xd = xq->d;
        a.xs8 = xq->s8;
    }
    int n = job->glu ? 1 : job->n_parts;
    a.n_parts = n;
    int64_t rows = 0;
    size_t bytes = 0;
    for (int i = 0; i < job->n_parts; i++) {
        const cuq_mv_part *p = &job->part[i];
        size_t rb = part_bytes(p, job->K);
        FuPart fp = {p->wt, (const uint8_t *)p->w, p->w_row, p->N, p->out, p->add, p->out2, (unsigned)rb};
        bytes += rb * (size_t)p->N;
        if (i < n) {
            a.p[i] = fp;
            rows += p->N;
        } else {
            a.up = fp;
        }
    }
    /* the whole job's weights fit L2 beside the rest of the step: ask for them at once */
    a.prefetch = bytes <= dev_facts().l2 / 2;
    a.glu = job->glu;
    a.glu_out = job->glu_out;
    return job->glu ? launch_m<true>(a, job->M, rows, sm_count, stream)
                    : launch_m<false>(a, job->M, rows, sm_count, stream);
}
