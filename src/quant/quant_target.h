/* Compiles a region of a kernel file for extra instruction sets, with gcc and clang alike:
 * gcc's `#pragma GCC target` is unknown to clang, whose equivalent is an attribute pushed
 * onto every function of the region. Only the region's functions carry the target, so
 * the table fills outside it stay callable on every CPU.
 *   QUANT_TARGET_BEGIN("avx2,fma,f16c")  ...kernels...  QUANT_TARGET_END */
#ifndef CT_QUANT_TARGET_H
#define CT_QUANT_TARGET_H

#define QUANT_PRAGMA_STR(x) #x
#if defined(__clang__)
#define QUANT_TARGET_BEGIN(features)                                                                   \
    _Pragma(QUANT_PRAGMA_STR(clang attribute push(__attribute__((target(features))), apply_to = function)))
#define QUANT_TARGET_END _Pragma("clang attribute pop")
#else
#define QUANT_TARGET_BEGIN(features) _Pragma("GCC push_options") _Pragma(QUANT_PRAGMA_STR(GCC target(features)))
#define QUANT_TARGET_END _Pragma("GCC pop_options")
#endif

#endif
