/* SDPA on OpenCL (kernels/attention.cl): q f32, k/v f32 or f16 with unit stride along the
 * head dim (the frontend converts anything else), an optional f32 additive mask and the
 * attended-length tensor read on the device. A work-group serves a block of query rows that
 * share a kv head (positions in prefill, the grouped heads in decode), so K and V are read
 * once per block. Decode splits the keys into segments so that few heads still fill the
 * device, merged by att_combine; the split depends only on the shapes and the device, so a
 * recorded step replays the same arithmetic. */
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
    const ocl_dev_info *info = ocl_info(dev);
    att_plan p = att_plan_for(dev, op);
    int64_t D = q->shape[3], Dv = v->shape[3];
    if (Dv > ATT_ACC * (int64_t)p.wg) return false;
    if (att_local_bytes(&p, D) > info->local_mem) return false;
    return ocl_program_ok(dev, "attention");
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
