/* The CUDA ew group's element-wise kernels: creation, copies, binary/scalar/unary maps,
 * gated units, comparisons, where, complex64. Semantics follow the CPU backend
 * (src/backends/cpu/elementwise.h, create.c, copy.c, complex.c). Every map has three
 * shapes of launch: 16-byte vector loads when every operand is contiguous (or one
 * broadcast element) and aligned, a flat loop when dst is contiguous, and the N-d form. */
#include "backends/cuda/ew_device.cuh"

using namespace ew;

namespace {

/* ---- the functions, on compute types ---- */

template <class C> __device__ __forceinline__ C max_nan(C a, C b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
template <class C> __device__ __forceinline__ C min_nan(C a, C b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }

__device__ __forceinline__ float sigmoid(float x)
{
    float e = expf(-fabsf(x)), s = 1.0f / (1.0f + e);
    return x < 0.0f ? e * s : s;
}
__device__ __forceinline__ double sigmoid(double x)
{
    double e = exp(-fabs(x)), s = 1.0 / (1.0 + e);
    return x < 0.0 ? e * s : s;
}

constexpr double kSqrt2OverPi = 0.7978845608028654, kGeluCubic = 0.044715, kSqrtHalf = 0.70710678118654752440;

template <class C> __device__ __forceinline__ C gelu_tanh(C x)
{
    return x * sigmoid((C)(2.0 * kSqrt2OverPi) * (x + (C)kGeluCubic * x * x * x));
}
/* erf form through erfc in double, as the CPU (keeps far negative inputs accurate) */
template <class C> __device__ __forceinline__ C gelu_erf(C x) { return (C)(0.5 * (double)x * erfc(-(double)x * kSqrtHalf)); }

template <class C> __device__ __forceinline__ C unary_f(int op, C x, C p0, C p1)
{
    switch (op) {
    case EW_NEG: return -x;
    case EW_ABS: return fabs(x);
    case EW_EXP: return exp(x);
    case EW_LOG: return log(x);
    case EW_SQRT: return sqrt(x);
    case EW_RSQRT: return (C)1 / sqrt(x);
    case EW_SIN: return sin(x);
    case EW_COS: return cos(x);
    case EW_CLAMP: { C r = x < p0 ? p0 : x; return r > p1 ? p1 : r; }
    case EW_RELU: return x > (C)0 ? x : (x != x ? x : (C)0);
    case EW_SIGMOID: return sigmoid(x);
    case EW_SILU: return x * sigmoid(x);
    case EW_TANH: return tanh(x);
    case EW_GELU: return gelu_erf(x);
    case EW_GELU_TANH: return gelu_tanh(x);
    default: return (C)0;
    }
}

__device__ __forceinline__ int64_t unary_i(int op, int64_t x, int64_t lo, int64_t hi)
{
    switch (op) {
    case EW_NEG: return (int64_t)(0 - (uint64_t)x);
    case EW_ABS: return x < 0 ? (int64_t)(0 - (uint64_t)x) : x;
    case EW_RELU: return x > 0 ? x : 0;
    case EW_CLAMP: { int64_t r = x < lo ? lo : x; return r > hi ? hi : r; }
    default: return 0;
    }
}

template <class C> __device__ __forceinline__ C binary_f(int op, C a, C b)
{
    switch (op) {
    case EW_ADD: return a + b;
    case EW_SUB: return a - b;
    case EW_MUL: return a * b;
    case EW_DIV: return a / b;
    case EW_POW: return pow(a, b);
    case EW_MAX: return max_nan(a, b);
    case EW_MIN: return min_nan(a, b);
    case EW_SWIGLU: return a * sigmoid(a) * b;
    case EW_GEGLU: return gelu_tanh(a) * b;
    default: return (C)0;
    }
}

__device__ __forceinline__ int64_t ipow(int64_t a, int64_t b)
{
    if (b < 0) return a == 1 ? 1 : a == -1 ? (b & 1 ? -1 : 1) : 0;
    uint64_t r = 1, x = (uint64_t)a;
    for (uint64_t e = (uint64_t)b; e; e >>= 1) {
        if (e & 1) r *= x;
        x *= x;
    }
    return (int64_t)r;
}

__device__ __forceinline__ int64_t binary_i(int op, int64_t a, int64_t b)
{
    switch (op) {
    case EW_ADD: return (int64_t)((uint64_t)a + (uint64_t)b);
    case EW_SUB: return (int64_t)((uint64_t)a - (uint64_t)b);
    case EW_MUL: return (int64_t)((uint64_t)a * (uint64_t)b);
    case EW_POW: return ipow(a, b);
    case EW_MAX: return a > b ? a : b;
    case EW_MIN: return a < b ? a : b;
    default: return 0;
    }
}

template <class C> __device__ __forceinline__ C binary(int op, C a, C b)
{
    if constexpr (std::is_integral<C>::value) return binary_i(op, a, b);
    else return binary_f(op, a, b);
}

/* ---- functors: out = f(a, b) on compute values (b unused by unary forms) ---- */

template <class C> struct BinaryF {
    int op;
    __device__ __forceinline__ C operator()(C a, C b) const { return binary(op, a, b); }
};
template <class C> struct ScalarF {
    int op;
    C s;
    __device__ __forceinline__ C operator()(C a, C) const { return binary(op, a, s); }
};
template <class C> struct UnaryF {
    int op;
    C p0, p1;
    __device__ __forceinline__ C operator()(C a, C) const
    {
        if constexpr (std::is_integral<C>::value) return unary_i(op, a, p0, p1);
        else return unary_f(op, a, p0, p1);
    }
};
template <class C> struct IdentityF {
    __device__ __forceinline__ C operator()(C a, C) const { return a; }
};
template <class C> struct CmpF {
    int op;
    bool has_b, int_path;
    int64_t si;
    double sd;
    __device__ __forceinline__ bool operator()(C a, C b) const
    {
        if (int_path) {
            int64_t x = (int64_t)a, y = has_b ? (int64_t)b : si;
            switch (op) {
            case EW_EQ: return x == y;
            case EW_NE: return x != y;
            case EW_LT: return x < y;
            case EW_LE: return x <= y;
            case EW_GT: return x > y;
            default: return x >= y;
            }
        }
        double x = (double)a, y = has_b ? (double)b : sd;
        switch (op) {
        case EW_EQ: return x == y;
        case EW_NE: return x != y;
        case EW_LT: return x < y;
        case EW_LE: return x <= y;
        case EW_GT: return x > y;
        default: return x >= y;
        }
    }
};

/* ---- the map kernels ---- */

template <class T, int V> struct alignas(sizeof(T) * V) Pack {
    T v[V];
};

template <class TO, class TI, class F> __global__ void k_map_nd(TO *d, const TI *a, const TI *b, Nd nd, F f)
{
    EW_GRID_LOOP(i, nd.d.numel) {
        int64_t off[EW_MAX_OPS];
        nd.offsets(i, off);
        C_t<TI> y = b ? ld(b[off[2]]) : C_t<TI>(0);
        d[off[0]] = st<TO>(f(ld(a[off[1]]), y));
    }
}

template <class TO, class TI, class F>
__global__ void k_map_flat(TO *d, const TI *a, const TI *b, int64_t n, int64_t sa, int64_t sb, F f)
{
    EW_GRID_LOOP(i, n) {
        C_t<TI> y = b ? ld(b[i * sb]) : C_t<TI>(0);
        d[i] = st<TO>(f(ld(a[i * sa]), y));
    }
}

/* V elements per thread through one 16-byte (or narrower) load per operand; sa, sb are 1
 * (contiguous) or 0 (one broadcast element). The tail past the last whole pack goes
 * element by element. */
template <class TO, class TI, class F, int V>
__global__ void k_map_vec(TO *d, const TI *a, const TI *b, int64_t n, int sa, int sb, F f)
{
    int64_t npk = n / V;
    EW_GRID_LOOP(p, npk) {
        Pack<TI, V> xa, xb;
        Pack<TO, V> out;
        if (sa) xa = reinterpret_cast<const Pack<TI, V> *>(a)[p];
        else
#pragma unroll
            for (int j = 0; j < V; j++) xa.v[j] = a[0];
        if (b && sb) xb = reinterpret_cast<const Pack<TI, V> *>(b)[p];
        else
#pragma unroll
            for (int j = 0; j < V; j++) xb.v[j] = b ? b[0] : TI{};
#pragma unroll
        for (int j = 0; j < V; j++) out.v[j] = st<TO>(f(ld(xa.v[j]), ld(xb.v[j])));
        reinterpret_cast<Pack<TO, V> *>(d)[p] = out;
    }
    EW_GRID_LOOP(t, n - npk * V) {
        int64_t i = npk * V + t;
        C_t<TI> y = b ? ld(b[i * sb]) : C_t<TI>(0);
        d[i] = st<TO>(f(ld(a[i * sa]), y));
    }
}

template <class TO, class TI, class F> cudaError_t map(TO *d, const TI *a, const TI *b, const ew_nd *nd, F f, cudaStream_t s)
{
    int64_t n = nd->numel;
    if (n <= 0) return cudaSuccess;
    if (!flat_dst(nd)) {
        k_map_nd<TO, TI, F><<<blocks_for(n), kThreads, 0, s>>>(d, a, b, Nd{*nd}, f);
        return cudaGetLastError();
    }
    int64_t sa = flat_stride(nd, 1), sb = b ? flat_stride(nd, 2) : 0;
    constexpr int V = 16 / (sizeof(TO) > sizeof(TI) ? sizeof(TO) : sizeof(TI));
    bool vec = V > 1 && n >= 4 * V && (sa == 0 || sa == 1) && (sb == 0 || sb == 1) && aligned(d, sizeof(TO) * V) &&
               (!sa || aligned(a, sizeof(TI) * V)) && (!sb || aligned(b, sizeof(TI) * V));
    if (vec)
        k_map_vec<TO, TI, F, V><<<blocks_for(n, V), kThreads, 0, s>>>(d, a, b, n, (int)sa, (int)sb, f);
    else
        k_map_flat<TO, TI, F><<<blocks_for(n), kThreads, 0, s>>>(d, a, b, n, sa, sb, f);
    return cudaGetLastError();
}

/* ---- creation ---- */

struct Philox {
    __device__ static void run(uint64_t seed, uint64_t ctr, uint32_t out[4])
    {
        uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
        uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
#pragma unroll
        for (int r = 0; r < 10; r++) {
            uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
            uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
            c1 = (uint32_t)p1;
            c3 = (uint32_t)p0;
            c0 = n0;
            c2 = n2;
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        out[0] = c0, out[1] = c1, out[2] = c2, out[3] = c3;
    }
};

enum CreateKind { CR_FILL, CR_ARANGE, CR_EYE, CR_RAND, CR_RANDN };

struct CreateArgs {
    int kind;
    double a, b;   /* FILL value; ARANGE start, step; RAND: the largest value below 1 */
    int64_t cols;  /* EYE */
    uint64_t seed; /* RAND */
};

__device__ __forceinline__ double create_value(const CreateArgs &c, int64_t i)
{
    switch (c.kind) {
    case CR_FILL: return c.a;
    case CR_ARANGE: return c.a + (double)i * c.b;
    case CR_EYE: return (i / c.cols) == (i % c.cols) ? 1.0 : 0.0;
    case CR_RAND: {
        uint32_t w[4];
        Philox::run(c.seed, (uint64_t)i, w);
        double u = (float)(w[0] >> 8) * (1.0f / 16777216.0f);
        return u < c.a ? u : c.a;
    }
    default: {
        uint32_t w[4];
        Philox::run(c.seed, (uint64_t)i, w);
        float u1 = ((float)(w[0] >> 8) + 1.0f) * (1.0f / 16777217.0f);
        float u2 = (float)(w[1] >> 8) * (1.0f / 16777216.0f);
        return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
    }
    }
}

template <class T> __global__ void k_create(T *d, Nd nd, CreateArgs c, bool flat)
{
    EW_GRID_LOOP(i, nd.d.numel) {
        int64_t off[EW_MAX_OPS];
        if (flat) off[0] = i;
        else nd.offsets(i, off);
        d[off[0]] = st<T>(create_value(c, i));
    }
}

template <class T> __global__ void k_fill_vec(T *d, int64_t n, T v)
{
    constexpr int V = 16 / sizeof(T);
    int64_t npk = n / V;
    Pack<T, V> p;
#pragma unroll
    for (int j = 0; j < V; j++) p.v[j] = v;
    EW_GRID_LOOP(q, npk) reinterpret_cast<Pack<T, V> *>(d)[q] = p;
    EW_GRID_LOOP(t, n - npk * V) d[npk * V + t] = v;
}

template <class T> T host_value(double a)
{
    if constexpr (std::is_same<T, __half>::value) return __float2half_rn((float)a);
    else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16_rn((float)a);
    else if constexpr (std::is_same<T, bool>::value) return a != 0.0;
    else return (T)a;
}

cudaError_t create(void *dst, ct_dtype dt, const ew_nd *nd, CreateArgs c, cudaStream_t s)
{
    if (nd->numel <= 0) return cudaSuccess;
    bool flat = flat_dst(nd);
    EW_DISPATCH(dt, {
        if (c.kind == CR_FILL && flat && aligned(dst, 16) && 16 / sizeof(T) > 1) {
            /* the value rounded once, on the host side of the launch, as the CPU's store */
            T v = host_value<T>(c.a);
            k_fill_vec<T><<<blocks_for(nd->numel, 16 / sizeof(T)), kThreads, 0, s>>>((T *)dst, nd->numel, v);
        } else {
            k_create<T><<<blocks_for(nd->numel), kThreads, 0, s>>>((T *)dst, Nd{*nd}, c, flat);
        }
        return cudaGetLastError();
    })
}

/* ---- where and complex ---- */

template <class E> __global__ void k_where(E *d, const bool *c, const E *a, const E *b, Nd nd)
{
    EW_GRID_LOOP(i, nd.d.numel) {
        int64_t off[EW_MAX_OPS];
        nd.offsets(i, off);
        d[off[0]] = c[off[1]] ? a[off[2]] : b[off[3]];
    }
}

struct Cplx {
    int op;
    double s;
    bool has_b;
};

__global__ void k_complex(char *d, const char *a, const char *b, Nd nd, Cplx c)
{
    EW_GRID_LOOP(i, nd.d.numel) {
        int64_t off[EW_MAX_OPS];
        nd.offsets(i, off);
        float *out = (float *)d;
        if (c.op == EW_C_MAKE) {
            float2 z = make_float2(((const float *)a)[off[1]], ((const float *)b)[off[2]]);
            reinterpret_cast<float2 *>(out)[off[0]] = z;
            continue;
        }
        float2 z = reinterpret_cast<const float2 *>(a)[off[1]];
        switch (c.op) {
        case EW_C_REAL: out[off[0]] = z.x; continue;
        case EW_C_IMAG: out[off[0]] = z.y; continue;
        case EW_C_ABS: out[off[0]] = (float)hypot((double)z.x, (double)z.y); continue;
        default: break;
        }
        double ar = z.x, ai = z.y, br = c.s, bi = 0.0, r, im;
        if (c.has_b) {
            float2 w = reinterpret_cast<const float2 *>(b)[off[2]];
            br = w.x, bi = w.y;
        }
        switch (c.op) {
        case EW_C_CONJ: r = ar, im = -ai; break;
        case EW_C_NEG: r = -ar, im = -ai; break;
        case EW_C_ADD: r = ar + br, im = ai + bi; break;
        case EW_C_SUB: r = ar - br, im = ai - bi; break;
        case EW_C_MUL:
            if (c.has_b) r = ar * br - ai * bi, im = ar * bi + ai * br;
            else r = ar * br, im = ai * br;
            break;
        default: /* EW_C_DIV */
            if (c.has_b) {
                double den = br * br + bi * bi;
                r = (ar * br + ai * bi) / den, im = (ai * br - ar * bi) / den;
            } else {
                r = ar / br, im = ai / br;
            }
            break;
        }
        reinterpret_cast<float2 *>(out)[off[0]] = make_float2((float)r, (float)im);
    }
}

/* ---- dtype dispatch of the maps ---- */

template <class T> cudaError_t binary_t(ew_code op, void *d, const void *a, const void *b, const ew_nd *nd, cudaStream_t s)
{
    return map<T, T>((T *)d, (const T *)a, (const T *)b, nd, BinaryF<C_t<T>>{op}, s);
}

template <class D> cudaError_t copy_to(void *dst, const void *src, ct_dtype sdt, const ew_nd *nd, cudaStream_t s)
{
    if (sdt == CT_C64) /* complex to real keeps the real part, as the CPU */
        return map<D, C64>((D *)dst, (const C64 *)src, (const C64 *)nullptr, nd, IdentityF<float>{}, s);
    EW_DISPATCH(sdt, return map<D, T>((D *)dst, (const T *)src, (const T *)nullptr, nd, IdentityF<C_t<T>>{}, s))
}

} // namespace

extern "C" cudaError_t ew_launch_fill(void *dst, ct_dtype dt, const ew_nd *nd, double v, cudaStream_t s)
{
    return create(dst, dt, nd, CreateArgs{CR_FILL, v, 0, 1, 0}, s);
}

extern "C" cudaError_t ew_launch_arange(void *dst, ct_dtype dt, const ew_nd *nd, double start, double step,
                                        cudaStream_t s)
{
    return create(dst, dt, nd, CreateArgs{CR_ARANGE, start, step, 1, 0}, s);
}

extern "C" cudaError_t ew_launch_eye(void *dst, ct_dtype dt, const ew_nd *nd, int64_t cols, cudaStream_t s)
{
    return create(dst, dt, nd, CreateArgs{CR_EYE, 0, 0, cols > 0 ? cols : 1, 0}, s);
}

extern "C" cudaError_t ew_launch_rand(void *dst, ct_dtype dt, const ew_nd *nd, uint64_t seed, bool normal,
                                      cudaStream_t s)
{
    /* a draw just below 1 rounds up to 1 in f16/bf16: clamp to the largest value below 1 */
    double top = dt == CT_F16 ? 1.0 - 1.0 / 2048 : dt == CT_BF16 ? 1.0 - 1.0 / 256 : 1.0;
    return create(dst, dt, nd, CreateArgs{normal ? CR_RANDN : CR_RAND, top, 0, 1, seed}, s);
}

extern "C" cudaError_t ew_launch_copy(void *dst, ct_dtype ddt, const void *src, ct_dtype sdt, const ew_nd *nd,
                                      cudaStream_t s)
{
    if (ddt == CT_C64 && sdt == CT_C64) /* the pair as one 8-byte element */
        return map<uint64_t, uint64_t>((uint64_t *)dst, (const uint64_t *)src, (const uint64_t *)nullptr, nd,
                                       IdentityF<uint64_t>{}, s);
    if (ddt == CT_C64) return copy_to<C64>(dst, src, sdt, nd, s); /* real part through f32, imaginary 0 */
    EW_DISPATCH(ddt, return copy_to<T>(dst, src, sdt, nd, s))
}

extern "C" cudaError_t ew_launch_binary(ew_code op, ct_dtype dt, void *dst, const void *a, const void *b,
                                        const ew_nd *nd, cudaStream_t s)
{
    EW_DISPATCH(dt, return binary_t<T>(op, dst, a, b, nd, s))
}

extern "C" cudaError_t ew_launch_scalar(ew_code op, ct_dtype dt, void *dst, const void *a, double scalar,
                                        const ew_nd *nd, cudaStream_t s)
{
    EW_DISPATCH(dt, {
        using C = C_t<T>;
        return map<T, T>((T *)dst, (const T *)a, (const T *)nullptr, nd, ScalarF<C>{op, (C)scalar}, s);
    })
}

extern "C" cudaError_t ew_launch_unary(ew_code op, ct_dtype dt, void *dst, const void *a, double p0, double p1,
                                       const ew_nd *nd, cudaStream_t s)
{
    EW_DISPATCH(dt, {
        using C = C_t<T>;
        C lo, hi;
        if constexpr (std::is_integral<C>::value) { /* integral or infinite bounds (frontend) */
            lo = p0 <= -9223372036854775808.0 ? INT64_MIN : p0 >= 9223372036854775807.0 ? INT64_MAX : (int64_t)p0;
            hi = p1 <= -9223372036854775808.0 ? INT64_MIN : p1 >= 9223372036854775807.0 ? INT64_MAX : (int64_t)p1;
        } else {
            lo = (C)p0, hi = (C)p1;
        }
        return map<T, T>((T *)dst, (const T *)a, (const T *)nullptr, nd, UnaryF<C>{op, lo, hi}, s);
    })
}

extern "C" cudaError_t ew_launch_cmp(ew_cmp op, ct_dtype dt, void *dst, const void *a, const void *b, bool int_path,
                                     int64_t scalar_i, double scalar_d, const ew_nd *nd, cudaStream_t s)
{
    EW_DISPATCH(dt, {
        CmpF<C_t<T>> f{op, b != nullptr, int_path, scalar_i, scalar_d};
        return map<bool, T>((bool *)dst, (const T *)a, (const T *)b, nd, f, s);
    })
}

extern "C" cudaError_t ew_launch_where(size_t esize, void *dst, const void *cond, const void *a, const void *b,
                                       const ew_nd *nd, cudaStream_t s)
{
    if (nd->numel <= 0) return cudaSuccess;
    unsigned g = blocks_for(nd->numel);
    const bool *c = (const bool *)cond;
    switch (esize) {
    case 1: k_where<uint8_t><<<g, kThreads, 0, s>>>((uint8_t *)dst, c, (const uint8_t *)a, (const uint8_t *)b, Nd{*nd}); break;
    case 2: k_where<uint16_t><<<g, kThreads, 0, s>>>((uint16_t *)dst, c, (const uint16_t *)a, (const uint16_t *)b, Nd{*nd}); break;
    case 4: k_where<uint32_t><<<g, kThreads, 0, s>>>((uint32_t *)dst, c, (const uint32_t *)a, (const uint32_t *)b, Nd{*nd}); break;
    case 8: k_where<uint64_t><<<g, kThreads, 0, s>>>((uint64_t *)dst, c, (const uint64_t *)a, (const uint64_t *)b, Nd{*nd}); break;
    default: return cudaErrorInvalidValue;
    }
    return cudaGetLastError();
}

extern "C" cudaError_t ew_launch_complex(ew_cplx op, void *dst, const void *a, const void *b, double scalar,
                                         const ew_nd *nd, cudaStream_t s)
{
    if (nd->numel <= 0) return cudaSuccess;
    k_complex<<<blocks_for(nd->numel), kThreads, 0, s>>>((char *)dst, (const char *)a, (const char *)b, Nd{*nd},
                                                         Cplx{op, scalar, b != nullptr});
    return cudaGetLastError();
}
