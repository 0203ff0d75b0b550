/* The step planner's pairs (capture.c): two adjacent independent ROPEs (q and k of a
 * decode step) or SET_ROWS (k and v into their caches) as one launch of nn_rope2 /
 * nn_set_rows2; an RMS norm and the residual ADD of its output (Gemma 3's post-norms) as
 * nn_norm_add; or k's ROPE with both SET_ROWS as one launch of nn_rope_set_rows2 (the
 * ropes of q and k are rarely a pair: the step's arena gives k's rotation the bytes of q,
 * whose last reader is q's rotation). Independent: neither writes bytes the other reads or writes, so running
 * them side by side gives what running them in order gives. */
#include <string.h>

#include "backends/opencl/nn_internal.h"
#include "core/fuse.h"

bool nn_span_of(const ct_tensor *t, const ct_device *dev, nn_span *s)
{
    if (!t || ct_dtype_is_quantized(t->dtype)) return false;
    s->m = ocl_mem(t, dev, &s->lo);
    if (!s->m) return false;
    cl_ulong last = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0) return false;
        if (t->stride[d] < 0) return false;
        last += (cl_ulong)(t->shape[d] - 1) * (cl_ulong)t->stride[d];
    }
    s->hi = s->lo + (last + 1) * ct_dtype_block_bytes(t->dtype);
    return true;
}

/* b's output touches nothing of a, and a's output nothing b reads. */
static bool independent(const ct_device *dev, const ct_op *a, const ct_op *b)
{
    nn_span oa, ob, s;
    if (!nn_span_of(a->dst, dev, &oa) || !nn_span_of(b->dst, dev, &ob) || nn_overlap(&oa, &ob)) return false;
    for (int i = 0; i < b->n_src; i++)
        if (b->src[i] && (!nn_span_of(b->src[i], dev, &s) || nn_overlap(&s, &oa))) return false;
    for (int i = 0; i < a->n_src; i++)
        if (a->src[i] && (!nn_span_of(a->src[i], dev, &s) || nn_overlap(&s, &ob))) return false;
    return true;
}

static bool g_no_pairs;

static bool dense_f32(const ct_tensor *t) { return t && t->dtype == CT_F32 && tensor_is_contiguous(t); }

/* Outputs and inputs of a fused launch: disjoint, or exactly the same bytes (element i is
 * read before it is written, by the same work-item). */
static bool apart_or_same(const nn_span *a, const nn_span *b)
{
    return !nn_overlap(a, b) || nn_same_span(a, b);
}

/* RMS_NORM y = norm(x) * w, then ADD z = r + y (either order): 2 when launched as one
 * nn_norm_add, 0 otherwise. Dense f32 rows only: the decode step's post-norms. */
static int norm_add(ct_device *dev, const ct_op *ops, int n)
{
    if (n < 2 || ops[0].kind != CT_OP_RMS_NORM || ops[1].kind != CT_OP_ADD) return 0;
    const ct_op *nm = &ops[0], *ad = &ops[1];
    const ct_tensor *x = nm->src[0], *w = nm->n_src > 1 ? nm->src[1] : NULL, *y = nm->dst, *z = ad->dst;
    if (!ocl_nn_supports(dev, nm) || !ocl_ew_supports(dev, ad) || ad->n_src != 2) return 0;
    int yi = fuse_same_view(ad->src[0], y) ? 0 : fuse_same_view(ad->src[1], y) ? 1 : -1;
    const ct_tensor *r = yi < 0 ? NULL : ad->src[1 - yi];
    int64_t numel = ct_tensor_numel(y);
    if (!r || !dense_f32(x) || !dense_f32(y) || !dense_f32(r) || !dense_f32(z) || !numel || x->ndim < 1)
        return 0;
    if (ct_tensor_numel(x) != numel || ct_tensor_numel(r) != numel || ct_tensor_numel(z) != numel) return 0;
    nn_span xs, ys, rs, zs, ws;
    if (!nn_span_of(x, dev, &xs) || !nn_span_of(y, dev, &ys) || !nn_span_of(r, dev, &rs) ||
        !nn_span_of(z, dev, &zs))
        return 0;
    if (nn_overlap(&rs, &ys) || !apart_or_same(&ys, &zs) || !apart_or_same(&ys, &xs) || !apart_or_same(&zs, &xs) ||
        !apart_or_same(&zs, &rs))
        return 0;
    if (w && (nn_dt(w->dtype) < 0 || !nn_span_of(w, dev, &ws) || nn_overlap(&ws, &ys) || nn_overlap(&ws, &zs))) return 0;
    cl_long len = x->shape[x->ndim - 1], wst = w ? w->stride[0] : 1;
    cl_int dtw = w ? nn_dt(w->dtype) : 0, has_w = w != NULL;
    cl_float eps = (cl_float)nm->p.norm.eps;
    cl_mem wm = w ? ws.m : xs.m; /* absent weight: any valid buffer, never read */
    cl_ulong wo = w ? ws.lo : 0;
    size_t wg = nn_wg(dev, NN_ROW_WG), global = (size_t)(numel / len) * wg;
    ocl_arg a[] = {OCL_ARG(xs.m), OCL_ARG(xs.lo), OCL_ARG(ys.m), OCL_ARG(ys.lo), OCL_ARG(wm),    OCL_ARG(wo),
                   OCL_ARG(wst),  OCL_ARG(dtw),   OCL_ARG(has_w), OCL_ARG(rs.m), OCL_ARG(rs.lo), OCL_ARG(zs.m),
                   OCL_ARG(zs.lo), OCL_ARG(len),  OCL_ARG(eps),  OCL_LOCAL(wg * sizeof(float))};
    return nn_launch(dev, "nn", "nn_norm_add", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg) == CT_OK ? 2 : 0;
}

void ocl_nn_test_pairs(bool on) { g_no_pairs = !on; }

/* ROPE a, SET_ROWS b of a's output, SET_ROWS c (k rotated and written into its cache, v
 * written into its own): b's source is a's output itself, both contiguous, so a work-item
 * of the rotation can write the cache elements its rotated values go to; c touches nothing
 * of a's or b's. 3 when launched as one, 0 otherwise. */
static int rope_set_rows2(ct_device *dev, const ct_op *ops, int n)
{
    if (n < 3 || ops[0].kind != CT_OP_ROPE || ops[1].kind != CT_OP_SET_ROWS || ops[2].kind != CT_OP_SET_ROWS) return 0;
    const ct_op *a = &ops[0], *b = &ops[1], *c = &ops[2];
    const ct_tensor *y = a->dst, *src = b->src[0];
    if (!ocl_nn_supports(dev, a) || !ocl_nn_supports(dev, b) || !ocl_nn_supports(dev, c)) return 0;
    if (!y || !src || y->dtype != src->dtype || ct_tensor_numel(y) != ct_tensor_numel(src) || !ct_tensor_numel(y) ||
        !tensor_is_contiguous(y) || !tensor_is_contiguous(src))
        return 0;
    nn_span ys, ss, s, bd;
    if (!nn_span_of(y, dev, &ys) || !nn_span_of(src, dev, &ss) || ys.m != ss.m || ys.lo != ss.lo) return 0;
    /* b's writes touch nothing a reads or writes, and a's output is not b's index */
    if (!nn_span_of(b->dst, dev, &bd) || nn_overlap(&bd, &ys)) return 0;
    for (int i = 0; i < a->n_src; i++)
        if (a->src[i] && (!nn_span_of(a->src[i], dev, &s) || nn_overlap(&s, &bd))) return 0;
    if (!b->src[1] || !nn_span_of(b->src[1], dev, &s) || nn_overlap(&s, &ys) || nn_overlap(&s, &bd)) return 0;
    if (!independent(dev, a, c) || !independent(dev, b, c)) return 0;
    nn_rope_a ra;
    nn_set_rows_a sk, sv;
    ocl_arg args[NN_ROPE_NARGS + 2 * NN_SET_ROWS_NARGS + 1];
    cl_long work[3] = {0, 0, 0};
    ct_status st = nn_rope_prepare(dev, a, &ra, args, &work[0]);
    if (st == CT_OK) st = nn_set_rows_prepare(dev, b, &sk, args + NN_ROPE_NARGS, &work[1]);
    if (st == CT_OK) st = nn_set_rows_prepare(dev, c, &sv, args + NN_ROPE_NARGS + NN_SET_ROWS_NARGS, &work[2]);
    if (st != CT_OK || !work[0] || !work[2]) return 0;
    int na = NN_ROPE_NARGS + 2 * NN_SET_ROWS_NARGS + 1;
    args[na - 1] = OCL_ARG(work[0]);
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)(work[0] + work[2]), wg);
    return nn_launch(dev, "nn", "nn_rope_set_rows2", na, args, 1, &global, &wg) == CT_OK ? 3 : 0;
}

int ocl_nn_pair(ct_device *dev, const ct_op *ops, int n)
{
    if (g_no_pairs || n < 2) return 0;
    int used = nn_head_norm_rope(dev, ops, n);
    if (!used) used = rope_set_rows2(dev, ops, n);
    if (!used) used = norm_add(dev, ops, n);
    if (used) return used;
    if (ops[0].kind != ops[1].kind) return 0;
    if (ops[0].kind != CT_OP_ROPE && ops[0].kind != CT_OP_SET_ROWS) return 0;
    if (!ocl_nn_supports(dev, &ops[0]) || !ocl_nn_supports(dev, &ops[1]) || !independent(dev, &ops[0], &ops[1]))
        return 0;
    bool rope = ops[0].kind == CT_OP_ROPE;
    const char *name = rope ? "nn_rope2" : "nn_set_rows2";
    int na = rope ? NN_ROPE_NARGS : NN_SET_ROWS_NARGS;
    nn_rope_a ra[2];
    nn_set_rows_a sa[2];
    ocl_arg a[2 * NN_ROPE_NARGS + 1];
    cl_long work[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        ct_status s = rope ? nn_rope_prepare(dev, &ops[i], &ra[i], a + i * na, &work[i])
                           : nn_set_rows_prepare(dev, &ops[i], &sa[i], a + i * na, &work[i]);
        if (s != CT_OK) return 0;
    }
    if (!work[0] || !work[1]) return 0;
    a[2 * na] = OCL_ARG(work[0]);
    size_t wg = nn_wg(dev, 256), global = nn_round_up((size_t)(work[0] + work[1]), wg);
    return nn_launch(dev, "nn", name, 2 * na + 1, a, 1, &global, &wg) == CT_OK ? 2 : 0;
}
