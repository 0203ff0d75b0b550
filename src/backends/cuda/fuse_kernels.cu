/* The step planner's kernels (fuse_kernels.h). */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdlib.h>

#include "backends/cuda/fuse_kernels.h"
#include "backends/cuda/fuse_norm.cuh"
#include "backends/cuda/fuse_rope.cuh"
#include "backends/cuda/pdl.cuh"

using cudyn::ld_dyn;
using cudyn::ld_index;
using cudyn::st_dyn;
using furope::pair_cs;
using furope::pair_freq;
using furope::rows_ok;

using funorm::rms_scale;
using funorm::warp_sum;

/* Pair j of head h of rope r: y written, and the cache rows of the writes that take it. The
 * rotation is the nn group's (double theta, the same f32 roundings), so a replayed step
 * keeps the eager step's keys bit for bit. */
/* Element i of head h of rope r's input: x, or the norm's output when the rope has one
 * (then also written where the norm op would write it). */
static __device__ __forceinline__ float rope_in(const fusek_rope &R, const float *x, int64_t h, int64_t i, int64_t D,
                                                float sc)
{
    float v = x[i];
    if (!R.ny) return v;
    v = v * sc;
    if (R.nw) v = v * ld_dyn(R.nw, i, R.nwdt);
    R.ny[h * D + i] = v;
    return v;
}

static __device__ void rope_item(const fusek_prologue &p, int r, int64_t h, int64_t j, float2 cs, const bool *ok,
                                 float sc)
{
    const fusek_rope &R = p.rope[r];
    const float *x = R.x + h * R.xh;
    float *y = R.y + h * p.D;
    int64_t half = p.n_dims / 2, i[2];
    float v[2];
    int cnt = 2;
    if (j < half) {
        i[0] = p.neox ? j : 2 * j;
        i[1] = p.neox ? j + half : 2 * j + 1;
        float x0 = rope_in(R, x, h, i[0], p.D, sc), x1 = rope_in(R, x, h, i[1], p.D, sc);
        float2 rv = furope::rotate(x0, x1, cs);
        v[0] = rv.x;
        v[1] = rv.y;
    } else { /* the dims past n_dims pass through, two per item */
        i[0] = 2 * half + 2 * (j - half);
        i[1] = i[0] + 1;
        cnt = i[1] < p.D ? 2 : 1;
        v[0] = rope_in(R, x, h, i[0], p.D, sc);
        v[1] = cnt > 1 ? rope_in(R, x, h, i[1], p.D, sc) : 0.0f;
    }
    for (int c = 0; c < cnt; c++) y[i[c]] = v[c];
    for (int w = 0; w < p.n_rows; w++) {
        const fusek_rows &W = p.rows[w];
        if (W.from_rope != r || !ok[w]) continue;
        int64_t row = ld_index(W.idx, h * W.is, W.idt);
        for (int c = 0; c < cnt; c++) st_dyn(W.dst, row * W.d0 + i[c] * W.d1, W.ddt, v[c]);
    }
}

/* PDL (pdl.cuh): this kernel's setup (the frequencies, a double pow each) runs before it
 * waits for the q/k/v job that precedes it. */
using cupdl::pdl_launch_next;
using cupdl::pdl_wait;

/* The norms' scales of every head (each block computes all of them: a few heads of a few
 * hundred elements), a warp per head. */
static __device__ void norm_scales(const fusek_prologue &p, float (*sc)[FUSEK_MAX_NORM_HEADS])
{
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    for (int r = 0; r < p.n_rope; r++) {
        const fusek_rope &R = p.rope[r];
        if (!R.ny) continue;
        for (int64_t h = warp; h < R.H; h += nw) {
            const float *x = R.x + h * R.xh;
            float ss = 0.0f;
            for (int64_t i = lane; i < p.D; i += 32) ss += x[i] * x[i];
            ss = warp_sum(ss);
            if (lane == 0) sc[r][h] = rms_scale(ss, p.D, R.eps);
        }
    }
    __syncthreads();
}

/* What the rope items need that the q/k/v job does not write: the write indices' check,
 * the position, and the first item's cos/sin (pair j0, frequency f0). */
static __device__ void rope_setup(const fusek_prologue &p, int64_t j0, double f0, bool *ok, double *pos, float2 *cs0)
{
    rows_ok(p, ok);
    *pos = (double)ld_index(p.pos, 0, p.pdt);
    if (j0 < p.n_dims / 2) *cs0 = pair_cs(p, *pos, f0);
}

__global__ void rope_rows_kernel(fusek_prologue p)
{
    __shared__ float nsc[FUSEK_MAX_ROPE][FUSEK_MAX_NORM_HEADS];
    pdl_launch_next();
    /* Before the wait: each thread's first item's angle and, when no kernel of the step
     * writes them (p.early: the position and the row indices come from the host before
     * the graph starts), the indices' check and the position, so that after the wait only
     * the loads of q/k/v and the stores remain. Items past the first (rare: more items than
     * threads) compute theirs in the loop. */
    int64_t per = (p.D + 1) / 2, g0 = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    double f0 = p.n_rope > 0 ? pair_freq(p, g0 % per) : 0.0, pos = 0.0;
    bool ok[FUSEK_MAX_ROWS] = {false, false};
    float2 cs0 = make_float2(1.0f, 0.0f);
    if (p.early) rope_setup(p, g0 % per, f0, ok, &pos, &cs0);
    pdl_wait();
    if (!p.early) rope_setup(p, g0 % per, f0, ok, &pos, &cs0);
    norm_scales(p, nsc);
    int64_t n_rope[FUSEK_MAX_ROPE] = {0, 0}, n_plain[FUSEK_MAX_ROWS] = {0, 0}, total = 0;
    for (int r = 0; r < p.n_rope; r++) total += n_rope[r] = p.rope[r].H * per;
    for (int w = 0; w < p.n_rows; w++)
        if (p.rows[w].from_rope < 0) total += n_plain[w] = p.rows[w].n * p.rows[w].cols;
    for (int64_t g = g0; g < total; g += (int64_t)gridDim.x * blockDim.x) {
        int64_t e = g;
        int r = 0;
        while (r < p.n_rope && e >= n_rope[r]) e -= n_rope[r++];
        if (r < p.n_rope) {
            /* a rope's items are [H][per], so g0 % per is this item's pair when g == g0 */
            int64_t h = e / per, j = e % per;
            float2 cs = g == g0 ? cs0 : j < p.n_dims / 2 ? pair_cs(p, pos, pair_freq(p, j)) : make_float2(1.0f, 0.0f);
            rope_item(p, r, h, j, cs, ok, p.rope[r].ny ? nsc[r][h] : 1.0f);
            continue;
        }
        int w = 0;
        while (w < p.n_rows && e >= n_plain[w]) e -= n_plain[w++];
        if (w == p.n_rows || !ok[w]) continue;
        const fusek_rows &W = p.rows[w];
        int64_t i = e / W.cols, c = e % W.cols, row = ld_index(W.idx, i * W.is, W.idt);
        st_dyn(W.dst, row * W.d0 + c * W.d1, W.ddt, W.src[i * W.s0 + c * W.s1]);
    }
}

extern "C" cudaError_t fusek_rope_rows(const fusek_prologue *p, cudaStream_t s)
{
    int64_t total = 0, per = (p->D + 1) / 2;
    for (int r = 0; r < p->n_rope; r++) total += p->rope[r].H * per;
    for (int w = 0; w < p->n_rows; w++)
        if (p->rows[w].from_rope < 0) total += p->rows[w].n * p->rows[w].cols;
    if (total == 0) return cudaSuccess;
    int64_t blocks = (total + 255) / 256;
    cudaError_t e = cupdl::launch_pdl(rope_rows_kernel, (unsigned)(blocks < 1024 ? blocks : 1024), 256, s, *p);
    return e != cudaSuccess ? e : cudaGetLastError();
}

/* ---- post-norm + residual add ---- */

#define NA_THREADS funorm::NA_STRIDE
#define NA_REG 4 /* elements a thread keeps in registers: rows up to 1,024 (Gemma 3 270M's 640) */

/* A block per row: the sum of squares (funorm's order), then each element's norm output
 * and its sum with the residual. Rows of up to NA_REG * NA_THREADS elements keep them in
 * registers: the weight read before the PDL wait where nothing in the step writes it
 * (w_early), x and the residual in one round of loads after it. */
__global__ void __launch_bounds__(NA_THREADS) norm_add_kernel(fusek_norm_add p)
{
    __shared__ float red[NA_THREADS / 32];
    cupdl::pdl_launch_next();
    const int64_t K = p.K, t = threadIdx.x;
    const float *x = p.x + blockIdx.x * K, *r = p.r + blockIdx.x * K;
    float *y = p.y + blockIdx.x * K, *z = p.z + blockIdx.x * K;
    if (K <= NA_REG * NA_THREADS) {
        float w[NA_REG], xv[NA_REG], rv[NA_REG], ss = 0.0f;
        if (p.w_early) funorm::na_weights<NA_REG>(p.w, p.wdt, K, NA_THREADS, w);
        cupdl::pdl_wait();
        if (!p.w_early) funorm::na_weights<NA_REG>(p.w, p.wdt, K, NA_THREADS, w);
#pragma unroll
        for (int j = 0; j < NA_REG; j++) {
            int64_t i = t + (int64_t)j * NA_THREADS;
            xv[j] = i < K ? x[i] : 0.0f;
            rv[j] = i < K ? r[i] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < NA_REG; j++)
            if (t + (int64_t)j * NA_THREADS < K) ss = funorm::na_sq(xv[j], ss);
        float sc = funorm::rms_scale(funorm::na_block_sum(ss, red), K, p.eps);
#pragma unroll
        for (int j = 0; j < NA_REG; j++) {
            int64_t i = t + (int64_t)j * NA_THREADS;
            if (i >= K) continue;
            float v = funorm::na_y(xv[j], sc, w[j]);
            y[i] = v;
            z[i] = funorm::na_z(rv[j], v);
        }
        return;
    }
    cupdl::pdl_wait();
    float ss = 0.0f;
    for (int64_t i = t; i < K; i += NA_THREADS) ss = funorm::na_sq(x[i], ss);
    float sc = funorm::rms_scale(funorm::na_block_sum(ss, red), K, p.eps);
    for (int64_t i = t; i < K; i += NA_THREADS) {
        float v = funorm::na_y(x[i], sc, p.w ? ld_dyn(p.w, i, p.wdt) : 1.0f);
        y[i] = v;
        z[i] = funorm::na_z(r[i], v);
    }
}

extern "C" cudaError_t fusek_norm_add_rows(const fusek_norm_add *p, cudaStream_t s)
{
    if (p->M <= 0 || p->K <= 0) return cudaSuccess;
    cudaError_t e = cupdl::launch_pdl(norm_add_kernel, (unsigned)p->M, NA_THREADS, s, *p);
    return e != cudaSuccess ? e : cudaGetLastError();
}
