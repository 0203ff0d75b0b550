/* Fault injection: CTORCH_FAULT=dev:op:err[:count][,...] makes a device fail an
 * op on purpose, so fallback is provable without a broken GPU. dev and op may be
 * "*"; dev may contain a colon ("cuda:0"); count defaults to unlimited. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exec/exec.h"

#define MAX_FAULTS 8

typedef struct fault {
    char dev[32];   /* device name, kind, or "*" */
    int op;         /* ct_op_kind or -1 for any */
    ct_status err;
    long remaining; /* -1 = unlimited */
} fault;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static fault g_faults[MAX_FAULTS];
static int g_n;

static bool parse_err(const char *s, ct_status *err)
{
    if (!strcasecmp(s, "oom")) *err = CT_ERR_DEVICE_OOM;
    else if (!strcasecmp(s, "fault")) *err = CT_ERR_DEVICE_FAULT;
    else if (!strcasecmp(s, "unsupported")) *err = CT_ERR_UNSUPPORTED;
    else return false;
    return true;
}

static ct_status parse_one(char *item, fault *f)
{
    char *part[5];
    int n = 0;
    for (char *save = NULL, *p = strtok_r(item, ":", &save); p; p = strtok_r(NULL, ":", &save)) {
        if (n == 5) return CT_ERR_INVALID_ARG; /* trailing fields would be silently ignored */
        part[n++] = p;
    }
    /* forms: dev:op:err, dev:op:err:n, kind:idx:op:err, kind:idx:op:err:n */
    int e = n - 1;
    char *end = NULL;
    long count = -1;
    if (n >= 4 && (strtol(part[n - 1], &end, 10), *end == 0) && !parse_err(part[n - 1], &f->err)) {
        count = strtol(part[n - 1], NULL, 10);
        if (count < 0) return CT_ERR_INVALID_ARG;
        e = n - 2;
    }
    if (e < 2 || !parse_err(part[e], &f->err)) return CT_ERR_INVALID_ARG;
    int op_i = e - 1;
    if (op_i == 1) snprintf(f->dev, sizeof f->dev, "%s", part[0]);
    else if (op_i == 2) snprintf(f->dev, sizeof f->dev, "%s:%s", part[0], part[1]);
    else return CT_ERR_INVALID_ARG;
    ct_op_kind k;
    if (!strcmp(part[op_i], "*")) f->op = -1;
    else if (op_kind_from_name(part[op_i], &k)) f->op = (int)k;
    else return CT_ERR_INVALID_ARG;
    f->remaining = count;
    return CT_OK;
}

static ct_status parse_all(const char *spec, fault *tmp, int *n_out)
{
    int n = 0;
    if (spec && *spec) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", spec);
        for (char *save = NULL, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            char copy[128];
            snprintf(copy, sizeof copy, "%s", item);
            if (n == MAX_FAULTS || parse_one(copy, &tmp[n]) != CT_OK)
                return core_err(CT_ERR_INVALID_ARG,
                                "CTORCH_FAULT: cannot parse '%s' (want device:op:oom|fault|unsupported[:count], at most %d)",
                                item, MAX_FAULTS);
            n++;
        }
    }
    *n_out = n;
    return CT_OK;
}

ct_status fault_validate(const char *spec)
{
    fault tmp[MAX_FAULTS];
    int n;
    return parse_all(spec, tmp, &n);
}

ct_status fault_parse(const char *spec)
{
    fault tmp[MAX_FAULTS];
    int n;
    ct_status s = parse_all(spec, tmp, &n);
    if (s != CT_OK) return s;
    pthread_mutex_lock(&g_lock);
    memcpy(g_faults, tmp, sizeof(fault) * (size_t)n);
    __atomic_store_n(&g_n, n, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&g_lock);
    return CT_OK;
}

void fault_clear(void) { fault_parse(NULL); }

static bool dev_matches(const char *pat, const ct_device *dev)
{
    return !strcmp(pat, "*") || !strcasecmp(pat, dev->info.name) ||
           !strcasecmp(pat, ct_device_kind_name(dev->info.kind));
}

ct_status fault_check(const ct_device *dev, ct_op_kind op)
{
    if (!__atomic_load_n(&g_n, __ATOMIC_RELAXED)) return CT_OK;
    ct_status s = CT_OK;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n; i++) {
        fault *f = &g_faults[i];
        if (f->remaining == 0 || (f->op >= 0 && f->op != (int)op) || !dev_matches(f->dev, dev)) continue;
        if (f->remaining > 0) f->remaining--;
        s = core_err(f->err, "injected fault: %s on %s (CTORCH_FAULT)", op_kind_name(op), dev->info.name);
        break;
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}
