/* Helpers shared by the quantization tests (test_quant.c, test_quant_refdata.c). */
#ifndef CTORCH_TEST_QUANT_UTIL_H
#define CTORCH_TEST_QUANT_UTIL_H

#include <stdint.h>

#include "ctorch/ctorch.h"

/* ggml's type ids (GGUF tensor infos) -> ctorch dtypes; -1 for types we do not have. */
static inline int dtype_of_ggml(uint32_t id)
{
    static const int map[] = {[0] = CT_F32,   [1] = CT_F16,   [2] = CT_Q4_0,  [3] = CT_Q4_1,  [4] = -1,
                              [5] = -1,       [6] = CT_Q5_0,  [7] = CT_Q5_1,  [8] = CT_Q8_0,  [9] = CT_Q8_1,
                              [10] = CT_Q2_K, [11] = CT_Q3_K, [12] = CT_Q4_K, [13] = CT_Q5_K, [14] = CT_Q6_K,
                              [15] = CT_Q8_K};
    if (id == 30) return CT_BF16;
    return id < sizeof map / sizeof map[0] ? map[id] : -1;
}

#endif
