/* SentencePiece (BPE-style) encoding as llama.cpp does it for "llama" vocabularies:
 * spaces become U+2581, the text is split into UTF-8 characters, and adjacent
 * symbols are merged greedily, always the pair whose concatenation is the
 * vocabulary token with the highest score (ties: leftmost). Symbols left that
 * are not tokens fall back to <0xXX> byte tokens, else to <unk>. */
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "llm/tokenizer_int.h"

typedef struct spm_sym {
    int prev, next; /* neighbours in the live list, -1 at the ends */
    size_t off, n;  /* bytes of the escaped text; n == 0 once merged away */
} spm_sym;

typedef struct spm_pair {
    int left, right;
    float score;
    size_t size; /* bytes of the concatenation, to detect stale entries */
} spm_pair;

typedef struct spm_state {
    const llm_tokenizer *t;
    const char *s; /* escaped text */
    spm_sym *sym;
    spm_pair *heap;
    size_t n_heap, cap_heap;
    bool oom;
} spm_state;

static bool pair_before(const spm_pair *a, const spm_pair *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_state *st, spm_pair p)
{
    if (st->n_heap == st->cap_heap) {
        size_t cap = st->cap_heap * 2;
        spm_pair *h = realloc(st->heap, cap * sizeof(spm_pair));
        if (!h) {
            st->oom = true;
            return;
        }
        st->heap = h, st->cap_heap = cap;
    }
    size_t i = st->n_heap++;
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!pair_before(&p, &st->heap[up])) break;
        st->heap[i] = st->heap[up];
        i = up;
    }
    st->heap[i] = p;
}

static spm_pair heap_pop(spm_state *st)
{
    spm_pair top = st->heap[0], last = st->heap[--st->n_heap];
    size_t i = 0, n = st->n_heap;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && pair_before(&st->heap[c + 1], &st->heap[c])) c++;
        if (!pair_before(&st->heap[c], &last)) break;
        st->heap[i] = st->heap[c];
        i = c;
    }
    if (n > 0) st->heap[i] = last;
    return top;
}

static void try_pair(spm_state *st, int left, int right)
{
    if (left < 0 || right < 0) return;
    size_t off = st->sym[left].off, size = st->sym[left].n + st->sym[right].n;
    int32_t id = tok_map_find(&st->t->vocab_map, &st->t->vocab, st->s + off, size);
    if (id < 0) return;
    heap_push(st, (spm_pair){left, right, st->t->score[id], size});
}

/* A symbol that is not a token: its bytes as byte tokens, or one <unk> when
 * the vocabulary cannot spell every byte (as SentencePiece does per piece). */
static void emit_bytes(const llm_tokenizer *t, const char *s, size_t n, tok_out *out)
{
    for (size_t i = 0; i < n; i++)
        if (t->byte_tok[(unsigned char)s[i]] < 0) {
            if (t->unk >= 0) tok_out_push(out, t->unk);
            return;
        }
    for (size_t i = 0; i < n; i++) tok_out_push(out, t->byte_tok[(unsigned char)s[i]]);
}

ct_status tok_spm_encode(const llm_tokenizer *t, const char *text, size_t len, bool first, tok_out *out)
{
    if (len == 0) return CT_OK;
    if (len > (size_t)INT32_MAX / 4) return core_err(CT_ERR_RANGE, "llm_tokenize: text of %zu bytes is too long", len);
    bool prefix = first && t->add_space_prefix;
    size_t cap = (prefix ? 3 : 0) + 3 * len; /* each ' ' grows to 3 bytes */
    char *s = malloc(cap + 1);
    spm_sym *sym = malloc(sizeof(spm_sym) * (cap + 1));
    size_t cap_heap = cap + 16;
    spm_pair *heap = malloc(sizeof(spm_pair) * cap_heap);
    if (!s || !sym || !heap) {
        free(s), free(sym), free(heap);
        return core_err(CT_ERR_OOM, "llm_tokenize: out of memory for %zu bytes of text", len);
    }
    size_t n = 0;
    if (prefix) memcpy(s, "\xe2\x96\x81", 3), n = 3;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ') memcpy(s + n, "\xe2\x96\x81", 3), n += 3;
        else s[n++] = text[i];
    }
    int n_sym = 0;
    for (size_t off = 0; off < n;) {
        size_t k = tok_utf8_len((unsigned char)s[off]);
        if (k > n - off) k = n - off;
        sym[n_sym] = (spm_sym){n_sym - 1, n_sym + 1, off, k};
        n_sym++;
        off += k;
    }
    if (n_sym > 0) sym[n_sym - 1].next = -1;

    spm_state st = {t, s, sym, heap, 0, cap_heap, false};
    for (int i = 1; i < n_sym; i++) try_pair(&st, i - 1, i);
    while (st.n_heap > 0 && !st.oom) {
        spm_pair p = heap_pop(&st);
        spm_sym *l = &sym[p.left], *r = &sym[p.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != p.size) continue; /* a side changed since it was queued */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) sym[r->next].prev = p.left;
        try_pair(&st, l->prev, p.left);
        try_pair(&st, p.left, l->next);
    }
    for (int i = n_sym > 0 && !st.oom ? 0 : -1; i >= 0; i = sym[i].next) {
        int32_t id = tok_map_find(&t->vocab_map, &t->vocab, s + sym[i].off, sym[i].n);
        if (id >= 0) tok_out_push(out, id);
        else emit_bytes(t, s + sym[i].off, sym[i].n, out);
    }
    free(s);
    free(sym);
    free(st.heap);
    if (st.oom) return core_err(CT_ERR_OOM, "llm_tokenize: out of memory merging %zu bytes of text", len);
    return CT_OK;
}
