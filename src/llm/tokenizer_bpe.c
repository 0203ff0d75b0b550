/* Byte-level BPE ("gpt2" vocabularies: GPT-2, Llama 3, Qwen 2, SmolLM, ...).
 *
 * 1. Pre-tokenizer: the text is cut into words by the model's regex list
 *    (tokenizer_pretok.c).
 * 2. Each word's bytes map to printable code points (GPT-2 byte-to-unicode).
 * 3. Adjacent symbols merge, lowest merge rank first (ties: leftmost).
 * 4. Each final symbol is looked up (see emit_symbol for one that is missing). */
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "llm/tokenizer_int.h"

/* ---- byte <-> unicode ---- */

static bool byte_prints(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

static uint32_t byte_cp(unsigned b)
{
    if (byte_prints(b)) return b;
    if (b <= 0x20) return 256 + b;
    if (b <= 0xA0) return 256 + 33 + (b - 0x7F);
    return 256 + 67; /* 0xAD, the last non-printing byte */
}

int tok_bpe_byte_to_utf8(unsigned char b, char *dst)
{
    uint32_t cp = byte_cp(b);
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    dst[0] = (char)(0xC0 | (cp >> 6));
    dst[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

int tok_bpe_cp_to_byte(uint32_t cp)
{
    if (cp < 256) return byte_prints(cp) ? (int)cp : -1;
    if (cp < 256 + 33) return (int)(cp - 256);
    if (cp < 256 + 67) return (int)(cp - 256 - 33 + 0x7F);
    if (cp == 256 + 67) return 0xAD;
    return -1;
}

/* ---- merges ---- */

typedef struct bpe_sym {
    int prev, next;
    size_t off, n; /* bytes of the mapped word; n == 0 once merged away */
} bpe_sym;

typedef struct bpe_pair {
    int left, right;
    int rank;
    size_t size;
} bpe_pair;

typedef struct bpe_work {
    bpe_sym *sym;
    bpe_pair *heap;
    size_t n_heap, cap_heap;
    char *key; /* "left right" scratch */
    bool oom;
} bpe_work;

static bool pair_before(const bpe_pair *a, const bpe_pair *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

static void heap_push(bpe_work *w, bpe_pair p)
{
    if (w->n_heap == w->cap_heap) {
        size_t cap = w->cap_heap ? w->cap_heap * 2 : 64;
        bpe_pair *h = realloc(w->heap, cap * sizeof *h);
        if (!h) {
            w->oom = true;
            return;
        }
        w->heap = h, w->cap_heap = cap;
    }
    size_t i = w->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_before(&p, &w->heap[up])) break;
        w->heap[i] = w->heap[up];
        i = up;
    }
    w->heap[i] = p;
}

static bpe_pair heap_pop(bpe_work *w)
{
    bpe_pair top = w->heap[0], last = w->heap[--w->n_heap];
    size_t i = 0, n = w->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&w->heap[c + 1], &w->heap[c])) c++;
        if (!pair_before(&w->heap[c], &last)) break;
        w->heap[i] = w->heap[c];
        i = c;
    }
    if (n > 0) w->heap[i] = last;
    return top;
}

static void try_pair(const llm_tokenizer *t, bpe_work *w, const char *word, int left, int right)
{
    if (left < 0 || right < 0) return;
    const bpe_sym *l = &w->sym[left], *r = &w->sym[right];
    memcpy(w->key, word + l->off, l->n);
    w->key[l->n] = ' ';
    memcpy(w->key + l->n + 1, word + r->off, r->n);
    int32_t rank = tok_map_find(&t->merge_map, &t->merges, w->key, l->n + 1 + r->n);
    if (rank >= 0) heap_push(w, (bpe_pair){left, right, rank, l->n + r->n});
}

/* A final symbol missing from the vocabulary (its byte's character is not a
 * token) falls back, as in llama.cpp, to single bytes of its mapped UTF-8 text
 * that are tokens themselves (printable ASCII ones); the rest is dropped. */
static void emit_symbol(const llm_tokenizer *t, const char *s, size_t n, tok_out *out)
{
    int32_t id = tok_map_find(&t->vocab_map, &t->vocab, s, n);
    if (id >= 0) {
        tok_out_push(out, id);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        id = tok_map_find(&t->vocab_map, &t->vocab, s + i, 1);
        if (id >= 0) tok_out_push(out, id);
    }
}

/* word: bytes mapped to code points, one symbol per original byte. */
static void bpe_word(const llm_tokenizer *t, bpe_work *w, const char *word, size_t len, tok_out *out)
{
    if (t->ignore_merges) {
        int32_t id = tok_map_find(&t->vocab_map, &t->vocab, word, len);
        if (id >= 0) {
            tok_out_push(out, id);
            return;
        }
    }
    int n_sym = 0;
    for (size_t off = 0; off < len;) {
        size_t k = tok_utf8_len((unsigned char)word[off]);
        w->sym[n_sym] = (bpe_sym){n_sym - 1, n_sym + 1, off, k};
        n_sym++;
        off += k;
    }
    w->sym[n_sym - 1].next = -1;
    w->n_heap = 0;
    for (int i = 1; i < n_sym; i++) try_pair(t, w, word, i - 1, i);
    while (w->n_heap > 0 && !w->oom) {
        bpe_pair p = heap_pop(w);
        bpe_sym *l = &w->sym[p.left], *r = &w->sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) w->sym[r->next].prev = p.left;
        try_pair(t, w, word, l->prev, p.left);
        try_pair(t, w, word, p.left, l->next);
    }
    for (int i = 0; i >= 0; i = w->sym[i].next) emit_symbol(t, word + w->sym[i].off, w->sym[i].n, out);
}

/* Decodes text into code points with their byte offsets (off has n + 1 entries). */
static size_t decode_all(const char *text, size_t len, uint32_t *cp, size_t *off)
{
    size_t n = 0;
    for (size_t i = 0; i < len; n++) {
        size_t k;
        off[n] = i;
        cp[n] = tok_utf8_decode(text + i, len - i, &k);
        i += k;
    }
    off[n] = len;
    return n;
}

int tok_bpe_split(llm_pretok pre, const char *text, size_t len, size_t *ends, int cap)
{
    if (len == 0) return 0;
    if (len > (size_t)INT32_MAX / 4) return -1;
    uint32_t *cp = malloc(sizeof(uint32_t) * len);
    size_t *off = malloc(sizeof(size_t) * (len + 1));
    size_t *wend = malloc(sizeof(size_t) * len);
    int n = -1;
    if (cp && off && wend) {
        n = tok_pretok_run(pre, cp, decode_all(text, len, cp, off), wend);
        for (int i = 0; i < n && i < cap; i++) ends[i] = off[wend[i]];
    }
    free(cp);
    free(off);
    free(wend);
    return n;
}

/* Words are built from the decoded code points, not the raw bytes: as in
 * llama.cpp, each invalid UTF-8 byte becomes U+FFFD (EF BF BD) before merging. */
ct_status tok_bpe_encode(const llm_tokenizer *t, const char *text, size_t len, tok_out *out)
{
    if (len == 0) return CT_OK;
    if (len > (size_t)INT32_MAX / 4) return core_err(CT_ERR_RANGE, "llm_tokenize: text of %zu bytes is too long", len);
    uint32_t *cp = malloc(sizeof(uint32_t) * len);
    size_t *off = malloc(sizeof(size_t) * (len + 1));
    size_t *wend = malloc(sizeof(size_t) * len);
    char *word = NULL;
    bpe_work w = {0};
    ct_status st = CT_OK;
    int n_words = cp && off && wend ? tok_pretok_run(t->pre, cp, decode_all(text, len, cp, off), wend) : -1;
    /* Merge buffers for the longest word: up to 4 UTF-8 bytes a code point
     * (3 for an invalid byte read as U+FFFD), 2 mapped bytes each. */
    size_t max_cp = 0;
    for (int k = 0; k < n_words; k++) {
        size_t n = wend[k] - (k ? wend[k - 1] : 0);
        if (n > max_cp) max_cp = n;
    }
    size_t max_bytes = 4 * max_cp;
    if (n_words >= 0) {
        word = malloc(2 * max_bytes + 1);
        w.sym = malloc(sizeof(bpe_sym) * (max_bytes + 1));
        w.key = malloc(4 * max_bytes + 2);
    }
    if (n_words < 0 || !word || !w.sym || !w.key) {
        st = core_err(CT_ERR_OOM, "llm_tokenize: out of memory for %zu bytes of text", len);
        goto done;
    }
    size_t start = 0; /* code point index where word k starts */
    for (int k = 0; k < n_words && !w.oom; k++) {
        size_t wl = 0;
        for (size_t i = start; i < wend[k]; i++) {
            char u8[4];
            int nb = tok_utf8_encode(cp[i], u8);
            for (int b = 0; b < nb; b++) wl += (size_t)tok_bpe_byte_to_utf8((unsigned char)u8[b], word + wl);
        }
        bpe_word(t, &w, word, wl, out);
        start = wend[k];
    }
    if (w.oom) st = core_err(CT_ERR_OOM, "llm_tokenize: out of memory merging %zu bytes of text", len);
done:
    free(cp);
    free(off);
    free(wend);
    free(word);
    free(w.sym);
    free(w.heap);
    free(w.key);
    return st;
}
