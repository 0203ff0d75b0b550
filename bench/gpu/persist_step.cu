/* A whole F16 llama decode step as one persistent kernel, to measure what such a step can
 * reach before ctorch builds one (issue 10's F16 goal: decode at >= 70% of a device copy;
 * the CUDA backend's kernel chain reaches ~50%; README "Where a Q4_K_M token goes" and
 * "A persistent step, measured").
 *
 * The design under test: one block per SM, all resident (a cooperative launch). In every
 * block one thread streams the block's share of every weight matrix of the step, in step
 * order, through a ring of shared-memory tiles filled by the bulk copy engine
 * (cp.async.bulk, completing on an mbarrier); it never waits for activations, only for a
 * free slot. Each consumer warp takes a contiguous run of the block's rows of every matrix
 * and owns its own slots; 2048-wide rows meet x held in registers, wider ones x in shared
 * memory. Activations pass between blocks with no grid barrier: each value travels beside
 * the flag of the stage that wrote it (st_ll / ld_ll), so a block starts a stage as soon as
 * what it reads is there. Five stages a layer (q/k/v, attention, o + add, gate/up, down +
 * add) and the output; the weights of later stages flow in while a block waits.
 *
 * The model is TinyLlama-shaped (22 layers, 2048 wide, FFN 5632, 32 heads, 4 kv heads of 64,
 * 32,000 vocabulary, 2.07 GB of f16 weights), random weights from a hash, an f16 KV cache.
 * A plain reference (one simple kernel per op, f32 accumulation) decodes the same tokens
 * beside it and every step's logits are compared (NMSE limit 1e-6: the two sum in different
 * orders through 22 random layers, measured 0.8-7e-8; the argmax must match). Timing: steps
 * of the persistent kernel back to back (8-step windows, median), against a device-to-device
 * copy's bandwidth in the same process; then where the last step's time went by stage kind.
 *
 * Not part of the build (like sync_floor.cu): on the GPU machine,
 *   nvcc -O3 -arch=sm_90 -o persist_step bench/gpu/persist_step.cu
 *   ./persist_step [slots 24] [steps 128] [steps checked 64] [modes 15]
 * (modes, a bit each: 1 = also time the weight stream alone, 2 = the stream and the dot
 * products without the stages' other work, 4 = all but the dot products, 8 = the stages'
 * work and their dependencies without any weights, 16 = everything on a third of the rows,
 * 32 = 8 with each stage waiting for an eighth of its input; -DNCW_=warps, -DTILE_KB=slot size). Measured on an H200
 * (session 37, README): the stream alone 512-569 us a step (86-96% of a copy), with the
 * dot products 539-541 us (91%), the stages' work and waits without weights 457-469 us, the
 * whole step 1,014-1,102 us (44-49%, 907-986 t/s): the kernel chain's speed, not above it;
 * the consumers wait 44-63% of their cycles for the previous stage's activations. With a
 * third of the rows read (a Q4_K_M model's bytes) 659-664 us, against ~700 for the kernel
 * chain's Q4_K_M step. Session 38, the norms' gamma loaded into registers in one batch
 * (before their input's wait by default; -DGAMMA_EARLY=0 after it): the stages alone
 * 409-414 us, a third of the rows 596-602 us, the whole step 1,018-1,025 us (~980 t/s,
 * 48%); most of the gain is the batching (after the wait: 416, 603, 1,030 us). */
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "../cuda_check.h"

/* the model */
constexpr int NL = 22, E = 2048, F = 5632, V = 32000, H = 32, HKV = 4, D = 64, CTX = 1024;
constexpr int QKV = E + 2 * HKV * D;
constexpr float EPS = 1e-5f, THETA = 10000.f;

/* the kernel */
#ifndef NCW_
#define NCW_ 8
#endif
constexpr int NCW = NCW_;                /* consumer warps, each taking whole tiles in turn */
constexpr int THREADS = (NCW + 1) * 32;  /* and one producer warp */
constexpr int CT = NCW * 32;             /* consumer threads */
#ifndef TILE_KB
#define TILE_KB 8
#endif
constexpr int TILE = TILE_KB * 1024;     /* bytes a ring slot */
constexpr int UNIT = 256;                /* f16 elements a warp takes at a time (512 bytes) */
constexpr int ACC_MAX = 1024;            /* rows a block accumulates in one stage */
constexpr int STAGES = 5 * NL + 1;
constexpr int KREG = E;
#ifndef GAMMA_EARLY
#define GAMMA_EARLY 1 /* the norms' gamma loaded before their input's wait (0: after it) */
#endif
#ifndef PF_AHEAD
#define PF_AHEAD 0 /* stages whose weights the producer asks into L2 ahead of the ring (slower: README) */
#endif                  /* rows this wide take x from registers */

struct Layer {
    const __half *wqkv, *wo, *wg, *wu, *wd;
    const float *g_att, *g_ffn;
};

struct Model {
    Layer l[NL];
    const __half *emb, *wout;
    const float *g_out;
};

struct State {
    float *x, *qkv, *ao, *h, *logits; /* the reference's */
    /* the persistent kernel's activations, as words of (flag << 32 | value bits): see st_ll */
    uint64_t *lx, *lqkv, *lao, *lh;
    unsigned *done; /* -DV_DONE: each block's last finished stage's flag */
    __half *kc, *vc; /* [NL][HKV][CTX][D] */
    long long *prof; /* per consumer warp: cycles waiting for tiles, on tiles, in all */
};

/* ---------------------------------------------------------------- device helpers */

__device__ __forceinline__ unsigned sm_addr(const void *p) { return (unsigned)__cvta_generic_to_shared(p); }

__device__ __forceinline__ void mbar_init(uint64_t *b, unsigned n)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(sm_addr(b)), "r"(n) : "memory");
}
__device__ __forceinline__ void mbar_expect(uint64_t *b, unsigned bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(sm_addr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t *b)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sm_addr(b)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t *b, unsigned parity)
{
    asm volatile("{\n\t.reg .pred p;\n"
                 "W:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n\t@!p bra W;\n}" ::"r"(sm_addr(b)),
                 "r"(parity)
                 : "memory");
}
__device__ __forceinline__ void bulk_load(void *dst, const void *src, unsigned bytes, uint64_t *b, uint64_t policy)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, "
                 "[%3], %4;" ::"r"(sm_addr(dst)),
                 "l"(src), "r"(bytes), "r"(sm_addr(b)), "l"(policy)
                 : "memory");
}
/* S.prof: 5 counters a consumer warp, then from PROF_STAMPS each block's clock (ns) at the
 * start of every stage and at its end */
constexpr int PROF_STAMPS = 5 * 256 * NCW;
/* stamp kinds: 0 a stage's start, 1 its input in (thread 0's words), 2 its prologue done, 3
 * its epilogue's stores issued */
__device__ __forceinline__ long long *stamp_at(const State &S, int kind, int s)
{
    return S.prof + PROF_STAMPS + ((size_t)kind * 256 + blockIdx.x) * (STAGES + 1) + s;
}
__device__ __forceinline__ void stamp(long long *p)
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
    *p = (long long)t;
}

/* the consumer warps only (the producer never joins a barrier after the split) */
__device__ __forceinline__ void csync() { asm volatile("bar.sync 1, %0;" ::"n"(CT) : "memory"); }

/* Activations pass between blocks with no barrier: each value goes out in one 64-bit word
 * beside the flag of the stage that wrote it (flag0 + stage, unique to a step and stage),
 * and a reader spins on the word until it carries the flag it expects. An aligned 64-bit
 * access is single-copy atomic, so a matching flag means the value beside it is the new
 * one; a block starts a stage as soon as the values it needs are there, with one round
 * trip to L2 and no grid-wide barrier (the "LL" protocol of NCCL's small messages). Every
 * buffer is rewritten only after all its readers have read it: each later write depends
 * on values that those readers produced after their reads. */
__device__ __forceinline__ void st_ll(uint64_t *p, float v, unsigned flag)
{
    uint64_t w = (uint64_t)flag << 32 | __float_as_uint(v);
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(w) : "memory");
}
__device__ __forceinline__ uint64_t ld_word(const uint64_t *p)
{
    uint64_t w;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(w) : "l"(p) : "memory");
    return w;
}
/* Whether a word predates the flag a reader waits for. Flags only grow; in the model a word
 * never carries a later stage's flag while a reader still waits for it (see st_ll), but
 * mode 6 lets stages run ahead, and there a later flag must not leave the reader spinning. */
__device__ __forceinline__ bool stale_word(uint64_t w, unsigned flag) { return (int)((unsigned)(w >> 32) - flag) < 0; }

__device__ __forceinline__ uint64_t ld_ll_word(const uint64_t *p, unsigned flag)
{
    uint64_t w;
    do
        w = ld_word(p);
    while (stale_word(w, flag));
    return w;
}
__device__ __forceinline__ float ld_ll(const uint64_t *p, unsigned flag)
{
    return __uint_as_float((unsigned)ld_ll_word(p, flag));
}
/* This consumer thread's values of src[0 .. n-1] (i = thread, thread + CT, ...; NK >= n /
 * CT), f(i, v) taking each. Every word not yet carrying the flag is asked for again, all of
 * them together, until all do: one round trip a pass, where checking them one at a time
 * (-DV_SERIAL_LL) spins on the first and then pays a round trip for each of the others. */
template <int NK, typename Fn>
__device__ __forceinline__ void ll_gather(const uint64_t *src, int n, unsigned flag, Fn f, int need = 1 << 30)
{
    uint64_t w[NK];
#ifdef V_SERIAL_LL
#pragma unroll
    for (int k = 0; k < NK; k++) {
        int i = threadIdx.x + k * CT;
        if (i < n) w[k] = ld_ll_word(src + i, flag);
    }
#else
    unsigned stale = 0; /* words still to read: all once, those below need until fresh */
#pragma unroll
    for (int k = 0; k < NK; k++)
        if ((int)threadIdx.x + k * CT < n) stale |= 1u << k;
    while (stale) {
#pragma unroll
        for (int k = 0; k < NK; k++)
            if (stale >> k & 1) w[k] = ld_word(src + threadIdx.x + k * CT);
#pragma unroll
        for (int k = 0; k < NK; k++)
            if ((stale >> k & 1) && (!stale_word(w[k], flag) || (int)threadIdx.x + k * CT >= need))
                stale &= ~(1u << k);
    }
#endif
#pragma unroll
    for (int k = 0; k < NK; k++) {
        int i = threadIdx.x + k * CT;
        if (i < n) f(i, __uint_as_float((unsigned)w[k]));
    }
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(~0u, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(~0u, v, o));
    return v;
}
/* a sum or max over the consumer threads (red: NCW floats) */
template <bool MAX> __device__ float block_red(float v, float *red)
{
    int w = threadIdx.x >> 5, lane = threadIdx.x & 31;
    v = MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) red[w] = v;
    csync();
    float r = red[0];
    for (int i = 1; i < NCW; i++) r = MAX ? fmaxf(r, red[i]) : r + red[i];
    csync();
    return r;
}

__device__ __forceinline__ float silu(float g) { return g / (1.f + expf(-g)); }

/* ---------------------------------------------------------------- the stages */

enum Kind { K_QKV, K_ATT, K_O, K_GU, K_D, K_OUT };

struct Seg {
    const __half *w; /* the block's first row */
    int rows, K, acc;
};

struct Stage {
    Kind kind;
    int layer, nseg, r0, nr; /* nr: the block's rows of each segment */
    Seg seg[2];
};

__device__ __forceinline__ void split_rows(int N, int &r0, int &nr)
{
    int G = gridDim.x, b = blockIdx.x;
    r0 = (int)((int64_t)N * b / G);
    nr = (int)((int64_t)N * (b + 1) / G) - r0;
}

/* A stage of one matrix w of N rows, K wide: the block's rows of it. */
__device__ Stage matrix_stage(Kind kind, int layer, const __half *w, int N, int K)
{
    Stage st;
    st.kind = kind;
    st.layer = layer;
    split_rows(N, st.r0, st.nr);
    st.seg[0] = {w + (size_t)st.r0 * K, st.nr, K, 0};
    st.nseg = 1;
    return st;
}

__device__ Stage stage_of(const Model &m, int s)
{
    if (s == STAGES - 1) return matrix_stage(K_OUT, NL, m.wout, V, E);
    int l = s / 5;
    const Layer &L = m.l[l];
    switch (s % 5) {
    case 0: return matrix_stage(K_QKV, l, L.wqkv, QKV, E);
    case 2: return matrix_stage(K_O, l, L.wo, E, E);
    case 3: { /* gate and up rows side by side: the block's rows of both */
        Stage st = matrix_stage(K_GU, l, L.wg, F, E);
        st.seg[1] = {L.wu + (size_t)st.r0 * E, st.nr, E, st.nr};
        st.nseg = 2;
        return st;
    }
    case 4: return matrix_stage(K_D, l, L.wd, E, F);
    default: {
        Stage st;
        st.kind = K_ATT;
        st.layer = l;
        st.nseg = st.r0 = st.nr = 0;
        return st;
    }
    }
}

struct Smem {
    uint64_t *full, *empty;
    uint8_t *ring;
    float *x, *acc, *red, *sc, *q, *k, *v, *xres; /* xres: the block's rows of the residual x */
    int nslot, div; /* div: 1, or 3 where a third of each run of rows is read (mode 5) */
    int need_div;   /* 1, or 8 where a stage waits only for the first eighth of its input (mode 6) */
};

/* Each consumer warp takes a contiguous run of every segment's units (its share, so a row
 * is split between at most two warps) and owns slots w * spw ... w * spw + spw - 1 of the
 * ring. */
__device__ __forceinline__ void warp_range(const Seg &g, int w, int div, int &lo, int &hi)
{
    int step = g.K == KREG ? KREG : UNIT; /* whole rows, for x held in registers (consume_rows) */
    int n = g.rows * g.K / step, a = n * w / NCW, b = n * (w + 1) / NCW;
    lo = a * step;
    hi = (a + (b - a) / div) * step;
}

/* x in shared memory, permuted so that each lane's 8 values of a unit are two float4s that
 * the warp reads as two conflict-free 512-byte runs: lane l's x[8l .. 8l+3] of unit u at
 * u * 256 + 4l, x[8l+4 .. 8l+7] at u * 256 + 128 + 4l. */
__device__ __forceinline__ int xperm(int p)
{
    int u = p >> 8, w = p & 255, l = w >> 3, j = w & 7;
    return (u << 8) | ((j >> 2) << 7) | (l << 2) | (j & 3);
}

/* The producer: every warp's tiles of every stage, the warps in turn, as their slots free up. */
__device__ void produce(const Model &m, const Smem &sm)
{
    uint64_t policy;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
    int spw = sm.nslot / NCW;
    unsigned cnt[NCW];
    for (int w = 0; w < NCW; w++) cnt[w] = 0;
    for (int s = 0; s < STAGES; s++) {
        Stage st = stage_of(m, s);
        /* the block's rows of the next PF_AHEAD stages asked into L2 now, so that when the
         * ring is full (the consumers waiting for activations) memory keeps working for
         * the stages after */
        for (int d = 1; d <= PF_AHEAD && s + d < STAGES; d++) {
            Stage nx = stage_of(m, s + d);
            for (int g = 0; g < nx.nseg; g++)
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(nx.seg[g].w),
                             "r"((unsigned)(nx.seg[g].rows * nx.seg[g].K * 2))
                             : "memory");
        }
        for (int g = 0; g < st.nseg; g++) {
            const uint8_t *src = (const uint8_t *)st.seg[g].w;
            for (int k = 0;; k++) {
                bool any = false;
                for (int w = 0; w < NCW; w++) {
                    int lo, hi;
                    warp_range(st.seg[g], w, sm.div, lo, hi);
                    int e = lo + k * (TILE / 2);
                    if (e >= hi) continue;
                    any = true;
                    unsigned c = cnt[w]++, slot = w * spw + c % spw, n = (unsigned)(hi - e < TILE / 2 ? hi - e : TILE / 2) * 2;
                    if (c >= (unsigned)spw) mbar_wait(&sm.empty[slot], (c / spw - 1) & 1);
                    mbar_expect(&sm.full[slot], n);
                    bulk_load(sm.ring + (size_t)slot * TILE, src + (size_t)e * 2, n, &sm.full[slot], policy);
                }
                if (!any) break;
            }
        }
    }
}

__device__ __forceinline__ void flush(float *acc, float sum, int lane)
{
    sum = warp_sum(sum);
    if (lane == 0) atomicAdd(acc, sum);
}

/* a lane's 8 f16 weights times its 8 values of x, into two chains */
__device__ __forceinline__ void dot8(uint4 wv, float4 a, float4 b, float &s0, float &s1)
{
    const __half2 *h = (const __half2 *)&wv;
    float2 f0 = __half22float2(h[0]), f1 = __half22float2(h[1]), f2 = __half22float2(h[2]), f3 = __half22float2(h[3]);
    s0 = fmaf(f0.x, a.x, s0);
    s1 = fmaf(f0.y, a.y, s1);
    s0 = fmaf(f1.x, a.z, s0);
    s1 = fmaf(f1.y, a.w, s1);
    s0 = fmaf(f2.x, b.x, s0);
    s1 = fmaf(f2.y, b.y, s1);
    s0 = fmaf(f3.x, b.z, s0);
    s1 = fmaf(f3.y, b.w, s1);
}

/* A warp's running row: which row its lanes' sums belong to. */
struct Run {
    int row;
    float s0, s1;
};

/* One tile of the warp's run (elements e0 ... e0 + n - 1 of segment g): units of 256
 * elements in order, each lane 8 elements of a unit against x; a row's sums stay in
 * registers until it ends, in this tile or a later one. */
__device__ void consume_tile(const Seg &g, int e0, int n, const uint8_t *tile, const Smem &sm, Run &run)
{
    int lane = threadIdx.x & 31, nu = n / UNIT, u = 0;
    while (u < nu) {
        int e = e0 + u * UNIT, r = e / g.K, end = (r + 1) * g.K - e0;
        int uend = end / UNIT < nu ? end / UNIT : nu;
        if (r != run.row) {
            if (run.row >= 0) flush(sm.acc + g.acc + run.row, run.s0 + run.s1, lane);
            run.row = r;
            run.s0 = run.s1 = 0.f;
        }
        const float *xp = sm.x + (e - r * g.K) + lane * 4;
        const uint8_t *wp = tile + (size_t)u * UNIT * 2 + lane * 16;
        float s0 = run.s0, s1 = run.s1;
#pragma unroll 2
        for (; u < uend; u++, xp += UNIT, wp += UNIT * 2) {
            uint4 wv = *(const uint4 *)wp;
            float4 a = *(const float4 *)xp, b = *(const float4 *)(xp + 128);
            dot8(wv, a, b, s0, s1);
        }
        run.s0 = s0;
        run.s1 = s1;
    }
}

/* A tile of whole rows KREG wide (row0 its first row of the segment): x in registers,
 * lane l's 8 values of every unit (xr[2u], xr[2u + 1]). */
__device__ void consume_rows(const Seg &g, int row0, int rows, const uint8_t *tile, const float4 *xr, const Smem &sm)
{
    int lane = threadIdx.x & 31;
    for (int r = 0; r < rows; r++) {
        const uint8_t *wp = tile + (size_t)r * KREG * 2 + lane * 16;
        float s0 = 0.f, s1 = 0.f;
#pragma unroll
        for (int u = 0; u < KREG / UNIT; u++) {
            uint4 wv = *(const uint4 *)(wp + u * UNIT * 2);
            float4 a = xr[2 * u], b = xr[2 * u + 1];
            dot8(wv, a, b, s0, s1);
        }
        float t = warp_sum(s0 + s1);
        if (lane == 0) sm.acc[g.acc + row0 + r] = t;
    }
}

/* x (or an embedding row, f16) times gamma over its RMS, into sm.x */
__device__ void norm_into(const uint64_t *x, unsigned flag, const __half *xh, const float *gamma, const Smem &sm,
                          long long *in_stamp)
{
    float ss = 0.f;
    int r0, nr;
    split_rows(E, r0, nr);
    /* gamma's loads all issued together into registers, before x's wait (-DGAMMA_EARLY=0:
     * after it). Session 37 read gamma[i] inside the scaling loop, a load a multiply after
     * x was in (the norm stages' prologue 1.8-2.5 us a layer); session 38, H200, the chain
     * alone: that 458-459 us, these loads after the wait 416, before it 410-414. */
    constexpr int GN = (E + CT - 1) / CT;
    float gr[GN];
    auto load_gamma = [&] {
#pragma unroll
        for (int k = 0; k < GN; k++) gr[k] = threadIdx.x + k * CT < E ? gamma[threadIdx.x + k * CT] : 0.f;
    };
    if (GAMMA_EARLY) load_gamma();
    auto take = [&](int i, float v) {
        sm.x[xperm(i)] = v;
        if (i >= r0 && i < r0 + nr) sm.xres[i - r0] = v;
        ss += v * v;
    };
    if (xh)
        for (int i = threadIdx.x; i < E; i += CT) take(i, __half2float(xh[i]));
    else
        ll_gather<(E + CT - 1) / CT>(x, E, flag, take, sm.need_div > 1 ? E / sm.need_div : E);
    if (threadIdx.x == 0 && in_stamp) stamp(in_stamp);
    float r = rsqrtf(block_red<false>(ss, sm.red) / E + EPS);
    if (!GAMMA_EARLY) load_gamma();
#pragma unroll
    for (int k = 0; k < GN; k++) {
        int i = threadIdx.x + k * CT;
        if (i < E) sm.x[xperm(i)] = sm.x[xperm(i)] * r * gr[k];
    }
}

__device__ __forceinline__ void rope_pair(float &a, float &b, int i, int pos)
{
    float f = (float)pos * powf(THETA, -2.f * i / D), c = cosf(f), s = sinf(f);
    float x = a * c - b * s, y = a * s + b * c;
    a = x;
    b = y;
}

/* Head blockIdx.x of layer l at position pos: q and k rotated, k and v rounded to f16 (the
 * cache's precision) and written to the cache by the group's first head; the current
 * position's key and value are taken from the block's own copy. */
__device__ void attention(const State &S, int l, int pos, unsigned fin, unsigned fout, const Smem &sm,
                          long long *in_stamp)
{
    int h = blockIdx.x, t = threadIdx.x;
    if (h >= H) return;
    int g = h / (H / HKV);
    const uint64_t *qkv = S.lqkv;
    if (t < D / 2) {
        const uint64_t *src[4] = {qkv + h * D + 2 * t, qkv + h * D + 2 * t + 1, qkv + E + g * D + 2 * t,
                                  qkv + E + g * D + 2 * t + 1};
        uint64_t w[4];
#pragma unroll
        for (int k = 0; k < 4; k++) w[k] = ld_word(src[k]); /* in flight together */
#pragma unroll
        for (int k = 0; k < 4; k++)
            while ((unsigned)(w[k] >> 32) != fin) w[k] = ld_word(src[k]);
        float a = __uint_as_float((unsigned)w[0]), b = __uint_as_float((unsigned)w[1]);
        rope_pair(a, b, t, pos);
        sm.q[2 * t] = a;
        sm.q[2 * t + 1] = b;
        a = __uint_as_float((unsigned)w[2]), b = __uint_as_float((unsigned)w[3]);
        rope_pair(a, b, t, pos);
        sm.k[2 * t] = __half2float(__float2half(a));
        sm.k[2 * t + 1] = __half2float(__float2half(b));
    } else if (t < D / 2 + D) {
        int d = t - D / 2;
        sm.v[d] = __half2float(__float2half(ld_ll(qkv + E + HKV * D + g * D + d, fin)));
    }
    if (threadIdx.x == 0 && in_stamp) stamp(in_stamp);
    csync();
    size_t base = (((size_t)l * HKV + g) * CTX) * D;
    if (h % (H / HKV) == 0 && t < D) {
        S.kc[base + (size_t)pos * D + t] = __float2half(sm.k[t]);
        S.vc[base + (size_t)pos * D + t] = __float2half(sm.v[t]);
    }
    int n = pos + 1;
    float mx = -INFINITY;
    for (int j = t; j < n; j += CT) {
        float s = 0.f;
        if (j == pos)
            for (int d = 0; d < D; d++) s += sm.q[d] * sm.k[d];
        else {
            const uint4 *kp = (const uint4 *)(S.kc + base + (size_t)j * D);
            for (int c = 0; c < D / 8; c++) {
                uint4 kv = __ldcg(kp + c);
                const __half2 *k2 = (const __half2 *)&kv;
                for (int i = 0; i < 4; i++) {
                    float2 f = __half22float2(k2[i]);
                    s += sm.q[c * 8 + 2 * i] * f.x + sm.q[c * 8 + 2 * i + 1] * f.y;
                }
            }
        }
        s *= 0.125f;
        sm.sc[j] = s;
        mx = fmaxf(mx, s);
    }
    mx = block_red<true>(mx, sm.red);
    float sum = 0.f;
    for (int j = t; j < n; j += CT) {
        float p = expf(sm.sc[j] - mx);
        sm.sc[j] = p;
        sum += p;
    }
    sum = block_red<false>(sum, sm.red);
    /* out[d] over 8 groups of keys, then the groups summed */
    int d = t % D, grp = t / D;
    float o = 0.f;
    for (int j = grp; j < n; j += CT / D)
        o += sm.sc[j] * (j == pos ? sm.v[d] : __half2float(S.vc[base + (size_t)j * D + d]));
    csync();
    sm.acc[t] = o; /* acc is free during attention */
    csync();
    if (t < D) {
        float r = 0.f;
        for (int k = 0; k < CT / D; k++) r += sm.acc[k * D + t];
        st_ll(S.lao + h * D + t, r / sum, fout);
    }
    csync();
    for (int i = t; i < ACC_MAX; i += CT) sm.acc[i] = 0.f;
}

__device__ void epilogue(const Stage &st, const State &S, unsigned flag, const Smem &sm)
{
    for (int i = threadIdx.x; i < st.nr; i += CT) {
        int r = st.r0 + i;
        float a = sm.acc[i];
        switch (st.kind) {
        case K_QKV: st_ll(S.lqkv + r, a, flag); break;
        case K_O:
        case K_D: {
            float x = sm.xres[i] + a;
            sm.xres[i] = x;
            st_ll(S.lx + r, x, flag);
            break;
        }
        case K_GU:
            st_ll(S.lh + r, silu(a) * sm.acc[st.nr + i], flag);
            sm.acc[st.nr + i] = 0.f;
            break;
        case K_OUT: S.logits[r] = a; break;
        default: break;
        }
        sm.acc[i] = 0.f;
    }
}

/* -DV_DONE: a stage's input is known complete once every block has said it finished the
 * stage before (its flag in done[], written after its stores, release; read here with
 * acquire by one warp, 132 words, instead of every thread polling every value it needs);
 * the values are then read once. Flags only grow, so a block already further on counts. */
__device__ void wait_done(const unsigned *done, unsigned flag)
{
    if (threadIdx.x < 32)
        for (int b = threadIdx.x; b < (int)gridDim.x; b += 32) {
            unsigned v;
            do
                asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(done + b) : "memory");
            while ((int)(v - flag) < 0);
        }
    csync();
}

/* mode (for finding what bounds the step; only 0 computes the model): 1 = tiles consumed
 * without arithmetic and no stage work (the stream alone), 2 = the dot products but no
 * stage work, 3 = every stage's work and the stream but no dot products, 4 = the stages'
 * work alone, no weights read (the chain of dependent stages by itself), 5 = everything
 * with a third of each warp's rows read (0.69 GB a step, about a Q4_K_M model's bytes), 6 =
 * as 4 but each stage waits only for the first eighth of its input (the rest read as it
 * is): how short the chain could get if stages overlapped at row granularity. flag0 + s: the flag of what stage s writes. */
__device__ void consume(const Model &m, const State &S, int tok, int pos, unsigned flag0, const Smem &sm, int mode)
{
    unsigned c = 0;
    long long cyc_wait = 0, cyc_work = 0, cyc_pro = 0, cyc_bar = 0, t_start = clock64();
    for (int s = 0; s < STAGES; s++) {
        Stage st = stage_of(m, s);
        const Layer *L = st.layer < NL ? &m.l[st.layer] : nullptr;
        long long tp = clock64();
#ifdef V_DONE
        if (s > 0 && mode != 1 && mode != 2) wait_done(S.done, flag0 + s - 1);
#endif
        if (threadIdx.x == 0 && S.prof) stamp(stamp_at(S, 0, s));
        long long *prof_in = S.prof ? stamp_at(S, 1, s) : nullptr;
        if (threadIdx.x == 0 && prof_in) *prof_in = 0; /* stages that read nothing leave it 0 */
        switch (mode == 1 || mode == 2 ? -1 : (int)st.kind) {
        case K_QKV:
        case K_OUT: /* x from the last layer's down stage, or the embedding */
            norm_into(S.lx, flag0 + s - 1, st.layer == 0 ? m.emb + (size_t)tok * E : nullptr,
                      L ? L->g_att : m.g_out, sm, prof_in);
            break;
        case K_GU: norm_into(S.lx, flag0 + s - 1, nullptr, L->g_ffn, sm, prof_in); break;
        case K_O:
            ll_gather<(E + CT - 1) / CT>(S.lao, E, flag0 + s - 1, [&](int i, float v) { sm.x[xperm(i)] = v; },
                                         E / sm.need_div);
            if (threadIdx.x == 0 && prof_in) stamp(prof_in);
            break;
        case K_D:
            ll_gather<(F + CT - 1) / CT>(S.lh, F, flag0 + s - 1, [&](int i, float v) { sm.x[xperm(i)] = v; },
                                         F / sm.need_div);
            if (threadIdx.x == 0 && prof_in) stamp(prof_in);
            break;
        case K_ATT: attention(S, st.layer, pos, flag0 + s - 1, flag0 + s, sm, prof_in); break;
        default: break;
        }
        csync();
        cyc_pro += clock64() - tp;
        if (threadIdx.x == 0 && S.prof) stamp(stamp_at(S, 2, s));
        int w = threadIdx.x >> 5, spw = sm.nslot / NCW, lane = threadIdx.x & 31;
        float4 xr[2 * KREG / UNIT];
        if (st.nseg && st.seg[0].K == KREG)
#pragma unroll
            for (int u = 0; u < KREG / UNIT; u++) {
                xr[2 * u] = *(const float4 *)(sm.x + u * UNIT + lane * 4);
                xr[2 * u + 1] = *(const float4 *)(sm.x + u * UNIT + 128 + lane * 4);
            }
        for (int g = 0; g < (mode == 4 || mode == 6 ? 0 : st.nseg); g++) {
            int lo, hi;
            warp_range(st.seg[g], w, sm.div, lo, hi);
            Run run = {-1, 0.f, 0.f};
            for (int e = lo; e < hi; e += TILE / 2, c++) {
                unsigned slot = w * spw + c % spw;
                long long t0 = clock64();
                mbar_wait(&sm.full[slot], (c / spw) & 1);
                long long t1 = clock64();
                int n = hi - e < TILE / 2 ? hi - e : TILE / 2;
                if (mode == 1 || mode == 3)
                    ;
                else if (st.seg[g].K == KREG)
                    consume_rows(st.seg[g], e / KREG, n / KREG, sm.ring + (size_t)slot * TILE, xr, sm);
                else
                    consume_tile(st.seg[g], e, n, sm.ring + (size_t)slot * TILE, sm, run);
                cyc_wait += t1 - t0;
                cyc_work += clock64() - t1;
                __syncwarp();
                if ((threadIdx.x & 31) == 0) mbar_arrive(&sm.empty[slot]);
            }
            if (run.row >= 0) flush(sm.acc + st.seg[g].acc + run.row, run.s0 + run.s1, threadIdx.x & 31);
        }
        if (mode == 1 || mode == 2) continue;
        long long tb = clock64();
        csync();
        cyc_bar += clock64() - tb;
        epilogue(st, S, flag0 + s, sm);
        if (threadIdx.x == 0 && S.prof) stamp(stamp_at(S, 3, s));
#ifdef V_DONE
        csync();
        if (threadIdx.x == 0)
            asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(S.done + blockIdx.x), "r"(flag0 + s) : "memory");
#endif
    }
    if (threadIdx.x == 0 && S.prof) stamp(stamp_at(S, 0, STAGES));
    if ((threadIdx.x & 31) == 0 && S.prof) {
        long long *o = S.prof + (blockIdx.x * NCW + (threadIdx.x >> 5)) * 5;
        o[0] = cyc_wait;
        o[1] = cyc_work;
        o[2] = clock64() - t_start;
        o[3] = cyc_pro;
        o[4] = cyc_bar;
    }
}

__global__ void __launch_bounds__(THREADS, 1)
    step_kernel(const __grid_constant__ Model m, const __grid_constant__ State S, int tok, int pos, unsigned flag0, int nslot, int mode)
{
    extern __shared__ __align__(128) uint8_t smem[];
    Smem sm;
    sm.nslot = nslot;
    sm.div = mode == 5 ? 3 : 1;
    sm.need_div = mode == 6 ? 8 : 1;
    sm.ring = smem;
    uint8_t *p = smem + (size_t)nslot * TILE;
    sm.full = (uint64_t *)p;
    sm.empty = sm.full + nslot;
    sm.x = (float *)(sm.empty + nslot);
    sm.acc = sm.x + F;
    sm.red = sm.acc + ACC_MAX;
    sm.sc = sm.red + 32;
    sm.q = sm.sc + CTX;
    sm.k = sm.q + D;
    sm.v = sm.k + D;
    sm.xres = sm.v + D;
    if (threadIdx.x == 0) {
        for (int i = 0; i < nslot; i++) {
            mbar_init(&sm.full[i], 1);
            mbar_init(&sm.empty[i], 1);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    }
    for (int i = threadIdx.x; i < ACC_MAX; i += THREADS) sm.acc[i] = 0.f;
    __syncthreads();
    if (threadIdx.x >= CT) {
        if (threadIdx.x == CT && mode != 4 && mode != 6) produce(m, sm);
        return;
    }
    consume(m, S, tok, pos, flag0, sm, mode);
}

size_t smem_bytes(int nslot)
{
    return (size_t)nslot * TILE + 2 * nslot * 8 + (F + ACC_MAX + 32 + CTX + 3 * D + 64) * 4;
}

/* ---------------------------------------------------------------- the reference */

__global__ void ref_embed(const __half *emb, int tok, float *x)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < E; i += gridDim.x * blockDim.x)
        x[i] = __half2float(emb[(size_t)tok * E + i]);
}

__global__ void ref_norm(const float *x, const float *g, float *y)
{
    __shared__ float red[32];
    float ss = 0.f;
    for (int i = threadIdx.x; i < E; i += blockDim.x) ss += x[i] * x[i];
    ss = warp_sum(ss);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    float t = 0.f;
    for (int i = 0; i < (int)blockDim.x / 32; i++) t += red[i];
    float r = rsqrtf(t / E + EPS);
    for (int i = threadIdx.x; i < E; i += blockDim.x) y[i] = x[i] * r * g[i];
}

/* a warp a row */
__global__ void ref_matvec(const __half *w, const float *x, float *y, int N, int K)
{
    int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x & 31;
    if (row >= N) return;
    float s = 0.f;
    for (int k = lane; k < K; k += 32) s += __half2float(w[(size_t)row * K + k]) * x[k];
    s = warp_sum(s);
    if (lane == 0) y[row] = s;
}

__global__ void ref_add(float *x, const float *y, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

__global__ void ref_glu(const float *g, const float *u, float *h)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < F) h[i] = silu(g[i]) * u[i];
}

/* one thread: every rotation, then k and v into the cache */
__global__ void ref_rope_cache(float *qkv, __half *kc, __half *vc, int l, int pos)
{
    for (int h = 0; h < H + HKV; h++)
        for (int i = 0; i < D / 2; i++) rope_pair(qkv[h * D + 2 * i], qkv[h * D + 2 * i + 1], i, pos);
    for (int g = 0; g < HKV; g++)
        for (int d = 0; d < D; d++) {
            size_t o = (((size_t)l * HKV + g) * CTX + pos) * D + d;
            kc[o] = __float2half(qkv[E + g * D + d]);
            vc[o] = __float2half(qkv[E + HKV * D + g * D + d]);
        }
}

/* a block a head, the scores in shared memory, softmax by one thread */
__global__ void ref_attn(const float *qkv, const __half *kc, const __half *vc, float *ao, int l, int pos)
{
    __shared__ float sc[CTX];
    int h = blockIdx.x, g = h / (H / HKV), n = pos + 1;
    size_t base = (((size_t)l * HKV + g) * CTX) * D;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
        float s = 0.f;
        for (int d = 0; d < D; d++) s += qkv[h * D + d] * __half2float(kc[base + (size_t)j * D + d]);
        sc[j] = s * 0.125f;
    }
    __syncthreads();
    __shared__ float tot;
    if (threadIdx.x == 0) {
        float mx = -INFINITY, t = 0.f;
        for (int j = 0; j < n; j++) mx = fmaxf(mx, sc[j]);
        for (int j = 0; j < n; j++) t += sc[j] = expf(sc[j] - mx);
        tot = t;
    }
    __syncthreads();
    int d = threadIdx.x;
    if (d < D) {
        float o = 0.f;
        for (int j = 0; j < n; j++) o += sc[j] * __half2float(vc[base + (size_t)j * D + d]);
        ao[h * D + d] = o / tot;
    }
}

struct Ref {
    float *xn, *t1, *t2;
};

static void mv(const __half *w, const float *x, float *y, int N, int K)
{
    ref_matvec<<<(N + 7) / 8, 256>>>(w, x, y, N, K);
}

static void ref_step(const Model &m, const State &S, const Ref &R, int tok, int pos)
{
    ref_embed<<<8, 256>>>(m.emb, tok, S.x);
    for (int l = 0; l < NL; l++) {
        const Layer &L = m.l[l];
        ref_norm<<<1, 1024>>>(S.x, L.g_att, R.xn);
        mv(L.wqkv, R.xn, S.qkv, QKV, E);
        ref_rope_cache<<<1, 1>>>(S.qkv, S.kc, S.vc, l, pos);
        ref_attn<<<H, 256>>>(S.qkv, S.kc, S.vc, S.ao, l, pos);
        mv(L.wo, S.ao, R.t1, E, E);
        ref_add<<<(E + 255) / 256, 256>>>(S.x, R.t1, E);
        ref_norm<<<1, 1024>>>(S.x, L.g_ffn, R.xn);
        mv(L.wg, R.xn, R.t1, F, E);
        mv(L.wu, R.xn, R.t2, F, E);
        ref_glu<<<(F + 255) / 256, 256>>>(R.t1, R.t2, S.h);
        mv(L.wd, S.h, R.t1, E, F);
        ref_add<<<(E + 255) / 256, 256>>>(S.x, R.t1, E);
    }
    ref_norm<<<1, 1024>>>(S.x, m.g_out, R.xn);
    mv(m.wout, R.xn, S.logits, V, E);
}

/* ---------------------------------------------------------------- setup and timing */

__device__ __forceinline__ float hash01(uint64_t i)
{
    i ^= i >> 33;
    i *= 0xff51afd7ed558ccdull;
    i ^= i >> 33;
    i *= 0xc4ceb9fe1a85ec53ull;
    i ^= i >> 33;
    return (float)(i >> 40) * (1.f / 16777216.f);
}

/* uniform in [-a, a] */
__global__ void fill_h(__half *w, size_t n, uint64_t seed, float a)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        w[i] = __float2half((2.f * hash01(seed * 0x9e3779b97f4a7c15ull + i) - 1.f) * a);
}
__global__ void fill_f(float *w, size_t n, uint64_t seed, float lo, float hi)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        w[i] = lo + (hi - lo) * hash01(seed * 0x9e3779b97f4a7c15ull + i);
}

static __half *new_h(size_t n, uint64_t seed, int K)
{
    __half *p;
    CHECK_CUDA(cudaMalloc(&p, n * 2));
    fill_h<<<1024, 256>>>(p, n, seed, sqrtf(3.f / K));
    return p;
}
static float *new_f(size_t n, uint64_t seed, float lo, float hi)
{
    float *p;
    CHECK_CUDA(cudaMalloc(&p, n * 4));
    fill_f<<<64, 256>>>(p, n, seed, lo, hi);
    return p;
}
static State new_state()
{
    State S;
    CHECK_CUDA(cudaMalloc(&S.x, E * 4));
    CHECK_CUDA(cudaMalloc(&S.qkv, QKV * 4));
    CHECK_CUDA(cudaMalloc(&S.ao, E * 4));
    CHECK_CUDA(cudaMalloc(&S.h, F * 4));
    CHECK_CUDA(cudaMalloc(&S.logits, V * 4));
    size_t kv = (size_t)NL * HKV * CTX * D;
    CHECK_CUDA(cudaMalloc(&S.kc, kv * 2));
    CHECK_CUDA(cudaMalloc(&S.vc, kv * 2));
    CHECK_CUDA(cudaMemset(S.kc, 0, kv * 2));
    CHECK_CUDA(cudaMemset(S.vc, 0, kv * 2));
    CHECK_CUDA(cudaMalloc(&S.lx, E * 8));
    CHECK_CUDA(cudaMalloc(&S.lqkv, QKV * 8));
    CHECK_CUDA(cudaMalloc(&S.lao, E * 8));
    CHECK_CUDA(cudaMalloc(&S.lh, F * 8));
    CHECK_CUDA(cudaMalloc(&S.done, 256 * 4));
    CHECK_CUDA(cudaMemset(S.done, 0, 256 * 4));
    CHECK_CUDA(cudaMemset(S.lx, 0, E * 8)); /* flag 0: no stage's */
    CHECK_CUDA(cudaMemset(S.lqkv, 0, QKV * 8));
    CHECK_CUDA(cudaMemset(S.lao, 0, E * 8));
    CHECK_CUDA(cudaMemset(S.lh, 0, F * 8));
    CHECK_CUDA(cudaMalloc(&S.prof, sizeof(long long) * (PROF_STAMPS + 4 * 256 * (STAGES + 1))));
    return S;
}

static float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

static void print_prof(const State &P, int sms)
{
    std::vector<long long> pr(5 * sms * NCW);
    CHECK_CUDA(cudaMemcpy(pr.data(), P.prof, pr.size() * 8, cudaMemcpyDeviceToHost));
    double v[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < sms * NCW; i++)
        for (int k = 0; k < 5; k++) v[k] += pr[5 * i + k];
    printf("a consumer warp's cycles: %.0f%% waiting for tiles, %.0f%% on tiles, %.0f%% stage prologues, %.0f%% "
           "waiting for the block's warps\n",
           100 * v[0] / v[2], 100 * v[1] / v[2], 100 * v[3] / v[2], 100 * v[4] / v[2]);
}

/* Where the last step's time went, by stage kind: the mean over blocks of each stage's span
 * (its start to the next stage's start on that block), and the spread of the stages'
 * starts across blocks (latest minus earliest, the critical path's slack). */
static void print_stages(const State &P, int sms)
{
    size_t per = (size_t)256 * (STAGES + 1);
    std::vector<long long> t(4 * per);
    CHECK_CUDA(cudaMemcpy(t.data(), P.prof + PROF_STAMPS, t.size() * 8, cudaMemcpyDeviceToHost));
    auto at = [&](int kind, int b, int s) { return t[kind * per + (size_t)b * (STAGES + 1) + s]; };
    const char *names[] = {"norm + q/k/v", "attention", "o + add", "norm + gate/up", "down + add", "norm + output"};
    /* per kind, summed over layers, mean over blocks: waiting for the input, the prologue's
     * own work, tiles and epilogue, then on to the next stage's start */
    double v[6][4] = {{0}}, skew[6] = {0};
    for (int s = 0; s < STAGES; s++) {
        int k = s == STAGES - 1 ? 5 : s % 5;
        long long lo = at(0, 0, s), hi = lo;
        for (int b = 0; b < sms; b++) {
            long long t0 = at(0, b, s), tin = at(1, b, s) ? at(1, b, s) : t0, tp = at(2, b, s), te = at(3, b, s);
            long long tn = at(0, b, s + 1);
            v[k][0] += (double)(tin - t0) / sms;
            v[k][1] += (double)(tp - tin) / sms;
            v[k][2] += (double)(te - tp) / sms;
            v[k][3] += (double)(tn - te) / sms;
            lo = std::min(lo, t0);
            hi = std::max(hi, t0);
        }
        skew[k] += hi - lo;
    }
    printf("the last step by stage kind, us summed over its layers, mean over blocks (waiting for the input / "
           "prologue / tiles and epilogue / to the next stage; spread of starts):\n");
    for (int k = 0; k < 6; k++)
        printf("  %-15s %6.1f / %6.1f / %6.1f / %6.1f (%.1f)\n", names[k], v[k][0] / 1e3, v[k][1] / 1e3, v[k][2] / 1e3,
               v[k][3] / 1e3, skew[k] / 1e3);
}

static int token_at(int pos) { return (int)((pos * 7919u + 13u) % V); }

int main(int argc, char **argv)
{
    int nslot = argc > 1 ? atoi(argv[1]) : 24, steps = argc > 2 ? atoi(argv[2]) : 128;
    if (nslot < NCW || nslot % NCW) {
        /* a warp's tiles must come back to its own slots, or it could pass a slot's wait on
         * the phase before the one it waits for (the parity repeats) */
        fprintf(stderr, "ring slots (%d) must be a multiple of the consumer warps (%d)\n", nslot, NCW);
        return 1;
    }
    int check = argc > 3 ? atoi(argv[3]) : 64, mode = 0;
    steps = std::min(steps, CTX);
    check = std::min(check, steps);
    setvbuf(stdout, nullptr, _IOLBF, 0);
    int dev = 0, sms = 0;
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    cudaDeviceProp prop;
    CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
    if ((V + sms - 1) / sms > ACC_MAX || sms < H) {
        fprintf(stderr, "%d SMs: too few for this kernel's row split\n", sms);
        return 1;
    }
    Model m;
    size_t wbytes = 0;
    for (int l = 0; l < NL; l++) {
        Layer &L = m.l[l];
        uint64_t s = 100 + 10 * l;
        L.wqkv = new_h((size_t)QKV * E, s, E);
        L.wo = new_h((size_t)E * E, s + 1, E);
        L.wg = new_h((size_t)F * E, s + 2, E);
        L.wu = new_h((size_t)F * E, s + 3, E);
        L.wd = new_h((size_t)E * F, s + 4, F);
        L.g_att = new_f(E, s + 5, 0.8f, 1.2f);
        L.g_ffn = new_f(E, s + 6, 0.8f, 1.2f);
        wbytes += ((size_t)QKV * E + (size_t)E * E + 3 * (size_t)F * E) * 2;
    }
    m.emb = new_h((size_t)V * E, 7, 3); /* entries of about unit size */
    m.wout = new_h((size_t)V * E, 8, E);
    m.g_out = new_f(E, 9, 0.8f, 1.2f);
    wbytes += (size_t)V * E * 2;
    State P = new_state(), Q = new_state();
    Ref R;
    CHECK_CUDA(cudaMalloc(&R.xn, E * 4));
    CHECK_CUDA(cudaMalloc(&R.t1, F * 4));
    CHECK_CUDA(cudaMalloc(&R.t2, F * 4));
    size_t smem = smem_bytes(nslot);
    CHECK_CUDA(cudaFuncSetAttribute(step_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    int per_sm = 0;
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, step_kernel, THREADS, smem));
    if (per_sm < 1) {
        fprintf(stderr, "the kernel does not fit an SM with %zu bytes of shared memory\n", smem);
        return 1;
    }
    CHECK_CUDA(cudaDeviceSynchronize());
    printf("%s, %d SMs; %d ring slots of %d KB (%zu KB shared a block), %.3f GB of weights a step\n", prop.name,
           sms, nslot, TILE / 1024, smem / 1024, wbytes / 1e9);

    cudaStream_t st;
    CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    unsigned flag0 = 0;
    auto launch = [&](int pos) {
        int tok = token_at(pos);
        flag0 += 128; /* > STAGES: every step and stage writes a flag of its own */
        void *args[] = {&m, &P, &tok, &pos, &flag0, &nslot, &mode};
        CHECK_CUDA(cudaLaunchCooperativeKernel((void *)step_kernel, dim3(sms), dim3(THREADS), args, smem, st));
    };

    /* agreement: the first `check` steps, logits against the reference's */
    std::vector<float> a(V), b(V);
    double worst = 0;
    int argmax_diff = 0;
    for (int pos = 0; pos < check; pos++) {
        launch(pos);
        CHECK_CUDA(cudaStreamSynchronize(st));
        ref_step(m, Q, R, token_at(pos), pos);
        CHECK_CUDA(cudaDeviceSynchronize());
        CHECK_CUDA(cudaMemcpy(a.data(), P.logits, V * 4, cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(b.data(), Q.logits, V * 4, cudaMemcpyDeviceToHost));
        double num = 0, den = 0;
        int ia = 0, ib = 0;
        for (int i = 0; i < V; i++) {
            if (!std::isfinite(a[i])) num = INFINITY;
            num += (a[i] - b[i]) * (double)(a[i] - b[i]);
            den += (double)b[i] * b[i];
            if (a[i] > a[ia]) ia = i;
            if (b[i] > b[ib]) ib = i;
        }
        worst = std::max(worst, num / den);
        argmax_diff += ia != ib;
    }
    printf("agreement over %d steps: worst logits NMSE %.3g (limit 1e-6), argmax differs in %d\n", check, worst,
           argmax_diff);
    bool ok = worst < 1e-6 && argmax_diff == 0;

    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    /* what bounds it: the same steps with parts of the work left out (see consume) */
    const char *what[] = {"",
                          "the stream alone",
                          "the stream and the dot products",
                          "all but the dot products",
                          "the stages without weights",
                          "everything, a third of the weights",
                          "no weights, an eighth of each input"};
    int modes = argc > 4 ? atoi(argv[4]) : 15;
    for (mode = 1; mode <= 6; mode++) {
        if (!(modes & 1 << (mode - 1))) continue;
        std::vector<float> t;
        for (int r = 0; r < 9; r++) {
            CHECK_CUDA(cudaEventRecord(e0, st));
            for (int k = 0; k < 8; k++) launch(k);
            CHECK_CUDA(cudaEventRecord(e1, st));
            CHECK_CUDA(cudaEventSynchronize(e1));
            float ms;
            CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
            t.push_back(ms * 1000.f / 8);
        }
        printf("%-34s %7.1f us a step; ", what[mode], median(t));
        print_prof(P, sms);
        if (mode >= 3) print_stages(P, sms);
    }
    mode = 0;
    /* speed: steps from the start, back to back, then each 8-step window's time */
    std::vector<float> per;
    for (int pos = 0; pos < steps; pos += 8) {
        CHECK_CUDA(cudaEventRecord(e0, st));
        for (int k = 0; k < 8; k++) launch(pos + k);
        CHECK_CUDA(cudaEventRecord(e1, st));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        per.push_back(ms * 1000.f / 8);
    }
    float us = median(per);
    /* a device-to-device copy of 1 GiB: the bandwidth yardstick (read + write bytes) */
    size_t cb = (size_t)1 << 30;
    void *c0, *c1;
    CHECK_CUDA(cudaMalloc(&c0, cb));
    CHECK_CUDA(cudaMalloc(&c1, cb));
    std::vector<float> cp;
    for (int r = 0; r < 6; r++) {
        CHECK_CUDA(cudaEventRecord(e0, st));
        CHECK_CUDA(cudaMemcpyAsync(c1, c0, cb, cudaMemcpyDeviceToDevice, st));
        CHECK_CUDA(cudaEventRecord(e1, st));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        if (r) cp.push_back(2.f * cb / (ms * 1e-3f) / 1e9f);
    }
    printf("whole steps: ");
    print_prof(P, sms);
    print_stages(P, sms);
    float copy = median(cp), gbs = wbytes / (us * 1e-6f) / 1e9f;
    printf("step %.1f us (median of %zu 8-step windows, positions 0-%d): %.0f t/s, weights at %.0f GB/s = %.0f%% "
           "of a copy (%.0f GB/s)\n",
           us, per.size(), steps - 1, 1e6f / us, gbs, 100.f * gbs / copy, copy);
    printf("first / last window: %.1f / %.1f us\n", per.front(), per.back());
    return ok ? 0 : 2;
}
