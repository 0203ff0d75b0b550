/* The fused job kernel specialised for Q6_K weights (TinyLlama Q4_K_M's down matrices of
 * half the layers and its output projection; every matrix of a Q6_K model), M = 1, x's
 * q8 form given.
 *
 * A 210-byte Q6_K block is only 2-byte aligned, so the generic kernel's chunk path reads it
 * in 2-byte loads (36 a 32-element unit) and the segment path (quant_fused_seg.cuh)
 * copies each warp's round of 8 blocks through shared memory before decoding it (a load
 * round trip, a store and two warp barriers per round, one round in flight per warp).
 * Here a lane takes one 16-byte run of a block's ql (the low and high nibbles of two
 * 16-element chunks, quarters k and k + 2 of one half) with the 16 qh bytes of those
 * elements, two scale bytes and d: every 16-byte window is read as the two aligned
 * 16-byte granules that hold it and shifted into place (a block's runs share its offset
 * within a granule), so 8 lanes read a block's ql and qh in a few wide loads, the
 * granules shared by neighbouring lanes coming from L1. A run's loads are all issued
 * before its math; one format means few registers (61: 4 blocks per SM).
 * Measured on the H100 (bench/cuda_quant.c --jobs, x's q8 form given; generic kernel's
 * segment path -> this one): down 2048x5632 7.45 -> 6.1 us (43 -> 53% of copy), output
 * 32000x2048 33.6 -> 24.3 us (54 -> 76%), gated Q6_K gate/up 14.2 -> 10.9 us.
 * Each 16-element chunk's products are the generic kernel's (chunk_dot: the same
 * formula, quant_deq.cuh's Q6_K quants and map); only which lane adds which chunk, and so
 * the sums' order, differ. CTORCH_CUDA_MVQ6K=0 sends these jobs back to the generic
 * kernel.
 * Jobs of Q4_K and Q6_K parts (TinyLlama Q4_K_M's qkv where v is Q6_K) run here too, each
 * row through its own format's dots (quant_fused_q4k.cuh's for Q4_K): both formats'
 * paths in one kernel (CTORCH_CUDA_MVQ6K=4: the all-Q6_K jobs only). Measured: the qkv
 * job alone 4.13 us in the generic kernel, 4.20 here; in the decode step's timeline its
 * advance 3.71-3.82 -> 3.57 us a launch. */
#include "backends/cuda/quant_fused_q4k.cuh"

namespace cufu {
namespace {

constexpr int Q6K_BYTES = 210, Q6K_RUNS = 8; /* a block: 8 runs of 16 ql bytes, a lane each */

/* Blocks per SM the kernel is built for: 64 registers, as the Q4_K kernel (61 used; the
 * mixed kernel spills 8 bytes). Measured on the H100 (--jobs, x's q8 form given): down
 * 2048x5632 6.07-6.11 us, output 32000x2048 24.1-24.3 us; two runs a lane a round (80
 * registers) 8.41 and 31.5 us, three (128) 7.15 and 39.2; one run at 48 registers (5
 * blocks per SM, no spill) 6.57 and 25.2, at 40 (6 blocks, 8 bytes spilled) 8.28 and 24.8. */
constexpr int Q6K_MIN_BLOCKS = 4;

/* Run ru of a row: the aligned granules around its ql and qh windows, its two scale
 * bytes and the windows' offset (sd), and d. */
struct Q6KRun {
    uint4 l0, l1, h0, h1;
    uint32_t sd; /* bits 0..7, 8..15 the scales of chunks k, k + 2, 16..19 the windows' byte offset */
    uint32_t d; /* the block's d (f16) */
};

__device__ __forceinline__ uint4 ld128c(const uint8_t *p) { return __ldg((const uint4 *)p); }

/* Run i (0..7) of a block: ql[16 i .. 16 i + 15] holds half h = i / 4, quarters kl and
 * kl + 2 (kl = (i / 2) % 2), positions l0 = 16 (i % 2) .. l0 + 15 of each; their high bits
 * are qh[32 h + l0 ..], their scales bytes 8 h + 2 kl + i % 2 and 4 further. */
__device__ __forceinline__ void q6k_load(const uint8_t *row, int ru, Q6KRun &r)
{
    const uint8_t *p = row + (size_t)(ru / Q6K_RUNS) * Q6K_BYTES;
    int i = ru % Q6K_RUNS, h = i >> 2, kl = (i >> 1) & 1;
    unsigned off = (unsigned)((uintptr_t)p & 15);
    const uint8_t *g = p - off; /* the granule of the block's first byte */
    const uint8_t *ql = g + 16 * i, *qh = g + 128 + 32 * h + 16 * (i & 1);
    r.l0 = ld128c(ql);
    r.l1 = ld128c(ql + 16); /* within the block: the windows end 18 bytes or more before it */
    r.h0 = ld128c(qh);
    r.h1 = ld128c(qh + 16);
    const uint8_t *s = p + 192 + 8 * h + 2 * kl; /* 2-byte aligned like the block */
    uint32_t s0 = cuq::ld16(s), s1 = cuq::ld16(s + 4), sh = 8 * (i & 1);
    r.sd = ((s0 >> sh) & 0xFF) | ((s1 >> sh) & 0xFF) << 8 | off << 16;
    r.d = cuq::ld16(p + 208);
}

/* The 16 bytes at byte offset off (even, < 16) of the 32 in a, b. */
__device__ __forceinline__ void window(const uint4 &a, const uint4 &b, unsigned off, uint32_t *w)
{
    uint32_t v[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    bool two = (off & 8) != 0, one = (off & 4) != 0;
    uint32_t t[6], u[5];
#pragma unroll
    for (int j = 0; j < 6; j++) t[j] = two ? v[j + 2] : v[j];
#pragma unroll
    for (int j = 0; j < 5; j++) u[j] = one ? t[j + 1] : t[j];
    unsigned bs = 8 * (off & 3);
#pragma unroll
    for (int j = 0; j < 4; j++) w[j] = __funnelshift_r(u[j], u[j + 1], bs);
}

/* acc[m] += run ru (chunks g0 = 8 h + 2 kl + i % 2 and g0 + 4 of its block) times x's row m,
 * each chunk as chunk_dot computes it. */
template <int M, bool D8>
__device__ __forceinline__ void q6k_run_dot(const Q6KRun &r, int ru, int64_t K, const int8_t *__restrict__ xq,
                                            const float *__restrict__ xd, const float *__restrict__ xs8, float *acc)
{
    unsigned off = r.sd >> 16;
    uint32_t L[4], H[4];
    window(r.l0, r.l1, off, L);
    window(r.h0, r.h1, off, H);
    int i = ru % Q6K_RUNS, kl = (i >> 1) & 1, g0 = 8 * (i >> 2) + 2 * kl + (i & 1);
    float d = cuq::h2f((uint16_t)r.d);
    float a[2] = {d * (float)(int8_t)(r.sd & 0xFF), d * (float)(int8_t)((r.sd >> 8) & 0xFF)};
    /* quarter kl: low nibbles, qh bits 2 kl; quarter kl + 2: high nibbles, bits 2 kl + 4 */
    uint32_t q[2][4];
    int sh = 2 * kl;
#pragma unroll
    for (int j = 0; j < 4; j++) {
        q[0][j] = (L[j] & 0x0F0F0F0Fu) | (((H[j] >> sh) & 0x03030303u) << 4);
        q[1][j] = ((L[j] >> 4) & 0x0F0F0F0Fu) | (((H[j] >> (sh + 4)) & 0x03030303u) << 4);
    }
    int64_t e0 = 256 * (int64_t)(ru / Q6K_RUNS) + 16 * g0; /* chunk c's first element: e0 + 64 c */
#pragma unroll
    for (int m = 0; m < M; m++) {
#pragma unroll
        for (int c = 0; c < 2; c++) {
            int64_t e = e0 + 64 * c;
            int4 x4 = ld_act((const int4 *)(xq + m * K + e));
            float2 s2 = ld_act((const float2 *)(xs8 + m * (K / 8) + e / 8));
            if (D8) { /* x's d8 form: each run of 8 its own scale */
                float2 D = ld_act((const float2 *)(xd + m * (K / 8) + e / 8));
                acc[m] = chunk_dot8(q[c], a[c], -32.f * a[c], x4, D, s2.x + s2.y, acc[m]);
                continue;
            }
            float dx = ld_act(xd + m * (K / 32) + e / 32);
            /* chunk_dot's run layout for an in-order chunk: its 16 quants against X[4h'..4h'+3] */
            int X[8] = {x4.x, x4.y, x4.z, x4.w, x4.x, x4.y, x4.z, x4.w};
            float S[4] = {s2.x, s2.y, s2.x, s2.y};
            acc[m] = chunk_dot<cuq::Q6_K, 0>(q[c], a[c], -32.f * a[c], X, S, dx, acc[m]);
        }
    }
}

/* acc[r * M + m] += row r (of NR) times x's row m over this lane's runs (l0, l0 + step, ...):
 * every row's loads of a run before the math on them. */
template <int M, int NR, bool D8>
__device__ __forceinline__ void q6k_rows(const uint8_t *const *rows, int l0, int step, const FuArgs &a, float *acc)
{
    int64_t K = a.K;
    int nr = (int)(K / 256) * Q6K_RUNS;
    for (int r0 = l0; r0 < nr; r0 += step) {
        Q6KRun r[NR];
#pragma unroll
        for (int i = 0; i < NR; i++) q6k_load(rows[i], r0, r[i]);
#pragma unroll
        for (int i = 0; i < NR; i++) q6k_run_dot<M, D8>(r[i], r0, K, a.xq, a.xd, a.xs8, acc + i * M);
    }
}

/* spec_job with the Q6_K rows above; MIX: parts of Q4_K and Q6_K (the qkv job whose v is
 * Q6_K), each row through its format's dots (uniform per warp: a warp takes one row). */
template <int M, bool GLU, bool MIX, bool RP, bool D8>
__global__ void __launch_bounds__(FU_THREADS, RP ? SPEC_RP_MIN_BLOCKS : Q6K_MIN_BLOCKS) q6k_job_kernel(const FuArgs a)
{
    spec_job<M, GLU, RP>(a, [&](const FuPart &p, const uint8_t *const *rows, int l0, int stride, float *acc) {
        if (MIX && p.wt == CT_Q4_K) q4k_rows<M, 1>(rows, l0, stride, a, acc);
        else q6k_rows<M, GLU ? 2 : 1, D8>(rows, l0, stride, a, acc);
    });
}

/* every lane at least one run (a Q4_K half where there are Q4_K rows: as many per block) */
template <int M, bool GLU, bool MIX, bool RP, bool D8 = false>
void launch(FuArgs &a, int64_t rows, int sm_count, cudaStream_t st)
{
    static int occ;
    spec_launch(q6k_job_kernel<M, GLU, MIX, RP, D8>, occ, a, rows, a.K / 256 * (MIX ? Q4K_HALVES : Q6K_RUNS), sm_count,
                st);
}

/* 0: a part of another format; 1: all Q6_K; 2: Q4_K and Q6_K parts (not gated). */
int q6k_kind(const FuArgs &a, bool glu)
{
    bool q4 = false;
    for (int i = 0; i < a.n_parts; i++) {
        if (a.p[i].wt == CT_Q4_K) q4 = true;
        else if (a.p[i].wt != CT_Q6_K) return 0;
    }
    if (glu) return !q4 && a.up.wt == CT_Q6_K ? 1 : 0;
    return q4 ? 2 : 1;
}

} // namespace

bool launch_q6k_job(FuArgs &a, int64_t M, bool glu, int64_t rows, int sm_count, cudaStream_t st)
{
    if (!dev_facts().q6k || a.stage || !a.xq || M != 1 || a.K % 256 != 0) return false;
    switch (q6k_kind(a, glu)) {
    case 1:
        if (a.xd8) { /* the linear after a gated job (d8_ok: no gated job, no rope epilogue) */
            if (glu || a.rp) return false;
            launch<1, false, false, false, true>(a, rows, sm_count, st);
        } else if (glu) launch<1, true, false, false>(a, rows, sm_count, st); /* no rope epilogue (rope_ok) */
        else if (a.rp) launch<1, false, false, true>(a, rows, sm_count, st);
        else launch<1, false, false, false>(a, rows, sm_count, st);
        return true;
    case 2:
        if (!dev_facts().q6mix || a.xd8) return false;
        if (a.rp) launch<1, false, true, true>(a, rows, sm_count, st);
        else launch<1, false, true, false>(a, rows, sm_count, st);
        return true;
    default: return false;
    }
}

} // namespace cufu
