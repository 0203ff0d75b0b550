/* GGUF's quantized blocks, byte for byte as they lie in a file, for every compiler
 * that reads them: the library's C, and device kernels in CUDA C++ (nvcc or NVRTC)
 * and OpenCL C. So this header is plain structs of fixed-width integers (f16 fields
 * are raw IEEE half bits in uint16_t; Q8_K's scale is a float), the block constants,
 * and size checks; no intrinsics, no library beyond <stdint.h>, and not even that
 * where the device compiler has none (OpenCL C, NVRTC). */
#ifndef CT_QUANT_BLOCKS_H
#define CT_QUANT_BLOCKS_H

/* OpenCL C defines __OPENCL_C_VERSION__ (1.2 on) and a device compiler __OPENCL_VERSION__. */
#if defined(__OPENCL_C_VERSION__) || defined(__OPENCL_VERSION__)
#define QUANT_BLOCKS_OPENCL 1
#endif

#if defined(QUANT_BLOCKS_OPENCL)
typedef uchar uint8_t;
typedef char int8_t;
typedef ushort uint16_t;
typedef short int16_t;
#elif defined(__CUDACC_RTC__)
typedef unsigned char uint8_t;
typedef signed char int8_t;
typedef unsigned short uint16_t;
typedef short int16_t;
#else
#include <stdint.h>
#endif

/* C99 (OpenCL C is C99) has no static assertion; an array of negative size fails as surely. */
#if defined(__cplusplus)
#define QUANT_BLOCKS_ASSERT(cond, msg) static_assert(cond, msg)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(QUANT_BLOCKS_OPENCL)
#define QUANT_BLOCKS_ASSERT(cond, msg) _Static_assert(cond, msg)
#else
#define QUANT_BLOCKS_CAT_(a, b) a##b
#define QUANT_BLOCKS_CAT(a, b) QUANT_BLOCKS_CAT_(a, b)
#define QUANT_BLOCKS_ASSERT(cond, msg) typedef char QUANT_BLOCKS_CAT(quant_blocks_check_, __LINE__)[(cond) ? 1 : -1]
#endif

#define QK 32   /* elements in a legacy block (Q4_0 .. Q8_1) */
#define QKK 256 /* elements in a K-quant super-block (Q2_K .. Q8_K) */
#define QK_SCALES 12 /* bytes of packed 6-bit scales in Q3_K, Q4_K, Q5_K */

typedef struct { uint16_t d; uint8_t qs[QK / 2]; } blk_q4_0;
typedef struct { uint16_t d, m; uint8_t qs[QK / 2]; } blk_q4_1;
typedef struct { uint16_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_0;
typedef struct { uint16_t d, m; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_1;
typedef struct { uint16_t d; int8_t qs[QK]; } blk_q8_0;
typedef struct { uint16_t d, s; int8_t qs[QK]; } blk_q8_1; /* s = d * sum(qs) */

/* Q2_K: 16 groups of 16; scales[j] = 4-bit scale | 4-bit min << 4. */
typedef struct { uint8_t scales[QKK / 16]; uint8_t qs[QKK / 4]; uint16_t d, dmin; } blk_q2_k;
/* Q3_K: 16 groups of 16 with 6-bit signed (offset 32) scales packed in 12 bytes. */
typedef struct { uint8_t hmask[QKK / 8]; uint8_t qs[QKK / 4]; uint8_t scales[QK_SCALES]; uint16_t d; } blk_q3_k;
/* Q4_K/Q5_K: 8 groups of 32 with 6-bit scales and mins packed in 12 bytes. */
typedef struct { uint16_t d, dmin; uint8_t scales[QK_SCALES]; uint8_t qs[QKK / 2]; } blk_q4_k;
typedef struct { uint16_t d, dmin; uint8_t scales[QK_SCALES]; uint8_t qh[QKK / 8]; uint8_t qs[QKK / 2]; } blk_q5_k;
/* Q6_K: 16 groups of 16 with int8 scales. */
typedef struct { uint8_t ql[QKK / 2]; uint8_t qh[QKK / 4]; int8_t scales[QKK / 16]; uint16_t d; } blk_q6_k;
/* Q8_K: activations for the K dots; bsums[j] = sum of qs[16j .. 16j+15]. */
typedef struct { float d; int8_t qs[QKK]; int16_t bsums[QKK / 16]; } blk_q8_k;

/* The sizes GGUF gives each type: a compiler that pads differently fails here. */
QUANT_BLOCKS_ASSERT(sizeof(blk_q4_0) == 18 && sizeof(blk_q4_1) == 20 && sizeof(blk_q5_0) == 22 &&
                        sizeof(blk_q5_1) == 24 && sizeof(blk_q8_0) == 34 && sizeof(blk_q8_1) == 36,
                    "legacy block sizes must match GGUF");
QUANT_BLOCKS_ASSERT(sizeof(blk_q2_k) == 84 && sizeof(blk_q3_k) == 110 && sizeof(blk_q4_k) == 144 &&
                        sizeof(blk_q5_k) == 176 && sizeof(blk_q6_k) == 210 && sizeof(blk_q8_k) == 292,
                    "K block sizes must match GGUF");

#endif
