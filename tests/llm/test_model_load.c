/* The model loader's checks beyond test_tiny_model's: every hyper-parameter key with
 * a value of the wrong type, sizes that leave a zero head, a rope scaling type that is
 * not a string, a soft-cap below zero, an architecture name too long or not a string,
 * tensors of the wrong rank, length or type (quantized norms, a ggml type ctorch
 * lacks), a vocabulary larger than the embedding; and what a valid file's optional
 * keys set (file type, chat template, attention scale). Each failure must name the
 * key or tensor. A tiny llama is written here; needs no ../shared. */
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/model.h"
#include "tiny_gguf.h"

enum { V = 8, E = 32, F = 256, H = 2, HKV = 1 };

/* One change to the base file: a metadata key set to a value of kind 'u' (u32), 'f'
 * (f32) or 's' (string), or a tensor replaced ('1': 1-D of E + 1 floats, 'q': Q8_0,
 * 'x': ggml type IQ2_XXS, 'r': token_embd and output with V - 2 rows). */
typedef struct edit {
    const char *key;
    char kind;
    double num;
    const char *str;
    ct_status want;
    const char *in_msg;
} edit;

static const edit *g_edit;

static bool edited(const char *key) { return g_edit->key && !strcmp(g_edit->key, key) && g_edit->kind != 'T'; }

static void set_u32(gguf_writer *w, const char *key, uint32_t v)
{
    if (!edited(key)) CHECK_OK(gguf_writer_set_u32(w, key, v));
}

static void set_f32(gguf_writer *w, const char *key, float v)
{
    if (!edited(key)) CHECK_OK(gguf_writer_set_f32(w, key, v));
}

/* The writer borrows tensor data until it writes: buffers live until write_model ends. */
static void *g_keep[32];
static int g_nkeep;

static void *keep(void *p)
{
    g_keep[g_nkeep++] = p;
    return p;
}

static void add_t(gguf_writer *w, const char *name, int64_t d0, int64_t d1)
{
    int64_t n = d0 * (d1 ? d1 : 1), shape[2] = {d0, d1};
    float *f = keep(malloc((size_t)(n + 1) * sizeof *f)); /* + 1: the E + 1 variant */
    for (int64_t i = 0; i <= n; i++) f[i] = (float)((i % 7) - 3) / 8.0f;
    const edit *e = g_edit;
    bool mine = e->kind == 'T' && !strcmp(e->key, name);
    if (mine && e->str[0] == '1') {
        int64_t s1[1] = {E + 1};
        CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, 1, s1, f));
    } else if (mine && e->str[0] == 'q') {
        char *q = keep(calloc(1, 34 * 8));
        int64_t ne[1] = {d0};
        CHECK_OK(gguf_writer_add_tensor_raw(w, name, 8 /* Q8_0 */, 1, ne, q, (size_t)(d0 / 32) * 34));
    } else if (mine && e->str[0] == 'x') {
        int64_t ne[2] = {d1, d0};
        size_t size = (size_t)(d0 * d1 / 256) * 66;
        char *raw = keep(calloc(1, size));
        CHECK_OK(gguf_writer_add_tensor_raw(w, name, 16 /* IQ2_XXS */, 2, ne, raw, size));
    } else if (mine && e->str[0] == 'v') {
        CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, 1, shape + 1, f)); /* [E]: 1-D */
    } else {
        CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, d1 ? 2 : 1, shape, f));
    }
}

static void write_model(const char *path, const edit *e)
{
    g_edit = e;
    gguf_writer *w = gguf_writer_new();
    if (!edited("general.architecture")) CHECK_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    CHECK_OK(gguf_writer_set_str(w, "general.name", "loadtest"));
    set_u32(w, "llama.context_length", 64);
    set_u32(w, "llama.embedding_length", E);
    set_u32(w, "llama.block_count", 1);
    set_u32(w, "llama.feed_forward_length", F);
    set_u32(w, "llama.attention.head_count", H);
    set_u32(w, "llama.attention.head_count_kv", HKV);
    set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    set_f32(w, "llama.rope.freq_base", 10000.0f);
    const char *toks[V] = {"<unk>", "<s>", "</s>", "a", "b", "c", "d", "e"};
    CHECK_OK(gguf_writer_set_str(w, "tokenizer.ggml.model", "llama"));
    CHECK_OK(gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", toks, V));
    if (e->key && e->kind == 'u') CHECK_OK(gguf_writer_set_u32(w, e->key, (uint32_t)e->num));
    if (e->key && e->kind == 'f') CHECK_OK(gguf_writer_set_f32(w, e->key, (float)e->num));
    if (e->key && e->kind == 's') CHECK_OK(gguf_writer_set_str(w, e->key, e->str));
    int64_t rows = e->kind == 'T' && e->str[0] == 'r' ? V - 2 : V;
    add_t(w, "token_embd.weight", rows, E);
    add_t(w, "output_norm.weight", E, 0);
    add_t(w, "output.weight", rows, E);
    add_t(w, "blk.0.attn_norm.weight", E, 0);
    add_t(w, "blk.0.attn_q.weight", E, E);
    add_t(w, "blk.0.attn_k.weight", E / H * HKV, E);
    add_t(w, "blk.0.attn_v.weight", E / H * HKV, E);
    add_t(w, "blk.0.attn_output.weight", E, E);
    add_t(w, "blk.0.ffn_norm.weight", E, 0);
    add_t(w, "blk.0.ffn_gate.weight", F, E);
    add_t(w, "blk.0.ffn_up.weight", F, E);
    add_t(w, "blk.0.ffn_down.weight", E, F);
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_free(w);
    while (g_nkeep > 0) free(g_keep[--g_nkeep]);
}

static const char *tmp_path(char *buf, size_t len) { return th_tmp_path(buf, len, "model_load_test.gguf"); }

/* Loads the base file with one edit; returns the model when it loaded. */
static llm_model *load_with(const edit *e, size_t i)
{
    char path[512];
    write_model(tmp_path(path, sizeof path), e);
    llm_model *m = NULL;
    ct_status st = llm_model_load(path, NULL, NULL, &m);
    CHECK_MSG(st == e->want, "edit %zu (%s): %s, want %s (%s)", i, e->key ? e->key : "none", ct_status_name(st),
              ct_status_name(e->want), ct_last_error());
    if (e->in_msg && st != CT_OK)
        CHECK_MSG(strstr(ct_last_error(), e->in_msg) != NULL, "edit %zu: message \"%s\" lacks \"%s\"", i,
                  ct_last_error(), e->in_msg);
    CHECK((st == CT_OK) == (m != NULL));
    remove(path);
    return m;
}

static void test_bad_files(void)
{
    static const edit edits[] = {
        {"llama.context_length", 's', 0, "64", CT_ERR_FORMAT, "llama.context_length"},
        {"llama.feed_forward_length", 's', 0, "256", CT_ERR_FORMAT, "llama.feed_forward_length"},
        {"llama.attention.head_count", 's', 0, "2", CT_ERR_FORMAT, "llama.attention.head_count"},
        {"llama.attention.head_count_kv", 's', 0, "1", CT_ERR_FORMAT, "llama.attention.head_count_kv"},
        {"llama.attention.key_length", 's', 0, "16", CT_ERR_FORMAT, "llama.attention.key_length"},
        {"llama.attention.value_length", 's', 0, "16", CT_ERR_FORMAT, "llama.attention.value_length"},
        {"llama.rope.dimension_count", 's', 0, "16", CT_ERR_FORMAT, "llama.rope.dimension_count"},
        {"llama.attention.layer_norm_rms_epsilon", 's', 0, "1e-5", CT_ERR_FORMAT, "layer_norm_rms_epsilon"},
        {"llama.final_logit_softcapping", 's', 0, "30", CT_ERR_FORMAT, "final_logit_softcapping"},
        {"llama.final_logit_softcapping", 'f', -1, NULL, CT_ERR_FORMAT, "soft-cap"},
        {"llama.attention.scale", 's', 0, "0.5", CT_ERR_FORMAT, "llama.attention.scale"},
        {"llama.rope.scaling.type", 'u', 1, NULL, CT_ERR_FORMAT, "llama.rope.scaling.type"},
        {"llama.rope.scaling.factor", 's', 0, "2", CT_OK, NULL}, /* ignored without a scaling type */
        /* 64 heads of a 32-wide embedding: the default head size is 0 */
        {"llama.attention.head_count", 'u', 64, NULL, CT_ERR_FORMAT, "head size is zero"},
        {"general.architecture", 'u', 1, NULL, CT_ERR_FORMAT, "general.architecture"},
        {"general.architecture", 's', 0, "llama-with-a-name-much-longer-than-any-architecture", CT_ERR_UNSUPPORTED,
         "is not supported"},
        {"gemma3.attention.sliding_window", 's', 0, "512", CT_OK, NULL}, /* not read for llama */
        {"token_embd.weight", 'T', 0, "v", CT_ERR_FORMAT, "token_embd.weight must be 2-D"},
        {"output_norm.weight", 'T', 0, "1", CT_ERR_FORMAT, "output_norm.weight has shape [33], expected [32]"},
        {"blk.0.ffn_norm.weight", 'T', 0, "q", CT_ERR_FORMAT, "norm tensor blk.0.ffn_norm.weight must be a float"},
        {"blk.0.ffn_down.weight", 'T', 0, "x", CT_ERR_UNSUPPORTED, "blk.0.ffn_down.weight has type IQ2_XXS"},
        {"token_embd.weight", 'T', 0, "r", CT_ERR_FORMAT, "the tokenizer has 8 tokens but token_embd only 6 rows"},
    };
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        llm_model_free(load_with(&edits[i], i));
    }
}

/* gemma3 reads attention.sliding_window: a string there is refused (no tensors needed,
 * the hyper-parameters are read first). */
static void test_gemma3_window_type(void)
{
    char path[512];
    gguf_writer *w = gguf_writer_new();
    CHECK_OK(gguf_writer_set_str(w, "general.architecture", "gemma3"));
    CHECK_OK(gguf_writer_set_u32(w, "gemma3.embedding_length", E));
    CHECK_OK(gguf_writer_set_u32(w, "gemma3.block_count", 1));
    CHECK_OK(gguf_writer_set_u32(w, "gemma3.feed_forward_length", F));
    CHECK_OK(gguf_writer_set_u32(w, "gemma3.attention.head_count", H));
    CHECK_OK(gguf_writer_set_str(w, "gemma3.attention.sliding_window", "512"));
    CHECK_OK(gguf_writer_write(w, tmp_path(path, sizeof path)));
    gguf_writer_free(w);
    llm_model *m = NULL;
    CHECK_STATUS(llm_model_load(path, NULL, NULL, &m), CT_ERR_FORMAT);
    CHECK(strstr(ct_last_error(), "gemma3.attention.sliding_window") != NULL);
    CHECK(m == NULL);
    remove(path);
}

/* Optional keys of a valid file land in the model. */
static void test_optional_keys(void)
{
    edit ft = {"general.file_type", 'u', 7, NULL, CT_OK, NULL};
    llm_model *m = load_with(&ft, 100);
    if (m) CHECK(m->file_type == 7);
    llm_model_free(m);
    edit tpl = {"tokenizer.chat_template", 's', 0, "{% for m in messages %}{{ m.content }}{% endfor %}", CT_OK, NULL};
    m = load_with(&tpl, 101);
    if (m) CHECK(m->chat_template && !strcmp(m->chat_template, tpl.str));
    llm_model_free(m);
    edit sc = {"llama.attention.scale", 'f', 0.125, NULL, CT_OK, NULL};
    m = load_with(&sc, 102);
    if (m) CHECK_NEAR(m->hp.attn_scale, 0.125, 1e-9);
    llm_model_free(m);
    /* without the key: 1 / sqrt(head size 16) */
    edit none = {NULL, 0, 0, NULL, CT_OK, NULL};
    m = load_with(&none, 103);
    if (m) {
        CHECK_NEAR(m->hp.attn_scale, 0.25, 1e-9);
        CHECK(m->file_type == -1);
        CHECK(m->chat_template == NULL);
    }
    llm_model_free(m);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_bad_files);
    RUN(test_gemma3_window_type);
    RUN(test_optional_keys);
    return th_finish();
}
