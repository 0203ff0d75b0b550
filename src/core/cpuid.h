/* CPU feature checks that gcc and clang both accept (clang 14's __builtin_cpu_supports
 * knows neither "f16c" nor "avxvnni"), and the CTORCH_SIMD cap that every kernel family
 * (CPU backend and quant) obeys. */
#ifndef CT_CORE_CPUID_H
#define CT_CORE_CPUID_H

#include <stdbool.h>
#include <stdlib.h>
#include <strings.h>

#include "core/config.h"
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
/* The vendor string of CPUID leaf 0 is "GenuineIntel". */
static inline bool cpu_is_intel(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(0, &a, &b, &c, &d) && b == 0x756e6547u && d == 0x49656e69u && c == 0x6c65746eu;
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
static inline bool cpu_is_intel(void) { return false; }
static inline bool cpu_has_f16c(void) { return false; }
static inline bool cpu_has_avxvnni(void) { return false; }
static inline bool cpu_has_avx2_family(void) { return false; }
static inline bool cpu_has_avx512_family(void) { return false; }
static inline bool cpu_has_avx512vnni(void) { return false; }
#endif

/* AMX tiles (core/cpuid.c): CPU_AMX_INT8 (tdpb*d) and / or CPU_AMX_BF16 (tdpbf16ps, with
 * AVX512-BF16 for the packers). True when the CPU has them and Linux granted this process
 * the tile state (it must be asked for, once); CTORCH_AMX=0 and cpu_amx_disable turn them
 * off. Asked once per process; racing first callers both ask. */
#define CPU_AMX_INT8 1u
#define CPU_AMX_BF16 2u
bool cpu_amx_usable(unsigned need);
/* The 64-byte operand of ldtilecfg (palette 1): bytes per row and rows of each tile. */
typedef struct cpu_amx_tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} cpu_amx_tilecfg;
/* Tests: off hides AMX from every kernel family. */
void cpu_amx_disable(bool off);

/* The widest kernel family allowed; the CPU backend's cpu_simd levels have the same values. */
typedef enum core_simd_cap { CORE_SIMD_CAP_PORTABLE = 0, CORE_SIMD_CAP_AVX2 = 1, CORE_SIMD_CAP_AVX512 = 2 } core_simd_cap;

/* Where the decode kernels prefetch (CTORCH_PREFETCH; auto by vendor, core/cpuid.c). */
typedef enum core_prefetch { CORE_PREFETCH_AUTO = 0, CORE_PREFETCH_L1 = 1, CORE_PREFETCH_L2 = 2 } core_prefetch;
bool core_prefetch_l2(void);

/* The cap of CTORCH_SIMD=portable|avx2|avx512, read with the other settings
 * (core/config.c, where a value that does not parse is an error); unset: no cap. */
static inline core_simd_cap core_simd_cap_env(void) { return (core_simd_cap)config_current()->simd_cap; }

#endif
