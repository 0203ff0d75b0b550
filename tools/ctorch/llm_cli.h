/* What the model commands (run, chat, bench, perplexity) share: the common
 * options (-m -t -c -d -ngl --kv-f32), loading with progress, the device report,
 * tokenizing into a growing buffer, one-line error reports. */
#ifndef CTORCH_TOOLS_LLM_CLI_H
#define CTORCH_TOOLS_LLM_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "llm/chat.h"
#include "llm/model.h"
#include "llm/sampler.h"
#include "opts.h"

typedef struct llm_cli_opts {
    const char *model;   /* -m */
    int threads;         /* -t, 0 = default */
    int n_ctx;           /* -c, 0 = default */
    const char *devices; /* -d, NULL = default chain */
    bool kv_f32;         /* --kv-f32 */
    const char *gpu_layers_arg; /* -ngl as given: N, all or auto (NULL) */
    int gpu_layers;      /* from it (llm_cli_check): layers to offload, -1 = as many as fit */
    const char *bpe_pre; /* --bpe-pre: BPE pre-tokenizer instead of the file's, NULL = the file's */
} llm_cli_opts;

/* The option-table entries every model command shares (-c is per command:
 * perplexity needs a larger minimum). */
#define LLM_CLI_OPTS(o)                                                                                            \
    {"-m|--model", "FILE", CLI_STRING, &(o)->model, 0, 0, NULL, "the GGUF model (required)"},                     \
    {"-t|--threads", "N", CLI_INT, &(o)->threads, 1, CLI_NOMAX, NULL,                                                    \
     "CPU threads (default: CTORCH_THREADS, else all; capped at the hardware threads)"},                           \
    {"-d|--devices", "LIST", CLI_STRING, &(o)->devices, 0, 0, NULL,                                                \
     "cpu, cuda, opencl, auto or a chain like cuda:0,cpu (default auto)"},                                         \
    {"-ngl|--gpu-layers|--n-gpu-layers", "N", CLI_STRING, &(o)->gpu_layers_arg, 0, 0, NULL,                        \
     "layers to offload to the chain's first device when it is not the CPU, counted from the last (N > layers: "  \
     "the output too); all, or auto (default: as many as fit)"},                                                  \
    {"--kv-f32", NULL, CLI_FLAG, &(o)->kv_f32, 0, 0, NULL, "f32 KV cache (default f16)"},                         \
    {"--bpe-pre", "NAME", CLI_STRING, &(o)->bpe_pre, 0, 0, NULL,                                                   \
     "byte-level BPE pre-tokenizer to use instead of the file's (e.g. gpt2 for a name ctorch does not know)"}
#define LLM_CLI_CTX_OPT(o, min)                                                                                    \
    {"-c|--ctx-size", "N", CLI_INT, &(o)->n_ctx, (min), CLI_NOMAX, NULL,                                                 \
     "context length (default min(model's, 4096); 0 = default)"}

/* Sampling options shared by run and chat; seed is an int64_t (-1 = from the clock). */
#define LLM_CLI_SAMPLING_OPTS(sp, seed)                                                                            \
    {"--temp", "T", CLI_FLOAT, &(sp)->temperature, 0, CLI_NOMAX, NULL, "temperature (default 0.8; 0 = greedy)"},   \
    {"--top-k", "K", CLI_INT, &(sp)->top_k, 0, CLI_NOMAX, NULL, "top-k sampling (default 40; 0 = off)"},           \
    {"--top-p", "P", CLI_FLOAT, &(sp)->top_p, 0, 1, NULL, "top-p sampling (default 0.95; 1 = off)"},                \
    {"--min-p", "P", CLI_FLOAT, &(sp)->min_p, 0, 1, NULL, "min-p sampling (default 0.05; 0 = off)"},                \
    {"--repeat-penalty", "R", CLI_FLOAT, &(sp)->repeat_penalty, 0, CLI_NOMAX, NULL,                                \
     "penalty on repeated tokens (default 1.0 = off; must be > 0)"},                                               \
    {"--repeat-last-n", "N", CLI_INT, &(sp)->repeat_last_n, -1, CLI_NOMAX, NULL,                                   \
     "history the penalty looks at (default 64; -1 = all)"},                                                       \
    {"-s|--seed", "S", CLI_I64, (seed), -1, CLI_NOMAX, NULL, "random seed (default -1: a new one each run)"}

/* After parsing: -m is given and names a regular file, -t is capped. -1 to go
 * on, else the exit code after one error line. */
int llm_cli_check(const char *cmd, llm_cli_opts *o);
/* Checks what the table's ranges cannot express; -1 to go on, else 2 after one line.
 * Then turns a seed of -1 into one from the clock. */
int llm_cli_check_sampling(const char *cmd, llm_sampler_params *sp, int64_t seed);
/* --chat-template NAME|FILE: a built-in name, else a file whose Jinja text is
 * recognised as one of them (file_only: --chat-template-file). 0 ok, else 2
 * after one line naming the argument. */
int llm_cli_chat_template(const char *cmd, const char *arg, bool file_only, llm_chat_tmpl *out);
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
/* Prints per-device op counts and time since the last reset (stderr). */
void llm_cli_print_devices_used(void);

#endif
