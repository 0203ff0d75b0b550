/* The fused job kernel specialised for Q4_K weights (TinyLlama Q4_K_M's q, k, o, gate, up
 * and most down matrices), x's q8 form given: the decode step's common case.
 *
 * The generic job kernel (quant_fused.cuh) dispatches over every format and dtype, and its
 * register count is the largest of all those paths (64: half occupancy, so a gate/up job's
 * 704 blocks take 1.33 waves), and each lane takes 32-element units, two lanes reading
 * the same 32 quant bytes (the low and high nibbles of a pair of sub-blocks). Here a lane
 * takes a pair of sub-blocks (64 elements: the block's 16-byte header and its 32 quant
 * bytes, three 16-byte loads that bypass L1) and, in a gated job, the gate row's and the
 * up row's pairs, all loads issued before the math; one format means few registers, so
 * more blocks per SM and every load of a wave in flight at once. Each 16-element chunk's
 * products are the generic kernel's (chunk_dot, same formula and order within a unit);
 * only which lane adds which unit, and so the sums' order, differ.
 * Measured on the H100 (CTORCH_CUDA_MVQ4K=0 / 1, one binary): ncu, one kernel alone, gate/up
 * 12.96 -> 11.96 us; TinyLlama Q4_K_M tg128 897 -> 931 t/s with the o job's x quantized
 * (quant_fused.cu's use_fma). Back to back in the job bench (--jobs), where each launch
 * overlaps the previous one's tail, the generic kernel stays ahead (gate/up 8.41 vs 9.56 us):
 * its 32-element units spread a row over twice the warps. */
#include "backends/cuda/quant_fused_q4k.cuh"

namespace cufu {
namespace {

/* Blocks per SM the kernel is built for: 64 registers (the generic kernel's occupancy;
 * unbounded it takes 78 (91 gated) as nvcc hoists x's loads, 40 spilled 160-280 bytes). */
constexpr int Q4K_MIN_BLOCKS = 4;

/* job_kernel's layout (units of R = 8 / S rows, prefetch before the PDL wait, the same
 * reductions and writes) with the Q4_K rows above. */
template <int M, bool GLU>
__global__ void __launch_bounds__(FU_THREADS, Q4K_MIN_BLOCKS) q4k_job_kernel(const FuArgs a)
{
    __shared__ float red[FU_WARPS][2 * CUQ_MV_MAX_ROWS];
    pdl_launch_next();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int S = a.S, R = FU_WARPS / S, rb = warp / S, s = warp % S;
    unsigned units = a.first_unit[a.n_parts];
    if (a.prefetch) prefetch_units<GLU>(a, units, R, rb, s, S, lane);
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
            const uint8_t *rows[2] = {p.w + (size_t)n * p.w_row, GLU ? a.up.w + (size_t)n * a.up.w_row : nullptr};
            q4k_rows<M, GLU ? 2 : 1>(rows, s * 32 + lane, 32 * S, a, acc);
        }
        reduce_row<NA>(acc, red, warp, s, S, lane);
        if (s != 0 || n >= p.N) continue;
        write_row<M, GLU>(a, p, n, lane, acc);
    }
}

template <int M, bool GLU> void launch(FuArgs &a, int64_t rows, int sm_count, cudaStream_t st)
{
    static int occ;
    if (occ == 0) {
        int nb = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, q4k_job_kernel<M, GLU>, FU_THREADS, 0) != cudaSuccess ||
            nb < 1)
            nb = 1;
        occ = nb;
    }
    /* warps per row: one wave for all rows, every lane at least one pair (split_for) */
    int64_t resident = (int64_t)sm_count * occ * FU_WARPS, np = a.K / 256 * Q4K_PAIRS;
    int S = 1;
    while (S < FU_WARPS && rows * S * 2 <= resident && np >= 32 * S * 2) S *= 2;
    a.S = S;
    int R = FU_WARPS / S;
    unsigned u = 0;
    for (int i = 0; i < a.n_parts; i++) {
        a.first_unit[i] = u;
        u += (unsigned)((a.p[i].N + R - 1) / R);
    }
    a.first_unit[a.n_parts] = u;
    launch_pdl(q4k_job_kernel<M, GLU>, u, FU_THREADS, st, a);
}

bool all_q4k(const FuArgs &a, bool glu)
{
    for (int i = 0; i < a.n_parts; i++)
        if (a.p[i].wt != CT_Q4_K) return false;
    return !glu || a.up.wt == CT_Q4_K;
}

} // namespace

bool launch_q4k_job(FuArgs &a, int64_t M, bool glu, int64_t rows, int sm_count, cudaStream_t st)
{
    if (!dev_facts().q4k || a.stage || !a.xq || M != 1 || a.K % 256 != 0 || !all_q4k(a, glu)) return false;
    if (glu) launch<1, true>(a, rows, sm_count, st);
    else launch<1, false>(a, rows, sm_count, st);
    return true;
}

} // namespace cufu
