/* The CUDA ew group's kernels. One N-d indexing scheme serves every kernel: a flat
 * output index is split over the merged dims into each operand's offset; data that is
 * contiguous everywhere (ndim <= 1 after merging) skips the split. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/ew_kernels.h"

namespace {

constexpr int kThreads = 256;

/* ---- element types and conversions (through float, double or int64) ---- */

template <class T> struct Elem;
template <> struct Elem<float> { using C = float; };
template <> struct Elem<double> { using C = double; };
template <> struct Elem<__half> { using C = float; };
template <> struct Elem<__nv_bfloat16> { using C = float; };
template <> struct Elem<int32_t> { using C = int64_t; };
template <> struct Elem<int64_t> { using C = int64_t; };
template <> struct Elem<int8_t> { using C = int64_t; };
template <> struct Elem<bool> { using C = int64_t; };

template <class T> __device__ __forceinline__ double to_f64(T v) { return (double)v; }
template <> __device__ __forceinline__ double to_f64(__half v) { return (double)__half2float(v); }
template <> __device__ __forceinline__ double to_f64(__nv_bfloat16 v) { return (double)__bfloat162float(v); }
template <> __device__ __forceinline__ double to_f64(bool v) { return v ? 1.0 : 0.0; }

template <class T> __device__ __forceinline__ T from_f64(double v) { return (T)v; }
template <> __device__ __forceinline__ float from_f64(double v) { return (float)v; }
template <> __device__ __forceinline__ __half from_f64(double v) { return __float2half_rn((float)v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f64(double v) { return __float2bfloat16_rn((float)v); }
template <> __device__ __forceinline__ bool from_f64(double v) { return v != 0.0; }

/* Conversion as the CPU does it: a float source is rounded once to the destination (f16
 * and bf16 through f32, like the CPU's cpu_store_f64(cpu_load_f64)). */
template <class D, class S> __device__ __forceinline__ D convert(S v) { return from_f64<D>(to_f64(v)); }

/* ---- indexing ---- */

struct Nd {
    ew_nd d;
    __device__ __forceinline__ void offsets(int64_t i, int64_t *off) const
    {
        for (int k = 0; k < EW_MAX_OPS; k++) off[k] = 0;
        for (int dim = d.ndim - 1; dim >= 0; dim--) {
            int64_t n = d.shape[dim], idx = i % n;
            i /= n;
            for (int k = 0; k < EW_MAX_OPS; k++) off[k] += idx * d.stride[k][dim];
        }
    }
};

inline unsigned blocks_for(int64_t n, int per_thread = 1)
{
    int64_t b = (n + (int64_t)kThreads * per_thread - 1) / ((int64_t)kThreads * per_thread);
    return (unsigned)(b < 1 ? 1 : b > 65535 * 32 ? 65535 * 32 : b);
}

#define GRID_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* ---- fill ---- */

template <class T> __global__ void k_fill(T *dst, Nd nd, T v)
{
    GRID_LOOP(i, nd.d.numel) {
        int64_t off[EW_MAX_OPS];
        nd.offsets(i, off);
        dst[off[0]] = v;
    }
}

template <class T> __global__ void k_fill_contig(T *dst, int64_t n, T v)
{
    GRID_LOOP(i, n) dst[i] = v;
}

template <class T> cudaError_t fill(void *dst, const ew_nd *nd, double v, cudaStream_t s)
{
    T tv;
    /* the value is converted on the host side of the device code: one conversion for all */
    if constexpr (std::is_same<T, __half>::value) tv = __float2half_rn((float)v);
    else if constexpr (std::is_same<T, __nv_bfloat16>::value) tv = __float2bfloat16_rn((float)v);
    else if constexpr (std::is_same<T, bool>::value) tv = v != 0.0;
    else tv = (T)v;
    if (nd->ndim <= 1 && (nd->ndim == 0 || nd->stride[0][0] == 1))
        k_fill_contig<T><<<blocks_for(nd->numel), kThreads, 0, s>>>((T *)dst, nd->numel, tv);
    else
        k_fill<T><<<blocks_for(nd->numel), kThreads, 0, s>>>((T *)dst, Nd{*nd}, tv);
    return cudaGetLastError();
}

/* ---- copy (with conversion) ---- */

template <class D, class S> __global__ void k_copy(D *dst, const S *src, Nd nd)
{
    GRID_LOOP(i, nd.d.numel) {
        int64_t off[EW_MAX_OPS];
        nd.offsets(i, off);
        dst[off[0]] = convert<D>(src[off[1]]);
    }
}

template <class D, class S> __global__ void k_copy_contig(D *dst, const S *src, int64_t n, int64_t ss)
{
    GRID_LOOP(i, n) dst[i] = convert<D>(src[i * ss]);
}

template <class D, class S> cudaError_t copy2(void *dst, const void *src, const ew_nd *nd, cudaStream_t s)
{
    if (nd->ndim <= 1 && (nd->ndim == 0 || nd->stride[0][0] == 1))
        k_copy_contig<D, S><<<blocks_for(nd->numel), kThreads, 0, s>>>((D *)dst, (const S *)src, nd->numel,
                                                                        nd->ndim ? nd->stride[1][0] : 0);
    else
        k_copy<D, S><<<blocks_for(nd->numel), kThreads, 0, s>>>((D *)dst, (const S *)src, Nd{*nd});
    return cudaGetLastError();
}

template <class D> cudaError_t copy1(void *dst, const void *src, ct_dtype sdt, const ew_nd *nd, cudaStream_t s)
{
    switch (sdt) {
    case CT_F32: return copy2<D, float>(dst, src, nd, s);
    case CT_F64: return copy2<D, double>(dst, src, nd, s);
    case CT_F16: return copy2<D, __half>(dst, src, nd, s);
    case CT_BF16: return copy2<D, __nv_bfloat16>(dst, src, nd, s);
    case CT_I32: return copy2<D, int32_t>(dst, src, nd, s);
    case CT_I64: return copy2<D, int64_t>(dst, src, nd, s);
    case CT_I8: return copy2<D, int8_t>(dst, src, nd, s);
    case CT_BOOL: return copy2<D, bool>(dst, src, nd, s);
    default: return cudaErrorInvalidValue;
    }
}

} // namespace

extern "C" cudaError_t ew_launch_fill(void *dst, ct_dtype dt, const ew_nd *nd, double v, cudaStream_t s)
{
    if (nd->numel <= 0) return cudaSuccess;
    switch (dt) {
    case CT_F32: return fill<float>(dst, nd, v, s);
    case CT_F64: return fill<double>(dst, nd, v, s);
    case CT_F16: return fill<__half>(dst, nd, v, s);
    case CT_BF16: return fill<__nv_bfloat16>(dst, nd, v, s);
    case CT_I32: return fill<int32_t>(dst, nd, v, s);
    case CT_I64: return fill<int64_t>(dst, nd, v, s);
    case CT_I8: return fill<int8_t>(dst, nd, v, s);
    case CT_BOOL: return fill<bool>(dst, nd, v, s);
    default: return cudaErrorInvalidValue;
    }
}

extern "C" cudaError_t ew_launch_copy(void *dst, ct_dtype ddt, const void *src, ct_dtype sdt, const ew_nd *nd,
                                      cudaStream_t s)
{
    if (nd->numel <= 0) return cudaSuccess;
    switch (ddt) {
    case CT_F32: return copy1<float>(dst, src, sdt, nd, s);
    case CT_F64: return copy1<double>(dst, src, sdt, nd, s);
    case CT_F16: return copy1<__half>(dst, src, sdt, nd, s);
    case CT_BF16: return copy1<__nv_bfloat16>(dst, src, sdt, nd, s);
    case CT_I32: return copy1<int32_t>(dst, src, sdt, nd, s);
    case CT_I64: return copy1<int64_t>(dst, src, sdt, nd, s);
    case CT_I8: return copy1<int8_t>(dst, src, sdt, nd, s);
    case CT_BOOL: return copy1<bool>(dst, src, sdt, nd, s);
    default: return cudaErrorInvalidValue;
    }
}
