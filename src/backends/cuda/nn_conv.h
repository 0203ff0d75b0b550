/* The nn group's convolutions: conv2d and conv_transpose2d through cuDNN where it is
 * loaded, else im2col/col2im + cuBLAS. */
#ifndef CT_CUDA_NN_CONV_H
#define CT_CUDA_NN_CONV_H

#include "backends/cuda/cuda_internal.h"

bool nn_conv_supports(const ct_device *dev, const ct_op *op);
ct_status nn_conv_run(ct_device *dev, const ct_op *op);

/* nn_cudnn.c. Runs a supported conv through cuDNN and sets *done; leaves *done false (CT_OK)
 * where cuDNN is not loaded, turned off, or declines the shape; an error only where cuDNN
 * failed on the device. */
ct_status nn_cudnn_conv(ct_device *dev, const ct_op *op, bool *done);
/* cuDNN's version as loaded (e.g. 91900), 0 when it is not. */
size_t nn_cudnn_version(void);
/* How convs use cuDNN: not at all (im2col + cuBLAS; CTORCH_CUDNN=0, which also leaves the
 * library unopened, so no later mode brings it in), its heuristic picks (CTORCH_CUDNN_FIND=0),
 * or its measured picks (the default). Tests switch between them. */
enum { NN_CUDNN_OFF, NN_CUDNN_HEURISTIC, NN_CUDNN_MEASURE };
void nn_cudnn_mode(int mode);
/* The device's cuDNN handle, if one was made (backend.c, at release). */
void nn_cudnn_release(cuda_dev *d);

#endif
