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

/* Each format's chunk(): the 16 quants of chunk c as unsigned bytes in q[4] (q[0], q[1]:
 * the elements from ea on, q[2], q[3]: from eb on; Q8_0's are signed, SIGNED says so) and
 * the affine map of its group, value = a * quant + b. The integer dots (quant_mv.cu) take
 * the bytes as they are; dequantization applies the map. */

__device__ __forceinline__ uint32_t nib_lo(uint32_t w) { return w & 0x0F0F0F0Fu; }
__device__ __forceinline__ uint32_t nib_hi(uint32_t w) { return (w >> 4) & 0x0F0F0F0Fu; }
/* Bits 0..3 of t to bit 0 of bytes 0..3 (the ranges t, t<<7, t<<14, t<<21 do not overlap). */
__device__ __forceinline__ uint32_t spread4(uint32_t t) { return ((t & 0xF) * 0x00204081u) & 0x01010101u; }

/* ---- legacy 32-element blocks: 2 chunks each (chunk h: bytes 8h..8h+7, whose low
 * nibbles are elements 8h.. and high nibbles 16+8h..) ---- */

struct Q4_0 {
    static constexpr int BS = 32, BYTES = 18;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 1;
        int h = c & 1;
        const uint8_t *p = row + blk * BYTES;
        a = h2f((uint16_t)ld16(p));
        b = -8.f * a;
        uint32_t w0 = ld16(p + 2 + 8 * h) | (ld16(p + 4 + 8 * h) << 16), w1 = ld16(p + 6 + 8 * h) | (ld16(p + 8 + 8 * h) << 16);
        q[0] = nib_lo(w0), q[1] = nib_lo(w1), q[2] = nib_hi(w0), q[3] = nib_hi(w1);
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

struct Q4_1 {
    static constexpr int BS = 32, BYTES = 20;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 1;
        int h = c & 1;
        const uint8_t *p = row + blk * BYTES;
        uint32_t dm = ld32(p);
        a = h2f((uint16_t)dm);
        b = h2f((uint16_t)(dm >> 16));
        uint32_t w0 = ld32(p + 4 + 8 * h), w1 = ld32(p + 8 + 8 * h);
        q[0] = nib_lo(w0), q[1] = nib_lo(w1), q[2] = nib_hi(w0), q[3] = nib_hi(w1);
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

/* The fifth bits of elements j..j+7 (low nibbles) and j+16..j+23 (high) into bit 4 of each byte. */
__device__ __forceinline__ void q5_high(uint32_t qh, int j, uint32_t *q)
{
    q[0] |= spread4(qh >> j) << 4;
    q[1] |= spread4(qh >> (j + 4)) << 4;
    q[2] |= spread4(qh >> (j + 16)) << 4;
    q[3] |= spread4(qh >> (j + 20)) << 4;
}

struct Q5_0 {
    static constexpr int BS = 32, BYTES = 22;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 1;
        int h = c & 1;
        const uint8_t *p = row + blk * BYTES;
        a = h2f((uint16_t)ld16(p));
        b = -16.f * a;
        uint32_t qh = ld16(p + 2) | (ld16(p + 4) << 16);
        uint32_t w0 = ld16(p + 6 + 8 * h) | (ld16(p + 8 + 8 * h) << 16), w1 = ld16(p + 10 + 8 * h) | (ld16(p + 12 + 8 * h) << 16);
        q[0] = nib_lo(w0), q[1] = nib_lo(w1), q[2] = nib_hi(w0), q[3] = nib_hi(w1);
        q5_high(qh, 8 * h, q);
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

struct Q5_1 {
    static constexpr int BS = 32, BYTES = 24;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 1;
        int h = c & 1;
        const uint8_t *p = row + blk * BYTES;
        uint32_t dm = ld32(p);
        a = h2f((uint16_t)dm);
        b = h2f((uint16_t)(dm >> 16));
        uint32_t qh = ld32(p + 4);
        uint32_t w0 = ld32(p + 8 + 8 * h), w1 = ld32(p + 12 + 8 * h);
        q[0] = nib_lo(w0), q[1] = nib_lo(w1), q[2] = nib_hi(w0), q[3] = nib_hi(w1);
        q5_high(qh, 8 * h, q);
        ea = blk * BS + 8 * h;
        eb = ea + 16;
    }
};

/* chunk h: elements 16h..16h+15 in order */
struct Q8_0 {
    static constexpr int BS = 32, BYTES = 34;
    static constexpr bool SIGNED = true;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 1;
        int h = c & 1;
        const uint8_t *p = row + blk * BYTES;
        a = h2f((uint16_t)ld16(p));
        b = 0.f;
        ld16x8(p + 2 + 16 * h, q);
        ea = blk * BS + 16 * h;
        eb = ea + 8;
    }
};

/* ---- K formats: 256-element super-blocks of 16 chunks; chunk g holds elements
 * 16g..16g+15 in order, except Q4_K/Q5_K's whose chunk (j, p) holds 32j+16p.. ---- */

__device__ __forceinline__ void crumbs(const uint32_t *w, int shift, uint32_t *q)
{
#pragma unroll
    for (int i = 0; i < 4; i++) q[i] = (w[i] >> shift) & 0x03030303u;
}

struct Q2_K {
    static constexpr int BS = 256, BYTES = 84;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 4;
        int g = c & 15;
        const uint8_t *p = row + blk * BYTES;
        uint32_t dd = ld32(p + 80);
        int sc = (int)((ld32(p + (g & ~3)) >> (8 * (g & 3))) & 0xFF);
        a = h2f((uint16_t)dd) * (float)(sc & 0xF);
        b = -h2f((uint16_t)(dd >> 16)) * (float)(sc >> 4);
        uint32_t w[4];
        ld32x4(p + 16 + 32 * (g >> 3) + 16 * (g & 1), w);
        crumbs(w, 2 * ((g & 7) >> 1), q);
        ea = blk * BS + 16 * g;
        eb = ea + 8;
    }
};

/* Q3_K: 2 low bits in qs, the third in hmask (set = no -4): quant q2 | h << 2, map a*q - 4a. */
struct Q3_K {
    static constexpr int BS = 256, BYTES = 110;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 4;
        int g = c & 15;
        const uint8_t *p = row + blk * BYTES;
        float d = h2f((uint16_t)ld16(p + 108));
        const uint8_t *s = p + 96;
        int lo4 = g < 8 ? (int)(ld16(s + (g & ~1)) >> (8 * (g & 1))) & 0xF
                        : (int)(ld16(s + ((g - 8) & ~1)) >> (8 * (g & 1) + 4)) & 0xF;
        int j2 = 8 + (g & 3);
        int hi2 = (int)(ld16(s + (j2 & ~1)) >> (8 * (j2 & 1) + 2 * (g >> 2))) & 3;
        a = d * (float)((lo4 | (hi2 << 4)) - 32);
        b = -4.f * a;
        uint32_t w[4], hm[4];
        ld16x8(p + 32 + 32 * (g >> 3) + 16 * (g & 1), w);
        ld16x8(p + 16 * (g & 1), hm);
        crumbs(w, 2 * ((g & 7) >> 1), q);
        int hb = g >> 1;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] |= ((hm[i] >> hb) & 0x01010101u) << 2;
        ea = blk * BS + 16 * g;
        eb = ea + 8;
    }
};

/* Scale and min of group j of a Q4_K/Q5_K block from its 12 packed bytes (3 u32), by
 * shifts only: an index into s that depends on j would put s in local memory. */
__device__ __forceinline__ void k4_scale_min(const uint32_t *s, int j, int &sc, int &m)
{
    int sh = 8 * (j & 3);
    uint32_t a = s[0] >> sh, b = s[1] >> sh, c = s[2] >> sh;
    if (j < 4) {
        sc = (int)(a & 63);
        m = (int)(b & 63);
    } else {
        sc = (int)((c & 0xF) | ((a >> 2) & 0x30));
        m = (int)(((c >> 4) & 0xF) | ((b >> 2) & 0x30));
    }
}

struct Q4_K {
    static constexpr int BS = 256, BYTES = 144;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 4;
        int j = (c & 15) >> 1, pp = c & 1;
        const uint8_t *p = row + blk * BYTES;
        uint32_t hd[4];
        ld128(p, hd); /* d, dmin and the 12 scale bytes */
        int sc, m;
        k4_scale_min(hd + 1, j, sc, m);
        a = h2f((uint16_t)hd[0]) * (float)sc;
        b = -h2f((uint16_t)(hd[0] >> 16)) * (float)m;
        uint32_t w[4];
        ld128(p + 16 + 32 * (j >> 1) + 16 * pp, w);
        int shift = 4 * (j & 1);
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = (w[i] >> shift) & 0x0F0F0F0Fu;
        ea = blk * BS + 32 * j + 16 * pp;
        eb = ea + 8;
    }
};

struct Q5_K {
    static constexpr int BS = 256, BYTES = 176;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 4;
        int j = (c & 15) >> 1, pp = c & 1;
        const uint8_t *p = row + blk * BYTES;
        uint32_t hd[4];
        ld128(p, hd);
        int sc, m;
        k4_scale_min(hd + 1, j, sc, m);
        a = h2f((uint16_t)hd[0]) * (float)sc;
        b = -h2f((uint16_t)(hd[0] >> 16)) * (float)m;
        uint32_t w[4], qh[4];
        ld128(p + 48 + 32 * (j >> 1) + 16 * pp, w);
        ld128(p + 16 + 16 * pp, qh);
        int shift = 4 * (j & 1);
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = ((w[i] >> shift) & 0x0F0F0F0Fu) | (((qh[i] >> j) & 0x01010101u) << 4);
        ea = blk * BS + 32 * j + 16 * pp;
        eb = ea + 8;
    }
};

struct Q6_K {
    static constexpr int BS = 256, BYTES = 210;
    static constexpr bool SIGNED = false;
    __device__ static void chunk(const uint8_t *row, int c, uint32_t *q, float &a, float &b, int &ea, int &eb)
    {
        int blk = c >> 4;
        int g = c & 15;
        const uint8_t *p = row + blk * BYTES;
        float d = h2f((uint16_t)ld16(p + 208));
        int sc = (int)(int8_t)(ld16(p + 192 + (g & ~1)) >> (8 * (g & 1)));
        a = d * (float)sc;
        b = -32.f * a;
        int h = g >> 3, k = (g & 7) >> 1, l0 = 16 * (g & 1);
        uint32_t ql[4], qh[4];
        ld16x8(p + 64 * h + l0 + 32 * (k & 1), ql);
        ld16x8(p + 128 + 32 * h + l0, qh);
        int sl = 4 * (k >> 1), sh = 2 * k;
#pragma unroll
        for (int i = 0; i < 4; i++) q[i] = ((ql[i] >> sl) & 0x0F0F0F0Fu) | (((qh[i] >> sh) & 0x03030303u) << 4);
        ea = blk * BS + 16 * g;
        eb = ea + 8;
    }
};

/* Byte i of q as a float: unsigned bytes through the exponent trick (a PRMT and an FADD,
 * full rate, where an int-to-float conversion is quarter rate). */
template <bool SIGNED> __device__ __forceinline__ float byte_f(const uint32_t *q, int i)
{
    uint32_t w = q[i >> 2];
    if (SIGNED) w ^= 0x80808080u; /* int8 -> int8 + 128, unsigned */
    float f = __int_as_float((int)__byte_perm(w, 0x4B000000u, (unsigned)(i & 3) | 0x7540u)) - 8388608.f;
    return SIGNED ? f - 128.f : f;
}

/* The 16 dequantized values of chunk c: v[0..7] at ea, v[8..15] at eb. */
template <class F>
__device__ __forceinline__ void deq_chunk(const uint8_t *row, int c, float *v, int &ea, int &eb)
{
    uint32_t q[4];
    float a, b;
    F::chunk(row, c, q, a, b, ea, eb);
#pragma unroll
    for (int i = 0; i < 16; i++) v[i] = fmaf(a, byte_f<F::SIGNED>(q, i), b);
}

/* s + the 8 products of v with (a, b), fused in order. */
__device__ __forceinline__ float fma8(float4 a, float4 b, const float *v, float s)
{
    s = fmaf(v[0], a.x, s);
    s = fmaf(v[1], a.y, s);
    s = fmaf(v[2], a.z, s);
    s = fmaf(v[3], a.w, s);
    s = fmaf(v[4], b.x, s);
    s = fmaf(v[5], b.y, s);
    s = fmaf(v[6], b.z, s);
    return fmaf(v[7], b.w, s);
}

/* s + the 8 products of v with x[0..8) (16-byte aligned, read through the read-only
 * cache), fused in order: the dequantized run of a chunk against f32 x. */
__device__ __forceinline__ float dot8(const float *__restrict__ x, const float *v, float s)
{
    return fma8(__ldg((const float4 *)x), __ldg((const float4 *)x + 1), v, s);
}

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
