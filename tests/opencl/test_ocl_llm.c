/* The LLM on OpenCL end to end: the refdata mini-a files (F16, Q8_0, Q4_K_M; the last
 * holds Q4_K and Q6_K weights) run with the chain opencl:0 -> cpu and the weights placed
 * on opencl:0, as `ctorch run -d opencl,cpu` does, against the same model on the CPU
 * alone and against llama.cpp's logits. Prompt 0 of the refdata, then 24 greedy tokens:
 * - the greedy tokens equal the CPU's;
 * - at every step the logits are within the bounds the CPU's own refdata test holds them
 *   to against llama.cpp (normalized MSE 1e-4 for F16, 1e-3 for the quantized files:
 *   tests/llm/test_llama_refdata.c), both against llama.cpp's and against the CPU's. The
 *   OpenCL kernels multiply f32 activations where the CPU quantizes them to Q8 for its
 *   dots (~1e-5, see test_ocl_quant.c), well inside these bounds;
 * Twice: with the weights prefetched onto opencl:0 as `ctorch run` does (ops follow the
 * activations, so which ops run there depends on the groups present), and pinned there
 * with ct_tensor_place, where every embedding and linear of a quantized file must run on
 * opencl:0 (1 embedding + 7 linears per layer * 4 + the output = 30 per token at least).
 * Ops opencl:0 lacks go to the CPU; CTORCH_TRACE=1 lists them.
 * Then Q4_K_M again with the GPU's one-row decode kernels (which a CPU device such as PoCL
 * does not pick by itself), whose recorded decode step fuses each layer's norm, q/k/v,
 * RoPE and cache writes into one launch: the same checks, and against the same run with
 * that launch split back into the norm + linears launch and the ops after it.
 * Skips without an OpenCL device or without ../shared/refdata. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#include "llm/generate.h"
#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/quant.h"
#else /* no backend: every test skips before using the hooks */
typedef enum ocl_q_matvec { OCL_Q_MATVEC_AUTO, OCL_Q_MATVEC_GROUPS, OCL_Q_MATVEC_ROWS } ocl_q_matvec;
static void ocl_quant_test_matvec(ocl_q_matvec mode) { (void)mode; }
static void ocl_quant_test_fuse_rope(bool on) { (void)on; }
static int ocl_quant_fused_total(void) { return 0; }
#endif

#define N_GEN 24
#define MAX_IDS 256

/* The first "ids" array of tokens.json: prompt 0's tokens as llama.cpp made them. */
static int prompt0_ids(const char *json, int32_t *ids)
{
    const char *p = json ? strstr(json, "\"ids\"") : NULL;
    p = p ? strchr(p, '[') : NULL;
    if (!p) return -1;
    int n = 0;
    for (p++; *p && *p != ']';) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p) {
            p++;
            continue;
        }
        if (n == MAX_IDS) return -1;
        ids[n++] = (int32_t)v;
        p = e;
    }
    return n;
}

/* How the weights reach the device under test. */
typedef enum { ON_HOST, LIKE_RUN, PINNED } weights_mode;

/* Every matrix of the model placed on dev (ct_tensor_place): routing then counts them in
 * full away from dev, so each op on them runs there whenever dev supports it, whichever
 * other ops (norms, attention) it has. */
static void pin_weights(const llm_model *m, const char *dev)
{
    CHECK_OK(ct_tensor_place(m->tok_embd, dev));
    CHECK_OK(ct_tensor_place(m->output, dev));
    for (int l = 0; l < m->hp.n_layer; l++) {
        const llm_layer *L = &m->layers[l];
        const ct_tensor *ws[7] = {L->wq, L->wk, L->wv, L->wo, L->w_gate, L->w_up, L->w_down};
        for (int i = 0; i < 7; i++) CHECK_OK(ct_tensor_place(ws[i], dev));
    }
}

/* Prompt, then N_GEN greedy tokens on `chain`; logits[k * V ..] after each step. Returns V (0 on failure). */
static int generate(const char *path, const char *chain, const char *dev, weights_mode mode, const int32_t *ids,
                    int n_ids, int32_t *toks, float **logits)
{
    *logits = NULL;
    CHECK_OK(ct_exec_set_devices(chain));
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) return 0;
    if (mode == LIKE_RUN) CHECK_OK(llm_model_place(m, NULL, -1, NULL, NULL, NULL));
    if (mode == PINNED) pin_weights(m, dev);
    int V = m->hp.n_vocab;
    llm_session s;
    ct_status st = llm_session_init(&s, m, 512, CT_F16, NULL);
    CHECK_OK(st);
    if (st == CT_OK) {
        *logits = malloc(sizeof(float) * (size_t)V * N_GEN);
        st = llm_session_eval(&s, ids, n_ids);
        CHECK_MSG(st == CT_OK, "%s on %s: prompt: %s", path, chain, ct_last_error());
        for (int k = 0; k < N_GEN && st == CT_OK; k++) {
            memcpy(*logits + (size_t)k * V, s.logits, sizeof(float) * (size_t)V);
            toks[k] = th_argmax_f32(s.logits, V);
            if (k + 1 < N_GEN) st = llm_session_eval(&s, &toks[k], 1);
            CHECK_MSG(st == CT_OK, "%s on %s: decode step %d: %s", path, chain, k, ct_last_error());
        }
        llm_session_free(&s);
    }
    llm_model_free(m);
    if (st != CT_OK) {
        free(*logits);
        *logits = NULL;
        return 0;
    }
    return V;
}

static uint64_t device_ops(const char *dev)
{
    ct_device_stats st[16];
    int n = ct_exec_stats(st, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (strcmp(st[i].device, dev) == 0) return st[i].ops;
    return 0;
}

/* Runs the file on chain `dev,cpu` with the weights reaching dev by `mode`, against the
 * CPU's run (t_cpu, l_cpu) and llama.cpp's logits (ref). Returns the ops dev ran. */
static uint64_t check_run(const char *path, const char *dev, const char *quant, weights_mode mode, double tol,
                          const int32_t *ids, int n_ids, const int32_t *t_cpu, const float *l_cpu, const float *ref,
                          int V)
{
    char chain[64];
    snprintf(chain, sizeof chain, "%s,cpu", dev);
    const char *how = mode == PINNED ? "weights placed" : "weights prefetched as `ctorch run` does";
    int32_t t_ocl[N_GEN] = {0};
    float *l_ocl = NULL;
    ct_exec_stats_reset();
    int V2 = generate(path, chain, dev, mode, ids, n_ids, t_ocl, &l_ocl);
    uint64_t ops = device_ops(dev);
    CHECK_OK(ct_exec_set_devices(NULL));
    if (V2 == V && l_ocl) {
        double worst_ref = 0, worst_cpu = 0;
        for (int k = 0; k < N_GEN; k++) {
            double er = th_nmse_f32(l_ocl + (size_t)k * V, ref + (size_t)k * V, V);
            double ec = th_nmse_f32(l_ocl + (size_t)k * V, l_cpu + (size_t)k * V, V);
            if (!(er <= worst_ref)) worst_ref = er;
            if (!(ec <= worst_cpu)) worst_cpu = ec;
            CHECK_MSG(er < tol, "%s (%s) step %d: NMSE %.3g vs llama.cpp >= %g", quant, how, k, er, tol);
            CHECK_MSG(ec < tol, "%s (%s) step %d: NMSE %.3g vs the cpu >= %g", quant, how, k, ec, tol);
        }
        CHECK_MSG(memcmp(t_cpu, t_ocl, sizeof t_ocl) == 0, "%s (%s): greedy tokens differ from the cpu's", quant, how);
        fprintf(stderr, "  %s, %s: %llu ops on %s; worst NMSE over %d steps %.3g vs llama.cpp, %.3g vs the cpu (limit %g)\n",
                quant, how, (unsigned long long)ops, dev, N_GEN, worst_ref, worst_cpu, tol);
    }
    free(l_ocl);
    return ops;
}

static void check_file(const char *dir, const char *dev, const char *quant, double tol, bool quantized,
                       const int32_t *ids, int n_ids)
{
    char path[1024], lpath[1024];
    snprintf(path, sizeof path, "%s/mini-a/mini-a-%s.gguf", dir, quant);
    snprintf(lpath, sizeof lpath, "%s/mini-a/logits/mini-a-%s.p0.steps.f32", dir, quant);
    int32_t t_cpu[N_GEN] = {0};
    float *l_cpu = NULL;
    int V = generate(path, "cpu", NULL, ON_HOST, ids, n_ids, t_cpu, &l_cpu);
    size_t len = 0;
    float *ref = (float *)th_read_file(lpath, &len);
    CHECK_MSG(ref && V && len == (size_t)N_GEN * (size_t)V * sizeof(float), "%s unreadable", lpath);
    if (V && l_cpu && ref && len == (size_t)N_GEN * (size_t)V * sizeof(float)) {
        check_run(path, dev, quant, LIKE_RUN, tol, ids, n_ids, t_cpu, l_cpu, ref, V);
        uint64_t ops = check_run(path, dev, quant, PINNED, tol, ids, n_ids, t_cpu, l_cpu, ref, V);
        /* with its weights pinned there, every embedding and linear of a quantized file is the
         * quant group's (an F16 file's are the nn group's) */
        CHECK_MSG(!quantized || ops >= (uint64_t)N_GEN * 30, "%s: only %llu ops ran on %s with the weights placed there",
                  quant, (unsigned long long)ops, dev);
    }
    free(ref), free(l_cpu);
}

/* mini-a's prompt 0 into ids: its length, or -1 (the test skipped: no refdata) */
static int mini_a_prompt0(const char *dir, int32_t *ids)
{
    char path[1024];
    char *tokens = NULL;
    if (dir) {
        snprintf(path, sizeof path, "%s/mini-a/tokens.json", dir);
        tokens = th_read_file(path, NULL);
    }
    if (!tokens) {
        th_skip("no refdata (CTORCH_REFDATA=%s)", dir ? dir : "unset");
        return -1;
    }
    int n = prompt0_ids(tokens, ids);
    free(tokens);
    CHECK_MSG(n > 0, "tokens.json: no ids for prompt 0");
    return n;
}

static void test_mini_a(void)
{
    char dev[32];
    if (!devcheck_device("opencl", dev, sizeof dev)) return;
    const char *dir = th_refdata();
    int32_t ids[MAX_IDS];
    int n = mini_a_prompt0(dir, ids);
    if (n > 0) {
        check_file(dir, dev, "f16", 1e-4, false, ids, n);
        check_file(dir, dev, "q8_0", 1e-3, true, ids, n);
        check_file(dir, dev, "q4_k_m", 1e-3, true, ids, n);
    }
}

/* Q4_K_M with the one-row kernels and the decode planner's fused launches. The run with
 * the norm + q/k/v + RoPE + KV-row launch against the run without it (the same kernels
 * otherwise): the fused launch does the unfused ops' arithmetic, so the logits differ
 * only where an f32 FMA contraction differs, and through the f16 cache where that flips a
 * half rounding (2^-11 relative on an element); observed 0 on PoCL; 1e-7 NMSE bounds it
 * with room, 4 orders below the 1e-3 against llama.cpp. */
static void test_mini_a_fused(void)
{
    char dev[32], chain[64], path[1024];
    if (!devcheck_device("opencl", dev, sizeof dev)) return;
    const char *dir = th_refdata();
    int32_t ids[MAX_IDS], t_on[N_GEN] = {0}, t_off[N_GEN] = {0};
    int n = mini_a_prompt0(dir, ids);
    if (n <= 0) return;
    ocl_quant_test_matvec(OCL_Q_MATVEC_GROUPS);
    check_file(dir, dev, "q4_k_m", 1e-3, true, ids, n);
    snprintf(path, sizeof path, "%s/mini-a/mini-a-q4_k_m.gguf", dir);
    snprintf(chain, sizeof chain, "%s,cpu", dev);
    float *l_on = NULL, *l_off = NULL;
    int f0 = ocl_quant_fused_total();
    int V = generate(path, chain, dev, LIKE_RUN, ids, n, t_on, &l_on);
    int f1 = ocl_quant_fused_total();
    ocl_quant_test_fuse_rope(false);
    int V2 = generate(path, chain, dev, LIKE_RUN, ids, n, t_off, &l_off);
    int f2 = ocl_quant_fused_total();
    ocl_quant_test_fuse_rope(true);
    ocl_quant_test_matvec(OCL_Q_MATVEC_AUTO);
    CHECK_OK(ct_exec_set_devices(NULL));
    /* each of mini-a's 4 layers: rope q, rope k and both cache writes join the launch */
    CHECK_MSG((f1 - f0) - (f2 - f1) >= 16, "fused ops: %d with the rope launch, %d without", f1 - f0, f2 - f1);
    if (V && V == V2 && l_on && l_off) {
        double worst = 0;
        for (int k = 0; k < N_GEN; k++) {
            double e = th_nmse_f32(l_on + (size_t)k * V, l_off + (size_t)k * V, V);
            if (!(e <= worst)) worst = e;
            CHECK_MSG(e <= 1e-7, "step %d: NMSE %.3g between the fused and the unfused rope launches", k, e);
        }
        CHECK_MSG(memcmp(t_on, t_off, sizeof t_on) == 0, "greedy tokens differ with the rope launch fused");
        fprintf(stderr, "  q4_k_m, one-row kernels: %d ops fused with the rope launch, %d without; worst NMSE %.3g\n",
                f1 - f0, f2 - f1, worst);
    }
    free(l_on), free(l_off);
}

int main(int argc, char **argv)
{
    setenv("CTORCH_OPENCL_POISON", "1", 1);
    /* mini-a's matrices are small enough for the size rule to keep their ops on the CPU
     * (host data under 64 KiB); a real model's are not */
    setenv("CTORCH_SMALL_BYTES", "0", 1);
    th_args(argc, argv);
    RUN(test_mini_a);
    RUN(test_mini_a_fused);
    return th_finish();
}
