/* Per-device weight layouts: placing a weight calls the device's import hook once; the
 * layout's memory is the device's (statistics and free memory show it); the raw bytes are
 * not uploaded, at placement or at the first use; placement flags make the layout alone or
 * the home alone; results equal the CPU's; a write to the
 * weight drops the layout (never served stale). The CPU makes its repacked Q4_K decode
 * layout at placement, so the first token does not, and keeps a quantized weight of a type
 * with no repacked layout as a dense copy (in 2 MiB pages) that gives the same bits. */
#include <stdlib.h>
#include <string.h>

#include "exec_util.h"
#include "quant/quant.h"

#define N 24
#define K 40

static double *cpu_linear(const ct_tensor *x, const ct_tensor *w, const ct_tensor *b)
{
    ct_tensor *r = NULL;
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_linear(x, w, b, &r));
    CHECK_OK(ct_exec_force_device(NULL));
    double *v = r ? th_values(r) : NULL;
    ct_tensor_free(r);
    return v;
}

static void test_device_import(void)
{
    xu_reset(1, "*", 0);
    test_backend_set_import(true);
    th_rng rng = {11};
    int64_t ws[2] = {N, K}, xs[2] = {3, K}, bs[1] = {N};
    ct_tensor *w = th_random(&rng, 2, ws, CT_F32, -1, 1), *x = th_random(&rng, 2, xs, CT_F32, -1, 1),
              *b = th_random(&rng, 1, bs, CT_F32, -1, 1);
    double *want = cpu_linear(x, w, b);
    uint64_t fr0, tot, fr1;
    CHECK_OK(ct_device_memory("test:0", &fr0, &tot));
    uint64_t up0 = test_backend_uploaded(0);
    CHECK_OK(ct_tensor_place(w, "test:0"));
    CHECK(test_backend_imports(0) == 1);
    CHECK(test_backend_uploaded(0) == up0); /* no raw upload at placement */
    CHECK_OK(ct_device_memory("test:0", &fr1, &tot));
    CHECK(fr0 - fr1 == N * K * sizeof(float));
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("test:0", &ds) && ds.layout_bytes == N * K * sizeof(float));
    for (int i = 0; i < 2; i++) {
        uint64_t up = test_backend_uploaded(0);
        ct_tensor *r = NULL;
        CHECK_OK(ct_linear(x, w, b, &r));
        CHECK_LAST("linear@test:0/capability");
        /* the first use moves x and the bias, not the weight; the second nothing */
        CHECK_MSG(test_backend_uploaded(0) - up == (i == 0 ? (3 * K + N) * sizeof(float) : 0), "use %d uploaded %llu",
                  i, (unsigned long long)(test_backend_uploaded(0) - up));
        double *got = th_values(r);
        CHECK(th_allclose(got, want, 3 * N, 1e-6, 1e-6));
        free(got);
        ct_tensor_free(r);
    }
    CHECK(test_backend_imports(0) == 1); /* once, at placement */
    /* a write to the weight drops its layout: the next use reads the new raw bytes */
    ct_tensor *half = NULL;
    CHECK_OK(ct_full(2, ws, CT_F32, 0.5, &half));
    CHECK_OK(ct_copy_(w, half));
    ct_tensor_free(half);
    CHECK(xu_device_stats("test:0", &ds) && ds.layout_bytes == 0);
    double *want2 = cpu_linear(x, w, b);
    ct_tensor *r = NULL;
    CHECK_OK(ct_linear(x, w, b, &r));
    double *got = th_values(r);
    CHECK(th_allclose(got, want2, 3 * N, 1e-6, 1e-6));
    free(got);
    free(want2);
    free(want);
    ct_tensor_free(r);
    ct_tensor_free(w);
    ct_tensor_free(x);
    ct_tensor_free(b);
    CHECK(xu_device_stats("test:0", &ds) && ds.layout_bytes == 0);
}

/* ct_tensor_place_ex: CT_PLACE_NO_LAYOUT homes the weight without the device's layout (the
 * raw bytes go there instead), CT_PLACE_KEEP_HOME makes the layout without touching the home;
 * unknown flags, and flags with no device, are errors that change nothing. */
static void test_place_flags(void)
{
    xu_reset(1, "*", 0);
    test_backend_set_import(true);
    th_rng rng = {23};
    int64_t ws[2] = {N, K};
    ct_tensor *w = th_random(&rng, 2, ws, CT_F32, -1, 1);
    ct_device_stats ds = {0};
    uint64_t up0 = test_backend_uploaded(0);
    CHECK(ct_tensor_placement(w) == NULL);
    CHECK_OK(ct_tensor_place_ex(w, "test:0", CT_PLACE_NO_LAYOUT));
    CHECK(test_backend_imports(0) == 0);
    CHECK(test_backend_uploaded(0) - up0 == N * K * sizeof(float)); /* the raw bytes instead */
    CHECK(xu_device_stats("test:0", &ds) && ds.layout_bytes == 0);
    CHECK(ct_tensor_placement(w) && !strcmp(ct_tensor_placement(w), "test:0"));
    CHECK_OK(ct_tensor_place(w, NULL));
    CHECK(ct_tensor_placement(w) == NULL);

    CHECK_OK(ct_tensor_place_ex(w, "test:0", CT_PLACE_KEEP_HOME));
    CHECK(test_backend_imports(0) == 1);
    CHECK(xu_device_stats("test:0", &ds) && ds.layout_bytes == N * K * sizeof(float));
    CHECK(ct_tensor_placement(w) == NULL);
    CHECK_OK(ct_tensor_place(w, "cpu"));
    CHECK_OK(ct_tensor_place_ex(w, "test:0", CT_PLACE_KEEP_HOME)); /* the home stays the CPU */
    CHECK(ct_tensor_placement(w) && !strcmp(ct_tensor_placement(w), "cpu"));

    CHECK(ct_tensor_place_ex(w, "test:0", 1u << 7) == CT_ERR_INVALID_ARG);
    CHECK(strstr(ct_last_error(), "unknown flags 0x80") != NULL);
    CHECK(ct_tensor_place_ex(w, NULL, CT_PLACE_NO_LAYOUT) == CT_ERR_INVALID_ARG);
    CHECK(ct_tensor_place_ex(w, "test:9", 0) == CT_ERR_NOT_FOUND);
    CHECK(strstr(ct_last_error(), "ct_tensor_place_ex: no device 'test:9'") != NULL);
    CHECK(ct_tensor_placement(w) && !strcmp(ct_tensor_placement(w), "cpu"));
    ct_tensor_free(w);
}

/* n rows of k uniform values in [-1, 1] quantized to t (malloc'd; free it). */
static char *random_quant_rows(ct_dtype t, int n, int k, th_rng *rng)
{
    size_t rb = ct_dtype_row_bytes(t, k);
    char *q = malloc(rb * (size_t)n);
    float *row = malloc(sizeof(float) * (size_t)k);
    for (int i = 0; q && row && i < n; i++) {
        for (int j = 0; j < k; j++) row[j] = (float)th_uniform(rng, -1, 1);
        CHECK_OK(quant_quantize_row(t, row, q + (size_t)i * rb, k));
    }
    free(row);
    return q;
}

/* Places w on the CPU; returns the layout bytes that added there. */
static uint64_t place_on_cpu(ct_tensor *w)
{
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("cpu", &ds));
    uint64_t before = ds.layout_bytes;
    CHECK_OK(ct_tensor_place(w, "cpu"));
    CHECK(xu_device_stats("cpu", &ds));
    return ds.layout_bytes - before;
}

/* The CPU's repacked Q4_K layout is made at placement, not by the first decode. */
static void test_cpu_repack_at_placement(void)
{
    if (!quant_get_repack(CT_Q4_K)) {
        th_skip("no repacked Q4_K kernels on this CPU");
        return;
    }
    xu_reset(0, "", 0);
    enum { QN = 32, QK = 512 };
    th_rng rng = {5};
    size_t rb = ct_dtype_row_bytes(CT_Q4_K, QK);
    char *q = random_quant_rows(CT_Q4_K, QN, QK, &rng);
    int64_t ws[2] = {QN, QK}, xs[2] = {1, QK};
    ct_tensor *w = NULL, *w2 = NULL, *x = th_random(&rng, 2, xs, CT_F32, -1, 1), *r = NULL, *r2 = NULL;
    CHECK_OK(ct_tensor_from_data(2, ws, CT_Q4_K, q, &w));
    CHECK_OK(ct_tensor_from_data(2, ws, CT_Q4_K, q, &w2));
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("cpu", &ds));
    uint64_t before = ds.layout_bytes, placed = place_on_cpu(w); /* about the weight's size (a little per-block side data) */
    CHECK_MSG(placed >= rb * QN && placed < 2 * rb * QN, "%llu layout bytes, %zu weight bytes",
              (unsigned long long)placed, rb * QN);
    CHECK_OK(ct_linear(x, w, NULL, &r));
    CHECK(xu_device_stats("cpu", &ds) && ds.layout_bytes - before == placed); /* not made again */
    CHECK_OK(ct_linear(x, w2, NULL, &r2)); /* unplaced: repacked at its first use, as before */
    double *a = th_values(r), *bv = th_values(r2);
    CHECK(th_allclose(a, bv, QN, 0, 0));
    free(a);
    free(bv);
    ct_tensor_free(r);
    ct_tensor_free(r2);
    ct_tensor_free(w);
    ct_tensor_free(w2);
    ct_tensor_free(x);
    CHECK(xu_device_stats("cpu", &ds) && ds.layout_bytes == before);
    free(q);
}

/* linear of x and w on the CPU, as floats (CTORCH_REPACK as set). */
static float *cpu_linear_f(const ct_tensor *x, const ct_tensor *w, int64_t n)
{
    ct_tensor *r = NULL;
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_linear(x, w, NULL, &r));
    CHECK_OK(ct_exec_force_device(NULL));
    float *v = malloc(sizeof(float) * (size_t)n);
    if (r && v) CHECK_OK(ct_tensor_to_host(r, v, sizeof(float) * (size_t)n));
    ct_tensor_free(r);
    return v;
}

/* A quantized weight of 1 MiB or more whose type has no repacked layout here (Q3_K, Q2_K or
 * Q6_K, whichever the SIMD level lacks one for) is kept as a dense copy at placement (layout
 * bytes = the weight's bytes), and decode and prompt rows read from it give the bits that
 * reading the weight in place gives. */
static void test_cpu_dense_copy(void)
{
    const ct_dtype cands[] = {CT_Q3_K, CT_Q2_K, CT_Q6_K};
    ct_dtype t = CT_F32;
    for (size_t i = 0; i < sizeof cands / sizeof cands[0] && t == CT_F32; i++)
        if (!quant_get_repack(cands[i])) t = cands[i];
    if (t == CT_F32) {
        th_skip("this CPU keeps Q3_K, Q2_K and Q6_K repacked");
        return;
    }
    xu_reset(0, "", 0);
    enum { DK = 2048, DM = 20 };
    th_rng rng = {17};
    size_t rb = ct_dtype_row_bytes(t, DK);
    const int DN = (int)(((size_t)1 << 20) / rb + 16); /* just over 1 MiB */
    char *q = random_quant_rows(t, DN, DK, &rng);
    int64_t ws[2] = {DN, DK}, xs[2] = {DM, DK}, x1s[2] = {1, DK};
    ct_tensor *w = NULL, *x = th_random(&rng, 2, xs, CT_F32, -1, 1), *x1 = th_random(&rng, 2, x1s, CT_F32, -1, 1);
    CHECK_OK(ct_tensor_from_data(2, ws, t, q, &w));
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("cpu", &ds));
    uint64_t before = ds.layout_bytes, placed = place_on_cpu(w);
    CHECK_MSG(placed == rb * (size_t)DN, "%s: %llu layout bytes, %zu weight bytes", ct_dtype_name(t),
              (unsigned long long)placed, rb * (size_t)DN);
    float *kept = cpu_linear_f(x, w, DM * DN), *kept1 = cpu_linear_f(x1, w, DN);
    setenv("CTORCH_REPACK", "0", 1);
    CHECK_OK(ct_exec_reinit());
    float *raw = cpu_linear_f(x, w, DM * DN), *raw1 = cpu_linear_f(x1, w, DN);
    unsetenv("CTORCH_REPACK");
    CHECK_OK(ct_exec_reinit());
    CHECK(kept && raw && !memcmp(kept, raw, sizeof(float) * DM * (size_t)DN));
    CHECK(kept1 && raw1 && !memcmp(kept1, raw1, sizeof(float) * (size_t)DN));
    free(kept), free(kept1), free(raw), free(raw1);
    ct_tensor_free(w);
    ct_tensor_free(x);
    ct_tensor_free(x1);
    CHECK(xu_device_stats("cpu", &ds) && ds.layout_bytes == before);
    free(q);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_device_import);
    RUN(test_place_flags);
    RUN(test_cpu_repack_at_placement);
    RUN(test_cpu_dense_copy);
    test_backend_uninstall();
    return th_finish();
}
