/* The CUDA step planner (src/backends/cuda/fuse.c) on ../shared/refdata/mini-a (a 4-layer
 * llama, skipped when absent or without a CUDA device): decoding by replaying the captured
 * step, with its groups fused, against eager decoding (CTORCH_REPLAY=0, no planner), for the
 * Q4_K_M and F16 files:
 *   - every layer on the GPU; the last two only (a layer split as --gpu-layers 2: the GPU's
 *     segment starts at a layer's norm); and every layer with swiglu refused by the GPU
 *     (CTORCH_FAULT), so segments end after the up projection and start at the down
 *     projection: mid-pattern.
 *   - the same 16 greedy tokens, and logits at every step within normalized MSE 1e-3 of
 *     eager's. Fusion reorders no arithmetic but x's 8-bit rounding for every linear of a
 *     group (eager keeps f32 x for small weights): ~2e-5 relative per product, the
 *     activations' own quantization the CPU applies too; 1e-3 leaves room for 4 layers of it
 *     and is still 50x below what a wrong row or a missed write gives (a dropped op, a
 *     stale cache row: NMSE ~1).
 *   - the trace shows the groups fused, per layer on the GPU: norm+q/k/v, rope+rows, o+add,
 *     norm+gate/up+swiglu (norm+gate/up where swiglu is the CPU's), down+add.
 * And Gemma 3's extra groups on random tensors (no Gemma model in refdata): per-head q/k
 * norms fused into the rope prologue, post-norm + residual add, that group making the next
 * block's norm (and the q8 form its linears read) in its kernel; and the tensor-core decode
 * attention writing the q8 form its o projection reads (mini-a's head dim, 32, takes the
 * other attention kernel). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tensor.h"
#include "devcheck.h"
#include "harness.h"
#include "llm/generate.h"
#include "quant/quant.h"

#define N_GEN 16
#define NMSE_TOL 1e-3

static char g_dev[32];
static const char *g_dir;

static bool ready(void)
{
    if (!devcheck_chain_device("cuda", g_dev, sizeof g_dev)) return false;
    g_dir = th_refdata();
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/mini-a/mini-a-f16.gguf", g_dir ? g_dir : ".");
    FILE *f = g_dir ? fopen(probe, "rb") : NULL;
    if (!f) {
        th_skip("no refdata model (CTORCH_REFDATA=%s)", g_dir ? g_dir : "unset");
        return false;
    }
    fclose(f);
    return true;
}

typedef struct run_cfg {
    const char *file;
    int gpu_layers;    /* llm_model_place's n_layers */
    const char *fault; /* CTORCH_FAULT, or NULL */
} run_cfg;

static void settings(bool replay, const char *fault)
{
    setenv("CTORCH_REPLAY", replay ? "1" : "0", 1);
    if (fault) setenv("CTORCH_FAULT", fault, 1);
    else unsetenv("CTORCH_FAULT");
    CHECK_OK(ct_exec_reinit());
    ct_exec_set_small_bytes(0); /* placement alone decides where an op runs */
}

/* Greedy tokens and every step's logits [N_GEN][V] of one configuration; with `trace`,
 * the line trace (fused groups included) goes to that file. */
static void greedy(const run_cfg *c, bool replay, int32_t *out, float *lg, FILE *trace)
{
    settings(replay, c->fault);
    char path[1024];
    snprintf(path, sizeof path, "%s/mini-a/%s", g_dir, c->file);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) return;
    llm_placement pl;
    CHECK_OK(llm_model_place(m, g_dev, c->gpu_layers, NULL, NULL, &pl));
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 256, CT_F16, NULL));
    int32_t ids[64];
    int n = 0;
    static const char prompt[] = "Once upon a time";
    CHECK_OK(llm_tokenize(m->tok, prompt, strlen(prompt), true, false, ids, 64, &n));
    CHECK_OK(llm_session_eval(&s, ids, n));
    int saved = -1;
    if (trace) {
        fflush(stderr);
        saved = dup(2);
        dup2(fileno(trace), 2);
        CHECK_OK(ct_exec_set_trace("1"));
    }
    const int V = m->hp.n_vocab;
    for (int k = 0; k < N_GEN; k++) {
        memcpy(lg + (size_t)k * V, s.logits, sizeof(float) * (size_t)V);
        out[k] = th_argmax_f32(s.logits, V);
        if (k + 1 < N_GEN && llm_session_eval(&s, &out[k], 1) != CT_OK) {
            CHECK_MSG(0, "decode failed: %s", ct_last_error());
            break;
        }
    }
    if (trace) {
        CHECK_OK(ct_exec_set_trace("0"));
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
    }
    llm_session_free(&s);
    llm_model_free(m);
}

static int count_lines(FILE *f, const char *needle)
{
    char line[4096];
    int n = 0;
    rewind(f);
    while (fgets(line, sizeof line, f))
        if (strstr(line, needle)) n++;
    return n;
}

/* How many trace lines of the fused replay name `what`, against `want`. */
static void expect_groups(FILE *trace, const run_cfg *c, const char *what, int want)
{
    int got = count_lines(trace, what);
    CHECK_MSG(got == want, "%s (gpu layers %d, fault %s): %d lines '%s', expected %d", c->file, c->gpu_layers,
              c->fault ? c->fault : "none", got, what, want);
}

/* layers: how many layers run on the GPU; glu: whether swiglu does; rope_job: whether some
 * q/k/v job takes the attention prologue into its epilogue (quantized q/k/v). */
static void check(const run_cfg *c, int layers, bool glu, bool rope_job)
{
    const int V = 32000;
    float *la = malloc(sizeof(float) * (size_t)V * N_GEN), *lb = malloc(sizeof(float) * (size_t)V * N_GEN);
    FILE *trace = tmpfile();
    CHECK(la && lb && trace);
    if (!la || !lb || !trace) goto out;
    int32_t ga[N_GEN], gb[N_GEN];
    greedy(c, false, ga, la, NULL);
    greedy(c, true, gb, lb, trace);
    CHECK_MSG(memcmp(ga, gb, sizeof ga) == 0, "%s (gpu layers %d, fault %s): greedy tokens differ when fused", c->file,
              c->gpu_layers, c->fault ? c->fault : "none");
    double worst = 0;
    for (int k = 0; k < N_GEN; k++) {
        double num = 0, den = 0;
        for (int i = 0; i < V; i++) {
            double a = la[(size_t)k * V + i], b = lb[(size_t)k * V + i];
            num += (a - b) * (a - b);
            den += a * a;
        }
        double e = den > 0 ? num / den : num;
        if (!(e <= worst)) worst = e;
    }
    CHECK_MSG(worst <= NMSE_TOL, "%s (gpu layers %d): logits NMSE %.3g fused vs eager (bound %g)", c->file,
              c->gpu_layers, worst, NMSE_TOL);
    /* the step is captured once (at its recording): one line per group of each layer; the
     * prologue is its own kernel or the q/k/v job's epilogue (where x's q8 form feeds a
     * one-format kernel: Q4_K / Q6_K weights) */
    int own = count_lines(trace, "fused rope x2+set_rows x2 ("), in_job = count_lines(trace, "with rope x2+set_rows x2 (");
    CHECK_MSG(own + in_job == layers, "%s: %d prologues fused alone and %d in the q/k/v job, expected %d in all",
              c->file, own, in_job, layers);
    CHECK_MSG(!rope_job || in_job > 0, "%s: no prologue in the q/k/v job's epilogue", c->file);
    if (rope_job) { /* the epilogue rotates as the prologue's kernel does: bit for bit the same decode */
        int32_t gc[N_GEN];
        setenv("CTORCH_CUDA_ROPE_JOB", "0", 1);
        greedy(c, true, gc, la, NULL);
        unsetenv("CTORCH_CUDA_ROPE_JOB");
        CHECK_MSG(memcmp(gb, gc, sizeof gb) == 0 && memcmp(la, lb, sizeof(float) * (size_t)V * N_GEN) == 0,
                  "%s (gpu layers %d): the prologue in the q/k/v job gives other logits than its own kernel", c->file,
                  c->gpu_layers);
    }
    expect_groups(trace, c, "fused rms_norm+linear x3 (", layers);
    expect_groups(trace, c, "fused linear x1+add (", 2 * layers);
    expect_groups(trace, c, "fused rms_norm+linear x2+swiglu (", glu ? layers : 0);
    expect_groups(trace, c, "fused rms_norm+linear x2 (", glu ? 0 : layers);
    expect_groups(trace, c, "declined", 0);
    fprintf(stderr, "  %s gpu layers %d fault %s: tokens %s, logits NMSE %.3g, %d fused groups\n", c->file,
            c->gpu_layers, c->fault ? c->fault : "none", memcmp(ga, gb, sizeof ga) ? "differ" : "equal", worst,
            count_lines(trace, ": step: fused "));
out:
    if (trace) fclose(trace);
    free(la);
    free(lb);
}

/* ---- the attention prologue alone: rope q, rope k, k rows and v rows into f16 caches ---- */

/* An index tensor of dtype dt (i32 or i64), n zeros; set_idx writes it from the host. */
static ct_tensor *filled(ct_dtype dt, int n)
{
    ct_tensor *t = NULL;
    CHECK_OK(ct_zeros(1, (int64_t[]){n}, dt, &t));
    return t;
}

static void set_idx(ct_tensor *t, const int32_t *v, int n)
{
    void *p = NULL;
    CHECK_OK(ct_tensor_data_mut(t, &p));
    for (int i = 0; p && i < n; i++) {
        if (ct_tensor_dtype(t) == CT_I64) ((int64_t *)p)[i] = v[i];
        else ((int32_t *)p)[i] = v[i];
    }
}

typedef struct prologue {
    ct_tensor *qr, *kr;
} prologue;

/* The four ops of forward.c's decode prologue (neox or not), writing rows into kc/vc. */
static void run_prologue(const ct_tensor *q, const ct_tensor *k, const ct_tensor *v, const ct_tensor *pos,
                         const ct_tensor *slot, ct_tensor *kc, ct_tensor *vc, int neox, prologue *o)
{
    ct_rope_params rp = {.n_dims = 24, .freq_base = 10000, .freq_scale = 0.5, .mode = neox ? CT_ROPE_NEOX : CT_ROPE_NORMAL};
    ct_tensor *kr2 = NULL, *vr2 = NULL;
    CHECK_OK(ct_rope(q, pos, &rp, &o->qr));
    CHECK_OK(ct_rope(k, pos, &rp, &o->kr));
    CHECK_OK(ct_view(o->kr, 2, (int64_t[]){4, 32}, &kr2));
    CHECK_OK(ct_view(v, 2, (int64_t[]){4, 32}, &vr2));
    CHECK_OK(ct_set_rows(kc, kr2, slot));
    CHECK_OK(ct_set_rows(vc, vr2, slot));
    ct_tensor_free(kr2);
    ct_tensor_free(vr2);
}

/* Records what body does as a step, its trace lines (fused groups included) into trace. */
static ct_step *record_traced(void (*body)(void *ctx), void *ctx, FILE *trace)
{
    ct_step *st = NULL;
    int saved = dup(2);
    fflush(stderr);
    if (trace) dup2(fileno(trace), 2);
    CHECK_OK(ct_exec_set_trace("1"));
    CHECK_OK(ct_step_begin());
    body(ctx);
    CHECK_OK(ct_step_end(&st));
    CHECK_OK(ct_exec_set_trace("0"));
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    return st;
}

/* Records body on a0, then again on a1 with the pairing `sw` switched off (sw=0); their
 * traces in tr[0] and tr[1] (NULL where no temporary file could be made). */
static void record_both(void (*body)(void *ctx), void *a0, void *a1, const char *sw, ct_step **st, FILE **tr)
{
    for (int i = 0; i < 2; i++) {
        tr[i] = tmpfile();
        if (i) setenv(sw, "0", 1);
        st[i] = record_traced(body, i ? a1 : a0, tr[i]);
        unsetenv(sw);
    }
}

typedef struct prologue_args {
    const ct_tensor *q, *k, *v, *pos, *slot;
    ct_tensor *kc, *vc;
    int neox;
    bool late; /* pos and slot copied by ops of the step first (no early read before PDL's wait) */
    prologue *out;
} prologue_args;

static void prologue_body(void *ctx)
{
    prologue_args *a = ctx;
    if (!a->late) {
        run_prologue(a->q, a->k, a->v, a->pos, a->slot, a->kc, a->vc, a->neox, a->out);
        return;
    }
    ct_tensor *pos = NULL, *slot = NULL;
    CHECK_OK(ct_clone(a->pos, &pos));
    CHECK_OK(ct_clone(a->slot, &slot));
    if (pos && slot) run_prologue(a->q, a->k, a->v, pos, slot, a->kc, a->vc, a->neox, a->out);
    ct_tensor_free(pos);
    ct_tensor_free(slot);
}

static bool same_bytes(const ct_tensor *a, const ct_tensor *b, const char *what)
{
    size_t n = ct_tensor_nbytes(a);
    char *x = malloc(n), *y = malloc(n);
    bool ok = x && y && ct_tensor_to_host(a, x, n) == CT_OK && ct_tensor_to_host(b, y, n) == CT_OK &&
              memcmp(x, y, n) == 0;
    CHECK_MSG(ok, "%s: replayed (fused) and eager results differ", what);
    free(x);
    free(y);
    return ok;
}

/* The recorded prologue replayed at a new position and slot equals the same ops run
 * eagerly, bit for bit (the fused kernel rounds as the per-op kernels do); a slot out of
 * range writes no row (set_rows' contract) but still the rotated q and k. With `late`, an op
 * of the step writes pos and slot, so the kernel reads them only after its wait. */
static void check_prologue(int neox, ct_dtype idt, bool late)
{
    th_rng r = {7 + (uint64_t)neox};
    ct_tensor *q = th_random(&r, 3, (int64_t[]){1, 8, 32}, CT_F32, -2, 2);
    ct_tensor *k = th_random(&r, 3, (int64_t[]){1, 4, 32}, CT_F32, -2, 2);
    ct_tensor *v = th_random(&r, 3, (int64_t[]){1, 4, 32}, CT_F32, -2, 2);
    ct_tensor *kc[2] = {0}, *vc[2] = {0};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(ct_zeros(2, (int64_t[]){64, 32}, CT_F16, &kc[i]));
        CHECK_OK(ct_zeros(2, (int64_t[]){64, 32}, CT_F16, &vc[i]));
    }
    ct_tensor *pos = filled(idt, 1), *slot = filled(idt, 4);
    set_idx(pos, (int32_t[]){3}, 1);
    set_idx(slot, (int32_t[]){3, 19, 35, 51}, 4);
    CHECK_OK(ct_exec_force_device(g_dev));
    prologue rec = {0}, eag = {0};
    FILE *trace = tmpfile();
    prologue_args a = {q, k, v, pos, slot, kc[0], vc[0], neox, late, &rec};
    ct_step *st = record_traced(prologue_body, &a, trace);
    if (trace) {
        CHECK_MSG(count_lines(trace, "fused rope x2+set_rows x2") == 1, "the prologue was not fused");
        fclose(trace);
    }
    /* the eager caches get the recording's rows too (pos and slot still as recorded) */
    run_prologue(q, k, v, pos, slot, kc[1], vc[1], neox, &eag);
    ct_tensor_free(eag.qr);
    ct_tensor_free(eag.kr);
    for (int round = 0; round < 2 && st; round++) {
        /* round 1: the last slot is out of range, so the rows of that write are not written */
        int32_t p1[1] = {round ? 7777 : 41}, s1[4] = {5, 21, 37, round ? 64 : 53};
        set_idx(pos, p1, 1);
        set_idx(slot, s1, 4);
        CHECK_OK(ct_step_run(st));
        run_prologue(q, k, v, pos, slot, kc[1], vc[1], neox, &eag);
        same_bytes(rec.qr, eag.qr, "rope q");
        same_bytes(rec.kr, eag.kr, "rope k");
        same_bytes(kc[0], kc[1], "k cache");
        same_bytes(vc[0], vc[1], "v cache");
        ct_tensor_free(eag.qr);
        ct_tensor_free(eag.kr);
    }
    CHECK_OK(ct_exec_force_device(NULL));
    ct_step_free(st);
    ct_tensor *all[] = {q, k, v, kc[0], kc[1], vc[0], vc[1], pos, slot, rec.qr, rec.kr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_prologue(void)
{
    if (!devcheck_device("cuda", g_dev, sizeof g_dev)) return;
    check_prologue(0, CT_I32, false);
    check_prologue(1, CT_I64, false);
    check_prologue(0, CT_I32, true);
}

/* ---- Gemma 3's prologue: per-head q/k norms fused into the ropes, and post-norm + add ---- */

/* Both f32 tensors hold the same values within rel * max|b| (a NaN anywhere fails). */
static void close_to(const ct_tensor *a, const ct_tensor *b, double rel, const char *what)
{
    int64_t n = ct_tensor_numel(b);
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    bool ok = x && y && ct_tensor_numel(a) == n && ct_tensor_to_host(a, x, sizeof(float) * (size_t)n) == CT_OK &&
              ct_tensor_to_host(b, y, sizeof(float) * (size_t)n) == CT_OK;
    double worst = 0, scale = 0;
    for (int64_t i = 0; ok && i < n; i++) {
        double d = fabs((double)x[i] - (double)y[i]);
        if (!(d <= worst)) worst = d; /* NaN sticks */
        if (fabs((double)y[i]) > scale) scale = fabs((double)y[i]);
    }
    CHECK_MSG(ok && worst <= rel * scale, "%s: replayed (fused) vs eager differ by %.3g (max |eager| %.3g)", what,
              worst, scale);
    free(x);
    free(y);
}

typedef struct gemma_out {
    ct_tensor *qn, *kn, *qr, *kr, *aon, *x1;
} gemma_out;

static void gemma_out_free(gemma_out *o)
{
    ct_tensor *all[] = {o->qn, o->kn, o->qr, o->kr, o->aon, o->x1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    memset(o, 0, sizeof *o);
}

/* forward.c's order for a Gemma layer's decode: q/k norms, ropes, the two row writes; then
 * (as after the o projection) the post-attention norm and the residual add. */
static void run_gemma(const ct_tensor *const in[8], const ct_tensor *pos, const ct_tensor *slot, ct_tensor *kc,
                      ct_tensor *vc, gemma_out *o)
{
    const ct_tensor *q = in[0], *k = in[1], *v = in[2], *wq = in[3], *wk = in[4], *ao = in[5], *wp = in[6], *x = in[7];
    ct_rope_params rp = {.n_dims = 256, .freq_base = 1e6, .freq_scale = 1, .mode = CT_ROPE_NEOX};
    ct_tensor *kr2 = NULL, *vr2 = NULL;
    CHECK_OK(ct_rms_norm(q, wq, 1e-6, &o->qn));
    CHECK_OK(ct_rms_norm(k, wk, 1e-6, &o->kn));
    CHECK_OK(ct_rope(o->qn, pos, &rp, &o->qr));
    CHECK_OK(ct_rope(o->kn, pos, &rp, &o->kr));
    CHECK_OK(ct_view(o->kr, 2, (int64_t[]){1, 256}, &kr2));
    CHECK_OK(ct_view(v, 2, (int64_t[]){1, 256}, &vr2));
    CHECK_OK(ct_set_rows(kc, kr2, slot));
    CHECK_OK(ct_set_rows(vc, vr2, slot));
    CHECK_OK(ct_rms_norm(ao, wp, 1e-6, &o->aon));
    CHECK_OK(ct_add(x, o->aon, &o->x1));
    ct_tensor_free(kr2);
    ct_tensor_free(vr2);
}

typedef struct gemma_args {
    const ct_tensor *const *in;
    const ct_tensor *pos, *slot;
    ct_tensor *kc, *vc;
    gemma_out *out;
} gemma_args;

static void gemma_body(void *ctx)
{
    gemma_args *a = ctx;
    run_gemma(a->in, a->pos, a->slot, a->kc, a->vc, a->out);
}

/* The recorded step (groups "rms_norm+rope x2+set_rows x2" and "rms_norm+add") replayed at
 * new positions and slots against the same ops run eagerly: every output, the norms' own
 * included, within 1e-5 of the largest value. The fused norms sum their squares in another
 * order than the per-op kernel (a few ulps in the scale); a missing weight, a head's scale
 * applied to another head, or an unwritten output (poisoned: NaN) is off by O(1). */
static void test_gemma_prologue(void)
{
    if (!devcheck_device("cuda", g_dev, sizeof g_dev)) return;
    th_rng r = {11};
    const ct_tensor *in[8] = {
        th_random(&r, 3, (int64_t[]){1, 4, 256}, CT_F32, -3, 3), th_random(&r, 3, (int64_t[]){1, 1, 256}, CT_F32, -3, 3),
        th_random(&r, 3, (int64_t[]){1, 1, 256}, CT_F32, -2, 2), th_random(&r, 1, (int64_t[]){256}, CT_F32, 0.5, 1.5),
        th_random(&r, 1, (int64_t[]){256}, CT_F16, 0.5, 1.5),    th_random(&r, 2, (int64_t[]){1, 640}, CT_F32, -4, 4),
        th_random(&r, 1, (int64_t[]){640}, CT_BF16, -1, 1),      th_random(&r, 2, (int64_t[]){1, 640}, CT_F32, -1, 1)};
    ct_tensor *kc[2] = {0}, *vc[2] = {0};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(ct_zeros(2, (int64_t[]){64, 256}, CT_F16, &kc[i]));
        CHECK_OK(ct_zeros(2, (int64_t[]){64, 256}, CT_F16, &vc[i]));
    }
    ct_tensor *pos = filled(CT_I32, 1), *slot = filled(CT_I32, 1);
    set_idx(pos, (int32_t[]){3}, 1);
    set_idx(slot, (int32_t[]){3}, 1);
    CHECK_OK(ct_exec_force_device(g_dev));
    gemma_out rec = {0}, eag = {0};
    FILE *trace = tmpfile();
    gemma_args a = {in, pos, slot, kc[0], vc[0], &rec};
    ct_step *st = record_traced(gemma_body, &a, trace);
    if (trace) {
        CHECK_MSG(count_lines(trace, "fused rms_norm+rope x2+set_rows x2") == 1, "the norms + ropes were not fused");
        CHECK_MSG(count_lines(trace, "fused rms_norm+add") == 1, "the post-norm + add was not fused");
        fclose(trace);
    }
    run_gemma(in, pos, slot, kc[1], vc[1], &eag); /* the recording's rows in the eager caches too */
    gemma_out_free(&eag);
    static const int32_t P[3] = {41, 1000, 123456}, SL[3] = {17, 63, 0};
    for (int round = 0; round < 3 && st; round++) {
        set_idx(pos, &P[round], 1);
        set_idx(slot, &SL[round], 1);
        CHECK_OK(ct_step_run(st));
        run_gemma(in, pos, slot, kc[1], vc[1], &eag);
        close_to(rec.qn, eag.qn, 1e-5, "q norm");
        close_to(rec.kn, eag.kn, 1e-5, "k norm");
        close_to(rec.qr, eag.qr, 1e-5, "rope q");
        close_to(rec.kr, eag.kr, 1e-5, "rope k");
        close_to(rec.aon, eag.aon, 1e-5, "post norm");
        close_to(rec.x1, eag.x1, 1e-5, "residual add");
        gemma_out_free(&eag);
    }
    /* the caches as f32: the rows written at each round's slot */
    ct_tensor *kf[2] = {0}, *vf[2] = {0};
    for (int i = 0; i < 2; i++) {
        CHECK_OK(ct_cast(kc[i], CT_F32, &kf[i]));
        CHECK_OK(ct_cast(vc[i], CT_F32, &vf[i]));
    }
    close_to(kf[0], kf[1], 1e-3, "k cache (f16)");
    close_to(vf[0], vf[1], 0, "v cache (f16)");
    CHECK_OK(ct_exec_force_device(NULL));
    ct_step_free(st);
    gemma_out_free(&rec);
    ct_tensor *all[] = {kc[0], kc[1], vc[0], vc[1], kf[0], kf[1], vf[0], vf[1], pos, slot};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    for (int i = 0; i < 8; i++) ct_tensor_free((ct_tensor *)in[i]);
}

/* ---- decode attention writing the q8 form of the o projection's x ---- */

enum { AQ_TK = 512, AQ_N = 256 };

typedef struct attn_args {
    const ct_tensor *q, *kc, *vc, *len, *wo, *res;
    ct_tensor *att, *y;
} attn_args;

/* forward.c's decode attention and o projection + residual add, on one token */
static void attn_body(void *ctx)
{
    attn_args *a = ctx;
    ct_sdpa_params sp = {.causal = true, .length = a->len};
    ct_tensor *flat = NULL, *lin = NULL;
    CHECK_OK(ct_sdpa(a->q, a->kc, a->vc, NULL, &sp, &a->att));
    if (a->att) CHECK_OK(ct_view(a->att, 2, (int64_t[]){1, ct_tensor_numel(a->att)}, &flat));
    if (flat) CHECK_OK(ct_linear(flat, a->wo, NULL, &lin));
    if (lin) CHECK_OK(ct_add(a->res, lin, &a->y));
    ct_tensor_free(flat);
    ct_tensor_free(lin);
}

/* A weight [N, K] of format dt (quantized, or f16 / f32) from uniform values in [-1, 1]. */
static ct_tensor *weight(th_rng *r, ct_dtype dt, int64_t N, int64_t K)
{
    if (!ct_dtype_is_quantized(dt)) return th_random(r, 2, (int64_t[]){N, K}, dt, -1, 1);
    ct_tensor *w = NULL;
    float *row = malloc(sizeof(float) * (size_t)K);
    void *p = NULL;
    CHECK_OK(ct_empty(2, (int64_t[]){N, K}, dt, &w));
    if (w && row && ct_tensor_data_mut(w, &p) == CT_OK)
        for (int64_t n = 0; n < N; n++) {
            for (int64_t k = 0; k < K; k++) row[k] = (float)th_uniform(r, -1, 1);
            CHECK_OK(quant_quantize_row(dt, row, (char *)p + (size_t)n * ct_dtype_row_bytes(dt, K), K));
        }
    free(row);
    return w;
}

/* The step recorded with sdpa writing the o projection's q8 form (one trace line says so)
 * and recorded again with CTORCH_CUDA_SDPA_Q8=0 (quantize_q8 makes it), both replayed at
 * lengths that take the one-block path, the merge of several blocks, and no key: the
 * attention and the projection + add equal bit for bit, since the q8 form must be
 * quantize_q8's (a wrong scale, block or sum index changes the integer dots); and the
 * projection within 2e-2 of the largest eager value (eager rounds x to 8 bits or not:
 * ~0.5% of a product; a wrong row is O(1)). Hq 6 / Hkv 2 leaves lanes of a warp without a
 * block, D 128 its q8 blocks 4 a head, D 256 splits each row's columns over two warps. */
static void check_attn_q8(int Hq, int Hkv, int D)
{
    th_rng r = {23 + (uint64_t)D};
    const int64_t K = (int64_t)Hq * D;
    const ct_tensor *q = th_random(&r, 4, (int64_t[]){1, Hq, 1, D}, CT_F32, -1, 1);
    const ct_tensor *kc = th_random(&r, 4, (int64_t[]){1, Hkv, AQ_TK, D}, CT_F16, -1, 1);
    const ct_tensor *vc = th_random(&r, 4, (int64_t[]){1, Hkv, AQ_TK, D}, CT_F16, -2, 2);
    const ct_tensor *res = th_random(&r, 2, (int64_t[]){1, AQ_N}, CT_F32, -1, 1);
    ct_tensor *wo = weight(&r, CT_Q4_K, AQ_N, K), *len = filled(CT_I32, 1);
    set_idx(len, (int32_t[]){AQ_TK}, 1);
    CHECK_OK(ct_exec_force_device(g_dev));
    attn_args a[3] = {{q, kc, vc, len, wo, res, NULL, NULL}, {q, kc, vc, len, wo, res, NULL, NULL},
                      {q, kc, vc, len, wo, res, NULL, NULL}};
    ct_step *st[2] = {NULL, NULL};
    FILE *tr[2];
    record_both(attn_body, &a[0], &a[1], "CTORCH_CUDA_SDPA_Q8", st, tr);
    for (int i = 0; i < 2; i++) {
        FILE *trace = tr[i];
        if (!trace) continue;
        CHECK_MSG(count_lines(trace, "fused linear x1+add (") == 1, "Hq %d D %d: the o projection was not fused", Hq, D);
        CHECK_MSG(count_lines(trace, "on sdpa's q8 form") == !i, "Hq %d D %d: %d lines on sdpa's q8 form, expected %d",
                  Hq, D, count_lines(trace, "on sdpa's q8 form"), !i);
        fclose(trace);
    }
    static const int32_t L[] = {1, 77, 128, 129, 300, AQ_TK, 0};
    for (size_t k = 0; k < sizeof L / sizeof L[0] && st[0] && st[1]; k++) {
        set_idx(len, &L[k], 1);
        CHECK_OK(ct_step_run(st[0]));
        CHECK_OK(ct_step_run(st[1]));
        attn_body(&a[2]);
        same_bytes(a[0].att, a[1].att, "attention");
        same_bytes(a[0].y, a[1].y, "o projection + add on sdpa's q8 form");
        if (a[2].y) close_to(a[0].y, a[2].y, 2e-2, "o projection + add against eager");
        ct_tensor_free(a[2].att);
        ct_tensor_free(a[2].y);
        a[2].att = a[2].y = NULL;
    }
    CHECK_OK(ct_exec_force_device(NULL));
    for (int i = 0; i < 2; i++) {
        ct_step_free(st[i]);
        ct_tensor_free(a[i].att);
        ct_tensor_free(a[i].y);
    }
    ct_tensor *all[] = {(ct_tensor *)q, (ct_tensor *)kc, (ct_tensor *)vc, (ct_tensor *)res, wo, len};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_attn_q8(void)
{
    if (!devcheck_device("cuda", g_dev, sizeof g_dev)) return;
    check_attn_q8(8, 1, 64);
    check_attn_q8(6, 2, 128);
    check_attn_q8(4, 1, 256); /* Gemma 3: two warps a span of keys */
}

/* ---- post-norm + add, then the next block's norm made in the same kernel ---- */

typedef struct na_args {
    const ct_tensor *ao, *wp, *res, *w2, *wa, *wb;
    ct_tensor *y, *z, *y2, *oa, *ob;
} na_args;

static void na_free(na_args *a)
{
    ct_tensor *all[] = {a->y, a->z, a->y2, a->oa, a->ob};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    a->y = a->z = a->y2 = a->oa = a->ob = NULL;
}

/* forward.c's order for Gemma 3: a block's post-norm and residual add, then the next
 * block's pre-norm and two of its linears */
static void na_body(void *ctx)
{
    na_args *a = ctx;
    CHECK_OK(ct_rms_norm(a->ao, a->wp, 1e-6, &a->y));
    if (a->y) CHECK_OK(ct_add(a->res, a->y, &a->z));
    if (a->z) CHECK_OK(ct_rms_norm(a->z, a->w2, 1e-6, &a->y2));
    if (!a->y2) return;
    CHECK_OK(ct_linear(a->y2, a->wa, NULL, &a->oa));
    CHECK_OK(ct_linear(a->y2, a->wb, NULL, &a->ob));
}

/* New values for a host tensor (the replay uploads them). */
static void refill(th_rng *r, const ct_tensor *t, double lo, double hi)
{
    float *p = NULL;
    CHECK_OK(ct_tensor_data_mut((ct_tensor *)t, (void **)&p));
    for (int64_t i = 0; p && i < ct_tensor_numel(t); i++) p[i] = (float)th_uniform(r, lo, hi);
}

/* The step recorded with the post-norm + add group making the next norm (and the q8 form
 * its linears read, for quantized weights) in one kernel, and again with
 * CTORCH_CUDA_NORM_Q8=0 (norm_add_kernel, then rms_q8 or the job's own norm), both replayed
 * on new activations: every output equal bit for bit, since the kernel must sum and round
 * as the two do (a sum in another order moves the scales by ulps, a wrong weight or
 * element by O(1)); and within 1e-5 (norms) / 2e-2 (linears: eager rounds x to 8 bits or
 * not, ~0.5% of a product) of the largest eager value. K 640 is Gemma 3 270M's width, 2048
 * the kernel's largest; f16 weights take the path without a q8 form. */
static void check_norm_add_q8(int64_t K, ct_dtype wa_t, ct_dtype wb_t, ct_dtype w2_t)
{
    th_rng r = {31 + (uint64_t)K};
    const ct_tensor *ao = th_random(&r, 2, (int64_t[]){1, K}, CT_F32, -4, 4);
    const ct_tensor *res = th_random(&r, 2, (int64_t[]){1, K}, CT_F32, -1, 1);
    const ct_tensor *wp = th_random(&r, 1, (int64_t[]){K}, CT_BF16, -1, 1);
    const ct_tensor *w2 = th_random(&r, 1, (int64_t[]){K}, w2_t, 0.5, 1.5);
    ct_tensor *wa = weight(&r, wa_t, 256, K), *wb = weight(&r, wb_t, 96, K);
    CHECK_OK(ct_exec_force_device(g_dev));
    na_args a[3];
    for (int i = 0; i < 3; i++) a[i] = (na_args){ao, wp, res, w2, wa, wb, NULL, NULL, NULL, NULL, NULL};
    ct_step *st[2] = {NULL, NULL};
    FILE *tr[2];
    record_both(na_body, &a[0], &a[1], "CTORCH_CUDA_NORM_Q8", st, tr);
    for (int i = 0; i < 2; i++) {
        FILE *trace = tr[i];
        if (!trace) continue;
        CHECK_MSG(count_lines(trace, "fused rms_norm+add") == 1, "K %lld: the post-norm + add was not fused", (long long)K);
        int with = count_lines(trace, "with the norm after it");
        CHECK_MSG(with == !i, "K %lld: %d post-norm + add lines with the norm after it, expected %d", (long long)K, with, !i);
        CHECK_MSG(count_lines(trace, "on the norm made with rms_norm+add") == !i,
                  "K %lld: the linears were not fused on the norm made with the post-norm + add", (long long)K);
        fclose(trace);
    }
    for (int round = 0; round < 3 && st[0] && st[1]; round++) {
        refill(&r, ao, -4, 4);
        refill(&r, res, -1, 1);
        CHECK_OK(ct_step_run(st[0]));
        CHECK_OK(ct_step_run(st[1]));
        na_body(&a[2]);
        const char *what[5] = {"post norm", "residual add", "next norm", "linear a", "linear b"};
        ct_tensor *t[3][5];
        for (int i = 0; i < 3; i++) {
            t[i][0] = a[i].y, t[i][1] = a[i].z, t[i][2] = a[i].y2, t[i][3] = a[i].oa, t[i][4] = a[i].ob;
        }
        for (int k = 0; k < 5; k++) {
            if (!t[0][k] || !t[1][k] || !t[2][k]) continue;
            same_bytes(t[0][k], t[1][k], what[k]);
            close_to(t[0][k], t[2][k], k < 3 ? 1e-5 : 2e-2, what[k]);
        }
        na_free(&a[2]);
    }
    CHECK_OK(ct_exec_force_device(NULL));
    for (int i = 0; i < 2; i++) {
        ct_step_free(st[i]);
        na_free(&a[i]);
    }
    ct_tensor *all[] = {(ct_tensor *)ao, (ct_tensor *)res, (ct_tensor *)wp, (ct_tensor *)w2, wa, wb};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_norm_add_q8(void)
{
    if (!devcheck_device("cuda", g_dev, sizeof g_dev)) return;
    check_norm_add_q8(640, CT_Q8_0, CT_Q5_0, CT_F32);
    check_norm_add_q8(2048, CT_Q4_K, CT_Q6_K, CT_BF16);
    check_norm_add_q8(640, CT_F16, CT_F16, CT_F16);
}

/* ---- a gated job writing the q8 form of the down projection's x ---- */

typedef struct glu_args {
    const ct_tensor *x, *wn, *wg, *wu, *wd, *res;
    ct_tensor *h, *g, *u, *gu, *f, *y;
} glu_args;

static void glu_free(glu_args *a)
{
    ct_tensor *all[] = {a->h, a->g, a->u, a->gu, a->f, a->y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    a->h = a->g = a->u = a->gu = a->f = a->y = NULL;
}

/* forward.c's feed-forward block on one token: norm, gate and up, swiglu, down, residual */
static void glu_body(void *ctx)
{
    glu_args *a = ctx;
    CHECK_OK(ct_rms_norm(a->x, a->wn, 1e-5, &a->h));
    if (!a->h) return;
    CHECK_OK(ct_linear(a->h, a->wg, NULL, &a->g));
    CHECK_OK(ct_linear(a->h, a->wu, NULL, &a->u));
    if (a->g && a->u) CHECK_OK(ct_swiglu(a->g, a->u, &a->gu));
    if (a->gu) CHECK_OK(ct_linear(a->gu, a->wd, NULL, &a->f));
    if (a->f) CHECK_OK(ct_add(a->res, a->f, &a->y));
}

/* The step recorded with the gated job writing the q8 form the down projection reads (a
 * scale per 8 rows; one trace line for each of the two) where gate/up and down each run on
 * a one-format kernel (Q4_K or Q6_K), and again with CTORCH_CUDA_GLU_Q8=0 (quantize_q8 makes
 * the per-32 form), both replayed on new activations. The activation is the same kernel's
 * either way: equal bit for bit. The down projection + add rounds x per 8 or per 32, so the
 * two agree only within rounding: within 2e-2 of the largest eager value, as eager (~0.5%
 * of a product from x's 8-bit rounding; a scale or quant from the wrong rows is O(1)). N
 * 768 is 96 units of 8 rows; a Q5_0 gate/up or down takes no d8 form (no line either way),
 * nor does a job small enough to dequantize its weights for f32 x, nor (the planner's
 * choice, measured) a Q6_K gate/up. */
static void check_glu_q8(int64_t K, int64_t N, ct_dtype gu_t, ct_dtype d_t, bool paired)
{
    th_rng r = {41 + (uint64_t)N};
    const ct_tensor *x = th_random(&r, 2, (int64_t[]){1, K}, CT_F32, -2, 2);
    const ct_tensor *res = th_random(&r, 2, (int64_t[]){1, K}, CT_F32, -1, 1);
    const ct_tensor *wn = th_random(&r, 1, (int64_t[]){K}, CT_F32, 0.5, 1.5);
    ct_tensor *wg = weight(&r, gu_t, N, K), *wu = weight(&r, gu_t, N, K), *wd = weight(&r, d_t, K, N);
    CHECK_OK(ct_exec_force_device(g_dev));
    glu_args a[3];
    for (int i = 0; i < 3; i++) a[i] = (glu_args){x, wn, wg, wu, wd, res, NULL, NULL, NULL, NULL, NULL, NULL};
    ct_step *st[2] = {NULL, NULL};
    FILE *tr[2];
    record_both(glu_body, &a[0], &a[1], "CTORCH_CUDA_GLU_Q8", st, tr);
    for (int i = 0; i < 2; i++) {
        FILE *trace = tr[i];
        if (!trace) continue;
        int want = paired && !i, w = count_lines(trace, "writing the q8 form of the linears after it"),
            o = count_lines(trace, "on the gated job's q8 form");
        CHECK_MSG(w == want && o == want, "%s / %s, N %lld: %d / %d lines of the gated job's q8 form, expected %d",
                  ct_dtype_name(gu_t), ct_dtype_name(d_t), (long long)N, w, o, want);
        fclose(trace);
    }
    for (int round = 0; round < 3 && st[0] && st[1]; round++) {
        refill(&r, x, -2, 2);
        refill(&r, res, -1, 1);
        CHECK_OK(ct_step_run(st[0]));
        CHECK_OK(ct_step_run(st[1]));
        glu_body(&a[2]);
        if (a[0].gu && a[1].gu && a[2].gu) {
            same_bytes(a[0].gu, a[1].gu, "swiglu");
            close_to(a[0].gu, a[2].gu, 2e-2, "swiglu against eager");
        }
        if (a[0].y && a[1].y && a[2].y) {
            close_to(a[0].y, a[1].y, 2e-2, "down projection + add on the d8 form against the per-32 form");
            close_to(a[0].y, a[2].y, 2e-2, "down projection + add against eager");
        }
        glu_free(&a[2]);
    }
    CHECK_OK(ct_exec_force_device(NULL));
    for (int i = 0; i < 2; i++) {
        ct_step_free(st[i]);
        glu_free(&a[i]);
    }
    ct_tensor *all[] = {(ct_tensor *)x, (ct_tensor *)res, (ct_tensor *)wn, wg, wu, wd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_glu_q8(void)
{
    if (!devcheck_device("cuda", g_dev, sizeof g_dev)) return;
    check_glu_q8(256, 768, CT_Q4_K, CT_Q4_K, true);
    /* a Q6_K down of 2^22 elements or fewer dequantizes for f32 x (quant_fused.cu's
     * FU_FMA_MAX_ELEMS): no q8 form to write */
    check_glu_q8(1024, 4608, CT_Q4_K, CT_Q6_K, true);
    check_glu_q8(1024, 4608, CT_Q6_K, CT_Q6_K, false); /* the planner pairs Q4_K gate/up only (fuse.c) */
    check_glu_q8(512, 1024, CT_Q4_K, CT_Q6_K, false);
    check_glu_q8(256, 512, CT_Q5_0, CT_Q4_K, false);
    check_glu_q8(256, 512, CT_Q4_K, CT_Q5_0, false);
}

static void test_q4_k_m(void)
{
    if (!ready()) return;
    check(&(run_cfg){"mini-a-q4_k_m.gguf", INT_MAX, NULL}, 4, true, true);
    check(&(run_cfg){"mini-a-q4_k_m.gguf", 2, NULL}, 2, true, true);
    check(&(run_cfg){"mini-a-q4_k_m.gguf", INT_MAX, "cuda:swiglu:unsupported"}, 4, false, true);
}

static void test_f16(void)
{
    if (!ready()) return;
    check(&(run_cfg){"mini-a-f16.gguf", INT_MAX, NULL}, 4, true, false);
    check(&(run_cfg){"mini-a-f16.gguf", 2, NULL}, 2, true, false);
}

int main(int argc, char **argv)
{
    setenv("CTORCH_CUDA_POISON", "1", 0); /* unwritten outputs read as NaN */
    th_args(argc, argv);
    RUN(test_prologue);
    RUN(test_gemma_prologue);
    RUN(test_attn_q8);
    RUN(test_norm_add_q8);
    RUN(test_glu_q8);
    RUN(test_q4_k_m);
    RUN(test_f16);
    return th_finish();
}
