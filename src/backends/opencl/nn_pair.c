/* The step planner's pairs (capture.c): two adjacent independent ROPEs (q and k of a
 * decode step) or SET_ROWS (k and v into their caches) as one launch of nn_rope2 /
 * nn_set_rows2. Independent: neither writes bytes the other reads or writes, so running
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

int ocl_nn_pair(ct_device *dev, const ct_op *ops, int n)
{
    if (g_no_pairs || n < 2 || ops[0].kind != ops[1].kind) return 0;
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
