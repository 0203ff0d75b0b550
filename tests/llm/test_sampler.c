/* Sampler: greedy and its ties, each filter's support (top-k, top-p, min-p)
 * against sets computed here in double precision, temperature against the
 * exact softmax (chi-square), repetition penalty, seeding, error paths. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/sampler.h"

static llm_sampler *make(float temp, int top_k, float top_p, float min_p, uint64_t seed)
{
    llm_sampler_params p;
    llm_sampler_params_default(&p);
    p.temperature = temp, p.top_k = top_k, p.top_p = top_p, p.min_p = min_p, p.seed = seed;
    llm_sampler *s = NULL;
    CHECK_OK(llm_sampler_new(&p, &s));
    return s;
}

/* Histogram of n draws. */
static void draw(llm_sampler *s, const float *logits, int nv, int n, int *count)
{
    memset(count, 0, sizeof(int) * (size_t)nv);
    for (int i = 0; i < n; i++) {
        int32_t id = llm_sampler_sample(s, logits, nv, NULL, 0);
        CHECK(id >= 0 && id < nv);
        if (id >= 0 && id < nv) count[id]++;
    }
}

static void test_greedy(void)
{
    llm_sampler *s = make(0.0f, 40, 0.9f, 0.1f, 1);
    const float tie[6] = {0.5f, 3.0f, -1.0f, 3.0f, 2.9f, 3.0f};
    CHECK(llm_sampler_sample(s, tie, 6, NULL, 0) == 1); /* lowest id among the maxima */
    const float nan_first[3] = {NAN, -5.0f, -4.0f};
    CHECK(llm_sampler_sample(s, nan_first, 3, NULL, 0) == 2);
    const float all_inf[3] = {-INFINITY, -INFINITY, -INFINITY};
    CHECK(llm_sampler_sample(s, all_inf, 3, NULL, 0) == 0);
    llm_sampler_free(s);

    /* top_k = 1 at any temperature is greedy. */
    th_rng r = {5};
    float l[100];
    s = make(1.5f, 1, 1.0f, 0.0f, 3);
    for (int it = 0; it < 50; it++) {
        int best = 0;
        for (int i = 0; i < 100; i++) {
            l[i] = (float)th_uniform(&r, -3, 3);
            if (l[i] > l[best]) best = i;
        }
        CHECK(llm_sampler_sample(s, l, 100, NULL, 0) == best);
    }
    llm_sampler_free(s);
    llm_sampler_free(NULL);
}

static void test_top_k_support(void)
{
    th_rng r = {11};
    float l[50];
    for (int i = 0; i < 50; i++) l[i] = (float)th_uniform(&r, 0, 1); /* flat: every survivor gets drawn */
    l[17] = l[3]; /* a tie straddling the cut is resolved by id */
    int order[50];
    for (int i = 0; i < 50; i++) order[i] = i;
    for (int i = 0; i < 50; i++) /* reference ranking: logit desc, id asc */
        for (int j = i + 1; j < 50; j++)
            if (l[order[j]] > l[order[i]] || (l[order[j]] == l[order[i]] && order[j] < order[i])) {
                int t = order[i];
                order[i] = order[j], order[j] = t;
            }
    for (int k = 1; k <= 8; k += 3) {
        llm_sampler *s = make(1.0f, k, 1.0f, 0.0f, 100 + (uint64_t)k);
        int count[50];
        draw(s, l, 50, 3000, count);
        for (int i = 0; i < 50; i++) {
            bool in = false;
            for (int j = 0; j < k; j++) in |= order[j] == i;
            CHECK_MSG(in ? count[i] > 0 : count[i] == 0, "k %d id %d drawn %d times", k, i, count[i]);
        }
        llm_sampler_free(s);
    }
}

/* Smallest prefix of the sorted probabilities whose mass reaches p. */
static void test_top_p_and_min_p(void)
{
    /* log-probabilities of 0.4 0.25 0.15 0.1 0.06 0.04, shuffled ids */
    const double p[6] = {0.15, 0.04, 0.4, 0.1, 0.25, 0.06};
    const int rank[6] = {2, 4, 0, 3, 5, 1}; /* ids by decreasing p */
    float l[6];
    for (int i = 0; i < 6; i++) l[i] = (float)log(p[i]) + 1.0f;
    const float tops[5] = {0.3f, 0.6f, 0.7f, 0.85f, 0.99f};
    for (int c = 0; c < 5; c++) {
        int keep = 0;
        double cum = 0;
        while (cum < tops[c]) cum += p[rank[keep++]];
        llm_sampler *s = make(1.0f, 0, tops[c], 0.0f, 7);
        int count[6];
        draw(s, l, 6, 4000, count);
        for (int j = 0; j < 6; j++)
            CHECK_MSG((j < keep) == (count[rank[j]] > 0), "top_p %g rank %d drawn %d", tops[c], j, count[rank[j]]);
        llm_sampler_free(s);
    }
    /* min_p keeps p >= min_p * p_max (0.4): 0.3 -> >= 0.12 (3 ids), 0.5 -> >= 0.2 (2), 1.0 -> top only. */
    const float mins[3] = {0.3f, 0.5f, 1.0f};
    const int keeps[3] = {3, 2, 1};
    for (int c = 0; c < 3; c++) {
        llm_sampler *s = make(1.0f, 0, 1.0f, mins[c], 8);
        int count[6];
        draw(s, l, 6, 4000, count);
        for (int j = 0; j < 6; j++)
            CHECK_MSG((j < keeps[c]) == (count[rank[j]] > 0), "min_p %g rank %d drawn %d", mins[c], j, count[rank[j]]);
        llm_sampler_free(s);
    }
    /* Filters combine: top_k 4 (mass 0.9), top_p 0.9 of that mass keeps all 4, min_p 0.3 then keeps 3. */
    llm_sampler *s = make(1.0f, 4, 0.9f, 0.3f, 9);
    int count[6];
    draw(s, l, 6, 4000, count);
    for (int j = 0; j < 6; j++) CHECK((j < 3) == (count[rank[j]] > 0));
    llm_sampler_free(s);
}

/* Empirical frequencies vs softmax(l / T), chi-square over 8 bins (7 dof):
 * 40 is beyond the 99.999% quantile (~35), so only a real bias fails. */
static void test_temperature(void)
{
    th_rng r = {21};
    float l[8];
    for (int i = 0; i < 8; i++) l[i] = (float)th_uniform(&r, -1.5, 1.5);
    const float temps[3] = {0.5f, 1.0f, 2.0f};
    double top_share[3];
    for (int c = 0; c < 3; c++) {
        double w[8], sum = 0, mx = -1e30;
        for (int i = 0; i < 8; i++) mx = fmax(mx, l[i]);
        for (int i = 0; i < 8; i++) sum += (w[i] = exp((l[i] - mx) / temps[c]));
        llm_sampler *s = make(temps[c], 0, 1.0f, 0.0f, 1234);
        const int n = 20000;
        int count[8];
        draw(s, l, 8, n, count);
        double chi2 = 0, best = 0;
        for (int i = 0; i < 8; i++) {
            double e = n * w[i] / sum;
            chi2 += (count[i] - e) * (count[i] - e) / e;
            best = fmax(best, (double)count[i] / n);
        }
        CHECK_MSG(chi2 < 40.0, "T %g: chi2 %g", temps[c], chi2);
        top_share[c] = best;
        llm_sampler_free(s);
    }
    CHECK(top_share[0] > top_share[1] && top_share[1] > top_share[2]); /* lower T sharpens */
}

static void test_repeat_penalty(void)
{
    llm_sampler_params p;
    llm_sampler_params_default(&p);
    p.temperature = 0, p.repeat_penalty = 1.1f, p.repeat_last_n = 2;
    llm_sampler *s = NULL;
    CHECK_OK(llm_sampler_new(&p, &s));
    const float l[4] = {2.0f, 1.9f, -1.0f, -1.05f};
    const float l_copy[4] = {2.0f, 1.9f, -1.0f, -1.05f};
    const int32_t h1[1] = {0};
    CHECK(llm_sampler_sample(s, l, 4, h1, 1) == 1); /* 2.0 / 1.1 < 1.9 */
    CHECK(memcmp(l, l_copy, sizeof l) == 0);        /* the caller's logits are untouched */
    const int32_t h2[4] = {0, 3, 3, 3};             /* 0 is outside the last 2 */
    CHECK(llm_sampler_sample(s, l, 4, h2, 4) == 0);
    /* A token repeated in the window is penalised once: 2.0 / 1.1 = 1.818 > 1.75 (twice would give 1.65). */
    const float l2[4] = {2.0f, 1.5f, 1.75f, -1};
    const int32_t h3[2] = {0, 0};
    CHECK(llm_sampler_sample(s, l2, 4, h3, 2) == 0);
    /* Negative logits are multiplied: -1.0 * 1.1 = -1.1 < -1.05. */
    const float neg[2] = {-1.0f, -1.05f};
    const int32_t h4[1] = {0};
    CHECK(llm_sampler_sample(s, neg, 2, h4, 1) == 1);
    const int32_t junk[3] = {-5, 99, 1 << 30}; /* ids outside the vocabulary are ignored */
    CHECK(llm_sampler_sample(s, l, 4, junk, 3) == 0);
    llm_sampler_free(s);
    p.repeat_last_n = -1; /* whole history */
    CHECK_OK(llm_sampler_new(&p, &s));
    CHECK(llm_sampler_sample(s, l, 4, h2, 4) == 1);
    llm_sampler_free(s);
    p.repeat_last_n = 0; /* off */
    CHECK_OK(llm_sampler_new(&p, &s));
    CHECK(llm_sampler_sample(s, l, 4, h1, 1) == 0);
    llm_sampler_free(s);
}

static void test_seeding(void)
{
    th_rng r = {77};
    float l[64];
    for (int i = 0; i < 64; i++) l[i] = (float)th_uniform(&r, -1, 1);
    int32_t a[40], b[40], c[40], d[40];
    llm_sampler *s1 = make(1.0f, 0, 1.0f, 0.0f, 2024), *s2 = make(1.0f, 0, 1.0f, 0.0f, 2024),
                *s3 = make(1.0f, 0, 1.0f, 0.0f, 2025);
    for (int i = 0; i < 40; i++) {
        a[i] = llm_sampler_sample(s1, l, 64, NULL, 0);
        b[i] = llm_sampler_sample(s2, l, 64, NULL, 0);
        c[i] = llm_sampler_sample(s3, l, 64, NULL, 0);
    }
    llm_sampler_reset(s1);
    for (int i = 0; i < 40; i++) d[i] = llm_sampler_sample(s1, l, 64, NULL, 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, d, sizeof a) == 0);
    CHECK(memcmp(a, c, sizeof a) != 0);
    CHECK(llm_sampler_get_params(s3)->seed == 2025);
    llm_sampler_free(s1), llm_sampler_free(s2), llm_sampler_free(s3);
}

static void test_errors(void)
{
    llm_sampler_params p;
    llm_sampler_params_default(&p);
    llm_sampler *s = NULL;
    CHECK_STATUS(llm_sampler_new(NULL, &s), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_sampler_new(&p, NULL), CT_ERR_INVALID_ARG);
    p.temperature = NAN;
    CHECK_STATUS(llm_sampler_new(&p, &s), CT_ERR_INVALID_ARG);
    p.temperature = 1;
    p.repeat_penalty = 0;
    CHECK_STATUS(llm_sampler_new(&p, &s), CT_ERR_INVALID_ARG);
    p.repeat_penalty = 1;
    p.repeat_last_n = -2;
    CHECK_STATUS(llm_sampler_new(&p, &s), CT_ERR_INVALID_ARG);
    CHECK(s == NULL);
    p.repeat_last_n = 64;
    CHECK_OK(llm_sampler_new(&p, &s));
    float l[3] = {0, 1, 2};
    ct_clear_error();
    CHECK(llm_sampler_sample(s, NULL, 3, NULL, 0) == -1 && ct_last_error()[0]);
    ct_clear_error();
    CHECK(llm_sampler_sample(s, l, 0, NULL, 0) == -1 && ct_last_error()[0]);
    ct_clear_error();
    CHECK(llm_sampler_sample(s, l, 3, NULL, 2) == -1 && ct_last_error()[0]);
    CHECK(llm_sampler_sample(NULL, l, 3, NULL, 0) == -1);
    /* A growing vocabulary reallocates the candidate buffers. */
    float big[1000];
    for (int i = 0; i < 1000; i++) big[i] = (float)(i % 7) * 10.0f;
    int32_t id = llm_sampler_sample(s, big, 1000, NULL, 0);
    CHECK(id >= 0 && id < 1000 && big[id] == 60.0f); /* defaults: min_p 0.05 keeps only the maxima */
    llm_sampler_free(s);
}

int main(void)
{
    RUN(test_greedy);
    RUN(test_top_k_support);
    RUN(test_top_p_and_min_p);
    RUN(test_temperature);
    RUN(test_repeat_penalty);
    RUN(test_seeding);
    RUN(test_errors);
    return th_finish();
}
