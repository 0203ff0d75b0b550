/* Generation: evaluate, sample, stream, feed back. Buffers (history, logits)
 * are allocated once per session, so the decode loop allocates nothing of its own. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/config.h"
#include "core/cpuid.h"
#include "core/tensor.h"
#include "llm/generate.h"

double llm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

#define LOGITS_ALIGN 4096 /* whole pages: pinning locks no page of another allocation */
#define LOGITS_TAIL 16     /* floats after a row: the device's choice of the next token */

static size_t logits_bytes(int n_vocab)
{
    size_t bytes = ((size_t)n_vocab + LOGITS_TAIL) * sizeof(float);
    return (bytes + LOGITS_ALIGN - 1) / LOGITS_ALIGN * LOGITS_ALIGN;
}

/* Every decoded token's logits are read back into these rows: page-locked, a GPU writes
 * them by DMA at full speed instead of through the driver's staging (1 MiB a token for a
 * 262k vocabulary). Pageable memory works too, slower: a refusal is only logged. */
static ct_status alloc_logits(llm_session *s)
{
    size_t bytes = logits_bytes(s->m->hp.n_vocab);
    for (int i = 0; i < 3; i++) {
        s->lbuf[i] = aligned_alloc(LOGITS_ALIGN, bytes);
        if (!s->lbuf[i]) return core_err(CT_ERR_OOM, "llm_session_init: out of memory for the logits rows");
        if (ct_host_pin(s->lbuf[i], bytes) == CT_OK) s->lbuf_pinned[i] = true;
        else
            core_log(CT_LOG_WARN, "%s: a logits row stays pageable (%s): reading logits back is slower", s->m->name,
                     ct_last_error());
    }
    s->logits = s->lbuf[0];
    return CT_OK;
}

ct_status llm_session_init(llm_session *s, const llm_model *m, int n_ctx, ct_dtype kv_dtype,
                           const llm_sampler_params *sp)
{
    if (!s || !m) return core_err(CT_ERR_INVALID_ARG, "llm_session_init: NULL argument");
    *s = (llm_session){.m = m};
    llm_detok_init(&s->detok);
    ct_status st = llm_kv_cache_init(&s->kv, m, n_ctx, kv_dtype);
    if (st != CT_OK) return st;
    llm_sampler_params def;
    if (!sp) {
        llm_sampler_params_default(&def);
        def.temperature = 0;
        sp = &def;
    }
    if ((st = llm_sampler_new(sp, &s->smp)) != CT_OK) goto fail;
    s->hist = malloc((size_t)n_ctx * sizeof *s->hist);
    if (!s->hist) {
        st = core_err(CT_ERR_OOM, "llm_session_init: out of memory for a %d-token context", n_ctx);
        goto fail;
    }
    if ((st = alloc_logits(s)) != CT_OK) goto fail;
    return CT_OK;
fail:
    llm_session_free(s);
    return st;
}

void llm_session_free(llm_session *s)
{
    if (!s) return;
    llm_decoder_free(s->dec); /* before the cache it references */
    llm_kv_cache_free(&s->kv);
    llm_sampler_free(s->smp);
    free(s->hist);
    for (int i = 0; i < 3; i++) {
        if (s->lbuf_pinned[i]) ct_host_unpin(s->lbuf[i]); /* before the memory goes back */
        free(s->lbuf[i]);
    }
    *s = (llm_session){0};
}

void llm_session_reset(llm_session *s)
{
    llm_session_drain(s);
    llm_kv_cache_clear(&s->kv);
    if (s->smp) llm_sampler_reset(s->smp);
    s->have_logits = false;
    llm_detok_init(&s->detok);
}

void llm_session_truncate(llm_session *s, int n)
{
    llm_session_drain(s);
    if (n < 0) n = 0;
    if (n < s->kv.n_past) {
        s->kv.n_past = n;
        s->have_logits = false;
    }
}

/* Whether a float's bits have every exponent bit set (NaN or infinite), as bit 31 of the
 * word: adding one exponent step to the exponent field alone carries into the sign bit
 * only from all ones. Integer AND / ADD / OR, so lanes need no compare and no branch. */
#define NONFINITE_BIT(b) (((b) & 0x7f800000u) + 0x00800000u)

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
/* 128 floats a pass in four independent OR chains: a 262,144-entry vocabulary is checked
 * every token, while a GPU waits for the next step. The compiler's one-chain SSE2 loop
 * took 25 us for such a row in cache, this 11 (2-core EPYC, Zen 4). */
__attribute__((target("avx2"))) static uint32_t nonfinite_avx2(const float *v, int n, int *done)
{
    const __m256i e = _mm256_set1_epi32(0x7f800000), one = _mm256_set1_epi32(0x00800000);
    __m256i acc[4] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256(),
                      _mm256_setzero_si256()};
    int i = 0;
    for (; i + 128 <= n; i += 128)
        for (int u = 0; u < 16; u++) {
            __m256i b = _mm256_loadu_si256((const __m256i *)(v + i + 8 * u));
            acc[u & 3] = _mm256_or_si256(acc[u & 3], _mm256_add_epi32(_mm256_and_si256(b, e), one));
        }
    *done = i;
    __m256i a = _mm256_or_si256(_mm256_or_si256(acc[0], acc[1]), _mm256_or_si256(acc[2], acc[3]));
    return (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(a)); /* the lanes' bit 31 */
}
#endif

/* Whether any of the n floats is NaN or infinite. The row is scanned in detail only
 * when this finds one. */
bool llm_any_nonfinite(const float *v, int n)
{
    bool any = false;
    int i = 0;
#if defined(__x86_64__) || defined(__i386__)
    /* cpuid traps to the hypervisor in a VM: asked once (a racing first call asks twice) */
    static int avx2 = -1;
    int has = __atomic_load_n(&avx2, __ATOMIC_RELAXED);
    if (has < 0) __atomic_store_n(&avx2, has = cpu_has_avx2_family(), __ATOMIC_RELAXED);
    if (n >= 128 && has && core_simd_cap_env() >= CORE_SIMD_CAP_AVX2) any = nonfinite_avx2(v, n, &i) != 0;
#endif
    uint32_t bad = 0;
    for (; i < n; i++) {
        uint32_t b;
        memcpy(&b, &v[i], sizeof b);
        bad |= NONFINITE_BIT(b);
    }
    return any || (bad & 0x80000000u) != 0;
}

/* Non-finite logits would otherwise sample as all -inf (token 0, often empty
 * text): report them, and name the first stage whose output went bad. */
static ct_status check_logits(llm_session *s, const int32_t *toks, int n, int at)
{
    const int V = s->m->hp.n_vocab;
    if (!llm_any_nonfinite(s->logits, V)) return CT_OK;
    int n_bad = 0, first = -1;
    bool nan = false;
    for (int i = 0; i < V; i++)
        if (!isfinite(s->logits[i])) {
            if (first < 0) first = i;
            nan |= isnan(s->logits[i]);
            n_bad++;
        }
    if (!n_bad) return CT_OK;
    int stage = INT32_MIN;
    bool stage_nan = nan;
    if (llm_forward_find_nonfinite(s->m, &s->kv, toks, n, &stage, &stage_nan) != CT_OK) stage = INT32_MIN;
    char where[96];
    const int L = s->m->hp.n_layer;
    const char *what = stage_nan ? "NaN" : "infinity";
    if (stage == -1) snprintf(where, sizeof where, "the token embedding produced %s", what);
    else if (stage >= 0 && stage < L) snprintf(where, sizeof where, "layer %d produced %s", stage, what);
    else if (stage == L) snprintf(where, sizeof where, "the output norm/projection produced %s", what);
    else snprintf(where, sizeof where, "no layer reproduced it");
    return core_err(CT_ERR_RANGE,
                    "%s: the logits after position %d contain %s (%d of %d values, first at token id %d): %s; "
                    "the weights or activations are not finite",
                    s->m->name, at + n - 1, nan ? "NaN" : "infinity", n_bad, V, first, where);
}

ct_status llm_session_eval(llm_session *s, const int32_t *toks, int n)
{
    if (!s || (!toks && n > 0)) return core_err(CT_ERR_INVALID_ARG, "llm_session_eval: NULL argument");
    if (n <= 0) return CT_OK;
    if (n > s->kv.n_ctx - s->kv.n_past)
        return core_err(CT_ERR_RANGE, "context too long: %d tokens (+%d already in the context) do not fit in %d; "
                        "use a shorter prompt or a larger -c", n, s->kv.n_past, s->kv.n_ctx);
    if (llm_session_in_flight(s))
        return core_err(CT_ERR_INVALID_ARG, "llm_session_eval: %d evaluations still in flight (collect or drain them)",
                        llm_session_in_flight(s));
    int at = s->kv.n_past;
    ct_status st;
    if (n == 1 && llm_replay_enabled()) { /* the recorded step, submitted and collected at once */
        int32_t choice;
        if (toks[0] < 0) /* the decoder reads a negative id as "the device's choice" */
            return core_err(CT_ERR_RANGE, "llm: token id %d is outside the vocabulary [0, %d)", (int)toks[0],
                            s->m->hp.n_vocab);
        st = llm_session_submit(s, toks[0]);
        if (st == CT_OK) st = llm_session_collect(s, &choice);
        if (st == CT_ERR_DEVICE_LOST) return llm_session_recover(s, st, toks, n, at);
        if (st != CT_OK) s->have_logits = false;
        return st;
    }
    ct_tensor *lg = NULL;
    st = llm_forward(s->m, &s->kv, toks, n, false, &lg);
    if (st == CT_OK) st = ct_tensor_to_host(lg, s->logits, (size_t)s->m->hp.n_vocab * sizeof(float));
    ct_tensor_free(lg);
    if (st == CT_OK && (st = check_logits(s, toks, n, at)) != CT_OK) s->kv.n_past = at;
    if (st == CT_ERR_DEVICE_LOST) return llm_session_recover(s, st, toks, n, at);
    if (st != CT_OK) {
        s->have_logits = false;
        return st;
    }
    memcpy(s->hist + at, toks, (size_t)n * sizeof *toks);
    s->have_logits = true;
    return CT_OK;
}

int llm_session_in_flight(const llm_session *s) { return s ? llm_decoder_in_flight(s) : 0; }

bool llm_session_can_pipeline(const llm_session *s)
{
    return s && llm_replay_enabled() && config_current()->pipeline != 0 && llm_decoder_chooses(s);
}

void llm_session_drain(llm_session *s)
{
    if (s) llm_decoder_drain(s);
}

ct_status llm_session_submit(llm_session *s, int32_t tok)
{
    if (!s) return core_err(CT_ERR_INVALID_ARG, "llm_session_submit: NULL session");
    if (!llm_replay_enabled())
        return core_err(CT_ERR_INVALID_ARG,
                        "llm_session_submit: decoding is eager (CTORCH_REPLAY=0): use llm_session_eval");
    ct_status st = llm_decoder_submit(s, tok);
    if (st != CT_OK) llm_decoder_drain(s);
    return st;
}

ct_status llm_session_collect(llm_session *s, int32_t *choice)
{
    if (!s || !choice) return core_err(CT_ERR_INVALID_ARG, "llm_session_collect: NULL argument");
    *choice = -1;
    int at = s->kv.n_past;
    int32_t tok;
    ct_status st = llm_decoder_collect(s, &tok, choice);
    double t0 = llm_now();
    if (st == CT_OK && llm_any_nonfinite(s->logits, s->m->hp.n_vocab)) {
        llm_decoder_drain(s); /* the diagnosis runs the model again */
        if ((st = check_logits(s, &tok, 1, at)) != CT_OK) s->kv.n_past = at;
    }
    llm_decoder_add_check(s, llm_now() - t0);
    if (st != CT_OK) {
        llm_decoder_drain(s);
        s->have_logits = false;
        *choice = -1;
        return st;
    }
    s->hist[at] = tok;
    s->have_logits = true;
    return CT_OK;
}

static bool emit(llm_session *s, int32_t id, llm_piece_fn fn, void *ctx)
{
    char buf[256];
    int w = llm_detok_push(&s->detok, s->m->tok, id, buf, (int)sizeof buf);
    if (w < 0 && w != INT32_MIN) {
        char *big = malloc((size_t)-w);
        if (!big) return true;
        int w2 = llm_detok_push(&s->detok, s->m->tok, id, big, -w);
        bool go = w2 <= 0 || !fn || fn(big, w2, ctx);
        free(big);
        return go;
    }
    return w <= 0 || !fn || fn(buf, w, ctx);
}

/* As llama.cpp does for --ignore-eos: a -inf bias on every end-of-generation
 * token, so sampling and the greedy argmax both pass over them. */
static void mask_eog(llm_session *s)
{
    for (int32_t id = 0; id < s->m->hp.n_vocab; id++)
        if (llm_token_is_eog(s->m->tok, id)) s->logits[id] = -INFINITY;
}

/* One token's evaluation in a pipelined generation. *guess is the token the step in
 * flight (if any) evaluates: the device's choice after the step before it. A wrong guess
 * is dropped and id submitted; with `more`, the device's choice after id is queued before
 * id's result is waited for, so the device never waits for the host. An error leaves
 * nothing in flight (the caller evaluates id the ordinary way). */
static ct_status eval_pipelined(llm_session *s, int32_t id, bool more, int32_t *guess)
{
    ct_status st = CT_OK;
    if (llm_session_in_flight(s) && *guess != id) {
        llm_session_drain(s);
        ct_exec_trace_note("pipelined decode: the device's guess was not the sampled token; dropped");
    }
    if (!llm_session_in_flight(s)) st = llm_session_submit(s, id);
    if (st == CT_OK && more && s->kv.n_past + 1 < s->kv.n_ctx) st = llm_session_submit(s, -1);
    if (st == CT_OK) st = llm_session_collect(s, guess);
    return st;
}

ct_status llm_session_generate(llm_session *s, int n_predict, llm_piece_fn fn, void *ctx,
                               volatile sig_atomic_t *stop, llm_gen_stats *stats)
{
    llm_gen_stats local;
    if (!stats) stats = &local;
    *stats = (llm_gen_stats){0};
    if (!s) return core_err(CT_ERR_INVALID_ARG, "llm_session_generate: NULL session");
    if (!s->m->tok) return core_err(CT_ERR_FORMAT, "%s: the model has no tokenizer", s->m->name);
    if (!s->have_logits) return core_err(CT_ERR_INVALID_ARG, "llm_session_generate: evaluate a prompt first");
    const int n_vocab = s->m->hp.n_vocab;
    double t0 = llm_now();
    ct_status st = CT_OK;
    int32_t guess = -1;
    const bool greedy = !(llm_sampler_get_params(s->smp)->temperature > 0.0f);
    for (int i = 0; n_predict < 0 || i < n_predict; i++) {
        if (stop && *stop) {
            stats->interrupted = true;
            break;
        }
        if (s->ignore_eog) mask_eog(s);
        int32_t id = llm_sampler_sample(s->smp, s->logits, n_vocab, s->hist, s->kv.n_past);
        if (id < 0) {
            st = CT_ERR_INVALID_ARG;
            break;
        }
        stats->n_gen++;
        if (llm_token_is_eog(s->m->tok, id)) {
            stats->eog = true;
            break;
        }
        if (!emit(s, id, fn, ctx)) {
            stats->interrupted = true;
            break;
        }
        if (n_predict >= 0 && i + 1 == n_predict) break; /* its logits would go unused */
        if (s->kv.n_past >= s->kv.n_ctx) {
            stats->ctx_full = true;
            break;
        }
        /* pipelined while the step chooses on the device (known after the first replay) and
         * the sampler is greedy: a sampled token would rarely be the device's guess, and each
         * wrong guess costs a step */
        bool more = n_predict < 0 || i + 2 < n_predict;
        st = greedy && llm_session_can_pipeline(s) ? eval_pipelined(s, id, more, &guess) : CT_ERR_UNSUPPORTED;
        /* a pipelined step that failed is redone the ordinary way (a lost device: recovered) */
        if (st == CT_ERR_DEVICE_LOST) st = llm_session_recover(s, st, &id, 1, s->kv.n_past);
        else if (st != CT_OK) st = llm_session_eval(s, &id, 1);
        if (st != CT_OK) {
            char why[400]; /* core_err writes the buffer ct_last_error returns */
            snprintf(why, sizeof why, "%s", ct_last_error());
            core_err(st, "generation step %d (token %d): %s", i + 1, (int)id, why);
            break;
        }
    }
    llm_session_drain(s); /* a guess queued for a token that is not coming */
    char tail[16];
    int w = llm_detok_flush(&s->detok, tail, (int)sizeof tail);
    if (w > 0 && fn) fn(tail, w, ctx);
    stats->t_gen_s = llm_now() - t0;
    return st;
}
