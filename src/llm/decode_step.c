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
    ct_tensor *ids, *pos, *slot, *len; /* the step's parameters */
    ct_tensor *logits;                 /* the step's output: each replay's logits */
    /* The cache the step was recorded against: its storage, which the step keeps a
     * reference to, so a new cache can never be at the same address. */
    const ct_storage *kv_st;
    int n_ctx;
    int records;                       /* recordings made (the first, and each remake) */
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
    free(d);
}

static ct_status decoder_new(const llm_session *s, llm_decoder **out)
{
    llm_decoder *d = calloc(1, sizeof *d);
    if (!d) return core_err(CT_ERR_OOM, "llm: out of memory for the decode step");
    int64_t one = 1, hkv = s->m->hp.n_head_kv;
    ct_status st = ct_zeros(1, &one, CT_I32, &d->ids);
    if (st == CT_OK) st = ct_zeros(1, &one, CT_I32, &d->pos);
    if (st == CT_OK) st = ct_zeros(1, &hkv, CT_I32, &d->slot);
    if (st == CT_OK) st = ct_zeros(1, &one, CT_I32, &d->len);
    if (st != CT_OK) {
        llm_decoder_free(d);
        return st;
    }
    *out = d;
    return CT_OK;
}

static ct_status write_i32(ct_tensor *t, const int32_t *v, int n)
{
    void *p;
    ct_status st = ct_tensor_data_mut(t, &p);
    if (st == CT_OK) memcpy(p, v, (size_t)n * sizeof *v);
    return st;
}

static ct_status write_params(llm_decoder *d, const llm_kv_cache *kv, int32_t tok)
{
    int32_t pos = kv->n_past, len = kv->n_past + 1, slot[64];
    int hkv = (int)ct_tensor_shape(d->slot)[0];
    int32_t *sl = hkv <= 64 ? slot : malloc((size_t)hkv * sizeof *sl);
    if (!sl) return core_err(CT_ERR_OOM, "llm: out of memory");
    for (int h = 0; h < hkv; h++) sl[h] = h * kv->n_ctx + pos;
    ct_status st = write_i32(d->ids, &tok, 1);
    if (st == CT_OK) st = write_i32(d->pos, &pos, 1);
    if (st == CT_OK) st = write_i32(d->slot, sl, hkv);
    if (st == CT_OK) st = write_i32(d->len, &len, 1);
    if (sl != slot) free(sl);
    return st;
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
    if ((st = write_params(d, &s->kv, tok)) != CT_OK) return st;
    st = d->step ? replay(d, m, &s->kv) : record(d, m, &s->kv);
    /* the step's output, a contiguous f32 row, comes straight from the device that computed
     * it into the session's (pinned) buffer: no host mirror in between */
    if (st == CT_OK) st = ct_tensor_to_host(d->logits, s->logits, (size_t)m->hp.n_vocab * sizeof(float));
    if (st != CT_OK) return st;
    s->kv.n_past++;
    return CT_OK;
}

int llm_decoder_records(const llm_session *s) { return s && s->dec ? s->dec->records : 0; }
