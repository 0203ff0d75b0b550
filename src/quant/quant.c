/* Entry points of the block formats: argument checks, per-type dispatch, and the choice
 * of vec-dot kernels by SIMD level (detected once with __builtin_cpu_supports; quant sits
 * below the backends, so it keeps its own detection). */
#include <stdatomic.h>

#include "core/cpuid.h"
#include "quant/quant_impl.h"

typedef void (*deq_fn)(const void *src, float *dst, int64_t nb);
typedef void (*ref_fn)(const float *src, void *dst, int64_t nb);

static const deq_fn g_deq[CT_DTYPE_COUNT] = {
    [CT_Q4_0] = quant_deq_q4_0, [CT_Q4_1] = quant_deq_q4_1, [CT_Q5_0] = quant_deq_q5_0,
    [CT_Q5_1] = quant_deq_q5_1, [CT_Q8_0] = quant_deq_q8_0, [CT_Q8_1] = quant_deq_q8_1,
    [CT_Q2_K] = quant_deq_q2_k, [CT_Q3_K] = quant_deq_q3_k, [CT_Q4_K] = quant_deq_q4_k,
    [CT_Q5_K] = quant_deq_q5_k, [CT_Q6_K] = quant_deq_q6_k, [CT_Q8_K] = quant_deq_q8_k,
};

static const ref_fn g_ref[CT_DTYPE_COUNT] = {
    [CT_Q4_0] = quant_ref_q4_0, [CT_Q4_1] = quant_ref_q4_1, [CT_Q5_0] = quant_ref_q5_0,
    [CT_Q5_1] = quant_ref_q5_1, [CT_Q8_0] = quant_ref_q8_0, [CT_Q8_1] = quant_ref_q8_1,
    [CT_Q2_K] = quant_ref_q2_k, [CT_Q3_K] = quant_ref_q3_k, [CT_Q4_K] = quant_ref_q4_k,
    [CT_Q5_K] = quant_ref_q5_k, [CT_Q6_K] = quant_ref_q6_k, [CT_Q8_K] = quant_ref_q8_k,
};

static void init_tables(void);
static quant_act_table g_acts[QUANT_SIMD_COUNT];
static atomic_int g_level;

static ct_status check_row(const char *what, ct_dtype t, const void *src, const void *dst, int64_t n)
{
    if ((unsigned)t >= CT_DTYPE_COUNT) return core_err(CT_ERR_DTYPE, "%s: invalid dtype %d", what, (int)t);
    if (!src || !dst) return core_err(CT_ERR_INVALID_ARG, "%s %s: null row pointer", what, ct_dtype_name(t));
    if (n < 0) return core_err(CT_ERR_SHAPE, "%s %s: negative length %lld", what, ct_dtype_name(t), (long long)n);
    int64_t bs = ct_dtype_block_size(t);
    if (n % bs)
        return core_err(CT_ERR_SHAPE, "%s %s: row of %lld elements is not a multiple of the block size %lld", what,
                        ct_dtype_name(t), (long long)n, (long long)bs);
    return CT_OK;
}

ct_status quant_dequantize_row(ct_dtype t, const void *src, float *dst, int64_t n)
{
    ct_status s = check_row("dequantize", t, src, dst, n);
    if (s != CT_OK) return s;
    switch (t) {
    case CT_F32:
        memmove(dst, src, sizeof(float) * (size_t)n);
        return CT_OK;
    case CT_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, (const char *)src + 2 * i, 2);
            dst[i] = ct_f16_to_f32(h);
        }
        return CT_OK;
    case CT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, (const char *)src + 2 * i, 2);
            dst[i] = ct_bf16_to_f32(h);
        }
        return CT_OK;
    default:
        break;
    }
    if (!g_deq[t])
        return core_err(CT_ERR_DTYPE, "dequantize: %s is neither a block format nor f32/f16/bf16", ct_dtype_name(t));
    g_deq[t](src, dst, n / ct_dtype_block_size(t));
    return CT_OK;
}

ct_status quant_quantize_row(ct_dtype t, const float *src, void *dst, int64_t n)
{
    if ((unsigned)t < CT_DTYPE_COUNT && !g_ref[t])
        return core_err(CT_ERR_DTYPE, "quantize: %s is not a block-quantized dtype", ct_dtype_name(t));
    ct_status s = check_row("quantize", t, src, dst, n);
    if (s != CT_OK) return s;
    init_tables();
    quant_act_fn fast = g_acts[atomic_load_explicit(&g_level, memory_order_relaxed)][t];
    (fast ? fast : g_ref[t])(src, dst, n / ct_dtype_block_size(t));
    return CT_OK;
}

ct_dtype quant_vec_dot_type(ct_dtype t)
{
    switch (t) {
    case CT_Q4_0: case CT_Q5_0: case CT_Q8_0: return CT_Q8_0;
    case CT_Q4_1: case CT_Q5_1: case CT_Q8_1: return CT_Q8_1;
    case CT_Q2_K: case CT_Q3_K: case CT_Q4_K: case CT_Q5_K: case CT_Q6_K: case CT_Q8_K: return CT_Q8_K;
    default: return t; /* plain types are not this module's concern */
    }
}

/* ---- SIMD levels ---- */

static const char *const g_simd_names[QUANT_SIMD_COUNT] = {"scalar", "avx2", "avx2+vnni", "avx512+vnni"};

const char *quant_simd_name(quant_simd level)
{
    return (unsigned)level < QUANT_SIMD_COUNT ? g_simd_names[level] : "invalid";
}

static quant_simd detect(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_has_f16c();
    if (!avx2) return QUANT_SIMD_SCALAR;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni"))
        return QUANT_SIMD_AVX512_VNNI;
    if (cpu_has_avxvnni()) return QUANT_SIMD_AVX2_VNNI;
    return QUANT_SIMD_AVX2;
#else
    return QUANT_SIMD_SCALAR;
#endif
}

/* Tables of every level, built once; a level's NULL entries take the lower level's kernel. */
static quant_dot_table g_tabs[QUANT_SIMD_COUNT];
static quant_nr_table g_nrs[QUANT_SIMD_COUNT];
static quant_panel_table g_panels[QUANT_SIMD_COUNT];
static quant_panel_table g_repacks[QUANT_SIMD_COUNT];
static quant_simd g_detected;
static atomic_int g_level = -1; /* tentative definition above */
static atomic_int g_init_state; /* 0 none, 1 running, 2 done */

static void init_tables(void)
{
    int expect = 0;
    if (atomic_load_explicit(&g_init_state, memory_order_acquire) == 2) return;
    if (atomic_compare_exchange_strong(&g_init_state, &expect, 1)) {
        g_detected = detect();
        quant_dot_fill_scalar(g_tabs[QUANT_SIMD_SCALAR]);
#if defined(__x86_64__) && defined(__GNUC__)
        quant_dot_fill_avx2(g_tabs[QUANT_SIMD_AVX2]);
        quant_act_fill_avx2(g_acts[QUANT_SIMD_AVX2]);
        quant_dot_fill_avxvnni(g_tabs[QUANT_SIMD_AVX2_VNNI]);
        quant_dot_fill_avx512(g_tabs[QUANT_SIMD_AVX512_VNNI]);
        quant_nr_fill_avx512(g_nrs[QUANT_SIMD_AVX512_VNNI]);
        quant_panel_fill_avx512(g_panels[QUANT_SIMD_AVX512_VNNI]);
        quant_repack_fill_avx512(g_repacks[QUANT_SIMD_AVX512_VNNI]);
#endif
        for (int l = 1; l < QUANT_SIMD_COUNT; l++)
            for (int t = 0; t < CT_DTYPE_COUNT; t++)
            {
                if (!g_tabs[l][t]) g_tabs[l][t] = g_tabs[l - 1][t];
                if (!g_acts[l][t]) g_acts[l][t] = g_acts[l - 1][t];
            }
        int unset = -1;
        atomic_compare_exchange_strong(&g_level, &unset, (int)g_detected);
        atomic_store_explicit(&g_init_state, 2, memory_order_release);
    } else {
        while (atomic_load_explicit(&g_init_state, memory_order_acquire) != 2) {
        }
    }
}

quant_simd quant_simd_detected(void)
{
    init_tables();
    return g_detected;
}

quant_simd quant_simd_level(void)
{
    init_tables();
    return (quant_simd)atomic_load(&g_level);
}

ct_status quant_set_simd_level(quant_simd level)
{
    init_tables();
    if ((unsigned)level >= QUANT_SIMD_COUNT)
        return core_err(CT_ERR_INVALID_ARG, "quant_set_simd_level: invalid level %d", (int)level);
    if (level > g_detected)
        return core_err(CT_ERR_UNSUPPORTED, "quant_set_simd_level: this CPU supports up to %s, not %s",
                        quant_simd_name(g_detected), quant_simd_name(level));
    atomic_store(&g_level, (int)level);
    return CT_OK;
}

quant_vec_dot_fn quant_get_vec_dot_at(ct_dtype t, quant_simd level)
{
    init_tables();
    if ((unsigned)t >= CT_DTYPE_COUNT || (unsigned)level >= QUANT_SIMD_COUNT || level > g_detected) return NULL;
    return g_tabs[level][t];
}

quant_vec_dot_fn quant_get_vec_dot(ct_dtype t) { return quant_get_vec_dot_at(t, quant_simd_level()); }

quant_vec_dot_nr_fn quant_get_vec_dot_nr_at(ct_dtype t, quant_simd level)
{
    init_tables();
    if ((unsigned)t >= CT_DTYPE_COUNT || (unsigned)level >= QUANT_SIMD_COUNT || level > g_detected) return NULL;
    return g_nrs[level][t];
}

quant_vec_dot_nr_fn quant_get_vec_dot_nr(ct_dtype t) { return quant_get_vec_dot_nr_at(t, quant_simd_level()); }

const quant_panel_kernels *quant_get_panel_at(ct_dtype t, quant_simd level)
{
    init_tables();
    if ((unsigned)t >= CT_DTYPE_COUNT || (unsigned)level >= QUANT_SIMD_COUNT || level > g_detected) return NULL;
    return g_panels[level][t];
}

const quant_panel_kernels *quant_get_panel(ct_dtype t) { return quant_get_panel_at(t, quant_simd_level()); }

const quant_panel_kernels *quant_get_repack_at(ct_dtype t, quant_simd level)
{
    init_tables();
    if ((unsigned)t >= CT_DTYPE_COUNT || (unsigned)level >= QUANT_SIMD_COUNT || level > g_detected) return NULL;
    return g_repacks[level][t];
}

const quant_panel_kernels *quant_get_repack(ct_dtype t) { return quant_get_repack_at(t, quant_simd_level()); }
