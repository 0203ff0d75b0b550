/* ct_tensor_to_host reading a device-only tensor straight from the device into the
 * caller's buffer (one download, after the writer, counted as a device-to-host transfer,
 * no host mirror made), and every other case keeping the path through the host copy:
 * strided views, a valid or partly stale host copy, a device that faults late, lost data.
 * On the asynchronous simulated backend, whose slow producer and NaN-poisoned buffers
 * make a read that does not wait for the writer show. Values are checked against host
 * arithmetic on the inputs. */
#include <stdlib.h>

#include "core/tensor.h"
#include "exec_util.h"

#define ROWS 64
#define COLS 48
#define N_ELEM (ROWS * COLS)
static const int64_t g_shape[2] = {ROWS, COLS};

static void reset(void)
{
    ct_exec_set_fault(NULL);
    ct_exec_force_device(NULL);
    CHECK_OK(test_backend_install_async(1, "*"));
    ct_exec_set_small_bytes(0); /* every op goes to test:0 */
    ct_exec_stats_reset();
}

static double in_a(int64_t i) { return (double)(i % 1000); }

/* a + a, computed on test:0 by a deliberately slow kernel: only there when this returns. */
static ct_tensor *slow_twice(ct_tensor **a_out)
{
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0), *y = NULL;
    test_backend_set_delay(0, 50000); /* 50 ms */
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &y));
    test_backend_set_delay(0, 0);
    *a_out = a;
    return y;
}

static float *poisoned(size_t n)
{
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = -1.0f;
    return v;
}

static uint64_t d2h_count(uint64_t *bytes)
{
    ct_transfer_stats t[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(t);
    *bytes = t[CT_TRANSFER_DEVICE_TO_HOST].bytes;
    return t[CT_TRANSFER_DEVICE_TO_HOST].count;
}

static void test_direct_read(void)
{
    reset();
    ct_tensor *a, *y = slow_twice(&a);
    float *dst = poisoned(N_ELEM);
    uint64_t down0 = test_backend_downloaded(0), b0, n0 = d2h_count(&b0);
    CHECK_OK(ct_tensor_to_host(y, dst, N_ELEM * sizeof(float)));
    int bad = 0;
    for (int64_t i = 0; i < N_ELEM; i++) bad += dst[i] != 2 * in_a(i);
    CHECK_MSG(bad == 0, "%d of %d values wrong (first: %g)", bad, N_ELEM, (double)dst[0]);
    CHECK(test_backend_downloaded(0) - down0 == N_ELEM * sizeof(float)); /* one download, the tensor's bytes */
    uint64_t b1, n1 = d2h_count(&b1);
    CHECK_MSG(n1 - n0 == 1 && b1 - b0 == N_ELEM * sizeof(float), "%llu transfers, %llu bytes",
              (unsigned long long)(n1 - n0), (unsigned long long)(b1 - b0));
    CHECK(!storage_valid_on(y->st, NULL)); /* no host mirror was made */
    CHECK_MSG(!strcmp(xu_residency(y), "test:0"), "y lives on %s", xu_residency(y));

    /* a contiguous part (rows 10..19): only its bytes come */
    ct_tensor *rows = NULL;
    CHECK_OK(ct_narrow(y, 0, 10, 10, &rows));
    for (int i = 0; i < 10 * COLS; i++) dst[i] = -1;
    down0 = test_backend_downloaded(0);
    CHECK_OK(ct_tensor_to_host(rows, dst, N_ELEM * sizeof(float))); /* a larger buffer is fine */
    bad = 0;
    for (int64_t i = 0; i < 10 * COLS; i++) bad += dst[i] != 2 * in_a(10 * COLS + i);
    CHECK_MSG(bad == 0, "%d values of the part wrong", bad);
    CHECK(test_backend_downloaded(0) - down0 == 10 * COLS * sizeof(float));
    CHECK(!storage_valid_on(y->st, NULL));

    /* argument errors as before */
    CHECK_STATUS(ct_tensor_to_host(y, NULL, N_ELEM * sizeof(float)), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_to_host(y, dst, N_ELEM * sizeof(float) - 1), CT_ERR_RANGE);
    CHECK_STATUS(ct_tensor_to_host(NULL, dst, 4), CT_ERR_INVALID_ARG);
    ct_tensor_free(rows);
    ct_tensor_free(y);
    ct_tensor_free(a);
    free(dst);
}

/* A transposed view is made contiguous on the device first (a copy op), as before. */
static void test_strided_takes_old_path(void)
{
    reset();
    ct_tensor *a, *y = slow_twice(&a), *yt = NULL;
    CHECK_OK(ct_transpose(y, 0, 1, &yt));
    float *dst = poisoned(N_ELEM);
    int copies0 = test_backend_runs(0, CT_OP_COPY);
    CHECK_OK(ct_tensor_to_host(yt, dst, N_ELEM * sizeof(float)));
    CHECK(test_backend_runs(0, CT_OP_COPY) == copies0 + 1);
    int bad = 0;
    for (int64_t c = 0; c < COLS; c++)
        for (int64_t r = 0; r < ROWS; r++) bad += dst[c * ROWS + r] != 2 * in_a(r * COLS + c);
    CHECK_MSG(bad == 0, "%d transposed values wrong", bad);
    ct_tensor_free(yt);
    ct_tensor_free(y);
    ct_tensor_free(a);
    free(dst);
}

/* A valid host copy is the source (nothing downloaded); a partly stale one is refreshed in
 * its stale range only, then read, as before. */
static void test_host_copy_takes_old_path(void)
{
    reset();
    ct_tensor *a, *y = slow_twice(&a);
    const void *p;
    CHECK_OK(ct_tensor_data(y, &p)); /* the host copy is complete now */
    float *dst = poisoned(N_ELEM);
    uint64_t down0 = test_backend_downloaded(0);
    CHECK_OK(ct_tensor_to_host(y, dst, N_ELEM * sizeof(float)));
    CHECK(test_backend_downloaded(0) == down0);
    CHECK(dst[N_ELEM - 1] == 2 * in_a(N_ELEM - 1));

    /* rows 5..6 rewritten on test:0: the host copy is stale there only */
    ct_tensor *part = NULL, *src = NULL;
    CHECK_OK(ct_narrow(y, 0, 5, 2, &part));
    int64_t ps[2] = {2, COLS};
    CHECK_OK(ct_full(2, ps, CT_F32, 7.0, &src));
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(ct_copy_(part, src));
    ct_exec_force_device(NULL);
    CHECK(storage_find(y->st, NULL)->valid && !storage_valid_on(y->st, NULL)); /* valid but stale */
    down0 = test_backend_downloaded(0);
    CHECK_OK(ct_tensor_to_host(y, dst, N_ELEM * sizeof(float)));
    CHECK_MSG(test_backend_downloaded(0) - down0 == 2 * COLS * sizeof(float), "%llu bytes downloaded",
              (unsigned long long)(test_backend_downloaded(0) - down0));
    int bad = 0;
    for (int64_t i = 0; i < N_ELEM; i++) bad += dst[i] != (i / COLS == 5 || i / COLS == 6 ? 7.0 : 2 * in_a(i));
    CHECK_MSG(bad == 0, "%d values wrong after the partial write", bad);
    CHECK(storage_valid_on(y->st, NULL)); /* the old path refreshed the host copy */
    ct_tensor_free(part);
    ct_tensor_free(src);
    ct_tensor_free(y);
    ct_tensor_free(a);
    free(dst);
}

/* The device faults late while computing the tensor: the read reports the executor's
 * CT_ERR_DEVICE_LOST naming the device, and so does a second read (now lost data). */
static void test_fault_during_read(void)
{
    reset();
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0), *y = NULL;
    test_backend_fail_late(0, 0);
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &y)); /* accepted, fails late */
    float *dst = poisoned(N_ELEM);
    CHECK_STATUS(ct_tensor_to_host(y, dst, N_ELEM * sizeof(float)), CT_ERR_DEVICE_LOST);
    CHECK_MSG(strstr(ct_last_error(), "test:0") && strstr(ct_last_error(), "late fault"), "message: %s",
              ct_last_error());
    CHECK_STATUS(ct_tensor_to_host(y, dst, N_ELEM * sizeof(float)), CT_ERR_DEVICE_LOST);
    CHECK_MSG(strstr(ct_last_error(), "test:0"), "message: %s", ct_last_error());
    CHECK(dst[0] == -1.0f); /* nothing of the failed device written into the caller's buffer */
    ct_tensor_free(y);
    ct_tensor_free(a);
    free(dst);
    CHECK_OK(ct_exec_reinit());
}

/* A synchronous device (no events) takes the direct path too. */
static void test_direct_read_sync_device(void)
{
    xu_reset(1, "*", 0);
    ct_tensor *a = xu_host_f32(2, g_shape, 1, 0), *y = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &y));
    float *dst = poisoned(N_ELEM);
    CHECK_OK(ct_tensor_to_host(y, dst, N_ELEM * sizeof(float)));
    CHECK(dst[N_ELEM - 1] == 2 * in_a(N_ELEM - 1) && dst[3] == 6.0f);
    CHECK(!storage_valid_on(y->st, NULL));
    ct_tensor_free(y);
    ct_tensor_free(a);
    free(dst);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_direct_read);
    RUN(test_strided_takes_old_path);
    RUN(test_host_copy_takes_old_path);
    RUN(test_fault_during_read);
    RUN(test_direct_read_sync_device);
    test_backend_uninstall();
    return th_finish();
}
