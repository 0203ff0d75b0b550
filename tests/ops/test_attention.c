/* ROPE and SDPA against double-precision references. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "harness.h"

/* ---- ROPE ---- */

static void rope_ref(const double *x, const double *pos, int64_t outer, int64_t T, int64_t H, int64_t D, int n_dims,
                     double base, double scale, bool neox, double *y)
{
    int half = n_dims / 2;
    for (int64_t o = 0; o < outer; o++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < H; h++) {
                const double *xr = x + ((o * T + t) * H + h) * D;
                double *yr = y + ((o * T + t) * H + h) * D;
                memcpy(yr, xr, sizeof(double) * (size_t)D);
                for (int i = 0; i < half; i++) {
                    double th = pos[t] * scale * pow(base, -2.0 * i / n_dims);
                    int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
                    yr[i0] = xr[i0] * cos(th) - xr[i1] * sin(th);
                    yr[i1] = xr[i0] * sin(th) + xr[i1] * cos(th);
                }
            }
}

static void test_rope(void)
{
    th_rng r = {201};
    struct {
        int64_t B, T, H, D;
        int n_dims;
        double base, scale;
    } cases[] = {
        {1, 5, 3, 8, 8, 10000, 1},  {2, 4, 2, 12, 8, 10000, 0.25}, /* n_dims < D */
        {1, 1, 4, 64, 64, 500000, 1}, {1, 3, 1, 6, 2, 100, 1},     {1, 0, 2, 4, 4, 10000, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++)
        for (int mode = 0; mode < 2; mode++)
            for (int layout = 0; layout < 3; layout++) {
                int64_t B = cases[ci].B, T = cases[ci].T, H = cases[ci].H, D = cases[ci].D;
                ct_dtype dt = layout == 2 ? CT_F16 : CT_F32;
                ct_tensor *x = NULL, *y = NULL, *pos = NULL;
                if (layout == 1) { /* [B, H, T, D] storage permuted to [B, T, H, D] */
                    ct_tensor *base = th_random(&r, 4, (int64_t[]){B, H, T, D}, dt, -1, 1);
                    CHECK_OK(ct_permute(base, (int[]){0, 2, 1, 3}, &x));
                    ct_tensor_free(base);
                } else {
                    x = th_random(&r, 4, (int64_t[]){B, T, H, D}, dt, -1, 1);
                }
                int64_t pv64[8];
                int32_t pv32[8];
                for (int64_t t = 0; t < T; t++) pv64[t] = (t * 37 + 5) % 4099, pv32[t] = (int32_t)pv64[t];
                CHECK_OK(ct_tensor_from_data(1, &T, layout ? CT_I32 : CT_I64, layout ? (void *)pv32 : (void *)pv64, &pos));
                ct_rope_params p = {cases[ci].n_dims, cases[ci].base, cases[ci].scale, mode ? CT_ROPE_NEOX : CT_ROPE_NORMAL};
                CHECK_OK(ct_rope(x, pos, &p, &y));
                if (!y) continue;
                CHECK(ct_tensor_dtype(y) == dt);
                int64_t n = B * T * H * D;
                double *xv = th_values(x), *yv = th_values(y), *want = malloc(sizeof(double) * (size_t)(n + 1)), pd[8];
                for (int64_t t = 0; t < T; t++) pd[t] = (double)pv64[t];
                rope_ref(xv, pd, B, T, H, D, p.n_dims, p.freq_base, p.freq_scale, mode, want);
                /* f32: cos/sin rounded once plus two products and a sum; f16 output: 2^-11 relative */
                double tol = dt == CT_F16 ? 2e-3 : 1e-6;
                CHECK_MSG(th_allclose(yv, want, n, tol, tol), "case %zu mode %d layout %d", ci, mode, layout);
                free(xv), free(yv), free(want);
                ct_tensor_free(x), ct_tensor_free(y), ct_tensor_free(pos);
            }
}

/* The CPU keeps the angle table of its last rope: a run of ropes on one shape where the
 * positions, base, scale or rotated dims change one at a time (and repeat) must each
 * match the reference, never a stale table. */
static void test_rope_kept_table(void)
{
    th_rng r = {203};
    int64_t T = 16, H = 2, D = 8, n = T * H * D;
    ct_tensor *x = th_random(&r, 4, (int64_t[]){1, T, H, D}, CT_F32, -1, 1);
    double *xv = th_values(x), *want = malloc(sizeof(double) * (size_t)n);
    struct {
        int shift, n_dims;
        double base, scale;
    } seq[] = {{0, 8, 10000, 1}, {0, 8, 10000, 1}, {1, 8, 10000, 1}, {1, 8, 500, 1}, {1, 8, 500, 0.5},
               {1, 4, 500, 0.5}, {0, 8, 10000, 1}, {7, 8, 10000, 1}};
    for (size_t si = 0; si < sizeof seq / sizeof seq[0]; si++) {
        int32_t pv[16];
        double pd[16];
        /* shift 1 changes one position only: the table must be rebuilt for a single change */
        for (int64_t t = 0; t < T; t++) pv[t] = (int32_t)(t + (seq[si].shift == 1 && t == 9 ? 100 : seq[si].shift)), pd[t] = pv[t];
        ct_tensor *pos = NULL, *y = NULL;
        CHECK_OK(ct_tensor_from_data(1, &T, CT_I32, pv, &pos));
        ct_rope_params p = {seq[si].n_dims, seq[si].base, seq[si].scale, CT_ROPE_NORMAL};
        CHECK_OK(ct_rope(x, pos, &p, &y));
        double *yv = th_values(y);
        rope_ref(xv, pd, 1, T, H, D, p.n_dims, p.freq_base, p.freq_scale, false, want);
        CHECK_MSG(th_allclose(yv, want, n, 1e-6, 1e-6), "step %zu", si);
        free(yv);
        ct_tensor_free(pos), ct_tensor_free(y);
    }
    free(xv), free(want);
    ct_tensor_free(x);
}

/* With 3-D x [T, H, D] and zero-default params: rotate everything with base 10000. */
static void test_rope_defaults_and_errors(void)
{
    th_rng r = {202};
    ct_tensor *x = th_random(&r, 3, (int64_t[]){2, 1, 4}, CT_F32, -1, 1), *y = NULL, *pos = NULL;
    int32_t pv[2] = {3, 0};
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){2}, CT_I32, pv, &pos));
    CHECK_OK(ct_rope(x, pos, &(ct_rope_params){0}, &y));
    double *xv = th_values(x), *yv = th_values(y), want[8], pd[2] = {3, 0};
    rope_ref(xv, pd, 1, 2, 1, 4, 4, 10000, 1, false, want);
    CHECK(th_allclose(yv, want, 8, 1e-6, 1e-6));
    free(xv), free(yv), ct_tensor_free(y);

    ct_tensor *x2 = th_random(&r, 2, (int64_t[]){2, 4}, CT_F32, -1, 1), *posf = th_random(&r, 1, (int64_t[]){2}, CT_F32, 0, 1);
    ct_tensor *pos3 = NULL;
    CHECK_OK(ct_zeros(1, (int64_t[]){3}, CT_I64, &pos3));
    CHECK_STATUS(ct_rope(x2, pos, &(ct_rope_params){4, 10000, 1, CT_ROPE_NORMAL}, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_rope(x, pos3, &(ct_rope_params){4, 10000, 1, CT_ROPE_NORMAL}, &y), CT_ERR_SHAPE);
    CHECK_STATUS(ct_rope(x, posf, &(ct_rope_params){4, 10000, 1, CT_ROPE_NORMAL}, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_rope(x, pos, &(ct_rope_params){3, 10000, 1, CT_ROPE_NORMAL}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_rope(x, pos, &(ct_rope_params){6, 10000, 1, CT_ROPE_NORMAL}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_rope(x, pos, &(ct_rope_params){4, -5, 1, CT_ROPE_NORMAL}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_rope(x, pos, &(ct_rope_params){4, 10000, 1, (ct_rope_mode)7}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_rope(x, pos, NULL, &y), CT_ERR_INVALID_ARG);
    ct_tensor_free(x), ct_tensor_free(x2), ct_tensor_free(pos), ct_tensor_free(posf), ct_tensor_free(pos3);
}

/* ---- SDPA ---- */

typedef struct sdpa_case {
    int64_t B, Hq, Hkv, Tq, Tk, D, Dv;
    bool causal;
    int window;
    int mask;       /* 0 none, 1 [Tq, Tk], 2 [B, 1, Tq, Tk] with a fully masked row */
    ct_dtype kvdt;
    int layout;     /* 0 contiguous, 1 q permuted + k/v narrowed from a longer cache */
    double scale;
} sdpa_case;

static void sdpa_ref(const sdpa_case *c, const double *q, const double *k, const double *v, const double *m,
                     double *out)
{
    int64_t G = c->Hq / c->Hkv, off = c->Tk - c->Tq;
    double scale = c->scale ? c->scale : 1 / sqrt((double)c->D);
    double *s = malloc(sizeof(double) * (size_t)(c->Tk + 1));
    for (int64_t b = 0; b < c->B; b++)
        for (int64_t h = 0; h < c->Hq; h++)
            for (int64_t i = 0; i < c->Tq; i++) {
                int64_t g = h / G;
                double mx = -INFINITY;
                for (int64_t j = 0; j < c->Tk; j++) {
                    bool ok = (!c->causal || j <= i + off) && (c->window <= 0 || j > i + off - c->window);
                    double d = 0;
                    for (int64_t e = 0; e < c->D; e++)
                        d += q[((b * c->Hq + h) * c->Tq + i) * c->D + e] * k[((b * c->Hkv + g) * c->Tk + j) * c->D + e];
                    s[j] = ok ? d * scale + (m ? m[((b * c->Hq + h) * c->Tq + i) * c->Tk + j] : 0) : -INFINITY;
                    mx = fmax(mx, s[j]);
                }
                double *o = out + ((b * c->Hq + h) * c->Tq + i) * c->Dv, l = 0;
                for (int64_t e = 0; e < c->Dv; e++) o[e] = 0;
                if (mx == -INFINITY) continue; /* fully masked: zeros */
                for (int64_t j = 0; j < c->Tk; j++) {
                    double p = exp(s[j] - mx);
                    l += p;
                    for (int64_t e = 0; e < c->Dv; e++) o[e] += p * v[((b * c->Hkv + g) * c->Tk + j) * c->Dv + e];
                }
                for (int64_t e = 0; e < c->Dv; e++) o[e] /= l;
            }
    free(s);
}

/* [B, H, T, D] tensor; layout 1 for q: permuted from [B, T, H, D]; for k/v: narrowed from Tmax = T + 7. */
static ct_tensor *sdpa_input(th_rng *r, int64_t B, int64_t H, int64_t T, int64_t D, ct_dtype dt, int layout, bool is_q)
{
    ct_tensor *base, *t = NULL;
    if (layout == 0) return th_random(r, 4, (int64_t[]){B, H, T, D}, dt, -1, 1);
    if (is_q) {
        base = th_random(r, 4, (int64_t[]){B, T, H, D}, dt, -1, 1);
        CHECK_OK(ct_permute(base, (int[]){0, 2, 1, 3}, &t));
    } else {
        base = th_random(r, 4, (int64_t[]){B, H, T + 7, D}, dt, -1, 1);
        CHECK_OK(ct_narrow(base, 2, 0, T, &t));
    }
    ct_tensor_free(base);
    return t;
}

static void run_sdpa_case(th_rng *r, const sdpa_case *c, const char *label)
{
    ct_tensor *q = sdpa_input(r, c->B, c->Hq, c->Tq, c->D, CT_F32, c->layout, true);
    ct_tensor *k = sdpa_input(r, c->B, c->Hkv, c->Tk, c->D, c->kvdt, c->layout, false);
    ct_tensor *v = sdpa_input(r, c->B, c->Hkv, c->Tk, c->Dv, c->kvdt, c->layout, false);
    ct_tensor *mask = NULL, *y = NULL;
    double *mfull = NULL;
    int64_t nfull = c->B * c->Hq * c->Tq * c->Tk;
    if (c->mask) {
        int64_t ms[4] = {c->B, 1, c->Tq, c->Tk};
        int nd = c->mask == 1 ? 2 : 4;
        mask = th_random(r, nd, c->mask == 1 ? ms + 2 : ms, CT_F32, -2, 2);
        double *mv = th_values(mask);
        int64_t nm = ct_tensor_numel(mask);
        for (int64_t i = 0; i < nm; i++)
            if (i % 5 == 1) mv[i] = -INFINITY;
        if (c->mask == 2 && c->Tq > 1)
            for (int64_t j = 0; j < c->Tk; j++) mv[1 * c->Tk + j] = -INFINITY; /* row 1 of batch 0: nothing visible */
        ct_tensor *md = NULL;
        CHECK_OK(ct_tensor_from_data(nd, c->mask == 1 ? ms + 2 : ms, CT_F64, mv, &md));
        ct_tensor_free(mask);
        CHECK_OK(ct_cast(md, CT_F32, &mask));
        ct_tensor_free(md);
        mfull = malloc(sizeof(double) * (size_t)(nfull + 1));
        for (int64_t i = 0; i < nfull; i++) {
            int64_t j = i % c->Tk, qi = (i / c->Tk) % c->Tq, b = i / (c->Tk * c->Tq * c->Hq);
            mfull[i] = c->mask == 1 ? mv[qi * c->Tk + j] : mv[(b * c->Tq + qi) * c->Tk + j];
        }
        free(mv);
    }
    ct_sdpa_params p = {.causal = c->causal, .scale = c->scale, .window = c->window};
    CHECK_OK(ct_sdpa(q, k, v, mask, &p, &y));
    if (y) {
        const int64_t *ys = ct_tensor_shape(y);
        CHECK(ys[0] == c->B && ys[1] == c->Hq && ys[2] == c->Tq && ys[3] == c->Dv && ct_tensor_dtype(y) == CT_F32);
        int64_t n = c->B * c->Hq * c->Tq * c->Dv;
        double *qv = th_values(q), *kv = th_values(k), *vv = th_values(v), *yv = th_values(y);
        double *want = malloc(sizeof(double) * (size_t)(n + 1));
        sdpa_ref(c, qv, kv, vv, mfull, want);
        /* f32 dots of <= 72 terms (scores O(5)), f32 exp and accumulation over <= 700 keys: ~1e-6 relative,
         * outputs are convex combinations of values in [-1, 1] (k/v f16 values are read back exactly) */
        CHECK_MSG(th_allclose(yv, want, n, 2e-5, 2e-5), "%s", label);
        free(qv), free(kv), free(vv), free(yv), free(want);
    }
    free(mfull);
    ct_tensor_free(q), ct_tensor_free(k), ct_tensor_free(v), ct_tensor_free(mask), ct_tensor_free(y);
}

static void test_sdpa(void)
{
    th_rng r = {301};
    sdpa_case cases[] = {
        {2, 4, 4, 5, 5, 16, 16, false, 0, 0, CT_F32, 0, 0},
        {1, 8, 2, 3, 37, 16, 16, true, 0, 0, CT_F32, 0, 0},     /* GQA, causal, Tq < Tk */
        {1, 2, 1, 40, 40, 20, 12, true, 4, 0, CT_F32, 0, 0},    /* window, several query blocks, Dv != D */
        {2, 4, 2, 6, 9, 8, 8, false, 0, 1, CT_F32, 1, 0.5},     /* 2-D mask, strided q/k/v, explicit scale */
        {2, 2, 2, 4, 300, 32, 32, true, 0, 2, CT_F16, 1, 0},    /* batch mask with a dead row, f16 cache, chunks */
        {1, 8, 2, 1, 700, 64, 64, true, 0, 0, CT_F16, 1, 0},    /* decode, split key segments */
        {2, 6, 3, 1, 513, 72, 40, false, 64, 1, CT_F32, 0, 0},  /* decode with window and mask */
        {1, 2, 2, 6, 3, 8, 8, true, 0, 0, CT_F32, 0, 0},        /* Tq > Tk: early rows see nothing */
        {1, 2, 1, 3, 0, 8, 8, false, 0, 0, CT_F32, 0, 0},       /* Tk = 0 */
        {0, 2, 1, 3, 4, 8, 8, false, 0, 0, CT_F32, 0, 0},       /* B = 0 */
        {1, 1, 1, 1, 1, 1, 1, false, 0, 0, CT_F16, 0, 0},
        /* prefill without a mask takes the tile kernels at AVX2 and AVX-512 (attention_tile*.c): partial
         * query blocks and key chunks, f16 caches, a window, Dv != D, a large scale */
        {1, 4, 2, 37, 70, 64, 64, true, 0, 0, CT_F16, 1, 0},
        {2, 2, 1, 20, 50, 16, 24, true, 7, 0, CT_F16, 0, 0},
        {1, 3, 3, 17, 17, 8, 8, false, 0, 0, CT_F32, 0, 4.0},
        {1, 2, 2, 5, 33, 256, 256, true, 0, 0, CT_F16, 0, 0},
    };
    /* the CPU's kernels at each SIMD level: on a machine with a GPU the chain would send these
     * prompts to its tensor-core attention, whose f16 rounding test_cuda_nn bounds */
    CHECK_OK(ct_exec_force_device("cpu"));
    cpu_simd hw = cpu_simd_level();
    for (int lvl = 0; lvl <= (int)hw; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
            char label[64];
            snprintf(label, sizeof label, "simd %d case %zu", lvl, ci);
            run_sdpa_case(&r, &cases[ci], label);
        }
    }
    cpu_simd_set_level(hw);
    ct_exec_force_device(NULL);
}

/* Prefill (several query rows): a NaN in one row's query gives that row NaNs and leaves the
 * others as they are, at every SIMD level (the tile kernel keeps rows in vector lanes). */
static void test_sdpa_nan_prefill(void)
{
    float qn[6] = {0.5f, 1, NAN, 1, -1, 0.25f}, kn[8] = {1, 0, 0, 1, 1, 1, -1, 2}, vn[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    cpu_simd hw = cpu_simd_level();
    for (int lvl = 0; lvl <= (int)hw; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        ct_tensor *tq = NULL, *tk = NULL, *tv = NULL, *y = NULL;
        CHECK_OK(ct_tensor_from_data(4, (int64_t[]){1, 1, 3, 2}, CT_F32, qn, &tq));
        CHECK_OK(ct_tensor_from_data(4, (int64_t[]){1, 1, 4, 2}, CT_F32, kn, &tk));
        CHECK_OK(ct_tensor_from_data(4, (int64_t[]){1, 1, 4, 2}, CT_F32, vn, &tv));
        CHECK_OK(ct_sdpa(tq, tk, tv, NULL, NULL, &y));
        for (int i = 0; i < 6 && y; i++) {
            int row = i / 2, col = i % 2;
            double o = 0, want = 0, l = 0;
            CHECK_OK(ct_tensor_item(y, i, &o));
            if (row == 1) {
                CHECK_MSG(isnan(o), "simd %d: row 1 has a NaN query but gave %g", lvl, o);
                continue;
            }
            for (int j = 0; j < 4; j++) {
                double s = exp((qn[2 * row] * kn[2 * j] + qn[2 * row + 1] * kn[2 * j + 1]) / sqrt(2.0));
                want += s * vn[2 * j + col], l += s;
            }
            CHECK_MSG(fabs(o - want / l) < 1e-5, "simd %d: row %d col %d: %g, want %g", lvl, row, col, o, want / l);
        }
        ct_tensor_free(tq), ct_tensor_free(tk), ct_tensor_free(tv), ct_tensor_free(y);
    }
    cpu_simd_set_level(hw);
}

/* q in bf16 and k/v in f64 are converted by the frontend. */
static void test_sdpa_casts(void)
{
    th_rng r = {302};
    sdpa_case c = {1, 2, 1, 3, 5, 8, 8, true, 0, 0, CT_F32, 0, 0};
    ct_tensor *q = th_random(&r, 4, (int64_t[]){1, 2, 3, 8}, CT_BF16, -1, 1);
    ct_tensor *k = th_random(&r, 4, (int64_t[]){1, 1, 5, 8}, CT_F64, -1, 1), *v = th_random(&r, 4, (int64_t[]){1, 1, 5, 8}, CT_F64, -1, 1);
    ct_tensor *y = NULL;
    CHECK_OK(ct_sdpa(q, k, v, NULL, &(ct_sdpa_params){.causal = true}, &y));
    double *qv = th_values(q), *kv = th_values(k), *vv = th_values(v), *yv = th_values(y), want[48];
    sdpa_ref(&c, qv, kv, vv, NULL, want);
    CHECK(th_allclose(yv, want, 48, 1e-5, 1e-5)); /* k/v rounded to f32 on the way in: 6e-8 relative */
    free(qv), free(kv), free(vv), free(yv);
    ct_tensor_free(q), ct_tensor_free(k), ct_tensor_free(v), ct_tensor_free(y);
    /* NaN in a score gives a NaN row, not zeros */
    float qn[2] = {NAN, 1}, kn[4] = {1, 0, 0, 1}, vn[4] = {1, 2, 3, 4};
    ct_tensor *tq = NULL, *tk = NULL, *tv = NULL;
    CHECK_OK(ct_tensor_from_data(4, (int64_t[]){1, 1, 1, 2}, CT_F32, qn, &tq));
    CHECK_OK(ct_tensor_from_data(4, (int64_t[]){1, 1, 2, 2}, CT_F32, kn, &tk));
    CHECK_OK(ct_tensor_from_data(4, (int64_t[]){1, 1, 2, 2}, CT_F32, vn, &tv));
    CHECK_OK(ct_sdpa(tq, tk, tv, NULL, NULL, &y));
    double o = 0;
    CHECK_OK(ct_tensor_item(y, 0, &o));
    CHECK(isnan(o));
    ct_tensor_free(tq), ct_tensor_free(tk), ct_tensor_free(tv), ct_tensor_free(y);
    test_sdpa_nan_prefill();
}

static void test_sdpa_errors(void)
{
    th_rng r = {303};
    ct_tensor *q = th_random(&r, 4, (int64_t[]){1, 6, 3, 8}, CT_F32, -1, 1), *y = NULL;
    ct_tensor *k = th_random(&r, 4, (int64_t[]){1, 4, 5, 8}, CT_F32, -1, 1);
    ct_tensor *k2 = th_random(&r, 4, (int64_t[]){1, 2, 5, 8}, CT_F32, -1, 1);
    ct_tensor *kd = th_random(&r, 4, (int64_t[]){1, 2, 5, 7}, CT_F32, -1, 1);
    ct_tensor *v2 = th_random(&r, 4, (int64_t[]){1, 2, 5, 8}, CT_F32, -1, 1);
    ct_tensor *v4 = th_random(&r, 4, (int64_t[]){1, 2, 4, 8}, CT_F32, -1, 1);
    ct_tensor *q3 = th_random(&r, 3, (int64_t[]){6, 3, 8}, CT_F32, -1, 1);
    ct_tensor *mbad = th_random(&r, 2, (int64_t[]){3, 4}, CT_F32, -1, 1), *qi = NULL;
    CHECK_OK(ct_zeros(4, (int64_t[]){1, 6, 3, 8}, CT_I32, &qi));
    CHECK_STATUS(ct_sdpa(q, k, k, NULL, NULL, &y), CT_ERR_SHAPE);    /* 6 % 4 != 0 */
    CHECK_STATUS(ct_sdpa(q3, k2, v2, NULL, NULL, &y), CT_ERR_SHAPE); /* rank */
    CHECK_STATUS(ct_sdpa(q, kd, v2, NULL, NULL, &y), CT_ERR_SHAPE);  /* D mismatch */
    CHECK_STATUS(ct_sdpa(q, k2, v4, NULL, NULL, &y), CT_ERR_SHAPE);  /* Tk mismatch */
    CHECK_STATUS(ct_sdpa(q, k2, v2, mbad, NULL, &y), CT_ERR_SHAPE);  /* mask does not broadcast */
    CHECK_STATUS(ct_sdpa(qi, k2, v2, NULL, NULL, &y), CT_ERR_DTYPE);
    CHECK_STATUS(ct_sdpa(q, k2, v2, NULL, &(ct_sdpa_params){.window = -1}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_sdpa(q, k2, v2, NULL, &(ct_sdpa_params){.scale = INFINITY}, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_sdpa(q, NULL, v2, NULL, NULL, &y), CT_ERR_INVALID_ARG);
    ct_tensor *all[] = {q, k, k2, kd, v2, v4, q3, mbad, qi};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

int main(void)
{
    RUN(test_rope);
    RUN(test_rope_defaults_and_errors);
    RUN(test_rope_kept_table);
    RUN(test_sdpa);
    RUN(test_sdpa_casts);
    RUN(test_sdpa_errors);
    return th_finish();
}
