/* See devcheck.h. */
#include "devcheck.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The first device of kind into info; false when there is none. */
static bool find_device(const char *kind, ct_device_info *info)
{
    int n = ct_device_count();
    for (int i = 0; i < n; i++)
        if (ct_device_get(i, info) == CT_OK && strcmp(ct_device_kind_name(info->kind), kind) == 0) return true;
    th_skip("no %s device (backend not built, no driver, or no device)", kind);
    return false;
}

const char *devcheck_device(const char *kind, char *buf, size_t len)
{
    ct_device_info info;
    if (!find_device(kind, &info)) return NULL;
    snprintf(buf, len, "%s", info.name);
    return buf;
}

/* The executor's own chain decides (CTORCH_DEVICES, CTORCH_DISABLE_GPU, the default). */
const char *devcheck_chain_device(const char *kind, char *buf, size_t len)
{
    ct_device_info info;
    if (!find_device(kind, &info)) return NULL;
    if (info.chain_position < 0) {
        const char *chain = getenv("CTORCH_DEVICES");
        th_skip("%s is not in the device chain (CTORCH_DEVICES=%s)", info.name, chain ? chain : "unset");
        return NULL;
    }
    snprintf(buf, len, "%s", info.name);
    return buf;
}

double devcheck_nmse(const double *got, const double *ref, int64_t n, int *nonfinite)
{
    double num = 0, den = 0;
    *nonfinite = 0;
    for (int64_t i = 0; i < n; i++) {
        bool fg = isfinite(got[i]), fr = isfinite(ref[i]);
        if (fg != fr || (!fg && !(isnan(got[i]) && isnan(ref[i])) && got[i] != ref[i])) {
            *nonfinite = 1;
            continue;
        }
        if (!fr) continue;
        num += (got[i] - ref[i]) * (got[i] - ref[i]);
        den += ref[i] * ref[i];
    }
    return den > 0 ? num / den : num;
}

/* Runs fn forced onto device; *ran gets the device of the last op. */
static ct_status run_on(const char *device, devcheck_fn fn, ct_tensor *const *in, int n_in, void *ctx,
                        ct_tensor **out, char *ran, size_t ran_len)
{
    ct_status st = ct_exec_force_device(device);
    if (st != CT_OK) return st;
    st = fn(in, n_in, out, ctx);
    ct_exec_record rec;
    if (st == CT_OK && ct_exec_last(&rec) == CT_OK) snprintf(ran, ran_len, "%s", rec.device);
    ct_exec_force_device(NULL);
    return st;
}

static int64_t numel_of(const ct_tensor *t)
{
    int64_t n = 1;
    for (int d = 0; d < ct_tensor_ndim(t); d++) n *= ct_tensor_shape(t)[d];
    return n;
}

double devcheck_op(const char *device, const char *what, devcheck_fn fn, ct_tensor *const *in, int n_in, void *ctx,
                   double tol)
{
    ct_tensor *got = NULL, *ref = NULL;
    char ran[32] = "", ran_cpu[32] = "";
    ct_status st = run_on(device, fn, in, n_in, ctx, &got, ran, sizeof ran);
    CHECK_MSG(st == CT_OK, "%s on %s: %s", what, device, ct_last_error());
    CHECK_MSG(st != CT_OK || strcmp(ran, device) == 0, "%s: the op ran on %s, not %s", what, ran, device);
    ct_status st2 = run_on("cpu", fn, in, n_in, ctx, &ref, ran_cpu, sizeof ran_cpu);
    CHECK_MSG(st2 == CT_OK, "%s on cpu: %s", what, ct_last_error());
    double nmse = INFINITY;
    if (st == CT_OK && st2 == CT_OK) {
        int64_t n = numel_of(ref);
        CHECK_MSG(numel_of(got) == n, "%s: %lld elements on %s, %lld on the cpu", what, (long long)numel_of(got),
                  device, (long long)n);
        double *g = th_values(got), *r = th_values(ref);
        if (g && r && numel_of(got) == n) {
            int nonfinite = 0;
            nmse = devcheck_nmse(g, r, n, &nonfinite);
            CHECK_MSG(!nonfinite, "%s on %s: NaN/Inf where the cpu has none (or the reverse)", what, device);
            CHECK_MSG(nmse <= tol, "%s on %s: NMSE %.3g > %.3g", what, device, nmse, tol);
        }
        free(g);
        free(r);
    }
    ct_tensor_free(got);
    ct_tensor_free(ref);
    return nmse;
}
