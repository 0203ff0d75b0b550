/* Counters: ops, time and fallbacks per device, and transfers per method. Updated
 * with relaxed atomic adds from any thread; read as a snapshot. */
#include <stdio.h>
#include <string.h>

#include "exec/state.h"

void exec_stat_add(uint64_t *p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

static bool known_device(const exec_state *st, const ct_device *dev)
{
    return dev && dev->id >= 0 && dev->id < st->n_devs && st->devs[dev->id] == dev;
}

/* Storage transfer observer: bytes leave src (bytes_out) and reach dst (bytes_in). */
void exec_count_transfer(const ct_device *src, const ct_device *dst, uint64_t bytes, int method)
{
    exec_state *st = exec_state_get();
    bool copied = method != CT_TRANSFER_SHARED; /* zero-copy: no bytes leave or reach a device */
    if (copied && known_device(st, src)) exec_stat_add(&st->stats[src->id].bytes_out, bytes);
    if (copied && known_device(st, dst)) exec_stat_add(&st->stats[dst->id].bytes_in, bytes);
    if (method > CT_TRANSFER_NONE && method < CT_TRANSFER_METHOD_COUNT) {
        exec_stat_add(&st->xfer[method].count, 1);
        exec_stat_add(&st->xfer[method].bytes, bytes);
    }
}

const char *ct_transfer_method_name(ct_transfer_method m)
{
    static const char *names[] = {"none", "host-to-device", "device-to-host", "peer", "staged", "zero-copy"};
    return (unsigned)m < CT_TRANSFER_METHOD_COUNT ? names[m] : "unknown";
}

ct_transfer_method ct_exec_transfer_method(const char *src, const char *dst)
{
    const ct_device *a = exec_find_device(src), *b = exec_find_device(dst);
    if (!a || !b || a == b) return CT_TRANSFER_NONE;
    bool ha = a->info.kind == CT_DEVICE_CPU, hb = b->info.kind == CT_DEVICE_CPU;
    if (ha && hb) return CT_TRANSFER_NONE;
    if ((ha && device_aliases_host(b)) || (hb && device_aliases_host(a))) return CT_TRANSFER_SHARED;
    if (ha) return CT_TRANSFER_HOST_TO_DEVICE;
    if (hb) return CT_TRANSFER_DEVICE_TO_HOST;
    return a->ops == b->ops && a->ops->copy_peer ? CT_TRANSFER_PEER : CT_TRANSFER_STAGED;
}

void ct_exec_transfer_stats(ct_transfer_stats stats[CT_TRANSFER_METHOD_COUNT])
{
    exec_state *st = exec_state_get();
    for (int m = 0; stats && m < CT_TRANSFER_METHOD_COUNT; m++) {
        stats[m].count = __atomic_load_n(&st->xfer[m].count, __ATOMIC_RELAXED);
        stats[m].bytes = __atomic_load_n(&st->xfer[m].bytes, __ATOMIC_RELAXED);
    }
}

int ct_exec_stats(ct_device_stats *out, int cap)
{
    exec_state *st = exec_state_get();
    for (int i = 0; i < st->n_devs && i < cap && out; i++) {
        exec_dev_stats *d = &st->stats[i];
        snprintf(out[i].device, sizeof out[i].device, "%s", st->devs[i]->info.name);
        out[i].ops = __atomic_load_n(&d->ops, __ATOMIC_RELAXED);
        out[i].time_ns = __atomic_load_n(&d->time_ns, __ATOMIC_RELAXED);
        out[i].bytes_in = __atomic_load_n(&d->bytes_in, __ATOMIC_RELAXED);
        out[i].bytes_out = __atomic_load_n(&d->bytes_out, __ATOMIC_RELAXED);
        out[i].fallbacks = __atomic_load_n(&d->fallbacks, __ATOMIC_RELAXED);
        out[i].decomposed = __atomic_load_n(&d->decomposed, __ATOMIC_RELAXED);
        out[i].layout_bytes = storage_layout_bytes(st->devs[i]);
    }
    return st->n_devs;
}

void ct_exec_stats_reset(void)
{
    exec_state *st = exec_state_get();
    memset(st->stats, 0, sizeof st->stats);
    memset(st->xfer, 0, sizeof st->xfer);
}

bool ct_exec_stats_requested(void) { return exec_state_get()->timing; }
