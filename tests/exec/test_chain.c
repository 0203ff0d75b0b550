/* The chain builder as a pure function of simulated inventories (platforms we
 * cannot build here included), and the public chain/device API on top of it. */
#include <stdlib.h>
#include <string.h>

#include "exec/exec.h"
#include "harness.h"
#include "test_backend.h"

static exec_inventory inv_of(int n, const ct_device_kind *kinds, const char *const *names)
{
    exec_inventory inv = {.n = n};
    for (int i = 0; i < n; i++) {
        inv.kind[i] = kinds[i];
        snprintf(inv.name[i], sizeof inv.name[i], "%s", names[i]);
    }
    return inv;
}

/* The chain as "name,name,..." for readable comparisons. */
static const char *chain_str(const exec_inventory *inv, const char *spec, bool disable_gpu, ct_status *st, char *buf,
                             size_t len)
{
    int chain[EXEC_MAX_DEVICES], n = -1;
    *st = exec_build_chain(inv, spec, disable_gpu, chain, &n);
    buf[0] = 0;
    if (*st != CT_OK) return buf;
    size_t pos = 0;
    for (int i = 0; i < n; i++) pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", i ? "," : "", inv->name[chain[i]]);
    return buf;
}

#define CHECK_CHAIN(inv, spec, dis, want)                                                         \
    do {                                                                                          \
        ct_status st__;                                                                           \
        char b__[256];                                                                            \
        const char *got__ = chain_str(inv, spec, dis, &st__, b__, sizeof b__);                    \
        CHECK_MSG(st__ == CT_OK && !strcmp(got__, want), "spec '%s': got '%s' (%s: %s), want '%s'", \
                  (spec) ? (spec) : "(null)", got__, ct_status_name(st__), ct_last_error(), want); \
    } while (0)

static void test_platform_defaults(void)
{
    ct_device_kind nv_k[] = {CT_DEVICE_CPU, CT_DEVICE_CUDA, CT_DEVICE_CUDA, CT_DEVICE_OPENCL};
    const char *nv_n[] = {"cpu", "cuda:0", "cuda:1", "opencl:0"};
    exec_inventory nv = inv_of(4, nv_k, nv_n);
    CHECK_CHAIN(&nv, NULL, false, "cuda:0,cuda:1,opencl:0,cpu");
    CHECK_CHAIN(&nv, "", false, "cuda:0,cuda:1,opencl:0,cpu");
    CHECK_CHAIN(&nv, "auto", false, "cuda:0,cuda:1,opencl:0,cpu");
    CHECK_CHAIN(&nv, "AUTO", false, "cuda:0,cuda:1,opencl:0,cpu");
    CHECK_CHAIN(&nv, NULL, true, "cpu");
    CHECK_CHAIN(&nv, "cuda:0", true, "cpu"); /* disabling GPUs beats an override */

    ct_device_kind amd_k[] = {CT_DEVICE_CPU, CT_DEVICE_OPENCL};
    const char *amd_n[] = {"cpu", "opencl:0"};
    exec_inventory amd = inv_of(2, amd_k, amd_n);
    CHECK_CHAIN(&amd, NULL, false, "opencl:0,cpu");

    ct_device_kind mac_k[] = {CT_DEVICE_CPU, CT_DEVICE_METAL, CT_DEVICE_COREML, CT_DEVICE_OPENCL};
    const char *mac_n[] = {"cpu", "metal:0", "coreml:0", "opencl:0"};
    exec_inventory mac = inv_of(4, mac_k, mac_n);
    CHECK_CHAIN(&mac, NULL, false, "coreml:0,metal:0,opencl:0,cpu");

    /* discovery order does not matter, only kinds */
    ct_device_kind mix_k[] = {CT_DEVICE_OPENCL, CT_DEVICE_CUDA, CT_DEVICE_CPU, CT_DEVICE_OPENCL};
    const char *mix_n[] = {"opencl:0", "cuda:0", "cpu", "opencl:1"};
    exec_inventory mix = inv_of(4, mix_k, mix_n);
    CHECK_CHAIN(&mix, NULL, false, "cuda:0,opencl:0,opencl:1,cpu");

    ct_device_kind cpu_k[] = {CT_DEVICE_CPU};
    const char *cpu_n[] = {"cpu"};
    exec_inventory cpu = inv_of(1, cpu_k, cpu_n);
    CHECK_CHAIN(&cpu, NULL, false, "cpu");

    /* test devices lead the default chain */
    ct_device_kind t_k[] = {CT_DEVICE_CPU, CT_DEVICE_CUDA, CT_DEVICE_TEST, CT_DEVICE_TEST};
    const char *t_n[] = {"cpu", "cuda:0", "test:0", "test:1"};
    exec_inventory tinv = inv_of(4, t_k, t_n);
    CHECK_CHAIN(&tinv, NULL, false, "test:0,test:1,cuda:0,cpu");

    /* nothing to run on */
    exec_inventory none = {.n = 0};
    int chain[EXEC_MAX_DEVICES], n;
    CHECK_STATUS(exec_build_chain(&none, NULL, false, chain, &n), CT_ERR_NOT_FOUND);
    ct_device_kind gpu_k[] = {CT_DEVICE_CUDA};
    const char *gpu_n[] = {"cuda:0"};
    exec_inventory gpu_only = inv_of(1, gpu_k, gpu_n);
    CHECK_STATUS(exec_build_chain(&gpu_only, NULL, true, chain, &n), CT_ERR_NOT_FOUND);
}

static void test_override_specs(void)
{
    ct_device_kind nv_k[] = {CT_DEVICE_CPU, CT_DEVICE_CUDA, CT_DEVICE_CUDA, CT_DEVICE_OPENCL};
    const char *nv_n[] = {"cpu", "cuda:0", "cuda:1", "opencl:0"};
    exec_inventory nv = inv_of(4, nv_k, nv_n);
    CHECK_CHAIN(&nv, "opencl:0,cpu", false, "opencl:0,cpu");
    CHECK_CHAIN(&nv, "cpu", false, "cpu");
    CHECK_CHAIN(&nv, "cuda", false, "cuda:0,cuda:1");                 /* a bare kind names all its devices */
    CHECK_CHAIN(&nv, "cuda:1,cuda:0", false, "cuda:1,cuda:0");         /* order = priority */
    CHECK_CHAIN(&nv, "cpu,cuda", false, "cpu,cuda:0,cuda:1");
    CHECK_CHAIN(&nv, "cuda:1,cuda", false, "cuda:1,cuda:0");           /* duplicates keep the first place */
    CHECK_CHAIN(&nv, "cpu,cpu,opencl:0,cpu", false, "cpu,opencl:0");
    CHECK_CHAIN(&nv, " cuda:0 , cpu ", false, "cuda:0,cpu");           /* spaces tolerated */
    CHECK_CHAIN(&nv, "CUDA:1,Cpu", false, "cuda:1,cpu");               /* case-insensitive */
    CHECK_CHAIN(&nv, "cuda:0,,cpu,", false, "cuda:0,cpu");
    int chain[EXEC_MAX_DEVICES], n;
    CHECK_STATUS(exec_build_chain(&nv, "tpu:0,cpu", false, chain, &n), CT_ERR_NOT_FOUND);
    const char *msg = ct_last_error();
    CHECK_MSG(strstr(msg, "tpu:0") && strstr(msg, "cpu") && strstr(msg, "cuda:0") && strstr(msg, "cuda:1") && strstr(msg, "opencl:0"),
              "message should name the bad device and list the available ones: %s", msg);
    CHECK_STATUS(exec_build_chain(&nv, "cuda:2", false, chain, &n), CT_ERR_NOT_FOUND);
    CHECK_STATUS(exec_build_chain(&nv, "metal", false, chain, &n), CT_ERR_NOT_FOUND);
    CHECK_STATUS(exec_build_chain(&nv, ",,,", false, chain, &n), CT_ERR_NOT_FOUND);
    CHECK_STATUS(exec_build_chain(&nv, "cuda:0:1", false, chain, &n), CT_ERR_NOT_FOUND);
    /* an over-long spec is an error, not a silently truncated chain */
    char longspec[400];
    size_t pos = 0;
    while (pos + 8 < sizeof longspec) pos += (size_t)snprintf(longspec + pos, sizeof longspec - pos, "cuda:1,");
    snprintf(longspec + pos, sizeof longspec - pos, "cpu");
    ct_status st = exec_build_chain(&nv, longspec, false, chain, &n);
    CHECK_MSG(st == CT_ERR_INVALID_ARG || (st == CT_OK && n == 2 && chain[1] == 0), "long spec: %s (%s)", ct_status_name(st),
              ct_last_error());
}

/* An OpenCL CPU device (PoCL) is the host's CPU again: never in the default chain, and
 * named by the kind "opencl" only when no other OpenCL device exists. */
static void test_host_cpu_devices(void)
{
    ct_device_kind k[] = {CT_DEVICE_CPU, CT_DEVICE_OPENCL, CT_DEVICE_OPENCL};
    const char *nm[] = {"cpu", "opencl:0", "opencl:1"};
    exec_inventory both = inv_of(3, k, nm);
    both.flags[2] = CT_DEVICE_HOST_CPU; /* opencl:0 a GPU, opencl:1 PoCL */
    CHECK_CHAIN(&both, NULL, false, "opencl:0,cpu");
    CHECK_CHAIN(&both, "opencl,cpu", false, "opencl:0,cpu");
    CHECK_CHAIN(&both, "opencl:1,cpu", false, "opencl:1,cpu"); /* by name it is always there */
    exec_inventory pocl = inv_of(2, k, nm);
    pocl.flags[1] = CT_DEVICE_HOST_CPU;
    CHECK_CHAIN(&pocl, NULL, false, "cpu");
    CHECK_CHAIN(&pocl, "opencl,cpu", false, "opencl:0,cpu");
    CHECK_CHAIN(&pocl, "opencl", false, "opencl:0");
}

static void dev_name(const ct_device_info *d, char *out)
{
    snprintf(out, 32, "%s", d->name);
}

/* The public API over a real inventory: the cpu plus two test devices, which come last
 * (installing them hides the machine's own accelerators). */
static void test_public_chain_api(void)
{
    unsetenv("CTORCH_DEVICES"); /* the default chain is under test (make test-opencl sets one) */
    CHECK_OK(ct_exec_reinit());
    int machine = ct_device_count(), machine_chain = ct_chain_length();
    CHECK_OK(test_backend_install(2, "*"));
    /* the simulated devices are the only accelerators: the machine's own are hidden */
    int base = ct_device_count() - 2, base_chain = ct_chain_length() - 2;
    CHECK(base == 1 && base_chain == 1);
    ct_device_info d;
    CHECK_OK(ct_device_get(0, &d));
    CHECK(d.kind == CT_DEVICE_CPU && !strcmp(d.name, "cpu") && d.memory_bytes > 0 && d.description[0]);
    CHECK(d.dtype_mask & (1u << CT_F32));
    CHECK_OK(ct_device_get(base + 1, &d));
    CHECK(d.kind == CT_DEVICE_TEST && !strcmp(d.name, "test:1") && d.index == 1 && d.chain_position == 1);
    CHECK_STATUS(ct_device_get(base + 2, &d), CT_ERR_RANGE);
    CHECK_STATUS(ct_device_get(-1, &d), CT_ERR_RANGE);
    CHECK_STATUS(ct_device_get(0, NULL), CT_ERR_INVALID_ARG);
    CHECK(ct_chain_length() == base_chain + 2);
    char names[3][32];
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ct_chain_get(i < 2 ? i : base_chain + 1, &d));
        CHECK(d.chain_position == (i < 2 ? i : base_chain + 1));
        dev_name(&d, names[i]);
    }
    CHECK(!strcmp(names[0], "test:0") && !strcmp(names[1], "test:1") && !strcmp(names[2], "cpu"));
    CHECK_STATUS(ct_chain_get(base_chain + 2, &d), CT_ERR_RANGE);
    CHECK_STATUS(ct_chain_get(0, NULL), CT_ERR_INVALID_ARG);
    CHECK(!strcmp(ct_device_kind_name(CT_DEVICE_CUDA), "cuda") && !strcmp(ct_device_kind_name(CT_DEVICE_KIND_COUNT), "unknown"));

    /* override, bad override keeps the chain, NULL restores */
    CHECK_OK(ct_exec_set_devices("test:1,cpu"));
    CHECK(ct_chain_length() == 2);
    CHECK_OK(ct_chain_get(0, &d));
    CHECK(!strcmp(d.name, "test:1"));
    CHECK_OK(ct_device_get(base, &d));
    CHECK(d.chain_position == -1); /* test:0 left the chain */
    CHECK_STATUS(ct_exec_set_devices("test:7"), CT_ERR_NOT_FOUND);
    CHECK(strstr(ct_last_error(), "test:0") != NULL);
    CHECK(ct_chain_length() == 2);
    CHECK_OK(ct_exec_set_devices(NULL));
    CHECK(ct_chain_length() == base_chain + 2);

    /* capability queries */
    CHECK(ct_device_supports("test:0", "add", CT_F32));
    CHECK(ct_device_supports("test:0", "matmul", CT_F32));
    CHECK(ct_device_supports("test:0", "sum", CT_F32));
    CHECK(!ct_device_supports("test:0", "add", CT_F16));
    CHECK(!ct_device_supports("test:0", "softmax", CT_F32));
    CHECK(ct_device_supports("cpu", "add", CT_F32));
    CHECK(ct_device_supports("cpu", "matmul", CT_Q4_K));
    CHECK(!ct_device_supports("nope:0", "add", CT_F32));
    CHECK(!ct_device_supports("cpu", "frobnicate", CT_F32));
    CHECK(!ct_device_supports(NULL, "add", CT_F32));
    CHECK(!ct_device_supports("cpu", NULL, CT_F32));
    CHECK(!ct_device_supports("cpu", "add", CT_DTYPE_COUNT));
    CHECK_OK(test_backend_install(1, "add,copy"));
    CHECK(ct_device_count() == base + 1);
    CHECK(!ct_device_supports("test:0", "mul", CT_F32));
    CHECK(ct_device_supports("test", "add", CT_F32)); /* a bare kind names its first device */

    /* environment: CTORCH_DEVICES and CTORCH_DISABLE_GPU are read by reinit */
    setenv("CTORCH_DEVICES", "cpu,test:0", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK_OK(ct_chain_get(0, &d));
    CHECK(!strcmp(d.name, "cpu") && ct_chain_length() == 2);
    unsetenv("CTORCH_DEVICES");
    setenv("CTORCH_DISABLE_GPU", "1", 1);
    CHECK_OK(ct_exec_reinit());
    CHECK(ct_chain_length() == 1);
    unsetenv("CTORCH_DISABLE_GPU");
    setenv("CTORCH_DEVICES", "bogus:3", 1);
    CHECK_STATUS(ct_exec_reinit(), CT_ERR_NOT_FOUND);
    CHECK(ct_chain_length() >= 1); /* still a working chain */
    ct_tensor *t = NULL;
    int64_t s[1] = {4};
    CHECK_OK(ct_ones(1, s, CT_F32, &t));
    ct_tensor_free(t);
    unsetenv("CTORCH_DEVICES");
    CHECK_OK(ct_exec_reinit());
    CHECK(ct_chain_length() == base_chain + 1);
    test_backend_uninstall(); /* the machine's own devices come back */
    CHECK(ct_device_count() == machine && ct_chain_length() == machine_chain);
}

int main(void)
{
    RUN(test_platform_defaults);
    RUN(test_override_specs);
    RUN(test_host_cpu_devices);
    RUN(test_public_chain_api);
    return th_finish();
}
