/* GGUF reader on hand-crafted hostile input: every malformed header, value
 * or tensor table must fail with CT_ERR_FORMAT (or CT_ERR_IO for files) and a
 * message naming the input, the field and a byte offset - never crash, read
 * out of bounds or allocate from an untrusted count. Run under ASan+UBSan. */
#include <stdlib.h>
#include <string.h>

#include "formats/gguf.h"
#include "harness.h"

static const char *tmp_path(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("CTORCH_TEST_TMP");
    snprintf(buf, len, "%s/%s", dir && *dir ? dir : "/tmp", name);
    return buf;
}

/* ---- hostile input ---- */

typedef struct hb {
    uint8_t p[4096];
    size_t n;
} hb;

static void hb_bytes(hb *b, const void *d, size_t n)
{
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void hb_u8(hb *b, uint8_t v) { hb_bytes(b, &v, 1); }
static void hb_u32(hb *b, uint32_t v) { hb_bytes(b, &v, 4); }
static void hb_u64(hb *b, uint64_t v) { hb_bytes(b, &v, 8); }
static void hb_str(hb *b, const char *s)
{
    hb_u64(b, strlen(s));
    hb_bytes(b, s, strlen(s));
}
static void hb_head(hb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv)
{
    b->n = 0;
    hb_bytes(b, "GGUF", 4);
    hb_u32(b, version);
    hb_u64(b, n_tensors);
    hb_u64(b, n_kv);
}
static void hb_pad(hb *b, size_t a)
{
    while (b->n % a) hb_u8(b, 0);
}
static void hb_tinfo(hb *b, const char *name, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    hb_str(b, name);
    hb_u32(b, nd);
    for (uint32_t d = 0; d < nd; d++) hb_u64(b, ne[d]);
    hb_u32(b, type);
    hb_u64(b, off);
}
static void hb_zeros(hb *b, size_t n)
{
    memset(b->p + b->n, 0, n);
    b->n += n;
}

/* Opens an exact-size heap copy (so ASan sees any overread) and expects
 * `want` with a message naming the input, an offset and `needle`. */
static void expect_bad_(hb *b, ct_status want, const char *needle, int line)
{
    uint8_t *copy = malloc(b->n ? b->n : 1);
    memcpy(copy, b->p, b->n);
    gguf_file *f = (gguf_file *)1;
    ct_status s = gguf_open_memory(copy, b->n, "hostile", &f);
    const char *msg = ct_last_error();
    CHECK_MSG(s == want, "line %d: got %s, want %s (%s)", line, ct_status_name(s), ct_status_name(want), msg);
    CHECK_MSG(f == NULL, "line %d: no file on failure", line);
    CHECK_MSG(strstr(msg, "hostile") && strstr(msg, "offset") && strstr(msg, needle), "line %d: message '%s' lacks '%s'",
              line, msg, needle);
    if (s == CT_OK) gguf_close(f);
    free(copy);
}
#define expect_bad(b, want, needle) expect_bad_(b, want, needle, __LINE__)

static void expect_ok_(hb *b, int line)
{
    gguf_file *f = NULL;
    ct_status s = gguf_open_memory(b->p, b->n, "ok", &f);
    CHECK_MSG(s == CT_OK, "line %d: %s", line, ct_last_error());
    gguf_close(f);
}
#define expect_ok(b) expect_ok_(b, __LINE__)

static void test_hostile_header(void)
{
    hb b;
    hb_head(&b, 3, 0, 0);
    expect_ok(&b);
    b.p[3] = 'X';
    expect_bad(&b, CT_ERR_FORMAT, "magic");
    b.n = 3;
    expect_bad(&b, CT_ERR_FORMAT, "magic");
    hb_head(&b, 3, 0, 0);
    b.n = 6;
    expect_bad(&b, CT_ERR_FORMAT, "version");
    hb_head(&b, 1, 0, 0);
    expect_bad(&b, CT_ERR_FORMAT, "version 1");
    hb_head(&b, 4, 0, 0);
    expect_bad(&b, CT_ERR_FORMAT, "version 4");
    hb_head(&b, 0x03000000u, 0, 0);
    expect_bad(&b, CT_ERR_FORMAT, "big-endian");
    hb_head(&b, 3, 0, 1ull << 60);
    expect_bad(&b, CT_ERR_FORMAT, "kv count");
    hb_head(&b, 3, ~0ull, 0);
    expect_bad(&b, CT_ERR_FORMAT, "tensor count");
    hb_head(&b, 2, 0, 0);
    b.n -= 3;
    expect_bad(&b, CT_ERR_FORMAT, "kv count");
}

/* One kv "k" whose type field and payload follow. */
static void kv_head(hb *b, uint32_t type)
{
    hb_head(b, 3, 0, 1);
    hb_str(b, "k");
    hb_u32(b, type);
}

static void test_hostile_values(void)
{
    hb b;
    hb_head(&b, 3, 0, 1);
    hb_u64(&b, 1000); /* key longer than the file */
    hb_bytes(&b, "abcdefgh", 8);
    expect_bad(&b, CT_ERR_FORMAT, "metadata key");
    hb_head(&b, 3, 0, 1);
    hb_u64(&b, 0);
    hb_u32(&b, 0);
    hb_u8(&b, 0);
    hb_zeros(&b, 4);
    expect_bad(&b, CT_ERR_FORMAT, "length 0");
    hb_head(&b, 3, 0, 1);
    hb_u64(&b, 3);
    hb_bytes(&b, "a\0b", 3);
    hb_u32(&b, GGUF_TYPE_UINT8);
    hb_u8(&b, 0);
    expect_bad(&b, CT_ERR_FORMAT, "NUL");
    kv_head(&b, 13);
    hb_u8(&b, 0);
    expect_bad(&b, CT_ERR_FORMAT, "invalid value type 13");
    kv_head(&b, GGUF_TYPE_STRING);
    hb_u64(&b, 1ull << 40);
    hb_bytes(&b, "xyz", 3);
    expect_bad(&b, CT_ERR_FORMAT, "string length");
    kv_head(&b, GGUF_TYPE_UINT64);
    hb_u32(&b, 0);
    expect_bad(&b, CT_ERR_FORMAT, "truncated");
    kv_head(&b, GGUF_TYPE_BOOL);
    hb_u8(&b, 2);
    expect_bad(&b, CT_ERR_FORMAT, "bool");
    kv_head(&b, GGUF_TYPE_ARRAY);
    hb_u32(&b, GGUF_TYPE_BOOL);
    hb_u64(&b, 2);
    hb_u8(&b, 1);
    hb_u8(&b, 7);
    expect_bad(&b, CT_ERR_FORMAT, "bool");
    kv_head(&b, GGUF_TYPE_ARRAY);
    hb_u32(&b, 99);
    hb_u64(&b, 0);
    expect_bad(&b, CT_ERR_FORMAT, "element type 99");
    kv_head(&b, GGUF_TYPE_ARRAY); /* n * 4 overflows 64 bits */
    hb_u32(&b, GGUF_TYPE_UINT32);
    hb_u64(&b, 1ull << 62);
    hb_zeros(&b, 16);
    expect_bad(&b, CT_ERR_FORMAT, "does not fit");
    kv_head(&b, GGUF_TYPE_ARRAY);
    hb_u32(&b, GGUF_TYPE_STRING);
    hb_u64(&b, ~0ull);
    hb_zeros(&b, 16);
    expect_bad(&b, CT_ERR_FORMAT, "does not fit");
    kv_head(&b, GGUF_TYPE_ARRAY);
    hb_u32(&b, GGUF_TYPE_STRING);
    hb_u64(&b, 2);
    hb_str(&b, "ok");
    hb_u64(&b, 99);
    expect_bad(&b, CT_ERR_FORMAT, "string length");
    kv_head(&b, GGUF_TYPE_ARRAY); /* arrays nested 10 deep */
    for (int d = 0; d < 10; d++) {
        hb_u32(&b, GGUF_TYPE_ARRAY);
        hb_u64(&b, 1);
    }
    hb_u32(&b, GGUF_TYPE_UINT8);
    hb_u64(&b, 0);
    expect_bad(&b, CT_ERR_FORMAT, "nested");
    hb_head(&b, 3, 0, 2);
    for (int i = 0; i < 2; i++) {
        hb_str(&b, "dup.key");
        hb_u32(&b, GGUF_TYPE_UINT8);
        hb_u8(&b, 1);
    }
    expect_bad(&b, CT_ERR_FORMAT, "duplicate metadata key 'dup.key'");
    const uint32_t bad_align[2] = {3, 0};
    for (int i = 0; i < 2; i++) {
        hb_head(&b, 3, 0, 1);
        hb_str(&b, "general.alignment");
        hb_u32(&b, GGUF_TYPE_UINT32);
        hb_u32(&b, bad_align[i]);
        expect_bad(&b, CT_ERR_FORMAT, "power of two");
    }
    hb_head(&b, 3, 0, 1);
    hb_str(&b, "general.alignment");
    hb_u32(&b, GGUF_TYPE_UINT64);
    hb_u64(&b, 32);
    expect_bad(&b, CT_ERR_FORMAT, "must be u32");
}

/* One tensor info, padding to 32 and `data` bytes of data. */
static void one_tensor(hb *b, uint32_t nd, const uint64_t *ne, uint32_t type, uint64_t off, size_t data)
{
    hb_head(b, 3, 1, 0);
    hb_tinfo(b, "w", nd, ne, type, off);
    hb_pad(b, 32);
    hb_zeros(b, data);
}

static void test_hostile_tensors(void)
{
    hb b;
    one_tensor(&b, 1, (uint64_t[]){8}, GGML_TYPE_F32, 0, 32);
    expect_ok(&b);
    one_tensor(&b, 0, NULL, GGML_TYPE_F32, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "n_dims = 0");
    one_tensor(&b, 5, (uint64_t[]){1, 1, 1, 1, 8}, GGML_TYPE_F32, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "n_dims = 5");
    one_tensor(&b, 2, (uint64_t[]){8, 0}, GGML_TYPE_F32, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "ne[1] = 0");
    one_tensor(&b, 1, (uint64_t[]){1ull << 63}, GGML_TYPE_F32, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "ne[0]");
    one_tensor(&b, 3, (uint64_t[]){1ull << 40, 1ull << 20, 1ull << 10}, GGML_TYPE_F32, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "overflow");
    one_tensor(&b, 2, (uint64_t[]){1ull << 30, 1ull << 30}, GGML_TYPE_F32, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "larger than the whole file");
    one_tensor(&b, 1, (uint64_t[]){8}, 4, 0, 32); /* id 4 was removed from ggml */
    expect_bad(&b, CT_ERR_FORMAT, "invalid ggml type 4");
    one_tensor(&b, 1, (uint64_t[]){8}, 1000, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "invalid ggml type 1000");
    one_tensor(&b, 1, (uint64_t[]){16}, GGML_TYPE_Q4_0, 0, 32);
    expect_bad(&b, CT_ERR_FORMAT, "block size 32");
    one_tensor(&b, 1, (uint64_t[]){8}, GGML_TYPE_F32, 0, 31);
    expect_bad(&b, CT_ERR_FORMAT, "past the end");
    one_tensor(&b, 1, (uint64_t[]){8}, GGML_TYPE_F32, 1ull << 63, 32);
    expect_bad(&b, CT_ERR_FORMAT, "past the end");
    one_tensor(&b, 1, (uint64_t[]){8}, GGML_TYPE_F32, 4, 64);
    expect_bad(&b, CT_ERR_FORMAT, "alignment");
    one_tensor(&b, 1, (uint64_t[]){8}, GGML_TYPE_F32, 0, 0);
    b.n -= 1; /* the padding before the data section is cut short */
    expect_bad(&b, CT_ERR_FORMAT, "past the end");
    hb_head(&b, 3, 1, 0);
    hb_tinfo(&b, "0123456789012345678901234567890123456789012345678901234567890123", 1, (uint64_t[]){8},
             GGML_TYPE_F32, 0);
    hb_pad(&b, 32);
    hb_zeros(&b, 32);
    expect_bad(&b, CT_ERR_FORMAT, "tensor name");
    /* two tensors: overlapping, duplicate names, then a valid pair */
    const char *names[3][2] = {{"a", "b"}, {"a", "a"}, {"a", "b"}};
    const uint64_t offs[3][2] = {{0, 0}, {0, 32}, {32, 0}};
    for (int c = 0; c < 3; c++) {
        hb_head(&b, 3, 2, 0);
        hb_tinfo(&b, names[c][0], 1, (uint64_t[]){8}, GGML_TYPE_F32, offs[c][0]);
        hb_tinfo(&b, names[c][1], 2, (uint64_t[]){4, 2}, GGML_TYPE_F32, offs[c][1]);
        hb_pad(&b, 32);
        hb_zeros(&b, 64);
        if (c == 0) expect_bad(&b, CT_ERR_FORMAT, "overlaps");
        else if (c == 1) expect_bad(&b, CT_ERR_FORMAT, "duplicate tensor name 'a'");
        else expect_ok(&b);
    }
    /* an IQ type opens (so tools can list it) but cannot become a ct tensor */
    one_tensor(&b, 1, (uint64_t[]){256}, 16, 0, 66);
    gguf_file *f = NULL;
    CHECK_OK(gguf_open_memory(b.p, b.n, "iq", &f));
    ct_tensor *t = NULL;
    if (f) CHECK_STATUS(gguf_tensor_to_ct(f, gguf_tensor_at(f, 0), &t), CT_ERR_DTYPE);
    CHECK(strstr(ct_last_error(), "IQ2_XXS") != NULL);
    gguf_close(f);
}

/* Every proper prefix of a valid file that cuts into a needed byte fails
 * cleanly; flipping any header byte never crashes. */
static void test_truncation(void)
{
    gguf_writer *w = gguf_writer_new();
    void *mem = NULL;
    size_t size = 0;
    if (!w) return;
    static const float data[40] = {1, 2, 3};
    static const char *const strs[3] = {"x", "", "yz"};
    CHECK_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    CHECK_OK(gguf_writer_set_u32(w, "a.u32", 5));
    CHECK_OK(gguf_writer_set_bool(w, "a.bool", false));
    CHECK_OK(gguf_writer_set_arr(w, "a.arr", GGUF_TYPE_FLOAT32, data, 3));
    CHECK_OK(gguf_writer_set_arr_str(w, "a.strs", strs, 3));
    uint8_t raw[32] = {GGUF_TYPE_BOOL, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1}; /* arr[arr] of one bool array */
    hb nb = {.n = 0};
    hb_u32(&nb, GGUF_TYPE_ARRAY);
    hb_u64(&nb, 1);
    hb_bytes(&nb, raw, 13);
    CHECK_OK(gguf_writer_set_raw(w, "a.nested", GGUF_TYPE_ARRAY, nb.p, nb.n));
    CHECK_OK(gguf_writer_add_tensor(w, "t0", CT_F32, 2, (int64_t[]){2, 4}, data));
    CHECK_OK(gguf_writer_add_tensor(w, "t1", CT_Q8_0, 1, (int64_t[]){32}, data));
    CHECK_OK(gguf_writer_add_tensor(w, "t2", CT_F16, 1, (int64_t[]){3}, data));
    CHECK_OK(gguf_writer_write_memory(w, &mem, &size));
    gguf_writer_free(w);
    if (!mem) return;
    gguf_file *f = NULL;
    CHECK_OK(gguf_open_memory(mem, size, "full", &f));
    if (!f) {
        free(mem);
        return;
    }
    size_t need = 0, hdr = (size_t)gguf_data_offset(f);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        size_t end = hdr + (size_t)t->offset + t->size;
        if (end > need) need = end;
    }
    gguf_close(f);
    int bad = 0;
    for (size_t n = 0; n < size; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, mem, n);
        ct_status s = gguf_open_memory(copy, n, "cut", &f);
        bool ok = n < need ? s == CT_ERR_FORMAT && strstr(ct_last_error(), "offset") : s == CT_OK;
        if (!ok && bad++ < 3) CHECK_MSG(ok, "prefix %zu of %zu: %s (%s)", n, size, ct_status_name(s), ct_last_error());
        if (s == CT_OK) gguf_close(f);
        free(copy);
    }
    CHECK(bad == 0);
    uint8_t *copy = malloc(hdr);
    for (size_t i = 0; i < hdr; i++) {
        static const uint8_t flips[3] = {0xff, 0x00, 0x80};
        for (int k = 0; k < 3; k++) {
            memcpy(copy, mem, hdr);
            copy[i] ^= flips[k] ? flips[k] : copy[i];
            if (gguf_open_memory(copy, hdr, "flip", &f) == CT_OK) gguf_close(f);
        }
    }
    free(copy);
    free(mem);
}

static void test_open_errors(void)
{
    gguf_file *f = NULL;
    CHECK_STATUS(gguf_open("/nonexistent/model.gguf", &f), CT_ERR_IO);
    CHECK(strstr(ct_last_error(), "/nonexistent/model.gguf") != NULL);
    CHECK_STATUS(gguf_open("/", &f), CT_ERR_IO);
    char path[512];
    tmp_path("gguf_not_gguf.txt", path, sizeof path);
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    if (!fp) return;
    fputs("hello, this is not a model file\n", fp);
    fclose(fp);
    CHECK_STATUS(gguf_open(path, &f), CT_ERR_FORMAT);
    CHECK(strstr(ct_last_error(), "magic") != NULL);
    fp = fopen(path, "wb");
    if (fp) fclose(fp);
    CHECK_STATUS(gguf_open(path, &f), CT_ERR_FORMAT);
    CHECK(f == NULL);
    CHECK_STATUS(gguf_open_memory(NULL, 5, "x", &f), CT_ERR_INVALID_ARG);
    remove(path);
}

int main(void)
{
    RUN(test_hostile_header);
    RUN(test_hostile_values);
    RUN(test_hostile_tensors);
    RUN(test_truncation);
    RUN(test_open_errors);
    return th_finish();
}
