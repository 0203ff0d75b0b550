/* Reads tests/llm/gen_pretok_vectors.py's vectors files (llama.cpp token ids
 * per pre-tokenizer name) and checks llm_tokenize against them. Included by
 * test_pretok.c and test_pretok_smollm2.c only. */
#ifndef CT_TESTS_PRETOK_VECTORS_H
#define CT_TESTS_PRETOK_VECTORS_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/tokenizer_int.h"

/* tests/llm/data/NAME, found next to this source file (no CMake variable needed). */
static inline char *pv_data_path(const char *name)
{
    const char *src = __FILE__;
    const char *slash = strrchr(src, '/');
    size_t dir = slash ? (size_t)(slash - src) : 1;
    char *p = malloc(dir + strlen(name) + 8);
    if (!p) return NULL;
    if (slash) {
        memcpy(p, src, dir);
        p[dir] = '\0';
    } else {
        strcpy(p, ".");
    }
    strcat(p, "/data/");
    strcat(p, name);
    return p;
}

static inline char *pv_read_file(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) return NULL;
    char *buf = NULL;
    long n = -1;
    if (fseek(fp, 0, SEEK_END) == 0) n = ftell(fp);
    if (n >= 0 && fseek(fp, 0, SEEK_SET) == 0) buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, fp) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(fp);
    if (buf) buf[n] = '\0', *len = (size_t)n;
    return buf;
}

static inline int pv_hex(int c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

typedef struct pv_text {
    char *s;
    size_t len;
} pv_text;

/* Escaped copy of a text for messages. */
static inline const char *pv_show(const pv_text *t, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < t->len && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)t->s[i];
        o += (size_t)snprintf(buf + o, cap - o, c >= 0x20 && c < 0x7F && c != '\\' ? "%c" : "\\x%02x", c);
    }
    buf[o] = '\0';
    return buf;
}

/* Appends the text of a "T <index> <hex>" line; false on a malformed line or OOM. */
static inline bool pv_add_text(const char *line, pv_text **texts, int *n_texts)
{
    int idx = atoi(line + 2);
    const char *hex = strchr(line + 2, ' ');
    CHECK_MSG(idx == *n_texts && hex, "bad text line '%.40s'", line);
    if (idx != *n_texts || !hex) return false;
    pv_text *nt = realloc(*texts, sizeof *nt * (size_t)(*n_texts + 1));
    if (!nt) return false;
    *texts = nt;
    size_t hl = strlen(++hex);
    pv_text *t = &nt[*n_texts];
    t->s = malloc(hl / 2 + 1);
    t->len = hl / 2;
    if (!t->s) return false;
    for (size_t i = 0; i < hl / 2; i++) t->s[i] = (char)(pv_hex(hex[2 * i]) * 16 + pv_hex(hex[2 * i + 1]));
    (*n_texts)++;
    return true;
}

/* The texts (T lines) of a vectors file; *n their count. */
static inline pv_text *pv_load_texts(const char *path, int *n)
{
    size_t len = 0;
    char *buf = pv_read_file(path, &len), *save = NULL;
    pv_text *texts = NULL;
    *n = 0;
    for (char *line = buf ? strtok_r(buf, "\n", &save) : NULL; line; line = strtok_r(NULL, "\n", &save))
        if (line[0] == 'T' && !pv_add_text(line, &texts, n)) break;
    free(buf);
    return texts;
}

static inline void pv_free_texts(pv_text *texts, int n)
{
    for (int i = 0; i < n; i++) free(texts[i].s);
    free(texts);
}

/* Tokenizes with the tokenizer made by `make` for each name of a V/S line and
 * compares with the line: V lines hold ids, S lines token byte lengths (the
 * code points of the byte-level token text). Returns the cases checked. */
typedef llm_tokenizer *(*pv_make_fn)(const char *name, void *ctx);

typedef struct pv_cache {
    char name[32][48];
    llm_tokenizer *tok[32];
    int n;
} pv_cache;

static inline llm_tokenizer *pv_get(pv_cache *c, const char *name, pv_make_fn make, void *ctx)
{
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name)) return c->tok[i];
    if (c->n == 32) {
        CHECK_MSG(0, "more than 32 pre-tokenizer names in one file");
        return NULL;
    }
    snprintf(c->name[c->n], sizeof c->name[0], "%s", name);
    c->tok[c->n] = make(name, ctx);
    return c->tok[c->n++];
}

static inline int pv_utf8_chars(const char *s)
{
    int n = 0;
    for (; *s; s++) n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

static inline bool pv_check_case(llm_tokenizer *t, const char *nm, int idx, const pv_text *text, bool lens,
                          const int32_t *want, int n_want, int32_t *ids, int *failed)
{
    int n = 0;
    ct_status st = llm_tokenize(t, text->s, text->len, false, false, ids, 4096, &n);
    if (st == CT_OK && lens)
        for (int i = 0; i < n; i++) ids[i] = pv_utf8_chars(llm_token_text(t, ids[i]));
    bool same = st == CT_OK && n == n_want && !memcmp(ids, want, sizeof(int32_t) * (size_t)n);
    if (!same && (*failed)++ < 12) {
        char got_s[160] = "", want_s[160] = "", show[256];
        for (int i = 0, o = 0; st == CT_OK && i < n && o < 140; i++) o += snprintf(got_s + o, 160 - (size_t)o, " %d", ids[i]);
        for (int i = 0, o = 0; i < n_want && o < 140; i++) o += snprintf(want_s + o, 160 - (size_t)o, " %d", want[i]);
        CHECK_MSG(0, "%s #%d \"%s\": %s%s, llama.cpp%s", nm, idx, pv_show(text, show, sizeof show),
                  lens ? "token lengths" : "ids", got_s, want_s);
    }
    return same;
}

static inline int pv_check_file(const char *path, pv_make_fn make, void *ctx)
{
    size_t len = 0;
    char *buf = pv_read_file(path, &len);
    CHECK_MSG(buf != NULL, "cannot read %s", path);
    if (!buf) return 0;
    pv_text *texts = NULL;
    int n_texts = 0, checked = 0, failed = 0;
    pv_cache cache = {.n = 0};
    int32_t *ids = malloc(sizeof(int32_t) * 4096), *want = malloc(sizeof(int32_t) * 4096);
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line && ids && want; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == 'T') {
            if (!pv_add_text(line, &texts, &n_texts)) break;
        } else if (line[0] == 'V' || line[0] == 'S') {
            char names[1024];
            int idx = -1, off = 0, n_want = 0;
            if (sscanf(line + 2, "%1023s %d%n", names, &idx, &off) != 2 || idx < 0 || idx >= n_texts) {
                CHECK_MSG(0, "%s: bad line '%.40s'", path, line);
                break;
            }
            for (char *p = line + 2 + off, *e; n_want < 4096; p = e) {
                long v = strtol(p, &e, 10);
                if (e == p) break;
                want[n_want++] = (int32_t)v;
            }
            char *save2 = NULL;
            for (char *nm = strtok_r(names, ",", &save2); nm; nm = strtok_r(NULL, ",", &save2)) {
                llm_tokenizer *t = pv_get(&cache, nm, make, ctx);
                if (!t) continue;
                pv_check_case(t, nm, idx, &texts[idx], line[0] == 'S', want, n_want, ids, &failed);
                checked++;
            }
        }
    }
    if (failed) fprintf(stderr, "%s: %d of %d cases differ from llama.cpp\n", path, failed, checked);
    for (int i = 0; i < cache.n; i++) llm_tokenizer_free(cache.tok[i]);
    pv_free_texts(texts, n_texts);
    free(ids);
    free(want);
    free(buf);
    return checked;
}

#endif
