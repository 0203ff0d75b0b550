/* The conversation loop of `ctorch chat`: reads lines (libedit on a terminal
 * when built with it, else getline), runs the slash commands, keeps the
 * conversation within the context and streams the replies. */
#ifndef CTORCH_TOOLS_CHAT_REPL_H
#define CTORCH_TOOLS_CHAT_REPL_H

#include "llm/chat.h"
#include "llm/generate.h"

typedef struct chat_repl_cfg {
    llm_model *m;
    llm_session *s;     /* initialised with the context size and the sampler */
    llm_chat_tmpl tmpl;
    const char *system; /* initial system prompt or NULL */
    int n_predict;      /* reply length limit, < 0: none */
} chat_repl_cfg;

/* Runs until /exit, end of input or Ctrl-C at the prompt; returns the exit code. */
int chat_repl_run(const chat_repl_cfg *cfg);

#endif
