/* conv2d's im2col and conv_transpose2d's col2im (the GEMMs between are cuBLAS, nn_conv.c).
 * col2im is a gather (one thread per output pixel walks the kernel taps that land on it),
 * so no atomics and a deterministic sum order. */
#include "backends/cuda/dyn_access.cuh"
#include "backends/cuda/nn_kernels.h"

namespace {

__global__ void im2col_kernel(const float *x, nn_conv c, int64_t n, float *col)
{
    int64_t P = c.Ho * c.Wo, KK = c.kh * c.kw, total = c.C * KK * P;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t p = i % P, r = i / P; /* r = ch * KK + kh * kw + kw (ch over all groups: [G][Cg] is [C]) */
        int64_t ch = r / KK, k = r % KK, ky = k / c.kw, kx = k % c.kw;
        int64_t oy = p / c.Wo, ox = p % c.Wo;
        int64_t iy = oy * c.sh - c.ph + ky * c.dh, ix = ox * c.sw - c.pw + kx * c.dw;
        bool in = iy >= 0 && iy < c.H && ix >= 0 && ix < c.W;
        col[i] = in ? x[n * c.xs[0] + ch * c.xs[1] + iy * c.xs[2] + ix * c.xs[3]] : 0.0f;
    }
}

__global__ void col2im_kernel(const float *cols, nn_conv c, float *y)
{
    int64_t P = c.Ho * c.Wo, KK = c.kh * c.kw, HW = c.H * c.W, total = c.O * P;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t o = i / P, p = i % P, oy = p / c.Wo, ox = p % c.Wo;
        int64_t g = o / c.Og, og = o % c.Og;
        const float *cg = cols + g * (c.Og * KK * HW) + og * KK * HW;
        float acc = 0.0f;
        for (int64_t ky = 0; ky < c.kh; ky++) {
            int64_t ty = oy + c.ph - ky * c.dh;
            if (ty < 0 || ty % c.sh) continue;
            int64_t iy = ty / c.sh;
            if (iy >= c.H) continue;
            for (int64_t kx = 0; kx < c.kw; kx++) {
                int64_t tx = ox + c.pw - kx * c.dw;
                if (tx < 0 || tx % c.sw) continue;
                int64_t ix = tx / c.sw;
                if (ix >= c.W) continue;
                acc += cg[(ky * c.kw + kx) * HW + iy * c.W + ix];
            }
        }
        y[i] = acc;
    }
}

__global__ void conv_bias_kernel(void *y, ct_dtype ydt, const void *bias, ct_dtype bdt, int64_t bst, int64_t O,
                                 int64_t P, int64_t total)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x)
        cudyn::st_dyn(y, i, ydt, cudyn::ld_dyn(y, i, ydt) + cudyn::ld_dyn(bias, ((i / P) % O) * bst, bdt));
}

unsigned blocks_for(int64_t n)
{
    int64_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 65536 ? 65536 : g);
}

} // namespace

extern "C" cudaError_t nn_im2col(const float *x, const nn_conv *c, int64_t n, float *col, cudaStream_t s)
{
    int64_t total = c->C * c->kh * c->kw * c->Ho * c->Wo;
    if (total == 0) return cudaSuccess;
    im2col_kernel<<<blocks_for(total), 256, 0, s>>>(x, *c, n, col);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_col2im(const float *cols, const nn_conv *c, float *y, cudaStream_t s)
{
    int64_t total = c->O * c->Ho * c->Wo;
    if (total == 0) return cudaSuccess;
    col2im_kernel<<<blocks_for(total), 256, 0, s>>>(cols, *c, y);
    return cudaGetLastError();
}

extern "C" cudaError_t nn_conv_bias(void *y, ct_dtype ydt, const void *bias, ct_dtype bdt, int64_t bst, int64_t N,
                                    int64_t O, int64_t P, cudaStream_t s)
{
    int64_t total = N * O * P;
    if (total == 0) return cudaSuccess;
    conv_bias_kernel<<<blocks_for(total), 256, 0, s>>>(y, ydt, bias, bdt, bst, O, P, total);
    return cudaGetLastError();
}
