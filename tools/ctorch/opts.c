#include "opts.h"

#include "cli.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ctorch %s: error: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'ctorch %s --help')\n", cmd);
    va_end(ap);
    return 2;
}

/* True when `name` (len bytes) is one of the '|'-separated words in `list`. */
static bool in_list(const char *list, const char *name, size_t len)
{
    for (const char *p = list; *p;) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && !strncmp(p, name, len)) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static const cli_opt *find_opt(const cli_spec *sp, const char *name, size_t len)
{
    for (int i = 0; i < sp->n_opts; i++)
        if (in_list(sp->opts[i].names, name, len)) return &sp->opts[i];
    return NULL;
}

bool cli_parse_int(const char *s, long long lo, long long hi, long long *out)
{
    if (!*s || (*s != '-' && *s != '+' && (*s < '0' || *s > '9'))) return false; /* strtoll skips spaces */
    char *e;
    errno = 0;
    long long v = strtoll(s, &e, 10);
    if (*e || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

bool cli_parse_float(const char *s, double lo, double hi, double *out)
{
    if (!*s || (*s != '-' && *s != '+' && *s != '.' && (*s < '0' || *s > '9'))) return false;
    char *e;
    errno = 0;
    double v = strtod(s, &e);
    if (*e || !isfinite(v) || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* "between 0 and 1", ">= -1": the range as a user reads it. */
static const char *range_text(const cli_opt *o, char *buf, size_t n)
{
    bool is_int = o->kind == CLI_INT || o->kind == CLI_I64;
    if (o->hi >= CLI_NOMAX) snprintf(buf, n, is_int ? ">= %.0f" : ">= %g", o->lo);
    else snprintf(buf, n, is_int ? "between %.0f and %.0f" : "between %g and %g", o->lo, o->hi);
    return buf;
}

static int set_value(const char *cmd, const cli_opt *o, const char *flag, const char *v)
{
    char r[96];
    long long i;
    double d;
    switch (o->kind) {
    case CLI_INT:
    case CLI_I64: {
        /* Clamp the table's double bounds to the target type before converting (no overflow). */
        double top = o->kind == CLI_INT ? INT_MAX : 9.2e18, bottom = o->kind == CLI_INT ? INT_MIN : -9.2e18;
        long long lo = (long long)(o->lo < bottom ? bottom : o->lo), hi = (long long)(o->hi > top ? top : o->hi);
        if (!cli_parse_int(v, lo, hi, &i)) {
            if (!cli_parse_int(v, -0x7fffffffffffffffLL, 0x7fffffffffffffffLL, &i))
                return cli_usage_error(cmd, "%s wants an integer, got '%s'", flag, v);
            return cli_usage_error(cmd, "%s must be %s, got %s", flag, range_text(o, r, sizeof r), v);
        }
        if (o->kind == CLI_INT) *(int *)o->target = (int)i;
        else *(int64_t *)o->target = (int64_t)i;
        return -1;
    }
    case CLI_FLOAT:
        if (!cli_parse_float(v, o->lo, o->hi, &d)) {
            if (!cli_parse_float(v, -HUGE_VAL, HUGE_VAL, &d))
                return cli_usage_error(cmd, "%s wants a finite number, got '%s'", flag, v);
            return cli_usage_error(cmd, "%s must be %s, got %s", flag, range_text(o, r, sizeof r), v);
        }
        *(float *)o->target = (float)d;
        return -1;
    case CLI_CHOICE:
        if (!in_list(o->choices, v, strlen(v)))
            return cli_usage_error(cmd, "%s must be one of %s, got '%s'", flag, o->choices, v);
        *(const char **)o->target = v;
        return -1;
    case CLI_STRING: *(const char **)o->target = v; return -1;
    case CLI_FLAG: *(bool *)o->target = true; return -1;
    }
    return -1;
}

/* Handles argv[*i], an option; advances *i past its value. -1 ok, else exit code. */
static int parse_option(const cli_spec *sp, int argc, char **argv, int *i)
{
    const char *a = argv[*i], *eq = a[1] == '-' ? strchr(a, '=') : NULL;
    size_t len = eq ? (size_t)(eq - a) : strlen(a);
    if ((len == 2 && !strncmp(a, "-h", 2)) || (len == 6 && !strncmp(a, "--help", 6))) {
        cli_print_help(sp);
        return 0;
    }
    const cli_opt *o = find_opt(sp, a, len);
    if (!o) return cli_usage_error(sp->cmd, "unknown option '%.*s'", (int)len, a);
    char flag[64];
    snprintf(flag, sizeof flag, "%.*s", (int)len, a);
    if (o->kind == CLI_FLAG) {
        if (eq) return cli_usage_error(sp->cmd, "%s takes no value", flag);
        return set_value(sp->cmd, o, flag, NULL);
    }
    const char *v = eq ? eq + 1 : NULL;
    if (!v) {
        if (*i + 1 >= argc) return cli_usage_error(sp->cmd, "%s needs a value (%s)", flag, o->meta ? o->meta : "?");
        v = argv[++*i];
    }
    return set_value(sp->cmd, o, flag, v);
}

int cli_parse(const cli_spec *sp, int argc, char **argv, const char **pos, int *n_pos)
{
    int np = 0;
    bool opts_done = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!opts_done && !strcmp(a, "--")) {
            opts_done = true;
            continue;
        }
        if (!opts_done && a[0] == '-' && a[1]) {
            int r = parse_option(sp, argc, argv, &i);
            if (r >= 0) return r;
            continue;
        }
        if (np >= sp->max_pos)
            return sp->max_pos ? cli_usage_error(sp->cmd, "unexpected extra argument '%s'", a)
                               : cli_usage_error(sp->cmd, "unexpected argument '%s' (options start with -)", a);
        pos[np++] = a;
    }
    if (n_pos) *n_pos = np;
    return -1;
}

/* Help text in the column after the names, wrapped at spaces to stay within 100 columns. */
static void print_wrapped(const char *s)
{
    enum { indent = 28, width = 100 - indent };
    while ((int)strlen(s) > width) {
        int cut = width;
        while (cut > 0 && s[cut] != ' ') cut--;
        if (cut == 0) break; /* one long word: print it whole */
        printf("%.*s\n%*s", cut, s, indent, "");
        s += cut + 1;
    }
    printf("%s\n", s);
}

void cli_print_help(const cli_spec *sp)
{
    printf("usage: ctorch %s\n", sp->usage);
    printf("\noptions:\n");
    for (int i = 0; i < sp->n_opts; i++) {
        const cli_opt *o = &sp->opts[i];
        char left[96];
        size_t n = 0;
        left[n++] = ' ', left[n++] = ' ';
        for (const char *p = o->names; *p && n + 3 < sizeof left; p++) {
            if (*p == '|') left[n++] = ',', left[n++] = ' ';
            else left[n++] = *p;
        }
        left[n] = 0;
        if (o->meta) snprintf(left + n, sizeof left - n, " %s", o->meta);
        if (strlen(left) > 26) printf("%s\n%28s", left, "");
        else printf("%-28s", left);
        print_wrapped(o->help);
    }
    printf("  -h, --help                this help\n");
    if (sp->notes) printf("\n%s", sp->notes);
}

int cli_cap_threads(const char *cmd, int threads)
{
    long hw = sysconf(_SC_NPROCESSORS_ONLN);
    if (hw > 0 && threads > hw) {
        cli_log(CT_LOG_WARN, "ctorch %s: warning: -t %d is more than the %ld hardware threads; using %ld\n", cmd,
                threads, hw, hw);
        return (int)hw;
    }
    return threads;
}

bool cli_check_model_path(const char *cmd, const char *what, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "ctorch %s: error: cannot open %s '%s': %s\n", cmd, what, path, strerror(errno));
        return false;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ctorch %s: error: %s '%s' is a directory, not a GGUF file\n", cmd, what, path);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "ctorch %s: error: %s '%s' is not a regular file (a FIFO, device or socket); "
                        "a model must be a GGUF file\n", cmd, what, path);
        return false;
    }
    return true;
}

char *cli_read_text_file(const char *cmd, const char *flag, const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ctorch %s: error: %s %s: cannot open: %s\n", cmd, flag, path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "ctorch %s: error: %s %s is a directory, not a text file\n", cmd, flag, path);
        fclose(f);
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    const char *why = !buf ? "out of memory" : err ? strerror(err) : n == 0 ? "the file is empty" : NULL;
    if (why) {
        fprintf(stderr, "ctorch %s: error: %s %s: %s\n", cmd, flag, path, why);
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    *len = n;
    return buf;
}

static int hex(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

size_t cli_unescape(char *s, size_t len)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '\\' || i + 1 == len) {
            s[o++] = s[i];
            continue;
        }
        char c = s[i + 1], out = 0;
        switch (c) {
        case 'n': out = '\n'; break;
        case 'r': out = '\r'; break;
        case 't': out = '\t'; break;
        case '\\': out = '\\'; break;
        case '\'': out = '\''; break;
        case '"': out = '"'; break;
        case 'x':
            if (i + 3 < len && hex(s[i + 2]) >= 0 && hex(s[i + 3]) >= 0) {
                s[o++] = (char)(hex(s[i + 2]) * 16 + hex(s[i + 3]));
                i += 3;
                continue;
            }
            s[o++] = s[i]; /* not two hex digits: kept as written */
            continue;
        default: s[o++] = s[i]; continue;
        }
        s[o++] = out;
        i++;
    }
    if (o < len) s[o] = 0;
    return o;
}
