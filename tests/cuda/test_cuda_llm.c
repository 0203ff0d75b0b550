/* The LLM on a real GPU (issue 10), on a tiny llama written here (f32 weights, f16 KV
 * cache): greedy generation gives the CPU's tokens
 * with every weight and the cache on the GPU, and with the layers split (--gpu-layers 1).
 * (An LLM-level late fault and an allocator cap below the KV cache were tried here on the
 * H100 and failed: the fault never fired during replayed decode, and a capped replay hit a
 * cuBLAS invalid-value error that is not retried. Both are open defects of issue 10; the
 * op-level late fault and OOM failover are tested in test_cuda_backend.c.)
 * Both devices round differently (f32 sums in another order, ~1e-6 relative); this
 * random model's greedy choices win by far more, so equal tokens are expected, and a
 * mismatch names the first position that differs.
 * Every test skips (77) without a CUDA device. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "tiny_gguf.h"

enum { V = 128, E = 64, L = 2, F = 128, H = 4, HKV = 2, D = 16, CTX = 64, N_GEN = 20 };

static const int32_t g_prompt[] = {1, 10, 27, 33, 48, 71, 90};
#define P ((int)(sizeof g_prompt / sizeof g_prompt[0]))

static char g_dev[32];

typedef struct run_out {
    int32_t hist[CTX];
    int n_past;
} run_out;

/* Sets one environment knob and makes the executor read it (NULL value: unset). */
static void knob(const char *name, const char *value)
{
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
    CHECK_OK(ct_exec_reinit());
}

/* Generates N_GEN tokens greedily after the prompt; device NULL: the CPU alone.
 * ngl < 0: every layer on the device. */
static void generate(const char *device, int ngl, int n_ctx, run_out *o)
{
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    memset(o, 0, sizeof *o);
    th_log_capture(true);
    llm_model *m = th_tiny_llama("cuda_llm.gguf", "cuda-llm-test", 77, &shape, V, D);
    if (!m) return;
    llm_placement pl = {0};
    /* this model's ops are tiny: without this, host-resident ones would stay on the CPU */
    if (device) {
        ct_exec_set_small_bytes(0);
        CHECK_OK(llm_model_place(m, device, ngl, NULL, NULL, &pl));
    }
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, n_ctx, CT_F16, NULL));
    s.ignore_eog = true;
    CHECK_OK(llm_session_eval(&s, g_prompt, P));
    llm_gen_stats gs;
    CHECK_OK(llm_session_generate(&s, N_GEN, NULL, NULL, NULL, &gs));
    o->n_past = llm_session_n_past(&s);
    memcpy(o->hist, s.hist, (size_t)o->n_past * sizeof *o->hist);
    llm_session_free(&s);
    llm_model_free(m);
    th_log_capture(false);
}

static run_out g_cpu;
static bool g_have_cpu;

static void cpu_reference(void)
{
    if (g_have_cpu) return;
    const char *saved = getenv("CTORCH_DEVICES");
    char keep[64];
    snprintf(keep, sizeof keep, "%s", saved ? saved : "");
    knob("CTORCH_DEVICES", "cpu");
    generate(NULL, 0, CTX, &g_cpu);
    knob("CTORCH_DEVICES", saved ? keep : NULL);
    CHECK(g_cpu.n_past == P + N_GEN - 1);
    g_have_cpu = true;
}

static void expect_cpu_tokens(const run_out *o, const char *what)
{
    int first = -1;
    for (int i = 0; i < o->n_past && i < g_cpu.n_past && first < 0; i++)
        if (o->hist[i] != g_cpu.hist[i]) first = i;
    CHECK_MSG(o->n_past == g_cpu.n_past && first < 0, "%s: %d positions (the CPU %d), first different token at %d",
              what, o->n_past, g_cpu.n_past, first);
}

static const char *gpu_or_skip(void) { return devcheck_device("cuda", g_dev, sizeof g_dev); }

/* Ops that ran on the GPU since the last ct_exec_stats_reset (ct_exec_reinit resets too). */
static uint64_t gpu_ops(void)
{
    ct_device_stats st[16];
    int n = ct_exec_stats(st, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (!strcmp(st[i].device, g_dev)) return st[i].ops;
    return 0;
}

static void test_whole_model_on_the_gpu(void)
{
    if (!gpu_or_skip()) return;
    cpu_reference();
    run_out o;
    ct_exec_stats_reset();
    generate(g_dev, -1, CTX, &o);
    expect_cpu_tokens(&o, "all layers on the GPU");
    CHECK_MSG(gpu_ops() > 0, "nothing ran on %s", g_dev);
    CHECK_MSG(!th_count(th_log(), "lost"), "logged: %s", th_log());
}

static void test_layer_split(void)
{
    if (!gpu_or_skip()) return;
    cpu_reference();
    run_out o;
    ct_exec_stats_reset();
    generate(g_dev, 1, CTX, &o);
    expect_cpu_tokens(&o, "--gpu-layers 1");
    CHECK_MSG(gpu_ops() > 0, "nothing ran on %s", g_dev);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_whole_model_on_the_gpu);
    RUN(test_layer_split);
    return th_finish();
}
