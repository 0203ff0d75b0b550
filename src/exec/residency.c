/* Residency requested by the caller (copies made ahead of the ops that need them,
 * waiting for devices), and the byte ranges an op writes, which decide what stays
 * valid elsewhere. */
#include <stdint.h>

#include "exec/exec.h"

ct_status ct_tensor_prefetch(const ct_tensor *t, const char *device)
{
    ct_status s = tensor_check("ct_tensor_prefetch", "tensor", t);
    if (s != CT_OK) return s;
    s = exec_ready();
    if (s != CT_OK) return s;
    ct_device *d = exec_find_device(device);
    if (!d) return core_err(CT_ERR_NOT_FOUND, "ct_tensor_prefetch: no device '%s'", device ? device : "(null)");
    return storage_make_valid(t->st, d, NULL);
}

/* fn: the public name the caller used, for the messages */
static ct_status place(const char *fn, const ct_tensor *t, const char *device, unsigned flags)
{
    ct_status s = tensor_check(fn, "tensor", t);
    if (s != CT_OK) return s;
    const unsigned known = CT_PLACE_NO_LAYOUT | CT_PLACE_KEEP_HOME;
    if (flags & ~known)
        return core_err(CT_ERR_INVALID_ARG, "%s: unknown flags 0x%x (known: 0x%x)", fn, flags & ~known, known);
    if (!device && flags)
        return core_err(CT_ERR_INVALID_ARG, "%s: flags 0x%x with no device (NULL removes the placement)", fn, flags);
    s = exec_ready();
    if (s != CT_OK) return s;
    if (!device) {
        if (t->st->home) step_bump_placement();
        t->st->home = NULL;
        return CT_OK;
    }
    ct_device *d = exec_find_device(device);
    if (!d) return core_err(CT_ERR_NOT_FOUND, "%s: no device '%s'", fn, device);
    if (device_is_lost(d)) return device_lost_error(d, fn);
    /* the device's own layout first: when it serves the ops, the raw bytes need not go there */
    if (!(flags & CT_PLACE_NO_LAYOUT) && d->ops->import && (s = d->ops->import(d, t)) != CT_OK) return s;
    if (!storage_layout_serves(t, d, -1, -1) && (s = storage_make_valid(t->st, d, NULL)) != CT_OK) return s;
    if (flags & CT_PLACE_KEEP_HOME) return CT_OK;
    if (t->st->home != d) step_bump_placement();
    t->st->home = d;
    return CT_OK;
}

ct_status ct_tensor_place_ex(const ct_tensor *t, const char *device, unsigned flags)
{
    return place("ct_tensor_place_ex", t, device, flags);
}

ct_status ct_tensor_place(const ct_tensor *t, const char *device) { return place("ct_tensor_place", t, device, 0); }

const char *ct_tensor_placement(const ct_tensor *t)
{
    return t && t->st && t->st->home ? t->st->home->info.name : NULL;
}

ct_status ct_device_sync(const char *device)
{
    ct_status s = exec_ready();
    if (s != CT_OK) return s;
    if (device) {
        ct_device *d = exec_find_device(device);
        if (!d) return core_err(CT_ERR_NOT_FOUND, "ct_device_sync: no device '%s'", device);
        return device_sync(d);
    }
    ct_status first = CT_OK;
    for (int i = 0, n = ct_device_count(); i < n; i++) {
        ct_device_info info;
        if (ct_device_get(i, &info) != CT_OK) continue;
        ct_device *d = exec_find_device(info.name);
        if (d && (s = device_sync(d)) != CT_OK && first == CT_OK) first = s;
    }
    return first == CT_OK ? CT_OK : core_err(first, "%s", ct_last_error());
}

ct_status ct_device_memory(const char *device, uint64_t *free_bytes, uint64_t *total_bytes)
{
    if (!free_bytes || !total_bytes) return core_err(CT_ERR_INVALID_ARG, "ct_device_memory: NULL output");
    ct_status s = exec_ready();
    if (s != CT_OK) return s;
    ct_device *d = exec_find_device(device);
    if (!d) return core_err(CT_ERR_NOT_FOUND, "ct_device_memory: no device '%s'", device ? device : "(null)");
    if (!d->ops->mem_info) {
        *total_bytes = d->info.memory_bytes;
        *free_bytes = 0;
        return core_err(CT_ERR_UNSUPPORTED, "ct_device_memory: %s does not report its free memory", d->info.name);
    }
    return d->ops->mem_info(d, free_bytes, total_bytes);
}

/* The rows a SET_ROWS writes, when its indices can be read on the host without waiting
 * (a complete host copy with no write in flight): their hull, so refreshing another copy
 * after a KV append moves the appended rows, not the cache. */
static bool set_rows_range(const ct_op *op, size_t *lo, size_t *hi)
{
    const ct_tensor *idx = op->src[1], *d = op->dst;
    if (!idx || !storage_copy_complete(idx->st, 0) || idx->st->copies[0].writer || !idx->st->copies[0].buf.ptr)
        return false;
    const char *base = (const char *)idx->st->copies[0].buf.ptr + tensor_byte_offset(idx);
    size_t es = ct_dtype_block_bytes(idx->dtype);
    int64_t rmin = INT64_MAX, rmax = -1;
    for (int64_t i = 0; i < idx->shape[0]; i++) {
        const char *p = base + i * idx->stride[0] * (int64_t)es;
        int64_t r = idx->dtype == CT_I32 ? *(const int32_t *)p : *(const int64_t *)p;
        if (r < 0 || r >= d->shape[0]) return false; /* the op fails and writes nothing */
        if (r < rmin) rmin = r;
        if (r > rmax) rmax = r;
    }
    if (rmax < 0) {
        *lo = *hi = 0;
        return true;
    }
    ct_tensor rows = *d;
    rows.shape[0] = rmax - rmin + 1;
    rows.offset += rmin * d->stride[0];
    tensor_byte_range(&rows, lo, hi);
    return true;
}

bool exec_writes_all(const ct_op *op, bool dst_fresh, size_t lo, size_t hi)
{
    /* SET_ROWS writes some rows of its view, wherever the view's span reaches */
    return dst_fresh || (op->kind != CT_OP_SET_ROWS && lo == 0 && hi == op->dst->st->nbytes);
}

void exec_written_range(const ct_op *op, bool dst_fresh, size_t *lo, size_t *hi)
{
    *lo = 0, *hi = op->dst->st->nbytes;
    if (dst_fresh) return;
    if (op->kind == CT_OP_SET_ROWS && set_rows_range(op, lo, hi)) return;
    tensor_byte_range(op->dst, lo, hi); /* a write into a view leaves the rest valid elsewhere */
}
