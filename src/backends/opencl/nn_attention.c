/* SDPA on OpenCL (kernels/attention.cl): q f32, k/v f32 or f16 with unit stride along the
 * head dim (the frontend converts anything else), an optional f32 additive mask and the
 * attended-length tensor read on the device. A work-group serves a block of query rows that
 * share a kv head (positions in prefill, the grouped heads in decode), so K and V are read
 * once per block. Decode (one query row) goes to att_decode, which splits the attended keys
 * over enough work-groups to fill the device and merges them in the same launch; where its
 * plan does not fit (heads x value dims past its accumulators, local memory) att_sdpa splits
 * the cache's slots into segments merged by att_combine. Either split depends only on the
 * shapes and the device, so a recorded step replays the same arithmetic. */
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/nn_internal.h"

#define ATT_WG 64
#define ATT_ACC 8        /* value dims per work-item (ATT_ACC in attention.cl) */
/* Keys per decode segment, at least. On the H100 a decode step's att_sdpa took ~100 us
 * with 128-key segments: at a short length only a handful of work-groups had keys, each
 * walking them one latency-bound chunk after another; shorter segments put more
 * work-groups on the keys there are (att_combine merges up to 256). */
#define ATT_MIN_SEG 16
#define ATT_MIN_GROUPS 32

#define ATT_QB 8          /* query rows per work-group, at most (ATT_QB in attention.cl) */

typedef struct att_plan {
    size_t wg;
    int nseg;          /* key segments per row block */
    int rows;          /* query rows per block */
    int decode_rows;   /* blocks are the query heads of one kv head (one query row) */
    int64_t blocks;    /* row blocks */
} att_plan;

static att_plan att_plan_for(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *q = op->src[0], *k = op->src[1];
    int64_t B = q->shape[0], Hq = q->shape[1], Tq = q->shape[2], Hkv = k->shape[1], Tk = k->shape[2];
    int64_t G = Hkv > 0 ? Hq / Hkv : 1;
    att_plan p = {.wg = nn_wg(dev, ATT_WG), .nseg = 1, .decode_rows = Tq == 1};
    if (p.decode_rows) { /* the heads sharing a kv head read each K/V row once */
        p.rows = G < ATT_QB ? (int)G : ATT_QB;
        p.blocks = B * Hkv * ((G + p.rows - 1) / p.rows);
    } else {
        p.rows = Tq < ATT_QB ? (int)Tq : ATT_QB;
        p.blocks = B * Hq * ((Tq + p.rows - 1) / p.rows);
    }
    if (p.rows < 1) p.rows = 1;
    if (p.decode_rows && p.blocks > 0) {
        /* enough work-groups to fill the device, and never fewer than ATT_MIN_GROUPS: a small
         * device must run the same split-and-merge path as a large one */
        int64_t target = 4 * (int64_t)ocl_info(dev)->compute_units;
        if (target < ATT_MIN_GROUPS) target = ATT_MIN_GROUPS;
        int64_t n = (target + p.blocks - 1) / p.blocks, cap = Tk / ATT_MIN_SEG;
        if (n > cap) n = cap;
        if (n > 256) n = 256;
        p.nseg = n > 1 ? (int)n : 1;
    }
    return p;
}

/* att_decode (one query row per head, attention.cl): work-groups of DEC_WG work-items
 * (DEC_WG_GPU on GPUs), each serving the G heads of one kv head over one split of the
 * attended keys, and never more than the kernel itself allows on the device (its
 * registers: at 1,024 the H200's launch fails). More work-items shorten every work-item's
 * share of the scores, the softmax and P V, the chain a split's latency is made of: H200,
 * TinyLlama-shaped Q4_K_M, tg128 (ctorch bench -d opencl:0,cpu -n 128 -r 3, two rounds,
 * alternated in one call, session 23) after no prompt / after 512 tokens: 128 work-items
 * 621, 628 / 638, 634 t/s; 256 660, 650 / 669, 664; 512 680, 664 / 669, 665 (and 667,
 * 686 / 671, 673 in a second call). */
#define DEC_WG 128
#define DEC_WG_GPU 512
#define DEC_ACC 8             /* (head, value dim) pairs per work-item (ATT_DACC in attention.cl) */
/* Keys per chunk loaded into local memory, at most. H200, tg128 after 0 / 512 prompt tokens: 32
 * 628-640 t/s, 64 616-630, 128 598-603 (session 15); session 17, after 512, three rounds
 * alternated: 32 634-649, 64 608-632. The kernel alone (ctorch-bench-ocl-attn, TinyLlama's
 * heads, 64 / 600 / 2,000 keys) is 1.5-2.8 us faster with 64, yet the model's step is slower. */
#define DEC_CHUNK 32
#define DEC_MIN_GROUPS 32     /* so that a small device (PoCL) runs the split-and-merge path too */
#define DEC_MERGE_FLOATS 16384 /* partial floats one kv head's merge reads, about at most */
#define DEC_MAX_SPLIT 1024
/* Keys per split, at least, at the length the kernel reads: on the H200 a TinyLlama decode
 * step's attention cost 27 us a layer at lengths under 128 with 31 splits of a few keys,
 * each group's fixed latency chain and the merge's global round trips dominating. With
 * 64 (one run, tg128 alternated): 594-599 -> 617-630 t/s after no prompt, 590-598 ->
 * 644-647 after 512 tokens; 16, 32 and 128 within those ranges. */
#define DEC_MIN_KEYS 64

typedef struct dec_plan {
    size_t wg;
    int nsplit, chunk, segmax, min_keys;
    int64_t G, heads; /* heads: B * Hkv */
    size_t local[4];  /* qloc, kv, sc, red bytes */
} dec_plan;

/* Diagnostic switches for tuning on a device: the splits per kv head
 * (CTORCH_OPENCL_ATT_SPLIT), the work-group size (CTORCH_OPENCL_ATT_WG), the fewest keys
 * a split takes (CTORCH_OPENCL_ATT_MINKEYS) and the keys per local-memory chunk
 * (CTORCH_OPENCL_ATT_CHUNK); 0: the backend's choice. */
static int64_t dec_env(const char *name)
{
    const char *e = getenv(name);
    return e && *e ? atoll(e) : 0;
}

/* The split count depends on the cache's shape and the device only (never on the attended
 * length), so a recorded step replays the same launch at every position: about one
 * work-group per compute unit, no more splits than the merge can read cheaply, and enough
 * that a segment of the whole cache fits the scores' local memory. False: no plan fits. */
static bool dec_plan_for(const ct_device *dev, const ct_op *op, dec_plan *p)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2];
    int64_t B = q->shape[0], Hq = q->shape[1], Hkv = k->shape[1], Tk = k->shape[2], D = q->shape[3],
            Dv = v->shape[3];
    const ocl_dev_info *info = ocl_info(dev);
    memset(p, 0, sizeof *p);
    if (q->shape[2] != 1 || Hkv < 1 || Hq % Hkv || D < 1 || Dv < 1) return false;
    p->G = Hq / Hkv;
    p->heads = B * Hkv;
    int64_t wg_env = dec_env("CTORCH_OPENCL_ATT_WG");
    size_t cap = wg_env > 0 && wg_env <= 1024 ? (size_t)wg_env : (info->type & CL_DEVICE_TYPE_GPU) ? DEC_WG_GPU : DEC_WG;
    size_t kwg = ocl_kernel_wg(dev, "attention", "att_decode");
    p->wg = nn_wg(dev, kwg && kwg < cap ? kwg : cap);
    if (p->G * Dv > DEC_ACC * (int64_t)p->wg || p->heads < 1) return false;
    int64_t target = info->compute_units > DEC_MIN_GROUPS ? info->compute_units : DEC_MIN_GROUPS;
    int64_t n = (target + p->heads - 1) / p->heads, merge_cap = DEC_MERGE_FLOATS / (p->G * (Dv + 2));
    if (n > merge_cap) n = merge_cap;
    int64_t forced = dec_env("CTORCH_OPENCL_ATT_SPLIT");
    if (forced > 0) n = forced;
    if (n > Tk) n = Tk;
    if (n < 1) n = 1;
    /* the scores of a segment stay in local memory: at most ~1/4 of it */
    int64_t max_seg = (int64_t)(info->local_mem / 4 / sizeof(float)) / p->G;
    if (max_seg < 1) return false;
    if ((Tk + n - 1) / n > max_seg) n = (Tk + max_seg - 1) / max_seg;
    if (n > DEC_MAX_SPLIT) return false;
    p->nsplit = (int)n;
    p->segmax = (int)((Tk + n - 1) / n);
    if (p->segmax < 1) p->segmax = 1;
    /* a forced split count is used whole (the tests' merge paths at any length) */
    int64_t mk = forced > 0 ? 1 : dec_env("CTORCH_OPENCL_ATT_MINKEYS");
    if (mk <= 0) mk = DEC_MIN_KEYS;
    p->min_keys = (int)(mk < p->segmax ? mk : p->segmax);
    int64_t row = D + 1 > Dv ? D + 1 : Dv, chunk = dec_env("CTORCH_OPENCL_ATT_CHUNK");
    for (p->chunk = chunk > 0 && chunk <= 1024 ? (int)chunk : DEC_CHUNK;; p->chunk /= 2) {
        p->local[0] = sizeof(float) * (size_t)(p->G * D);
        p->local[1] = sizeof(float) * (size_t)(p->chunk * row);
        p->local[2] = sizeof(float) * (size_t)(p->G * p->segmax);
        p->local[3] = sizeof(float) * (size_t)(3 * p->G + 2 * p->G * p->nsplit);
        size_t total = p->local[0] + p->local[1] + p->local[2] + p->local[3] + 64;
        if (total <= info->local_mem) return true;
        if (p->chunk == 1) return false;
    }
}

/* Local memory of att_sdpa: the block's query rows and one chunk of scores per row. */
static size_t att_local_bytes(const att_plan *p, int64_t D)
{
    return sizeof(float) * (size_t)p->rows * ((size_t)(D > 0 ? D : 1) + p->wg);
}

bool nn_attention_supports(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3], *y = op->dst;
    /* capability probes (ct_device_supports) send 2-D stand-ins with fewer sources */
    if (op->n_src < 3 || !q || !k || !v || q->ndim != 4 || k->ndim != 4 || v->ndim != 4) return false;
    if (mask && mask->ndim != 4) return false;
    if (q->dtype != CT_F32 || y->dtype != CT_F32 || !tensor_is_contiguous(y)) return false;
    if ((k->dtype != CT_F32 && k->dtype != CT_F16) || (v->dtype != CT_F32 && v->dtype != CT_F16)) return false;
    if (mask && mask->dtype != CT_F32) return false;
    if (q->stride[3] != 1 && q->shape[3] > 1) return false;
    if ((k->stride[3] != 1 && k->shape[3] > 1) || (v->stride[3] != 1 && v->shape[3] > 1)) return false;
    dec_plan dp;
    if (dec_plan_for(dev, op, &dp)) return ocl_program_ok(dev, "attention");
    const ocl_dev_info *info = ocl_info(dev);
    att_plan p = att_plan_for(dev, op);
    int64_t D = q->shape[3], Dv = v->shape[3];
    if (Dv > ATT_ACC * (int64_t)p.wg) return false;
    if (att_local_bytes(&p, D) > info->local_mem) return false;
    return ocl_program_ok(dev, "attention");
}

typedef struct dec_bufs {
    cl_mem qm, km, vm, mm, lm, ym;
    cl_ulong qo, ko, vo, mo, lo, yo;
    cl_long4 qs, ks, vs, ms;
} dec_bufs;

/* att_decode's launch. Its temporary holds the splits' partials and, after them, one
 * counter per kv head; the counters are zeroed here once (also while a step is being
 * captured: the fill is not part of the step) and every launch leaves them zero again. */
static ct_status dec_run(ct_device *dev, const ct_op *op, const dec_plan *p, const dec_bufs *t)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3];
    const ct_tensor *len = op->n_src > 4 ? op->src[4] : NULL;
    cl_long Hq = q->shape[1], Hkv = k->shape[1], Tk = k->shape[2];
    cl_int D = (cl_int)q->shape[3], Dv = (cl_int)v->shape[3];
    /* a kv head's partials (nsplit x G x Dv, then m and l per split and head) on 256-byte lines */
    cl_int pitch = (cl_int)nn_round_up((size_t)(p->nsplit * p->G * (Dv + 2)), 64);
    size_t part_floats = p->nsplit > 1 ? (size_t)p->heads * (size_t)pitch : 0;
    size_t cnt_off = (part_floats * sizeof(float) + 63) / 64 * 64, bytes = cnt_off + sizeof(cl_int) * (size_t)p->heads;
    cl_mem buf;
    ct_status s = ocl_tmp_alloc(dev, bytes, &buf);
    if (s != CT_OK) return s;
    if (p->nsplit > 1) s = ocl_zero_now(dev, buf, cnt_off, bytes - cnt_off);
    cl_int dtk = k->dtype == CT_F16, dtv = v->dtype == CT_F16, has_mask = mask != NULL, has_len = len != NULL;
    cl_int len64 = len && len->dtype == CT_I64, nsplit = p->nsplit, chunk = p->chunk, segmax = p->segmax;
    cl_int min_keys = p->min_keys;
    cl_long window = op->p.attn.window;
    cl_float scale = (cl_float)op->p.attn.scale;
    cl_ulong co = cnt_off;
    size_t wg = p->wg, global = (size_t)(p->heads * p->nsplit) * wg;
    ocl_arg a[] = {OCL_ARG(t->qm),  OCL_ARG(t->qo),   OCL_ARG(t->km),    OCL_ARG(t->ko),    OCL_ARG(t->vm),
                   OCL_ARG(t->vo),  OCL_ARG(t->mm),   OCL_ARG(t->mo),    OCL_ARG(t->lm),    OCL_ARG(t->lo),
                   OCL_ARG(t->ym),  OCL_ARG(t->yo),   OCL_ARG(buf),      OCL_ARG(co),       OCL_ARG(Hq),
                   OCL_ARG(Hkv),    OCL_ARG(Tk),      OCL_ARG(D),        OCL_ARG(Dv),       OCL_ARG(t->qs),
                   OCL_ARG(t->ks),  OCL_ARG(t->vs),   OCL_ARG(t->ms),    OCL_ARG(dtk),      OCL_ARG(dtv),
                   OCL_ARG(has_mask), OCL_ARG(has_len), OCL_ARG(len64),  OCL_ARG(window),   OCL_ARG(scale),
                   OCL_ARG(nsplit), OCL_ARG(chunk),   OCL_ARG(segmax),   OCL_ARG(min_keys), OCL_ARG(pitch),    OCL_LOCAL(p->local[0]),
                   OCL_LOCAL(p->local[1]), OCL_LOCAL(p->local[2]), OCL_LOCAL(p->local[3])};
    if (s == CT_OK) s = nn_launch(dev, "attention", "att_decode", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
    ocl_tmp_free(dev, buf, bytes);
    return s;
}

ct_status nn_attention_run(ct_device *dev, const ct_op *op)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3], *y = op->dst;
    const ct_tensor *len = op->n_src > 4 ? op->src[4] : NULL;
    if (ct_tensor_numel(y) == 0) return CT_OK;
    att_plan p = att_plan_for(dev, op);
    cl_long Hq = q->shape[1], Hkv = k->shape[1], Tq = q->shape[2], Tk = k->shape[2], D = q->shape[3],
            Dv = v->shape[3];
    cl_long rows = q->shape[0] * Hq * Tq;
    cl_long4 qs, ks, vs, ms = {{0}};
    for (int i = 0; i < 4; i++) {
        qs.s[i] = q->stride[i], ks.s[i] = k->stride[i], vs.s[i] = v->stride[i];
        if (mask) ms.s[i] = mask->stride[i];
    }
    cl_mem qm, km, vm, mm, lm, ym, part;
    cl_ulong qo, ko, vo, mo = 0, lo = 0, yo;
    ct_status s = nn_mem(q, dev, "sdpa", &qm, &qo);
    if (s == CT_OK) s = nn_mem(k, dev, "sdpa", &km, &ko);
    if (s == CT_OK) s = nn_mem(v, dev, "sdpa", &vm, &vo);
    if (s == CT_OK) s = nn_mem(y, dev, "sdpa", &ym, &yo);
    mm = lm = qm; /* absent mask/length: any valid buffer, never read */
    if (s == CT_OK && mask) s = nn_mem(mask, dev, "sdpa", &mm, &mo);
    if (s == CT_OK && len) s = nn_mem(len, dev, "sdpa", &lm, &lo);
    if (s != CT_OK) return s;
    dec_plan dp;
    if (dec_plan_for(dev, op, &dp)) {
        dec_bufs db = {qm, km, vm, mm, lm, ym, qo, ko, vo, mo, lo, yo, qs, ks, vs, ms};
        return dec_run(dev, op, &dp, &db);
    }
    size_t part_bytes = p.nseg > 1 ? sizeof(float) * (size_t)(rows * p.nseg * (Dv + 2)) : 0;
    part = ym;
    if (part_bytes && (s = ocl_tmp_alloc(dev, part_bytes, &part)) != CT_OK) return s;
    cl_int dtk = k->dtype == CT_F16, dtv = v->dtype == CT_F16, has_mask = mask != NULL, has_len = len != NULL;
    cl_int len64 = len && len->dtype == CT_I64, causal = op->p.attn.causal, nseg = p.nseg;
    cl_int rows_per_blk = p.rows, decode_rows = p.decode_rows;
    cl_long window = op->p.attn.window;
    cl_float scale = (cl_float)op->p.attn.scale;
    size_t wg = p.wg, global = (size_t)(p.blocks * p.nseg) * wg;
    ocl_arg a[] = {OCL_ARG(qm),   OCL_ARG(qo),      OCL_ARG(km),      OCL_ARG(ko),      OCL_ARG(vm),
                   OCL_ARG(vo),   OCL_ARG(mm),      OCL_ARG(mo),      OCL_ARG(lm),      OCL_ARG(lo),
                   OCL_ARG(ym),   OCL_ARG(yo),      OCL_ARG(part),    OCL_ARG(Hq),      OCL_ARG(Hkv),
                   OCL_ARG(Tq),   OCL_ARG(Tk),      OCL_ARG(D),       OCL_ARG(Dv),      OCL_ARG(qs),
                   OCL_ARG(ks),   OCL_ARG(vs),      OCL_ARG(ms),      OCL_ARG(dtk),     OCL_ARG(dtv),
                   OCL_ARG(has_mask), OCL_ARG(has_len), OCL_ARG(len64), OCL_ARG(causal), OCL_ARG(window),
                   OCL_ARG(scale), OCL_ARG(nseg),   OCL_ARG(rows_per_blk), OCL_ARG(decode_rows),
                   OCL_LOCAL(sizeof(float) * (size_t)p.rows * (size_t)(D > 0 ? D : 1)),
                   OCL_LOCAL(sizeof(float) * (size_t)p.rows * wg)};
    s = nn_launch(dev, "attention", "att_sdpa", (int)(sizeof a / sizeof a[0]), a, 1, &global, &wg);
    if (s == CT_OK && p.nseg > 1) {
        size_t cglobal = (size_t)rows * wg;
        ocl_arg c[] = {OCL_ARG(part), OCL_ARG(ym), OCL_ARG(yo), OCL_ARG(Dv), OCL_ARG(nseg)};
        s = nn_launch(dev, "attention", "att_combine", (int)(sizeof c / sizeof c[0]), c, 1, &cglobal, &wg);
    }
    if (part_bytes) ocl_tmp_free(dev, part, part_bytes);
    return s;
}
