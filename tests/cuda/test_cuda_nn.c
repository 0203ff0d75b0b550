/* The CUDA nn group against the CPU backend (tests/support/devcheck.h): every op forced onto
 * cuda:0 and onto the CPU from the same random inputs (fixed seeds), f32/f16/bf16, dense and
 * strided views, odd sizes; outputs compared by normalized MSE. Fresh device memory is
 * NaN-poisoned (CTORCH_CUDA_POISON=1), so an element a kernel leaves unwritten fails.
 *
 * Tolerances (NMSE = sum (a-b)^2 / sum b^2):
 *   f32 row ops, rope, norms, attention: 1e-10. Both sides compute in f32 (the CPU's
 *     per-row factors in double, as here); they differ by summation order and exp()
 *     implementations, a few f32 ulps (relative 1e-7, NMSE ~1e-13).
 *   f32 GEMM (matmul, linear, conv): 1e-10: K-term dot products in another order, relative
 *     error ~sqrt(K) ulps (TF32 is off unless CTORCH_CUDA_TF32=1, which this suite leaves unset).
 *     Convolutions run twice, through cuDNN (where it loads) and through im2col + cuBLAS.
 *   f16 / bf16 convolutions through cuDNN: the inputs are exact on the tensor cores, sums in
 *     f32; a bias is added to the rounded result and rounded again (two roundings, NMSE <=
 *     4x the one-rounding bound if every element did, ~1e-7 / 1e-5 in practice): 1e-6 / 6.2e-5.
 *   f16 / bf16 outputs: both sides round the same f32 value to the narrow type and differ
 *     at most where the f32 values straddle a rounding boundary: one ulp, i.e. relative
 *     2^-10 (f16) / 2^-7 (bf16) at worst, NMSE <= 1e-6 / 6.2e-5 if every element did.
 *   linear with f16/bf16 weights: up to 8 rows, f32 products and sums (1e-10); more rows
 *     round x to the weight's dtype for the tensor cores
 *     (relative 2^-11 / 2^-8 per product), bounded the same way: 1e-6 / 6.2e-5.
 *   attention on tensor cores (prefill from NN_SDPA_TC_MIN_TQ = 32 query positions, head
 *     dims 64 and 128): Q * scale, K, V and the probabilities P are rounded to f16 (relative
 *     2^-11 each), products and sums in f32: the output's relative error is a few 2^-11,
 *     NMSE ~1e-7 on these inputs; 1e-5 leaves two decades (the decode path stays f32: 1e-10; its
 *     tensor-core kernel carries Q and P as f16 plus the rounding residual, ~f32 too).
 * Without a CUDA device (CI builds CUDA but has no GPU) every test skips. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#ifdef CTORCH_HAVE_CUDA
#include "backends/cuda/nn_conv.h"
#endif

static char g_dev[32];
static const char *dev(void) { return devcheck_device("cuda", g_dev, sizeof g_dev); }

static const double TOL_F32 = 1e-10, TOL_F16 = 1e-6, TOL_BF16 = 6.2e-5, TOL_TC = 1e-5;
static double tol_of(ct_dtype t) { return t == CT_F16 ? TOL_F16 : t == CT_BF16 ? TOL_BF16 : TOL_F32; }

/* The worst NMSE seen under each tolerance, printed at the end (how much headroom each has). */
static struct {
    double tol, worst;
    int used;
} g_seen[8];

static double dc(const char *what, devcheck_fn fn, ct_tensor *const *in, int n_in, void *ctx, double tol)
{
    double e = devcheck_op(g_dev, what, fn, in, n_in, ctx, tol);
    for (int i = 0; i < 8; i++) {
        if (g_seen[i].used && g_seen[i].tol != tol) continue;
        g_seen[i].used = 1, g_seen[i].tol = tol;
        if (e > g_seen[i].worst) g_seen[i].worst = e;
        break;
    }
    return e;
}

static void free_all(ct_tensor **ts, int n)
{
    for (int i = 0; i < n; i++) ct_tensor_free(ts[i]);
}

/* Shape helper: a random tensor of dtype dt with values in [lo, hi). */
static ct_tensor *rnd(uint64_t seed, ct_dtype dt, int nd, const int64_t *shape, double lo, double hi)
{
    th_rng r = {seed};
    return th_random(&r, nd, shape, dt, lo, hi);
}

static ct_tensor *index_tensor(ct_dtype dt, int64_t n, const int64_t *vals)
{
    ct_tensor *t = NULL;
    int32_t v32[64];
    for (int64_t i = 0; i < n && i < 64; i++) v32[i] = (int32_t)vals[i];
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){n}, dt, dt == CT_I32 ? (const void *)v32 : (const void *)vals, &t));
    return t;
}

/* ---- softmax ---- */

typedef struct sm_ctx {
    int dim, log, transpose;
} sm_ctx;

static ct_status sm_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    (void)n_in;
    sm_ctx *c = vctx;
    ct_tensor *x = in[0], *t = NULL;
    ct_status s = CT_OK;
    if (c->transpose) s = ct_transpose(x, 0, 1, &t), x = t;
    if (s == CT_OK) s = c->log ? ct_log_softmax(x, c->dim, out) : ct_softmax(x, c->dim, out);
    ct_tensor_free(t);
    return s;
}

static void test_softmax(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    /* rows cached in shared memory (256 or 1024 threads; 12270 floats: just under the default
     * 48 KiB, which the kernel's static buffer shares), rows too long to cache, short rows;
     * dense rows of whole 16-byte chunks held in registers (1000, 20000), at the register
     * path's limit (32768 f32 / 65536 f16 values) and one chunk past it (32772 f32, 65544 f16);
     * 2-byte rows at the exp-once kernel's limit (4096: 4 chunks a thread) and past it (4104) */
    static const int64_t shapes[][3] = {{37, 1000, 0}, {300, 17, 0},   {3, 50001, 0},  {64, 3, 0},
                                        {4, 6, 130},   {2, 70001, 0},  {5, 20000, 0},  {3, 12270, 0},
                                        {2, 32768, 0}, {2, 32772, 0}, {2, 65536, 0}, {2, 65544, 0},
                                        {3, 4096, 0},  {3, 4104, 0}};
    uint64_t seed = 1;
    for (int d = 0; d < 3; d++)
        for (int si = 0; si < 14; si++)
            for (int variant = 0; variant < 4; variant++) {
                int nd = shapes[si][2] ? 3 : 2;
                ct_tensor *x = rnd(seed++, dts[d], nd, shapes[si], -8, 8);
                /* variants: last dim, first dim (strided rows), a transposed input, log */
                sm_ctx c = {.dim = variant == 1 ? 0 : -1, .log = variant == 3, .transpose = variant == 2};
                char what[96];
                snprintf(what, sizeof what, "%ssoftmax %s shape#%d variant %d", c.log ? "log_" : "",
                         ct_dtype_name(dts[d]), si, variant);
                dc(what, sm_fn, &x, 1, &c, tol_of(dts[d]));
                ct_tensor_free(x);
            }
}

/* ---- norms ---- */

typedef struct norm_ctx {
    int kind; /* 0 rms, 1 layer, 2 batch */
    int norm_ndim, narrow;
    double eps;
} norm_ctx;

static ct_status norm_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    norm_ctx *c = vctx;
    ct_tensor *x = in[0], *t = NULL;
    ct_status s = CT_OK;
    if (c->narrow) { /* rows that are not adjacent: a column range of a wider tensor (narrow 2:
                      * from column 0, so the first row is aligned and the next ones are not) */
        int nd = ct_tensor_ndim(x);
        s = ct_narrow(x, nd - 1, c->narrow == 2 ? 0 : 1, ct_tensor_shape(x)[nd - 1] - 2, &t), x = t;
    }
    ct_tensor *w = n_in > 1 ? in[1] : NULL, *b = n_in > 2 ? in[2] : NULL;
    if (s == CT_OK) {
        if (c->kind == 0) s = ct_rms_norm(x, w, c->eps, out);
        else if (c->kind == 1) s = ct_layer_norm(x, c->norm_ndim, w, b, c->eps, out);
        else s = ct_batch_norm(x, in[1], in[2], n_in > 3 ? in[3] : NULL, n_in > 4 ? in[4] : NULL, c->eps, out);
    }
    ct_tensor_free(t);
    return s;
}

static void test_rms_norm(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    /* odd widths; whole 16-byte chunks (2048 after narrowing 2050, 4096, 40000: registers) */
    static const int64_t shapes[][3] = {{5, 7, 2050}, {33, 4099, 0}, {3, 40000, 0},
                                        {9, 1, 0},    {2, 60001, 0}, {6, 4096, 0}};
    uint64_t seed = 100;
    for (int d = 0; d < 3; d++)
        for (int si = 0; si < 6; si++)
            for (int variant = 0; variant < 4; variant++) {
                int nd = shapes[si][2] ? 3 : 2;
                if (variant >= 2 && shapes[si][nd - 1] < 3) continue;
                ct_tensor *in[2] = {rnd(seed++, dts[d], nd, shapes[si], -3, 3), NULL};
                int64_t D = shapes[si][nd - 1] - (variant >= 2 ? 2 : 0);
                /* variants: f32 weight, no weight, a narrowed input (from column 1 or 0) with an
                 * f16 weight */
                if (variant != 1) in[1] = rnd(seed++, variant >= 2 ? CT_F16 : CT_F32, 1, &D, 0.5, 1.5);
                norm_ctx c = {.kind = 0, .narrow = variant >= 2 ? variant - 1 : 0, .eps = 1e-6};
                char what[96];
                snprintf(what, sizeof what, "rms_norm %s shape#%d variant %d", ct_dtype_name(dts[d]), si, variant);
                dc(what, norm_fn, in, variant == 1 ? 1 : 2, &c, tol_of(dts[d]));
                free_all(in, 2);
            }
}

static void test_layer_norm(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    uint64_t seed = 200;
    /* an odd width, and one of whole 16-byte chunks (rows held in registers) */
    for (int wi = 0; wi < 2; wi++)
        for (int d = 0; d < 3; d++)
            for (int variant = 0; variant < 4; variant++) { /* 3: an f32 bias (the vector loads) */
                int64_t shape[3] = {6, 13, wi ? 512 : 515};
                int k = variant == 1 ? 2 : 1;
                ct_tensor *in[3] = {rnd(seed++, dts[d], 3, shape, -2, 5), NULL, NULL};
                if (variant != 2) {
                    in[1] = rnd(seed++, CT_F32, k, shape + 3 - k, 0.5, 1.5);
                    in[2] = rnd(seed++, variant == 3 ? CT_F32 : CT_F16, k, shape + 3 - k, -1, 1);
                }
                norm_ctx c = {.kind = 1, .norm_ndim = k, .eps = 1e-5};
                char what[96];
                snprintf(what, sizeof what, "layer_norm %s width %lld norm_ndim %d variant %d", ct_dtype_name(dts[d]),
                         (long long)shape[2], k, variant);
                dc(what, norm_fn, in, variant == 2 ? 1 : 3, &c, tol_of(dts[d]));
                free_all(in, 3);
            }
}

static void test_batch_norm(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    uint64_t seed = 300;
    for (int d = 0; d < 3; d++)
        for (int variant = 0; variant < 2; variant++) {
            int64_t s4[4] = {2, 5, 7, 9}, s2[2] = {11, 5}, C = 5;
            /* initializers are not sequenced: each draws from its own seed */
            ct_tensor *in[5] = {variant ? rnd(seed, dts[d], 2, s2, -2, 2) : rnd(seed, dts[d], 4, s4, -2, 2),
                                rnd(seed + 1, CT_F32, 1, &C, -1, 1), rnd(seed + 2, CT_F32, 1, &C, 0.5, 2),
                                rnd(seed + 3, CT_F16, 1, &C, 0.5, 1.5), rnd(seed + 4, CT_F32, 1, &C, -1, 1)};
            seed += 5;
            norm_ctx c = {.kind = 2, .eps = 1e-5};
            char what[96];
            snprintf(what, sizeof what, "batch_norm %s %s", ct_dtype_name(dts[d]), variant ? "2-D" : "4-D");
            dc(what, norm_fn, in, variant ? 3 : 5, &c, tol_of(dts[d]));
            free_all(in, 5);
        }
}

/* ---- rope ---- */

typedef struct rope_ctx {
    ct_rope_params p;
    int permuted; /* x is [H, T, D] permuted to [T, H, D] */
} rope_ctx;

static ct_status rope_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    (void)n_in;
    rope_ctx *c = vctx;
    ct_tensor *x = in[0], *t = NULL;
    ct_status s = CT_OK;
    if (c->permuted) s = ct_permute(x, (int[]){1, 0, 2}, &t), x = t;
    if (s == CT_OK) s = ct_rope(x, in[1], &c->p, out);
    ct_tensor_free(t);
    return s;
}

static void test_rope(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    uint64_t seed = 400;
    for (int d = 0; d < 3; d++)
        for (int variant = 0; variant < 4; variant++) {
            int64_t T = 19, H = 5, D = variant == 3 ? 50 : 64;
            bool permuted = variant == 2;
            int64_t shape[3] = {permuted ? H : T, permuted ? T : H, D};
            int64_t pos[19];
            for (int i = 0; i < T; i++) pos[i] = 3 * i + (variant == 1 ? 4000 : 0);
            ct_tensor *in[2] = {rnd(seed++, dts[d], 3, shape, -2, 2), index_tensor(variant & 1 ? CT_I64 : CT_I32, T, pos)};
            /* variants: normal mode; neox with far positions; a permuted input; a partial rotation */
            rope_ctx c = {.p = {.n_dims = variant == 3 ? 32 : 0, .freq_base = variant == 1 ? 1e6 : 10000,
                                .freq_scale = variant == 3 ? 0.25 : 1, .mode = variant == 1 ? CT_ROPE_NEOX : CT_ROPE_NORMAL},
                          .permuted = permuted};
            char what[96];
            snprintf(what, sizeof what, "rope %s variant %d", ct_dtype_name(dts[d]), variant);
            dc(what, rope_fn, in, 2, &c, tol_of(dts[d]));
            free_all(in, 2);
        }
}

/* ---- embedding, set_rows ---- */

static ct_status emb_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    (void)n_in;
    int transposed = *(int *)vctx;
    ct_tensor *w = in[0], *t = NULL, *ids = NULL;
    ct_status s = CT_OK;
    if (transposed) s = ct_transpose(w, 0, 1, &t), w = t;
    if (s == CT_OK) s = ct_view(in[1], 2, (int64_t[]){2, 3}, &ids);
    if (s == CT_OK) s = ct_embedding(w, ids, out);
    ct_tensor_free(t);
    ct_tensor_free(ids);
    return s;
}

static void test_embedding(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    static const int64_t ids[6] = {0, 99, 5, 5, 42, 77};
    for (int d = 0; d < 3; d++)
        for (int transposed = 0; transposed < 2; transposed++) {
            int64_t shape[2] = {transposed ? 300 : 100, transposed ? 100 : 300};
            ct_tensor *in[2] = {rnd(500 + (uint64_t)d, dts[d], 2, shape, -1, 1),
                                index_tensor(transposed ? CT_I32 : CT_I64, 6, ids)};
            char what[96];
            snprintf(what, sizeof what, "embedding %s%s", ct_dtype_name(dts[d]), transposed ? " transposed" : "");
            /* a gather: exact, whatever the dtype */
            dc(what, emb_fn, in, 2, &transposed, 0.0);
            free_all(in, 2);
        }
}

/* in[0] the cache [H, Tmax, D] (rows written into a clone of it), in[1] rows, in[2] slots */
static ct_status set_rows_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    (void)n_in;
    (void)vctx;
    ct_tensor *cache = NULL, *c2 = NULL;
    const int64_t *cs = ct_tensor_shape(in[0]);
    ct_status s = ct_clone(in[0], &cache);
    if (s == CT_OK) s = ct_view(cache, 2, (int64_t[]){cs[0] * cs[1], cs[2]}, &c2);
    if (s == CT_OK) s = ct_set_rows(c2, in[1], in[2]);
    ct_tensor_free(c2);
    if (s == CT_OK) *out = cache;
    else ct_tensor_free(cache);
    return s;
}

static void test_set_rows(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    /* two heads of a 16-slot cache, three new positions 5..7: slots h * 16 + t */
    static const int64_t slots[6] = {5, 6, 7, 21, 22, 23};
    for (int d = 0; d < 3; d++)
        for (int strided = 0; strided < 2; strided++) {
            int64_t cshape[3] = {2, 16, 24}, rshape[2] = {6, strided ? 48 : 24};
            ct_tensor *rows = rnd(600 + (uint64_t)d, strided ? CT_F32 : dts[d], 2, rshape, -1, 1), *rv = NULL;
            if (strided) CHECK_OK(ct_narrow(rows, 1, 7, 24, &rv)); /* rows of a wider f32 tensor */
            ct_tensor *in[3] = {rnd(610 + (uint64_t)d, dts[d], 3, cshape, -1, 1), strided ? rv : rows,
                                index_tensor(strided ? CT_I32 : CT_I64, 6, slots)};
            char what[96];
            snprintf(what, sizeof what, "set_rows into %s%s", ct_dtype_name(dts[d]), strided ? " from strided f32" : "");
            dc(what, set_rows_fn, in, 3, NULL, 0.0); /* copies: exact */
            free_all(in, 3);
            if (strided) ct_tensor_free(rows);
        }
}

/* ---- pooling ---- */

typedef struct pool_ctx {
    ct_pool2d_params p;
    int is_max, transpose;
} pool_ctx;

static ct_status pool_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    (void)n_in;
    pool_ctx *c = vctx;
    ct_tensor *x = in[0], *t = NULL;
    ct_status s = CT_OK;
    if (c->transpose) s = ct_transpose(x, 2, 3, &t), x = t;
    if (s == CT_OK) s = c->is_max ? ct_max_pool2d(x, &c->p, out) : ct_avg_pool2d(x, &c->p, out);
    ct_tensor_free(t);
    return s;
}

static void test_pool(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    uint64_t seed = 700;
    for (int d = 0; d < 3; d++)
        for (int variant = 0; variant < 4; variant++) {
            int64_t shape[4] = {2, 3, 17, 23};
            ct_tensor *x = rnd(seed++, dts[d], 4, shape, -4, 4);
            pool_ctx c = {.p = {.kernel = {3, 2}, .stride = {2, variant == 2 ? 1 : 0}, .padding = {1, variant & 1},
                                .count_include_pad = variant == 3},
                          .is_max = variant < 2, .transpose = variant == 1};
            char what[96];
            snprintf(what, sizeof what, "%s_pool2d %s variant %d", c.is_max ? "max" : "avg", ct_dtype_name(dts[d]), variant);
            dc(what, pool_fn, &x, 1, &c, tol_of(dts[d]));
            ct_tensor_free(x);
        }
}

/* ---- convolutions ---- */

typedef struct conv_ctx {
    ct_conv2d_params p;
    int transposed, permuted; /* permuted: x given as [N, C, W, H] transposed to [N, C, H, W] */
} conv_ctx;

static ct_status conv_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    conv_ctx *c = vctx;
    ct_tensor *x = in[0], *t = NULL;
    ct_status s = CT_OK;
    if (c->permuted) s = ct_transpose(x, 2, 3, &t), x = t;
    ct_tensor *b = n_in > 2 ? in[2] : NULL;
    if (s == CT_OK) s = c->transposed ? ct_conv_transpose2d(x, in[1], b, &c->p, out) : ct_conv2d(x, in[1], b, &c->p, out);
    ct_tensor_free(t);
    return s;
}

static void conv_cases(ct_dtype dt)
{
    struct {
        int64_t x[4], w[4];
        conv_ctx c;
        int bias;
    } cases[] = {
        {{2, 3, 17, 19}, {8, 3, 3, 3}, {.p = {.padding = {1, 1}}}, 1},
        {{2, 6, 11, 13}, {4, 3, 3, 2}, {.p = {.stride = {2, 1}, .padding = {1, 1}, .dilation = {1, 2}, .groups = 2},
                                        .permuted = 1}, 1},
        {{1, 4, 8, 8}, {4, 1, 5, 5}, {.p = {.padding = {2, 2}, .groups = 4}}, 0},
        {{2, 4, 5, 7}, {4, 3, 3, 3}, {.p = {.stride = {2, 2}, .padding = {1, 1}, .output_padding = {1, 0}, .groups = 2},
                                      .transposed = 1}, 1},
        {{1, 3, 6, 4}, {3, 5, 2, 3}, {.p = {.dilation = {2, 1}}, .transposed = 1}, 0},
        /* tensor-core shapes: 32+ channels in and out, a 1x1, an f32 bias beside half operands */
        {{2, 64, 14, 14}, {64, 64, 3, 3}, {.p = {.padding = {1, 1}}}, 2},
        {{3, 32, 9, 10}, {48, 32, 1, 1}, {.transposed = 0}, 1},
        {{2, 64, 7, 7}, {64, 32, 4, 4}, {.p = {.stride = {2, 2}, .padding = {1, 1}}, .transposed = 1}, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int64_t O = cases[i].c.transposed ? cases[i].w[1] * (cases[i].c.p.groups ? cases[i].c.p.groups : 1) : cases[i].w[0];
        int64_t xs[4] = {cases[i].x[0], cases[i].x[1], cases[i].c.permuted ? cases[i].x[3] : cases[i].x[2],
                         cases[i].c.permuted ? cases[i].x[2] : cases[i].x[3]};
        ct_dtype bdt = cases[i].bias == 2 ? CT_F32 : dt;
        ct_tensor *in[3] = {rnd(1100 + i, dt, 4, xs, -1, 1), rnd(1110 + i, dt, 4, cases[i].w, -0.5, 0.5),
                            cases[i].bias ? rnd(1120 + i, bdt, 1, &O, -1, 1) : NULL};
        char what[96];
        snprintf(what, sizeof what, "%s %s case %zu", cases[i].c.transposed ? "conv_transpose2d" : "conv2d",
                 ct_dtype_name(dt), i);
        dc(what, conv_fn, in, cases[i].bias ? 3 : 2, &cases[i].c, tol_of(dt));
        free_all(in, 3);
    }
}

/* Through cuDNN where it loads (its measured picks, then its heuristic ones: other
 * algorithms, e.g. Winograd or FFT, with their own rounding), then through im2col + cuBLAS. */
static void test_conv(void)
{
    if (!dev()) return;
#ifdef CTORCH_HAVE_CUDA
    printf("  cuDNN %zu%s\n", nn_cudnn_version(), nn_cudnn_version() ? "" : " (not loaded: im2col each time)");
#endif
    for (int mode = 2; mode >= 0; mode--) {
#ifdef CTORCH_HAVE_CUDA
        nn_cudnn_mode(mode == 2 ? NN_CUDNN_MEASURE : mode == 1 ? NN_CUDNN_HEURISTIC : NN_CUDNN_OFF);
#endif
        conv_cases(CT_F32);
        conv_cases(CT_F16);
        conv_cases(CT_BF16);
    }
#ifdef CTORCH_HAVE_CUDA
    nn_cudnn_mode(NN_CUDNN_MEASURE);
#endif
}

/* ---- matmul, linear ---- */

typedef struct mm_ctx {
    int tb;      /* b given transposed (a [N, K] tensor viewed as [K, N]) */
    int sliced;  /* a with no unit stride: every other column of a wider tensor */
} mm_ctx;

static ct_status mm_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    (void)n_in;
    mm_ctx *c = vctx;
    ct_tensor *a = in[0], *b = in[1], *t[2] = {0};
    ct_status s = CT_OK;
    if (c->tb) s = ct_transpose(b, -2, -1, &t[0]), b = t[0];
    if (s == CT_OK && c->sliced) {
        int nd = ct_tensor_ndim(a);
        s = ct_slice(a, nd - 1, 0, ct_tensor_shape(a)[nd - 1], 2, &t[1]), a = t[1];
    }
    if (s == CT_OK) s = ct_matmul(a, b, out);
    free_all(t, 2);
    return s;
}

static void test_matmul(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    uint64_t seed = 800;
    for (int d = 0; d < 3; d++) {
        /* plain; b transposed; batched with broadcast; vector; a with no unit stride */
        struct {
            int na, nb;
            int64_t a[4], b[4];
            mm_ctx c;
        } cases[] = {
            {2, 2, {37, 129}, {129, 61}, {0, 0}},
            {2, 2, {64, 100}, {33, 100}, {1, 0}},
            {4, 3, {3, 1, 17, 40}, {4, 40, 9}, {0, 0}},
            {1, 2, {77}, {77, 5}, {0, 0}},
            {3, 2, {2, 13, 2 * 31}, {31, 8}, {0, 1}},
            {3, 3, {5, 1, 64}, {5, 64, 1000}, {0, 0}},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            ct_tensor *in[2] = {rnd(seed, dts[d], cases[i].na, cases[i].a, -1, 1),
                                rnd(seed + 1, dts[d], cases[i].nb, cases[i].b, -1, 1)};
            seed += 2;
            char what[96];
            snprintf(what, sizeof what, "matmul %s case %zu", ct_dtype_name(dts[d]), i);
            dc(what, mm_fn, in, 2, &cases[i].c, tol_of(dts[d]));
            free_all(in, 2);
        }
    }
}

typedef struct lin_ctx {
    int narrow_x, transpose_w;
} lin_ctx;

static ct_status lin_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    lin_ctx *c = vctx;
    ct_tensor *x = in[0], *w = in[1], *t[2] = {0};
    ct_status s = CT_OK;
    if (c->narrow_x) s = ct_narrow(x, 0, 1, ct_tensor_shape(x)[0] - 1, &t[0]), x = t[0];
    if (s == CT_OK && c->transpose_w) s = ct_transpose(w, 0, 1, &t[1]), w = t[1];
    if (s == CT_OK) s = ct_linear(x, w, n_in > 2 ? in[2] : NULL, out);
    free_all(t, 2);
    return s;
}

static void test_linear(void)
{
    if (!dev()) return;
    static const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16};
    static const int64_t rows[] = {1, 3, 8, 9, 70};
    uint64_t seed = 900;
    for (int d = 0; d < 3; d++)
        for (size_t ri = 0; ri < sizeof rows / sizeof rows[0]; ri++)
            for (int variant = 0; variant < 3; variant++) {
                int64_t K = variant == 2 ? 203 : 256, N = 97;
                /* variants: dense with bias; x rows narrowed from a [M+1, 2, K] tensor (3-D) ; W transposed, odd K */
                int64_t xs3[3] = {rows[ri] + 1, 2, K}, xs2[2] = {rows[ri], K};
                int64_t ws[2] = {variant == 2 ? K : N, variant == 2 ? N : K};
                ct_tensor *in[3] = {variant == 1 ? rnd(seed, CT_F32, 3, xs3, -1, 1) : rnd(seed, CT_F32, 2, xs2, -1, 1),
                                    rnd(seed + 1, dts[d], 2, ws, -0.2, 0.2),
                                    variant == 0 ? rnd(seed + 2, CT_F16, 1, &N, -1, 1) : NULL};
                seed += 3;
                lin_ctx c = {.narrow_x = variant == 1, .transpose_w = variant == 2};
                char what[96];
                snprintf(what, sizeof what, "linear w %s M %lld variant %d", ct_dtype_name(dts[d]), (long long)rows[ri],
                         variant);
                /* up to 8 rows of x (variant 1 has 2 per row index), f16/bf16 weights meet f32 x
                 * exactly (f32 products and sums) */
                int64_t M = variant == 1 ? 2 * rows[ri] : rows[ri];
                dc(what, lin_fn, in, variant == 0 ? 3 : 2, &c, M <= 8 ? TOL_F32 : tol_of(dts[d]));
                free_all(in, 3);
            }
}

/* ---- sdpa ---- */

typedef struct att_ctx {
    ct_sdpa_params p;
    int64_t L;        /* > 0: a length tensor (the first L keys of the cache) */
    int permute_q;    /* q given as [B, T, H, D] permuted to [B, H, T, D] */
    int narrow_cache; /* k, v narrowed from a longer cache along T */
    int mask;
} att_ctx;

static ct_status att_fn(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    (void)n_in;
    att_ctx *c = vctx;
    ct_tensor *q = in[0], *k = in[1], *v = in[2], *t[4] = {0};
    ct_status s = CT_OK;
    if (c->permute_q) s = ct_permute(q, (int[]){0, 2, 1, 3}, &t[0]), q = t[0];
    if (s == CT_OK && c->narrow_cache) {
        int64_t Tk = ct_tensor_shape(k)[2] - 3;
        s = ct_narrow(k, 2, 0, Tk, &t[1]), k = t[1];
        if (s == CT_OK) s = ct_narrow(v, 2, 0, Tk, &t[2]), v = t[2];
    }
    ct_sdpa_params p = c->p;
    if (s == CT_OK && c->L > 0) {
        int64_t L = c->L;
        s = ct_tensor_from_data(1, (int64_t[]){1}, CT_I64, &L, &t[3]);
        p.length = t[3];
    }
    if (s == CT_OK) s = ct_sdpa(q, k, v, c->mask ? in[3] : NULL, &p, out);
    free_all(t, 4);
    return s;
}

static void att_case(const char *name, ct_dtype kv, int64_t B, int64_t Hq, int64_t Hkv, int64_t Tq, int64_t Tk,
                     int64_t D, int64_t Dv, att_ctx c, uint64_t seed)
{
    int64_t qs[4] = {B, c.permute_q ? Tq : Hq, c.permute_q ? Hq : Tq, D};
    int64_t Tc = Tk + (c.narrow_cache ? 3 : 0);
    int64_t ks[4] = {B, Hkv, Tc, D}, vs[4] = {B, Hkv, Tc, Dv}, ms[4] = {1, Hq, Tq, Tk};
    ct_tensor *in[4] = {rnd(seed, CT_F32, 4, qs, -1, 1), rnd(seed + 1, kv, 4, ks, -1, 1), rnd(seed + 2, kv, 4, vs, -2, 2),
                        c.mask ? rnd(seed + 3, CT_F32, 4, ms, -3, 0) : NULL};
    char what[128];
    snprintf(what, sizeof what, "sdpa %s (kv %s, B %lld Hq %lld Hkv %lld Tq %lld Tk %lld D %lld Dv %lld)", name,
             ct_dtype_name(kv), (long long)B, (long long)Hq, (long long)Hkv, (long long)Tq, (long long)Tk, (long long)D,
             (long long)Dv);
    /* the shapes attention_tc.cu takes (nn_sdpa_tc_ok) */
    int tc = Tq >= 32 && D == Dv && (D == 64 || D == 128 || D == 256);
    dc(what, att_fn, in, c.mask ? 4 : 3, &c, tc ? TOL_TC : TOL_F32);
    free_all(in, 4);
}

static void test_sdpa_prefill(void)
{
    if (!dev()) return;
    for (int f = 0; f < 2; f++) {
        ct_dtype kv = f ? CT_F16 : CT_F32;
        att_case("causal GQA", kv, 1, 8, 2, 37, 37, 64, 64, (att_ctx){.p = {.causal = true}}, 1000);
        att_case("causal, past keys", kv, 2, 4, 4, 20, 53, 32, 32, (att_ctx){.p = {.causal = true}}, 1010);
        att_case("sliding window", kv, 1, 6, 3, 70, 70, 64, 64, (att_ctx){.p = {.causal = true, .window = 9}}, 1020);
        att_case("mask, not causal, scale", kv, 2, 4, 1, 17, 45, 48, 80,
                 (att_ctx){.p = {.scale = 0.3}, .mask = 1}, 1030);
        att_case("permuted q, narrowed cache", kv, 1, 4, 2, 33, 40, 64, 64,
                 (att_ctx){.p = {.causal = true}, .permute_q = 1, .narrow_cache = 1}, 1040);
        att_case("head dim 256", kv, 1, 4, 1, 25, 25, 256, 256, (att_ctx){.p = {.causal = true}}, 1050);
        att_case("odd head dim", kv, 1, 3, 3, 9, 9, 7, 5, (att_ctx){.p = {.causal = true}}, 1060);
        att_case("length tensor", kv, 1, 8, 2, 5, 64, 64, 64, (att_ctx){.p = {.causal = true}, .L = 41}, 1070);
    }
}

/* Prefill on tensor cores: query tiles of 64 rows, key tiles of 64, partial tiles at both ends. */
static void test_sdpa_prefill_tc(void)
{
    if (!dev()) return;
    for (int f = 0; f < 2; f++) {
        ct_dtype kv = f ? CT_F16 : CT_F32;
        att_case("tc pp512 layer", kv, 1, 32, 4, 512, 512, 64, 64, (att_ctx){.p = {.causal = true}}, 1100);
        att_case("tc D 128, past keys", kv, 2, 4, 2, 100, 300, 128, 128, (att_ctx){.p = {.causal = true}}, 1110);
        att_case("tc window", kv, 1, 4, 1, 200, 200, 64, 64, (att_ctx){.p = {.causal = true, .window = 37}}, 1120);
        att_case("tc window D 128, past keys", kv, 1, 2, 2, 70, 150, 128, 128,
                 (att_ctx){.p = {.causal = true, .window = 64}}, 1125);
        att_case("tc length tensor", kv, 1, 8, 2, 64, 200, 64, 64, (att_ctx){.p = {.causal = true}, .L = 150}, 1130);
        att_case("tc length < Tq (rows see nothing)", kv, 1, 2, 1, 40, 40, 64, 64,
                 (att_ctx){.p = {.causal = true}, .L = 20}, 1135);
        att_case("tc mask, not causal", kv, 2, 4, 2, 45, 90, 64, 64, (att_ctx){.p = {.scale = 0.2}, .mask = 1}, 1140);
        att_case("tc mask + causal D 128", kv, 1, 2, 1, 96, 96, 128, 128, (att_ctx){.p = {.causal = true}, .mask = 1},
                 1145);
        att_case("tc permuted q, narrowed cache", kv, 1, 8, 4, 77, 90, 64, 64,
                 (att_ctx){.p = {.causal = true}, .permute_q = 1, .narrow_cache = 1}, 1150);
        /* head dim 256 (Gemma 3: Q in shared memory, 32-key tiles) */
        att_case("tc D 256, gemma pp512 layer", kv, 1, 4, 1, 512, 512, 256, 256, (att_ctx){.p = {.causal = true}}, 1160);
        att_case("tc D 256, local window, past keys", kv, 1, 4, 1, 90, 300, 256, 256,
                 (att_ctx){.p = {.causal = true, .window = 128}}, 1165);
        att_case("tc D 256, length tensor, mask", kv, 2, 2, 1, 40, 120, 256, 256,
                 (att_ctx){.p = {.causal = true}, .L = 100, .mask = 1}, 1170);
        att_case("tc D 256, permuted q, narrowed cache", kv, 1, 8, 2, 33, 70, 256, 256,
                 (att_ctx){.p = {.causal = true}, .permute_q = 1, .narrow_cache = 1}, 1175);
    }
}

/* One decode case (B 1, causal, D = Dv) at each attended length of lens, seeds seed, seed + 1, ... */
static void att_lengths(const char *name, ct_dtype kv, int64_t Hq, int64_t Hkv, int64_t Tk, int64_t D,
                        const int64_t *lens, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++)
        att_case(name, kv, 1, Hq, Hkv, 1, Tk, D, D, (att_ctx){.p = {.causal = true}, .L = lens[i]}, seed + i);
}

static void test_sdpa_decode(void)
{
    if (!dev()) return;
    for (int f = 0; f < 2; f++) {
        ct_dtype kv = f ? CT_F16 : CT_F32;
        /* a 2048-slot cache attended to 1500 (split over key segments), and short */
        att_case("decode, length < cache", kv, 1, 32, 4, 1, 2048, 64, 64, (att_ctx){.p = {.causal = true}, .L = 1500},
                 2000);
        att_case("decode, gemma-like", kv, 1, 4, 1, 1, 1024, 256, 256,
                 (att_ctx){.p = {.causal = true, .window = 512}, .L = 900}, 2010);
        att_case("decode, short", kv, 1, 8, 8, 1, 5, 64, 64, (att_ctx){.p = {.causal = true}}, 2020);
        att_case("decode, permuted q, narrowed", kv, 2, 8, 2, 1, 700, 128, 128,
                 (att_ctx){.p = {.causal = true}, .permute_q = 1, .narrow_cache = 1}, 2030);
        /* the TinyLlama layer at several lengths of a 640-slot cache: 1, mid-segment, full */
        static const int64_t lens[] = {1, 31, 129, 600, 640};
        att_lengths("decode, tinyllama", kv, 32, 4, 640, 64, lens, sizeof lens / sizeof lens[0], 2040);
        att_case("decode, length 0 (zeros)", kv, 1, 8, 2, 1, 300, 64, 64, (att_ctx){.p = {.causal = true}, .L = 0},
                 2050);
        att_case("decode, 16 heads per KV head, mask", kv, 1, 16, 1, 1, 4096, 64, 64,
                 (att_ctx){.p = {.causal = true}, .L = 3000, .mask = 1}, 2060);
        att_case("decode, G 3, D 96, window", kv, 2, 6, 2, 1, 500, 96, 96,
                 (att_ctx){.p = {.causal = true, .window = 100}, .L = 450}, 2070);
        att_case("decode, odd head dim", kv, 1, 4, 2, 1, 257, 7, 5, (att_ctx){.p = {.causal = true}}, 2080);
    }
}

/* The decode kernel's key segments (nn_sdpa_dec_splits: chunks of 32 keys, one or two per
 * segment, more once the grid would pass two blocks per SM or 64 segments): lengths on
 * and next to segment boundaries, windows whose first key starts a segment or ends one, a
 * cache long enough for several chunks per segment (with windows that start at an odd and
 * at an even chunk of a segment, past the chunk staged before the length is read), and the
 * real models'
 * shapes: TinyLlama (32/4 heads, D 64), SmolLM2 135M (9/3, D 64), Gemma 3 270M (4/1, D 256,
 * window 512 on its local layers). The f16 caches with D 64 / 128 / 256 and G <= 8 take the
 * tensor-core kernel instead (attention_dec_tc.cu: warps of 32 keys at D 64, 16 at 128,
 * pairs of warps of 16 at 256, blocks of 4 warps, a merge across blocks): the same lengths
 * cross its warp and block boundaries, the 20,000-slot cache gives each warp several chunks. */
static void test_sdpa_decode_segments(void)
{
    if (!dev()) return;
    for (int f = 0; f < 2; f++) {
        ct_dtype kv = f ? CT_F16 : CT_F32;
        /* a 640-slot cache: 10 segments of 64 keys, chunks of 32 */
        static const int64_t lens[] = {2, 31, 32, 33, 63, 64, 65, 128, 129, 576, 639};
        att_lengths("decode segments, tinyllama", kv, 32, 4, 640, 64, lens, sizeof lens / sizeof lens[0], 2090);
        att_case("decode segments, window from a boundary", kv, 1, 32, 4, 1, 640, 64, 64,
                 (att_ctx){.p = {.causal = true, .window = 128}, .L = 320}, 2110);
        att_case("decode segments, window to a boundary", kv, 1, 32, 4, 1, 640, 64, 64,
                 (att_ctx){.p = {.causal = true, .window = 100}, .L = 256}, 2111);
        att_case("decode segments, window 1", kv, 1, 32, 4, 1, 640, 64, 64,
                 (att_ctx){.p = {.causal = true, .window = 1}, .L = 300}, 2112);
        att_case("decode segments, window past the start", kv, 1, 32, 4, 1, 640, 64, 64,
                 (att_ctx){.p = {.causal = true, .window = 500}, .L = 70}, 2113);
        att_case("decode segments, several chunks each", kv, 1, 32, 4, 1, 20000, 64, 64,
                 (att_ctx){.p = {.causal = true}, .L = 19001}, 2120);
        att_case("decode segments, window from an odd chunk", kv, 1, 32, 4, 1, 20000, 64, 64,
                 (att_ctx){.p = {.causal = true, .window = 100}, .L = 19001}, 2121);
        att_case("decode segments, window from an even chunk", kv, 1, 32, 4, 1, 20000, 64, 64,
                 (att_ctx){.p = {.causal = true, .window = 151}, .L = 19001}, 2122);
        att_case("decode segments, smollm2", kv, 1, 9, 3, 1, 2048, 64, 64, (att_ctx){.p = {.causal = true}, .L = 600},
                 2130);
        att_case("decode segments, smollm2 full", kv, 1, 9, 3, 1, 640, 64, 64, (att_ctx){.p = {.causal = true}}, 2131);
        att_case("decode segments, tinyllama 2048", kv, 1, 32, 4, 1, 2048, 64, 64,
                 (att_ctx){.p = {.causal = true}, .L = 600}, 2132);
        att_case("decode segments, gemma local", kv, 1, 4, 1, 1, 2048, 256, 256,
                 (att_ctx){.p = {.causal = true, .window = 512}, .L = 2000}, 2140);
        att_case("decode segments, gemma global", kv, 1, 4, 1, 1, 2048, 256, 256,
                 (att_ctx){.p = {.causal = true}, .L = 1999}, 2141);
        att_case("decode segments, 16 heads, D 256, Dv 128", kv, 2, 32, 2, 1, 300, 256, 128,
                 (att_ctx){.p = {.causal = true}, .L = 250, .mask = 1}, 2150);
        att_case("decode segments, 8 heads, D 256", kv, 1, 8, 1, 1, 100, 256, 256,
                 (att_ctx){.p = {.causal = true}, .L = 97}, 2151);
        /* shapes of the tensor-core kernel (f16, D 64 / 128, G <= 8) the cases above leave: a
         * mask, D 128 with a window across blocks, one query head per KV head */
        att_case("decode segments, G 4, mask", kv, 1, 8, 2, 1, 700, 64, 64,
                 (att_ctx){.p = {.causal = true}, .L = 650, .mask = 1}, 2160);
        att_case("decode segments, G 6, D 128, window, mask", kv, 2, 6, 1, 1, 1000, 128, 128,
                 (att_ctx){.p = {.causal = true, .window = 300}, .L = 999, .mask = 1}, 2161);
        att_case("decode segments, G 1", kv, 1, 4, 4, 1, 300, 64, 64, (att_ctx){.p = {.causal = true}, .L = 200}, 2162);
        /* D 256 on tensor cores: two warps a span of 16 keys, four spans a block, so the
         * lengths cross a span (16), a block (64) and the merge; a window, a mask, two KV heads */
        static const int64_t glens[] = {1, 15, 16, 17, 33, 63, 64, 65, 100, 639};
        att_lengths("decode segments, gemma 640", kv, 4, 1, 640, 256, glens, sizeof glens / sizeof glens[0], 2170);
        att_case("decode segments, gemma 640, window", kv, 1, 4, 1, 1, 640, 256, 256,
                 (att_ctx){.p = {.causal = true, .window = 512}, .L = 600}, 2185);
        att_case("decode segments, G 2, D 256, mask", kv, 2, 4, 2, 1, 200, 256, 256,
                 (att_ctx){.p = {.causal = true}, .L = 150, .mask = 1}, 2186);
    }
}

/* ---- a recorded decode step of nn ops, replayed on the device ---- */

/* a cache of several decode key segments (32 keys each), positions ST_STEP apart cross them */
enum { ST_DM = 128, ST_HQ = 4, ST_HKV = 2, ST_HD = 32, ST_NCTX = 320, ST_STEP = 7 };

typedef struct step_in {
    ct_tensor *x, *pos, *slot, *len; /* the step's parameters, rewritten before each run */
    ct_tensor *wn, *wq, *wk;         /* weights */
} step_in;

/* rms_norm -> q/k projections (f16 weights) -> rope -> KV rows written at slots held in a
 * tensor -> attention over the cache up to a length held in a tensor -> softmax. */
static ct_status step_ops(const step_in *in, ct_tensor *kc, ct_tensor *vc, ct_tensor **out)
{
    ct_tensor *t[12] = {0};
    ct_rope_params rp = {.n_dims = ST_HD, .freq_base = 10000, .freq_scale = 1, .mode = CT_ROPE_NEOX};
    ct_sdpa_params sp = {.causal = true, .length = in->len};
    ct_status s = ct_rms_norm(in->x, in->wn, 1e-6, &t[0]);
    if (s == CT_OK) s = ct_linear(t[0], in->wq, NULL, &t[1]);
    if (s == CT_OK) s = ct_linear(t[0], in->wk, NULL, &t[2]);
    if (s == CT_OK) s = ct_view(t[1], 3, (int64_t[]){1, ST_HQ, ST_HD}, &t[3]);
    if (s == CT_OK) s = ct_view(t[2], 3, (int64_t[]){1, ST_HKV, ST_HD}, &t[4]);
    if (s == CT_OK) s = ct_rope(t[3], in->pos, &rp, &t[5]);
    if (s == CT_OK) s = ct_rope(t[4], in->pos, &rp, &t[6]);
    if (s == CT_OK) s = ct_view(t[6], 2, (int64_t[]){ST_HKV, ST_HD}, &t[7]);
    if (s == CT_OK) s = ct_view(kc, 2, (int64_t[]){ST_HKV * ST_NCTX, ST_HD}, &t[8]);
    if (s == CT_OK) s = ct_view(vc, 2, (int64_t[]){ST_HKV * ST_NCTX, ST_HD}, &t[9]);
    if (s == CT_OK) s = ct_set_rows(t[8], t[7], in->slot);
    if (s == CT_OK) s = ct_set_rows(t[9], t[7], in->slot);
    ct_tensor *q4 = NULL, *k4 = NULL, *v4 = NULL, *att = NULL;
    if (s == CT_OK) s = ct_view(t[5], 4, (int64_t[]){1, ST_HQ, 1, ST_HD}, &q4);
    if (s == CT_OK) s = ct_view(kc, 4, (int64_t[]){1, ST_HKV, ST_NCTX, ST_HD}, &k4);
    if (s == CT_OK) s = ct_view(vc, 4, (int64_t[]){1, ST_HKV, ST_NCTX, ST_HD}, &v4);
    if (s == CT_OK) s = ct_sdpa(q4, k4, v4, NULL, &sp, &att);
    if (s == CT_OK) s = ct_softmax(att, -1, out);
    ct_tensor *more[] = {q4, k4, v4, att};
    free_all(more, 4);
    free_all(t, 12);
    return s;
}

static void step_params(step_in *in, int step)
{
    int pos = step * ST_STEP;
    void *p;
    th_rng r = {(uint64_t)(5000 + step)};
    if (ct_tensor_data_mut(in->x, &p) == CT_OK)
        for (int i = 0; i < ST_DM; i++) ((float *)p)[i] = (float)th_uniform(&r, -1, 1);
    if (ct_tensor_data_mut(in->pos, &p) == CT_OK) ((int32_t *)p)[0] = pos;
    if (ct_tensor_data_mut(in->len, &p) == CT_OK) ((int32_t *)p)[0] = pos + 1;
    if (ct_tensor_data_mut(in->slot, &p) == CT_OK)
        for (int h = 0; h < ST_HKV; h++) ((int32_t *)p)[h] = h * ST_NCTX + pos;
}

/* The step recorded on the device at position 0 and replayed for steps 1..39 at positions
 * ST_STEP apart, so the attended length crosses the decode kernel's key segments (the
 * parameters rewritten in place, the cache on the device) against the same ops run
 * eagerly on the CPU with a cache of their own. f16 cache rows are rounded from the two
 * sides' f32 projections, which may straddle an f16 rounding boundary: 1e-6 (one f16 ulp
 * everywhere) bounds it. Whether the device captured it as a graph is printed. */
static void test_step_replay(void)
{
    if (!dev()) return;
    int64_t cs[3] = {ST_HKV, ST_NCTX, ST_HD}, dm = ST_DM;
    step_in in = {.wn = rnd(1, CT_F32, 1, &dm, 0.5, 1.5), .wq = rnd(2, CT_F16, 2, (int64_t[]){ST_HQ * ST_HD, ST_DM}, -0.2, 0.2),
                  .wk = rnd(3, CT_F16, 2, (int64_t[]){ST_HKV * ST_HD, ST_DM}, -0.2, 0.2)};
    CHECK_OK(ct_zeros(2, (int64_t[]){1, ST_DM}, CT_F32, &in.x));
    CHECK_OK(ct_zeros(1, (int64_t[]){1}, CT_I32, &in.pos));
    CHECK_OK(ct_zeros(1, (int64_t[]){ST_HKV}, CT_I32, &in.slot));
    CHECK_OK(ct_zeros(1, (int64_t[]){1}, CT_I32, &in.len));
    ct_tensor *ka = NULL, *va = NULL, *kb = NULL, *vb = NULL, *out = NULL, *want = NULL;
    CHECK_OK(ct_zeros(3, cs, CT_F16, &ka));
    CHECK_OK(ct_zeros(3, cs, CT_F16, &va));
    CHECK_OK(ct_zeros(3, cs, CT_F16, &kb));
    CHECK_OK(ct_zeros(3, cs, CT_F16, &vb));
    ct_tensor *placed[] = {in.wn, in.wq, in.wk, ka, va};
    for (int i = 0; i < 5; i++) CHECK_OK(ct_tensor_place(placed[i], g_dev));
    step_params(&in, 0);
    ct_step *st = NULL;
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_step_begin());
    CHECK_OK(step_ops(&in, ka, va, &out));
    CHECK_OK(ct_step_end(&st));
    double worst = 0;
    for (int pos = 0; st && pos < 40; pos++) {
        if (pos > 0) {
            step_params(&in, pos);
            CHECK_OK(ct_exec_force_device(NULL));
            CHECK_OK(ct_step_run(st));
        }
        CHECK_OK(ct_exec_force_device("cpu"));
        CHECK_OK(step_ops(&in, kb, vb, &want));
        CHECK_OK(ct_exec_force_device(NULL));
        double *a = out ? th_values(out) : NULL, *b = want ? th_values(want) : NULL;
        int nonfinite = 0;
        double e = a && b ? devcheck_nmse(a, b, ST_HQ * ST_HD, &nonfinite) : INFINITY;
        CHECK_MSG(e <= 1e-6 && !nonfinite, "position %d: replayed step vs the cpu: NMSE %.3g", pos, e);
        worst = e > worst ? e : worst;
        free(a), free(b);
        ct_tensor_free(want);
        want = NULL;
    }
    ct_step_info info = {0};
    if (st) CHECK_OK(ct_step_get_info(st, &info));
    fprintf(stderr, "  step: %d ops, captured as a device graph: %s; worst NMSE over 40 positions %.3g\n", info.n_ops,
            info.captured ? "yes" : "no", worst);
    ct_step_free(st);
    ct_tensor *all[] = {out, ka, va, kb, vb, in.x, in.pos, in.slot, in.len, in.wn, in.wq, in.wk};
    free_all(all, 12);
}

/* What the CPU reports as errors cannot be reported from an asynchronous kernel; the device
 * never answers silently instead: an id out of range gives a NaN row, a length out of
 * range a NaN output, and a bad set_rows index writes nothing. */
static void test_bad_data(void)
{
    if (!dev()) return;
    CHECK_OK(ct_exec_force_device(g_dev));
    int64_t wshape[2] = {10, 4}, ids[3] = {1, 10, 2}, qshape[4] = {1, 2, 1, 8}, kshape[4] = {1, 2, 6, 8};
    ct_tensor *w = rnd(1, CT_F32, 2, wshape, -1, 1), *idt = index_tensor(CT_I64, 3, ids), *e = NULL;
    CHECK_OK(ct_embedding(w, idt, &e));
    double *ev = e ? th_values(e) : NULL;
    for (int i = 0; ev && i < 12; i++)
        CHECK_MSG((i >= 4 && i < 8) == isnan(ev[i]), "embedding element %d = %g (row 1 has id 10 of 10)", i, ev[i]);
    ct_tensor *q = rnd(2, CT_F32, 4, qshape, -1, 1), *k = rnd(3, CT_F32, 4, kshape, -1, 1), *y = NULL, *len = NULL;
    int64_t L = 7;
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){1}, CT_I64, &L, &len));
    ct_sdpa_params p = {.causal = true, .length = len};
    CHECK_OK(ct_sdpa(q, k, k, NULL, &p, &y));
    double *yv = y ? th_values(y) : NULL;
    for (int i = 0; yv && i < 16; i++) CHECK_MSG(isnan(yv[i]), "sdpa with length 7 of 6 keys: element %d = %g", i, yv[i]);
    int64_t bad[2] = {0, 10}, rshape[2] = {2, 4};
    ct_tensor *dst = rnd(4, CT_F32, 2, wshape, -1, 1), *rows = rnd(5, CT_F32, 2, rshape, -1, 1);
    ct_tensor *bi = index_tensor(CT_I32, 2, bad);
    double *before = th_values(dst);
    CHECK_OK(ct_set_rows(dst, rows, bi));
    double *after = th_values(dst);
    CHECK_MSG(before && after && memcmp(before, after, sizeof(double) * 40) == 0, "set_rows with index 10 of 10 wrote rows");
    ct_exec_force_device(NULL);
    free(ev), free(yv), free(before), free(after);
    ct_tensor *all[] = {w, idt, e, q, k, y, len, dst, rows, bi};
    free_all(all, 10);
}

int main(int argc, char **argv)
{
    setenv("CTORCH_CUDA_POISON", "1", 0);
    th_args(argc, argv);
    RUN(test_softmax);
    RUN(test_rms_norm);
    RUN(test_layer_norm);
    RUN(test_batch_norm);
    RUN(test_rope);
    RUN(test_embedding);
    RUN(test_set_rows);
    RUN(test_pool);
    RUN(test_conv);
    RUN(test_matmul);
    RUN(test_linear);
    RUN(test_sdpa_prefill);
    RUN(test_sdpa_prefill_tc);
    RUN(test_sdpa_decode);
    RUN(test_sdpa_decode_segments);
    RUN(test_step_replay);
    RUN(test_bad_data);
    for (int i = 0; i < 8; i++)
        if (g_seen[i].used)
            fprintf(stderr, "tolerance %.3g: worst NMSE %.3g\n", g_seen[i].tol, g_seen[i].worst);
    return th_finish();
}
