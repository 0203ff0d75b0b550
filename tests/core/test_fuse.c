/* The step planner's analysis (src/core/fuse.c) on hand-built op arrays: the ops of a
 * llama decode layer (T = 1) as src/llm/forward.c records them group into
 * norm+q/k/v, rope+rows, sdpa alone, o+add, norm+gate/up+swiglu, down+add; and near
 * misses that must not merge (another x, a reader in between, a bias, a strided x, an
 * output aliasing an input, swapped or broadcast epilogue operands, a row write reading
 * another op's output at a shifted place, another positions tensor, two writes into one
 * cache), a backend refusing part of a group, and runs that start or end mid-pattern.
 * No device: the tensors are shells (geometry only), the expectations written out here. */
#include <stdlib.h>
#include <string.h>

#include "core/fuse.h"
#include "harness.h"

/* ---- tensors: shells and views, freed at the end of each test ---- */

#define POOL 512
static ct_tensor *g_pool[POOL];
static int g_npool;

static ct_tensor *keep(ct_tensor *t)
{
    CHECK(g_npool < POOL);
    if (g_npool < POOL) g_pool[g_npool++] = t;
    return t;
}

static void pool_free(void)
{
    for (int i = 0; i < g_npool; i++) ct_tensor_free(g_pool[i]);
    g_npool = 0;
}

static ct_tensor *shell(int nd, const int64_t *shape, ct_dtype dt)
{
    ct_tensor *t = NULL;
    CHECK_OK(tensor_new_shell(nd, shape, dt, &t));
    return keep(t);
}

static ct_tensor *view(const ct_tensor *t, int nd, const int64_t *shape, const int64_t *stride, int64_t offset)
{
    ct_tensor *v = NULL;
    CHECK_OK(tensor_new_view(t, nd, shape, stride, offset, &v));
    return keep(v);
}

#define S(...) ((const int64_t[]){__VA_ARGS__})

/* ---- a llama decode layer: n_embd 256, 8 q heads / 4 kv heads of 32, n_ff 768 ---- */

enum { NORM1, LQ, LK, LV, ROPEQ, ROPEK, ROWSK, ROWSV, SDPA, LO, ADD1, NORM2, LG, LU, GLU, LD, ADD2, N_LAYER_OPS };

typedef struct layer {
    ct_op ops[N_LAYER_OPS + 4];
    ct_tensor *x, *h, *q, *k, *v, *qr, *kr, *kc, *vc, *slot, *pos, *att, *ao, *x1, *h2, *g, *u, *gu, *f, *y;
} layer;

static ct_op op2(ct_op_kind kind, const ct_tensor *a, const ct_tensor *b, ct_tensor *dst)
{
    return (ct_op){.kind = kind, .n_src = 2, .src = {a, b}, .dst = dst};
}

static void build_layer(layer *L)
{
    memset(L, 0, sizeof *L);
    ct_tensor *wn = shell(1, S(256), CT_F32), *wn2 = shell(1, S(256), CT_F32);
    ct_tensor *wq = shell(2, S(256, 256), CT_F16), *wk = shell(2, S(128, 256), CT_F16),
              *wv = shell(2, S(128, 256), CT_F16), *wo = shell(2, S(256, 256), CT_F16),
              *wg = shell(2, S(768, 256), CT_F16), *wu = shell(2, S(768, 256), CT_F16),
              *wd = shell(2, S(256, 768), CT_F16);
    L->x = shell(2, S(1, 256), CT_F32);
    L->h = shell(2, S(1, 256), CT_F32);
    L->q = shell(2, S(1, 256), CT_F32);
    L->k = shell(2, S(1, 128), CT_F32);
    L->v = shell(2, S(1, 128), CT_F32);
    L->qr = shell(3, S(1, 8, 32), CT_F32);
    L->kr = shell(3, S(1, 4, 32), CT_F32);
    L->kc = shell(2, S(8192, 32), CT_F16);
    L->vc = shell(2, S(8192, 32), CT_F16);
    L->slot = shell(1, S(4), CT_I32);
    L->pos = shell(1, S(1), CT_I32);
    L->att = shell(4, S(1, 8, 1, 32), CT_F32);
    L->ao = shell(2, S(1, 256), CT_F32);
    L->x1 = shell(2, S(1, 256), CT_F32);
    L->h2 = shell(2, S(1, 256), CT_F32);
    L->g = shell(2, S(1, 768), CT_F32);
    L->u = shell(2, S(1, 768), CT_F32);
    L->gu = shell(2, S(1, 768), CT_F32);
    L->f = shell(2, S(1, 256), CT_F32);
    L->y = shell(2, S(1, 256), CT_F32);
    ct_tensor *q3 = view(L->q, 3, S(1, 8, 32), S(256, 32, 1), 0), *k3 = view(L->k, 3, S(1, 4, 32), S(128, 32, 1), 0);
    ct_tensor *kr2 = view(L->kr, 2, S(4, 32), S(32, 1), 0), *vr2 = view(L->v, 2, S(4, 32), S(32, 1), 0);
    ct_tensor *att2 = view(L->att, 2, S(1, 256), S(256, 1), 0);
    ct_op *o = L->ops;
    o[NORM1] = op2(CT_OP_RMS_NORM, L->x, wn, L->h);
    o[NORM1].p.norm.eps = 1e-5, o[NORM1].p.norm.norm_ndim = 1;
    o[LQ] = op2(CT_OP_LINEAR, L->h, wq, L->q);
    o[LK] = op2(CT_OP_LINEAR, L->h, wk, L->k);
    o[LV] = op2(CT_OP_LINEAR, L->h, wv, L->v);
    ct_rope_params rp = {.n_dims = 32, .freq_base = 10000, .freq_scale = 1, .mode = CT_ROPE_NORMAL};
    o[ROPEQ] = op2(CT_OP_ROPE, q3, L->pos, L->qr);
    o[ROPEQ].p.rope = rp;
    o[ROPEK] = op2(CT_OP_ROPE, k3, L->pos, L->kr);
    o[ROPEK].p.rope = rp;
    o[ROWSK] = op2(CT_OP_SET_ROWS, kr2, L->slot, L->kc);
    o[ROWSV] = op2(CT_OP_SET_ROWS, vr2, L->slot, L->vc);
    o[SDPA] = (ct_op){.kind = CT_OP_SDPA, .n_src = 3, .src = {L->qr, L->kc, L->vc}, .dst = L->att};
    o[LO] = op2(CT_OP_LINEAR, att2, wo, L->ao);
    o[ADD1] = op2(CT_OP_ADD, L->x, L->ao, L->x1);
    o[NORM2] = op2(CT_OP_RMS_NORM, L->x1, wn2, L->h2);
    o[NORM2].p.norm.eps = 1e-5, o[NORM2].p.norm.norm_ndim = 1;
    o[LG] = op2(CT_OP_LINEAR, L->h2, wg, L->g);
    o[LU] = op2(CT_OP_LINEAR, L->h2, wu, L->u);
    o[GLU] = op2(CT_OP_SWIGLU, L->g, L->u, L->gu);
    o[LD] = op2(CT_OP_LINEAR, L->gu, wd, L->f);
    o[ADD2] = op2(CT_OP_ADD, L->x1, L->f, L->y);
}

/* ---- backends ---- */

static int g_refuse_glu, g_refuse_rows, g_calls;

static bool caps_mv(void *ctx, const ct_op *ops, const fuse_group *g)
{
    (void)ctx;
    g_calls++;
    for (int j = 0; j < g->n_lin; j++) CHECK(ops[g->lin[j]].kind == CT_OP_LINEAR);
    return !(g_refuse_glu && g->glu >= 0);
}

static bool caps_rope(void *ctx, const ct_op *ops, const fuse_group *g)
{
    (void)ctx;
    g_calls++;
    for (int r = 0; r < g->n_rope; r++) CHECK(ops[g->rope[r]].kind == CT_OP_ROPE);
    return !(g_refuse_rows && g->n_rows > 0);
}

static const fuse_caps g_caps = {NULL, caps_mv, caps_rope};

/* Plans ops and checks that the groups tile [0, n) in order; returns the count. */
static int plan(const ct_op *ops, int n, const fuse_caps *caps, fuse_group *out)
{
    int ng = fuse_plan(ops, n, caps, out), at = 0;
    for (int i = 0; i < ng; i++) {
        CHECK_MSG(out[i].first == at && out[i].n >= 1, "group %d: first %d n %d, expected first %d", i, out[i].first,
                  out[i].n, at);
        CHECK(out[i].kind != FUSE_NONE || out[i].n == 1);
        at += out[i].n;
    }
    CHECK_MSG(at == n, "groups cover %d of %d ops", at, n);
    return ng;
}

/* "MV 4" (kind, size) expectations, one per group. */
typedef struct want {
    fuse_kind kind;
    int n;
} want;

static void expect(const fuse_group *got, int ng, const want *w, int nw)
{
    CHECK_MSG(ng == nw, "%d groups, expected %d", ng, nw);
    for (int i = 0; i < ng && i < nw; i++)
        CHECK_MSG(got[i].kind == w[i].kind && got[i].n == w[i].n, "group %d (ops from %d): kind %d n %d, expected %d %d",
                  i, got[i].first, (int)got[i].kind, got[i].n, (int)w[i].kind, w[i].n);
}

#define MV(n) {FUSE_MV, n}
#define RO(n) {FUSE_ROPE, n}
#define NO {FUSE_NONE, 1}
#define EXPECT(got, ng, ...)                                            \
    do {                                                                \
        static const want w_[] = {__VA_ARGS__};                         \
        expect(got, ng, w_, (int)(sizeof w_ / sizeof w_[0]));           \
    } while (0)

static fuse_group g_out[64];

static void test_layer(void)
{
    layer L;
    build_layer(&L);
    int ng = plan(L.ops, N_LAYER_OPS, &g_caps, g_out);
    EXPECT(g_out, ng, MV(4), RO(4), NO, MV(2), MV(4), MV(2));
    const fuse_group *a = &g_out[0], *r = &g_out[1], *o = &g_out[3], *f = &g_out[4], *d = &g_out[5];
    CHECK(a->norm == NORM1 && a->n_lin == 3 && a->lin[0] == LQ && a->lin[2] == LV && a->glu < 0 && a->add < 0);
    CHECK(r->n_rope == 2 && r->rope[0] == ROPEQ && r->rope[1] == ROPEK && r->n_rows == 2);
    CHECK(r->rows[0] == ROWSK && r->rows_rope[0] == 1 && r->rows[1] == ROWSV && r->rows_rope[1] == -1);
    CHECK(o->norm < 0 && o->n_lin == 1 && o->lin[0] == LO && o->add == ADD1 && o->add_lin == 0 && o->add_res == 0);
    CHECK(f->norm == NORM2 && f->n_lin == 2 && f->glu == GLU && f->add < 0);
    CHECK(d->lin[0] == LD && d->add == ADD2 && d->add_res == 0);
    char buf[128];
    CHECK(strstr(fuse_describe(L.ops, f, buf, sizeof buf), "swiglu") != NULL);
    /* no backend support: every op alone */
    fuse_caps none = {0};
    CHECK(plan(L.ops, N_LAYER_OPS, &none, g_out) == N_LAYER_OPS);
    pool_free();
}

static void test_other_x(void)
{
    layer L;
    build_layer(&L);
    L.ops[LK].src[0] = shell(2, S(1, 256), CT_F32);
    int ng = plan(L.ops, N_LAYER_OPS, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2), NO, NO, RO(4), NO, MV(2), MV(4), MV(2));
    /* the same storage and shape at another offset is another x as well */
    build_layer(&L);
    ct_tensor *h2 = shell(2, S(2, 256), CT_F32);
    L.ops[NORM1].dst = view(h2, 2, S(1, 256), S(256, 1), 0);
    L.ops[LQ].src[0] = L.ops[NORM1].dst;
    L.ops[LK].src[0] = L.ops[LV].src[0] = view(h2, 2, S(1, 256), S(256, 1), 256);
    ng = plan(L.ops, 4, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2), MV(2));
    CHECK(g_out[1].norm < 0 && g_out[1].lin[0] == LK);
    pool_free();
}

static void test_reader_between(void)
{
    layer L;
    build_layer(&L);
    ct_op ops[N_LAYER_OPS + 1];
    memcpy(ops, L.ops, sizeof(ct_op) * (LQ + 1));
    ops[LQ + 1] = op2(CT_OP_MUL, L.q, L.q, shell(2, S(1, 256), CT_F32));
    memcpy(ops + LQ + 2, L.ops + LK, sizeof(ct_op) * (N_LAYER_OPS - LK));
    int ng = plan(ops, N_LAYER_OPS + 1, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2), NO, MV(2), RO(4), NO, MV(2), MV(4), MV(2));
    CHECK(g_out[2].norm < 0 && g_out[2].n_lin == 2);
    pool_free();
}

static void test_bias(void)
{
    layer L;
    build_layer(&L);
    L.ops[LK].n_src = 3;
    L.ops[LK].src[2] = shell(1, S(128), CT_F32);
    int ng = plan(L.ops, 4, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2), NO, NO);
    /* a linear with a bias never takes an add epilogue either */
    build_layer(&L);
    L.ops[LO].n_src = 3;
    L.ops[LO].src[2] = shell(1, S(256), CT_F32);
    ng = plan(L.ops + LO, 2, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO);
    pool_free();
}

static void test_strided_x(void)
{
    layer L;
    build_layer(&L);
    ct_tensor *wide = shell(2, S(1, 512), CT_F32);
    ct_tensor *xs = view(wide, 2, S(1, 256), S(512, 2), 0);
    L.ops[NORM1].dst = xs;
    for (int i = LQ; i <= LV; i++) L.ops[i].src[0] = xs;
    int ng = plan(L.ops, 4, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO, NO, NO);
    pool_free();
}

static void test_alias(void)
{
    layer L;
    build_layer(&L);
    /* linear k writes into the storage of x (its first half): the others would read it changed */
    L.ops[LK].dst = view(L.h, 2, S(1, 128), S(256, 1), 0);
    int ng = plan(L.ops, 4, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2), NO, NO);
    /* a linear's output is a weight of the next one */
    build_layer(&L);
    L.ops[LK].src[1] = view(L.q, 2, S(1, 256), S(256, 1), 0);
    ng = plan(L.ops, 4, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2), MV(2));
    CHECK(g_out[0].n_lin == 1 && g_out[1].norm < 0);
    /* the residual of the add overlaps the linear's output, shifted: it would be read half-written */
    build_layer(&L);
    ct_tensor *big = shell(2, S(2, 256), CT_F32);
    L.ops[LO].dst = view(big, 2, S(1, 256), S(256, 1), 0);
    L.ops[ADD1].src[1] = L.ops[LO].dst;
    L.ops[ADD1].src[0] = view(big, 2, S(1, 256), S(256, 1), 128);
    L.ops[ADD1].dst = L.x1;
    ng = plan(L.ops + LO, 2, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO);
    pool_free();
}

static void test_epilogue_misses(void)
{
    layer L;
    build_layer(&L);
    L.ops[GLU].src[0] = L.u;
    L.ops[GLU].src[1] = L.g;
    int ng = plan(L.ops + NORM2, 4, &g_caps, g_out);
    EXPECT(g_out, ng, MV(3), NO);
    build_layer(&L);
    L.ops[ADD1].src[0] = shell(1, S(256), CT_F32); /* broadcast residual */
    ng = plan(L.ops + LO, 2, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO);
    /* the add writes its own residual in place: refused, as every output that touches an input */
    build_layer(&L);
    L.ops[ADD1].dst = L.x;
    ng = plan(L.ops + LO, 2, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO);
    pool_free();
}

static void test_rope_misses(void)
{
    layer L;
    build_layer(&L);
    /* the k row write reads rope q's output (a different shape): not the rotated k rows */
    L.ops[ROWSK].src[0] = view(L.qr, 2, S(4, 32), S(32, 1), 0);
    int ng = plan(L.ops + ROPEQ, 4, &g_caps, g_out);
    EXPECT(g_out, ng, RO(2), NO, NO);
    /* another positions tensor for k */
    build_layer(&L);
    L.ops[ROPEK].src[1] = shell(1, S(1), CT_I32);
    ng = plan(L.ops + ROPEQ, 4, &g_caps, g_out);
    EXPECT(g_out, ng, NO, RO(3));
    /* k and v rows written into one cache: the second write could land on the first */
    build_layer(&L);
    L.ops[ROWSV].dst = L.kc;
    ng = plan(L.ops + ROPEQ, 4, &g_caps, g_out);
    EXPECT(g_out, ng, RO(3), NO);
    /* the k rows view shifted by one element */
    build_layer(&L);
    ct_tensor *kbig = shell(3, S(2, 4, 32), CT_F32);
    L.ops[ROPEK].dst = view(kbig, 3, S(1, 4, 32), S(128, 32, 1), 0);
    L.ops[ROWSK].src[0] = view(kbig, 2, S(4, 32), S(32, 1), 1);
    ng = plan(L.ops + ROPEQ, 4, &g_caps, g_out);
    EXPECT(g_out, ng, RO(2), NO, NO);
    pool_free();
}

static void test_backend_refuses(void)
{
    layer L;
    build_layer(&L);
    g_refuse_glu = g_refuse_rows = 1;
    int ng = plan(L.ops, N_LAYER_OPS, &g_caps, g_out);
    g_refuse_glu = g_refuse_rows = 0;
    EXPECT(g_out, ng, MV(4), RO(2), NO, NO, NO, MV(2), MV(3), NO, MV(2));
    pool_free();
}

static void test_mid_pattern(void)
{
    layer L;
    build_layer(&L);
    /* a run that starts at linear k (the norm and q are another device's) */
    int ng = plan(L.ops + LK, N_LAYER_OPS - LK, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2), RO(4), NO, MV(2), MV(4), MV(2));
    CHECK(g_out[0].norm < 0 && g_out[0].first == 0 && g_out[0].n_lin == 2);
    /* one that ends after linear q, and one that ends inside the rope run */
    ng = plan(L.ops, 2, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2));
    ng = plan(L.ops, ROWSK, &g_caps, g_out);
    EXPECT(g_out, ng, MV(4), RO(2));
    /* ends on the gate linear: norm + gate, no epilogue */
    ng = plan(L.ops + NORM2, 2, &g_caps, g_out);
    EXPECT(g_out, ng, MV(2));
    ng = plan(L.ops, 1, &g_caps, g_out);
    EXPECT(g_out, ng, NO);
    pool_free();
}

static void test_views(void)
{
    ct_tensor *a = shell(2, S(4, 8), CT_F32);
    ct_tensor *v0 = view(a, 2, S(2, 8), S(8, 1), 0), *v1 = view(a, 2, S(2, 8), S(8, 1), 16);
    ct_tensor *v0b = view(a, 2, S(2, 8), S(8, 1), 0), *col = view(a, 2, S(4, 1), S(8, 1), 7);
    CHECK(fuse_same_view(v0, v0b) && !fuse_same_view(v0, v1) && !fuse_same_view(v0, a));
    CHECK(!fuse_overlap(v0, v1) && fuse_overlap(v0, a) && fuse_overlap(col, v1) && fuse_overlap(col, v0));
    CHECK(!fuse_overlap(v0, shell(2, S(4, 8), CT_F32)));
    pool_free();
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_views);
    RUN(test_layer);
    RUN(test_other_x);
    RUN(test_reader_between);
    RUN(test_bias);
    RUN(test_strided_x);
    RUN(test_alias);
    RUN(test_epilogue_misses);
    RUN(test_rope_misses);
    RUN(test_backend_refuses);
    RUN(test_mid_pattern);
    return th_finish();
}
