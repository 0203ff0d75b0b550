/* The `out` forms: each is the ordinary frontend run through the generic path of
 * frontend.c (ops_out_begin / ops_out_end), which makes it write into the caller's
 * tensor. `ew` marks element-wise ops, whose out may be exactly one of their inputs. */
#include "ops/frontend.h"

#define OUT_FN(fn, kind, ew, params, call, ...)                                                    \
    ct_status fn##_out params                                                                      \
    {                                                                                              \
        const ct_tensor *ins_[] = {__VA_ARGS__};                                                   \
        ops_out_req r_;                                                                            \
        ct_status s_ = ops_out_begin(&r_, #fn "_out", kind, out, ins_, (int)(sizeof ins_ / sizeof ins_[0]), ew); \
        if (s_ != CT_OK) return s_;                                                                \
        ct_tensor *res_ = NULL;                                                                    \
        s_ = call;                                                                                 \
        return ops_out_end(&r_, s_, res_);                                                         \
    }

#define BINARY_OUT(fn, kind) \
    OUT_FN(fn, kind, true, (const ct_tensor *a, const ct_tensor *b, ct_tensor *out), fn(a, b, &res_), a, b)
#define SCALAR_OUT(fn, kind) \
    OUT_FN(fn, kind, true, (const ct_tensor *a, double s, ct_tensor *out), fn(a, s, &res_), a)
#define UNARY_OUT(fn, kind) OUT_FN(fn, kind, true, (const ct_tensor *a, ct_tensor *out), fn(a, &res_), a)

BINARY_OUT(ct_add, CT_OP_ADD)
BINARY_OUT(ct_sub, CT_OP_SUB)
BINARY_OUT(ct_mul, CT_OP_MUL)
BINARY_OUT(ct_div, CT_OP_DIV)
BINARY_OUT(ct_pow, CT_OP_POW)
BINARY_OUT(ct_maximum, CT_OP_MAXIMUM)
BINARY_OUT(ct_minimum, CT_OP_MINIMUM)
OUT_FN(ct_compare, CT_OP_CMP, true, (const ct_tensor *a, const ct_tensor *b, ct_cmp cmp, ct_tensor *out),
       ct_compare(a, b, cmp, &res_), a, b)
OUT_FN(ct_where, CT_OP_WHERE, true, (const ct_tensor *cond, const ct_tensor *a, const ct_tensor *b, ct_tensor *out),
       ct_where(cond, a, b, &res_), cond, a, b)

SCALAR_OUT(ct_add_scalar, CT_OP_ADD_SCALAR)
SCALAR_OUT(ct_sub_scalar, CT_OP_SUB_SCALAR)
SCALAR_OUT(ct_mul_scalar, CT_OP_MUL_SCALAR)
SCALAR_OUT(ct_div_scalar, CT_OP_DIV_SCALAR)
SCALAR_OUT(ct_pow_scalar, CT_OP_POW_SCALAR)

UNARY_OUT(ct_neg, CT_OP_NEG)
UNARY_OUT(ct_abs, CT_OP_ABS)
UNARY_OUT(ct_exp, CT_OP_EXP)
UNARY_OUT(ct_log, CT_OP_LOG)
UNARY_OUT(ct_sqrt, CT_OP_SQRT)
UNARY_OUT(ct_rsqrt, CT_OP_RSQRT)
UNARY_OUT(ct_sin, CT_OP_SIN)
UNARY_OUT(ct_cos, CT_OP_COS)
UNARY_OUT(ct_relu, CT_OP_RELU)
UNARY_OUT(ct_silu, CT_OP_SILU)
UNARY_OUT(ct_sigmoid, CT_OP_SIGMOID)
UNARY_OUT(ct_tanh, CT_OP_TANH)
OUT_FN(ct_clamp, CT_OP_CLAMP, true, (const ct_tensor *a, double lo, double hi, ct_tensor *out),
       ct_clamp(a, lo, hi, &res_), a)
OUT_FN(ct_gelu, CT_OP_GELU, true, (const ct_tensor *a, bool approximate, ct_tensor *out),
       ct_gelu(a, approximate, &res_), a)
BINARY_OUT(ct_swiglu, CT_OP_SWIGLU)
BINARY_OUT(ct_geglu, CT_OP_GEGLU)

OUT_FN(ct_softmax, CT_OP_SOFTMAX, false, (const ct_tensor *a, int dim, ct_tensor *out), ct_softmax(a, dim, &res_), a)
OUT_FN(ct_log_softmax, CT_OP_LOG_SOFTMAX, false, (const ct_tensor *a, int dim, ct_tensor *out),
       ct_log_softmax(a, dim, &res_), a)
OUT_FN(ct_matmul, CT_OP_MATMUL, false, (const ct_tensor *a, const ct_tensor *b, ct_tensor *out),
       ct_matmul(a, b, &res_), a, b)
OUT_FN(ct_linear, CT_OP_LINEAR, false,
       (const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, ct_tensor *out), ct_linear(x, w, bias, &res_), x,
       w, bias)
OUT_FN(ct_sum, CT_OP_SUM, false, (const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor *out),
       ct_sum(a, dims, ndims, keepdim, &res_), a)
OUT_FN(ct_mean, CT_OP_MEAN, false, (const ct_tensor *a, const int *dims, int ndims, bool keepdim, ct_tensor *out),
       ct_mean(a, dims, ndims, keepdim, &res_), a)
OUT_FN(ct_rms_norm, CT_OP_RMS_NORM, false, (const ct_tensor *x, const ct_tensor *weight, double eps, ct_tensor *out),
       ct_rms_norm(x, weight, eps, &res_), x, weight)
OUT_FN(ct_layer_norm, CT_OP_LAYER_NORM, false,
       (const ct_tensor *x, int norm_ndim, const ct_tensor *weight, const ct_tensor *bias, double eps, ct_tensor *out),
       ct_layer_norm(x, norm_ndim, weight, bias, eps, &res_), x, weight, bias)
OUT_FN(ct_embedding, CT_OP_EMBEDDING, false, (const ct_tensor *weight, const ct_tensor *ids, ct_tensor *out),
       ct_embedding(weight, ids, &res_), weight, ids)
OUT_FN(ct_rope, CT_OP_ROPE, false,
       (const ct_tensor *x, const ct_tensor *positions, const ct_rope_params *p, ct_tensor *out),
       ct_rope(x, positions, p, &res_), x, positions)
OUT_FN(ct_sdpa, CT_OP_SDPA, false,
       (const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask, const ct_sdpa_params *p,
        ct_tensor *out),
       ct_sdpa(q, k, v, mask, p, &res_), q, k, v, mask, p ? p->length : NULL)
