/* Packed-panel prefill kernels of every block format: the AVX-512 VNNI ones
 * (src/quant/quant_panel_*avx512.c) and the AVX2 ones (src/quant/quant_panel_avx2.c, also
 * handed out at the AVX2_VNNI level):
 * every (weight row, activation row) result against the scalar row dot and against a
 * double-precision dot of the dequantized rows, at every SIMD level this CPU has, for full
 * and partial panels, odd and even block counts, 1..QUANT_PANEL_MAX_A activation rows,
 * extreme quants, and sentinels beyond nw and na (the AMX tiles where the CPU has them, their
 * packed layout by emulation on any AVX-512 VNNI CPU); then ct_linear in prompt shapes with
 * these weights against a double-precision reference on the dequantized weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "quant/quant_impl.h"

static const ct_dtype k_types[] = {CT_Q8_0, CT_Q4_0, CT_Q4_K, CT_Q6_K, CT_Q5_0,
                                   CT_Q4_1, CT_Q5_K, CT_Q5_1, CT_Q3_K, CT_Q2_K};
#define N_TYPES ((int)(sizeof k_types / sizeof k_types[0]))
#define EPS32 5.9604645e-8 /* 2^-24 */

static float normal(th_rng *r)
{
    double u1 = th_uniform(r, 1e-12, 1), u2 = th_uniform(r, 0, 1);
    return (float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2));
}

static float f16_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return ct_f16_to_f32(h);
}

/* The f16 scale fields of a block (byte offsets; -1: none). */
static void scale_offsets(ct_dtype t, int offs[2])
{
    offs[0] = offs[1] = -1;
    switch (t) {
    case CT_Q8_0: case CT_Q4_0: case CT_Q5_0: offs[0] = 0; break;
    case CT_Q4_1: case CT_Q5_1: case CT_Q4_K: case CT_Q5_K: offs[0] = 0, offs[1] = 2; break;
    case CT_Q6_K: offs[0] = 208; break;
    case CT_Q2_K: offs[0] = 80, offs[1] = 82; break;
    default: offs[0] = 108; break; /* Q3_K */
    }
}

/* Quants per scale group, the unit the bounds below are computed over. */
static int group_size(ct_dtype t) { return ct_dtype_block_size(t) == 32 || t == CT_Q4_K || t == CT_Q5_K ? 32 : 16; }

/* |largest weight| group g of a block can dequantize to: |d| * max|q - zero| + |m|. */
static double group_wmax(ct_dtype t, const uint8_t *blk, int g)
{
    switch (t) {
    case CT_Q8_0: return fabs(f16_at(blk)) * 128;
    case CT_Q4_0: return fabs(f16_at(blk)) * 8;
    case CT_Q5_0: return fabs(f16_at(blk)) * 16;
    case CT_Q4_K: case CT_Q5_K: {
        uint8_t sc, m;
        quant_k4_scale_min(g, ((const blk_q4_k *)blk)->scales, &sc, &m);
        return fabs(f16_at(blk)) * sc * (t == CT_Q4_K ? 15 : 31) + fabs(f16_at(blk + 2)) * m;
    }
    case CT_Q6_K: return fabs(f16_at(blk + 208)) * abs(((const blk_q6_k *)blk)->scales[g]) * 32;
    case CT_Q4_1: return fabs(f16_at(blk)) * 15 + fabs(f16_at(blk + 2));
    case CT_Q5_1: return fabs(f16_at(blk)) * 31 + fabs(f16_at(blk + 2));
    case CT_Q2_K: {
        const blk_q2_k *b = (const blk_q2_k *)blk;
        return fabs(f16_at(blk + 80)) * (b->scales[g] & 15) * 3 + fabs(f16_at(blk + 82)) * (b->scales[g] >> 4);
    }
    default: {
        int8_t sc[16];
        quant_k3_unpack(((const blk_q3_k *)blk)->scales, sc);
        return fabs(f16_at(blk + 108)) * abs(sc[g]) * 4;
    }
    }
}

/* Random quants and scales with finite moderate f16 d (and m); row 0 has every byte at 0xFF
 * (largest quants and scales; Q8_0: 0x80, the -128 whose |w| is 128), row 1 at zero, row 2
 * (Q8_0 only) at 127: the extremes of what the panels hold. */
static void make_weights(ct_dtype t, uint8_t *w, size_t ws, int rows, int64_t nblk, th_rng *r)
{
    size_t bb = ct_dtype_block_bytes(t);
    int offs[2];
    scale_offsets(t, offs);
    for (size_t k = 0; k < ws * (size_t)rows; k++) w[k] = (uint8_t)th_uniform(r, 0, 256);
    for (int i = 0; i < rows; i++)
        for (int64_t b = 0; b < nblk; b++) {
            uint8_t *blk = w + (size_t)i * ws + (size_t)b * bb;
            if (i < 2) memset(blk, i == 0 ? (t == CT_Q8_0 ? 0x80 : 0xFF) : 0x00, bb);
            if (i == 2 && t == CT_Q8_0) memset(blk, 0x7F, bb);
            for (int k = 0; k < 2; k++)
                if (offs[k] >= 0) {
                    uint16_t h = ct_f32_to_f16((float)(th_uniform(r, -1, 1) * pow(2.0, th_uniform(r, -8, 0))));
                    memcpy(blk + offs[k], &h, 2);
                }
        }
}

/* One panel result against the scalar dot and a double dot of the dequantized rows.
 * Integer sums are exact on both sides; each scale group adds at most ~2 f32 roundings
 * (scale product, fma into the block or running total) of 2^-24 of the running magnitude,
 * which never exceeds mag = sum_groups wmax_g * sum|a_g|; both sides together, plus a few
 * per block: 2 * (2 groups + 4 blocks + 4) roundings. */
static void check_result(ct_dtype t, int64_t n, const uint8_t *w, const uint8_t *a, float got, const char *ctx)
{
    ct_dtype vt = quant_vec_dot_type(t);
    int64_t bs = ct_dtype_block_size(t), nblk = n / bs, gs = group_size(t), ngrp = n / gs;
    float *wf = malloc(sizeof(float) * (size_t)n), *af = malloc(sizeof(float) * (size_t)n);
    CHECK_OK(quant_dequantize_row(t, w, wf, n));
    CHECK_OK(quant_dequantize_row(vt, a, af, n));
    double ref = 0, mag = 0;
    for (int64_t g = 0; g < ngrp; g++) {
        double asum = 0;
        for (int64_t i = gs * g; i < gs * (g + 1); i++) ref += (double)wf[i] * af[i], asum += fabs(af[i]);
        const uint8_t *blk = w + (size_t)(g * gs / bs) * ct_dtype_block_bytes(t);
        mag += group_wmax(t, blk, (int)(g % (bs / gs))) * asum;
    }
    float want;
    quant_get_vec_dot_at(t, QUANT_SIMD_SCALAR)(n, &want, w, a);
    double tol = 2.0 * (2.0 * (double)ngrp + 4.0 * (double)nblk + 4.0) * EPS32 * mag + 1e-30;
    CHECK_MSG(fabs((double)got - want) <= tol, "%s %s: %.9g vs scalar dot %.9g (tol %.3g)", ct_dtype_name(t), ctx, got,
              want, tol);
    /* the f32 dequantizers round each weight up to four times (Q2_K: d sc, q, dmin m, the
     * difference): another 4 * 2^-24 of mag */
    CHECK_MSG(fabs((double)got - ref) <= tol + 4 * EPS32 * mag, "%s %s: %.9g vs double %.9g (tol %.3g)",
              ct_dtype_name(t), ctx, got, ref, tol);
    free(wf), free(af);
}

static void test_registered(void)
{
    for (int ti = 0; ti < N_TYPES; ti++) {
        ct_dtype t = k_types[ti];
        CHECK(quant_get_panel_at(t, QUANT_SIMD_SCALAR) == NULL);
        if (quant_simd_supported(QUANT_SIMD_AVX512_VNNI))
            CHECK_MSG(quant_get_panel_at(t, QUANT_SIMD_AVX512_VNNI) != NULL, "%s has no AVX-512 panel", ct_dtype_name(t));
        if (quant_simd_supported(QUANT_SIMD_AVX2))
            CHECK_MSG(quant_get_panel_at(t, QUANT_SIMD_AVX2) != NULL, "%s has no AVX2 panel", ct_dtype_name(t));
        /* every type has its own panel at the avx512 level (Q8_0: the sign-moved kernel) */
        if (quant_simd_supported(QUANT_SIMD_AVX512))
            CHECK_MSG(quant_get_panel_at(t, QUANT_SIMD_AVX512) != NULL &&
                          quant_get_panel_at(t, QUANT_SIMD_AVX512) != quant_get_panel_at(t, QUANT_SIMD_AVX2),
                      "%s: avx512 panel not its own", ct_dtype_name(t));
        if (quant_simd_supported(QUANT_SIMD_AVX2_VNNI))
            CHECK_MSG(quant_get_panel_at(t, QUANT_SIMD_AVX2_VNNI) != NULL, "%s has no AVX2-VNNI panel", ct_dtype_name(t));
    }
    if (!quant_simd_supported(QUANT_SIMD_AVX2)) th_skip("this CPU lacks AVX2: no panel kernels to test");
}

static void run_panel_case(ct_dtype t, const quant_panel_kernels *pk, int64_t nblk, const uint8_t *wq, size_t ws,
                           const uint8_t *aq, size_t as, const char *level, int *checked)
{
    enum { PR = QUANT_PANEL_ROWS, MAX = QUANT_PANEL_MAX_A_ANY, SS = QUANT_PANEL_ROWS + 3 };
    const int MA = quant_panel_max_a(pk);
    /* every count up to 4 rows; the AMX kernels' 128 at counts around their 16-row tiles and
     * 32-row groups */
    const int nas[] = {1, 2, 3, 4, 5, 15, 16, 17, 31, 32, 33, 64, 127, 128};
    const float sentinel = 12345.f;
    int64_t n = nblk * ct_dtype_block_size(t);
    size_t auxrow = (size_t)nblk * (size_t)pk->aux_n;
    void *panel = aligned_alloc(64, ((size_t)nblk * pk->block_bytes + 63) & ~(size_t)63);
    float *aux = malloc(sizeof(float) * (auxrow * (size_t)MA + 1));
    for (int r = 0; r < MA; r++) pk->act_aux(aq + (size_t)r * as, n, aux + r * auxrow);
    const int nws[] = {PR, 15, 5, 1};
    for (int wi = 0; wi < 4; wi++) {
        int nw = nws[wi];
        /* a panel left full of garbage must not leak into a partial one */
        memset(panel, 0xA5, (size_t)nblk * pk->block_bytes);
        pk->pack(wq, ws, nw, n, panel);
        for (size_t ni = 0; ni < sizeof nas / sizeof nas[0] && nas[ni] <= MA; ni++) {
            int na = nas[ni];
            float s[MAX * SS];
            for (int k = 0; k < MA * SS; k++) s[k] = sentinel;
            pk->gemm(n, panel, aq, as, aux, auxrow, na, s, SS, nw);
            for (int j = 0; j < MA; j++)
                for (int i = 0; i < SS; i++) {
                    float got = s[j * SS + i];
                    if (j >= na || i >= nw) {
                        CHECK_MSG(got == sentinel, "%s panel at %s wrote outside [%d, %d] at (%d, %d)", ct_dtype_name(t),
                                  level, na, nw, j, i);
                        continue;
                    }
                    char ctx[128];
                    snprintf(ctx, sizeof ctx, "%s, %lld blocks, nw %d na %d, (%d, %d)", level, (long long)nblk, nw, na, j, i);
                    check_result(t, n, wq + (size_t)i * ws, aq + (size_t)j * as, got, ctx);
                    (*checked)++;
                }
        }
    }
    free(panel), free(aux);
}

static void test_panel_kernels(void)
{
    enum { PR = QUANT_PANEL_ROWS, MA = QUANT_PANEL_MAX_A_ANY };
    th_rng rng = {8642};
    int checked = 0;
    bool amx_checked = false;
    for (int ti = 0; ti < N_TYPES; ti++) {
        ct_dtype t = k_types[ti], vt = quant_vec_dot_type(t);
        const int64_t nblocks[] = {1, 2, 3, 8, 9}; /* odd and even counts: legacy panels pack pairs */
        for (size_t bi = 0; bi < sizeof nblocks / sizeof nblocks[0]; bi++) {
            int64_t nblk = nblocks[bi], n = nblk * ct_dtype_block_size(t);
            /* odd padding: rows only 2-byte (weights) / 4-byte (activations) aligned */
            size_t ws = ct_dtype_row_bytes(t, n) + 2, as = ct_dtype_row_bytes(vt, n) + 4;
            uint8_t *wq = malloc(ws * PR), *aq = malloc(as * MA);
            float *x = malloc(sizeof(float) * (size_t)n);
            make_weights(t, wq, ws, PR, nblk, &rng);
            for (int r = 0; r < MA; r++) {
                /* rows 2, 14, 26: every activation at +amax, so every quant is 127 (largest sums) */
                for (int64_t i = 0; i < n; i++) x[i] = r % 12 == 2 ? 3.f : normal(&rng) * (r == 1 ? 0.01f : 2.f);
                CHECK_OK(quant_quantize_row(vt, x, aq + (size_t)r * as, n));
            }
            for (int lv = 0; lv <= (int)quant_simd_detected(); lv++) {
                if (!quant_simd_supported((quant_simd)lv)) continue;
                const quant_panel_kernels *pk = quant_get_panel_at(t, (quant_simd)lv);
                if (pk) run_panel_case(t, pk, nblk, wq, ws, aq, as, quant_simd_name((quant_simd)lv), &checked);
            }
            const quant_panel_kernels *amx = quant_get_panel_amx(t);
            if (amx) run_panel_case(t, amx, nblk, wq, ws, aq, as, "amx", &checked), amx_checked = true;
            free(wq), free(aq), free(x);
        }
    }
    if (!amx_checked) fprintf(stderr, "  AMX panels not checked: no AMX-INT8 here (or CTORCH_AMX=0)\n");
    if (quant_simd_supported(QUANT_SIMD_AVX2)) CHECK(checked > 0);
    else th_skip("this CPU lacks AVX2: no panel kernels to test");
}

/* ct_linear(x [M, K], w [N, K] quantized) against dequantize(w) @ x in double. Activations
 * |x| < 1 are rounded to 8-bit blocks: each moves by at most 0.6 of a step amax/127 (half a
 * step plus the f16 rounding of the block scale, 127 * 2^-11 steps), so |error| <=
 * sum|w| * 0.6 / 127, plus f32 rounding (1e-4 at these sizes). */
static void linear_case(ct_dtype wt, int64_t M, int64_t K, int64_t N, th_rng *r)
{
    float *wf = malloc(sizeof(float) * (size_t)(N * K)), *wdq = malloc(sizeof(float) * (size_t)(N * K));
    for (int64_t i = 0; i < N * K; i++) wf[i] = (float)th_uniform(r, -1, 1) + (i % 7 == 0 ? 0.5f : 0.f);
    size_t rb = ct_dtype_row_bytes(wt, K);
    char *wq = malloc(rb * (size_t)N);
    for (int64_t n = 0; n < N; n++) {
        CHECK_OK(quant_quantize_row(wt, wf + n * K, wq + (size_t)n * rb, K));
        CHECK_OK(quant_dequantize_row(wt, wq + (size_t)n * rb, wdq + n * K, K));
    }
    int64_t sw[2] = {N, K}, sx[2] = {M, K}, sb[1] = {N};
    ct_tensor *w = NULL, *y = NULL, *bias = th_random(r, 1, sb, CT_F32, -1, 1), *x = th_random(r, 2, sx, CT_F32, -1, 1);
    CHECK_OK(ct_tensor_from_data(2, sw, wt, wq, &w));
    CHECK_OK(ct_linear(x, w, bias, &y));
    if (y) {
        double *xv = th_values(x), *yv = th_values(y), *bv = th_values(bias);
        double worst = 0;
        for (int64_t m = 0; m < M; m++)
            for (int64_t n = 0; n < N; n++) {
                double s = bv[n], sabs = 0;
                for (int64_t k = 0; k < K; k++) s += xv[m * K + k] * wdq[n * K + k], sabs += fabs(wdq[n * K + k]);
                double e = fabs(yv[m * N + n] - s) / (sabs * 0.6 / 127 + 1e-4);
                if (e > worst) worst = e;
            }
        CHECK_MSG(worst <= 1.0, "%s linear M=%lld K=%lld N=%lld at %s: error %.3g of the bound", ct_dtype_name(wt),
                  (long long)M, (long long)K, (long long)N, quant_simd_name(quant_simd_level()), worst);
        free(xv), free(yv), free(bv);
    }
    ct_tensor_free(w), ct_tensor_free(y), ct_tensor_free(bias), ct_tensor_free(x);
    free(wf), free(wdq), free(wq);
}

static void test_linear_prompt(void)
{
    th_rng r = {97};
    quant_simd start = quant_simd_level(), top = quant_simd_detected();
    for (int lv = 0; lv <= (int)top; lv++) {
        if (!quant_simd_supported((quant_simd)lv)) continue;
        CHECK_OK(quant_set_simd_level((quant_simd)lv));
        for (int ti = 0; ti < N_TYPES; ti++) {
            int64_t bs = ct_dtype_block_size(k_types[ti]);
            /* odd block count, a partial panel, a partial group of activation rows */
            linear_case(k_types[ti], 13, 3 * bs, 37, &r);
            /* several full panels and two threads' worth of work */
            linear_case(k_types[ti], 33, bs == 32 ? 640 : 768, 64, &r);
        }
    }
    CHECK_OK(quant_set_simd_level(start));
}

/* What the AMX tiles would compute from a packed Q4_K / Q5_K / Q6_K panel (the layout in
 * src/quant/quant_panel_amx.c): per 256-element block, 64 rows of signed hi bytes then 64 of
 * unsigned lo bytes, row 16c + j holding quants 64c + 4j .. +3 of each weight row i at bytes
 * 4i .. 4i + 3, then the 16 rows' d in f32; Q4_K / Q5_K add 16 f32 dmin and four vectors of
 * (m_2p, m_2p+1) int16 pairs. Result for weight row i against activation row a, in double. */
static double amx_emulate(ct_dtype t, const uint8_t *panel, size_t bb, int64_t nblk, int i, const uint8_t *a)
{
    enum { TERM = 64 * 64 };
    double s = 0;
    for (int64_t b = 0; b < nblk; b++) {
        const uint8_t *pq = panel + (size_t)b * bb;
        const blk_q8_k *ab = (const blk_q8_k *)a + b;
        int64_t isum = 0;
        for (int k = 0; k < 256; k++) {
            size_t at = (size_t)(16 * (k / 64) + (k % 64) / 4) * 64 + 4 * (size_t)i + (size_t)(k % 4);
            isum += (int64_t)ab->qs[k] * (64 * (int8_t)pq[at] + pq[TERM + at]);
        }
        float d[32]; /* d, then (Q4_K / Q5_K) dmin */
        memcpy(d, pq + 2 * TERM, (t == CT_Q6_K ? 16 : 32) * sizeof(float));
        double blk = (double)d[i] * (double)isum;
        if (t != CT_Q6_K) {
            int64_t msum = 0;
            for (int p = 0; p < 4; p++) {
                int16_t pair[2];
                memcpy(pair, pq + 2 * TERM + 128 + (size_t)(16 * p + i) * 4, 4);
                msum += (int64_t)pair[0] * (ab->bsums[4 * p] + ab->bsums[4 * p + 1]) +
                        (int64_t)pair[1] * (ab->bsums[4 * p + 2] + ab->bsums[4 * p + 3]);
            }
            blk -= (double)d[16 + i] * (double)msum;
        }
        s += (double)ab->d * blk;
    }
    return s;
}

/* What the tiles compute from a packed 32-element panel (Q4_0, Q5_0, Q8_0, Q4_1, Q5_1; the
 * AVX-512 VNNI panel's layout, quant_panel_amx.c): per block 8 rows of 64 bytes, row t holding
 * quants 4t..4t+3 of weight row i at bytes 4i..4i+3 (signed where the format has a zero
 * point, unsigned with a min after the 16 d's otherwise), then the rows' d and m in f32. */
static double amx_emulate_32(ct_dtype t, const uint8_t *panel, size_t bb, int64_t nblk, int i, const uint8_t *a)
{
    bool one = t == CT_Q4_1 || t == CT_Q5_1;
    size_t as = one ? sizeof(blk_q8_1) : sizeof(blk_q8_0), qo = one ? offsetof(blk_q8_1, qs) : offsetof(blk_q8_0, qs);
    double s = 0;
    for (int64_t b = 0; b < nblk; b++) {
        const uint8_t *pq = panel + (size_t)b * bb, *ab = a + (size_t)b * as;
        const int8_t *aq = (const int8_t *)(ab + qo);
        int64_t isum = 0, asum = 0;
        for (int k = 0; k < 32; k++) {
            uint8_t w = pq[(size_t)(k / 4) * 64 + 4 * (size_t)i + (size_t)(k % 4)];
            isum += (int64_t)aq[k] * (one ? (int64_t)w : (int64_t)(int8_t)w);
            asum += aq[k];
        }
        float d[32];
        memcpy(d, pq + 8 * 64, (one ? 32 : 16) * sizeof(float));
        double da = f16_at(ab);
        s += (double)d[i] * da * (double)isum + (one ? (double)d[16 + i] * da * (double)asum : 0.0);
    }
    return s;
}

/* The AMX panels' layout where the tiles cannot run (the packer needs AVX-512 VNNI only):
 * every result the tile products would give, emulated from the packed bytes, against the
 * scalar dot and a double reference; weight rows past nw pack to zero. The tile products
 * themselves are checked by test_panel_kernels on CPUs with AMX. */
static void test_amx_layout(void)
{
    const ct_dtype types[] = {CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_Q4_0, CT_Q5_0, CT_Q8_0, CT_Q4_1, CT_Q5_1};
    enum { NT = sizeof types / sizeof types[0] };
    th_rng rng = {97531};
    enum { PR = QUANT_PANEL_ROWS, NA = 3 };
    int checked = 0;
    for (int ti = 0; ti < NT; ti++) {
        ct_dtype t = types[ti], vt = quant_vec_dot_type(t);
        bool k = ct_dtype_block_size(t) == 256;
        size_t bb = 0;
        quant_panel_pack_fn pack = quant_get_amx_packer(t, &bb);
        if (!pack) continue;
        for (int64_t nblk = 1; nblk <= 3; nblk += 2) {
            int64_t n = nblk * ct_dtype_block_size(t);
            size_t ws = ct_dtype_row_bytes(t, n) + 2, as = ct_dtype_row_bytes(vt, n);
            uint8_t *wq = malloc(ws * PR), *aq = malloc(as * NA), *panel = aligned_alloc(64, bb * (size_t)nblk);
            float *x = malloc(sizeof(float) * (size_t)n);
            make_weights(t, wq, ws, PR, nblk, &rng);
            for (int r = 0; r < NA; r++) {
                for (int64_t k = 0; k < n; k++) x[k] = r == 2 ? 3.f : normal(&rng);
                CHECK_OK(quant_quantize_row(vt, x, aq + (size_t)r * as, n));
            }
            for (int nw = PR; nw >= 5; nw -= 11) {
                memset(panel, 0xA5, bb * (size_t)nblk);
                pack(wq, ws, nw, n, panel);
                for (int i = 0; i < PR; i++)
                    for (int r = 0; r < NA; r++) {
                        double got = k ? amx_emulate(t, panel, bb, nblk, i, aq + (size_t)r * as)
                                       : amx_emulate_32(t, panel, bb, nblk, i, aq + (size_t)r * as);
                        if (i >= nw) {
                            CHECK_MSG(got == 0.0, "%s AMX panel: row %d past nw %d packs to %g", ct_dtype_name(t), i, nw, got);
                            continue;
                        }
                        char ctx[96];
                        snprintf(ctx, sizeof ctx, "AMX layout, %lld blocks, nw %d, (%d, %d)", (long long)nblk, nw, r, i);
                        check_result(t, n, wq + (size_t)i * ws, aq + (size_t)r * as, (float)got, ctx);
                        checked++;
                    }
            }
            free(wq), free(aq), free(panel), free(x);
        }
    }
    if (!quant_simd_supported(QUANT_SIMD_AVX512_VNNI)) th_skip("this CPU lacks AVX-512 VNNI: the AMX packers do not run");
    else CHECK(checked == NT * 2 * (PR + 5) * NA);
}

int main(void)
{
    RUN(test_registered);
    RUN(test_panel_kernels);
    RUN(test_amx_layout);
    RUN(test_linear_prompt);
    return th_finish();
}
