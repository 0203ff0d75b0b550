/* ctorch-bench-cuda-transfer: host <-> device GB/s through the CUDA backend's upload and
 * download (pageable memory goes through its pinned staging ring; pinned memory copies
 * directly), by size, next to cudaMemcpy called directly on the same buffers. Medians of
 * REPS timed copies after one warm-up; each timed copy ends with a sync. Not a test. */
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/backend.h"
#include "exec/exec.h"

#define REPS 7

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef enum { UP, DOWN } dir;

/* GB/s of one path: 0 = the backend's upload/download, 1 = cudaMemcpy directly */
static double measure(ct_device *dev, ct_buffer *buf, void *host, size_t n, dir d, int direct)
{
    double t[REPS + 1];
    for (int r = 0; r <= REPS; r++) {
        double t0 = now_s();
        ct_status s = CT_OK;
        if (direct) {
            cudaError_t e = d == UP ? cudaMemcpy(buf->ptr, host, n, cudaMemcpyHostToDevice)
                                    : cudaMemcpy(host, buf->ptr, n, cudaMemcpyDeviceToHost);
            if (e != cudaSuccess) return -1;
        } else {
            s = d == UP ? dev->ops->upload(dev, buf, 0, host, n) : dev->ops->download(dev, buf, 0, host, n);
            if (s == CT_OK) s = dev->ops->sync(dev);
            if (s != CT_OK) return -1;
        }
        t[r] = now_s() - t0;
    }
    qsort(t + 1, REPS, sizeof(double), cmp_d);
    return (double)n / t[1 + REPS / 2] / 1e9;
}

int main(int argc, char **argv)
{
    size_t max_mb = argc > 1 ? (size_t)atoi(argv[1]) : 512;
    if (ct_exec_init() != CT_OK) {
        fprintf(stderr, "ctorch-bench-cuda-transfer: %s\n", ct_last_error());
        return 1;
    }
    ct_device *dev = exec_find_device("cuda:0");
    if (!dev) {
        fprintf(stderr, "ctorch-bench-cuda-transfer: no CUDA device\n");
        return 77;
    }
    size_t max = max_mb << 20;
    void *pageable = malloc(max), *pinned = NULL;
    ct_buffer buf = {0};
    if (!pageable || cudaHostAlloc(&pinned, max, cudaHostAllocDefault) != cudaSuccess ||
        dev->ops->alloc(dev, max, &buf) != CT_OK) {
        fprintf(stderr, "ctorch-bench-cuda-transfer: cannot allocate %zu MiB\n", max_mb);
        return 1;
    }
    memset(pageable, 1, max);
    memset(pinned, 1, max);
    printf("| size | H2D pageable: ctorch / cudaMemcpy | H2D pinned: ctorch / cudaMemcpy | D2H pageable: ctorch / cudaMemcpy | D2H pinned: ctorch / cudaMemcpy | (GB/s)\n");
    printf("|---:|---:|---:|---:|---:|\n");
    for (size_t n = (size_t)64 << 10; n <= max; n *= 4) {
        printf("| %zu KiB", n >> 10);
        for (int d = 0; d < 2; d++)
            for (int p = 0; p < 2; p++) {
                void *h = p ? pinned : pageable;
                printf(" | %.1f / %.1f", measure(dev, &buf, h, n, (dir)d, 0), measure(dev, &buf, h, n, (dir)d, 1));
            }
        printf(" |\n");
    }
    dev->ops->release(dev, &buf);
    cudaFreeHost(pinned);
    free(pageable);
    ct_exec_shutdown();
    return 0;
}
