#include "tiny_gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"
#include "llm/model.h"

const char *th_tmp_path(char *buf, size_t n, const char *file)
{
    const char *dir = getenv("CTORCH_TEST_TMP");
    snprintf(buf, n, "%s/%s", dir && *dir ? dir : "/tmp", file);
    return buf;
}

void th_llama_hparams(gguf_writer *w, const char *name, const th_llama_shape *s)
{
    CHECK_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    if (name) CHECK_OK(gguf_writer_set_str(w, "general.name", name));
    CHECK_OK(gguf_writer_set_u32(w, "llama.context_length", s->ctx));
    CHECK_OK(gguf_writer_set_u32(w, "llama.embedding_length", s->embd));
    CHECK_OK(gguf_writer_set_u32(w, "llama.block_count", s->layers));
    CHECK_OK(gguf_writer_set_u32(w, "llama.feed_forward_length", s->ff));
    CHECK_OK(gguf_writer_set_u32(w, "llama.attention.head_count", s->heads));
    CHECK_OK(gguf_writer_set_u32(w, "llama.attention.head_count_kv", s->kv_heads));
    if (s->eps != 0.0f) CHECK_OK(gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", s->eps));
    if (s->rope_base != 0.0f) CHECK_OK(gguf_writer_set_f32(w, "llama.rope.freq_base", s->rope_base));
}

void th_llama_vocab(gguf_writer *w, const char *const *toks, const float *scores, const int32_t *types, int n,
                    uint32_t bos, uint32_t eos, int unk)
{
    CHECK_OK(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    CHECK_OK(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, (uint64_t)n));
    CHECK_OK(gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)n));
    CHECK_OK(gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n));
    CHECK_OK(gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", bos));
    CHECK_OK(gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", eos));
    if (unk >= 0) CHECK_OK(gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk));
}

static void add_random(gguf_writer *w, th_rng *rng, float **keep, int *nk, const char *name, int64_t d0, int64_t d1,
                       double lo, double hi)
{
    int64_t n = d0 * (d1 ? d1 : 1), shape[2] = {d0, d1};
    float *f = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)th_uniform(rng, lo, hi);
    CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, d1 ? 2 : 1, shape, f));
    keep[(*nk)++] = f;
}

/* <unk> <s> </s>, then one word per id ("▁w17"): every token is a piece of text of its own. */
static void add_word_vocab(gguf_writer *w, int n)
{
    static char bufs[TH_TINY_MAX_VOCAB][16];
    static const char *toks[TH_TINY_MAX_VOCAB];
    static float scores[TH_TINY_MAX_VOCAB];
    static int32_t types[TH_TINY_MAX_VOCAB];
    for (int i = 0; i < n; i++) {
        if (i < 3) snprintf(bufs[i], sizeof bufs[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else snprintf(bufs[i], sizeof bufs[i], "\xe2\x96\x81w%d", i);
        toks[i] = bufs[i];
        scores[i] = -(float)i;
        types[i] = i == 0 ? 2 : i < 3 ? 3 : 1;
    }
    th_llama_vocab(w, toks, scores, types, n, 1, 2, 0);
}

bool th_tiny_llama_file(const char *path, const char *name, uint64_t seed, const th_llama_shape *s, int vocab,
                        int head_dim)
{
    if (vocab > TH_TINY_MAX_VOCAB || s->layers > 16) return false;
    th_rng rng = {seed};
    gguf_writer *w = gguf_writer_new();
    th_llama_hparams(w, name, s);
    add_word_vocab(w, vocab);
    float *keep[3 + 9 * 16];
    int nk = 0;
    int64_t E = s->embd, F = s->ff, QD = (int64_t)s->heads * head_dim, KD = (int64_t)s->kv_heads * head_dim;
    const double ws = 1.0 / sqrt((double)E);
    add_random(w, &rng, keep, &nk, "token_embd.weight", vocab, E, -1, 1);
    add_random(w, &rng, keep, &nk, "output_norm.weight", E, 0, 0.8, 1.2);
    add_random(w, &rng, keep, &nk, "output.weight", vocab, E, -3 * ws, 3 * ws);
    for (uint32_t l = 0; l < s->layers; l++) {
        char n[64];
#define LW(suf, d0, d1, lo, hi) \
    (snprintf(n, sizeof n, "blk.%u.%s.weight", l, suf), add_random(w, &rng, keep, &nk, n, d0, d1, lo, hi))
        LW("attn_norm", E, 0, 0.8, 1.2);
        LW("attn_q", QD, E, -2 * ws, 2 * ws);
        LW("attn_k", KD, E, -2 * ws, 2 * ws);
        LW("attn_v", KD, E, -ws, ws);
        LW("attn_output", E, QD, -ws, ws);
        LW("ffn_norm", E, 0, 0.8, 1.2);
        LW("ffn_gate", F, E, -2 * ws, 2 * ws);
        LW("ffn_up", F, E, -2 * ws, 2 * ws);
        LW("ffn_down", E, F, -ws, ws);
#undef LW
    }
    ct_status st = gguf_writer_write(w, path);
    CHECK_OK(st);
    gguf_writer_free(w);
    for (int i = 0; i < nk; i++) free(keep[i]);
    return st == CT_OK;
}

llm_model *th_tiny_llama(const char *file, const char *name, uint64_t seed, const th_llama_shape *s, int vocab,
                         int head_dim)
{
    char path[512];
    th_tmp_path(path, sizeof path, file);
    if (!th_tiny_llama_file(path, name, seed, s, vocab, head_dim)) return NULL;
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    remove(path);
    return m;
}
