/* A loadable module for bench/gpu/step_timeline.py: runs a model's decode steps inside a
 * process whose CUDA activity a profiler (PyTorch's, through CUPTI) records, so each kernel
 * of a replayed step gets its own start and end on the device's clock. No ncu (which
 * serializes kernels and so hides PDL's overlap) and no nsys on the GPU machine.
 * ct_bench_step_trace(model, devices, prompt, steps): loads, evaluates `prompt` tokens, then
 * `steps` single-token steps; returns 0, or 1 with the reason on stderr. The host's side of
 * the steps goes to stderr too (report_host). */
#include <stdio.h>
#include <stdlib.h>

#include "ctorch/ctorch.h"
#include "llm/generate.h"

int ct_bench_step_trace(const char *path, const char *devices, int prompt, int steps);

/* The host's side of the steps: wall time per token, and where the decoder's host time
 * went (llm_decoder_get_times): the parameters, the replay call (its residency checks, the
 * launch call, the written ranges' bookkeeping) and the logits' read, which waits for the
 * device; what is left of the wall is the session's own (the logits check). */
static void report_host(const llm_session *s, int steps, double wall)
{
    llm_decoder_times t;
    ct_step_info in;
    fprintf(stderr, "host: %.1f us of wall time per token", wall / steps * 1e6);
    if (llm_decoder_get_times(s, &t, &in) && t.tokens > 0 && in.replays > 0) {
        double n = (double)t.tokens, r = (double)in.replays;
        fprintf(stderr, " (%ld replayed): params %.1f, replay %.1f (prepare %.1f, launch %.1f, finish %.1f), "
                        "logits read %.1f us",
                t.tokens, t.params / n * 1e6, t.replay / n * 1e6, in.host_prepare_ns / r / 1e3,
                in.host_launch_ns / r / 1e3, in.host_finish_ns / r / 1e3, t.logits / n * 1e6);
    }
    fprintf(stderr, "\n");
}

int ct_bench_step_trace(const char *path, const char *devices, int prompt, int steps)
{
    if (devices && *devices) setenv("CTORCH_DEVICES", devices, 1);
    llm_model *m = NULL;
    llm_session s;
    if (llm_model_load(path, NULL, NULL, &m) != CT_OK) goto fail;
    if (llm_session_init(&s, m, prompt + steps + 8, CT_F16, NULL) != CT_OK) {
        llm_model_free(m);
        goto fail;
    }
    const int V = m->hp.n_vocab;
    int rc = 0;
    int32_t *toks = malloc(sizeof *toks * (size_t)(prompt > 0 ? prompt : 1));
    for (int i = 0; i < prompt; i++) toks[i] = 300 + (int32_t)((i * 7919u) % (unsigned)(V - 300));
    if (!toks || (prompt > 0 && llm_session_eval(&s, toks, prompt) != CT_OK)) rc = 1;
    double t0 = llm_now();
    for (int i = 0; i < steps && !rc; i++) {
        int32_t t = 300 + (int32_t)((i * 104729u) % (unsigned)(V - 300));
        if (llm_session_eval(&s, &t, 1) != CT_OK) rc = 1;
    }
    report_host(&s, steps, llm_now() - t0);
    free(toks);
    if (rc) fprintf(stderr, "step trace: %s\n", ct_last_error());
    llm_session_free(&s);
    llm_model_free(m);
    return rc;
fail:
    fprintf(stderr, "step trace: %s\n", ct_last_error());
    return 1;
}
