/* The fused decode kernels (the step planner's, see "Fused decode" in quant_kernels.h):
 * x in q8 form (quantize_q8, or rms_norm_q8 which quantizes the norm's output while it is
 * in registers), and one launch that multiplies every weight of a job by the same x.
 *
 * The job kernel (quant_fused.cuh, instantiated in quant_fused_job_*.cu) lays the parts'
 * rows end to end: units of R = 8 / S rows of one part, S warps per row (S from the
 * occupancy, as in quant_mv.cu), so small parts (k, v) and big ones (q) share one wave; a
 * grid of at most one wave loops over the units. Quantized weights meet x's q8 form in
 * __dp4a, a lane taking 32-element units (two chunks of quant_deq.cuh); f16 / bf16 / f32
 * weights are read 16 bytes per lane and multiplied with the f32 x in FMA (no rounding of
 * x); one row of x with a small weight and no q8 form dequantizes instead (one launch). A
 * gated job has each warp compute the gate row and the up row of the same output, so the
 * activation is applied in registers. Launches use PDL and quantized weights are prefetched
 * into L2 before the kernel waits for its predecessor (quant_fused.cuh). Jobs whose weights are
 * all Q6_K (and M <= 2) stage each warp's rows through shared memory instead
 * (quant_fused_seg.cuh); f16 / bf16 rows at M <= 2 load 4 runs a lane before the math.
 * Jobs whose weights are all Q4_K (M = 1, x's q8 form given or made by quantize_q8) run a
 * kernel of their own, without the format dispatch (quant_fused_q4k.cu); so do M = 1 jobs
 * of Q6_K weights, or of Q4_K and Q6_K ones, with x's q8 form (quant_fused_q6k.cu).
 *
 * Measured on an H100 (bench/cuda_quant.c --jobs, M = 1, x's q8 form given, copy 2914 GB/s;
 * the kernel before the segment and f16 paths -> now): qkv Q4_K/Q6_K 3.68 -> 4.09 us, gate/up Q4_K
 * SWIGLU 9.03 -> 8.40 us (1545 GB/s), o Q4_K 2048x2048 2.73 -> 2.60 us, down Q6_K 2048x5632
 * 7.71 -> 7.41 us, output Q6_K 32000x2048 34.97 -> 32.89 us (1635 GB/s); f16 gate/up 24.1 ->
 * 19.6 us and down 10.7 -> 9.7 us (80% of copy). ncu (cold, isolated) on gate/up: 50%
 * theoretical occupancy (64 registers), 66% of issue cycles with no eligible warp, long
 * scoreboard stalls on L1TEX: latency-bound, not issue-bound. Loading Q4_K / Q6_K segments
 * straight from global memory in the lanes' order was slower (32 sectors per instruction,
 * each sector read several times), and so was shared-memory staging for Q4_K.
 *
 * x staged by the job kernel (FuArgs::stage, CTORCH_CUDA_MVSTAGE): each block makes the
 * norm and x's q8 form itself, in shared memory, after the PDL wait (one launch a group
 * instead of rms_q8 + job, or quantize_q8 + job), bit for bit what the separate kernels
 * make (the norm's sums in rms_q8_kernel's order: in another order mini-a Q4_K_M's greedy
 * tokens on the GPU parted from the CPU's on all three prompts of test_cuda_quant). Measured
 * on the H100 (TinyLlama-shaped, `ctorch bench -p 512 -n 128 -r 3`, one binary, one run):
 * Q4_K_M tg128 770 t/s with the separate kernels, 713 with every norm job staged, 673 with
 * every job staged (decode graph 201 -> 156 -> 134 nodes); F16 598 (main) -> 616 with the
 * norm staged for its float weights (179 -> 134 nodes; another run: main 620, separate
 * kernels 637 +- 30, staged 643 +- 24: a gain within that run's noise). Fewer launches are not faster here: with the separate
 * kernels the job kernel, launched early, streams its weights into L2 while the one-block
 * norm runs, whereas a staging block cannot start its weights' loads before its prologue
 * (the x loads queue behind the prefetches, then a block-wide reduction). Jobs (--jobs,
 * staged vs separate): norm + qkv Q4_K 8.07 vs 7.91 us, norm + gate/up Q4_K 12.20 vs 12.57,
 * down Q6_K with x quantized 12.99 vs 9.27 (its kernel needs 80 registers staged: one
 * block less per SM, and a coarser split). Until session 28 a norm whose output only float
 * weights read was staged by default (no q8 form: the f32 copy, CTORCH_CUDA_MVSTAGE=float);
 * on the H200 the separate kernels measured faster there too, TinyLlama-shaped F16 tg128
 * 933 / 956 / 954 against 908 / 909 / 910 t/s (three rounds alternated in one call), so by
 * default nothing is staged; =float / norm / all stage more. Session 22 staged the norm in
 * the one-format Q4_K / Q6_K kernels too (a grid of one wave, stage_x before the dots; not
 * kept): on the H200 norm + gate/up 9.32 -> 10.88 us, norm + q/k/v 5.54 -> 7.69,
 * TinyLlama Q4_K_M tg128 1,399 / 1,437 -> 1,049 / 1,073 t/s (the staged gate/up 13.4 us a
 * layer in the step against 7.2 + 2.2 for job and norm). */
#include "backends/cuda/quant_fused.cuh"
#include "backends/cuda/fuse_norm.cuh"

namespace cufu {
CUFU_JOBS(CUFU_EXTERN)
}

namespace {

using namespace cufu;

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
    q8_block(ld_act(x + m * x_row + b * 32 + lane), lane, q + m * K + b * 32, d + m * nb + b, s8 + m * (K / 8) + b * 4);
}

template <typename W> __device__ __forceinline__ float wload(const W *w, int64_t i);
template <> __device__ __forceinline__ float wload<float>(const float *w, int64_t i) { return w[i]; }
template <> __device__ __forceinline__ float wload<__half>(const __half *w, int64_t i) { return __half2float(w[i]); }
template <> __device__ __forceinline__ float wload<__nv_bfloat16>(const __nv_bfloat16 *w, int64_t i)
{
    return __bfloat162float(w[i]);
}

constexpr int RMS_THREADS = 512, RMS_WARPS = RMS_THREADS / 32;

/* Blocks per row of rms_q8_kernel: each quantizes one 32-element block a warp. */
inline int rms_slices(int64_t K)
{
    int64_t nb = (K + 31) / 32, g = (nb + RMS_WARPS - 1) / RMS_WARPS;
    return (int)(g < 1 ? 1 : g > 8 ? 8 : g);
}

/* 1 / sqrt(mean + eps) of a row from its RMS_THREADS threads' sums of squares (ss): a
 * warp's by shuffles, then the warps' in order by one thread, in double as the CPU's
 * rms_norm rounds it. Every thread of the block calls it once and gets the scale. */
__device__ __forceinline__ float rms_block_scale(float ss, int64_t K, float eps)
{
    __shared__ float part[RMS_WARPS];
    __shared__ float scale;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) part[warp] = ss;
    __syncthreads();
    if (threadIdx.x == 0) {
        float tt = 0.f;
        for (int i = 0; i < RMS_WARPS; i++) tt += part[i];
        scale = (float)(1.0 / sqrt((double)tt / (double)K + (double)eps));
    }
    __syncthreads();
    return scale;
}

/* G blocks per row (blockIdx.x = row * G + slice): each block sums the row's squares (the
 * CPU's order: x * s * w, s = 1 / sqrt(mean + eps) in double), every block in the same
 * order, so all hold the same scale; then its warps scale and quantize the slice's whole
 * 32-element blocks. The norm weight is asked into L2 before the PDL wait (weights are not
 * written by the step: between tokens they fall out of L2, and their loads came after the
 * reduction). Measured on the H100 (ncu, one kernel alone, TinyLlama's 2048-wide rows): one
 * block per row quantizing 4 blocks a warp took 6.0 us, 4 blocks with the prefetch 4.1 us;
 * TinyLlama Q4_K_M tg128 (all else main's) 908-924 -> 989 t/s. Where the caller knows that
 * nothing before the kernel writes the weight (w_early), its value is read into registers
 * before the wait instead, and the element each thread scales first is the one it loaded for
 * the sum: after the reduction no load is left on the path (2048-wide rows). */
template <typename W>
__global__ void __launch_bounds__(RMS_THREADS) rms_q8_kernel(const float *__restrict__ x, int64_t x_row, int64_t K,
                                                              const W *__restrict__ w, bool w_early, float eps,
                                                              float *__restrict__ y, int8_t *__restrict__ q,
                                                              float *__restrict__ qd, float *__restrict__ qs8, int G)
{
    int64_t m = blockIdx.x / G, nb = (K + 31) / 32, per = (nb + G - 1) / G;
    int64_t b0 = (blockIdx.x % G) * per, b1 = b0 + per < nb ? b0 + per : nb;
    const float *xr = x + m * x_row;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    /* this thread's first element to scale (i0) is one it loads for the sum (x[t + 512 j],
     * j0 < 4: TinyLlama's 2048-wide rows, slices of 16 blocks) */
    const int64_t i0 = b0 * 32 + threadIdx.x;
    const int64_t j0 = K <= 4 * RMS_THREADS && (b0 * 32) % RMS_THREADS == 0 ? b0 * 32 / RMS_THREADS : -1;
    pdl_launch_next();
    float w0 = 1.f;
    if (w && w_early) { /* nothing before this kernel writes w: its value now, not after the reduction */
        if (b0 + warp < b1 && i0 < K) w0 = wload<W>(w, i0);
    } else if (w) {
        int64_t end = (b1 * 32 < K ? b1 * 32 : K) * (int64_t)sizeof(W);
        for (int64_t o = b0 * 32 * (int64_t)sizeof(W) + threadIdx.x * 128; o < end; o += (int64_t)RMS_THREADS * 128)
            asm volatile("prefetch.global.L2 [%0];" ::"l"((const char *)w + o));
    }
    pdl_wait();
    /* thread t's squares of x[t], x[t + 512], ... in that order, loads 4 at a time */
    float ss = 0.f, t[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t i = threadIdx.x; i < K; i += 4 * RMS_THREADS) {
#pragma unroll
        for (int j = 0; j < 4; j++) t[j] = i + RMS_THREADS * j < K ? ld_act(xr + i + RMS_THREADS * j) : 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++)
            if (i + RMS_THREADS * j < K) ss = fmaf(t[j], t[j], ss);
    }
    float s = rms_block_scale(ss, K, eps);
    for (int64_t b = b0 + warp; b < b1; b += RMS_WARPS) {
        int64_t i = b * 32 + lane;
        bool first = i == i0;
        float v = 0.f;
        if (i < K) {
            v = first && j0 >= 0 ? (j0 == 0 ? t[0] : j0 == 1 ? t[1] : j0 == 2 ? t[2] : t[3]) : ld_act(xr + i);
            v *= s;
            if (w) v *= first && w_early ? w0 : wload<W>(w, i);
            y[m * K + i] = v;
        }
        if (q) q8_block(v, lane, q + m * K + b * 32, qd + m * (K / 32) + b, qs8 + m * (K / 8) + b * 4);
    }
}


/* ---- post-norm + residual add, then the next block's pre-norm and q8 form ---- */

/* A thread's elements of a row: i = threadIdx.x + RMS_THREADS j, j < NAQ_REG. */
constexpr int NAQ_REG = CUQ_NA_Q8_MAX_K / RMS_THREADS;

struct NaqArgs {
    fusek_norm_add na;
    const void *w2;
    ct_dtype w2dt;
    bool w2_early;
    float eps2;
    float *y2;
    int8_t *q;
    float *qd, *qs8;
};

/* fuse_kernels.cu's norm_add_kernel and then rms_q8_kernel on its sum z, one block a row:
 * each sum in its own kernel's order (funorm's strides of NA_STRIDE through shared memory;
 * then rms_q8's, which are this thread's own elements in order), each element rounded as
 * there, so the bits are those of the two launches, one launch and one wait for the
 * producer fewer (Gemma 3: twice a layer). A warp quantizes the 32-blocks warp, warp +
 * RMS_WARPS, ..., which hold exactly its threads' elements. Both weights are read before
 * the PDL wait where nothing in the step writes them. */
__global__ void __launch_bounds__(RMS_THREADS) norm_add_q8_kernel(const NaqArgs a)
{
    __shared__ float xs[CUQ_NA_Q8_MAX_K];
    __shared__ float red[funorm::NA_STRIDE / 32];
    pdl_launch_next();
    const int64_t K = a.na.K, m = blockIdx.x;
    const int t = threadIdx.x, lane = t & 31, warp = t >> 5;
    float w1[NAQ_REG], w2[NAQ_REG], xv[NAQ_REG], rv[NAQ_REG], zv[NAQ_REG];
    if (a.na.w_early) funorm::na_weights<NAQ_REG>(a.na.w, a.na.wdt, K, RMS_THREADS, w1);
    if (a.w2_early) funorm::na_weights<NAQ_REG>(a.w2, a.w2dt, K, RMS_THREADS, w2);
    pdl_wait();
    if (!a.na.w_early) funorm::na_weights<NAQ_REG>(a.na.w, a.na.wdt, K, RMS_THREADS, w1);
    if (!a.w2_early) funorm::na_weights<NAQ_REG>(a.w2, a.w2dt, K, RMS_THREADS, w2);
    const float *x = a.na.x + m * K, *r = a.na.r + m * K;
#pragma unroll
    for (int j = 0; j < NAQ_REG; j++) {
        int64_t i = t + (int64_t)j * RMS_THREADS;
        xv[j] = i < K ? ld_act(x + i) : 0.f;
        rv[j] = i < K ? ld_act(r + i) : 0.f;
        if (i < K) xs[i] = xv[j];
    }
    __syncthreads();
    float ss = 0.f;
    if (t < funorm::NA_STRIDE)
        for (int64_t i = t; i < K; i += funorm::NA_STRIDE) ss = funorm::na_sq(xs[i], ss);
    float sc = funorm::rms_scale(funorm::na_block_sum(ss, red), K, a.na.eps);
    float *y = a.na.y + m * K, *z = a.na.z + m * K, *y2 = a.y2 + m * K;
    float ss2 = 0.f;
#pragma unroll
    for (int j = 0; j < NAQ_REG; j++) {
        int64_t i = t + (int64_t)j * RMS_THREADS;
        zv[j] = 0.f;
        if (i >= K) continue;
        float v = funorm::na_y(xv[j], sc, w1[j]);
        y[i] = v;
        z[i] = zv[j] = funorm::na_z(rv[j], v);
        ss2 = fmaf(zv[j], zv[j], ss2);
    }
    float s = rms_block_scale(ss2, K, a.eps2);
#pragma unroll
    for (int j = 0; j < NAQ_REG; j++) {
        int64_t i = t + (int64_t)j * RMS_THREADS, b = warp + (int64_t)j * RMS_WARPS;
        float v = zv[j];
        if (i < K) {
            v *= s;
            if (a.w2) v *= w2[j];
            y2[i] = v;
        }
        if (a.q && b * 32 < K) /* the whole warp: K % 32 == 0 */
            q8_block(v, lane, a.q + m * K + b * 32, a.qd + m * (K / 32) + b, a.qs8 + m * (K / 8) + b * 4);
    }
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

bool all_q4k(const cuq_mv_job *job)
{
    for (int i = 0; i < job->n_parts; i++)
        if (job->part[i].wt != CT_Q4_K) return false;
    return dev_facts().q4k;
}

/* Jobs for the all-Q4_K kernel (quant_fused_q4k.cu) get x quantized rather than
 * dequantized. Measured in the decode step (TinyLlama Q4_K_M, H100, tg128, one binary):
 * the o job that way gave 931 t/s against 879-890 with an f32-x path of that kernel (since
 * dropped: 11 us a job); the generic kernel gained from it too (897 against 854-887, within
 * that run's noise). The job bench (--jobs) has the generic f32 path at 4.19 us, the q8
 * path at 2.62 us plus a quantize_q8 launch. */
bool use_fma(const cuq_mv_job *job)
{
    if (job->xq || job->norm.on || job->M != 1 || !dev_facts().fma || all_q4k(job)) return false;
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

bool has_float(const cuq_mv_job *job)
{
    for (int i = 0; i < job->n_parts; i++)
        if (float_weight(job->part[i].wt)) return true;
    return false;
}

bool x_vec_ok(const cuq_mv_job *job)
{
    return job->x && ((uintptr_t)job->x & 15) == 0 && job->x_row >= job->K && job->x_row % 4 == 0;
}

/* How a run gets x: staged by the job kernel in shared memory (stage_q8 / stage_f, smem
 * bytes), or else through the separate kernels into tmp (the norm's y when the caller
 * gives none and float weights read it, x's q8 form). */
struct XPlan {
    bool stage, stage_q8, stage_f;
    unsigned smem;
    bool tmp_q8, tmp_y;
};

XPlan x_plan(const cuq_mv_job *job)
{
    XPlan p = {};
    bool q8 = job_needs_q8(job) && !job->xq && !use_fma(job), fl = has_float(job);
    if (!job->norm.on && !q8) return p; /* x read as given */
    /* with a staged x every dot reads shared memory: float weights an f32 copy */
    size_t bytes = (q8 ? q8_size(job->M, job->K) : 0) + (fl ? sizeof(float) * (size_t)(job->M * job->K) : 0);
    int mode = dev_facts().stage;
    bool on = mode == 3 || (job->norm.on && (mode == 2 || (mode == 1 && !q8)));
    if (on && x_vec_ok(job) && bytes <= FU_STAGE_MAX) {
        p.stage = true;
        p.stage_q8 = q8;
        p.stage_f = fl;
        p.smem = (unsigned)bytes;
        return p;
    }
    p.tmp_q8 = q8;
    p.tmp_y = job->norm.on && !job->norm.y;
    return p;
}

/* The job's parts are all Q4_K / Q6_K in a mix a one-format kernel takes (launch_q4k_job,
 * launch_q6k_job: a gated job of one format only), and that kernel is on. */
bool one_format_parts(const cuq_mv_job *job)
{
    bool q4 = false, q6 = false;
    for (int i = 0; i < job->n_parts; i++) {
        q4 = q4 || job->part[i].wt == CT_Q4_K;
        q6 = q6 || job->part[i].wt == CT_Q6_K;
        if (job->part[i].wt != CT_Q4_K && job->part[i].wt != CT_Q6_K) return false;
    }
    if (job->glu && q4 && q6) return false;
    return q6 ? dev_facts().q6k && (!q4 || dev_facts().q6mix) : dev_facts().q4k;
}

/* The job runs on a one-format kernel: M = 1, whole 256-element blocks, x read in its q8 form
 * (not staged in the job's blocks, nor read in f32 by the dequantizing path), and parts that
 * kernel takes. The epilogues and forms only those kernels have (rope_ok, d8_ok, glu_q8_ok)
 * and the planner's early start (cuq_mv_one_format) all ask this. */
bool one_format_job(const cuq_mv_job *job)
{
    return job->M == 1 && job->K % 256 == 0 && !x_plan(job).stage && !use_fma(job) && one_format_parts(job);
}

/* The prologue in the job's epilogue: only the one-format kernels (launch_q4k_job,
 * launch_q6k_job) have it, so the job must be one they take. (Float weights' q/k/v job with
 * the epilogue in a variant of the generic kernel measured no faster on the H200, F16
 * TinyLlama: that job 7.6 -> 10.3 us a layer, against 2.5 for the separate rope kernel.) */
bool rope_ok(const cuq_mv_job *job)
{
    const fusek_prologue *p = job->rope;
    if (job->glu || p->neox || p->n_dims > p->D || p->D < 2 || p->D % 2 || !one_format_job(job)) return false;
    for (int r = 0; r < p->n_rope; r++) {
        int i = job->rope_part[r];
        if (i < 0 || i >= job->n_parts || p->rope[r].ny || job->part[i].N != p->rope[r].H * p->D) return false;
    }
    for (int w = 0; w < p->n_rows; w++) {
        int i = job->rows_part[w];
        bool plain_ok = i >= 0 && i < job->n_parts && job->part[i].N == p->rows[w].n * p->rows[w].cols;
        if (p->rows[w].from_rope >= 0 ? i >= 0 : !plain_ok) return false;
    }
    return true;
}

/* x's d8 form (cuq_q8::d8) given: only the one-format Q4_K / Q6_K kernels read it, for a
 * plain job (no gated pair, no rope epilogue, one format: not the mixed Q4_K + Q6_K kernel). */
bool d8_ok(const cuq_mv_job *job)
{
    if (job->glu || job->rope || !one_format_job(job)) return false;
    for (int i = 1; i < job->n_parts; i++)
        if (job->part[i].wt != job->part[0].wt) return false;
    return true;
}

/* The gated job can write glu_out's d8 form (cuq_mv_job::glu_q8): spec_job's epilogue, on a
 * one-format kernel, a unit of 8 whole rows a block. */
bool glu_q8_ok(const cuq_mv_job *job)
{
    const cuq_q8 *q = job->glu_q8;
    if (!job->glu || job->part[0].N % 8 != 0) return false;
    if (!q->q || !q->d || !q->s8 || !q->d8 || q->M != 1 || q->K != job->part[0].N) return false;
    return one_format_job(job);
}

/* x's q8 form carved from mem (q8_size's layout), gs elements a scale (32, or 8: d8). */
cuq_q8 q8_at(void *mem, int64_t M, int64_t K, int gs)
{
    cuq_q8 r = {};
    r.q = (int8_t *)mem;
    r.d = (float *)((char *)mem + q8_d_off(M, K));
    r.s8 = (float *)((char *)mem + q8_s8_off(M, K, gs));
    r.M = M;
    r.K = K;
    r.d8 = gs == 8;
    return r;
}

} // namespace

extern "C" size_t cuq_q8_bytes(int64_t M, int64_t K) { return q8_size(M, K); }
extern "C" size_t cuq_q8_bytes8(int64_t M, int64_t K) { return q8_size(M, K, 8); }
extern "C" cuq_q8 cuq_q8_at(void *mem, int64_t M, int64_t K) { return q8_at(mem, M, K, 32); }
extern "C" cuq_q8 cuq_q8_at8(void *mem, int64_t M, int64_t K) { return q8_at(mem, M, K, 8); }

extern "C" bool cuq_quantize_q8(const float *x, int64_t x_row, int64_t M, int64_t K, const cuq_q8 *q,
                                cudaStream_t stream)
{
    if (!x || !q || q->d8 || M < 1 || K < 32 || K % 32 != 0 || x_row < K || q->M != M || q->K != K) return false;
    int64_t threads = M * (K / 32) * 32;
    launch_pdl(quantize_q8_kernel, (unsigned)((threads + FU_THREADS - 1) / FU_THREADS), FU_THREADS, stream, x, x_row,
               M, K, q->q, q->d, q->s8);
    return true;
}

extern "C" bool cuq_rms_norm_q8(const float *x, int64_t x_row, int64_t M, int64_t K, const void *w, ct_dtype wdt,
                                bool w_early, float eps, float *y, const cuq_q8 *q, cudaStream_t stream)
{
    if (!x || !y || M < 1 || K < 1 || x_row < K || M > INT32_MAX) return false;
    if (q && (q->d8 || K % 32 != 0 || q->M != M || q->K != K)) return false;
    int8_t *qq = q ? q->q : NULL;
    float *qd = q ? q->d : NULL, *qs = q ? q->s8 : NULL;
    int G = rms_slices(K);
    if (M * G > INT32_MAX) return false;
    w_early = w_early && dev_facts().w_early;
    unsigned g = (unsigned)(M * G);
    switch (w ? wdt : CT_F32) {
    case CT_F32:
        launch_pdl(rms_q8_kernel<float>, g, RMS_THREADS, stream, x, x_row, K, (const float *)w, w_early, eps, y, qq, qd, qs, G);
        break;
    case CT_F16:
        launch_pdl(rms_q8_kernel<__half>, g, RMS_THREADS, stream, x, x_row, K, (const __half *)w, w_early, eps, y, qq, qd, qs, G);
        break;
    case CT_BF16:
        launch_pdl(rms_q8_kernel<__nv_bfloat16>, g, RMS_THREADS, stream, x, x_row, K, (const __nv_bfloat16 *)w, w_early, eps, y,
                   qq, qd, qs, G);
        break;
    default: return false;
    }
    return true;
}

extern "C" bool cuq_norm_add_rms_q8(const fusek_norm_add *na, const void *w2, ct_dtype w2dt, bool w2_early, float eps2, float *y2,
                                    const cuq_q8 *q, cudaStream_t stream)
{
    if (!na || !na->x || !na->r || !na->y || !na->z || !y2 || na->M < 1 || na->M > 65535 || na->K < 1 ||
        na->K > CUQ_NA_Q8_MAX_K)
        return false;
    if (q && (q->d8 || na->K % 32 != 0 || q->M != na->M || q->K != na->K)) return false;
    if (w2 && w2dt != CT_F32 && w2dt != CT_F16 && w2dt != CT_BF16) return false;
    NaqArgs a = {*na, w2, w2dt, w2_early && dev_facts().w_early, eps2, y2, q ? q->q : NULL, q ? q->d : NULL,
                 q ? q->s8 : NULL};
    a.na.w_early = na->w_early && dev_facts().w_early;
    launch_pdl(norm_add_q8_kernel, (unsigned)na->M, RMS_THREADS, stream, a);
    return true;
}

extern "C" bool cuq_mv_ok(const cuq_mv_job *job)
{
    if (!job || job->M < 1 || job->M > CUQ_MV_MAX_ROWS || job->K < 32 || job->K % 32 != 0 || job->K > INT32_MAX / 2)
        return false;
    if (job->n_parts < 1 || job->n_parts > CUQ_MV_MAX_PARTS) return false;
    /* f32 x is read by float weights, and quantized here when the caller has no q8 form */
    bool need_x = !job->xq && !job->norm.on;
    for (int i = 0; i < job->n_parts; i++) {
        if (!part_ok(&job->part[i], job->K)) return false;
        if (float_weight(job->part[i].wt)) need_x = true;
    }
    if (need_x && (!job->x || ((uintptr_t)job->x & 15) != 0 || job->x_row < job->K || job->x_row % 4 != 0))
        return false;
    if (job->xq && (job->xq->M != job->M || job->xq->K != job->K || !job->xq->q)) return false;
    if (job->norm.on) {
        const cuq_mv_norm *n = &job->norm;
        if (job->xq || !job->x || job->x_row < job->K) return false;
        if (n->w && n->wdt != CT_F32 && n->wdt != CT_F16 && n->wdt != CT_BF16) return false;
    }
    if (job->glu) {
        if ((job->glu != 1 && job->glu != 2) || job->n_parts != 2 || !job->glu_out) return false;
        if (job->part[0].N != job->part[1].N || job->part[0].add || job->part[1].add) return false;
    }
    if (job->xq && job->xq->d8 && !d8_ok(job)) return false;
    return (!job->rope || rope_ok(job)) && (!job->glu_q8 || glu_q8_ok(job));
}

extern "C" size_t cuq_mv_tmp_bytes(const cuq_mv_job *job)
{
    XPlan p = x_plan(job);
    return (p.tmp_q8 ? q8_size(job->M, job->K) : 0) + (p.tmp_y ? sizeof(float) * (size_t)(job->M * job->K) : 0);
}

extern "C" bool cuq_mv_wants_q8(const cuq_mv_job *job) { return !job->norm.on && x_plan(job).tmp_q8; }

extern "C" bool cuq_mv_one_format(const cuq_mv_job *job)
{
    return cuq_mv_ok(job) && one_format_job(job);
}

extern "C" bool cuq_mv_norm_apart(const cuq_mv_job *job, bool *q8)
{
    if (!cuq_mv_ok(job) || !job->norm.on) return false;
    XPlan p = x_plan(job);
    *q8 = p.tmp_q8;
    return !p.stage;
}

extern "C" bool cuq_mv_run(const cuq_mv_job *job, void *tmp, int sm_count, cudaStream_t stream)
{
    if (!cuq_mv_ok(job)) return false;
    XPlan xp = x_plan(job);
    cuq_q8 own;
    const cuq_q8 *xq = job->xq;
    const float *x = job->x;
    int64_t x_row = job->x_row;
    if (job->norm.on ? !xp.stage : xp.tmp_q8) { /* the separate kernels first */
        if (!tmp && (xp.tmp_q8 || xp.tmp_y)) return false;
        if (xp.tmp_q8) own = cuq_q8_at(tmp, job->M, job->K);
        if (job->norm.on) {
            const cuq_mv_norm *nm = &job->norm;
            float *y = xp.tmp_y ? (float *)((char *)tmp + (xp.tmp_q8 ? q8_size(job->M, job->K) : 0)) : nm->y;
            if (!cuq_rms_norm_q8(x, x_row, job->M, job->K, nm->w, nm->wdt, nm->w_early, nm->eps, y, xp.tmp_q8 ? &own : NULL,
                                 stream))
                return false;
            x = y;
            x_row = job->K;
        } else if (!cuq_quantize_q8(x, x_row, job->M, job->K, &own, stream)) {
            return false;
        }
        if (xp.tmp_q8) xq = &own;
    }
    FuArgs a = {};
    a.K = job->K;
    a.x = x;
    a.x_row = x_row;
    a.stage = xp.stage;
    a.stage_q8 = xp.stage_q8;
    a.stage_f = xp.stage_f;
    a.smem = xp.smem;
    if (xp.stage && job->norm.on) {
        a.norm = true;
        a.nw = job->norm.w;
        a.nwdt = job->norm.wdt;
        a.eps = job->norm.eps;
        a.y = job->norm.y;
    }
    if (xq) {
        a.xq = xq->q;
        a.xd = xq->d;
        a.xs8 = xq->s8;
        a.xd8 = xq->d8;
    }
    if (job->glu_q8) {
        a.gq = job->glu_q8->q;
        a.gqd = job->glu_q8->d;
        a.gqs8 = job->glu_q8->s8;
    }
    int n = job->glu ? 1 : job->n_parts;
    a.n_parts = n;
    int64_t rows = 0;
    size_t bytes = 0;
    bool floats = true;
    for (int i = 0; i < job->n_parts; i++) {
        const cuq_mv_part *p = &job->part[i];
        size_t rb = part_bytes(p, job->K);
        floats = floats && float_weight(p->wt);
        FuPart fp = {p->wt, (const uint8_t *)p->w, p->w_row, p->N, p->out, p->add, p->out2, (unsigned)rb};
        bytes += rb * (size_t)p->N;
        if (i < n) {
            a.p[i] = fp;
            rows += p->N;
        } else {
            a.up = fp;
        }
    }
    /* The job's weights fit L2 beside the next job's prefetch (PDL overlaps them): ask for
     * them at once. Measured on the H100 (50 MB L2): a 13 MB gate/up job gains 18% from it,
     * a 23 MB f16 weight loses 10%; 3/10 of L2 keeps the first and drops the second. Float
     * weights never: on the H200 (session 40, tg128 alternated in one call) TinyLlama F16
     * decoded at 995-996 t/s without any prefetch against 976-984 with its q/k/v and o jobs'
     * (Q4_K_M lost 1.5-3% without). */
    a.prefetch = dev_facts().pdl && bytes <= dev_facts().l2 / 10 * 3 && !floats;
    a.glu = job->glu;
    a.glu_out = job->glu_out;
    a.pair = dev_facts().pair;
    if (job->rope) {
        a.rp = true;
        a.rpp = *job->rope;
        for (int i = 0; i < CUQ_MV_MAX_PARTS; i++) a.part_rope[i] = a.part_rows[i] = -1;
        for (int r = 0; r < a.rpp.n_rope; r++) a.part_rope[job->rope_part[r]] = (signed char)r;
        for (int w = 0; w < a.rpp.n_rows; w++)
            if (job->rows_part[w] >= 0) a.part_rows[job->rows_part[w]] = (signed char)w;
    }
    /* only where every weight takes it: a Q4_K part beside a Q6_K one keeps the chunk path
     * and its split (the qkv job measured 15% slower with the v part's segments) */
    a.seg = (xq || a.stage_q8) && dev_facts().seg && job->M <= SEG_MAX_M;
    for (int i = 0; i < job->n_parts; i++) a.seg = a.seg && seg_format(job->part[i].wt);
    if (launch_q4k_job(a, job->M, job->glu != 0, rows, sm_count, stream)) return true;
    if (launch_q6k_job(a, job->M, job->glu != 0, rows, sm_count, stream)) return true;
    if (a.xd8 || a.gq) return false; /* cuq_mv_ok (d8_ok, glu_q8_ok) keeps these jobs off the rest */
    if (launch_q8v_job(a, job->M, job->glu != 0, sm_count, stream)) return true;
    if (a.rp) return false; /* cuq_mv_ok (rope_ok) keeps these jobs off this path */
    return job->glu ? launch_m<true>(a, job->M, rows, sm_count, stream)
                    : launch_m<false>(a, job->M, rows, sm_count, stream);
}
