/* Model quantization: GGUF in, GGUF out, with llama.cpp's per-tensor type mixes
 * (Q4_K_M, Q5_K_S, ...), so files agree with llama-quantize's for the same input. */
#ifndef CT_FORMATS_QUANTIZE_H
#define CT_FORMATS_QUANTIZE_H

#include "formats/gguf.h"

/* A target the user can name: the base block type and the llama.cpp file type id
 * stored in general.file_type. */
typedef struct quantize_mix {
    const char *name;  /* "Q4_K_M" */
    int ftype;         /* llama_ftype value */
    ct_dtype base;     /* the type most tensors get */
} quantize_mix;

/* NULL if `name` (case-insensitive) is not a supported mix. */
const quantize_mix *quantize_find_mix(const char *name);
/* Comma-separated list of the supported names, for help text. */
const char *quantize_mix_names(void);

/* What the type rules need to know about the model and where we are in it.
 * Counters advance in tensor-name order, as llama.cpp's (sorted) loader does. */
typedef struct quantize_state {
    const quantize_mix *mix;
    int n_layer;          /* {arch}.block_count */
    int n_gqa;            /* head_count / head_count_kv */
    bool has_output;      /* output.weight exists (else token_embd is the output) */
    int n_attention_wv;   /* attn_v tensors in the model */
    int i_attention_wv;   /* attn_v tensors seen so far */
    int i_ffn_down;       /* ffn_down tensors seen so far */
    int n_fallback;       /* tensors whose row length forced a fallback type */
} quantize_state;

/* Should this tensor be quantized at all (2-D+ weights, not norms)? */
bool quantize_wants(const char *name, int n_dims);
/* The type for one tensor (advances the counters). ne0 = row length. */
ct_dtype quantize_tensor_type(quantize_state *qs, const char *name, int64_t ne0);

typedef void (*quantize_progress_fn)(void *ctx, int64_t done, int64_t total, const char *tensor);

typedef struct quantize_options {
    int n_threads;            /* <= 0: 2 */
    bool allow_requantize;    /* quantized inputs are refused unless set (quality loss) */
    quantize_progress_fn progress;
    void *progress_ctx;
    volatile sig_atomic_t *stop; /* optional: nonzero cancels (checked between tensors and while writing) */
} quantize_options;

typedef struct quantize_report {
    uint64_t bytes_in, bytes_out;
    int n_tensors, n_quantized, n_fallback;
} quantize_report;

ct_status quantize_file(const char *in_path, const char *out_path, const char *mix_name,
                        const quantize_options *opt, quantize_report *report);

#endif
