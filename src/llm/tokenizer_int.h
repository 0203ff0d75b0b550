/* Shared by tokenizer.c, tokenizer_spm.c, tokenizer_bpe.c, tokenizer_unicode.c. Not for other modules. */
#ifndef CT_LLM_TOKENIZER_INT_H
#define CT_LLM_TOKENIZER_INT_H

#include "llm/tokenizer.h"

/* Open addressing from a byte string to an index into a caller-owned string
 * table (the table is passed to every call, so the map stores only ints). */
typedef struct tok_map {
    uint32_t mask; /* capacity - 1, capacity a power of two */
    int32_t *slot; /* -1: empty, else an index into the string table */
} tok_map;

typedef struct tok_strtab {
    char **s;       /* NUL-terminated copies */
    uint32_t *len;
    int n;
} tok_strtab;

ct_status tok_map_init(tok_map *m, int n_entries);
void tok_map_free(tok_map *m);
/* keep_first: a duplicate string keeps the first index, else the last one. */
void tok_map_insert(tok_map *m, const tok_strtab *tab, int32_t idx, bool keep_first);
int32_t tok_map_find(const tok_map *m, const tok_strtab *tab, const char *s, size_t len);

struct llm_tokenizer {
    llm_vocab_type type;
    llm_pretok pre;
    tok_strtab vocab;     /* [n_vocab] token strings */
    float *score;         /* [n_vocab] */
    int32_t *ttype;       /* [n_vocab] llm_token_type */
    uint8_t *eog;         /* [n_vocab] 1: ends generation */
    tok_map vocab_map;
    tok_strtab merges;    /* BPE: "left right", rank = index */
    tok_map merge_map;
    int32_t byte_tok[256]; /* token for a raw byte (SPM <0xXX>, BPE its mapped char); -1 if none */
    uint64_t *special;    /* control/user-defined/unknown tokens, longest text first: (~len << 32) | id */
    int n_special;
    int32_t bos, eos, eot, unk, pad;
    bool add_bos, add_eos, add_space_prefix;
    bool ignore_merges;   /* BPE: a word that is a whole vocab token is taken as is */
};

/* Growable output of token ids; counts past cap so the caller learns the size needed. */
typedef struct tok_out {
    int32_t *ids;
    int cap;
    int n;
} tok_out;

static inline void tok_out_push(tok_out *o, int32_t id)
{
    if (o->n < o->cap) o->ids[o->n] = id;
    o->n++;
}

/* Byte length of the UTF-8 sequence that starts with byte c, by its high bits
 * (continuation and invalid lead bytes count as 1). */
static inline size_t tok_utf8_len(unsigned char c)
{
    static const uint8_t lens[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lens[c >> 4];
}

/* Tokenizes one raw-text fragment (no special tokens inside). `first`: the
 * fragment starts the text or follows a special token (SPM space prefix). */
ct_status tok_spm_encode(const llm_tokenizer *t, const char *text, size_t len, bool first, tok_out *out);
ct_status tok_bpe_encode(const llm_tokenizer *t, const char *text, size_t len, tok_out *out);

/* BPE pre-tokenizer alone: ends[i] = byte offset where word i ends (first cap
 * written). Returns the word count, or -1 when out of memory. */
int tok_bpe_split(llm_pretok pre, const char *text, size_t len, size_t *ends, int cap);

/* The pre-tokenizer over decoded text (tokenizer_pretok.c): cp[0..n) code
 * points; writes word ends (code point indices, ascending, the last is n) to
 * ends, which must hold n entries. Returns the word count, or -1 when out of
 * memory. */
int tok_pretok_run(llm_pretok pre, const uint32_t *cp, size_t n, size_t *ends);

/* GPT-2 byte <-> unicode mapping. tok_bpe_byte_to_utf8 writes 1-2 bytes, returns the count. */
int tok_bpe_byte_to_utf8(unsigned char b, char *dst);
/* Inverse on one codepoint; -1 if the codepoint is not an image of a byte. */
int tok_bpe_cp_to_byte(uint32_t cp);

/* Decodes one UTF-8 codepoint at s[0..len) (len > 0); an invalid or
 * truncated sequence decodes as U+FFFD with *n = 1 (classed as "other").
 * As llama.cpp's decoder: lead bytes F8-FF are invalid, overlong forms and
 * surrogates decode to their value. */
uint32_t tok_utf8_decode(const char *s, size_t len, size_t *n);
/* Writes cp as UTF-8 (1-4 bytes; above U+10FFFF: U+FFFD), returns the count. */
int tok_utf8_encode(uint32_t cp, char *dst);

/* Unicode categories used by the pre-tokenizers (tokenizer_unicode.c). */
bool tok_uni_is_letter(uint32_t cp);  /* \p{L} */
bool tok_uni_is_number(uint32_t cp);  /* \p{N} */
bool tok_uni_is_space(uint32_t cp);   /* \s: White_Space */
bool tok_uni_is_punct(uint32_t cp);   /* \p{P} */
bool tok_uni_is_symbol(uint32_t cp);  /* \p{S} */
bool tok_uni_is_mark(uint32_t cp);    /* \p{M} */

#endif
