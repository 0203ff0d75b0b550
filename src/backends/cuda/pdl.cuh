/* Programmatic dependent launch (sm_90), shared by the decode kernels: a kernel lets the
 * next kernel of the stream start at once (pdl_launch_next) and waits for its own
 * predecessor only where it first reads what that one wrote (pdl_wait: the predecessor
 * has completed and its writes are visible), so launch latency and setup overlap the
 * previous kernel's tail. Both are no-ops where a kernel was launched without the
 * attribute; CTORCH_CUDA_PDL=0 launches without it. */
#ifndef CT_CUDA_PDL_CUH
#define CT_CUDA_PDL_CUH

#include <cuda_runtime_api.h>
#include <stdlib.h>

namespace cupdl {

__device__ __forceinline__ void pdl_launch_next()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Whether launches get the PDL attribute: sm_90+ and not CTORCH_CUDA_PDL=0 (read once). */
inline bool pdl_enabled()
{
    static int ok = -1;
    if (ok < 0) {
        int dev = 0, major = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
        const char *e = getenv("CTORCH_CUDA_PDL");
        ok = major >= 9 && !(e && e[0] == '0');
    }
    return ok != 0;
}

/* Launches kern<<<grid, threads>>>(args...) on st, with PDL where enabled; the error is
 * returned and also stays for cudaGetLastError. */
template <typename... KArgs, typename... Args>
inline cudaError_t launch_pdl(void (*kern)(KArgs...), unsigned grid, unsigned threads, cudaStream_t st, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(threads);
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl_enabled() ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kern, args...);
}

} // namespace cupdl

#endif
