/* Entry points of the block formats: argument checks and per-type dispatch (the SIMD
 * levels and their kernel tables are in quant_simd.c). */
#include "quant/quant_impl.h"

typedef void (*deq_fn)(const void *src, float *dst, int64_t nb);
typedef void (*ref_fn)(const float *src, void *dst, int64_t nb);

static const deq_fn g_deq[CT_DTYPE_COUNT] = {
    [CT_Q4_0] = quant_deq_q4_0, [CT_Q4_1] = quant_deq_q4_1, [CT_Q5_0] = quant_deq_q5_0,
    [CT_Q5_1] = quant_deq_q5_1, [CT_Q8_0] = quant_deq_q8_0, [CT_Q8_1] = quant_deq_q8_1,
    [CT_Q2_K] = quant_deq_q2_k, [CT_Q3_K] = quant_deq_q3_k, [CT_Q4_K] = quant_deq_q4_k,
    [CT_Q5_K] = quant_deq_q5_k, [CT_Q6_K] = quant_deq_q6_k, [CT_Q8_K] = quant_deq_q8_k,
};

static const ref_fn g_ref[CT_DTYPE_COUNT] = {
    [CT_Q4_0] = quant_ref_q4_0, [CT_Q4_1] = quant_ref_q4_1, [CT_Q5_0] = quant_ref_q5_0,
    [CT_Q5_1] = quant_ref_q5_1, [CT_Q8_0] = quant_ref_q8_0, [CT_Q8_1] = quant_ref_q8_1,
    [CT_Q2_K] = quant_ref_q2_k, [CT_Q3_K] = quant_ref_q3_k, [CT_Q4_K] = quant_ref_q4_k,
    [CT_Q5_K] = quant_ref_q5_k, [CT_Q6_K] = quant_ref_q6_k, [CT_Q8_K] = quant_ref_q8_k,
};

static ct_status check_row(const char *what, ct_dtype t, const void *src, const void *dst, int64_t n)
{
    if ((unsigned)t >= CT_DTYPE_COUNT) return core_err(CT_ERR_DTYPE, "%s: invalid dtype %d", what, (int)t);
    if (!src || !dst) return core_err(CT_ERR_INVALID_ARG, "%s %s: null row pointer", what, ct_dtype_name(t));
    if (n < 0) return core_err(CT_ERR_SHAPE, "%s %s: negative length %lld", what, ct_dtype_name(t), (long long)n);
    int64_t bs = ct_dtype_block_size(t);
    if (n % bs)
        return core_err(CT_ERR_SHAPE, "%s %s: row of %lld elements is not a multiple of the block size %lld", what,
                        ct_dtype_name(t), (long long)n, (long long)bs);
    return CT_OK;
}

ct_status quant_dequantize_row(ct_dtype t, const void *src, float *dst, int64_t n)
{
    ct_status s = check_row("dequantize", t, src, dst, n);
    if (s != CT_OK) return s;
    switch (t) {
    case CT_F32:
        memmove(dst, src, sizeof(float) * (size_t)n);
        return CT_OK;
    case CT_F16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, (const char *)src + 2 * i, 2);
            dst[i] = ct_f16_to_f32(h);
        }
        return CT_OK;
    case CT_BF16:
        for (int64_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, (const char *)src + 2 * i, 2);
            dst[i] = ct_bf16_to_f32(h);
        }
        return CT_OK;
    default:
        break;
    }
    if (!g_deq[t])
        return core_err(CT_ERR_DTYPE, "dequantize: %s is neither a block format nor f32/f16/bf16", ct_dtype_name(t));
    g_deq[t](src, dst, n / ct_dtype_block_size(t));
    return CT_OK;
}

ct_status quant_quantize_row(ct_dtype t, const float *src, void *dst, int64_t n)
{
    if ((unsigned)t < CT_DTYPE_COUNT && !g_ref[t])
        return core_err(CT_ERR_DTYPE, "quantize: %s is not a block-quantized dtype", ct_dtype_name(t));
    ct_status s = check_row("quantize", t, src, dst, n);
    if (s != CT_OK) return s;
    quant_act_fn fast = quant_get_act(t);
    (fast ? fast : g_ref[t])(src, dst, n / ct_dtype_block_size(t));
    return CT_OK;
}

ct_dtype quant_vec_dot_type(ct_dtype t)
{
    switch (t) {
    case CT_Q4_0: case CT_Q5_0: case CT_Q8_0: return CT_Q8_0;
    case CT_Q4_1: case CT_Q5_1: case CT_Q8_1: return CT_Q8_1;
    case CT_Q2_K: case CT_Q3_K: case CT_Q4_K: case CT_Q5_K: case CT_Q6_K: case CT_Q8_K: return CT_Q8_K;
    default: return t; /* plain types are not this module's concern */
    }
}
