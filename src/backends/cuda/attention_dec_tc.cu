/* Decode attention (Tq = 1) on tensor cores, for f16 caches with D = Dv = 64, 128 or 256 and
 * at most 8 query heads per KV head (TinyLlama 8, SmolLM2 3, Gemma 3 4); attention_dec.cu's
 * SIMT kernel takes every other shape.
 *
 * A warp owns a span of one KV head's slots and serves the head's G query heads from the
 * same K/V registers: each lane loads its rows with 16-byte loads straight to registers
 * (no shared memory, no barrier before the math), all of a chunk's loads in flight with Q's
 * and the length's. Scores are one mma.m16n8k16 row block: rows 0-7 hold Q (scaled by
 * scale * log2 e) rounded to f16, rows 8-15 the rounding residual times 2^11, so
 * S = C[g] + 2^-11 C[g + 8] keeps f32 accuracy (K is exact in f16; products are exact and
 * summed in f32) at no extra mma: G <= 8 leaves those rows free. The same trick carries P
 * into P V. The reduction dimension of Q K^T is permuted (a lane's 16-byte K words are its
 * k-pairs, Q loaded to match), so K needs no shuffle; V is transposed in registers with
 * movmatrix (8x8 tiles whose columns are permuted so a lane's one 16-byte load feeds four
 * tiles), and the permutation comes out so that each lane ends with 8 contiguous output
 * columns. The score fragment is P V's A fragment as it stands (flash-attention's layout),
 * the online softmax works in base 2 with quad shuffles only.
 *
 * At D = 256 a lane's K, V, Q and output registers for the whole row would not fit, so two
 * warps share a span of slots, each holding one half of the columns: each scores its half
 * of Q K^T, the pair adds the two partial scores through shared memory (a named barrier of
 * 64 threads per chunk, the buffer two deep so one barrier suffices), both run the same
 * online softmax on the same sums (a + b is b + a: the two agree bit for bit), and each
 * multiplies P by its half of V. A block holds 8 warps then, so that it still covers 4 spans
 * (64 keys: a short cache's step needs no merge). Everything else is the D = 128 kernel's.
 *
 * The grid is (n_split, B * Hkv) blocks of dt_w(D) warps; the slots are cut evenly, so the
 * launch depends on Tk only and a recorded graph replays at every position. Warps and
 * blocks without a visible key do nothing (blocks exit before any barrier, warps go straight
 * to it). A block folds its warps' partials in shared memory; with several active blocks
 * each writes one partial and the last to finish (a counter per KV head, zero between
 * launches: that block resets it) merges them in the same launch.
 *
 * Measured on an H100 (bench/cuda_nn_dec.c, us per launch in a graph, hot / cold; the SIMT
 * kernel's in brackets; an empty kernel 1.0-1.1): TinyLlama 512 slots / 64 attended 3.6 / 4.2
 * (7.2 / 7.4), 2048 / 600 6.3 / 6.9 (10.0 / 10.5), 4096 / 4000 9.9 / 10.3 (15.3 / 15.3). With
 * one active block (no merge) the launch costs ~2.6 us over the empty kernel, each further
 * active block ~0.5 us (the merge's loads, waiting for the slowest block). A cluster per KV
 * head merging through distributed shared memory (blocks of 8 warps) was correct but no
 * faster: 6.5 / 7.2 at 2048 / 600 (commit 9c15fd6, reverted). ncu there: ~2 warps per
 * scheduler issuing every ~16 cycles, i.e. the chain of loads, mma and shuffles decides.
 * Gemma 3 (4 / 1 heads, D 256) on an H200 (SIMT in brackets): 128 / 64 4.5 / 4.9 (8.6 / 8.8),
 * 512 / 128 6.5 / 6.9 (8.8 / 8.9), 2048 / 2000 10.4 / 10.9 (14.5 / 14.8). Its first form had
 * 2 spans (4 warps) a block: 6.2 / 6.6 at 512 / 64, where a block of 4 spans needs no merge.
 *
 * Semantics are attention_dec.cu's: keys [L - window, L - 1], the mask added, a NaN score
 * makes the row NaN, no visible key gives zeros, a length outside [0, Tk] gives NaN. Slots
 * that are not attended may hold anything (their V rows are zeroed in registers, their
 * scores replaced, never multiplied). Limit: |q * scale * log2 e| must fit in f16 (65504),
 * checked by nothing on the device; q past that range is not a decode input seen in models
 * (the SIMT kernel takes f32 caches and any range). */
#include <cuda_fp16.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "backends/cuda/attention_dec.h"
#include "backends/cuda/pdl.cuh"

namespace {

constexpr float DT_LOG2E = 1.4426950408889634f;
constexpr float DT_LO = 2048.0f, DT_ILO = 1.0f / 2048.0f; /* the residual rows' scale */

/* warps sharing a span of slots, one per column block of 128 (D 256: two) */
__host__ __device__ constexpr int dt_nh(int D) { return D > 128 ? 2 : 1; }
/* spans of slots a block at every D, so warps a block DT_SPANS * dt_nh(D) */
constexpr int DT_SPANS = 4;
__host__ __device__ constexpr int dt_w(int D) { return DT_SPANS * dt_nh(D); }

/* keys a warp handles at once: its K and V rows in registers (2 * D / 4 halves per key / lane,
 * D counted per warp) */
__host__ __device__ constexpr int dt_nk(int D) { return D == 64 ? 32 : 16; }
/* the same for a head dim D split over dt_nh(D) warps */
__host__ __device__ constexpr int dt_nkw(int D) { return dt_nk(D / dt_nh(D)); }

__device__ __forceinline__ unsigned h2bits(__half2 h) { return *reinterpret_cast<unsigned *>(&h); }

/* x, y as f16 (hi) and their rounding residual times 2^11 (lo) */
__device__ __forceinline__ void split2(float x, float y, unsigned &hi, unsigned &lo)
{
    __half2 h = __floats2half2_rn(x, y);
    float2 f = __half22float2(h);
    hi = h2bits(h);
    lo = h2bits(__floats2half2_rn((x - f.x) * DT_LO, (y - f.y) * DT_LO));
}

__device__ __forceinline__ void mma(float c[4], const unsigned a[4], unsigned b0, unsigned b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned trans8(unsigned x)
{
    unsigned y;
    asm("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

__device__ __forceinline__ unsigned word(const uint4 &v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

/* Tk < 2^31 (nn_sdpa_dec_tc_ok): lengths and slots are ints from here on */
__device__ __forceinline__ int dt_attended(const nn_sdpa &a)
{
    if (!a.len) return (int)a.Tk;
    int64_t L = a.ldt == CT_I32 ? (int64_t)__ldcg((const int32_t *)a.len) : (int64_t)__ldcg((const long long *)a.len);
    return L < 0 || L > a.Tk ? -1 : (int)L;
}

/* the pairs' score exchange (D 256): [span][chunk parity][half][score][lane] */
template <int NH, int NP, int NG> struct dt_xch {
    float v[NP][2][NH][NG * 2][32];
};
template <int NP, int NG> struct dt_xch<1, NP, NG> {};

/* per span of slots (DT_SPANS a block): its output rows and softmax state */
template <int D> struct dt_smem {
    float o[DT_SPANS][8][D];
    float m[DT_SPANS][8], l[DT_SPANS][8];
    dt_xch<dt_nh(D), DT_SPANS, dt_nkw(D) / 8> x;
};

/* Lane (g, t) of a warp: K and V rows g of each 8-key group, 16-byte words 32 u + 8 t. */
template <int D>
__device__ __forceinline__ void load_chunk(uint4 (*kr)[D / 32], uint4 (*vr)[D / 32], const __half *kb, const __half *vb,
                                           int64_t ks, int64_t vs, int c0, int w1, int g, int t)
{
#pragma unroll
    for (int gi = 0; gi < dt_nk(D) / 8; gi++) {
        const int key = c0 + gi * 8 + g;
#pragma unroll
        for (int u = 0; u < D / 32; u++) {
            kr[gi][u] = vr[gi][u] = make_uint4(0, 0, 0, 0);
            if (key < w1) {
                kr[gi][u] = __ldcg(reinterpret_cast<const uint4 *>(kb + key * ks + 32 * u + 8 * t));
                vr[gi][u] = __ldcg(reinterpret_cast<const uint4 *>(vb + key * vs + 32 * u + 8 * t));
            }
        }
    }
}

/* Four output columns at flat index e (a multiple of 4) and, when a.oq is set, their q8 form:
 * the 8 lanes of an aligned group hold one 32-element block (the callers' thread per
 * 4 columns, D a multiple of 32), quantized as quant_fused.cu's quantize_q8_kernel does
 * (d = amax / 127, q = round(v / d), s8 = d * the sum of 8 q), so the o projection that
 * reads it gets the same bits as from that kernel. */
__device__ __forceinline__ void dt_store(const nn_sdpa &a, int64_t e, float4 r)
{
    float *out = a.out + e; /* out's alignment is the tensor's: element stores */
    out[0] = r.x, out[1] = r.y, out[2] = r.z, out[3] = r.w;
    if (!a.oq) return;
    const int lane = threadIdx.x & 31;
    const unsigned grp = 0xffu << (lane & 24);
    float amax = fmaxf(fmaxf(fabsf(r.x), fabsf(r.y)), fmaxf(fabsf(r.z), fabsf(r.w)));
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(grp, amax, o));
    const float dd = amax / 127.f, id = dd != 0.f ? 1.f / dd : 0.f;
    const int q0 = max(-127, min(127, __float2int_rn(r.x * id))), q1 = max(-127, min(127, __float2int_rn(r.y * id)));
    const int q2 = max(-127, min(127, __float2int_rn(r.z * id))), q3 = max(-127, min(127, __float2int_rn(r.w * id)));
    *reinterpret_cast<char4 *>(a.oq + e) = make_char4((signed char)q0, (signed char)q1, (signed char)q2, (signed char)q3);
    const int sum = q0 + q1 + q2 + q3 + __shfl_xor_sync(grp, q0 + q1 + q2 + q3, 1);
    if ((lane & 1) == 0) a.os8[e / 8] = dd * (float)sum;
    if ((lane & 7) == 0) a.od[e / 32] = dd;
}

/* The two halves of a span add their partial scores: each writes its own to the chunk's
 * buffer, waits at the span's named barrier (ids 1..4; 0 is __syncthreads), adds the
 * other's. Two buffers by chunk parity: a half writes buffer p again only after the next
 * chunk's barrier, which the other passes only after reading p. */
template <int NG>
__device__ __forceinline__ void pair_sum(float (&sc)[NG][2], float (*xb)[NG * 2][32], int hf, int span, int lane)
{
#pragma unroll
    for (int n = 0; n < NG; n++) xb[hf][2 * n][lane] = sc[n][0], xb[hf][2 * n + 1][lane] = sc[n][1];
    /* immediate ids: a register operand makes ptxas reserve all 16 barriers */
    static_assert(DT_SPANS == 4, "one barrier id per span");
    switch (span) {
    case 0: asm volatile("bar.sync 1, 64;\n" ::: "memory"); break;
    case 1: asm volatile("bar.sync 2, 64;\n" ::: "memory"); break;
    case 2: asm volatile("bar.sync 3, 64;\n" ::: "memory"); break;
    default: asm volatile("bar.sync 4, 64;\n" ::: "memory"); break;
    }
#pragma unroll
    for (int n = 0; n < NG; n++) sc[n][0] += xb[hf ^ 1][2 * n][lane], sc[n][1] += xb[hf ^ 1][2 * n + 1][lane];
}

template <int D> __global__ void __launch_bounds__(32 * dt_w(D)) sdpa_dec_tc(nn_sdpa a, int wseg, int trig)
{
    if (trig == 1) cupdl::pdl_launch_next();
    cupdl::pdl_wait();
    if (trig == 2) cupdl::pdl_launch_next();
    constexpr int NH = dt_nh(D), DH = D / NH, NP = DT_SPANS; /* DH columns a warp, NP spans a block */
    constexpr int NU = DH / 32, NK = dt_nk(DH), NG = NK / 8, KS = DH / 16;
    __shared__ dt_smem<D> sm;
    __shared__ bool last;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int span = warp / NH, hf = warp % NH, col0 = hf * DH; /* this warp's columns [col0, col0 + DH) */
    const int G = (int)(a.Hq / a.Hkv), Hkv = (int)a.Hkv, Tk = (int)a.Tk;
    const int kvh = (int)blockIdx.y % Hkv, b = (int)blockIdx.y / Hkv;
    const int64_t R = a.B * a.Hq, row0 = (int64_t)b * a.Hq + (int64_t)kvh * G;
    const int bseg = wseg * NP, bs0 = (int)blockIdx.x * bseg;
    const int w0 = bs0 + span * wseg, w1 = min(w0 + wseg, Tk); /* this warp's slots [w0, w1) */
    const __half *kb = (const __half *)a.k + b * a.ks[0] + kvh * a.ks[1] + col0;
    const __half *vb = (const __half *)a.v + b * a.vs[0] + kvh * a.vs[1] + col0;

    uint4 kr[NG][NU], vr[NG][NU];
    load_chunk<DH>(kr, vr, kb, vb, a.ks[2], a.vs[2], w0, w1, g, t); /* in flight with the length */

    /* Q rows g (head kvh * G + g; zeros past G) at this lane's columns col0 + 32 u + 8 t .. + 7 */
    float qf[NU][8];
    {
        const float *qr = a.q + b * a.qs[0] + (int64_t)(kvh * G + g) * a.qs[1] + col0 * a.qs[3];
        const bool vec = a.qs[3] == 1 && (uintptr_t)qr % 16 == 0;
#pragma unroll
        for (int u = 0; u < NU; u++) {
            const int d = 32 * u + 8 * t;
            if (g >= G) {
#pragma unroll
                for (int e = 0; e < 8; e++) qf[u][e] = 0.0f;
            } else if (vec) {
                float4 x = *reinterpret_cast<const float4 *>(qr + d), y = *reinterpret_cast<const float4 *>(qr + d + 4);
                qf[u][0] = x.x, qf[u][1] = x.y, qf[u][2] = x.z, qf[u][3] = x.w;
                qf[u][4] = y.x, qf[u][5] = y.y, qf[u][6] = y.z, qf[u][7] = y.w;
            } else {
#pragma unroll
                for (int e = 0; e < 8; e++) qf[u][e] = qr[(d + e) * a.qs[3]];
            }
        }
    }

    const int L = dt_attended(a);
    if (L <= 0) { /* no visible key: zeros; a bad length: NaN (the first block writes) */
        if (blockIdx.x == 0)
            for (int i = threadIdx.x; i < G * D / 4; i += 32 * dt_w(D)) {
                const float f = L == 0 ? 0.0f : NAN;
                dt_store(a, (row0 + i / (D / 4)) * D + 4 * (i % (D / 4)), make_float4(f, f, f, f));
            }
        return;
    }
    const int vlo = a.window > 0 && L > a.window ? L - (int)a.window : 0, vhi = L - 1;
    const int klo = vlo / bseg, khi = vhi / bseg, n_act = khi - klo + 1;
    if ((int)blockIdx.x < klo || (int)blockIdx.x > khi) return; /* the whole block: before any barrier */

    const int jlo = max(w0, vlo), jhi = min(w1 - 1, vhi); /* this warp's visible keys */
    float o[NU][4][4];
#pragma unroll
    for (int h = 0; h < NU; h++)
#pragma unroll
        for (int w = 0; w < 4; w++) o[h][w][0] = o[h][w][1] = o[h][w][2] = o[h][w][3] = 0.0f;
    float m_r = -INFINITY, l_r = 0.0f;
    bool bad = false;
    if (jlo <= jhi) {
        /* Q's A fragments: k-step kk reads the lane's columns 32 (kk / 2) + 8 t + 4 (kk % 2) + 0..3 */
        const float qscale = a.scale * DT_LOG2E;
        unsigned qa[KS][4];
#pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            const float *q = qf[kk / 2] + 4 * (kk % 2);
            split2(q[0] * qscale, q[1] * qscale, qa[kk][0], qa[kk][1]);
            split2(q[2] * qscale, q[3] * qscale, qa[kk][2], qa[kk][3]);
        }
        const int cfirst = (jlo - w0) / NK, clast = (jhi - w0) / NK;
        if (cfirst != 0) load_chunk<DH>(kr, vr, kb, vb, a.ks[2], a.vs[2], w0 + cfirst * NK, w1, g, t);
        for (int c = cfirst; c <= clast; c++) {
            const int c0 = w0 + c * NK;
            if (c != cfirst) load_chunk<DH>(kr, vr, kb, vb, a.ks[2], a.vs[2], c0, w1, g, t);
            /* slots not attended may hold NaN: their V rows must not meet a zero P */
#pragma unroll
            for (int gi = 0; gi < NG; gi++) {
                const int key = c0 + gi * 8 + g;
                if (key < jlo || key > jhi)
#pragma unroll
                    for (int u = 0; u < NU; u++) vr[gi][u] = make_uint4(0, 0, 0, 0);
            }
            /* S: lane (g, t) holds head g's keys c0 + 8 n + 2 t + {0, 1} */
            float s[NG][2], cmax = -INFINITY;
#pragma unroll
            for (int n = 0; n < NG; n++) {
                float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
                for (int kk = 0; kk < KS; kk++)
                    mma(acc, qa[kk], word(kr[n][kk / 2], 2 * (kk % 2)), word(kr[n][kk / 2], 2 * (kk % 2) + 1));
                s[n][0] = acc[0] + acc[2] * DT_ILO, s[n][1] = acc[1] + acc[3] * DT_ILO;
            }
            if constexpr (NH == 2) pair_sum<NG>(s, sm.x.v[span][c & 1], hf, span, lane);
#pragma unroll
            for (int n = 0; n < NG; n++) {
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int key = c0 + 8 * n + 2 * t + e;
                    float x = -INFINITY;
                    if (key >= jlo && key <= jhi) {
                        x = s[n][e];
                        if (a.mask && g < G)
                            x += a.mask[b * a.ms[0] + (int64_t)(kvh * G + g) * a.ms[1] + (int64_t)key * a.ms[3]] * DT_LOG2E;
                        if (x != x) bad = true, x = -INFINITY;
                    }
                    s[n][e] = x;
                    cmax = fmaxf(cmax, x);
                }
            }
            cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, 1));
            cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, 2));
            const float mn = fmaxf(m_r, cmax);
            const float alpha = mn == -INFINITY ? 1.0f : exp2f(m_r - mn);
            float ps = 0.0f;
#pragma unroll
            for (int n = 0; n < NG; n++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    s[n][e] = mn == -INFINITY ? 0.0f : exp2f(s[n][e] - mn);
                    ps += s[n][e];
                }
            l_r = l_r * alpha + ps, m_r = mn;
#pragma unroll
            for (int h = 0; h < NU; h++)
#pragma unroll
                for (int w = 0; w < 4; w++)
#pragma unroll
                    for (int e = 0; e < 4; e++) o[h][w][e] *= alpha;
            /* P V, 16 keys a step: P's A fragment is S's layout; V's B fragments by movmatrix */
#pragma unroll
            for (int j = 0; j < NG / 2; j++) {
                unsigned pa[4];
                split2(s[2 * j][0], s[2 * j][1], pa[0], pa[1]);
                split2(s[2 * j + 1][0], s[2 * j + 1][1], pa[2], pa[3]);
#pragma unroll
                for (int h = 0; h < NU; h++)
#pragma unroll
                    for (int w = 0; w < 4; w++)
                        mma(o[h][w], pa, trans8(word(vr[2 * j][h], w)), trans8(word(vr[2 * j + 1][h], w)));
            }
        }
    }
    /* the quad's sums and NaN flags; lane (g, t) holds head g's columns 32 h + 8 t + 2 w + {0, 1} */
    l_r += __shfl_xor_sync(0xffffffffu, l_r, 1);
    l_r += __shfl_xor_sync(0xffffffffu, l_r, 2);
    bad = __shfl_xor_sync(0xffffffffu, (int)bad, 1) || bad;
    bad = __shfl_xor_sync(0xffffffffu, (int)bad, 2) || bad;
    if (t == 0 && hf == 0) sm.m[span][g] = bad ? NAN : m_r, sm.l[span][g] = l_r; /* both halves hold the same */
#pragma unroll
    for (int h = 0; h < NU; h++)
#pragma unroll
        for (int w = 0; w < 4; w++)
            *reinterpret_cast<float2 *>(&sm.o[span][g][col0 + 32 * h + 8 * t + 2 * w]) =
                make_float2(o[h][w][0] + o[h][w][2] * DT_ILO, o[h][w][1] + o[h][w][3] * DT_ILO);
    __syncthreads();

    /* the block's spans folded: thread per (head, 4 columns) */
    const int DvP = D; /* D is a multiple of 4: the partials' row */
    float *po = a.part, *pml = a.part + (int64_t)a.n_split * R * DvP;
    for (int i = threadIdx.x; i < G * D / 4; i += 32 * dt_w(D)) {
        const int hg = i / (D / 4), d = 4 * (i % (D / 4));
        float mx = -INFINITY;
        bool nan = false;
#pragma unroll
        for (int w = 0; w < NP; w++) {
            const float mw = sm.m[w][hg];
            nan = nan || mw != mw;
            mx = fmaxf(mx, mw);
        }
        float ls = 0.0f;
        float4 acc = make_float4(0, 0, 0, 0);
#pragma unroll
        for (int w = 0; w < NP; w++) {
            const float mw = sm.m[w][hg];
            if (!(mw > -INFINITY)) continue;
            const float f = exp2f(mw - mx);
            const float4 x = *reinterpret_cast<const float4 *>(&sm.o[w][hg][d]);
            ls += sm.l[w][hg] * f;
            acc.x += x.x * f, acc.y += x.y * f, acc.z += x.z * f, acc.w += x.w * f;
        }
        if (n_act == 1) {
            const float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
            float4 r = nan ? make_float4(NAN, NAN, NAN, NAN) : make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
            dt_store(a, (row0 + hg) * D + d, r);
        } else {
            const int64_t pr = (int64_t)blockIdx.x * R + row0 + hg;
            __stcg(reinterpret_cast<float4 *>(po + pr * DvP + d), acc);
            if (d == 0) __stcg(reinterpret_cast<float2 *>(pml + 2 * pr), make_float2(nan ? NAN : mx, ls));
        }
    }
    if (n_act == 1) return;

    /* the last active block of this KV head merges the blocks' partials */
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) {
        const unsigned done = atomicAdd(&a.count[blockIdx.y], 1u);
        last = done == (unsigned)n_act - 1;
        if (last) a.count[blockIdx.y] = 0; /* every other block has counted: ready for the next launch */
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    for (int i = threadIdx.x; i < G * D / 4; i += 32 * dt_w(D)) {
        const int hg = i / (D / 4), d = 4 * (i % (D / 4));
        float mx = -INFINITY, ls = 0.0f;
        float4 acc = make_float4(0, 0, 0, 0);
        bool nan = false;
        for (int k0 = klo; k0 <= khi; k0 += 8) { /* 8 partials' loads in flight */
            float2 ml[8];
            float4 x[8];
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const int64_t pr = (int64_t)(k0 + r) * R + row0 + hg;
                ml[r] = make_float2(-INFINITY, 0.0f), x[r] = make_float4(0, 0, 0, 0);
                if (k0 + r <= khi) {
                    ml[r] = __ldcg(reinterpret_cast<const float2 *>(pml + 2 * pr));
                    x[r] = __ldcg(reinterpret_cast<const float4 *>(po + pr * DvP + d));
                }
            }
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const float mk = ml[r].x;
                nan = nan || mk != mk;
                if (!(mk > -INFINITY)) continue;
                const float mn = fmaxf(mx, mk), fo = exp2f(mx - mn), fk = exp2f(mk - mn);
                ls = ls * fo + ml[r].y * fk, mx = mn;
                acc.x = acc.x * fo + x[r].x * fk, acc.y = acc.y * fo + x[r].y * fk;
                acc.z = acc.z * fo + x[r].z * fk, acc.w = acc.w * fo + x[r].w * fk;
            }
        }
        const float inv = ls > 0.0f ? 1.0f / ls : 0.0f;
        dt_store(a, (row0 + hg) * D + d,
                 nan ? make_float4(NAN, NAN, NAN, NAN) : make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv));
    }
}

/* Launched plainly (after its predecessor has completed). Where the step planner asks for it
 * (nn_sdpa::early_next: the o projection after it runs on a one-format Q4_K / Q6_K kernel) it
 * lets the next kernel launch at once (PDL), so that job's blocks are resident and ask L2 for
 * their rows while attention runs. CTORCH_CUDA_SDPA_PDL forces a form: 0 no early launch of
 * the next, 1 always, 2 attention itself launched with PDL too (waiting at its start), 3
 * launched with PDL and letting the next launch once its wait is over; K and V come through
 * L2 (__ldcg), never the read-only path, for the PDL forms. On the H200 (`ctorch bench -d
 * cuda -p 0 -n 128 -r 3`, forms alternated in one call, t/s; llama-shaped random models):
 *   - TinyLlama Q4_K_M: 0: 1,433-1,438, 1: 1,456-1,461, 2: 1,421-1,422, 3: 1,384-1,386;
 *   - TinyLlama F16: 0: 1,006-1,007, 1: 989-995 (its o job, of f16 rows, prefetches nothing);
 *   - SmolLM2's shapes (Q4_K_M: 576-wide rows in other formats, the generic kernel): 0:
 *     1,267-1,271, 1: 1,238-1,242, 3: 1,132-1,133;
 *   - the planner's choice: Q4_K_M 1,457, F16 1,005-1,007, SmolLM2's shapes 1,270-1,271.
 * With 2 the chain of early launches runs on from the q/k/v job: the o job's blocks wait
 * resident beside it (step timeline: attention's advance 4.10 -> 5.11 us, the Q4_K jobs'
 * 3.72 -> 3.16). */
template <int D> cudaError_t dt_launch(const nn_sdpa *a, cudaStream_t s)
{
    constexpr int NP = DT_SPANS;
    const int64_t bseg = (a->Tk + a->n_split - 1) / a->n_split, nk = dt_nkw(D);
    const int wseg = (int)(((bseg + NP - 1) / NP + nk - 1) / nk * nk);
    static int mode = -1;
    if (mode < 0) {
        const char *e = getenv("CTORCH_CUDA_SDPA_PDL");
        mode = e && e[0] >= '0' && e[0] <= '3' ? e[0] - '0' : 4; /* 4: the caller's early_next */
    }
    const int m = mode == 4 ? (a->early_next ? 1 : 0) : mode;
    const int trig = m == 0 ? 0 : m == 3 ? 2 : 1; /* the kernel's: none, before its wait, after it */
    const dim3 grid((unsigned)a->n_split, (unsigned)(a->B * a->Hkv));
    if (m >= 2) return cupdl::launch_pdl(sdpa_dec_tc<D>, grid, 32 * dt_w(D), s, *a, wseg, trig);
    sdpa_dec_tc<D><<<grid, 32 * dt_w(D), 0, s>>>(*a, wseg, trig);
    return cudaGetLastError();
}

} // namespace

extern "C" int nn_sdpa_dec_tc_ok(const nn_sdpa *a)
{
    if (a->Tq != 1 || a->Hkv < 1 || a->Hq % a->Hkv || a->Hq / a->Hkv > 8 || a->D != a->Dv ||
        (a->D != 64 && a->D != 128 && a->D != 256) ||
        a->kdt != CT_F16 || a->vdt != CT_F16 || a->Tk > INT32_MAX / 2 || a->B * a->Hkv > 65535)
        return 0;
    /* 16-byte rows and loads */
    if ((uintptr_t)a->k % 16 || (uintptr_t)a->v % 16 || a->ks[3] != 1 || a->vs[3] != 1) return 0;
    for (int i = 0; i < 3; i++)
        if (a->ks[i] % 8 || a->vs[i] % 8) return 0;
    return 1;
}

extern "C" int nn_sdpa_dec_tc_splits(const nn_sdpa *a, int sm_count)
{
    /* A warp a chunk of keys (32 at D 64), 4 spans of keys a block (a span a warp, a pair of
     * warps at D 256), up to 64 blocks per KV head, no more than ~4 blocks per SM, and no
     * more than 32 blocks over the keys a full-length step attends (the merge reads one
     * partial per active block: at 4096 slots, 4000 attended, Gemma 3's global layers took
     * 14.8 us at 64 blocks and 12.8 at 32; its local ones, a window of 512, 8.4 at 64). */
    const int64_t per = (int64_t)DT_SPANS * dt_nkw((int)a->D), heads = a->B * a->Hkv > 0 ? a->B * a->Hkv : 1;
    const int64_t vis = a->window > 0 && a->window < a->Tk ? a->window : a->Tk;
    int64_t n = (a->Tk + per - 1) / per, cap = 4 * (int64_t)sm_count / heads;
    if (n > cap) n = cap;
    if (vis > 0 && n > 32 * a->Tk / vis) n = 32 * a->Tk / vis;
    if (n > 64) n = 64;
    return n < 1 ? 1 : (int)n;
}

extern "C" cudaError_t nn_sdpa_dec_tc_run(const nn_sdpa *a, cudaStream_t s)
{
    if (!nn_sdpa_dec_tc_ok(a) || a->n_split < 1 || a->n_split > NN_SDPA_DEC_MAX_SPLIT ||
        (a->n_split > 1 && (!a->part || !a->count)))
        return cudaErrorInvalidValue;
    return a->D == 64 ? dt_launch<64>(a, s) : a->D == 128 ? dt_launch<128>(a, s) : dt_launch<256>(a, s);
}
