/* Non-finite weights are reported, never turned into silent empty output: a
 * tiny llama written here with one NaN planted in a chosen weight must make
 * prompt evaluation or generation fail with a message that names where the
 * NaN first appeared (the embedding, layer N or the output) and the step. A
 * clean copy of the same model must run without a report. Needs no ../shared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "tiny_gguf.h"

enum { V = 260, E = 32, L = 3, F = 64, H = 2, HKV = 1, D = 16, CTX = 64 };

typedef struct plant {
    const char *tensor; /* NULL: a clean model */
    int64_t index;      /* element of that tensor (row-major) set to NaN */
    bool zero_output;   /* output.weight all zeros: every logit 0, greedy picks token 0 */
    float value;        /* what is planted there instead of NaN, when not 0 (an infinity) */
} plant;

static th_rng g_rng = {777};

static void add(gguf_writer *w, float **keep, int *nk, const plant *p, const char *name, int64_t d0, int64_t d1,
                double lo, double hi)
{
    int64_t n = d0 * (d1 ? d1 : 1), shape[2] = {d0, d1};
    float *f = malloc((size_t)n * sizeof *f);
    bool zero = p->zero_output && !strcmp(name, "output.weight");
    for (int64_t i = 0; i < n; i++) f[i] = zero ? 0.0f : (float)th_uniform(&g_rng, lo, hi);
    if (p->tensor && !strcmp(p->tensor, name)) f[p->index] = p->value != 0.0f ? p->value : NAN;
    CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, d1 ? 2 : 1, shape, f));
    keep[(*nk)++] = f;
}

/* SentencePiece-style: <unk> <s> </s>, 256 byte tokens, one word. */
static void add_vocab(gguf_writer *w)
{
    static char bufs[V][16];
    const char *toks[V];
    float scores[V];
    int32_t types[V];
    for (int i = 0; i < V; i++) {
        if (i < 3) snprintf(bufs[i], sizeof bufs[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < 259) snprintf(bufs[i], sizeof bufs[i], "<0x%02X>", i - 3);
        else snprintf(bufs[i], sizeof bufs[i], "\xe2\x96\x81" "a");
        toks[i] = bufs[i];
        scores[i] = i < 259 ? 0.0f : -1.0f;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
    }
    th_llama_vocab(w, toks, scores, types, V, 1, 2, 0);
}

static llm_model *make_model(const plant *p)
{
    char path[512];
    th_tmp_path(path, sizeof path, "nonfinite.gguf");
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    gguf_writer *w = gguf_writer_new();
    th_llama_hparams(w, "nan-test", &shape);
    add_vocab(w);
    float *keep[64];
    int nk = 0;
    const double ws = 1.0 / sqrt((double)E);
    add(w, keep, &nk, p, "token_embd.weight", V, E, -1, 1);
    add(w, keep, &nk, p, "output_norm.weight", E, 0, 0.8, 1.2);
    add(w, keep, &nk, p, "output.weight", V, E, -ws, ws);
    for (int l = 0; l < L; l++) {
        char n[64];
#define LW(suf, d0, d1, lo, hi) \
    (snprintf(n, sizeof n, "blk.%d.%s.weight", l, suf), add(w, keep, &nk, p, n, d0, d1, lo, hi))
        LW("attn_norm", E, 0, 0.8, 1.2);
        LW("attn_q", H * D, E, -ws, ws);
        LW("attn_k", HKV * D, E, -ws, ws);
        LW("attn_v", HKV * D, E, -ws, ws);
        LW("attn_output", E, H * D, -ws, ws);
        LW("ffn_norm", E, 0, 0.8, 1.2);
        LW("ffn_gate", F, E, -ws, ws);
        LW("ffn_up", F, E, -ws, ws);
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

static const int32_t g_prompt[3] = {1, 100, 259};

/* Evaluates the prompt; returns its status, the message in msg. */
static ct_status eval_prompt(const plant *p, char *msg, size_t len, int *n_past_after)
{
    llm_model *m = make_model(p);
    if (!m) return CT_ERR_INVALID_ARG;
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, CTX, CT_F32, NULL));
    ct_status st = llm_session_eval(&s, g_prompt, 3);
    snprintf(msg, len, "%s", ct_last_error());
    *n_past_after = llm_session_n_past(&s);
    CHECK(st == CT_OK || !s.have_logits);
    llm_session_free(&s);
    llm_model_free(m);
    return st;
}

static void test_clean_model_runs(void)
{
    plant p = {0};
    char msg[512];
    int n_past;
    CHECK_OK(eval_prompt(&p, msg, sizeof msg, &n_past));
    CHECK(n_past == 3);
}

static void test_nan_in_a_layer(void)
{
    plant p = {"blk.1.ffn_down.weight", 5, false, 0};
    char msg[512];
    int n_past;
    CHECK_STATUS(eval_prompt(&p, msg, sizeof msg, &n_past), CT_ERR_RANGE);
    CHECK_MSG(strstr(msg, "layer 1 produced NaN") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "logits after position 2 contain NaN") != NULL, "%s", msg);
    CHECK_MSG(n_past == 0, "the failed evaluation left %d positions in the cache", n_past);
}

static void test_nan_in_the_output(void)
{
    plant p = {"output.weight", 7 * E + 3, false, 0}; /* row 7: only token 7's logit */
    char msg[512];
    int n_past;
    CHECK_STATUS(eval_prompt(&p, msg, sizeof msg, &n_past), CT_ERR_RANGE);
    CHECK_MSG(strstr(msg, "output norm/projection produced NaN") != NULL, "%s", msg);
    CHECK_MSG(strstr(msg, "1 of 260 values, first at token id 7") != NULL, "%s", msg);
}

/* The prompt is fine; the first generated token (0, every logit being 0) has
 * a NaN embedding, so step 1 must fail instead of streaming nothing. */
static void test_nan_during_generation(void)
{
    plant p = {"token_embd.weight", 0 * E + 4, true, 0};
    llm_model *m = make_model(&p);
    if (!m) return;
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, CTX, CT_F32, NULL));
    CHECK_OK(llm_session_eval(&s, g_prompt, 3));
    llm_gen_stats gs;
    ct_status st = llm_session_generate(&s, 8, NULL, NULL, NULL, &gs);
    CHECK_STATUS(st, CT_ERR_RANGE);
    const char *e = ct_last_error();
    CHECK_MSG(strstr(e, "generation step 1 (token 0)") != NULL, "%s", e);
    CHECK_MSG(strstr(e, "the token embedding produced NaN") != NULL, "%s", e);
    CHECK(gs.n_gen == 1);
    llm_session_free(&s);
    llm_model_free(m);
}

/* A one-token evaluation replays the recorded decode step (eager with CTORCH_REPLAY=0):
 * one NaN or infinite logit in its row must be reported as the prompt path reports it,
 * and leave nothing behind in the cache. */
static void test_decode_step_nonfinite(void)
{
    const plant ps[] = {{"output.weight", 7 * E + 3, false, 0}, {"output.weight", 9 * E + 1, false, INFINITY},
                        {"output.weight", 11 * E + 2, false, -INFINITY}};
    const char *what[] = {"contain NaN (1 of 260 values, first at token id 7)",
                          "contain infinity (1 of 260 values, first at token id 9)",
                          "contain infinity (1 of 260 values, first at token id 11)"};
    for (size_t k = 0; k < sizeof ps / sizeof ps[0]; k++) {
        llm_model *m = make_model(&ps[k]);
        if (!m) return;
        llm_session s;
        CHECK_OK(llm_session_init(&s, m, CTX, CT_F32, NULL));
        CHECK_STATUS(llm_session_eval(&s, g_prompt, 1), CT_ERR_RANGE);
        CHECK_MSG(llm_decoder_records(&s) == llm_replay_enabled(), "plant %zu: %d recordings", k,
                  llm_decoder_records(&s));
        CHECK_MSG(strstr(ct_last_error(), what[k]) != NULL, "%s", ct_last_error());
        CHECK(!s.have_logits && llm_session_n_past(&s) == 0);
        llm_session_free(&s);
        llm_model_free(m);
    }
}

/* The quick scan that runs on every logits row: each non-finite kind (NaN of either sign,
 * quiet or signalling, +-infinity) at every position of a row whose length is no multiple
 * of a vector width, against isfinite; the largest finite values and subnormals pass. */
static void test_fast_scan(void)
{
    enum { N = 1037 };
    float *row = malloc(N * sizeof *row);
    const uint32_t bad_bits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800123u, 0x7f800000u, 0xff800000u};
    const uint32_t ok_bits[] = {0x7f7fffffu, 0xff7fffffu, 0x00000001u, 0x80000001u, 0x00000000u, 0x80000000u};
    int wrong = 0;
    for (size_t k = 0; k < sizeof bad_bits / sizeof bad_bits[0]; k++)
        for (int at = 0; at < N; at++) {
            for (int i = 0; i < N; i++) row[i] = (float)th_uniform(&g_rng, -30, 30);
            memcpy(&row[at], &bad_bits[k], sizeof(float));
            memcpy(&row[(at + 1) % N], &ok_bits[k], sizeof(float));
            int n_bad = 0; /* the reference: exactly the planted value */
            for (int i = 0; i < N; i++) n_bad += !isfinite(row[i]);
            CHECK(n_bad == 1);
            wrong += !llm_any_nonfinite(row, N);
            wrong += llm_any_nonfinite(row, at); /* the finite part before it */
        }
    CHECK_MSG(wrong == 0, "%d rows judged wrong", wrong);
    for (size_t k = 0; k < sizeof ok_bits / sizeof ok_bits[0]; k++) memcpy(&row[k], &ok_bits[k], sizeof(float));
    CHECK(!llm_any_nonfinite(row, 6));
    CHECK(!llm_any_nonfinite(row, 0));
    free(row);
}

int main(void)
{
    RUN(test_fast_scan);
    RUN(test_clean_model_runs);
    RUN(test_nan_in_a_layer);
    RUN(test_nan_in_the_output);
    RUN(test_nan_during_generation);
    RUN(test_decode_step_nonfinite);
    return th_finish();
}
