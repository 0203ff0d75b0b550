/* SIMD levels of the quant kernels: which levels this CPU can run, the kernel tables of
 * every level, and the level the non-_at getters hand out. Quant sits below the backends,
 * so it keeps its own detection (same checks as the CPU backend's).
 *
 * The levels are not a ladder: AVX-512 VNNI (EVEX vpdpbusd) and AVX-VNNI (its VEX form)
 * are separate CPUID bits, and Zen 4, Ice Lake and Cascade Lake have only the first.
 * So each level lists the features it needs, and a level's missing kernels come from a
 * parent whose features are a subset of its own, never from the level below it. AVX-512
 * without VNNI (Skylake-SP, the GPU machine's Xeon) is the avx512 level: the avx512+vnni
 * kernels built without vpdpbusd (quant_avx512_isa.h), parent of avx512+vnni. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpuid.h"
#include "quant/quant_impl.h"

static const char *const g_simd_names[QUANT_SIMD_COUNT] = {"scalar", "avx2", "avx2+vnni", "avx512", "avx512+vnni"};

/* Where a level's NULL entries come from (features of the parent are a subset). */
static const quant_simd g_parent[QUANT_SIMD_COUNT] = {
    [QUANT_SIMD_SCALAR] = QUANT_SIMD_SCALAR,
    [QUANT_SIMD_AVX2] = QUANT_SIMD_SCALAR,
    [QUANT_SIMD_AVX2_VNNI] = QUANT_SIMD_AVX2,
    [QUANT_SIMD_AVX512] = QUANT_SIMD_AVX2,
    [QUANT_SIMD_AVX512_VNNI] = QUANT_SIMD_AVX512,
};

const char *quant_simd_name(quant_simd level)
{
    return (unsigned)level < QUANT_SIMD_COUNT ? g_simd_names[level] : "invalid";
}

/* CTORCH_SIMD_NO_VNNI=1 hides both VNNI extensions, so a VNNI machine runs (and tests) the
 * kernels of CPUs without them: the avx512 level where there is AVX-512. */
static bool vnni_hidden(void)
{
    const char *v = getenv("CTORCH_SIMD_NO_VNNI");
    return v && *v && strcmp(v, "0") != 0;
}

quant_cpu_features quant_cpu_features_of_host(void)
{
    quant_cpu_features f = {0};
    bool vnni = !vnni_hidden();
    f.avx2 = cpu_has_avx2_family();
    f.avxvnni = vnni && f.avx2 && cpu_has_avxvnni();
    f.avx512 = cpu_has_avx512_family();
    f.avx512vnni = vnni && f.avx512 && cpu_has_avx512vnni();
    return f;
}

/* The CTORCH_SIMD family each level belongs to (AVX-VNNI is a 256-bit extension). */
static const core_simd_cap g_family[QUANT_SIMD_COUNT] = {
    [QUANT_SIMD_SCALAR] = CORE_SIMD_CAP_PORTABLE,
    [QUANT_SIMD_AVX2] = CORE_SIMD_CAP_AVX2,
    [QUANT_SIMD_AVX2_VNNI] = CORE_SIMD_CAP_AVX2,
    [QUANT_SIMD_AVX512] = CORE_SIMD_CAP_AVX512,
    [QUANT_SIMD_AVX512_VNNI] = CORE_SIMD_CAP_AVX512,
};

/* The first feature level needs that f lacks, NULL when f has them all. */
static const char *missing_feature(const quant_cpu_features *f, quant_simd level)
{
    switch (level) {
    case QUANT_SIMD_SCALAR: return NULL;
    case QUANT_SIMD_AVX2: return f->avx2 ? NULL : "AVX2+FMA+F16C";
    case QUANT_SIMD_AVX2_VNNI: return !f->avx2 ? "AVX2+FMA+F16C" : !f->avxvnni ? "AVX-VNNI" : NULL;
    case QUANT_SIMD_AVX512: return !f->avx2 ? "AVX2+FMA+F16C" : !f->avx512 ? "AVX-512 F/BW/VL/DQ" : NULL;
    case QUANT_SIMD_AVX512_VNNI:
        return !f->avx2     ? "AVX2+FMA+F16C"
               : !f->avx512 ? "AVX-512 F/BW/VL/DQ"
               : !f->avx512vnni ? "AVX512-VNNI"
                                : NULL;
    default: return "a valid level";
    }
}

/* Tables of every level, built once (whatever the CPU: only pointers are stored). */
static quant_dot_table g_tabs[QUANT_SIMD_COUNT];
static quant_act_table g_acts[QUANT_SIMD_COUNT];
static quant_nr_table g_nrs[QUANT_SIMD_COUNT];
static quant_panel_table g_panels[QUANT_SIMD_COUNT];
static quant_panel_table g_repacks[QUANT_SIMD_COUNT];
static quant_cpu_features g_feat;
static quant_simd g_detected;
static core_simd_cap g_cap = CORE_SIMD_CAP_AVX512;
static atomic_int g_level = -1;
static atomic_int g_init_state; /* 0 none, 1 running, 2 done */

static quant_simd best_level(const quant_cpu_features *f, core_simd_cap cap)
{
    for (int l = QUANT_SIMD_COUNT - 1; l > 0; l--)
        if (g_family[l] <= cap && !missing_feature(f, (quant_simd)l)) return (quant_simd)l;
    return QUANT_SIMD_SCALAR;
}

static void use_features(const quant_cpu_features *f)
{
    g_feat = *f;
    g_detected = best_level(f, CORE_SIMD_CAP_AVX512);
    atomic_store(&g_level, (int)best_level(f, g_cap));
}

static void fill_tables(void)
{
    quant_dot_fill_scalar(g_tabs[QUANT_SIMD_SCALAR]);
#if defined(__x86_64__) && defined(__GNUC__)
    quant_dot_fill_avx2(g_tabs[QUANT_SIMD_AVX2]);
    quant_act_fill_avx2(g_acts[QUANT_SIMD_AVX2]);
    quant_panel_fill_avx2(g_panels[QUANT_SIMD_AVX2]);
    quant_repack_fill_avx2(g_repacks[QUANT_SIMD_AVX2]);
    quant_repack_fill_avx2(g_repacks[QUANT_SIMD_AVX2_VNNI]);
    quant_dot_fill_avxvnni(g_tabs[QUANT_SIMD_AVX2_VNNI]);
    quant_dot_fill_avx512_novnni(g_tabs[QUANT_SIMD_AVX512]);
    quant_nr_fill_avx512_novnni(g_nrs[QUANT_SIMD_AVX512]);
    quant_panel_fill_avx512_novnni(g_panels[QUANT_SIMD_AVX512]);
    quant_repack_fill_avx512_novnni(g_repacks[QUANT_SIMD_AVX512]);
    quant_dot_fill_avx512(g_tabs[QUANT_SIMD_AVX512_VNNI]);
    quant_nr_fill_avx512(g_nrs[QUANT_SIMD_AVX512_VNNI]);
    quant_panel_fill_avx512(g_panels[QUANT_SIMD_AVX512_VNNI]);
    quant_repack_fill_avx512(g_repacks[QUANT_SIMD_AVX512_VNNI]);
#endif
    /* parents come before their children in enum order */
    for (int l = 1; l < QUANT_SIMD_COUNT; l++)
        for (int t = 0; t < CT_DTYPE_COUNT; t++) {
            if (!g_tabs[l][t]) g_tabs[l][t] = g_tabs[g_parent[l]][t];
            if (!g_acts[l][t]) g_acts[l][t] = g_acts[g_parent[l]][t];
            if (!g_panels[l][t]) g_panels[l][t] = g_panels[g_parent[l]][t];
        }
}

static void init_tables(void)
{
    int expect = 0;
    if (atomic_load_explicit(&g_init_state, memory_order_acquire) == 2) return;
    if (atomic_compare_exchange_strong(&g_init_state, &expect, 1)) {
        fill_tables();
        g_cap = core_simd_cap_env();
        quant_cpu_features host = quant_cpu_features_of_host();
        use_features(&host);
        atomic_store_explicit(&g_init_state, 2, memory_order_release);
    } else {
        while (atomic_load_explicit(&g_init_state, memory_order_acquire) != 2) {
        }
    }
}

void quant_test_set_cpu_features(const quant_cpu_features *f)
{
    init_tables();
    quant_cpu_features host = quant_cpu_features_of_host();
    use_features(f ? f : &host);
}

void quant_simd_apply_cap(core_simd_cap cap)
{
    init_tables();
    g_cap = cap;
    atomic_store(&g_level, (int)best_level(&g_feat, cap));
}

bool quant_simd_supported(quant_simd level)
{
    init_tables();
    return (unsigned)level < QUANT_SIMD_COUNT && !missing_feature(&g_feat, level);
}

quant_simd quant_simd_detected(void)
{
    init_tables();
    return g_detected;
}

quant_simd quant_simd_level(void)
{
    init_tables();
    return (quant_simd)atomic_load_explicit(&g_level, memory_order_relaxed);
}

ct_status quant_set_simd_level(quant_simd level)
{
    init_tables();
    if ((unsigned)level >= QUANT_SIMD_COUNT)
        return core_err(CT_ERR_INVALID_ARG, "quant_set_simd_level: invalid level %d", (int)level);
    const char *miss = missing_feature(&g_feat, level);
    if (miss)
        return core_err(CT_ERR_UNSUPPORTED, "quant_set_simd_level: level %s needs %s, which this CPU lacks",
                        quant_simd_name(level), miss);
    atomic_store(&g_level, (int)level);
    return CT_OK;
}

static bool usable(ct_dtype t, quant_simd level)
{
    init_tables();
    return (unsigned)t < CT_DTYPE_COUNT && (unsigned)level < QUANT_SIMD_COUNT && !missing_feature(&g_feat, level);
}

quant_vec_dot_fn quant_get_vec_dot_at(ct_dtype t, quant_simd level)
{
    return usable(t, level) ? g_tabs[level][t] : NULL;
}

quant_vec_dot_fn quant_get_vec_dot(ct_dtype t) { return quant_get_vec_dot_at(t, quant_simd_level()); }

quant_act_fn quant_get_act(ct_dtype t)
{
    quant_simd level = quant_simd_level();
    return usable(t, level) ? g_acts[level][t] : NULL;
}

quant_vec_dot_nr_fn quant_get_vec_dot_nr_at(ct_dtype t, quant_simd level)
{
    return usable(t, level) ? g_nrs[level][t] : NULL;
}

quant_vec_dot_nr_fn quant_get_vec_dot_nr(ct_dtype t) { return quant_get_vec_dot_nr_at(t, quant_simd_level()); }

const quant_panel_kernels *quant_get_panel_at(ct_dtype t, quant_simd level)
{
    return usable(t, level) ? g_panels[level][t] : NULL;
}

const quant_panel_kernels *quant_get_panel(ct_dtype t)
{
    quant_simd l = quant_simd_level();
    const quant_panel_kernels *amx = l == QUANT_SIMD_AVX512_VNNI ? quant_get_panel_amx(t) : NULL;
    return amx ? amx : quant_get_panel_at(t, l);
}

const quant_panel_kernels *quant_get_repack_at(ct_dtype t, quant_simd level)
{
    return usable(t, level) ? g_repacks[level][t] : NULL;
}

const quant_panel_kernels *quant_get_repack(ct_dtype t) { return quant_get_repack_at(t, quant_simd_level()); }
