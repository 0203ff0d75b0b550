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
#include <string.h>

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

/* Loads of what a predecessor kernel writes, in a kernel launched with PDL: ordinary global
 * loads, as volatile asm so the compiler keeps them after pdl_wait (volatile too). Never the
 * read-only path (__ldg, or ld.global.nc, which the compiler makes of a const __restrict__
 * pointer the kernel does not write): it requires the data to stay unchanged for the
 * kernel's whole lifetime, and an early-launched kernel lives while its predecessor still
 * writes (PTX ISA, ld.global.nc). Measured on an H200 (TinyLlama-shaped, tg128 -r 3, one
 * binary each, alternated): Q4_K_M 1,435 / 1,411 t/s with __ldg, 1,444 / 1,440 with these;
 * F16 894 / 894 and 887 / 895. */
__device__ __forceinline__ float ld_act(const float *p)
{
    float v;
    asm volatile("ld.global.f32 %0, [%1];" : "=f"(v) : "l"(p));
    return v;
}
__device__ __forceinline__ float2 ld_act(const float2 *p)
{
    float2 v;
    asm volatile("ld.global.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "l"(p));
    return v;
}
__device__ __forceinline__ float4 ld_act(const float4 *p)
{
    float4 v;
    asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ int4 ld_act(const int4 *p)
{
    int4 v;
    asm volatile("ld.global.v4.s32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
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

/* CTORCH_CUDA_PDL_SERIAL=name,name...: kernels whose (mangled) name contains one of the
 * names launch without the attribute, i.e. only after their predecessor has completed, and
 * so stop the chain of early launches there. For measuring where early launches pay (a
 * job kernel streaming its weights into L2 while a norm runs) and where they cost (blocks
 * resident and waiting, taking the running kernel's room). Measured on the H100 (TinyLlama
 * Q4_K_M tg128, two rounds, one binary): every kernel with PDL 1113 / 1131 t/s; serializing
 * quantize_q8 1078 / 1073, rms_q8 1077 / 1082, rope_rows 1092 / 1092, q4k_job 1041 / 1039:
 * each early launch pays. The tensor-core decode attention is the exception: launched
 * with PDL its 165-register blocks wait resident (span 833 -> 880 us), so it stays plain,
 * though it lets a one-format job after it launch early (attention_dec_tc.cu, dt_launch). */
inline bool pdl_serial(const void *kern)
{
    static const char *list = getenv("CTORCH_CUDA_PDL_SERIAL");
    const char *name = nullptr;
    if (!list || !*list || cudaFuncGetName(&name, kern) != cudaSuccess || !name) return false;
    for (const char *p = list; *p;) {
        const char *e = p;
        while (*e && *e != ',') e++;
        for (const char *n = name; *n && e > p; n++)
            if (strncmp(n, p, (size_t)(e - p)) == 0) return true;
        p = *e ? e + 1 : e;
    }
    return false;
}

/* Launches kern<<<grid, threads>>>(args...) on st, with PDL where enabled; the error is
 * returned and also stays for cudaGetLastError. */
template <typename... KArgs, typename... Args>
inline cudaError_t launch_pdl(void (*kern)(KArgs...), dim3 grid, unsigned threads, cudaStream_t st, Args... args)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(threads);
    cfg.stream = st;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = pdl_enabled() && !pdl_serial((const void *)kern) ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kern, args...);
}

} // namespace cupdl

#endif
