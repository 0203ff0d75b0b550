/* The CUDA backend's core (src/backends/cuda/backend*.c) on a real GPU: copies at odd
 * offsets and sizes (small and multi-MiB pageable copies), ordering between the
 * GPU's queue and the CPU, stream-ordered reuse in the caching allocator, failover on an
 * injected and on real out-of-memory (the op finishes on the CPU with the same answer and
 * the statistics show the fallback), a late fault (the device is lost, its data reads as
 * CT_ERR_DEVICE_LOST, re-initialization heals it), and a recorded step captured as a CUDA
 * graph replaying equal to eager. Every test skips (77) without a CUDA device. */
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "devcheck.h"
#include "exec/exec.h"

static char g_dev[32];
static const char *dev_or_skip(void) { return devcheck_device("cuda", g_dev, sizeof g_dev); }

static uint64_t fallbacks_of(const char *dev)
{
    ct_device_stats st[16];
    int n = ct_exec_stats(st, 16);
    for (int i = 0; i < n && i < 16; i++)
        if (!strcmp(st[i].device, dev)) return st[i].fallbacks;
    return 0;
}

/* Host tensor of n f32 values v[i] = i * scale + shift (exact in f32 for the sizes used). */
static ct_tensor *ramp(int64_t n, float scale, float shift)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 4096) * scale + shift;
    ct_tensor *t = NULL;
    CHECK_OK(ct_tensor_from_data(1, (int64_t[]){n}, CT_F32, v, &t));
    free(v);
    return t;
}

/* ---- upload/download through the backend table, at odd offsets and sizes ---- */
static void test_roundtrip(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    ct_device *dev = exec_find_device(name);
    CHECK(dev != NULL);
    if (!dev) return;
    /* sizes from one byte to tens of MiB, at odd offsets */
    size_t sizes[] = {1, 3, 4097, (size_t)1 << 20, ((size_t)3 << 23) + 12345, ((size_t)7 << 23) + 3};
    size_t offs[] = {0, 1, 7};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (size_t oi = 0; oi < 3; oi++) {
            size_t n = sizes[si], off = offs[oi], total = off + n + 5;
            unsigned char *src = malloc(total), *dst = malloc(total);
            for (size_t i = 0; i < total; i++) src[i] = (unsigned char)(i * 131 + si * 7 + 1);
            memset(dst, 0, total);
            ct_buffer buf = {0};
            CHECK_OK(dev->ops->alloc(dev, total, &buf));
            CHECK_OK(dev->ops->upload(dev, &buf, off, src + off, n));
            /* a second, overlapping range at another odd offset */
            size_t off2 = off + n / 3, n2 = n - n / 3;
            CHECK_OK(dev->ops->download(dev, &buf, off, dst + off, n));
            CHECK_OK(dev->ops->sync(dev));
            CHECK_MSG(memcmp(src + off, dst + off, n) == 0, "round trip of %zu bytes at offset %zu differs", n, off);
            memset(dst, 0, total);
            CHECK_OK(dev->ops->download(dev, &buf, off2, dst + off2, n2));
            CHECK_OK(dev->ops->sync(dev));
            CHECK_MSG(memcmp(src + off2, dst + off2, n2) == 0, "partial download of %zu at %zu differs", n2, off2);
            CHECK_MSG(dst[off2 - (off2 ? 1 : 0)] == 0 || off2 == 0, "download wrote before its range");
            dev->ops->release(dev, &buf);
            free(src);
            free(dst);
        }
}

/* ---- ordering between the GPU's queue and the CPU ---- */
static void test_event_order(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    int64_t n = (int64_t)1 << 24;
    ct_tensor *u_cpu = NULL, *u = NULL, *y = NULL, *z = NULL, *w = NULL, *v = NULL;
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_rand(1, &n, CT_F32, 5, &u_cpu));
    CHECK_OK(ct_exec_force_device(name));
    CHECK_OK(ct_rand(1, &n, CT_F32, 5, &u)); /* the same Philox stream */
    CHECK_OK(ct_mul(u, u, &y));              /* queued on the GPU */
    CHECK_OK(ct_exec_force_device("cpu"));
    CHECK_OK(ct_add_scalar(y, 1.0, &z));    /* the CPU must wait for the GPU's result */
    CHECK_OK(ct_add_scalar(u_cpu, 2.0, &w)); /* produced on the CPU ... */
    CHECK_OK(ct_exec_force_device(name));
    CHECK_OK(ct_mul_scalar(w, 3.0, &v));      /* ... consumed on the GPU */
    CHECK_OK(ct_exec_force_device(NULL));
    const float *pu = NULL, *pz = NULL, *pv = NULL;
    CHECK_OK(ct_tensor_data(u_cpu, (const void **)&pu));
    CHECK_OK(ct_tensor_data(z, (const void **)&pz));
    CHECK_OK(ct_tensor_data(v, (const void **)&pv));
    int64_t bad = 0;
    for (int64_t i = 0; pu && pz && pv && i < n; i++) {
        float a = pu[i] * pu[i] + 1.0f, b = (pu[i] + 2.0f) * 3.0f;
        if (pz[i] != a || pv[i] != b) bad++;
    }
    CHECK_MSG(bad == 0, "%lld of %lld elements differ across the GPU/CPU hand-offs", (long long)bad, (long long)n);
    ct_tensor *ts[] = {u_cpu, u, y, z, w, v};
    for (int i = 0; i < 6; i++) ct_tensor_free(ts[i]);
}

/* ---- stream-ordered reuse: a freed block goes to the next allocation at once ---- */
static void test_reuse(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    enum { ROUNDS = 24 };
    int64_t n = (int64_t)1 << 20; /* 4 MiB per tensor */
    uint64_t free0 = 0, free1 = 0, total = 0;
    CHECK_OK(ct_device_sync(name));
    CHECK_OK(ct_device_memory(name, &free0, &total));
    ct_tensor *kept[ROUNDS] = {0};
    CHECK_OK(ct_exec_force_device(name));
    for (int i = 0; i < ROUNDS; i++) {
        ct_tensor *t = NULL;
        CHECK_OK(ct_full(1, &n, CT_F32, (double)i, &t));
        CHECK_OK(ct_add_scalar(t, 0.5, &kept[i]));
        ct_tensor_free(t); /* released while the add may still be queued: the next fill reuses it after */
    }
    CHECK_OK(ct_exec_force_device(NULL));
    CHECK_OK(ct_device_memory(name, &free1, &total));
    /* kept outputs and one recycled input: far below two fresh blocks per round */
    uint64_t used = free0 > free1 ? free0 - free1 : 0, block = (uint64_t)n * 4;
    CHECK_MSG(used <= (ROUNDS + 4) * block, "allocator grew by %llu bytes for %d kept 4 MiB tensors (no reuse?)",
              (unsigned long long)used, ROUNDS);
    for (int i = 0; i < ROUNDS; i++) {
        const float *p = NULL;
        CHECK_OK(ct_tensor_data(kept[i], (const void **)&p));
        int64_t bad = 0;
        for (int64_t j = 0; p && j < n; j++) bad += p[j] != (float)i + 0.5f;
        CHECK_MSG(bad == 0, "round %d: %lld elements wrong", i, (long long)bad);
        ct_tensor_free(kept[i]);
    }
}

/* ---- failover: injected OOM, the allocator's cap, and a device that is really full ---- */
static void check_fallback_add(const char *name, int64_t n, const char *what)
{
    ct_tensor *a = ramp(n, 0.5f, 1.0f), *b = ramp(n, 0.25f, -3.0f), *c = NULL;
    uint64_t fb0 = fallbacks_of(name);
    CHECK_OK(ct_add(a, b, &c));
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, "cpu") && rec.reason == CT_REASON_FALLBACK, "%s: add ran on %s (%s)", what,
              rec.device, ct_route_reason_name(rec.reason));
    CHECK_MSG(fallbacks_of(name) > fb0, "%s: the statistics show no fallback on %s", what, name);
    const float *pa = NULL, *pb = NULL, *pc = NULL;
    CHECK_OK(ct_tensor_data(a, (const void **)&pa));
    CHECK_OK(ct_tensor_data(b, (const void **)&pb));
    CHECK_OK(ct_tensor_data(c, (const void **)&pc));
    int64_t bad = 0;
    for (int64_t i = 0; pa && pb && pc && i < n; i++) bad += pc[i] != pa[i] + pb[i];
    CHECK_MSG(bad == 0, "%s: %lld wrong elements after the fallback", what, (long long)bad);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(c);
}

static void test_oom_fallback(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    char chain[64];
    snprintf(chain, sizeof chain, "%s,cpu", name);
    CHECK_OK(ct_exec_set_devices(chain));
    /* the executor's injection */
    char spec[64];
    snprintf(spec, sizeof spec, "%s:add:oom", name);
    CHECK_OK(ct_exec_set_fault(spec));
    check_fallback_add(name, 1 << 20, "CTORCH_FAULT oom");
    CHECK_OK(ct_exec_set_fault(NULL));
    /* the allocator's cap: 8 MiB for the device, 3 x 16 MiB wanted */
    setenv("CTORCH_CUDA_MEM_MB", "8", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_exec_set_devices(chain));
    check_fallback_add(name, 1 << 22, "allocator cap");
    unsetenv("CTORCH_CUDA_MEM_MB");
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_exec_set_devices(NULL));
}

/* cudaMalloc itself fails: the device is filled with tensors that live only there (nothing
 * to evict), then an add of 3 x 1 GiB must find its memory on the CPU. */
static void test_real_oom(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    setenv("CTORCH_CUDA_MEM_MB", "1073741824", 1); /* no cap: the device's own limit */
    CHECK_OK(ct_exec_reinit());
    char chain[64];
    snprintf(chain, sizeof chain, "%s,cpu", name);
    CHECK_OK(ct_exec_set_devices(chain));
    ct_tensor *fill[64] = {0};
    int nf = 0;
    uint64_t fr = 0, total = 0;
    CHECK_OK(ct_exec_force_device(name));
    /* the driver keeps some of what it reports free: approach in steps of at most 4 GiB,
     * each checked to have landed on the device */
    uint64_t gib = (uint64_t)1 << 30;
    while (nf < 64 && ct_device_memory(name, &fr, &total) == CT_OK && fr > 2 * gib) {
        uint64_t bytes = fr - 3 * gib / 2;
        if (bytes > 4 * gib) bytes = 4 * gib;
        int64_t n = (int64_t)(bytes / 4);
        ct_exec_record rec;
        if (ct_full(1, &n, CT_F32, 1.0, &fill[nf]) != CT_OK) break;
        bool there = ct_exec_last(&rec) == CT_OK && !strcmp(rec.device, name);
        nf++;
        if (!there) break; /* it did not fit after all: the device is as full as it gets */
        CHECK_OK(ct_device_sync(name));
    }
    CHECK_OK(ct_exec_force_device(NULL));
    CHECK_OK(ct_device_memory(name, &fr, &total));
    CHECK_MSG(fr <= 2 * gib, "could not fill the device (%llu bytes still free)", (unsigned long long)fr);
    check_fallback_add(name, (int64_t)1 << 28, "device full");
    for (int i = 0; i < nf; i++) ct_tensor_free(fill[i]);
    unsetenv("CTORCH_CUDA_MEM_MB");
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_exec_set_devices(NULL));
}

/* ---- a late fault: lost device, lost data, recovery after re-initialization ---- */
static void test_late_fault(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    setenv("CTORCH_CUDA_LATE_FAULT", "mul:2", 1);
    CHECK_OK(ct_exec_reinit());
    char chain[64];
    snprintf(chain, sizeof chain, "%s,cpu", name);
    CHECK_OK(ct_exec_set_devices(chain));
    ct_tensor *x = ramp(1 << 20, 0.5f, 0.0f), *y1 = NULL, *y2 = NULL, *z = NULL;
    CHECK_OK(ct_mul(x, x, &y1)); /* the first mul runs */
    CHECK_OK(ct_mul(x, x, &y2)); /* the second "breaks" the GPU; its error comes later */
    ct_exec_record rec;
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, name), "the mul ran on %s, not %s", rec.device, name);
    const void *p = NULL;
    CHECK_STATUS(ct_tensor_data(y2, &p), CT_ERR_DEVICE_LOST);
    CHECK_MSG(strstr(ct_last_error(), name) != NULL, "the message does not name %s: %s", name, ct_last_error());
    CHECK_STATUS(ct_tensor_data(y1, &p), CT_ERR_DEVICE_LOST); /* its only copy was there too */
    /* the device left the chain: the next op runs on the CPU, and right */
    CHECK_OK(ct_add(x, x, &z));
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, "cpu"), "after the loss add ran on %s", rec.device);
    double v = 0;
    CHECK_OK(ct_tensor_item(z, 3, &v));
    CHECK_NEAR(v, 3.0, 0);
    ct_tensor_free(y1);
    ct_tensor_free(y2);
    ct_tensor_free(z);
    /* re-initialization heals it */
    unsetenv("CTORCH_CUDA_LATE_FAULT");
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_exec_set_devices(chain));
    CHECK_OK(ct_mul(x, x, &y1));
    CHECK_OK(ct_exec_last(&rec));
    CHECK_MSG(!strcmp(rec.device, name), "after reinit the mul ran on %s", rec.device);
    CHECK_OK(ct_tensor_item(y1, 5, &v));
    CHECK_NEAR(v, 6.25, 0);
    ct_tensor_free(y1);
    ct_tensor_free(x);
    CHECK_OK(ct_exec_set_devices(NULL));
}

/* ---- a recorded step captured as a CUDA graph replays equal to eager ---- */
static ct_status step_ops(const ct_tensor *x, ct_tensor **out)
{
    ct_tensor *a = NULL, *b = NULL, *c = NULL;
    ct_status s = ct_mul(x, x, &a);
    if (s == CT_OK) s = ct_add_scalar(a, 0.25, &b);
    if (s == CT_OK) s = ct_swiglu(b, x, &c);
    if (s == CT_OK) s = ct_sum(c, NULL, 0, false, out); /* 3M elements: a temporary for partials */
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(c);
    return s;
}

static void test_graph(void)
{
    const char *name = dev_or_skip();
    if (!name) return;
    CHECK_OK(ct_exec_set_devices(name));
    int64_t n = 3000001;
    ct_tensor *x = NULL, *out = NULL;
    CHECK_OK(ct_rand(1, &n, CT_F32, 7, &x));
    CHECK_OK(ct_tensor_place(x, name));
    ct_step *st = NULL;
    CHECK_OK(ct_step_begin());
    ct_status s = step_ops(x, &out);
    CHECK_OK(ct_step_end(&st));
    CHECK_OK(s);
    ct_step_info info = {0};
    if (st) CHECK_OK(ct_step_get_info(st, &info));
    CHECK_MSG(info.captured, "the step (%d ops) was not captured as a CUDA graph", info.n_ops);
    for (int round = 0; round < 3 && st; round++) {
        /* new values in the step's input, then the replay and an eager run of the same ops */
        float *px = NULL;
        CHECK_OK(ct_tensor_data_mut(x, (void **)&px));
        for (int64_t i = 0; px && i < n; i++) px[i] = (float)((i * 37 + round * 11) % 1001) / 500.0f - 1.0f;
        CHECK_OK(ct_step_run(st));
        ct_tensor *eager = NULL;
        CHECK_OK(step_ops(x, &eager));
        double got = 0, want = 0;
        CHECK_OK(ct_tensor_item(out, 0, &got));
        CHECK_OK(ct_tensor_item(eager, 0, &want));
        /* both are the same kernels on the same data: the sum's order is fixed, so equal */
        CHECK_MSG(got == want, "round %d: replayed %.9g, eager %.9g", round, got, want);
        ct_tensor_free(eager);
    }
    ct_step_free(st);
    ct_tensor_free(out);
    ct_tensor_free(x);
    CHECK_OK(ct_exec_set_devices(NULL));
}

/* ---- the backend's settings, read in src/core/config.c (no GPU needed) ---- */
static void test_settings(void)
{
    struct { const char *var, *value; bool ok; } cases[] = {
        {"CTORCH_CUDA_LATE_FAULT", "add", true},     {"CTORCH_CUDA_LATE_FAULT", "rms_norm:3", true},
        {"CTORCH_CUDA_LATE_FAULT", "bogus", false},  {"CTORCH_CUDA_LATE_FAULT", "add:0", false},
        {"CTORCH_CUDA_LATE_FAULT", "add:", false},   {"CTORCH_CUDA_LATE_FAULT", "add:2x", false},
        {"CTORCH_CUDA_MEM_MB", "512", true},         {"CTORCH_CUDA_MEM_MB", "-1", false},
        {"CTORCH_CUDA_MEM_MB", "lots", false},       {"CTORCH_CUDA_POISON", "maybe", false},
        {"CTORCH_CUDA_TF32", "1", true},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv(cases[i].var, cases[i].value, 1);
        ct_status s = ct_exec_reinit();
        if (cases[i].ok) {
            CHECK_MSG(s == CT_OK, "%s=%s refused: %s", cases[i].var, cases[i].value, ct_last_error());
        } else {
            CHECK_MSG(s == CT_ERR_INVALID_ARG && strstr(ct_last_error(), cases[i].var),
                      "%s=%s: %s (%s)", cases[i].var, cases[i].value, ct_status_name(s), ct_last_error());
        }
        unsetenv(cases[i].var);
    }
    CHECK_OK(ct_exec_reinit());
}

int main(int argc, char **argv)
{
    setenv("CTORCH_CUDA_POISON", "1", 1);
    th_args(argc, argv);
    RUN(test_settings);
    RUN(test_roundtrip);
    RUN(test_event_order);
    RUN(test_reuse);
    RUN(test_oom_fallback);
    RUN(test_late_fault);
    RUN(test_graph);
    RUN(test_real_oom);
    ct_exec_shutdown();
    return th_finish();
}
