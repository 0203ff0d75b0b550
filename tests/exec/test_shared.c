/* Devices whose memory is the host's (CT_DEVICE_HOST_SHARED: PoCL, integrated GPUs), through
 * the asynchronous simulated backend: their copy of host data is a buffer over the host
 * copy's own bytes (ct_backend_ops.alias), so nothing is uploaded or downloaded between the
 * two and the statistics say "zero-copy"; a write into that memory waits for all that may
 * still read it (a slow op of the device, another device's upload, the host), and the memory
 * outlives the device's use of it. Every value is checked against host arithmetic, and the
 * slow device ops make a missing wait show as a wrong value. */
#include <stdio.h>
#include <stdlib.h>

#include "exec_util.h"

static const int64_t g_shape[2] = {64, 64};
#define N_ELEM (64 * 64)
#define SLOW_US 50000 /* 50 ms: far longer than any host step between submit and check */

static void reset_shared(int n_test, uint32_t shared)
{
    ct_exec_set_fault(NULL);
    ct_exec_force_device(NULL);
    ct_exec_set_strict(false);
    CHECK_OK(test_backend_install_shared(n_test, "*", true, shared));
    ct_exec_set_small_bytes(0);
    ct_exec_stats_reset();
}

static double in_a(int64_t i) { return (double)(i % 1000); }
static double twice(int64_t i) { return 2 * in_a(i); }
static double square(int64_t i) { return in_a(i) * in_a(i); }

static ct_transfer_stats transfers(ct_transfer_method m)
{
    ct_transfer_stats x[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(x);
    return x[m];
}

/* Host data goes to the shared device and its results come back with no copy; the other
 * device still copies. */
static void test_zero_copy(void)
{
    reset_shared(2, 1u); /* test:0 shared, test:1 not */
    CHECK(ct_exec_transfer_method("cpu", "test:0") == CT_TRANSFER_SHARED);
    CHECK(ct_exec_transfer_method("test:0", "cpu") == CT_TRANSFER_SHARED);
    CHECK(ct_exec_transfer_method("cpu", "test:1") == CT_TRANSFER_HOST_TO_DEVICE);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0), *out = xu_host_f32(2, g_shape, 0, 0);
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a); /* a read where it lies */
    CHECK_MSG(xu_count_wrong(c, twice) == 0, "a + a on the shared device");
    CHECK(test_backend_aliases(0) == 1 && test_backend_uploaded(0) == 0);
    CHECK(test_backend_downloaded(0) == N_ELEM * 4); /* c was made there: a copy of its own */
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(ct_mul_out(a, a, out)); /* written where the caller reads it */
    ct_exec_force_device(NULL);
    CHECK_MSG(xu_count_wrong(out, square) == 0, "a * a into a host tensor on the shared device");
    CHECK(test_backend_aliases(0) == 2 && test_backend_uploaded(0) == 0 && test_backend_downloaded(0) == N_ELEM * 4);
    ct_transfer_stats sh = transfers(CT_TRANSFER_SHARED);
    CHECK_MSG(sh.count == 2 && sh.bytes == 2 * N_ELEM * 4, "zero-copy: %llu x %llu bytes (a in, out back)",
              (unsigned long long)sh.count, (unsigned long long)sh.bytes);
    CHECK(transfers(CT_TRANSFER_HOST_TO_DEVICE).count == 0);
    ct_device_stats ds[8];
    int nd = ct_exec_stats(ds, 8);
    for (int i = 0; i < nd && i < 8; i++)
        if (!strcmp(ds[i].device, "test:0"))
            CHECK_MSG(ds[i].bytes_in == 0, "%llu bytes counted as copied in", (unsigned long long)ds[i].bytes_in);
    char text[2048];
    ct_exec_stats_format(text, sizeof text);
    CHECK_MSG(strstr(text, "zero-copy") != NULL, "the summary does not show the zero-copy transfers:\n%s", text);
    ct_tensor *d = xu_run_on("test:1", CT_OP_ADD, a, a); /* the other device uploads */
    CHECK(xu_count_wrong(d, twice) == 0 && test_backend_uploaded(1) == N_ELEM * 4 && test_backend_aliases(1) == 0);
    ct_tensor *all[] = {a, out, c, d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    CHECK_OK(ct_device_sync(NULL));
}

static void fill(ct_tensor *t, float v)
{
    float *p = NULL;
    CHECK_OK(ct_tensor_data_mut(t, (void **)&p));
    for (int64_t i = 0; p && i < ct_tensor_numel(t); i++) p[i] = v;
}

/* The host writes a tensor that a slow op of the shared device is still reading: the write
 * waits for it. */
static void test_host_write_waits(void)
{
    reset_shared(1, 1u);
    test_backend_set_delay(0, SLOW_US);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0);
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a);
    fill(a, -1.0f); /* the host's bytes are test:0's */
    CHECK_MSG(xu_count_wrong(c, twice) == 0, "test:0 read a after the host overwrote it");
    ct_tensor_free(c);
    ct_tensor_free(a);
    CHECK_OK(ct_device_sync(NULL));
}

/* The shared device writes host memory that another device's upload has yet to read
 * (queued behind a slow op there): the write waits for that read. */
static void test_device_write_waits(void)
{
    reset_shared(2, 1u);
    test_backend_set_delay(1, SLOW_US);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0), *b = xu_host_f32(2, g_shape, 1, 0);
    ct_tensor *busy = xu_run_on("test:1", CT_OP_RELU, b, NULL); /* test:1 busy for 50 ms */
    ct_tensor *d = xu_run_on("test:1", CT_OP_MUL, a, a);        /* its upload of a waits behind it */
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(ct_add_out(a, a, a)); /* in place, over the host bytes test:1 still has to read */
    ct_exec_force_device(NULL);
    CHECK_MSG(xu_count_wrong(d, square) == 0, "test:1 uploaded a after test:0 overwrote it");
    CHECK_MSG(xu_count_wrong(a, twice) == 0, "a + a in place on test:0");
    ct_tensor *all[] = {a, b, busy, d};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    CHECK_OK(ct_device_sync(NULL));
}

static double recycled(int64_t i) { return 2.0 * (double)(i % 1000); }

/* A tensor freed while a slow op of the shared device still reads it: its memory is given
 * back only after that read. 64 KiB blocks go back to the host allocator's reuse cache, so
 * the next tensor of that size (written at once) would take the same bytes. */
static void test_free_waits(void)
{
    reset_shared(1, 1u);
    test_backend_set_delay(0, SLOW_US);
    const int64_t shape[2] = {128, 128};
    ct_tensor *a = xu_host_f32(2, shape, 1, 0);
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a);
    ct_tensor_free(a);
    ct_tensor *b = xu_host_f32(2, shape, 0, -7.0f);
    CHECK_MSG(xu_count_wrong(c, recycled) == 0, "test:0 read a's memory after it was freed");
    ct_tensor_free(b);
    ct_tensor_free(c);
    CHECK_OK(ct_device_sync(NULL));
}

/* A step recorded on the shared device and the CPU replays with its input written by the
 * host between replays, read in place: the same values as eager ops. Its intermediates move
 * into arenas, so the CPU's result that test:0 read in place while recording is uploaded
 * from the CPU's arena at each replay (a stale buffer over its old memory would be read
 * otherwise); the input is never uploaded. */
static void test_recorded_step(void)
{
    reset_shared(1, 1u);
    CHECK_OK(ct_exec_force_device("test:0"));
    ct_tensor *x = xu_host_f32(2, g_shape, 1, 0), *w = xu_host_f32(2, g_shape, 0.5f, 1);
    ct_tensor *u = NULL, *y = NULL, *z = NULL;
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(xu_unary(CT_OP_RELU, w, &u)); /* host memory test:0 reads in place while recording */
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(xu_binary(CT_OP_ADD, x, u, &y));
    CHECK_OK(xu_binary(CT_OP_MUL, y, y, &z));
    ct_tensor_free(u);
    ct_tensor_free(y);
    CHECK_OK(ct_step_end(&st)); /* u moves into the CPU's arena: test:0 no longer reads it in place */
    for (int k = 0; st && k < 3; k++) {
        fill(x, (float)k - 1.0f);
        CHECK_OK(ct_step_run(st));
        double *v = th_values(z);
        int bad = 0;
        for (int64_t i = 0; v && i < N_ELEM; i++) {
            double s = (double)k - 1.0 + (double)(i % 1000) * 0.5 + 1.0;
            bad += v[i] != s * s;
        }
        free(v);
        CHECK_MSG(bad == 0, "replay %d: %d elements differ from (x + w)^2", k, bad);
    }
    ct_exec_force_device(NULL);
    CHECK_MSG(test_backend_uploaded(0) == 3 * N_ELEM * 4, "%llu bytes uploaded to the shared device (u, 3 replays)",
              (unsigned long long)test_backend_uploaded(0));
    ct_step_free(st);
    ct_tensor *all[] = {x, w, z};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    CHECK_OK(ct_device_sync(NULL));
}

/* Memory at no 64-byte boundary is refused by the device: it gets a copy of its own. */
static void test_unaligned_copies(void)
{
    reset_shared(1, 1u);
    float *mem = malloc(sizeof(float) * (N_ELEM + 1));
    for (int64_t i = 0; i < N_ELEM; i++) mem[i + 1] = (float)(i % 1000);
    ct_tensor *a = NULL;
    float *p = mem + 1;
    if ((uintptr_t)p % 64 == 0) p = mem; /* never at the boundary */
    if (p == mem)
        for (int64_t i = 0; i < N_ELEM; i++) mem[i] = (float)(i % 1000);
    CHECK_OK(ct_tensor_from_blob(2, g_shape, CT_F32, p, NULL, NULL, &a));
    ct_tensor *c = xu_run_on("test:0", CT_OP_ADD, a, a);
    CHECK(xu_count_wrong(c, twice) == 0);
    CHECK(test_backend_aliases(0) == 0 && test_backend_uploaded(0) == N_ELEM * 4);
    CHECK(transfers(CT_TRANSFER_HOST_TO_DEVICE).count == 1 && transfers(CT_TRANSFER_SHARED).count == 0);
    ct_tensor_free(c);
    ct_tensor_free(a);
    CHECK_OK(ct_device_sync(NULL));
    free(mem);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_zero_copy);
    RUN(test_host_write_waits);
    RUN(test_device_write_waits);
    RUN(test_free_waits);
    RUN(test_recorded_step);
    RUN(test_unaligned_copies);
    test_backend_uninstall();
    return th_finish();
}
