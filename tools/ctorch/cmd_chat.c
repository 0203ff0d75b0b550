/* ctorch chat -m MODEL [--template NAME] [-s SYSTEM] [options]
 * Interactive chat with the model's template: options, loading and the
 * template choice here; the conversation loop is chat_repl.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat_repl.h"
#include "cli.h"
#include "llm/chat.h"
#include "llm/generate.h"
#include "llm_cli.h"

static int usage(void)
{
    fprintf(stderr, "usage: ctorch chat -m MODEL.gguf [--template zephyr|gemma|llama3|chatml|llama2] [-s SYSTEM]\n"
                    "       [-n MAX_REPLY_TOKENS] [--temp T] [--top-k K] [--top-p P] [--min-p P]\n"
                    "       [--repeat-penalty R] [--seed S] [-t THREADS] [-c CTX] [-d DEVICES] [--kv-f32]\n"
                    "  at the prompt: /help lists the commands, /exit (or Ctrl-D) quits; Ctrl-C stops a reply\n");
    return 2;
}

int cmd_chat(int argc, char **argv)
{
    llm_cli_opts o = {0};
    llm_sampler_params sp;
    llm_sampler_params_default(&sp);
    const char *tmpl_name = NULL, *system = NULL;
    int n_predict = -1;
    bool seeded = false;
    for (int i = 1; i < argc; i++) {
        int c = llm_cli_common_arg("chat", &o, argc, argv, &i);
        if (c < 0) return 2;
        if (c > 0) continue;
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help") || i + 1 >= argc) return usage();
        const char *v = argv[++i];
        bool ok = true;
        if (!strcmp(a, "--template") || !strcmp(a, "--chat-template")) tmpl_name = v;
        else if (!strcmp(a, "-s") || !strcmp(a, "--system")) system = v;
        else if (!strcmp(a, "-n")) ok = llm_cli_int(v, &n_predict);
        else if (!strcmp(a, "--temp")) ok = llm_cli_float(v, &sp.temperature);
        else if (!strcmp(a, "--top-k")) ok = llm_cli_int(v, &sp.top_k);
        else if (!strcmp(a, "--top-p")) ok = llm_cli_float(v, &sp.top_p);
        else if (!strcmp(a, "--min-p")) ok = llm_cli_float(v, &sp.min_p);
        else if (!strcmp(a, "--repeat-penalty")) ok = llm_cli_float(v, &sp.repeat_penalty);
        else if (!strcmp(a, "--seed")) {
            char *e;
            sp.seed = strtoull(v, &e, 10);
            ok = *e == 0 && e != v;
            seeded = true;
        } else {
            fprintf(stderr, "ctorch chat: error: unknown option %s\n", a);
            return usage();
        }
        if (!ok) {
            fprintf(stderr, "ctorch chat: error: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!o.model) return usage();
    if (!seeded) sp.seed = (uint64_t)time(NULL);

    llm_model *m = llm_cli_load("chat", &o, true);
    if (!m) return 1;
    int rc = 1;
    llm_session s = {0};
    llm_chat_tmpl tmpl;
    if (tmpl_name) {
        if (llm_chat_from_name(tmpl_name, &tmpl) != CT_OK) {
            rc = llm_cli_fail("chat");
            goto out;
        }
    } else if (!llm_chat_detect(m->chat_template, &tmpl)) {
        tmpl = strcmp(m->arch->name, "gemma3") == 0 ? LLM_CHAT_GEMMA : LLM_CHAT_ZEPHYR;
        fprintf(stderr, "note: %s; using %s (override with --template)\n",
                m->chat_template ? "the file's chat template is not one ctorch knows" : "the file has no chat template",
                llm_chat_name(tmpl));
    }
    int n_ctx = llm_cli_ctx(&o, m);
    if (llm_session_init(&s, m, n_ctx, o.kv_f32 ? CT_F32 : CT_F16, &sp) != CT_OK) {
        rc = llm_cli_fail("chat");
        goto out;
    }
    chat_repl_cfg rc_cfg = {.m = m, .s = &s, .tmpl = tmpl, .system = system, .n_predict = n_predict};
    rc = chat_repl_run(&rc_cfg);
out:
    llm_session_free(&s);
    llm_model_free(m);
    return rc;
}
