/* Status codes, the thread-local last error, and the log hook. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"

static _Thread_local char g_last_error[512];

static ct_log_fn g_log_fn;
static void *g_log_ctx;
static int g_log_level = -1; /* ct_set_log_level's choice; -1: CTORCH_LOG's (core/config.c) */

const char *ct_status_name(ct_status s)
{
    static const char *names[] = {
        "ok", "invalid argument", "shape mismatch", "dtype mismatch", "out of memory",
        "device out of memory", "device fault", "unsupported", "strict mode", "i/o error",
        "malformed file", "not found", "out of range", "device lost",
    };
    if ((unsigned)s < sizeof names / sizeof names[0]) return names[s];
    return "unknown status";
}

const char *ct_last_error(void) { return g_last_error; }
void ct_clear_error(void) { g_last_error[0] = 0; }

ct_status core_err(ct_status s, const char *fmt, ...)
{
    /* formatted aside first: an argument may be ct_last_error() itself */
    char buf[sizeof g_last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    memcpy(g_last_error, buf, sizeof buf);
    return s;
}

void ct_set_log_callback(ct_log_fn fn, void *ctx)
{
    g_log_fn = fn;
    g_log_ctx = ctx;
}

void ct_set_log_level(ct_log_level level) { __atomic_store_n(&g_log_level, (int)level, __ATOMIC_RELAXED); }

static int log_level(void)
{
    int lvl = __atomic_load_n(&g_log_level, __ATOMIC_RELAXED);
    return lvl >= 0 ? lvl : config_current()->log_level;
}

bool core_log_enabled(ct_log_level level) { return (int)level >= log_level(); }

void core_log(ct_log_level level, const char *fmt, ...)
{
    if (!core_log_enabled(level)) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (g_log_fn) {
        g_log_fn(level, msg, g_log_ctx);
        return;
    }
    static const char *tags[] = {"debug", "info", "warn", "error"};
    fprintf(stderr, "ctorch %s: %s\n", tags[level], msg);
}

/* Notes for the trace: the executor owns the trace and installs the hook, so layers below
 * it (a backend's failed kernel build) can put a line there without calling upwards. */
static core_note_fn g_note_fn;

void core_set_note_hook(core_note_fn fn) { __atomic_store_n(&g_note_fn, fn, __ATOMIC_RELEASE); }

void core_note(const char *fmt, ...)
{
    core_note_fn fn = __atomic_load_n(&g_note_fn, __ATOMIC_ACQUIRE);
    if (!fn) return;
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fn(msg);
}
