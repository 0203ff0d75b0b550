/* Tokenizers against llama.cpp's files in ../shared/refdata: the LLaMA SentencePiece
 * vectors and mini-a prompts (exact ids), detokenization against llama.cpp's generated
 * text, special tokens and the streaming UTF-8 decoder on the LLaMA vocabulary.
 * Registered once per sub-test (tests/CMakeLists.txt) so that each says "skipped" in
 * ctest's summary when the data is absent. */
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/tokenizer_int.h"
#include "tok_util.h"

/* ---- helpers ---- */

static char *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = '\0', *len = (size_t)n;
    return b;
}

static char *refpath(const char *rel)
{
    const char *r = th_refdata();
    if (!r) return NULL;
    char *p = malloc(strlen(r) + strlen(rel) + 2);
    sprintf(p, "%s/%s", r, rel);
    return p;
}

static llm_tokenizer *load_llama_vocab(void)
{
    char *p = refpath("tokenizer/ggml-vocab-llama-spm.gguf");
    gguf_file *f = NULL;
    llm_tokenizer *t = NULL;
    if (!p || gguf_open(p, &f) != CT_OK) {
        th_skip("no LLaMA vocab under CTORCH_REFDATA");
        free(p);
        return NULL;
    }
    CHECK_OK(llm_tokenizer_load(f, &t));
    gguf_close(f); /* the tokenizer keeps its own copies */
    free(p);
    return t;
}

static int parse_ints(const char *s, const char **end, int32_t *out, int cap)
{
    int n = 0;
    char *e;
    for (;;) {
        while (*s == ' ' || *s == ',' || *s == '\n' || *s == '\t' || *s == '[') s++;
        long v = strtol(s, &e, 10);
        if (e == s) break;
        if (n < cap) out[n] = (int32_t)v;
        n++;
        s = e;
    }
    if (end) *end = s;
    return n;
}

/* A JSON string literal at s (after the opening quote) into out; handles the escapes the files use. */
static size_t parse_json_str(const char *s, char *out)
{
    size_t n = 0;
    for (; *s && *s != '"'; s++) {
        if (*s != '\\') {
            out[n++] = *s;
            continue;
        }
        s++;
        if (*s == 'n') out[n++] = '\n';
        else if (*s == 't') out[n++] = '\t';
        else if (*s == 'u') {
            unsigned cp = (unsigned)strtoul((char[5]){s[1], s[2], s[3], s[4], 0}, NULL, 16);
            s += 4;
            if (cp < 0x80) out[n++] = (char)cp;
            else if (cp < 0x800) out[n++] = (char)(0xC0 | (cp >> 6)), out[n++] = (char)(0x80 | (cp & 0x3F));
            else
                out[n++] = (char)(0xE0 | (cp >> 12)), out[n++] = (char)(0x80 | ((cp >> 6) & 0x3F)),
                out[n++] = (char)(0x80 | (cp & 0x3F));
        } else out[n++] = *s;
    }
    out[n] = '\0';
    return n;
}

/* ---- SentencePiece against llama.cpp ---- */

static void test_spm_llama_vectors(void)
{
    llm_tokenizer *t = load_llama_vocab();
    if (!t) return;
    CHECK(llm_tokenizer_type(t) == LLM_VOCAB_SPM);
    CHECK(llm_vocab_size(t) == 32000);
    CHECK(llm_token_bos(t) == 1 && llm_token_eos(t) == 2 && llm_token_unk(t) == 0);
    CHECK(llm_tokenizer_add_bos(t) && !llm_tokenizer_add_eos(t));
    CHECK(llm_token_is_eog(t, 2) && !llm_token_is_eog(t, 1) && !llm_token_is_eog(t, 450));
    CHECK(strcmp(llm_token_text(t, 450), "\xe2\x96\x81The") == 0);
    CHECK(llm_token_lookup(t, "<0x0A>", 6) == 13);
    CHECK(llm_token_get_type(t, 13) == LLM_TOKEN_BYTE && llm_token_is_control(t, 1));

    char *pi = refpath("tokenizer/ggml-vocab-llama-spm.gguf.inp"), *po = refpath("tokenizer/ggml-vocab-llama-spm.gguf.out");
    size_t li = 0, lo = 0;
    char *inp = read_all(pi, &li), *outp = read_all(po, &lo);
    CHECK(inp && outp);
    const char *sep = "\n__ggml_vocab_test__\n";
    const char *s = inp, *o = outp;
    int n_cases = 0;
    int32_t want[512];
    char dec[2048];
    while (inp && outp && s < inp + li) {
        const char *e = strstr(s, sep);
        if (!e) break;
        const char *eol = strchr(o, '\n');
        if (!eol) eol = o + strlen(o);
        char line[4096];
        memcpy(line, o, (size_t)(eol - o));
        line[eol - o] = '\0';
        int nw = parse_ints(line, NULL, want, 512);
        int n;
        int32_t *got = tok(t, s, (size_t)(e - s), false, false, &n);
        CHECK_MSG(same_ids(got, n, want, nw), "case %d [%.*s]: %d ids, want %d", n_cases, (int)(e - s), s, n, nw);
        /* Byte fallback makes the round trip exact: the pieces are " " + text. */
        int k = llm_detokenize(t, got, n, dec, sizeof dec, false);
        CHECK_MSG(k == (e - s) + (e > s) && (e == s || (dec[0] == ' ' && !memcmp(dec + 1, s, (size_t)(e - s)))),
                  "case %d round trip", n_cases);
        free(got);
        n_cases++;
        s = e + strlen(sep);
        o = *eol ? eol + 1 : eol;
    }
    CHECK_MSG(n_cases == 46, "%d cases", n_cases);
    free(inp), free(outp), free(pi), free(po);
    llm_tokenizer_free(t);
}

static void test_spm_mini_a_prompts(void)
{
    llm_tokenizer *t = load_llama_vocab();
    if (!t) return;
    char *p = refpath("mini-a/tokens.json");
    size_t len = 0;
    char *js = read_all(p, &len);
    CHECK(js);
    int n_prompts = 0;
    for (const char *s = js; js && (s = strstr(s, "\"prompt\": \"")); n_prompts++) {
        char text[1024];
        int32_t want[256];
        size_t tl = parse_json_str(s + 11, text);
        const char *ids = strstr(s, "\"ids\":");
        int nw = parse_ints(ids + 6, &s, want, 256);
        int n;
        int32_t *got = tok(t, text, tl, true, false, &n);
        CHECK_MSG(same_ids(got, n, want, nw), "prompt %d: %d ids, want %d", n_prompts, n, nw);
        free(got);
    }
    CHECK(n_prompts == 5);
    free(js), free(p);

    /* llama.cpp's generated text: concatenated pieces, specials not rendered. */
    p = refpath("mini-a/greedy.json");
    js = read_all(p, &len);
    CHECK(js);
    int n_gen = 0;
    for (const char *s = js; js && (s = strstr(s, "\"gen_ids\": [")); n_gen++) {
        int32_t ids[64];
        int n = parse_ints(s + 12, &s, ids, 64);
        const char *h = strstr(s, "\"gen_text_hex\": \"") + 17;
        char got[1024], hex[2100];
        int k = llm_detokenize(t, ids, n, got, sizeof got, false);
        CHECK(k > 0);
        for (int i = 0; i < k; i++) sprintf(hex + 2 * i, "%02x", (unsigned char)got[i]);
        CHECK_MSG(!strncmp(hex, h, (size_t)(2 * k)) && h[2 * k] == '"', "generation %d", n_gen);
    }
    CHECK(n_gen == 20);
    free(js), free(p);
    llm_tokenizer_free(t);
}

static void test_spm_special_and_errors(void)
{
    llm_tokenizer *t = load_llama_vocab();
    if (!t) return;
    const char *s = "<s>Hi</s> there";
    int n, n2;
    int32_t *a = tok(t, s, strlen(s), false, true, &n);
    /* Text after a special token gets the space prefix again, like llama.cpp. */
    int32_t *hi = tok(t, "Hi", 2, false, false, &n2);
    int n3;
    int32_t *there = tok(t, " there", 6, false, false, &n3); /* "▁▁there": prefix + the space */
    CHECK(n >= 3 && a[0] == 1);
    CHECK(n2 >= 1 && n == 2 + n2 + n3 && !memcmp(a + 1, hi, sizeof(int32_t) * (size_t)n2) && a[1 + n2] == 2 &&
          !memcmp(a + 2 + n2, there, sizeof(int32_t) * (size_t)n3));
    free(hi), free(there);
    int32_t *b = tok(t, s, strlen(s), false, false, &n2);
    for (int i = 0; i < n2; i++) CHECK(b[i] != 1 && b[i] != 2);
    char buf[64];
    CHECK(llm_token_to_piece(t, 1, buf, sizeof buf, false) == 0);
    CHECK(llm_token_to_piece(t, 1, buf, sizeof buf, true) == 3 && !memcmp(buf, "<s>", 3));
    CHECK(llm_token_to_piece(t, 13, buf, sizeof buf, false) == 1 && buf[0] == '\n');
    CHECK(llm_token_to_piece(t, 450, buf, 2, false) == 4); /* too small: the size needed */
    CHECK(llm_token_to_piece(t, 32000, buf, sizeof buf, false) == -1);
    CHECK(llm_token_text(t, -1) == NULL);
    free(a), free(b);

    /* add_special: BOS only (add_eos false); empty text gives just BOS. */
    int32_t ids[4];
    CHECK_OK(llm_tokenize(t, "", 0, true, false, ids, 4, &n));
    CHECK(n == 1 && ids[0] == 1);
    CHECK_OK(llm_tokenize(t, "", 0, false, false, ids, 0, &n));
    CHECK(n == 0);
    CHECK_OK(llm_tokenize(t, NULL, 0, false, false, NULL, 0, &n));
    CHECK_STATUS(llm_tokenize(t, "Hello world", 11, true, false, ids, 2, &n), CT_ERR_RANGE);
    CHECK(n == 3);
    CHECK_STATUS(llm_tokenize(NULL, "a", 1, true, false, ids, 4, &n), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_tokenize(t, NULL, 1, true, false, ids, 4, &n), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_tokenize(t, "a", 1, true, false, NULL, 4, &n), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_tokenize(t, "a", 1, true, false, ids, -1, &n), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_tokenize(t, "a", 1, true, false, ids, 4, NULL), CT_ERR_INVALID_ARG);
    llm_tokenizer_free(t);
    llm_tokenizer_free(NULL);
}

/* ---- streaming detokenizer ---- */

static void test_detok_stream(void)
{
    llm_tokenizer *t = load_llama_vocab();
    if (!t) return;
    /* U+1F600 and U+1F389 are not in the vocabulary: 4 byte tokens each. */
    const char *s = "a\xF0\x9F\x98\x80\xF0\x9F\x8E\x89 \xC3\xA9t\xC3\xA9";
    int n;
    int32_t *ids = tok(t, s, strlen(s), false, false, &n);
    int n_byte = 0;
    for (int i = 0; i < n; i++) n_byte += llm_token_get_type(t, ids[i]) == LLM_TOKEN_BYTE;
    CHECK(n_byte >= 8);
    llm_detok d;
    llm_detok_init(&d);
    char out[256];
    int w = 0;
    for (int i = 0; i < n; i++) {
        char piece[32];
        int k = llm_detok_push(&d, t, ids[i], piece, sizeof piece);
        CHECK(k >= 0);
        /* Never a partial UTF-8 sequence: every emitted chunk ends on a character boundary. */
        if (k > 0) {
            unsigned last = (unsigned char)piece[k - 1];
            CHECK(last < 0x80 || (last & 0xC0) == 0x80);
            size_t j = (size_t)k;
            while (j > 0 && ((unsigned char)piece[j - 1] & 0xC0) == 0x80) j--;
            CHECK(j > 0 && tok_utf8_len((unsigned char)piece[j - 1]) == (size_t)k - j + 1);
        }
        memcpy(out + w, piece, (size_t)k);
        w += k;
    }
    CHECK(llm_detok_flush(&d, out + w, 8) == 0);
    CHECK(w == (int)strlen(s) + 1 && out[0] == ' ' && !memcmp(out + 1, s, strlen(s)));
    free(ids);

    /* Too small a buffer: -needed and the state is kept. */
    int32_t e9[2] = {3 + 0xC3, 3 + 0xA9};
    llm_detok_init(&d);
    CHECK(llm_detok_push(&d, t, e9[0], out, sizeof out) == 0 && d.n_pend == 1);
    CHECK(llm_detok_push(&d, t, e9[1], out, 1) == -2 && d.n_pend == 1);
    CHECK(llm_detok_push(&d, t, e9[1], out, sizeof out) == 2 && !memcmp(out, "\xC3\xA9", 2) && d.n_pend == 0);
    /* Invalid byte -> U+FFFD; a dangling lead byte is replaced at flush. */
    CHECK(llm_detok_push(&d, t, 3 + 0xFF, out, sizeof out) == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(llm_detok_push(&d, t, 3 + 0xE2, out, sizeof out) == 0);
    CHECK(llm_detok_push(&d, t, 3 + 0x82, out, sizeof out) == 0);
    CHECK(llm_detok_push(&d, t, 450, out, sizeof out) == 3 + 4 && !memcmp(out, "\xEF\xBF\xBD The", 7));
    CHECK(llm_detok_push(&d, t, 3 + 0xF0, out, sizeof out) == 0);
    CHECK(llm_detok_flush(&d, out, 2) == -3);
    CHECK(llm_detok_flush(&d, out, sizeof out) == 3 && !memcmp(out, "\xEF\xBF\xBD", 3) && d.n_pend == 0);
    /* Control tokens: hidden unless render_special. */
    CHECK(llm_detok_push(&d, t, 2, out, sizeof out) == 0);
    d.render_special = true;
    CHECK(llm_detok_push(&d, t, 2, out, sizeof out) == 4 && !memcmp(out, "</s>", 4));
    CHECK(llm_detok_push(&d, t, 99999, out, sizeof out) == INT32_MIN);
    CHECK(llm_detok_push(&d, t, -1, out, sizeof out) == INT32_MIN);
    /* Whole-sequence form with a short buffer. */
    int32_t two[2] = {450, 4996};
    CHECK(llm_detokenize(t, two, 2, out, 5, false) == -10);
    CHECK(llm_detokenize(t, two, 2, out, sizeof out, false) == 10 && !strcmp(out, " The quick"));
    llm_tokenizer_free(t);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_spm_llama_vectors);
    RUN(test_spm_mini_a_prompts);
    RUN(test_spm_special_and_errors);
    RUN(test_detok_stream);
    return th_finish();
}
