/* Checking a real device's ops against the CPU backend (the CUDA and OpenCL suites).
 * An op is built twice from the same inputs: once forced onto the device under test and
 * once onto the CPU; the two outputs are compared by normalized MSE
 * (sum (a-b)^2 / sum b^2), with a tolerance each test states. A NaN or Inf where the
 * other side has a finite value (or a different non-finite value) always fails. */
#ifndef CTORCH_TEST_DEVCHECK_H
#define CTORCH_TEST_DEVCHECK_H

#include "harness.h"

/* The first device of `kind` ("cuda", "opencl") as a name ("cuda:0") in buf, or NULL with
 * the reason printed and the current test marked skipped (no device, backend not built). */
const char *devcheck_device(const char *kind, char *buf, size_t len);
/* The same for a test that runs a model through the chain: also skips (with the reason)
 * when that device is not in the executor's chain (gpu-check's CTORCH_DEVICES=opencl:0,cpu
 * pass runs the CUDA model tests too). */
const char *devcheck_chain_device(const char *kind, char *buf, size_t len);

/* Builds outputs from inputs on whatever device is forced (the callback must not choose). */
typedef ct_status (*devcheck_fn)(ct_tensor *const *in, int n_in, ct_tensor **out, void *ctx);

/* Runs fn forced on `device` and on "cpu" and compares the outputs (converted to f64 on the
 * host). Counts a failed check (message names `what`, the NMSE, the first mismatch) when
 * they differ by more than tol, and when the device did not run the op itself (the last
 * op's record names another device). Returns the NMSE (INFINITY on a failure to run). */
double devcheck_op(const char *device, const char *what, devcheck_fn fn, ct_tensor *const *in, int n_in, void *ctx,
                   double tol);

/* NMSE of got against ref (same numel); *nonfinite set when their NaN/Inf patterns differ. */
double devcheck_nmse(const double *got, const double *ref, int64_t n, int *nonfinite);

#endif
