/* Pipelined decoding (llm_session_submit / llm_session_collect, and the generation loop
 * that runs on them) against decoding one token at a time. The whole tiny f32 llama
 * written here (weights, KV cache, embedding and output) lives on a simulated
 * asynchronous device that captures the step, so the step ends by writing its argmax on
 * the device and the next step is queued before the current one is read back. The
 * references are the CPU decoding eagerly (the tokens) and the same device with
 * CTORCH_PIPELINE=0 (the tokens, the logits bit for bit, and the launches: a pipelined
 * run may only add the launches of dropped guesses). Greedy decoding with a strong
 * repetition penalty makes the device's argmax a wrong guess often, so dropping guesses
 * is exercised; a device that fails late while steps are in flight must leave the same
 * tokens, recovered on the CPU. Needs no ../shared, but for the real devices' check at the
 * end (mini-a on OpenCL or CUDA when the chain has them). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "test_backend.h"
#include "tiny_gguf.h"

enum { V = 96, E = 32, L = 2, F = 64, H = 2, HKV = 1, CTX = 64 };

#define N_GEN 40

static const int32_t g_prompt[] = {1, 10, 27, 33, 48, 71};
#define NP (int)(sizeof g_prompt / sizeof g_prompt[0])

static llm_model *tiny_model(void)
{
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    return th_tiny_llama("pipeline.gguf", "pipeline", 777, &shape, V, 16);
}

static void set_env(const char *name, bool on)
{
    setenv(name, on ? "1" : "0", 1);
    CHECK_OK(ct_exec_reinit());
}

/* The device run: test:0 (asynchronous, capturing) heads the chain and holds everything. */
static void use_device(bool pipeline)
{
    CHECK_OK(test_backend_install_async(1, "*"));
    test_backend_set_capture(true);
    set_env("CTORCH_REPLAY", true);
    set_env("CTORCH_PIPELINE", pipeline);
    ct_exec_set_small_bytes(0); /* placement alone decides where an op runs */
}

static void use_cpu(void)
{
    test_backend_uninstall();
    set_env("CTORCH_REPLAY", false);
}

static void place_all(const llm_model *m, const llm_session *s)
{
    for (int l = 0; l < m->hp.n_layer; l++) {
        const llm_layer *ly = &m->layers[l];
        const ct_tensor *ws[] = {ly->attn_norm, ly->wq, ly->wk, ly->wv, ly->wo, ly->ffn_norm, ly->w_gate, ly->w_up,
                                 ly->w_down, s->kv.k[l], s->kv.v[l]};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) CHECK_OK(ct_tensor_place(ws[i], "test:0"));
    }
    CHECK_OK(ct_tensor_place(m->tok_embd, "test:0"));
    CHECK_OK(ct_tensor_place(m->output, "test:0"));
    CHECK_OK(ct_tensor_place(m->output_norm, "test:0"));
}

static void open_session(llm_session *s, const llm_model *m, bool device, float penalty)
{
    llm_sampler_params sp;
    llm_sampler_params_default(&sp);
    sp.temperature = 0;
    sp.repeat_penalty = penalty;
    CHECK_OK(llm_session_init(s, m, CTX, CT_F32, &sp)); /* f32: the simulated device reads the cache */
    if (device) place_all(m, s);
    CHECK_OK(llm_session_eval(s, g_prompt, NP));
}

typedef struct gen_result {
    int32_t toks[N_GEN]; /* the evaluated generated tokens, s->hist after the prompt */
    int n;
    int launches;        /* captured step launches on test:0 */
    bool pipelined;      /* the session could pipeline once the step was recorded */
} gen_result;

/* Generates N_GEN greedy tokens; `device` runs on test:0, else on the CPU eagerly. A
 * late fault (fail_after > 0) breaks test:0 that many ops after the step is recorded. */
static void generate(bool device, bool pipeline, float penalty, int fail_after, gen_result *r)
{
    memset(r, 0, sizeof *r);
    if (device) use_device(pipeline);
    else use_cpu();
    llm_model *m = tiny_model();
    if (!m) return;
    llm_session s;
    open_session(&s, m, device, penalty);
    s.ignore_eog = true; /* the full N_GEN tokens; EOS masked on the host: one more kind of wrong guess */
    llm_gen_stats st;
    if (fail_after) {
        CHECK_OK(llm_session_generate(&s, 2, NULL, NULL, NULL, &st)); /* records the step */
        test_backend_fail_late(0, fail_after);
        CHECK_OK(llm_session_generate(&s, N_GEN - 1, NULL, NULL, NULL, &st));
    } else {
        CHECK_OK(llm_session_generate(&s, N_GEN, NULL, NULL, NULL, &st));
    }
    r->pipelined = llm_session_can_pipeline(&s);
    r->n = s.kv.n_past - NP;
    CHECK(r->n > 0 && r->n <= N_GEN);
    memcpy(r->toks, s.hist + NP, (size_t)r->n * sizeof *r->toks);
    CHECK(llm_session_in_flight(&s) == 0);
    r->launches = device ? test_backend_launches(0) : 0;
    llm_session_free(&s);
    llm_model_free(m);
}

static void check_same(const char *what, const gen_result *a, const gen_result *b)
{
    CHECK_MSG(a->n == b->n, "%s: %d tokens against %d", what, a->n, b->n);
    int first = -1;
    for (int k = 0; k < a->n && k < b->n && first < 0; k++)
        if (a->toks[k] != b->toks[k]) first = k;
    CHECK_MSG(first < 0, "%s: token %d is %d against %d", what, first, first >= 0 ? a->toks[first] : 0,
              first >= 0 ? b->toks[first] : 0);
}

/* The same tokens as the CPU's and as the device one token at a time, at penalty 1 (the
 * guesses hold but where EOS is masked) and at 1.8 (the penalty overrides the argmax
 * often, so many guesses are dropped, and each costs one launch more). */
static void test_generate_matches(void)
{
    static const float penalties[] = {1.0f, 1.8f};
    for (int i = 0; i < 2; i++) {
        gen_result cpu, plain, piped;
        char what[64];
        generate(false, false, penalties[i], 0, &cpu);
        generate(true, false, penalties[i], 0, &plain);
        generate(true, true, penalties[i], 0, &piped);
        snprintf(what, sizeof what, "penalty %.1f, pipelined vs CPU", (double)penalties[i]);
        check_same(what, &piped, &cpu);
        snprintf(what, sizeof what, "penalty %.1f, unpipelined vs CPU", (double)penalties[i]);
        check_same(what, &plain, &cpu);
        CHECK_MSG(piped.pipelined && !plain.pipelined, "penalty %.1f: pipelining on %d / off %d",
                  (double)penalties[i], piped.pipelined, plain.pipelined);
        int extra = piped.launches - plain.launches;
        CHECK_MSG(extra >= 0, "penalty %.1f: %d launches pipelined, %d not", (double)penalties[i], piped.launches,
                  plain.launches);
        if (i == 1) CHECK_MSG(extra >= 3, "penalty 1.8: only %d guesses dropped: the drop path is not tested", extra);
        /* without a penalty the device's argmax is the sampler's choice but where EOS is masked */
        if (i == 0) CHECK_MSG(extra * 4 <= plain.launches, "penalty 1.0: %d launches for dropped guesses", extra);
        fprintf(stderr, "  penalty %.1f: %d launches pipelined, %d not (%d dropped guesses)\n", (double)penalties[i],
                piped.launches, plain.launches, extra);
    }
}

/* Given tokens, submitted two deep as `ctorch bench` does: every token's logits equal,
 * bit for bit, those of evaluating it alone, and the device's choice is their argmax. */
static void test_submit_collect(void)
{
    enum { N = 12 };
    float want[N][V];
    int32_t toks[N];
    for (int k = 0; k < N; k++) toks[k] = (int32_t)(3 + 7 * k) % V;
    for (int pass = 0; pass < 2; pass++) {
        use_device(pass == 1);
        llm_model *m = tiny_model();
        if (!m) return;
        llm_session s;
        open_session(&s, m, true, 1.0f);
        CHECK_OK(llm_session_eval(&s, &toks[0], 1)); /* records the step */
        CHECK(llm_session_can_pipeline(&s) == (pass == 1));
        if (pass == 0) {
            for (int k = 1; k < N; k++) {
                CHECK_OK(llm_session_eval(&s, &toks[k], 1));
                memcpy(want[k], s.logits, sizeof want[k]);
            }
        } else {
            int got = 1;
            int32_t choice = -1;
            for (int k = 1; k < N || llm_session_in_flight(&s); k++) {
                if (k < N) CHECK_OK(llm_session_submit(&s, toks[k]));
                if (llm_session_in_flight(&s) < 2 && k < N) continue;
                CHECK_OK(llm_session_collect(&s, &choice));
                CHECK_MSG(memcmp(s.logits, want[got], sizeof want[got]) == 0, "token %d: logits differ", got);
                CHECK_MSG(choice == th_argmax_f32(s.logits, V), "token %d: the device chose %d, the argmax is %d", got,
                          choice, th_argmax_f32(s.logits, V));
                CHECK(s.hist[NP + got] == toks[got]);
                got++;
            }
            CHECK_MSG(got == N, "collected %d of %d", got, N);
            CHECK(s.kv.n_past == NP + N);
        }
        llm_session_free(&s);
        llm_model_free(m);
    }
}

/* Misuse is refused with a message, and leaves nothing in flight. */
static void test_misuse(void)
{
    use_device(true);
    llm_model *m = tiny_model();
    if (!m) return;
    llm_session s;
    open_session(&s, m, true, 1.0f);
    int32_t choice, tok = 5;
    CHECK(llm_session_collect(&s, &choice) == CT_ERR_INVALID_ARG); /* nothing in flight */
    CHECK(llm_session_submit(&s, -1) == CT_ERR_INVALID_ARG);       /* no step chose a token yet */
    CHECK(llm_session_submit(&s, V) == CT_ERR_RANGE);
    CHECK_OK(llm_session_submit(&s, tok)); /* records */
    CHECK_OK(llm_session_submit(&s, -1));
    CHECK(llm_session_submit(&s, tok) == CT_ERR_INVALID_ARG); /* a third in flight */
    CHECK(llm_session_in_flight(&s) == 0);                    /* an error drops what was in flight */
    CHECK(s.kv.n_past == NP);
    int32_t neg = -1;
    CHECK(llm_session_eval(&s, &neg, 1) == CT_ERR_RANGE); /* not "the device's choice" */
    CHECK_OK(llm_session_submit(&s, tok));
    CHECK(llm_session_eval(&s, &tok, 1) == CT_ERR_INVALID_ARG);
    CHECK(strstr(ct_last_error(), "in flight") != NULL);
    CHECK_OK(llm_session_collect(&s, &choice));
    CHECK(choice >= 0 && choice < V);
    CHECK_OK(llm_session_submit(&s, -1)); /* the collected step's choice, still on the device */
    CHECK_OK(llm_session_collect(&s, &choice));
    CHECK(s.hist[NP + 1] >= 0 && s.kv.n_past == NP + 2);
    llm_session_drain(&s);
    llm_session_free(&s);
    llm_model_free(m);
}

/* test:0 fails late while pipelined steps are in flight: the generation recovers on the
 * CPU, and its tokens are the CPU's. */
static void test_late_fault(void)
{
    gen_result cpu, piped;
    generate(false, false, 1.0f, 0, &cpu);
    for (int after = 5; after <= 45; after += 20) {
        th_log_capture(true);
        generate(true, true, 1.0f, after, &piped);
        th_log_capture(false);
        char what[64];
        snprintf(what, sizeof what, "late fault after %d ops", after);
        check_same(what, &piped, &cpu);
        CHECK_MSG(th_count(th_log(), "device test:0 lost: recovered on cpu") == 1, "%s: logged\n%s", what, th_log());
    }
}

static char g_devices[256]; /* CTORCH_DEVICES as the test started */

enum { N_REAL = 24 };

/* mini-a loaded and placed on dev, with replay on and pipelining as asked. */
static llm_model *placed_model(const char *path, const char *dev, bool pipeline)
{
    set_env("CTORCH_REPLAY", true);
    set_env("CTORCH_PIPELINE", pipeline);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (m) CHECK_OK(llm_model_place(m, dev, -1, NULL, NULL, NULL));
    return m;
}

/* The N_REAL - 1 evaluated greedy tokens of mini-a placed on dev after a fixed prompt. */
static void real_tokens(const char *path, const char *dev, bool pipeline, float penalty, int32_t *out)
{
    llm_model *m = placed_model(path, dev, pipeline);
    if (!m) return;
    llm_sampler_params sp;
    llm_sampler_params_default(&sp);
    sp.temperature = 0;
    sp.repeat_penalty = penalty;
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 128, CT_F16, &sp));
    s.ignore_eog = true;
    int32_t ids[32];
    int n = 0;
    CHECK_OK(llm_tokenize(m->tok, "Once upon a time", 16, true, false, ids, 32, &n));
    CHECK_OK(llm_session_eval(&s, ids, n));
    llm_gen_stats st;
    CHECK_OK(llm_session_generate(&s, N_REAL, NULL, NULL, NULL, &st));
    CHECK_MSG(llm_session_can_pipeline(&s) == pipeline, "%s: pipelining %d with CTORCH_PIPELINE=%d", dev,
              llm_session_can_pipeline(&s), pipeline);
    CHECK(s.kv.n_past == n + N_REAL - 1);
    memcpy(out, s.hist + n, (N_REAL - 1) * sizeof *out);
    llm_session_free(&s);
    llm_model_free(m);
}

/* The logits after a prompt toks[0..5) and toks[5], toks[6], toks[7] evaluated one at a
 * time (pipelined: toks[6] with a guess queued behind it that is then dropped, and toks[7]
 * submitted instead). */
static void real_drop(const char *path, const char *dev, bool pipeline, float *out, int V_)
{
    llm_model *m = placed_model(path, dev, pipeline);
    if (!m) return;
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 128, CT_F16, NULL));
    static const int32_t toks[] = {1, 450, 7483, 310, 3444, 263, 931, 2501};
    CHECK_OK(llm_session_eval(&s, toks, 5));
    CHECK_OK(llm_session_eval(&s, &toks[5], 1)); /* records the step */
    int32_t choice;
    if (pipeline) {
        CHECK_OK(llm_session_submit(&s, toks[6]));
        CHECK_OK(llm_session_submit(&s, -1));
        CHECK_OK(llm_session_collect(&s, &choice));
        CHECK(choice == th_argmax_f32(s.logits, V_));
        llm_session_drain(&s);
        CHECK_OK(llm_session_submit(&s, toks[7]));
        CHECK_OK(llm_session_collect(&s, &choice));
    } else {
        CHECK_OK(llm_session_eval(&s, &toks[6], 1));
        CHECK_OK(llm_session_eval(&s, &toks[7], 1));
    }
    CHECK(s.kv.n_past == 8);
    memcpy(out, s.logits, (size_t)V_ * sizeof *out);
    llm_session_free(&s);
    llm_model_free(m);
}

/* A real device's backend (its argmax and copy kernels, its asynchronous readbacks):
 * mini-a Q4_K_M from ../shared/refdata placed on the device, greedy tokens pipelined
 * (CTORCH_PIPELINE=1, whatever the device's default) equal to those decoded one at a
 * time, without a penalty and with one, and the logits after a dropped guess equal to
 * those of the tokens evaluated one at a time. In CI this runs on PoCL in the
 * CTORCH_DEVICES=opencl,cpu pass; on a GPU machine on CUDA and the GPU's OpenCL. */
static void real_device(const char *kind)
{
    char dev[32], path[1024];
    const char *dir = th_refdata();
    if (!dir) return th_skip("../shared/refdata is absent");
    test_backend_uninstall();
    if (g_devices[0]) setenv("CTORCH_DEVICES", g_devices, 1); /* installing the test backend unset it */
    CHECK_OK(ct_exec_reinit());
    if (!devcheck_chain_device(kind, dev, sizeof dev)) return;
    snprintf(path, sizeof path, "%s/mini-a/mini-a-q4_k_m.gguf", dir);
    for (int pen = 0; pen < 2; pen++) {
        int32_t got[2][N_REAL] = {{0}};
        for (int p = 0; p < 2; p++) real_tokens(path, dev, p == 1, pen ? 1.5f : 1.0f, got[p]);
        int first = -1;
        for (int k = 0; k < N_REAL - 1 && first < 0; k++)
            if (got[0][k] != got[1][k]) first = k;
        CHECK_MSG(first < 0, "%s, penalty %d: token %d pipelined is %d, one at a time %d", dev, pen, first,
                  first >= 0 ? got[1][first] : 0, first >= 0 ? got[0][first] : 0);
    }
    enum { VM = 32000 }; /* mini-a's vocabulary */
    float *lg = malloc(2 * VM * sizeof *lg);
    if (!lg) return;
    real_drop(path, dev, false, lg, VM);
    real_drop(path, dev, true, lg + VM, VM);
    /* the same kernels on the same device: equal but for reductions' order (none today) */
    double e = th_nmse_f32(lg + VM, lg, VM);
    CHECK_MSG(e < 1e-12, "%s: logits after a dropped guess differ (nmse %.3g)", dev, e);
    free(lg);
    unsetenv("CTORCH_PIPELINE");
    CHECK_OK(ct_exec_reinit());
}

static void test_opencl_device(void) { real_device("opencl"); }
static void test_cuda_device(void) { real_device("cuda"); }

int main(int argc, char **argv)
{
    th_args(argc, argv);
    const char *devs = getenv("CTORCH_DEVICES");
    snprintf(g_devices, sizeof g_devices, "%s", devs ? devs : "");
    RUN(test_generate_matches);
    RUN(test_submit_collect);
    RUN(test_misuse);
    RUN(test_late_fault);
    RUN(test_opencl_device);
    RUN(test_cuda_device);
    test_backend_uninstall();
    unsetenv("CTORCH_PIPELINE");
    return th_finish();
}
