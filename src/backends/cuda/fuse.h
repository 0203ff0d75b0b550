/* The CUDA step planner (fuse.c): runs a captured segment of a recorded step with the
 * groups core/fuse.c finds launched fused, everything else through the per-op path. */
#ifndef CT_CUDA_FUSE_H
#define CT_CUDA_FUSE_H

#include "backends/cuda/cuda_internal.h"

typedef ct_status (*cuda_run_fn)(ct_device *dev, const ct_op *op);

/* Submits ops [0, n) to dev's stream (inside the step's stream capture), fused where the
 * planner matched a group and the kernels take it; run_one for every other op. Each
 * fused group is a trace line. */
ct_status cuda_fuse_run(ct_device *dev, const ct_op *ops, int n, cuda_run_fn run_one);

#endif
