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

/* One try of an op on one device: what it allocated there (released if it fails)
 * and which device a failure is charged to. */
typedef struct attempt_ctx {
    ct_device *failed;
    ct_storage *allocated[CT_OP_MAX_SRC + 1];
    int n_alloc;
} attempt_ctx;

static void note_alloc(attempt_ctx *a, ct_storage *st, bool allocated)
{
    if (allocated && a->n_alloc < CT_OP_MAX_SRC + 1) a->allocated[a->n_alloc++] = st;
}

static bool never_written(const ct_storage *st)
{
    for (int i = 0; i < st->n_copies; i++)
        if (st->copies[i].valid) return false;
    return true;
}

/* Operands valid on dev; the output allocated there (fresh) or made valid (partial
 * write); dev's queue ordered after everything those copies wait for. */
static ct_status make_resident(ct_op *op, ct_device *dev, bool dst_fresh, uint64_t *moved, attempt_ctx *a)
{
    bool allocated;
    for (int i = 0; i < op->n_src; i++) {
        if (!op->src[i]) continue;
        if (op->src[i]->st->derived && storage_layout_serves(op->src[i], dev, (int)op->kind, i)) continue; /* imported */
        ct_status s = storage_make_valid_ex(op->src[i]->st, dev, moved, &a->failed, &allocated);
        note_alloc(a, op->src[i]->st, allocated);
        if (s != CT_OK) return s;
    }
    ct_storage *dst = op->dst->st;
    ct_status s;
    size_t lo, hi;
    exec_written_range(op, dst_fresh, &lo, &hi);
    if (exec_writes_all(op, dst_fresh, lo, hi)) { /* nothing of it to bring first */
        ct_storage_copy *c = storage_find(dst, dev);
        allocated = !(c && c->buf.ptr);
        s = storage_alloc_on(dst, dev);
        a->failed = s == CT_OK || status_is_device_error(s) ? dev : NULL;
        if (s == CT_OK) note_alloc(a, dst, allocated);
    } else {
        s = storage_make_valid_ex(dst, dev, moved, &a->failed, &allocated);
        note_alloc(a, dst, allocated);
    }
    if (s != CT_OK) return s;
    a->failed = NULL;
    return storage_order_write(dst, dev);
}

/* The op's storages are not evicted to make room for each other. The CPU never
 * evicts, so its ops skip the bookkeeping. */
static void mark_busy(ct_op *op, const ct_device *dev, int delta)
{
    if (dev->info.kind == CT_DEVICE_CPU) return;
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i]) storage_busy(op->src[i]->st, delta);
    storage_busy(op->dst->st, delta);
}

static ct_status attempt(ct_op *op, ct_device *dev, bool dst_fresh, bool sync, uint64_t *moved, attempt_ctx *a)
{
    a->failed = dev;
    ct_status s = fault_check(dev, op->kind);
    if (s != CT_OK) return s;
    mark_busy(op, dev, 1);
    s = make_resident(op, dev, dst_fresh, moved, a);
    mark_busy(op, dev, -1);
    if (s != CT_OK) return s;
    a->failed = dev;
    s = dev->ops->run(dev, op);
    ct_event *ev = NULL;
    if (s == CT_OK) s = event_record(dev, &ev);
    if (s != CT_OK) return s;
    size_t lo, hi;
    exec_written_range(op, dst_fresh, &lo, &hi);
    storage_mark_written_at(op->dst->st, dev, ev, lo, hi);
    event_release(ev);
    /* CTORCH_SYNC: a late fault is charged to the op that caused it */
    if (sync && (s = device_sync(dev)) != CT_OK) return s;
    a->n_alloc = 0; /* kept: they hold the op's operands and result */
    return CT_OK;
}

/* A failed attempt releases what it allocated on its device. */
static void undo_attempt(attempt_ctx *a, const ct_device *dev)
{
    for (int i = 0; i < a->n_alloc; i++) storage_drop_copy(a->allocated[i], dev);
    a->n_alloc = 0;
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

/* Decides whether an attempt's failure is retried: CT_OK to try again (the device
 * that failed is excluded, or marked lost), else the status to return. An error is
 * charged to the device that failed, which is not always the one the op was sent to:
 * a download from a faulted device while feeding a CPU op is that device's failure. */
static ct_status charge_failure(exec_state *st, exec_route_ctx *ctx, const ct_op *op, ct_device *dev,
                                ct_device *culprit, ct_status s, char *detail, size_t len)
{
    if (!culprit) return s; /* not a device's error: bad input, host memory, data already lost */
    if (s != CT_ERR_DEVICE_LOST && !status_is_device_error(s)) return s;
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ct_last_error());
    bool progress = false;
    if (culprit != dev && s == CT_ERR_DEVICE_FAULT && !device_is_lost(culprit)) {
        device_mark_lost(culprit, msg); /* it cannot give its data back */
        progress = true;
    }
    if (!((ctx->excluded >> culprit->id) & 1u)) {
        ctx->excluded |= 1u << culprit->id;
        progress = true;
    }
    if (!progress) return core_err(s, "%s", msg);
    note_failure(st, op, culprit, s, detail, len);
    core_err(s, "%s", msg);
    return CT_OK;
}

static void note_done(exec_state *st, const ct_op *op, ct_device *dev, ct_route_reason reason, bool timed,
                      uint64_t t0, uint64_t moved, const char *detail)
{
    uint64_t dur = timed ? exec_now_ns() - t0 : 0;
    exec_stat_add(&st->stats[dev->id].ops, 1);
    exec_stat_add(&st->stats[dev->id].time_ns, dur);
    t_last.set = true;
    t_last.op = op->kind;
    t_last.dev = dev->id;
    t_last.reason = reason;
    t_last.time_ns = dur;
    /* most ops have no detail: formatting an empty string was a fifth of an eager add */
    if (!*detail) t_last.detail[0] = 0;
    else snprintf(t_last.detail, sizeof t_last.detail, "%s", detail);
    if (timed) trace_op(op, dev, reason, t0, dur, moved, detail);
}

static bool timing_on(exec_state *st) { return __atomic_load_n(&st->timing, __ATOMIC_RELAXED) || trace_enabled(); }

ct_status exec_run_on(ct_op *op, ct_device *dev, ct_route_reason reason)
{
    exec_state *st = exec_state_get();
    bool timed = timing_on(st);
    uint64_t t0 = timed ? exec_now_ns() : 0, moved = 0;
    attempt_ctx a = {0};
    bool dst_fresh = never_written(op->dst->st);
    ct_status s = attempt(op, dev, dst_fresh, __atomic_load_n(&st->sync, __ATOMIC_RELAXED), &moved, &a);
    if (s != CT_OK) {
        undo_attempt(&a, dev);
        return s;
    }
    note_done(st, op, dev, reason, timed, t0, moved, "");
    /* the parts of a decomposition are what a replay runs: the fused op never ran */
    if (exec_step_rec) step_note(exec_step_rec, op, dev, reason, dst_fresh);
    return CT_OK;
}

void exec_note_decomposed(const ct_op *op, ct_device *dev, uint64_t t0_ns)
{
    exec_state *st = exec_state_get();
    exec_stat_add(&st->stats[dev->id].decomposed, 1);
    uint64_t dur = exec_now_ns() - t0_ns;
    t_last.set = true;
    t_last.op = op->kind;
    t_last.dev = dev->id;
    t_last.reason = CT_REASON_DECOMPOSED;
    t_last.time_ns = dur;
    snprintf(t_last.detail, sizeof t_last.detail, "ran as its parts on %s", dev->info.name);
    if (timing_on(st)) trace_op(op, dev, CT_REASON_DECOMPOSED, t0_ns, dur, 0, t_last.detail);
}

ct_status exec_run(ct_op *op)
{
    ct_status ready = exec_ready();
    if (ready != CT_OK) return ready;
    if (exec_decompose_active()) return exec_decompose_part(op); /* pinned to the decomposing device */
    exec_state *st = exec_state_get();
    bool strict = __atomic_load_n(&st->strict, __ATOMIC_RELAXED);
    /* two clock reads per op only when asked for */
    bool timed = timing_on(st);
    uint64_t t0 = timed ? exec_now_ns() : 0, moved = 0;
    bool dst_fresh = never_written(op->dst->st);
    bool sync = __atomic_load_n(&st->sync, __ATOMIC_RELAXED);
    exec_route_ctx ctx = {st->devs, st->chain, st->n_chain, 0, t_forced, strict,
                          __atomic_load_n(&st->small_bytes, __ATOMIC_RELAXED)};
    char detail[96] = "";
    for (;;) {
        ct_status s;
        ct_device *dd = exec_decomposable(op->kind) ? exec_decompose_target(&ctx, op) : NULL;
        if (dd) { /* the head lacks the fused op but has its parts: they run there */
            int mark = exec_step_rec ? step_mark(exec_step_rec) : 0;
            s = exec_decompose_run(op, dd, dst_fresh);
            if (s == CT_OK) return CT_OK;
            if (exec_step_rec) step_rewind(exec_step_rec, mark); /* the parts that ran are redone elsewhere */
            s = charge_failure(st, &ctx, op, dd, dd, s, detail, sizeof detail);
            if (s == CT_OK && strict) s = CT_ERR_STRICT;
            if (s != CT_OK && exec_step_rec) step_note_failure(exec_step_rec, s);
            if (s != CT_OK && s != CT_ERR_STRICT) return s;
            if (strict)
                return core_err(CT_ERR_STRICT, "strict mode: %s failed on %s as its parts (%s) and fallback is disabled",
                                op_kind_name(op->kind), dd->info.name, ct_last_error());
            continue;
        }
        exec_route_result r;
        s = exec_route(&ctx, op, &r);
        if (s != CT_OK) {
            if (exec_step_rec) step_note_failure(exec_step_rec, s);
            return s;
        }
        ct_device *dev = st->devs[r.dev];
        attempt_ctx a = {0};
        s = attempt(op, dev, dst_fresh, sync, &moved, &a);
        if (s == CT_OK) {
            note_done(st, op, dev, r.reason, timed, t0, moved, detail);
            if (exec_step_rec) step_note(exec_step_rec, op, dev, r.reason, dst_fresh);
            return CT_OK;
        }
        undo_attempt(&a, dev);
        s = charge_failure(st, &ctx, op, dev, a.failed, s, detail, sizeof detail);
        if (s != CT_OK) {
            if (exec_step_rec) step_note_failure(exec_step_rec, s);
            return s;
        }
        if (strict && exec_step_rec) step_note_failure(exec_step_rec, CT_ERR_STRICT);
        if (strict)
            return core_err(CT_ERR_STRICT, "strict mode: %s failed on %s (%s) and fallback is disabled",
                            op_kind_name(op->kind), dev->info.name, ct_last_error());
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
    static const char *names[] = {"capability", "residency", "size", "fallback", "forced", "decomposed"};
    return (unsigned)r <= CT_REASON_DECOMPOSED ? names[r] : "unknown";
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
