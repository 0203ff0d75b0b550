/* Elements of runtime dtype, for operands whose dtype is not a kernel's template type: f32,
 * f16 or bf16 values read and written as f32, i32 or i64 indices read as int64. Shared by
 * the nn kernels, the step planner's kernels and the fused decode jobs. */
#ifndef CT_CUDA_DYN_ACCESS_CUH
#define CT_CUDA_DYN_ACCESS_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "ctorch/core.h"

namespace cudyn {

__device__ __forceinline__ float ld_dyn(const void *p, int64_t i, ct_dtype dt)
{
    switch (dt) {
    case CT_F16: return __half2float(((const __half *)p)[i]);
    case CT_BF16: return __bfloat162float(((const __nv_bfloat16 *)p)[i]);
    default: return ((const float *)p)[i];
    }
}

__device__ __forceinline__ void st_dyn(void *p, int64_t i, ct_dtype dt, float v)
{
    switch (dt) {
    case CT_F16: ((__half *)p)[i] = __float2half_rn(v); break;
    case CT_BF16: ((__nv_bfloat16 *)p)[i] = __float2bfloat16_rn(v); break;
    default: ((float *)p)[i] = v; break;
    }
}

__device__ __forceinline__ int64_t ld_index(const void *p, int64_t i, ct_dtype dt)
{
    return dt == CT_I32 ? (int64_t)((const int32_t *)p)[i] : ((const int64_t *)p)[i];
}

} // namespace cudyn

#endif
