/* x to f16 for the quantized prefill GEMM (quant_prefill.cu; used by quant.c). */
#ifndef CT_CUDA_QUANT_PREFILL_H
#define CT_CUDA_QUANT_PREFILL_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Device scratch of cuq_x_to_f16 for x [M, K] (16-byte aligned). */
size_t cuq_x_f16_bytes(int64_t M, int64_t K);
/* *xh = x / s as f16 [M, K] contiguous (x's rows x_row floats apart), s a power of two
 * making every finite |x / s| <= 2^14 (1 when it already is); *alpha_beta = {s, 0} on the
 * device, for a GEMM in device pointer mode. Both point into tmp. Enqueue only. */
cudaError_t cuq_x_to_f16(const float *x, int64_t x_row, int64_t M, int64_t K, void *tmp, void **xh,
                         float **alpha_beta, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
