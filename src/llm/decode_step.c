/* Decode by replaying one recorded step. The values that change per token (the
 * token id, its position, the KV rows it writes, the attended length) live in small
 * tensors written before each replay, so the recording made at the first decode token
 * serves every later one. It is made again when the executor says it is stale (the
 * chain changed, a tensor was placed, a device was lost) or the session's KV cache is
 * another one; the trace says why. CTORCH_REPLAY=0 decodes eagerly instead.
 *
 * Pipelining (CTORCH_PIPELINE; by default on CUDA devices): when the model's output
 * projection lives on such a device, the step ends with the argmax of its logits written
 * into the token tensor the step reads, so the next step can be queued before this one
 * is read back, guessing that the sampler picks the argmax (greedy decoding does;
 * generate.c checks every guess and drops a wrong one). Each queued step's logits and
 * choice are read back asynchronously into a row of the session's lbuf. Between tokens
 * a device then waits for no host work: the readback, the sampler, the parameters'
 * upload and the launch of the next step all overlap the step in flight. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/config.h"
#include "core/tensor.h"
#include "llm/generate.h"

#define PIPE_DEPTH 2

/* One queued evaluation. */
typedef struct pipe_slot {
    int32_t tok;     /* its input token; -1: the previous step's choice */
    float *row;      /* one of the session's lbuf: its logits, then its choice */
    ct_event *ev[2]; /* the readbacks still landing there (NULL: none, or done) */
} pipe_slot;

struct llm_decoder {
    ct_step *step;
    /* the step's parameters: views of one host tensor [pos, len, slot 0..Hkv-1], so a
     * replay uploads them in one copy */
    ct_tensor *params, *pos, *slot, *len;
    /* [1] i32 of its own storage: the token the step reads, written by the host or, when
     * the step chooses, by the step itself (its argmax) for the step after it */
    ct_tensor *tok;
    ct_tensor *logits;                 /* the step's output: each replay's logits */
    bool chooses;                      /* the step ends by writing its argmax into tok */
    /* The cache the step was recorded against: its storage, which the step keeps a
     * reference to, so a new cache can never be at the same address. */
    const ct_storage *kv_st;
    int n_ctx;
    int records;                       /* recordings made (the first, and each remake) */
    pipe_slot q[PIPE_DEPTH];           /* queued evaluations, oldest first */
    int n_q;
    int32_t last_choice;               /* the last collected step's choice (-1: none) */
    llm_decoder_times times;           /* the host's time per phase, summed over tokens */
};

bool llm_replay_enabled(void) { return config_current()->replay; }

static void slot_release(pipe_slot *p)
{
    for (int i = 0; i < 2; i++) {
        event_release(p->ev[i]);
        p->ev[i] = NULL;
    }
}

/* Waits for a slot's readbacks; a late error there marks the device lost. */
static ct_status slot_wait(pipe_slot *p)
{
    ct_status st = CT_OK;
    for (int i = 0; i < 2; i++)
        if (p->ev[i] && st == CT_OK) st = event_order(NULL, p->ev[i]);
    slot_release(p);
    return st;
}

void llm_decoder_free(llm_decoder *d)
{
    if (!d) return;
    for (int i = 0; i < d->n_q; i++) slot_wait(&d->q[i]); /* the rows are the session's: nothing lands there later */
    ct_step_free(d->step);
    ct_tensor_free(d->logits);
    ct_tensor_free(d->tok);
    ct_tensor_free(d->pos);
    ct_tensor_free(d->slot);
    ct_tensor_free(d->len);
    ct_tensor_free(d->params);
    free(d);
}

static ct_status decoder_new(const llm_session *s, llm_decoder **out)
{
    llm_decoder *d = calloc(1, sizeof *d);
    if (!d) return core_err(CT_ERR_OOM, "llm: out of memory for the decode step");
    d->last_choice = -1;
    int64_t hkv = s->m->hp.n_head_kv, n = 2 + hkv, one = 1;
    ct_status st = ct_zeros(1, &n, CT_I32, &d->params);
    if (st == CT_OK) st = ct_narrow(d->params, 0, 0, 1, &d->pos);
    if (st == CT_OK) st = ct_narrow(d->params, 0, 1, 1, &d->len);
    if (st == CT_OK) st = ct_narrow(d->params, 0, 2, hkv, &d->slot);
    if (st == CT_OK) st = ct_zeros(1, &one, CT_I32, &d->tok);
    if (st != CT_OK) {
        llm_decoder_free(d);
        return st;
    }
    *out = d;
    return CT_OK;
}

static ct_status write_params(llm_decoder *d, const llm_kv_cache *kv, int at)
{
    int32_t *p;
    ct_status st = ct_tensor_data_mut(d->params, (void **)&p);
    if (st != CT_OK) return st;
    int hkv = (int)ct_tensor_shape(d->slot)[0];
    p[0] = at;
    p[1] = at + 1;
    for (int h = 0; h < hkv; h++) p[2 + h] = h * kv->n_ctx + at;
    return CT_OK;
}

/* Why the recording cannot serve this token, or NULL. */
static const char *stale(const llm_decoder *d, const llm_kv_cache *kv, char *why, size_t len)
{
    if (!d->step) return NULL;
    if (d->kv_st != kv->k[0]->st || d->n_ctx != kv->n_ctx) return "the KV cache changed";
    return ct_step_stale(d->step, why, len) ? why : NULL;
}

/* Whether CTORCH_PIPELINE asks for pipelining on the device named dev: auto takes CUDA
 * devices only. On the H200 (TinyLlama-shaped Q4_K_M, tg128, alternated in one call) CUDA
 * decoded at 1,431-1,433 t/s pipelined against 1,410-1,430 without, and NVIDIA's OpenCL at
 * 618-625 against 635-653 (677-686 against 698-705 with its readbacks pinned): there the
 * device ran its steps slower while the host queued the next one (as with session 40's
 * head start), more than the host's gaps it saved. */
static bool pipeline_on(const char *dev)
{
    int p = config_current()->pipeline;
    if (p >= 0) return p != 0;
    ct_device_info info;
    for (int i = 0, n = ct_device_count(); i < n; i++)
        if (ct_device_get(i, &info) == CT_OK && strcmp(info.name, dev) == 0) return info.kind == CT_DEVICE_CUDA;
    return false;
}

/* The device the logits come from when the model's output projection is placed on one
 * and pipelining is asked for there (else NULL: the CPU has nothing to overlap). */
static const char *output_device(const llm_model *m)
{
    const char *dev = ct_tensor_placement(m->tied_output || !m->output ? m->tok_embd : m->output);
    return dev && strcmp(dev, "cpu") != 0 && pipeline_on(dev) ? dev : NULL;
}

/* The step's last ops: the argmax of its logits into tok, on the logits' device (tok is
 * placed there, before the recording: a placement makes a recorded step stale). */
static ct_status record_choice(llm_decoder *d)
{
    ct_tensor *am = NULL;
    ct_status st = ct_argmax(d->logits, -1, false, &am);
    if (st == CT_OK) st = ct_copy_(d->tok, am);
    ct_tensor_free(am);
    return st;
}

static ct_status record(llm_decoder *d, const llm_model *m, llm_kv_cache *kv)
{
    const char *dev = output_device(m);
    const char *now = ct_tensor_placement(d->tok);
    ct_status st = dev && !(now && strcmp(now, dev) == 0) ? ct_tensor_place(d->tok, dev) : CT_OK;
    if (st != CT_OK) return st;
    if ((st = ct_step_begin()) != CT_OK) return st;
    llm_step_inputs in = {d->tok, d->pos, d->slot, d->len};
    st = llm_forward_step(m, kv, &in, &d->logits);
    if (st == CT_OK && dev) st = record_choice(d);
    ct_step *step = NULL;
    ct_status end = ct_step_end(&step); /* stops the recording whatever happened */
    if (st == CT_OK) st = end;
    else ct_step_free(step);
    if (st != CT_OK) {
        ct_tensor_free(d->logits);
        d->logits = NULL;
        return st;
    }
    d->step = step;
    d->records++;
    /* the choice pays only where the step wrote it on a device */
    ct_device *on = dev ? storage_valid_device(d->tok->st) : NULL;
    d->chooses = on && on->info.kind != CT_DEVICE_CPU;
    ct_step_info info;
    if (core_log_enabled(CT_LOG_INFO) && ct_step_get_info(step, &info) == CT_OK)
        core_log(CT_LOG_INFO, "decode step recorded: %d ops, %d intermediates in a %zu-byte arena (%zu bytes without reuse)%s",
                 info.n_ops, info.n_buffers, info.arena_bytes, info.buffer_bytes,
                 d->chooses ? "; it chooses the next token on the device" : "");
    d->kv_st = kv->k[0]->st;
    d->n_ctx = kv->n_ctx;
    return CT_OK;
}

static void drop_step(llm_decoder *d)
{
    ct_step_free(d->step);
    ct_tensor_free(d->logits);
    d->step = NULL;
    d->logits = NULL;
    d->chooses = false;
}

/* A replay routes nothing: each op runs where it was recorded. When a device refuses
 * one now (out of memory, an unsupported case, a transient fault that did not lose the
 * device), the token is recorded again: the recording dispatches eagerly, so that op
 * retries along the chain and the new step keeps where it finished. Rerunning the step
 * from its start is safe: it only rewrites the current position's KV rows with the same
 * values. A lost device is left to the session's recovery, and so is any failure with
 * evaluations in flight (they are dropped and redone one at a time). */
static ct_status replay(llm_decoder *d, const llm_model *m, llm_kv_cache *kv)
{
    ct_status st = ct_step_run(d->step);
    if (st != CT_ERR_DEVICE_OOM && st != CT_ERR_UNSUPPORTED && st != CT_ERR_DEVICE_FAULT) return st;
    if (d->n_q || ct_step_stale(d->step, NULL, 0)) return st; /* a device was lost: recovery's case */
    core_log(CT_LOG_WARN, "%s: the decode step's replay failed (%s); recording it again, so the failing op "
                          "moves along the chain", m->name, ct_last_error());
    ct_exec_trace_note("step remade: its replay failed");
    drop_step(d);
    return record(d, m, kv);
}

/* A row of the session's lbuf that neither s->logits nor a queued evaluation uses. */
static float *free_row(const llm_session *s, const llm_decoder *d)
{
    for (int i = 0; i < 3; i++) {
        bool used = s->lbuf[i] == s->logits;
        for (int j = 0; j < d->n_q; j++) used |= d->q[j].row == s->lbuf[i];
        if (!used) return s->lbuf[i];
    }
    return NULL; /* unreachable: at most PIPE_DEPTH queued */
}

/* Starts reading t (contiguous) into dst; a host copy is read at once (*ev NULL). */
static ct_status read_begin(const ct_tensor *t, void *dst, ct_event **ev)
{
    size_t lo, hi;
    tensor_byte_range(t, &lo, &hi);
    bool done;
    ct_status st = storage_read_begin(t->st, lo, dst, hi - lo, &done, ev);
    if (st != CT_OK || done) return st;
    return ct_tensor_to_host(t, dst, hi - lo);
}

/* Validates a submission; tok < 0 needs a step that chooses and one queued before it. */
static ct_status check_submit(const llm_session *s, const llm_decoder *d, int32_t tok, int at)
{
    const llm_model *m = s->m;
    if (tok >= m->hp.n_vocab)
        return core_err(CT_ERR_RANGE, "llm: token id %d is outside the vocabulary [0, %d)", (int)tok, m->hp.n_vocab);
    if (tok < 0 && (!d || !d->chooses || (d->n_q == 0 && d->last_choice < 0)))
        return core_err(CT_ERR_INVALID_ARG, "llm: no step before this one chose its token on a device");
    if (d && d->n_q >= PIPE_DEPTH)
        return core_err(CT_ERR_INVALID_ARG, "llm: %d evaluations already in flight (collect one first)", d->n_q);
    if (at >= s->kv.n_ctx)
        return core_err(CT_ERR_RANGE, "context full: %d positions used + 1 new token > context length %d", at,
                        s->kv.n_ctx);
    return CT_OK;
}

/* Writes the token the step reads: the host's, or (tok < 0) the one already on the
 * device, left there by the step before (written there, or the last one collected). */
static ct_status write_tok(llm_decoder *d, int32_t tok)
{
    if (tok >= 0) return storage_host_overwrite(d->tok->st, &tok, sizeof tok);
    return CT_OK;
}

ct_status llm_decoder_submit(llm_session *s, int32_t tok)
{
    const llm_model *m = s->m;
    int at = s->kv.n_past + (s->dec ? s->dec->n_q : 0);
    ct_status st = check_submit(s, s->dec, tok, at);
    if (st == CT_OK && !s->dec) st = decoder_new(s, &s->dec);
    if (st != CT_OK) return st;
    llm_decoder *d = s->dec;
    char why[160], note[200];
    const char *r = stale(d, &s->kv, why, sizeof why);
    if (r && (d->n_q || tok < 0))
        return core_err(CT_ERR_INVALID_ARG, "llm: the decode step must be recorded again (%s) with nothing in flight",
                        r);
    if (r) {
        snprintf(note, sizeof note, "step remade: %s", r);
        ct_exec_trace_note(note);
        drop_step(d);
    }
    if (!d->step && d->n_q)
        return core_err(CT_ERR_INVALID_ARG, "llm: recording the decode step with evaluations in flight");
    double t0 = llm_now();
    if ((st = write_params(d, &s->kv, at)) != CT_OK || (st = write_tok(d, tok)) != CT_OK) return st;
    bool replayed = d->step != NULL;
    double t1 = llm_now();
    st = replayed ? replay(d, m, &s->kv) : record(d, m, &s->kv);
    if (st != CT_OK) return st;
    pipe_slot *p = &d->q[d->n_q];
    *p = (pipe_slot){.tok = tok, .row = free_row(s, d)};
    /* the step's output, a contiguous f32 row, comes straight from the device that computed
     * it into the session's (pinned) row: no host mirror in between */
    st = read_begin(d->logits, p->row, &p->ev[0]);
    if (st == CT_OK && d->chooses) st = read_begin(d->tok, p->row + m->hp.n_vocab, &p->ev[1]);
    if (st != CT_OK) {
        slot_wait(p);
        return st;
    }
    d->n_q++;
    if (replayed) {
        d->times.tokens++;
        d->times.params += t1 - t0;
        d->times.replay += llm_now() - t1;
    }
    return CT_OK;
}

ct_status llm_decoder_collect(llm_session *s, int32_t *tok, int32_t *choice)
{
    llm_decoder *d = s->dec;
    *tok = *choice = -1;
    if (!d || !d->n_q) return core_err(CT_ERR_INVALID_ARG, "llm: no evaluation in flight to collect");
    double t0 = llm_now();
    pipe_slot p = d->q[0];
    memmove(d->q, d->q + 1, (size_t)(d->n_q - 1) * sizeof *d->q);
    d->n_q--;
    ct_status st = slot_wait(&p);
    d->times.logits += llm_now() - t0;
    if (st != CT_OK) {
        llm_decoder_drain(s);
        return st;
    }
    *tok = p.tok >= 0 ? p.tok : d->last_choice;
    if (d->chooses) memcpy(choice, p.row + s->m->hp.n_vocab, sizeof *choice);
    d->last_choice = *choice;
    s->logits = p.row;
    s->kv.n_past++;
    return CT_OK;
}

void llm_decoder_drain(llm_session *s)
{
    llm_decoder *d = s->dec;
    if (!d) return;
    for (int i = 0; i < d->n_q; i++) slot_wait(&d->q[i]);
    d->n_q = 0;
    /* the token tensor holds a dropped step's choice: tok < 0 needs a queued step again */
    d->last_choice = -1;
}

int llm_decoder_in_flight(const llm_session *s) { return s->dec ? s->dec->n_q : 0; }

bool llm_decoder_chooses(const llm_session *s) { return s->dec && s->dec->step && s->dec->chooses; }

void llm_decoder_add_check(llm_session *s, double seconds)
{
    if (s->dec && s->dec->step) s->dec->times.check += seconds;
}

int llm_decoder_records(const llm_session *s) { return s && s->dec ? s->dec->records : 0; }

bool llm_decoder_get_times(const llm_session *s, llm_decoder_times *t, ct_step_info *step)
{
    if (!s || !s->dec || !s->dec->step) return false;
    *t = s->dec->times;
    return ct_step_get_info(s->dec->step, step) == CT_OK;
}
