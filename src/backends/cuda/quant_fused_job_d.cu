/* Instances of the fused job kernel for M = 7, 8 (see quant_fused.cuh). */
#include "backends/cuda/quant_fused.cuh"

namespace cufu {
CUFU_INSTANTIATE(7, false)
CUFU_INSTANTIATE(7, true)
CUFU_INSTANTIATE(8, false)
CUFU_INSTANTIATE(8, true)
} // namespace cufu
