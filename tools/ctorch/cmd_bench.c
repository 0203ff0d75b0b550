/* ctorch bench -m MODEL [-p 512] [-n 128] [-r 3] [-t THREADS] [-d DEVICES] [-o md|json]
 * Prompt processing (one batch of -p tokens) and generation (-n tokens one at
 * a time) in tokens/s, mean and standard deviation over -r runs after one
 * warm-up, each on an empty KV cache: the same tests as llama-bench's pp/tg,
 * with its JSON field names, so results sit side by side. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llm/generate.h"
#include "llm_cli.h"

typedef struct bench_result {
    const char *test; /* "pp" or "tg" */
    int n_prompt, n_gen, reps;
    double samples_ts[64], samples_ns[64];
    double avg_ts, sd_ts, avg_ns, sd_ns;
} bench_result;

/* Deterministic ordinary token ids (skipping the low ids where control/byte tokens live). */
static void fill_tokens(int32_t *t, int n, int n_vocab)
{
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int lo = n_vocab > 1000 ? 300 : 0;
    for (int i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t[i] = lo + (int32_t)(x % (uint64_t)(n_vocab - lo));
    }
}

/* Generation's tokens one at a time, each one's logits read back and checked. Where the
 * decode step runs on a device, pipelined as a generation is (llm_session_submit): the
 * next token's step is queued before the current one is waited for. */
static ct_status decode_tokens(llm_session *s, const int32_t *toks, int n_gen)
{
    ct_status st = CT_OK;
    int32_t choice;
    for (int i = 0; i < n_gen && st == CT_OK; i++) {
        if (!llm_session_can_pipeline(s)) {
            st = llm_session_eval(s, &toks[i % 64], 1);
            continue;
        }
        st = llm_session_submit(s, toks[i % 64]);
        if (st == CT_OK && llm_session_in_flight(s) == 2) st = llm_session_collect(s, &choice);
    }
    while (st == CT_OK && llm_session_in_flight(s)) st = llm_session_collect(s, &choice);
    return st;
}

/* One timed run; returns seconds or < 0 on error. */
static double run_once(llm_session *s, const int32_t *toks, int n_prompt, int n_gen)
{
    llm_session_reset(s);
    double t0 = llm_now();
    if (n_prompt > 0 && llm_session_eval(s, toks, n_prompt) != CT_OK) return -1;
    if (decode_tokens(s, toks, n_gen) != CT_OK) return -1;
    return llm_now() - t0;
}

/* The decoder's host-side timers, read before and after the timed tg runs. */
typedef struct host_snap {
    bool ok;
    llm_decoder_times t;
    ct_step_info in;
} host_snap;

static host_snap host_snapshot(const llm_session *s)
{
    host_snap h = {0};
    h.ok = llm_decoder_get_times(s, &h.t, &h.in);
    return h;
}

/* Where a generated token's wall time went on the host, so that the gap between the
 * device's steps is visible: writing the step's parameters, the replay call (residency
 * checks, the launch), the logits' read (which waits for the device to finish the step)
 * the session's non-finite check of them and the rest (the loop). The parts are means
 * over the replayed tokens, the wall over all of them. */
static void report_host(const host_snap *a, const host_snap *b, double wall_s, long tokens)
{
    long n = b->t.tokens - a->t.tokens;
    uint64_t r = b->in.replays - a->in.replays;
    if (!a->ok || !b->ok || n <= 0 || r == 0) return;
    double us = 1e6 / (double)n, params = (b->t.params - a->t.params) * us, replay = (b->t.replay - a->t.replay) * us,
           logits = (b->t.logits - a->t.logits) * us, check = (b->t.check - a->t.check) * us,
           wall = wall_s * 1e6 / (double)tokens;
    double rn = 1e3 * (double)r;
    cli_log(CT_LOG_INFO,
            "bench tg: host time a token %.1f us: parameters %.1f, replay call %.1f (prepare %.1f, launch %.1f, "
            "finish %.1f), logits read %.1f (waits for the device), their non-finite check %.1f, the rest %.1f\n",
            wall, params, replay, (double)(b->in.host_prepare_ns - a->in.host_prepare_ns) / rn,
            (double)(b->in.host_launch_ns - a->in.host_launch_ns) / rn,
            (double)(b->in.host_finish_ns - a->in.host_finish_ns) / rn, logits, check,
            wall - params - replay - logits - check);
}

static void stats(const double *x, int n, double *avg, double *sd)
{
    double s = 0, q = 0;
    for (int i = 0; i < n; i++) s += x[i];
    *avg = n ? s / n : 0;
    for (int i = 0; i < n; i++) q += (x[i] - *avg) * (x[i] - *avg);
    *sd = n > 1 ? sqrt(q / (n - 1)) : 0;
}

static const char *ftype_name(int ft)
{
    static const char *names[] = {
        [0] = "all F32", [1] = "F16", [2] = "Q4_0", [3] = "Q4_1", [7] = "Q8_0", [8] = "Q5_0", [9] = "Q5_1",
        [10] = "Q2_K - Medium", [11] = "Q3_K - Small", [12] = "Q3_K - Medium", [13] = "Q3_K - Large",
        [14] = "Q4_K - Small", [15] = "Q4_K - Medium", [16] = "Q5_K - Small", [17] = "Q5_K - Medium",
        [18] = "Q6_K", [32] = "BF16"};
    if (ft >= 0 && ft < (int)(sizeof names / sizeof names[0]) && names[ft]) return names[ft];
    return "?";
}

static uint64_t count_params(const llm_model *m)
{
    uint64_t n = (uint64_t)ct_tensor_numel(m->tok_embd) + (uint64_t)ct_tensor_numel(m->output_norm);
    if (!m->tied_output) n += (uint64_t)ct_tensor_numel(m->output);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const llm_layer *L = &m->layers[il];
        const ct_tensor *ts[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->q_norm, L->k_norm,
                                 L->post_attn_norm, L->ffn_norm, L->w_gate, L->w_up, L->w_down, L->post_ffn_norm};
        for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++)
            if (ts[i]) n += (uint64_t)ct_tensor_numel(ts[i]);
    }
    return n;
}

int cmd_bench(int argc, char **argv)
{
    llm_cli_opts o = {0};
    int n_prompt = 512, n_gen = 128, reps = 3;
    const char *format = "md";
    const cli_opt opts[] = {
        LLM_CLI_OPTS(&o),
        {"-p|--n-prompt", "N", CLI_INT, &n_prompt, 0, CLI_NOMAX, NULL, "prompt tokens of the pp test (default 512; 0 skips it)"},
        {"-n|--n-gen", "N", CLI_INT, &n_gen, 0, CLI_NOMAX, NULL, "generated tokens of the tg test (default 128; 0 skips it)"},
        {"-r|--repetitions", "N", CLI_INT, &reps, 1, 64, NULL, "timed runs after one warm-up (default 3)"},
        {"-o|--output", "md|json", CLI_CHOICE, &format, 0, 0, "md|json", "a markdown table (default) or llama-bench's JSON"},
    };
    const cli_spec spec = {"bench", "bench -m MODEL.gguf [options]", NULL, opts, CLI_N(opts), 0};
    int prc = cli_parse(&spec, argc, argv, NULL, NULL);
    if (prc < 0) prc = llm_cli_check("bench", &o);
    if (prc >= 0) return prc;
    bool json = !strcmp(format, "json");

    llm_model *m = llm_cli_load("bench", &o, false);
    if (!m) return 1;
    int rc = 1;
    int need = n_prompt + n_gen > 0 ? (n_prompt > n_gen ? n_prompt : n_gen) : 1;
    int cap = m->hp.n_ctx_train > 0 ? m->hp.n_ctx_train : need;
    llm_session s = {0};
    int32_t *toks = malloc(sizeof(int32_t) * (size_t)(need > 64 ? need : 64));
    if (need > cap) {
        fprintf(stderr, "ctorch bench: error: context too long: %d tokens, the model's context is %d\n", need, cap);
        goto out;
    }
    if (!toks) {
        fprintf(stderr, "ctorch bench: error: out of memory\n");
        goto out;
    }
    fill_tokens(toks, need > 64 ? need : 64, m->hp.n_vocab);
    if (llm_session_init(&s, m, need, o.kv_f32 ? CT_F32 : CT_F16, NULL) != CT_OK) {
        rc = llm_cli_fail("bench");
        goto out;
    }
    ct_device_info head = {0};
    ct_chain_get(0, &head);
    int threads = ct_get_num_threads();

    bench_result res[2];
    int nres = 0;
    for (int t = 0; t < 2; t++) {
        int np = t == 0 ? n_prompt : 0, ng = t == 1 ? n_gen : 0;
        if (np + ng == 0) continue;
        bench_result *r = &res[nres++];
        *r = (bench_result){.test = t == 0 ? "pp" : "tg", .n_prompt = np, .n_gen = ng, .reps = reps};
        cli_log(CT_LOG_INFO, "bench %s%d: warm-up", r->test, np + ng);
        if (run_once(&s, toks, np, ng) < 0) {
            cli_log(CT_LOG_INFO, "\n");
            rc = llm_cli_fail("bench");
            goto out;
        }
        host_snap h0 = host_snapshot(&s);
        double wall = 0;
        for (int k = 0; k < reps; k++) {
            double sec = run_once(&s, toks, np, ng);
            if (sec < 0) {
                cli_log(CT_LOG_INFO, "\n");
                rc = llm_cli_fail("bench");
                goto out;
            }
            r->samples_ns[k] = sec * 1e9;
            r->samples_ts[k] = (np + ng) / sec;
            wall += sec;
            cli_log(CT_LOG_INFO, ", %.2f t/s", r->samples_ts[k]);
        }
        cli_log(CT_LOG_INFO, "\n");
        if (np == 0) {
            host_snap h1 = host_snapshot(&s);
            report_host(&h0, &h1, wall, (long)reps * ng);
        }
        stats(r->samples_ts, reps, &r->avg_ts, &r->sd_ts);
        stats(r->samples_ns, reps, &r->avg_ns, &r->sd_ns);
    }

    double mib = (double)m->weight_bytes / 1048576.0, bparams = (double)count_params(m) / 1e9;
    char type[96];
    snprintf(type, sizeof type, "%s %s", m->arch->name, ftype_name(m->file_type));
    if (json) {
        printf("[\n");
        for (int i = 0; i < nres; i++) {
            bench_result *r = &res[i];
            printf("  {\n    \"model_filename\": ");
            cli_json_string(stdout, o.model);
            printf(",\n    \"model_type\": \"%s\",\n    \"model_size\": %llu,\n"
                   "    \"model_n_params\": %llu,\n    \"n_batch\": %d,\n    \"n_threads\": %d,\n"
                   "    \"type_k\": \"%s\",\n    \"type_v\": \"%s\",\n    \"n_prompt\": %d,\n    \"n_gen\": %d,\n"
                   "    \"device\": \"%s\",\n    \"avg_ns\": %.0f,\n    \"stddev_ns\": %.0f,\n"
                   "    \"avg_ts\": %.6f,\n    \"stddev_ts\": %.6f,\n    \"samples_ns\": [",
                   type, (unsigned long long)m->weight_bytes, (unsigned long long)count_params(m),
                   r->n_prompt > 0 ? r->n_prompt : 1, threads, o.kv_f32 ? "f32" : "f16", o.kv_f32 ? "f32" : "f16",
                   r->n_prompt, r->n_gen, head.name, r->avg_ns, r->sd_ns, r->avg_ts, r->sd_ts);
            for (int k = 0; k < r->reps; k++) printf("%s%.0f", k ? ", " : " ", r->samples_ns[k]);
            printf(" ],\n    \"samples_ts\": [");
            for (int k = 0; k < r->reps; k++) printf("%s%.6f", k ? ", " : " ", r->samples_ts[k]);
            printf(" ]\n  }%s\n", i + 1 < nres ? "," : "");
        }
        printf("]\n");
    } else {
        printf("| model | size | params | device | threads | test | t/s |\n");
        printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
        for (int i = 0; i < nres; i++) {
            bench_result *r = &res[i];
            printf("| %s | %.2f MiB | %.2f B | %s | %d | %s%d | %.2f ± %.2f |\n", type, mib, bparams, head.name,
                   threads, r->test, r->n_prompt + r->n_gen, r->avg_ts, r->sd_ts);
        }
    }
    rc = 0;
out:
    llm_session_free(&s);
    free(toks);
    llm_model_free(m);
    return rc;
}
