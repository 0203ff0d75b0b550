/* Placement on the CPU alone makes the CPU's own layouts of the weights (the decode
 * repacks) there and then, so that the first token does not: a tiny llama written here,
 * quantized to Q4_0 (a format with a decode repack at the AVX2 and AVX-512 levels),
 * placed with the chain "cpu"; the CPU's layout bytes are non-zero after placement and
 * do not grow over a prompt and a few generated tokens. On a chain with an accelerator
 * (the simulated test:0) the weights kept on the host are placed on the CPU, but the
 * untied token embedding, only ever looked up, gets no CPU layout. Skipped where the SIMD
 * level has no repack (portable). Needs no ../shared. */
#include <stdlib.h>
#include <string.h>

#include "formats/quantize.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "quant/quant.h"
#include "test_backend.h"
#include "tiny_gguf.h"

enum { V = 96, E = 64, L = 2, F = 128, H = 4, HKV = 2, D = 16, CTX = 32 };

static uint64_t cpu_layout_bytes(void)
{
    ct_device_stats s[8];
    int n = ct_exec_stats(s, 8);
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].device, "cpu")) return s[i].layout_bytes;
    CHECK(!"no cpu device in the statistics");
    return 0;
}

static char g_q4_0[1024]; /* the tiny llama in Q4_0, once written (empty until then) */

static bool have_model(void)
{
    if (!quant_get_repack(CT_Q4_0)) {
        th_skip("no Q4_0 decode repack at SIMD level %s", quant_simd_name(quant_simd_level()));
        return false;
    }
    if (g_q4_0[0]) return true;
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    char in[1024], out[sizeof g_q4_0];
    th_tmp_path(in, sizeof in, "place_cpu.gguf");
    th_tmp_path(out, sizeof out, "place_cpu_q4_0.gguf");
    if (!th_tiny_llama_file(in, "place-cpu", 77, &shape, V, D)) return false;
    quantize_options opt = {.n_threads = 1};
    ct_status s = quantize_file(in, out, "Q4_0", &opt, NULL);
    CHECK_OK(s);
    remove(in);
    if (s != CT_OK) return false;
    memcpy(g_q4_0, out, sizeof g_q4_0); /* only a file that was written counts as there */
    return true;
}

static void test_layouts_at_placement(void)
{
    if (!have_model()) return;
    const char *out = g_q4_0;
    setenv("CTORCH_DEVICES", "cpu", 1);
    CHECK_OK(ct_exec_reinit());
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(out, NULL, NULL, &m));
    if (!m) return;
    uint64_t before = cpu_layout_bytes();
    llm_placement pl;
    CHECK_OK(llm_model_place(m, "cpu", -1, NULL, NULL, &pl));
    uint64_t placed = cpu_layout_bytes();
    CHECK(placed > before);

    static const llm_sampler_params greedy = {0.0f, 0, 1.0f, 0.0f, 1.0f, 0, 1};
    llm_session ss;
    CHECK_OK(llm_session_init(&ss, m, CTX, CT_F32, &greedy));
    const int32_t prompt[] = {1, 10, 27, 33, 48, 71};
    CHECK_OK(llm_session_eval(&ss, prompt, (int)(sizeof prompt / sizeof prompt[0])));
    CHECK_OK(llm_session_generate(&ss, 4, NULL, NULL, NULL, NULL));
    CHECK(cpu_layout_bytes() == placed); /* the tokens made none */
    llm_session_free(&ss);
    llm_model_free(m);
}

/* Every layer kept on the host of a chain test:0 -> cpu: the weights are placed on the
 * CPU with its layouts, the looked-up embedding without one (placing it with its layout
 * afterwards adds the bytes that the model's placement did not make). */
static void test_lookup_only_embedding(void)
{
    if (!have_model()) return;
    CHECK_OK(test_backend_install(1, "*"));
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(g_q4_0, NULL, NULL, &m));
    if (!m) {
        test_backend_uninstall();
        return;
    }
    CHECK(!m->tied_output && m->tok_embd->dtype == CT_Q4_0);
    uint64_t before = cpu_layout_bytes();
    llm_placement pl;
    CHECK_OK(llm_model_place(m, "test:0", 0, NULL, NULL, &pl));
    CHECK(pl.layers == 0);
    uint64_t placed = cpu_layout_bytes();
    CHECK(placed > before); /* the layers' matrices */
    const char *home = ct_tensor_placement(m->tok_embd);
    CHECK(home && !strcmp(home, "cpu"));
    CHECK_OK(ct_tensor_place(m->tok_embd, "cpu"));
    CHECK_MSG(cpu_layout_bytes() > placed, "%llu layout bytes after the embedding's own placement, %llu before",
              (unsigned long long)cpu_layout_bytes(), (unsigned long long)placed);
    llm_model_free(m);
    test_backend_uninstall();
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_layouts_at_placement);
    RUN(test_lookup_only_embedding);
    if (g_q4_0[0]) remove(g_q4_0);
    return th_finish();
}
