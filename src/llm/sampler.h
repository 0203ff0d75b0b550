/* Next-token sampling from a logit vector.
 *
 * Order (as in llama.cpp's default chain): repetition penalty, top-k, top-p,
 * min-p, temperature, softmax, draw. Greedy (argmax, lowest id on ties) when
 * temperature <= 0. The draw uses the sampler's own counter-free splitmix64
 * stream seeded from params.seed, so a seed gives the same tokens regardless
 * of thread count or platform. */
#ifndef CT_LLM_SAMPLER_H
#define CT_LLM_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "ctorch/core.h"

typedef struct llm_sampler_params {
    float temperature;    /* <= 0: greedy */
    int top_k;            /* <= 0: off */
    float top_p;          /* >= 1: off */
    float min_p;          /* <= 0: off; keeps p >= min_p * p_max */
    float repeat_penalty; /* 1: off; > 1 discourages repeats */
    int repeat_last_n;    /* tokens of history considered; 0: off, -1: all of it */
    uint64_t seed;
} llm_sampler_params;

typedef struct llm_sampler llm_sampler;

/* temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0, repeat_last_n 64, seed 0. */
void llm_sampler_params_default(llm_sampler_params *p);
ct_status llm_sampler_new(const llm_sampler_params *p, llm_sampler **out);
void llm_sampler_free(llm_sampler *s); /* NULL is fine */
/* Restarts the random stream from the seed. */
void llm_sampler_reset(llm_sampler *s);
const llm_sampler_params *llm_sampler_get_params(const llm_sampler *s);

/* Picks a token from logits[0..n_vocab). history[0..n_hist) are the tokens so
 * far (prompt + generated), oldest first, for the repetition penalty; may be
 * NULL when n_hist == 0. Returns the id, or -1 on bad arguments (message via
 * ct_last_error). logits are not modified. */
int32_t llm_sampler_sample(llm_sampler *s, const float *logits, int n_vocab, const int32_t *history, int n_hist);

#endif
