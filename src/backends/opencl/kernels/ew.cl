/* Element-wise kernels. Every tensor is a byte buffer plus a byte offset; its dtype is a
 * ct_dtype code passed at launch (the switch is uniform over the launch, so it costs a
 * branch, not divergence). Indexing is one generic strided N-d walk (ew_nd, built and
 * coalesced by ew.c) with a contiguous fast path. Arithmetic is in float for f32, f16
 * and bf16 (half is storage only: vload_half/vstore_half), in long for integers, and in
 * double for f64 where the device has cl_khr_fp64 (ew.c refuses f64 otherwise). */
#ifdef OCL_HAVE_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

#define ND_MAX 8
#define DT_F32 0
#define DT_F64 1
#define DT_F16 2
#define DT_BF16 3
#define DT_I32 4
#define DT_I64 5
#define DT_BOOL 6
#define DT_I8 8

/* Mirrors ew_nd in ew.c: shape of the walk and the element strides of up to 4 operands
 * (operand 0 is the output); broadcast dims have stride 0. */
typedef struct {
    long shape[ND_MAX];
    long st[4][ND_MAX];
    int nd, contig, pad0, pad1;
} ew_nd;

/* Element offsets of flat index i for the first n operands. */
static void nd_offsets(const ew_nd *d, long i, int n, long *o)
{
    for (int k = 0; k < n; k++) o[k] = d->contig ? i : 0;
    if (d->contig) return;
    for (int dd = d->nd - 1; dd >= 0; dd--) {
        long idx = i % d->shape[dd];
        i /= d->shape[dd];
        for (int k = 0; k < n; k++) o[k] += idx * d->st[k][dd];
    }
}

static bool dt_is_int(int dt) { return dt == DT_I32 || dt == DT_I64 || dt == DT_BOOL || dt == DT_I8; }

/* ---- typed loads and stores (p: the tensor's first element) ---- */

static float bf16_to_f(ushort h) { return as_float((uint)h << 16); }

/* Round to nearest even, NaN kept quiet: ct_f32_to_bf16's rule. */
static ushort f_to_bf16(float f)
{
    uint x = as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (ushort)((x >> 16) | 0x40);
    return (ushort)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

static float ld_f(global const uchar *p, long i, int dt)
{
    switch (dt) {
    case DT_F32: return ((global const float *)p)[i];
    case DT_F16: return vload_half(i, (global const half *)p);
    case DT_BF16: return bf16_to_f(((global const ushort *)p)[i]);
    case DT_I32: return (float)((global const int *)p)[i];
    case DT_I64: return (float)((global const long *)p)[i];
    case DT_BOOL: return p[i] ? 1.0f : 0.0f;
    case DT_I8: return (float)((global const char *)p)[i];
#ifdef OCL_HAVE_FP64
    case DT_F64: return (float)((global const double *)p)[i];
#endif
    }
    return 0.0f;
}

static long ld_i(global const uchar *p, long i, int dt)
{
    switch (dt) {
    case DT_I32: return ((global const int *)p)[i];
    case DT_I64: return ((global const long *)p)[i];
    case DT_BOOL: return p[i] != 0;
    case DT_I8: return ((global const char *)p)[i];
    }
    return (long)ld_f(p, i, dt);
}

static void st_f(global uchar *p, long i, int dt, float v)
{
    switch (dt) {
    case DT_F32: ((global float *)p)[i] = v; break;
    case DT_F16: vstore_half(v, i, (global half *)p); break;
    case DT_BF16: ((global ushort *)p)[i] = f_to_bf16(v); break;
    case DT_I32: ((global int *)p)[i] = (int)v; break;
    case DT_I64: ((global long *)p)[i] = (long)v; break;
    case DT_BOOL: p[i] = v != 0.0f; break;
    case DT_I8: ((global char *)p)[i] = (char)v; break;
#ifdef OCL_HAVE_FP64
    case DT_F64: ((global double *)p)[i] = v; break;
#endif
    }
}

/* Narrowing keeps the low bits (the CPU backend's integer rule). */
static void st_i(global uchar *p, long i, int dt, long v)
{
    switch (dt) {
    case DT_I32: ((global int *)p)[i] = (int)v; break;
    case DT_I64: ((global long *)p)[i] = v; break;
    case DT_BOOL: p[i] = v != 0; break;
    case DT_I8: ((global char *)p)[i] = (char)v; break;
    default: st_f(p, i, dt, (float)v); break;
    }
}

#ifdef OCL_HAVE_FP64
static double ld_d(global const uchar *p, long i, int dt)
{
    if (dt == DT_F64) return ((global const double *)p)[i];
    if (dt == DT_I64) return (double)((global const long *)p)[i];
    if (dt == DT_I32) return (double)((global const int *)p)[i];
    return ld_f(p, i, dt);
}

static void st_d(global uchar *p, long i, int dt, double v)
{
    switch (dt) {
    case DT_F64: ((global double *)p)[i] = v; break;
    case DT_I32: ((global int *)p)[i] = (int)v; break;
    case DT_I64: ((global long *)p)[i] = (long)v; break;
    case DT_I8: ((global char *)p)[i] = (char)v; break;
    case DT_BOOL: p[i] = v != 0.0; break;
    default: st_f(p, i, dt, (float)v); break;
    }
}
#endif

/* ---- creation ---- */

/* dst = v: fv for float types, iv for integers, dbits (a double's bits) for f64. */
kernel void ew_fill(ew_nd d, global uchar *dst, ulong doff, int dt, float fv, long iv, long dbits)
{
    long i = get_global_id(0), o[1];
    nd_offsets(&d, i, 1, o);
    global uchar *p = dst + doff;
#ifdef OCL_HAVE_FP64
    if (dt == DT_F64) {
        ((global double *)p)[o[0]] = as_double(dbits);
        return;
    }
#endif
    if (dt_is_int(dt)) st_i(p, o[0], dt, iv);
    else st_f(p, o[0], dt, fv);
}

/* ---- copies between plain dtypes ---- */

/* dst = src converted: integers to integers exactly (wrapping), through double where
 * either side is f64 (the CPU converts through double), through float otherwise. */
kernel void ew_copy(ew_nd d, global uchar *dst, ulong doff, int ddt, global const uchar *src, ulong soff, int sdt)
{
    long i = get_global_id(0), o[2];
    nd_offsets(&d, i, 2, o);
    global uchar *dp = dst + doff;
    global const uchar *sp = src + soff;
#ifdef OCL_HAVE_FP64
    if (sdt == DT_F64 || ddt == DT_F64 || sdt == DT_I64) {
        if (dt_is_int(sdt) && dt_is_int(ddt)) st_i(dp, o[0], ddt, ld_i(sp, o[1], sdt));
        else st_d(dp, o[0], ddt, ld_d(sp, o[1], sdt));
        return;
    }
#endif
    if (dt_is_int(sdt) && (dt_is_int(ddt) || sdt != DT_I64)) st_i(dp, o[0], ddt, ld_i(sp, o[1], sdt));
    else if (dt_is_int(ddt) && ddt != DT_BOOL) st_i(dp, o[0], ddt, (long)ld_f(sp, o[1], sdt));
    else st_f(dp, o[0], ddt, ld_f(sp, o[1], sdt));
}

/* ---- creation: arange, eye, rand ---- */

/* start + i * step, computed in double where the device has it (as the CPU does). */
kernel void ew_arange(ew_nd d, global uchar *dst, ulong doff, int dt, long start_bits, long step_bits, float fstart,
                      float fstep)
{
    long i = get_global_id(0), o[1];
    nd_offsets(&d, i, 1, o);
#ifdef OCL_HAVE_FP64
    double v = as_double(start_bits) + (double)i * as_double(step_bits);
    st_d(dst + doff, o[0], dt, v);
#else
    st_f(dst + doff, o[0], dt, fstart + (float)i * fstep);
#endif
}

kernel void ew_eye(ew_nd d, global uchar *dst, ulong doff, int dt, long cols)
{
    long i = get_global_id(0), o[1];
    nd_offsets(&d, i, 1, o);
    long v = (i / cols) == (i % cols);
    if (dt_is_int(dt)) st_i(dst + doff, o[0], dt, v);
    else st_f(dst + doff, o[0], dt, (float)v);
}

/* Philox4x32-10 on counter (i, 0, 0, 0) and key = seed: src/core/rng.c, word for word. */
static uint4 philox(ulong seed, ulong ctr)
{
    uint c0 = (uint)ctr, c1 = (uint)(ctr >> 32), c2 = 0, c3 = 0;
    uint k0 = (uint)seed, k1 = (uint)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint hi0 = mul_hi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
        uint hi1 = mul_hi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
        uint n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return (uint4)(c0, c1, c2, c3);
}

/* rand (uniform in [0, top]) or randn (Box-Muller on two words of one counter). */
kernel void ew_rand(ew_nd d, global uchar *dst, ulong doff, int dt, ulong seed, int normal, float top)
{
    long i = get_global_id(0), o[1];
    nd_offsets(&d, i, 1, o);
    uint4 w = philox(seed, (ulong)i);
    float v;
    if (normal) {
        float u1 = ((float)(w.x >> 8) + 1.0f) * (1.0f / 16777217.0f);
        float u2 = (float)(w.y >> 8) * (1.0f / 16777216.0f);
        v = sqrt(-2.0f * log(u1)) * cos(6.28318530717958647692f * u2);
    } else {
        v = (float)(w.x >> 8) * (1.0f / 16777216.0f);
        v = v < top ? v : top;
    }
    st_f(dst + doff, o[0], dt, v);
}

/* ---- arithmetic ---- */

/* op codes: keep in step with ew.h */
#define K_ADD 0
#define K_SUB 1
#define K_MUL 2
#define K_DIV 3
#define K_POW 4
#define K_MAXIMUM 5
#define K_MINIMUM 6
#define K_SWIGLU 7
#define K_GEGLU 8
#define K_NEG 10
#define K_ABS 11
#define K_EXP 12
#define K_LOG 13
#define K_SQRT 14
#define K_RSQRT 15
#define K_SIN 16
#define K_COS 17
#define K_CLAMP 18
#define K_RELU 19
#define K_GELU 20
#define K_SILU 21
#define K_SIGMOID 22
#define K_TANH 23

#define GELU_K0 0.7978845608028654f
#define GELU_K1 0.044715f

/* sigmoid through e^-|x| (never overflows), as the CPU computes it */
static float sigmoid_f(float x)
{
    float e = exp(-fabs(x)), s = 1.0f / (1.0f + e);
    return x < 0.0f ? e * s : s;
}

static float max_nan(float a, float b) { return isnan(a) ? a : isnan(b) ? b : (a > b ? a : b); }
static float min_nan(float a, float b) { return isnan(a) ? a : isnan(b) ? b : (a < b ? a : b); }

static float unary_f(int k, float x, float p0, float p1)
{
    switch (k) {
    case K_NEG: return -x;
    case K_ABS: return fabs(x);
    case K_EXP: return exp(x);
    case K_LOG: return log(x);
    case K_SQRT: return sqrt(x);
    case K_RSQRT: return 1.0f / sqrt(x);
    case K_SIN: return sin(x);
    case K_COS: return cos(x);
    case K_CLAMP: {
        float r = x < p0 ? p0 : x;
        return r > p1 ? p1 : r;
    }
    case K_RELU: return x > 0.0f ? x : (isnan(x) ? x : 0.0f);
    case K_SIGMOID: return sigmoid_f(x);
    case K_SILU: return x * sigmoid_f(x);
    case K_TANH: return tanh(x);
    case K_GELU:
        if (p0 != 0.0f) return x * sigmoid_f(2.0f * GELU_K0 * (x + GELU_K1 * x * x * x));
        return 0.5f * x * erfc(-x * M_SQRT1_2_F);
    }
    return 0.0f;
}

static float binary_f(int k, float a, float b)
{
    switch (k) {
    case K_ADD: return a + b;
    case K_SUB: return a - b;
    case K_MUL: return a * b;
    case K_DIV: return a / b;
    case K_POW: return pow(a, b);
    case K_MAXIMUM: return max_nan(a, b);
    case K_MINIMUM: return min_nan(a, b);
    case K_SWIGLU: return unary_f(K_SILU, a, 0.0f, 0.0f) * b;
    case K_GEGLU: return unary_f(K_GELU, a, 1.0f, 0.0f) * b; /* the tanh form, as the CPU's gate */
    }
    return 0.0f;
}

/* Wrapping integer arithmetic (through ulong: signed overflow is undefined). */
static long ipow(long a, long b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
    ulong r = 1, x = (ulong)a;
    for (ulong e = (ulong)b; e; e >>= 1) {
        if (e & 1) r *= x;
        x *= x;
    }
    return (long)r;
}

static long binary_i(int k, long a, long b)
{
    switch (k) {
    case K_ADD: return (long)((ulong)a + (ulong)b);
    case K_SUB: return (long)((ulong)a - (ulong)b);
    case K_MUL: return (long)((ulong)a * (ulong)b);
    case K_POW: return ipow(a, b);
    case K_MAXIMUM: return a > b ? a : b;
    case K_MINIMUM: return a < b ? a : b;
    }
    return 0;
}

static long unary_i(int k, long x, long lo, long hi)
{
    switch (k) {
    case K_NEG: return (long)(0 - (ulong)x);
    case K_ABS: return x < 0 ? (long)(0 - (ulong)x) : x;
    case K_RELU: return x > 0 ? x : 0;
    case K_CLAMP: {
        long r = x < lo ? lo : x;
        return r > hi ? hi : r;
    }
    }
    return 0;
}

#ifdef OCL_HAVE_FP64
static double sigmoid_d(double x)
{
    double e = exp(-fabs(x)), s = 1.0 / (1.0 + e);
    return x < 0.0 ? e * s : s;
}

static double unary_d(int k, double x, double p0, double p1)
{
    switch (k) {
    case K_NEG: return -x;
    case K_ABS: return fabs(x);
    case K_EXP: return exp(x);
    case K_LOG: return log(x);
    case K_SQRT: return sqrt(x);
    case K_RSQRT: return 1.0 / sqrt(x);
    case K_SIN: return sin(x);
    case K_COS: return cos(x);
    case K_CLAMP: {
        double r = x < p0 ? p0 : x;
        return r > p1 ? p1 : r;
    }
    case K_RELU: return x > 0.0 ? x : (isnan(x) ? x : 0.0);
    case K_SIGMOID: return sigmoid_d(x);
    case K_SILU: return x * sigmoid_d(x);
    case K_TANH: return tanh(x);
    case K_GELU:
        if (p0 != 0.0) return x * sigmoid_d(2.0 * 0.7978845608028654 * (x + 0.044715 * x * x * x));
        return 0.5 * x * erfc(-x * M_SQRT1_2);
    }
    return 0.0;
}

static double binary_d(int k, double a, double b)
{
    switch (k) {
    case K_ADD: return a + b;
    case K_SUB: return a - b;
    case K_MUL: return a * b;
    case K_DIV: return a / b;
    case K_POW: return pow(a, b);
    case K_MAXIMUM: return isnan(a) ? a : isnan(b) ? b : (a > b ? a : b);
    case K_MINIMUM: return isnan(a) ? a : isnan(b) ? b : (a < b ? a : b);
    case K_SWIGLU: return unary_d(K_SILU, a, 0.0, 0.0) * b;
    case K_GEGLU: return unary_d(K_GELU, a, 1.0, 0.0) * b;
    }
    return 0.0;
}
#endif

/* ---- four elements a work-item (ew.c sets d.contig to EW_VEC4): dense operands of one
 * float dtype, so each moves in 16- or 8-byte loads instead of one element at a time
 * (NVIDIA's OpenCL ran f32 add at 63% and f16 at 26% of a copy one element a work-item;
 * on PoCL, 2 threads, 16M elements: add f32 5-6 -> 10 GB/s, f16 2 -> 6). Elements
 * 4q .. 4q+3 of n = d.shape[0]; the last quad may be partial. Same arithmetic. */
#define EW_VEC4 4 /* ew.h's */

static float4 ld_f4(global const uchar *p, long q, int dt)
{
    if (dt == DT_F32) return vload4(q, (global const float *)p);
    if (dt == DT_F16) return vload_half4(q, (global const half *)p);
    return as_float4(convert_uint4(vload4(q, (global const ushort *)p)) << 16);
}

static void st_f4(global uchar *p, long q, int dt, float4 v)
{
    if (dt == DT_F32) vstore4(v, q, (global float *)p);
    else if (dt == DT_F16) vstore_half4(v, q, (global half *)p);
    else vstore4((ushort4)(f_to_bf16(v.s0), f_to_bf16(v.s1), f_to_bf16(v.s2), f_to_bf16(v.s3)), q, (global ushort *)p);
}

/* One element of the three kernels' forms: 0 binary (a, b), 1 with a scalar (a, s),
 * 2 unary (a; p0, p1 its parameters). */
static float quad_op(int form, int k, float x, float y, float p0, float p1)
{
    if (form == 2) return unary_f(k, x, p0, p1);
    return binary_f(k, x, form == 0 ? y : p0);
}

/* Work-item q's elements 4q .. 4q+3 (fewer in the last quad); b is read in form 0 only. */
static void ew_quad(const ew_nd *d, global uchar *dp, int ddt, global const uchar *ap, global const uchar *bp,
                    int sdt, int form, int k, float p0, float p1)
{
    long q = get_global_id(0);
    if (d->shape[0] - 4 * q >= 4) {
        float4 x = ld_f4(ap, q, sdt), y = form == 0 ? ld_f4(bp, q, sdt) : (float4)(0.0f);
        st_f4(dp, q, ddt, (float4)(quad_op(form, k, x.s0, y.s0, p0, p1), quad_op(form, k, x.s1, y.s1, p0, p1),
                                   quad_op(form, k, x.s2, y.s2, p0, p1), quad_op(form, k, x.s3, y.s3, p0, p1)));
        return;
    }
    for (long i = 4 * q; i < d->shape[0]; i++)
        st_f(dp, i, ddt, quad_op(form, k, ld_f(ap, i, sdt), form == 0 ? ld_f(bp, i, sdt) : 0.0f, p0, p1));
}

/* dst = a OP b (sdt: the sources' dtype; ddt: dst's). */
kernel void ew_binary(ew_nd d, global uchar *dst, ulong doff, int ddt, global const uchar *a, ulong aoff,
                      global const uchar *b, ulong boff, int sdt, int k)
{
    if (d.contig == EW_VEC4) {
        ew_quad(&d, dst + doff, ddt, a + aoff, b + boff, sdt, 0, k, 0.0f, 0.0f);
        return;
    }
    long i = get_global_id(0), o[3];
    nd_offsets(&d, i, 3, o);
    global uchar *dp = dst + doff;
    global const uchar *ap = a + aoff, *bp = b + boff;
    if (dt_is_int(sdt)) {
        st_i(dp, o[0], ddt, binary_i(k, ld_i(ap, o[1], sdt), ld_i(bp, o[2], sdt)));
        return;
    }
#ifdef OCL_HAVE_FP64
    if (sdt == DT_F64) {
        st_d(dp, o[0], ddt, binary_d(k, ld_d(ap, o[1], sdt), ld_d(bp, o[2], sdt)));
        return;
    }
#endif
    st_f(dp, o[0], ddt, binary_f(k, ld_f(ap, o[1], sdt), ld_f(bp, o[2], sdt)));
}

/* dst = a OP s: sf for float sources, si for integers, sbits (a double) for f64. */
kernel void ew_scalar(ew_nd d, global uchar *dst, ulong doff, int ddt, global const uchar *a, ulong aoff, int sdt,
                      int k, float sf, long si, long sbits)
{
    if (d.contig == EW_VEC4) {
        ew_quad(&d, dst + doff, ddt, a + aoff, a + aoff, sdt, 1, k, sf, 0.0f);
        return;
    }
    long i = get_global_id(0), o[2];
    nd_offsets(&d, i, 2, o);
    global uchar *dp = dst + doff;
    global const uchar *ap = a + aoff;
    if (dt_is_int(sdt)) {
        st_i(dp, o[0], ddt, binary_i(k, ld_i(ap, o[1], sdt), si));
        return;
    }
#ifdef OCL_HAVE_FP64
    if (sdt == DT_F64) {
        st_d(dp, o[0], ddt, binary_d(k, ld_d(ap, o[1], sdt), as_double(sbits)));
        return;
    }
#endif
    st_f(dp, o[0], ddt, binary_f(k, ld_f(ap, o[1], sdt), sf));
}

/* dst = f(a); p0/p1: clamp bounds (lo/hi for integers, the bits of doubles for f64), or
 * p0 != 0 for gelu's tanh form. */
kernel void ew_unary(ew_nd d, global uchar *dst, ulong doff, int ddt, global const uchar *a, ulong aoff, int sdt,
                     int k, float p0, float p1, long lo, long hi, long p0bits, long p1bits)
{
    if (d.contig == EW_VEC4) {
        ew_quad(&d, dst + doff, ddt, a + aoff, a + aoff, sdt, 2, k, p0, p1);
        return;
    }
    long i = get_global_id(0), o[2];
    nd_offsets(&d, i, 2, o);
    global uchar *dp = dst + doff;
    global const uchar *ap = a + aoff;
    if (dt_is_int(sdt)) {
        st_i(dp, o[0], ddt, unary_i(k, ld_i(ap, o[1], sdt), lo, hi));
        return;
    }
#ifdef OCL_HAVE_FP64
    if (sdt == DT_F64) {
        st_d(dp, o[0], ddt, unary_d(k, ld_d(ap, o[1], sdt), as_double(p0bits), as_double(p1bits)));
        return;
    }
#endif
    st_f(dp, o[0], ddt, unary_f(k, ld_f(ap, o[1], sdt), p0, p1));
}

/* ---- comparisons and where ---- */

#define C_EQ 0
#define C_NE 1
#define C_LT 2
#define C_LE 3
#define C_GT 4
#define C_GE 5

static bool cmp_f(int c, float a, float b)
{
    switch (c) {
    case C_EQ: return a == b;
    case C_NE: return a != b;
    case C_LT: return a < b;
    case C_LE: return a <= b;
    case C_GT: return a > b;
    case C_GE: return a >= b;
    }
    return false;
}

static bool cmp_i(int c, long a, long b)
{
    switch (c) {
    case C_EQ: return a == b;
    case C_NE: return a != b;
    case C_LT: return a < b;
    case C_LE: return a <= b;
    case C_GT: return a > b;
    case C_GE: return a >= b;
    }
    return false;
}

#ifdef OCL_HAVE_FP64
static bool cmp_d(int c, double a, double b)
{
    switch (c) {
    case C_EQ: return a == b;
    case C_NE: return a != b;
    case C_LT: return a < b;
    case C_LE: return a <= b;
    case C_GT: return a > b;
    case C_GE: return a >= b;
    }
    return false;
}
#endif

/* dst (bool) = a CMP b, or a CMP scalar when scalar != 0 (b unused). fixed >= 0: the
 * answer for every element (ew.c decided it: an integer against a scalar no integer
 * equals, NaN, or out of range). Float sources compare in float (exact: the CPU's
 * double compare of two float values agrees), f64 in double. */
kernel void ew_cmp(ew_nd d, global uchar *dst, ulong doff, global const uchar *a, ulong aoff, global const uchar *b,
                   ulong boff, int sdt, int c, int scalar, int fixed, float sf, long si, long sbits)
{
    long i = get_global_id(0), o[3];
    nd_offsets(&d, i, scalar ? 2 : 3, o);
    global const uchar *ap = a + aoff, *bp = b + boff;
    bool r;
    if (fixed >= 0) r = fixed;
    else if (dt_is_int(sdt)) r = cmp_i(c, ld_i(ap, o[1], sdt), scalar ? si : ld_i(bp, o[2], sdt));
#ifdef OCL_HAVE_FP64
    else if (sdt == DT_F64) r = cmp_d(c, ld_d(ap, o[1], sdt), scalar ? as_double(sbits) : ld_d(bp, o[2], sdt));
#endif
    else r = cmp_f(c, ld_f(ap, o[1], sdt), scalar ? sf : ld_f(bp, o[2], sdt));
    dst[doff + o[0]] = r;
}

/* dst = cond ? a : b, element bytes copied as they are (esize 1, 2, 4 or 8). */
kernel void ew_where(ew_nd d, global uchar *dst, ulong doff, global const uchar *cond, ulong coff,
                     global const uchar *a, ulong aoff, global const uchar *b, ulong boff, int esize)
{
    long i = get_global_id(0), o[4];
    nd_offsets(&d, i, 4, o);
    bool c = cond[coff + o[1]] != 0;
    global const uchar *s = c ? a + aoff : b + boff;
    long so = c ? o[2] : o[3];
    switch (esize) {
    case 1: dst[doff + o[0]] = s[so]; break;
    case 2: ((global ushort *)(dst + doff))[o[0]] = ((global const ushort *)s)[so]; break;
    case 4: ((global uint *)(dst + doff))[o[0]] = ((global const uint *)s)[so]; break;
    case 8: ((global ulong *)(dst + doff))[o[0]] = ((global const ulong *)s)[so]; break;
    }
}

/* ---- reductions ---- */

#define R_SUM 30
#define R_MEAN 31
#define R_PROD 32
#define R_MAX 33
#define R_MIN 34
#define R_VAR 35
#define R_STD 36
#define R_NORM 37
#define R_ARGMAX 38
#define R_ARGMIN 39

#ifdef OCL_HAVE_FP64
typedef double acc_t; /* floating reductions accumulate in double, as the CPU does */
#define ACC_NAN ((double)NAN)
#define ACC_INF ((double)INFINITY)
#else
typedef float acc_t;
#define ACC_NAN NAN
#define ACC_INF INFINITY
#endif

/* Mirrors red_nd in ew_reduce.c: src's kept dims (row-major = dst order) and reduced dims. */
typedef struct {
    long kshape[ND_MAX], kstride[ND_MAX];
    long rshape[ND_MAX], rstride[ND_MAX];
    long nred;
    int nk, nr;
} red_nd;

static long red_offset(const long *shape, const long *stride, int n, long i)
{
    long off = 0;
    for (int dd = n - 1; dd >= 0; dd--) {
        off += (i % shape[dd]) * stride[dd];
        i /= shape[dd];
    }
    return off;
}

/* Element j of the reduced range: one run in memory needs no division. */
static long red_at(const red_nd *r, long base, long j)
{
    return base + (r->nr == 1 ? j * r->rstride[0] : red_offset(r->rshape, r->rstride, r->nr, j));
}

static acc_t ld_acc(global const uchar *p, long i, int dt)
{
#ifdef OCL_HAVE_FP64
    return ld_d(p, i, dt);
#else
    return ld_f(p, i, dt);
#endif
}

/* Combines partial results (v, idx, have) of work items into slot a from slot b. Arg
 * rule: the first NaN wins, then the larger (smaller), ties to the lower index. */
static void red_combine(int k, int exact, local acc_t *v, local long *iv, local long *idx, int a, int b)
{
    if (exact) {
        long x = iv[a], y = iv[b];
        switch (k) {
        case R_SUM: case R_MEAN: iv[a] = (long)((ulong)x + (ulong)y); break;
        case R_PROD: iv[a] = (long)((ulong)x * (ulong)y); break;
        case R_MAX: iv[a] = x > y ? x : y; break;
        case R_MIN: iv[a] = x < y ? x : y; break;
        case R_ARGMAX: case R_ARGMIN:
            if (idx[b] < 0) break;
            if (idx[a] < 0 || (k == R_ARGMAX ? y > x : y < x) || (y == x && idx[b] < idx[a])) {
                iv[a] = y;
                idx[a] = idx[b];
            }
            break;
        }
        return;
    }
    acc_t x = v[a], y = v[b];
    switch (k) {
    case R_PROD: v[a] = x * y; break;
    case R_MAX: v[a] = isnan(x) ? x : isnan(y) ? y : (x > y ? x : y); break;
    case R_MIN: v[a] = isnan(x) ? x : isnan(y) ? y : (x < y ? x : y); break;
    case R_ARGMAX: case R_ARGMIN: {
        if (idx[b] < 0) break;
        bool take;
        if (idx[a] < 0) take = true;
        else if (isnan(x) || isnan(y)) take = isnan(y) && (!isnan(x) || idx[b] < idx[a]);
        else take = (k == R_ARGMAX ? y > x : y < x) || (y == x && idx[b] < idx[a]);
        if (take) {
            v[a] = y;
            idx[a] = idx[b];
        }
        break;
    }
    default: v[a] += y; break; /* sums, norms with a finite p */
    }
}

static void red_tree(int k, int exact, local acc_t *v, local long *iv, local long *idx)
{
    int lid = get_local_id(0);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid < s) red_combine(k, exact, v, iv, idx, lid, lid + s);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
}

/* One work-group per output (its size a power of two); each item walks the reduced
 * elements lid, lid + size, ... in increasing order, then the group combines.
 * exact: integer sources of sum/mean/prod/max/min/argmax/argmin (wrapping, exact).
 * p (pbits as a double): the norm's order. */
kernel void ew_reduce(red_nd r, global uchar *dst, ulong doff, int ddt, global const uchar *src, ulong soff, int sdt,
                      int k, int exact, int unbiased, float pf, long pbits, local acc_t *v, local long *iv,
                      local long *idx)
{
    long out = get_group_id(0);
    int lid = get_local_id(0), ls = get_local_size(0);
    global const uchar *sp = src + soff;
    long base = red_offset(r.kshape, r.kstride, r.nk, out);
#ifdef OCL_HAVE_FP64
    double p = as_double(pbits);
#else
    float p = pf;
#endif
    bool pinf = isinf(p);
    acc_t a = 0;
    long ai = 0, best = -1;
    if (k == R_PROD) a = 1, ai = 1;
    if (k == R_MAX) a = -ACC_INF, ai = LONG_MIN;
    if (k == R_MIN) a = ACC_INF, ai = LONG_MAX;
    for (long j = lid; j < r.nred; j += ls) {
        long off = red_at(&r, base, j);
        if (exact) {
            long x = ld_i(sp, off, sdt);
            switch (k) {
            case R_SUM: case R_MEAN: ai = (long)((ulong)ai + (ulong)x); break;
            case R_PROD: ai = (long)((ulong)ai * (ulong)x); break;
            case R_MAX: ai = x > ai ? x : ai; break;
            case R_MIN: ai = x < ai ? x : ai; break;
            default:
                if (best < 0 || (k == R_ARGMAX ? x > ai : x < ai)) ai = x, best = j;
                break;
            }
            continue;
        }
        acc_t x = ld_acc(sp, off, sdt);
        switch (k) {
        case R_PROD: a *= x; break;
        case R_MAX: a = (x > a || isnan(x)) && !isnan(a) ? x : a; break;
        case R_MIN: a = (x < a || isnan(x)) && !isnan(a) ? x : a; break;
        case R_ARGMAX: case R_ARGMIN:
            if (best < 0 || (isnan(x) && !isnan(a)) || (!isnan(a) && (k == R_ARGMAX ? x > a : x < a))) a = x, best = j;
            break;
        case R_NORM:
            if (pinf) a = (fabs(x) > a || isnan(x)) && !isnan(a) ? fabs(x) : a;
            else if (p == 1) a += fabs(x);
            else if (p == 2) a += x * x;
            else a += pow(fabs(x), p);
            break;
        default: a += x; break; /* sum, mean, the first pass of var/std */
        }
    }
    v[lid] = a;
    iv[lid] = ai;
    idx[lid] = best;
    int kk = (k == R_NORM && pinf) ? R_MAX : k;
    red_tree(kk, exact, v, iv, idx);
    acc_t total = v[0];
    if (k == R_VAR || k == R_STD) { /* second pass: squared deviations from the mean */
        acc_t mean = r.nred ? total / (acc_t)r.nred : 0;
        barrier(CLK_LOCAL_MEM_FENCE);
        acc_t s = 0;
        for (long j = lid; j < r.nred; j += ls) {
            acc_t x = ld_acc(sp, red_at(&r, base, j), sdt) - mean;
            s += x * x;
        }
        v[lid] = s;
        red_tree(R_SUM, 0, v, iv, idx);
        total = v[0];
    }
    if (lid != 0) return;
    global uchar *dp = dst + doff;
    acc_t n = (acc_t)r.nred;
    if (exact) {
        switch (k) {
        case R_SUM: case R_PROD: case R_MAX: case R_MIN: st_i(dp, out, ddt, iv[0]); return;
        case R_MEAN: {
#ifdef OCL_HAVE_FP64
            st_d(dp, out, ddt, (double)iv[0] / n);
#else
            st_f(dp, out, ddt, (float)iv[0] / n);
#endif
            return;
        }
        default: ((global long *)dp)[out] = idx[0] < 0 ? 0 : idx[0]; return;
        }
    }
    acc_t res = total;
    switch (k) {
    case R_MEAN: res = total / n; break;
    case R_ARGMAX: case R_ARGMIN: ((global long *)dp)[out] = idx[0] < 0 ? 0 : idx[0]; return;
    case R_VAR: case R_STD:
        res = total / (n - (unbiased ? 1 : 0));
        if (r.nred == 0 || (unbiased && r.nred == 1)) res = ACC_NAN;
        if (k == R_STD) res = sqrt(res);
        break;
    case R_NORM:
        if (!pinf) res = p == 1 ? total : p == 2 ? sqrt(total) : pow(total, 1 / p);
        break;
    }
#ifdef OCL_HAVE_FP64
    st_d(dp, out, ddt, res);
#else
    st_f(dp, out, ddt, res);
#endif
}

/* A diagnostic (CTORCH_OPENCL_HOLD=N, capture.c): one work-item busy for n dependent
 * steps ahead of a replayed step, so the step's launches queue up behind it and then run
 * at the device's own pace instead of the host's enqueue rate. */
kernel void ew_hold(global float *sink, int n, float seed)
{
    float a = seed;
    for (int i = 0; i < n; i++) a = fma(a, 0.999999f, 1e-7f);
    if (a == -1.0f) sink[0] = a; /* never true: keeps the loop */
}
