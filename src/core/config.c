/* The environment, read in one place. Snapshots are immutable once published and
 * never freed (a reload is rare and a snapshot small), so a reader may keep using
 * the pointer it got while another thread reloads: no data race, no lock on reads. */
#include "core/config.h"

#include "core/backend.h"
#include "core/cpuid.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef struct snapshot {
    core_config cfg;
    struct snapshot *prev; /* kept reachable: readers may still hold it */
} snapshot;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static snapshot *g_current;
static snapshot g_first; /* the first snapshot needs no allocation, so there always is one */

static void defaults(core_config *c)
{
    memset(c, 0, sizeof *c);
    c->small_bytes = CONFIG_DEFAULT_SMALL_BYTES;
    c->host_cache_bytes = (size_t)256 << 20;
    c->log_level = CT_LOG_WARN;
    c->repack = true;
    c->amx = true;
    c->replay = true;
    c->pipeline = -1;
    c->fuse = true;
    c->simd_cap = 2; /* CORE_SIMD_CAP_AVX512: no cap below what the CPU has */
}

/* The variable's value, or NULL when unset or empty (empty means "default"). */
static const char *env(const char *name)
{
    const char *e = getenv(name);
    return e && *e ? e : NULL;
}

static ct_status bad(const char *name, const char *value, const char *want)
{
    return core_err(CT_ERR_INVALID_ARG, "%s='%s' is not valid (want %s)", name, value, want);
}

static ct_status read_bool(const char *name, bool *out)
{
    const char *e = env(name);
    if (!e) return CT_OK;
    static const char *yes[] = {"1", "true", "on", "yes"}, *no[] = {"0", "false", "off", "no"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(e, yes[i])) return *out = true, CT_OK;
        if (!strcasecmp(e, no[i])) return *out = false, CT_OK;
    }
    return bad(name, e, "1/0, true/false, on/off or yes/no");
}

/* "auto" (-1) or a boolean (1 / 0). */
static ct_status read_auto_bool(const char *name, int *out)
{
    const char *e = env(name);
    if (!e) return CT_OK;
    if (!strcasecmp(e, "auto")) return *out = -1, CT_OK;
    bool b;
    ct_status s = read_bool(name, &b);
    if (s != CT_OK) return bad(name, e, "auto, 1/0, true/false, on/off or yes/no");
    *out = b;
    return CT_OK;
}

/* A decimal integer in [lo, hi], the whole string. */
static ct_status read_uint(const char *name, unsigned long long lo, unsigned long long hi, unsigned long long *out)
{
    const char *e = env(name);
    if (!e) return CT_OK;
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(e, &end, 10);
    if (*e == '-' || *e == '+' || errno || *end || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof want, "a whole number from %llu to %llu", lo, hi);
        return bad(name, e, want);
    }
    *out = v;
    return CT_OK;
}

static ct_status read_string(const char *name, char *out, size_t cap)
{
    const char *e = env(name);
    if (!e) return CT_OK;
    if (strlen(e) >= cap)
        return core_err(CT_ERR_INVALID_ARG, "%s is too long (%zu characters, at most %zu)", name, strlen(e), cap - 1);
    memcpy(out, e, strlen(e) + 1);
    return CT_OK;
}

static ct_status read_log_level(int *out)
{
    const char *e = env("CTORCH_LOG");
    if (!e) return CT_OK;
    static const char *names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (!strcasecmp(e, names[i])) return *out = i, CT_OK;
    if (!strcasecmp(e, "warning")) return *out = CT_LOG_WARN, CT_OK;
    return bad("CTORCH_LOG", e, "debug, info, warn or error");
}

/* The kernel cache's root: CTORCH_CACHE_DIR, or the XDG cache folder's ctorch. */
static ct_status read_cache_dir(char *out, size_t cap)
{
    if (env("CTORCH_CACHE_DIR")) return read_string("CTORCH_CACHE_DIR", out, cap);
    const char *xdg = env("XDG_CACHE_HOME"), *home = env("HOME");
    int n = 0;
    if (xdg) n = snprintf(out, cap, "%s/ctorch", xdg);
    else if (home) n = snprintf(out, cap, "%s/.cache/ctorch", home);
    if (n < 0 || (size_t)n >= cap) out[0] = 0; /* too long to be used: no disk cache */
    return CT_OK;
}

/* op[:n] with op a trace name and n >= 1: checked here so a typo fails at init. */
static ct_status read_late_fault(char *out, size_t cap)
{
    const char *name = "CTORCH_CUDA_LATE_FAULT";
    ct_status s = read_string(name, out, cap);
    if (s != CT_OK || !*out) return s;
    char op[64];
    snprintf(op, sizeof op, "%s", out);
    char *colon = strchr(op, ':');
    bool ok = true;
    if (colon) {
        *colon = 0;
        char *end = NULL;
        long n = strtol(colon + 1, &end, 10);
        ok = colon[1] && !*end && n >= 1 && n <= 1000000000L;
    }
    ct_op_kind k;
    if (!ok || !op_kind_from_name(op, &k)) {
        char bad_value[64];
        snprintf(bad_value, sizeof bad_value, "%s", out);
        *out = 0;
        return bad(name, bad_value, "an op name, optionally :n with n >= 1 (e.g. add:3)");
    }
    return CT_OK;
}

/* The names' order is core_simd_cap's (core/cpuid.h): portable 0, avx2 1, avx512 2. */
static ct_status read_simd(int *out)
{
    const char *e = env("CTORCH_SIMD");
    if (!e) return CT_OK;
    static const char *names[] = {"portable", "avx2", "avx512"};
    for (int i = 0; i < 3; i++)
        if (!strcasecmp(e, names[i])) return *out = i, CT_OK;
    return bad("CTORCH_SIMD", e, "portable, avx2 or avx512");
}

static ct_status read_prefetch(int *out)
{
    const char *e = env("CTORCH_PREFETCH");
    if (!e) return CT_OK;
    if (!strcasecmp(e, "l1")) return *out = CORE_PREFETCH_L1, CT_OK;
    if (!strcasecmp(e, "l2")) return *out = CORE_PREFETCH_L2, CT_OK;
    return bad("CTORCH_PREFETCH", e, "l1 or l2");
}

/* Keeps the first error (the message of a later one would overwrite it). */
static void keep(ct_status *first, char *msg, size_t len, ct_status s)
{
    if (s == CT_OK || *first != CT_OK) return;
    *first = s;
    snprintf(msg, len, "%s", ct_last_error());
}

ct_status config_read(core_config *c)
{
    defaults(c);
    ct_status first = CT_OK;
    char msg[512] = "";
    unsigned long long small = c->small_bytes, cache_mb = 256, threads = 0, cuda_mb = 0;
    keep(&first, msg, sizeof msg, read_string("CTORCH_DEVICES", c->devices, sizeof c->devices));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_DISABLE_GPU", &c->disable_gpu));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_STRICT", &c->strict));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_STATS", &c->stats));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_SYNC", &c->sync));
    keep(&first, msg, sizeof msg, read_string("CTORCH_TRACE", c->trace, sizeof c->trace));
    keep(&first, msg, sizeof msg, read_string("CTORCH_FAULT", c->fault, sizeof c->fault));
    keep(&first, msg, sizeof msg, read_uint("CTORCH_SMALL_BYTES", 0, (unsigned long long)SIZE_MAX, &small));
    keep(&first, msg, sizeof msg, read_uint("CTORCH_HOST_CACHE_MB", 0, (unsigned long long)1 << 30, &cache_mb));
    keep(&first, msg, sizeof msg, read_uint("CTORCH_THREADS", 1, 4096, &threads));
    keep(&first, msg, sizeof msg, read_log_level(&c->log_level));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_REPACK", &c->repack));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_AMX", &c->amx));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_REPLAY", &c->replay));
    keep(&first, msg, sizeof msg, read_auto_bool("CTORCH_PIPELINE", &c->pipeline));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_FUSE", &c->fuse));
    keep(&first, msg, sizeof msg, read_cache_dir(c->cache_dir, sizeof c->cache_dir));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_OPENCL_POISON", &c->opencl_poison));
    keep(&first, msg, sizeof msg, read_uint("CTORCH_CUDA_MEM_MB", 0, (unsigned long long)1 << 30, &cuda_mb));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_CUDA_POISON", &c->cuda_poison));
    keep(&first, msg, sizeof msg, read_bool("CTORCH_CUDA_TF32", &c->cuda_tf32));
    keep(&first, msg, sizeof msg, read_late_fault(c->cuda_late_fault, sizeof c->cuda_late_fault));
    c->cuda_mem_bytes = (size_t)cuda_mb << 20;
    keep(&first, msg, sizeof msg, read_simd(&c->simd_cap));
    keep(&first, msg, sizeof msg, read_string("CTORCH_BPE_PRE", c->bpe_pre, sizeof c->bpe_pre));
    keep(&first, msg, sizeof msg, read_prefetch(&c->prefetch));
    c->small_bytes = (size_t)small;
    c->host_cache_bytes = (size_t)cache_mb << 20;
    c->threads = (int)threads;
    if (first != CT_OK) core_err(first, "%s", msg);
    return first;
}

static void publish_locked(const core_config *c)
{
    snapshot *s = g_current ? malloc(sizeof *s) : &g_first;
    if (!s) return; /* keep the current snapshot: still a consistent one */
    s->cfg = *c;
    s->prev = g_current;
    __atomic_store_n(&g_current, s, __ATOMIC_RELEASE);
}

const core_config *config_current(void)
{
    snapshot *s = __atomic_load_n(&g_current, __ATOMIC_ACQUIRE);
    if (s) return &s->cfg;
    pthread_mutex_lock(&g_lock);
    if (!g_current) {
        core_config c;
        char saved[512];
        snprintf(saved, sizeof saved, "%s", ct_last_error());
        config_read(&c); /* a bad value keeps its default; the executor's init reports it */
        core_err(CT_OK, "%s", saved); /* a lazy read must not clobber the caller's error */
        publish_locked(&c);
    }
    pthread_mutex_unlock(&g_lock);
    return &__atomic_load_n(&g_current, __ATOMIC_ACQUIRE)->cfg;
}

void config_publish(const core_config *c)
{
    pthread_mutex_lock(&g_lock);
    publish_locked(c);
    pthread_mutex_unlock(&g_lock);
}
