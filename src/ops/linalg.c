/* Linear algebra frontends: matmul (torch.matmul semantics), matvec, outer, linear.
 *
 * The MATMUL op record always has a [..., M, K] and b [..., K, N] with the same
 * batch shape (broadcast by stride-0 expand views), dst [..., M, N] contiguous:
 * 1-D operands and batch broadcasting are resolved here so every backend sees one
 * form. LINEAR has src = {x [..., K] f32, w [N, K], bias [N] or NULL}. */
#include <string.h>

#include "ops/frontend.h"

static ct_status free_and(ct_status s, ct_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) ct_tensor_free(ts[i]);
    return s;
}

static bool matmul_dtype_ok(ct_dtype t)
{
    return t == CT_F32 || t == CT_F64 || t == CT_F16 || t == CT_BF16 || t == CT_I32 || t == CT_I64 || t == CT_C64;
}

/* Quantized weight a [M, K] times f32 b [K, N] or [K]: computed as linear(b^T, a), so
 * the weight rows stream through the quantized dot products. */
static ct_status matmul_quantized(const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    if (a->ndim != 2)
        return core_err(CT_ERR_SHAPE, "ct_matmul: quantized %s operand %s must be 2-D [M, K]", ct_dtype_name(a->dtype),
                        SHAPE_STR(a));
    if (b->dtype != CT_F32)
        return core_err(CT_ERR_DTYPE, "ct_matmul: with a quantized %s weight the other operand must be f32, got %s",
                        ct_dtype_name(a->dtype), ct_dtype_name(b->dtype));
    if (b->ndim != 1 && b->ndim != 2)
        return core_err(CT_ERR_SHAPE, "ct_matmul: with a quantized weight %s the other operand %s must be [K] or [K, N]",
                        SHAPE_STR(a), SHAPE_STR(b));
    if (b->shape[0] != a->shape[1])
        return core_err(CT_ERR_SHAPE, "ct_matmul: %s @ %s: inner sizes %lld and %lld differ", SHAPE_STR(a), SHAPE_STR(b),
                        (long long)a->shape[1], (long long)b->shape[0]);
    if (b->ndim == 1) return ct_linear(b, a, NULL, out);
    ct_tensor *tmp[3] = {0};
    ct_status s = ct_transpose(b, 0, 1, &tmp[0]);
    if (s == CT_OK) s = ct_linear(tmp[0], a, NULL, &tmp[1]); /* [N, M] */
    if (s == CT_OK) s = ct_transpose(tmp[1], 0, 1, &tmp[2]);
    if (s == CT_OK) s = ct_contiguous(tmp[2], out); /* callers expect a row-major result like torch */
    return free_and(s, tmp, 3);
}

ct_status ct_matmul(const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    OPS_CHECK("ct_matmul", a);
    OPS_CHECK("ct_matmul", b);
    OPS_CHECK_OUT("ct_matmul", out);
    if (ct_dtype_is_quantized(b->dtype))
        return core_err(CT_ERR_DTYPE, "ct_matmul: a quantized operand (%s %s) must be the first one, as weight [M, K]",
                        ct_dtype_name(b->dtype), SHAPE_STR(b));
    if (ct_dtype_is_quantized(a->dtype)) return matmul_quantized(a, b, out);
    if (a->ndim < 1 || b->ndim < 1)
        return core_err(CT_ERR_SHAPE, "ct_matmul: both operands need at least 1 dim, got %s and %s", SHAPE_STR(a),
                        SHAPE_STR(b));
    ct_dtype dt = ops_promote(a->dtype, b->dtype);
    if (!matmul_dtype_ok(dt))
        return core_err(CT_ERR_DTYPE, "ct_matmul: %s x %s is not supported (f32 f64 f16 bf16 i32 i64 c64)",
                        ct_dtype_name(a->dtype), ct_dtype_name(b->dtype));

    /* tmp: 0,1 cast copies; 2,3 unsqueezed; 4,5 expanded; 6 result */
    ct_tensor *tmp[7] = {0};
    const ct_tensor *ua, *ub;
    ct_status s = ops_as_dtype(a, dt, &tmp[0], &ua);
    if (s == CT_OK) s = ops_as_dtype(b, dt, &tmp[1], &ub);
    if (s != CT_OK) return free_and(s, tmp, 7);
    bool a1 = a->ndim == 1, b1 = b->ndim == 1;
    if (a1) {
        if ((s = ct_unsqueeze(ua, 0, &tmp[2])) != CT_OK) return free_and(s, tmp, 7);
        ua = tmp[2];
    }
    if (b1) {
        if ((s = ct_unsqueeze(ub, 1, &tmp[3])) != CT_OK) return free_and(s, tmp, 7);
        ub = tmp[3];
    }
    int64_t M = ua->shape[ua->ndim - 2], K = ua->shape[ua->ndim - 1];
    int64_t Kb = ub->shape[ub->ndim - 2], N = ub->shape[ub->ndim - 1];
    if (K != Kb)
        return free_and(core_err(CT_ERR_SHAPE, "ct_matmul: %s @ %s: inner sizes %lld and %lld differ", SHAPE_STR(a),
                                 SHAPE_STR(b), (long long)K, (long long)Kb),
                        tmp, 7);
    int nb;
    int64_t batch[CT_MAX_DIMS];
    s = shape_broadcast("ct_matmul", ua->ndim - 2, ua->shape, ub->ndim - 2, ub->shape, &nb, batch);
    if (s != CT_OK) return free_and(s, tmp, 7);
    if (nb + 2 > CT_MAX_DIMS)
        return free_and(core_err(CT_ERR_SHAPE, "ct_matmul: %s @ %s needs more than %d dims", SHAPE_STR(a), SHAPE_STR(b),
                                 CT_MAX_DIMS),
                        tmp, 7);
    int64_t shp[CT_MAX_DIMS];
    memcpy(shp, batch, sizeof(int64_t) * (size_t)nb);
    shp[nb] = M;
    shp[nb + 1] = K;
    if (!shape_equal(ua->ndim, ua->shape, nb + 2, shp)) {
        if ((s = ct_expand(ua, nb + 2, shp, &tmp[4])) != CT_OK) return free_and(s, tmp, 7);
        ua = tmp[4];
    }
    shp[nb] = K;
    shp[nb + 1] = N;
    if (!shape_equal(ub->ndim, ub->shape, nb + 2, shp)) {
        if ((s = ct_expand(ub, nb + 2, shp, &tmp[5])) != CT_OK) return free_and(s, tmp, 7);
        ub = tmp[5];
    }
    shp[nb] = M;
    shp[nb + 1] = N;
    ct_op op = {.kind = CT_OP_MATMUL, .n_src = 2, .src = {ua, ub}};
    if ((s = ops_new_dst(nb + 2, shp, dt, &op)) != CT_OK) return free_and(s, tmp, 7);
    if (!a1 && !b1) {
        s = ops_submit(&op, out);
        return free_and(s, tmp, 7);
    }
    if ((s = ops_submit(&op, &tmp[6])) != CT_OK) return free_and(s, tmp, 7);
    /* drop the dims the 1-D operands gained: the result is contiguous, so a view does it */
    int nd = nb;
    if (!a1) shp[nd++] = M;
    if (!b1) shp[nd++] = N;
    s = ct_view(tmp[6], nd, shp, out);
    return free_and(s, tmp, 7);
}

ct_status ct_matvec(const ct_tensor *a, const ct_tensor *x, ct_tensor **out)
{
    OPS_CHECK("ct_matvec", a);
    OPS_CHECK("ct_matvec", x);
    OPS_CHECK_OUT("ct_matvec", out);
    if (a->ndim != 2 || x->ndim != 1)
        return core_err(CT_ERR_SHAPE, "ct_matvec: need a 2-D matrix and a 1-D vector, got %s and %s", SHAPE_STR(a),
                        SHAPE_STR(x));
    return ct_matmul(a, x, out);
}

ct_status ct_outer(const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    OPS_CHECK("ct_outer", a);
    OPS_CHECK("ct_outer", b);
    OPS_CHECK_OUT("ct_outer", out);
    if (a->ndim != 1 || b->ndim != 1)
        return core_err(CT_ERR_SHAPE, "ct_outer: need two 1-D tensors, got %s and %s", SHAPE_STR(a), SHAPE_STR(b));
    ct_status s = ops_require_plain("ct_outer", a);
    if (s == CT_OK) s = ops_require_plain("ct_outer", b);
    if (s != CT_OK) return s;
    ct_tensor *tmp[2] = {0};
    s = ct_unsqueeze(a, 1, &tmp[0]); /* [M, 1] */
    if (s == CT_OK) s = ct_unsqueeze(b, 0, &tmp[1]); /* [1, N] */
    if (s == CT_OK) s = ct_matmul(tmp[0], tmp[1], out);
    return free_and(s, tmp, 2);
}

static bool linear_w_dtype_ok(ct_dtype t)
{
    return t == CT_F32 || t == CT_F16 || t == CT_BF16 || (ct_dtype_is_quantized(t) && t != CT_Q8_K && t != CT_Q8_1);
}

ct_status ct_linear(const ct_tensor *x, const ct_tensor *w, const ct_tensor *bias, ct_tensor **out)
{
    OPS_CHECK("ct_linear", x);
    OPS_CHECK("ct_linear", w);
    OPS_CHECK_OUT("ct_linear", out);
    if (!ct_dtype_is_float(x->dtype))
        return core_err(CT_ERR_DTYPE, "ct_linear: input x must be floating point, got %s %s", ct_dtype_name(x->dtype),
                        SHAPE_STR(x));
    if (!linear_w_dtype_ok(w->dtype) && w->dtype != CT_F64)
        return core_err(CT_ERR_DTYPE, "ct_linear: weight dtype %s is not supported (f32, f16, bf16 or a GGUF weight type)",
                        ct_dtype_name(w->dtype));
    if (x->ndim < 1 || w->ndim != 2 || x->shape[x->ndim - 1] != w->shape[1])
        return core_err(CT_ERR_SHAPE, "ct_linear: x %s and weight %s do not fit (need x [..., K], w [N, K])", SHAPE_STR(x),
                        SHAPE_STR(w));
    int64_t N = w->shape[0], K = w->shape[1];
    if (ct_dtype_is_quantized(w->dtype)) {
        int64_t bs = ct_dtype_block_size(w->dtype);
        if ((K > 1 && w->stride[1] != 1) || (N > 1 && w->stride[0] % bs != 0))
            return core_err(CT_ERR_SHAPE, "ct_linear: quantized weight %s needs whole-block rows (strides %lld, %lld)",
                            SHAPE_STR(w), (long long)w->stride[0], (long long)w->stride[1]);
    }
    if (bias) {
        if (!ct_dtype_is_float(bias->dtype))
            return core_err(CT_ERR_DTYPE, "ct_linear: bias must be floating point, got %s", ct_dtype_name(bias->dtype));
        if (bias->ndim != 1 || bias->shape[0] != N)
            return core_err(CT_ERR_SHAPE, "ct_linear: bias %s does not match weight %s (need [%lld])", SHAPE_STR(bias),
                            SHAPE_STR(w), (long long)N);
    }
    /* The kernels compute in f32: other float inputs are converted. */
    ct_tensor *tmp[2] = {0};
    const ct_tensor *ux, *uw = w;
    ct_status s = ops_as_dtype(x, CT_F32, &tmp[0], &ux);
    if (s == CT_OK && w->dtype == CT_F64) s = ops_as_dtype(w, CT_F32, &tmp[1], &uw);
    if (s != CT_OK) return free_and(s, tmp, 2);
    int64_t shp[CT_MAX_DIMS];
    memcpy(shp, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shp[x->ndim - 1] = N;
    ct_op op = {.kind = CT_OP_LINEAR, .n_src = 3, .src = {ux, uw, bias}};
    s = ops_new_dst(x->ndim, shp, CT_F32, &op);
    if (s == CT_OK) s = ops_submit(&op, out);
    return free_and(s, tmp, 2);
}
