/* Tokenizer construction (from a description or GGUF metadata), special-token
 * partitioning, token -> bytes, and the streaming UTF-8-safe detokenizer.
 * The per-model algorithms live in tokenizer_spm.c and tokenizer_bpe.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/tensor.h"
#include "formats/gguf.h"
#include "llm/tokenizer_int.h"

/* ---- string -> index map ---- */

static uint32_t tok_hash(const char *s, size_t len)
{
    uint32_t h = 2166136261u; /* FNV-1a: short keys, good enough spread */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

ct_status tok_map_init(tok_map *m, int n_entries)
{
    uint32_t cap = 16;
    while (cap < (uint32_t)n_entries * 2u) cap <<= 1;
    m->slot = malloc(sizeof(int32_t) * cap);
    if (!m->slot) return core_err(CT_ERR_OOM, "tokenizer: cannot allocate a %u-slot hash map", cap);
    memset(m->slot, 0xFF, sizeof(int32_t) * cap);
    m->mask = cap - 1;
    return CT_OK;
}

void tok_map_free(tok_map *m)
{
    free(m->slot);
    m->slot = NULL;
}

void tok_map_insert(tok_map *m, const tok_strtab *tab, int32_t idx, bool keep_first)
{
    const char *s = tab->s[idx];
    size_t len = tab->len[idx];
    for (uint32_t h = tok_hash(s, len) & m->mask;; h = (h + 1) & m->mask) {
        int32_t cur = m->slot[h];
        if (cur < 0) {
            m->slot[h] = idx;
            return;
        }
        if (tab->len[cur] == len && memcmp(tab->s[cur], s, len) == 0) {
            if (!keep_first) m->slot[h] = idx;
            return;
        }
    }
}

int32_t tok_map_find(const tok_map *m, const tok_strtab *tab, const char *s, size_t len)
{
    if (!m->slot) return -1;
    for (uint32_t h = tok_hash(s, len) & m->mask;; h = (h + 1) & m->mask) {
        int32_t cur = m->slot[h];
        if (cur < 0) return -1;
        if (tab->len[cur] == len && memcmp(tab->s[cur], s, len) == 0) return cur;
    }
}

static void strtab_free(tok_strtab *tab)
{
    if (tab->s)
        for (int i = 0; i < tab->n; i++) free(tab->s[i]);
    free(tab->s);
    free(tab->len);
    memset(tab, 0, sizeof *tab);
}

static ct_status strtab_copy(tok_strtab *tab, const char *what, const char *const *s, const size_t *lens, int n)
{
    tab->s = calloc((size_t)n + 1, sizeof(char *));
    tab->len = calloc((size_t)n + 1, sizeof(uint32_t));
    if (!tab->s || !tab->len) return core_err(CT_ERR_OOM, "tokenizer: cannot allocate %d %s", n, what);
    tab->n = n;
    for (int i = 0; i < n; i++) {
        if (!s[i]) return core_err(CT_ERR_INVALID_ARG, "tokenizer: %s[%d] is NULL", what, i);
        size_t len = lens ? lens[i] : strlen(s[i]);
        if (len > UINT32_MAX / 2)
            return core_err(CT_ERR_FORMAT, "tokenizer: %s[%d] is %zu bytes long", what, i, len);
        tab->s[i] = malloc(len + 1);
        if (!tab->s[i]) return core_err(CT_ERR_OOM, "tokenizer: cannot copy %s[%d]", what, i);
        memcpy(tab->s[i], s[i], len);
        tab->s[i][len] = '\0';
        tab->len[i] = (uint32_t)len;
    }
    return CT_OK;
}

/* ---- construction ---- */

void llm_tokenizer_desc_init(llm_tokenizer_desc *d, llm_vocab_type type)
{
    memset(d, 0, sizeof *d);
    d->type = type;
    d->bos = d->eos = d->eot = d->unk = d->pad = -1;
    d->add_bos = type == LLM_VOCAB_SPM;
    d->add_space_prefix = type == LLM_VOCAB_SPM;
}

void llm_tokenizer_free(llm_tokenizer *t)
{
    if (!t) return;
    strtab_free(&t->vocab);
    strtab_free(&t->merges);
    tok_map_free(&t->vocab_map);
    tok_map_free(&t->merge_map);
    free(t->score);
    free(t->ttype);
    free(t->eog);
    free(t->special);
    free(t);
}

/* Printable ASCII copy of a name from a file (no terminal escapes in messages). */
static const char *printable(const char *name, char *buf, size_t cap)
{
    size_t n = 0;
    for (; name[n] && n + 1 < cap; n++) buf[n] = name[n] >= 0x20 && name[n] < 0x7F ? name[n] : '?';
    buf[n] = '\0';
    return buf;
}

/* The BPE pre-tokenizer: the user's choice, else the file's, else llama.cpp's default. */
static ct_status choose_pretok(llm_tokenizer *t, const llm_tokenizer_desc *d)
{
    char a[64], b[64];
    t->pre = LLM_PRETOK_DEFAULT;
    t->ignore_merges = false;
    if (t->type != LLM_VOCAB_BPE) return CT_OK;
    if (d->pre_override) {
        if (!llm_pretok_lookup(d->pre_override, &t->pre, &t->ignore_merges))
            return core_err(CT_ERR_INVALID_ARG, "tokenizer: unknown BPE pre-tokenizer '%s' requested (known: gpt2, "
                            "llama3, qwen2, smollm, starcoder, falcon, deepseek-llm, deepseek-coder, deepseek-v3, "
                            "gpt-4o, tekken, bloom, viking, default, ...)", printable(d->pre_override, a, sizeof a));
        if (!d->pre || strcmp(d->pre, d->pre_override))
            core_log(CT_LOG_WARN, "tokenizer: using the '%s' pre-tokenizer as asked, instead of the file's '%s'",
                     printable(d->pre_override, a, sizeof a), d->pre ? printable(d->pre, b, sizeof b) : "default");
        return CT_OK;
    }
    if (!d->pre) {
        core_log(CT_LOG_WARN, "tokenizer: no tokenizer.ggml.pre, using llama.cpp's default BPE pre-tokenizer");
        return CT_OK;
    }
    if (llm_pretok_lookup(d->pre, &t->pre, &t->ignore_merges)) return CT_OK;
    return core_err(CT_ERR_UNSUPPORTED, "tokenizer: BPE pre-tokenizer '%s' (tokenizer.ggml.pre) is not supported; "
                    "CTORCH_BPE_PRE=gpt2 (or --bpe-pre gpt2) tokenizes with GPT-2's rules instead, which can split "
                    "text unlike the model was trained", printable(d->pre, a, sizeof a));
}

/* Keys that sort longest text first, then lowest id: (~len << 32) | id. */
static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static ct_status check_id(const char *what, int32_t id, int n_vocab)
{
    if (id < -1 || id >= n_vocab)
        return core_err(CT_ERR_FORMAT, "tokenizer: %s id %d outside the vocabulary [0, %d)", what, (int)id, n_vocab);
    return CT_OK;
}

/* Ends of turn that chat models emit but that files often leave unmarked. */
static const char *const eog_names[] = {"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
                                        "<|eom_id|>", "<EOT>", "<|end_of_text|>"};

static void find_special_ids(llm_tokenizer *t)
{
    int n = t->vocab.n;
    char name[8];
    for (int b = 0; b < 256; b++) {
        int32_t id;
        if (t->type == LLM_VOCAB_SPM) {
            snprintf(name, sizeof name, "<0x%02X>", b);
            id = tok_map_find(&t->vocab_map, &t->vocab, name, 6);
        } else {
            int k = tok_bpe_byte_to_utf8((unsigned char)b, name);
            id = tok_map_find(&t->vocab_map, &t->vocab, name, (size_t)k);
        }
        t->byte_tok[b] = id;
    }
    t->n_special = 0;
    for (int i = 0; i < n; i++) {
        int32_t ty = t->ttype[i];
        if ((ty == LLM_TOKEN_CONTROL || ty == LLM_TOKEN_USER_DEFINED || ty == LLM_TOKEN_UNKNOWN) && t->vocab.len[i] > 0)
            t->special[t->n_special++] = ((uint64_t)(UINT32_MAX - t->vocab.len[i]) << 32) | (uint32_t)i;
    }
    qsort(t->special, (size_t)t->n_special, sizeof(uint64_t), cmp_u64);

    for (size_t k = 0; k < sizeof eog_names / sizeof eog_names[0]; k++) {
        int32_t id = tok_map_find(&t->vocab_map, &t->vocab, eog_names[k], strlen(eog_names[k]));
        if (id < 0 || (t->ttype[id] != LLM_TOKEN_CONTROL && t->ttype[id] != LLM_TOKEN_USER_DEFINED)) continue;
        if (t->eot < 0 && k < 4) t->eot = id;
        t->eog[id] = 1;
    }
    for (int i = 0; i < n && t->unk < 0; i++)
        if (t->ttype[i] == LLM_TOKEN_UNKNOWN) t->unk = i; /* files often mark <unk> only by its type */
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
}

ct_status llm_tokenizer_new(const llm_tokenizer_desc *d, llm_tokenizer **out)
{
    if (!out) return core_err(CT_ERR_INVALID_ARG, "llm_tokenizer_new: out is NULL");
    *out = NULL;
    if (!d || !d->tokens || d->n_vocab <= 0)
        return core_err(CT_ERR_INVALID_ARG, "llm_tokenizer_new: empty vocabulary (n_vocab %d)", d ? d->n_vocab : 0);
    if (d->type != LLM_VOCAB_SPM && d->type != LLM_VOCAB_BPE)
        return core_err(CT_ERR_INVALID_ARG, "llm_tokenizer_new: unknown vocabulary type %d", (int)d->type);
    if (d->n_merges < 0 || (d->n_merges > 0 && !d->merges))
        return core_err(CT_ERR_INVALID_ARG, "llm_tokenizer_new: %d merges without a merge table", d->n_merges);
    ct_status st;
    if ((st = check_id("bos", d->bos, d->n_vocab)) || (st = check_id("eos", d->eos, d->n_vocab)) ||
        (st = check_id("eot", d->eot, d->n_vocab)) || (st = check_id("unknown", d->unk, d->n_vocab)) ||
        (st = check_id("padding", d->pad, d->n_vocab)))
        return st;

    llm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return core_err(CT_ERR_OOM, "llm_tokenizer_new: out of memory");
    int n = d->n_vocab;
    t->type = d->type;
    if ((st = choose_pretok(t, d))) goto fail;
    t->bos = d->bos, t->eos = d->eos, t->eot = d->eot, t->unk = d->unk, t->pad = d->pad;
    t->add_bos = d->add_bos, t->add_eos = d->add_eos, t->add_space_prefix = d->add_space_prefix;
    t->score = calloc((size_t)n, sizeof(float));
    t->ttype = calloc((size_t)n, sizeof(int32_t));
    t->eog = calloc((size_t)n, 1);
    t->special = calloc((size_t)n, sizeof(uint64_t));
    if (!t->score || !t->ttype || !t->eog || !t->special) {
        st = core_err(CT_ERR_OOM, "llm_tokenizer_new: out of memory for %d tokens", n);
        goto fail;
    }
    for (int i = 0; i < n; i++) {
        int32_t ty = d->types ? d->types[i] : LLM_TOKEN_NORMAL;
        if (ty < LLM_TOKEN_UNDEFINED || ty > LLM_TOKEN_BYTE) {
            st = core_err(CT_ERR_FORMAT, "tokenizer: token %d has invalid type %d", i, (int)ty);
            goto fail;
        }
        t->ttype[i] = ty;
        t->score[i] = d->scores ? d->scores[i] : 0.0f;
    }
    if ((st = strtab_copy(&t->vocab, "tokens", d->tokens, d->token_lens, n)) || (st = tok_map_init(&t->vocab_map, n)))
        goto fail;
    for (int i = 0; i < n; i++) tok_map_insert(&t->vocab_map, &t->vocab, i, false);
    if (d->n_merges > 0) {
        if ((st = strtab_copy(&t->merges, "merges", d->merges, d->merge_lens, d->n_merges)) ||
            (st = tok_map_init(&t->merge_map, d->n_merges)))
            goto fail;
        for (int i = 0; i < d->n_merges; i++) tok_map_insert(&t->merge_map, &t->merges, i, true);
    }
    find_special_ids(t);
    *out = t;
    return CT_OK;
fail:
    llm_tokenizer_free(t);
    return st;
}

/* ---- GGUF ---- */

static ct_status load_id(const gguf_file *f, const char *key, int32_t *id)
{
    int64_t v;
    ct_status st = gguf_get_i64_or(f, key, -1, &v);
    if (st) return st;
    if (v < -1 || v > INT32_MAX) return core_err(CT_ERR_FORMAT, "tokenizer: %s = %lld is not a token id", key, (long long)v);
    *id = (int32_t)v;
    return CT_OK;
}

static ct_status load_str_array(const gguf_file *f, const char *key, uint64_t *n, const char ***s, size_t **lens)
{
    gguf_type elem;
    const void *data;
    ct_status st = gguf_get_arr(f, key, &elem, n, &data);
    if (st) return st;
    if (elem != GGUF_TYPE_STRING) return core_err(CT_ERR_FORMAT, "tokenizer: %s is an array of %s, not strings", key, gguf_type_name(elem));
    if (*n > INT32_MAX / 2) return core_err(CT_ERR_FORMAT, "tokenizer: %s has %llu entries", key, (unsigned long long)*n);
    *s = malloc(sizeof(char *) * (*n + 1));
    *lens = malloc(sizeof(size_t) * (*n + 1));
    if (!*s || !*lens) return core_err(CT_ERR_OOM, "tokenizer: cannot index %llu strings of %s", (unsigned long long)*n, key);
    for (uint64_t i = 0; i < *n; i++)
        if ((st = gguf_get_arr_str(f, key, i, &(*s)[i], &(*lens)[i]))) return st;
    return CT_OK;
}

/* Copies a numeric array of n_vocab elements into dst (the mapping may be unaligned). */
static ct_status load_vocab_array(const gguf_file *f, const char *key, gguf_type want, uint64_t n_vocab, void *dst,
                                  bool *present)
{
    *present = false;
    if (gguf_find_key(f, key) < 0) return CT_OK;
    gguf_type elem;
    uint64_t n;
    const void *data;
    ct_status st = gguf_get_arr(f, key, &elem, &n, &data);
    if (st) return st;
    if (elem != want || n != n_vocab)
        return core_err(CT_ERR_FORMAT, "tokenizer: %s is %llu x %s, expected %llu x %s", key, (unsigned long long)n,
                        gguf_type_name(elem), (unsigned long long)n_vocab, gguf_type_name(want));
    memcpy(dst, data, (size_t)n * 4);
    *present = true;
    return CT_OK;
}

ct_status llm_tokenizer_load(const gguf_file *f, llm_tokenizer **out) { return llm_tokenizer_load_opts(f, NULL, out); }

ct_status llm_tokenizer_load_opts(const gguf_file *f, const char *bpe_pre, llm_tokenizer **out)
{
    if (!out) return core_err(CT_ERR_INVALID_ARG, "llm_tokenizer_load: out is NULL");
    *out = NULL;
    if (!f) return core_err(CT_ERR_INVALID_ARG, "llm_tokenizer_load: file is NULL");
    const char *model, *pre_s;
    size_t model_len, pre_len;
    ct_status st = gguf_get_str(f, "tokenizer.ggml.model", &model, &model_len);
    if (st) return st;
    llm_tokenizer_desc d;
    if (model_len == 5 && !memcmp(model, "llama", 5)) llm_tokenizer_desc_init(&d, LLM_VOCAB_SPM);
    else if (model_len == 4 && !memcmp(model, "gpt2", 4)) llm_tokenizer_desc_init(&d, LLM_VOCAB_BPE);
    else
        return core_err(CT_ERR_UNSUPPORTED, "%s: tokenizer model '%.*s' not supported (only llama, gpt2)", gguf_name(f),
                        (int)(model_len > 64 ? 64 : model_len), model);

    const char **tokens = NULL, **merges = NULL;
    size_t *token_lens = NULL, *merge_lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    char pre[64];
    uint64_t n_vocab = 0, n_merges = 0;
    bool have_scores = false, have_types = false;
    if ((st = load_str_array(f, "tokenizer.ggml.tokens", &n_vocab, &tokens, &token_lens))) goto done;
    if (n_vocab == 0) {
        st = core_err(CT_ERR_FORMAT, "%s: tokenizer.ggml.tokens is empty", gguf_name(f));
        goto done;
    }
    scores = malloc(sizeof(float) * n_vocab);
    types = malloc(sizeof(int32_t) * n_vocab);
    if (!scores || !types) {
        st = core_err(CT_ERR_OOM, "llm_tokenizer_load: out of memory");
        goto done;
    }
    if ((st = load_vocab_array(f, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, n_vocab, scores, &have_scores)) ||
        (st = load_vocab_array(f, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, n_vocab, types, &have_types)))
        goto done;
    if (d.type == LLM_VOCAB_BPE && gguf_find_key(f, "tokenizer.ggml.merges") >= 0 &&
        (st = load_str_array(f, "tokenizer.ggml.merges", &n_merges, &merges, &merge_lens)))
        goto done;
    if (gguf_find_key(f, "tokenizer.ggml.pre") >= 0) {
        if ((st = gguf_get_str(f, "tokenizer.ggml.pre", &pre_s, &pre_len))) goto done;
        if (pre_len >= sizeof pre) pre_len = sizeof pre - 1;
        memcpy(pre, pre_s, pre_len);
        pre[pre_len] = '\0';
        d.pre = pre;
    }
    if ((st = load_id(f, "tokenizer.ggml.bos_token_id", &d.bos)) || (st = load_id(f, "tokenizer.ggml.eos_token_id", &d.eos)) ||
        (st = load_id(f, "tokenizer.ggml.eot_token_id", &d.eot)) ||
        (st = load_id(f, "tokenizer.ggml.unknown_token_id", &d.unk)) ||
        (st = load_id(f, "tokenizer.ggml.padding_token_id", &d.pad)) ||
        (st = gguf_get_bool_or(f, "tokenizer.ggml.add_bos_token", d.add_bos, &d.add_bos)) ||
        (st = gguf_get_bool_or(f, "tokenizer.ggml.add_eos_token", d.add_eos, &d.add_eos)) ||
        (st = gguf_get_bool_or(f, "tokenizer.ggml.add_space_prefix", d.add_space_prefix, &d.add_space_prefix)))
        goto done;
    if (!bpe_pre) bpe_pre = config_current()->bpe_pre;
    if (bpe_pre && *bpe_pre) d.pre_override = bpe_pre;
    d.n_vocab = (int)n_vocab;
    d.tokens = tokens;
    d.token_lens = token_lens;
    d.scores = have_scores ? scores : NULL;
    d.types = have_types ? types : NULL;
    d.n_merges = (int)n_merges;
    d.merges = merges;
    d.merge_lens = merge_lens;
    st = llm_tokenizer_new(&d, out);
    if (st) {
        char why[512];
        snprintf(why, sizeof why, "%s", ct_last_error());
        core_err(st, "%s: %s", gguf_name(f), why);
    }
done:
    free(tokens);
    free(token_lens);
    free(merges);
    free(merge_lens);
    free(scores);
    free(types);
    return st;
}

/* ---- accessors ---- */

static bool valid_id(const llm_tokenizer *t, int32_t id) { return t && id >= 0 && id < t->vocab.n; }

llm_vocab_type llm_tokenizer_type(const llm_tokenizer *t) { return t ? t->type : LLM_VOCAB_SPM; }
llm_pretok llm_tokenizer_pretok(const llm_tokenizer *t) { return t ? t->pre : LLM_PRETOK_DEFAULT; }
int llm_vocab_size(const llm_tokenizer *t) { return t ? t->vocab.n : 0; }
const char *llm_token_text(const llm_tokenizer *t, int32_t id) { return valid_id(t, id) ? t->vocab.s[id] : NULL; }
float llm_token_score(const llm_tokenizer *t, int32_t id) { return valid_id(t, id) ? t->score[id] : 0.0f; }
llm_token_type llm_token_get_type(const llm_tokenizer *t, int32_t id)
{
    return valid_id(t, id) ? (llm_token_type)t->ttype[id] : LLM_TOKEN_UNDEFINED;
}
int32_t llm_token_lookup(const llm_tokenizer *t, const char *text, size_t len)
{
    return t && text ? tok_map_find(&t->vocab_map, &t->vocab, text, len) : -1;
}
int32_t llm_token_bos(const llm_tokenizer *t) { return t ? t->bos : -1; }
int32_t llm_token_eos(const llm_tokenizer *t) { return t ? t->eos : -1; }
int32_t llm_token_eot(const llm_tokenizer *t) { return t ? t->eot : -1; }
int32_t llm_token_unk(const llm_tokenizer *t) { return t ? t->unk : -1; }
bool llm_token_is_eog(const llm_tokenizer *t, int32_t id) { return valid_id(t, id) && t->eog[id]; }
bool llm_token_is_control(const llm_tokenizer *t, int32_t id)
{
    return valid_id(t, id) && t->ttype[id] == LLM_TOKEN_CONTROL;
}
bool llm_tokenizer_add_bos(const llm_tokenizer *t) { return t && t->add_bos && t->bos >= 0; }
bool llm_tokenizer_add_eos(const llm_tokenizer *t) { return t && t->add_eos && t->eos >= 0; }

/* ---- tokenize ---- */

typedef struct frag {
    int32_t tok; /* -1: raw text */
    size_t off, len;
} frag;

typedef struct frag_list {
    frag *v;
    size_t n, cap;
} frag_list;

static bool frag_push(frag_list *l, int32_t tok, size_t off, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        frag *v = realloc(l->v, cap * sizeof(frag));
        if (!v) return false;
        l->v = v, l->cap = cap;
    }
    l->v[l->n++] = (frag){tok, off, len};
    return true;
}

/* Splits the raw fragments on each special token's text, longest tokens first
 * (so a token containing another shorter one wins wherever both could match).
 * User-defined tokens are always split out; control and unknown ones only
 * with parse_special. */
static ct_status partition(const llm_tokenizer *t, const char *text, size_t len, bool parse_special, frag_list *out)
{
    frag_list cur = {0}, next = {0};
    if (!frag_push(&cur, -1, 0, len)) goto oom;
    for (int k = 0; k < t->n_special; k++) {
        int32_t id = (int32_t)(uint32_t)t->special[k];
        if (!parse_special && t->ttype[id] != LLM_TOKEN_USER_DEFINED) continue;
        const char *s = t->vocab.s[id];
        size_t sl = t->vocab.len[id];
        next.n = 0;
        for (size_t i = 0; i < cur.n; i++) {
            frag f = cur.v[i];
            if (f.tok >= 0 || f.len < sl) {
                if (!frag_push(&next, f.tok, f.off, f.len)) goto oom;
                continue;
            }
            size_t pos = f.off, end = f.off + f.len;
            for (;;) {
                const char *hit = end - pos >= sl ? memmem(text + pos, end - pos, s, sl) : NULL;
                if (!hit) break;
                size_t h = (size_t)(hit - text);
                if (h > pos && !frag_push(&next, -1, pos, h - pos)) goto oom;
                if (!frag_push(&next, id, h, sl)) goto oom;
                pos = h + sl;
            }
            if (pos < end && !frag_push(&next, -1, pos, end - pos)) goto oom;
        }
        frag_list tmp = cur;
        cur = next;
        next = tmp;
    }
    free(next.v);
    *out = cur;
    return CT_OK;
oom:
    free(cur.v);
    free(next.v);
    return core_err(CT_ERR_OOM, "llm_tokenize: out of memory splitting %zu bytes on special tokens", len);
}

ct_status llm_tokenize(const llm_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special,
                       int32_t *ids, int cap, int *n_out)
{
    if (!t || !n_out || (!text && len > 0) || cap < 0 || (!ids && cap > 0))
        return core_err(CT_ERR_INVALID_ARG, "llm_tokenize: NULL tokenizer, text, ids or n_out, or negative cap (%d)", cap);
    *n_out = 0;
    tok_out o = {ids, cap, 0};
    frag_list fr = {0};
    ct_status st = CT_OK;
    if (add_special && t->add_bos && t->bos >= 0) tok_out_push(&o, t->bos);
    if (len > 0) {
        if ((st = partition(t, text, len, parse_special, &fr))) return st;
        bool prev_special = true;
        for (size_t i = 0; i < fr.n && !st; i++) {
            if (fr.v[i].tok >= 0) {
                tok_out_push(&o, fr.v[i].tok);
                prev_special = true;
                continue;
            }
            if (t->type == LLM_VOCAB_SPM) st = tok_spm_encode(t, text + fr.v[i].off, fr.v[i].len, prev_special, &o);
            else st = tok_bpe_encode(t, text + fr.v[i].off, fr.v[i].len, &o);
            prev_special = false;
            if (o.n < 0) st = core_err(CT_ERR_RANGE, "llm_tokenize: more than INT_MAX tokens");
        }
        free(fr.v);
        if (st) return st;
    }
    if (add_special && t->add_eos && t->eos >= 0) tok_out_push(&o, t->eos);
    *n_out = o.n;
    if (o.n > cap)
        return core_err(CT_ERR_RANGE, "llm_tokenize: %d tokens do not fit in a buffer of %d", o.n, cap);
    return CT_OK;
}

/* ---- detokenize ---- */

static void put(char *buf, int cap, int *n, const void *src, size_t k)
{
    if (k && (size_t)*n + k <= (size_t)cap) memcpy(buf + *n, src, k);
    *n += (int)k;
}

int llm_token_to_piece(const llm_tokenizer *t, int32_t id, char *buf, int cap, bool render_special)
{
    if (!valid_id(t, id)) return -1;
    if (!buf) cap = 0;
    const char *s = t->vocab.s[id];
    size_t len = t->vocab.len[id];
    int n = 0;
    switch (t->ttype[id]) {
    case LLM_TOKEN_CONTROL:
    case LLM_TOKEN_UNKNOWN:
        if (render_special) put(buf, cap, &n, s, len);
        return n;
    case LLM_TOKEN_USER_DEFINED:
        put(buf, cap, &n, s, len);
        return n;
    case LLM_TOKEN_BYTE:
        if (t->type == LLM_VOCAB_SPM) {
            unsigned v;
            char c;
            if (len == 6 && sscanf(s, "<0x%2X>", &v) == 1) {
                c = (char)v;
                put(buf, cap, &n, &c, 1);
                return n;
            }
        }
        break; /* a malformed byte token reads as a normal one */
    case LLM_TOKEN_NORMAL:
        break;
    default: /* unused / undefined: nothing, like control tokens */
        return 0;
    }
    if (t->type == LLM_VOCAB_SPM) {
        for (size_t i = 0; i < len;) {
            if (i + 3 <= len && !memcmp(s + i, "\xe2\x96\x81", 3)) {
                put(buf, cap, &n, " ", 1);
                i += 3;
            } else {
                put(buf, cap, &n, s + i, 1);
                i++;
            }
        }
    } else {
        for (size_t i = 0; i < len;) {
            size_t k;
            uint32_t cp = tok_utf8_decode(s + i, len - i, &k);
            int b = tok_bpe_cp_to_byte(cp);
            if (b >= 0) {
                char c = (char)b;
                put(buf, cap, &n, &c, 1);
            } else {
                put(buf, cap, &n, s + i, k);
            }
            i += k;
        }
    }
    return n;
}

int llm_detokenize(const llm_tokenizer *t, const int32_t *ids, int n, char *out, int cap, bool render_special)
{
    if (!t || (!ids && n > 0) || n < 0) return 0;
    if (!out) cap = 0;
    int total = 0;
    for (int i = 0; i < n; i++) {
        int room = total < cap ? cap - total : 0;
        int k = llm_token_to_piece(t, ids[i], room ? out + total : NULL, room, render_special);
        if (k > 0) total += k;
    }
    if (total > cap) return -total;
    if (total < cap) out[total] = '\0';
    return total;
}

void llm_detok_init(llm_detok *d)
{
    memset(d, 0, sizeof *d);
}

/* Walks b[0..n): complete valid sequences are copied, each maximal invalid
 * subpart becomes U+FFFD; a valid but incomplete tail (when keep_tail) is left
 * for later and its length returned in *tail. Returns the output byte count;
 * writes only when out != NULL. */
static int utf8_clean(const unsigned char *b, size_t n, bool keep_tail, char *out, size_t *tail)
{
    static const char repl[3] = {'\xEF', '\xBF', '\xBD'};
    int w = 0;
    size_t i = 0;
    *tail = 0;
    while (i < n) {
        unsigned c = b[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF; /* range of the first continuation byte */
        if (c < 0x80) need = 1;
        else if (c >= 0xC2 && c <= 0xDF) need = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 3;
            if (c == 0xE0) lo = 0xA0;
            if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 4;
            if (c == 0xF0) lo = 0x90;
            if (c == 0xF4) hi = 0x8F;
        } else need = 0;
        size_t k = 1;
        if (need > 1) {
            for (; k < need && i + k < n; k++) {
                unsigned x = b[i + k];
                if (k == 1 ? (x < lo || x > hi) : (x & 0xC0) != 0x80) break;
            }
            if (k < need && i + k == n && keep_tail) {
                *tail = n - i;
                return w;
            }
        }
        if (need >= 1 && k == need) {
            if (out) memcpy(out + w, b + i, need);
            w += (int)need;
        } else {
            if (out) memcpy(out + w, repl, 3);
            w += 3;
        }
        i += k;
    }
    return w;
}

int llm_detok_push(llm_detok *d, const llm_tokenizer *t, int32_t id, char *out, int cap)
{
    if (!d || !valid_id(t, id)) return INT32_MIN;
    if (!out) cap = 0;
    unsigned char local[256];
    int plen = llm_token_to_piece(t, id, NULL, 0, d->render_special);
    size_t n = (size_t)d->n_pend + (size_t)plen;
    unsigned char *b = n <= sizeof local ? local : malloc(n);
    if (!b) return INT32_MIN;
    memcpy(b, d->pend, (size_t)d->n_pend);
    llm_token_to_piece(t, id, (char *)b + d->n_pend, plen, d->render_special);
    size_t tail;
    int w = utf8_clean(b, n, true, NULL, &tail);
    if (w > cap) {
        if (b != local) free(b);
        return -w;
    }
    utf8_clean(b, n, true, out, &tail);
    memcpy(d->pend, b + n - tail, tail);
    d->n_pend = (int)tail;
    if (w < cap) out[w] = '\0';
    if (b != local) free(b);
    return w;
}

int llm_detok_flush(llm_detok *d, char *out, int cap)
{
    if (!d) return INT32_MIN;
    if (!out) cap = 0;
    size_t tail;
    int w = utf8_clean(d->pend, (size_t)d->n_pend, false, NULL, &tail);
    if (w > cap) return -w;
    utf8_clean(d->pend, (size_t)d->n_pend, false, out, &tail);
    d->n_pend = 0;
    if (w < cap) out[w] = '\0';
    return w;
}
