#include "llm_cli.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli.h"
#include "llm/tokenizer.h"
#include "progress.h"

/* -ngl N | all | auto, as llama.cpp users write it. */
static int check_gpu_layers(const char *cmd, llm_cli_opts *o)
{
    const char *a = o->gpu_layers_arg;
    long long n = -1;
    if (!a || !strcmp(a, "auto")) o->gpu_layers = -1;
    else if (!strcmp(a, "all")) o->gpu_layers = INT_MAX;
    else if (cli_parse_int(a, 0, INT_MAX, &n)) o->gpu_layers = (int)n;
    else return cli_usage_error(cmd, "-ngl takes a number of layers (0 or more), all or auto, got '%s'", a);
    return -1;
}

int llm_cli_check(const char *cmd, llm_cli_opts *o)
{
    if (!o->model) return cli_usage_error(cmd, "no model given: -m MODEL.gguf is required");
    /* A bad CTORCH_* setting fails like its flag would, before the model is looked at
     * (with -d the flag replaces CTORCH_DEVICES, and is checked when it is applied). */
    if (!o->devices && ct_exec_init() != CT_OK) {
        fprintf(stderr, "ctorch %s: error: %s\n", cmd, ct_last_error());
        return 1;
    }
    if (!cli_check_model_path(cmd, "model", o->model)) return 1;
    if (o->threads > 0) o->threads = cli_cap_threads(cmd, o->threads);
    return check_gpu_layers(cmd, o);
}

int llm_cli_check_sampling(const char *cmd, llm_sampler_params *sp, int64_t seed)
{
    /* 0 would divide the logits by zero; the table's closed ranges cannot say "> 0". */
    if (!(sp->repeat_penalty > 0)) return cli_usage_error(cmd, "--repeat-penalty must be > 0, got 0");
    sp->seed = seed < 0 ? (uint64_t)time(NULL) : (uint64_t)seed;
    return -1;
}

int llm_cli_chat_template(const char *cmd, const char *arg, bool file_only, llm_chat_tmpl *out)
{
    if (!file_only && llm_chat_from_name(arg, out) == CT_OK) return 0;
    ct_clear_error();
    struct stat st;
    if (!file_only && stat(arg, &st) != 0)
        return cli_usage_error(cmd, "--chat-template '%s' is neither a built-in template (zephyr, gemma, llama3, "
                                    "chatml, llama2) nor a file", arg);
    size_t len;
    char *jinja = cli_read_text_file(cmd, "--chat-template", arg, &len);
    if (!jinja) return 2;
    bool known = llm_chat_detect(jinja, out);
    free(jinja);
    if (!known)
        return cli_usage_error(cmd, "--chat-template %s: ctorch does not run Jinja, and this template matches none "
                                    "it knows (zephyr, gemma, llama3, chatml, llama2); name one of those instead", arg);
    return 0;
}

int llm_cli_fail(const char *cmd)
{
    const char *e = ct_last_error();
    char esc[2048]; /* messages quote names from the file (general.name, tensor names) */
    fprintf(stderr, "ctorch %s: error: %s\n", cmd,
            e && *e ? cli_escape(e, strlen(e), esc, sizeof esc) : "unknown failure");
    return 1;
}

static void on_progress(uint64_t done, uint64_t total, void *ctx)
{
    progress_update(ctx, (int64_t)done, (int64_t)total, NULL);
}

llm_model *llm_cli_load(const char *cmd, const llm_cli_opts *o, bool need_tokenizer)
{
    if (o->threads > 0) ct_set_num_threads(o->threads);
    if (o->devices) {
        const char *spec = strcmp(o->devices, "auto") == 0 ? NULL : o->devices;
        if (ct_exec_set_devices(spec) != CT_OK) {
            llm_cli_fail(cmd);
            return NULL;
        }
    }
    if (ct_exec_init() != CT_OK) { /* a bad CTORCH_* setting */
        llm_cli_fail(cmd);
        return NULL;
    }
    progress pr;
    progress_begin(&pr, "loading");
    llm_model *m = NULL;
    if (llm_model_load_opts(o->model, &(llm_load_opts){.bpe_pre = o->bpe_pre}, on_progress, &pr, &m) != CT_OK) {
        progress_abort(&pr);
        llm_cli_fail(cmd);
        return NULL;
    }
    if (need_tokenizer && !m->tok) {
        fprintf(stderr, "ctorch %s: error: %s has no tokenizer (tokenizer.ggml.* keys)\n", cmd, o->model);
        llm_model_free(m);
        return NULL;
    }
    progress_end(&pr, "mapped");
    char chain[256] = "";
    size_t n = 0;
    for (int i = 0; i < ct_chain_length() && n < sizeof chain - 40; i++) {
        ct_device_info info;
        if (ct_chain_get(i, &info) == CT_OK)
            n += (size_t)snprintf(chain + n, sizeof chain - n, "%s%s (%s)", i ? " -> " : "", info.name,
                                  info.description);
    }
    cli_log(CT_LOG_INFO, "devices: %s; %d CPU thread%s\n", chain, ct_get_num_threads(),
            ct_get_num_threads() == 1 ? "" : "s");

    /* the description quotes general.name and the architecture from the file */
    char desc[256], edesc[4 * 256];
    llm_model_describe(m, desc, sizeof desc);
    cli_log(CT_LOG_INFO, "model: %s\n", cli_escape(desc, strlen(desc), edesc, sizeof edesc));

    progress_begin(&pr, "placing weights");
    llm_placement placed;
    if (llm_model_place(m, NULL, o->gpu_layers, on_progress, &pr, &placed) != CT_OK) {
        progress_abort(&pr);
        llm_cli_fail(cmd);
        llm_model_free(m);
        return NULL;
    }
    char sum[200];
    if (placed.bytes >= m->weight_bytes)
        snprintf(sum, sizeof sum, "all %.1f MiB of weights on %s", (double)placed.bytes / 1048576.0, placed.device);
    else
        snprintf(sum, sizeof sum, "%d of %d layers%s on %s (%.1f of %.1f MiB), the rest on the host", placed.layers,
                 m->hp.n_layer, placed.output ? " and the output" : "", placed.device,
                 (double)placed.bytes / 1048576.0, (double)m->weight_bytes / 1048576.0);
    progress_end(&pr, sum);
    ct_exec_stats_reset();
    return m;
}

int llm_cli_ctx(const llm_cli_opts *o, const llm_model *m)
{
    int train = m->hp.n_ctx_train > 0 ? m->hp.n_ctx_train : 4096;
    if (o->n_ctx > 0) {
        if (o->n_ctx > train)
            cli_log(CT_LOG_WARN, "note: -c %d is more than the model's context length %d; using %d\n", o->n_ctx,
                    train, train);
        return o->n_ctx < train ? o->n_ctx : train;
    }
    return train < 4096 ? train : 4096;
}

int32_t *llm_cli_tokenize(const llm_model *m, const char *text, size_t len, bool add_special, bool parse_special,
                          int *n)
{
    int cap = (int)(len < 1000000 ? len : 1000000) + 8, got = 0;
    for (int tries = 0; tries < 2; tries++) {
        int32_t *ids = malloc(sizeof(int32_t) * (size_t)cap);
        if (!ids) {
            ct_clear_error();
            return NULL;
        }
        ct_status s = llm_tokenize(m->tok, text, len, add_special, parse_special, ids, cap, &got);
        if (s == CT_OK) {
            *n = got;
            return ids;
        }
        free(ids);
        if (s != CT_ERR_RANGE || got <= cap) return NULL;
        cap = got;
    }
    return NULL;
}

void llm_cli_print_devices_used(void)
{
    ct_device_stats st[8];
    int n = ct_exec_stats(st, 8);
    for (int i = 0; i < n && i < 8; i++) {
        if (!st[i].ops) continue;
        cli_log(CT_LOG_INFO, "  %-10s %8llu ops", st[i].device, (unsigned long long)st[i].ops);
        if (st[i].time_ns) cli_log(CT_LOG_INFO, "  %8.3f s", (double)st[i].time_ns * 1e-9);
        if (st[i].fallbacks)
            cli_log(CT_LOG_INFO, "  (%llu fell back from here)", (unsigned long long)st[i].fallbacks);
        cli_log(CT_LOG_INFO, "\n");
    }
}
