/* Routing: which device runs an op, and why. A pure function of the op, the
 * residency of its operands and the chain, so it is unit-tested directly. */
#include "exec/exec.h"

static bool excluded(const exec_route_ctx *c, int id) { return (c->excluded >> id) & 1u; }

static bool capable(const exec_route_ctx *c, int id, const ct_op *op)
{
    const ct_device *d = c->devs[id];
    return !excluded(c, id) && !device_is_lost(d) && d->ops->supports(d, op);
}

/* All present sources valid on dev (an op with no sources is "resident" nowhere). */
static bool resident_on(const ct_op *op, const ct_device *dev)
{
    int present = 0;
    for (int i = 0; i < op->n_src; i++) {
        if (!op->src[i]) continue;
        present++;
        if (!storage_valid_on(op->src[i]->st, dev)) return false;
    }
    return present > 0;
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
    int head = -1, cpu = -1;
    for (int i = 0; i < c->n_chain; i++) {
        int id = c->chain[i];
        if (!capable(c, id, op)) continue;
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
    /* operands already on an accelerator further down the chain: run there, no transfer */
    for (int i = 0; i < c->n_chain; i++) {
        int id = c->chain[i];
        if (id == head || c->devs[id]->info.kind == CT_DEVICE_CPU || !capable(c, id, op)) continue;
        if (resident_on(op, c->devs[id]) && !resident_on(op, c->devs[head])) {
            *res = (exec_route_result){id, c->excluded ? CT_REASON_FALLBACK : CT_REASON_RESIDENCY};
            return CT_OK;
        }
    }
    *res = (exec_route_result){head, why};
    return CT_OK;
}
