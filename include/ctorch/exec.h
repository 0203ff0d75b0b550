/* The hybrid executor: devices, the priority chain, routing, fallback, trace.
 *
 * Environment (read at first use; ct_exec_reinit() reads it again). A value that does
 * not parse is an error, never ignored: ct_exec_init() returns it, and so does every op
 * until the settings are fixed (a failed ct_exec_reinit keeps the settings in force):
 *   CTORCH_DEVICES=cuda:0,cpu    chain override, order = priority
 *   CTORCH_DISABLE_GPU=1         chain = cpu only
 *   CTORCH_STRICT=1              any routing away from the chain head is an error
 *   CTORCH_TRACE=1 | path.json   one line per op on stderr | a Chrome/Perfetto trace file (0: off)
 *   CTORCH_FAULT=dev:op:err[:n]  make `dev` fail `op` (or *) with err (oom|fault|unsupported) n times
 *   CTORCH_SMALL_BYTES=N         ops whose operands are CPU-resident and smaller stay on the CPU
 *   CTORCH_SYNC=1                wait for every op to finish, so a late device fault is charged
 *                                to the op that caused it (debugging; slow on accelerators)
 *   CTORCH_STATS=1               time every op; ct_exec_stats_requested() is true, and the ctorch
 *                                command prints ct_exec_stats_format's summary at exit (the library
 *                                prints nothing; without it or a trace, ops and bytes are counted, not time)
 *   CTORCH_HOST_CACHE_MB=N       host memory kept for reuse by freed large tensors (default 256, 0 = off)
 *   CTORCH_THREADS=N             CPU worker threads (read when the thread pool starts)
 *   CTORCH_LOG=debug|info|warn|error   log level (ct_set_log_level overrides it)
 *   CTORCH_REPACK=0              no repacked or kept copies of weights on the CPU (read in place)
 *   CTORCH_REPLAY=0              the LLM decodes eagerly instead of replaying a recorded step
 *   CTORCH_FUSE=0                a captured step runs its ops one by one (no fused kernels)
 * Booleans take 1/0, true/false, on/off, yes/no; an empty value means the default.
 * CTORCH_SIMD (portable|avx2) caps the CPU kernels' instruction set. */
#ifndef CTORCH_EXEC_H
#define CTORCH_EXEC_H

#include "ctorch/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum ct_device_kind {
    CT_DEVICE_CPU, CT_DEVICE_CUDA, CT_DEVICE_OPENCL, CT_DEVICE_METAL, CT_DEVICE_COREML, CT_DEVICE_TEST,
    CT_DEVICE_KIND_COUNT
} ct_device_kind;

CT_API const char *ct_device_kind_name(ct_device_kind k);

#define CT_DEVICE_HOST_SHARED 1u /* device memory is host memory: its copy of host data is that
                                    data (zero-copy with the CPU; an OpenCL device such as PoCL
                                    once it passes the backend's zero-copy probe) */
#define CT_DEVICE_UNIFIED 2u     /* host-mapped / unified memory available */
#define CT_DEVICE_HOST_CPU 4u    /* runs on the host's own CPU cores (an OpenCL CPU device such as
                                    PoCL): never in the default chain beside the CPU backend, and
                                    left out of its kind when that kind has another device */

typedef struct ct_device_info {
    char name[32];          /* "cpu", "cuda:0", "opencl:1" */
    char description[128];  /* driver's device name */
    ct_device_kind kind;
    int index;              /* within its kind */
    uint64_t memory_bytes;  /* total device memory (host RAM for the CPU) */
    uint32_t dtype_mask;    /* bit (1u << ct_dtype) for each dtype its kernels accept */
    uint32_t flags;         /* CT_DEVICE_* */
    int chain_position;     /* 0 = head of the chain, -1 = not in the chain */
} ct_device_info;

/* Every discovered device (CPU first). */
CT_API int ct_device_count(void);
CT_API ct_status ct_device_get(int i, ct_device_info *info);
/* The devices of the active chain, in priority order. */
CT_API int ct_chain_length(void);
CT_API ct_status ct_chain_get(int pos, ct_device_info *info);
/* Does `device` support op `op_name` (ct_op_name spelling) on dtype? A coarse
 * capability query for tooling; routing asks the backend with full shapes. */
CT_API bool ct_device_supports(const char *device, const char *op_name, ct_dtype dtype);

/* The host waits for the work queued on `device` (NULL: every device). Reading a
 * tensor's data (ct_tensor_data, ct_tensor_item, printing) is a sync point too.
 * CT_ERR_DEVICE_LOST when the device reported an error late: it is then out of the
 * chain until ct_exec_reinit, and tensors whose data lived only there report
 * CT_ERR_DEVICE_LOST when read. */
CT_API ct_status ct_device_sync(const char *device);
/* Free and total memory of a device, as its backend reports them. When an allocation
 * there fails, the executor first evicts copies that are valid elsewhere. */
CT_API ct_status ct_device_memory(const char *device, uint64_t *free_bytes, uint64_t *total_bytes);
/* Page-locks ("pins") host memory the caller owns, so devices copy to and from it at full
 * speed and without a staging copy (PyTorch's pin_memory; CUDA: cudaHostRegister). Worth
 * it for a buffer that is read back or uploaded often (an LLM's logits row); pinning is
 * slow itself and takes memory from the OS's pageable pool, so pin a few long-lived
 * buffers, not every tensor. CT_OK and nothing else when no device benefits (CPU only,
 * backends without pinning): the range is still recorded, so the rules below hold on every
 * machine. bytes 0: CT_OK, nothing recorded. NULL with bytes > 0, or a range overlapping
 * one pinned already: CT_ERR_INVALID_ARG. A device's refusal (too much memory pinned) is
 * returned with its message and leaves nothing pinned: the memory works as before, only
 * transfers are slower, so callers may log it and go on. Devices found later (ct_exec_reinit)
 * do not pin ranges recorded earlier; a device released or lost meanwhile is handled.
 * Call ct_host_unpin(ptr) with the same ptr BEFORE freeing the memory (freeing pinned
 * memory leaves the driver's mapping of it behind). */
CT_API ct_status ct_host_pin(void *ptr, size_t bytes);
/* Undoes ct_host_pin(ptr); a pointer not pinned (NULL, unpinned already) is ignored. Safe
 * after ct_exec_shutdown. */
CT_API void ct_host_unpin(void *ptr);
/* Replace the chain ("cuda:0,cpu"); it overrides CTORCH_DEVICES until NULL restores the
 * chain of the settings in force (CTORCH_DEVICES as last read, else the platform default).
 * On an error the chain in force stays. */
CT_API ct_status ct_exec_set_devices(const char *spec);
CT_API void ct_exec_set_strict(bool strict);
CT_API bool ct_exec_strict(void);
/* Operands below this many bytes that live on the CPU keep an op on the CPU. */
CT_API void ct_exec_set_small_bytes(size_t bytes);
CT_API size_t ct_exec_small_bytes(void);
/* Route every op of this thread to `device` (NULL to clear), reason "forced". */
CT_API ct_status ct_exec_force_device(const char *device);
/* "1"/"stderr": line trace; a path ending in .json: Chrome trace; NULL/"0": off. */
CT_API ct_status ct_exec_set_trace(const char *spec);
/* Fault injection, same syntax as CTORCH_FAULT; NULL clears. */
CT_API ct_status ct_exec_set_fault(const char *spec);
/* Initializes the executor (done by the first call that needs it); the error of a
 * bad setting (CTORCH_DEVICES=bogus, an unwritable CTORCH_TRACE, ...) with a message. */
CT_API ct_status ct_exec_init(void);
/* Re-read the environment and rediscover devices. On an error the settings in force
 * stay. Tensors must not be alive on devices that vanish. */
CT_API ct_status ct_exec_reinit(void);
/* Flushes the trace file and frees executor state, devices included. Optional; free every
 * tensor first (their storage refers to the devices). Ops afterwards start the executor again. */
CT_API void ct_exec_shutdown(void);

typedef enum ct_route_reason {
    CT_REASON_CAPABILITY, /* first device of the chain that supports the op */
    CT_REASON_RESIDENCY,  /* operands already live on that device */
    CT_REASON_SIZE,       /* small CPU-resident operands stay on the CPU */
    CT_REASON_FALLBACK,   /* an earlier device failed with a device error */
    CT_REASON_FORCED,     /* ct_exec_force_device / -d */
    CT_REASON_DECOMPOSED  /* the device lacks the fused op but has its parts: it runs them
                             (the op's line, and each part's, carries this reason) */
} ct_route_reason;
CT_API const char *ct_route_reason_name(ct_route_reason r);

typedef struct ct_exec_record {
    char op[24];          /* ct_op_name */
    char device[32];
    ct_route_reason reason;
    char detail[96];      /* e.g. "cuda:0 failed: device out of memory" */
    uint64_t time_ns;
} ct_exec_record;
/* Where the last op of this thread ran and why. */
CT_API ct_status ct_exec_last(ct_exec_record *rec);

typedef struct ct_device_stats {
    char device[32];
    uint64_t ops;
    uint64_t time_ns;
    uint64_t bytes_in;     /* copied to this device */
    uint64_t bytes_out;    /* copied from this device */
    uint64_t fallbacks;    /* ops that failed here and moved on */
    uint64_t decomposed;   /* fused ops run here as their parts (the parts count in ops) */
    uint64_t layout_bytes; /* memory held now in the device's own weight layouts (imported at
                              placement, or the CPU's repacked decode weights) */
} ct_device_stats;
/* How bytes move between two devices. The choice is a pure function of the pair
 * (ct_exec_transfer_method); ctorch never copies between devices on its own accord,
 * only to make an op's operands resident where the router sent it. */
typedef enum ct_transfer_method {
    CT_TRANSFER_NONE,           /* same device, or both are host memory */
    CT_TRANSFER_HOST_TO_DEVICE, /* the backend's upload (pinned staging is its business) */
    CT_TRANSFER_DEVICE_TO_HOST, /* the backend's download */
    CT_TRANSFER_PEER,           /* device to device of one backend, no host hop (CUDA P2P) */
    CT_TRANSFER_STAGED,         /* device -> host -> device: different backends, or no peer access */
    CT_TRANSFER_SHARED,         /* host <-> a device whose buffer is the host memory itself
                                   (CT_DEVICE_HOST_SHARED: PoCL, integrated GPUs): zero-copy, the
                                   bytes made visible are counted but nothing moves */
    CT_TRANSFER_METHOD_COUNT
} ct_transfer_method;
CT_API const char *ct_transfer_method_name(ct_transfer_method m);
/* The method used from `src` to `dst` ("cpu", "cuda:0", ...); CT_TRANSFER_NONE for unknown names. */
CT_API ct_transfer_method ct_exec_transfer_method(const char *src, const char *dst);
typedef struct ct_transfer_stats {
    uint64_t count; /* transfers */
    uint64_t bytes;
} ct_transfer_stats;
/* Totals per method since start (or ct_exec_stats_reset), indexed by ct_transfer_method. */
CT_API void ct_exec_transfer_stats(ct_transfer_stats stats[CT_TRANSFER_METHOD_COUNT]);

/* Fills up to `cap` entries (one per device); returns the number of devices. */
CT_API int ct_exec_stats(ct_device_stats *stats, int cap);
CT_API void ct_exec_stats_reset(void);
/* The per-device summary table and transfer totals as text, written into buf (at most
 * n bytes, always NUL-terminated when n > 0; buf may be NULL when n is 0). Returns the
 * length of the whole text, so a result >= n means buf was too small (snprintf's rule). */
CT_API size_t ct_exec_stats_format(char *buf, size_t n);
/* True when CTORCH_STATS asked for the summary: the application prints it (ctorch does, at exit). */
CT_API bool ct_exec_stats_requested(void);

/* ---- Recorded steps ----
 * ct_step_begin() starts recording the ops this thread runs; they still run as usual
 * (routed, made resident, with fallback), so the recording pass gives real results. At
 * ct_step_end() every tensor an op made during the recording (an intermediate) moves
 * into the step's arena, one block per device whose offsets are planned from first and
 * last use (a buffer is reused once its last reader is done). ct_step_run() replays the
 * ops on the devices they ran on, at the same addresses: no routing, no allocation.
 * Tensors made outside the recording (weights, a KV cache, the step's parameters such as
 * token ids and positions) are referenced, not copied: write new values into them
 * (ct_tensor_data_mut) before a run, and ops read them then. Tensors the caller still
 * holds at ct_step_end (the outputs) keep their recorded values and, after each run,
 * hold that run's; they stay valid after ct_step_free (they get their own memory).
 * Data made outside ops during a recording (ct_tensor_from_data) is frozen into it. */
typedef struct ct_step ct_step;
/* CT_ERR_INVALID_ARG when this thread is already recording. */
CT_API ct_status ct_step_begin(void);
/* Stops recording. On success *out is the step; if an op failed while recording, or no
 * op was recorded, its error (and *out = NULL). Always stops the recording. */
CT_API ct_status ct_step_end(ct_step **out);
CT_API bool ct_step_recording(void);
/* Replays the step. CT_ERR_INVALID_ARG when it is stale (ct_step_stale): record it again.
 * A device error is returned as is (no fallback inside a replay): record again. */
CT_API ct_status ct_step_run(ct_step *step);
/* True (with the reason in why) when the step no longer matches the executor: the
 * chain changed, a storage was placed, or a device it uses was lost. */
CT_API bool ct_step_stale(const ct_step *step, char *why, size_t len);
CT_API void ct_step_free(ct_step *step);
typedef struct ct_step_info {
    int n_ops;
    int n_buffers;          /* intermediates placed in the arena */
    size_t arena_bytes;     /* all devices' arenas together */
    size_t buffer_bytes;    /* the intermediates' sizes summed (the arena without reuse) */
    size_t live_peak_bytes; /* the largest sum of buffers alive at once (a lower bound of the arena) */
    bool fast;              /* last run: every op on the CPU, replayed as a plain loop */
    bool captured;          /* the whole step was captured by its device's backend */
    int captured_ops;       /* ops replayed inside captured launches (runs of ops on a capturing device) */
    /* The host's time in the captured launches of every replay so far (ns, summed): the
     * operands' residency checks and uploads before each launch, the backend's launch call,
     * and the written ranges' bookkeeping after it. The device's own time is not in them. */
    uint64_t replays;
    uint64_t host_prepare_ns, host_launch_ns, host_finish_ns;
} ct_step_info;
CT_API ct_status ct_step_get_info(const ct_step *step, ct_step_info *info);
/* A line of the caller's in the trace (when tracing), e.g. "step remade: the prompt grew". */
CT_API void ct_exec_trace_note(const char *msg);

#ifdef __cplusplus
}
#endif
#endif
