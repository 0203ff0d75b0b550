/* Pinned host memory with the CUDA backend (ct_host_pin: cudaHostRegister) and
 * ct_tensor_to_host reading a GPU-only result straight into it. A download into pinned
 * memory is truly asynchronous (one into pageable memory returns only once done), so
 * this is where a read that does not wait for its download shows: the result of a
 * matmul that takes milliseconds must be all there when ct_tensor_to_host returns.
 * a @ (2 I) = 2 a exactly in f32 (one nonzero product per element), so the check is
 * exact. Skips (77) without a CUDA device. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/tensor.h"
#include "devcheck.h"
#include "exec/exec.h"

static char g_dev[32];
static const char *dev_or_skip(void) { return devcheck_device("cuda", g_dev, sizeof g_dev); }

#define N 4096 /* 4096^3 multiply-adds: milliseconds of GPU work before the download */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static ct_tensor *host_matrix(uint64_t seed, bool two_eye)
{
    float *v = calloc((size_t)N * N, sizeof *v);
    th_rng r = {seed};
    for (int64_t i = 0; i < (int64_t)N * N; i++)
        v[i] = two_eye ? (i / N == i % N ? 2.0f : 0.0f) : (float)th_uniform(&r, -4, 4);
    ct_tensor *t = NULL;
    CHECK_OK(ct_tensor_from_data(2, (int64_t[]){N, N}, CT_F32, v, &t));
    free(v);
    return t;
}

static uint64_t d2h_transfers(void)
{
    ct_transfer_stats t[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(t);
    return t[CT_TRANSFER_DEVICE_TO_HOST].count;
}

static void test_pinned_direct_read(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    ct_tensor *a = host_matrix(7, false), *e2 = host_matrix(0, true);
    const float *av = NULL;
    CHECK_OK(ct_tensor_data(a, (const void **)&av));
    size_t bytes = (size_t)N * N * sizeof(float);
    float *dst = aligned_alloc(4096, bytes);
    CHECK_OK(ct_host_pin(dst, bytes));
    CHECK(exec_pinned(NULL) == 1);
    for (int round = 0; round < 3; round++) {
        memset(dst, 0xff, bytes); /* NaN: an element the download has not written yet shows */
        CHECK_OK(ct_exec_force_device(name));
        ct_tensor *y = NULL;
        CHECK_OK(ct_matmul(a, e2, &y));
        ct_exec_force_device(NULL);
        uint64_t n0 = d2h_transfers();
        CHECK_OK(ct_tensor_to_host(y, dst, bytes));
        CHECK(d2h_transfers() - n0 == 1);
        CHECK(!storage_valid_on(y->st, NULL)); /* straight into dst: no host mirror */
        int64_t bad = 0, first = -1;
        for (int64_t i = 0; i < (int64_t)N * N; i++)
            if (dst[i] != 2 * av[i]) {
                bad++;
                if (first < 0) first = i;
            }
        CHECK_MSG(bad == 0, "round %d: %lld of %lld values wrong, first at %lld: %g vs %g", round, (long long)bad,
                  (long long)N * N, (long long)first, first >= 0 ? (double)dst[first] : 0.0,
                  first >= 0 ? 2.0 * av[first] : 0.0);
        ct_tensor_free(y);
    }
    ct_host_unpin(dst);
    CHECK(exec_pinned(NULL) == 0);
    free(dst);
    ct_tensor_free(a);
    ct_tensor_free(e2);
}

/* The same read into pageable and into pinned memory, 1 MiB (a 262k-vocabulary logits
 * row): timed and printed, not asserted (the host is shared). */
static void test_read_speed(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    const int64_t n = 262144;
    size_t bytes = (size_t)n * sizeof(float);
    ct_tensor *x = NULL;
    CHECK_OK(ct_exec_force_device(name));
    CHECK_OK(ct_full(1, &n, CT_F32, 1.5, &x));
    ct_exec_force_device(NULL);
    float *pageable = aligned_alloc(4096, bytes), *pinned = aligned_alloc(4096, bytes);
    CHECK_OK(ct_host_pin(pinned, bytes));
    double t[2] = {0, 0};
    const int reps = 200;
    for (int k = 0; k < 2; k++) {
        float *dst = k ? pinned : pageable;
        CHECK_OK(ct_tensor_to_host(x, dst, bytes)); /* first touch */
        double t0 = now_s();
        for (int r = 0; r < reps; r++) CHECK_OK(ct_tensor_to_host(x, dst, bytes));
        t[k] = (now_s() - t0) / reps;
        CHECK(dst[0] == 1.5f && dst[n - 1] == 1.5f);
    }
    fprintf(stderr, "  1 MiB device -> host read: pageable %.1f us (%.1f GB/s), pinned %.1f us (%.1f GB/s)\n",
            t[0] * 1e6, (double)bytes / t[0] * 1e-9, t[1] * 1e6, (double)bytes / t[1] * 1e-9);
    ct_host_unpin(pinned);
    free(pageable);
    free(pinned);
    ct_tensor_free(x);
}

/* Pinned memory survives a lost device and its re-initialization: unpinning stays clean. */
static void test_pin_lost_device(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    size_t bytes = 1 << 20;
    char *buf = aligned_alloc(4096, bytes);
    CHECK_OK(ct_host_pin(buf, bytes));
    setenv("CTORCH_CUDA_LATE_FAULT", "add", 1);
    CHECK_OK(ct_exec_reinit());
    ct_tensor *x = NULL, *y = NULL;
    CHECK_OK(ct_exec_force_device(name));
    CHECK_OK(ct_full(1, (int64_t[]){1 << 16}, CT_F32, 1.0, &x));
    ct_status s = ct_add(x, x, &y); /* accepted, or refused at once on the broken device */
    ct_exec_force_device(NULL);
    float v[4];
    if (s == CT_OK) { /* the fault shows at the read, as at any other sync */
        ct_tensor *one = NULL;
        CHECK_OK(ct_narrow(y, 0, 0, 1, &one));
        CHECK_STATUS(ct_tensor_to_host(one, v, sizeof v), CT_ERR_DEVICE_LOST);
        ct_tensor_free(one);
    }
    ct_host_unpin(buf); /* through the lost device: no crash, no error left behind */
    CHECK(exec_pinned(NULL) == 0);
    ct_tensor_free(x);
    ct_tensor_free(y);
    unsetenv("CTORCH_CUDA_LATE_FAULT");
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_host_pin(buf, bytes)); /* the healed device pins again */
    ct_host_unpin(buf);
    free(buf);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_pinned_direct_read);
    RUN(test_read_speed);
    RUN(test_pin_lost_device);
    return th_finish();
}
