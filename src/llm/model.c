/* GGUF -> model: hyper-parameters from "<arch>.*" metadata, weights as
 * zero-copy tensors over the mapping, the tokenizer when the file has one.
 * Shapes are checked here, once, so the forward pass can trust them. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "formats/gguf.h"
#include "llm/model.h"
#include "llm/tokenizer.h"

typedef struct loader {
    gguf_file *f;
    llm_model *m;
    char arch[32];
    const char *bpe_pre; /* forced BPE pre-tokenizer name, or NULL */
} loader;

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* "<arch>.<suffix>" into buf. */
static const char *akey(const loader *ld, const char *suffix, char *buf, size_t len)
{
    snprintf(buf, len, "%s.%s", ld->arch, suffix);
    return buf;
}

/* A required or optional (def >= 0) positive integer hyper-parameter. */
static ct_status get_int(const loader *ld, const char *suffix, int64_t def, int *out)
{
    char key[96];
    akey(ld, suffix, key, sizeof key);
    int64_t v = 0;
    ct_status s = gguf_get_i64(ld->f, key, &v);
    if (s == CT_ERR_NOT_FOUND && def >= 0) {
        *out = (int)def;
        return CT_OK;
    }
    if (s == CT_ERR_NOT_FOUND)
        return core_err(CT_ERR_FORMAT, "%s: required key %s is missing", gguf_name(ld->f), key);
    if (s != CT_OK) return s;
    if (v <= 0 || v > (1 << 30))
        return core_err(CT_ERR_FORMAT, "%s: %s = %lld is out of range", gguf_name(ld->f), key, (long long)v);
    *out = (int)v;
    return CT_OK;
}

static ct_status get_real(const loader *ld, const char *suffix, double def, double *out)
{
    char key[96];
    akey(ld, suffix, key, sizeof key);
    ct_status s = gguf_get_f64(ld->f, key, out);
    if (s == CT_ERR_NOT_FOUND) {
        *out = def;
        return CT_OK;
    }
    if (s != CT_OK) return s;
    if (!isfinite(*out))
        return core_err(CT_ERR_FORMAT, "%s: %s is not a finite number", gguf_name(ld->f), key);
    return CT_OK;
}

static ct_status read_hparams(loader *ld)
{
    llm_hparams *hp = &ld->m->hp;
    const llm_arch *a = ld->m->arch;
    ct_status s;
    if ((s = get_int(ld, "context_length", 2048, &hp->n_ctx_train)) != CT_OK) return s;
    if ((s = get_int(ld, "embedding_length", -1, &hp->n_embd)) != CT_OK) return s;
    if ((s = get_int(ld, "block_count", -1, &hp->n_layer)) != CT_OK) return s;
    if ((s = get_int(ld, "feed_forward_length", -1, &hp->n_ff)) != CT_OK) return s;
    if ((s = get_int(ld, "attention.head_count", -1, &hp->n_head)) != CT_OK) return s;
    if ((s = get_int(ld, "attention.head_count_kv", hp->n_head, &hp->n_head_kv)) != CT_OK) return s;
    if ((s = get_int(ld, "attention.key_length", hp->n_embd / hp->n_head, &hp->head_dim)) != CT_OK) return s;
    if ((s = get_int(ld, "attention.value_length", hp->head_dim, &hp->head_dim_v)) != CT_OK) return s;
    if ((s = get_int(ld, "rope.dimension_count", hp->head_dim, &hp->n_rot)) != CT_OK) return s;
    if ((s = get_real(ld, "attention.layer_norm_rms_epsilon", a->default_rms_eps, &hp->rms_eps)) != CT_OK) return s;
    if ((s = get_real(ld, "rope.freq_base", 10000.0, &hp->rope_base)) != CT_OK) return s;
    if ((s = get_real(ld, "final_logit_softcapping", 0.0, &hp->logit_softcap)) != CT_OK) return s;
    hp->rope_base_swa = a->swa_period > 0 ? a->swa_rope_base : hp->rope_base;
    if (a->swa_period > 0 && (s = get_int(ld, "attention.sliding_window", 0, &hp->n_swa)) != CT_OK) return s;

    const char *f = gguf_name(ld->f);
    if (hp->n_head_kv > hp->n_head || hp->n_head % hp->n_head_kv != 0)
        return core_err(CT_ERR_FORMAT, "%s: %d query heads cannot share %d KV heads", f, hp->n_head, hp->n_head_kv);
    if (hp->head_dim <= 0 || hp->head_dim_v <= 0)
        return core_err(CT_ERR_FORMAT, "%s: head size is zero (embedding %d, %d heads)", f, hp->n_embd, hp->n_head);
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0)
        return core_err(CT_ERR_FORMAT, "%s: rope.dimension_count %d must be even and <= head size %d", f, hp->n_rot,
                        hp->head_dim);
    if (!(hp->rms_eps > 0) || !(hp->rope_base > 0) || hp->logit_softcap < 0)
        return core_err(CT_ERR_FORMAT, "%s: epsilon, rope base or soft-cap out of range", f);

    /* Linear RoPE scaling: positions are compressed by the factor. */
    hp->rope_scale = 1.0;
    char key[96];
    const char *stype = NULL;
    size_t slen = 0;
    s = gguf_get_str(ld->f, akey(ld, "rope.scaling.type", key, sizeof key), &stype, &slen);
    double factor = 0;
    if (s == CT_OK) {
        if (slen == 6 && memcmp(stype, "linear", 6) == 0) {
            if ((s = get_real(ld, "rope.scaling.factor", 1.0, &factor)) != CT_OK) return s;
        } else if (!(slen == 4 && memcmp(stype, "none", 4) == 0)) {
            return core_err(CT_ERR_UNSUPPORTED, "%s: rope scaling type '%.*s' is not supported (only linear)", f,
                            (int)(slen < 32 ? slen : 32), stype);
        }
    } else if (s != CT_ERR_NOT_FOUND) {
        return s;
    } else if ((s = get_real(ld, "rope.scale_linear", 0.0, &factor)) != CT_OK) {
        return s;
    }
    if (factor != 0) {
        if (!(factor > 0)) return core_err(CT_ERR_FORMAT, "%s: rope scaling factor %g must be positive", f, factor);
        hp->rope_scale = 1.0 / factor;
    }
    /* An explicit attention scale wins; else 1/sqrt(key_length) (gemma's query_pre_attn_scalar = head size). */
    if ((s = get_real(ld, "attention.scale", 0.0, &hp->attn_scale)) != CT_OK) return s;
    if (!(hp->attn_scale > 0)) hp->attn_scale = 1.0 / sqrt((double)hp->head_dim);
    /* Gemma 3 27B (62 layers) alone was trained with query_pre_attn_scalar = n_embd / n_head, and its
     * files do not say so; llama.cpp recognises it the same way. */
    if (strcmp(a->name, "gemma3") == 0 && hp->n_layer == 62 &&
        gguf_find_key(ld->f, akey(ld, "attention.scale", key, sizeof key)) < 0)
        hp->attn_scale = 1.0 / sqrt((double)hp->n_embd / hp->n_head);
    return CT_OK;
}

/* Tensor `name` with ct shape [d0, d1] (d1 = 0 for 1-D); optional tensors may be absent. */
static ct_status get_tensor(loader *ld, const char *name, int64_t d0, int64_t d1, bool optional, ct_tensor **out)
{
    *out = NULL;
    const gguf_tensor *t = gguf_find_tensor(ld->f, name);
    const char *f = gguf_name(ld->f);
    if (!t) {
        if (optional) return CT_OK;
        return core_err(CT_ERR_FORMAT, "%s: tensor %s is missing", f, name);
    }
    int nd = d1 > 0 ? 2 : 1;
    bool ok = t->n_dims == nd && (nd == 1 ? t->ne[0] == d0 : (t->ne[1] == d0 && t->ne[0] == d1));
    if (!ok) {
        char got[96];
        int n = 0;
        for (int i = t->n_dims - 1; i >= 0 && n < (int)sizeof got - 24; i--)
            n += snprintf(got + n, sizeof got - (size_t)n, "%s%lld", i == t->n_dims - 1 ? "" : ", ", (long long)t->ne[i]);
        if (nd == 1)
            return core_err(CT_ERR_FORMAT, "%s: tensor %s has shape [%s], expected [%lld]", f, name, got, (long long)d0);
        return core_err(CT_ERR_FORMAT, "%s: tensor %s has shape [%s], expected [%lld, %lld]", f, name, got,
                        (long long)d0, (long long)d1);
    }
    if (t->dtype == CT_DTYPE_COUNT)
        return core_err(CT_ERR_UNSUPPORTED, "%s: tensor %s has type %s, which ctorch does not support", f, name,
                        gguf_ggml_type_name(t->ggml_type));
    if (nd == 1 && !ct_dtype_is_float(t->dtype))
        return core_err(CT_ERR_FORMAT, "%s: norm tensor %s must be a float type, got %s", f, name,
                        gguf_ggml_type_name(t->ggml_type));
    ct_status s = gguf_tensor_to_ct(ld->f, t, out);
    if (s == CT_OK) ld->m->weight_bytes += t->size;
    return s;
}

static ct_status load_layer(loader *ld, int il)
{
    llm_model *m = ld->m;
    const llm_hparams *hp = &m->hp;
    const llm_arch *a = m->arch;
    llm_layer *L = &m->layers[il];
    const int64_t E = hp->n_embd, F = hp->n_ff;
    const int64_t nq = (int64_t)hp->n_head * hp->head_dim, nk = (int64_t)hp->n_head_kv * hp->head_dim,
                  nv = (int64_t)hp->n_head_kv * hp->head_dim_v, no = (int64_t)hp->n_head * hp->head_dim_v;
    struct {
        const char *suffix;
        ct_tensor **dst;
        int64_t d0, d1;
        bool want;
    } specs[] = {
        {"attn_norm", &L->attn_norm, E, 0, true},
        {"attn_q", &L->wq, nq, E, true},
        {"attn_k", &L->wk, nk, E, true},
        {"attn_v", &L->wv, nv, E, true},
        {"attn_output", &L->wo, E, no, true},
        {"attn_q_norm", &L->q_norm, hp->head_dim, 0, a->qk_norm},
        {"attn_k_norm", &L->k_norm, hp->head_dim, 0, a->qk_norm},
        {"post_attention_norm", &L->post_attn_norm, E, 0, a->post_norms},
        {"ffn_norm", &L->ffn_norm, E, 0, true},
        {"ffn_gate", &L->w_gate, F, E, true},
        {"ffn_up", &L->w_up, F, E, true},
        {"ffn_down", &L->w_down, E, F, true},
        {"post_ffw_norm", &L->post_ffn_norm, E, 0, a->post_norms},
    };
    for (size_t i = 0; i < sizeof specs / sizeof specs[0]; i++) {
        if (!specs[i].want) continue;
        char name[64];
        snprintf(name, sizeof name, "blk.%d.%s.weight", il, specs[i].suffix);
        ct_status s = get_tensor(ld, name, specs[i].d0, specs[i].d1, false, specs[i].dst);
        if (s != CT_OK) return s;
    }
    bool global = a->swa_period <= 0 || (il + 1) % a->swa_period == 0;
    L->window = global ? 0 : hp->n_swa;
    L->rope = (ct_rope_params){
        .n_dims = hp->n_rot,
        .freq_base = global ? hp->rope_base : hp->rope_base_swa,
        .freq_scale = global ? hp->rope_scale : 1.0,
        .mode = a->rope_mode,
    };
    return CT_OK;
}

static ct_status load_all(loader *ld, llm_progress_fn progress, void *ctx)
{
    llm_model *m = ld->m;
    gguf_file *f = ld->f;
    const char *s = NULL;
    size_t len = 0;
    ct_status st = gguf_get_str(f, "general.architecture", &s, &len);
    if (st == CT_ERR_NOT_FOUND)
        return core_err(CT_ERR_FORMAT, "%s: general.architecture is missing: not a model file", gguf_name(f));
    if (st != CT_OK) return st;
    if (len >= sizeof ld->arch || (memcpy(ld->arch, s, len), ld->arch[len] = 0, !(m->arch = llm_arch_find(ld->arch))))
        return core_err(CT_ERR_UNSUPPORTED, "%s: architecture '%.*s' is not supported (supported: %s)", gguf_name(f),
                        (int)(len < 32 ? len : 32), s, llm_arch_list());
    if (gguf_get_str(f, "general.name", &s, &len) == CT_OK)
        snprintf(m->name, sizeof m->name, "%.*s", (int)(len < sizeof m->name ? len : sizeof m->name - 1), s);
    else
        snprintf(m->name, sizeof m->name, "%s", base_name(gguf_name(f)));
    int64_t ft = -1;
    if (gguf_get_i64_or(f, "general.file_type", -1, &ft) == CT_OK) m->file_type = (int)ft;

    if ((st = read_hparams(ld)) != CT_OK) return st;
    llm_hparams *hp = &m->hp;
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return core_err(CT_ERR_FORMAT, "%s: tensor token_embd.weight is missing", gguf_name(f));
    if (te->n_dims != 2 || te->ne[1] <= 0 || te->ne[1] > INT32_MAX)
        return core_err(CT_ERR_FORMAT, "%s: token_embd.weight must be 2-D [n_embd, n_vocab]", gguf_name(f));
    hp->n_vocab = (int)te->ne[1];

    uint64_t total = gguf_file_size(f), done = 0;
    if ((st = get_tensor(ld, "token_embd.weight", hp->n_vocab, hp->n_embd, false, &m->tok_embd)) != CT_OK) return st;
    if ((st = get_tensor(ld, "output_norm.weight", hp->n_embd, 0, false, &m->output_norm)) != CT_OK) return st;
    if ((st = get_tensor(ld, "output.weight", hp->n_vocab, hp->n_embd, true, &m->output)) != CT_OK) return st;
    if (!m->output) {
        m->output = m->tok_embd;
        m->tied_output = true;
    }
    if (hp->n_layer > gguf_tensor_count(f))
        return core_err(CT_ERR_FORMAT, "%s: block_count %d is more than the file's %lld tensors", gguf_name(f),
                        hp->n_layer, (long long)gguf_tensor_count(f));
    m->layers = calloc((size_t)hp->n_layer, sizeof *m->layers);
    if (!m->layers) return core_err(CT_ERR_OOM, "%s: out of memory for %d layers", gguf_name(f), hp->n_layer);
    for (int il = 0; il < hp->n_layer; il++) {
        if ((st = load_layer(ld, il)) != CT_OK) return st;
        done = m->weight_bytes;
        if (progress) progress(done < total ? done : total, total, ctx);
    }

    if (gguf_get_str(f, "tokenizer.chat_template", &s, &len) == CT_OK) {
        m->chat_template = malloc(len + 1);
        if (!m->chat_template) return core_err(CT_ERR_OOM, "%s: out of memory for the chat template", gguf_name(f));
        memcpy(m->chat_template, s, len);
        m->chat_template[len] = 0;
    }
    if (gguf_find_key(f, "tokenizer.ggml.model") >= 0) {
        if ((st = llm_tokenizer_load_opts(f, ld->bpe_pre, &m->tok)) != CT_OK) return st;
        int nv = llm_vocab_size(m->tok);
        if (nv > hp->n_vocab)
            return core_err(CT_ERR_FORMAT, "%s: the tokenizer has %d tokens but token_embd only %d rows", gguf_name(f),
                            nv, hp->n_vocab);
    }
    if (progress) progress(total, total, ctx);
    return CT_OK;
}

ct_status llm_model_load(const char *path, llm_progress_fn progress, void *ctx, llm_model **out)
{
    return llm_model_load_opts(path, NULL, progress, ctx, out);
}

ct_status llm_model_load_opts(const char *path, const llm_load_opts *opts, llm_progress_fn progress, void *ctx,
                              llm_model **out)
{
    if (!path || !out) return core_err(CT_ERR_INVALID_ARG, "llm_model_load: NULL argument");
    *out = NULL;
    llm_model *m = calloc(1, sizeof *m);
    if (!m) return core_err(CT_ERR_OOM, "llm_model_load: out of memory");
    m->file_type = -1;
    snprintf(m->path, sizeof m->path, "%s", path);
    ct_status s = gguf_open(path, &m->gguf);
    if (s == CT_OK) {
        loader ld = {.f = m->gguf, .m = m, .bpe_pre = opts ? opts->bpe_pre : NULL};
        s = load_all(&ld, progress, ctx);
    }
    if (s != CT_OK) {
        llm_model_free(m);
        return s;
    }
    *out = m;
    return CT_OK;
}

void llm_model_free(llm_model *m)
{
    if (!m) return;
    if (m->layers) {
        for (int il = 0; il < m->hp.n_layer; il++) {
            llm_layer *L = &m->layers[il];
            ct_tensor *ts[] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->q_norm, L->k_norm,
                               L->post_attn_norm, L->ffn_norm, L->w_gate, L->w_up, L->w_down, L->post_ffn_norm};
            for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ct_tensor_free(ts[i]);
        }
        free(m->layers);
    }
    if (!m->tied_output) ct_tensor_free(m->output);
    ct_tensor_free(m->tok_embd);
    ct_tensor_free(m->output_norm);
    llm_tokenizer_free(m->tok);
    free(m->chat_template);
    gguf_close(m->gguf);
    free(m);
}

/* The weights of repeating layer il (NULL slots skipped); at most LAYER_WEIGHTS. */
#define LAYER_WEIGHTS 13
static int layer_weights(const llm_model *m, int il, const ct_tensor **ts)
{
    const llm_layer *L = &m->layers[il];
    const ct_tensor *all[LAYER_WEIGHTS] = {L->attn_norm, L->wq, L->wk, L->wv, L->wo, L->q_norm, L->k_norm,
                                           L->post_attn_norm, L->ffn_norm, L->w_gate, L->w_up, L->w_down,
                                           L->post_ffn_norm};
    int n = 0;
    for (int i = 0; i < LAYER_WEIGHTS; i++)
        if (all[i]) ts[n++] = all[i];
    return n;
}

/* The weights outside the repeating layers: llama.cpp's -ngl counts them as one more layer
 * (the output), offloaded once every repeating layer is. */
static int global_weights(const llm_model *m, const ct_tensor **ts)
{
    int n = 0;
    ts[n++] = m->tok_embd;
    if (m->output_norm) ts[n++] = m->output_norm;
    if (!m->tied_output && m->output) ts[n++] = m->output;
    return n;
}

static uint64_t sum_bytes(const ct_tensor *const *ts, int n)
{
    uint64_t b = 0;
    for (int i = 0; i < n; i++) b += ct_tensor_nbytes(ts[i]);
    return b;
}

/* Weight bytes that offloading `n` layers (llama.cpp's count) puts on the device. */
static uint64_t offload_bytes(const llm_model *m, int n)
{
    const ct_tensor *ts[LAYER_WEIGHTS];
    uint64_t b = 0;
    int nl = m->hp.n_layer;
    for (int il = nl - (n < nl ? n : nl); il < nl; il++) b += sum_bytes(ts, layer_weights(m, il, ts));
    if (n > nl) b += sum_bytes(ts, global_weights(m, ts));
    return b;
}

/* How many layers to offload: `want` (clamped), or when negative as many as fit in the
 * device's free memory less a margin for the KV cache, activations and the backend's own
 * use (a tenth of its memory, at least 256 MiB). A device that cannot report its memory
 * takes them all; what then fails to fit stays on the host at placement. */
static int layers_to_offload(const llm_model *m, const char *device, int want)
{
    int all = m->hp.n_layer + 1;
    if (want >= 0) return want < all ? want : all;
    uint64_t free_b = 0, total_b = 0;
    if (ct_device_memory(device, &free_b, &total_b) != CT_OK) {
        ct_clear_error();
        return all;
    }
    uint64_t margin = total_b / 10 > (256u << 20) ? total_b / 10 : (256u << 20);
    uint64_t budget = free_b > margin ? free_b - margin : 0;
    int n = all;
    while (n > 0 && offload_bytes(m, n) > budget) n--;
    return n;
}

/* Fault the mapped pages in now, so the first token does not pay for the disk. */
static ct_status touch_host(const ct_tensor *t)
{
    const void *p = NULL;
    ct_status s = ct_tensor_data(t, &p);
    if (s != CT_OK) return s;
    const volatile unsigned char *b = p;
    size_t bytes = ct_tensor_nbytes(t);
    for (size_t off = 0; off < bytes; off += 4096) (void)b[off];
    return CT_OK;
}

typedef struct place_state {
    const llm_model *m;
    const char *device;
    bool on_host_only; /* the device is the CPU: nothing to place, the mapping is the data */
    bool full;         /* the device ran out of memory: the rest go to the host */
    uint64_t done, on_dev;
    llm_progress_fn progress;
    void *ctx;
} place_state;

/* Places one weight on the device (to_dev) or on the host; a device that is full sends it,
 * and everything after it, to the host. */
static ct_status place_one(place_state *p, const ct_tensor *t, bool to_dev)
{
    ct_status s = CT_OK;
    if (to_dev && !p->full && !p->on_host_only) {
        s = ct_tensor_place(t, p->device);
        if (s == CT_OK) p->on_dev += ct_tensor_nbytes(t);
        if (s == CT_ERR_DEVICE_OOM) {
            core_log(CT_LOG_WARN, "%s: %s is full after %.1f MiB of weights; the rest stay on the host (%s)",
                     p->m->name, p->device, (double)p->on_dev / 1048576.0, ct_last_error());
            p->full = true;
        }
    }
    if (!to_dev || p->full || p->on_host_only) {
        s = touch_host(t);
        /* the CPU's own layouts of a matrix (decode repacks, dense copies) are made now, not
         * by the first token (on the 2-core machine a TinyLlama-shaped Q5_K_M's first decode
         * step took 1.1 s of repacking against 16 ms); an embedding that is only looked up
         * has none worth making (TinyLlama Q4_K_M: a 36 MB repack nobody reads) */
        bool lookup_only = t == p->m->tok_embd && !p->m->tied_output;
        if (s == CT_OK && p->on_host_only) {
            /* on the CPU alone nothing is placed (an earlier placement, on a device since
             * lost, is dropped): the layouts only */
            s = ct_tensor_place(t, NULL);
            if (s == CT_OK && !lookup_only) s = ct_tensor_place_ex(t, "cpu", CT_PLACE_KEEP_HOME);
            if (s == CT_OK) p->on_dev += ct_tensor_nbytes(t);
        } else if (s == CT_OK) { /* on a chain with a GPU, a host weight keeps its ops on the host */
            s = ct_tensor_place_ex(t, "cpu", lookup_only ? CT_PLACE_NO_LAYOUT : 0);
        }
    }
    p->done += ct_tensor_nbytes(t);
    if (p->progress) p->progress(p->done, p->m->weight_bytes, p->ctx);
    return s;
}

ct_status llm_model_place(const llm_model *m, const char *device, int n_layers, llm_progress_fn progress, void *ctx,
                          llm_placement *out)
{
    if (!m) return core_err(CT_ERR_INVALID_ARG, "llm_model_place: NULL model");
    if (out) *out = (llm_placement){0};
    ct_device_info head;
    if (!device) {
        ct_status s = ct_chain_get(0, &head);
        if (s != CT_OK) return s;
        device = head.name;
    }
    place_state p = {m, device, strcmp(device, "cpu") == 0, false, 0, 0, progress, ctx};
    int nl = m->hp.n_layer, n = p.on_host_only ? nl + 1 : layers_to_offload(m, device, n_layers);
    const ct_tensor *ts[LAYER_WEIGHTS];
    ct_status s = CT_OK;
    /* the last n layers, as llama.cpp offloads them; past n_layer the output (and the embedding) */
    for (int il = 0; il < nl && s == CT_OK; il++) {
        int k = layer_weights(m, il, ts);
        bool to_dev = il >= nl - n;
        for (int i = 0; i < k && s == CT_OK; i++) s = place_one(&p, ts[i], to_dev);
        if (s == CT_OK && to_dev && !p.full && out) out->layers++;
    }
    int k = global_weights(m, ts);
    for (int i = 0; i < k && s == CT_OK; i++) s = place_one(&p, ts[i], n > nl);
    if (out) {
        out->bytes = p.on_dev;
        out->output = n > nl && !p.full;
        snprintf(out->device, sizeof out->device, "%s", device);
    }
    return s;
}

void llm_model_describe(const llm_model *m, char *buf, size_t len)
{
    const llm_hparams *hp = &m->hp;
    snprintf(buf, len, "%s (%s): %d layers, %d embd, %d ffn, %d/%d heads x %d, vocab %d, ctx %d, %.1f MiB%s",
             m->name, m->arch->name, hp->n_layer, hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv, hp->head_dim,
             hp->n_vocab, hp->n_ctx_train, (double)m->weight_bytes / 1048576.0, m->tied_output ? ", tied output" : "");
}
