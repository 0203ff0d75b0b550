/* CPU GEMM entry points shared by the MATMUL and LINEAR kernels (linalg.c, linear.c).
 *
 * Matrices are given as a base pointer plus a row and a column stride (elements),
 * so transposed and sliced views need no copies: element (i, k) of A is
 * A[i*rsa + k*csa]. C is row-major with leading dimension ldc. With OpenBLAS
 * (CTORCH_HAVE_BLAS) f32/f64 go to sgemm/dgemm (or gemv for one row/column) when
 * the strides fit its layouts, else operands are packed first; without it the
 * built-in blocked kernels run. Larger f32 products take the built-in GEMM also
 * when OpenBLAS's kernels lack the CPU's AVX-512. */
#ifndef CT_CPU_GEMM_H
#define CT_CPU_GEMM_H

#include "backends/cpu/cpu.h"

/* C = A B (accumulate: C += A B). M, N, K may be 0 (K = 0 gives zeros / leaves C). */
static inline int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

ct_status cpu_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                       int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate);
ct_status cpu_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t rsa, int64_t csa, const double *B,
                       int64_t rsb, int64_t csb, double *C, int64_t ldc, bool accumulate);
/* Complex64 (interleaved re, im floats); strides count complex elements. */
ct_status cpu_gemm_c64(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                       int64_t rsb, int64_t csb, float *C, int64_t ldc);

/* The built-in f32 GEMM, whatever BLAS is present (tests compare both paths). */
ct_status cpu_gemm_f32_builtin(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                               const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate);
/* The built-in GEMM with B in f16 (bf16: false) or bf16, widened to f32 while its
 * panels are packed; B = w^T of a row-major weight (rsb = 1) takes a vectorized
 * transposing packer on AVX-512. B with rsb = 1 goes to cpu_gemm_amx_half where the CPU
 * has AMX-BF16, else bf16 B to cpu_gemm_bf16_dot where it has AVX512-BF16 (A rounded to
 * bf16 there). */
ct_status cpu_gemm_f32_bhalf(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                             const uint16_t *B, int64_t rsb, int64_t csb, bool bf16, float *C, int64_t ldc,
                             bool accumulate);

/* cpu_gemm_f32_bhalf without AMX (the AMX path's way out for values that are not finite). */
ct_status cpu_gemm_f32_bhalf_vec(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                                 const uint16_t *B, int64_t rsb, int64_t csb, bool bf16, float *C, int64_t ldc,
                                 bool accumulate);

/* BF16 B (rsb = 1: column j at B + j * csb) through AVX512-BF16 dot products, the
 * activations rounded to bf16 first (gemm_bf16.c); cpu_gemm_f32_bhalf takes it for bf16
 * when cpu_gemm_bf16_dot_on(). M, N, K > 0. */
ct_status cpu_gemm_bf16_dot(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                            const uint16_t *B, int64_t csb, float *C, int64_t ldc, bool accumulate);
/* F16 / BF16 B (rsb = 1) through AMX-BF16 tiles (gemm_amx.c): bf16 B with A rounded to
 * bf16, f16 B with both split into two bf16 terms (relative error near 2^-16 a product).
 * cpu_gemm_f32_bhalf takes it when cpu_gemm_amx_on(). M, N, K > 0. */
ct_status cpu_gemm_amx_half(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                            const uint16_t *B, int64_t csb, bool bf16, float *C, int64_t ldc, bool accumulate);
/* cpu_amx_usable(CPU_AMX_BF16) (core/cpuid.h) and the SIMD level is AVX-512. */
bool cpu_gemm_amx_on(void);
/* The CPU has AVX512-BF16, the SIMD level is AVX-512 and no test turned it off. */
bool cpu_gemm_bf16_dot_on(void);
/* Tests: off makes bf16 B take the f32 path at the AVX-512 level too. */
void cpu_gemm_bf16_dot_disable(bool off);

#endif
