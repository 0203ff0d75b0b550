/* ctorch perplexity -m MODEL -f TEXTFILE [-c 512]
 * The text is cut into chunks of -c tokens, each evaluated from an empty
 * cache (its first token replaced by BOS when the model adds one); the second
 * half of every chunk is scored, so each scored token has at least c/2 tokens
 * of context. This is llama.cpp's perplexity procedure, so numbers compare. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llm/generate.h"
#include "llm_cli.h"

/* -log softmax(row)[target], in double. */
static double nll(const float *row, int n, int target)
{
    double mx = row[0];
    for (int i = 1; i < n; i++)
        if (row[i] > mx) mx = row[i];
    double s = 0;
    for (int i = 0; i < n; i++) s += exp((double)row[i] - mx);
    return log(s) + mx - row[target];
}

int cmd_perplexity(int argc, char **argv)
{
    llm_cli_opts o = {.n_ctx = 512};
    const char *file = NULL;
    int max_chunks = -1;
    const cli_opt opts[] = {
        LLM_CLI_OPTS(&o),
        /* Below 3 tokens a chunk has no second half to score (the mean would be 0/0). */
        {"-c|--ctx-size", "N", CLI_INT, &o.n_ctx, 3, CLI_NOMAX, NULL, "chunk length in tokens (default 512)"},
        {"-f|--file", "FILE", CLI_STRING, &file, 0, 0, NULL, "the text (required)"},
        {"--chunks", "N", CLI_INT, &max_chunks, 1, CLI_NOMAX, NULL, "score at most N chunks (default all)"},
    };
    const cli_spec spec = {"perplexity", "perplexity -m MODEL.gguf -f TEXTFILE [options]", NULL, opts, CLI_N(opts), 0};
    int prc = cli_parse(&spec, argc, argv, NULL, NULL);
    if (prc < 0 && !file) prc = cli_usage_error("perplexity", "no text: -f TEXTFILE is required");
    if (prc < 0) prc = llm_cli_check("perplexity", &o);
    if (prc >= 0) return prc;

    size_t len = 0;
    char *text = cli_read_text_file("perplexity", "-f", file, &len);
    if (!text) return 1;
    int rc = 1, n_tok = 0;
    int32_t *toks = NULL;
    float *rows = NULL;
    llm_session s = {0};
    llm_model *m = llm_cli_load("perplexity", &o, true);
    if (!m) goto out;
    int n_ctx = llm_cli_ctx(&o, m);
    toks = llm_cli_tokenize(m, text, len, true, false, &n_tok);
    if (!toks) {
        rc = llm_cli_fail("perplexity");
        goto out;
    }
    if (n_tok < 2 * n_ctx) {
        fprintf(stderr, "ctorch perplexity: error: %s has %d tokens; a context of %d needs at least %d (use a smaller -c)\n",
                file, n_tok, n_ctx, 2 * n_ctx);
        goto out;
    }
    if (llm_session_init(&s, m, n_ctx, o.kv_f32 ? CT_F32 : CT_F16, NULL) != CT_OK) {
        rc = llm_cli_fail("perplexity");
        goto out;
    }
    const int V = m->hp.n_vocab, first = n_ctx / 2;
    /* Score the second half in batches small enough that [batch, V] logits stay modest. */
    int batch = (int)((64u << 20) / (unsigned)V);
    if (batch < 1) batch = 1;
    if (batch > n_ctx - first) batch = n_ctx - first;
    rows = malloc(sizeof(float) * (size_t)batch * (size_t)V);
    if (!rows) {
        fprintf(stderr, "ctorch perplexity: error: out of memory for %d x %d logits\n", batch, V);
        goto out;
    }
    int n_chunks = n_tok / n_ctx;
    if (max_chunks > 0 && max_chunks < n_chunks) n_chunks = max_chunks;
    bool bos = llm_tokenizer_add_bos(m->tok) && llm_token_bos(m->tok) >= 0;
    cli_log(CT_LOG_INFO, "perplexity: %d tokens, %d chunks of %d, scoring the last %d of each\n", n_tok, n_chunks,
            n_ctx, n_ctx - first - 1);
    double sum = 0, sum2 = 0;
    long count = 0;
    double t0 = llm_now();
    for (int c = 0; c < n_chunks; c++) {
        int32_t *chunk = toks + (size_t)c * n_ctx;
        int32_t saved = chunk[0];
        if (bos) chunk[0] = llm_token_bos(m->tok);
        llm_session_reset(&s);
        ct_status st = llm_session_eval(&s, chunk, first);
        for (int at = first; st == CT_OK && at < n_ctx - 1; at += batch) {
            int nb = n_ctx - 1 - at < batch ? n_ctx - 1 - at : batch;
            ct_tensor *lg = NULL;
            st = llm_forward(m, &s.kv, chunk + at, nb, true, &lg);
            if (st == CT_OK) st = ct_tensor_to_host(lg, rows, sizeof(float) * (size_t)nb * (size_t)V);
            ct_tensor_free(lg);
            for (int j = 0; st == CT_OK && j < nb; j++) {
                double l = nll(rows + (size_t)j * V, V, toks[(size_t)c * n_ctx + at + j + 1]);
                sum += l;
                sum2 += l * l;
                count++;
            }
        }
        chunk[0] = saved;
        if (st != CT_OK) {
            rc = llm_cli_fail("perplexity");
            goto out;
        }
        cli_log(CT_LOG_INFO, "[%d]%.4f%s", c + 1, exp(sum / (double)count), c + 1 == n_chunks ? "\n" : ",");
        if (c == 0) cli_log(CT_LOG_INFO, " (%.2f s per chunk) ", llm_now() - t0);
    }
    double mean = sum / (double)count, var = sum2 / (double)count - mean * mean;
    double err = count > 1 && var > 0 ? sqrt(var / (double)(count - 1)) : 0;
    double ppl = exp(mean);
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, ppl * err);
    cli_log(CT_LOG_INFO, "%ld tokens scored in %.2f s\n", count, llm_now() - t0);
    rc = 0;
out:
    free(rows);
    llm_session_free(&s);
    free(toks);
    llm_model_free(m);
    free(text);
    return rc;
}
