/* The generation loop shared by `ctorch run`, `chat` and the tests: a session
 * owns a KV cache, a sampler and the token history; it evaluates prompts in
 * one batch and then samples, streams and feeds back one token at a time. */
#ifndef CT_LLM_GENERATE_H
#define CT_LLM_GENERATE_H

#include <signal.h>

#include "llm/model.h"
#include "llm/sampler.h"
#include "llm/tokenizer.h"

/* The recorded decode step of a session (decode_step.c). */
typedef struct llm_decoder llm_decoder;

typedef struct llm_session {
    const llm_model *m;
    llm_kv_cache kv;
    llm_sampler *smp;
    int32_t *hist;     /* [n_ctx] the tokens in the cache, in order */
    float *logits;     /* [n_vocab] logits after the last evaluated token: one of lbuf */
    /* Where logits land: the current row, and the rows of up to two evaluations still
     * in flight (llm_session_submit), each with room after the row for the device's
     * choice of the next token. Page-locked where a device can (ct_host_pin): devices
     * write them at full speed, and CUDA's reads into pageable memory would wait for
     * everything queued. */
    float *lbuf[3];
    bool lbuf_pinned[3];
    bool have_logits;
    llm_detok detok;
    bool ignore_eog;   /* end-of-generation tokens are never sampled (llama.cpp's --ignore-eos) */
    llm_decoder *dec;  /* one-token evaluations replay this recorded step (NULL until the first) */
} llm_session;

typedef struct llm_gen_stats {
    int n_gen;             /* tokens sampled */
    double t_gen_s;        /* seconds spent sampling and decoding them */
    bool eog;              /* stopped at an end-of-generation token */
    bool ctx_full;         /* stopped because the context is full */
    bool interrupted;      /* *stop was set or the callback asked to stop */
} llm_gen_stats;

/* Called with each piece of generated text (complete UTF-8); return false to stop. */
typedef bool (*llm_piece_fn)(const char *text, int len, void *ctx);

/* Whether any of v[0..n) is NaN or infinite (a branch-free scan the compiler vectorizes:
 * every logits row is checked with it before sampling). */
bool llm_any_nonfinite(const float *v, int n);

ct_status llm_session_init(llm_session *s, const llm_model *m, int n_ctx, ct_dtype kv_dtype,
                           const llm_sampler_params *sp);
void llm_session_free(llm_session *s);
/* Empties the cache and the history; restarts the sampler's stream. */
void llm_session_reset(llm_session *s);
/* Keeps only the first n cached tokens (n <= current count), so a new prompt
 * sharing that prefix need only evaluate the rest. */
void llm_session_truncate(llm_session *s, int n);
static inline int llm_session_n_past(const llm_session *s) { return s->kv.n_past; }

/* Evaluates tokens in one batch pass; keeps the last position's logits.
 * CT_ERR_RANGE with a clear message when they do not fit in the context. */
ct_status llm_session_eval(llm_session *s, const int32_t *toks, int n);
/* After an evaluation of toks[0..n) at position `at` failed with st ==
 * CT_ERR_DEVICE_LOST (recover.c): a fresh KV cache, the weights made resident on
 * the chain's first healthy device, the history hist[0..at) evaluated again, then
 * toks; once per newly lost device. Logs "device X lost: recovered on Y by
 * replaying N tokens". Any other status is returned as it is. */
ct_status llm_session_recover(llm_session *s, ct_status st, const int32_t *toks, int n, int at);
/* Samples up to n_predict tokens (< 0: until end of generation or a full
 * context) from the kept logits, streams their text through fn and feeds each
 * back. An end-of-generation token ends the loop and is not fed back. */
ct_status llm_session_generate(llm_session *s, int n_predict, llm_piece_fn fn, void *ctx,
                               volatile sig_atomic_t *stop, llm_gen_stats *stats);

/* Pipelined decoding: up to two one-token evaluations in flight on a device, each read
 * back while the next one runs. llm_session_submit queues the evaluation of tok at the
 * position after every evaluation already submitted (tok < 0: the token that the step
 * before it chose on the device, the argmax of its logits); it returns before the
 * device is done. llm_session_collect waits for the oldest one: its logits become
 * s->logits (checked as llm_session_eval checks them), n_past advances, and *choice is
 * the device's argmax of them (-1 when the step does not choose). A generation keeps
 * the device busy by submitting the guessed next token before collecting the current
 * one and drops the guess (llm_session_drain) when the sampler picks another. On an
 * error nothing is left in flight: the failed evaluation and any after it are dropped,
 * and llm_session_eval redoes them (recording again, recovering a lost device). */
ct_status llm_session_submit(llm_session *s, int32_t tok);
ct_status llm_session_collect(llm_session *s, int32_t *choice);
/* Waits for the evaluations in flight and drops them: n_past and s->logits stay. */
void llm_session_drain(llm_session *s);
/* Evaluations in flight. */
int llm_session_in_flight(const llm_session *s);
/* Whether the session's decode step chooses the next token on the device, so that a
 * pipelined generation pays (a recorded step whose logits come from a device that
 * CTORCH_PIPELINE takes: auto, the default, takes CUDA devices); false before the first
 * one-token evaluation. */
bool llm_session_can_pipeline(const llm_session *s);

/* CTORCH_REPLAY (default on): one-token evaluations replay a recorded step. */
bool llm_replay_enabled(void);
/* Queues one token's evaluation by replaying the session's decode step (recording it
 * first when there is none or it is stale; only with nothing in flight) at position
 * n_past + in flight, its logits read back into a free row of s->lbuf (see
 * llm_session_submit). */
ct_status llm_decoder_submit(llm_session *s, int32_t tok);
/* Waits for the oldest queued evaluation: s->logits = its row, n_past advances, *tok its
 * input token and *choice the device's argmax (-1: none). */
ct_status llm_decoder_collect(llm_session *s, int32_t *tok, int32_t *choice);
/* Waits for every queued evaluation and drops it. */
void llm_decoder_drain(llm_session *s);
int llm_decoder_in_flight(const llm_session *s);
bool llm_decoder_chooses(const llm_session *s);
void llm_decoder_free(llm_decoder *d);
/* Recordings the session's decoder has made (tests: a stale step is remade). */
int llm_decoder_records(const llm_session *s);
/* The host's side of the replayed decode tokens so far (seconds, summed): writing the
 * step's parameters, the replay call (the launch; the device runs on), and reading the
 * logits (which waits for the device). Recorded tokens are not counted. */
typedef struct llm_decoder_times {
    long tokens;
    double params, replay, logits;
    double check; /* the session's non-finite check of those logits */
} llm_decoder_times;
/* False when no step is recorded; else the times and the step's info (its host_*_ns). */
bool llm_decoder_get_times(const llm_session *s, llm_decoder_times *t, ct_step_info *step);
/* Adds the check of a replayed token's logits to the decoder's times. */
void llm_decoder_add_check(llm_session *s, double seconds);

/* Seconds from a monotonic clock. */
double llm_now(void);

#endif
