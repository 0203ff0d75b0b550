/* Decode attention (Tq = 1): the G = Hq / Hkv query heads of a KV head share every K/V row
 * the block reads.
 *
 * The Tk slots of the cache are cut into n_split segments (nn_sdpa_dec_splits: ~one chunk
 * of DN_KC keys each, more when the grid would pass two waves), one block per segment and
 * KV head, so the grid depends on Tk only: a recorded graph replays it at every position.
 * Each block reads the attended length first; the segments that hold no visible key (past
 * the length, before a window) exit at once, and the n_act that do count themselves: the
 * last of them to finish (a counter per KV head, zero between launches: that block resets
 * it) merges the partials in one pass, so one kernel does it all and long caches cost
 * little. A lone segment writes the output itself.
 *
 * In a block (8 warps) a chunk of keys is staged in shared memory with 16-byte cp.async
 * loads (K rows padded so that a warp reading 32 rows at one offset hits every bank);
 * every thread scores one key against its query heads (or a part of D when there are few
 * heads, summed in the softmax), each warp folds one head's chunk of scores into that
 * head's online softmax (base 2: Q carries scale * log2 e), and every thread accumulates
 * P V for pairs of output elements that it owns. Why this shape: at decode the K/V bytes
 * are few (600 positions x 4 KV heads x 64 x f16: 0.6 MB), so the time is latency: a
 * serial chain per thread of ~D + ~KC multiply-adds between three global round trips
 * (length, K/V, partials + counter), with the chunk's loads all in flight together.
 *
 * Semantics are sdpa_kernel's (attention.cu): keys [L - window, L - 1] (all of [0, L) without
 * a window), the mask added, a NaN score makes the row NaN, no visible key gives zeros, a
 * length outside [0, Tk] gives NaN. Arithmetic is f32 throughout. */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "backends/cuda/nn_kernels.h"

namespace {

constexpr int DN_T = 256;   /* threads per block */
constexpr int DN_GMAX = 16; /* query heads per KV head (nn_sdpa_dec_ok) */
constexpr int DN_OPT = 4;   /* output pairs per thread at most: G * Dv / 2 <= 1024 (nn_sdpa_dec_ok) */
constexpr float DN_LOG2E = 1.4426950408889634f;

/* keys per chunk: 64 rows of K and V up to D 128, 32 above (shared memory, registers) */
__host__ __device__ constexpr int dn_kc(int64_t D, int64_t Dv) { return D > 128 || Dv > 128 ? 32 : 64; }

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

__device__ __forceinline__ void cp16(void *dst, const void *src)
{
#if __CUDA_ARCH__ >= 800
    unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
#else
    *reinterpret_cast<uint4 *>(dst) = *reinterpret_cast<const uint4 *>(src);
#endif
}
__device__ __forceinline__ void cp_wait()
{
#if __CUDA_ARCH__ >= 800
    asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;\n" ::: "memory");
#endif
}

/* Shared memory (offsets in bytes, each 16-aligned): K rows [KC][kr] (kr = D rounded up to
 * 16 bytes, + 16 bytes of pad), V rows [KC][vr] (Dv rounded up to 16 bytes), Q [G][kd]
 * floats (kd = D rounded as K's, zeros past D), scores [DS][G][KC] floats (the first
 * [G][KC] become P), then alpha, m, l per head. */
struct dn_lay {
    int kd, kr, vr;
    unsigned k, v, q, s, al, m, l, bytes;
};
template <typename T> __host__ __device__ dn_lay dn_layout(int64_t D, int64_t Dv, int64_t G)
{
    constexpr int EV = 16 / (int)sizeof(T);
    const int KC = dn_kc(D, Dv);
    dn_lay y;
    y.kd = (int)((D + EV - 1) / EV * EV);
    y.kr = y.kd + EV;
    y.vr = (int)((Dv + EV - 1) / EV * EV);
    y.k = 0;
    y.v = y.k + (unsigned)(sizeof(T) * KC * y.kr);
    y.q = y.v + (unsigned)(sizeof(T) * KC * y.vr);
    y.s = y.q + (unsigned)(sizeof(float) * G * y.kd);
    y.al = y.s + (unsigned)(sizeof(float) * DN_GMAX * KC); /* DS * G <= max(G, DN_T / KC) <= 16 */
    y.m = y.al + sizeof(float) * DN_GMAX;
    y.l = y.m + sizeof(float) * DN_GMAX;
    y.bytes = y.l + sizeof(float) * DN_GMAX;
    return y;
}

__device__ __forceinline__ int64_t dn_attended(const nn_sdpa &a)
{
    if (!a.len) return a.Tk;
    int64_t L = a.ldt == CT_I32 ? (int64_t)__ldcg((const int32_t *)a.len) : (int64_t)__ldcg((const long long *)a.len);
    return L < 0 || L > a.Tk ? -1 : L;
}

template <typename T> __device__ __forceinline__ void unpack(float *f, uint4 w)
{
    if constexpr (sizeof(T) == 2) {
        const __half2 *h = reinterpret_cast<const __half2 *>(&w);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 t = __half22float2(h[i]);
            f[2 * i] = t.x, f[2 * i + 1] = t.y;
        }
    } else {
        f[0] = __uint_as_float(w.x), f[1] = __uint_as_float(w.y), f[2] = __uint_as_float(w.z), f[3] = __uint_as_float(w.w);
    }
}

template <typename T> __device__ __forceinline__ float2 ld2(const T *p)
{
    if constexpr (sizeof(T) == 2) return __half22float2(*reinterpret_cast<const __half2 *>(p));
    else return *reinterpret_cast<const float2 *>(p);
}

/* Rows j0 .. j0 + nk - 1 of a K or V head (row stride rs elements, n valid elements each)
 * into shared rows of stride sr, zeros from n to the row's rounded width w. */
template <typename T>
__device__ __forceinline__ void stage(T *dst, int sr, int w, const T *src, int64_t rs, int64_t n, int nk, bool vec)
{
    constexpr int EV = 16 / (int)sizeof(T);
    if (vec) { /* n == w */
        const int wpr = w / EV, nw = nk * wpr;
        for (int t = threadIdx.x; t < nw; t += DN_T) {
            int j = t / wpr, c = t - j * wpr;
            cp16(dst + j * sr + c * EV, src + j * rs + c * EV);
        }
        return;
    }
    for (int t = threadIdx.x; t < nk * w; t += DN_T) {
        int j = t / w, d = t - j * w;
        T x;
        if constexpr (sizeof(T) == 2) x = d < n ? src[j * rs + d] : __float2half(0.0f);
        else x = d < n ? src[j * rs + d] : 0.0f;
        dst[j * sr + d] = x;
    }
}

template <typename T, int KC> __global__ void __launch_bounds__(DN_T) sdpa_dec(nn_sdpa a, bool veck, bool vecv)
{
    extern __shared__ __align__(16) unsigned char dn_sm[];
    constexpr int EV = 16 / (int)sizeof(T);
    constexpr int HL = DN_T / KC;       /* threads per key in the scoring */
    constexpr int HPT = DN_GMAX / HL;   /* heads a thread scores at most */
    constexpr int QPT = DN_GMAX * 256 / DN_T;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int G = (int)(a.Hq / a.Hkv), D = (int)a.D, Dv = (int)a.Dv;
    const dn_lay y = dn_layout<T>(D, Dv, G);
    T *Ks = reinterpret_cast<T *>(dn_sm + y.k), *Vs = reinterpret_cast<T *>(dn_sm + y.v);
    float *Qs = reinterpret_cast<float *>(dn_sm + y.q), *Sc = reinterpret_cast<float *>(dn_sm + y.s);
    float *Al = reinterpret_cast<float *>(dn_sm + y.al), *Mh = reinterpret_cast<float *>(dn_sm + y.m);
    float *Lh = reinterpret_cast<float *>(dn_sm + y.l);
    const int64_t kvh = blockIdx.y % a.Hkv, b = blockIdx.y / a.Hkv, sg = blockIdx.x, S = a.n_split;
    const int64_t R = a.B * a.Hq, row0 = b * a.Hq + kvh * G;

    /* Q (scaled, zeros past D) in flight together with the length */
    const float qscale = a.scale * DN_LOG2E;
    float qv[QPT];
#pragma unroll
    for (int u = 0; u < QPT; u++) {
        int t = tid + u * DN_T, g = t / y.kd, d = t - g * y.kd;
        qv[u] = g < G && d < D ? a.q[b * a.qs[0] + (kvh * G + g) * a.qs[1] + d * a.qs[3]] : 0.0f;
    }
    const int64_t L = dn_attended(a);
    if (L <= 0) { /* no visible key: zeros; a bad length: NaN (segment 0's block writes) */
        if (sg == 0)
            for (int t = tid; t < G * Dv; t += DN_T) a.out[(row0 + t / Dv) * Dv + t % Dv] = L == 0 ? 0.0f : NAN;
        return;
    }
    const int64_t seg = (a.Tk + S - 1) / S, vlo = a.window > 0 && L > a.window ? L - a.window : 0, vhi = L - 1;
    const int64_t klo = vlo / seg, khi = vhi / seg, n_act = khi - klo + 1;
    if (sg < klo || sg > khi) return;
    const int64_t jlo = sg * seg > vlo ? sg * seg : vlo, jhi = sg * seg + seg - 1 < vhi ? sg * seg + seg - 1 : vhi;
    const T *kb = (const T *)a.k + b * a.ks[0] + kvh * a.ks[1];
    const T *vb = (const T *)a.v + b * a.vs[0] + kvh * a.vs[1];

    stage<T>(Ks, y.kr, y.kd, kb + jlo * a.ks[2], a.ks[2], D, (int)(jhi - jlo + 1 < KC ? jhi - jlo + 1 : KC), veck);
    stage<T>(Vs, y.vr, y.vr, vb + jlo * a.vs[2], a.vs[2], Dv, (int)(jhi - jlo + 1 < KC ? jhi - jlo + 1 : KC), vecv);
#pragma unroll
    for (int u = 0; u < QPT; u++)
        if (tid + u * DN_T < G * y.kd) Qs[tid + u * DN_T] = qv[u] * qscale;

    /* the heads of this warp's softmax (w, w + 8), their running max / sum / NaN seen */
    float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f};
    bool bad_r[2] = {false, false};
    float2 acc[DN_OPT];
#pragma unroll
    for (int i = 0; i < DN_OPT; i++) acc[i] = make_float2(0.0f, 0.0f);
    /* few heads: split D over the spare scoring threads (DS parts, a power of two) */
    const int DS = HL / G >= 8 ? 8 : HL / G >= 4 ? 4 : HL / G >= 2 ? 2 : 1;
    const int wk = y.kd / EV, np = y.vr / 2;

    for (int64_t c0 = jlo; c0 <= jhi; c0 += KC) {
        const int nk = (int)(jhi - c0 + 1 < KC ? jhi - c0 + 1 : KC);
        if (c0 != jlo) {
            __syncthreads(); /* the last chunk's readers are done */
            stage<T>(Ks, y.kr, y.kd, kb + c0 * a.ks[2], a.ks[2], D, nk, veck);
            stage<T>(Vs, y.vr, y.vr, vb + c0 * a.vs[2], a.vs[2], Dv, nk, vecv);
        }
        cp_wait();
        __syncthreads();

        /* scores: key j, heads h0, h0 + hstep, ..., 16-byte words ds, ds + DS, ... of D */
        {
            const int j = tid % KC, hl = tid / KC, ds = hl % DS, h0 = hl / DS, hstep = HL / DS;
            if (j < nk) {
                float s[HPT];
#pragma unroll
                for (int i = 0; i < HPT; i++) s[i] = 0.0f;
                const T *kr = Ks + j * y.kr;
                for (int c = ds; c < wk; c += DS) {
                    float kf[EV];
                    unpack<T>(kf, *reinterpret_cast<const uint4 *>(kr + c * EV));
#pragma unroll
                    for (int i = 0; i < HPT; i++) {
                        int g = h0 + i * hstep;
                        if (g < G) {
                            const float4 *q4 = reinterpret_cast<const float4 *>(Qs + g * y.kd + c * EV);
#pragma unroll
                            for (int e = 0; e < EV / 4; e++) {
                                float4 q = q4[e];
                                s[i] += q.x * kf[4 * e] + q.y * kf[4 * e + 1] + q.z * kf[4 * e + 2] + q.w * kf[4 * e + 3];
                            }
                        }
                    }
                }
#pragma unroll
                for (int i = 0; i < HPT; i++) {
                    int g = h0 + i * hstep;
                    if (g < G) Sc[(ds * G + g) * KC + j] = s[i];
                }
            }
        }
        __syncthreads();

        /* softmax: warp w folds heads w and w + 8 (P over the scores, alpha per head) */
#pragma unroll
        for (int gi = 0; gi < 2; gi++) {
            const int g = warp + 8 * gi;
            if (g >= G) break;
            float sv[KC / 32], cmax = -INFINITY;
#pragma unroll
            for (int u = 0; u < KC / 32; u++) {
                int j = lane + 32 * u;
                float s = -INFINITY;
                if (j < nk) {
                    s = Sc[g * KC + j];
                    for (int p = 1; p < DS; p++) s += Sc[(p * G + g) * KC + j];
                    if (a.mask) s += a.mask[b * a.ms[0] + (kvh * G + g) * a.ms[1] + (c0 + j) * a.ms[3]] * DN_LOG2E;
                    if (s != s) bad_r[gi] = true, s = -INFINITY;
                }
                sv[u] = s;
                cmax = fmaxf(cmax, s);
            }
            const float mn = fmaxf(m_r[gi], dwmax(cmax));
            const float alpha = mn == -INFINITY ? 1.0f : exp2f(m_r[gi] - mn);
            float ps = 0.0f;
#pragma unroll
            for (int u = 0; u < KC / 32; u++) {
                float p = mn == -INFINITY ? 0.0f : exp2f(sv[u] - mn);
                Sc[g * KC + lane + 32 * u] = p;
                ps += p;
            }
            l_r[gi] = l_r[gi] * alpha + dwsum(ps);
            m_r[gi] = mn;
            if (lane == 0) Al[g] = alpha;
        }
        __syncthreads();

        /* P V: output pairs tid, tid + DN_T, ... of [G][vr / 2] */
        {
            float al[DN_OPT];
            const float *pg[DN_OPT];
            const T *vc[DN_OPT];
#pragma unroll
            for (int i = 0; i < DN_OPT; i++) {
                int p = tid + i * DN_T, g = p / np;
                bool on = g < G;
                al[i] = on ? Al[g] : 1.0f;
                pg[i] = Sc + (on ? g : 0) * KC;
                vc[i] = Vs + 2 * (p - g * np) * (on ? 1 : 0);
                acc[i].x *= al[i], acc[i].y *= al[i];
            }
            const int nt = (G * np - tid + DN_T - 1) / DN_T; /* pairs this thread owns */
#pragma unroll 2
            for (int j = 0; j < nk; j++) {
#pragma unroll
                for (int i = 0; i < DN_OPT; i++) {
                    if (i < nt) {
                        float pj = pg[i][j];
                        float2 v = ld2<T>(vc[i] + j * y.vr);
                        acc[i].x += pj * v.x, acc[i].y += pj * v.y;
                    }
                }
            }
        }
    }

    /* each head's max (NaN when a score was NaN) and sum, for every thread */
#pragma unroll
    for (int gi = 0; gi < 2; gi++) {
        const int g = warp + 8 * gi;
        if (g >= G) break;
        bool bad = __any_sync(0xffffffffu, bad_r[gi]);
        if (lane == 0) Mh[g] = bad ? NAN : m_r[gi], Lh[g] = l_r[gi];
    }
    __syncthreads();

    float *part = a.part;
#pragma unroll
    for (int i = 0; i < DN_OPT; i++) {
        int p = tid + i * DN_T, g = p / np, d = 2 * (p - g * np);
        if (g >= G) break;
        float mh = Mh[g], lh = Lh[g];
        if (n_act == 1) {
            float inv = lh > 0.0f ? 1.0f / lh : 0.0f;
            float *o = a.out + (row0 + g) * Dv;
            if (d < Dv) o[d] = mh != mh ? NAN : acc[i].x * inv;
            if (d + 1 < Dv) o[d + 1] = mh != mh ? NAN : acc[i].y * inv;
            continue;
        }
        float *pp = part + (sg * R + row0 + g) * (Dv + 2);
        if (d < Dv) pp[d] = acc[i].x;
        if (d + 1 < Dv) pp[d + 1] = acc[i].y;
        if (d == 0) pp[Dv] = mh, pp[Dv + 1] = lh;
    }
    if (n_act == 1) return;

    /* the last active block of this KV head merges the segments */
    __shared__ bool last;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
        unsigned done = atomicAdd(&a.count[blockIdx.y], 1u);
        last = done == (unsigned)n_act - 1;
        if (last) a.count[blockIdx.y] = 0; /* every other block has counted: ready for the next launch */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    /* one pass per output pair, rescaling as the max grows: 4 segments' loads in flight */
    const int npo = (Dv + 1) / 2;
    const bool even = Dv % 2 == 0;
    for (int t = tid; t < G * npo; t += DN_T) {
        const int g = t / npo, d = 2 * (t - g * npo);
        const int64_t orow = row0 + g;
        float mx = -INFINITY, ls = 0.0f, o0 = 0.0f, o1 = 0.0f;
        bool bad = false;
#pragma unroll 4
        for (int64_t k = klo; k <= khi; k++) {
            const float *pp = part + (k * R + orow) * (Dv + 2);
            float mk = __ldcg(pp + Dv), lk = __ldcg(pp + Dv + 1);
            float2 ok;
            if (even) ok = __ldcg(reinterpret_cast<const float2 *>(pp + d));
            else ok = make_float2(__ldcg(pp + d), d + 1 < Dv ? __ldcg(pp + d + 1) : 0.0f);
            if (mk != mk) bad = true;
            if (!(mk > -INFINITY)) continue; /* NaN, or no key with a finite score */
            float mn = fmaxf(mx, mk), fo = exp2f(mx - mn), fk = exp2f(mk - mn);
            ls = ls * fo + lk * fk, o0 = o0 * fo + ok.x * fk, o1 = o1 * fo + ok.y * fk, mx = mn;
        }
        float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
        float *o = a.out + orow * Dv;
        o[d] = bad ? NAN : o0 * inv;
        if (d + 1 < Dv) o[d + 1] = bad ? NAN : o1 * inv;
    }
}

template <typename T, int KC> cudaError_t dn_launch(const nn_sdpa *a, cudaStream_t s)
{
    const int64_t G = a->Hq / a->Hkv;
    const size_t sm = dn_layout<T>(a->D, a->Dv, G).bytes;
    if (sm > 48 * 1024) {
        /* once, for the largest shape this instance may see */
        static const cudaError_t once =
            cudaFuncSetAttribute(sdpa_dec<T, KC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)dn_layout<T>(KC == 64 ? 128 : 256, KC == 64 ? 128 : 256, DN_GMAX).bytes);
        if (once != cudaSuccess) return once;
    }
    const size_t e = sizeof(T);
    bool veck = (uintptr_t)a->k % 16 == 0 && (a->D * e) % 16 == 0, vecv = (uintptr_t)a->v % 16 == 0 && (a->Dv * e) % 16 == 0;
    for (int i = 0; i < 3; i++) veck = veck && (a->ks[i] * e) % 16 == 0, vecv = vecv && (a->vs[i] * e) % 16 == 0;
    dim3 grid((unsigned)a->n_split, (unsigned)(a->B * a->Hkv));
    sdpa_dec<T, KC><<<grid, DN_T, sm, s>>>(*a, veck, vecv);
    return cudaGetLastError();
}

template <typename T> cudaError_t dn_dispatch(const nn_sdpa *a, cudaStream_t s)
{
    return dn_kc(a->D, a->Dv) == 64 ? dn_launch<T, 64>(a, s) : dn_launch<T, 32>(a, s);
}

} // namespace

extern "C" int nn_sdpa_dec_ok(int64_t Hq, int64_t Hkv, int64_t Tq, int64_t D, int64_t Dv)
{
    int64_t G = Hkv > 0 ? Hq / Hkv : 0;
    return Tq == 1 && G >= 1 && G <= DN_GMAX && D >= 1 && D <= 256 && Dv >= 1 && Dv <= 256 &&
           G * ((Dv + 7) / 8 * 4) <= DN_OPT * DN_T;
}

extern "C" int nn_sdpa_dec_splits(int64_t B, int64_t Hkv, int64_t Tk, int64_t D, int64_t Dv, int sm_count)
{
    /* a chunk of keys per segment, while the grid stays within ~2 blocks per SM */
    const int64_t kc = dn_kc(D, Dv), heads = B * Hkv > 0 ? B * Hkv : 1;
    int64_t n = (Tk + kc - 1) / kc, cap = 2 * (int64_t)sm_count / heads;
    if (n > cap) n = cap;
    if (n > NN_SDPA_DEC_MAX_SPLIT) n = NN_SDPA_DEC_MAX_SPLIT;
    return n < 1 ? 1 : (int)n;
}

extern "C" cudaError_t nn_sdpa_dec_run(const nn_sdpa *a, cudaStream_t s)
{
    if (!nn_sdpa_dec_ok(a->Hq, a->Hkv, a->Tq, a->D, a->Dv) || a->kdt != a->vdt || a->n_split < 1 ||
        a->n_split > NN_SDPA_DEC_MAX_SPLIT || (a->n_split > 1 && (!a->part || !a->count)) || a->B * a->Hkv > 65535)
        return cudaErrorInvalidValue;
    return a->kdt == CT_F16 ? dn_dispatch<__half>(a, s) : dn_dispatch<float>(a, s);
}
