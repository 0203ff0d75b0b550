/* The GGUF writer never loses data: a failed write (here a real one, the file
 * size limit of RLIMIT_FSIZE, as a full disk would fail) leaves the previous
 * file byte for byte and no temporary file; a good write replaces the file,
 * keeps its mode and writes through a symlink; the up-front output check
 * refuses a missing folder and the input under any of its names. */
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "formats/atomic_file.h"
#include "formats/gguf.h"
#include "harness.h"

static char g_dir[512];

static void path_in(char *buf, size_t len, const char *name) { snprintf(buf, len, "%s/%s", g_dir, name); }

/* A file of one f32 tensor of n values v, v+1, ... and a name string. */
static ct_status write_model(const char *path, int64_t n, float v, const char *name)
{
    float *data = malloc((size_t)n * sizeof *data);
    if (!data) return CT_ERR_OOM;
    for (int64_t i = 0; i < n; i++) data[i] = v + (float)i;
    gguf_writer *w = gguf_writer_new();
    ct_status s = w ? gguf_writer_set_str(w, "general.name", name) : CT_ERR_OOM;
    if (s == CT_OK) s = gguf_writer_add_tensor(w, "t", CT_F32, 1, &n, data);
    if (s == CT_OK) s = gguf_writer_write(w, path);
    gguf_writer_free(w);
    free(data);
    return s;
}

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    *n = p ? fread(p, 1, (size_t)len, f) : 0;
    fclose(f);
    return p;
}

/* Entries of the test folder other than . and .. */
static int count_entries(void)
{
    DIR *d = opendir(g_dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    if (d) closedir(d);
    return n;
}

static void test_failed_write_keeps_old_file(void)
{
    char p[600];
    path_in(p, sizeof p, "model.gguf");
    CHECK_OK(write_model(p, 64, 1.0f, "old"));
    size_t n_old = 0;
    unsigned char *old = slurp(p, &n_old);
    CHECK(old && n_old > 256);

    /* the new file would be 256 KiB; the process may write only 16 KiB */
    struct rlimit saved, lim;
    getrlimit(RLIMIT_FSIZE, &saved);
    lim = saved;
    lim.rlim_cur = 16384;
    void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
    CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
    ct_status s = write_model(p, 65536, 2.0f, "new");
    setrlimit(RLIMIT_FSIZE, &saved);
    signal(SIGXFSZ, prev);
    CHECK_STATUS(s, CT_ERR_IO);
    CHECK_MSG(strstr(ct_last_error(), "model.gguf") != NULL, "message names the file: %s", ct_last_error());

    size_t n_now = 0;
    unsigned char *now = slurp(p, &n_now);
    CHECK_MSG(now && n_now == n_old && !memcmp(now, old, n_old), "the old file changed (%zu -> %zu bytes)", n_old,
              n_now);
    CHECK_MSG(count_entries() == 1, "%d entries in the folder: a temporary file was left", count_entries());
    free(old);
    free(now);
    unlink(p);
}

/* A raised cancel flag (Ctrl-C in `ctorch quantize`) is a clean failure too. */
static void test_cancel_keeps_old_file(void)
{
    char p[600];
    path_in(p, sizeof p, "c.gguf");
    CHECK_OK(write_model(p, 16, 1.0f, "old"));
    size_t n_old = 0, n_now = 0;
    unsigned char *old = slurp(p, &n_old);
    float data[32] = {0};
    int64_t n = 32;
    volatile sig_atomic_t stop = 1;
    gguf_writer *w = gguf_writer_new();
    CHECK(w != NULL);
    if (w) {
        CHECK_OK(gguf_writer_add_tensor(w, "t", CT_F32, 1, &n, data));
        gguf_writer_set_cancel(w, &stop);
        CHECK_STATUS(gguf_writer_write(w, p), CT_ERR_IO);
        stop = 0;
        gguf_writer_free(w);
    }
    unsigned char *now = slurp(p, &n_now);
    CHECK(old && now && n_now == n_old && !memcmp(now, old, n_old));
    CHECK_MSG(count_entries() == 1, "%d entries in the folder: a temporary file was left", count_entries());
    free(old);
    free(now);
    unlink(p);
}

static void test_good_write_replaces_keeps_mode(void)
{
    char p[600];
    path_in(p, sizeof p, "m.gguf");
    CHECK_OK(write_model(p, 8, 1.0f, "first"));
    CHECK(chmod(p, 0640) == 0);
    CHECK_OK(write_model(p, 16, 5.0f, "second"));
    struct stat st;
    CHECK(stat(p, &st) == 0 && (st.st_mode & 07777) == 0640);
    gguf_file *f = NULL;
    CHECK_OK(gguf_open(p, &f));
    if (f) {
        const gguf_tensor *t = gguf_find_tensor(f, "t");
        CHECK(t && t->ne[0] == 16 && ((const float *)t->data)[3] == 8.0f);
        gguf_close(f);
    }
    CHECK(count_entries() == 1);

    /* through a symlink: the link stays a link, its target gets the new data */
    char l[600];
    path_in(l, sizeof l, "link.gguf");
    CHECK(symlink("m.gguf", l) == 0);
    CHECK_OK(write_model(l, 4, 9.0f, "third"));
    CHECK(lstat(l, &st) == 0 && S_ISLNK(st.st_mode));
    CHECK_OK(gguf_open(p, &f));
    if (f) {
        const gguf_tensor *t = gguf_find_tensor(f, "t");
        CHECK(t && t->ne[0] == 4 && ((const float *)t->data)[0] == 9.0f);
        gguf_close(f);
    }
    CHECK(count_entries() == 2);
    unlink(l);
    unlink(p);
}

static void test_missing_folder(void)
{
    char p[600];
    path_in(p, sizeof p, "no-such-folder/x.gguf");
    CHECK_STATUS(write_model(p, 4, 0.0f, "x"), CT_ERR_IO);
    CHECK_MSG(strstr(ct_last_error(), "does not exist") != NULL, "%s", ct_last_error());
    CHECK_STATUS(formats_check_output(p, NULL), CT_ERR_IO);
    CHECK_STATUS(formats_check_output(g_dir, NULL), CT_ERR_INVALID_ARG); /* a folder */
    CHECK(count_entries() == 0);
}

static void test_same_file_refused(void)
{
    char in[600], sym[600], hard[600], other[600], dotted[600];
    path_in(in, sizeof in, "in.gguf");
    path_in(sym, sizeof sym, "sym.gguf");
    path_in(hard, sizeof hard, "hard.gguf");
    path_in(other, sizeof other, "other.gguf");
    snprintf(dotted, sizeof dotted, "%s/./in.gguf", g_dir);
    CHECK_OK(write_model(in, 4, 0.0f, "in"));
    CHECK(symlink(in, sym) == 0);
    CHECK(link(in, hard) == 0);
    CHECK_STATUS(formats_check_output(in, in), CT_ERR_INVALID_ARG);
    CHECK_MSG(strstr(ct_last_error(), "same file") != NULL, "%s", ct_last_error());
    CHECK_STATUS(formats_check_output(dotted, in), CT_ERR_INVALID_ARG);
    CHECK_STATUS(formats_check_output(sym, in), CT_ERR_INVALID_ARG);
    CHECK_STATUS(formats_check_output(in, sym), CT_ERR_INVALID_ARG);
    CHECK_STATUS(formats_check_output(hard, in), CT_ERR_INVALID_ARG);
    CHECK_OK(formats_check_output(other, in)); /* absent: fine */
    CHECK_OK(write_model(other, 4, 0.0f, "other"));
    CHECK_OK(formats_check_output(other, in)); /* another file: fine, it will be replaced */
    unlink(in);
    unlink(sym);
    unlink(hard);
    unlink(other);
}

int main(void)
{
    const char *base = getenv("CTORCH_TEST_TMP");
    snprintf(g_dir, sizeof g_dir, "%s/gguf-atomic-XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "cannot create a folder under %s\n", base && *base ? base : "/tmp");
        return 1;
    }
    RUN(test_failed_write_keeps_old_file);
    RUN(test_cancel_keeps_old_file);
    RUN(test_good_write_replaces_keeps_mode);
    RUN(test_missing_folder);
    RUN(test_same_file_refused);
    rmdir(g_dir);
    return th_finish();
}
