/* The OpenCL backend's internals, shared by its C files: backend.c (the loader, devices,
 * memory, the queue, the program cache) and the op groups. The OpenCL library is loaded
 * at run time (dlopen of libOpenCL.so.1): no library or no platform means no device.
 *
 * Kernel sources are the .cl files in kernels/, embedded at build time; a program is
 * named by its file's stem ("ew" for kernels/ew.cl), built once per device at first use
 * (cached on disk, keyed by device, driver version and source hash) with
 * src/quant/quant_blocks.h put in front of it, in OpenCL C 1.2. When the device reports
 * cl_khr_fp16 the build defines OCL_HAVE_FP16 (half arithmetic); otherwise half is
 * storage only (vload_half/vstore_half). A program that fails to build on a device makes
 * its ops unsupported there, with the build log in the trace.
 *
 * Buffers are cl_mem (ct_buffer.ptr). Kernels take each tensor as a global pointer plus
 * a byte offset (ulong) from ocl_mem: OpenCL 1.2 sub-buffers need aligned origins, views
 * do not.
 *
 * Op groups, each in files of its own (C glue + kernels/<group>.cl):
 *   ew    fill, arange, eye, rand, copy between plain dtypes (strided), binary, scalar,
 *         compare, where, unary and activations, swiglu/geglu, reductions
 *   nn    softmax/log_softmax, matmul/linear on plain dtypes (CLBlast for f32 where
 *         present, own kernels with half storage otherwise), layer/rms norm, rope, sdpa
 *         (the length tensor), embedding of a plain table, set_rows, conv2d, pooling
 *   quant every op with a block-quantized source: copy (dequantize), embedding, matmul
 *         (slot 0), linear (slot 1); and the weight import at placement */
#ifndef CT_OCL_INTERNAL_H
#define CT_OCL_INTERNAL_H

#include "backends/opencl/loader.h" /* the OpenCL API through ocl_cl (no link to libOpenCL) */

#include "core/backend.h"

typedef struct ocl_dev_info {
    cl_device_type type;   /* CL_DEVICE_TYPE_GPU / _CPU / ... */
    bool fp16;             /* cl_khr_fp16 */
    bool unified;          /* CL_DEVICE_HOST_UNIFIED_MEMORY: buffers alias host memory */
    bool fp64;             /* cl_khr_fp64: the build defines OCL_HAVE_FP64 */
    bool subgroups;        /* cl_khr_subgroups */
    bool dp4a;             /* NVIDIA compute capability 6.1+: the build defines OCL_HAVE_DP4A (PTX dp4a) */
    size_t max_wg;         /* CL_DEVICE_MAX_WORK_GROUP_SIZE */
    cl_ulong local_mem;    /* CL_DEVICE_LOCAL_MEM_SIZE */
    cl_ulong max_alloc;    /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    cl_uint compute_units;
    char vendor[64];
} ocl_dev_info;

const ocl_dev_info *ocl_info(const ct_device *dev);

/* An OpenCL error code as a status naming the device and `what`: allocation failures
 * (CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_RESOURCES at enqueue) -> CT_ERR_DEVICE_OOM,
 * an invalid work size -> CT_ERR_UNSUPPORTED, anything else -> CT_ERR_DEVICE_FAULT. */
ct_status ocl_status(cl_int err, const ct_device *dev, const char *what);

/* The kernel `name` of program `program` on dev, built at first use (then cached).
 * CT_ERR_UNSUPPORTED when the program does not build there. A kernel object is shared:
 * set its arguments and enqueue it without yielding the device's lock (ops on one device
 * are serialized by the executor). */
ct_status ocl_kernel(ct_device *dev, const char *program, const char *name, cl_kernel *out);
/* The largest work-group kernel `name` of `program` launches with on dev
 * (CL_KERNEL_WORK_GROUP_SIZE: the device's limit lowered by the kernel's registers and
 * local memory; asked once, then kept); 0 when the program does not build or the query
 * fails. */
size_t ocl_kernel_wg(const ct_device *dev, const char *program, const char *name);
/* Whether program builds on dev (builds it when not yet tried): for supports(). */
bool ocl_program_ok(const ct_device *dev, const char *program);
/* Programs built from source and loaded from the disk cache since start (tests). */
void ocl_build_counts(int *compiled, int *from_cache);
/* Tests: replace program `program`'s source (NULL text: the embedded one again) for
 * devices initialized from now on. */
void ocl_source_override(const char *program, const char *text);
/* Tests: devices initialized from now on ignore cl_khr_fp64 (the float-only paths of a
 * device without it: f64 refused, reductions accumulating in float). */
void ocl_test_hide_fp64(bool hide);

/* A tensor's buffer on dev and the byte offset of its first element (NULL when the
 * storage has no copy there). */
cl_mem ocl_mem(const ct_tensor *t, const ct_device *dev, cl_ulong *byte_off);

/* Kernel arguments: ocl_args(dev, k, "kernel name", n, (ocl_arg[]){OCL_ARG(x), ...}). */
typedef struct ocl_arg {
    size_t size;
    const void *value; /* NULL with a size: local memory of that many bytes */
} ocl_arg;
#define OCL_ARG(x) ((ocl_arg){sizeof(x), &(x)})
#define OCL_LOCAL(bytes) ((ocl_arg){(bytes), NULL})
ct_status ocl_args(ct_device *dev, cl_kernel k, const char *name, int n, const ocl_arg *args);
/* The same with the count taken from the list: OCL_SET_ARGS(dev, k, "name", OCL_ARG(a), OCL_ARG(b)). */
#define OCL_SET_ARGS(dev, k, name, ...)                                                              \
    ocl_args((dev), (k), (name), (int)(sizeof((ocl_arg[]){__VA_ARGS__}) / sizeof(ocl_arg)),       \
             (ocl_arg[]){__VA_ARGS__})
/* Packed buffer arguments. On NVIDIA's OpenCL each buffer argument of a launch costs the
 * host ~0.38 us and the device ~0.12 us whether or not it repeats another
 * (bench/ocl_enqueue.c), and a fused launch's operands mostly share a few buffers (a
 * recorded step's arena, one weight). Kernels with a packed form take each distinct buffer
 * once; an operand finds its buffer by an index. Fills bufs with the distinct buffers of
 * mems[0 .. n) (the rest of bufs[0 .. cap) repeats bufs[0]) and idx[i] with mems[i]'s;
 * returns how many are distinct, or 0 when more than cap are or packing is off
 * (CTORCH_OPENCL_PACK=0, or ocl_test_pack(false)): the caller takes its unpacked form. */
int ocl_pack_bufs(int n, const cl_mem *mems, int cap, cl_mem *bufs, cl_int *idx);
/* Tests: packing on (the default) or off. */
void ocl_test_pack(bool on);
/* Tests: ct_host_pin gives shadows (pin.c) on devices whose memory is the host's too, so
 * that PoCL runs the pinned-read path. */
void ocl_test_pin(bool force);
/* Enqueues k on dev's queue (local NULL: the driver chooses). */
ct_status ocl_launch(ct_device *dev, cl_kernel k, const char *name, cl_uint dims, const size_t *global,
                     const size_t *local);

/* Whether dev is capturing a recorded step (capture.c): launches through ocl_launch are
 * recorded then, so a path that enqueues by other means (CLBlast) must not be taken. */
bool ocl_capturing(const ct_device *dev);

/* Temporaries of one op, released in queue order (a freed buffer is reused only by work
 * enqueued after what used it). */
ct_status ocl_tmp_alloc(ct_device *dev, size_t bytes, cl_mem *out);
void ocl_tmp_free(ct_device *dev, cl_mem mem, size_t bytes);
/* Enqueues a zero fill of bytes [off, off + bytes) of mem now, also while a step is being
 * captured (the fill is then not part of the step): the one-time initialization of state
 * that the launches themselves keep (attention's split counters). */
ct_status ocl_zero_now(ct_device *dev, cl_mem mem, size_t off, size_t bytes);

bool ocl_ew_supports(const ct_device *dev, const ct_op *op);
ct_status ocl_ew_run(ct_device *dev, const ct_op *op);
bool ocl_nn_supports(const ct_device *dev, const ct_op *op);
ct_status ocl_nn_run(ct_device *dev, const ct_op *op);
bool ocl_quant_supports(const ct_device *dev, const ct_op *op);
ct_status ocl_quant_run(ct_device *dev, const ct_op *op);
/* The step planner's hook (capture.c, while capturing): when ops[0..] start a pattern the
 * quant group runs as one launch (a one-row linear and the ADD after it; gate and up
 * linears and their SWIGLU), records that launch, every tensor of those ops written as
 * they would have been, and returns how many ops it covered; 0 otherwise. */
int ocl_quant_fuse(ct_device *dev, const ct_op *ops, int n);
/* A one-row LINEAR on the quant group's one-row GPU kernels (quant_mv1.c): Q4_K, Q5_K, Q6_K
 * and the 32-block formats, and f16 / bf16 weights, whose LINEAR the nn group hands over
 * when this says yes. */
bool ocl_mv1_ok(const ct_device *dev, const ct_op *op);
ct_status ocl_mv1_linear(ct_device *dev, const ct_op *op);
/* The same for the nn group (nn_pair.c): two adjacent independent ROPEs or SET_ROWS as one
 * launch (2), a ROPE with the SET_ROWS of its output and an independent SET_ROWS (3), or 0. */
int ocl_nn_pair(ct_device *dev, const ct_op *ops, int n);
void ocl_nn_test_pairs(bool on);
/* ct_backend_ops.import: a placed quantized weight kept in the kernels' own layout. */
ct_status ocl_quant_import(ct_device *dev, const ct_tensor *t);

#endif
