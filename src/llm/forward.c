/* The transformer forward pass, for every architecture of the table, from
 * public ops only. A batch of T tokens goes through each layer at once
 * (x [T, n_embd], so the projections are matrix-matrix products); decode is the
 * same code with T = 1. Keys and values are appended to the KV cache with
 * ct_copy_ into a narrowed view, and attention reads the filled prefix. */
#include <math.h>
#include <stdlib.h>

#include "core/tensor.h"
#include "llm/model.h"

/* Every tensor made while running one layer, freed together at the end. */
#define SCOPE_MAX 48
typedef struct scope {
    ct_tensor **slot[SCOPE_MAX];
    int n;
} scope;

static ct_tensor **keep(scope *s, ct_tensor **p)
{
    *p = NULL;
    if (s->n < SCOPE_MAX) s->slot[s->n++] = p;
    return p;
}

static void scope_free(scope *s)
{
    for (int i = 0; i < s->n; i++) {
        ct_tensor_free(*s->slot[i]);
        *s->slot[i] = NULL;
    }
    s->n = 0;
}

#define OUT(v) keep(&sc, &(v))
#define TRY(expr)                  \
    do {                           \
        st = (expr);               \
        if (st != CT_OK) goto out; \
    } while (0)

/* Appends k [T, Hkv, D] and v [T, Hkv, Dv] at positions n_past.. and gives the
 * attended keys and values [1, Hkv, Tk, D]. With step inputs (T = 1) the write slot
 * and the attended length come from tensors: the rows go in with ct_set_rows at
 * slot[h] = h * n_ctx + position, and attention reads the whole cache up to len. */
static ct_status kv_append(llm_kv_cache *kv, int il, const ct_tensor *kr, const ct_tensor *v3, int T,
                           const llm_step_inputs *in, ct_tensor **k4, ct_tensor **v4)
{
    static const int swap01[3] = {1, 0, 2};
    const int n_past = kv->n_past, Tk = n_past + T;
    scope sc = {0};
    ct_status st = CT_OK;
    /* at function scope: the scope frees them after the branches end */
    ct_tensor *kall, *vall, *v2, *kc, *vc, *kr2, *vr2, *kt, *vt, *kdst, *vdst;
    if (in) {
        const int64_t *ks = ct_tensor_shape(kv->k[il]), *vs = ct_tensor_shape(kv->v[il]);
        TRY(ct_view(kv->k[il], 2, (int64_t[]){ks[0] * ks[1], ks[2]}, OUT(kc)));
        TRY(ct_view(kv->v[il], 2, (int64_t[]){vs[0] * vs[1], vs[2]}, OUT(vc)));
        TRY(ct_view(kr, 2, (int64_t[]){ks[0], ks[2]}, OUT(kr2)));
        TRY(ct_contiguous(v3, OUT(v2)));
        TRY(ct_view(v2, 2, (int64_t[]){vs[0], vs[2]}, OUT(vr2)));
        TRY(ct_set_rows(kc, kr2, in->slot));
        TRY(ct_set_rows(vc, vr2, in->slot));
        kall = kv->k[il];
        vall = kv->v[il];
    } else {
        TRY(ct_permute(kr, swap01, OUT(kt)));
        TRY(ct_permute(v3, swap01, OUT(vt)));
        TRY(ct_narrow(kv->k[il], 1, n_past, T, OUT(kdst)));
        TRY(ct_narrow(kv->v[il], 1, n_past, T, OUT(vdst)));
        TRY(ct_copy_(kdst, kt));
        TRY(ct_copy_(vdst, vt));
        TRY(ct_narrow(kv->k[il], 1, 0, Tk, OUT(kall)));
        TRY(ct_narrow(kv->v[il], 1, 0, Tk, OUT(vall)));
    }
    TRY(ct_unsqueeze(kall, 0, k4));
    st = ct_unsqueeze(vall, 0, v4);
out:
    scope_free(&sc);
    return st;
}

/* x [T, n_embd] -> y [T, n_embd] through one layer; pos [T] i32. */
static ct_status layer_forward(const llm_model *m, int il, llm_kv_cache *kv, const ct_tensor *x,
                               const ct_tensor *pos, int T, const llm_step_inputs *in, ct_tensor **y)
{
    const llm_hparams *hp = &m->hp;
    const llm_arch *a = m->arch;
    const llm_layer *L = &m->layers[il];
    const int Hq = hp->n_head, Hkv = hp->n_head_kv, D = hp->head_dim, Dv = hp->head_dim_v;
    static const int swap01[3] = {1, 0, 2};
    scope sc = {0};
    ct_status st = CT_OK;
    *y = NULL;

    ct_tensor *h, *q, *k, *v, *q3, *k3, *v3, *qr, *kr, *qn, *kn;
    TRY(ct_rms_norm(x, L->attn_norm, hp->rms_eps, OUT(h)));
    TRY(ct_linear(h, L->wq, NULL, OUT(q)));
    TRY(ct_linear(h, L->wk, NULL, OUT(k)));
    TRY(ct_linear(h, L->wv, NULL, OUT(v)));
    TRY(ct_view(q, 3, (int64_t[]){T, Hq, D}, OUT(q3)));
    TRY(ct_view(k, 3, (int64_t[]){T, Hkv, D}, OUT(k3)));
    TRY(ct_view(v, 3, (int64_t[]){T, Hkv, Dv}, OUT(v3)));
    const ct_tensor *qc = q3, *kc = k3;
    if (a->qk_norm) {
        TRY(ct_rms_norm(q3, L->q_norm, hp->rms_eps, OUT(qn)));
        TRY(ct_rms_norm(k3, L->k_norm, hp->rms_eps, OUT(kn)));
        qc = qn;
        kc = kn;
    }
    TRY(ct_rope(qc, pos, &L->rope, OUT(qr)));
    TRY(ct_rope(kc, pos, &L->rope, OUT(kr)));

    /* Append this batch's keys and values: cache[:, n_past:n_past+T, :] = k^T. */
    ct_tensor *k4, *v4, *qt, *q4, *att, *att3, *attt, *attc, *att2, *ao;
    TRY(kv_append(kv, il, kr, v3, T, in, OUT(k4), OUT(v4)));
    TRY(ct_permute(qr, swap01, OUT(qt)));
    TRY(ct_unsqueeze(qt, 0, OUT(q4)));
    ct_sdpa_params sp = {.causal = true, .scale = hp->attn_scale, .window = L->window, .length = in ? in->len : NULL};
    TRY(ct_sdpa(q4, k4, v4, NULL, &sp, OUT(att)));            /* [1, Hq, T, Dv] */
    TRY(ct_select(att, 0, 0, OUT(att3)));
    TRY(ct_permute(att3, swap01, OUT(attt)));                  /* [T, Hq, Dv] */
    TRY(ct_contiguous(attt, OUT(attc)));
    TRY(ct_view(attc, 2, (int64_t[]){T, (int64_t)Hq * Dv}, OUT(att2)));
    TRY(ct_linear(att2, L->wo, NULL, OUT(ao)));
    const ct_tensor *aoc = ao;
    ct_tensor *aon, *fn;
    if (L->post_attn_norm) {
        TRY(ct_rms_norm(ao, L->post_attn_norm, hp->rms_eps, OUT(aon)));
        aoc = aon;
    }
    ct_tensor *x1, *h2, *g, *u, *gu, *f;
    TRY(ct_add(x, aoc, OUT(x1)));
    TRY(ct_rms_norm(x1, L->ffn_norm, hp->rms_eps, OUT(h2)));
    TRY(ct_linear(h2, L->w_gate, NULL, OUT(g)));
    TRY(ct_linear(h2, L->w_up, NULL, OUT(u)));
    if (a->act == LLM_ACT_GEGLU)
        TRY(ct_geglu(g, u, OUT(gu)));
    else
        TRY(ct_swiglu(g, u, OUT(gu)));
    TRY(ct_linear(gu, L->w_down, NULL, OUT(f)));
    const ct_tensor *fc = f;
    if (L->post_ffn_norm) {
        TRY(ct_rms_norm(f, L->post_ffn_norm, hp->rms_eps, OUT(fn)));
        fc = fn;
    }
    st = ct_add(x1, fc, y);
out:
    scope_free(&sc);
    return st;
}

/* Where a non-finite value first appears (llm_forward_find_nonfinite). */
typedef struct probe {
    int stage;    /* -1 embedding, 0..n_layer-1 a layer, n_layer the output; INT32_MIN: all finite */
    bool nan;     /* NaN (else only infinities) */
} probe;

/* Counts NaN and infinite values of x (any float dtype: cast to f32 first). */
static ct_status count_nonfinite(const ct_tensor *x, int64_t *n_nan, int64_t *n_inf)
{
    ct_tensor *f = NULL;
    ct_status st = ct_tensor_dtype(x) == CT_F32 ? CT_OK : ct_cast(x, CT_F32, &f);
    const ct_tensor *src = f ? f : x;
    int64_t n = ct_tensor_numel(src);
    float *buf = st == CT_OK ? malloc((size_t)(n > 0 ? n : 1) * sizeof *buf) : NULL;
    if (st == CT_OK && !buf) st = core_err(CT_ERR_OOM, "llm: out of memory checking %lld values", (long long)n);
    if (st == CT_OK) st = ct_tensor_to_host(src, buf, (size_t)n * sizeof *buf);
    *n_nan = *n_inf = 0;
    for (int64_t i = 0; st == CT_OK && i < n; i++) {
        if (isnan(buf[i])) ++*n_nan;
        else if (isinf(buf[i])) ++*n_inf;
    }
    free(buf);
    ct_tensor_free(f);
    return st;
}

/* True (and pr filled) when x holds a non-finite value at this stage. */
static bool probe_hit(probe *pr, const ct_tensor *x, int stage, ct_status *st)
{
    int64_t nn = 0, ni = 0;
    if (!pr || (*st = count_nonfinite(x, &nn, &ni)) != CT_OK || !(nn + ni)) return false;
    pr->stage = stage;
    pr->nan = nn > 0;
    return true;
}

static ct_status forward_tensors(const llm_model *m, llm_kv_cache *kv, const ct_tensor *ids, const ct_tensor *pos,
                                 int n, const llm_step_inputs *in, bool all_logits, ct_tensor **logits, probe *pr);

static ct_status forward(const llm_model *m, llm_kv_cache *kv, const int32_t *tokens, int n, bool all_logits,
                         ct_tensor **logits, probe *pr)
{
    if (!m || !kv || !tokens || !logits) return core_err(CT_ERR_INVALID_ARG, "llm_forward: NULL argument");
    *logits = NULL;
    const llm_hparams *hp = &m->hp;
    if (n <= 0) return core_err(CT_ERR_INVALID_ARG, "llm_forward: need at least one token, got %d", n);
    if (kv->n_layer != hp->n_layer)
        return core_err(CT_ERR_INVALID_ARG, "llm_forward: KV cache has %d layers, model %d", kv->n_layer, hp->n_layer);
    if (n > kv->n_ctx - kv->n_past)
        return core_err(CT_ERR_RANGE, "context full: %d positions used + %d new tokens > context length %d",
                        kv->n_past, n, kv->n_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= hp->n_vocab)
            return core_err(CT_ERR_RANGE, "llm_forward: token id %d at %d is outside the vocabulary [0, %d)",
                            (int)tokens[i], i, hp->n_vocab);

    scope sc = {0};
    ct_status st = CT_OK;
    int32_t *posv = malloc((size_t)n * sizeof *posv);
    if (!posv) return core_err(CT_ERR_OOM, "llm_forward: out of memory for %d positions", n);
    for (int i = 0; i < n; i++) posv[i] = kv->n_past + i;

    ct_tensor *ids, *pos;
    TRY(ct_tensor_from_data(1, (int64_t[]){n}, CT_I32, tokens, OUT(ids)));
    TRY(ct_tensor_from_data(1, (int64_t[]){n}, CT_I32, posv, OUT(pos)));
    TRY(forward_tensors(m, kv, ids, pos, n, NULL, all_logits, logits, pr));
    kv->n_past += n;
out:
    scope_free(&sc);
    free(posv);
    return st;
}

ct_status llm_forward_step(const llm_model *m, llm_kv_cache *kv, const llm_step_inputs *in, ct_tensor **logits)
{
    if (!m || !kv || !in || !in->ids || !in->pos || !in->slot || !in->len || !logits)
        return core_err(CT_ERR_INVALID_ARG, "llm_forward_step: NULL argument");
    *logits = NULL;
    if (kv->n_layer != m->hp.n_layer)
        return core_err(CT_ERR_INVALID_ARG, "llm_forward_step: KV cache has %d layers, model %d", kv->n_layer,
                        m->hp.n_layer);
    return forward_tensors(m, kv, in->ids, in->pos, 1, in, false, logits, NULL);
}

/* The pass itself, from token ids and positions held in tensors ([n] i32). */
static ct_status forward_tensors(const llm_model *m, llm_kv_cache *kv, const ct_tensor *ids, const ct_tensor *pos,
                                 int n, const llm_step_inputs *in, bool all_logits, ct_tensor **logits, probe *pr)
{
    const llm_hparams *hp = &m->hp;
    scope sc = {0};
    ct_status st = CT_OK;
    ct_tensor *x = NULL;
    TRY(ct_embedding(m->tok_embd, ids, &x));
    if (m->arch->embd_scale) {
        ct_tensor *xs = NULL;
        st = ct_mul_scalar(x, sqrt((double)hp->n_embd), &xs);
        ct_tensor_free(x);
        x = xs;
        if (st != CT_OK) goto out;
    }
    if (probe_hit(pr, x, -1, &st) || st != CT_OK) goto out;
    for (int il = 0; il < hp->n_layer; il++) {
        ct_tensor *y = NULL;
        st = layer_forward(m, il, kv, x, pos, n, in, &y);
        ct_tensor_free(x);
        x = y;
        if (st != CT_OK || probe_hit(pr, x, il, &st) || st != CT_OK) goto out;
    }

    ct_tensor *last, *xn, *lg;
    const ct_tensor *xin = x;
    if (!all_logits && n > 1) {
        TRY(ct_narrow(x, 0, n - 1, 1, OUT(last)));
        xin = last;
    }
    TRY(ct_rms_norm(xin, m->output_norm, hp->rms_eps, OUT(xn)));
    if (hp->logit_softcap > 0) {
        ct_tensor *l1, *l2;
        TRY(ct_linear(xn, m->output, NULL, OUT(lg)));
        TRY(ct_div_scalar(lg, hp->logit_softcap, OUT(l1)));
        TRY(ct_tanh(l1, OUT(l2)));
        TRY(ct_mul_scalar(l2, hp->logit_softcap, logits));
    } else {
        TRY(ct_linear(xn, m->output, NULL, logits));
    }
    if (probe_hit(pr, *logits, hp->n_layer, &st) || st != CT_OK) goto out;
out:
    scope_free(&sc);
    ct_tensor_free(x);
    return st;
}

ct_status llm_forward(const llm_model *m, llm_kv_cache *kv, const int32_t *tokens, int n, bool all_logits,
                      ct_tensor **logits)
{
    return forward(m, kv, tokens, n, all_logits, logits, NULL);
}

ct_status llm_forward_find_nonfinite(const llm_model *m, llm_kv_cache *kv, const int32_t *tokens, int n,
                                     int *stage, bool *nan)
{
    if (!stage || !nan) return core_err(CT_ERR_INVALID_ARG, "llm_forward_find_nonfinite: NULL argument");
    probe pr = {.stage = INT32_MIN};
    ct_tensor *lg = NULL;
    int n_past = kv ? kv->n_past : 0;
    ct_status st = forward(m, kv, tokens, n, false, &lg, &pr);
    ct_tensor_free(lg);
    if (kv) kv->n_past = n_past; /* a diagnosis, not an evaluation */
    *stage = pr.stage;
    *nan = pr.nan;
    return st;
}
