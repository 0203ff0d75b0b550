/* Storage with one copy per device, validity flags and events. Slot 0 is the host
 * copy (owned by core, or external memory from ct_tensor_from_blob); slots 1.. are
 * device copies owned by their backend. Device-to-device copies use the backend's
 * peer copy when both devices belong to it, and stage through the host otherwise.
 *
 * Ordering: every copy keeps the event of its last write and of reads by other
 * devices' queues since. Before a device reads a copy it waits for the write; before
 * anything overwrites or releases a copy it also waits for those reads. Waiting is
 * done by the device's queue where the backend can (events of its own devices), by
 * the host otherwise; the host's own accesses (CPU ops, ct_tensor_data) are sync points. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"

static bool is_host(const ct_device *dev) { return !dev || dev->info.kind == CT_DEVICE_CPU; }

static void touched(ct_storage *st) { __atomic_add_fetch(&st->gen, 1, __ATOMIC_RELEASE); }

static storage_transfer_fn g_transfer_hook;

void storage_set_transfer_hook(storage_transfer_fn fn) { __atomic_store_n(&g_transfer_hook, fn, __ATOMIC_RELEASE); }

static void transferred(const ct_device *src, const ct_device *dst, uint64_t bytes, ct_transfer_method m)
{
    storage_transfer_fn fn = __atomic_load_n(&g_transfer_hook, __ATOMIC_ACQUIRE);
    if (fn && bytes) fn(src, dst, bytes, (int)m);
}

/* ---- the list of storages with device copies, for eviction ---- */

static pthread_mutex_t g_dev_mu = PTHREAD_MUTEX_INITIALIZER;
static ct_storage *g_dev_list;

static void list_add(ct_storage *st)
{
    pthread_mutex_lock(&g_dev_mu);
    if (!st->dev_listed) {
        st->dev_prev = NULL;
        st->dev_next = g_dev_list;
        if (g_dev_list) g_dev_list->dev_prev = st;
        g_dev_list = st;
        st->dev_listed = true;
    }
    pthread_mutex_unlock(&g_dev_mu);
}

static void list_remove(ct_storage *st)
{
    if (!st->dev_listed) return; /* only its owner lists it: no lock needed to see that */
    pthread_mutex_lock(&g_dev_mu);
    if (st->dev_listed) {
        if (st->dev_prev) st->dev_prev->dev_next = st->dev_next;
        else g_dev_list = st->dev_next;
        if (st->dev_next) st->dev_next->dev_prev = st->dev_prev;
        st->dev_listed = false;
    }
    pthread_mutex_unlock(&g_dev_mu);
}

void storage_busy(ct_storage *st, int delta)
{
    pthread_mutex_lock(&g_dev_mu);
    st->busy += delta;
    pthread_mutex_unlock(&g_dev_mu);
}

ct_storage *storage_new(size_t nbytes)
{
    ct_storage *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    atomic_init(&st->refcnt, 1);
    st->nbytes = nbytes;
    st->copies = st->inline_copies;
    st->cap_copies = (int)(sizeof st->inline_copies / sizeof st->inline_copies[0]);
    st->n_copies = 1; /* host slot always exists, maybe unallocated */
    return st;
}

void storage_retain(ct_storage *st) { atomic_fetch_add(&st->refcnt, 1); }

/* Bytes of device layouts by device id (ids are below 32: event dependencies are a 32-bit mask). */
#define LAYOUT_DEVS 32
static uint64_t g_layout_bytes[LAYOUT_DEVS];

static void count_layout(const ct_device *dev, size_t bytes, int sign)
{
    if (!dev || dev->id < 0 || dev->id >= LAYOUT_DEVS || !bytes) return;
    if (sign > 0) __atomic_fetch_add(&g_layout_bytes[dev->id], bytes, __ATOMIC_RELAXED);
    else __atomic_fetch_sub(&g_layout_bytes[dev->id], bytes, __ATOMIC_RELAXED);
}

uint64_t storage_layout_bytes(const ct_device *dev)
{
    if (!dev || dev->id < 0 || dev->id >= LAYOUT_DEVS) return 0;
    return __atomic_load_n(&g_layout_bytes[dev->id], __ATOMIC_RELAXED);
}

static void free_derived(ct_storage_derived *d)
{
    count_layout(d->dev, d->bytes, -1);
    d->free_fn(d->data);
}

static void drop_derived(ct_storage *st)
{
    for (ct_storage_derived *d = st->derived, *next; d; d = next) {
        next = d->next;
        free_derived(d);
        free(d);
    }
    st->derived = NULL;
}

static void set_failed(ct_device **failed, ct_device *dev)
{
    if (failed) *failed = dev;
}

/* ---- events of one copy ---- */

static void set_writer(ct_storage_copy *c, ct_event *ev)
{
    ct_event *old = c->writer;
    c->writer = event_retain(ev);
    event_release(old);
}

static void clear_readers(ct_storage_copy *c)
{
    for (int i = 0; i < CT_COPY_READERS; i++) {
        event_release(c->readers[i]);
        c->readers[i] = NULL;
    }
}

/* One slot per reading device (its queue is in order: the latest read covers the
 * earlier ones); with every slot taken the host waits for the oldest. */
static void add_reader(ct_storage_copy *c, ct_event *ev)
{
    if (!ev || ev->dev == c->dev) return;
    int slot = -1;
    for (int i = 0; i < CT_COPY_READERS && slot < 0; i++)
        if (!c->readers[i] || c->readers[i]->dev == ev->dev) slot = i;
    if (slot < 0) {
        event_order(NULL, c->readers[0]); /* a late error marks that device lost; nothing else to do */
        slot = 0;
    }
    event_release(c->readers[slot]);
    c->readers[slot] = event_retain(ev);
}

/* dev's queue (or the host) after the copy's last write. */
static ct_status wait_writer(ct_storage_copy *c, ct_device *dev)
{
    if (!c->writer) return CT_OK;
    ct_status s = event_order(dev, c->writer);
    if (s == CT_OK && is_host(dev)) set_writer(c, NULL); /* done: nobody needs to wait again */
    return s;
}

/* dev's queue (or the host) after every read of the copy by another device. Reads by
 * a lost device are past caring about. */
static void wait_readers(ct_storage_copy *c, ct_device *dev)
{
    for (int i = 0; i < CT_COPY_READERS; i++) {
        ct_event *r = c->readers[i];
        if (!r || r->dev == dev) continue;
        event_order(dev, r);
        if (is_host(dev)) {
            event_release(r);
            c->readers[i] = NULL;
        }
    }
}

/* A copy holds the data (but for its stale range): valid, on a healthy device, and not
 * written by work that a failed device took part in. */
static bool healthy(const ct_storage_copy *c)
{
    if (!c->valid) return false;
    if (!is_host(c->dev) && device_is_lost(c->dev)) return false;
    return !(c->writer && (device_is_lost(c->writer->dev) || device_lost_among(c->writer->deps)));
}

static bool stale(const ct_storage_copy *c) { return c->stale_lo < c->stale_hi; }

/* A copy holds all the data. */
static bool usable(const ct_storage_copy *c) { return healthy(c) && !stale(c); }

static void set_complete(ct_storage_copy *c)
{
    c->valid = true;
    c->stale_lo = c->stale_hi = 0;
}

/* What refreshing a copy moves: its stale range, or everything. */
static void refresh_range(const ct_storage *st, const ct_storage_copy *c, size_t *lo, size_t *hi)
{
    if (c && healthy(c)) *lo = c->stale_lo, *hi = c->stale_hi;
    else *lo = 0, *hi = st->nbytes;
}

/* ---- copies over the host memory (ct_backend_ops.alias) ----
 * A device whose memory is the host's may make its copy a buffer over the host copy's own
 * bytes. The two are then one memory under two validity flags: bringing either up to date
 * from the other moves nothing, and a write into either writes both, so it first waits for
 * all that may still read or write the other, the alias device's queued ops included (they
 * read their own copy with no event). */

static bool over_host(const ct_storage *st, const ct_storage_copy *c) { return c == &st->copies[0] || c->alias; }

static bool has_alias(const ct_storage *st)
{
    for (int i = 1; i < st->n_copies; i++)
        if (st->copies[i].alias) return true;
    return false;
}

/* Whether dev's copy is, or would be made, a buffer over the host copy's memory. */
static bool aliases_host(const ct_storage *st, const ct_storage_copy *c, const ct_device *dev)
{
    if (c && c->buf.ptr) return c->alias;
    const ct_buffer *h = &st->copies[0].buf;
    return device_aliases_host(dev) && h->ptr && !h->borrowed && st->nbytes;
}

static bool try_alias(ct_storage *st, ct_device *dev, ct_storage_copy *c)
{
    if (!aliases_host(st, NULL, dev)) return false;
    if (dev->ops->alias(dev, st->copies[0].buf.ptr, st->nbytes, &c->buf) != CT_OK) return false; /* a copy of its own */
    c->alias = true;
    return true;
}

/* dev's queue (or the host) after everything that may touch the memory under copy w through
 * another copy over it: their writes, their readers, and the alias devices' queued work. */
static ct_status quiesce_sharers(ct_storage *st, const ct_storage_copy *w, ct_device *dev)
{
    ct_status s = CT_OK;
    for (int i = 0; i < st->n_copies; i++) {
        ct_storage_copy *c = &st->copies[i];
        if (c == w || !over_host(st, c) || !c->buf.ptr) continue;
        ct_status r = wait_writer(c, dev);
        wait_readers(c, dev);
        if (c->alias && c->dev != dev && !device_is_lost(c->dev)) {
            ct_event *ev = NULL;
            if (r == CT_OK) r = event_record(c->dev, &ev);
            if (r == CT_OK) r = event_order(dev, ev);
            event_release(ev);
        }
        if (s == CT_OK) s = r;
    }
    return s;
}

static void release_copy(ct_storage_copy *c);

void storage_unalias(ct_storage *st)
{
    if (!has_alias(st)) return;
    quiesce_sharers(st, &st->copies[0], NULL); /* the host waits: nothing uses those buffers after this */
    for (int i = 1; i < st->n_copies; i++) {
        ct_storage_copy *c = &st->copies[i];
        if (!c->alias) continue;
        release_copy(c);
        c->buf = (ct_buffer){0};
        c->alias = c->valid = false;
        touched(st);
    }
}

bool storage_copy_complete(const ct_storage *st, int i) { return i >= 0 && i < st->n_copies && usable(&st->copies[i]); }

size_t storage_bytes_to_move(const ct_storage *st, const ct_device *dev)
{
    const ct_storage_copy *c = storage_find((ct_storage *)st, dev);
    if (c && usable(c)) return 0;
    if (aliases_host(st, c, dev) && usable(&st->copies[0])) return 0; /* one memory: nothing moves */
    size_t lo, hi;
    refresh_range(st, c, &lo, &hi);
    return hi - lo;
}

static void release_copy(ct_storage_copy *c)
{
    if (!is_host(c->dev) && c->buf.ptr && !c->buf.borrowed) {
        wait_readers(c, c->dev);
        c->dev->ops->release(c->dev, &c->buf); /* queue-ordered after the work using it */
    }
    set_writer(c, NULL);
    clear_readers(c);
}

void storage_release(ct_storage *st)
{
    if (!st || atomic_fetch_sub(&st->refcnt, 1) != 1) return;
    list_remove(st);
    storage_unalias(st); /* before the memory under those buffers goes */
    ct_storage_copy *h = &st->copies[0];
    /* devices may still be reading (uploads) or writing (downloads) the host memory */
    if (h->writer) event_order(NULL, h->writer);
    wait_readers(h, NULL);
    set_writer(h, NULL);
    if (h->buf.borrowed) {
        /* a step's arena owns it */
    } else if (st->host_external) {
        if (st->deleter) st->deleter(h->buf.ptr, st->deleter_ctx);
    } else {
        host_free(h->buf.ptr, st->nbytes);
    }
    for (int i = 1; i < st->n_copies; i++) release_copy(&st->copies[i]);
    drop_derived(st);
    if (st->copies != st->inline_copies) free(st->copies);
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
    return c && usable(c);
}

ct_device *storage_valid_device(const ct_storage *st)
{
    for (int i = 1; i < st->n_copies; i++)
        if (usable(&st->copies[i])) return st->copies[i].dev;
    return NULL;
}

static bool any_usable(const ct_storage *st)
{
    for (int i = 0; i < st->n_copies; i++)
        if (usable(&st->copies[i])) return true;
    return false;
}

ct_device *storage_lost_on(const ct_storage *st)
{
    if (any_usable(st)) return NULL;
    for (int i = 0; i < st->n_copies; i++) {
        const ct_storage_copy *c = &st->copies[i];
        if (!c->valid) continue;
        if (!is_host(c->dev) && device_is_lost(c->dev)) return c->dev;
        if (c->writer && device_is_lost(c->writer->dev)) return c->writer->dev;
        if (c->writer && device_lost_among(c->writer->deps)) return device_lost_among(c->writer->deps);
    }
    return NULL;
}

static ct_status lost_error(const ct_storage *st)
{
    char what[64];
    snprintf(what, sizeof what, "tensor data (%zu bytes)", st->nbytes);
    return device_lost_error(storage_lost_on(st), what);
}

/* Room for one more device copy: the array grows, there is no fixed limit. */
static ct_status grow(ct_storage *st)
{
    if (st->n_copies < st->cap_copies) return CT_OK;
    int cap = st->cap_copies * 2;
    ct_storage_copy *c = malloc(sizeof *c * (size_t)cap);
    if (!c) return core_err(CT_ERR_OOM, "storage: no memory for a copy on one more device");
    memcpy(c, st->copies, sizeof *c * (size_t)st->n_copies);
    if (st->copies != st->inline_copies) free(st->copies);
    st->copies = c;
    st->cap_copies = cap;
    return CT_OK;
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
        ct_status s = grow(st);
        if (s != CT_OK) return s;
        c = &st->copies[st->n_copies++];
        memset(c, 0, sizeof *c);
        c->dev = dev;
        touched(st);
    }
    if (try_alias(st, dev, c)) return CT_OK; /* nothing to evict: not listed */
    ct_status s = dev->ops->alloc(dev, bytes, &c->buf);
    if ((s == CT_ERR_DEVICE_OOM || s == CT_ERR_OOM)) {
        /* memory pressure: copies the device does not need make room before an OOM */
        char msg[256];
        snprintf(msg, sizeof msg, "%s", ct_last_error());
        storage_busy(st, 1);
        size_t freed = storage_evict(dev, bytes);
        storage_busy(st, -1);
        c = storage_find(st, dev);
        s = freed ? dev->ops->alloc(dev, bytes, &c->buf) : s;
        if (s != CT_OK && !freed) core_err(s, "%s", msg);
    }
    if (s != CT_OK) {
        st->n_copies--; /* the slot we just took is the last one */
        if (s == CT_ERR_OOM) s = CT_ERR_DEVICE_OOM;
        return s;
    }
    list_add(st);
    return CT_OK;
}

/* A copy on dev that can go: it holds nothing, or the data is complete elsewhere. */
static bool evictable(const ct_storage *st, const ct_storage_copy *c)
{
    if (!c->buf.ptr || c->buf.borrowed || c->alias) return false; /* an arena piece or an alias frees nothing */
    if (!healthy(c)) return true;
    for (int i = 0; i < st->n_copies; i++)
        if (&st->copies[i] != c && usable(&st->copies[i])) return true;
    return false;
}

size_t storage_evict(ct_device *dev, size_t want)
{
    size_t freed = 0;
    pthread_mutex_lock(&g_dev_mu);
    for (ct_storage *st = g_dev_list; st && freed < want; st = st->dev_next) {
        if (st->busy) continue;
        for (int i = 1; i < st->n_copies; i++) {
            ct_storage_copy *c = &st->copies[i];
            if (c->dev != dev || !evictable(st, c)) continue;
            freed += c->buf.size;
            release_copy(c);
            st->copies[i] = st->copies[--st->n_copies];
            touched(st);
            break;
        }
    }
    pthread_mutex_unlock(&g_dev_mu);
    if (freed) core_log(CT_LOG_DEBUG, "%s: evicted %zu bytes of copies valid elsewhere", dev->info.name, freed);
    return freed;
}

void storage_drop_copy(ct_storage *st, const ct_device *dev)
{
    if (is_host(dev)) return; /* the host slot stays */
    for (int i = 1; i < st->n_copies; i++) {
        if (st->copies[i].dev != dev) continue;
        release_copy(&st->copies[i]);
        st->copies[i] = st->copies[--st->n_copies];
        touched(st);
        return;
    }
}


/* A usable copy over the host memory, or NULL. */
static ct_storage_copy *alias_source(ct_storage *st)
{
    for (int i = 1; i < st->n_copies; i++)
        if (st->copies[i].alias && usable(&st->copies[i])) return &st->copies[i];
    return NULL;
}

/* Host copy complete, its missing bytes fetched from whichever device holds them all.
 * `staging`: the download is the first leg of a device-to-device copy, reported once
 * as STAGED. */
static ct_status make_host_valid_for(ct_storage *st, uint64_t *moved, bool staging, ct_device **failed)
{
    if (usable(&st->copies[0])) return CT_OK;
    if (storage_lost_on(st)) return lost_error(st);
    size_t lo, hi;
    refresh_range(st, &st->copies[0], &lo, &hi);
    ct_status s = storage_alloc_on(st, NULL);
    if (s != CT_OK) return s;
    ct_storage_copy *h = &st->copies[0];
    ct_storage_copy *a = alias_source(st);
    if (a) { /* the bytes are there already: the host waits only for their writer */
        set_writer(h, a->writer);
        transferred(a->dev, NULL, hi - lo, CT_TRANSFER_SHARED);
        set_complete(h);
        return CT_OK;
    }
    for (int i = 1; i < st->n_copies; i++) {
        ct_storage_copy *c = &st->copies[i];
        if (!usable(c)) continue;
        /* the download overwrites the host bytes: after whatever still uses the old ones */
        if (h->writer) event_order(c->dev, h->writer);
        wait_readers(h, c->dev);
        if (has_alias(st) && (s = quiesce_sharers(st, h, c->dev)) != CT_OK) return s;
        s = c->dev->ops->download(c->dev, &c->buf, lo, (char *)h->buf.ptr + lo, hi - lo);
        ct_event *ev = NULL;
        if (s == CT_OK) s = event_record(c->dev, &ev);
        if (s != CT_OK) {
            set_failed(failed, c->dev);
            return s;
        }
        set_writer(h, ev);
        event_release(ev);
        if (!staging) transferred(c->dev, NULL, hi - lo, CT_TRANSFER_DEVICE_TO_HOST);
        if (moved) *moved += hi - lo;
        break;
    }
    set_complete(h); /* never-written storage: contents undefined, like torch.empty */
    return CT_OK;
}

/* A usable copy on another device of dev's backend, when that backend copies peer to peer. */
static ct_storage_copy *peer_source(ct_storage *st, const ct_device *dev)
{
    if (!dev->ops->copy_peer || usable(&st->copies[0])) return NULL; /* a valid host copy is the cheaper source */
    for (int i = 1; i < st->n_copies; i++)
        if (usable(&st->copies[i]) && st->copies[i].dev != dev && st->copies[i].dev->ops == dev->ops)
            return &st->copies[i];
    return NULL;
}

/* The copy on dev is written by dev's queue from `src` (ending at a new event). */
static ct_status filled(ct_storage *st, ct_device *dev, ct_storage_copy *src, ct_device **failed)
{
    ct_event *ev = NULL;
    ct_status s = event_record(dev, &ev);
    if (s != CT_OK) {
        set_failed(failed, dev);
        return s;
    }
    ct_storage_copy *c = storage_find(st, dev);
    set_writer(c, ev);
    add_reader(src, ev);
    event_release(ev);
    set_complete(c);
    return CT_OK;
}

static ct_status copy_from_peer(ct_storage *st, ct_device *dev, ct_storage_copy *peer, size_t lo, size_t hi,
                                uint64_t *moved, ct_device **failed)
{
    ct_storage_copy *c = storage_find(st, dev);
    ct_status s = event_order(dev, peer->writer);
    if (s != CT_OK) {
        set_failed(failed, peer->dev);
        return s;
    }
    if (c->alias && (s = quiesce_sharers(st, c, dev)) != CT_OK) return s; /* it writes the host memory */
    s = dev->ops->copy_peer(dev, &c->buf, peer->dev, &peer->buf, lo, hi - lo);
    if (s != CT_OK) {
        set_failed(failed, dev);
        return s;
    }
    transferred(peer->dev, dev, hi - lo, CT_TRANSFER_PEER);
    if (moved) *moved += hi - lo;
    return filled(st, dev, peer, failed);
}

static ct_status upload_from_host(ct_storage *st, ct_device *dev, size_t lo, size_t hi, uint64_t *moved,
                                  ct_device **failed)
{
    ct_storage_copy *c = storage_find(st, dev);
    bool shared = c->alias; /* the host copy's bytes are the device's: nothing to upload */
    ct_device *from = usable(&st->copies[0]) ? NULL : storage_valid_device(st);
    ct_status s = make_host_valid_for(st, moved, from != NULL && !shared, failed);
    if (s != CT_OK) return s;
    ct_storage_copy *h = &st->copies[0];
    ct_device *writer = h->writer ? h->writer->dev : NULL;
    s = event_order(dev, h->writer);
    if (s != CT_OK) {
        set_failed(failed, writer);
        return s;
    }
    if (!shared) s = dev->ops->upload(dev, &c->buf, lo, (char *)h->buf.ptr + lo, hi - lo);
    if (s != CT_OK) {
        set_failed(failed, dev);
        return s;
    }
    if (shared) transferred(NULL, dev, hi - lo, CT_TRANSFER_SHARED);
    else transferred(from, dev, hi - lo, from ? CT_TRANSFER_STAGED : CT_TRANSFER_HOST_TO_DEVICE);
    if (moved && !shared) *moved += hi - lo;
    return filled(st, dev, h, failed);
}

static ct_status make_device_valid(ct_storage *st, ct_device *dev, uint64_t *moved, ct_device **failed,
                                   bool *allocated)
{
    ct_storage_copy *c = storage_find(st, dev);
    if (c && usable(c)) return CT_OK; /* its writer is on dev's own queue: in order */
    if (device_is_lost(dev)) {
        set_failed(failed, dev);
        return device_lost_error(dev, "copying data to it");
    }
    bool had_data = any_usable(st);
    if (!had_data && storage_lost_on(st)) return lost_error(st);
    size_t lo, hi; /* only the stale range of a copy that holds the rest */
    refresh_range(st, c, &lo, &hi);
    bool existed = c && c->buf.ptr;
    ct_status s = storage_alloc_on(st, dev);
    if (s != CT_OK) {
        if (status_is_device_error(s)) set_failed(failed, dev);
        return s;
    }
    *allocated = !existed;
    c = storage_find(st, dev);
    wait_readers(c, dev); /* peers may still be reading the old bytes */
    if (!had_data) { /* never written: contents undefined, like torch.empty */
        set_complete(c);
        return CT_OK;
    }
    ct_storage_copy *peer = peer_source(st, dev);
    if (peer) {
        s = copy_from_peer(st, dev, peer, lo, hi, moved, failed);
        if (s != CT_ERR_UNSUPPORTED || (failed && *failed != dev)) return s;
        set_failed(failed, NULL); /* no direct path for this pair: stage below */
    }
    return upload_from_host(st, dev, lo, hi, moved, failed);
}

ct_status storage_make_valid_ex(ct_storage *st, ct_device *dev, uint64_t *moved, ct_device **failed, bool *allocated)
{
    bool alloc_dummy;
    if (!allocated) allocated = &alloc_dummy;
    *allocated = false;
    set_failed(failed, NULL);
    if (!is_host(dev)) return make_device_valid(st, dev, moved, failed, allocated);
    ct_status s = make_host_valid_for(st, moved, false, failed);
    if (s != CT_OK) return s;
    ct_storage_copy *h = &st->copies[0];
    ct_device *writer = h->writer ? h->writer->dev : NULL;
    s = wait_writer(h, NULL); /* the host reads next: a sync point */
    if (s != CT_OK) set_failed(failed, writer);
    return s;
}

ct_status storage_make_valid(ct_storage *st, ct_device *dev, uint64_t *moved)
{
    return storage_make_valid_ex(st, dev, moved, NULL, NULL);
}

ct_status storage_order_write(ct_storage *st, ct_device *dev)
{
    ct_storage_copy *c = storage_find(st, dev);
    if (!c) return CT_OK;
    if (c->writer && !usable(c)) set_writer(c, NULL); /* overwritten anyway */
    ct_status s = wait_writer(c, dev);
    wait_readers(c, dev);
    if (s == CT_OK && over_host(st, c) && has_alias(st)) s = quiesce_sharers(st, c, dev);
    return s;
}

void storage_mark_written_at(ct_storage *st, const ct_device *dev, ct_event *ev, size_t lo, size_t hi)
{
    ct_storage_copy *w = storage_find(st, dev);
    bool whole = lo == 0 && hi >= st->nbytes;
    touched(st);
    st->written_on = (ct_device *)dev;
    for (int i = 0; i < st->n_copies; i++) {
        ct_storage_copy *c = &st->copies[i];
        if (c == w || !c->valid || lo >= hi) continue;
        if (whole) {
            c->valid = false;
            continue;
        }
        /* one stale range per copy: the hull of what was written elsewhere since */
        c->stale_lo = stale(c) && c->stale_lo < lo ? c->stale_lo : lo;
        c->stale_hi = stale(c) && c->stale_hi > hi ? c->stale_hi : hi;
        if (c->stale_lo == 0 && c->stale_hi >= st->nbytes) c->valid = false;
    }
    if (w) {
        set_complete(w); /* it was made complete before a partial write */
        if (ev || w->writer) set_writer(w, ev);
        clear_readers(w); /* the write was ordered after them */
    }
    if (st->derived) drop_derived(st);
}

void storage_mark_written(ct_storage *st, const ct_device *dev) { storage_mark_written_at(st, dev, NULL, 0, st->nbytes); }

void *storage_derived(const ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY])
{
    for (const ct_storage_derived *d = st->derived; d; d = d->next)
        if (memcmp(d->key, key, sizeof d->key) == 0) return d->data;
    return NULL;
}

ct_status storage_set_layout(ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY], void *data,
                             void (*free_fn)(void *data), const ct_device *dev, size_t bytes, int serves_op,
                             int serves_src)
{
    ct_storage_derived *d = st->derived;
    while (d && memcmp(d->key, key, sizeof d->key) != 0) d = d->next;
    if (d) {
        free_derived(d);
    } else {
        if (!(d = malloc(sizeof *d))) return core_err(CT_ERR_OOM, "storage: out of memory");
        memcpy(d->key, key, sizeof d->key);
        d->next = st->derived;
        st->derived = d;
    }
    d->data = data, d->free_fn = free_fn;
    d->dev = dev, d->bytes = bytes, d->serves_op = serves_op, d->serves_src = serves_src;
    count_layout(dev, bytes, 1);
    return CT_OK;
}

ct_status storage_set_derived(ct_storage *st, const uint64_t key[STORAGE_DERIVED_KEY], void *data,
                              void (*free_fn)(void *data))
{
    return storage_set_layout(st, key, data, free_fn, NULL, 0, -1, -1);
}

void storage_view_key(const ct_tensor *t, const ct_device *dev, uint64_t key[STORAGE_DERIVED_KEY])
{
    key[0] = (uint64_t)t->offset;
    key[1] = (uint64_t)t->ndim << 32 | (uint64_t)t->dtype;
    key[2] = t->ndim > 0 ? (uint64_t)t->shape[0] : 0;
    key[3] = t->ndim > 1 ? (uint64_t)t->shape[1] : 0;
    key[4] = t->ndim > 0 ? (uint64_t)t->stride[0] : 0;
    key[5] = (uint64_t)(uintptr_t)dev;
}

bool storage_layout_serves(const ct_tensor *t, const ct_device *dev, int op, int src)
{
    if (!t->st->derived) return false;
    uint64_t key[STORAGE_DERIVED_KEY];
    storage_view_key(t, dev, key);
    for (const ct_storage_derived *d = t->st->derived; d; d = d->next)
        if (d->dev == dev && d->serves_op >= 0 && (op < 0 || (d->serves_op == op && d->serves_src == src)) &&
            memcmp(d->key, key, sizeof key) == 0)
            return true;
    return false;
}

ct_status storage_read_begin(ct_storage *st, size_t off, void *dst, size_t bytes, bool *done, ct_event **ev)
{
    *done = false;
    *ev = NULL;
    const ct_storage_copy *h = &st->copies[0];
    /* a host copy that holds the bytes, or part of them, stays the source (today's path) */
    if (!bytes || off > st->nbytes || bytes > st->nbytes - off || healthy(h)) return CT_OK;
    ct_storage_copy *c = NULL;
    for (int i = 1; i < st->n_copies && !c; i++)
        if (usable(&st->copies[i])) c = &st->copies[i];
    if (!c) return CT_OK; /* lost or never written: the usual path says which */
    ct_status s = event_order(c->dev, c->writer); /* its own queue's writes are in order already */
    if (s == CT_OK) s = c->dev->ops->download(c->dev, &c->buf, off, dst, bytes);
    if (s == CT_OK) s = event_record(c->dev, ev);
    if (s != CT_OK) return s;
    transferred(c->dev, NULL, bytes, CT_TRANSFER_DEVICE_TO_HOST);
    *done = true;
    return CT_OK;
}

ct_status storage_read_direct(ct_storage *st, size_t off, void *dst, size_t bytes, bool *done)
{
    ct_event *ev;
    ct_status s = storage_read_begin(st, off, dst, bytes, done, &ev);
    /* the caller reads dst next: the host waits for the download (a late error marks the
     * device lost: CT_ERR_DEVICE_LOST, as a read through the host copy reports it) */
    if (s == CT_OK) s = event_order(NULL, ev);
    event_release(ev);
    if (s != CT_OK) *done = false;
    return s;
}

ct_status storage_host_overwrite(ct_storage *st, const void *src, size_t bytes)
{
    if (bytes != st->nbytes)
        return core_err(CT_ERR_RANGE, "storage_host_overwrite: %zu bytes for a %zu-byte storage", bytes, st->nbytes);
    ct_status s = storage_alloc_on(st, NULL);
    if (s != CT_OK) return s;
    ct_storage_copy *h = &st->copies[0];
    /* a download still landing in the host bytes, or an upload still reading them */
    s = wait_writer(h, NULL);
    wait_readers(h, NULL);
    if (s == CT_OK && has_alias(st)) s = quiesce_sharers(st, h, NULL);
    if (s != CT_OK) return s;
    memcpy(h->buf.ptr, src, bytes);
    storage_mark_written(st, NULL);
    return CT_OK;
}

ct_status storage_host(ct_storage *st, void **ptr)
{
    ct_status s = storage_make_valid(st, NULL, NULL);
    if (s != CT_OK) return s;
    *ptr = st->copies[0].buf.ptr;
    return CT_OK;
}

ct_status storage_host_mut(ct_storage *st, void **ptr)
{
    ct_status s = storage_host(st, ptr);
    if (s == CT_OK) wait_readers(&st->copies[0], NULL);
    if (s == CT_OK && has_alias(st)) s = quiesce_sharers(st, &st->copies[0], NULL); /* devices reading it */
    return s;
}
