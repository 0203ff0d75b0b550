/* A KV cache that does not fit on its layer's device (issue 10's oversized context), on
 * the simulated device test:0 with a small memory: every weight is placed there, and the
 * caches of the layers past what fits
 * - stay on the host with a warning when the chain has a CPU (test:0,cpu), and greedy
 *   decoding gives the tokens of the CPU alone (eager and replayed);
 * - fail session start with CT_ERR_DEVICE_OOM and a message naming the missing CPU when
 *   the chain is test:0 alone (nothing could reach a host cache), never a later crash.
 * The tiny llama's f32 sums run in the same order on test:0 as on the CPU, so the tokens
 * must be equal. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "test_backend.h"
#include "tiny_gguf.h"

enum { V = 96, E = 32, L = 4, F = 64, H = 2, HKV = 1, D = 16, CTX = 4096, N_GEN = 12 };
/* weights ~0.2 MiB; one layer's f32 cache at CTX is 0.5 MiB: the first fits, the rest not */
#define CAPACITY (1u << 20)

static const int32_t g_prompt[] = {1, 10, 27, 33, 48, 71};
#define P ((int)(sizeof g_prompt / sizeof g_prompt[0]))

static void set_chain(const char *chain, bool replay)
{
    setenv("CTORCH_DEVICES", chain, 1);
    setenv("CTORCH_REPLAY", replay ? "1" : "0", 1);
    CHECK_OK(ct_exec_reinit());
}

static llm_model *model(void)
{
    static const th_llama_shape shape = {CTX, E, L, F, H, HKV, 1e-5f, 10000.0f};
    return th_tiny_llama("kv_host.gguf", "kv-host", 991, &shape, V, D);
}

/* Greedy tokens after the prompt; device: place every weight there first. */
static ct_status generate(const char *device, int32_t *out, int *n_out)
{
    llm_model *m = model();
    if (!m) return CT_ERR_IO;
    ct_status st = CT_OK;
    if (device) {
        ct_exec_set_small_bytes(0);
        llm_placement pl;
        st = llm_model_place(m, device, L + 1, NULL, NULL, &pl);
        CHECK_MSG(st != CT_OK || pl.layers == L, "placed %d layers on %s", pl.layers, device);
    }
    llm_session s;
    if (st == CT_OK) st = llm_session_init(&s, m, CTX, CT_F32, NULL);
    if (st == CT_OK) {
        s.ignore_eog = true;
        llm_gen_stats gs;
        st = llm_session_eval(&s, g_prompt, P);
        if (st == CT_OK) st = llm_session_generate(&s, N_GEN, NULL, NULL, NULL, &gs);
        *n_out = llm_session_n_past(&s);
        memcpy(out, s.hist, (size_t)*n_out * sizeof *out);
        llm_session_free(&s);
    }
    llm_model_free(m);
    return st;
}

static int32_t g_cpu[CTX];
static int g_n_cpu;

static void test_cache_on_the_host(void)
{
    set_chain("cpu", false);
    CHECK_OK(generate(NULL, g_cpu, &g_n_cpu));
    CHECK(g_n_cpu == P + N_GEN - 1);
    for (int replay = 0; replay < 2; replay++) {
        CHECK_OK(test_backend_install(1, "*"));
        test_backend_set_capacity(0, CAPACITY);
        set_chain("test:0,cpu", replay);
        th_log_capture(true);
        int32_t got[CTX];
        int n = 0;
        CHECK_OK(generate("test:0", got, &n));
        th_log_capture(false);
        int first = -1;
        for (int i = 0; i < n && i < g_n_cpu && first < 0; i++)
            if (got[i] != g_cpu[i]) first = i;
        CHECK_MSG(n == g_n_cpu && first < 0, "replay %d: %d positions (the CPU %d), first different token at %d",
                  replay, n, g_n_cpu, first);
        int kept = th_count(th_log(), "kept on the host");
        CHECK_MSG(kept >= 1 && kept < L, "replay %d: %d layers' caches kept on the host; logged:\n%s", replay, kept,
                  th_log());
        CHECK_MSG(test_backend_runs(0, CT_OP_LINEAR) > 0, "replay %d: no linear ran on test:0", replay);
        test_backend_uninstall();
    }
}

static void test_no_cpu_in_the_chain(void)
{
    CHECK_OK(test_backend_install(1, "*"));
    test_backend_set_capacity(0, CAPACITY);
    set_chain("test:0", true);
    int32_t got[CTX];
    int n = 0;
    ct_status st = generate("test:0", got, &n);
    CHECK_MSG(st == CT_ERR_DEVICE_OOM, "got %s: %s", ct_status_name(st), ct_last_error());
    CHECK_MSG(strstr(ct_last_error(), "no CPU") != NULL, "message: %s", ct_last_error());
    test_backend_uninstall();
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_cache_on_the_host);
    RUN(test_no_cpu_in_the_chain);
    unsetenv("CTORCH_DEVICES");
    unsetenv("CTORCH_REPLAY");
    return th_finish();
}
