/* Transformer language models read from GGUF: the architecture table, the
 * hyper-parameters and weights of a loaded model, the KV cache and the forward
 * pass. The model is built from public ops only (ct_linear, ct_rms_norm,
 * ct_rope, ct_sdpa, ...), so it runs wherever the executor sends each op. */
#ifndef CT_LLM_MODEL_H
#define CT_LLM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "ctorch/ctorch.h"

typedef enum llm_ffn_act {
    LLM_ACT_SWIGLU, /* silu(gate) * up */
    LLM_ACT_GEGLU   /* gelu_tanh(gate) * up */
} llm_ffn_act;

/* What distinguishes one llama-like architecture from another. Adding an
 * architecture is one entry in the table of arch.c plus whatever tensors it
 * needs beyond these flags. */
typedef struct llm_arch {
    const char *name;          /* general.architecture */
    ct_rope_mode rope_mode;
    llm_ffn_act act;
    bool qk_norm;              /* per-head RMS norms on q and k (attn_q_norm, attn_k_norm) */
    bool post_norms;           /* RMS norms on the attention and FFN outputs before the residual add */
    bool embd_scale;           /* embeddings scaled by sqrt(n_embd) */
    int swa_period;            /* > 0: layer il is global when (il + 1) % swa_period == 0, else sliding-window */
    double swa_rope_base;      /* RoPE base of sliding-window layers */
    double default_rms_eps;    /* when the file has no epsilon */
} llm_arch;

/* NULL when the architecture is not supported. */
const llm_arch *llm_arch_find(const char *name);
/* "llama, gemma3" for error messages. */
const char *llm_arch_list(void);

typedef struct llm_hparams {
    int n_vocab;
    int n_ctx_train;     /* context length the model was trained for */
    int n_embd;
    int n_layer;
    int n_ff;
    int n_head;
    int n_head_kv;
    int head_dim;        /* per-head size of q and k */
    int head_dim_v;      /* per-head size of v */
    int n_rot;           /* rotated dims per head */
    double rms_eps;
    double rope_base;    /* global layers */
    double rope_scale;   /* freq_scale of global layers (1 / linear factor) */
    double rope_base_swa;
    int n_swa;           /* sliding window, 0 = none */
    double attn_scale;   /* softmax scale of q.k */
    double logit_softcap; /* 0 = none: final logits = cap * tanh(logits / cap) */
} llm_hparams;

typedef struct llm_layer {
    ct_tensor *attn_norm;                 /* [n_embd] */
    ct_tensor *wq, *wk, *wv, *wo;         /* [n_head*head_dim, n_embd], ..., [n_embd, n_head*head_dim_v] */
    ct_tensor *q_norm, *k_norm;           /* [head_dim] or NULL */
    ct_tensor *post_attn_norm;            /* [n_embd] or NULL */
    ct_tensor *ffn_norm;                  /* [n_embd] */
    ct_tensor *w_gate, *w_up, *w_down;    /* [n_ff, n_embd], [n_ff, n_embd], [n_embd, n_ff] */
    ct_tensor *post_ffn_norm;             /* [n_embd] or NULL */
    ct_rope_params rope;
    int window;                           /* sliding window of this layer, 0 = full attention */
} llm_layer;

struct gguf_file;
struct llm_tokenizer;

typedef struct llm_model {
    const llm_arch *arch;
    llm_hparams hp;
    char name[128];              /* general.name or the file name */
    char path[512];
    struct gguf_file *gguf;      /* keeps the mapping open */
    ct_tensor *tok_embd;         /* [n_vocab, n_embd] */
    ct_tensor *output_norm;      /* [n_embd] */
    ct_tensor *output;           /* [n_vocab, n_embd]; token_embd when tied */
    bool tied_output;
    llm_layer *layers;           /* [n_layer] */
    char *chat_template;         /* tokenizer.chat_template or NULL */
    struct llm_tokenizer *tok;   /* owned */
    uint64_t weight_bytes;       /* bytes of all weights */
    int file_type;               /* general.file_type, -1 when absent */
} llm_model;

/* Called during loading with the bytes done so far out of total. */
typedef void (*llm_progress_fn)(uint64_t done, uint64_t total, void *ctx);

/* Maps the file, checks the architecture, reads hyper-parameters, weights
 * (zero-copy over the mapping) and the tokenizer. Errors name the file and
 * the missing or malformed key/tensor. */
ct_status llm_model_load(const char *path, llm_progress_fn progress, void *ctx, llm_model **out);
/* Load options; a zeroed struct gives llm_model_load's behaviour. */
typedef struct llm_load_opts {
    const char *bpe_pre; /* BPE pre-tokenizer to use instead of the file's tokenizer.ggml.pre ("gpt2", ...);
                            NULL: CTORCH_BPE_PRE, else the file's. The CLI's `--bpe-pre NAME`. */
} llm_load_opts;
ct_status llm_model_load_opts(const char *path, const llm_load_opts *opts, llm_progress_fn progress, void *ctx,
                              llm_model **out);
void llm_model_free(llm_model *m);
/* Where llm_model_place put the weights. */
typedef struct llm_placement {
    char device[32]; /* the device the offloaded layers went to */
    int layers;      /* repeating layers on it (all their weights) */
    bool output;     /* the output (and token embedding) on it too */
    uint64_t bytes;  /* weight bytes on it */
} llm_placement;

/* Places the weights for a run (ct_tensor_place: ops follow them), the way llama.cpp's
 * -ngl offloads: the last n_layers repeating layers on `device` (NULL = the chain head),
 * n_layers > n_layer also the output and the token embedding, the rest on the host;
 * n_layers < 0 = as many as fit in the device's free memory less a margin. A weight that
 * does not fit after all stays on the host, and so do the ones after it. On the CPU the
 * mapped pages are faulted in instead. The KV cache follows: llm_kv_cache_init puts each
 * layer's cache where its key projection lives. */
ct_status llm_model_place(const llm_model *m, const char *device, int n_layers, llm_progress_fn progress, void *ctx,
                          llm_placement *out);
/* One-line summary: "llama, 4 layers, 256 embd, 8/4 heads, ctx 2048, 13.3 MiB". */
void llm_model_describe(const llm_model *m, char *buf, size_t len);

/* Per-layer keys and values: k[l] [n_head_kv, n_ctx, head_dim], v[l] [n_head_kv, n_ctx, head_dim_v]. */
typedef struct llm_kv_cache {
    int n_layer;
    int n_ctx;
    int n_past;        /* positions filled */
    ct_dtype dtype;    /* f16 (default) or f32 */
    ct_tensor **k, **v;
} llm_kv_cache;

ct_status llm_kv_cache_init(llm_kv_cache *c, const llm_model *m, int n_ctx, ct_dtype dtype);
void llm_kv_cache_clear(llm_kv_cache *c);
void llm_kv_cache_free(llm_kv_cache *c);

/* Runs n tokens at positions kv->n_past .. n_past+n-1 (one batch pass per layer)
 * and appends their keys and values to the cache. logits: [n, n_vocab] when
 * all_logits, else [1, n_vocab] for the last token. CT_ERR_RANGE when the
 * tokens do not fit in the cache's context; bad token ids give CT_ERR_RANGE. */
ct_status llm_forward(const llm_model *m, llm_kv_cache *kv, const int32_t *tokens, int n, bool all_logits,
                      ct_tensor **logits);
/* One decode token whose per-token values are tensors, so a recorded step replays it at
 * any position: ids [1] and pos [1] i32 (the token, its position), slot [n_head_kv] i32
 * (h * n_ctx + position: the KV rows it writes), len [1] i32 (position + 1: the keys
 * attended). Leaves kv->n_past to the caller. logits [1, n_vocab]. */
typedef struct llm_step_inputs {
    const ct_tensor *ids, *pos, *slot, *len;
} llm_step_inputs;
ct_status llm_forward_step(const llm_model *m, llm_kv_cache *kv, const llm_step_inputs *in, ct_tensor **logits);
/* Diagnosis after non-finite logits: runs the same tokens at the same
 * positions again, checking the hidden state after the embedding and after
 * every layer (too slow for every step). *stage: -1 the token embedding,
 * 0..n_layer-1 that layer, n_layer the output norm/projection, INT32_MIN all
 * finite this time; *nan: NaN rather than only infinities. kv->n_past is kept. */
ct_status llm_forward_find_nonfinite(const llm_model *m, llm_kv_cache *kv, const int32_t *tokens, int n,
                                     int *stage, bool *nan);

#endif
