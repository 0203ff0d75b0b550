/* Routing: which device runs an op, and why. A pure function of the op, the
 * residency of its operands and the chain, so it is unit-tested directly. */
#include "exec/exec.h"

static bool excluded(const exec_route_ctx *c, int id) { return (c->excluded >> id) & 1u; }

static bool capable(const exec_route_ctx *c, int id, const ct_op *op)
{
    const ct_device *d = c->devs[id];
    return !excluded(c, id) && !device_is_lost(d) && d->ops->supports(d, op);
}

/* Bytes an operand would move to dev. Only data with a place weighs: a placed storage,
 * an op's result (it lives where the op ran), or a copy on an accelerator. The caller's
 * own host data goes to whichever device runs the op (the chain decides): all data
 * starts on the host, and that must not keep it there. */
static uint64_t located_bytes(const ct_storage *st, const ct_device *dev)
{
    if (!st->home && !st->written_on && !storage_valid_device(st)) return 0;
    /* a placed storage weighs in full away from its home, whatever copies exist elsewhere */
    if (st->home && st->home != dev) return st->nbytes;
    return storage_bytes_to_move(st, dev);
}

/* What running op on dev would move: the storages' bytes (or their stale ranges) that
 * are not complete there, each storage once; the output too when it is written in part. */
static uint64_t moved_bytes(const ct_op *op, const ct_device *dev, bool dst_in_place)
{
    const ct_storage *seen[CT_OP_MAX_SRC + 1];
    int n = 0;
    uint64_t bytes = 0;
    for (int i = 0; i <= op->n_src; i++) {
        const ct_tensor *t = i < op->n_src ? op->src[i] : dst_in_place ? op->dst : NULL;
        if (!t) continue;
        bool dup = false;
        for (int j = 0; j < n && !dup; j++) dup = seen[j] == t->st;
        if (dup) continue;
        /* a layout the device imported serves this source: its raw bytes need not move */
        if (i < op->n_src && t->st->derived && storage_layout_serves(t, dev, (int)op->kind, i)) continue;
        seen[n++] = t->st;
        bytes += located_bytes(t->st, dev);
    }
    return bytes;
}

static bool written_before(const ct_storage *st)
{
    for (int i = 0; i < st->n_copies; i++)
        if (st->copies[i].valid) return true;
    return false;
}

/* Bytes the op touches: sources plus output. */
static size_t op_bytes(const ct_op *op)
{
    size_t b = ct_tensor_nbytes(op->dst);
    for (int i = 0; i < op->n_src; i++) b += ct_tensor_nbytes(op->src[i]);
    return b;
}

static bool host_resident(const ct_op *op)
{
    for (int i = 0; i < op->n_src; i++)
        if (op->src[i] && !storage_valid_on(op->src[i]->st, NULL)) return false;
    return true;
}

static ct_status no_device(const exec_route_ctx *c, const ct_op *op)
{
    const char *dt = op->n_src && op->src[0] ? ct_dtype_name(op->src[0]->dtype) : ct_dtype_name(op->dst->dtype);
    if (c->excluded)
        return core_err(CT_ERR_UNSUPPORTED, "%s (%s %s): every capable device in the chain failed", op_kind_name(op->kind),
                        dt, SHAPE_STR(op->dst));
    return core_err(CT_ERR_UNSUPPORTED, "%s (%s %s): no device in the chain supports it", op_kind_name(op->kind), dt,
                    SHAPE_STR(op->dst));
}

ct_status exec_route(const exec_route_ctx *c, const ct_op *op, exec_route_result *res)
{
    if (c->forced >= 0 && !excluded(c, c->forced)) {
        if (!capable(c, c->forced, op))
            return core_err(CT_ERR_UNSUPPORTED, "%s: forced device %s does not support it", op_kind_name(op->kind),
                            c->devs[c->forced]->info.name);
        *res = (exec_route_result){c->forced, CT_REASON_FORCED};
        return CT_OK;
    }
    int head = -1, cpu = -1, n_capable = 0;
    for (int i = 0; i < c->n_chain; i++) {
        int id = c->chain[i];
        if (!capable(c, id, op)) continue;
        n_capable++;
        if (head < 0) head = id;
        if (cpu < 0 && c->devs[id]->info.kind == CT_DEVICE_CPU) cpu = id;
    }
    if (c->strict) {
        const ct_device *first = c->devs[c->chain[0]];
        if (head != c->chain[0])
            return core_err(CT_ERR_STRICT, "strict mode: %s (%s) cannot run on %s, the head of the chain (%s)",
                            op_kind_name(op->kind), SHAPE_STR(op->dst), first->info.name,
                            excluded(c, c->chain[0]) ? "it failed with a device error" : "unsupported there");
        *res = (exec_route_result){head, CT_REASON_CAPABILITY};
        return CT_OK;
    }
    if (head < 0) return no_device(c, op);
    ct_route_reason why = c->excluded ? CT_REASON_FALLBACK : CT_REASON_CAPABILITY;
    if (cpu >= 0 && cpu != head && host_resident(op) && op_bytes(op) < c->small_bytes) {
        *res = (exec_route_result){cpu, c->excluded ? CT_REASON_FALLBACK : CT_REASON_SIZE};
        return CT_OK;
    }
    if (n_capable == 1) { /* nothing to weigh (a CPU-only chain: the eager path stays short) */
        *res = (exec_route_result){head, why};
        return CT_OK;
    }
    /* ops follow their data: the capable device that moves the fewest bytes (the head on a tie) */
    bool in_place = written_before(op->dst->st);
    int best = head;
    uint64_t best_bytes = moved_bytes(op, c->devs[head], in_place);
    for (int i = 0; i < c->n_chain && best_bytes; i++) {
        int id = c->chain[i];
        if (id == head || !capable(c, id, op)) continue;
        uint64_t b = moved_bytes(op, c->devs[id], in_place);
        if (b < best_bytes) best = id, best_bytes = b;
    }
    if (best != head) why = c->excluded ? CT_REASON_FALLBACK : CT_REASON_RESIDENCY;
    *res = (exec_route_result){best, why};
    return CT_OK;
}
