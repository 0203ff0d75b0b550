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

/* The attention prologue of one decode token (T = 1): ropes of q and k, and row writes
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
} fusek_prologue;

/* One launch for the whole prologue. */
cudaError_t fusek_rope_rows(const fusek_prologue *p, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
