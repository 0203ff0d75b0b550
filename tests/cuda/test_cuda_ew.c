/* The CUDA ew group against the CPU backend: every op forced onto cuda:0 and onto the
 * CPU from the same inputs (tests/support/devcheck.h), on f32/f16/bf16 (and the integer
 * dtypes where the op has them), contiguous, strided (transposed, stepped slices) and
 * broadcast. Fresh device allocations are NaN (CTORCH_CUDA_POISON=1), so an output element
 * a kernel leaves unwritten fails as a NaN mismatch.
 *
 * Tolerances (normalized MSE, sum (a-b)^2 / sum b^2):
 *  - exact (0): copies and conversions, fill/arange/eye, uniform rand, comparisons, where,
 *    integer arithmetic, max/min/argmax: both sides round the same values the same way.
 *  - f32 1e-11: CUDA's libm and glibc differ by a few ulp (2^-23 ~ 1.2e-7 relative), an
 *    NMSE of ~1e-13; 1e-11 leaves margin and still fails on any wrong formula or element.
 *  - f16 1e-6 / bf16 1e-4: the result is rounded to 11 / 8 bits; where the float results
 *    differ by an ulp across a rounding boundary one element moves by 2^-11 / 2^-8
 *    relative, which squared and averaged stays well below these.
 *  - reductions accumulate in double on both sides (different order): f32 1e-11 too. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"

static char g_dev[32];
static const char *dev_or_skip(void) { return devcheck_device("cuda", g_dev, sizeof g_dev); }

static double tol_for(ct_dtype t)
{
    return t == CT_F16 ? 1e-6 : t == CT_BF16 ? 1e-4 : 1e-11;
}

typedef ct_status (*bin_fn)(const ct_tensor *, const ct_tensor *, ct_tensor **);
typedef ct_status (*un_fn)(const ct_tensor *, ct_tensor **);
typedef ct_status (*red_fn)(const ct_tensor *, const int *, int, bool, ct_tensor **);
typedef struct { bin_fn f; } bin_ctx;
typedef struct { un_fn f; } un_ctx;

static ct_status call_bin(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    return ((bin_ctx *)ctx)->f(in[0], in[1], out);
}

static ct_status call_un(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    return ((un_ctx *)ctx)->f(in[0], out);
}

/* Input layouts: the same logical [R, C] tensor stored contiguously, as the transpose of
 * a [C, R] tensor, or as every other row of a [2R, C] tensor. */
enum layout { CONTIG, TRANSPOSED, STEPPED, N_LAYOUTS };
static const char *layout_name[] = {"contiguous", "transposed", "stepped"};

static ct_tensor *make_input(th_rng *r, enum layout l, int64_t R, int64_t C, ct_dtype dt, double lo, double hi)
{
    ct_tensor *base = NULL, *v = NULL;
    if (l == CONTIG) return th_random(r, 2, (int64_t[]){R, C}, dt, lo, hi);
    if (l == TRANSPOSED) {
        base = th_random(r, 2, (int64_t[]){C, R}, dt, lo, hi);
        CHECK_OK(ct_transpose(base, 0, 1, &v));
    } else {
        base = th_random(r, 2, (int64_t[]){2 * R, C}, dt, lo, hi);
        CHECK_OK(ct_slice(base, 0, 1, 2 * R, 2, &v));
    }
    ct_tensor_free(base); /* the view keeps the storage */
    return v;
}

static const ct_dtype g_float_types[] = {CT_F32, CT_F16, CT_BF16};

static void test_binary(void)
{
    const char *dev = dev_or_skip();
    if (!dev) return;
    struct { const char *name; bin_fn f; double lo, hi; } ops[] = {
        {"add", ct_add, -4, 4}, {"sub", ct_sub, -4, 4}, {"mul", ct_mul, -4, 4}, {"div", ct_div, 0.5, 4},
        {"pow", ct_pow, 0.5, 2}, {"maximum", ct_maximum, -4, 4}, {"minimum", ct_minimum, -4, 4},
        {"swiglu", ct_swiglu, -6, 6}, {"geglu", ct_geglu, -6, 6},
    };
    th_rng r = {11};
    for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
        for (int t = 0; t < 3; t++)
            for (int l = 0; l < N_LAYOUTS; l++) {
                ct_dtype dt = g_float_types[t];
                /* odd sizes: vector tails and unaligned rows */
                ct_tensor *in[2] = {make_input(&r, (enum layout)l, 37, 131, dt, ops[o].lo, ops[o].hi),
                                    make_input(&r, CONTIG, 37, 131, dt, ops[o].lo, ops[o].hi)};
                char what[96];
                snprintf(what, sizeof what, "%s %s %s", ops[o].name, ct_dtype_name(dt), layout_name[l]);
                bin_ctx c = {ops[o].f};
                devcheck_op(dev, what, call_bin, in, 2, &c, tol_for(dt));
                /* broadcast: a row vector and a column vector */
                ct_tensor *row = th_random(&r, 1, (int64_t[]){131}, dt, ops[o].lo, ops[o].hi);
                ct_tensor *col = th_random(&r, 2, (int64_t[]){37, 1}, dt, ops[o].lo, ops[o].hi);
                ct_tensor *b1[2] = {in[0], row}, *b2[2] = {col, in[1]};
                snprintf(what, sizeof what, "%s %s %s, row broadcast", ops[o].name, ct_dtype_name(dt), layout_name[l]);
                devcheck_op(dev, what, call_bin, b1, 2, &c, tol_for(dt));
                snprintf(what, sizeof what, "%s %s, column broadcast", ops[o].name, ct_dtype_name(dt));
                if (l == CONTIG) devcheck_op(dev, what, call_bin, b2, 2, &c, tol_for(dt));
                ct_tensor_free(row);
                ct_tensor_free(col);
                ct_tensor_free(in[0]);
                ct_tensor_free(in[1]);
            }
    /* a large contiguous pair (the 16-byte vector path) and integer arithmetic (exact) */
    for (int t = 0; t < 3; t++) {
        ct_tensor *in[2] = {th_random(&r, 1, (int64_t[]){1 << 20}, g_float_types[t], -3, 3),
                            th_random(&r, 1, (int64_t[]){1 << 20}, g_float_types[t], -3, 3)};
        bin_ctx c = {ct_mul};
        devcheck_op(dev, "mul 1M vector path", call_bin, in, 2, &c, tol_for(g_float_types[t]));
        ct_tensor_free(in[0]);
        ct_tensor_free(in[1]);
    }
    ct_dtype ints[] = {CT_I32, CT_I64, CT_I8};
    bin_fn ifn[] = {ct_add, ct_sub, ct_mul, ct_maximum, ct_minimum};
    for (int t = 0; t < 3; t++)
        for (int k = 0; k < 5; k++) {
            ct_tensor *in[2] = {make_input(&r, TRANSPOSED, 17, 33, ints[t], -60, 60),
                                make_input(&r, CONTIG, 17, 33, ints[t], -60, 60)};
            bin_ctx c = {ifn[k]};
            devcheck_op(dev, "integer binary", call_bin, in, 2, &c, 0);
            ct_tensor_free(in[0]);
            ct_tensor_free(in[1]);
        }
}

/* Scalar forms, unary functions and activations */
typedef struct { int which; double s; } sc_ctx;

static ct_status call_scalar(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    sc_ctx *c = ctx;
    switch (c->which) {
    case 0: return ct_add_scalar(in[0], c->s, out);
    case 1: return ct_sub_scalar(in[0], c->s, out);
    case 2: return ct_mul_scalar(in[0], c->s, out);
    case 3: return ct_div_scalar(in[0], c->s, out);
    case 4: return ct_pow_scalar(in[0], c->s, out);
    case 5: return ct_clamp(in[0], -0.5, 0.75, out);
    case 6: return ct_gelu(in[0], true, out);
    default: return ct_gelu(in[0], false, out);
    }
}

static void test_unary(void)
{
    const char *dev = dev_or_skip();
    if (!dev) return;
    struct { const char *name; un_fn f; double lo, hi; } ops[] = {
        {"neg", ct_neg, -4, 4}, {"abs", ct_abs, -4, 4}, {"exp", ct_exp, -8, 8}, {"log", ct_log, 0.01, 50},
        {"sqrt", ct_sqrt, 0, 50}, {"rsqrt", ct_rsqrt, 0.01, 50}, {"sin", ct_sin, -10, 10}, {"cos", ct_cos, -10, 10},
        {"relu", ct_relu, -4, 4}, {"silu", ct_silu, -20, 20}, {"sigmoid", ct_sigmoid, -20, 20},
        {"tanh", ct_tanh, -5, 5},
    };
    th_rng r = {12};
    for (int t = 0; t < 3; t++)
        for (int l = 0; l < N_LAYOUTS; l++) {
            ct_dtype dt = g_float_types[t];
            char what[96];
            for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
                ct_tensor *in = make_input(&r, (enum layout)l, 29, 67, dt, ops[o].lo, ops[o].hi);
                snprintf(what, sizeof what, "%s %s %s", ops[o].name, ct_dtype_name(dt), layout_name[l]);
                un_ctx c = {ops[o].f};
                devcheck_op(dev, what, call_un, &in, 1, &c, tol_for(dt));
                ct_tensor_free(in);
            }
            for (int k = 0; k < 8; k++) {
                sc_ctx c = {k, k == 4 ? 1.7 : -1.25};
                ct_tensor *in = make_input(&r, (enum layout)l, 29, 67, dt, k == 4 ? 0.1 : -6, 6);
                snprintf(what, sizeof what, "scalar/activation form %d %s %s", k, ct_dtype_name(dt), layout_name[l]);
                devcheck_op(dev, what, call_scalar, &in, 1, &c, tol_for(dt));
                ct_tensor_free(in);
            }
        }
    /* integers: neg, abs, relu, clamp and the scalar forms are exact */
    ct_dtype ints[] = {CT_I32, CT_I64, CT_I8};
    for (int t = 0; t < 3; t++) {
        ct_tensor *in = make_input(&r, STEPPED, 13, 41, ints[t], -100, 100);
        un_fn f[] = {ct_neg, ct_abs, ct_relu};
        for (int k = 0; k < 3; k++) {
            un_ctx c = {f[k]};
            devcheck_op(dev, "integer unary", call_un, &in, 1, &c, 0);
        }
        sc_ctx cl = {5, 0}, add = {0, 3}, mul = {2, -2};
        devcheck_op(dev, "integer clamp", call_scalar, &in, 1, &cl, 0);
        devcheck_op(dev, "integer add_scalar", call_scalar, &in, 1, &add, 0);
        devcheck_op(dev, "integer mul_scalar", call_scalar, &in, 1, &mul, 0);
        ct_tensor_free(in);
    }
}

/* compare (tensor and scalar forms, every predicate) and where */
typedef struct { ct_cmp cmp; bool scalar; bool where; } cmp_ctx;

static ct_status call_cmp(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    cmp_ctx *c = ctx;
    if (!c->where) return c->scalar ? ct_compare_scalar(in[0], c->cmp, 0.25, out) : ct_compare(in[0], in[1], c->cmp, out);
    ct_tensor *cond = NULL;
    ct_status s = ct_compare(in[0], in[1], CT_CMP_GT, &cond);
    if (s == CT_OK) s = ct_where(cond, in[0], in[1], out);
    ct_tensor_free(cond);
    return s;
}

static void test_compare_where(void)
{
    const char *dev = dev_or_skip();
    if (!dev) return;
    th_rng r = {13};
    ct_dtype types[] = {CT_F32, CT_F16, CT_BF16, CT_I32, CT_I64, CT_F64};
    for (int t = 0; t < 6; t++)
        for (int l = 0; l < N_LAYOUTS; l++) {
            /* integers from a small range, so equal pairs occur */
            ct_tensor *in[2] = {make_input(&r, (enum layout)l, 23, 45, types[t], -3, 3),
                                make_input(&r, CONTIG, 23, 45, types[t], -3, 3)};
            for (int c = 0; c < 6; c++)
                for (int sc = 0; sc < 2; sc++) {
                    cmp_ctx x = {(ct_cmp)c, sc == 1, false};
                    devcheck_op(dev, "compare", call_cmp, in, 2, &x, 0);
                }
            cmp_ctx w = {CT_CMP_GT, false, true};
            devcheck_op(dev, "where", call_cmp, in, 2, &w, 0);
            ct_tensor_free(in[0]);
            ct_tensor_free(in[1]);
        }
}

/* copies between every pair of plain dtypes, strided source and destination */
typedef struct { ct_dtype to; bool strided_dst; } copy_ctx;

static ct_status call_copy(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    copy_ctx *c = ctx;
    if (!c->strided_dst) return ct_cast(in[0], c->to, out);
    /* write into the transposed view of a fresh [C, R] tensor, then read it back as is */
    const int64_t *sh = ct_tensor_shape(in[0]);
    ct_tensor *base = NULL, *view = NULL;
    ct_status s = ct_zeros(2, (int64_t[]){sh[1], sh[0]}, c->to, &base);
    if (s == CT_OK) s = ct_transpose(base, 0, 1, &view);
    if (s == CT_OK) s = ct_copy_(view, in[0]);
    ct_tensor_free(base);
    if (s != CT_OK) {
        ct_tensor_free(view);
        return s;
    }
    *out = view;
    return CT_OK;
}

static void test_copy_dtypes(void)
{
    const char *dev = dev_or_skip();
    if (!dev) return;
    th_rng r = {14};
    ct_dtype all[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_BOOL, CT_I8};
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            for (int l = 0; l < N_LAYOUTS; l++) {
                ct_tensor *in = make_input(&r, (enum layout)l, 19, 27, all[a], -100, 100);
                copy_ctx c = {all[b], l == TRANSPOSED};
                char what[96];
                snprintf(what, sizeof what, "copy %s -> %s %s", ct_dtype_name(all[a]), ct_dtype_name(all[b]),
                         layout_name[l]);
                devcheck_op(dev, what, call_copy, &in, 1, &c, 0);
                ct_tensor_free(in);
            }
}

/* fill, arange, eye, rand, randn: no inputs */
typedef struct { int which; ct_dtype dt; } cr_ctx;

static ct_status call_create(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)in, (void)n;
    cr_ctx *c = ctx;
    int64_t shape[2] = {123, 77};
    switch (c->which) {
    case 0: return ct_full(2, shape, c->dt, -2.5, out);
    case 1: return ct_arange(-3, 500, 0.75, c->dt, out);
    case 2: return ct_eye(37, 53, c->dt, out);
    case 3: return ct_rand(2, shape, c->dt, 1234, out);
    default: return ct_randn(2, shape, c->dt, 99, out);
    }
}

static void test_create(void)
{
    const char *dev = dev_or_skip();
    if (!dev) return;
    ct_dtype types[] = {CT_F32, CT_F16, CT_BF16, CT_F64, CT_I32};
    for (int t = 0; t < 5; t++)
        for (int k = 0; k < 5; k++) {
            if (types[t] == CT_I32 && k >= 3) continue;
            cr_ctx c = {k, types[t]};
            char what[64];
            snprintf(what, sizeof what, "create %d %s", k, ct_dtype_name(types[t]));
            /* the same Philox stream: uniform draws are bit-identical; normals pass
             * through logf/cosf, which may differ by an ulp */
            devcheck_op(dev, what, call_create, NULL, 0, &c, k == 4 ? tol_for(types[t]) : 0);
        }
}

/* reductions over dim masks, keepdim, strided sources */
typedef struct { int which; int dims[2]; int ndims; bool keepdim; } red_ctx;

static ct_status call_red(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    red_ctx *c = ctx;
    const ct_tensor *a = in[0];
    switch (c->which) {
    case 0: return ct_sum(a, c->dims, c->ndims, c->keepdim, out);
    case 1: return ct_mean(a, c->dims, c->ndims, c->keepdim, out);
    case 2: return ct_prod(a, c->dims, c->ndims, c->keepdim, out);
    case 3: return ct_max(a, c->dims, c->ndims, c->keepdim, out);
    case 4: return ct_min(a, c->dims, c->ndims, c->keepdim, out);
    case 5: return ct_var(a, c->dims, c->ndims, true, c->keepdim, out);
    case 6: return ct_std(a, c->dims, c->ndims, false, c->keepdim, out);
    case 7: return ct_norm(a, 2.0, c->dims, c->ndims, c->keepdim, out);
    case 8: return ct_norm(a, INFINITY, c->dims, c->ndims, c->keepdim, out);
    case 9: return ct_norm(a, 1.5, c->dims, c->ndims, c->keepdim, out);
    case 10: return ct_argmax(a, c->ndims ? c->dims[0] : CT_ALL_DIMS, c->keepdim, out);
    default: return ct_argmin(a, c->ndims ? c->dims[0] : CT_ALL_DIMS, c->keepdim, out);
    }
}

static void test_reduce(void)
{
    const char *dev = dev_or_skip();
    if (!dev) return;
    th_rng r = {15};
    /* [A, B, C] = [6, 300, 9]: dim masks of one dim, two dims and all dims */
    int masks[][2] = {{0, 0}, {1, 0}, {2, 0}, {0, 2}, {1, 2}, {0, 1}};
    int nmask[] = {1, 1, 1, 2, 2, 0};
    ct_dtype types[] = {CT_F32, CT_F16, CT_BF16, CT_I32};
    for (int t = 0; t < 4; t++)
        for (int strided = 0; strided < 2; strided++) {
            ct_tensor *base = th_random(&r, 3, (int64_t[]){6, strided ? 9 : 300, strided ? 300 : 9}, types[t],
                                        types[t] == CT_I32 ? -5 : 0.5, types[t] == CT_I32 ? 5 : 1.5);
            ct_tensor *a = base;
            if (strided) CHECK_OK(ct_transpose(base, 1, 2, &a));
            for (int w = 0; w < 12; w++) {
                if (types[t] == CT_I32 && (w == 2 || (w >= 5 && w <= 9))) continue; /* products overflow; float-only */
                for (int m = 0; m < 6; m++)
                    for (int kd = 0; kd < 2; kd++) {
                        if (w >= 10 && nmask[m] == 2) continue; /* argmax: one dim or all */
                        red_ctx c = {w, {masks[m][0], masks[m][1]}, nmask[m], kd == 1};
                        char what[96];
                        snprintf(what, sizeof what, "reduce %d %s mask %d keepdim %d strided %d", w,
                                 ct_dtype_name(types[t]), m, kd, strided);
                        double tol = w == 2 ? 1e-9 : types[t] == CT_I32 ? 0 : tol_for(types[t]);
                        devcheck_op(dev, what, call_red, &a, 1, &c, tol);
                    }
            }
            if (a != base) ct_tensor_free(a);
            ct_tensor_free(base);
        }
    /* one long row: the split schedule (partials combined by a second kernel) */
    ct_tensor *big = th_random(&r, 1, (int64_t[]){3000001}, CT_F32, -1, 1);
    for (int w = 0; w < 12; w++) {
        if (w == 2) continue;
        red_ctx c = {w, {0, 0}, 0, false};
        devcheck_op(dev, "reduce of 3M elements", call_red, &big, 1, &c, 1e-11);
    }
    ct_tensor_free(big);
}

/* complex64: make, arithmetic, parts */
static ct_status call_complex(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    int which = *(int *)ctx;
    ct_tensor *z = NULL, *w = NULL, *p = NULL;
    ct_status s = ct_complex(in[0], in[1], &z);
    if (s == CT_OK) s = which == 0 ? ct_mul(z, z, &w) : which == 1 ? ct_div(z, z, &w) : ct_conj(z, &w);
    if (s == CT_OK) s = ct_add(w, z, &p);
    if (s == CT_OK) s = which == 2 ? ct_abs(p, out) : which == 1 ? ct_real(p, out) : ct_imag(p, out);
    ct_tensor_free(z);
    ct_tensor_free(w);
    ct_tensor_free(p);
    return s;
}

static void test_complex(void)
{
    const char *dev = dev_or_skip();
    if (!dev) return;
    th_rng r = {16};
    ct_tensor *in[2] = {make_input(&r, TRANSPOSED, 21, 33, CT_F32, -2, 2), make_input(&r, CONTIG, 21, 33, CT_F32, 0.5, 2)};
    for (int k = 0; k < 3; k++) devcheck_op(dev, "complex64", call_complex, in, 2, &k, 1e-11);
    ct_tensor_free(in[0]);
    ct_tensor_free(in[1]);
}

int main(int argc, char **argv)
{
    setenv("CTORCH_CUDA_POISON", "1", 1);
    th_args(argc, argv);
    RUN(test_binary);
    RUN(test_unary);
    RUN(test_compare_where);
    RUN(test_copy_dtypes);
    RUN(test_create);
    RUN(test_reduce);
    RUN(test_complex);
    ct_exec_shutdown();
    return th_finish();
}
