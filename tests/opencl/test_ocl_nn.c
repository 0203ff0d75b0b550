/* The OpenCL nn group against the CPU backend (tests/support/devcheck): each op forced onto
 * opencl:0 and onto the CPU from the same random inputs (fixed seeds), contiguous and strided
 * views, f32 and f16 (bf16 where the op keeps the input dtype), odd sizes. Fresh device
 * buffers are poisoned with NaN (CTORCH_OPENCL_POISON=1), so an output element a kernel
 * forgets to write fails as a NaN mismatch.
 *
 * Tolerances (NMSE, sum (a-b)^2 / sum b^2):
 *   TOL_F32 1e-10  f32 results: both sides round each product and sum to f32 but in another
 *                  order (work-group trees vs SIMD lanes); for sums of <= a few thousand terms
 *                  the relative error stays below ~1e-6, an NMSE below 1e-12, so 1e-10 leaves
 *                  room without hiding a wrong index (which gives NMSE ~ 1).
 *   TOL_ATT 1e-9   attention: exp() of the device and of libm differ by a few ulp, and the
 *                  online softmax rescales in another order (segments merged at the end).
 *   TOL_F16 1e-6   f16 outputs: the two f32 results round to the nearest f16 (2^-11 relative);
 *                  they differ only where f32 noise crosses a rounding boundary (1 ulp, rare).
 *   TOL_BF16 1e-4  bf16 outputs: the same with a 2^-8 ulp. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/nn_internal.h"
#endif

#define TOL_F32 1e-10
#define TOL_ATT 1e-9
#define TOL_F16 1e-6
#define TOL_BF16 1e-4

static char dev_buf[32];
static const char *DEV;
static th_rng rng = {0x5eed0c1ull};

static bool have_device(void);

/* The backend's switch for CLBlast (src/backends/opencl/nn_clblast.c): f32 products are
 * checked both ways. Without the backend no test here runs. */
static void set_clblast(bool on)
{
#ifdef CTORCH_HAVE_OPENCL
    nn_clblast_enable(on);
#else
    (void)on;
#endif
}

/* The GPU variants of kernels that have a CPU-device one (decode's matvec), on any device. */
static void set_gpu_kernels(bool on)
{
#ifdef CTORCH_HAVE_OPENCL
    nn_force_gpu_kernels(on);
#else
    (void)on;
#endif
}

static double tol_for(ct_dtype t) { return t == CT_F16 ? TOL_F16 : t == CT_BF16 ? TOL_BF16 : TOL_F32; }

/* A random input of logical shape `shape`; strided: stored with its last two dims swapped,
 * so the view the op sees (sw() below) has a non-unit inner stride. */
static ct_tensor *gen(int nd, const int64_t *shape, ct_dtype dt, bool strided, double lo, double hi)
{
    int64_t s[8];
    memcpy(s, shape, sizeof(int64_t) * (size_t)nd);
    if (strided && nd >= 2) {
        s[nd - 1] = shape[nd - 2];
        s[nd - 2] = shape[nd - 1];
    }
    return th_random(&rng, nd, s, dt, lo, hi);
}

/* The view of a gen() input (tmp keeps it alive). */
static const ct_tensor *sw(const ct_tensor *t, bool strided, ct_tensor **tmp)
{
    int nd = ct_tensor_ndim(t);
    if (!strided || nd < 2) return t;
    if (ct_transpose(t, nd - 2, nd - 1, tmp) != CT_OK) return t;
    return *tmp;
}

static ct_tensor *ids_tensor(int nd, const int64_t *shape, ct_dtype dt, int64_t lo, int64_t hi)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++) n *= shape[i];
    int64_t *v = malloc(sizeof(int64_t) * (size_t)n);
    int32_t *v32 = malloc(sizeof(int32_t) * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        v[i] = lo + (int64_t)th_uniform(&rng, 0, (double)(hi - lo));
        if (v[i] >= hi) v[i] = hi - 1;
        v32[i] = (int32_t)v[i];
    }
    ct_tensor *t = NULL;
    CHECK_OK(ct_tensor_from_data(nd, shape, dt, dt == CT_I64 ? (const void *)v : (const void *)v32, &t));
    free(v);
    free(v32);
    return t;
}

/* ---- softmax ---- */

typedef struct sm_ctx {
    int dim;
    bool log, strided;
} sm_ctx;

static ct_status sm_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const sm_ctx *c = vctx;
    ct_tensor *tmp = NULL;
    (void)n;
    const ct_tensor *x = sw(in[0], c->strided, &tmp);
    ct_status s = c->log ? ct_log_softmax(x, c->dim, out) : ct_softmax(x, c->dim, out);
    ct_tensor_free(tmp);
    return s;
}

static void test_softmax(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    int64_t shape[3] = {5, 37, 300};
    for (int d = 0; d < 3; d++)
        for (int dim = 0; dim < 3; dim++)
            for (int st = 0; st < 2; st++)
                for (int lg = 0; lg < 2; lg++) {
                    ct_tensor *x = gen(3, shape, dts[d], st, -8, 8);
                    sm_ctx c = {dim, lg, st};
                    char what[96];
                    snprintf(what, sizeof what, "%s %s dim %d %s", lg ? "log_softmax" : "softmax",
                             ct_dtype_name(dts[d]), dim, st ? "strided" : "contiguous");
                    devcheck_op(DEV, what, sm_fn, &x, 1, &c, tol_for(dts[d]));
                    ct_tensor_free(x);
                }
}

/* ---- rms_norm / layer_norm ---- */

typedef struct norm_ctx {
    bool layer, strided, weight, bias;
    int norm_ndim;
} norm_ctx;

static ct_status norm_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const norm_ctx *c = vctx;
    ct_tensor *tmp = NULL;
    (void)n;
    const ct_tensor *x = sw(in[0], c->strided, &tmp);
    ct_status s = c->layer ? ct_layer_norm(x, c->norm_ndim, c->weight ? in[1] : NULL, c->bias ? in[2] : NULL, 1e-5, out)
                           : ct_rms_norm(x, c->weight ? in[1] : NULL, 1e-6, out);
    ct_tensor_free(tmp);
    return s;
}

static void test_norms(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    int64_t shape[3] = {3, 7, 257};
    for (int d = 0; d < 3; d++)
        for (int layer = 0; layer < 2; layer++)
            for (int st = 0; st < 2; st++)
                for (int wb = 0; wb < 2; wb++) {
                    int k = layer && !st ? 2 : 1; /* layer_norm over two dims, dense */
                    norm_ctx c = {layer, st, wb, wb && layer, k};
                    ct_tensor *in[3] = {gen(3, shape, dts[d], st, -3, 3), NULL, NULL};
                    in[1] = th_random(&rng, k, shape + 3 - k, d == 1 ? CT_F16 : CT_F32, 0.5, 1.5);
                    if (!layer && st) { /* a strided weight: every other element of a longer one */
                        ct_tensor *full = th_random(&rng, 1, (int64_t[]){2 * shape[2]}, CT_F32, 0.5, 1.5);
                        ct_tensor_free(in[1]);
                        CHECK_OK(ct_slice(full, 0, 0, 2 * shape[2], 2, &in[1]));
                        ct_tensor_free(full);
                    }
                    in[2] = th_random(&rng, k, shape + 3 - k, CT_F32, -1, 1);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s %s%s", layer ? "layer_norm" : "rms_norm", ct_dtype_name(dts[d]),
                             st ? "strided" : "contiguous", wb ? " weighted" : "");
                    devcheck_op(DEV, what, norm_fn, in, 3, &c, tol_for(dts[d]));
                    for (int i = 0; i < 3; i++) ct_tensor_free(in[i]);
                }
}

/* ---- rope ---- */

typedef struct rope_ctx {
    ct_rope_params p;
    bool strided;
} rope_ctx;

static ct_status rope_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const rope_ctx *c = vctx;
    ct_tensor *tmp = NULL;
    (void)n;
    const ct_tensor *x = in[0];
    if (c->strided) { /* [T, H, D] stored as [H, T, D]: the LLM's head-major views */
        if (ct_transpose(in[0], 0, 1, &tmp) != CT_OK) return CT_ERR_INVALID_ARG;
        x = tmp;
    }
    ct_status s = ct_rope(x, in[1], &c->p, out);
    ct_tensor_free(tmp);
    return s;
}

static void test_rope(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16};
    for (int d = 0; d < 2; d++)
        for (int mode = 0; mode < 2; mode++)
            for (int st = 0; st < 2; st++)
                for (int partial = 0; partial < 2; partial++) {
                    int64_t T = 11, H = 3, D = 64;
                    int64_t xs[3] = {st ? H : T, st ? T : H, D}, ps[1] = {T};
                    ct_tensor *in[2] = {th_random(&rng, 3, xs, dts[d], -2, 2),
                                        ids_tensor(1, ps, partial ? CT_I32 : CT_I64, 0, 5000)};
                    rope_ctx c = {{.n_dims = partial ? 32 : 64, .freq_base = partial ? 1e6 : 10000.0,
                                   .freq_scale = partial ? 0.25 : 1.0, .mode = mode ? CT_ROPE_NEOX : CT_ROPE_NORMAL},
                                  st};
                    char what[96];
                    snprintf(what, sizeof what, "rope %s %s %s%s", ct_dtype_name(dts[d]), mode ? "neox" : "normal",
                             st ? "strided" : "contiguous", partial ? " partial" : "");
                    devcheck_op(DEV, what, rope_fn, in, 2, &c, tol_for(dts[d]));
                    ct_tensor_free(in[0]);
                    ct_tensor_free(in[1]);
                }
}

/* ---- embedding, set_rows ---- */

static ct_status emb_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    ct_tensor *tmp = NULL;
    (void)n;
    const ct_tensor *w = sw(in[0], *(const bool *)vctx, &tmp);
    ct_status s = ct_embedding(w, in[1], out);
    ct_tensor_free(tmp);
    return s;
}

static void test_embedding(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    for (int d = 0; d < 3; d++)
        for (int st = 0; st < 2; st++) {
            int64_t ws[2] = {97, 33}, is[2] = {3, 5};
            ct_tensor *in[2] = {gen(2, ws, dts[d], st, -1, 1), ids_tensor(2, is, st ? CT_I32 : CT_I64, 0, 97)};
            bool strided = st;
            char what[64];
            snprintf(what, sizeof what, "embedding %s %s", ct_dtype_name(dts[d]), st ? "strided" : "contiguous");
            devcheck_op(DEV, what, emb_fn, in, 2, &strided, TOL_F32);
            ct_tensor_free(in[0]);
            ct_tensor_free(in[1]);
        }
}

typedef struct rows_ctx {
    ct_dtype dst_dt;
    bool strided;
} rows_ctx;

/* dst is a fresh copy of in[0] in dst_dt, narrowed to columns 2.. (a KV-cache-like view),
 * then rows of in[1] land at in[2]; the whole copy is the output (rows not written too). */
static ct_status rows_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const rows_ctx *c = vctx;
    ct_tensor *base = NULL, *dst = NULL, *tmp = NULL;
    (void)n;
    ct_status s = ct_cast(in[0], c->dst_dt, &base);
    if (s == CT_OK) s = ct_narrow(base, 1, 2, ct_tensor_shape(base)[1] - 2, &dst);
    const ct_tensor *src = sw(in[1], c->strided, &tmp);
    if (s == CT_OK) s = ct_set_rows(dst, src, in[2]);
    ct_tensor_free(dst);
    ct_tensor_free(tmp);
    if (s != CT_OK) {
        ct_tensor_free(base);
        return s;
    }
    *out = base;
    return CT_OK;
}

static void test_set_rows(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16};
    for (int d = 0; d < 2; d++)
        for (int st = 0; st < 2; st++) {
            int64_t R = 40, C = 19, n = 5;
            int64_t bs[2] = {R, C + 2}, ss[2] = {n, C}, is[1] = {n};
            int64_t rows[5] = {7, 0, 39, 12, 13};
            ct_tensor *in[3] = {th_random(&rng, 2, bs, CT_F32, -1, 1), gen(2, ss, CT_F32, st, -5, 5), NULL};
            CHECK_OK(ct_tensor_from_data(1, is, CT_I64, rows, &in[2]));
            rows_ctx c = {dts[d], st};
            char what[64];
            snprintf(what, sizeof what, "set_rows into %s %s", ct_dtype_name(dts[d]), st ? "strided" : "contiguous");
            devcheck_op(DEV, what, rows_fn, in, 3, &c, tol_for(dts[d]));
            for (int i = 0; i < 3; i++) ct_tensor_free(in[i]);
        }
}

/* ---- matmul / linear ---- */

typedef struct mm_ctx {
    bool strided_a, strided_b;
} mm_ctx;

static ct_status mm_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const mm_ctx *c = vctx;
    ct_tensor *t0 = NULL, *t1 = NULL;
    (void)n;
    ct_status s = ct_matmul(sw(in[0], c->strided_a, &t0), sw(in[1], c->strided_b, &t1), out);
    ct_tensor_free(t0);
    ct_tensor_free(t1);
    return s;
}

static void check_matmul(int na, const int64_t *as, int nb, const int64_t *bs, ct_dtype dt, bool sa, bool sb)
{
    ct_tensor *in[2] = {gen(na, as, dt, sa, -1, 1), gen(nb, bs, dt, sb, -1, 1)};
    mm_ctx c = {sa, sb};
    char what[128];
    snprintf(what, sizeof what, "matmul %s %dd [..., %lld, %lld]%s @ %dd [..., %lld, %lld]%s", ct_dtype_name(dt), na,
             (long long)as[na - 2], (long long)as[na - 1], sa ? " strided" : "", nb, (long long)bs[nb - 2],
             (long long)bs[nb - 1], sb ? " strided" : "");
    devcheck_op(DEV, what, mm_fn, in, 2, &c, tol_for(dt));
    ct_tensor_free(in[0]);
    ct_tensor_free(in[1]);
}

static void test_matmul(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    for (int d = 0; d < 3; d++)
        for (int st = 0; st < 4; st++) {
            bool sa = st & 1, sb = st & 2;
            check_matmul(3, (int64_t[]){3, 37, 45}, 2, (int64_t[]){45, 29}, dts[d], sa, sb);       /* shared b */
            check_matmul(3, (int64_t[]){2, 70, 33}, 3, (int64_t[]){2, 33, 65}, dts[d], sa, sb);    /* batched */
            check_matmul(4, (int64_t[]){2, 1, 5, 9}, 3, (int64_t[]){3, 9, 7}, dts[d], sa, sb);     /* broadcast */
            check_matmul(2, (int64_t[]){1, 300}, 2, (int64_t[]){300, 41}, dts[d], sa, sb);         /* one row */
        }
}

typedef struct lin_ctx {
    bool strided_x, bias;
} lin_ctx;

static ct_status lin_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const lin_ctx *c = vctx;
    ct_tensor *t0 = NULL;
    (void)n;
    ct_status s = ct_linear(sw(in[0], c->strided_x, &t0), in[1], c->bias ? in[2] : NULL, out);
    ct_tensor_free(t0);
    return s;
}

static void test_linear(void)
{
    if (!have_device()) return;
    ct_dtype wdts[] = {CT_F32, CT_F16, CT_BF16};
    int64_t rows[] = {1, 5, 70};
    for (int d = 0; d < 3; d++)
        for (int r = 0; r < 3; r++)
            for (int st = 0; st < 2; st++) {
                int64_t K = 300, N = 77;
                /* strided x: [rows, K] read through a transposed [K, rows] */
                int64_t xs[2] = {rows[r], K}, ws[2] = {N, K}, bs[1] = {N};
                ct_tensor *in[3] = {gen(2, xs, CT_F32, st, -1, 1), th_random(&rng, 2, ws, wdts[d], -1, 1),
                                    th_random(&rng, 1, bs, CT_F32, -1, 1)};
                lin_ctx c = {st, st == 1}; /* contiguous without bias: the CLBlast path */
                char what[96];
                snprintf(what, sizeof what, "linear %lld rows, %s weight, %s x%s", (long long)rows[r],
                         ct_dtype_name(wdts[d]), st ? "strided" : "contiguous", c.bias ? ", bias" : "");
                /* the CPU reference rounds x to bf16 for a bf16 weight past 8 rows (its AVX512-BF16
                 * prompt dots, as llama.cpp does; 2^-8 relative per element): TOL_BF16's bound */
                double tol = wdts[d] == CT_BF16 && rows[r] > 8 ? TOL_BF16 : TOL_F32;
                devcheck_op(DEV, what, lin_fn, in, 3, &c, tol);
                for (int i = 0; i < 3; i++) ct_tensor_free(in[i]);
            }
}

/* ---- sdpa ---- */

typedef struct att_ctx {
    bool causal, mask, length, kv_strided;
    int window;
    int64_t L;
} att_ctx;

/* in: q [B, Hq, Tq, D]; k, v [B, Hkv, Tk, D] (or, when kv_strided, all three stored with
 * dims 1 and 2 swapped and seen through a transpose); mask [Tq, Tk] broadcast. */
static ct_status att_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const att_ctx *c = vctx;
    ct_tensor *kt = NULL, *vt = NULL, *len = NULL;
    (void)n;
    ct_tensor *qt = NULL;
    const ct_tensor *q = in[0], *k = in[1], *v = in[2];
    ct_status s = CT_OK;
    if (c->kv_strided) { /* q too: the LLM's permuted [1, Hq, T, D] view of [T, Hq, D] */
        s = ct_transpose(in[1], 1, 2, &kt);
        if (s == CT_OK) s = ct_transpose(in[2], 1, 2, &vt);
        if (s == CT_OK) s = ct_transpose(in[0], 1, 2, &qt);
        q = qt, k = kt, v = vt;
    }
    if (s == CT_OK && c->length) s = ct_tensor_from_data(1, (int64_t[]){1}, CT_I32, (int32_t[]){(int32_t)c->L}, &len);
    ct_sdpa_params p = {.causal = c->causal, .window = c->window, .length = len};
    if (s == CT_OK) s = ct_sdpa(q, k, v, c->mask ? in[3] : NULL, &p, out);
    ct_tensor_free(qt);
    ct_tensor_free(kt);
    ct_tensor_free(vt);
    ct_tensor_free(len);
    return s;
}

static void check_sdpa(int64_t Hq, int64_t Hkv, int64_t Tq, int64_t Tk, int64_t D, ct_dtype kvdt, att_ctx c)
{
    int64_t B = 2, qs[4] = {B, c.kv_strided ? Tq : Hq, c.kv_strided ? Hq : Tq, D}, kvs[4] = {B, c.kv_strided ? Tk : Hkv, c.kv_strided ? Hkv : Tk, D};
    int64_t ms[2] = {Tq, Tk};
    ct_tensor *in[4] = {th_random(&rng, 4, qs, CT_F32, -1, 1), th_random(&rng, 4, kvs, kvdt, -1, 1),
                        th_random(&rng, 4, kvs, kvdt, -1, 1), th_random(&rng, 2, ms, CT_F32, -2, 0)};
    char what[160];
    snprintf(what, sizeof what, "sdpa Hq %lld Hkv %lld Tq %lld Tk %lld D %lld %s%s%s%s%s window %d", (long long)Hq,
             (long long)Hkv, (long long)Tq, (long long)Tk, (long long)D, ct_dtype_name(kvdt), c.causal ? " causal" : "",
             c.mask ? " mask" : "", c.length ? " length" : "", c.kv_strided ? " strided kv" : "", c.window);
    devcheck_op(DEV, what, att_fn, in, 4, &c, TOL_ATT);
    for (int i = 0; i < 4; i++) ct_tensor_free(in[i]);
}

static void test_sdpa(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16};
    for (int d = 0; d < 2; d++)
        for (int st = 0; st < 2; st++) {
            /* prefill: causal, windowed, masked, GQA, odd sizes */
            check_sdpa(4, 2, 37, 37, 32, dts[d], (att_ctx){.causal = true, .kv_strided = st});
            check_sdpa(4, 4, 19, 45, 24, dts[d], (att_ctx){.mask = true, .kv_strided = st});
            check_sdpa(6, 2, 33, 33, 64, dts[d], (att_ctx){.causal = true, .window = 8, .kv_strided = st});
            /* a row that sees no key (window past the keys) gives zeros */
            check_sdpa(2, 1, 5, 3, 16, dts[d], (att_ctx){.causal = true, .kv_strided = st});
            /* decode over a preallocated cache: length < Tk, split into key segments */
            check_sdpa(8, 2, 1, 700, 64, dts[d], (att_ctx){.causal = true, .length = true, .L = 333, .kv_strided = st});
            check_sdpa(4, 1, 1, 1500, 256, dts[d],
                       (att_ctx){.causal = true, .length = true, .L = 1499, .window = 512, .kv_strided = st});
            check_sdpa(12, 1, 1, 300, 32, dts[d], (att_ctx){.kv_strided = st}); /* 12 heads on a kv head: 2 blocks */
            check_sdpa(2, 2, 1, 900, 40, dts[d], (att_ctx){.causal = true, .kv_strided = st}); /* every segment used */
            check_sdpa(4, 2, 3, 600, 48, dts[d], (att_ctx){.causal = true, .length = true, .L = 100, .kv_strided = st});
        }
}

/* A NaN key makes the rows that see it NaN (the CPU's rule), and only those (causal). */
static void test_sdpa_nan(void)
{
    if (!have_device()) return;
    int64_t qs[4] = {1, 4, 9, 16}, kvs[4] = {1, 2, 9, 16};
    ct_tensor *in[4] = {th_random(&rng, 4, qs, CT_F32, -1, 1), th_random(&rng, 4, kvs, CT_F32, -1, 1),
                        th_random(&rng, 4, kvs, CT_F32, -1, 1), NULL};
    float *k = NULL;
    CHECK_OK(ct_tensor_data_mut(in[1], (void **)&k));
    if (k) k[(0 * 9 + 5) * 16 + 3] = NAN; /* kv head 0, key 5 */
    att_ctx c = {.causal = true};
    devcheck_op(DEV, "sdpa with a NaN key", att_fn, in, 4, &c, TOL_ATT);
    for (int i = 0; i < 4; i++) ct_tensor_free(in[i]);
}

/* ---- decode attention (att_decode: one query row, keys split over work-groups) ---- */

/* The splits per kv head, forced (CTORCH_OPENCL_ATT_SPLIT, read at each launch); 0: the
 * backend's own choice. */
static void force_split(int n)
{
    if (n > 0) {
        char v[16];
        snprintf(v, sizeof v, "%d", n);
        setenv("CTORCH_OPENCL_ATT_SPLIT", v, 1);
    } else {
        unsetenv("CTORCH_OPENCL_ATT_SPLIT");
    }
}

/* The shapes of the models decode serves, over a 2048-slot cache, at lengths that put
 * segment and chunk (32 keys) boundaries in every place: 7 splits of 32, 33 and 31 keys,
 * fewer keys than splits (empty segments), none, one and every slot; a window that starts
 * inside a segment. */
static void test_sdpa_decode(void)
{
    if (!have_device()) return;
    static const struct {
        int64_t Hq, Hkv, D;
        int window;
    } shapes[] = {{32, 4, 64, 0}, {9, 3, 64, 0}, {4, 1, 256, 512}};
    static const int64_t lens[] = {0, 1, 6, 7, 8, 223, 224, 225, 600, 2047, 2048};
    ct_dtype dts[] = {CT_F16, CT_F32};
    const int64_t Tk = 2048;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int d = 0; d < 2; d++)
            for (int split = 0; split < 2; split++) {
                force_split(split ? 7 : 0);
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
                    /* the shapes' own lengths everywhere; the f32 cache and the backend's split
                     * at a few */
                    if ((d == 1 || !split) && lens[li] != 0 && lens[li] != 225 && lens[li] != 600 &&
                        lens[li] != Tk)
                        continue;
                    check_sdpa(shapes[si].Hq, shapes[si].Hkv, 1, Tk, shapes[si].D, dts[d],
                               (att_ctx){.causal = true, .length = true, .L = lens[li], .window = shapes[si].window});
                }
            }
    /* a mask, strided caches, a window across many segments */
    force_split(5);
    check_sdpa(8, 2, 1, 300, 32, CT_F16, (att_ctx){.mask = true, .length = true, .L = 299, .kv_strided = true});
    check_sdpa(8, 2, 1, 300, 40, CT_F32, (att_ctx){.causal = true, .length = true, .L = 290, .window = 100});
    force_split(0);
    /* 16 heads x 128 value dims on a kv head: past att_decode's accumulators, so att_sdpa's
     * split over the cache's slots and att_combine serve it */
    check_sdpa(16, 1, 1, 500, 128, CT_F16, (att_ctx){.causal = true, .length = true, .L = 321});
}

/* A recorded decode step replayed at several positions: the launches read the length on
 * the device, and the split counters the last work-group re-zeroes serve every replay. Two
 * attention ops (the second windowed), since a step needs two ops to be captured. Every
 * other replay runs behind CTORCH_OPENCL_HOLD's busy kernel, which must change nothing. */
static void test_sdpa_decode_replay(void)
{
    if (!have_device()) return;
    const int64_t Tk = 700, qs[4] = {1, 32, 1, 64}, kvs[4] = {1, 4, Tk, 64};
    ct_tensor *q = th_random(&rng, 4, qs, CT_F32, -1, 1), *k = th_random(&rng, 4, kvs, CT_F16, -1, 1),
              *v = th_random(&rng, 4, kvs, CT_F16, -1, 1), *len = NULL, *out[2] = {NULL, NULL};
    int32_t l0 = 1;
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){1}, CT_I32, &l0, &len));
    const ct_tensor *ins[4] = {q, k, v, len};
    for (int i = 0; i < 4; i++) CHECK_OK(ct_tensor_place(ins[i], DEV));
    ct_sdpa_params p[2] = {{.causal = true, .length = len}, {.causal = true, .window = 100, .length = len}};
    CHECK_OK(ct_exec_force_device(DEV));
    CHECK_OK(ct_step_begin());
    ct_status rs = ct_sdpa(q, k, v, NULL, &p[0], &out[0]);
    if (rs == CT_OK) rs = ct_sdpa(q, k, v, NULL, &p[1], &out[1]);
    ct_step *step = NULL;
    CHECK_OK(ct_step_end(&step));
    CHECK_OK(rs);
    ct_step_info info = {0};
    if (step) CHECK_OK(ct_step_get_info(step, &info));
    CHECK_MSG(info.captured, "the sdpa step was not captured by %s", DEV);
    static const int32_t lens[] = {1, 333, 334, 700, 0, 17, 699, 333};
    for (size_t i = 0; step && i < sizeof lens / sizeof lens[0]; i++) {
        int32_t *lp = NULL;
        CHECK_OK(ct_tensor_data_mut(len, (void **)&lp));
        if (lp) *lp = lens[i];
        if (i % 2) setenv("CTORCH_OPENCL_HOLD", "20000", 1);
        else unsetenv("CTORCH_OPENCL_HOLD");
        CHECK_OK(ct_step_run(step));
        for (int o = 0; o < 2; o++) {
            CHECK_OK(ct_exec_force_device("cpu"));
            ct_tensor *ref = NULL;
            CHECK_OK(ct_sdpa(q, k, v, NULL, &p[o], &ref));
            CHECK_OK(ct_exec_force_device(DEV));
            double *g = out[o] ? th_values(out[o]) : NULL, *w = ref ? th_values(ref) : NULL;
            int nonfinite = 0;
            double e = g && w ? devcheck_nmse(g, w, 32 * 64, &nonfinite) : 1;
            CHECK_MSG(e <= TOL_ATT && !nonfinite, "replay %zu, op %d, at length %d: NMSE %.3g, %d non-finite", i, o,
                      lens[i], e, nonfinite);
            free(g);
            free(w);
            ct_tensor_free(ref);
        }
    }
    unsetenv("CTORCH_OPENCL_HOLD");
    CHECK_OK(ct_exec_force_device(NULL));
    ct_step_free(step);
    for (int o = 0; o < 2; o++) ct_tensor_free(out[o]);
    for (int i = 0; i < 4; i++) ct_tensor_free((ct_tensor *)ins[i]);
}

/* ---- the decode step's k rotation and cache writes as one launch (nn_pair.c) ---- */

/* rope(k) -> set_rows(k cache, its rows) -> set_rows(v cache, v), recorded and captured:
 * the planner's nn_rope_set_rows2 launch (the capture log counts 1 launch for the 3 ops)
 * must leave both caches as the CPU does, at two positions of one recording. */
static void test_rope_set_rows_fused(void)
{
    if (!have_device()) return;
    const int64_t Hkv = 4, D = 64, n_ctx = 32, ks[3] = {1, Hkv, D}, vs[2] = {Hkv, D}, cs[2] = {Hkv * n_ctx, D};
    ct_rope_params rp = {.n_dims = 64, .freq_base = 10000, .freq_scale = 1, .mode = CT_ROPE_NEOX};
    ct_tensor *k = th_random(&rng, 3, ks, CT_F32, -1, 1), *v = th_random(&rng, 2, vs, CT_F32, -1, 1), *pos = NULL,
              *slot = NULL, *kc[2] = {NULL, NULL}, *vc[2] = {NULL, NULL};
    int32_t p0 = 3, sl[4];
    for (int h = 0; h < 4; h++) sl[h] = (int32_t)(h * n_ctx + p0);
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){1}, CT_I32, &p0, &pos));
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){Hkv}, CT_I32, sl, &slot));
    for (int i = 0; i < 2; i++) { /* [0]: the device's caches, [1]: the CPU's */
        CHECK_OK(ct_zeros(2, cs, CT_F16, &kc[i]));
        CHECK_OK(ct_zeros(2, cs, CT_F16, &vc[i]));
    }
    const ct_tensor *placed[6] = {k, v, pos, slot, kc[0], vc[0]};
    for (int i = 0; i < 6; i++) CHECK_OK(ct_tensor_place(placed[i], DEV));
    CHECK_OK(ct_exec_force_device(DEV));
    ct_set_log_level(CT_LOG_INFO);
    th_log_capture(true);
    CHECK_OK(ct_step_begin());
    ct_tensor *kr = NULL, *kr2 = NULL;
    ct_status rs = ct_rope(k, pos, &rp, &kr);
    if (rs == CT_OK) rs = ct_view(kr, 2, vs, &kr2);
    if (rs == CT_OK) rs = ct_set_rows(kc[0], kr2, slot);
    if (rs == CT_OK) rs = ct_set_rows(vc[0], v, slot);
    ct_step *step = NULL;
    CHECK_OK(ct_step_end(&step));
    th_log_capture(false);
    ct_set_log_level(CT_LOG_WARN);
    CHECK_OK(rs);
    CHECK_MSG(th_count(th_log(), "step of 3 ops captured as 1 kernel launches") == 1,
              "the 3 ops were not one launch:\n%s", th_log());
    for (int round = 0; step && round < 2; round++) {
        int32_t *pp = NULL, *sp = NULL;
        CHECK_OK(ct_tensor_data_mut(pos, (void **)&pp));
        CHECK_OK(ct_tensor_data_mut(slot, (void **)&sp));
        if (pp && sp) {
            *pp = round ? 17 : 3;
            for (int h = 0; h < 4; h++) sp[h] = (int32_t)(h * n_ctx + *pp);
        }
        CHECK_OK(ct_step_run(step));
        CHECK_OK(ct_exec_force_device("cpu"));
        ct_tensor *ckr = NULL, *ckr2 = NULL;
        CHECK_OK(ct_rope(k, pos, &rp, &ckr));
        CHECK_OK(ct_view(ckr, 2, vs, &ckr2));
        CHECK_OK(ct_set_rows(kc[1], ckr2, slot));
        CHECK_OK(ct_set_rows(vc[1], v, slot));
        CHECK_OK(ct_exec_force_device(DEV));
        for (int c = 0; c < 2; c++) {
            double *g = th_values(c ? vc[0] : kc[0]), *w = th_values(c ? vc[1] : kc[1]);
            int nonfinite = 0;
            double e = g && w ? devcheck_nmse(g, w, Hkv * n_ctx * D, &nonfinite) : 1;
            CHECK_MSG(e <= TOL_F16 && !nonfinite, "round %d, %s cache: NMSE %.3g, %d non-finite", round, c ? "v" : "k",
                      e, nonfinite);
            free(g);
            free(w);
        }
        ct_tensor_free(ckr2);
        ct_tensor_free(ckr);
    }
    CHECK_OK(ct_exec_force_device(NULL));
    ct_step_free(step);
    ct_tensor_free(kr2);
    ct_tensor_free(kr);
    ct_tensor *all[8] = {k, v, pos, slot, kc[0], kc[1], vc[0], vc[1]};
    for (int i = 0; i < 8; i++) ct_tensor_free(all[i]);
}

/* ---- Gemma 3's per-head norms, rotations and cache rows as one launch (nn_head.c) ----
 * rms_norm(q), rms_norm(k), rope of both, k's and v's rows into their caches, recorded and
 * captured: with whole rotations the planner's nn_head_norm_rope covers the 6 ops in 1
 * launch, which must leave the norms' and ropes' outputs (TOL_F32: f32 both sides, the sum of
 * squares in another order) and both f16 caches (TOL_F16) as the CPU does, for new q, k, v and
 * another position at each of two replays. A partial rotation (n_dims < D) is not the
 * kernel's: it must go out as more launches, with the same results. */
typedef struct head_cfg {
    int64_t hq, hkv, D;
    int n_dims;
    ct_dtype wdt;
} head_cfg;

/* The six ops (o: norm q, norm k, rope q, rope k), writing the caches kc and vc. */
static ct_status head_ops(ct_tensor *const *in, const head_cfg *c, ct_tensor *kc, ct_tensor *vc, ct_tensor **o)
{
    ct_rope_params rp = {.n_dims = c->n_dims, .freq_base = 1e6, .freq_scale = 1, .mode = CT_ROPE_NEOX};
    const int64_t vs[2] = {c->hkv, c->D};
    ct_tensor *kr2 = NULL;
    ct_status s = ct_rms_norm(in[0], in[3], 1e-6, &o[0]);
    if (s == CT_OK) s = ct_rms_norm(in[1], in[4], 1e-6, &o[1]);
    if (s == CT_OK) s = ct_rope(o[0], in[5], &rp, &o[2]);
    if (s == CT_OK) s = ct_rope(o[1], in[5], &rp, &o[3]);
    if (s == CT_OK) s = ct_view(o[3], 2, vs, &kr2);
    if (s == CT_OK) s = ct_set_rows(kc, kr2, in[6]);
    if (s == CT_OK) s = ct_set_rows(vc, in[2], in[6]);
    ct_tensor_free(kr2);
    return s;
}

static void head_check(const char *what, const ct_tensor *got, const ct_tensor *want, double tol, int round,
                       const head_cfg *c)
{
    double *g = th_values(got), *w = th_values(want);
    int nonfinite = 0;
    double e = g && w ? devcheck_nmse(g, w, ct_tensor_numel(want), &nonfinite) : 1;
    CHECK_MSG(e <= tol && !nonfinite, "%lld/%lld heads of %lld, n_dims %d, round %d, %s: NMSE %.3g, %d non-finite",
              (long long)c->hq, (long long)c->hkv, (long long)c->D, c->n_dims, round, what, e, nonfinite);
    free(g), free(w);
}

/* New values for the inputs and the position p (cache slot h * n_ctx + p for kv head h). */
static void head_inputs(ct_tensor *const *in, const head_cfg *c, int32_t p, int64_t n_ctx)
{
    for (int i = 0; i < 3; i++) {
        float *v = NULL;
        CHECK_OK(ct_tensor_data_mut(in[i], (void **)&v));
        for (int64_t e = 0; v && e < ct_tensor_numel(in[i]); e++) v[e] = (float)th_uniform(&rng, -2, 2);
    }
    int32_t *pp = NULL, *sp = NULL;
    CHECK_OK(ct_tensor_data_mut(in[5], (void **)&pp));
    CHECK_OK(ct_tensor_data_mut(in[6], (void **)&sp));
    if (pp) *pp = p;
    for (int64_t h = 0; sp && h < c->hkv; h++) sp[h] = (int32_t)(h * n_ctx + p);
}

static void head_once(const head_cfg *c)
{
    const int64_t n_ctx = 24, qs[3] = {1, c->hq, c->D}, ks[3] = {1, c->hkv, c->D}, vs[2] = {c->hkv, c->D},
                  ws[1] = {c->D}, cs[2] = {c->hkv * n_ctx, c->D};
    ct_tensor *in[7] = {th_random(&rng, 3, qs, CT_F32, -2, 2), th_random(&rng, 3, ks, CT_F32, -2, 2),
                        th_random(&rng, 2, vs, CT_F32, -1, 1), th_random(&rng, 1, ws, c->wdt, 0.5, 1.5),
                        th_random(&rng, 1, ws, c->wdt, 0.5, 1.5), NULL, NULL};
    int32_t p0 = 5, sl[8] = {0}; /* round 0's position: it rewrites the rows the recording wrote */
    for (int64_t h = 0; h < c->hkv; h++) sl[h] = (int32_t)(h * n_ctx + p0);
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){1}, CT_I32, &p0, &in[5]));
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){c->hkv}, CT_I32, sl, &in[6]));
    ct_tensor *kc[2] = {NULL, NULL}, *vc[2] = {NULL, NULL}, *o[4] = {NULL}, *w[4] = {NULL};
    for (int i = 0; i < 2; i++) { /* [0]: the device's caches, [1]: the CPU's */
        CHECK_OK(ct_zeros(2, cs, CT_F16, &kc[i]));
        CHECK_OK(ct_zeros(2, cs, CT_F16, &vc[i]));
    }
    for (int i = 0; i < 7; i++) CHECK_OK(ct_tensor_place(in[i], DEV));
    CHECK_OK(ct_tensor_place(kc[0], DEV));
    CHECK_OK(ct_tensor_place(vc[0], DEV));
    CHECK_OK(ct_exec_force_device(DEV));
    ct_set_log_level(CT_LOG_INFO);
    th_log_capture(true);
    CHECK_OK(ct_step_begin());
    ct_status rs = head_ops(in, c, kc[0], vc[0], o);
    ct_step *step = NULL;
    CHECK_OK(ct_step_end(&step));
    th_log_capture(false);
    ct_set_log_level(CT_LOG_WARN);
    CHECK_OK(rs);
    bool whole = c->n_dims == c->D;
    int fused = th_count(th_log(), "step of 6 ops captured as 1 kernel launches");
    CHECK_MSG(fused == (whole ? 1 : 0), "n_dims %d of %lld: %s one launch:\n%s", c->n_dims, (long long)c->D,
              whole ? "not" : "wrongly", th_log());
    for (int round = 0; step && round < 2; round++) {
        head_inputs(in, c, round ? 17 : p0, n_ctx);
        CHECK_OK(ct_step_run(step));
        CHECK_OK(ct_exec_force_device("cpu"));
        CHECK_OK(head_ops(in, c, kc[1], vc[1], w));
        CHECK_OK(ct_exec_force_device(DEV));
        static const char *const names[4] = {"norm q", "norm k", "rope q", "rope k"};
        for (int i = 0; i < 4; i++) head_check(names[i], o[i], w[i], TOL_F32, round, c);
        head_check("k cache", kc[0], kc[1], TOL_F16, round, c);
        head_check("v cache", vc[0], vc[1], TOL_F16, round, c);
        for (int i = 0; i < 4; i++) ct_tensor_free(w[i]), w[i] = NULL;
    }
    CHECK_OK(ct_exec_force_device(NULL));
    ct_step_free(step);
    for (int i = 0; i < 4; i++) ct_tensor_free(o[i]);
    for (int i = 0; i < 7; i++) ct_tensor_free(in[i]);
    for (int i = 0; i < 2; i++) ct_tensor_free(kc[i]), ct_tensor_free(vc[i]);
}

static void test_head_norm_rope_fused(void)
{
    if (!have_device()) return;
    static const head_cfg cfgs[] = {{4, 1, 256, 256, CT_F32}, {8, 2, 64, 64, CT_F16}, {4, 2, 64, 32, CT_F32}};
    for (size_t i = 0; i < sizeof cfgs / sizeof cfgs[0]; i++) head_once(&cfgs[i]);
}

/* ---- an RMS norm and the residual add of its output as one launch (nn_pair.c) ----
 * y = rms_norm(x, w), z = r + y (or y + r), recorded and captured: the planner's nn_norm_add
 * launch (1 launch for the 2 ops) must leave y and z as the CPU does (TOL_F32: both compute
 * in f32, sums in another order), for new x at each of two replays; 1 row (decode) and 3,
 * f32 and f16 weights. */
static void norm_add_once(int64_t rows, ct_dtype wdt, bool y_first)
{
    const int64_t n = 640, xs[2] = {rows, n}, ws[1] = {n};
    ct_tensor *x = th_random(&rng, 2, xs, CT_F32, -2, 2), *r = th_random(&rng, 2, xs, CT_F32, -1, 1);
    ct_tensor *w = th_random(&rng, 1, ws, wdt, 0.5, 1.5), *y = NULL, *z = NULL;
    const ct_tensor *placed[3] = {x, r, w};
    for (int i = 0; i < 3; i++) CHECK_OK(ct_tensor_place(placed[i], DEV));
    CHECK_OK(ct_exec_force_device(DEV));
    ct_set_log_level(CT_LOG_INFO);
    th_log_capture(true);
    CHECK_OK(ct_step_begin());
    ct_status rs = ct_rms_norm(x, w, 1e-6, &y);
    if (rs == CT_OK) rs = y_first ? ct_add(y, r, &z) : ct_add(r, y, &z);
    ct_step *step = NULL;
    CHECK_OK(ct_step_end(&step));
    th_log_capture(false);
    ct_set_log_level(CT_LOG_WARN);
    CHECK_OK(rs);
    CHECK_MSG(th_count(th_log(), "step of 2 ops captured as 1 kernel launches") == 1,
              "rows %lld: the norm and the add were not one launch:\n%s", (long long)rows, th_log());
    for (int round = 0; step && round < 2; round++) {
        float *xp = NULL;
        CHECK_OK(ct_tensor_data_mut(x, (void **)&xp));
        for (int64_t i = 0; xp && i < rows * n; i++) xp[i] = (float)th_uniform(&rng, -2, 2);
        CHECK_OK(ct_step_run(step));
        CHECK_OK(ct_exec_force_device("cpu"));
        ct_tensor *cy = NULL, *cz = NULL;
        CHECK_OK(ct_rms_norm(x, w, 1e-6, &cy));
        CHECK_OK(ct_add(r, cy, &cz));
        CHECK_OK(ct_exec_force_device(DEV));
        const ct_tensor *got[2] = {y, z}, *want[2] = {cy, cz};
        for (int o = 0; o < 2; o++) {
            double *g = got[o] ? th_values(got[o]) : NULL, *v = want[o] ? th_values(want[o]) : NULL;
            int nonfinite = 0;
            double e = g && v ? devcheck_nmse(g, v, rows * n, &nonfinite) : 1;
            CHECK_MSG(e <= TOL_F32 && !nonfinite, "rows %lld, %s weight, round %d, %s: NMSE %.3g, %d non-finite",
                      (long long)rows, ct_dtype_name(wdt), round, o ? "z" : "y", e, nonfinite);
            free(g), free(v);
        }
        ct_tensor_free(cy), ct_tensor_free(cz);
    }
    CHECK_OK(ct_exec_force_device(NULL));
    ct_step_free(step);
    ct_tensor *all[5] = {x, r, w, y, z};
    for (int i = 0; i < 5; i++) ct_tensor_free(all[i]);
}

static void test_norm_add_fused(void)
{
    if (!have_device()) return;
    norm_add_once(1, CT_F32, false);
    norm_add_once(3, CT_F16, true);
}

/* ---- pooling, batch_norm ---- */

typedef struct pool_ctx {
    ct_pool2d_params p;
    bool max, strided;
} pool_ctx;

static ct_status pool_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const pool_ctx *c = vctx;
    ct_tensor *tmp = NULL;
    (void)n;
    const ct_tensor *x = sw(in[0], c->strided, &tmp);
    ct_status s = c->max ? ct_max_pool2d(x, &c->p, out) : ct_avg_pool2d(x, &c->p, out);
    ct_tensor_free(tmp);
    return s;
}

static void test_pool(void)
{
    if (!have_device()) return;
    ct_dtype dts[] = {CT_F32, CT_F16};
    int64_t xs[4] = {2, 3, 17, 13};
    for (int d = 0; d < 2; d++)
        for (int mx = 0; mx < 2; mx++)
            for (int st = 0; st < 2; st++) {
                pool_ctx c = {{.kernel = {3, 2}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = st}, mx, st};
                ct_tensor *x = gen(4, xs, dts[d], st, -3, 3);
                char what[64];
                snprintf(what, sizeof what, "%s_pool2d %s %s", mx ? "max" : "avg", ct_dtype_name(dts[d]),
                         st ? "strided" : "contiguous");
                devcheck_op(DEV, what, pool_fn, &x, 1, &c, tol_for(dts[d]));
                ct_tensor_free(x);
            }
}

static ct_status bn_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    ct_tensor *tmp = NULL;
    (void)n;
    const ct_tensor *x = sw(in[0], *(const bool *)vctx, &tmp);
    ct_status s = ct_batch_norm(x, in[1], in[2], in[3], in[4], 1e-5, out);
    ct_tensor_free(tmp);
    return s;
}

static void test_batch_norm(void)
{
    if (!have_device()) return;
    for (int st = 0; st < 2; st++) {
        int64_t xs[4] = {2, 5, 7, 9}, cs[1] = {5};
        ct_tensor *in[5] = {gen(4, xs, st ? CT_F16 : CT_F32, st, -3, 3), th_random(&rng, 1, cs, CT_F32, -1, 1),
                            th_random(&rng, 1, cs, CT_F32, 0.5, 2), th_random(&rng, 1, cs, CT_F32, -2, 2),
                            th_random(&rng, 1, cs, CT_F32, -1, 1)};
        bool strided = st;
        devcheck_op(DEV, st ? "batch_norm f16 strided" : "batch_norm f32", bn_fn, in, 5, &strided,
                    st ? TOL_F16 : TOL_F32);
        for (int i = 0; i < 5; i++) ct_tensor_free(in[i]);
    }
}

/* Every test starts here: a skip (exit 77 overall) when there is no OpenCL device. */
static bool have_device(void)
{
    if (!DEV) DEV = devcheck_device("opencl", dev_buf, sizeof dev_buf);
    return DEV != NULL;
}

/* ---- conv2d / conv_transpose2d ---- */

typedef struct conv_ctx {
    ct_conv2d_params p;
    bool transposed, strided, bias;
} conv_ctx;

static ct_status conv_fn(ct_tensor *const *in, int n, ct_tensor **out, void *vctx)
{
    const conv_ctx *c = vctx;
    ct_tensor *tmp = NULL;
    (void)n;
    const ct_tensor *x = sw(in[0], c->strided, &tmp);
    ct_status s = c->transposed ? ct_conv_transpose2d(x, in[1], c->bias ? in[2] : NULL, &c->p, out)
                                : ct_conv2d(x, in[1], c->bias ? in[2] : NULL, &c->p, out);
    ct_tensor_free(tmp);
    return s;
}

static void test_conv(void)
{
    if (!have_device()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    for (int d = 0; d < 3; d++)
        for (int tr = 0; tr < 2; tr++)
            for (int v = 0; v < 3; v++) {
                /* v 0: plain; 1: stride, padding, dilation, bias (f32 beside half operands);
                 * 2: groups, strided input, bias of the operands' dtype */
                int64_t G = v == 2 ? 2 : 1, C = 4, O = 6;
                int64_t xs[4] = {2, C, 13, 11};
                int64_t ws[4] = {tr ? C : O, tr ? O / G : C / G, 3, v == 1 ? 2 : 3}, bs[1] = {O};
                conv_ctx c = {.transposed = tr, .strided = v == 2, .bias = v != 0};
                c.p.groups = (int)G;
                if (v == 1) c.p = (ct_conv2d_params){.stride = {2, 1}, .padding = {1, 2}, .dilation = {2, 2}, .groups = 1,
                                                     .output_padding = {tr, 0}};
                ct_tensor *in[3] = {gen(4, xs, dts[d], c.strided, -1, 1), th_random(&rng, 4, ws, dts[d], -1, 1),
                                    th_random(&rng, 1, bs, v == 1 ? CT_F32 : dts[d], -1, 1)};
                char what[64];
                snprintf(what, sizeof what, "%s %s variant %d", tr ? "conv_transpose2d" : "conv2d",
                         ct_dtype_name(dts[d]), v);
                devcheck_op(DEV, what, conv_fn, in, 3, &c, tol_for(dts[d]));
                for (int i = 0; i < 3; i++) ct_tensor_free(in[i]);
            }
}

int main(int argc, char **argv)
{
    setenv("CTORCH_OPENCL_POISON", "1", 1);
    th_args(argc, argv);
    RUN(test_softmax);
    RUN(test_norms);
    RUN(test_rope);
    RUN(test_embedding);
    RUN(test_set_rows);
    RUN(test_matmul);
    RUN(test_linear);
    set_clblast(false); /* the own tiled kernel for f32 too */
    RUN(test_matmul);
    RUN(test_linear);
    set_clblast(true);
    set_gpu_kernels(true);
    RUN(test_matmul);
    RUN(test_linear);
    set_gpu_kernels(false);
    RUN(test_sdpa);
    RUN(test_sdpa_nan);
    RUN(test_sdpa_decode);
    RUN(test_sdpa_decode_replay);
    RUN(test_rope_set_rows_fused);
    RUN(test_norm_add_fused);
    RUN(test_head_norm_rope_fused);
    RUN(test_pool);
    RUN(test_batch_norm);
    RUN(test_conv);
    return th_finish();
}
