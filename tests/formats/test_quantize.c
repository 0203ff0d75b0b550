/* ctorch quantize: the per-tensor type rules, and whole-file agreement with
 * llama-quantize (the refdata Q8_0 and Q4_K_M files were made by it from the same
 * F16 file, without an importance matrix, so every tensor must match byte for byte).
 * The mixes without a llama.cpp file here (Q4_1, Q5_1, Q3_K_S, Q3_K_L, Q2_K_S) are checked
 * for their per-tensor types and for how close they dequantize to the F16 input, against
 * gguf-py's quantizers, and, where llama-cpp-python is installed, against llama.cpp's own
 * llama_model_quantize byte for byte. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/quantize.h"
#include "harness.h"
#include "quant/quant.h"

static ct_dtype type_of(quantize_state *qs, const char *name, int64_t ne0) { return quantize_tensor_type(qs, name, ne0); }

/* mini-a's README lists what llama-quantize chose for its 4 layers. */
static void test_rules_mini_a_q4_k_m(void)
{
    quantize_state qs = {.mix = quantize_find_mix("q4_k_m"), .n_layer = 4, .n_gqa = 2, .has_output = true, .n_attention_wv = 4};
    CHECK(qs.mix != NULL);
    CHECK(type_of(&qs, "output.weight", 256) == CT_Q6_K);
    CHECK(type_of(&qs, "token_embd.weight", 256) == CT_Q4_K);
    ct_dtype want_v[4] = {CT_Q4_K, CT_Q4_K, CT_Q6_K, CT_Q6_K};
    for (int i = 0; i < 4; i++) {
        char name[64];
        snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
        CHECK_MSG(type_of(&qs, name, 256) == want_v[i], "%s", name);
        snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i);
        CHECK_MSG(type_of(&qs, name, 768) == want_v[i], "%s", name);
        snprintf(name, sizeof name, "blk.%d.attn_q.weight", i);
        CHECK(type_of(&qs, name, 256) == CT_Q4_K);
    }
    CHECK(qs.n_fallback == 0);
}

/* Row lengths that are not a multiple of 256 fall back (Gemma 3 270M has n_embd 640). */
static void test_rules_fallbacks(void)
{
    quantize_state qs = {.mix = quantize_find_mix("Q4_K_M"), .n_layer = 18, .n_gqa = 4, .has_output = false, .n_attention_wv = 18};
    CHECK(type_of(&qs, "token_embd.weight", 640) == CT_Q8_0); /* tied output: Q6_K cannot hold 640 */
    CHECK(type_of(&qs, "blk.0.attn_q.weight", 640) == CT_Q5_0);
    CHECK(type_of(&qs, "blk.0.ffn_down.weight", 2048) == CT_Q6_K);
    CHECK(qs.n_fallback == 1);
    quantize_state q8 = {.mix = quantize_find_mix("Q8_0"), .n_layer = 2, .has_output = true};
    CHECK(type_of(&q8, "output.weight", 256) == CT_Q8_0);
    quantize_state f16 = {.mix = quantize_find_mix("F16"), .n_layer = 2, .has_output = true};
    CHECK(type_of(&f16, "output.weight", 256) == CT_F16);
    CHECK(quantize_wants("blk.0.attn_q.weight", 2));
    CHECK(!quantize_wants("blk.0.attn_norm.weight", 1));
    CHECK(!quantize_wants("blk.0.attn_q_norm.weight", 2));
    CHECK(!quantize_wants("rope_freqs", 1));
    CHECK(quantize_find_mix("Q7_X") == NULL);
}


/* The mixes added after Q4_K_M & co., on a 16-layer model, against llama.cpp's rules
 * (llama_tensor_get_type, written out here by hand per mix rather than computed):
 * attn_v / ffn_down / attn_output / attn_qkv get more bits, the output Q6_K. */
typedef struct rule_case {
    const char *mix;
    int n_gqa;
    ct_dtype base, output, attn_v0, attn_v5, ffn_down0, ffn_down5, attn_output, attn_qkv;
} rule_case;

static void test_rules_new_mixes(void)
{
    /* n_layer 16: "first eighth" is layers 0-1, "first sixteenth" layer 0 */
    static const rule_case cases[] = {
        {"Q4_1", 4, CT_Q4_1, CT_Q6_K, CT_Q4_1, CT_Q4_1, CT_Q4_1, CT_Q4_1, CT_Q4_1, CT_Q4_1},
        {"Q5_1", 4, CT_Q5_1, CT_Q6_K, CT_Q5_1, CT_Q5_1, CT_Q5_1, CT_Q5_1, CT_Q5_1, CT_Q5_1},
        {"Q3_K_S", 4, CT_Q3_K, CT_Q6_K, CT_Q3_K, CT_Q3_K, CT_Q3_K, CT_Q3_K, CT_Q3_K, CT_Q3_K},
        {"Q3_K_L", 4, CT_Q3_K, CT_Q6_K, CT_Q5_K, CT_Q5_K, CT_Q5_K, CT_Q5_K, CT_Q5_K, CT_Q4_K},
        {"Q2_K_S", 4, CT_Q2_K, CT_Q6_K, CT_Q4_K, CT_Q4_K, CT_Q4_K, CT_Q2_K, CT_Q2_K, CT_Q2_K},
        {"Q2_K_S", 2, CT_Q2_K, CT_Q6_K, CT_Q2_K, CT_Q2_K, CT_Q4_K, CT_Q2_K, CT_Q2_K, CT_Q2_K},
        {"Q2_K", 2, CT_Q2_K, CT_Q6_K, CT_Q3_K, CT_Q3_K, CT_Q3_K, CT_Q3_K, CT_Q3_K, CT_Q2_K},
        {"Q3_K_M", 4, CT_Q3_K, CT_Q6_K, CT_Q5_K, CT_Q4_K, CT_Q5_K, CT_Q4_K, CT_Q4_K, CT_Q4_K},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const rule_case *rc = &cases[c];
        quantize_state qs = {.mix = quantize_find_mix(rc->mix), .n_layer = 16, .n_gqa = rc->n_gqa, .has_output = true,
                             .n_attention_wv = 16};
        CHECK_MSG(qs.mix != NULL, "mix %s missing", rc->mix);
        if (!qs.mix) continue;
        CHECK(qs.mix->base == rc->base);
        CHECK_MSG(strstr(quantize_mix_names(), rc->mix) != NULL, "%s not in the help text", rc->mix);
        CHECK_MSG(type_of(&qs, "output.weight", 512) == rc->output, "%s output", rc->mix);
        CHECK_MSG(type_of(&qs, "token_embd.weight", 512) == rc->base, "%s token_embd", rc->mix);
        CHECK_MSG(type_of(&qs, "blk.0.attn_q.weight", 512) == rc->base, "%s attn_q", rc->mix);
        CHECK_MSG(type_of(&qs, "blk.0.ffn_up.weight", 512) == rc->base, "%s ffn_up", rc->mix);
        for (int i = 0; i < 16; i++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.attn_v.weight", i);
            ct_dtype v = type_of(&qs, name, 512);
            snprintf(name, sizeof name, "blk.%d.ffn_down.weight", i);
            ct_dtype d = type_of(&qs, name, 1024);
            if (i == 0) CHECK_MSG(v == rc->attn_v0 && d == rc->ffn_down0, "%s layer 0: attn_v %s ffn_down %s", rc->mix, ct_dtype_name(v), ct_dtype_name(d));
            if (i == 5) CHECK_MSG(v == rc->attn_v5 && d == rc->ffn_down5, "%s layer 5: attn_v %s ffn_down %s", rc->mix, ct_dtype_name(v), ct_dtype_name(d));
        }
        CHECK_MSG(type_of(&qs, "blk.0.attn_output.weight", 512) == rc->attn_output, "%s attn_output", rc->mix);
        CHECK_MSG(type_of(&qs, "blk.0.attn_qkv.weight", 512) == rc->attn_qkv, "%s attn_qkv", rc->mix);
        CHECK(qs.n_fallback == 0);
    }
    const quantize_mix *ids[] = {quantize_find_mix("Q4_1"), quantize_find_mix("Q5_1"), quantize_find_mix("Q3_K_S"),
                                 quantize_find_mix("Q3_K_L"), quantize_find_mix("q2_k_s")};
    const int want_ids[] = {3, 9, 11, 13, 21}; /* llama_ftype */
    for (int i = 0; i < 5; i++) CHECK(ids[i] && ids[i]->ftype == want_ids[i]);
}

/* Rows that are not a multiple of 256 (or of 32) fall back per llama.cpp's table, in every
 * new mix: Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, then F16. */
static void test_rules_new_fallbacks(void)
{
    quantize_state l = {.mix = quantize_find_mix("Q3_K_L"), .n_layer = 8, .n_gqa = 4, .has_output = false, .n_attention_wv = 8};
    CHECK(type_of(&l, "token_embd.weight", 640) == CT_Q8_0); /* tied output: Q8_0 as the row is not 256-aligned */
    CHECK(type_of(&l, "blk.0.attn_q.weight", 640) == CT_Q4_0);
    CHECK(type_of(&l, "blk.0.attn_v.weight", 640) == CT_Q5_1);
    CHECK(type_of(&l, "blk.0.ffn_down.weight", 2080) == CT_Q5_1);
    CHECK(type_of(&l, "blk.0.attn_output.weight", 48) == CT_F16);
    CHECK(l.n_fallback == 4);
    quantize_state s = {.mix = quantize_find_mix("Q2_K_S"), .n_layer = 8, .n_gqa = 4, .has_output = true, .n_attention_wv = 8};
    CHECK(type_of(&s, "blk.0.attn_q.weight", 640) == CT_Q4_0);
    CHECK(type_of(&s, "blk.0.attn_v.weight", 640) == CT_Q5_0);
    CHECK(type_of(&s, "blk.0.ffn_down.weight", 2080) == CT_Q5_0);
    CHECK(type_of(&s, "output.weight", 640) == CT_Q8_0);
    quantize_state q = {.mix = quantize_find_mix("Q4_1"), .n_layer = 8, .has_output = true};
    CHECK(type_of(&q, "blk.0.attn_q.weight", 640) == CT_Q4_1); /* 32-blocks: no fallback */
    CHECK(type_of(&q, "output.weight", 640) == CT_Q8_0);      /* Q6_K, then its fallback */
    CHECK(type_of(&q, "output.weight", 512) == CT_Q6_K);
    CHECK(type_of(&q, "blk.0.attn_q.weight", 48) == CT_F16); /* llama.cpp stops with an error here */
}

static void compare_files(const char *ours, const char *ref)
{
    gguf_file *a = NULL, *b = NULL;
    CHECK_OK(gguf_open(ours, &a));
    CHECK_OK(gguf_open(ref, &b));
    if (!a || !b) goto done;
    CHECK(gguf_tensor_count(a) == gguf_tensor_count(b));
    uint32_t fa = 0, fb = 0;
    CHECK_OK(gguf_get_u32(a, "general.file_type", &fa));
    CHECK_OK(gguf_get_u32(b, "general.file_type", &fb));
    CHECK(fa == fb);
    int mismatched = 0;
    for (int64_t i = 0; i < gguf_tensor_count(b); i++) {
        const gguf_tensor *tb = gguf_tensor_at(b, i), *ta = gguf_find_tensor(a, tb->name);
        CHECK_MSG(ta != NULL, "%s missing", tb->name);
        if (!ta) continue;
        bool same = ta->ggml_type == tb->ggml_type && ta->size == tb->size && !memcmp(ta->data, tb->data, tb->size);
        if (!same && mismatched++ < 5)
            fprintf(stderr, "  %s: ours %s %zu bytes, llama.cpp %s %zu bytes%s\n", tb->name, gguf_ggml_type_name(ta->ggml_type),
                    ta->size, gguf_ggml_type_name(tb->ggml_type), tb->size, ta->ggml_type == tb->ggml_type ? " (bytes differ)" : "");
    }
    CHECK_MSG(mismatched == 0, "%d tensors differ from %s", mismatched, ref);
done:
    gguf_close(a);
    gguf_close(b);
}

static void quantize_like_llama_cpp(const char *type, const char *ref_name)
{
    const char *ref = th_refdata(), *tmp = getenv("CTORCH_TEST_TMP");
    if (!ref) {
        th_skip("CTORCH_REFDATA (../shared/refdata) is absent");
        return;
    }
    char in[512], want[512], out[512];
    snprintf(in, sizeof in, "%s/mini-a/mini-a-f16.gguf", ref);
    snprintf(want, sizeof want, "%s/mini-a/%s", ref, ref_name);
    snprintf(out, sizeof out, "%s/quantize-%s.gguf", tmp ? tmp : "/tmp", type);
    quantize_report rep;
    quantize_options opt = {.n_threads = 2};
    CHECK_OK(quantize_file(in, out, type, &opt, &rep));
    CHECK(rep.n_quantized > 0 && rep.bytes_out < rep.bytes_in);
    compare_files(out, want);
    remove(out);
}

static void test_file_q8_0(void) { quantize_like_llama_cpp("Q8_0", "mini-a-q8_0.gguf"); }
static void test_file_q4_k_m(void) { quantize_like_llama_cpp("Q4_K_M", "mini-a-q4_k_m.gguf"); }


/* Normalized MSE bounds of a type on N(0, s^2) weights: twice the uniform-quantizer
 * estimate step^2 / 12 / s^2, the step being a block's span over its levels (Gaussian
 * extremes: +-2.07 s over 32 values, +-1.77 s over 16). Q8_0: 2.07/127 -> 2.2e-5;
 * Q6_K: 1.77/32 -> 2.5e-4; Q5_0: 2.07/16, Q5_1 and Q5_K: 4.14/31 -> 1.5e-3; Q4_0:
 * 2.07/8, Q4_1 and Q4_K: 4.14/15 -> 6.3e-3; Q3_K: 1.77/4 -> 1.6e-2; Q2_K: 3.54/3 -> 0.11. */
static double nmse_bound(ct_dtype t)
{
    switch (t) {
    case CT_Q8_0: return 5e-5;
    case CT_Q6_K: return 5e-4;
    case CT_Q5_0: case CT_Q5_1: case CT_Q5_K: return 3e-3;
    case CT_Q4_0: case CT_Q4_1: case CT_Q4_K: return 1.3e-2;
    case CT_Q3_K: return 3.2e-2;
    case CT_Q2_K: return 0.23;
    default: return 0;
    }
}

/* mini-a's expected types per new mix (4 layers, GQA 2: no "first eighth", no GQA >= 4 rules). */
static ct_dtype mini_a_type(const char *mix, const char *name)
{
    bool v = strstr(name, "attn_v") != NULL, d = strstr(name, "ffn_down") != NULL, o = strstr(name, "attn_output") != NULL;
    if (!strcmp(name, "output.weight")) return CT_Q6_K;
    if (!strcmp(mix, "Q3_K_L")) return v || d || o ? CT_Q5_K : CT_Q3_K;
    return CT_DTYPE_COUNT;
}

/* The test's tiny model: rows of 320 (not a multiple of 256), ffn_down rows of 256, GQA 4,
 * tied output. 4 layers: no "first eighth" rules. The K-quants fall back per row length
 * (Q2_K/Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1), the tied token_embd takes the output's
 * Q6_K rule, which a 320 row turns into Q8_0. */
static ct_dtype tiny_type(const char *mix, const char *name)
{
    bool v = strstr(name, "attn_v") != NULL, d = strstr(name, "ffn_down") != NULL, o = strstr(name, "attn_output") != NULL;
    if (!strcmp(name, "token_embd.weight")) return CT_Q8_0;
    if (!strcmp(mix, "Q4_1")) return CT_Q4_1;
    if (!strcmp(mix, "Q5_1")) return CT_Q5_1;
    if (!strcmp(mix, "Q3_K_S")) return d ? CT_Q3_K : CT_Q4_0;
    if (!strcmp(mix, "Q3_K_L")) return d ? CT_Q5_K : v || o ? CT_Q5_1 : CT_Q4_0;
    if (!strcmp(mix, "Q2_K_S")) return d ? CT_Q2_K : v ? CT_Q5_0 : CT_Q4_0;
    return CT_DTYPE_COUNT;
}

enum { TINY_EMBD = 320, TINY_FF = 256, TINY_KV = 80, TINY_VOCAB = 512, TINY_LAYERS = 4 };

/* Writes the tiny model (N(0, 1) weights as F16, norms F32) to path. */
static void write_tiny_model(const char *path)
{
    gguf_writer *w = gguf_writer_new();
    CHECK(w != NULL);
    if (!w) return;
    CHECK_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    CHECK_OK(gguf_writer_set_u32(w, "llama.block_count", TINY_LAYERS));
    CHECK_OK(gguf_writer_set_u32(w, "llama.attention.head_count", 8));
    CHECK_OK(gguf_writer_set_u32(w, "llama.attention.head_count_kv", 2));
    /* what llama.cpp's loader needs to quantize it too */
    CHECK_OK(gguf_writer_set_u32(w, "llama.context_length", 64));
    CHECK_OK(gguf_writer_set_u32(w, "llama.embedding_length", TINY_EMBD));
    CHECK_OK(gguf_writer_set_u32(w, "llama.feed_forward_length", TINY_FF));
    CHECK_OK(gguf_writer_set_u32(w, "llama.rope.dimension_count", TINY_EMBD / 8));
    CHECK_OK(gguf_writer_set_u32(w, "llama.vocab_size", TINY_VOCAB));
    CHECK_OK(gguf_writer_set_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f));
    static const struct { const char *name; int64_t rows, cols; } mats[] = {
        {"attn_q", TINY_EMBD, TINY_EMBD}, {"attn_k", TINY_KV, TINY_EMBD}, {"attn_v", TINY_KV, TINY_EMBD},
        {"attn_output", TINY_EMBD, TINY_EMBD}, {"ffn_gate", TINY_FF, TINY_EMBD}, {"ffn_up", TINY_FF, TINY_EMBD},
        {"ffn_down", TINY_EMBD, TINY_FF},
    };
    enum { NT = TINY_LAYERS * 9 + 2 };
    void *bufs[NT] = {0};
    int nb = 0;
    th_rng r = {2024};
    char name[64];
    for (int l = -1; l < TINY_LAYERS; l++)
        for (int k = 0; k < (l < 0 ? 3 : 9); k++) {
            int64_t rows, cols;
            bool norm;
            if (l < 0) { /* token_embd, output_norm, and a second 1-D tensor stays F32 too */
                snprintf(name, sizeof name, "%s", k == 0 ? "token_embd.weight" : k == 1 ? "output_norm.weight" : "rope_freqs");
                rows = k == 0 ? TINY_VOCAB : 1, cols = k == 0 ? TINY_EMBD : k == 1 ? TINY_EMBD : 16, norm = k > 0;
            } else if (k < 7) {
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, mats[k].name);
                rows = mats[k].rows, cols = mats[k].cols, norm = false;
            } else {
                snprintf(name, sizeof name, "blk.%d.%s.weight", l, k == 7 ? "attn_norm" : "ffn_norm");
                rows = 1, cols = TINY_EMBD, norm = true;
            }
            if (nb >= NT) break;
            int64_t n = rows * cols, shape[2] = {rows, cols};
            if (norm) {
                float *f = malloc(sizeof(float) * (size_t)n);
                for (int64_t i = 0; i < n; i++) f[i] = 1.f + 0.1f * (float)th_uniform(&r, -1, 1);
                CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, 1, shape + 1, f));
                bufs[nb++] = f;
            } else {
                uint16_t *h = malloc(sizeof(uint16_t) * (size_t)n);
                for (int64_t i = 0; i < n; i++) {
                    double u1 = th_uniform(&r, 1e-12, 1), u2 = th_uniform(&r, 0, 1);
                    h[i] = ct_f32_to_f16((float)(sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2)));
                }
                CHECK_OK(gguf_writer_add_tensor(w, name, CT_F16, 2, shape, h));
                bufs[nb++] = h;
            }
        }
    CHECK_OK(gguf_writer_write(w, path));
    for (int i = 0; i < nb; i++) free(bufs[i]);
    gguf_writer_free(w);
}

/* Quantizes `in` to `mix`; every weight gets want()'s type, 1-D tensors are copied as they
 * are, and every quantized tensor dequantizes to within its type's NMSE bound of the input. */
static void check_mix_file(const char *in, const char *mix, int want_ftype, ct_dtype (*want_type)(const char *, const char *),
                           int want_fallbacks)
{
    const char *tmp = getenv("CTORCH_TEST_TMP");
    char out[512];
    snprintf(out, sizeof out, "%s/quantize-mix-%s.gguf", tmp ? tmp : "/tmp", mix);
    quantize_options opt = {.n_threads = 2};
    quantize_report rep;
    CHECK_OK(quantize_file(in, out, mix, &opt, &rep));
    CHECK_MSG(rep.n_fallback == want_fallbacks, "%s: %d fallbacks, want %d", mix, rep.n_fallback, want_fallbacks);
    gguf_file *a = NULL, *q = NULL;
    CHECK_OK(gguf_open(in, &a));
    CHECK_OK(gguf_open(out, &q));
    uint32_t ft = 0;
    if (q) CHECK_OK(gguf_get_u32(q, "general.file_type", &ft));
    CHECK_MSG(ft == (uint32_t)want_ftype, "%s: file_type %u", mix, ft);
    double worst = 0;
    const char *worst_name = "";
    for (int64_t i = 0; a && q && i < gguf_tensor_count(a); i++) {
        const gguf_tensor *ta = gguf_tensor_at(a, i), *tq = gguf_find_tensor(q, ta->name);
        CHECK_MSG(tq != NULL, "%s: %s missing", mix, ta->name);
        if (!tq) continue;
        if (ta->n_dims < 2) {
            CHECK_MSG(tq->dtype == ta->dtype && !memcmp(tq->data, ta->data, ta->size), "%s: %s not copied", mix, ta->name);
            continue;
        }
        ct_dtype want = want_type(mix, ta->name);
        CHECK_MSG(tq->dtype == want, "%s: %s is %s, llama.cpp's rules give %s", mix, ta->name, ct_dtype_name(tq->dtype),
                  want == CT_DTYPE_COUNT ? "?" : ct_dtype_name(want));
        int64_t ne0 = ta->ne[0], rows = gguf_tensor_numel(ta) / ne0;
        float *x = malloc(sizeof(float) * (size_t)ne0), *y = malloc(sizeof(float) * (size_t)ne0);
        double err = 0, sig = 0;
        size_t ra = ct_dtype_row_bytes(ta->dtype, ne0), rq = ct_dtype_row_bytes(tq->dtype, ne0);
        /* every row of the layers, a seventh of mini-a's 32000-row embedding and output
         * (time under the sanitizers) */
        for (int64_t r = 0; r < rows; r += rows > 4096 ? 7 : 1) {
            CHECK_OK(quant_dequantize_row(ta->dtype, (const char *)ta->data + (size_t)r * ra, x, ne0));
            CHECK_OK(quant_dequantize_row(tq->dtype, (const char *)tq->data + (size_t)r * rq, y, ne0));
            for (int64_t k = 0; k < ne0; k++) err += ((double)y[k] - x[k]) * ((double)y[k] - x[k]), sig += (double)x[k] * x[k];
        }
        double nmse = err / sig, bound = nmse_bound(tq->dtype);
        CHECK_MSG(nmse <= bound, "%s: %s (%s) NMSE %.3g > %.3g", mix, ta->name, ct_dtype_name(tq->dtype), nmse, bound);
        if (nmse / bound > worst) worst = nmse / bound, worst_name = ta->name;
        free(x), free(y);
    }
    fprintf(stderr, "  %s: %d tensors quantized, %.2f MB -> %.2f MB, %d fallbacks, worst NMSE %.2f of its bound (%s)\n",
            mix, rep.n_quantized, rep.bytes_in / 1e6, rep.bytes_out / 1e6, rep.n_fallback, worst, worst_name);
    gguf_close(a);
    gguf_close(q);
    remove(out);
}

static void test_file_new_mixes(void)
{
    const char *tmp = getenv("CTORCH_TEST_TMP");
    char tiny[512];
    snprintf(tiny, sizeof tiny, "%s/quantize-tiny-f16.gguf", tmp ? tmp : "/tmp");
    write_tiny_model(tiny);
    /* fallbacks: the 32-block mixes only for token_embd's Q6_K, as llama.cpp counts them;
     * the K-quant mixes for the 6 matrices of 320-element rows in each of 4 layers */
    check_mix_file(tiny, "Q4_1", 3, tiny_type, 1);
    check_mix_file(tiny, "Q5_1", 9, tiny_type, 1);
    check_mix_file(tiny, "Q3_K_S", 11, tiny_type, 24);
    check_mix_file(tiny, "Q3_K_L", 13, tiny_type, 24);
    check_mix_file(tiny, "Q2_K_S", 21, tiny_type, 24);
    remove(tiny);
    /* a real file's layout (untied output, GQA 2), with the mix that has the most rules */
    const char *ref = th_refdata();
    if (!ref) {
        th_skip("CTORCH_REFDATA (../shared/refdata) is absent");
        return;
    }
    char in[512];
    snprintf(in, sizeof in, "%s/mini-a/mini-a-f16.gguf", ref);
    check_mix_file(in, "Q3_K_L", 13, mini_a_type, 0);
}

/* The tiny model quantized to Q4_1, Q5_1 and Q3_K_S (whose 320-wide rows fall back to Q4_0,
 * token_embd to Q8_0): each tensor gguf-py can quantize must hold gguf-py's bytes. */
static void test_gguf_py_cross_check(void)
{
    if (system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") != 0) {
        th_skip("python gguf package not installed");
        return;
    }
    const char *tmp = getenv("CTORCH_TEST_TMP"), *src = __FILE__, *slash = strrchr(src, '/');
    int dirlen = slash ? (int)(slash - src) : 1;
    char tiny[512], out[512], cmd[1600];
    snprintf(tiny, sizeof tiny, "%s/quantize-py-f16.gguf", tmp ? tmp : "/tmp");
    write_tiny_model(tiny);
    static const struct { const char *mix; int min_checked; } runs[] = {{"Q4_1", 29}, {"Q5_1", 29}, {"Q3_K_S", 25}};
    for (int i = 0; i < 3; i++) {
        snprintf(out, sizeof out, "%s/quantize-py-%s.gguf", tmp ? tmp : "/tmp", runs[i].mix);
        quantize_options opt = {.n_threads = 2};
        CHECK_OK(quantize_file(tiny, out, runs[i].mix, &opt, NULL));
        snprintf(cmd, sizeof cmd, "python3 %.*s/check_quantize_py.py %s %s %d", dirlen, slash ? src : ".", tiny, out,
                 runs[i].min_checked);
        CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
        remove(out);
    }
    remove(tiny);
}

/* When llama-cpp-python is installed: llama.cpp's own llama_model_quantize on the tiny model
 * (every fallback rule, tied output, GQA 4) and on mini-a (untied, GQA 2) must write the
 * bytes ctorch writes, for each new mix and the older K-quant mixes llama.cpp made no
 * refdata file for. (Q2_K_S is left out: llama.cpp refuses it without an importance matrix.) */
static void test_llama_cpp_python(void)
{
    if (system("python3 -c 'import llama_cpp' >/dev/null 2>&1") != 0) {
        th_skip("llama-cpp-python not installed");
        return;
    }
    const char *tmp = getenv("CTORCH_TEST_TMP"), *src = __FILE__, *slash = strrchr(src, '/'), *ref = th_refdata();
    int dirlen = slash ? (int)(slash - src) : 1;
    char tiny[512], mini[512], ours[512], theirs[512], cmd[1600];
    snprintf(tiny, sizeof tiny, "%s/quantize-llama-f16.gguf", tmp ? tmp : "/tmp");
    write_tiny_model(tiny);
    if (ref) snprintf(mini, sizeof mini, "%s/mini-a/mini-a-f16.gguf", ref);
    static const struct { const char *mix; int ftype; bool mini_a; } runs[] = {
        {"Q4_1", 3, true}, {"Q5_1", 9, false}, {"Q3_K_S", 11, false}, {"Q3_K_L", 13, true}, {"Q2_K", 10, false}, {"Q3_K_M", 12, false},
    };
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++)
        for (int m = 0; m < (runs[i].mini_a && ref ? 2 : 1); m++) {
            const char *in = m ? mini : tiny;
            snprintf(ours, sizeof ours, "%s/quantize-ours-%s.gguf", tmp ? tmp : "/tmp", runs[i].mix);
            snprintf(theirs, sizeof theirs, "%s/quantize-llama-%s.gguf", tmp ? tmp : "/tmp", runs[i].mix);
            snprintf(cmd, sizeof cmd, "python3 %.*s/llama_quantize.py %s %s %d 2>/dev/null", dirlen, slash ? src : ".", in,
                     theirs, runs[i].ftype);
            CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
            quantize_options opt = {.n_threads = 2};
            CHECK_OK(quantize_file(in, ours, runs[i].mix, &opt, NULL));
            fprintf(stderr, "  %s on %s vs llama.cpp\n", runs[i].mix, m ? "mini-a" : "the tiny model");
            compare_files(ours, theirs);
            remove(ours);
            remove(theirs);
        }
    remove(tiny);
}

static void test_errors(void)
{
    quantize_report rep;
    CHECK_STATUS(quantize_file("/nonexistent/model.gguf", "/tmp/x.gguf", "Q4_K_M", NULL, &rep), CT_ERR_IO);
    CHECK_STATUS(quantize_file("/nonexistent/model.gguf", "/tmp/x.gguf", "Q9_Z", NULL, &rep), CT_ERR_INVALID_ARG);
}

static void test_requantize_refused(void)
{
    quantize_report rep;
    const char *ref = th_refdata();
    if (!ref) {
        th_skip("CTORCH_REFDATA (../shared/refdata) is absent");
        return;
    }
    char in[512];
    snprintf(in, sizeof in, "%s/mini-a/mini-a-q8_0.gguf", ref);
    CHECK_STATUS(quantize_file(in, "/tmp/ctorch-requant.gguf", "Q4_K_M", NULL, &rep), CT_ERR_DTYPE);
    CHECK(strstr(ct_last_error(), "allow-requantize") != NULL);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_rules_mini_a_q4_k_m);
    RUN(test_rules_fallbacks);
    RUN(test_rules_new_mixes);
    RUN(test_rules_new_fallbacks);
    RUN(test_file_q8_0);
    RUN(test_file_q4_k_m);
    RUN(test_file_new_mixes);
    RUN(test_gguf_py_cross_check);
    RUN(test_llama_cpp_python);
    RUN(test_errors);
    RUN(test_requantize_refused);
    return th_finish();
}
