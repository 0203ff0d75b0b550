/* ctorch chat -m MODEL [--chat-template NAME|FILE] [-sys SYSTEM] [options]
 * Interactive chat with the model's template. Each turn the whole conversation
 * is rendered and tokenized; only the tokens after the part already in the KV
 * cache are evaluated. Ctrl-C stops the current reply; at the prompt it (or
 * Ctrl-D, /exit) ends the program. /reset starts a new conversation. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "llm/chat.h"
#include "llm/generate.h"
#include "llm_cli.h"

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
}

typedef struct reply {
    char *p;
    size_t n, cap;
} reply;

static bool on_piece(const char *text, int len, void *ctx)
{
    reply *r = ctx;
    fwrite(text, 1, (size_t)len, stdout);
    fflush(stdout);
    if (r->n + (size_t)len + 1 > r->cap) {
        size_t cap = (r->cap ? r->cap : 256);
        while (cap < r->n + (size_t)len + 1) cap *= 2;
        char *p = realloc(r->p, cap);
        if (!p) return false;
        r->p = p;
        r->cap = cap;
    }
    memcpy(r->p + r->n, text, (size_t)len);
    r->n += (size_t)len;
    r->p[r->n] = 0;
    return !ferror(stdout); /* stdout failed (a full disk): stop the reply */
}

typedef struct convo {
    llm_chat_msg *m;
    int n, cap;
} convo;

static bool convo_push(convo *c, const char *role, const char *text)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        llm_chat_msg *m = realloc(c->m, sizeof *m * (size_t)cap);
        if (!m) return false;
        c->m = m;
        c->cap = cap;
    }
    char *dup = strdup(text);
    if (!dup) return false;
    c->m[c->n++] = (llm_chat_msg){role, dup};
    return true;
}

static void convo_trim(convo *c, int keep)
{
    while (c->n > keep) free((char *)c->m[--c->n].content);
}

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
                           "at the prompt: /reset starts over, /exit (or Ctrl-D) quits; Ctrl-C stops a reply\n", opts,
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
    convo cv = {0};
    reply r = {0};
    llm_chat_tmpl tmpl = c.tmpl;
    if (!c.have_tmpl && !llm_chat_detect(m->chat_template, &tmpl)) {
        tmpl = strcmp(m->arch->name, "gemma3") == 0 ? LLM_CHAT_GEMMA : LLM_CHAT_ZEPHYR;
        fprintf(stderr, "note: %s; using %s (override with --chat-template)\n",
                m->chat_template ? "the file's chat template is not one ctorch knows" : "the file has no chat template",
                llm_chat_name(tmpl));
    }
    int n_ctx = llm_cli_ctx(&o, m);
    if (llm_session_init(&s, m, n_ctx, o.kv_f32 ? CT_F32 : CT_F16, &sp) != CT_OK) {
        rc = llm_cli_fail("chat");
        goto out;
    }
    s.ignore_eog = c.ignore_eos;
    if (system && !convo_push(&cv, "system", system)) goto oom;
    const int base = cv.n;
    fprintf(stderr, "chat template: %s; context %d tokens; /reset starts over, /exit or Ctrl-D quits, Ctrl-C stops a reply\n",
            llm_chat_name(tmpl), n_ctx);

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);

    char line[8192];
    for (;;) {
        g_stop = 0;
        printf("\n> ");
        fflush(stdout);
        errno = 0;
        if (!fgets(line, sizeof line, stdin)) {
            printf("\n");
            break; /* Ctrl-D, or Ctrl-C at the prompt */
        }
        size_t ln = strlen(line);
        while (ln && (line[ln - 1] == '\n' || line[ln - 1] == '\r')) line[--ln] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) break;
        if (!strcmp(line, "/reset")) {
            convo_trim(&cv, base);
            llm_session_reset(&s);
            fprintf(stderr, "(new conversation)\n");
            continue;
        }
        if (!ln) continue;
        if (!convo_push(&cv, "user", line)) goto oom;
        char *text = NULL;
        if (llm_chat_format(tmpl, cv.m, cv.n, true, &text) != CT_OK) {
            rc = llm_cli_fail("chat");
            goto out;
        }
        int n = 0;
        int32_t *ids = llm_cli_tokenize(m, text, strlen(text), true, true, &n);
        free(text);
        if (!ids) {
            rc = llm_cli_fail("chat");
            goto out;
        }
        /* Reuse the cached prefix; at least one token is evaluated so there are fresh logits. */
        int keep = 0, past = llm_session_n_past(&s);
        while (keep < past && keep < n - 1 && s.hist[keep] == ids[keep]) keep++;
        llm_session_truncate(&s, keep);
        if (n - keep > n_ctx - keep) {
            fprintf(stderr, "ctorch chat: the conversation (%d tokens) no longer fits in the context (%d); "
                            "starting a new one\n", n, n_ctx);
            free(ids);
            convo_trim(&cv, base);
            llm_session_reset(&s);
            continue;
        }
        ct_status st = llm_session_eval(&s, ids + keep, n - keep);
        free(ids);
        if (st != CT_OK) {
            rc = llm_cli_fail("chat");
            goto out;
        }
        r.n = 0;
        if (r.p) r.p[0] = 0;
        llm_gen_stats gs;
        st = llm_session_generate(&s, n_predict, on_piece, &r, &g_stop, &gs);
        printf("\n");
        fflush(stdout);
        if (ferror(stdout)) goto out; /* rc is 1; main reports the failed write */
        if (st != CT_OK) {
            rc = llm_cli_fail("chat");
            goto out;
        }
        if (gs.interrupted) fprintf(stderr, "(stopped)\n");
        if (gs.ctx_full) fprintf(stderr, "(the context is full; /reset to start over)\n");
        if (!convo_push(&cv, "assistant", r.p ? r.p : "")) goto oom;
        fprintf(stderr, "[%d tokens, %.2f tokens/s]\n", gs.n_gen, gs.n_gen / (gs.t_gen_s > 0 ? gs.t_gen_s : 1e-9));
    }
    rc = g_stop ? CLI_EXIT_INTERRUPTED : 0; /* Ctrl-C at the prompt: 130, as shells expect */
    goto out;
oom:
    fprintf(stderr, "ctorch chat: error: out of memory\n");
out:
    convo_trim(&cv, 0);
    free(cv.m);
    free(r.p);
    llm_session_free(&s);
    llm_model_free(m);
    free(system);
    return rc;
}
