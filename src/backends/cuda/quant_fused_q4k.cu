/* The fused job kernel specialised for Q4_K weights (TinyLlama Q4_K_M's q, k, o, gate, up
 * and most down matrices), x's q8 form given: the decode step's common case.
 *
 * The generic job kernel (quant_fused.cuh) dispatches over every format and dtype, and its
 * register count is the largest of all those paths. Here a lane takes a half of a pair of
 * sub-blocks (quant_fused_q4k.cuh: the block's 16-byte header and 16 of the pair's 32 quant
 * bytes, two 16-byte loads that bypass L1: chunk h of both sub-blocks), neighbouring lanes
 * the two halves of a pair, so a warp's x loads are dense; in a gated job the gate row's and
 * the up row's halves, all loads issued before the math, x loaded once for both rows. One
 * format means few registers: no spill at 64 (4 blocks per SM). Each 16-element chunk's
 * products are the generic kernel's (chunk_dot's formula); only which lane adds which chunk,
 * and so the sums' order, differ.
 * Measured on the H100 (TinyLlama-shaped Q4_K_M, `ctorch bench -d cuda -p 0 -n 128 -r 3`, the
 * previous build and this one alternating in one run):
 *   - a pair a lane, 64 registers, the rope epilogue in every Q4_K kernel: ncu counted 146,432
 *     local-memory (spill) requests for one gate/up job against 90,112 global loads;
 *   - the epilogue in kernels of its own and x loaded once for gate and up (no spill but 4 / 12
 *     bytes): 1,133 / 1,194 / 1,193 -> 1,261 / 1,261 / 1,280 t/s;
 *   - halves a lane (no spill; the o and Q4_K down jobs get two warps a row, one wave): 1,258 /
 *     1,294 / 1,275 -> 1,364 / 1,364 / 1,341 t/s; in the step's timeline the o / down jobs
 *     4.69 -> 3.76 us a launch, q/k/v with its epilogue 4.31 -> 3.73, gate/up 8.68 -> 8.30
 *     (one instance each). */
#include "backends/cuda/quant_fused_q4k.cuh"

namespace cufu {
namespace {

/* Blocks per SM the kernel is built for: 64 registers (the generic kernel's occupancy;
 * unbounded it takes 78 (91 gated) as nvcc hoists x's loads, 40 spilled 160-280 bytes). */
constexpr int Q4K_MIN_BLOCKS = 4;

/* spec_job with the Q4_K rows above. */
template <int M, bool GLU, bool RP, bool D8>
__global__ void __launch_bounds__(FU_THREADS, RP ? SPEC_RP_MIN_BLOCKS : Q4K_MIN_BLOCKS) q4k_job_kernel(const FuArgs a)
{
    spec_job<M, GLU, RP>(a, [&](const FuPart &, const uint8_t *const *rows, int l0, int stride, float *acc) {
        q4k_rows<M, GLU ? 2 : 1, D8>(rows, l0, stride, a, acc);
    });
}

template <int M, bool GLU, bool RP, bool D8 = false> void launch(FuArgs &a, int64_t rows, int sm_count, cudaStream_t st)
{
    static int occ;
    spec_launch(q4k_job_kernel<M, GLU, RP, D8>, occ, a, rows, a.K / 256 * Q4K_HALVES, sm_count, st);
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
    if (a.xd8) { /* the linear after a gated job (d8_ok: no gated job, no rope epilogue) */
        if (glu || a.rp) return false;
        launch<1, false, false, true>(a, rows, sm_count, st);
    } else if (glu) launch<1, true, false>(a, rows, sm_count, st); /* no rope epilogue (rope_ok) */
    else if (a.rp) launch<1, false, true>(a, rows, sm_count, st);
    else launch<1, false, false>(a, rows, sm_count, st);
    return true;
}

} // namespace cufu
