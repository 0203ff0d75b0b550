/* Shared by the nn group's files (nn.c: dispatch and the row ops; nn_linalg.c: matmul and
 * linear; nn_attention.c: sdpa). Kernels: kernels/nn.cl (program "nn") and
 * kernels/attention.cl (program "attention"). */
#ifndef CT_OCL_NN_INTERNAL_H
#define CT_OCL_NN_INTERNAL_H

#include "backends/opencl/ocl_internal.h"

/* Element type codes of the kernels (NN_F32/NN_F16/NN_BF16 in nn.cl); -1: not one of them. */
int nn_dt(ct_dtype t);
/* A tensor's buffer on dev and the byte offset of its first element; CT_ERR_DEVICE_FAULT
 * naming the op when the executor left no copy there (a contract breach, never a crash). */
ct_status nn_mem(const ct_tensor *t, const ct_device *dev, const char *what, cl_mem *mem, cl_ulong *off);
/* n <= 8 dims right-aligned into long8 shape/stride (leading dims: shape 1, stride 0). */
void nn_nd(cl_long8 *sh, cl_long8 *sd, int n, const int64_t *shape, const int64_t *stride);
/* The largest power of two <= cap that dev accepts as a work-group size. */
size_t nn_wg(const ct_device *dev, size_t cap);
/* Looks up program/kernel, sets args and enqueues. */
ct_status nn_launch(ct_device *dev, const char *program, const char *name, int n_args, const ocl_arg *args,
                    cl_uint dims, const size_t *global, const size_t *local);
static inline size_t nn_round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }
/* Work-items per row of the reducing kernels (softmax, norms, nn_norm_add). */
#define NN_ROW_WG 128

/* The device bytes [lo, hi) a tensor's elements can touch (strides not negative; not for
 * quantized tensors), for the step planner's overlap tests (nn_pair.c, nn_head.c). */
typedef struct nn_span {
    cl_mem m;
    cl_ulong lo, hi;
} nn_span;
bool nn_span_of(const ct_tensor *t, const ct_device *dev, nn_span *s);
static inline bool nn_overlap(const nn_span *a, const nn_span *b)
{
    return a->m == b->m && a->lo < b->hi && b->lo < a->hi;
}
static inline bool nn_same_span(const nn_span *a, const nn_span *b)
{
    return a->m == b->m && a->lo == b->lo && a->hi == b->hi;
}
/* Gemma 3's per-head norms, rotations and cache rows of a decode step as one launch
 * (nn_head.c): the ops it covered (6), or 0. */
int nn_head_norm_rope(ct_device *dev, const ct_op *ops, int n);

/* A product C[r, n] = sum_k A[r, k] B[batch(r), k, n] (+ bias[n]) as nn_gemm reads it. */
typedef struct nn_gemm_desc {
    const ct_tensor *a, *b, *bias, *c;
    cl_long M, N, K, batches;
    cl_long8 ash, ast, bsh, bst; /* rows of A (batch dims and M); batch dims of B */
    cl_long sak, sbk, sbn;
} nn_gemm_desc;

/* nn_clblast.c: CLBlast's SGEMM where it is loaded and takes the layout (*done), else
 * nothing (*done false: the own kernel runs). */
ct_status nn_clblast_gemm(ct_device *dev, const nn_gemm_desc *g, bool *done);
bool nn_clblast_available(void);
/* Tests: off makes every product use the own kernels (on by default). */
void nn_clblast_enable(bool on);
/* Tests: the kernel variants meant for GPUs on any device (so a CPU-only machine checks them). */
void nn_force_gpu_kernels(bool on);
/* Whether to pick the CPU-device variant of a kernel for dev. */
bool nn_cpu_style(const ct_device *dev);

bool nn_linalg_supports(const ct_device *dev, const ct_op *op);
ct_status nn_linalg_run(ct_device *dev, const ct_op *op);
bool nn_attention_supports(const ct_device *dev, const ct_op *op);
ct_status nn_attention_run(ct_device *dev, const ct_op *op);

/* Rope and set_rows arguments (nn.c) for their own launches and for nn_pair.c's paired
 * ones: r holds the values, a[] points into r; *work = work-items the op needs. */
#define NN_ROPE_NARGS 23
typedef struct nn_rope_a {
    cl_mem xm, ym, pm;
    cl_ulong xo, yo, po;
    cl_long8 rsh, rxs, rys;
    cl_long xs, ys, ps, T, H, D, half, rows;
    cl_int p64, neox, dtx, dty;
    cl_float2 base, scale;
} nn_rope_a;
ct_status nn_rope_prepare(ct_device *dev, const ct_op *op, nn_rope_a *r, ocl_arg *a, cl_long *work);
#define NN_SET_ROWS_NARGS 17
typedef struct nn_set_rows_a {
    cl_mem sm, im, dm;
    cl_ulong so, io, dof;
    cl_long ss0, ss1, is0, ds0, ds1, R, C, total;
    cl_int i64, dts, dtd;
} nn_set_rows_a;
ct_status nn_set_rows_prepare(ct_device *dev, const ct_op *op, nn_set_rows_a *r, ocl_arg *a, cl_long *work);

#endif
