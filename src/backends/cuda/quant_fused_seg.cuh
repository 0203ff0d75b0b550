/* Segment dots of the fused job kernel (quant_fused.cuh) for Q6_K (TinyLlama Q4_K_M's
 * down and output weights), whose 2-byte aligned 210-byte blocks cost the chunk path 16
 * two-byte loads per 16 elements. A warp takes its row share in rounds of 8 blocks: it
 * first copies the round's bytes into its own shared-memory buffer with 16-byte loads of
 * consecutive lanes (every 32-byte sector of the weight read once, by one instruction, the
 * round's whole span in flight at once), then each lane decodes one 64-element segment
 * from shared memory.
 * Loads straight from global memory in the segments' order touch 32 sectors per instruction
 * and read each sector several times (Q6_K's 2-byte aligned blocks worst: measured 28% of
 * copy against 41% for the chunk path). Weight loads bypass L1 (each byte is read once;
 * x and its sums stay in L1). Measured on the H100 (bench/cuda_quant.c): Q6_K 2048x5632
 * 7.71 -> 7.41 us, 32000x2048 34.97 -> 32.89 us. The same staging for Q4_K (16-byte aligned
 * blocks, whose chunk path already loads 16 bytes a lane) was slower: gate/up 9.0 -> 15.8 us. */
#ifndef CT_CUDA_QUANT_FUSED_SEG_CUH
#define CT_CUDA_QUANT_FUSED_SEG_CUH

#include <stdint.h>

#include "backends/cuda/pdl.cuh"
#include "backends/cuda/quant_deq.cuh"
#include "backends/cuda/quant_kernels.h"

namespace cufu {

__device__ __forceinline__ uint4 ldw128(const void *p)
{
    uint4 v;
    asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(p));
    return v;
}

__device__ __forceinline__ uint32_t lds32(const uint8_t *p) { return *(const uint32_t *)p; }

/* A load of x's q8 form or f32 copy: from shared memory where the job kernel staged them
 * (SH), else from global memory, where the kernel before wrote them (cupdl::ld_act). */
template <bool SH, class T> __device__ __forceinline__ T ldx(const T *p)
{
    if constexpr (SH) return *p;
    else return cupdl::ld_act(p);
}

/* The n words of bytes [p, p + 4n) of shared memory where p is 2-byte aligned: n + 1
 * aligned words when p is not 4-byte aligned (inside the staged span). */
template <int n> struct Words {
    uint32_t w[n + 1];
};
template <int n> __device__ __forceinline__ void load_words(const uint8_t *p, bool mis, Words<n> &r)
{
    const uint8_t *b = p - (mis ? 2 : 0);
#pragma unroll
    for (int i = 0; i < n; i++) r.w[i] = lds32(b + 4 * i);
    r.w[n] = mis ? lds32(b + 4 * n) : 0u;
}
template <int n> __device__ __forceinline__ uint32_t word_at(const Words<n> &r, bool mis, int i)
{
    return mis ? __funnelshift_r(r.w[i], r.w[i + 1], 16) : r.w[i];
}

/* Q6_K: segment g (4 per 210-byte block) = half h = (g >> 1) & 1, lanes l0 = 16 (g & 1):
 * ql[64h + l0..] (elements 128h + l0.. low nibbles, 128h + 64 + l0.. high), ql[64h + 32 + l0..]
 * (128h + 32 + l0.., 128h + 96 + l0..), qh[32h + l0..] (their two high bits, quarter k in
 * bits 2k), scales 8h + (g & 1) + 2k, and d. Blocks are 2-byte aligned: every piece of a
 * block shares its misalignment. */
struct SegQ6K {
    static constexpr int BYTES = 210;
    struct Raw {
        Words<4> a, b, h;
        Words<2> s;
        uint32_t d; /* bit 16: the block is not 4-byte aligned */
    };
    __device__ static __forceinline__ void load(const uint8_t *row, int g, Raw &r)
    {
        const uint8_t *p = row + (g >> 2) * BYTES;
        bool mis = ((uintptr_t)p & 2) != 0;
        int hh = (g >> 1) & 1, l0 = 16 * (g & 1);
        load_words<4>(p + 64 * hh + l0, mis, r.a);
        load_words<4>(p + 64 * hh + 32 + l0, mis, r.b);
        load_words<4>(p + 128 + 32 * hh + l0, mis, r.h);
        load_words<2>(p + 192 + 8 * hh, mis, r.s);
        r.d = (uint32_t)*(const unsigned short *)(p + 208) | (mis ? 0x10000u : 0u);
    }
    template <int M, bool SH>
    __device__ static __forceinline__ void dot(const Raw &r, int g, int64_t K, const int8_t *__restrict__ xq,
                                               const float *__restrict__ xd, const float *__restrict__ xs8, float *acc)
    {
        bool mis = (r.d >> 16) != 0;
        float d = cuq::h2f((uint16_t)r.d);
        uint32_t A[4], B[4], H[4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            A[i] = word_at(r.a, mis, i);
            B[i] = word_at(r.b, mis, i);
            H[i] = word_at(r.h, mis, i);
        }
        /* scale of quarter k: byte (g & 1) + 2k of the 8 scale bytes */
        uint32_t s0 = word_at(r.s, mis, 0), s1 = word_at(r.s, mis, 1);
        int sh = 8 * (g & 1);
        float a[4] = {d * (float)(int8_t)(s0 >> sh), d * (float)(int8_t)(s0 >> (sh + 16)),
                      d * (float)(int8_t)(s1 >> sh), d * (float)(int8_t)(s1 >> (sh + 16))};
        /* quarter k's 16 quants (6 bits, unsigned; value = a * (q - 32)) */
        uint32_t q[4][4];
#pragma unroll
        for (int i = 0; i < 4; i++) {
            q[0][i] = (A[i] & 0x0F0F0F0Fu) | ((H[i] << 4) & 0x30303030u);
            q[1][i] = (B[i] & 0x0F0F0F0Fu) | ((H[i] << 2) & 0x30303030u);
            q[2][i] = ((A[i] >> 4) & 0x0F0F0F0Fu) | (H[i] & 0x30303030u);
            q[3][i] = ((B[i] >> 4) & 0x0F0F0F0Fu) | ((H[i] >> 2) & 0x30303030u);
        }
        /* element of quarter k, lane i: 256 blk + 128 h + 32 k + l0 + i */
        int64_t e = 256 * (int64_t)(g >> 2) + 128 * ((g >> 1) & 1) + 16 * (g & 1);
#pragma unroll
        for (int m = 0; m < M; m++) {
            float4 dx = ldx<SH>((const float4 *)(xd + m * (K / 32) + (e >> 5)));
            float dxs[4] = {dx.x, dx.y, dx.z, dx.w};
            float t = acc[m];
#pragma unroll
            for (int k = 0; k < 4; k++) {
                int4 X = ldx<SH>((const int4 *)(xq + m * K + e + 32 * k));
                float2 s2 = ldx<SH>((const float2 *)(xs8 + m * (K / 8) + ((e + 32 * k) >> 3)));
                int si = __dp4a((int)q[k][0], X.x, 0);
                si = __dp4a((int)q[k][1], X.y, si);
                si = __dp4a((int)q[k][2], X.z, si);
                si = __dp4a((int)q[k][3], X.w, si);
                t = fmaf(a[k], fmaf(dxs[k], (float)si, -32.f * (s2.x + s2.y)), t);
            }
            acc[m] = t;
        }
    }
};

/* Blocks per round, and the bytes of a warp's buffer per row: a round's blocks plus the
 * misalignment of their start within a 16-byte granule. */
constexpr int SEG_ROUND = 8;
constexpr int SEG_BUF = (SEG_ROUND * SegQ6K::BYTES + 15 + 15) / 16 * 16;

/* acc[r * M + m] += row r (NR rows of one format) times x's row m, over warp s's share (of
 * S warps per row): rounds of SEG_ROUND blocks, each staged in buf (NR * SEG_BUF bytes of
 * shared memory, this warp's own) and then decoded, segment g = 4 * block + lane % 4 by
 * lane g. Granules of 16 bytes that hold a byte of the round lie in the weight's
 * allocation (allocations are 256-byte aligned), so the staging reads only those. */
template <class SF, int M, int NR, bool SH>
__device__ __forceinline__ void seg_dot(const uint8_t *const *rows, uint8_t *buf, int s, int S, int lane, int64_t K,
                                        const int8_t *__restrict__ xq, const float *__restrict__ xd,
                                        const float *__restrict__ xs8, float *acc)
{
    constexpr int G = SEG_BUF / 16 / 32 + (SEG_BUF / 16 % 32 != 0); /* granules per lane */
    int nblk = (int)(K / 256);
    for (int b0 = SEG_ROUND * s; b0 < nblk; b0 += SEG_ROUND * S) {
        int nb = min(SEG_ROUND, nblk - b0);
        uint4 v[NR][G];
        int off[NR], ng[NR];
#pragma unroll
        for (int r = 0; r < NR; r++) {
            const uint8_t *p0 = rows[r] + (size_t)b0 * SF::BYTES;
            const uint8_t *g0 = (const uint8_t *)((uintptr_t)p0 & ~(uintptr_t)15);
            off[r] = (int)(p0 - g0);
            ng[r] = (off[r] + nb * SF::BYTES + 15) / 16;
#pragma unroll
            for (int i = 0; i < G; i++)
                if (lane + 32 * i < ng[r]) v[r][i] = ldw128(g0 + 16 * (lane + 32 * i));
        }
#pragma unroll
        for (int r = 0; r < NR; r++)
#pragma unroll
            for (int i = 0; i < G; i++)
                if (lane + 32 * i < ng[r]) *(uint4 *)(buf + r * SEG_BUF + 16 * (lane + 32 * i)) = v[r][i];
        __syncwarp();
        if (lane < 4 * nb) {
            typename SF::Raw raw[NR];
#pragma unroll
            for (int r = 0; r < NR; r++) SF::load(buf + r * SEG_BUF + off[r], lane, raw[r]);
#pragma unroll
            for (int r = 0; r < NR; r++) SF::template dot<M, SH>(raw[r], 4 * b0 + lane, K, xq, xd, xs8, acc + r * M);
        }
        __syncwarp(); /* the buffer is free for the next round */
    }
}

/* Whether format t has a segment dot (then a job of such weights only, with x's q8 form
 * given, runs its rows through seg_dot). */
__host__ __device__ __forceinline__ bool seg_format(ct_dtype t) { return t == CT_Q6_K; }

} // namespace cufu

#endif
