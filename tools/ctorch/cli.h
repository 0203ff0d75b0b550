/* The ctorch command's parts. A command is `int cmd_NAME(int argc, char **argv)`
 * (argv[0] is the command's name; returns the exit code: 0 ok, 1 failure,
 * 2 usage error), declared here and listed in main.c's table with one line. */
#ifndef CTORCH_CLI_H
#define CTORCH_CLI_H

#include <stdbool.h>
#include <stdio.h>

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
/* "12.3 GiB", "512 MiB", ... */
const char *cli_bytes(unsigned long long bytes, char *buf, size_t len);

#endif
