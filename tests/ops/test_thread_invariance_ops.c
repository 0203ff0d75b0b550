/* The CPU kernels that split one reduction across threads give bit-identical
 * results for 1, 2 and 3 threads: decode attention with one KV head over a
 * long cache (split into key segments) and a long f64 sum (split into parts).
 * Sampling at a fixed seed must give the same text for any -t. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define MAX_THREADS 3

typedef ct_status (*op_fn)(ct_tensor *const *in, ct_tensor **out);

/* Runs fn with 1..MAX_THREADS threads; every result must equal the first byte for byte. */
static void same_for_all_threads(const char *what, op_fn fn, ct_tensor *const *in, size_t bytes)
{
    unsigned char *ref = malloc(bytes), *got = malloc(bytes);
    for (int t = 1; ref && got && t <= MAX_THREADS; t++) {
        ct_set_num_threads(t);
        ct_tensor *out = NULL;
        CHECK_OK(fn(in, &out));
        if (!out) break;
        CHECK_OK(ct_tensor_to_host(out, t == 1 ? ref : got, bytes));
        ct_tensor_free(out);
        if (t > 1) CHECK_MSG(memcmp(ref, got, bytes) == 0, "%s: %d threads differ from 1 thread", what, t);
    }
    free(ref);
    free(got);
}

static ct_status sdpa_decode(ct_tensor *const *in, ct_tensor **out)
{
    ct_sdpa_params p = {.causal = true};
    return ct_sdpa(in[0], in[1], in[2], NULL, &p, out);
}

static void test_sdpa_decode(void)
{
    th_rng r = {7};
    /* one KV head (Gemma 3 270M's shape), 4 query heads, one query over 1000 keys */
    const int64_t qs[4] = {1, 4, 1, 64}, ks[4] = {1, 1, 1000, 64};
    ct_tensor *in[3] = {th_random(&r, 4, qs, CT_F32, -1, 1), th_random(&r, 4, ks, CT_F32, -1, 1),
                        th_random(&r, 4, ks, CT_F32, -1, 1)};
    same_for_all_threads("sdpa decode, 1 KV head, 1000 keys", sdpa_decode, in, 4 * 64 * sizeof(float));
    for (int i = 0; i < 3; i++) ct_tensor_free(in[i]);
}

static ct_status sum_all(ct_tensor *const *in, ct_tensor **out) { return ct_sum(in[0], NULL, 0, false, out); }

static void test_long_sum(void)
{
    th_rng r = {8};
    const int64_t n[1] = {300007};
    ct_tensor *in[1] = {th_random(&r, 1, n, CT_F64, -1, 1)};
    same_for_all_threads("f64 sum of 300007", sum_all, in, sizeof(double));
    ct_tensor_free(in[0]);
}

int main(void)
{
    /* The pool is sized on first use and never grows: ask for the most first. */
    ct_set_num_threads(MAX_THREADS);
    RUN(test_sdpa_decode);
    RUN(test_long_sum);
    return th_finish();
}
