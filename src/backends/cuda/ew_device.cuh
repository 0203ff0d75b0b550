/* Device-side helpers shared by the ew group's kernels (ew_kernels.cu, ew_reduce.cu):
 * element types and their compute types, conversions as the CPU does them, and the one
 * N-d indexing scheme. */
#ifndef CT_CUDA_EW_DEVICE_CUH
#define CT_CUDA_EW_DEVICE_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "backends/cuda/ew_kernels.h"

namespace ew {

constexpr int kThreads = 256;

/* complex64 as copies see it: the real part converts to and from plain dtypes */
struct alignas(8) C64 {
    float re, im;
};

/* Compute type of each element type: f16/bf16 compute in float (as the CPU's kernels),
 * integers and bool in int64. */
template <class T> struct Elem { using C = T; };
template <> struct Elem<__half> { using C = float; };
template <> struct Elem<__nv_bfloat16> { using C = float; };
template <> struct Elem<int32_t> { using C = int64_t; };
template <> struct Elem<int8_t> { using C = int64_t; };
template <> struct Elem<bool> { using C = int64_t; };
template <> struct Elem<C64> { using C = float; };
template <class T> using C_t = typename Elem<T>::C;

template <class T> __device__ __forceinline__ C_t<T> ld(T v) { return (C_t<T>)v; }
template <> __device__ __forceinline__ float ld(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float ld(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> __device__ __forceinline__ int64_t ld(bool v) { return v ? 1 : 0; }
template <> __device__ __forceinline__ float ld(C64 v) { return v.re; }

/* A compute value stored as T: floats round to nearest, integers keep the low bits (as
 * the CPU's ew_store_i), float to integer truncates, bool is v != 0. */
template <class T, class C> __device__ __forceinline__ T st(C v)
{
    if constexpr (std::is_same<T, __half>::value) return __float2half_rn((float)v);
    else if constexpr (std::is_same<T, __nv_bfloat16>::value) return __float2bfloat16_rn((float)v);
    else if constexpr (std::is_same<T, bool>::value) return v != (C)0;
    else if constexpr (std::is_same<T, C64>::value) return C64{(float)v, 0.0f};
    else if constexpr (std::is_integral<T>::value && std::is_integral<C>::value)
        return (T)(std::make_unsigned_t<T>)(uint64_t)v;
    else return (T)v;
}

/* Offsets of every operand of the flat output index i. */
struct Nd {
    ew_nd d;
    __device__ __forceinline__ void offsets(int64_t i, int64_t *off) const
    {
#pragma unroll
        for (int k = 0; k < EW_MAX_OPS; k++) off[k] = 0;
        for (int dim = d.ndim - 1; dim >= 0; dim--) {
            int64_t n = d.shape[dim], idx = i % n;
            i /= n;
#pragma unroll
            for (int k = 0; k < EW_MAX_OPS; k++) off[k] += idx * d.stride[k][dim];
        }
    }
};

/* dst contiguous after merging (the flat path). */
inline bool flat_dst(const ew_nd *nd) { return nd->ndim == 0 || (nd->ndim == 1 && nd->stride[0][0] == 1); }
inline int64_t flat_stride(const ew_nd *nd, int k) { return nd->ndim ? nd->stride[k][0] : 0; }

inline unsigned blocks_for(int64_t n, int per_thread = 1)
{
    int64_t b = (n + (int64_t)kThreads * per_thread - 1) / ((int64_t)kThreads * per_thread);
    return (unsigned)(b < 1 ? 1 : b > 65535 * 64 ? 65535 * 64 : b);
}

inline bool aligned(const void *p, size_t a) { return ((uintptr_t)p % a) == 0; }

} // namespace ew

#define EW_GRID_LOOP(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* Calls BODY with T bound to the element type of dtype dt (plain dtypes). */
#define EW_DISPATCH(dt, ...)                                                                                           \
    switch (dt) {                                                                                                      \
    case CT_F32: { using T = float; __VA_ARGS__; }                                                                            \
    case CT_F64: { using T = double; __VA_ARGS__; }                                                                           \
    case CT_F16: { using T = __half; __VA_ARGS__; }                                                                           \
    case CT_BF16: { using T = __nv_bfloat16; __VA_ARGS__; }                                                                   \
    case CT_I32: { using T = int32_t; __VA_ARGS__; }                                                                          \
    case CT_I64: { using T = int64_t; __VA_ARGS__; }                                                                          \
    case CT_I8: { using T = int8_t; __VA_ARGS__; }                                                                            \
    case CT_BOOL: { using T = bool; __VA_ARGS__; }                                                                            \
    default: return cudaErrorInvalidValue;                                                                             \
    }

#endif
