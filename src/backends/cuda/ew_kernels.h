/* Launchers of the CUDA ew group's kernels (ew_kernels.cu), called from ew.c with plain
 * pointers, sizes and strides. Every launcher enqueues on `s` and returns the launch
 * error (cudaSuccess when none); none blocks the host. */
#ifndef CT_CUDA_EW_KERNELS_H
#define CT_CUDA_EW_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "ctorch/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Operands of one element-wise launch (dst first), aligned to dst's shape: strides in
 * elements, 0 along broadcast dims; dims that are contiguous across every operand are
 * merged and size-1 dims dropped (ew.c), so contiguous data arrives as ndim 1. */
#define EW_MAX_OPS 4
typedef struct ew_nd {
    int ndim, n_ops;
    int64_t numel;
    int64_t shape[CT_MAX_DIMS];
    int64_t stride[EW_MAX_OPS][CT_MAX_DIMS];
} ew_nd;

/* dst[i] = v converted to dt (integers truncate, bool = v != 0). */
cudaError_t ew_launch_fill(void *dst, ct_dtype dt, const ew_nd *nd, double v, cudaStream_t s);
/* dst = src converted between any two plain dtypes (operand 0 dst, 1 src). */
cudaError_t ew_launch_copy(void *dst, ct_dtype ddt, const void *src, ct_dtype sdt, const ew_nd *nd, cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
