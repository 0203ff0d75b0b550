/* Binary element-wise ops, scalar forms, comparisons and where against plain
 * double references: every dtype, broadcast and strided inputs, 0-size and
 * 1-size dims, tensors large enough for SIMD tails, threading and streaming
 * stores, at every SIMD level the CPU has. */
#include "ew_support.h"

typedef ct_status (*bin_fn)(const ct_tensor *, const ct_tensor *, ct_tensor **);
typedef enum { B_ADD, B_SUB, B_MUL, B_DIV, B_POW, B_MAX, B_MIN } bin_op;

static const struct {
    const char *name;
    bin_fn fn;
    double alo, ahi, blo, bhi;    /* float inputs (b of div kept off 0, pow bases positive) */
    double ialo, iahi, iblo, ibhi; /* integer inputs */
} bin_ops[] = {
    {"add", ct_add, -10, 10, -10, 10, -1000, 1000, -1000, 1000},
    {"sub", ct_sub, -10, 10, -10, 10, -1000, 1000, -1000, 1000},
    {"mul", ct_mul, -10, 10, -10, 10, -1000, 1000, -1000, 1000},
    {"div", ct_div, -10, 10, 0.5, 4, -1000, 1000, 1, 50},
    {"pow", ct_pow, 0.1, 3, -2, 2, -6, 7, 0, 6},
    {"maximum", ct_maximum, -10, 10, -10, 10, -1000, 1000, -1000, 1000},
    {"minimum", ct_minimum, -10, 10, -10, 10, -1000, 1000, -1000, 1000},
};

static double ref_binary(bin_op op, double a, double b, bool integer)
{
    switch (op) {
    case B_ADD: return a + b;
    case B_SUB: return a - b;
    case B_MUL: return a * b;
    case B_DIV: return a / b;
    case B_POW:
        if (integer) {
            double r = 1;
            for (int i = 0; i < (int)b; i++) r *= a;
            return r;
        }
        return pow(a, b);
    case B_MAX: return a > b ? a : b;
    case B_MIN: return a < b ? a : b;
    }
    return 0;
}

typedef struct shape_pair {
    int na;
    int64_t a[4];
    int nb;
    int64_t b[4];
} shape_pair;

static const shape_pair small_shapes[] = {
    {3, {2, 3, 5}, 3, {2, 3, 5}}, {3, {4, 1, 7}, 2, {3, 1}}, {2, {0, 5}, 1, {5}},    {1, {1}, 1, {1}},
    {0, {0}, 1, {3}},             {1, {37}, 0, {0}},         {0, {0}, 1, {37}},     {2, {33, 65}, 1, {65}},
    {2, {33, 65}, 2, {33, 1}},    {2, {1, 19}, 2, {6, 1}},   {3, {2, 1, 0}, 2, {4, 1}},
};

static bool shape_eq(const ct_tensor *a, const ct_tensor *b)
{
    int n = ct_tensor_ndim(a);
    return n == ct_tensor_ndim(b) && (n == 0 || !memcmp(ct_tensor_shape(a), ct_tensor_shape(b), sizeof(int64_t) * (size_t)n));
}

static int bcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = i - (n - na), ib = i - (n - nb);
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        out[i] = da == 1 ? db : da;
    }
    return n;
}

/* One binary case: result vs the double reference on the inputs' values
 * (av/bv: ew_values of a/b, or NULL to read them here). */
static void check_binary_v(bin_op op, const ct_tensor *a, const double *av, const ct_tensor *b, const double *bv,
                           ct_dtype want_dt, const char *what)
{
    bool integer = ct_dtype_is_int(want_dt);
    int64_t os[CT_MAX_DIMS];
    int on = bcast_shape(ct_tensor_ndim(a), ct_tensor_shape(a), ct_tensor_ndim(b), ct_tensor_shape(b), os);
    int64_t n = 1;
    for (int i = 0; i < on; i++) n *= os[i];
    double *ao = av ? NULL : ew_values(a), *bo = bv ? NULL : ew_values(b);
    if (ao) av = ao;
    if (bo) bv = bo;
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    bool same = shape_eq(a, b) && on == ct_tensor_ndim(a);
    for (int64_t i = 0; i < n; i++)
        want[i] = ref_binary(op, av[same ? i : ew_bidx(i, on, os, ct_tensor_ndim(a), ct_tensor_shape(a))],
                             bv[same ? i : ew_bidx(i, on, os, ct_tensor_ndim(b), ct_tensor_shape(b))], integer);
    ct_tensor *out = NULL;
    CHECK_OK(bin_ops[op].fn(a, b, &out));
    char label[160];
    snprintf(label, sizeof label, "%s %s [%s]", bin_ops[op].name, ct_dtype_name(ct_tensor_dtype(a)), what);
    ew_check(out, want_dt, want, n, ew_atol(want_dt), ew_rtol(want_dt), label);
    ct_tensor_free(out);
    free(ao);
    free(bo);
    free(want);
}

static void check_binary(bin_op op, const ct_tensor *a, const ct_tensor *b, ct_dtype want_dt, const char *what)
{
    check_binary_v(op, a, NULL, b, NULL, want_dt, what);
}

static void run_binary_dtype(ct_dtype dt, const char *lvl, th_rng *r)
{
    bool integer = ct_dtype_is_int(dt);
    for (int op = 0; op < (int)(sizeof bin_ops / sizeof bin_ops[0]); op++) {
        for (size_t si = 0; si < sizeof small_shapes / sizeof small_shapes[0]; si++) {
            const shape_pair *sp = &small_shapes[si];
            for (int lc = 0; lc < 5; lc++) {
                static const ew_layout combos[5][2] = {{EW_CONTIG, EW_CONTIG}, {EW_TRANSPOSED, EW_CONTIG},
                                                       {EW_CONTIG, EW_SLICED}, {EW_SLICED, EW_EXPANDED},
                                                       {EW_EXPANDED, EW_TRANSPOSED}};
                ew_layout la = combos[lc][0], lb = combos[lc][1];
                double alo = integer ? bin_ops[op].ialo : bin_ops[op].alo, ahi = integer ? bin_ops[op].iahi : bin_ops[op].ahi;
                double blo = integer ? bin_ops[op].iblo : bin_ops[op].blo, bhi = integer ? bin_ops[op].ibhi : bin_ops[op].bhi;
                ct_tensor *a = ew_make(r, sp->na, sp->a, dt, alo, ahi, la, integer);
                ct_tensor *b = ew_make(r, sp->nb, sp->b, dt, blo, bhi, lb, integer);
                char what[96];
                snprintf(what, sizeof what, "shape pair %zu, %s a, %s b, %s", si, ew_layout_names[la], ew_layout_names[lb], lvl);
                check_binary((bin_op)op, a, b, integer && op == B_DIV ? CT_F32 : dt, what);
                ct_tensor_free(a);
                ct_tensor_free(b);
            }
        }
    }
}

static void test_binary_f32_all_levels(void)
{
    th_rng r = {1};
    for (int l = 0; l < 3; l++)
        if (ew_set_level(ew_levels[l])) run_binary_dtype(CT_F32, ew_level_names[l], &r);
    cpu_simd_set_level(CPU_SIMD_AVX512);
}

static void test_binary_other_dtypes(void)
{
    th_rng r = {2};
    const ct_dtype dts[] = {CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) run_binary_dtype(dts[i], "default level", &r);
}

/* > 100K elements: SIMD bodies and tails, several pool chunks, row broadcast,
 * 0-d operands on either side (vector-scalar kernels). */
static void test_binary_large(void)
{
    th_rng r = {3};
    int64_t shape[2] = {301, 517}, row[1] = {517};
    ct_tensor *a = ew_make(&r, 2, shape, CT_F32, 0.5, 8, EW_CONTIG, false);
    ct_tensor *as = ew_make(&r, 2, shape, CT_F32, 0.5, 8, EW_SLICED, false);
    ct_tensor *b = ew_make(&r, 2, shape, CT_F32, 0.5, 4, EW_CONTIG, false);
    ct_tensor *brow = ew_make(&r, 1, row, CT_F32, 0.5, 4, EW_CONTIG, false);
    ct_tensor *b0 = ew_make(&r, 0, NULL, CT_F32, 0.5, 4, EW_CONTIG, false);
    double *av = ew_values(a), *asv = ew_values(as), *bv = ew_values(b), *brv = ew_values(brow), *b0v = ew_values(b0);
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        for (int op = 0; op < 7; op++) {
            char what[64];
            snprintf(what, sizeof what, "large, %s", ew_level_names[l]);
            check_binary_v((bin_op)op, a, av, b, bv, CT_F32, what);
            check_binary_v((bin_op)op, as, asv, brow, brv, CT_F32, what);
            check_binary_v((bin_op)op, a, av, b0, b0v, CT_F32, what);
            check_binary_v((bin_op)op, b0, b0v, a, av, CT_F32, what);
        }
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    free(av);
    free(asv);
    free(bv);
    free(brv);
    free(b0v);
    /* the generic typed loops on the pool */
    ct_tensor *h = ew_make(&r, 2, shape, CT_F16, -4, 4, EW_TRANSPOSED, false);
    ct_tensor *d = ew_make(&r, 2, shape, CT_F64, -4, 4, EW_CONTIG, false);
    ct_tensor *i = ew_make(&r, 2, shape, CT_I64, -1000, 1000, EW_SLICED, true);
    check_binary(B_MUL, h, h, CT_F16, "large f16");
    check_binary(B_SUB, d, d, CT_F64, "large f64");
    check_binary(B_ADD, i, i, CT_I64, "large i64");
    ct_tensor *all[] = {a, as, b, brow, b0, h, d, i};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++) ct_tensor_free(all[k]);
}

/* Outputs past the streaming threshold (16 MiB) of the vector kernels; pool
 * chunks start mid-vector, so the aligned-head handling runs too. */
static void test_binary_streaming(void)
{
    th_rng r = {4};
    int64_t shape[2] = {2048, 2049};
    ct_tensor *a = ew_make(&r, 2, shape, CT_F32, -4, 4, EW_CONTIG, false);
    ct_tensor *b = ew_make(&r, 2, shape, CT_F32, -4, 4, EW_CONTIG, false);
    ct_tensor *b0 = ew_make(&r, 0, NULL, CT_F32, 1, 2, EW_CONTIG, false);
    double *av = ew_values(a), *bv = ew_values(b), *b0v = ew_values(b0);
    for (int l = 1; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        char what[64];
        snprintf(what, sizeof what, "streaming, %s", ew_level_names[l]);
        check_binary_v(B_ADD, a, av, b, bv, CT_F32, what);
        check_binary_v(B_DIV, b0, b0v, b, bv, CT_F32, what);
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    free(av);
    free(bv);
    free(b0v);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(b0);
}

/* Integer arithmetic wraps like torch's; narrowing keeps the low bits. */
static void test_int_overflow_and_nan(void)
{
    int32_t big[2] = {2147483647, -2147483647 - 1};
    int64_t n2[1] = {2};
    ct_tensor *a, *out;
    CHECK_OK(ct_tensor_from_data(1, n2, CT_I32, big, &a));
    CHECK_OK(ct_add_scalar(a, 1, &out));
    double *v = ew_values(out);
    CHECK(v[0] == -2147483648.0 && v[1] == -2147483647.0);
    free(v);
    ct_tensor_free(out);
    ct_tensor_free(a);
    /* maximum/minimum propagate NaN from either side, at every level */
    float x[3] = {NAN, 1.0f, 2.0f}, y[3] = {0.0f, NAN, 1.0f};
    int64_t n3[1] = {3};
    ct_tensor *tx, *ty;
    CHECK_OK(ct_tensor_from_data(1, n3, CT_F32, x, &tx));
    CHECK_OK(ct_tensor_from_data(1, n3, CT_F32, y, &ty));
    for (int l = 0; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        ct_tensor *mx, *mn;
        CHECK_OK(ct_maximum(tx, ty, &mx));
        CHECK_OK(ct_minimum(tx, ty, &mn));
        double *a1 = ew_values(mx), *a2 = ew_values(mn);
        CHECK_MSG(isnan(a1[0]) && isnan(a1[1]) && a1[2] == 2.0, "maximum %s: %g %g %g", ew_level_names[l], a1[0], a1[1], a1[2]);
        CHECK_MSG(isnan(a2[0]) && isnan(a2[1]) && a2[2] == 1.0, "minimum %s: %g %g %g", ew_level_names[l], a2[0], a2[1], a2[2]);
        free(a1);
        free(a2);
        ct_tensor_free(mx);
        ct_tensor_free(mn);
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    ct_tensor_free(tx);
    ct_tensor_free(ty);
}

/* ---- scalar forms ---- */

typedef ct_status (*scal_fn)(const ct_tensor *, double, ct_tensor **);

static void check_scalar(scal_fn fn, bin_op op, const ct_tensor *a, double s, ct_dtype want_dt, const char *what)
{
    int64_t n = ct_tensor_numel(a);
    double *av = ew_values(a), *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    /* float tensors see the scalar rounded to f32 (f16/bf16 compute in f32) */
    double sv = ct_tensor_dtype(a) == CT_F64 ? s : (double)(float)s;
    for (int64_t i = 0; i < n; i++) want[i] = ref_binary(op, av[i], sv, ct_dtype_is_int(want_dt));
    ct_tensor *out = NULL;
    CHECK_OK(fn(a, s, &out));
    char label[160];
    snprintf(label, sizeof label, "%s_scalar(%g) %s [%s]", bin_ops[op].name, s, ct_dtype_name(ct_tensor_dtype(a)), what);
    ew_check(out, want_dt, want, n, ew_atol(want_dt), ew_rtol(want_dt), label);
    ct_tensor_free(out);
    free(av);
    free(want);
}

static void run_scalar_dtype(ct_dtype dt, const char *lvl, th_rng *r)
{
    static const int64_t shapes[][3] = {{3, 4, 5}, {0, 3, 1}, {1, 1, 1}, {7, 1, 33}};
    bool integer = ct_dtype_is_int(dt);
    for (size_t si = 0; si < 4; si++) {
        for (int la = 0; la < EW_LAYOUTS; la++) {
            char what[96];
            snprintf(what, sizeof what, "shape %zu, %s, %s", si, ew_layout_names[la], lvl);
            ct_tensor *a = ew_make(r, 3, shapes[si], dt, integer ? -50 : 0.25, integer ? 50 : 6, (ew_layout)la, integer);
            ct_dtype fdt = integer ? CT_F32 : dt;
            check_scalar(ct_add_scalar, B_ADD, a, 3, dt, what);
            check_scalar(ct_sub_scalar, B_SUB, a, -2, dt, what);
            check_scalar(ct_mul_scalar, B_MUL, a, 4, dt, what);
            check_scalar(ct_div_scalar, B_DIV, a, -4, fdt, what);
            check_scalar(ct_pow_scalar, B_POW, a, 3, dt, what);
            check_scalar(ct_add_scalar, B_ADD, a, 2.5, fdt, what); /* non-integral scalar: int -> f32 */
            if (!integer) check_scalar(ct_pow_scalar, B_POW, a, 0.5, dt, what);
            ct_tensor_free(a);
        }
    }
}

static void test_scalar_ops(void)
{
    th_rng r = {5};
    for (int l = 0; l < 3; l++)
        if (ew_set_level(ew_levels[l])) run_scalar_dtype(CT_F32, ew_level_names[l], &r);
    cpu_simd_set_level(CPU_SIMD_AVX512);
    const ct_dtype dts[] = {CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64};
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) run_scalar_dtype(dts[i], "default level", &r);
    /* bool + integral scalar -> i64 (torch) */
    int64_t n = 4;
    ct_tensor *b = ew_make(&r, 1, &n, CT_BOOL, 0, 2, EW_CONTIG, true);
    check_scalar(ct_add_scalar, B_ADD, b, 5, CT_I64, "bool");
    ct_tensor_free(b);
    /* large f32 through the vector kernels' streaming stores */
    int64_t big[2] = {2049, 2048};
    ct_tensor *a = ew_make(&r, 2, big, CT_F32, -3, 3, EW_CONTIG, false);
    for (int l = 1; l < 3; l++) {
        if (!ew_set_level(ew_levels[l])) continue;
        check_scalar(ct_sub_scalar, B_SUB, a, 0.75, CT_F32, ew_level_names[l]);
    }
    cpu_simd_set_level(CPU_SIMD_AVX512);
    ct_tensor_free(a);
}

/* ---- promotion ---- */

static void test_promotion(void)
{
    th_rng r = {6};
    int64_t s[2] = {3, 4}, row[1] = {4};
    struct { ct_dtype a, b, want; } cases[] = {
        {CT_I32, CT_F32, CT_F32}, {CT_F16, CT_BF16, CT_F32}, {CT_I32, CT_I64, CT_I64}, {CT_BOOL, CT_I32, CT_I32},
        {CT_F32, CT_F64, CT_F64}, {CT_BF16, CT_F32, CT_F32}, {CT_I64, CT_F16, CT_F16}, {CT_BOOL, CT_F32, CT_F32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ct_tensor *a = ew_make(&r, 2, s, cases[i].a, 0, 5, EW_TRANSPOSED, true);
        ct_tensor *b = ew_make(&r, 1, row, cases[i].b, 1, 5, EW_CONTIG, true);
        char what[64];
        snprintf(what, sizeof what, "%s with %s", ct_dtype_name(cases[i].a), ct_dtype_name(cases[i].b));
        check_binary(B_ADD, a, b, cases[i].want, what);
        check_binary(B_MUL, b, a, cases[i].want, what);
        ct_tensor_free(a);
        ct_tensor_free(b);
    }
}

/* ---- comparisons ---- */

static bool ref_cmp(ct_cmp c, double a, double b)
{
    switch (c) {
    case CT_CMP_EQ: return a == b;
    case CT_CMP_NE: return a != b;
    case CT_CMP_LT: return a < b;
    case CT_CMP_LE: return a <= b;
    case CT_CMP_GT: return a > b;
    case CT_CMP_GE: return a >= b;
    }
    return false;
}

static void test_compare(void)
{
    th_rng r = {7};
    int64_t sa[3] = {4, 1, 6}, sb[2] = {5, 1}, os[3] = {4, 5, 6};
    const ct_dtype dts[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_BOOL};
    for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
        ct_dtype dt = dts[di];
        double lo = dt == CT_BOOL ? 0 : -3, hi = dt == CT_BOOL ? 2 : 3; /* small integers: many ties */
        for (int la = 0; la < EW_LAYOUTS; la++) {
            ct_tensor *a = ew_make(&r, 3, sa, dt, lo, hi, (ew_layout)la, true);
            ct_tensor *b = ew_make(&r, 2, sb, dt, lo, hi, (ew_layout)((la + 2) % EW_LAYOUTS), true);
            double *av = ew_values(a), *bv = ew_values(b), want[120];
            for (int c = CT_CMP_EQ; c <= CT_CMP_GE; c++) {
                for (int64_t i = 0; i < 120; i++)
                    want[i] = ref_cmp((ct_cmp)c, av[ew_bidx(i, 3, os, 3, sa)], bv[ew_bidx(i, 3, os, 2, sb)]);
                ct_tensor *out = NULL;
                CHECK_OK(ct_compare(a, b, (ct_cmp)c, &out));
                char label[96];
                snprintf(label, sizeof label, "compare %d %s %s", c, ct_dtype_name(dt), ew_layout_names[la]);
                ew_check(out, CT_BOOL, want, 120, 0, 0, label);
                ct_tensor_free(out);
                /* scalar forms, with integral and fractional scalars */
                const double scalars[] = {0, 1.5, -1};
                for (int k = 0; k < 3; k++) {
                    double sv = scalars[k];
                    for (int64_t i = 0; i < 24; i++) want[i] = ref_cmp((ct_cmp)c, av[i], sv);
                    CHECK_OK(ct_compare_scalar(a, (ct_cmp)c, sv, &out));
                    ew_check(out, CT_BOOL, want, 24, 0, 0, label);
                    ct_tensor_free(out);
                }
            }
            free(av);
            free(bv);
            ct_tensor_free(a);
            ct_tensor_free(b);
        }
    }
    /* the named forms, mixed dtypes (i32 vs f32 compares in f32) */
    int32_t iv[3] = {1, 2, 3};
    float fv[3] = {1.0f, 2.5f, 2.0f};
    int64_t n3 = 3;
    ct_tensor *ti, *tf;
    CHECK_OK(ct_tensor_from_data(1, &n3, CT_I32, iv, &ti));
    CHECK_OK(ct_tensor_from_data(1, &n3, CT_F32, fv, &tf));
    ct_status (*fns[6])(const ct_tensor *, const ct_tensor *, ct_tensor **) = {ct_eq, ct_ne, ct_lt, ct_le, ct_gt, ct_ge};
    for (int c = 0; c < 6; c++) {
        double want[3];
        for (int i = 0; i < 3; i++) want[i] = ref_cmp((ct_cmp)c, iv[i], fv[i]);
        ct_tensor *out = NULL;
        CHECK_OK(fns[c](ti, tf, &out));
        ew_check(out, CT_BOOL, want, 3, 0, 0, "named compare i32 vs f32");
        ct_tensor_free(out);
    }
    /* a float tensor meets the scalar in its own precision: f32(0.1) == 0.1 */
    float tenth = 0.1f;
    int64_t one = 1;
    ct_tensor *t01, *out;
    CHECK_OK(ct_tensor_from_data(1, &one, CT_F32, &tenth, &t01));
    CHECK_OK(ct_compare_scalar(t01, CT_CMP_EQ, 0.1, &out));
    double want1 = 1;
    ew_check(out, CT_BOOL, &want1, 1, 0, 0, "f32 == 0.1");
    ct_tensor_free(out);
    ct_tensor_free(t01);
    ct_tensor_free(ti);
    ct_tensor_free(tf);
}

/* ---- where ---- */

static void test_where(void)
{
    th_rng r = {8};
    int64_t sc[3] = {4, 1, 6}, sa[2] = {5, 6}, sb[3] = {4, 5, 1}, os[3] = {4, 5, 6};
    struct { ct_dtype a, b, want; } cases[] = {
        {CT_F32, CT_I32, CT_F32}, {CT_BOOL, CT_BOOL, CT_BOOL}, {CT_F16, CT_F16, CT_F16}, {CT_I64, CT_I64, CT_I64},
        {CT_F64, CT_F32, CT_F64}, {CT_BF16, CT_BF16, CT_BF16},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int la = 0; la < EW_LAYOUTS; la++) {
            ct_tensor *cf = ew_make(&r, 3, sc, CT_F32, 0, 1, (ew_layout)la, false), *cond = NULL;
            CHECK_OK(ct_compare_scalar(cf, CT_CMP_GT, 0.5, &cond));
            ct_tensor *a = ew_make(&r, 2, sa, cases[i].a, -9, 9, (ew_layout)((la + 1) % EW_LAYOUTS), true);
            ct_tensor *b = ew_make(&r, 3, sb, cases[i].b, -9, 9, (ew_layout)((la + 2) % EW_LAYOUTS), true);
            double *cv = ew_values(cond), *av = ew_values(a), *bv = ew_values(b), want[120];
            for (int64_t k = 0; k < 120; k++)
                want[k] = cv[ew_bidx(k, 3, os, 3, sc)] != 0 ? av[ew_bidx(k, 3, os, 2, sa)] : bv[ew_bidx(k, 3, os, 3, sb)];
            ct_tensor *out = NULL;
            CHECK_OK(ct_where(cond, a, b, &out));
            char label[96];
            snprintf(label, sizeof label, "where %s/%s %s", ct_dtype_name(cases[i].a), ct_dtype_name(cases[i].b),
                     ew_layout_names[la]);
            ew_check(out, cases[i].want, want, 120, 0, 0, label);
            ct_tensor_free(out);
            free(cv);
            free(av);
            free(bv);
            ct_tensor_free(cf);
            ct_tensor_free(cond);
            ct_tensor_free(a);
            ct_tensor_free(b);
        }
    }
}

/* ---- errors ---- */

static void test_errors(void)
{
    th_rng r = {9};
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s32[1] = {32};
    ct_tensor *a = ew_make(&r, 2, s23, CT_F32, 0, 1, EW_CONTIG, false), *b4 = ew_make(&r, 1, s4, CT_F32, 0, 1, EW_CONTIG, false);
    ct_tensor *bl = ew_make(&r, 2, s23, CT_BOOL, 0, 2, EW_CONTIG, true), *out = NULL;
    uint8_t qbytes[64] = {0};
    ct_tensor *q = NULL;
    CHECK_OK(ct_tensor_from_data(1, s32, CT_Q8_0, qbytes, &q));
    CHECK_STATUS(ct_add(NULL, a, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_add(a, NULL, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_add(a, a, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_mul(a, b4, &out), CT_ERR_SHAPE);
    CHECK_STATUS(ct_eq(a, b4, &out), CT_ERR_SHAPE);
    CHECK_STATUS(ct_add(bl, bl, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_maximum(bl, bl, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_add(q, q, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_add_scalar(q, 1, &out), CT_ERR_DTYPE);
    CHECK_STATUS(ct_add_scalar(NULL, 1, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_compare(a, a, (ct_cmp)17, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_compare_scalar(a, (ct_cmp)-1, 0, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_compare_scalar(NULL, CT_CMP_EQ, 0, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_where(a, a, a, &out), CT_ERR_DTYPE); /* condition must be bool */
    CHECK_STATUS(ct_where(bl, a, b4, &out), CT_ERR_SHAPE);
    CHECK_STATUS(ct_where(NULL, a, a, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_where(bl, q, a, &out), CT_ERR_DTYPE);
    int32_t iv[2] = {2, 3};
    int64_t n2 = 2;
    ct_tensor *ti;
    CHECK_OK(ct_tensor_from_data(1, &n2, CT_I32, iv, &ti));
    CHECK_STATUS(ct_pow_scalar(ti, -1, &out), CT_ERR_INVALID_ARG);
    CHECK(out == NULL);
    ct_tensor_free(ti);
    ct_tensor_free(a);
    ct_tensor_free(b4);
    ct_tensor_free(bl);
    ct_tensor_free(q);
}

int main(void)
{
    RUN(test_binary_f32_all_levels);
    RUN(test_binary_other_dtypes);
    RUN(test_binary_large);
    RUN(test_binary_streaming);
    RUN(test_int_overflow_and_nan);
    RUN(test_scalar_ops);
    RUN(test_promotion);
    RUN(test_compare);
    RUN(test_where);
    RUN(test_errors);
    return th_finish();
}
