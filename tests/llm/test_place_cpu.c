/* Placement on the CPU alone makes the CPU's own layouts of the weights (the decode
 * repacks) there and then, so that the first token does not: a tiny llama written here,
 * quantized to Q4_0 (a format with a decode repack at the AVX2 and AVX-512 levels),
 * placed with the chain "cpu"; the CPU's layout bytes are non-zero after placement and
 * do not grow over a prompt and a few generated tokens. Skipped where the SIMD level has
 * no repack (portable). Needs no ../shared. */
#include <stdlib.h>
#include <string.h>

#include "formats/quantize.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "quant/quant.h"
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

static void test_layouts_at_placement(void)
{
    if (!quant_get_repack(CT_Q4_0)) {
        th_skip("no Q4_0 decode repack at SIMD level %s", quant_simd_name(quant_simd_level()));
        return;
    }
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    char in[1024], out[1024];
    th_tmp_path(in, sizeof in, "place_cpu.gguf");
    th_tmp_path(out, sizeof out, "place_cpu_q4_0.gguf");
    if (!th_tiny_llama_file(in, "place-cpu", 77, &shape, V, D)) return;
    quantize_options opt = {.n_threads = 1};
    CHECK_OK(quantize_file(in, out, "Q4_0", &opt, NULL));

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
    remove(in);
    remove(out);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_layouts_at_placement);
    return th_finish();
}
