/* The Q4_K rows of the one-format job kernels (quant_fused_q4k.cu, and the mixed
 * Q4_K + Q6_K kernel of quant_fused_q6k.cu): see quant_fused_q4k.cu for the design. */
#ifndef CT_CUDA_QUANT_FUSED_Q4K_CUH
#define CT_CUDA_QUANT_FUSED_Q4K_CUH

#include "backends/cuda/quant_fused.cuh"

namespace cufu {

constexpr int Q4K_BYTES = 144, Q4K_PAIRS = 4; /* a block: 4 pairs of 32-element sub-blocks */

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

/* acc[i * M + m] += pair pu of row i (of NR) times x's row m: its sub-blocks (32-element
 * units 2 pu, 2 pu + 1) as the generic kernel computes each unit (dot_q: chunk 0, then
 * chunk 1). x's loads of a unit serve every row (the gated job's gate and up rows): half the
 * L1 requests and registers of loading them per row (at 64 registers the gated kernel
 * spilled 48 bytes a thread with a load per row). */
template <int M, int NR>
__device__ __forceinline__ void q4k_pair_dot(const Q4KPair *r, int pu, int64_t K, const int8_t *__restrict__ xq,
                                             const float *__restrict__ xd, const float *__restrict__ xs8, float *acc)
{
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
        int64_t u = 2 * (int64_t)pu + jj;
#pragma unroll
        for (int m = 0; m < M; m++) {
            const int4 *xp = (const int4 *)(xq + m * K + 32 * u);
            int4 x0 = __ldg(xp), x1 = __ldg(xp + 1);
            float4 s4 = __ldg((const float4 *)(xs8 + m * (K / 8) + 4 * u));
            float dx = __ldg(xd + m * (K / 32) + u);
            int X[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
            float S[4] = {s4.x, s4.y, s4.z, s4.w};
#pragma unroll
            for (int i = 0; i < NR; i++) {
                const uint32_t hd[4] = {r[i].h.x, r[i].h.y, r[i].h.z, r[i].h.w};
                float d = cuq::h2f((uint16_t)hd[0]), dmin = cuq::h2f((uint16_t)(hd[0] >> 16));
                int j = 2 * (pu % Q4K_PAIRS) + jj, sc, mn;
                cuq::k4_scale_min(hd + 1, j, sc, mn);
                float fa = d * (float)sc, fb = -dmin * (float)mn;
                const uint32_t w[8] = {r[i].w0.x, r[i].w0.y, r[i].w0.z, r[i].w0.w,
                                       r[i].w1.x, r[i].w1.y, r[i].w1.z, r[i].w1.w};
                uint32_t q0[4], q1[4];
#pragma unroll
                for (int k = 0; k < 4; k++) {
                    q0[k] = (w[k] >> (4 * jj)) & 0x0F0F0F0Fu;
                    q1[k] = (w[4 + k] >> (4 * jj)) & 0x0F0F0F0Fu;
                }
                float *a = acc + i * M + m;
                *a = chunk_dot<cuq::Q4_K, 1>(q1, fa, fb, X, S, dx, chunk_dot<cuq::Q4_K, 0>(q0, fa, fb, X, S, dx, *a));
            }
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
        for (int k = 0; k < U; k++) {
            if (p0 + k * step >= np) continue;
            Q4KPair rk[NR];
#pragma unroll
            for (int i = 0; i < NR; i++) rk[i] = r[i][k];
            q4k_pair_dot<M, NR>(rk, p0 + k * step, K, a.xq, a.xd, a.xs8, acc);
        }
    }
}

} // namespace cufu

#endif
