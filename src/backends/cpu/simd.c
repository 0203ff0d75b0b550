/* Run-time SIMD selection. Kernels compiled for AVX2/AVX-512 (function-level
 * target attributes) are only called when the CPU reports the feature. */
#include <stdlib.h>
#include <strings.h>

#include "backends/cpu/cpu.h"
#include "core/cpuid.h"

static int g_level = -1;

static cpu_simd detect(void)
{
    cpu_simd lvl = CPU_SIMD_PORTABLE;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c())
        lvl = CPU_SIMD_AVX2;
    if (lvl == CPU_SIMD_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        lvl = CPU_SIMD_AVX512;
#endif
    const char *e = getenv("CTORCH_SIMD");
    if (e) {
        cpu_simd cap = !strcasecmp(e, "portable") ? CPU_SIMD_PORTABLE : !strcasecmp(e, "avx2") ? CPU_SIMD_AVX2 : lvl;
        if (cap < lvl) lvl = cap;
    }
    return lvl;
}

cpu_simd cpu_simd_level(void)
{
    int l = __atomic_load_n(&g_level, __ATOMIC_RELAXED);
    if (l < 0) {
        l = (int)detect();
        __atomic_store_n(&g_level, l, __ATOMIC_RELAXED);
    }
    return (cpu_simd)l;
}

void cpu_simd_set_level(cpu_simd level)
{
    g_level = -1;
    cpu_simd hw = cpu_simd_level();
    __atomic_store_n(&g_level, (int)(level < hw ? level : hw), __ATOMIC_RELAXED);
}
