/* Trace: one line per op on stderr, or a Chrome/Perfetto JSON trace file. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "exec/exec.h"

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_mode;          /* 0 off, 1 stderr lines, 2 json file */
static FILE *g_json;
static bool g_json_first;
static uint64_t g_t0;
static uint32_t g_named;    /* devices whose track name was written */

bool trace_enabled(void) { return __atomic_load_n(&g_mode, __ATOMIC_RELAXED) != 0; }

static void close_json(void)
{
    if (!g_json) return;
    fputs("\n]}\n", g_json);
    fclose(g_json);
    g_json = NULL;
}

ct_status trace_configure(const char *spec)
{
    pthread_mutex_lock(&g_lock);
    close_json();
    g_mode = 0;
    g_named = 0;
    ct_status s = CT_OK;
    if (spec && *spec && strcmp(spec, "0")) {
        size_t n = strlen(spec);
        if (n > 5 && !strcmp(spec + n - 5, ".json")) {
            g_json = fopen(spec, "w");
            if (!g_json) {
                s = core_err(CT_ERR_IO, "CTORCH_TRACE: cannot open '%s' for writing", spec);
            } else {
                fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n", g_json);
                g_json_first = true;
                g_mode = 2;
            }
        } else {
            g_mode = 1;
        }
    }
    g_t0 = exec_now_ns();
    pthread_mutex_unlock(&g_lock);
    return s;
}

void trace_flush(void)
{
    pthread_mutex_lock(&g_lock);
    close_json();
    if (g_mode == 2) g_mode = 0;
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
