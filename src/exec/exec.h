/* Executor internals: shared by the exec/ files and by tests. */
#ifndef CT_EXEC_EXEC_H
#define CT_EXEC_EXEC_H

#include "core/backend.h"

#define EXEC_MAX_DEVICES 16
#define EXEC_MAX_BACKENDS 8

/* What discovery found, reduced to what the chain builder needs: pure data, so
 * chains for platforms we cannot build here (Apple) are unit-tested. */
typedef struct exec_inventory {
    int n;
    ct_device_kind kind[EXEC_MAX_DEVICES];
    char name[EXEC_MAX_DEVICES][32];
    uint32_t flags[EXEC_MAX_DEVICES]; /* CT_DEVICE_* (CT_DEVICE_HOST_CPU matters here) */
} exec_inventory;

/* Platform chain (NVIDIA: cuda, opencl, cpu; Apple: coreml, metal, opencl, cpu;
 * other: opencl, cpu; test devices first) or the override spec ("cuda:0,cpu",
 * a bare kind names all its devices). A device flagged CT_DEVICE_HOST_CPU (the same
 * physical CPU behind another driver) is never in the default chain, and a bare kind
 * names it only when the kind has no other device; its own name always does.
 * Writes device indices into chain. */
ct_status exec_build_chain(const exec_inventory *inv, const char *spec, bool disable_gpu, int *chain, int *n_chain);

/* Routing inputs: a pure function of these. */
typedef struct exec_route_ctx {
    ct_device *const *devs; /* by id */
    const int *chain;
    int n_chain;
    uint32_t excluded;      /* bit per device id that failed this op */
    int forced;             /* device id or -1 */
    bool strict;
    size_t small_bytes;
} exec_route_ctx;

typedef struct exec_route_result {
    int dev;                /* device id */
    ct_route_reason reason;
} exec_route_result;

ct_status exec_route(const exec_route_ctx *ctx, const ct_op *op, exec_route_result *res);

/* The bytes of op->dst's storage the op writes: all of a fresh output, the view's span
 * otherwise, only the rows a SET_ROWS writes when its indices are readable on the host. */
void exec_written_range(const ct_op *op, bool dst_fresh, size_t *lo, size_t *hi);
/* Whether the op writes every byte of dst's storage in [lo, hi) = all of it (so nothing of
 * dst needs to be valid on its device first): a fresh output, or a full-span write by an
 * op that writes each element of its view (not SET_ROWS). */
bool exec_writes_all(const ct_op *op, bool dst_fresh, size_t lo, size_t hi);

/* Runs op: routes, makes operands resident, runs, falls back on device errors.
 * op->dst must be set (fresh shell or an existing view to write into). */
ct_status exec_run(ct_op *op);

/* One attempt of op on dev, no routing and no fallback (a part of a decomposition):
 * counted and traced with `reason`. */
ct_status exec_run_on(ct_op *op, ct_device *dev, ct_route_reason reason);
/* Records op as run on dev as its parts (trace line, ct_exec_last, statistics). */
void exec_note_decomposed(const ct_op *op, ct_device *dev, uint64_t t0_ns);

/* ---- decomposition (decompose.c) ---- */
bool exec_decomposable(ct_op_kind k);
/* The device (the head of the route) that lacks op but can run it as its parts, or NULL. */
ct_device *exec_decompose_target(const exec_route_ctx *c, const ct_op *op);
/* Runs op as its parts on dev and puts the result into op->dst. */
ct_status exec_decompose_run(ct_op *op, ct_device *dev, bool dst_fresh);
/* Inside a decomposition on this thread: exec_run hands each part to exec_decompose_part. */
bool exec_decompose_active(void);
ct_status exec_decompose_part(ct_op *op);

/* Backends compiled into the library plus any registered (the test backend).
 * Registering re-discovers devices. */
ct_status exec_register_backend(const ct_backend_ops *ops);
/* Leaves the compiled-in accelerators (CUDA, OpenCL) out of the next discovery, so the
 * simulated devices of a test are the only accelerators whatever the machine has. */
void exec_hide_builtin_accelerators(bool hide);
void exec_unregister_backend(const ct_backend_ops *ops);

/* ---- the pin table (pin.c); callers hold the registry's lock ---- */
/* Records [ptr, ptr + bytes) as pinned, page-locking it through one device of each backend
 * among devs that has host_pin (none: recorded only). CT_ERR_INVALID_ARG when it overlaps
 * a recorded range; a backend's failure is returned with nothing left pinned or recorded. */
ct_status pin_add(void *ptr, size_t bytes, ct_device *const *devs, int n_devs);
/* Unpins and forgets the range starting at ptr; false when none does. */
bool pin_remove(void *ptr);
/* dev is being released: what it pinned is unpinned now (the ranges stay recorded until
 * ct_host_unpin, so that call stays harmless). */
void pin_forget_device(ct_device *dev);
/* Ranges recorded and their total bytes (tests). */
int pin_count(size_t *bytes);
/* The same, taking the registry's lock (tests). */
int exec_pinned(size_t *bytes);

/* Initializes the executor if needed; the settings' error (a bad CTORCH_* value)
 * until they are fixed, else CT_OK. */
ct_status exec_ready(void);

/* Device by name ("cpu", "cuda:0"); NULL if unknown. Initializes the executor. */
ct_device *exec_find_device(const char *name);
ct_device *exec_host_device(void);

/* ---- recorded steps (step.c) ---- */
/* The recording of this thread, or NULL: exec_run reports every op it ran to it. */
extern _Thread_local ct_step *exec_step_rec;
void step_note(ct_step *r, const ct_op *op, ct_device *dev, ct_route_reason reason, bool dst_fresh);
/* Ops recorded so far; rewinding to a mark forgets the ops recorded since (the parts of
 * a decomposition that failed and is run again elsewhere). */
int step_mark(const ct_step *r);
void step_rewind(ct_step *r, int mark);
/* Whether the recording holds a reference to st (it keeps one per storage it uses). */
bool step_refs(const ct_step *r, const ct_storage *st);
/* A failed op poisons the recording (ct_step_end reports it). */
void step_note_failure(ct_step *r, ct_status s);
/* Recordings made before are stale: the chain (or the device table) changed / a storage was placed. */
void step_bump_chain(void);
void step_bump_placement(void);
/* Pairs of arena buffers alive at the same op whose bytes overlap (0 for a sound plan; tests). */
int step_plan_conflicts(const ct_step *s);

/* ---- fault injection (fault.c) ---- */
ct_status fault_parse(const char *spec);
/* Checks a spec without applying it. */
ct_status fault_validate(const char *spec);
/* Error to inject for (device, op), consuming one count; CT_OK if none. */
ct_status fault_check(const ct_device *dev, ct_op_kind op);
void fault_clear(void);

/* ---- trace and statistics (trace.c) ---- */
/* "", "0": off; "1", "stderr": lines; a path ending in .json: a trace file. A bad spec
 * or a file that cannot be opened leaves the current trace as it is. The same spec
 * as the current one keeps its file open. */
ct_status trace_configure(const char *spec);
bool trace_enabled(void);
void trace_op(const ct_op *op, const ct_device *dev, ct_route_reason reason, uint64_t t0_ns, uint64_t dur_ns,
              uint64_t moved, const char *detail);
void trace_flush(void);
/* A line of its own in the trace (an instant event in a .json trace), e.g. "step remade: ...". */
void trace_note(const char *msg);
uint64_t exec_now_ns(void);

#endif
