/* Events between device queues, and device health. A late error (from event_sync
 * or sync) cannot be retried: the op that caused it is long gone. It marks the
 * device lost instead, and every later access to data that lived only there reports
 * CT_ERR_DEVICE_LOST naming the device, never stale bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"

static bool is_host(const ct_device *dev) { return !dev || dev->info.kind == CT_DEVICE_CPU; }

#define MAX_IDS 32
static ct_device *g_devs[MAX_IDS]; /* set under the executor's lock, read by ops */
static int g_n_devs;
static uint32_t g_lost_mask; /* atomic: bit per lost device id */

void device_table_set(ct_device *const *devs, int n)
{
    n = n < MAX_IDS ? n : MAX_IDS;
    for (int i = 0; i < MAX_IDS; i++) __atomic_store_n(&g_devs[i], i < n ? devs[i] : NULL, __ATOMIC_RELEASE);
    __atomic_store_n(&g_n_devs, n, __ATOMIC_RELEASE);
    uint32_t lost = 0;
    for (int i = 0; i < n; i++)
        if (devs[i] && __atomic_load_n(&devs[i]->lost, __ATOMIC_ACQUIRE)) lost |= 1u << i;
    __atomic_store_n(&g_lost_mask, lost, __ATOMIC_RELEASE);
}

static uint32_t bit(const ct_device *dev) { return dev->id >= 0 && dev->id < MAX_IDS ? 1u << dev->id : 0; }

ct_device *device_lost_among(uint32_t deps)
{
    uint32_t m = deps & __atomic_load_n(&g_lost_mask, __ATOMIC_ACQUIRE);
    if (!m) return NULL;
    return __atomic_load_n(&g_devs[__builtin_ctz(m)], __ATOMIC_ACQUIRE);
}

bool device_any_lost(void) { return __atomic_load_n(&g_lost_mask, __ATOMIC_ACQUIRE) != 0; }

ct_status event_record(ct_device *dev, ct_event **out)
{
    *out = NULL;
    if (is_host(dev) || !dev->ops->event_record) return CT_OK;
    void *h = NULL;
    ct_status s = dev->ops->event_record(dev, &h);
    if (s != CT_OK || !h) return s;
    ct_event *e = malloc(sizeof *e);
    if (!e) {
        if (dev->ops->event_release) dev->ops->event_release(dev, h);
        /* without an event the host must wait, which keeps the order */
        return device_sync(dev) == CT_OK ? CT_OK : CT_ERR_DEVICE_LOST;
    }
    e->dev = dev, e->handle = h, e->refcnt = 1;
    /* Waits on a device already known lost cover only results that are tracked as lost
     * by their own events: work submitted since never reads them (make_valid refuses). */
    uint32_t lost = __atomic_load_n(&g_lost_mask, __ATOMIC_ACQUIRE);
    if (lost) __atomic_fetch_and(&dev->waited, ~lost, __ATOMIC_RELEASE);
    e->deps = __atomic_load_n(&dev->waited, __ATOMIC_ACQUIRE);
    *out = e;
    return CT_OK;
}

ct_event *event_retain(ct_event *e)
{
    if (e) __atomic_fetch_add(&e->refcnt, 1, __ATOMIC_RELAXED);
    return e;
}

void event_release(ct_event *e)
{
    if (!e || __atomic_fetch_sub(&e->refcnt, 1, __ATOMIC_ACQ_REL) != 1) return;
    if (e->dev->ops->event_release) e->dev->ops->event_release(e->dev, e->handle);
    free(e);
}

bool device_is_lost(const ct_device *dev) { return dev && __atomic_load_n(&dev->lost, __ATOMIC_ACQUIRE); }

void device_mark_lost(ct_device *dev, const char *why)
{
    if (!dev || device_is_lost(dev)) return;
    snprintf(dev->lost_reason, sizeof dev->lost_reason, "%s", why && *why ? why : "late device error");
    __atomic_store_n(&dev->lost, true, __ATOMIC_RELEASE);
    __atomic_fetch_or(&g_lost_mask, bit(dev), __ATOMIC_RELEASE);
    core_log(CT_LOG_WARN, "%s lost (%s): it leaves the chain; data that lived only there is gone",
             dev->info.name, dev->lost_reason);
}

void device_clear_lost(ct_device *dev)
{
    __atomic_store_n(&dev->lost, false, __ATOMIC_RELEASE);
    __atomic_fetch_and(&g_lost_mask, ~bit(dev), __ATOMIC_RELEASE);
    __atomic_store_n(&dev->waited, 0, __ATOMIC_RELEASE);
    dev->lost_reason[0] = 0;
}

ct_status device_lost_error(const ct_device *dev, const char *what)
{
    return core_err(CT_ERR_DEVICE_LOST, "%s: device %s was lost (%s)", what, dev->info.name, dev->lost_reason);
}

/* A late error from dev: it is lost from now on. */
static ct_status late_failure(ct_device *dev, const char *when)
{
    char why[200];
    snprintf(why, sizeof why, "%s at %s", ct_last_error()[0] ? ct_last_error() : "device error", when);
    device_mark_lost(dev, why);
    return device_lost_error(dev, when);
}

static ct_device *device_by_id(int id)
{
    return id < __atomic_load_n(&g_n_devs, __ATOMIC_ACQUIRE) ? __atomic_load_n(&g_devs[id], __ATOMIC_ACQUIRE) : NULL;
}

/* The host waits for the devices in `mask` and, transitively, for the devices their
 * queues waited on: work that read another device's results (device-side waits) is
 * confirmed only once that device is known to have done its part without failing.
 * A cycle of waits is fine: each device is synced once. */
static ct_status sync_closure(uint32_t mask)
{
    uint32_t done = 0, confirmed[MAX_IDS] = {0};
    while (mask & ~done) {
        int id = __builtin_ctz(mask & ~done);
        done |= 1u << id;
        ct_device *d = device_by_id(id);
        if (!d || is_host(d)) continue;
        if (device_is_lost(d)) return device_lost_error(d, "sync");
        confirmed[id] = __atomic_load_n(&d->waited, __ATOMIC_ACQUIRE);
        if (d->ops->sync(d) != CT_OK) return late_failure(d, "sync");
        mask |= confirmed[id];
    }
    for (int id = 0; id < MAX_IDS; id++) { /* all good: those waits need no checking again */
        ct_device *d = (done >> id) & 1u ? device_by_id(id) : NULL;
        if (d && confirmed[id]) __atomic_fetch_and(&d->waited, ~confirmed[id], __ATOMIC_RELEASE);
    }
    return CT_OK;
}

ct_status device_sync(ct_device *dev)
{
    if (is_host(dev)) return CT_OK;
    if (device_is_lost(dev)) return device_lost_error(dev, "sync");
    uint32_t b = bit(dev);
    if (!b) return dev->ops->sync(dev) == CT_OK ? CT_OK : late_failure(dev, "sync");
    return sync_closure(b);
}

ct_status event_order(ct_device *dev, ct_event *e)
{
    if (!e || e->dev == dev) return CT_OK; /* one queue runs in order */
    if (device_is_lost(e->dev)) return device_lost_error(e->dev, "waiting for its work");
    ct_device *dep = device_lost_among(e->deps);
    if (dep) return device_lost_error(dep, "waiting for work that read its results");
    if (!is_host(dev) && dev->ops == e->dev->ops && dev->ops->event_wait) {
        ct_status s = dev->ops->event_wait(dev, e->dev, e->handle);
        if (s == CT_OK) {
            __atomic_fetch_or(&dev->waited, bit(e->dev) | e->deps, __ATOMIC_RELEASE);
            return CT_OK;
        }
        /* the waiting device could not queue the wait: the host waits instead */
    }
    ct_status s = e->dev->ops->event_sync(e->dev, e->handle);
    if (s != CT_OK) return late_failure(e->dev, "event sync");
    return e->deps & ~bit(e->dev) ? sync_closure(e->deps & ~bit(e->dev)) : CT_OK;
}
