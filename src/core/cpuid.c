/* AMX detection (core/cpuid.h). Linux keeps the 8 KiB tile state out of a process until it
 * asks (arch_prctl ARCH_REQ_XCOMP_PERM for XTILEDATA): without that grant the first tile
 * instruction faults, so the grant is part of "usable". */
#include "core/cpuid.h"

#if (defined(__x86_64__) || defined(__i386__)) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define AMX_LINUX 1
#endif

static int g_off;

void cpu_amx_disable(bool off) { __atomic_store_n(&g_off, off ? 1 : 0, __ATOMIC_RELAXED); }

#ifdef AMX_LINUX
/* CPUID leaf 7: EDX bit 24 AMX-TILE, 25 AMX-INT8, 22 AMX-BF16; subleaf 1 EAX bit 5 AVX512-BF16. */
static unsigned amx_features(void)
{
    unsigned a, b, c, d, f = 0;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24))) return 0;
    if (d & (1u << 25)) f |= CPU_AMX_INT8;
    bool bf = d & (1u << 22);
    if (bf && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5))) f |= CPU_AMX_BF16;
    if (!cpu_has_avx512_family()) return 0; /* the kernels around the tiles are AVX-512 */
    if (f && syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) != 0) return 0;
    return f;
}
#endif

bool cpu_amx_usable(unsigned need)
{
#ifdef AMX_LINUX
    static int feats = -1;
    int f = __atomic_load_n(&feats, __ATOMIC_ACQUIRE);
    if (f < 0) {
        f = (int)amx_features();
        __atomic_store_n(&feats, f, __ATOMIC_RELEASE);
    }
    const core_config *cfg = config_current();
    return ((unsigned)f & need) == need && need && !__atomic_load_n(&g_off, __ATOMIC_RELAXED) && (!cfg || cfg->amx);
#else
    (void)need;
    return false;
#endif
}

/* Intel cores keep at most ~16 L1 misses in flight, and a software prefetch into L1 holds
 * one of those slots until its line arrives from memory: prefetched into L2 (T1) the
 * requests queue deeper. On the 2-core Sapphire Rapids VM of session 35 the Q4_K / Q5_K /
 * Q6_K decode repacks went from 0.58-0.70 of the read bandwidth to ~0.8 (TinyLlama Q6_K
 * 18-19 -> 25 t/s, Q4_K_M 30-31 -> 36-37). AMD Zen 4 keeps L1: it was tuned there, and its
 * T1/T2 prefetches into L2 are documented to be dropped at times. */
bool core_prefetch_l2(void)
{
    const core_config *cfg = config_current();
    if (cfg && cfg->prefetch != CORE_PREFETCH_AUTO) return cfg->prefetch == CORE_PREFETCH_L2;
    static int intel = -1; /* cpuid traps to the hypervisor in a VM: asked once */
    int v = __atomic_load_n(&intel, __ATOMIC_RELAXED);
    if (v < 0) {
        v = cpu_is_intel();
        __atomic_store_n(&intel, v, __ATOMIC_RELAXED);
    }
    return v != 0;
}
