/* The nn group's row and element kernels: softmax, norms, RoPE, embedding, set_rows,
 * pooling, batch norm, strided gathers and the small-M linear used by decode.
 *
 * Row-wise ops (softmax, rms/layer norm) run one block per row and keep the row in shared
 * memory when it fits, so each element is read from global memory once and written once
 * (the bandwidth of a copy); longer rows are read twice. Dense rows move in 16-byte
 * vectors. Arithmetic is f32 with f32 block reductions; per-row factors (1/sqrt, 1/sum)
 * are taken in double like the CPU's. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include <type_traits>

#include "backends/cuda/dyn_access.cuh"
#include "backends/cuda/nn_kernels.h"

namespace {

using cudyn::ld_dyn;
using cudyn::ld_index;
using cudyn::st_dyn;

constexpr int ROW_THREADS = 1024; /* the most a row kernel is launched with */

template <typename T> __device__ __forceinline__ float to_f(T v);
template <> __device__ __forceinline__ float to_f<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f<__half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_f<__nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
/* A 16-byte chunk of T from its values in f32: half and bf16 pairs rounded by one packed
 * conversion each (cvt.rn.f16x2.f32), the same rounding as from_f, half the instructions:
 * f16 row ops are bound by instructions per byte as much as by bytes. */
__device__ __forceinline__ __half2 pair_rn(float a, float b, __half) { return __floats2half2_rn(a, b); }
__device__ __forceinline__ __nv_bfloat162 pair_rn(float a, float b, __nv_bfloat16) { return __floats2bfloat162_rn(a, b); }
template <typename T> __device__ __forceinline__ uint4 pack_chunk(const float *v)
{
    if constexpr (sizeof(T) == 4) {
        return make_uint4(__float_as_uint(v[0]), __float_as_uint(v[1]), __float_as_uint(v[2]), __float_as_uint(v[3]));
    } else {
        uint4 o;
        uint32_t *w = (uint32_t *)&o;
#pragma unroll
        for (int k = 0; k < 4; k++) {
            auto pr = pair_rn(v[2 * k], v[2 * k + 1], T());
            memcpy(w + k, &pr, sizeof pr);
        }
        return o;
    }
}

__device__ __forceinline__ void row_offsets(const nn_rows &r, int64_t row, int64_t *o0, int64_t *o1)
{
    int64_t a = 0, b = 0;
    for (int d = r.nd - 1; d >= 0; d--) {
        int64_t i = row % r.shape[d];
        row /= r.shape[d];
        a += i * r.st[0][d];
        b += i * r.st[1][d];
    }
    *o0 = a;
    *o1 = b;
}

__device__ __forceinline__ int64_t view_offset(const nn_view &v, int64_t flat)
{
    int64_t o = 0;
    for (int d = v.nd - 1; d >= 0; d--) {
        o += (flat % v.shape[d]) * v.st[d];
        flat /= v.shape[d];
    }
    return o;
}

__device__ __forceinline__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Block-wide sum/max; every thread gets the result. red has 33 floats. */
__device__ float block_sum(float v, float *red)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    __syncthreads(); /* red may still be read by a previous reduction */
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : 0.0f;
    return warp_sum(v);
}
__device__ float block_max(float v, float *red)
{
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[w] = v;
    __syncthreads();
    v = lane < nw ? red[lane] : -INFINITY;
    return warp_max(v);
}

/* Loads row x (n elements, stride xs) as f32 into buf (when cached) and applies f to
 * each value; vec: dense and 16-byte aligned, moved in 16-byte vectors. */
/* 16-byte chunk c of a dense row: its E elements as f32 to f(i, v). */
template <typename T, typename F> __device__ __forceinline__ void chunk_each(uint4 raw, int64_t c, F f)
{
    constexpr int E = 16 / sizeof(T);
    const T *e = (const T *)&raw;
#pragma unroll
    for (int u = 0; u < E; u++) f(c * E + u, to_f<T>(e[u]));
}

/* Applies f(i, v) to every element of a dense, 16-byte aligned row: ROW_UNROLL loads are
 * issued before any is used, so each thread keeps several in flight (a row op is a copy's
 * bandwidth only with enough bytes in flight per SM). */
constexpr int ROW_UNROLL = 4;
template <typename T, typename F> __device__ __forceinline__ void dense_each(const T *x, int64_t n, F f)
{
    constexpr int E = 16 / sizeof(T);
    const uint4 *xv = (const uint4 *)x;
    const int64_t nv = n / E, B = blockDim.x;
    int64_t c = threadIdx.x;
    for (; c + (ROW_UNROLL - 1) * B < nv; c += ROW_UNROLL * B) {
        uint4 raw[ROW_UNROLL];
#pragma unroll
        for (int k = 0; k < ROW_UNROLL; k++) raw[k] = xv[c + k * B];
#pragma unroll
        for (int k = 0; k < ROW_UNROLL; k++) chunk_each<T>(raw[k], c + k * B, f);
    }
    for (; c < nv; c += B) chunk_each<T>(xv[c], c, f);
    for (int64_t i = nv * E + threadIdx.x; i < n; i += B) f(i, to_f<T>(x[i]));
}

/* Loads row x (n elements, stride xs) as f32 into buf (when cached) and applies f to
 * each value; vec: dense and 16-byte aligned. */
template <typename T, typename F>
__device__ __forceinline__ void row_each(const T *x, int64_t n, int64_t xs, bool vec, float *buf, F f)
{
    if (vec) {
        dense_each(x, n, [&](int64_t i, float v) {
            if (buf) buf[i] = v;
            f(v);
        });
        return;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = to_f<T>(x[i * xs]);
        if (buf) buf[i] = v;
        f(v);
    }
}

/* Reads element i of the row again: from the cache, or from global memory. */
template <typename T>
__device__ __forceinline__ float row_at(const T *x, int64_t i, int64_t xs, const float *buf)
{
    return buf ? buf[i] : to_f<T>(x[i * xs]);
}

/* Writes g(i, v) for every element of the row, v from the cache or x; dense rows in
 * 16-byte vectors. */
template <typename T, typename G>
__device__ __forceinline__ void row_write(const T *x, T *y, int64_t n, int64_t xs, int64_t ys, bool vec,
                                          const float *buf, G g)
{
    constexpr int E = 16 / sizeof(T);
    if (vec && buf) {
        int64_t nv = n / E;
        for (int64_t c = threadIdx.x; c < nv; c += blockDim.x) {
            uint4 outv;
            T *o = (T *)&outv;
#pragma unroll
            for (int u = 0; u < E; u++) o[u] = from_f<T>(g(c * E + u, buf[c * E + u]));
            ((uint4 *)y)[c] = outv;
        }
        for (int64_t i = nv * E + threadIdx.x; i < n; i += blockDim.x) y[i] = from_f<T>(g(i, buf[i]));
        return;
    }
    if (vec) { /* loads unrolled as in dense_each, each chunk stored as one vector */
        const uint4 *xv = (const uint4 *)x;
        uint4 *yv = (uint4 *)y;
        const int64_t nv = n / E, B = blockDim.x;
        auto map = [&](uint4 raw, int64_t c) {
            uint4 outv;
            T *o = (T *)&outv;
            const T *e = (const T *)&raw;
#pragma unroll
            for (int u = 0; u < E; u++) o[u] = from_f<T>(g(c * E + u, to_f<T>(e[u])));
            yv[c] = outv;
        };
        int64_t c = threadIdx.x;
        for (; c + (ROW_UNROLL - 1) * B < nv; c += ROW_UNROLL * B) {
            uint4 raw[ROW_UNROLL];
#pragma unroll
            for (int k = 0; k < ROW_UNROLL; k++) raw[k] = xv[c + k * B];
#pragma unroll
            for (int k = 0; k < ROW_UNROLL; k++) map(raw[k], c + k * B);
        }
        for (; c < nv; c += B) map(xv[c], c);
        for (int64_t i = nv * E + threadIdx.x; i < n; i += B) y[i] = from_f<T>(g(i, to_f<T>(x[i])));
        return;
    }
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) y[i * ys] = from_f<T>(g(i, row_at(x, i, xs, buf)));
}

__host__ __device__ __forceinline__ bool aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

/* What a row op writes for element i of value v, once the row's statistics are known. */
struct softmax_out {
    float m, inv, lse;
    int log_mode;
    __device__ float operator()(int64_t, float v) const { return log_mode ? (v - m) - lse : __expf(v - m) * inv; }
};
__device__ __forceinline__ softmax_out make_softmax_out(float m, float s, int log_mode)
{
    return {m, (float)(1.0 / (double)s), log_mode ? (float)::log((double)s) : 0.0f, log_mode};
}
/* rms norm (b == nullptr, mean 0) and layer norm */
struct norm_out {
    float mean, rstd;
    const void *w, *b;
    ct_dtype wdt, bdt;
    int64_t ws;
    __device__ float operator()(int64_t i, float v) const
    {
        float r = (v - mean) * rstd;
        if (w) r *= ld_dyn(w, i * ws, wdt);
        if (b) r += ld_dyn(b, i, bdt);
        return r;
    }
};
__device__ __forceinline__ float norm_rstd(float sq, int64_t n, double eps)
{
    return (float)(1.0 / sqrt((double)sq / (double)n + eps));
}

template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) softmax_kernel(const T *x, T *y, nn_rows rows, int64_t n, int64_t xs,
                                                              int64_t ys, int log_mode, int cached)
{
    extern __shared__ float smem[];
    __shared__ float red[33];
    int64_t ox, oy;
    row_offsets(rows, blockIdx.x, &oy, &ox);
    const T *xr = x + ox;
    T *yr = y + oy;
    float *buf = cached ? smem : nullptr;
    bool vec = xs == 1 && ys == 1 && aligned16(xr) && aligned16(yr);
    /* max and sum of exp in the same pass (the sum rescaled when the max grows): a row too
     * long to cache is then read twice in all, not three times */
    float tm = -INFINITY, ts = 0.0f;
    row_each(xr, n, xs, vec, buf, [&](float v) {
        if (v > tm) ts = ts * __expf(tm - v) + 1.0f, tm = v;
        else ts += __expf(v - tm);
    });
    if (buf) __syncthreads();
    float m = block_max(tm, red);
    float s = block_sum(ts * __expf(tm - m), red);
    row_write(xr, yr, n, xs, ys, vec, buf, make_softmax_out(m, s, log_mode));
}

template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) norm_kernel(int kind, const T *x, T *y, nn_rows rows, int64_t n,
                                                           int64_t xs, int64_t ys, const void *w, ct_dtype wdt,
                                                           int64_t ws, const void *b, ct_dtype bdt, double eps,
                                                           int cached)
{
    extern __shared__ float smem[];
    __shared__ float red[33];
    int64_t ox, oy;
    row_offsets(rows, blockIdx.x, &oy, &ox);
    const T *xr = x + ox;
    T *yr = y + oy;
    float *buf = cached ? smem : nullptr;
    bool vec = xs == 1 && ys == 1 && aligned16(xr) && aligned16(yr);
    if (kind == 0) {
        float ss = 0.0f;
        row_each(xr, n, xs, vec, buf, [&](float v) { ss += v * v; });
        if (buf) __syncthreads();
        ss = block_sum(ss, red);
        row_write(xr, yr, n, xs, ys, vec, buf, norm_out{0.0f, norm_rstd(ss, n, eps), w, nullptr, wdt, bdt, ws});
        return;
    }
    float sum = 0.0f;
    row_each(xr, n, xs, vec, buf, [&](float v) { sum += v; });
    if (buf) __syncthreads();
    float mean = block_sum(sum, red) / (float)n;
    float var = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float d = row_at(xr, i, xs, buf) - mean;
        var += d * d;
    }
    var = block_sum(var, red);
    row_write(xr, yr, n, xs, ys, vec, buf, norm_out{mean, norm_rstd(var, n, eps), w, b, wdt, bdt, ws});
}

/* Dense rows of at most REG_CHUNKS 16-byte chunks per thread stay in registers, raw, from
 * the load to the write: every load is issued before the first reduction and no element
 * passes through shared memory. The f32 shared-memory cache above costs f16 rows bank
 * conflicts (a thread's 8 values are 32 bytes apart from its neighbour's) and keeps one
 * block per SM on long rows. */
constexpr int REG_CHUNKS = 8;

template <typename T> struct reg_row {
    static constexpr int E = 16 / sizeof(T);
    uint4 raw[REG_CHUNKS];
    int nv; /* chunks in the row (at most REG_CHUNKS * ROW_THREADS) */

    __device__ reg_row(const T *x, int64_t n) : nv((int)(n / E))
    {
#pragma unroll
        for (int k = 0; k < REG_CHUNKS; k++) {
            int c = threadIdx.x + k * blockDim.x;
            if (c < nv) raw[k] = ((const uint4 *)x)[c];
        }
    }
    template <typename F> __device__ void each(F f) const
    {
#pragma unroll
        for (int k = 0; k < REG_CHUNKS; k++) {
            int c = threadIdx.x + k * blockDim.x;
            if (c < nv) chunk_each<T>(raw[k], c, f);
        }
    }
    /* g(c, v) turns chunk c's E values (f32) into the output's, in place */
    template <typename G> __device__ void write_chunks(T *y, G g) const
    {
#pragma unroll
        for (int k = 0; k < REG_CHUNKS; k++) {
            int c = threadIdx.x + k * blockDim.x;
            if (c >= nv) continue;
            float v[E];
            const T *e = (const T *)&raw[k];
#pragma unroll
            for (int u = 0; u < E; u++) v[u] = to_f<T>(e[u]);
            g(c, v);
            ((uint4 *)y)[c] = pack_chunk<T>(v);
        }
    }
    template <typename G> __device__ void write(T *y, G g) const
    {
        write_chunks(y, [&](int64_t c, float *v) {
#pragma unroll
            for (int u = 0; u < E; u++) v[u] = g(c * E + u, v[u]);
        });
    }
};

/* E f32 values of a dense, 16-byte aligned array from element c * E: E / 4 vector loads
 * (a norm's weight and bias, read by every row: from L1/L2, but one load per element
 * through ld_dyn's dtype switch was the f16 norms' limit: H200 rms_norm f16 62 / 65 / 47%
 * of a copy in session 14, 92 / 96 / 75% with these at the same threads per row). */
template <int E> __device__ __forceinline__ void ld_f32_chunk(const void *p, int64_t c, float *o)
{
#pragma unroll
    for (int k = 0; k < E / 4; k++) {
        float4 v = ((const float4 *)p)[c * (E / 4) + k];
        o[4 * k] = v.x, o[4 * k + 1] = v.y, o[4 * k + 2] = v.z, o[4 * k + 3] = v.w;
    }
}

/* Softmax of 2-byte rows of at most SOFT2_CHUNKS chunks a thread (rows of 4,096 halves or
 * fewer take 128 threads with 4 or fewer): each exp is taken once and kept in f32
 * registers until the write, where reg_row_kernel takes it again. The H200's
 * special-function units take 16 exps a cycle per SM, so two per element cost an f16 row
 * about half its memory time (an f32 row, with twice the bytes, a quarter): 32768x4096 f16
 * 85 -> 96% of a device copy. Same arithmetic, in the same order, as reg_row_kernel's. */
constexpr int SOFT2_CHUNKS = 4;

template <typename T>
__global__ void __launch_bounds__(ROW_THREADS) soft2_kernel(const T *x, T *y, nn_rows rows, int64_t n)
{
    __shared__ float red[33];
    int64_t ox, oy;
    row_offsets(rows, blockIdx.x, &oy, &ox);
    constexpr int E = reg_row<T>::E;
    reg_row<T> row(x + ox, n); /* chunks past SOFT2_CHUNKS are never loaded (nv bounds them) */
    float tm = -INFINITY;
    row.each([&](int64_t, float v) { tm = fmaxf(tm, v); });
    float m = block_max(tm, red), ts = 0.0f, ex[SOFT2_CHUNKS][E];
#pragma unroll
    for (int k = 0; k < SOFT2_CHUNKS; k++) {
        if (threadIdx.x + k * blockDim.x >= row.nv) continue;
        const T *e = (const T *)&row.raw[k];
#pragma unroll
        for (int u = 0; u < E; u++) ts += (ex[k][u] = __expf(to_f<T>(e[u]) - m));
    }
    softmax_out g = make_softmax_out(m, block_sum(ts, red), 0);
    T *yr = y + oy;
#pragma unroll
    for (int k = 0; k < SOFT2_CHUNKS; k++) {
        int c = threadIdx.x + k * blockDim.x;
        if (c >= row.nv) continue;
        float v[E];
#pragma unroll
        for (int u = 0; u < E; u++) v[u] = ex[k][u] * g.inv;
        ((uint4 *)yr)[c] = pack_chunk<T>(v);
    }
}

/* The register path of softmax and the norms (kind: 0 rms, 1 layer, 2 softmax, 3 log
 * softmax; SM: kind >= 2, a kernel of its own so neither carries the other's registers);
 * every row is dense and 16-byte aligned (reg_row_threads checked). */
template <typename T, bool SM>
__global__ void __launch_bounds__(ROW_THREADS) reg_row_kernel(int kind, const T *x, T *y, nn_rows rows, int64_t n,
                                                              const void *w, ct_dtype wdt, int64_t ws, const void *b,
                                                              ct_dtype bdt, double eps)
{
    __shared__ float red[33];
    int64_t ox, oy;
    row_offsets(rows, blockIdx.x, &oy, &ox);
    T *yr = y + oy;
    reg_row<T> row(x + ox, n);
    if constexpr (SM) {
        float tm = -INFINITY;
        row.each([&](int64_t, float v) { tm = fmaxf(tm, v); });
        float m = block_max(tm, red);
        float ts = 0.0f;
        row.each([&](int64_t, float v) { ts += __expf(v - m); });
        row.write(yr, make_softmax_out(m, block_sum(ts, red), kind == 3));
        return;
    }
    float mean = 0.0f;
    if (kind == 1) {
        float sum = 0.0f;
        row.each([&](int64_t, float v) { sum += v; });
        mean = block_sum(sum, red) / (float)n;
    }
    float sq = 0.0f;
    row.each([&](int64_t, float v) { sq += (v - mean) * (v - mean); });
    norm_out g{mean, norm_rstd(block_sum(sq, red), n, eps), w, kind == 1 ? b : nullptr, wdt, bdt, ws};
    /* not for bf16 rows: their conversions leave too few registers (spills) */
    bool wvec = w && wdt == CT_F32 && ws == 1 && aligned16(w) && (!g.b || (bdt == CT_F32 && aligned16(g.b)));
    if (std::is_same<T, __nv_bfloat16>::value || !wvec) {
        row.write(yr, g);
        return;
    }
    constexpr int E = reg_row<T>::E;
    row.write_chunks(yr, [&](int64_t c, float *v) { /* norm_out's arithmetic in its order */
        float wv[E];
        ld_f32_chunk<E>(w, c, wv);
#pragma unroll
        for (int u = 0; u < E; u++) v[u] = (v[u] - mean) * g.rstd * wv[u];
        if (!g.b) return;
        ld_f32_chunk<E>(g.b, c, wv);
#pragma unroll
        for (int u = 0; u < E; u++) v[u] += wv[u];
    });
}

/* Threads for the register path of rows of n elements, or 0 when they do not fit it (not
 * dense, not every row 16-byte aligned, or too long): the fewest (128 at least) that hold
 * the row in REG_CHUNKS chunks each. Fewer, fuller threads leave room for more rows per SM
 * and more loads in flight per thread; on the H200, against about four chunks a thread
 * (ctorch-bench-cuda-nn rows, % of a device copy, 8192x8192 / 32768x4096 / 4096x32000):
 * softmax f16 81 / 85 / 63 -> 94 / 96 / 94, rms_norm f16 92 / 96 / 75 -> 92 / 96 / 94,
 * f32 rows 92-97 either way; two chunks a thread 55-75. */
template <typename T> int reg_row_threads(const void *x, const void *y, const nn_rows &rows, int64_t n, int64_t xs,
                                          int64_t ys)
{
    constexpr int64_t E = 16 / sizeof(T);
    if (xs != 1 || ys != 1 || n % E != 0 || !aligned16(x) || !aligned16(y)) return 0;
    for (int d = 0; d < rows.nd; d++)
        if (rows.shape[d] > 1 && (rows.st[0][d] % E != 0 || rows.st[1][d] % E != 0)) return 0;
    int64_t nv = n / E, t = 128;
    while (t < ROW_THREADS && t * REG_CHUNKS < nv) t *= 2;
    return nv <= t * REG_CHUNKS ? (int)t : 0;
}

template <typename T>
cudaError_t reg_row_launch(int kind, const void *x, void *y, nn_rows rows, int64_t n_rows, int64_t n, int threads,
                           const void *w, ct_dtype wdt, int64_t ws, const void *b, ct_dtype bdt, double eps,
                           cudaStream_t s)
{
    if constexpr (sizeof(T) == 2) {
        if (kind == 2 && n / reg_row<T>::E <= (int64_t)threads * SOFT2_CHUNKS) {
            soft2_kernel<T><<<(unsigned)n_rows, threads, 0, s>>>((const T *)x, (T *)y, rows, n);
            return cudaGetLastError();
        }
    }
    if (kind >= 2)
        reg_row_kernel<T, true><<<(unsigned)n_rows, threads, 0, s>>>(kind, (const T *)x, (T *)y, rows, n, w, wdt, ws, b,
                                                                     bdt, eps);
    else
        reg_row_kernel<T, false><<<(unsigned)n_rows, threads, 0, s>>>(kind, (const T *)x, (T *)y, rows, n, w, wdt, ws,
                                                                      b, bdt, eps);
    return cudaGetLastError();
}

/* Long rows get more threads: a block per SM (their cache fills shared memory) must still
 * keep enough loads in flight. */
int row_threads(int64_t n) { return n >= 16384 ? 1024 : 256; }

/* Shared memory for a cached row, or 0 when the row is too long to cache. */
size_t row_cache_bytes(int64_t n, size_t smem_max)
{
    size_t want = sizeof(float) * (size_t)n;
    return want <= smem_max ? want : 0;
}

/* Opts kernel into `bytes` of dynamic shared memory once (the first request sets the
 * largest any call of it uses: row_smem's cap), so no call inside a graph capture pays
 * for it; the static's initialization is thread-safe. */
template <typename K> cudaError_t set_smem(K kernel, size_t bytes, size_t cap)
{
    /* the default 48 KiB counts the kernel's static buffer too: keep 2 KiB clear of it */
    if (bytes <= 46 * 1024) return cudaSuccess;
    static const cudaError_t once = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)cap);
    return once;
}

template <typename T>
cudaError_t softmax_t(const void *x, void *y, nn_rows rows, int64_t n_rows, int64_t n, int64_t xs, int64_t ys, int log,
                      size_t smem_max, cudaStream_t s)
{
    int rt = reg_row_threads<T>(x, y, rows, n, xs, ys);
    if (rt) return reg_row_launch<T>(log ? 3 : 2, x, y, rows, n_rows, n, rt, nullptr, CT_F32, 0, nullptr, CT_F32, 0.0, s);
    size_t sm = row_cache_bytes(n, smem_max);
    cudaError_t e = set_smem(softmax_kernel<T>, sm, smem_max);
    if (e != cudaSuccess) return e;
    softmax_kernel<T><<<(unsigned)n_rows, row_threads(n), sm, s>>>((const T *)x, (T *)y, rows, n, xs, ys, log, sm > 0);
    return cudaGetLastError();
}

template <typename T>
cudaError_t norm_t(int kind, const void *x, void *y, nn_rows rows, int64_t n_rows, int64_t n, int64_t xs, int64_t ys,
                   const void *w, ct_dtype wdt, int64_t ws, const void *b, ct_dtype bdt, double eps, size_t smem_max,
                   cudaStream_t s)
{
    int rt = reg_row_threads<T>(x, y, rows, n, xs, ys);
    if (rt) return reg_row_launch<T>(kind, x, y, rows, n_rows, n, rt, w, wdt, ws, b, bdt, eps, s);
    size_t sm = row_cache_bytes(n, smem_max);
    cudaError_t e = set_smem(norm_kernel<T>, sm, smem_max);
    if (e != cudaSuccess) return e;
    norm_kernel<T><<<(unsigned)n_rows, row_threads(n), sm, s>>>(kind, (const T *)x, (T *)y, rows, n, xs, ys, w, wdt, ws, b,
                                                             bdt, eps, sm > 0);
    return cudaGetLastError();
}

unsigned grid_for(int64_t n, int threads)
{
    int64_t g = (n + threads - 1) / threads;
    return (unsigned)(g < 1 ? 1 : (g > 2147483647 ? 2147483647 : g));
}

__global__ void gather_kernel(const void *src, ct_dtype sdt, nn_view v, void *dst, ct_dtype ddt, int64_t n)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        st_dyn(dst, i, ddt, ld_dyn(src, view_offset(v, i), sdt));
}

__global__ void batch_norm_kernel(const void *x, ct_dtype xdt, nn_view xv, void *y, ct_dtype ydt, nn_view yv,
                                  const void *m, const void *var, const void *w, const void *b, ct_dtype mdt,
                                  ct_dtype vdt, ct_dtype wdt, ct_dtype bdt, int64_t ms, int64_t vs, int64_t wst,
                                  int64_t bst, double eps, int64_t n)
{
    int64_t inner = 1;
    for (int d = 2; d < xv.nd; d++) inner *= xv.shape[d];
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t c = (i / inner) % xv.shape[1];
        double mean = m ? (double)ld_dyn(m, c * ms, mdt) : 0.0, vv = var ? (double)ld_dyn(var, c * vs, vdt) : 1.0;
        double ww = w ? (double)ld_dyn(w, c * wst, wdt) : 1.0, bb = b ? (double)ld_dyn(b, c * bst, bdt) : 0.0;
        double sc = ww / sqrt(vv + eps);
        float scale = (float)sc, shift = (float)(bb - mean * sc);
        float v = ld_dyn(x, view_offset(xv, i), xdt);
        st_dyn(y, view_offset(yv, i), ydt, v * scale + shift);
    }
}

/* One thread per (row, pair j): j < half rotates a pair, the others copy the tail. */
__global__ void rope_kernel(const void *x, ct_dtype xdt, void *y, ct_dtype ydt, nn_rows rows, int64_t n_rows, int64_t T,
                            int64_t H, int64_t D, int64_t xs, int64_t ys, const void *pos, ct_dtype pdt, int64_t ps,
                            int half, double base, double fscale, int neox)
{
    int64_t per = (D + 1) / 2, total = n_rows * per;
    for (int64_t g = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; g < total; g += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = g / per, j = g % per, ox, oy;
        row_offsets(rows, row, &oy, &ox);
        if (j < half) {
            int64_t t = (row / H) % T;
            double p = (double)ld_index(pos, t * ps, pdt);
            double theta = p * fscale * pow(base, -(double)j / (double)half), sd, cd;
            sincos(theta, &sd, &cd); /* as the step planner's rope (fuse_kernels.cu): the same bits */
            float co = (float)cd, si = (float)sd;
            int64_t i0 = neox ? j : 2 * j, i1 = neox ? j + half : 2 * j + 1;
            float x0 = ld_dyn(x, ox + i0 * xs, xdt), x1 = ld_dyn(x, ox + i1 * xs, xdt);
            st_dyn(y, oy + i0 * ys, ydt, __fsub_rn(__fmul_rn(x0, co), __fmul_rn(x1, si)));
            st_dyn(y, oy + i1 * ys, ydt, __fadd_rn(__fmul_rn(x0, si), __fmul_rn(x1, co)));
        } else {
            int64_t e0 = 2 * (int64_t)half + 2 * (j - half);
            for (int64_t e = e0; e < e0 + 2 && e < D; e++) st_dyn(y, oy + e * ys, ydt, ld_dyn(x, ox + e * xs, xdt));
        }
    }
}

__global__ void embedding_kernel(const void *w, ct_dtype wdt, int64_t V, int64_t D, int64_t w0, int64_t w1,
                                 const void *ids, ct_dtype idt, nn_view idv, float *out)
{
    int64_t r = blockIdx.x;
    int64_t id = ld_index(ids, view_offset(idv, r), idt);
    float *o = out + r * D;
    bool ok = id >= 0 && id < V;
    for (int64_t i = threadIdx.x; i < D; i += blockDim.x) o[i] = ok ? ld_dyn(w, id * w0 + i * w1, wdt) : NAN;
}

/* Every block checks every index first, so a bad one writes nothing anywhere. */
__global__ void set_rows_kernel(const void *src, ct_dtype sdt, int64_t s0, int64_t s1, const void *idx, ct_dtype idt,
                                int64_t is, void *dst, ct_dtype ddt, int64_t d0, int64_t d1, int64_t n, int64_t cols,
                                int64_t rows)
{
    int bad = 0;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        int64_t r = ld_index(idx, i * is, idt);
        bad |= r < 0 || r >= rows;
    }
    if (__syncthreads_or(bad)) return;
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        int64_t r = ld_index(idx, i * is, idt);
        for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
            st_dyn(dst, r * d0 + c * d1, ddt, ld_dyn(src, i * s0 + c * s1, sdt));
    }
}

/* I: the index type. 32-bit wherever every offset fits (the usual case): the pool is memory-
 * bound only once the per-output index arithmetic is, and 64-bit division is a long
 * instruction sequence (2x2 max pool of 32x256x56x56 f32 on an H200: 1,104 GB/s with 64-bit
 * indices). */
template <typename I>
__global__ void pool_kernel(const void *x, void *y, ct_dtype dt, nn_pool p)
{
    I total = (I)(p.planes * p.Ho * p.Wo), Wo = (I)p.Wo, Ho = (I)p.Ho, C = (I)p.C;
    for (I g = blockIdx.x * (I)blockDim.x + threadIdx.x; g < total; g += (I)gridDim.x * blockDim.x) {
        I ow = g % Wo, rest = g / Wo, oh = rest % Ho, plane = rest / Ho;
        I base = (plane / C) * (I)p.xn + (plane % C) * (I)p.xc;
        I h0 = oh * p.sh - p.ph, w0 = ow * p.sw - p.pw;
        I ha = h0 < 0 ? 0 : h0, hz = h0 + p.kh > (I)p.H ? (I)p.H : h0 + p.kh;
        I wa = w0 < 0 ? 0 : w0, wz = w0 + p.kw > (I)p.W ? (I)p.W : w0 + p.kw;
        double acc = p.is_max ? -INFINITY : 0.0;
        for (I ih = ha; ih < hz; ih++)
            for (I iw = wa; iw < wz; iw++) {
                double v = ld_dyn(x, base + ih * (I)p.xh + iw * (I)p.xw, dt);
                if (!p.is_max) acc += v;
                else if (v > acc || isnan(v)) acc = v;
            }
        if (!p.is_max) {
            I cnt = p.count_include_pad ? (I)p.kh * p.kw : (hz - ha) * (wz - wa);
            acc = cnt > 0 ? acc / (double)cnt : 0.0;
        }
        st_dyn(y, g, dt, (float)acc);
    }
}

constexpr int LIN_MAX_M = 8;
constexpr int LIN_WARPS = 8;

/* One warp per output column n, all M rows at once: the weight row is read once. */
template <typename T>
__global__ void __launch_bounds__(LIN_WARPS * 32) linear_small_kernel(const float *x, int64_t xs, const T *w, int64_t w0,
                                                                      int64_t w1, const void *bias, ct_dtype bdt,
                                                                      int64_t bst, float *y, int M, int64_t N, int64_t K,
                                                                      int vec)
{
    int lane = threadIdx.x & 31;
    int64_t n = (int64_t)blockIdx.x * LIN_WARPS + (threadIdx.x >> 5);
    if (n >= N) return;
    float acc[LIN_MAX_M];
#pragma unroll
    for (int m = 0; m < LIN_MAX_M; m++) acc[m] = 0.0f;
    const T *wr = w + n * w0;
    if (vec) {
        constexpr int E = 16 / sizeof(T);
        for (int64_t c = lane; c < K / E; c += 32) {
            uint4 raw = ((const uint4 *)wr)[c];
            const T *e = (const T *)&raw;
            float wf[E];
#pragma unroll
            for (int u = 0; u < E; u++) wf[u] = to_f<T>(e[u]);
#pragma unroll
            for (int m = 0; m < LIN_MAX_M; m++) {
                if (m >= M) break;
                const float4 *xv = (const float4 *)(x + m * xs + c * E);
#pragma unroll
                for (int u = 0; u < E / 4; u++) {
                    float4 a = xv[u];
                    acc[m] += a.x * wf[4 * u] + a.y * wf[4 * u + 1] + a.z * wf[4 * u + 2] + a.w * wf[4 * u + 3];
                }
            }
        }
    } else {
        for (int64_t k = lane; k < K; k += 32) {
            float wv = to_f<T>(wr[k * w1]);
#pragma unroll
            for (int m = 0; m < LIN_MAX_M; m++) {
                if (m >= M) break;
                acc[m] += x[m * xs + k] * wv;
            }
        }
    }
    float bv = bias ? ld_dyn(bias, n * bst, bdt) : 0.0f;
#pragma unroll
    for (int m = 0; m < LIN_MAX_M; m++) {
        if (m >= M) break;
        float s = warp_sum(acc[m]);
        if (lane == 0) y[m * N + n] = s + bv;
    }
}

__global__ void add_bias_kernel(float *y, const void *bias, ct_dtype bdt, int64_t bst, int64_t M, int64_t N)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < M * N; i += (int64_t)gridDim.x * blockDim.x)
        y[i] += ld_dyn(bias, (i % N) * bst, bdt);
}

template <typename T>
cudaError_t linear_small_t(const float *x, int64_t xs, const void *w, int64_t w0, int64_t w1, const void *bias,
                           ct_dtype bdt, int64_t bst, float *y, int64_t M, int64_t N, int64_t K, cudaStream_t s)
{
    constexpr int E = 16 / sizeof(T);
    int vec = w1 == 1 && K % E == 0 && w0 % E == 0 && aligned16(w) && aligned16(x) && xs % 4 == 0;
    linear_small_kernel<T><<<grid_for(N, LIN_WARPS), LIN_WARPS * 32, 0, s>>>(x, xs, (const T *)w, w0, w1, bias, bdt, bst,
                                                                            y, (int)M, N, K, vec);
    return cudaGetLastError();
}

} // namespace

#define NN_DISPATCH(dt, FN, ...)                                                                                        \
    ((dt) == CT_F16 ? FN<__half>(__VA_ARGS__) : (dt) == CT_BF16 ? FN<__nv_bfloat16>(__VA_ARGS__) : FN<float>(__VA_ARGS__))

extern "C" cudaError_t nn_gather(const void *src, ct_dtype sdt, nn_view v, void *dst, ct_dtype ddt, cudaStream_t s)
{
    int64_t n = 1;
    for (int d = 0; d < v.nd; d++) n *= v.shape[d];
    if (n == 0) return cudaSuccess;
    gather_kernel<<<grid_for(n, 256) > 65536 ? 65536 : grid_for(n, 256), 256, 0, s>>>(src, sdt, v, dst, ddt, n);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_softmax(const void *x, void *y, ct_dtype dt, nn_rows rows, int64_t n_rows, int64_t n,
                                  int64_t xs, int64_t ys, int log, size_t smem_max, cudaStream_t s)
{
    if (n_rows == 0 || n == 0) return cudaSuccess;
    return NN_DISPATCH(dt, softmax_t, x, y, rows, n_rows, n, xs, ys, log, smem_max, s);
}

extern "C" cudaError_t nn_norm(int kind, const void *x, void *y, ct_dtype dt, nn_rows rows, int64_t n_rows, int64_t n,
                               int64_t xs, int64_t ys, const void *w, ct_dtype wdt, int64_t ws, const void *b,
                               ct_dtype bdt, double eps, size_t smem_max, cudaStream_t s)
{
    if (n_rows == 0 || n == 0) return cudaSuccess;
    return NN_DISPATCH(dt, norm_t, kind, x, y, rows, n_rows, n, xs, ys, w, wdt, ws, b, bdt, eps, smem_max, s);
}

extern "C" cudaError_t nn_batch_norm(const void *x, ct_dtype xdt, nn_view xv, void *y, ct_dtype ydt, nn_view yv,
                                     const void *const prm[4], const ct_dtype pdt[4], const int64_t pst[4], double eps,
                                     cudaStream_t s)
{
    int64_t n = 1;
    for (int d = 0; d < xv.nd; d++) n *= xv.shape[d];
    if (n == 0) return cudaSuccess;
    unsigned g = grid_for(n, 256);
    batch_norm_kernel<<<g > 65536 ? 65536 : g, 256, 0, s>>>(x, xdt, xv, y, ydt, yv, prm[0], prm[1], prm[2], prm[3],
                                                            pdt[0], pdt[1], pdt[2], pdt[3], pst[0], pst[1], pst[2],
                                                            pst[3], eps, n);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_rope(const void *x, ct_dtype xdt, void *y, ct_dtype ydt, nn_rows rows, int64_t n_rows,
                               int64_t T, int64_t H, int64_t D, int64_t xs, int64_t ys, const void *pos, ct_dtype pdt,
                               int64_t ps, int n_dims, double freq_base, double freq_scale, int neox, cudaStream_t s)
{
    int64_t total = n_rows * ((D + 1) / 2);
    if (total == 0) return cudaSuccess;
    unsigned g = grid_for(total, 256);
    rope_kernel<<<g > 65536 ? 65536 : g, 256, 0, s>>>(x, xdt, y, ydt, rows, n_rows, T, H, D, xs, ys, pos, pdt, ps,
                                                      n_dims / 2, freq_base, freq_scale, neox);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_embedding(const void *w, ct_dtype wdt, int64_t V, int64_t D, int64_t w0, int64_t w1,
                                    const void *ids, ct_dtype idt, nn_view idv, float *out, int64_t n, cudaStream_t s)
{
    if (n == 0 || D == 0) return cudaSuccess;
    embedding_kernel<<<(unsigned)n, D >= 256 ? 256 : 64, 0, s>>>(w, wdt, V, D, w0, w1, ids, idt, idv, out);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_set_rows(const void *src, ct_dtype sdt, int64_t s0, int64_t s1, const void *idx,
                                   ct_dtype idt, int64_t is, void *dst, ct_dtype ddt, int64_t d0, int64_t d1,
                                   int64_t n, int64_t cols, int64_t rows, cudaStream_t s)
{
    if (n == 0 || cols == 0) return cudaSuccess;
    set_rows_kernel<<<(unsigned)(n < 1024 ? n : 1024), 128, 0, s>>>(src, sdt, s0, s1, idx, idt, is, dst, ddt, d0, d1, n,
                                                                    cols, rows);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_pool2d(const void *x, void *y, ct_dtype dt, nn_pool p, cudaStream_t s)
{
    int64_t total = p.planes * p.Ho * p.Wo;
    if (total == 0) return cudaSuccess;
    unsigned g = grid_for(total, 256);
    if (g > 65536) g = 65536;
    /* the largest offset of any load or store, and the loop's index past the end */
    int64_t reach = (p.planes / p.C) * p.xn + p.C * p.xc + (p.H + p.kh) * p.xh + (p.W + p.kw) * p.xw;
    int64_t span = total + (int64_t)g * 256 + reach;
    if (span < INT32_MAX && p.xn >= 0 && p.xc >= 0 && p.xh >= 0 && p.xw >= 0)
        pool_kernel<int32_t><<<g, 256, 0, s>>>(x, y, dt, p);
    else
        pool_kernel<int64_t><<<g, 256, 0, s>>>(x, y, dt, p);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_linear_small(const float *x, int64_t xs, const void *w, ct_dtype wdt, int64_t w0, int64_t w1,
                                       const void *bias, ct_dtype bdt, int64_t bst, float *y, int64_t M, int64_t N,
                                       int64_t K, cudaStream_t s)
{
    if (M == 0 || N == 0) return cudaSuccess;
    if (M > LIN_MAX_M) return cudaErrorInvalidValue;
    return NN_DISPATCH(wdt, linear_small_t, x, xs, w, w0, w1, bias, bdt, bst, y, M, N, K, s);
}

extern "C" cudaError_t nn_add_bias(float *y, const void *bias, ct_dtype bdt, int64_t bst, int64_t M, int64_t N,
                                   cudaStream_t s)
{
    if (M * N == 0) return cudaSuccess;
    unsigned g = grid_for(M * N, 256);
    add_bias_kernel<<<g > 65536 ? 65536 : g, 256, 0, s>>>(y, bias, bdt, bst, M, N);
    return cudaGetLastError();
}
