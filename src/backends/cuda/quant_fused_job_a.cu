/* Instances of the fused job kernel for M = 1, 2 (see quant_fused.cuh). */
#include "backends/cuda/quant_fused.cuh"

namespace cufu {
CUFU_INSTANTIATE(1, false)
CUFU_INSTANTIATE(1, true)
CUFU_INSTANTIATE(2, false)
CUFU_INSTANTIATE(2, true)
} // namespace cufu
