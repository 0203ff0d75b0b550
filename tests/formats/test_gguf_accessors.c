/* GGUF reader accessors on NULL files and out-of-range indices (neutral values, never
 * a crash), the typed getters' conversions and their _or defaults, and the output
 * checks of the atomic file writer: a parent that is a file, a parent under a file,
 * a relative name, and a fill callback that fails (no file is left behind). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "formats/atomic_file.h"
#include "formats/gguf.h"
#include "harness.h"

static bool msg_has(const char *needle)
{
    bool ok = strstr(ct_last_error(), needle) != NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ct_last_error(), needle);
    return ok;
}

static void test_null_file(void)
{
    CHECK(!strcmp(gguf_name(NULL), ""));
    CHECK(gguf_version(NULL) == 0 && gguf_alignment(NULL) == 0 && gguf_data_offset(NULL) == 0);
    CHECK(gguf_file_size(NULL) == 0 && gguf_kv_count(NULL) == 0 && gguf_tensor_count(NULL) == 0);
    CHECK(gguf_kv_key(NULL, 0) == NULL && gguf_kv_type(NULL, 0) == GGUF_TYPE_COUNT);
    CHECK(gguf_find_key(NULL, "a") == -1 && gguf_find_tensor(NULL, "t") == NULL && gguf_tensor_at(NULL, 0) == NULL);
    gguf_value v;
    CHECK_STATUS(gguf_kv_value(NULL, 0, &v), CT_ERR_RANGE);
    uint32_t u;
    CHECK_STATUS(gguf_get_u32(NULL, "a", &u), CT_ERR_INVALID_ARG);
    CHECK(msg_has("null file or key"));
    ct_tensor *t = NULL;
    CHECK_STATUS(gguf_tensor_to_ct(NULL, NULL, &t), CT_ERR_INVALID_ARG);
}

static void test_getters(void)
{
    gguf_writer *w = gguf_writer_new();
    CHECK_OK(gguf_writer_set_i32(w, "k.i32", -7));
    CHECK_OK(gguf_writer_set_u64(w, "k.big", 5000000000ull));
    CHECK_OK(gguf_writer_set_f64(w, "k.f64", 0.1));
    CHECK_OK(gguf_writer_set_bool(w, "k.bool", true));
    CHECK_OK(gguf_writer_set_str(w, "k.str", "text"));
    float fv[3] = {1, 2, 3};
    int64_t s1[1] = {3};
    CHECK_OK(gguf_writer_add_tensor(w, "t", CT_F32, 1, s1, fv));
    void *data = NULL;
    size_t size = 0;
    CHECK_OK(gguf_writer_write_memory(w, &data, &size));
    gguf_writer_free(w);
    gguf_file *f = NULL;
    if (data) CHECK_OK(gguf_open_memory(data, size, "getters", &f));
    if (!f) {
        free(data);
        return;
    }
    int64_t n = gguf_kv_count(f);
    CHECK(n == 5);
    CHECK(gguf_kv_key(f, n) == NULL && gguf_kv_key(f, -1) == NULL);
    CHECK(gguf_kv_type(f, n) == GGUF_TYPE_COUNT && gguf_kv_type(f, 0) == GGUF_TYPE_INT32);
    gguf_value v;
    CHECK_STATUS(gguf_kv_value(f, n, &v), CT_ERR_RANGE);
    CHECK_STATUS(gguf_kv_value(f, 0, NULL), CT_ERR_RANGE);
    CHECK(gguf_tensor_at(f, 1) == NULL && gguf_tensor_at(f, -1) == NULL && gguf_tensor_at(f, 0) != NULL);
    int32_t i32 = 0;
    CHECK_OK(gguf_get_i32(f, "k.i32", &i32));
    CHECK(i32 == -7);
    CHECK_STATUS(gguf_get_i32(f, "k.big", &i32), CT_ERR_FORMAT); /* does not fit */
    CHECK(msg_has("k.big"));
    uint32_t u = 1;
    CHECK_STATUS(gguf_get_u32(f, "k.i32", &u), CT_ERR_FORMAT);
    CHECK_STATUS(gguf_get_u32(f, "k.bool", &u), CT_ERR_FORMAT);
    float x = 0;
    CHECK_OK(gguf_get_f32(f, "k.f64", &x));
    CHECK(x == 0.1f);
    CHECK_OK(gguf_get_f32(f, "k.i32", &x));
    CHECK(x == -7.0f);
    CHECK_STATUS(gguf_get_f32(f, "k.str", &x), CT_ERR_FORMAT);
    CHECK(msg_has("k.str"));
    CHECK_STATUS(gguf_get_f32(f, "k.none", &x), CT_ERR_NOT_FOUND);
    CHECK_OK(gguf_get_f32_or(f, "k.none", 2.5f, &x));
    CHECK(x == 2.5f);
    CHECK_OK(gguf_get_f32_or(f, "k.f64", 2.5f, &x));
    CHECK(x == 0.1f);
    CHECK_STATUS(gguf_get_f32_or(f, "k.bool", 2.5f, &x), CT_ERR_FORMAT);
    bool b = false;
    CHECK_OK(gguf_get_bool_or(f, "k.bool", false, &b));
    CHECK(b);
    CHECK_STATUS(gguf_get_bool_or(f, "k.i32", false, &b), CT_ERR_FORMAT);
    const char *s = NULL;
    CHECK_OK(gguf_get_str(f, "k.str", &s, NULL)); /* length optional */
    CHECK(s && !strncmp(s, "text", 4));
    gguf_type et;
    CHECK_STATUS(gguf_get_arr(f, "k.str", &et, NULL, NULL), CT_ERR_FORMAT);
    gguf_close(f);
    free(data);
}

static void test_output_checks(void)
{
    /* a parent that is a file, and a folder under a file */
    CHECK_STATUS(formats_check_output("/etc/passwd/model.gguf", NULL), CT_ERR_INVALID_ARG);
    CHECK(msg_has("'/etc/passwd' is not a folder"));
    CHECK_STATUS(formats_check_output("/etc/passwd/sub/model.gguf", NULL), CT_ERR_IO);
    CHECK(msg_has("folder '/etc/passwd/sub'"));
    CHECK_STATUS(formats_check_output("", NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(formats_check_output(NULL, NULL), CT_ERR_INVALID_ARG);
    CHECK_OK(formats_check_output("relative-name.gguf", NULL)); /* the current folder */
}

static bool fill_ok(int fd, void *ctx)
{
    return formats_write_all(fd, ctx, 5);
}

static bool fill_fails(int fd, void *ctx)
{
    (void)fd, (void)ctx;
    errno = ENOSPC;
    return false;
}

static void test_atomic_write(void)
{
    CHECK_STATUS(formats_atomic_write(NULL, fill_ok, "hello", "t"), CT_ERR_INVALID_ARG);
    CHECK_STATUS(formats_atomic_write("x", NULL, "hello", "t"), CT_ERR_INVALID_ARG);
    CHECK_STATUS(formats_atomic_write("x", fill_ok, "hello", NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(formats_atomic_write("/etc/passwd/x.bin", fill_ok, "hello", "tester"), CT_ERR_INVALID_ARG);
    CHECK(msg_has("tester: cannot write '/etc/passwd/x.bin': '/etc/passwd' is not a folder"));
    char path[512];
    const char *dir = getenv("CTORCH_TEST_TMP");
    snprintf(path, sizeof path, "%s/atomic_fail.bin", dir && *dir ? dir : "/tmp");
    remove(path);
    CHECK(formats_atomic_write(path, fill_fails, NULL, "tester") != CT_OK);
    CHECK(msg_has("tester"));
    struct stat st;
    CHECK(stat(path, &st) != 0); /* nothing left under the name */
    /* a relative name is written in the current folder */
    CHECK_OK(formats_atomic_write("atomic_rel.bin", fill_ok, "hello", "tester"));
    FILE *fp = fopen("atomic_rel.bin", "rb");
    char buf[8] = {0};
    CHECK(fp && fread(buf, 1, sizeof buf, fp) == 5 && !memcmp(buf, "hello", 5));
    if (fp) fclose(fp);
    remove("atomic_rel.bin");
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_null_file);
    RUN(test_getters);
    RUN(test_output_checks);
    RUN(test_atomic_write);
    return th_finish();
}
