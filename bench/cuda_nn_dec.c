/* `ctorch-bench-cuda-nn dec [rounds [case]]`: the decode attention kernel alone, without the
 * eager path's per-op cost: nn_sdpa_dec_run launched 22 times (one per layer of a
 * TinyLlama-sized model, each layer with a cache of its own) captured in one CUDA graph,
 * timed with events around the graph's replay; us per launch. "hot" replays the graph back
 * to back (the caches stay in L2 where they fit), "cold" writes a 256 MiB buffer before each
 * replay (in a decode step the weights stream through L2 between two layers' attention).
 * "old" is the SIMT kernel (attention_dec.cu, main 72d5c48's kernel, still the library's for
 * the shapes the tensor-core one leaves) at its own split count, "new" is nn_sdpa_dec_run at
 * nn_sdpa_plan's (attention_dec_tc.cu for f16 caches with D 64 / 128 / 256 and G <= 8: all
 * three models here; Gemma 3's D 256 since session 44, on pairs of warps).
 * Beside them: an empty kernel of the same grid (cuda_dec_floor.cu: the launch cost in a
 * graph) and the largest difference between the old and new outputs relative to the largest
 * output (a sanity check: both are f32-accurate, so ~1e-7). Shapes: TinyLlama (32 query
 * heads, 4 KV heads, D 64), SmolLM2 135M (9, 3, 64), Gemma 3 270M (4, 1, 256; its local
 * layers have a window of 512); f16 caches of Tk slots attended to L (the length in a device
 * tensor). Then the new kernel at other split counts than nn_sdpa_plan's, for the planner.
 * Measured on an H100 (2026-11-24, us per launch, hot / cold; old -> new; empty kernel 1.0-1.2):
 *   TinyLlama 512 (64) 7.2/7.4 -> 3.6/4.2, 512 (128) 11.5/11.7 -> 3.7/4.2,
 *     640 (600) 10.0/10.3 -> 5.7/6.3, 2048 (600) 10.0/10.5 -> 6.3/6.9,
 *     2048 (2000) 11.6/11.8 -> 7.4/7.9, 4096 (4000) 15.3/15.3 -> 9.9/10.3
 *   SmolLM2 512 (64) 8.4/8.7 -> 3.5/4.0, 640 (600) 7.2/7.5 -> 5.8/6.4,
 *     2048 (600) 8.1/8.5 -> 6.1/6.8, 2048 (2000) 9.7/10.1 -> 7.1/7.8, 4096 (4000) 11.8/12.0 -> 9.5/10.2
 *   Gemma 3 (SIMT both): global 2048 (600) 10.6/11.1, 4096 (4000) 18.6/18.8; local 4096 (4000)
 *     15.1/15.4 (at 128 splits 10.6/11.1, at 2048 (600) 13.0/13.4 against 11.9/12.3: the
 *     SIMT planner's cap of 64 is left as it is)
 * Gemma 3 on tensor cores (H200, session 44, SIMT -> new): global 128 (64) 8.6/8.8 -> 4.5/4.9,
 *   512 (128) 8.8/8.9 -> 6.5/6.9, 2048 (600) 10.4/10.7 -> 7.9/8.5, 2048 (2000) 14.5/14.8 ->
 *   10.4/10.9, 4096 (4000) 18.4/18.6 -> 12.8/13.2 at 32 splits (14.8/15.1 at 64: hence the
 *   planner's 32 active blocks); local 4096 (4000) 15.1/15.2 -> 8.4/8.5
 * The split sweep: for the tensor-core kernel the planner's 4 warps x 32 keys a block is at
 * or near the best (2048 (600): 6.3 against 6.4 at twice the blocks, 7.5 at half). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cuda/attention_dec.h"
#include "cuda_check.h"

cudaError_t nn_sdpa_dec_floor(const nn_sdpa *a, cudaStream_t s);

enum { N_LAYERS = 22 };

/* f32 -> f16 bits (round to nearest; the values here are normal and small) */
static uint16_t f2h(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, e = (x >> 23) & 0xffu, m = x & 0x7fffffu;
    if (e < 103) return (uint16_t)sign;
    if (e < 113) { /* subnormal half */
        m |= 0x800000u;
        return (uint16_t)(sign | (m >> (126 - e)));
    }
    uint32_t h = sign | ((e - 112) << 10) | (m >> 13);
    if (m & 0x1000u) h++;
    return (uint16_t)h;
}

static uint64_t g_rng = 88172645463325252ull;
static float urand(void)
{
    g_rng ^= g_rng << 13, g_rng ^= g_rng >> 7, g_rng ^= g_rng << 17;
    return (float)((g_rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

typedef struct dshape {
    const char *name;
    int64_t Hq, Hkv, D;
    int64_t window;
} dshape;

typedef struct dcase {
    float *q;
    void *k[N_LAYERS], *v[N_LAYERS];
    float *out[N_LAYERS], *part;
    unsigned *count;
    int32_t *len;
    void *flush;
    size_t flush_bytes;
    cudaStream_t s;
} dcase;

typedef cudaError_t (*run_fn)(const nn_sdpa *, cudaStream_t);

/* us per launch: best of `rounds` replays of a graph of N_LAYERS launches */
static double time_graph(dcase *c, const nn_sdpa *base, run_fn run, int rounds, int cold)
{
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CHECK_CUDA(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    for (int l = 0; l < N_LAYERS; l++) {
        nn_sdpa a = *base;
        a.k = c->k[l], a.v = c->v[l], a.out = c->out[l];
        if (run(&a, c->s) != cudaSuccess) {
            fprintf(stderr, "bench dec: launch refused\n");
            exit(1);
        }
    }
    CHECK_CUDA(cudaStreamEndCapture(c->s, &g));
    CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
    cudaEvent_t e0, e1;
    CHECK_CUDA(cudaEventCreate(&e0));
    CHECK_CUDA(cudaEventCreate(&e1));
    CHECK_CUDA(cudaGraphLaunch(ge, c->s)); /* warm-up */
    float best = 1e30f;
    for (int r = 0; r < rounds; r++) {
        if (cold) CHECK_CUDA(cudaMemsetAsync(c->flush, r & 0xff, c->flush_bytes, c->s));
        CHECK_CUDA(cudaEventRecord(e0, c->s));
        int reps = cold ? 1 : 10;
        for (int i = 0; i < reps; i++) CHECK_CUDA(cudaGraphLaunch(ge, c->s));
        CHECK_CUDA(cudaEventRecord(e1, c->s));
        CHECK_CUDA(cudaEventSynchronize(e1));
        float ms;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        ms /= (float)reps;
        if (ms < best) best = ms;
    }
    CHECK_CUDA(cudaEventDestroy(e0));
    CHECK_CUDA(cudaEventDestroy(e1));
    CHECK_CUDA(cudaGraphExecDestroy(ge));
    CHECK_CUDA(cudaGraphDestroy(g));
    return 1e3 * best / N_LAYERS;
}

static void setup(dcase *c, const dshape *sh, int64_t Tk)
{
    size_t kn = (size_t)(sh->Hkv * Tk * sh->D), qn = (size_t)(sh->Hq * sh->D);
    uint16_t *h = malloc(sizeof(uint16_t) * kn);
    float *qh = malloc(sizeof(float) * qn);
    if (!h || !qh) exit(1);
    CHECK_CUDA(cudaMalloc((void **)&c->q, sizeof(float) * qn));
    for (size_t i = 0; i < qn; i++) qh[i] = urand();
    CHECK_CUDA(cudaMemcpy(c->q, qh, sizeof(float) * qn, cudaMemcpyHostToDevice));
    for (int l = 0; l < N_LAYERS; l++) {
        for (int kv = 0; kv < 2; kv++) {
            void **p = kv ? &c->v[l] : &c->k[l];
            if (l < 2) /* two layers of distinct values; the rest repeat them at addresses of their own */
                for (size_t i = 0; i < kn; i++) h[i] = f2h(urand());
            CHECK_CUDA(cudaMalloc(p, sizeof(uint16_t) * kn));
            CHECK_CUDA(cudaMemcpy(*p, h, sizeof(uint16_t) * kn, cudaMemcpyHostToDevice));
        }
        CHECK_CUDA(cudaMalloc((void **)&c->out[l], sizeof(float) * (size_t)(sh->Hq * sh->D)));
    }
    CHECK_CUDA(cudaMalloc((void **)&c->part, sizeof(float) * NN_SDPA_DEC_MAX_SPLIT * (size_t)(sh->Hq * ((sh->D + 3) / 4 * 4 + 2))));
    CHECK_CUDA(cudaMalloc((void **)&c->count, sizeof(unsigned) * 64));
    CHECK_CUDA(cudaMemset(c->count, 0, sizeof(unsigned) * 64));
    CHECK_CUDA(cudaMalloc((void **)&c->len, sizeof(int32_t)));
    free(h);
    free(qh);
}

static void teardown(dcase *c)
{
    cudaFree(c->q);
    for (int l = 0; l < N_LAYERS; l++) cudaFree(c->k[l]), cudaFree(c->v[l]), cudaFree(c->out[l]);
    cudaFree(c->part);
    cudaFree(c->count);
    cudaFree(c->len);
}

/* the SIMT kernel (main 72d5c48's, still the library's kernel for the shapes the tensor-core
 * one leaves) at its own split count */
static int old_splits(const nn_sdpa *a, int sm)
{
    return nn_sdpa_dec_simt_splits(a->B, a->Hkv, a->Tk, a->D, a->Dv, a->Hq / a->Hkv, sm);
}

/* max |new - old| / max |old| over layer 0's output */
static double out_diff(const dcase *c, const nn_sdpa *a, int sm)
{
    size_t n = (size_t)(a->Hq * a->Dv);
    float *x = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n);
    nn_sdpa o = *a;
    o.k = c->k[0], o.v = c->v[0], o.out = c->out[0];
    CHECK_CUDA(nn_sdpa_dec_run(&o, c->s));
    CHECK_CUDA(cudaMemcpyAsync(x, o.out, sizeof(float) * n, cudaMemcpyDeviceToHost, c->s));
    o.n_split = old_splits(a, sm);
    CHECK_CUDA(nn_sdpa_dec_simt_run(&o, c->s));
    CHECK_CUDA(cudaMemcpyAsync(y, o.out, sizeof(float) * n, cudaMemcpyDeviceToHost, c->s));
    CHECK_CUDA(cudaStreamSynchronize(c->s));
    double md = 0, mo = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)x[i] - y[i]);
        if (!(d <= md)) md = d; /* NaN sticks */
        if (fabs(y[i]) > mo) mo = fabs(y[i]);
    }
    free(x), free(y);
    return mo > 0 ? md / mo : md;
}

/* only: -1, or one case (shape index * 100 + length index), for a profiler */
int bench_dec(int rounds, int only)
{
    int sm = 0;
    CHECK_CUDA(cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0));
    static const dshape shapes[] = {{"tinyllama", 32, 4, 64, 0},
                                    {"smollm2-135m", 9, 3, 64, 0},
                                    {"gemma3-270m global", 4, 1, 256, 0},
                                    {"gemma3-270m local", 4, 1, 256, 512}};
    static const int64_t lens[][2] = {{128, 64},   {128, 128},   {512, 64},   {512, 128},
                                      {640, 600},  {2048, 600},  {2048, 2000}, {4096, 4000}};
    dcase c = {0};
    CHECK_CUDA(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking));
    c.flush_bytes = (size_t)256 << 20;
    CHECK_CUDA(cudaMalloc(&c.flush, c.flush_bytes));
    printf("| decode attention, f16 cache, %d launches per graph | Tk (attended) | old: splits, us hot / cold | new: "
           "splits, us hot / cold | empty kernel, same grid: us hot | new vs old, max rel diff |\n"
           "|---|---|---|---|---|---|\n",
           N_LAYERS);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const dshape *sh = &shapes[si];
        for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
            if (only >= 0 && only != (int)(si * 100 + li)) continue;
            int64_t Tk = lens[li][0];
            int32_t L = (int32_t)lens[li][1];
            setup(&c, sh, Tk);
            CHECK_CUDA(cudaMemcpy(c.len, &L, sizeof L, cudaMemcpyHostToDevice));
            nn_sdpa a = {.q = c.q, .len = c.len, .part = c.part, .count = c.count, .kdt = CT_F16, .vdt = CT_F16,
                         .ldt = CT_I32, .B = 1, .Hq = sh->Hq, .Hkv = sh->Hkv, .Tq = 1, .Tk = Tk, .D = sh->D,
                         .Dv = sh->D, .scale = (float)(1.0 / sqrt((double)sh->D)), .causal = 1, .window = sh->window};
            a.qs[0] = sh->Hq * sh->D, a.qs[1] = sh->D, a.qs[2] = sh->D, a.qs[3] = 1;
            a.ks[0] = sh->Hkv * Tk * sh->D, a.ks[1] = Tk * sh->D, a.ks[2] = sh->D, a.ks[3] = 1;
            memcpy(a.vs, a.ks, sizeof a.ks);
            nn_sdpa o = a;
            o.n_split = old_splits(&a, sm);
            double oh = time_graph(&c, &o, nn_sdpa_dec_simt_run, rounds, 0);
            double oc = time_graph(&c, &o, nn_sdpa_dec_simt_run, rounds, 1);
            a.n_split = nn_sdpa_plan(&a, sm);
            double nh = time_graph(&c, &a, nn_sdpa_dec_run, rounds, 0);
            double nc = time_graph(&c, &a, nn_sdpa_dec_run, rounds, 1);
            double fh = time_graph(&c, &a, nn_sdpa_dec_floor, rounds, 0);
            printf("| %s | %lld (%d) | %d: %.2f / %.2f | %d: %.2f / %.2f | %.2f | %.1e |\n", sh->name, (long long)Tk, L,
                   o.n_split, oh, oc, a.n_split, nh, nc, fh, out_diff(&c, &a, sm));
            fflush(stdout);
            { /* the planner's choice against halving and doubling the segments */
                int alt[2] = {a.n_split * 2, (a.n_split + 1) / 2};
                for (int i = 0; i < 2; i++) {
                    if (alt[i] < 1 || alt[i] > NN_SDPA_DEC_MAX_SPLIT || alt[i] == a.n_split) continue;
                    nn_sdpa b = a;
                    b.n_split = alt[i];
                    printf("|  (new at %d splits) | | | %d: %.2f / %.2f | | |\n", alt[i], alt[i],
                           time_graph(&c, &b, nn_sdpa_dec_run, rounds, 0), time_graph(&c, &b, nn_sdpa_dec_run, rounds, 1));
                }
            }
            teardown(&c);
        }
    }
    cudaFree(c.flush);
    cudaStreamDestroy(c.s);
    return 0;
}
