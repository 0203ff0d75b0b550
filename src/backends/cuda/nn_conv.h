/* The nn group's convolutions: conv2d and conv_transpose2d through im2col/col2im + cuBLAS. */
#ifndef CT_CUDA_NN_CONV_H
#define CT_CUDA_NN_CONV_H

#include "backends/cuda/cuda_internal.h"

bool nn_conv_supports(const ct_device *dev, const ct_op *op);
ct_status nn_conv_run(ct_device *dev, const ct_op *op);

#endif
