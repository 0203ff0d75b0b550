/* The nn group's kernels (OpenCL C 1.2): softmax, norms, rope, embedding, set_rows,
 * pooling, batch norm and the matrix products. Sizes and element strides are longs;
 * each tensor comes as a byte buffer plus the byte offset of its first element.
 * Element types arrive as run-time codes (NN_F32/NN_F16/NN_BF16): the branch is
 * uniform over a launch, and one kernel per op keeps the program (and PoCL's first
 * build) small. Arithmetic is f32; half is storage only (vload_half/vstore_half).
 * Multi-dim views are walked with nn_off: up to 8 dims right-aligned in a long8
 * (shape 1 / stride 0 for the unused leading ones). */
#define NN_F32 0
#define NN_F16 1
#define NN_BF16 2

inline float nn_ld(global const uchar *p, long i, int dt)
{
    if (dt == NN_F32) return ((global const float *)p)[i];
    if (dt == NN_F16) return vload_half(i, (global const half *)p);
    return as_float((uint)((global const ushort *)p)[i] << 16);
}

inline void nn_st(global uchar *p, long i, int dt, float v)
{
    if (dt == NN_F32) {
        ((global float *)p)[i] = v;
    } else if (dt == NN_F16) {
        vstore_half_rte(v, i, (global half *)p);
    } else {
        /* round to nearest even, as the CPU's ct_f32_to_bf16; NaN stays a quiet NaN */
        uint u = as_uint(v);
        ushort h = isnan(v) ? (ushort)((u >> 16) | 0x40u) : (ushort)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
        ((global ushort *)p)[i] = h;
    }
}

#define NN_STEP(c)                                                                                                   \
    q = i / sh.c;                                                                                                    \
    o += (i - q * sh.c) * sd.c;                                                                                      \
    i = q;

/* Element offset of flat index i (row-major over sh) in a view with strides sd. */
inline long nn_off(long i, long8 sh, long8 sd)
{
    long o = 0, q;
    NN_STEP(s7) NN_STEP(s6) NN_STEP(s5) NN_STEP(s4) NN_STEP(s3) NN_STEP(s2) NN_STEP(s1) NN_STEP(s0)
    return o;
}

inline long nn_pos(global const uchar *p, long i, int is64)
{
    return is64 ? ((global const long *)p)[i] : (long)((global const int *)p)[i];
}

/* Work-group reductions; the local size is a power of two. Every work-item calls them. */
inline float nn_wg_sum(local float *red, float v)
{
    int l = get_local_id(0);
    red[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (l < s) red[l] += red[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

inline float nn_wg_max(local float *red, float v)
{
    int l = get_local_id(0);
    red[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (l < s) red[l] = fmax(red[l], red[l + s]);
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* ---- softmax / log_softmax: one work-group per row along the reduced dim ---- */
kernel void nn_softmax(global const uchar *xb, ulong xo, global uchar *yb, ulong yo, long8 osh, long8 oxs, long8 oys,
                       long n, long xs, long ys, int dtx, int dty, int logm, local float *red)
{
    global const uchar *x = xb + xo;
    global uchar *y = yb + yo;
    long row = get_group_id(0), xr = nn_off(row, osh, oxs), yr = nn_off(row, osh, oys);
    int l = get_local_id(0), ls = get_local_size(0);
    float m = -INFINITY;
    for (long i = l; i < n; i += ls) m = fmax(m, nn_ld(x, xr + i * xs, dtx));
    m = nn_wg_max(red, m);
    float s = 0.0f;
    for (long i = l; i < n; i += ls) s += exp(nn_ld(x, xr + i * xs, dtx) - m);
    s = nn_wg_sum(red, s);
    if (logm) {
        /* (x - m) - log(sum) in two steps, as the CPU: folding m into one constant loses
         * absolute accuracy when |m| is large */
        float lse = log(s);
        for (long i = l; i < n; i += ls) nn_st(y, yr + i * ys, dty, (nn_ld(x, xr + i * xs, dtx) - m) - lse);
    } else {
        float inv = 1.0f / s;
        for (long i = l; i < n; i += ls) nn_st(y, yr + i * ys, dty, exp(nn_ld(x, xr + i * xs, dtx) - m) * inv);
    }
}

/* ---- rms_norm / layer_norm: one work-group per row of n normalized elements ---- */
kernel void nn_norm(global const uchar *xb, ulong xo, global uchar *yb, ulong yo, global const uchar *wb, ulong wo,
                    global const uchar *bb, ulong bo, long8 osh, long8 oxs, long8 oys, long n, long xs, long ys, long ws,
                    int dtx, int dty, int dtw, int dtb, int has_w, int has_b, int layer, float eps, local float *red)
{
    global const uchar *x = xb + xo, *w = wb + wo, *b = bb + bo;
    global uchar *y = yb + yo;
    long row = get_group_id(0), xr = nn_off(row, osh, oxs), yr = nn_off(row, osh, oys);
    int l = get_local_id(0), ls = get_local_size(0);
    float mean = 0.0f;
    if (layer) {
        float s = 0.0f;
        for (long i = l; i < n; i += ls) s += nn_ld(x, xr + i * xs, dtx);
        mean = nn_wg_sum(red, s) / (float)n;
    }
    float ss = 0.0f;
    for (long i = l; i < n; i += ls) {
        float d = nn_ld(x, xr + i * xs, dtx) - mean;
        ss += d * d;
    }
    float r = rsqrt(nn_wg_sum(red, ss) / (float)n + eps);
    for (long i = l; i < n; i += ls) {
        float v = (nn_ld(x, xr + i * xs, dtx) - mean) * r;
        if (has_w) v *= nn_ld(w, i * ws, dtw);
        if (has_b) v += nn_ld(b, i, dtb);
        nn_st(y, yr + i * ys, dty, v);
    }
}

/* ---- an RMS norm and the residual add that takes its output, as one launch (nn_pair.c) ----
 * y = x * rsqrt(mean(x^2) + eps) * w and z = res + y, rows of n contiguous f32: nn_norm's sums
 * in nn_norm's order, so y is bit for bit what the norm alone writes. A work-item reads x[i]
 * and res[i] before it writes y[i] and z[i], so an output may be exactly an input (the host
 * allows no other overlap). */
kernel void nn_norm_add(global const uchar *xb, ulong xo, global uchar *yb, ulong yo, global const uchar *wb, ulong wo,
                        long ws, int dtw, int has_w, global const uchar *rb, ulong ro, global uchar *zb, ulong zo,
                        long n, float eps, local float *red)
{
    long row = get_group_id(0);
    global const float *x = (global const float *)(xb + xo) + row * n, *r = (global const float *)(rb + ro) + row * n;
    global float *y = (global float *)(yb + yo) + row * n, *z = (global float *)(zb + zo) + row * n;
    int l = get_local_id(0), ls = get_local_size(0);
    float ss = 0.0f;
    for (long i = l; i < n; i += ls) ss += x[i] * x[i];
    float sc = rsqrt(nn_wg_sum(red, ss) / (float)n + eps);
    for (long i = l; i < n; i += ls) {
        float v = x[i] * sc, rv = r[i];
        if (has_w) v *= nn_ld(wb + wo, i * ws, dtw);
        y[i] = v;
        z[i] = rv + v;
    }
}

/* ---- batch_norm (inference): one work-item per element; channel = (flat / inner) % C ---- */
kernel void nn_batch_norm(global const uchar *xb, ulong xo, global uchar *yb, ulong yo, global const uchar *pb0,
                          ulong po0, global const uchar *pb1, ulong po1, global const uchar *pb2, ulong po2,
                          global const uchar *pb3, ulong po3, long8 sh, long8 xsd, long8 ysd, long C, long inner,
                          long4 ps, int4 pdt, int4 has, int dtx, int dty, float eps, long total)
{
    long i = get_global_id(0);
    if (i >= total) return;
    long c = (i / inner) % C;
    float mean = has.s0 ? nn_ld(pb0 + po0, c * ps.s0, pdt.s0) : 0.0f;
    float var = has.s1 ? nn_ld(pb1 + po1, c * ps.s1, pdt.s1) : 1.0f;
    float w = has.s2 ? nn_ld(pb2 + po2, c * ps.s2, pdt.s2) : 1.0f;
    float b = has.s3 ? nn_ld(pb3 + po3, c * ps.s3, pdt.s3) : 0.0f;
    float sc = w * rsqrt(var + eps);
    float v = nn_ld(xb + xo, nn_off(i, sh, xsd), dtx);
    nn_st(yb + yo, nn_off(i, sh, ysd), dty, v * sc + (b - mean * sc));
}

/* ---- rope: x [..., T, H, D] rows; one work-item per rotated pair or passed-through tail element ---- */
#if defined(cl_khr_fp64)
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif
#define ROPE_PARAMS(S)                                                                                      \
    global const uchar *xb##S, ulong xo##S, global uchar *yb##S, ulong yo##S, global const uchar *pb##S, ulong po##S, \
        long8 rsh##S, long8 rxs##S, long8 rys##S, long xs##S, long ys##S, long ps##S, int p64##S, long T##S, long H##S, \
        long D##S, long half_dims##S, int neox##S, float2 freq_base##S, float2 freq_scale##S, int dtx##S, int dty##S, \
        long rows##S
#define ROPE_ARGS(S)                                                                                        \
    xb##S, xo##S, yb##S, yo##S, pb##S, po##S, rsh##S, rxs##S, rys##S, xs##S, ys##S, ps##S, p64##S, T##S, H##S, D##S, \
        half_dims##S, neox##S, freq_base##S, freq_scale##S, dtx##S, dty##S, rows##S

/* cos and sin of pair i's angle at position pos */
inline void rope_cs(long pos, long i, long half_dims, float2 freq_base, float2 freq_scale, float *co, float *si)
{
#if defined(cl_khr_fp64)
    /* the angle in double, its cos/sin rounded once: what the CPU computes (base and scale
     * arrive as float pairs hi + lo that rebuild the host's doubles) */
    double base = (double)freq_base.x + (double)freq_base.y, fs = (double)freq_scale.x + (double)freq_scale.y;
    double theta = (double)pos * fs * pow(base, -(double)i / (double)half_dims);
    *co = (float)cos(theta), *si = (float)sin(theta);
#else
    float theta = (float)pos * freq_scale.x * pow(freq_base.x, -(float)i / (float)half_dims);
    *co = cos(theta), *si = sin(theta);
#endif
}

inline void rope_at(long g, global const uchar *xb, ulong xo, global uchar *yb, ulong yo, global const uchar *pb, ulong po,
                    long8 rsh, long8 rxs, long8 rys, long xs, long ys, long ps, int p64, long T, long H, long D,
                    long half_dims, int neox, float2 freq_base, float2 freq_scale, int dtx, int dty, long rows)
{
    long per = D - half_dims;
    if (g >= rows * per) return;
    long row = g / per, i = g - row * per;
    global const uchar *x = xb + xo;
    global uchar *y = yb + yo;
    long xr = nn_off(row, rsh, rxs), yr = nn_off(row, rsh, rys);
    if (i >= half_dims) { /* dims past n_dims are copied */
        long e = i + half_dims;
        nn_st(y, yr + e * ys, dty, nn_ld(x, xr + e * xs, dtx));
        return;
    }
    long t = (row / H) % T;
    float co, si;
    rope_cs(nn_pos(pb + po, t * ps, p64), i, half_dims, freq_base, freq_scale, &co, &si);
    long i0 = neox ? i : 2 * i, i1 = neox ? i + half_dims : 2 * i + 1;
    float x0 = nn_ld(x, xr + i0 * xs, dtx), x1 = nn_ld(x, xr + i1 * xs, dtx);
    nn_st(y, yr + i0 * ys, dty, x0 * co - x1 * si);
    nn_st(y, yr + i1 * ys, dty, x0 * si + x1 * co);
}

kernel void nn_rope(global const uchar *xb, ulong xo, global uchar *yb, ulong yo, global const uchar *pb, ulong po,
                    long8 rsh, long8 rxs, long8 rys, long xs, long ys, long ps, int p64, long T, long H, long D,
                    long half_dims, int neox, float2 freq_base, float2 freq_scale, int dtx, int dty, long rows)
{
    rope_at(get_global_id(0), xb, xo, yb, yo, pb, po, rsh, rxs, rys, xs, ys, ps, p64, T, H, D, half_dims, neox,
            freq_base, freq_scale, dtx, dty, rows);
}

/* Two independent rotations (q and k of a decode step) in one launch: work-items
 * [0, na) do the first, the rest the second (the step planner's pairs, nn_pair.c). */
kernel void nn_rope2(ROPE_PARAMS(_a), ROPE_PARAMS(_b), long na)
{
    long g = get_global_id(0);
    if (g < na) rope_at(g, ROPE_ARGS(_a));
    else rope_at(g - na, ROPE_ARGS(_b));
}

/* ---- embedding of a plain table: out [n, D] f32 contiguous. An id outside [0, V) gives a
 * NaN row: the device cannot raise an error, and a NaN row cannot pass for a result. ---- */
kernel void nn_embedding(global const uchar *wb, ulong wo, global const uchar *ib, ulong io, global float *yb,
                         ulong yo, long8 ish, long8 isd, int i64, long V, long D, long ws0, long ws1, int dtw, long total)
{
    long g = get_global_id(0);
    if (g >= total) return;
    long r = g / D, c = g - r * D;
    long id = nn_pos(ib + io, nn_off(r, ish, isd), i64);
    global float *y = (global float *)((global uchar *)yb + yo);
    y[g] = (id < 0 || id >= V) ? NAN : nn_ld(wb + wo, id * ws0 + c * ws1, dtw);
}

/* ---- set_rows: dst[idx[i], :] = src[i, :]. An index outside [0, R) writes nothing (never
 * outside dst); the CPU reports it as an error instead. ---- */
#define SET_ROWS_PARAMS(S)                                                                                  \
    global const uchar *sb##S, ulong so##S, global const uchar *ib##S, ulong io##S, global uchar *db##S, ulong dof##S, \
        long ss0##S, long ss1##S, long is0##S, int i64##S, long ds0##S, long ds1##S, long R##S, long C##S, int dts##S, \
        int dtd##S, long total##S
#define SET_ROWS_ARGS(S)                                                                                    \
    sb##S, so##S, ib##S, io##S, db##S, dof##S, ss0##S, ss1##S, is0##S, i64##S, ds0##S, ds1##S, R##S, C##S, dts##S, \
        dtd##S, total##S

inline void set_rows_at(long g, global const uchar *sb, ulong so, global const uchar *ib, ulong io, global uchar *db, ulong dof,
                        long ss0, long ss1, long is0, int i64, long ds0, long ds1, long R, long C, int dts, int dtd,
                        long total)
{
    if (g >= total) return;
    long i = g / C, c = g - i * C;
    long r = nn_pos(ib + io, i * is0, i64);
    if (r < 0 || r >= R) return;
    nn_st(db + dof, r * ds0 + c * ds1, dtd, nn_ld(sb + so, i * ss0 + c * ss1, dts));
}

kernel void nn_set_rows(global const uchar *sb, ulong so, global const uchar *ib, ulong io, global uchar *db, ulong dof,
                        long ss0, long ss1, long is0, int i64, long ds0, long ds1, long R, long C, int dts, int dtd,
                        long total)
{
    set_rows_at(get_global_id(0), sb, so, ib, io, db, dof, ss0, ss1, is0, i64, ds0, ds1, R, C, dts, dtd, total);
}

/* Two independent row writes (k and v into their caches) in one launch, as nn_rope2. */
kernel void nn_set_rows2(SET_ROWS_PARAMS(_a), SET_ROWS_PARAMS(_b), long na)
{
    long g = get_global_id(0);
    if (g < na) set_rows_at(g, SET_ROWS_ARGS(_a));
    else set_rows_at(g - na, SET_ROWS_ARGS(_b));
}

/* A rotation (k of a decode step) and the row write of its output into the cache, with an
 * independent row write (v) beside them, in one launch (nn_pair.c). The rotation's output
 * is contiguous and is set_rows k's source, element for element; each work-item copies the
 * elements it rotated into the cache, read back as stored, so the cache holds what the
 * two launches would have written. Work-items [0, na) rotate, the rest write v. */
kernel void nn_rope_set_rows2(ROPE_PARAMS(_a), SET_ROWS_PARAMS(_k), SET_ROWS_PARAMS(_v), long na)
{
    long g = get_global_id(0);
    if (g >= na) {
        set_rows_at(g - na, SET_ROWS_ARGS(_v));
        return;
    }
    rope_at(g, ROPE_ARGS(_a));
    long per = D_a - half_dims_a;
    if (g >= rows_a * per) return;
    long row = g / per, i = g - row * per, yr = nn_off(row, rsh_a, rys_a);
    bool tail = i >= half_dims_a;
    long e0 = tail ? i + half_dims_a : (neox_a ? i : 2 * i), e1 = tail ? -1 : (neox_a ? i + half_dims_a : 2 * i + 1);
    for (int t = 0; t < 2; t++) {
        long e = t ? e1 : e0;
        if (e < 0) continue;
        long f = yr + e * ys_a, r = f / C_k, c = f - r * C_k;
        long d = nn_pos(ib_k + io_k, r * is0_k, i64_k);
        if (d >= 0 && d < R_k) nn_st(db_k + dof_k, d * ds0_k + c * ds1_k, dtd_k, nn_ld(yb_a + yo_a, f, dty_a));
    }
}

/* ---- per-head RMS norms of q and k, their rotations and the k and v cache rows, as one
 * launch (nn_head.c; Gemma 3's q_norm and k_norm ahead of RoPE in a decode step) ----
 * q's and k's heads are rows of D contiguous f32 and rotate whole (n_dims = D), for one
 * token. A work-group per head, q's first ([0, hq)) then k's ([hq, hq + hk)), D / 2
 * work-items, one per rotated pair: each reads its pair of x, the group sums the squares,
 * and the work-item scales its pair (y, the norm's output), rotates it (z) and, for k, writes
 * the two rotated values into the cache row as nn_rope_set_rows2 does. Later groups copy
 * v's elements into its cache. Each work-item writes only the elements it read, so an
 * output may be exactly its own input (the host allows no other overlap). */
typedef struct {
    ulong xo[2], yo[2], zo[2], wo[2], po, kio, kco, vo, vio, vco;
    long D, ws[2], hq, hk, kC, kR, kis0, kds0, kds1, vss0, vss1, vis0, vds0, vds1, vR, vC, vtotal;
    float2 base, scale;
    float eps[2];
    int has_w[2], dtw[2], p64, neox, ki64, kdtd, vi64, vdts, vdtd, pad;
} nn_hnr_args;

kernel void nn_head_norm_rope(global const uchar *xqb, global uchar *yqb, global uchar *zqb, global const uchar *wqb,
                              global const uchar *xkb, global uchar *ykb, global uchar *zkb, global const uchar *wkb,
                              global const uchar *pb, global const uchar *kib, global uchar *kcb,
                              global const uchar *vb, global const uchar *vib, global uchar *vcb, nn_hnr_args a,
                              local float *red)
{
    long grp = get_group_id(0), heads = a.hq + a.hk;
    int l = get_local_id(0), hd = (int)(a.D / 2);
    if (grp >= heads) {
        set_rows_at((grp - heads) * hd + l, vb, a.vo, vib, a.vio, vcb, a.vco, a.vss0, a.vss1, a.vis0, a.vi64, a.vds0,
                    a.vds1, a.vR, a.vC, a.vdts, a.vdtd, a.vtotal);
        return;
    }
    int k = grp >= a.hq;
    long row = k ? grp - a.hq : grp, i0 = a.neox ? l : 2 * l, i1 = a.neox ? l + hd : 2 * l + 1;
    global const float *x = (global const float *)((k ? xkb : xqb) + a.xo[k]) + row * a.D;
    global float *y = (global float *)((k ? ykb : yqb) + a.yo[k]) + row * a.D;
    global float *z = (global float *)((k ? zkb : zqb) + a.zo[k]) + row * a.D;
    float x0 = x[i0], x1 = x[i1];
    float r = rsqrt(nn_wg_sum(red, x0 * x0 + x1 * x1) / (float)a.D + a.eps[k]);
    float y0 = x0 * r, y1 = x1 * r;
    if (a.has_w[k]) {
        global const uchar *w = (k ? wkb : wqb) + a.wo[k];
        y0 *= nn_ld(w, i0 * a.ws[k], a.dtw[k]);
        y1 *= nn_ld(w, i1 * a.ws[k], a.dtw[k]);
    }
    y[i0] = y0, y[i1] = y1;
    float co, si;
    rope_cs(nn_pos(pb + a.po, 0, a.p64), l, hd, a.base, a.scale, &co, &si);
    float z0 = y0 * co - y1 * si, z1 = y0 * si + y1 * co;
    z[i0] = z0, z[i1] = z1;
    if (!k) return;
    for (int t = 0; t < 2; t++) {
        long f = row * a.D + (t ? i1 : i0), sr = f / a.kC, c = f - sr * a.kC;
        long d = nn_pos(kib + a.kio, sr * a.kis0, a.ki64);
        if (d >= 0 && d < a.kR) nn_st(kcb + a.kco, d * a.kds0 + c * a.kds1, a.kdtd, t ? z1 : z0);
    }
}

/* ---- max/avg pool2d: one work-item per output element, output contiguous. kp = kernel h, w,
 * stride h, w; pad = padding h, w. No ceil mode: a window never passes H + pad, so the
 * include-pad divisor is the whole kernel area (as the CPU). ---- */
kernel void nn_pool(global const uchar *xb, ulong xo, global uchar *yb, ulong yo, long C, long xsn, long xsc, long xsh,
                    long xsw, long H, long W, long Ho, long Wo, int4 kp, int2 pad, int is_max, int include_pad, int dt,
                    long total)
{
    long g = get_global_id(0);
    if (g >= total) return;
    long ow = g % Wo, oh = (g / Wo) % Ho, plane = g / (Wo * Ho);
    global const uchar *x = xb + xo;
    long base = (plane / C) * xsn + (plane % C) * xsc;
    long h0 = oh * kp.s2 - pad.s0, w0 = ow * kp.s3 - pad.s1;
    long ha = max(h0, 0L), hz = min(h0 + kp.s0, H), wa = max(w0, 0L), wz = min(w0 + kp.s1, W);
    float acc = is_max ? -INFINITY : 0.0f;
    for (long ih = ha; ih < hz; ih++)
        for (long iw = wa; iw < wz; iw++) {
            float v = nn_ld(x, base + ih * xsh + iw * xsw, dt);
            if (!is_max) acc += v;
            else if (v > acc || isnan(v)) acc = v;
        }
    if (!is_max) {
        long cnt = include_pad ? (long)kp.s0 * kp.s1 : (hz - ha) * (wz - wa);
        acc = cnt > 0 ? acc / (float)cnt : 0.0f;
    }
    nn_st(yb + yo, g, dt, acc);
}

/* ---- matrix products: C[r, n] = sum_k A[r, k] * B[batch(r), k, n] (+ bias[n]) ----
 * Rows r run over the batch dims and M of A (ash/ast give a row's element offset, so any
 * strided A works without a copy); B's batch dims are bsh/bst (batch = r / M); C is
 * contiguous [rows, N]. Linear is the same with w [N, K] read as B (sbk = w's stride 1,
 * sbn = its stride 0) and one batch. */
#define NN_TS 32 /* tile rows and columns */
#define NN_TK 16 /* tile depth */
#define NN_WPT 4 /* outputs per work-item along each tile dim: an 8x8 work-group makes 32x32 */

kernel __attribute__((reqd_work_group_size(8, 8, 1))) void
nn_gemm(global const uchar *ab, ulong ao, global const uchar *bb, ulong bo, global uchar *cb, ulong co,
        global const uchar *biasb, ulong biaso, long M, long N, long K, long8 ash, long8 ast, long sak, long8 bsh,
        long8 bst, long sbk, long sbn, long bias_s, int dta, int dtb, int dtc, int dtbias, int has_bias)
{
    local float As[NN_TK][NN_TS];
    local float Bs[NN_TK][NN_TS + 1];
    global const uchar *a = ab + ao, *b = bb + bo;
    int tx = get_local_id(0), ty = get_local_id(1), t = ty * 8 + tx;
    long n0 = get_group_id(0) * NN_TS, m0 = get_group_id(1) * NN_TS, batch = get_group_id(2);
    long boff = nn_off(batch, bsh, bst);
    /* this work-item loads A rows (t / 16) + 4j at depth t % 16: row offsets computed once */
    int ak = t % NN_TK, ar = t / NN_TK;
    long aoff[8];
    for (int j = 0; j < 8; j++) {
        long m = m0 + ar + 4 * j;
        aoff[j] = m < M ? nn_off(batch * M + m, ash, ast) : -1;
    }
    /* B is read along k when k is its unit stride (a linear weight), else along n */
    bool kfast = sbk == 1 && sbn != 1;
    int bk = kfast ? t % NN_TK : t / NN_TS, bn = kfast ? t / NN_TK : t % NN_TS;
    float acc[NN_WPT][NN_WPT];
    for (int i = 0; i < NN_WPT; i++)
        for (int j = 0; j < NN_WPT; j++) acc[i][j] = 0.0f;
    for (long k0 = 0; k0 < K; k0 += NN_TK) {
        long k = k0 + ak;
        for (int j = 0; j < 8; j++)
            As[ak][ar + 4 * j] = (aoff[j] >= 0 && k < K) ? nn_ld(a, aoff[j] + k * sak, dta) : 0.0f;
        for (int j = 0; j < 8; j++) {
            int kk = kfast ? bk : bk + 2 * j, nn = kfast ? bn + 4 * j : bn;
            long kg = k0 + kk, ng = n0 + nn;
            Bs[kk][nn] = (kg < K && ng < N) ? nn_ld(b, boff + kg * sbk + ng * sbn, dtb) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int kk = 0; kk < NN_TK; kk++) {
            float av[NN_WPT], bv[NN_WPT];
            for (int i = 0; i < NN_WPT; i++) av[i] = As[kk][ty + 8 * i];
            for (int j = 0; j < NN_WPT; j++) bv[j] = Bs[kk][tx + 8 * j];
            for (int i = 0; i < NN_WPT; i++)
                for (int j = 0; j < NN_WPT; j++) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int i = 0; i < NN_WPT; i++) {
        long m = m0 + ty + 8 * i;
        if (m >= M) continue;
        for (int j = 0; j < NN_WPT; j++) {
            long n = n0 + tx + 8 * j;
            if (n >= N) continue;
            float v = acc[i][j];
            if (has_bias) v += nn_ld(biasb + biaso, n * bias_s, dtbias);
            nn_st(cb + co, (batch * M + m) * N + n, dtc, v);
        }
    }
}

/* One output row (M = 1): y[n] = x . B[:, n] with B's k the unit stride, so each work-group
 * reads one weight row once, its work-items side by side (coalesced). */
kernel void nn_matvec(global const uchar *xb, ulong xo, long xs, global const uchar *bb, ulong bo, long sbn,
                      global uchar *yb, ulong yo, global const uchar *biasb, ulong biaso, long bias_s, long K, int dtx,
                      int dtb, int dty, int dtbias, int has_bias, local float *red)
{
    long n = get_group_id(0);
    int l = get_local_id(0), ls = get_local_size(0);
    global const uchar *x = xb + xo, *b = bb + bo;
    long row = n * sbn;
    float s = 0.0f;
    for (long k = l; k < K; k += ls) s = fma(nn_ld(x, k * xs, dtx), nn_ld(b, row + k, dtb), s);
    s = nn_wg_sum(red, s);
    if (l == 0) {
        if (has_bias) s += nn_ld(biasb + biaso, n * bias_s, dtbias);
        nn_st(yb + yo, n, dty, s);
    }
}

/* ---- conv2d / conv_transpose2d (direct): one work-item per output element ----
 * g = N, C, H, W; o = O, Ho, Wo, groups; k = kH, kW, stride h, w; pd = pad h, w, dilation h, w;
 * dt = the element codes of x, w, bias, y (f32 sums, one rounding at the store).
 * x is read through its strides xs; w is contiguous ([O, C/G, kH, kW] for conv2d,
 * [C, O/G, kH, kW] for the transposed one, which gathers the inputs that reach each output). */
kernel void nn_conv2d(global const uchar *xb, ulong xo, global const uchar *wb, ulong wo, global const uchar *bb,
                      ulong bo, global uchar *yb, ulong yo, long4 g, long4 o, long4 xs, int4 k, int4 pd, long bias_s,
                      int has_bias, int transposed, int4 dt, long total)
{
    long i = get_global_id(0);
    if (i >= total) return;
    long C = g.s1, H = g.s2, W = g.s3, O = o.s0, Ho = o.s1, Wo = o.s2, G = o.s3;
    long ow = i % Wo, oh = (i / Wo) % Ho, oc = (i / (Wo * Ho)) % O, n = i / (Wo * Ho * O);
    long Cg = C / G, Og = O / G, grp = oc / Og;
    global const uchar *x = xb + xo, *w = wb + wo;
    float acc = has_bias ? nn_ld(bb + bo, oc * bias_s, dt.s2) : 0.0f;
    for (long c = 0; c < Cg; c++) {
        long ci = grp * Cg + c, xp = n * xs.s0 + ci * xs.s1;
        for (int kh = 0; kh < k.s0; kh++)
            for (int kw = 0; kw < k.s1; kw++) {
                long ih, iw, wi;
                if (!transposed) {
                    ih = oh * k.s2 - pd.s0 + kh * pd.s2;
                    iw = ow * k.s3 - pd.s1 + kw * pd.s3;
                    wi = ((oc * Cg + c) * k.s0 + kh) * k.s1 + kw;
                } else {
                    long th = oh + pd.s0 - kh * pd.s2, tw = ow + pd.s1 - kw * pd.s3;
                    if (th < 0 || tw < 0 || th % k.s2 || tw % k.s3) continue;
                    ih = th / k.s2;
                    iw = tw / k.s3;
                    wi = ((ci * Og + (oc - grp * Og)) * k.s0 + kh) * k.s1 + kw;
                }
                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                acc = fma(nn_ld(x, xp + ih * xs.s2 + iw * xs.s3, dt.s0), nn_ld(w, wi, dt.s1), acc);
            }
    }
    nn_st(yb + yo, i, dt.s3, acc);
}

/* The same product for CPU devices (PoCL): one work-item per output, no barriers. There
 * work-groups are loops over work-items, and nn_matvec's per-row reduction costs more than
 * the row; a work-item walking its own weight row reads it sequentially, as a CPU likes. */
kernel void nn_matvec_rows(global const uchar *xb, ulong xo, long xs, global const uchar *bb, ulong bo, long sbn,
                           global uchar *yb, ulong yo, global const uchar *biasb, ulong biaso, long bias_s, long K,
                           int dtx, int dtb, int dty, int dtbias, int has_bias, long N)
{
    long n = get_global_id(0);
    if (n >= N) return;
    global const uchar *x = xb + xo, *b = bb + bo;
    long row = n * sbn;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    long k = 0;
    for (; k + 4 <= K; k += 4) {
        s0 = fma(nn_ld(x, k * xs, dtx), nn_ld(b, row + k, dtb), s0);
        s1 = fma(nn_ld(x, (k + 1) * xs, dtx), nn_ld(b, row + k + 1, dtb), s1);
        s2 = fma(nn_ld(x, (k + 2) * xs, dtx), nn_ld(b, row + k + 2, dtb), s2);
        s3 = fma(nn_ld(x, (k + 3) * xs, dtx), nn_ld(b, row + k + 3, dtb), s3);
    }
    for (; k < K; k++) s0 = fma(nn_ld(x, k * xs, dtx), nn_ld(b, row + k, dtb), s0);
    float s = (s0 + s1) + (s2 + s3);
    if (has_bias) s += nn_ld(biasb + biaso, n * bias_s, dtbias);
    nn_st(yb + yo, n, dty, s);
}
