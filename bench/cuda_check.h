/* The benchmarks' check on a CUDA runtime call (host code, C or CUDA): a failed call ends
 * the program with where and why, since a benchmark has nothing to fall back to. Included by
 * the CUDA benches of the build and by the standalone programs in bench/gpu. */
#ifndef CTORCH_BENCH_CUDA_CHECK_H
#define CTORCH_BENCH_CUDA_CHECK_H

#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK_CUDA(x)                                                                                   \
    do {                                                                                                \
        cudaError_t e_ = (x);                                                                           \
        if (e_ != cudaSuccess) {                                                                        \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));         \
            exit(1);                                                                                    \
        }                                                                                               \
    } while (0)

#endif
