/* The caller-facing residency and device calls refuse bad arguments with a status and a
 * message naming what is wrong (no crash, no silent success): prefetch, place, sync,
 * memory, transfer methods. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "test_backend.h"

static bool msg_has(const char *needle)
{
    const char *m = ct_last_error();
    return m && strstr(m, needle);
}

static ct_tensor *small(void)
{
    int64_t shape[1] = {8};
    ct_tensor *t = NULL;
    CHECK_OK(ct_ones(1, shape, CT_F32, &t));
    return t;
}

static void test_prefetch(void)
{
    ct_tensor *t = small();
    CHECK(ct_tensor_prefetch(NULL, "cpu") != CT_OK);
    CHECK(ct_tensor_prefetch(t, "no-such-device") == CT_ERR_NOT_FOUND);
    CHECK(msg_has("no-such-device"));
    CHECK(ct_tensor_prefetch(t, NULL) == CT_ERR_NOT_FOUND);
    CHECK(msg_has("(null)"));
    CHECK_OK(ct_tensor_prefetch(t, "cpu"));
    ct_tensor_free(t);
}

static void test_place(void)
{
    ct_tensor *t = small();
    CHECK(ct_tensor_place(NULL, "cpu") != CT_OK);
    CHECK(ct_tensor_place(t, "no-such-device") == CT_ERR_NOT_FOUND);
    CHECK(msg_has("ct_tensor_place") && msg_has("no-such-device"));
    /* placing on the CPU, again, then unpinning: all fine, and the data stays */
    CHECK_OK(ct_tensor_place(t, "cpu"));
    CHECK_OK(ct_tensor_place(t, "cpu"));
    CHECK_OK(ct_tensor_place(t, NULL));
    CHECK_OK(ct_tensor_place(t, NULL));
    double v = 0;
    CHECK_OK(ct_tensor_item(t, 7, &v));
    CHECK(v == 1.0);
    ct_tensor_free(t);
}

static void test_sync_and_memory(void)
{
    CHECK_OK(ct_device_sync(NULL));
    CHECK_OK(ct_device_sync("cpu"));
    CHECK(ct_device_sync("no-such-device") == CT_ERR_NOT_FOUND);
    CHECK(msg_has("ct_device_sync") && msg_has("no-such-device"));
    uint64_t f = 1, tot = 0;
    CHECK(ct_device_memory("cpu", NULL, &tot) == CT_ERR_INVALID_ARG);
    CHECK(ct_device_memory("cpu", &f, NULL) == CT_ERR_INVALID_ARG);
    CHECK(msg_has("NULL output"));
    CHECK(ct_device_memory("no-such-device", &f, &tot) == CT_ERR_NOT_FOUND);
    CHECK(msg_has("no-such-device"));
    ct_status s = ct_device_memory("cpu", &f, &tot);
    /* the CPU either reports its memory, or says it does not, with the total it knows */
    CHECK(s == CT_OK || s == CT_ERR_UNSUPPORTED);
    if (s == CT_OK) CHECK(tot > 0 && f <= tot);
    else CHECK(msg_has("cpu"));
}

static void test_transfer_methods(void)
{
    CHECK(ct_exec_transfer_method("cpu", "cpu") == CT_TRANSFER_NONE);
    CHECK(ct_exec_transfer_method("no-such-device", "cpu") == CT_TRANSFER_NONE);
    CHECK(ct_exec_transfer_method("cpu", NULL) == CT_TRANSFER_NONE);
    CHECK(!strcmp(ct_transfer_method_name(CT_TRANSFER_PEER), "peer"));
    CHECK(!strcmp(ct_transfer_method_name((ct_transfer_method)99), "unknown"));
    CHECK(!strcmp(ct_transfer_method_name((ct_transfer_method)-1), "unknown"));
}

/* With simulated devices: each pair's method follows the devices' kinds, and a device
 * with a free-memory report answers ct_device_memory. */
static void test_transfer_methods_devices(void)
{
    CHECK_OK(test_backend_install(2, "add"));
    CHECK(ct_exec_transfer_method("cpu", "test:0") == CT_TRANSFER_HOST_TO_DEVICE);
    CHECK(ct_exec_transfer_method("test:0", "cpu") == CT_TRANSFER_DEVICE_TO_HOST);
    CHECK(ct_exec_transfer_method("test:0", "test:1") == CT_TRANSFER_PEER);
    CHECK(ct_exec_transfer_method("test:1", "test:1") == CT_TRANSFER_NONE);
    uint64_t f = 0, tot = 0;
    CHECK_OK(ct_device_memory("test:1", &f, &tot));
    CHECK(tot > 0 && f <= tot);
    CHECK_OK(ct_device_sync("test:0"));
    CHECK_OK(ct_device_sync(NULL));
    test_backend_uninstall();
    CHECK(ct_exec_transfer_method("cpu", "test:0") == CT_TRANSFER_NONE); /* gone with the backend */
}

/* ct_exec_set_trace takes exactly "1"/"stderr", "0"/NULL and paths ending in .json;
 * anything else is refused naming the value, and a refused value leaves tracing as it was. */
static void test_trace_specs(void)
{
    CHECK(ct_exec_set_trace(".json") == CT_ERR_INVALID_ARG); /* no name before the suffix */
    CHECK(msg_has("'.json'"));
    CHECK(ct_exec_set_trace("x.js") == CT_ERR_INVALID_ARG);
    CHECK(ct_exec_set_trace("trace.txt") == CT_ERR_INVALID_ARG);
    CHECK(msg_has("trace.txt"));
    CHECK_OK(ct_exec_set_trace("0"));
    CHECK_OK(ct_exec_set_trace(NULL));
    CHECK_OK(ct_exec_set_trace(""));
    char path[512];
    const char *dir = getenv("CTORCH_TEST_TMP");
    snprintf(path, sizeof path, "%s/exec_args_trace.json", dir && *dir ? dir : "/tmp");
    CHECK_OK(ct_exec_set_trace(path));
    ct_tensor *t = small(), *u = NULL;
    CHECK_OK(ct_add(t, t, &u));
    ct_exec_trace_note("step \"remade\": a\\b"); /* quotes and backslashes escaped in JSON */
    CHECK_OK(ct_exec_set_trace("0")); /* closes the file: a Chrome trace with the add and the note */
    ct_exec_trace_note("not traced"); /* tracing off: nothing, no crash */
    FILE *f = fopen(path, "r");
    CHECK(f != NULL);
    if (f) {
        char buf[4096] = {0};
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        CHECK(n > 0 && strstr(buf, "traceEvents") && strstr(buf, "\"name\":\"add\""));
        CHECK(strstr(buf, "step \\\"remade\\\": a\\\\b") != NULL);
        CHECK(strstr(buf, "not traced") == NULL);
    }
    remove(path);
    ct_tensor_free(t);
    ct_tensor_free(u);
}

int main(void)
{
    RUN(test_prefetch);
    RUN(test_place);
    RUN(test_sync_and_memory);
    RUN(test_transfer_methods);
    RUN(test_transfer_methods_devices);
    RUN(test_trace_specs);
    return th_finish();
}
