/* `ctorch info MODEL`: a GGUF file's metadata, tensor table and a summary of
 * the architecture, read without loading any weights. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "formats/gguf.h"
#include "opts.h"

/* Appends printf output to a fixed buffer, silently truncating. */
typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...)
{
    if (b->n + 1 >= b->cap) return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    va_end(ap);
    if (k > 0) b->n += (size_t)k < b->cap - b->n ? (size_t)k : b->cap - b->n - 1;
}

/* Quoted and escaped (cli_escape, plus \"), at most `max` bytes of it shown. */
static void sb_string(sbuf *b, const uint8_t *s, uint64_t len, size_t max)
{
    sb_printf(b, "\"");
    size_t n = len < max ? (size_t)len : max;
    char esc[8 * 64 + 1];
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && j - i < 64 && s[j] != '"') j++;
        sb_printf(b, "%s", cli_escape((const char *)s + i, j - i, esc, sizeof esc));
        if (j < n && s[j] == '"') sb_printf(b, "\\\""), j++;
        i = j;
    }
    sb_printf(b, len > max ? "\"...(%" PRIu64 " bytes)" : "\"", len);
}

/* Fewest digits that read back as the same f32/f64 (1e-05 rather than 9.99999975e-06). */
static const char *shortest(double d, bool is_f32, char *buf)
{
    for (int prec = 6; prec <= 17; prec++) {
        snprintf(buf, 40, "%.*g", prec, d);
        double back = strtod(buf, NULL);
        if (is_f32 ? (float)back == (float)d : back == d) break;
    }
    return buf;
}

static void sb_value(sbuf *b, const gguf_file *f, const gguf_value *v, int depth)
{
    double d;
    int64_t i;
    switch (v->type) {
    case GGUF_TYPE_STRING: sb_string(b, v->ptr, v->n, 60); return;
    case GGUF_TYPE_BOOL: sb_printf(b, "%s", v->ptr[0] ? "true" : "false"); return;
    case GGUF_TYPE_FLOAT32:
    case GGUF_TYPE_FLOAT64:
        if (gguf_value_as_f64(v, &d)) sb_printf(b, "%s", shortest(d, v->type == GGUF_TYPE_FLOAT32, (char[40]){0}));
        return;
    case GGUF_TYPE_UINT64: {
        uint64_t u;
        memcpy(&u, v->ptr, 8);
        sb_printf(b, "%" PRIu64, u);
        return;
    }
    case GGUF_TYPE_ARRAY: {
        sb_printf(b, "%s[%" PRIu64 "] [", gguf_type_name(v->elem), v->n);
        uint64_t show = depth ? 3 : 5;
        for (uint64_t k = 0; k < v->n && k < show; k++) {
            gguf_value e;
            if (gguf_value_elem(f, v, k, &e) != CT_OK) break;
            sb_printf(b, k ? ", " : "");
            sb_value(b, f, &e, depth + 1);
        }
        sb_printf(b, v->n > show ? ", ...]" : "]");
        return;
    }
    default:
        if (gguf_value_as_i64(v, &i)) sb_printf(b, "%" PRId64, i);
        return;
    }
}

static void print_metadata(const gguf_file *f)
{
    printf("\nmetadata (%" PRId64 " keys):\n", gguf_kv_count(f));
    for (int64_t k = 0; k < gguf_kv_count(f); k++) {
        gguf_value v;
        char line[512];
        sbuf b = {line, 0, sizeof line};
        line[0] = 0;
        if (gguf_kv_value(f, k, &v) == CT_OK) sb_value(&b, f, &v, 0);
        const char *key = gguf_kv_key(f, k);
        char ekey[4 * 256 + 1];
        printf("  %-44s %-4s %s\n", cli_escape(key, strlen(key), ekey, sizeof ekey),
               gguf_type_name(gguf_kv_type(f, k)), line);
    }
}

static void shape_text(const gguf_tensor *t, char *buf, size_t len)
{
    sbuf b = {buf, 0, len};
    buf[0] = 0;
    sb_printf(&b, "[");
    for (int d = t->n_dims - 1; d >= 0; d--) sb_printf(&b, "%" PRId64 "%s", t->ne[d], d ? ", " : "");
    sb_printf(&b, "]");
}

static void print_tensors(const gguf_file *f, int64_t *params, uint64_t *bytes)
{
    printf("\ntensors (%" PRId64 "; shapes row-major, last dim contiguous):\n", gguf_tensor_count(f));
    printf("  %-40s %-8s %-20s %12s\n", "name", "type", "shape", "bytes");
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        char shape[96];
        shape_text(t, shape, sizeof shape);
        char ename[4 * 64 + 1];
        printf("  %-40s %-8s %-20s %12zu%s\n", cli_escape(t->name, strlen(t->name), ename, sizeof ename),
               gguf_ggml_type_name(t->ggml_type), shape, t->size,
               t->dtype == CT_DTYPE_COUNT ? "  (unsupported by ctorch)" : "");
        *params += gguf_tensor_numel(t);
        *bytes += t->size;
    }
}

/* "<arch>.<suffix>" as text, "-" when absent. */
static void arch_field(const gguf_file *f, const char *arch, const char *suffix, char *out, size_t len)
{
    char key[256];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int64_t k = gguf_find_key(f, key);
    gguf_value v;
    sbuf b = {out, 0, len};
    out[0] = 0;
    if (k < 0 || gguf_kv_value(f, k, &v) != CT_OK) sb_printf(&b, "-");
    else sb_value(&b, f, &v, 1);
}

static const char *file_type_name(uint32_t ft)
{
    /* llama.cpp's llama_ftype numbering ("mostly" = the 2-D weights) */
    static const struct {
        uint32_t id;
        const char *name;
    } names[] = {{0, "F32"},     {1, "F16"},      {2, "Q4_0"},     {3, "Q4_1"},     {7, "Q8_0"},
                 {8, "Q5_0"},    {9, "Q5_1"},     {10, "Q2_K"},    {11, "Q3_K_S"},  {12, "Q3_K_M"},
                 {13, "Q3_K_L"}, {14, "Q4_K_S"},  {15, "Q4_K_M"},  {16, "Q5_K_S"},  {17, "Q5_K_M"},
                 {18, "Q6_K"},   {19, "IQ2_XXS"}, {20, "IQ2_XS"},  {21, "Q2_K_S"},  {22, "IQ3_XS"},
                 {23, "IQ3_XXS"}, {24, "IQ1_S"},  {25, "IQ4_NL"},  {26, "IQ3_S"},   {27, "IQ3_M"},
                 {28, "IQ2_S"},  {29, "IQ2_M"},   {30, "IQ4_XS"},  {31, "IQ1_M"},   {32, "BF16"},
                 {36, "TQ1_0"},  {37, "TQ2_0"},   {38, "MXFP4_MOE"}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].id == ft) return names[i].name;
    return "unknown";
}

static void print_summary(const gguf_file *f, int64_t params, uint64_t bytes)
{
    const char *arch = NULL;
    size_t alen = 0;
    char archz[512] = "-";
    if (gguf_get_str(f, "general.architecture", &arch, &alen) == CT_OK)
        cli_escape(arch, alen < 100 ? alen : 100, archz, sizeof archz);
    printf("\nsummary:\n  %-22s %s\n", "architecture", archz);
    static const struct {
        const char *label, *suffix;
    } fields[] = {{"layers", "block_count"},
                  {"n_embd", "embedding_length"},
                  {"heads", "attention.head_count"},
                  {"kv heads", "attention.head_count_kv"},
                  {"n_ff", "feed_forward_length"},
                  {"context", "context_length"},
                  {"rope base", "rope.freq_base"},
                  {"rope dims", "rope.dimension_count"},
                  {"rms norm eps", "attention.layer_norm_rms_epsilon"}};
    char val[256];
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) {
        arch_field(f, archz, fields[i].suffix, val, sizeof val);
        printf("  %-22s %s\n", fields[i].label, val);
    }
    uint64_t n_vocab = 0;
    gguf_type et;
    if (gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n_vocab, NULL) == CT_OK)
        printf("  %-22s %" PRIu64 "\n", "vocab", n_vocab);
    else {
        arch_field(f, archz, "vocab_size", val, sizeof val);
        printf("  %-22s %s\n", "vocab", val);
    }
    uint32_t ft;
    if (gguf_get_u32(f, "general.file_type", &ft) == CT_OK)
        printf("  %-22s %u (%s)\n", "file type", ft, file_type_name(ft));
    else
        printf("  %-22s -\n", "file type");
    printf("  %-22s %" PRId64 " (%.2f M)\n", "parameters", params, (double)params / 1e6);
    printf("  %-22s %" PRIu64 " bytes (%.2f MiB), %.2f bits/param\n", "tensor data", bytes,
           (double)bytes / (1024.0 * 1024.0), params ? 8.0 * (double)bytes / (double)params : 0.0);
}

int cmd_info(int argc, char **argv)
{
    const char *path = NULL, *pos[1] = {0};
    int npos = 0;
    const cli_opt opts[] = {{"-m|--model", "FILE", CLI_STRING, &path, 0, 0, NULL, "the GGUF file (or give it bare)"}};
    const cli_spec spec = {"info", "info [-m] MODEL.gguf", NULL, opts, CLI_N(opts), 1};
    int prc = cli_parse(&spec, argc, argv, pos, &npos);
    if (prc >= 0) return prc;
    if (path && npos) return cli_usage_error("info", "two models given ('%s' and '%s'): give one", path, pos[0]);
    if (!path) path = pos[0];
    if (!path) return cli_usage_error("info", "no model given: ctorch info MODEL.gguf");
    if (!cli_check_model_path("info", "model", path)) return 1;
    gguf_file *f = NULL;
    ct_status s = gguf_open(path, &f);
    if (s != CT_OK) {
        fprintf(stderr, "ctorch info: %s\n", ct_last_error());
        return 1;
    }
    printf("file: %s\n  %zu bytes, GGUF v%u, alignment %u, tensor data at offset %" PRIu64 "\n", path,
           gguf_file_size(f), gguf_version(f), gguf_alignment(f), gguf_data_offset(f));
    int64_t params = 0;
    uint64_t bytes = 0;
    print_metadata(f);
    print_tensors(f, &params, &bytes);
    print_summary(f, params, bytes);
    gguf_close(f);
    return 0;
}
