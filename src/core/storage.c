/* Storage with one copy per device and validity flags. Slot 0 is the host copy
 * (owned by core, or external memory from ct_tensor_from_blob); slots 1.. are
 * device copies owned by their backend. Device-to-device copies use the backend's
 * peer copy when both devices belong to it, and stage through the host otherwise. */
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"

static bool is_host(const ct_device *dev) { return !dev || dev->info.kind == CT_DEVICE_CPU; }

static storage_transfer_fn g_transfer_hook;

void storage_set_transfer_hook(storage_transfer_fn fn) { __atomic_store_n(&g_transfer_hook, fn, __ATOMIC_RELEASE); }

static void transferred(const ct_device *src, const ct_device *dst, uint64_t bytes, ct_transfer_method m)
{
    storage_transfer_fn fn = __atomic_load_n(&g_transfer_hook, __ATOMIC_ACQUIRE);
    if (fn && bytes) fn(src, dst, bytes, (int)m);
}

ct_storage *storage_new(size_t nbytes)
{
    ct_storage *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    atomic_init(&st->refcnt, 1);
    st->nbytes = nbytes;
    st->n_copies = 1; /* host slot always exists, maybe unallocated */
    return st;
}

void storage_retain(ct_storage *st) { atomic_fetch_add(&st->refcnt, 1); }

static void drop_derived(ct_storage *st)
{
    for (ct_storage_derived *d = st->derived, *next; d; d = next) {
        next = d->next;
        d->free_fn(d->data);
        free(d);
    }
    st->derived = NULL;
}

void storage_release(ct_storage *st)
{
    if (!st || atomic_fetch_sub(&st->refcnt, 1) != 1) return;
    ct_storage_copy *h = &st->copies[0];
    if (st->host_external) {
        if (st->deleter) st->deleter(h->buf.ptr, st->deleter_ctx);
    } else {
        host_free(h->buf.ptr, st->nbytes);
    }
    for (int i = 1; i < st->n_copies; i++) {
        ct_storage_copy *c = &st->copies[i];
        if (c->dev && c->buf.ptr) c->dev->ops->release(c->dev, &c->buf);
    }
    drop_derived(st);
    free(st);
}

ct_storage_copy *storage_find(ct_storage *st, const ct_device *dev)
{
    if (is_host(dev)) return &st->copies[0];
    for (int i = 1; i < st->n_copies; i++)
        if (st->copies[i].dev == dev) return &st->copies[i];
    return NULL;
}

bool storage_valid_on(const ct_storage *st, const ct_device *dev)
{
    ct_storage_copy *c = storage_find((ct_storage *)st, dev);
    return c && c->valid;
}

ct_device *storage_valid_device(const ct_storage *st)
{
    for (int i = 1; i < st->n_copies; i++)
        if (st->copies[i].valid) return st->copies[i].dev;
    return NULL;
}

static bool any_valid(const ct_storage *st)
{
    for (int i = 0; i < st->n_copies; i++)
        if (st->copies[i].valid) return true;
    return false;
}

ct_status storage_alloc_on(ct_storage *st, ct_device *dev)
{
    ct_storage_copy *c = storage_find(st, dev);
    if (c && c->buf.ptr) return CT_OK;
    size_t bytes = st->nbytes ? st->nbytes : 1;
    if (is_host(dev)) {
        c = &st->copies[0];
        c->buf.ptr = host_alloc(bytes);
        if (!c->buf.ptr) return core_err(CT_ERR_OOM, "host allocation of %zu bytes failed", bytes);
        c->buf.size = bytes;
        c->dev = dev;
        return CT_OK;
    }
    if (!c) {
        if (st->n_copies == CT_MAX_COPIES)
            return core_err(CT_ERR_DEVICE_FAULT, "storage already has copies on %d devices", CT_MAX_COPIES - 1);
        c = &st->copies[st->n_copies++];
        memset(c, 0, sizeof *c);
        c->dev = dev;
    }
    ct_status s = dev->ops->alloc(dev, bytes, &c->buf);
    if (s != CT_OK) {
        st->n_copies--; /* the slot we just took is the last one */
        if (s == CT_ERR_OOM) s = CT_ERR_DEVICE_OOM;
        return s;
    }
    return CT_OK;
}

/* Host copy valid, fetched from whichever device holds the data. `staging`: the
 * download is the first leg of a device-to-device copy, reported once as STAGED. */
static ct_status make_host_valid_for(ct_storage *st, uint64_t *moved, bool staging)
{
    ct_storage_copy *h = &st->copies[0];
    if (h->valid) return CT_OK;
    ct_status s = storage_alloc_on(st, NULL);
    if (s != CT_OK) return s;
    for (int i = 1; i < st->n_copies; i++) {
        ct_storage_copy *c = &st->copies[i];
        if (!c->valid) continue;
        s = c->dev->ops->download(c->dev, &c->buf, 0, h->buf.ptr, st->nbytes);
        if (s != CT_OK) return s;
        if (!staging) transferred(c->dev, NULL, st->nbytes, CT_TRANSFER_DEVICE_TO_HOST);
        if (moved) *moved += st->nbytes;
        break;
    }
    h->valid = true; /* never-written storage: contents undefined, like torch.empty */
    return CT_OK;
}

/* A valid copy on another device of dev's backend, when that backend copies peer to peer. */
static ct_storage_copy *peer_source(ct_storage *st, const ct_device *dev)
{
    if (!dev->ops->copy_peer || st->copies[0].valid) return NULL; /* a valid host copy is the cheaper source */
    for (int i = 1; i < st->n_copies; i++)
        if (st->copies[i].valid && st->copies[i].dev != dev && st->copies[i].dev->ops == dev->ops) return &st->copies[i];
    return NULL;
}

static ct_status make_host_valid(ct_storage *st, uint64_t *moved) { return make_host_valid_for(st, moved, false); }

ct_status storage_make_valid(ct_storage *st, ct_device *dev, uint64_t *moved)
{
    if (is_host(dev)) return make_host_valid(st, moved);
    ct_storage_copy *c = storage_find(st, dev);
    if (c && c->valid) return CT_OK;
    bool had_data = any_valid(st);
    ct_status s = storage_alloc_on(st, dev);
    if (s != CT_OK) return s;
    c = storage_find(st, dev);
    ct_storage_copy *peer = had_data ? peer_source(st, dev) : NULL;
    if (peer) {
        s = dev->ops->copy_peer(dev, &c->buf, peer->dev, &peer->buf, st->nbytes);
        if (s == CT_OK) {
            transferred(peer->dev, dev, st->nbytes, CT_TRANSFER_PEER);
            if (moved) *moved += st->nbytes;
            c->valid = true;
            return CT_OK;
        }
        if (s != CT_ERR_UNSUPPORTED) return s; /* no direct path for this pair: stage below */
    }
    if (had_data) {
        ct_device *from = st->copies[0].valid ? NULL : storage_valid_device(st);
        s = make_host_valid_for(st, moved, from != NULL);
        if (s != CT_OK) return s;
        s = dev->ops->upload(dev, &c->buf, 0, st->copies[0].buf.ptr, st->nbytes);
        if (s != CT_OK) return s;
        transferred(from, dev, st->nbytes, from ? CT_TRANSFER_STAGED : CT_TRANSFER_HOST_TO_DEVICE);
        if (moved) *moved += st->nbytes;
    }
    c->valid = true;
    return CT_OK;
}

void storage_mark_written(ct_storage *st, const ct_device *dev)
{
    ct_storage_copy *w = storage_find(st, dev);
    for (int i = 0; i < st->n_copies; i++) st->copies[i].valid = &st->copies[i] == w;
    if (st->derived) drop_derived(st);
}

void *storage_derived(const ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY])
{
    for (const ct_storage_derived *d = st->derived; d; d = d->next)
        if (memcmp(d->key, key, sizeof d->key) == 0) return d->data;
    return NULL;
}

ct_status storage_set_derived(ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY], void *data,
                              void (*free_fn)(void *data))
{
    for (ct_storage_derived *d = st->derived; d; d = d->next)
        if (memcmp(d->key, key, sizeof d->key) == 0) {
            d->free_fn(d->data);
            d->data = data, d->free_fn = free_fn;
            return CT_OK;
        }
    ct_storage_derived *d = malloc(sizeof *d);
    if (!d) return core_err(CT_ERR_OOM, "storage: out of memory");
    memcpy(d->key, key, sizeof d->key);
    d->data = data, d->free_fn = free_fn, d->next = st->derived;
    st->derived = d;
    return CT_OK;
}

ct_status storage_host(ct_storage *st, void **ptr)
{
    ct_status s = make_host_valid(st, NULL);
    if (s != CT_OK) return s;
    *ptr = st->copies[0].buf.ptr;
    return CT_OK;
}
