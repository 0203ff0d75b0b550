#include "tiny_gguf.h"

#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

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
