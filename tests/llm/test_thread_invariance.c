/* Logits do not depend on the thread count. The mini-a files of
 * ../shared/refdata (skipped when absent) are run with 1, 2 and 3 CPU threads
 * over a 300-token prompt (one batch: the prefill kernels) and 24 decode steps
 * through the KV cache (the decode kernels, attention over >= 256 keys, where
 * the CPU backend may split the keys into segments); every logit must be
 * bit-identical to the single-thread run, since a sampler at a fixed seed turns
 * the smallest difference into different text sooner or later. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/generate.h"

#define N_PROMPT 300
#define N_DECODE 24
#define MAX_THREADS 3

/* Logits after the prompt and after each decoded token, [(1 + N_DECODE) * V]. */
static float *run_logits(llm_model *m, const int32_t *prompt, int threads)
{
    const int V = m->hp.n_vocab;
    ct_set_num_threads(threads);
    float *all = malloc(sizeof(float) * (size_t)V * (1 + N_DECODE));
    llm_session s;
    if (!all || llm_session_init(&s, m, 512, CT_F16, NULL) != CT_OK) {
        CHECK_MSG(0, "session: %s", ct_last_error());
        free(all);
        return NULL;
    }
    CHECK_OK(llm_session_eval(&s, prompt, N_PROMPT));
    memcpy(all, s.logits, sizeof(float) * (size_t)V);
    /* Fixed decode inputs (not argmax) so every thread count feeds the same tokens. */
    for (int k = 0; k < N_DECODE; k++) {
        int32_t id = prompt[(k * 37) % N_PROMPT];
        CHECK_OK(llm_session_eval(&s, &id, 1));
        memcpy(all + (size_t)V * (1 + k), s.logits, sizeof(float) * (size_t)V);
    }
    llm_session_free(&s);
    return all;
}

static void check_file(const char *dir, const char *quant)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/mini-a/mini-a-%s.gguf", dir, quant);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) return;
    const int V = m->hp.n_vocab;
    int32_t prompt[N_PROMPT];
    th_rng r = {2024};
    for (int i = 0; i < N_PROMPT; i++) prompt[i] = 3 + (int32_t)th_uniform(&r, 0, V - 3);
    float *ref = run_logits(m, prompt, 1);
    for (int t = 2; ref && t <= MAX_THREADS; t++) {
        CHECK_MSG(ct_get_num_threads() <= t, "asked for %d threads, got %d", t, ct_get_num_threads());
        float *got = run_logits(m, prompt, t);
        if (!got) break;
        for (int k = 0; k <= N_DECODE; k++) {
            const float *a = ref + (size_t)V * k, *b = got + (size_t)V * k;
            if (memcmp(a, b, sizeof(float) * (size_t)V) == 0) continue;
            int j = 0;
            while (a[j] == b[j]) j++;
            CHECK_MSG(0, "%s, %d threads: %s %d differs from 1 thread first at logit %d (%.9g vs %.9g)", quant, t,
                      k ? "decode step" : "prompt", k, j, (double)b[j], (double)a[j]);
            break;
        }
        free(got);
    }
    free(ref);
    llm_model_free(m);
}

static void test_thread_invariance(void)
{
    const char *dir = th_refdata();
    if (!dir) {
        th_skip("../shared/refdata absent");
        return;
    }
    /* The pool is sized on first use and never grows: ask for the most first. */
    ct_set_num_threads(MAX_THREADS);
    CHECK_MSG(ct_get_num_threads() == MAX_THREADS, "the pool has %d threads, wanted %d", ct_get_num_threads(),
              MAX_THREADS);
    check_file(dir, "f16");
    check_file(dir, "q4_k_m");
}

int main(void)
{
    RUN(test_thread_invariance);
    return th_finish();
}
