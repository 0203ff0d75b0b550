/* A replayed decode step with a simulated accelerator in the chain (issue 9): half of
 * the layers (their weights and KV cache) placed on test:0, the rest on the CPU, decode
 * replays the step recorded at the first token, and the greedy tokens equal the CPU's
 * eager ones over many steps. Every combination of a synchronous or asynchronous device
 * and native capture off or on (on: each run of consecutive ops on test:0 is captured and
 * launched whole); a tiny f32 llama written here (every layer op can run
 * on the device: rms_norm and swiglu as their parts) and, when ../shared/refdata is
 * there, the mini-a F16 model (only the f32 parts of a layer run on the device). The
 * replay must really happen: one recording for the whole run, and ops replayed on
 * test:0 after it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "test_backend.h"
#include "tiny_gguf.h"

enum { V = 96, E = 32, L = 4, F = 64, H = 2, HKV = 1, CTX = 96 };

#define N_TINY 60 /* greedy tokens of the tiny model: most of its context */
#define N_MINI 24 /* greedy tokens per prompt of mini-a */

/* Fixed seed: the same weights for every run; a model per run, so no weight keeps
 * copies on the simulated devices of an earlier run. */
static llm_model *tiny_model(void)
{
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    return th_tiny_llama("replay_placed.gguf", "replay-placed", 4242, &shape, V, 16);
}

static llm_model *mini_model(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/mini-a/mini-a-f16.gguf", th_refdata());
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    return m;
}

/* How a run is set up: the CPU alone decoding eagerly (the reference), or test:0
 * heading the chain with the first half of the layers placed on it, replaying. */
typedef struct run_cfg {
    bool device, async, capture;
} run_cfg;

static void set_replay(bool on)
{
    setenv("CTORCH_REPLAY", on ? "1" : "0", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(llm_replay_enabled() == on);
}

static void setup(const run_cfg *c)
{
    if (!c->device) {
        test_backend_uninstall();
        set_replay(false);
        return;
    }
    CHECK_OK(c->async ? test_backend_install_async(1, "*") : test_backend_install(1, "*"));
    test_backend_set_capture(c->capture);
    set_replay(true);
    ct_exec_set_small_bytes(0); /* placement alone decides where an op runs */
}

/* --gpu-layers n/2: the weights and KV cache of layers [0, n/2) live on test:0, the
 * rest (and the embedding and output) on the CPU. */
static void place_half(const llm_model *m, const llm_session *s)
{
    for (int l = 0; l < m->hp.n_layer; l++) {
        const char *dev = l < m->hp.n_layer / 2 ? "test:0" : "cpu";
        const llm_layer *ly = &m->layers[l];
        const ct_tensor *ws[] = {ly->attn_norm, ly->wq, ly->wk, ly->wv, ly->wo, ly->ffn_norm, ly->w_gate, ly->w_up,
                                 ly->w_down, s->kv.k[l], s->kv.v[l]};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) CHECK_OK(ct_tensor_place(ws[i], dev));
    }
    CHECK_OK(ct_tensor_place(m->tok_embd, "cpu"));
    CHECK_OK(ct_tensor_place(m->output, "cpu"));
}

/* Linear runs on test:0 that the device refuses once the step is recorded (n 0: none). */
static struct {
    int n;
    ct_status err;
} g_refuse;

/* Greedy tokens after the prompt; decode ops replayed on test:0 into *dev_runs, captured
 * launches there into *launches. */
static void greedy(const run_cfg *c, llm_model *m, const int32_t *prompt, int np, int n_gen, int32_t *out,
                   int *records, int *dev_runs, int *launches)
{
    setup(c);
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, CTX, CT_F32, NULL)); /* f32: the simulated device reads the cache */
    if (c->device) place_half(m, &s);
    CHECK_OK(llm_session_eval(&s, prompt, np));
    const int Vn = m->hp.n_vocab;
    int after_record = 0;
    for (int k = 0; k < n_gen; k++) {
        out[k] = th_argmax_f32(s.logits, Vn);
        if (k + 1 == n_gen) break;
        if (llm_session_eval(&s, &out[k], 1) != CT_OK) {
            CHECK_MSG(0, "decode %d failed: %s", k, ct_last_error());
            break;
        }
        if (k == 0 && c->device) {
            after_record = test_backend_runs(0, CT_OP_LINEAR) + test_backend_runs(0, CT_OP_MUL);
            if (g_refuse.n) test_backend_refuse_runs(0, CT_OP_LINEAR, 3, g_refuse.n, g_refuse.err);
        }
    }
    *records = llm_decoder_records(&s);
    *dev_runs = c->device ? test_backend_runs(0, CT_OP_LINEAR) + test_backend_runs(0, CT_OP_MUL) - after_record : 0;
    *launches = c->device ? test_backend_launches(0) : 0;
    llm_session_free(&s);
}

static const run_cfg g_cfgs[] = {
    {true, false, false}, {true, false, true}, {true, true, false}, {true, true, true}};
#define N_CFGS (int)(sizeof g_cfgs / sizeof g_cfgs[0])

static const char *cfg_name(const run_cfg *c)
{
    static char b[64];
    snprintf(b, sizeof b, "%s device, capture %s", c->async ? "async" : "sync", c->capture ? "on" : "off");
    return b;
}

static void compare(const char *what, llm_model *(*load)(void), const int32_t *prompt, int np, int n_gen)
{
    static const run_cfg cpu = {0};
    int32_t want[N_TINY], got[N_TINY];
    int rec = 0, runs = 0, launches = 0;
    llm_model *m = load();
    if (!m) return;
    greedy(&cpu, m, prompt, np, n_gen, want, &rec, &runs, &launches);
    llm_model_free(m);
    CHECK_MSG(rec == 0, "the CPU reference replayed (%d recordings)", rec);
    for (int i = 0; i < N_CFGS; i++) {
        if (!(m = load())) return;
        greedy(&g_cfgs[i], m, prompt, np, n_gen, got, &rec, &runs, &launches);
        llm_model_free(m);
        int first = -1;
        for (int k = 0; k < n_gen && first < 0; k++)
            if (got[k] != want[k]) first = k;
        CHECK_MSG(first < 0, "%s, %s: token %d is %d, the CPU's eager one %d", what, cfg_name(&g_cfgs[i]), first,
                  first >= 0 ? got[first] : 0, first >= 0 ? want[first] : 0);
        CHECK_MSG(rec == 1, "%s, %s: %d recordings (want one for the whole run)", what, cfg_name(&g_cfgs[i]), rec);
        CHECK_MSG(runs > 0, "%s, %s: no replayed op ran on test:0", what, cfg_name(&g_cfgs[i]));
        /* with capture, the runs of ops on test:0 between the CPU's are launched whole */
        CHECK_MSG(g_cfgs[i].capture ? launches >= n_gen - 2 : launches == 0, "%s, %s: %d captured launches", what,
                  cfg_name(&g_cfgs[i]), launches);
    }
    test_backend_uninstall();
    set_replay(true);
}

static void test_tiny_model(void)
{
    static const int32_t prompt[] = {1, 10, 27, 33, 48, 71};
    compare("tiny", tiny_model, prompt, 6, N_TINY);
}

static void test_mini_a_f16(void)
{
    const char *dir = th_refdata();
    if (!dir) return th_skip("../shared/refdata is absent");
    static const char *prompts[] = {"Once upon a time", "The capital of France is"};
    for (int p = 0; p < 2; p++) {
        llm_model *m = mini_model();
        if (!m) return;
        int32_t ids[64];
        int n = 0;
        CHECK_OK(llm_tokenize(m->tok, prompts[p], strlen(prompts[p]), true, false, ids, 64, &n));
        llm_model_free(m);
        compare(prompts[p], mini_model, ids, n, N_MINI);
    }
}

/* A device that refuses a replayed op (out of memory, an unsupported case; the device
 * itself fine) makes the decoder record the step again, and the tokens stay the CPU's:
 * refused once, the new recording runs the op on test:0 again; refused twice, the
 * recording's eager attempt is refused too and the op finishes on the CPU. */
static void test_refused_replay(void)
{
    static const int32_t prompt[] = {1, 10, 27, 33, 48, 71};
    static const run_cfg cpu = {0}, dev = {true, false, false};
    static const ct_status errs[] = {CT_ERR_DEVICE_OOM, CT_ERR_UNSUPPORTED};
    enum { N = 16 };
    int32_t want[N], got[N];
    int rec = 0, runs = 0, launches = 0;
    llm_model *m = tiny_model();
    if (!m) return;
    greedy(&cpu, m, prompt, 6, N, want, &rec, &runs, &launches);
    llm_model_free(m);
    for (int e = 0; e < 2; e++)
        for (int n = 1; n <= 2; n++) {
            if (!(m = tiny_model())) return;
            g_refuse.n = n;
            g_refuse.err = errs[e];
            greedy(&dev, m, prompt, 6, N, got, &rec, &runs, &launches);
            g_refuse.n = 0;
            llm_model_free(m);
            int first = -1;
            for (int k = 0; k < N && first < 0; k++)
                if (got[k] != want[k]) first = k;
            CHECK_MSG(first < 0, "%s refused %d times: token %d differs from the CPU's", ct_status_name(errs[e]), n,
                      first);
            CHECK_MSG(rec == 2, "%s refused %d times: %d recordings (want the first and one remake)",
                      ct_status_name(errs[e]), n, rec);
        }
    test_backend_uninstall();
    set_replay(true);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_tiny_model);
    RUN(test_mini_a_f16);
    RUN(test_refused_replay);
    test_backend_uninstall();
    return th_finish();
}
