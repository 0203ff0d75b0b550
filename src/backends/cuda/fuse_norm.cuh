/* The post-norm + residual add's arithmetic, shared by fuse_kernels.cu's norm_add_kernel
 * and quant_fused.cu's norm_add_q8_kernel (the same group with the next block's pre-norm
 * in one launch), so that both paths make the same bits: the squares summed a thread per
 * NA_STRIDE-element stride, then a warp's, then the block's; each product and the add
 * rounded on their own (explicit intrinsics: no contraction the compiler might choose
 * differently in the two kernels), as the CPU's rms_norm and add round them. */
#ifndef CT_CUDA_FUSE_NORM_CUH
#define CT_CUDA_FUSE_NORM_CUH

#include <stdint.h>

#include "backends/cuda/dyn_access.cuh"

namespace funorm {

/* Threads that sum a row's squares, each a stride of this many elements. */
constexpr int NA_STRIDE = 256;

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* 1 / sqrt(mean of squares + eps) as the nn group's rms_norm rounds it. */
__device__ __forceinline__ float rms_scale(float ss, int64_t n, double eps)
{
    return (float)(1.0 / sqrt((double)ss / (double)n + eps));
}

/* A thread's running sum of squares: v added after the elements before it in its stride
 * (i, i + NA_STRIDE, ... in that order). */
__device__ __forceinline__ float na_sq(float v, float ss) { return __fmaf_rn(v, v, ss); }

/* The row's sum of squares from each thread's own (ss: thread t < NA_STRIDE's sum over its
 * stride by na_sq; 0 from the threads past NA_STRIDE), for a block of at least NA_STRIDE
 * threads in whole warps; red: shared, NA_STRIDE / 32 floats. Every thread of the block
 * calls it and gets the sum. */
__device__ __forceinline__ float na_block_sum(float ss, float *red)
{
    ss = warp_sum(ss);
    if (threadIdx.x < NA_STRIDE && threadIdx.x % 32 == 0) red[threadIdx.x / 32] = ss;
    __syncthreads();
    if (threadIdx.x < 32) {
        float t = threadIdx.x < NA_STRIDE / 32 ? red[threadIdx.x] : 0.0f;
        t = warp_sum(t);
        if (threadIdx.x == 0) red[0] = t;
    }
    __syncthreads();
    return red[0];
}

/* A norm weight (f32 f16 bf16, or NULL) at a thread's REG elements of a K-wide row,
 * threadIdx.x + stride j: 1 past the row or without a weight (an exact product). */
template <int REG> __device__ __forceinline__ void na_weights(const void *w, ct_dtype wdt, int64_t K, int stride, float *out)
{
#pragma unroll
    for (int j = 0; j < REG; j++) {
        int64_t i = threadIdx.x + (int64_t)j * stride;
        out[j] = w && i < K ? cudyn::ld_dyn(w, i, wdt) : 1.0f;
    }
}

/* The norm's output for x (w: its weight, 1 where there is none: an exact product). */
__device__ __forceinline__ float na_y(float x, float sc, float w) { return __fmul_rn(__fmul_rn(x, sc), w); }

/* The residual add of it. */
__device__ __forceinline__ float na_z(float r, float y) { return __fadd_rn(r, y); }

} // namespace funorm

#endif
