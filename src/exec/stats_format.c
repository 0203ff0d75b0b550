/* The statistics as text for the caller to print or log: the library itself
 * writes nothing (stdout and stderr belong to the application). */
#include <stdarg.h>
#include <stdio.h>

#include "exec/state.h"

typedef struct text {
    char *buf;
    size_t cap, len; /* len counts what would have been written */
} text;

__attribute__((format(printf, 2, 3))) static void put(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = t->len < t->cap ? t->cap - t->len : 0;
    int n = vsnprintf(room ? t->buf + t->len : NULL, room, fmt, ap);
    va_end(ap);
    if (n > 0) t->len += (size_t)n;
}

size_t ct_exec_stats_format(char *buf, size_t n)
{
    text t = {buf, buf ? n : 0, 0};
    if (t.cap) buf[0] = 0;
    ct_device_stats s[EXEC_MAX_DEVICES];
    int nd = ct_exec_stats(s, EXEC_MAX_DEVICES);
    put(&t, "ctorch executor summary\n  %-10s %10s %12s %14s %14s %10s %10s\n", "device", "ops", "time ms",
        "bytes in", "bytes out", "fallbacks", "decomposed");
    for (int i = 0; i < nd && i < EXEC_MAX_DEVICES; i++)
        put(&t, "  %-10s %10llu %12.3f %14llu %14llu %10llu %10llu\n", s[i].device, (unsigned long long)s[i].ops,
            (double)s[i].time_ns / 1e6, (unsigned long long)s[i].bytes_in, (unsigned long long)s[i].bytes_out,
            (unsigned long long)s[i].fallbacks, (unsigned long long)s[i].decomposed);
    ct_transfer_stats x[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(x);
    for (int m = CT_TRANSFER_HOST_TO_DEVICE; m < CT_TRANSFER_METHOD_COUNT; m++)
        if (x[m].count)
            put(&t, "  transfers %-15s %8llu x %14llu bytes%s\n", ct_transfer_method_name((ct_transfer_method)m),
                (unsigned long long)x[m].count, (unsigned long long)x[m].bytes,
                m == CT_TRANSFER_SHARED ? " (one memory: none copied)" : "");
    return t.len;
}
