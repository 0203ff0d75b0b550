/* Instances of the fused job kernel for M = 3, 4 (see quant_fused.cuh). */
#include "backends/cuda/quant_fused.cuh"

namespace cufu {
CUFU_INSTANTIATE(3, false)
CUFU_INSTANTIATE(3, true)
CUFU_INSTANTIATE(4, false)
CUFU_INSTANTIATE(4, true)
} // namespace cufu
