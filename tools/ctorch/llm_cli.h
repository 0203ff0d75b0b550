/* What the model commands (run, chat, bench, perplexity) share: the common
 * options (-m -t -c -d --kv-f32), loading with progress, the device report,
 * tokenizing into a growing buffer, one-line error reports. */
#ifndef CTORCH_TOOLS_LLM_CLI_H
#define CTORCH_TOOLS_LLM_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "llm/model.h"

typedef struct llm_cli_opts {
    const char *model;   /* -m */
    int threads;         /* -t, 0 = default */
    int n_ctx;           /* -c, 0 = default */
    const char *devices; /* -d, NULL = default chain */
    bool kv_f32;         /* --kv-f32 */
} llm_cli_opts;

/* Consumes argv[*i] (and its value) when it is a common option: 1 consumed,
 * 0 not a common option, -1 bad value (message printed). */
int llm_cli_common_arg(const char *cmd, llm_cli_opts *o, int argc, char **argv, int *i);
/* Sets threads and devices, loads and places the model with progress on
 * stderr, prints the chain and the placement. NULL after one error line. */
llm_model *llm_cli_load(const char *cmd, const llm_cli_opts *o, bool need_tokenizer);
/* Context length: -c when given (capped at the model's), else min(model's, 4096). */
int llm_cli_ctx(const llm_cli_opts *o, const llm_model *m);
/* "ctorch CMD: error: <last error>" on stderr; returns 1. */
int llm_cli_fail(const char *cmd);
/* Tokenizes into a malloc'ed array; NULL after an error (message via ct_last_error). */
int32_t *llm_cli_tokenize(const llm_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                          int *n);
/* Reads a whole file (NUL-terminated); NULL if unreadable. */
char *llm_cli_read_file(const char *path, size_t *len);
/* Prints per-device op counts and time since the last reset (stderr). */
void llm_cli_print_devices_used(void);
/* Parses a positive int / a float; false on junk. */
bool llm_cli_int(const char *s, int *out);
bool llm_cli_float(const char *s, float *out);

#endif
