#include "llm_cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llm/tokenizer.h"
#include "progress.h"

bool llm_cli_int(const char *s, int *out)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (e == s || *e || errno || v < -1000000000L || v > 1000000000L) return false;
    *out = (int)v;
    return true;
}

bool llm_cli_float(const char *s, float *out)
{
    char *e;
    float v = strtof(s, &e);
    if (e == s || *e) return false;
    *out = v;
    return true;
}

int llm_cli_common_arg(const char *cmd, llm_cli_opts *o, int argc, char **argv, int *i)
{
    const char *a = argv[*i];
    bool has_val = *i + 1 < argc;
    if (!strcmp(a, "--kv-f32")) {
        o->kv_f32 = true;
        return 1;
    }
    if (strcmp(a, "-m") && strcmp(a, "--model") && strcmp(a, "-t") && strcmp(a, "--threads") && strcmp(a, "-c") &&
        strcmp(a, "--ctx-size") && strcmp(a, "-d") && strcmp(a, "--devices"))
        return 0;
    if (!has_val) {
        fprintf(stderr, "ctorch %s: error: %s needs a value\n", cmd, a);
        return -1;
    }
    const char *v = argv[++*i];
    if (a[1] == 'm' || !strcmp(a, "--model")) {
        o->model = v;
    } else if (a[1] == 'd' || !strcmp(a, "--devices")) {
        o->devices = v;
    } else {
        int n;
        if (!llm_cli_int(v, &n) || n < 1) {
            fprintf(stderr, "ctorch %s: error: %s wants a positive integer, got '%s'\n", cmd, a, v);
            return -1;
        }
        if (a[1] == 't' || !strcmp(a, "--threads")) o->threads = n;
        else o->n_ctx = n;
    }
    return 1;
}

int llm_cli_fail(const char *cmd)
{
    const char *e = ct_last_error();
    fprintf(stderr, "ctorch %s: error: %s\n", cmd, e && *e ? e : "unknown failure");
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
    if (llm_model_load(o->model, on_progress, &pr, &m) != CT_OK) {
        if (pr.tty) fprintf(stderr, "\n");
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
    fprintf(stderr, "devices: %s; %d CPU thread%s\n", chain, ct_get_num_threads(), ct_get_num_threads() == 1 ? "" : "s");

    char desc[256];
    llm_model_describe(m, desc, sizeof desc);
    fprintf(stderr, "model: %s\n", desc);

    progress_begin(&pr, "placing weights");
    uint64_t placed = 0;
    ct_device_info head = {0};
    ct_chain_get(0, &head);
    if (llm_model_place(m, NULL, on_progress, &pr, &placed) != CT_OK) {
        if (pr.tty) fprintf(stderr, "\n");
        llm_cli_fail(cmd);
        llm_model_free(m);
        return NULL;
    }
    char sum[160];
    if (placed >= m->weight_bytes)
        snprintf(sum, sizeof sum, "all %.1f MiB of weights on %s", (double)placed / 1048576.0, head.name);
    else
        snprintf(sum, sizeof sum, "%.1f of %.1f MiB on %s, the rest on the host (ops on them fall back)",
                 (double)placed / 1048576.0, (double)m->weight_bytes / 1048576.0, head.name);
    progress_end(&pr, sum);
    ct_exec_stats_reset();
    return m;
}

int llm_cli_ctx(const llm_cli_opts *o, const llm_model *m)
{
    int train = m->hp.n_ctx_train > 0 ? m->hp.n_ctx_train : 4096;
    if (o->n_ctx > 0) {
        if (o->n_ctx > train)
            fprintf(stderr, "note: -c %d is more than the model's context length %d; using %d\n", o->n_ctx, train,
                    train);
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

char *llm_cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *b = realloc(buf, cap *= 2);
            if (!b) free(buf);
            buf = b;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    if (len) *len = n;
    return buf;
}

void llm_cli_print_devices_used(void)
{
    ct_device_stats st[8];
    int n = ct_exec_stats(st, 8);
    for (int i = 0; i < n && i < 8; i++) {
        if (!st[i].ops) continue;
        fprintf(stderr, "  %-10s %8llu ops", st[i].device, (unsigned long long)st[i].ops);
        if (st[i].time_ns) fprintf(stderr, "  %8.3f s", (double)st[i].time_ns * 1e-9);
        if (st[i].fallbacks) fprintf(stderr, "  (%llu fell back from here)", (unsigned long long)st[i].fallbacks);
        fputc('\n', stderr);
    }
}
