/* The KV cache: per layer one key and one value tensor laid out
 * [n_head_kv, n_ctx, head_dim], so the first n positions are a narrow along
 * dim 1 that ct_sdpa reads directly as [Hkv, Tk, D]. */
#include <stdlib.h>

#include "core/backend.h"
#include "core/tensor.h"
#include "llm/model.h"

/* A host-resident cache needs the CPU: with a chain like "cuda" alone, its attention and
 * row writes would have no device that can reach it. */
static bool chain_has_cpu(void)
{
    int n = ct_chain_length();
    for (int i = 0; i < n; i++) {
        ct_device_info info;
        if (ct_chain_get(i, &info) == CT_OK && info.kind == CT_DEVICE_CPU) return true;
    }
    return false;
}

/* A layer's cache lives where the layer's key projection was placed (llm_model_place), so
 * attention runs beside its weights and --gpu-layers needs no model code naming a device.
 * A cache that does not fit there (an oversized context) stays on the host: that layer's
 * attention then runs on the CPU, like llama.cpp's partial offload, instead of failing
 * (when the chain has a CPU). */
static ct_status place_like(const ct_tensor *k, const ct_tensor *v, const ct_tensor *wk, int layer)
{
    const ct_device_info *home = wk && wk->st->home ? &wk->st->home->info : NULL;
    if (!home) return CT_OK;
    ct_status s = ct_tensor_place(k, home->name);
    if (s == CT_OK) s = ct_tensor_place(v, home->name);
    if (s != CT_ERR_DEVICE_OOM && s != CT_ERR_OOM) return s;
    double mib = (double)(ct_tensor_nbytes(k) + ct_tensor_nbytes(v)) / (1 << 20);
    if (!chain_has_cpu())
        return core_err(s, "KV cache of layer %d (%.1f MiB) does not fit on %s (%s), and the device chain has no CPU "
                           "to keep it on the host: use a smaller context (-c) or add cpu to the chain (-d %s,cpu)",
                        layer, mib, home->name, ct_last_error(), home->name);
    core_log(CT_LOG_WARN, "KV cache of layer %d (%.1f MiB) does not fit on %s (%s): kept on the host", layer, mib,
             home->name, ct_last_error());
    ct_status r = ct_tensor_place(k, "cpu");
    return r == CT_OK ? ct_tensor_place(v, "cpu") : r;
}

ct_status llm_kv_cache_init(llm_kv_cache *c, const llm_model *m, int n_ctx, ct_dtype dtype)
{
    if (!c || !m) return core_err(CT_ERR_INVALID_ARG, "llm_kv_cache_init: NULL argument");
    *c = (llm_kv_cache){0};
    if (dtype != CT_F16 && dtype != CT_F32)
        return core_err(CT_ERR_DTYPE, "KV cache: dtype must be f16 or f32, got %s", ct_dtype_name(dtype));
    if (n_ctx <= 0) return core_err(CT_ERR_INVALID_ARG, "KV cache: context length must be positive, got %d", n_ctx);
    const llm_hparams *hp = &m->hp;
    c->n_layer = hp->n_layer;
    c->n_ctx = n_ctx;
    c->dtype = dtype;
    c->k = calloc((size_t)hp->n_layer, sizeof *c->k);
    c->v = calloc((size_t)hp->n_layer, sizeof *c->v);
    if (!c->k || !c->v) {
        llm_kv_cache_free(c);
        return core_err(CT_ERR_OOM, "KV cache: out of memory for %d layers", hp->n_layer);
    }
    for (int l = 0; l < hp->n_layer; l++) {
        int64_t ks[3] = {hp->n_head_kv, n_ctx, hp->head_dim};
        int64_t vs[3] = {hp->n_head_kv, n_ctx, hp->head_dim_v};
        /* ct_empty leaves the storage unwritten: pages are touched only as positions fill. */
        ct_status s = ct_empty(3, ks, dtype, &c->k[l]);
        if (s == CT_OK) s = ct_empty(3, vs, dtype, &c->v[l]);
        if (s == CT_OK) s = place_like(c->k[l], c->v[l], m->layers[l].wk, l);
        if (s != CT_OK) {
            llm_kv_cache_free(c);
            return s;
        }
    }
    return CT_OK;
}

void llm_kv_cache_clear(llm_kv_cache *c)
{
    if (c) c->n_past = 0;
}

void llm_kv_cache_free(llm_kv_cache *c)
{
    if (!c) return;
    for (int l = 0; l < c->n_layer; l++) {
        if (c->k) ct_tensor_free(c->k[l]);
        if (c->v) ct_tensor_free(c->v[l]);
    }
    free(c->k);
    free(c->v);
    *c = (llm_kv_cache){0};
}
