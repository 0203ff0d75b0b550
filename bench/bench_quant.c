/* Throughput of the GGUF block formats (src/quant), single thread:
 *   vec dot: GB/s of weight bytes read, one 4096-element activation row against a
 *            4096 x 4096 weight (the inner loop of LLM decode), at every SIMD level;
 *   quantize: M elements/s of the reference quantizers (and of the activation formats).
 * Usage: bench_quant [types...]   e.g. bench_quant q4_k q6_k q8_0 (default: all) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    for (int lv = 0; lv <= (int)quant_simd_detected(); lv++) {
        quant_vec_dot_fn fn = quant_get_vec_dot_at(t, (quant_simd)lv);
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

int main(int argc, char **argv)
{
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
        }
    } else {
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) bench_type(all[i]);
    }
    return 0;
}
