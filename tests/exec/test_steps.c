/* Recorded steps (src/exec/step.c): replay equals eager bit for bit for every op the
 * LLM uses, over many steps whose positions change through parameter tensors; the
 * arena's plan (no two buffers alive at once share bytes, its size between the peak of
 * live buffers and the sum of all of them); outputs keep their values; stale steps are
 * refused; a failed recording reports its op; replay on simulated devices (synchronous
 * and asynchronous) moves what eager moves and allocates nothing on the device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "exec_util.h"
#include "quant/quant.h"

static bool same_bytes(const ct_tensor *a, const ct_tensor *b)
{
    size_t n = ct_tensor_nbytes(a);
    if (n != ct_tensor_nbytes(b)) return false;
    char *x = malloc(n ? n : 1), *y = malloc(n ? n : 1);
    bool ok = x && y && ct_tensor_to_host(a, x, n) == CT_OK && ct_tensor_to_host(b, y, n) == CT_OK && !memcmp(x, y, n);
    free(x);
    free(y);
    return ok;
}

static void write_i32(ct_tensor *t, const int32_t *v)
{
    void *p;
    CHECK_OK(ct_tensor_data_mut(t, &p));
    memcpy(p, v, ct_tensor_nbytes(t));
}

static void write_f32(ct_tensor *t, th_rng *r)
{
    float *p;
    CHECK_OK(ct_tensor_data_mut(t, (void **)&p));
    for (int64_t i = 0; i < ct_tensor_numel(t); i++) p[i] = (float)th_uniform(r, -1, 1);
}

/* ---- a chain of element-wise ops ---- */

#define CHAIN 10
static ct_status chain(const ct_tensor *x, ct_tensor **out)
{
    ct_tensor *y = NULL;
    ct_status s = ct_mul_scalar(x, 0.5, &y);
    for (int i = 1; s == CT_OK && i < CHAIN; i++) {
        ct_tensor *z = NULL;
        s = i % 3 == 0 ? ct_tanh(y, &z) : i % 3 == 1 ? ct_add(y, x, &z) : ct_mul(y, y, &z);
        ct_tensor_free(y); /* as model code does: the step keeps what it needs */
        y = z;
    }
    *out = y;
    return s;
}

static void test_chain_arena(void)
{
    th_rng r = {1};
    int64_t n = 4096;
    ct_tensor *x = th_random(&r, 1, &n, CT_F32, -1, 1), *y = NULL, *want = NULL;
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK(ct_step_recording());
    CHECK_OK(chain(x, &y));
    CHECK_OK(ct_step_end(&st));
    CHECK(!ct_step_recording());
    if (!st) goto out;
    /* the recording pass ran: its output kept its values through the move into the arena */
    CHECK_OK(chain(x, &want));
    CHECK_MSG(same_bytes(y, want), "the recorded output lost its values");
    ct_tensor_free(want);
    want = NULL;

    ct_step_info in;
    CHECK_OK(ct_step_get_info(st, &in));
    size_t one = (size_t)n * sizeof(float);
    CHECK(in.n_ops == CHAIN && in.n_buffers == CHAIN);
    CHECK(in.buffer_bytes == CHAIN * one);
    CHECK_MSG(step_plan_conflicts(st) == 0, "%d pairs of live buffers share bytes", step_plan_conflicts(st));
    CHECK_MSG(in.arena_bytes >= in.live_peak_bytes && in.arena_bytes <= in.buffer_bytes, "arena %zu, live %zu, sum %zu",
              in.arena_bytes, in.live_peak_bytes, in.buffer_bytes);
    /* a chain needs its input and its output alive at once, nothing more */
    CHECK_MSG(in.live_peak_bytes == 2 * one && in.arena_bytes == 2 * one, "arena %zu, live peak %zu (one buffer %zu)",
              in.arena_bytes, in.live_peak_bytes, one);

    for (int k = 0; k < 5; k++) {
        write_f32(x, &r);
        CHECK_OK(ct_step_run(st));
        CHECK(in.n_ops == CHAIN);
        ct_step_info now;
        CHECK_OK(ct_step_get_info(st, &now));
        CHECK(now.fast);
        CHECK_OK(chain(x, &want));
        CHECK_MSG(same_bytes(y, want), "replay %d differs from eager", k);
        ct_tensor_free(want);
        want = NULL;
    }
    /* the output outlives the step with its last values */
    CHECK_OK(chain(x, &want));
    ct_step_free(st);
    CHECK_MSG(same_bytes(y, want), "the output changed when the step was freed");
out:
    ct_tensor_free(want);
    ct_tensor_free(y);
    ct_tensor_free(x);
}

/* ---- a linear and the add after it: one fused launch on a GPU ---- */

/* x = tanh(in) dies at the linear, z = linear(x) + r is born at the add after it: their
 * lifetimes do not meet, but a backend runs linear + add as one kernel that reads x while
 * it writes z (core/fuse.c's group), so the plan must not give them the same bytes. Found
 * on an H200: F16 decode's fused o-projection + residual overwrote its input. */
static void test_fused_group_arena(void)
{
    th_rng r = {7};
    int64_t K = 1024, N = 512, xs[2] = {1, K}, ws[2] = {N, K}, rs[2] = {1, N};
    ct_tensor *in = th_random(&r, 2, xs, CT_F32, -1, 1), *w = th_random(&r, 2, ws, CT_F32, -1, 1);
    ct_tensor *res = th_random(&r, 2, rs, CT_F32, -1, 1), *x = NULL, *y = NULL, *z = NULL, *want = NULL;
    ct_step *st = NULL;
    /* on the CPU: one copy per buffer, and the replay bit for bit the eager ops (a GPU would
     * fuse linear + add into a kernel that sums in another order) */
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_tanh(in, &x));
    CHECK_OK(ct_linear(x, w, NULL, &y));
    ct_tensor_free(x);
    CHECK_OK(ct_add(y, res, &z));
    ct_tensor_free(y);
    CHECK_OK(ct_step_end(&st));
    if (st) {
        ct_step_info info;
        CHECK_OK(ct_step_get_info(st, &info));
        CHECK_MSG(step_plan_conflicts(st) == 0, "%d pairs of live buffers share bytes", step_plan_conflicts(st));
        /* x, y and z each their own bytes (z could have reused x's, were the ops apart) */
        size_t sum = (size_t)(K + N + N) * sizeof(float);
        CHECK_MSG(info.arena_bytes == sum, "arena %zu bytes, want %zu", info.arena_bytes, sum);
        CHECK_OK(ct_step_run(st));
        ct_tensor *t = NULL, *l = NULL;
        CHECK_OK(ct_tanh(in, &t));
        CHECK_OK(ct_linear(t, w, NULL, &l));
        CHECK_OK(ct_add(l, res, &want));
        CHECK_MSG(same_bytes(z, want), "the replayed step differs from eager");
        ct_tensor_free(t), ct_tensor_free(l);
    }
    ct_exec_force_device(NULL);
    ct_step_free(st);
    ct_tensor_free(in), ct_tensor_free(w), ct_tensor_free(res), ct_tensor_free(z), ct_tensor_free(want);
}

/* ---- every op the LLM's decode uses, at changing positions ---- */

enum { D = 64, HQ = 4, HKV = 2, HD = 16, NCTX = 48, V = 40, FF = 96 };

typedef struct weights {
    ct_tensor *embd, *norm, *wq, *wk, *wv, *wo, *wg, *wu, *wd, *out;
} weights;

typedef struct params {
    ct_tensor *ids, *pos, *slot, *len;
} params;

static ct_tensor *quant_weight(th_rng *r, ct_dtype dt, int64_t rows, int64_t cols)
{
    size_t rb = ct_dtype_row_bytes(dt, cols);
    char *buf = malloc(rb * (size_t)rows);
    float *row = malloc(sizeof(float) * (size_t)cols);
    ct_tensor *t = NULL;
    for (int64_t i = 0; buf && row && i < rows; i++) {
        for (int64_t j = 0; j < cols; j++) row[j] = (float)th_uniform(r, -0.5, 0.5);
        CHECK_OK(quant_quantize_row(dt, row, buf + rb * (size_t)i, cols));
    }
    if (buf && row) CHECK_OK(ct_tensor_from_data(2, (int64_t[]){rows, cols}, dt, buf, &t));
    free(buf);
    free(row);
    return t;
}

static void weights_make(weights *w, th_rng *r)
{
    w->embd = quant_weight(r, CT_Q8_0, V, D);
    w->norm = th_random(r, 1, (int64_t[]){D}, CT_F32, 0.5, 1.5);
    w->wq = quant_weight(r, CT_Q4_K, HQ * HD, 256); /* K = 256 for the K-quant block */
    w->wk = th_random(r, 2, (int64_t[]){HKV * HD, D}, CT_F32, -0.3, 0.3);
    w->wv = th_random(r, 2, (int64_t[]){HKV * HD, D}, CT_F16, -0.3, 0.3);
    w->wo = quant_weight(r, CT_Q8_0, D, HQ * HD);
    w->wg = th_random(r, 2, (int64_t[]){FF, D}, CT_F32, -0.3, 0.3);
    w->wu = th_random(r, 2, (int64_t[]){FF, D}, CT_F32, -0.3, 0.3);
    w->wd = quant_weight(r, CT_Q8_0, D, FF);
    w->out = th_random(r, 2, (int64_t[]){V, D}, CT_F32, -0.3, 0.3);
}

static void weights_free(weights *w)
{
    ct_tensor **p = (ct_tensor **)w;
    for (size_t i = 0; i < sizeof *w / sizeof *p; i++) ct_tensor_free(p[i]);
}

#define T(expr)                    \
    do {                           \
        if ((s = (expr)) != CT_OK) \
            goto out;              \
    } while (0)

/* One decode token through one attention + FFN block and a soft-capped head: the op mix of
 * llm/forward.c. kc/vc: f16 caches [HKV, NCTX, HD]. */
static ct_status block(const weights *w, const params *p, ct_tensor *kc, ct_tensor *vc, bool geglu, ct_tensor **out)
{
    enum { N = 40 };
    ct_tensor *t[N] = {0};
    int n = 0;
    ct_status s = CT_OK;
#define NEW (&t[n++])
    ct_tensor *x, *xs, *h, *hp, *q, *k, *v, *q3, *k3, *v3, *qr, *kr, *q4, *k4, *v4, *qt, *att, *a3, *at, *ac,
              *a2, *ao, *x1, *h2, *g, *u, *gu, *f, *y, *yn, *lg, *l1, *l2, *k2, *v2, *kcv, *vcv;
    T(ct_embedding(w->embd, p->ids, NEW)); x = t[n - 1];
    T(ct_mul_scalar(x, 8.0, NEW)); xs = t[n - 1];
    T(ct_rms_norm(xs, w->norm, 1e-6, NEW)); h = t[n - 1];
    /* wq takes 256 inputs: the normed row padded by concatenating it with itself */
    const ct_tensor *four[4] = {h, h, h, h};
    T(ct_concat(four, 4, 1, NEW)); hp = t[n - 1];
    T(ct_linear(hp, w->wq, NULL, NEW)); q = t[n - 1];
    T(ct_linear(h, w->wk, NULL, NEW)); k = t[n - 1];
    T(ct_linear(h, w->wv, NULL, NEW)); v = t[n - 1];
    T(ct_view(q, 3, (int64_t[]){1, HQ, HD}, NEW)); q3 = t[n - 1];
    T(ct_view(k, 3, (int64_t[]){1, HKV, HD}, NEW)); k3 = t[n - 1];
    T(ct_view(v, 3, (int64_t[]){1, HKV, HD}, NEW)); v3 = t[n - 1];
    ct_rope_params rp = {.n_dims = HD, .freq_base = 10000, .freq_scale = 1, .mode = CT_ROPE_NORMAL};
    ct_rope_params rn = {.n_dims = HD / 2, .freq_base = 500, .freq_scale = 0.5, .mode = CT_ROPE_NEOX};
    T(ct_rope(q3, p->pos, &rp, NEW)); qr = t[n - 1];
    T(ct_rope(k3, p->pos, &rn, NEW)); kr = t[n - 1];
    T(ct_view(kc, 2, (int64_t[]){HKV * NCTX, HD}, NEW)); kcv = t[n - 1];
    T(ct_view(vc, 2, (int64_t[]){HKV * NCTX, HD}, NEW)); vcv = t[n - 1];
    T(ct_view(kr, 2, (int64_t[]){HKV, HD}, NEW)); k2 = t[n - 1];
    T(ct_view(v3, 2, (int64_t[]){HKV, HD}, NEW)); v2 = t[n - 1];
    T(ct_set_rows(kcv, k2, p->slot));
    T(ct_set_rows(vcv, v2, p->slot));
    T(ct_unsqueeze(kc, 0, NEW)); k4 = t[n - 1];
    T(ct_unsqueeze(vc, 0, NEW)); v4 = t[n - 1];
    T(ct_permute(qr, (int[]){1, 0, 2}, NEW)); qt = t[n - 1];
    T(ct_unsqueeze(qt, 0, NEW)); q4 = t[n - 1];
    ct_sdpa_params sp = {.causal = true, .scale = 0, .window = geglu ? 5 : 0, .length = p->len};
    T(ct_sdpa(q4, k4, v4, NULL, &sp, NEW)); att = t[n - 1];
    T(ct_select(att, 0, 0, NEW)); a3 = t[n - 1];
    T(ct_permute(a3, (int[]){1, 0, 2}, NEW)); at = t[n - 1];
    T(ct_contiguous(at, NEW)); ac = t[n - 1];
    T(ct_view(ac, 2, (int64_t[]){1, HQ * HD}, NEW)); a2 = t[n - 1];
    T(ct_linear(a2, w->wo, NULL, NEW)); ao = t[n - 1];
    T(ct_add(xs, ao, NEW)); x1 = t[n - 1];
    T(ct_rms_norm(x1, w->norm, 1e-5, NEW)); h2 = t[n - 1];
    T(ct_linear(h2, w->wg, NULL, NEW)); g = t[n - 1];
    T(ct_linear(h2, w->wu, NULL, NEW)); u = t[n - 1];
    T(geglu ? ct_geglu(g, u, NEW) : ct_swiglu(g, u, NEW)); gu = t[n - 1];
    T(ct_linear(gu, w->wd, NULL, NEW)); f = t[n - 1];
    T(ct_add(x1, f, NEW)); y = t[n - 1];
    T(ct_rms_norm(y, w->norm, 1e-6, NEW)); yn = t[n - 1];
    T(ct_linear(yn, w->out, NULL, NEW)); lg = t[n - 1];
    T(ct_div_scalar(lg, 30.0, NEW)); l1 = t[n - 1];
    T(ct_tanh(l1, NEW)); l2 = t[n - 1];
    s = ct_mul_scalar(l2, 30.0, out);
out:
    for (int i = 0; i < n; i++) ct_tensor_free(t[i]);
    return s;
#undef NEW
}

static void set_params(const params *p, int pos)
{
    int32_t id = (pos * 7 + 3) % V, len = pos + 1, slot[HKV];
    for (int h = 0; h < HKV; h++) slot[h] = h * NCTX + pos;
    write_i32(p->ids, &id);
    write_i32(p->pos, &pos);
    write_i32(p->slot, slot);
    write_i32(p->len, &len);
}

static void llm_ops_case(bool geglu)
{
    CHECK_OK(ct_exec_set_devices("cpu")); /* the arena of one device, planned exactly */
    th_rng r = {7};
    weights w;
    weights_make(&w, &r);
    params p;
    CHECK_OK(ct_zeros(1, (int64_t[]){1}, CT_I32, &p.ids));
    CHECK_OK(ct_zeros(1, (int64_t[]){1}, CT_I32, &p.pos));
    CHECK_OK(ct_zeros(1, (int64_t[]){HKV}, CT_I32, &p.slot));
    CHECK_OK(ct_zeros(1, (int64_t[]){1}, CT_I32, &p.len));
    int64_t cs[3] = {HKV, NCTX, HD};
    ct_tensor *ka, *va, *kb, *vb, *out = NULL, *want = NULL;
    CHECK_OK(ct_zeros(3, cs, CT_F16, &ka));
    CHECK_OK(ct_zeros(3, cs, CT_F16, &va));
    CHECK_OK(ct_zeros(3, cs, CT_F16, &kb));
    CHECK_OK(ct_zeros(3, cs, CT_F16, &vb));

    set_params(&p, 0);
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(block(&w, &p, ka, va, geglu, &out));
    CHECK_OK(ct_step_end(&st));
    CHECK_OK(block(&w, &p, kb, vb, geglu, &want));
    CHECK_MSG(out && want && same_bytes(out, want), "recording pass differs from eager");
    ct_tensor_free(want);
    want = NULL;
    ct_step_info in = {0};
    if (st) CHECK_OK(ct_step_get_info(st, &in));
    CHECK(step_plan_conflicts(st) == 0);
    /* the plan reaches the lower bound here (largest-first packing need not in general) */
    CHECK_MSG(in.arena_bytes == in.live_peak_bytes && in.arena_bytes < in.buffer_bytes, "arena %zu live %zu sum %zu",
              in.arena_bytes, in.live_peak_bytes, in.buffer_bytes);
    fprintf(stderr, "  %d ops, %d buffers: arena %zu B, live peak %zu B, all buffers %zu B\n", in.n_ops, in.n_buffers,
            in.arena_bytes, in.live_peak_bytes, in.buffer_bytes);

    for (int pos = 1; st && pos < 40; pos++) {
        set_params(&p, pos);
        CHECK_OK(ct_step_run(st));
        CHECK_OK(block(&w, &p, kb, vb, geglu, &want));
        CHECK_MSG(same_bytes(out, want), "position %d: replayed output differs from eager", pos);
        CHECK_MSG(same_bytes(ka, kb) && same_bytes(va, vb), "position %d: replayed KV rows differ", pos);
        ct_tensor_free(want);
        want = NULL;
    }
    ct_step_free(st);
    ct_tensor_free(out);
    ct_tensor_free(ka);
    ct_tensor_free(va);
    ct_tensor_free(kb);
    ct_tensor_free(vb);
    ct_tensor_free(p.ids);
    ct_tensor_free(p.pos);
    ct_tensor_free(p.slot);
    ct_tensor_free(p.len);
    weights_free(&w);
    CHECK_OK(ct_exec_set_devices(NULL));
}

static void test_llm_ops_swiglu(void) { llm_ops_case(false); }
static void test_llm_ops_geglu_window(void) { llm_ops_case(true); }

/* ---- staleness and errors ---- */

static void test_stale_and_errors(void)
{
    CHECK_OK(ct_exec_set_devices("cpu")); /* a failing cpu op must have nowhere else to go */
    ct_step *st = NULL;
    CHECK_STATUS(ct_step_end(&st), CT_ERR_INVALID_ARG); /* not recording */
    CHECK_STATUS(ct_step_run(NULL), CT_ERR_INVALID_ARG);
    CHECK_OK(ct_step_begin());
    CHECK_STATUS(ct_step_begin(), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_step_end(&st), CT_ERR_INVALID_ARG); /* nothing recorded */
    CHECK(st == NULL && !ct_step_recording());

    /* an op that fails while recording is reported by ct_step_end */
    int64_t n = 8;
    th_rng r = {3};
    ct_tensor *x = th_random(&r, 1, &n, CT_F32, -1, 1), *y = NULL, *z = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_exec_set_fault("cpu:exp:fault"));
    CHECK_OK(ct_neg(x, &y));
    ct_status failed = ct_exp(y, &z);
    CHECK(failed != CT_OK);
    CHECK_OK(ct_exec_set_fault(NULL));
    CHECK_STATUS(ct_step_end(&st), failed);
    CHECK(st == NULL && strstr(ct_last_error(), "exp") != NULL);
    ct_tensor_free(y);
    y = NULL;

    char why[160];
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_neg(x, &y));
    CHECK_OK(ct_step_end(&st));
    CHECK(st && !ct_step_stale(st, why, sizeof why));
    CHECK_OK(ct_step_run(st));
    CHECK_OK(ct_exec_set_devices("cpu")); /* the chain is made again */
    CHECK(ct_step_stale(st, why, sizeof why) && strstr(why, "chain"));
    CHECK_STATUS(ct_step_run(st), CT_ERR_INVALID_ARG);
    CHECK(strstr(ct_last_error(), "stale") != NULL);
    ct_step_free(st);
    ct_tensor_free(y);
    y = NULL;

    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_neg(x, &y));
    CHECK_OK(ct_step_end(&st));
    CHECK_OK(ct_tensor_place(x, "cpu"));
    CHECK(ct_step_stale(st, why, sizeof why) && strstr(why, "placed"));
    ct_step_free(st);
    CHECK_OK(ct_tensor_place(x, NULL));
    CHECK_OK(ct_exec_set_devices(NULL));
    ct_tensor_free(y);
    ct_tensor_free(x);
}

/* ---- simulated devices: op-by-op replay with events, no allocation ---- */

static void device_case(bool async)
{
    CHECK_OK(async ? test_backend_install_async(1, "add,mul,mul_scalar") : test_backend_install(1, "add,mul,mul_scalar"));
    CHECK_OK(ct_exec_set_devices("test:0,cpu"));
    ct_exec_set_small_bytes(0);
    th_rng r = {11};
    int64_t n = 2048;
    ct_tensor *x = th_random(&r, 1, &n, CT_F32, -1, 1), *y = NULL, *want = NULL;
    CHECK_OK(ct_tensor_place(x, "test:0")); /* ops follow it there; tanh runs on the CPU */
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(chain(x, &y));
    CHECK_OK(ct_step_end(&st));
    ct_step_info in = {0};
    if (st) CHECK_OK(ct_step_get_info(st, &in));
    CHECK(step_plan_conflicts(st) == 0);
    CHECK_OK(ct_device_sync(NULL)); /* an asynchronous device releases on its worker */
    int live = test_backend_live_buffers(0);
    for (int k = 0; st && k < 4; k++) {
        write_f32(x, &r);
        int a0 = test_backend_runs(0, CT_OP_ADD) + test_backend_runs(0, CT_OP_MUL);
        CHECK_OK(ct_step_run(st));
        int a1 = test_backend_runs(0, CT_OP_ADD) + test_backend_runs(0, CT_OP_MUL);
        CHECK_OK(ct_step_get_info(st, &in));
        CHECK(!in.fast && !in.captured);
        CHECK_OK(chain(x, &want));
        int a2 = test_backend_runs(0, CT_OP_ADD) + test_backend_runs(0, CT_OP_MUL);
        /* replay runs on the devices eager picks */
        CHECK_MSG(a1 - a0 == a2 - a1 && a1 > a0, "ops on test:0: %d replayed, %d eager", a1 - a0, a2 - a1);
        CHECK_MSG(same_bytes(y, want), "%s device: replay %d differs from eager", async ? "async" : "sync", k);
        ct_tensor_free(want);
        want = NULL;
    }
    CHECK_OK(ct_device_sync(NULL));
    /* replays used buffers the step already held (eager runs release theirs) */
    CHECK_MSG(test_backend_live_buffers(0) == live, "device buffers %d after replays, %d before",
              test_backend_live_buffers(0), live);
    ct_step_free(st);
    ct_tensor_free(y);
    CHECK_OK(ct_tensor_place(x, NULL));
    ct_tensor_free(x);
    CHECK_OK(ct_device_sync(NULL));
    CHECK_MSG(test_backend_live_buffers(0) == 0, "%d device buffers left after the step was freed",
              test_backend_live_buffers(0));
    ct_exec_set_small_bytes(64 * 1024);
    CHECK_OK(ct_exec_set_devices(NULL));
    test_backend_uninstall();
}

/* A capturing test:0 heads the chain, with x and b (n random values each) placed there. */
static void capture_setup(bool async, uint64_t seed, int64_t n, ct_tensor **x, ct_tensor **b)
{
    CHECK_OK(async ? test_backend_install_async(1, "add,mul") : test_backend_install(1, "add,mul"));
    test_backend_set_capture(true);
    CHECK_OK(ct_exec_set_devices("test:0,cpu"));
    ct_exec_set_small_bytes(0);
    th_rng r = {seed};
    *x = th_random(&r, 1, &n, CT_F32, -1, 1);
    *b = th_random(&r, 1, &n, CT_F32, -1, 1);
    CHECK_OK(ct_tensor_place(*x, "test:0"));
    CHECK_OK(ct_tensor_place(*b, "test:0"));
}

/* x and b unplaced and freed, the default chain and settings back. */
static void capture_teardown(ct_tensor *x, ct_tensor *b)
{
    CHECK_OK(ct_tensor_place(x, NULL));
    CHECK_OK(ct_tensor_place(b, NULL));
    ct_tensor_free(x);
    ct_tensor_free(b);
    CHECK_OK(ct_device_sync(NULL));
    ct_exec_set_small_bytes(64 * 1024);
    CHECK_OK(ct_exec_set_devices(NULL));
    test_backend_uninstall();
}

/* Every op on test:0, whose backend captures: one launch per replay. A replay skips the
 * checks of operands it found valid before while their storage is unchanged, so b's bytes
 * must still go up when the host wrote b (replay 1), when its device copy was dropped (2)
 * or evicted (3), and only then; x is written before every replay. */
static void capture_case(bool async)
{
    int64_t n = 1024;
    ct_tensor *x = NULL, *b = NULL;
    capture_setup(async, 13, n, &x, &b);
    th_rng r = {14}; /* the values written before the replays */
    ct_tensor *t[8] = {0};
    int k = 0;
    /* x*b + x, squared, + b: every op on test:0 */
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_mul(x, b, &t[k++]));
    CHECK_OK(ct_add(t[0], x, &t[k++]));
    CHECK_OK(ct_mul(t[1], t[1], &t[k++]));
    CHECK_OK(ct_add(t[2], b, &t[k++]));
    CHECK_OK(ct_step_end(&st));
    ct_step_info in = {0};
    if (st) CHECK_OK(ct_step_get_info(st, &in));
    CHECK_MSG(in.captured, "a step whose ops all ran on test:0 was not captured");
    ct_device *dev = exec_find_device("test:0");
    uint64_t nb = (uint64_t)n * sizeof(float);
    for (int rep = 0; st && rep < 5; rep++) {
        write_f32(x, &r);
        if (rep == 1) write_f32(b, &r);
        if (rep == 2) storage_drop_copy(b->st, dev);
        if (rep == 3) storage_evict(dev, (size_t)-1);
        int l0 = test_backend_launches(0);
        uint64_t up = test_backend_uploaded(0);
        CHECK_OK(ct_step_run(st));
        CHECK(test_backend_launches(0) == l0 + 1);
        uint64_t moved = test_backend_uploaded(0) - up, want = rep >= 1 && rep <= 3 ? 2 * nb : nb;
        CHECK_MSG(moved == want, "%s: replay %d uploaded %llu bytes, not %llu", async ? "async" : "sync", rep,
                  (unsigned long long)moved, (unsigned long long)want);
        ct_tensor *e0 = NULL, *e1 = NULL, *e2 = NULL, *e3 = NULL;
        CHECK_OK(ct_mul(x, b, &e0));
        CHECK_OK(ct_add(e0, x, &e1));
        CHECK_OK(ct_mul(e1, e1, &e2));
        CHECK_OK(ct_add(e2, b, &e3));
        CHECK_MSG(same_bytes(t[3], e3), "%s: captured replay %d differs from eager", async ? "async" : "sync", rep);
        ct_tensor_free(e0);
        ct_tensor_free(e1);
        ct_tensor_free(e2);
        ct_tensor_free(e3);
    }
    ct_step_free(st);
    for (int i = 0; i < k; i++) ct_tensor_free(t[i]);
    capture_teardown(x, b);
}

/* Fused ops that test:0 lacks (rms_norm, swiglu) run there as their parts: the parts are
 * what the step records and replays (the fused op never ran), so a replay with new input
 * values gives the double reference; with capture on, the parts are one launch. A
 * decomposition that fails while recording (test:0 out of memory at its fourth part) leaves
 * nothing of itself in the step: the op is recorded where it ran instead (the CPU). */
#define DR 4
#define DC 64
static void rms_swiglu_ref(const float *x, const float *w, const float *u, double *out)
{
    for (int r = 0; r < DR; r++) {
        double ss = 0;
        for (int c = 0; c < DC; c++) ss += (double)x[r * DC + c] * x[r * DC + c];
        double inv = 1.0 / sqrt(ss / DC + 1e-5);
        for (int c = 0; c < DC; c++) {
            double g = x[r * DC + c] * inv * w[c];
            out[r * DC + c] = g / (1.0 + exp(-g)) * u[r * DC + c];
        }
    }
}

static void decomposed_case(bool async, bool capture, bool fail_recording)
{
    CHECK_OK(async ? test_backend_install_async(1, "*") : test_backend_install(1, "*"));
    test_backend_set_capture(capture);
    ct_exec_set_small_bytes(0);
    th_rng r = {21};
    int64_t xs[2] = {DR, DC}, ws = DC;
    ct_tensor *x = th_random(&r, 2, xs, CT_F32, -1, 1), *u = th_random(&r, 2, xs, CT_F32, -1, 1),
              *w = th_random(&r, 1, &ws, CT_F32, 0.5, 1.5), *n = NULL, *y = NULL;
    CHECK_OK(ct_tensor_place(x, "test:0"));
    CHECK_OK(ct_tensor_place(u, "test:0"));
    CHECK_OK(ct_tensor_place(w, "test:0"));
    if (fail_recording) CHECK_OK(ct_exec_set_fault("test:0:rsqrt:oom:1")); /* the fourth part fails */
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_rms_norm(x, w, 1e-5, &n));
    CHECK_LAST(fail_recording ? "rms_norm@cpu/fallback" : "rms_norm@test:0/decomposed");
    CHECK_OK(ct_swiglu(n, u, &y));
    CHECK_LAST("swiglu@test:0/decomposed");
    ct_tensor_free(n);
    ct_exec_set_fault(NULL);
    CHECK_OK(ct_step_end(&st));
    ct_step_info in = {0};
    if (st) CHECK_OK(ct_step_get_info(st, &in));
    /* rms_norm: mul, mean, add_scalar, rsqrt, mul, mul; swiglu: silu, mul */
    CHECK_MSG(in.n_ops == (fail_recording ? 1 + 2 : 6 + 2), "%d ops recorded", in.n_ops);
    CHECK_MSG(in.captured == (capture && !fail_recording), "captured %d", in.captured);
    /* after a failed decomposition rms_norm ran on the CPU: swiglu's parts are a captured run of their own */
    CHECK_MSG(in.captured_ops == (!capture ? 0 : fail_recording ? 2 : 8), "%d ops captured", in.captured_ops);
    double want[DR * DC], *got = NULL;
    for (int rep = 0; st && rep < 4; rep++) {
        write_f32(x, &r);
        write_f32(u, &r);
        int l0 = test_backend_launches(0), m0 = test_backend_runs(0, CT_OP_MUL);
        CHECK_OK(ct_step_run(st));
        if (capture) CHECK(test_backend_launches(0) == l0 + 1);
        CHECK_MSG(test_backend_runs(0, CT_OP_MUL) - m0 == (fail_recording ? 1 : 4), "%d muls replayed on test:0",
                  test_backend_runs(0, CT_OP_MUL) - m0);
        const float *xp, *up, *wp;
        CHECK_OK(ct_tensor_data(x, (const void **)&xp));
        CHECK_OK(ct_tensor_data(u, (const void **)&up));
        CHECK_OK(ct_tensor_data(w, (const void **)&wp));
        rms_swiglu_ref(xp, wp, up, want);
        got = th_values(y);
        CHECK_MSG(got && th_allclose(got, want, DR * DC, 1e-5, 1e-4), "%s, capture %d, fail %d: replay %d is wrong",
                  async ? "async" : "sync", capture, fail_recording, rep);
        free(got);
    }
    ct_step_free(st);
    ct_tensor *all[] = {x, u, w, y};
    for (int i = 0; i < 4; i++) {
        CHECK_OK(ct_tensor_place(all[i], NULL));
        ct_tensor_free(all[i]);
    }
    CHECK_OK(ct_device_sync(NULL));
    ct_exec_set_small_bytes(64 * 1024);
    test_backend_uninstall();
}

static void test_decomposed_replay(void)
{
    for (int m = 0; m < 8; m++) decomposed_case(m & 1, m & 2, m & 4);
}

static void test_captured_replay(void) { capture_case(false); }
static void test_captured_replay_async(void) { capture_case(true); }

static void test_device_replay(void) { device_case(false); }
static void test_device_replay_async(void) { device_case(true); }

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_chain_arena);
    RUN(test_fused_group_arena);
    RUN(test_llm_ops_swiglu);
    RUN(test_llm_ops_geglu_window);
    RUN(test_stale_and_errors);
    RUN(test_device_replay);
    RUN(test_device_replay_async);
    RUN(test_captured_replay);
    RUN(test_captured_replay_async);
    RUN(test_decomposed_replay);
    return th_finish();
}
