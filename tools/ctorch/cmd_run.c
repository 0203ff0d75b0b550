/* ctorch run -m MODEL -p PROMPT [options]
 * Streams only the generated text to stdout; loading, devices and timings go
 * to stderr. Ctrl-C stops the generation, still prints the timings and exits
 * 130, as shells expect of an interrupted command. */
#include <signal.h>
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

static int usage(void)
{
    fprintf(stderr,
            "usage: ctorch run -m MODEL.gguf (-p PROMPT | -f FILE) [options]\n"
            "  -n N               tokens to generate (default 256; -1 = until end of text or full context)\n"
            "  --temp T           temperature (default 0.8; 0 = greedy)\n"
            "  --top-k K          (default 40; 0 = off)      --top-p P  (default 0.95; 1 = off)\n"
            "  --min-p P          (default 0.05; 0 = off)    --repeat-penalty R (default 1.0 = off)\n"
            "  --repeat-last-n N  history the penalty looks at (default 64)\n"
            "  --seed S           random seed (default: from the clock, printed)\n"
            "  -t THREADS         CPU threads           -c CTX   context length (default min(model, 4096))\n"
            "  -d DEVICES         cpu, cuda, opencl, auto or a chain like cuda:0,cpu (default auto)\n"
            "  --kv-f32           f32 KV cache (default f16)\n"
            "  --no-bos           do not add BOS     --parse-special  control-token text becomes tokens\n"
            "  --dump-logits FILE write the last prompt position's logits (float32 LE)\n");
    return 2;
}

static char g_last_char = '\n'; /* last byte written to stdout */

/* Stops the generation once stdout fails (a full disk): no use computing more. */
static bool put_piece(const char *text, int len, void *ctx)
{
    (void)ctx;
    fwrite(text, 1, (size_t)len, stdout);
    fflush(stdout);
    if (len > 0) g_last_char = text[len - 1];
    return !ferror(stdout);
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

int cmd_run(int argc, char **argv)
{
    llm_cli_opts o = {0};
    llm_sampler_params sp;
    llm_sampler_params_default(&sp);
    const char *prompt = NULL, *file = NULL, *dump = NULL;
    int n_predict = 256;
    bool seeded = false, add_bos = true, parse_special = false;
    for (int i = 1; i < argc; i++) {
        int c = llm_cli_common_arg("run", &o, argc, argv, &i);
        if (c < 0) return 2;
        if (c > 0) continue;
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool ok = true;
        if (!strcmp(a, "--no-bos")) add_bos = false;
        else if (!strcmp(a, "--parse-special")) parse_special = true;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage();
        else if (!v) ok = false;
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt")) prompt = argv[++i];
        else if (!strcmp(a, "-f") || !strcmp(a, "--file")) file = argv[++i];
        else if (!strcmp(a, "--dump-logits")) dump = argv[++i];
        else if (!strcmp(a, "-n") || !strcmp(a, "--n-predict")) ok = llm_cli_int(argv[++i], &n_predict);
        else if (!strcmp(a, "--temp")) ok = llm_cli_float(argv[++i], &sp.temperature);
        else if (!strcmp(a, "--top-k")) ok = llm_cli_int(argv[++i], &sp.top_k);
        else if (!strcmp(a, "--top-p")) ok = llm_cli_float(argv[++i], &sp.top_p);
        else if (!strcmp(a, "--min-p")) ok = llm_cli_float(argv[++i], &sp.min_p);
        else if (!strcmp(a, "--repeat-penalty")) ok = llm_cli_float(argv[++i], &sp.repeat_penalty);
        else if (!strcmp(a, "--repeat-last-n")) ok = llm_cli_int(argv[++i], &sp.repeat_last_n);
        else if (!strcmp(a, "--seed")) {
            char *e;
            sp.seed = strtoull(argv[++i], &e, 10);
            ok = *e == 0 && e != argv[i];
            seeded = true;
        } else {
            fprintf(stderr, "ctorch run: error: unknown option %s\n", a);
            return usage();
        }
        if (!ok) {
            fprintf(stderr, "ctorch run: error: bad value for %s\n", a);
            return 2;
        }
    }
    if (!o.model || (!prompt == !file)) return usage();
    if (!seeded) sp.seed = (uint64_t)time(NULL);

    size_t plen = 0;
    char *ftext = NULL;
    if (file) {
        ftext = llm_cli_read_file(file, &plen);
        if (!ftext) {
            fprintf(stderr, "ctorch run: error: cannot read prompt file %s\n", file);
            return 1;
        }
        prompt = ftext;
    } else {
        plen = strlen(prompt);
    }

    int rc = 1;
    if (dump && formats_check_output(dump, NULL) != CT_OK) { /* before loading anything */
        fprintf(stderr, "ctorch run: error: --dump-logits: %s\n", ct_last_error());
        free(ftext);
        return 1;
    }
    llm_session s = {0};
    int32_t *ids = NULL;
    llm_model *m = llm_cli_load("run", &o, true);
    if (!m) goto out;
    int n_ids = 0;
    ids = llm_cli_tokenize(m, prompt, plen, add_bos, parse_special, &n_ids);
    if (!ids) {
        rc = llm_cli_fail("run");
        goto out;
    }
    if (n_ids == 0) {
        fprintf(stderr, "ctorch run: error: the prompt is empty (no tokens); give some text or drop --no-bos\n");
        goto out;
    }
    int n_ctx = llm_cli_ctx(&o, m);
    if (llm_session_init(&s, m, n_ctx, o.kv_f32 ? CT_F32 : CT_F16, &sp) != CT_OK) {
        rc = llm_cli_fail("run");
        goto out;
    }
    cli_log(CT_LOG_INFO, "prompt: %d tokens; context %d; sampling: temp %.2f top-k %d top-p %.2f min-p %.2f "
                         "repeat-penalty %.2f seed %llu\n",
            n_ids, n_ctx, (double)sp.temperature, sp.top_k, (double)sp.top_p, (double)sp.min_p,
            (double)sp.repeat_penalty, (unsigned long long)sp.seed);

    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);

    double t0 = llm_now();
    if (llm_session_eval(&s, ids, n_ids) != CT_OK) {
        rc = llm_cli_fail("run");
        goto out;
    }
    double t_prompt = llm_now() - t0;
    if (dump && dump_logits(dump, s.logits, m->hp.n_vocab) != 0) goto out;

    llm_gen_stats gs;
    ct_status st = llm_session_generate(&s, n_predict, put_piece, NULL, &g_stop, &gs);
    fflush(stdout);
    if (ferror(stdout)) goto out; /* main reports the failed write */
    end_text_line();
    if (st != CT_OK) {
        rc = llm_cli_fail("run");
        goto out;
    }
    if (gs.ctx_full) cli_log(CT_LOG_WARN, "note: stopped: the context (%d tokens) is full\n", n_ctx);
    if (g_stop) cli_log(CT_LOG_WARN, "note: interrupted\n");
    cli_log(CT_LOG_INFO, "timings: prompt %d tokens in %.3f s (%.2f tokens/s); generation %d tokens in %.3f s "
                         "(%.2f tokens/s)\n",
            n_ids, t_prompt, n_ids / (t_prompt > 0 ? t_prompt : 1e-9), gs.n_gen, gs.t_gen_s,
            gs.n_gen / (gs.t_gen_s > 0 ? gs.t_gen_s : 1e-9));
    cli_log(CT_LOG_INFO, "ran on:\n");
    llm_cli_print_devices_used();
    rc = g_stop ? CLI_EXIT_INTERRUPTED : 0;
out:
    llm_session_free(&s);
    free(ids);
    llm_model_free(m);
    free(ftext);
    return rc;
}
