/* The step planner's pairs (capture.c): two adjacent independent ROPEs (q and k of a
 * decode step) or SET_ROWS (k and v into their caches) as one launch of nn_rope2 /
 * nn_set_rows2; or k's ROPE with both SET_ROWS as one launch of nn_rope_set_rows2 (the
 * ropes of q and k are rarely a pair: the step's arena gives k's rotation the bytes of q,
 * whose last reader is q's rotation). Independent: neither writes bytes the other reads or writes, so running
 * them side by side gives what running them in order gives. */
#include <string.h>

#include "backends/opencl/nn_internal.h"

typedef struct nn_span {
    cl_mem m;
    cl_ulong lo, hi;
} nn_span;

/* The bytes a tensor's elements can touch (strides are not negative here). */
static bool span_of(const ct_tensor *t, const ct_device *dev, nn_span *s)
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

static bool overlap(const nn_span *a, const nn_span *b) { return a->m == b->m && a->lo < b->hi && b->lo < a->hi; }

/* b's output touches nothing of a, and a's output nothing b reads. */
static bool independent(const ct_device *dev, const ct_op *a, const ct_op *b)
{
    nn_span oa, ob, s;
    if (!span_of(a->dst, dev, &oa) || !span_of(b->dst, dev, &ob) || overlap(&oa, &ob)) return false;
    for (int i = 0; i < b->n_src; i++)
        if (b->src[i] && (!span_of(b->src[i], dev, &s) || overlap(&s, &oa))) return false;
    for (int i = 0; i < a->n_src; i++)
        if (a->src[i] && (!span_of(a->src[i], dev, &s) || overlap(&s, &ob))) return false;
    return true;
}

static bool g_no_pairs;

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
    if (!span_of(y, dev, &ys) || !span_of(src, dev, &ss) || ys.m != ss.m || ys.lo != ss.lo) return 0;
    /* b's writes touch nothing a reads or writes, and a's output is not b's index */
    if (!span_of(b->dst, dev, &bd) || overlap(&bd, &ys)) return 0;
    for (int i = 0; i < a->n_src; i++)
        if (a->src[i] && (!span_of(a->src[i], dev, &s) || overlap(&s, &bd))) return 0;
    if (!b->src[1] || !span_of(b->src[1], dev, &s) || overlap(&s, &ys) || overlap(&s, &bd)) return 0;
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
    int used = rope_set_rows2(dev, ops, n);
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
