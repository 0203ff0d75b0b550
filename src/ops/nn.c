/* Neural-network op frontends: conv2d, conv_transpose2d, pooling, the norms and
 * embedding. Shapes, dtypes and parameters are checked here; kernels trust them. */
#include <limits.h>
#include <math.h>

#include "ops/frontend.h"

static ct_status require_float(const char *opname, const char *what, const ct_tensor *t)
{
    if (!ct_dtype_is_float(t->dtype))
        return core_err(CT_ERR_DTYPE, "%s: %s must be f32/f64/f16/bf16, got %s %s", opname, what,
                        ct_dtype_name(t->dtype), SHAPE_STR(t));
    return CT_OK;
}

/* A 1-D parameter tensor (per channel / per feature) of length n, or NULL. */
static ct_status check_vec(const char *opname, const char *what, const ct_tensor *t, int64_t n)
{
    if (!t) return CT_OK;
    ct_status s = require_float(opname, what, t);
    if (s != CT_OK) return s;
    if (t->ndim != 1 || t->shape[0] != n)
        return core_err(CT_ERR_SHAPE, "%s: %s has shape %s, expected [%lld]", opname, what, SHAPE_STR(t), (long long)n);
    return CT_OK;
}

static void free_all(ct_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) ct_tensor_free(ts[i]);
}

/* ---- convolution ---- */

static ct_status conv_params(const char *opname, const ct_conv2d_params *in, bool transposed, ct_conv2d_params *p)
{
    *p = in ? *in : (ct_conv2d_params){0};
    for (int i = 0; i < 2; i++) {
        if (p->stride[i] == 0) p->stride[i] = 1;
        if (p->dilation[i] == 0) p->dilation[i] = 1;
        if (p->stride[i] < 0 || p->dilation[i] < 0 || p->padding[i] < 0 || p->output_padding[i] < 0)
            return core_err(CT_ERR_INVALID_ARG,
                            "%s: stride (%d, %d), padding (%d, %d), dilation (%d, %d) and output_padding (%d, %d) must not be negative",
                            opname, p->stride[0], p->stride[1], p->padding[0], p->padding[1], p->dilation[0],
                            p->dilation[1], p->output_padding[0], p->output_padding[1]);
        if (!transposed && p->output_padding[i] != 0)
            return core_err(CT_ERR_INVALID_ARG, "%s: output_padding is only for conv_transpose2d", opname);
        if (transposed && p->output_padding[i] >= p->stride[i] && p->output_padding[i] >= p->dilation[i])
            return core_err(CT_ERR_INVALID_ARG,
                            "%s: output_padding %d (dim %d) must be smaller than the stride (%d) or the dilation (%d)",
                            opname, p->output_padding[i], i, p->stride[i], p->dilation[i]);
    }
    if (p->groups == 0) p->groups = 1;
    if (p->groups < 0) return core_err(CT_ERR_INVALID_ARG, "%s: groups must be positive, got %d", opname, p->groups);
    return CT_OK;
}

/* Common checks for conv2d / conv_transpose2d: ranks, dtypes, sizes that fit the
 * int-sized GEMM interface. Returns the compute dtype in *cd. */
static ct_status conv_common(const char *opname, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                             ct_tensor **out, ct_dtype *cd)
{
    OPS_CHECK(opname, x);
    OPS_CHECK(opname, w);
    OPS_CHECK_OUT(opname, out);
    ct_status s = require_float(opname, "input", x);
    if (s == CT_OK) s = require_float(opname, "weight", w);
    if (s == CT_OK && bias) s = require_float(opname, "bias", bias);
    if (s != CT_OK) return s;
    if (x->ndim != 4 || w->ndim != 4)
        return core_err(CT_ERR_SHAPE, "%s: input %s and weight %s must both be 4-D ([N, C, H, W] and [*, *, kH, kW])",
                        opname, SHAPE_STR(x), SHAPE_STR(w));
    for (int i = 0; i < 4; i++)
        if (x->shape[i] > INT_MAX / 4 || w->shape[i] > INT_MAX / 4 || x->shape[2] * x->shape[3] > INT_MAX / 4)
            return core_err(CT_ERR_SHAPE, "%s: input %s or weight %s is too large", opname, SHAPE_STR(x), SHAPE_STR(w));
    if (w->shape[2] < 1 || w->shape[3] < 1)
        return core_err(CT_ERR_SHAPE, "%s: weight %s has an empty kernel", opname, SHAPE_STR(w));
    /* Half operands of one type stay half (a backend sums in f32 and rounds the result, as
     * the casts around an f32 op would, except that cuDNN rounds before adding a bias; its
     * tensor cores take them as they are); any other mix computes in f32, or f64 when either
     * operand is f64. */
    if (x->dtype == w->dtype && (x->dtype == CT_F16 || x->dtype == CT_BF16)) *cd = x->dtype;
    else *cd = ops_promote(x->dtype, w->dtype) == CT_F64 ? CT_F64 : CT_F32;
    return CT_OK;
}

/* The bias's dtype for compute dtype cd: cd itself, or f32 beside half operands (an f32
 * bias is not rounded to half before it is added). */
static ct_dtype conv_bias_dtype(ct_dtype cd, ct_dtype bias)
{
    if (cd != CT_F16 && cd != CT_BF16) return cd;
    return bias == cd ? cd : CT_F32;
}

/* Casts the operands to the compute dtype (the bias to conv_bias_dtype), makes the weight (and for transposed
 * conv the input) contiguous, runs the op and casts the result to out_dt. */
static ct_status conv_run(ct_op_kind kind, const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                          const ct_conv2d_params *p, ct_dtype cd, ct_dtype out_dt, const int64_t *oshape,
                          ct_tensor **out)
{
    ct_tensor *tmp[6] = {0};
    const ct_tensor *xu, *wu, *bu = NULL;
    ct_status s = ops_as_dtype(x, cd, &tmp[0], &xu);
    if (s == CT_OK) s = ops_as_dtype(w, cd, &tmp[1], &wu);
    if (s == CT_OK && bias) s = ops_as_dtype(bias, conv_bias_dtype(cd, bias->dtype), &tmp[2], &bu);
    if (s == CT_OK) s = ct_contiguous(wu, &tmp[3]);
    if (s == CT_OK) wu = tmp[3];
    if (s == CT_OK && kind == CT_OP_CONV_TRANSPOSE2D) {
        s = ct_contiguous(xu, &tmp[4]);
        xu = tmp[4];
    }
    ct_op op = {.kind = kind, .n_src = 3, .src = {xu, wu, bu}, .p.conv = *p};
    ct_tensor *res = NULL;
    if (s == CT_OK) s = ops_new_dst(4, oshape, cd, &op);
    if (s == CT_OK) s = ops_submit(&op, &res);
    if (s == CT_OK && out_dt != cd) {
        tmp[5] = res;
        s = ct_cast(res, out_dt, &res);
    }
    free_all(tmp, 6);
    if (s == CT_OK) *out = res;
    return s;
}

ct_status ct_conv2d(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, const ct_conv2d_params *params,
                    ct_tensor **out)
{
    const char *name = "ct_conv2d";
    ct_dtype cd;
    ct_status s = conv_common(name, x, w, bias, out, &cd);
    ct_conv2d_params p;
    if (s == CT_OK) s = conv_params(name, params, false, &p);
    if (s != CT_OK) return s;
    int64_t C = x->shape[1], O = w->shape[0];
    if (C % p.groups != 0 || O % p.groups != 0)
        return core_err(CT_ERR_SHAPE, "%s: groups %d must divide the input channels %lld and output channels %lld (input %s, weight %s)",
                        name, p.groups, (long long)C, (long long)O, SHAPE_STR(x), SHAPE_STR(w));
    if (w->shape[1] * p.groups != C)
        return core_err(CT_ERR_SHAPE, "%s: weight %s expects %lld input channels (x groups %d), input %s has %lld", name,
                        SHAPE_STR(w), (long long)w->shape[1] * p.groups, p.groups, SHAPE_STR(x), (long long)C);
    s = check_vec(name, "bias", bias, O);
    if (s != CT_OK) return s;
    int64_t oshape[4] = {x->shape[0], O, 0, 0};
    for (int i = 0; i < 2; i++) {
        int64_t in = x->shape[2 + i] + 2 * (int64_t)p.padding[i];
        int64_t span = (int64_t)p.dilation[i] * (w->shape[2 + i] - 1) + 1;
        if (in < span)
            return core_err(CT_ERR_SHAPE, "%s: kernel extent %lld (dilation %d) is larger than the padded input %lld (input %s, weight %s, dim %d)",
                            name, (long long)span, p.dilation[i], (long long)in, SHAPE_STR(x), SHAPE_STR(w), 2 + i);
        oshape[2 + i] = (in - span) / p.stride[i] + 1;
    }
    return conv_run(CT_OP_CONV2D, x, w, bias, &p, cd, ops_promote(x->dtype, w->dtype), oshape, out);
}

ct_status ct_conv_transpose2d(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias,
                              const ct_conv2d_params *params, ct_tensor **out)
{
    const char *name = "ct_conv_transpose2d";
    ct_dtype cd;
    ct_status s = conv_common(name, x, w, bias, out, &cd);
    ct_conv2d_params p;
    if (s == CT_OK) s = conv_params(name, params, true, &p);
    if (s != CT_OK) return s;
    int64_t C = x->shape[1];
    if (w->shape[0] != C)
        return core_err(CT_ERR_SHAPE, "%s: weight %s must have %lld rows (the input channels of %s)", name,
                        SHAPE_STR(w), (long long)C, SHAPE_STR(x));
    if (C % p.groups != 0)
        return core_err(CT_ERR_SHAPE, "%s: groups %d must divide the input channels %lld (input %s)", name, p.groups,
                        (long long)C, SHAPE_STR(x));
    int64_t O = w->shape[1] * p.groups;
    s = check_vec(name, "bias", bias, O);
    if (s != CT_OK) return s;
    int64_t oshape[4] = {x->shape[0], O, 0, 0};
    for (int i = 0; i < 2; i++) {
        int64_t o = (x->shape[2 + i] - 1) * p.stride[i] - 2 * (int64_t)p.padding[i] +
                    (int64_t)p.dilation[i] * (w->shape[2 + i] - 1) + p.output_padding[i] + 1;
        if (o < 1 || o > INT_MAX / 4)
            return core_err(CT_ERR_SHAPE, "%s: output size %lld on dim %d is not valid (input %s, weight %s, padding %d)",
                            name, (long long)o, 2 + i, SHAPE_STR(x), SHAPE_STR(w), p.padding[i]);
        oshape[2 + i] = o;
    }
    return conv_run(CT_OP_CONV_TRANSPOSE2D, x, w, bias, &p, cd, ops_promote(x->dtype, w->dtype), oshape, out);
}

/* ---- pooling ---- */

static ct_status pool2d(const char *name, ct_op_kind kind, const ct_tensor *x, const ct_pool2d_params *pin,
                        ct_tensor **out)
{
    OPS_CHECK(name, x);
    OPS_CHECK_OUT(name, out);
    if (!pin) return core_err(CT_ERR_INVALID_ARG, "%s: params is NULL (the kernel size is required)", name);
    ct_status s = require_float(name, "input", x);
    if (s != CT_OK) return s;
    if (x->ndim != 3 && x->ndim != 4)
        return core_err(CT_ERR_SHAPE, "%s: input %s must be [N, C, H, W] or [C, H, W]", name, SHAPE_STR(x));
    ct_pool2d_params p = *pin;
    int64_t oshape[4];
    for (int i = 0; i < x->ndim - 2; i++) oshape[i] = x->shape[i];
    for (int i = 0; i < 2; i++) {
        if (p.stride[i] == 0) p.stride[i] = p.kernel[i];
        if (p.kernel[i] < 1 || p.stride[i] < 1 || p.padding[i] < 0)
            return core_err(CT_ERR_INVALID_ARG, "%s: kernel (%d, %d) and stride (%d, %d) must be positive, padding (%d, %d) not negative",
                            name, p.kernel[0], p.kernel[1], p.stride[0], p.stride[1], p.padding[0], p.padding[1]);
        if (p.padding[i] > p.kernel[i] / 2)
            return core_err(CT_ERR_INVALID_ARG, "%s: padding %d on dim %d must be at most half the kernel size %d", name,
                            p.padding[i], i, p.kernel[i]);
        int64_t in = x->shape[x->ndim - 2 + i] + 2 * (int64_t)p.padding[i];
        if (in < p.kernel[i])
            return core_err(CT_ERR_SHAPE, "%s: kernel %d is larger than the padded input %lld (input %s, dim %d)", name,
                            p.kernel[i], (long long)in, SHAPE_STR(x), x->ndim - 2 + i);
        oshape[x->ndim - 2 + i] = (in - p.kernel[i]) / p.stride[i] + 1;
    }
    ct_op op = {.kind = kind, .n_src = 1, .src = {x}, .p.pool = p};
    s = ops_new_dst(x->ndim, oshape, x->dtype, &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

ct_status ct_max_pool2d(const ct_tensor *x, const ct_pool2d_params *p, ct_tensor **out)
{
    return pool2d("ct_max_pool2d", CT_OP_MAX_POOL2D, x, p, out);
}

ct_status ct_avg_pool2d(const ct_tensor *x, const ct_pool2d_params *p, ct_tensor **out)
{
    return pool2d("ct_avg_pool2d", CT_OP_AVG_POOL2D, x, p, out);
}

/* ---- normalization ---- */

static ct_status check_eps(const char *name, double eps)
{
    if (!(eps >= 0) || !isfinite(eps))
        return core_err(CT_ERR_INVALID_ARG, "%s: eps must be finite and >= 0, got %g", name, eps);
    return CT_OK;
}

ct_status ct_batch_norm(const ct_tensor *x, const ct_tensor *mean, const ct_tensor *var, const ct_tensor *weight,
                        const ct_tensor *bias, double eps, ct_tensor **out)
{
    const char *name = "ct_batch_norm";
    OPS_CHECK(name, x);
    OPS_CHECK(name, mean);
    OPS_CHECK(name, var);
    OPS_CHECK_OUT(name, out);
    ct_status s = require_float(name, "input", x);
    if (s == CT_OK) s = check_eps(name, eps);
    if (s != CT_OK) return s;
    if (x->ndim < 2) return core_err(CT_ERR_SHAPE, "%s: input %s must be [N, C, ...]", name, SHAPE_STR(x));
    int64_t C = x->shape[1];
    s = check_vec(name, "running mean", mean, C);
    if (s == CT_OK) s = check_vec(name, "running var", var, C);
    if (s == CT_OK) s = check_vec(name, "weight", weight, C);
    if (s == CT_OK) s = check_vec(name, "bias", bias, C);
    if (s != CT_OK) return s;
    ct_op op = {.kind = CT_OP_BATCH_NORM, .n_src = 5, .src = {x, mean, var, weight, bias}, .p.norm = {eps, 1}};
    s = ops_new_dst(x->ndim, x->shape, x->dtype, &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

/* True if the last k dims of t are laid out densely (collapsible to one run). */
static bool inner_dense(const ct_tensor *t, int k)
{
    int64_t want = 1;
    for (int i = t->ndim - 1; i >= t->ndim - k; i--) {
        if (t->shape[i] != 1 && t->stride[i] != want) return false;
        want *= t->shape[i];
    }
    return true;
}

ct_status ct_layer_norm(const ct_tensor *x, int norm_ndim, const ct_tensor *weight, const ct_tensor *bias, double eps,
                        ct_tensor **out)
{
    const char *name = "ct_layer_norm";
    OPS_CHECK(name, x);
    OPS_CHECK_OUT(name, out);
    ct_status s = require_float(name, "input", x);
    if (s == CT_OK) s = check_eps(name, eps);
    if (s != CT_OK) return s;
    if (norm_ndim < 1 || norm_ndim > x->ndim)
        return core_err(CT_ERR_INVALID_ARG, "%s: norm_ndim %d must be in [1, %d] for input %s", name, norm_ndim, x->ndim,
                        SHAPE_STR(x));
    const int64_t *nshape = x->shape + x->ndim - norm_ndim;
    const ct_tensor *opt[2] = {weight, bias};
    ct_tensor *tmp[3] = {0};
    for (int i = 0; i < 2; i++) {
        if (!opt[i]) continue;
        s = require_float(name, i ? "bias" : "weight", opt[i]);
        if (s != CT_OK) return s;
        if (!shape_equal(opt[i]->ndim, opt[i]->shape, norm_ndim, nshape))
            return core_err(CT_ERR_SHAPE, "%s: %s has shape %s, expected %s (the last %d dims of input %s)", name,
                            i ? "bias" : "weight", SHAPE_STR(opt[i]), shape_str(norm_ndim, nshape, (char[96]){0}, 96),
                            norm_ndim, SHAPE_STR(x));
    }
    /* the kernel walks the normalized dims as one run, and weight/bias by flat index */
    const ct_tensor *xu = x, *wu = weight, *bu = bias;
    if (!inner_dense(x, norm_ndim)) s = ct_contiguous(x, &tmp[0]), xu = tmp[0];
    if (s == CT_OK && weight) s = ct_contiguous(weight, &tmp[1]), wu = tmp[1];
    if (s == CT_OK && bias) s = ct_contiguous(bias, &tmp[2]), bu = tmp[2];
    ct_op op = {.kind = CT_OP_LAYER_NORM, .n_src = 3, .src = {xu, wu, bu}, .p.norm = {eps, norm_ndim}};
    if (s == CT_OK) s = ops_new_dst(x->ndim, x->shape, x->dtype, &op);
    if (s == CT_OK) s = ops_submit(&op, out);
    free_all(tmp, 3);
    return s;
}

ct_status ct_rms_norm(const ct_tensor *x, const ct_tensor *weight, double eps, ct_tensor **out)
{
    const char *name = "ct_rms_norm";
    OPS_CHECK(name, x);
    OPS_CHECK_OUT(name, out);
    ct_status s = require_float(name, "input", x);
    if (s == CT_OK) s = check_eps(name, eps);
    if (s != CT_OK) return s;
    if (x->ndim < 1) return core_err(CT_ERR_SHAPE, "%s: input %s must have at least one dim", name, SHAPE_STR(x));
    s = check_vec(name, "weight", weight, x->shape[x->ndim - 1]);
    if (s != CT_OK) return s;
    ct_op op = {.kind = CT_OP_RMS_NORM, .n_src = 2, .src = {x, weight}, .p.norm = {eps, 1}};
    s = ops_new_dst(x->ndim, x->shape, x->dtype, &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

/* ---- embedding ---- */

ct_status ct_embedding(const ct_tensor *weight, const ct_tensor *ids, ct_tensor **out)
{
    const char *name = "ct_embedding";
    OPS_CHECK(name, weight);
    OPS_CHECK(name, ids);
    OPS_CHECK_OUT(name, out);
    if (weight->ndim != 2) return core_err(CT_ERR_SHAPE, "%s: weight %s must be [V, D]", name, SHAPE_STR(weight));
    bool quant = ct_dtype_is_quantized(weight->dtype);
    if (!quant && !ct_dtype_is_float(weight->dtype))
        return core_err(CT_ERR_DTYPE, "%s: weight must be a float or quantized dtype, got %s", name,
                        ct_dtype_name(weight->dtype));
    if (ids->dtype != CT_I32 && ids->dtype != CT_I64)
        return core_err(CT_ERR_DTYPE, "%s: ids must be i32 or i64, got %s %s", name, ct_dtype_name(ids->dtype),
                        SHAPE_STR(ids));
    if (ids->ndim >= CT_MAX_DIMS)
        return core_err(CT_ERR_SHAPE, "%s: ids %s have too many dims for one more", name, SHAPE_STR(ids));
    if (quant && (weight->stride[1] != 1 || weight->stride[0] % ct_dtype_block_size(weight->dtype) != 0))
        return core_err(CT_ERR_SHAPE, "%s: quantized weight %s %s must have whole, dense rows", name,
                        ct_dtype_name(weight->dtype), SHAPE_STR(weight));
    int64_t oshape[CT_MAX_DIMS];
    for (int i = 0; i < ids->ndim; i++) oshape[i] = ids->shape[i];
    oshape[ids->ndim] = weight->shape[1];
    ct_op op = {.kind = CT_OP_EMBEDDING, .n_src = 2, .src = {weight, ids}};
    ct_status s = ops_new_dst(ids->ndim + 1, oshape, CT_F32, &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}
