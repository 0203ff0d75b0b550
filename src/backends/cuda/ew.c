/* The CUDA ew group: which ops and dtypes it takes (supports), and the glue that unpacks
 * an op into the operand layout of ew_kernels.h and calls the launchers. Semantics are
 * the CPU backend's; what differs in dtype coverage is refused here and runs on the
 * next device. */
#include <math.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/ew_kernels.h"

static bool plain(ct_dtype t)
{
    switch (t) {
    case CT_F32: case CT_F64: case CT_F16: case CT_BF16: case CT_I32: case CT_I64: case CT_I8: case CT_BOOL:
        return true;
    default:
        return false;
    }
}

static bool floating(ct_dtype t) { return t == CT_F32 || t == CT_F64 || t == CT_F16 || t == CT_BF16; }
static bool intlike(ct_dtype t) { return t == CT_I32 || t == CT_I64 || t == CT_I8 || t == CT_BOOL; }

/* dst then the sources, aligned to dst's shape; merges dims contiguous across all. */
static void nd_init(ew_nd *nd, const ct_tensor *dst, const ct_tensor *const *src, int n_src)
{
    memset(nd, 0, sizeof *nd);
    const ct_tensor *ops[EW_MAX_OPS];
    ops[0] = dst;
    for (int i = 0; i < n_src; i++) ops[i + 1] = src[i];
    nd->n_ops = n_src + 1;
    nd->numel = 1;
    int out = 0;
    for (int d = 0; d < dst->ndim; d++) {
        int64_t n = dst->shape[d];
        nd->numel *= n;
        if (n == 1) continue;
        int64_t st[EW_MAX_OPS];
        for (int k = 0; k < nd->n_ops; k++) {
            const ct_tensor *t = ops[k];
            int td = d - (dst->ndim - t->ndim);
            st[k] = (td < 0 || t->shape[td] == 1) ? 0 : t->stride[td];
        }
        bool merge = out > 0;
        for (int k = 0; merge && k < nd->n_ops; k++) merge = nd->stride[k][out - 1] == st[k] * n;
        if (merge) {
            nd->shape[out - 1] *= n;
            for (int k = 0; k < nd->n_ops; k++) nd->stride[k][out - 1] = st[k];
            continue;
        }
        nd->shape[out] = n;
        for (int k = 0; k < nd->n_ops; k++) nd->stride[k][out] = st[k];
        out++;
    }
    nd->ndim = out;
}

ct_status cuda_dense_copy(ct_device *dev, const ct_tensor *t, void *dense, ct_dtype ddt, bool to_t)
{
    ct_tensor d = {.dtype = ddt, .ndim = t->ndim};
    int64_t st = 1;
    for (int i = t->ndim - 1; i >= 0; i--) d.shape[i] = t->shape[i], d.stride[i] = st, st *= t->shape[i];
    const ct_tensor *src = to_t ? &d : t, *dst = to_t ? t : &d;
    ew_nd nd;
    nd_init(&nd, dst, &src, 1);
    void *tp = op_data(t, dev);
    if (nd.numel == 0) return CT_OK;
    cudaError_t e = ew_launch_copy(to_t ? tp : dense, dst->dtype, to_t ? dense : tp, src->dtype, &nd, cuda_of(dev)->stream);
    return e == cudaSuccess ? CT_OK : cuda_status(e, dev, "dtype conversion");
}

static bool code_of(ct_op_kind k, ew_code *c)
{
    switch (k) {
    case CT_OP_ADD: case CT_OP_ADD_SCALAR: *c = EW_ADD; return true;
    case CT_OP_SUB: case CT_OP_SUB_SCALAR: *c = EW_SUB; return true;
    case CT_OP_MUL: case CT_OP_MUL_SCALAR: *c = EW_MUL; return true;
    case CT_OP_DIV: case CT_OP_DIV_SCALAR: *c = EW_DIV; return true;
    case CT_OP_POW: case CT_OP_POW_SCALAR: *c = EW_POW; return true;
    case CT_OP_MAXIMUM: *c = EW_MAX; return true;
    case CT_OP_MINIMUM: *c = EW_MIN; return true;
    case CT_OP_NEG: *c = EW_NEG; return true;
    case CT_OP_ABS: *c = EW_ABS; return true;
    case CT_OP_EXP: *c = EW_EXP; return true;
    case CT_OP_LOG: *c = EW_LOG; return true;
    case CT_OP_SQRT: *c = EW_SQRT; return true;
    case CT_OP_RSQRT: *c = EW_RSQRT; return true;
    case CT_OP_SIN: *c = EW_SIN; return true;
    case CT_OP_COS: *c = EW_COS; return true;
    case CT_OP_CLAMP: *c = EW_CLAMP; return true;
    case CT_OP_RELU: *c = EW_RELU; return true;
    case CT_OP_GELU: *c = EW_GELU; return true;
    case CT_OP_SILU: *c = EW_SILU; return true;
    case CT_OP_SIGMOID: *c = EW_SIGMOID; return true;
    case CT_OP_TANH: *c = EW_TANH; return true;
    case CT_OP_SWIGLU: *c = EW_SWIGLU; return true;
    case CT_OP_GEGLU: *c = EW_GEGLU; return true;
    default: return false;
    }
}

static bool red_of(ct_op_kind k, ew_red *r)
{
    switch (k) {
    case CT_OP_SUM: *r = EW_R_SUM; return true;
    case CT_OP_MEAN: *r = EW_R_MEAN; return true;
    case CT_OP_PROD: *r = EW_R_PROD; return true;
    case CT_OP_MAX: *r = EW_R_MAX; return true;
    case CT_OP_MIN: *r = EW_R_MIN; return true;
    case CT_OP_VAR: *r = EW_R_VAR; return true;
    case CT_OP_STD: *r = EW_R_STD; return true;
    case CT_OP_NORM: *r = EW_R_NORM; return true;
    case CT_OP_ARGMAX: *r = EW_R_ARGMAX; return true;
    case CT_OP_ARGMIN: *r = EW_R_ARGMIN; return true;
    default: return false;
    }
}

static bool same_dtype(const ct_op *op, ct_dtype t)
{
    for (int i = 0; i < op->n_src; i++)
        if (!op->src[i] || op->src[i]->dtype != t) return false;
    return op->dst->dtype == t;
}

static bool supports_c64(const ct_op *op)
{
    const ct_tensor *d = op->dst;
    switch (op->kind) {
    case CT_OP_COMPLEX:
        return d->dtype == CT_C64 && op->src[0]->dtype == CT_F32 && op->src[1]->dtype == CT_F32;
    case CT_OP_REAL: case CT_OP_IMAG:
        return op->src[0]->dtype == CT_C64 && d->dtype == CT_F32;
    case CT_OP_CONJ:
        return op->src[0]->dtype == CT_C64 && d->dtype == CT_C64;
    case CT_OP_ABS:
        return op->src[0]->dtype == CT_C64 && d->dtype == CT_F32;
    case CT_OP_NEG: case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_DIV: case CT_OP_ADD_SCALAR:
    case CT_OP_SUB_SCALAR: case CT_OP_MUL_SCALAR: case CT_OP_DIV_SCALAR:
        return same_dtype(op, CT_C64);
    default:
        return false;
    }
}

bool cuda_ew_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    const ct_tensor *d = op->dst;
    ct_dtype s0 = op->n_src > 0 && op->src[0] ? op->src[0]->dtype : d->dtype;
    if (d->ndim > CT_MAX_DIMS || op->n_src >= EW_MAX_OPS) return false;
    if (s0 == CT_C64 || d->dtype == CT_C64 || op->kind == CT_OP_COMPLEX) {
        if (op->kind == CT_OP_COPY) return (plain(s0) || s0 == CT_C64) && (plain(d->dtype) || d->dtype == CT_C64);
        if (op->kind == CT_OP_WHERE)
            return op->n_src == 3 && op->src[0]->dtype == CT_BOOL && op->src[1]->dtype == d->dtype &&
                                            op->src[2]->dtype == d->dtype;
        return supports_c64(op);
    }
    ew_red r;
    if (red_of(op->kind, &r)) return plain(s0) && plain(d->dtype) && tensor_is_contiguous(d);
    ew_code c;
    switch (op->kind) {
    case CT_OP_FILL: case CT_OP_ARANGE: case CT_OP_EYE:
        return plain(d->dtype);
    case CT_OP_RAND:
        return floating(d->dtype);
    case CT_OP_COPY:
        return plain(d->dtype) && plain(s0);
    case CT_OP_CMP: case CT_OP_CMP_SCALAR:
        return plain(s0) && d->dtype == CT_BOOL && (op->kind == CT_OP_CMP_SCALAR || op->src[1]->dtype == s0);
    case CT_OP_WHERE:
        return op->n_src == 3 && op->src[0]->dtype == CT_BOOL && plain(d->dtype) && op->src[1]->dtype == d->dtype &&
               op->src[2]->dtype == d->dtype;
    case CT_OP_DIV: case CT_OP_DIV_SCALAR: /* integer division is the frontend's to promote */
        return floating(s0) && same_dtype(op, s0);
    case CT_OP_SWIGLU: case CT_OP_GEGLU: case CT_OP_EXP: case CT_OP_LOG: case CT_OP_SQRT: case CT_OP_RSQRT:
    case CT_OP_SIN: case CT_OP_COS: case CT_OP_GELU: case CT_OP_SILU: case CT_OP_SIGMOID: case CT_OP_TANH:
        return floating(s0) && same_dtype(op, s0);
    default:
        return code_of(op->kind, &c) && plain(s0) && same_dtype(op, s0);
    }
}

/* ---- run ---- */

static ct_status run_reduce(ct_device *dev, const ct_op *op, ew_red r)
{
    cuda_dev *cd = cuda_of(dev);
    const ct_tensor *a = op->src[0];
    ew_red_plan p = {.op = r, .st = a->dtype, .dt = op->dst->dtype, .unbiased = op->p.red.unbiased,
                     .p = op->p.red.p};
    p.exact_int = intlike(a->dtype) && r != EW_R_VAR && r != EW_R_STD && r != EW_R_NORM;
    p.nred = 1;
    int64_t kshape[CT_MAX_DIMS], kstride[CT_MAX_DIMS], rshape[CT_MAX_DIMS], rstride[CT_MAX_DIMS];
    int nk = 0, nr = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (op->p.red.mask & (1u << d)) {
            rshape[nr] = a->shape[d], rstride[nr++] = a->stride[d];
            p.nred *= a->shape[d];
        } else {
            kshape[nk] = a->shape[d], kstride[nk++] = a->stride[d];
        }
    }
    /* drop size-1 dims and merge contiguous neighbours: the same row-major order */
    for (int d = 0; d < nk; d++) {
        if (kshape[d] == 1) continue;
        if (p.nk && p.kstride[p.nk - 1] == kstride[d] * kshape[d]) {
            p.kshape[p.nk - 1] *= kshape[d], p.kstride[p.nk - 1] = kstride[d];
        } else {
            p.kshape[p.nk] = kshape[d], p.kstride[p.nk++] = kstride[d];
        }
    }
    for (int d = 0; d < nr; d++) {
        if (rshape[d] == 1) continue;
        if (p.nr && p.rstride[p.nr - 1] == rstride[d] * rshape[d]) {
            p.rshape[p.nr - 1] *= rshape[d], p.rstride[p.nr - 1] = rstride[d];
        } else {
            p.rshape[p.nr] = rshape[d], p.rstride[p.nr++] = rstride[d];
        }
    }
    p.nout = ct_tensor_numel(op->dst);
    size_t tmp_bytes = ew_reduce_tmp_bytes(&p, cd->sm_count);
    void *tmp = NULL;
    if (tmp_bytes) {
        ct_status s = cuda_tmp_alloc(dev, tmp_bytes, &tmp);
        if (s != CT_OK) return s;
    }
    cudaError_t e = ew_launch_reduce(&p, op_data(op->dst, dev), op_data(a, dev), tmp, cd->sm_count, cd->stream);
    if (tmp) cuda_tmp_free(dev, tmp, tmp_bytes);
    return cuda_status(e, dev, op_kind_name(op->kind));
}

static ct_status run_c64(ct_device *dev, const ct_op *op)
{
    ew_nd nd;
    nd_init(&nd, op->dst, op->src, op->n_src);
    const void *a = op_data(op->src[0], dev), *b = op->n_src > 1 ? op_data(op->src[1], dev) : NULL;
    ew_cplx c;
    switch (op->kind) {
    case CT_OP_COMPLEX: c = EW_C_MAKE; break;
    case CT_OP_REAL: c = EW_C_REAL; break;
    case CT_OP_IMAG: c = EW_C_IMAG; break;
    case CT_OP_CONJ: c = EW_C_CONJ; break;
    case CT_OP_ABS: c = EW_C_ABS; break;
    case CT_OP_NEG: c = EW_C_NEG; break;
    case CT_OP_ADD: case CT_OP_ADD_SCALAR: c = EW_C_ADD; break;
    case CT_OP_SUB: case CT_OP_SUB_SCALAR: c = EW_C_SUB; break;
    case CT_OP_MUL: case CT_OP_MUL_SCALAR: c = EW_C_MUL; break;
    default: c = EW_C_DIV; break;
    }
    cudaError_t e = ew_launch_complex(c, op_data(op->dst, dev), a, b, op->p.s.a, &nd, cuda_of(dev)->stream);
    return cuda_status(e, dev, op_kind_name(op->kind));
}

/* The scalar of a comparison as the source dtype sees it (the CPU's rule: rounded to
 * that float type, so x == 0.1 holds for the f32 element nearest 0.1). */
static double cmp_scalar_value(ct_dtype dt, double s)
{
    switch (dt) {
    case CT_F32: return (float)s;
    case CT_F16: return ct_f16_to_f32(ct_f32_to_f16((float)s));
    case CT_BF16: return ct_bf16_to_f32(ct_f32_to_bf16((float)s));
    default: return s;
    }
}

static ct_status run_cmp(ct_device *dev, const ct_op *op)
{
    ew_nd nd;
    nd_init(&nd, op->dst, op->src, op->n_src);
    ct_dtype dt = op->src[0]->dtype;
    bool scalar = op->kind == CT_OP_CMP_SCALAR;
    double sv = cmp_scalar_value(dt, op->p.cmp.a);
    bool exact = sv == floor(sv) && sv >= -9223372036854775808.0 && sv < 9223372036854775808.0;
    bool int_path = intlike(dt) && (!scalar || exact);
    int64_t si = int_path && scalar ? (int64_t)sv : 0;
    cudaError_t e = ew_launch_cmp((ew_cmp)op->p.cmp.cmp, dt, op_data(op->dst, dev), op_data(op->src[0], dev),
                                  scalar ? NULL : op_data(op->src[1], dev), int_path, si, sv, &nd,
                                  cuda_of(dev)->stream);
    return cuda_status(e, dev, op_kind_name(op->kind));
}

ct_status cuda_ew_run(ct_device *dev, const ct_op *op)
{
    cudaStream_t s = cuda_of(dev)->stream;
    const ct_tensor *d = op->dst;
    void *dp = op_data(d, dev);
    const void *a = op->n_src > 0 ? op_data(op->src[0], dev) : NULL;
    ct_dtype s0 = op->n_src > 0 ? op->src[0]->dtype : d->dtype;
    ew_nd nd;
    ew_red r;
    ew_code c;
    cudaError_t e;
    if (op->kind != CT_OP_COPY && op->kind != CT_OP_WHERE && (s0 == CT_C64 || d->dtype == CT_C64))
        return run_c64(dev, op);
    if (op->kind == CT_OP_COMPLEX) return run_c64(dev, op);
    if (red_of(op->kind, &r)) return run_reduce(dev, op, r);
    switch (op->kind) {
    case CT_OP_FILL:
        nd_init(&nd, d, NULL, 0);
        e = ew_launch_fill(dp, d->dtype, &nd, op->p.s.a, s);
        break;
    case CT_OP_ARANGE:
        nd_init(&nd, d, NULL, 0);
        e = ew_launch_arange(dp, d->dtype, &nd, op->p.s.a, op->p.s.b, s);
        break;
    case CT_OP_EYE:
        nd_init(&nd, d, NULL, 0);
        e = ew_launch_eye(dp, d->dtype, &nd, d->ndim == 2 ? d->shape[1] : 1, s);
        break;
    case CT_OP_RAND:
        nd_init(&nd, d, NULL, 0);
        e = ew_launch_rand(dp, d->dtype, &nd, op->p.rng.seed, op->p.rng.normal, s);
        break;
    case CT_OP_COPY:
        nd_init(&nd, d, op->src, 1);
        e = ew_launch_copy(dp, d->dtype, a, s0, &nd, s);
        break;
    case CT_OP_CMP: case CT_OP_CMP_SCALAR:
        return run_cmp(dev, op);
    case CT_OP_WHERE:
        nd_init(&nd, d, op->src, 3);
        e = ew_launch_where(ct_dtype_block_bytes(d->dtype), dp, a, op_data(op->src[1], dev), op_data(op->src[2], dev),
                            &nd, s);
        break;
    case CT_OP_ADD_SCALAR: case CT_OP_SUB_SCALAR: case CT_OP_MUL_SCALAR: case CT_OP_DIV_SCALAR:
    case CT_OP_POW_SCALAR:
        code_of(op->kind, &c);
        nd_init(&nd, d, op->src, 1);
        e = ew_launch_scalar(c, s0, dp, a, op->p.s.a, &nd, s);
        break;
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_DIV: case CT_OP_POW: case CT_OP_MAXIMUM:
    case CT_OP_MINIMUM: case CT_OP_SWIGLU: case CT_OP_GEGLU:
        code_of(op->kind, &c);
        nd_init(&nd, d, op->src, 2);
        e = ew_launch_binary(c, s0, dp, a, op_data(op->src[1], dev), &nd, s);
        break;
    default:
        if (!code_of(op->kind, &c))
            return core_err(CT_ERR_UNSUPPORTED, "%s: ew has no kernel for %s", dev->info.name,
                            op_kind_name(op->kind));
        if (c == EW_GELU && op->p.s.a != 0) c = EW_GELU_TANH;
        nd_init(&nd, d, op->src, 1);
        e = ew_launch_unary(c, s0, dp, a, op->p.s.a, op->p.s.b, &nd, s);
        break;
    }
    return cuda_status(e, dev, op_kind_name(op->kind));
}
