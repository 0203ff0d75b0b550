/* Decode by replaying one recorded step. The values that change per token (the
 * token id, its position, the KV rows it writes, the attended length) live in small
 * tensors written before each replay, so the recording made at the first decode token
 * serves every later one. It is made again when the executor says it is stale (the
 * chain changed, a tensor was placed, a device was lost) or the session's KV cache is
 * another one; the trace says why. CTORCH_REPLAY=0 decodes eagerly instead. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/tensor.h"
#include "llm/generate.h"

struct llm_decoder {
    ct_step *step;
    /* the step's parameters: views of one host tensor [id, pos, len, slot 0..Hkv-1], so a
     * replay uploads them in one copy */
    ct_tensor *params, *ids, *pos, *slot, *len;
    ct_tensor *logits;                 /* the step's output: each replay's logits */
    /* The cache the step was recorded against: its storage, which the step keeps a
     * reference to, so a new cache can never be at the same address. */
    const ct_storage *kv_st;
    int n_ctx;
    int records;                       /* recordings made (the first, and each remake) */
    llm_decoder_times times;           /* the host's time per phase, summed over tokens */
};

bool llm_replay_enabled(void) { return config_current()->replay; }

void llm_decoder_free(llm_decoder *d)
{
    if (!d) return;
    ct_step_free(d->step);
    ct_tensor_free(d->logits);
    ct_tensor_free(d->ids);
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
    int64_t hkv = s->m->hp.n_head_kv, n = 3 + hkv;
    ct_status st = ct_zeros(1, &n, CT_I32, &d->params);
    if (st == CT_OK) st = ct_narrow(d->params, 0, 0, 1, &d->ids);
    if (st == CT_OK) st = ct_narrow(d->params, 0, 1, 1, &d->pos);
    if (st == CT_OK) st = ct_narrow(d->params, 0, 2, 1, &d->len);
    if (st == CT_OK) st = ct_narrow(d->params, 0, 3, hkv, &d->slot);
    if (st != CT_OK) {
        llm_decoder_free(d);
        return st;
    }
    *out = d;
    return CT_OK;
}

static ct_status write_params(llm_decoder *d, const llm_kv_cache *kv, int32_t tok)
{
    int32_t *p;
    ct_status st = ct_tensor_data_mut(d->params, (void **)&p);
    if (st != CT_OK) return st;
    int hkv = (int)ct_tensor_shape(d->slot)[0];
    p[0] = tok;
    p[1] = kv->n_past;
    p[2] = kv->n_past + 1;
    for (int h = 0; h < hkv; h++) p[3 + h] = h * kv->n_ctx + kv->n_past;
    return CT_OK;
}

/* Why the recording cannot serve this token, or NULL. */
static const char *stale(const llm_decoder *d, const llm_kv_cache *kv, char *why, size_t len)
{
    if (!d->step) return NULL;
    if (d->kv_st != kv->k[0]->st || d->n_ctx != kv->n_ctx) return "the KV cache changed";
    return ct_step_stale(d->step, why, len) ? why : NULL;
}

static ct_status record(llm_decoder *d, const llm_model *m, llm_kv_cache *kv)
{
    ct_status st = ct_step_begin();
    if (st != CT_OK) return st;
    llm_step_inputs in = {d->ids, d->pos, d->slot, d->len};
    st = llm_forward_step(m, kv, &in, &d->logits);
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
    ct_step_info info;
    if (core_log_enabled(CT_LOG_INFO) && ct_step_get_info(step, &info) == CT_OK)
        core_log(CT_LOG_INFO, "decode step recorded: %d ops, %d intermediates in a %zu-byte arena (%zu bytes without reuse)",
                 info.n_ops, info.n_buffers, info.arena_bytes, info.buffer_bytes);
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
}

/* A replay routes nothing: each op runs where it was recorded. When a device refuses
 * one now (out of memory, an unsupported case, a transient fault that did not lose the
 * device), the token is recorded again: the recording dispatches eagerly, so that op
 * retries along the chain and the new step keeps where it finished. Rerunning the step
 * from its start is safe: it only rewrites the current position's KV rows with the same
 * values. A lost device is left to the session's recovery. */
static ct_status replay(llm_decoder *d, const llm_model *m, llm_kv_cache *kv)
{
    ct_status st = ct_step_run(d->step);
    if (st != CT_ERR_DEVICE_OOM && st != CT_ERR_UNSUPPORTED && st != CT_ERR_DEVICE_FAULT) return st;
    if (ct_step_stale(d->step, NULL, 0)) return st; /* a device was lost: recovery's case */
    core_log(CT_LOG_WARN, "%s: the decode step's replay failed (%s); recording it again, so the failing op "
                          "moves along the chain", m->name, ct_last_error());
    ct_exec_trace_note("step remade: its replay failed");
    drop_step(d);
    return record(d, m, kv);
}

ct_status llm_decoder_eval(llm_session *s, int32_t tok)
{
    const llm_model *m = s->m;
    if (tok < 0 || tok >= m->hp.n_vocab)
        return core_err(CT_ERR_RANGE, "llm: token id %d is outside the vocabulary [0, %d)", (int)tok, m->hp.n_vocab);
    if (s->kv.n_past >= s->kv.n_ctx)
        return core_err(CT_ERR_RANGE, "context full: %d positions used + 1 new token > context length %d",
                        s->kv.n_past, s->kv.n_ctx);
    ct_status st = s->dec ? CT_OK : decoder_new(s, &s->dec);
    if (st != CT_OK) return st;
    llm_decoder *d = s->dec;
    char why[160], note[200];
    const char *r = stale(d, &s->kv, why, sizeof why);
    if (r) {
        snprintf(note, sizeof note, "step remade: %s", r);
        ct_exec_trace_note(note);
        drop_step(d);
    }
    double t0 = llm_now();
    if ((st = write_params(d, &s->kv, tok)) != CT_OK) return st;
    bool replayed = d->step != NULL;
    double t1 = llm_now();
    st = replayed ? replay(d, m, &s->kv) : record(d, m, &s->kv);
    double t2 = llm_now();
    /* the step's output, a contiguous f32 row, comes straight from the device that computed
     * it into the session's (pinned) buffer: no host mirror in between */
    if (st == CT_OK) st = ct_tensor_to_host(d->logits, s->logits, (size_t)m->hp.n_vocab * sizeof(float));
    if (st != CT_OK) return st;
    if (replayed) {
        d->times.tokens++;
        d->times.params += t1 - t0;
        d->times.replay += t2 - t1;
        d->times.logits += llm_now() - t2;
    }
    s->kv.n_past++;
    return CT_OK;
}

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
