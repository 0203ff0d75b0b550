/* Device-side dequantization shared by the quant group's kernels: one function per
 * block format that turns chunk c of a row (16 elements sharing one scale) into floats.
 * A chunk's 16 values lie in two runs of 8 consecutive elements, v[0..7] at ea and
 * v[8..15] at eb, so callers can read and write them with vector accesses. Loads are
 * as wide as the format's block alignment allows (u16 for 2-byte blocks, u32 for
 * 4-byte ones, 16 bytes for Q4_K and Q5_K, whose blocks are 16-byte multiples).
 * The formulas follow src/quant's reference dequantizers (quant_legacy.c, quant_k.c). */
#ifndef CT_CUDA_QUANT_DEQ_CUH
#define CT_CUDA_QUANT_DEQ_CUH

#include <cuda_fp16.h>
#include <stdint.h>

#include "quant/quant_blocks.h"

namespace cuq {

__device__ __forceinline__ float h2f(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ uint32_t ld16(const uint8_t *p) { return __ldg((const unsigned short *)p); }
__device__ __forceinline__ uint32_t ld32(const uint8_t *p) { return __ldg((const unsigned int *)p); }
/* Four u32 of 16 bytes at a 2-byte aligned address. */
__device__ __forceinline__ void ld16x8(const uint8_t *p, uint32_t q[4])
{
    const unsigned short *s = (const unsigned short *)p;
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = (uint32_t)__ldg(s + 2 * i) | ((uint32_t)__ldg(s + 2 * i + 1) << 16);
}
__device__ __forceinline__ void ld32x4(const uint8_t *p, uint32_t q[4])
{
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = __ldg((const unsigned int *)p + i);
}
__device__ __forceinline__ void ld128(const uint8_t *p, uint32_t q[4])
{
    uint4 v = __ldg((const uint4 *)p);
    q[0] = v.x;
    q[1] = v.y;
    q[2] = v.z;
    q[3] = v.w;
}
__device__ __forceinline__ int byte_of(const uint32_t *q, int i) { return (int)((q[i >> 2] >> (8 * (i & 3))) & 0xFF); }

/* ---- legacy 32-element blocks: 2 chunks each ---- */

struct Q4_0 {
    static constexpr int BS = 32, BYTES = 18;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 1;
        int h = (int)(c & 1);
        const uint8_t *b = row + blk * BYTES;
        float d = h2f((uint16_t)ld16(b));
        uint32_t q[4];
        const unsigned short *s = (const unsigned short *)(b + 2 + 8 * h);
#pragma unroll
        for (int i = 0; i < 2; i++) q[i] = (uint32_t)__ldg(s + 2 * i) | ((uint32_t)__ldg(s + 2 * i + 1) << 16);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int by = byte_of(q, i);
            v[i] = (float)((by & 0xF) - 8) * d;
            v[8 + i] = (float)((by >> 4) - 8) * d;
        }
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

struct Q4_1 {
    static constexpr int BS = 32, BYTES = 20;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 1;
        int h = (int)(c & 1);
        const uint8_t *b = row + blk * BYTES;
        uint32_t dm = ld32(b);
        float d = h2f((uint16_t)dm), m = h2f((uint16_t)(dm >> 16));
        uint32_t q[2] = {ld32(b + 4 + 8 * h), ld32(b + 8 + 8 * h)};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int by = byte_of(q, i);
            v[i] = (float)(by & 0xF) * d + m;
            v[8 + i] = (float)(by >> 4) * d + m;
        }
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

struct Q5_0 {
    static constexpr int BS = 32, BYTES = 22;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 1;
        int h = (int)(c & 1);
        const uint8_t *b = row + blk * BYTES;
        float d = h2f((uint16_t)ld16(b));
        uint32_t qh = ld16(b + 2) | (ld16(b + 4) << 16);
        uint32_t q[2];
        const unsigned short *s = (const unsigned short *)(b + 6 + 8 * h);
#pragma unroll
        for (int i = 0; i < 2; i++) q[i] = (uint32_t)__ldg(s + 2 * i) | ((uint32_t)__ldg(s + 2 * i + 1) << 16);
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int j = 8 * h + i, by = byte_of(q, i);
            int lo = (by & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (by >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            v[i] = (float)(lo - 16) * d;
            v[8 + i] = (float)(hi - 16) * d;
        }
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

struct Q5_1 {
    static constexpr int BS = 32, BYTES = 24;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 1;
        int h = (int)(c & 1);
        const uint8_t *b = row + blk * BYTES;
        uint32_t dm = ld32(b);
        float d = h2f((uint16_t)dm), m = h2f((uint16_t)(dm >> 16));
        uint32_t qh = ld32(b + 4);
        uint32_t q[2] = {ld32(b + 8 + 8 * h), ld32(b + 12 + 8 * h)};
#pragma unroll
        for (int i = 0; i < 8; i++) {
            int j = 8 * h + i, by = byte_of(q, i);
            int lo = (by & 0xF) | (int)(((qh >> j) & 1) << 4);
            int hi = (by >> 4) | (int)(((qh >> (j + 16)) & 1) << 4);
            v[i] = (float)lo * d + m;
            v[8 + i] = (float)hi * d + m;
        }
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

struct Q8_0 {
    static constexpr int BS = 32, BYTES = 34;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 1;
        int h = (int)(c & 1);
        const uint8_t *b = row + blk * BYTES;
        float d = h2f((uint16_t)ld16(b));
        uint32_t q[4];
        ld16x8(b + 2 + 16 * h, q);
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = (float)(int8_t)byte_of(q, i) * d;
        ea = blk * BS + 16 * h;
        eb = ea + 8;
    }
};

/* ---- K formats: 256-element super-blocks, 16 chunks each ---- */

struct Q2_K {
    static constexpr int BS = 256, BYTES = 84;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 4;
        int g = (int)(c & 15);
        const uint8_t *b = row + blk * BYTES;
        uint32_t dd = ld32(b + 80);
        int sc = (int)((ld32(b + (g & ~3)) >> (8 * (g & 3))) & 0xFF);
        float dl = h2f((uint16_t)dd) * (float)(sc & 0xF), ml = h2f((uint16_t)(dd >> 16)) * (float)(sc >> 4);
        uint32_t q[4];
        ld32x4(b + 16 + 32 * (g >> 3) + 16 * (g & 1), q);
        int shift = 2 * ((g & 7) >> 1);
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = dl * (float)((byte_of(q, i) >> shift) & 3) - ml;
        ea = blk * BS + 16 * g;
        eb = ea + 8;
    }
};

struct Q3_K {
    static constexpr int BS = 256, BYTES = 110;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 4;
        int g = (int)(c & 15);
        const uint8_t *b = row + blk * BYTES;
        float d = h2f((uint16_t)ld16(b + 108));
        const uint8_t *s = b + 96;
        int lo4 = g < 8 ? (int)(ld16(s + (g & ~1)) >> (8 * (g & 1))) & 0xF
                        : (int)(ld16(s + ((g - 8) & ~1)) >> (8 * (g & 1) + 4)) & 0xF;
        int j2 = 8 + (g & 3);
        int hi2 = (int)(ld16(s + (j2 & ~1)) >> (8 * (j2 & 1) + 2 * (g >> 2))) & 3;
        float dl = d * (float)((lo4 | (hi2 << 4)) - 32);
        uint32_t q[4], hm[4];
        ld16x8(b + 32 + 32 * (g >> 3) + 16 * (g & 1), q);
        ld16x8(b + 16 * (g & 1), hm);
        int shift = 2 * ((g & 7) >> 1), hbit = g >> 1;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int qv = (byte_of(q, i) >> shift) & 3;
            if (!((byte_of(hm, i) >> hbit) & 1)) qv -= 4;
            v[i] = dl * (float)qv;
        }
        ea = blk * BS + 16 * g;
        eb = ea + 8;
    }
};

/* Scale and min of group j of a Q4_K/Q5_K block from its 12 packed bytes (3 u32). */
__device__ __forceinline__ void k4_scale_min(const uint32_t *s, int j, int &sc, int &m)
{
    if (j < 4) {
        sc = byte_of(s, j) & 63;
        m = byte_of(s, j + 4) & 63;
    } else {
        sc = (byte_of(s, j + 4) & 0xF) | ((byte_of(s, j - 4) >> 6) << 4);
        m = (byte_of(s, j + 4) >> 4) | ((byte_of(s, j) >> 6) << 4);
    }
}

struct Q4_K {
    static constexpr int BS = 256, BYTES = 144;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 4;
        int j = (int)((c & 15) >> 1), p = (int)(c & 1);
        const uint8_t *b = row + blk * BYTES;
        uint32_t hd[4];
        ld128(b, hd); /* d, dmin and the 12 scale bytes */
        int sc, m;
        k4_scale_min(hd + 1, j, sc, m);
        float dl = h2f((uint16_t)hd[0]) * (float)sc, ml = h2f((uint16_t)(hd[0] >> 16)) * (float)m;
        uint32_t q[4];
        ld128(b + 16 + 32 * (j >> 1) + 16 * p, q);
        int shift = 4 * (j & 1);
#pragma unroll
        for (int i = 0; i < 16; i++) v[i] = dl * (float)((byte_of(q, i) >> shift) & 0xF) - ml;
        ea = blk * BS + 32 * j + 16 * p;
        eb = ea + 8;
    }
};

struct Q5_K {
    static constexpr int BS = 256, BYTES = 176;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 4;
        int j = (int)((c & 15) >> 1), p = (int)(c & 1);
        const uint8_t *b = row + blk * BYTES;
        uint32_t hd[4];
        ld128(b, hd);
        int sc, m;
        k4_scale_min(hd + 1, j, sc, m);
        float dl = h2f((uint16_t)hd[0]) * (float)sc, ml = h2f((uint16_t)(hd[0] >> 16)) * (float)m;
        uint32_t q[4], qh[4];
        ld128(b + 48 + 32 * (j >> 1) + 16 * p, q);
        ld128(b + 16 + 16 * p, qh);
        int shift = 4 * (j & 1);
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int qv = ((byte_of(q, i) >> shift) & 0xF) | (((byte_of(qh, i) >> j) & 1) << 4);
            v[i] = dl * (float)qv - ml;
        }
        ea = blk * BS + 32 * j + 16 * p;
        eb = ea + 8;
    }
};

struct Q6_K {
    static constexpr int BS = 256, BYTES = 210;
    __device__ static void chunk(const uint8_t *row, int64_t c, float *v, int64_t &ea, int64_t &eb)
    {
        int64_t blk = c >> 4;
        int g = (int)(c & 15);
        const uint8_t *b = row + blk * BYTES;
        float d = h2f((uint16_t)ld16(b + 208));
        int sc = (int)(int8_t)(ld16(b + 192 + (g & ~1)) >> (8 * (g & 1)));
        float dl = d * (float)sc;
        int h = g >> 3, k = (g & 7) >> 1, l0 = 16 * (g & 1);
        uint32_t ql[4], qh[4];
        ld16x8(b + 64 * h + l0 + 32 * (k & 1), ql);
        ld16x8(b + 128 + 32 * h + l0, qh);
        int sl = 4 * (k >> 1), sh = 2 * k;
#pragma unroll
        for (int i = 0; i < 16; i++) {
            int qv = ((byte_of(ql, i) >> sl) & 0xF) | (((byte_of(qh, i) >> sh) & 3) << 4);
            v[i] = dl * (float)(qv - 32);
        }
        ea = blk * BS + 16 * g;
        eb = ea + 8;
    }
};

} // namespace cuq

/* Calls BODY with F bound to the format struct of ct_dtype t; `fallback` otherwise. */
#define CUQ_DISPATCH(t, BODY, fallback)                                                                                \
    switch (t) {                                                                                                       \
    case CT_Q4_0: { using F = cuq::Q4_0; BODY; } break;                                                               \
    case CT_Q4_1: { using F = cuq::Q4_1; BODY; } break;                                                               \
    case CT_Q5_0: { using F = cuq::Q5_0; BODY; } break;                                                               \
    case CT_Q5_1: { using F = cuq::Q5_1; BODY; } break;                                                               \
    case CT_Q8_0: { using F = cuq::Q8_0; BODY; } break;                                                               \
    case CT_Q2_K: { using F = cuq::Q2_K; BODY; } break;                                                               \
    case CT_Q3_K: { using F = cuq::Q3_K; BODY; } break;                                                               \
    case CT_Q4_K: { using F = cuq::Q4_K; BODY; } break;                                                               \
    case CT_Q5_K: { using F = cuq::Q5_K; BODY; } break;                                                               \
    case CT_Q6_K: { using F = cuq::Q6_K; BODY; } break;                                                               \
    default: fallback;                                                                                                 \
    }

#endif
