/* The OpenCL backend core on whatever OpenCL device exists (PoCL in CI): transfers at odd
 * byte offsets, events between OpenCL and the CPU, the kernel cache on disk, failover
 * under injected faults, and a program that does not build. Exits 77 without a device. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "devcheck.h"

#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/ocl_internal.h"
#include "exec/exec.h"

static char g_dev[32];

/* Bytes written on the device into a view at an odd byte offset come back to the host
 * exactly there (a range download), and the host bytes around them are untouched. */
static void test_round_trip_odd_offsets(void)
{
    enum { N = 1001 };
    int8_t host[N];
    for (int i = 0; i < N; i++) host[i] = (int8_t)(i * 7 - 50);
    int64_t shape[1] = {N};
    ct_tensor *t = NULL, *v = NULL, *src = NULL;
    CHECK_OK(ct_tensor_from_data(1, shape, CT_I8, host, &t));
    CHECK_OK(ct_tensor_place(t, g_dev));
    CHECK_OK(ct_narrow(t, 0, 3, 501, &v));
    int64_t s1[1] = {501};
    CHECK_OK(ct_full(1, s1, CT_I8, 9, &src));
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_copy_(v, src));
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, g_dev), "copy ran on %s", rec.device);
    CHECK_OK(ct_exec_force_device(NULL));
    const void *data = NULL;
    CHECK_OK(ct_tensor_data(t, &data));
    const int8_t *d = data;
    int bad = -1;
    for (int i = 0; d && i < N && bad < 0; i++)
        if (d[i] != (i >= 3 && i < 504 ? 9 : host[i])) bad = i;
    CHECK_MSG(d && bad < 0, "element %d: %d", bad, bad >= 0 ? d[bad] : 0);
    ct_tensor_free(src);
    ct_tensor_free(v);
    ct_tensor_free(t);
}

/* A device whose memory is the host's and that passed the zero-copy probe (PoCL:
 * CT_DEVICE_HOST_SHARED) reads and writes host data in place: the transfers are zero-copy,
 * and the values are right both ways with a CPU op writing the same bytes between two device
 * ops. With CTORCH_OPENCL_ZERO_COPY=0 the same work copies. Values i % 13 keep every product
 * exact in f32. */
static void zero_copy_round(bool shared)
{
    enum { N = 4099 };
    float v[N];
    for (int i = 0; i < N; i++) v[i] = (float)(i % 13);
    int64_t shape[1] = {N};
    ct_tensor *x = NULL, *y = NULL;
    CHECK_OK(ct_tensor_from_data(1, shape, CT_F32, v, &x));
    ct_exec_stats_reset();
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_mul_scalar(x, 2.0, &y)); /* x read on the device */
    CHECK_OK(ct_mul_out(x, x, x));       /* x = v^2 written there */
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_add_out(x, x, x)); /* 2 v^2 by the host, into the same bytes */
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_mul_out(x, x, x)); /* 4 v^4: the device sees the host's write */
    CHECK_OK(ct_exec_force_device(NULL));
    const float *px = NULL, *py = NULL;
    CHECK_OK(ct_tensor_data(x, (const void **)&px));
    CHECK_OK(ct_tensor_data(y, (const void **)&py));
    int bad = -1;
    for (int i = 0; px && py && i < N && bad < 0; i++)
        if (px[i] != 4 * v[i] * v[i] * v[i] * v[i] || py[i] != 2 * v[i]) bad = i;
    CHECK_MSG(px && py && bad < 0, "element %d: x %g y %g (v %g)", bad, bad >= 0 ? px[bad] : 0.0, bad >= 0 ? py[bad] : 0.0,
              bad >= 0 ? v[bad] : 0.0);
    ct_transfer_stats t[CT_TRANSFER_METHOD_COUNT];
    ct_exec_transfer_stats(t);
    /* x: in, back to the host, in again, back; y: made on the device, a copy of its own */
    uint64_t sh = t[CT_TRANSFER_SHARED].count, up = t[CT_TRANSFER_HOST_TO_DEVICE].count,
             down = t[CT_TRANSFER_DEVICE_TO_HOST].count;
    CHECK_MSG(shared ? sh == 4 && up == 0 && down == 1 : sh == 0 && up == 2 && down == 3,
              "%s: %llu zero-copy, %llu uploads, %llu downloads", shared ? "shared" : "copying", (unsigned long long)sh,
              (unsigned long long)up, (unsigned long long)down);
    ct_tensor_free(y);
    ct_tensor_free(x);
}

static uint32_t dev_flags(void)
{
    ct_device_info info;
    for (int i = 0; i < ct_device_count(); i++)
        if (ct_device_get(i, &info) == CT_OK && !strcmp(info.name, g_dev)) return info.flags;
    return 0;
}

/* The devices made anew (a reinit keeps the ones it has), so the probe runs again. */
static void reinit_chain(void)
{
    ct_exec_shutdown();
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_exec_set_devices("opencl,cpu"));
}

static void test_zero_copy(void)
{
    uint32_t f = dev_flags();
    if (!(f & CT_DEVICE_UNIFIED)) return th_skip("%s does not share the host's memory", g_dev);
    CHECK_MSG(f & CT_DEVICE_HOST_SHARED, "%s reports unified memory but failed the zero-copy probe", g_dev);
    if (!(f & CT_DEVICE_HOST_SHARED)) return;
    zero_copy_round(true);
    setenv("CTORCH_OPENCL_ZERO_COPY", "0", 1);
    reinit_chain();
    CHECK(!(dev_flags() & CT_DEVICE_HOST_SHARED));
    zero_copy_round(false);
    unsetenv("CTORCH_OPENCL_ZERO_COPY");
    reinit_chain();
    CHECK(dev_flags() & CT_DEVICE_HOST_SHARED);
}

/* Reads into pinned host memory (ct_host_pin) land in the range's shadow and reach the
 * caller's bytes by the time the read returns, at any offset inside the range, read
 * after read; after ct_host_unpin reads go straight to the bytes again. Forced on PoCL,
 * whose memory is the host's (a GPU pins by default). */
static void check_read(const ct_tensor *x, double scale, float *dst, int n, const char *what)
{
    ct_tensor *y = NULL;
    CHECK_OK(ct_exec_force_device(g_dev));
    CHECK_OK(ct_mul_scalar(x, scale, &y));
    CHECK_OK(ct_exec_force_device(NULL));
    for (int i = 0; i < n; i++) dst[i] = -1.0f;
    CHECK_OK(ct_tensor_to_host(y, dst, (size_t)n * sizeof *dst));
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        if (dst[i] != (float)(scale * (i % 97))) bad = i;
    CHECK_MSG(bad < 0, "%s: element %d is %g, want %g", what, bad, bad >= 0 ? dst[bad] : 0.0,
              bad >= 0 ? scale * (bad % 97) : 0.0);
    ct_tensor_free(y);
}

static void test_pinned_reads(void)
{
    enum { N = 5000, CAP = 16384 };
    float *host = malloc(N * sizeof *host), *buf = aligned_alloc(4096, CAP * sizeof *buf);
    if (!host || !buf) return th_skip("out of memory");
    for (int i = 0; i < N; i++) host[i] = (float)(i % 97);
    int64_t shape[1] = {N};
    ct_tensor *x = NULL;
    CHECK_OK(ct_tensor_from_data(1, shape, CT_F32, host, &x));
    ocl_test_pin(true);
    CHECK_OK(ct_host_pin(buf, CAP * sizeof *buf));
    check_read(x, 2.0, buf, N, "pinned, at its start");
    check_read(x, 3.0, buf + 777, N, "pinned, at an offset");
    check_read(x, 5.0, buf + 777, N, "pinned, read again");
    ct_host_unpin(buf);
    check_read(x, 7.0, buf + 5, N, "unpinned");
    ocl_test_pin(false);
    ct_tensor_free(x);
    free(buf);
    free(host);
}

/* Work alternating between the OpenCL queue and the CPU, with no explicit sync: each
 * consumer must see its producer's result (events order them). The device's ops are
 * slow enough (transcendentals over 4M elements) that it is still busy when the CPU op
 * that reads them is submitted. Checked against the same chain run on the CPU alone
 * (NMSE 1e-10: sin and exp are a few ulp apart between OpenCL and libm). */
static ct_status alternate(const char *dev, ct_tensor *a, ct_tensor **out)
{
    ct_tensor *x = NULL, *x2 = NULL, *y = NULL, *z = NULL;
    ct_status s = ct_exec_force_device(dev);
    if (s == CT_OK) s = ct_sin(a, &x);
    if (s == CT_OK) s = ct_exp(x, &x2);
    if (s == CT_OK) s = ct_exec_force_device("cpu");
    if (s == CT_OK) s = ct_add_scalar(x2, 1, &y); /* the cpu reads the device's result */
    if (s == CT_OK) s = ct_exec_force_device(dev);
    if (s == CT_OK) s = ct_mul(y, x2, &z); /* the device reads the cpu's result and its own */
    if (s == CT_OK) s = ct_exec_force_device("cpu");
    if (s == CT_OK) s = ct_sub(z, a, out);
    ct_exec_force_device(NULL);
    ct_tensor_free(x);
    ct_tensor_free(x2);
    ct_tensor_free(y);
    ct_tensor_free(z);
    return s;
}

static void test_events_between_devices(void)
{
    int64_t shape[2] = {2048, 2048};
    th_rng r = {5};
    ct_tensor *a = th_random(&r, 2, shape, CT_F32, -1, 1), *got = NULL, *ref = NULL;
    CHECK_OK(alternate(g_dev, a, &got));
    CHECK_OK(alternate("cpu", a, &ref));
    double *g = got ? th_values(got) : NULL, *w = ref ? th_values(ref) : NULL;
    int nonfinite = 0;
    double nmse = g && w ? devcheck_nmse(g, w, 2048 * 2048, &nonfinite) : INFINITY;
    CHECK_MSG(!nonfinite && nmse <= 1e-10, "NMSE %.3g against the cpu alone", nmse);
    free(g);
    free(w);
    ct_tensor_free(got);
    ct_tensor_free(ref);
    ct_tensor_free(a);
    CHECK_OK(ct_device_sync(g_dev));
}

static ct_status run_one_op(void)
{
    int64_t shape[1] = {1000};
    ct_tensor *a = NULL, *b = NULL;
    ct_status s = ct_exec_force_device(g_dev);
    if (s == CT_OK) s = ct_full(1, shape, CT_F32, 2, &a);
    if (s == CT_OK) s = ct_exp(a, &b);
    ct_exec_force_device(NULL);
    double v = 0;
    if (s == CT_OK) s = ct_tensor_item(b, 999, &v);
    if (s == CT_OK && fabs(v - exp(2.0)) > 1e-5) s = CT_ERR_DEVICE_FAULT;
    ct_tensor_free(a);
    ct_tensor_free(b);
    return s;
}

/* The second process of test_kernel_cache: one op on the OpenCL device the parent used
 * (found by its description: the numbering may differ from process to process), then the
 * build counts, or "absent" and the OpenCL devices this process sees. */
static int child_run(const char *desc)
{
    char seen[512] = "";
    size_t at = 0;
    for (int i = 0; i < ct_device_count(); i++) {
        ct_device_info info;
        if (ct_device_get(i, &info) != CT_OK || info.kind != CT_DEVICE_OPENCL) continue;
        at += (size_t)snprintf(seen + at, at < sizeof seen ? sizeof seen - at : 0, "%s%s (%s)", at ? ", " : "",
                               info.name, info.description);
        if (at >= sizeof seen) at = sizeof seen - 1;
        if (strcmp(info.description, desc) || g_dev[0]) continue;
        snprintf(g_dev, sizeof g_dev, "%s", info.name);
    }
    if (!g_dev[0]) {
        printf("absent: %s\n", seen);
        return 1;
    }
    ct_status s = run_one_op();
    int c, l;
    ocl_build_counts(&c, &l);
    printf("compiled %d cached %d\n", c, l);
    return s == CT_OK ? 0 : 1;
}

/* Programs come from the disk cache once built: after the devices are made again in
 * this process, and in a second process (this program run with --child). */
static void test_kernel_cache(void)
{
    char dir[256];
    const char *tmp = getenv("CTORCH_TEST_TMP");
    snprintf(dir, sizeof dir, "%s/ocl-cache-%ld", tmp ? tmp : "/tmp", (long)getpid());
    setenv("CTORCH_CACHE_DIR", dir, 1);
    ct_exec_shutdown(); /* fresh devices: no program built yet */
    CHECK_OK(ct_exec_init());
    int c0, l0, c1, l1, c2, l2;
    ocl_build_counts(&c0, &l0);
    CHECK_OK(run_one_op());
    ocl_build_counts(&c1, &l1);
    CHECK_MSG(c1 == c0 + 1 && l1 == l0, "first build: %d compiled, %d from the cache (want 1, 0)", c1 - c0, l1 - l0);
    ct_exec_shutdown();
    CHECK_OK(run_one_op());
    ocl_build_counts(&c2, &l2);
    CHECK_MSG(c2 == c1 && l2 == l1 + 1, "rebuilt devices: %d compiled, %d from the cache (want 0, 1)", c2 - c1, l2 - l1);
    ct_device_info info = {0};
    for (int i = 0; i < ct_device_count(); i++)
        if (ct_device_get(i, &info) == CT_OK && !strcmp(info.name, g_dev)) break;
    char cmd[800], line[600] = "";
    snprintf(cmd, sizeof cmd, "CTORCH_CACHE_DIR='%s' /proc/%ld/exe --child '%s'", dir, (long)getpid(), info.description);
    FILE *p = popen(cmd, "r");
    int cc = -1, cl = -1;
    if (p) {
        if (!fgets(line, sizeof line, p) || sscanf(line, "compiled %d cached %d", &cc, &cl) != 2) cc = cl = -1;
        pclose(p);
    }
    if (!strncmp(line, "absent", 6)) /* seen on the H100 host: NVIDIA's OpenCL lists no GPU to a child process */
        fprintf(stderr, "  second process: %s is not visible there (%.*s): cross-process check not run on it\n",
                info.description, (int)strcspn(line, "\n"), line);
    else
        CHECK_MSG(cc == 0 && cl == 1, "second process on %s: %d compiled, %d from the cache (want 0, 1) %s",
                  info.description, cc, cl, line);
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    CHECK(system(rm) == 0);
    unsetenv("CTORCH_CACHE_DIR");
    ct_exec_shutdown();
    CHECK_OK(ct_exec_set_devices("opencl,cpu"));
}

/* An op that fails on the device (CTORCH_FAULT) finishes on the CPU with the same
 * answer; an allocation beyond the device fails synchronously as out of memory. */
static void test_failover(void)
{
    int64_t shape[2] = {300, 257};
    th_rng r = {9};
    ct_tensor *a = th_random(&r, 2, shape, CT_F32, -3, 3), *ref = NULL;
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_silu(a, &ref));
    CHECK_OK(ct_exec_force_device(NULL));
    const char *kinds[] = {"oom", "fault"};
    for (int i = 0; i < 2; i++) {
        char spec[64];
        snprintf(spec, sizeof spec, "%s:silu:%s", g_dev, kinds[i]);
        CHECK_OK(ct_exec_set_fault(spec));
        ct_tensor *got = NULL;
        CHECK_OK(ct_silu(a, &got));
        ct_exec_record rec;
        CHECK_OK(ct_exec_last(&rec));
        CHECK_MSG(!strcmp(rec.device, "cpu") && rec.reason == CT_REASON_FALLBACK, "%s: ran on %s (%s)", kinds[i],
                  rec.device, ct_route_reason_name(rec.reason));
        double *g = got ? th_values(got) : NULL, *w = th_values(ref);
        int nonfinite = 0;
        CHECK_MSG(g && w && devcheck_nmse(g, w, 300 * 257, &nonfinite) == 0 && !nonfinite, "%s: answer differs", kinds[i]);
        free(g);
        free(w);
        ct_tensor_free(got);
        CHECK_OK(ct_exec_set_fault(NULL));
    }
    /* with no fault the same op runs on the device (so the above was the fallback at work) */
    ct_tensor *got = NULL;
    CHECK_OK(ct_silu(a, &got));
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, g_dev), "silu ran on %s", rec.device);
    ct_tensor_free(got);
    ct_tensor_free(ref);
    ct_tensor_free(a);

    ct_device *dev = exec_find_device(g_dev);
    const ocl_dev_info *in = dev ? ocl_info(dev) : NULL;
    ct_buffer buf = {0};
    if (in) CHECK_STATUS(dev->ops->alloc(dev, (size_t)in->max_alloc + 1, &buf), CT_ERR_DEVICE_OOM);
    uint64_t free0 = 0, total = 0, free1 = 0;
    CHECK_OK(ct_device_memory(g_dev, &free0, &total));
    if (dev && dev->ops->alloc(dev, (size_t)64 << 20, &buf) == CT_OK) {
        CHECK_OK(ct_device_memory(g_dev, &free1, &total));
        CHECK_MSG(free1 + ((uint64_t)64 << 20) <= free0, "free memory %llu -> %llu after 64 MiB",
                  (unsigned long long)free0, (unsigned long long)free1);
        dev->ops->release(dev, &buf);
    } else {
        CHECK_MSG(false, "a 64 MiB buffer: %s", ct_last_error());
    }
    /* an op's temporaries count while they live and come back when freed */
    cl_mem m = NULL;
    CHECK_OK(ct_device_memory(g_dev, &free0, &total));
    if (dev && ocl_tmp_alloc(dev, (size_t)16 << 20, &m) == CT_OK) {
        CHECK_OK(ct_device_memory(g_dev, &free1, &total));
        CHECK(free1 + ((uint64_t)16 << 20) <= free0);
        ocl_tmp_free(dev, m, (size_t)16 << 20);
        CHECK_OK(ct_device_memory(g_dev, &free1, &total));
        CHECK_MSG(free1 == free0, "free memory %llu after the temporary, %llu before", (unsigned long long)free1,
                  (unsigned long long)free0);
    } else {
        CHECK_MSG(false, "a 16 MiB temporary: %s", ct_last_error());
    }
    if (dev) CHECK_STATUS(ocl_tmp_alloc(dev, (size_t)in->max_alloc + 1, &m), CT_ERR_DEVICE_OOM);
}

/* A program that does not build makes its ops unsupported (they run on the CPU), and its
 * build log reaches the trace. */
static void test_program_that_fails(void)
{
    char path[256];
    const char *tmp = getenv("CTORCH_TEST_TMP");
    snprintf(path, sizeof path, "%s/ocl-trace-%ld.json", tmp ? tmp : "/tmp", (long)getpid());
    ocl_source_override("ew", "kernel void ew_add_broken(global float *x) { x[0] = undeclared_name; }\n");
    ct_exec_shutdown();
    CHECK_OK(ct_exec_set_devices("opencl,cpu"));
    CHECK_OK(ct_exec_set_trace(path));
    CHECK(!ct_device_supports(g_dev, "add", CT_F32));
    int64_t shape[1] = {100000};
    ct_tensor *a = NULL, *b = NULL;
    CHECK_OK(ct_ones(1, shape, CT_F32, &a));
    CHECK_OK(ct_add(a, a, &b));
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, "cpu"), "add ran on %s", rec.device);
    double v = 0;
    CHECK_OK(ct_tensor_item(b, 5, &v));
    CHECK(v == 2);
    ct_tensor_free(a);
    ct_tensor_free(b);
    CHECK_OK(ct_exec_set_trace(NULL));
    FILE *f = fopen(path, "r");
    char text[1 << 16] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    if (f) fclose(f);
    CHECK_MSG(strstr(text, "program 'ew' does not build") && strstr(text, "undeclared_name"),
              "the trace lacks the build log:\n%.2000s", text);
    remove(path);
    ocl_source_override("ew", NULL);
    ct_exec_shutdown();
    CHECK_OK(ct_exec_set_devices("opencl,cpu"));
    CHECK(ct_device_supports(g_dev, "add", CT_F32));
}

/* CTORCH_OPENCL_OPTIONS reaches the compiler and keys the program cache: a source that only
 * builds with a macro defined builds with the option, and without it (same cache directory)
 * is compiled again and fails, rather than being served the binary built with it. */
static void test_build_options(void)
{
    const char *src = "#ifndef CT_OPT_PROBE\n#error the build options did not arrive\n#endif\n"
                      "kernel void ew_probe(global float *x) { x[0] = CT_OPT_PROBE; }\n";
    ocl_source_override("ew", src);
    setenv("CTORCH_OPENCL_OPTIONS", "-DCT_OPT_PROBE=2", 1);
    ct_exec_shutdown();
    CHECK_OK(ct_exec_set_devices("opencl,cpu"));
    ct_device *dev = exec_find_device(g_dev);
    CHECK_MSG(dev && ocl_program_ok(dev, "ew"), "the probe did not build with its option: %s", ct_last_error());
    unsetenv("CTORCH_OPENCL_OPTIONS");
    ct_exec_shutdown();
    CHECK_OK(ct_exec_set_devices("opencl,cpu"));
    dev = exec_find_device(g_dev);
    CHECK_MSG(dev && !ocl_program_ok(dev, "ew"), "the probe built without its option (a cached binary?)");
    ocl_source_override("ew", NULL);
    ct_exec_shutdown();
    CHECK_OK(ct_exec_set_devices("opencl,cpu"));
    CHECK(ct_device_supports(g_dev, "add", CT_F32));
}

/* A kernel's own work-group limit (what att_decode's size is capped by): positive and within
 * the device's for a kernel that builds, 0 for a kernel or a program that does not exist. */
static void test_kernel_wg(void)
{
    ct_device *dev = exec_find_device(g_dev);
    CHECK(dev != NULL);
    if (!dev) return;
    size_t wg = ocl_kernel_wg(dev, "attention", "att_decode");
    CHECK_MSG(wg > 0 && wg <= ocl_info(dev)->max_wg, "att_decode: %zu work-items at most (device: %zu)", wg,
              ocl_info(dev)->max_wg);
    CHECK(ocl_kernel_wg(dev, "attention", "no_such_kernel") == 0);
    CHECK(ocl_kernel_wg(dev, "no_such_program", "att_decode") == 0);
}

/* ocl_pack_bufs: each distinct buffer once in first-seen order, every operand's index
 * pointing at its own, the unused slots repeating the first; 0 past the cap or when off.
 * The buffers are only compared, never used, so any distinct handles do. */
static void test_pack_bufs(void)
{
    cl_mem a = (cl_mem)(uintptr_t)0x10, b = (cl_mem)(uintptr_t)0x20, c = (cl_mem)(uintptr_t)0x30;
    cl_mem mems[6] = {b, a, b, c, a, b}, bufs[4] = {0};
    cl_int idx[6] = {-1, -1, -1, -1, -1, -1};
    CHECK(ocl_pack_bufs(6, mems, 4, bufs, idx) == 3);
    CHECK(bufs[0] == b && bufs[1] == a && bufs[2] == c && bufs[3] == b);
    for (int i = 0; i < 6; i++) CHECK_MSG(idx[i] >= 0 && idx[i] < 3 && bufs[idx[i]] == mems[i], "operand %d", i);
    CHECK(ocl_pack_bufs(6, mems, 2, bufs, idx) == 0); /* 3 distinct, room for 2 */
    CHECK(ocl_pack_bufs(6, mems, 3, bufs, idx) == 3);
    ocl_test_pack(false);
    CHECK(ocl_pack_bufs(6, mems, 4, bufs, idx) == 0);
    ocl_test_pack(true);
    setenv("CTORCH_OPENCL_PACK", "0", 1);
    CHECK(ocl_pack_bufs(6, mems, 4, bufs, idx) == 0);
    unsetenv("CTORCH_OPENCL_PACK");
    CHECK(ocl_pack_bufs(1, mems, 1, bufs, idx) == 1 && idx[0] == 0);
}
#endif

int main(int argc, char **argv)
{
#ifdef CTORCH_HAVE_OPENCL
    if (argc == 3 && !strcmp(argv[1], "--child")) /* the second process of test_kernel_cache */
        return child_run(argv[2]);
#endif
    th_args(argc, argv);
#ifdef CTORCH_HAVE_OPENCL
    setenv("CTORCH_OPENCL_POISON", "1", 1);
    ct_exec_reinit();
    if (!devcheck_device("opencl", g_dev, sizeof g_dev)) return th_finish();
    if (ct_exec_set_devices("opencl,cpu") != CT_OK) th_skip("chain opencl,cpu: %s", ct_last_error());
    RUN(test_round_trip_odd_offsets);
    RUN(test_pinned_reads);
    RUN(test_zero_copy);
    RUN(test_events_between_devices);
    RUN(test_kernel_cache);
    RUN(test_failover);
    RUN(test_program_that_fails);
    RUN(test_build_options);
    RUN(test_kernel_wg);
    RUN(test_pack_bufs);
#else
    th_skip("the OpenCL backend is not built (no CL/cl.h at configure time)");
#endif
    return th_finish();
}
