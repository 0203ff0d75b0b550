/* The nn group's products through cuBLAS: MATMUL and LINEAR with f32/f16/bf16 operands. */
#ifndef CT_CUDA_NN_BLAS_H
#define CT_CUDA_NN_BLAS_H

#include "backends/cuda/cuda_internal.h"

bool nn_blas_supports(const ct_device *dev, const ct_op *op);
ct_status nn_blas_run(ct_device *dev, const ct_op *op);

#endif
