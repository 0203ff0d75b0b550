/* ctorch chat -m MODEL [--chat-template NAME|FILE] [-sys SYSTEM] [options]
 * Interactive chat with the model's template: options, loading and the
 * template choice here; the conversation loop is chat_repl.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat_repl.h"
#include "cli.h"
#include "llm/chat.h"
#include "llm/generate.h"
#include "llm_cli.h"

typedef struct chat_opts {
    llm_cli_opts o;
    llm_sampler_params sp;
    const char *tmpl_arg, *tmpl_file, *system;
    int n_predict;
    int64_t seed;
    bool ignore_eos, escape, have_tmpl;
    llm_chat_tmpl tmpl;
} chat_opts;

static int parse_args(chat_opts *c, int argc, char **argv)
{
    llm_cli_opts *o = &c->o;
    const cli_opt opts[] = {
        LLM_CLI_OPTS(o),
        LLM_CLI_CTX_OPT(o, 0),
        {"--chat-template|--template", "NAME|FILE", CLI_STRING, &c->tmpl_arg, 0, 0, NULL,
         "zephyr, gemma, llama3, chatml, llama2, or a Jinja file recognised as one of them (default: from the model)"},
        {"--chat-template-file", "FILE", CLI_STRING, &c->tmpl_file, 0, 0, NULL, "a Jinja template file (as above)"},
        {"-sys|--system-prompt", "TEXT", CLI_STRING, &c->system, 0, 0, NULL, "system prompt"},
        {"-e|--escape", NULL, CLI_FLAG, &c->escape, 0, 0, NULL,
         "process escapes in the system prompt: \\n \\r \\t \\\\ \\' \\\" \\xNN"},
        {"-n|--n-predict", "N", CLI_INT, &c->n_predict, -1, CLI_NOMAX, NULL,
         "most tokens per reply (default -1: until end of turn or full context)"},
        LLM_CLI_SAMPLING_OPTS(&c->sp, &c->seed),
        {"--ignore-eos", NULL, CLI_FLAG, &c->ignore_eos, 0, 0, NULL, "never stop a reply at end-of-turn (needs -n)"},
    };
    const cli_spec spec = {"chat", "chat -m MODEL.gguf [options]",
                           "at the prompt: /help lists the commands, /exit (or Ctrl-D, Ctrl-C) quits; Ctrl-C during a reply stops it\n", opts,
                           CLI_N(opts), 0};
    int rc = cli_parse(&spec, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    if (c->tmpl_arg && c->tmpl_file)
        return cli_usage_error("chat", "--chat-template and --chat-template-file conflict: give one");
    if (c->ignore_eos && c->n_predict < 0)
        return cli_usage_error("chat", "--ignore-eos needs -n N, or a reply would only end when the context is full");
    if ((rc = llm_cli_check_sampling("chat", &c->sp, c->seed)) >= 0) return rc;
    if (c->tmpl_arg || c->tmpl_file) {
        if (llm_cli_chat_template("chat", c->tmpl_arg ? c->tmpl_arg : c->tmpl_file, !c->tmpl_arg, &c->tmpl))
            return 2;
        c->have_tmpl = true;
    }
    return llm_cli_check("chat", o); /* usage errors first: this one looks at the file */
}

int cmd_chat(int argc, char **argv)
{
    chat_opts c = {.n_predict = -1, .seed = -1};
    llm_sampler_params_default(&c.sp);
    int rc = parse_args(&c, argc, argv);
    if (rc >= 0) return rc;
    const llm_cli_opts o = c.o;
    llm_sampler_params sp = c.sp;
    const int n_predict = c.n_predict;
    char *system = NULL;
    if (c.system) {
        system = strdup(c.system);
        if (!system) {
            fprintf(stderr, "ctorch chat: error: out of memory\n");
            return 1;
        }
        if (c.escape) system[cli_unescape(system, strlen(system))] = 0;
    }

    llm_model *m = llm_cli_load("chat", &o, true);
    if (!m) {
        free(system);
        return 1;
    }
    rc = 1;
    llm_session s = {0};
    llm_chat_tmpl tmpl = c.tmpl;
    if (!c.have_tmpl && !llm_chat_detect(m->chat_template, &tmpl)) {
        tmpl = strcmp(m->arch->name, "gemma3") == 0 ? LLM_CHAT_GEMMA : LLM_CHAT_ZEPHYR;
        cli_log(CT_LOG_WARN, "note: %s; using %s (override with --chat-template)\n",
                m->chat_template ? "the file's chat template is not one ctorch knows" : "the file has no chat template",
                llm_chat_name(tmpl));
    }
    int n_ctx = llm_cli_ctx(&o, m);
    if (llm_session_init(&s, m, n_ctx, o.kv_f32 ? CT_F32 : CT_F16, &sp) != CT_OK) {
        rc = llm_cli_fail("chat");
        goto out;
    }
    s.ignore_eog = c.ignore_eos;
    chat_repl_cfg rc_cfg = {.m = m, .s = &s, .tmpl = tmpl, .system = system, .n_predict = n_predict};
    rc = chat_repl_run(&rc_cfg);
out:
    llm_session_free(&s);
    llm_model_free(m);
    free(system);
    return rc;
}
