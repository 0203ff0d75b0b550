/* Chat templates at their edges: detection needs both zephyr markers, Gemma folds
 * the system text into the first user turn and trims tabs and carriage returns as
 * its template's trim does, llama3 trims too, a reply turn is left open only when
 * asked; bad message arrays are refused with the message index. Expected texts are
 * the models' published templates rendered by hand. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/chat.h"

static void expect(llm_chat_tmpl t, const llm_chat_msg *m, int n, bool add, const char *want)
{
    char *got = NULL;
    CHECK_OK(llm_chat_format(t, m, n, add, &got));
    CHECK_MSG(got && !strcmp(got, want), "%s: got \"%s\"", llm_chat_name(t), got ? got : "(null)");
    free(got);
}

static void test_detect(void)
{
    llm_chat_tmpl t = LLM_CHAT_COUNT;
    CHECK(!llm_chat_detect("{{ '<|assistant|>' }}", &t)); /* one zephyr marker is not enough */
    CHECK(t == LLM_CHAT_COUNT);
    CHECK(llm_chat_detect("{{ '<|user|>' }}{{ '<|assistant|>' }}", &t) && t == LLM_CHAT_ZEPHYR);
    CHECK(!llm_chat_detect(NULL, &t) && !llm_chat_detect("x", NULL));
}

static void test_trim_and_turns(void)
{
    const llm_chat_msg m[3] = {{"system", "\t Be brief.\r\n"}, {"user", " \thi\r"}, {"assistant", "yo\n"}};
    expect(LLM_CHAT_GEMMA, m, 3, false,
           "<start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\nyo<end_of_turn>\n");
    expect(LLM_CHAT_GEMMA, m + 1, 1, true, "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n");
    expect(LLM_CHAT_LLAMA3, m + 1, 1, false, "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>");
    expect(LLM_CHAT_ZEPHYR, m + 1, 1, false, "<|user|>\n \thi\r</s>\n");
    expect(LLM_CHAT_CHATML, m, 0, true, "<|im_start|>assistant\n");
}

static void test_bad_messages(void)
{
    char *out = (char *)1;
    const llm_chat_msg bad[2] = {{"user", "a"}, {NULL, "b"}}, nocontent[1] = {{"user", NULL}};
    CHECK_STATUS(llm_chat_format(LLM_CHAT_GEMMA, NULL, 1, true, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_chat_format(LLM_CHAT_GEMMA, bad, -1, true, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_chat_format(LLM_CHAT_GEMMA, bad, 2, true, &out), CT_ERR_INVALID_ARG);
    CHECK(strstr(ct_last_error(), "message 1 has no role or content") != NULL);
    CHECK_STATUS(llm_chat_format(LLM_CHAT_GEMMA, nocontent, 1, true, &out), CT_ERR_INVALID_ARG);
    CHECK(strstr(ct_last_error(), "message 0") != NULL);
    CHECK(out == NULL);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_detect);
    RUN(test_trim_and_turns);
    RUN(test_bad_messages);
    return th_finish();
}
