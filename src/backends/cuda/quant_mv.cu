/* Quantized matrix-vector products (decode: M <= CUQ_MV_MAX_ROWS rows of x).
 *
 * Memory-bound: each weight byte is read once, so the kernels are built around the
 * weight stream. S warps share one output row, 8 / S rows per 256-thread block (S from
 * the occupancy, see split_of). The lanes of a warp take consecutive 16-element chunks,
 * so a warp's loads cover a contiguous span of the row (whole 32-byte sectors, 16-byte
 * loads where the format's alignment allows), four chunks in flight per lane. Two ways
 * to multiply a chunk, both measured (bench/cuda_quant.c):
 * - mv_kernel: dequantize to f32 and FMA with x (one kernel, x exact; ~4 instructions per
 *   element, so it is ALU-bound on big weights but wins where launches dominate);
 * - mvq_kernel: x quantized once per op to 8 bits per 32 (quantize_x), then __dp4a on the
 *   chunk's quants and an affine correction per chunk (a third of the instructions;
 *   faster from ~4M weight elements on, and at every size for several rows of x). */
#include "backends/cuda/quant_deq.cuh"
#include "backends/cuda/quant_kernels.h"

namespace {

constexpr int MV_THREADS = 256, MV_WARPS = MV_THREADS / 32;

/* Warps per output row. The kernels are latency-bound per warp (a few dependent rounds of
 * DRAM loads), so the grid should be one wave of resident warps: split rows over more
 * warps while N * S still fits in what the device holds at once (`resident` warps), as
 * long as every lane keeps a chunk of its own. Rows beyond one wave take S = 1. */
int split_of(int64_t N, int64_t K, int64_t resident)
{
    int64_t nc = K / CUQ_CHUNK;
    int S = 1;
    while (S < MV_WARPS && N * S * 2 <= resident && nc >= 32 * S * 2) S *= 2;
    return S;
}

/* Resident warps of kernel k on this device (its occupancy, found once per kernel). */
template <typename Kern> int64_t resident_warps(Kern k, int sm_count, int &cache)
{
    if (cache == 0) {
        int nb = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, k, MV_THREADS, 0) != cudaSuccess || nb < 1) nb = 1;
        cache = nb;
    }
    return (int64_t)sm_count * cache * MV_WARPS;
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
        int nc = (int)(K / CUQ_CHUNK);
#pragma unroll 4
        for (int c = s * 32 + lane; c < nc; c += 32 * S) {
            float v[16];
            int ea, eb;
            cuq::deq_chunk<F>(row, c, v, ea, eb);
#pragma unroll
            for (int m = 0; m < M; m++)
                acc[m] += cuq::dot8(x + m * x_row + ea, v, 0.0f) + cuq::dot8(x + m * x_row + eb, v + 8, 0.0f);
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

/* x [M, K] to 8-bit blocks of 32 (a warp per block): quants xq [M, K], scales xd [M, K/32],
 * and xs8 [M, K/8] = scale * the sum of each run of 8 quants (the affine maps' offsets
 * multiply it). */
__global__ void quantize_x(const float *__restrict__ x, int64_t x_row, int64_t M, int64_t K, int8_t *__restrict__ xq,
                           float *__restrict__ xd, float *__restrict__ xs8)
{
    int64_t gw = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5, nb = K / 32;
    int lane = threadIdx.x & 31;
    if (gw >= M * nb) return;
    int64_t m = gw / nb, b = gw % nb;
    float v = x[m * x_row + b * 32 + lane], amax = fabsf(v);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
    int q = max(-127, min(127, __float2int_rn(v * id)));
    xq[m * K + b * 32 + lane] = (int8_t)q;
    int s = q;
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) xd[m * nb + b] = d;
    if ((lane & 7) == 0) xs8[m * (K / 8) + b * 4 + (lane >> 3)] = d * (float)s;
}

/* The integer-dot variant: chunk quants against x's 8-bit quants with __dp4a; per chunk
 * a * dx * sum(q * xq) + b * (dx * sum xq). */
template <class F, int M>
__global__ void __launch_bounds__(MV_THREADS) mvq_kernel(const uint8_t *__restrict__ w, size_t w_row,
                                                         const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                                         const float *__restrict__ xs8, float *__restrict__ out,
                                                         int64_t N, int64_t K, int S)
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
        int nc = (int)(K / CUQ_CHUNK);
#pragma unroll 4
        for (int c = s * 32 + lane; c < nc; c += 32 * S) {
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
void launch_q8(const void *w, size_t w_row, const int8_t *xq, const float *xd, const float *xs8, int64_t N, int64_t K,
               float *out, int sm_count, cudaStream_t st)
{
    static int occ;
    int S = split_of(N, K, resident_warps(mvq_kernel<F, M>, sm_count, occ)), R = MV_WARPS / S;
    unsigned grid = (unsigned)((N + R - 1) / R);
    mvq_kernel<F, M><<<grid, MV_THREADS, 0, st>>>((const uint8_t *)w, w_row, xq, xd, xs8, out, N, K, S);
}

template <class F>
bool mvq_typed(const void *w, size_t w_row, const int8_t *xq, const float *xd, const float *xs8, int64_t M, int64_t N,
               int64_t K, float *out, int sm_count, cudaStream_t st)
{
    switch (M) {
    case 1: launch_q8<F, 1>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    case 2: launch_q8<F, 2>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    case 3: launch_q8<F, 3>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    case 4: launch_q8<F, 4>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    case 5: launch_q8<F, 5>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    case 6: launch_q8<F, 6>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    case 7: launch_q8<F, 7>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    case 8: launch_q8<F, 8>(w, w_row, xq, xd, xs8, N, K, out, sm_count, st); return true;
    default: return false;
    }
}

template <class F, int M>
void launch(const void *w, size_t w_row, const float *x, int64_t x_row, int64_t N, int64_t K, float *out, int sm_count,
            cudaStream_t st)
{
    static int occ;
    int S = split_of(N, K, resident_warps(mv_kernel<F, M>, sm_count, occ)), R = MV_WARPS / S;
    unsigned grid = (unsigned)((N + R - 1) / R);
    mv_kernel<F, M><<<grid, MV_THREADS, 0, st>>>((const uint8_t *)w, w_row, x, x_row, out, N, K, S);
}

template <class F>
bool mv_typed(const void *w, size_t w_row, const float *x, int64_t x_row, int64_t M, int64_t N, int64_t K,
              float *out, int sm_count, cudaStream_t st)
{
    switch (M) {
    case 1: launch<F, 1>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    case 2: launch<F, 2>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    case 3: launch<F, 3>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    case 4: launch<F, 4>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    case 5: launch<F, 5>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    case 6: launch<F, 6>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    case 7: launch<F, 7>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    case 8: launch<F, 8>(w, w_row, x, x_row, N, K, out, sm_count, st); return true;
    default: return false;
    }
}

} // namespace

extern "C" size_t cuq_matvec_q8_tmp_bytes(int64_t M, int64_t K)
{
    size_t q = ((size_t)(M * K) + 15) & ~(size_t)15;
    return q + sizeof(float) * (size_t)(M * K / 32 + M * K / 8);
}

extern "C" bool cuq_matvec_q8(ct_dtype wt, const void *w, size_t w_row, const float *x, int64_t x_row, int64_t M,
                              int64_t N, int64_t K, void *tmp, float *out, int sm_count, cudaStream_t stream)
{
    if (M < 1 || M > CUQ_MV_MAX_ROWS || N < 1 || K % 32 != 0 || !cuq_format_ok(wt)) return false;
    int8_t *xq = (int8_t *)tmp;
    float *xd = (float *)((char *)tmp + (((size_t)(M * K) + 15) & ~(size_t)15)), *xs8 = xd + M * K / 32;
    int64_t warps = M * K / 32;
    quantize_x<<<(unsigned)((warps * 32 + MV_THREADS - 1) / MV_THREADS), MV_THREADS, 0, stream>>>(x, x_row, M, K, xq, xd,
                                                                                                   xs8);
    CUQ_DISPATCH(wt, return mvq_typed<F>(w, w_row, xq, xd, xs8, M, N, K, out, sm_count, stream), return false);
    return false;
}

extern "C" bool cuq_matvec(ct_dtype wt, const void *w, size_t w_row, const float *x, int64_t x_row, int64_t M,
                           int64_t N, int64_t K, float *out, int sm_count, cudaStream_t stream)
{
    if (M < 1 || M > CUQ_MV_MAX_ROWS || N < 1 || K % CUQ_CHUNK != 0) return false;
    CUQ_DISPATCH(wt, return mv_typed<F>(w, w_row, x, x_row, M, N, K, out, sm_count, stream), return false);
    return false;
}
