/* The CUDA step planner: what core/fuse.c matched in a captured segment, launched as
 * fused kernels: norm + linears + epilogue through the quant group's fused decode contract
 * (quant_kernels.h: one cuq_mv_run, whose kernel normalizes x and quantizes it itself, for
 * every weight reading the norm's output), the attention prologue through fuse_kernels.cu. A group the kernels turn
 * down (a launcher declining, found only here) runs op by op, as does everything the
 * planner left alone; the eager path (`run`) never comes here.
 * Measured on an H100 (TinyLlama-shaped Q4_K_M, 22 layers, `ctorch bench -d cuda -p 512 -n 128
 * -r 3`, CTORCH_FUSE=0 vs 1 in one binary): the decode step's 377 ops go from 466 graph nodes
 * to 223 (per layer: norm+q/k/v, rope+rows, sdpa, o+add, norm+gate/up+swiglu, down+add), tg128
 * from 386 to 431 t/s; what is left is in the kernels themselves (attention, the matvecs).
 * Whether the job kernel also makes the norm (one launch a group) is cuq_mv_run's choice,
 * by measurement (quant_fused.cu). */
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/fuse.h"
#include "backends/cuda/fuse_kernels.h"
#include "backends/cuda/quant_kernels.h"
#include "core/config.h"
#include "core/fuse.h"

/* ---- rope + row writes (fuse_kernels.cu) ---- */

/* The per-head norm before rope R (core/fuse.c checked its shapes and weight). */
static bool rope_norm(const ct_device *dev, const ct_op *nm, fusek_rope *R)
{
    const ct_tensor *w = nm->src[1];
    if (R->H > FUSEK_MAX_NORM_HEADS) return false;
    R->ny = op_data(nm->dst, dev);
    R->nw = op_data(w, dev);
    R->nwdt = w->dtype;
    R->eps = nm->p.norm.eps;
    return R->ny && R->nw;
}

/* No op of the captured run before group g writes over t: t then holds what the host
 * copied in before the graph's launch, which PDL's early start may read before the wait. */
static bool unwritten_before(const ct_op *ops, const fuse_group *g, const ct_tensor *t)
{
    for (int i = 0; i < g->first; i++)
        if (ops[i].dst && fuse_overlap(ops[i].dst, t)) return false;
    return true;
}

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
    p->early = unwritten_before(ops, g, r0->src[1]);
    p->n_rope = g->n_rope;
    for (int r = 0; r < g->n_rope; r++) {
        const ct_op *op = &ops[g->rope[r]];
        const ct_tensor *x = op->src[0];
        fusek_rope *R = &p->rope[r];
        if (x->shape[2] != p->D) return false;
        R->H = x->shape[1];
        R->y = op_data(op->dst, dev);
        if (g->rope_norm[r] >= 0 && !rope_norm(dev, &ops[g->rope_norm[r]], R)) return false;
        if (R->ny) x = ops[g->rope_norm[r]].src[0]; /* the norm's input, normalized on the way */
        R->x = op_data(x, dev);
        R->xh = x->stride[1];
        if (!R->x || !R->y || x->shape[2] != p->D || x->shape[1] != R->H) return false;
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
        p->early = p->early && unwritten_before(ops, g, idx);
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

/* ---- post-norm + residual add (fuse_kernels.cu) ---- */

static bool norm_add_job(const ct_device *dev, const ct_op *ops, const fuse_group *g, fusek_norm_add *p)
{
    memset(p, 0, sizeof *p);
    const ct_op *nm = &ops[g->norm], *a = &ops[g->add];
    const ct_tensor *x = nm->src[0], *w = nm->n_src > 1 ? nm->src[1] : NULL;
    p->K = x->shape[x->ndim - 1];
    p->M = shape_numel(x->ndim - 1, x->shape);
    if (w && (w->ndim != 1 || w->shape[0] != p->K || (p->K > 1 && w->stride[0] != 1) ||
              (w->dtype != CT_F32 && w->dtype != CT_F16 && w->dtype != CT_BF16)))
        return false;
    p->x = op_data(x, dev);
    p->w = w ? op_data(w, dev) : NULL;
    p->wdt = w ? w->dtype : CT_F32;
    p->eps = nm->p.norm.eps;
    p->y = op_data(nm->dst, dev);
    p->r = op_data(a->src[g->add_res], dev);
    p->z = op_data(a->dst, dev);
    p->w_early = w && unwritten_before(ops, g, w);
    return p->M > 0 && p->M <= 65535 && p->x && (!w || p->w) && p->y && p->r && p->z;
}

static bool caps_norm_add(void *ctx, const ct_op *ops, const fuse_group *g)
{
    fusek_norm_add p;
    return norm_add_job(ctx, ops, g, &p);
}

static ct_status run_norm_add(ct_device *dev, const ct_op *ops, const fuse_group *g, int *done)
{
    fusek_norm_add p;
    if (!norm_add_job(dev, ops, g, &p)) return CT_OK;
    *done = g->n;
    cudaError_t e = fusek_norm_add_rows(&p, cuda_of(dev)->stream);
    if (e != cudaSuccess) return cuda_status(e, dev, "fused rms_norm + add");
    return cuda_check_launch(dev, "fused rms_norm + add");
}

/* ---- norm + linears + epilogue (quant_kernels.h: the fused decode contract) ---- */

typedef struct mv_plan {
    cuq_mv_job job;
} mv_plan;

static bool plain_float(ct_dtype t) { return t == CT_F32 || t == CT_F16 || t == CT_BF16; }

static bool mv_norm(const ct_device *dev, const ct_op *ops, const fuse_group *g, int64_t M, int64_t K, mv_plan *p)
{
    const ct_op *op = &ops[g->norm];
    const ct_tensor *x = op->src[0], *w = op->src[1];
    if (!w || w->ndim != 1 || w->shape[0] != K || (K > 1 && w->stride[0] != 1) || !plain_float(w->dtype)) return false;
    if (!tensor_is_contiguous(x) || x->shape[x->ndim - 1] != K || shape_numel(x->ndim, x->shape) != M * K) return false;
    /* the job normalizes x itself; the norm's output (p->job.x until now) is still written */
    cuq_mv_norm *n = &p->job.norm;
    n->on = true;
    n->w = op_data(w, dev);
    n->wdt = w->dtype;
    n->eps = (float)op->p.norm.eps;
    n->y = (float *)p->job.x;
    n->w_early = unwritten_before(ops, g, w);
    p->job.x = op_data(x, dev);
    return p->job.x && n->w;
}

static bool mv_part(const ct_device *dev, const ct_op *op, int64_t K, cuq_mv_part *part)
{
    const ct_tensor *w = op->src[1];
    int64_t N = w->shape[0];
    if (w->shape[1] != K || (K > 1 && w->stride[1] != 1)) return false;
    bool q = ct_dtype_is_quantized(w->dtype);
    if (!q && !plain_float(w->dtype)) return false;
    if (q && N > 1 && w->stride[0] % ct_dtype_block_size(w->dtype) != 0) return false;
    part->wt = w->dtype;
    part->w = op_data(w, dev);
    part->w_row = ct_dtype_row_bytes(w->dtype, N > 1 ? w->stride[0] : K); /* one row: its stride is free */
    part->N = N;
    part->out = op_data(op->dst, dev);
    return part->w && part->out;
}

static bool mv_job(const ct_device *dev, const ct_op *ops, const fuse_group *g, mv_plan *p)
{
    memset(p, 0, sizeof *p);
    const ct_tensor *x = ops[g->lin[0]].src[0];
    int64_t K = x->shape[x->ndim - 1], M = shape_numel(x->ndim - 1, x->shape);
    cuq_mv_job *j = &p->job;
    if (M < 1 || M > CUQ_MV_MAX_ROWS || K < 1 || g->n_lin > CUQ_MV_MAX_PARTS) return false;
    j->M = M;
    j->K = K;
    j->x = op_data(x, dev); /* contiguous (core/fuse.c): rows K apart */
    j->x_row = K;
    if (!j->x || (g->norm >= 0 && !mv_norm(dev, ops, g, M, K, p))) return false;
    j->n_parts = g->n_lin;
    for (int i = 0; i < g->n_lin; i++)
        if (!mv_part(dev, &ops[g->lin[i]], K, &j->part[i])) return false;
    if (g->add >= 0) {
        const ct_op *a = &ops[g->add];
        cuq_mv_part *pt = &j->part[g->add_lin];
        pt->add = op_data(a->src[g->add_res], dev);
        pt->out2 = op_data(a->dst, dev);
        if (!pt->add || !pt->out2) return false;
    }
    if (g->glu >= 0) {
        j->glu = ops[g->glu].kind == CT_OP_SWIGLU ? 1 : 2;
        j->glu_out = op_data(ops[g->glu].dst, dev);
        if (!j->glu_out) return false;
    }
    return cuq_mv_ok(j);
}

static bool caps_mv(void *ctx, const ct_op *ops, const fuse_group *g)
{
    mv_plan p;
    return mv_job(ctx, ops, g, &p);
}

/* *launched: the job's kernels are in the stream. */
static ct_status launch_mv(ct_device *dev, const cuq_mv_job *j, bool *launched)
{
    cuda_dev *cd = cuda_of(dev);
    void *tmp = NULL;
    size_t tbytes = cuq_mv_tmp_bytes(j);
    ct_status s = CT_OK;
    *launched = false;
    if (tbytes && (s = cuda_tmp_alloc(dev, tbytes, &tmp)) != CT_OK) return s;
    /* a run that launched nothing declines the group; one that launched a norm or quantize
     * kernel and then failed leaves a launch error for the check */
    if (cuq_mv_run(j, tmp, cd->sm_count, cd->stream)) {
        if ((s = cuda_check_launch(dev, "fused norm + matvecs")) == CT_OK) *launched = true;
    }
    /* stream order (and, in a capture, the graph) keeps it until the kernels are done */
    if (tmp) cuda_tmp_free(dev, tmp, tbytes);
    return s;
}

static ct_status run_mv(ct_device *dev, const ct_op *ops, const fuse_group *g, int *done)
{
    mv_plan p;
    if (!mv_job(dev, ops, g, &p)) return CT_OK;
    bool launched;
    ct_status s = launch_mv(dev, &p.job, &launched);
    if (launched) *done = g->n;
    return s;
}

/* ---- q/k/v linears with the attention prologue (rope + row writes) in their epilogue ---- */

/* A pairing's switch: on unless the variable starts with 0 (read at each capture, so a test
 * can record a step both ways): CTORCH_CUDA_ROPE_JOB=0 keeps the prologue's own kernel,
 * CTORCH_CUDA_SDPA_Q8=0 lets the linears quantize sdpa's output themselves (and
 * CTORCH_CUDA_GLU_Q8=0 those after a gated job its output). */
static bool switch_on(const char *name)
{
    const char *e = getenv(name);
    return !(e && e[0] == '0');
}

static int part_of(const cuq_mv_job *j, const float *x)
{
    for (int i = 0; i < j->n_parts; i++)
        if (j->part[i].out == x) return i;
    return -1;
}

/* g's linears whose outputs are exactly what h's ropes and plain row writes read (dense
 * heads), as one job: the prologue's kernel launch and its loads of q/k/v go away. */
static bool mv_rope_job(const ct_device *dev, const ct_op *ops, const fuse_group *g, const fuse_group *h, mv_plan *p,
                        fusek_prologue *rp)
{
    if (!mv_job(dev, ops, g, p) || !rope_job(dev, ops, h, rp)) return false;
    cuq_mv_job *j = &p->job;
    for (int r = 0; r < rp->n_rope; r++) {
        j->rope_part[r] = part_of(j, rp->rope[r].x);
        if (rp->rope[r].xh != rp->D) return false;
    }
    for (int w = 0; w < rp->n_rows; w++) {
        const fusek_rows *W = &rp->rows[w];
        j->rows_part[w] = W->from_rope >= 0 ? -1 : part_of(j, W->src);
        if (W->from_rope >= 0 ? W->n != rp->rope[W->from_rope].H || W->cols != rp->D : W->s1 != 1 || W->s0 != W->cols)
            return false;
    }
    j->rope = rp;
    return cuq_mv_ok(j);
}

static ct_status run_mv_rope(ct_device *dev, const ct_op *ops, const fuse_group *g, const fuse_group *h, bool *done)
{
    mv_plan p;
    fusek_prologue rp;
    *done = false;
    if (!mv_rope_job(dev, ops, g, h, &p, &rp)) return CT_OK;
    return launch_mv(dev, &p.job, done);
}

/* ---- sdpa writing the q8 form of the x of the linears after it ---- */

/* h's linears (job j) on the q8 form of x that the kernel before them writes; *h_done: h's
 * ops, where they were launched. */
static ct_status launch_on_q8(ct_device *dev, cuq_mv_job *j, const cuq_q8 *xq, const fuse_group *h, int *h_done)
{
    bool launched = false;
    j->xq = xq;
    ct_status s = launch_mv(dev, j, &launched);
    if (launched) *h_done = h->n;
    return s;
}

/* sd: an sdpa op the plan left alone; h: the group after it. When h's linears read sd's whole
 * output and would quantize it first (a quantize_q8 launch), the decode attention kernel
 * writes that q8 form as it writes its output, bit for bit what quantize_q8 makes (measured
 * on the H100, TinyLlama-shaped Q4_K_M: 22 launches a token fewer, ~1.2 us of a step each).
 * Where h runs on a one-format kernel, attention lets it launch early (nn_sdpa::early_next).
 * *sd_done and *h_done (ops) say what was launched. */
static ct_status run_sdpa_mv(ct_device *dev, const ct_op *ops, const ct_op *sd, const fuse_group *h, bool *sd_done,
                             int *h_done)
{
    *sd_done = false;
    *h_done = 0;
    mv_plan p;
    if (sd->kind != CT_OP_SDPA || h->kind != FUSE_MV || !mv_job(dev, ops, h, &p)) return CT_OK;
    cuq_mv_job *j = &p.job;
    const ct_tensor *o = sd->dst;
    if (!cuq_mv_wants_q8(j) || j->x != op_data(o, dev) || !tensor_is_contiguous(o) ||
        shape_numel(o->ndim, o->shape) != j->M * j->K)
        return CT_OK;
    size_t bytes = cuq_q8_bytes(j->M, j->K);
    void *tmp = NULL;
    ct_status s = cuda_tmp_alloc(dev, bytes, &tmp);
    if (s != CT_OK) return s;
    cuq_q8 xq = cuq_q8_at(tmp, j->M, j->K);
    s = cuda_sdpa_q8(dev, sd, xq.q, xq.d, xq.s8, cuq_mv_one_format(j), sd_done);
    if (s == CT_OK && *sd_done) s = launch_on_q8(dev, j, &xq, h, h_done);
    cuda_tmp_free(dev, tmp, bytes);
    return s;
}

/* ---- a gated job writing the q8 form of the linear after it ---- */

/* g: a gated group (norm + gate/up + activation) the plan fused; h: the group after it. When
 * h's linears read g's whole activation output and would quantize it first (a quantize_q8
 * launch), g's kernel writes that form itself, with a scale per 8 rows (cuq_q8::d8: its
 * blocks hold 8 rows each, so none waits for another), and h runs on it. *g_done and
 * *h_done (ops) say what was launched. CTORCH_CUDA_GLU_Q8=0 keeps the quantize launch.
 * Measured on the H200 (TinyLlama-shaped Q4_K_M, `ctorch bench -d cuda -p 0 -n 128 -r 3`,
 * alternated, two rounds): 1,464-1,466 t/s against 1,454 with the launch; 179 -> 157
 * kernels a step, the gated job's advance 7.3 -> 8.0 us (bench/gpu/step_timeline.py). Only
 * Q4_K gate/up weights: a Q6_K model's gated job (whose kernel writes the form as well)
 * decoded at 1,147 t/s against 1,151 with the launch (two rounds), SmolLM2's shapes 1,268
 * either way. */
static ct_status run_glu_mv(ct_device *dev, const ct_op *ops, const fuse_group *g, const fuse_group *h, bool *g_done,
                            int *h_done)
{
    *g_done = false;
    *h_done = 0;
    mv_plan pg, ph;
    if (g->glu < 0 || h->kind != FUSE_MV || !mv_job(dev, ops, g, &pg) || !mv_job(dev, ops, h, &ph)) return CT_OK;
    cuq_mv_job *jg = &pg.job, *jh = &ph.job;
    if (!jg->glu || jg->part[0].wt != CT_Q4_K || jg->part[1].wt != CT_Q4_K || !cuq_mv_wants_q8(jh) ||
        jh->x != jg->glu_out || jh->x_row != jh->K || jh->M != jg->M || jh->K != jg->part[0].N)
        return CT_OK;
    size_t bytes = cuq_q8_bytes8(jh->M, jh->K);
    void *tmp = NULL;
    ct_status s = cuda_tmp_alloc(dev, bytes, &tmp);
    if (s != CT_OK) return s;
    cuq_q8 xq = cuq_q8_at8(tmp, jh->M, jh->K);
    jg->glu_q8 = &xq;
    jh->xq = &xq;
    if (cuq_mv_ok(jg) && cuq_mv_ok(jh)) s = launch_mv(dev, jg, g_done);
    if (s == CT_OK && *g_done) s = launch_on_q8(dev, jh, &xq, h, h_done);
    cuda_tmp_free(dev, tmp, bytes);
    return s;
}

/* ---- post-norm + add, then the norm of the linears after it ---- */

/* g: a post-norm + residual add group the plan fused; h: the group after it. When h's
 * linears start with the norm of g's sum (a Gemma 3 block's post-norm + add, then the next
 * block's pre-norm) and their run would make that norm in a kernel of its own, one kernel
 * makes both norms and the q8 form the linears read (cuq_norm_add_rms_q8, bit for bit the
 * two kernels' output), and the linears run on it: a launch and a wait a group fewer.
 * CTORCH_CUDA_NORM_Q8=0 keeps the two kernels. *g_done and *h_done (ops) say what ran.
 * Measured on the H200 (the real Gemma 3 270M Q4_K_M file, `ctorch bench -d cuda -p 0 -n
 * 128 -r 3`, three rounds alternated in one call): 1,242-1,244 t/s before, 1,363-1,364 with
 * norm_add_kernel's loads reordered (fuse_kernels.cu) and =0, 1,405-1,406 with this; the
 * step on the device (bench/gpu/step_timeline.py) 706 -> 634 us, 184 -> 148 kernels, the
 * same greedy text. */
static ct_status run_norm_add_mv(ct_device *dev, const ct_op *ops, const fuse_group *g, const fuse_group *h, bool *g_done,
                                 int *h_done)
{
    *g_done = false;
    *h_done = 0;
    fusek_norm_add na;
    mv_plan p;
    bool q8 = false;
    if (h->kind != FUSE_MV || h->norm < 0 || !norm_add_job(dev, ops, g, &na) || !mv_job(dev, ops, h, &p)) return CT_OK;
    cuq_mv_job *j = &p.job;
    if (j->x != na.z || j->M != na.M || j->K != na.K || !j->norm.y || na.K > CUQ_NA_Q8_MAX_K || !cuq_mv_norm_apart(j, &q8))
        return CT_OK;
    size_t bytes = q8 ? cuq_q8_bytes(j->M, j->K) : 0;
    void *tmp = NULL;
    ct_status s = bytes ? cuda_tmp_alloc(dev, bytes, &tmp) : CT_OK;
    if (s != CT_OK) return s;
    cuq_q8 xq = q8 ? cuq_q8_at(tmp, j->M, j->K) : (cuq_q8){0};
    const cuq_mv_norm *n = &j->norm;
    if (cuq_norm_add_rms_q8(&na, n->w, n->wdt, n->w_early, n->eps, n->y, q8 ? &xq : NULL, cuda_of(dev)->stream)) {
        s = cuda_check_launch(dev, "fused rms_norm + add + rms_norm");
        *g_done = s == CT_OK;
    }
    if (*g_done) {
        /* the norm is made: the linears read its output (a run that declines them leaves h's
         * ops to the caller, whose norm op then writes the same y again) */
        j->norm.on = false;
        j->x = n->y;
        j->x_row = j->K;
        j->xq = q8 ? &xq : NULL;
        bool launched = false;
        s = launch_mv(dev, j, &launched);
        if (launched) *h_done = h->n;
    }
    if (tmp) cuda_tmp_free(dev, tmp, bytes);
    return s;
}

/* ---- the plan ---- */

/* Launches group g fused; *done = how many of its leading ops that covered (0: the kernels
 * declined it, nothing was launched; the caller runs the rest op by op). */
static ct_status run_fused(ct_device *dev, const ct_op *ops, const fuse_group *g, int *done)
{
    *done = 0;
    switch (g->kind) {
    case FUSE_MV: return run_mv(dev, ops, g, done);
    case FUSE_ROPE: return run_rope(dev, ops, g, done);
    case FUSE_NORM_ADD: return run_norm_add(dev, ops, g, done);
    default: return CT_OK;
    }
}

/* One trace line a group: fused, partly fused or declined (the kernels turned it down). */
static void note_group(const ct_device *dev, const ct_op *ops, const fuse_group *g, int done, const char *how)
{
    char what[128];
    core_note("%s: step: %s %s%s", dev->info.name, done == g->n ? "fused" : done ? "partly fused" : "declined",
              fuse_describe(ops, g, what, sizeof what), how);
}

ct_status cuda_fuse_run(ct_device *dev, const ct_op *ops, int n, cuda_run_fn run_one)
{
    fuse_group *plan = malloc(sizeof *plan * (size_t)(n > 0 ? n : 1));
    if (!plan) return core_err(CT_ERR_OOM, "%s: out of host memory planning a step of %d ops", dev->info.name, n);
    fuse_caps caps = {.ctx = dev};
    if (config_current()->fuse) { /* CTORCH_FUSE=0: every op alone */
        caps.mv_ok = caps_mv;
        caps.rope_ok = caps_rope;
        caps.norm_add_ok = caps_norm_add;
    }
    int ng = fuse_plan(ops, n, &caps, plan);
    bool sdpa_q8 = caps.mv_ok && switch_on("CTORCH_CUDA_SDPA_Q8"), rope_q = caps.mv_ok && switch_on("CTORCH_CUDA_ROPE_JOB");
    bool norm_q8 = caps.mv_ok && switch_on("CTORCH_CUDA_NORM_Q8"), glu_q8 = caps.mv_ok && switch_on("CTORCH_CUDA_GLU_Q8");
    ct_status s = CT_OK;
    for (int i = 0; i < ng && s == CT_OK; i++) {
        const fuse_group *g = &plan[i], *h = i + 1 < ng ? &plan[i + 1] : NULL;
        int done = 0;
        if (g->kind == FUSE_MV && h && h->kind == FUSE_ROPE && rope_q) {
            bool both = false;
            s = run_mv_rope(dev, ops, g, h, &both);
            if (s == CT_OK && both) {
                char what[128], with[128];
                core_note("%s: step: fused %s with %s", dev->info.name, fuse_describe(ops, g, what, sizeof what),
                          fuse_describe(ops, h, with, sizeof with));
                i++;
                continue;
            }
        }
        if (g->kind == FUSE_NORM_ADD && h && norm_q8) {
            bool g_done = false;
            int h_done = 0;
            s = run_norm_add_mv(dev, ops, g, h, &g_done, &h_done);
            if (s == CT_OK && g_done) {
                note_group(dev, ops, g, g->n, " with the norm after it");
                if (h_done) note_group(dev, ops, h, h_done, " on the norm made with rms_norm+add");
                for (int k = h_done; s == CT_OK && k < h->n; k++) s = run_one(dev, &ops[h->first + k]);
                i++;
                continue;
            }
        }
        if (g->kind == FUSE_MV && h && glu_q8) {
            bool g_done = false;
            int h_done = 0;
            s = run_glu_mv(dev, ops, g, h, &g_done, &h_done);
            if (s == CT_OK && g_done) {
                note_group(dev, ops, g, g->n, " writing the q8 form of the linears after it");
                if (h_done) {
                    note_group(dev, ops, h, h_done, " on the gated job's q8 form");
                    for (int k = h_done; s == CT_OK && k < h->n; k++) s = run_one(dev, &ops[h->first + k]);
                    i++;
                }
                continue;
            }
        }
        if (g->kind != FUSE_NONE && s == CT_OK) {
            s = run_fused(dev, ops, g, &done);
            if (s == CT_OK) note_group(dev, ops, g, done, "");
        }
        /* a last op of g that sdpa runs alone may hand its q8 form to h */
        const ct_op *tail = &ops[g->first + g->n - 1];
        bool pair = sdpa_q8 && done < g->n && h && tail->kind == CT_OP_SDPA && h->kind == FUSE_MV;
        for (int k = done; s == CT_OK && k < g->n - pair; k++) s = run_one(dev, &ops[g->first + k]);
        if (!pair || s != CT_OK) continue;
        bool sd_done = false;
        int h_done = 0;
        s = run_sdpa_mv(dev, ops, tail, h, &sd_done, &h_done);
        if (s == CT_OK && !sd_done) s = run_one(dev, tail);
        if (s == CT_OK && h_done) {
            note_group(dev, ops, h, h_done, " on sdpa's q8 form");
            i++;
        }
    }
    free(plan);
    return s;
}
