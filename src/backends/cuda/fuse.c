/* The CUDA step planner: what core/fuse.c matched in a captured segment, launched as
 * fused kernels. A group the kernels turn down (a launcher declining, found only here)
 * runs op by op, as does everything the planner left alone; the eager path (`run`)
 * never comes here. */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/fuse.h"
#include "backends/cuda/fuse_kernels.h"
#include "core/config.h"
#include "core/fuse.h"

/* ---- rope + row writes (fuse_kernels.cu) ---- */

static bool rope_job(const ct_device *dev, const ct_op *ops, const fuse_group *g, fusek_prologue *p)
{
    memset(p, 0, sizeof *p);
    if (g->n_rope > FUSEK_MAX_ROPE || g->n_rows > FUSEK_MAX_ROWS) return false;
    const ct_op *r0 = &ops[g->rope[0]];
    const ct_rope_params *rp = &r0->p.rope;
    p->D = r0->src[0]->shape[2];
    p->n_dims = rp->n_dims;
    if (p->n_dims < 0 || p->n_dims % 2 || p->n_dims > p->D) return false;
    p->freq_base = rp->freq_base;
    p->freq_scale = rp->freq_scale;
    p->neox = rp->mode == CT_ROPE_NEOX;
    p->pos = op_data(r0->src[1], dev);
    p->pdt = r0->src[1]->dtype;
    if (!p->pos || r0->src[1]->shape[0] < 1) return false;
    p->n_rope = g->n_rope;
    for (int r = 0; r < g->n_rope; r++) {
        const ct_op *op = &ops[g->rope[r]];
        const ct_tensor *x = op->src[0];
        fusek_rope *R = &p->rope[r];
        if (x->shape[2] != p->D) return false;
        R->x = op_data(x, dev);
        R->xh = x->stride[1];
        R->y = op_data(op->dst, dev);
        R->H = x->shape[1];
        if (!R->x || !R->y) return false;
    }
    p->n_rows = g->n_rows;
    for (int w = 0; w < g->n_rows; w++) {
        const ct_op *op = &ops[g->rows[w]];
        const ct_tensor *src = op->src[0], *idx = op->src[1], *dst = op->dst;
        fusek_rows *W = &p->rows[w];
        W->from_rope = g->rows_rope[w];
        W->src = op_data(src, dev);
        W->s0 = src->stride[0];
        W->s1 = src->stride[1];
        W->idx = op_data(idx, dev);
        W->idt = idx->dtype;
        W->is = idx->stride[0];
        W->n = src->shape[0];
        W->cols = src->shape[1];
        W->dst = op_data(dst, dev);
        W->ddt = dst->dtype;
        W->d0 = dst->stride[0];
        W->d1 = dst->stride[1];
        W->rows = dst->shape[0];
        if (!W->src || !W->idx || !W->dst) return false;
    }
    return true;
}

static bool caps_rope(void *ctx, const ct_op *ops, const fuse_group *g)
{
    fusek_prologue p;
    return rope_job(ctx, ops, g, &p);
}

static ct_status run_rope(ct_device *dev, const ct_op *ops, const fuse_group *g, int *done)
{
    fusek_prologue p;
    if (!rope_job(dev, ops, g, &p)) return CT_OK;
    *done = g->n;
    cudaError_t e = fusek_rope_rows(&p, cuda_of(dev)->stream);
    if (e != cudaSuccess) return cuda_status(e, dev, "fused rope + set_rows");
    return cuda_check_launch(dev, "fused rope + set_rows");
}

/* ---- the plan ---- */

/* Launches group g fused; *done = how many of its leading ops that covered (0: the kernels
 * declined it, nothing was launched; the caller runs the rest op by op). */
static ct_status run_fused(ct_device *dev, const ct_op *ops, const fuse_group *g, int *done)
{
    *done = 0;
    switch (g->kind) {
    case FUSE_ROPE: return run_rope(dev, ops, g, done);
    default: return CT_OK;
    }
}

ct_status cuda_fuse_run(ct_device *dev, const ct_op *ops, int n, cuda_run_fn run_one)
{
    fuse_group *plan = malloc(sizeof *plan * (size_t)(n > 0 ? n : 1));
    if (!plan) return core_err(CT_ERR_OOM, "%s: out of host memory planning a step of %d ops", dev->info.name, n);
    fuse_caps caps = {.ctx = dev};
    if (config_current()->fuse) caps.rope_ok = caps_rope; /* CTORCH_FUSE=0: every op alone */
    int ng = fuse_plan(ops, n, &caps, plan);
    ct_status s = CT_OK;
    for (int i = 0; i < ng && s == CT_OK; i++) {
        const fuse_group *g = &plan[i];
        int done = 0;
        if (g->kind != FUSE_NONE) {
            s = run_fused(dev, ops, g, &done);
            char what[128];
            if (s == CT_OK)
                core_note("%s: step: %s %s", dev->info.name, done == g->n ? "fused" : done ? "partly fused" : "declined",
                          fuse_describe(ops, g, what, sizeof what));
        }
        for (int k = done; s == CT_OK && k < g->n; k++) s = run_one(dev, &ops[g->first + k]);
    }
    free(plan);
    return s;
}
