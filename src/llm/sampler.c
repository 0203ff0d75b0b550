/* Next-token sampler: repetition penalty, top-k, top-p, min-p, temperature,
 * softmax, draw (see sampler.h). NaN logits count as -inf; the caller's logits
 * stay untouched. Over a large vocabulary (Gemma's 262,144) greedy and top-k are
 * one read-only pass over the logits that skips blocks of 16 with nothing above
 * the current best / the k-th best, around the few penalised ids (handled one by
 * one); only the k kept candidates are copied, sorted, and given probabilities. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "llm/sampler.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

static int id_cmp(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* The distinct in-vocabulary ids of the penalty window, ascending, into s->seen;
 * returns their count (0 when the penalty is off). Each is penalised once,
 * however often it occurs. */
static int penalised_ids(llm_sampler *s, int n_vocab, const int32_t *hist, int n_hist)
{
    int last = s->p.repeat_last_n < 0 ? n_hist : s->p.repeat_last_n;
    if (s->p.repeat_penalty == 1.0f || last == 0 || n_hist == 0) return 0;
    int from = n_hist > last ? n_hist - last : 0;
    if (s->cap_seen < n_hist - from) {
        int32_t *v = realloc(s->seen, sizeof(int32_t) * (size_t)(n_hist - from));
        if (!v) {
            core_err(CT_ERR_OOM, "llm_sampler_sample: out of memory for the penalty window");
            return -1;
        }
        s->seen = v;
        s->cap_seen = n_hist - from;
    }
    int n_seen = 0;
    for (int i = from; i < n_hist; i++) {
        int32_t id = hist[i];
        if (id < 0 || id >= n_vocab || s->mark[id]) continue;
        s->mark[id] = 1;
        s->seen[n_seen++] = id;
    }
    for (int i = 0; i < n_seen; i++) s->mark[s->seen[i]] = 0;
    qsort(s->seen, (size_t)n_seen, sizeof(int32_t), id_cmp);
    return n_seen;
}

/* The logit the filters see: penalised when id is in the window, NaN as -inf. */
static float effective(const llm_sampler *s, float l, bool penalised)
{
    if (isnan(l)) return -INFINITY;
    if (!penalised) return l;
    float pen = s->p.repeat_penalty;
    return l > 0.0f ? l / pen : l * pen;
}

/* Is any of x[0..16) above thr? NaN never is. Both scans below pass over most blocks
 * of a large vocabulary with this test alone. */
static inline bool any_above16(const float *x, float thr)
{
#if defined(__SSE2__)
    __m128 t = _mm_set1_ps(thr);
    __m128 a = _mm_or_ps(_mm_cmpgt_ps(_mm_loadu_ps(x), t), _mm_cmpgt_ps(_mm_loadu_ps(x + 4), t));
    __m128 b = _mm_or_ps(_mm_cmpgt_ps(_mm_loadu_ps(x + 8), t), _mm_cmpgt_ps(_mm_loadu_ps(x + 12), t));
    return _mm_movemask_ps(_mm_or_ps(a, b)) != 0;
#else
    int any = 0;
    for (int j = 0; j < 16; j++) any |= x[j] > thr;
    return any;
#endif
}

/* ---- greedy: one pass ---- */
typedef struct argmax_state {
    int32_t best;
    float best_l;
} argmax_state;

static void argmax_one(argmax_state *a, int32_t id, float l)
{
    if (l > a->best_l) a->best = id, a->best_l = l;
}

/* Raw (unpenalised) logits[from..to): NaN never compares greater, so it counts as -inf. */
static void argmax_range(argmax_state *a, const float *logits, int from, int to)
{
    int i = from;
    for (; i + 16 <= to; i += 16)
        if (any_above16(logits + i, a->best_l))
            for (int j = 0; j < 16; j++) argmax_one(a, i + j, logits[i + j]);
    for (; i < to; i++) argmax_one(a, i, logits[i]);
}

/* Argmax of the effective logits, lowest id on ties; 0 when none is above -inf. */
static int32_t greedy(const llm_sampler *s, const float *logits, int n_vocab, const int32_t *pen, int n_pen)
{
    argmax_state a = {0, effective(s, logits[0], n_pen > 0 && pen[0] == 0)};
    int at = 1;
    for (int p = 0; p < n_pen; p++) {
        if (pen[p] < at) continue; /* id 0, done above */
        argmax_range(&a, logits, at, pen[p]);
        argmax_one(&a, pen[p], effective(s, logits[pen[p]], true));
        at = pen[p] + 1;
    }
    argmax_range(&a, logits, at, n_vocab);
    return a.best;
}

/* ---- top-k: a size-k heap of the best so far, worst at the root ---- */
typedef struct topk_state {
    cand *h;
    int n, k;
} topk_state;

static void topk_offer(topk_state *t, int32_t id, float l)
{
    cand x = {id, l};
    if (t->n < t->k) {
        int j = t->n++;
        for (; j > 0; j = (j - 1) / 2) { /* sift up */
            int up = (j - 1) / 2;
            if (!cand_before(&t->h[up], &x)) break;
            t->h[j] = t->h[up];
        }
        t->h[j] = x;
        return;
    }
    if (!cand_before(&x, &t->h[0])) return;
    for (int j = 0;;) { /* sift down from the root */
        int l1 = 2 * j + 1, worst = -1;
        cand *w = &x;
        if (l1 < t->k && cand_before(w, &t->h[l1])) worst = l1, w = &t->h[l1];
        if (l1 + 1 < t->k && cand_before(w, &t->h[l1 + 1])) worst = l1 + 1;
        if (worst < 0) {
            t->h[j] = x;
            return;
        }
        t->h[j] = t->h[worst];
        j = worst;
    }
}

/* Raw logits[from..to). Once the heap is full, a block of 16 with no value above the
 * root's is passed over with one vectorized comparison: ids arrive in ascending order,
 * so a tie with the root (whose id is lower) never displaces it, nor does NaN (-inf). */
static void topk_range(topk_state *t, const float *logits, int from, int to)
{
    int i = from;
    for (; i < to && t->n < t->k; i++) topk_offer(t, i, isnan(logits[i]) ? -INFINITY : logits[i]);
    for (; i + 16 <= to; i += 16) {
        const float *x = logits + i;
        if (!any_above16(x, t->h[0].logit)) continue;
        for (int j = 0; j < 16; j++) topk_offer(t, i + j, isnan(x[j]) ? -INFINITY : x[j]);
    }
    for (; i < to; i++) topk_offer(t, i, isnan(logits[i]) ? -INFINITY : logits[i]);
}

/* The k best effective logits (by cand_before) into s->c[0..k), in any order. */
static void top_k(llm_sampler *s, const float *logits, int n_vocab, int k, const int32_t *pen, int n_pen)
{
    topk_state t = {s->c, 0, k};
    int at = 0;
    for (int p = 0; p < n_pen; p++) {
        topk_range(&t, logits, at, pen[p]);
        topk_offer(&t, pen[p], effective(s, logits[pen[p]], true));
        at = pen[p] + 1;
    }
    topk_range(&t, logits, at, n_vocab);
}

int32_t llm_sampler_sample(llm_sampler *s, const float *logits, int n_vocab, const int32_t *history, int n_hist)
{
    if (!s || !logits || n_vocab <= 0 || n_hist < 0 || (n_hist > 0 && !history)) {
        core_err(CT_ERR_INVALID_ARG, "llm_sampler_sample: NULL sampler/logits/history or n_vocab %d, n_hist %d", n_vocab,
                 n_hist);
        return -1;
    }
    if (ensure_cap(s, n_vocab)) return -1;
    int n_pen = penalised_ids(s, n_vocab, history, n_hist);
    if (n_pen < 0) return -1;
    const int32_t *pen = s->seen;
    if (!(s->p.temperature > 0.0f)) return greedy(s, logits, n_vocab, pen, n_pen);

    cand *c = s->c;
    int n = n_vocab;
    bool sorted = false;
    if (s->p.top_k > 0 && s->p.top_k < n) {
        n = s->p.top_k;
        top_k(s, logits, n_vocab, n, pen, n_pen);
        /* a canonical order for the sums below, so they do not depend on how the
         * set was found */
        qsort(c, (size_t)n, sizeof(cand), cand_cmp);
        sorted = true;
    } else {
        for (int i = 0; i < n_vocab; i++) c[i] = (cand){i, isnan(logits[i]) ? -INFINITY : logits[i]};
        for (int p = 0; p < n_pen; p++) c[pen[p]].logit = effective(s, logits[pen[p]], true);
    }
    /* Probabilities before temperature, as top-p and min-p see them. */
    double max = -INFINITY, sum = 0.0;
    for (int i = 0; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    if (max == -INFINITY) return 0; /* nothing has any mass */
    for (int i = 0; i < n; i++) sum += exp((double)c[i].logit - max);
    if (s->p.min_p > 0.0f) {
        /* p_i >= min_p * p_max; min_p >= 1 keeps just the top */
        double floor_logit = s->p.min_p >= 1.0f ? max : max + log((double)s->p.min_p);
        if (sorted) {
            while (n > 1 && !(c[n - 1].logit >= floor_logit)) n--; /* the top itself passes */
        } else {
            /* min-p and top-p both keep a prefix of the sorted list, so min-p's cut can
             * come first and spare sorting the whole vocabulary */
            int m = 0;
            for (int i = 0; i < n; i++)
                if (c[i].logit >= floor_logit) {
                    cand t = c[m];
                    c[m++] = c[i], c[i] = t;
                }
            n = m; /* >= 1: the max itself passes */
        }
    }
    if (!sorted) qsort(c, (size_t)n, sizeof(cand), cand_cmp);
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
