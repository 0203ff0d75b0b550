/* Fitting a conversation into the context. The template decides how turns join
 * (Gemma folds the system text into the first user turn, Llama 2 wraps it), so
 * each candidate is rendered and tokenized whole rather than summed per turn. */
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "llm/chat.h"
#include "llm/tokenizer.h"

/* Renders and tokenizes msgs[0..n_sys) + msgs[first..n); *ids is malloc'ed. */
static ct_status render_tokens(const llm_tokenizer *tok, llm_chat_tmpl t, const llm_chat_msg *msgs, int n, int n_sys,
                               int first, int32_t **ids, int *n_ids)
{
    *ids = NULL;
    int kept = n_sys + (n - first);
    llm_chat_msg *sel = malloc(sizeof *sel * (size_t)kept);
    if (!sel) return core_err(CT_ERR_OOM, "chat: out of memory for %d messages", kept);
    memcpy(sel, msgs, sizeof *sel * (size_t)n_sys);
    memcpy(sel + n_sys, msgs + first, sizeof *sel * (size_t)(n - first));
    char *text = NULL;
    ct_status st = llm_chat_format(t, sel, kept, true, &text);
    free(sel);
    if (st != CT_OK) return st;
    size_t len = strlen(text);
    /* A token is at least one byte, plus BOS/EOS: the count is known after one retry at most. */
    int cap = (int)(len < 100000000 ? len : 100000000) + 8, got = 0;
    for (int tries = 0; tries < 2 && st == CT_OK; tries++) {
        *ids = malloc(sizeof(int32_t) * (size_t)cap);
        if (!*ids) {
            st = core_err(CT_ERR_OOM, "chat: out of memory for %d tokens", cap);
            break;
        }
        st = llm_tokenize(tok, text, len, true, true, *ids, cap, &got);
        if (st == CT_OK) break;
        free(*ids);
        *ids = NULL;
        if (st != CT_ERR_RANGE || got <= cap) break;
        cap = got;
        st = CT_OK;
    }
    free(text);
    *n_ids = got;
    return st;
}

ct_status llm_chat_fit_context(const llm_tokenizer *tok, llm_chat_tmpl t, const llm_chat_msg *msgs, int n, int budget,
                               llm_chat_fit *out)
{
    if (!out) return core_err(CT_ERR_INVALID_ARG, "llm_chat_fit_context: NULL result");
    *out = (llm_chat_fit){0};
    if (!tok || !msgs || n < 1) return core_err(CT_ERR_INVALID_ARG, "llm_chat_fit_context: no tokenizer or no messages");
    if (!msgs[n - 1].role || strcmp(msgs[n - 1].role, "user") != 0)
        return core_err(CT_ERR_INVALID_ARG, "llm_chat_fit_context: the last message must be the user's");
    int n_sys = 0;
    while (n_sys < n - 1 && msgs[n_sys].role && strcmp(msgs[n_sys].role, "system") == 0) n_sys++;
    out->n_sys = n_sys;
    /* Oldest first: the common case (one new turn past the limit) needs two renderings. */
    for (int first = n_sys; first < n; first++) {
        if (first > n_sys && first < n - 1 && strcmp(msgs[first].role, "user") != 0) continue; /* mid-turn */
        int32_t *ids = NULL;
        int n_ids = 0;
        ct_status st = render_tokens(tok, t, msgs, n, n_sys, first, &ids, &n_ids);
        if (st != CT_OK) return st;
        if (first == n_sys) out->n_all = n_ids;
        if (first == n - 1) out->n_min = n_ids;
        if (n_ids <= budget) {
            out->first = first;
            out->ids = ids;
            out->n_ids = n_ids;
            return CT_OK;
        }
        free(ids);
    }
    out->first = n - 1;
    return core_err(CT_ERR_RANGE, "the newest message%s takes %d tokens, more than the %d the prompt may use",
                    n_sys ? " with the system prompt" : "", out->n_min, budget);
}
