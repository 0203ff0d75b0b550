/* ct_sdpa with a length tensor: attending to the first L keys of a preallocated cache
 * must equal attending to a cache of exactly L keys (bit for bit: the same kernel on the
 * same rows; the kernel itself is checked against double precision in test_attention.c),
 * for decode and prompt shapes, causal and sliding-window, f32 and f16 caches, including
 * the split-over-keys decode path. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static ct_tensor *length_tensor(ct_dtype dt, int64_t L)
{
    int64_t shape[1] = {1};
    int32_t l32 = (int32_t)L;
    ct_tensor *t = NULL;
    CHECK_OK(ct_tensor_from_data(1, shape, dt, dt == CT_I32 ? (const void *)&l32 : (const void *)&L, &t));
    return t;
}

static void compare(int64_t Tq, int64_t Tk, int64_t L, bool causal, int window, ct_dtype kv_dt, uint64_t seed)
{
    th_rng r = {seed};
    int64_t D = 16;
    ct_tensor *q = th_random(&r, 4, (int64_t[]){1, 4, Tq, D}, CT_F32, -1, 1);
    ct_tensor *k = th_random(&r, 4, (int64_t[]){1, 2, Tk, D}, kv_dt, -1, 1);
    ct_tensor *v = th_random(&r, 4, (int64_t[]){1, 2, Tk, D}, kv_dt, -1, 1);
    ct_tensor *kl = NULL, *vl = NULL, *y = NULL, *want = NULL, *len = length_tensor(seed & 1 ? CT_I32 : CT_I64, L);
    CHECK_OK(ct_narrow(k, 2, 0, L, &kl));
    CHECK_OK(ct_narrow(v, 2, 0, L, &vl));
    ct_sdpa_params p = {.causal = causal, .window = window, .length = len}, pn = {.causal = causal, .window = window};
    CHECK_OK(ct_sdpa(q, k, v, NULL, &p, &y));
    CHECK_OK(ct_sdpa(q, kl, vl, NULL, &pn, &want));
    int64_t n = ct_tensor_numel(want);
    double *a = th_values(y), *b = th_values(want);
    CHECK_MSG(n == ct_tensor_numel(y) && memcmp(a, b, sizeof(double) * (size_t)n) == 0,
              "Tq %lld Tk %lld L %lld causal %d window %d %s", (long long)Tq, (long long)Tk, (long long)L, causal, window,
              ct_dtype_name(kv_dt));
    free(a), free(b);
    ct_tensor *all[] = {q, k, v, kl, vl, y, want, len};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_matches_exact_cache(void)
{
    static const int64_t lens[] = {0, 1, 5, 17, 32};
    uint64_t seed = 1;
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        for (int tq = 1; tq <= 3; tq += 2)
            for (int causal = 0; causal <= 1; causal++) {
                if (lens[i] < tq && causal) continue; /* a causal query needs its own key */
                compare(tq, 32, lens[i], causal, 0, CT_F32, seed++);
                compare(tq, 32, lens[i], causal, 4, CT_F16, seed++);
            }
    compare(1, 1024, 700, true, 0, CT_F32, 99); /* decode split over key segments */
    compare(1, 1024, 700, true, 0, CT_F16, 98);
}

static void test_errors(void)
{
    th_rng r = {5};
    ct_tensor *q = th_random(&r, 4, (int64_t[]){1, 2, 1, 8}, CT_F32, -1, 1);
    ct_tensor *k = th_random(&r, 4, (int64_t[]){1, 2, 6, 8}, CT_F32, -1, 1);
    ct_tensor *y = NULL, *too_long = length_tensor(CT_I64, 7), *negative = length_tensor(CT_I32, -1), *f = NULL, *two = NULL;
    CHECK_STATUS(ct_sdpa(q, k, k, NULL, &(ct_sdpa_params){.length = too_long}, &y), CT_ERR_RANGE);
    CHECK_STATUS(ct_sdpa(q, k, k, NULL, &(ct_sdpa_params){.length = negative}, &y), CT_ERR_RANGE);
    CHECK_OK(ct_zeros(1, (int64_t[]){1}, CT_F32, &f));
    CHECK_STATUS(ct_sdpa(q, k, k, NULL, &(ct_sdpa_params){.length = f}, &y), CT_ERR_SHAPE);
    CHECK_OK(ct_zeros(1, (int64_t[]){2}, CT_I64, &two));
    CHECK_STATUS(ct_sdpa(q, k, k, NULL, &(ct_sdpa_params){.length = two}, &y), CT_ERR_SHAPE);
    CHECK(y == NULL);
    ct_tensor *all[] = {q, k, too_long, negative, f, two};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

int main(void)
{
    /* bit-for-bit is the CPU kernel's promise; a device's decode may split the keys by the
     * cache's full length (tests/opencl and tests/cuda check those with a tolerance) */
    CHECK_OK(ct_exec_set_devices("cpu"));
    RUN(test_matches_exact_cache);
    RUN(test_errors);
    return th_finish();
}
