/* complex64 kernels: (re, im) f32 pairs. Products and quotients are formed in
 * double, where |z|^2 of any finite f32 pair cannot overflow, then rounded. */
#include "backends/cpu/elementwise.h"

static inline void c64_load(const char *p, double *re, double *im)
{
    const float *f = (const float *)p;
    *re = f[0];
    *im = f[1];
}

static inline void c64_store(char *p, double re, double im)
{
    float *f = (float *)p;
    f[0] = (float)re;
    f[1] = (float)im;
}

/* z ** s through the polar form; 0 ** s is the real 0 ** s. */
static void c64_pow(double re, double im, double s, double *ore, double *oim)
{
    double r = pow(hypot(re, im), s), th = s * atan2(im, re);
    *ore = r * cos(th);
    *oim = th == 0.0 ? 0.0 : r * sin(th);
}

static void c64_binary(ct_op_kind k, double ar, double ai, double br, double bi, double *r, double *i)
{
    switch (k) {
    case CT_OP_ADD: *r = ar + br; *i = ai + bi; break;
    case CT_OP_SUB: *r = ar - br; *i = ai - bi; break;
    case CT_OP_MUL: *r = ar * br - ai * bi; *i = ar * bi + ai * br; break;
    case CT_OP_DIV: {
        double den = br * br + bi * bi;
        *r = (ar * br + ai * bi) / den;
        *i = (ai * br - ar * bi) / den;
        break;
    }
    default: *r = *i = NAN; break;
    }
}

/* p = {dst, a, b} or, for the scalar kinds, {dst, a} with the real scalar j->s0. */
static void seg_c64_binary(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_op_kind k = j->op->kind;
    bool scalar = j->op->n_src == 1;
    for (int64_t e = 0; e < n; e++) {
        double ar, ai, br = j->s0, bi = 0.0, r, i;
        c64_load(p[1] + e * s[1] * 8, &ar, &ai);
        if (!scalar) c64_load(p[2] + e * s[2] * 8, &br, &bi);
        switch (k) {
        case CT_OP_ADD_SCALAR: c64_binary(CT_OP_ADD, ar, ai, br, bi, &r, &i); break;
        case CT_OP_SUB_SCALAR: c64_binary(CT_OP_SUB, ar, ai, br, bi, &r, &i); break;
        case CT_OP_MUL_SCALAR: r = ar * br; i = ai * br; break;
        case CT_OP_DIV_SCALAR: r = ar / br; i = ai / br; break;
        case CT_OP_POW_SCALAR: c64_pow(ar, ai, br, &r, &i); break;
        default: c64_binary(k, ar, ai, br, bi, &r, &i); break;
        }
        c64_store(p[0] + e * s[0] * 8, r, i);
    }
}

ct_status cpu_c64_binary(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_DIV: case CT_OP_ADD_SCALAR: case CT_OP_SUB_SCALAR:
    case CT_OP_MUL_SCALAR: case CT_OP_DIV_SCALAR: case CT_OP_POW_SCALAR:
        break;
    default:
        return core_err(CT_ERR_DTYPE, "cpu: %s has no complex64 kernel", op_kind_name(op->kind));
    }
    ew_job j;
    ew_job_init(&j, dev, op, seg_c64_binary);
    ew_job_run(&j);
    return CT_OK;
}

/* p = {dst, z}: NEG CONJ (c64 out), ABS REAL IMAG (f32 out). */
static void seg_c64_unary(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    ct_op_kind k = j->op->kind;
    size_t ed = j->it.esize[0];
    for (int64_t e = 0; e < n; e++) {
        const float *z = (const float *)(p[1] + e * s[1] * 8);
        char *d = p[0] + e * s[0] * (int64_t)ed;
        switch (k) {
        case CT_OP_NEG: c64_store(d, -z[0], -z[1]); break;
        case CT_OP_CONJ: c64_store(d, z[0], -z[1]); break;
        case CT_OP_ABS: *(float *)d = (float)hypot(z[0], z[1]); break;
        case CT_OP_REAL: *(float *)d = z[0]; break;
        default: *(float *)d = z[1]; break;
        }
    }
}

ct_status cpu_c64_unary(ct_device *dev, const ct_op *op)
{
    if (op->kind != CT_OP_NEG && op->kind != CT_OP_ABS)
        return core_err(CT_ERR_DTYPE, "cpu: %s has no complex64 kernel", op_kind_name(op->kind));
    ew_job j;
    ew_job_init(&j, dev, op, seg_c64_unary);
    ew_job_run(&j);
    return CT_OK;
}

/* p = {dst c64, re f32, im f32} */
static void seg_complex(const ew_job *j, char *const *p, const int64_t *s, int64_t n)
{
    (void)j;
    const float *re = (const float *)p[1], *im = (const float *)p[2];
    float *d = (float *)p[0];
    for (int64_t e = 0; e < n; e++) {
        d[e * s[0] * 2] = re[e * s[1]];
        d[e * s[0] * 2 + 1] = im[e * s[2]];
    }
}

ct_status cpu_run_complex(ct_device *dev, const ct_op *op)
{
    ew_job j;
    switch (op->kind) {
    case CT_OP_COMPLEX:
        if (op->src[0]->dtype != CT_F32 || op->src[1]->dtype != CT_F32 || op->dst->dtype != CT_C64)
            return core_err(CT_ERR_DTYPE, "cpu: complex needs f32 parts and a complex64 result");
        ew_job_init(&j, dev, op, seg_complex);
        break;
    case CT_OP_REAL: case CT_OP_IMAG: case CT_OP_CONJ:
        if (op->src[0]->dtype != CT_C64)
            return core_err(CT_ERR_DTYPE, "cpu: %s needs a complex64 source, got %s", op_kind_name(op->kind),
                            ct_dtype_name(op->src[0]->dtype));
        ew_job_init(&j, dev, op, seg_c64_unary);
        break;
    default: return core_err(CT_ERR_UNSUPPORTED, "cpu: %s is not a complex kernel", op_kind_name(op->kind));
    }
    ew_job_run(&j);
    return CT_OK;
}
