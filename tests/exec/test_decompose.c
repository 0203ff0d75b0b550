/* Decomposition: on a simulated device that lacks the fused ops but has their parts,
 * every decomposable op runs there as its parts (never on the CPU), the trace and the
 * statistics say `decomposed`, and the result is the CPU backend's fused kernel's within
 * the tolerance stated per op (the parts round to f32 between steps, the fused kernels
 * do not: a few ulps of the inputs' scale, more where exp/rsqrt amplify). */
#include <stdlib.h>

#include "exec_util.h"

/* Everything the decompositions use, none of the fused ops. */
#define PARTS "add,sub,mul,div,matmul,copy,fill,sum,mean,max,exp,log,rsqrt,silu,gelu,add_scalar,mul_scalar"

typedef ct_status (*op_fn)(ct_tensor *const *in, ct_tensor **out);

static ct_tensor *g_len; /* sdpa's length tensor, for the case that must not decompose */

static ct_status f_rms(ct_tensor *const *in, ct_tensor **out) { return ct_rms_norm(in[0], in[1], 1e-5, out); }
static ct_status f_rms_nw(ct_tensor *const *in, ct_tensor **out) { return ct_rms_norm(in[0], NULL, 1e-6, out); }
static ct_status f_ln1(ct_tensor *const *in, ct_tensor **out) { return ct_layer_norm(in[0], 1, in[1], in[2], 1e-5, out); }
static ct_status f_ln2(ct_tensor *const *in, ct_tensor **out) { return ct_layer_norm(in[0], 2, NULL, NULL, 1e-5, out); }
static ct_status f_softmax_last(ct_tensor *const *in, ct_tensor **out) { return ct_softmax(in[0], -1, out); }
static ct_status f_softmax_mid(ct_tensor *const *in, ct_tensor **out) { return ct_softmax(in[0], 1, out); }
static ct_status f_logsoftmax_first(ct_tensor *const *in, ct_tensor **out) { return ct_log_softmax(in[0], 0, out); }
static ct_status f_swiglu(ct_tensor *const *in, ct_tensor **out) { return ct_swiglu(in[0], in[1], out); }
static ct_status f_geglu(ct_tensor *const *in, ct_tensor **out) { return ct_geglu(in[0], in[1], out); }
static ct_status f_linear(ct_tensor *const *in, ct_tensor **out) { return ct_linear(in[0], in[1], in[2], out); }
static ct_status f_linear_nb(ct_tensor *const *in, ct_tensor **out) { return ct_linear(in[0], in[1], NULL, out); }
static ct_status f_sdpa(ct_tensor *const *in, ct_tensor **out)
{
    return ct_sdpa(in[0], in[1], in[2], NULL, &(ct_sdpa_params){0}, out);
}
static ct_status f_sdpa_causal(ct_tensor *const *in, ct_tensor **out)
{
    return ct_sdpa(in[0], in[1], in[2], NULL, &(ct_sdpa_params){.causal = true}, out);
}
static ct_status f_sdpa_window_mask(ct_tensor *const *in, ct_tensor **out)
{
    return ct_sdpa(in[0], in[1], in[2], in[3], &(ct_sdpa_params){.causal = true, .window = 3, .scale = 0.3}, out);
}
static ct_status f_sdpa_len(ct_tensor *const *in, ct_tensor **out)
{
    return ct_sdpa(in[0], in[1], in[2], NULL, &(ct_sdpa_params){.causal = true, .length = g_len}, out);
}

typedef struct dcase {
    const char *name, *op;
    op_fn fn;
    int n_in;
    int ndim[4];
    int64_t shape[4][4];
    double lo, hi; /* input range */
    double atol, rtol;
} dcase;

static const dcase cases[] = {
    {"rms_norm", "rms_norm", f_rms, 2, {3, 1}, {{2, 5, 48}, {48}}, -2, 2, 1e-5, 1e-5},
    {"rms_norm no weight", "rms_norm", f_rms_nw, 1, {2}, {{7, 33}}, -3, 3, 1e-5, 1e-5},
    {"layer_norm last dim", "layer_norm", f_ln1, 3, {2, 1, 1}, {{6, 40}, {40}, {40}}, -2, 2, 2e-5, 2e-5},
    {"layer_norm 2 dims", "layer_norm", f_ln2, 1, {3}, {{3, 4, 9}}, -2, 2, 2e-5, 2e-5},
    {"softmax last dim", "softmax", f_softmax_last, 1, {2}, {{5, 37}}, -8, 8, 1e-7, 1e-5},
    {"softmax odd dim", "softmax", f_softmax_mid, 1, {3}, {{3, 7, 5}}, -8, 8, 1e-7, 1e-5},
    {"log_softmax dim 0", "log_softmax", f_logsoftmax_first, 1, {2}, {{9, 4}}, -8, 8, 1e-5, 1e-5},
    {"swiglu", "swiglu", f_swiglu, 2, {2, 2}, {{4, 64}, {4, 64}}, -6, 6, 1e-5, 1e-5},
    {"geglu", "geglu", f_geglu, 2, {2, 2}, {{4, 64}, {4, 64}}, -6, 6, 1e-5, 1e-5},
    {"linear with bias", "linear", f_linear, 3, {3, 2, 1}, {{2, 3, 24}, {10, 24}, {10}}, -1, 1, 1e-5, 1e-5},
    {"linear no bias", "linear", f_linear_nb, 2, {2, 2}, {{1, 32}, {17, 32}}, -1, 1, 1e-5, 1e-5},
    {"sdpa gqa", "sdpa", f_sdpa, 3, {4, 4, 4}, {{1, 4, 3, 8}, {1, 2, 6, 8}, {1, 2, 6, 5}}, -1, 1, 2e-6, 1e-5},
    {"sdpa causal", "sdpa", f_sdpa_causal, 3, {4, 4, 4}, {{2, 2, 4, 16}, {2, 2, 7, 16}, {2, 2, 7, 16}}, -1, 1, 2e-6,
     1e-5},
    {"sdpa window + mask", "sdpa", f_sdpa_window_mask, 4, {4, 4, 4, 2},
     {{1, 6, 5, 8}, {1, 3, 5, 8}, {1, 3, 5, 8}, {5, 5}}, -1, 1, 2e-6, 1e-5},
};

static ct_tensor *inputs(const dcase *c, uint64_t seed, ct_tensor **in)
{
    th_rng rng = {seed};
    for (int i = 0; i < c->n_in; i++) in[i] = th_random(&rng, c->ndim[i], c->shape[i], CT_F32, c->lo, c->hi);
    return in[0];
}

static void free_inputs(ct_tensor **in, int n)
{
    for (int i = 0; i < n; i++) ct_tensor_free(in[i]);
}

/* The CPU's fused kernel's answer. */
static double *cpu_answer(const dcase *c, ct_tensor *const *in, int64_t *n)
{
    CHECK_OK(ct_exec_force_device("cpu"));
    ct_tensor *r = NULL;
    CHECK_OK(c->fn(in, &r));
    CHECK_OK(ct_exec_force_device(NULL));
    *n = r ? ct_tensor_numel(r) : 0;
    double *v = r ? th_values(r) : NULL;
    ct_tensor_free(r);
    return v;
}

static void check_case(const dcase *c, uint64_t seed)
{
    ct_tensor *in[4] = {0};
    inputs(c, seed, in);
    int64_t n = 0;
    double *want = cpu_answer(c, in, &n);
    ct_exec_stats_reset();
    int before = test_backend_runs(0, CT_OP_MUL) + test_backend_runs(0, CT_OP_MATMUL) + test_backend_runs(0, CT_OP_EXP);
    ct_tensor *r = NULL;
    CHECK_OK(c->fn(in, &r));
    char want_route[64];
    snprintf(want_route, sizeof want_route, "%s@test:0/decomposed", c->op);
    CHECK_LAST(want_route);
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("cpu", &ds) && ds.ops == 0); /* no part ran on the CPU */
    CHECK_MSG(xu_device_stats("test:0", &ds) && ds.decomposed >= 1 && ds.ops >= 1, "%s: %llu decomposed, %llu ops",
              c->name, (unsigned long long)ds.decomposed, (unsigned long long)ds.ops);
    int after = test_backend_runs(0, CT_OP_MUL) + test_backend_runs(0, CT_OP_MATMUL) + test_backend_runs(0, CT_OP_EXP);
    CHECK(after > before);
    if (r && want) {
        CHECK(ct_tensor_numel(r) == n);
        double *got = th_values(r);
        CHECK_MSG(th_allclose(got, want, n, c->atol, c->rtol), "%s (seed %llu)", c->name, (unsigned long long)seed);
        free(got);
    }
    free(want);
    ct_tensor_free(r);
    free_inputs(in, c->n_in);
}

static void test_every_op_matches_cpu(void)
{
    for (int async = 0; async < 2; async++) {
        ct_exec_set_fault(NULL);
        ct_exec_set_strict(false);
        CHECK_OK(async ? test_backend_install_async(1, PARTS) : test_backend_install(1, PARTS));
        ct_exec_set_small_bytes(0);
        CHECK_OK(ct_exec_set_devices("test:0,cpu"));
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            for (uint64_t seed = 1; seed <= 2; seed++) check_case(&cases[i], seed * 100 + i);
        CHECK_OK(ct_exec_set_devices(NULL));
    }
}

/* The decomposition applies to the head's lacking op only: the rest of the chain is not
 * asked, and ops the head has run fused. */
static void test_trace_and_stats(void)
{
    xu_reset(1, PARTS, 0);
    CHECK_OK(ct_exec_set_devices("test:0,cpu"));
    const dcase *c = &cases[0];
    ct_tensor *in[4] = {0}, *r = NULL;
    inputs(c, 5, in);
    const char *path = "test_decompose_trace.json";
    CHECK_OK(ct_exec_set_trace(path));
    CHECK_OK(c->fn(in, &r));
    CHECK_OK(ct_exec_set_trace(NULL));
    FILE *f = fopen(path, "rb");
    char buf[16384] = {0};
    size_t got = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    remove(path);
    CHECK(got > 0);
    /* the fused op's own line and its parts' lines carry the reason */
    CHECK(strstr(buf, "\"rms_norm\"") != NULL || strstr(buf, "rms_norm") != NULL);
    int n_dec = 0;
    for (const char *p = buf; (p = strstr(p, "decomposed")); p++) n_dec++;
    CHECK_MSG(n_dec >= 6, "%d trace entries say decomposed", n_dec);
    char text[2048];
    ct_exec_stats_format(text, sizeof text);
    CHECK(strstr(text, "decomposed") != NULL);
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("test:0", &ds) && ds.decomposed == 1 && ds.ops == 6); /* x*x, mean, +eps, rsqrt, x*r, *w */
    ct_tensor_free(r);
    free_inputs(in, c->n_in);
    CHECK_OK(ct_exec_set_devices(NULL));
}

/* A missing part, an uncovered parameter, or a fused op the device has: no decomposition. */
static void test_when_not(void)
{
    xu_reset(1, "add,sub,mul,div,matmul,copy,fill,sum,mean,max,log,rsqrt,silu,gelu,add_scalar,mul_scalar", 0);
    CHECK_OK(ct_exec_set_devices("test:0,cpu"));
    ct_tensor *in[4] = {0}, *r = NULL;
    inputs(&cases[4], 3, in); /* softmax: exp is missing */
    CHECK_OK(ct_softmax(in[0], -1, &r));
    CHECK_LAST("softmax@cpu/capability");
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("test:0", &ds) && ds.decomposed == 0 && ds.ops == 0);
    ct_tensor_free(r);
    free_inputs(in, 1);

    xu_reset(1, PARTS, 0);
    /* the attended length lives on the device: sdpa with one is not decomposed */
    const dcase *c = &cases[12];
    inputs(c, 4, in);
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){1}, CT_I32, (int32_t[]){5}, &g_len));
    int64_t n = 0;
    dcase lc = *c;
    lc.fn = f_sdpa_len;
    double *want = cpu_answer(&lc, in, &n);
    CHECK_OK(f_sdpa_len(in, &r));
    CHECK_LAST("sdpa@cpu/capability");
    double *got = th_values(r);
    CHECK(th_allclose(got, want, n, 0, 0));
    free(got);
    free(want);
    ct_tensor_free(r);
    ct_tensor_free(g_len);
    g_len = NULL;
    free_inputs(in, c->n_in);
    /* small host operands stay on the CPU (the size rule), as for any op */
    ct_exec_set_small_bytes(1 << 20);
    inputs(&cases[1], 6, in);
    ct_exec_stats_reset();
    CHECK_OK(ct_rms_norm(in[0], NULL, 1e-6, &r));
    CHECK_LAST("rms_norm@cpu/capability");
    CHECK(xu_device_stats("test:0", &ds) && ds.decomposed == 0 && ds.ops == 0);
    ct_tensor_free(r);
    free_inputs(in, 1);
    CHECK_OK(ct_exec_set_devices(NULL));
}

/* A part failing with a device error sends the fused op down the chain, whole. */
static void test_part_failure_falls_back(void)
{
    xu_reset(1, PARTS, 0);
    CHECK_OK(ct_exec_set_devices("test:0,cpu"));
    const dcase *c = &cases[4];
    ct_tensor *in[4] = {0}, *r = NULL;
    inputs(c, 9, in);
    int64_t n = 0;
    double *want = cpu_answer(c, in, &n);
    ct_exec_stats_reset();
    test_backend_fail_allocs_after(0, 3, 1000); /* from the 4th allocation (a part's output) on */
    CHECK_OK(c->fn(in, &r));
    test_backend_fail_allocs(0, 0);
    CHECK_LAST("softmax@cpu/fallback");
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("test:0", &ds) && ds.fallbacks == 1 && ds.decomposed == 0);
    double *got = th_values(r);
    CHECK(th_allclose(got, want, n, 0, 0));
    free(got);
    free(want);
    ct_tensor_free(r);
    free_inputs(in, 1);
    CHECK(test_backend_live_buffers(0) == 0); /* the parts' intermediates were released */
    /* strict mode: running the head's parts is not routing away from the head */
    xu_reset(1, PARTS, 0);
    inputs(c, 10, in);
    ct_exec_set_strict(true);
    CHECK_OK(c->fn(in, &r));
    CHECK_LAST("softmax@test:0/decomposed");
    ct_tensor_free(r);
    free_inputs(in, 1);
    ct_exec_set_strict(false);
    CHECK_OK(ct_exec_set_devices(NULL));
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_every_op_matches_cpu);
    RUN(test_trace_and_stats);
    RUN(test_when_not);
    RUN(test_part_failure_falls_back);
    test_backend_uninstall();
    return th_finish();
}
