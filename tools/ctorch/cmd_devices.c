/* ctorch devices: the chain in priority order and a capability matrix
 * (op x device -> dtypes that device runs it in), as text or JSON. Accelerators also
 * show free/total memory (their backend's mem_info) and, for NVIDIA GPUs, utilization
 * and temperature through NVML, loaded at run time (absent: those are left out). */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "opts.h"
#include "core/backend.h"
#include "ctorch/ctorch.h"

/* The dtypes shown in the matrix: the float types and the common GGUF ones. */
static const ct_dtype g_matrix_dtypes[] = {CT_F32, CT_F16, CT_BF16, CT_Q4_0, CT_Q8_0, CT_Q4_K, CT_Q5_K, CT_Q6_K};
#define N_MATRIX_DTYPES (int)(sizeof g_matrix_dtypes / sizeof g_matrix_dtypes[0])
#define MAX_COLUMNS 16

static void dtype_list(uint32_t mask, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = 0;
    for (int t = 0; t < CT_DTYPE_COUNT && pos < len; t++)
        if (mask & (1u << t)) pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", pos ? "," : "", ct_dtype_name((ct_dtype)t));
    if (!buf[0]) snprintf(buf, len, "-");
}

/* Which of the matrix dtypes `dev` runs `op` in, as "f32,f16" or "-". */
static void cell(const char *dev, const char *op, char *buf, size_t len)
{
    size_t pos = 0;
    buf[0] = 0;
    for (int i = 0; i < N_MATRIX_DTYPES && pos < len; i++)
        if (ct_device_supports(dev, op, g_matrix_dtypes[i]))
            pos += (size_t)snprintf(buf + pos, len - pos, "%s%s", pos ? "," : "", ct_dtype_name(g_matrix_dtypes[i]));
    if (!buf[0]) snprintf(buf, len, "-");
}

/* ---- NVML, through dlopen: the driver's library, so no build-time dependency ---- */
typedef struct nvml_util {
    unsigned gpu, memory; /* percent of the last sample period */
} nvml_util;
typedef struct nvml {
    void *lib;
    int (*get_handle)(unsigned index, void **dev);
    int (*get_util)(void *dev, nvml_util *u);
    int (*get_temp)(void *dev, int sensor, unsigned *t);
} nvml;

static bool nvml_open(nvml *n)
{
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) return false;
    int (*init)(void) = (int (*)(void))dlsym(n->lib, "nvmlInit_v2");
    *(void **)&n->get_handle = dlsym(n->lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&n->get_util = dlsym(n->lib, "nvmlDeviceGetUtilizationRates");
    *(void **)&n->get_temp = dlsym(n->lib, "nvmlDeviceGetTemperature");
    if (!init || !n->get_handle || !n->get_util || !n->get_temp || init() != 0) {
        dlclose(n->lib);
        n->lib = NULL;
        return false;
    }
    return true;
}

static void nvml_close(nvml *n)
{
    if (!n->lib) return;
    int (*shutdown)(void) = (int (*)(void))dlsym(n->lib, "nvmlShutdown");
    if (shutdown) shutdown();
    dlclose(n->lib);
}

/* Utilization and temperature of CUDA device `index` ("" when NVML cannot tell). NVML
 * numbers GPUs in PCI order, CUDA fastest first unless CUDA_DEVICE_ORDER=PCI_BUS_ID: they
 * agree on machines with one GPU or one GPU model. */
static void nvml_line(nvml *n, int index, char *buf, size_t len)
{
    buf[0] = 0;
    void *h = NULL;
    nvml_util u;
    unsigned t = 0;
    if (!n->lib || n->get_handle((unsigned)index, &h) != 0) return;
    size_t pos = 0;
    if (n->get_util(h, &u) == 0) pos += (size_t)snprintf(buf, len, ", utilization %u%%", u.gpu);
    if (pos < len && n->get_temp(h, 0 /* NVML_TEMPERATURE_GPU */, &t) == 0) snprintf(buf + pos, len - pos, ", %u C", t);
}

/* "free/total" memory of an accelerator, or "" for the CPU and devices that cannot tell. */
static void memory_line(const ct_device_info *d, nvml *n, char *buf, size_t len)
{
    uint64_t fr = 0, total = 0;
    buf[0] = 0;
    if (d->kind == CT_DEVICE_CPU || ct_device_memory(d->name, &fr, &total) != CT_OK) return;
    char a[32], b[32], extra[96] = "";
    if (d->kind == CT_DEVICE_CUDA) nvml_line(n, d->index, extra, sizeof extra);
    snprintf(buf, len, "      memory: %s free of %s%s\n", cli_bytes(fr, a, sizeof a), cli_bytes(total, b, sizeof b), extra);
}

static void print_text(void)
{
    nvml nv;
    nvml_open(&nv);
    int n_chain = ct_chain_length(), n_dev = ct_device_count();
    printf("Device chain (priority order; ops go to the first device that supports them):\n");
    printf("  %-3s %-10s %-7s %-10s %s\n", "#", "name", "kind", "memory", "description");
    for (int i = 0; i < n_chain; i++) {
        ct_device_info d;
        if (ct_chain_get(i, &d) != CT_OK) continue;
        char mem[32], dts[256];
        dtype_list(d.dtype_mask, dts, sizeof dts);
        printf("  %-3d %-10s %-7s %-10s %s%s\n", i, d.name, ct_device_kind_name(d.kind), cli_bytes(d.memory_bytes, mem, sizeof mem),
               d.description, (d.flags & CT_DEVICE_HOST_SHARED) ? " (host memory)" : "");
        printf("      dtypes: %s\n", dts);
        char mem_line[192];
        memory_line(&d, &nv, mem_line, sizeof mem_line);
        fputs(mem_line, stdout);
    }
    nvml_close(&nv);
    bool header = false;
    for (int i = 0; i < n_dev; i++) {
        ct_device_info d;
        if (ct_device_get(i, &d) != CT_OK || d.chain_position >= 0) continue;
        if (!header) printf("Discovered but not in the chain:\n");
        header = true;
        printf("  %-10s %s\n", d.name, d.description);
    }

    /* matrix columns: chain devices in order */
    char names[MAX_COLUMNS][32];
    int n = 0;
    for (int i = 0; i < n_chain && n < MAX_COLUMNS; i++) {
        ct_device_info d;
        if (ct_chain_get(i, &d) == CT_OK) snprintf(names[n++], sizeof names[0], "%s", d.name);
    }
    int width = 8;
    for (int c = 0; c < n; c++) {
        for (int k = 0; k < CT_OP_COUNT; k++) {
            char buf[160];
            cell(names[c], op_kind_name((ct_op_kind)k), buf, sizeof buf);
            int w = (int)strlen(buf);
            width = w > width ? w : width;
        }
    }
    printf("\nCapability matrix (dtypes of");
    for (int i = 0; i < N_MATRIX_DTYPES; i++) printf(" %s", ct_dtype_name(g_matrix_dtypes[i]));
    printf(" each device runs the op in; '-' none):\n");
    printf("  %-18s", "op");
    for (int c = 0; c < n; c++) printf(" %-*s", width, names[c]);
    printf("\n");
    for (int k = 0; k < CT_OP_COUNT; k++) {
        const char *op = op_kind_name((ct_op_kind)k);
        printf("  %-18s", op);
        for (int c = 0; c < n; c++) {
            char buf[160];
            cell(names[c], op, buf, sizeof buf);
            printf(" %-*s", width, buf);
        }
        printf("\n");
    }
}

static void json_device(const ct_device_info *d)
{
    printf("{\"position\":%d,\"name\":", d->chain_position);
    cli_json_string(stdout, d->name);
    printf(",\"kind\":");
    cli_json_string(stdout, ct_device_kind_name(d->kind));
    printf(",\"index\":%d,\"description\":", d->index);
    cli_json_string(stdout, d->description);
    printf(",\"memory_bytes\":%llu,\"host_shared\":%s,\"unified\":%s,\"dtypes\":[", (unsigned long long)d->memory_bytes,
           (d->flags & CT_DEVICE_HOST_SHARED) ? "true" : "false", (d->flags & CT_DEVICE_UNIFIED) ? "true" : "false");
    bool first = true;
    for (int t = 0; t < CT_DTYPE_COUNT; t++)
        if (d->dtype_mask & (1u << t)) {
            printf("%s\"%s\"", first ? "" : ",", ct_dtype_name((ct_dtype)t));
            first = false;
        }
    printf("]}");
}

static void print_json(void)
{
    int n_chain = ct_chain_length(), n_dev = ct_device_count();
    printf("{\"chain\":[");
    for (int i = 0; i < n_chain; i++) {
        ct_device_info d;
        if (ct_chain_get(i, &d) != CT_OK) continue;
        printf("%s\n  ", i ? "," : "");
        json_device(&d);
    }
    printf("],\n\"devices\":[");
    for (int i = 0; i < n_dev; i++) {
        ct_device_info d;
        if (ct_device_get(i, &d) != CT_OK) continue;
        printf("%s\n  ", i ? "," : "");
        json_device(&d);
    }
    printf("],\n\"capabilities\":{");
    for (int k = 0; k < CT_OP_COUNT; k++) {
        const char *op = op_kind_name((ct_op_kind)k);
        printf("%s\n  \"%s\":{", k ? "," : "", op);
        for (int i = 0; i < n_dev; i++) {
            ct_device_info d;
            if (ct_device_get(i, &d) != CT_OK) continue;
            printf("%s\"%s\":[", i ? "," : "", d.name);
            bool first = true;
            for (int t = 0; t < N_MATRIX_DTYPES; t++)
                if (ct_device_supports(d.name, op, g_matrix_dtypes[t])) {
                    printf("%s\"%s\"", first ? "" : ",", ct_dtype_name(g_matrix_dtypes[t]));
                    first = false;
                }
            printf("]");
        }
        printf("}");
    }
    printf("\n}}\n");
}

int cmd_devices(int argc, char **argv)
{
    bool json = false;
    const cli_opt opts[] = {{"--json", NULL, CLI_FLAG, &json, 0, 0, NULL, "print JSON"}};
    const cli_spec spec = {"devices", "devices [--json]",
                           "Lists the device chain in priority order (position, name, kind, memory, dtypes,\n"
                           "description) and, for every op, the dtypes each device runs it in.\n"
                           "CTORCH_DEVICES=cuda:0,cpu or CTORCH_DISABLE_GPU=1 change the chain.\n",
                           opts, CLI_N(opts), 0};
    int prc = cli_parse(&spec, argc, argv, NULL, NULL);
    if (prc >= 0) return prc;
    if (ct_exec_init() != CT_OK || ct_chain_length() <= 0) {
        fprintf(stderr, "ctorch devices: no usable device: %s\n", ct_last_error());
        return 1;
    }
    if (json) print_json();
    else print_text();
    return 0;
}
