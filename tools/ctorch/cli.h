/* The ctorch command's parts. A command is `int cmd_NAME(int argc, char **argv)`
 * (argv[0] is the command's name; returns the exit code: 0 ok, 1 failure,
 * 2 usage error), declared here and listed in main.c's table with one line. */
#ifndef CTORCH_CLI_H
#define CTORCH_CLI_H

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#include "ctorch/core.h"

int cmd_devices(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_info(int argc, char **argv);

/* Shared helpers (main.c). */
/* Writes s as a JSON string literal (quotes and escapes included). */
void cli_json_string(FILE *f, const char *s);
/* Text from a file made safe to print: control bytes as \xNN (\n, \t, \\),
 * C1 controls as \uNNNN, invalid UTF-8 bytes as \xNN; valid UTF-8 is kept.
 * Writes at most cap bytes (NUL included, never a partial escape); returns out. */
const char *cli_escape(const char *s, size_t n, char *out, size_t cap);
/* "12.3 GiB", "512 MiB", ... */
const char *cli_bytes(unsigned long long bytes, char *buf, size_t len);

/* Set by the SIGINT handler that cli_catch_sigint installs. A command that
 * installs it checks the flag in its loops and returns CLI_EXIT_INTERRUPTED;
 * the others keep the default action, which the shell also reports as 130. */
extern volatile sig_atomic_t cli_interrupted;
void cli_catch_sigint(void);
#define CLI_EXIT_INTERRUPTED 130

/* The command's own log lines on stderr (printed as given, no prefix), shown
 * when level >= CTORCH_LOG's (debug|info|warn|error; unset: info). Errors use
 * CT_LOG_ERROR, so they always show. */
void cli_log(ct_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool cli_log_enabled(ct_log_level level);

#endif
