/* Option tables: one table per command drives parsing, value checks and
 * `--help` alike. Names are matched whole, so llama.cpp's multi-letter
 * single-dash flags (-ngl, -sys) work and nothing is bundled; `--name=value`
 * is accepted for long names. Every usage error is one line on stderr that
 * names the flag and says what is wrong. */
#ifndef CTORCH_TOOLS_OPTS_H
#define CTORCH_TOOLS_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum cli_kind {
    CLI_FLAG,   /* bool, set to true */
    CLI_INT,    /* int within [lo, hi] */
    CLI_I64,    /* int64_t within [lo, hi] (seeds) */
    CLI_FLOAT,  /* finite float within [lo, hi] */
    CLI_STRING, /* const char *, the argv string itself */
    CLI_CHOICE, /* const char *, one of the '|'-separated words in `choices` */
} cli_kind;

typedef struct cli_opt {
    const char *names;   /* aliases separated by '|': "-n|--n-predict" */
    const char *meta;    /* value name in --help ("N"); NULL for flags */
    cli_kind kind;
    void *target;
    double lo, hi;       /* inclusive range of numeric kinds */
    const char *choices; /* CLI_CHOICE: "md|json" */
    const char *help;
} cli_opt;

typedef struct cli_spec {
    const char *cmd;     /* "run" */
    const char *usage;   /* after "usage: ctorch " */
    const char *notes;   /* printed after the options (may be NULL) */
    const cli_opt *opts;
    int n_opts;
    int max_pos;         /* positional arguments accepted */
} cli_spec;

/* hi of a range without an upper bound. */
#define CLI_NOMAX 1e300
#define CLI_N(arr) ((int)(sizeof(arr) / sizeof((arr)[0])))

/* Parses argv[1..argc) (argv[0] is the command name) into the targets and
 * collects up to spec->max_pos positional arguments ("--" ends the options).
 * Returns -1 to go on, 0 after printing --help to stdout, 2 after a usage error. */
int cli_parse(const cli_spec *spec, int argc, char **argv, const char **pos, int *n_pos);
/* Prints "ctorch CMD: error: ..." on stderr and returns 2. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cli_print_help(const cli_spec *spec);

/* Strict numbers: the whole string, no spaces, in range; floats finite. */
bool cli_parse_int(const char *s, long long lo, long long hi, long long *out);
bool cli_parse_float(const char *s, double lo, double hi, double *out);

/* Caps a thread count at the hardware threads, with a warning on stderr. */
int cli_cap_threads(const char *cmd, int threads);

/* A model path must be an existing regular file; checked with stat before any
 * open, so a FIFO never blocks. false after one error line (exit 1). */
bool cli_check_model_path(const char *cmd, const char *what, const char *path);
/* Reads a whole text file for -f: a directory, an unreadable or an empty file
 * is an error (one line). NUL-terminated, malloc'ed; NULL after the message. */
char *cli_read_text_file(const char *cmd, const char *flag, const char *path, size_t *len);

/* llama.cpp's escape processing (-e): \n \r \t \\ \' \" and \xNN (two hex
 * digits), in place; any other backslash is kept as written. Returns the new
 * length (\x00 makes a NUL byte, so callers use the length). */
size_t cli_unescape(char *s, size_t len);

#endif
