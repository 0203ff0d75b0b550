/* The one-row decode products on GPUs and the step planner's fused launches built on them
 * (quant_mv1.c): program "mv1", apart from quant.cl's general quant kernels. */

/* bias_kind: 0 none, 1 f32, 2 f16, 3 bf16; bstride in elements. */
inline float bias_at(global const uchar *b, ulong off, int kind, long stride, long n)
{
    if (kind == 0) return 0.0f;
    global const uchar *p = b + off;
    if (kind == 1) return ((global const float *)p)[n * stride];
    if (kind == 2) return vload_half(n * stride, (global const half *)p);
    return as_float((uint)((global const ushort *)p)[n * stride] << 16);
}

/* ---- decode on GPUs: one row of x, Q4_K and Q6_K (the formats of a Q4_K_M model) ----
 * A work-group of MV1_LS work-items serves R consecutive weight rows. Work-item t takes the
 * 32-element chunks t, t + MV1_LS, ... of the row (16 bytes of Q4_K nibbles, or 3 x 8
 * bytes of Q6_K), loads the matching 32 values of x once with float4 loads and applies them
 * to the R rows, so x is read once per R rows from the cache. MV1_LS is a multiple of the
 * 8 chunks of a block, so a work-item's chunk position c in the block (and with it the
 * scales it needs) is fixed. quant_mv1.c checks the alignments the vector loads need.
 *
 * Decode streams every weight byte once, so the kernel is built around the memory system:
 * each work-item issues the loads of all its rows (of both weights when gated) before any
 * arithmetic, so a work-group has R x 32 bytes per work-item in flight rather than one
 * row's, and the arithmetic avoids int-to-float conversions (issued at a fraction of the
 * FMA rate on NVIDIA GPUs, one per weight otherwise): a weight q of b bits becomes 1 + q / 2^b
 * by OR-ing it into the mantissa of 1.0 (one shift and one mask per value), and the dot
 * product of a group is recovered as 2^b (sum (1 + q/2^b) x - sum x), with sum x computed
 * once per chunk for all rows. The subtraction cancels at most the b bits that q adds to
 * the float, so the sums keep ~19 of f32's 24 bits (the tests' f64 bound is 1e-9 NMSE).
 *
 * mv1x_r* (below) also serves the step planner's groups (quant_mv1.c): an RMS norm in
 * front, several weights of one x, and add or SWIGLU epilogues. */
#define MV1_LS 64
#define MV1_ONE 0x3F800000u /* 1.0f: the weights go into its mantissa */

inline float hsum4(float4 v) { return (v.s0 + v.s1) + (v.s2 + v.s3); }

/* The half in the low 16 bits of h as a float, from registers (vload_half needs memory):
 * the bits moved into f32's fields and the exponent bias fixed by a multiply, which
 * handles zero and subnormals too; Inf and NaN (exponent 31) get f32's all-ones exponent,
 * so a broken scale poisons the row as vload_half would. */
inline float h16f(uint h)
{
    uint s = (h & 0x8000u) << 16, m = (h & 0x7FFFu) << 13;
    return (h & 0x7C00u) == 0x7C00u ? as_float(s | 0x7F800000u | m) : as_float(s | m) * 0x1p112f;
}

/* u shifted left by s (right by -s), s a compile-time constant after inlining. */
inline uint shl(uint u, int s) { return s >= 0 ? u << s : u >> -s; }

/* sum over the 4 bytes k of u of (1 + n_k / 16) x_k, n_k the nibble at bit 8k + sh. */
inline float nib4f(uint u, int sh, float4 x)
{
    float4 f;
    f.s0 = as_float((shl(u, 19 - sh) & 0x00780000u) | MV1_ONE);
    f.s1 = as_float((shl(u, 11 - sh) & 0x00780000u) | MV1_ONE);
    f.s2 = as_float((shl(u, 3 - sh) & 0x00780000u) | MV1_ONE);
    f.s3 = as_float((shl(u, -5 - sh) & 0x00780000u) | MV1_ONE);
    return dot(f, x);
}

/* Scale and min of 32-group j of a Q4_K block from its packed words s (bytes 4 .. 15). */
inline void q4k_sm(uint sx, uint sy, uint sz, int j, float *sc, float *m)
{
    int sh = 8 * (j & 3);
    uint a = sx >> sh, b = sy >> sh, c = sz >> sh;
    if (j < 4) {
        *sc = (float)(a & 63);
        *m = (float)(b & 63);
    } else {
        *sc = (float)((c & 0xF) | ((a >> 2) & 0x30));
        *m = (float)(((c >> 4) & 0xF) | ((b >> 2) & 0x30));
    }
}

/* x of chunk c of block b: 8 float4 (Q4_K: the low-nibble 16 then the high-nibble 16;
 * Q6_K: 8 values of each of the 4 sets) and the sums each group's scale multiplies
 * (Q4_K: the two halves' in s.s0, s.s1; Q6_K: each set's). */
typedef struct {
    float4 v[8];
    float4 s;
} mv1_x;

inline void q4_k_x(global const float *x, long b, int c, mv1_x *o)
{
    int j = 2 * (c / 2), l0 = 16 * (c % 2);
    global const float4 *p = (global const float4 *)(x + b * 256 + 32 * j + l0);
    for (int i = 0; i < 4; i++) o->v[i] = p[i], o->v[4 + i] = p[8 + i];
}

inline void q6_k_x(global const float *x, long b, int c, mv1_x *o)
{
    int h = c / 4, l0 = 8 * (c % 4);
    global const float4 *p = (global const float4 *)(x + b * 256 + 128 * h + l0);
    for (int s = 0; s < 4; s++) o->v[2 * s] = p[8 * s], o->v[2 * s + 1] = p[8 * s + 1];
}

/* A Q4_K chunk's bytes: the block's head (d, dmin, 12 bytes of scales: one 16-byte load)
 * and 16 bytes of nibbles. */
typedef struct {
    uint4 hd, q;
} q4k_w;

inline q4k_w q4_k_load(global const uchar *blk, int c)
{
    q4k_w w;
    w.hd = *(global const uint4 *)blk;
    w.q = *(global const uint4 *)(blk + 16 + 16 * c);
    return w;
}

/* A Q4_K chunk's block scales (d, dmin) and its two 32-groups' scales and mins. */
typedef struct {
    float d, dmin, sc0, m0, sc1, m1;
} q4k_hd;

inline q4k_hd q4k_head(uint4 hd, int c)
{
    q4k_hd h;
    int j = 2 * (c / 2);
    q4k_sm(hd.y, hd.z, hd.w, j, &h.sc0, &h.m0);
    q4k_sm(hd.y, hd.z, hd.w, j + 1, &h.sc1, &h.m1);
    h.d = h16f(hd.x), h.dmin = h16f(hd.x >> 16);
    return h;
}

inline float q4_k_dot(q4k_w w, int c, const mv1_x *x)
{
    q4k_hd h = q4k_head(w.hd, c);
    float fl = (nib4f(w.q.x, 0, x->v[0]) + nib4f(w.q.y, 0, x->v[1])) + (nib4f(w.q.z, 0, x->v[2]) + nib4f(w.q.w, 0, x->v[3]));
    float fh = (nib4f(w.q.x, 4, x->v[4]) + nib4f(w.q.y, 4, x->v[5])) + (nib4f(w.q.z, 4, x->v[6]) + nib4f(w.q.w, 4, x->v[7]));
    float dl = 16.0f * (fl - x->s.s0), dh = 16.0f * (fh - x->s.s1); /* sum q x of each half */
    return h.d * (h.sc0 * dl + h.sc1 * dh) - h.dmin * (h.m0 * x->s.s0 + h.m1 * x->s.s1);
}

/* A Q6_K chunk c = (h, l0): ql bytes 64h + l0 .. +7 (low nibbles: set 0, high: set 2) and
 * 64h + 32 + l0 .. +7 (sets 1 and 3), qh bytes 32h + l0 .. +7 (2 bits per set), the 4
 * sets' scales and d; set s is elements 128h + 32s + l0 .. +7. Blocks are 210 bytes, so
 * only 2-byte loads are aligned. */
typedef struct {
    uint la0, la1, lb0, lb1, h0, h1;
    char4 sc;
    float d;
} q6k_w;

inline uint u2(ushort2 v) { return (uint)v.x | ((uint)v.y << 16); }

inline q6k_w q6_k_load(global const uchar *blk, int c)
{
    int h = c / 4, l0 = 8 * (c % 4), g0 = 8 * h + l0 / 16;
    global const ushort *la = (global const ushort *)(blk + 64 * h + l0);
    global const ushort *lb = (global const ushort *)(blk + 64 * h + 32 + l0);
    global const ushort *hh = (global const ushort *)(blk + 128 + 32 * h + l0);
    global const char *sc = (global const char *)(blk + 192 + g0);
    q6k_w w;
    w.la0 = u2(vload2(0, la)), w.la1 = u2(vload2(1, la));
    w.lb0 = u2(vload2(0, lb)), w.lb1 = u2(vload2(1, lb));
    w.h0 = u2(vload2(0, hh)), w.h1 = u2(vload2(1, hh));
    w.sc = (char4)(sc[0], sc[2], sc[4], sc[6]);
    w.d = vload_half(0, (global const half *)(blk + 208));
    return w;
}

/* sum over the 4 bytes of (1 + q / 64) x, q the 6-bit values: 4 bits of l at lsh, 2 of h at hsh. */
inline float q6_4f(uint l, uint h, int lsh, int hsh, float4 x)
{
    uint q = ((l >> lsh) & 0x0F0F0F0Fu) | (((h >> hsh) & 0x03030303u) << 4); /* 4 values, one a byte */
    float4 f;
    f.s0 = as_float(((q << 17) & 0x007E0000u) | MV1_ONE);
    f.s1 = as_float(((q << 9) & 0x007E0000u) | MV1_ONE);
    f.s2 = as_float(((q << 1) & 0x007E0000u) | MV1_ONE);
    f.s3 = as_float(((q >> 7) & 0x007E0000u) | MV1_ONE);
    return dot(f, x);
}

inline float q6_k_dot(q6k_w w, const mv1_x *x)
{
    /* sum (q - 32) x = 64 (sum (1 + q/64) x - sum x) - 32 sum x */
    float f0 = q6_4f(w.la0, w.h0, 0, 0, x->v[0]) + q6_4f(w.la1, w.h1, 0, 0, x->v[1]);
    float f1 = q6_4f(w.lb0, w.h0, 0, 2, x->v[2]) + q6_4f(w.lb1, w.h1, 0, 2, x->v[3]);
    float f2 = q6_4f(w.la0, w.h0, 4, 4, x->v[4]) + q6_4f(w.la1, w.h1, 4, 4, x->v[5]);
    float f3 = q6_4f(w.lb0, w.h0, 4, 6, x->v[6]) + q6_4f(w.lb1, w.h1, 4, 6, x->v[7]);
    float4 f = (float4)(f0, f1, f2, f3);
    float4 t = 64.0f * f - 96.0f * x->s;
    return w.d * dot(convert_float4(w.sc), t);
}

/* ---- Q5_K weights (format 9; the mv1xk and mv1rk kernels, which take Q6_K too) ----
 * A Q5_K chunk is a Q4_K chunk (the block's 16-byte head, 16 bytes of nibbles at 48 + 16c)
 * plus the 16 bytes of fifth bits of its elements (qh, at 16 + 16(c % 2)): bit 2(c / 2) of
 * each for the low half, the next bit for the high half. Blocks are 176 bytes, so every
 * load is 16 bytes. x is Q4_K's (the same elements in the same order). */
typedef struct {
    uint4 hd, h, q;
} q5k_w;

inline q5k_w q5_k_load(global const uchar *blk, int c)
{
    q5k_w w;
    w.hd = *(global const uint4 *)blk;
    w.h = *(global const uint4 *)(blk + 16 + 16 * (c % 2));
    w.q = *(global const uint4 *)(blk + 48 + 16 * c);
    return w;
}

/* sum over the 4 bytes t of (1 + q_t / 2^(lb + 1)) x_t: q_t the lb bits at bit 8t + sh of u
 * plus 2^lb times bit 8t + hb of h (Q5_K: lb 4, Q3_K: lb 2; constants after inlining). */
inline float qh_4f(uint u, int sh, int lb, uint h, int hb, float4 x)
{
    int lo = 22 - lb; /* the low bits' place in the mantissa, the high bit's 22 */
    uint m = ((1u << lb) - 1u) << lo;
    float4 f;
    f.s0 = as_float((shl(u, lo - sh) & m) | (shl(h, 22 - hb) & 0x00400000u) | MV1_ONE);
    f.s1 = as_float((shl(u, lo - 8 - sh) & m) | (shl(h, 14 - hb) & 0x00400000u) | MV1_ONE);
    f.s2 = as_float((shl(u, lo - 16 - sh) & m) | (shl(h, 6 - hb) & 0x00400000u) | MV1_ONE);
    f.s3 = as_float((shl(u, lo - 24 - sh) & m) | (shl(h, -2 - hb) & 0x00400000u) | MV1_ONE);
    return dot(f, x);
}

inline float q5_k_dot(q5k_w w, int c, const mv1_x *x)
{
    q4k_hd h = q4k_head(w.hd, c);
    uint4 b = w.h >> (uint)(2 * (c / 2)); /* the chunk's two bits at bits 0 and 1 of each byte */
    float fl = (qh_4f(w.q.x, 0, 4, b.x, 0, x->v[0]) + qh_4f(w.q.y, 0, 4, b.y, 0, x->v[1])) +
               (qh_4f(w.q.z, 0, 4, b.z, 0, x->v[2]) + qh_4f(w.q.w, 0, 4, b.w, 0, x->v[3]));
    float fh = (qh_4f(w.q.x, 4, 4, b.x, 1, x->v[4]) + qh_4f(w.q.y, 4, 4, b.y, 1, x->v[5])) +
               (qh_4f(w.q.z, 4, 4, b.z, 1, x->v[6]) + qh_4f(w.q.w, 4, 4, b.w, 1, x->v[7]));
    float dl = 32.0f * (fl - x->s.s0), dh = 32.0f * (fh - x->s.s1); /* sum q x of each half */
    return h.d * (h.sc0 * dl + h.sc1 * dh) - h.dmin * (h.m0 * x->s.s0 + h.m1 * x->s.s1);
}

/* ---- Q2_K and Q3_K weights (formats 10 and 11; the mv1xs and mv1rs kernels, which take Q4_K
 * too: Q2_K and Q3_K_M files pair them with Q4_K in a layer's q/k/v and down) ----
 * Chunk c is Q6_K's shape: qs bytes 32n + l0 .. +7 (n = c / 4, l0 = 8(c % 4)), whose bit pairs
 * 2j are set j's 8 elements 128n + 32j + l0 .., so x is Q6_K's (mv1_load_x(1, ...): sums per
 * set). Set j's scale is sub-block 8n + 2j + (c % 4) / 2's. Q3_K adds the hmask bytes l0 ..
 * +7, whose bit 4n + j is the set's third bit (value q + 4 h - 4). A q of b bits meets x as
 * 1 + q / 2^b, as everywhere in this file. Q2_K blocks (84 bytes) allow 4-byte loads, Q3_K's
 * (110) 2-byte ones. */
typedef struct {
    uint q0, q1, sa, sb, dm; /* the chunk's qs; scale bytes 8n .. 8n + 7; d and dmin */
} q2k_w;

inline q2k_w q2_k_load(global const uchar *blk, int c)
{
    int n = c / 4, l0 = 8 * (c % 4);
    global const uint *p = (global const uint *)blk;
    q2k_w w;
    w.sa = p[2 * n], w.sb = p[2 * n + 1];
    w.q0 = p[4 + 8 * n + l0 / 4], w.q1 = p[5 + 8 * n + l0 / 4];
    w.dm = p[20];
    return w;
}

/* sum over the 4 bytes t of u of (1 + q_t / 4) x_t, q_t bits 8t + sh, 8t + sh + 1 of u */
inline float q2_4f(uint u, int sh, float4 x)
{
    float4 f;
    f.s0 = as_float((shl(u, 21 - sh) & 0x00600000u) | MV1_ONE);
    f.s1 = as_float((shl(u, 13 - sh) & 0x00600000u) | MV1_ONE);
    f.s2 = as_float((shl(u, 5 - sh) & 0x00600000u) | MV1_ONE);
    f.s3 = as_float((shl(u, -3 - sh) & 0x00600000u) | MV1_ONE);
    return dot(f, x);
}

inline float q2_k_dot(q2k_w w, int c, const mv1_x *x)
{
    int hb = 8 * ((c % 4) / 2);
    uint a = w.sa >> hb, b = w.sb >> hb; /* set j's byte: bits 0 and 16 of a (j 0, 1), of b (j 2, 3) */
    float4 F = (float4)(q2_4f(w.q0, 0, x->v[0]) + q2_4f(w.q1, 0, x->v[1]), q2_4f(w.q0, 2, x->v[2]) + q2_4f(w.q1, 2, x->v[3]),
                        q2_4f(w.q0, 4, x->v[4]) + q2_4f(w.q1, 4, x->v[5]), q2_4f(w.q0, 6, x->v[6]) + q2_4f(w.q1, 6, x->v[7]));
    float4 dq = 4.0f * (F - x->s); /* sum q x of each set */
    float4 sc = convert_float4((uint4)(a & 0xF, (a >> 16) & 0xF, b & 0xF, (b >> 16) & 0xF));
    float4 mn = convert_float4((uint4)((a >> 4) & 0xF, (a >> 20) & 0xF, (b >> 4) & 0xF, (b >> 20) & 0xF));
    return h16f(w.dm) * dot(sc, dq) - h16f(w.dm >> 16) * dot(mn, x->s);
}

typedef struct {
    uint q0, q1, h0, h1, s0, s1, s2; /* the chunk's qs and hmask bytes; the 12 scale bytes */
    float d;
} q3k_w;

inline q3k_w q3_k_load(global const uchar *blk, int c)
{
    int n = c / 4, l0 = 8 * (c % 4);
    global const ushort *hm = (global const ushort *)(blk + l0);
    global const ushort *qs = (global const ushort *)(blk + 32 + 32 * n + l0);
    global const ushort *sc = (global const ushort *)(blk + 96);
    q3k_w w;
    w.h0 = u2(vload2(0, hm)), w.h1 = u2(vload2(1, hm));
    w.q0 = u2(vload2(0, qs)), w.q1 = u2(vload2(1, qs));
    w.s0 = u2(vload2(0, sc)), w.s1 = u2(vload2(1, sc)), w.s2 = u2(vload2(2, sc));
    w.d = vload_half(0, (global const half *)(blk + 108));
    return w;
}

inline float q3_k_dot(q3k_w w, int c, const mv1_x *x)
{
    int n = c / 4, hb = 8 * ((c % 4) / 2);
    uint h0 = w.h0 >> (4 * n), h1 = w.h1 >> (4 * n); /* set j's third bits at bit j of each byte */
    float4 F = (float4)(qh_4f(w.q0, 0, 2, h0, 0, x->v[0]) + qh_4f(w.q1, 0, 2, h1, 0, x->v[1]),
                        qh_4f(w.q0, 2, 2, h0, 1, x->v[2]) + qh_4f(w.q1, 2, 2, h1, 1, x->v[3]),
                        qh_4f(w.q0, 4, 2, h0, 2, x->v[4]) + qh_4f(w.q1, 4, 2, h1, 2, x->v[5]),
                        qh_4f(w.q0, 6, 2, h0, 3, x->v[6]) + qh_4f(w.q1, 6, 2, h1, 3, x->v[7]));
    /* set j's 6-bit scale: the low 4 bits from byte 2j + hb/8 (shift 4n), the high 2 from byte
     * 8 + 2(j & 1) + hb/8 (shift 4n + 2(j / 2)) */
    uint lo0 = (w.s0 >> hb) >> (4 * n), lo1 = (w.s1 >> hb) >> (4 * n), t = w.s2 >> (hb + 4 * n);
    int4 sc = convert_int4((uint4)((lo0 & 0xF) | ((t & 3) << 4), ((lo0 >> 16) & 0xF) | (((t >> 16) & 3) << 4),
                                   (lo1 & 0xF) | (((t >> 2) & 3) << 4), ((lo1 >> 16) & 0xF) | (((t >> 18) & 3) << 4))) -
              32;
    return w.d * dot(convert_float4(sc), 8.0f * F - 12.0f * x->s); /* sum (u - 4) x = 8 (F - S) - 4 S */
}

/* ---- f16 and bf16 weights (formats 2 and 3; the mv1xh and mv1rh kernels) ----
 * A work-item's share of a pass is 32 weights a row (64 bytes, mv1h_load_s below), loaded
 * as four 16-byte words before any arithmetic, as the quantized chunks are. Half storage
 * works on every device: NVIDIA's OpenCL reports no cl_khr_fp16, so the halves are widened
 * from registers (cvt through inline PTX there, h16f elsewhere); bf16 is f32's upper half.
 * H200, TinyLlama-shaped F16 decode (op by op through nn_matvec before): tg128 174 -> 546-552
 * t/s, 112 launches a token (session 32). */
typedef struct {
    uint4 a, b, c, d;
} mv1h_w;

/* The two 16-bit values of u, the low one first, as floats: f16, or bf16 where bf. */
inline float2 mv1h_pair(uint u, int bf)
{
    if (bf) return (float2)(as_float(u << 16), as_float(u & 0xFFFF0000u));
#if defined(cl_nv_pragma_unroll)
    float lo, hi;
    asm("{.reg .b16 l, h; mov.b32 {l, h}, %2; cvt.f32.f16 %0, l; cvt.f32.f16 %1, h;}" : "=f"(lo), "=f"(hi) : "r"(u));
    return (float2)(lo, hi);
#else
    return (float2)(h16f(u & 0xFFFFu), h16f(u >> 16));
#endif
}

inline float mv1h_dot8(uint4 w, int bf, float4 x0, float4 x1)
{
    return dot((float4)(mv1h_pair(w.x, bf), mv1h_pair(w.y, bf)), x0) +
           dot((float4)(mv1h_pair(w.z, bf), mv1h_pair(w.w, bf)), x1);
}

inline float mv1h_dot(mv1h_w w, int bf, const mv1_x *x)
{
    return (mv1h_dot8(w.a, bf, x->v[0], x->v[1]) + mv1h_dot8(w.b, bf, x->v[2], x->v[3])) +
           (mv1h_dot8(w.c, bf, x->v[4], x->v[5]) + mv1h_dot8(w.d, bf, x->v[6], x->v[7]));
}

/* In a pass over 32 * MV1_LS elements from base, work-item l takes the 8 elements at
 * base + 8 (l + p MV1_LS) for p = 0..3, so each of the four 16-byte loads of a warp reads
 * 512 consecutive bytes of a row (the quantized formats' 32 consecutive weights a
 * work-item, tried first: gate/up 29.2 against 26.4 us a launch on the H200, profiled,
 * tg128 440-449 against 428-462 t/s). Pieces past K (K % 2048 != 0) read as zeros, x and
 * gam too, so they add nothing to the dots or the norm's squares. */
inline uint4 mv1h_piece(global const uchar *row, long e, long K)
{
    return e < K ? *(global const uint4 *)(row + 2 * e) : (uint4)(0u);
}

inline mv1h_w mv1h_load_s(global const uchar *row, long base, long K, int lid)
{
    long e = base + 8 * lid, st = 8 * MV1_LS;
    mv1h_w w;
    w.a = mv1h_piece(row, e, K), w.b = mv1h_piece(row, e + st, K);
    w.c = mv1h_piece(row, e + 2 * st, K), w.d = mv1h_piece(row, e + 3 * st, K);
    return w;
}

inline void mv1h_x_s(global const float *x, global const float *gam, long base, long K, int lid, mv1_x *o, float *ss)
{
    float4 q = (float4)(0.0f);
    for (int p = 0; p < 4; p++) {
        long e = base + 8 * (lid + p * MV1_LS);
        bool in = e < K;
        o->v[2 * p] = in ? vload4(0, x + e) : (float4)(0.0f);
        o->v[2 * p + 1] = in ? vload4(1, x + e) : (float4)(0.0f);
        q += o->v[2 * p] * o->v[2 * p] + o->v[2 * p + 1] * o->v[2 * p + 1];
        if (gam && in) o->v[2 * p] *= vload4(0, gam + e), o->v[2 * p + 1] *= vload4(1, gam + e);
    }
    if (ss) *ss += hsum4(q);
}

/* ---- the 32-blocks (formats 4..8: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0; the mv1xl and mv1rl kernels) ----
 * A work-item takes whole blocks (b = lid, lid + MV1_LS, ...), its bytes loaded as 16-bit
 * words (the blocks are 2-byte aligned) before any arithmetic. The quants meet f32 x as the
 * K formats' do, through the mantissa of 1.0: a 4- or 5-bit q becomes 1 + q / 32, Q8_0's
 * byte with its sign flipped 1 + u / 256, and a block's sum of q x is recovered from sum x
 * (Q8_0 keeps ~16 of f32's 24 bits there). H200, TinyLlama-shaped tg128 (op by op through
 * quant.cl's general kernel before, 333 launches a token, now 112): Q8_0 203 -> 477-479 t/s,
 * Q4_0 216 -> 509-543 (session 32). */
typedef struct {
    uint w[9]; /* the block's 16-bit words, two a uint: up to 34 bytes (Q8_0) */
} mv1l_w;

inline int mv1l_bytes(int f) { return f == 4 ? 18 : f == 5 ? 20 : f == 6 ? 22 : f == 7 ? 24 : 34; }

inline mv1l_w mv1l_load(global const uchar *blk, int f)
{
    global const ushort *p = (global const ushort *)blk;
    int n = mv1l_bytes(f) / 2;
    mv1l_w o;
    for (int i = 0; i < 9; i++) {
        uint lo = 2 * i < n ? (uint)p[2 * i] : 0u, hi = 2 * i + 1 < n ? (uint)p[2 * i + 1] : 0u;
        o.w[i] = lo | (hi << 16);
    }
    return o;
}

/* sum over the 4 bytes t of u of (1 + q_t / 32) x_t: q_t the nibble at bit 8t + sh plus 16 times
 * bit t of hb (the fifth bits; 0 for 4-bit formats). */
inline float q5_4f(uint u, int sh, uint hb, float4 x)
{
    float4 f;
    f.s0 = as_float((shl(u, 18 - sh) & 0x003C0000u) | ((hb << 22) & 0x00400000u) | MV1_ONE);
    f.s1 = as_float((shl(u, 10 - sh) & 0x003C0000u) | ((hb << 21) & 0x00400000u) | MV1_ONE);
    f.s2 = as_float((shl(u, 2 - sh) & 0x003C0000u) | ((hb << 20) & 0x00400000u) | MV1_ONE);
    f.s3 = as_float((shl(u, -6 - sh) & 0x003C0000u) | ((hb << 19) & 0x00400000u) | MV1_ONE);
    return dot(f, x);
}

/* The 16-bit-aligned word of a block from byte 2 + 4k (odd 16-bit word offsets). */
inline uint mv1l_at2(const mv1l_w *w, int k) { return (w->w[k] >> 16) | (w->w[k + 1] << 16); }

/* A block's dot with x (x->v: its 32 values, x->s.s0 their sum). */
inline float mv1l_dot(mv1l_w w, int f, const mv1_x *x)
{
    float d = h16f(w.w[0] & 0xFFFFu), S = x->s.s0, F = 0.0f;
    if (f == 8) { /* sum q x = 256 (F - S) - 128 S, q = u - 128 */
        for (int k = 0; k < 8; k++) {
            uint u = mv1l_at2(&w, k) ^ 0x80808080u;
            float4 g;
            g.s0 = as_float(((u << 15) & 0x007F8000u) | MV1_ONE);
            g.s1 = as_float(((u << 7) & 0x007F8000u) | MV1_ONE);
            g.s2 = as_float(((u >> 1) & 0x007F8000u) | MV1_ONE);
            g.s3 = as_float(((u >> 9) & 0x007F8000u) | MV1_ONE);
            F += dot(g, x->v[k]);
        }
        return d * (256.0f * (F - S) - 128.0f * S);
    }
    /* element i < 16: the low nibble of byte i, 16 + i: its high nibble; fifth bit i of qh */
    uint q[4], qh = 0u;
    float m = 0.0f, off = 0.0f;
    if (f == 4) {
        for (int k = 0; k < 4; k++) q[k] = mv1l_at2(&w, k);
        off = 8.0f;
    } else if (f == 5) {
        for (int k = 0; k < 4; k++) q[k] = w.w[1 + k];
        m = h16f(w.w[0] >> 16);
    } else if (f == 6) {
        qh = mv1l_at2(&w, 0);
        for (int k = 0; k < 4; k++) q[k] = mv1l_at2(&w, k + 1);
        off = 16.0f;
    } else {
        m = h16f(w.w[0] >> 16), qh = w.w[1];
        for (int k = 0; k < 4; k++) q[k] = w.w[2 + k];
    }
    for (int k = 0; k < 4; k++) F += q5_4f(q[k], 0, qh >> (4 * k), x->v[k]) + q5_4f(q[k], 4, qh >> (16 + 4 * k), x->v[4 + k]);
    return d * (32.0f * (F - S) - off * S) + m * S; /* sum q x = 32 (F - S) */
}

/* x of block b (times gam where set) and its sum; *ss gathers the raw squares. */
inline void mv1l_x(global const float *x, global const float *gam, long b, mv1_x *o, float *ss)
{
    global const float4 *p = (global const float4 *)(x + 32 * b);
    float4 q = (float4)(0.0f), t = (float4)(0.0f);
    for (int i = 0; i < 8; i++) {
        o->v[i] = p[i];
        q += o->v[i] * o->v[i];
    }
    if (gam)
        for (int i = 0; i < 8; i++) o->v[i] *= ((global const float4 *)(gam + 32 * b))[i];
    for (int i = 0; i < 8; i++) t += o->v[i];
    o->s = (float4)(hsum4(t), 0.0f, 0.0f, 0.0f);
    if (ss) *ss += hsum4(q);
}

/* The norm's output xn = x * scale * gam by work-group 0 (norm 2: xn is dead, the host
 * found it overwritten by the launch's own tail). Eight float4 of x and of gam in flight
 * per work-item, not one float: this is the tail of the launch. */
inline void mv1_write_xn(global const float *x, global const float *gam, long K, float scale, global float *xn)
{
    int lid = get_local_id(0);
    long K4 = K / 4; /* K % 256 == 0 */
    for (long base = 0; base < K4; base += 8 * MV1_LS) {
        float4 v[8];
        for (int j = 0; j < 8; j++) {
            long i = base + j * MV1_LS + lid;
            v[j] = i < K4 ? vload4(i, x) * (gam ? vload4(i, gam) : (float4)(1.0f)) : (float4)(0.0f);
        }
        for (int j = 0; j < 8; j++) {
            long i = base + j * MV1_LS + lid;
            if (i < K4) vstore4(v[j] * scale, i, xn);
        }
    }
}

/* Statements repeated for r = 0 .. R-1 by the preprocessor (M(r, R)), so that every
 * per-row array is indexed by constants and stays in registers whatever the compiler's
 * unrolling limits (an array indexed at run time lives in slow private memory). */
#define MV1_REP1(M, A) M(0, A)
#define MV1_REP2(M, A) M(0, A) M(1, A)
#define MV1_REP4(M, A) MV1_REP2(M, A) M(2, A) M(3, A)
#define MV1_REP8(M, A) MV1_REP4(M, A) M(4, A) M(5, A) M(6, A) M(7, A)

/* The row sums over a work-group: each work-item puts its partial of row `row` with
 * mv1_put, then mv1_reduce gives work-item r < n the sum of row r. NVIDIA's compiler
 * (cl_nv_pragma_unroll marks it) takes inline PTX: there a warp first sums its 32 partials
 * with shuffles (OpenCL C 1.2 has no subgroups), so local memory holds two values a row,
 * one barrier, and no serial sum of 16. H200, TinyLlama-shaped Q4_K_M, tg128 alternated
 * with -DMV1_NO_SHFL in one call, two rounds (session 23): 664, 675 against 665, 671 t/s
 * after no prompt, 689, 679 against 663, 665 after 512 tokens; the same greedy text.
 * Elsewhere: every partial through local memory, a tree of 4 then 16. */
#if defined(cl_nv_pragma_unroll) && !defined(MV1_NO_SHFL) /* -DMV1_NO_SHFL: the portable path there */
inline float mv1_wsum(float v)
{
    for (int o = 16; o > 0; o >>= 1) {
        float t;
        asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(t) : "f"(v), "r"(o));
        v += t;
    }
    return v;
}

inline void mv1_put(local float *red, int row, float v)
{
    int lid = get_local_id(0);
    v = mv1_wsum(v);
    if ((lid & 31) == 0) red[row * MV1_LS + (lid >> 5)] = v;
}

inline float mv1_reduce(local float *red, int n)
{
    int lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    return lid < n ? red[lid * MV1_LS] + red[lid * MV1_LS + 1] : 0.0f; /* MV1_LS = 2 warps */
}
#else
inline void mv1_put(local float *red, int row, float v) { red[row * MV1_LS + get_local_id(0)] = v; }

inline float mv1_reduce(local float *red, int n)
{
    int lid = get_local_id(0);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int t = lid; t < n * 16; t += MV1_LS) { /* each sums 4 and writes over its own first */
        local float *q = red + (t / 16) * MV1_LS + t % 16;
        q[0] = (q[0] + q[16]) + (q[32] + q[48]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float s = 0.0f;
    if (lid < n)
        for (int i = 0; i < 16; i++) s += red[lid * MV1_LS + i];
    return s;
}
#endif

/* Row r's partials (and the gated up row's, A + r) into the reduction; with slots, warp 1's
 * row r goes where an up row would (never both: slots are not gated). */
#define MV1_SLOT(r, A) acc[(A) + (r)] = acc[r], acc[r] = 0.0f;
#define MV1_RED(r, A) mv1_put(red, (r), acc[r]), mv1_put(red, (A) + (r), acc[(A) + (r)]);

inline float silu_f(float x)
{
    float e = exp(-fabs(x)), s = 1.0f / (1.0f + e); /* ew.cl's sigmoid_f */
    return x * (x < 0.0f ? e * s : s);
}

/* GEGLU's gate: gelu's tanh form as ew.cl computes it, x * sigmoid(2 k0 (x + k1 x^3)). */
inline float gelu_f(float x)
{
    float t = 2.0f * 0.7978845608028654f * (x + 0.044715f * x * x * x);
    float e = exp(-fabs(t)), s = 1.0f / (1.0f + e);
    return x * (t < 0.0f ? e * s : s);
}

/* x of a chunk for format f (0 Q4_K, 1 Q6_K), times the norm's weight when gam is set,
 * with its group sums; *ss gathers the squares of the raw x (each element of x is in
 * exactly one chunk). */
inline void mv1_load_x(int f, global const float *x, global const float *gam, long b, int c, mv1_x *o, float *ss)
{
    if (f == 0) q4_k_x(x, b, c, o);
    else q6_k_x(x, b, c, o);
    if (ss) {
        float4 q = (float4)(0.0f);
        for (int i = 0; i < 8; i++) q += o->v[i] * o->v[i];
        *ss += hsum4(q);
    }
    if (gam) {
        mv1_x g;
        if (f == 0) q4_k_x(gam, b, c, &g);
        else q6_k_x(gam, b, c, &g);
        for (int i = 0; i < 8; i++) o->v[i] *= g.v[i];
    }
    if (f == 0) {
        o->s.s0 = hsum4((o->v[0] + o->v[1]) + (o->v[2] + o->v[3]));
        o->s.s1 = hsum4((o->v[4] + o->v[5]) + (o->v[6] + o->v[7]));
        o->s.s2 = o->s.s3 = 0.0f;
    } else {
        o->s = (float4)(hsum4(o->v[0] + o->v[1]), hsum4(o->v[2] + o->v[3]), hsum4(o->v[4] + o->v[5]),
                        hsum4(o->v[6] + o->v[7]));
    }
}

/* ---- x as 8-bit integers: mv1_q8x, then mv1xq_r* ----
 * Large one-row products read x as bytes (a scale per 32 values) and multiply 4 weights
 * by 4 values in one integer instruction (dp4a on NVIDIA GPUs of compute capability 6.1
 * and up; portable integer math elsewhere), as the CPU's and CUDA's decode products do: on
 * the H200 a 5632 x 2048 Q4_K product went 9.45 -> 4.8 us of device time, the quantizing
 * launch 2.1 more (bench/ocl_q8mv.c). The 8-bit rounding of x costs ~1.6e-5 NMSE, the
 * CPU's own error against f64. quant_mv1.c picks these forms for large matrices. */
#if defined(OCL_HAVE_DP4A)
inline int dp4(uint a, int b, int c) /* c + sum of unsigned bytes of a times signed bytes of b */
{
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
}
#else
inline int dp4(uint a, int b, int c)
{
    return c + (int)(a & 255u) * (int)(char)b + (int)((a >> 8) & 255u) * (int)(char)(b >> 8) +
           (int)((a >> 16) & 255u) * (int)(char)(b >> 16) + (int)(a >> 24) * (b >> 24);
}
#endif

/* max |v|, and the reciprocal of a block scale (0 for a block of zeros): the byte forms'
 * rounding, whichever kernel makes the bytes (mv1_q8x, mv1i_load_x) */
inline float amax4(float4 v)
{
    v = fabs(v);
    return fmax(fmax(v.x, v.y), fmax(v.z, v.w));
}

inline float inv_or0(float d) { return d > 0.0f ? 1.0f / d : 0.0f; }

/* x (times gam when has_gam) of K as bytes for the q8 forms, at q: per 32-block b the bytes
 * rint(x / d) at q + 32 b with d = max |x| / 127, and (d, the sum of the raw x squared: the
 * norm's share of the block) at q + K + 8 b. 8 work-items a block, 4 values each. */
kernel void mv1_q8x(global const uchar *xb, ulong xoff, global const uchar *gmb, ulong gmoff, int has_gam, long K,
                    global uchar *qb, ulong qoff, local float *red)
{
    long e = get_global_id(0);
    int lid = get_local_id(0), g0 = lid & ~7;
    bool live = e < K / 4;
    float4 v = live ? vload4(e, (global const float *)(xb + xoff)) : (float4)(0.0f);
    local float *rm = red, *rs = red + get_local_size(0);
    rs[lid] = dot(v, v);
    if (has_gam && live) v *= vload4(e, (global const float *)(gmb + gmoff));
    rm[lid] = amax4(v);
    barrier(CLK_LOCAL_MEM_FENCE);
    float m = 0.0f, ss = 0.0f;
    for (int i = 0; i < 8; i++) m = fmax(m, rm[g0 + i]), ss += rs[g0 + i];
    float d = m / 127.0f, id = inv_or0(d);
    if (!live) return;
    vstore4(convert_char4_sat_rte(v * id), e, (global char *)(qb + qoff));
    if (lid == g0) vstore2((float2)(d, ss), e / 8, (global float *)(qb + qoff + K));
}

/* x of chunk c of block b as mv1xq reads it. Q4_K: a and b the 16 bytes of each half (the
 * low and the high nibbles' values), d = (d of a, d of b, d sum a, d sum b). Q6_K: a.xy,
 * a.zw, b.xy, b.zw the 8 bytes of sets 0 .. 3, d their blocks' scales, s their sums. */
typedef struct {
    int4 a, b;
    float4 d;
    int4 s;
} mv1_xq;

inline int ones4(int v) { return dp4(0x01010101u, v, 0); }

inline void mv1q_load_x(int f, global const uchar *xq, long K, long b, int c, mv1_xq *o, float *ss)
{
    global const float2 *dd = (global const float2 *)(xq + K) + 8 * b;
    global const uchar *q = xq + 256 * b;
    if (f == 0) {
        int j = 2 * (c / 2), l0 = 16 * (c % 2);
        o->a = *(global const int4 *)(q + 32 * j + l0), o->b = *(global const int4 *)(q + 32 * j + 32 + l0);
        float da = dd[j].x, db = dd[j + 1].x;
        int sa = ones4(o->a.x) + ones4(o->a.y) + ones4(o->a.z) + ones4(o->a.w);
        int sb = ones4(o->b.x) + ones4(o->b.y) + ones4(o->b.z) + ones4(o->b.w);
        o->d = (float4)(da, db, da * (float)sa, db * (float)sb);
        if (ss) *ss += dd[j + (c & 1)].y; /* chunks 2i and 2i + 1 share two blocks: one each */
    } else {
        int h = c / 4, l0 = 8 * (c % 4);
        global const uchar *p = q + 128 * h + l0;
        int2 s0 = *(global const int2 *)p, s1 = *(global const int2 *)(p + 32);
        int2 s2 = *(global const int2 *)(p + 64), s3 = *(global const int2 *)(p + 96);
        o->a = (int4)(s0, s1), o->b = (int4)(s2, s3);
        o->d = (float4)(dd[4 * h].x, dd[4 * h + 1].x, dd[4 * h + 2].x, dd[4 * h + 3].x);
        o->s = (int4)(ones4(s0.x) + ones4(s0.y), ones4(s1.x) + ones4(s1.y), ones4(s2.x) + ones4(s2.y),
                      ones4(s3.x) + ones4(s3.y));
        if (ss) *ss += dd[4 * h + c % 4].y; /* chunks 4h .. 4h + 3 share four blocks: one each */
    }
}

inline float q4_k_dotq(q4k_w w, int c, const mv1_xq *x)
{
    q4k_hd h = q4k_head(w.hd, c);
    uint M = 0x0F0F0F0Fu;
    int lo = dp4(w.q.x & M, x->a.x, 0);
    lo = dp4(w.q.y & M, x->a.y, lo), lo = dp4(w.q.z & M, x->a.z, lo), lo = dp4(w.q.w & M, x->a.w, lo);
    int hi = dp4((w.q.x >> 4) & M, x->b.x, 0);
    hi = dp4((w.q.y >> 4) & M, x->b.y, hi), hi = dp4((w.q.z >> 4) & M, x->b.z, hi);
    hi = dp4((w.q.w >> 4) & M, x->b.w, hi);
    return h.d * (h.sc0 * x->d.x * (float)lo + h.sc1 * x->d.y * (float)hi) - h.dmin * (h.m0 * x->d.z + h.m1 * x->d.w);
}

/* The 6-bit values of 4 bytes: 4 bits of l at lsh, 2 of h at hsh (as q6_4f). */
inline uint q6_bytes(uint l, uint h, int lsh, int hsh)
{
    return ((l >> lsh) & 0x0F0F0F0Fu) | (((h >> hsh) & 0x03030303u) << 4);
}

inline float q6_k_dotq(q6k_w w, const mv1_xq *x)
{
    int t0 = dp4(q6_bytes(w.la1, w.h1, 0, 0), x->a.y, dp4(q6_bytes(w.la0, w.h0, 0, 0), x->a.x, 0));
    int t1 = dp4(q6_bytes(w.lb1, w.h1, 0, 2), x->a.w, dp4(q6_bytes(w.lb0, w.h0, 0, 2), x->a.z, 0));
    int t2 = dp4(q6_bytes(w.la1, w.h1, 4, 4), x->b.y, dp4(q6_bytes(w.la0, w.h0, 4, 4), x->b.x, 0));
    int t3 = dp4(q6_bytes(w.lb1, w.h1, 4, 6), x->b.w, dp4(q6_bytes(w.lb0, w.h0, 4, 6), x->b.z, 0));
    int4 t = (int4)(t0, t1, t2, t3) - 32 * x->s; /* sum (q - 32) x of each set */
    return w.d * dot(convert_float4(w.sc) * x->d, convert_float4(t));
}

/* ---- x as bytes made in the work-item: mv1xi_r* ----
 * The same bytes as mv1_q8x's, rounded by each work-item from the f32 x it loads, so that
 * no quantizing launch comes first (a launch costs the H200 ~3.4 us of device time and
 * the host ~6-8 of enqueue, however little it does). A 32-block of x is split between the
 * aligned 2 (Q4_K chunks: a half each) or 4 (Q6_K: 8 values each) work-items whose chunks
 * share it, so the block's max |x| is theirs together: NVIDIA's compiler takes a butterfly
 * shuffle among them (their loop trip counts are equal: K is a multiple of 256, so the
 * active mask always holds the whole group); elsewhere each work-item reads the rest of
 * the block again. The max is exact, so both give mv1_q8x's scale and bytes; only the
 * norm's sum of squares is added in another order. */
#if defined(cl_nv_pragma_unroll) && !defined(MV1_NO_SHFL)
inline float mv1i_lanemax(float v, int n)
{
    uint m;
    asm volatile("activemask.b32 %0;" : "=r"(m));
    for (int o = 1; o < n; o <<= 1) {
        float t;
        asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, %3;" : "=f"(t) : "f"(v), "r"(o), "r"(m));
        v = fmax(v, t);
    }
    return v;
}
#define MV1I_BLOCKMAX(v, n, x, gam, i0) mv1i_lanemax(v, n)
#else
/* max |x gam| over the 32 values from i0 */
inline float mv1i_blockmax(global const float *x, global const float *gam, long i0)
{
    float m = 0.0f;
    for (int i = 0; i < 8; i++) {
        float4 v = vload4(0, x + i0 + 4 * i);
        if (gam) v *= vload4(0, gam + i0 + 4 * i);
        m = fmax(m, amax4(v));
    }
    return m;
}
#define MV1I_BLOCKMAX(v, n, x, gam, i0) mv1i_blockmax(x, gam, i0)
#endif

/* rint(v * id) as 4 signed bytes, |v * id| <= 127 by the scale: 1.5 * 2^23 added puts the
 * integer, rounded to nearest even as convert_char_rte would, in the low mantissa bits,
 * whose low byte is the byte (the constant's low 22 bits are zero). A float-to-int
 * conversion issues at a quarter of the FMA rate on NVIDIA GPUs, and every work-item
 * rounds its x for each of its rows' work-group again: with conversions the product took
 * longer than with f32 x. Contraction stays off so that the product is rounded to f32
 * first, as mv1_q8x rounds it. */
inline int q8i(float4 v, float id)
{
#pragma OPENCL FP_CONTRACT OFF
    float4 p = v * id;
    uint4 u = as_uint4(p + (float4)(12582912.0f));
    return (int)((u.x & 255u) | ((u.y & 255u) << 8) | ((u.z & 255u) << 16) | (u.w << 24));
}

/* x of chunk c of block b in mv1xq's form, from f32 x (times gam); *ss as mv1_load_x. */
inline void mv1i_load_x(int f, global const float *x, global const float *gam, long b, int c, mv1_xq *o, float *ss)
{
    mv1_x v;
    mv1_load_x(f, x, gam, b, c, &v, ss);
    if (f == 0) {
        int j = 2 * (c / 2);
        long i0 = b * 256 + 32 * j;
        float ma = fmax(fmax(amax4(v.v[0]), amax4(v.v[1])), fmax(amax4(v.v[2]), amax4(v.v[3])));
        float mb = fmax(fmax(amax4(v.v[4]), amax4(v.v[5])), fmax(amax4(v.v[6]), amax4(v.v[7])));
        float da = MV1I_BLOCKMAX(ma, 2, x, gam, i0) / 127.0f, db = MV1I_BLOCKMAX(mb, 2, x, gam, i0 + 32) / 127.0f;
        float ia = inv_or0(da), ib = inv_or0(db);
        o->a = (int4)(q8i(v.v[0], ia), q8i(v.v[1], ia), q8i(v.v[2], ia), q8i(v.v[3], ia));
        o->b = (int4)(q8i(v.v[4], ib), q8i(v.v[5], ib), q8i(v.v[6], ib), q8i(v.v[7], ib));
        int sa = ones4(o->a.x) + ones4(o->a.y) + ones4(o->a.z) + ones4(o->a.w);
        int sb = ones4(o->b.x) + ones4(o->b.y) + ones4(o->b.z) + ones4(o->b.w);
        o->d = (float4)(da, db, da * (float)sa, db * (float)sb);
    } else {
        long i0 = b * 256 + 128 * (c / 4);
        float d[4];
        int q[8];
        for (int s = 0; s < 4; s++) {
            float m = fmax(amax4(v.v[2 * s]), amax4(v.v[2 * s + 1]));
            d[s] = MV1I_BLOCKMAX(m, 4, x, gam, i0 + 32 * s) / 127.0f;
            float id = inv_or0(d[s]);
            q[2 * s] = q8i(v.v[2 * s], id), q[2 * s + 1] = q8i(v.v[2 * s + 1], id);
        }
        o->a = (int4)(q[0], q[1], q[2], q[3]), o->b = (int4)(q[4], q[5], q[6], q[7]);
        o->d = (float4)(d[0], d[1], d[2], d[3]);
        o->s = (int4)(ones4(q[0]) + ones4(q[1]), ones4(q[2]) + ones4(q[3]), ones4(q[4]) + ones4(q[5]),
                      ones4(q[6]) + ones4(q[7]));
    }
}

/* What mv1x's body reads x through: the f32 form (V empty), the bytes of mv1_q8x (V = q)
 * and the bytes made in the work-item (V = i). */
#define MV1_XT mv1_x
#define MV1_XTq mv1_xq
#define MV1_LOADX(f, b, c, o, ss) mv1_load_x(f, x, gam, b, c, o, ss)
#define MV1_LOADXq(f, b, c, o, ss) mv1q_load_x(f, xq, K, b, c, o, ss)
#define MV1_XTi mv1_xq
#define MV1_LOADXi(f, b, c, o, ss) mv1i_load_x(f, x, gam, b, c, o, ss)

/* mv1x_r*'s scalars in one argument (mv1_args in quant_mv1.c, the same layout: 8-byte
 * fields, then 4-byte ones): NVIDIA's enqueue costs more with every argument, and a
 * decode step enqueues ~90 of these launches a token. */
typedef struct {
    ulong xoff, gmoff, xnoff, boff, roff, zoff, qoff; /* byte offsets of x, gam, xn, bias, r, z, x's bytes */
    ulong wo[3], oo[3];                               /* of each weight and output */
    long K, bstride, wr[3], N[3];                     /* row bytes and rows of each weight */
    int norm, has_gam, gated, nseg, bias_kind, epi, f[3];
    int bi[13]; /* the packed kernels: which buffer argument holds x, gam, xn, w0, o0, w1, o1, w2, o2, b, r, z, q */
    float eps;
    int slots; /* short rows, not gated: each warp takes R rows of its own (MV1X_FN) */
} mv1_args;

/* Per row r of the R (A): its weight rows' addresses (warp 1's with slots; rows past N repeat
 * the last), then per chunk the loads of every row (and of the up rows when gated) and the
 * dots. */
#define MV1_ROW(r, A)                                                                                       \
    {                                                                                                       \
        long rr = min((long)(slot * (A) + (r)), (long)nr - 1);                                              \
        rows[r] = w + wo + (n0 + rr) * wr;                                                                  \
        rows[(A) + (r)] = wu + w1o + (n0 + rr) * w1r;                                                       \
    }
#define MV1_LD4(r, A) wv4[r] = q4_k_load(rows[r] + bo, c);
#define MV1_LD4U(r, A) wv4[(A) + (r)] = q4_k_load(rows[(A) + (r)] + bo, c);
#define MV1_DOT4(r, A) acc[r] += q4_k_dot(wv4[r], c, &xs);
#define MV1_DOT4U(r, A) acc[(A) + (r)] += q4_k_dot(wv4[(A) + (r)], c, &xs);
#define MV1_LD6(r, A) wv6[r] = q6_k_load(rows[r] + bo, c);
#define MV1_LD6U(r, A) wv6[(A) + (r)] = q6_k_load(rows[(A) + (r)] + bo, c);
#define MV1_DOT6(r, A) acc[r] += q6_k_dot(wv6[r], &xs);
#define MV1_DOT6U(r, A) acc[(A) + (r)] += q6_k_dot(wv6[(A) + (r)], &xs);
#define MV1_DOT4q(r, A) acc[r] += q4_k_dotq(wv4[r], c, &xs);
#define MV1_DOT4Uq(r, A) acc[(A) + (r)] += q4_k_dotq(wv4[(A) + (r)], c, &xs);
#define MV1_DOT6q(r, A) acc[r] += q6_k_dotq(wv6[r], &xs);
#define MV1_DOT6Uq(r, A) acc[(A) + (r)] += q6_k_dotq(wv6[(A) + (r)], &xs);
#define MV1_DOT4i MV1_DOT4q
#define MV1_DOT4Ui MV1_DOT4Uq
#define MV1_DOT6i MV1_DOT6q
#define MV1_DOT6Ui MV1_DOT6Uq

/* The chunk loops of mv1x*: Q4_K / Q6_K with x in form V (f32, bytes of a launch, bytes made
 * inline), or with f32 x f16 / bf16 weights (V = h), the 32-blocks (V = l), Q5_K with Q6_K
 * (V = k) and Q2_K / Q3_K with Q4_K (V = s), in kernels of their own so that the Q4_K
 * kernels keep their registers. */
#define MV1_QLOOPS(R, V)                                                                                    \
        if (f == 0) {                                                                                       \
            MV1_CHLOOP(R, V, 144, q4k_w, wv4, MV1_LD4, MV1_DOT4, 0)                                         \
        } else {                                                                                            \
            MV1_CHLOOP(R, V, 210, q6k_w, wv6, MV1_LD6, MV1_DOT6, 1)                                         \
        }
/* One chunk loop: rows of BSZ-byte blocks held as T in ARR, loaded by LD (LD##U: the up rows)
 * and applied by DOT to x in form V, which is read in format XF's layout (mv1_load_x). */
#define MV1_CHLOOP(R, V, BSZ, T, ARR, LD, DOT, XF)                                                          \
            for (long ch = lb; ch < nch; ch += lstep) {                                                     \
                long bo = (ch / 8) * (BSZ);                                                                 \
                T ARR[2 * R];                                                                               \
                MV1_REP##R(LD, R)                                                                           \
                if (gated) { MV1_REP##R(LD##U, R) }                                                         \
                MV1_XT##V xs;                                                                               \
                MV1_LOADX##V(XF, ch / 8, c, &xs, norm ? &ss : 0);                                           \
                MV1_REP##R(DOT##V, R)                                                                       \
                if (gated) { MV1_REP##R(DOT##U##V, R) }                                                     \
            }
#define MV1_LOOPS(R) MV1_QLOOPS(R, )
#define MV1_LOOPSs(R)                                                                                       \
        if (f == 0) {                                                                                       \
            MV1_CHLOOP(R, , 144, q4k_w, wv4, MV1_LD4, MV1_DOT4, 0)                                          \
        } else if (f == 10) {                                                                               \
            MV1_CHLOOP(R, , 84, q2k_w, wv2, MV1_LD2, MV1_DOT2, 1)                                           \
        } else {                                                                                            \
            MV1_CHLOOP(R, , 110, q3k_w, wv3, MV1_LD3, MV1_DOT3, 1)                                          \
        }
#define MV1_LD2(r, A) wv2[r] = q2_k_load(rows[r] + bo, c);
#define MV1_LD2U(r, A) wv2[(A) + (r)] = q2_k_load(rows[(A) + (r)] + bo, c);
#define MV1_DOT2(r, A) acc[r] += q2_k_dot(wv2[r], c, &xs);
#define MV1_DOT2U(r, A) acc[(A) + (r)] += q2_k_dot(wv2[(A) + (r)], c, &xs);
#define MV1_LD3(r, A) wv3[r] = q3_k_load(rows[r] + bo, c);
#define MV1_LD3U(r, A) wv3[(A) + (r)] = q3_k_load(rows[(A) + (r)] + bo, c);
#define MV1_DOT3(r, A) acc[r] += q3_k_dot(wv3[r], c, &xs);
#define MV1_DOT3U(r, A) acc[(A) + (r)] += q3_k_dot(wv3[(A) + (r)], c, &xs);
#define MV1_LOOPSk(R)                                                                                       \
        if (f == 9) {                                                                                       \
            MV1_CHLOOP(R, , 176, q5k_w, wv5, MV1_LD5, MV1_DOT5, 0)                                          \
        } else {                                                                                            \
            MV1_CHLOOP(R, , 210, q6k_w, wv6, MV1_LD6, MV1_DOT6, 1)                                          \
        }
#define MV1_LD5(r, A) wv5[r] = q5_k_load(rows[r] + bo, c);
#define MV1_LD5U(r, A) wv5[(A) + (r)] = q5_k_load(rows[(A) + (r)] + bo, c);
#define MV1_DOT5(r, A) acc[r] += q5_k_dot(wv5[r], c, &xs);
#define MV1_DOT5U(r, A) acc[(A) + (r)] += q5_k_dot(wv5[(A) + (r)], c, &xs);
#define MV1_LOOPSq(R) MV1_QLOOPS(R, q)
#define MV1_LOOPSi(R) MV1_QLOOPS(R, i)
#define MV1_LOOPSh(R)                                                                                       \
        int bf = f == 3;                                                                                    \
        for (long base = 0; base < K; base += 32 * MV1_LS) {                                                \
            mv1h_w wvh[2 * R];                                                                              \
            MV1_REP##R(MV1_LDS, R)                                                                          \
            if (gated) { MV1_REP##R(MV1_LDSU, R) }                                                          \
            mv1_x xs;                                                                                       \
            mv1h_x_s(x, gam, base, K, lid, &xs, norm ? &ss : 0);                                            \
            MV1_REP##R(MV1_DOTH, R)                                                                         \
            if (gated) { MV1_REP##R(MV1_DOTHU, R) }                                                         \
        }
#define MV1_DOTH(r, A) acc[r] += mv1h_dot(wvh[r], bf, &xs);
#define MV1_DOTHU(r, A) acc[(A) + (r)] += mv1h_dot(wvh[(A) + (r)], bf, &xs);
#define MV1_LOOPSl(R)                                                                                       \
        int bsz = mv1l_bytes(f);                                                                            \
        for (long b = lb; b < K / 32; b += lstep) {                                                         \
            mv1l_w wvl[2 * R];                                                                              \
            MV1_REP##R(MV1_LDL, R)                                                                          \
            if (gated) { MV1_REP##R(MV1_LDLU, R) }                                                          \
            mv1_x xs;                                                                                       \
            mv1l_x(x, gam, b, &xs, norm ? &ss : 0);                                                         \
            MV1_REP##R(MV1_DOTL, R)                                                                         \
            if (gated) { MV1_REP##R(MV1_DOTLU, R) }                                                         \
        }
#define MV1_LDL(r, A) wvl[r] = mv1l_load(rows[r] + b * bsz, f);
#define MV1_LDLU(r, A) wvl[(A) + (r)] = mv1l_load(rows[(A) + (r)] + b * bsz, f);
#define MV1_DOTL(r, A) acc[r] += mv1l_dot(wvl[r], f, &xs);
#define MV1_DOTLU(r, A) acc[(A) + (r)] += mv1l_dot(wvl[(A) + (r)], f, &xs);
#define MV1_LDS(r, A) wvh[r] = mv1h_load_s(rows[r], base, K, lid);
#define MV1_LDSU(r, A) wvh[(A) + (r)] = mv1h_load_s(rows[(A) + (r)], base, K, lid);

/* One launch for what the step planner (capture.c) fused, or a plain one-row linear.
 * Work-groups take R rows of weight 0, then of weight 1, then of weight 2 (nseg of them,
 * each with its format f, rows N, output o; several linears of one x); gated: weights
 * 0 and 1 row by row in the same work-group (gate and up), z = silu(gate) * up (gated 1) or
 * gelu(gate) * up (gated 2). norm: x is
 * the input of an RMS norm (weight gam when has_gam) whose output xn work-group 0 writes;
 * the linears read xn, computed as scale * (W . (x * gam)) with the scale from the sum of
 * squares that the row reduction carries along. epi 1: z = o0 + r (an ADD after the
 * linear). bias: weight 0's, for a single linear. x, gam, the weights and the bias are
 * never written while the launch runs (the planner stages x where an output would overlap
 * it), hence restrict: the read-only cache path for them; r may be z. */
#define MV1X_PARAMS                                                                                         \
    global const uchar *restrict xb, global const uchar *restrict gmb, global uchar *xnb,                   \
        global const uchar *restrict w0, global uchar *o0, global const uchar *restrict w1, global uchar *o1, \
        global const uchar *restrict w2, global uchar *o2, global const uchar *restrict bb,                 \
        global const uchar *rb, global uchar *zb, global const uchar *restrict qb, mv1_args a, local float *red
/* V: empty for f32 x, q for x's bytes (mv1_q8x's output in qb) */
#define MV1X_FN(R, V)                                                                                       \
    inline void mv1x##V##_do_r##R(MV1X_PARAMS)                                                              \
    {                                                                                                       \
        ulong xoff = a.xoff, gmoff = a.gmoff, xnoff = a.xnoff, boff = a.boff, roff = a.roff, zoff = a.zoff;     \
        ulong w0o = a.wo[0], w1o = a.wo[1], w2o = a.wo[2], o0o = a.oo[0], o1o = a.oo[1], o2o = a.oo[2];         \
        long K = a.K, bstride = a.bstride, w0r = a.wr[0], w1r = a.wr[1], w2r = a.wr[2];                        \
        long N0 = a.N[0], N1 = a.N[1], N2 = a.N[2];                                                         \
        int norm = a.norm, has_gam = a.has_gam, gated = a.gated, nseg = a.nseg, bias_kind = a.bias_kind;     \
        int epi = a.epi, f0 = a.f[0], f1 = a.f[1], f2 = a.f[2];                                              \
        float eps = a.eps;                                                                                  \
        int lid = get_local_id(0), c = lid % 8, sl = a.slots && !gated, slot = sl ? lid >> 5 : 0;           \
        int lb = sl ? lid & 31 : lid, lstep = sl ? 32 : MV1_LS, RR = sl ? 2 * R : R;                        \
        long grp = get_group_id(0), G0 = (N0 + RR - 1) / RR, G1 = (N1 + RR - 1) / RR;                       \
        global const uchar *w = w0, *wu = w1;                                                               \
        ulong wo = w0o, oo = o0o;                                                                           \
        long wr = w0r, N = N0;                                                                              \
        int f = f0, seg = 0;                                                                                \
        global uchar *o = o0;                                                                               \
        if (!gated && nseg > 1 && grp >= G0) {                                                              \
            grp -= G0;                                                                                      \
            seg = 1, w = w1, wo = w1o, wr = w1r, f = f1, N = N1, o = o1, oo = o1o;                          \
            if (nseg > 2 && grp >= G1) {                                                                    \
                grp -= G1;                                                                                  \
                seg = 2, w = w2, wo = w2o, wr = w2r, f = f2, N = N2, o = o2, oo = o2o;                      \
            }                                                                                               \
        }                                                                                                   \
        long n0 = grp * RR;                                                                                 \
        int nr = (int)min((long)RR, N - n0);                                                                \
        global const float *x = (global const float *)(xb + xoff);                                         \
        global const float *gam = norm && has_gam ? (global const float *)(gmb + gmoff) : 0;               \
        global const uchar *xq = qb + a.qoff;                                                               \
        global const uchar *rows[2 * R];                                                                    \
        MV1_REP##R(MV1_ROW, R)                                                                              \
        float acc[2 * R], ss = 0.0f;                                                                        \
        for (int r = 0; r < 2 * R; r++) acc[r] = 0.0f;                                                      \
        long nch = K / 32;                                                                                  \
        MV1_LOOPS##V(R)                                                                                     \
        if (slot) { ss = 0.0f; MV1_REP##R(MV1_SLOT, R) } /* warp 1: rows R .. 2R - 1, x counted once */    \
        MV1_REP##R(MV1_RED, R)                                                                              \
        mv1_put(red, 2 * R, ss);                                                                            \
        float s = mv1_reduce(red, 2 * R + 1);                                                               \
        local float *fin = red + (2 * R + 1) * MV1_LS;                                                      \
        if (lid < 2 * R + 1) fin[lid] = s;                                                                  \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                       \
        float scale = norm ? rsqrt(fin[2 * R] / (float)K + eps) : 1.0f;                                    \
        if (lid < nr) {                                                                                     \
            long n = n0 + lid;                                                                              \
            float y = fin[lid] * scale;                                                                     \
            if (seg == 0 && !gated && nseg == 1) y += bias_at(bb, boff, bias_kind, bstride, n);              \
            ((global float *)(o + oo))[n] = y;                                                              \
            if (gated) {                                                                                    \
                float u = fin[R + lid] * scale;                                                             \
                ((global float *)(o1 + o1o))[n] = u;                                                        \
                ((global float *)(zb + zoff))[n] = (gated == 2 ? gelu_f(y) : silu_f(y)) * u;                \
            } else if (epi == 1) {                                                                          \
                ((global float *)(zb + zoff))[n] = y + ((global const float *)(rb + roff))[n];              \
            }                                                                                               \
        }                                                                                                   \
        if (norm == 1 && get_group_id(0) == 0) mv1_write_xn(x, gam, K, scale, (global float *)(xnb + xnoff)); \
    }

/* Each launch of a decode step costs the host (~0.38 us) and the device (~0.12 us) per
 * buffer argument on NVIDIA (bench/ocl_enqueue.c), and most of a fused launch's 12
 * operands share a few buffers (the step's arena, a weight): the packed kernels (_b2, _b4)
 * take each distinct buffer once and find an operand's in mv1_args.bi. */
#define MV1_BUFS2 global uchar *b0, global uchar *b1
#define MV1_BUFS4 MV1_BUFS2, global uchar *b2, global uchar *b3
#define MV1_BUFS8 MV1_BUFS4, global uchar *b4, global uchar *b5, global uchar *b6, global uchar *b7
#define MV1_PICK2(i) ((i) == 0 ? b0 : b1)
#define MV1_PICK4(i) ((i) < 2 ? MV1_PICK2(i) : (i) == 2 ? b2 : b3)
#define MV1_PICK8(i) ((i) < 4 ? MV1_PICK4(i) : (i) < 6 ? ((i) == 4 ? b4 : b5) : (i) == 6 ? b6 : b7)

#define MV1X_KERNEL(R, V)                                                                                   \
    MV1X_FN(R, V)                                                                                           \
    kernel void mv1x##V##_r##R(MV1X_PARAMS)                                                                 \
    {                                                                                                       \
        mv1x##V##_do_r##R(xb, gmb, xnb, w0, o0, w1, o1, w2, o2, bb, rb, zb, qb, a, red);                    \
    }

#define MV1X_PACKED(R, V, NB)                                                                               \
    kernel void mv1x##V##_r##R##_b##NB(MV1_BUFS##NB, mv1_args a, local float *red)                          \
    {                                                                                                       \
        mv1x##V##_do_r##R(MV1_PICK##NB(a.bi[0]), MV1_PICK##NB(a.bi[1]), MV1_PICK##NB(a.bi[2]),              \
                          MV1_PICK##NB(a.bi[3]), MV1_PICK##NB(a.bi[4]), MV1_PICK##NB(a.bi[5]),              \
                          MV1_PICK##NB(a.bi[6]), MV1_PICK##NB(a.bi[7]), MV1_PICK##NB(a.bi[8]),              \
                          MV1_PICK##NB(a.bi[9]), MV1_PICK##NB(a.bi[10]), MV1_PICK##NB(a.bi[11]),            \
                          MV1_PICK##NB(a.bi[12]), a, red);                                                  \
    }

/* f32 x: every operand, or 2 or 4 distinct buffers; x's bytes (one buffer more): every
 * operand, or 4 or 8; bytes made in the work-item: as f32 x; f16 / bf16 weights (h), the
 * 32-blocks (l), Q5_K (k) and Q2_K / Q3_K (s): as f32 x (MV1X_B24: all operands, _b2, _b4). */
#define MV1X_B24(R, V)                                                                                      \
    MV1X_KERNEL(R, V)                                                                                       \
    MV1X_PACKED(R, V, 2)                                                                                    \
    MV1X_PACKED(R, V, 4)
#define MV1X_ALL(R)                                                                                         \
    MV1X_B24(R, )                                                                                           \
    MV1X_KERNEL(R, q)                                                                                       \
    MV1X_PACKED(R, q, 4)                                                                                    \
    MV1X_PACKED(R, q, 8)                                                                                    \
    MV1X_B24(R, i)                                                                                          \
    MV1X_B24(R, h)                                                                                          \
    MV1X_B24(R, l)                                                                                          \
    MV1X_B24(R, k)                                                                                          \
    MV1X_B24(R, s)

MV1X_ALL(1)
MV1X_ALL(2)
MV1X_ALL(4)
MV1X_ALL(8)

/* Before a fused launch whose outputs overlap its x (the step's arena reuses the bytes of
 * a tensor once its last reader ran, and a fused launch still reads x while it writes):
 * one work-group copies x, or its RMS norm, into a scratch buffer of the captured step,
 * which the launch then reads instead; the norm's own output is written here too. Each
 * work-item reads its elements before the barrier and writes only its own after it, so
 * xn may be x itself. */
kernel void mv1_stage_x(global const uchar *xb, ulong xoff, long K, int norm, global const uchar *gmb, ulong gmoff,
                        int has_gam, float eps, global uchar *xnb, ulong xnoff, global float *scratch, local float *red)
{
    int lid = get_local_id(0), ls = get_local_size(0);
    global const float *x = (global const float *)(xb + xoff);
    global const float *gam = (global const float *)(gmb + gmoff);
    float v[32], ss = 0.0f; /* K <= 32 * local size (quant_mv1.c) */
    int n = 0;
    for (long i = lid; i < K; i += ls) {
        v[n] = x[i];
        ss += v[n] * v[n];
        n++;
    }
    red[lid] = ss;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = ls / 2; s > 0; s /= 2) {
        if (lid < s) red[lid] += red[lid + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float scale = norm ? rsqrt(red[0] / (float)K + eps) : 1.0f;
    n = 0;
    for (long i = lid; i < K; i += ls) {
        float y = norm ? v[n] * scale * (has_gam ? gam[i] : 1.0f) : v[n];
        if (norm) ((global float *)(xnb + xnoff))[i] = y;
        scratch[i] = y;
        n++;
    }
}

/* ---- the attention input of a decode layer in one launch (quant_mv1.c, qkv_rope) ----
 * RMS norm + the q, k and v products of its output, RoPE of q and k, and the row writes
 * of rotated k and of v into their caches. A rotation mixes two elements of a head (2i and
 * 2i + 1, or i and i + D/2 in NeoX mode), so the work-groups of q and k take their R rows
 * (R even) as rotation pairs: virtual row v is element mv1r_elem(v) of the output, and its
 * partner v ^ 1 sits in the same work-group. The rotation then needs no other work-group's
 * output. Every output of the eight ops is written as op-by-op execution leaves it: where a
 * later output of the group took an earlier one's bytes (the step's arena reuses a tensor
 * once its last reader ran), the earlier one skips them (mv1r_args.ex, byte ranges
 * relative to each output). The angle is computed as nn_rope computes it. */
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

/* The same fields in the same order as mv1r_args in quant_mv1.c. */
typedef struct {
    ulong xoff, gmoff, xnoff, wo[3], oo[3], yqo, yko, cko, cvo, po, io;
    long K, wr[3], N[3], D, ckC, cks0, cks1, ckR, cvC, cvs0, cvs1, cvR, is0;
    long ex[10]; /* [lo, hi) not to write, of xn, o0, o1, o2, yq */
    int has_gam, norm, f[3], neox, p64, i64, ckdt, cvdt;
    int bi[15]; /* mv1r_r*_b8: the buffer argument of x, gam, xn, w0, o0, w1, o1, w2, o2, pos, idx, yq, yk, ck, cv */
    float eps, base_hi, base_lo, scale_hi, scale_lo;
} mv1r_args;

inline long mv1r_elem(long v, long D, int neox)
{
    if (!neox) return v;
    long p = v >> 1, hd = D / 2, h = p / hd, j = p - h * hd;
    return h * D + j + (v & 1) * hd;
}

/* Element i (f32) of an output whose bytes [lo, hi) a later output of the group owns. */
inline void mv1r_st(global uchar *b, ulong off, long i, float v, long lo, long hi)
{
    long by = i * 4;
    if (by + 4 <= lo || by >= hi) ((global float *)(b + off))[i] = v;
}

inline void mv1r_cache(global uchar *b, ulong off, long i, int dt, float v)
{
    if (dt == 0) ((global float *)(b + off))[i] = v;
    else vstore_half_rte(v, i, (global half *)(b + off));
}

inline long mv1r_pos(global const uchar *p, int is64)
{
    return is64 ? *(global const long *)p : (long)*(global const int *)p;
}

/* sin and cos of rotation pair i of a head of D at position pos, as rope_at in nn.cl. */
inline void mv1r_angle(long pos, long i, long D, const mv1r_args *a, float *co, float *si)
{
#if defined(cl_khr_fp64)
    double base = (double)a->base_hi + (double)a->base_lo, fs = (double)a->scale_hi + (double)a->scale_lo;
    double theta = (double)pos * fs * pow(base, -(double)i / (double)(D / 2));
    *co = (float)cos(theta), *si = (float)sin(theta);
#else
    float theta = (float)pos * a->scale_hi * pow(a->base_hi, -(float)i / (float)(D / 2));
    *co = cos(theta), *si = sin(theta);
#endif
}

/* xn by work-group 0, leaving the bytes [lo, hi) a later output owns. */
inline void mv1r_write_xn(global const float *x, global const float *gam, long K, float scale, global uchar *xnb,
                          ulong xnoff, long lo, long hi)
{
    for (long i = get_local_id(0); i < K; i += MV1_LS)
        mv1r_st(xnb, xnoff, i, x[i] * (gam ? gam[i] : 1.0f) * scale, lo, hi);
}

#define MV1R_ROW(r, A)                                                                                      \
    {                                                                                                       \
        long rr = min((long)(r), (long)nr - 1);                                                             \
        rows[r] = w + wo + (seg < 2 ? mv1r_elem(n0 + rr, D, a.neox) : n0 + rr) * wr;                        \
    }
#define MV1R_RED(r, A) mv1_put(red, (r), acc[r]);

/* mv1r*'s chunk loops: Q4_K / Q6_K weights, or f16 / bf16 ones (mv1rh), the 32-blocks
 * (mv1rl), Q5_K / Q6_K (mv1rk) and Q2_K / Q3_K / Q4_K (mv1rs), as mv1x*'s; MV1R_CHLOOP is
 * MV1_CHLOOP with one set of rows (no gate) and f32 x. */
#define MV1R_CHLOOP(R, BSZ, T, ARR, LD, DOT, XF)                                                            \
            for (long ch = lid; ch < nch; ch += MV1_LS) {                                                   \
                long bo = (ch / 8) * (BSZ);                                                                 \
                T ARR[R];                                                                                   \
                MV1_REP##R(LD, R)                                                                           \
                mv1_x xs;                                                                                   \
                mv1_load_x(XF, x, gam, ch / 8, c, &xs, a.norm ? &ss : 0);                                   \
                MV1_REP##R(DOT, R)                                                                          \
            }
#define MV1R_LOOPS(R)                                                                                       \
        if (f == 0) {                                                                                       \
            MV1R_CHLOOP(R, 144, q4k_w, wv4, MV1_LD4, MV1_DOT4, 0)                                           \
        } else {                                                                                            \
            MV1R_CHLOOP(R, 210, q6k_w, wv6, MV1_LD6, MV1_DOT6, 1)                                           \
        }
#define MV1R_LOOPSk(R)                                                                                      \
        if (f == 9) {                                                                                       \
            MV1R_CHLOOP(R, 176, q5k_w, wv5, MV1_LD5, MV1_DOT5, 0)                                           \
        } else {                                                                                            \
            MV1R_CHLOOP(R, 210, q6k_w, wv6, MV1_LD6, MV1_DOT6, 1)                                           \
        }
#define MV1R_LOOPSs(R)                                                                                      \
        if (f == 0) {                                                                                       \
            MV1R_CHLOOP(R, 144, q4k_w, wv4, MV1_LD4, MV1_DOT4, 0)                                           \
        } else if (f == 10) {                                                                               \
            MV1R_CHLOOP(R, 84, q2k_w, wv2, MV1_LD2, MV1_DOT2, 1)                                            \
        } else {                                                                                            \
            MV1R_CHLOOP(R, 110, q3k_w, wv3, MV1_LD3, MV1_DOT3, 1)                                           \
        }
#define MV1R_LOOPSh(R)                                                                                      \
        int bf = f == 3;                                                                                    \
        for (long base = 0; base < K; base += 32 * MV1_LS) {                                                \
            mv1h_w wvh[R];                                                                                  \
            MV1_REP##R(MV1_LDS, R)                                                                          \
            mv1_x xs;                                                                                       \
            mv1h_x_s(x, gam, base, K, lid, &xs, a.norm ? &ss : 0);                                          \
            MV1_REP##R(MV1_DOTH, R)                                                                         \
        }

#define MV1R_LOOPSl(R)                                                                                      \
        int bsz = mv1l_bytes(f);                                                                            \
        for (long b = lid; b < K / 32; b += MV1_LS) {                                                       \
            mv1l_w wvl[R];                                                                                  \
            MV1_REP##R(MV1_LDL, R)                                                                          \
            mv1_x xs;                                                                                       \
            mv1l_x(x, gam, b, &xs, a.norm ? &ss : 0);                                                       \
            MV1_REP##R(MV1_DOTL, R)                                                                         \
        }

#define MV1R_PARAMS                                                                                         \
    global const uchar *restrict xb, global const uchar *restrict gmb, global uchar *xnb,                   \
        global const uchar *restrict w0, global uchar *o0, global const uchar *restrict w1, global uchar *o1, \
        global const uchar *restrict w2, global uchar *o2, global const uchar *restrict pb,                 \
        global const uchar *restrict ib, global uchar *yqb, global uchar *ykb, global uchar *ckb,           \
        global uchar *cvb, mv1r_args a, local float *red
#define MV1R_FN(R, V)                                                                                        \
    inline void mv1r##V##_do_r##R(MV1R_PARAMS)                                                             \
    {                                                                                                       \
        int lid = get_local_id(0), c = lid % 8, seg = 0;                                                    \
        long K = a.K, D = a.D, grp = get_group_id(0), G0 = a.N[0] / R, G1 = a.N[1] / R;                     \
        if (grp >= G0 + G1) seg = 2, grp -= G0 + G1;                                                        \
        else if (grp >= G0) seg = 1, grp -= G0;                                                             \
        global const uchar *w = seg == 0 ? w0 : seg == 1 ? w1 : w2;                                         \
        ulong wo = a.wo[seg];                                                                               \
        long wr = a.wr[seg], n0 = grp * R;                                                                  \
        int f = a.f[seg], nr = (int)min((long)R, a.N[seg] - n0);                                            \
        global const float *x = (global const float *)(xb + a.xoff);                                       \
        global const float *gam = a.norm && a.has_gam ? (global const float *)(gmb + a.gmoff) : 0;         \
        global const uchar *rows[R];                                                                        \
        MV1_REP##R(MV1R_ROW, R)                                                                             \
        float acc[R], ss = 0.0f;                                                                            \
        for (int r = 0; r < R; r++) acc[r] = 0.0f;                                                          \
        long nch = K / 32;                                                                                  \
        MV1R_LOOPS##V(R)                                                                                    \
        MV1_REP##R(MV1R_RED, R)                                                                             \
        mv1_put(red, R, ss);                                                                                \
        float s = mv1_reduce(red, R + 1);                                                                   \
        local float *fin = red + (R + 1) * MV1_LS;                                                          \
        if (lid < R + 1) fin[lid] = s;                                                                      \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                       \
        float scale = a.norm ? rsqrt(fin[R] / (float)K + a.eps) : 1.0f;                                    \
        if (lid < nr) {                                                                                     \
            long v = n0 + lid;                                                                              \
            float y = fin[lid] * scale;                                                                     \
            if (seg == 2) {                                                                                 \
                mv1r_st(o2, a.oo[2], v, y, a.ex[6], a.ex[7]);                                               \
                long h = v / a.cvC, d = mv1r_pos(ib + a.io + h * a.is0 * (a.i64 ? 8 : 4), a.i64);           \
                if (d >= 0 && d < a.cvR) mv1r_cache(cvb, a.cvo, d * a.cvs0 + (v - h * a.cvC) * a.cvs1, a.cvdt, y); \
            } else {                                                                                        \
                long e = mv1r_elem(v, D, a.neox), side = lid & 1, hd = e % D;                               \
                long i = a.neox ? hd - side * (D / 2) : hd >> 1;                                            \
                float yp = fin[lid ^ 1] * scale, x0 = side ? yp : y, x1 = side ? y : yp, co, si;            \
                mv1r_angle(mv1r_pos(pb + a.po, a.p64), i, D, &a, &co, &si);                                 \
                float rot = side ? x0 * si + x1 * co : x0 * co - x1 * si;                                   \
                if (seg == 0) {                                                                             \
                    mv1r_st(o0, a.oo[0], e, y, a.ex[2], a.ex[3]);                                           \
                    mv1r_st(yqb, a.yqo, e, rot, a.ex[8], a.ex[9]);                                          \
                } else {                                                                                    \
                    mv1r_st(o1, a.oo[1], e, y, a.ex[4], a.ex[5]);                                           \
                    ((global float *)(ykb + a.yko))[e] = rot;                                               \
                    long h = e / a.ckC, d = mv1r_pos(ib + a.io + h * a.is0 * (a.i64 ? 8 : 4), a.i64);       \
                    if (d >= 0 && d < a.ckR)                                                                \
                        mv1r_cache(ckb, a.cko, d * a.cks0 + (e - h * a.ckC) * a.cks1, a.ckdt, rot);         \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
        if (a.norm == 1 && get_group_id(0) == 0)                                                            \
            mv1r_write_xn(x, gam, K, scale, xnb, a.xnoff, a.ex[0], a.ex[1]);                                \
    }

/* The 15-buffer form, and the packed one (_b8, as mv1x's _b2 and _b4). */
#define MV1R_KERNEL(R, V)                                                                                    \
    MV1R_FN(R, V)                                                                                           \
    kernel void mv1r##V##_r##R(MV1R_PARAMS)                                                                    \
    {                                                                                                       \
        mv1r##V##_do_r##R(xb, gmb, xnb, w0, o0, w1, o1, w2, o2, pb, ib, yqb, ykb, ckb, cvb, a, red);               \
    }                                                                                                       \
    kernel void mv1r##V##_r##R##_b8(MV1_BUFS8, mv1r_args a, local float *red)                                 \
    {                                                                                                       \
        mv1r##V##_do_r##R(MV1_PICK8(a.bi[0]), MV1_PICK8(a.bi[1]), MV1_PICK8(a.bi[2]), MV1_PICK8(a.bi[3]),         \
                     MV1_PICK8(a.bi[4]), MV1_PICK8(a.bi[5]), MV1_PICK8(a.bi[6]), MV1_PICK8(a.bi[7]),         \
                     MV1_PICK8(a.bi[8]), MV1_PICK8(a.bi[9]), MV1_PICK8(a.bi[10]), MV1_PICK8(a.bi[11]),       \
                     MV1_PICK8(a.bi[12]), MV1_PICK8(a.bi[13]), MV1_PICK8(a.bi[14]), a, red);                 \
    }

MV1R_KERNEL(2, )
MV1R_KERNEL(4, )
MV1R_KERNEL(8, )
MV1R_KERNEL(2, h)
MV1R_KERNEL(4, h)
MV1R_KERNEL(8, h)
MV1R_KERNEL(2, l)
MV1R_KERNEL(4, l)
MV1R_KERNEL(8, l)
MV1R_KERNEL(2, k)
MV1R_KERNEL(4, k)
MV1R_KERNEL(8, k)
MV1R_KERNEL(2, s)
MV1R_KERNEL(4, s)
MV1R_KERNEL(8, s)
