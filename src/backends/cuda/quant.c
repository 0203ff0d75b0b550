/* The CUDA quant group: every op with a block-quantized source (Q4_0 Q4_1 Q5_0 Q5_1 Q8_0
 * Q2_K Q3_K Q4_K Q5_K Q6_K): dequantizing copy, embedding from a quantized table, and
 * linear with a quantized weight.
 *
 * linear, decode (M <= CUQ_MV_MAX_ROWS rows of x): one row of x and a small weight go to
 * quant_mv.cu's f32 FMA kernel (one launch); the rest to the fused decode job kernel with
 * one weight (quant_fused.cu: x quantized to 8 bits per 32, integer dots, the weight
 * prefetched into L2 under PDL), quant_mv.cu's integer-dot kernel for what it refuses.
 * Prefill (more rows): the weight is dequantized to f32 in slices of rows, each slice
 * multiplied by cuBLAS with TF32 tensor cores. TF32 here is not the f32-GEMM switch
 * (CTORCH_CUDA_TF32): it rounds x and the dequantized weight to 11 significant bits
 * (2^-11 relative), far below the 2-8-bit quantization the weight carries and finer than
 * the CPU's own 8-bit rounding of x for its dots, while f32 keeps the range (an f16 x
 * could overflow). An f16 variant (x scaled into range by a power of two) measured slower
 * on the H100 (22.6k against ~40k t/s pp512) and was taken out.
 * ct_matmul with a quantized first operand reaches devices as LINEAR (the frontend
 * rewrites it), so the group claims no MATMUL.
 * Weights stay in GGUF's layout (no import): the kernels read it with coalesced loads. */
#include <stdint.h>

#include "backends/cuda/cuda_internal.h"
#include "backends/cuda/quant_kernels.h"

/* Decode: a single row of x times a weight of at most this many elements is dequantized
 * and multiplied in f32 (one kernel); anything larger quantizes x to 8 bits first and
 * uses integer dots (two kernels, but a third of the instructions per weight byte). The
 * crossover was measured with bench/cuda_quant.c on an H100. */
#define MV_FMA_MAX_ELEMS ((int64_t)1 << 22)
/* Bytes of f32 weight slice the prefill path dequantizes at a time (a slice of 2048 rows
 * of 2048 keeps the GEMM large; the temporary stays far below the weights' own size). */
#define PREFILL_SLICE_BYTES ((size_t)16 << 20)

static bool plain_float(ct_dtype t) { return t == CT_F32 || t == CT_F16 || t == CT_BF16; }

/* A quantized view whose rows are whole, dense runs of blocks, as the kernels read them:
 * the last dim unit-stride and a multiple of the block size, every other dim whole blocks. */
static bool quant_rows_ok(const ct_tensor *t)
{
    if (!cuq_format_ok(t->dtype) || t->ndim < 1 || t->ndim > CUQ_MAX_DIMS) return false;
    int64_t bs = ct_dtype_block_size(t->dtype), n = t->shape[t->ndim - 1];
    if (n % bs != 0 || n > INT32_MAX / 2 || (n > 1 && t->stride[t->ndim - 1] != 1)) return false; /* 32-bit indices in a row */
    for (int d = 0; d < t->ndim - 1; d++)
        if (t->shape[d] > 1 && t->stride[d] % bs != 0) return false;
    return true;
}

static bool supports_copy(const ct_op *op)
{
    const ct_tensor *s = op->src[0], *d = op->dst;
    if (!quant_rows_ok(s) || d->ndim < s->ndim || d->ndim > CUQ_MAX_DIMS) return false;
    if (ct_dtype_is_quantized(d->dtype)) /* a raw copy of blocks */
        return d->dtype == s->dtype && tensor_is_contiguous(s) && tensor_is_contiguous(d) &&
               shape_equal(s->ndim, s->shape, d->ndim, d->shape);
    /* quantized rows are consumed whole: never broadcast along the last dim */
    return plain_float(d->dtype) && s->shape[s->ndim - 1] == d->shape[d->ndim - 1];
}

static bool supports_embedding(const ct_op *op)
{
    const ct_tensor *w = op->src[0], *ids = op->src[1], *d = op->dst;
    return w->ndim == 2 && quant_rows_ok(w) && (ids->dtype == CT_I32 || ids->dtype == CT_I64) &&
           ids->ndim <= CUQ_MAX_DIMS && d->dtype == CT_F32 && tensor_is_contiguous(d);
}

static bool supports_linear(const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2], *d = op->dst;
    if (w->ndim != 2 || !quant_rows_ok(w) || w->shape[1] == 0) return false;
    if (x->dtype != CT_F32 || x->ndim < 1 || x->ndim > CUQ_MAX_DIMS || d->dtype != CT_F32 || !tensor_is_contiguous(d))
        return false;
    return !b || (b->ndim == 1 && (plain_float(b->dtype) || b->dtype == CT_F64));
}

bool cuda_quant_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    switch (op->kind) {
    case CT_OP_COPY: return ct_dtype_is_quantized(op->src[0]->dtype) && supports_copy(op);
    case CT_OP_EMBEDDING: return ct_dtype_is_quantized(op->src[0]->dtype) && supports_embedding(op);
    case CT_OP_LINEAR:
        return ct_dtype_is_quantized(op->src[1]->dtype) && !ct_dtype_is_quantized(op->src[0]->dtype) &&
               supports_linear(op);
    default: return false;
    }
}

/* The row pointer of a quantized view, or NULL when the kernels' loads would be misaligned
 * there (an unusual view offset): the op is then refused at run time, so it runs elsewhere. */
static const void *quant_ptr(const ct_tensor *t, const ct_device *dev)
{
    const void *p = op_data(t, dev);
    return p && ((uintptr_t)p % (uintptr_t)cuq_align(t->dtype)) == 0 ? p : NULL;
}

static ct_status misaligned(const char *op, const ct_tensor *t)
{
    return core_err(CT_ERR_UNSUPPORTED, "cuda: %s: %s %s has no device copy or is not aligned for the kernels", op,
                    ct_dtype_name(t->dtype), SHAPE_STR(t));
}

static ct_status launch_status(ct_device *dev, bool launched, const char *what)
{
    if (!launched) return core_err(CT_ERR_UNSUPPORTED, "cuda: no kernel for %s", what);
    return cuda_check_launch(dev, what);
}

static ct_status run_copy(ct_device *dev, const ct_op *op)
{
    const ct_tensor *s = op->src[0], *d = op->dst;
    cuda_dev *cd = cuda_of(dev);
    const void *ps = quant_ptr(s, dev);
    void *pd = op_data(d, dev);
    if (!ps || !pd) return misaligned("copy", s);
    if (ct_dtype_is_quantized(d->dtype))
        return cuda_status(cudaMemcpyAsync(pd, ps, ct_tensor_nbytes(d), cudaMemcpyDeviceToDevice, cd->stream), dev,
                           "copy of quantized blocks");
    int64_t bs = ct_dtype_block_size(s->dtype), n = d->shape[d->ndim - 1];
    cuq_rows rows = {.nd = d->ndim - 1};
    int lead = d->ndim - s->ndim; /* dst dims that src lacks: broadcast */
    for (int i = 0; i < rows.nd; i++) {
        rows.shape[i] = d->shape[i];
        rows.dst_stride[i] = d->stride[i];
        int j = i - lead;
        rows.src_stride[i] = j >= 0 && s->shape[j] > 1 ? s->stride[j] / bs : 0;
    }
    return launch_status(dev, cuq_dequant(s->dtype, ps, pd, d->dtype, &rows, n, d->stride[d->ndim - 1], cd->stream),
                         "dequantizing copy");
}

static ct_status run_embedding(ct_device *dev, const ct_op *op)
{
    const ct_tensor *w = op->src[0], *ids = op->src[1];
    const void *pw = quant_ptr(w, dev), *pi = op_data(ids, dev);
    float *out = op_data(op->dst, dev);
    if (!pw || !pi || !out) return misaligned("embedding", w);
    int64_t bs = ct_dtype_block_size(w->dtype);
    bool ok = cuq_embedding(w->dtype, pw, w->stride[0] / bs, w->shape[0], w->shape[1], pi, ids->dtype, ids->ndim,
                            ids->shape, ids->stride, shape_numel(ids->ndim, ids->shape), out, cuda_of(dev)->stream);
    return launch_status(dev, ok, "quantized embedding");
}

/* x's leading dims fold into M rows `*rs` floats apart with unit columns, 16-byte aligned? */
static bool x_direct(const ct_tensor *x, const float *px, int64_t *rs)
{
    int nd = x->ndim;
    int64_t K = x->shape[nd - 1], expect = -1, span = 1;
    if (K > 1 && x->stride[nd - 1] != 1) return false;
    for (int d = nd - 2; d >= 0; d--) {
        if (x->shape[d] == 1) continue;
        if (expect == -1) expect = x->stride[d];
        if (x->stride[d] != expect * span) return false;
        span *= x->shape[d];
    }
    *rs = expect == -1 ? K : expect;
    return *rs >= K && *rs % 4 == 0 && ((uintptr_t)px & 15) == 0;
}

static ct_status prefill(ct_device *dev, const ct_tensor *w, const void *pw, size_t wrow, const float *px, int64_t rsx,
                         int64_t M, int64_t N, int64_t K, float *out)
{
    cuda_dev *cd = cuda_of(dev);
    int64_t slice = (int64_t)(PREFILL_SLICE_BYTES / ((size_t)K * sizeof(float)));
    if (slice < 64) slice = 64;
    if (slice > N) slice = N;
    size_t bytes = (size_t)slice * (size_t)K * sizeof(float);
    float *tmp;
    ct_status s = cuda_tmp_alloc(dev, bytes, (void **)&tmp);
    if (s != CT_OK) return s;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t n0 = 0; n0 < N && s == CT_OK; n0 += slice) {
        int64_t nc = N - n0 < slice ? N - n0 : slice;
        cuq_rows rows = {.nd = 1, .shape = {nc}, .dst_stride = {K}, .src_stride = {(int64_t)(wrow / ct_dtype_block_bytes(w->dtype))}};
        s = launch_status(dev, cuq_dequant(w->dtype, (const char *)pw + (size_t)n0 * wrow, tmp, CT_F32, &rows, K, 1, cd->stream),
                          "weight dequantization");
        if (s != CT_OK) break;
        /* column-major view: out^T [N, M] (ld N) = w [nc, K] (col-major K x nc, transposed) . x^T (K x M, ld rsx) */
        s = cuda_blas_status(cublasGemmEx(cd->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)nc, (int)M, (int)K, &one, tmp, CUDA_R_32F,
                                          (int)K, px, CUDA_R_32F, (int)rsx, &zero, out + n0, CUDA_R_32F, (int)N,
                                          CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT),
                             dev, "quantized linear (GemmEx)");
    }
    cuda_tmp_free(dev, tmp, bytes);
    return s;
}

/* Decode through the fused job kernel (quant_fused.cu) as a job of one weight: x's q8
 * form and integer dots (quantizing x is a launch of its own). */
static ct_status matvec_job(ct_device *dev, const cuq_mv_job *job)
{
    cuda_dev *cd = cuda_of(dev);
    size_t bytes = cuq_mv_tmp_bytes(job);
    void *tmp = NULL;
    ct_status s = bytes ? cuda_tmp_alloc(dev, bytes, &tmp) : CT_OK;
    if (s != CT_OK) return s;
    s = launch_status(dev, cuq_mv_run(job, tmp, cd->sm_count, cd->stream), "quantized matvec (fused job)");
    if (tmp) cuda_tmp_free(dev, tmp, bytes);
    return s;
}

static ct_status matvec(ct_device *dev, ct_dtype wt, const void *pw, size_t wrow, const float *px, int64_t rsx,
                        int64_t M, int64_t N, int64_t K, float *out)
{
    cuda_dev *cd = cuda_of(dev);
    cuq_mv_job job = {.M = M, .K = K, .x = px, .x_row = rsx, .n_parts = 1,
                      .part = {{.wt = wt, .w = pw, .w_row = wrow, .N = N, .out = out}}};
    /* One row of x and a small weight: quant_mv.cu's f32 FMA kernel, one launch and faster
     * than the job kernel's own dequantizing path there (H100, bench/cuda_quant.c, Q4_K:
     * 256x2048 2.23 vs 3.05 us, 2048x2048 4.47 vs 4.64 us). Larger: the job kernel (5632x2048
     * 6.67 vs 6.66 us, Q6_K 2048x5632 9.33 vs 10.31 us, both with the quantizing launch). */
    if (!(M == 1 && N * K <= MV_FMA_MAX_ELEMS) && cuq_mv_ok(&job)) return matvec_job(dev, &job);
    /* the older per-op kernels (quant_mv.cu) for the rest and what the job kernel refuses */
    if (M == 1 && N * K <= MV_FMA_MAX_ELEMS)
        return launch_status(dev, cuq_matvec(wt, pw, wrow, px, rsx, M, N, K, out, cd->sm_count, cd->stream),
                             "quantized matvec");
    size_t bytes = cuq_matvec_q8_tmp_bytes(M, K);
    void *tmp;
    ct_status s = cuda_tmp_alloc(dev, bytes, &tmp);
    if (s != CT_OK) return s;
    s = launch_status(dev, cuq_matvec_q8(wt, pw, wrow, px, rsx, M, N, K, tmp, out, cd->sm_count, cd->stream),
                      "quantized matvec (integer dots)");
    cuda_tmp_free(dev, tmp, bytes);
    return s;
}

static ct_status run_linear(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *bias = op->src[2];
    cuda_dev *cd = cuda_of(dev);
    int64_t N = w->shape[0], K = w->shape[1], M = shape_numel(x->ndim - 1, x->shape);
    if (M == 0 || N == 0) return CT_OK;
    const void *pw = quant_ptr(w, dev);
    const float *px = op_data(x, dev);
    float *out = op_data(op->dst, dev), *xtmp = NULL;
    if (!pw || !px || !out) return misaligned("linear", w);
    if (M > INT32_MAX || N > INT32_MAX || K > INT32_MAX)
        return core_err(CT_ERR_UNSUPPORTED, "cuda: linear: %s x %s exceeds the 32-bit sizes of cuBLAS", SHAPE_STR(x),
                        SHAPE_STR(w));
    size_t wrow = ct_dtype_row_bytes(w->dtype, N > 1 ? w->stride[0] : K); /* one row: its stride is free */
    size_t xbytes = (size_t)M * (size_t)K * sizeof(float);
    int64_t rsx;
    ct_status s = CT_OK;
    if (!x_direct(x, px, &rsx)) {
        if ((s = cuda_tmp_alloc(dev, xbytes, (void **)&xtmp)) != CT_OK) return s;
        s = launch_status(dev, cuq_pack_x(px, x->ndim, x->shape, x->stride, xtmp, cd->stream), "packing x");
        px = xtmp;
        rsx = K;
    }
    if (s == CT_OK && M <= CUQ_MV_MAX_ROWS)
        s = matvec(dev, w->dtype, pw, wrow, px, rsx, M, N, K, out);
    else if (s == CT_OK)
        s = prefill(dev, w, pw, wrow, px, rsx, M, N, K, out);
    if (s == CT_OK && bias) {
        const void *pb = op_data(bias, dev);
        s = pb ? launch_status(dev, cuq_add_bias(out, M, N, pb, bias->dtype, bias->stride[0], cd->stream), "bias")
               : misaligned("linear bias", bias);
    }
    if (xtmp) cuda_tmp_free(dev, xtmp, xbytes);
    return s;
}

ct_status cuda_quant_run(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_COPY: return run_copy(dev, op);
    case CT_OP_EMBEDDING: return run_embedding(dev, op);
    case CT_OP_LINEAR: return run_linear(dev, op);
    default: return core_err(CT_ERR_UNSUPPORTED, "cuda: the quant group has no %s", op_kind_name(op->kind));
    }
}

/* GGUF's layout serves every kernel here (coalesced 16-byte loads for Q4_K/Q5_K, contiguous
 * chunks for the rest), so placement keeps the raw bytes. */
ct_status cuda_quant_import(ct_device *dev, const ct_tensor *t)
{
    (void)dev;
    (void)t;
    return CT_OK;
}
