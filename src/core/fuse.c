/* The step planner's analysis (fuse.h): pattern matching over a captured run of ops, with
 * the alias rules that make merging safe. Backend-independent: a backend says through
 * fuse_caps what it can launch; this file decides what may be merged at all. */
#include <stdio.h>
#include <string.h>

#include "core/fuse.h"

bool fuse_same_view(const ct_tensor *a, const ct_tensor *b)
{
    if (!a || !b) return false;
    if (a->st != b->st || a->dtype != b->dtype || a->offset != b->offset || a->ndim != b->ndim) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || (a->shape[d] > 1 && a->stride[d] != b->stride[d])) return false;
    return true;
}

/* Whether two device copies, pieces of one recorded step's arena, hold bytes [alo, ahi) and
 * [blo, bhi) of their storages in the same place: the arena gives two intermediates whose
 * lifetimes do not meet the same bytes, and a fused group runs several ops' lifetimes as
 * one (a linear's input, last read by the linear, beside the add's output after it). On a
 * backend whose pointers are handles the pieces share the arena's handle, at offsets. */
static bool arena_pieces_meet(const ct_storage_copy *a, size_t alo, size_t ahi, const ct_storage_copy *b, size_t blo,
                              size_t bhi)
{
    if (a->dev != b->dev || !a->buf.borrowed || !b->buf.borrowed || !a->buf.ptr || !b->buf.ptr) return false;
    uintptr_t pa = a->buf.offset, pb = b->buf.offset;
    if (a->buf.ptr != b->buf.ptr) pa += (uintptr_t)a->buf.ptr, pb += (uintptr_t)b->buf.ptr;
    return pa + alo < pb + bhi && pb + blo < pa + ahi;
}

bool fuse_overlap(const ct_tensor *a, const ct_tensor *b)
{
    if (!a || !b) return false;
    size_t alo, ahi, blo, bhi;
    tensor_byte_range(a, &alo, &ahi);
    tensor_byte_range(b, &blo, &bhi);
    if (alo >= ahi || blo >= bhi) return false;
    if (a->st == b->st) return alo < bhi && blo < ahi;
    for (int i = 0; i < a->st->n_copies; i++)
        for (int j = 0; j < b->st->n_copies; j++)
            if (arena_pieces_meet(&a->st->copies[i], alo, ahi, &b->st->copies[j], blo, bhi)) return true;
    return false;
}

static bool f32_dense(const ct_tensor *t) { return t && t->dtype == CT_F32 && tensor_is_contiguous(t); }

static bool same_shape(const ct_tensor *a, const ct_tensor *b)
{
    return shape_equal(a->ndim, a->shape, b->ndim, b->shape);
}

/* ---- the alias rule ----
 * A group reads its external inputs and writes its outputs in one go, so it must not
 * matter in which order: no output may touch an external input or another output. The
 * values passed from one member to a later one (the norm's y to the linears, a linear's
 * out to the epilogue, rope k's out to its row write) are exact views of the producer's
 * dst, checked by the matchers, and are not external inputs. */
#define FUSE_MAX_T 16
typedef struct io_set {
    const ct_tensor *in[FUSE_MAX_T], *out[FUSE_MAX_T];
    int n_in, n_out;
} io_set;

static void add_in(io_set *s, const ct_tensor *t)
{
    if (t && s->n_in < FUSE_MAX_T) s->in[s->n_in++] = t;
}

static void add_out(io_set *s, const ct_tensor *t)
{
    if (t && s->n_out < FUSE_MAX_T) s->out[s->n_out++] = t;
}

static bool io_safe(const io_set *s)
{
    for (int i = 0; i < s->n_out; i++) {
        for (int j = i + 1; j < s->n_out; j++)
            if (fuse_overlap(s->out[i], s->out[j])) return false;
        for (int j = 0; j < s->n_in; j++)
            if (fuse_overlap(s->out[i], s->in[j])) return false;
    }
    return true;
}

/* ---- FUSE_MV ---- */

static bool lin_plain(const ct_op *op)
{
    if (op->kind != CT_OP_LINEAR || op->n_src < 2 || (op->n_src > 2 && op->src[2])) return false;
    const ct_tensor *x = op->src[0], *w = op->src[1];
    /* a strided x would need a gather first: that is no saving */
    return x && w && f32_dense(x) && x->ndim >= 1 && w->ndim == 2 && f32_dense(op->dst);
}

static bool norm_plain(const ct_op *op)
{
    return op->kind == CT_OP_RMS_NORM && op->p.norm.norm_ndim == 1 && op->src[0] && op->src[0]->dtype == CT_F32 &&
           op->src[0]->ndim >= 1 && f32_dense(op->dst);
}

/* The epilogue op at e for the group's linears (g->lin, g->n_lin set): fills g->glu or
 * g->add; false when e is none of the two shapes. */
static bool match_epilogue(const ct_op *ops, int e, fuse_group *g)
{
    const ct_op *op = &ops[e];
    if ((op->kind == CT_OP_SWIGLU || op->kind == CT_OP_GEGLU) && g->n_lin == 2) {
        const ct_tensor *a = ops[g->lin[0]].dst, *b = ops[g->lin[1]].dst;
        if (fuse_same_view(op->src[0], a) && fuse_same_view(op->src[1], b) && same_shape(a, b) &&
            f32_dense(op->dst) && same_shape(op->dst, a)) {
            g->glu = e;
            return true;
        }
        return false;
    }
    if (op->kind != CT_OP_ADD || op->n_src != 2 || !f32_dense(op->dst)) return false;
    for (int j = 0; j < g->n_lin; j++) {
        const ct_tensor *y = ops[g->lin[j]].dst;
        for (int s = 0; s < 2; s++) {
            const ct_tensor *r = op->src[1 - s];
            if (!fuse_same_view(op->src[s], y) || !f32_dense(r) || !same_shape(r, y) || !same_shape(op->dst, y))
                continue;
            g->add = e;
            g->add_lin = j;
            g->add_res = 1 - s;
            return true;
        }
    }
    return false;
}

static bool mv_safe(const ct_op *ops, const fuse_group *g)
{
    io_set s = {0};
    if (g->norm >= 0) {
        add_in(&s, ops[g->norm].src[0]);
        add_in(&s, ops[g->norm].src[1]);
        add_out(&s, ops[g->norm].dst);
    } else {
        add_in(&s, ops[g->lin[0]].src[0]);
    }
    for (int j = 0; j < g->n_lin; j++) {
        add_in(&s, ops[g->lin[j]].src[1]);
        add_out(&s, ops[g->lin[j]].dst);
    }
    if (g->glu >= 0) add_out(&s, ops[g->glu].dst);
    if (g->add >= 0) {
        add_in(&s, ops[g->add].src[g->add_res]);
        add_out(&s, ops[g->add].dst);
    }
    return io_safe(&s);
}

/* The group [g->first, g->first + g->n) with its members laid out in order. */
static void mv_layout(fuse_group *g, int first, int norm, int n_lin, bool epi, int lin0)
{
    g->kind = FUSE_MV;
    g->first = first;
    g->norm = norm;
    g->n_lin = n_lin;
    for (int j = 0; j < n_lin; j++) g->lin[j] = lin0 + j;
    g->n = (norm >= 0) + n_lin + (epi ? 1 : 0);
}

static bool try_mv(const ct_op *ops, int n, int i, const fuse_caps *caps, fuse_group *out)
{
    if (!caps || !caps->mv_ok) return false;
    int norm = -1, l0 = i;
    if (norm_plain(&ops[i])) {
        norm = i;
        l0 = i + 1;
    }
    if (l0 >= n || !lin_plain(&ops[l0])) return false;
    const ct_tensor *x = ops[l0].src[0];
    if (norm >= 0 && !fuse_same_view(x, ops[norm].dst)) return false;
    int n_lin = 1;
    while (n_lin < FUSE_MAX_LIN && l0 + n_lin < n && lin_plain(&ops[l0 + n_lin]) &&
           fuse_same_view(ops[l0 + n_lin].src[0], x))
        n_lin++;
    /* largest first: every linear, then fewer; with the epilogue, then without */
    for (int k = n_lin; k >= 1; k--) {
        for (int with_epi = 1; with_epi >= 0; with_epi--) {
            fuse_group g = {.glu = -1, .add = -1, .add_lin = -1, .add_res = -1};
            mv_layout(&g, i, norm, k, false, l0);
            if (with_epi) {
                int e = l0 + k;
                if (e >= n || !match_epilogue(ops, e, &g)) continue;
                g.n++;
            }
            if (g.n < 2 || !mv_safe(ops, &g) || !caps->mv_ok(caps->ctx, ops, &g)) continue;
            *out = g;
            return true;
        }
    }
    return false;
}

/* ---- FUSE_ROPE ---- */

static bool rope_plain(const ct_op *op)
{
    const ct_tensor *x = op->src[0], *pos = op->src[1];
    return op->kind == CT_OP_ROPE && x && pos && x->dtype == CT_F32 && x->ndim == 3 && x->shape[0] == 1 &&
           (x->shape[2] <= 1 || x->stride[2] == 1) && f32_dense(op->dst) && pos->ndim == 1 &&
           (pos->dtype == CT_I32 || pos->dtype == CT_I64);
}

static bool rope_params_equal(const ct_rope_params *a, const ct_rope_params *b)
{
    return a->n_dims == b->n_dims && a->freq_base == b->freq_base && a->freq_scale == b->freq_scale &&
           a->mode == b->mode;
}

static bool rows_plain(const ct_op *op)
{
    const ct_tensor *src = op->src[0], *idx = op->src[1], *dst = op->dst;
    return op->kind == CT_OP_SET_ROWS && src && idx && src->dtype == CT_F32 && src->ndim == 2 && dst->ndim == 2 &&
           idx->ndim == 1 && idx->shape[0] == src->shape[0] && (idx->dtype == CT_I32 || idx->dtype == CT_I64) &&
           src->shape[1] == dst->shape[1] && (dst->dtype == CT_F32 || dst->dtype == CT_F16 || dst->dtype == CT_BF16);
}

/* Rows src [H, D] that are exactly rope dst [1, H, D] (contiguous), read as it was written. */
static bool rows_of(const ct_tensor *src, const ct_tensor *rdst)
{
    return src->st == rdst->st && src->offset == rdst->offset && src->shape[0] == rdst->shape[1] &&
           src->shape[1] == rdst->shape[2] && (src->shape[1] <= 1 || src->stride[1] == 1) &&
           (src->shape[0] <= 1 || src->stride[0] == rdst->shape[2]);
}

/* A per-head RMS norm a rope may take in the group: x [1, H, D] f32 with unit stride along D,
 * its weight a dense vector of D. */
static bool norm_head(const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->n_src > 1 ? op->src[1] : NULL;
    if (!norm_plain(op) || !w || x->ndim != 3 || x->shape[0] != 1 || (x->shape[2] > 1 && x->stride[2] != 1))
        return false;
    return w->ndim == 1 && w->shape[0] == x->shape[2] && (w->shape[0] <= 1 || w->stride[0] == 1) &&
           (w->dtype == CT_F32 || w->dtype == CT_F16 || w->dtype == CT_BF16);
}

static bool rope_safe(const ct_op *ops, const fuse_group *g)
{
    io_set s = {0};
    for (int r = 0; r < g->n_rope; r++) {
        const ct_op *op = &ops[g->rope[r]];
        if (g->rope_norm[r] >= 0) { /* the rope reads the norm's dst exactly as the group writes it */
            const ct_op *nm = &ops[g->rope_norm[r]];
            add_in(&s, nm->src[0]);
            add_in(&s, nm->src[1]);
            add_out(&s, nm->dst);
        } else {
            add_in(&s, op->src[0]);
        }
        add_in(&s, op->src[1]);
        add_out(&s, op->dst);
    }
    for (int w = 0; w < g->n_rows; w++) {
        const ct_op *op = &ops[g->rows[w]];
        if (g->rows_rope[w] < 0) add_in(&s, op->src[0]);
        add_in(&s, op->src[1]);
        add_out(&s, op->dst);
    }
    return io_safe(&s);
}

/* Each leading norm is the one rope whose x is exactly its dst; false when a norm feeds
 * no rope (it would then run out of order). */
static bool match_rope_norms(const ct_op *ops, int first, fuse_group *g)
{
    for (int r = 0; r < g->n_rope; r++) {
        g->rope_norm[r] = -1;
        for (int k = 0; k < g->n_norm; k++)
            if (fuse_same_view(ops[g->rope[r]].src[0], ops[first + k].dst)) g->rope_norm[r] = first + k;
    }
    for (int k = 0; k < g->n_norm; k++) {
        bool used = false;
        for (int r = 0; r < g->n_rope; r++) used |= g->rope_norm[r] == first + k;
        if (!used) return false;
    }
    return true;
}

static bool try_rope(const ct_op *ops, int n, int i, const fuse_caps *caps, fuse_group *out)
{
    if (!caps || !caps->rope_ok) return false;
    fuse_group g = {.kind = FUSE_ROPE, .first = i, .norm = -1, .glu = -1, .add = -1};
    int j = i;
    while (j < n && g.n_norm < FUSE_MAX_ROPE && norm_head(&ops[j])) g.n_norm++, j++;
    if (j >= n || !rope_plain(&ops[j])) return false;
    int r0 = j;
    while (j < n && g.n_rope < FUSE_MAX_ROPE && rope_plain(&ops[j]) &&
           fuse_same_view(ops[j].src[1], ops[r0].src[1]) && rope_params_equal(&ops[j].p.rope, &ops[r0].p.rope))
        g.rope[g.n_rope++] = j++;
    if (!match_rope_norms(ops, i, &g)) return false;
    while (j < n && g.n_rows < FUSE_MAX_ROWS && rows_plain(&ops[j])) {
        int from = -1;
        for (int r = 0; r < g.n_rope; r++)
            if (rows_of(ops[j].src[0], ops[g.rope[r]].dst)) from = r;
        g.rows_rope[g.n_rows] = from;
        g.rows[g.n_rows++] = j++;
    }
    /* largest first: drop trailing row writes until the rest is safe and runnable */
    for (;;) {
        g.n = g.n_norm + g.n_rope + g.n_rows;
        if (g.n >= 2 && rope_safe(ops, &g) && caps->rope_ok(caps->ctx, ops, &g)) {
            *out = g;
            return true;
        }
        if (g.n_rows == 0) return false;
        g.n_rows--;
    }
}

/* ---- FUSE_NORM_ADD ---- */

static bool try_norm_add(const ct_op *ops, int n, int i, const fuse_caps *caps, fuse_group *out)
{
    if (!caps || !caps->norm_add_ok || i + 1 >= n || !norm_plain(&ops[i]) || !f32_dense(ops[i].src[0])) return false;
    const ct_op *nm = &ops[i], *a = &ops[i + 1];
    if (a->kind != CT_OP_ADD || a->n_src != 2 || !f32_dense(a->dst) || !same_shape(a->dst, nm->dst)) return false;
    for (int s = 0; s < 2; s++) {
        const ct_tensor *r = a->src[1 - s];
        if (!fuse_same_view(a->src[s], nm->dst) || !f32_dense(r) || !same_shape(r, nm->dst)) continue;
        fuse_group g = {.kind = FUSE_NORM_ADD, .first = i, .n = 2, .norm = i, .glu = -1, .add = i + 1,
                        .add_lin = -1, .add_res = 1 - s};
        io_set io = {0};
        add_in(&io, nm->src[0]);
        add_in(&io, nm->src[1]);
        add_in(&io, r);
        add_out(&io, nm->dst);
        add_out(&io, a->dst);
        if (!io_safe(&io) || !caps->norm_add_ok(caps->ctx, ops, &g)) return false;
        *out = g;
        return true;
    }
    return false;
}

int fuse_plan(const ct_op *ops, int n, const fuse_caps *caps, fuse_group *out)
{
    int ng = 0;
    for (int i = 0; i < n;) {
        fuse_group g;
        if (!try_mv(ops, n, i, caps, &g) && !try_rope(ops, n, i, caps, &g) && !try_norm_add(ops, n, i, caps, &g))
            g = (fuse_group){.kind = FUSE_NONE, .first = i, .n = 1, .norm = -1, .glu = -1, .add = -1};
        out[ng++] = g;
        i += g.n;
    }
    return ng;
}

const char *fuse_describe(const ct_op *ops, const fuse_group *g, char *buf, size_t len)
{
    int last = g->first + g->n - 1;
    switch (g->kind) {
    case FUSE_MV:
        snprintf(buf, len, "%s%s x%d%s%s (ops %d..%d)", g->norm >= 0 ? "rms_norm+" : "", "linear", g->n_lin,
                 g->glu >= 0 ? "+" : g->add >= 0 ? "+add" : "", g->glu >= 0 ? op_kind_name(ops[g->glu].kind) : "",
                 g->first, last);
        break;
    case FUSE_ROPE:
        snprintf(buf, len, "%srope x%d+set_rows x%d (ops %d..%d)", g->n_norm ? "rms_norm+" : "", g->n_rope,
                 g->n_rows, g->first, last);
        break;
    case FUSE_NORM_ADD:
        snprintf(buf, len, "rms_norm+add (ops %d..%d)", g->first, last);
        break;
    default:
        snprintf(buf, len, "%s (op %d)", op_kind_name(ops[g->first].kind), g->first);
        break;
    }
    return buf;
}
