/* Decode attention (Tq = 1): the G = Hq / Hkv query heads of a KV head share every K/V row
 * the block reads.
 *
 * The keys of a cache of Tk slots are cut into n_split segments of DC_KPB (or more) keys,
 * one block each, so the grid (n_split, B * Hkv) depends on Tk and never on the attended
 * length read on the device: a recorded graph replays it at every position, and segments
 * past the length only take part in the merge. In a block each warp takes chunks of 32
 * keys, one per lane: the lane scores its key against the G queries (Q pre-scaled by
 * scale * log2 e in shared memory), the warp folds the chunk into its online softmax
 * (base 2) and accumulates P V with each lane owning VC consecutive output elements. The
 * four warps merge in shared memory; with several segments each block writes its partial
 * (acc, max, sum) and the last block of a KV head to finish (a counter per KV head, zeroed
 * by the host before the launch) merges them, so one kernel does it all.
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

template <typename T> __device__ __forceinline__ float dld(const T *p);
template <> __device__ __forceinline__ float dld<float>(const float *p) { return *p; }
template <> __device__ __forceinline__ float dld<__half>(const __half *p) { return __half2float(*p); }

/* N consecutive elements (N = 2, 4 or 8) into f; vec: f16 rows aligned to 16 bytes. */
template <int N, typename T> __device__ __forceinline__ void dload(float *f, const T *p, bool vec)
{
    if constexpr (sizeof(T) == 2) {
        if (vec) {
            __half2 x[N / 2];
            if constexpr (N == 8) *reinterpret_cast<uint4 *>(x) = *reinterpret_cast<const uint4 *>(p);
            else if constexpr (N == 4) *reinterpret_cast<uint2 *>(x) = *reinterpret_cast<const uint2 *>(p);
            else x[0] = *reinterpret_cast<const __half2 *>(p);
#pragma unroll
            for (int i = 0; i < N / 2; i++) {
                float2 t = __half22float2(x[i]);
                f[2 * i] = t.x, f[2 * i + 1] = t.y;
            }
            return;
        }
    }
#pragma unroll
    for (int i = 0; i < N; i++) f[i] = dld<T>(p + i);
}

__device__ __forceinline__ int64_t dc_attended(const nn_sdpa &a)
{
    if (!a.len) return a.Tk;
    int64_t L = a.ldt == CT_I32 ? (int64_t) * (const int32_t *)a.len : *(const int64_t *)a.len;
    return L < 0 || L > a.Tk ? -1 : L;
}

/* GM >= G query heads per block, VC = output elements per lane (Dv <= 32 * VC). */
template <int GM, int VC, typename T> __global__ void __launch_bounds__(DC_WARPS * 32) sdpa_dec_kernel(nn_sdpa a, bool vec)
{
    extern __shared__ __align__(16) float dc_sm[];
    const int64_t D = a.D, Dv = a.Dv, G = a.Hq / a.Hkv, S = a.n_split;
    float *Qs = dc_sm;                 /* [GM][D] */
    float *Ps = Qs + GM * D;           /* [warps][GM][32] */
    float *Ms = Ps + DC_WARPS * GM * 32; /* [warps][GM] max, then sum */
    float *Ls = Ms + DC_WARPS * GM;
    float *Os = Ls + DC_WARPS * GM;    /* [warps][GM][32 * VC] */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t kvh = blockIdx.y % a.Hkv, b = blockIdx.y / a.Hkv, sg = blockIdx.x;
    const int64_t L = dc_attended(a);

    /* keys this block scores: its segment within the visible range */
    int64_t seg = (a.Tk + S - 1) / S, jlo = sg * seg, jhi = jlo + seg - 1;
    int64_t vlo = a.window > 0 ? L - a.window : 0, vhi = L - 1; /* causal with Tq = 1: all of [0, L) */
    if (jlo < vlo) jlo = vlo;
    if (jhi > vhi) jhi = vhi;

    const float qscale = a.scale * DC_LOG2E;
    for (int64_t t = threadIdx.x; t < GM * D; t += blockDim.x) {
        int64_t r = t / D, d = t % D;
        Qs[t] = r < G ? a.q[b * a.qs[0] + (kvh * G + r) * a.qs[1] + d * a.qs[3]] * qscale : 0.0f;
    }
    __syncthreads();

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
    const int64_t d0 = (int64_t)lane * VC;
    for (int64_t c0 = jlo + (int64_t)warp * 32; L >= 0 && c0 <= jhi; c0 += DC_KPB) {
        const int64_t j = c0 + lane;
        const bool valid = j <= jhi;
        float s[GM];
#pragma unroll
        for (int r = 0; r < GM; r++) s[r] = 0.0f;
        if (valid) {
            const T *kr = kb + j * a.ks[2];
            for (int64_t d = 0; d < D; d += 8) {
                float k8[8];
                if (d + 8 <= D) {
                    dload<8, T>(k8, kr + d, vec);
                } else {
#pragma unroll
                    for (int i = 0; i < 8; i++) k8[i] = d + i < D ? dld<T>(kr + d + i) : 0.0f;
                }
#pragma unroll
                for (int r = 0; r < GM; r++) {
                    const float *q = Qs + r * D + d;
                    float t = 0.0f;
#pragma unroll
                    for (int i = 0; i < 8; i++) t += (d + i < D ? q[i] : 0.0f) * k8[i];
                    s[r] += t;
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
        const int64_t n = jhi - c0 + 1 < 32 ? jhi - c0 + 1 : 32;
        if (d0 < Dv) {
            const bool full = d0 + VC <= Dv;
            for (int64_t jj = 0; jj < n; jj++) {
                float v[VC];
                const T *vr = vb + (c0 + jj) * a.vs[2] + d0;
                if (full) {
                    dload<VC, T>(v, vr, vec);
                } else {
#pragma unroll
                    for (int c = 0; c < VC; c++) v[c] = d0 + c < Dv ? dld<T>(vr + c) : 0.0f;
                }
#pragma unroll
                for (int r = 0; r < GM; r++) {
                    float p = P[r * 32 + jj];
#pragma unroll
                    for (int c = 0; c < VC; c++) acc[r][c] += p * v[c];
                }
            }
        }
        __syncwarp();
    }

    /* merge the warps: rescale each to the block's max */
#pragma unroll
    for (int r = 0; r < GM; r++) {
        bool bad = __any_sync(0xffffffffu, nan[r]);
        if (lane == 0) Ms[warp * GM + r] = bad ? NAN : m[r], Ls[warp * GM + r] = l[r];
#pragma unroll
        for (int c = 0; c < VC; c++) Os[(warp * GM + r) * 32 * VC + d0 + c] = acc[r][c];
    }
    __syncthreads();
    const int64_t R = a.B * a.Hq, W = 32 * VC;
    float *part = a.part;
    for (int64_t t = threadIdx.x; t < G * W; t += blockDim.x) {
        int64_t r = t / W, d = t % W;
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
            o += f * Os[(w * GM + r) * W + d];
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
    for (int64_t t = threadIdx.x; t < G * Dv; t += blockDim.x) {
        int64_t r = t / Dv, d = t % Dv, orow = b * a.Hq + kvh * G + r;
        float mx = -INFINITY;
        bool bad = false;
        for (int64_t k = 0; k < S; k++) {
            float mk = __ldcg(part + (k * R + orow) * (Dv + 2) + Dv);
            if (mk != mk) bad = true;
            else mx = fmaxf(mx, mk);
        }
        float lsum = 0.0f, o = 0.0f;
        for (int64_t k = 0; k < S; k++) {
            const float *pp = part + (k * R + orow) * (Dv + 2);
            float mk = __ldcg(pp + Dv);
            if (mk != mk || mk == -INFINITY) continue;
            float f = exp2f(mk - mx);
            lsum += f * __ldcg(pp + Dv + 1);
            o += f * __ldcg(pp + d);
        }
        a.out[orow * Dv + d] = bad ? NAN : (lsum > 0 ? o / lsum : 0.0f);
    }
    if (threadIdx.x == 0) a.count[blockIdx.y] = 0; /* ready for a replay without the host's zeroing too */
}

size_t dc_smem(int GM, int VC, int64_t D)
{
    return sizeof(float) * (size_t)(GM * D + DC_WARPS * GM * 32 + 2 * DC_WARPS * GM + DC_WARPS * GM * 32 * VC);
}

template <int GM, int VC, typename T> cudaError_t dc_launch(const nn_sdpa *a, cudaStream_t s)
{
    size_t sm = dc_smem(GM, VC, a->D);
    if (sm > 48 * 1024) {
        /* once, for the largest D this instance may see (256) */
        static const cudaError_t once = cudaFuncSetAttribute(sdpa_dec_kernel<GM, VC, T>,
                                                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                             (int)dc_smem(GM, VC, 256));
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

extern "C" int nn_sdpa_dec_ok(int64_t Hq, int64_t Hkv, int64_t Tq, int64_t D, int64_t Dv)
{
    int64_t G = Hkv > 0 ? Hq / Hkv : 0;
    return Tq == 1 && G >= 1 && D <= 256 && Dv <= 256 && (G <= 8 || (G <= 16 && Dv <= 128));
}

extern "C" int nn_sdpa_dec_splits(int64_t B, int64_t Hkv, int64_t Tk, int sm_count)
{
    /* one block per DC_KPB keys, at most ~2 blocks per SM (longer segments past that) */
    int64_t n = (Tk + DC_KPB - 1) / DC_KPB, cap = 2 * (int64_t)sm_count / (B * Hkv > 0 ? B * Hkv : 1);
    if (n > cap) n = cap;
    if (n > NN_SDPA_MAX_SPLIT) n = NN_SDPA_MAX_SPLIT;
    return n < 1 ? 1 : (int)n;
}

extern "C" cudaError_t nn_sdpa_dec_run(const nn_sdpa *a, cudaStream_t s)
{
    if (!nn_sdpa_dec_ok(a->Hq, a->Hkv, a->Tq, a->D, a->Dv) || a->kdt != a->vdt || a->n_split < 1 ||
        (a->n_split > 1 && (!a->part || !a->count)) || a->B * a->Hkv > 65535)
        return cudaErrorInvalidValue;
    return a->kdt == CT_F16 ? dc_dispatch<__half>(a, s) : dc_dispatch<float>(a, s);
}
