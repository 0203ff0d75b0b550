/* Every op of the OpenCL ew group forced onto the OpenCL device and compared with the CPU
 * backend (tests/support/devcheck.h) on random inputs from fixed seeds: contiguous,
 * transposed, sliced and broadcast operands, every plain dtype the op takes. Fresh device
 * buffers are NaN-poisoned, so an element a kernel fails to write shows as a mismatch.
 *
 * Tolerances (NMSE): integer and bool results, copies, creation, comparisons, where, and
 * the arithmetic that is one IEEE operation (add, sub, mul, div, max, min, neg, abs, relu,
 * clamp) must agree exactly (0); transcendental functions are ~1-4 ulp apart between
 * OpenCL's built-ins and the host's libm: f32 results within 1e-10 (4 ulp is ~1e-13 of
 * the value squared); f16/bf16 outputs differ by one rounding step where the f32 results
 * straddle it: 1e-5. Reductions accumulate in a different order (a tree against a
 * sequential walk): 1e-10 in f32 and f64, 1e-5 for f16 results (one f16 rounding step);
 * pow with a float exponent 1e-10. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/ocl_internal.h"
#endif

static char g_dev[32];

enum {
    OP_CAST, OP_CONTIG, OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAXIMUM, OP_MINIMUM, OP_ADD_S, OP_SUB_S, OP_MUL_S,
    OP_DIV_S, OP_POW_S, OP_CMP, OP_CMP_S, OP_WHERE, OP_NEG, OP_ABS, OP_EXP, OP_LOG, OP_SQRT, OP_RSQRT, OP_SIN, OP_COS,
    OP_CLAMP, OP_RELU, OP_GELU, OP_GELU_TANH, OP_SILU, OP_SIGMOID, OP_TANH, OP_SWIGLU, OP_GEGLU, OP_SUM, OP_MEAN,
    OP_PROD, OP_MAX, OP_MIN, OP_VAR, OP_STD, OP_NORM, OP_ARGMAX, OP_ARGMIN
};

typedef struct ew_case {
    int op;
    ct_dtype dt;    /* OP_CAST: the target */
    double s0, s1;  /* scalars, clamp bounds, norm p */
    ct_cmp cmp;
    int dims[2], ndims; /* reductions; ndims 0: all; argmax/argmin: dims[0] (CT_ALL_DIMS flat) */
    bool keepdim, unbiased;
} ew_case;

static ct_status apply(ct_tensor *const *in, int n_in, ct_tensor **out, void *vctx)
{
    const ew_case *c = vctx;
    const ct_tensor *a = in[0], *b = n_in > 1 ? in[1] : NULL;
    switch (c->op) {
    case OP_CAST: return ct_cast(a, c->dt, out);
    case OP_CONTIG: return ct_contiguous(a, out);
    case OP_ADD: return ct_add(a, b, out);
    case OP_SUB: return ct_sub(a, b, out);
    case OP_MUL: return ct_mul(a, b, out);
    case OP_DIV: return ct_div(a, b, out);
    case OP_POW: return ct_pow(a, b, out);
    case OP_MAXIMUM: return ct_maximum(a, b, out);
    case OP_MINIMUM: return ct_minimum(a, b, out);
    case OP_ADD_S: return ct_add_scalar(a, c->s0, out);
    case OP_SUB_S: return ct_sub_scalar(a, c->s0, out);
    case OP_MUL_S: return ct_mul_scalar(a, c->s0, out);
    case OP_DIV_S: return ct_div_scalar(a, c->s0, out);
    case OP_POW_S: return ct_pow_scalar(a, c->s0, out);
    case OP_CMP: return ct_compare(a, b, c->cmp, out);
    case OP_CMP_S: return ct_compare_scalar(a, c->cmp, c->s0, out);
    case OP_WHERE: return ct_where(in[2], a, b, out);
    case OP_NEG: return ct_neg(a, out);
    case OP_ABS: return ct_abs(a, out);
    case OP_EXP: return ct_exp(a, out);
    case OP_LOG: return ct_log(a, out);
    case OP_SQRT: return ct_sqrt(a, out);
    case OP_RSQRT: return ct_rsqrt(a, out);
    case OP_SIN: return ct_sin(a, out);
    case OP_COS: return ct_cos(a, out);
    case OP_CLAMP: return ct_clamp(a, c->s0, c->s1, out);
    case OP_RELU: return ct_relu(a, out);
    case OP_GELU: return ct_gelu(a, false, out);
    case OP_GELU_TANH: return ct_gelu(a, true, out);
    case OP_SILU: return ct_silu(a, out);
    case OP_SIGMOID: return ct_sigmoid(a, out);
    case OP_TANH: return ct_tanh(a, out);
    case OP_SWIGLU: return ct_swiglu(a, b, out);
    case OP_GEGLU: return ct_geglu(a, b, out);
    case OP_SUM: return ct_sum(a, c->dims, c->ndims, c->keepdim, out);
    case OP_MEAN: return ct_mean(a, c->dims, c->ndims, c->keepdim, out);
    case OP_PROD: return ct_prod(a, c->dims, c->ndims, c->keepdim, out);
    case OP_MAX: return ct_max(a, c->dims, c->ndims, c->keepdim, out);
    case OP_MIN: return ct_min(a, c->dims, c->ndims, c->keepdim, out);
    case OP_VAR: return ct_var(a, c->dims, c->ndims, c->unbiased, c->keepdim, out);
    case OP_STD: return ct_std(a, c->dims, c->ndims, c->unbiased, c->keepdim, out);
    case OP_NORM: return ct_norm(a, c->s0, c->dims, c->ndims, c->keepdim, out);
    case OP_ARGMAX: return ct_argmax(a, c->dims[0], c->keepdim, out);
    case OP_ARGMIN: return ct_argmin(a, c->dims[0], c->keepdim, out);
    }
    return CT_ERR_INVALID_ARG;
}

static ct_tensor *rnd(uint64_t seed, int nd, const int64_t *shape, ct_dtype dt, double lo, double hi)
{
    th_rng r = {seed};
    return th_random(&r, nd, shape, dt, lo, hi);
}

/* t viewed transposed (last two dims), so kernels meet a strided operand. */
static ct_tensor *transposed(ct_tensor *t)
{
    ct_tensor *v = NULL;
    CHECK_OK(ct_transpose(t, ct_tensor_ndim(t) - 2, ct_tensor_ndim(t) - 1, &v));
    return v;
}

static void check(const char *what, ew_case c, ct_tensor *const *in, int n, double tol)
{
    devcheck_op(g_dev, what, apply, in, n, &c, tol);
}

static const ct_dtype k_plain[] = {CT_F32, CT_F16, CT_BF16, CT_I32, CT_I64, CT_BOOL, CT_I8, CT_F64};
#define N_PLAIN 8

static void test_creation(void)
{
    for (int i = 0; i < N_PLAIN; i++) {
        ct_dtype dt = k_plain[i];
        if (dt == CT_F64 && !ct_device_supports(g_dev, "fill", CT_F64)) continue;
        char what[64];
        int64_t shape[2] = {37, 29};
        ct_tensor *t = NULL;
        CHECK_OK(ct_exec_force_device(g_dev));
        CHECK_OK(ct_full(2, shape, dt, dt == CT_BOOL ? 1 : -3.25, &t));
        ct_exec_record rec;
        CHECK_OK(ct_exec_last(&rec));
        CHECK_OK(ct_exec_force_device(NULL));
        double *v = t ? th_values(t) : NULL;
        double want = dt == CT_BOOL ? 1 : (dt == CT_I32 || dt == CT_I64 || dt == CT_I8) ? -3 : -3.25;
        int bad = 0;
        for (int k = 0; v && k < 37 * 29; k++) bad += v[k] != want;
        snprintf(what, sizeof what, "fill %s", ct_dtype_name(dt));
        CHECK_MSG(v && !bad && !strcmp(rec.device, g_dev), "%s: %d wrong, ran on %s", what, bad, rec.device);
        free(v);
        ct_tensor_free(t);
    }
    /* arange, eye and rand against the CPU's: the same values (rand: the same Philox stream) */
    struct { const char *what; ct_dtype dt; int kind; } cases[] = {
        {"arange f32", CT_F32, 0}, {"arange i64", CT_I64, 0}, {"arange f16", CT_F16, 0}, {"eye f32", CT_F32, 1},
        {"eye i32", CT_I32, 1},    {"rand f32", CT_F32, 2},   {"rand f16", CT_F16, 2},   {"randn f32", CT_F32, 3},
        {"randn bf16", CT_BF16, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_tensor *got = NULL, *ref = NULL;
        int64_t shape[2] = {61, 43};
        for (int pass = 0; pass < 2; pass++) {
            CHECK_OK(ct_exec_force_device(pass ? "cpu" : g_dev));
            ct_tensor **o = pass ? &ref : &got;
            switch (cases[i].kind) {
            case 0: CHECK_OK(ct_arange(-7, 1000.5, 0.75, cases[i].dt, o)); break;
            case 1: CHECK_OK(ct_eye(61, 43, cases[i].dt, o)); break;
            case 2: CHECK_OK(ct_rand(2, shape, cases[i].dt, 1234, o)); break;
            default: CHECK_OK(ct_randn(2, shape, cases[i].dt, 99, o)); break;
            }
            ct_exec_record rec;
            CHECK_OK(ct_exec_last(&rec));
            CHECK_MSG(!strcmp(rec.device, pass ? "cpu" : g_dev), "%s ran on %s", cases[i].what, rec.device);
        }
        CHECK_OK(ct_exec_force_device(NULL));
        double *g = got ? th_values(got) : NULL, *r = ref ? th_values(ref) : NULL;
        int64_t n = got ? ct_tensor_numel(got) : 0;
        int nonfinite = 0;
        double nmse = g && r ? devcheck_nmse(g, r, n, &nonfinite) : INFINITY;
        /* randn: log and cos of the device vs libm, ~1 ulp; the rest exact */
        double tol = cases[i].kind == 3 ? (cases[i].dt == CT_F32 ? 1e-12 : 1e-5) : 0;
        CHECK_MSG(!nonfinite && nmse <= tol, "%s: NMSE %.3g", cases[i].what, nmse);
        free(g);
        free(r);
        ct_tensor_free(got);
        ct_tensor_free(ref);
    }
}

static void test_copies(void)
{
    int64_t shape[3] = {3, 40, 33};
    for (int i = 0; i < N_PLAIN; i++)
        for (int j = 0; j < N_PLAIN; j++) {
            ct_dtype s = k_plain[i], d = k_plain[j];
            if ((s == CT_F64 || d == CT_F64) && !ct_device_supports(g_dev, "copy", CT_F64)) continue;
            /* values every dtype holds exactly enough: ints in [-100, 100], floats with fractions */
            ct_tensor *a = rnd(100 + (uint64_t)i, 3, shape, s, -100, 100), *at = transposed(a);
            char what[64];
            snprintf(what, sizeof what, "cast %s -> %s (transposed)", ct_dtype_name(s), ct_dtype_name(d));
            check(what, (ew_case){.op = OP_CAST, .dt = d}, &at, 1, 0);
            ct_tensor_free(at);
            ct_tensor_free(a);
        }
    /* a copy into a strided destination view, and a broadcast source */
    ct_tensor *a = rnd(7, 3, shape, CT_F32, -1, 1), *dst = NULL, *dt = NULL, *small = NULL, *ex = NULL;
    int64_t dshape[3] = {3, 33, 40}, sshape[3] = {1, 40, 1};
    CHECK_OK(ct_zeros(3, dshape, CT_F32, &dst));
    dt = transposed(dst);
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_copy_(dt, a));
    CHECK_OK(ct_exec_force_device(NULL));
    double *g = th_values(dt), *r = th_values(a);
    int nonfinite = 0;
    CHECK_MSG(g && r && devcheck_nmse(g, r, 3 * 40 * 33, &nonfinite) == 0 && !nonfinite, "copy into a transposed view");
    free(g);
    free(r);
    small = rnd(8, 3, sshape, CT_F16, -2, 2);
    CHECK_OK(ct_expand(small, 3, shape, &ex));
    check("contiguous(expand f16)", (ew_case){.op = OP_CONTIG}, &ex, 1, 0);
    ct_tensor_free(ex);
    ct_tensor_free(small);
    ct_tensor_free(dt);
    ct_tensor_free(dst);
    ct_tensor_free(a);
}

static void test_binary(void)
{
    int64_t sa[3] = {4, 1, 37}, sb[2] = {23, 37}, sq[2] = {37, 23};
    const int ops[] = {OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAXIMUM, OP_MINIMUM, OP_SWIGLU, OP_GEGLU};
    const char *names[] = {"add", "sub", "mul", "div", "pow", "maximum", "minimum", "swiglu", "geglu"};
    const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16, CT_I32, CT_I64, CT_I8, CT_F64};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        ct_dtype dt = dts[t];
        if (dt == CT_F64 && !ct_device_supports(g_dev, "add", CT_F64)) continue;
        bool integer = dt == CT_I32 || dt == CT_I64 || dt == CT_I8;
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            if (integer && (ops[o] == OP_SWIGLU || ops[o] == OP_GEGLU)) continue;
            bool pw = ops[o] == OP_POW;
            /* pow: positive bases (real results), small exponents; integers stay small */
            ct_tensor *a = rnd(11 + o, 3, sa, dt, pw ? 0.5 : -9, pw ? 3 : 9);
            ct_tensor *b = rnd(23 + o, 2, sq, dt, pw ? (integer ? 0 : -2) : 1, pw ? 4 : 7), *bt = transposed(b);
            ct_tensor *in[2] = {a, bt};
            char what[64];
            snprintf(what, sizeof what, "%s %s (broadcast, transposed)", names[o], ct_dtype_name(dt));
            bool transc = pw || ops[o] == OP_SWIGLU || ops[o] == OP_GEGLU || ops[o] == OP_DIV;
            double tol = integer ? 0 : dt == CT_F32 || dt == CT_F64 ? (transc ? 1e-10 : 0) : (transc ? 1e-5 : 0);
            if (ops[o] == OP_SWIGLU || ops[o] == OP_GEGLU) { /* gated: same shapes */
                ct_tensor *c = rnd(31 + o, 2, sb, dt, -4, 4);
                in[0] = c;
                check(what, (ew_case){.op = ops[o]}, in, 2, tol);
                ct_tensor_free(c);
            } else {
                check(what, (ew_case){.op = ops[o]}, in, 2, tol);
            }
            ct_tensor_free(bt);
            ct_tensor_free(b);
            ct_tensor_free(a);
        }
    }
    /* dense operands of one float dtype go four elements a work-item: lengths that leave a
     * last quad of 1, 2 or 3 elements, and one of whole quads */
    static const int64_t lens[] = {37, 38, 39, 1000};
    for (int t = 0; t < 3; t++)
        for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
            for (int o = 0; o < 3; o++) {
                static const int dops[3] = {OP_ADD, OP_MAXIMUM, OP_SWIGLU};
                static const char *dnames[3] = {"add", "maximum", "swiglu"};
                ct_tensor *in[2] = {rnd(90 + l, 1, &lens[l], dts[t], -9, 9), rnd(95 + l, 1, &lens[l], dts[t], -9, 9)};
                char what[64];
                snprintf(what, sizeof what, "%s %s dense, %lld", dnames[o], ct_dtype_name(dts[t]), (long long)lens[l]);
                check(what, (ew_case){.op = dops[o]}, in, 2, dops[o] == OP_SWIGLU ? (t ? 1e-5 : 1e-10) : 0);
                ct_tensor_free(in[0]);
                ct_tensor_free(in[1]);
            }
    /* a NaN meets maximum/minimum: it wins on both sides, as on the CPU */
    float nanv[4] = {NAN, 1, 2, NAN}, one[4] = {0, NAN, 3, 4};
    int64_t s4[1] = {4};
    ct_tensor *x = NULL, *y = NULL;
    CHECK_OK(ct_tensor_from_data(1, s4, CT_F32, nanv, &x));
    CHECK_OK(ct_tensor_from_data(1, s4, CT_F32, one, &y));
    ct_tensor *in[2] = {x, y};
    check("maximum with NaN", (ew_case){.op = OP_MAXIMUM}, in, 2, 0);
    check("minimum with NaN", (ew_case){.op = OP_MINIMUM}, in, 2, 0);
    ct_tensor_free(x);
    ct_tensor_free(y);
}

static void test_scalar_cmp_where(void)
{
    int64_t shape[2] = {45, 38};
    const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16, CT_I32, CT_I64};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        ct_dtype dt = dts[t];
        bool integer = dt == CT_I32 || dt == CT_I64;
        ct_tensor *a = rnd(41 + t, 2, shape, dt, integer ? -20 : 0.25, 20), *at = transposed(a);
        const int ops[] = {OP_ADD_S, OP_SUB_S, OP_MUL_S, OP_DIV_S, OP_POW_S};
        for (size_t o = 0; o < 5; o++) {
            char what[64];
            snprintf(what, sizeof what, "scalar op %zu on %s (transposed)", o, ct_dtype_name(dt));
            double s = o == 4 ? 2 : integer ? 3 : 1.7;
            bool exact = o < 3 || (integer && o != 3);
            check(what, (ew_case){.op = ops[o], .s0 = s}, &at, 1, exact ? 0 : dt == CT_F32 ? 1e-10 : 1e-5);
        }
        ct_tensor *b = rnd(43 + t, 2, shape, dt, integer ? -20 : 0.25, 20);
        /* about a third equal, so EQ/LE/GE meet ties */
        ct_tensor *in[2] = {a, b}, *eq = NULL;
        CHECK_OK(ct_exec_force_device("cpu"));
        ct_tensor *cond = NULL;
        CHECK_OK(ct_compare_scalar(b, CT_CMP_GT, integer ? 5 : 12, &cond));
        CHECK_OK(ct_where(cond, a, b, &eq));
        CHECK_OK(ct_exec_force_device(NULL));
        in[1] = eq;
        for (int c = CT_CMP_EQ; c <= CT_CMP_GE; c++) {
            char what[64];
            snprintf(what, sizeof what, "compare %d %s", c, ct_dtype_name(dt));
            check(what, (ew_case){.op = OP_CMP, .cmp = (ct_cmp)c}, in, 2, 0);
            /* a scalar no integer equals, one that is exact, NaN, and one beyond int64 */
            const double sv[] = {2.5, 7, NAN, 1e30, -1e30};
            for (size_t k = 0; k < sizeof sv / sizeof sv[0]; k++) {
                snprintf(what, sizeof what, "compare_scalar %d %g %s", c, sv[k], ct_dtype_name(dt));
                check(what, (ew_case){.op = OP_CMP_S, .cmp = (ct_cmp)c, .s0 = sv[k]}, &at, 1, 0);
            }
        }
        ct_tensor *bt = transposed(b), *ct = transposed(cond), *w[3] = {a, b, cond}, *wt[3] = {at, bt, ct};
        check("where", (ew_case){.op = OP_WHERE}, w, 3, 0);
        check("where (transposed)", (ew_case){.op = OP_WHERE}, wt, 3, 0);
        ct_tensor_free(ct);
        ct_tensor_free(bt);
        ct_tensor_free(cond);
        ct_tensor_free(eq);
        ct_tensor_free(b);
        ct_tensor_free(at);
        ct_tensor_free(a);
    }
}

static void test_unary(void)
{
    int64_t shape[3] = {2, 51, 29};
    const int ops[] = {OP_NEG, OP_ABS, OP_EXP, OP_LOG, OP_SQRT, OP_RSQRT, OP_SIN, OP_COS, OP_CLAMP,
                       OP_RELU, OP_GELU, OP_GELU_TANH, OP_SILU, OP_SIGMOID, OP_TANH};
    const ct_dtype dts[] = {CT_F32, CT_F16, CT_BF16, CT_F64, CT_I32, CT_I64, CT_I8};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        ct_dtype dt = dts[t];
        if (dt == CT_F64 && !ct_device_supports(g_dev, "exp", CT_F64)) continue;
        bool integer = dt == CT_I32 || dt == CT_I64 || dt == CT_I8;
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++) {
            int op = ops[o];
            bool exact = op == OP_NEG || op == OP_ABS || op == OP_CLAMP || op == OP_RELU;
            if (integer && !exact) continue;
            bool positive = op == OP_LOG || op == OP_SQRT || op == OP_RSQRT;
            ct_tensor *a = rnd(61 + o, 3, shape, dt, positive ? 0.01 : -6, 6), *at = transposed(a);
            char what[64];
            snprintf(what, sizeof what, "unary %zu %s (transposed)", o, ct_dtype_name(dt));
            double tol = exact ? 0 : dt == CT_F32 || dt == CT_F64 ? 1e-10 : 1e-5;
            check(what, (ew_case){.op = op, .s0 = -2, .s1 = 3}, &at, 1, tol);
            ct_tensor_free(at);
            ct_tensor_free(a);
        }
    }
}

static void test_reductions(void)
{
    int64_t shape[3] = {5, 67, 300};
    const int ops[] = {OP_SUM, OP_MEAN, OP_PROD, OP_MAX, OP_MIN, OP_VAR, OP_STD, OP_NORM, OP_ARGMAX, OP_ARGMIN};
    const ct_dtype dts[] = {CT_F32, CT_F16, CT_I32, CT_I64, CT_BOOL, CT_F64};
    struct { int dims[2], ndims; bool keepdim; } sets[] = {{{2, 0}, 1, false}, {{0, 0}, 1, true}, {{1, 2}, 2, false},
                                                           {{0, 0}, 0, false}, {{-2, 0}, 1, true}};
    for (size_t t = 0; t < sizeof dts / sizeof dts[0]; t++) {
        ct_dtype dt = dts[t];
        if (dt == CT_F64 && !ct_device_supports(g_dev, "sum", CT_F64)) continue;
        bool integer = dt == CT_I32 || dt == CT_I64 || dt == CT_BOOL;
        ct_tensor *a = rnd(71 + t, 3, shape, dt, integer ? -50 : -2, integer ? 50 : 2), *at = transposed(a);
        /* products of many values overflow: a slice of values near 1 */
        ct_tensor *p = rnd(81 + t, 3, shape, dt, integer ? 1 : 0.9, integer ? 2 : 1.1);
        for (size_t o = 0; o < sizeof ops / sizeof ops[0]; o++)
            for (size_t k = 0; k < sizeof sets / sizeof sets[0]; k++) {
                int op = ops[o];
                bool arg = op == OP_ARGMAX || op == OP_ARGMIN;
                if (arg && sets[k].ndims == 2) continue;
                ew_case c = {.op = op, .ndims = sets[k].ndims, .keepdim = sets[k].keepdim, .unbiased = k % 2 == 0,
                             .s0 = k == 3 ? INFINITY : k == 4 ? 3 : 2};
                memcpy(c.dims, sets[k].dims, sizeof c.dims);
                if (arg && sets[k].ndims == 0) c.dims[0] = CT_ALL_DIMS;
                char what[80];
                bool exact = integer && op != OP_VAR && op != OP_STD && op != OP_NORM && op != OP_MEAN;
                exact = exact || arg || op == OP_MAX || op == OP_MIN;
                /* transposed, and contiguous (its reduced and kept dims fold into runs) */
                for (int contig = 0; contig < 2; contig++) {
                    snprintf(what, sizeof what, "reduce %zu over set %zu of %s (%s)", o, k, ct_dtype_name(dt),
                             contig ? "contiguous" : "transposed");
                    ct_tensor *src = op == OP_PROD ? p : contig ? a : at;
                    /* f16 results: a float accumulator and the CPU's double may round to
                     * neighbouring f16 values */
                    check(what, c, &src, 1, exact ? 0 : dt == CT_F16 ? 1e-5 : 1e-10);
                }
            }
        ct_tensor_free(p);
        ct_tensor_free(at);
        ct_tensor_free(a);
    }
}

/* The same kernels on a device without cl_khr_fp64 (hidden on this one): f64 is refused,
 * floating reductions accumulate in float (a tree: NMSE 1e-10 still holds at these sizes),
 * arange computes in float. */
static void test_without_fp64(void)
{
#ifdef CTORCH_HAVE_OPENCL
    ocl_test_hide_fp64(true);
    ct_exec_shutdown();
    CHECK(!ct_device_supports(g_dev, "add", CT_F64) && !ct_device_supports(g_dev, "copy", CT_F64));
    CHECK(ct_device_supports(g_dev, "add", CT_F32));
    test_creation();
    test_binary();
    test_unary();
    test_reductions();
    ocl_test_hide_fp64(false);
    ct_exec_shutdown();
    CHECK(ct_device_supports(g_dev, "add", CT_F64));
#else
    th_skip("the OpenCL backend is not built");
#endif
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    setenv("CTORCH_OPENCL_POISON", "1", 1);
    ct_exec_reinit();
    if (!devcheck_device("opencl", g_dev, sizeof g_dev)) return th_finish();
    RUN(test_creation);
    RUN(test_copies);
    RUN(test_binary);
    RUN(test_scalar_cmp_where);
    RUN(test_unary);
    RUN(test_reductions);
    RUN(test_without_fp64);
    return th_finish();
}
