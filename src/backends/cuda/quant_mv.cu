/* Quantized matrix-vector products (decode: M <= CUQ_MV_MAX_ROWS rows of x).
 *
 * Memory-bound: each weight byte is read once, so the kernel is built around the weight
 * stream. S warps share one output row (S chosen so the grid fills the device even for
 * short N), 8 / S rows per 256-thread block. The lanes of a warp take consecutive
 * 16-element chunks, so a warp's loads cover a contiguous span of the row (whole 32-byte
 * sectors); each chunk is dequantized once into registers and multiplied in f32 with
 * all M rows of x, which stay in L1/L2 (x is a few KiB per row). Dequantize-and-FMA
 * rather than quantizing x for integer dots: x stays exact (the CPU rounds it to 8
 * bits), and the chunk decode is amortized over 16 elements, so the ALU work per weight
 * byte stays below what the memory system delivers. */
#include "backends/cuda/quant_deq.cuh"
#include "backends/cuda/quant_kernels.h"

namespace {

constexpr int MV_THREADS = 256, MV_WARPS = MV_THREADS / 32;

__device__ __forceinline__ float dot8(const float *__restrict__ x, const float *v)
{
    float4 a = __ldg((const float4 *)x), b = __ldg((const float4 *)x + 1);
    float s = v[0] * a.x;
    s = fmaf(v[1], a.y, s);
    s = fmaf(v[2], a.z, s);
    s = fmaf(v[3], a.w, s);
    s = fmaf(v[4], b.x, s);
    s = fmaf(v[5], b.y, s);
    s = fmaf(v[6], b.z, s);
    return fmaf(v[7], b.w, s);
}

template <class F, int M>
__global__ void __launch_bounds__(MV_THREADS) mv_kernel(const uint8_t *__restrict__ w, size_t w_row,
                                                        const float *__restrict__ x, int64_t x_row,
                                                        float *__restrict__ out, int64_t N, int64_t K, int S)
{
    __shared__ float red[MV_WARPS][M];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int R = MV_WARPS / S, rb = warp / S, s = warp % S;
    int64_t n = (int64_t)blockIdx.x * R + rb;
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; m++) acc[m] = 0.f;
    if (n < N) {
        const uint8_t *row = w + (size_t)n * w_row;
        int64_t nc = K / CUQ_CHUNK;
#pragma unroll 2
        for (int64_t c = (int64_t)s * 32 + lane; c < nc; c += 32 * S) {
            float v[16];
            int64_t ea, eb;
            F::chunk(row, c, v, ea, eb);
#pragma unroll
            for (int m = 0; m < M; m++) acc[m] += dot8(x + m * x_row + ea, v) + dot8(x + m * x_row + eb, v + 8);
        }
    }
#pragma unroll
    for (int m = 0; m < M; m++)
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
    if (S == 1) {
        if (lane == 0 && n < N)
#pragma unroll
            for (int m = 0; m < M; m++) out[m * N + n] = acc[m];
        return;
    }
    if (lane == 0)
#pragma unroll
        for (int m = 0; m < M; m++) red[warp][m] = acc[m];
    __syncthreads();
    if (s == 0 && lane < M && n < N) {
        float t = 0.f;
        for (int i = 0; i < S; i++) t += red[warp + i][lane];
        out[lane * N + n] = t;
    }
}

template <class F, int M>
void launch(const void *w, size_t w_row, const float *x, int64_t x_row, int64_t N, int64_t K, float *out, int S,
            cudaStream_t st)
{
    int R = MV_WARPS / S;
    unsigned grid = (unsigned)((N + R - 1) / R);
    mv_kernel<F, M><<<grid, MV_THREADS, 0, st>>>((const uint8_t *)w, w_row, x, x_row, out, N, K, S);
}

template <class F>
bool mv_typed(const void *w, size_t w_row, const float *x, int64_t x_row, int64_t M, int64_t N, int64_t K,
              float *out, int S, cudaStream_t st)
{
    switch (M) {
    case 1: launch<F, 1>(w, w_row, x, x_row, N, K, out, S, st); return true;
    case 2: launch<F, 2>(w, w_row, x, x_row, N, K, out, S, st); return true;
    case 3: launch<F, 3>(w, w_row, x, x_row, N, K, out, S, st); return true;
    case 4: launch<F, 4>(w, w_row, x, x_row, N, K, out, S, st); return true;
    case 5: launch<F, 5>(w, w_row, x, x_row, N, K, out, S, st); return true;
    case 6: launch<F, 6>(w, w_row, x, x_row, N, K, out, S, st); return true;
    case 7: launch<F, 7>(w, w_row, x, x_row, N, K, out, S, st); return true;
    case 8: launch<F, 8>(w, w_row, x, x_row, N, K, out, S, st); return true;
    default: return false;
    }
}

} // namespace

extern "C" bool cuq_matvec(ct_dtype wt, const void *w, size_t w_row, const float *x, int64_t x_row, int64_t M,
                           int64_t N, int64_t K, float *out, int sm_count, cudaStream_t stream)
{
    if (M < 1 || M > CUQ_MV_MAX_ROWS || N < 1 || K % CUQ_CHUNK != 0) return false;
    /* Split each row over more warps while the grid is short of ~32 warps per SM and
     * every lane still has a chunk of its own. */
    int64_t nc = K / CUQ_CHUNK;
    int S = 1;
    while (S < MV_WARPS && N * S < (int64_t)sm_count * 32 && nc >= 64 * S) S *= 2;
    CUQ_DISPATCH(wt, return mv_typed<F>(w, w_row, x, x_row, M, N, K, out, S, stream), return false);
    return false;
}
