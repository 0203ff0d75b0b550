/* Routing reasons, fallback on device errors (injected and simulated), strict
 * mode and fault specs, through the test backend's simulated devices. */
#include "exec_util.h"

#define SMALL_DEFAULT (64u * 1024u)

/* [128, 128] f32 = 64 KiB per operand: above the small-op threshold. */
static const int64_t g_big[2] = {128, 128};
static const int64_t g_tiny[1] = {4};

static int g_log_hits, g_log_total;
static char g_log_match[64];
static void log_hook(ct_log_level level, const char *msg, void *ctx)
{
    (void)ctx;
    if (level < CT_LOG_WARN) return;
    g_log_total++;
    if (strstr(msg, g_log_match)) g_log_hits++;
}

static void reset_exec(int n_test, const char *ops) { xu_reset(n_test, ops, SMALL_DEFAULT); }

/* a + b computed here, elementwise in float (what every kernel must produce exactly). */
static bool is_sum(const ct_tensor *r, const ct_tensor *a, const ct_tensor *b)
{
    int64_t n = ct_tensor_numel(a);
    double *va = th_values(a), *vb = th_values(b), *vr = th_values(r);
    bool ok = ct_tensor_numel(r) == n;
    for (int64_t i = 0; ok && i < n; i++) ok = (float)vr[i] == (float)va[i] + (float)vb[i];
    free(va);
    free(vb);
    free(vr);
    return ok;
}

static void test_capability_and_size(void)
{
    reset_exec(2, "*");
    ct_tensor *a = xu_host_f32(2, g_big, 0.5f, -3), *b = xu_host_f32(2, g_big, -0.25f, 1), *r = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &r));
    CHECK_LAST("add@test:0/capability");
    CHECK(r && is_sum(r, a, b));
    CHECK(test_backend_runs(0, CT_OP_ADD) == 1);
    ct_tensor_free(r);
    r = NULL;
    /* tiny CPU-resident operands stay on the CPU */
    ct_tensor *x = xu_host_f32(1, g_tiny, 1, 0), *y = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &y));
    CHECK_LAST("add@cpu/size");
    CHECK(y && is_sum(y, x, x));
    ct_tensor_free(y);
    y = NULL;
    /* the threshold is a setting */
    CHECK(ct_exec_small_bytes() == SMALL_DEFAULT);
    ct_exec_set_small_bytes(0);
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &y));
    CHECK_LAST("add@test:0/capability");
    ct_tensor_free(y);
    y = NULL;
    ct_exec_set_small_bytes(1u << 30);
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &y));
    CHECK_LAST("add@cpu/size");
    CHECK(y && is_sum(y, a, b));
    ct_tensor_free(y);
    y = NULL;
    /* and an environment variable */
    setenv("CTORCH_SMALL_BYTES", "8", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(ct_exec_small_bytes() == 8);
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &y));
    CHECK_LAST("add@test:0/capability");
    ct_tensor_free(y);
    unsetenv("CTORCH_SMALL_BYTES");
    CHECK_OK(ct_exec_reinit());
    CHECK(ct_exec_small_bytes() == SMALL_DEFAULT);
    /* creation ops route too: a big fill lands on the head */
    ct_tensor *f = NULL;
    CHECK_OK(ct_full(2, g_big, CT_F32, 2.5, &f));
    CHECK_LAST("fill@test:0/capability");
    CHECK(f && !strcmp(xu_residency(f), "test:0"));
    double v = 0;
    CHECK_OK(ct_tensor_item(f, 777, &v));
    CHECK(v == 2.5);
    ct_tensor_free(f);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(x);
}

static void test_residency_and_forced(void)
{
    reset_exec(2, "*");
    ct_tensor *a = xu_host_f32(2, g_big, 1, 0), *r = NULL;
    /* operands made valid on test:1: the op runs there, nothing moves */
    CHECK_OK(ct_tensor_prefetch(a, "test:1"));
    uint64_t up1 = test_backend_uploaded(1);
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &r));
    CHECK_LAST("add@test:1/residency");
    CHECK(test_backend_uploaded(1) == up1 && test_backend_uploaded(0) == 0);
    CHECK(r && !strcmp(xu_residency(r), "test:1"));
    /* a tiny tensor living only on test:1 keeps its consumers there too */
    ct_tensor *x = xu_host_f32(1, g_tiny, 1, -2), *y = NULL, *z = NULL;
    CHECK_OK(ct_exec_force_device("test:1"));
    CHECK_OK(xu_unary(CT_OP_RELU, x, &y));
    CHECK_LAST("relu@test:1/forced");
    CHECK_OK(ct_exec_force_device(NULL));
    CHECK(y && !strcmp(xu_residency(y), "test:1"));
    CHECK_OK(xu_binary(CT_OP_MUL, y, y, &z));
    CHECK_LAST("mul@test:1/residency");
    double v = -1;
    CHECK_OK(ct_tensor_item(z, 3, &v));
    CHECK(v == 1.0); /* relu(3 - 2)^2 */
    ct_tensor_free(z);
    z = NULL;
    /* forcing the CPU beats size and capability */
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &z));
    CHECK_LAST("add@cpu/forced");
    ct_tensor_free(z);
    z = NULL;
    CHECK_STATUS(ct_exec_force_device("test:9"), CT_ERR_NOT_FOUND);
    CHECK_OK(ct_exec_force_device(NULL));
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &z));
    CHECK_LAST("add@cpu/size");
    ct_tensor_free(z);
    z = NULL;
    /* devices vanish on reinstall: free what lives on them first */
    ct_tensor_free(a);
    ct_tensor_free(r);
    ct_tensor_free(x);
    ct_tensor_free(y);
    /* a forced device that lacks the op is an error, not a silent re-route */
    reset_exec(1, "add,copy,fill");
    ct_tensor *h = xu_host_f32(1, g_tiny, 1, 0);
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_STATUS(xu_binary(CT_OP_MUL, h, h, &z), CT_ERR_UNSUPPORTED);
    CHECK(strstr(ct_last_error(), "mul") && strstr(ct_last_error(), "test:0"));
    CHECK_OK(ct_exec_force_device(NULL));
    /* an op the head lacks goes to the next capable device, reason capability */
    ct_tensor *ba = xu_host_f32(2, g_big, 1, 0);
    CHECK_OK(xu_binary(CT_OP_MUL, ba, ba, &z));
    CHECK_LAST("mul@cpu/capability");
    ct_tensor_free(z);
    ct_tensor_free(h);
    ct_tensor_free(ba);
}

static void test_fallback(void)
{
    reset_exec(1, "*");
    ct_set_log_callback(log_hook, NULL);
    g_log_hits = g_log_total = 0;
    snprintf(g_log_match, sizeof g_log_match, "add on test:0");
    ct_tensor *a = xu_host_f32(2, g_big, 0.125f, -7), *b = xu_host_f32(2, g_big, 3, 0.5f), *r = NULL, *ref = NULL;
    /* the pure-CPU answer */
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &ref));
    CHECK_OK(ct_exec_force_device(NULL));
    ct_exec_stats_reset();
    CHECK_OK(ct_exec_set_fault("test:0:add:oom:1"));
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &r));
    CHECK_LAST("add@cpu/fallback");
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(strstr(rec.detail, "test:0") != NULL, "detail: %s", rec.detail);
    CHECK(r && ref && xu_equal(r, ref) && is_sum(r, a, b));
    CHECK(test_backend_runs(0, CT_OP_ADD) == 0);
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("test:0", &ds) && ds.fallbacks == 1 && ds.ops == 0);
    CHECK(xu_device_stats("cpu", &ds) && ds.ops == 1 && ds.fallbacks == 0);
    CHECK(g_log_hits == 1);
    ct_tensor_free(r);
    r = NULL;
    /* the count is used up: back on the head */
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &r));
    CHECK_LAST("add@test:0/capability");
    CHECK(r && xu_equal(r, ref));
    ct_tensor_free(r);
    r = NULL;
    /* an unlimited fault: every add falls back, logged once per (op, device) */
    CHECK_OK(ct_exec_set_fault("test:0:add:fault"));
    for (int i = 0; i < 3; i++) {
        CHECK_OK(xu_binary(CT_OP_ADD, a, b, &r));
        CHECK_LAST("add@cpu/fallback");
        CHECK(r && xu_equal(r, ref));
        ct_tensor_free(r);
        r = NULL;
    }
    CHECK_MSG(g_log_hits == 1, "%d log lines for add on test:0", g_log_hits);
    CHECK(xu_device_stats("test:0", &ds) && ds.fallbacks == 4);
    /* another op on the same device logs its own line */
    snprintf(g_log_match, sizeof g_log_match, "mul on test:0");
    g_log_hits = 0;
    CHECK_OK(ct_exec_set_fault("test:*:unsupported"));
    CHECK_OK(xu_binary(CT_OP_MUL, a, b, &r));
    CHECK_LAST("mul@cpu/fallback");
    ct_tensor_free(r);
    r = NULL;
    CHECK(g_log_hits == 1);
    CHECK_OK(ct_exec_set_fault(NULL));
    /* simulated allocation failure on the device: same fallback */
    test_backend_fail_allocs(0, 1);
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &r));
    CHECK_LAST("add@cpu/fallback");
    CHECK(r && xu_equal(r, ref));
    ct_tensor_free(r);
    r = NULL;
    /* the next allocation works again */
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &r));
    CHECK_LAST("add@test:0/capability");
    ct_tensor_free(r);
    r = NULL;
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(ref);
    /* with two devices, the failed one is skipped for the next in the chain */
    reset_exec(2, "*");
    ct_set_log_callback(log_hook, NULL);
    a = xu_host_f32(2, g_big, 0.125f, -7);
    b = xu_host_f32(2, g_big, 3, 0.5f);
    CHECK_OK(ct_exec_set_fault("test:0:matmul:oom"));
    CHECK_OK(xu_matmul(a, b, &r));
    CHECK_LAST("matmul@test:1/fallback");
    ct_tensor_free(r);
    r = NULL;
    /* every device failing, the CPU included, is an error naming the op */
    CHECK_OK(ct_exec_set_fault("*:relu:fault"));
    CHECK_STATUS(xu_unary(CT_OP_RELU, a, &r), CT_ERR_UNSUPPORTED);
    CHECK(strstr(ct_last_error(), "relu") != NULL);
    CHECK(r == NULL);
    CHECK_OK(ct_exec_set_fault(NULL));
    ct_set_log_callback(NULL, NULL);
    ct_tensor_free(a);
    ct_tensor_free(b);
}

static void test_strict(void)
{
    reset_exec(1, "*");
    ct_exec_set_strict(true);
    CHECK(ct_exec_strict());
    ct_tensor *a = xu_host_f32(2, g_big, 1, 0), *x = xu_host_f32(1, g_tiny, 1, 0), *r = NULL;
    /* strict runs everything on the head, small ops included */
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &r));
    CHECK_LAST("add@test:0/capability");
    ct_tensor_free(r);
    r = NULL;
    /* a device error is not retried elsewhere */
    CHECK_OK(ct_exec_set_fault("test:0:add:oom:1"));
    CHECK_STATUS(xu_binary(CT_OP_ADD, a, a, &r), CT_ERR_STRICT);
    CHECK_MSG(strstr(ct_last_error(), "add") && strstr(ct_last_error(), "test:0"), "%s", ct_last_error());
    CHECK(r == NULL);
    CHECK_OK(ct_exec_set_fault(NULL));
    ct_tensor_free(x);
    /* neither is an op the head cannot run */
    reset_exec(1, "add,copy,fill");
    ct_exec_set_strict(true);
    CHECK_STATUS(xu_binary(CT_OP_MUL, a, a, &r), CT_ERR_STRICT);
    CHECK_MSG(strstr(ct_last_error(), "mul") && strstr(ct_last_error(), "test:0"), "%s", ct_last_error());
    ct_exec_set_strict(false);
    CHECK_OK(xu_binary(CT_OP_MUL, a, a, &r));
    CHECK_LAST("mul@cpu/capability");
    ct_tensor_free(r);
    /* CTORCH_STRICT from the environment */
    setenv("CTORCH_STRICT", "1", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(ct_exec_strict());
    setenv("CTORCH_STRICT", "0", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(!ct_exec_strict());
    unsetenv("CTORCH_STRICT");
    ct_tensor_free(a);
}

static void test_non_device_errors(void)
{
    reset_exec(1, "*");
    int64_t s23[2] = {2, 3};
    ct_tensor *a = xu_host_f32(2, s23, 1, 0), *r = NULL;
    /* shape errors come from the frontend: nothing runs anywhere */
    CHECK_STATUS(ct_matmul(a, a, &r), CT_ERR_SHAPE);
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("cpu", &ds) && ds.ops == 0 && ds.fallbacks == 0);
    CHECK(xu_device_stats("test:0", &ds) && ds.ops == 0 && ds.fallbacks == 0);
    /* a kernel's non-device error is returned as is, not retried */
    int64_t s32[2] = {1, 32};
    ct_tensor *src = xu_host_f32(2, s32, 1, 0), *q = NULL;
    CHECK_OK(ct_empty(2, s32, CT_Q8_0, &q));
    ct_op op = {.kind = CT_OP_COPY, .n_src = 1, .src = {src}, .dst = q};
    CHECK_STATUS(exec_run(&op), CT_ERR_DTYPE);
    CHECK(xu_device_stats("cpu", &ds) && ds.fallbacks == 0);
    ct_tensor_free(q);
    ct_tensor_free(src);
    ct_tensor_free(a);
}

static void test_fault_specs(void)
{
    reset_exec(1, "*");
    static const char *good[] = {
        "test:0:add:oom", "test:add:fault:2", "*:*:unsupported", "cuda:0:matmul:oom:3,cpu:add:fault",
        "TEST:0:ADD:OOM", "opencl:1:*:fault:1", "", ",",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        CHECK_MSG(ct_exec_set_fault(good[i]) == CT_OK, "'%s': %s", good[i], ct_last_error());
    static const char *bad[] = {
        "test:0:add", "test:0:add:boom", "test:0:nope:oom", "test:0:add:oom:1:x", "a", "oom",
        "test:0:add:oom:-2", "test:0:add:1", "a:b:c:d:e:f", "x:add:oom,y:add:oom,z:add:oom,w:add:oom,v:add:oom,u:add:oom,t:add:oom,s:add:oom,r:add:oom",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ct_status s = ct_exec_set_fault(bad[i]);
        CHECK_MSG(s == CT_ERR_INVALID_ARG, "'%s' gave %s", bad[i], ct_status_name(s));
        CHECK(ct_last_error()[0] != 0);
    }
    /* a rejected spec leaves the previous one in force */
    CHECK_OK(ct_exec_set_fault("test:0:add:oom:1"));
    CHECK_STATUS(ct_exec_set_fault("garbage"), CT_ERR_INVALID_ARG);
    ct_tensor *a = xu_host_f32(2, g_big, 1, 0), *r = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &r));
    CHECK_LAST("add@cpu/fallback");
    ct_tensor_free(r);
    r = NULL;
    /* CTORCH_FAULT is read at (re)initialization; a bad one is reported */
    CHECK_OK(ct_exec_set_fault(NULL));
    setenv("CTORCH_FAULT", "test:0:add:fault:1", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &r));
    CHECK_LAST("add@cpu/fallback");
    ct_tensor_free(r);
    setenv("CTORCH_FAULT", "test:0:add", 1);
    CHECK_STATUS(ct_exec_reinit(), CT_ERR_INVALID_ARG);
    CHECK(strstr(ct_last_error(), "test:0:add") != NULL);
    unsetenv("CTORCH_FAULT");
    CHECK_OK(ct_exec_reinit());
    ct_tensor_free(a);
}

int main(void)
{
    RUN(test_capability_and_size);
    RUN(test_residency_and_forced);
    RUN(test_fallback);
    RUN(test_strict);
    RUN(test_non_device_errors);
    RUN(test_fault_specs);
    test_backend_uninstall();
    return th_finish();
}
