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

/* spec_job with the Q4_K rows above. */
template <int M, bool GLU, bool RP>
__global__ void __launch_bounds__(FU_THREADS, RP ? SPEC_RP_MIN_BLOCKS : Q4K_MIN_BLOCKS) q4k_job_kernel(const FuArgs a)
{
    spec_job<M, GLU, RP>(a, [&](const FuPart &, const uint8_t *const *rows, int l0, int stride, float *acc) {
        q4k_rows<M, GLU ? 2 : 1>(rows, l0, stride, a, acc);
    });
}

template <int M, bool GLU, bool RP> void launch(FuArgs &a, int64_t rows, int sm_count, cudaStream_t st)
{
    static int occ;
    spec_launch(q4k_job_kernel<M, GLU, RP>, occ, a, rows, a.K / 256 * Q4K_PAIRS, sm_count, st);
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
    if (glu) launch<1, true, false>(a, rows, sm_count, st); /* no rope epilogue (rope_ok) */
    else if (a.rp) launch<1, false, true>(a, rows, sm_count, st);
    else launch<1, false, false>(a, rows, sm_count, st);
    return true;
}

} // namespace cufu
