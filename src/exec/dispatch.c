/* The dispatcher: route, make operands resident, run, fall back on device errors. */
#include <stdio.h>
#include <string.h>

#include "exec/state.h"

static _Thread_local int t_forced = -1;
static _Thread_local struct {
    bool set;
    ct_op_kind op;
    int dev;
    ct_route_reason reason;
    uint64_t time_ns;
    char detail[96];
} t_last;

/* Operands valid on dev; the output allocated there (fresh) or made valid (partial write). */
static ct_status make_resident(ct_op *op, ct_device *dev, bool dst_fresh, uint64_t *moved)
{
    for (int i = 0; i < op->n_src; i++) {
        if (!op->src[i]) continue;
        ct_status s = storage_make_valid(op->src[i]->st, dev, moved);
        if (s != CT_OK) return s;
    }
    if (dst_fresh) return storage_alloc_on(op->dst->st, dev);
    return storage_make_valid(op->dst->st, dev, moved);
}

static ct_status attempt(ct_op *op, ct_device *dev, bool dst_fresh, uint64_t *moved)
{
    ct_status s = fault_check(dev, op->kind);
    if (s != CT_OK) return s;
    s = make_resident(op, dev, dst_fresh, moved);
    if (s != CT_OK) return s;
    s = dev->ops->run(dev, op);
    if (s == CT_OK) storage_mark_written(op->dst->st, dev);
    return s;
}

static void note_failure(exec_state *st, const ct_op *op, ct_device *dev, ct_status s, char *detail, size_t len)
{
    snprintf(detail, len, "%s failed: %s", dev->info.name, ct_status_name(s));
    exec_stat_add(&st->stats[dev->id].fallbacks, 1);
    uint8_t *logged = &st->logged[dev->id][op->kind];
    if (!__atomic_exchange_n(logged, 1, __ATOMIC_RELAXED))
        core_log(CT_LOG_WARN, "%s on %s failed (%s: %s); retrying on the next device in the chain",
                 op_kind_name(op->kind), dev->info.name, ct_status_name(s), ct_last_error());
}

ct_status exec_run(ct_op *op)
{
    ct_status ready = exec_ready();
    if (ready != CT_OK) return ready;
    exec_state *st = exec_state_get();
    bool strict = __atomic_load_n(&st->strict, __ATOMIC_RELAXED);
    /* two clock reads per op only when asked for */
    bool timed = __atomic_load_n(&st->timing, __ATOMIC_RELAXED) || trace_enabled();
    uint64_t t0 = timed ? exec_now_ns() : 0, moved = 0;
    bool dst_fresh = !storage_valid_device(op->dst->st) && !op->dst->st->copies[0].valid;
    exec_route_ctx ctx = {st->devs, st->chain, st->n_chain, 0, t_forced, strict,
                          __atomic_load_n(&st->small_bytes, __ATOMIC_RELAXED)};
    char detail[96] = "";
    for (;;) {
        exec_route_result r;
        ct_status s = exec_route(&ctx, op, &r);
        if (s != CT_OK) return s;
        ct_device *dev = st->devs[r.dev];
        s = attempt(op, dev, dst_fresh, &moved);
        if (s == CT_OK) {
            uint64_t dur = timed ? exec_now_ns() - t0 : 0;
            exec_stat_add(&st->stats[dev->id].ops, 1);
            exec_stat_add(&st->stats[dev->id].time_ns, dur);
            t_last.set = true;
            t_last.op = op->kind;
            t_last.dev = dev->id;
            t_last.reason = r.reason;
            t_last.time_ns = dur;
            memcpy(t_last.detail, detail, sizeof detail);
            if (timed) trace_op(op, dev, r.reason, t0, dur, moved, detail);
            return CT_OK;
        }
        if (!status_is_device_error(s)) return s;
        note_failure(st, op, dev, s, detail, sizeof detail);
        ctx.excluded |= 1u << dev->id;
        if (strict)
            return core_err(CT_ERR_STRICT, "strict mode: %s failed on %s (%s) and fallback is disabled",
                            op_kind_name(op->kind), dev->info.name, ct_status_name(s));
    }
}

ct_status ct_exec_force_device(const char *device)
{
    if (!device) {
        t_forced = -1;
        return CT_OK;
    }
    ct_device *d = exec_find_device(device);
    if (!d) return core_err(CT_ERR_NOT_FOUND, "ct_exec_force_device: no device '%s'", device);
    t_forced = d->id;
    return CT_OK;
}

const char *ct_route_reason_name(ct_route_reason r)
{
    static const char *names[] = {"capability", "residency", "size", "fallback", "forced"};
    return (unsigned)r <= CT_REASON_FORCED ? names[r] : "unknown";
}

ct_status ct_exec_last(ct_exec_record *rec)
{
    if (!rec) return core_err(CT_ERR_INVALID_ARG, "ct_exec_last: rec is NULL");
    if (!t_last.set) return core_err(CT_ERR_NOT_FOUND, "ct_exec_last: no op has run on this thread");
    exec_state *st = exec_state_get();
    memset(rec, 0, sizeof *rec);
    snprintf(rec->op, sizeof rec->op, "%s", op_kind_name(t_last.op));
    snprintf(rec->device, sizeof rec->device, "%s", t_last.dev < st->n_devs ? st->devs[t_last.dev]->info.name : "?");
    rec->reason = t_last.reason;
    rec->time_ns = t_last.time_ns;
    snprintf(rec->detail, sizeof rec->detail, "%s", t_last.detail);
    return CT_OK;
}
