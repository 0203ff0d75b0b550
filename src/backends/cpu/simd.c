/* Run-time SIMD selection. Kernels compiled for AVX2/AVX-512 (function-level target
 * attributes) are only called when the CPU reports the feature. One level, capped by
 * CTORCH_SIMD, drives every kernel family: the backend's own kernels read it here, and
 * the quant kernels (dots, multi-row GEMM, panels, kept repacks) are moved to the best
 * quant level inside the same family whenever it changes. */
#include "backends/cpu/cpu.h"
#include "core/cpuid.h"
#include "quant/quant.h"

_Static_assert((int)CPU_SIMD_PORTABLE == (int)CORE_SIMD_CAP_PORTABLE && (int)CPU_SIMD_AVX2 == (int)CORE_SIMD_CAP_AVX2 &&
                   (int)CPU_SIMD_AVX512 == (int)CORE_SIMD_CAP_AVX512,
               "cpu_simd levels double as core_simd_cap values");

static int g_level = -1;
static bool g_forced; /* set by cpu_simd_set_level: a re-read must not undo a test's choice */

static cpu_simd hardware_level(void)
{
    if (!cpu_has_avx2_family()) return CPU_SIMD_PORTABLE;
    return cpu_has_avx512_family() ? CPU_SIMD_AVX512 : CPU_SIMD_AVX2;
}

static cpu_simd capped(cpu_simd want)
{
    cpu_simd hw = hardware_level();
    cpu_simd cap = (cpu_simd)core_simd_cap_env();
    cpu_simd l = want < hw ? want : hw;
    return cap < l ? cap : l;
}

static void use_level(cpu_simd l)
{
    __atomic_store_n(&g_level, (int)l, __ATOMIC_RELAXED);
    quant_simd_apply_cap((core_simd_cap)l);
}

cpu_simd cpu_simd_level(void)
{
    int l = __atomic_load_n(&g_level, __ATOMIC_RELAXED);
    if (l < 0) {
        /* racing first callers compute and store the same value */
        l = (int)capped(CPU_SIMD_AVX512);
        use_level((cpu_simd)l);
    }
    return (cpu_simd)l;
}

void cpu_simd_set_level(cpu_simd level)
{
    g_forced = true;
    use_level(capped(level));
}

void cpu_simd_reread(void)
{
    if (!g_forced) use_level(capped(CPU_SIMD_AVX512));
}
