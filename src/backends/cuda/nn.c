/* Placeholder until the nn group lands: it claims no op, so they go to the next device. */
#include "backends/cuda/cuda_internal.h"

bool cuda_nn_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    (void)op;
    return false;
}

ct_status cuda_nn_run(ct_device *dev, const ct_op *op)
{
    (void)dev;
    return core_err(CT_ERR_UNSUPPORTED, "cuda: %s is not implemented", op_kind_name(op->kind));
}
