/* Placeholder until the nn group lands: it claims no op, so they go to the next device. */
#include "backends/opencl/ocl_internal.h"

bool ocl_nn_supports(const ct_device *dev, const ct_op *op)
{
    (void)dev;
    (void)op;
    return false;
}

ct_status ocl_nn_run(ct_device *dev, const ct_op *op)
{
    (void)dev;
    return core_err(CT_ERR_UNSUPPORTED, "opencl: %s is not implemented", op_kind_name(op->kind));
}
