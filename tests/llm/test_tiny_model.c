/* Tiny random llama and gemma3 models written with the GGUF writer at test
 * time: the forward pass against an independent double-precision
 * implementation written here, batch prefill against token-by-token decode
 * through the KV cache, and the loader's error paths. Needs no ../shared. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"
#include "llm/generate.h"
#include "llm/model.h"
#include "tiny_gguf.h"

typedef struct tiny_cfg {
    const char *arch;
    int n_vocab, n_embd, n_layer, n_ff, n_head, n_head_kv, head_dim, n_ctx;
    double eps, rope_base, rope_factor; /* rope_factor 0: no scaling key */
    int window;                         /* gemma3 sliding window */
    bool gemma;                         /* qk norms, post norms, geglu, neox, embd scale, tied output */
} tiny_cfg;

/* Host copies of the weights (what the file holds, as double) for the naive pass. */
typedef struct tiny_w {
    double *tok, *out, *onorm;
    double *attn_norm[8], *wq[8], *wk[8], *wv[8], *wo[8], *qn[8], *kn[8], *pan[8];
    double *ffn_norm[8], *wg[8], *wu[8], *wd[8], *pfn[8];
} tiny_w;

static th_rng g_rng = {12345};

/* Random f32 tensor added to the writer; its values kept as double. */
static double *add_w(gguf_writer *w, float **keep, int *nkeep, const char *name, int64_t d0, int64_t d1,
                     double lo, double hi)
{
    int64_t n = d0 * (d1 > 0 ? d1 : 1);
    float *f = malloc((size_t)n * sizeof *f);
    double *d = malloc((size_t)n * sizeof *d);
    for (int64_t i = 0; i < n; i++) {
        f[i] = (float)th_uniform(&g_rng, lo, hi);
        d[i] = f[i];
    }
    int64_t shape[2] = {d0, d1};
    CHECK_OK(gguf_writer_add_tensor(w, name, CT_F32, d1 > 0 ? 2 : 1, shape, f));
    keep[(*nkeep)++] = f;
    return d;
}

static void free_w(tiny_w *tw, int n_layer)
{
    free(tw->tok);
    if (tw->out != tw->tok) free(tw->out);
    free(tw->onorm);
    for (int l = 0; l < n_layer; l++) {
        double *ps[] = {tw->attn_norm[l], tw->wq[l], tw->wk[l], tw->wv[l], tw->wo[l], tw->qn[l], tw->kn[l],
                        tw->pan[l], tw->ffn_norm[l], tw->wg[l], tw->wu[l], tw->wd[l], tw->pfn[l]};
        for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) free(ps[i]);
    }
}

/* skip: a tensor name to leave out (error-path tests); bad_shape: a tensor written with a wrong shape. */
static void write_model(const tiny_cfg *c, const char *path, tiny_w *tw, const char *skip, const char *bad_shape)
{
    gguf_writer *w = gguf_writer_new();
    float *keep[160];
    int nkeep = 0;
    char k[96], name[64];
    CHECK_OK(gguf_writer_set_str(w, "general.architecture", c->arch));
    CHECK_OK(gguf_writer_set_str(w, "general.name", "tiny"));
#define KEY(s) (snprintf(k, sizeof k, "%s.%s", c->arch, s), k)
    CHECK_OK(gguf_writer_set_u32(w, KEY("context_length"), (uint32_t)c->n_ctx));
    CHECK_OK(gguf_writer_set_u32(w, KEY("embedding_length"), (uint32_t)c->n_embd));
    CHECK_OK(gguf_writer_set_u32(w, KEY("block_count"), (uint32_t)c->n_layer));
    CHECK_OK(gguf_writer_set_u32(w, KEY("feed_forward_length"), (uint32_t)c->n_ff));
    CHECK_OK(gguf_writer_set_u32(w, KEY("attention.head_count"), (uint32_t)c->n_head));
    CHECK_OK(gguf_writer_set_u32(w, KEY("attention.head_count_kv"), (uint32_t)c->n_head_kv));
    CHECK_OK(gguf_writer_set_u32(w, KEY("attention.key_length"), (uint32_t)c->head_dim));
    CHECK_OK(gguf_writer_set_u32(w, KEY("attention.value_length"), (uint32_t)c->head_dim));
    CHECK_OK(gguf_writer_set_f32(w, KEY("attention.layer_norm_rms_epsilon"), (float)c->eps));
    CHECK_OK(gguf_writer_set_f32(w, KEY("rope.freq_base"), (float)c->rope_base));
    if (c->rope_factor > 0) {
        CHECK_OK(gguf_writer_set_str(w, KEY("rope.scaling.type"), "linear"));
        CHECK_OK(gguf_writer_set_f32(w, KEY("rope.scaling.factor"), (float)c->rope_factor));
    }
    if (c->gemma) CHECK_OK(gguf_writer_set_u32(w, KEY("attention.sliding_window"), (uint32_t)c->window));
#undef KEY
    const int64_t E = c->n_embd, F = c->n_ff, V = c->n_vocab, D = c->head_dim;
    const int64_t nq = c->n_head * D, nk = c->n_head_kv * D;
    double ws = 1.0 / sqrt((double)E);
#define W(field, nm, d0, d1, lo, hi)                                                                   \
    do {                                                                                               \
        if (skip && strcmp(skip, nm) == 0) break;                                                      \
        bool bad_ = bad_shape && strcmp(bad_shape, nm) == 0;                                            \
        field = add_w(w, keep, &nkeep, nm, bad_ ? (d0) + 1 : (d0), d1, lo, hi);                         \
    } while (0)
    W(tw->tok, "token_embd.weight", V, E, -1.0, 1.0);
    W(tw->onorm, "output_norm.weight", E, 0, 0.8, 1.2);
    if (c->gemma)
        tw->out = tw->tok;
    else
        W(tw->out, "output.weight", V, E, -ws * 2, ws * 2);
    for (int l = 0; l < c->n_layer; l++) {
#define LW(field, suf, d0, d1, lo, hi)                                       \
    do {                                                                     \
        snprintf(name, sizeof name, "blk.%d.%s.weight", l, suf);             \
        W(field[l], name, d0, d1, lo, hi);                                   \
    } while (0)
        LW(tw->attn_norm, "attn_norm", E, 0, 0.8, 1.2);
        LW(tw->wq, "attn_q", nq, E, -2 * ws, 2 * ws);
        LW(tw->wk, "attn_k", nk, E, -2 * ws, 2 * ws);
        LW(tw->wv, "attn_v", nk, E, -ws, ws);
        LW(tw->wo, "attn_output", E, nq, -ws, ws);
        LW(tw->ffn_norm, "ffn_norm", E, 0, 0.8, 1.2);
        LW(tw->wg, "ffn_gate", F, E, -2 * ws, 2 * ws);
        LW(tw->wu, "ffn_up", F, E, -2 * ws, 2 * ws);
        LW(tw->wd, "ffn_down", E, F, -ws, ws);
        if (c->gemma) {
            LW(tw->qn, "attn_q_norm", D, 0, 0.8, 1.2);
            LW(tw->kn, "attn_k_norm", D, 0, 0.8, 1.2);
            LW(tw->pan, "post_attention_norm", E, 0, 0.5, 1.0);
            LW(tw->pfn, "post_ffw_norm", E, 0, 0.5, 1.0);
        }
#undef LW
    }
#undef W
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_free(w);
    for (int i = 0; i < nkeep; i++) free(keep[i]);
}

/* ---- the naive double-precision forward pass ---- */

static void rms(const double *x, const double *w, int n, double eps, double *y)
{
    double ss = 0;
    for (int i = 0; i < n; i++) ss += x[i] * x[i];
    double r = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * r * w[i];
}

/* y[o] = sum_i w[o*in + i] x[i] (w row-major [out, in], as ct_linear's weight). */
static void matvec(const double *w, const double *x, int out, int in, double *y)
{
    for (int o = 0; o < out; o++) {
        double s = 0;
        for (int i = 0; i < in; i++) s += w[(size_t)o * in + i] * x[i];
        y[o] = s;
    }
}

static void rope(double *v, int D, double pos, double base, bool neox)
{
    for (int i = 0; i < D / 2; i++) {
        double th = pos * pow(base, -2.0 * i / D);
        int a = neox ? i : 2 * i, b = neox ? i + D / 2 : 2 * i + 1;
        double x0 = v[a], x1 = v[b];
        v[a] = x0 * cos(th) - x1 * sin(th);
        v[b] = x0 * sin(th) + x1 * cos(th);
    }
}

/* Logits of every position of toks[0..T): out [T, V]. */
static void naive_forward(const tiny_cfg *c, const tiny_w *tw, const int32_t *toks, int T, double *out)
{
    const int E = c->n_embd, F = c->n_ff, V = c->n_vocab, D = c->head_dim, H = c->n_head, Hk = c->n_head_kv;
    double *x = calloc((size_t)T * E, sizeof *x), *h = malloc(sizeof(double) * E);
    double *q = malloc(sizeof(double) * (size_t)T * H * D), *k = malloc(sizeof(double) * (size_t)T * Hk * D);
    double *v = malloc(sizeof(double) * (size_t)T * Hk * D), *o = malloc(sizeof(double) * H * D);
    double *a = malloc(sizeof(double) * E), *g = malloc(sizeof(double) * F), *u = malloc(sizeof(double) * F);
    double *sc = malloc(sizeof(double) * T);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < E; i++)
            x[t * E + i] = tw->tok[(size_t)toks[t] * E + i] * (c->gemma ? sqrt((double)E) : 1.0);
    for (int l = 0; l < c->n_layer; l++) {
        bool global = !c->gemma || (l + 1) % 6 == 0;
        double base = c->gemma && !global ? 10000.0 : c->rope_base;
        double pscale = !c->gemma || global ? (c->rope_factor > 0 ? 1.0 / c->rope_factor : 1.0) : 1.0;
        int window = global ? 0 : c->window;
        for (int t = 0; t < T; t++) {
            rms(x + t * E, tw->attn_norm[l], E, c->eps, h);
            matvec(tw->wq[l], h, H * D, E, q + (size_t)t * H * D);
            matvec(tw->wk[l], h, Hk * D, E, k + (size_t)t * Hk * D);
            matvec(tw->wv[l], h, Hk * D, E, v + (size_t)t * Hk * D);
            for (int hh = 0; hh < H; hh++) {
                double *qh = q + (size_t)t * H * D + hh * D;
                if (c->gemma) rms(qh, tw->qn[l], D, c->eps, qh);
                rope(qh, D, t * pscale, base, c->gemma);
            }
            for (int hh = 0; hh < Hk; hh++) {
                double *kh = k + (size_t)t * Hk * D + hh * D;
                if (c->gemma) rms(kh, tw->kn[l], D, c->eps, kh);
                rope(kh, D, t * pscale, base, c->gemma);
            }
        }
        for (int t = 0; t < T; t++) {
            for (int hh = 0; hh < H; hh++) {
                int kh = hh / (H / Hk);
                double mx = -INFINITY, den = 0;
                for (int j = 0; j <= t; j++) {
                    sc[j] = -INFINITY;
                    if (window > 0 && t - j >= window) continue;
                    double s = 0;
                    for (int d = 0; d < D; d++) s += q[(size_t)t * H * D + hh * D + d] * k[(size_t)j * Hk * D + kh * D + d];
                    sc[j] = s / sqrt((double)D);
                    if (sc[j] > mx) mx = sc[j];
                }
                for (int d = 0; d < D; d++) o[hh * D + d] = 0;
                for (int j = 0; j <= t; j++) {
                    if (sc[j] == -INFINITY) continue;
                    double p = exp(sc[j] - mx);
                    den += p;
                    for (int d = 0; d < D; d++) o[hh * D + d] += p * v[(size_t)j * Hk * D + kh * D + d];
                }
                for (int d = 0; d < D; d++) o[hh * D + d] /= den;
            }
            matvec(tw->wo[l], o, E, H * D, a);
            if (c->gemma) rms(a, tw->pan[l], E, c->eps, a);
            for (int i = 0; i < E; i++) x[t * E + i] += a[i];
        }
        for (int t = 0; t < T; t++) {
            rms(x + t * E, tw->ffn_norm[l], E, c->eps, h);
            matvec(tw->wg[l], h, F, E, g);
            matvec(tw->wu[l], h, F, E, u);
            for (int i = 0; i < F; i++) {
                double z = g[i], act;
                if (c->gemma)
                    act = 0.5 * z * (1 + tanh(sqrt(2 / M_PI) * (z + 0.044715 * z * z * z)));
                else
                    act = z / (1 + exp(-z));
                g[i] = act * u[i];
            }
            matvec(tw->wd[l], g, E, F, a);
            if (c->gemma) rms(a, tw->pfn[l], E, c->eps, a);
            for (int i = 0; i < E; i++) x[t * E + i] += a[i];
        }
    }
    for (int t = 0; t < T; t++) {
        rms(x + t * E, tw->onorm, E, c->eps, h);
        matvec(tw->out, h, V, E, out + (size_t)t * V);
    }
    free(x); free(h); free(q); free(k); free(v); free(o); free(a); free(g); free(u); free(sc);
}

/* max |got - want| / max |want| over n. */
static double rel_err(const float *got, const double *want, int n)
{
    double md = 0, mw = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs(got[i] - want[i]);
        if (!(d <= md)) md = d; /* NaN propagates as a failure */
        if (fabs(want[i]) > mw) mw = fabs(want[i]);
    }
    return md / (mw > 0 ? mw : 1);
}

static const tiny_cfg g_llama = {"llama", 96, 32, 2, 48, 4, 2, 8, 64, 1e-5, 10000.0, 0, 0, false};
static const tiny_cfg g_gemma = {"gemma3", 80, 24, 6, 40, 2, 1, 16, 64, 1e-6, 1e6, 0, 3, true};
static const int32_t g_toks[9] = {1, 17, 42, 5, 63, 8, 77, 30, 2};
#define NT 9

static float *host_logits(ct_tensor *t, int rows, int V)
{
    float *f = malloc(sizeof(float) * (size_t)rows * V);
    CHECK(ct_tensor_dim(t, 0) == rows && ct_tensor_dim(t, 1) == V);
    CHECK_OK(ct_tensor_to_host(t, f, sizeof(float) * (size_t)rows * V));
    return f;
}

static void check_model(const tiny_cfg *c, const char *fname)
{
    char path[512];
    tiny_w tw = {0};
    write_model(c, th_tmp_path(path, sizeof path, fname), &tw, NULL, NULL);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) {
        free_w(&tw, c->n_layer);
        return;
    }
    CHECK(m->hp.n_vocab == c->n_vocab && m->hp.n_layer == c->n_layer && m->hp.head_dim == c->head_dim);
    CHECK(m->tied_output == c->gemma);
    const int V = c->n_vocab;
    double *want = malloc(sizeof(double) * NT * V);
    naive_forward(c, &tw, g_toks, NT, want);

    /* All positions in one batch, f32 cache: every row against the naive pass.
     * Tolerance: f32 accumulation over <= 48-term dots through a few layers; 1e-4 of the logit range. */
    llm_kv_cache kv;
    CHECK_OK(llm_kv_cache_init(&kv, m, 32, CT_F32));
    ct_tensor *all = NULL;
    CHECK_OK(llm_forward(m, &kv, g_toks, NT, true, &all));
    if (all) {
        float *f = host_logits(all, NT, V);
        double worst = 0;
        for (int t = 0; t < NT; t++) {
            double e = rel_err(f + t * V, want + t * V, V);
            if (!(e <= worst)) worst = e;
            CHECK_MSG(e < 1e-4, "%s: position %d: relative error %g", c->arch, t, e);
        }
        fprintf(stderr, "  %s: worst relative error vs the naive pass %.2g\n", c->arch, worst);
        free(f);
    }
    CHECK(kv.n_past == NT);
    ct_tensor_free(all);

    /* Prefill of 5 then token-by-token decode of the rest against the same rows. */
    llm_kv_cache_clear(&kv);
    ct_tensor *lg = NULL;
    CHECK_OK(llm_forward(m, &kv, g_toks, 5, false, &lg));
    if (lg) {
        float *f = host_logits(lg, 1, V);
        CHECK_MSG(rel_err(f, want + 4 * V, V) < 1e-4, "%s: prefill last", c->arch);
        free(f);
    }
    ct_tensor_free(lg);
    for (int t = 5; t < NT; t++) {
        lg = NULL;
        CHECK_OK(llm_forward(m, &kv, g_toks + t, 1, false, &lg));
        if (!lg) break;
        float *f = host_logits(lg, 1, V);
        double e = rel_err(f, want + (size_t)t * V, V);
        CHECK_MSG(e < 1e-4, "%s: decode step %d: relative error %g", c->arch, t, e);
        free(f);
        ct_tensor_free(lg);
    }
    llm_kv_cache_free(&kv);

    /* f16 cache (the default): token by token; keys/values rounded to 11 bits -> ~1e-3 of the range. */
    CHECK_OK(llm_kv_cache_init(&kv, m, NT, CT_F16));
    for (int t = 0; t < NT; t++) {
        lg = NULL;
        CHECK_OK(llm_forward(m, &kv, g_toks + t, 1, false, &lg));
        if (!lg) break;
        float *f = host_logits(lg, 1, V);
        double e = rel_err(f, want + (size_t)t * V, V);
        CHECK_MSG(e < 5e-3, "%s: f16 cache step %d: relative error %g", c->arch, t, e);
        free(f);
        ct_tensor_free(lg);
    }
    /* The context is now full: one more token is a clear error, and the cache is unchanged. */
    lg = NULL;
    CHECK_STATUS(llm_forward(m, &kv, g_toks, 1, false, &lg), CT_ERR_RANGE);
    CHECK(lg == NULL && kv.n_past == NT);
    llm_kv_cache_free(&kv);

    free(want);
    free_w(&tw, c->n_layer);
    llm_model_free(m);
}

static void test_tiny_llama(void) { check_model(&g_llama, "tiny_llama.gguf"); }
static void test_tiny_gemma3(void) { check_model(&g_gemma, "tiny_gemma3.gguf"); }

static void test_rope_linear_scaling(void)
{
    tiny_cfg c = g_llama;
    c.rope_factor = 4.0;
    check_model(&c, "tiny_llama_ropescale.gguf");
}

/* The larger Gemma 3 models scale RoPE linearly (factor 8) on their global layers
 * only; the sliding-window layers keep their own base unscaled. The reference applies
 * the factor to the one global layer of six, so scaling every layer fails here. */
static void test_gemma3_rope_linear_scaling(void)
{
    tiny_cfg c = g_gemma;
    c.rope_factor = 8.0;
    check_model(&c, "tiny_gemma3_ropescale.gguf");
}

/* The session API as the commands use it: prompt eval, truncation to a shared
 * prefix (chat), context limits, and the errors of a model without a tokenizer. */
static void test_session(void)
{
    char path[512];
    tiny_w tw = {0};
    const tiny_cfg *c = &g_llama;
    write_model(c, th_tmp_path(path, sizeof path, "tiny_llama_session.gguf"), &tw, NULL, NULL);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) {
        free_w(&tw, c->n_layer);
        return;
    }
    const int V = c->n_vocab;
    double *want = malloc(sizeof(double) * NT * V);
    naive_forward(c, &tw, g_toks, NT, want);
    llm_session s;
    CHECK_OK(llm_session_init(&s, m, 16, CT_F32, NULL));
    llm_gen_stats gs;
    CHECK_STATUS(llm_session_generate(&s, 4, NULL, NULL, NULL, &gs), CT_ERR_FORMAT); /* no tokenizer */
    CHECK_OK(llm_session_eval(&s, g_toks, NT));
    CHECK(llm_session_n_past(&s) == NT && memcmp(s.hist, g_toks, sizeof g_toks) == 0);
    CHECK(rel_err(s.logits, want + (size_t)(NT - 1) * V, V) < 1e-4);
    /* Keep 5, evaluate the rest again: same logits as one pass. */
    llm_session_truncate(&s, 5);
    CHECK(llm_session_n_past(&s) == 5 && !s.have_logits);
    CHECK_OK(llm_session_eval(&s, g_toks + 5, NT - 5));
    CHECK(rel_err(s.logits, want + (size_t)(NT - 1) * V, V) < 1e-4);
    /* 9 + 8 > 16: refused with the context named, nothing changes. */
    CHECK_STATUS(llm_session_eval(&s, g_toks, 8), CT_ERR_RANGE);
    CHECK(strstr(ct_last_error(), "16") != NULL && llm_session_n_past(&s) == NT);
    CHECK_OK(llm_session_eval(&s, g_toks, 0));
    llm_session_reset(&s);
    CHECK(llm_session_n_past(&s) == 0);
    llm_session_free(&s);
    llm_session_free(&s); /* twice is harmless */
    free(want);
    free_w(&tw, c->n_layer);
    llm_model_free(m);
}

static void test_errors(void)
{
    char path[512];
    llm_model *m = NULL;
    CHECK_STATUS(llm_model_load("/nonexistent/model.gguf", NULL, NULL, &m), CT_ERR_IO);
    CHECK(m == NULL);
    CHECK_STATUS(llm_model_load(NULL, NULL, NULL, &m), CT_ERR_INVALID_ARG);

    /* Not a GGUF file. */
    th_tmp_path(path, sizeof path, "tiny_not_gguf.bin");
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fputs("this is not a model file, just text that is long enough to be read", fp);
        fclose(fp);
    }
    CHECK_STATUS(llm_model_load(path, NULL, NULL, &m), CT_ERR_FORMAT);

    tiny_w tw = {0};
    tiny_cfg c = g_llama;
    c.arch = "mamba";
    write_model(&c, th_tmp_path(path, sizeof path, "tiny_mamba.gguf"), &tw, NULL, NULL);
    free_w(&tw, c.n_layer);
    CHECK_STATUS(llm_model_load(path, NULL, NULL, &m), CT_ERR_UNSUPPORTED);
    CHECK(strstr(ct_last_error(), "mamba") != NULL);

    memset(&tw, 0, sizeof tw);
    write_model(&g_llama, th_tmp_path(path, sizeof path, "tiny_missing.gguf"), &tw, "blk.1.ffn_up.weight", NULL);
    free_w(&tw, g_llama.n_layer);
    CHECK_STATUS(llm_model_load(path, NULL, NULL, &m), CT_ERR_FORMAT);
    CHECK(strstr(ct_last_error(), "blk.1.ffn_up.weight") != NULL);

    memset(&tw, 0, sizeof tw);
    write_model(&g_llama, th_tmp_path(path, sizeof path, "tiny_badshape.gguf"), &tw, NULL, "blk.0.attn_k.weight");
    free_w(&tw, g_llama.n_layer);
    CHECK_STATUS(llm_model_load(path, NULL, NULL, &m), CT_ERR_FORMAT);
    CHECK(strstr(ct_last_error(), "blk.0.attn_k.weight") != NULL);

    /* Forward-pass argument errors. */
    memset(&tw, 0, sizeof tw);
    write_model(&g_llama, th_tmp_path(path, sizeof path, "tiny_llama_err.gguf"), &tw, NULL, NULL);
    free_w(&tw, g_llama.n_layer);
    CHECK_OK(llm_model_load(path, NULL, NULL, &m));
    if (!m) return;
    llm_kv_cache kv;
    CHECK_STATUS(llm_kv_cache_init(&kv, m, 0, CT_F16), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_kv_cache_init(&kv, m, 8, CT_I32), CT_ERR_DTYPE);
    CHECK_OK(llm_kv_cache_init(&kv, m, 8, CT_F16));
    ct_tensor *lg = NULL;
    int32_t bad[2] = {3, g_llama.n_vocab};
    CHECK_STATUS(llm_forward(m, &kv, bad, 2, false, &lg), CT_ERR_RANGE);
    int32_t neg = -1;
    CHECK_STATUS(llm_forward(m, &kv, &neg, 1, false, &lg), CT_ERR_RANGE);
    CHECK_STATUS(llm_forward(m, &kv, g_toks, 0, false, &lg), CT_ERR_INVALID_ARG);
    CHECK_STATUS(llm_forward(m, &kv, g_toks, NT, false, &lg), CT_ERR_RANGE); /* 9 > 8 */
    CHECK(kv.n_past == 0 && lg == NULL);
    llm_kv_cache_free(&kv);
    llm_model_free(m);
}

/* One metadata edit of a valid model file: drop `drop`, then set key to a value of
 * type kind ('u' u32, 'f' f32, 's' string; 0: nothing). */
typedef struct md_edit {
    const char *drop, *key;
    char kind;
    double num;
    const char *str;
    ct_status want;      /* CT_OK: loads */
    const char *in_msg;  /* must appear in the error message */
} md_edit;

static void rewrite_model(const char *src, const char *dst, const md_edit *e)
{
    gguf_file *f = NULL;
    CHECK_OK(gguf_open(src, &f));
    if (!f) return;
    gguf_writer *w = gguf_writer_new();
    for (int64_t k = 0; k < gguf_kv_count(f); k++) {
        const char *key = gguf_kv_key(f, k);
        if ((e->drop && !strcmp(key, e->drop)) || (e->key && !strcmp(key, e->key))) continue;
        CHECK_OK(gguf_writer_copy_kv(w, f, k));
    }
    if (e->kind == 'u') CHECK_OK(gguf_writer_set_u32(w, e->key, (uint32_t)e->num));
    if (e->kind == 'f') CHECK_OK(gguf_writer_set_f32(w, e->key, (float)e->num));
    if (e->kind == 's') CHECK_OK(gguf_writer_set_str(w, e->key, e->str));
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        CHECK_OK(gguf_writer_add_tensor_raw(w, t->name, t->ggml_type, t->n_dims, t->ne, t->data, t->size));
    }
    CHECK_OK(gguf_writer_write(w, dst));
    gguf_writer_free(w);
    gguf_close(f);
}

/* Every hyper-parameter check of the loader: a clear error naming the problem. */
static void test_bad_metadata(void)
{
    static const md_edit edits[] = {
        {"general.architecture", NULL, 0, 0, NULL, CT_ERR_FORMAT, "general.architecture"},
        {"llama.block_count", NULL, 0, 0, NULL, CT_ERR_FORMAT, "llama.block_count"},
        {NULL, "llama.block_count", 'u', 1000, NULL, CT_ERR_FORMAT, "block_count"},
        {NULL, "llama.embedding_length", 'u', 0, NULL, CT_ERR_FORMAT, "embedding_length"},
        {NULL, "llama.attention.head_count_kv", 'u', 3, NULL, CT_ERR_FORMAT, "KV heads"},
        {NULL, "llama.rope.dimension_count", 'u', 7, NULL, CT_ERR_FORMAT, "rope.dimension_count"},
        {NULL, "llama.attention.layer_norm_rms_epsilon", 'f', 0, NULL, CT_ERR_FORMAT, "epsilon"},
        {NULL, "llama.rope.freq_base", 'f', NAN, NULL, CT_ERR_FORMAT, "rope.freq_base"},
        {NULL, "llama.rope.freq_base", 's', 0, "10000", CT_ERR_FORMAT, "rope.freq_base"},
        {NULL, "llama.rope.scaling.type", 's', 0, "yarn", CT_ERR_UNSUPPORTED, "yarn"},
        {NULL, "llama.rope.scaling.type", 's', 0, "none", CT_OK, NULL},
        {NULL, "llama.rope.scale_linear", 'f', -2, NULL, CT_ERR_FORMAT, "rope scaling factor"},
        {"general.name", NULL, 0, 0, NULL, CT_OK, NULL},
    };
    char src[512], dst[512];
    tiny_w tw = {0};
    write_model(&g_llama, th_tmp_path(src, sizeof src, "tiny_md_src.gguf"), &tw, NULL, NULL);
    free_w(&tw, g_llama.n_layer);
    for (size_t i = 0; i < sizeof edits / sizeof edits[0]; i++) {
        const md_edit *e = &edits[i];
        rewrite_model(src, th_tmp_path(dst, sizeof dst, "tiny_md.gguf"), e);
        llm_model *m = NULL;
        ct_status st = llm_model_load(dst, NULL, NULL, &m);
        CHECK_MSG(st == e->want, "edit %zu (%s%s): %s, want %s (%s)", i, e->drop ? "drop " : "",
                  e->drop ? e->drop : e->key, ct_status_name(st), ct_status_name(e->want), ct_last_error());
        if (e->in_msg)
            CHECK_MSG(strstr(ct_last_error(), e->in_msg) != NULL, "edit %zu: message \"%s\" lacks \"%s\"", i,
                      ct_last_error(), e->in_msg);
        if (m && e->drop && !strcmp(e->drop, "general.name")) /* unnamed: the file's name */
            CHECK_MSG(strcmp(m->name, "tiny_md.gguf") == 0, "name %s", m->name);
        CHECK((st == CT_OK) == (m != NULL));
        llm_model_free(m);
        remove(dst);
    }
    /* The legacy key rope.scale_linear sets the same linear scaling. */
    md_edit legacy = {NULL, "llama.rope.scale_linear", 'f', 4, NULL, CT_OK, NULL};
    rewrite_model(src, dst, &legacy);
    llm_model *m = NULL;
    CHECK_OK(llm_model_load(dst, NULL, NULL, &m));
    if (m) CHECK_NEAR(m->hp.rope_scale, 0.25, 1e-12);
    llm_model_free(m);
    remove(dst);
    remove(src);
}

int main(void)
{
    RUN(test_tiny_llama);
    RUN(test_tiny_gemma3);
    RUN(test_rope_linear_scaling);
    RUN(test_gemma3_rope_linear_scaling);
    RUN(test_session);
    RUN(test_errors);
    RUN(test_bad_metadata);
    return th_finish();
}
