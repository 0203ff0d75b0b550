/* The conversation loop of `ctorch chat`. Each message renders the whole kept
 * conversation with the template and evaluates only the tokens after the part
 * already in the KV cache. When the conversation outgrows the context, the
 * oldest whole turns are dropped (the system prompt and the newest message
 * never are) until it takes at most half of the room, and a part of the
 * context stays free for the reply. */
#include "chat_repl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef CTORCH_HAVE_LIBEDIT
#include <editline/readline.h>
#endif

#include "cli.h"
#include "llm_cli.h"

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
}

/* ---------------- input ---------------- */

typedef struct line_in {
    bool tty;   /* stdin is a terminal: prompt, no echo */
    bool edit;  /* line editing: built with libedit, and stdout is the terminal too (it draws the line there) */
    char *line; /* the last line read, without its end of line */
    size_t cap; /* getline's buffer size (unused with line editing: readline allocates) */
} line_in;

/* The next line of any length, or NULL at the end of the input or on Ctrl-C at the prompt. */
static const char *read_line(line_in *in, const char *prompt)
{
#ifdef CTORCH_HAVE_LIBEDIT
    if (in->edit) {
        free(in->line);
        in->line = readline(prompt);
        if (in->line && in->line[0]) add_history(in->line);
        return in->line;
    }
#endif
    if (in->tty) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    ssize_t n = getline(&in->line, &in->cap, stdin);
    if (n < 0) return NULL;
    while (n > 0 && (in->line[n - 1] == '\n' || in->line[n - 1] == '\r')) in->line[--n] = 0;
    /* Piped input is not echoed by a terminal: echo it, so stdout reads as the exchange. */
    if (!in->tty) {
        printf("%s%s\n", prompt, in->line);
        fflush(stdout); /* before any log line on stderr about it */
    }
    return in->line;
}

/* ---------------- the conversation ---------------- */

typedef struct convo {
    char *system;     /* NULL: none */
    llm_chat_msg *turns; /* user and assistant messages, oldest first; contents owned */
    int n, cap;
    llm_chat_msg *all; /* scratch: system + turns, as the template wants them */
    int all_cap;
} convo;

static bool convo_push(convo *c, const char *role, const char *text)
{
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 16;
        llm_chat_msg *m = realloc(c->turns, sizeof *m * (size_t)cap);
        if (!m) return false;
        c->turns = m;
        c->cap = cap;
    }
    char *dup = strdup(text);
    if (!dup) return false;
    c->turns[c->n++] = (llm_chat_msg){role, dup};
    return true;
}

/* Drops the first k turns' messages. */
static void convo_drop_front(convo *c, int k)
{
    if (k <= 0) return; /* turns is NULL before the first message: memmove must not see it */
    for (int i = 0; i < k; i++) free((char *)c->turns[i].content);
    memmove(c->turns, c->turns + k, sizeof *c->turns * (size_t)(c->n - k));
    c->n -= k;
}

static void convo_pop(convo *c)
{
    if (c->n > 0) free((char *)c->turns[--c->n].content);
}

/* The messages to render (system first); NULL when out of memory. */
static const llm_chat_msg *convo_all(convo *c, int *n)
{
    int need = c->n + 1;
    if (need > c->all_cap) {
        llm_chat_msg *a = realloc(c->all, sizeof *a * (size_t)need);
        if (!a) return NULL;
        c->all = a;
        c->all_cap = need;
    }
    int k = 0;
    if (c->system) c->all[k++] = (llm_chat_msg){"system", c->system};
    memcpy(c->all + k, c->turns, sizeof *c->turns * (size_t)c->n);
    *n = k + c->n;
    return c->all;
}

static void convo_free(convo *c)
{
    convo_drop_front(c, c->n);
    free(c->turns);
    free(c->all);
    free(c->system);
}

/* ---------------- replies ---------------- */

typedef struct reply {
    char *p;
    size_t n, cap;
    bool oom;
} reply;

static bool on_piece(const char *text, int len, void *ctx)
{
    reply *r = ctx;
    fwrite(text, 1, (size_t)len, stdout);
    fflush(stdout);
    if (r->n + (size_t)len + 1 > r->cap) {
        size_t cap = r->cap ? r->cap : 256;
        while (cap < r->n + (size_t)len + 1) cap *= 2;
        char *p = realloc(r->p, cap);
        if (!p) return !(r->oom = true);
        r->p = p;
        r->cap = cap;
    }
    memcpy(r->p + r->n, text, (size_t)len);
    r->n += (size_t)len;
    r->p[r->n] = 0;
    return !ferror(stdout); /* stdout failed (a full disk): stop the reply */
}

/* ---------------- the loop ---------------- */

typedef struct repl {
    const chat_repl_cfg *cfg;
    llm_session *s;
    int n_ctx, reserve; /* context size; tokens kept free for the reply */
    convo cv;
    reply r;
    int dropped_turns, n_replies;
    long long n_generated;
    double gen_s, last_rate;
} repl;

static int count_turns(const convo *c)
{
    int n = 0;
    for (int i = 0; i < c->n; i++) n += strcmp(c->turns[i].role, "user") == 0;
    return n;
}

static void print_help(void)
{
    printf("commands (anything else is sent to the model):\n"
           "  /help           this list\n"
           "  /reset          start a new conversation (the system prompt stays)\n"
           "  /system [TEXT]  set the system prompt for the next messages; without TEXT, show it\n"
           "  /stats          tokens in the context, turns kept and dropped, reply speed\n"
           "  /exit, /quit    leave (so do Ctrl-D and Ctrl-C at the prompt)\n"
           "  //TEXT          send /TEXT to the model\n"
           "Ctrl-C during a reply stops it.\n");
}

static void print_stats(const repl *p)
{
    printf("context: %d of %d tokens in use (%d kept free for a reply)\n", llm_session_n_past(p->s), p->n_ctx,
           p->reserve);
    printf("conversation: %d turn%s kept (%d message%s), %d dropped to fit the context; system prompt: %s\n",
           count_turns(&p->cv), count_turns(&p->cv) == 1 ? "" : "s", p->cv.n, p->cv.n == 1 ? "" : "s",
           p->dropped_turns, p->cv.system ? "set" : "none");
    printf("replies: %d, %lld tokens", p->n_replies, p->n_generated);
    if (p->n_replies) printf(", last %.2f tokens/s, mean %.2f tokens/s", p->last_rate,
                             p->gen_s > 0 ? (double)p->n_generated / p->gen_s : 0.0);
    printf("\n");
}

static void reset(repl *p)
{
    convo_drop_front(&p->cv, p->cv.n);
    llm_session_reset(p->s);
}

/* A line starting with '/': 1 handled, 0 leave, -1 out of memory. */
static int run_command(repl *p, const char *line)
{
    const char *arg = line + 1 + strcspn(line + 1, " \t");
    size_t wl = (size_t)(arg - line);
    while (*arg == ' ' || *arg == '\t') arg++;
#define IS(name) (wl == sizeof(name) - 1 && strncmp(line, name, wl) == 0)
    if (IS("/exit") || IS("/quit")) return 0;
    if (IS("/help")) {
        print_help();
    } else if (IS("/reset")) {
        reset(p);
        fprintf(stderr, "(new conversation%s)\n", p->cv.system ? "; the system prompt stays" : "");
    } else if (IS("/stats")) {
        print_stats(p);
    } else if (IS("/system")) {
        if (!*arg) {
            printf("system prompt: %s\n", p->cv.system ? p->cv.system : "(none)");
            return 1;
        }
        char *dup = strdup(arg);
        if (!dup) return -1;
        free(p->cv.system);
        p->cv.system = dup;
        fprintf(stderr, "(system prompt set; it applies from the next message on)\n");
    } else {
        fprintf(stderr, "unknown command %.*s, /help lists them\n", (int)wl, line);
    }
#undef IS
    return 1;
}

/* Fits the conversation (ending with the new user message) into the context,
 * evaluates what the cache lacks and streams the reply. 1 done, 0 not sent
 * (the message alone is too long), -1 error (message printed). */
static int send_message(repl *p)
{
    int n_all = 0;
    const llm_chat_msg *all = convo_all(&p->cv, &n_all);
    if (!all) return fprintf(stderr, "ctorch chat: error: out of memory\n"), -1;
    llm_chat_fit fit;
    int budget = p->n_ctx - p->reserve;
    ct_status st = llm_chat_fit_context(p->cfg->m->tok, p->cfg->tmpl, all, n_all, budget, &fit);
    if (st == CT_ERR_RANGE) {
        fprintf(stderr, "ctorch chat: your message is too long for the context: %s takes %d tokens, and the context "
                        "leaves %d for the prompt (-c %d, %d kept for the reply); not sent\n",
                p->cv.system ? "with the system prompt it" : "it", fit.n_min, budget, p->n_ctx, p->reserve);
        convo_pop(&p->cv);
        return 0;
    }
    if (st != CT_OK) return llm_cli_fail("chat"), -1;
    if (fit.first > fit.n_sys) {
        /* Dropping turns costs a new evaluation of all that follows the system prompt: drop down to half
         * the budget (llama.cpp's context shift discards half too), so that happens every few messages
         * rather than at each one. When the newest message alone is more than that, drop only what must go. */
        llm_chat_fit half;
        if (llm_chat_fit_context(p->cfg->m->tok, p->cfg->tmpl, all, n_all, budget / 2, &half) == CT_OK) {
            free(fit.ids);
            fit = half;
        }
        ct_clear_error();
    }
    int drop = fit.first - fit.n_sys;
    if (drop > 0) {
        int turns_before = count_turns(&p->cv);
        convo_drop_front(&p->cv, drop);
        int gone = turns_before - count_turns(&p->cv);
        p->dropped_turns += gone;
        int kept = count_turns(&p->cv);
        cli_log(CT_LOG_WARN, "(the conversation, %d tokens, outgrew the %d the context leaves for the prompt: dropped the "
                             "oldest %d turn%s; kept %s%d turn%s, this one included: %d tokens)\n",
                fit.n_all, budget, gone, gone == 1 ? "" : "s", p->cv.system ? "the system prompt and " : "", kept,
                kept == 1 ? "" : "s", fit.n_ids);
    }
    /* Reuse the cached prefix; at least one token is evaluated so there are fresh logits. */
    const int32_t *ids = fit.ids;
    int n = fit.n_ids, keep = 0, past = llm_session_n_past(p->s);
    while (keep < past && keep < n - 1 && p->s->hist[keep] == ids[keep]) keep++;
    llm_session_truncate(p->s, keep);
    st = llm_session_eval(p->s, ids + keep, n - keep);
    free(fit.ids);
    if (st != CT_OK) return llm_cli_fail("chat"), -1;

    p->r.n = 0;
    if (p->r.p) p->r.p[0] = 0;
    llm_gen_stats gs; /* g_stop is not cleared here: a Ctrl-C during the prompt's evaluation stops the reply too */
    st = llm_session_generate(p->s, p->cfg->n_predict, on_piece, &p->r, &g_stop, &gs);
    printf("\n");
    fflush(stdout);
    if (ferror(stdout)) return -1; /* the exit code is 1; main reports the failed write */
    if (st != CT_OK) return llm_cli_fail("chat"), -1;
    if (p->r.oom) return fprintf(stderr, "ctorch chat: error: out of memory for the reply\n"), -1;
    if (gs.interrupted) fprintf(stderr, "(stopped)\n");
    if (gs.ctx_full)
        cli_log(CT_LOG_WARN, "(the reply filled the context; the oldest turns make room for the next message)\n");
    if (!convo_push(&p->cv, "assistant", p->r.p ? p->r.p : ""))
        return fprintf(stderr, "ctorch chat: error: out of memory\n"), -1;
    p->n_replies++;
    p->n_generated += gs.n_gen;
    p->gen_s += gs.t_gen_s;
    p->last_rate = gs.n_gen / (gs.t_gen_s > 0 ? gs.t_gen_s : 1e-9);
    cli_log(CT_LOG_INFO, "[%d tokens, %.2f tokens/s]\n", gs.n_gen, p->last_rate);
    return 1;
}

int chat_repl_run(const chat_repl_cfg *cfg)
{
    repl p = {.cfg = cfg, .s = cfg->s, .n_ctx = cfg->s->kv.n_ctx};
    /* Room for a reply: its limit when one is set, else a quarter of the context. */
    p.reserve = cfg->n_predict > 0 ? cfg->n_predict : p.n_ctx / 4;
    if (p.reserve > p.n_ctx / 2) p.reserve = p.n_ctx / 2;
    line_in in = {.tty = isatty(STDIN_FILENO)};
#ifdef CTORCH_HAVE_LIBEDIT
    in.edit = in.tty && isatty(STDOUT_FILENO);
#endif
    int rc = 1;
    if (cfg->system && !(p.cv.system = strdup(cfg->system))) goto oom;
    cli_log(CT_LOG_INFO, "chat template: %s; context %d tokens; /help lists the commands, /exit or Ctrl-D quits, "
                    "Ctrl-C stops a reply%s\n",
            llm_chat_name(cfg->tmpl), p.n_ctx,
            in.edit ? "; line editing and history on" : "");

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at the prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);

    for (;;) {
        g_stop = 0;
        if (p.n_replies || p.cv.n) printf("\n");
        const char *line = read_line(&in, "> ");
        if (!line) {
            if (in.tty) printf("\n");
            break; /* end of input, or Ctrl-C at the prompt */
        }
        if (!line[0]) continue;
        if (line[0] == '/' && line[1] != '/') {
            int c = run_command(&p, line);
            fflush(stdout);
            if (c < 0) goto oom;
            if (c == 0 || ferror(stdout)) break;
            continue;
        }
        if (ferror(stdout)) break; /* the echo of piped input failed: nothing more can be shown */
        if (!convo_push(&p.cv, "user", line[0] == '/' ? line + 1 : line)) goto oom;
        int r = send_message(&p);
        if (r < 0) goto out;
    }
    /* A failed write is exit 1 (main names it); Ctrl-C at the prompt 130, as shells expect. */
    rc = ferror(stdout) ? 1 : g_stop ? CLI_EXIT_INTERRUPTED : 0;
    goto out;
oom:
    fprintf(stderr, "ctorch chat: error: out of memory\n");
out:
    convo_free(&p.cv);
    free(p.r.p);
    free(in.line);
    return rc;
}
