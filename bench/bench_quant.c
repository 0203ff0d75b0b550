/* Throughput of the GGUF block formats (src/quant), single thread:
 *   vec dot: GB/s of weight bytes read, one 4096-element activation row against a
 *            4096 x 4096 weight (the inner loop of LLM decode), at every SIMD level;
 *   quantize: M elements/s of the reference quantizers (and of the activation formats).
 *   gemm: the prefill tile loop (QUANT_MBLOCK-style: 16 activation rows x 32 weight rows,
 *         K = 2048) with the multi-row dot against one single-row dot per output;
 *   linear (--linear [threads]): ct_linear of x [128, K] with a TinyLlama-shaped weight,
 *         as tokens/s of a 128-token prefill, through the public API;
 *   panels (--panels [types...]): the prefill of one weight matrix by 128 activation rows,
 *         single thread, A/B in one run: the row-dot tile loop linear.c falls back to
 *         (16 x 32 tiles, multi-row dots where the type has them) against the packed panels
 *         (activation sums, pack 16 rows, gemm 4 activation rows at a time), and where the
 *         level keeps t repacked at load, the kept panels (gemm only: packed once); medians
 *         of alternating runs.
 * Usage: bench_quant [types...]   e.g. bench_quant q4_k q6_k q8_0 (default: all)
 *        bench_quant --linear [threads] (default 2)
 *        bench_quant --panels [types...] (default: every type with panels) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch/ctorch.h"
#include "quant/quant.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float rnd_normal(void)
{
    double u[2];
    for (int k = 0; k < 2; k++) {
        g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
        u[k] = ((double)(g_rng >> 11) + 0.5) / 9007199254740992.0;
    }
    return (float)(sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]));
}

enum { ROWS = 4096, COLS = 4096, DISTINCT = 64 };

static void bench_type(ct_dtype t)
{
    size_t rb = ct_dtype_row_bytes(t, COLS);
    ct_dtype vt = quant_vec_dot_type(t);
    uint8_t *w = aligned_alloc(64, rb * ROWS);
    uint8_t *aq = aligned_alloc(64, (ct_dtype_row_bytes(vt, COLS) + 63) / 64 * 64);
    float *x = malloc(sizeof(float) * COLS);
    if (!w || !aq || !x) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    /* quantize DISTINCT rows (the reference quantizers are slow), copy them over the rest:
     * the dot reads every byte regardless of the values */
    double tq = 0;
    for (int r = 0; r < DISTINCT; r++) {
        for (int i = 0; i < COLS; i++) x[i] = rnd_normal() * 0.02f;
        double t0 = now_s();
        if (quant_quantize_row(t, x, w + rb * r, COLS) != CT_OK) {
            fprintf(stderr, "quantize %s: %s\n", ct_dtype_name(t), ct_last_error());
            exit(1);
        }
        tq += now_s() - t0;
    }
    for (int r = DISTINCT; r < ROWS; r++) memcpy(w + rb * r, w + rb * (r % DISTINCT), rb);
    for (int i = 0; i < COLS; i++) x[i] = rnd_normal();
    double ta = now_s();
    int act_reps = 200;
    for (int k = 0; k < act_reps; k++) quant_quantize_row(vt, x, aq, COLS);
    ta = (now_s() - ta) / act_reps;

    printf("%-5s %5zu B/row  quantize %7.1f Melem/s  act(%s) %7.1f Melem/s |", ct_dtype_name(t), rb,
           DISTINCT * (double)COLS / tq * 1e-6, ct_dtype_name(vt), COLS / ta * 1e-6);
    for (int lv = 0; lv < QUANT_SIMD_COUNT; lv++) {
        quant_vec_dot_fn fn = quant_get_vec_dot_at(t, (quant_simd)lv);
        if (!fn) continue; /* the CPU lacks this level */
        double best = 1e30;
        volatile float sink = 0;
        int reps = lv == 0 ? 2 : 8;
        for (int rep = 0; rep < reps; rep++) {
            double t0 = now_s();
            float s, tot = 0;
            for (int r = 0; r < ROWS; r++) {
                fn(COLS, &s, w + rb * r, aq);
                tot += s;
            }
            double dt = now_s() - t0;
            sink += tot;
            if (dt < best) best = dt;
        }
        (void)sink;
        printf(" %s %6.1f GB/s", quant_simd_name((quant_simd)lv), (double)rb * ROWS / best * 1e-9);
    }
    printf("\n");
    free(w), free(aq), free(x);
}

/* The prefill tile loop over an [GN, GK] weight and GM activation rows, single thread. */
enum { GM = 128, GN = 512, GK = 2048, TM = 16, TN = 32 };

static void bench_gemm(ct_dtype t)
{
    quant_vec_dot_nr_fn nr = quant_get_vec_dot_nr(t);
    quant_vec_dot_fn dot = quant_get_vec_dot(t);
    if (!nr) return;
    ct_dtype vt = quant_vec_dot_type(t);
    size_t wb = ct_dtype_row_bytes(t, GK), ab = ct_dtype_row_bytes(vt, GK);
    uint8_t *w = aligned_alloc(64, (wb * GN + 63) / 64 * 64), *a = aligned_alloc(64, (ab * GM + 63) / 64 * 64);
    float *x = malloc(sizeof(float) * GK), *out = malloc(sizeof(float) * GM * GN);
    if (!w || !a || !x || !out) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int r = 0; r < GN; r++) {
        for (int i = 0; i < GK; i++) x[i] = rnd_normal() * 0.02f;
        if (r < 8) quant_quantize_row(t, x, w + wb * r, GK);
        else memcpy(w + wb * r, w + wb * (r % 8), wb);
    }
    for (int r = 0; r < GM; r++) {
        for (int i = 0; i < GK; i++) x[i] = rnd_normal();
        quant_quantize_row(vt, x, a + ab * r, GK);
    }
    double best[2] = {1e30, 1e30};
    for (int rep = 0; rep < 6; rep++)
        for (int v = 0; v < 2; v++) {
            double t0 = now_s();
            for (int m0 = 0; m0 < GM; m0 += TM)
                for (int n0 = 0; n0 < GN; n0 += TN) {
                    if (v) {
                        for (int n = n0; n < n0 + TN; n += QUANT_NR_MAX_W)
                            for (int m = m0; m < m0 + TM; m += QUANT_NR_MAX_A)
                                nr(GK, out + m * GN + n, GN, w + wb * n, wb, QUANT_NR_MAX_W, a + ab * m, ab,
                                   QUANT_NR_MAX_A);
                    } else {
                        for (int n = n0; n < n0 + TN; n++)
                            for (int m = m0; m < m0 + TM; m++) dot(GK, out + m * GN + n, w + wb * n, a + ab * m);
                    }
                }
            double dt = now_s() - t0;
            if (dt < best[v]) best[v] = dt;
        }
    double flop = 2.0 * GM * GN * GK;
    printf("gemm  %-5s %dx%dx%d tiles %dx%d, 1 thread: single dot %6.1f GFLOP/s, multi-row %6.1f GFLOP/s (x%.2f)\n",
           ct_dtype_name(t), GM, GN, GK, TM, TN, flop / best[0] * 1e-9, flop / best[1] * 1e-9, best[0] / best[1]);
    free(w), free(a), free(x), free(out);
}

/* ct_linear of a 128-token prefill through the public API. */
static int bench_linear(ct_dtype t, int64_t N, int64_t K)
{
    enum { M = 128 };
    size_t wb = ct_dtype_row_bytes(t, K);
    uint8_t *wq = malloc(wb * (size_t)N);
    float *xs = malloc(sizeof(float) * (size_t)(M * K));
    if (!wq || !xs) return 1;
    for (int64_t r = 0; r < N; r++) {
        if (r < 16) {
            for (int64_t i = 0; i < K; i++) xs[i] = rnd_normal() * 0.02f;
            quant_quantize_row(t, xs, wq + wb * (size_t)r, K);
        } else {
            memcpy(wq + wb * (size_t)r, wq + wb * (size_t)(r % 16), wb);
        }
    }
    for (int64_t i = 0; i < M * K; i++) xs[i] = rnd_normal();
    ct_tensor *w = NULL, *x = NULL;
    int64_t ws[2] = {N, K}, xsh[2] = {M, K};
    if (ct_tensor_from_data(2, ws, t, wq, &w) != CT_OK || ct_tensor_from_data(2, xsh, CT_F32, xs, &x) != CT_OK) {
        fprintf(stderr, "linear %s: %s\n", ct_dtype_name(t), ct_last_error());
        return 1;
    }
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        ct_tensor *y = NULL;
        double t0 = now_s();
        if (ct_linear(x, w, NULL, &y) != CT_OK) {
            fprintf(stderr, "linear %s: %s\n", ct_dtype_name(t), ct_last_error());
            return 1;
        }
        const void *p;
        ct_tensor_data(y, &p); /* waits for the result */
        double dt = now_s() - t0;
        ct_tensor_free(y);
        if (dt < best) best = dt;
    }
    printf("linear %-5s x [%d, %lld] w [%lld, %lld], %d threads: %8.2f ms  %7.1f tok/s  %6.1f GFLOP/s\n",
           ct_dtype_name(t), M, (long long)K, (long long)N, (long long)K, ct_get_num_threads(), best * 1e3, M / best,
           2.0 * M * (double)N * (double)K / best * 1e-9);
    ct_tensor_free(w), ct_tensor_free(x);
    free(wq), free(xs);
    return 0;
}

/* One prefill of w [N, K] by a [PM, K] (quantized activations), single thread. */
enum { PM = 128, PREPS = 9 };

static void prefill_rowdots(ct_dtype t, const uint8_t *w, size_t wb, const uint8_t *a, size_t ab, int64_t N, int64_t K,
                            float *out)
{
    quant_vec_dot_nr_fn nr = quant_get_vec_dot_nr(t);
    quant_vec_dot_fn dot = quant_get_vec_dot(t);
    for (int64_t m0 = 0; m0 < PM; m0 += TM)
        for (int64_t n0 = 0; n0 < N; n0 += TN) {
            int64_t n1 = n0 + TN < N ? n0 + TN : N;
            for (int64_t n = n0; n < n1; n += nr ? QUANT_NR_MAX_W : 1)
                for (int64_t m = m0; m < m0 + TM; m += nr ? QUANT_NR_MAX_A : 1) {
                    int nw = (int)(n1 - n < QUANT_NR_MAX_W ? n1 - n : QUANT_NR_MAX_W);
                    if (nr) nr(K, out + m * N + n, (size_t)N, w + wb * n, wb, nw, a + ab * m, ab, QUANT_NR_MAX_A);
                    else dot(K, out + m * N + n, w + wb * n, a + ab * m);
                }
        }
}

/* Per-call panels: each 16-row panel packed into `panel`, then multiplied. kept (the panels
 * packed once when the weight is placed, panel after panel): only the gemm is timed. */
static void prefill_panels(const quant_panel_kernels *pk, const uint8_t *w, size_t wb, const uint8_t *a, size_t ab,
                           int64_t N, int64_t K, int64_t bs, void *panel, const uint8_t *kept, float *aux, float *out)
{
    size_t auxrow = (size_t)(K / bs) * (size_t)pk->aux_n, pb = (size_t)(K / bs) * pk->block_bytes;
    for (int m = 0; m < PM; m++) pk->act_aux(a + ab * m, K, aux + auxrow * m);
    for (int64_t n0 = 0; n0 < N; n0 += QUANT_PANEL_ROWS) {
        int nw = (int)(N - n0 < QUANT_PANEL_ROWS ? N - n0 : QUANT_PANEL_ROWS);
        const void *pp = kept ? kept + pb * (size_t)(n0 / QUANT_PANEL_ROWS) : panel;
        if (!kept) pk->pack(w + wb * n0, wb, nw, K, panel);
        int step = quant_panel_max_a(pk);
        for (int m = 0; m < PM; m += step)
            pk->gemm(K, pp, a + ab * m, ab, aux + auxrow * m, auxrow, step, out + m * N + n0, (size_t)N, nw);
    }
}

static int cmp_double(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int bench_panel(ct_dtype t, int64_t N, int64_t K)
{
    const quant_panel_kernels *pk = quant_get_panel(t), *rk = quant_get_repack(t);
    if (!pk) {
        printf("panels %-5s: none at %s\n", ct_dtype_name(t), quant_simd_name(quant_simd_level()));
        return 0;
    }
    ct_dtype vt = quant_vec_dot_type(t);
    int64_t bs = ct_dtype_block_size(t);
    size_t wb = ct_dtype_row_bytes(t, K), ab = ct_dtype_row_bytes(vt, K);
    uint8_t *w = malloc(wb * (size_t)N), *a = malloc(ab * PM);
    float *x = malloc(sizeof(float) * (size_t)K), *out = malloc(sizeof(float) * (size_t)(PM * N));
    int aux_n = rk && rk->aux_n > pk->aux_n ? rk->aux_n : pk->aux_n;
    /* AMX tiles read the aux rows as 64-byte lines */
    float *aux = aligned_alloc(64, (sizeof(float) * (size_t)(PM * (K / bs) * aux_n) + 63) & ~(size_t)63);
    void *panel = aligned_alloc(64, ((size_t)(K / bs) * pk->block_bytes + 63) & ~(size_t)63);
    size_t kept_pb = rk ? (size_t)(K / bs) * rk->block_bytes : 0, np = (size_t)((N + QUANT_PANEL_ROWS - 1) / QUANT_PANEL_ROWS);
    uint8_t *kept = rk ? aligned_alloc(64, (kept_pb * np + 63) & ~(size_t)63) : NULL;
    if (!w || !a || !x || !out || !aux || !panel || (rk && !kept)) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (int64_t r = 0; r < N; r++) {
        if (r < 16) {
            for (int64_t i = 0; i < K; i++) x[i] = rnd_normal() * 0.02f;
            quant_quantize_row(t, x, w + wb * (size_t)r, K);
        } else {
            memcpy(w + wb * (size_t)r, w + wb * (size_t)(r % 16), wb);
        }
    }
    for (int m = 0; m < PM; m++) {
        for (int64_t i = 0; i < K; i++) x[i] = rnd_normal();
        quant_quantize_row(vt, x, a + ab * m, K);
    }
    for (size_t p = 0; rk && p < np; p++) {
        int64_t n0 = (int64_t)p * QUANT_PANEL_ROWS;
        rk->pack(w + wb * (size_t)n0, wb, (int)(N - n0 < QUANT_PANEL_ROWS ? N - n0 : QUANT_PANEL_ROWS), K, kept + kept_pb * p);
    }
    double tv[4][PREPS] = {{0}};
    for (int rep = 0; rep < PREPS; rep++)
        for (int v = 0; v < 4; v++) {
            if (v == 2 && !rk) continue;
            double t0 = now_s();
            if (v == 3) /* the packing alone, the per-call panels' share */
                for (int64_t n0 = 0; n0 < N; n0 += QUANT_PANEL_ROWS)
                    pk->pack(w + wb * n0, wb, (int)(N - n0 < QUANT_PANEL_ROWS ? N - n0 : QUANT_PANEL_ROWS), K, panel);
            else if (v == 2) prefill_panels(rk, w, wb, a, ab, N, K, bs, NULL, kept, aux, out);
            else if (v) prefill_panels(pk, w, wb, a, ab, N, K, bs, panel, NULL, aux, out);
            else prefill_rowdots(t, w, wb, a, ab, N, K, out);
            tv[v][rep] = now_s() - t0;
        }
    for (int v = 0; v < 4; v++) qsort(tv[v], PREPS, sizeof(double), cmp_double);
    double flop = 2.0 * PM * (double)N * (double)K, r0 = tv[0][PREPS / 2], r1 = tv[1][PREPS / 2], r2 = tv[2][PREPS / 2];
    printf("panels %-5s x [%d, %lld] w [%lld, %lld], 1 thread, median of %d: row dots %7.2f ms %6.1f GFLOP/s | "
           "panels %7.2f ms %6.1f GFLOP/s (packing %.2f ms) | x%.2f",
           ct_dtype_name(t), PM, (long long)K, (long long)N, (long long)K, PREPS, r0 * 1e3, flop / r0 * 1e-9, r1 * 1e3,
           flop / r1 * 1e-9, tv[3][PREPS / 2] * 1e3, r0 / r1);
    if (rk) printf(" | kept %7.2f ms %6.1f GFLOP/s", r2 * 1e3, flop / r2 * 1e-9);
    printf("\n");
    free(w), free(a), free(x), free(out), free(aux), free(panel), free(kept);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--panels") == 0) {
        static const ct_dtype def[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K};
        int rc = 0, nt = argc > 2 ? argc - 2 : (int)(sizeof def / sizeof def[0]);
        for (int i = 0; i < nt; i++) {
            ct_dtype t = def[i];
            if (argc > 2 && (ct_dtype_from_name(argv[i + 2], &t) != CT_OK || !ct_dtype_is_quantized(t))) {
                fprintf(stderr, "not a block format: %s\n", argv[i + 2]);
                return 2;
            }
            /* a Gemma 3 270M FFN matrix (K = 640, not a multiple of 256), TinyLlama's q/o and its
             * down projection (K = 5632: a panel of 16 rows no longer fits L1) */
            if (ct_dtype_block_size(t) == 32) rc |= bench_panel(t, 2048, 640);
            rc |= bench_panel(t, 2048, 2048);
            rc |= bench_panel(t, 2048, 5632);
        }
        return rc;
    }
    if (argc > 1 && strcmp(argv[1], "--linear") == 0) {
        ct_set_num_threads(argc > 2 ? atoi(argv[2]) : 2);
        int rc = bench_linear(CT_Q4_K, 5632, 2048);
        rc |= bench_linear(CT_Q5_K, 5632, 2048); /* Q5_K_M's gate/up/q/k/o; its down and v are Q6_K */
        rc |= bench_linear(CT_Q6_K, 2048, 5632);
        rc |= bench_linear(CT_Q6_K, 5632, 2048);
        rc |= bench_linear(CT_Q8_0, 2048, 5632);
        rc |= bench_linear(CT_Q8_0, 5632, 2048);
        rc |= bench_linear(CT_Q4_1, 5632, 2048);
        rc |= bench_linear(CT_Q5_0, 5632, 2048);
        rc |= bench_linear(CT_Q5_1, 5632, 2048);
        rc |= bench_linear(CT_Q2_K, 5632, 2048);
        rc |= bench_linear(CT_Q3_K, 5632, 2048);
        return rc;
    }
    static const ct_dtype all[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q8_1,
                                   CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_Q8_K};
    printf("vec dot: one %d-element activation row against a %d x %d weight, single thread, best of runs\n", COLS,
           ROWS, COLS);
    printf("detected SIMD level: %s\n", quant_simd_name(quant_simd_detected()));
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            ct_dtype t;
            if (ct_dtype_from_name(argv[i], &t) != CT_OK || !ct_dtype_is_quantized(t)) {
                fprintf(stderr, "not a block format: %s\n", argv[i]);
                return 2;
            }
            bench_type(t);
            bench_gemm(t);
        }
    } else {
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) bench_type(all[i]);
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) bench_gemm(all[i]);
    }
    return 0;
}
