/* One-row decode products on GPUs (mv1x_r* in kernels/mv1.cl) for Q4_K and Q6_K, the
 * formats of a Q4_K_M model, for the 32-blocks Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0 (mv1xl_r*,
 * mv1rl_r*), for Q5_K (mv1xk_r*, mv1rk_r*), Q2_K and Q3_K (mv1xs_r*, mv1rs_r*) and for f16
 * and bf16 weights (mv1xh_r*, mv1rh_r*: the nn group hands their one-row LINEARs over), and
 * the step planner's fused launches built on them.
 *
 * A plain LINEAR with one row of x runs as a one-segment launch. While a step is captured
 * (capture.c), ocl_quant_fuse looks at the ops ahead and covers these with one launch:
 *   [RMS_NORM] + LINEAR + LINEAR + SWIGLU     gate and up rows side by side, h = silu(g) * u
 *                                 (or GEGLU)  h = gelu(g) * u, gelu's tanh form (Gemma 3)
 *   [RMS_NORM] + LINEAR (+ LINEAR (+ LINEAR)) linears of one x (q, k, v), one after another
 *   [RMS_NORM] + LINEAR + ADD                 z = y + r
 * (the norm optional in each). Every tensor those ops write is still written (the norm's
 * output, each linear's, the swiglu's, geglu's or add's), so whoever reads them later,
 * inside the step or after it, sees what op-by-op execution gives. Operands are checked for
 * overlaps a single launch would turn into races. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/opencl/quant.h"
#include "core/config.h"
#include "backends/opencl/quant_internal.h"

#define MV1_LS 64   /* MV1_LS in mv1.cl */
#define OCL_MV1_PROGRAM "mv1" /* kernels/mv1.cl */
#define MV1_MAX_R 8 /* the most rows per work-group of mv1x_r* */

static int g_packed_total; /* fused launches that took a packed kernel (ocl_pack_bufs), for tests */
static int g_mv1_total;    /* mv1x* launches, for tests */

int ocl_quant_mv1_total(void) { return __atomic_load_n(&g_mv1_total, __ATOMIC_RELAXED); }

/* ---- eligibility ---- */

/* The kernels' weight format codes (mv1_args.f): Q4_K 0, Q6_K 1, f16 2, bf16 3, Q4_0 4, Q4_1 5,
 * Q5_0 6, Q5_1 7, Q8_0 8, Q5_K 9, Q2_K 10, Q3_K 11; -1 none. */
static int mv1_fmt(ct_dtype t)
{
    switch (t) {
    case CT_Q4_K: return 0;
    case CT_Q6_K: return 1;
    case CT_F16: return 2;
    case CT_BF16: return 3;
    case CT_Q4_0: return 4;
    case CT_Q4_1: return 5;
    case CT_Q5_0: return 6;
    case CT_Q5_1: return 7;
    case CT_Q8_0: return 8;
    case CT_Q5_K: return 9;
    case CT_Q2_K: return 10;
    case CT_Q3_K: return 11;
    default: return -1;
    }
}

/* Each family of kernels takes a set of formats (one launch holds one family): Q4_K and Q6_K
 * (mv1x, mv1xq, mv1xi, mv1r), f16 / bf16 (mv1xh, mv1rh), the 32-blocks (mv1xl, mv1rl), Q5_K
 * with Q6_K (mv1xk, mv1rk) and Q2_K / Q3_K with Q4_K (mv1xs, mv1rs): the mixes of llama.cpp's
 * files put those formats side by side in a layer's q/k/v and gate/up/down (Q5_K_M: Q6_K v
 * and down rows; Q3_K_M and Q2_K: Q4_K v and down). */
enum { MV1_K, MV1_FLOAT, MV1_LEGACY, MV1_K5, MV1_KS, MV1_NFAM };
#define MV1_F(f) (1u << (f))
static const unsigned mv1_fam_formats[MV1_NFAM] = {
    [MV1_K] = MV1_F(0) | MV1_F(1),
    [MV1_FLOAT] = MV1_F(2) | MV1_F(3),
    [MV1_LEGACY] = MV1_F(4) | MV1_F(5) | MV1_F(6) | MV1_F(7) | MV1_F(8),
    [MV1_K5] = MV1_F(9) | MV1_F(1),
    [MV1_KS] = MV1_F(10) | MV1_F(11) | MV1_F(0),
};

/* The first family that takes every format of the set m, or -1. */
static int mv1_family_of(unsigned m)
{
    for (int fam = 0; fam < MV1_NFAM; fam++)
        if (m && !(m & ~mv1_fam_formats[fam])) return fam;
    return -1;
}

static int mv1_family(ct_dtype t) { return mv1_fmt(t) < 0 ? -1 : mv1_family_of(MV1_F(mv1_fmt(t))); }

/* The family of the kernels that take the weights of lin[0 .. n), or -1. */
static int mv1_plan_family(const ct_op *const *lin, int n)
{
    unsigned m = 0;
    for (int i = 0; i < n; i++) {
        int f = mv1_fmt(lin[i]->src[1]->dtype);
        if (f < 0) return -1;
        m |= MV1_F(f);
    }
    return mv1_family_of(m);
}
static bool mv1_float(ct_dtype t) { return mv1_family(t) == MV1_FLOAT; }

/* Alignment of a weight row's start for the loads of format f: Q4_K, Q5_K and f16 / bf16 rows
 * take 16-byte loads, Q2_K's 84-byte blocks 4-byte ones; Q6_K's, Q3_K's and the 32-blocks'
 * sizes are only even. */
static unsigned mv1_align(int f) { return f == 0 || f == 9 || f == 2 || f == 3 ? 16 : f == 10 ? 4 : 2; }

/* x f32, contiguous and 16-byte aligned for float4 loads; weight blocks aligned for theirs
 * (mv1_align); f32 output rows. K: whole 256-blocks for the K formats (their chunks sit at
 * fixed places in a block), whole blocks for the 32-blocks (Gemma 3 270M's 640-wide and
 * SmolLM2's 576-wide rows), 8 weights for f16 / bf16 (a work-item's piece). Weights of f16 / bf16 come from the
 * nn group, whose LINEAR also takes f16 outputs and other biases. */
bool ocl_mv1_ok(const ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->n_src > 2 ? op->src[2] : NULL;
    const ocl_dev_info *info = ocl_info(dev);
    int fmt = mv1_fmt(w->dtype);
    if (ocl_q_matvec_rows(info) || fmt < 0 || w->ndim != 2 || x->dtype != CT_F32) return false;
    if (op->dst->dtype != CT_F32 || !tensor_is_contiguous(op->dst) || ocl_q_bias_kind(b) < 0 || (b && b->ndim != 1))
        return false;
    if (info->max_wg < MV1_LS || info->local_mem < (2 * MV1_MAX_R + 1) * (MV1_LS + 1) * sizeof(float)) return false;
    int64_t N = w->shape[0], K = w->shape[1];
    cl_long rs, cs, wrow = 0;
    cl_ulong xoff = 0, woff = 0;
    int fam = mv1_family(w->dtype);
    int64_t kq = fam == MV1_LEGACY ? 32 : fam == MV1_FLOAT ? 8 : 256;
    if (K % kq || w->stride[1] != 1 || shape_numel(x->ndim - 1, x->shape) != 1 || !ocl_q_x_rows(x, &rs, &cs) ||
        (K > 1 && cs != 1))
        return false;
    if (N > 1 && !ocl_q_byte_stride(w, 0, &wrow)) return false;
    if (!ocl_mem(x, dev, &xoff) || !ocl_mem(w, dev, &woff)) return false;
    unsigned align = mv1_align(fmt);
    const char *e = getenv("CTORCH_OPENCL_MV1_ROWS"); /* a tuning switch: 1 or 4 rows everywhere, 0 off */
    if (e && !strcmp(e, "0")) return false;
    return xoff % 16 == 0 && woff % align == 0 && (cl_ulong)wrow % align == 0 && ocl_program_ok(dev, OCL_MV1_PROGRAM);
}

/* Rows per work-group. Measured on an H100 through NVIDIA's OpenCL (ocl7, TinyLlama Q4_K_M
 * decode), device time per launch with 1 / 2 / 4 / 8 rows: norm + gate/up 5632x2048
 * 18.4 / 16.3 / 17.4 / 24.7 us, o + add 2048x2048 9.4 / 8.0 / 8.2 / 15.8, down 2048x5632
 * 15.1 / 11.7 / 13.7 / 14.2 (Q4_K) and 14.3 / 12.4 / 15.3 / 16.4 (Q6_K), the 32000-row
 * output 55.6 / 45.4 / 43.4 / 52.5 (44.2 at both 2 and 4 in a second run); tg128 441 / 500
 * / 478 t/s with 1 / 2 / 4 everywhere. So 2 (x read from the cache once per 2 rows, few
 * enough registers for a full machine), and 1 where that would leave compute units idle.
 * A vocabulary-sized matrix (16,384 rows or more) takes 4: on the H200 the 32,000-row
 * output went 52.7 -> 46.8 us (session 23), where 4 rows a group still fill the machine.
 * f16 / bf16 weights and the 32-blocks take 4 everywhere: their f32 x has more bytes than
 * the weights (2 and 3.8-7 times), so fewer rows a group read x more often than the weights.
 * H200, TinyLlama-shaped tg128 (session 32): F16 (three rounds in one call) 4 everywhere
 * 546-552 t/s, 2 where not gated 480-486, 8 where not gated 479-485, 8 everywhere 435-447;
 * Q8_0 / Q4_0 (two rounds) 4: 477-479 / 509-543, 2: 410-411 / 445-468, 8: 354-364 / 410.
 * Q5_K (with Q6_K) takes 4 too, Q2_K / Q3_K (with Q4_K) Q4_K's rule (session 33, two rounds,
 * 4 against 2 everywhere): Q5_K_M 598 / 590 against 593 / 579 t/s, Q3_K_M 649 / 637 against
 * 648 / 661, Q2_K 674 / 679 against 716 / 702.
 * CTORCH_OPENCL_MV1_ROWS (a tuning switch) forces 1, 2, 4 or 8 everywhere (0: these
 * kernels off). */
#define MV1_BIG_N 16384 /* an output (vocabulary) matrix: 4 rows a work-group there */
static int mv1_rows(const ct_device *dev, int64_t N, int fam)
{
    const char *e = getenv("CTORCH_OPENCL_MV1_ROWS");
    if (e && e[0] && !e[1] && strchr("1248", e[0])) return e[0] - '0';
    if (fam != MV1_K && fam != MV1_KS) return 4;
    if (N >= MV1_BIG_N) return 4;
    return N >= 4 * (int64_t)ocl_info(dev)->compute_units ? 2 : 1;
}

/* ---- a launch ---- */

/* mv1x_r*'s scalars, one kernel argument (mv1_args in mv1.cl: the same fields in the
 * same order, 8-byte ones first, so both sides lay it out alike). */
typedef struct mv1_args {
    cl_ulong xoff, gmoff, xnoff, boff, roff, zoff, qoff, wo[3], oo[3];
    cl_long K, bstride, wr[3], N[3];
    cl_int norm, has_gam, gated, nseg, bias_kind, epi, f[3];
    cl_int bi[13]; /* the packed kernels' buffer of each operand (ocl_pack_bufs) */
    cl_float eps;
    cl_int slots; /* each warp R rows of its own (mv1_slots) */
} mv1_args;
_Static_assert(sizeof(mv1_args) == 264, "mv1_args: the kernel's layout has 264 bytes");

typedef struct q_span { /* a tensor's device bytes [lo, hi), for overlap tests */
    cl_mem m;
    cl_ulong lo, hi;
} q_span;

static bool span_of(const ct_tensor *t, const ct_device *dev, q_span *sp)
{
    if (!t || t->dtype != CT_F32 || !tensor_is_contiguous(t)) return false;
    sp->m = ocl_mem(t, dev, &sp->lo);
    sp->hi = sp->lo + (cl_ulong)ct_tensor_nbytes(t);
    return sp->m != NULL;
}

static bool overlap(const q_span *a, const q_span *b) { return a->m == b->m && a->lo < b->hi && b->lo < a->hi; }
static bool covers(const q_span *a, const q_span *b) { return a->m == b->m && a->lo <= b->lo && b->hi <= a->hi; }
static bool same(const q_span *a, const q_span *b) { return a->m == b->m && a->lo == b->lo && a->hi == b->hi; }

typedef struct mv1_plan {
    const ct_op *norm;   /* RMS_NORM whose output the linears read, or NULL */
    const ct_op *lin[3]; /* the linears (gated: gate, up) */
    int nseg;
    bool gated;
    const ct_op *tail;   /* the SWIGLU (gated) or ADD after the linears, or NULL */
    q_span r, z;         /* ADD: the residual and the sum; SWIGLU: z the product */
    bool stage;          /* an output overlaps the x read: stage x (or its norm) first */
    bool drop_xn;        /* the tail's output covers the norm's: xn is dead, not written */
} mv1_plan;

static int plan_family(const mv1_plan *p) { return mv1_plan_family(p->lin, p->nseg); }

#define MV1_STAGE_LS 256 /* mv1_stage_x's work-group; it holds up to 32 values of x per work-item */

/* x, or its norm, into a scratch buffer the captured step keeps (mv1_stage_x in mv1.cl). */
static ct_status stage_x(ct_device *dev, const mv1_plan *p, cl_mem xm, cl_ulong xo, cl_long K, cl_mem gm,
                         cl_ulong go, cl_mem xnm, cl_ulong xno, cl_mem *scratch)
{
    cl_int norm = p->norm != NULL, has_gam = p->norm && p->norm->n_src > 1 && p->norm->src[1];
    cl_float eps = p->norm ? (cl_float)p->norm->p.norm.eps : 0.0f;
    cl_kernel k;
    cl_mem sm = NULL;
    ct_status s = ocl_kernel(dev, OCL_MV1_PROGRAM, "mv1_stage_x", &k);
    if (s == CT_OK) s = ocl_tmp_alloc(dev, sizeof(float) * (size_t)K, &sm);
    if (s != CT_OK) return s;
    size_t ls = MV1_STAGE_LS;
    s = OCL_SET_ARGS(dev, k, "mv1_stage_x", OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(K), OCL_ARG(norm), OCL_ARG(gm),
                     OCL_ARG(go), OCL_ARG(has_gam), OCL_ARG(eps), OCL_ARG(xnm), OCL_ARG(xno), OCL_ARG(sm),
                     OCL_LOCAL(sizeof(float) * ls));
    if (s == CT_OK) s = ocl_launch(dev, k, "mv1_stage_x", 1, &ls, &ls);
    ocl_tmp_free(dev, sm, sizeof(float) * (size_t)K); /* while capturing: kept until the step's release */
    *scratch = sm;
    return s;
}

/* ---- x as bytes (mv1_q8x and mv1xq_r*, or mv1xi_r*, in mv1.cl) ----
 * Where dp4a is there (NVIDIA, compute capability 6.1+), products of at least MV1_Q8_MIN
 * weights read x as bytes: the quantizing launch costs ~2.1 us, the product saves more from
 * there up. H200 through NVIDIA's OpenCL, held device time a launch (bench/ocl_q8mv.c):
 * 5632 x 2048 Q4_K 9.45 -> 2.06 + 4.8 us, 2048 x 5632 8.52 -> 2.18 + 4.9, the 32,000-row
 * output 38.4 -> 2.1 + 16.6, but 2048 x 2048 5.3 -> 2.1 + 3.56. In a TinyLlama-shaped
 * Q4_K_M decode step (profiled, us a launch, f32 x -> bytes): norm + gate/up 18.2 -> 15.2,
 * the Q6_K output matrix 44.0 -> 37.0, down + add 11.3 -> 11.1 for Q4_K but 11.3 -> 13.9 for
 * Q6_K; so Q6_K rows go this way only in vocabulary-sized matrices. CTORCH_OPENCL_Q8=0
 * never, 1 always (any device and format: integer math without dp4a).
 * The bytes come from a launch of their own (Q8_LAUNCH: mv1_q8x, then mv1xq) or are made
 * by each work-item of the product from the f32 x it loads (Q8_INLINE: mv1xi, no launch
 * before it, but every work-group rounds x again). A launch costs the H200 ~3.4 us of
 * device time however little it does (session 27: a step's kernels made to return at once
 * behind a busy one) and the host 6-8 us. Inline by default except where x is shared by
 * many rows: the vocabulary matrix (8,000 work-groups: 58.9 us inline against 37.4 + 5.0
 * profiled) and gate/up, whose launch also carries the norm (17.6 inline against 14.6 +
 * 5.0 profiled, and tg128 no faster: 664, 665 against 661, 689 t/s). Down alone inline
 * (11.2-11.9 against 11.1 + 5.0): tg128 710, 698, 703 against 675, 685, 700 t/s, three
 * rounds alternated in one call, and 681, 724 against 665, 713 in another.
 * CTORCH_OPENCL_Q8_FORM=launch|inline makes every byte product take one form. */
#define MV1_Q8_MIN ((int64_t)8 << 20)
enum { Q8_NONE, Q8_LAUNCH, Q8_INLINE };
static int g_q8_mode = -1; /* the tests' override: -1 none, else a Q8_* form */
static int g_q8_total;     /* launches that read x as bytes, for tests */

void ocl_quant_test_q8(int mode) { __atomic_store_n(&g_q8_mode, mode, __ATOMIC_RELAXED); }
int ocl_quant_q8_total(void) { return __atomic_load_n(&g_q8_total, __ATOMIC_RELAXED); }

static int q8_form(const mv1_plan *p, int64_t n)
{
    const char *e = getenv("CTORCH_OPENCL_Q8_FORM");
    if (e && (!strcmp(e, "launch") || !strcmp(e, "inline"))) return e[0] == 'l' ? Q8_LAUNCH : Q8_INLINE;
    return p->gated || n >= MV1_BIG_N ? Q8_LAUNCH : Q8_INLINE;
}

/* The kernels' names per x form: mv1x (f32), mv1xq (bytes of a launch), mv1xi (made inline). */
static const char *q8_suffix(int q8) { return q8 == Q8_LAUNCH ? "q" : q8 == Q8_INLINE ? "i" : ""; }

/* The kernel name's part after mv1x / mv1r: the family fam of the weights (h, l, k, s), or for
 * Q4_K / Q6_K x's form q8. */
static const char *mv1_form(int fam, int q8)
{
    static const char *const name[MV1_NFAM] = {[MV1_FLOAT] = "h", [MV1_LEGACY] = "l", [MV1_K5] = "k", [MV1_KS] = "s"};
    return fam == MV1_K ? q8_suffix(q8) : name[fam];
}

/* rows: the weight rows the launch reads; n: its output rows (gate and up: one of them);
 * fam: the launch's kernel family */
static int q8_wanted(const ct_device *dev, const mv1_plan *p, int fam, int64_t rows, int64_t K, int64_t n)
{
    if (fam != MV1_K) return Q8_NONE; /* the byte forms are for Q4_K / Q6_K */
    int m = __atomic_load_n(&g_q8_mode, __ATOMIC_RELAXED);
    if (m >= 0) return m;
    const char *e = getenv("CTORCH_OPENCL_Q8");
    if (e && (!strcmp(e, "0") || !strcmp(e, "1"))) return e[0] == '1' ? q8_form(p, n) : Q8_NONE;
    bool q6 = false;
    for (int i = 0; i < p->nseg; i++) q6 |= p->lin[i]->src[1]->dtype == CT_Q6_K;
    bool on = ocl_info(dev)->dp4a && rows * K >= MV1_Q8_MIN && (!q6 || rows >= MV1_BIG_N);
    return on ? q8_form(p, n) : Q8_NONE;
}

#define MV1_Q8_LS 64 /* mv1_q8x's work-group: 8 blocks of 32 */

/* x (times gam when set) as bytes into a buffer the launch keeps while a step is captured
 * (*q; its layout in mv1_q8x). */
static ct_status q8_x(ct_device *dev, cl_mem xm, cl_ulong xo, cl_mem gm, cl_ulong go, cl_int has_gam, cl_long K,
                      cl_mem *q)
{
    cl_kernel k;
    cl_mem qm = NULL;
    cl_ulong qo = 0;
    size_t bytes = (size_t)K + 8 * (size_t)(K / 32), ls = MV1_Q8_LS, global = (size_t)K / 4;
    ct_status s = ocl_kernel(dev, OCL_MV1_PROGRAM, "mv1_q8x", &k);
    if (s == CT_OK) s = ocl_tmp_alloc(dev, bytes, &qm);
    if (s != CT_OK) return s;
    global = (global + ls - 1) / ls * ls;
    s = OCL_SET_ARGS(dev, k, "mv1_q8x", OCL_ARG(xm), OCL_ARG(xo), OCL_ARG(gm), OCL_ARG(go), OCL_ARG(has_gam),
                     OCL_ARG(K), OCL_ARG(qm), OCL_ARG(qo), OCL_LOCAL(2 * sizeof(float) * ls));
    if (s == CT_OK) s = ocl_launch(dev, k, "mv1_q8x", 1, &global, &ls);
    ocl_tmp_free(dev, qm, bytes); /* released once the queue is past it; a captured step keeps it */
    *q = qm;
    return s;
}

/* The launch's name in the device profile (CTORCH_OPENCL_PROFILE=1), which sums device
 * time per name: the kernel, the form and the weights' shapes, so that each matvec of a
 * decode step gets a row of its own, e.g. "mv1x_r4 norm gate+up q4k 5632x2048". */
static void mv1_label(const mv1_plan *p, const char *form, int R, bool slots, char *buf, size_t n)
{
    int len = snprintf(buf, n, "mv1x%s_r%d%s%s%s", form, R, slots ? " 2 warps" : "", p->norm ? " norm" : "",
                       p->gated ? " gate+up" : p->tail ? " +add" : p->nseg > 1 ? " multi" : "");
    for (int i = 0; i < p->nseg && len > 0 && (size_t)len < n; i++) {
        const ct_tensor *w = p->lin[i]->src[1];
        if (p->gated && i > 0) break;
        static const char *const fmt[] = {" q4k",  " q6k",  " f16",  " bf16", " q4_0", " q4_1",
                                          " q5_0", " q5_1", " q8_0", " q5k",  " q2k",  " q3k"};
        len += snprintf(buf + len, n - (size_t)len, "%s%s %lldx%lld", i ? "," : "", fmt[mv1_fmt(w->dtype)],
                        (long long)w->shape[0], (long long)w->shape[1]);
    }
}

/* A one-row kernel's arguments: its n buffers (every operand, or the packed form's distinct
 * ones), its argument block and its local memory. */
static ct_status mv1_set_args(ct_device *dev, cl_kernel k, const char *name, const cl_mem *mems, int n,
                              const void *a, size_t a_size, size_t local)
{
    ocl_arg args[18];
    for (int i = 0; i < n; i++) args[i] = (ocl_arg){sizeof(cl_mem), &mems[i]};
    args[n] = (ocl_arg){a_size, a};
    args[n + 1] = OCL_LOCAL(local);
    return ocl_args(dev, k, name, n + 2, args);
}

/* Short rows in a launch that is not gated: each of the work-group's two warps takes R rows of
 * its own, a work-item the chunks (blocks) lane, lane + 32, ... Where a row has 32 or fewer
 * (K <= 1024) most of 64 work-items would idle in one row, as in Gemma 3 270M's 640-wide
 * matrices (20 blocks), its 262,144-row output among them. f16 / bf16 rows keep their own
 * layout. CTORCH_OPENCL_MV1_SLOTS=0 turns it off. */
static bool mv1_slots(const mv1_plan *p, int fam, int64_t K)
{
    const char *e = getenv("CTORCH_OPENCL_MV1_SLOTS");
    if (p->gated || fam == MV1_FLOAT || K / 32 > 32 || (e && !strcmp(e, "0"))) return false;
    return true;
}

/* *packed: whether the launch took a packed kernel (each distinct buffer once). */
static ct_status mv1_launch(ct_device *dev, const mv1_plan *p, bool *packed)
{
    const ct_tensor *x = p->norm ? p->norm->src[0] : p->lin[0]->src[0];
    const ct_tensor *gamma = p->norm ? p->norm->src[1] : NULL, *b = p->nseg == 1 && !p->gated ? p->lin[0]->src[2] : NULL;
    cl_long K = p->lin[0]->src[1]->shape[1], bstride = b ? b->stride[0] : 0, total = 0;
    cl_mem xm, gm, xnm, bm;
    cl_ulong xo, go = 0, xno = 0, bo = 0;
    xm = ocl_mem(x, dev, &xo);
    gm = xnm = bm = xm; /* absent operands: any valid buffer, never read */
    if (gamma) gm = ocl_mem(gamma, dev, &go);
    if (p->norm) xnm = ocl_mem(p->norm->dst, dev, &xno);
    if (b) bm = ocl_mem(b, dev, &bo);
    cl_int norm = p->norm ? (p->drop_xn ? 2 : 1) : 0; /* 2: the norm's output goes unwritten */
    cl_int has_gam = gamma != NULL, nseg = p->nseg, bk = ocl_q_bias_kind(b);
    cl_int gated = !p->gated ? 0 : p->tail && p->tail->kind == CT_OP_GEGLU ? 2 : 1; /* the gate's silu or gelu */
    if (p->stage) {
        ct_status s = stage_x(dev, p, xm, xo, K, gm, go, xnm, xno, &xm);
        if (s != CT_OK) return s;
        xo = 0, norm = 0, has_gam = 0;
    }
    cl_int epi = p->tail && !p->gated;
    cl_float eps = p->norm ? (cl_float)p->norm->p.norm.eps : 0.0f;
    cl_mem wm[3], om[3];
    mv1_args a = {.xoff = xo, .gmoff = go, .xnoff = xno, .boff = bo, .K = K, .bstride = bstride, .norm = norm,
                  .has_gam = has_gam, .gated = gated, .nseg = nseg, .bias_kind = bk, .epi = epi, .eps = eps};
    for (int i = 0; i < 3; i++) {
        const ct_op *op = p->lin[i < p->nseg ? i : 0];
        const ct_tensor *w = op->src[1];
        wm[i] = ocl_mem(w, dev, &a.wo[i]);
        om[i] = ocl_mem(op->dst, dev, &a.oo[i]);
        a.N[i] = w->shape[0];
        a.wr[i] = 0;
        if (a.N[i] > 1) ocl_q_byte_stride(w, 0, &a.wr[i]);
        a.f[i] = mv1_fmt(w->dtype);
        if (!wm[i] || !om[i] || !xm || !gm || !xnm || !bm)
            return core_err(CT_ERR_DEVICE_FAULT, "%s: linear operands without a copy here", dev->info.name);
    }
    for (int i = 0; i < p->nseg; i++) total += a.N[i];
    int fam = plan_family(p), R = mv1_rows(dev, p->gated ? a.N[0] : total, fam);
    a.slots = mv1_slots(p, fam, K);
    int RR = a.slots ? 2 * R : R; /* rows a work-group */
    size_t groups = 0;
    for (int i = 0; i < (p->gated ? 1 : p->nseg); i++) groups += (size_t)((a.N[i] + RR - 1) / RR);
    q_span r = p->r, z = p->z;
    if (!epi && !p->gated) r.m = z.m = xm, r.lo = z.lo = 0;
    if (p->gated && !p->tail) return core_err(CT_ERR_INVALID_ARG, "mv1: gated without its swiglu or geglu");
    if (p->gated) r.m = xm, r.lo = 0;
    a.roff = r.lo, a.zoff = z.lo;
    /* x as bytes: not where x was staged (the stage has already normalized it) */
    int q8 = p->stage ? Q8_NONE : q8_wanted(dev, p, fam, (p->gated ? 2 : 1) * total, K, p->gated ? a.N[0] : total);
    cl_mem qm = xm;
    if (q8 == Q8_LAUNCH) {
        ct_status s = q8_x(dev, xm, xo, gm, go, has_gam, K, &qm);
        if (s != CT_OK) return s;
    }
    if (q8) __atomic_fetch_add(&g_q8_total, 1, __ATOMIC_RELAXED);
    cl_mem mems[13] = {xm, gm, xnm, wm[0], om[0], wm[1], om[1], wm[2], om[2], bm, r.m, z.m, qm}, bufs[8];
    /* the packed forms: f32 x (and bytes made inline) _b2 and _b4, bytes of a launch _b4 and _b8 */
    bool qbuf = q8 == Q8_LAUNCH;
    int nb = ocl_pack_bufs(13, mems, qbuf ? 8 : 4, bufs, a.bi), nbuf = qbuf ? (nb > 4 ? 8 : 4) : nb > 2 ? 4 : 2;
    char name[20], label[80]; /* mv1x_r1 .. _r8, packed: mv1x_r2_b2, mv1xq_r2_b8, mv1xi_r2_b4, mv1xh_r2_b4, ... */
    const char *form = mv1_form(fam, q8);
    snprintf(name, sizeof name, nb ? "mv1x%s_r%d_b%d" : "mv1x%s_r%d", form, R, nbuf);
    mv1_label(p, form, R, a.slots, label, sizeof label);
    cl_kernel k;
    ct_status s = ocl_kernel(dev, OCL_MV1_PROGRAM, name, &k);
    size_t ls = MV1_LS, global = groups * ls, local = sizeof(float) * (size_t)(2 * R + 1) * (MV1_LS + 1);
    if (s == CT_OK) s = mv1_set_args(dev, k, name, nb ? bufs : mems, nb ? nbuf : 13, &a, sizeof a, local);
    *packed = nb > 0;
    if (s == CT_OK) __atomic_fetch_add(&g_mv1_total, 1, __ATOMIC_RELAXED);
    return s != CT_OK ? s : ocl_launch(dev, k, label, 1, &global, &ls);
}

ct_status ocl_mv1_linear(ct_device *dev, const ct_op *op)
{
    mv1_plan p = {.lin = {op}, .nseg = 1};
    bool packed;
    return mv1_launch(dev, &p, &packed);
}

/* ---- the planner ---- */

static bool fusable_linear(const ct_device *dev, const ct_op *op)
{
    if (op->kind != CT_OP_LINEAR) return false;
    bool group = mv1_float(op->src[1]->dtype) ? ocl_nn_supports(dev, op) : ocl_quant_supports(dev, op);
    return group && ocl_mv1_ok(dev, op);
}

/* An RMS norm of one f32 row of K into a tensor of its own; its input 16-byte aligned. */
static bool norm_ok(const ct_device *dev, const ct_op *op, q_span *x, q_span *g, q_span *y)
{
    if (op->kind != CT_OP_RMS_NORM || op->n_src < 1 || !span_of(op->src[0], dev, x) || !span_of(op->dst, dev, y))
        return false;
    int64_t K = op->src[0]->shape[op->src[0]->ndim - 1];
    if (ct_tensor_numel(op->src[0]) != K || ct_tensor_numel(op->dst) != K || x->lo % 16) return false;
    const ct_tensor *w = op->n_src > 1 ? op->src[1] : NULL;
    *g = *x;
    if (w && (!span_of(w, dev, g) || ct_tensor_numel(w) != K || g->lo % 16)) return false;
    if (w && overlap(y, g)) return false;
    return same(y, x) || !overlap(y, x);
}

/* The linears from ops[0] that read the same x (the norm's output when there is one): up
 * to 3 without a bias, or a single one. Their outputs overlap nothing read or written. */
static int gather_linears(const ct_device *dev, const ct_op *ops, int n, const q_span *x, const q_span *xin,
                          mv1_plan *p)
{
    int k = 0;
    q_span out[3];
    for (; k < 3 && k < n; k++) {
        q_span xs, o;
        if (!fusable_linear(dev, &ops[k]) || !span_of(ops[k].src[0], dev, &xs) || !same(&xs, x) ||
            !span_of(ops[k].dst, dev, &o))
            break;
        const ct_op *cand[3] = {p->lin[0], p->lin[1], p->lin[2]};
        cand[k] = &ops[k];
        if (k > 0 && (ops[k].src[2] || p->lin[0]->src[2] || ops[k].src[1]->shape[1] != p->lin[0]->src[1]->shape[1] ||
                      mv1_plan_family(cand, k + 1) < 0))
            break; /* one launch, one family of kernels */
        bool bad = false;
        for (int j = 0; j < k; j++) bad |= overlap(&o, &out[j]);
        if (bad) break;
        p->stage |= overlap(&o, x) || (xin && overlap(&o, xin));
        out[k] = o;
        p->lin[k] = &ops[k];
    }
    p->nseg = k;
    return k;
}

/* The tail's output (swiglu's or add's) against what the launch reads. Over the norm's
 * input, or over x without a norm: x must be staged. Over the whole of the norm's output
 * (never read by the launch, which normalizes x itself): the arena gave those bytes to the
 * tail once the linears, xn's last readers, were done, so xn is dead and goes unwritten
 * (op by op, the tail would overwrite it anyway); over a part of it: staged. In decode
 * steps swiglu's output takes the bytes of the gate/up norm this way, every layer. */
static void tail_hazard(mv1_plan *p, const q_span *out, const q_span *x, const q_span *xin)
{
    if ((xin && overlap(out, xin)) || (overlap(out, x) && !(p->norm && covers(out, x)))) p->stage = true;
    else if (overlap(out, x)) p->drop_xn = true;
}

/* gate = lin[0], up = lin[1] (or swapped), SWIGLU or GEGLU (gate, up) into a tensor of its own. */
static bool gated_tail(const ct_device *dev, const ct_op *glu, mv1_plan *p, const q_span *x, const q_span *xin)
{
    q_span a, b, g, u, h;
    bool kind = glu->kind == CT_OP_SWIGLU || glu->kind == CT_OP_GEGLU;
    if (p->nseg < 2 || !kind || glu->n_src != 2 || !span_of(glu->src[0], dev, &a) ||
        !span_of(glu->src[1], dev, &b) || !span_of(glu->dst, dev, &h))
        return false;
    const ct_op *l0 = p->lin[0], *l1 = p->lin[1];
    if (l0->src[1]->dtype != l1->src[1]->dtype || l0->src[1]->shape[0] != l1->src[1]->shape[0]) return false;
    span_of(l0->dst, dev, &g);
    span_of(l1->dst, dev, &u);
    if (same(&a, &u) && same(&b, &g)) { /* swiglu(up, gate) order of the linears */
        p->lin[0] = l1, p->lin[1] = l0;
        q_span t = g;
        g = u, u = t;
    } else if (!same(&a, &g) || !same(&b, &u)) {
        return false;
    }
    if (ct_tensor_numel(glu->dst) != l0->src[1]->shape[0] || overlap(&h, &g) || overlap(&h, &u)) return false;
    tail_hazard(p, &h, x, xin);
    p->nseg = 2, p->gated = true, p->tail = glu, p->z = h;
    return true;
}

/* ADD(y, r) or ADD(r, y) after a single linear: z = y + r into z == r or apart from all. */
static bool add_tail(const ct_device *dev, const ct_op *add, mv1_plan *p, const q_span *x, const q_span *xin)
{
    q_span a, b, y, z;
    if (p->nseg != 1 || add->kind != CT_OP_ADD || add->n_src != 2 || !span_of(add->src[0], dev, &a) ||
        !span_of(add->src[1], dev, &b) || !span_of(add->dst, dev, &z) || !span_of(p->lin[0]->dst, dev, &y))
        return false;
    int64_t N = p->lin[0]->src[1]->shape[0];
    if (ct_tensor_numel(add->dst) != N || ct_tensor_numel(add->src[0]) != N || ct_tensor_numel(add->src[1]) != N)
        return false;
    const q_span *r = same(&a, &y) ? &b : same(&b, &y) ? &a : NULL;
    if (!r || overlap(r, &y) || overlap(&z, &y) || (overlap(&z, r) && !same(&z, r))) return false;
    /* r is read by other work-groups only through x, which staging protects */
    tail_hazard(p, &z, x, xin);
    p->tail = add, p->r = *r, p->z = z;
    return true;
}

/* ---- norm + q, k, v + RoPE of q and k + both cache rows (mv1r_r* in mv1.cl) ---- */

/* mv1r_r*'s scalars (mv1r_args in mv1.cl: the same fields in the same order). */
typedef struct mv1r_args {
    cl_ulong xoff, gmoff, xnoff, wo[3], oo[3], yqo, yko, cko, cvo, po, io;
    cl_long K, wr[3], N[3], D, ckC, cks0, cks1, ckR, cvC, cvs0, cvs1, cvR, is0;
    cl_long ex[10];
    cl_int has_gam, norm, f[3], neox, p64, i64, ckdt, cvdt;
    cl_int bi[15]; /* mv1r_r*_b8's buffer of each operand */
    cl_float eps, base_hi, base_lo, scale_hi, scale_lo;
} mv1r_args;
_Static_assert(sizeof(mv1r_args) == 456, "mv1r_args: the kernel's layout has 456 bytes");

/* The bytes of a tensor of any dtype and strides (none negative), for overlap tests. */
static bool any_span(const ct_tensor *t, const ct_device *dev, q_span *sp)
{
    if (!t || ct_dtype_is_quantized(t->dtype) || !(sp->m = ocl_mem(t, dev, &sp->lo))) return false;
    cl_ulong last = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] <= 0 || t->stride[d] < 0) return false;
        last += (cl_ulong)(t->shape[d] - 1) * (cl_ulong)t->stride[d];
    }
    sp->hi = sp->lo + (last + 1) * ct_dtype_block_bytes(t->dtype);
    return true;
}

static bool same_rope(const ct_rope_params *a, const ct_rope_params *b)
{
    return a->n_dims == b->n_dims && a->freq_base == b->freq_base && a->freq_scale == b->freq_scale &&
           a->mode == b->mode;
}

/* ROPE of one decode row [.., 1, H, D] of f32 y, rotating all D dims, into an f32
 * tensor of its own layout; positions i32/i64. */
static bool rope_ok(const ct_device *dev, const ct_op *op, const q_span *y, q_span *out, int64_t *D)
{
    q_span in;
    const ct_tensor *x = op->src[0];
    if (op->kind != CT_OP_ROPE || op->n_src < 2 || !op->src[1] || !ocl_nn_supports(dev, op) || x->ndim < 3 ||
        !span_of(x, dev, &in) || !same(&in, y) || !span_of(op->dst, dev, out) || ct_tensor_numel(op->dst) != ct_tensor_numel(x))
        return false;
    *D = x->shape[x->ndim - 1];
    if (x->shape[x->ndim - 3] != 1) return false; /* one position */
    const ct_tensor *pos = op->src[1];
    if ((pos->dtype != CT_I32 && pos->dtype != CT_I64) || ct_tensor_numel(pos) < 1) return false;
    const ct_rope_params *rp = &op->p.rope;
    return rp->n_dims == *D && *D % 2 == 0 && (rp->mode == CT_ROPE_NORMAL || rp->mode == CT_ROPE_NEOX);
}

/* SET_ROWS of rows of C from the f32 tensor at `src` (contiguous, n elements) into a 2-D
 * f32 or f16 table; indices i32/i64. */
static bool rows_ok(const ct_device *dev, const ct_op *op, const q_span *src, int64_t n, q_span *dst, q_span *idx)
{
    q_span in;
    if (op->kind != CT_OP_SET_ROWS || op->n_src < 2 || !ocl_nn_supports(dev, op) || !span_of(op->src[0], dev, &in) ||
        in.m != src->m || in.lo != src->lo || ct_tensor_numel(op->src[0]) != n || op->src[0]->ndim != 2 ||
        op->dst->ndim != 2 || (op->dst->dtype != CT_F32 && op->dst->dtype != CT_F16) ||
        !any_span(op->dst, dev, dst) || !any_span(op->src[1], dev, idx))
        return false;
    const ct_tensor *ix = op->src[1];
    return (ix->dtype == CT_I32 || ix->dtype == CT_I64) && ix->ndim == 1 && ix->shape[0] == op->src[0]->shape[0] &&
           op->dst->shape[1] == op->src[0]->shape[1];
}

/* Outputs of the group in op order (xn, o0, o1, o2, yq, yk, ck, cv): the earlier of two
 * overlapping outputs skips the later ones' bytes (ex, relative to its own start), which
 * must form one range. Each op's intra-group source must not
 * have been overwritten by an output written between its producer and the op. */
enum { QR_XN, QR_O0, QR_O1, QR_O2, QR_YQ, QR_YK, QR_CK, QR_CV, QR_N };

static bool qkv_rope_hazards(const q_span *w, bool has_xn, const q_span *reads, int n_reads, cl_long *ex)
{ /* ex: pairs of xn, o0, o1, o2, yq, as mv1r_args.ex */
    static const int producer[] = {QR_XN, QR_XN, QR_XN, QR_O0, QR_O1, QR_YK, QR_O2};
    static const int reader[] = {QR_O0, QR_O1, QR_O2, QR_YQ, QR_YK, QR_CK, QR_CV};
    for (int i = 0; i < QR_N; i++) {
        if (i == QR_XN && !has_xn) continue;
        for (int j = 0; j < n_reads; j++) /* x, gam, pos, index: read while the outputs are written */
            if (overlap(&w[i], &reads[j])) return false;
        /* the later outputs over w[i] must form one range (as yq and yk over xn in a
         * decode step): sorted by start, each begins where the union so far ends or before */
        q_span o[QR_N];
        int no = 0;
        for (int j = i + 1; j < QR_N; j++) {
            if (!overlap(&w[i], &w[j])) continue;
            if (i >= QR_YK || j >= QR_CK) return false; /* yk and the caches: exclusive */
            int at = no++;
            for (; at > 0 && o[at - 1].lo > w[j].lo; at--) o[at] = o[at - 1];
            o[at] = w[j];
        }
        if (!no) continue;
        q_span u = o[0];
        for (int j = 1; j < no; j++) {
            if (o[j].lo > u.hi) return false;
            if (o[j].hi > u.hi) u.hi = o[j].hi;
        }
        ex[2 * i] = (cl_long)u.lo - (cl_long)w[i].lo;
        ex[2 * i + 1] = (cl_long)u.hi - (cl_long)w[i].lo;
    }
    for (int r = 0; r < 7; r++) {
        if (producer[r] == QR_XN && !has_xn) continue; /* without a norm x is external: checked above */
        for (int j = producer[r] + 1; j < reader[r]; j++)
            if (overlap(&w[producer[r]], &w[j])) return false;
    }
    return true;
}

/* After a norm (optional) and the three linears in p: ROPE(q), ROPE(k), SET_ROWS(k cache,
 * rotated k), SET_ROWS(v cache, v), as a decode layer's forward issues them. Launches the
 * eight ops as one and returns 4 (the ops taken after the linears), or 0. On the H100
 * through NVIDIA's OpenCL (TinyLlama Q4_K_M, 2026-11-24, one call) a token went from 157
 * launches to 113 and tg128 from 475 / 504 to 571 / 565 t/s: the host's enqueues, not the
 * kernels, set the rate there (bench/ocl_enqueue.c). */
static int qkv_rope(ct_device *dev, const mv1_plan *p, const ct_op *ops, int n)
{
    if (n < 4 || p->nseg != 3 || p->stage || p->lin[0]->src[2]) return 0;
    q_span w[QR_N] = {{0}}, rd[4], ci, vi;
    int64_t Dq, Dk, N[3];
    for (int i = 0; i < 3; i++) {
        span_of(p->lin[i]->dst, dev, &w[QR_O0 + i]);
        N[i] = p->lin[i]->src[1]->shape[0];
    }
    if (!rope_ok(dev, &ops[0], &w[QR_O0], &w[QR_YQ], &Dq) || !rope_ok(dev, &ops[1], &w[QR_O1], &w[QR_YK], &Dk) ||
        Dq != Dk || !same_rope(&ops[0].p.rope, &ops[1].p.rope))
        return 0;
    q_span pq, pk;
    if (!any_span(ops[0].src[1], dev, &pq) || !any_span(ops[1].src[1], dev, &pk) || !same(&pq, &pk) ||
        ops[0].src[1]->dtype != ops[1].src[1]->dtype)
        return 0;
    if (!rows_ok(dev, &ops[2], &w[QR_YK], N[1], &w[QR_CK], &ci) || !rows_ok(dev, &ops[3], &w[QR_O2], N[2], &w[QR_CV], &vi) ||
        !same(&ci, &vi) || ops[2].src[1]->dtype != ops[3].src[1]->dtype ||
        ops[2].src[1]->stride[0] != ops[3].src[1]->stride[0])
        return 0;
    /* a work-group holds whole rotation pairs: 2 rows where mv1_rows would give 1 for want
     * of rows (q, k and v of a small model on a large GPU), none where the switch forces 1 */
    int fam = plan_family(p), R = mv1_rows(dev, N[0] + N[1] + N[2], fam);
    const char *forced = getenv("CTORCH_OPENCL_MV1_ROWS");
    if (R == 1 && !(forced && !strcmp(forced, "1"))) R = 2;
    if (R % 2 || Dq % R || N[0] % R || N[1] % R) return 0;
    const ct_tensor *x = p->norm ? p->norm->src[0] : p->lin[0]->src[0];
    const ct_tensor *gamma = p->norm && p->norm->n_src > 1 ? p->norm->src[1] : NULL;
    int nr = 0;
    if (!span_of(x, dev, &rd[nr++])) return 0;
    if (gamma && !span_of(gamma, dev, &rd[nr++])) return 0;
    rd[nr++] = pq, rd[nr++] = ci;
    if (p->norm) span_of(p->norm->dst, dev, &w[QR_XN]);
    mv1r_args a = {0};
    if (!qkv_rope_hazards(w, p->norm != NULL, rd, nr, a.ex)) return 0;
    const ct_tensor *ck = ops[2].dst, *cv = ops[3].dst, *ix = ops[2].src[1];
    cl_mem xm = ocl_mem(x, dev, &a.xoff), gm = xm, xnm = xm, pm, im, yqm, ykm, ckm, cvm, wm[3], om[3];
    if (gamma) gm = ocl_mem(gamma, dev, &a.gmoff);
    if (p->norm) xnm = ocl_mem(p->norm->dst, dev, &a.xnoff);
    pm = ocl_mem(ops[0].src[1], dev, &a.po);
    im = ocl_mem(ix, dev, &a.io);
    yqm = ocl_mem(ops[0].dst, dev, &a.yqo);
    ykm = ocl_mem(ops[1].dst, dev, &a.yko);
    ckm = ocl_mem(ck, dev, &a.cko);
    cvm = ocl_mem(cv, dev, &a.cvo);
    for (int i = 0; i < 3; i++) {
        const ct_tensor *wt = p->lin[i]->src[1];
        wm[i] = ocl_mem(wt, dev, &a.wo[i]);
        om[i] = ocl_mem(p->lin[i]->dst, dev, &a.oo[i]);
        a.N[i] = N[i];
        if (N[i] > 1) ocl_q_byte_stride(wt, 0, &a.wr[i]);
        a.f[i] = mv1_fmt(wt->dtype);
        if (!wm[i] || !om[i]) return 0;
    }
    if (!xm || !gm || !xnm || !pm || !im || !yqm || !ykm || !ckm || !cvm) return 0;
    a.K = p->lin[0]->src[1]->shape[1], a.D = Dq;
    a.ckC = ck->shape[1], a.cks0 = ck->stride[0], a.cks1 = ck->stride[1], a.ckR = ck->shape[0];
    a.cvC = cv->shape[1], a.cvs0 = cv->stride[0], a.cvs1 = cv->stride[1], a.cvR = cv->shape[0];
    a.is0 = ix->stride[0];
    a.has_gam = gamma != NULL, a.norm = p->norm ? 1 : 0;
    a.neox = ops[0].p.rope.mode == CT_ROPE_NEOX;
    a.p64 = ops[0].src[1]->dtype == CT_I64, a.i64 = ix->dtype == CT_I64;
    a.ckdt = ck->dtype == CT_F16, a.cvdt = cv->dtype == CT_F16;
    a.eps = p->norm ? (cl_float)p->norm->p.norm.eps : 0.0f;
    const ct_rope_params *rp = &ops[0].p.rope;
    a.base_hi = (cl_float)rp->freq_base, a.base_lo = (cl_float)(rp->freq_base - (double)a.base_hi);
    a.scale_hi = (cl_float)rp->freq_scale, a.scale_lo = (cl_float)(rp->freq_scale - (double)a.scale_hi);
    size_t groups = (size_t)(N[0] / R + N[1] / R + (N[2] + R - 1) / R);
    size_t ls = MV1_LS, global = groups * ls, local = sizeof(float) * (size_t)(R + 1) * (MV1_LS + 1);
    cl_mem mems[15] = {xm, gm, xnm, wm[0], om[0], wm[1], om[1], wm[2], om[2], pm, im, yqm, ykm, ckm, cvm}, b[8];
    int nb = ocl_pack_bufs(15, mems, 8, b, a.bi);
    char name[16], label[80];
    const char *form = mv1_form(fam, Q8_NONE);
    snprintf(name, sizeof name, nb ? "mv1r%s_r%d_b8" : "mv1r%s_r%d", form, R);
    snprintf(label, sizeof label, "mv1r%s_r%d %snorm q,k,v %lldx%lld + rope + kv rows", form, R, p->norm ? "" : "no ",
             (long long)(N[0] + N[1] + N[2]), (long long)a.K);
    cl_kernel k;
    ct_status s = ocl_kernel(dev, OCL_MV1_PROGRAM, name, &k);
    if (s == CT_OK) s = mv1_set_args(dev, k, name, nb ? b : mems, nb ? 8 : 15, &a, sizeof a, local);
    if (s == CT_OK && nb) __atomic_fetch_add(&g_packed_total, 1, __ATOMIC_RELAXED);
    if (s == CT_OK) s = ocl_launch(dev, k, label, 1, &global, &ls);
    return s == CT_OK ? 4 : 0;
}

static bool g_no_fuse;
static int g_fused_total;

static bool g_no_rope;

void ocl_quant_test_fuse(bool on) { g_no_fuse = !on; }
void ocl_quant_test_fuse_rope(bool on) { g_no_rope = !on; }
int ocl_quant_fused_total(void) { return __atomic_load_n(&g_fused_total, __ATOMIC_RELAXED); }
int ocl_quant_packed_total(void) { return __atomic_load_n(&g_packed_total, __ATOMIC_RELAXED); }
void ocl_quant_test_pack(bool on) { ocl_test_pack(on); }

int ocl_quant_fuse(ct_device *dev, const ct_op *ops, int n)
{
    if (g_no_fuse || !config_current()->fuse || n < 2) return 0; /* CTORCH_FUSE=0: op by op */
    mv1_plan p = {0};
    q_span xin, gam, xn, x;
    int i = 0;
    if (norm_ok(dev, &ops[0], &xin, &gam, &xn)) {
        p.norm = &ops[0];
        x = xn;
        i = 1;
    } else if (!span_of(ops[0].src[0], dev, &x)) {
        return 0;
    }
    const q_span *in = p.norm ? &xin : NULL;
    p.stage = p.norm && same(&xin, &xn); /* a norm in place: its input is gone once it is written */
    int k = gather_linears(dev, ops + i, n - i, &x, in, &p);
    if (k == 0) return 0;
    int used = i + k;
    int roped = k == 3 && !g_no_rope ? qkv_rope(dev, &p, ops + used, n - used) : 0;
    if (roped) {
        __atomic_fetch_add(&g_fused_total, used + roped, __ATOMIC_RELAXED);
        return used + roped;
    }
    if (used < n && k >= 2 && gated_tail(dev, &ops[i + 2], &p, &x, in) && p.nseg == 2 && k == 2) {
        used = i + 3;
    } else {
        p.gated = false;
        if (k == 1 && used < n && add_tail(dev, &ops[used], &p, &x, in)) used++;
    }
    if (used < 2) return 0; /* a lone linear: its own run */
    int64_t K = p.lin[0]->src[1]->shape[1];
    if (p.stage && (!ocl_capturing(dev) || ocl_info(dev)->max_wg < MV1_STAGE_LS || K > 32 * MV1_STAGE_LS)) return 0;
    bool packed = false;
    if (mv1_launch(dev, &p, &packed) != CT_OK) return 0;
    __atomic_fetch_add(&g_fused_total, used, __ATOMIC_RELAXED);
    if (packed) __atomic_fetch_add(&g_packed_total, 1, __ATOMIC_RELAXED);
    return used;
}
