/* Launchers of the CUDA ew group's kernels (ew_kernels.cu, ew_reduce.cu), called from
 * ew.c with plain pointers, sizes and strides. Every launcher enqueues on `s` and returns
 * the launch error (cudaSuccess when none); none blocks the host or allocates. */
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

/* Element-wise functions (the CPU's semantics: src/backends/cpu/elementwise.h). */
typedef enum ew_code {
    EW_ADD, EW_SUB, EW_MUL, EW_DIV, EW_POW, EW_MAX, EW_MIN,                  /* binary, scalar */
    EW_NEG, EW_ABS, EW_EXP, EW_LOG, EW_SQRT, EW_RSQRT, EW_SIN, EW_COS, EW_CLAMP, /* unary */
    EW_RELU, EW_GELU, EW_GELU_TANH, EW_SILU, EW_SIGMOID, EW_TANH,
    EW_SWIGLU, EW_GEGLU                                                       /* act(a) * b */
} ew_code;

/* Comparisons (ct_cmp's order). */
typedef enum ew_cmp { EW_EQ, EW_NE, EW_LT, EW_LE, EW_GT, EW_GE } ew_cmp;

/* ---- creation: dst (operand 0) gets the value of its flat index i ---- */
cudaError_t ew_launch_fill(void *dst, ct_dtype dt, const ew_nd *nd, double v, cudaStream_t s);
/* start + i * step */
cudaError_t ew_launch_arange(void *dst, ct_dtype dt, const ew_nd *nd, double start, double step, cudaStream_t s);
/* 1 where i / cols == i % cols */
cudaError_t ew_launch_eye(void *dst, ct_dtype dt, const ew_nd *nd, int64_t cols, cudaStream_t s);
/* Philox4x32-10 of (seed, i), as src/core/rng.c: uniform in [0, 1) (clamped below 1 for
 * f16/bf16) or normal (Box-Muller). */
cudaError_t ew_launch_rand(void *dst, ct_dtype dt, const ew_nd *nd, uint64_t seed, bool normal, cudaStream_t s);

/* ---- copies and maps (operand 0 dst, then the sources) ---- */
/* dst = src converted between plain dtypes; c64 to c64, and plain to c64 (imaginary 0). */
cudaError_t ew_launch_copy(void *dst, ct_dtype ddt, const void *src, ct_dtype sdt, const ew_nd *nd, cudaStream_t s);
/* dst = a OP b (binary codes, or SWIGLU/GEGLU: act(a) * b); dst, a, b of dtype dt. */
cudaError_t ew_launch_binary(ew_code op, ct_dtype dt, void *dst, const void *a, const void *b, const ew_nd *nd,
                             cudaStream_t s);
/* dst = a OP scalar (binary codes). */
cudaError_t ew_launch_scalar(ew_code op, ct_dtype dt, void *dst, const void *a, double scalar, const ew_nd *nd,
                             cudaStream_t s);
/* dst = f(a) (unary codes; p0, p1: clamp bounds). */
cudaError_t ew_launch_unary(ew_code op, ct_dtype dt, void *dst, const void *a, double p0, double p1, const ew_nd *nd,
                            cudaStream_t s);
/* dst (bool) = a CMP b, or a CMP scalar when b is NULL. int_path: integers compared as
 * int64 (scalar_i the scalar then); otherwise as double (scalar_d). */
cudaError_t ew_launch_cmp(ew_cmp op, ct_dtype dt, void *dst, const void *a, const void *b, bool int_path,
                          int64_t scalar_i, double scalar_d, const ew_nd *nd, cudaStream_t s);
/* dst = cond ? a : b, elements of esize bytes (1, 2, 4, 8). */
cudaError_t ew_launch_where(size_t esize, void *dst, const void *cond, const void *a, const void *b, const ew_nd *nd,
                            cudaStream_t s);

/* ---- complex64 (float pairs) ---- */
typedef enum ew_cplx {
    EW_C_MAKE,  /* dst c64 = (a f32, b f32) */
    EW_C_REAL, EW_C_IMAG, EW_C_ABS, /* dst f32 from a c64 */
    EW_C_CONJ, EW_C_NEG,            /* dst c64 from a c64 */
    EW_C_ADD, EW_C_SUB, EW_C_MUL, EW_C_DIV /* dst c64 = a OP b, or a OP real scalar when b is NULL */
} ew_cplx;
cudaError_t ew_launch_complex(ew_cplx op, void *dst, const void *a, const void *b, double scalar, const ew_nd *nd,
                              cudaStream_t s);

/* ---- reductions ----
 * src split into kept dims (dst's row-major order; dst contiguous) and reduced dims,
 * each merged where contiguous. Floating sources accumulate in double; integer sums and
 * products wrap in 64 bits, extremes compare as int64 (exact_int). NaN propagates
 * through max/min; argmax/argmin take the first NaN, ties the lowest index. */
typedef enum ew_red { EW_R_SUM, EW_R_MEAN, EW_R_PROD, EW_R_MAX, EW_R_MIN, EW_R_VAR, EW_R_STD, EW_R_NORM,
                      EW_R_ARGMAX, EW_R_ARGMIN } ew_red;
typedef struct ew_red_plan {
    ew_red op;
    ct_dtype st, dt;
    bool exact_int, unbiased;
    double p; /* NORM */
    int nk, nr;
    int64_t kshape[CT_MAX_DIMS], kstride[CT_MAX_DIMS];
    int64_t rshape[CT_MAX_DIMS], rstride[CT_MAX_DIMS];
    int64_t nout, nred;
} ew_red_plan;
/* Bytes of the temporary ew_launch_reduce needs (0: none) on a device of sm_count SMs. */
size_t ew_reduce_tmp_bytes(const ew_red_plan *p, int sm_count);
cudaError_t ew_launch_reduce(const ew_red_plan *p, void *dst, const void *src, void *tmp, int sm_count,
                             cudaStream_t s);

#ifdef __cplusplus
}
#endif
#endif
