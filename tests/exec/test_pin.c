/* Pinned host memory (ct_host_pin / ct_host_unpin) and the executor's pin table, on the
 * simulated backend (its host_pin entry counts calls): argument rules, one pin per
 * backend, a refusal leaving nothing behind, and devices released, shut down or lost
 * while memory is pinned. */
#include <stdlib.h>

#include "exec/exec.h"
#include "exec_util.h"

#define BUF_BYTES 8192

/* No device that pins: the calls still keep the table's rules. */
static void test_pin_without_device(void)
{
    test_backend_uninstall();
    exec_hide_builtin_accelerators(true); /* a real GPU would pin: this test is about none */
    unsetenv("CTORCH_DEVICES");           /* make test-opencl names a chain these hidden devices cannot give */
    CHECK_OK(ct_exec_reinit());
    char *block = malloc(3 * BUF_BYTES), *buf = block + BUF_BYTES; /* room on both sides */
    CHECK_OK(ct_host_pin(buf, BUF_BYTES));
    CHECK(exec_pinned(NULL) == 1);
    CHECK_STATUS(ct_host_pin(buf, BUF_BYTES), CT_ERR_INVALID_ARG); /* twice */
    CHECK_MSG(strstr(ct_last_error(), "pinned already"), "message: %s", ct_last_error());
    CHECK_STATUS(ct_host_pin(buf + 100, 10), CT_ERR_INVALID_ARG); /* inside it */
    CHECK_STATUS(ct_host_pin(buf - 4, 8), CT_ERR_INVALID_ARG);     /* straddling its start */
    CHECK_OK(ct_host_pin(buf - 4, 4));                             /* adjacent: fine */
    CHECK(exec_pinned(NULL) == 2);
    ct_host_unpin(buf - 4);
    CHECK_STATUS(ct_host_pin(NULL, 16), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_host_pin((void *)(uintptr_t)-64, 128), CT_ERR_RANGE);
    CHECK_OK(ct_host_pin(NULL, 0)); /* nothing to pin */
    CHECK_OK(ct_host_pin(buf + BUF_BYTES / 2, 0));
    size_t bytes = 0;
    CHECK(exec_pinned(&bytes) == 1 && bytes == BUF_BYTES);
    ct_host_unpin(buf + 1); /* not a pinned start: ignored */
    CHECK(exec_pinned(NULL) == 1);
    ct_host_unpin(buf);
    CHECK(exec_pinned(NULL) == 0);
    ct_host_unpin(buf); /* twice: ignored */
    ct_host_unpin(NULL);
    CHECK(exec_pinned(NULL) == 0);
    free(block);
    exec_hide_builtin_accelerators(false);
}

/* One pin call per backend (the backend pins for all its devices), undone by unpin. */
static void test_pin_simulated(void)
{
    xu_reset(2, "*", 0);
    char *a = malloc(BUF_BYTES), *b = malloc(BUF_BYTES);
    CHECK_OK(ct_host_pin(a, BUF_BYTES));
    CHECK_OK(ct_host_pin(b, BUF_BYTES));
    CHECK(test_backend_pin_calls(0) == 2 && test_backend_pin_calls(1) == 0);
    CHECK(test_backend_pinned(0) == 2);
    CHECK_STATUS(ct_host_pin(a, BUF_BYTES), CT_ERR_INVALID_ARG);
    CHECK(test_backend_pin_calls(0) == 2); /* refused before the backend is asked */
    ct_host_unpin(a);
    CHECK(test_backend_pinned(0) == 1);
    ct_host_unpin(a);
    CHECK(test_backend_pinned(0) == 1);
    ct_host_unpin(b);
    CHECK(test_backend_pinned(0) == 0 && exec_pinned(NULL) == 0);

    /* the backend refuses: reported, nothing recorded, the memory usable, a retry works */
    test_backend_fail_pins(1);
    CHECK_STATUS(ct_host_pin(a, BUF_BYTES), CT_ERR_DEVICE_OOM);
    CHECK_MSG(strstr(ct_last_error(), "test:0") != NULL, "message: %s", ct_last_error());
    CHECK(exec_pinned(NULL) == 0 && test_backend_pinned(0) == 0);
    memset(a, 1, BUF_BYTES);
    CHECK_OK(ct_host_pin(a, BUF_BYTES));
    CHECK(test_backend_pinned(0) == 1);
    ct_host_unpin(a);
    CHECK(test_backend_pinned(0) == 0);
    free(a);
    free(b);
}

/* Devices released while memory is pinned unpin it then; the user's unpin stays harmless. */
static void test_pin_release(void)
{
    xu_reset(1, "*", 0);
    char *a = malloc(BUF_BYTES);
    CHECK_OK(ct_host_pin(a, BUF_BYTES));
    CHECK(test_backend_pinned(0) == 1);
    test_backend_uninstall(); /* the device goes away */
    CHECK(test_backend_pinned(0) == 0);
    CHECK(exec_pinned(NULL) == 1); /* still recorded: the user unpins */
    ct_host_unpin(a);
    CHECK(exec_pinned(NULL) == 0 && test_backend_pinned(0) == 0);

    xu_reset(1, "*", 0);
    CHECK_OK(ct_host_pin(a, BUF_BYTES));
    ct_exec_shutdown();
    CHECK(test_backend_pinned(0) == 0);
    ct_host_unpin(a); /* after shutdown: neither starts the executor nor calls a device */
    CHECK(exec_pinned(NULL) == 0);
    free(a);

    /* rediscovery keeps a device that is still there, and its pins */
    xu_reset(1, "*", 0);
    a = malloc(BUF_BYTES);
    CHECK_OK(ct_host_pin(a, BUF_BYTES));
    CHECK_OK(ct_exec_reinit());
    CHECK(test_backend_pinned(0) == 1);
    ct_host_unpin(a);
    CHECK(test_backend_pinned(0) == 0);
    free(a);
}

/* A device lost while memory is pinned: unpinning still works; a lost device pins nothing. */
static void test_pin_lost_device(void)
{
    CHECK_OK(test_backend_install_async(1, "*"));
    ct_exec_set_small_bytes(0);
    char *a = malloc(BUF_BYTES), *b = malloc(BUF_BYTES);
    CHECK_OK(ct_host_pin(a, BUF_BYTES));
    int64_t shape[1] = {256};
    ct_tensor *x = xu_host_f32(1, shape, 1, 0), *y = NULL;
    test_backend_fail_late(0, 0);
    CHECK_OK(xu_binary(CT_OP_ADD, x, x, &y)); /* accepted, fails late */
    CHECK_STATUS(ct_device_sync("test:0"), CT_ERR_DEVICE_LOST);
    CHECK_OK(ct_host_pin(b, BUF_BYTES)); /* recorded; the lost device is not asked */
    CHECK(test_backend_pin_calls(0) == 1);
    ct_host_unpin(a);
    ct_host_unpin(b);
    CHECK(test_backend_pinned(0) == 0 && exec_pinned(NULL) == 0);
    ct_tensor_free(x);
    ct_tensor_free(y);
    free(a);
    free(b);
    CHECK_OK(ct_exec_reinit());
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_pin_without_device);
    RUN(test_pin_simulated);
    RUN(test_pin_release);
    RUN(test_pin_lost_device);
    test_backend_uninstall();
    return th_finish();
}
