/* Chat templates: exact renderings of a fixed conversation for every format,
 * detection from real templates' marker strings, names and error paths. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/chat.h"
#include "llm/tokenizer.h"

static const llm_chat_msg g_conv[] = {
    {"system", "You are terse."},
    {"user", "Hi there"},
    {"assistant", " Hello! "},
    {"user", "2+2?\n"},
};
#define N_CONV 4

static void expect(llm_chat_tmpl t, const llm_chat_msg *m, int n, bool add, const char *want)
{
    char *got = NULL;
    CHECK_OK(llm_chat_format(t, m, n, add, &got));
    CHECK_MSG(got && strcmp(got, want) == 0, "%s:\n got  [%s]\n want [%s]", llm_chat_name(t), got ? got : "(null)",
              want);
    free(got);
}

static void test_formats(void)
{
    /* The wanted strings are what the models' own Jinja templates render (HF apply_chat_template). */
    expect(LLM_CHAT_ZEPHYR, g_conv, N_CONV, true,
           "<|system|>\nYou are terse.</s>\n<|user|>\nHi there</s>\n<|assistant|>\n Hello! </s>\n"
           "<|user|>\n2+2?\n</s>\n<|assistant|>\n");
    expect(LLM_CHAT_GEMMA, g_conv, N_CONV, true,
           "<start_of_turn>user\nYou are terse.\n\nHi there<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
           "<start_of_turn>user\n2+2?<end_of_turn>\n<start_of_turn>model\n");
    expect(LLM_CHAT_LLAMA3, g_conv, N_CONV, true,
           "<|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\nHello!<|eot_id|>"
           "<|start_header_id|>user<|end_header_id|>\n\n2+2?<|eot_id|>"
           "<|start_header_id|>assistant<|end_header_id|>\n\n");
    expect(LLM_CHAT_CHATML, g_conv, N_CONV, true,
           "<|im_start|>system\nYou are terse.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n"
           "<|im_start|>assistant\n Hello! <|im_end|>\n<|im_start|>user\n2+2?\n<|im_end|>\n<|im_start|>assistant\n");
    expect(LLM_CHAT_LLAMA2, g_conv, N_CONV, true,
           "[INST] <<SYS>>\nYou are terse.\n<</SYS>>\n\nHi there [/INST] Hello! </s><s>[INST] 2+2? [/INST]");
    /* Without the assistant opening, and a single user turn. */
    expect(LLM_CHAT_CHATML, g_conv + 1, 1, false, "<|im_start|>user\nHi there<|im_end|>\n");
    expect(LLM_CHAT_GEMMA, g_conv + 1, 1, true, "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n");
    /* No messages at all: only the opening. */
    expect(LLM_CHAT_ZEPHYR, NULL, 0, true, "<|assistant|>\n");
    expect(LLM_CHAT_LLAMA3, NULL, 0, false, "");
}

static void test_detect(void)
{
    struct {
        const char *jinja;
        llm_chat_tmpl want;
    } cases[] = {
        /* Excerpts of the templates shipped in the models' GGUF files. */
        {"{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
         "eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n' + message['content'] + eos_token }}",
         LLM_CHAT_ZEPHYR},
        {"{{ bos_token }}{% for message in loop_messages %}{{ '<start_of_turn>' + role + '\n' }}", LLM_CHAT_GEMMA},
        {"{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' %}", LLM_CHAT_LLAMA3},
        {"{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n'}}", LLM_CHAT_CHATML},
        {"{{ bos_token + '[INST] ' + message['content'] + ' [/INST]' }}", LLM_CHAT_LLAMA2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        llm_chat_tmpl t = LLM_CHAT_COUNT;
        CHECK(llm_chat_detect(cases[i].jinja, &t));
        CHECK_MSG(t == cases[i].want, "case %zu: got %s want %s", i, llm_chat_name(t), llm_chat_name(cases[i].want));
    }
    llm_chat_tmpl t;
    CHECK(!llm_chat_detect("{{ messages }}", &t));
    CHECK(!llm_chat_detect(NULL, &t));
}

static void test_names(void)
{
    for (int i = 0; i < LLM_CHAT_COUNT; i++) {
        llm_chat_tmpl t = LLM_CHAT_COUNT;
        CHECK_OK(llm_chat_from_name(llm_chat_name((llm_chat_tmpl)i), &t));
        CHECK(t == (llm_chat_tmpl)i);
    }
    llm_chat_tmpl t;
    CHECK_OK(llm_chat_from_name("TinyLlama", &t));
    CHECK(t == LLM_CHAT_ZEPHYR);
    CHECK_OK(llm_chat_from_name("gemma3", &t));
    CHECK(t == LLM_CHAT_GEMMA);
    CHECK_STATUS(llm_chat_from_name("vicuna", &t), CT_ERR_NOT_FOUND);
    CHECK_STATUS(llm_chat_from_name(NULL, &t), CT_ERR_INVALID_ARG);
    CHECK(strcmp(llm_chat_name(LLM_CHAT_COUNT), "?") == 0);
}

static void test_errors(void)
{
    char *out = NULL;
    llm_chat_msg bad_role[] = {{"tool", "x"}};
    CHECK_STATUS(llm_chat_format(LLM_CHAT_CHATML, bad_role, 1, true, &out), CT_ERR_INVALID_ARG);
    CHECK(out == NULL);
    llm_chat_msg no_content[] = {{"user", NULL}};
    CHECK_STATUS(llm_chat_format(LLM_CHAT_CHATML, no_content, 1, true, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_chat_format(LLM_CHAT_CHATML, NULL, 1, true, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_chat_format(LLM_CHAT_CHATML, g_conv, 1, true, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_chat_format(LLM_CHAT_COUNT, g_conv, 1, true, &out), CT_ERR_INVALID_ARG);
}

/* ---- fitting a conversation into the context ----
 * A vocabulary of byte tokens only (SentencePiece with byte fallback, BOS, no
 * space prefix) makes a text of L bytes without spaces exactly 1 + L tokens, so
 * the expected sizes below come from string lengths, not from the renderer. */
static llm_tokenizer *byte_vocab(void)
{
    static char names[259][8];
    const char *toks[259];
    int32_t types[259];
    float scores[259] = {0};
    strcpy(names[0], "<unk>"), strcpy(names[1], "<s>"), strcpy(names[2], "</s>");
    types[0] = LLM_TOKEN_UNKNOWN, types[1] = types[2] = LLM_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(names[3 + b], sizeof names[0], "<0x%02X>", b);
        types[3 + b] = LLM_TOKEN_BYTE;
    }
    for (int i = 0; i < 259; i++) toks[i] = names[i];
    llm_tokenizer_desc d;
    llm_tokenizer_desc_init(&d, LLM_VOCAB_SPM);
    d.n_vocab = 259, d.tokens = toks, d.types = types, d.scores = scores;
    d.unk = 0, d.bos = 1, d.eos = 2, d.add_bos = true, d.add_space_prefix = false;
    llm_tokenizer *t = NULL;
    CHECK_OK(llm_tokenizer_new(&d, &t));
    return t;
}

/* ChatML bytes of one message: "<|im_start|>" role "\n" content "<|im_end|>\n". */
static int chatml_len(const llm_chat_msg *m) { return 12 + (int)strlen(m->role) + 1 + (int)strlen(m->content) + 11; }

static void test_fit(void)
{
    llm_tokenizer *tok = byte_vocab();
    if (!tok) return;
    /* system, then 5 turns of user + assistant, then the newest user message */
    llm_chat_msg msgs[12];
    static char text[12][64];
    msgs[0] = (llm_chat_msg){"system", "Be-brief."};
    for (int i = 1; i < 12; i++) {
        memset(text[i], 'a' + i, (size_t)(5 + 3 * i));
        text[i][5 + 3 * i] = 0;
        msgs[i] = (llm_chat_msg){i % 2 ? "user" : "assistant", text[i]};
    }
    const int n = 12, opening = 22; /* "<|im_start|>assistant\n" */
    int whole = 1 + opening;
    for (int i = 0; i < n; i++) whole += chatml_len(&msgs[i]);
    const int minimal = 1 + opening + chatml_len(&msgs[0]) + chatml_len(&msgs[n - 1]);
    for (int budget = minimal - 3; budget <= whole + 3; budget++) {
        /* expected: the earliest user message from which the rest (with the system message) fits */
        int want_first = -1, want_n = 0;
        for (int f = 1; f < n && want_first < 0; f += 2) {
            int len = 1 + opening + chatml_len(&msgs[0]);
            for (int i = f; i < n; i++) len += chatml_len(&msgs[i]);
            if (len <= budget) want_first = f, want_n = len;
        }
        llm_chat_fit fit;
        ct_status st = llm_chat_fit_context(tok, LLM_CHAT_CHATML, msgs, n, budget, &fit);
        CHECK(fit.n_sys == 1);
        if (want_first < 0) {
            CHECK_MSG(fit.n_min == minimal, "budget %d: n_min %d, want %d", budget, fit.n_min, minimal);
            CHECK_MSG(st == CT_ERR_RANGE && fit.ids == NULL, "budget %d below %d: %s", budget, minimal,
                      ct_status_name(st));
            CHECK(strstr(ct_last_error(), "newest message") != NULL);
            continue;
        }
        CHECK_MSG(st == CT_OK && fit.first == want_first && fit.n_ids == want_n,
                  "budget %d: first %d (%d tokens), want %d (%d tokens)", budget, fit.first, fit.n_ids, want_first,
                  want_n);
        CHECK_MSG(fit.n_all == whole, "budget %d: n_all %d, want %d", budget, fit.n_all, whole);
        /* the ids are the kept messages rendered: system first, the newest message last */
        char buf[1024];
        int w = fit.ids ? llm_detokenize(tok, fit.ids, fit.n_ids, buf, (int)sizeof buf - 1, false) : -1;
        if (w >= 0) buf[w] = 0;
        CHECK(w > 0 && strncmp(buf, "<|im_start|>system\nBe-brief.<|im_end|>\n", 39) == 0);
        CHECK(w > 0 && strstr(buf, text[n - 1]) != NULL);
        CHECK(w > 0 && (want_first == 1 || strstr(buf, text[want_first - 1]) == NULL));
        free(fit.ids);
    }
    /* Gemma folds the system text into the first kept user turn: it must survive the dropping. */
    llm_chat_fit fit;
    CHECK_OK(llm_chat_fit_context(tok, LLM_CHAT_GEMMA, msgs, n, minimal + 40, &fit));
    char buf[1024];
    int w = fit.ids ? llm_detokenize(tok, fit.ids, fit.n_ids, buf, (int)sizeof buf - 1, false) : -1;
    if (w >= 0) buf[w] = 0;
    CHECK(fit.first > 1 && w > 0 && strstr(buf, "Be-brief.") != NULL && strstr(buf, text[n - 1]) != NULL);
    free(fit.ids);
    /* no system message: nothing is kept but turns */
    CHECK_OK(llm_chat_fit_context(tok, LLM_CHAT_CHATML, msgs + 1, n - 1, 1000, &fit));
    CHECK(fit.n_sys == 0 && fit.first == 0);
    free(fit.ids);
    /* errors: the newest message must be the user's; no tokenizer; no messages */
    CHECK_STATUS(llm_chat_fit_context(tok, LLM_CHAT_CHATML, msgs, n - 1, 1000, &fit), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_chat_fit_context(NULL, LLM_CHAT_CHATML, msgs, n, 1000, &fit), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_chat_fit_context(tok, LLM_CHAT_CHATML, msgs, 0, 1000, &fit), CT_ERR_INVALID_ARG);
    llm_tokenizer_free(tok);
}

int main(void)
{
    RUN(test_formats);
    RUN(test_detect);
    RUN(test_names);
    RUN(test_errors);
    RUN(test_fit);
    return th_finish();
}
