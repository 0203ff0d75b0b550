/* ctorch quantize: the per-tensor type rules, and whole-file agreement with
 * llama-quantize (the refdata Q8_0 and Q4_K_M files were made by it from the same
 * F16 file, without an importance matrix, so every tensor must match byte for byte). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/quantize.h"
#include "harness.h"

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
    RUN(test_file_q8_0);
    RUN(test_file_q4_k_m);
    RUN(test_errors);
    RUN(test_requantize_refused);
    return th_finish();
}
