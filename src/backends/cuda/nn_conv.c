/* conv2d (im2col + one strided-batched GEMM per image, batched over groups) and
 * conv_transpose2d (GEMM per image into columns, then a gathering col2im), f32 like the
 * CPU's compute type for these (the frontend casts other float inputs). The column buffer
 * holds one image; shapes whose buffer would pass CONV_COL_MAX bytes go to the CPU. */
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

bool nn_conv_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    const ct_tensor *x = op->src[0], *w = op->src[1], *b = op->src[2];
    if (x->dtype != CT_F32 || w->dtype != CT_F32 || op->dst->dtype != CT_F32 || (b && b->dtype != CT_F32)) return false;
    if (x->ndim != 4 || w->ndim != 4 || op->dst->ndim != 4 || op->p.conv.groups < 1) return false;
    if (!tensor_is_contiguous(w) || (op->kind == CT_OP_CONV_TRANSPOSE2D && !tensor_is_contiguous(x))) return false;
    nn_conv c = geom_of(op);
    int64_t KK = c.kh * c.kw;
    /* every GEMM extent and leading dimension must fit cuBLAS's int */
    int64_t ext[] = {c.Ho * c.Wo, c.H * c.W, c.Og * KK, c.Cg * KK, c.Og, c.Cg};
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++)
        if (ext[i] > INT_MAX) return false;
    return col_bytes(op, &c) <= CONV_COL_MAX;
}

ct_status nn_conv_run(ct_device *dev, const ct_op *op)
{
    cuda_dev *cd = cuda_of(dev);
    nn_conv c = geom_of(op);
    const float *x = op_data(op->src[0], dev), *w = op_data(op->src[1], dev);
    const ct_tensor *b = op->src[2];
    float *y = op_data(op->dst, dev);
    int64_t KK = c.kh * c.kw, P = c.Ho * c.Wo, HW = c.H * c.W;
    if (ct_tensor_numel(op->dst) == 0) return CT_OK;
    size_t cb = col_bytes(op, &c);
    void *colv = NULL;
    ct_status s = cuda_tmp_alloc(dev, cb ? cb : 16, &colv);
    if (s != CT_OK) return s;
    float *col = colv, one = 1.0f, zero = 0.0f;
    cublasComputeType_t ct = cd->allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    bool tr = op->kind == CT_OP_CONV_TRANSPOSE2D;
    for (int64_t n = 0; s == CT_OK && n < c.N; n++) {
        cublasStatus_t bs;
        if (!tr) {
            cudaError_t e = nn_im2col(x, &c, n, col, cd->stream);
            if (e != cudaSuccess) {
                s = cuda_status(e, dev, "conv2d im2col");
                break;
            }
            /* y_n[g] (P x Og, column-major) = col[g] (P x CgKK) * w[g] (CgKK x Og) */
            bs = cublasGemmStridedBatchedEx(cd->blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)P, (int)c.Og, (int)(c.Cg * KK), &one,
                                            col, CUDA_R_32F, (int)P, c.Cg * KK * P, w, CUDA_R_32F, (int)(c.Cg * KK),
                                            c.Og * c.Cg * KK, &zero, y + n * c.O * P, CUDA_R_32F, (int)P, c.Og * P,
                                            (int)c.G, ct, CUBLAS_GEMM_DEFAULT);
        } else {
            /* cols[g] (HW x OgKK) = x_n[g] (HW x Cg) * w[g]^T (w[g] stored OgKK x Cg) */
            bs = cublasGemmStridedBatchedEx(cd->blas, CUBLAS_OP_N, CUBLAS_OP_T, (int)HW, (int)(c.Og * KK), (int)c.Cg,
                                            &one, x + n * c.xs[0], CUDA_R_32F, (int)HW, c.Cg * HW, w, CUDA_R_32F,
                                            (int)(c.Og * KK), c.Cg * c.Og * KK, &zero, col, CUDA_R_32F, (int)HW,
                                            c.Og * KK * HW, (int)c.G, ct, CUBLAS_GEMM_DEFAULT);
        }
        if (bs != CUBLAS_STATUS_SUCCESS) {
            s = cuda_blas_status(bs, dev, tr ? "conv_transpose2d GEMM" : "conv2d GEMM");
            break;
        }
        if (tr) {
            cudaError_t e = nn_col2im(col, &c, y + n * c.O * P, cd->stream);
            if (e != cudaSuccess) s = cuda_status(e, dev, "conv_transpose2d col2im");
        }
    }
    if (s == CT_OK && b) {
        cudaError_t e = nn_conv_bias(y, op_data(b, dev), b->stride[0], c.N, c.O, P, cd->stream);
        s = e != cudaSuccess ? cuda_status(e, dev, "conv bias") : CT_OK;
    }
    if (s == CT_OK) s = cuda_check_launch(dev, op_kind_name(op->kind));
    cuda_tmp_free(dev, colv, cb ? cb : 16);
    return s;
}
