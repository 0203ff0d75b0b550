/* The `out` forms (ct_*_out, include/ctorch/ops.h): results written into a caller's
 * tensor. Values against double references written here (and every form against its
 * ordinary op, bit for bit); an out that is a strided or offset view gets its elements
 * and nothing else; the in-place form (out exactly an input) works for element-wise ops
 * and any other overlap is refused, as are a wrong shape or dtype (naming the op, out
 * unchanged); an out placed on a simulated device is written there (the op runs there,
 * nothing of out is uploaded first though its copy there was stale, the host reads it
 * back); a recorded step whose ops
 * write into out tensors replays into the same buffers with no intermediates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_backend.h"

static ct_tensor *filled(int ndim, const int64_t *shape, double v)
{
    ct_tensor *t = NULL;
    CHECK_OK(ct_full(ndim, shape, CT_F32, v, &t));
    return t;
}

static ct_tensor *rnd(th_rng *r, int ndim, const int64_t *shape, double lo, double hi)
{
    return th_random(r, ndim, shape, CT_F32, lo, hi);
}

static void close_to(int line, const ct_tensor *t, const double *want, int64_t n, double atol, double rtol)
{
    double *got = th_values(t);
    CHECK_MSG(ct_tensor_numel(t) == n && th_allclose(got, want, n, atol, rtol), "line %d: out differs from the reference",
              line);
    free(got);
}

static bool all_equal_to(const ct_tensor *t, double v)
{
    double *x = th_values(t);
    bool ok = true;
    for (int64_t i = 0; i < ct_tensor_numel(t); i++) ok &= x[i] == v;
    free(x);
    return ok;
}

/* got (out) against the ordinary op's result, bit for bit. */
static void same_as(const char *what, const ct_tensor *got, ct_tensor *want)
{
    if (!want) return;
    double *g = th_values(got), *w = th_values(want);
    int64_t n = ct_tensor_numel(want);
    int bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (memcmp(&g[i], &w[i], sizeof *g) != 0) bad = (int)i;
    CHECK_MSG(n == ct_tensor_numel(got) && bad < 0, "%s: out differs from the op at %d", what, bad);
    free(g);
    free(w);
    ct_tensor_free(want);
}

#define R 3
#define C 8
#define K 5

/* Double references of a few forms, and every form against its op. */
static void test_values(void)
{
    th_rng r = {5};
    int64_t rc[2] = {R, C}, c1[1] = {C}, rk[2] = {R, K}, kc[2] = {K, C}, cK[2] = {C, K};
    ct_tensor *a = rnd(&r, 2, rc, -1, 1), *b = rnd(&r, 1, c1, -1, 1), *p = rnd(&r, 2, rc, 0.1, 2);
    ct_tensor *m = rnd(&r, 2, rk, -1, 1), *w = rnd(&r, 2, kc, -1, 1), *lw = rnd(&r, 2, cK, -1, 1);
    double *av = th_values(a), *bv = th_values(b), *mv = th_values(m), *wv = th_values(w), *lwv = th_values(lw),
           *pv = th_values(p);
    ct_tensor *o = filled(2, rc, 0), *ok = filled(2, rk, 0), *t = NULL;
    double want[R * C];

    CHECK_OK(ct_add_out(a, b, o)); /* broadcast */
    for (int i = 0; i < R * C; i++) want[i] = av[i] + bv[i % C];
    close_to(__LINE__, o, want, R * C, 1e-6, 0);
    CHECK_OK(ct_mul_scalar_out(a, -2.5, o));
    for (int i = 0; i < R * C; i++) want[i] = av[i] * -2.5;
    close_to(__LINE__, o, want, R * C, 1e-6, 0);
    CHECK_OK(ct_exp_out(a, o));
    for (int i = 0; i < R * C; i++) want[i] = exp(av[i]);
    close_to(__LINE__, o, want, R * C, 1e-6, 1e-6);
    CHECK_OK(ct_swiglu_out(a, p, o));
    for (int i = 0; i < R * C; i++) want[i] = av[i] / (1 + exp(-av[i])) * pv[i];
    close_to(__LINE__, o, want, R * C, 1e-6, 1e-5);
    CHECK_OK(ct_softmax_out(a, 1, o));
    for (int i = 0; i < R; i++) {
        double s = 0;
        for (int j = 0; j < C; j++) s += exp(av[i * C + j]);
        for (int j = 0; j < C; j++) want[i * C + j] = exp(av[i * C + j]) / s;
    }
    close_to(__LINE__, o, want, R * C, 1e-6, 1e-5);
    CHECK_OK(ct_rms_norm_out(a, b, 1e-6, o));
    for (int i = 0; i < R; i++) {
        double ss = 0;
        for (int j = 0; j < C; j++) ss += av[i * C + j] * av[i * C + j];
        for (int j = 0; j < C; j++) want[i * C + j] = av[i * C + j] / sqrt(ss / C + 1e-6) * bv[j];
    }
    close_to(__LINE__, o, want, R * C, 1e-5, 1e-5);
    CHECK_OK(ct_matmul_out(m, w, o)); /* [R, K] @ [K, C] */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += mv[i * K + k] * wv[k * C + j];
            want[i * C + j] = s;
        }
    close_to(__LINE__, o, want, R * C, 1e-5, 1e-5);
    /* linear: x [R, C], w [K, C] (one row per output) = lw^T: y = x @ lw, [R, K] */
    for (int i = 0; i < R; i++)
        for (int j = 0; j < K; j++) {
            double s = 0;
            for (int k = 0; k < C; k++) s += av[i * C + k] * lwv[k * K + j];
            want[i * K + j] = s;
        }
    ct_tensor *wl = NULL;
    CHECK_OK(ct_transpose(lw, 0, 1, &t));
    CHECK_OK(ct_contiguous(t, &wl));
    ct_tensor_free(t);
    CHECK_OK(ct_linear_out(a, wl, NULL, ok));
    close_to(__LINE__, ok, want, R * K, 1e-5, 1e-5);
    int dim1 = 1;
    ct_tensor *s1 = filled(1, (int64_t[]){R}, 0), *s0 = filled(0, NULL, 0);
    CHECK_OK(ct_sum_out(a, &dim1, 1, false, s1));
    for (int i = 0; i < R; i++) {
        want[i] = 0;
        for (int j = 0; j < C; j++) want[i] += av[i * C + j];
    }
    close_to(__LINE__, s1, want, R, 1e-5, 1e-5);
    CHECK_OK(ct_mean_out(a, NULL, 0, false, s0));
    want[0] = 0;
    for (int i = 0; i < R * C; i++) want[0] += av[i] / (R * C);
    close_to(__LINE__, s0, want, 1, 1e-6, 1e-5);
    ct_tensor *ids = NULL, *eo = filled(2, (int64_t[]){2, C}, 0);
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){2}, CT_I32, (int32_t[]){2, 0}, &ids));
    CHECK_OK(ct_embedding_out(a, ids, eo));
    for (int j = 0; j < C; j++) want[j] = av[2 * C + j], want[C + j] = av[j];
    close_to(__LINE__, eo, want, 2 * C, 0, 0);

    /* every form equals its ordinary op */
    ct_cmp cmp = CT_CMP_GT;
    ct_tensor *bo = NULL;
    CHECK_OK(ct_empty(2, rc, CT_BOOL, &bo));
#define SAME(call_out, call, outt) \
    do {                           \
        t = NULL;                  \
        CHECK_OK(call_out);        \
        CHECK_OK(call);            \
        same_as(#call, outt, t);   \
    } while (0)
    SAME(ct_sub_out(a, b, o), ct_sub(a, b, &t), o);
    SAME(ct_mul_out(a, b, o), ct_mul(a, b, &t), o);
    SAME(ct_div_out(a, p, o), ct_div(a, p, &t), o);
    SAME(ct_pow_out(p, a, o), ct_pow(p, a, &t), o);
    SAME(ct_maximum_out(a, b, o), ct_maximum(a, b, &t), o);
    SAME(ct_minimum_out(a, b, o), ct_minimum(a, b, &t), o);
    SAME(ct_compare_out(a, b, cmp, bo), ct_compare(a, b, cmp, &t), bo);
    SAME(ct_where_out(bo, a, p, o), ct_where(bo, a, p, &t), o);
    SAME(ct_add_scalar_out(a, 3, o), ct_add_scalar(a, 3, &t), o);
    SAME(ct_sub_scalar_out(a, 3, o), ct_sub_scalar(a, 3, &t), o);
    SAME(ct_div_scalar_out(a, 3, o), ct_div_scalar(a, 3, &t), o);
    SAME(ct_pow_scalar_out(p, 1.5, o), ct_pow_scalar(p, 1.5, &t), o);
    SAME(ct_neg_out(a, o), ct_neg(a, &t), o);
    SAME(ct_abs_out(a, o), ct_abs(a, &t), o);
    SAME(ct_log_out(p, o), ct_log(p, &t), o);
    SAME(ct_sqrt_out(p, o), ct_sqrt(p, &t), o);
    SAME(ct_rsqrt_out(p, o), ct_rsqrt(p, &t), o);
    SAME(ct_sin_out(a, o), ct_sin(a, &t), o);
    SAME(ct_cos_out(a, o), ct_cos(a, &t), o);
    SAME(ct_relu_out(a, o), ct_relu(a, &t), o);
    SAME(ct_silu_out(a, o), ct_silu(a, &t), o);
    SAME(ct_sigmoid_out(a, o), ct_sigmoid(a, &t), o);
    SAME(ct_tanh_out(a, o), ct_tanh(a, &t), o);
    SAME(ct_clamp_out(a, -0.5, 0.5, o), ct_clamp(a, -0.5, 0.5, &t), o);
    SAME(ct_gelu_out(a, true, o), ct_gelu(a, true, &t), o);
    SAME(ct_geglu_out(a, p, o), ct_geglu(a, p, &t), o);
    SAME(ct_log_softmax_out(a, 0, o), ct_log_softmax(a, 0, &t), o);
    SAME(ct_layer_norm_out(a, 1, b, b, 1e-5, o), ct_layer_norm(a, 1, b, b, 1e-5, &t), o);
    /* rope over [T=R, H=1, D=C], sdpa over [1, 1, R, C] */
    ct_tensor *x3 = NULL, *o3 = NULL, *pos = NULL, *q4 = NULL, *o4 = NULL;
    CHECK_OK(ct_view(a, 3, (int64_t[]){R, 1, C}, &x3));
    CHECK_OK(ct_empty(3, (int64_t[]){R, 1, C}, CT_F32, &o3));
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){R}, CT_I32, (int32_t[]){4, 7, 9}, &pos));
    ct_rope_params rp = {C, 10000, 1, CT_ROPE_NORMAL};
    SAME(ct_rope_out(x3, pos, &rp, o3), ct_rope(x3, pos, &rp, &t), o3);
    CHECK_OK(ct_view(a, 4, (int64_t[]){1, 1, R, C}, &q4));
    CHECK_OK(ct_empty(4, (int64_t[]){1, 1, R, C}, CT_F32, &o4));
    ct_sdpa_params sp = {.causal = true};
    SAME(ct_sdpa_out(q4, q4, q4, NULL, &sp, o4), ct_sdpa(q4, q4, q4, NULL, &sp, &t), o4);
    /* matmul with a 1-D operand: the op's [1, K] result is reshaped, then copied into out */
    ct_tensor *v1 = filled(1, (int64_t[]){K}, 0);
    SAME(ct_matmul_out(b, lw, v1), ct_matmul(b, lw, &t), v1);

    ct_tensor *all[] = {a, b, p, m, w, lw, o, ok, wl, s1, s0, ids, eo, bo, x3, o3, pos, q4, o4, v1};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    free(av), free(bv), free(mv), free(wv), free(lwv), free(pv);
}

/* A strided out (every other column of a buffer) and an offset contiguous out (one row of
 * a buffer) get their elements; the rest of the buffer keeps its sentinel. */
static void test_views(void)
{
    th_rng r = {6};
    int64_t big[2] = {R, 2 * C}, rc[2] = {R, C}, row[2] = {1, C};
    ct_tensor *a = rnd(&r, 2, rc, -1, 1), *buf = filled(2, big, 99), *out = NULL, *want = NULL;
    CHECK_OK(ct_slice(buf, 1, 1, 2 * C, 2, &out)); /* columns 1, 3, 5, ...: [R, C], strides (2C, 2) */
    CHECK(!ct_tensor_is_contiguous(out));
    CHECK_OK(ct_relu_out(a, out));
    CHECK_OK(ct_relu(a, &want));
    same_as("strided out", out, want);
    double *bv = th_values(buf);
    int untouched = 0;
    for (int i = 0; i < R * 2 * C; i++) untouched += (i % 2 == 0) && bv[i] == 99;
    CHECK_MSG(untouched == R * C, "%d of %d elements outside the view kept their value", untouched, R * C);
    free(bv);
    ct_tensor_free(out);
    /* row 1 of a [R, C] buffer: contiguous at an offset */
    ct_tensor *buf2 = filled(2, rc, 7), *x = rnd(&r, 2, row, -1, 1);
    CHECK_OK(ct_narrow(buf2, 0, 1, 1, &out));
    CHECK_OK(ct_mul_scalar_out(x, 2, out));
    CHECK_OK(ct_mul_scalar(x, 2, &want));
    same_as("row out", out, want);
    ct_tensor *r0 = NULL, *r2 = NULL;
    CHECK_OK(ct_narrow(buf2, 0, 0, 1, &r0));
    CHECK_OK(ct_narrow(buf2, 0, 2, 1, &r2));
    CHECK(all_equal_to(r0, 7) && all_equal_to(r2, 7));
    ct_tensor *all[] = {a, buf, buf2, x, out, r0, r2};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* In place: out exactly an input of an element-wise op. Any other overlap is refused,
 * and so is an out whose elements overlap each other. */
static void test_aliasing(void)
{
    th_rng r = {7};
    int64_t rc[2] = {R, C}, cc[2] = {C, C};
    ct_tensor *a = rnd(&r, 2, rc, -1, 1), *b = rnd(&r, 2, rc, -1, 1), *want = NULL, *want2 = NULL;
    CHECK_OK(ct_add(a, b, &want));
    CHECK_OK(ct_add_out(a, b, a)); /* a += b */
    same_as("a += b", a, want);
    CHECK_OK(ct_silu(b, &want2));
    CHECK_OK(ct_silu_out(b, b));
    same_as("silu in place", b, want2);
    /* a shifted view of the input: it would read elements already written */
    ct_tensor *head = NULL, *tail = NULL, *sq = rnd(&r, 2, cc, -1, 1), *sqv = NULL;
    CHECK_OK(ct_narrow(a, 0, 0, R - 1, &head));
    CHECK_OK(ct_narrow(a, 0, 1, R - 1, &tail));
    double *before = th_values(a);
    CHECK_STATUS(ct_add_scalar_out(head, 1, tail), CT_ERR_INVALID_ARG);
    CHECK_MSG(strstr(ct_last_error(), "ct_add_scalar_out") && strstr(ct_last_error(), "overlaps"), "message: %s",
              ct_last_error());
    /* not element-wise: even exactly the input is refused */
    CHECK_STATUS(ct_softmax_out(a, 1, a), CT_ERR_INVALID_ARG);
    CHECK_OK(ct_view(sq, 2, cc, &sqv));
    CHECK_STATUS(ct_matmul_out(sq, sq, sqv), CT_ERR_INVALID_ARG);
    double *after = th_values(a);
    CHECK(!memcmp(before, after, sizeof(double) * R * C));
    free(before), free(after);
    /* an expanded out: one element for many results */
    ct_tensor *one = filled(1, (int64_t[]){C}, 0), *ex = NULL;
    CHECK_OK(ct_expand(one, 2, rc, &ex));
    CHECK_STATUS(ct_relu_out(a, ex), CT_ERR_INVALID_ARG);
    CHECK(all_equal_to(one, 0));
    ct_tensor *all[] = {a, b, head, tail, sq, sqv, one, ex};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* A wrong shape or dtype is an error naming the op; out keeps its values. */
static void test_errors(void)
{
    th_rng r = {8};
    int64_t rc[2] = {R, C}, cr[2] = {C, R}, wide[2] = {R, C + 1};
    ct_tensor *a = rnd(&r, 2, rc, -1, 1), *t1 = filled(2, cr, 5), *t2 = filled(2, wide, 5), *f64 = NULL, *q = NULL;
    CHECK_OK(ct_full(2, rc, CT_F64, 5, &f64));
    CHECK_STATUS(ct_relu_out(a, t1), CT_ERR_SHAPE); /* same count, other shape: never reshaped */
    CHECK_MSG(strstr(ct_last_error(), "ct_relu_out") && strstr(ct_last_error(), "[8, 3]"), "message: %s",
              ct_last_error());
    CHECK_STATUS(ct_add_out(a, a, t2), CT_ERR_SHAPE); /* other count: never resized */
    CHECK_MSG(strstr(ct_last_error(), "ct_add_out"), "message: %s", ct_last_error());
    CHECK_STATUS(ct_exp_out(a, f64), CT_ERR_DTYPE);
    CHECK_MSG(strstr(ct_last_error(), "ct_exp_out") && strstr(ct_last_error(), "f64"), "message: %s", ct_last_error());
    int dim = 1;
    ct_tensor *s = filled(1, (int64_t[]){R}, 5);
    CHECK_STATUS(ct_sum_out(a, &dim, 1, true, s), CT_ERR_SHAPE); /* keepdim: [R, 1] */
    CHECK(all_equal_to(t1, 5) && all_equal_to(t2, 5) && all_equal_to(f64, 5) && all_equal_to(s, 5));
    CHECK_STATUS(ct_relu_out(a, NULL), CT_ERR_INVALID_ARG);
    CHECK_OK(ct_empty(2, (int64_t[]){R, 32}, CT_Q8_0, &q));
    CHECK_STATUS(ct_relu_out(a, q), CT_ERR_DTYPE);
    /* the op's own argument errors come through */
    CHECK_STATUS(ct_matmul_out(a, a, t1), CT_ERR_SHAPE);
    ct_tensor *all[] = {a, t1, t2, f64, s, q};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static uint64_t uploaded(void) { return test_backend_uploaded(0); }

/* An out placed on test:0: the op runs there and writes out's copy there (nothing of out
 * is uploaded first when the op writes all of it); the host copy is stale and reading it
 * downloads the result. A row of a placed buffer: only that row is downloaded. */
static void test_out_on_device(void)
{
    CHECK_OK(test_backend_install(1, "*"));
    ct_exec_set_small_bytes(0);
    th_rng r = {9};
    int64_t rc[2] = {R, C}, row[2] = {1, C};
    ct_tensor *a = rnd(&r, 2, rc, -1, 1), *b = rnd(&r, 2, rc, -1, 1), *out = filled(2, rc, 0), *want = NULL;
    CHECK_OK(ct_tensor_place(a, "test:0"));
    CHECK_OK(ct_tensor_place(b, "test:0"));
    CHECK_OK(ct_tensor_place(out, "test:0"));
    void *hp;
    CHECK_OK(ct_tensor_data_mut(out, &hp)); /* a host write: out's copy on test:0 is stale */
    uint64_t up = uploaded();
    CHECK_OK(ct_add_out(a, b, out));
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, "test:0"), "ran on %s", rec.device);
    CHECK_MSG(uploaded() == up, "%llu bytes uploaded for an op whose inputs and out live on test:0",
              (unsigned long long)(uploaded() - up));
    char res[96];
    CHECK_MSG(!strcmp(ct_tensor_residency(out, res, sizeof res), "test:0"), "out lives on %s", res);
    uint64_t down = test_backend_downloaded(0);
    ct_exec_set_devices("cpu"); /* the reference on the CPU */
    CHECK_OK(ct_add(a, b, &want));
    ct_exec_set_devices(NULL);
    same_as("out on test:0", out, want);
    CHECK(test_backend_downloaded(0) - down >= (uint64_t)R * C * sizeof(float));
    /* one row of a placed buffer */
    ct_tensor *x = rnd(&r, 2, row, -1, 1), *rowv = NULL;
    CHECK_OK(ct_tensor_place(x, "test:0"));
    double *v = th_values(out); /* host copy complete again */
    free(v);
    CHECK_OK(ct_narrow(out, 0, 2, 1, &rowv));
    CHECK_OK(ct_mul_scalar_out(x, 3, rowv));
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, "test:0"), "ran on %s", rec.device);
    down = test_backend_downloaded(0);
    v = th_values(out);
    CHECK_MSG(test_backend_downloaded(0) - down == C * sizeof(float), "host read downloaded %llu bytes, want one row",
              (unsigned long long)(test_backend_downloaded(0) - down));
    double *xv = th_values(x);
    bool ok = true;
    for (int j = 0; j < C; j++) ok &= fabs(v[2 * C + j] - 3 * xv[j]) <= 1e-6;
    CHECK(ok);
    free(v), free(xv);
    ct_tensor *all[] = {a, b, out, x, rowv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        ct_tensor_place(all[i], NULL);
        ct_tensor_free(all[i]);
    }
    ct_exec_set_small_bytes(64 * 1024);
    test_backend_uninstall();
}

/* y = relu(x * w) + 1 into two kept buffers: recorded once, replayed with new x. The
 * step has no intermediates (both results are the caller's) and its output buffers are
 * the same tensors every replay. */
static void test_recorded_step(void)
{
    th_rng r = {10};
    int64_t rc[2] = {R, C};
    ct_tensor *x = rnd(&r, 2, rc, -1, 1), *w = rnd(&r, 2, rc, -1, 1), *h = filled(2, rc, 0), *y = filled(2, rc, 0);
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_mul_out(x, w, h));
    CHECK_OK(ct_relu_out(h, h));
    CHECK_OK(ct_add_scalar_out(h, 1, y));
    CHECK_OK(ct_step_end(&st));
    ct_step_info in = {0};
    if (st) CHECK_OK(ct_step_get_info(st, &in));
    CHECK_MSG(in.n_ops == 3 && in.n_buffers == 0, "%d ops, %d intermediates", in.n_ops, in.n_buffers);
    double *wv = th_values(w);
    for (int rep = 0; st && rep < 3; rep++) {
        float *p;
        CHECK_OK(ct_tensor_data_mut(x, (void **)&p));
        for (int i = 0; i < R * C; i++) p[i] = (float)th_uniform(&r, -1, 1);
        CHECK_OK(ct_step_run(st));
        double *xv = th_values(x), want[R * C], *got = th_values(y);
        for (int i = 0; i < R * C; i++) {
            double m = (double)(float)(xv[i] * wv[i]);
            want[i] = (m > 0 ? m : 0) + 1;
        }
        CHECK_MSG(th_allclose(got, want, R * C, 1e-6, 1e-6), "replay %d", rep);
        free(xv), free(got);
    }
    free(wv);
    ct_step_free(st);
    ct_tensor *all[] = {x, w, h, y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_values);
    RUN(test_views);
    RUN(test_aliasing);
    RUN(test_errors);
    RUN(test_out_on_device);
    RUN(test_recorded_step);
    test_backend_uninstall();
    return th_finish();
}
