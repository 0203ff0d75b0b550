/* MATMUL and LINEAR through cuBLAS (row-major products as column-major ones: C^T = B^T A^T).
 *
 * An operand whose last two dims have a unit stride either way is passed as it is (op N or
 * T, its other stride as the leading dimension); the batch dims that fold into one stride
 * for both operands go to one strided-batched call, the rest loop on the host. Operands
 * with no unit stride are gathered into dense temporaries first.
 *
 * f32 uses CUBLAS_COMPUTE_32F (TF32 only with cuda_dev.allow_tf32); f16/bf16 products
 * accumulate in f32. LINEAR takes f32 x: with an f32 weight it is one f32 GEMM; with an
 * f16/bf16 weight, up to LIN_SMALL_M rows (decode) go to nn_linear_small (f32 x, exact f32
 * accumulation, the weight read once), more rows round x to the weight's dtype (as
 * llama.cpp does) for a tensor-core GEMM with f32 accumulation and an f32 result. */
#include <stdio.h>
#include <limits.h>
#include <string.h>

#include "backends/cuda/nn_blas.h"
#include "backends/cuda/nn_kernels.h"

#define LIN_SMALL_M 8
#define MAX_HOST_BATCHES 64

static cudaDataType_t cuda_type(ct_dtype t)
{
    return t == CT_F16 ? CUDA_R_16F : t == CT_BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

static cublasComputeType_t compute_of(const ct_device *dev, ct_dtype t)
{
    return t == CT_F32 && cuda_of(dev)->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
}

/* The transpose of a row-major [R, C] view (strides rs, cs) as a column-major C x R cuBLAS
 * operand: false when neither stride is a unit one (or the leading dim is too small). */
static bool colmajor_t(int64_t R, int64_t C, int64_t rs, int64_t cs, cublasOperation_t *op, int64_t *ld)
{
    if (cs == 1 || C == 1) {
        int64_t l = R == 1 ? (C > 1 ? C : 1) : rs, need = C > 1 ? C : 1;
        if (l >= need && l <= INT_MAX) {
            *op = CUBLAS_OP_N, *ld = l;
            return true;
        }
    }
    if (rs == 1 || R == 1) {
        int64_t l = C == 1 ? (R > 1 ? R : 1) : cs, need = R > 1 ? R : 1;
        if (l >= need && l <= INT_MAX) {
            *op = CUBLAS_OP_T, *ld = l;
            return true;
        }
    }
    return false;
}

/* First dim of the batch dims [0, nb) that fold, with every later one, into one stride. */
static int fold_from(const ct_tensor *t, int nb, int64_t *stride)
{
    int64_t st = 0, span = 1;
    bool have = false;
    int first = nb;
    for (int d = nb - 1; d >= 0; d--) {
        if (t->shape[d] == 1) {
            first = d;
            continue;
        }
        if (!have) {
            st = t->stride[d], span = t->shape[d], have = true, first = d;
            continue;
        }
        if (t->stride[d] != st * span) break;
        span *= t->shape[d];
        first = d;
    }
    *stride = st;
    return first;
}

static int64_t prefix_count(const ct_tensor *t, int upto)
{
    int64_t n = 1;
    for (int d = 0; d < upto; d++) n *= t->shape[d];
    return n;
}

/* ---- supports ---- */

static bool blas_dtype(ct_dtype t) { return t == CT_F32 || t == CT_F16 || t == CT_BF16; }

bool nn_blas_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    if (op->kind == CT_OP_MATMUL) {
        const ct_tensor *a = op->src[0], *b = op->src[1];
        int nd = a->ndim;
        if (!blas_dtype(a->dtype) || b->dtype != a->dtype || op->dst->dtype != a->dtype || nd < 2 ||
            nd > NN_MAX_DIMS)
            return false;
        int64_t M = a->shape[nd - 2], K = a->shape[nd - 1], N = b->shape[nd - 1];
        return M <= INT_MAX && K <= INT_MAX && N <= INT_MAX;
    }
    const ct_tensor *x = op->src[0], *w = op->src[1], *bias = op->src[2];
    if (x->dtype != CT_F32 || !blas_dtype(w->dtype) || op->dst->dtype != CT_F32 || x->ndim > NN_MAX_DIMS) return false;
    if (bias && (!blas_dtype(bias->dtype) || bias->ndim != 1)) return false;
    int64_t K = w->shape[1], N = w->shape[0], M = K ? ct_tensor_numel(x) / K : 0;
    return M <= INT_MAX && K <= INT_MAX && N <= INT_MAX;
}

/* ---- temporaries ---- */

typedef struct tmp_set {
    void *p[3];
    size_t n[3];
    int count;
} tmp_set;

static ct_status tmp_take(ct_device *dev, tmp_set *ts, size_t bytes, void **out)
{
    ct_status s = cuda_tmp_alloc(dev, bytes ? bytes : 16, out);
    if (s != CT_OK) return s;
    ts->p[ts->count] = *out, ts->n[ts->count] = bytes ? bytes : 16, ts->count++;
    return CT_OK;
}

static void tmp_drop(ct_device *dev, tmp_set *ts)
{
    for (int i = 0; i < ts->count; i++) cuda_tmp_free(dev, ts->p[i], ts->n[i]);
    ts->count = 0;
}

/* A dense copy of t (dtype dt) in a temporary; *view becomes its contiguous description. */
static ct_status densify(ct_device *dev, tmp_set *ts, const ct_tensor *t, const void *src, ct_dtype dt, void **out,
                         ct_tensor *view)
{
    nn_view v = {.nd = t->ndim};
    for (int d = 0; d < t->ndim; d++) v.shape[d] = t->shape[d], v.st[d] = t->stride[d];
    ct_status s = tmp_take(dev, ts, (size_t)ct_tensor_numel(t) * ct_dtype_block_bytes(dt), out);
    if (s != CT_OK) return s;
    cudaError_t e = nn_gather(src, t->dtype, v, *out, dt, cuda_of(dev)->stream);
    if (e != cudaSuccess) return cuda_status(e, dev, "gather for a product");
    *view = *t;
    view->dtype = dt;
    shape_contiguous_strides(t->ndim, t->shape, view->stride);
    return cuda_check_launch(dev, "gather for a product");
}

/* ---- MATMUL ---- */

typedef struct gemm_call {
    cublasOperation_t opa, opb;
    int64_t lda, ldb;
    int m, n, k;
} gemm_call;

static ct_status run_matmul(ct_device *dev, const ct_op *op)
{
    const ct_tensor *a0 = op->src[0], *b0 = op->src[1];
    ct_tensor av = *a0, bv = *b0;
    const char *pa = op_data(a0, dev), *pb = op_data(b0, dev);
    char *pc = op_data(op->dst, dev);
    int nd = av.ndim, nb = nd - 2;
    ct_dtype dt = av.dtype;
    int64_t M = av.shape[nd - 2], K = av.shape[nd - 1], N = bv.shape[nd - 1];
    if (ct_tensor_numel(op->dst) == 0) return CT_OK;
    cudaStream_t st = cuda_of(dev)->stream;
    if (K == 0) return cuda_status(cudaMemsetAsync(pc, 0, (size_t)ct_tensor_numel(op->dst) * ct_dtype_block_bytes(dt), st),
                                   dev, "matmul with K = 0");
    tmp_set ts = {0};
    ct_status s = CT_OK;
    gemm_call g = {.m = (int)N, .n = (int)M, .k = (int)K};
    int64_t sa, sb;
    int from = fold_from(&av, nb, &sa), fb = fold_from(&bv, nb, &sb);
    from = from > fb ? from : fb;
    bool ok_a = colmajor_t(M, K, av.stride[nd - 2], av.stride[nd - 1], &g.opa, &g.lda);
    bool ok_b = colmajor_t(K, N, bv.stride[nd - 2], bv.stride[nd - 1], &g.opb, &g.ldb);
    bool many = prefix_count(&av, from) > MAX_HOST_BATCHES;
    if (!ok_a || many) {
        void *p;
        s = densify(dev, &ts, a0, pa, dt, &p, &av);
        pa = p;
        if (s == CT_OK) ok_a = colmajor_t(M, K, av.stride[nd - 2], av.stride[nd - 1], &g.opa, &g.lda);
    }
    if (s == CT_OK && (!ok_b || many)) {
        void *p;
        s = densify(dev, &ts, b0, pb, dt, &p, &bv);
        pb = p;
        if (s == CT_OK) ok_b = colmajor_t(K, N, bv.stride[nd - 2], bv.stride[nd - 1], &g.opb, &g.ldb);
    }
    if (s == CT_OK) { /* the batch folding of what is now there */
        from = fold_from(&av, nb, &sa), fb = fold_from(&bv, nb, &sb);
        from = from > fb ? from : fb;
    }
    if (s == CT_OK && (!ok_a || !ok_b))
        s = core_err(CT_ERR_UNSUPPORTED, "cuda matmul: operands %s, %s have no cuBLAS layout", SHAPE_STR(a0),
                     SHAPE_STR(b0));
    int64_t inner = 1;
    for (int d = from; d < nb; d++) inner *= av.shape[d];
    int64_t outer = prefix_count(&av, from);
    size_t es = ct_dtype_block_bytes(dt);
    float one = 1.0f, zero = 0.0f;
    cudaDataType_t ty = cuda_type(dt);
    for (int64_t o = 0; s == CT_OK && o < outer; o++) {
        int64_t oa = 0, ob = 0, idx = o;
        for (int d = from - 1; d >= 0; d--) {
            int64_t i = idx % av.shape[d];
            idx /= av.shape[d];
            oa += i * av.stride[d], ob += i * bv.stride[d];
        }
        cublasStatus_t bs = cublasGemmStridedBatchedEx(
            cuda_of(dev)->blas, g.opb, g.opa, g.m, g.n, g.k, &one, pb + ob * (int64_t)es, ty, (int)g.ldb, sb,
            pa + oa * (int64_t)es, ty, (int)g.lda, sa, &zero, pc + o * inner * M * N * (int64_t)es, ty, (int)N, M * N,
            (int)inner, compute_of(dev, dt), CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS) s = cuda_blas_status(bs, dev, "matmul (cublasGemmStridedBatchedEx)");
    }
    tmp_drop(dev, &ts);
    return s;
}

/* ---- LINEAR ---- */

static ct_status run_linear(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x0 = op->src[0], *w = op->src[1], *bias = op->src[2];
    ct_tensor xv = *x0;
    const char *px = op_data(x0, dev);
    const char *pw = op_data(w, dev);
    const void *pbias = bias ? op_data(bias, dev) : NULL;
    float *py = op_data(op->dst, dev);
    int64_t N = w->shape[0], K = w->shape[1], M = ct_tensor_numel(op->dst) / (N ? N : 1);
    cudaStream_t st = cuda_of(dev)->stream;
    if (M == 0 || N == 0) return CT_OK;
    tmp_set ts = {0};
    ct_status s = CT_OK;
    if (K == 0) {
        s = cuda_status(cudaMemsetAsync(py, 0, sizeof(float) * (size_t)(M * N), st), dev, "linear with K = 0");
        if (s == CT_OK && bias)
            s = cuda_status(nn_add_bias(py, pbias, bias->dtype, bias->stride[0], M, N, st), dev, "linear bias");
        return s;
    }
    /* x as [M, K] with one row stride and unit element stride, else a dense copy */
    int64_t xrs, nd = xv.ndim, ldx = 1;
    cublasOperation_t opx = CUBLAS_OP_N;
    int first = fold_from(&xv, (int)nd - 1, &xrs);
    if (M == 1) xrs = K;
    if (first != 0 || (xv.stride[nd - 1] != 1 && K > 1) || !colmajor_t(M, K, xrs, 1, &opx, &ldx)) {
        void *p;
        s = densify(dev, &ts, x0, px, CT_F32, &p, &xv);
        px = p;
        xrs = K;
    }
    if (s == CT_OK && w->dtype != CT_F32 && M <= LIN_SMALL_M) {
        cudaError_t e = nn_linear_small((const float *)px, xrs, pw, w->dtype, w->stride[0], w->stride[1], pbias,
                                        bias ? bias->dtype : CT_F32, bias ? bias->stride[0] : 0, py, M, N, K, st);
        s = e != cudaSuccess ? cuda_status(e, dev, "linear (small batch)") : cuda_check_launch(dev, "linear (small batch)");
        tmp_drop(dev, &ts);
        return s;
    }
    if (s == CT_OK && w->dtype != CT_F32) {
        /* the weight's dtype for x too: cuBLAS multiplies like types only */
        void *p;
        nn_view v = {.nd = 2, .shape = {M, K}, .st = {xrs, 1}};
        s = tmp_take(dev, &ts, (size_t)(M * K) * 2, &p);
        if (s == CT_OK) {
            cudaError_t e = nn_gather(px, CT_F32, v, p, w->dtype, st);
            s = e != cudaSuccess ? cuda_status(e, dev, "linear: x to the weight's dtype") : CT_OK;
        }
        px = p;
        xrs = K;
    }
    cublasOperation_t opw = CUBLAS_OP_N;
    int64_t ldw = 1;
    const char *pwu = pw;
    ct_tensor wv = *w;
    if (s == CT_OK && !colmajor_t(K, N, w->stride[1], w->stride[0], &opw, &ldw)) {
        void *p;
        s = densify(dev, &ts, w, pw, w->dtype, &p, &wv);
        pwu = p;
        if (s == CT_OK && !colmajor_t(K, N, wv.stride[1], wv.stride[0], &opw, &ldw))
            s = core_err(CT_ERR_UNSUPPORTED, "cuda linear: weight %s has no cuBLAS layout", SHAPE_STR(w));
    }
    if (s == CT_OK && !colmajor_t(M, K, xrs, 1, &opx, &ldx))
        s = core_err(CT_ERR_UNSUPPORTED, "cuda linear: x %s has no cuBLAS layout", SHAPE_STR(x0));
    if (s == CT_OK) {
        float one = 1.0f, zero = 0.0f;
        cudaDataType_t ty = cuda_type(w->dtype);
        cublasStatus_t bs = cublasGemmEx(cuda_of(dev)->blas, opw, opx, (int)N, (int)M, (int)K, &one, pwu, ty, (int)ldw,
                                         px, ty, (int)ldx, &zero, py, CUDA_R_32F, (int)N, compute_of(dev, w->dtype),
                                         CUBLAS_GEMM_DEFAULT);
        if (bs != CUBLAS_STATUS_SUCCESS) {
            char what[192];
            snprintf(what, sizeof what, "linear of x %s by w %s (cublasGemmEx m %lld n %lld k %lld, ld %lld/%lld/%lld%s)",
                     SHAPE_STR(x0), SHAPE_STR(w), (long long)N, (long long)M, (long long)K, (long long)ldw,
                     (long long)ldx, (long long)N, !pwu || !px || !py ? ", an operand not on the device" : "");
            s = cuda_blas_status(bs, dev, what);
        }
    }
    if (s == CT_OK && bias) {
        cudaError_t e = nn_add_bias(py, pbias, bias->dtype, bias->stride[0], M, N, st);
        s = e != cudaSuccess ? cuda_status(e, dev, "linear bias") : cuda_check_launch(dev, "linear bias");
    }
    tmp_drop(dev, &ts);
    return s;
}

ct_status nn_blas_run(ct_device *dev, const ct_op *op)
{
    return op->kind == CT_OP_MATMUL ? run_matmul(dev, op) : run_linear(dev, op);
}
