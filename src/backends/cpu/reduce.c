/* STUB: replaced by the real kernels. */
#include "backends/cpu/cpu.h"

ct_status cpu_run_reduce(ct_device *dev, const ct_op *op)
{
    (void)dev;
    return core_err(CT_ERR_UNSUPPORTED, "cpu: %s has no kernel yet", op_kind_name(op->kind));
}
