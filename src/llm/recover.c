/* A session outlives a lost device. A device that faults late (at a sync) is out of
 * the chain for good, and whatever lived only there is gone: the KV cache rows it
 * wrote, possibly activations of the failed step. The weights are never lost (their
 * host copy is the file's mapping, never written), so the session can rebuild all of
 * its device state from the token history: a fresh cache, the weights made resident
 * on the chain's new head, the history evaluated again, then the failed step. Greedy
 * decoding then continues with the tokens it would have produced. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "llm/generate.h"

/* The replay goes through llm_session_eval, which calls back here on a loss; the
 * outer recovery is the one that decides whether to try another device. */
static _Thread_local bool g_recovering;

/* Appends ",name" (or "name" to an empty list) when it fits whole. */
static void append_name(char *buf, size_t len, const char *name)
{
    size_t w = strlen(buf), n = strlen(name), sep = w > 0;
    if (w + sep + n >= len) return;
    if (sep) buf[w] = ',';
    memcpy(buf + w + sep, name, n + 1);
}

/* Whether the message names the device as a word ("test:1", not "test:10"). */
static bool names_device(const char *msg, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(msg, name); p; p = strstr(p + 1, name)) {
        char next = p[n];
        if (!(next >= '0' && next <= '9') && !(next >= 'a' && next <= 'z')) return true;
    }
    return false;
}

/* The devices now lost, and the first healthy device of the chain. A sync is how
 * the executor reports a loss, and recovery can afford one. `culprit`: the lost
 * devices the error names (devices lost before stay lost until re-initialization,
 * and the log should name the one that failed now), else all of them. */
static void survey(const char *why, char *lost, size_t lost_len, char *culprit, size_t culprit_len, char *head,
                   size_t head_len)
{
    lost[0] = culprit[0] = head[0] = 0;
    for (int i = 0, n = ct_device_count(); i < n; i++) {
        ct_device_info info;
        if (ct_device_get(i, &info) != CT_OK || ct_device_sync(info.name) != CT_ERR_DEVICE_LOST) continue;
        append_name(lost, lost_len, info.name);
        if (names_device(why, info.name)) append_name(culprit, culprit_len, info.name);
    }
    if (!culprit[0]) snprintf(culprit, culprit_len, "%s", lost);
    for (int i = 0, n = ct_chain_length(); i < n && !head[0]; i++) {
        ct_device_info info;
        if (ct_chain_get(i, &info) == CT_OK && ct_device_sync(info.name) == CT_OK)
            snprintf(head, head_len, "%s", info.name);
    }
    ct_clear_error();
}

/* A new, empty cache of the same size; the old one is freed only once the new one
 * exists, so a failure leaves the session as it was. Every position is evaluated
 * again, so nothing of the old cache is worth keeping, lost or not. */
static ct_status fresh_cache(llm_session *s)
{
    llm_kv_cache kv;
    ct_status st = llm_kv_cache_init(&kv, s->m, s->kv.n_ctx, s->kv.dtype);
    if (st != CT_OK) return st;
    llm_kv_cache_free(&s->kv);
    s->kv = kv;
    return CT_OK;
}

/* One attempt on the current head: rebuild, replay hist[0..at), rerun the step. */
static ct_status attempt(llm_session *s, const char *head, int32_t *hist, int at, const int32_t *toks, int n)
{
    s->have_logits = false;
    /* the weights first: the fresh cache goes where their layers now live */
    ct_status st = llm_model_place(s->m, head, -1, NULL, NULL, NULL);
    if (st == CT_OK) st = fresh_cache(s);
    if (st == CT_OK && at > 0) st = llm_session_eval(s, hist, at);
    if (st == CT_OK) st = llm_session_eval(s, toks, n);
    return st;
}

ct_status llm_session_recover(llm_session *s, ct_status st, const int32_t *toks, int n, int at)
{
    if (st != CT_ERR_DEVICE_LOST || g_recovering) return st;
    char why[400]; /* ct_last_error's buffer is rewritten by every failing call */
    snprintf(why, sizeof why, "%s", ct_last_error());
    /* llm_session_eval copies into s->hist: the replay's source must not overlap it */
    int32_t *hist = at > 0 ? malloc((size_t)at * sizeof *hist) : NULL;
    if (at > 0 && !hist) return core_err(CT_ERR_OOM, "%s: out of memory to replay %d tokens (%s)", s->m->name, at, why);
    if (at > 0) memcpy(hist, s->hist, (size_t)at * sizeof *hist);
    g_recovering = true;
    char lost[256] = "", before[256] = "", culprit[256] = "", failed[256] = "", head[32] = "";
    /* an attempt is worth making only after another device failed: at most one per
     * device in the chain */
    int tries = ct_chain_length() > 0 ? ct_chain_length() : 1;
    for (int i = 0; i < tries && st == CT_ERR_DEVICE_LOST; i++) {
        survey(why, lost, sizeof lost, culprit, sizeof culprit, head, sizeof head);
        if (!lost[0] || !head[0] || !strcmp(lost, before)) break;
        snprintf(before, sizeof before, "%s", lost);
        if (!names_device(failed, culprit)) append_name(failed, sizeof failed, culprit);
        st = attempt(s, head, hist, at, toks, n);
        if (st != CT_OK) snprintf(why, sizeof why, "%s", ct_last_error());
    }
    g_recovering = false;
    free(hist);
    if (st == CT_OK) {
        core_log(CT_LOG_WARN, "%s: device %s lost: recovered on %s by replaying %d tokens", s->m->name, failed, head,
                 at);
        return CT_OK;
    }
    s->have_logits = false;
    if (!lost[0]) return core_err(st, "%s", why);
    return core_err(st, "%s: device %s lost and the session could not recover%s%s: %s", s->m->name,
                    failed[0] ? failed : culprit,
                    head[0] ? " on " : " (no healthy device left)", head, why);
}
