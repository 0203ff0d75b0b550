/* Chat templates: the turn formats models were fine-tuned with, detected from
 * the file's tokenizer.chat_template (a Jinja text we recognise by its markers,
 * never execute) or chosen by name. */
#ifndef CT_LLM_CHAT_H
#define CT_LLM_CHAT_H

#include <stdbool.h>
#include <stdint.h>

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

/* Fitting a conversation into the context (llama.cpp's --keep idea): the
 * leading system messages and the newest message always stay; the oldest whole
 * turns (a user message and the replies after it) go first. */
struct llm_tokenizer;
typedef struct llm_chat_fit {
    int n_sys;    /* leading system messages (kept) */
    int first;    /* the first message kept after them; msgs[n_sys..first) were dropped */
    int32_t *ids; /* msgs[0..n_sys) + msgs[first..n) rendered and tokenized (malloc'ed, caller frees) */
    int n_ids;    /* <= budget */
    int n_all;    /* tokens the whole conversation would have taken */
    int n_min;    /* on CT_ERR_RANGE: tokens of the system messages with only the newest message */
} llm_chat_fit;

/* Keeps as many of the most recent turns as fit in budget tokens (rendered
 * with add_assistant and tokenized with add_special and parse_special, as a
 * chat prompt is). msgs[n-1] must be a user message. CT_ERR_RANGE when even
 * the system messages with the newest message alone exceed budget (out->n_min
 * says how many tokens they take; out->ids is then NULL). */
ct_status llm_chat_fit_context(const struct llm_tokenizer *tok, llm_chat_tmpl t, const llm_chat_msg *msgs, int n,
                               int budget, llm_chat_fit *out);

#endif
