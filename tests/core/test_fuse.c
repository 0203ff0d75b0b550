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

static int g_refuse_norm_add;

static bool caps_norm_add(void *ctx, const ct_op *ops, const fuse_group *g)
{
    (void)ctx;
    g_calls++;
    CHECK(ops[g->norm].kind == CT_OP_RMS_NORM && ops[g->add].kind == CT_OP_ADD);
    return !g_refuse_norm_add;
}

static const fuse_caps g_caps = {NULL, caps_mv, caps_rope, caps_norm_add};

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
#define NA(n) {FUSE_NORM_ADD, n}
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

/* Distinct intermediates can be pieces of one recorded step's arena at the same bytes
 * (exec/step.c gives them out by lifetime): the o projection's input and the add's output
 * there must not merge, since the fused kernel reads x while it writes the sum. Arena
 * pieces are marked borrowed (their memory is the step's, never freed with the storage);
 * on a backend whose pointers are handles they share one handle at offsets. */
static void arena_piece(ct_tensor *t, uintptr_t ptr, size_t offset)
{
    t->st->copies[0].buf = (ct_buffer){.ptr = (void *)ptr, .size = t->st->nbytes, .borrowed = true, .offset = offset};
}

static void test_arena_alias(void)
{
    static const struct {
        uintptr_t att, x1;
        size_t att_off, x1_off;
        bool merge;
    } cases[] = {
        {0x10000, 0x10000, 0, 0, false},      /* the same bytes */
        {0x10000, 0x10200, 0, 0, false},      /* x1 starts inside att's 1 KiB */
        {0x10000, 0x10400, 0, 0, true},       /* side by side */
        {0x20000, 0x20000, 0, 512, false},    /* one handle, overlapping offsets */
        {0x20000, 0x20000, 0, 4096, true},    /* one handle, apart */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        layer L;
        build_layer(&L);
        arena_piece(L.att, cases[c].att, cases[c].att_off);
        arena_piece(L.x1, cases[c].x1, cases[c].x1_off);
        int ng = plan(L.ops + LO, 2, &g_caps, g_out);
        if (cases[c].merge) EXPECT(g_out, ng, MV(2));
        else EXPECT(g_out, ng, NO, NO);
        /* storages that are not arena pieces never share bytes, whatever their pointers */
        L.x1->st->copies[0].buf.borrowed = false;
        CHECK(!fuse_overlap(L.att, L.x1));
        L.x1->st->copies[0].buf = (ct_buffer){0};
        L.att->st->copies[0].buf = (ct_buffer){0};
        pool_free();
    }
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

/* ---- a Gemma 3 decode layer: per-head q/k norms before the ropes, post-norms before the
 * residual adds (n_embd 256, 4 q heads / 1 kv head of 64, n_ff 512) ---- */

enum { G_NORM1, G_LQ, G_LK, G_LV, G_QN, G_KN, G_ROPEQ, G_ROPEK, G_ROWSK, G_ROWSV, G_SDPA, G_LO, G_PN, G_ADD1,
       G_NORM2, G_LG, G_LU, G_GLU, G_LD, G_FN, G_ADD2, G_N_OPS };

static ct_op norm_op(const ct_tensor *x, const ct_tensor *w, ct_tensor *y)
{
    ct_op o = op2(CT_OP_RMS_NORM, x, w, y);
    o.p.norm.eps = 1e-6, o.p.norm.norm_ndim = 1;
    return o;
}

static void build_gemma(ct_op *o)
{
    ct_tensor *wn = shell(1, S(256), CT_F32), *wqn = shell(1, S(64), CT_F32), *wkn = shell(1, S(64), CT_F16);
    ct_tensor *wq = shell(2, S(256, 256), CT_F16), *wk = shell(2, S(64, 256), CT_F16), *wv = shell(2, S(64, 256), CT_F16),
              *wo = shell(2, S(256, 256), CT_F16), *wg = shell(2, S(512, 256), CT_F16),
              *wu = shell(2, S(512, 256), CT_F16), *wd = shell(2, S(256, 512), CT_F16);
    ct_tensor *x = shell(2, S(1, 256), CT_F32), *h = shell(2, S(1, 256), CT_F32), *q = shell(2, S(1, 256), CT_F32),
              *k = shell(2, S(1, 64), CT_F32), *v = shell(2, S(1, 64), CT_F32);
    ct_tensor *qn = shell(3, S(1, 4, 64), CT_F32), *kn = shell(3, S(1, 1, 64), CT_F32);
    ct_tensor *qr = shell(3, S(1, 4, 64), CT_F32), *kr = shell(3, S(1, 1, 64), CT_F32);
    ct_tensor *kc = shell(2, S(4096, 64), CT_F16), *vc = shell(2, S(4096, 64), CT_F16);
    ct_tensor *slot = shell(1, S(1), CT_I32), *pos = shell(1, S(1), CT_I32), *att = shell(4, S(1, 4, 1, 64), CT_F32);
    ct_tensor *ao = shell(2, S(1, 256), CT_F32), *aon = shell(2, S(1, 256), CT_F32), *x1 = shell(2, S(1, 256), CT_F32),
              *h2 = shell(2, S(1, 256), CT_F32), *g = shell(2, S(1, 512), CT_F32), *u = shell(2, S(1, 512), CT_F32),
              *gu = shell(2, S(1, 512), CT_F32), *f = shell(2, S(1, 256), CT_F32), *fn = shell(2, S(1, 256), CT_F32),
              *y = shell(2, S(1, 256), CT_F32);
    ct_tensor *q3 = view(q, 3, S(1, 4, 64), S(256, 64, 1), 0), *k3 = view(k, 3, S(1, 1, 64), S(64, 64, 1), 0);
    ct_tensor *kr2 = view(kr, 2, S(1, 64), S(64, 1), 0), *vr2 = view(v, 2, S(1, 64), S(64, 1), 0);
    ct_tensor *att2 = view(att, 2, S(1, 256), S(256, 1), 0);
    ct_rope_params rp = {.n_dims = 64, .freq_base = 10000, .freq_scale = 1, .mode = CT_ROPE_NEOX};
    o[G_NORM1] = norm_op(x, wn, h);
    o[G_LQ] = op2(CT_OP_LINEAR, h, wq, q);
    o[G_LK] = op2(CT_OP_LINEAR, h, wk, k);
    o[G_LV] = op2(CT_OP_LINEAR, h, wv, v);
    o[G_QN] = norm_op(q3, wqn, qn);
    o[G_KN] = norm_op(k3, wkn, kn);
    o[G_ROPEQ] = op2(CT_OP_ROPE, qn, pos, qr);
    o[G_ROPEQ].p.rope = rp;
    o[G_ROPEK] = op2(CT_OP_ROPE, kn, pos, kr);
    o[G_ROPEK].p.rope = rp;
    o[G_ROWSK] = op2(CT_OP_SET_ROWS, kr2, slot, kc);
    o[G_ROWSV] = op2(CT_OP_SET_ROWS, vr2, slot, vc);
    o[G_SDPA] = (ct_op){.kind = CT_OP_SDPA, .n_src = 3, .src = {qr, kc, vc}, .dst = att};
    o[G_LO] = op2(CT_OP_LINEAR, att2, wo, ao);
    o[G_PN] = norm_op(ao, wn, aon);
    o[G_ADD1] = op2(CT_OP_ADD, x, aon, x1);
    o[G_NORM2] = norm_op(x1, wn, h2);
    o[G_LG] = op2(CT_OP_LINEAR, h2, wg, g);
    o[G_LU] = op2(CT_OP_LINEAR, h2, wu, u);
    o[G_GLU] = op2(CT_OP_GEGLU, g, u, gu);
    o[G_LD] = op2(CT_OP_LINEAR, gu, wd, f);
    o[G_FN] = norm_op(f, wn, fn);
    o[G_ADD2] = op2(CT_OP_ADD, fn, x1, y); /* the norm's output first: either order matches */
}

static void test_gemma_layer(void)
{
    ct_op o[G_N_OPS];
    memset(o, 0, sizeof o);
    build_gemma(o);
    int ng = plan(o, G_N_OPS, &g_caps, g_out);
    EXPECT(g_out, ng, MV(4), RO(6), NO, NO, NA(2), MV(4), NO, NA(2));
    const fuse_group *r = &g_out[1], *p1 = &g_out[4], *p2 = &g_out[7];
    CHECK(r->n_norm == 2 && r->n_rope == 2 && r->rope_norm[0] == G_QN && r->rope_norm[1] == G_KN && r->n_rows == 2);
    CHECK(r->rows_rope[0] == 1 && r->rows_rope[1] == -1);
    CHECK(p1->norm == G_PN && p1->add == G_ADD1 && p1->add_res == 0);
    CHECK(p2->norm == G_FN && p2->add == G_ADD2 && p2->add_res == 1);
    char buf[128];
    CHECK(strstr(fuse_describe(o, r, buf, sizeof buf), "rms_norm+rope x2") != NULL);
    CHECK(strstr(fuse_describe(o, p1, buf, sizeof buf), "rms_norm+add") != NULL);
    /* the backend turning the post-norm groups down: those ops alone, the rest as before */
    g_refuse_norm_add = 1;
    ng = plan(o, G_N_OPS, &g_caps, g_out);
    g_refuse_norm_add = 0;
    EXPECT(g_out, ng, MV(4), RO(6), NO, NO, NO, NO, MV(4), NO, NO, NO);
    pool_free();
}

/* Near misses of the two Gemma patterns. */
static void test_gemma_misses(void)
{
    ct_op o[G_N_OPS];
    /* a q norm whose output no rope reads: it runs alone (before the group that would
     * otherwise hold it), the k norm still joins the ropes */
    memset(o, 0, sizeof o);
    build_gemma(o);
    o[G_ROPEQ].src[0] = o[G_QN].src[0];
    int ng = plan(o + G_QN, 6, &g_caps, g_out);
    EXPECT(g_out, ng, NO, RO(5));
    CHECK(g_out[1].n_norm == 1 && g_out[1].rope_norm[0] == -1 && g_out[1].rope_norm[1] == G_KN - G_QN);
    pool_free();
    /* a norm over two dims (not per head), or a head norm with a weight of the wrong length */
    memset(o, 0, sizeof o);
    build_gemma(o);
    o[G_QN].p.norm.norm_ndim = 2;
    ng = plan(o + G_QN, 6, &g_caps, g_out);
    EXPECT(g_out, ng, NO, RO(5));
    o[G_QN].p.norm.norm_ndim = 1;
    o[G_KN].src[1] = shell(1, S(32), CT_F32);
    ng = plan(o + G_QN, 6, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO, RO(4));
    pool_free();
    /* an add that broadcasts the norm's output, or whose output is the norm's input */
    memset(o, 0, sizeof o);
    build_gemma(o);
    o[G_ADD1].src[0] = shell(2, S(4, 256), CT_F32);
    o[G_ADD1].dst = shell(2, S(4, 256), CT_F32);
    ng = plan(o + G_PN, 2, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO);
    o[G_ADD1].src[0] = o[G_PN].src[0];
    o[G_ADD1].dst = (ct_tensor *)o[G_PN].src[0];
    ng = plan(o + G_PN, 2, &g_caps, g_out);
    EXPECT(g_out, ng, NO, NO);
    /* a norm + add with nothing but those two: still a group (2 ops) */
    memset(o, 0, sizeof o);
    build_gemma(o);
    ng = plan(o + G_FN, 2, &g_caps, g_out);
    EXPECT(g_out, ng, NA(2));
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
    RUN(test_arena_alias);
    RUN(test_epilogue_misses);
    RUN(test_rope_misses);
    RUN(test_backend_refuses);
    RUN(test_mid_pattern);
    RUN(test_gemma_layer);
    RUN(test_gemma_misses);
    return th_finish();
}
