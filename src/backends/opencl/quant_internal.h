/* Shared by the quant group's files: quant.c (ops, weights' layout helpers) and
 * quant_mv1.c (the one-row decode kernels and the step planner's fused launches). */
#ifndef CT_OCL_QUANT_INTERNAL_H
#define CT_OCL_QUANT_INTERNAL_H

#include "backends/opencl/ocl_internal.h"

#define OCL_Q_PROGRAM "quant"

/* The kernel-name suffix of a block format with kernels, or NULL. */
const char *ocl_q_fmt_name(ct_dtype t);
/* Byte stride of a quantized tensor's dim d (false when it does not hold whole blocks). */
bool ocl_q_byte_stride(const ct_tensor *t, int d, cl_long *out);
/* x's leading dims fold into rows of one stride (*rs), elements *cs apart. */
bool ocl_q_x_rows(const ct_tensor *x, cl_long *rs, cl_long *cs);
/* Bias dtype code of the kernels (0 none, 1 f32, 2 f16, 3 bf16; -1 unsupported). */
int ocl_q_bias_kind(const ct_tensor *b);
/* Whether LINEAR takes the CPU-device kernels here (a work-item per weight row). */
bool ocl_q_matvec_rows(const ocl_dev_info *info);

#endif
