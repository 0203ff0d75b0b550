/* The quant group's CUDA launchers (quant_kernels.cu, quant_mv.cu): plain pointers, sizes
 * and strides, so the C glue (quant.c) unpacks ct_ops and the kernels never see core
 * headers. Every launcher only enqueues on `stream`; the caller checks the launch
 * (cuda_check_launch). A launcher returns false, having launched nothing, for a
 * combination it has no kernel for (the glue's supports() refuses those first). */
#ifndef CT_CUDA_QUANT_KERNELS_H
#define CT_CUDA_QUANT_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdbool.h>
#include <stdint.h>

#include "backends/cuda/fuse_kernels.h"
#include "ctorch/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUQ_MAX_DIMS 8
/* Kernels work on chunks of 16 elements that share one scale: every block size is a multiple. */
#define CUQ_CHUNK 16
/* Rows of x up to which linear uses the matrix-vector kernels (above: dequantize + GEMM). */
#define CUQ_MV_MAX_ROWS 8

/* Which quantized formats have kernels (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K..Q6_K). */
bool cuq_format_ok(ct_dtype t);
/* Byte alignment the kernels need of a row's first block (their widest load). */
int cuq_align(ct_dtype t);

/* The rows that a dequantizing copy walks: every dim of dst but the last, with dst's
 * strides (elements) and src's (blocks; 0 where src is broadcast). */
typedef struct cuq_rows {
    int nd;
    int64_t shape[CUQ_MAX_DIMS];
    int64_t dst_stride[CUQ_MAX_DIMS];
    int64_t src_stride[CUQ_MAX_DIMS];
} cuq_rows;

/* dst rows (dtype dt: f32 f16 bf16; n elements each, dst_col elements apart) = the
 * dequantized src rows of format wt, as `rows` maps them. */
bool cuq_dequant(ct_dtype wt, const void *src, void *dst, ct_dtype dt, const cuq_rows *rows, int64_t n,
                 int64_t dst_col, cudaStream_t stream);

/* Gather: dst [n_ids, D] f32 contiguous; row i = dequantized table row ids[i] (table rows
 * w_row_blocks blocks apart, V of them). ids are i32 or i64 at the element offsets given
 * by ids_shape/ids_stride (ids_nd dims). An id outside [0, V) makes its row NaN: the
 * device cannot report it without a host sync, and a NaN row is never mistaken for data. */
bool cuq_embedding(ct_dtype wt, const void *w, int64_t w_row_blocks, int64_t V, int64_t D, const void *ids,
                   ct_dtype ids_dt, int ids_nd, const int64_t *ids_shape, const int64_t *ids_stride, int64_t n_ids,
                   float *dst, cudaStream_t stream);

/* Matrix-vector product for M <= CUQ_MV_MAX_ROWS rows of x: out [M, N] (contiguous) =
 * x [M, K] (rows x_row floats apart, 16-byte aligned, unit column stride) times w^T, w
 * being N rows of K elements w_row bytes apart. Every row is dequantized once per chunk
 * and multiplied with all M rows of x in f32. */
bool cuq_matvec(ct_dtype wt, const void *w, size_t w_row, const float *x, int64_t x_row, int64_t M, int64_t N,
                int64_t K, float *out, int sm_count, cudaStream_t stream);

/* The same product through integer dots: x is first quantized to 8 bits per 32 elements
 * (like the CPU's activations) into tmp (cuq_matvec_q8_tmp_bytes, 16-byte aligned), then
 * each chunk's quants meet x's in __dp4a. x needs unit column stride only. */
size_t cuq_matvec_q8_tmp_bytes(int64_t M, int64_t K);
bool cuq_matvec_q8(ct_dtype wt, const void *w, size_t w_row, const float *x, int64_t x_row, int64_t M, int64_t N,
                   int64_t K, void *tmp, float *out, int sm_count, cudaStream_t stream);

/* out [M, N] (rows N apart) += bias[n * stride] (dtype f32 f16 bf16 f64). */
bool cuq_add_bias(float *out, int64_t M, int64_t N, const void *bias, ct_dtype bdt, int64_t stride,
                  cudaStream_t stream);

/* dst [M, K] contiguous f32 = x, a view with `nd` dims (the last is K) of shape/stride. */
bool cuq_pack_x(const float *x, int nd, const int64_t *shape, const int64_t *stride, float *dst,
                cudaStream_t stream);

/* ---- Fused decode (the step planner's, fuse.c; kernels in quant_fused.cu) ----
 * On sm_90+ these kernels are launched with programmatic dependent launch: each lets the
 * next PDL kernel of the stream start early and waits for its own predecessor (complete,
 * writes visible) before it reads any input; only L2 prefetches of weights come before
 * that wait, so ordering is exactly the stream's. CTORCH_CUDA_PDL=0 turns it off.
 * x in "q8 form": 8-bit quants per 32 elements, as quantize_x makes them for the integer
 * dots. q [M, K] int8, d [M, K/32] f32 scales, s8 [M, K/8] f32 (scale * the sum of each
 * run of 8 quants). One allocation of cuq_q8_bytes, 16-byte aligned, carved by cuq_q8_at. */
typedef struct cuq_q8 {
    int8_t *q;
    float *d, *s8;
    int64_t M, K;
    /* d holds a scale per 8 elements ([M, K/8]), not per 32: the form a gated job writes of
     * its own output (cuq_mv_job::glu_q8), where a block holds 8 consecutive rows; only the
     * one-format Q4_K / Q6_K kernels read it (cuq_mv_ok says no elsewhere) */
    bool d8;
} cuq_q8;
size_t cuq_q8_bytes(int64_t M, int64_t K);
cuq_q8 cuq_q8_at(void *mem, int64_t M, int64_t K);
/* The same for the form with a scale per 8 elements (d8). */
size_t cuq_q8_bytes8(int64_t M, int64_t K);
cuq_q8 cuq_q8_at8(void *mem, int64_t M, int64_t K);
/* q = the q8 form of x [M, K] (rows x_row floats apart, K % 32 == 0). */
bool cuq_quantize_q8(const float *x, int64_t x_row, int64_t M, int64_t K, const cuq_q8 *q, cudaStream_t stream);
/* RMS norm of each row over its K elements, as the CPU's rms_norm (weight of dtype wdt:
 * f32 f16 bf16, K elements, unit stride): y [M, K] contiguous f32, and its q8 form in q
 * (NULL: y only). One kernel: the norm's output is quantized while it is in registers.
 * w_early: no work before it in the stream writes w, so the kernel may read w before it
 * waits for that work (PDL). */
bool cuq_rms_norm_q8(const float *x, int64_t x_row, int64_t M, int64_t K, const void *w, ct_dtype wdt, bool w_early,
                     float eps, float *y, const cuq_q8 *q, cudaStream_t stream);

/* A post-norm + residual add (fusek_norm_add_rows: na's y and z) and the RMS norm of z
 * after it (cuq_rms_norm_q8 on z: w2, y2 and z's q8 form q, NULL: y2 only) in one kernel,
 * bit for bit what the two launches make; rows of K <= CUQ_NA_Q8_MAX_K elements (false,
 * nothing launched, past that). */
#define CUQ_NA_Q8_MAX_K 2048
bool cuq_norm_add_rms_q8(const fusek_norm_add *na, const void *w2, ct_dtype w2dt, bool w2_early, float eps2, float *y2,
                         const cuq_q8 *q, cudaStream_t stream);

/* The RMS norm a job applies to each row of x before the products (as cuq_rms_norm_q8). */
typedef struct cuq_mv_norm {
    bool on;
    const void *w; /* NULL: no weight; else K elements of wdt (f32 f16 bf16), unit stride */
    ct_dtype wdt;
    float eps;
    float *y; /* optional [M, K] contiguous f32: the normed rows, written once */
    bool w_early; /* w is written by nothing before the job (read before the PDL wait) */
} cuq_mv_norm;

/* Several weights that read one x [M, K] (M <= CUQ_MV_MAX_ROWS), in one launch. With a norm,
 * or no q8 form given, each block of the kernel may make x's norm and q8 form itself in
 * shared memory (up to 48 KB, and where measured faster: quant_fused.cu); otherwise a
 * norm / quantize kernel runs first into the run's tmp. Either way the same bits. */
#define CUQ_MV_MAX_PARTS 4
typedef struct cuq_mv_part {
    ct_dtype wt;   /* a format of cuq_format_ok, or CT_F16 / CT_BF16 / CT_F32 */
    const void *w; /* N rows of K elements, w_row bytes apart (cuq_align-aligned) */
    size_t w_row;
    int64_t N;
    float *out;       /* [M, N] contiguous = x . w^T */
    const float *add; /* optional [M, N] contiguous: then also out2 = add + x . w^T */
    float *out2;      /* set iff add; may equal neither out nor add */
} cuq_mv_part;
typedef struct cuq_mv_job {
    int64_t M, K;
    const float *x; /* f32, rows x_row floats apart, unit column stride, 16-byte aligned */
    int64_t x_row;
    const cuq_q8 *xq; /* x's q8 form when the caller has it (cuq_rms_norm_q8), else NULL */
    cuq_mv_norm norm; /* on: x is the norm's input (then xq is NULL) */
    int n_parts;
    cuq_mv_part part[CUQ_MV_MAX_PARTS];
    /* Gated epilogue (n_parts == 2, equal N, no add): glu_out [M, N] contiguous =
     * act(part[0] . x) * (part[1] . x), act as the CPU's SWIGLU (1) or GEGLU (2); 0: none.
     * part[].out are still written. */
    int glu;
    float *glu_out;
    /* The decode prologue (fuse_kernels.h; NULL: none) done in the job's epilogue: M = 1,
     * no glu, normal (not neox) rotation without norms. Rope r's x is part rope_part[r]'s
     * out ([H, D] dense); a row write of a plain source reads part rows_part[w]'s out ([n,
     * cols] dense; -1 for a write of a rope's output). Only the one-format kernels (all
     * Q4_K, all Q6_K, Q4_K and Q6_K) take it: cuq_mv_ok says no to the others. */
    const fusek_prologue *rope;
    int rope_part[FUSEK_MAX_ROPE], rows_part[FUSEK_MAX_ROWS];
    /* The gated job also writes glu_out's q8 form here, with a scale per 8 elements (d8;
     * NULL: not), so that the linear after it needs no quantize_q8 launch: M = 1, N a
     * multiple of 8, on the one-format Q4_K / Q6_K kernels (cuq_mv_ok says no elsewhere). */
    const cuq_q8 *glu_q8;
} cuq_mv_job;
/* Whether cuq_mv_run has a kernel for this job (formats, M, K, alignment). */
bool cuq_mv_ok(const cuq_mv_job *job);
/* Device scratch the run needs (x's q8 form, the norm's output, where the job kernel
 * cannot make them itself). */
size_t cuq_mv_tmp_bytes(const cuq_mv_job *job);
/* The run would launch quantize_q8 on x first (no norm, no q8 form given): a producer of x
 * that can write its q8 form as well saves that launch (xq). */
bool cuq_mv_wants_q8(const cuq_mv_job *job);
/* The job runs on a one-format kernel (all Q4_K, all Q6_K, or Q4_K and Q6_K parts: M = 1, x's
 * q8 form given or made by a launch before it), whose blocks ask L2 for their rows before
 * they wait for their predecessor (quant_fused.cuh spec_job). */
bool cuq_mv_one_format(const cuq_mv_job *job);
/* The run would make the norm in a kernel of its own first (not staged in the job's
 * blocks), and *q8 whether that kernel would also write x's q8 form: a kernel that can make
 * both (cuq_norm_add_rms_q8) may stand in for it, the job then run with norm off, x the
 * norm's y and xq that q8 form. */
bool cuq_mv_norm_apart(const cuq_mv_job *job, bool *q8);
/* Every part's products (and epilogues), reading each weight byte once. */
bool cuq_mv_run(const cuq_mv_job *job, void *tmp, int sm_count, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
