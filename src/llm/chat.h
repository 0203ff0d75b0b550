/* Chat templates: the turn formats models were fine-tuned with, detected from
 * the file's tokenizer.chat_template (a Jinja text we recognise by its markers,
 * never execute) or chosen by name. */
#ifndef CT_LLM_CHAT_H
#define CT_LLM_CHAT_H

#include <stdbool.h>

#include "ctorch/core.h"

typedef enum llm_chat_tmpl {
    LLM_CHAT_ZEPHYR,  /* <|user|>\n...</s>\n<|assistant|>\n  (TinyLlama-Chat) */
    LLM_CHAT_GEMMA,   /* <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n */
    LLM_CHAT_LLAMA3,  /* <|start_header_id|>user<|end_header_id|>\n\n...<|eot_id|> */
    LLM_CHAT_CHATML,  /* <|im_start|>user\n...<|im_end|>\n */
    LLM_CHAT_LLAMA2,  /* [INST] ... [/INST] */
    LLM_CHAT_COUNT
} llm_chat_tmpl;

typedef struct llm_chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content;
} llm_chat_msg;

/* "zephyr", "gemma", "llama3", "chatml", "llama2". */
const char *llm_chat_name(llm_chat_tmpl t);
/* Accepts the names above (case-insensitive) and a few aliases (tinyllama, gemma3). */
ct_status llm_chat_from_name(const char *name, llm_chat_tmpl *out);
/* From the Jinja text (NULL or unrecognised: false). */
bool llm_chat_detect(const char *jinja, llm_chat_tmpl *out);
/* Renders msgs; add_assistant appends the opening of the assistant's turn.
 * The result (malloc'ed, caller frees) contains special-token strings to be
 * tokenized with parse_special; it never starts with BOS (the tokenizer adds it). */
ct_status llm_chat_format(llm_chat_tmpl t, const llm_chat_msg *msgs, int n, bool add_assistant, char **out);

#endif
