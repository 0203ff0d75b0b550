/* A test-only backend: simulated devices with their own memory, a configurable
 * set of supported ops, and naive f32 kernels of its own, so chains, routing,
 * residency, fallback and tracing are testable without a GPU. */
#ifndef CTORCH_TEST_BACKEND_H
#define CTORCH_TEST_BACKEND_H

#include "core/backend.h"

/* Registers `n` test devices ("test:0".."test:n-1") supporting the comma-separated
 * ops (trace names, e.g. "add,mul,matmul,copy,fill"; "*" = every op it has a kernel for).
 * Clears CTORCH_DEVICES first: the test devices lead the default chain. */
ct_status test_backend_install(int n, const char *ops);
void test_backend_uninstall(void);
/* Runs of each op kind on test device i since install. */
int test_backend_runs(int dev, ct_op_kind kind);
/* Weights imported into device i's own layout (f32 weights placed there while it
 * supports linear: kept transposed, used by its linear kernel) since install. */
int test_backend_imports(int dev);
/* Whether placement imports weights so (off after install: the layout serves only linear,
 * so a weight placed for matmul would be uploaded raw at its first use). */
void test_backend_set_import(bool enabled);
/* Bytes uploaded to / downloaded from test device i since install. */
uint64_t test_backend_uploaded(int dev);
uint64_t test_backend_downloaded(int dev);
/* Peer copies between test devices (a CUDA-P2P stand-in); off after install. */
void test_backend_set_peer(bool enabled);
/* Bytes copied peer to peer into device i since install. */
uint64_t test_backend_peer_bytes(int dev);
/* Make the next `n` allocations on device i fail with CT_ERR_DEVICE_OOM. */
void test_backend_fail_allocs(int dev, int n);
/* The same after `ok` more allocations succeed. */
void test_backend_fail_allocs_after(int dev, int ok, int n);

/* Device i refuses the `n` runs of `kind` that follow `after` more runs of it, with
 * `err` (an out-of-memory or unsupported case found at run time, the device still fine). */
void test_backend_refuse_runs(int dev, ct_op_kind kind, int after, int n, ct_status err);

/* Recorded steps whose every op runs on one test device are captured (kept as a list and
 * submitted whole at each launch, a CUDA-graph stand-in); off after install. */
void test_backend_set_capture(bool enabled);
/* Captured steps launched on device i since install. */
int test_backend_launches(int dev);

/* Host ranges pinned through device i (ct_host_pin) and not yet unpinned, and the pin
 * calls made through it since install. */
int test_backend_pinned(int dev);
int test_backend_pin_calls(int dev);
/* The next n pin calls fail with CT_ERR_DEVICE_OOM. */
void test_backend_fail_pins(int n);

/* The same devices, asynchronous: each has a queue run by a worker thread, honours
 * events, poisons fresh and released buffers with NaN (so an early or late read
 * shows), and can fail late. */
ct_status test_backend_install_async(int n, const char *ops);
/* The same devices, those of the bits of `shared` with memory that is the host's
 * (CT_DEVICE_HOST_SHARED, as PoCL): their copies of host data are buffers over the host
 * copy's own bytes (ct_backend_ops.alias, at 64-byte boundaries), never poisoned. */
ct_status test_backend_install_shared(int n, const char *ops, bool async, uint32_t shared);
/* Buffers device i made over host memory since install. */
int test_backend_aliases(int dev);
/* Device i has this many bytes (0: 1 GiB); allocations beyond fail with CT_ERR_DEVICE_OOM. */
void test_backend_set_capacity(int dev, uint64_t bytes);
/* Every op on device i sleeps this long first (a deliberately slow producer). */
void test_backend_set_delay(int dev, unsigned us);
/* After `after_runs` more ops, device i faults late: that op's output is not written,
 * the queue does nothing more, and every later event or sync reports the fault. */
void test_backend_fail_late(int dev, int after_runs);
/* Buffers allocated on device i and not yet released (by its worker, when async). */
int test_backend_live_buffers(int dev);
/* What each op actually did, in the order the workers finished them. */
typedef struct test_backend_log_entry {
    int dev;
    ct_op_kind kind;
    uint64_t start_ns, end_ns;
    const float *dst; /* the output's first element */
    int64_t n;
} test_backend_log_entry;
int test_backend_log(test_backend_log_entry *out, int cap);

#endif
