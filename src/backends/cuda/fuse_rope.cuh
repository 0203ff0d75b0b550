/* The decode prologue's rotation and row writes as device functions, shared by the
 * prologue kernel (fuse_kernels.cu) and the job kernels' epilogue (quant_fused.cuh), so a
 * key rotated by either has the same bits (the nn group's rope: double angle, the same
 * f32 roundings). */
#ifndef CT_CUDA_FUSE_ROPE_CUH
#define CT_CUDA_FUSE_ROPE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/dyn_access.cuh"
#include "backends/cuda/fuse_kernels.h"

namespace furope {

/* base^(-j / half) of pair j: theta = pos * freq_scale * this, in the nn group's rope
 * kernel's order of roundings. */
__device__ __forceinline__ double pair_freq(const fusek_prologue &p, int64_t j)
{
    int64_t half = p.n_dims / 2;
    return j < half ? pow(p.freq_base, -(double)j / (double)half) : 0.0;
}

/* cos and sin of pair j's angle (j < n_dims / 2) as floats. */
__device__ __forceinline__ float2 pair_cs(const fusek_prologue &p, double pos, double freq)
{
    double theta = pos * p.freq_scale * freq, sd, cd;
    sincos(theta, &sd, &cd);
    return make_float2((float)cd, (float)sd);
}

/* The rotated pair (x0, x1) by (cos, sin). */
__device__ __forceinline__ float2 rotate(float x0, float x1, float2 cs)
{
    return make_float2(__fsub_rn(__fmul_rn(x0, cs.x), __fmul_rn(x1, cs.y)),
                       __fadd_rn(__fmul_rn(x0, cs.y), __fmul_rn(x1, cs.x)));
}

/* Each write's indices in range (set_rows' contract: a write with an index out of range
 * writes nothing); every block checks every index of every write (all its threads call). */
__device__ __forceinline__ void rows_ok(const fusek_prologue &p, bool *ok)
{
    for (int w = 0; w < p.n_rows; w++) {
        const fusek_rows &W = p.rows[w];
        int bad = 0;
        for (int64_t i = threadIdx.x; i < W.n; i += blockDim.x) {
            int64_t r = cudyn::ld_index(W.idx, i * W.is, W.idt);
            bad |= r < 0 || r >= W.rows;
        }
        ok[w] = !__syncthreads_or(bad);
    }
}

} // namespace furope

#endif
