/* The step planner's own kernels (fuse_kernels.cu), launched by fuse.c for the groups
 * core/fuse.c finds. Plain pointers, sizes and element strides, as the other groups'
 * launchers. */
#ifndef CT_CUDA_FUSE_KERNELS_H
#define CT_CUDA_FUSE_KERNELS_H

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "ctorch/core.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FUSEK_MAX_ROPE 2
#define FUSEK_MAX_ROWS 2
#define FUSEK_MAX_NORM_HEADS 128 /* heads of a rope with a norm (their scales sit in shared memory) */

/* The attention prologue of one decode token (T = 1): ropes of q and k, each optionally
 * after a per-head RMS norm (then x is the norm's input, and the norm's output ny is
 * written too, as the rms_norm op would: x * scale * weight in f32), and row writes
 * into the KV cache, either of a rope's output (from_rope >= 0: row h of the write is
 * head h of that rope's y, taken from registers) or of a plain f32 source. Each rope is
 * computed as the nn group's rope kernel computes it (the same rounding), and each row
 * write keeps set_rows' contract: when one of its indices is outside [0, rows) it writes
 * nothing. */
typedef struct fusek_rope {
    const float *x; /* [H, D], heads xh elements apart, unit stride along D */
    int64_t xh;
    float *y;       /* [H, D] dense */
    int64_t H;
    float *ny;      /* the norm's output [H, D] dense; NULL: no norm */
    const void *nw; /* its weight [D] (f32 f16 bf16, dense) or NULL */
    ct_dtype nwdt;
    double eps;
} fusek_rope;

typedef struct fusek_rows {
    int from_rope;   /* -1: src below */
    const float *src; /* [n, cols], strides s0, s1 */
    int64_t s0, s1;
    const void *idx;  /* n indices, stride is */
    ct_dtype idt;
    int64_t is, n, cols;
    void *dst;        /* rows of cols elements, strides d0, d1, `rows` of them */
    ct_dtype ddt;
    int64_t d0, d1, rows;
} fusek_rows;

typedef struct fusek_prologue {
    int n_rope, n_rows;
    fusek_rope rope[FUSEK_MAX_ROPE];
    fusek_rows rows[FUSEK_MAX_ROWS];
    int64_t D;          /* head dim of every rope */
    int n_dims;         /* rotated dims (even, <= D) */
    double freq_base, freq_scale;
    int neox;
    const void *pos;    /* the position (element 0), i32 or i64 */
    ct_dtype pdt;
    int early;          /* no kernel before this one in its graph writes pos or the row indices:
                           the kernel may read them before it waits for its predecessor */
} fusek_prologue;

/* One launch for the whole prologue. */
cudaError_t fusek_rope_rows(const fusek_prologue *p, cudaStream_t s);

/* A post-norm and the residual add of its output: y = rms_norm(x) * w, z = y + r, for M
 * rows of K elements, all dense f32 but w (f32 f16 bf16 dense, or NULL); no output
 * overlaps another tensor (the planner's alias rule). */
typedef struct fusek_norm_add {
    const float *x, *r;
    float *y, *z;
    const void *w;
    ct_dtype wdt;
    double eps;
    int64_t M, K;
    int w_early; /* nothing before the kernel in its graph writes w: read before the PDL wait */
} fusek_norm_add;
cudaError_t fusek_norm_add_rows(const fusek_norm_add *p, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
