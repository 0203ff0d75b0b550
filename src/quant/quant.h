/* GGUF block-quantized formats: layouts bit-identical to GGUF, dequantization,
 * the reference quantizers and the dot products the matmul kernels use. Below
 * the backends (depends on core only), so every backend and the formats layer share it. */
#ifndef CT_QUANT_QUANT_H
#define CT_QUANT_QUANT_H

#include "core/tensor.h"

/* n must be a multiple of t's block size; t may also be f32/f16/bf16. */
ct_status quant_dequantize_row(ct_dtype t, const void *src, float *dst, int64_t n);
/* Reference quantizer: same bytes as llama.cpp's quantize_row_*_ref. */
ct_status quant_quantize_row(ct_dtype t, const float *src, void *dst, int64_t n);

/* Dot product of one weight row (type t, n elements) with an activation row already
 * converted to quant_vec_dot_type(t) (e.g. Q8_0 or Q8_K); result in *s. */
typedef void (*quant_vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);
ct_dtype quant_vec_dot_type(ct_dtype t);
quant_vec_dot_fn quant_get_vec_dot(ct_dtype t);

#endif
