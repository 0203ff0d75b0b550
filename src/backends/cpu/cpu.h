/* CPU backend internals: thread pool, N-d iteration, element conversion, and
 * the kernel groups the backend's run() dispatches to. */
#ifndef CT_CPU_H
#define CT_CPU_H

#include <string.h>

#include "core/backend.h"

/* ---- thread pool (pool.c) ---- */
typedef void (*cpu_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Splits [0, n) into chunks of at least `grain` and runs them on the pool. Nested
 * calls and calls racing another caller run inline. */
void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx);
int cpu_num_threads(void);
/* Spinning workers go to sleep until the next job: called before handing the cores to a
 * library with threads of its own (OpenBLAS), which would otherwise compete with them. */
void cpu_pool_park(void);
/* Joins the workers (at exit, and when the executor releases the CPU device); the
 * next parallel call starts them again. Must not race with running ops. */
void cpu_pool_shutdown(void);

/* ---- scratch (scratch.c): per-thread buffers a kernel borrows for the call, kept for
 * the next one (no allocation per op once sized). One slot per buffer a kernel needs at
 * the same time; a kernel never calls another that uses the same slot. NULL: no memory. */
typedef enum cpu_scratch_slot {
    CPU_SCRATCH_ROPE_CS, CPU_SCRATCH_ROPE_INV, CPU_SCRATCH_ROPE_POS, CPU_SCRATCH_LINEAR_ACT, CPU_SCRATCH_LINEAR_AUX, CPU_SCRATCH_SDPA_PART,
    CPU_SCRATCH_SDPA_TASK, CPU_SCRATCH_AMX_A, CPU_SCRATCH_AMX_B,
    CPU_SCRATCH_SLOTS
} cpu_scratch_slot;
void *cpu_scratch(cpu_scratch_slot slot, size_t bytes);

/* ---- SIMD level chosen at run time (simd.c); CTORCH_SIMD=portable|avx2|avx512 caps it ----
 * The same level caps the quant kernels (quant_simd_apply_cap), so one setting decides
 * every kernel family of the backend. Values equal core_simd_cap's. */
typedef enum cpu_simd { CPU_SIMD_PORTABLE = 0, CPU_SIMD_AVX2 = 1, CPU_SIMD_AVX512 = 2 } cpu_simd;
cpu_simd cpu_simd_level(void);
/* Tests use this to exercise every path the machine supports: the level becomes
 * min(level, what the CPU has, CTORCH_SIMD) and stays until the next call. */
void cpu_simd_set_level(cpu_simd level);
/* Reads CTORCH_SIMD again unless a test forced a level. Called when the CPU device is
 * made: at first use and after ct_exec_shutdown (ct_exec_reinit keeps the device, and
 * with it the level, since tensors may hold kernels' derived data such as repacks). */
void cpu_simd_reread(void);

/* ---- N-d iteration: operands aligned (broadcast) to one iteration shape ---- */
#define CPU_ND_MAX 4
typedef struct cpu_nd {
    int ndim;
    int64_t shape[CT_MAX_DIMS];
    int n;                                      /* operands */
    int64_t stride[CPU_ND_MAX][CT_MAX_DIMS];    /* elements, 0 for broadcast dims */
    char *base[CPU_ND_MAX];                     /* first element of each operand */
    size_t esize[CPU_ND_MAX];                   /* bytes per element */
} cpu_nd;

void cpu_nd_init(cpu_nd *it, int ndim, const int64_t *shape);
/* Adds an operand (its shape must broadcast to the iteration shape); returns its index. */
int cpu_nd_add(cpu_nd *it, const ct_tensor *t, const ct_device *dev);
static inline int64_t cpu_nd_cols(const cpu_nd *it) { return it->ndim ? it->shape[it->ndim - 1] : 1; }
static inline int64_t cpu_nd_rows(const cpu_nd *it)
{
    int64_t r = 1;
    for (int i = 0; i < it->ndim - 1; i++) r *= it->shape[i];
    return it->ndim ? r : 1;
}
static inline int64_t cpu_nd_inner(const cpu_nd *it, int k) { return it->ndim ? it->stride[k][it->ndim - 1] : 0; }
/* Pointer to the first element of row `row` for operand k. */
static inline char *cpu_nd_row(const cpu_nd *it, int k, int64_t row)
{
    int64_t off = 0;
    for (int d = it->ndim - 2; d >= 0; d--) {
        off += (row % it->shape[d]) * it->stride[k][d];
        row /= it->shape[d];
    }
    return it->base[k] + off * (int64_t)it->esize[k];
}

/* ---- element conversion ---- */
static inline float cpu_load_f32(const void *p, ct_dtype t)
{
    switch (t) {
    case CT_F32: return *(const float *)p;
    case CT_F64: return (float)*(const double *)p;
    case CT_F16: return ct_f16_to_f32(*(const uint16_t *)p);
    case CT_BF16: return ct_bf16_to_f32(*(const uint16_t *)p);
    case CT_I32: return (float)*(const int32_t *)p;
    case CT_I64: return (float)*(const int64_t *)p;
    case CT_I8: return (float)*(const int8_t *)p;
    case CT_BOOL: return *(const uint8_t *)p ? 1.0f : 0.0f;
    case CT_C64: return *(const float *)p;
    default: return 0.0f;
    }
}
static inline double cpu_load_f64(const void *p, ct_dtype t)
{
    switch (t) {
    case CT_F64: return *(const double *)p;
    case CT_I64: return (double)*(const int64_t *)p;
    case CT_I32: return *(const int32_t *)p;
    default: return cpu_load_f32(p, t);
    }
}
/* Stores v (real) converted to t; c64 gets imaginary part 0. */
static inline void cpu_store_f64(void *p, ct_dtype t, double v)
{
    switch (t) {
    case CT_F32: *(float *)p = (float)v; break;
    case CT_F64: *(double *)p = v; break;
    case CT_F16: *(uint16_t *)p = ct_f32_to_f16((float)v); break;
    case CT_BF16: *(uint16_t *)p = ct_f32_to_bf16((float)v); break;
    case CT_I32: *(int32_t *)p = (int32_t)v; break;
    case CT_I64: *(int64_t *)p = (int64_t)v; break;
    case CT_I8: *(int8_t *)p = (int8_t)v; break;
    case CT_BOOL: *(uint8_t *)p = v != 0; break;
    case CT_C64: ((float *)p)[0] = (float)v; ((float *)p)[1] = 0.0f; break;
    default: break;
    }
}

/* Contiguous f16 rows to f32 at the current SIMD level (gemm.c). */
void cpu_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n);
/* Contiguous f32 rows to f16, bit for bit ct_f32_to_f16 (gemm.c). */
void cpu_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n);

/* ---- kernel groups: each returns CT_OK or an error naming the problem ---- */
ct_status cpu_run_create(ct_device *dev, const ct_op *op);      /* FILL ARANGE EYE RAND (create.c) */
ct_status cpu_run_copy(ct_device *dev, const ct_op *op);        /* COPY incl. dequantize (copy.c) */
ct_status cpu_run_set_rows(ct_device *dev, const ct_op *op);    /* SET_ROWS (set_rows.c) */
ct_status cpu_run_binary(ct_device *dev, const ct_op *op);      /* ADD..MINIMUM, *_SCALAR, CMP*, WHERE (elementwise.c) */
ct_status cpu_run_unary(ct_device *dev, const ct_op *op);       /* NEG..TANH, CLAMP, SWIGLU, GEGLU (elementwise.c) */
ct_status cpu_run_softmax(ct_device *dev, const ct_op *op);     /* SOFTMAX, LOG_SOFTMAX (elementwise.c) */
ct_status cpu_run_complex(ct_device *dev, const ct_op *op);     /* COMPLEX REAL IMAG CONJ (elementwise.c) */
ct_status cpu_run_matmul(ct_device *dev, const ct_op *op);      /* MATMUL (linalg.c) */
ct_status cpu_run_linear(ct_device *dev, const ct_op *op);      /* LINEAR (linalg.c; quantized via quant kernels) */
/* The import hook for placed weights (linear.c): keeps Q4_K (and any type with a repacked
 * decode layout) repacked now rather than at its first use. */
ct_status cpu_linear_import(ct_device *dev, const ct_tensor *w);
ct_status cpu_run_reduce(ct_device *dev, const ct_op *op);      /* SUM..ARGMIN (reduce.c) */
ct_status cpu_run_nn(ct_device *dev, const ct_op *op);          /* CONV2D..EMBEDDING (nn.c, conv.c) */
ct_status cpu_run_attention(ct_device *dev, const ct_op *op);   /* ROPE, SDPA (attention.c) */

#endif
