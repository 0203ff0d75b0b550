/* ctorch run -m MODEL -p PROMPT [options]
 * Streams only the generated text to stdout; loading, devices and timings go
 * to stderr. Ctrl-C stops the generation, still prints the timings and exits
 * 130, as shells expect of an interrupted command. With -i, each line read
 * afterwards is appended to the context and continued (Ctrl-C during a reply
 * stops the reply; at the prompt it ends the command with 130). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "formats/atomic_file.h"
#include "llm/generate.h"
#include "llm_cli.h"

static volatile sig_atomic_t g_stop;
static void on_sigint(int sig)
{
    (void)sig;
    g_stop = 1;
}

static char g_last_char = '\n'; /* last byte of text written to stdout */

/* Text on stdout (generated, echoed prompt, -i's "> "); false once stdout fails
 * (a full disk), which also stops the generation: no use computing more. */
static bool put_text(const char *text, size_t len)
{
    fwrite(text, 1, len, stdout);
    fflush(stdout);
    if (len > 0) g_last_char = text[len - 1];
    return !ferror(stdout);
}

static bool put_piece(const char *text, int len, void *ctx)
{
    (void)ctx;
    return put_text(text, (size_t)len);
}

/* Piped output stays exactly the generated text; when stderr shares its
 * destination (2>&1), the log lines that follow still start on a new line. */
static void end_text_line(void)
{
    if (g_last_char == '\n') return;
    if (isatty(fileno(stdout))) {
        fputc('\n', stdout);
        return;
    }
    struct stat so, se;
    if (fstat(fileno(stdout), &so) == 0 && fstat(fileno(stderr), &se) == 0 && so.st_dev == se.st_dev &&
        so.st_ino == se.st_ino && cli_log_enabled(CT_LOG_INFO))
        fputc('\n', stderr);
}

typedef struct floats {
    const float *x;
    int n;
} floats;

static bool write_le_floats(int fd, void *ctx)
{
    const floats *f = ctx;
    unsigned char b[4096];
    size_t k = 0;
    for (int i = 0; i < f->n; i++) {
        uint32_t u;
        memcpy(&u, &f->x[i], 4);
        for (int j = 0; j < 4; j++) b[k++] = (unsigned char)(u >> (8 * j));
        if (k == sizeof b && !formats_write_all(fd, b, k)) return false;
        if (k == sizeof b) k = 0;
    }
    return formats_write_all(fd, b, k);
}

/* Written like every file the command makes: complete or not at all. */
static int dump_logits(const char *path, const float *x, int n)
{
    if (formats_atomic_write(path, write_le_floats, &(floats){x, n}, "--dump-logits") != CT_OK) {
        fprintf(stderr, "ctorch run: error: %s\n", ct_last_error());
        return 1;
    }
    cli_log(CT_LOG_INFO, "logits of the last prompt position (%d floats) written to %s\n", n, path);
    return 0;
}

/* ANSI colours as llama.cpp's console uses them: prompt yellow, user input green. */
#define COLOR_PROMPT "\033[33m"
#define COLOR_USER "\033[32m"
#define COLOR_RESET "\033[0m"

typedef struct run_opts {
    llm_cli_opts o;
    llm_sampler_params sp;
    const char *prompt, *file, *dump;
    int n_predict;
    int64_t seed;
    bool no_bos, parse_special, ignore_eos, escape, color, interactive;
} run_opts;

typedef struct run_totals {
    int n_prompt, n_gen;
    double t_prompt, t_gen;
} run_totals;

static int parse_args(run_opts *r, int argc, char **argv)
{
    llm_cli_opts *o = &r->o;
    llm_sampler_params *sp = &r->sp;
    const cli_opt opts[] = {
        LLM_CLI_OPTS(o),
        LLM_CLI_CTX_OPT(o, 0),
        {"-p|--prompt", "TEXT", CLI_STRING, &r->prompt, 0, 0, NULL, "the prompt"},
        {"-f|--file", "FILE", CLI_STRING, &r->file, 0, 0, NULL, "read the prompt from a file"},
        {"-e|--escape", NULL, CLI_FLAG, &r->escape, 0, 0, NULL, "process escapes in the prompt: \\n \\r \\t \\\\ \\' \\\" \\xNN"},
        {"-n|--n-predict", "N", CLI_INT, &r->n_predict, -1, CLI_NOMAX, NULL,
         "tokens to generate (default 256; -1 = until end of text or full context)"},
        LLM_CLI_SAMPLING_OPTS(sp, &r->seed),
        {"--ignore-eos", NULL, CLI_FLAG, &r->ignore_eos, 0, 0, NULL, "never stop at end-of-text; generate all -n tokens"},
        {"--no-bos", NULL, CLI_FLAG, &r->no_bos, 0, 0, NULL, "do not add BOS"},
        {"--parse-special", NULL, CLI_FLAG, &r->parse_special, 0, 0, NULL, "control-token text becomes tokens"},
        {"--color", NULL, CLI_FLAG, &r->color, 0, 0, NULL,
         "echo the prompt (and colour user input) apart from the generated text, when stdout is a terminal"},
        {"-i|--interactive", NULL, CLI_FLAG, &r->interactive, 0, 0, NULL,
         "after generating, read lines from stdin and continue the text with each (Ctrl-D ends)"},
        {"--dump-logits", "FILE", CLI_STRING, &r->dump, 0, 0, NULL,
         "write the last prompt position's logits (float32 LE)"},
    };
    const cli_spec spec = {"run", "run -m MODEL.gguf (-p PROMPT | -f FILE) [options]", NULL, opts, CLI_N(opts), 0};
    int rc = cli_parse(&spec, argc, argv, NULL, NULL);
    if (rc >= 0) return rc;
    if (r->prompt && r->file) return cli_usage_error("run", "-p and -f conflict: give the prompt one way");
    if (!r->prompt && !r->file && !r->interactive && o->model)
        return cli_usage_error("run", "no prompt: give -p TEXT or -f FILE (or -i to type it)");
    if ((rc = llm_cli_check_sampling("run", sp, r->seed)) >= 0) return rc;
    return llm_cli_check("run", o); /* usage errors first: this one looks at the file */
}

/* The prompt as the model will see it: from -p or -f, escapes processed with -e. */
static char *prompt_text(const run_opts *r, size_t *len)
{
    char *t;
    if (r->file) {
        t = cli_read_text_file("run", "-f", r->file, len);
        if (!t) return NULL;
    } else {
        const char *p = r->prompt ? r->prompt : "";
        *len = strlen(p);
        t = malloc(*len + 1);
        if (!t) {
            fprintf(stderr, "ctorch run: error: out of memory\n");
            return NULL;
        }
        memcpy(t, p, *len + 1);
    }
    if (r->escape) *len = cli_unescape(t, *len);
    return t;
}

/* Evaluates ids and generates after them. 0 ok, 1 error (message printed). */
static int continue_with(const run_opts *r, llm_session *s, const int32_t *ids, int n_ids, run_totals *tot,
                         llm_gen_stats *gs)
{
    *gs = (llm_gen_stats){0};
    double t0 = llm_now();
    if (n_ids && llm_session_eval(s, ids, n_ids) != CT_OK) return llm_cli_fail("run");
    tot->n_prompt += n_ids;
    tot->t_prompt += llm_now() - t0;
    if (!s->have_logits) return 0; /* nothing evaluated yet: wait for more input */
    if (r->dump && tot->n_prompt == n_ids && dump_logits(r->dump, s->logits, s->m->hp.n_vocab) != 0) return 1;
    ct_status st = llm_session_generate(s, r->n_predict, put_piece, NULL, &g_stop, gs);
    if (ferror(stdout)) return 1; /* main reports the failed write */
    if (st != CT_OK) return llm_cli_fail("run");
    tot->n_gen += gs->n_gen;
    tot->t_gen += gs->t_gen_s;
    return 0;
}

static int continue_with_text(const run_opts *r, llm_session *s, const char *text, size_t len, bool bos,
                              run_totals *tot, llm_gen_stats *gs)
{
    int n_ids = 0;
    int32_t *ids = llm_cli_tokenize(s->m, text, len, bos, r->parse_special, &n_ids);
    if (!ids) return llm_cli_fail("run");
    int rc = continue_with(r, s, ids, n_ids, tot, gs);
    free(ids);
    return rc;
}

/* -i: each line typed is appended as it is (newline included, as llama.cpp does). */
static int interact(const run_opts *r, llm_session *s, bool color, run_totals *tot)
{
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    bool tty = isatty(fileno(stdout));
    for (;;) {
        g_stop = 0;
        if (tty && !put_text("\n> ", 3)) return 1; /* main reports the failed write */
        if (color) printf(COLOR_USER);
        fflush(stdout);
        ssize_t n = getline(&line, &cap, stdin);
        if (color) printf(COLOR_RESET);
        if (n < 0) break; /* Ctrl-D, or Ctrl-C at the prompt (g_stop stays set: exit 130) */
        size_t len = (size_t)n;
        if (r->escape) len = cli_unescape(line, len);
        llm_gen_stats gs;
        /* The first text of the session gets BOS like any prompt. */
        if ((rc = continue_with_text(r, s, line, len, !r->no_bos && !s->have_logits, tot, &gs)) != 0) break;
        if (gs.ctx_full) {
            cli_log(CT_LOG_WARN, "note: stopped: the context (%d tokens) is full\n", s->kv.n_ctx);
            break;
        }
    }
    free(line);
    return rc;
}

int cmd_run(int argc, char **argv)
{
    run_opts r = {.n_predict = 256, .seed = -1};
    llm_sampler_params_default(&r.sp);
    int rc = parse_args(&r, argc, argv);
    if (rc >= 0) return rc;
    bool color = r.color && isatty(fileno(stdout));

    size_t plen = 0;
    char *prompt = prompt_text(&r, &plen);
    if (!prompt) return 1;

    if (r.dump && formats_check_output(r.dump, NULL) != CT_OK) { /* before loading anything */
        fprintf(stderr, "ctorch run: error: --dump-logits: %s\n", ct_last_error());
        free(prompt);
        return 1;
    }
    rc = 1;
    llm_session s = {0};
    int32_t *ids = NULL;
    int n_ids = 0;
    llm_model *m = llm_cli_load("run", &r.o, true);
    if (!m) goto out;
    bool have_prompt = r.prompt || r.file;
    if (have_prompt) {
        ids = llm_cli_tokenize(m, prompt, plen, !r.no_bos, r.parse_special, &n_ids);
        if (!ids) {
            rc = llm_cli_fail("run");
            goto out;
        }
        if (n_ids == 0) {
            fprintf(stderr, "ctorch run: error: the prompt is empty (no tokens); give some text or drop --no-bos\n");
            goto out;
        }
    }
    int n_ctx = llm_cli_ctx(&r.o, m);
    if (llm_session_init(&s, m, n_ctx, r.o.kv_f32 ? CT_F32 : CT_F16, &r.sp) != CT_OK) {
        rc = llm_cli_fail("run");
        goto out;
    }
    s.ignore_eog = r.ignore_eos;
    /* before the "prompt:" line, so a Ctrl-C sent once it shows is always caught */
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: Ctrl-C at an -i prompt interrupts the read */
    sigaction(SIGINT, &sa, NULL);
    cli_log(CT_LOG_INFO, "prompt: %d tokens; context %d; sampling: temp %.2f top-k %d top-p %.2f min-p %.2f "
                         "repeat-penalty %.2f seed %llu%s\n",
            n_ids, n_ctx, (double)r.sp.temperature, r.sp.top_k, (double)r.sp.top_p, (double)r.sp.min_p,
            (double)r.sp.repeat_penalty, (unsigned long long)r.sp.seed,
            r.ignore_eos ? "; ignoring end of text" : "");

    if (color && plen) {
        printf(COLOR_PROMPT);
        bool ok = put_text(prompt, plen);
        printf(COLOR_RESET);
        if (!ok) goto out; /* main reports the failed write */
    }
    fflush(stdout);
    run_totals tot = {0};
    llm_gen_stats gs = {0};
    if (have_prompt && continue_with(&r, &s, ids, n_ids, &tot, &gs) != 0) goto out;
    if (gs.ctx_full) cli_log(CT_LOG_WARN, "note: stopped: the context (%d tokens) is full\n", n_ctx);
    else if (r.interactive && !g_stop && interact(&r, &s, color, &tot) != 0) goto out;
    fflush(stdout);
    if (ferror(stdout)) goto out; /* main reports the failed write */
    end_text_line();
    if (g_stop) cli_log(CT_LOG_WARN, "note: interrupted\n");
    cli_log(CT_LOG_INFO, "timings: prompt %d tokens in %.3f s (%.2f tokens/s); generation %d tokens in %.3f s "
                         "(%.2f tokens/s)\n",
            tot.n_prompt, tot.t_prompt, tot.n_prompt / (tot.t_prompt > 0 ? tot.t_prompt : 1e-9), tot.n_gen,
            tot.t_gen, tot.n_gen / (tot.t_gen > 0 ? tot.t_gen : 1e-9));
    cli_log(CT_LOG_INFO, "ran on:\n");
    llm_cli_print_devices_used();
    rc = g_stop ? CLI_EXIT_INTERRUPTED : 0;
out:
    llm_session_free(&s);
    free(ids);
    llm_model_free(m);
    free(prompt);
    return rc;
}
