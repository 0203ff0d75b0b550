/* Launchers of the CUDA nn group's kernels (nn_kernels.cu, attention.cu), called by the C
 * glue (nn.c, nn_blas.c). Plain pointers, sizes and element strides only: no core headers
 * beyond ct_dtype. Every launcher returns the launch's cudaError_t (cudaGetLastError). Float
 * operands are f32, f16 or bf16 (ct_dtype); indices i32 or i64. */
#ifndef CT_CUDA_NN_KERNELS_H
#define CT_CUDA_NN_KERNELS_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "ctorch/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NN_MAX_DIMS 8

/* The rows of a row-wise op: the dims other than the one a row runs along, with each
 * operand's element strides over them (operand 0 is usually dst, 1 the input). */
typedef struct nn_rows {
    int nd;
    int64_t shape[NN_MAX_DIMS];
    int64_t st[3][NN_MAX_DIMS];
} nn_rows;

/* An n-D strided view, for gathers and element-wise walks. */
typedef struct nn_view {
    int nd;
    int64_t shape[NN_MAX_DIMS];
    int64_t st[NN_MAX_DIMS];
} nn_view;

/* Copies view `src` (dtype sdt) into dense row-major dst (dtype ddt). */
cudaError_t nn_gather(const void *src, ct_dtype sdt, nn_view v, void *dst, ct_dtype ddt, cudaStream_t s);

/* softmax / log_softmax of n_rows rows of n elements (element strides xs, ys along a row). */
cudaError_t nn_softmax(const void *x, void *y, ct_dtype dt, nn_rows rows, int64_t n_rows, int64_t n, int64_t xs,
                       int64_t ys, int log, size_t smem_max, cudaStream_t s);

/* rms_norm (b == NULL, kind 0) or layer_norm (kind 1) of rows of n elements; weight/bias
 * dense vectors of n (or NULL) of their own dtypes. */
cudaError_t nn_norm(int kind, const void *x, void *y, ct_dtype dt, nn_rows rows, int64_t n_rows, int64_t n, int64_t xs,
                    int64_t ys, const void *w, ct_dtype wdt, int64_t ws, const void *b, ct_dtype bdt, double eps,
                    size_t smem_max, cudaStream_t s);

/* batch_norm: x and y views of the same shape, channel = dim 1; params per channel (or NULL). */
cudaError_t nn_batch_norm(const void *x, ct_dtype xdt, nn_view xv, void *y, ct_dtype ydt, nn_view yv,
                          const void *const prm[4], const ct_dtype pdt[4], const int64_t pst[4], double eps,
                          cudaStream_t s);

/* RoPE over rows (..., t, h) of D elements: rows.st[0] dst, st[1] x; T, H the extents of
 * the last two row dims; positions pos (pdt, stride ps) of length T. */
cudaError_t nn_rope(const void *x, ct_dtype xdt, void *y, ct_dtype ydt, nn_rows rows, int64_t n_rows, int64_t T,
                    int64_t H, int64_t D, int64_t xs, int64_t ys, const void *pos, ct_dtype pdt, int64_t ps,
                    int n_dims, double freq_base, double freq_scale, int neox, cudaStream_t s);

/* embedding: n ids (view idv of dtype idt) pick rows of w [V, D] (strides w0, w1) into
 * dense f32 out [n, D]. A row whose id is outside [0, V) is written as NaN. */
cudaError_t nn_embedding(const void *w, ct_dtype wdt, int64_t V, int64_t D, int64_t w0, int64_t w1, const void *ids,
                         ct_dtype idt, nn_view idv, float *out, int64_t n, cudaStream_t s);

/* set_rows: rows of src [n, cols] written to dst rows idx[i]. If any index is outside
 * [0, rows) nothing is written (as on the CPU, which reports it). */
cudaError_t nn_set_rows(const void *src, ct_dtype sdt, int64_t s0, int64_t s1, const void *idx, ct_dtype idt,
                        int64_t is, void *dst, ct_dtype ddt, int64_t d0, int64_t d1, int64_t n, int64_t cols,
                        int64_t rows, cudaStream_t s);

/* max/avg pool2d: planes of x (plane p = (n, c): offset (p / C) * xn + (p % C) * xc),
 * dense y [planes, Ho, Wo]. */
typedef struct nn_pool {
    int64_t planes, C, xn, xc, xh, xw, H, W, Ho, Wo;
    int kh, kw, sh, sw, ph, pw;
    int is_max, count_include_pad;
} nn_pool;
cudaError_t nn_pool2d(const void *x, void *y, ct_dtype dt, nn_pool p, cudaStream_t s);

/* y[m, n] = sum_k x[m, k] w[n, k] (+ bias[n]) for small m: f32 x (row stride xs, unit
 * element stride), w of wdt (strides w0, w1), f32 accumulation, dense f32 y [m, N]. */
cudaError_t nn_linear_small(const float *x, int64_t xs, const void *w, ct_dtype wdt, int64_t w0, int64_t w1,
                            const void *bias, ct_dtype bdt, int64_t bst, float *y, int64_t M, int64_t N, int64_t K,
                            cudaStream_t s);
/* y[m, n] += bias[n] over dense f32 y [M, N]. */
cudaError_t nn_add_bias(float *y, const void *bias, ct_dtype bdt, int64_t bst, int64_t M, int64_t N, cudaStream_t s);

/* ---- convolution (nn_conv.cu): f32 columns, one image n at a time ---- */
typedef struct nn_conv {
    int64_t N, C, H, W, O, Ho, Wo, kh, kw, G, Cg, Og;
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t xs[4]; /* input strides (elements) */
} nn_conv;
/* col [G][Cg*kh*kw][Ho*Wo] of image n of x (conv2d). */
cudaError_t nn_im2col(const float *x, const nn_conv *c, int64_t n, float *col, cudaStream_t s);
/* y (image n, dense [O][Ho][Wo]) from cols [G][Og*kh*kw][H*W] (conv_transpose2d). */
cudaError_t nn_col2im(const float *cols, const nn_conv *c, float *y, cudaStream_t s);
/* y[n, o, :] += bias[o * bst] over dense y [N, O, P] (f32 sum, one rounding to ydt). */
cudaError_t nn_conv_bias(void *y, ct_dtype ydt, const void *bias, ct_dtype bdt, int64_t bst, int64_t N, int64_t O,
                         int64_t P, cudaStream_t s);

/* ---- attention (attention.cu) ---- */
typedef struct nn_sdpa {
    const float *q;           /* [B, Hq, Tq, D], unit stride along D */
    const void *k, *v;        /* [B, Hkv, Tk, D|Dv] f32 or f16, unit stride along D */
    const float *mask;        /* f32 [B, Hq, Tq, Tk] (strides ms) or NULL */
    const void *len;          /* [1] i32/i64 attended length or NULL */
    float *out;               /* dense [B, Hq, Tq, Dv] */
    float *part;              /* n_split > 1: n_split * B*Hq*Tq * (Dv rounded up to 4, + 2) floats
                               * of partials, laid out by each kernel */
    unsigned *count;          /* n_split > 1: B*Hkv counters, zero before the launch (the decode
                               * kernel leaves them zero again), or NULL */
    int64_t qs[4], ks[4], vs[4], ms[4];
    ct_dtype kdt, vdt, ldt;
    int64_t B, Hq, Hkv, Tq, Tk, D, Dv;
    float scale;
    int causal;
    int64_t window;
    int n_split;              /* key segments (each block one), merged by the last block or a second kernel */
    /* out's q8 form as well (quant_kernels.h cuq_q8, one row per batch of Hq * Dv elements),
     * or NULL: only where nn_sdpa_q8_ok, so that the decode step's o projection needs no
     * quantize_q8 launch of its own */
    int8_t *oq;
    float *od, *os8;
    /* The tensor-core decode kernel lets the next kernel of the stream launch at once (PDL):
     * set by the step planner where that kernel is a job whose blocks gain from starting
     * early (attention_dec_tc.cu, dt_launch). */
    bool early_next;
} nn_sdpa;
#define NN_SDPA_MAX_SPLIT 64
#define NN_SDPA_DEC_MAX_SPLIT 256 /* the decode kernel's segments (attention_dec.cu) */
#define NN_SDPA_TC_MIN_TQ 32 /* prefill on tensor cores from this many query positions */
/* nn_sdpa_run picks, in order: prefill on tensor cores (attention_tc.cu) when
 * nn_sdpa_tc_ok (f16 operands, n_split ignored); decode (attention_dec.cu) when
 * nn_sdpa_dec_ok, k and v of one dtype and (n_split == 1 or count is set); else the
 * general f32 kernel (attention.cu), whose n_split > 1 is merged by a second kernel. */
int nn_sdpa_tc_ok(int64_t Tq, int64_t D, int64_t Dv);
int nn_sdpa_dec_ok(int64_t Hq, int64_t Hkv, int64_t Tq, int64_t D, int64_t Dv);
/* The split count nn_sdpa_run wants for a (a->n_split ignored): from the shape and Tk only. */
int nn_sdpa_plan(const nn_sdpa *a, int sm_count);
/* nn_sdpa_run takes the tensor-core decode kernel for a (its count set when n_split > 1),
 * which also writes out's q8 form. */
int nn_sdpa_q8_ok(const nn_sdpa *a);
cudaError_t nn_sdpa_tc_run(const nn_sdpa *a, cudaStream_t s);
cudaError_t nn_sdpa_dec_run(const nn_sdpa *a, cudaStream_t s);
/* The decode kernels' split count for a (attention_dec.h: tensor cores where they apply): Tk's only. */
int nn_sdpa_dec_splits(const nn_sdpa *a, int sm_count);
/* Shared memory one attention block needs for head dims D, Dv (bytes). */
size_t nn_sdpa_smem(int64_t D, int64_t Dv);
/* How many key segments to use for this shape on a device with sm_count SMs. */
int nn_sdpa_splits(int64_t B, int64_t Hq, int64_t Hkv, int64_t Tq, int64_t Tk, int sm_count);
cudaError_t nn_sdpa_run(const nn_sdpa *a, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
