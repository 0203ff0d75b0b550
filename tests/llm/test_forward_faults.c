/* A device error inside the forward pass (injected with ct_exec_set_fault on each op
 * kind the llama forward uses, one at a time) fails llm_forward with the executor's
 * error (every device of the chain, here the CPU alone, failed) naming the op,
 * returns no logits, leaves n_past where it was, and leaks nothing (the suite also
 * runs under ASan). Once the fault is cleared, the same call
 * gives logits bit-identical to a clean run's, so the failure left the model and the
 * KV cache usable. Tiny llama written here; needs no ../shared. */
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/model.h"
#include "tiny_gguf.h"

enum { V = 16, E = 32, F = 64, H = 2, HKV = 1, D = 16, CTX = 8 };

static th_rng g_rng = {4242};

/* The writer borrows tensor data until it writes: buffers live until make_model frees them. */
static float *g_keep[16];
static int g_nkeep;

static void add(gguf_writer *w, const char *name, int64_t d0, int64_t d1, double lo, double hi)
{
    int64_t n = d0 * (d1 ? d1 : 1), shape[2] = {d0, d1};
    float *f = g_keep[g_nkeep++] = malloc((size_t)n * sizeof *f);
    for (int64_t i = 0; i < n; i++) f[i] = (float)th_uniform(&g_rng, lo, hi);
    CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, d1 ? 2 : 1, shape, f));
}

static llm_model *make_model(void)
{
    char path[512];
    th_tmp_path(path, sizeof path, "forward_faults.gguf");
    /* no name, epsilon or rope base: the loader's defaults */
    static const th_llama_shape shape = {CTX, E, 1, F, H, HKV, 0.0f, 0.0f};
    gguf_writer *w = gguf_writer_new();
    th_llama_hparams(w, NULL, &shape);
    const double ws = 1.0 / sqrt((double)E);
    add(w, "token_embd.weight", V, E, -1, 1);
    add(w, "output_norm.weight", E, 0, 0.8, 1.2);
    add(w, "output.weight", V, E, -ws, ws);
    add(w, "blk.0.attn_norm.weight", E, 0, 0.8, 1.2);
    add(w, "blk.0.attn_q.weight", H * D, E, -ws, ws);
    add(w, "blk.0.attn_k.weight", HKV * D, E, -ws, ws);
    add(w, "blk.0.attn_v.weight", HKV * D, E, -ws, ws);
    add(w, "blk.0.attn_output.weight", E, H * D, -ws, ws);
    add(w, "blk.0.ffn_norm.weight", E, 0, 0.8, 1.2);
    add(w, "blk.0.ffn_gate.weight", F, E, -ws, ws);
    add(w, "blk.0.ffn_up.weight", F, E, -ws, ws);
    add(w, "blk.0.ffn_down.weight", E, F, -ws, ws);
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_free(w);
    while (g_nkeep > 0) free(g_keep[--g_nkeep]);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    remove(path);
    return m;
}

static float *run(const llm_model *m, llm_kv_cache *kv, const int32_t *toks, int n, ct_status *st)
{
    ct_tensor *lg = NULL;
    *st = llm_forward(m, kv, toks, n, false, &lg);
    float *v = NULL;
    if (*st == CT_OK && lg) {
        v = malloc(sizeof(float) * V);
        CHECK_OK(ct_tensor_to_host(lg, v, sizeof(float) * V));
    }
    if (*st != CT_OK) CHECK(lg == NULL);
    ct_tensor_free(lg);
    return v;
}

static void test_each_op_fails_cleanly(void)
{
    llm_model *m = make_model();
    if (!m) return;
    static const int32_t prompt[3] = {1, 5, 9}, next[1] = {7};
    llm_kv_cache kv;
    CHECK_OK(llm_kv_cache_init(&kv, m, CTX, CT_F32));
    ct_status st;
    float *ref1 = run(m, &kv, prompt, 3, &st), *ref2 = run(m, &kv, next, 1, &st);
    CHECK(ref1 && ref2 && kv.n_past == 4);
    static const char *const ops[] = {"embedding", "rms_norm", "linear", "rope", "copy", "sdpa", "add", "swiglu"};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "cpu:%s:fault", ops[i]);
        llm_kv_cache_clear(&kv);
        /* the fault hits the prompt pass */
        CHECK_OK(ct_exec_set_fault(spec));
        float *bad = run(m, &kv, prompt, 3, &st);
        /* the CPU is the whole chain here: the executor reports that every capable device failed */
        CHECK_MSG(st == CT_ERR_UNSUPPORTED && bad == NULL, "%s: %s", ops[i], ct_status_name(st));
        CHECK_MSG(strstr(ct_last_error(), ops[i]) && strstr(ct_last_error(), "every capable device in the chain failed"),
                  "%s: message \"%s\"", ops[i], ct_last_error());
        CHECK(kv.n_past == 0);
        free(bad);
        CHECK_OK(ct_exec_set_fault(NULL));
        float *a = run(m, &kv, prompt, 3, &st);
        /* and the decode step after it */
        CHECK_OK(ct_exec_set_fault(spec));
        float *bad2 = run(m, &kv, next, 1, &st);
        CHECK(st == CT_ERR_UNSUPPORTED && kv.n_past == 3);
        free(bad2);
        CHECK_OK(ct_exec_set_fault(NULL));
        float *b = run(m, &kv, next, 1, &st);
        CHECK_MSG(a && b && !memcmp(a, ref1, sizeof(float) * V) && !memcmp(b, ref2, sizeof(float) * V),
                  "%s: logits after the failed pass differ from a clean run's", ops[i]);
        free(a), free(b);
    }
    CHECK_OK(ct_exec_set_fault(NULL));
    free(ref1), free(ref2);
    llm_kv_cache_free(&kv);
    llm_model_free(m);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    /* a failing cpu op must have nowhere else to go, whatever CTORCH_DEVICES says */
    if (ct_exec_set_devices("cpu") != CT_OK) return 1;
    RUN(test_each_op_fails_cleanly);
    return th_finish();
}
