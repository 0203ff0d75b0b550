/* CPU feature checks that gcc and clang both accept (clang 14's __builtin_cpu_supports
 * knows neither "f16c" nor "avxvnni"), and the CTORCH_SIMD cap that every kernel family
 * (CPU backend and quant) obeys. */
#ifndef CT_CORE_CPUID_H
#define CT_CORE_CPUID_H

#include <stdbool.h>
#include <stdlib.h>
#include <strings.h>

#include "core/tensor.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>

/* F16C: CPUID leaf 1, ECX bit 29. */
static inline bool cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29));
}
/* AVX-VNNI (the VEX-encoded form): CPUID leaf 7 subleaf 1, EAX bit 4. */
static inline bool cpu_has_avxvnni(void)
{
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4));
}
/* The 256-bit family: avx2 + fma + f16c (__builtin_cpu_supports also checks that the
 * OS saves the ymm state). */
static inline bool cpu_has_avx2_family(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
}
/* The 512-bit family every AVX-512 kernel here may use: f + bw + vl + dq. */
static inline bool cpu_has_avx512_family(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
static inline bool cpu_has_avx512vnni(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512vnni");
}
#else
static inline bool cpu_has_f16c(void) { return false; }
static inline bool cpu_has_avxvnni(void) { return false; }
static inline bool cpu_has_avx2_family(void) { return false; }
static inline bool cpu_has_avx512_family(void) { return false; }
static inline bool cpu_has_avx512vnni(void) { return false; }
#endif

/* The widest kernel family allowed; the CPU backend's cpu_simd levels have the same values. */
typedef enum core_simd_cap { CORE_SIMD_CAP_PORTABLE = 0, CORE_SIMD_CAP_AVX2 = 1, CORE_SIMD_CAP_AVX512 = 2 } core_simd_cap;

/* CTORCH_SIMD=portable|avx2|avx512 (case-insensitive); unset or empty: no cap. An unknown
 * value is not a cap either, but says so on the log rather than being ignored silently. */
static inline core_simd_cap core_simd_cap_env(void)
{
    const char *e = getenv("CTORCH_SIMD");
    if (!e || !*e || !strcasecmp(e, "avx512")) return CORE_SIMD_CAP_AVX512;
    if (!strcasecmp(e, "portable")) return CORE_SIMD_CAP_PORTABLE;
    if (!strcasecmp(e, "avx2")) return CORE_SIMD_CAP_AVX2;
    core_log(CT_LOG_WARN, "CTORCH_SIMD=%s is not one of portable, avx2, avx512; using the CPU's best kernels", e);
    return CORE_SIMD_CAP_AVX512;
}

#endif
