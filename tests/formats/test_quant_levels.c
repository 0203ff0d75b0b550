/* SIMD levels of the quant kernels chosen from simulated CPU feature sets
 * (quant_test_set_cpu_features): the levels are not a ladder, so a CPU with AVX512-VNNI
 * but no AVX-VNNI (Zen 4, Ice Lake) must never be handed an AVX-VNNI kernel, an AVX2-only
 * CPU no AVX-512 kernel, and so on. Only kernel pointers are compared: the simulated
 * CPUs may have features this one lacks, so no kernel is called here. */
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "harness.h"
#include "quant/quant.h"

static const ct_dtype k_types[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q8_1,
                                   CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_Q8_K};
#define N_TYPES ((int)(sizeof k_types / sizeof k_types[0]))

static const quant_cpu_features k_all = {.avx2 = true, .avxvnni = true, .avx512 = true, .avx512vnni = true};
static const quant_cpu_features k_zen4 = {.avx2 = true, .avxvnni = false, .avx512 = true, .avx512vnni = true};
static const quant_cpu_features k_alder = {.avx2 = true, .avxvnni = true, .avx512 = false, .avx512vnni = false};
static const quant_cpu_features k_skx = {.avx2 = true, .avxvnni = false, .avx512 = true, .avx512vnni = false};
static const quant_cpu_features k_avx2 = {.avx2 = true};
static const quant_cpu_features k_none = {0};

/* Every kernel a level owns (not inherited from AVX2 or scalar), taken with all features on. */
typedef struct owned {
    quant_vec_dot_fn dot[QUANT_SIMD_COUNT][N_TYPES];
    const void *wide[QUANT_SIMD_COUNT][3 * N_TYPES]; /* multi-row dots, panels, repacks */
} owned;

static owned g_own;

static void collect_owned(void)
{
    quant_test_set_cpu_features(&k_all);
    memset(&g_own, 0, sizeof g_own);
    for (int lv = QUANT_SIMD_AVX2_VNNI; lv < QUANT_SIMD_COUNT; lv++)
        for (int i = 0; i < N_TYPES; i++) {
            quant_vec_dot_fn f = quant_get_vec_dot_at(k_types[i], (quant_simd)lv);
            if (f != quant_get_vec_dot_at(k_types[i], QUANT_SIMD_AVX2)) g_own.dot[lv][i] = f;
            g_own.wide[lv][3 * i] = (const void *)quant_get_vec_dot_nr_at(k_types[i], (quant_simd)lv);
            const quant_panel_kernels *pk = quant_get_panel_at(k_types[i], (quant_simd)lv);
            if (pk != quant_get_panel_at(k_types[i], QUANT_SIMD_AVX2)) g_own.wide[lv][3 * i + 1] = pk;
            const quant_panel_kernels *rp = quant_get_repack_at(k_types[i], (quant_simd)lv);
            if (rp != quant_get_repack_at(k_types[i], QUANT_SIMD_AVX2)) g_own.wide[lv][3 * i + 2] = rp; /* AVX2_VNNI shares AVX2's */
        }
    quant_test_set_cpu_features(NULL);
}

static bool owned_by(int lv, quant_vec_dot_fn f)
{
    for (int i = 0; i < N_TYPES; i++)
        if (f && g_own.dot[lv][i] == f) return true;
    return false;
}

static bool wide_owned_by(int lv, const void *p)
{
    for (int i = 0; i < 3 * N_TYPES; i++)
        if (p && g_own.wide[lv][i] == p) return true;
    return false;
}

/* Under the simulated CPU, no getter (current level or any level it accepts) hands out a
 * kernel owned by a level in `banned` (a bit per level). */
static void check_never_selected(const char *cpu, unsigned banned)
{
    for (int lv = 0; lv <= QUANT_SIMD_COUNT; lv++) {
        bool current = lv == QUANT_SIMD_COUNT; /* last round: the non-_at getters */
        if (!current && !quant_simd_supported((quant_simd)lv)) continue;
        for (int i = 0; i < N_TYPES; i++) {
            ct_dtype t = k_types[i];
            quant_vec_dot_fn dot = current ? quant_get_vec_dot(t) : quant_get_vec_dot_at(t, (quant_simd)lv);
            const void *wide[3] = {
                current ? (const void *)quant_get_vec_dot_nr(t) : (const void *)quant_get_vec_dot_nr_at(t, (quant_simd)lv),
                current ? quant_get_panel(t) : quant_get_panel_at(t, (quant_simd)lv),
                current ? quant_get_repack(t) : quant_get_repack_at(t, (quant_simd)lv)};
            CHECK_MSG(dot != NULL, "%s: no %s vec dot at %s", cpu, ct_dtype_name(t),
                      current ? "the current level" : quant_simd_name((quant_simd)lv));
            for (int b = 0; b < QUANT_SIMD_COUNT; b++) {
                if (!(banned & (1u << b))) continue;
                CHECK_MSG(!owned_by(b, dot), "%s: %s vec dot of %s handed out at %s", cpu, ct_dtype_name(t),
                          quant_simd_name((quant_simd)b), current ? "the current level" : quant_simd_name((quant_simd)lv));
                for (int k = 0; k < 3; k++)
                    CHECK_MSG(!wide_owned_by(b, wide[k]), "%s: %s kernel %d of %s handed out", cpu, ct_dtype_name(t), k,
                              quant_simd_name((quant_simd)b));
            }
        }
    }
}

/* level must be refused, with the missing feature named, and leave the current level alone. */
static void check_refused(quant_simd level, const char *feature)
{
    quant_simd before = quant_simd_level();
    CHECK(!quant_simd_supported(level));
    CHECK_STATUS(quant_set_simd_level(level), CT_ERR_UNSUPPORTED);
    CHECK_MSG(strstr(ct_last_error(), feature) != NULL, "message \"%s\" does not name %s", ct_last_error(), feature);
    CHECK(quant_simd_level() == before);
    CHECK(quant_get_vec_dot_at(CT_Q4_0, level) == NULL);
    CHECK(quant_get_panel_at(CT_Q4_K, level) == NULL);
}

static bool has_avx512_kernels(void)
{
    return g_own.dot[QUANT_SIMD_AVX512_VNNI][0] != NULL;
}

static void test_zen4(void)
{
    quant_test_set_cpu_features(&k_zen4);
    CHECK(quant_simd_detected() == QUANT_SIMD_AVX512_VNNI);
    CHECK(quant_simd_level() == QUANT_SIMD_AVX512_VNNI);
    CHECK(quant_simd_supported(QUANT_SIMD_AVX2));
    check_refused(QUANT_SIMD_AVX2_VNNI, "AVX-VNNI");
    check_never_selected("zen4", 1u << QUANT_SIMD_AVX2_VNNI);
    /* the levels it has still give their own kernels */
    if (has_avx512_kernels()) {
        CHECK(owned_by(QUANT_SIMD_AVX512_VNNI, quant_get_vec_dot(CT_Q4_K)));
        CHECK(quant_get_repack(CT_Q4_K) != NULL);
        CHECK_OK(quant_set_simd_level(QUANT_SIMD_AVX2));
        CHECK(quant_get_vec_dot(CT_Q4_K) == quant_get_vec_dot_at(CT_Q4_K, QUANT_SIMD_AVX2));
        CHECK(quant_get_vec_dot_nr(CT_Q4_K) == NULL && quant_get_repack(CT_Q4_K) == NULL);
        CHECK(quant_get_panel(CT_Q4_K) != NULL && quant_get_panel(CT_Q4_K) == quant_get_panel_at(CT_Q4_K, QUANT_SIMD_AVX2));
        CHECK(!wide_owned_by(QUANT_SIMD_AVX512_VNNI, quant_get_panel(CT_Q4_K)));
    }
    quant_test_set_cpu_features(NULL);
}

/* Skylake-SP / the GPU machine's Xeon: the avx512 level, never a VNNI kernel. */
static void test_avx512_without_vnni(void)
{
    quant_test_set_cpu_features(&k_skx);
    CHECK(quant_simd_detected() == QUANT_SIMD_AVX512);
    CHECK(quant_simd_level() == QUANT_SIMD_AVX512);
    check_refused(QUANT_SIMD_AVX512_VNNI, "AVX512-VNNI");
    check_refused(QUANT_SIMD_AVX2_VNNI, "AVX-VNNI");
    check_never_selected("avx512 without vnni", (1u << QUANT_SIMD_AVX2_VNNI) | (1u << QUANT_SIMD_AVX512_VNNI));
    if (has_avx512_kernels()) {
        /* its own kernels, not the VNNI level's nor AVX2's, for every weight format */
        for (int i = 0; i < N_TYPES; i++) {
            ct_dtype t = k_types[i];
            CHECK_MSG(owned_by(QUANT_SIMD_AVX512, quant_get_vec_dot(t)), "avx512: %s vec dot not its own", ct_dtype_name(t));
            bool weight = t != CT_Q8_1 && t != CT_Q8_K && t != CT_Q8_0; /* Q8_0: AVX2's panel */
            if (weight) CHECK_MSG(wide_owned_by(QUANT_SIMD_AVX512, quant_get_panel(t)), "avx512: %s panel not its own", ct_dtype_name(t));
        }
        CHECK(wide_owned_by(QUANT_SIMD_AVX512, (const void *)quant_get_vec_dot_nr(CT_Q8_0)));
        CHECK(wide_owned_by(QUANT_SIMD_AVX512, quant_get_repack(CT_Q4_K)));
        CHECK_OK(quant_set_simd_level(QUANT_SIMD_AVX2));
        CHECK(quant_get_vec_dot_nr(CT_Q4_K) == NULL && quant_get_repack(CT_Q4_K) == NULL);
        CHECK(!wide_owned_by(QUANT_SIMD_AVX512, quant_get_panel(CT_Q4_K)));
    }
    quant_test_set_cpu_features(NULL);
}

static void test_alder_lake(void)
{
    quant_test_set_cpu_features(&k_alder);
    CHECK(quant_simd_detected() == QUANT_SIMD_AVX2_VNNI);
    check_refused(QUANT_SIMD_AVX512_VNNI, "AVX-512");
    check_refused(QUANT_SIMD_AVX512, "AVX-512");
    check_never_selected("avx-vnni without avx512", (1u << QUANT_SIMD_AVX512_VNNI) | (1u << QUANT_SIMD_AVX512));
    if (has_avx512_kernels()) CHECK(owned_by(QUANT_SIMD_AVX2_VNNI, quant_get_vec_dot(CT_Q8_0)));
    quant_test_set_cpu_features(NULL);
}

static void test_avx2_only(void)
{
    quant_test_set_cpu_features(&k_avx2);
    CHECK(quant_simd_detected() == QUANT_SIMD_AVX2);
    check_refused(QUANT_SIMD_AVX2_VNNI, "AVX-VNNI");
    check_refused(QUANT_SIMD_AVX512_VNNI, "AVX-512");
    check_refused(QUANT_SIMD_AVX512, "AVX-512");
    check_never_selected("avx2 only", (1u << QUANT_SIMD_AVX2_VNNI) | (1u << QUANT_SIMD_AVX512) | (1u << QUANT_SIMD_AVX512_VNNI));
    for (int i = 0; i < N_TYPES; i++) {
        CHECK(quant_get_vec_dot_nr(k_types[i]) == NULL);
        /* decode keeps the legacy weight formats repacked at AVX2 too, nothing else */
        ct_dtype t = k_types[i];
        bool kept = t == CT_Q8_0 || t == CT_Q4_0 || t == CT_Q4_1 || t == CT_Q5_0 || t == CT_Q5_1;
        CHECK_MSG((quant_get_repack(t) != NULL) == kept, "avx2 only: %s repack %s", ct_dtype_name(t), kept ? "missing" : "present");
        /* every weight format has AVX2 panels (Q8_1 and Q8_K are activation formats) */
        bool weight = k_types[i] != CT_Q8_1 && k_types[i] != CT_Q8_K;
        CHECK_MSG((quant_get_panel(k_types[i]) != NULL) == weight, "avx2 only: %s panels %s", ct_dtype_name(k_types[i]),
                  weight ? "missing" : "present");
    }
    quant_test_set_cpu_features(NULL);
}

static void test_no_simd(void)
{
    quant_test_set_cpu_features(&k_none);
    CHECK(quant_simd_detected() == QUANT_SIMD_SCALAR);
    check_refused(QUANT_SIMD_AVX2, "AVX2");
    check_refused(QUANT_SIMD_AVX2_VNNI, "AVX2");
    check_refused(QUANT_SIMD_AVX512_VNNI, "AVX2");
    check_refused(QUANT_SIMD_AVX512, "AVX2");
    for (int i = 0; i < N_TYPES; i++) {
        quant_vec_dot_fn scalar = quant_get_vec_dot_at(k_types[i], QUANT_SIMD_SCALAR);
        CHECK(scalar != NULL && quant_get_vec_dot(k_types[i]) == scalar);
        CHECK(quant_get_vec_dot_nr(k_types[i]) == NULL && quant_get_panel(k_types[i]) == NULL);
    }
    /* the activation quantizer falls back to the reference too: still correct bytes */
    float x[32];
    uint8_t q[34];
    for (int i = 0; i < 32; i++) x[i] = (float)i - 16.f;
    CHECK_OK(quant_quantize_row(CT_Q8_0, x, q, 32));
    CHECK(q[2] == (uint8_t)(int8_t)-127);
    quant_test_set_cpu_features(NULL);
}

/* A cap (CTORCH_SIMD's families) picks the best level inside the family, on every CPU. */
static void test_caps(void)
{
    static const struct {
        const quant_cpu_features *f;
        quant_simd want[3]; /* under portable, avx2, avx512 */
    } cases[] = {
        {&k_zen4, {QUANT_SIMD_SCALAR, QUANT_SIMD_AVX2, QUANT_SIMD_AVX512_VNNI}},
        {&k_alder, {QUANT_SIMD_SCALAR, QUANT_SIMD_AVX2_VNNI, QUANT_SIMD_AVX2_VNNI}},
        {&k_all, {QUANT_SIMD_SCALAR, QUANT_SIMD_AVX2_VNNI, QUANT_SIMD_AVX512_VNNI}},
        {&k_avx2, {QUANT_SIMD_SCALAR, QUANT_SIMD_AVX2, QUANT_SIMD_AVX2}},
        {&k_skx, {QUANT_SIMD_SCALAR, QUANT_SIMD_AVX2, QUANT_SIMD_AVX512}},
        {&k_none, {QUANT_SIMD_SCALAR, QUANT_SIMD_SCALAR, QUANT_SIMD_SCALAR}},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        quant_test_set_cpu_features(cases[i].f);
        for (int c = 0; c < 3; c++) {
            quant_simd_apply_cap((core_simd_cap)c);
            CHECK_MSG(quant_simd_level() == cases[i].want[c], "case %zu cap %d: %s, expected %s", i, c,
                      quant_simd_name(quant_simd_level()), quant_simd_name(cases[i].want[c]));
            if (c < 2)
                for (int t = 0; t < N_TYPES; t++) {
                    CHECK(!owned_by(QUANT_SIMD_AVX512_VNNI, quant_get_vec_dot(k_types[t])));
                    CHECK(!owned_by(QUANT_SIMD_AVX512, quant_get_vec_dot(k_types[t])));
                    const quant_panel_kernels *r = quant_get_repack(k_types[t]); /* none, or AVX2's own */
                    CHECK(!r || (c == 1 && r == quant_get_repack_at(k_types[t], QUANT_SIMD_AVX2)));
                    CHECK(c == 1 || quant_get_panel(k_types[t]) == NULL);
                    CHECK(!wide_owned_by(QUANT_SIMD_AVX512_VNNI, quant_get_panel(k_types[t])));
                    CHECK(!wide_owned_by(QUANT_SIMD_AVX512, quant_get_panel(k_types[t])));
                }
        }
        /* the cap stays when the features change */
        quant_simd_apply_cap(CORE_SIMD_CAP_AVX2);
        quant_test_set_cpu_features(&k_all);
        CHECK(quant_simd_level() == QUANT_SIMD_AVX2_VNNI);
        quant_simd_apply_cap(CORE_SIMD_CAP_AVX512);
    }
    /* the environment's spelling of the caps */
    /* (read with the other settings, as a re-initialization does, without making the CPU
     * device here; a bad value is refused and the cap in force stays) */
    static const char *const names[] = {"portable", "AVX2", "avx512", "", "bogus"};
    static const core_simd_cap want[] = {CORE_SIMD_CAP_PORTABLE, CORE_SIMD_CAP_AVX2, CORE_SIMD_CAP_AVX512,
                                         CORE_SIMD_CAP_AVX512, CORE_SIMD_CAP_AVX512};
    for (int i = 0; i < 5; i++) {
        setenv("CTORCH_SIMD", names[i], 1);
        core_config c;
        CHECK_STATUS(config_read(&c), i < 4 ? CT_OK : CT_ERR_INVALID_ARG);
        if (i < 4) config_publish(&c);
        CHECK_MSG(core_simd_cap_env() == want[i], "CTORCH_SIMD=%s", names[i]);
    }
    unsetenv("CTORCH_SIMD");
    core_config c;
    CHECK_OK(config_read(&c));
    config_publish(&c);
    CHECK(core_simd_cap_env() == CORE_SIMD_CAP_AVX512);
    quant_test_set_cpu_features(NULL);
}

/* NULL brings back the host's own features and the best level they allow. */
static void test_restore_host(void)
{
    quant_cpu_features host = quant_cpu_features_of_host();
    quant_test_set_cpu_features(&k_none);
    quant_test_set_cpu_features(NULL);
    quant_test_set_cpu_features(&host);
    quant_simd want = quant_simd_detected();
    quant_test_set_cpu_features(NULL);
    CHECK(quant_simd_detected() == want && quant_simd_level() == want);
    CHECK(host.avxvnni <= host.avx2 && host.avx512vnni <= host.avx512);
    fprintf(stderr, "  host: avx2 %d avx-vnni %d avx512 %d avx512-vnni %d -> %s\n", host.avx2, host.avxvnni,
            host.avx512, host.avx512vnni, quant_simd_name(want));
}

int main(void)
{
    /* the level each simulated CPU gets, whatever CTORCH_SIMD the suite runs under
     * (test_caps checks the caps) */
    quant_simd_apply_cap(CORE_SIMD_CAP_AVX512);
    collect_owned();
    if (!has_avx512_kernels()) fprintf(stderr, "note: built without x86 kernels; only the level choice is checked\n");
    RUN(test_zen4);
    RUN(test_avx512_without_vnni);
    RUN(test_alder_lake);
    RUN(test_avx2_only);
    RUN(test_no_simd);
    RUN(test_caps);
    RUN(test_restore_host);
    return th_finish();
}
