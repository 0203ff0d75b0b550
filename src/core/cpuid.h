/* CPU feature checks that gcc and clang both accept (clang 14's
 * __builtin_cpu_supports knows neither "f16c" nor "avxvnni"). */
#ifndef CT_CORE_CPUID_H
#define CT_CORE_CPUID_H

#include <stdbool.h>

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
#else
static inline bool cpu_has_f16c(void) { return false; }
static inline bool cpu_has_avxvnni(void) { return false; }
#endif

#endif
