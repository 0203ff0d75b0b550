/* ctorch-bench-decode-parts: where one decode token's time goes beside the layers.
 * Loads a model, then times (median of -r repeats of -n steps, per token, in µs):
 *   step    one llm_session_eval of a single token (forward, logits to the host,
 *           the non-finite check) - what `ctorch bench` tg measures
 *   output  the output projection alone (ct_linear of the final hidden state by
 *           the output / tied embedding matrix), with its read bandwidth
 *   check   the session's pass over the logits looking for non-finite values
 *           (llm_any_nonfinite)
 *   greedy  llm_sampler_sample at temperature 0
 *   sample  llm_sampler_sample with the default chain (temp 0.8, top-k 40,
 *           top-p 0.95, min-p 0.05)
 * Usage: ctorch-bench-decode-parts -m MODEL [-n 32] [-r 5] [-t THREADS] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctorch/ctorch.h"
#include "llm/generate.h"

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#define MAXR 64

int main(int argc, char **argv)
{
    const char *path = NULL;
    int n = 32, reps = 5, threads = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-t") && i + 1 < argc) threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s -m MODEL [-n 32] [-r 5] [-t THREADS]\n", argv[0]);
            return 2;
        }
    }
    if (!path || n < 1 || reps < 1 || reps > MAXR) {
        fprintf(stderr, "usage: %s -m MODEL [-n 32] [-r 5 (<= %d)] [-t THREADS]\n", argv[0], MAXR);
        return 2;
    }
    if (threads > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", threads);
        setenv("CTORCH_THREADS", v, 1);
    }
    llm_model *m = NULL;
    llm_session s;
    if (llm_model_load(path, NULL, NULL, &m) != CT_OK || llm_session_init(&s, m, 512, CT_F16, NULL) != CT_OK) {
        fprintf(stderr, "%s\n", ct_last_error());
        return 1;
    }
    const int V = m->hp.n_vocab;
    int32_t tok = 2;
    if (llm_session_eval(&s, &tok, 1) != CT_OK) {
        fprintf(stderr, "%s\n", ct_last_error());
        return 1;
    }
    /* a hidden state for the output projection alone (its values do not matter) */
    int64_t hshape[2] = {1, m->hp.n_embd};
    ct_tensor *h = NULL;
    ct_randn(2, hshape, CT_F32, 7, &h);
    llm_sampler_params gp, dp;
    llm_sampler_params_default(&dp);
    gp = dp;
    gp.temperature = 0;
    llm_sampler *greedy = NULL, *deflt = NULL;
    llm_sampler_new(&gp, &greedy);
    llm_sampler_new(&dp, &deflt);
    double t_step[MAXR], t_out[MAXR], t_chk[MAXR], t_gr[MAXR], t_smp[MAXR];
    volatile int sink = 0;
    for (int r = 0; r < reps; r++) {
        llm_kv_cache_clear(&s.kv);
        double t0 = llm_now();
        for (int i = 0; i < n; i++) {
            int32_t t = 300 + (int32_t)((i * 7919u) % (unsigned)(V - 300));
            if (llm_session_eval(&s, &t, 1) != CT_OK) {
                fprintf(stderr, "%s\n", ct_last_error());
                return 1;
            }
        }
        t_step[r] = (llm_now() - t0) / n;
        t0 = llm_now();
        for (int i = 0; i < n; i++) {
            ct_tensor *lg = NULL;
            if (ct_linear(h, m->output, NULL, &lg) != CT_OK) {
                fprintf(stderr, "%s\n", ct_last_error());
                return 1;
            }
            ct_tensor_free(lg);
        }
        t_out[r] = (llm_now() - t0) / n;
        t0 = llm_now();
        for (int i = 0; i < n; i++) sink += llm_any_nonfinite(s.logits, V); /* the session's own check */
        t_chk[r] = (llm_now() - t0) / n;
        t0 = llm_now();
        for (int i = 0; i < n; i++) sink += llm_sampler_sample(greedy, s.logits, V, s.hist, s.kv.n_past);
        t_gr[r] = (llm_now() - t0) / n;
        t0 = llm_now();
        for (int i = 0; i < n; i++) sink += llm_sampler_sample(deflt, s.logits, V, s.hist, s.kv.n_past);
        t_smp[r] = (llm_now() - t0) / n;
    }
    double out_bytes = (double)ct_tensor_nbytes(m->output);
    double step = median(t_step, reps), out = median(t_out, reps);
    printf("model %s, vocab %d, output %s [%lld, %lld] %.1f MB, %d steps x %d repeats (medians, per token)\n", m->name, V,
           ct_dtype_name(ct_tensor_dtype(m->output)), (long long)ct_tensor_shape(m->output)[0],
           (long long)ct_tensor_shape(m->output)[1], out_bytes / 1e6, n, reps);
    printf("step (eval of one token)  %9.1f us  %6.1f tokens/s\n", step * 1e6, 1.0 / step);
    printf("output projection         %9.1f us  %6.1f GB/s\n", out * 1e6, out_bytes / out / 1e9);
    printf("non-finite check          %9.1f us\n", median(t_chk, reps) * 1e6);
    printf("sampler, greedy           %9.1f us\n", median(t_gr, reps) * 1e6);
    printf("sampler, default chain    %9.1f us\n", median(t_smp, reps) * 1e6);
    llm_sampler_free(greedy);
    llm_sampler_free(deflt);
    ct_tensor_free(h);
    llm_session_free(&s);
    llm_model_free(m);
    return sink == -1;
}
