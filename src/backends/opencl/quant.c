/* The OpenCL quant group: ops with a block-quantized source (kernels/quant.cl).
 *   COPY       quantized rows -> f32/f16 view (dequantize), src broadcast over leading dims;
 *              or to the same quantized type, shape and contiguity (the bytes)
 *   EMBEDDING  rows of a quantized [V, D] table -> f32 [..., D]
 *   LINEAR     x f32 [..., K] @ w[N, K]^T (+ bias). GPUs: a matrix-vector kernel (a
 *              work-group per output row) for up to OCL_Q_MV_MAX_M rows of x (decode), a
 *              tiled one above (prompts). CPU devices: a work-item per weight row and
 *              OCL_Q_MV_MAX_M rows of x, for any number of rows
 * MATMUL with a quantized operand never reaches a backend: its frontend rewrites it as a
 * LINEAR. Weights are read in their GGUF layout (no import): the kernels already read a
 * row's blocks contiguously, so a reordered copy would only cost memory here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/ocl_internal.h"
#include "backends/opencl/quant.h"
#include "backends/opencl/quant_internal.h"

#define OCL_Q_MV_MAX_M 8  /* MV_MAX_M in quant.cl */
#define OCL_Q_MV_LOCAL 64 /* work-items per output row of the matrix-vector kernel */
#define OCL_Q_TILE 32     /* TILE in quant.cl: 8 x 8 work-items per TILE x TILE outputs */
#define OCL_Q_TILE_LOCAL_BYTES (2 * OCL_Q_TILE * (OCL_Q_TILE + 1) * 4)
#define OCL_Q_TILE2 64    /* matmul64_ in quant.cl: 16 x 16 work-items per 64 x 64 outputs, k-steps of TILE */
#define OCL_Q_TILE2_LOCAL_BYTES (2 * OCL_Q_TILE * (OCL_Q_TILE2 + 1) * 4)
#define OCL_Q_GROUP 16    /* every kernel reads blocks in groups of 16 elements */
#define OCL_Q_ROUND 64    /* 1-D launches are rounded up to this (the kernels bound-check) */

/* q_nd in quant.cl: only 8-byte members first, so both compilers lay it out alike. */
typedef struct ocl_q_nd {
    cl_long shape[CT_MAX_DIMS];
    cl_long dstr[CT_MAX_DIMS];
    cl_long sstr[CT_MAX_DIMS];
    cl_int nd;
    cl_int pad;
} ocl_q_nd;

/* The formats with kernels, by the suffix of their kernel names. */
const char *ocl_q_fmt_name(ct_dtype t)
{
    switch (t) {
    case CT_Q4_0: return "q4_0";
    case CT_Q4_1: return "q4_1";
    case CT_Q5_0: return "q5_0";
    case CT_Q5_1: return "q5_1";
    case CT_Q8_0: return "q8_0";
    case CT_Q2_K: return "q2_k";
    case CT_Q3_K: return "q3_k";
    case CT_Q4_K: return "q4_k";
    case CT_Q5_K: return "q5_k";
    case CT_Q6_K: return "q6_k";
    default: return NULL;
    }
}

static ct_status q_kernel(ct_device *dev, const char *kind, ct_dtype t, cl_kernel *k, char *name, size_t len)
{
    snprintf(name, len, "%s_%s", kind, ocl_q_fmt_name(t));
    return ocl_kernel(dev, OCL_Q_PROGRAM, name, k);
}

static ct_status q_mem(const ct_tensor *t, ct_device *dev, const char *op, const char *what, cl_mem *mem,
                       cl_ulong *off)
{
    *mem = ocl_mem(t, dev, off);
    if (!*mem)
        return core_err(CT_ERR_DEVICE_FAULT, "opencl: %s: %s %s %s has no copy on %s", op, what,
                        ct_dtype_name(t->dtype), SHAPE_STR(t), dev->info.name);
    return CT_OK;
}

static size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

/* Byte stride of a quantized tensor's dim d (its element stride holds whole blocks). */
bool ocl_q_byte_stride(const ct_tensor *t, int d, cl_long *out)
{
    int64_t bs = ct_dtype_block_size(t->dtype);
    if (t->stride[d] % bs != 0) return false;
    *out = (cl_long)(t->stride[d] / bs * (int64_t)ct_dtype_block_bytes(t->dtype));
    return true;
}

/* ---------------- COPY (dequantize) ---------------- */

/* dst's leading dims, with src's aligned to them (missing or size-1 src dims broadcast). */
static bool copy_nd(const ct_op *op, ocl_q_nd *nd)
{
    const ct_tensor *src = op->src[0], *dst = op->dst;
    memset(nd, 0, sizeof *nd);
    nd->nd = dst->ndim - 1;
    int lead = dst->ndim - src->ndim;
    for (int d = 0; d < nd->nd; d++) {
        nd->shape[d] = dst->shape[d];
        nd->dstr[d] = dst->stride[d];
        int sd = d - lead;
        if (sd < 0 || src->shape[sd] == 1) continue;
        if (src->shape[sd] != dst->shape[d] || !ocl_q_byte_stride(src, sd, &nd->sstr[d])) return false;
    }
    return true;
}

static bool copy_ok(const ct_op *op)
{
    const ct_tensor *src = op->src[0], *dst = op->dst;
    if (!ocl_q_fmt_name(src->dtype) || (dst->dtype != CT_F32 && dst->dtype != CT_F16)) return false;
    if (dst->ndim < 1 || src->ndim < 1 || src->ndim > dst->ndim) return false;
    int64_t D = dst->shape[dst->ndim - 1];
    ocl_q_nd nd;
    return src->shape[src->ndim - 1] == D && D % ct_dtype_block_size(src->dtype) == 0 &&
           (D <= 1 || src->stride[src->ndim - 1] == 1) && copy_nd(op, &nd);
}

static bool copy_blocks_ok(const ct_op *op)
{
    const ct_tensor *src = op->src[0], *dst = op->dst;
    return ocl_q_fmt_name(src->dtype) && dst->dtype == src->dtype && tensor_is_contiguous(src) &&
           tensor_is_contiguous(dst) && shape_equal(src->ndim, src->shape, dst->ndim, dst->shape);
}

static ct_status run_copy_blocks(ct_device *dev, const ct_op *op)
{
    cl_long n = (cl_long)ct_tensor_nbytes(op->dst);
    if (n == 0) return CT_OK;
    cl_mem sm, dm;
    cl_ulong soff, doff;
    cl_kernel k;
    ct_status s = q_mem(op->src[0], dev, "copy", "source", &sm, &soff);
    if (s == CT_OK) s = q_mem(op->dst, dev, "copy", "destination", &dm, &doff);
    if (s == CT_OK) s = ocl_kernel(dev, OCL_Q_PROGRAM, "copy_blocks", &k);
    if (s == CT_OK)
        s = OCL_SET_ARGS(dev, k, "copy_blocks", OCL_ARG(sm), OCL_ARG(soff), OCL_ARG(dm), OCL_ARG(doff), OCL_ARG(n));
    size_t global = round_up((size_t)n, OCL_Q_ROUND);
    return s != CT_OK ? s : ocl_launch(dev, k, "copy_blocks", 1, &global, NULL);
}

static ct_status run_copy(ct_device *dev, const ct_op *op)
{
    const ct_tensor *src = op->src[0], *dst = op->dst;
    if (ct_dtype_is_quantized(dst->dtype)) return run_copy_blocks(dev, op);
    int64_t D = dst->shape[dst->ndim - 1], rows = shape_numel(dst->ndim - 1, dst->shape);
    if (D == 0 || rows == 0) return CT_OK;
    ocl_q_nd nd;
    copy_nd(op, &nd);
    cl_mem sm, dm;
    cl_ulong soff, doff;
    ct_status s = q_mem(src, dev, "copy", "source", &sm, &soff);
    if (s == CT_OK) s = q_mem(dst, dev, "copy", "destination", &dm, &doff);
    cl_kernel k;
    char name[32];
    if (s == CT_OK) s = q_kernel(dev, "dequant", src->dtype, &k, name, sizeof name);
    if (s != CT_OK) return s;
    cl_long dcol = D > 1 ? dst->stride[dst->ndim - 1] : 1, gpr = D / OCL_Q_GROUP, total = rows * gpr;
    cl_int half_out = dst->dtype == CT_F16;
    s = OCL_SET_ARGS(dev, k, name, OCL_ARG(sm), OCL_ARG(soff), OCL_ARG(dm), OCL_ARG(doff), OCL_ARG(nd), OCL_ARG(dcol),
                     OCL_ARG(half_out), OCL_ARG(gpr), OCL_ARG(total));
    size_t global = round_up((size_t)total, OCL_Q_ROUND);
    return s != CT_OK ? s : ocl_launch(dev, k, name, 1, &global, NULL);
}

/* ---------------- EMBEDDING ---------------- */

static bool embed_ok(const ct_op *op)
{
    const ct_tensor *w = op->src[0], *ids = op->src[1];
    if (!ocl_q_fmt_name(w->dtype) || w->ndim != 2 || !ids || (ids->dtype != CT_I32 && ids->dtype != CT_I64)) return false;
    if (op->dst->dtype != CT_F32 || !tensor_is_contiguous(op->dst) || ids->ndim > CT_MAX_DIMS) return false;
    int64_t D = w->shape[1];
    cl_long wrow;
    return D % ct_dtype_block_size(w->dtype) == 0 && (D <= 1 || w->stride[1] == 1) &&
           (w->shape[0] <= 1 || ocl_q_byte_stride(w, 0, &wrow));
}

static ct_status run_embed(ct_device *dev, const ct_op *op)
{
    const ct_tensor *w = op->src[0], *ids = op->src[1];
    int64_t n = shape_numel(ids->ndim, ids->shape), D = w->shape[1];
    if (n == 0 || D == 0) return CT_OK;
    ocl_q_nd nd;
    memset(&nd, 0, sizeof nd);
    nd.nd = ids->ndim;
    for (int d = 0; d < ids->ndim; d++) {
        nd.shape[d] = ids->shape[d];
        nd.dstr[d] = ids->stride[d];
    }
    cl_long wrow = 0, V = w->shape[0], gpr = D / OCL_Q_GROUP, total = n * gpr;
    if (V > 1) ocl_q_byte_stride(w, 0, &wrow);
    cl_int ids64 = ids->dtype == CT_I64;
    cl_mem wm, im, om;
    cl_ulong woff, ioff, ooff;
    ct_status s = q_mem(w, dev, "embedding", "table", &wm, &woff);
    if (s == CT_OK) s = q_mem(ids, dev, "embedding", "ids", &im, &ioff);
    if (s == CT_OK) s = q_mem(op->dst, dev, "embedding", "output", &om, &ooff);
    cl_kernel k;
    char name[32];
    if (s == CT_OK) s = q_kernel(dev, "embed", w->dtype, &k, name, sizeof name);
    if (s != CT_OK) return s;
    s = OCL_SET_ARGS(dev, k, name, OCL_ARG(wm), OCL_ARG(woff), OCL_ARG(wrow), OCL_ARG(im), OCL_ARG(ioff),
                     OCL_ARG(ids64), OCL_ARG(nd), OCL_ARG(om), OCL_ARG(ooff), OCL_ARG(V), OCL_ARG(gpr), OCL_ARG(total));
    size_t global = round_up((size_t)total, OCL_Q_ROUND);
    return s != CT_OK ? s : ocl_launch(dev, k, name, 1, &global, NULL);
}

/* ---------------- LINEAR ---------------- */

static ocl_q_matvec g_matvec = OCL_Q_MATVEC_AUTO;

void ocl_quant_test_matvec(ocl_q_matvec mode) { g_matvec = mode; }

/* The GPU kernels, or (CPU devices: PoCL sets up each work-group in about a microsecond,
 * 42 ms for a 32000-row output layer; its tiled products ran at half the speed) a
 * work-item per weight row. */
bool ocl_q_matvec_rows(const ocl_dev_info *info)
{
    if (g_matvec != OCL_Q_MATVEC_AUTO) return g_matvec == OCL_Q_MATVEC_ROWS;
    /* a diagnostic switch: the GPU kernels (and the step planner's fusions) on a CPU device */
    const char *e = getenv("CTORCH_OPENCL_MATVEC");
    if (e && (!strcmp(e, "groups") || !strcmp(e, "rows"))) return e[0] == 'r';
    return (info->type & CL_DEVICE_TYPE_CPU) != 0;
}

/* x's leading dims fold into rows of one stride (rs), elements csx apart. */
bool ocl_q_x_rows(const ct_tensor *x, cl_long *rs, cl_long *cs)
{
    int nd = x->ndim;
    int64_t K = x->shape[nd - 1], expect = -1, span = 1;
    for (int d = nd - 2; d >= 0; d--) {
        if (x->shape[d] == 1) continue;
        if (expect == -1) expect = x->stride[d];
        if (x->stride[d] != expect * span) return false;
        span *= x->shape[d];
    }
    *rs = expect == -1 ? K : expect;
    *cs = K > 1 ? x->stride[nd - 1] : 1;
    return true;
}

int ocl_q_bias_kind(const ct_tensor *b)
{
    if (!b) return 0;
    switch (b->dtype) {
    case CT_F32: return 1;
    case CT_F16: return 2;
    case CT_BF16: return 3;
    default: return -1;
    }
}

/* The matrix-vector kernel's local size: a power of two, at least OCL_Q_MV_MAX_M (the
 * work-items that write the M results), within the device's limit. */
static size_t mv_local(const ocl_dev_info *info)
{
    size_t ls = OCL_Q_MV_LOCAL;
    while (ls > info->max_wg) ls /= 2;
    return ls;
}

static bool linear_ok(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2];
    if (!ocl_q_fmt_name(w->dtype) || w->ndim != 2 || x->dtype != CT_F32 || x->ndim < 1) return false;
    if (op->dst->dtype != CT_F32 || !tensor_is_contiguous(op->dst) || ocl_q_bias_kind(b) < 0 || (b && b->ndim != 1))
        return false;
    int64_t N = w->shape[0], K = w->shape[1];
    cl_long rs, cs, wrow;
    if (K == 0 || K % ct_dtype_block_size(w->dtype) != 0 || w->stride[1] != 1 || !ocl_q_x_rows(x, &rs, &cs)) return false;
    if (N > 1 && !ocl_q_byte_stride(w, 0, &wrow)) return false;
    const ocl_dev_info *info = ocl_info(dev);
    int64_t M = shape_numel(x->ndim - 1, x->shape);
    if (ocl_q_matvec_rows(info)) return true;
    if (M <= OCL_Q_MV_MAX_M)
        return mv_local(info) >= OCL_Q_MV_MAX_M && info->local_mem >= OCL_Q_MV_MAX_M * mv_local(info) * sizeof(float);
    return info->max_wg >= 64 && info->local_mem >= OCL_Q_TILE_LOCAL_BYTES;
}

static ct_status run_linear(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2];
    int64_t N = w->shape[0], K = w->shape[1], M = shape_numel(x->ndim - 1, x->shape);
    if (M == 0 || N == 0) return CT_OK;
    cl_long rsx, csx, wrow = 0, bstride = b ? b->stride[0] : 0, lN = N, lK = K;
    ocl_q_x_rows(x, &rsx, &csx);
    if (N > 1) ocl_q_byte_stride(w, 0, &wrow);
    cl_int bk = ocl_q_bias_kind(b);
    cl_mem wm, xm, om, bm;
    cl_ulong woff, xoff, ooff, boff = 0;
    ct_status s = q_mem(w, dev, "linear", "weight", &wm, &woff);
    if (s == CT_OK) s = q_mem(x, dev, "linear", "input", &xm, &xoff);
    if (s == CT_OK) s = q_mem(op->dst, dev, "linear", "output", &om, &ooff);
    if (s == CT_OK && b) s = q_mem(b, dev, "linear", "bias", &bm, &boff);
    if (s != CT_OK) return s;
    if (!b) bm = xm; /* never read (bias_kind 0); a real buffer keeps every driver happy */
    const ocl_dev_info *info = ocl_info(dev);
    bool rows = ocl_q_matvec_rows(info), decode = M <= OCL_Q_MV_MAX_M;
    /* prompts of a tile's rows or more on the large tiles, where the device has room
     * (CTORCH_OPENCL_TILE=32 keeps them on the small ones: an A/B switch) */
    static int small = -1;
    if (small < 0) small = getenv("CTORCH_OPENCL_TILE") && !strcmp(getenv("CTORCH_OPENCL_TILE"), "32");
    bool big = !rows && !decode && M >= OCL_Q_TILE2 && N >= OCL_Q_TILE2 && g_matvec != OCL_Q_MATVEC_TILE32 &&
               !small && info->max_wg >= 256 && info->local_mem >= OCL_Q_TILE2_LOCAL_BYTES;
    cl_kernel k;
    char name[32];
    if (!rows && M == 1 && ocl_mv1_ok(dev, op)) return ocl_mv1_linear(dev, op);
    s = q_kernel(dev, rows ? "matvec_rows" : decode ? "matvec" : big ? "matmul64" : "matmul", w->dtype, &k, name,
                 sizeof name);
    if (s != CT_OK) return s;
    ocl_arg args[17] = {OCL_ARG(wm), OCL_ARG(woff), OCL_ARG(wrow), OCL_ARG(xm),  OCL_ARG(xoff), OCL_ARG(rsx),
                        OCL_ARG(csx), OCL_ARG(om), OCL_ARG(ooff), OCL_ARG(bm), OCL_ARG(boff), OCL_ARG(bk),
                        OCL_ARG(bstride)};
    cl_long lM = M;
    if (rows) {
        size_t global[2] = {round_up((size_t)N, OCL_Q_ROUND), ((size_t)M + OCL_Q_MV_MAX_M - 1) / OCL_Q_MV_MAX_M};
        args[13] = OCL_ARG(lM);
        args[14] = OCL_ARG(lN);
        args[15] = OCL_ARG(lK);
        s = ocl_args(dev, k, name, 16, args);
        return s != CT_OK ? s : ocl_launch(dev, k, name, 2, global, NULL);
    }
    if (decode) {
        size_t ls = mv_local(ocl_info(dev)), global = (size_t)N * ls;
        cl_int m = (cl_int)M;
        args[13] = OCL_ARG(m);
        args[14] = OCL_ARG(lN);
        args[15] = OCL_ARG(lK);
        args[16] = OCL_LOCAL(sizeof(float) * OCL_Q_MV_MAX_M * ls);
        s = ocl_args(dev, k, name, 17, args);
        return s != CT_OK ? s : ocl_launch(dev, k, name, 1, &global, &ls);
    }
    args[13] = OCL_ARG(lM);
    args[14] = OCL_ARG(lN);
    args[15] = OCL_ARG(lK);
    s = ocl_args(dev, k, name, 16, args);
    size_t t = big ? OCL_Q_TILE2 : OCL_Q_TILE, global[2] = {round_up((size_t)N, t) / 4, round_up((size_t)M, t) / 4};
    size_t local[2] = {t / 4, t / 4};
    return s != CT_OK ? s : ocl_launch(dev, k, name, 2, global, local);
}

/* ---------------- the group's entry points ---------------- */

bool ocl_quant_supports(const ct_device *dev, const ct_op *op)
{
    bool ok;
    switch (op->kind) {
    case CT_OP_COPY: ok = copy_ok(op) || copy_blocks_ok(op); break;
    case CT_OP_EMBEDDING: ok = embed_ok(op); break;
    case CT_OP_LINEAR: ok = linear_ok(dev, op); break;
    default: ok = false; break;
    }
    return ok && ocl_program_ok(dev, OCL_Q_PROGRAM);
}

ct_status ocl_quant_run(ct_device *dev, const ct_op *op)
{
    if (!ocl_quant_supports(dev, op))
        return core_err(CT_ERR_UNSUPPORTED, "opencl: %s with these operands is not in the quant group",
                        op_kind_name(op->kind));
    switch (op->kind) {
    case CT_OP_COPY: return run_copy(dev, op);
    case CT_OP_EMBEDDING: return run_embed(dev, op);
    default: return run_linear(dev, op);
    }
}

ct_status ocl_quant_import(ct_device *dev, const ct_tensor *t)
{
    (void)dev;
    (void)t;
    return CT_OK;
}
