/* ctorch: the command-line front end. Commands live in their own files and are
 * listed once in the table below. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "opts.h"
#include "ctorch/ctorch.h"

typedef struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help; /* one line */
} command;

static const command g_commands[] = {
    {"devices", cmd_devices, "list devices in chain order and what each one runs (--json)"},
    {"version", cmd_version, "print the version and the backends compiled in"},
    {"run", cmd_run, "generate text from a prompt: run -m MODEL -p PROMPT [-n N] [--temp T] ..."},
    {"chat", cmd_chat, "interactive chat with the model's template: chat -m MODEL"},
    {"bench", cmd_bench, "prompt and generation tokens/s like llama-bench: bench -m MODEL [-p 512] [-n 128]"},
    {"perplexity", cmd_perplexity, "perplexity of a text file: perplexity -m MODEL -f FILE [-c 512]"},
    {"quantize", cmd_quantize, "quantize a GGUF model: quantize IN.gguf OUT.gguf TYPE (Q4_K_M, Q8_0, ...)"},
    {"tokenize", cmd_tokenize, "print the token ids of a text: tokenize -m MODEL -p TEXT [--no-bos]"},
    {"info", cmd_info, "metadata, tensor table and architecture summary of a GGUF file: info MODEL"},
};
#define N_COMMANDS (sizeof g_commands / sizeof g_commands[0])

void cli_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        if (*p == '"' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20) fprintf(f, "\\u%04x", *p);
        else fputc(*p, f);
    }
    fputc('"', f);
}

/* Length of the valid UTF-8 sequence at p (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *p, size_t n, unsigned *cp)
{
    size_t k = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    if (!k || k > n || p[0] > 0xf4) return 0;
    unsigned c = p[0] & (0x7f >> k);
    for (size_t i = 1; i < k; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        c = c << 6 | (p[i] & 0x3f);
    }
    static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < min[k] || c > 0x10ffff || (c >= 0xd800 && c <= 0xdfff)) return 0;
    *cp = c;
    return k;
}

const char *cli_escape(const char *s, size_t n, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)(s ? s : "");
    size_t o = 0;
    if (!cap) return out;
    for (size_t i = 0; i < n;) {
        char esc[12];
        size_t k = 1, len;
        unsigned cp = 0;
        if (p[i] == '\\') len = (size_t)snprintf(esc, sizeof esc, "\\\\");
        else if (p[i] == '\n') len = (size_t)snprintf(esc, sizeof esc, "\\n");
        else if (p[i] == '\t') len = (size_t)snprintf(esc, sizeof esc, "\\t");
        else if (p[i] < 0x20 || p[i] == 0x7f) len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", p[i]);
        else if (p[i] < 0x80) esc[0] = (char)p[i], len = 1;
        else if (!(k = utf8_len(p + i, n - i, &cp))) k = 1, len = (size_t)snprintf(esc, sizeof esc, "\\x%02x", p[i]);
        /* C1 controls (U+0080..U+009F) include CSI, which some terminals obey */
        else if (cp < 0xa0) len = (size_t)snprintf(esc, sizeof esc, "\\u%04x", cp);
        else memcpy(esc, p + i, k), len = k;
        if (o + len >= cap) break;
        memcpy(out + o, esc, len);
        o += len;
        i += k;
    }
    out[o] = 0;
    return out;
}

const char *cli_bytes(unsigned long long bytes, char *buf, size_t len)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, units[u]);
    return buf;
}

volatile sig_atomic_t cli_interrupted;

static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

void cli_catch_sigint(void)
{
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint; /* no SA_RESTART: a blocked read or write returns EINTR */
    sigaction(SIGINT, &sa, NULL);
}

/* The library's CTORCH_LOG names, but unset means info here: the command's
 * status lines (devices, model, progress, timings) are what a user expects to
 * see, while the library is quiet below warnings by default. */
static int cli_level(void)
{
    static int level = -1;
    if (level < 0) {
        const char *e = getenv("CTORCH_LOG");
        level = CT_LOG_INFO;
        if (e && !strcasecmp(e, "debug")) level = CT_LOG_DEBUG;
        else if (e && !strcasecmp(e, "warn")) level = CT_LOG_WARN;
        else if (e && !strcasecmp(e, "error")) level = CT_LOG_ERROR;
    }
    return level;
}

bool cli_log_enabled(ct_log_level level) { return (int)level >= cli_level(); }

void cli_log(ct_log_level level, const char *fmt, ...)
{
    if (!cli_log_enabled(level)) return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* Output that could not be written is a failure, not a silent exit 0 (a full
 * disk behind `> file`, a closed pipe reader that ignores SIGPIPE). */
static int finish_stdout(void)
{
    errno = 0;
    bool bad = fflush(stdout) != 0;
    int e = errno;
    bad |= ferror(stdout) != 0;
    if (fclose(stdout) != 0 && !bad) {
        bad = true;
        e = errno;
    }
    if (!bad) return 0;
    fprintf(stderr, "ctorch: error: writing the output failed%s%s\n", e ? ": " : "", e ? strerror(e) : "");
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: ctorch <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++) fprintf(f, "  %-12s %s\n", g_commands[i].name, g_commands[i].help);
    fprintf(f, "\n'ctorch <command> --help' describes a command's options.\n"
               "Environment: CTORCH_DEVICES, CTORCH_DISABLE_GPU, CTORCH_STRICT, CTORCH_TRACE, CTORCH_FAULT,\n"
               "CTORCH_SMALL_BYTES, CTORCH_STATS, CTORCH_THREADS, CTORCH_LOG (see include/ctorch/exec.h).\n");
}

/* CTORCH_STATS=1: the executor's summary on stderr (the library prints nothing itself). */
static void print_stats(void)
{
    if (!ct_exec_stats_requested()) return;
    size_t n = ct_exec_stats_format(NULL, 0) + 1;
    char *text = malloc(n);
    if (!text) return;
    ct_exec_stats_format(text, n);
    fputs(text, stderr);
    free(text);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
        if (argc > 2 && !strcmp(name, "help")) { /* `ctorch help run` = `ctorch run --help` */
            char *sub[] = {argv[2], "--help", NULL};
            for (size_t i = 0; i < N_COMMANDS; i++)
                if (!strcmp(argv[2], g_commands[i].name)) {
                    int rc = g_commands[i].fn(2, sub);
                    return finish_stdout() != 0 && rc == 0 ? 1 : rc;
                }
            fprintf(stderr, "ctorch: unknown command '%s' (run 'ctorch --help' for the list)\n", argv[2]);
            return 2;
        }
        usage(stdout);
        return finish_stdout();
    }
    if (!strcmp(name, "--version") || !strcmp(name, "-V")) name = "version";
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, g_commands[i].name)) {
            int rc = g_commands[i].fn(argc - 1, argv + 1);
            print_stats();
            if (finish_stdout() != 0 && rc == 0) rc = 1;
            return rc;
        }
    fprintf(stderr, "ctorch: unknown command '%s' (run 'ctorch --help' for the list)\n", name);
    return 2;
}

int cmd_version(int argc, char **argv)
{
    const cli_spec spec = {"version", "version", "Prints the version and the backends compiled in.\n", NULL, 0, 0};
    int prc = cli_parse(&spec, argc, argv, NULL, NULL);
    if (prc >= 0) return prc;
    printf("ctorch %d.%d.%d\n", CTORCH_VERSION_MAJOR, CTORCH_VERSION_MINOR, CTORCH_VERSION_PATCH);
#ifdef CTORCH_HAVE_BLAS
    const char *blas = "yes";
#else
    const char *blas = "no";
#endif
#ifdef CTORCH_HAVE_CUDA
    const char *cuda = "yes";
#else
    const char *cuda = "no";
#endif
#ifdef CTORCH_HAVE_OPENCL
    const char *opencl = "yes";
#else
    const char *opencl = "no";
#endif
    printf("backends: cpu, cuda %s, opencl %s; openblas %s\n", cuda, opencl, blas);
    return 0;
}
