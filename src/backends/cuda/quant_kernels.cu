/* Dequantizing kernels of the quant group: copies to f32/f16/bf16 (any strides), embedding
 * rows gathered from a quantized table, and the small helpers of linear (bias, packing x).
 * One thread per 16-element chunk; the chunk functions are in quant_deq.cuh. */
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "backends/cuda/quant_deq.cuh"
#include "backends/cuda/quant_kernels.h"

namespace {

template <typename T> __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_f32<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

/* The 16 values of a chunk into dst (col = element stride), vector stores when dense f32. */
template <typename T>
__device__ __forceinline__ void store_chunk(T *dst, int64_t col, int ea, int eb, const float *v)
{
    if constexpr (sizeof(T) == 4) {
        if (col == 1 && ((uintptr_t)(dst + ea) & 15) == 0 && ((uintptr_t)(dst + eb) & 15) == 0) {
            float4 *a = (float4 *)(dst + ea), *b = (float4 *)(dst + eb);
            a[0] = make_float4(v[0], v[1], v[2], v[3]);
            a[1] = make_float4(v[4], v[5], v[6], v[7]);
            b[0] = make_float4(v[8], v[9], v[10], v[11]);
            b[1] = make_float4(v[12], v[13], v[14], v[15]);
            return;
        }
    }
#pragma unroll
    for (int i = 0; i < 8; i++) {
        dst[(ea + i) * col] = from_f32<T>(v[i]);
        dst[(eb + i) * col] = from_f32<T>(v[8 + i]);
    }
}

template <class F, typename T>
__global__ void deq_kernel(const uint8_t *__restrict__ src, T *__restrict__ dst, cuq_rows rows, int64_t n,
                           int64_t col, int64_t total)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    int64_t cpr = n / CUQ_CHUNK, r = t / cpr, c = t % cpr;
    int64_t so = 0, d_o = 0;
    for (int d = rows.nd - 1; d >= 0; d--) {
        int64_t i = r % rows.shape[d];
        r /= rows.shape[d];
        so += i * rows.src_stride[d];
        d_o += i * rows.dst_stride[d];
    }
    float v[16];
    int ea, eb;
    cuq::deq_chunk<F>(src + so * F::BYTES, (int)c, v, ea, eb);
    store_chunk<T>(dst + d_o, col, ea, eb, v);
}

template <class F>
__global__ void emb_kernel(const uint8_t *__restrict__ w, int64_t w_row_blocks, int64_t V, int64_t D,
                           const void *__restrict__ ids, int ids64, cuq_rows idmap, float *__restrict__ dst, int64_t total)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    int64_t cpr = D / CUQ_CHUNK, r = t / cpr, c = t % cpr, rr = r, off = 0;
    for (int d = idmap.nd - 1; d >= 0; d--) {
        off += (rr % idmap.shape[d]) * idmap.src_stride[d];
        rr /= idmap.shape[d];
    }
    int64_t id = ids64 ? ((const int64_t *)ids)[off] : (int64_t)((const int32_t *)ids)[off];
    float *out = dst + r * D;
    if (id < 0 || id >= V) {
        for (int i = 0; i < CUQ_CHUNK; i++) out[c * CUQ_CHUNK + i] = __int_as_float(0x7fc00000);
        return;
    }
    float v[16];
    int ea, eb;
    cuq::deq_chunk<F>(w + id * w_row_blocks * F::BYTES, (int)c, v, ea, eb);
    store_chunk<float>(out, 1, ea, eb, v);
}

__device__ __forceinline__ float load_any(const void *p, int64_t i, ct_dtype t)
{
    switch (t) {
    case CT_F16: return __half2float(((const __half *)p)[i]);
    case CT_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    case CT_F64: return (float)((const double *)p)[i];
    default: return ((const float *)p)[i];
    }
}

__global__ void bias_kernel(float *out, int64_t M, int64_t N, const void *bias, ct_dtype bdt, int64_t stride)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= M * N) return;
    out[t] += load_any(bias, (t % N) * stride, bdt);
}

__global__ void pack_kernel(const float *x, cuq_rows map, int64_t K, int64_t xcol, float *dst, int64_t total)
{
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= total) return;
    int64_t r = t / K, k = t % K, off = 0;
    for (int d = map.nd - 1; d >= 0; d--) {
        off += (r % map.shape[d]) * map.src_stride[d];
        r /= map.shape[d];
    }
    dst[t] = x[off + k * xcol];
}

constexpr int THREADS = 256;

unsigned blocks_for(int64_t total) { return (unsigned)((total + THREADS - 1) / THREADS); }

template <class F>
bool deq_typed(const void *src, void *dst, ct_dtype dt, const cuq_rows *rows, int64_t n, int64_t col,
               cudaStream_t s)
{
    int64_t nrows = 1;
    for (int d = 0; d < rows->nd; d++) nrows *= rows->shape[d];
    int64_t total = nrows * (n / CUQ_CHUNK);
    if (total == 0) return true;
    const uint8_t *p = (const uint8_t *)src;
    switch (dt) {
    case CT_F32: deq_kernel<F, float><<<blocks_for(total), THREADS, 0, s>>>(p, (float *)dst, *rows, n, col, total); break;
    case CT_F16: deq_kernel<F, __half><<<blocks_for(total), THREADS, 0, s>>>(p, (__half *)dst, *rows, n, col, total); break;
    case CT_BF16:
        deq_kernel<F, __nv_bfloat16><<<blocks_for(total), THREADS, 0, s>>>(p, (__nv_bfloat16 *)dst, *rows, n, col, total);
        break;
    default: return false;
    }
    return true;
}

template <class F>
bool emb_typed(const void *w, int64_t w_row_blocks, int64_t V, int64_t D, const void *ids, int ids64,
               const cuq_rows &map, float *dst, int64_t total, cudaStream_t s)
{
    emb_kernel<F><<<blocks_for(total), THREADS, 0, s>>>((const uint8_t *)w, w_row_blocks, V, D, ids, ids64, map, dst,
                                                        total);
    return true;
}

} // namespace

extern "C" bool cuq_format_ok(ct_dtype t)
{
    CUQ_DISPATCH(t, return true, return false);
    return false;
}

extern "C" int cuq_align(ct_dtype t)
{
    switch (t) {
    case CT_Q4_K: case CT_Q5_K: return 16;
    case CT_Q4_1: case CT_Q5_1: case CT_Q2_K: return 4;
    default: return 2;
    }
}

extern "C" bool cuq_dequant(ct_dtype wt, const void *src, void *dst, ct_dtype dt, const cuq_rows *rows, int64_t n,
                            int64_t dst_col, cudaStream_t stream)
{
    CUQ_DISPATCH(wt, return deq_typed<F>(src, dst, dt, rows, n, dst_col, stream), return false);
    return false;
}

extern "C" bool cuq_embedding(ct_dtype wt, const void *w, int64_t w_row_blocks, int64_t V, int64_t D, const void *ids,
                              ct_dtype ids_dt, int ids_nd, const int64_t *ids_shape, const int64_t *ids_stride,
                              int64_t n_ids, float *dst, cudaStream_t stream)
{
    if ((ids_dt != CT_I32 && ids_dt != CT_I64) || ids_nd > CUQ_MAX_DIMS) return false;
    cuq_rows map = {};
    map.nd = ids_nd;
    for (int d = 0; d < ids_nd; d++) {
        map.shape[d] = ids_shape[d];
        map.src_stride[d] = ids_stride[d];
    }
    int64_t total = n_ids * (D / CUQ_CHUNK);
    if (total == 0) return cuq_format_ok(wt);
    CUQ_DISPATCH(wt, return emb_typed<F>(w, w_row_blocks, V, D, ids, ids_dt == CT_I64, map, dst, total, stream),
                 return false);
    return false;
}

extern "C" bool cuq_add_bias(float *out, int64_t M, int64_t N, const void *bias, ct_dtype bdt, int64_t stride,
                             cudaStream_t stream)
{
    if (bdt != CT_F32 && bdt != CT_F16 && bdt != CT_BF16 && bdt != CT_F64) return false;
    if (M * N == 0) return true;
    bias_kernel<<<blocks_for(M * N), THREADS, 0, stream>>>(out, M, N, bias, bdt, stride);
    return true;
}

extern "C" bool cuq_pack_x(const float *x, int nd, const int64_t *shape, const int64_t *stride, float *dst,
                           cudaStream_t stream)
{
    if (nd < 1 || nd > CUQ_MAX_DIMS) return false;
    cuq_rows map = {};
    map.nd = nd - 1;
    int64_t total = shape[nd - 1];
    for (int d = 0; d < nd - 1; d++) {
        map.shape[d] = shape[d];
        map.src_stride[d] = stride[d];
        total *= shape[d];
    }
    if (total == 0) return true;
    pack_kernel<<<blocks_for(total), THREADS, 0, stream>>>(x, map, shape[nd - 1], stride[nd - 1], dst, total);
    return true;
}
