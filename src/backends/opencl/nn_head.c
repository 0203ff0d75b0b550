/* The step planner's head group (capture.c, through ocl_nn_pair): in a Gemma 3 decode step
 * q and k get an RMS norm per head before their rotation, so the ops between the q/k/v
 * products and the attention are
 *   RMS_NORM q, RMS_NORM k, ROPE q', ROPE k', SET_ROWS k'' (k cache), SET_ROWS v (v cache)
 * which went out as four launches (two norms, the rope pair, the row-write pair). Here they
 * are one launch of nn_head_norm_rope (kernels/nn.cl): a work-group per head normalizes,
 * rotates and, for k, writes the cache row; v's rows go to later work-groups. Every tensor
 * the six ops write is still written. Heads are rows of D contiguous f32 (D / 2 a power of
 * two a work-group can hold), rotated whole, for one token; anything else keeps the pairs. */
#include <string.h>

#include "backends/opencl/nn_internal.h"
#include "core/fuse.h"

/* nn_hnr_args in nn.cl: the same fields in the same order (8-byte ones first). */
typedef struct hnr_args {
    cl_ulong xo[2], yo[2], zo[2], wo[2], po, kio, kco, vo, vio, vco;
    cl_long D, ws[2], hq, hk, kC, kR, kis0, kds0, kds1, vss0, vss1, vis0, vds0, vds1, vR, vC, vtotal;
    cl_float2 base, scale;
    cl_float eps[2];
    cl_int has_w[2], dtw[2], p64, neox, ki64, kdtd, vi64, vdts, vdtd, pad;
} hnr_args;
_Static_assert(sizeof(hnr_args) == 328, "hnr_args: the kernel's layout has 328 bytes");

static bool dense_f32(const ct_tensor *t) { return t && t->dtype == CT_F32 && tensor_is_contiguous(t); }

/* The tensors of one head chain: the norm's x, weight and y, the rotation's z. */
typedef struct chain {
    const ct_tensor *x, *w, *y, *z;
    int64_t heads;
} chain;

/* An RMS norm and the rotation of its output: dense f32 heads of D, rotated whole, one token. */
static bool chain_of(const ct_device *dev, const ct_op *nm, const ct_op *rp, int64_t D, chain *c)
{
    if (nm->kind != CT_OP_RMS_NORM || rp->kind != CT_OP_ROPE || !ocl_nn_supports(dev, nm) || !ocl_nn_supports(dev, rp))
        return false;
    const ct_tensor *x = nm->src[0], *w = nm->n_src > 1 ? nm->src[1] : NULL, *y = nm->dst, *rx = rp->src[0];
    int nd = rx->ndim;
    if (!fuse_same_view(rx, y) || !dense_f32(x) || !dense_f32(y) || !dense_f32(rp->dst) || nd < 3) return false;
    int64_t heads = rx->shape[nd - 2], numel = ct_tensor_numel(rx);
    if (rx->shape[nd - 1] != D || x->shape[x->ndim - 1] != D || rp->p.rope.n_dims != D || heads < 1 ||
        numel != heads * D || ct_tensor_numel(x) != numel || ct_tensor_numel(rp->dst) != numel)
        return false;
    if (w && (w->ndim != 1 || w->shape[0] != D || nn_dt(w->dtype) < 0)) return false;
    *c = (chain){x, w, y, rp->dst, heads};
    return true;
}

/* Both rotations at the same positions with the same frequencies and pair layout. */
static bool same_rotation(const ct_device *dev, const ct_op *a, const ct_op *b)
{
    const ct_rope_params *p = &a->p.rope, *q = &b->p.rope;
    nn_span pa, pb;
    return p->mode == q->mode && p->freq_base == q->freq_base && p->freq_scale == q->freq_scale &&
           a->src[1]->dtype == b->src[1]->dtype && nn_span_of(a->src[1], dev, &pa) && nn_span_of(b->src[1], dev, &pb) &&
           nn_same_span(&pa, &pb);
}

/* A span with the chain it belongs to: a work-item reads and writes the elements of its own
 * chain only, so two spans of one chain may be exactly the same bytes; spans of different
 * chains (or of none, -1: read by every work-group) may not meet. */
typedef struct tagged {
    nn_span s;
    int chain;
} tagged;

static bool may_meet(const tagged *a, const tagged *b)
{
    return !nn_overlap(&a->s, &b->s) || (a->chain >= 0 && a->chain == b->chain && nn_same_span(&a->s, &b->s));
}

static bool hazard_free(const tagged *out, int no, const tagged *in, int ni)
{
    for (int i = 0; i < no; i++) {
        for (int j = 0; j < i; j++)
            if (!may_meet(&out[i], &out[j])) return false;
        for (int j = 0; j < ni; j++)
            if (!may_meet(&out[i], &in[j])) return false;
    }
    return true;
}

enum { CH_Q, CH_K, CH_KC, CH_VC, CH_V };

/* The spans of everything the launch reads and writes, checked; false when one is missing. */
static bool spans_ok(const ct_device *dev, const chain *c, const ct_op *rq, const ct_op *sk, const ct_op *sv)
{
    tagged out[6], in[9];
    int ni = 0;
    bool ok = true;
    for (int k = 0; k < 2; k++) {
        out[2 * k] = (tagged){.chain = k}, out[2 * k + 1] = (tagged){.chain = k};
        ok &= nn_span_of(c[k].y, dev, &out[2 * k].s) && nn_span_of(c[k].z, dev, &out[2 * k + 1].s);
        in[ni] = (tagged){.chain = k};
        ok &= nn_span_of(c[k].x, dev, &in[ni++].s);
        if (c[k].w) {
            in[ni] = (tagged){.chain = -1};
            ok &= nn_span_of(c[k].w, dev, &in[ni++].s);
        }
    }
    out[4] = (tagged){.chain = CH_KC}, out[5] = (tagged){.chain = CH_VC};
    ok &= nn_span_of(sk->dst, dev, &out[4].s) && nn_span_of(sv->dst, dev, &out[5].s);
    const ct_tensor *shared[3] = {rq->src[1], sk->src[1], sv->src[1]};
    for (int i = 0; i < 3; i++) {
        in[ni] = (tagged){.chain = -1};
        ok &= nn_span_of(shared[i], dev, &in[ni++].s);
    }
    in[ni] = (tagged){.chain = CH_V};
    ok &= nn_span_of(sv->src[0], dev, &in[ni++].s);
    return ok && hazard_free(out, 6, in, ni);
}

/* k's row write reads the rotation's output as it lies, element for element. */
static bool k_rows_ok(const ct_device *dev, const ct_op *sk, const ct_tensor *z)
{
    const ct_tensor *src = sk->src[0];
    nn_span a, b;
    return sk->kind == CT_OP_SET_ROWS && ocl_nn_supports(dev, sk) && src->ndim == 2 && src->dtype == CT_F32 &&
           tensor_is_contiguous(src) && ct_tensor_numel(src) == ct_tensor_numel(z) && nn_span_of(src, dev, &a) &&
           nn_span_of(z, dev, &b) && nn_same_span(&a, &b);
}

static void chain_args(const ct_device *dev, const chain *c, int k, double eps, hnr_args *a, cl_mem *m)
{
    m[0] = ocl_mem(c->x, dev, &a->xo[k]);
    m[1] = ocl_mem(c->y, dev, &a->yo[k]);
    m[2] = ocl_mem(c->z, dev, &a->zo[k]);
    m[3] = c->w ? ocl_mem(c->w, dev, &a->wo[k]) : m[0]; /* absent weight: any valid buffer, never read */
    a->ws[k] = c->w ? c->w->stride[0] : 0;
    a->has_w[k] = c->w != NULL, a->dtw[k] = c->w ? nn_dt(c->w->dtype) : 0, a->eps[k] = (cl_float)eps;
}

static ct_status launch(ct_device *dev, const chain *c, const ct_op *ops, int64_t D, size_t wg)
{
    const ct_op *rq = &ops[2], *sk = &ops[4], *sv = &ops[5];
    hnr_args a = {.D = D, .hq = c[0].heads, .hk = c[1].heads};
    cl_mem m[14];
    chain_args(dev, &c[0], 0, ops[0].p.norm.eps, &a, m);
    chain_args(dev, &c[1], 1, ops[1].p.norm.eps, &a, m + 4);
    m[8] = ocl_mem(rq->src[1], dev, &a.po);
    a.p64 = rq->src[1]->dtype == CT_I64, a.neox = rq->p.rope.mode == CT_ROPE_NEOX;
    nn_rope_a r;
    ocl_arg unused[NN_ROPE_NARGS > NN_SET_ROWS_NARGS ? NN_ROPE_NARGS : NN_SET_ROWS_NARGS];
    cl_long work = 0;
    ct_status s = nn_rope_prepare(dev, rq, &r, unused, &work); /* the host's base and scale as float pairs */
    a.base = r.base, a.scale = r.scale;
    nn_set_rows_a ks, vs;
    if (s == CT_OK) s = nn_set_rows_prepare(dev, sk, &ks, unused, &work);
    if (s == CT_OK) s = nn_set_rows_prepare(dev, sv, &vs, unused, &work);
    if (s != CT_OK) return s;
    m[9] = ks.im, m[10] = ks.dm, a.kio = ks.io, a.kco = ks.dof;
    a.kC = ks.C, a.kR = ks.R, a.kis0 = ks.is0, a.kds0 = ks.ds0, a.kds1 = ks.ds1, a.ki64 = ks.i64, a.kdtd = ks.dtd;
    m[11] = vs.sm, m[12] = vs.im, m[13] = vs.dm, a.vo = vs.so, a.vio = vs.io, a.vco = vs.dof;
    a.vss0 = vs.ss0, a.vss1 = vs.ss1, a.vis0 = vs.is0, a.vds0 = vs.ds0, a.vds1 = vs.ds1, a.vR = vs.R, a.vC = vs.C;
    a.vtotal = vs.total, a.vi64 = vs.i64, a.vdts = vs.dts, a.vdtd = vs.dtd;
    for (int i = 0; i < 14; i++)
        if (!m[i]) return core_err(CT_ERR_DEVICE_FAULT, "%s: head norm operands without a copy here", dev->info.name);
    ocl_arg args[16];
    for (int i = 0; i < 14; i++) args[i] = OCL_ARG(m[i]);
    args[14] = OCL_ARG(a), args[15] = OCL_LOCAL(wg * sizeof(float));
    size_t groups = (size_t)(a.hq + a.hk) + (size_t)((a.vtotal + (cl_long)wg - 1) / (cl_long)wg), global = groups * wg;
    return nn_launch(dev, "nn", "nn_head_norm_rope", 16, args, 1, &global, &wg);
}

int nn_head_norm_rope(ct_device *dev, const ct_op *ops, int n)
{
    if (n < 6 || ops[0].kind != CT_OP_RMS_NORM || ops[1].kind != CT_OP_RMS_NORM || ops[2].kind != CT_OP_ROPE ||
        ops[3].kind != CT_OP_ROPE || ops[4].kind != CT_OP_SET_ROWS || ops[5].kind != CT_OP_SET_ROWS)
        return 0;
    const ct_tensor *rx = ops[2].src[0];
    int64_t D = rx->ndim >= 1 ? rx->shape[rx->ndim - 1] : 0;
    size_t kwg = ocl_kernel_wg(dev, "nn", "nn_head_norm_rope"), wg = (size_t)(D / 2);
    if (D < 2 || D % 2 || (wg & (wg - 1)) || wg > nn_wg(dev, kwg ? kwg : wg)) return 0;
    chain c[2];
    if (!chain_of(dev, &ops[0], &ops[2], D, &c[0]) || !chain_of(dev, &ops[1], &ops[3], D, &c[1]) ||
        !same_rotation(dev, &ops[2], &ops[3]) || !k_rows_ok(dev, &ops[4], c[1].z) || !ocl_nn_supports(dev, &ops[5]) ||
        ops[5].src[0]->ndim != 2 || !spans_ok(dev, c, &ops[2], &ops[4], &ops[5]))
        return 0;
    return launch(dev, c, ops, D, wg) == CT_OK ? 6 : 0;
}
