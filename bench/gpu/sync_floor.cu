/* What one dependency between two stages of a decode step costs on the GPU, three ways:
 *   graph      N dependent kernels in a CUDA graph, each waiting for the one before (the
 *              step as ctorch launches it without PDL);
 *   graph+pdl  the same with programmatic dependent launch: each kernel starts while its
 *              predecessor drains and waits (griddepcontrol.wait) before reading its output;
 *   barrier    one persistent kernel, its blocks resident on every SM, with N grid-wide
 *              barriers (an arrival counter in global memory that the blocks spin on): the
 *              stage boundary of a "megakernel" decode step.
 * Every stage has each block read one value the previous stage wrote (from another block) and
 * write one, so every link is a true all-to-all dependency, as between two matvecs. Prints
 * microseconds per link (median of 9 runs of N = 1,000 links). Not part of the build: on the
 * GPU machine, `nvcc -O3 -arch=sm_90 -o sync_floor bench/gpu/sync_floor.cu && ./sync_floor`.
 * A decode step of a 22-layer model has ~180 such links today (README, "Where a Q4_K_M token
 * goes"); this says how much of a token is the links themselves. */
#include <algorithm>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "../cuda_check.h"

constexpr int THREADS = 256, LINKS = 1000, RUNS = 9;

/* Stage s: block b reads what block (b + 1) % nb wrote in stage s - 1 and writes its own. */
__global__ void stage_kernel(int *buf, int s, bool pdl)
{
    if (pdl) asm volatile("griddepcontrol.launch_dependents;");
    if (pdl) asm volatile("griddepcontrol.wait;" ::: "memory");
    int nb = gridDim.x, b = blockIdx.x;
    if (threadIdx.x == 0) {
        int v = s ? ((volatile int *)buf)[(s - 1) % 2 * nb + (b + 1) % nb] : 0;
        buf[s % 2 * nb + b] = v + 1;
    }
}

/* Grid barrier: every block adds one to *count, then waits until it reaches target. */
__device__ __forceinline__ void grid_barrier(unsigned *count, unsigned target)
{
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        atomicAdd(count, 1u);
        unsigned v;
        do {
            asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
        } while (v < target);
    }
    __syncthreads();
}

__global__ void persistent_kernel(int *buf, unsigned *count, int links)
{
    int nb = gridDim.x, b = blockIdx.x;
    for (int s = 0; s < links; s++) {
        if (threadIdx.x == 0) {
            int v = s ? ((volatile int *)buf)[(s - 1) % 2 * nb + (b + 1) % nb] : 0;
            buf[s % 2 * nb + b] = v + 1;
        }
        grid_barrier(count, (unsigned)(s + 1) * nb);
    }
}

static float median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* us per link */
static float time_graph(int nb, bool pdl, int *buf, cudaStream_t st)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    for (int s = 0; s < LINKS; s++) {
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(nb);
        cfg.blockDim = dim3(THREADS);
        cfg.stream = st;
        cudaLaunchAttribute at[1];
        at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
        at[0].val.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = at;
        cfg.numAttrs = pdl ? 1 : 0;
        CHECK_CUDA(cudaLaunchKernelEx(&cfg, stage_kernel, buf, s, pdl));
    }
    CHECK_CUDA(cudaStreamEndCapture(st, &g));
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r <= RUNS; r++) {
        CHECK_CUDA(cudaEventRecord(a, st));
        CHECK_CUDA(cudaGraphLaunch(ge, st));
        CHECK_CUDA(cudaEventRecord(b, st));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        if (r) t.push_back(ms * 1000.f / LINKS); /* run 0 warms up */
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    return median(t);
}

static float time_persistent(int nb, int *buf, unsigned *count, cudaStream_t st)
{
    cudaEvent_t a, b;
    CHECK_CUDA(cudaEventCreate(&a));
    CHECK_CUDA(cudaEventCreate(&b));
    std::vector<float> t;
    for (int r = 0; r <= RUNS; r++) {
        CHECK_CUDA(cudaMemsetAsync(count, 0, sizeof *count, st));
        int links = LINKS;
        void *args[] = {&buf, &count, &links};
        CHECK_CUDA(cudaEventRecord(a, st));
        CHECK_CUDA(cudaLaunchCooperativeKernel((void *)persistent_kernel, dim3(nb), dim3(THREADS), args, 0, st));
        CHECK_CUDA(cudaEventRecord(b, st));
        CHECK_CUDA(cudaEventSynchronize(b));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
        if (r) t.push_back(ms * 1000.f / LINKS);
    }
    return median(t);
}

int main()
{
    int dev = 0, sms = 0, per_sm = 0;
    CHECK_CUDA(cudaGetDevice(&dev));
    CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, persistent_kernel, THREADS, 0));
    cudaDeviceProp p;
    CHECK_CUDA(cudaGetDeviceProperties(&p, dev));
    int *buf;
    unsigned *count;
    CHECK_CUDA(cudaMalloc(&buf, 2 * sizeof(int) * sms * 8));
    CHECK_CUDA(cudaMalloc(&count, sizeof(unsigned)));
    cudaStream_t st;
    CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    printf("%s, %d SMs; us per dependent link, median of %d runs of %d links, %d threads a block\n", p.name, sms,
           RUNS, LINKS, THREADS);
    printf("| blocks | graph | graph + PDL | grid barrier |\n|---:|---:|---:|---:|\n");
    for (int k = 1; k <= 4; k *= 2) {
        int nb = sms * k;
        float g = time_graph(nb, false, buf, st), gp = time_graph(nb, true, buf, st);
        float pb = k <= per_sm ? time_persistent(nb, buf, count, st) : -1;
        printf("| %d (%d a SM) | %.2f | %.2f | %.2f |\n", nb, k, g, gp, pb);
    }
    return 0;
}
