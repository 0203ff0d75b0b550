/* Model quantization with llama.cpp's type mixes. The rules are data about which
 * tensors are most sensitive (attention V, FFN down, the output matrix) and get
 * more bits; they are kept as close to llama-quantize's as our types allow, so a
 * file quantized here has the same tensor types and bytes as one made there. */
#include "formats/quantize.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "formats/atomic_file.h"
#include "quant/quant.h"

/* llama_ftype ids (general.file_type). Q2_K_S: llama-quantize refuses it without an
 * importance matrix (Q2_K alone loses too much); ctorch has none, so it writes the same
 * tensor types with the reference quantizer, as llama.cpp would with the check lifted. */
static const quantize_mix g_mixes[] = {
    {"Q8_0", 7, CT_Q8_0},    {"Q6_K", 18, CT_Q6_K},   {"Q5_K_M", 17, CT_Q5_K}, {"Q5_K_S", 16, CT_Q5_K},
    {"Q5_1", 9, CT_Q5_1},    {"Q5_0", 8, CT_Q5_0},    {"Q4_K_M", 15, CT_Q4_K}, {"Q4_K_S", 14, CT_Q4_K},
    {"Q4_1", 3, CT_Q4_1},    {"Q4_0", 2, CT_Q4_0},    {"Q3_K_L", 13, CT_Q3_K}, {"Q3_K_M", 12, CT_Q3_K},
    {"Q3_K_S", 11, CT_Q3_K}, {"Q2_K", 10, CT_Q2_K},   {"Q2_K_S", 21, CT_Q2_K}, {"F16", 1, CT_F16},
    {"BF16", 32, CT_BF16},
};
#define N_MIXES (sizeof g_mixes / sizeof g_mixes[0])

const quantize_mix *quantize_find_mix(const char *name)
{
    for (size_t i = 0; name && i < N_MIXES; i++)
        if (!strcasecmp(name, g_mixes[i].name)) return &g_mixes[i];
    return NULL;
}

const char *quantize_mix_names(void)
{
    return "Q8_0, Q6_K, Q5_K_M, Q5_K_S, Q5_1, Q5_0, Q4_K_M, Q4_K_S, Q4_1, Q4_0, Q3_K_L, Q3_K_M, Q3_K_S, Q2_K, Q2_K_S, "
           "F16, BF16";
}

static bool has(const char *name, const char *part) { return strstr(name, part) != NULL; }
static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && !strcmp(s + n - m, suffix);
}

bool quantize_wants(const char *name, int n_dims)
{
    return ends_with(name, "weight") && n_dims >= 2 && !has(name, "_norm.weight") && !has(name, "ffn_gate_inp.weight");
}

/* The layers that get more bits in the _M mixes: first and last eighth, and every third in between. */
static bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

static bool is_mix(const quantize_state *qs, const char *name) { return !strcasecmp(qs->mix->name, name); }

/* attn_v (and, counted with it, attn_qkv in n_attention_wv): the most sensitive matrix. */
static ct_dtype attn_v_type(const quantize_state *qs, ct_dtype t)
{
    int i = qs->i_attention_wv;
    if (is_mix(qs, "Q2_K")) return qs->n_gqa >= 4 ? CT_Q4_K : CT_Q3_K;
    if (is_mix(qs, "Q2_K_S")) return qs->n_gqa >= 4 ? CT_Q4_K : t;
    if (is_mix(qs, "Q3_K_M")) return i < 2 ? CT_Q5_K : CT_Q4_K;
    if (is_mix(qs, "Q3_K_L")) return CT_Q5_K;
    if ((is_mix(qs, "Q4_K_M") || is_mix(qs, "Q5_K_M")) && use_more_bits(i, qs->n_attention_wv)) return CT_Q6_K;
    if (is_mix(qs, "Q4_K_S") && i < 4) return CT_Q5_K;
    return t;
}

static ct_dtype ffn_down_type(const quantize_state *qs, ct_dtype t)
{
    int i = qs->i_ffn_down, n = qs->n_layer;
    if (is_mix(qs, "Q2_K")) return CT_Q3_K;
    if (is_mix(qs, "Q2_K_S")) return i < n / 8 ? CT_Q4_K : t;
    if (is_mix(qs, "Q3_K_M")) return i < n / 16 ? CT_Q5_K : CT_Q4_K;
    if (is_mix(qs, "Q3_K_L")) return CT_Q5_K;
    if ((is_mix(qs, "Q4_K_M") || is_mix(qs, "Q5_K_M")) && use_more_bits(i, n)) return CT_Q6_K;
    if (is_mix(qs, "Q4_K_S") && i < n / 8) return CT_Q5_K;
    return t;
}

static ct_dtype attn_output_type(const quantize_state *qs, ct_dtype t)
{
    if (is_mix(qs, "Q2_K")) return CT_Q3_K;
    if (is_mix(qs, "Q3_K_M")) return CT_Q4_K;
    if (is_mix(qs, "Q3_K_L")) return CT_Q5_K;
    return t;
}

static ct_dtype attn_qkv_type(const quantize_state *qs, ct_dtype t)
{
    if (is_mix(qs, "Q3_K_M") || is_mix(qs, "Q3_K_L")) return CT_Q4_K;
    if (is_mix(qs, "Q4_K_M")) return CT_Q5_K;
    if (is_mix(qs, "Q5_K_M")) return CT_Q6_K;
    return t;
}

/* Row lengths that are not a multiple of a K-quant's 256: llama.cpp falls back to a
 * 32-block type of similar size (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K/Q3_K ->
 * Q4_0; older releases used IQ4_NL for the last two, which ctorch lacks), and to F16
 * where even 32 does not divide the row. 32-block base types never need it. */
static ct_dtype fallback_type(quantize_state *qs, ct_dtype t, int64_t ne0)
{
    if (ne0 % ct_dtype_block_size(t) == 0) return t;
    qs->n_fallback++;
    ct_dtype f = t == CT_Q4_K ? CT_Q5_0 : t == CT_Q5_K ? CT_Q5_1 : t == CT_Q6_K ? CT_Q8_0 : CT_Q4_0;
    return ne0 % ct_dtype_block_size(f) == 0 ? f : CT_F16;
}

ct_dtype quantize_tensor_type(quantize_state *qs, const char *name, int64_t ne0)
{
    ct_dtype t = qs->mix->base;
    if (!ct_dtype_is_quantized(t)) return t; /* F16/BF16: no mixing */
    if (!strcmp(name, "output.weight") || (!qs->has_output && !strcmp(name, "token_embd.weight"))) {
        if (ne0 % ct_dtype_block_size(t) != 0) t = CT_Q8_0;
        else if (t != CT_Q8_0) t = CT_Q6_K;
    } else if (!strcmp(name, "token_embd.weight")) {
        /* keeps the base type */
    } else if (has(name, "attn_v.weight")) {
        t = attn_v_type(qs, t);
        qs->i_attention_wv++;
    } else if (has(name, "ffn_down")) {
        t = ffn_down_type(qs, t);
        qs->i_ffn_down++;
    } else if (has(name, "attn_output.weight")) {
        t = attn_output_type(qs, t);
    } else if (has(name, "attn_qkv.weight")) {
        t = attn_qkv_type(qs, t);
    }
    return fallback_type(qs, t, ne0);
}

/* ---- conversion of one tensor, rows split over threads ---- */

typedef struct convert_job {
    const gguf_tensor *src;
    ct_dtype dst_type;
    void *dst;
    int64_t ne0, rows, row_begin, row_end;
    ct_status status;
    char error[256];
} convert_job;

static ct_status convert_row(ct_dtype to, const float *in, void *out, int64_t n)
{
    if (to == CT_F32) {
        memcpy(out, in, sizeof(float) * (size_t)n);
    } else if (to == CT_F16 || to == CT_BF16) {
        uint16_t *o = out;
        for (int64_t i = 0; i < n; i++) o[i] = to == CT_F16 ? ct_f32_to_f16(in[i]) : ct_f32_to_bf16(in[i]);
    } else {
        return quant_quantize_row(to, in, out, n);
    }
    return CT_OK;
}

static void *convert_rows(void *arg)
{
    convert_job *j = arg;
    float *row = malloc(sizeof(float) * (size_t)j->ne0);
    if (!row) {
        j->status = CT_ERR_OOM;
        snprintf(j->error, sizeof j->error, "quantize: no memory for a row of %lld floats", (long long)j->ne0);
        return NULL;
    }
    size_t in_row = ct_dtype_row_bytes(j->src->dtype, j->ne0), out_row = ct_dtype_row_bytes(j->dst_type, j->ne0);
    for (int64_t r = j->row_begin; r < j->row_end && j->status == CT_OK; r++) {
        ct_status s = quant_dequantize_row(j->src->dtype, (const char *)j->src->data + (size_t)r * in_row, row, j->ne0);
        if (s == CT_OK) s = convert_row(j->dst_type, row, (char *)j->dst + (size_t)r * out_row, j->ne0);
        if (s != CT_OK) {
            j->status = s;
            snprintf(j->error, sizeof j->error, "%s", ct_last_error());
        }
    }
    free(row);
    return NULL;
}

static ct_status convert_tensor(const gguf_tensor *t, ct_dtype to, void *dst, int n_threads)
{
    int64_t ne0 = t->ne[0], rows = gguf_tensor_numel(t) / (ne0 ? ne0 : 1);
    if (n_threads < 1) n_threads = 1;
    if (n_threads > 16) n_threads = 16;
    convert_job jobs[16];
    pthread_t th[16];
    int started = 0;
    for (int i = 0; i < n_threads; i++) {
        jobs[i] = (convert_job){t, to, dst, ne0, rows, rows * i / n_threads, rows * (i + 1) / n_threads, CT_OK, ""};
        if (i > 0 && pthread_create(&th[i], NULL, convert_rows, &jobs[i]) == 0) started |= 1 << i;
        else if (i > 0) convert_rows(&jobs[i]);
    }
    convert_rows(&jobs[0]);
    for (int i = 1; i < n_threads; i++)
        if (started & (1 << i)) pthread_join(th[i], NULL);
    for (int i = 0; i < n_threads; i++)
        if (jobs[i].status != CT_OK)
            return core_err(jobs[i].status, "quantize %s to %s: %s", t->name, ct_dtype_name(to), jobs[i].error);
    return CT_OK;
}

/* ---- the whole file ---- */

static int cmp_tensor_name(const void *a, const void *b)
{
    return strcmp((*(const gguf_tensor *const *)a)->name, (*(const gguf_tensor *const *)b)->name);
}

static ct_status read_model_shape(gguf_file *f, quantize_state *qs)
{
    const char *arch;
    size_t len;
    char key[128];
    ct_status s = gguf_get_str(f, "general.architecture", &arch, &len);
    if (s != CT_OK) return s;
    uint32_t n_layer = 0, n_head = 1, n_head_kv = 1;
    snprintf(key, sizeof key, "%.*s.block_count", (int)len, arch);
    s = gguf_get_u32(f, key, &n_layer);
    snprintf(key, sizeof key, "%.*s.attention.head_count", (int)len, arch);
    if (s == CT_OK) s = gguf_get_u32_or(f, key, 1, &n_head);
    snprintf(key, sizeof key, "%.*s.attention.head_count_kv", (int)len, arch);
    if (s == CT_OK) s = gguf_get_u32_or(f, key, n_head, &n_head_kv);
    if (s != CT_OK) return s;
    qs->n_layer = (int)n_layer;
    qs->n_gqa = n_head_kv ? (int)(n_head / n_head_kv) : 1;
    return CT_OK;
}

/* gguf_value points past a string's length (u64) and an array's element type
 * and count (u32 + u64); the writer's raw form starts at those headers. */
static size_t raw_header_bytes(gguf_type t) { return t == GGUF_TYPE_STRING ? 8 : t == GGUF_TYPE_ARRAY ? 12 : 0; }

static ct_status copy_metadata(gguf_file *f, gguf_writer *w, const quantize_mix *mix)
{
    ct_status s = CT_OK;
    for (int64_t i = 0; i < gguf_kv_count(f) && s == CT_OK; i++) {
        gguf_value v;
        s = gguf_kv_value(f, i, &v);
        size_t h = raw_header_bytes(v.type);
        if (s == CT_OK) s = gguf_writer_set_raw(w, gguf_kv_key(f, i), v.type, v.ptr - h, v.size + h);
    }
    if (s == CT_OK) s = gguf_writer_set_u32(w, "general.quantization_version", 2);
    if (s == CT_OK) s = gguf_writer_set_u32(w, "general.file_type", (uint32_t)mix->ftype);
    return s;
}

typedef struct plan {
    const gguf_tensor **order; /* sorted by name */
    ct_dtype *type;            /* output type per sorted tensor */
    void **data;               /* converted data (NULL: copied as is) */
    int64_t n;
} plan;

static void plan_free(plan *p)
{
    for (int64_t i = 0; p->data && i < p->n; i++) free(p->data[i]);
    free(p->order);
    free(p->type);
    free(p->data);
}

static ct_status plan_types(gguf_file *f, quantize_state *qs, const quantize_options *opt, plan *p)
{
    p->n = gguf_tensor_count(f);
    p->order = calloc((size_t)p->n + 1, sizeof *p->order);
    p->type = calloc((size_t)p->n + 1, sizeof *p->type);
    p->data = calloc((size_t)p->n + 1, sizeof *p->data);
    if (!p->order || !p->type || !p->data) return core_err(CT_ERR_OOM, "quantize: out of memory");
    for (int64_t i = 0; i < p->n; i++) p->order[i] = gguf_tensor_at(f, i);
    qsort(p->order, (size_t)p->n, sizeof *p->order, cmp_tensor_name);
    for (int64_t i = 0; i < p->n; i++) {
        if (has(p->order[i]->name, "attn_v.weight") || has(p->order[i]->name, "attn_qkv.weight")) qs->n_attention_wv++;
        if (!strcmp(p->order[i]->name, "output.weight")) qs->has_output = true;
    }
    for (int64_t i = 0; i < p->n; i++) {
        const gguf_tensor *t = p->order[i];
        if (t->dtype == CT_DTYPE_COUNT)
            return core_err(CT_ERR_DTYPE, "%s: tensor %s has type %s, which ctorch cannot convert", gguf_name(f), t->name,
                            gguf_ggml_type_name(t->ggml_type));
        ct_dtype to = quantize_wants(t->name, t->n_dims) ? quantize_tensor_type(qs, t->name, t->ne[0]) : t->dtype;
        if (to != t->dtype && ct_dtype_is_quantized(t->dtype) && !opt->allow_requantize)
            return core_err(CT_ERR_DTYPE, "%s: tensor %s is already %s; requantizing loses quality (pass --allow-requantize)",
                            gguf_name(f), t->name, ct_dtype_name(t->dtype));
        p->type[i] = to;
    }
    return CT_OK;
}

ct_status quantize_file(const char *in_path, const char *out_path, const char *mix_name, const quantize_options *opt_in,
                        quantize_report *report)
{
    quantize_options opt = opt_in ? *opt_in : (quantize_options){0};
    quantize_report rep = {0};
    const quantize_mix *mix = quantize_find_mix(mix_name);
    if (!mix) return core_err(CT_ERR_INVALID_ARG, "unknown quantization type '%s' (one of: %s)", mix_name ? mix_name : "", quantize_mix_names());
    /* before any work: the input is mapped while the output is written */
    ct_status s = formats_check_output(out_path, in_path);
    if (s != CT_OK) return s;
    gguf_file *f = NULL;
    s = gguf_open(in_path, &f);
    if (s != CT_OK) return s;
    quantize_state qs = {.mix = mix};
    plan p = {0};
    gguf_writer *w = gguf_writer_new();
    if (!w) s = core_err(CT_ERR_OOM, "quantize: out of memory");
    if (s == CT_OK) s = read_model_shape(f, &qs);
    if (s == CT_OK) s = plan_types(f, &qs, &opt, &p);
    if (s == CT_OK) s = copy_metadata(f, w, mix);
    int64_t total = 0, done = 0;
    for (int64_t i = 0; s == CT_OK && i < p.n; i++) total += (int64_t)p.order[i]->size;
    for (int64_t i = 0; s == CT_OK && i < p.n; i++) {
        const gguf_tensor *t = p.order[i];
        const void *data = t->data;
        int64_t numel = gguf_tensor_numel(t);
        if (opt.stop && *opt.stop) {
            s = core_err(CT_ERR_IO, "quantize: interrupted before %s; '%s' was not written", t->name, out_path);
            break;
        }
        if (opt.progress) opt.progress(opt.progress_ctx, done, total, t->name);
        if (p.type[i] != t->dtype) {
            p.data[i] = malloc(ct_dtype_row_bytes(p.type[i], numel) + 1);
            if (!p.data[i]) s = core_err(CT_ERR_OOM, "quantize: out of memory for %s", t->name);
            if (s == CT_OK) s = convert_tensor(t, p.type[i], p.data[i], opt.n_threads > 0 ? opt.n_threads : 2);
            data = p.data[i];
            rep.n_quantized++;
        }
        int64_t shape[GGUF_MAX_DIMS];
        for (int d = 0; d < t->n_dims; d++) shape[d] = t->ne[t->n_dims - 1 - d];
        if (s == CT_OK) s = gguf_writer_add_tensor(w, t->name, p.type[i], t->n_dims, shape, data);
        rep.bytes_in += t->size;
        rep.bytes_out += ct_dtype_row_bytes(p.type[i], numel);
        done += (int64_t)t->size;
    }
    if (s == CT_OK) {
        gguf_writer_set_cancel(w, opt.stop);
        s = gguf_writer_write(w, out_path);
    }
    if (s == CT_OK && opt.progress) opt.progress(opt.progress_ctx, total, total, "");
    rep.n_tensors = (int)p.n;
    rep.n_fallback = qs.n_fallback;
    if (report) *report = rep;
    plan_free(&p);
    gguf_writer_free(w);
    gguf_close(f);
    return s;
}
