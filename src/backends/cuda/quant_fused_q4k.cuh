/* The Q4_K rows of the one-format job kernels (quant_fused_q4k.cu, and the mixed
 * Q4_K + Q6_K kernel of quant_fused_q6k.cu): see quant_fused_q4k.cu for the design. */
#ifndef CT_CUDA_QUANT_FUSED_Q4K_CUH
#define CT_CUDA_QUANT_FUSED_Q4K_CUH

#include "backends/cuda/quant_fused.cuh"

namespace cufu {

constexpr int Q4K_BYTES = 144, Q4K_PAIRS = 4; /* a block: 4 pairs of 32-element sub-blocks */

/* Half hu of a row (16 bytes of a pair's 32 quant bytes, run h = hu % 2 of pair hu / 2): its
 * block's header and those 16 bytes, chunk h of both sub-blocks of the pair. */
constexpr int Q4K_HALVES = 2 * Q4K_PAIRS;
struct Q4KHalf {
    uint4 h, w;
};

__device__ __forceinline__ void q4k_load_half(const uint8_t *row, int hu, Q4KHalf &r)
{
    const uint8_t *p = row + (size_t)(hu / Q4K_HALVES) * Q4K_BYTES;
    r.h = ldw128(p);
    r.w = ldw128(p + 16 + 16 * (hu % Q4K_HALVES));
}

/* acc[i * M + m] += half hu of row i times x's row m (D8: x's d8 form, chunk_dot8): chunk h of sub-blocks 2 (pu % 4) (low
 * nibbles) and 2 (pu % 4) + 1 (high), each chunk as chunk_dot computes an in-order chunk
 * (its 16 quants against x's 16 quants, the offset times x's two sums of 8). Neighbouring
 * lanes take the two runs of a pair, so x's loads of a warp are twice as dense as with a
 * pair a lane. */
template <int M, int NR, bool D8 = false>
__device__ __forceinline__ void q4k_half_dot(const Q4KHalf *r, int hu, int64_t K, const int8_t *__restrict__ xq,
                                             const float *__restrict__ xd, const float *__restrict__ xs8, float *acc)
{
    int pu = hu >> 1, h = hu & 1;
#pragma unroll
    for (int jj = 0; jj < 2; jj++) {
        int64_t u = 2 * (int64_t)pu + jj;
#pragma unroll
        for (int m = 0; m < M; m++) {
            int4 X = ld_act((const int4 *)(xq + m * K + 32 * u + 16 * h));
            float2 S = ld_act((const float2 *)(xs8 + m * (K / 8) + 4 * u + 2 * h));
            float2 D = D8 ? ld_act((const float2 *)(xd + m * (K / 8) + 4 * u + 2 * h)) : make_float2(0.f, 0.f);
            float dx = D8 ? 0.f : ld_act(xd + m * (K / 32) + u), xs = S.x + S.y;
#pragma unroll
            for (int i = 0; i < NR; i++) {
                const uint32_t hd[4] = {r[i].h.x, r[i].h.y, r[i].h.z, r[i].h.w};
                float d = cuq::h2f((uint16_t)hd[0]), dmin = cuq::h2f((uint16_t)(hd[0] >> 16));
                int sc, mn;
                cuq::k4_scale_min(hd + 1, 2 * (pu % Q4K_PAIRS) + jj, sc, mn);
                float fa = d * (float)sc, fb = -dmin * (float)mn;
                const uint32_t w[4] = {r[i].w.x, r[i].w.y, r[i].w.z, r[i].w.w};
                if (D8) {
                    uint32_t q[4];
#pragma unroll
                    for (int k = 0; k < 4; k++) q[k] = (w[k] >> (4 * jj)) & 0x0F0F0F0Fu;
                    acc[i * M + m] = chunk_dot8(q, fa, fb, X, D, xs, acc[i * M + m]);
                    continue;
                }
                int si = __dp4a((int)((w[0] >> (4 * jj)) & 0x0F0F0F0Fu), X.x, 0);
                si = __dp4a((int)((w[1] >> (4 * jj)) & 0x0F0F0F0Fu), X.y, si);
                si = __dp4a((int)((w[2] >> (4 * jj)) & 0x0F0F0F0Fu), X.z, si);
                si = __dp4a((int)((w[3] >> (4 * jj)) & 0x0F0F0F0Fu), X.w, si);
                float *a = acc + i * M + m;
                *a = fmaf(fa * dx, (float)si, fmaf(fb, xs, *a));
            }
        }
    }
}

/* acc[r * M + m] += row r (of NR) times x's row m over this lane's halves (l0, l0 + step,
 * ...): every row's loads of a round (U halves a row) before the math on them. */
template <int M, int NR, bool D8 = false>
__device__ __forceinline__ void q4k_rows(const uint8_t *const *rows, int l0, int step, const FuArgs &a, float *acc)
{
    int64_t K = a.K;
    constexpr int U = NR == 1 ? 2 : 1;
    int nh = (int)(K / 256) * Q4K_HALVES;
    for (int h0 = l0; h0 < nh; h0 += U * step) {
        Q4KHalf r[NR][U];
#pragma unroll
        for (int i = 0; i < NR; i++)
#pragma unroll
            for (int k = 0; k < U; k++)
                if (h0 + k * step < nh) q4k_load_half(rows[i], h0 + k * step, r[i][k]);
#pragma unroll
        for (int k = 0; k < U; k++) {
            if (h0 + k * step >= nh) continue;
            Q4KHalf rk[NR];
#pragma unroll
            for (int i = 0; i < NR; i++) rk[i] = r[i][k];
            q4k_half_dot<M, NR, D8>(rk, h0 + k * step, K, a.xq, a.xd, a.xs8, acc);
        }
    }
}

} // namespace cufu

#endif
