/* Trace: one line per op on stderr, or a Chrome/Perfetto JSON trace file. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "exec/exec.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_mode;          /* 0 off, 1 stderr lines, 2 json file */
static FILE *g_json;
static bool g_json_first;
static uint64_t g_t0;
static uint32_t g_named;    /* devices whose track name was written */
static char g_path[4096];   /* the trace file's path */

bool trace_enabled(void) { return __atomic_load_n(&g_mode, __ATOMIC_RELAXED) != 0; }

static void close_json(void)
{
    if (!g_json) return;
    fputs("\n]}\n", g_json);
    fclose(g_json);
    g_json = NULL;
}

static bool is_json_path(const char *spec)
{
    size_t n = strlen(spec);
    return n > 5 && !strcmp(spec + n - 5, ".json");
}

ct_status trace_configure(const char *spec)
{
    spec = spec ? spec : "";
    bool off = !*spec || !strcmp(spec, "0"), lines = !strcmp(spec, "1") || !strcasecmp(spec, "stderr");
    if (!off && !lines && !is_json_path(spec))
        return core_err(CT_ERR_INVALID_ARG, "CTORCH_TRACE='%s' is not valid (want 1 or stderr for lines on stderr, "
                        "a path ending in .json for a trace file, or 0)", spec);
    pthread_mutex_lock(&g_lock);
    if (g_mode == 2 && g_json && !strcmp(spec, g_path)) { /* a re-initialization must not truncate the file */
        pthread_mutex_unlock(&g_lock);
        return CT_OK;
    }
    FILE *f = NULL;
    if (!off && !lines && !(f = fopen(spec, "w"))) {
        pthread_mutex_unlock(&g_lock);
        return core_err(CT_ERR_IO, "CTORCH_TRACE: cannot open '%s' for writing", spec);
    }
    close_json();
    g_named = 0;
    if (f) {
        fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", f);
        g_json = f;
        g_json_first = true;
        snprintf(g_path, sizeof g_path, "%s", spec);
    }
    __atomic_store_n(&g_mode, off ? 0 : lines ? 1 : 2, __ATOMIC_RELAXED);
    g_t0 = exec_now_ns();
    pthread_mutex_unlock(&g_lock);
    return CT_OK;
}

uint64_t exec_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void trace_flush(void)
{
    pthread_mutex_lock(&g_lock);
    close_json();
    if (g_mode == 2) __atomic_store_n(&g_mode, 0, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g_lock);
}

static void operands(const ct_op *op, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = 0;
    for (int i = 0; i < op->n_src && pos < len; i++) {
        const ct_tensor *t = op->src[i];
        if (!t) continue;
        char sh[96];
        pos += (size_t)snprintf(buf + pos, len - pos, "%s%s%s", pos ? " " : "", shape_str(t->ndim, t->shape, sh, sizeof sh),
                                ct_dtype_name(t->dtype));
    }
}

void trace_op(const ct_op *op, const ct_device *dev, ct_route_reason reason, uint64_t t0_ns, uint64_t dur_ns,
              uint64_t moved, const char *detail)
{
    char ins[384], out[96];
    operands(op, ins, sizeof ins);
    shape_str(op->dst->ndim, op->dst->shape, out, sizeof out);
    char mv[40] = "";
    if (moved) snprintf(mv, sizeof mv, " | moved %llu B", (unsigned long long)moved);
    pthread_mutex_lock(&g_lock);
    if (g_mode == 1) {
        fprintf(stderr, "[ctorch] %-12s %s -> %s%s | %-8s | %-10s | %8.1f us%s\n", op_kind_name(op->kind), ins, out,
                ct_dtype_name(op->dst->dtype), dev->info.name, ct_route_reason_name(reason), (double)dur_ns / 1e3, mv);
        if (detail && *detail) fprintf(stderr, "[ctorch]   %s\n", detail);
    } else if (g_mode == 2 && g_json) {
        if (!(g_named & (1u << dev->id))) {
            fprintf(g_json, "%s{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":%d,\"args\":{\"name\":\"%s\"}}",
                    g_json_first ? "" : ",\n", dev->id, dev->info.name);
            g_json_first = false;
            g_named |= 1u << dev->id;
        }
        fprintf(g_json,
                ",\n{\"name\":\"%s\",\"cat\":\"op\",\"ph\":\"X\",\"pid\":1,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                "\"args\":{\"inputs\":\"%s\",\"output\":\"%s%s\",\"device\":\"%s\",\"reason\":\"%s\",\"bytes_moved\":%llu,"
                "\"detail\":\"%s\"}}",
                op_kind_name(op->kind), dev->id, (double)(t0_ns - g_t0) / 1e3, (double)dur_ns / 1e3, ins, out,
                ct_dtype_name(op->dst->dtype), dev->info.name, ct_route_reason_name(reason), (unsigned long long)moved,
                detail ? detail : "");
    }
    pthread_mutex_unlock(&g_lock);
}

void trace_note(const char *msg)
{
    if (!trace_enabled()) return;
    pthread_mutex_lock(&g_lock);
    if (g_mode == 1) {
        fprintf(stderr, "[ctorch] %s\n", msg);
    } else if (g_mode == 2 && g_json) {
        char esc[256];
        size_t j = 0;
        for (const char *c = msg; *c && j + 2 < sizeof esc; c++) {
            if (*c == '"' || *c == '\\') esc[j++] = '\\';
            esc[j++] = *c;
        }
        esc[j] = 0;
        fprintf(g_json, "%s{\"name\":\"%s\",\"cat\":\"note\",\"ph\":\"i\",\"s\":\"g\",\"pid\":1,\"tid\":0,\"ts\":%.3f}",
                g_json_first ? "" : ",\n", esc, (double)(exec_now_ns() - g_t0) / 1e3);
        g_json_first = false;
    }
    pthread_mutex_unlock(&g_lock);
}
