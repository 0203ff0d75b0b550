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

/* The same weights every time (fixed seed): each run gets a model of its own, so no
 * weight keeps copies on the simulated devices of an earlier run. */
static llm_model *make_model(void)
{
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    return th_tiny_llama("recover.gguf", "recover-test", 2024, &shape, V, D);
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
    th_log_capture(true);
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
    th_log_capture(false);
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
    CHECK_MSG(!th_log()[0], "logged: %s", th_log());
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
    CHECK_MSG(!th_log()[0], "logged: %s", th_log());
}

static void test_fault_at_a_decode_step(void)
{
    static const run_cfg c = {.n_test = 1, .n_faults = 1, .fault_dev = {0}, .fault_piece = {7}};
    run_out o;
    generate(&c, &o);
    expect_cpu_tokens(&o);
    char want[128];
    snprintf(want, sizeof want, "device test:0 lost: recovered on cpu by replaying %d tokens", P + 7);
    CHECK_MSG(th_count(th_log(), want) == 1 && th_count(th_log(), "recovered on") == 1, "want '%s' once; logged:\n%s", want,
              th_log());
}

static void test_fault_during_the_prompt(void)
{
    static const run_cfg c = {.n_test = 1, .n_faults = 1, .fault_dev = {0}, .fault_piece = {-1}};
    run_out o;
    generate(&c, &o);
    expect_cpu_tokens(&o);
    CHECK_MSG(th_count(th_log(), "device test:0 lost: recovered on cpu by replaying 0 tokens") == 1 &&
                  th_count(th_log(), "recovered on") == 1,
              "logged:\n%s", th_log());
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
    CHECK_MSG(th_count(th_log(), a) == 1 && th_count(th_log(), b) == 1 && th_count(th_log(), "recovered on") == 2,
              "want '%s' and '%s'; logged:\n%s", a, b, th_log());
    CHECK_MSG(test_backend_runs(1, CT_OP_LINEAR) > 0, "nothing ran on test:1");
    fprintf(stderr, "%s", th_log());
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
