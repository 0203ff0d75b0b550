/* Instances of the fused job kernel for M = 5, 6 (see quant_fused.cuh). */
#include "backends/cuda/quant_fused.cuh"

namespace cufu {
CUFU_INSTANTIATE(5, false)
CUFU_INSTANTIATE(5, true)
CUFU_INSTANTIATE(6, false)
CUFU_INSTANTIATE(6, true)
} // namespace cufu
