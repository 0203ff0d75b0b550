/* Executor state: the backends compiled in, the devices they report, the chain
 * and the settings read from the environment. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "exec/state.h"

extern const ct_backend_ops cpu_backend_ops;
#ifdef CTORCH_HAVE_CUDA
extern const ct_backend_ops cuda_backend_ops;
#endif
#ifdef CTORCH_HAVE_OPENCL
extern const ct_backend_ops opencl_backend_ops;
#endif

/* Default for CTORCH_SMALL_BYTES, measured (bench/gpu/crossover.cu, H100 host,
 * bench/gpu/crossover-h100.txt): an f32 add on CPU-resident operands takes 5 us on one
 * core at 32 KiB of operands, while copying them to the GPU, one kernel and copying back
 * takes 32 us (24 us at any size up to 8 KiB); the CPU stays ahead up to ~2 MiB for
 * element-wise ops. Compute-heavy ops (a 128x128 matmul is 64 KiB of operands and ~4 MFLOP)
 * break even near 64 KiB, so that is the default: nothing smaller is worth a transfer. */
#define DEFAULT_SMALL_BYTES (64u * 1024u)

static exec_state g_state;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const ct_backend_ops *g_extra[EXEC_MAX_BACKENDS];
static int g_n_extra;
static char g_spec[256];
static bool g_spec_set;
static bool g_atexit;

static bool env_true(const char *name)
{
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") && strcasecmp(e, "false") && strcasecmp(e, "off");
}

static void release_devices(exec_state *s)
{
    for (int i = 0; i < s->n_devs; i++) {
        ct_device *d = s->devs[i];
        if (d->ops->device_release) d->ops->device_release(d);
        free(d);
        s->devs[i] = NULL;
    }
    s->n_devs = 0;
}

/* Devices found again on rediscovery keep their struct (and backend state), so
 * tensors with copies on them stay valid across ct_exec_reinit(); `old` holds
 * the previous devices, a reused one is taken out of it. */
static ct_device *take_old(ct_device **old, int n_old, const ct_backend_ops *ops, int index)
{
    for (int i = 0; i < n_old; i++)
        if (old[i] && old[i]->ops == ops && old[i]->info.index == index) {
            ct_device *d = old[i];
            old[i] = NULL;
            return d;
        }
    return NULL;
}

static void discover_backend(exec_state *s, const ct_backend_ops *ops, ct_device **old, int n_old)
{
    int n = ops->device_count();
    for (int i = 0; i < n && s->n_devs < EXEC_MAX_DEVICES; i++) {
        ct_device *d = take_old(old, n_old, ops, i);
        if (d) {
            d->id = s->n_devs;
            d->info.chain_position = -1;
            s->devs[s->n_devs++] = d;
            continue;
        }
        d = calloc(1, sizeof *d);
        if (!d) return;
        d->ops = ops;
        d->id = s->n_devs;
        d->info.kind = ops->kind;
        d->info.index = i;
        d->info.chain_position = -1;
        if (ops->kind == CT_DEVICE_CPU) snprintf(d->info.name, sizeof d->info.name, "cpu");
        else snprintf(d->info.name, sizeof d->info.name, "%s:%d", ops->name, i);
        ct_status st = ops->device_init(d, i);
        if (st != CT_OK) {
            core_log(CT_LOG_WARN, "%s: device unusable, skipped: %s", d->info.name, ct_last_error());
            free(d);
            continue;
        }
        s->devs[s->n_devs++] = d;
    }
}

static void discover(exec_state *s)
{
    ct_device *old[EXEC_MAX_DEVICES];
    int n_old = s->n_devs;
    memcpy(old, s->devs, sizeof old);
    memset(s->devs, 0, sizeof s->devs);
    s->n_devs = 0;
    discover_backend(s, &cpu_backend_ops, old, n_old);
#ifdef CTORCH_HAVE_CUDA
    discover_backend(s, &cuda_backend_ops, old, n_old);
#endif
#ifdef CTORCH_HAVE_OPENCL
    discover_backend(s, &opencl_backend_ops, old, n_old);
#endif
    for (int i = 0; i < g_n_extra; i++) discover_backend(s, g_extra[i], old, n_old);
    /* devices that vanished: tensors must not live on them any more (documented) */
    for (int i = 0; i < n_old; i++) {
        if (!old[i]) continue;
        if (old[i]->ops->device_release) old[i]->ops->device_release(old[i]);
        free(old[i]);
    }
}

static ct_status build_chain(exec_state *s)
{
    exec_inventory inv = {.n = s->n_devs};
    for (int i = 0; i < s->n_devs; i++) {
        inv.kind[i] = s->devs[i]->info.kind;
        snprintf(inv.name[i], sizeof inv.name[i], "%s", s->devs[i]->info.name);
    }
    const char *spec = g_spec_set ? g_spec : getenv("CTORCH_DEVICES");
    int chain[EXEC_MAX_DEVICES], n = 0;
    ct_status st = exec_build_chain(&inv, spec, env_true("CTORCH_DISABLE_GPU"), chain, &n);
    if (st != CT_OK) return st;
    for (int i = 0; i < s->n_devs; i++) s->devs[i]->info.chain_position = -1;
    for (int i = 0; i < n; i++) {
        s->chain[i] = chain[i];
        s->devs[chain[i]]->info.chain_position = i;
    }
    s->n_chain = n;
    return CT_OK;
}

static void at_exit(void)
{
    if (env_true("CTORCH_STATS")) ct_exec_print_stats();
    trace_flush();
}

/* Caller holds g_lock. */
static ct_status init_locked(void)
{
    exec_state *s = &g_state;
    memset(s->stats, 0, sizeof s->stats);
    memset(s->logged, 0, sizeof s->logged);
    discover(s);
    storage_set_transfer_hook(exec_count_transfer);
    const char *sb = getenv("CTORCH_SMALL_BYTES");
    s->small_bytes = sb && *sb ? (size_t)strtoull(sb, NULL, 10) : DEFAULT_SMALL_BYTES;
    s->strict = env_true("CTORCH_STRICT");
    s->timing = env_true("CTORCH_STATS");
    ct_status st = build_chain(s);
    if (st == CT_OK) st = fault_parse(getenv("CTORCH_FAULT"));
    if (st == CT_OK) st = trace_configure(getenv("CTORCH_TRACE"));
    if (!g_atexit) {
        atexit(at_exit);
        g_atexit = true;
    }
    s->ready = true;
    if (st != CT_OK) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        core_log(CT_LOG_ERROR, "executor settings ignored: %s", msg);
        if (s->n_chain == 0) { /* keep a working chain: the CPU */
            s->chain[0] = 0;
            s->n_chain = 1;
        }
        core_err(st, "%s", msg);
    }
    return st;
}

exec_state *exec_state_get(void)
{
    if (__atomic_load_n(&g_state.ready, __ATOMIC_ACQUIRE)) return &g_state;
    pthread_mutex_lock(&g_lock);
    if (!g_state.ready) init_locked();
    pthread_mutex_unlock(&g_lock);
    return &g_state;
}

ct_status ct_exec_reinit(void)
{
    pthread_mutex_lock(&g_lock);
    ct_status s = init_locked();
    pthread_mutex_unlock(&g_lock);
    return s;
}

void ct_exec_shutdown(void)
{
    pthread_mutex_lock(&g_lock);
    trace_flush();
    trace_configure(NULL);
    fault_clear();
    release_devices(&g_state);
    g_state.n_chain = 0;
    g_state.ready = false;
    pthread_mutex_unlock(&g_lock);
}

ct_status exec_register_backend(const ct_backend_ops *ops)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n_extra; i++)
        if (g_extra[i] == ops) {
            pthread_mutex_unlock(&g_lock);
            return CT_OK;
        }
    if (g_n_extra == EXEC_MAX_BACKENDS) {
        pthread_mutex_unlock(&g_lock);
        return core_err(CT_ERR_RANGE, "too many backends registered");
    }
    g_extra[g_n_extra++] = ops;
    ct_status s = init_locked();
    pthread_mutex_unlock(&g_lock);
    return s;
}

void exec_unregister_backend(const ct_backend_ops *ops)
{
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_n_extra; i++)
        if (g_extra[i] == ops) {
            g_extra[i] = g_extra[--g_n_extra];
            break;
        }
    init_locked();
    pthread_mutex_unlock(&g_lock);
}

ct_status ct_exec_set_devices(const char *spec)
{
    pthread_mutex_lock(&g_lock);
    if (!g_state.ready) init_locked();
    char old[256];
    bool old_set = g_spec_set;
    snprintf(old, sizeof old, "%s", g_spec);
    g_spec_set = spec != NULL;
    snprintf(g_spec, sizeof g_spec, "%s", spec ? spec : "");
    ct_status s = build_chain(&g_state);
    if (s != CT_OK) { /* keep the previous chain */
        g_spec_set = old_set;
        snprintf(g_spec, sizeof g_spec, "%s", old);
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}

ct_device *exec_find_device(const char *name)
{
    exec_state *s = exec_state_get();
    if (!name) return NULL;
    for (int i = 0; i < s->n_devs; i++)
        if (!strcasecmp(s->devs[i]->info.name, name)) return s->devs[i];
    /* a bare kind names its first device */
    for (int i = 0; i < s->n_devs; i++)
        if (!strcasecmp(ct_device_kind_name(s->devs[i]->info.kind), name)) return s->devs[i];
    return NULL;
}

ct_device *exec_host_device(void) { return exec_state_get()->devs[0]; }

const char *ct_device_kind_name(ct_device_kind k)
{
    static const char *names[] = {"cpu", "cuda", "opencl", "metal", "coreml", "test"};
    return (unsigned)k < CT_DEVICE_KIND_COUNT ? names[k] : "unknown";
}

int ct_device_count(void) { return exec_state_get()->n_devs; }

ct_status ct_device_get(int i, ct_device_info *info)
{
    exec_state *s = exec_state_get();
    if (!info) return core_err(CT_ERR_INVALID_ARG, "ct_device_get: info is NULL");
    if (i < 0 || i >= s->n_devs) return core_err(CT_ERR_RANGE, "ct_device_get: no device %d (%d found)", i, s->n_devs);
    *info = s->devs[i]->info;
    return CT_OK;
}

int ct_chain_length(void) { return exec_state_get()->n_chain; }

ct_status ct_chain_get(int pos, ct_device_info *info)
{
    exec_state *s = exec_state_get();
    if (!info) return core_err(CT_ERR_INVALID_ARG, "ct_chain_get: info is NULL");
    if (pos < 0 || pos >= s->n_chain)
        return core_err(CT_ERR_RANGE, "ct_chain_get: position %d outside the chain of %d", pos, s->n_chain);
    *info = s->devs[s->chain[pos]]->info;
    return CT_OK;
}

void ct_exec_set_strict(bool strict) { exec_state_get()->strict = strict; }
bool ct_exec_strict(void) { return exec_state_get()->strict; }
void ct_exec_set_small_bytes(size_t bytes) { exec_state_get()->small_bytes = bytes; }
size_t ct_exec_small_bytes(void) { return exec_state_get()->small_bytes; }

ct_status ct_exec_set_fault(const char *spec)
{
    exec_state_get();
    return fault_parse(spec);
}

ct_status ct_exec_set_trace(const char *spec)
{
    exec_state_get();
    return trace_configure(spec);
}
