/* The CUDA backend's internals, shared by its C files: backend.c (device, memory,
 * queues, graphs) and the op groups. Kernels (.cu) never include this header: core
 * headers are C (stdatomic), so every group passes plain pointers, sizes and strides to
 * its launchers, declared extern "C" in that group's *_kernels.h.
 *
 * Op groups, each in files of its own, each with a supports/run pair:
 *   ew    fill, arange, eye, rand, copy between plain dtypes (strided), binary, scalar,
 *         compare, where, unary and activations, swiglu/geglu, complex, reductions
 *   nn    softmax/log_softmax, matmul/linear on plain dtypes (cuBLAS), layer/rms/batch norm,
 *         rope, sdpa (prefill and decode, the length tensor), embedding of a plain table,
 *         set_rows, conv2d, conv_transpose2d, pooling
 *   quant every op with a block-quantized source: copy (dequantize), embedding, matmul
 *         (slot 0), linear (slot 1); and the weight import at placement
 * backend.c asks the quant group first when a source is quantized, else the group that
 * owns the op's kind. */
#ifndef CT_CUDA_INTERNAL_H
#define CT_CUDA_INTERNAL_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/backend.h"

typedef struct cuda_dev {
    int ordinal;
    cudaStream_t stream;   /* the device's one in-order queue */
    cublasHandle_t blas;   /* bound to stream, workspace set (so it may run inside a graph) */
    int sm_count, cc_major, cc_minor;
    size_t smem_optin;     /* largest dynamic shared memory a block may opt into */
    bool allow_tf32;       /* CTORCH_CUDA_TF32=1: f32 GEMMs may use TF32 */
    bool capturing;        /* inside step_capture: no cudaMalloc, no host sync */
    unsigned *sdpa_count;  /* CUDA_SDPA_COUNTERS merge counters of the decode attention, zeroed once:
                            * the kernel leaves them zero, so no memset (graph node) per launch */
    void *alloc;           /* the caching allocator (backend.c) */
    void *dnn;             /* cuDNN handle bound to stream, made at the first conv (nn_cudnn.c) */
} cuda_dev;

#define CUDA_SDPA_COUNTERS 4096

static inline cuda_dev *cuda_of(const ct_device *d) { return (cuda_dev *)d->priv; }

/* A CUDA error as a status with a message naming the device and `what`: out of memory
 * -> CT_ERR_DEVICE_OOM, an invalid launch configuration -> CT_ERR_UNSUPPORTED (the
 * executor retries elsewhere), anything else -> CT_ERR_DEVICE_FAULT. */
ct_status cuda_status(cudaError_t e, const ct_device *dev, const char *what);
ct_status cuda_blas_status(cublasStatus_t s, const ct_device *dev, const char *what);
/* After a launch: cudaGetLastError mapped as above (CT_OK when none). */
ct_status cuda_check_launch(const ct_device *dev, const char *kernel);

/* Temporaries of one op from the caching allocator, released in stream order (the block
 * may be reused at once by later work on the same stream). Inside a capture a block is
 * kept by the graph until step_release, so its address stays the graph's. */
ct_status cuda_tmp_alloc(ct_device *dev, size_t bytes, void **ptr);
void cuda_tmp_free(ct_device *dev, void *ptr, size_t bytes);

/* Enqueues dense (t's shape, dtype ddt, contiguous) = t converted, or t = dense when to_t:
 * working copies for kernels of one dtype. */
ct_status cuda_dense_copy(ct_device *dev, const ct_tensor *t, void *dense, ct_dtype ddt, bool to_t);

bool cuda_ew_supports(const ct_device *dev, const ct_op *op);
ct_status cuda_ew_run(ct_device *dev, const ct_op *op);
bool cuda_nn_supports(const ct_device *dev, const ct_op *op);
ct_status cuda_nn_run(ct_device *dev, const ct_op *op);
/* A supported sdpa op launched so that it also writes its output's q8 form (quant_kernels.h
 * cuq_q8: q, d, s8 for one row per batch of Hq * Dv elements), for a decode step's o
 * projection; *launched false and nothing launched when the kernel it would take cannot. */
ct_status cuda_sdpa_q8(ct_device *dev, const ct_op *op, int8_t *q, float *d, float *s8, bool early_next, bool *launched);
bool cuda_quant_supports(const ct_device *dev, const ct_op *op);
ct_status cuda_quant_run(ct_device *dev, const ct_op *op);
/* ct_backend_ops.import: a placed quantized weight kept in the kernels' own layout. */
ct_status cuda_quant_import(ct_device *dev, const ct_tensor *t);

#endif
