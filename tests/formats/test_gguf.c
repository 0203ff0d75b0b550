/* GGUF reader/writer: round trip of every value type and nested arrays, the
 * gguf Python package reading our output, and llama.cpp-made reference files.
 * Hostile inputs are in test_gguf_hostile.c. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/gguf.h"
#include "harness.h"

/* ---- the sample file (tests/formats/check_gguf_py.py expects exactly this) ---- */

#define N_F32 6
static float g_f32[N_F32];
static uint16_t g_f16[4], g_bf16[4];
static uint8_t g_q8[2 * 34], g_iq4[18];
static int32_t g_i32[6];
static double g_f64[3] = {1e-300, -0.0, 3.5};
static int8_t g_i8[5] = {-128, -1, 0, 1, 127};

static void fill_sample_data(void)
{
    for (int i = 0; i < N_F32; i++) g_f32[i] = (float)i * 0.5f - 1.0f;
    for (int i = 0; i < 4; i++) g_f16[i] = ct_f32_to_f16((float)i * 0.25f - 0.5f);
    for (int i = 0; i < 4; i++) g_bf16[i] = ct_f32_to_bf16((float)i * 2.0f + 0.5f);
    for (int i = 0; i < 68; i++) g_q8[i] = (uint8_t)(i * 7 + 3);
    for (int i = 0; i < 18; i++) g_iq4[i] = (uint8_t)(255 - i);
    for (int i = 0; i < 6; i++) g_i32[i] = (i - 2) * 1000003;
}

/* A raw array-of-arrays payload: [[1, 2], [3], []] of i32. */
static size_t nested_i32(uint8_t *p)
{
    size_t n = 0;
#define U32(v) (memcpy(p + n, &(uint32_t){(uint32_t)(v)}, 4), n += 4)
#define U64(v) (memcpy(p + n, &(uint64_t){(uint64_t)(v)}, 8), n += 8)
    U32(GGUF_TYPE_ARRAY);
    U64(3);
    U32(GGUF_TYPE_INT32); U64(2); U32(1); U32(2);
    U32(GGUF_TYPE_INT32); U64(1); U32(3);
    U32(GGUF_TYPE_INT32); U64(0);
    return n;
}

/* [["p", "qq"], ["r"]] */
static size_t nested_str(uint8_t *p)
{
    size_t n = 0;
    U32(GGUF_TYPE_ARRAY);
    U64(2);
    U32(GGUF_TYPE_STRING); U64(2); U64(1); p[n++] = 'p'; U64(2); p[n++] = 'q'; p[n++] = 'q';
    U32(GGUF_TYPE_STRING); U64(1); U64(1); p[n++] = 'r';
    return n;
#undef U32
#undef U64
}

static const char *const g_strs[4] = {"a", "", "h\xc3\xa9llo", "x y z"};

static gguf_writer *make_sample(uint32_t version, uint32_t alignment)
{
    fill_sample_data();
    gguf_writer *w = gguf_writer_new();
    CHECK(w != NULL);
    if (!w) return NULL;
    CHECK_OK(gguf_writer_set_version(w, version));
    CHECK_OK(gguf_writer_set_str(w, "general.architecture", "llama"));
    CHECK_OK(gguf_writer_set_str(w, "general.name", "t\xc3\xabst"));
    if (alignment) CHECK_OK(gguf_writer_set_u32(w, "general.alignment", alignment));
    CHECK_OK(gguf_writer_set_u8(w, "t.u8", 200));
    CHECK_OK(gguf_writer_set_i8(w, "t.i8", -100));
    CHECK_OK(gguf_writer_set_u16(w, "t.u16", 60000));
    CHECK_OK(gguf_writer_set_i16(w, "t.i16", -30000));
    CHECK_OK(gguf_writer_set_u32(w, "t.u32", 4000000000u));
    CHECK_OK(gguf_writer_set_i32(w, "t.i32", -2000000000));
    CHECK_OK(gguf_writer_set_u64(w, "t.u64", (1ull << 63) + 5));
    CHECK_OK(gguf_writer_set_i64(w, "t.i64", -(1ll << 62)));
    CHECK_OK(gguf_writer_set_f32(w, "t.f32", 1.5f));
    CHECK_OK(gguf_writer_set_f64(w, "t.f64", -2.25e100));
    CHECK_OK(gguf_writer_set_bool(w, "t.bool", true));
    CHECK_OK(gguf_writer_set_str(w, "t.str_empty", ""));
    CHECK_OK(gguf_writer_set_u32(w, "t.replaced", 1));
    CHECK_OK(gguf_writer_set_u32(w, "t.replaced", 2)); /* same key again: replaces */
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_u8", GGUF_TYPE_UINT8, (uint8_t[]){1, 2, 3}, 3));
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_i16", GGUF_TYPE_INT16, (int16_t[]){-5, 5}, 2));
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_i32", GGUF_TYPE_INT32, (int32_t[]){-1, 0, 7}, 3));
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_u64", GGUF_TYPE_UINT64, (uint64_t[]){0, ~0ull}, 2));
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_f32", GGUF_TYPE_FLOAT32, (float[]){0.5f, -1.25f}, 2));
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_f64", GGUF_TYPE_FLOAT64, (double[]){1e10, -3.0}, 2));
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_bool", GGUF_TYPE_BOOL, (uint8_t[]){1, 0, 1}, 3));
    CHECK_OK(gguf_writer_set_arr(w, "t.arr_empty", GGUF_TYPE_UINT32, NULL, 0));
    CHECK_OK(gguf_writer_set_arr_str(w, "t.arr_str", g_strs, 4));
    uint8_t raw[256];
    size_t n = nested_i32(raw);
    CHECK_OK(gguf_writer_set_raw(w, "t.nested", GGUF_TYPE_ARRAY, raw, n));
    n = nested_str(raw);
    CHECK_OK(gguf_writer_set_raw(w, "t.nested_str", GGUF_TYPE_ARRAY, raw, n));
    CHECK_OK(gguf_writer_add_tensor(w, "f32.w", CT_F32, 2, (int64_t[]){2, 3}, g_f32));
    CHECK_OK(gguf_writer_add_tensor(w, "f16.w", CT_F16, 1, (int64_t[]){4}, g_f16));
    CHECK_OK(gguf_writer_add_tensor(w, "q8.w", CT_Q8_0, 2, (int64_t[]){2, 32}, g_q8));
    CHECK_OK(gguf_writer_add_tensor(w, "i32.w", CT_I32, 3, (int64_t[]){3, 1, 2}, g_i32));
    CHECK_OK(gguf_writer_add_tensor(w, "bf16.w", CT_BF16, 2, (int64_t[]){2, 2}, g_bf16));
    CHECK_OK(gguf_writer_add_tensor_raw(w, "iq4.w", 20, 1, (int64_t[]){32}, g_iq4, sizeof g_iq4));
    CHECK_OK(gguf_writer_add_tensor(w, "f64.w", CT_F64, 1, (int64_t[]){3}, g_f64));
    CHECK_OK(gguf_writer_add_tensor(w, "i8.w", CT_I8, 4, (int64_t[]){1, 1, 1, 5}, g_i8));
    return w;
}

static int64_t get_i(const gguf_file *f, const char *key)
{
    int64_t v = 0;
    CHECK_OK(gguf_get_i64(f, key, &v));
    return v;
}

static void check_sample(gguf_file *f, uint32_t version, uint32_t alignment)
{
    CHECK(gguf_version(f) == version);
    CHECK(gguf_alignment(f) == (alignment ? alignment : 32));
    CHECK(gguf_data_offset(f) % gguf_alignment(f) == 0);
    const char *s;
    size_t len;
    CHECK_OK(gguf_get_str(f, "general.architecture", &s, &len));
    CHECK(len == 5 && !memcmp(s, "llama", 5));
    CHECK_OK(gguf_get_str(f, "t.str_empty", &s, &len));
    CHECK(len == 0);
    CHECK(get_i(f, "t.u8") == 200 && get_i(f, "t.i8") == -100 && get_i(f, "t.u16") == 60000);
    CHECK(get_i(f, "t.i16") == -30000 && get_i(f, "t.u32") == 4000000000ll && get_i(f, "t.i32") == -2000000000);
    CHECK(get_i(f, "t.i64") == -(1ll << 62) && get_i(f, "t.replaced") == 2);
    uint64_t u64 = 0;
    CHECK_OK(gguf_get_u64(f, "t.u64", &u64));
    CHECK(u64 == (1ull << 63) + 5);
    int64_t i64;
    CHECK_STATUS(gguf_get_i64(f, "t.u64", &i64), CT_ERR_FORMAT); /* does not fit */
    uint32_t u32;
    CHECK_STATUS(gguf_get_u32(f, "t.i8", &u32), CT_ERR_FORMAT);   /* negative */
    CHECK_STATUS(gguf_get_u32(f, "t.str_empty", &u32), CT_ERR_FORMAT);
    CHECK_STATUS(gguf_get_u32(f, "t.missing", &u32), CT_ERR_NOT_FOUND);
    CHECK_OK(gguf_get_u32_or(f, "t.missing", 77, &u32));
    CHECK(u32 == 77);
    CHECK_STATUS(gguf_get_u32_or(f, "t.f32", 1, &u32), CT_ERR_FORMAT);
    int32_t i32;
    CHECK_STATUS(gguf_get_i32(f, "t.u32", &i32), CT_ERR_FORMAT);
    float f32;
    double f64;
    CHECK_OK(gguf_get_f32(f, "t.f32", &f32));
    CHECK(f32 == 1.5f);
    CHECK_OK(gguf_get_f64(f, "t.f64", &f64));
    CHECK(f64 == -2.25e100);
    CHECK_STATUS(gguf_get_f32(f, "t.bool", &f32), CT_ERR_FORMAT);
    bool b = false;
    CHECK_OK(gguf_get_bool(f, "t.bool", &b));
    CHECK(b);
    CHECK_STATUS(gguf_get_bool(f, "t.u8", &b), CT_ERR_FORMAT);
    CHECK_OK(gguf_get_bool_or(f, "t.nope", true, &b));
    CHECK(b);

    gguf_type et;
    uint64_t n;
    const void *data;
    CHECK_OK(gguf_get_arr(f, "t.arr_i32", &et, &n, &data));
    int32_t ai[3];
    CHECK(et == GGUF_TYPE_INT32 && n == 3 && data);
    if (data) memcpy(ai, data, sizeof ai);
    CHECK(ai[0] == -1 && ai[1] == 0 && ai[2] == 7);
    CHECK_OK(gguf_get_arr(f, "t.arr_u64", &et, &n, &data));
    uint64_t au[2];
    if (data) memcpy(au, data, sizeof au);
    CHECK(et == GGUF_TYPE_UINT64 && n == 2 && au[1] == ~0ull);
    CHECK_OK(gguf_get_arr(f, "t.arr_bool", &et, &n, &data));
    CHECK(et == GGUF_TYPE_BOOL && n == 3 && data && !memcmp(data, "\1\0\1", 3));
    CHECK_OK(gguf_get_arr(f, "t.arr_empty", &et, &n, &data));
    CHECK(et == GGUF_TYPE_UINT32 && n == 0);
    CHECK_STATUS(gguf_get_arr(f, "t.u8", &et, &n, &data), CT_ERR_FORMAT);
    CHECK_OK(gguf_get_arr(f, "t.arr_str", &et, &n, &data));
    CHECK(et == GGUF_TYPE_STRING && n == 4 && data == NULL);
    for (uint64_t i = 0; i < 4; i++) {
        CHECK_OK(gguf_get_arr_str(f, "t.arr_str", i, &s, &len));
        CHECK(len == strlen(g_strs[i]) && !memcmp(s, g_strs[i], len));
    }
    CHECK_STATUS(gguf_get_arr_str(f, "t.arr_str", 4, &s, &len), CT_ERR_RANGE);
    CHECK_STATUS(gguf_get_arr_str(f, "t.arr_i32", 0, &s, &len), CT_ERR_FORMAT);

    /* nested: [[1, 2], [3], []] */
    int64_t k = gguf_find_key(f, "t.nested");
    CHECK(k >= 0 && gguf_kv_type(f, k) == GGUF_TYPE_ARRAY);
    gguf_value v, e, x;
    CHECK_OK(gguf_kv_value(f, k, &v));
    CHECK(v.elem == GGUF_TYPE_ARRAY && v.n == 3);
    static const int64_t want_len[3] = {2, 1, 0}, want_val[3] = {1, 2, 3};
    int wi = 0;
    for (uint64_t i = 0; i < 3 && v.n == 3; i++) {
        CHECK_OK(gguf_value_elem(f, &v, i, &e));
        CHECK(e.type == GGUF_TYPE_ARRAY && e.elem == GGUF_TYPE_INT32 && (int64_t)e.n == want_len[i]);
        for (uint64_t j = 0; j < e.n && j < 2; j++) {
            int64_t iv = -1;
            CHECK_OK(gguf_value_elem(f, &e, j, &x));
            CHECK(gguf_value_as_i64(&x, &iv) && iv == want_val[wi++]);
        }
    }
    CHECK_STATUS(gguf_value_elem(f, &v, 3, &e), CT_ERR_RANGE);
    k = gguf_find_key(f, "t.nested_str");
    CHECK_OK(gguf_kv_value(f, k, &v));
    CHECK_OK(gguf_value_elem(f, &v, 1, &e));
    CHECK_OK(gguf_value_elem(f, &e, 0, &x));
    CHECK(x.type == GGUF_TYPE_STRING && x.n == 1 && x.ptr[0] == 'r');
    CHECK_OK(gguf_value_elem(f, &v, 0, &e));
    CHECK_OK(gguf_value_elem(f, &e, 1, &x));
    CHECK(x.n == 2 && !memcmp(x.ptr, "qq", 2));

    /* tensors */
    CHECK(gguf_tensor_count(f) == 8);
    const gguf_tensor *t = gguf_find_tensor(f, "f32.w");
    CHECK(t && t->ggml_type == 0 && t->dtype == CT_F32 && t->n_dims == 2 && t->ne[0] == 3 && t->ne[1] == 2);
    CHECK(t && t->size == sizeof g_f32 && !memcmp(t->data, g_f32, sizeof g_f32));
    CHECK(gguf_find_tensor(f, "nope") == NULL);
    t = gguf_find_tensor(f, "q8.w");
    CHECK(t && t->dtype == CT_Q8_0 && t->ne[0] == 32 && t->ne[1] == 2 && t->size == 68 && !memcmp(t->data, g_q8, 68));
    t = gguf_find_tensor(f, "i8.w");
    CHECK(t && t->n_dims == 4 && t->ne[0] == 5 && t->ne[3] == 1 && gguf_tensor_numel(t) == 5);
    t = gguf_find_tensor(f, "iq4.w");
    CHECK(t && t->ggml_type == 20 && t->dtype == CT_DTYPE_COUNT && t->size == 18);
    ct_tensor *ct = NULL;
    CHECK_STATUS(gguf_tensor_to_ct(f, t, &ct), CT_ERR_DTYPE);
    CHECK(strstr(ct_last_error(), "IQ4_NL") != NULL);
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *ti = gguf_tensor_at(f, i);
        CHECK(ti && ti->offset % gguf_alignment(f) == 0);
    }
}

/* The zero-copy tensor outlives gguf_close and has the reversed shape. */
static void check_to_ct(gguf_file *f)
{
    ct_tensor *a = NULL, *b = NULL;
    CHECK_OK(gguf_tensor_to_ct(f, gguf_find_tensor(f, "f32.w"), &a));
    CHECK_OK(gguf_tensor_to_ct(f, gguf_find_tensor(f, "i32.w"), &b));
    gguf_close(f);
    if (!a || !b) return;
    CHECK(ct_tensor_ndim(a) == 2 && ct_tensor_dim(a, 0) == 2 && ct_tensor_dim(a, 1) == 3 && ct_tensor_dtype(a) == CT_F32);
    double *va = th_values(a), want[N_F32];
    for (int i = 0; i < N_F32; i++) want[i] = g_f32[i];
    CHECK(th_allclose(va, want, N_F32, 0, 0)); /* bit copy: exact */
    free(va);
    CHECK(ct_tensor_ndim(b) == 3 && ct_tensor_dim(b, 0) == 3 && ct_tensor_dim(b, 2) == 2);
    double *vb = th_values(b), wb[6];
    for (int i = 0; i < 6; i++) wb[i] = g_i32[i];
    CHECK(th_allclose(vb, wb, 6, 0, 0));
    free(vb);
    ct_tensor_free(a);
    ct_tensor_free(b);
}

static const char *tmp_path(const char *name, char *buf, size_t len)
{
    const char *dir = getenv("CTORCH_TEST_TMP");
    snprintf(buf, len, "%s/%s", dir && *dir ? dir : "/tmp", name);
    return buf;
}

static void test_roundtrip(void)
{
    const uint32_t versions[2] = {3, 2}, aligns[2] = {0, 64};
    for (int c = 0; c < 2; c++) {
        gguf_writer *w = make_sample(versions[c], aligns[c]);
        if (!w) return;
        char path[512];
        tmp_path(c ? "gguf_sample_v2.gguf" : "gguf_sample_v3.gguf", path, sizeof path);
        CHECK_OK(gguf_writer_write(w, path));
        void *mem = NULL;
        size_t size = 0;
        CHECK_OK(gguf_writer_write_memory(w, &mem, &size));
        gguf_writer_free(w);
        /* the file and the memory image are the same bytes */
        FILE *fp = fopen(path, "rb");
        CHECK(fp != NULL);
        if (fp && mem) {
            uint8_t *fb = malloc(size + 1);
            CHECK(fread(fb, 1, size + 1, fp) == size && !memcmp(fb, mem, size));
            free(fb);
        }
        if (fp) fclose(fp);
        gguf_file *f = NULL;
        CHECK_OK(gguf_open(path, &f));
        if (f) {
            check_sample(f, versions[c], aligns[c]);
            check_to_ct(f);
        }
        CHECK_OK(gguf_open_memory(mem, size, "sample", &f));
        if (f) {
            check_sample(f, versions[c], aligns[c]);
            gguf_close(f);
        }
        free(mem);
    }
}

static void test_writer_errors(void)
{
    gguf_writer *w = gguf_writer_new();
    float d[64] = {0};
    CHECK_STATUS(gguf_writer_set_version(w, 1), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_u32(w, "general.alignment", 48), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_u64(w, "general.alignment", 64), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_u32(w, "", 1), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_arr(w, "a", GGUF_TYPE_STRING, d, 1), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_arr(w, "a", GGUF_TYPE_BOOL, (uint8_t[]){2}, 1), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_arr_str(w, "a", (const char *const[]){"x", NULL}, 2), CT_ERR_INVALID_ARG);
    uint8_t raw[16] = {GGUF_TYPE_INT32, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0}; /* 5 i32 claimed, none given */
    CHECK_STATUS(gguf_writer_set_raw(w, "a", GGUF_TYPE_ARRAY, raw, 12), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_set_raw(w, "a", GGUF_TYPE_UINT8, raw, 2), CT_ERR_INVALID_ARG); /* trailing byte */
    CHECK_STATUS(gguf_writer_add_tensor(w, "b", CT_BOOL, 1, (int64_t[]){4}, d), CT_ERR_DTYPE);
    CHECK_STATUS(gguf_writer_add_tensor(w, "q", CT_Q4_0, 1, (int64_t[]){16}, d), CT_ERR_SHAPE);
    CHECK_STATUS(gguf_writer_add_tensor(w, "z", CT_F32, 1, (int64_t[]){0}, d), CT_ERR_SHAPE);
    CHECK_STATUS(gguf_writer_add_tensor(w, "x", CT_F32, 5, (int64_t[]){1, 1, 1, 1, 1}, d), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_add_tensor(w, "0123456789012345678901234567890123456789012345678901234567890123", CT_F32,
                                        1, (int64_t[]){4}, d), CT_ERR_INVALID_ARG);
    CHECK_OK(gguf_writer_add_tensor(w, "t", CT_F32, 1, (int64_t[]){4}, d));
    CHECK_STATUS(gguf_writer_add_tensor(w, "t", CT_F32, 1, (int64_t[]){4}, d), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "r", 20, 1, (int64_t[]){32}, d, 17), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_add_tensor_raw(w, "r", 4, 1, (int64_t[]){32}, d, 18), CT_ERR_INVALID_ARG);
    CHECK_STATUS(gguf_writer_copy_kv(w, NULL, 0), CT_ERR_RANGE);
    CHECK_STATUS(gguf_writer_write(w, "/nonexistent-dir/x.gguf"), CT_ERR_IO);
    gguf_writer_free(w);
}

/* Runs the gguf Python package over the v3 sample when it is installed. */
static void test_python_reader(void)
{
    if (system("python3 -c 'import gguf, numpy' >/dev/null 2>&1") != 0) {
        th_skip("python gguf package not installed");
        return;
    }
    char path[512], cmd[1400];
    tmp_path("gguf_sample_py.gguf", path, sizeof path);
    gguf_writer *w = make_sample(3, 0);
    if (!w) return;
    CHECK_OK(gguf_writer_write(w, path));
    gguf_writer_free(w);
    /* the script sits next to this source file */
    const char *src = __FILE__, *slash = strrchr(src, '/');
    int dirlen = slash ? (int)(slash - src) : 1;
    snprintf(cmd, sizeof cmd, "python3 %.*s/check_gguf_py.py %s", dirlen, slash ? src : ".", path);
    CHECK_MSG(system(cmd) == 0, "%s failed", cmd);
}

/* ---- llama.cpp reference files ---- */

static void check_str(const gguf_file *f, const char *key, const char *want)
{
    const char *s = NULL;
    size_t len = 0;
    CHECK_OK(gguf_get_str(f, key, &s, &len));
    CHECK_MSG(s && len == strlen(want) && !memcmp(s, want, len), "%s: '%.*s' vs '%s'", key, (int)len, s ? s : "", want);
}

static void check_u32(const gguf_file *f, const char *key, uint32_t want)
{
    uint32_t v = 0;
    CHECK_OK(gguf_get_u32(f, key, &v));
    CHECK_MSG(v == want, "%s = %u, want %u", key, v, want);
}

static void check_vocab(const gguf_file *f)
{
    gguf_type et;
    uint64_t n = 0;
    const void *data;
    CHECK_OK(gguf_get_arr(f, "tokenizer.ggml.tokens", &et, &n, &data));
    CHECK(et == GGUF_TYPE_STRING && n == 32000);
    const char *s;
    size_t len;
    CHECK_OK(gguf_get_arr_str(f, "tokenizer.ggml.tokens", 1, &s, &len));
    CHECK(len == 3 && !memcmp(s, "<s>", 3));
    CHECK_OK(gguf_get_arr_str(f, "tokenizer.ggml.tokens", 2, &s, &len));
    CHECK(len == 4 && !memcmp(s, "</s>", 4));
    CHECK_OK(gguf_get_arr_str(f, "tokenizer.ggml.tokens", 3, &s, &len));
    CHECK(len == 6 && !memcmp(s, "<0x00>", 6));
    CHECK_OK(gguf_get_arr(f, "tokenizer.ggml.scores", &et, &n, &data));
    CHECK(et == GGUF_TYPE_FLOAT32 && n == 32000);
    CHECK_OK(gguf_get_arr(f, "tokenizer.ggml.token_type", &et, &n, &data));
    CHECK(et == GGUF_TYPE_INT32 && n == 32000);
    check_str(f, "tokenizer.ggml.model", "llama");
    check_u32(f, "tokenizer.ggml.bos_token_id", 1);
    check_u32(f, "tokenizer.ggml.eos_token_id", 2);
}

static bool is_q6k_in_q4km(const char *name)
{
    return !strcmp(name, "output.weight") || !strcmp(name, "blk.2.attn_v.weight") ||
           !strcmp(name, "blk.3.attn_v.weight") || !strcmp(name, "blk.2.ffn_down.weight") ||
           !strcmp(name, "blk.3.ffn_down.weight");
}

static void check_model(const char *path, int quant /* 0 f16, 1 q8_0, 2 q4_k_m */)
{
    gguf_file *f = NULL;
    CHECK_OK(gguf_open(path, &f));
    if (!f) return;
    check_str(f, "general.architecture", "llama");
    check_str(f, "general.name", "mini-a");
    check_u32(f, "llama.block_count", 4);
    check_u32(f, "llama.embedding_length", 256);
    check_u32(f, "llama.feed_forward_length", 768);
    check_u32(f, "llama.attention.head_count", 8);
    check_u32(f, "llama.attention.head_count_kv", 4);
    check_u32(f, "llama.rope.dimension_count", 32);
    check_u32(f, "llama.context_length", 2048);
    float base = 0, eps = 0;
    CHECK_OK(gguf_get_f32(f, "llama.rope.freq_base", &base));
    CHECK(base == 10000.0f);
    CHECK_OK(gguf_get_f32(f, "llama.attention.layer_norm_rms_epsilon", &eps));
    CHECK_NEAR(eps, 1e-5, 1e-12);
    static const uint32_t file_type[3] = {1, 7, 15}; /* llama_ftype: MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_Q4_K_M */
    check_u32(f, "general.file_type", file_type[quant]);
    check_vocab(f);
    CHECK(gguf_tensor_count(f) == 2 + 4 * 9 + 1);
    const gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    CHECK(t && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 32000);
    t = gguf_find_tensor(f, "blk.1.attn_k.weight");
    CHECK(t && t->ne[0] == 256 && t->ne[1] == 128);
    t = gguf_find_tensor(f, "blk.3.ffn_down.weight");
    CHECK(t && t->ne[0] == 768 && t->ne[1] == 256);
    int n_q6 = 0;
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        t = gguf_tensor_at(f, i);
        if (t->n_dims == 1) {
            CHECK_MSG(t->ggml_type == GGML_TYPE_F32 && t->ne[0] == 256, "%s", t->name);
            continue;
        }
        uint32_t want = quant == 0 ? GGML_TYPE_F16 : quant == 1 ? GGML_TYPE_Q8_0
                        : is_q6k_in_q4km(t->name) ? GGML_TYPE_Q6_K : GGML_TYPE_Q4_K;
        n_q6 += t->ggml_type == GGML_TYPE_Q6_K;
        CHECK_MSG(t->ggml_type == want, "%s: type %s", t->name, gguf_ggml_type_name(t->ggml_type));
    }
    if (quant == 2) CHECK(n_q6 == 5);
    ct_tensor *ct = NULL;
    CHECK_OK(gguf_tensor_to_ct(f, gguf_find_tensor(f, "output.weight"), &ct));
    if (ct) CHECK(ct_tensor_dim(ct, 0) == 32000 && ct_tensor_dim(ct, 1) == 256);
    gguf_close(f);
    ct_tensor_free(ct);
}

/* Copying every kv (raw) and tensor of a llama.cpp-written file through our
 * writer reproduces the file byte for byte: same layout rules as ggml's writer. */
static void check_rewrite_identical(const char *path)
{
    gguf_file *f = NULL;
    CHECK_OK(gguf_open(path, &f));
    if (!f) return;
    gguf_writer *w = gguf_writer_new();
    CHECK_OK(gguf_writer_set_version(w, gguf_version(f)));
    for (int64_t k = 0; k < gguf_kv_count(f); k++) {
        CHECK_OK(gguf_writer_copy_kv(w, f, k));
    }
    for (int64_t i = 0; i < gguf_tensor_count(f); i++) {
        const gguf_tensor *t = gguf_tensor_at(f, i);
        CHECK_OK(gguf_writer_add_tensor_raw(w, t->name, t->ggml_type, t->n_dims, t->ne, t->data, t->size));
    }
    void *mem = NULL;
    size_t size = 0;
    CHECK_OK(gguf_writer_write_memory(w, &mem, &size));
    gguf_writer_free(w);
    FILE *fp = fopen(path, "rb");
    uint8_t *orig = malloc(size + 1);
    size_t got = fp && orig ? fread(orig, 1, size + 1, fp) : 0;
    CHECK_MSG(got == size && gguf_file_size(f) == size, "%s: %zu bytes rewritten, file has %zu", path, size,
              gguf_file_size(f));
    size_t diff = 0;
    while (mem && diff < got && diff < size && orig[diff] == ((uint8_t *)mem)[diff]) diff++;
    CHECK_MSG(diff == size, "%s: rewrite differs first at offset %zu", path, diff);
    if (fp) fclose(fp);
    free(orig);
    free(mem);
    gguf_close(f);
}

static void test_refdata(void)
{
    const char *ref = th_refdata();
    char path[512];
    if (!ref) {
        th_skip("no refdata");
        return;
    }
    static const char *files[3] = {"mini-a-f16.gguf", "mini-a-q8_0.gguf", "mini-a-q4_k_m.gguf"};
    for (int q = 0; q < 3; q++) {
        snprintf(path, sizeof path, "%s/mini-a/%s", ref, files[q]);
        struct stat st;
        if (stat(path, &st) == 0) {
            check_model(path, q);
            if (q == 2) check_rewrite_identical(path); /* the smallest; the others take seconds under ASan */
        }
        else th_skip("%s absent", path);
    }
    snprintf(path, sizeof path, "%s/tokenizer/ggml-vocab-llama-spm.gguf", ref);
    gguf_file *f = NULL;
    struct stat st;
    if (stat(path, &st) != 0) return;
    CHECK_OK(gguf_open(path, &f));
    if (!f) return;
    CHECK(gguf_tensor_count(f) == 0);
    check_vocab(f);
    gguf_close(f);
    check_rewrite_identical(path);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_roundtrip);
    RUN(test_writer_errors);
    RUN(test_python_reader);
    RUN(test_refdata);
    return th_finish();
}
