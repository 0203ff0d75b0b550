/* Prefill with a quantized weight: x [M, K] f32 to f16 for a tensor-core GEMM against the
 * weight dequantized to f16 (quant.c). f16 keeps 11 significant bits, as many as TF32 (the
 * former path), at twice the tensor-core rate and half the bytes; only its range (65504)
 * is short of f32's. So x is scaled by a power of two s, chosen on the device from max|x|
 * so that |x / s| <= 2^14: exact (a power of two changes only the exponent), no overflow
 * whatever the activations, and the GEMM multiplies by s again through a device-side
 * alpha. s = 1 whenever max|x| <= 2^14, the usual case. */
#include <cuda_fp16.h>

#include "backends/cuda/quant_prefill.h"

namespace {

constexpr int THREADS = 256;
constexpr float LIMIT = 16384.0f; /* 2^14: headroom below f16's 65504 */

/* amax as the bits of a non-negative float: their order is the floats' order. NaN and
 * infinities are left to propagate through the conversion, never into the scale. One
 * atomic per block: a few hundred blocks, not one per warp of a large x. */
__global__ void __launch_bounds__(THREADS) amax_kernel(const float *__restrict__ x, int64_t x_row, int64_t M, int64_t K,
                                                      unsigned *__restrict__ amax_bits)
{
    __shared__ float part[THREADS / 32];
    float m = 0.0f;
    for (int64_t r = blockIdx.y; r < M; r += gridDim.y)
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < K; c += (int64_t)gridDim.x * blockDim.x) {
            float v = fabsf(x[r * x_row + c]);
            if (v <= 3.0e38f) m = fmaxf(m, v); /* finite only */
        }
    for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = m;
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int i = 1; i < THREADS / 32; i++) m = fmaxf(m, part[i]);
        atomicMax(amax_bits, __float_as_uint(m));
    }
}

__device__ __forceinline__ float scale_of(unsigned amax_bits)
{
    float a = __uint_as_float(amax_bits);
    if (!(a > LIMIT)) return 1.0f;
    return exp2f(ceilf(log2f(a / LIMIT))); /* a power of two >= a / 2^14 */
}

__global__ void __launch_bounds__(THREADS) to_f16_kernel(const float *__restrict__ x, int64_t x_row, int64_t M, int64_t K,
                                                        const unsigned *__restrict__ amax_bits, __half *__restrict__ xh,
                                                        float *__restrict__ scale)
{
    float s = scale_of(*amax_bits), inv = 1.0f / s;
    if (blockIdx.x == 0 && blockIdx.y == 0 && threadIdx.x == 0) scale[0] = s, scale[1] = 0.0f; /* alpha, beta */
    for (int64_t r = blockIdx.y; r < M; r += gridDim.y)
        for (int64_t c = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; c < K; c += (int64_t)gridDim.x * blockDim.x)
            xh[r * K + c] = __float2half_rn(x[r * x_row + c] * inv);
}

/* Rows over grid.y, columns over grid.x, about two blocks per SM in all (so the amax takes
 * a few hundred atomics), no index division. */
dim3 grid_for(int64_t M, int64_t K)
{
    int64_t gx = (K + THREADS - 1) / THREADS, gy = M < 256 ? M : 256;
    if (gx * gy > 256) gx = (256 + gy - 1) / gy;
    return dim3((unsigned)(gx < 1 ? 1 : gx), (unsigned)(gy < 1 ? 1 : gy));
}

} // namespace

extern "C" size_t cuq_x_f16_bytes(int64_t M, int64_t K)
{
    return 16 + (((size_t)(M * K) * sizeof(__half) + 15) & ~(size_t)15);
}

extern "C" cudaError_t cuq_x_to_f16(const float *x, int64_t x_row, int64_t M, int64_t K, void *tmp, void **xh,
                                    float **alpha_beta, cudaStream_t stream)
{
    unsigned *amax = (unsigned *)tmp;
    float *ab = (float *)((char *)tmp + 8);
    __half *h = (__half *)((char *)tmp + 16);
    *xh = h;
    *alpha_beta = ab;
    cudaError_t e = cudaMemsetAsync(amax, 0, sizeof *amax, stream);
    if (e != cudaSuccess) return e;
    amax_kernel<<<grid_for(M, K), THREADS, 0, stream>>>(x, x_row, M, K, amax);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    to_f16_kernel<<<grid_for(M, K), THREADS, 0, stream>>>(x, x_row, M, K, amax, h, ab);
    return cudaGetLastError();
}
