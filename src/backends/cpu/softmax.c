/* SOFTMAX, LOG_SOFTMAX along one dim (any dim, any strides). Rows contiguous in
 * f32 on both sides run the SIMD row kernels in place; other f32/f16/bf16 rows
 * are gathered into an f32 buffer, done there and scattered back; f64 rows use
 * a double loop. Every row subtracts its max first, so large inputs never
 * overflow; a row of all -inf gives NaN (as in torch). */
#include <stdlib.h>

#include "backends/cpu/elementwise.h"

/* Rows up to this long stage exp() in a stack buffer, so the final scaled
 * store is the only write to dst (and can be a streaming one). */
#define SM_STACK 2048

typedef struct sm_ctx {
    const ct_op *op;
    const ew_f32_kernels *k;
    bool log, stream;
    ct_dtype dt;
    const char *src;
    char *dst;
    size_t esize;
    int64_t len, sstride, dstride;     /* along dim, in elements */
    int n_outer;
    int64_t oshape[CT_MAX_DIMS], osrc[CT_MAX_DIMS], odst[CT_MAX_DIMS]; /* the other dims */
    int failed;
} sm_ctx;

/* softmax/log_softmax of a contiguous f32 row; d may equal a. */
static void sm_row_f32(const sm_ctx *c, float *d, const float *a, int64_t n, float *scratch, bool stream)
{
    const ew_f32_kernels *k = c->k;
    float m = k->max(a, n);
    if (c->log) {
        /* (a - m) - log(sum) in two steps: folding m into one constant would
         * cost absolute accuracy when |m| is large */
        float lse = (float)log(k->exp_sum(NULL, a, m, n));
        k->vs(CT_OP_SUB, d, a, m, false, n, false);
        k->vs(CT_OP_SUB, d, d, lse, false, n, false);
        return;
    }
    if (scratch) {
        double sum = k->exp_sum(scratch, a, m, n);
        k->vs(CT_OP_MUL, d, scratch, (float)(1.0 / sum), false, n, stream);
    } else {
        double sum = k->exp_sum(d, a, m, n);
        k->vs(CT_OP_MUL, d, d, (float)(1.0 / sum), false, n, false);
    }
}

static void sm_row_f64(const sm_ctx *c, double *d, int64_t ds, const double *a, int64_t as, int64_t n)
{
    double m = -INFINITY, sum = 0.0;
    for (int64_t i = 0; i < n; i++) m = a[i * as] > m ? a[i * as] : m;
    for (int64_t i = 0; i < n; i++) sum += exp(a[i * as] - m);
    if (c->log) {
        double lse = log(sum);
        for (int64_t i = 0; i < n; i++) d[i * ds] = (a[i * as] - m) - lse;
    } else {
        for (int64_t i = 0; i < n; i++) d[i * ds] = exp(a[i * as] - m) / sum;
    }
}

static void sm_rows(void *vctx, int64_t b, int64_t e)
{
    sm_ctx *c = vctx;
    int64_t n = c->len;
    bool fast = c->dt == CT_F32 && c->sstride == 1 && c->dstride == 1;
    float stack[SM_STACK], *buf = NULL;
    if (!fast && c->dt != CT_F64) {
        buf = n <= SM_STACK ? stack : malloc(sizeof(float) * (size_t)n);
        if (!buf) {
            __atomic_store_n(&c->failed, 1, __ATOMIC_RELAXED);
            return;
        }
    }
    for (int64_t r = b; r < e; r++) {
        int64_t so = 0, dof = 0, idx = r;
        for (int d = c->n_outer - 1; d >= 0; d--) {
            int64_t i = idx % c->oshape[d];
            idx /= c->oshape[d];
            so += i * c->osrc[d];
            dof += i * c->odst[d];
        }
        const char *a = c->src + so * (int64_t)c->esize;
        char *d = c->dst + dof * (int64_t)c->esize;
        if (fast) {
            sm_row_f32(c, (float *)d, (const float *)a, n, n <= SM_STACK ? stack : NULL, c->stream);
        } else if (c->dt == CT_F64) {
            sm_row_f64(c, (double *)d, c->dstride, (const double *)a, c->sstride, n);
        } else {
            for (int64_t i = 0; i < n; i++) buf[i] = cpu_load_f32(a + i * c->sstride * (int64_t)c->esize, c->dt);
            sm_row_f32(c, buf, buf, n, NULL, false);
            for (int64_t i = 0; i < n; i++) {
                char *p = d + i * c->dstride * (int64_t)c->esize;
                if (c->dt == CT_F32) *(float *)p = buf[i];
                else cpu_store_f64(p, c->dt, buf[i]);
            }
        }
    }
    if (buf && buf != stack) free(buf);
}

ct_status cpu_run_softmax(ct_device *dev, const ct_op *op)
{
    const ct_tensor *src = op->src[0], *dst = op->dst;
    ct_dtype dt = src->dtype;
    if ((dt != CT_F32 && dt != CT_F64 && dt != CT_F16 && dt != CT_BF16) || dst->dtype != dt)
        return core_err(CT_ERR_DTYPE, "cpu: %s needs matching float source and result, got %s -> %s",
                        op_kind_name(op->kind), ct_dtype_name(dt), ct_dtype_name(dst->dtype));
    int dim = op->p.dim.dim;
    if (src->ndim > 0 && (dim < 0 || dim >= src->ndim))
        return core_err(CT_ERR_INVALID_ARG, "cpu: %s dim %d out of range for %s", op_kind_name(op->kind), dim,
                        SHAPE_STR(src));
    int64_t numel = ct_tensor_numel(src);
    if (numel == 0) return CT_OK;
    sm_ctx c = {.op = op, .k = ew_f32_table(cpu_simd_level()), .log = op->kind == CT_OP_LOG_SOFTMAX, .dt = dt,
                .src = op_data(src, dev), .dst = op_data(dst, dev), .esize = ct_dtype_block_bytes(dt),
                .len = 1, .sstride = 1, .dstride = 1};
    c.stream = (size_t)numel * c.esize >= EW_STREAM_BYTES;
    if (src->ndim > 0) {
        c.len = src->shape[dim];
        c.sstride = src->stride[dim];
        c.dstride = dst->stride[dim];
        for (int d = 0; d < src->ndim; d++) {
            if (d == dim || src->shape[d] == 1) continue;
            c.oshape[c.n_outer] = src->shape[d];
            c.osrc[c.n_outer] = src->stride[d];
            c.odst[c.n_outer] = dst->stride[d];
            c.n_outer++;
        }
    }
    int64_t rows = numel / c.len;
    if (numel <= EW_GRAIN) sm_rows(&c, 0, rows);
    else cpu_parallel_for(rows, (EW_GRAIN + c.len - 1) / c.len, sm_rows, &c);
    if (c.failed)
        return core_err(CT_ERR_OOM, "cpu: %s: no memory for a %lld-element row buffer", op_kind_name(op->kind),
                        (long long)c.len);
    return CT_OK;
}
