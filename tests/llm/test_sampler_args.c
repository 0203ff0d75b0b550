/* Sampler parameters that are refused (NaN top-p / min-p, an infinite repeat
 * penalty) with a message naming them, and settings that must change nothing: a
 * top-k at least the vocabulary size (the same draws as no top-k), a repeat window
 * of 0 (no penalty), a reset of NULL; and a vocabulary with no finite logit, which
 * samples id 0 as documented ("nothing has any mass"). */
#include <string.h>

#include "harness.h"
#include "llm/sampler.h"

static bool msg_has(const char *needle)
{
    bool ok = strstr(ct_last_error(), needle) != NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ct_last_error(), needle);
    return ok;
}

static void test_refused(void)
{
    llm_sampler_params p;
    llm_sampler *s = NULL;
    llm_sampler_params_default(&p);
    p.top_p = NAN;
    CHECK_STATUS(llm_sampler_new(&p, &s), CT_ERR_INVALID_ARG);
    CHECK(msg_has("NaN temperature, top_p or min_p"));
    llm_sampler_params_default(&p);
    p.min_p = NAN;
    CHECK_STATUS(llm_sampler_new(&p, &s), CT_ERR_INVALID_ARG);
    llm_sampler_params_default(&p);
    p.repeat_penalty = INFINITY;
    CHECK_STATUS(llm_sampler_new(&p, &s), CT_ERR_INVALID_ARG);
    CHECK(msg_has("repeat_penalty inf must be finite and > 0"));
    CHECK(s == NULL);
    llm_sampler_reset(NULL);
}

/* The ids drawn from fixed logits by a sampler with params p, n draws. */
static void draws(const llm_sampler_params *p, const float *logits, int V, const int32_t *hist, int nh, int32_t *ids,
                  int n)
{
    llm_sampler *s = NULL;
    CHECK_OK(llm_sampler_new(p, &s));
    for (int i = 0; i < n; i++) ids[i] = s ? llm_sampler_sample(s, logits, V, hist, nh) : -2;
    llm_sampler_free(s);
}

static void test_neutral_settings(void)
{
    enum { V = 6, N = 64 };
    const float logits[V] = {0.5f, 1.0f, -0.25f, 0.75f, 0.0f, 1.25f};
    llm_sampler_params p = {1.0f, 0, 1.0f, 0.0f, 1.0f, 0, 42};
    int32_t a[N], b[N];
    draws(&p, logits, V, NULL, 0, a, N);
    p.top_k = V; /* keeps everything */
    draws(&p, logits, V, NULL, 0, b, N);
    CHECK(!memcmp(a, b, sizeof a));
    p.top_k = V + 5;
    draws(&p, logits, V, NULL, 0, b, N);
    CHECK(!memcmp(a, b, sizeof a));
    bool varied = false; /* the stream really samples: several ids come up */
    for (int i = 1; i < N; i++) varied = varied || a[i] != a[0];
    CHECK(varied);
    /* repeat window 0: the penalty is off, so greedy keeps id 5 although it is in the history */
    int32_t hist[3] = {5, 5, 1};
    llm_sampler_params g = {0.0f, 0, 1.0f, 0.0f, 4.0f, 0, 1};
    draws(&g, logits, V, hist, 3, b, 1);
    CHECK(b[0] == 5);
    g.repeat_last_n = 3; /* on: ids 5 and 1 drop to 0.3125 and 0.25, so id 3 (0.75) wins */
    draws(&g, logits, V, hist, 3, b, 1);
    CHECK(b[0] == 3);
}

static void test_no_mass(void)
{
    const float logits[4] = {-INFINITY, NAN, -INFINITY, NAN};
    llm_sampler_params p = {0.7f, 2, 0.9f, 0.1f, 1.0f, 0, 3};
    int32_t id;
    draws(&p, logits, 4, NULL, 0, &id, 1);
    CHECK(id == 0);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_refused);
    RUN(test_neutral_settings);
    RUN(test_no_mass);
    return th_finish();
}
