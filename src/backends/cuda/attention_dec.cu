/* Decode attention (Tq = 1): the G = Hq / Hkv query heads of a KV head share every K/V row
 * the block reads. This SIMT kernel takes the shapes attention_dec_tc.cu (tensor cores: f16
 * caches, D = Dv = 64, 128 or 256, G <= 8) leaves: f32 caches, other head dims, D != Dv, G
 * up to 16; nn_sdpa_dec_run and nn_sdpa_dec_splits at the end pick between the two.
 *
 * The Tk slots of the cache are cut into n_split segments (nn_sdpa_dec_splits: one or two
 * chunks of 32 keys each, more where the grid or the merge would grow too big), one block
 * per segment and KV head, so the grid depends on Tk only: a recorded graph replays it at
 * every position. A block stages its segment's first chunk before it knows the attended
 * length (the two loads overlap; DN_SPEC), then the segments that hold no visible key
 * (past the length, before a window) exit, and the n_act that do count themselves: the
 * last of them to finish (a counter per KV head, zero between launches: that block resets
 * it) merges the partials, so one kernel does it all and long caches cost little. A lone
 * segment writes the output itself.
 *
 * In a block (8 warps) the chunks of keys are staged in shared memory with 16-byte cp.async
 * loads (the next chunk's while this one is computed; rows padded by 16 bytes so that
 * threads reading the same offset of successive rows hit different banks). Every thread
 * scores one key against its query heads (or a part of D when there are few heads, summed
 * in the softmax), each warp folds one head's scores into that head's online softmax (base
 * 2: Q carries scale * log2 e), and P V is spread over every thread: one 8-element column
 * of one head's output over every KG-th key, the KG key groups summed by shuffles. The
 * merge spreads the segments over lanes the same way, 4 segments' loads in flight at once.
 * Why this shape: at decode the K/V bytes are few (600 positions x 4 KV heads x 64 x f16:
 * 0.6 MB), so the time is latency: global round trips (the length and K/V, partials +
 * counter, partials again) and each thread's serial chain between them. ncu on an H100
 * (TinyLlama, 2048 slots / 600 attended) saw 2 warps per scheduler issuing every ~6.5-7.7
 * cycles: the chains decide, hence 32-key chunks (a thread scores one key for 1-2 heads and
 * sums 8 keys of P V), 32-bit index arithmetic (no 64-bit divisions) and two accumulators
 * per score. Per launch in a graph (bench/cuda_nn_dec.c): 7.7-16 us for TinyLlama at
 * 512-4096 slots against 15-24 us before, over an empty kernel's ~1.1 us.
 *
 * Semantics are sdpa_kernel's (attention.cu): keys [L - window, L - 1] (all of [0, L) without
 * a window), the mask added, a NaN score makes the row NaN, no visible key gives zeros, a
 * length outside [0, Tk] gives NaN. Arithmetic is f32 throughout. */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>

#include "backends/cuda/attention_dec.h"

#ifndef DN_SPEC
#define DN_SPEC 1 /* stage the first chunk before the length is known (0: after; the same time on an H100) */
#endif

namespace {

constexpr int DN_T = 256;   /* threads per block */
constexpr int DN_GMAX = 16; /* query heads per KV head (nn_sdpa_dec_ok) */
constexpr float DN_LOG2E = 1.4426950408889634f;

/* keys per chunk: a thread per key and head group in the scoring, KC / KG keys per thread in
 * P V: short serial chains, the time of a block being latency */
__host__ __device__ constexpr int dn_kc(int64_t D, int64_t Dv) { return (void)D, (void)Dv, 32; }

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

/* Shared memory (offsets in bytes, each 16-aligned): nbuf buffers of K rows [KC][kr] (kr =
 * D rounded up to 16 bytes, + 16 bytes of pad) and V rows [KC][vr] (Dv rounded up to 8
 * elements, + 16 bytes), Q [G][kd] floats (kd = D rounded as K's, zeros past D), scores
 * [DS][G][KC] floats (the first [G][KC] become P), then alpha, m, l per head. */
struct dn_lay {
    int kd, kr, vd, vr;
    unsigned k, v, kbuf, vbuf, q, s, al, m, l, bytes;
};
template <typename T> __host__ __device__ dn_lay dn_layout(int64_t D, int64_t Dv, int64_t G, int nbuf)
{
    constexpr int EV = 16 / (int)sizeof(T);
    const int KC = dn_kc(D, Dv);
    dn_lay y;
    y.kd = (int)((D + EV - 1) / EV * EV);
    y.kr = y.kd + EV;
    y.vd = (int)((Dv + 7) / 8 * 8);
    y.vr = y.vd + EV;
    y.kbuf = (unsigned)(sizeof(T) * KC * y.kr);
    y.vbuf = (unsigned)(sizeof(T) * KC * y.vr);
    y.k = 0;
    y.v = y.k + nbuf * y.kbuf;
    y.q = y.v + nbuf * y.vbuf;
    y.s = y.q + (unsigned)(sizeof(float) * G * y.kd);
    y.al = y.s + (unsigned)(sizeof(float) * DN_GMAX * KC); /* DS * G <= max(G, DN_T / KC) <= 16 */
    y.m = y.al + sizeof(float) * DN_GMAX;
    y.l = y.m + sizeof(float) * DN_GMAX;
    y.bytes = y.l + sizeof(float) * DN_GMAX;
    return y;
}

/* Tk < 2^31 (nn_sdpa_dec_run): lengths and slots are ints from here on */
__device__ __forceinline__ int dn_attended(const nn_sdpa &a)
{
    if (!a.len) return (int)a.Tk;
    int64_t L = a.ldt == CT_I32 ? (int64_t)__ldcg((const int32_t *)a.len) : (int64_t)__ldcg((const long long *)a.len);
    return L < 0 || L > a.Tk ? -1 : (int)L;
}

/* 8 elements of a row (16 bytes of f16, 32 of f32) as floats */
template <typename T> __device__ __forceinline__ void ld8(float *f, const T *p)
{
    if constexpr (sizeof(T) == 2) {
        uint4 w = *reinterpret_cast<const uint4 *>(p);
        const __half2 *h = reinterpret_cast<const __half2 *>(&w);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float2 t = __half22float2(h[i]);
            f[2 * i] = t.x, f[2 * i + 1] = t.y;
        }
    } else {
        float4 a = *reinterpret_cast<const float4 *>(p), b = *reinterpret_cast<const float4 *>(p + 4);
        f[0] = a.x, f[1] = a.y, f[2] = a.z, f[3] = a.w, f[4] = b.x, f[5] = b.y, f[6] = b.z, f[7] = b.w;
    }
}

/* Rows 0 .. nk - 1 of src (row stride rs elements, n valid elements each) into shared rows
 * of stride sr, zeros from n to the width w. vec: 16-byte aligned rows, n a multiple of 16
 * bytes (asynchronous copies); else element by element. */
template <typename T>
__device__ __forceinline__ void stage(T *dst, int sr, int w, const T *src, int64_t rs, int64_t n, int nk, bool vec)
{
    constexpr int EV = 16 / (int)sizeof(T);
    if (vec) { /* word c of row j for t = threadIdx.x, + DN_T, ...: one division, then steps */
        const int wpr = w / EV, dj = DN_T / wpr, dc = DN_T - dj * wpr;
        int j = (int)threadIdx.x / wpr, c = (int)threadIdx.x - j * wpr;
        for (; j < nk; j += dj, c += dc) {
            if (c >= wpr) c -= wpr, j++;
            if (j >= nk) break;
            if (c * EV < n) cp16(dst + j * sr + c * EV, src + j * rs + c * EV);
            else *reinterpret_cast<uint4 *>(dst + j * sr + c * EV) = make_uint4(0, 0, 0, 0);
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

/* the largest power of two p <= 32 with n * p <= DN_T */
__device__ __forceinline__ int lanes_for(int n)
{
    int p = 1;
    while (p < 32 && n * p * 2 <= DN_T) p *= 2;
    return p;
}

template <typename T, int KC> __global__ void __launch_bounds__(DN_T, 2) sdpa_dec(nn_sdpa a, bool veck, bool vecv, int nbuf)
{
    extern __shared__ __align__(16) unsigned char dn_sm[];
    constexpr int EV = 16 / (int)sizeof(T);
    constexpr int HL = DN_T / KC;     /* threads per key in the scoring */
    constexpr int HPT = DN_GMAX / HL; /* heads a thread scores at most */
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int G = (int)(a.Hq / a.Hkv), D = (int)a.D, Dv = (int)a.Dv;
    const dn_lay y = dn_layout<T>(D, Dv, G, nbuf);
    float *Qs = reinterpret_cast<float *>(dn_sm + y.q), *Sc = reinterpret_cast<float *>(dn_sm + y.s);
    float *Al = reinterpret_cast<float *>(dn_sm + y.al), *Mh = reinterpret_cast<float *>(dn_sm + y.m);
    float *Lh = reinterpret_cast<float *>(dn_sm + y.l);
    const int Hkv = (int)a.Hkv, Tk = (int)a.Tk, S = a.n_split, sg = blockIdx.x;
    const int64_t kvh = (int)blockIdx.y % Hkv, b = (int)blockIdx.y / Hkv;
    const int64_t R = a.B * a.Hq, row0 = b * a.Hq + kvh * G;
    const int seg = (Tk + S - 1) / S, s0 = sg * seg;
    const int s1 = s0 + seg < Tk ? s0 + seg : Tk; /* the segment's slots [s0, s1) */
    const T *kb = (const T *)a.k + b * a.ks[0] + kvh * a.ks[1];
    const T *vb = (const T *)a.v + b * a.vs[0] + kvh * a.vs[1];
    auto kbuf = [&](int c) { return reinterpret_cast<T *>(dn_sm + y.k + (unsigned)(c & (nbuf - 1)) * y.kbuf); };
    auto vbuf = [&](int c) { return reinterpret_cast<T *>(dn_sm + y.v + (unsigned)(c & (nbuf - 1)) * y.vbuf); };
    /* chunk c of the segment: slots s0 + c * KC .. */
    auto stage_chunk = [&](int c) {
        const int c0 = s0 + c * KC;
        const int nr = s1 - c0 < KC ? s1 - c0 : KC;
        stage<T>(kbuf(c), y.kr, y.kd, kb + c0 * a.ks[2], a.ks[2], D, nr, veck);
        stage<T>(vbuf(c), y.vr, y.vd, vb + c0 * a.vs[2], a.vs[2], Dv, nr, vecv);
    };
    if (DN_SPEC && s0 < s1) stage_chunk(0); /* in flight with the length's load */

    /* Q (dense rows: 16-byte loads, also in flight), scaled, zeros past D */
    const float qscale = a.scale * DN_LOG2E;
    const float *qb = a.q + b * a.qs[0] + kvh * G * a.qs[1];
    const bool qvec = a.qs[3] == 1 && a.qs[1] == D && y.kd == D && D % 4 == 0 && (uintptr_t)qb % 16 == 0;
    float4 qv[DN_GMAX * 256 / 4 / DN_T];
    if (qvec) {
#pragma unroll
        for (int u = 0; u < DN_GMAX * 256 / 4 / DN_T; u++) {
            int t = tid + u * DN_T;
            qv[u] = t < G * D / 4 ? reinterpret_cast<const float4 *>(qb)[t] : make_float4(0, 0, 0, 0);
        }
    }
    const int L = dn_attended(a);
    if (L <= 0) { /* no visible key: zeros; a bad length: NaN (segment 0's block writes) */
        if (DN_SPEC) cp_wait(); /* no copy outlives the block */
        if (sg == 0)
            for (int t = tid; t < G * Dv; t += DN_T) a.out[(row0 + t / Dv) * Dv + t % Dv] = L == 0 ? 0.0f : NAN;
        return;
    }
    const int vlo = a.window > 0 && L > a.window ? L - (int)a.window : 0, vhi = L - 1;
    const int klo = vlo / seg, khi = vhi / seg, n_act = khi - klo + 1;
    if (sg < klo || sg > khi) {
        if (DN_SPEC) cp_wait();
        return;
    }
    const int jlo = s0 > vlo ? s0 : vlo, jhi = s1 - 1 < vhi ? s1 - 1 : vhi; /* visible keys here */
    const int c_first = (jlo - s0) / KC, c_last = (jhi - s0) / KC;
    if (!DN_SPEC || c_first != 0) {
        if (DN_SPEC) cp_wait(); /* chunk 0's copies may share c_first's buffer */
        stage_chunk(c_first);
    }
    if (qvec) {
#pragma unroll
        for (int u = 0; u < DN_GMAX * 256 / 4 / DN_T; u++) {
            int t = tid + u * DN_T;
            float4 q = qv[u];
            if (t < G * D / 4) reinterpret_cast<float4 *>(Qs)[t] = make_float4(q.x * qscale, q.y * qscale, q.z * qscale, q.w * qscale);
        }
    } else {
        for (int t = tid; t < G * y.kd; t += DN_T) {
            int g = t / y.kd, d = t - g * y.kd;
            Qs[t] = d < D ? a.q[b * a.qs[0] + (kvh * G + g) * a.qs[1] + d * a.qs[3]] * qscale : 0.0f;
        }
    }

    /* the heads of this warp's softmax (w, w + 8), their running max / sum / NaN seen */
    float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f};
    bool bad_r[2] = {false, false};
    /* P V: this thread's column (8 elements) w of head g, keys kg, kg + KG, ... */
    const int nu = y.vd / 8, KG = lanes_for(G * nu);
    const int kg = tid % KG, pw = (tid / KG) % nu, pg = tid / (KG * nu);
    float acc[8];
#pragma unroll
    for (int e = 0; e < 8; e++) acc[e] = 0.0f;
    /* few heads: split D over the spare scoring threads (DS parts, a power of two) */
    const int DS = HL / G >= 8 ? 8 : HL / G >= 4 ? 4 : HL / G >= 2 ? 2 : 1;
    const int wk = y.kd / EV;

    for (int c = c_first; c <= c_last; c++) {
        const int c0 = s0 + c * KC;
        const int ja = jlo > c0 ? jlo - c0 : 0, jb = jhi - c0 + 1 < KC ? jhi - c0 + 1 : KC;
        cp_wait();
        __syncthreads(); /* chunk c is in, and every reader of the other buffer is done */
        if (c < c_last) stage_chunk(c + 1); /* several chunks: nbuf is 2 */
        const T *Ks = kbuf(c), *Vs = vbuf(c);

        /* scores: key j, heads h0, h0 + hstep, ..., 16-byte words ds, ds + DS, ... of D */
        {
            const int j = tid % KC, hl = tid / KC, ds = hl % DS, h0 = hl / DS, hstep = HL / DS;
            if (j >= ja && j < jb) {
                /* two accumulators per head (alternate words): half the dependent chain */
                float s[HPT][2];
#pragma unroll
                for (int i = 0; i < HPT; i++) s[i][0] = s[i][1] = 0.0f;
                const T *kr = Ks + j * y.kr;
                for (int w0 = ds; w0 < wk; w0 += 2 * DS) {
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int w = w0 + h * DS;
                        if (h == 1 && w >= wk) break;
                        float kf[EV];
                        if constexpr (sizeof(T) == 2) ld8<T>(kf, kr + w * EV);
                        else {
                            float4 k4 = *reinterpret_cast<const float4 *>(kr + w * EV);
                            kf[0] = k4.x, kf[1] = k4.y, kf[2] = k4.z, kf[3] = k4.w;
                        }
#pragma unroll
                        for (int i = 0; i < HPT; i++) {
                            int g = h0 + i * hstep;
                            if (g < G) {
                                const float4 *q4 = reinterpret_cast<const float4 *>(Qs + g * y.kd + w * EV);
                                float acc = s[i][h];
#pragma unroll
                                for (int e = 0; e < EV / 4; e++) {
                                    float4 q = q4[e];
                                    acc = fmaf(q.x, kf[4 * e], acc);
                                    acc = fmaf(q.y, kf[4 * e + 1], acc);
                                    acc = fmaf(q.z, kf[4 * e + 2], acc);
                                    acc = fmaf(q.w, kf[4 * e + 3], acc);
                                }
                                s[i][h] = acc;
                            }
                        }
                    }
                }
#pragma unroll
                for (int i = 0; i < HPT; i++) {
                    int g = h0 + i * hstep;
                    if (g < G) Sc[(ds * G + g) * KC + j] = s[i][0] + s[i][1];
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
                if (j >= ja && j < jb) {
                    s = Sc[g * KC + j];
                    for (int p = 1; p < DS; p++) s += Sc[(p * G + g) * KC + j];
                    if (a.mask) s += a.mask[b * a.ms[0] + (kvh * G + g) * a.ms[1] + (int64_t)(c0 + j) * a.ms[3]] * DN_LOG2E;
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

        /* P V over this thread's keys (only visible ones: other rows may hold anything) */
        if (pg < G) {
            const float al = Al[pg];
#pragma unroll
            for (int e = 0; e < 8; e++) acc[e] *= al;
            const float *P = Sc + pg * KC;
            const T *vc = Vs + pw * 8;
#pragma unroll 4
            for (int j = ja + kg; j < jb; j += KG) {
                float v[8];
                ld8<T>(v, vc + j * y.vr);
                const float p = P[j];
#pragma unroll
                for (int e = 0; e < 8; e++) acc[e] += p * v[e];
            }
        }
    }
    /* the KG key groups of a column are adjacent lanes */
    for (int o = 1; o < KG; o *= 2)
#pragma unroll
        for (int e = 0; e < 8; e++) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);

    /* each head's max (NaN when a score was NaN) and sum, for every thread */
#pragma unroll
    for (int gi = 0; gi < 2; gi++) {
        const int g = warp + 8 * gi;
        if (g >= G) break;
        bool bad = __any_sync(0xffffffffu, bad_r[gi]);
        if (lane == 0) Mh[g] = bad ? NAN : m_r[gi], Lh[g] = l_r[gi];
    }
    __syncthreads();

    /* partials: o [n_split][R][DvP], then (m, l) [n_split][R] */
    const int DvP = (Dv + 3) / 4 * 4;
    float *po = a.part, *pml = a.part + S * R * DvP;
    if (pg < G && kg == 0) {
        const float mh = Mh[pg], lh = Lh[pg];
        if (n_act == 1) {
            const float inv = lh > 0.0f ? 1.0f / lh : 0.0f;
            float *o = a.out + (row0 + pg) * Dv;
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (pw * 8 + e < Dv) o[pw * 8 + e] = mh != mh ? NAN : acc[e] * inv;
        } else {
            float *o = po + (sg * R + row0 + pg) * DvP;
#pragma unroll
            for (int e = 0; e < 8; e += 4)
                if (pw * 8 + e < DvP) *reinterpret_cast<float4 *>(o + pw * 8 + e) = make_float4(acc[e], acc[e + 1], acc[e + 2], acc[e + 3]);
            if (pw == 0) *reinterpret_cast<float2 *>(pml + 2 * (sg * R + row0 + pg)) = make_float2(mh, lh);
        }
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
    /* 8 columns of one head over every SG-th segment, the loads of 4 segments in flight
     * together (rescaling as the max grows), the SG segment groups (adjacent lanes)
     * combined by shuffles */
    const int nq = DvP / 4, n8 = (nq + 1) / 2, SG = lanes_for(G * n8), ntask = G * n8 * SG;
    for (int t0 = 0; t0 < ntask; t0 += DN_T) {
        const int t = t0 + tid, sgi = t % SG, q8 = (t / SG) % n8, g = t / (SG * n8);
        const bool on = t < ntask, two = 2 * q8 + 1 < nq;
        const int64_t rowg = row0 + g;
        float mx = -INFINITY, ls = 0.0f, o[8];
#pragma unroll
        for (int e = 0; e < 8; e++) o[e] = 0.0f;
        bool bad = false;
        for (int k0 = klo + sgi; on && k0 <= khi; k0 += 4 * SG) {
            float2 ml[4];
            float4 oa[4], ob[4];
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int k = k0 + r * SG;
                const int64_t pr = (int64_t)k * R + rowg;
                ml[r] = make_float2(-INFINITY, 0.0f), oa[r] = ob[r] = make_float4(0, 0, 0, 0);
                if (k <= khi) {
                    ml[r] = __ldcg(reinterpret_cast<const float2 *>(pml + 2 * pr));
                    oa[r] = __ldcg(reinterpret_cast<const float4 *>(po + pr * DvP + 8 * q8));
                    if (two) ob[r] = __ldcg(reinterpret_cast<const float4 *>(po + pr * DvP + 8 * q8 + 4));
                }
            }
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const float mk = ml[r].x;
                bad = bad || mk != mk;
                if (!(mk > -INFINITY)) continue; /* NaN, no key with a finite score, or past khi */
                const float mn = fmaxf(mx, mk), fo = exp2f(mx - mn), fk = exp2f(mk - mn);
                const float x[8] = {oa[r].x, oa[r].y, oa[r].z, oa[r].w, ob[r].x, ob[r].y, ob[r].z, ob[r].w};
                ls = ls * fo + ml[r].y * fk, mx = mn;
#pragma unroll
                for (int e = 0; e < 8; e++) o[e] = o[e] * fo + x[e] * fk;
            }
        }
        for (int sh = 1; sh < SG; sh *= 2) {
            const float mo = __shfl_xor_sync(0xffffffffu, mx, sh), lo = __shfl_xor_sync(0xffffffffu, ls, sh);
            bad = __shfl_xor_sync(0xffffffffu, (int)bad, sh) || bad;
            const float mn = fmaxf(mx, mo);
            const float fa = mx == -INFINITY ? 0.0f : exp2f(mx - mn), fb = mo == -INFINITY ? 0.0f : exp2f(mo - mn);
            ls = ls * fa + lo * fb, mx = mn;
#pragma unroll
            for (int e = 0; e < 8; e++) o[e] = o[e] * fa + __shfl_xor_sync(0xffffffffu, o[e], sh) * fb;
        }
        if (on && sgi == 0) {
            const float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
            float *out = a.out + rowg * Dv + 8 * q8;
#pragma unroll
            for (int e = 0; e < 8; e++)
                if (8 * q8 + e < Dv) out[e] = bad ? NAN : o[e] * inv;
        }
    }
}

template <typename T, int KC> cudaError_t dn_launch(const nn_sdpa *a, cudaStream_t s)
{
    const int64_t G = a->Hq / a->Hkv, seg = (a->Tk + a->n_split - 1) / a->n_split;
    const int nbuf = seg > KC ? 2 : 1;
    const size_t sm = dn_layout<T>(a->D, a->Dv, G, nbuf).bytes;
    if (sm > 48 * 1024) {
        /* once, for the largest shape this instance may see */
        static const cudaError_t once =
            cudaFuncSetAttribute(sdpa_dec<T, KC>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 (int)dn_layout<T>(256, 256, DN_GMAX, 2).bytes);
        if (once != cudaSuccess) return once;
    }
    const size_t e = sizeof(T);
    bool veck = (uintptr_t)a->k % 16 == 0 && (a->D * e) % 16 == 0, vecv = (uintptr_t)a->v % 16 == 0 && (a->Dv * e) % 16 == 0;
    for (int i = 0; i < 3; i++) veck = veck && (a->ks[i] * e) % 16 == 0, vecv = vecv && (a->vs[i] * e) % 16 == 0;
    dim3 grid((unsigned)a->n_split, (unsigned)(a->B * a->Hkv));
    sdpa_dec<T, KC><<<grid, DN_T, sm, s>>>(*a, veck, vecv, nbuf);
    return cudaGetLastError();
}

template <typename T> cudaError_t dn_dispatch(const nn_sdpa *a, cudaStream_t s)
{
    return dn_launch<T, dn_kc(0, 0)>(a, s);
}

} // namespace

extern "C" int nn_sdpa_dec_ok(int64_t Hq, int64_t Hkv, int64_t Tq, int64_t D, int64_t Dv)
{
    /* a P V thread per 8-element column of each head's output */
    int64_t G = Hkv > 0 ? Hq / Hkv : 0;
    return Tq == 1 && G >= 1 && G <= DN_GMAX && D >= 1 && D <= 256 && Dv >= 1 && Dv <= 256 &&
           G * ((Dv + 7) / 8) <= DN_T;
}

extern "C" int nn_sdpa_dec_simt_splits(int64_t B, int64_t Hkv, int64_t Tk, int64_t D, int64_t Dv, int64_t G, int sm_count)
{
    /* Segments of 64 keys (two chunks) where the heads of a KV head carry much output (G Dv
     * > 256 at D <= 128: TinyLlama), else of one chunk (SmolLM2: few heads; Gemma 3: D 256,
     * each chunk costs more), at most 64 of them (the merge) and ~2 blocks per SM. From the
     * split sweep of bench/cuda_nn_dec.c on an H100 (us per launch, cold, this plan's
     * choice against the previous one's): TinyLlama 640/600 10.4 vs 10.9, 2048/600 10.7 vs
     * 12.5, 2048/2000 12.1 vs 13.0, 4096/4000 the same 15.7; Gemma 3 2048/600 11.1 vs 13.9,
     * 4096/4000 19.0 vs 23.8; SmolLM2 unchanged up to 2048. */
    const int64_t ks = D > 128 || Dv > 128 || G * Dv <= 256 ? dn_kc(D, Dv) : 2 * dn_kc(D, Dv);
    const int64_t heads = B * Hkv > 0 ? B * Hkv : 1;
    int64_t n = (Tk + ks - 1) / ks, cap = 2 * (int64_t)sm_count / heads;
    if (n > cap) n = cap;
    if (n > 64) n = 64;
    if (n > NN_SDPA_DEC_MAX_SPLIT) n = NN_SDPA_DEC_MAX_SPLIT;
    return n < 1 ? 1 : (int)n;
}

extern "C" cudaError_t nn_sdpa_dec_simt_run(const nn_sdpa *a, cudaStream_t s)
{
    if (!nn_sdpa_dec_ok(a->Hq, a->Hkv, a->Tq, a->D, a->Dv) || a->kdt != a->vdt || a->n_split < 1 ||
        a->n_split > NN_SDPA_DEC_MAX_SPLIT || (a->n_split > 1 && (!a->part || !a->count)) || a->B * a->Hkv > 65535 ||
        a->Tk > INT32_MAX / 2)
        return cudaErrorInvalidValue;
    return a->kdt == CT_F16 ? dn_dispatch<__half>(a, s) : dn_dispatch<float>(a, s);
}

extern "C" int nn_sdpa_dec_splits(const nn_sdpa *a, int sm_count)
{
    if (nn_sdpa_dec_tc_ok(a)) return nn_sdpa_dec_tc_splits(a, sm_count);
    return nn_sdpa_dec_simt_splits(a->B, a->Hkv, a->Tk, a->D, a->Dv, a->Hq / a->Hkv, sm_count);
}

extern "C" cudaError_t nn_sdpa_dec_run(const nn_sdpa *a, cudaStream_t s)
{
    return nn_sdpa_dec_tc_ok(a) ? nn_sdpa_dec_tc_run(a, s) : nn_sdpa_dec_simt_run(a, s);
}
