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
#include "backends/cuda/quant_fused.cuh"

namespace cufu {
namespace {

constexpr int Q4K_BYTES = 144, Q4K_PAIRS = 4; /* a block: 4 pairs of 32-element sub-blocks */

/* Blocks per SM the kernel is built for: 64 registers (the generic kernel's occupancy;
 * unbounded it takes 78 (91 gated) as nvcc hoists x's loads, 40 spilled 160-280 bytes). */
constexpr int Q4K_MIN_BLOCKS = 4;

/* Pair pu of a row: header (d, dmin, 12 scale bytes) and the 32 quant bytes (sub-block
 * 2 (pu % 4) in the low nibbles, 2 (pu % 4) + 1 in the high ones). */
struct Q4KPair {
    uint4 h, w0, w1;
};

__device__ __forceinline__ void q4k_load(const uint8_t *row, int pu, Q4KPair &r)
{
    const uint8_t *p = row + (size_t)(pu / Q4K_PAIRS) * Q4K_BYTES;
    const uint8_t *q = p + 16 + 32 * (pu % Q4K_PAIRS);
    r.h = ldw128(p);
    r.w0 = ldw128(q);
    r.w1 = ldw128(q + 16);
}

/* acc[m] += pair pu times x's row m: its sub-blocks (32-element units 2 pu, 2 pu + 1) as
 * the generic kernel computes each unit (dot_q: chunk 0, then chunk 1). */
template <int M>
__device__ __forceinline__ void q4k_pair_dot(const Q4KPair &r, int pu, int64_t K, const int8_t *__restrict__ xq,
                                             const float *__restrict__ xd, const float *__restrict__ xs8, float *acc)
{
    const uint32_t hd[4] = {r.h.x, r.h.y, r.h.z, r.h.w};
    const uint32_t w[8] = {r.w0.x, r.w0.y, r.w0.z, r.w0.w, r.w1.x, r.w1.y, r.w1.z, r.w1.w};
    float d = cuq::h2f((uint16_t)hd[0]), dmin = cuq::h2f((uint16_t)(hd[0] >> 16));
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
        int j = 2 * (pu % Q4K_PAIRS) + jj, sc, mn;
        cuq::k4_scale_min(hd + 1, j, sc, mn);
        float fa = d * (float)sc, fb = -dmin * (float)mn;
        uint32_t q0[4], q1[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            q0[i] = (w[i] >> (4 * jj)) & 0x0F0F0F0Fu;
            q1[i] = (w[4 + i] >> (4 * jj)) & 0x0F0F0F0Fu;
        }
        int64_t u = 2 * (int64_t)pu + jj;
#pragma unroll
        for (int m = 0; m < M; m++) {
            const int4 *xp = (const int4 *)(xq + m * K + 32 * u);
            int4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
            float4 s4 = __ldg((const float4 *)(xs8 + m * (K / 8) + 4 * u));
            float dx = __ldg(xd + m * (K / 32) + u);
            int X[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            float S[4] = {s4.x, s4.y, s4.z, s4.w};
            acc[m] = chunk_dot<cuq::Q4_K, 1>(q1, fa, fb, X, S, dx, chunk_dot<cuq::Q4_K, 0>(q0, fa, fb, X, S, dx, acc[m]));
        }
    }
}

/* acc[r * M + m] += row r (of NR) times x's row m over this lane's pairs (l0, l0 + step,
 * ...): every row's loads of a round (U pairs a row) before the math on them. */
template <int M, int NR>
__device__ __forceinline__ void q4k_rows(const uint8_t *const *rows, int l0, int step, const FuArgs &a, float *acc)
{
    int64_t K = a.K;
    constexpr int U = NR == 1 ? 2 : 1;
    int np = (int)(K / 256) * Q4K_PAIRS;
    for (int p0 = l0; p0 < np; p0 += U * step) {
        Q4KPair r[NR][U];
#pragma unroll
        for (int i = 0; i < NR; i++)
#pragma unroll
            for (int k = 0; k < U; k++)
                if (p0 + k * step < np) q4k_load(rows[i], p0 + k * step, r[i][k]);
#pragma unroll
        for (int i = 0; i < NR; i++)
#pragma unroll
            for (int k = 0; k < U; k++)
                if (p0 + k * step < np) q4k_pair_dot<M>(r[i][k], p0 + k * step, K, a.xq, a.xd, a.xs8, acc + i * M);
    }
}

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
