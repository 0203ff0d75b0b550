/* Recorded steps: ops recorded while they run, their intermediates moved into an
 * arena planned from lifetimes, replayed without routing or allocation.
 *
 * Recording runs each op as usual (exec_run reports it here), so routing, fallback and
 * residency are decided exactly as for eager ops and the recording pass gives real
 * results. At the end, every storage an op made during the recording (an intermediate:
 * a fresh output that only the op's own handle referenced) gets its bytes from the
 * step's arena, one block per device; storages made elsewhere (weights, the KV cache,
 * parameter tensors) are referenced. Replay then walks the list: on the CPU a plain
 * loop over the backend's run, elsewhere the residency bookkeeping an asynchronous
 * device needs (events, range refreshes) but no routing and no allocation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fuse.h"
#include "exec/state.h"

#define STEP_ALIGN 64

_Thread_local ct_step *exec_step_rec;

static uint64_t g_chain_gen, g_place_gen;

void step_bump_chain(void) { __atomic_add_fetch(&g_chain_gen, 1, __ATOMIC_RELAXED); }
void step_bump_placement(void) { __atomic_add_fetch(&g_place_gen, 1, __ATOMIC_RELAXED); }

/* A storage the step uses. */
typedef struct step_buf {
    ct_storage *st; /* one reference held by the step */
    bool inter;     /* made by an op of the recording: its bytes come from the arena */
    bool output;    /* an intermediate the caller still held at the end */
    bool written;   /* some op writes it */
    int first, last; /* ops that first and last use it */
} step_buf;

/* One device copy of an intermediate, placed in that device's arena. */
typedef struct step_slot {
    int buf;
    int copy; /* index in the storage's copies */
    ct_device *dev;
    size_t size, off;
    int first, last;
} step_slot;

typedef struct step_arena {
    ct_device *dev;
    ct_buffer buf;
    size_t bytes;
} step_arena;

typedef struct step_op {
    ct_op op; /* src/dst point into the fields below once recording ends */
    ct_tensor src[CT_OP_MAX_SRC];
    bool has_src[CT_OP_MAX_SRC];
    ct_tensor dst;
    ct_device *dev;
    ct_route_reason reason;
    size_t wlo, whi; /* the bytes of dst's storage it writes (SET_ROWS: found at each run) */
    bool fresh;      /* dst was a fresh output when recorded */
    int seg;         /* the captured segment this op starts, or -1 */
} step_op;

/* One residency step of a captured segment's replay (seg_plan): operand src of op `op`
 * made valid on the device, or (src -1) the op's dst made valid where the op writes only
 * part of it (valid) and ordered after its last writer and readers (order). */
typedef struct seg_check {
    int op;
    signed char src;
    bool valid, order;
    bool served;         /* (src) a weight layout of the device served it at capture... */
    const void *derived; /* ...with its storage's layout list then this */
    uint64_t gen;        /* (src) the storage's gen when a replay last found it valid (0: never) */
} seg_check;

/* A run of consecutive ops on one device whose backend captured it (a CUDA graph):
 * replayed as one launch. */
typedef struct step_seg {
    int first, n;
    ct_device *dev;
    void *handle;
    ct_op *list;
    seg_check *chk;
    int n_chk;
    int *mark; /* ops whose written range is recorded after a launch (seg_plan) */
    int n_mark;
} step_seg;

struct ct_step {
    step_op *ops;
    int n_ops, cap_ops;
    step_buf *bufs;
    int n_bufs, cap_bufs;
    step_slot *slots;
    int n_slots;
    step_arena arenas[EXEC_MAX_DEVICES];
    int n_arenas;
    int *ext; /* bufs that are not intermediates */
    int n_ext;
    uint64_t chain_gen, place_gen;
    bool cpu_only;
    step_seg *segs;
    int n_segs;
    ct_device *devs[EXEC_MAX_DEVICES]; /* the devices its ops run on, once each */
    int n_devs;
    ct_step_info info;
    ct_status failed;
    char failed_msg[400];
};

/* ---- recording ---- */

static bool grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return true;
    int nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *q = realloc(*p, (size_t)nc * elem);
    if (!q) return false;
    *p = q;
    *cap = nc;
    return true;
}

static void fail(ct_step *s, ct_status st, const char *msg)
{
    if (s->failed != CT_OK) return;
    s->failed = st;
    snprintf(s->failed_msg, sizeof s->failed_msg, "%s", msg);
}

void step_note_failure(ct_step *s, ct_status st) { fail(s, st, ct_last_error()); }

/* The step's entry for st, added (with a reference) when new. Recent storages are
 * the likeliest, so the search runs backwards. */
static int use_buf(ct_step *s, ct_storage *st, int op, bool made_here)
{
    for (int i = s->n_bufs - 1; i >= 0; i--)
        if (s->bufs[i].st == st) {
            s->bufs[i].last = op;
            return i;
        }
    if (!grow((void **)&s->bufs, &s->cap_bufs, s->n_bufs + 1, sizeof *s->bufs)) return -1;
    storage_retain(st);
    s->bufs[s->n_bufs] = (step_buf){.st = st, .inter = made_here, .first = op, .last = op};
    return s->n_bufs++;
}

void step_note(ct_step *s, const ct_op *op, ct_device *dev, ct_route_reason reason, bool dst_fresh)
{
    if (s->failed != CT_OK) return;
    if (!grow((void **)&s->ops, &s->cap_ops, s->n_ops + 1, sizeof *s->ops)) {
        fail(s, CT_ERR_OOM, "ct_step: out of memory recording an op");
        return;
    }
    int idx = s->n_ops;
    step_op *o = &s->ops[idx];
    memset(o, 0, sizeof *o);
    o->op = *op;
    o->dev = dev;
    o->reason = reason;
    for (int i = 0; i < op->n_src; i++) {
        if (!op->src[i]) continue;
        o->src[i] = *op->src[i];
        o->has_src[i] = true;
        if (use_buf(s, op->src[i]->st, idx, false) < 0) {
            fail(s, CT_ERR_OOM, "ct_step: out of memory");
            return;
        }
    }
    o->dst = *op->dst;
    ct_storage *dst = op->dst->st;
    /* Only the frontend's fresh handle references a new output: anything else (a KV
     * cache made with ct_empty, a caller's buffer) was made outside the recording. */
    bool made_here = dst_fresh && atomic_load(&dst->refcnt) == 1;
    int b = use_buf(s, dst, idx, made_here);
    if (b < 0) {
        fail(s, CT_ERR_OOM, "ct_step: out of memory");
        return;
    }
    s->bufs[b].written = true;
    o->fresh = dst_fresh;
    exec_written_range(op, dst_fresh, &o->wlo, &o->whi);
    s->n_ops++;
}

int step_mark(const ct_step *s) { return s->n_ops; }

/* Storages the forgotten ops used stay referenced, with lifetimes that reach past the
 * mark: a longer lifetime only costs arena bytes, never a shared one. */
void step_rewind(ct_step *s, int mark)
{
    if (mark >= 0 && mark < s->n_ops) s->n_ops = mark;
}

bool step_refs(const ct_step *s, const ct_storage *st)
{
    for (int i = s->n_bufs - 1; i >= 0; i--)
        if (s->bufs[i].st == st) return true;
    return false;
}

ct_status ct_step_begin(void)
{
    if (exec_step_rec) return core_err(CT_ERR_INVALID_ARG, "ct_step_begin: this thread is already recording a step");
    ct_status st = exec_ready();
    if (st != CT_OK) return st;
    ct_step *s = calloc(1, sizeof *s);
    if (!s) return core_err(CT_ERR_OOM, "ct_step_begin: out of memory");
    s->chain_gen = __atomic_load_n(&g_chain_gen, __ATOMIC_RELAXED);
    s->place_gen = __atomic_load_n(&g_place_gen, __ATOMIC_RELAXED);
    exec_step_rec = s;
    return CT_OK;
}

bool ct_step_recording(void) { return exec_step_rec != NULL; }

/* ---- planning: offsets from lifetimes ---- */

static bool lifetimes_meet(const step_slot *a, const step_slot *b) { return a->first <= b->last && b->first <= a->last; }

static int by_size_desc(const void *pa, const void *pb)
{
    const step_slot *a = *(step_slot *const *)pa, *b = *(step_slot *const *)pb;
    if (a->size != b->size) return a->size < b->size ? 1 : -1;
    return a->first - b->first;
}

static int by_off(const void *pa, const void *pb)
{
    const step_slot *a = *(step_slot *const *)pa, *b = *(step_slot *const *)pb;
    return a->off < b->off ? -1 : a->off > b->off;
}

/* Largest first, each at the lowest offset clear of every placed buffer whose lifetime
 * meets its own: a buffer's bytes are reused once its last reader is done. Returns the
 * arena size of dev. */
static ct_status plan_device(ct_step *s, ct_device *dev, size_t *bytes)
{
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) n += s->slots[i].dev == dev;
    step_slot **order = malloc(sizeof *order * (size_t)(n ? n : 1));
    step_slot **meet = malloc(sizeof *meet * (size_t)(n ? n : 1));
    if (!order || !meet) {
        free(order);
        free(meet);
        return core_err(CT_ERR_OOM, "ct_step_end: out of memory planning %d buffers", n);
    }
    n = 0;
    for (int i = 0; i < s->n_slots; i++)
        if (s->slots[i].dev == dev) order[n++] = &s->slots[i];
    qsort(order, (size_t)n, sizeof *order, by_size_desc);
    size_t top = 0;
    for (int i = 0; i < n; i++) {
        int m = 0;
        for (int j = 0; j < i; j++)
            if (lifetimes_meet(order[i], order[j])) meet[m++] = order[j];
        qsort(meet, (size_t)m, sizeof *meet, by_off);
        size_t off = 0;
        for (int j = 0; j < m; j++) {
            if (meet[j]->off >= off + order[i]->size) break; /* it fits in the gap below */
            size_t end = meet[j]->off + meet[j]->size;
            if (end > off) off = end;
        }
        order[i]->off = off;
        if (off + order[i]->size > top) top = off + order[i]->size;
    }
    free(order);
    free(meet);
    *bytes = top;
    return CT_OK;
}

int step_plan_conflicts(const ct_step *s)
{
    int bad = 0;
    for (int i = 0; i < s->n_slots; i++)
        for (int j = i + 1; j < s->n_slots; j++) {
            const step_slot *a = &s->slots[i], *b = &s->slots[j];
            if (a->dev != b->dev || !lifetimes_meet(a, b)) continue;
            if (a->off < b->off + b->size && b->off < a->off + a->size) bad++;
        }
    return bad;
}

static ct_device *copy_device(const ct_storage_copy *c) { return c->dev ? c->dev : exec_host_device(); }

/* ---- fused launches: one lifetime for a group's buffers ---- */

static bool any_group(void *ctx, const ct_op *ops, const fuse_group *g)
{
    (void)ctx, (void)ops, (void)g;
    return true;
}

/* span[i] = the ops [lo, hi] that op i may be launched with as one kernel: a group of
 * core/fuse.c's (every kind allowed, so each backend's groups lie inside these), a linear
 * group together with the rope group after it (the CUDA q/k/v job's rope epilogue). Such
 * a kernel reads its inputs while it writes its outputs, so its buffers must not share
 * bytes although their ops' lifetimes do not meet: a linear's input, last read by the
 * linear, got the bytes of the add's output after it, and the fused linear+add wrote over x
 * while other blocks still read it (F16 decode on an H200: logits that changed from run
 * to run). */
typedef struct op_span {
    int lo, hi;
} op_span;

static op_span *fuse_spans(ct_step *s)
{
    int n = s->n_ops;
    op_span *span = malloc(sizeof *span * (size_t)(n ? n : 1));
    ct_op *ops = malloc(sizeof *ops * (size_t)(n ? n : 1));
    fuse_group *g = malloc(sizeof *g * (size_t)(n ? n : 1));
    if (!span || !ops || !g) {
        free(span), free(ops), free(g);
        return NULL;
    }
    for (int i = 0; i < n; i++) { /* the recorded copies: the ops' own tensors may be freed by now */
        step_op *o = &s->ops[i];
        ops[i] = o->op;
        for (int j = 0; j < o->op.n_src; j++) ops[i].src[j] = o->has_src[j] ? &o->src[j] : NULL;
        ops[i].dst = &o->dst;
    }
    fuse_caps caps = {NULL, any_group, any_group, any_group};
    int ng = fuse_plan(ops, n, &caps, g);
    for (int k = 0; k < ng; k++) {
        int hi = g[k].first + g[k].n - 1;
        if (g[k].kind == FUSE_MV && k + 1 < ng && g[k + 1].kind == FUSE_ROPE) hi = g[k + 1].first + g[k + 1].n - 1;
        for (int i = g[k].first; i <= hi; i++) span[i] = (op_span){g[k].first, hi};
        if (hi > g[k].first + g[k].n - 1) k++;
    }
    free(ops), free(g);
    return span;
}

/* One slot per device copy of each intermediate, alive over the spans of its first and
 * last ops. */
static ct_status gather_slots(ct_step *s)
{
    op_span *span = fuse_spans(s);
    if (!span) return core_err(CT_ERR_OOM, "ct_step_end: out of memory planning %d ops", s->n_ops);
    int n = 0;
    for (int b = 0; b < s->n_bufs; b++)
        if (s->bufs[b].inter) n += s->bufs[b].st->n_copies;
    s->slots = calloc((size_t)(n ? n : 1), sizeof *s->slots);
    if (!s->slots) {
        free(span);
        return core_err(CT_ERR_OOM, "ct_step_end: out of memory");
    }
    for (int b = 0; b < s->n_bufs; b++) {
        step_buf *sb = &s->bufs[b];
        if (!sb->inter) continue;
        for (int c = 0; c < sb->st->n_copies; c++) {
            if (!sb->st->copies[c].buf.ptr) continue;
            size_t size = (sb->st->nbytes + STEP_ALIGN - 1) / STEP_ALIGN * STEP_ALIGN;
            /* ops past a rewind's mark have no span: their own index */
            int lo = sb->first < s->n_ops ? span[sb->first].lo : sb->first;
            int hi = sb->output ? s->n_ops : sb->last < s->n_ops ? span[sb->last].hi : sb->last;
            s->slots[s->n_slots++] =
                (step_slot){b, c, copy_device(&sb->st->copies[c]), size ? size : STEP_ALIGN, 0, lo, hi};
        }
    }
    free(span);
    return CT_OK;
}

static step_arena *arena_of(ct_step *s, const ct_device *dev)
{
    for (int i = 0; i < s->n_arenas; i++)
        if (s->arenas[i].dev == dev) return &s->arenas[i];
    return NULL;
}

static ct_status plan_and_allocate(ct_step *s)
{
    ct_status st = gather_slots(s);
    for (int i = 0; st == CT_OK && i < s->n_slots; i++) {
        if (arena_of(s, s->slots[i].dev)) continue;
        step_arena *a = &s->arenas[s->n_arenas++];
        a->dev = s->slots[i].dev;
        if ((st = plan_device(s, a->dev, &a->bytes)) != CT_OK) break;
        if (a->dev->info.kind == CT_DEVICE_CPU) {
            a->buf.ptr = host_alloc(a->bytes);
            a->buf.size = a->bytes;
            if (!a->buf.ptr) st = core_err(CT_ERR_OOM, "ct_step_end: no host memory for a %zu-byte arena", a->bytes);
        } else {
            st = a->dev->ops->alloc(a->dev, a->bytes, &a->buf);
        }
        if (st != CT_OK) a->buf.ptr = NULL;
    }
    return st;
}

/* ---- binding intermediates to the arena ---- */

static void sync_used_devices(ct_step *s)
{
    uint32_t done = 0;
    for (int i = 0; i < s->n_ops; i++) {
        ct_device *d = s->ops[i].dev;
        if (d->info.kind == CT_DEVICE_CPU || (done >> d->id) & 1u) continue;
        done |= 1u << d->id;
        device_sync(d); /* a failure marks it lost: the step is then stale */
    }
}

/* The copy's own buffer goes; the arena's piece takes its place. */
static void bind_slot(ct_step *s, const step_slot *sl)
{
    ct_storage *st = s->bufs[sl->buf].st;
    storage_unalias(st); /* its copies move into arenas: none may stay over the old host memory */
    ct_storage_copy *c = &st->copies[sl->copy];
    step_arena *a = arena_of(s, sl->dev);
    if (!c->buf.borrowed) {
        if (sl->copy == 0) {
            if (!st->host_external) host_free(c->buf.ptr, st->nbytes);
        } else if (c->buf.ptr) {
            c->dev->ops->release(c->dev, &c->buf);
        }
    }
    if (sl->copy == 0) st->host_external = false;
    if (sl->dev->ops->handle_buffers)
        c->buf = (ct_buffer){a->buf.ptr, sl->size, a->buf.priv, true, a->buf.offset + sl->off};
    else
        c->buf = (ct_buffer){(char *)a->buf.ptr + sl->off, sl->size, a->buf.priv, true, 0};
}

/* Outputs keep the values of the recording pass: saved before binding, put back after
 * into the host copy, which is then the valid one. */
static ct_status bind_all(ct_step *s)
{
    int n_out = 0;
    for (int b = 0; b < s->n_bufs; b++) n_out += s->bufs[b].output;
    void **saved = calloc((size_t)(n_out ? n_out : 1), sizeof *saved);
    if (!saved) return core_err(CT_ERR_OOM, "ct_step_end: out of memory");
    ct_status st = CT_OK;
    for (int b = 0, k = 0; st == CT_OK && b < s->n_bufs; b++) {
        if (!s->bufs[b].output) continue;
        ct_storage *sto = s->bufs[b].st;
        void *p;
        if ((st = storage_host(sto, &p)) != CT_OK) break;
        if (!(saved[k] = malloc(sto->nbytes ? sto->nbytes : 1))) {
            st = core_err(CT_ERR_OOM, "ct_step_end: out of memory");
            break;
        }
        memcpy(saved[k++], p, sto->nbytes);
    }
    if (st == CT_OK) st = plan_and_allocate(s);
    if (st == CT_OK) {
        sync_used_devices(s);
        for (int i = 0; i < s->n_slots; i++) bind_slot(s, &s->slots[i]);
        for (int b = 0, k = 0; b < s->n_bufs; b++) {
            if (!s->bufs[b].output) continue;
            ct_storage *sto = s->bufs[b].st;
            memcpy(sto->copies[0].buf.ptr, saved[k++], sto->nbytes);
            storage_mark_written(sto, NULL);
        }
    }
    for (int k = 0; k < n_out; k++) free(saved[k]);
    free(saved);
    return st;
}

/* ---- end of recording ---- */

static void fix_pointers(ct_step *s)
{
    for (int i = 0; i < s->n_ops; i++) {
        step_op *o = &s->ops[i];
        for (int j = 0; j < o->op.n_src; j++) o->op.src[j] = o->has_src[j] ? &o->src[j] : NULL;
        o->op.dst = &o->dst;
    }
}

static void fill_info(ct_step *s)
{
    ct_step_info *in = &s->info;
    in->n_ops = s->n_ops;
    for (int b = 0; b < s->n_bufs; b++) in->n_buffers += s->bufs[b].inter;
    for (int i = 0; i < s->n_arenas; i++) in->arena_bytes += s->arenas[i].bytes;
    for (int i = 0; i < s->n_slots; i++) in->buffer_bytes += s->slots[i].size;
    for (int t = 0; t <= s->n_ops; t++) {
        size_t live = 0;
        for (int i = 0; i < s->n_slots; i++)
            if (s->slots[i].first <= t && t <= s->slots[i].last) live += s->slots[i].size;
        if (live > in->live_peak_bytes) in->live_peak_bytes = live;
    }
}

static bool can_capture(const ct_device *d)
{
    return d->info.kind != CT_DEVICE_CPU && d->ops->step_capture && d->ops->step_launch;
}

/* ---- a captured segment's residency plan ----
 * Before each launch every operand must be valid on the device and every written storage
 * ordered after its other users. Op by op that is ~1,000 checks for a 377-op decode step
 * (tens of us of host time while the GPU waits); most repeat: a storage read by several
 * ops, or read after an earlier op of the segment wrote all of it (its bytes come from
 * inside the launch). The plan keeps, in the ops' order, the first check of each storage
 * that can matter; a replay runs only those. Row writes (SET_ROWS) keep their per-run
 * range. Weights a device layout served at capture are skipped while their storage keeps
 * the same layout list (a changed list gets the full check); so is any other operand found
 * valid on the device by an earlier replay while its storage's gen is the same and no
 * device is lost (the weights: ~200 checks a token, ~20 us of host time on the GPU
 * machine's host). */

typedef struct seen_set {
    const ct_storage **key;
    unsigned char *flags; /* SEEN_VALID: valid, or all written here; SEEN_ORDER: ordered */
    size_t mask;
} seen_set;

enum { SEEN_VALID = 1, SEEN_ORDER = 2, SEEN_INTERNAL = 4 };

static unsigned char *seen_flags(seen_set *h, const ct_storage *st)
{
    size_t i = ((uintptr_t)st >> 4) * 0x9E3779B97F4A7C15ull & h->mask;
    while (h->key[i] && h->key[i] != st) i = (i + 1) & h->mask;
    h->key[i] = st;
    return &h->flags[i];
}

/* An intermediate of the step that only ops of segment g use and the caller does not
 * hold: nothing outside the launch reads or writes it, so it needs no ordering and no
 * record of its writes (the arena slot stays valid on the device). */
static bool seg_internal(const ct_step *s, const step_seg *g, const ct_storage *st)
{
    for (int b = 0; b < s->n_bufs; b++)
        if (s->bufs[b].st == st)
            return s->bufs[b].inter && !s->bufs[b].output && s->bufs[b].first >= g->first &&
                   s->bufs[b].last < g->first + g->n;
    return false;
}

static void plan_op(step_op *o, const ct_device *dev, seen_set *h, seg_check *out, int idx, int *n)
{
    for (int j = 0; j < o->op.n_src; j++) {
        const ct_tensor *t = o->op.src[j];
        if (!t) continue;
        bool served = t->st->derived && storage_layout_serves(t, dev, (int)o->op.kind, j);
        unsigned char *f = seen_flags(h, t->st);
        if (!served && (*f & SEEN_VALID)) continue;
        if (!served) *f |= SEEN_VALID;
        out[(*n)++] = (seg_check){idx, (signed char)j, true, false, served, t->st->derived, 0};
    }
    unsigned char *f = seen_flags(h, o->dst.st);
    bool rows = o->op.kind == CT_OP_SET_ROWS, all = !rows && exec_writes_all(&o->op, o->fresh, o->wlo, o->whi);
    if (all && (*f & SEEN_INTERNAL)) { /* a full write of an internal intermediate: nothing to do */
        *f |= SEEN_VALID;
        return;
    }
    seg_check c = {idx, -1, rows || (!all && !(*f & SEEN_VALID)), rows || !(*f & SEEN_ORDER), false, NULL, 0};
    *f |= SEEN_ORDER | (all || c.valid ? SEEN_VALID : 0);
    if (c.valid || c.order) out[(*n)++] = c;
}

static bool seg_plan(ct_step *s, step_seg *g)
{
    size_t cap = 16;
    while (cap < (size_t)g->n * (CT_OP_MAX_SRC + 1) * 2) cap *= 2;
    seen_set h = {calloc(cap, sizeof *h.key), calloc(cap, 1), cap - 1};
    g->chk = malloc(sizeof *g->chk * (size_t)g->n * (CT_OP_MAX_SRC + 1));
    g->mark = malloc(sizeof *g->mark * (size_t)g->n);
    bool ok = h.key && h.flags && g->chk && g->mark;
    for (int i = 0; ok && i < g->n; i++) {
        step_op *o = &s->ops[g->first + i];
        unsigned char *f = seen_flags(&h, o->dst.st);
        /* a fully written internal intermediate: no check, no record */
        if (o->op.kind != CT_OP_SET_ROWS && exec_writes_all(&o->op, o->fresh, o->wlo, o->whi) &&
            seg_internal(s, g, o->dst.st))
            *f |= SEEN_INTERNAL;
        else
            g->mark[g->n_mark++] = g->first + i;
    }
    for (int i = 0; ok && i < g->n; i++) plan_op(&s->ops[g->first + i], g->dev, &h, g->chk, g->first + i, &g->n_chk);
    free(h.key);
    free(h.flags);
    if (!ok) {
        free(g->chk);
        free(g->mark);
        g->chk = NULL;
        g->mark = NULL;
    }
    return ok;
}

/* Offers the backend the run [first, first + n); false when it declines. */
static bool capture_run(ct_step *s, int first, int n)
{
    ct_device *d = s->ops[first].dev;
    step_seg *g = &s->segs[s->n_segs];
    *g = (step_seg){first, n, d, NULL, malloc(sizeof *g->list * (size_t)n), NULL, 0, NULL, 0};
    if (!g->list) return false;
    for (int i = 0; i < n; i++) g->list[i] = s->ops[first + i].op;
    if (d->ops->step_capture(d, g->list, n, &g->handle) != CT_OK) {
        core_log(CT_LOG_INFO, "ct_step: %s could not capture %d ops (%s); they are replayed one by one", d->info.name,
                 n, ct_last_error());
        free(g->list);
        return false;
    }
    if (!seg_plan(s, g)) {
        if (d->ops->step_release) d->ops->step_release(d, g->handle);
        free(g->list);
        return false;
    }
    s->ops[first].seg = s->n_segs++;
    s->info.captured_ops += n;
    return true;
}

/* Each maximal run of two or more consecutive ops on a device whose backend captures steps
 * is offered to it (the whole step when every op ran there; the layers a GPU holds, between
 * the CPU's ops, otherwise). A declined run is replayed op by op: not an error. */
static void try_capture(ct_step *s)
{
    if (s->n_ops <= 0) return;
    for (int i = 0; i < s->n_ops; i++) s->ops[i].seg = -1;
    s->segs = calloc((size_t)s->n_ops, sizeof *s->segs);
    if (!s->segs) return;
    for (int i = 0; i < s->n_ops;) {
        int j = i + 1;
        while (j < s->n_ops && s->ops[j].dev == s->ops[i].dev) j++;
        if (j - i >= 2 && can_capture(s->ops[i].dev)) capture_run(s, i, j - i);
        i = j;
    }
    s->info.captured = s->n_segs == 1 && s->info.captured_ops == s->n_ops;
}

ct_status ct_step_end(ct_step **out)
{
    ct_step *s = exec_step_rec;
    exec_step_rec = NULL;
    if (!out) {
        ct_step_free(s);
        return core_err(CT_ERR_INVALID_ARG, "ct_step_end: out is NULL");
    }
    *out = NULL;
    if (!s) return core_err(CT_ERR_INVALID_ARG, "ct_step_end: this thread is not recording (call ct_step_begin)");
    ct_status st = s->failed;
    if (st != CT_OK) core_err(st, "ct_step_end: an op failed while recording: %s", s->failed_msg);
    else if (!s->n_ops) st = core_err(CT_ERR_INVALID_ARG, "ct_step_end: no op was recorded");
    if (st == CT_OK) {
        for (int b = 0; b < s->n_bufs; b++) {
            step_buf *sb = &s->bufs[b];
            sb->output = sb->inter && atomic_load(&sb->st->refcnt) > 1;
        }
        s->ext = malloc(sizeof *s->ext * (size_t)s->n_bufs);
        if (!s->ext) st = core_err(CT_ERR_OOM, "ct_step_end: out of memory");
    }
    if (st == CT_OK) st = bind_all(s);
    if (st != CT_OK) {
        ct_step_free(s);
        return st;
    }
    for (int b = 0; b < s->n_bufs; b++)
        if (!s->bufs[b].inter) s->ext[s->n_ext++] = b;
    fix_pointers(s);
    s->cpu_only = true;
    for (int i = 0; i < s->n_ops; i++) {
        s->cpu_only &= s->ops[i].dev->info.kind == CT_DEVICE_CPU;
        int d = 0;
        while (d < s->n_devs && s->devs[d] != s->ops[i].dev) d++;
        if (d == s->n_devs && d < EXEC_MAX_DEVICES) s->devs[s->n_devs++] = s->ops[i].dev;
    }
    fill_info(s);
    if (!s->cpu_only) try_capture(s);
    else
        for (int i = 0; i < s->n_ops; i++) s->ops[i].seg = -1;
    *out = s;
    return CT_OK;
}

/* ---- replay ---- */

bool ct_step_stale(const ct_step *s, char *why, size_t len)
{
    const char *r = NULL;
    char buf[160];
    if (!s) r = "no step";
    else if (s->chain_gen != __atomic_load_n(&g_chain_gen, __ATOMIC_RELAXED)) r = "the device chain changed";
    else if (s->place_gen != __atomic_load_n(&g_place_gen, __ATOMIC_RELAXED)) r = "a tensor was placed on a device";
    else
        for (int i = 0; i < s->n_devs && !r; i++)
            if (device_is_lost(s->devs[i])) {
                snprintf(buf, sizeof buf, "device %s was lost", s->devs[i]->info.name);
                r = buf;
            }
    if (r && why && len) snprintf(why, len, "%s", r);
    return r != NULL;
}

/* The CPU's plain loop applies while every storage the step references lives on the
 * host only; a copy elsewhere (a user's op on a device since) needs the bookkeeping. */
static bool host_only(const ct_step *s)
{
    for (int i = 0; i < s->n_ext; i++)
        if (s->bufs[s->ext[i]].st->n_copies != 1) return false;
    return true;
}

static void account(const step_op *o, uint64_t t0, uint64_t dur, uint64_t moved)
{
    exec_state *es = exec_state_get();
    exec_stat_add(&es->stats[o->dev->id].time_ns, dur);
    if (trace_enabled()) trace_op(&o->op, o->dev, o->reason, t0, dur, moved, "replayed");
}

static ct_status run_fast(ct_step *s, bool timed)
{
    ct_device *cpu = s->ops[0].dev;
    ct_status (*run)(ct_device *, const ct_op *) = cpu->ops->run;
    if (!timed) {
        for (int i = 0; i < s->n_ops; i++) {
            ct_status st = run(cpu, &s->ops[i].op);
            if (st != CT_OK) return st;
        }
    } else {
        for (int i = 0; i < s->n_ops; i++) {
            uint64_t t0 = exec_now_ns();
            ct_status st = run(cpu, &s->ops[i].op);
            if (st != CT_OK) return st;
            account(&s->ops[i], t0, exec_now_ns() - t0, 0);
        }
    }
    exec_stat_add(&exec_state_get()->stats[cpu->id].ops, (uint64_t)s->n_ops);
    return CT_OK;
}

/* One op with what an asynchronous device needs: operands refreshed where another
 * device wrote them (a range, usually), the queue ordered after their writers, the
 * written range recorded. Buffers exist already: nothing is allocated. */
static ct_status run_one(step_op *o, bool sync, uint64_t *moved)
{
    ct_device *dev = o->dev;
    for (int j = 0; j < o->op.n_src; j++) {
        if (!o->op.src[j]) continue;
        /* a weight the device imported into its own layout is served from there, as in eager */
        if (o->op.src[j]->st->derived && storage_layout_serves(o->op.src[j], dev, (int)o->op.kind, j)) continue;
        ct_status st = storage_make_valid_ex(o->op.src[j]->st, dev, moved, NULL, NULL);
        if (st != CT_OK) return st;
    }
    ct_storage *dst = o->dst.st;
    if (o->op.kind == CT_OP_SET_ROWS) exec_written_range(&o->op, o->fresh, &o->wlo, &o->whi); /* the rows change per run */
    ct_status st = CT_OK;
    if (!exec_writes_all(&o->op, o->fresh, o->wlo, o->whi)) st = storage_make_valid_ex(dst, dev, moved, NULL, NULL);
    if (st == CT_OK) st = storage_order_write(dst, dev);
    if (st == CT_OK) st = dev->ops->run(dev, &o->op);
    ct_event *ev = NULL;
    if (st == CT_OK) st = event_record(dev, &ev);
    if (st != CT_OK) return st;
    storage_mark_written_at(dst, dev, ev, o->wlo, o->whi);
    event_release(ev);
    return sync ? device_sync(dev) : CT_OK;
}

/* A captured segment in one launch: what its ops read made valid on the device first
 * (a range, usually; weights served by an imported layout skipped, as in eager), its
 * written storages ordered, each op's written range marked with the launch's event. */
static ct_status run_segment(ct_step *s, const step_seg *g, bool timed, bool sync)
{
    ct_device *dev = g->dev;
    uint64_t t0 = exec_now_ns(), moved = 0;
    bool lost = device_any_lost();
    for (int c = 0; c < g->n_chk; c++) {
        seg_check *k = &g->chk[c];
        step_op *o = &s->ops[k->op];
        ct_status st = CT_OK;
        if (k->src >= 0) {
            const ct_tensor *t = o->op.src[k->src];
            if (k->gen && !lost && k->gen == storage_gen(t->st)) continue;
            if (k->served && t->st->derived == k->derived) continue;
            if (t->st->derived && storage_layout_serves(t, dev, (int)o->op.kind, k->src)) continue;
            st = storage_make_valid_ex(t->st, dev, &moved, NULL, NULL);
            if (st == CT_OK) k->gen = lost ? 0 : storage_gen(t->st);
        } else {
            ct_storage *dst = o->dst.st;
            if (o->op.kind == CT_OP_SET_ROWS) exec_written_range(&o->op, o->fresh, &o->wlo, &o->whi);
            if (k->valid && !exec_writes_all(&o->op, o->fresh, o->wlo, o->whi))
                st = storage_make_valid_ex(dst, dev, &moved, NULL, NULL);
            if (st == CT_OK && k->order) st = storage_order_write(dst, dev);
        }
        if (st != CT_OK) return st;
    }
    uint64_t t1 = exec_now_ns();
    ct_status st = dev->ops->step_launch(dev, g->handle);
    ct_event *ev = NULL;
    if (st == CT_OK) st = event_record(dev, &ev);
    if (st != CT_OK) return st;
    uint64_t t2 = exec_now_ns();
    for (int m = 0; m < g->n_mark; m++) {
        const step_op *o = &s->ops[g->mark[m]];
        storage_mark_written_at(o->dst.st, dev, ev, o->wlo, o->whi);
    }
    event_release(ev);
    s->info.host_prepare_ns += t1 - t0;
    s->info.host_launch_ns += t2 - t1;
    s->info.host_finish_ns += exec_now_ns() - t2;
    exec_state *es = exec_state_get();
    exec_stat_add(&es->stats[dev->id].ops, (uint64_t)g->n);
    if (timed) {
        exec_stat_add(&es->stats[dev->id].time_ns, exec_now_ns() - t0);
        char msg[128];
        snprintf(msg, sizeof msg, "%d ops launched as one on %s (captured)%s", g->n, dev->info.name,
                 g->n == s->n_ops ? ": the whole step" : "");
        trace_note(msg);
    }
    return sync ? device_sync(dev) : CT_OK;
}

static ct_status run_general(ct_step *s, bool timed)
{
    exec_state *es = exec_state_get();
    bool sync = __atomic_load_n(&es->sync, __ATOMIC_RELAXED);
    for (int i = 0; i < s->n_ops; i++) {
        if (s->ops[i].seg >= 0) {
            const step_seg *g = &s->segs[s->ops[i].seg];
            ct_status st = run_segment(s, g, timed, sync);
            if (st != CT_OK) return st;
            i += g->n - 1;
            continue;
        }
        uint64_t t0 = timed ? exec_now_ns() : 0, moved = 0;
        ct_status st = run_one(&s->ops[i], sync, &moved);
        if (st != CT_OK) return st;
        exec_stat_add(&es->stats[s->ops[i].dev->id].ops, 1);
        if (timed) account(&s->ops[i], t0, exec_now_ns() - t0, moved);
    }
    return CT_OK;
}

ct_status ct_step_run(ct_step *s)
{
    if (!s) return core_err(CT_ERR_INVALID_ARG, "ct_step_run: step is NULL");
    if (exec_step_rec) return core_err(CT_ERR_INVALID_ARG, "ct_step_run: cannot replay a step while recording one");
    char why[160];
    if (ct_step_stale(s, why, sizeof why))
        return core_err(CT_ERR_INVALID_ARG, "ct_step_run: the step is stale (%s): record it again", why);
    exec_state *es = exec_state_get();
    bool timed = __atomic_load_n(&es->timing, __ATOMIC_RELAXED) || trace_enabled();
    s->info.fast = s->cpu_only && host_only(s);
    s->info.replays++;
    return s->info.fast ? run_fast(s, timed) : run_general(s, timed);
}

/* ---- release ---- */

/* An output the caller still holds gets its own host memory: the arena is going. */
static void detach(ct_storage *st)
{
    void *p;
    bool ok = storage_host(st, &p) == CT_OK;
    if (st->copies[0].buf.borrowed) {
        /* its data could not be fetched (a lost device): no bytes rather than the arena's */
        void *own = ok ? host_alloc(st->nbytes ? st->nbytes : 1) : NULL;
        if (own) memcpy(own, p, st->nbytes);
        st->copies[0].buf = (ct_buffer){own, own ? st->nbytes : 0, NULL, false, 0};
        st->copies[0].valid = own != NULL;
    }
    for (int i = st->n_copies - 1; i >= 1; i--)
        if (st->copies[i].buf.borrowed) storage_drop_copy(st, st->copies[i].dev);
}

void ct_step_free(ct_step *s)
{
    if (!s) return;
    if (exec_step_rec == s) exec_step_rec = NULL;
    for (int i = 0; i < s->n_segs; i++) {
        step_seg *g = &s->segs[i];
        if (g->dev->ops->step_release) g->dev->ops->step_release(g->dev, g->handle);
        free(g->list);
        free(g->chk);
        free(g->mark);
    }
    free(s->segs);
    sync_used_devices(s);
    for (int b = 0; b < s->n_bufs; b++) {
        ct_storage *st = s->bufs[b].st;
        if (s->bufs[b].inter && atomic_load(&st->refcnt) > 1) detach(st);
        storage_release(st);
    }
    for (int i = 0; i < s->n_arenas; i++) {
        step_arena *a = &s->arenas[i];
        if (!a->buf.ptr) continue;
        if (a->dev->info.kind == CT_DEVICE_CPU) host_free(a->buf.ptr, a->bytes);
        else a->dev->ops->release(a->dev, &a->buf);
    }
    free(s->ops);
    free(s->bufs);
    free(s->slots);
    free(s->ext);
    free(s);
}

ct_status ct_step_get_info(const ct_step *s, ct_step_info *info)
{
    if (!s || !info) return core_err(CT_ERR_INVALID_ARG, "ct_step_get_info: NULL argument");
    *info = s->info;
    return CT_OK;
}

void ct_exec_trace_note(const char *msg)
{
    if (msg) trace_note(msg);
}
