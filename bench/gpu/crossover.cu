// Where the executor's size threshold (CTORCH_SMALL_BYTES) comes from: for an
// element-wise f32 add whose operands live in host memory, the time on the CPU
// versus copying both operands to the GPU, one kernel, and copying the result
// back. Built by hand until the CUDA backend exists:
//   nvcc -O2 -arch=sm_90 -o crossover bench/gpu/crossover.cu && ./crossover
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "../cuda_check.h"

__global__ void add_kernel(const float *a, const float *b, float *c, size_t n)
{
    size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

static double now_us()
{
    return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

static double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int main()
{
    const size_t max_n = 16u << 20; // 64 MiB per operand
    std::vector<float> a(max_n), b(max_n), c(max_n);
    for (size_t i = 0; i < max_n; i++) { a[i] = (float)(i % 1000); b[i] = 1.0f; }
    float *da, *db, *dc;
    CHECK_CUDA(cudaMalloc(&da, max_n * 4)); CHECK_CUDA(cudaMalloc(&db, max_n * 4)); CHECK_CUDA(cudaMalloc(&dc, max_n * 4));
    CHECK_CUDA(cudaDeviceSynchronize());
    printf("%12s %12s %14s %14s %12s\n", "bytes(a+b)", "cpu_us", "gpu_copy_us", "gpu_resident", "winner");
    for (size_t n = 64; n <= max_n; n *= 4) {
        std::vector<double> tc, tg, tr;
        int reps = n < (1u << 16) ? 200 : 20;
        for (int r = 0; r < reps + 3; r++) {
            double t0 = now_us();
            for (size_t i = 0; i < n; i++) c[i] = a[i] + b[i];
            double t1 = now_us();
            CHECK_CUDA(cudaMemcpy(da, a.data(), n * 4, cudaMemcpyHostToDevice));
            CHECK_CUDA(cudaMemcpy(db, b.data(), n * 4, cudaMemcpyHostToDevice));
            add_kernel<<<(unsigned)((n + 255) / 256), 256>>>(da, db, dc, n);
            CHECK_CUDA(cudaGetLastError());
            CHECK_CUDA(cudaMemcpy(c.data(), dc, n * 4, cudaMemcpyDeviceToHost));
            double t2 = now_us();
            add_kernel<<<(unsigned)((n + 255) / 256), 256>>>(da, db, dc, n);
            CHECK_CUDA(cudaDeviceSynchronize());
            double t3 = now_us();
            if (r >= 3) { tc.push_back(t1 - t0); tg.push_back(t2 - t1); tr.push_back(t3 - t2); }
        }
        for (size_t i = 0; i < n; i++)
            if (c[i] != a[i] + b[i]) { fprintf(stderr, "wrong result at %zu\n", i); return 1; }
        double mc = median(tc), mg = median(tg), mr = median(tr);
        printf("%12zu %12.2f %14.2f %14.2f %12s\n", 2 * n * 4, mc, mg, mr, mc <= mg ? "cpu" : "gpu(copy)");
    }
    return 0;
}
