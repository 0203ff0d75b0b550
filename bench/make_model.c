/* ctorch-make-model: writes a llama-architecture GGUF with random weights
 * (F16 2-D weights, F32 norms) for benchmarks. Speed only depends on the
 * shapes and types, so random weights measure what a trained file would.
 *
 * Weight scales follow refdata/mini-a/README.md so that activations stay in a
 * sane range through all layers (a benchmark that overflows to inf/NaN can
 * take different code paths than a real model).
 *
 * Usage: ctorch-make-model [options] OUT.gguf   (see usage()) */
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch/core.h"
#include "formats/gguf.h"

typedef struct shape {
    int n_layer, n_embd, n_ff, n_head, n_head_kv, n_vocab, n_ctx;
    double rope_base, rms_eps;
    uint64_t seed;
    int threads;
    int tied; /* no output.weight: the loader reuses token_embd */
    const char *vocab_path;
    const char *name;
} shape;

#define VOCAB_FILE "ggml-vocab-llama-spm.gguf"
#ifndef CTORCH_REFDATA_DIR
#define CTORCH_REFDATA_DIR "" /* set by CMake: ../shared/refdata beside the source tree */
#endif

static bool is_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* The default vocabulary, looked up where this checkout and this user keep
 * it, never at one machine's absolute path. NULL when there is none. */
static const char *default_vocab(char *buf, size_t len)
{
    const char *env = getenv("CTORCH_REFDATA"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (env && *env && snprintf(buf, len, "%s/tokenizer/" VOCAB_FILE, env) < (int)len && is_file(buf)) return buf;
    if (*CTORCH_REFDATA_DIR && snprintf(buf, len, "%s/tokenizer/" VOCAB_FILE, CTORCH_REFDATA_DIR) < (int)len &&
        is_file(buf))
        return buf;
    if (xdg && *xdg && snprintf(buf, len, "%s/ctorch/" VOCAB_FILE, xdg) < (int)len && is_file(buf)) return buf;
    if (home && *home && snprintf(buf, len, "%s/.cache/ctorch/" VOCAB_FILE, home) < (int)len && is_file(buf))
        return buf;
    return NULL;
}

static int usage(void)
{
    fprintf(stderr,
            "usage: ctorch-make-model [options] OUT.gguf\n"
            "  --layers N      block count            (default 22)\n"
            "  --embd N        embedding length       (default 2048)\n"
            "  --ff N          feed-forward length    (default 5632)\n"
            "  --heads N       attention heads        (default 32)\n"
            "  --kv-heads N    KV heads               (default 4)\n"
            "  --vocab N       vocabulary size        (default 32000)\n"
            "  --ctx N         context length         (default 2048)\n"
            "  --rope-base X   RoPE base frequency    (default 10000)\n"
            "  --eps X         RMSNorm epsilon        (default 1e-5)\n"
            "  --seed N        random seed            (default 1234)\n"
            "  --threads N     generator threads      (default 2)\n"
            "  --tied          no output.weight (tied embeddings)\n"
            "  --name S        general.name           (default tinyllama-random)\n"
            "  --vocab-file F  copy tokenizer.ggml.* from this GGUF when its vocabulary size matches\n"
            "                  (default: " VOCAB_FILE " from $CTORCH_REFDATA, else from the refdata beside\n"
            "                  this source tree, else from $XDG_CACHE_HOME/ctorch or ~/.cache/ctorch;\n"
            "                  when none is there, a SentencePiece-style vocabulary is synthesized)\n");
    return 2;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Counter-based generator: element i of tensor k is a pure function of
 * (seed, k, i), so the file is identical for any thread count. */
static inline uint64_t splitmix(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

/* Approximately N(0,1): Irwin-Hall sum of four 16-bit uniforms, rescaled.
 * Tails are cut at +-3.46 sigma, which is harmless for benchmark weights and
 * far cheaper than Box-Muller over a billion elements. */
static inline float approx_normal(uint64_t r)
{
    uint32_t s = (uint32_t)(r & 0xFFFF) + (uint32_t)((r >> 16) & 0xFFFF) + (uint32_t)((r >> 32) & 0xFFFF) +
                 (uint32_t)(r >> 48);
    /* mean 4 * 32767.5, sd sqrt(4/12) * 65536 */
    return ((float)s - 131070.0f) * (1.7320508f / 65536.0f);
}

typedef struct fill_job {
    void *data;
    int is_f16;
    int64_t begin, end;
    uint64_t key;
    float mean, sd;
} fill_job;

static void *fill_range(void *arg)
{
    const fill_job *j = arg;
    for (int64_t i = j->begin; i < j->end; i++) {
        float v = j->mean + j->sd * approx_normal(splitmix(j->key ^ (uint64_t)i));
        if (j->is_f16) ((uint16_t *)j->data)[i] = ct_f32_to_f16(v);
        else ((float *)j->data)[i] = v;
    }
    return NULL;
}

static void fill(void *data, int is_f16, int64_t n, uint64_t key, float mean, float sd, int threads)
{
    enum { MAX_T = 64 };
    fill_job jobs[MAX_T];
    pthread_t tid[MAX_T];
    int started[MAX_T] = {0};
    if (threads < 1) threads = 1;
    if (threads > MAX_T) threads = MAX_T;
    if (n < 65536) threads = 1;
    for (int t = 0; t < threads; t++) {
        jobs[t] = (fill_job){data, is_f16, n * t / threads, n * (t + 1) / threads, key, mean, sd};
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, fill_range, &jobs[t]) == 0;
    }
    fill_range(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else fill_range(&jobs[t]); /* could not start a thread: do its share here */
    }
}

typedef struct model_buf {
    void **bufs;
    int n, cap;
} model_buf;

static void *keep(model_buf *mb, size_t bytes)
{
    if (mb->n == mb->cap) {
        int nc = mb->cap ? mb->cap * 2 : 64;
        void **nb = realloc(mb->bufs, sizeof(void *) * (size_t)nc);
        if (!nb) return NULL;
        mb->bufs = nb;
        mb->cap = nc;
    }
    void *p = malloc(bytes ? bytes : 1);
    if (p) mb->bufs[mb->n++] = p;
    return p;
}

typedef struct gen_ctx {
    gguf_writer *w;
    model_buf mb;
    const shape *sh;
    uint64_t tensor_idx;
    double bytes_done, bytes_total, t0, last_report;
} gen_ctx;

/* Adds one random tensor. rows x cols in ct order (cols = ne[0]); rows 0 = 1-D. */
static int add_tensor(gen_ctx *g, const char *name, int64_t rows, int64_t cols, float mean, float sd)
{
    int is_f16 = rows > 0;
    int64_t n = (rows > 0 ? rows : 1) * cols;
    size_t bytes = (size_t)n * (is_f16 ? 2 : 4);
    void *d = keep(&g->mb, bytes);
    if (!d) {
        fprintf(stderr, "ctorch-make-model: out of memory for %s (%zu bytes)\n", name, bytes);
        return -1;
    }
    uint64_t key = splitmix(g->sh->seed * 0x100000001B3ull + g->tensor_idx++) << 1;
    fill(d, is_f16, n, key, mean, sd, g->sh->threads);
    int64_t shp[2] = {rows, cols};
    ct_status st = rows > 0 ? gguf_writer_add_tensor(g->w, name, CT_F16, 2, shp, d)
                            : gguf_writer_add_tensor(g->w, name, CT_F32, 1, &shp[1], d);
    if (st != CT_OK) {
        fprintf(stderr, "ctorch-make-model: %s\n", ct_last_error());
        return -1;
    }
    g->bytes_done += (double)bytes;
    double t = now_s();
    if (t - g->last_report < 0.5 && g->bytes_done < g->bytes_total) return 0;
    g->last_report = t;
    fprintf(stderr, "\rgenerating weights: %5.1f%% (%.0f / %.0f MB, %.1f s)", 100.0 * g->bytes_done / g->bytes_total,
            g->bytes_done / 1e6, g->bytes_total / 1e6, t - g->t0);
    return 0;
}

/* Copies every tokenizer.ggml.* key of `path` verbatim. Returns 1 when copied,
 * 0 when the file is absent or its vocabulary size differs, -1 on error. */
static int copy_vocab(gguf_writer *w, const char *path, int n_vocab)
{
    FILE *probe = fopen(path, "rb");
    if (!probe) return 0;
    fclose(probe);
    gguf_file *f = NULL;
    if (gguf_open(path, &f) != CT_OK) {
        fprintf(stderr, "ctorch-make-model: warning: %s; synthesizing a vocabulary\n", ct_last_error());
        return 0;
    }
    int rc = 1;
    gguf_type elem;
    uint64_t n = 0;
    const void *unused;
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", &elem, &n, &unused) != CT_OK || n != (uint64_t)n_vocab) {
        fprintf(stderr, "ctorch-make-model: %s has %" PRIu64 " tokens, not %d; synthesizing a vocabulary\n", path, n,
                n_vocab);
        rc = 0;
        goto out;
    }
    for (int64_t i = 0; i < gguf_kv_count(f); i++) {
        const char *key = gguf_kv_key(f, i);
        if (strncmp(key, "tokenizer.ggml.", 15) != 0) continue;
        gguf_value v;
        if (gguf_kv_value(f, i, &v) != CT_OK) goto fail;
        /* the raw payload starts at the string length / array header that ptr skips */
        size_t hdr = v.type == GGUF_TYPE_STRING ? 8 : v.type == GGUF_TYPE_ARRAY ? 12 : 0;
        if (gguf_writer_set_raw(w, key, v.type, v.ptr - hdr, (size_t)v.size + hdr) != CT_OK) goto fail;
    }
    fprintf(stderr, "tokenizer: copied from %s\n", path);
    goto out;
fail:
    fprintf(stderr, "ctorch-make-model: copying the vocabulary: %s\n", ct_last_error());
    rc = -1;
out:
    gguf_close(f);
    return rc;
}

/* SentencePiece-style vocabulary: <unk>, <s>, </s>, the 256 byte tokens, then
 * distinct filler pieces (half with the leading-space marker). */
static int synth_vocab(gguf_writer *w, int n_vocab)
{
    if (n_vocab < 259 + 1) {
        fprintf(stderr, "ctorch-make-model: --vocab must be at least 260 for a synthesized vocabulary\n");
        return -1;
    }
    char **toks = calloc((size_t)n_vocab, sizeof(char *));
    float *scores = malloc(sizeof(float) * (size_t)n_vocab);
    int32_t *types = malloc(sizeof(int32_t) * (size_t)n_vocab);
    int rc = -1;
    if (!toks || !scores || !types) goto out;
    for (int i = 0; i < n_vocab; i++) {
        char buf[32];
        if (i == 0) snprintf(buf, sizeof buf, "<unk>");
        else if (i == 1) snprintf(buf, sizeof buf, "<s>");
        else if (i == 2) snprintf(buf, sizeof buf, "</s>");
        else if (i < 259) snprintf(buf, sizeof buf, "<0x%02X>", i - 3);
        else {
            /* base-26 spelling of the index is unique; "\xE2\x96\x81" is U+2581, SentencePiece's space */
            int k = i - 259, len = 0;
            char word[16];
            do {
                word[len++] = (char)('a' + k % 26);
                k /= 26;
            } while (k > 0 && len < 15);
            word[len] = 0;
            snprintf(buf, sizeof buf, "%s%s", (i & 1) ? "\xE2\x96\x81" : "", word);
        }
        toks[i] = strdup(buf);
        if (!toks[i]) goto out;
        scores[i] = i < 259 ? 0.0f : -(float)(i - 259);
        types[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1; /* unknown, control, byte, normal */
    }
    if (gguf_writer_set_str(w, "tokenizer.ggml.model", "llama") || gguf_writer_set_str(w, "tokenizer.ggml.pre", "default") ||
        gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, (uint64_t)n_vocab) ||
        gguf_writer_set_arr(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, scores, (uint64_t)n_vocab) ||
        gguf_writer_set_arr(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32, types, (uint64_t)n_vocab) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.bos_token_id", 1) || gguf_writer_set_u32(w, "tokenizer.ggml.eos_token_id", 2) ||
        gguf_writer_set_u32(w, "tokenizer.ggml.unknown_token_id", 0) ||
        gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", true) ||
        gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", false)) {
        fprintf(stderr, "ctorch-make-model: %s\n", ct_last_error());
        goto out;
    }
    fprintf(stderr, "tokenizer: synthesized %d-token SentencePiece-style vocabulary\n", n_vocab);
    rc = 1;
out:
    if (rc < 0 && (!toks || !scores || !types)) fprintf(stderr, "ctorch-make-model: out of memory\n");
    if (toks)
        for (int i = 0; i < n_vocab; i++) free(toks[i]);
    free(toks);
    free(scores);
    free(types);
    return rc;
}

static int parse_int(const char *s, int lo, int *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == 0 || *end || v < lo || v > 1L << 30) return 0;
    *out = (int)v;
    return 1;
}

static int parse_real(const char *s, double *out)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == 0 || *end || !isfinite(v) || v <= 0) return 0;
    *out = v;
    return 1;
}

int main(int argc, char **argv)
{
    shape sh = {.n_layer = 22, .n_embd = 2048, .n_ff = 5632, .n_head = 32, .n_head_kv = 4, .n_vocab = 32000,
                .n_ctx = 2048, .rope_base = 10000.0, .rms_eps = 1e-5, .seed = 1234, .threads = 2,
                .name = "tinyllama-random"};
    char vocab_buf[4096];
    const char *out_path = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) return usage();
        if (!strcmp(a, "--tied")) {
            sh.tied = 1;
            continue;
        }
        if (a[0] != '-') {
            if (out_path) return usage();
            out_path = a;
            continue;
        }
        if (i + 1 >= argc) return usage();
        const char *v = argv[++i];
        int ok = 1, tmp = 0;
        if (!strcmp(a, "--layers")) ok = parse_int(v, 1, &sh.n_layer);
        else if (!strcmp(a, "--embd")) ok = parse_int(v, 1, &sh.n_embd);
        else if (!strcmp(a, "--ff")) ok = parse_int(v, 1, &sh.n_ff);
        else if (!strcmp(a, "--heads")) ok = parse_int(v, 1, &sh.n_head);
        else if (!strcmp(a, "--kv-heads")) ok = parse_int(v, 1, &sh.n_head_kv);
        else if (!strcmp(a, "--vocab")) ok = parse_int(v, 1, &sh.n_vocab);
        else if (!strcmp(a, "--ctx")) ok = parse_int(v, 1, &sh.n_ctx);
        else if (!strcmp(a, "--threads")) ok = parse_int(v, 1, &sh.threads);
        else if (!strcmp(a, "--seed")) ok = parse_int(v, 0, &tmp), sh.seed = (uint64_t)tmp;
        else if (!strcmp(a, "--rope-base")) ok = parse_real(v, &sh.rope_base);
        else if (!strcmp(a, "--eps")) ok = parse_real(v, &sh.rms_eps);
        else if (!strcmp(a, "--name")) sh.name = v;
        else if (!strcmp(a, "--vocab-file")) sh.vocab_path = v;
        else {
            fprintf(stderr, "ctorch-make-model: unknown option %s\n", a);
            return usage();
        }
        if (!ok) {
            fprintf(stderr, "ctorch-make-model: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (!out_path) return usage();
    if (sh.n_embd % sh.n_head || sh.n_head % sh.n_head_kv || (sh.n_embd / sh.n_head) % 2) {
        fprintf(stderr, "ctorch-make-model: --embd must be a multiple of --heads (with an even head size), "
                        "and --heads a multiple of --kv-heads\n");
        return 2;
    }
    const int hd = sh.n_embd / sh.n_head, n_embd_kv = hd * sh.n_head_kv;
    const int64_t E = sh.n_embd, F = sh.n_ff, V = sh.n_vocab, KV = n_embd_kv;

    gen_ctx g = {.sh = &sh, .t0 = now_s()};
    g.w = gguf_writer_new();
    if (!g.w) {
        fprintf(stderr, "ctorch-make-model: out of memory\n");
        return 1;
    }
    int rc = 1;
    if (gguf_writer_set_str(g.w, "general.architecture", "llama") || gguf_writer_set_str(g.w, "general.name", sh.name) ||
        gguf_writer_set_u32(g.w, "general.file_type", 1) /* mostly F16 */ ||
        gguf_writer_set_u32(g.w, "llama.context_length", (uint32_t)sh.n_ctx) ||
        gguf_writer_set_u32(g.w, "llama.embedding_length", (uint32_t)sh.n_embd) ||
        gguf_writer_set_u32(g.w, "llama.block_count", (uint32_t)sh.n_layer) ||
        gguf_writer_set_u32(g.w, "llama.feed_forward_length", (uint32_t)sh.n_ff) ||
        gguf_writer_set_u32(g.w, "llama.attention.head_count", (uint32_t)sh.n_head) ||
        gguf_writer_set_u32(g.w, "llama.attention.head_count_kv", (uint32_t)sh.n_head_kv) ||
        gguf_writer_set_u32(g.w, "llama.rope.dimension_count", (uint32_t)hd) ||
        gguf_writer_set_f32(g.w, "llama.rope.freq_base", (float)sh.rope_base) ||
        gguf_writer_set_f32(g.w, "llama.attention.layer_norm_rms_epsilon", (float)sh.rms_eps) ||
        gguf_writer_set_u32(g.w, "llama.vocab_size", (uint32_t)sh.n_vocab)) {
        fprintf(stderr, "ctorch-make-model: %s\n", ct_last_error());
        goto out;
    }
    if (!sh.vocab_path) sh.vocab_path = default_vocab(vocab_buf, sizeof vocab_buf);
    int v = sh.vocab_path ? copy_vocab(g.w, sh.vocab_path, sh.n_vocab) : 0;
    if (v == 0) v = synth_vocab(g.w, sh.n_vocab);
    if (v < 0) goto out;

    const double per_layer = 2.0 * (double)(E * E * 2 + E * KV * 2 + E * F * 3) + 4.0 * (double)(2 * E);
    g.bytes_total = 2.0 * (double)(V * E) * (sh.tied ? 1 : 2) + 4.0 * (double)E + per_layer * sh.n_layer;

    const float se = (float)(1.0 / sqrt((double)E)), sf = (float)(1.0 / sqrt((double)F));
    if (add_tensor(&g, "token_embd.weight", V, E, 0.0f, 1.0f)) goto out;
    for (int il = 0; il < sh.n_layer; il++) {
        char nm[64];
#define T(suffix, rows, cols, mean, sd)                                  \
    do {                                                                 \
        snprintf(nm, sizeof nm, "blk.%d." suffix ".weight", il);         \
        if (add_tensor(&g, nm, rows, cols, mean, sd)) goto out;          \
    } while (0)
        T("attn_norm", 0, E, 1.0f, 0.1f);
        T("attn_q", E, E, 0.0f, 1.5f * se);
        T("attn_k", KV, E, 0.0f, 1.5f * se);
        T("attn_v", KV, E, 0.0f, se);
        T("attn_output", E, E, 0.0f, 0.5f * se);
        T("ffn_norm", 0, E, 1.0f, 0.1f);
        T("ffn_gate", F, E, 0.0f, se);
        T("ffn_up", F, E, 0.0f, se);
        T("ffn_down", E, F, 0.0f, 0.5f * sf);
#undef T
    }
    if (add_tensor(&g, "output_norm.weight", 0, E, 1.0f, 0.1f)) goto out;
    if (!sh.tied && add_tensor(&g, "output.weight", V, E, 0.0f, 1.5f * se)) goto out;
    fprintf(stderr, "\nwriting %s ...\n", out_path);
    if (gguf_writer_write(g.w, out_path) != CT_OK) {
        fprintf(stderr, "ctorch-make-model: %s\n", ct_last_error());
        goto out;
    }
    fprintf(stderr, "wrote %s: %.1f MB of weights in %.1f s\n", out_path, g.bytes_total / 1e6, now_s() - g.t0);
    rc = 0;
out:
    gguf_writer_free(g.w);
    for (int i = 0; i < g.mb.n; i++) free(g.mb.bufs[i]);
    free(g.mb.bufs);
    return rc;
}
