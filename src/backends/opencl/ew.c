/* The ew group: creation, copies, element-wise arithmetic, activations and reductions,
 * each one launch of a kernel of kernels/ew.cl over a generic strided N-d walk. */
#include <math.h>
#include <string.h>

#include "backends/opencl/ew.h"

_Static_assert(sizeof(ew_nd) == 8 * CT_MAX_DIMS * (1 + EW_OPS) + 16, "ew_nd must match kernels/ew.cl");
_Static_assert(CT_MAX_DIMS == 8, "kernels/ew.cl walks at most 8 dims");

void ew_nd_build(ew_nd *d, int ndim, const int64_t *shape, const ct_tensor *const *t, int n)
{
    memset(d, 0, sizeof *d);
    int nd = 0;
    for (int dim = 0; dim < ndim; dim++) {
        if (shape[dim] == 1) continue; /* contributes nothing to any offset */
        int64_t st[EW_OPS];
        for (int k = 0; k < n; k++) {
            int td = dim - (ndim - t[k]->ndim);
            st[k] = td >= 0 && t[k]->shape[td] != 1 ? t[k]->stride[td] : 0;
        }
        bool merge = nd > 0;
        for (int k = 0; k < n && merge; k++) merge = d->st[k][nd - 1] == st[k] * shape[dim];
        if (merge) {
            d->shape[nd - 1] *= shape[dim];
            for (int k = 0; k < n; k++) d->st[k][nd - 1] = st[k];
            continue;
        }
        d->shape[nd] = shape[dim];
        for (int k = 0; k < n; k++) d->st[k][nd] = st[k];
        nd++;
    }
    d->nd = nd;
    d->contig = 1;
    for (int k = 0; k < n && d->contig; k++) d->contig = nd == 0 || (nd == 1 && d->st[k][0] == 1);
}

ct_status ew_mem(const ct_tensor *t, const ct_device *dev, const char *op, cl_mem *mem, cl_ulong *off)
{
    *mem = ocl_mem(t, dev, off);
    if (*mem) return CT_OK;
    return core_err(CT_ERR_DEVICE_FAULT, "%s: %s operand %s has no copy on this device", dev->info.name, op,
                    SHAPE_STR(t));
}

bool ew_dtype_ok(const ct_device *dev, ct_dtype t)
{
    switch (t) {
    case CT_F32: case CT_F16: case CT_BF16: case CT_I32: case CT_I64: case CT_BOOL: case CT_I8: return true;
    case CT_F64: return ocl_info(dev)->fp64;
    default: return false;
    }
}

/* ---- fill and copy ---- */

static ct_status run_fill(ct_device *dev, const ct_op *op)
{
    const ct_tensor *dst = op->dst;
    ew_nd d;
    ew_nd_build(&d, dst->ndim, dst->shape, &dst, 1);
    cl_mem m;
    cl_ulong off;
    ct_status s = ew_mem(dst, dev, "fill", &m, &off);
    cl_kernel k;
    if (s == CT_OK) s = ocl_kernel(dev, "ew", "ew_fill", &k);
    if (s != CT_OK) return s;
    cl_int dt = dst->dtype;
    double v = op->p.s.a;
    cl_float fv = (float)v;
    cl_long iv = (cl_long)v, dbits;
    memcpy(&dbits, &v, sizeof dbits);
    s = OCL_SET_ARGS(dev, k, "ew_fill", OCL_ARG(d), OCL_ARG(m), OCL_ARG(off), OCL_ARG(dt), OCL_ARG(fv), OCL_ARG(iv),
                     OCL_ARG(dbits));
    size_t g = (size_t)shape_numel(dst->ndim, dst->shape);
    return s == CT_OK ? ocl_launch(dev, k, "ew_fill", 1, &g, NULL) : s;
}

static ct_status run_copy(ct_device *dev, const ct_op *op)
{
    const ct_tensor *dst = op->dst, *src = op->src[0];
    const ct_tensor *t[2] = {dst, src};
    ew_nd d;
    ew_nd_build(&d, dst->ndim, dst->shape, t, 2);
    cl_mem dm, sm;
    cl_ulong doff, soff;
    ct_status s = ew_mem(dst, dev, "copy", &dm, &doff);
    if (s == CT_OK) s = ew_mem(src, dev, "copy", &sm, &soff);
    cl_kernel k;
    if (s == CT_OK) s = ocl_kernel(dev, "ew", "ew_copy", &k);
    if (s != CT_OK) return s;
    cl_int ddt = dst->dtype, sdt = src->dtype;
    s = OCL_SET_ARGS(dev, k, "ew_copy", OCL_ARG(d), OCL_ARG(dm), OCL_ARG(doff), OCL_ARG(ddt), OCL_ARG(sm),
                     OCL_ARG(soff), OCL_ARG(sdt));
    size_t g = (size_t)shape_numel(dst->ndim, dst->shape);
    return s == CT_OK ? ocl_launch(dev, k, "ew_copy", 1, &g, NULL) : s;
}

/* ---- creation ---- */

static ct_status launch_create(ct_device *dev, const char *name, const ct_op *op, int n, const ocl_arg *extra)
{
    const ct_tensor *dst = op->dst;
    ew_nd d;
    ew_nd_build(&d, dst->ndim, dst->shape, &dst, 1);
    cl_mem m;
    cl_ulong off;
    ct_status s = ew_mem(dst, dev, name, &m, &off);
    cl_kernel k;
    if (s == CT_OK) s = ocl_kernel(dev, "ew", name, &k);
    if (s != CT_OK) return s;
    cl_int dt = dst->dtype;
    ocl_arg args[8] = {OCL_ARG(d), OCL_ARG(m), OCL_ARG(off), OCL_ARG(dt)};
    for (int i = 0; i < n; i++) args[4 + i] = extra[i];
    s = ocl_args(dev, k, name, 4 + n, args);
    size_t g = (size_t)shape_numel(dst->ndim, dst->shape);
    return s == CT_OK ? ocl_launch(dev, k, name, 1, &g, NULL) : s;
}

static cl_long bits_of(double v)
{
    cl_long b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static ct_status run_create(ct_device *dev, const ct_op *op)
{
    const ct_tensor *dst = op->dst;
    switch (op->kind) {
    case CT_OP_ARANGE: {
        cl_long sb = bits_of(op->p.s.a), tb = bits_of(op->p.s.b);
        cl_float fs = (float)op->p.s.a, ft = (float)op->p.s.b;
        return launch_create(dev, "ew_arange", op, 4, (ocl_arg[]){OCL_ARG(sb), OCL_ARG(tb), OCL_ARG(fs), OCL_ARG(ft)});
    }
    case CT_OP_EYE: {
        cl_long cols = dst->ndim == 2 ? dst->shape[1] : 1;
        return launch_create(dev, "ew_eye", op, 1, (ocl_arg[]){OCL_ARG(cols)});
    }
    default: { /* RAND: rand stays below 1 in every dtype (the CPU's clamp) */
        cl_ulong seed = op->p.rng.seed;
        cl_int normal = op->p.rng.normal;
        cl_float top = dst->dtype == CT_F16 ? 1.0f - 1.0f / 2048 : dst->dtype == CT_BF16 ? 1.0f - 1.0f / 256 : 1.0f;
        return launch_create(dev, "ew_rand", op, 3, (ocl_arg[]){OCL_ARG(seed), OCL_ARG(normal), OCL_ARG(top)});
    }
    }
}

/* ---- element-wise: op codes of kernels/ew.cl ---- */

static int ew_code(ct_op_kind k)
{
    switch (k) {
    case CT_OP_ADD: case CT_OP_ADD_SCALAR: return 0;
    case CT_OP_SUB: case CT_OP_SUB_SCALAR: return 1;
    case CT_OP_MUL: case CT_OP_MUL_SCALAR: return 2;
    case CT_OP_DIV: case CT_OP_DIV_SCALAR: return 3;
    case CT_OP_POW: case CT_OP_POW_SCALAR: return 4;
    case CT_OP_MAXIMUM: return 5;
    case CT_OP_MINIMUM: return 6;
    case CT_OP_SWIGLU: return 7;
    case CT_OP_GEGLU: return 8;
    case CT_OP_NEG: return 10;
    case CT_OP_ABS: return 11;
    case CT_OP_EXP: return 12;
    case CT_OP_LOG: return 13;
    case CT_OP_SQRT: return 14;
    case CT_OP_RSQRT: return 15;
    case CT_OP_SIN: return 16;
    case CT_OP_COS: return 17;
    case CT_OP_CLAMP: return 18;
    case CT_OP_RELU: return 19;
    case CT_OP_GELU: return 20;
    case CT_OP_SILU: return 21;
    case CT_OP_SIGMOID: return 22;
    case CT_OP_TANH: return 23;
    default: return -1;
    }
}

static bool is_int(ct_dtype t) { return t == CT_I8 || t == CT_I32 || t == CT_I64 || t == CT_BOOL; }

/* Buffers of dst and the sources, with the walk over dst's shape. */
typedef struct ew_io {
    ew_nd d;
    cl_mem m[EW_OPS];
    cl_ulong off[EW_OPS];
    cl_kernel k;
} ew_io;

static ct_status io_setup(ct_device *dev, const ct_op *op, const char *kernel, int n_src, ew_io *io)
{
    const ct_tensor *t[EW_OPS] = {op->dst};
    for (int i = 0; i < n_src; i++) t[1 + i] = op->src[i];
    ew_nd_build(&io->d, op->dst->ndim, op->dst->shape, t, 1 + n_src);
    ct_status s = CT_OK;
    for (int i = 0; i <= n_src && s == CT_OK; i++) s = ew_mem(t[i], dev, op_kind_name(op->kind), &io->m[i], &io->off[i]);
    return s == CT_OK ? ocl_kernel(dev, "ew", kernel, &io->k) : s;
}

static ct_status io_launch_n(ct_device *dev, const ct_op *op, ew_io *io, const char *kernel, int n, const ocl_arg *args)
{
    ct_status s = ocl_args(dev, io->k, kernel, n, args);
    size_t g = (size_t)shape_numel(op->dst->ndim, op->dst->shape);
    if (io->d.contig == EW_VEC4) g = (g + 3) / 4;
    return s == CT_OK ? ocl_launch(dev, io->k, kernel, 1, &g, NULL) : s;
}

/* Four elements a work-item (ew.cl's EW_VEC4 path) for ew_binary/ew_scalar/ew_unary when
 * every operand is dense and all share one float dtype (f32, f16, bf16). */
static void io_vec4(ew_io *io, const ct_op *op, int n_src)
{
    ct_dtype t = op->dst->dtype;
    if (!io->d.contig || io->d.nd != 1 || (t != CT_F32 && t != CT_F16 && t != CT_BF16)) return;
    for (int i = 0; i < n_src; i++)
        if (op->src[i]->dtype != t) return;
    io->d.contig = EW_VEC4;
}
#define io_launch(dev, op, io, kernel, ...)                                                                  \
    io_launch_n((dev), (op), (io), (kernel), (int)(sizeof((ocl_arg[]){__VA_ARGS__}) / sizeof(ocl_arg)),   \
                (ocl_arg[]){__VA_ARGS__})

static ct_status run_binary(ct_device *dev, const ct_op *op)
{
    ew_io io;
    ct_status s = io_setup(dev, op, "ew_binary", 2, &io);
    if (s != CT_OK) return s;
    io_vec4(&io, op, 2);
    cl_int ddt = op->dst->dtype, sdt = op->src[0]->dtype, code = ew_code(op->kind);
    return io_launch(dev, op, &io, "ew_binary", OCL_ARG(io.d), OCL_ARG(io.m[0]), OCL_ARG(io.off[0]), OCL_ARG(ddt),
                     OCL_ARG(io.m[1]), OCL_ARG(io.off[1]), OCL_ARG(io.m[2]), OCL_ARG(io.off[2]), OCL_ARG(sdt),
                     OCL_ARG(code));
}

static ct_status run_scalar(ct_device *dev, const ct_op *op)
{
    ew_io io;
    ct_status s = io_setup(dev, op, "ew_scalar", 1, &io);
    if (s != CT_OK) return s;
    io_vec4(&io, op, 1);
    cl_int ddt = op->dst->dtype, sdt = op->src[0]->dtype, code = ew_code(op->kind);
    double a = op->p.s.a;
    cl_float sf = (float)a;
    cl_long si = (cl_long)a, sb = bits_of(a); /* integral for integer sources (frontend) */
    return io_launch(dev, op, &io, "ew_scalar", OCL_ARG(io.d), OCL_ARG(io.m[0]), OCL_ARG(io.off[0]), OCL_ARG(ddt),
                     OCL_ARG(io.m[1]), OCL_ARG(io.off[1]), OCL_ARG(sdt), OCL_ARG(code), OCL_ARG(sf), OCL_ARG(si),
                     OCL_ARG(sb));
}

/* Clamp bounds for integer elements: integral or infinite (frontend). */
static cl_long bound_i(double v)
{
    if (v <= -9223372036854775808.0) return INT64_MIN;
    if (v >= 9223372036854775807.0) return INT64_MAX;
    return (cl_long)v;
}

static ct_status run_unary(ct_device *dev, const ct_op *op)
{
    ew_io io;
    ct_status s = io_setup(dev, op, "ew_unary", 1, &io);
    if (s != CT_OK) return s;
    io_vec4(&io, op, 1);
    cl_int ddt = op->dst->dtype, sdt = op->src[0]->dtype, code = ew_code(op->kind);
    cl_float p0 = (float)op->p.s.a, p1 = (float)op->p.s.b;
    cl_long lo = bound_i(op->p.s.a), hi = bound_i(op->p.s.b), b0 = bits_of(op->p.s.a), b1 = bits_of(op->p.s.b);
    return io_launch(dev, op, &io, "ew_unary", OCL_ARG(io.d), OCL_ARG(io.m[0]), OCL_ARG(io.off[0]), OCL_ARG(ddt),
                     OCL_ARG(io.m[1]), OCL_ARG(io.off[1]), OCL_ARG(sdt), OCL_ARG(code), OCL_ARG(p0), OCL_ARG(p1),
                     OCL_ARG(lo), OCL_ARG(hi), OCL_ARG(b0), OCL_ARG(b1));
}

/* ---- comparisons ---- */

/* The scalar as the source dtype sees it (rounded to that float type, as the CPU does). */
static double cmp_scalar_value(ct_dtype dt, double s)
{
    switch (dt) {
    case CT_F32: return (float)s;
    case CT_F16: return ct_f16_to_f32(ct_f32_to_f16((float)s));
    case CT_BF16: return ct_bf16_to_f32(ct_f32_to_bf16((float)s));
    default: return s;
    }
}

/* An integer source against a scalar: as an integer comparison where one exists
 * (x < 2.5 is x <= 2), else a fixed answer (NaN, out of range, x == 2.5). */
static void int_cmp_plan(ct_cmp c, double sv, cl_int *cmp, cl_long *si, cl_int *fixed)
{
    *cmp = (cl_int)c;
    *fixed = -1;
    *si = 0;
    if (isnan(sv)) {
        *fixed = c == CT_CMP_NE;
        return;
    }
    double lo = -9223372036854775808.0, hi = 9223372036854775808.0;
    bool below = sv < lo, above = sv >= hi;
    if (below || above) { /* every int64 is above (below) the scalar */
        bool x_gt = below;
        switch (c) {
        case CT_CMP_EQ: *fixed = 0; break;
        case CT_CMP_NE: *fixed = 1; break;
        case CT_CMP_LT: case CT_CMP_LE: *fixed = !x_gt; break;
        default: *fixed = x_gt; break;
        }
        return;
    }
    if (sv == floor(sv)) {
        *si = (cl_long)sv;
        return;
    }
    switch (c) {
    case CT_CMP_EQ: *fixed = 0; break;
    case CT_CMP_NE: *fixed = 1; break;
    case CT_CMP_LT: case CT_CMP_LE: *cmp = CT_CMP_LE, *si = (cl_long)floor(sv); break;
    default: *cmp = CT_CMP_GE, *si = (cl_long)ceil(sv); break;
    }
}

static ct_status run_cmp(ct_device *dev, const ct_op *op)
{
    bool scalar = op->kind == CT_OP_CMP_SCALAR;
    ew_io io;
    ct_status s = io_setup(dev, op, "ew_cmp", scalar ? 1 : 2, &io);
    if (s != CT_OK) return s;
    if (scalar) io.m[2] = io.m[1], io.off[2] = io.off[1];
    ct_dtype dt = op->src[0]->dtype;
    double sv = cmp_scalar_value(dt, op->p.cmp.a);
    cl_int sdt = dt, c = op->p.cmp.cmp, sc = scalar, fixed = -1;
    cl_float sf = (float)sv;
    cl_long si = 0, sb = bits_of(sv);
    if (scalar && is_int(dt)) int_cmp_plan(op->p.cmp.cmp, sv, &c, &si, &fixed);
    return io_launch(dev, op, &io, "ew_cmp", OCL_ARG(io.d), OCL_ARG(io.m[0]), OCL_ARG(io.off[0]), OCL_ARG(io.m[1]),
                     OCL_ARG(io.off[1]), OCL_ARG(io.m[2]), OCL_ARG(io.off[2]), OCL_ARG(sdt), OCL_ARG(c), OCL_ARG(sc),
                     OCL_ARG(fixed), OCL_ARG(sf), OCL_ARG(si), OCL_ARG(sb));
}

static ct_status run_where(ct_device *dev, const ct_op *op)
{
    ew_io io;
    ct_status s = io_setup(dev, op, "ew_where", 3, &io);
    if (s != CT_OK) return s;
    cl_int es = (cl_int)ct_dtype_block_bytes(op->dst->dtype);
    return io_launch(dev, op, &io, "ew_where", OCL_ARG(io.d), OCL_ARG(io.m[0]), OCL_ARG(io.off[0]), OCL_ARG(io.m[1]),
                     OCL_ARG(io.off[1]), OCL_ARG(io.m[2]), OCL_ARG(io.off[2]), OCL_ARG(io.m[3]), OCL_ARG(io.off[3]),
                     OCL_ARG(es));
}

/* ---- the group's entry points ---- */

static bool all_plain(const ct_device *dev, const ct_op *op)
{
    if (!ew_dtype_ok(dev, op->dst->dtype)) return false;
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && !ew_dtype_ok(dev, op->src[i]->dtype)) return false;
    return true;
}

/* What the kernels compute, by kind and source dtype (the frontends' promotions decide
 * what reaches here: integer division and transcendental functions of integers do not). */
static bool kind_ok(const ct_op *op)
{
    ct_dtype st = op->n_src ? op->src[0]->dtype : op->dst->dtype;
    switch (op->kind) {
    case CT_OP_FILL: case CT_OP_ARANGE: case CT_OP_EYE: case CT_OP_COPY: case CT_OP_CMP: case CT_OP_CMP_SCALAR:
        return true;
    case CT_OP_RAND: return !is_int(op->dst->dtype);
    case CT_OP_WHERE: return op->src[0]->dtype == CT_BOOL && op->src[1]->dtype == op->dst->dtype;
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_POW: case CT_OP_MAXIMUM: case CT_OP_MINIMUM:
    case CT_OP_ADD_SCALAR: case CT_OP_SUB_SCALAR: case CT_OP_MUL_SCALAR: case CT_OP_POW_SCALAR:
    case CT_OP_NEG: case CT_OP_ABS: case CT_OP_RELU: case CT_OP_CLAMP:
        return true;
    case CT_OP_DIV: case CT_OP_DIV_SCALAR: case CT_OP_SWIGLU: case CT_OP_GEGLU:
    case CT_OP_EXP: case CT_OP_LOG: case CT_OP_SQRT: case CT_OP_RSQRT: case CT_OP_SIN: case CT_OP_COS:
    case CT_OP_GELU: case CT_OP_SILU: case CT_OP_SIGMOID: case CT_OP_TANH:
        return !is_int(st);
    default: return ocl_ew_reduce_kind(op->kind);
    }
}

bool ocl_ew_supports(const ct_device *dev, const ct_op *op)
{
    if (!all_plain(dev, op) || !kind_ok(op)) return false;
    if (ocl_ew_reduce_kind(op->kind) && !ocl_ew_reduce_supports(dev, op)) return false;
    return ocl_program_ok(dev, "ew");
}

ct_status ocl_ew_run(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_FILL: return run_fill(dev, op);
    case CT_OP_COPY: return run_copy(dev, op);
    case CT_OP_ARANGE: case CT_OP_EYE: case CT_OP_RAND: return run_create(dev, op);
    case CT_OP_ADD: case CT_OP_SUB: case CT_OP_MUL: case CT_OP_DIV: case CT_OP_POW: case CT_OP_MAXIMUM:
    case CT_OP_MINIMUM: case CT_OP_SWIGLU: case CT_OP_GEGLU:
        return run_binary(dev, op);
    case CT_OP_ADD_SCALAR: case CT_OP_SUB_SCALAR: case CT_OP_MUL_SCALAR: case CT_OP_DIV_SCALAR: case CT_OP_POW_SCALAR:
        return run_scalar(dev, op);
    case CT_OP_CMP: case CT_OP_CMP_SCALAR: return run_cmp(dev, op);
    case CT_OP_WHERE: return run_where(dev, op);
    case CT_OP_NEG: case CT_OP_ABS: case CT_OP_EXP: case CT_OP_LOG: case CT_OP_SQRT: case CT_OP_RSQRT: case CT_OP_SIN:
    case CT_OP_COS: case CT_OP_CLAMP: case CT_OP_RELU: case CT_OP_GELU: case CT_OP_SILU: case CT_OP_SIGMOID:
    case CT_OP_TANH:
        return run_unary(dev, op);
    default:
        if (ocl_ew_reduce_kind(op->kind)) return ocl_ew_reduce_run(dev, op);
        return core_err(CT_ERR_UNSUPPORTED, "%s: %s is not an ew op", dev->info.name, op_kind_name(op->kind));
    }
}
