/* libFuzzer harness for the model loader: the input is written to a file and loaded as a
 * model (architecture, hyper-parameters, tensor names, shapes and types, the tokenizer);
 * a model that loads then tokenizes a short text and evaluates it, two tokens at once and
 * one more at the next position, on the CPU. Seeds: fuzz/corpus_model (tiny llama files
 * from ctorch-make-model, f32 and Q8_0). A refused file is fine; any crash, sanitizer
 * report, leak or trap is a bug. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "ctorch/ctorch.h"
#include "llm/model.h"
#include "llm/tokenizer.h"

static char g_path[256];

static void remove_input(void) { remove(g_path); }

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    atexit(remove_input); /* each input goes through this one file; none is left in /tmp */
    setenv("CTORCH_DEVICES", "cpu", 1);
    setenv("CTORCH_THREADS", "1", 1);
    setenv("CTORCH_LOG", "error", 1);
    snprintf(g_path, sizeof g_path, "/tmp/ctorch-fuzz-model-%ld.gguf", (long)getpid());
    return ct_exec_init() == CT_OK ? 0 : 1;
}

/* Two tokens of a short text (ids the model's vocabulary holds) through the model, then
 * one more at the next position. */
static void evaluate(const llm_model *m)
{
    int32_t ids[16];
    int n = 0;
    if (llm_tokenize(m->tok, "Hi there", 8, true, false, ids, 16, &n) != CT_OK || n < 1) return;
    llm_kv_cache kv;
    if (llm_kv_cache_init(&kv, m, 8, CT_F16) != CT_OK) return;
    ct_tensor *logits = NULL;
    if (llm_forward(m, &kv, ids, n < 2 ? n : 2, false, &logits) == CT_OK) {
        ct_tensor_free(logits);
        logits = NULL;
        if (llm_forward(m, &kv, ids, 1, false, &logits) == CT_OK) ct_tensor_free(logits);
    }
    llm_kv_cache_free(&kv);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(g_path, "wb");
    if (!f) return 0;
    size_t put = fwrite(data, 1, size, f);
    if (fclose(f) != 0 || put != size) return 0;
    llm_model *m = NULL;
    if (llm_model_load(g_path, NULL, NULL, &m) == CT_OK) {
        evaluate(m);
        llm_model_free(m);
    }
    ct_clear_error();
    return 0;
}
