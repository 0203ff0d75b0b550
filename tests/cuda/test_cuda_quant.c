/* The CUDA quant group against the CPU backend, for every block format the GPU claims:
 * dequantizing copies (f32/f16/bf16, dense, strided, broadcast, from a row view),
 * embedding from a quantized table (i32/i64 ids, strided ids), and linear with a
 * quantized weight at M = 1, 2, 7 (matrix-vector kernels) and 64 (dequantize + GEMM),
 * odd N, strided x, with a bias; and a refdata model's greedy tokens on cuda:0 vs the CPU.
 *
 * Tolerances (normalized MSE, sum (gpu - cpu)^2 / sum cpu^2):
 * - copy / embedding: both sides evaluate the same formula in f32; the GPU may fuse d*q+m
 *   into one FMA (one rounding less), so f32 outputs agree to ~1e-14; f16/bf16 outputs
 *   round the same f32 values and differ only where that last-bit difference crosses a
 *   rounding boundary. Bounds: 1e-10 (f32), 1e-6 (f16), 1e-5 (bf16).
 * - linear vs the CPU's quantized linear: the CPU quantizes x to 8 bits per 32 (Q8_0/Q8_1)
 *   or 256 (Q8_K) elements before its integer dots; the GPU's decode kernels quantize x to
 *   8 bits per 32 too (its own scales), its prefill rounds x to TF32's 11 bits. One 8-bit
 *   rounding, a step of amax/127 with amax ~ 1 (uniform x in [-1, 1)), has error variance
 *   step^2/12 = 5.2e-6 against E[x^2] = 1/3: a relative 1.6e-5 per element, and as the
 *   errors of different elements are independent the dot's NMSE is the same 1.6e-5. The
 *   CPU's and the GPU's roundings are independent, so decode differs by ~3.2e-5, prefill
 *   by ~1.6e-5. Bound 2e-4 (6x margin); a wrong scale on one 16-element group in 32
 *   already gives ~1e-2.
 * - linear vs the CPU's f32 linear of the dequantized weight (the exact product of the
 *   weight): decode quantizes x to 8 bits per 32 like the CPU (integer dots), so the same
 *   1.6e-5 and the same 2e-4 bound; prefill rounds x and the dequantized weight to TF32
 *   (2^-11 relative each, variance 2 * 2^-22 / 3 = 3e-7): bound 1e-5. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#include "llm/generate.h"
#include "quant/quant.h"

static char dev_name[32];
static const char *dev;

/* Every test looks the device up itself, so each one reports the skip when there is none. */
static bool have_dev(void)
{
    dev = devcheck_device("cuda", dev_name, sizeof dev_name);
    return dev != NULL;
}

static const ct_dtype formats[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0,
                                   CT_Q2_K, CT_Q3_K, CT_Q4_K, CT_Q5_K, CT_Q6_K};
#define N_FORMATS (int)(sizeof formats / sizeof formats[0])

/* A quantized [N, K] weight from uniform values in [-1, 1), quantized by the reference quantizer. */
static ct_tensor *quant_weight(ct_dtype t, int64_t N, int64_t K, uint64_t seed)
{
    th_rng r = {seed};
    float *f = malloc(sizeof(float) * (size_t)(N * K));
    size_t rb = ct_dtype_row_bytes(t, K);
    char *q = malloc(rb * (size_t)N);
    ct_tensor *w = NULL;
    if (f && q) {
        for (int64_t i = 0; i < N * K; i++) f[i] = (float)th_uniform(&r, -1, 1);
        for (int64_t n = 0; n < N; n++) CHECK_OK(quant_quantize_row(t, f + n * K, q + (size_t)n * rb, K));
        int64_t shape[2] = {N, K};
        CHECK_OK(ct_tensor_from_data(2, shape, t, q, &w));
    }
    free(f);
    free(q);
    return w;
}

/* ---- dequantizing copies ---- */

static ct_status fn_cast(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    return ct_cast(in[0], *(const ct_dtype *)ctx, out);
}

/* Into the transpose of a fresh [K, N] f32 tensor: a dst with column stride N. */
static ct_status fn_copy_strided(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    (void)ctx;
    const int64_t *s = ct_tensor_shape(in[0]);
    int64_t shape[2] = {s[1], s[0]};
    ct_tensor *base = NULL, *view = NULL;
    ct_status st = ct_zeros(2, shape, CT_F32, &base);
    if (st == CT_OK) st = ct_transpose(base, 0, 1, &view);
    if (st == CT_OK) st = ct_copy_(view, in[0]);
    ct_tensor_free(view);
    if (st != CT_OK) ct_tensor_free(base);
    else *out = base;
    return st;
}

/* A quantized source broadcast over a new leading dim of 3. */
static ct_status fn_copy_broadcast(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    (void)ctx;
    const int64_t *s = ct_tensor_shape(in[0]);
    int64_t shape[3] = {3, s[0], s[1]};
    ct_tensor *dst = NULL;
    ct_status st = ct_zeros(3, shape, CT_F32, &dst);
    if (st == CT_OK) st = ct_copy_(dst, in[0]);
    if (st != CT_OK) ct_tensor_free(dst);
    else *out = dst;
    return st;
}

static void test_dequantize(void)
{
    if (!have_dev()) return;
    for (int f = 0; f < N_FORMATS; f++) {
        ct_dtype t = formats[f];
        ct_tensor *w = quant_weight(t, 37, 512, 100 + (uint64_t)f), *rows = NULL;
        char what[96];
        static const ct_dtype outs[3] = {CT_F32, CT_F16, CT_BF16};
        static const double tols[3] = {1e-10, 1e-6, 1e-5};
        for (int o = 0; o < 3; o++) {
            snprintf(what, sizeof what, "%s -> %s", ct_dtype_name(t), ct_dtype_name(outs[o]));
            devcheck_op(dev, what, fn_cast, &w, 1, (void *)&outs[o], tols[o]);
        }
        snprintf(what, sizeof what, "%s -> f32 strided dst", ct_dtype_name(t));
        devcheck_op(dev, what, fn_copy_strided, &w, 1, NULL, 1e-10);
        snprintf(what, sizeof what, "%s -> f32 broadcast", ct_dtype_name(t));
        devcheck_op(dev, what, fn_copy_broadcast, &w, 1, NULL, 1e-10);
        /* rows 5..24 of the table: a view that starts inside the storage */
        CHECK_OK(ct_narrow(w, 0, 5, 20, &rows));
        snprintf(what, sizeof what, "%s rows view -> f32", ct_dtype_name(t));
        devcheck_op(dev, what, fn_cast, &rows, 1, (void *)&outs[0], 1e-10);
        ct_tensor_free(rows);
        ct_tensor_free(w);
    }
}

/* ---- embedding ---- */

static ct_status fn_embedding(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)n;
    (void)ctx;
    return ct_embedding(in[0], in[1], out);
}

static void test_embedding(void)
{
    if (!have_dev()) return;
    th_rng r = {7};
    for (int f = 0; f < N_FORMATS; f++) {
        ct_dtype t = formats[f];
        ct_tensor *w = quant_weight(t, 41, 256, 200 + (uint64_t)f);
        int32_t i32[5];
        int64_t i64[6];
        for (int i = 0; i < 5; i++) i32[i] = (int32_t)(th_uniform(&r, 0, 41));
        for (int i = 0; i < 6; i++) i64[i] = (int64_t)(th_uniform(&r, 0, 41));
        i32[0] = 40; /* the last row */
        int64_t s1[1] = {5}, s2[2] = {2, 3};
        ct_tensor *ids1 = NULL, *ids2 = NULL, *ids2t = NULL;
        CHECK_OK(ct_tensor_from_data(1, s1, CT_I32, i32, &ids1));
        CHECK_OK(ct_tensor_from_data(2, s2, CT_I64, i64, &ids2));
        CHECK_OK(ct_transpose(ids2, 0, 1, &ids2t)); /* strided ids [3, 2] */
        char what[96];
        ct_tensor *in[2] = {w, ids1};
        snprintf(what, sizeof what, "embedding %s i32", ct_dtype_name(t));
        devcheck_op(dev, what, fn_embedding, in, 2, NULL, 1e-10);
        in[1] = ids2t;
        snprintf(what, sizeof what, "embedding %s i64 strided ids", ct_dtype_name(t));
        devcheck_op(dev, what, fn_embedding, in, 2, NULL, 1e-10);
        ct_tensor_free(ids1);
        ct_tensor_free(ids2);
        ct_tensor_free(ids2t);
        ct_tensor_free(w);
    }
}

/* ---- linear ---- */

static ct_status fn_linear(ct_tensor *const *in, int n, ct_tensor **out, void *ctx)
{
    (void)ctx;
    return ct_linear(in[0], in[1], n > 2 ? in[2] : NULL, out);
}

/* The GPU's quantized linear against the CPU's f32 linear of the same weight dequantized. */
static void check_exact(const char *what, ct_tensor *x, ct_tensor *w, double tol)
{
    ct_tensor *got = NULL, *wf = NULL, *ref = NULL;
    CHECK_OK(ct_exec_force_device(dev));
    CHECK_OK(ct_linear(x, w, NULL, &got));
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_cast(w, CT_F32, &wf));
    if (wf) CHECK_OK(ct_linear(x, wf, NULL, &ref));
    CHECK_OK(ct_exec_force_device(NULL));
    if (got && ref) {
        double *g = th_values(got), *rv = th_values(ref);
        int nf = 0;
        double e = devcheck_nmse(g, rv, ct_tensor_numel(ref), &nf);
        CHECK_MSG(!nf && e <= tol, "%s vs f32 reference: NMSE %.3g > %.3g (non-finite mismatch %d)", what, e, tol, nf);
        free(g);
        free(rv);
    }
    ct_tensor_free(got);
    ct_tensor_free(wf);
    ct_tensor_free(ref);
}

static void test_linear(void)
{
    if (!have_dev()) return;
    static const int64_t Ms[] = {1, 2, 7, 64};
    const int64_t N = 131, K = 768;
    for (int f = 0; f < N_FORMATS; f++) {
        ct_dtype t = formats[f];
        ct_tensor *w = quant_weight(t, N, K, 300 + (uint64_t)f);
        th_rng r = {400 + (uint64_t)f};
        for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++) {
            int64_t M = Ms[i], sx[2] = {M, K};
            ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
            ct_tensor *in[2] = {x, w};
            char what[96];
            snprintf(what, sizeof what, "linear %s M=%lld N=%lld", ct_dtype_name(t), (long long)M, (long long)N);
            devcheck_op(dev, what, fn_linear, in, 2, NULL, 2e-4);
            check_exact(what, x, w, M <= 8 ? 2e-4 : 1e-5);
            ct_tensor_free(x);
        }
        /* x as the transpose of a [K, M] tensor (column stride M: packed first), with a bias */
        for (int j = 0; j < 2; j++) {
            int64_t M = j ? 64 : 7, sxt[2] = {K, M}, sb[1] = {N};
            ct_tensor *xt = th_random(&r, 2, sxt, CT_F32, -1, 1), *x = NULL;
            ct_tensor *b = th_random(&r, 1, sb, j ? CT_F16 : CT_F32, -1, 1);
            CHECK_OK(ct_transpose(xt, 0, 1, &x));
            ct_tensor *in[3] = {x, w, b};
            char what[96];
            snprintf(what, sizeof what, "linear %s M=%lld strided x + bias", ct_dtype_name(t), (long long)M);
            devcheck_op(dev, what, fn_linear, in, 3, NULL, 2e-4);
            ct_tensor_free(x);
            ct_tensor_free(xt);
            ct_tensor_free(b);
        }
        ct_tensor_free(w);
        /* A weight above the single-kernel size at M = 1 (the integer-dot kernels), and over
         * two prefill slices of 2048 rows at M = 9 */
        ct_tensor *wl = quant_weight(t, 2053, 2048, 500 + (uint64_t)f);
        for (int64_t M = 1; M <= 9; M += 8) {
            int64_t sx[2] = {M, 2048};
            ct_tensor *x = th_random(&r, 2, sx, CT_F32, -1, 1);
            ct_tensor *in[2] = {x, wl};
            char what[96];
            snprintf(what, sizeof what, "linear %s M=%lld N=2053 K=2048", ct_dtype_name(t), (long long)M);
            devcheck_op(dev, what, fn_linear, in, 2, NULL, 2e-4);
            check_exact(what, x, wl, M == 1 ? 2e-4 : 1e-5);
            ct_tensor_free(x);
        }
        ct_tensor_free(wl);
    }
}

/* The group claims what it can run and refuses the rest: Q8_1 (an activation format) has
 * no GPU kernel, so its dequantizing copy goes on to the CPU with the right values. */
static void test_refusals(void)
{
    if (!have_dev()) return;
    ct_tensor *w = quant_weight(CT_Q8_1, 4, 64, 9), *out = NULL, *ref = NULL;
    char chain[64];
    snprintf(chain, sizeof chain, "%s,cpu", dev);
    CHECK_OK(ct_exec_set_devices(chain));
    CHECK_OK(ct_tensor_place(w, dev)); /* residency alone would send the copy to the GPU */
    CHECK_OK(ct_cast(w, CT_F32, &out));
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(strcmp(rec.device, "cpu") == 0 && rec.reason != CT_REASON_FALLBACK,
              "a Q8_1 copy ran on %s (reason %s): the GPU claimed it", rec.device, ct_route_reason_name(rec.reason));
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_cast(w, CT_F32, &ref));
    CHECK_OK(ct_exec_force_device(NULL));
    CHECK_OK(ct_exec_set_devices(NULL));
    if (out && ref) {
        double *g = th_values(out), *r = th_values(ref);
        int nf = 0;
        CHECK(devcheck_nmse(g, r, ct_tensor_numel(ref), &nf) == 0 && !nf);
        free(g);
        free(r);
    }
    ct_tensor_free(out);
    ct_tensor_free(ref);
    ct_tensor_free(w);
}

/* ---- a refdata model: greedy tokens on cuda:0 (weights placed there) equal the CPU's ---- */

#define N_GEN 24

static void greedy(const llm_model *m, const int32_t *prompt, int n, int32_t *got, float *logits_out)
{
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 256, CT_F16, NULL));
    CHECK_OK(llm_session_eval(&s, prompt, n));
    for (int k = 0; k < N_GEN; k++) {
        int b = 0;
        for (int i = 1; i < m->hp.n_vocab; i++)
            if (s.logits[i] > s.logits[b]) b = i;
        got[k] = b;
        if (k == 0) memcpy(logits_out, s.logits, sizeof(float) * (size_t)m->hp.n_vocab);
        if (k + 1 < N_GEN && llm_session_eval(&s, &got[k], 1) != CT_OK) {
            CHECK_MSG(0, "decode failed: %s", ct_last_error());
            break;
        }
    }
    llm_session_free(&s);
}

static void check_model(const char *dir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/mini-a/%s", dir, file);
    llm_model *cpu_m = NULL, *gpu_m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &cpu_m));
    CHECK_OK(llm_model_load(path, NULL, NULL, &gpu_m));
    if (!cpu_m || !gpu_m) goto out;
    /* The quantized weights placed on the GPU (their home: routing sends their ops there),
     * and no size rule, so even this model's 256 x 256 matrices run on the GPU. */
    const ct_tensor *ws[2 + 7 * 64];
    int nw = 0;
    ws[nw++] = gpu_m->tok_embd;
    ws[nw++] = gpu_m->output;
    for (int l = 0; l < gpu_m->hp.n_layer && l < 64; l++) {
        const llm_layer *L = &gpu_m->layers[l];
        const ct_tensor *lw[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        for (int i = 0; i < 7; i++) ws[nw++] = lw[i];
    }
    int n_placed = 0;
    for (int i = 0; i < nw; i++)
        if (ws[i] && ct_dtype_is_quantized(ct_tensor_dtype(ws[i]))) {
            CHECK_OK(ct_tensor_place(ws[i], dev));
            n_placed++;
        }
    CHECK_MSG(n_placed >= 2 + 7 * gpu_m->hp.n_layer, "%s: %d quantized weights", file, n_placed);
    static const char *prompts[] = {"The capital of France is", "Once upon a time", "1, 2, 3, 4,"};
    int V = cpu_m->hp.n_vocab;
    float *lc = malloc(sizeof(float) * (size_t)V), *lg = malloc(sizeof(float) * (size_t)V);
    for (int p = 0; p < 3 && lc && lg; p++) {
        int32_t ids[64], a[N_GEN], b[N_GEN];
        int n = 0;
        CHECK_OK(llm_tokenize(cpu_m->tok, prompts[p], strlen(prompts[p]), true, false, ids, 64, &n));
        CHECK_OK(ct_exec_force_device("cpu"));
        greedy(cpu_m, ids, n, a, lc);
        CHECK_OK(ct_exec_force_device(NULL));
        ct_exec_stats_reset();
        size_t small = ct_exec_small_bytes();
        ct_exec_set_small_bytes(0);
        greedy(gpu_m, ids, n, b, lg);
        ct_exec_set_small_bytes(small);
        ct_device_stats st[8];
        int nd = ct_exec_stats(st, 8);
        long long ops = 0;
        for (int i = 0; i < nd && i < 8; i++)
            if (strcmp(st[i].device, dev) == 0) ops = (long long)st[i].ops;
        /* every token: the embedding, 7 linears per layer and the output at least */
        long long want = (long long)N_GEN * (2 + 7 * gpu_m->hp.n_layer);
        CHECK_MSG(ops >= want, "%s: %lld ops ran on %s, expected at least %lld", file, ops, dev, want);
        double num = 0, den = 0;
        for (int i = 0; i < V; i++) {
            num += ((double)lg[i] - lc[i]) * ((double)lg[i] - lc[i]);
            den += (double)lc[i] * lc[i];
        }
        /* the CPU quantizes activations to 8 bits for its dots; the GPU does not (see above) */
        CHECK_MSG(num / den < 1e-3, "%s prompt %d: prompt logits NMSE %.3g", file, p, num / den);
        CHECK_MSG(memcmp(a, b, sizeof a) == 0, "%s prompt %d: greedy tokens on %s differ from the CPU's", file, p, dev);
        fprintf(stderr, "  %s prompt %d: logits NMSE %.3g, %lld ops on %s\n", file, p, num / den, ops, dev);
    }
    free(lc);
    free(lg);
out:
    llm_model_free(cpu_m);
    llm_model_free(gpu_m);
}

static void test_refdata_greedy(void)
{
    if (!(dev = devcheck_chain_device("cuda", dev_name, sizeof dev_name))) return;
    const char *dir = th_refdata();
    char probe[1024];
    snprintf(probe, sizeof probe, "%s/mini-a/mini-a-q4_k_m.gguf", dir ? dir : ".");
    FILE *f = dir ? fopen(probe, "rb") : NULL;
    if (!f) {
        th_skip("no refdata model (CTORCH_REFDATA=%s)", dir ? dir : "unset");
        return;
    }
    fclose(f);
    check_model(dir, "mini-a-q4_k_m.gguf");
    check_model(dir, "mini-a-q8_0.gguf");
}

int main(int argc, char **argv)
{
    setenv("CTORCH_CUDA_POISON", "1", 0); /* unwritten outputs read as NaN */
    th_args(argc, argv);
    RUN(test_dequantize);
    RUN(test_embedding);
    RUN(test_linear);
    RUN(test_refusals);
    RUN(test_refdata_greedy);
    return th_finish();
}
