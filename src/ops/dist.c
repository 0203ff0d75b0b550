/* Distributed collectives. Without a process group (NCCL/MPI, a later issue)
 * all_reduce over one process is the identity, as in the seed's semantics; it
 * still goes through the executor so traces show it. */
#include "ops/frontend.h"

ct_status ct_all_reduce(ct_tensor *t, ct_reduce_op op)
{
    OPS_CHECK("ct_all_reduce", t);
    if ((unsigned)op > CT_REDUCE_AVG) return core_err(CT_ERR_INVALID_ARG, "ct_all_reduce: invalid reduce op %d", (int)op);
    ct_op o = {.kind = CT_OP_ALL_REDUCE, .n_src = 1, .src = {t}, .dst = t, .p.allreduce = {op}};
    return exec_run(&o);
}
