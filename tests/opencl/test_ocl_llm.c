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
 * - opencl:0 ran ops (ops it lacks go to the CPU; CTORCH_TRACE=1 lists them).
 * Skips without an OpenCL device or without ../shared/refdata. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#include "llm/generate.h"

#define N_GEN 24
#define MAX_IDS 256

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0;
    if (len) *len = b ? (size_t)n : 0;
    return b;
}

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

static double nmse(const float *got, const float *ref, int n)
{
    double e = 0, r = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        e += d * d;
        r += (double)ref[i] * ref[i];
    }
    return r > 0 ? e / r : e;
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

/* Prompt, then N_GEN greedy tokens on `chain`; logits[k * V ..] after each step. Returns V (0 on failure). */
static int generate(const char *path, const char *chain, bool place, const int32_t *ids, int n_ids, int32_t *toks,
                    float **logits)
{
    *logits = NULL;
    CHECK_OK(ct_exec_set_devices(chain));
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) return 0;
    uint64_t placed = 0;
    if (place) CHECK_OK(llm_model_place(m, NULL, NULL, NULL, &placed));
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
            toks[k] = argmax(s.logits, V);
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

static void check_file(const char *dir, const char *dev, const char *quant, double tol, const int32_t *ids, int n_ids)
{
    char path[1024], chain[64], lpath[1024];
    snprintf(path, sizeof path, "%s/mini-a/mini-a-%s.gguf", dir, quant);
    snprintf(chain, sizeof chain, "%s,cpu", dev);
    snprintf(lpath, sizeof lpath, "%s/mini-a/logits/mini-a-%s.p0.steps.f32", dir, quant);
    int32_t t_cpu[N_GEN] = {0}, t_ocl[N_GEN] = {0};
    float *l_cpu = NULL, *l_ocl = NULL;
    int V = generate(path, "cpu", false, ids, n_ids, t_cpu, &l_cpu);
    ct_exec_stats_reset();
    int V2 = generate(path, chain, true, ids, n_ids, t_ocl, &l_ocl);
    uint64_t ops = device_ops(dev);
    CHECK_MSG(ops > 0, "%s: no op ran on %s", quant, dev);
    CHECK_OK(ct_exec_set_devices(NULL));
    size_t len = 0;
    float *ref = (float *)read_file(lpath, &len);
    CHECK_MSG(ref && len == (size_t)N_GEN * (size_t)V * sizeof(float), "%s unreadable", lpath);
    if (V && V == V2 && ref && len == (size_t)N_GEN * (size_t)V * sizeof(float)) {
        double worst_ref = 0, worst_cpu = 0;
        for (int k = 0; k < N_GEN; k++) {
            double er = nmse(l_ocl + (size_t)k * V, ref + (size_t)k * V, V);
            double ec = nmse(l_ocl + (size_t)k * V, l_cpu + (size_t)k * V, V);
            if (!(er <= worst_ref)) worst_ref = er;
            if (!(ec <= worst_cpu)) worst_cpu = ec;
            CHECK_MSG(er < tol, "%s step %d: NMSE %.3g vs llama.cpp >= %g", quant, k, er, tol);
            CHECK_MSG(ec < tol, "%s step %d: NMSE %.3g vs the cpu >= %g", quant, k, ec, tol);
        }
        CHECK_MSG(memcmp(t_cpu, t_ocl, sizeof t_cpu) == 0, "%s: greedy tokens differ from the cpu's", quant);
        fprintf(stderr, "  %s on %s: %llu ops there; worst NMSE over %d steps %.3g vs llama.cpp, %.3g vs the cpu (limit %g)\n",
                quant, dev, (unsigned long long)ops, N_GEN, worst_ref, worst_cpu, tol);
    }
    free(ref), free(l_cpu), free(l_ocl);
}

static void test_mini_a(void)
{
    char dev[32];
    if (!devcheck_device("opencl", dev, sizeof dev)) return;
    const char *dir = th_refdata();
    char path[1024];
    char *tokens = NULL;
    if (dir) {
        snprintf(path, sizeof path, "%s/mini-a/tokens.json", dir);
        tokens = read_file(path, NULL);
    }
    if (!tokens) {
        th_skip("no refdata (CTORCH_REFDATA=%s)", dir ? dir : "unset");
        return;
    }
    int32_t ids[MAX_IDS];
    int n = prompt0_ids(tokens, ids);
    CHECK_MSG(n > 0, "tokens.json: no ids for prompt 0");
    if (n > 0) {
        check_file(dir, dev, "f16", 1e-4, ids, n);
        check_file(dir, dev, "q8_0", 1e-3, ids, n);
        check_file(dir, dev, "q4_k_m", 1e-3, ids, n);
    }
    free(tokens);
}

int main(int argc, char **argv)
{
    setenv("CTORCH_OPENCL_POISON", "1", 1);
    th_args(argc, argv);
    RUN(test_mini_a);
    return th_finish();
}
