/* Ops with a block-quantized source: dequantizing copy, embedding rows, and the
 * quantized linear (matrix-vector for decode, tiled for prompts). quant_blocks.h is put
 * in front of this file by the loader.
 *
 * Every format is read in groups of 16 consecutive elements: 16 divides every block
 * (32 or 256) and is the finest group any format keeps a scale for (Q2_K, Q3_K, Q6_K),
 * so one routine per format, dq16_<fmt>(block, g, out), serves every kernel. Values are
 * computed in f32 from the dequantized weights (no integer dot extension is assumed:
 * NVIDIA's OpenCL reports none). Tensors come as a global pointer plus a byte offset,
 * since views need not sit at sub-buffer-aligned origins. */

/* Leading dims of a row-wise operation: dst rows (or ids) are walked by a flat index
 * decomposed over shape[]; strides in elements of the tensor they describe, except
 * sstr (quantized source rows) in bytes. Same layout as ocl_q_nd in quant.c. */
typedef struct {
    long shape[8];
    long dstr[8];
    long sstr[8];
    int nd;
    int pad;
} q_nd;

inline float h2f(global const ushort *p) { return vload_half(0, (global const half *)p); }

inline uint qh32(global const uchar *p)
{
    return (uint)p[0] | ((uint)p[1] << 8) | ((uint)p[2] << 16) | ((uint)p[3] << 24);
}

/* ---- 16 values of group g of one block, per format ---- */

inline void dq16_q4_0(global const uchar *p, int g, float *o)
{
    global const blk_q4_0 *b = (global const blk_q4_0 *)p;
    float d = h2f(&b->d);
    int sh = 4 * g;
    for (int i = 0; i < 16; i++) o[i] = (float)(((b->qs[i] >> sh) & 0xF) - 8) * d;
}

inline void dq16_q4_1(global const uchar *p, int g, float *o)
{
    global const blk_q4_1 *b = (global const blk_q4_1 *)p;
    float d = h2f(&b->d), m = h2f(&b->m);
    int sh = 4 * g;
    for (int i = 0; i < 16; i++) o[i] = (float)((b->qs[i] >> sh) & 0xF) * d + m;
}

inline void dq16_q5_0(global const uchar *p, int g, float *o)
{
    global const blk_q5_0 *b = (global const blk_q5_0 *)p;
    float d = h2f(&b->d);
    uint qh = qh32(b->qh) >> (16 * g);
    int sh = 4 * g;
    for (int i = 0; i < 16; i++) o[i] = (float)((int)(((b->qs[i] >> sh) & 0xF) | (((qh >> i) & 1) << 4)) - 16) * d;
}

inline void dq16_q5_1(global const uchar *p, int g, float *o)
{
    global const blk_q5_1 *b = (global const blk_q5_1 *)p;
    float d = h2f(&b->d), m = h2f(&b->m);
    uint qh = qh32(b->qh) >> (16 * g);
    int sh = 4 * g;
    for (int i = 0; i < 16; i++) o[i] = (float)(((b->qs[i] >> sh) & 0xF) | (((qh >> i) & 1) << 4)) * d + m;
}

inline void dq16_q8_0(global const uchar *p, int g, float *o)
{
    global const blk_q8_0 *b = (global const blk_q8_0 *)p;
    float d = h2f(&b->d);
    for (int i = 0; i < 16; i++) o[i] = (float)b->qs[16 * g + i] * d;
}

/* Q2_K and Q3_K share the 2-bit layout: element e at qs[(e/128)*32 + e%32], bits 2*((e%128)/32). */
inline void dq16_q2_k(global const uchar *p, int g, float *o)
{
    global const blk_q2_k *b = (global const blk_q2_k *)p;
    float dl = h2f(&b->d) * (float)(b->scales[g] & 0xF), ml = h2f(&b->dmin) * (float)(b->scales[g] >> 4);
    global const uchar *q = b->qs + (g / 8) * 32 + 16 * (g % 2);
    int sh = 2 * ((g % 8) / 2);
    for (int i = 0; i < 16; i++) o[i] = dl * (float)((q[i] >> sh) & 3) - ml;
}

inline void dq16_q3_k(global const uchar *p, int g, float *o)
{
    global const blk_q3_k *b = (global const blk_q3_k *)p;
    int lo = g < 8 ? (b->scales[g] & 0xF) : (b->scales[g - 8] >> 4);
    int sc = (lo | (((b->scales[8 + g % 4] >> (2 * (g / 4))) & 3) << 4)) - 32;
    float dl = h2f(&b->d) * (float)sc;
    global const uchar *q = b->qs + (g / 8) * 32 + 16 * (g % 2);
    global const uchar *hm = b->hmask + 16 * (g % 2);
    int sh = 2 * ((g % 8) / 2), hb = g / 2;
    for (int i = 0; i < 16; i++) {
        int v = (q[i] >> sh) & 3;
        if (!((hm[i] >> hb) & 1)) v -= 4;
        o[i] = dl * (float)v;
    }
}

/* Q4_K/Q5_K: 8 groups of 32 with 6-bit scale and min j packed in 12 bytes. */
inline void k4_scale_min(int j, global const uchar *s, float *sc, float *m)
{
    if (j < 4) {
        *sc = (float)(s[j] & 63);
        *m = (float)(s[j + 4] & 63);
    } else {
        *sc = (float)((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
        *m = (float)((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
    }
}

inline void dq16_q4_k(global const uchar *p, int g, float *o)
{
    global const blk_q4_k *b = (global const blk_q4_k *)p;
    int j = g / 2;
    float sc, m;
    k4_scale_min(j, b->scales, &sc, &m);
    float dl = h2f(&b->d) * sc, ml = h2f(&b->dmin) * m;
    global const uchar *q = b->qs + 32 * (j / 2) + 16 * (g % 2);
    int sh = 4 * (j & 1);
    for (int i = 0; i < 16; i++) o[i] = dl * (float)((q[i] >> sh) & 0xF) - ml;
}

inline void dq16_q5_k(global const uchar *p, int g, float *o)
{
    global const blk_q5_k *b = (global const blk_q5_k *)p;
    int j = g / 2;
    float sc, m;
    k4_scale_min(j, b->scales, &sc, &m);
    float dl = h2f(&b->d) * sc, ml = h2f(&b->dmin) * m;
    global const uchar *q = b->qs + 32 * (j / 2) + 16 * (g % 2);
    global const uchar *qh = b->qh + 16 * (g % 2);
    int sh = 4 * (j & 1);
    for (int i = 0; i < 16; i++) o[i] = dl * (float)(((q[i] >> sh) & 0xF) | (((qh[i] >> j) & 1) << 4)) - ml;
}

inline void dq16_q6_k(global const uchar *p, int g, float *o)
{
    global const blk_q6_k *b = (global const blk_q6_k *)p;
    int h = g / 8, k = (g % 8) / 2, l0 = 16 * (g % 2);
    float dl = h2f(&b->d) * (float)b->scales[g];
    global const uchar *ql = b->ql + 64 * h + 32 * (k & 1) + l0;
    global const uchar *qh = b->qh + 32 * h + l0;
    int sl = 4 * (k >> 1), sh = 2 * k;
    for (int i = 0; i < 16; i++) o[i] = dl * (float)((((ql[i] >> sl) & 0xF) | (((qh[i] >> sh) & 3) << 4)) - 32);
}

/* ---- kernels, instantiated per format ---- */

/* Byte offset of flat row r over the leading dims (dst elements, src bytes). */
inline void nd_offsets(const q_nd *nd, long r, long *doff, long *soff)
{
    long d = 0, s = 0;
    for (int i = nd->nd - 1; i >= 0; i--) {
        long idx = r % nd->shape[i];
        r /= nd->shape[i];
        d += idx * nd->dstr[i];
        s += idx * nd->sstr[i];
    }
    *doff = d;
    *soff = s;
}

#define MV_MAX_M 8 /* rows of x one matrix-vector work-group serves (quant.c: OCL_Q_MV_MAX_M) */
#define TILE 32    /* the tiled kernels' k-step (and matmul_'s TILE x TILE outputs per 8 x 8 work-group) */

/* Prefill: a WG x WG work-group computes a 4 WG x 4 WG block of out (4 x 4 per work-item, WG
 * apart, so a warp's local reads are conflict-free); per 32-deep step the first 8 WG
 * work-items each dequantize a 16-group of the weight tile into local memory and every
 * work-item loads 128 / WG values of x, then all multiply from local memory. matmul_ (WG 8:
 * 32 x 32 tiles) serves every device; matmul64_ (WG 16) serves GPUs' prompts of 64+ rows,
 * each dequantized weight then serving 64 rows of x from 4x the threads. */
#define QUANT_MATMUL(F, BLK, GPB, NAME, WG)                                                                 \
    kernel void NAME(global const uchar *w, ulong woff, long wrow, global const uchar *xb, ulong xoff,     \
                     long rsx, long csx, global uchar *outb, ulong ooff, global const uchar *bb, ulong boff, \
                     int bias_kind, long bstride, long M, long N, long K)                                  \
    {                                                                                                      \
        local float ws[TILE][4 * WG + 1], xs[TILE][4 * WG + 1];                                            \
        int tx = get_local_id(0), ty = get_local_id(1), lid = ty * WG + tx;                                \
        long n0 = get_group_id(0) * (4 * WG), m0 = get_group_id(1) * (4 * WG);                             \
        global const float *x = (global const float *)(xb + xoff);                                        \
        float acc[4][4];                                                                                   \
        for (int i = 0; i < 4; i++)                                                                        \
            for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;                                                  \
        int wr = lid >> 1, wgp = lid & 1; /* lid < 8 WG: weight row wr, its 16-group wgp */               \
        int xr = lid / (WG / 4), xk = (lid % (WG / 4)) * (128 / WG); /* x row xr from depth xk */         \
        for (long k0 = 0; k0 < K; k0 += TILE) {                                                            \
            if (lid < 8 * WG) {                                                                            \
                long g = k0 / 16 + wgp;                                                                    \
                float v[16];                                                                               \
                if (n0 + wr < N) dq16_##F(w + woff + (n0 + wr) * wrow + (g / GPB) * sizeof(BLK), (int)(g % GPB), v); \
                else for (int i = 0; i < 16; i++) v[i] = 0.0f;                                             \
                for (int i = 0; i < 16; i++) ws[wgp * 16 + i][wr] = v[i];                                  \
            }                                                                                              \
            if (m0 + xr < M) {                                                                             \
                global const float *xp = x + (m0 + xr) * rsx + (k0 + xk) * csx;                           \
                for (int e = 0; e < 128 / WG; e++) xs[xk + e][xr] = xp[e * csx];                           \
            } else {                                                                                       \
                for (int e = 0; e < 128 / WG; e++) xs[xk + e][xr] = 0.0f;                                  \
            }                                                                                              \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
            for (int k = 0; k < TILE; k++) {                                                               \
                float a[4], b[4];                                                                          \
                for (int i = 0; i < 4; i++) a[i] = xs[k][ty + WG * i];                                     \
                for (int j = 0; j < 4; j++) b[j] = ws[k][tx + WG * j];                                     \
                for (int i = 0; i < 4; i++)                                                                \
                    for (int j = 0; j < 4; j++) acc[i][j] = fma(a[i], b[j], acc[i][j]);                    \
            }                                                                                              \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
        }                                                                                                  \
        global float *out = (global float *)(outb + ooff);                                                 \
        for (int i = 0; i < 4; i++) {                                                                      \
            long m = m0 + ty + WG * i;                                                                     \
            if (m >= M) continue;                                                                          \
            for (int j = 0; j < 4; j++) {                                                                  \
                long n = n0 + tx + WG * j;                                                                 \
                if (n < N) out[m * N + n] = acc[i][j] + bias_at(bb, boff, bias_kind, bstride, n);          \
            }                                                                                              \
        }                                                                                                  \
    }

#define QUANT_KERNELS(F, BLK, GPB)                                                                          \
    /* copy: one work-item per 16-group of a dst row; dst f32 or f16 (half != 0), element stride dcol */  \
    kernel void dequant_##F(global const uchar *src, ulong soff, global uchar *dst, ulong doff, q_nd nd,    \
                            long dcol, int half_out, long gpr, long total)                                 \
    {                                                                                                      \
        long t = get_global_id(0);                                                                         \
        if (t >= total) return;                                                                            \
        long r = t / gpr, g = t % gpr, dr, sr;                                                             \
        nd_offsets(&nd, r, &dr, &sr);                                                                      \
        float v[16];                                                                                       \
        dq16_##F(src + soff + sr + (g / GPB) * sizeof(BLK), (int)(g % GPB), v);                            \
        long e0 = dr + g * 16 * dcol;                                                                      \
        if (half_out) {                                                                                    \
            global half *d = (global half *)(dst + doff);                                                  \
            for (int i = 0; i < 16; i++) vstore_half(v[i], e0 + i * dcol, d);                              \
        } else {                                                                                           \
            global float *d = (global float *)(dst + doff);                                                \
            for (int i = 0; i < 16; i++) d[e0 + i * dcol] = v[i];                                          \
        }                                                                                                  \
    }                                                                                                      \
                                                                                                           \
    /* embedding: out [n, D] contiguous f32; ids (i32 or i64) walked through nd (dstr: ids strides).   \
     * An id outside [0, V) gets a NaN row: the table is never read out of bounds. */                     \
    kernel void embed_##F(global const uchar *w, ulong woff, long wrow, global const uchar *ids, ulong ioff, \
                          int ids64, q_nd nd, global float *out, ulong ooff, long V, long gpr, long total)  \
    {                                                                                                      \
        long t = get_global_id(0);                                                                         \
        if (t >= total) return;                                                                            \
        long r = t / gpr, g = t % gpr, io, unused;                                                         \
        nd_offsets(&nd, r, &io, &unused);                                                                  \
        long id = ids64 ? ((global const long *)(ids + ioff))[io] : (long)((global const int *)(ids + ioff))[io]; \
        global float *y = (global float *)((global uchar *)out + ooff) + r * gpr * 16 + g * 16;            \
        if (id < 0 || id >= V) {                                                                           \
            for (int i = 0; i < 16; i++) y[i] = NAN;                                                       \
            return;                                                                                        \
        }                                                                                                  \
        float v[16];                                                                                       \
        dq16_##F(w + woff + id * wrow + (g / GPB) * sizeof(BLK), (int)(g % GPB), v);                       \
        for (int i = 0; i < 16; i++) y[i] = v[i];                                                          \
    }                                                                                                      \
                                                                                                           \
    /* decode: work-group n computes out[m, n] for m < M <= MV_MAX_M, the weight row read once;         \
     * work-items take 16-groups round robin (neighbours read neighbouring bytes), then a tree in      \
     * local memory (red: M * local size floats; the local size is a power of two). */                   \
    kernel void matvec_##F(global const uchar *w, ulong woff, long wrow, global const uchar *xb, ulong xoff, \
                           long rsx, long csx, global uchar *outb, ulong ooff, global const uchar *bb,     \
                           ulong boff, int bias_kind, long bstride, int M, long N, long K, local float *red) \
    {                                                                                                      \
        long n = get_group_id(0);                                                                          \
        int lid = get_local_id(0), ls = get_local_size(0);                                                 \
        global const float *x = (global const float *)(xb + xoff);                                        \
        global const uchar *row = w + woff + n * wrow;                                                     \
        float acc[MV_MAX_M];                                                                               \
        for (int m = 0; m < MV_MAX_M; m++) acc[m] = 0.0f;                                                  \
        long ng = K / 16;                                                                                  \
        for (long g = lid; g < ng; g += ls) {                                                              \
            float v[16];                                                                                   \
            dq16_##F(row + (g / GPB) * sizeof(BLK), (int)(g % GPB), v);                                    \
            for (int m = 0; m < M; m++) {                                                                  \
                global const float *xr = x + m * rsx + g * 16 * csx;                                       \
                float s = 0.0f;                                                                            \
                for (int i = 0; i < 16; i++) s = fma(v[i], xr[i * csx], s);                                \
                acc[m] += s;                                                                               \
            }                                                                                              \
        }                                                                                                  \
        for (int m = 0; m < M; m++) red[m * ls + lid] = acc[m];                                            \
        barrier(CLK_LOCAL_MEM_FENCE);                                                                      \
        for (int s = ls / 2; s > 0; s /= 2) {                                                              \
            if (lid < s)                                                                                   \
                for (int m = 0; m < M; m++) red[m * ls + lid] += red[m * ls + lid + s];                    \
            barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
        }                                                                                                  \
        if (lid < M) {                                                                                     \
            global float *out = (global float *)(outb + ooff);                                             \
            out[lid * N + n] = red[lid * ls] + bias_at(bb, boff, bias_kind, bstride, n);                   \
        }                                                                                                  \
    }                                                                                                      \
                                                                                                           \
    /* CPU devices (PoCL), where a work-group costs about a microsecond to set up: work-item    \
     * (n, j) computes out[m, n] for the MV_MAX_M rows m of x from j * MV_MAX_M, consecutive     \
     * weight rows side by side (the compiler vectorizes across them). */                            \
    kernel void matvec_rows_##F(global const uchar *w, ulong woff, long wrow, global const uchar *xb,       \
                                ulong xoff, long rsx, long csx, global uchar *outb, ulong ooff,             \
                                global const uchar *bb, ulong boff, int bias_kind, long bstride, long M,    \
                                long N, long K)                                                             \
    {                                                                                                      \
        long n = get_global_id(0), m0 = get_global_id(1) * MV_MAX_M;                                       \
        if (n >= N || m0 >= M) return;                                                                     \
        int mn = (int)min((long)MV_MAX_M, M - m0);                                                         \
        global const float *x = (global const float *)(xb + xoff) + m0 * rsx;                             \
        global const uchar *row = w + woff + n * wrow;                                                     \
        float acc[MV_MAX_M];                                                                               \
        for (int m = 0; m < MV_MAX_M; m++) acc[m] = 0.0f;                                                  \
        for (long g = 0; g < K / 16; g++) {                                                                \
            float v[16];                                                                                   \
            dq16_##F(row + (g / GPB) * sizeof(BLK), (int)(g % GPB), v);                                    \
            for (int m = 0; m < mn; m++) {                                                                 \
                global const float *xr = x + m * rsx + g * 16 * csx;                                       \
                for (int i = 0; i < 16; i++) acc[m] = fma(v[i], xr[i * csx], acc[m]);                     \
            }                                                                                              \
        }                                                                                                  \
        global float *out = (global float *)(outb + ooff);                                                 \
        float b = bias_at(bb, boff, bias_kind, bstride, n);                                                \
        for (int m = 0; m < mn; m++) out[(m0 + m) * N + n] = acc[m] + b;                                   \
    }                                                                                                      \
                                                                                                           \
    QUANT_MATMUL(F, BLK, GPB, matmul_##F, 8)                                                               \
    QUANT_MATMUL(F, BLK, GPB, matmul64_##F, 16)

/* A quantized tensor copied as it is (same type and shape, both contiguous): its bytes. */
kernel void copy_blocks(global const uchar *src, ulong soff, global uchar *dst, ulong doff, long n)
{
    long i = get_global_id(0);
    if (i < n) dst[doff + i] = src[soff + i];
}

/* bias_kind: 0 none, 1 f32, 2 f16, 3 bf16; bstride in elements. */
inline float bias_at(global const uchar *b, ulong off, int kind, long stride, long n)
{
    if (kind == 0) return 0.0f;
    global const uchar *p = b + off;
    if (kind == 1) return ((global const float *)p)[n * stride];
    if (kind == 2) return vload_half(n * stride, (global const half *)p);
    return as_float((uint)((global const ushort *)p)[n * stride] << 16);
}

QUANT_KERNELS(q4_0, blk_q4_0, 2)
QUANT_KERNELS(q4_1, blk_q4_1, 2)
QUANT_KERNELS(q5_0, blk_q5_0, 2)
QUANT_KERNELS(q5_1, blk_q5_1, 2)
QUANT_KERNELS(q8_0, blk_q8_0, 2)
QUANT_KERNELS(q2_k, blk_q2_k, 16)
QUANT_KERNELS(q3_k, blk_q3_k, 16)
QUANT_KERNELS(q4_k, blk_q4_k, 16)
QUANT_KERNELS(q5_k, blk_q5_k, 16)
QUANT_KERNELS(q6_k, blk_q6_k, 16)
