/* The two decode attention kernels behind nn_sdpa_dec_run / nn_sdpa_dec_splits (nn_kernels.h):
 * the tensor-core one (attention_dec_tc.cu: f16 caches, D = Dv = 64 or 128, at most 8 query
 * heads per KV head, 16-byte aligned rows) where it applies, else the SIMT one
 * (attention_dec.cu: every shape nn_sdpa_dec_ok takes). Each entry point is callable
 * directly, so that bench/cuda_nn_dec.c times both on the same data. */
#ifndef CTORCH_CUDA_ATTENTION_DEC_H
#define CTORCH_CUDA_ATTENTION_DEC_H

#include "backends/cuda/nn_kernels.h"

#ifdef __cplusplus
extern "C" {
#endif

int nn_sdpa_dec_tc_ok(const nn_sdpa *a);
int nn_sdpa_dec_tc_splits(const nn_sdpa *a, int sm_count);
cudaError_t nn_sdpa_dec_tc_run(const nn_sdpa *a, cudaStream_t s);

int nn_sdpa_dec_simt_splits(int64_t B, int64_t Hkv, int64_t Tk, int64_t D, int64_t Dv, int64_t G, int sm_count);
cudaError_t nn_sdpa_dec_simt_run(const nn_sdpa *a, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
