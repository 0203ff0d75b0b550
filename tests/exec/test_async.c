/* The asynchronous device contract, through the asynchronous simulated backend
 * (tests/support: a worker thread per device, events, NaN-poisoned buffers, late
 * faults): cross-device ordering with deliberately slow producers, stream-ordered
 * release, late fault -> device lost -> CT_ERR_DEVICE_LOST, errors charged to the
 * device that failed, failed attempts releasing what they allocated, no fixed limit
 * on the devices a storage visits. Every value is checked against host arithmetic. */
#include <stdlib.h>

#include "exec_util.h"

static const int64_t g_shape[2] = {64, 64}; /* 16 KiB: small enough to be quick */
#define N_ELEM (64 * 64)

static void reset_async(int n_test)
{
    ct_exec_set_fault(NULL);
    ct_exec_force_device(NULL);
    ct_exec_set_strict(false);
    CHECK_OK(test_backend_install_async(n_test, "*"));
    ct_exec_set_small_bytes(0); /* every op goes to the chain head unless forced */
    ct_exec_stats_reset();
}

static double in_a(int64_t i) { return (double)(i % 1000); }
static double twice(int64_t i) { return 2 * in_a(i); }                         /* a + a */
static double sum_sq(int64_t i) { return (2 * in_a(i)) * (2 * in_a(i)); } /* (a + a)^2 */
static double sum_plus(int64_t i) { return 2 * in_a(i) + 2 * in_a(i); }   /* (a + a) + (a + a) */

static const test_backend_log_entry *find_log(const test_backend_log_entry *log, int n, int dev, ct_op_kind k)
{
    for (int i = 0; i < n; i++)
        if (log[i].dev == dev && log[i].kind == k) return &log[i];
    return NULL;
}

/* A slow producer on test:0 and a consumer on test:1 (peer or staged) and on the CPU. */
static void ordering(bool peer)
{
    reset_async(2);
    test_backend_set_peer(peer);
    test_backend_set_delay(0, 100000); /* 100 ms */
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0);
    uint64_t t0 = exec_now_ns();
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a);
    uint64_t submit_ns = exec_now_ns() - t0;
    /* the call returned long before the work was done: the device is asynchronous */
    CHECK_MSG(submit_ns < 50000000u, "submitting a 100 ms op took %.1f ms", submit_ns / 1e6);
    ct_tensor *d = xu_run_on("test:1", CT_OP_MUL, c, c);
    ct_tensor *e = xu_run_on("cpu", CT_OP_ADD, c, c);
    CHECK_MSG(xu_count_wrong(d, sum_sq) == 0, "test:1 read c before test:0 finished it (%s)", peer ? "peer" : "staged");
    CHECK(xu_count_wrong(e, sum_plus) == 0);
    test_backend_log_entry log[16];
    int n = test_backend_log(log, 16);
    const test_backend_log_entry *prod = find_log(log, n, 0, CT_OP_ADD), *cons = find_log(log, n, 1, CT_OP_MUL);
    CHECK(prod && cons);
    if (prod && cons)
        CHECK_MSG(cons->start_ns >= prod->end_ns, "consumer started %.3f ms before the producer ended",
                  (double)(prod->end_ns - cons->start_ns) / 1e6);
    CHECK(peer ? test_backend_peer_bytes(1) == N_ELEM * 4 : test_backend_peer_bytes(1) == 0);
    ct_tensor *all[] = {a, c, d, e};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    CHECK_OK(ct_device_sync(NULL));
}

static void test_ordering_peer(void) { ordering(true); }
static void test_ordering_staged(void) { ordering(false); }

/* Freeing a tensor while another device's queue still has to read it: the buffer is
 * released (and poisoned by the simulated device) only after that read. */
static void test_stream_ordered_release(void)
{
    reset_async(2);
    test_backend_set_peer(true);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0);
    int live0 = test_backend_live_buffers(0), live1 = test_backend_live_buffers(1);
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a);
    CHECK_OK(ct_device_sync("test:0"));
    test_backend_set_delay(1, 100000);
    ct_tensor *busy = xu_run_on("test:1", CT_OP_RELU, a, NULL); /* test:1's queue is busy for 100 ms */
    ct_tensor *d = xu_run_on("test:1", CT_OP_MUL, c, c);        /* its peer copy of c waits behind it */
    ct_tensor_free(c);                                       /* test:0 must not release c before that */
    CHECK_MSG(xu_count_wrong(d, sum_sq) == 0, "c was released before test:1 read it");
    ct_tensor_free(d);
    ct_tensor_free(busy);
    ct_tensor_free(a);
    CHECK_OK(ct_device_sync(NULL));
    CHECK_MSG(test_backend_live_buffers(0) == live0 && test_backend_live_buffers(1) == live1,
              "buffers left: test:0 %d (was %d), test:1 %d (was %d)", test_backend_live_buffers(0), live0,
              test_backend_live_buffers(1), live1);
}

/* A fault reported late: the device is lost, what lived only there reports
 * CT_ERR_DEVICE_LOST naming it, host data is intact, and ops route around it. */
static void test_late_fault_loses_device(void)
{
    reset_async(1);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0);
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a);
    CHECK_OK(ct_device_sync("test:0")); /* c is complete, and only on test:0 */
    test_backend_fail_late(0, 0);
    ct_tensor *d = xu_run_on("test:0", CT_OP_RELU, c, NULL); /* accepted now, fails later */
    double v = 0;
    CHECK_STATUS(ct_tensor_item(d, 0, &v), CT_ERR_DEVICE_LOST);
    CHECK_MSG(strstr(ct_last_error(), "test:0") && strstr(ct_last_error(), "late fault"), "message: %s",
              ct_last_error());
    CHECK_STATUS(ct_tensor_item(c, 0, &v), CT_ERR_DEVICE_LOST); /* its only copy was there too */
    CHECK_MSG(!strcmp(xu_residency(c), ""), "lost data listed on %s", xu_residency(c));
    CHECK_STATUS(ct_device_sync("test:0"), CT_ERR_DEVICE_LOST);
    CHECK_OK(ct_tensor_item(a, 7, &v)); /* host data is not touched */
    CHECK(v == 7);
    /* routing leaves the lost device out; ops on lost data fail clearly, never with stale bytes */
    ct_tensor *e = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &e));
    CHECK_LAST("add@cpu/capability");
    ct_tensor *f = NULL;
    CHECK_STATUS(xu_binary(CT_OP_ADD, c, a, &f), CT_ERR_DEVICE_LOST);
    CHECK(f == NULL);
    ct_device_stats st = {0};
    CHECK(xu_device_stats("cpu", &st) && st.fallbacks == 0); /* not the CPU's failure */
    ct_tensor *all[] = {a, c, d, e};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    /* re-initialization brings the device back (a fresh simulated one here) */
    reset_async(1);
    a = xu_host_f32(2, g_shape, 1, 0);
    c = xu_run_on("test:0", CT_OP_ADD, a, a);
    CHECK(xu_count_wrong(c, twice) == 0);
    ct_tensor_free(a);
    ct_tensor_free(c);
}

/* A CPU op whose operand must be downloaded from a device that failed late: the
 * failure is that device's (excluded, counted there), not the CPU's. */
static void test_download_failure_charged_to_source(void)
{
    reset_async(1);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0);
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a); /* only on test:0 */
    test_backend_fail_late(0, 0);
    ct_tensor *d = xu_run_on("test:0", CT_OP_RELU, a, NULL); /* breaks test:0; nobody knows yet */
    ct_tensor *e = NULL;
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_STATUS(xu_binary(CT_OP_ADD, c, a, &e), CT_ERR_DEVICE_LOST);
    ct_exec_force_device(NULL);
    CHECK_MSG(strstr(ct_last_error(), "test:0") != NULL, "message: %s", ct_last_error());
    ct_device_stats st = {0};
    CHECK(xu_device_stats("test:0", &st) && st.fallbacks == 1);
    CHECK(xu_device_stats("cpu", &st) && st.fallbacks == 0);
    /* the CPU still runs what does not need the lost data */
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &e));
    CHECK(xu_count_wrong(e, twice) == 0);
    ct_tensor *all[] = {a, c, d, e};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* CTORCH_SYNC=1: the late fault is found right after the op that caused it, which is
 * then retried on the next device with the same result. */
static void test_sync_mode_retries(void)
{
    setenv("CTORCH_SYNC", "1", 1);
    CHECK_OK(ct_exec_reinit());
    reset_async(1);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0), *c = NULL;
    test_backend_fail_late(0, 0);
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &c));
    CHECK_LAST("add@cpu/fallback");
    CHECK(xu_count_wrong(c, twice) == 0);
    ct_device_stats st = {0};
    CHECK(xu_device_stats("test:0", &st) && st.fallbacks == 1);
    CHECK(xu_device_stats("cpu", &st) && st.fallbacks == 0 && st.ops == 1);
    ct_tensor_free(a);
    ct_tensor_free(c);
    unsetenv("CTORCH_SYNC");
    CHECK_OK(ct_exec_reinit());
}

/* A producer that fails late while a consumer on another device already waited for it
 * on the device: the consumer's result depends on garbage and must not be served. */
static void test_fault_reaches_dependent_device(void)
{
    reset_async(2);
    test_backend_set_peer(true);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0);
    test_backend_set_delay(0, 50000);
    test_backend_fail_late(0, 0);
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a); /* fails late */
    ct_tensor *d = xu_run_on("test:1", CT_OP_MUL, c, c); /* peer copy waits on test:0's event */
    double v = 0;
    CHECK_STATUS(ct_tensor_item(d, 0, &v), CT_ERR_DEVICE_LOST);
    CHECK_MSG(strstr(ct_last_error(), "test:0") != NULL, "charged to the wrong device: %s", ct_last_error());
    /* d's copy on test:1 is as lost as c: an op there must not compute on it */
    ct_tensor *g = NULL;
    CHECK_OK(ct_exec_force_device("test:1"));
    CHECK_STATUS(xu_unary(CT_OP_RELU, d, &g), CT_ERR_DEVICE_LOST);
    ct_exec_force_device(NULL);
    /* test:1 did nothing wrong: it stays in the chain */
    ct_tensor *e = xu_run_on("test:1", CT_OP_ADD, a, a);
    CHECK_OK(ct_tensor_item(e, 3, &v));
    CHECK(v == 6);
    ct_tensor *all[] = {a, c, d, e};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

/* An attempt that fails (here: the second upload runs out of device memory) releases
 * the copy it made of the first operand; the op then runs on the CPU. */
static void test_failed_attempt_releases(void)
{
    xu_reset(1, "*", 0);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0), *b = xu_host_f32(2, g_shape, 2, 0), *c = NULL;
    int live = test_backend_live_buffers(0);
    test_backend_fail_allocs_after(0, 1, 1); /* a's copy is made, b's is refused */
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &c));
    CHECK_LAST("add@cpu/fallback");
    CHECK_MSG(test_backend_live_buffers(0) == live, "the failed attempt left %d buffers on test:0",
              test_backend_live_buffers(0) - live);
    CHECK(!strcmp(xu_residency(a), "cpu"));
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(c);
}

/* A storage visits more devices than the old fixed limit of four copies. */
static void test_no_copy_limit(void)
{
    xu_reset(4, "*", 0);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0);
    const char *devs[] = {"test:0", "test:1", "test:2", "test:3"};
    for (int i = 0; i < 4; i++) CHECK_OK(ct_tensor_prefetch(a, devs[i]));
    CHECK_MSG(!strcmp(xu_residency(a), "cpu,test:0,test:1,test:2,test:3"), "residency %s", xu_residency(a));
    ct_tensor *c = xu_run_on("test:3", CT_OP_ADD, a, a);
    CHECK(xu_count_wrong(c, twice) == 0);
    ct_tensor_free(a);
    ct_tensor_free(c);
}

int main(void)
{
    RUN(test_ordering_peer);
    RUN(test_ordering_staged);
    RUN(test_stream_ordered_release);
    RUN(test_late_fault_loses_device);
    RUN(test_download_failure_charged_to_source);
    RUN(test_sync_mode_retries);
    RUN(test_fault_reaches_dependent_device);
    RUN(test_failed_attempt_releases);
    RUN(test_no_copy_limit);
    test_backend_uninstall();
    return th_finish();
}
