/* MATMUL and LINEAR with plain (f32/f16/bf16) operands on OpenCL. f32 products with more
 * than one row go to CLBlast where it is present and takes the layout; otherwise one tiled kernel
 * (nn_gemm: 32x32 tiles in local memory, 4x4 outputs per work-item) reads every operand
 * through its own strides, so transposed, broadcast (stride 0) and narrowed views need no
 * copy; a single output row (decode's linear) goes to nn_matvec, which reads each weight
 * row once, coalesced (on CPU devices to nn_matvec_rows: a work-item per output). Quantized weights belong to the quant group. */
#include "backends/opencl/nn_internal.h"

/* nn_gemm's fixed work-group (reqd_work_group_size in nn.cl) and tile */
#define GEMM_WG 8
#define GEMM_TS 32
#define MATVEC_WG 64

static ct_status gemm_launch(ct_device *dev, const char *name, const nn_gemm_desc *g)
{
    cl_mem am, bm, cm, biasm;
    cl_ulong ao, bo, co, biaso = 0;
    ct_status s = nn_mem(g->a, dev, name, &am, &ao);
    if (s == CT_OK) s = nn_mem(g->b, dev, name, &bm, &bo);
    if (s == CT_OK) s = nn_mem(g->c, dev, name, &cm, &co);
    biasm = am; /* absent bias: any valid buffer, never read */
    if (s == CT_OK && g->bias) s = nn_mem(g->bias, dev, name, &biasm, &biaso);
    if (s != CT_OK) return s;
    cl_int dta = nn_dt(g->a->dtype), dtb = nn_dt(g->b->dtype), dtc = nn_dt(g->c->dtype);
    cl_int dtbias = g->bias ? nn_dt(g->bias->dtype) : 0, has_bias = g->bias != NULL;
    cl_long bias_s = g->bias ? g->bias->stride[0] : 0;
    cl_long M = g->M, N = g->N, K = g->K;
    if (M == 1 && g->batches == 1 && g->sbk == 1) {
        /* one output row: y[n] = a_row . B[:, n], each B column a contiguous run */
        cl_long xs = g->sak, sbn = g->sbn;
        if (nn_cpu_style(dev)) {
            size_t wg = nn_wg(dev, MATVEC_WG), global = nn_round_up((size_t)N, wg);
            ocl_arg a[] = {OCL_ARG(am),     OCL_ARG(ao),       OCL_ARG(xs),  OCL_ARG(bm),    OCL_ARG(bo),
                           OCL_ARG(sbn),    OCL_ARG(cm),       OCL_ARG(co),  OCL_ARG(biasm), OCL_ARG(biaso),
                           OCL_ARG(bias_s), OCL_ARG(K),        OCL_ARG(dta), OCL_ARG(dtb),   OCL_ARG(dtc),
                           OCL_ARG(dtbias), OCL_ARG(has_bias), OCL_ARG(N)};
            return nn_launch(dev, "nn", "nn_matvec_rows", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
        }
        size_t wg = nn_wg(dev, MATVEC_WG), global = (size_t)N * wg;
        ocl_arg a[] = {OCL_ARG(am),     OCL_ARG(ao),     OCL_ARG(xs),  OCL_ARG(bm),     OCL_ARG(bo),
                       OCL_ARG(sbn),    OCL_ARG(cm),     OCL_ARG(co),  OCL_ARG(biasm),  OCL_ARG(biaso),
                       OCL_ARG(bias_s), OCL_ARG(K),      OCL_ARG(dta), OCL_ARG(dtb),    OCL_ARG(dtc),
                       OCL_ARG(dtbias), OCL_ARG(has_bias), OCL_LOCAL(wg * sizeof(float))};
        return nn_launch(dev, "nn", "nn_matvec", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
    }
    bool done;
    if ((s = nn_clblast_gemm(dev, g, &done)) != CT_OK || done) return s;
    cl_long8 ash = g->ash, ast = g->ast, bsh = g->bsh, bst = g->bst;
    cl_long sak = g->sak, sbk = g->sbk, sbn = g->sbn;
    size_t local[3] = {GEMM_WG, GEMM_WG, 1};
    size_t global[3] = {(size_t)((N + GEMM_TS - 1) / GEMM_TS) * GEMM_WG, (size_t)((M + GEMM_TS - 1) / GEMM_TS) * GEMM_WG,
                        (size_t)g->batches};
    ocl_arg a[] = {OCL_ARG(am),  OCL_ARG(ao),     OCL_ARG(bm),     OCL_ARG(bo),  OCL_ARG(cm),  OCL_ARG(co),
                   OCL_ARG(biasm), OCL_ARG(biaso), OCL_ARG(M),     OCL_ARG(N),   OCL_ARG(K),   OCL_ARG(ash),
                   OCL_ARG(ast), OCL_ARG(sak),    OCL_ARG(bsh),    OCL_ARG(bst), OCL_ARG(sbk), OCL_ARG(sbn),
                   OCL_ARG(bias_s), OCL_ARG(dta), OCL_ARG(dtb),    OCL_ARG(dtc), OCL_ARG(dtbias), OCL_ARG(has_bias)};
    return nn_launch(dev, "nn", "nn_gemm", (int)(sizeof a / sizeof a[0]), a, 3, global, local);
}

/* a [batch..., M, K] @ b [batch..., K, N] -> c [batch..., M, N] contiguous; the frontend
 * expanded both to the same batch shape (broadcast dims have stride 0). */
static ct_status run_matmul(ct_device *dev, const ct_op *op)
{
    const ct_tensor *a = op->src[0], *b = op->src[1], *c = op->dst;
    int nb = a->ndim - 2;
    nn_gemm_desc g = {.a = a, .b = b, .c = c, .M = a->shape[nb], .K = a->shape[nb + 1], .N = b->shape[nb + 1],
                   .sak = a->stride[nb + 1], .sbk = b->stride[nb], .sbn = b->stride[nb + 1]};
    g.batches = shape_numel(nb, a->shape);
    if (ct_tensor_numel(c) == 0) return CT_OK;
    nn_nd(&g.ash, &g.ast, nb + 1, a->shape, a->stride);
    nn_nd(&g.bsh, &g.bst, nb, b->shape, b->stride);
    /* a B shared by every batch: the batches are just more rows of one product (A's row walk
     * already spans its batch dims), so tiles are not cut at batch boundaries */
    bool shared = true;
    for (int d = 0; d < nb; d++) shared = shared && (b->stride[d] == 0 || b->shape[d] == 1);
    if (shared && g.batches > 1) {
        g.M *= g.batches;
        g.batches = 1;
        nn_nd(&g.bsh, &g.bst, 0, NULL, NULL);
    }
    return gemm_launch(dev, "matmul", &g);
}

/* x [..., K] @ w[N, K]^T + bias -> [..., N] f32 */
static ct_status run_linear(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *c = op->dst;
    int nd = x->ndim;
    nn_gemm_desc g = {.a = x, .b = w, .bias = op->src[2], .c = c, .N = w->shape[0], .K = w->shape[1], .batches = 1,
                   .sak = x->stride[nd - 1], .sbk = w->stride[1], .sbn = w->stride[0]};
    g.M = shape_numel(nd - 1, x->shape);
    if (ct_tensor_numel(c) == 0) return CT_OK;
    /* one row of x, f16 / bf16 weights: the quant group's one-row kernels, which also fuse */
    if (g.M == 1 && ocl_mv1_ok(dev, op)) return ocl_mv1_linear(dev, op);
    nn_nd(&g.ash, &g.ast, nd - 1, x->shape, x->stride);
    nn_nd(&g.bsh, &g.bst, 0, NULL, NULL);
    return gemm_launch(dev, "linear", &g);
}

bool nn_linalg_supports(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *a = op->src[0], *b = op->src[1], *c = op->dst;
    if (nn_dt(a->dtype) < 0 || nn_dt(b->dtype) < 0 || nn_dt(c->dtype) < 0 || !tensor_is_contiguous(c)) return false;
    if (op->kind == CT_OP_LINEAR && op->src[2] && nn_dt(op->src[2]->dtype) < 0) return false;
    if (op->kind == CT_OP_MATMUL && a->ndim < 2) return false;
    /* nn_gemm needs its 8x8 work-group */
    if (ocl_info(dev)->max_wg < GEMM_WG * GEMM_WG) return false;
    return ocl_program_ok(dev, "nn");
}

ct_status nn_linalg_run(ct_device *dev, const ct_op *op)
{
    return op->kind == CT_OP_MATMUL ? run_matmul(dev, op) : run_linear(dev, op);
}
