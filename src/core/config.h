/* Settings read from the environment: every CTORCH_* variable is read here, in
 * one place, into one immutable snapshot. Layers above read the snapshot; the
 * executor re-reads it on ct_exec_reinit. */
#ifndef CT_CORE_CONFIG_H
#define CT_CORE_CONFIG_H

#include "core/tensor.h"

typedef struct core_config {
    char devices[256];       /* CTORCH_DEVICES: chain spec ("" = platform default) */
    bool disable_gpu;        /* CTORCH_DISABLE_GPU */
    bool strict;             /* CTORCH_STRICT */
    bool stats;              /* CTORCH_STATS: time every op; the CLI prints a summary */
    bool sync;               /* CTORCH_SYNC: sync after every op (late faults charged to their op) */
    char trace[256];         /* CTORCH_TRACE: "", "1"/"stderr", or a .json path */
    char fault[512];         /* CTORCH_FAULT: fault-injection spec */
    size_t small_bytes;      /* CTORCH_SMALL_BYTES */
    size_t host_cache_bytes; /* CTORCH_HOST_CACHE_MB, in bytes */
    int threads;             /* CTORCH_THREADS; 0 = one per core */
    int log_level;           /* CTORCH_LOG, a ct_log_level */
    bool repack;             /* CTORCH_REPACK */
    bool amx;                /* CTORCH_AMX: prompts may use AMX tiles where the CPU has them (core/cpuid.h) */
    bool replay;             /* CTORCH_REPLAY: the LLM decodes by replaying a recorded step */
    int pipeline;            /* CTORCH_PIPELINE=auto|1|0 (auto: -1): a decode step on a device is queued
                                before the one ahead of it is read back (the next token guessed there,
                                checked here); auto: on CUDA devices only (measured: it pays there, and
                                NVIDIA's OpenCL decodes slower with it) */
    bool fuse;               /* CTORCH_FUSE: a backend capturing a recorded step may fuse its ops */
    char cache_dir[512];     /* CTORCH_CACHE_DIR, else $XDG_CACHE_HOME/ctorch, else ~/.cache/ctorch
                                ("" when none of them is set): compiled device kernels */
    bool opencl_poison;      /* CTORCH_OPENCL_POISON: fresh OpenCL buffers are filled with NaN */
    /* The CUDA backend's settings (read here even when it is not built, so a typo is
     * an error everywhere). */
    size_t cuda_mem_bytes;   /* CTORCH_CUDA_MEM_MB: cap of each GPU's allocator (0: 90% of its free memory) */
    bool cuda_poison;        /* CTORCH_CUDA_POISON: fresh device allocations filled with NaN (tests) */
    bool cuda_tf32;          /* CTORCH_CUDA_TF32: f32 GEMMs may use TF32 */
    char cuda_late_fault[64]; /* CTORCH_CUDA_LATE_FAULT=op[:n]: the n-th run of op (default 1) on a CUDA
                                 device breaks it, reported at the next sync (tests of lost devices) */
    int simd_cap;            /* CTORCH_SIMD=portable|avx2|avx512: a core_simd_cap (core/cpuid.h); unset: avx512.
                                The CPU backend applies it when its device is made (first use,
                                after ct_exec_shutdown): kept repacks were made for the level in force. */
    char bpe_pre[64];        /* CTORCH_BPE_PRE: BPE pre-tokenizer replacing the file's ("" = the file's) */
    int prefetch;            /* CTORCH_PREFETCH=l1|l2: where the decode kernels' software prefetches
                                put the weights they fetch ahead (a core_prefetch, core/cpuid.h);
                                unset: by the CPU's vendor */
} core_config;

/* Default for CTORCH_SMALL_BYTES, measured (bench/gpu/crossover.cu, H100 host,
 * bench/gpu/crossover-h100.txt): an f32 add on CPU-resident operands takes 5 us on one
 * core at 32 KiB of operands, while copying them to the GPU, one kernel and copying back
 * takes 32 us (24 us at any size up to 8 KiB); the CPU stays ahead up to ~2 MiB for
 * element-wise ops. Compute-heavy ops (a 128x128 matmul is 64 KiB of operands and ~4 MFLOP)
 * break even near 64 KiB, so that is the default: nothing smaller is worth a transfer. */
#define CONFIG_DEFAULT_SMALL_BYTES (64u * 1024u)

/* Parses the environment into *out. A value that does not parse is an error naming
 * the variable and the value; *out then holds the defaults for the bad fields. */
ct_status config_read(core_config *out);
/* The current snapshot (read from the environment on first use; a bad value there
 * leaves its default until the executor reports it at initialization). Never NULL; never changes
 * under the caller: a reload publishes a new snapshot. */
const core_config *config_current(void);
/* Makes c (read by config_read and accepted by the caller) the current snapshot. */
void config_publish(const core_config *c);

#endif
