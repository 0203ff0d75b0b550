/* ctorch-bench-ocl-attn: decode attention alone on opencl:0 (not a timed test; a Release
 * build on the GPU machine). q [1, Hq, 1, D] over an f16 cache [1, Hkv, Tk, D] attended to
 * L keys (the length in a device tensor, as a recorded decode step reads it), optionally a
 * sliding window. Prints us per op, eager (the host's per-op cost included); run it with
 * CTORCH_OPENCL_PROFILE=1 for the kernels' device time.
 * Usage: ctorch-bench-ocl-attn HQ HKV D TK L [WINDOW] [ITERS]
 * Measured on an H100 through NVIDIA's OpenCL (2026-11-24), kernel us per call (profile),
 * main d03a1f4 (att_sdpa + att_combine) -> att_decode (ocl6, before its membar.gl fence,
 * which measured about 1 us more):
 *   TinyLlama 32/4/64, 2048 slots, 600 attended      44.5 + 20.8 -> 25.5
 *   TinyLlama 32/4/64,  512 slots, 128 attended      38.1 +  8.5 -> 25.4
 *   SmolLM2    9/3/64, 2048 slots, 600 attended      31.4 + 19.8 -> 21.5
 *   Gemma 3    4/1/256, 2048 slots, 1500, window 512 93.8 + 51.7 -> 36.5
 * Tiny kernels (a KV row write) take ~6 us there, so ~20 us of att_decode is latency, not
 * work: it hardly moves with the attended length or the split count. */
#include <stdio.h>
#include <stdlib.h>

#include "ctorch/ctorch.h"
#include "dev_bench.h"

#define DEV "opencl:0"

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: ctorch-bench-ocl-attn HQ HKV D TK L [WINDOW] [ITERS]\n");
        return 2;
    }
    int64_t Hq = atoll(argv[1]), Hkv = atoll(argv[2]), D = atoll(argv[3]), Tk = atoll(argv[4]), L = atoll(argv[5]);
    int window = argc > 6 ? atoi(argv[6]) : 0, iters = argc > 7 ? atoi(argv[7]) : 200;
    if (ct_exec_init() != CT_OK) db_die("init");
    int64_t qs[4] = {1, Hq, 1, D}, ks[4] = {1, Hkv, Tk, D};
    ct_tensor *q = db_placed_randn(DEV, 4, qs, CT_F32, 5), *k = db_placed_randn(DEV, 4, ks, CT_F16, 6);
    ct_tensor *v = db_placed_randn(DEV, 4, ks, CT_F16, 7), *len = NULL;
    int32_t l32 = (int32_t)L;
    if (ct_tensor_from_data(1, (int64_t[]){1}, CT_I32, &l32, &len) != CT_OK || ct_tensor_place(len, DEV) != CT_OK)
        db_die("length");
    ct_sdpa_params p = {.causal = true, .window = window, .length = len};
    if (ct_exec_force_device(DEV) != CT_OK) db_die("no " DEV);
    double best = 1e30;
    for (int round = 0; round < 4; round++) {
        if (ct_device_sync(DEV) != CT_OK) db_die("sync");
        double t0 = db_now();
        for (int i = 0; i < iters; i++) {
            ct_tensor *y = NULL;
            if (ct_sdpa(q, k, v, NULL, &p, &y) != CT_OK) db_die("sdpa");
            ct_tensor_free(y);
        }
        if (ct_device_sync(DEV) != CT_OK) db_die("sync");
        double t = (db_now() - t0) / iters;
        if (round > 0 && t < best) best = t;
    }
    printf("| decode sdpa Hq %lld Hkv %lld D %lld | %lld slots, %lld attended, window %d | %.1f us per op (eager) |\n",
           (long long)Hq, (long long)Hkv, (long long)D, (long long)Tk, (long long)L, window, best * 1e6);
    ct_tensor_free(q);
    ct_tensor_free(k);
    ct_tensor_free(v);
    ct_tensor_free(len);
    return 0;
}
