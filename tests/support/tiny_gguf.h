/* The parts every tiny llama GGUF written by an LLM test shares: where the file
 * goes, the hyper-parameter keys and the tokenizer keys. The tensors stay in each
 * test, since their values are what the test is about. */
#ifndef CTORCH_TEST_TINY_GGUF_H
#define CTORCH_TEST_TINY_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "formats/gguf.h"

typedef struct th_llama_shape {
    uint32_t ctx, embd, layers, ff, heads, kv_heads;
    float eps, rope_base; /* 0: the key is left out (the loader's default applies) */
} th_llama_shape;

/* buf = "$CTORCH_TEST_TMP/file" (/tmp when unset); returns buf. */
const char *th_tmp_path(char *buf, size_t n, const char *file);

/* general.architecture "llama", general.name (NULL: left out) and the llama.* keys of s. */
void th_llama_hparams(gguf_writer *w, const char *name, const th_llama_shape *s);

/* A SentencePiece ("llama") vocabulary of n tokens with its scores, token types and
 * special ids; unk < 0 leaves tokenizer.ggml.unknown_token_id out. The writer keeps
 * pointers into toks until it writes. */
void th_llama_vocab(gguf_writer *w, const char *const *toks, const float *scores, const int32_t *types, int n,
                    uint32_t bos, uint32_t eos, int unk);

/* A random-weight f32 llama of shape s written to file (under th_tmp_path) and loaded: a word
 * per token id ("▁w17"), weights uniform with fixed ranges scaled by the width, drawn from
 * `seed` (the same model every time). NULL (and a failed check) on an error. */
#define TH_TINY_MAX_VOCAB 512
struct llm_model;
struct llm_model *th_tiny_llama(const char *file, const char *name, uint64_t seed, const th_llama_shape *s,
                                int vocab, int head_dim);
/* The same model's file at path, left there (false, and a failed check, on an error). */
bool th_tiny_llama_file(const char *path, const char *name, uint64_t seed, const th_llama_shape *s, int vocab,
                        int head_dim);

#endif
