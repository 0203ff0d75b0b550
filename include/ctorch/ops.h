/* ctorch operations. Each builds an op record, checks shapes and dtypes (errors
 * here are never retried), and hands it to the hybrid executor, which picks the
 * device. Binary ops broadcast like PyTorch; inputs of different dtypes are
 * promoted (bool < int < f16/bf16 < f32 < f64 < c64). */
#ifndef CTORCH_OPS_H
#define CTORCH_OPS_H

#include "ctorch/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- element-wise, binary ---- */
CT_API ct_status ct_add(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_sub(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_mul(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_div(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_pow(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_maximum(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_minimum(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
/* Scalar forms: a OP s. */
CT_API ct_status ct_add_scalar(const ct_tensor *a, double s, ct_tensor **out);
CT_API ct_status ct_sub_scalar(const ct_tensor *a, double s, ct_tensor **out);
CT_API ct_status ct_mul_scalar(const ct_tensor *a, double s, ct_tensor **out);
CT_API ct_status ct_div_scalar(const ct_tensor *a, double s, ct_tensor **out);
CT_API ct_status ct_pow_scalar(const ct_tensor *a, double s, ct_tensor **out);

/* ---- comparisons: result is CT_BOOL ---- */
typedef enum ct_cmp { CT_CMP_EQ, CT_CMP_NE, CT_CMP_LT, CT_CMP_LE, CT_CMP_GT, CT_CMP_GE } ct_cmp;
CT_API ct_status ct_compare(const ct_tensor *a, const ct_tensor *b, ct_cmp cmp, ct_tensor **out);
CT_API ct_status ct_compare_scalar(const ct_tensor *a, ct_cmp cmp, double s, ct_tensor **out);
CT_API ct_status ct_eq(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_ne(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_lt(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_le(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_gt(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_ge(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
/* cond (bool) ? a : b, all three broadcast together. */
CT_API ct_status ct_where(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b, ct_tensor **out);

/* ---- element-wise, unary ---- */
CT_API ct_status ct_neg(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_abs(const ct_tensor *a, ct_tensor **out); /* c64 -> f32 magnitude */
CT_API ct_status ct_exp(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_log(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_sqrt(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_rsqrt(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_sin(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_cos(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_clamp(const ct_tensor *a, double lo, double hi, ct_tensor **out);

/* ---- activations ---- */
CT_API ct_status ct_relu(const ct_tensor *a, ct_tensor **out);
/* approximate=false: x*Phi(x) with erf; true: the tanh form. */
CT_API ct_status ct_gelu(const ct_tensor *a, bool approximate, ct_tensor **out);
CT_API ct_status ct_silu(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_sigmoid(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_tanh(const ct_tensor *a, ct_tensor **out);
CT_API ct_status ct_softmax(const ct_tensor *a, int dim, ct_tensor **out);
CT_API ct_status ct_log_softmax(const ct_tensor *a, int dim, ct_tensor **out);
/* Fused gated units for LLM FFNs: silu(gate)*up and gelu_tanh(gate)*up. */
CT_API ct_status ct_swiglu(const ct_tensor *gate, const ct_tensor *up, ct_tensor **out);
CT_API ct_status ct_geglu(const ct_tensor *gate, const ct_tensor *up, ct_tensor **out);

/* ---- linear algebra ---- */
/* torch.matmul semantics: 1-D and 2-D operands, batch dims broadcast. If a is a
 * quantized 2-D weight [M, K], b must be f32 [K, N] (or [K]). */
CT_API ct_status ct_matmul(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
CT_API ct_status ct_matvec(const ct_tensor *a, const ct_tensor *x, ct_tensor **out);
CT_API ct_status ct_outer(const ct_tensor *a, const ct_tensor *b, ct_tensor **out);
/* y = x @ w^T + bias: x [..., K] f32, w [N, K] in any float or quantized dtype,
 * bias [N] or NULL. The LLM projection op. */
CT_API ct_status ct_linear(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, ct_tensor **out);

/* ---- reductions: dims = NULL / ndims = 0 reduces every dim ---- */
CT_API ct_status ct_sum(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out);
CT_API ct_status ct_mean(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out);
CT_API ct_status ct_prod(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out);
CT_API ct_status ct_max(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out);
CT_API ct_status ct_min(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor **out);
CT_API ct_status ct_var(const ct_tensor *a, const int *dims, int ndims, bool unbiased, bool keepdim,
                        ct_tensor **out);
CT_API ct_status ct_std(const ct_tensor *a, const int *dims, int ndims, bool unbiased, bool keepdim,
                        ct_tensor **out);
/* p-norm (p > 0; INFINITY for max-abs). */
CT_API ct_status ct_norm(const ct_tensor *a, double p, const int *dims, int ndims, bool keepdim,
                         ct_tensor **out);
/* Index (CT_I64) of the max/min along dim; dim = CT_ALL_DIMS gives the flat index.
 * Ties pick the lowest index. */
CT_API ct_status ct_argmax(const ct_tensor *a, int dim, bool keepdim, ct_tensor **out);
CT_API ct_status ct_argmin(const ct_tensor *a, int dim, bool keepdim, ct_tensor **out);

/* ---- neural-network ---- */
typedef struct ct_conv2d_params {
    int stride[2];         /* default {1,1} when zero */
    int padding[2];
    int dilation[2];       /* default {1,1} when zero */
    int groups;            /* default 1 when zero */
    int output_padding[2]; /* conv_transpose2d only */
} ct_conv2d_params;
/* x [N, C, H, W], w [O, C/groups, kH, kW], bias [O] or NULL; params NULL = defaults.
 * Products are summed in f32 (f64 when x or w is f64) and the result has the promoted
 * dtype of x and w: f16/bf16 operands of one type give that type (an f32 bias beside them
 * is not rounded to half first; cuDNN rounds the sum before the bias is added). */
CT_API ct_status ct_conv2d(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                           const ct_conv2d_params *params, ct_tensor **out);
/* x [N, C, H, W], w [C, O/groups, kH, kW]; dtypes as ct_conv2d. */
CT_API ct_status ct_conv_transpose2d(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                                     const ct_conv2d_params *params, ct_tensor **out);
typedef struct ct_pool2d_params {
    int kernel[2];
    int stride[2];  /* default = kernel when zero */
    int padding[2];
    bool count_include_pad; /* avg_pool2d */
} ct_pool2d_params;
CT_API ct_status ct_max_pool2d(const ct_tensor *x, const ct_pool2d_params *p, ct_tensor **out);
CT_API ct_status ct_avg_pool2d(const ct_tensor *x, const ct_pool2d_params *p, ct_tensor **out);
/* Inference: x [N, C, ...] with running mean/var [C]; weight/bias [C] or NULL. */
CT_API ct_status ct_batch_norm(const ct_tensor *x, const ct_tensor *mean, const ct_tensor *var,
                               const ct_tensor *weight, const ct_tensor *bias, double eps, ct_tensor **out);
/* Normalizes over the last `norm_ndim` dims; weight/bias of that shape or NULL. */
CT_API ct_status ct_layer_norm(const ct_tensor *x, int norm_ndim, const ct_tensor *weight,
                               const ct_tensor *bias, double eps, ct_tensor **out);
/* x / sqrt(mean(x^2, last dim) + eps) * weight; weight [D] or NULL. */
CT_API ct_status ct_rms_norm(const ct_tensor *x, const ct_tensor *weight, double eps, ct_tensor **out);
/* Rows of weight [V, D] (any float or quantized dtype) picked by ids (i32/i64): out [..., D] f32. */
CT_API ct_status ct_embedding(const ct_tensor *weight, const ct_tensor *ids, ct_tensor **out);

typedef enum ct_rope_mode {
    CT_ROPE_NORMAL = 0, /* rotate adjacent pairs (2i, 2i+1): llama in GGUF layout */
    CT_ROPE_NEOX = 1    /* rotate (i, i + n_dims/2): gemma, neox */
} ct_rope_mode;
typedef struct ct_rope_params {
    int n_dims;         /* rotated dims per head (<= head_dim, even) */
    double freq_base;   /* theta_i = pos * freq_scale * base^(-2i/n_dims) */
    double freq_scale;  /* 1 = none; linear scaling uses 1/factor */
    ct_rope_mode mode;
} ct_rope_params;
/* x [..., T, H, D], positions [T] (i32/i64). */
CT_API ct_status ct_rope(const ct_tensor *x, const ct_tensor *positions, const ct_rope_params *p,
                         ct_tensor **out);

typedef struct ct_sdpa_params {
    bool causal;    /* query i (of Tq) sees keys j <= i + (Tk - Tq) */
    double scale;   /* 0 = 1/sqrt(D) */
    int window;     /* > 0: query also ignores keys more than window-1 positions back (sliding window) */
    /* Optional [1] i32/i64 tensor L: attend to the first L of the Tk keys only (causal and
     * window count from L as if Tk were L), read when the op runs, so one recorded step
     * serves every decode position over a preallocated KV cache. L outside [0, Tk] is
     * CT_ERR_RANGE. */
    const ct_tensor *length;
} ct_sdpa_params;
/* q [B, Hq, Tq, D], k [B, Hkv, Tk, D], v [B, Hkv, Tk, Dv], Hq % Hkv == 0 (grouped-query);
 * mask (additive, broadcast to [B, Hq, Tq, Tk]) or NULL. out [B, Hq, Tq, Dv]. */
CT_API ct_status ct_sdpa(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask,
                         const ct_sdpa_params *p, ct_tensor **out);

/* ---- complex64 ---- */
CT_API ct_status ct_complex(const ct_tensor *re, const ct_tensor *im, ct_tensor **out);
CT_API ct_status ct_real(const ct_tensor *z, ct_tensor **out);
CT_API ct_status ct_imag(const ct_tensor *z, ct_tensor **out);
CT_API ct_status ct_conj(const ct_tensor *z, ct_tensor **out);

/* ---- `out` forms: write the result into the caller's tensor (torch's out=) ----
 * ct_X_out(args..., out) computes what ct_X(args..., &r) would and writes it into `out`,
 * so buffers can be kept between calls (and a recorded step writes the same buffer each
 * replay). `out` must have the result's shape and dtype exactly (CT_ERR_SHAPE /
 * CT_ERR_DTYPE naming the op otherwise; it is never resized). It may be a strided view:
 * its elements are written in place and the rest of its storage is untouched. It may
 * overlap an input only for element-wise ops and only as exactly that input's view (the
 * in-place form, e.g. ct_add_out(a, b, a)); any other overlap is CT_ERR_INVALID_ARG. The op
 * runs where routing says; out's storage is written on that device (its other copies
 * become stale in the bytes written). On error, out keeps its values. */
CT_API ct_status ct_add_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_sub_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_mul_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_div_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_pow_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_maximum_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_minimum_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_compare_out(const ct_tensor *a, const ct_tensor *b, ct_cmp cmp, ct_tensor *out);
CT_API ct_status ct_where_out(const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_add_scalar_out(const ct_tensor *a, double s, ct_tensor *out);
CT_API ct_status ct_sub_scalar_out(const ct_tensor *a, double s, ct_tensor *out);
CT_API ct_status ct_mul_scalar_out(const ct_tensor *a, double s, ct_tensor *out);
CT_API ct_status ct_div_scalar_out(const ct_tensor *a, double s, ct_tensor *out);
CT_API ct_status ct_pow_scalar_out(const ct_tensor *a, double s, ct_tensor *out);
CT_API ct_status ct_neg_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_abs_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_exp_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_log_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_sqrt_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_rsqrt_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_sin_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_cos_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_relu_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_silu_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_sigmoid_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_tanh_out(const ct_tensor *a, ct_tensor *out);
CT_API ct_status ct_clamp_out(const ct_tensor *a, double lo, double hi, ct_tensor *out);
CT_API ct_status ct_gelu_out(const ct_tensor *a, bool approximate, ct_tensor *out);
CT_API ct_status ct_swiglu_out(const ct_tensor *gate, const ct_tensor *up, ct_tensor *out);
CT_API ct_status ct_geglu_out(const ct_tensor *gate, const ct_tensor *up, ct_tensor *out);
CT_API ct_status ct_softmax_out(const ct_tensor *a, int dim, ct_tensor *out);
CT_API ct_status ct_log_softmax_out(const ct_tensor *a, int dim, ct_tensor *out);
CT_API ct_status ct_matmul_out(const ct_tensor *a, const ct_tensor *b, ct_tensor *out);
CT_API ct_status ct_linear_out(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, ct_tensor *out);
CT_API ct_status ct_sum_out(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor *out);
CT_API ct_status ct_mean_out(const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor *out);
CT_API ct_status ct_rms_norm_out(const ct_tensor *x, const ct_tensor *weight, double eps, ct_tensor *out);
CT_API ct_status ct_layer_norm_out(const ct_tensor *x, int norm_ndim, const ct_tensor *weight, const ct_tensor *bias,
                                   double eps, ct_tensor *out);
CT_API ct_status ct_embedding_out(const ct_tensor *weight, const ct_tensor *ids, ct_tensor *out);
CT_API ct_status ct_rope_out(const ct_tensor *x, const ct_tensor *positions, const ct_rope_params *p, ct_tensor *out);
CT_API ct_status ct_sdpa_out(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask,
                             const ct_sdpa_params *p, ct_tensor *out);

/* ---- distributed ---- */
typedef enum ct_reduce_op { CT_REDUCE_SUM, CT_REDUCE_PROD, CT_REDUCE_MAX, CT_REDUCE_MIN, CT_REDUCE_AVG } ct_reduce_op;
/* In place across the process group. In a single process the tensor is left unchanged. */
CT_API ct_status ct_all_reduce(ct_tensor *t, ct_reduce_op op);

#ifdef __cplusplus
}
#endif
#endif
