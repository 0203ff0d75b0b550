/* The reference quantizers (src/quant) against llama.cpp's own files in
 * ../shared/refdata/mini-a: rows of the F16 model requantized by us must be
 * byte-identical to llama-quantize's Q8_0, Q4_K and Q6_K rows. Its own program so
 * that a missing ../shared shows as "skipped" in ctest's summary. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "quant/quant.h"
#include "quant_util.h"

/* ================= (a) bit-exactness against llama.cpp's files ================= */

/* A minimal GGUF tensor locator (independent of src/formats): header, KV pairs skipped
 * except general.alignment, tensor infos. Every read is bounds-checked. */
typedef struct gg_tensor {
    char name[128];
    uint32_t type;
    uint32_t nd;
    uint64_t ne[4];
    uint64_t off;
} gg_tensor;

typedef struct gg_file {
    const uint8_t *map;
    size_t size, pos, data;
    uint64_t n;
    gg_tensor *t;
    int bad;
} gg_file;

static uint64_t gg_u(gg_file *f, int bytes)
{
    if (f->bad || f->pos + (size_t)bytes > f->size) {
        f->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, f->map + f->pos, (size_t)bytes); /* little-endian host */
    f->pos += (size_t)bytes;
    return v;
}

static void gg_skip(gg_file *f, uint64_t bytes)
{
    if (f->bad || bytes > f->size - f->pos) f->bad = 1;
    else f->pos += (size_t)bytes;
}

/* Skips one value of GGUF type `vt`; returns its integer value for scalar ints. */
static uint64_t gg_skip_value(gg_file *f, uint32_t vt, int depth)
{
    static const int sizes[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (vt == 8) {
        gg_skip(f, gg_u(f, 8));
        return 0;
    }
    if (vt == 9 && depth < 2) {
        uint32_t et = (uint32_t)gg_u(f, 4);
        uint64_t cnt = gg_u(f, 8);
        if (et < 13 && et != 8 && et != 9) gg_skip(f, cnt * (uint64_t)sizes[et]);
        else
            for (uint64_t i = 0; i < cnt && !f->bad; i++) gg_skip_value(f, et, depth + 1);
        return 0;
    }
    if (vt >= 13 || vt == 9) {
        f->bad = 1;
        return 0;
    }
    return gg_u(f, sizes[vt]);
}

static void gg_close(gg_file *f)
{
    if (f->map) munmap((void *)f->map, f->size);
    free(f->t);
    memset(f, 0, sizeof *f);
}

static int gg_open(gg_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size < 24) {
        close(fd);
        return 0;
    }
    f->size = (size_t)st.st_size;
    void *m = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) return 0;
    f->map = m;
    if (memcmp(f->map, "GGUF", 4) != 0) goto fail;
    f->pos = 4;
    uint32_t version = (uint32_t)gg_u(f, 4);
    f->n = gg_u(f, 8);
    uint64_t n_kv = gg_u(f, 8);
    if (version < 2 || f->n > 100000) goto fail;
    uint64_t align = 32;
    for (uint64_t i = 0; i < n_kv && !f->bad; i++) {
        uint64_t klen = gg_u(f, 8);
        if (klen > f->size - f->pos) goto fail;
        const char *key = (const char *)f->map + f->pos;
        int is_align = klen == 17 && !memcmp(key, "general.alignment", 17);
        gg_skip(f, klen);
        uint32_t vt = (uint32_t)gg_u(f, 4);
        uint64_t v = gg_skip_value(f, vt, 0);
        if (is_align && v) align = v;
    }
    f->t = calloc(f->n ? f->n : 1, sizeof *f->t);
    for (uint64_t i = 0; i < f->n && !f->bad; i++) {
        gg_tensor *t = &f->t[i];
        uint64_t nlen = gg_u(f, 8);
        if (nlen >= sizeof t->name || nlen > f->size - f->pos) goto fail;
        memcpy(t->name, f->map + f->pos, nlen);
        f->pos += nlen;
        t->nd = (uint32_t)gg_u(f, 4);
        if (t->nd > 4) goto fail;
        for (uint32_t d = 0; d < 4; d++) t->ne[d] = d < t->nd ? gg_u(f, 8) : 1;
        t->type = (uint32_t)gg_u(f, 4);
        t->off = gg_u(f, 8);
    }
    if (f->bad) goto fail;
    f->data = (f->pos + align - 1) / align * align;
    return 1;
fail:
    gg_close(f);
    return 0;
}

static const gg_tensor *gg_find(const gg_file *f, const char *name)
{
    for (uint64_t i = 0; i < f->n; i++)
        if (!strcmp(f->t[i].name, name)) return &f->t[i];
    return NULL;
}

/* Pointer to row r of tensor t, or NULL if it falls outside the file. */
static const uint8_t *gg_row(const gg_file *f, const gg_tensor *t, ct_dtype dt, uint64_t r)
{
    size_t rb = ct_dtype_row_bytes(dt, (int64_t)t->ne[0]);
    size_t at = f->data + (size_t)t->off + (size_t)r * rb;
    return at + rb <= f->size ? f->map + at : NULL;
}

/* Requantizes sampled rows of every `want`-typed tensor of qf from the F16 file and
 * compares bytes. All rows when CTORCH_QUANT_FULL is set (slow under ASan). */
static void check_requant(const gg_file *src, const gg_file *qf, const char *qname, int *checked)
{
    int full = getenv("CTORCH_QUANT_FULL") != NULL;
    for (uint64_t i = 0; i < qf->n; i++) {
        const gg_tensor *qt = &qf->t[i];
        int dt = dtype_of_ggml(qt->type);
        if (dt != CT_Q8_0 && dt != CT_Q4_K && dt != CT_Q6_K) continue;
        const gg_tensor *st = gg_find(src, qt->name);
        CHECK_MSG(st && st->type == 1 && st->ne[0] == qt->ne[0], "%s: %s has no matching F16 tensor", qname, qt->name);
        if (!st || st->type != 1 || st->ne[0] != qt->ne[0]) continue;
        int64_t n = (int64_t)qt->ne[0];
        uint64_t rows = qt->ne[1] * qt->ne[2] * qt->ne[3];
        uint64_t step = full || rows <= 24 ? 1 : rows / 24;
        float *x = malloc(sizeof(float) * (size_t)n);
        uint8_t *out = malloc(ct_dtype_row_bytes((ct_dtype)dt, n));
        int bad_rows = 0;
        for (uint64_t r = 0; r < rows; r += (r + 1 == rows || r + step < rows) ? step : rows - 1 - r) {
            const uint8_t *h = gg_row(src, st, CT_F16, r), *want = gg_row(qf, qt, (ct_dtype)dt, r);
            CHECK_MSG(h && want, "%s: %s row %llu outside the file", qname, qt->name, (unsigned long long)r);
            if (!h || !want) break;
            CHECK_OK(quant_dequantize_row(CT_F16, h, x, n));
            CHECK_OK(quant_quantize_row((ct_dtype)dt, x, out, n));
            size_t rb = ct_dtype_row_bytes((ct_dtype)dt, n);
            if (memcmp(out, want, rb)) {
                size_t k = 0;
                while (out[k] == want[k]) k++;
                if (bad_rows++ < 3)
                    CHECK_MSG(0, "%s %s (%s) row %llu: byte %zu (block %zu) is %u, llama.cpp wrote %u", qname,
                              qt->name, ct_dtype_name((ct_dtype)dt), (unsigned long long)r, k,
                              k / ct_dtype_block_bytes((ct_dtype)dt), out[k], want[k]);
                else
                    th_checks_failed++;
            }
            checked[dt]++;
            if (r + 1 == rows) break;
        }
        free(x);
        free(out);
    }
}

static void test_llama_cpp_bitexact(void)
{
    const char *ref = th_refdata();
    if (!ref) {
        th_skip("no refdata (CTORCH_REFDATA)");
        return;
    }
    char p16[512], p8[512], p4[512];
    snprintf(p16, sizeof p16, "%s/mini-a/mini-a-f16.gguf", ref);
    snprintf(p8, sizeof p8, "%s/mini-a/mini-a-q8_0.gguf", ref);
    snprintf(p4, sizeof p4, "%s/mini-a/mini-a-q4_k_m.gguf", ref);
    gg_file f16, f8, f4;
    if (!gg_open(&f16, p16)) {
        th_skip("cannot open %s", p16);
        return;
    }
    int checked[CT_DTYPE_COUNT] = {0};
    if (gg_open(&f8, p8)) {
        check_requant(&f16, &f8, "q8_0 file", checked);
        gg_close(&f8);
    }
    if (gg_open(&f4, p4)) {
        check_requant(&f16, &f4, "q4_k_m file", checked);
        gg_close(&f4);
    }
    gg_close(&f16);
    fprintf(stderr, "  requantized rows compared: q8_0 %d, q4_k %d, q6_k %d\n", checked[CT_Q8_0], checked[CT_Q4_K],
            checked[CT_Q6_K]);
    CHECK(checked[CT_Q8_0] > 0 && checked[CT_Q4_K] > 0 && checked[CT_Q6_K] > 0);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_llama_cpp_bitexact);
    return th_finish();
}
