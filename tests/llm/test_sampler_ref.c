/* The sampler against a plain sort-based reference on Gemma-sized logits
 * (262,144 entries): the reference applies the penalty to a full copy, sorts the
 * whole vocabulary (descending logit, ascending id) and filters prefixes of it,
 * with the same arithmetic in the same order and the same splitmix64 stream, so
 * every chosen token must be identical. The logits carry ties, NaN and -inf so
 * the sampler's fast paths (block skips, gap scans around penalised ids) meet
 * their edge cases. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/sampler.h"

#define NV 262144

typedef struct rc {
    int32_t id;
    float logit;
} rc;

static int rc_cmp(const void *a, const void *b)
{
    const rc *x = a, *y = b;
    if (x->logit != y->logit) return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

typedef struct ref {
    llm_sampler_params p;
    uint64_t rng;
    rc *c;
} ref;

static double ref_uniform(ref *r)
{
    uint64_t z = (r->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

/* Penalised, sorted copy of the logits in r->c; sums over the whole vocabulary in id
 * order (what the sampler uses when top-k is off) in *max_all / *sum_all. */
static void ref_prepare(ref *r, const float *logits, int nv, const int32_t *hist, int n_hist, double *max_all,
                        double *sum_all)
{
    rc *c = r->c;
    for (int i = 0; i < nv; i++) c[i] = (rc){i, isnan(logits[i]) ? -INFINITY : logits[i]};
    int last = r->p.repeat_last_n < 0 ? n_hist : r->p.repeat_last_n;
    if (r->p.repeat_penalty != 1.0f && last > 0) {
        static unsigned char done[NV];
        memset(done, 0, sizeof done);
        for (int i = n_hist > last ? n_hist - last : 0; i < n_hist; i++) {
            int32_t id = hist[i];
            if (id < 0 || id >= nv || done[id]) continue;
            done[id] = 1;
            float *l = &c[id].logit;
            *l = *l > 0.0f ? *l / r->p.repeat_penalty : *l * r->p.repeat_penalty;
        }
    }
    double max = -INFINITY, sum = 0.0;
    for (int i = 0; i < nv; i++)
        if (c[i].logit > max) max = c[i].logit;
    for (int i = 0; i < nv; i++) sum += exp((double)c[i].logit - max);
    *max_all = max, *sum_all = sum;
    qsort(c, (size_t)nv, sizeof(rc), rc_cmp);
}

/* One draw from the prepared list. */
static int32_t ref_draw(ref *r, int nv, double max_all, double sum_all)
{
    const rc *c = r->c;
    if (!(r->p.temperature > 0.0f)) return c[0].id;
    /* top-k off: the sums run over the whole vocabulary in id order */
    bool topk = r->p.top_k > 0 && r->p.top_k < nv;
    double max = topk ? -INFINITY : max_all, sum = topk ? 0.0 : sum_all;
    int n = nv;
    if (topk) {
        n = r->p.top_k;
        max = c[0].logit;
        if (max == -INFINITY) return 0;
        for (int i = 0; i < n; i++) sum += exp((double)c[i].logit - max);
    } else if (max == -INFINITY) {
        return 0;
    }
    if (r->p.min_p > 0.0f) {
        double floor_logit = r->p.min_p >= 1.0f ? max : max + log((double)r->p.min_p);
        int m = 1;
        while (m < n && c[m].logit >= floor_logit) m++;
        n = m;
    }
    if (r->p.top_p < 1.0f) {
        double cum = 0.0, target = (double)r->p.top_p * sum;
        for (int i = 0; i < n; i++) {
            cum += exp((double)c[i].logit - max);
            if (cum >= target) {
                n = i + 1;
                break;
            }
        }
    }
    double inv_t = 1.0 / (double)r->p.temperature;
    sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp(((double)c[i].logit - max) * inv_t);
    double u = ref_uniform(r) * sum, cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += exp(((double)c[i].logit - max) * inv_t);
        if (u < cum) return c[i].id;
    }
    return c[n - 1].id;
}

/* Logits shaped like a model's: a broad normal body, a few strong candidates,
 * values rounded to a grid so ties occur, some NaN and -inf, near-ties. */
static void make_logits(th_rng *r, float *l, int nv, int variant)
{
    for (int i = 0; i < nv; i++) {
        double u1 = th_uniform(r, 1e-12, 1), u2 = th_uniform(r, 0, 1);
        double g = sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
        l[i] = (float)(round(g * 3.0 * 64) / 64); /* ties on a 1/64 grid */
    }
    for (int j = 0; j < 30; j++) l[(int)th_uniform(r, 0, nv)] = (float)th_uniform(r, 10, 16);
    if (variant & 1)
        for (int j = 0; j < 20; j++) l[(int)th_uniform(r, 0, nv)] = NAN;
    if (variant & 2)
        for (int j = 0; j < 20; j++) l[(int)th_uniform(r, 0, nv)] = -INFINITY;
    if (variant & 4) { /* a plateau of equal maxima, the lowest id must win greedy */
        for (int j = 0; j < 8; j++) l[nv - 1 - 97 * j] = 20.0f;
        l[6] = l[9] = 20.0f; /* two in one block of the greedy scan */
    }
    if (variant % 3 == 1) /* a staircase of near-ties: each step beats the last by a hair */
        for (int j = 0; j < 50; j++) l[1000 + 5000 * j] = 17.0f + 0.001f * (float)j;
}

/* steps logit vectors; draws samples from each (the history grows between steps). */
static void run_case(float temp, int top_k, float top_p, float min_p, float pen, int last_n, uint64_t seed,
                     int steps, int draws)
{
    static float logits[NV];
    static int32_t hist[512];
    llm_sampler_params p;
    llm_sampler_params_default(&p);
    p.temperature = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.repeat_penalty = pen,
    p.repeat_last_n = last_n, p.seed = seed;
    llm_sampler *s = NULL;
    CHECK_OK(llm_sampler_new(&p, &s));
    ref r = {p, seed, malloc(sizeof(rc) * NV)};
    CHECK(r.c != NULL);
    th_rng g = {seed * 7 + 1};
    int n_hist = 0;
    for (int i = 0; i < 100; i++) hist[n_hist++] = (int32_t)th_uniform(&g, 0, NV);
    int mismatches = 0;
    for (int step = 0; step < steps && r.c; step++) {
        make_logits(&g, logits, NV, step);
        /* the penalty window holds some of the strongest logits */
        for (int j = 0; j < NV && n_hist < 512; j++)
            if (logits[j] >= 10.0f && th_uniform(&g, 0, 1) < 0.3) hist[n_hist++] = j;
        double max_all, sum_all;
        ref_prepare(&r, logits, NV, hist, n_hist, &max_all, &sum_all);
        int32_t a = -1, b = -1;
        for (int d = 0; d < draws && a == b; d++) {
            a = llm_sampler_sample(s, logits, NV, hist, n_hist);
            b = ref_draw(&r, NV, max_all, sum_all);
        }
        if (a != b) mismatches++;
        CHECK_MSG(a == b || mismatches > 3, "T %g k %d p %g min-p %g pen %g/%d seed %llu step %d: sampler %d, reference %d",
                    (double)temp, top_k, (double)top_p, (double)min_p, (double)pen, last_n, (unsigned long long)seed,
                    step, a, b);
        if (n_hist < 512) hist[n_hist++] = a;
    }
    free(r.c);
    llm_sampler_free(s);
}

static void test_greedy(void)
{
    run_case(0.0f, 40, 0.95f, 0.05f, 1.0f, 64, 1, 8, 1);
    run_case(0.0f, 40, 0.95f, 0.05f, 1.3f, 64, 2, 8, 1);
    run_case(0.0f, 0, 1.0f, 0.0f, 0.7f, -1, 3, 8, 1); /* a penalty below 1 raises logits */
}

static void test_default_chain(void)
{
    run_case(0.8f, 40, 0.95f, 0.05f, 1.0f, 64, 11, 8, 1);
    run_case(0.8f, 40, 0.95f, 0.05f, 1.15f, 64, 12, 8, 1);
    run_case(1.5f, 40, 0.95f, 0.0f, 1.1f, -1, 13, 8, 1);
    run_case(2.0f, 1000, 0.99f, 0.001f, 1.0f, 64, 14, 8, 1);
    /* nearly uniform over the top-k set: many draws see every member of it */
    run_case(1000.0f, 40, 1.0f, 0.0f, 1.2f, 64, 15, 8, 200);
    run_case(1000.0f, 1000, 1.0f, 0.0f, 1.0f, 64, 16, 4, 500);
}

static void test_filters(void)
{
    run_case(1.0f, 1, 1.0f, 0.0f, 1.2f, 64, 21, 8, 1);
    run_case(1.0f, 40, 1.0f, 0.0f, 1.0f, 64, 22, 8, 1);    /* top-k alone */
    run_case(1.0f, 0, 0.9f, 0.0f, 1.0f, 64, 23, 4, 1);     /* top-p alone: the full-vocabulary path */
    run_case(1.0f, 0, 1.0f, 0.05f, 0.8f, 32, 24, 4, 1);    /* min-p alone */
    run_case(1.5f, 40, 1.0f, 0.9f, 1.0f, 64, 26, 16, 1);   /* min-p keeping one or two */
    run_case(1.5f, 40, 1.0f, 1.0f, 1.1f, 64, 27, 8, 1);    /* min-p 1: the top only */
    run_case(0.5f, NV - 1, 0.95f, 0.05f, 1.0f, 64, 25, 4, 1);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_greedy);
    RUN(test_default_chain);
    RUN(test_filters);
    return th_finish();
}
