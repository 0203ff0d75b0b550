/* Attention frontends: rotary position embedding and scaled dot-product
 * attention. The kernels read strided views directly; copies are made only when
 * a row's elements are not adjacent or a dtype has no direct kernel. */
#include <math.h>

#include "ops/frontend.h"

ct_status ct_rope(const ct_tensor *x, const ct_tensor *positions, const ct_rope_params *params, ct_tensor **out)
{
    const char *name = "ct_rope";
    OPS_CHECK(name, x);
    OPS_CHECK(name, positions);
    OPS_CHECK_OUT(name, out);
    if (!params) return core_err(CT_ERR_INVALID_ARG, "%s: params is NULL", name);
    if (!ct_dtype_is_float(x->dtype))
        return core_err(CT_ERR_DTYPE, "%s: x must be f32/f64/f16/bf16, got %s", name, ct_dtype_name(x->dtype));
    if (positions->dtype != CT_I32 && positions->dtype != CT_I64)
        return core_err(CT_ERR_DTYPE, "%s: positions must be i32 or i64, got %s", name, ct_dtype_name(positions->dtype));
    if (x->ndim < 3) return core_err(CT_ERR_SHAPE, "%s: x %s must be [..., T, H, D]", name, SHAPE_STR(x));
    int64_t T = x->shape[x->ndim - 3], D = x->shape[x->ndim - 1];
    if (positions->ndim != 1 || positions->shape[0] != T)
        return core_err(CT_ERR_SHAPE, "%s: positions %s must be [T] = [%lld] for x %s", name, SHAPE_STR(positions),
                        (long long)T, SHAPE_STR(x));
    ct_rope_params p = *params;
    /* zero fields take the common defaults: rotate the whole head, base 10000, no scaling */
    if (p.n_dims == 0) p.n_dims = (int)D;
    if (p.freq_base == 0) p.freq_base = 10000.0;
    if (p.freq_scale == 0) p.freq_scale = 1.0;
    if (p.n_dims < 0 || p.n_dims > D || p.n_dims % 2 != 0)
        return core_err(CT_ERR_INVALID_ARG, "%s: n_dims %d must be even and in [0, %lld] (head dim of x %s)", name,
                        p.n_dims, (long long)D, SHAPE_STR(x));
    if (!(p.freq_base > 0) || !isfinite(p.freq_base) || !isfinite(p.freq_scale))
        return core_err(CT_ERR_INVALID_ARG, "%s: freq_base %g must be positive and freq_scale %g finite", name,
                        p.freq_base, p.freq_scale);
    if (p.mode != CT_ROPE_NORMAL && p.mode != CT_ROPE_NEOX)
        return core_err(CT_ERR_INVALID_ARG, "%s: unknown mode %d", name, (int)p.mode);
    ct_op op = {.kind = CT_OP_ROPE, .n_src = 2, .src = {x, positions}, .p.rope = p};
    ct_status s = ops_new_dst(x->ndim, x->shape, x->dtype, &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

/* q must be f32 and k/v f32 or f16 with unit stride along the head dim; other
 * layouts and dtypes are converted once here. */
static ct_status sdpa_operand(const ct_tensor *t, bool allow_f16, ct_tensor **tmp, const ct_tensor **use)
{
    *tmp = NULL;
    *use = t;
    ct_dtype want = (t->dtype == CT_F32 || (allow_f16 && t->dtype == CT_F16)) ? t->dtype : CT_F32;
    ct_tensor *cast = NULL;
    ct_status s = CT_OK;
    if (want != t->dtype) {
        s = ct_cast(t, want, &cast);
        if (s != CT_OK) return s;
        *tmp = cast;
        *use = cast;
    }
    if ((*use)->stride[3] != 1 && (*use)->shape[3] > 1) {
        ct_tensor *c = NULL;
        s = ct_contiguous(*use, &c);
        ct_tensor_free(cast);
        *tmp = c;
        *use = c;
    }
    return s;
}

ct_status ct_sdpa(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *mask,
                  const ct_sdpa_params *params, ct_tensor **out)
{
    const char *name = "ct_sdpa";
    OPS_CHECK(name, q);
    OPS_CHECK(name, k);
    OPS_CHECK(name, v);
    OPS_CHECK_OUT(name, out);
    const ct_tensor *all[4] = {q, k, v, mask};
    static const char *what[4] = {"q", "k", "v", "mask"};
    for (int i = 0; i < 4; i++)
        if (all[i] && !ct_dtype_is_float(all[i]->dtype))
            return core_err(CT_ERR_DTYPE, "%s: %s must be f32/f16/bf16/f64, got %s %s", name, what[i],
                            ct_dtype_name(all[i]->dtype), SHAPE_STR(all[i]));
    if (q->ndim != 4 || k->ndim != 4 || v->ndim != 4)
        return core_err(CT_ERR_SHAPE, "%s: q %s, k %s and v %s must be 4-D [B, H, T, D]", name, SHAPE_STR(q),
                        SHAPE_STR(k), SHAPE_STR(v));
    int64_t B = q->shape[0], Hq = q->shape[1], Tq = q->shape[2], D = q->shape[3];
    int64_t Hkv = k->shape[1], Tk = k->shape[2];
    if (k->shape[0] != B || v->shape[0] != B || v->shape[1] != Hkv || v->shape[2] != Tk || k->shape[3] != D)
        return core_err(CT_ERR_SHAPE, "%s: q %s, k %s, v %s do not fit (need k [B, Hkv, Tk, D], v [B, Hkv, Tk, Dv])",
                        name, SHAPE_STR(q), SHAPE_STR(k), SHAPE_STR(v));
    if (Hkv < 1 || Hq % Hkv != 0)
        return core_err(CT_ERR_SHAPE, "%s: query heads %lld must be a multiple of key/value heads %lld (q %s, k %s)",
                        name, (long long)Hq, (long long)Hkv, SHAPE_STR(q), SHAPE_STR(k));
    ct_sdpa_params p = params ? *params : (ct_sdpa_params){0};
    if (p.scale == 0) p.scale = D > 0 ? 1.0 / sqrt((double)D) : 1.0;
    if (!isfinite(p.scale)) return core_err(CT_ERR_INVALID_ARG, "%s: scale %g is not finite", name, p.scale);
    if (p.window < 0) return core_err(CT_ERR_INVALID_ARG, "%s: window %d must be >= 0", name, p.window);
    int64_t full[4] = {B, Hq, Tq, Tk};
    ct_tensor *tmp[5] = {0};
    const ct_tensor *qu = NULL, *ku = NULL, *vu = NULL, *mu = NULL;
    ct_status s = CT_OK;
    if (mask) {
        int n;
        int64_t bshape[CT_MAX_DIMS];
        s = shape_broadcast(name, mask->ndim, mask->shape, 4, full, &n, bshape);
        if (s == CT_OK && !shape_equal(n, bshape, 4, full))
            s = core_err(CT_ERR_SHAPE, "%s: mask %s does not broadcast to [B, Hq, Tq, Tk] = %s", name, SHAPE_STR(mask),
                         shape_str(4, full, (char[96]){0}, 96));
        if (s != CT_OK) return s;
        const ct_tensor *mf;
        s = ops_as_dtype(mask, CT_F32, &tmp[3], &mf);
        if (s == CT_OK) s = ct_expand(mf, 4, full, &tmp[4]);
        mu = tmp[4];
    }
    if (s == CT_OK) s = sdpa_operand(q, false, &tmp[0], &qu);
    if (s == CT_OK) s = sdpa_operand(k, true, &tmp[1], &ku);
    if (s == CT_OK) s = sdpa_operand(v, true, &tmp[2], &vu);
    if (s == CT_OK && p.length &&
        (p.length->ndim != 1 || p.length->shape[0] != 1 || (p.length->dtype != CT_I32 && p.length->dtype != CT_I64)))
        s = core_err(CT_ERR_SHAPE, "%s: length must be a [1] i32/i64 tensor, got %s %s", name,
                     ct_dtype_name(p.length->dtype), SHAPE_STR(p.length));
    ct_op op = {.kind = CT_OP_SDPA, .n_src = p.length ? 5 : 4, .src = {qu, ku, vu, mu, p.length},
                .p.attn = {p.causal, p.scale, p.window}};
    int64_t oshape[4] = {B, Hq, Tq, v->shape[3]};
    if (s == CT_OK) s = ops_new_dst(4, oshape, CT_F32, &op);
    if (s == CT_OK) s = ops_submit(&op, out);
    for (int i = 0; i < 5; i++) ct_tensor_free(tmp[i]);
    return s;
}
