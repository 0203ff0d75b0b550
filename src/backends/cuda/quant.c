/* Placeholder until the quant group lands: it claims no op, so they go to the next device. */
#include "backends/cuda/cuda_internal.h"

bool cuda_quant_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    (void)op;
    return false;
}

ct_status cuda_quant_run(ct_device *dev, const ct_op *op)
{
    (void)dev;
    return core_err(CT_ERR_UNSUPPORTED, "cuda: %s is not implemented", op_kind_name(op->kind));
}

ct_status cuda_quant_import(ct_device *dev, const ct_tensor *t)
{
    (void)dev;
    (void)t;
    return CT_OK;
}
