/* STUB: replaced by the block formats. */
#include "quant/quant.h"

ct_status quant_dequantize_row(ct_dtype t, const void *src, float *dst, int64_t n)
{
    (void)src; (void)dst; (void)n;
    return core_err(CT_ERR_UNSUPPORTED, "dequantize: %s not implemented yet", ct_dtype_name(t));
}
