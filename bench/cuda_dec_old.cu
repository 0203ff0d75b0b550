/* The decode attention kernel as it was at main 71ea924 (src/backends/cuda/attention_dec.cu
 * then, last changed in f911c8c), compiled into ctorch-bench-cuda-nn only, so that
 * `ctorch-bench-cuda-nn dec` times it beside the library's kernel in one run. Its entry
 * points carry an _old suffix; it is not part of the library. */
/* Decode attention (Tq = 1): the G = Hq / Hkv query heads of a KV head share every K/V row
 * the block reads.
 *
 * The keys of a cache of Tk slots are cut into n_split segments of DC_KPB (or more) keys,
 * one block each, so the grid (n_split, B * Hkv) depends on Tk and never on the attended
 * length read on the device: a recorded graph replays it at every position, and segments
 * past the length only take part in the merge. In a block each warp takes chunks of 32
 * keys, one per lane: the lane loads its key row (to registers) and value row (to shared
 * memory) with all its 16-byte loads in flight together, the first chunk's before Q's;
 * it scores its key against the G queries (Q pre-scaled by scale * log2 e in shared
 * memory), the warp folds the chunk into its online softmax (base 2) and accumulates P V
 * with each lane owning VC consecutive output elements. The four warps merge in shared
 * memory; with several segments each block writes its partial (acc, max, sum) and the
 * last block of a KV head to finish (a counter per KV head, zeroed by the host before the
 * launch and again by that block) merges them in one pass, so one kernel does it all.
 *
 * Cost (H100, TinyLlama layer: 32 query heads, 4 KV heads, D 64): 10.5 us at 64 slots,
 * 20 us at 640 (600 attended), 24 us at 4096, in cache. Each warp runs a long serial chain
 * (one warp per scheduler, ~6 cycles an instruction): the next step is more warps per
 * chunk (a query head each) with a merge that stays short at long caches.
 *
 * Semantics are sdpa_kernel's (attention.cu): keys [L - window, L - 1] (all of [0, L) without
 * a window), the mask added, a NaN score makes the row NaN, no visible key gives zeros, a
 * length outside [0, Tk] gives NaN. Arithmetic is f32 throughout. */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "backends/cuda/nn_kernels.h"

namespace {

constexpr int DC_WARPS = 4;
constexpr int DC_KPB = DC_WARPS * 32; /* keys per block at least: one chunk per warp */
constexpr float DC_LOG2E = 1.4426950408889634f;

__device__ __forceinline__ float dwsum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float dwmax(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

constexpr int DC_SL = 64; /* elements of a row loaded at once: independent 16-byte loads in flight */

/* DC_SL elements d0.. of row `row` (n long) as raw 16-byte words; past n, or !valid: zeros. */
template <typename T> __device__ __forceinline__ void load_slab(uint4 *r, const T *row, int64_t d0, int64_t n, bool vec, bool valid)
{
    constexpr int N = DC_SL * (int)sizeof(T) / 16;
    if (valid && vec && d0 + DC_SL <= n) {
        const uint4 *p = reinterpret_cast<const uint4 *>(row + d0);
#pragma unroll
        for (int i = 0; i < N; i++) r[i] = p[i];
        return;
    }
    T *t = reinterpret_cast<T *>(r);
#pragma unroll
    for (int i = 0; i < DC_SL; i++) {
        if constexpr (sizeof(T) == 2) t[i] = valid && d0 + i < n ? row[d0 + i] : __float2half(0.0f);
        else t[i] = valid && d0 + i < n ? row[d0 + i] : 0.0f;
    }
}

template <typename T> __device__ __forceinline__ float elem(const uint4 *r, int i)
{
    if constexpr (sizeof(T) == 2) return __half2float(reinterpret_cast<const __half *>(r)[i]);
    else return reinterpret_cast<const float *>(r)[i];
}

/* VC consecutive elements of a shared-memory row as floats (aligned to VC elements). */
template <int VC, typename T> __device__ __forceinline__ void ld_vc(float *v, const T *p)
{
    if constexpr (sizeof(T) == 2) {
        __half2 h[VC / 2];
        if constexpr (VC == 8) *reinterpret_cast<uint4 *>(h) = *reinterpret_cast<const uint4 *>(p);
        else if constexpr (VC == 4) *reinterpret_cast<uint2 *>(h) = *reinterpret_cast<const uint2 *>(p);
        else h[0] = *reinterpret_cast<const __half2 *>(p);
#pragma unroll
        for (int i = 0; i < VC / 2; i++) {
            float2 f = __half22float2(h[i]);
            v[2 * i] = f.x, v[2 * i + 1] = f.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < VC; i += 2) {
            float2 f = *reinterpret_cast<const float2 *>(p + i);
            v[i] = f.x, v[i + 1] = f.y;
        }
    }
}

__device__ __forceinline__ int64_t dc_attended(const nn_sdpa &a)
{
    if (!a.len) return a.Tk;
    int64_t L = a.ldt == CT_I32 ? (int64_t) * (const int32_t *)a.len : *(const int64_t *)a.len;
    return L < 0 || L > a.Tk ? -1 : L;
}

/* Shared memory layout (floats unless said): Qs [GM][DP], Ps [warps][GM][32], Ms/Ls
 * [warps][GM], then the V rows of each warp's chunk [warps][32][VP + pad] (of T), which
 * the warps' partial outputs Os [warps][GM][VP] reuse once the key loop is over. */
template <int GM, int VC> __host__ __device__ constexpr int64_t dc_dp(int64_t D)
{
    return (D + DC_SL - 1) / DC_SL * DC_SL;
}
template <int GM, int VC, typename T> __host__ __device__ size_t dc_smem(int64_t D)
{
    const int64_t VP = 32 * VC, VS = VP + 16 / (int64_t)sizeof(T);
    size_t head = sizeof(float) * (size_t)(GM * dc_dp<GM, VC>(D) + DC_WARPS * GM * 32 + 2 * DC_WARPS * GM);
    size_t vrows = sizeof(T) * (size_t)(DC_WARPS * 32 * VS), outs = sizeof(float) * (size_t)(DC_WARPS * GM * VP);
    return head + (vrows > outs ? vrows : outs);
}

/* GM >= G query heads per block, VC = output elements per lane (Dv <= 32 * VC). */
template <int GM, int VC, typename T> __global__ void __launch_bounds__(DC_WARPS * 32) sdpa_dec_kernel(nn_sdpa a, bool vec)
{
    extern __shared__ __align__(16) float dc_sm[];
    constexpr int64_t VP = 32 * VC, VS = VP + 16 / sizeof(T); /* the pad spreads 16-byte row stores over banks */
    const int64_t D = a.D, Dv = a.Dv, G = a.Hq / a.Hkv, S = a.n_split, DP = dc_dp<GM, VC>(D);
    float *Qs = dc_sm, *Ps = Qs + GM * DP, *Ms = Ps + DC_WARPS * GM * 32, *Ls = Ms + DC_WARPS * GM;
    T *Vs = reinterpret_cast<T *>(Ls + DC_WARPS * GM);
    float *Os = Ls + DC_WARPS * GM;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t kvh = blockIdx.y % a.Hkv, b = blockIdx.y / a.Hkv, sg = blockIdx.x;
    const int64_t L = dc_attended(a);

    /* keys this block scores: its segment within the visible range */
    int64_t seg = (a.Tk + S - 1) / S, jlo = sg * seg, jhi = jlo + seg - 1;
    int64_t vlo = a.window > 0 ? L - a.window : 0, vhi = L - 1; /* causal with Tq = 1: all of [0, L) */
    if (jlo < vlo) jlo = vlo;
    if (jhi > vhi) jhi = vhi;

    float m[GM], l[GM], acc[GM][VC];
    bool nan[GM];
#pragma unroll
    for (int r = 0; r < GM; r++) {
        m[r] = -INFINITY, l[r] = 0.0f, nan[r] = false;
#pragma unroll
        for (int c = 0; c < VC; c++) acc[r][c] = 0.0f;
    }
    const T *kb = (const T *)a.k + b * a.ks[0] + kvh * a.ks[1];
    const T *vb = (const T *)a.v + b * a.vs[0] + kvh * a.vs[1];
    float *P = Ps + warp * GM * 32;
    T *Vw = Vs + warp * 32 * VS;
    constexpr int NR = DC_SL * (int)sizeof(T) / 16;
    uint4 kraw[NR];
    /* this lane's key row and value row in flight together; the value row to shared memory
     * (zeros past Dv and for keys past the segment: their P is 0) */
    auto fetch = [&](int64_t c0) {
        const int64_t j = c0 + lane;
        const bool valid = j <= jhi;
        const T *kr = kb + (valid ? j : 0) * a.ks[2], *vr = vb + (valid ? j : 0) * a.vs[2];
        load_slab<T>(kraw, kr, 0, D, vec, valid);
        for (int64_t e0 = 0; e0 < VP; e0 += DC_SL) {
            uint4 vraw[NR];
            load_slab<T>(vraw, vr, e0, Dv, vec, valid);
#pragma unroll
            for (int i = 0; i < NR; i++) reinterpret_cast<uint4 *>(Vw + lane * VS + e0)[i] = vraw[i];
        }
    };
    const int64_t first = jlo + (int64_t)warp * 32;
    if (L >= 0 && first <= jhi) fetch(first); /* before Q: the two latencies overlap */

    const float qscale = a.scale * DC_LOG2E;
    for (int64_t t0 = 0; t0 < GM * DP; t0 += 4 * DC_WARPS * 32) {
        float qv[4];
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int64_t t = t0 + u * DC_WARPS * 32 + threadIdx.x, r = t / DP, d = t % DP;
            qv[u] = t < GM * DP && r < G && d < D ? a.q[b * a.qs[0] + (kvh * G + r) * a.qs[1] + d * a.qs[3]] * qscale : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
            int64_t t = t0 + u * DC_WARPS * 32 + threadIdx.x;
            if (t < GM * DP) Qs[t] = qv[u];
        }
    }
    __syncthreads();

    for (int64_t c0 = first; L >= 0 && c0 <= jhi; c0 += DC_KPB) {
        if (c0 != first) fetch(c0);
        const int64_t j = c0 + lane;
        const bool valid = j <= jhi;
        const T *kr = kb + (valid ? j : 0) * a.ks[2];
        float s[GM];
#pragma unroll
        for (int r = 0; r < GM; r++) s[r] = 0.0f;
        for (int64_t d0 = 0; d0 < D; d0 += DC_SL) {
            if (d0 > 0) load_slab<T>(kraw, kr, d0, D, vec, valid);
#pragma unroll
            for (int i = 0; i < DC_SL; i += 4) {
                float k0 = elem<T>(kraw, i), k1 = elem<T>(kraw, i + 1), k2 = elem<T>(kraw, i + 2), k3 = elem<T>(kraw, i + 3);
#pragma unroll
                for (int r = 0; r < GM; r++) {
                    float4 q = *reinterpret_cast<const float4 *>(Qs + r * DP + d0 + i);
                    s[r] += q.x * k0 + q.y * k1 + q.z * k2 + q.w * k3;
                }
            }
        }
#pragma unroll
        for (int r = 0; r < GM; r++) {
            float sc = -INFINITY;
            if (valid && r < G) {
                sc = s[r];
                if (a.mask) sc += a.mask[b * a.ms[0] + (kvh * G + r) * a.ms[1] + j * a.ms[3]] * DC_LOG2E;
                if (sc != sc) nan[r] = true, sc = -INFINITY;
            }
            float mt = dwmax(sc), mn = fmaxf(m[r], mt);
            float alpha = mn == -INFINITY ? 1.0f : exp2f(m[r] - mn);
            float p = mn == -INFINITY ? 0.0f : exp2f(sc - mn);
            l[r] = l[r] * alpha + dwsum(p);
            m[r] = mn;
#pragma unroll
            for (int c = 0; c < VC; c++) acc[r][c] *= alpha;
            P[r * 32 + lane] = p;
        }
        __syncwarp();
        const T *vcol = Vw + lane * VC;
#pragma unroll 4
        for (int jj = 0; jj < 32; jj += 4) {
            float4 p4[GM];
#pragma unroll
            for (int r = 0; r < GM; r++) p4[r] = *reinterpret_cast<const float4 *>(P + r * 32 + jj);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                float v[VC];
                ld_vc<VC, T>(v, vcol + (jj + q) * VS);
#pragma unroll
                for (int r = 0; r < GM; r++) {
                    float p = q == 0 ? p4[r].x : q == 1 ? p4[r].y : q == 2 ? p4[r].z : p4[r].w;
#pragma unroll
                    for (int c = 0; c < VC; c++) acc[r][c] += p * v[c];
                }
            }
        }
        __syncwarp();
    }

    /* merge the warps: rescale each to the block's max (Os reuses the V rows) */
    __syncthreads();
    const int64_t d0v = (int64_t)lane * VC;
#pragma unroll
    for (int r = 0; r < GM; r++) {
        bool bad = __any_sync(0xffffffffu, nan[r]);
        if (lane == 0) Ms[warp * GM + r] = bad ? NAN : m[r], Ls[warp * GM + r] = l[r];
#pragma unroll
        for (int c = 0; c < VC; c++) Os[(warp * GM + r) * VP + d0v + c] = acc[r][c];
    }
    __syncthreads();
    const int64_t R = a.B * a.Hq;
    float *part = a.part;
    for (int64_t t = threadIdx.x; t < G * VP; t += blockDim.x) {
        int64_t r = t / VP, d = t % VP;
        float mx = -INFINITY, lsum = 0.0f, o = 0.0f;
        bool bad = L < 0;
        for (int w = 0; w < DC_WARPS; w++) {
            float mw = Ms[w * GM + r];
            if (mw != mw) bad = true;
            else mx = fmaxf(mx, mw);
        }
        for (int w = 0; w < DC_WARPS; w++) {
            float mw = Ms[w * GM + r];
            float f = mw != mw || mw == -INFINITY ? 0.0f : exp2f(mw - mx);
            lsum += f * Ls[w * GM + r];
            o += f * Os[(w * GM + r) * VP + d];
        }
        int64_t orow = b * a.Hq + kvh * G + r;
        if (S == 1) {
            if (d < Dv) a.out[orow * Dv + d] = bad ? NAN : (lsum > 0 ? o / lsum : 0.0f);
            continue;
        }
        float *pp = part + (sg * R + orow) * (Dv + 2);
        if (d < Dv) pp[d] = o;
        if (d == 0) pp[Dv] = bad ? NAN : mx, pp[Dv + 1] = lsum;
    }
    if (S == 1) return;

    /* the last block of this KV head to finish merges the segments */
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned done = atomicAdd(&a.count[blockIdx.y], 1u);
        last = done == (unsigned)S - 1;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    /* one pass per output element, rescaling as the max grows: every segment's loads of a
     * step of 8 are in flight together */
    for (int64_t t = threadIdx.x; t < G * Dv; t += blockDim.x) {
        int64_t r = t / Dv, d = t % Dv, orow = b * a.Hq + kvh * G + r;
        float mx = -INFINITY, lsum = 0.0f, o = 0.0f;
        bool bad = false;
#pragma unroll 8
        for (int64_t k = 0; k < S; k++) {
            const float *pp = part + (k * R + orow) * (Dv + 2);
            float mk = __ldcg(pp + Dv), lk = __ldcg(pp + Dv + 1), ok = __ldcg(pp + d);
            if (mk != mk) bad = true;
            if (!(mk > -INFINITY)) continue; /* NaN or a segment without keys */
            float mn = fmaxf(mx, mk), fo = exp2f(mx - mn), fk = exp2f(mk - mn);
            lsum = lsum * fo + lk * fk, o = o * fo + ok * fk, mx = mn;
        }
        a.out[orow * Dv + d] = bad ? NAN : (lsum > 0 ? o / lsum : 0.0f);
    }
    if (threadIdx.x == 0) a.count[blockIdx.y] = 0; /* ready for a replay without the host's zeroing too */
}

template <int GM, int VC, typename T> cudaError_t dc_launch(const nn_sdpa *a, cudaStream_t s)
{
    size_t sm = dc_smem<GM, VC, T>(a->D);
    if (sm > 48 * 1024) {
        /* once, for the largest D this instance may see (256) */
        static const cudaError_t once = cudaFuncSetAttribute(sdpa_dec_kernel<GM, VC, T>,
                                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                             (int)dc_smem<GM, VC, T>(256));
        if (once != cudaSuccess) return once;
    }
    size_t e = sizeof(T);
    bool vec = (uintptr_t)a->k % 16 == 0 && (uintptr_t)a->v % 16 == 0;
    for (int i = 0; i < 3; i++) vec = vec && (a->ks[i] * e) % 16 == 0 && (a->vs[i] * e) % 16 == 0;
    dim3 grid((unsigned)a->n_split, (unsigned)(a->B * a->Hkv));
    sdpa_dec_kernel<GM, VC, T><<<grid, DC_WARPS * 32, sm, s>>>(*a, vec);
    return cudaGetLastError();
}

template <typename T> cudaError_t dc_dispatch(const nn_sdpa *a, cudaStream_t s)
{
    int64_t G = a->Hq / a->Hkv, Dv = a->Dv;
    if (G <= 4) return Dv <= 64 ? dc_launch<4, 2, T>(a, s) : Dv <= 128 ? dc_launch<4, 4, T>(a, s) : dc_launch<4, 8, T>(a, s);
    if (G <= 8) return Dv <= 64 ? dc_launch<8, 2, T>(a, s) : Dv <= 128 ? dc_launch<8, 4, T>(a, s) : dc_launch<8, 8, T>(a, s);
    return Dv <= 64 ? dc_launch<16, 2, T>(a, s) : dc_launch<16, 4, T>(a, s);
}

} // namespace

extern "C" int nn_sdpa_dec_ok_old(int64_t Hq, int64_t Hkv, int64_t Tq, int64_t D, int64_t Dv)
{
    int64_t G = Hkv > 0 ? Hq / Hkv : 0;
    return Tq == 1 && G >= 1 && D <= 256 && Dv <= 256 && (G <= 8 || (G <= 16 && Dv <= 128));
}

extern "C" int nn_sdpa_dec_splits_old(int64_t B, int64_t Hkv, int64_t Tk, int sm_count)
{
    /* one block per DC_KPB keys, at most ~2 blocks per SM (longer segments past that) */
    int64_t n = (Tk + DC_KPB - 1) / DC_KPB, cap = 2 * (int64_t)sm_count / (B * Hkv > 0 ? B * Hkv : 1);
    if (n > cap) n = cap;
    if (n > NN_SDPA_MAX_SPLIT) n = NN_SDPA_MAX_SPLIT;
    return n < 1 ? 1 : (int)n;
}

extern "C" cudaError_t nn_sdpa_dec_run_old(const nn_sdpa *a, cudaStream_t s)
{
    if (!nn_sdpa_dec_ok_old(a->Hq, a->Hkv, a->Tq, a->D, a->Dv) || a->kdt != a->vdt || a->n_split < 1 ||
        (a->n_split > 1 && (!a->part || !a->count)) || a->B * a->Hkv > 65535)
        return cudaErrorInvalidValue;
    return a->kdt == CT_F16 ? dc_dispatch<__half>(a, s) : dc_dispatch<float>(a, s);
}
