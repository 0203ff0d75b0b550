/* quant_gemm_avx512.c built again for the avx512 level (AVX-512 F/BW/VL/DQ without AVX512-VNNI):
 * the same kernels with the VNNI dot primitives replaced (quant_avx512_isa.h), symbols
 * suffixed _novnni. */
#define QZ_VNNI 0
#include "quant_gemm_avx512.c"
