/* The generation loop's stop conditions and streaming, on a tiny llama written here
 * whose logits are known by construction: every block weight is zero, so the hidden
 * state is the token's embedding (all ones), and output row j is the constant s_j,
 * so logit j = E * s_j / sqrt(1 + eps) whatever the context. Greedy decoding then
 * picks a token chosen by the test: an end-of-generation token (stops; with
 * ignore_eog it is passed over until the context is full), a 300-byte piece (longer
 * than the loop's stack buffer), or a plain word; a stop flag and a callback that
 * returns false interrupt it. Needs no ../shared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "tiny_gguf.h"

enum { V = 8, E = 32, F = 32, H = 2, HKV = 1, D = 16, CTX = 16 };
enum { TOK_EOS = 2, TOK_A = 3, TOK_B = 4, TOK_EOT = 5, TOK_LONG = 6 };
#define LONG_LEN 300

static char g_long[LONG_LEN + 1];

static void add_vocab(gguf_writer *w)
{
    memset(g_long, 'x', LONG_LEN);
    const char *toks[V] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81" "a", "\xe2\x96\x81" "b", "<end_of_turn>", g_long,
                           "\xe2\x96\x81" "c"};
    float scores[V] = {0};
    int32_t types[V] = {2, 3, 3, 1, 1, 3, 1, 1};
    th_llama_vocab(w, toks, scores, types, V, 1, TOK_EOS, -1);
}

static void add(gguf_writer *w, float **keep, int *nk, const char *name, int64_t d0, int64_t d1, const float *rowval)
{
    int64_t n = d0 * (d1 ? d1 : 1), shape[2] = {d0, d1};
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = rowval ? rowval[d1 ? i / d1 : 0] : 0.0f;
    CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, d1 ? 2 : 1, shape, f));
    keep[(*nk)++] = f;
}

/* s[j]: the output row values (the logit order). */
static llm_model *make_model(const float *s, bool with_vocab)
{
    char path[512];
    th_tmp_path(path, sizeof path, "genloop.gguf");
    static const th_llama_shape shape = {CTX, E, 1, F, H, HKV, 1e-5f, 10000.0f};
    gguf_writer *w = gguf_writer_new();
    th_llama_hparams(w, "genloop", &shape);
    if (with_vocab) add_vocab(w);
    float ones[V > E ? V : E], *keep[16];
    for (int i = 0; i < (int)(sizeof ones / sizeof ones[0]); i++) ones[i] = 1.0f;
    int nk = 0;
    add(w, keep, &nk, "token_embd.weight", V, E, ones);
    add(w, keep, &nk, "output_norm.weight", E, 0, ones);
    add(w, keep, &nk, "output.weight", V, E, s);
    add(w, keep, &nk, "blk.0.attn_norm.weight", E, 0, ones);
    add(w, keep, &nk, "blk.0.attn_q.weight", H * D, E, NULL);
    add(w, keep, &nk, "blk.0.attn_k.weight", HKV * D, E, NULL);
    add(w, keep, &nk, "blk.0.attn_v.weight", HKV * D, E, NULL);
    add(w, keep, &nk, "blk.0.attn_output.weight", E, H * D, NULL);
    add(w, keep, &nk, "blk.0.ffn_norm.weight", E, 0, ones);
    add(w, keep, &nk, "blk.0.ffn_gate.weight", F, E, NULL);
    add(w, keep, &nk, "blk.0.ffn_up.weight", F, E, NULL);
    add(w, keep, &nk, "blk.0.ffn_down.weight", E, F, NULL);
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_free(w);
    for (int i = 0; i < nk; i++) free(keep[i]);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    remove(path);
    return m;
}

/* Collects the streamed text; stops after `limit` pieces when limit > 0. */
typedef struct sink {
    char text[2048];
    int len, pieces, limit, longest;
} sink;

static bool collect(const char *text, int len, void *ctx)
{
    sink *k = ctx;
    if (k->len + len < (int)sizeof k->text) {
        memcpy(k->text + k->len, text, (size_t)len);
        k->len += len;
        k->text[k->len] = 0;
    }
    k->pieces++;
    if (len > k->longest) k->longest = len;
    return k->limit <= 0 || k->pieces < k->limit;
}

static const llm_sampler_params k_greedy = {0.0f, 0, 1.0f, 0.0f, 1.0f, 0, 1};
static const int32_t k_prompt[2] = {1, TOK_B};

/* A session over m with the prompt evaluated. */
static bool start(llm_session *s, const llm_model *m, int n_ctx)
{
    if (!m) return false;
    CHECK_OK(llm_session_init(s, m, n_ctx, CT_F32, &k_greedy));
    ct_status st = llm_session_eval(s, k_prompt, 2);
    CHECK_OK(st);
    if (st == CT_OK && s->logits) {
        /* the logits are what the construction says */
        CHECK_NEAR(s->logits[TOK_A], E * 0.5 / sqrt(1 + 1e-5), 1e-4);
    }
    return st == CT_OK;
}

static void test_stops_at_eog(void)
{
    float s[V] = {0, 0, 1.0f, 0.5f, 0, 0.25f, 0, 0};
    llm_model *m = make_model(s, true);
    llm_session ss;
    if (!start(&ss, m, CTX)) goto out;
    sink k = {0};
    llm_gen_stats st;
    CHECK_OK(llm_session_generate(&ss, -1, collect, &k, NULL, &st));
    CHECK(st.eog && !st.ctx_full && !st.interrupted && st.n_gen == 1);
    CHECK(k.len == 0);
    CHECK(llm_session_n_past(&ss) == 2); /* the end token is not fed back */
    llm_session_free(&ss);

    /* ignore_eog: </s> and <end_of_turn> are passed over, " a" is generated until
     * the context is full: 14 tokens fed back after the 2-token prompt, and one more
     * sampled at the full context. */
    if (!start(&ss, m, CTX)) goto out;
    ss.ignore_eog = true;
    memset(&k, 0, sizeof k);
    CHECK_OK(llm_session_generate(&ss, -1, collect, &k, NULL, &st));
    CHECK_MSG(st.ctx_full && !st.eog && st.n_gen == CTX - 1, "ctx_full %d eog %d n_gen %d", st.ctx_full, st.eog, st.n_gen);
    CHECK(llm_session_n_past(&ss) == CTX);
    char want[64] = "";
    for (int i = 0; i < CTX - 1; i++) strcat(want, " a");
    CHECK_MSG(strcmp(k.text, want) == 0, "text \"%s\"", k.text);
    for (int i = 2; i < CTX; i++) CHECK(ss.hist[i] == TOK_A);
    llm_session_free(&ss);
out:
    llm_model_free(m);
}

static void test_long_piece_and_interrupts(void)
{
    float s[V] = {0, 0, 0, 0.5f, 0, 0, 1.0f, 0};
    llm_model *m = make_model(s, true);
    llm_session ss;
    if (!start(&ss, m, CTX)) goto out;
    sink k = {0};
    llm_gen_stats st;
    /* a piece longer than the loop's 256-byte buffer arrives whole */
    CHECK_OK(llm_session_generate(&ss, 2, collect, &k, NULL, &st));
    CHECK(st.n_gen == 2 && !st.eog && !st.interrupted);
    CHECK(k.len == 2 * LONG_LEN && k.longest == LONG_LEN && k.pieces == 2);
    bool all_x = true;
    for (int i = 0; i < k.len; i++) all_x = all_x && k.text[i] == 'x';
    CHECK(all_x);
    /* a callback that asks to stop after its first piece */
    memset(&k, 0, sizeof k);
    k.limit = 1;
    CHECK_OK(llm_session_generate(&ss, 5, collect, &k, NULL, &st));
    CHECK(st.interrupted && st.n_gen == 1 && k.pieces == 1);
    /* a stop flag already set: nothing is sampled */
    volatile sig_atomic_t stop = 1;
    memset(&k, 0, sizeof k);
    CHECK_OK(llm_session_generate(&ss, 5, collect, &k, &stop, &st));
    CHECK(st.interrupted && st.n_gen == 0 && k.pieces == 0);
    /* no callback: tokens are still sampled and fed back */
    int before = llm_session_n_past(&ss);
    CHECK_OK(llm_session_generate(&ss, 3, NULL, NULL, NULL, NULL));
    CHECK(llm_session_n_past(&ss) == before + 2);
    llm_session_free(&ss);
out:
    llm_model_free(m);
}

typedef struct prog {
    uint64_t done, total;
    int calls;
} prog;

static void on_progress(uint64_t done, uint64_t total, void *ctx)
{
    prog *p = ctx;
    CHECK(done >= p->done); /* monotonic */
    p->done = done, p->total = total, p->calls++;
}

static void test_session_args(void)
{
    float s[V] = {0, 0, 0, 1.0f, 0, 0, 0, 0};
    llm_model *m = make_model(s, true);
    if (!m) return;
    llm_session ss;
    CHECK_STATUS(llm_session_init(NULL, m, CTX, CT_F32, &k_greedy), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_session_init(&ss, NULL, CTX, CT_F32, &k_greedy), CT_ERR_INVALID_ARG);
    CHECK_OK(llm_session_init(&ss, m, 4, CT_F32, &k_greedy));
    CHECK_STATUS(llm_session_generate(NULL, 1, NULL, NULL, NULL, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_session_generate(&ss, 1, NULL, NULL, NULL, NULL), CT_ERR_INVALID_ARG);
    CHECK(strstr(ct_last_error(), "evaluate a prompt first") != NULL);
    CHECK_STATUS(llm_session_eval(NULL, k_prompt, 2), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_session_eval(&ss, NULL, 2), CT_ERR_INVALID_ARG);
    CHECK_OK(llm_session_eval(&ss, NULL, 0));
    int32_t five[5] = {1, 3, 3, 3, 3};
    CHECK_STATUS(llm_session_eval(&ss, five, 5), CT_ERR_RANGE);
    CHECK(strstr(ct_last_error(), "context too long: 5 tokens") != NULL);
    CHECK(llm_session_n_past(&ss) == 0);
    llm_session_free(&ss);
    llm_session_free(NULL);
    /* the model is placed on the host: every weight byte counted, progress ends at the total */
    llm_placement placed = {.bytes = 1};
    prog pr = {0, 0, 0};
    CHECK_STATUS(llm_model_place(NULL, "cpu", -1, NULL, NULL, &placed), CT_ERR_INVALID_ARG);
    CHECK_OK(llm_model_place(m, NULL, -1, on_progress, &pr, &placed));
    CHECK(placed.bytes == m->weight_bytes && placed.layers == m->hp.n_layer && placed.output);
    CHECK(pr.calls == 12 && pr.done == m->weight_bytes && pr.total == m->weight_bytes);
    llm_model_free(m);

    /* a model without a vocabulary can be evaluated but not generated from */
    m = make_model(s, false);
    if (!m) return;
    CHECK_OK(llm_session_init(&ss, m, CTX, CT_F32, &k_greedy));
    CHECK_OK(llm_session_eval(&ss, k_prompt, 2));
    CHECK_STATUS(llm_session_generate(&ss, 1, NULL, NULL, NULL, NULL), CT_ERR_FORMAT);
    CHECK(strstr(ct_last_error(), "no tokenizer") != NULL);
    llm_session_free(&ss);
    llm_model_free(m);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_stops_at_eog);
    RUN(test_long_piece_and_interrupts);
    RUN(test_session_args);
    return th_finish();
}
