/* Decoding by replaying a recorded step (the default) against eager decoding
 * (CTORCH_REPLAY=0) on ../shared/refdata/mini-a (skipped when absent): for the F16, Q8_0
 * and Q4_K_M files and every prompt, the same 24 greedy tokens and bit-identical logits
 * at every step; a replayed decode token allocates nothing (host_alloc and malloc
 * counted); a step is remade when the executor's chain changes or the session's KV
 * cache (and with it every shape of the step) is another one. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdlib.h>
#include <string.h>

#include "alloc_count.h"
#include "core/tensor.h"
#include "exec/exec.h"
#include "harness.h"
#include "llm/generate.h"

#define N_GEN 24

static const char *g_prompts[] = {"Once upon a time", "The capital of France is", "1, 2, 3, 4,",
                                  "In a hole in the ground there lived"};
#define N_PROMPTS (int)(sizeof g_prompts / sizeof g_prompts[0])

static void set_replay(bool on)
{
    setenv("CTORCH_REPLAY", on ? "1" : "0", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(llm_replay_enabled() == on);
}

/* Greedy tokens of one prompt; the logits of every step into lg [N_GEN][V]. */
static void greedy(llm_session *s, const llm_model *m, const char *prompt, int32_t *out, float *lg)
{
    int32_t ids[128];
    int n = 0;
    CHECK_OK(llm_tokenize(m->tok, prompt, strlen(prompt), true, false, ids, 128, &n));
    llm_session_reset(s);
    CHECK_OK(llm_session_eval(s, ids, n));
    const int V = m->hp.n_vocab;
    for (int k = 0; k < N_GEN; k++) {
        memcpy(lg + (size_t)k * V, s->logits, sizeof(float) * (size_t)V);
        out[k] = th_argmax_f32(s->logits, V);
        if (k + 1 < N_GEN && llm_session_eval(s, &out[k], 1) != CT_OK) {
            CHECK_MSG(0, "decode failed: %s", ct_last_error());
            return;
        }
    }
}

static void check_file(const char *dir, const char *quant)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/mini-a/mini-a-%s.gguf", dir, quant);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) return;
    const int V = m->hp.n_vocab;
    float *la = malloc(sizeof(float) * (size_t)V * N_GEN), *lb = malloc(sizeof(float) * (size_t)V * N_GEN);
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 256, CT_F16, NULL));
    for (int i = 0; i < N_PROMPTS && la && lb; i++) {
        int32_t ga[N_GEN], gb[N_GEN];
        set_replay(false);
        greedy(&s, m, g_prompts[i], ga, la);
        set_replay(true);
        greedy(&s, m, g_prompts[i], gb, lb);
        CHECK_MSG(memcmp(ga, gb, sizeof ga) == 0, "%s prompt %d: greedy tokens differ with replay", quant, i);
        int first = -1;
        for (size_t j = 0; j < (size_t)V * N_GEN && first < 0; j++)
            if (memcmp(&la[j], &lb[j], sizeof(float)) != 0) first = (int)j;
        CHECK_MSG(first < 0, "%s prompt %d: logits differ at step %d, id %d: %.9g eager vs %.9g replayed", quant, i,
                  first / V, first % V, first >= 0 ? la[first] : 0, first >= 0 ? lb[first] : 0);
    }
    CHECK(llm_decoder_records(&s) >= 1);
    llm_session_free(&s);
    free(la);
    free(lb);
    llm_model_free(m);
}

static void test_replay_equals_eager(void)
{
    const char *dir = th_refdata();
    if (!dir) return th_skip("../shared/refdata is absent");
    check_file(dir, "f16");
    check_file(dir, "q8_0");
    check_file(dir, "q4_k_m");
    set_replay(true);
}

static llm_model *load_q8(void)
{
    const char *dir = th_refdata();
    if (!dir) return th_skip("../shared/refdata is absent"), NULL;
    char path[1024];
    snprintf(path, sizeof path, "%s/mini-a/mini-a-q8_0.gguf", dir);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    return m;
}

/* After the step is recorded, decoding a token allocates nothing: no storage (host_alloc)
 * and no malloc anywhere in the process (kernels' scratch is kept per thread). */
static void test_replay_allocates_nothing(void)
{
    llm_model *m = load_q8();
    if (!m) return;
    set_replay(true);
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 128, CT_F16, NULL));
    int32_t ids[] = {1, 450, 7483, 310, 3444};
    CHECK_OK(llm_session_eval(&s, ids, 5));
    int32_t tok = 263;
    CHECK_OK(llm_session_eval(&s, &tok, 1)); /* records */
    CHECK_OK(llm_session_eval(&s, &tok, 1)); /* sizes the kernels' scratch at a later position */
    uint64_t h0 = host_alloc_count(), a0 = ac_count();
    for (int i = 0; i < 16; i++) {
        tok = th_argmax_f32(s.logits, m->hp.n_vocab);
        CHECK_OK(llm_session_eval(&s, &tok, 1));
    }
    uint64_t dh = host_alloc_count() - h0, da = ac_count() - a0;
    CHECK_MSG(dh == 0, "%llu host allocations in 16 replayed decode tokens", (unsigned long long)dh);
    if (ac_available()) CHECK_MSG(da == 0, "%llu mallocs in 16 replayed decode tokens", (unsigned long long)da);
    else fprintf(stderr, "  (malloc not counted under a sanitizer: host_alloc only)\n");
    CHECK(llm_decoder_records(&s) == 1);

    /* the eager path allocates: the counter sees allocations when there are some */
    set_replay(false);
    h0 = host_alloc_count();
    CHECK_OK(llm_session_eval(&s, &tok, 1));
    CHECK(host_alloc_count() - h0 > 0);
    set_replay(true);
    llm_session_free(&s);
    llm_model_free(m);
}

/* A stale step is made again, and the tokens stay those of eager decoding. */
static void test_remade(void)
{
    llm_model *m = load_q8();
    if (!m) return;
    const int V = m->hp.n_vocab;
    float *la = malloc(sizeof(float) * (size_t)V * N_GEN), *lb = malloc(sizeof(float) * (size_t)V * N_GEN);
    int32_t ga[N_GEN], gb[N_GEN];
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 128, CT_F16, NULL));
    set_replay(false);
    greedy(&s, m, g_prompts[0], ga, la);
    set_replay(true); /* a re-initialization: the chain is made again, so the step is stale */
    greedy(&s, m, g_prompts[0], gb, lb);
    int r1 = llm_decoder_records(&s);
    CHECK_OK(ct_exec_set_devices("cpu")); /* the chain changes: the step is remade */
    greedy(&s, m, g_prompts[0], gb, lb);
    int r2 = llm_decoder_records(&s);
    CHECK_MSG(r2 == r1 + 1, "records %d then %d after a chain change", r1, r2);
    CHECK(memcmp(ga, gb, sizeof ga) == 0);
    greedy(&s, m, g_prompts[0], gb, lb);
    CHECK_MSG(llm_decoder_records(&s) == r2, "a valid step was remade");

    /* another cache, another context length: every shape of the step changes */
    llm_kv_cache_free(&s.kv);
    CHECK_OK(llm_kv_cache_init(&s.kv, m, 96, CT_F16));
    greedy(&s, m, g_prompts[0], gb, lb);
    CHECK_MSG(llm_decoder_records(&s) == r2 + 1, "records %d after the cache changed", llm_decoder_records(&s));
    CHECK(memcmp(ga, gb, sizeof ga) == 0);
    CHECK_OK(ct_exec_set_devices(NULL));
    llm_session_free(&s);
    free(la);
    free(lb);
    llm_model_free(m);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    /* mallocs are counted process-wide: a GPU driver's own threads (discovered even when
     * the chain is the CPU's) allocate now and then, so the machine's GPUs stay hidden */
    exec_hide_builtin_accelerators(true);
    unsetenv("CTORCH_DEVICES"); /* it could name one of them */
    /* the LLM replays its decode step on a CPU-only chain: set it, whatever CTORCH_DEVICES says */
    if (ct_exec_set_devices("cpu") != CT_OK) return 1;
    RUN(test_replay_equals_eager);
    RUN(test_replay_allocates_nothing);
    RUN(test_remade);
    return th_finish();
}
