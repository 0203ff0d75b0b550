/* A test-only backend: simulated devices with their own memory, a configurable
 * set of supported ops, and naive f32 kernels of its own, so chains, routing,
 * residency, fallback and tracing are testable without a GPU. */
#ifndef CTORCH_TEST_BACKEND_H
#define CTORCH_TEST_BACKEND_H

#include "core/backend.h"

/* Registers `n` test devices ("test:0".."test:n-1") supporting the comma-separated
 * ops (trace names, e.g. "add,mul,matmul,copy,fill"; "*" = every op it has a kernel for). */
ct_status test_backend_install(int n, const char *ops);
void test_backend_uninstall(void);
/* Runs of each op kind on test device i since install. */
int test_backend_runs(int dev, ct_op_kind kind);
/* Bytes uploaded to / downloaded from test device i since install. */
uint64_t test_backend_uploaded(int dev);
uint64_t test_backend_downloaded(int dev);
/* Peer copies between test devices (a CUDA-P2P stand-in); off after install. */
void test_backend_set_peer(bool enabled);
/* Bytes copied peer to peer into device i since install. */
uint64_t test_backend_peer_bytes(int dev);
/* Make the next `n` allocations on device i fail with CT_ERR_DEVICE_OOM. */
void test_backend_fail_allocs(int dev, int n);

#endif
