/* Residency of storage copies across devices, prefetch, statistics, traces
 * (line and Chrome JSON) and ops from two threads at once. */
#include <pthread.h>
#include <unistd.h>

#include "exec_util.h"

static const int64_t g_big[2] = {128, 128}; /* 64 KiB of f32: routed to the head */
#define BIG_BYTES (128u * 128u * 4u)

static void reset_exec(int n_test) { xu_reset(n_test, "*", 64u * 1024u); }

static void test_results_stay_on_device(void)
{
    reset_exec(1);
    ct_tensor *x = xu_host_f32(2, g_big, 1, 0), *r = NULL, *r2 = NULL, *r3 = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &r));
    CHECK_LAST("add@test:0/capability");
    /* x went up once although it is both operands; r exists only on the device */
    CHECK(test_backend_uploaded(0) == BIG_BYTES);
    CHECK(!strcmp(xu_residency(x), "cpu,test:0"));
    CHECK_MSG(r && !strcmp(xu_residency(r), "test:0"), "r on %s", xu_residency(r));
    CHECK(test_backend_downloaded(0) == 0);
    /* a second op on r uploads nothing */
    CHECK_OK(xu_binary(CT_OP_ADD, r, r, &r2));
    CHECK_LAST("add@test:0/capability");
    CHECK(test_backend_uploaded(0) == BIG_BYTES);
    CHECK(r2 && !strcmp(xu_residency(r2), "test:0"));
    /* reading on the host downloads once; both copies stay valid */
    const float *p = NULL;
    CHECK_OK(ct_tensor_data(r2, (const void **)&p));
    CHECK(test_backend_downloaded(0) == BIG_BYTES);
    CHECK(!strcmp(xu_residency(r2), "cpu,test:0"));
    int bad = 0;
    for (int i = 0; p && i < 128 * 128; i++) bad += p[i] != 4.0f * (float)(i % 1000);
    CHECK(bad == 0);
    CHECK_OK(ct_tensor_data(r2, (const void **)&p));
    double v;
    CHECK_OK(ct_tensor_item(r2, 5, &v));
    CHECK(test_backend_downloaded(0) == BIG_BYTES && v == 20.0);
    /* a host write invalidates the device copy: the next device op uploads again */
    float *w = NULL;
    CHECK_OK(ct_tensor_data_mut(r2, (void **)&w));
    CHECK(!strcmp(xu_residency(r2), "cpu"));
    for (int i = 0; w && i < 128 * 128; i++) w[i] = 1.0f;
    CHECK_OK(xu_binary(CT_OP_ADD, r2, r2, &r3));
    CHECK_LAST("add@test:0/capability");
    CHECK(test_backend_uploaded(0) == 2 * BIG_BYTES);
    CHECK_OK(ct_tensor_item(r3, 100, &v));
    CHECK(v == 2.0);
    /* views of a device tensor read through the same storage */
    ct_tensor *col = NULL, *cc = NULL;
    CHECK_OK(ct_select(r, 1, 3, &col));
    CHECK_OK(ct_tensor_item(col, 2, &v));
    CHECK(v == 2.0 * (2 * 128 + 3));
    /* a strided copy of a device tensor runs on the device when large */
    ct_tensor *tr = NULL;
    ct_tensor_free(r3);
    r3 = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &r3)); /* device-only again */
    CHECK_OK(ct_transpose(r3, 0, 1, &tr));
    CHECK_OK(ct_contiguous(tr, &cc));
    CHECK_LAST("copy@test:0/capability");
    CHECK_OK(ct_tensor_item(cc, 1, &v));
    CHECK(v == 2.0 * 128);
    /* statistics: uploads are bytes_in, downloads bytes_out */
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("test:0", &ds));
    CHECK_MSG(ds.bytes_in == test_backend_uploaded(0), "bytes_in %llu vs %llu", (unsigned long long)ds.bytes_in,
              (unsigned long long)test_backend_uploaded(0));
    CHECK_MSG(ds.bytes_out == test_backend_downloaded(0), "bytes_out %llu vs %llu", (unsigned long long)ds.bytes_out,
              (unsigned long long)test_backend_downloaded(0));
    CHECK(ds.ops == 5 && ds.fallbacks == 0);
    ct_tensor *all[] = {x, r, r2, r3, col, cc, tr};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_prefetch(void)
{
    reset_exec(2);
    ct_tensor *w = xu_host_f32(2, g_big, 1, 0);
    CHECK_OK(ct_tensor_prefetch(w, "test:1"));
    CHECK(!strcmp(xu_residency(w), "cpu,test:1"));
    CHECK(test_backend_uploaded(1) == BIG_BYTES);
    CHECK_OK(ct_tensor_prefetch(w, "test:1")); /* already there: no copy */
    CHECK(test_backend_uploaded(1) == BIG_BYTES);
    CHECK_OK(ct_tensor_prefetch(w, "cpu"));
    CHECK_OK(ct_tensor_prefetch(w, "test:0"));
    CHECK(!strcmp(xu_residency(w), "cpu,test:1,test:0"));
    ct_device_stats ds = {0};
    CHECK(xu_device_stats("test:1", &ds) && ds.bytes_in == BIG_BYTES);
    CHECK_STATUS(ct_tensor_prefetch(w, "test:5"), CT_ERR_NOT_FOUND);
    CHECK_STATUS(ct_tensor_prefetch(w, NULL), CT_ERR_NOT_FOUND);
    CHECK_STATUS(ct_tensor_prefetch(NULL, "cpu"), CT_ERR_INVALID_ARG);
    /* prefetching a device-only tensor to another device stages through the host */
    ct_tensor *r = NULL;
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(xu_binary(CT_OP_ADD, w, w, &r));
    CHECK_OK(ct_exec_force_device(NULL));
    CHECK(r && !strcmp(xu_residency(r), "test:0"));
    CHECK_OK(ct_tensor_prefetch(r, "test:1"));
    CHECK(!strcmp(xu_residency(r), "cpu,test:0,test:1"));
    double v;
    CHECK_OK(ct_tensor_item(r, 7, &v));
    CHECK(v == 14.0);
    ct_tensor_free(r);
    ct_tensor_free(w);
}

/* ---- traces ---- */

/* A small JSON syntax check (RFC 8259 values), enough to know a trace file loads. */
typedef struct jp { const char *s; int depth; } jp;
static bool jp_value(jp *p);
static void jp_ws(jp *p)
{
    while (*p->s == ' ' || *p->s == '\n' || *p->s == '\r' || *p->s == '\t') p->s++;
}
static bool jp_string(jp *p)
{
    if (*p->s != '"') return false;
    for (p->s++; *p->s != '"'; p->s++) {
        if (!*p->s || (unsigned char)*p->s < 0x20) return false;
        if (*p->s == '\\') {
            p->s++;
            if (!strchr("\"\\/bfnrtu", *p->s) || !*p->s) return false;
        }
    }
    p->s++;
    return true;
}
static bool jp_number(jp *p)
{
    const char *st = p->s;
    if (*p->s == '-') p->s++;
    if (*p->s == '0') p->s++;
    else if (*p->s >= '1' && *p->s <= '9') while (*p->s >= '0' && *p->s <= '9') p->s++;
    else return false;
    if (*p->s == '.') {
        p->s++;
        if (!(*p->s >= '0' && *p->s <= '9')) return false;
        while (*p->s >= '0' && *p->s <= '9') p->s++;
    }
    if (*p->s == 'e' || *p->s == 'E') {
        p->s++;
        if (*p->s == '+' || *p->s == '-') p->s++;
        if (!(*p->s >= '0' && *p->s <= '9')) return false;
        while (*p->s >= '0' && *p->s <= '9') p->s++;
    }
    return p->s > st;
}
static bool jp_seq(jp *p, char close, bool object)
{
    p->s++;
    jp_ws(p);
    if (*p->s == close) {
        p->s++;
        return true;
    }
    for (;;) {
        jp_ws(p);
        if (object) {
            if (!jp_string(p)) return false;
            jp_ws(p);
            if (*p->s++ != ':') return false;
        }
        if (!jp_value(p)) return false;
        jp_ws(p);
        if (*p->s == ',') {
            p->s++;
            continue;
        }
        if (*p->s == close) {
            p->s++;
            return true;
        }
        return false;
    }
}
static bool jp_value(jp *p)
{
    jp_ws(p);
    if (++p->depth > 64) return false;
    bool ok;
    switch (*p->s) {
    case '{': ok = jp_seq(p, '}', true); break;
    case '[': ok = jp_seq(p, ']', false); break;
    case '"': ok = jp_string(p); break;
    case 't': ok = !strncmp(p->s, "true", 4) && (p->s += 4); break;
    case 'f': ok = !strncmp(p->s, "false", 5) && (p->s += 5); break;
    case 'n': ok = !strncmp(p->s, "null", 4) && (p->s += 4); break;
    default: ok = jp_number(p); break;
    }
    p->depth--;
    return ok;
}
static bool json_valid(const char *text)
{
    jp p = {text, 0};
    if (!jp_value(&p)) return false;
    jp_ws(&p);
    return *p.s == 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = 0;
    fclose(f);
    return buf;
}

/* dir/stem-PID.ext: the extension selects the trace format */
static void tmp_path(char *buf, size_t len, const char *stem, const char *ext)
{
    const char *dir = getenv("CTORCH_TEST_TMP");
    snprintf(buf, len, "%s/%s-%d.%s", dir && *dir ? dir : "/tmp", stem, (int)getpid(), ext);
}

static void run_mixed_ops(void)
{
    ct_tensor *a = xu_host_f32(2, g_big, 1, 0), *r = NULL;
    int64_t s4[1] = {4};
    ct_tensor *x = xu_host_f32(1, s4, 1, 0);
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &r)); /* test:0, capability */
    ct_tensor_free(r);
    r = NULL;
    CHECK_OK(xu_binary(CT_OP_MUL, x, x, &r)); /* cpu, size */
    ct_tensor_free(r);
    r = NULL;
    CHECK_OK(ct_exec_set_fault("test:0:relu:oom:1"));
    CHECK_OK(xu_unary(CT_OP_RELU, a, &r)); /* cpu, fallback */
    CHECK_OK(ct_exec_set_fault(NULL));
    ct_tensor_free(r);
    ct_tensor_free(a);
    ct_tensor_free(x);
}

static void test_trace_json(void)
{
    reset_exec(1);
    char path[512];
    tmp_path(path, sizeof path, "trace", "json");
    CHECK_OK(ct_exec_set_trace(path));
    run_mixed_ops();
    CHECK_OK(ct_exec_set_trace(NULL)); /* closes the file */
    char *text = slurp(path);
    CHECK_MSG(text != NULL, "no trace file at %s", path);
    if (text) {
        CHECK_MSG(json_valid(text), "trace is not valid JSON:\n%s", text);
        const char *need[] = {"\"traceEvents\"", "\"add\"", "\"mul\"", "\"relu\"", "\"test:0\"", "\"cpu\"",
                              "\"capability\"", "\"size\"", "\"fallback\"", "\"ph\":\"X\"", "thread_name"};
        for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) CHECK_MSG(strstr(text, need[i]), "trace lacks %s", need[i]);
        free(text);
    }
    remove(path);
    /* a trace with no ops is still a valid file */
    CHECK_OK(ct_exec_set_trace(path));
    CHECK_OK(ct_exec_set_trace("0"));
    text = slurp(path);
    CHECK(text && json_valid(text));
    free(text);
    remove(path);
    /* the environment variable, closed by shutdown */
    setenv("CTORCH_TRACE", path, 1);
    CHECK_OK(ct_exec_reinit());
    run_mixed_ops();
    unsetenv("CTORCH_TRACE");
    CHECK_OK(ct_exec_set_trace(NULL));
    text = slurp(path);
    CHECK(text && json_valid(text) && strstr(text, "\"relu\""));
    free(text);
    remove(path);
    CHECK_STATUS(ct_exec_set_trace("/nonexistent-dir/x/trace.json"), CT_ERR_IO);
    CHECK(strstr(ct_last_error(), "/nonexistent-dir/x/trace.json") != NULL);
}

static void test_trace_lines(void)
{
    reset_exec(1);
    char path[512];
    tmp_path(path, sizeof path, "trace", "txt");
    fflush(stderr);
    int saved = dup(2);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL && saved >= 0);
    if (!f || saved < 0) return;
    dup2(fileno(f), 2);
    ct_status s1 = ct_exec_set_trace("1");
    run_mixed_ops();
    ct_status s2 = ct_exec_set_trace(NULL);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    fclose(f);
    CHECK(s1 == CT_OK && s2 == CT_OK);
    char *text = slurp(path);
    if (text) {
        const char *need[] = {"add", "mul", "relu", "test:0", "cpu", "capability", "size", "fallback", "[128, 128]"};
        for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) CHECK_MSG(strstr(text, need[i]), "trace lacks %s:\n%s", need[i], text);
        int lines = 0;
        for (const char *c = text; *c; c++) lines += *c == '\n';
        CHECK(lines >= 3);
        free(text);
    }
    remove(path);
}

static void test_stats(void)
{
    reset_exec(1);
    ct_device_stats s[EXEC_MAX_DEVICES];
    int n = ct_exec_stats(s, EXEC_MAX_DEVICES);
    /* the cpu, the machine's own devices (an OpenCL device), and test:0 */
    CHECK(n >= 2 && n == ct_device_count());
    for (int i = 0; i < n; i++) CHECK(s[i].ops == 0 && s[i].bytes_in == 0 && s[i].fallbacks == 0);
    CHECK(ct_exec_stats(NULL, 0) == n);
    CHECK(ct_exec_stats(s, 1) == n);
    CHECK(!strcmp(s[0].device, "cpu"));
    run_mixed_ops();
    ct_device_stats d = {0};
    CHECK(xu_device_stats("test:0", &d) && d.ops == 1 && d.fallbacks == 1);
    CHECK(xu_device_stats("cpu", &d) && d.ops == 2 && d.fallbacks == 0);
    /* the summary as text, snprintf's size rule */
    size_t need = ct_exec_stats_format(NULL, 0);
    CHECK(need > 0);
    char *text = malloc(need + 1), small[16];
    CHECK(ct_exec_stats_format(text, need + 1) == need && strlen(text) == need);
    CHECK(strstr(text, "executor summary") != NULL);
    char row[160];
    snprintf(row, sizeof row, "  %-10s %10d", "test:0", 1); /* its one op */
    CHECK_MSG(strstr(text, row) != NULL, "no '%s' in:\n%s", row, text);
    CHECK(ct_exec_stats_format(small, sizeof small) == need && strlen(small) == sizeof small - 1);
    CHECK(!strncmp(small, text, sizeof small - 1));
    free(text);
    ct_exec_stats_reset();
    CHECK(xu_device_stats("cpu", &d) && d.ops == 0);
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_STATUS(ct_exec_last(NULL), CT_ERR_INVALID_ARG);
    CHECK(!strcmp(ct_route_reason_name(CT_REASON_FORCED), "forced") && !strcmp(ct_route_reason_name((ct_route_reason)99), "unknown"));
}

/* ---- two threads ---- */

typedef struct worker {
    const char *force; /* NULL: default routing */
    const char *want;  /* expected last route */
    const ct_tensor *a;
    int errors;
} worker;

static void *work(void *arg)
{
    worker *w = arg;
    if (w->force && ct_exec_force_device(w->force) != CT_OK) w->errors++;
    for (int it = 0; it < 20; it++) {
        ct_tensor *r = NULL;
        if (xu_binary(CT_OP_ADD, w->a, w->a, &r) != CT_OK) {
            w->errors++;
            continue;
        }
        char buf[128];
        if (strcmp(xu_last(buf, sizeof buf), w->want)) w->errors++;
        double v = 0;
        if (ct_tensor_item(r, 999, &v) != CT_OK || v != 2.0 * 999) w->errors++;
        ct_tensor_free(r);
    }
    ct_exec_force_device(NULL);
    return NULL;
}

static void test_two_threads(void)
{
    reset_exec(1);
    ct_tensor *a = xu_host_f32(2, g_big, 1, 0), *b = xu_host_f32(2, g_big, 1, 0);
    worker w[3] = {{"cpu", "add@cpu/forced", a, 0}, {NULL, "add@test:0/capability", b, 0}, {"cpu", "add@cpu/forced", a, 0}};
    pthread_t th[3];
    for (int i = 0; i < 3; i++) CHECK(pthread_create(&th[i], NULL, work, &w[i]) == 0);
    for (int i = 0; i < 3; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 3; i++) CHECK_MSG(w[i].errors == 0, "worker %d: %d errors", i, w[i].errors);
    ct_device_stats d = {0};
    CHECK(xu_device_stats("cpu", &d) && d.ops == 40);
    CHECK(xu_device_stats("test:0", &d) && d.ops == 20);
    /* the forcing was per thread: this one routes normally */
    ct_tensor *r = NULL;
    CHECK_OK(xu_binary(CT_OP_ADD, a, a, &r));
    CHECK_LAST("add@test:0/capability");
    ct_tensor_free(r);
    ct_tensor_free(a);
    ct_tensor_free(b);
}

/* Moving a result from test:0 to test:1: peer to peer when the backend allows it,
 * else staged through the host; each counted under its method, numbers unchanged. */
static void move_between_devices(bool peer)
{
    reset_exec(2);
    test_backend_set_peer(peer);
    ct_tensor *x = xu_host_f32(2, g_big, 1, 0), *r = NULL, *r2 = NULL;
    CHECK_OK(ct_exec_force_device("test:0"));
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &r));
    CHECK_OK(ct_exec_force_device("test:1"));
    CHECK_OK(xu_binary(CT_OP_ADD, r, r, &r2));
    ct_exec_force_device(NULL);
    CHECK(r && !strcmp(xu_residency(r), peer ? "test:0,test:1" : "cpu,test:0,test:1"));
    ct_transfer_stats t[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(t);
    CHECK(t[CT_TRANSFER_HOST_TO_DEVICE].count == 1 && t[CT_TRANSFER_HOST_TO_DEVICE].bytes == BIG_BYTES); /* x */
    CHECK(t[CT_TRANSFER_PEER].count == (peer ? 1u : 0u));
    CHECK(t[CT_TRANSFER_STAGED].count == (peer ? 0u : 1u));
    CHECK(t[CT_TRANSFER_DEVICE_TO_HOST].count == 0); /* a staging download is not a separate transfer */
    CHECK(test_backend_peer_bytes(1) == (peer ? BIG_BYTES : 0));
    CHECK(test_backend_downloaded(0) == (peer ? 0 : BIG_BYTES));
    ct_device_stats d0 = {0}, d1 = {0};
    CHECK(xu_device_stats("test:0", &d0) && xu_device_stats("test:1", &d1));
    CHECK(d0.bytes_out == BIG_BYTES && d1.bytes_in == BIG_BYTES);
    /* the backend has a peer path, so the pair's method is peer; a pair without access stages at run time */
    CHECK(ct_exec_transfer_method("test:0", "test:1") == CT_TRANSFER_PEER);
    CHECK(ct_exec_transfer_method("cpu", "test:1") == CT_TRANSFER_HOST_TO_DEVICE);
    CHECK(ct_exec_transfer_method("test:1", "cpu") == CT_TRANSFER_DEVICE_TO_HOST);
    CHECK(ct_exec_transfer_method("cpu", "cpu") == CT_TRANSFER_NONE);
    const float *p = NULL;
    CHECK_OK(ct_tensor_data(r2, (const void **)&p));
    int bad = 0;
    for (int i = 0; p && i < 128 * 128; i++) bad += p[i] != 4.0f * (float)(i % 1000);
    CHECK(bad == 0);
    ct_tensor_free(x);
    ct_tensor_free(r);
    ct_tensor_free(r2);
}

static void test_transfer_peer(void) { move_between_devices(true); }
static void test_transfer_staged(void) { move_between_devices(false); }

int main(void)
{
    RUN(test_results_stay_on_device);
    RUN(test_prefetch);
    RUN(test_transfer_peer);
    RUN(test_transfer_staged);
    RUN(test_trace_json);
    RUN(test_trace_lines);
    RUN(test_stats);
    RUN(test_two_threads);
    test_backend_uninstall();
    return th_finish();
}
