/* The priority chain: a pure function of the device inventory. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "exec/exec.h"

static bool host_cpu(const exec_inventory *inv, int i) { return (inv->flags[i] & CT_DEVICE_HOST_CPU) != 0; }

/* The default chain holds the host's CPU once: through the CPU backend. */
static void append_kind(const exec_inventory *inv, ct_device_kind k, int *chain, int *n)
{
    for (int i = 0; i < inv->n; i++)
        if (inv->kind[i] == k && (k == CT_DEVICE_CPU || !host_cpu(inv, i))) chain[(*n)++] = i;
}

/* A bare kind skips host-CPU devices when the kind has a real accelerator. */
static bool kind_has_accelerator(const exec_inventory *inv, ct_device_kind k)
{
    for (int i = 0; i < inv->n; i++)
        if (inv->kind[i] == k && !host_cpu(inv, i)) return true;
    return false;
}

static bool in_chain(const int *chain, int n, int id)
{
    for (int i = 0; i < n; i++)
        if (chain[i] == id) return true;
    return false;
}

static bool has_kind(const exec_inventory *inv, ct_device_kind k)
{
    for (int i = 0; i < inv->n; i++)
        if (inv->kind[i] == k) return true;
    return false;
}

/* One comma-separated entry: a device name ("cuda:1") or a kind ("opencl"). */
static ct_status add_entry(const exec_inventory *inv, const char *tok, int *chain, int *n)
{
    bool found = false;
    for (int i = 0; i < inv->n; i++) {
        const char *kind = ct_device_kind_name(inv->kind[i]);
        bool by_name = !strcasecmp(tok, inv->name[i]);
        if (!by_name && strcasecmp(tok, kind)) continue;
        found = true;
        if (!by_name && inv->kind[i] != CT_DEVICE_CPU && host_cpu(inv, i) && kind_has_accelerator(inv, inv->kind[i]))
            continue;
        if (!in_chain(chain, *n, i)) chain[(*n)++] = i;
    }
    if (found) return CT_OK;
    char have[256] = "";
    for (int i = 0; i < inv->n; i++) {
        strncat(have, i ? ", " : "", sizeof have - strlen(have) - 1);
        strncat(have, inv->name[i], sizeof have - strlen(have) - 1);
    }
    return core_err(CT_ERR_NOT_FOUND, "device '%s' not found (available: %s)", tok, have);
}

ct_status exec_build_chain(const exec_inventory *inv, const char *spec, bool disable_gpu, int *chain, int *n_chain)
{
    int n = 0;
    if (disable_gpu) {
        append_kind(inv, CT_DEVICE_CPU, chain, &n);
    } else if (spec && *spec && strcasecmp(spec, "auto")) {
        char buf[256];
        if (strlen(spec) >= sizeof buf)
            return core_err(CT_ERR_INVALID_ARG, "device spec is too long (%zu characters, at most %zu)", strlen(spec),
                            sizeof buf - 1);
        snprintf(buf, sizeof buf, "%s", spec);
        for (char *save = NULL, *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
            ct_status s = add_entry(inv, tok, chain, &n);
            if (s != CT_OK) return s;
        }
    } else {
        append_kind(inv, CT_DEVICE_TEST, chain, &n);
        bool apple = has_kind(inv, CT_DEVICE_METAL) || has_kind(inv, CT_DEVICE_COREML);
        if (apple) {
            append_kind(inv, CT_DEVICE_COREML, chain, &n);
            append_kind(inv, CT_DEVICE_METAL, chain, &n);
        } else {
            append_kind(inv, CT_DEVICE_CUDA, chain, &n); /* absent on non-NVIDIA: chain starts at opencl */
        }
        append_kind(inv, CT_DEVICE_OPENCL, chain, &n);
        append_kind(inv, CT_DEVICE_CPU, chain, &n);
    }
    if (n == 0) return core_err(CT_ERR_NOT_FOUND, "device chain is empty (spec '%s')", spec ? spec : "");
    *n_chain = n;
    return CT_OK;
}
