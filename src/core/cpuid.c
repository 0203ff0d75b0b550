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
