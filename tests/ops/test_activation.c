/* Unary math, activations, softmax/log_softmax and the gated units against
 * double references: every float dtype, strided and broadcast inputs, 0-size
 * and 1-size dims, large tensors, special values, at every SIMD level. */
#include "ew_support.h"

typedef ct_status (*un_fn)(const ct_tensor *, ct_tensor **);
typedef enum { U_NEG, U_ABS, U_EXP, U_LOG, U_SQRT, U_RSQRT, U_SIN, U_COS, U_RELU, U_GELU, U_GELU_T, U_SILU,
               U_SIGMOID, U_TANH, U_CLAMP, U_COUNT } un_op;

#define CLAMP_LO (-1.5)
#define CLAMP_HI 2.25

static ct_status gelu_erf(const ct_tensor *a, ct_tensor **out) { return ct_gelu(a, false, out); }
static ct_status gelu_tanh(const ct_tensor *a, ct_tensor **out) { return ct_gelu(a, true, out); }
static ct_status clamp_fixed(const ct_tensor *a, ct_tensor **out) { return ct_clamp(a, CLAMP_LO, CLAMP_HI, out); }

static const struct {
    const char *name;
    un_fn fn;
    double lo, hi;
} un_ops[U_COUNT] = {
    {"neg", ct_neg, -10, 10},        {"abs", ct_abs, -10, 10},       {"exp", ct_exp, -20, 20},
    {"log", ct_log, 0.01, 100},      {"sqrt", ct_sqrt, 0, 100},      {"rsqrt", ct_rsqrt, 0.01, 100},
    {"sin", ct_sin, -10, 10},        {"cos", ct_cos, -10, 10},       {"relu", ct_relu, -5, 5},
    {"gelu", gelu_erf, -8, 8},       {"gelu_tanh", gelu_tanh, -8, 8}, {"silu", ct_silu, -20, 20},
    {"sigmoid", ct_sigmoid, -20, 20}, {"tanh", ct_tanh, -5, 5},      {"clamp", clamp_fixed, -5, 5},
};

static double ref_unary(un_op op, double x)
{
    switch (op) {
    case U_NEG: return -x;
    case U_ABS: return fabs(x);
    case U_EXP: return exp(x);
    case U_LOG: return log(x);
    case U_SQRT: return sqrt(x);
    case U_RSQRT: return 1.0 / sqrt(x);
    case U_SIN: return sin(x);
    case U_COS: return cos(x);
    case U_RELU: return x > 0 ? x : (isnan(x) ? x : 0);
    case U_GELU: return 0.5 * x * erfc(-x / sqrt(2.0));
    /* 0.5 (1 + tanh v) = 1 / (1 + e^-2v), free of cancellation for negative x */
    case U_GELU_T: return x / (1.0 + exp(-2.0 * sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
    case U_SILU: return x / (1.0 + exp(-x));
    case U_SIGMOID: return 1.0 / (1.0 + exp(-x));
    case U_TANH: return tanh(x);
    case U_CLAMP: return x < CLAMP_LO ? CLAMP_LO : x > CLAMP_HI ? CLAMP_HI : x;
    case U_COUNT: break;
    }
    return 0;
}

static void check_unary_v(un_op op, const ct_tensor *a, const double *av, ct_dtype want_dt, double atol, double rtol,
                          const char *what)
{
    int64_t n = ct_tensor_numel(a);
    double *ao = av ? NULL : ew_values(a), *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (ao) av = ao;
    for (int64_t i = 0; i < n; i++) want[i] = ref_unary(op, av[i]);
    ct_tensor *out = NULL;
    CHECK_OK(un_ops[op].fn(a, &out));
    char label[160];
    snprintf(label, sizeof label, "%s %s [%s]", un_ops[op].name, ct_dtype_name(ct_tensor_dtype(a)), what);
    ew_check(out, want_dt, want, n, atol, rtol, label);
    ct_tensor_free(out);
    free(ao);
    free(want);
}

static void run_unary_dtype(ct_dtype dt, const char *lvl, th_rng *r)
{
    static const struct { int n; int64_t s[3]; } shapes[] = {{3, {2, 3, 5}}, {2, {0, 4}}, {1, {1}}, {0, {0}},
                                                            {2, {17, 33}}, {3, {3, 1, 19}}};
    bool half = dt == CT_F16 || dt == CT_BF16;
    for (int op = 0; op < U_COUNT; op++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            for (int la = 0; la < EW_LAYOUTS; la++) {
                double lo = un_ops[op].lo, hi = un_ops[op].hi;
                if (half && op == U_EXP) lo = -8, hi = 8; /* e^20 overflows f16 */
                ct_tensor *a = ew_make(r, shapes[si].n, shapes[si].s, dt, lo, hi, (ew_layout)la, false);
                char what[96];
                snprintf(what, sizeof what, "shape %zu, %s, %s", si, ew_layout_names[la], lvl);
                check_unary_v((un_op)op, a, NULL, dt, ew_atol(dt), ew_rtol(dt), what);
                ct_tensor_free(a);
            }
        }
    }
}

static void test_unary_f32_all_levels(void)
{
    th_rng r = {11};
    for (int l = 0; l < 3; l++)
        if (ew_set_level(ew_levels[l])) run_unary_dtype(CT_F32, ew_level_names[l], &r);
    cpu_simd_set_level(CPU_SIMD_AVX512);
}

static void test_unary_other_dtypes(void)
{
    th_rng r = {12};
    const ct_dtype dts[] = {CT_F64, CT_F16, CT_BF16};
    for (size_t i = 0; i < 3; i++) run_unary_dtype(dts[i], "default level", &r);
}

/* > 100K elements (vector bodies, tails, pool chunks); one size past the
 * streaming threshold for the vector kernels. */
static void test_unary_large(void)
{
    th_rng r = {13};
    int64_t shape[2] = {301, 517}, big[2] = {2048, 2049};
    ct_tensor *a = ew_make(&r, 2, shape, CT_F32, -12, 12, EW_CONTIG, false);
    ct_tensor *pos = ew_make(&r, 2, shape, CT_F32, 0.01, 50, EW_SLICED, false);
    double *av = ew_values(a), *pv = ew_values(pos);
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        for (int op = 0; op < U_COUNT; op++) {
            bool positive = op == U_LOG || op == U_SQRT || op == U_RSQRT;
            check_unary_v((un_op)op, positive ? pos : a, positive ? pv : av, CT_F32, 1e-6, 2e-6, ew_level_names[l]);
        }
    }
    free(av);
    free(pv);
    ct_tensor *b = ew_make(&r, 2, big, CT_F32, -12, 12, EW_CONTIG, false);
    double *bv = ew_values(b);
    for (int l = 1; l < 3; l++)
        if (ew_set_level(ew_levels[l])) check_unary_v(U_SILU, b, bv, CT_F32, 1e-6, 2e-6, "streaming");
    cpu_simd_set_level(CPU_SIMD_AVX512);
    free(bv);
    ct_tensor_free(a);
    ct_tensor_free(pos);
    ct_tensor_free(b);
}

/* Infinities, NaN, signed zeros, tiny and huge values, the vector exp's range
 * ends and the tanh series/exp switch point: against the reference rounded to
 * f32 (so overflow and underflow match), relative 3e-6 of the f32 result;
 * subnormal results (few significant bits) within 1e-38 absolute. */
static void test_unary_special_values(void)
{
    const float xs[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-30f, -1e-30f, 1e-6f, -1e-6f, 0.3f, -0.3f,
                        0.3125f, -0.3124f, 0.31f, 88.7f, 88.75f, -87.5f, -103.0f, -110.0f, 100.0f, -100.0f, 20.0f,
                        -20.0f, 9.0f, -9.0f, 1e-40f, 15.0f, -15.0f, 1e4f, -1e4f, 1e20f, -1e20f};
    int64_t n = sizeof xs / sizeof xs[0];
    ct_tensor *a;
    CHECK_OK(ct_tensor_from_data(1, &n, CT_F32, xs, &a));
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        for (int op = 0; op < U_COUNT; op++) {
            double want[64];
            for (int64_t i = 0; i < n; i++) want[i] = (float)ref_unary((un_op)op, xs[i]);
            if (op == U_GELU) want[2] = NAN; /* -inf * Phi(-inf) = -inf * 0 */
            ct_tensor *out = NULL;
            CHECK_OK(un_ops[op].fn(a, &out));
            double *got = ew_values(out);
            for (int64_t i = 0; i < n; i++) {
                bool ok = isnan(want[i]) ? isnan(got[i])
                          : isinf(want[i]) ? got[i] == want[i]
                                           : fabs(got[i] - want[i]) <= 1e-38 + 3e-6 * fabs(want[i]);
                CHECK_MSG(ok, "%s(%g) at %s: got %.9g want %.9g", un_ops[op].name, xs[i], ew_level_names[l], got[i],
                          want[i]);
            }
            free(got);
            ct_tensor_free(out);
        }
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    ct_tensor_free(a);
}

/* Relative accuracy where cancellation would show: tanh near 0, gelu and
 * silu far into the negative side (results of 1e-20 and below). */
static void test_unary_relative_accuracy(void)
{
    th_rng r = {14};
    int64_t n = 4099;
    ct_tensor *small = ew_make(&r, 1, &n, CT_F32, -1e-3, 1e-3, EW_CONTIG, false);
    ct_tensor *neg = ew_make(&r, 1, &n, CT_F32, -12, -3, EW_CONTIG, false);
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        check_unary_v(U_TANH, small, NULL, CT_F32, 0, 3e-6, ew_level_names[l]);
        check_unary_v(U_SIGMOID, neg, NULL, CT_F32, 0, 3e-6, ew_level_names[l]);
        check_unary_v(U_SILU, neg, NULL, CT_F32, 0, 3e-6, ew_level_names[l]);
        check_unary_v(U_GELU, neg, NULL, CT_F32, 0, 4e-6, ew_level_names[l]);
        /* e^w with w ~ -100 formed in f32: |w| * 2 ulp of relative error is inherent */
        check_unary_v(U_GELU_T, neg, NULL, CT_F32, 1e-37, 5e-5, ew_level_names[l]); /* underflows past -10 */
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    ct_tensor_free(small);
    ct_tensor_free(neg);
}

/* neg/abs/relu/clamp keep integer dtypes; float math on ints returns f32. */
static void test_unary_int(void)
{
    th_rng r = {15};
    int64_t s[2] = {5, 7};
    const ct_dtype dts[] = {CT_I32, CT_I64};
    for (int di = 0; di < 2; di++) {
        for (int la = 0; la < EW_LAYOUTS; la++) {
            ct_tensor *a = ew_make(&r, 2, s, dts[di], -20, 20, (ew_layout)la, true);
            check_unary_v(U_NEG, a, NULL, dts[di], 0, 0, ew_layout_names[la]);
            check_unary_v(U_ABS, a, NULL, dts[di], 0, 0, ew_layout_names[la]);
            check_unary_v(U_RELU, a, NULL, dts[di], 0, 0, ew_layout_names[la]);
            check_unary_v(U_SIN, a, NULL, CT_F32, 1e-6, 2e-6, ew_layout_names[la]);
            check_unary_v(U_SIGMOID, a, NULL, CT_F32, 1e-6, 2e-6, ew_layout_names[la]);
            /* clamp with whole bounds stays integral; fractional bounds give f32 */
            double *av = ew_values(a), want[35], want_f[35];
            for (int i = 0; i < 35; i++) {
                want[i] = av[i] < -3 ? -3 : av[i];
                want_f[i] = av[i] < 0.5 ? 0.5 : av[i] > 2.5 ? 2.5 : av[i];
            }
            ct_tensor *o1 = NULL, *o2 = NULL;
            CHECK_OK(ct_clamp(a, -3, INFINITY, &o1));
            ew_check(o1, dts[di], want, 35, 0, 0, "clamp int [-3, inf)");
            CHECK_OK(ct_clamp(a, 0.5, 2.5, &o2));
            ew_check(o2, CT_F32, want_f, 35, 0, 0, "clamp int [0.5, 2.5]");
            free(av);
            ct_tensor_free(o1);
            ct_tensor_free(o2);
            ct_tensor_free(a);
        }
    }
    int64_t n = 6;
    ct_tensor *b = ew_make(&r, 1, &n, CT_BOOL, 0, 2, EW_CONTIG, true);
    check_unary_v(U_EXP, b, NULL, CT_F32, 1e-6, 2e-6, "bool");
    ct_tensor_free(b);
}

/* ---- softmax ---- */

/* Double reference along dim of a row-major [outer, len, inner] view. */
static void ref_softmax(const double *x, double *y, int ndim, const int64_t *shape, int dim, bool log_form)
{
    int64_t outer = 1, len = ndim ? shape[dim] : 1, inner = 1;
    for (int i = 0; i < dim; i++) outer *= shape[i];
    for (int i = dim + 1; i < ndim; i++) inner *= shape[i];
    for (int64_t o = 0; o < outer; o++)
        for (int64_t in = 0; in < inner; in++) {
            double m = -INFINITY, sum = 0;
            for (int64_t j = 0; j < len; j++) m = fmax(m, x[(o * len + j) * inner + in]);
            for (int64_t j = 0; j < len; j++) sum += exp(x[(o * len + j) * inner + in] - m);
            for (int64_t j = 0; j < len; j++) {
                double v = x[(o * len + j) * inner + in] - m;
                y[(o * len + j) * inner + in] = log_form ? v - log(sum) : exp(v) / sum;
            }
        }
}

static void check_softmax_v(const ct_tensor *a, const double *av, int dim, bool log_form, const char *what)
{
    int nd = ct_tensor_ndim(a);
    int64_t n = ct_tensor_numel(a);
    double *ao = av ? NULL : ew_values(a), *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    if (ao) av = ao;
    ref_softmax(av, want, nd, ct_tensor_shape(a), dim < 0 ? dim + nd : dim, log_form);
    ct_tensor *out = NULL;
    CHECK_OK((log_form ? ct_log_softmax : ct_softmax)(a, dim, &out));
    ct_dtype dt = ct_tensor_dtype(a);
    char label[160];
    snprintf(label, sizeof label, "%s dim %d %s [%s]", log_form ? "log_softmax" : "softmax", dim, ct_dtype_name(dt), what);
    ew_check(out, dt, want, n, ew_atol(dt), ew_rtol(dt), label);
    ct_tensor_free(out);
    free(ao);
    free(want);
}

static void run_softmax_dtype(ct_dtype dt, const char *lvl, th_rng *r)
{
    static const struct { int n; int64_t s[3]; int dim; } cases[] = {
        {2, {5, 7}, 0}, {2, {5, 7}, 1}, {2, {5, 7}, -1}, {3, {3, 4, 5}, 0}, {3, {3, 4, 5}, 1}, {3, {3, 4, 5}, 2},
        {2, {2, 3000}, 1}, {2, {1, 1}, 0}, {2, {0, 4}, 1}, {2, {4, 0}, 1}, {0, {0}, 0}, {1, {37}, 0}, {3, {2, 1, 17}, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        for (int la = 0; la < EW_LAYOUTS; la++) {
            ct_tensor *a = ew_make(r, cases[ci].n, cases[ci].s, dt, -10, 10, (ew_layout)la, false);
            char what[96];
            snprintf(what, sizeof what, "case %zu, %s, %s", ci, ew_layout_names[la], lvl);
            check_softmax_v(a, NULL, cases[ci].dim, false, what);
            check_softmax_v(a, NULL, cases[ci].dim, true, what);
            ct_tensor_free(a);
        }
    }
}

static void test_softmax(void)
{
    th_rng r = {16};
    for (int l = 0; l < 3; l++)
        if (ew_set_level(ew_levels[l])) run_softmax_dtype(CT_F32, ew_level_names[l], &r);
    cpu_simd_set_level(CPU_SIMD_AVX512);
    const ct_dtype dts[] = {CT_F64, CT_F16, CT_BF16};
    for (int i = 0; i < 3; i++) run_softmax_dtype(dts[i], "default level", &r);
    /* integers compute in f32 */
    int64_t s[2] = {3, 4};
    ct_tensor *ai = ew_make(&r, 2, s, CT_I32, -5, 5, EW_CONTIG, true), *out = NULL;
    CHECK_OK(ct_softmax(ai, 1, &out));
    CHECK(out && ct_tensor_dtype(out) == CT_F32);
    ct_tensor_free(out);
    ct_tensor_free(ai);
}

/* Many rows over the pool, a strided dim, and one tensor past the streaming
 * threshold (rows short enough to stage). */
static void test_softmax_large(void)
{
    th_rng r = {17};
    int64_t s[2] = {300, 517}, big[2] = {2049, 2048};
    ct_tensor *a = ew_make(&r, 2, s, CT_F32, -30, 30, EW_CONTIG, false);
    ct_tensor *b = ew_make(&r, 2, big, CT_F32, -10, 10, EW_CONTIG, false);
    double *av = ew_values(a), *bv = ew_values(b);
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        check_softmax_v(a, av, 1, false, ew_level_names[l]);
        check_softmax_v(a, av, 0, false, ew_level_names[l]);
        check_softmax_v(a, av, 1, true, ew_level_names[l]);
        if (l > 0) check_softmax_v(b, bv, 1, false, ew_level_names[l]);
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    free(av);
    free(bv);
    ct_tensor_free(a);
    ct_tensor_free(b);
}

/* Large offsets (stability), -inf masks, an all -inf row (NaN, as torch). */
static void test_softmax_special(void)
{
    float x[4][5] = {{1000, 1001, 999, 1000.5f, 998},
                     {-INFINITY, 1, 2, -INFINITY, 3},
                     {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY},
                     {-1e30f, 0, 1e-30f, 5, -5}};
    int64_t s[2] = {4, 5};
    ct_tensor *a;
    CHECK_OK(ct_tensor_from_data(2, s, CT_F32, x, &a));
    double xv[20], want[20], want_log[20];
    for (int i = 0; i < 20; i++) xv[i] = x[i / 5][i % 5];
    ref_softmax(xv, want, 2, s, 1, false);
    ref_softmax(xv, want_log, 2, s, 1, true);
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        ct_tensor *o1 = NULL, *o2 = NULL;
        CHECK_OK(ct_softmax(a, -1, &o1));
        CHECK_OK(ct_log_softmax(a, -1, &o2));
        ew_check(o1, CT_F32, want, 20, 1e-7, 2e-6, "softmax special");
        ew_check(o2, CT_F32, want_log, 20, 1e-6, 2e-6, "log_softmax special");
        double *g = ew_values(o1);
        CHECK(isnan(g[10]) && isnan(g[14]) && g[5] == 0.0);
        free(g);
        ct_tensor_free(o1);
        ct_tensor_free(o2);
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    ct_tensor_free(a);
}

/* ---- gated units ---- */

static void check_gated(bool swi, const ct_tensor *g, const ct_tensor *u, ct_dtype want_dt, const char *what)
{
    int ng = ct_tensor_ndim(g), nu = ct_tensor_ndim(u), on = ng > nu ? ng : nu;
    int64_t os[CT_MAX_DIMS], n = 1;
    for (int i = 0; i < on; i++) {
        int ig = i - (on - ng), iu = i - (on - nu);
        int64_t dg = ig >= 0 ? ct_tensor_shape(g)[ig] : 1, du = iu >= 0 ? ct_tensor_shape(u)[iu] : 1;
        os[i] = dg == 1 ? du : dg;
        n *= os[i];
    }
    double *gv = ew_values(g), *uv = ew_values(u), *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        double x = gv[ew_bidx(i, on, os, ng, ct_tensor_shape(g))], y = uv[ew_bidx(i, on, os, nu, ct_tensor_shape(u))];
        want[i] = ref_unary(swi ? U_SILU : U_GELU_T, x) * y;
    }
    ct_tensor *out = NULL;
    CHECK_OK((swi ? ct_swiglu : ct_geglu)(g, u, &out));
    char label[160];
    snprintf(label, sizeof label, "%s %s [%s]", swi ? "swiglu" : "geglu", ct_dtype_name(ct_tensor_dtype(g)), what);
    ew_check(out, want_dt, want, n, ew_atol(want_dt), ew_rtol(want_dt), label);
    ct_tensor_free(out);
    free(gv);
    free(uv);
    free(want);
}

static void test_gated(void)
{
    th_rng r = {18};
    static const struct { int ng; int64_t g[3]; int nu; int64_t u[3]; } shapes[] = {
        {2, {4, 6}, 2, {4, 6}}, {3, {3, 1, 5}, 2, {4, 1}}, {2, {0, 3}, 2, {0, 3}}, {2, {301, 517}, 2, {301, 517}},
        {1, {1}, 1, {1}},
    };
    const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16};
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        for (int di = 0; di < 4; di++) {
            if (l > 0 && di > 0) continue; /* other dtypes do not use the vector kernels */
            for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
                ew_layout la = (ew_layout)(si % 3);
                ct_tensor *g = ew_make(&r, shapes[si].ng, shapes[si].g, dts[di], -8, 8, la, false);
                ct_tensor *u = ew_make(&r, shapes[si].nu, shapes[si].u, dts[di], -3, 3, EW_CONTIG, false);
                char what[96];
                snprintf(what, sizeof what, "shape %zu, %s gate, %s", si, ew_layout_names[la], ew_level_names[l]);
                check_gated(true, g, u, dts[di], what);
                check_gated(false, g, u, dts[di], what);
                ct_tensor_free(g);
                ct_tensor_free(u);
            }
        }
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    int64_t s[1] = {9};
    ct_tensor *gi = ew_make(&r, 1, s, CT_I32, -4, 4, EW_CONTIG, true), *uf = ew_make(&r, 1, s, CT_F16, -2, 2, EW_CONTIG, false);
    check_gated(true, gi, uf, CT_F16, "i32 gate, f16 up");
    ct_tensor_free(gi);
    ct_tensor_free(uf);
}

static void test_errors(void)
{
    th_rng r = {19};
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s32[1] = {32};
    ct_tensor *a = ew_make(&r, 2, s23, CT_F32, 0, 1, EW_CONTIG, false), *b4 = ew_make(&r, 1, s4, CT_F32, 0, 1, EW_CONTIG, false);
    ct_tensor *bl = ew_make(&r, 2, s23, CT_BOOL, 0, 2, EW_CONTIG, true), *z = NULL, *q = NULL, *out = NULL;
    CHECK_OK(ct_cast(a, CT_C64, &z));
    uint8_t qbytes[64] = {0};
    CHECK_OK(ct_tensor_from_data(1, s32, CT_Q8_0, qbytes, &q));
    for (int op = 0; op < U_COUNT; op++) {
        CHECK_STATUS(un_ops[op].fn(NULL, &out), CT_ERR_INVALID_ARG);
        CHECK_STATUS(un_ops[op].fn(a, NULL), CT_ERR_INVALID_ARG);
        CHECK_STATUS(un_ops[op].fn(q, &out), CT_ERR_DTYPE);
        if (op != U_NEG && op != U_ABS) CHECK_STATUS(un_ops[op].fn(z, &out), CT_ERR_DTYPE);
    }
    CHECK_STATUS(ct_neg(bl, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_relu(bl, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_clamp(a, NAN, 1, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_softmax(a, 2, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_log_softmax(a, -3, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_softmax(NULL, 0, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_softmax(a, 0, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_softmax(z, 0, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_log_softmax(q, 0, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_swiglu(a, b4, &out), CT_ERR_SHAPE);
    CHECK_STATUS(ct_geglu(NULL, a, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_geglu(a, NULL, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_swiglu(z, z, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_swiglu(a, q, &out), CT_ERR_DTYPE);
    CHECK(out == NULL);
    ct_tensor_free(a);
    ct_tensor_free(b4);
    ct_tensor_free(bl);
    ct_tensor_free(z);
    ct_tensor_free(q);
}

int main(void)
{
    RUN(test_unary_f32_all_levels);
    RUN(test_unary_other_dtypes);
    RUN(test_unary_large);
    RUN(test_unary_special_values);
    RUN(test_unary_relative_accuracy);
    RUN(test_unary_int);
    RUN(test_softmax);
    RUN(test_softmax_large);
    RUN(test_softmax_special);
    RUN(test_gated);
    RUN(test_errors);
    return th_finish();
}
