/* Prefill attention on tensor cores (mma.sync m16n8k16, f16 operands, f32 accumulation),
 * flash-attention style: no [Tq, Tk] score matrix.
 *
 * A block owns TC_BQ consecutive query positions of one query head; each of its 4 warps owns
 * 16 of them and keeps Q (pre-scaled by scale * log2 e, rounded to f16) as mma A fragments
 * in registers. Key/value tiles of BK rows are staged in shared memory as f16 (converted
 * from f32 when the cache is f32); S = Q K^T stays in registers, the online softmax (base 2)
 * rescales the f32 output accumulator, and P (rounded to f16) is fed straight back as the A
 * operand of P V, V's B fragments read transposed with ldmatrix.trans.
 *
 * The visible keys of every row, the mask, the length tensor, NaN scores and rows that see
 * no key follow sdpa_kernel (attention.cu), which is the CPU's semantics. Operands are
 * rounded to f16 (relative 2^-11), so results differ from the f32 path by NMSE ~1e-7 on
 * typical data; |K|, |V| or |Q * scale| past 65504 would overflow f16: the host sends only
 * head dims 64, 128 and 256 here (nn_sdpa_tc_ok).
 *
 * Head dim 256 (Gemma 3) keeps its f32 output accumulator in registers too (128 a thread), so
 * Q's fragments live in shared memory instead (re-read for each key tile, conflict-free) and
 * key tiles are 32 rows: it fits the 255 registers of a 128-thread block, spilling 16-40 bytes
 * (ptxas; the D 128 async form spills 24).
 * Before it ran here, Gemma 3 270M's prompt went through the f32 kernel of attention.cu,
 * 72% of a pp512 pass's device time on the H200 (7.3 of 10.1 ms). */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "backends/cuda/nn_kernels.h"

namespace {

constexpr int TC_BQ = 64; /* query rows per block: 16 per warp */
constexpr int TC_WARPS = 4;

/* Keys per shared-memory tile, and whether Q's fragments are kept in shared memory, by head
 * dim (see the top of the file). */
constexpr int tc_bk(int D) { return D > 128 ? 32 : 64; }
constexpr bool tc_qsm(int D) { return D > 128; }

/* Shared memory of a block, in halves of D + 8: its K and V tiles (two of each when async:
 * double-buffered), then Q's rows where tc_qsm. */
constexpr int tc_kv_rows(int D, bool async) { return (async ? 4 : 2) * tc_bk(D); }
constexpr size_t tc_smem(int D, bool async)
{
    return (size_t)(tc_kv_rows(D, async) + (tc_qsm(D) ? TC_BQ : 0)) * sizeof(__half) * (D + 8);
}
constexpr float TC_LOG2E = 1.4426950408889634f;

__device__ __forceinline__ uint32_t pack_h2(float a, float b)
{
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&h);
}

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const __half *p)
{
    uint32_t addr = (uint32_t)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

__device__ __forceinline__ int64_t tc_attended(const nn_sdpa &a)
{
    if (!a.len) return a.Tk;
    int64_t L = a.ldt == CT_I32 ? (int64_t) * (const int32_t *)a.len : *(const int64_t *)a.len;
    return L < 0 || L > a.Tk ? -1 : L;
}

/* Keys [lo, hi] query position qi sees (lo > hi: none). */
__device__ __forceinline__ void tc_range(const nn_sdpa &a, int64_t qi, int64_t L, int64_t *lo, int64_t *hi)
{
    if (qi >= a.Tq || L < 0) {
        *lo = 1, *hi = 0;
        return;
    }
    int64_t off = L - a.Tq;
    int64_t h = a.causal ? qi + off : L - 1, l = a.window > 0 ? qi + off - a.window + 1 : 0;
    *hi = h < L - 1 ? h : L - 1;
    *lo = l > 0 ? l : 0;
}

/* 8 consecutive elements of row j (element d0..d0+7) as 8 halves; vec: 16-byte aligned. */
template <typename T> __device__ __forceinline__ uint4 load8(const T *p, bool vec);
template <> __device__ __forceinline__ uint4 load8<__half>(const __half *p, bool vec)
{
    if (vec) return *reinterpret_cast<const uint4 *>(p);
    uint4 r;
    __half *h = reinterpret_cast<__half *>(&r);
    for (int i = 0; i < 8; i++) h[i] = p[i];
    return r;
}
template <> __device__ __forceinline__ uint4 load8<float>(const float *p, bool vec)
{
    float f[8];
    if (vec) {
        float4 x = reinterpret_cast<const float4 *>(p)[0], y = reinterpret_cast<const float4 *>(p)[1];
        f[0] = x.x, f[1] = x.y, f[2] = x.z, f[3] = x.w, f[4] = y.x, f[5] = y.y, f[6] = y.z, f[7] = y.w;
    } else {
        for (int i = 0; i < 8; i++) f[i] = p[i];
    }
    uint4 r;
    r.x = pack_h2(f[0], f[1]), r.y = pack_h2(f[2], f[3]), r.z = pack_h2(f[4], f[5]), r.w = pack_h2(f[6], f[7]);
    return r;
}

/* Rows j0..j0+BK-1 of a [*, D] operand (row stride rs) into sm [BK][D + 8]; rows past hi
 * are zeros (P is 0 there, and 0 * garbage could be NaN). All of a thread's loads are
 * issued before its stores, so their latencies overlap. */
template <int D, int BK, typename T>
__device__ __forceinline__ void stage(__half *sm, const T *base, int64_t rs, int64_t j0, int64_t hi, bool vec)
{
    constexpr int C = D / 8, LD = D + 8, PER = BK * C / (TC_WARPS * 32);
    uint4 v[PER];
#pragma unroll
    for (int i = 0; i < PER; i++) {
        int t = threadIdx.x + i * TC_WARPS * 32, jj = t / C, c = t % C;
        v[i] = j0 + jj <= hi ? load8<T>(base + (j0 + jj) * rs + c * 8, vec) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int i = 0; i < PER; i++) {
        int t = threadIdx.x + i * TC_WARPS * 32, jj = t / C, c = t % C;
        *reinterpret_cast<uint4 *>(sm + jj * LD + c * 8) = v[i];
    }
}

/* The same with cp.async (f16 rows aligned to 16 bytes): no registers, completes in the
 * background while the previous tile is consumed. */
template <int D, int BK>
__device__ __forceinline__ void stage_async(__half *sm, const __half *base, int64_t rs, int64_t j0, int64_t hi)
{
    constexpr int C = D / 8, LD = D + 8, PER = BK * C / (TC_WARPS * 32);
#pragma unroll
    for (int i = 0; i < PER; i++) {
        int t = threadIdx.x + i * TC_WARPS * 32, jj = t / C, c = t % C;
        bool ok = j0 + jj <= hi;
        const __half *src = ok ? base + (j0 + jj) * rs + c * 8 : base;
        uint32_t dst = (uint32_t)__cvta_generic_to_shared(sm + jj * LD + c * 8);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(ok ? 16 : 0));
    }
}

__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/* ASYNC: f16 K and V with 16-byte aligned rows, double-buffered through cp.async. */
template <int D, typename KT, typename VT, bool ASYNC>
__global__ void __launch_bounds__(TC_WARPS * 32) sdpa_tc_kernel(nn_sdpa a, bool vec)
{
    constexpr int BK = tc_bk(D), LD = D + 8, NT = BK / 8, KS = D / 16, DT = D / 8;
    constexpr bool QSM = tc_qsm(D);
    extern __shared__ __align__(16) unsigned char tc_sm[];
    __half *const sm0 = reinterpret_cast<__half *>(tc_sm);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tig = lane & 3;
    const int64_t nqt = (a.Tq + TC_BQ - 1) / TC_BQ, G = a.Hq / a.Hkv;
    /* the longest (latest) query tiles first: causal tiles differ in work */
    const int64_t qt = nqt - 1 - (int64_t)blockIdx.x % nqt, h = ((int64_t)blockIdx.x / nqt) % a.Hq,
                  b = (int64_t)blockIdx.x / (nqt * a.Hq), kvh = h / G;
    const int64_t L = tc_attended(a), q0 = qt * TC_BQ;

    int64_t blo = INT64_MAX, bhi = -1, wlo = INT64_MAX, whi = -1;
    for (int r = 0; r < TC_BQ; r++) {
        int64_t lo, hi;
        tc_range(a, q0 + r, L, &lo, &hi);
        if (lo > hi) continue;
        blo = lo < blo ? lo : blo, bhi = hi > bhi ? hi : bhi;
        if (r / 16 == warp) wlo = lo < wlo ? lo : wlo, whi = hi > whi ? hi : whi;
    }
    /* this thread's two rows: g and g + 8 of the warp's 16 */
    int64_t qi[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8}, lo[2], hi[2];
    for (int u = 0; u < 2; u++) tc_range(a, qi[u], L, &lo[u], &hi[u]);

    const float qscale = a.scale * TC_LOG2E;
    /* Q's fragments: in registers (qa), or this warp's 16 rows of Qs [16 * TC_WARPS][LD] */
    uint32_t qa[QSM ? 1 : KS][4];
    __half *const Qs = sm0 + tc_kv_rows(D, ASYNC) * LD;
    if constexpr (QSM) {
        for (int t = lane; t < 16 * D / 2; t += 32) {
            int r = t / (D / 2), d = 2 * (t % (D / 2));
            int64_t row = q0 + warp * 16 + r;
            float x0 = 0.0f, x1 = 0.0f;
            if (row < a.Tq) {
                const float *qp = a.q + b * a.qs[0] + h * a.qs[1] + row * a.qs[2] + d;
                x0 = qp[0] * qscale, x1 = qp[1] * qscale;
            }
            *reinterpret_cast<uint32_t *>(Qs + (warp * 16 + r) * LD + d) = pack_h2(x0, x1);
        }
        __syncwarp();
    } else {
#pragma unroll
        for (int kk = 0; kk < KS; kk++)
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int64_t row = qi[u & 1], d = kk * 16 + 2 * tig + (u >> 1) * 8;
                float x0 = 0.0f, x1 = 0.0f;
                if (row < a.Tq) {
                    const float *qp = a.q + b * a.qs[0] + h * a.qs[1] + row * a.qs[2] + d;
                    x0 = qp[0] * qscale, x1 = qp[1] * qscale;
                }
                qa[kk][u] = pack_h2(x0, x1);
            }
    }

    float o[DT][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    bool nan[2] = {false, false};
#pragma unroll
    for (int t = 0; t < DT; t++) o[t][0] = o[t][1] = o[t][2] = o[t][3] = 0.0f;
    const KT *kb = (const KT *)a.k + b * a.ks[0] + kvh * a.ks[1];
    const VT *vb = (const VT *)a.v + b * a.vs[0] + kvh * a.vs[1];
    const float *mb = a.mask ? a.mask + b * a.ms[0] + h * a.ms[1] : nullptr;

    const int64_t ntiles = bhi >= blo ? (bhi - blo) / BK + 1 : 0;
    if constexpr (ASYNC) {
        if (ntiles > 0) {
            stage_async<D, BK>(sm0, (const __half *)kb, a.ks[2], blo, bhi);
            stage_async<D, BK>(sm0 + BK * LD, (const __half *)vb, a.vs[2], blo, bhi);
            cp_commit();
        }
    }
    for (int64_t it = 0; it < ntiles; it++) {
        const int64_t j0 = blo + it * BK;
        const __half *Ks = sm0 + (ASYNC ? (it & 1) * 2 * BK * LD : 0), *Vs = Ks + BK * LD;
        if constexpr (ASYNC) {
            if (it + 1 < ntiles) { /* the next tile into the other buffer, consumed two syncs ago */
                __half *nk = sm0 + ((it + 1) & 1) * 2 * BK * LD;
                stage_async<D, BK>(nk, (const __half *)kb, a.ks[2], j0 + BK, bhi);
                stage_async<D, BK>(nk + BK * LD, (const __half *)vb, a.vs[2], j0 + BK, bhi);
                cp_commit();
                cp_wait<1>();
            } else {
                cp_wait<0>();
            }
            __syncthreads();
        } else {
            __syncthreads(); /* the previous tile is consumed */
            stage<D, BK, KT>(sm0, kb, a.ks[2], j0, bhi, vec);
            stage<D, BK, VT>(sm0 + BK * LD, vb, a.vs[2], j0, bhi, vec);
            __syncthreads();
        }
        if (j0 <= whi && j0 + BK - 1 >= wlo) { /* some row of this warp sees the tile */
            float s[NT][4];
    #pragma unroll
            for (int nt = 0; nt < NT; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
            const uint32_t *K32 = reinterpret_cast<const uint32_t *>(Ks);
    #pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                const uint32_t *qf = qa[QSM ? 0 : kk];
                if constexpr (QSM) {
                    const __half *qr = Qs + (warp * 16 + g) * LD + kk * 16 + 2 * tig;
                    qa[0][0] = *reinterpret_cast<const uint32_t *>(qr);
                    qa[0][1] = *reinterpret_cast<const uint32_t *>(qr + 8 * LD);
                    qa[0][2] = *reinterpret_cast<const uint32_t *>(qr + 8);
                    qa[0][3] = *reinterpret_cast<const uint32_t *>(qr + 8 * LD + 8);
                }
    #pragma unroll
                for (int nt = 0; nt < NT; nt++) {
                    const uint32_t *kr = K32 + (nt * 8 + g) * (LD / 2) + kk * 8 + tig;
                    mma16816(s[nt], qf, kr[0], kr[4]);
                }
            }

            float mt[2] = {-INFINITY, -INFINITY};
    #pragma unroll
            for (int nt = 0; nt < NT; nt++)
    #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int u = e >> 1;
                    int64_t j = j0 + nt * 8 + 2 * tig + (e & 1);
                    float sc = -INFINITY;
                    if (j >= lo[u] && j <= hi[u]) {
                        sc = s[nt][e];
                        if (mb) sc += mb[qi[u] * a.ms[2] + j * a.ms[3]] * TC_LOG2E;
                        if (sc != sc) nan[u] = true, sc = -INFINITY;
                    }
                    s[nt][e] = sc;
                    mt[u] = fmaxf(mt[u], sc);
                }
            float alpha[2];
    #pragma unroll
            for (int u = 0; u < 2; u++) {
                mt[u] = fmaxf(mt[u], __shfl_xor_sync(0xffffffffu, mt[u], 1));
                mt[u] = fmaxf(mt[u], __shfl_xor_sync(0xffffffffu, mt[u], 2));
                float mn = fmaxf(m[u], mt[u]);
                alpha[u] = mn == -INFINITY ? 1.0f : exp2f(m[u] - mn);
                m[u] = mn;
            }
            float ls[2] = {0.0f, 0.0f};
    #pragma unroll
            for (int nt = 0; nt < NT; nt++)
    #pragma unroll
                for (int e = 0; e < 4; e++) {
                    int u = e >> 1;
                    float p = m[u] == -INFINITY ? 0.0f : exp2f(s[nt][e] - m[u]);
                    s[nt][e] = p;
                    ls[u] += p;
                }
    #pragma unroll
            for (int u = 0; u < 2; u++) l[u] = l[u] * alpha[u] + ls[u];
    #pragma unroll
            for (int t = 0; t < DT; t++) o[t][0] *= alpha[0], o[t][1] *= alpha[0], o[t][2] *= alpha[1], o[t][3] *= alpha[1];

    #pragma unroll
            for (int kk = 0; kk < BK / 16; kk++) {
                uint32_t pa[4] = {pack_h2(s[2 * kk][0], s[2 * kk][1]), pack_h2(s[2 * kk][2], s[2 * kk][3]),
                                  pack_h2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack_h2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
                const __half *vr = Vs + (kk * 16 + ((lane >> 3) & 1) * 8 + (lane & 7)) * LD + (lane >> 4) * 8;
    #pragma unroll
                for (int dp = 0; dp < D / 16; dp++) {
                    uint32_t r[4];
                    ldsm_x4_trans(r, vr + dp * 16);
                    mma16816(o[2 * dp], pa, r[0], r[1]);
                    mma16816(o[2 * dp + 1], pa, r[2], r[3]);
                }
            }
        }
        if constexpr (ASYNC) __syncthreads(); /* this buffer is refilled next iteration */
    }

#pragma unroll
    for (int u = 0; u < 2; u++) {
        l[u] += __shfl_xor_sync(0xffffffffu, l[u], 1);
        l[u] += __shfl_xor_sync(0xffffffffu, l[u], 2);
        bool bad = nan[u];
        bad |= __shfl_xor_sync(0xffffffffu, (int)bad, 1) != 0;
        bad |= __shfl_xor_sync(0xffffffffu, (int)bad, 2) != 0;
        if (qi[u] >= a.Tq) continue;
        float inv = l[u] > 0 ? 1.0f / l[u] : 0.0f;
        if (bad || L < 0) inv = NAN;
        float *orow = a.out + ((b * a.Hq + h) * a.Tq + qi[u]) * D;
#pragma unroll
        for (int t = 0; t < DT; t++) {
            float2 v = make_float2(o[t][2 * u] * inv, o[t][2 * u + 1] * inv);
            if (bad || L < 0) v = make_float2(NAN, NAN);
            *reinterpret_cast<float2 *>(orow + t * 8 + 2 * tig) = v;
        }
    }
}

template <int D, typename KT, typename VT, bool ASYNC> cudaError_t tc_launch(const nn_sdpa *a, bool vec, cudaStream_t s)
{
    constexpr size_t sm = tc_smem(D, ASYNC);
    /* every GPU the build runs on (sm_80 and up: sm_86 and sm_89 have the least) opts in to 99 KiB
     * of shared memory a block; D 256 async takes exactly that */
    static_assert(tc_smem(D, true) <= 99 * 1024, "sdpa_tc_kernel's shared memory must fit sm_86's opt-in");
    if (sm > 48 * 1024) {
        static const cudaError_t once =
            cudaFuncSetAttribute(sdpa_tc_kernel<D, KT, VT, ASYNC>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)sm);
        if (once != cudaSuccess) return once;
    }
    int64_t nqt = (a->Tq + TC_BQ - 1) / TC_BQ;
    sdpa_tc_kernel<D, KT, VT, ASYNC><<<(unsigned)(a->B * a->Hq * nqt), TC_WARPS * 32, sm, s>>>(*a, vec);
    return cudaGetLastError();
}

template <int D, typename KT, typename VT> cudaError_t tc_launch(const nn_sdpa *a, cudaStream_t s)
{
    /* 16-byte loads when every row start is 16-byte aligned */
    size_t ek = sizeof(KT), ev = sizeof(VT);
    bool vec = (uintptr_t)a->k % 16 == 0 && (uintptr_t)a->v % 16 == 0;
    for (int i = 0; i < 3; i++) vec = vec && (a->ks[i] * ek) % 16 == 0 && (a->vs[i] * ev) % 16 == 0;
    if constexpr (sizeof(KT) == 2 && sizeof(VT) == 2)
        if (vec) return tc_launch<D, KT, VT, true>(a, vec, s);
    return tc_launch<D, KT, VT, false>(a, vec, s);
}

template <int D> cudaError_t tc_dispatch(const nn_sdpa *a, cudaStream_t s)
{
    bool kh = a->kdt == CT_F16, vh = a->vdt == CT_F16;
    if (kh && vh) return tc_launch<D, __half, __half>(a, s);
    if (kh) return tc_launch<D, __half, float>(a, s);
    if (vh) return tc_launch<D, float, __half>(a, s);
    return tc_launch<D, float, float>(a, s);
}

} // namespace

extern "C" int nn_sdpa_tc_ok(int64_t Tq, int64_t D, int64_t Dv)
{
    return Tq >= NN_SDPA_TC_MIN_TQ && D == Dv && (D == 64 || D == 128 || D == 256);
}

extern "C" cudaError_t nn_sdpa_tc_run(const nn_sdpa *a, cudaStream_t s)
{
    if (!nn_sdpa_tc_ok(a->Tq, a->D, a->Dv) || (a->qs[3] != 1 && a->D > 1)) return cudaErrorInvalidValue;
    if ((int64_t)a->B * a->Hq * ((a->Tq + TC_BQ - 1) / TC_BQ) > INT32_MAX) return cudaErrorInvalidValue;
    return a->D == 64 ? tc_dispatch<64>(a, s) : a->D == 128 ? tc_dispatch<128>(a, s) : tc_dispatch<256>(a, s);
}
