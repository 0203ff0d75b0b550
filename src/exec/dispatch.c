/* The dispatcher: route, make operands resident, run, fall back on device errors. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

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

static const char *g_op_names[] = {
#define CT_OP_STR(name, str) str,
    CT_OP_LIST(CT_OP_STR)
#undef CT_OP_STR
};

const char *op_kind_name(ct_op_kind k) { return (unsigned)k < CT_OP_COUNT ? g_op_names[k] : "unknown"; }

bool op_kind_from_name(const char *name, ct_op_kind *k)
{
    for (int i = 0; i < CT_OP_COUNT; i++)
        if (!strcasecmp(name, g_op_names[i])) {
            *k = (ct_op_kind)i;
            return true;
        }
    return false;
}

void *op_data(const ct_tensor *t, const ct_device *dev)
{
    ct_storage_copy *c = storage_find(t->st, dev);
    if (!c || !c->buf.ptr) return NULL;
    return (char *)c->buf.ptr + tensor_byte_offset(t);
}

uint64_t exec_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void stat_add(uint64_t *p, uint64_t v) { __atomic_fetch_add(p, v, __ATOMIC_RELAXED); }

static bool known_device(const exec_state *st, const ct_device *dev)
{
    return dev && dev->id >= 0 && dev->id < st->n_devs && st->devs[dev->id] == dev;
}

/* Storage transfer observer: bytes leave src (bytes_out) and reach dst (bytes_in). */
void exec_count_transfer(const ct_device *src, const ct_device *dst, uint64_t bytes, int method)
{
    exec_state *st = exec_state_get();
    if (known_device(st, src)) stat_add(&st->stats[src->id].bytes_out, bytes);
    if (known_device(st, dst)) stat_add(&st->stats[dst->id].bytes_in, bytes);
    if (method > CT_TRANSFER_NONE && method < CT_TRANSFER_METHOD_COUNT) {
        stat_add(&st->xfer[method].count, 1);
        stat_add(&st->xfer[method].bytes, bytes);
    }
}

const char *ct_transfer_method_name(ct_transfer_method m)
{
    static const char *names[] = {"none", "host-to-device", "device-to-host", "peer", "staged"};
    return (unsigned)m < CT_TRANSFER_METHOD_COUNT ? names[m] : "unknown";
}

ct_transfer_method ct_exec_transfer_method(const char *src, const char *dst)
{
    const ct_device *a = exec_find_device(src), *b = exec_find_device(dst);
    if (!a || !b || a == b) return CT_TRANSFER_NONE;
    bool ha = a->info.kind == CT_DEVICE_CPU, hb = b->info.kind == CT_DEVICE_CPU;
    if (ha && hb) return CT_TRANSFER_NONE;
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
    stat_add(&st->stats[dev->id].fallbacks, 1);
    uint8_t *logged = &st->logged[dev->id][op->kind];
    if (!__atomic_exchange_n(logged, 1, __ATOMIC_RELAXED))
        core_log(CT_LOG_WARN, "%s on %s failed (%s: %s); retrying on the next device in the chain",
                 op_kind_name(op->kind), dev->info.name, ct_status_name(s), ct_last_error());
}

ct_status exec_run(ct_op *op)
{
    exec_state *st = exec_state_get();
    bool timed = st->timing || trace_enabled(); /* two clock reads per op only when asked for */
    uint64_t t0 = timed ? exec_now_ns() : 0, moved = 0;
    bool dst_fresh = !storage_valid_device(op->dst->st) && !op->dst->st->copies[0].valid;
    exec_route_ctx ctx = {st->devs, st->chain, st->n_chain, 0, t_forced, st->strict, st->small_bytes};
    char detail[96] = "";
    for (;;) {
        exec_route_result r;
        ct_status s = exec_route(&ctx, op, &r);
        if (s != CT_OK) return s;
        ct_device *dev = st->devs[r.dev];
        s = attempt(op, dev, dst_fresh, &moved);
        if (s == CT_OK) {
            uint64_t dur = timed ? exec_now_ns() - t0 : 0;
            stat_add(&st->stats[dev->id].ops, 1);
            stat_add(&st->stats[dev->id].time_ns, dur);
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
        if (st->strict)
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
    }
    return st->n_devs;
}

void ct_exec_stats_reset(void)
{
    exec_state *st = exec_state_get();
    memset(st->stats, 0, sizeof st->stats);
    memset(st->xfer, 0, sizeof st->xfer);
}

void ct_exec_print_stats(void)
{
    ct_device_stats s[EXEC_MAX_DEVICES];
    int n = ct_exec_stats(s, EXEC_MAX_DEVICES);
    fprintf(stderr, "ctorch executor summary\n  %-10s %10s %12s %14s %14s %10s\n", "device", "ops", "time ms", "bytes in",
            "bytes out", "fallbacks");
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  %-10s %10llu %12.3f %14llu %14llu %10llu\n", s[i].device, (unsigned long long)s[i].ops,
                (double)s[i].time_ns / 1e6, (unsigned long long)s[i].bytes_in, (unsigned long long)s[i].bytes_out,
                (unsigned long long)s[i].fallbacks);
    ct_transfer_stats x[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(x);
    for (int m = CT_TRANSFER_HOST_TO_DEVICE; m < CT_TRANSFER_METHOD_COUNT; m++)
        if (x[m].count)
            fprintf(stderr, "  transfers %-15s %8llu x %14llu bytes\n", ct_transfer_method_name((ct_transfer_method)m),
                    (unsigned long long)x[m].count, (unsigned long long)x[m].bytes);
}

ct_status ct_tensor_prefetch(const ct_tensor *t, const char *device)
{
    ct_status s = tensor_check("ct_tensor_prefetch", "tensor", t);
    if (s != CT_OK) return s;
    ct_device *d = exec_find_device(device);
    if (!d) return core_err(CT_ERR_NOT_FOUND, "ct_tensor_prefetch: no device '%s'", device ? device : "(null)");
    return storage_make_valid(t->st, d, NULL);
}

bool ct_device_supports(const char *device, const char *op_name, ct_dtype dtype)
{
    ct_device *d = exec_find_device(device);
    ct_op_kind k;
    if (!d || !op_name || !op_kind_from_name(op_name, &k) || (unsigned)dtype >= CT_DTYPE_COUNT) return false;
    if (!(d->info.dtype_mask & (1u << dtype))) return false;
    /* probe with 1-row operands; a quantized dtype goes where ops take weights
     * (the other operands and the output stay f32), plain dtypes everywhere */
    bool q = ct_dtype_is_quantized(dtype);
    int64_t cols = ct_dtype_block_size(dtype);
    ct_tensor w = {.dtype = dtype, .ndim = 2, .shape = {1, cols}, .stride = {cols, 1}};
    ct_tensor f = {.dtype = q ? CT_F32 : dtype, .ndim = 2, .shape = {1, cols}, .stride = {cols, 1}};
    ct_op op = {.kind = k, .n_src = 2, .src = {&f, &f}, .dst = &f};
    op.src[k == CT_OP_LINEAR ? 1 : 0] = &w;
    /* reductions over the whole probe, the form every backend that has the op accepts */
    if (k >= CT_OP_SUM && k <= CT_OP_ARGMIN) op.p.red.mask = 3u;
    return d->ops->supports(d, &op);
}
