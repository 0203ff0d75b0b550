/* Tokenizers read from GGUF metadata: SentencePiece ("llama") and byte-level
 * BPE ("gpt2"), special tokens, and a streaming detokenizer.
 *
 * Token ids are int32_t in [0, llm_vocab_size). Texts are UTF-8 byte strings
 * with an explicit length (embedded NULs are allowed). */
#ifndef CT_LLM_TOKENIZER_H
#define CT_LLM_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctorch/core.h"

/* Repeating an identical typedef is valid C11, so this coexists with formats/gguf.h. */
typedef struct gguf_file gguf_file;
typedef struct llm_tokenizer llm_tokenizer;

typedef enum llm_vocab_type {
    LLM_VOCAB_SPM = 0, /* tokenizer.ggml.model = "llama" (SentencePiece, byte fallback) */
    LLM_VOCAB_BPE = 1  /* tokenizer.ggml.model = "gpt2"  (byte-level BPE, merges by rank) */
} llm_vocab_type;

/* GGUF tokenizer.ggml.token_type values. */
typedef enum llm_token_type {
    LLM_TOKEN_UNDEFINED = 0,
    LLM_TOKEN_NORMAL = 1,
    LLM_TOKEN_UNKNOWN = 2,
    LLM_TOKEN_CONTROL = 3,
    LLM_TOKEN_USER_DEFINED = 4,
    LLM_TOKEN_UNUSED = 5,
    LLM_TOKEN_BYTE = 6
} llm_token_type;

/* BPE pre-tokenizer (text splitting before merges), from tokenizer.ggml.pre.
 * Each is one of llama.cpp's regex lists (llama-vocab.cpp); the comments name
 * the tokenizer.ggml.pre values that use it (llm_pretok_lookup knows them all). */
typedef enum llm_pretok {
    LLM_PRETOK_GPT2 = 0,      /* gpt2, gpt-2, phi-2, mpt, olmo, jais, trillion, exaone4, roberta-bpe, ... */
    LLM_PRETOK_LLAMA3,        /* llama3, llama-bpe, dbrx, smaug-bpe, chatglm-bpe, glm4, falcon3, pixtral, ... */
    LLM_PRETOK_QWEN2,         /* qwen2, stablelm2, megrez, hunyuan, grok-2, deepseek-r1-qwen, ... */
    LLM_PRETOK_DEFAULT,       /* "default" or no name: llama.cpp's catch-all list */
    LLM_PRETOK_STARCODER,     /* starcoder, refact, command-r, smollm, codeshell, exaone, minerva-7b */
    LLM_PRETOK_FALCON,        /* falcon */
    LLM_PRETOK_DEEPSEEK_LLM,  /* deepseek-llm */
    LLM_PRETOK_DEEPSEEK_CODER, /* deepseek-coder */
    LLM_PRETOK_DEEPSEEK3,     /* deepseek-v3, hunyuan-dense, joyai-llm, hy_v4 */
    LLM_PRETOK_BLOOM,         /* bloom, poro-chat, gpt3-finnish */
    LLM_PRETOK_VIKING,        /* viking */
    LLM_PRETOK_TEKKEN,        /* tekken */
    LLM_PRETOK_GPT4O,         /* gpt-4o, llama4, minimax-m2, kanana2 */
    LLM_PRETOK_SEED_CODER,    /* seed-coder */
    LLM_PRETOK_BAILINGMOE,    /* bailingmoe, bailingmoe2, llada-moe */
    LLM_PRETOK_QWEN35,        /* qwen35 */
    LLM_PRETOK_MINICPM5,      /* minicpm5 */
    LLM_PRETOK_UFAKZEKA,      /* ufakzeka */
    LLM_PRETOK_JAIS2,         /* jais-2 */
    LLM_PRETOK_SPARK2_5,      /* spark2_5 */
    LLM_PRETOK_LAGUNA,        /* laguna */
    LLM_PRETOK_COUNT
} llm_pretok;

/* Looks a tokenizer.ggml.pre value up. *ignore_merges (may be NULL): llama.cpp
 * takes a word that is a whole vocabulary token as is for this name. Returns
 * false for an unknown name. */
bool llm_pretok_lookup(const char *name, llm_pretok *pre, bool *ignore_merges);
/* Canonical name of a pre-tokenizer ("gpt2", "llama3", ...). */
const char *llm_pretok_name(llm_pretok pre);

/* Everything a tokenizer is built from; llm_tokenizer_load fills one from a
 * GGUF file, tests fill one by hand. Arrays are copied. */
typedef struct llm_tokenizer_desc {
    llm_vocab_type type;
    int n_vocab;
    const char *const *tokens;  /* [n_vocab] token strings */
    const size_t *token_lens;   /* [n_vocab] byte lengths, or NULL: strlen */
    const float *scores;        /* [n_vocab] SPM merge scores, or NULL: all 0 */
    const int32_t *types;       /* [n_vocab] llm_token_type, or NULL: all normal */
    int n_merges;               /* BPE only */
    const char *const *merges;  /* [n_merges] "left right", rank = index */
    const size_t *merge_lens;   /* [n_merges] or NULL: strlen */
    const char *pre;            /* BPE pre-tokenizer name (tokenizer.ggml.pre), NULL: "default";
                                   an unknown name is CT_ERR_UNSUPPORTED */
    const char *pre_override;   /* BPE: the user's choice ("gpt2", ...) replacing pre, or NULL */
    int32_t bos, eos, eot, unk, pad; /* -1 when absent */
    bool add_bos, add_eos;
    bool add_space_prefix;      /* SPM: prepend U+2581 to the text */
} llm_tokenizer_desc;

/* Defaults for a type: ids -1, add_bos (SPM true, BPE false), add_space_prefix (SPM true). */
void llm_tokenizer_desc_init(llm_tokenizer_desc *d, llm_vocab_type type);
ct_status llm_tokenizer_new(const llm_tokenizer_desc *d, llm_tokenizer **out);
/* Reads tokenizer.ggml.* from an open GGUF file. A BPE pre-tokenizer name
 * that is not known is CT_ERR_UNSUPPORTED unless CTORCH_BPE_PRE names the
 * rules to use instead (e.g. CTORCH_BPE_PRE=gpt2). */
ct_status llm_tokenizer_load(const gguf_file *f, llm_tokenizer **out);
/* As llm_tokenizer_load; bpe_pre (NULL: CTORCH_BPE_PRE, or the file's own
 * name) forces a BPE pre-tokenizer by name, as `--bpe-pre NAME` would. */
ct_status llm_tokenizer_load_opts(const gguf_file *f, const char *bpe_pre, llm_tokenizer **out);
void llm_tokenizer_free(llm_tokenizer *t); /* NULL is fine */

/* Tokenizes text[0..len). add_special: BOS/EOS according to the file's
 * add_bos/add_eos flags. parse_special: control / user-defined token strings
 * in the text become their ids (longest match) instead of being tokenized as
 * text. CT_ERR_RANGE if cap is too small; *n_out is then the count needed. */
ct_status llm_tokenize(const llm_tokenizer *t, const char *text, size_t len, bool add_special,
                       bool parse_special, int32_t *ids, int cap, int *n_out);

llm_vocab_type llm_tokenizer_type(const llm_tokenizer *t);
/* The BPE pre-tokenizer in use (LLM_PRETOK_DEFAULT for SentencePiece). */
llm_pretok llm_tokenizer_pretok(const llm_tokenizer *t);
int llm_vocab_size(const llm_tokenizer *t);
/* The raw vocabulary string ("▁the", "<0x0A>", "Ġthe"), NUL-terminated; NULL when out of range. */
const char *llm_token_text(const llm_tokenizer *t, int32_t id);
float llm_token_score(const llm_tokenizer *t, int32_t id);
llm_token_type llm_token_get_type(const llm_tokenizer *t, int32_t id);
/* Looks a vocabulary string up; -1 when absent. */
int32_t llm_token_lookup(const llm_tokenizer *t, const char *text, size_t len);

/* The bytes the token stands for: SPM "▁" -> ' ', <0xXX> -> that byte; BPE
 * byte-to-unicode inverted. Control tokens give nothing unless render_special.
 * Returns the piece's length in bytes; when larger than cap, nothing (or a
 * partial piece) was written and the caller retries with a bigger buffer.
 * Returns -1 for an out-of-range id. */
int llm_token_to_piece(const llm_tokenizer *t, int32_t id, char *buf, int cap, bool render_special);

int32_t llm_token_bos(const llm_tokenizer *t); /* -1 when the vocabulary has none */
int32_t llm_token_eos(const llm_tokenizer *t);
int32_t llm_token_eot(const llm_tokenizer *t);
int32_t llm_token_unk(const llm_tokenizer *t);
/* End of generation: EOS, EOT, or another known end marker (<|im_end|>, <end_of_turn>, ...). */
bool llm_token_is_eog(const llm_tokenizer *t, int32_t id);
bool llm_token_is_control(const llm_tokenizer *t, int32_t id);
bool llm_tokenizer_add_bos(const llm_tokenizer *t);
bool llm_tokenizer_add_eos(const llm_tokenizer *t);

/* Streaming detokenizer: feed tokens one at a time, get only whole UTF-8
 * sequences out; a multi-byte character split over several tokens (byte
 * fallback) is held until complete. Invalid sequences are emitted as U+FFFD. */
typedef struct llm_detok {
    unsigned char pend[8]; /* bytes of an incomplete UTF-8 sequence */
    int n_pend;
    bool render_special;   /* render control tokens (default false) */
} llm_detok;

void llm_detok_init(llm_detok *d);
/* Appends the complete text of token `id` to out (NUL-terminated when room
 * remains). Returns bytes written, or -needed when cap is too small (state
 * unchanged then), or INT32_MIN for an out-of-range id. */
int llm_detok_push(llm_detok *d, const llm_tokenizer *t, int32_t id, char *out, int cap);
/* Emits what is left (an incomplete sequence becomes U+FFFD); same return convention. */
int llm_detok_flush(llm_detok *d, char *out, int cap);

/* Whole-sequence convenience: pieces of ids concatenated into out (NUL-terminated
 * when room remains). Returns the byte count, or -needed when cap is too small. */
int llm_detokenize(const llm_tokenizer *t, const int32_t *ids, int n, char *out, int cap, bool render_special);

#endif
