/* Decomposition: a fused op that a device lacks, but whose parts it has, runs there as
 * those parts instead of moving to another device (a GPU without an rms_norm kernel
 * should not send its activations to the CPU and back for one).
 *
 * Each entry below expresses one op kind with simpler public ops. The parts are ordinary
 * ops, pinned to the chosen device with the route reason `decomposed`; whether the device
 * has every part is found by running the same function "dry": each part is checked with
 * the device's `supports` on its real op record (dtypes, shapes, parameters) and not run,
 * so the check cannot drift from what the function does. A part the device lacks may be
 * decomposed in turn (sdpa's softmax), to a small depth.
 *
 * The decompositions, and what they do not cover (those ops move to the next device):
 *   rms_norm     x * rsqrt(mean(x*x, last dim) + eps) [* weight]
 *   layer_norm   d = x - mean(x); d * rsqrt(mean(d*d) + eps) [* weight] [+ bias], over the
 *                last norm_ndim dims
 *   softmax      e = exp(x - max(x, dim)); e / sum(e, dim)          (any dim; not 0-d)
 *   log_softmax  d = x - max(x, dim); d - log(sum(exp(d), dim))     (any dim; not 0-d)
 *   swiglu       silu(gate) * up
 *   geglu        gelu_tanh(gate) * up
 *   linear       x @ w^T [+ bias], for f32/f16/bf16 weights (not block-quantized ones)
 *   sdpa         softmax(q k^T * scale + mask + causal/window mask) v, grouped-query heads
 *                folded into the matmul's rows. Not with an attended-length tensor (its
 *                value is on the device; the mask would need reading it), nor causal with
 *                more queries than keys (rows that see no key). A row that a caller's mask
 *                hides entirely gives NaN here where the fused kernel gives zeros.
 * Results agree with the fused kernels to rounding (the parts round in between): the
 * tests state the tolerance per op (tests/exec/test_decompose.c).
 *
 * Devices of kind CPU are never asked: the CPU backend runs every op itself. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec/state.h"

#define DECOMP_MAX_DEPTH 3
#define DECOMP_MAX_TMP 12

typedef ct_status (*decomp_fn)(const ct_op *op, ct_tensor **out);

/* Parts of the decomposition in progress on this thread: where they run, and whether
 * they only check (dry). dev < 0: none. */
typedef struct decomp_state {
    int dev;
    bool dry;
    int depth;
} decomp_state;
static _Thread_local decomp_state t_dc = {-1, false, 0};

/* Intermediates of one decomposition, freed together. */
typedef struct tmps {
    ct_tensor *t[DECOMP_MAX_TMP];
    int n;
} tmps;

static ct_tensor **slot(tmps *m)
{
    return m->n < DECOMP_MAX_TMP ? &m->t[m->n++] : NULL;
}

static void tmps_free(tmps *m)
{
    for (int i = 0; i < m->n; i++) ct_tensor_free(m->t[i]);
    m->n = 0;
}

/* The result leaves the set: the caller owns it. */
static ct_status result(tmps *m, ct_tensor *r, ct_tensor **out)
{
    for (int i = 0; i < m->n; i++)
        if (m->t[i] == r) m->t[i] = NULL;
    tmps_free(m);
    *out = r;
    return CT_OK;
}

/* ---- the decompositions ---- */

static ct_status dc_rms_norm(const ct_op *op, ct_tensor **out)
{
    const ct_tensor *x = op->src[0], *w = op->n_src > 1 ? op->src[1] : NULL;
    tmps m = {0};
    ct_tensor **sq = slot(&m), **ms = slot(&m), **pe = slot(&m), **r = slot(&m), **y = slot(&m), **yw = slot(&m);
    int dim = -1;
    ct_status s = ct_mul(x, x, sq);
    if (s == CT_OK) s = ct_mean(*sq, &dim, 1, true, ms);
    if (s == CT_OK) s = ct_add_scalar(*ms, op->p.norm.eps, pe);
    if (s == CT_OK) s = ct_rsqrt(*pe, r);
    if (s == CT_OK) s = ct_mul(x, *r, y);
    if (s == CT_OK && w) s = ct_mul(*y, w, yw);
    if (s != CT_OK) {
        tmps_free(&m);
        return s;
    }
    return result(&m, w ? *yw : *y, out);
}

static ct_status dc_layer_norm(const ct_op *op, ct_tensor **out)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2];
    int nd = op->p.norm.norm_ndim, dims[CT_MAX_DIMS];
    for (int i = 0; i < nd; i++) dims[i] = x->ndim - nd + i;
    tmps m = {0};
    ct_tensor **mu = slot(&m), **d = slot(&m), **d2 = slot(&m), **var = slot(&m), **pe = slot(&m), **r = slot(&m),
              **y = slot(&m), **yw = slot(&m), **yb = slot(&m);
    ct_status s = ct_mean(x, dims, nd, true, mu);
    if (s == CT_OK) s = ct_sub(x, *mu, d);
    if (s == CT_OK) s = ct_mul(*d, *d, d2);
    if (s == CT_OK) s = ct_mean(*d2, dims, nd, true, var);
    if (s == CT_OK) s = ct_add_scalar(*var, op->p.norm.eps, pe);
    if (s == CT_OK) s = ct_rsqrt(*pe, r);
    if (s == CT_OK) s = ct_mul(*d, *r, y);
    ct_tensor *cur = *y;
    if (s == CT_OK && w && (s = ct_mul(cur, w, yw)) == CT_OK) cur = *yw;
    if (s == CT_OK && b && (s = ct_add(cur, b, yb)) == CT_OK) cur = *yb;
    if (s != CT_OK) {
        tmps_free(&m);
        return s;
    }
    return result(&m, cur, out);
}

/* softmax and log_softmax share the shifted exponentials. */
static ct_status dc_softmax_any(const ct_op *op, bool log_form, ct_tensor **out)
{
    const ct_tensor *x = op->src[0];
    int dim = op->p.dim.dim;
    tmps m = {0};
    ct_tensor **mx = slot(&m), **d = slot(&m), **e = slot(&m), **sum = slot(&m), **lg = slot(&m), **y = slot(&m);
    ct_status s = ct_max(x, &dim, 1, true, mx);
    if (s == CT_OK) s = ct_sub(x, *mx, d);
    if (s == CT_OK) s = ct_exp(*d, e);
    if (s == CT_OK) s = ct_sum(*e, &dim, 1, true, sum);
    if (s == CT_OK && log_form) s = ct_log(*sum, lg);
    if (s == CT_OK) s = log_form ? ct_sub(*d, *lg, y) : ct_div(*e, *sum, y);
    if (s != CT_OK) {
        tmps_free(&m);
        return s;
    }
    return result(&m, *y, out);
}

static ct_status dc_softmax(const ct_op *op, ct_tensor **out) { return dc_softmax_any(op, false, out); }
static ct_status dc_log_softmax(const ct_op *op, ct_tensor **out) { return dc_softmax_any(op, true, out); }

static ct_status dc_gated(const ct_op *op, ct_tensor **out)
{
    tmps m = {0};
    ct_tensor **act = slot(&m), **y = slot(&m);
    ct_status s = op->kind == CT_OP_SWIGLU ? ct_silu(op->src[0], act) : ct_gelu(op->src[0], true, act);
    if (s == CT_OK) s = ct_mul(*act, op->src[1], y);
    if (s != CT_OK) {
        tmps_free(&m);
        return s;
    }
    return result(&m, *y, out);
}

static ct_status dc_linear(const ct_op *op, ct_tensor **out)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2];
    tmps m = {0};
    ct_tensor **wt = slot(&m), **y = slot(&m), **yb = slot(&m);
    ct_status s = ct_transpose(w, 0, 1, wt);
    if (s == CT_OK) s = ct_matmul(x, *wt, y);
    if (s == CT_OK && b) s = ct_add(*y, b, yb);
    if (s != CT_OK) {
        tmps_free(&m);
        return s;
    }
    return result(&m, b ? *yb : *y, out);
}

/* The causal/sliding-window mask of sdpa as an additive [Tq, Tk] host tensor: the same
 * visibility rule as the fused kernel (query i sees keys j <= i + Tk - Tq, and with a
 * window, j > i + Tk - Tq - window). */
static ct_status sdpa_mask(int64_t Tq, int64_t Tk, bool causal, int window, ct_tensor **out)
{
    size_t n = (size_t)(Tq * Tk);
    float *mk = malloc(n ? n * sizeof *mk : 1);
    if (!mk) return core_err(CT_ERR_OOM, "sdpa decomposition: no memory for a [%lld, %lld] mask", (long long)Tq,
                             (long long)Tk);
    for (int64_t i = 0; i < Tq; i++)
        for (int64_t j = 0; j < Tk; j++) {
            int64_t last = i + Tk - Tq;
            bool seen = (!causal || j <= last) && (window <= 0 || j > last - window);
            mk[i * Tk + j] = seen ? 0.0f : -INFINITY;
        }
    int64_t shape[2] = {Tq, Tk};
    ct_status s = ct_tensor_from_data(2, shape, CT_F32, mk, out);
    free(mk);
    return s;
}

static ct_status dc_sdpa(const ct_op *op, ct_tensor **out)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3];
    int64_t B = q->shape[0], Hq = q->shape[1], Tq = q->shape[2], D = q->shape[3];
    int64_t Hkv = k->shape[1], Tk = k->shape[2], Dv = v->shape[3], G = Hq / Hkv;
    tmps m = {0};
    ct_tensor **qc = slot(&m), **qv = slot(&m), **kt = slot(&m), **sc = slot(&m), **ss = slot(&m), **sv = slot(&m),
              **sm = slot(&m), **cm = slot(&m), **sc2 = slot(&m), **p = slot(&m), **pv = slot(&m), **o = slot(&m);
    /* query heads g*Tq.. of one key/value head become rows of one matmul: no copy of k or v */
    int64_t qshape[4] = {B, Hkv, G * Tq, D}, sshape[4] = {B, Hq, Tq, Tk}, pshape[4] = {B, Hkv, G * Tq, Tk};
    ct_status s = ct_contiguous(q, qc);
    if (s == CT_OK) s = ct_view(*qc, 4, qshape, qv);
    if (s == CT_OK) s = ct_transpose(k, 2, 3, kt);
    if (s == CT_OK) s = ct_matmul(*qv, *kt, sc);
    if (s == CT_OK) s = ct_mul_scalar(*sc, op->p.attn.scale, ss);
    if (s == CT_OK) s = ct_view(*ss, 4, sshape, sv);
    ct_tensor *cur = *sv;
    if (s == CT_OK && mask && (s = ct_add(cur, mask, sm)) == CT_OK) cur = *sm;
    if (s == CT_OK && (op->p.attn.causal || op->p.attn.window > 0)) {
        s = sdpa_mask(Tq, Tk, op->p.attn.causal, op->p.attn.window, cm);
        if (s == CT_OK && (s = ct_add(cur, *cm, sc2)) == CT_OK) cur = *sc2;
    }
    if (s == CT_OK) s = ct_softmax(cur, -1, p);
    if (s == CT_OK) s = ct_view(*p, 4, pshape, pv);
    if (s == CT_OK) s = ct_matmul(*pv, v, o);
    ct_tensor *y = NULL;
    int64_t oshape[4] = {B, Hq, Tq, Dv};
    if (s == CT_OK) s = ct_view(*o, 4, oshape, &y);
    tmps_free(&m); /* y keeps o's storage */
    if (s == CT_OK) *out = y;
    return s;
}

/* ---- the table ---- */

/* Whether the op's parameters fall in what the decomposition covers. */
static bool applies(const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_SOFTMAX:
    case CT_OP_LOG_SOFTMAX: return op->src[0]->ndim >= 1;
    case CT_OP_LINEAR: {
        ct_dtype w = op->src[1]->dtype;
        return w == CT_F32 || w == CT_F16 || w == CT_BF16;
    }
    case CT_OP_SDPA:
        if (op->n_src > 4 && op->src[4]) return false;
        if (op->p.attn.causal && op->src[0]->shape[2] > op->src[1]->shape[2]) return false;
        return op->src[1]->shape[2] > 0;
    default: return true;
    }
}

static decomp_fn table(ct_op_kind k)
{
    switch (k) {
    case CT_OP_RMS_NORM: return dc_rms_norm;
    case CT_OP_LAYER_NORM: return dc_layer_norm;
    case CT_OP_SOFTMAX: return dc_softmax;
    case CT_OP_LOG_SOFTMAX: return dc_log_softmax;
    case CT_OP_SWIGLU:
    case CT_OP_GEGLU: return dc_gated;
    case CT_OP_LINEAR: return dc_linear;
    case CT_OP_SDPA: return dc_sdpa;
    default: return NULL;
    }
}

bool exec_decomposable(ct_op_kind k) { return table(k) != NULL; }

/* Runs op's decomposition with its parts pinned to dev (dry: only checked); *out gets
 * the result (a shell when dry). */
static ct_status run_fn(const ct_op *op, ct_device *dev, bool dry, ct_tensor **out)
{
    decomp_fn fn = table(op->kind);
    if (!fn || !applies(op) || t_dc.depth >= DECOMP_MAX_DEPTH)
        return core_err(CT_ERR_UNSUPPORTED, "%s: no decomposition on %s", op_kind_name(op->kind), dev->info.name);
    decomp_state prev = t_dc;
    t_dc.dev = dev->id;
    t_dc.dry = dry;
    t_dc.depth++;
    *out = NULL;
    ct_status s = fn(op, out);
    t_dc = prev;
    return s;
}

/* Can dev run op as its parts? Errors of the check are not the caller's business. */
static bool feasible(const ct_op *op, ct_device *dev)
{
    char saved[512];
    snprintf(saved, sizeof saved, "%s", ct_last_error());
    ct_tensor *r = NULL;
    ct_status s = run_fn(op, dev, true, &r);
    ct_tensor_free(r);
    core_err(CT_OK, "%s", saved); /* the check's own messages are not the op's */
    return s == CT_OK;
}

/* The device that would head the route: the forced one, else the first usable of the chain. */
static ct_device *head_device(const exec_route_ctx *c)
{
    if (c->forced >= 0) return (c->excluded >> c->forced) & 1u ? NULL : c->devs[c->forced];
    for (int i = 0; i < c->n_chain; i++) {
        ct_device *d = c->devs[c->chain[i]];
        if (!((c->excluded >> d->id) & 1u) && !device_is_lost(d)) return d;
    }
    return NULL;
}

/* Small operands that live on the host stay on a capable CPU (the size rule of routing):
 * a decomposition would not pay either. */
static bool stays_on_cpu(const exec_route_ctx *c, const ct_op *op)
{
    size_t bytes = ct_tensor_nbytes(op->dst);
    for (int i = 0; i < op->n_src; i++) {
        if (!op->src[i]) continue;
        if (!storage_valid_on(op->src[i]->st, NULL)) return false;
        bytes += ct_tensor_nbytes(op->src[i]);
    }
    if (bytes >= c->small_bytes) return false;
    for (int i = 0; i < c->n_chain; i++) {
        const ct_device *d = c->devs[c->chain[i]];
        if (d->info.kind == CT_DEVICE_CPU && !((c->excluded >> d->id) & 1u) && d->ops->supports(d, op)) return true;
    }
    return false;
}

ct_device *exec_decompose_target(const exec_route_ctx *c, const ct_op *op)
{
    if (!table(op->kind)) return NULL;
    ct_device *head = head_device(c);
    if (!head || head->info.kind == CT_DEVICE_CPU || head->ops->supports(head, op)) return NULL;
    if (c->forced < 0 && stays_on_cpu(c, op)) return NULL;
    return feasible(op, head) ? head : NULL;
}

bool exec_decompose_active(void) { return t_dc.dev >= 0; }

/* Puts the decomposition's result r into op->dst: a fresh output takes r's storage
 * (no copy); a view being written into gets a copy part. Frees r. */
static ct_status place_result(ct_op *op, ct_device *dev, ct_tensor *r, bool dst_fresh)
{
    ct_tensor *d = op->dst;
    /* a recording holds a reference of its own to every storage it saw */
    int refs = 1 + (exec_step_rec && step_refs(exec_step_rec, r->st));
    bool whole = tensor_is_contiguous(r) && r->offset == 0 && r->st->nbytes == ct_tensor_nbytes(r) &&
                 atomic_load(&r->st->refcnt) == refs;
    if (dst_fresh && whole && r->dtype == d->dtype && tensor_is_contiguous(d) && d->offset == 0 &&
        d->st->nbytes == r->st->nbytes && shape_equal(r->ndim, r->shape, d->ndim, d->shape)) {
        ct_storage *t = d->st;
        d->st = r->st;
        r->st = t;
        ct_tensor_free(r);
        return CT_OK;
    }
    ct_op cp = {.kind = CT_OP_COPY, .n_src = 1, .src = {r}, .dst = d};
    decomp_state prev = t_dc;
    t_dc.dev = dev->id;
    t_dc.dry = false;
    ct_status s = exec_run(&cp);
    t_dc = prev;
    ct_tensor_free(r);
    return s;
}

ct_status exec_decompose_run(ct_op *op, ct_device *dev, bool dst_fresh)
{
    uint64_t t0 = exec_now_ns();
    ct_tensor *r = NULL;
    ct_status s = run_fn(op, dev, false, &r);
    if (s != CT_OK) {
        ct_tensor_free(r);
        return s;
    }
    s = place_result(op, dev, r, dst_fresh);
    if (s == CT_OK) exec_note_decomposed(op, dev, t0);
    return s;
}

ct_status exec_decompose_part(ct_op *op)
{
    exec_state *st = exec_state_get();
    ct_device *dev = st->devs[t_dc.dev];
    bool has = !device_is_lost(dev) && dev->ops->supports(dev, op);
    if (t_dc.dry) {
        if (has) return CT_OK; /* the part would run: its output stays a shell */
        ct_tensor *r = NULL;
        ct_status s = run_fn(op, dev, true, &r);
        ct_tensor_free(r);
        return s;
    }
    if (has) return exec_run_on(op, dev, CT_REASON_DECOMPOSED);
    bool fresh = true;
    for (int i = 0; i < op->dst->st->n_copies && fresh; i++) fresh = !op->dst->st->copies[i].valid;
    return exec_decompose_run(op, dev, fresh);
}
