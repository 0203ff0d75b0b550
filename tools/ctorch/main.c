/* ctorch: the command-line front end. Commands live in their own files and are
 * listed once in the table below. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"
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

bool cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return true;
    return false;
}

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
        usage(stdout);
        return 0;
    }
    if (!strcmp(name, "--version") || !strcmp(name, "-V")) name = "version";
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(name, g_commands[i].name)) {
            int rc = g_commands[i].fn(argc - 1, argv + 1);
            print_stats();
            return rc;
        }
    fprintf(stderr, "ctorch: unknown command '%s' (run 'ctorch --help' for the list)\n", name);
    return 2;
}

int cmd_version(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        printf("usage: ctorch version\n");
        return 0;
    }
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
