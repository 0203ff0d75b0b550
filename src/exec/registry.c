/* Executor state: the backends compiled in, the devices they report, the chain
 * and the settings read from the environment. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/config.h"
#include "exec/state.h"

extern const ct_backend_ops cpu_backend_ops;
#ifdef CTORCH_HAVE_CUDA
extern const ct_backend_ops cuda_backend_ops;
#endif
#ifdef CTORCH_HAVE_OPENCL
extern const ct_backend_ops opencl_backend_ops;
#endif

static exec_state g_state;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static const ct_backend_ops *g_extra[EXEC_MAX_BACKENDS];
static int g_n_extra;
static bool g_hide_builtin; /* tests of simulated devices: the real accelerators stay out */
static char g_spec[256];
static bool g_spec_set;
static bool g_atexit;

static void release_devices(exec_state *s)
{
    for (int i = 0; i < s->n_devs; i++) {
        ct_device *d = s->devs[i];
        pin_forget_device(d);
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
    if (!g_hide_builtin) discover_backend(s, &cuda_backend_ops, old, n_old);
#endif
#ifdef CTORCH_HAVE_OPENCL
    if (!g_hide_builtin) discover_backend(s, &opencl_backend_ops, old, n_old);
#endif
    for (int i = 0; i < g_n_extra; i++) discover_backend(s, g_extra[i], old, n_old);
    /* devices that vanished: tensors must not live on them any more (documented) */
    for (int i = 0; i < n_old; i++) {
        if (!old[i]) continue;
        pin_forget_device(old[i]);
        if (old[i]->ops->device_release) old[i]->ops->device_release(old[i]);
        free(old[i]);
    }
}

/* The chain for `spec` over the discovered devices, into chain/n (nothing applied). */
static ct_status plan_chain(const exec_state *s, const char *spec, bool disable_gpu, int *chain, int *n)
{
    exec_inventory inv = {.n = s->n_devs};
    for (int i = 0; i < s->n_devs; i++) {
        inv.kind[i] = s->devs[i]->info.kind;
        inv.flags[i] = s->devs[i]->info.flags;
        snprintf(inv.name[i], sizeof inv.name[i], "%s", s->devs[i]->info.name);
    }
    ct_status st = exec_build_chain(&inv, spec, disable_gpu, chain, n);
    if (st != CT_OK && spec && *spec && !g_spec_set) { /* say where a bad chain came from */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        core_err(st, "CTORCH_DEVICES='%s': %s", spec, msg);
    }
    return st;
}

static void set_chain(exec_state *s, const int *chain, int n)
{
    for (int i = 0; i < s->n_devs; i++) s->devs[i]->info.chain_position = -1;
    for (int i = 0; i < n; i++) {
        s->chain[i] = chain[i];
        s->devs[chain[i]]->info.chain_position = i;
    }
    s->n_chain = n;
    step_bump_chain();
}

static void at_exit(void) { trace_flush(); }

/* Applies a configuration: everything is checked before anything changes, so a
 * bad setting leaves the previous ones in force. Caller holds g_lock. */
static ct_status apply_locked(exec_state *s, const core_config *c)
{
    int chain[EXEC_MAX_DEVICES], n = 0;
    ct_status st = plan_chain(s, g_spec_set ? g_spec : c->devices, c->disable_gpu, chain, &n);
    if (st == CT_OK) st = fault_validate(c->fault);
    if (st == CT_OK) st = trace_configure(c->trace); /* the last check: it applies itself on success */
    if (st != CT_OK) return st;
    fault_parse(c->fault);
    set_chain(s, chain, n);
    __atomic_store_n(&s->small_bytes, c->small_bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&s->strict, c->strict, __ATOMIC_RELAXED);
    __atomic_store_n(&s->timing, c->stats, __ATOMIC_RELAXED);
    __atomic_store_n(&s->sync, c->sync, __ATOMIC_RELAXED);
    return CT_OK;
}

/* Records the outcome of a (re)initialization for exec_ready. Caller holds g_lock. */
static ct_status set_init_status(exec_state *s, ct_status st)
{
    if (st != CT_OK) snprintf(s->init_error, sizeof s->init_error, "%s", ct_last_error());
    __atomic_store_n(&s->init_status, st, __ATOMIC_RELEASE);
    return st;
}

/* Reads the environment, discovers devices and applies the settings. A failed
 * re-initialization keeps the settings in force; a failed first one leaves an
 * executor whose ops report the error until a later call fixes it. Caller holds g_lock. */
static ct_status init_locked(void)
{
    exec_state *s = &g_state;
    bool was_ok = s->ready && s->init_status == CT_OK;
    memset(s->stats, 0, sizeof s->stats);
    memset(s->logged, 0, sizeof s->logged);
    core_config c, prev = *config_current();
    ct_status st = config_read(&c);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    bool read_ok = st == CT_OK;
    if (read_ok) config_publish(&c); /* before discovery: a CPU device made now takes its SIMD cap from it */
    discover(s);
    for (int i = 0; i < s->n_devs; i++) device_clear_lost(s->devs[i]); /* lost until re-initialization */
    device_table_set(s->devs, s->n_devs);
    storage_set_transfer_hook(exec_count_transfer);
    core_set_note_hook(trace_note);
    if (!g_atexit) {
        atexit(at_exit);
        g_atexit = true;
    }
    if (st == CT_OK) st = apply_locked(s, &c);
    if (st == CT_OK) {
        set_init_status(s, CT_OK);
    } else {
        if (read_ok) {
            snprintf(msg, sizeof msg, "%s", ct_last_error());
            config_publish(&prev); /* the settings in force stay */
        }
        /* the devices may have changed under the settings in force: re-apply them */
        if (!was_ok || apply_locked(s, config_current()) != CT_OK) {
            core_err(st, "%s", msg);
            s->n_chain = 0; /* nothing runs on settings the user did not ask for */
            set_init_status(s, st);
        }
        core_err(st, "%s", msg);
    }
    __atomic_store_n(&s->ready, true, __ATOMIC_RELEASE);
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

ct_status exec_ready(void)
{
    exec_state *s = exec_state_get();
    if (__atomic_load_n(&s->init_status, __ATOMIC_ACQUIRE) == CT_OK) return CT_OK;
    pthread_mutex_lock(&g_lock);
    ct_status st = s->init_status;
    char msg[sizeof s->init_error];
    memcpy(msg, s->init_error, sizeof msg);
    pthread_mutex_unlock(&g_lock);
    return st == CT_OK ? CT_OK : core_err(st, "executor settings refused: %s", msg);
}

ct_status ct_exec_init(void) { return exec_ready(); }

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
    device_table_set(g_state.devs, 0);
    g_state.n_chain = 0;
    g_state.ready = false;
    pthread_mutex_unlock(&g_lock);
}

void exec_hide_builtin_accelerators(bool hide)
{
    pthread_mutex_lock(&g_lock);
    g_hide_builtin = hide;
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
    if (spec && strlen(spec) >= sizeof g_spec)
        return core_err(CT_ERR_INVALID_ARG, "ct_exec_set_devices: spec is too long (%zu characters, at most %zu)",
                        strlen(spec), sizeof g_spec - 1);
    pthread_mutex_lock(&g_lock);
    if (!g_state.ready) init_locked();
    char old[sizeof g_spec];
    bool old_set = g_spec_set;
    snprintf(old, sizeof old, "%s", g_spec);
    g_spec_set = spec != NULL;
    snprintf(g_spec, sizeof g_spec, "%s", spec ? spec : "");
    ct_status s;
    if (g_state.init_status == CT_OK) {
        int chain[EXEC_MAX_DEVICES], n = 0;
        const core_config *c = config_current();
        s = plan_chain(&g_state, spec ? spec : c->devices, c->disable_gpu, chain, &n);
        if (s == CT_OK) set_chain(&g_state, chain, n);
    } else {
        s = init_locked(); /* the settings were refused: this spec may be what fixes them */
    }
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

void ct_exec_set_strict(bool strict) { __atomic_store_n(&exec_state_get()->strict, strict, __ATOMIC_RELAXED); }
bool ct_exec_strict(void) { return __atomic_load_n(&exec_state_get()->strict, __ATOMIC_RELAXED); }
void ct_exec_set_small_bytes(size_t bytes) { __atomic_store_n(&exec_state_get()->small_bytes, bytes, __ATOMIC_RELAXED); }
size_t ct_exec_small_bytes(void) { return __atomic_load_n(&exec_state_get()->small_bytes, __ATOMIC_RELAXED); }

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

ct_status ct_host_pin(void *ptr, size_t bytes)
{
    if (!bytes) return CT_OK; /* nothing to lock */
    if (!ptr) return core_err(CT_ERR_INVALID_ARG, "ct_host_pin: ptr is NULL for %zu bytes", bytes);
    if ((uintptr_t)ptr + bytes < (uintptr_t)ptr)
        return core_err(CT_ERR_RANGE, "ct_host_pin: [%p, +%zu bytes) wraps around the address space", ptr, bytes);
    exec_state *s = exec_state_get();
    pthread_mutex_lock(&g_lock);
    ct_status st = pin_add(ptr, bytes, s->devs, s->n_devs);
    pthread_mutex_unlock(&g_lock);
    return st;
}

void ct_host_unpin(void *ptr)
{
    if (!ptr) return;
    pthread_mutex_lock(&g_lock); /* never starts the executor: this may run after ct_exec_shutdown */
    bool known = pin_remove(ptr);
    pthread_mutex_unlock(&g_lock);
    if (!known) core_log(CT_LOG_DEBUG, "ct_host_unpin: %p was not pinned (ignored)", ptr);
}

int exec_pinned(size_t *bytes)
{
    pthread_mutex_lock(&g_lock);
    int n = pin_count(bytes);
    pthread_mutex_unlock(&g_lock);
    return n;
}
