/* The fused decode job kernel (quant_fused.cu's cuq_mv_run), shared by the files that
 * instantiate it: quant_fused_job*.cu each compile a few rows-of-x counts M, so nvcc
 * builds them side by side. See quant_fused.cu for the design. */
#ifndef CT_CUDA_QUANT_FUSED_CUH
#define CT_CUDA_QUANT_FUSED_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdlib.h>

#include <type_traits>

#include "backends/cuda/fuse_rope.cuh"
#include "backends/cuda/pdl.cuh"
#include "backends/cuda/quant_deq.cuh"
#include "backends/cuda/quant_fused_seg.cuh"
#include "backends/cuda/quant_kernels.h"

namespace cufu {

constexpr int FU_THREADS = 256, FU_WARPS = FU_THREADS / 32;

/* Every kernel here lets the next one start at once and waits for its predecessor only
 * where it first reads what that one wrote (pdl.cuh); a job kernel of quantized weights
 * prefetches them into L2 before it waits, so the weight stream overlaps the norm, the
 * previous job or the launch latency. */
using cupdl::launch_pdl;
using cupdl::ld_act;
using cupdl::pdl_launch_next;
using cupdl::pdl_wait;

/* Device facts read once: whether to launch with PDL (sm_90+, not CTORCH_CUDA_PDL=0) and
 * the L2 size (quantized jobs up to 3/10 of it prefetch their weights, cuq_mv_run). */
struct DevFacts {
    bool pdl;
    size_t l2;
    bool seg;  /* Q6_K jobs through seg_dot (CTORCH_CUDA_MVSEG=0: the chunk path) */
    bool wave; /* grid capped at one wave, blocks looping (CTORCH_CUDA_MVGRID=unit: a block a unit) */
    /* Which jobs make x (its norm, its q8 form) in the job kernel (CTORCH_CUDA_MVSTAGE): 0
     * (the default) none: separate kernels, 1 (float) a norm read by float weights only, 2
     * (norm) every job with a norm, 3 (all) also x's q8 form of a job without one. */
    int stage;
    bool q4k; /* all-Q4_K jobs through their own kernel (CTORCH_CUDA_MVQ4K=0: the generic one) */
    bool fma; /* small one-row jobs without a q8 form dequantize (CTORCH_CUDA_MVFMA=0: none) */
    bool q6k;   /* all-Q6_K jobs through their own kernel (CTORCH_CUDA_MVQ6K=0: the generic one) */
    bool q6mix; /* and Q4_K + Q6_K jobs (CTORCH_CUDA_MVQ6K=0 or 4: the generic one) */
    bool w_early; /* a norm kernel reads its weight before the PDL wait where allowed (CTORCH_CUDA_NORM_EARLY=0: never) */
    bool pair;    /* FuArgs::pair (CTORCH_CUDA_MVPAIR=0: off) */
};
inline const DevFacts &dev_facts()
{
    static DevFacts f;
    static bool done;
    if (!done) {
        int dev = 0, major = 0, l2 = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, dev);
        f.pdl = cupdl::pdl_enabled();
        f.l2 = l2 > 0 ? (size_t)l2 : 0;
        const char *pf = getenv("CTORCH_CUDA_PREFETCH");
        if (pf && pf[0] == '0') f.l2 = 0;
        const char *sg = getenv("CTORCH_CUDA_MVSEG");
        f.seg = !(sg && sg[0] == '0');
        const char *gw = getenv("CTORCH_CUDA_MVGRID");
        f.wave = !(gw && gw[0] == 'u');
        const char *st = getenv("CTORCH_CUDA_MVSTAGE");
        f.stage = !st || st[0] == '0' ? 0 : st[0] == 'f' ? 1 : st[0] == 'n' ? 2 : 3;
        const char *q4 = getenv("CTORCH_CUDA_MVQ4K");
        f.q4k = !(q4 && q4[0] == '0');
        const char *fm = getenv("CTORCH_CUDA_MVFMA");
        f.fma = !(fm && fm[0] == '0');
        const char *q6 = getenv("CTORCH_CUDA_MVQ6K");
        f.q6k = !(q6 && q6[0] == '0');
        f.q6mix = f.q6k && !(q6 && q6[0] == '4');
        const char *ne = getenv("CTORCH_CUDA_NORM_EARLY");
        f.w_early = !(ne && ne[0] == '0');
        const char *pr = getenv("CTORCH_CUDA_MVPAIR");
        f.pair = !(pr && pr[0] == '0');
        done = true;
    }
    return f;
}

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
    bool seg; /* every weight's rows through seg_dot (launch_job picks the kernel with its buffers) */
    bool pair; /* a gated job's 16-bit float rows loaded together (half_pair; CTORCH_CUDA_MVPAIR=0:
                  one after the other) */
    /* Staging (the XS kernels): each block makes x's q8 form (stage_q8) and / or an f32 copy
     * (stage_f) in its dynamic shared memory (smem bytes) from x, RMS-normed first where
     * norm (weight nw of dtype nwdt or none, eps; block 0 also writes the normed rows to y
     * when y is set); the dots then read x from there. */
    bool stage, stage_q8, stage_f, norm;
    const void *nw;
    ct_dtype nwdt;
    float eps;
    float *y;
    unsigned smem;
    /* The decode prologue on the parts' outputs (the spec kernels, M = 1: spec_job's rope
     * epilogue): part i feeds rope part_rope[i] and the plain row write part_rows[i] (-1:
     * none), both as fuse_kernels.cu's prologue kernel computes them. */
    bool rp;
    signed char part_rope[CUQ_MV_MAX_PARTS], part_rows[CUQ_MV_MAX_PARTS];
    fusek_prologue rpp;
    bool xd8; /* xd holds a scale per 8 elements (cuq_q8::d8): the one-format kernels' D8 forms */
    /* The gated job's glu_out in q8 form too, a scale per 8 rows (gq: NULL, none;
     * spec_job's gq_epilogue, one unit of 8 rows a block) */
    int8_t *gq;
    float *gqd, *gqs8;
};

/* Where the dots read x: its q8 form (q, d, s8) and f32 rows (f, f_row apart). */
struct XIn {
    const int8_t *q;
    const float *d, *s8;
    const float *f;
    int64_t f_row;
};

/* Where a chunk's two runs of 8 lie in its 32-element unit (chunks 2u and 2u + 1 cover
 * elements 32u..32u+31 in every format): the legacy 4/5-bit blocks pair low and high
 * nibbles (runs 8h and 8h + 16), the others run in order (16h and 16h + 8). */
template <class F> struct split_runs : std::false_type {};
template <> struct split_runs<cuq::Q4_0> : std::true_type {};
template <> struct split_runs<cuq::Q4_1> : std::true_type {};
template <> struct split_runs<cuq::Q5_0> : std::true_type {};
template <> struct split_runs<cuq::Q5_1> : std::true_type {};

/* Chunk h (0, 1) of a unit: its quants against the unit's x quants X (8 words), plus the
 * affine map's offset times x's sums of 8 (S, 4 floats). */
template <class F, int h>
__device__ __forceinline__ float chunk_dot(const uint32_t *q, float a, float b, const int *X, const float *S, float dx,
                                           float acc)
{
    constexpr bool SP = split_runs<F>::value;
    constexpr int ra = SP ? 2 * h : 4 * h, rb = SP ? 2 * h + 4 : 4 * h + 2; /* x words of the two runs */
    int si = __dp4a((int)q[0], X[ra], 0);
    si = __dp4a((int)q[1], X[ra + 1], si);
    si = __dp4a((int)q[2], X[rb], si);
    si = __dp4a((int)q[3], X[rb + 1], si);
    float xs = S[ra / 2] + S[rb / 2];
    return fmaf(a * dx, (float)si, fmaf(b, xs, acc));
}

/* An in-order chunk (16 quants q, x's 16 quants X) against x's d8 form: each run of 8 has
 * its own scale (D), xs the chunk's sum of x. */
__device__ __forceinline__ float chunk_dot8(const uint32_t *q, float a, float b, int4 X, float2 D, float xs, float acc)
{
    int s0 = __dp4a((int)q[0], X.x, 0);
    s0 = __dp4a((int)q[1], X.y, s0);
    int s1 = __dp4a((int)q[2], X.z, 0);
    s1 = __dp4a((int)q[3], X.w, s1);
    return fmaf(a, fmaf(D.x, (float)s0, D.y * (float)s1), fmaf(b, xs, acc));
}

/* acc[m] += the products of x's q8 form with this lane's 32-element units of a quantized
 * row: two chunks per unit share the block's header loads and x's scale, and x's quants
 * and sums come in 16-byte loads (q8 rows are 16-byte aligned, cuq_q8_at). */
template <class F, int M, bool SH>
__device__ __forceinline__ void dot_q(const uint8_t *__restrict__ row, int u0, int step, int64_t K,
                                      const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                      const float *__restrict__ xs8, float *acc)
{
    int nu = (int)(K / 32);
#pragma unroll 2
    for (int u = u0; u < nu; u += step) {
        uint32_t q0[4], q1[4];
        float a0, b0, a1, b1;
        int ea, eb;
        F::chunk(row, 2 * u, q0, a0, b0, ea, eb);
        F::chunk(row, 2 * u + 1, q1, a1, b1, ea, eb);
#pragma unroll
        for (int m = 0; m < M; m++) {
            const int4 *xp = (const int4 *)(xq + m * K + 32 * (int64_t)u);
            int4 x0 = ldx<SH>(xp), x1 = ldx<SH>(xp + 1);
            float4 s4 = ldx<SH>((const float4 *)(xs8 + m * (K / 8) + 4 * (int64_t)u));
            float dx = ldx<SH>(xd + m * (K / 32) + u);
            int X[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            float S[4] = {s4.x, s4.y, s4.z, s4.w};
            acc[m] = chunk_dot<F, 1>(q1, a1, b1, X, S, dx, chunk_dot<F, 0>(q0, a0, b0, X, S, dx, acc[m]));
        }
    }
}

/* 8 weights times x's 8 values, x from shared memory (SH) or from global memory, where the
 * kernel before wrote it (ldx). */
template <bool SH> __device__ __forceinline__ float dot8x(const float *x, const float *v, float s)
{
    return cuq::fma8(ldx<SH>((const float4 *)x), ldx<SH>((const float4 *)x + 1), v, s);
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
        for (int m = 0; m < M; m++)
            acc[m] = dot8x<false>(x + m * x_row + eb, v + 8, dot8x<false>(x + m * x_row + ea, v, acc[m]));
    }
}

/* 8 weights of a float row (16 bytes: 8 f16 / bf16, or two loads of 4 f32) as floats. */
template <typename W> __device__ __forceinline__ void load8(const uint8_t *p, float *v);
template <> __device__ __forceinline__ void load8<float>(const uint8_t *p, float *v)
{
    float4 a = __ldg((const float4 *)p), b = __ldg((const float4 *)p + 1);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
/* 8 16-bit floats in r as floats. */
template <typename W> __device__ __forceinline__ void cvt8(uint4 r, float *v);
template <> __device__ __forceinline__ void cvt8<__half>(uint4 r, float *v)
{
    uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        float2 f = __half22float2(*(const __half2 *)&u[i]);
        v[2 * i] = f.x, v[2 * i + 1] = f.y;
    }
}
template <> __device__ __forceinline__ void cvt8<__nv_bfloat16>(uint4 r, float *v)
{
    uint32_t u[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        v[2 * i] = __uint_as_float(u[i] << 16);
        v[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
    }
}

template <> __device__ __forceinline__ void load8<__half>(const uint8_t *p, float *v)
{
    cvt8<__half>(__ldg((const uint4 *)p), v);
}
template <> __device__ __forceinline__ void load8<__nv_bfloat16>(const uint8_t *p, float *v)
{
    cvt8<__nv_bfloat16>(__ldg((const uint4 *)p), v);
}

/* acc[r * M + m] += this lane's runs of 8 elements of NR 16-bit float rows (a gated job's
 * gate and up rows: NR = 2) times x (f32): 4 runs of every row loaded (16 bytes each,
 * bypassing L1) before the math on them, x loaded once for all rows (bytes in flight per
 * warp; measured on the H100: f16 gate/up 65 -> 80% of copy, down 74 -> 80%). Each row's
 * sums are in the one-row order. */
template <typename W, int M, bool SH, int NR = 1>
__device__ __forceinline__ void dot_h(const uint8_t *const *rows, int u0, int step, int64_t K,
                                      const float *__restrict__ x, int64_t x_row, float *acc)
{
    constexpr int U = 4;
    int nu = (int)(K / 8);
    for (int u = u0; u < nu; u += U * step) {
        uint4 raw[NR][U];
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int i = 0; i < U; i++)
                raw[r][i] = u + i * step < nu ? ldw128(rows[r] + (size_t)(u + i * step) * 16) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int i = 0; i < U; i++) {
            if (u + i * step >= nu) break;
            float v[NR][8];
#pragma unroll
            for (int r = 0; r < NR; r++) cvt8<W>(raw[r][i], v[r]);
#pragma unroll
            for (int m = 0; m < M; m++) {
                const float4 *xp = (const float4 *)(x + m * x_row + (int64_t)(u + i * step) * 8);
                float4 a0 = ldx<SH>(xp), a1 = ldx<SH>(xp + 1);
#pragma unroll
                for (int r = 0; r < NR; r++) acc[r * M + m] = cuq::fma8(a0, a1, v[r], acc[r * M + m]);
            }
        }
    }
}

/* acc[m] += this lane's runs of 8 elements of a float row times x (f32). */
template <typename W, int M, bool SH>
__device__ __forceinline__ void dot_f(const uint8_t *__restrict__ row, int u0, int step, int64_t K,
                                      const float *__restrict__ x, int64_t x_row, float *acc)
{
    int nu = (int)(K / 8);
#pragma unroll 4
    for (int u = u0; u < nu; u += step) {
        float v[8];
        load8<W>(row + (size_t)u * 8 * sizeof(W), v);
#pragma unroll
        for (int m = 0; m < M; m++) acc[m] = dot8x<SH>(x + m * x_row + (int64_t)u * 8, v, acc[m]);
    }
}

/* Rows of x up to which the loads-first paths (dot_h, seg_dot) run: beyond, x's loads for
 * every row would be hoisted with the weights' (over 200 registers at M = 8). */
constexpr int SEG_MAX_M = 2;

/* acc = row n of part p times x, over this warp's share (slice s of S) of the row. */
template <int M, bool SH>
__device__ __forceinline__ void row_dot(const FuPart &p, const FuArgs &a, const XIn &x, int64_t n, int s, int lane,
                                        float *acc)
{
    const uint8_t *row = p.w + (size_t)n * p.w_row;
    int u0 = s * 32 + lane, step = 32 * a.S;
    switch (p.wt) {
    case CT_F32: dot_f<float, M, SH>(row, u0, step, a.K, x.f, x.f_row, acc); return;
    case CT_F16:
        if (M <= SEG_MAX_M) dot_h<__half, M, SH>(&row, u0, step, a.K, x.f, x.f_row, acc);
        else dot_f<__half, M, SH>(row, u0, step, a.K, x.f, x.f_row, acc);
        return;
    case CT_BF16:
        if (M <= SEG_MAX_M) dot_h<__nv_bfloat16, M, SH>(&row, u0, step, a.K, x.f, x.f_row, acc);
        else dot_f<__nv_bfloat16, M, SH>(row, u0, step, a.K, x.f, x.f_row, acc);
        return;
    default: break;
    }
    if (SH || a.xq) {
#define FU_DOT_Q dot_q<F, M, SH>(row, u0, step, a.K, x.q, x.d, x.s8, acc)
        CUQ_DISPATCH(p.wt, FU_DOT_Q, return);
#undef FU_DOT_Q
    } else {
#define FU_DOT_DEQ dot_deq<F, M>(row, u0, step, a.K, a.x, a.x_row, acc)
        CUQ_DISPATCH(p.wt, FU_DOT_DEQ, return);
#undef FU_DOT_DEQ
    }
}

/* A gated job of 16-bit float weights: row n of the gate and of the up weight, both rows'
 * loads before the math (dot_h, NR = 2), each row's sums in the one-row order; false where
 * it does not apply (then row_dot takes the rows one after the other). Measured on the H200
 * (TinyLlama shapes, bench/cuda_quant.c --jobs): f16 norm + gate/up 18.87 -> 17.44 us,
 * gate/up alone 18.16 -> 16.19 (61 -> 69% of copy); F16 tg128 842 / 846 -> 894 / 894 t/s;
 * decode tokens identical. The same for quantized rows (dot_q over two rows, x's q8 loads
 * shared) was slower or even: Q5_K_M tg128 980 / 972 -> 962 / 957, Q8_0 955 / 958 -> 966 /
 * 945 t/s (dot_q's two units in flight a lane already overlap the loads). */
template <int M, bool GLU, bool SH>
__device__ __forceinline__ bool half_pair(const FuPart &p, const FuArgs &a, const XIn &x, int64_t n, int s, int lane,
                                          float *acc)
{
    if (!GLU || M > SEG_MAX_M || a.up.wt != p.wt || !a.pair) return false;
    const uint8_t *rows[2] = {p.w + (size_t)n * p.w_row, a.up.w + (size_t)n * a.up.w_row};
    int u0 = s * 32 + lane, step = 32 * a.S;
    switch (p.wt) {
    case CT_F16: dot_h<__half, M, SH, 2>(rows, u0, step, a.K, x.f, x.f_row, acc); return true;
    case CT_BF16: dot_h<__nv_bfloat16, M, SH, 2>(rows, u0, step, a.K, x.f, x.f_row, acc); return true;
    default: return false;
    }
}

/* The segment path (quant_fused_seg.cuh): row n of part p (and of the gated job's up weight,
 * both rows' loads first) over this warp's share; false where it does not apply. */
template <int M, bool GLU, bool SEG, bool SH>
__device__ __forceinline__ bool seg_rows(const FuPart &p, const FuArgs &a, const XIn &x, int64_t n, int s, int lane,
                                         uint8_t *buf, float *acc)
{
    if (!SEG || M > SEG_MAX_M || (GLU && a.up.wt != p.wt)) return false;
    const uint8_t *rows[2] = {p.w + (size_t)n * p.w_row, GLU ? a.up.w + (size_t)n * a.up.w_row : nullptr};
    constexpr int NR = GLU ? 2 : 1;
    switch (p.wt) {
    case CT_Q6_K: seg_dot<SegQ6K, M, NR, SH>(rows, buf, s, a.S, lane, a.K, x.q, x.d, x.s8, acc); return true;
    default: return false;
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

/* The layout of x's q8 form (cuq_q8_at's, in global or shared memory): quants, scales, sums. */
__host__ __device__ constexpr size_t q8_r16(size_t n) { return (n + 15) & ~(size_t)15; }
__host__ __device__ constexpr size_t q8_d_off(int64_t M, int64_t K) { return q8_r16((size_t)(M * K)); }
/* gs: elements a scale (32; 8 for the d8 form, cuq_q8::d8) */
__host__ __device__ constexpr size_t q8_s8_off(int64_t M, int64_t K, int gs = 32)
{
    return q8_d_off(M, K) + q8_r16(sizeof(float) * (size_t)(M * K / gs));
}
__host__ __device__ constexpr size_t q8_size(int64_t M, int64_t K, int gs = 32)
{
    return q8_s8_off(M, K, gs) + sizeof(float) * (size_t)(M * K / 8);
}

/* Dynamic shared memory up to which a job stages x (the default limit, no opt-in; beyond
 * it the norm and the q8 form are separate kernels, quant_fused.cu). */
constexpr unsigned FU_STAGE_MAX = 48u << 10;

/* Each row's RMS scale bit for bit as rms_q8_kernel (quant_fused.cu) computes it: its 512
 * threads' strided sums of squares (thread t here plays its threads t and t + 256), its
 * warps' trees, its 16 partial sums in order, 1 / sqrt(mean + eps) in double. Every block
 * thus holds the same x, and the separate kernel's results are kept. Loads go 4 at a time
 * (zeros past K add exactly nothing). */
constexpr int RMS_VT = 512;
template <int M>
__device__ __forceinline__ void rms_scales(const FuArgs &a, float (*red)[2 * CUQ_MV_MAX_ROWS], float *sc)
{
    int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, K = (int)a.K;
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const float *xr = a.x + m * a.x_row;
            float ss = 0.f;
            for (int i = tid + FU_THREADS * h; i < K; i += 4 * RMS_VT) {
                float t[4];
#pragma unroll
                for (int j = 0; j < 4; j++) t[j] = i + RMS_VT * j < K ? xr[i + RMS_VT * j] : 0.f;
#pragma unroll
                for (int j = 0; j < 4; j++) ss = fmaf(t[j], t[j], ss);
            }
#pragma unroll
            for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
            if (lane == 0) red[warp][CUQ_MV_MAX_ROWS * h + m] = ss;
        }
    __syncthreads();
#pragma unroll
    for (int m = 0; m < M; m++) {
        float t = 0.f;
        for (int h = 0; h < 2; h++)
            for (int w = 0; w < FU_WARPS; w++) t += red[w][CUQ_MV_MAX_ROWS * h + m];
        sc[m] = (float)(1.0 / sqrt((double)t / (double)K + (double)a.eps));
    }
    __syncthreads(); /* red is free again */
}

/* One float4 of x (row m, elements i..i+3) normed where the job has a norm. */
template <int M>
__device__ __forceinline__ void x_load(const FuArgs &a, int m, int i, const float *sc, float *v)
{
    float4 xv = *(const float4 *)(a.x + m * a.x_row + i);
    v[0] = xv.x, v[1] = xv.y, v[2] = xv.z, v[3] = xv.w;
    if (!a.norm) return;
    float s = sc[0];
#pragma unroll
    for (int r = 1; r < M; r++)
        if (r == m) s = sc[r];
    float w[4] = {1.f, 1.f, 1.f, 1.f};
    if (a.nw)
#pragma unroll
        for (int k = 0; k < 4; k++) w[k] = cudyn::ld_dyn(a.nw, i + k, a.nwdt);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        v[k] *= s;
        if (a.nw) v[k] *= w[k];
    }
}

/* The block's copy of x in shared memory (FuArgs::stage): 4 elements a thread, so 8 lanes
 * hold one 32-element block of the q8 form (quantize_q8's rounding: d = amax / 127,
 * q = round(v / d), sums of 8); the norm first where there is one (x * s * w, the CPU's
 * order), its rows written to y by block 0 alone. A thread loads FU_XB float4s before it
 * works on them (the loads' latency paid once per batch, not per float4). */
constexpr int FU_XB = 4;
template <int M>
__device__ __forceinline__ void stage_x(const FuArgs &a, uint8_t *sm, float (*red)[2 * CUQ_MV_MAX_ROWS])
{
    float sc[M];
    if (a.norm) rms_scales<M>(a, red, sc);
    int K = (int)a.K, kq = K / 4, nf = M * kq, lane = threadIdx.x & 31;
    int8_t *q = (int8_t *)sm;
    float *d = (float *)(sm + q8_d_off(M, K)), *s8 = (float *)(sm + q8_s8_off(M, K));
    float *f = (float *)(sm + (a.stage_q8 ? q8_size(M, K) : 0));
    bool ywrite = a.y && blockIdx.x == 0;
    for (int f0 = 0; f0 < nf; f0 += FU_XB * FU_THREADS) {
        float v[FU_XB][4];
#pragma unroll
        for (int b = 0; b < FU_XB; b++) {
            int fi = f0 + b * FU_THREADS + (int)threadIdx.x;
            v[b][0] = v[b][1] = v[b][2] = v[b][3] = 0.f;
            if (fi < nf) {
                int m = fi / kq;
                x_load<M>(a, m, (fi - m * kq) * 4, sc, v[b]);
            }
        }
#pragma unroll
        for (int b = 0; b < FU_XB; b++) {
            if (f0 + b * FU_THREADS >= nf) break; /* uniform: the whole block is past the end */
            int fi = f0 + b * FU_THREADS + (int)threadIdx.x; /* nf is a multiple of 8: a block's 8 lanes are all in or all out */
            bool on = fi < nf;
            int m = on ? fi / kq : 0, i = on ? (fi - m * kq) * 4 : 0;
            const float *vb = v[b];
            if (on && a.stage_f) *(float4 *)(f + m * K + i) = make_float4(vb[0], vb[1], vb[2], vb[3]);
            if (on && ywrite)
#pragma unroll
                for (int k = 0; k < 4; k++) a.y[m * K + i + k] = vb[k];
            if (!a.stage_q8) continue;
            float amax = fmaxf(fmaxf(fabsf(vb[0]), fabsf(vb[1])), fmaxf(fabsf(vb[2]), fabsf(vb[3])));
#pragma unroll
            for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            float dd = amax / 127.f, id = dd != 0.f ? 1.f / dd : 0.f;
            int qi[4], sum = 0;
#pragma unroll
            for (int k = 0; k < 4; k++) {
                qi[k] = max(-127, min(127, __float2int_rn(vb[k] * id)));
                sum += qi[k];
            }
            sum += __shfl_xor_sync(0xffffffffu, sum, 1);
            if (!on) continue;
            *(uint32_t *)(q + m * K + i) = (uint32_t)(qi[0] & 0xFF) | (uint32_t)(qi[1] & 0xFF) << 8 |
                                           (uint32_t)(qi[2] & 0xFF) << 16 | (uint32_t)(qi[3] & 0xFF) << 24;
            if ((lane & 7) == 0) d[fi / 8] = dd;
            if ((lane & 1) == 0) s8[fi / 2] = dd * (float)sum;
        }
    }
}

/* Row n's results (acc, reduced: every lane of the row's first warp holds them): lane m
 * writes row m of x's outputs, the residual sum and the gated job's up row and activation. */
template <int M, bool GLU>
__device__ __forceinline__ void write_row(const FuArgs &a, const FuPart &p, int64_t n, int lane, const float *acc)
{
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

/* Unit u (R rows of one part) to its part and this warp's row. */
__device__ __forceinline__ int unit_part(const FuArgs &a, unsigned u)
{
    int pi = 0;
    while (pi + 1 < a.n_parts && u >= a.first_unit[pi + 1]) pi++;
    return pi;
}

/* Every row this warp will compute, asked into L2 before the PDL wait (both job kernels). */
template <bool GLU>
__device__ __forceinline__ void prefetch_units(const FuArgs &a, unsigned units, int R, int rb, int s, int S, int lane)
{
    for (unsigned u = blockIdx.x; u < units; u += gridDim.x) {
        int pi = unit_part(a, u);
        int64_t n = (int64_t)(u - a.first_unit[pi]) * R + rb;
        if (n >= a.p[pi].N) continue;
        prefetch_row(a.p[pi], n, s, S, lane);
        if (GLU) prefetch_row(a.up, n, s, S, lane);
    }
}


/* What the rope epilogue needs besides the rows (spec_job's shared memory): the position,
 * each row write's index check, and each warp's cos / sin for its row of the block's first
 * unit, found before the PDL wait where the prologue allows it (fusek_prologue::early). */
struct RopeState {
    double pos;
    bool ok[FUSEK_MAX_ROWS];
    float2 cs[FU_WARPS];
    float v[FU_WARPS]; /* the unit's row values, for the partner of each pair */
};

__device__ __forceinline__ void rope_prep(const FuArgs &a, int R, int rb, int s, int lane, RopeState &rs)
{
    const fusek_prologue &P = a.rpp;
    furope::rows_ok(P, rs.ok);
    if (s != 0 || lane != 0) return;
    double pos = (double)cudyn::ld_index(P.pos, 0, P.pdt);
    if (rb == 0) rs.pos = pos;
    unsigned u = blockIdx.x;
    int pi = unit_part(a, u);
    int64_t n = (int64_t)(u - a.first_unit[pi]) * R + rb, i = n % P.D;
    rs.cs[rb] = a.part_rope[pi] >= 0 && i < P.n_dims ? furope::pair_cs(P, pos, furope::pair_freq(P, i / 2))
                                                       : make_float2(1.f, 0.f);
}

/* Row n of part pi (value v, on lane 0 of the row's first warp) rotated with its pair's
 * other row (R >= 2 rows a unit, pairs in one unit) into its rope's output and the cache
 * rows that take it; a part of a plain row write straight into the cache. Every thread of
 * the block calls (two barriers). */
__device__ __forceinline__ void rope_epilogue(const FuArgs &a, int pi, int64_t n, unsigned u, float v, int rb, int s,
                                              int lane, RopeState &rs)
{
    const fusek_prologue &P = a.rpp;
    bool mine = s == 0 && lane == 0;
    if (mine) rs.v[rb] = v;
    __syncthreads();
    if (mine && n < a.p[pi].N) {
        int r = a.part_rope[pi], w = a.part_rows[pi];
        if (r >= 0) {
            int64_t h = n / P.D, i = n % P.D;
            float y = v;
            if (i < P.n_dims) {
                float2 cs = u == blockIdx.x ? rs.cs[rb] : furope::pair_cs(P, rs.pos, furope::pair_freq(P, i / 2));
                float o = rs.v[rb ^ 1];
                y = i & 1 ? furope::rotate(o, v, cs).y : furope::rotate(v, o, cs).x;
            }
            P.rope[r].y[h * P.D + i] = y;
            for (int k = 0; k < P.n_rows; k++) {
                const fusek_rows &W = P.rows[k];
                if (W.from_rope != r || !rs.ok[k]) continue;
                cudyn::st_dyn(W.dst, cudyn::ld_index(W.idx, h * W.is, W.idt) * W.d0 + i * W.d1, W.ddt, y);
            }
        }
        if (w >= 0 && rs.ok[w]) {
            const fusek_rows &W = P.rows[w];
            int64_t h = n / W.cols, c = n % W.cols;
            cudyn::st_dyn(W.dst, cudyn::ld_index(W.idx, h * W.is, W.idt) * W.d0 + c * W.d1, W.ddt, v);
        }
    }
    __syncthreads(); /* rs.v is free for the next unit */
}

/* The gated job writing glu_out's d8 form as well (FuArgs::gq; a unit of 8 rows a block,
 * warp rb its row n, acc[0] and acc[1] the row's gate and up sums in lane 0): each warp's
 * lane 0 leaves its row's value in buf and counts itself in (cnt, zeroed at the block's
 * start); the unit's last warp rounds all 8 in its lane 0 as quantize_q8 rounds a run of 8,
 * with the run's own scale. No warp waits for another: a barrier for the 8 values instead
 * measured 1,457 against 1,464-1,466 t/s (TinyLlama Q4_K_M, H200, alternated). A block a
 * unit (spec_launch's grid). */
__device__ __forceinline__ void gq_epilogue(const FuArgs &a, const FuPart &p, int64_t n, unsigned u, int rb, int lane,
                                            const float *acc, float *buf, unsigned *cnt)
{
    if (lane != 0) return;
    buf[rb] = n < p.N ? gate_act(a.glu, acc[0]) * acc[1] : 0.f;
    __threadfence_block();
    if (atomicAdd(cnt, 1u) != FU_WARPS - 1) return;
    __threadfence_block();
    int64_t n0 = (int64_t)u * FU_WARPS;
    if (n0 >= p.N) return;
    float v[FU_WARPS], amax = 0.f;
#pragma unroll
    for (int i = 0; i < FU_WARPS; i++) {
        v[i] = ((volatile float *)buf)[i];
        amax = fmaxf(amax, fabsf(v[i]));
    }
    float dd = amax / 127.f, id = dd != 0.f ? 1.f / dd : 0.f;
    int sq = 0;
    uint32_t w[2] = {0, 0};
#pragma unroll
    for (int i = 0; i < FU_WARPS; i++) {
        int qi = max(-127, min(127, __float2int_rn(v[i] * id)));
        sq += qi;
        w[i / 4] |= (uint32_t)(qi & 0xFF) << (8 * (i % 4));
    }
    *(uint2 *)(a.gq + n0) = make_uint2(w[0], w[1]);
    a.gqd[n0 / 8] = dd;
    a.gqs8[n0 / 8] = dd * (float)sq;
}

/* Blocks take units of R rows (a grid of at most one wave looping over them, or with
 * CTORCH_CUDA_MVGRID=unit a block per unit): first every warp asks L2 for all its rows (the
 * prefetch, before waiting on the predecessor), then computes them. */
/* The specialised job kernels' body (quant_fused_q4k.cu, quant_fused_q6k.cu; RP: the
 * kernel that takes the rope epilogue, a variant of its own since the epilogue's registers
 * made every job of the kernel spill): job_kernel's
 * layout (units of R = 8 / S rows, prefetch before the PDL wait, the same reductions and
 * writes); dots(p, rows, lane0, stride, acc) adds part p's row (and a gated job's up row,
 * rows[1]) times x into acc, the warp's S * 32 lanes taking units lane0, lane0 + stride, ... */
/* Blocks per SM the RP kernels are built for: 80 registers, where at 64 the epilogue's
 * state spilled (28-140 bytes a thread); TinyLlama's q/k/v job (320 blocks) stays one wave. */
constexpr int SPEC_RP_MIN_BLOCKS = 3;

template <int M, bool GLU, bool RP, typename Dots> __device__ __forceinline__ void spec_job(const FuArgs &a, Dots dots)
{
    __shared__ float red[FU_WARPS][2 * CUQ_MV_MAX_ROWS];
    __shared__ RopeState rs;
    __shared__ float gq_buf[GLU ? FU_WARPS : 1];
    __shared__ unsigned gq_cnt;
    pdl_launch_next();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int S = a.S, R = FU_WARPS / S, rb = warp / S, s = warp % S;
    unsigned units = a.first_unit[a.n_parts];
    if (GLU && M == 1 && a.gq) {
        if (threadIdx.x == 0) gq_cnt = 0;
        __syncthreads();
    }
    if (a.prefetch) prefetch_units<GLU>(a, units, R, rb, s, S, lane);
    if (RP && a.rp && a.rpp.early) rope_prep(a, R, rb, s, lane, rs);
    pdl_wait();
    if (RP && a.rp && !a.rpp.early) rope_prep(a, R, rb, s, lane, rs);
    for (unsigned u = blockIdx.x; u < units; u += gridDim.x) {
        int pi = unit_part(a, u);
        const FuPart &p = a.p[pi];
        int64_t n = (int64_t)(u - a.first_unit[pi]) * R + rb;
        constexpr int NA = GLU ? 2 * M : M;
        float acc[NA];
#pragma unroll
        for (int m = 0; m < NA; m++) acc[m] = 0.f;
        if (n < p.N) {
            const uint8_t *rows[2] = {p.w + (size_t)n * p.w_row, GLU ? a.up.w + (size_t)n * a.up.w_row : nullptr};
            dots(p, rows, s * 32 + lane, 32 * S, acc);
        }
        reduce_row<NA>(acc, red, warp, s, S, lane);
        if (RP && !GLU && M == 1 && a.rp) rope_epilogue(a, pi, n, u, acc[0], rb, s, lane, rs);
        if (GLU && M == 1 && a.gq) gq_epilogue(a, p, n, u, rb, lane, acc, gq_buf, &gq_cnt); /* S = 1 (spec_launch) */
        if (s != 0 || n >= p.N) continue;
        write_row<M, GLU>(a, p, n, lane, acc);
    }
}

/* Launches a specialised job kernel: S warps a row (one wave for all rows, every lane at
 * least one of the row's `per_row` units; occ: blocks per SM, found once), then the units
 * of each part. */
template <typename Kern>
void spec_launch(Kern kern, int &occ, FuArgs &a, int64_t rows, int64_t per_row, int sm_count, cudaStream_t st)
{
    if (occ == 0) {
        int nb = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, kern, FU_THREADS, 0) != cudaSuccess || nb < 1) nb = 1;
        occ = nb;
    }
    int64_t resident = (int64_t)sm_count * occ * FU_WARPS;
    /* the rope epilogue pairs rows in a unit; the d8 epilogue rounds a unit's 8 rows */
    int S = 1, smax = a.rp ? FU_WARPS / 2 : a.gq ? 1 : FU_WARPS;
    while (S < smax && rows * S * 2 <= resident && per_row >= 32 * S * 2) S *= 2;
    a.S = S;
    int R = FU_WARPS / S;
    unsigned u = 0;
    for (int i = 0; i < a.n_parts; i++) {
        a.first_unit[i] = u;
        u += (unsigned)((a.p[i].N + R - 1) / R);
    }
    a.first_unit[a.n_parts] = u;
    launch_pdl(kern, u, FU_THREADS, st, a);
}

template <int M, bool GLU, bool SEG, bool XS>
__global__ void __launch_bounds__(FU_THREADS) job_kernel(const FuArgs a)
{
    extern __shared__ __align__(16) uint8_t fu_stage[];
    __shared__ float red[FU_WARPS][2 * CUQ_MV_MAX_ROWS];
    /* the segment path's staging, a buffer per warp and row (none where it cannot run) */
    constexpr int SEG_BYTES = SEG ? (GLU ? 2 : 1) * SEG_BUF : 16;
    __shared__ __align__(16) uint8_t seg_buf[FU_WARPS][SEG_BYTES];
    pdl_launch_next();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int S = a.S, R = FU_WARPS / S, rb = warp / S, s = warp % S;
    unsigned units = a.first_unit[a.n_parts];
    if (a.prefetch) prefetch_units<GLU>(a, units, R, rb, s, S, lane);
    pdl_wait();
    XIn x;
    if constexpr (XS) {
        stage_x<M>(a, fu_stage, red);
        __syncthreads();
        x.q = (const int8_t *)fu_stage;
        x.d = (const float *)(fu_stage + q8_d_off(M, a.K));
        x.s8 = (const float *)(fu_stage + q8_s8_off(M, a.K));
        x.f = (const float *)(fu_stage + (a.stage_q8 ? q8_size(M, a.K) : 0));
        x.f_row = a.K;
    } else {
        x.q = a.xq;
        x.d = a.xd;
        x.s8 = a.xs8;
        x.f = a.x;
        x.f_row = a.x_row;
    }
    for (unsigned u = blockIdx.x; u < units; u += gridDim.x) {
        int pi = unit_part(a, u);
        const FuPart &p = a.p[pi];
        int64_t n = (int64_t)(u - a.first_unit[pi]) * R + rb;
        constexpr int NA = GLU ? 2 * M : M;
        float acc[NA];
#pragma unroll
        for (int m = 0; m < NA; m++) acc[m] = 0.f;
        if (n < p.N && !seg_rows<M, GLU, SEG, XS>(p, a, x, n, s, lane, seg_buf[warp], acc) &&
            !half_pair<M, GLU, XS>(p, a, x, n, s, lane, acc)) {
            row_dot<M, XS>(p, a, x, n, s, lane, acc);
            if (GLU) row_dot<M, XS>(a.up, a, x, n, s, lane, acc + M);
        }
        reduce_row<NA>(acc, red, warp, s, S, lane);
        if (s != 0 || n >= p.N) continue;
        write_row<M, GLU>(a, p, n, lane, acc);
    }
}

/* Warps per row: one wave of resident warps for all parts' rows together, every lane
 * keeping at least two chunks of its own (see split_of in quant_mv.cu). */
inline int split_for(int64_t rows, int64_t K, int64_t resident)
{
    int64_t nc = K / CUQ_CHUNK;
    int S = 1;
    while (S < FU_WARPS && rows * S * 2 <= resident && nc >= 32 * S * 2) S *= 2;
    return S;
}

/* launch_pdl with dynamic shared memory. */
template <typename Kern> inline void launch_smem(Kern kern, unsigned grid, unsigned smem, cudaStream_t st, const FuArgs &a)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(FU_THREADS);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = cupdl::pdl_enabled() ? 1 : 0;
    cudaLaunchKernelEx(&cfg, kern, a);
}

template <int M, bool GLU, bool SEG, bool XS> void launch_kern(FuArgs &a, int64_t rows, int sm_count, cudaStream_t st)
{
    static int occ;
    static unsigned occ_smem;
    unsigned smem = XS ? a.smem : 0;
    if (occ == 0 || occ_smem != smem) { /* the staging's shared memory may cost blocks per SM */
        if (XS && occ == 0) /* beside the static buffers: the default cap is 48 KB for both */
            cudaFuncSetAttribute(job_kernel<M, GLU, SEG, XS>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)FU_STAGE_MAX);
        int nb = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, job_kernel<M, GLU, SEG, XS>, FU_THREADS, smem) !=
                cudaSuccess ||
            nb < 1)
            nb = 1;
        occ = nb;
        occ_smem = smem;
    }
    int64_t resident_blocks = (int64_t)sm_count * occ;
    a.S = split_for(rows, a.K, resident_blocks * FU_WARPS);
    if (a.seg) /* every warp keeps a round of SEG_ROUND blocks (a segment per lane) */
        while (a.S > 1 && (int64_t)SEG_ROUND * 256 * a.S > a.K) a.S /= 2;
    int R = FU_WARPS / a.S;
    unsigned u = 0;
    for (int i = 0; i < a.n_parts; i++) {
        a.first_unit[i] = u;
        u += (unsigned)((a.p[i].N + R - 1) / R);
    }
    a.first_unit[a.n_parts] = u;
    /* at most one wave of blocks looping over the units (a staging block pays its prologue
     * once). A block a unit (CTORCH_CUDA_MVGRID=unit, the hardware handing out units as
     * blocks finish) was the default until session 28; on the H200 the one-wave grid
     * measured faster for F16 decode, TinyLlama-shaped tg128 987 / 972 against 959, 956 /
     * 942, 944 t/s, with Q4_K_M unchanged (1,422 / 1,436 against 1,427, 1,422 / 1,439,
     * 1,429: its Q4_K and Q6_K jobs have kernels of their own); in another call F16 983 /
     * 983 against 948 / 956, Q5_K_M 978 / 977 against 968 / 949, Q6_K 1,133 / 1,161 against
     * 1,120 / 1,164, Q8_0 940 / 940 against 964 / 942 */
    unsigned grid = (int64_t)u < resident_blocks || !(XS || dev_facts().wave) ? u : (unsigned)resident_blocks;
    launch_smem(job_kernel<M, GLU, SEG, XS>, grid, smem, st, a);
}

/* The segment path gets its own kernel: its staging buffers would cost every other job
 * shared memory (measured: Q4_K jobs 5-18% slower beside them). */
template <int M, bool GLU> void launch_job(FuArgs &a, int64_t rows, int sm_count, cudaStream_t st)
{
    if constexpr (M <= SEG_MAX_M)
        if (a.seg) {
            if (a.stage) launch_kern<M, GLU, true, true>(a, rows, sm_count, st);
            else launch_kern<M, GLU, true, false>(a, rows, sm_count, st);
            return;
        }
    a.seg = false;
    if (a.stage) launch_kern<M, GLU, false, true>(a, rows, sm_count, st);
    else launch_kern<M, GLU, false, false>(a, rows, sm_count, st);
}

/* A job whose weights are all Q4_K, with x's q8 form given and M = 1, launched through
 * its own kernel (quant_fused_q4k.cu); false (nothing launched) for any other job. */
bool launch_q4k_job(FuArgs &a, int64_t M, bool glu, int64_t rows, int sm_count, cudaStream_t st);

/* The same for jobs of Q6_K parts, or of Q4_K and Q6_K parts (quant_fused_q6k.cu). */
bool launch_q6k_job(FuArgs &a, int64_t M, bool glu, int64_t rows, int sm_count, cudaStream_t st);

/* A vocabulary-sized job of one Q8_0 weight (tied embeddings' output projection), M = 1,
 * no epilogue, x's q8 form given (quant_fused_q8v.cu); false for any other job. */
bool launch_q8v_job(FuArgs &a, int64_t M, bool glu, int sm_count, cudaStream_t st);

/* Explicit instantiations live in quant_fused_job*.cu. */
#define CUFU_JOBS(X) X(1, false) X(1, true) X(2, false) X(2, true) X(3, false) X(3, true) X(4, false) X(4, true) \
    X(5, false) X(5, true) X(6, false) X(6, true) X(7, false) X(7, true) X(8, false) X(8, true)
#define CUFU_EXTERN(M, G) extern template void launch_job<M, G>(FuArgs &, int64_t, int, cudaStream_t);
#define CUFU_INSTANTIATE(M, G) template void launch_job<M, G>(FuArgs &, int64_t, int, cudaStream_t);

} // namespace cufu

#endif
