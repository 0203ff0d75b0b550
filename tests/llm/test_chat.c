/* Chat templates: exact renderings of a fixed conversation for every format,
 * detection from real templates' marker strings, names and error paths. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/chat.h"

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

int main(void)
{
    RUN(test_formats);
    RUN(test_detect);
    RUN(test_names);
    RUN(test_errors);
    return th_finish();
}
