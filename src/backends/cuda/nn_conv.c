/* conv2d and conv_transpose2d on f32, f16 and bf16. cuDNN first where it is loaded
 * (nn_cudnn.c: tensor cores for the half types); otherwise, or where it declines a shape,
 * im2col + one strided-batched f32 GEMM per image, batched over groups (conv_transpose2d:
 * GEMM per image into columns, then a gathering col2im), with half operands widened into
 * f32 working copies and the result rounded once. The column buffer holds one image;
 * shapes whose buffer would pass CONV_COL_MAX bytes go to the next device. */
#include <limits.h>

#include "backends/cuda/nn_conv.h"
#include "backends/cuda/nn_kernels.h"

#define CONV_COL_MAX ((size_t)1 << 30)

static nn_conv geom_of(const ct_op *op)
{
    const ct_tensor *x = op->src[0], *w = op->src[1], *y = op->dst;
    const ct_conv2d_params *p = &op->p.conv;
    bool tr = op->kind == CT_OP_CONV_TRANSPOSE2D;
    nn_conv c = {.N = x->shape[0], .C = x->shape[1], .H = x->shape[2], .W = x->shape[3], .O = y->shape[1],
                 .Ho = y->shape[2], .Wo = y->shape[3], .kh = w->shape[2], .kw = w->shape[3], .G = p->groups,
                 .sh = p->stride[0], .sw = p->stride[1], .ph = p->padding[0], .pw = p->padding[1],
                 .dh = p->dilation[0], .dw = p->dilation[1]};
    c.Cg = c.C / c.G;
    c.Og = tr ? w->shape[1] : c.O / c.G;
    for (int i = 0; i < 4; i++) c.xs[i] = x->stride[i];
    return c;
}

static size_t col_bytes(const ct_op *op, const nn_conv *c)
{
    if (op->kind == CT_OP_CONV2D) return sizeof(float) * (size_t)(c->C * c->kh * c->kw) * (size_t)(c->Ho * c->Wo);
    return sizeof(float) * (size_t)(c->O * c->kh * c->kw) * (size_t)(c->H * c->W);
}

static bool conv_dtype(ct_dtype t) { return t == CT_F32 || t == CT_F16 || t == CT_BF16; }

bool nn_conv_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2], *y = op->dst;
    if (!conv_dtype(y->dtype) || x->dtype != y->dtype || w->dtype != y->dtype) return false;
    if (b && b->dtype != CT_F32 && b->dtype != y->dtype) return false;
    if (x->ndim != 4 || w->ndim != 4 || y->ndim != 4 || op->p.conv.groups < 1) return false;
    if (!tensor_is_contiguous(w) || !tensor_is_contiguous(y) ||
        (op->kind == CT_OP_CONV_TRANSPOSE2D && !tensor_is_contiguous(x)))
        return false;
    nn_conv c = geom_of(op);
    int64_t KK = c.kh * c.kw;
    /* every GEMM extent and leading dimension must fit cuBLAS's int */
    int64_t ext[] = {c.Ho * c.Wo, c.H * c.W, c.Og * KK, c.Cg * KK, c.Og, c.Cg};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (ext[i] > INT_MAX) return false;
    return col_bytes(op, &c) <= CONV_COL_MAX;
}

/* The f32 operands of the im2col path: the op's own, or working copies of half ones. */
typedef struct conv_f32 {
    const float *x, *w;
    float *y;
    void *tmp[3];
    size_t bytes[3];
} conv_f32;

static void f32_release(ct_device *dev, conv_f32 *f)
{
    for (int i = 0; i < 3; i++)
        if (f->tmp[i]) cuda_tmp_free(dev, f->tmp[i], f->bytes[i]);
}

static ct_status f32_operands(ct_device *dev, const ct_op *op, nn_conv *c, conv_f32 *f)
{
    *f = (conv_f32){.x = op_data(op->src[0], dev), .w = op_data(op->src[1], dev), .y = op_data(op->dst, dev)};
    if (op->dst->dtype == CT_F32) return CT_OK;
    const ct_tensor *ts[3] = {op->src[0], op->src[1], op->dst};
    ct_status s = CT_OK;
    for (int i = 0; i < 3 && s == CT_OK; i++) {
        f->bytes[i] = sizeof(float) * (size_t)(ct_tensor_numel(ts[i]) > 0 ? ct_tensor_numel(ts[i]) : 1);
        s = cuda_tmp_alloc(dev, f->bytes[i], &f->tmp[i]);
        if (s == CT_OK && i < 2) s = cuda_dense_copy(dev, ts[i], f->tmp[i], CT_F32, false);
    }
    if (s != CT_OK) {
        f32_release(dev, f);
        return s;
    }
    f->x = f->tmp[0], f->w = f->tmp[1], f->y = f->tmp[2];
    c->xs[3] = 1, c->xs[2] = c->W, c->xs[1] = c->H * c->W, c->xs[0] = c->C * c->H * c->W;
    return CT_OK;
}

/* One image: im2col + GEMM, or GEMM + col2im for the transposed conv. */
static ct_status conv_image(ct_device *dev, const ct_op *op, const nn_conv *c, const conv_f32 *f, float *col, int64_t n)
{
    cuda_dev *cd = cuda_of(dev);
    int64_t KK = c->kh * c->kw, P = c->Ho * c->Wo, HW = c->H * c->W;
    float one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = cd->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasStatus_t bs;
    if (op->kind == CT_OP_CONV2D) {
        cudaError_t e = nn_im2col(f->x, c, n, col, cd->stream);
        if (e != cudaSuccess) return cuda_status(e, dev, "conv2d im2col");
        /* y_n[g] (P x Og, column-major) = col[g] (P x CgKK) * w[g] (CgKK x Og) */
        bs = cublasGemmStridedBatchedEx(cd->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)P, (int)c->Og, (int)(c->Cg * KK), &one,
                                        col, CUDA_R_32F, (int)P, c->Cg * KK * P, f->w, CUDA_R_32F, (int)(c->Cg * KK),
                                        c->Og * c->Cg * KK, &zero, f->y + n * c->O * P, CUDA_R_32F, (int)P, c->Og * P,
                                        (int)c->G, ct, CUBLAS_GEMM_DEFAULT);
        return bs == CUBLAS_STATUS_SUCCESS ? CT_OK : cuda_blas_status(bs, dev, "conv2d GEMM");
    }
    /* cols[g] (HW x OgKK) = x_n[g] (HW x Cg) * w[g]^T (w[g] stored OgKK x Cg) */
    bs = cublasGemmStridedBatchedEx(cd->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)HW, (int)(c->Og * KK), (int)c->Cg, &one,
                                    f->x + n * c->xs[0], CUDA_R_32F, (int)HW, c->Cg * HW, f->w, CUDA_R_32F,
                                    (int)(c->Og * KK), c->Cg * c->Og * KK, &zero, col, CUDA_R_32F, (int)HW,
                                    c->Og * KK * HW, (int)c->G, ct, CUBLAS_GEMM_DEFAULT);
    if (bs != CUBLAS_STATUS_SUCCESS) return cuda_blas_status(bs, dev, "conv_transpose2d GEMM");
    cudaError_t e = nn_col2im(col, c, f->y + n * c->O * P, cd->stream);
    return e == cudaSuccess ? CT_OK : cuda_status(e, dev, "conv_transpose2d col2im");
}

static ct_status conv_im2col(ct_device *dev, const ct_op *op)
{
    nn_conv c = geom_of(op);
    const ct_tensor *b = op->src[2];
    size_t cb = col_bytes(op, &c);
    conv_f32 f;
    void *colv = NULL;
    ct_status s = f32_operands(dev, op, &c, &f);
    if (s != CT_OK) return s;
    s = cuda_tmp_alloc(dev, cb ? cb : 16, &colv);
    for (int64_t n = 0; s == CT_OK && n < c.N; n++) s = conv_image(dev, op, &c, &f, colv, n);
    if (s == CT_OK && b) {
        cudaError_t e = nn_conv_bias(f.y, CT_F32, op_data(b, dev), b->dtype, b->stride[0], c.N, c.O, c.Ho * c.Wo,
                                     cuda_of(dev)->stream);
        s = e != cudaSuccess ? cuda_status(e, dev, "conv bias") : CT_OK;
    }
    if (s == CT_OK && op->dst->dtype != CT_F32) s = cuda_dense_copy(dev, op->dst, f.y, CT_F32, true);
    if (s == CT_OK) s = cuda_check_launch(dev, op_kind_name(op->kind));
    if (colv) cuda_tmp_free(dev, colv, cb ? cb : 16);
    f32_release(dev, &f);
    return s;
}

ct_status nn_conv_run(ct_device *dev, const ct_op *op)
{
    if (ct_tensor_numel(op->dst) == 0) return CT_OK;
    bool done = false;
    ct_status s = nn_cudnn_conv(dev, op, &done);
    if (s != CT_OK || done) return s;
    return conv_im2col(dev, op);
}
