/* Next-token sampler: repetition penalty, top-k, top-p, min-p, temperature,
 * softmax, draw (see sampler.h). Works on a private candidate list so the
 * caller's logits stay untouched. NaN logits count as -inf. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "llm/sampler.h"

typedef struct cand {
    int32_t id;
    float logit;
} cand;

struct llm_sampler {
    llm_sampler_params p;
    uint64_t rng;     /* splitmix64 state */
    cand *c;          /* [cap] candidates */
    int cap;
    int32_t *seen;    /* [cap_seen] ids already penalised in this call (dedup) */
    uint8_t *mark;    /* [cap] per-id flag for the dedup */
    int cap_seen;
};

void llm_sampler_params_default(llm_sampler_params *p)
{
    p->temperature = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->seed = 0;
}

ct_status llm_sampler_new(const llm_sampler_params *p, llm_sampler **out)
{
    if (!out) return core_err(CT_ERR_INVALID_ARG, "llm_sampler_new: out is NULL");
    *out = NULL;
    if (!p) return core_err(CT_ERR_INVALID_ARG, "llm_sampler_new: params is NULL");
    if (isnan(p->temperature) || isnan(p->top_p) || isnan(p->min_p))
        return core_err(CT_ERR_INVALID_ARG, "llm_sampler_new: NaN temperature, top_p or min_p");
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return core_err(CT_ERR_INVALID_ARG, "llm_sampler_new: repeat_penalty %g must be finite and > 0",
                        (double)p->repeat_penalty);
    if (p->repeat_last_n < -1)
        return core_err(CT_ERR_INVALID_ARG, "llm_sampler_new: repeat_last_n %d must be >= -1", p->repeat_last_n);
    llm_sampler *s = calloc(1, sizeof *s);
    if (!s) return core_err(CT_ERR_OOM, "llm_sampler_new: out of memory");
    s->p = *p;
    s->rng = p->seed;
    *out = s;
    return CT_OK;
}

void llm_sampler_free(llm_sampler *s)
{
    if (!s) return;
    free(s->c);
    free(s->seen);
    free(s->mark);
    free(s);
}

void llm_sampler_reset(llm_sampler *s)
{
    if (s) s->rng = s->p.seed;
}

const llm_sampler_params *llm_sampler_get_params(const llm_sampler *s) { return &s->p; }

static double next_uniform(llm_sampler *s)
{
    uint64_t z = (s->rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53; /* [0, 1) */
}

/* Descending logit, then ascending id: a total order, so results never depend
 * on the sort algorithm. */
static bool cand_before(const cand *a, const cand *b)
{
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    return cand_before(x, y) ? -1 : cand_before(y, x) ? 1 : 0;
}

/* Moves the k best candidates to the front (any order) via a size-k min-heap: O(n log k). */
static void select_top_k(cand *c, int n, int k)
{
    for (int i = 1; i < k; i++) { /* heapify the first k, worst at the root */
        for (int j = i; j > 0;) {
            int up = (j - 1) / 2;
            if (!cand_before(&c[up], &c[j])) break;
            cand t = c[up];
            c[up] = c[j], c[j] = t;
            j = up;
        }
    }
    for (int i = k; i < n; i++) {
        if (!cand_before(&c[i], &c[0])) continue;
        cand t = c[0];
        c[0] = c[i], c[i] = t;
        for (int j = 0;;) {
            int l = 2 * j + 1, worst = j;
            if (l < k && cand_before(&c[worst], &c[l])) worst = l;
            if (l + 1 < k && cand_before(&c[worst], &c[l + 1])) worst = l + 1;
            if (worst == j) break;
            t = c[j], c[j] = c[worst], c[worst] = t;
            j = worst;
        }
    }
}

static ct_status ensure_cap(llm_sampler *s, int n_vocab)
{
    if (n_vocab <= s->cap) return CT_OK;
    cand *c = realloc(s->c, sizeof(cand) * (size_t)n_vocab);
    if (!c) return core_err(CT_ERR_OOM, "llm_sampler_sample: out of memory for %d candidates", n_vocab);
    s->c = c;
    uint8_t *m = realloc(s->mark, (size_t)n_vocab);
    if (!m) return core_err(CT_ERR_OOM, "llm_sampler_sample: out of memory for %d candidates", n_vocab);
    memset(m, 0, (size_t)n_vocab);
    s->mark = m;
    s->cap = n_vocab;
    return CT_OK;
}

/* Each distinct token of the window is penalised once, however often it occurs. */
static ct_status apply_penalty(llm_sampler *s, int n_vocab, const int32_t *hist, int n_hist)
{
    float pen = s->p.repeat_penalty;
    int last = s->p.repeat_last_n < 0 ? n_hist : s->p.repeat_last_n;
    if (pen == 1.0f || last == 0 || n_hist == 0) return CT_OK;
    int from = n_hist > last ? n_hist - last : 0;
    if (s->cap_seen < n_hist - from) {
        int32_t *v = realloc(s->seen, sizeof(int32_t) * (size_t)(n_hist - from));
        if (!v) return core_err(CT_ERR_OOM, "llm_sampler_sample: out of memory for the penalty window");
        s->seen = v;
        s->cap_seen = n_hist - from;
    }
    int n_seen = 0;
    for (int i = from; i < n_hist; i++) {
        int32_t id = hist[i];
        if (id < 0 || id >= n_vocab || s->mark[id]) continue;
        s->mark[id] = 1;
        s->seen[n_seen++] = id;
        float *l = &s->c[id].logit; /* candidates are still in id order here */
        *l = *l > 0.0f ? *l / pen : *l * pen;
    }
    for (int i = 0; i < n_seen; i++) s->mark[s->seen[i]] = 0;
    return CT_OK;
}

int32_t llm_sampler_sample(llm_sampler *s, const float *logits, int n_vocab, const int32_t *history, int n_hist)
{
    if (!s || !logits || n_vocab <= 0 || n_hist < 0 || (n_hist > 0 && !history)) {
        core_err(CT_ERR_INVALID_ARG, "llm_sampler_sample: NULL sampler/logits/history or n_vocab %d, n_hist %d", n_vocab,
                 n_hist);
        return -1;
    }
    if (ensure_cap(s, n_vocab)) return -1;
    cand *c = s->c;
    for (int i = 0; i < n_vocab; i++) c[i] = (cand){i, isnan(logits[i]) ? -INFINITY : logits[i]};
    if (apply_penalty(s, n_vocab, history, n_hist)) return -1;

    if (!(s->p.temperature > 0.0f)) {
        int best = 0;
        for (int i = 1; i < n_vocab; i++)
            if (c[i].logit > c[best].logit) best = i;
        return c[best].id;
    }

    int n = n_vocab;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        select_top_k(c, n, s->p.top_k);
        n = s->p.top_k;
    }
    /* Probabilities before temperature, as top-p and min-p see them. */
    double max = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    if (max == -INFINITY) return 0; /* nothing has any mass */
    for (int i = 0; i < n; i++) sum += exp((double)c[i].logit - max);
    /* min-p and top-p both keep a prefix of the sorted list, so min-p's cut can
     * come first and spare sorting the whole vocabulary. */
    if (s->p.min_p > 0.0f) {
        /* p_i >= min_p * p_max; min_p >= 1 keeps just the top */
        double floor_logit = s->p.min_p >= 1.0f ? max : max + log((double)s->p.min_p);
        int m = 0;
        for (int i = 0; i < n; i++)
            if (c[i].logit >= floor_logit) {
                cand t = c[m];
                c[m++] = c[i], c[i] = t;
            }
        n = m; /* >= 1: the max itself passes */
    }
    qsort(c, (size_t)n, sizeof(cand), cand_cmp);
    if (s->p.top_p < 1.0f) {
        double cum = 0.0, target = (double)s->p.top_p * sum;
        for (int i = 0; i < n; i++) {
            cum += exp((double)c[i].logit - max);
            if (cum >= target) {
                n = i + 1;
                break;
            }
        }
    }

    double inv_t = 1.0 / (double)s->p.temperature;
    sum = 0.0;
    for (int i = 0; i < n; i++) sum += exp(((double)c[i].logit - max) * inv_t);
    double u = next_uniform(s) * sum, cum = 0.0;
    for (int i = 0; i < n; i++) {
        cum += exp(((double)c[i].logit - max) * inv_t);
        if (u < cum) return c[i].id;
    }
    return c[n - 1].id; /* rounding left u at the very top */
}
