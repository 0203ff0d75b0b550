/* Placement and range transfers: with half of a stack of layers placed on a simulated
 * accelerator, ops follow the weights and the bytes moved per step are exactly the
 * activations crossing the boundary; a KV append through a narrowed view moves only
 * the appended rows when a copy is refreshed. Values against a double-precision
 * forward pass written here. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "exec_util.h"

#define D 64      /* layer width: a [D, D] f32 weight is 16 KiB */
#define LAYERS 8
#define ON_DEV 4  /* layers 0..3 on test:0, the rest on the CPU */

static uint64_t moved_total(void)
{
    ct_transfer_stats x[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(x);
    uint64_t b = 0;
    for (int m = 0; m < CT_TRANSFER_METHOD_COUNT; m++) b += x[m].bytes;
    return b;
}

/* x <- relu(x @ W_l) for each layer, in double. */
static void reference(const double *x0, double *const *w, double *out)
{
    double x[D], y[D];
    for (int j = 0; j < D; j++) x[j] = x0[j];
    for (int l = 0; l < LAYERS; l++) {
        for (int j = 0; j < D; j++) {
            double acc = 0;
            for (int k = 0; k < D; k++) acc += x[k] * w[l][k * D + j];
            y[j] = acc > 0 ? acc : 0;
        }
        for (int j = 0; j < D; j++) x[j] = y[j];
    }
    for (int j = 0; j < D; j++) out[j] = x[j];
}

static void test_ops_follow_weights(void)
{
    xu_reset(1, "*", 0); /* no size rule: only placement decides */
    th_rng rng = {7};
    int64_t wshape[2] = {D, D}, xshape[2] = {1, D};
    ct_tensor *w[LAYERS];
    double *wv[LAYERS];
    for (int l = 0; l < LAYERS; l++) {
        w[l] = th_random(&rng, 2, wshape, CT_F32, -0.3, 0.3);
        wv[l] = th_values(w[l]);
        CHECK_OK(ct_tensor_place(w[l], l < ON_DEV ? "test:0" : "cpu"));
    }
    ct_tensor *x0 = th_random(&rng, 2, xshape, CT_F32, -1, 1);
    double *x0v = th_values(x0), want[D];
    reference(x0v, wv, want);
    const uint64_t act = D * sizeof(float);
    for (int step = 0; step < 3; step++) {
        ct_exec_stats_reset();
        ct_tensor *x = NULL; /* a new step's input: the caller's host data */
        CHECK_OK(ct_tensor_from_data(2, xshape, CT_F32, (const float[D]){0}, &x));
        CHECK_OK(ct_copy_(x, x0));
        for (int l = 0; l < LAYERS; l++) {
            ct_tensor *h = NULL, *r = NULL;
            CHECK_OK(ct_matmul(x, w[l], &h));
            CHECK_LAST(l < ON_DEV ? "matmul@test:0/capability" : "matmul@cpu/residency");
            CHECK_OK(ct_relu(h, &r));
            CHECK_LAST(l < ON_DEV ? "relu@test:0/capability" : "relu@cpu/residency");
            ct_tensor_free(x);
            ct_tensor_free(h);
            x = r;
        }
        /* one step moves the input up and the activation down at the boundary, nothing else */
        ct_transfer_stats t[CT_TRANSFER_METHOD_COUNT];
        ct_exec_transfer_stats(t);
        CHECK_MSG(t[CT_TRANSFER_HOST_TO_DEVICE].bytes == act && t[CT_TRANSFER_DEVICE_TO_HOST].bytes == act &&
                      moved_total() == 2 * act,
                  "step %d moved %llu up, %llu down, %llu in all (want %llu each way)", step,
                  (unsigned long long)t[CT_TRANSFER_HOST_TO_DEVICE].bytes,
                  (unsigned long long)t[CT_TRANSFER_DEVICE_TO_HOST].bytes, (unsigned long long)moved_total(),
                  (unsigned long long)act);
        double *got = th_values(x);
        CHECK(th_allclose(got, want, D, 1e-5, 1e-4));
        free(got);
        ct_tensor_free(x);
    }
    /* the caller's host data goes to the head; placed on the CPU it pulls the op there; unplaced, not */
    ct_tensor *hw = xu_host_f32(2, wshape, 0.001f, 0), *hx = xu_host_f32(2, xshape, 1, 0), *h = NULL;
    CHECK_OK(ct_matmul(hx, hw, &h));
    CHECK_LAST("matmul@test:0/capability");
    ct_tensor_free(h);
    CHECK_OK(ct_tensor_place(hw, "cpu"));
    CHECK_OK(ct_matmul(hx, hw, &h));
    CHECK_LAST("matmul@cpu/residency");
    ct_tensor_free(h);
    CHECK_OK(ct_tensor_place(hw, NULL));
    CHECK_OK(ct_matmul(hx, hw, &h));
    CHECK_LAST("matmul@test:0/capability");
    ct_tensor_free(h);
    ct_tensor_free(hw);
    ct_tensor_free(hx);
    CHECK_STATUS(ct_tensor_place(NULL, "cpu"), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_place(x0, "test:7"), CT_ERR_NOT_FOUND);
    for (int l = 0; l < LAYERS; l++) {
        ct_tensor_free(w[l]);
        free(wv[l]);
    }
    ct_tensor_free(x0);
    free(x0v);
}

#define CTX 16
#define ROW (D * sizeof(float))

static ct_tensor *row_of(ct_tensor *cache, int64_t pos)
{
    ct_tensor *r = NULL;
    CHECK_OK(ct_narrow(cache, 0, pos, 1, &r));
    return r;
}

/* Appends host values (pos * 1000 + j) at row pos of the cache, on `dev`. */
static void append(ct_tensor *cache, int64_t pos, const char *dev)
{
    int64_t shape[2] = {1, D};
    ct_tensor *src = xu_host_f32(2, shape, 1, (float)(pos * 1000)), *dst = row_of(cache, pos);
    CHECK_OK(ct_exec_force_device(dev));
    CHECK_OK(ct_copy_(dst, src));
    ct_exec_force_device(NULL);
    ct_tensor_free(src);
    ct_tensor_free(dst);
}

static double expected_sum(const bool *written)
{
    double s = 0;
    for (int p = 0; p < CTX; p++)
        for (int j = 0; written[p] && j < D; j++) s += p * 1000.0 + j;
    return s;
}

static void test_kv_append_moves_rows(void)
{
    xu_reset(1, "*", 0);
    int64_t shape[2] = {CTX, D};
    ct_tensor *cache = NULL;
    CHECK_OK(ct_zeros(2, shape, CT_F32, &cache));
    CHECK_OK(ct_tensor_place(cache, "test:0"));
    bool written[CTX] = {0};
    ct_tensor *s = NULL;
    double v = 0;
    /* a row written on the host: refreshing the device copy uploads that row only */
    append(cache, 5, "cpu");
    written[5] = true;
    CHECK_MSG(!strcmp(xu_residency(cache), "cpu"), "a copy stale in part is listed: %s", xu_residency(cache));
    uint64_t up = test_backend_uploaded(0);
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(xu_sum_all(cache, &s));
    ct_exec_force_device(NULL);
    CHECK_MSG(test_backend_uploaded(0) - up == ROW, "refresh uploaded %llu bytes, want one row (%zu)",
              (unsigned long long)(test_backend_uploaded(0) - up), ROW);
    CHECK_OK(ct_tensor_item(s, 0, &v));
    CHECK(v == expected_sum(written));
    ct_tensor_free(s);
    /* a row written on the device (the usual KV append): reading on the host downloads that row */
    append(cache, 6, "test:0");
    written[6] = true;
    uint64_t down = test_backend_downloaded(0);
    double *all = th_values(cache);
    CHECK_MSG(test_backend_downloaded(0) - down == ROW, "host read downloaded %llu bytes, want one row",
              (unsigned long long)(test_backend_downloaded(0) - down));
    CHECK(all && all[6 * D + 3] == 6003 && all[5 * D] == 5000 && all[7 * D] == 0);
    free(all);
    /* two appends before a refresh: the hull of the two rows moves (one range per copy) */
    append(cache, 7, "cpu");
    append(cache, 9, "cpu");
    written[7] = written[9] = true;
    up = test_backend_uploaded(0);
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(xu_sum_all(cache, &s));
    ct_exec_force_device(NULL);
    CHECK(test_backend_uploaded(0) - up == 3 * ROW);
    CHECK_OK(ct_tensor_item(s, 0, &v));
    CHECK(v == expected_sum(written));
    ct_tensor_free(s);
    /* the placed cache pulls its appends to the device; the statistics count what moved */
    ct_exec_stats_reset();
    int64_t rshape[2] = {1, D};
    ct_tensor *src = xu_host_f32(2, rshape, 1, 10000), *dst = row_of(cache, 10);
    CHECK_OK(ct_copy_(dst, src));
    CHECK_LAST("copy@test:0/capability");
    CHECK(moved_total() == ROW); /* the new row went up; the cache did not move */
    ct_tensor_free(src);
    ct_tensor_free(dst);
    ct_tensor_free(cache);
}

/* ct_set_rows marks only the rows it writes (their hull) as written: the CPU appends
 * rows to a cache whose home is test:0, and refreshing test:0's copy uploads those rows,
 * eagerly and in a replayed step whose index tensor changes per run. */
static void test_set_rows_moves_rows(void)
{
    xu_reset(1, "*", 0); /* test:0 has no set_rows: the CPU writes, test:0 reads */
    int64_t shape[2] = {CTX, D}, two[2] = {2, D}, one = 2;
    ct_tensor *cache = NULL, *idx = NULL, *s = NULL;
    CHECK_OK(ct_zeros(2, shape, CT_F32, &cache));
    CHECK_OK(ct_tensor_place(cache, "test:0"));
    CHECK_OK(ct_zeros(1, &one, CT_I32, &idx));
    ct_tensor *src = xu_host_f32(2, two, 1, 0.5f); /* src[r][j] = r * D + j + 0.5 */
    int from[CTX]; /* the src row each cache row holds, -1: still zero */
    for (int r = 0; r < CTX; r++) from[r] = -1;
    static const int32_t rows[][2] = {{5, 6}, {3, 4}, {9, 8}, {3, 9}};
    for (int k = 0; k < 4; k++) {
        void *p;
        CHECK_OK(ct_tensor_data_mut(idx, &p));
        memcpy(p, rows[k], sizeof rows[k]);
        CHECK_OK(ct_set_rows(cache, src, idx));
        CHECK_LAST("set_rows@cpu/capability");
        for (int r = 0; r < 2; r++) from[rows[k][r]] = r;
        uint64_t up = test_backend_uploaded(0);
        CHECK_OK(ct_exec_force_device("test:0"));
        CHECK_OK(xu_sum_all(cache, &s));
        ct_exec_force_device(NULL);
        int lo = rows[k][0] < rows[k][1] ? rows[k][0] : rows[k][1], hi = rows[k][0] ^ rows[k][1] ^ lo;
        CHECK_MSG(test_backend_uploaded(0) - up == (uint64_t)(hi - lo + 1) * ROW,
                  "rows %d,%d: refresh uploaded %llu bytes, want %d rows", rows[k][0], rows[k][1],
                  (unsigned long long)(test_backend_uploaded(0) - up), hi - lo + 1);
        ct_tensor_free(s);
    }
    /* a recorded step: each replay appends the rows its index tensor names and sums on
     * test:0, and uploads only those rows */
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    CHECK_OK(ct_set_rows(cache, src, idx));
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(xu_sum_all(cache, &s));
    ct_exec_force_device(NULL);
    CHECK_OK(ct_step_end(&st));
    for (int pos = 10; st && pos + 1 < CTX; pos += 2) {
        void *p;
        CHECK_OK(ct_tensor_data_mut(idx, &p));
        ((int32_t *)p)[0] = pos;
        ((int32_t *)p)[1] = pos + 1;
        for (int r = 0; r < 2; r++) from[pos + r] = r;
        double add = 0; /* sum over j of (r * D + j + 0.5) per written row */
        for (int q = 0; q < CTX; q++)
            if (from[q] >= 0) add += (double)from[q] * D * D + D * D / 2.0;
        uint64_t up = test_backend_uploaded(0);
        CHECK_OK(ct_step_run(st));
        double v = 0;
        CHECK_OK(ct_tensor_item(s, 0, &v));
        CHECK_MSG(test_backend_uploaded(0) - up == 2 * ROW, "replay at %d uploaded %llu bytes, want 2 rows", pos,
                  (unsigned long long)(test_backend_uploaded(0) - up));
        CHECK_MSG(fabs(v - add) <= 1e-3 * add, "replay at %d: sum %.6g, want %.6g", pos, v, add);
    }
    ct_step_free(st);
    ct_tensor_free(s);
    ct_tensor_free(src);
    ct_tensor_free(idx);
    ct_tensor_free(cache);
}

/* A device out of memory evicts copies that are valid elsewhere before it gives up. */
static void test_eviction_under_pressure(void)
{
    xu_reset(1, "*", 0);
    const uint64_t big = D * D * sizeof(float);
    int64_t shape[2] = {D, D};
    test_backend_set_capacity(0, 3 * big);
    uint64_t fr = 0, tot = 0;
    CHECK_OK(ct_device_memory("test:0", &fr, &tot));
    CHECK(tot == 3 * big && fr == 3 * big);
    CHECK_OK(ct_device_memory("cpu", &fr, &tot));
    CHECK(tot > 0 && fr > 0 && fr <= tot);
    CHECK_STATUS(ct_device_memory("test:9", &fr, &tot), CT_ERR_NOT_FOUND);
    ct_tensor *a = xu_host_f32(2, shape, 1, 0), *b = xu_host_f32(2, shape, 2, 0), *c = NULL, *d = NULL, *e = NULL,
              *f = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, a, b, &c)); /* a, b and c fill the device */
    CHECK_LAST("add@test:0/capability");
    CHECK_OK(ct_device_memory("test:0", &fr, &tot));
    CHECK(fr == 0);
    CHECK_OK(xu_binary(CT_OP_ADD, c, c, &d)); /* a or b (also on the host) makes room */
    CHECK_LAST("add@test:0/capability");
    CHECK_MSG(!strcmp(xu_residency(a), "cpu") || !strcmp(xu_residency(b), "cpu"), "nothing evicted");
    CHECK(!strcmp(xu_residency(c), "test:0")); /* its only copy stays */
    CHECK_OK(xu_binary(CT_OP_ADD, d, d, &e)); /* the other input makes room */
    CHECK_LAST("add@test:0/capability");
    CHECK(!strcmp(xu_residency(a), "cpu") && !strcmp(xu_residency(b), "cpu"));
    CHECK_OK(xu_binary(CT_OP_ADD, e, e, &f)); /* nothing left to evict: the CPU runs it */
    CHECK_LAST("add@cpu/fallback");
    double v = 0; /* a[i] = i % 1000, b[i] = 2 (i % 1000): f = 8 (a + b) */
    CHECK_OK(ct_tensor_item(f, 7, &v));
    CHECK(v == 8 * 21.0);
    CHECK_OK(ct_tensor_item(c, 7, &v)); /* device-only data was never evicted */
    CHECK(v == 21.0);
    ct_tensor *all[] = {a, b, c, d, e, f};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
    CHECK_OK(ct_device_memory("test:0", &fr, &tot));
    CHECK(fr == tot);
}

int main(void)
{
    RUN(test_ops_follow_weights);
    RUN(test_kv_append_moves_rows);
    RUN(test_set_rows_moves_rows);
    RUN(test_eviction_under_pressure);
    test_backend_uninstall();
    return th_finish();
}
