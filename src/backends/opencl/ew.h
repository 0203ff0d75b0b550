/* The ew group's shared pieces (ew.c, ew_*.c): the N-d walk handed to every kernel. */
#ifndef CT_OCL_EW_H
#define CT_OCL_EW_H

#include "backends/opencl/ocl_internal.h"

#define EW_OPS 4 /* operands of one walk: the output and up to 3 sources */

/* Mirrors ew_nd in kernels/ew.cl (passed by value): the walk's shape and each operand's
 * element strides, broadcast dims at stride 0, dims merged where every operand allows. */
typedef struct ew_nd {
    int64_t shape[CT_MAX_DIMS];
    int64_t st[EW_OPS][CT_MAX_DIMS];
    int32_t nd, contig, pad0, pad1; /* contig: 1 dense, EW_VEC4 dense and moved four at a time */
} ew_nd;
#define EW_VEC4 4 /* kernels/ew.cl's four-elements-a-work-item path */

/* The walk over `shape` for operands t[0..n) (each broadcast to shape, aligned right). */
void ew_nd_build(ew_nd *d, int ndim, const int64_t *shape, const ct_tensor *const *t, int n);

/* A tensor's buffer and byte offset on dev, or CT_ERR_DEVICE_FAULT naming the op. */
ct_status ew_mem(const ct_tensor *t, const ct_device *dev, const char *op, cl_mem *mem, cl_ulong *off);

/* Plain dtypes the kernels read and write (f64 only with cl_khr_fp64). */
bool ew_dtype_ok(const ct_device *dev, ct_dtype t);

/* ew_reduce.c: SUM MEAN PROD MAX MIN VAR STD NORM ARGMAX ARGMIN. */
bool ocl_ew_reduce_kind(ct_op_kind k);
bool ocl_ew_reduce_supports(const ct_device *dev, const ct_op *op);
ct_status ocl_ew_reduce_run(ct_device *dev, const ct_op *op);

#endif
