/* The tokenizer's API edges on hand-made vocabularies: every check of
 * llm_tokenizer_new (with the id or count it names), the accessors on NULL and
 * out-of-range ids, add_eos, duplicate vocabulary strings (the last id wins, as in
 * llama.cpp's token map) and duplicate merges (the first rank wins), pieces of every
 * token type, and the streaming detokenizer's UTF-8 repair (U+FFFD for each maximal
 * invalid subpart, as the Unicode standard recommends), its buffer-size protocol and
 * pieces longer than its stack buffer. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/tokenizer.h"

#define REPL "\xEF\xBF\xBD"

static bool msg_has(const char *needle)
{
    bool ok = strstr(ct_last_error(), needle) != NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ct_last_error(), needle);
    return ok;
}

/* SPM: <unk> <s> </s>, 256 byte tokens <0x00>..<0xFF>, then a few words. */
enum { SPM_BYTES = 3, SPM_WORDS = 259, SPM_N = 266 };
static char g_names[SPM_N][320];
static const char *g_toks[SPM_N];
static int32_t g_types[SPM_N];
static float g_scores[SPM_N];

static llm_tokenizer *spm(bool add_eos, int32_t eos)
{
    for (int i = 0; i < SPM_N; i++) {
        g_types[i] = 1;
        g_scores[i] = -(float)i;
        if (i < 3) snprintf(g_names[i], sizeof g_names[i], "%s", i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
        else if (i < SPM_WORDS) snprintf(g_names[i], sizeof g_names[i], "<0x%02X>", i - SPM_BYTES);
        g_types[i] = i == 0 ? 2 : i < 3 ? 3 : i < SPM_WORDS ? 6 : 1;
        g_toks[i] = g_names[i];
    }
    int w = SPM_WORDS;
    snprintf(g_names[w], 320, "\xe2\x96\x81" "a");               /* 259: normal */
    snprintf(g_names[w + 1], 320, "<tool>");                     /* 260: user-defined */
    g_types[w + 1] = 4;
    snprintf(g_names[w + 2], 320, "<unused0>");                  /* 261: unused */
    g_types[w + 2] = 5;
    snprintf(g_names[w + 3], 320, "<0xZZ>");                     /* 262: a malformed byte token */
    g_types[w + 3] = 6;
    memset(g_names[w + 4], 'y', 300);                            /* 263: a 300-byte piece */
    g_names[w + 4][300] = 0;
    snprintf(g_names[w + 5], 320, "\xe2\x96\x81" "a");           /* 264: the same string as 259 */
    snprintf(g_names[w + 6], 320, "b");                          /* 265 */
    llm_tokenizer_desc d;
    llm_tokenizer_desc_init(&d, LLM_VOCAB_SPM);
    d.n_vocab = SPM_N;
    d.tokens = g_toks;
    d.types = g_types;
    d.scores = g_scores;
    d.bos = 1;
    d.eos = eos;
    d.unk = 0;
    d.add_eos = add_eos;
    llm_tokenizer *t = NULL;
    CHECK_OK(llm_tokenizer_new(&d, &t));
    return t;
}

static void test_new_checks(void)
{
    const char *toks[3] = {"a", "b", "c"};
    llm_tokenizer_desc d;
    llm_tokenizer *t = (llm_tokenizer *)1;
    llm_tokenizer_desc_init(&d, LLM_VOCAB_SPM);
    d.tokens = toks;
    d.n_vocab = 3;
    CHECK_STATUS(llm_tokenizer_new(&d, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_tokenizer_new(NULL, &t), CT_ERR_INVALID_ARG);
    CHECK(t == NULL);
    d.n_vocab = 0;
    CHECK_STATUS(llm_tokenizer_new(&d, &t), CT_ERR_INVALID_ARG);
    CHECK(msg_has("n_vocab 0"));
    d.n_vocab = 3;
    d.tokens = NULL;
    CHECK_STATUS(llm_tokenizer_new(&d, &t), CT_ERR_INVALID_ARG);
    d.tokens = toks;
    d.type = (llm_vocab_type)7;
    CHECK_STATUS(llm_tokenizer_new(&d, &t), CT_ERR_INVALID_ARG);
    CHECK(msg_has("vocabulary type 7"));
    d.type = LLM_VOCAB_BPE;
    d.n_merges = -1;
    CHECK_STATUS(llm_tokenizer_new(&d, &t), CT_ERR_INVALID_ARG);
    d.n_merges = 2;
    CHECK_STATUS(llm_tokenizer_new(&d, &t), CT_ERR_INVALID_ARG);
    CHECK(msg_has("2 merges without a merge table"));
    d.n_merges = 0;
    static const char *const names[5] = {"bos", "eos", "eot", "unknown", "padding"};
    for (int k = 0; k < 5; k++) {
        llm_tokenizer_desc e = d;
        int32_t *id = k == 0 ? &e.bos : k == 1 ? &e.eos : k == 2 ? &e.eot : k == 3 ? &e.unk : &e.pad;
        for (int bad = 0; bad < 2; bad++) {
            *id = bad ? -2 : 3;
            CHECK_STATUS(llm_tokenizer_new(&e, &t), CT_ERR_FORMAT);
            char want[64];
            snprintf(want, sizeof want, "%s id %d outside the vocabulary [0, 3)", names[k], bad ? -2 : 3);
            CHECK(msg_has(want));
            CHECK(t == NULL);
        }
    }
}

static void test_accessors(void)
{
    CHECK(llm_tokenizer_type(NULL) == LLM_VOCAB_SPM);
    CHECK(llm_vocab_size(NULL) == 0);
    CHECK(llm_token_score(NULL, 0) == 0.0f);
    CHECK(llm_token_get_type(NULL, 0) == LLM_TOKEN_UNDEFINED);
    CHECK(llm_token_lookup(NULL, "a", 1) == -1);
    CHECK(llm_token_bos(NULL) == -1 && llm_token_eos(NULL) == -1 && llm_token_eot(NULL) == -1 &&
          llm_token_unk(NULL) == -1);
    CHECK(!llm_token_is_eog(NULL, 0) && !llm_token_is_control(NULL, 1));
    CHECK(!llm_tokenizer_add_bos(NULL) && !llm_tokenizer_add_eos(NULL));
    CHECK(llm_token_text(NULL, 0) == NULL);
    llm_tokenizer *t = spm(true, 2);
    if (!t) return;
    CHECK(llm_tokenizer_type(t) == LLM_VOCAB_SPM);
    CHECK(llm_vocab_size(t) == SPM_N);
    CHECK(llm_token_score(t, 265) == -265.0f);
    CHECK(llm_token_score(t, SPM_N) == 0.0f && llm_token_score(t, -1) == 0.0f);
    CHECK(llm_token_get_type(t, 260) == LLM_TOKEN_USER_DEFINED);
    CHECK(llm_token_get_type(t, SPM_N) == LLM_TOKEN_UNDEFINED);
    CHECK(llm_token_lookup(t, NULL, 0) == -1);
    CHECK(llm_token_lookup(t, "\xe2\x96\x81" "a", 4) == 264); /* duplicate string: the last id */
    CHECK(llm_token_lookup(t, "zz", 2) == -1);
    CHECK(llm_token_is_control(t, 1) && !llm_token_is_control(t, 259) && !llm_token_is_control(t, SPM_N));
    CHECK(llm_token_is_eog(t, 2) && !llm_token_is_eog(t, 259) && !llm_token_is_eog(t, -5));
    CHECK(llm_token_bos(t) == 1 && llm_token_eos(t) == 2 && llm_token_unk(t) == 0 && llm_token_eot(t) == -1);
    CHECK(llm_tokenizer_add_bos(t) && llm_tokenizer_add_eos(t));
    /* add_eos: the EOS id ends the sequence when special tokens are added */
    int32_t ids[8];
    int n = 0;
    CHECK_OK(llm_tokenize(t, "b", 1, true, false, ids, 8, &n));
    /* " b": U+2581 has no token, so its three bytes, then "b" */
    CHECK_MSG(n == 6 && ids[0] == 1 && ids[1] == SPM_BYTES + 0xE2 && ids[4] == 265 && ids[5] == 2, "n %d", n);
    llm_tokenizer_free(t);
    /* add_eos without an EOS id adds nothing */
    t = spm(true, -1);
    if (!t) return;
    CHECK(!llm_tokenizer_add_eos(t));
    CHECK_OK(llm_tokenize(t, "b", 1, true, false, ids, 8, &n));
    CHECK(n >= 2 && ids[0] == 1 && ids[n - 1] != 2);
    llm_tokenizer_free(t);
}

static void test_pieces(void)
{
    llm_tokenizer *t = spm(false, 2);
    if (!t) return;
    char buf[512];
    CHECK(llm_token_to_piece(t, 260, buf, sizeof buf, false) == 6 && !memcmp(buf, "<tool>", 6)); /* user-defined: always */
    CHECK(llm_token_to_piece(t, 1, buf, sizeof buf, false) == 0);                                 /* control: hidden */
    CHECK(llm_token_to_piece(t, 1, buf, sizeof buf, true) == 3 && !memcmp(buf, "<s>", 3));
    CHECK(llm_token_to_piece(t, 0, buf, sizeof buf, true) == 5 && !memcmp(buf, "<unk>", 5));
    CHECK(llm_token_to_piece(t, 261, buf, sizeof buf, true) == 0); /* unused: nothing */
    CHECK(llm_token_to_piece(t, 262, buf, sizeof buf, false) == 6 && !memcmp(buf, "<0xZZ>", 6));
    CHECK(llm_token_to_piece(t, 3 + 0x41, buf, sizeof buf, false) == 1 && buf[0] == 'A');
    CHECK(llm_token_to_piece(t, 259, buf, sizeof buf, false) == 2 && !memcmp(buf, " a", 2));
    CHECK(llm_token_to_piece(t, 263, buf, 10, false) == 300); /* too small: the length needed */
    CHECK(llm_token_to_piece(t, SPM_N, buf, sizeof buf, false) == -1);
    /* llm_detokenize: size protocol and argument checks */
    int32_t ids[3] = {259, 265, 260};
    CHECK(llm_detokenize(t, ids, 3, buf, sizeof buf, false) == 9 && !strcmp(buf, " ab<tool>"));
    CHECK(llm_detokenize(t, ids, 3, NULL, 0, false) == -9);
    CHECK(llm_detokenize(t, ids, 3, buf, 9, false) == 9 && !memcmp(buf, " ab<tool>", 9));
    CHECK(llm_detokenize(t, ids, 3, buf, 4, false) == -9);
    CHECK(llm_detokenize(NULL, ids, 3, buf, sizeof buf, false) == 0);
    CHECK(llm_detokenize(t, NULL, 3, buf, sizeof buf, false) == 0);
    CHECK(llm_detokenize(t, ids, -1, buf, sizeof buf, false) == 0);
    llm_tokenizer_free(t);
}

/* Pushes byte tokens; returns what came out in total. */
static int push_bytes(llm_detok *d, const llm_tokenizer *t, const unsigned char *b, int n, char *out, int cap)
{
    int w = 0;
    for (int i = 0; i < n; i++) {
        int k = llm_detok_push(d, t, SPM_BYTES + b[i], out + w, cap - w);
        CHECK(k >= 0);
        if (k > 0) w += k;
    }
    return w;
}

static void test_detok_utf8(void)
{
    llm_tokenizer *t = spm(false, 2);
    if (!t) return;
    char out[1024];
    llm_detok d;
    static const struct {
        unsigned char in[6];
        int n;
        const char *want;
    } cases[] = {
        {{0xF4, 0x8F, 0xBF, 0xBF}, 4, "\xF4\x8F\xBF\xBF"}, /* U+10FFFF, the last code point */
        {{0xF4, 0x90, 0x80, 0x80}, 4, REPL REPL REPL REPL}, /* above U+10FFFF */
        {{0xF0, 0x90, 0x80, 0x80}, 4, "\xF0\x90\x80\x80"}, /* U+10000 */
        {{0xF0, 0x8F, 0xBF, 0xBF}, 4, REPL REPL REPL REPL}, /* overlong */
        {{0xE0, 0xA0, 0x80}, 3, "\xE0\xA0\x80"},
        {{0xE0, 0x9F, 0xBF}, 3, REPL REPL REPL},            /* overlong */
        {{0xED, 0xA0, 0x80}, 3, REPL REPL REPL},            /* a surrogate */
        {{0xE2, 0x82, 'x'}, 3, REPL "x"},                   /* truncated, then ASCII */
        {{0xC0, 0xAF}, 2, REPL REPL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llm_detok_init(&d);
        int w = push_bytes(&d, t, cases[i].in, cases[i].n, out, sizeof out);
        int f = llm_detok_flush(&d, out + w, (int)sizeof out - w);
        CHECK(f >= 0);
        w += f > 0 ? f : 0;
        CHECK_MSG(w == (int)strlen(cases[i].want) && !memcmp(out, cases[i].want, (size_t)w), "case %zu: %d bytes", i, w);
    }
    /* an incomplete sequence waits; flush turns it into one U+FFFD, and reports the room it needs */
    llm_detok_init(&d);
    unsigned char head[2] = {0xF0, 0x9F};
    CHECK(push_bytes(&d, t, head, 2, out, sizeof out) == 0);
    CHECK(llm_detok_flush(&d, out, 2) == -3);
    CHECK(llm_detok_flush(&d, NULL, 0) == -3);
    CHECK(llm_detok_flush(&d, out, sizeof out) == 3 && !memcmp(out, REPL, 3));
    CHECK(llm_detok_flush(&d, out, sizeof out) == 0);
    CHECK(llm_detok_flush(NULL, out, sizeof out) == INT32_MIN);
    /* too small a buffer: -needed and the state is kept, so a retry gives the text */
    llm_detok_init(&d);
    CHECK(llm_detok_push(&d, t, 263, out, 100) == -300);
    CHECK(llm_detok_push(&d, t, 263, NULL, 0) == -300);
    CHECK(llm_detok_push(&d, t, 263, out, sizeof out) == 300 && out[0] == 'y' && out[299] == 'y' && out[300] == 0);
    unsigned char e2[1] = {0xE2};
    CHECK(push_bytes(&d, t, e2, 1, out, sizeof out) == 0);
    CHECK(llm_detok_push(&d, t, 263, out, 100) == -303);
    CHECK(llm_detok_push(&d, t, 263, out, sizeof out) == 303 && !memcmp(out, REPL, 3) && out[3] == 'y');
    CHECK(llm_detok_push(&d, t, SPM_N, out, sizeof out) == INT32_MIN);
    CHECK(llm_detok_push(NULL, t, 3, out, sizeof out) == INT32_MIN);
    llm_tokenizer_free(t);
}

/* Byte-level BPE: a duplicated merge keeps its first rank; a token whose characters
 * are not in the byte map reads as its own UTF-8. */
static void test_bpe_merges(void)
{
    const char *toks[7] = {"a", "b", "c", "ab", "bc", "\xe4\xb8\xad", "<|endoftext|>"};
    int32_t types[7] = {1, 1, 1, 1, 1, 1, 3};
    const char *merges[3] = {"a b", "b c", "a b"};
    llm_tokenizer_desc d;
    llm_tokenizer_desc_init(&d, LLM_VOCAB_BPE);
    d.n_vocab = 7;
    d.tokens = toks;
    d.types = types;
    d.n_merges = 3;
    d.merges = merges;
    d.eos = 6;
    llm_tokenizer *t = NULL;
    CHECK_OK(llm_tokenizer_new(&d, &t));
    if (!t) return;
    int32_t ids[8];
    int n = 0;
    /* rank("a b") = 0 < rank("b c") = 1: "abc" -> ab c (a last-wins rank 2 would give a bc) */
    CHECK_OK(llm_tokenize(t, "abc", 3, false, false, ids, 8, &n));
    CHECK_MSG(n == 2 && ids[0] == 3 && ids[1] == 2, "n %d ids %d %d", n, ids[0], ids[1]);
    char buf[16];
    CHECK(llm_token_to_piece(t, 5, buf, sizeof buf, false) == 3 && !memcmp(buf, "\xe4\xb8\xad", 3));
    CHECK(llm_token_is_eog(t, 6) && !llm_tokenizer_add_bos(t));
    llm_tokenizer_free(t);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_new_checks);
    RUN(test_accessors);
    RUN(test_pieces);
    RUN(test_detok_utf8);
    RUN(test_bpe_merges);
    return th_finish();
}
