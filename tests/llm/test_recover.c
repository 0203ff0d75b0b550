/* An LLM session outlives a device lost late (issue 9): a tiny llama written here
 * runs with its weights on the asynchronous simulated device of tests/support; a
 * late fault injected during the prompt or at a decode step loses that device, and
 * the session recovers (fresh cache, weights on the chain's next device, the token
 * history evaluated again) so greedy generation gives exactly the tokens of an
 * uninterrupted run on the CPU. The recovery is logged once, naming both devices.
 * Also the layer split of --gpu-layers (llm_model_place) on the same device.
 * Needs no ../shared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "test_backend.h"
#include "tiny_gguf.h"

enum { V = 96, E = 32, L = 2, F = 64, H = 2, HKV = 1, D = 16, CTX = 64, N_GEN = 17 };

static const int32_t g_prompt[] = {1, 10, 27, 33, 48, 71};
#define P ((int)(sizeof g_prompt / sizeof g_prompt[0]))

static void add(gguf_writer *w, th_rng *rng, float **keep, int *nk, const char *name, int64_t d0, int64_t d1,
                double lo, double hi)
{
    int64_t n = d0 * (d1 ? d1 : 1), shape[2] = {d0, d1};
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)th_uniform(rng, lo, hi);
    CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, d1 ? 2 : 1, shape, f));
    keep[(*nk)++] = f;
}

/* SentencePiece-style: <unk> <s> </s>, then one word per id ("▁w17"), so every
 * generated token is a piece of text of its own and the text spells the tokens. */
static void add_vocab(gguf_writer *w)
{
    static char bufs[V][16];
    const char *toks[V];
    float scores[V];
    int32_t types[V];
    for (int i = 0; i < V; i++) {
        if (i < 3) snprintf(bufs[i], sizeof bufs[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else snprintf(bufs[i], sizeof bufs[i], "\xe2\x96\x81w%d", i);
        toks[i] = bufs[i];
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    }
    th_llama_vocab(w, toks, scores, types, V, 1, 2, 0);
}

/* The same weights every time (fixed seed): each run gets a model of its own, so no
 * weight keeps copies on the simulated devices of an earlier run. */
static llm_model *make_model(void)
{
    char path[512];
    th_tmp_path(path, sizeof path, "recover.gguf");
    th_rng rng = {2024};
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    gguf_writer *w = gguf_writer_new();
    th_llama_hparams(w, "recover-test", &shape);
    add_vocab(w);
    float *keep[64];
    int nk = 0;
    const double ws = 1.0 / sqrt((double)E);
    add(w, &rng, keep, &nk, "token_embd.weight", V, E, -1, 1);
    add(w, &rng, keep, &nk, "output_norm.weight", E, 0, 0.8, 1.2);
    add(w, &rng, keep, &nk, "output.weight", V, E, -3 * ws, 3 * ws);
    for (int l = 0; l < L; l++) {
        char n[64];
#define LW(suf, d0, d1, lo, hi) \
    (snprintf(n, sizeof n, "blk.%d.%s.weight", l, suf), add(w, &rng, keep, &nk, n, d0, d1, lo, hi))
        LW("attn_norm", E, 0, 0.8, 1.2);
        LW("attn_q", H * D, E, -2 * ws, 2 * ws);
        LW("attn_k", HKV * D, E, -2 * ws, 2 * ws);
        LW("attn_v", HKV * D, E, -ws, ws);
        LW("attn_output", E, H * D, -ws, ws);
        LW("ffn_norm", E, 0, 0.8, 1.2);
        LW("ffn_gate", F, E, -2 * ws, 2 * ws);
        LW("ffn_up", F, E, -2 * ws, 2 * ws);
        LW("ffn_down", E, F, -ws, ws);
#undef LW
    }
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_free(w);
    for (int i = 0; i < nk; i++) free(keep[i]);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    remove(path);
    return m;
}

/* A run: how many simulated devices head the chain (0: the CPU alone), and the late
 * faults to inject: on device fault_dev[i] a few ops into the evaluation that follows
 * the fault_piece[i]-th generated piece (-1: during the prompt). */
typedef struct run_cfg {
    int n_test;
    int gpu_layers; /* layers placed on test:0 (llm_model_place's n_layers); 0: all that fit */
    int n_faults;
    int fault_dev[2], fault_piece[2];
} run_cfg;

typedef struct run_out {
    char text[2048];
    size_t len;
    int32_t hist[CTX];
    int n_past;
    int pieces;
    const run_cfg *cfg;
} run_out;

static void inject(const run_cfg *c, int piece)
{
    for (int i = 0; i < c->n_faults; i++)
        if (c->fault_piece[i] == piece) test_backend_fail_late(c->fault_dev[i], 3);
}

/* Each piece is emitted before its token is evaluated: the fault lands in that step. */
static bool on_piece(const char *text, int len, void *ctx)
{
    run_out *o = ctx;
    if (o->len + (size_t)len < sizeof o->text) {
        memcpy(o->text + o->len, text, (size_t)len);
        o->len += (size_t)len;
        o->text[o->len] = 0;
    }
    inject(o->cfg, o->pieces++);
    return true;
}

/* What the library logged, for the recovery's message. */
static char g_log[4096];
static void capture(ct_log_level level, const char *msg, void *ctx)
{
    (void)level;
    (void)ctx;
    size_t w = strlen(g_log);
    snprintf(g_log + w, sizeof g_log - w, "%s\n", msg);
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void cpu_reference(void);
static void check_split(const llm_model *m, const llm_session *s, int ngl);

static void generate(const run_cfg *c, run_out *o)
{
    if (c->n_test) cpu_reference(); /* first: it would overwrite the captured log */
    *o = (run_out){.cfg = c};
    ct_exec_set_fault(NULL);
    if (c->n_test) {
        CHECK_OK(test_backend_install_async(c->n_test, "*"));
        ct_exec_set_small_bytes(0); /* every op goes to the chain head */
    } else {
        test_backend_uninstall();
    }
    g_log[0] = 0;
    ct_set_log_callback(capture, NULL);
    llm_model *m = make_model();
    if (!m) return;
    llm_placement pl = {0};
    if (c->n_test) CHECK_OK(llm_model_place(m, "test:0", c->gpu_layers ? c->gpu_layers : -1, NULL, NULL, &pl));
    if (c->gpu_layers) CHECK(pl.layers == c->gpu_layers && !pl.output && !strcmp(pl.device, "test:0"));
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, CTX, CT_F32, NULL)); /* f32: the simulated device writes the cache */
    if (c->gpu_layers) check_split(m, &s, c->gpu_layers);
    s.ignore_eog = true;
    inject(c, -1);
    CHECK_OK(llm_session_eval(&s, g_prompt, P));
    llm_gen_stats gs;
    CHECK_OK(llm_session_generate(&s, N_GEN, on_piece, o, NULL, &gs));
    CHECK(gs.n_gen == N_GEN);
    o->n_past = llm_session_n_past(&s);
    memcpy(o->hist, s.hist, (size_t)o->n_past * sizeof *o->hist);
    if (c->n_test) CHECK_MSG(test_backend_runs(0, CT_OP_LINEAR) > 0, "nothing ran on test:0");
    llm_session_free(&s);
    llm_model_free(m);
    ct_set_log_callback(NULL, NULL);
}

/* The last `ngl` layers' weights and KV cache live on test:0, the others' never went there. */
static void check_split(const llm_model *m, const llm_session *s, int ngl)
{
    char buf[128];
    for (int l = 0; l < L; l++) {
        bool dev = l >= L - ngl;
        const ct_tensor *ts[] = {m->layers[l].wq, m->layers[l].w_down, s->kv.k[l], s->kv.v[l]};
        for (int i = 0; i < 4; i++) {
            bool there = strstr(ct_tensor_residency(ts[i], buf, sizeof buf), "test:0") != NULL;
            CHECK_MSG(there == dev, "layer %d tensor %d: residency %s", l, i, buf);
        }
    }
    CHECK_MSG(!strstr(ct_tensor_residency(m->output, buf, sizeof buf), "test:0"), "output: %s", buf);
}

static run_out g_cpu; /* the uninterrupted CPU run, made by the first test that needs it */
static bool g_have_cpu;

static void cpu_reference(void)
{
    if (g_have_cpu) return;
    static const run_cfg c = {0};
    generate(&c, &g_cpu);
    g_have_cpu = true;
}

static void expect_cpu_tokens(const run_out *o)
{
    CHECK_MSG(o->n_past == g_cpu.n_past && !memcmp(o->hist, g_cpu.hist, (size_t)o->n_past * sizeof *o->hist),
              "%d positions, the CPU %d", o->n_past, g_cpu.n_past);
    CHECK_MSG(!strcmp(o->text, g_cpu.text), "generated\n  '%s'\nthe CPU generated\n  '%s'", o->text, g_cpu.text);
}

static void test_cpu_reference(void)
{
    cpu_reference();
    CHECK(g_cpu.n_past == P + N_GEN - 1);
    CHECK(g_cpu.pieces == N_GEN);
    fprintf(stderr, "  cpu:%s\n", g_cpu.text);
}

/* Without a fault the simulated device gives the CPU's tokens: the test is about
 * recovery, not about the two devices' rounding. */
static void test_device_without_fault(void)
{
    static const run_cfg c = {.n_test = 1};
    run_out o;
    generate(&c, &o);
    expect_cpu_tokens(&o);
    CHECK_MSG(!g_log[0], "logged: %s", g_log);
}

/* --gpu-layers 1: the last layer (its weights and its KV cache) on the simulated device, the
 * first layer and the output on the host; ops follow their weights and the tokens are the
 * CPU's. */
static void test_layer_split(void)
{
    static const run_cfg c = {.n_test = 1, .gpu_layers = 1};
    run_out o;
    generate(&c, &o);
    expect_cpu_tokens(&o);
    CHECK_MSG(!g_log[0], "logged: %s", g_log);
}

static void test_fault_at_a_decode_step(void)
{
    static const run_cfg c = {.n_test = 1, .n_faults = 1, .fault_dev = {0}, .fault_piece = {7}};
    run_out o;
    generate(&c, &o);
    expect_cpu_tokens(&o);
    char want[128];
    snprintf(want, sizeof want, "device test:0 lost: recovered on cpu by replaying %d tokens", P + 7);
    CHECK_MSG(count(g_log, want) == 1 && count(g_log, "recovered on") == 1, "want '%s' once; logged:\n%s", want,
              g_log);
}

static void test_fault_during_the_prompt(void)
{
    static const run_cfg c = {.n_test = 1, .n_faults = 1, .fault_dev = {0}, .fault_piece = {-1}};
    run_out o;
    generate(&c, &o);
    expect_cpu_tokens(&o);
    CHECK_MSG(count(g_log, "device test:0 lost: recovered on cpu by replaying 0 tokens") == 1 &&
                  count(g_log, "recovered on") == 1,
              "logged:\n%s", g_log);
}

/* Two simulated devices: the first loss moves the session to the second (weights
 * placed there), the second loss to the CPU. */
static void test_two_losses_walk_the_chain(void)
{
    static const run_cfg c = {.n_test = 2, .n_faults = 2, .fault_dev = {0, 1}, .fault_piece = {3, 11}};
    run_out o;
    generate(&c, &o);
    expect_cpu_tokens(&o);
    char a[128], b[128];
    snprintf(a, sizeof a, "device test:0 lost: recovered on test:1 by replaying %d tokens", P + 3);
    snprintf(b, sizeof b, "device test:1 lost: recovered on cpu by replaying %d tokens", P + 11);
    CHECK_MSG(count(g_log, a) == 1 && count(g_log, b) == 1 && count(g_log, "recovered on") == 2,
              "want '%s' and '%s'; logged:\n%s", a, b, g_log);
    CHECK_MSG(test_backend_runs(1, CT_OP_LINEAR) > 0, "nothing ran on test:1");
    fprintf(stderr, "%s", g_log);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_cpu_reference);
    RUN(test_device_without_fault);
    RUN(test_layer_split);
    RUN(test_fault_at_a_decode_step);
    RUN(test_fault_during_the_prompt);
    RUN(test_two_losses_walk_the_chain);
    test_backend_uninstall();
    return th_finish();
}
