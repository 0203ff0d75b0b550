/* GGUF block formats (src/quant): bit-exactness of the reference quantizers against
 * gguf-py (against llama.cpp's own files: test_quant_refdata.c)
 * (data/quant_vectors.bin, see gen_quant_vectors.py), round-trip error bounds, the vec
 * dots of every SIMD level against double-precision references, and bad input. */
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "quant/quant.h"

static const ct_dtype k_quant_types[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q8_1,
                                         CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_Q8_K};
#define N_QTYPES ((int)(sizeof k_quant_types / sizeof k_quant_types[0]))

#include "quant_util.h"

static float normal(th_rng *r)
{
    double u1 = th_uniform(r, 1e-12, 1.0), u2 = th_uniform(r, 0.0, 1.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* ================= (b) gguf-py vectors ================= */

static int ulp_diff(float a, float b)
{
    if (a == b) return 0;
    if (isnan(a) || isnan(b)) return 1 << 30;
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    if (ia < 0) ia = (int32_t)(0x80000000u - (uint32_t)ia);
    if (ib < 0) ib = (int32_t)(0x80000000u - (uint32_t)ib);
    int64_t d = (int64_t)ia - ib;
    return d < 0 ? (int)(d < -(1 << 30) ? 1 << 30 : -d) : (int)(d > (1 << 30) ? 1 << 30 : d);
}

static void test_gguf_py_vectors(void)
{
    char path[1024];
    snprintf(path, sizeof path, "%s", __FILE__);
    char *slash = strrchr(path, '/');
    if (!slash) {
        th_skip("cannot locate the source directory");
        return;
    }
    snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "data/quant_vectors.bin");
    FILE *fp = fopen(path, "rb");
    CHECK_MSG(fp, "missing %s (run gen_quant_vectors.py)", path);
    if (!fp) return;
    char magic[4];
    uint32_t hdr[2];
    CHECK(fread(magic, 1, 4, fp) == 4 && !memcmp(magic, "CTQV", 4) && fread(hdr, 4, 2, fp) == 2 && hdr[0] == 1);
    int seen_q[CT_DTYPE_COUNT] = {0}, seen_d[CT_DTYPE_COUNT] = {0};
    for (uint32_t r = 0; r < hdr[1]; r++) {
        uint32_t h[4];
        if (fread(h, 4, 4, fp) != 4) {
            CHECK_MSG(0, "truncated record %u", r);
            break;
        }
        int dt = dtype_of_ggml(h[1]);
        uint32_t n = h[2], nbytes = h[3];
        CHECK(dt >= 0 && n < (1u << 20) && nbytes == ct_dtype_row_bytes((ct_dtype)dt, n));
        if (dt < 0 || n >= (1u << 20) || nbytes != ct_dtype_row_bytes((ct_dtype)dt, n)) break;
        float *fl = malloc(4 * (size_t)n), *got = malloc(4 * (size_t)n);
        uint8_t *blob = malloc(nbytes), *mine = malloc(nbytes);
        int ok = h[0] == 1 ? fread(fl, 4, n, fp) == n && fread(blob, 1, nbytes, fp) == nbytes
                           : fread(blob, 1, nbytes, fp) == nbytes && fread(fl, 4, n, fp) == n;
        CHECK(ok);
        if (ok && h[0] == 1) {
            seen_q[dt]++;
            CHECK_OK(quant_quantize_row((ct_dtype)dt, fl, mine, n));
            size_t k = 0;
            while (k < nbytes && mine[k] == blob[k]) k++;
            CHECK_MSG(k == nbytes, "%s record %u: byte %zu is %u, gguf-py wrote %u", ct_dtype_name((ct_dtype)dt), r,
                      k, k < nbytes ? mine[k] : 0, k < nbytes ? blob[k] : 0);
        } else if (ok) {
            seen_d[dt]++;
            CHECK_OK(quant_dequantize_row((ct_dtype)dt, blob, got, n));
            int worst = 0;
            uint32_t at = 0;
            for (uint32_t i = 0; i < n; i++) {
                int u = ulp_diff(got[i], fl[i]);
                if (u > worst) worst = u, at = i;
            }
            /* 1 ulp: gguf-py and ggml both compute d*sc*q - m in f32, but numpy may fuse or
             * reorder one product */
            CHECK_MSG(worst <= 1, "%s dequantize: element %u is %.9g, gguf-py %.9g (%d ulp)",
                      ct_dtype_name((ct_dtype)dt), at, got[at], fl[at], worst);
        }
        free(fl), free(got), free(blob), free(mine);
        if (!ok) break;
    }
    fclose(fp);
    const ct_dtype qd[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0};
    for (int i = 0; i < 5; i++) CHECK_MSG(seen_q[qd[i]] > 0, "no quantize vectors for %s", ct_dtype_name(qd[i]));
    const ct_dtype kd[] = {CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K};
    for (int i = 0; i < 5; i++) CHECK_MSG(seen_d[kd[i]] > 0, "no dequantize vectors for %s", ct_dtype_name(kd[i]));
}

/* ================= (c) round trip and vec dots ================= */

static void test_roundtrip_rmse(void)
{
    /* relative RMSE bounds for N(0,1) rows: a b-bit uniform quantizer over the block's
     * range gives about range/(2^b*sqrt(12)); the bounds sit ~25% above what the
     * reference quantizers reach, so a broken scale search or packing fails them */
    static const struct { ct_dtype t; double bound; } cases[] = {
        {CT_Q4_0, 0.105}, {CT_Q4_1, 0.098}, {CT_Q5_0, 0.053}, {CT_Q5_1, 0.047},
        {CT_Q8_0, 0.0068}, {CT_Q8_1, 0.0068}, {CT_Q2_K, 0.37}, {CT_Q3_K, 0.19},
        {CT_Q4_K, 0.089}, {CT_Q5_K, 0.045}, {CT_Q6_K, 0.022}, {CT_Q8_K, 0.0085},
    };
    th_rng rng = {42};
    const int64_t n = 4096;
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    uint8_t *q = malloc(ct_dtype_row_bytes(CT_Q8_K, n));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double se = 0, sx = 0;
        for (int row = 0; row < 4; row++) {
            for (int64_t i = 0; i < n; i++) x[i] = normal(&rng);
            CHECK_OK(quant_quantize_row(cases[c].t, x, q, n));
            CHECK_OK(quant_dequantize_row(cases[c].t, q, y, n));
            for (int64_t i = 0; i < n; i++) se += ((double)y[i] - x[i]) * ((double)y[i] - x[i]), sx += (double)x[i] * x[i];
        }
        double rel = sqrt(se / sx);
        fprintf(stderr, "  %-5s relative rmse %.5f (bound %.4f)\n", ct_dtype_name(cases[c].t), rel, cases[c].bound);
        CHECK_MSG(rel < cases[c].bound, "%s: relative rmse %g >= %g", ct_dtype_name(cases[c].t), rel, cases[c].bound);
        /* exact zeros and constants survive (the scale searches' degenerate branches) */
        for (int64_t i = 0; i < n; i++) x[i] = 0.f;
        CHECK_OK(quant_quantize_row(cases[c].t, x, q, n));
        CHECK_OK(quant_dequantize_row(cases[c].t, q, y, n));
        int zeros_ok = 1;
        for (int64_t i = 0; i < n; i++) zeros_ok &= y[i] == 0.f;
        CHECK_MSG(zeros_ok, "%s: zeros do not round-trip", ct_dtype_name(cases[c].t));
    }
    free(x), free(y), free(q);
}

/* Fills the f16 (or f32) scale fields of random blocks with finite moderate values. */
static void sanitize_blocks(ct_dtype t, uint8_t *b, int64_t nblocks, th_rng *r)
{
    int offs[2] = {-1, -1};
    switch (t) {
    case CT_Q4_0: case CT_Q5_0: case CT_Q8_0: offs[0] = 0; break;
    case CT_Q4_1: case CT_Q5_1: case CT_Q8_1: case CT_Q4_K: case CT_Q5_K: offs[0] = 0, offs[1] = 2; break;
    case CT_Q2_K: offs[0] = 80, offs[1] = 82; break;
    case CT_Q3_K: offs[0] = 108; break;
    case CT_Q6_K: offs[0] = 208; break;
    default: break;
    }
    size_t bb = ct_dtype_block_bytes(t);
    for (int64_t i = 0; i < nblocks; i++) {
        uint8_t *blk = b + (size_t)i * bb;
        if (t == CT_Q8_K) {
            float d = (float)th_uniform(r, -0.1, 0.1);
            memcpy(blk, &d, 4);
        }
        for (int k = 0; k < 2; k++)
            if (offs[k] >= 0) {
                uint16_t h = ct_f32_to_f16((float)(th_uniform(r, -1, 1) * pow(2.0, th_uniform(r, -8, 0))));
                memcpy(blk + offs[k], &h, 2);
            }
    }
}

/* One weight row against one activation row at every SIMD level. */
static void check_dot_case(ct_dtype t, int64_t n, const uint8_t *wq, const float *a, const char *what)
{
    ct_dtype vt = quant_vec_dot_type(t);
    uint8_t *aq = malloc(ct_dtype_row_bytes(vt, n));
    float *wd = malloc(sizeof(float) * (size_t)n), *ad = malloc(sizeof(float) * (size_t)n);
    CHECK_OK(quant_quantize_row(vt, a, aq, n));
    CHECK_OK(quant_dequantize_row(t, wq, wd, n));
    CHECK_OK(quant_dequantize_row(vt, aq, ad, n));
    double ref = 0, absref = 0, ref32 = 0, qbound = 0;
    int64_t bs = ct_dtype_block_size(vt);
    for (int64_t b = 0; b < n; b += bs) {
        double amax = 0;
        for (int64_t i = b; i < b + bs; i++) amax = fmax(amax, fabs(a[i]));
        for (int64_t i = b; i < b + bs; i++) {
            ref += (double)wd[i] * ad[i];
            absref += fabs((double)wd[i] * ad[i]);
            ref32 += (double)wd[i] * a[i];
            /* activation step amax/127, rounded to nearest (half a step) plus the f16
             * rounding of the Q8_0/Q8_1 scale (2^-11 * 127 steps): under 0.6 steps */
            qbound += fabs((double)wd[i]) * 0.6 * amax / 127;
        }
    }
    for (int lv = 0; lv < QUANT_SIMD_COUNT; lv++) {
        if (!quant_simd_supported((quant_simd)lv)) continue; /* named in test_vec_dot */
        quant_vec_dot_fn fn = quant_get_vec_dot_at(t, (quant_simd)lv);
        CHECK_MSG(fn, "%s: no vec dot at %s", ct_dtype_name(t), quant_simd_name((quant_simd)lv));
        if (!fn) continue;
        float s = NAN;
        fn(n, &s, wq, aq);
        /* both sides see the same quantized values: only f32 rounding of per-block
         * products and of the accumulation separates them */
        CHECK_MSG(fabs(s - ref) <= 1e-5 * absref + 1e-30, "%s %s n=%lld at %s: %.9g vs exact %.9g (sum|.| %g)",
                  ct_dtype_name(t), what, (long long)n, quant_simd_name((quant_simd)lv), s, ref, absref);
        CHECK_MSG(fabs(s - ref32) <= qbound + 1e-5 * absref + 1e-30,
                  "%s %s n=%lld at %s: %.9g vs f32 activations %.9g (bound %g)", ct_dtype_name(t), what,
                  (long long)n, quant_simd_name((quant_simd)lv), s, ref32, qbound);
    }
    free(aq), free(wd), free(ad);
}

static void test_vec_dot(void)
{
    th_rng rng = {7};
    fprintf(stderr, "  detected SIMD level: %s\n", quant_simd_name(quant_simd_detected()));
    for (int lv = 0; lv < QUANT_SIMD_COUNT; lv++)
        if (!quant_simd_supported((quant_simd)lv))
            fprintf(stderr, "  skipped SIMD level %s (this CPU lacks its features)\n", quant_simd_name((quant_simd)lv));
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ct_dtype t = k_quant_types[ti];
        int64_t bs = ct_dtype_block_size(t);
        /* odd block counts exercise the kernels' tails */
        const int64_t sizes[] = {bs, 3 * bs, 5 * bs, bs == 32 ? 4096 : 4096, bs == 32 ? 7 * 32 + 4096 : 4096 + 256};
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            int64_t n = sizes[si];
            float *w = malloc(sizeof(float) * (size_t)n), *a = malloc(sizeof(float) * (size_t)n);
            uint8_t *wq = malloc(ct_dtype_row_bytes(t, n));
            for (int64_t i = 0; i < n; i++) w[i] = normal(&rng) * 0.05f, a[i] = normal(&rng) * 3.f;
            if (si == 1)
                for (int64_t i = 0; i < n; i++) a[i] = (float)fabs(a[i]); /* one-signed activations */
            CHECK_OK(quant_quantize_row(t, w, wq, n));
            check_dot_case(t, n, wq, a, "quantized");
            /* random valid blocks: every bit pattern of the quants and scales */
            for (size_t k = 0; k < ct_dtype_row_bytes(t, n); k++) wq[k] = (uint8_t)(th_uniform(&rng, 0, 256));
            sanitize_blocks(t, wq, n / bs, &rng);
            check_dot_case(t, n, wq, a, "random blocks");
            free(w), free(a), free(wq);
        }
    }
}

/* Multi-row dots equal the single-row dot of the same level for every (weight row,
 * activation row) pair, at every nw / na up to the maxima, with padded row strides. */
static void test_vec_dot_nr(void)
{
    th_rng rng = {1234};
    CHECK(quant_get_vec_dot_nr(CT_F32) == NULL);
    CHECK(quant_get_vec_dot_nr_at(CT_Q4_K, QUANT_SIMD_COUNT) == NULL);
    if (quant_simd_supported(QUANT_SIMD_AVX512_VNNI)) {
        /* the prefill path relies on these */
        CHECK(quant_get_vec_dot_nr_at(CT_Q4_K, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_vec_dot_nr_at(CT_Q6_K, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_vec_dot_nr_at(CT_Q8_0, QUANT_SIMD_AVX512_VNNI) != NULL);
    }
    if (quant_simd_supported(QUANT_SIMD_AVX512)) {
        CHECK(quant_get_vec_dot_nr_at(CT_Q4_K, QUANT_SIMD_AVX512) != NULL);
        CHECK(quant_get_vec_dot_nr_at(CT_Q6_K, QUANT_SIMD_AVX512) != NULL);
        CHECK(quant_get_vec_dot_nr_at(CT_Q8_0, QUANT_SIMD_AVX512) != NULL);
    }
    enum { MW = QUANT_NR_MAX_W, MA = QUANT_NR_MAX_A, SS = QUANT_NR_MAX_W + 3 };
    const float sentinel = 12345.f;
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ct_dtype t = k_quant_types[ti], vt = quant_vec_dot_type(t);
        int64_t bs = ct_dtype_block_size(t);
        const int64_t nblocks[] = {1, 2, 3, 5, 8};
        for (size_t bi = 0; bi < sizeof nblocks / sizeof nblocks[0]; bi++) {
            int64_t n = nblocks[bi] * bs;
            /* strides padded by a few bytes, keeping the 2- / 4-byte alignment rules */
            size_t ws = ct_dtype_row_bytes(t, n) + 6, as = ct_dtype_row_bytes(vt, n) + 12;
            uint8_t *wq = malloc(ws * MW), *aq = malloc(as * MA);
            float *x = malloc(sizeof(float) * (size_t)n);
            for (size_t k = 0; k < ws * MW; k++) wq[k] = (uint8_t)th_uniform(&rng, 0, 256);
            for (int r = 0; r < MW; r++) sanitize_blocks(t, wq + (size_t)r * ws, nblocks[bi], &rng);
            for (int r = 0; r < MA; r++) {
                for (int64_t i = 0; i < n; i++) x[i] = normal(&rng) * (r == 1 ? 0.01f : 2.f);
                CHECK_OK(quant_quantize_row(vt, x, aq + (size_t)r * as, n));
            }
            for (int lv = 0; lv < QUANT_SIMD_COUNT; lv++) {
                if (!quant_simd_supported((quant_simd)lv)) continue; /* named in test_vec_dot */
                quant_vec_dot_nr_fn nr = quant_get_vec_dot_nr_at(t, (quant_simd)lv);
                quant_vec_dot_fn dot = quant_get_vec_dot_at(t, (quant_simd)lv);
                if (!nr) continue;
                for (int nw = 1; nw <= MW; nw++)
                    for (int na = 1; na <= MA; na++) {
                        float s[MA * SS];
                        for (int k = 0; k < MA * SS; k++) s[k] = sentinel;
                        nr(n, s, SS, wq, ws, nw, aq, as, na);
                        for (int j = 0; j < MA; j++)
                            for (int i = 0; i < SS; i++) {
                                float got = s[j * SS + i];
                                if (j >= na || i >= nw) {
                                    CHECK_MSG(got == sentinel, "%s nr wrote outside [%d, %d] at (%d, %d)",
                                              ct_dtype_name(t), na, nw, j, i);
                                    continue;
                                }
                                float want;
                                dot(n, &want, wq + (size_t)i * ws, aq + (size_t)j * as);
                                /* same integer sums; only the f32 accumulation order may differ */
                                CHECK_MSG(fabsf(got - want) <= 1e-6f * fabsf(want) + 1e-30f,
                                          "%s nr at %s, %lld blocks, nw %d na %d, (%d, %d): %.9g vs %.9g",
                                          ct_dtype_name(t), quant_simd_name((quant_simd)lv), (long long)nblocks[bi],
                                          nw, na, j, i, got, want);
                            }
                    }
            }
            free(wq), free(aq), free(x);
        }
    }
}

/* Packed panels: every (weight row, activation row) result matches the scalar dot to f32
 * rounding, for full and partial panels and 1..QUANT_PANEL_MAX_A activation rows, and no
 * lane beyond nw is written. */
static double abs_dot(ct_dtype t, const uint8_t *w, const uint8_t *a, int64_t n)
{
    float *wf = malloc(sizeof(float) * (size_t)n), *af = malloc(sizeof(float) * (size_t)n);
    double s = 0;
    quant_dequantize_row(t, w, wf, n);
    quant_dequantize_row(quant_vec_dot_type(t), a, af, n);
    for (int64_t i = 0; i < n; i++) s += fabs((double)wf[i] * af[i]);
    free(wf), free(af);
    return s;
}

static void test_panels(void)
{
    th_rng rng = {4321};
    CHECK(quant_get_panel(CT_F32) == NULL);
    CHECK(quant_get_panel_at(CT_Q4_K, QUANT_SIMD_COUNT) == NULL);
    if (quant_simd_supported(QUANT_SIMD_AVX512_VNNI)) {
        CHECK(quant_get_panel_at(CT_Q4_K, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_panel_at(CT_Q6_K, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_panel_at(CT_Q8_0, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_panel_at(CT_Q5_K, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_panel_at(CT_Q4_0, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_repack_at(CT_Q4_K, QUANT_SIMD_AVX512_VNNI) != NULL);
        CHECK(quant_get_repack_at(CT_Q5_K, QUANT_SIMD_AVX512_VNNI) != NULL);
    }
    if (quant_simd_supported(QUANT_SIMD_AVX512)) {
        CHECK(quant_get_panel_at(CT_Q4_0, QUANT_SIMD_AVX512) != NULL);
        CHECK(quant_get_repack_at(CT_Q4_K, QUANT_SIMD_AVX512) != NULL);
        CHECK(quant_get_repack_at(CT_Q5_K, QUANT_SIMD_AVX512) != NULL);
    }
    if (quant_simd_supported(QUANT_SIMD_AVX2))
        CHECK(quant_get_repack_at(CT_Q8_0, QUANT_SIMD_AVX2) && quant_get_repack_at(CT_Q4_0, QUANT_SIMD_AVX2) &&
              quant_get_repack_at(CT_Q4_1, QUANT_SIMD_AVX2) && quant_get_repack_at(CT_Q5_0, QUANT_SIMD_AVX2) &&
              quant_get_repack_at(CT_Q5_1, QUANT_SIMD_AVX2));
    for (int lv = QUANT_SIMD_AVX512; lv <= QUANT_SIMD_AVX512_VNNI; lv++)
        if (quant_simd_supported((quant_simd)lv)) /* decode of the legacy formats relies on these */
            CHECK(quant_get_repack_at(CT_Q8_0, (quant_simd)lv) && quant_get_repack_at(CT_Q4_0, (quant_simd)lv) &&
                  quant_get_repack_at(CT_Q5_0, (quant_simd)lv) && quant_get_repack_at(CT_Q4_1, (quant_simd)lv) &&
                  quant_get_repack_at(CT_Q5_1, (quant_simd)lv));
    CHECK(quant_get_repack(CT_F16) == NULL);
    enum { PR = QUANT_PANEL_ROWS, MA = QUANT_PANEL_MAX_A, SS = QUANT_PANEL_ROWS + 3 };
    const float sentinel = 12345.f;
    int checked = 0;
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ct_dtype t = k_quant_types[ti], vt = quant_vec_dot_type(t);
        int64_t bs = ct_dtype_block_size(t);
        const int64_t nblocks[] = {1, 3, 8, 9};
        for (size_t bi = 0; bi < sizeof nblocks / sizeof nblocks[0]; bi++) {
            int64_t n = nblocks[bi] * bs;
            size_t ws = ct_dtype_row_bytes(t, n) + 2, as = ct_dtype_row_bytes(vt, n) + 4;
            uint8_t *wq = malloc(ws * PR), *aq = malloc(as * MA);
            float *x = malloc(sizeof(float) * (size_t)n);
            for (size_t k = 0; k < ws * PR; k++) wq[k] = (uint8_t)th_uniform(&rng, 0, 256);
            for (int r = 0; r < PR; r++) sanitize_blocks(t, wq + (size_t)r * ws, nblocks[bi], &rng);
            for (int r = 0; r < MA; r++) {
                for (int64_t i = 0; i < n; i++) x[i] = normal(&rng) * (r == 1 ? 0.01f : 2.f);
                CHECK_OK(quant_quantize_row(vt, x, aq + (size_t)r * as, n));
            }
            for (int lk = 0; lk < 2 * QUANT_SIMD_COUNT; lk++) {
                int lv = lk / 2; /* each level's per-call panels, then its kept (repacked) ones */
                if (!quant_simd_supported((quant_simd)lv)) continue;
                const quant_panel_kernels *pk = lk % 2 ? quant_get_repack_at(t, (quant_simd)lv) : quant_get_panel_at(t, (quant_simd)lv);
                quant_vec_dot_fn dot = quant_get_vec_dot_at(t, QUANT_SIMD_SCALAR);
                if (!pk) continue;
                size_t nblk = (size_t)(n / bs), auxrow = nblk * (size_t)pk->aux_n;
                void *panel = aligned_alloc(64, (nblk * pk->block_bytes + 63) & ~(size_t)63); /* a size in whole alignments */
                float *aux = malloc(sizeof(float) * auxrow * MA);
                for (int r = 0; r < MA; r++) pk->act_aux(aq + (size_t)r * as, n, aux + r * auxrow);
                const int nws[] = {PR, 5, 1};
                for (int wi = 0; wi < 3; wi++) {
                    int nw = nws[wi];
                    pk->pack(wq, ws, nw, n, panel);
                    for (int na = 1; na <= MA; na++) {
                        float s[MA * SS];
                        for (int k = 0; k < MA * SS; k++) s[k] = sentinel;
                        pk->gemm(n, panel, aq, as, aux, auxrow, na, s, SS, nw);
                        for (int j = 0; j < MA; j++)
                            for (int i = 0; i < SS; i++) {
                                float got = s[j * SS + i];
                                if (j >= na || i >= nw) {
                                    CHECK_MSG(got == sentinel, "%s panel wrote outside [%d, %d] at (%d, %d)",
                                              ct_dtype_name(t), na, nw, j, i);
                                    continue;
                                }
                                float want;
                                dot(n, &want, wq + (size_t)i * ws, aq + (size_t)j * as);
                                /* exact integer sub-block sums; the f32 scale products and sums round
                                 * differently: at most ~2 * (n / 16) roundings of 2^-24 each, relative
                                 * to the sum of |terms| (the exact magnitude the sums run through) */
                                double tol = 2.0 * (double)(n / 16) * 6e-8 * abs_dot(t, wq + (size_t)i * ws, aq + (size_t)j * as, n);
                                CHECK_MSG(fabs((double)got - want) <= tol + 1e-30,
                                          "%s %s, %lld blocks, nw %d na %d, (%d, %d): %.9g vs %.9g (tol %.3g)",
                                          ct_dtype_name(t), lk % 2 ? "repacked" : "panel", (long long)nblocks[bi], nw, na, j, i, got, want, tol);
                                checked++;
                            }
                    }
                }
                free(panel), free(aux);
            }
            free(wq), free(aq), free(x);
        }
    }
    if (quant_simd_supported(QUANT_SIMD_AVX512_VNNI)) CHECK(checked > 0);
}

/* The SIMD activation quantizers write the reference's bytes, ties and zeros included. */
static void test_activation_quantizers(void)
{
    th_rng rng = {99};
    const ct_dtype types[] = {CT_Q8_0, CT_Q8_1, CT_Q8_K};
    const int64_t n = 1024;
    float *x = malloc(sizeof(float) * n);
    uint8_t *want = malloc(ct_dtype_row_bytes(CT_Q8_K, n)), *got = malloc(ct_dtype_row_bytes(CT_Q8_K, n));
    quant_simd before = quant_simd_level();
    for (int kind = 0; kind < 5; kind++) {
        for (int64_t i = 0; i < n; i++) {
            switch (kind) {
            case 0: x[i] = normal(&rng); break;
            case 1: x[i] = (float)(th_uniform(&rng, -1, 1) * pow(10.0, th_uniform(&rng, -6, 6))); break;
            case 2: x[i] = i % 300 < 40 ? 0.f : normal(&rng); break; /* all-zero blocks */
            case 3: x[i] = (i % 32 == 0) ? -127.f : (float)(i % 32) * 0.5f - 7.f; break; /* exact .5 ties */
            default: x[i] = (i % 256 == 5) ? 3.f : (i % 256 == 9) ? -3.f : normal(&rng) * 0.1f; break; /* +-amax */
            }
        }
        for (size_t ti = 0; ti < 3; ti++) {
            size_t rb = ct_dtype_row_bytes(types[ti], n);
            CHECK_OK(quant_set_simd_level(QUANT_SIMD_SCALAR));
            CHECK_OK(quant_quantize_row(types[ti], x, want, n));
            for (int lv = 1; lv < QUANT_SIMD_COUNT; lv++) {
                if (!quant_simd_supported((quant_simd)lv)) continue;
                CHECK_OK(quant_set_simd_level((quant_simd)lv));
                memset(got, 0xAB, rb);
                CHECK_OK(quant_quantize_row(types[ti], x, got, n));
                size_t k = 0;
                while (k < rb && got[k] == want[k]) k++;
                CHECK_MSG(k == rb, "%s rows of kind %d at %s: byte %zu differs from the reference", ct_dtype_name(types[ti]),
                          kind, quant_simd_name((quant_simd)lv), k);
            }
        }
    }
    CHECK_OK(quant_set_simd_level(before));
    free(x), free(want), free(got);
}

/* The global level switch hands out the matching table; levels the CPU lacks are refused
 * with a message naming the missing feature. */
static void test_simd_levels(void)
{
    quant_simd before = quant_simd_level();
    CHECK(quant_simd_supported(QUANT_SIMD_SCALAR) && quant_simd_supported(quant_simd_detected()));
    for (int lv = 0; lv < QUANT_SIMD_COUNT; lv++) {
        if (!quant_simd_supported((quant_simd)lv)) {
            quant_simd cur = quant_simd_level();
            CHECK_STATUS(quant_set_simd_level((quant_simd)lv), CT_ERR_UNSUPPORTED);
            CHECK(strstr(ct_last_error(), "lacks") && strstr(ct_last_error(), quant_simd_name((quant_simd)lv)));
            CHECK(quant_simd_level() == cur);
            CHECK(quant_get_vec_dot_at(CT_Q4_K, (quant_simd)lv) == NULL);
            continue;
        }
        CHECK(lv <= (int)quant_simd_detected());
        CHECK_OK(quant_set_simd_level((quant_simd)lv));
        CHECK(quant_simd_level() == (quant_simd)lv);
        CHECK(quant_get_vec_dot(CT_Q4_K) == quant_get_vec_dot_at(CT_Q4_K, (quant_simd)lv));
    }
    CHECK_STATUS(quant_set_simd_level(QUANT_SIMD_COUNT), CT_ERR_INVALID_ARG);
    CHECK(!quant_simd_supported(QUANT_SIMD_COUNT));
    CHECK(quant_get_vec_dot_at(CT_F32, QUANT_SIMD_SCALAR) == NULL);
    CHECK_OK(quant_set_simd_level(before));
}

/* ================= (d) plain rows and bad input ================= */

static void test_plain_rows(void)
{
    const float v[4] = {1.5f, -0.0f, 65504.f, 1e-7f};
    uint16_t h[4], bh[4];
    float out[4];
    for (int i = 0; i < 4; i++) h[i] = ct_f32_to_f16(v[i]), bh[i] = ct_f32_to_bf16(v[i]);
    CHECK_OK(quant_dequantize_row(CT_F32, v, out, 4));
    CHECK(!memcmp(out, v, sizeof v));
    CHECK_OK(quant_dequantize_row(CT_F16, h, out, 4));
    for (int i = 0; i < 4; i++) CHECK(out[i] == ct_f16_to_f32(h[i]));
    CHECK_OK(quant_dequantize_row(CT_BF16, bh, out, 4));
    for (int i = 0; i < 4; i++) CHECK(out[i] == ct_bf16_to_f32(bh[i]));
    CHECK_OK(quant_dequantize_row(CT_Q4_K, h, out, 0)); /* empty rows are fine */
}

static void test_bad_input(void)
{
    float x[512] = {0}, y[512];
    uint8_t q[1024] = {0};
    CHECK_STATUS(quant_quantize_row(CT_Q4_0, x, q, 33), CT_ERR_SHAPE);
    CHECK(strstr(ct_last_error(), "q4_0") && strstr(ct_last_error(), "33"));
    CHECK_STATUS(quant_quantize_row(CT_Q4_K, x, q, 128), CT_ERR_SHAPE);
    CHECK_STATUS(quant_dequantize_row(CT_Q6_K, q, y, 300), CT_ERR_SHAPE);
    CHECK_STATUS(quant_quantize_row(CT_Q8_0, x, q, -32), CT_ERR_SHAPE);
    CHECK_STATUS(quant_quantize_row(CT_F32, x, q, 32), CT_ERR_DTYPE);
    CHECK_STATUS(quant_quantize_row(CT_F16, x, q, 32), CT_ERR_DTYPE);
    CHECK_STATUS(quant_quantize_row(CT_I32, x, q, 32), CT_ERR_DTYPE);
    CHECK_STATUS(quant_quantize_row((ct_dtype)99, x, q, 32), CT_ERR_DTYPE);
    CHECK_STATUS(quant_dequantize_row(CT_I32, q, y, 32), CT_ERR_DTYPE);
    CHECK_STATUS(quant_dequantize_row(CT_BOOL, q, y, 32), CT_ERR_DTYPE);
    CHECK_STATUS(quant_quantize_row(CT_Q4_0, NULL, q, 32), CT_ERR_INVALID_ARG);
    CHECK_STATUS(quant_dequantize_row(CT_Q4_0, q, NULL, 32), CT_ERR_INVALID_ARG);
    CHECK(quant_vec_dot_type(CT_Q4_0) == CT_Q8_0 && quant_vec_dot_type(CT_Q5_0) == CT_Q8_0);
    CHECK(quant_vec_dot_type(CT_Q4_1) == CT_Q8_1 && quant_vec_dot_type(CT_Q5_1) == CT_Q8_1);
    for (int i = 0; i < N_QTYPES; i++)
        if (ct_dtype_block_size(k_quant_types[i]) == 256) CHECK(quant_vec_dot_type(k_quant_types[i]) == CT_Q8_K);

    /* NaN and infinities: no crash, no sanitizer report, finite inputs elsewhere untouched */
    for (int i = 0; i < 512; i++) x[i] = (float)(i % 17) - 8.f;
    x[3] = NAN, x[40] = INFINITY, x[300] = -INFINITY, x[301] = 1e38f, x[302] = -1e38f, x[303] = 1e-45f;
    for (int ti = 0; ti < N_QTYPES; ti++) {
        ct_dtype t = k_quant_types[ti];
        CHECK_OK(quant_quantize_row(t, x, q, 512));
        CHECK_OK(quant_dequantize_row(t, q, y, 512));
        ct_dtype vt = quant_vec_dot_type(t);
        uint8_t aq[1024];
        CHECK_OK(quant_quantize_row(vt, x, aq, 512));
        for (int lv = 0; lv < QUANT_SIMD_COUNT; lv++) {
            if (!quant_simd_supported((quant_simd)lv)) continue; /* named in test_vec_dot */
            float s;
            quant_get_vec_dot_at(t, (quant_simd)lv)(512, &s, q, aq);
        }
    }
}

/* The dtype table agrees with GGUF's block geometry. */
static void test_block_sizes(void)
{
    static const struct { ct_dtype t; int64_t bs; size_t bytes; } g[] = {
        {CT_Q4_0, 32, 18},   {CT_Q4_1, 32, 20},   {CT_Q5_0, 32, 22},   {CT_Q5_1, 32, 24},
        {CT_Q8_0, 32, 34},   {CT_Q8_1, 32, 36},   {CT_Q2_K, 256, 84},  {CT_Q3_K, 256, 110},
        {CT_Q4_K, 256, 144}, {CT_Q5_K, 256, 176}, {CT_Q6_K, 256, 210}, {CT_Q8_K, 256, 292},
    };
    for (size_t i = 0; i < sizeof g / sizeof g[0]; i++)
        CHECK_MSG(ct_dtype_block_size(g[i].t) == g[i].bs && ct_dtype_block_bytes(g[i].t) == g[i].bytes, "%s",
                  ct_dtype_name(g[i].t));
}

int main(void)
{
    RUN(test_block_sizes);
    RUN(test_plain_rows);
    RUN(test_bad_input);
    RUN(test_gguf_py_vectors);
    RUN(test_roundtrip_rmse);
    RUN(test_vec_dot);
    RUN(test_vec_dot_nr);
    RUN(test_panels);
    RUN(test_activation_quantizers);
    RUN(test_simd_levels);
    return th_finish();
}
