/* GGUF block-quantized formats: layouts bit-identical to GGUF, dequantization,
 * the reference quantizers and the dot products the matmul kernels use. Below
 * the backends (depends on core only), so every backend and the formats layer share it. */
#ifndef CT_QUANT_QUANT_H
#define CT_QUANT_QUANT_H

#include <stdbool.h>

#include "core/cpuid.h"
#include "core/tensor.h"

/* n must be a multiple of t's block size; t may also be f32/f16/bf16. */
ct_status quant_dequantize_row(ct_dtype t, const void *src, float *dst, int64_t n);
/* Reference quantizer: same bytes as llama.cpp's quantize_row_*_ref. */
ct_status quant_quantize_row(ct_dtype t, const float *src, void *dst, int64_t n);

/* Dot product of one weight row (type t, n elements) with an activation row already
 * converted to quant_vec_dot_type(t) (e.g. Q8_0 or Q8_K); result in *s.
 * n must be a multiple of t's block size (the caller checks: the function has no status);
 * rows must be at least 2-byte aligned (4 for Q8_K), which every tensor and GGUF mapping is.
 * Activation rows must come from quant_quantize_row: the kernels rely on the redundant
 * fields it fills (Q8_K bsums) and on quants in [-127, 127]. */
typedef void (*quant_vec_dot_fn)(int64_t n, float *s, const void *w, const void *a);
ct_dtype quant_vec_dot_type(ct_dtype t);
quant_vec_dot_fn quant_get_vec_dot(ct_dtype t);

/* ---- SIMD levels of the kernels ----
 * Not a ladder: each level needs its own set of CPU features (AVX512_VNNI does not need
 * AVX-VNNI, so Zen 4 / Ice Lake have AVX512_VNNI without AVX2_VNNI). A level is usable
 * when the CPU reports every feature it needs; the others are refused, never mapped. */
typedef enum quant_simd {
    QUANT_SIMD_SCALAR = 0,   /* portable C */
    QUANT_SIMD_AVX2,         /* avx2 + fma + f16c */
    QUANT_SIMD_AVX2_VNNI,    /* the same plus AVX-VNNI (VEX vpdpbusd on ymm) */
    QUANT_SIMD_AVX512,       /* avx2 set + avx512 f/bw/vl/dq, 512-bit kernels without VNNI */
    QUANT_SIMD_AVX512_VNNI,  /* avx2 set + avx512 f/bw/vl/dq + AVX512-VNNI, 512-bit kernels */
    QUANT_SIMD_COUNT
} quant_simd;

/* The CPU features the levels are made of. */
typedef struct quant_cpu_features {
    bool avx2;       /* avx2 + fma + f16c (and the OS saves ymm) */
    bool avxvnni;    /* AVX-VNNI, CPUID.(7,1):EAX[4] */
    bool avx512;     /* avx512 f + bw + vl + dq (and the OS saves zmm) */
    bool avx512vnni; /* AVX512-VNNI */
} quant_cpu_features;
/* What this CPU (and OS) really supports, less the VNNI extensions when CTORCH_SIMD_NO_VNNI
 * is set (to run the kernels of CPUs without them). */
quant_cpu_features quant_cpu_features_of_host(void);
/* Test hook: the levels are decided from *f instead of the host's features (NULL: the
 * host's again) and the current level is reset to the best one under the cap. Lets tests simulate
 * other CPUs; they must only compare the kernels handed out, never call ones the real
 * CPU lacks. Not thread-safe. */
void quant_test_set_cpu_features(const quant_cpu_features *f);

const char *quant_simd_name(quant_simd level);
/* Whether the CPU has every feature level needs. */
bool quant_simd_supported(quant_simd level);
/* The best supported level, whatever the cap. */
quant_simd quant_simd_detected(void);
/* The level quant_get_vec_dot, _nr, quant_get_panel, quant_get_repack and the activation
 * quantizers currently use: at first use, the best supported level inside the family
 * CTORCH_SIMD allows (portable: scalar; avx2: avx2 or avx2+vnni; avx512 or unset: any). */
quant_simd quant_simd_level(void);
/* Moves the current level to the best supported one inside cap's family; the CPU backend
 * calls it whenever its own level changes, so one setting caps every kernel family. */
void quant_simd_apply_cap(core_simd_cap cap);
/* Forces a level (tests, benchmarks), above the cap too. A level whose features the CPU
 * lacks is refused (CT_ERR_UNSUPPORTED, the message names the missing feature), not
 * mapped to another: a caller asking for a level wants exactly its kernels. Not meant to
 * be called while other threads fetch kernels. */
ct_status quant_set_simd_level(quant_simd level);
/* The kernel of one level without changing the global choice; NULL where the CPU lacks
 * the level or t has no vec dot. Types without a dedicated kernel at a level get the
 * kernel of a level whose features are a subset (AVX512_VNNI and AVX2_VNNI: AVX2). */
quant_vec_dot_fn quant_get_vec_dot_at(ct_dtype t, quant_simd level);

/* ---- multi-row dots (prefill) ----
 * s[j * s_stride + i] = dot(weight row i, activation row j) for i < nw, j < na, rows
 * w_stride / a_stride bytes apart, with 1 <= nw <= QUANT_NR_MAX_W and 1 <= na <= QUANT_NR_MAX_A
 * (the caller checks). Each weight block is unpacked once per call and reused for the na
 * activation rows. Same row and alignment rules as quant_vec_dot_fn; the results are
 * bit-identical to quant_get_vec_dot_at(t, level) of the same level. */
#define QUANT_NR_MAX_W 4
#define QUANT_NR_MAX_A 4
typedef void (*quant_vec_dot_nr_fn)(int64_t n, float *s, size_t s_stride, const void *w, size_t w_stride, int nw,
                                    const void *a, size_t a_stride, int na);
/* NULL where the current level has no multi-row kernel for t (use the single dot then). */
quant_vec_dot_nr_fn quant_get_vec_dot_nr(ct_dtype t);
/* The multi-row kernel of exactly this level (no fallback to lower levels); NULL where
 * none exists or the CPU lacks the level. */
quant_vec_dot_nr_fn quant_get_vec_dot_nr_at(ct_dtype t, quant_simd level);

/* ---- packed panels (prefill GEMM) ----
 * QUANT_PANEL_ROWS weight rows are unpacked once into a panel (pack), then multiplied with
 * up to QUANT_PANEL_MAX_A activation rows per call (gemm): s[j * s_stride + i] = dot(weight
 * row i, activation row j) for i < nw, j < na. Activation rows are in quant_vec_dot_type(t)
 * (from quant_quantize_row) plus per-row side data from act_aux (aux_n floats per weight
 * block). Results equal quant_get_vec_dot's to f32 rounding (not bit for bit).
 * K must be a multiple of t's block size; 1 <= nw <= QUANT_PANEL_ROWS; a panel takes
 * K / block_size * block_bytes bytes, 64-byte aligned; strides are in bytes (aux: floats). */
#define QUANT_PANEL_ROWS 16
#define QUANT_PANEL_MAX_A 4
typedef void (*quant_panel_pack_fn)(const void *w, size_t w_stride, int nw, int64_t K, void *panel);
typedef struct quant_panel_kernels {
    size_t block_bytes;
    int aux_n;
    quant_panel_pack_fn pack;
    void (*act_aux)(const void *a, int64_t K, float *aux);
    void (*gemm)(int64_t K, const void *panel, const void *a, size_t a_stride, const float *aux, size_t aux_stride,
                 int na, float *s, size_t s_stride, int nw);
    int max_a; /* activation rows a gemm call takes at most (0: QUANT_PANEL_MAX_A) */
} quant_panel_kernels;
#define QUANT_PANEL_MAX_A_ANY 128 /* the largest max_a of any kernel */
/* Activation rows one gemm call of pk takes at most. */
static inline int quant_panel_max_a(const quant_panel_kernels *pk) { return pk->max_a ? pk->max_a : QUANT_PANEL_MAX_A; }
/* NULL where the current level has no panel kernels for t (strides in elements for aux).
 * Like the vec dots, a level without its own panels for t hands out its parent's (AVX2's). */
const quant_panel_kernels *quant_get_panel(ct_dtype t);
const quant_panel_kernels *quant_get_panel_at(ct_dtype t, quant_simd level);
/* The AMX-INT8 panels (quant_panel_amx.c: Q4_K, Q5_K, Q6_K, up to 128 activation rows a call), or NULL
 * where the CPU or the process has no AMX (cpu_amx_usable) or t has none. quant_get_panel
 * hands them out at the AVX512_VNNI level. */
const quant_panel_kernels *quant_get_panel_amx(ct_dtype t);
/* The AMX panels' packer for t and its bytes per block, whatever tiles this CPU has (NULL
 * where t has no AMX panel or the CPU lacks the AVX-512 VNNI the packer itself runs on):
 * tests check the panel layout with it where the tiles cannot run. */
quant_panel_pack_fn quant_get_amx_packer(ct_dtype t, size_t *block_bytes);
/* Panels meant to be kept in place of the weights (the same interface): about the size of
 * the weights and fast for a single activation row, so decode uses them too. */
const quant_panel_kernels *quant_get_repack(ct_dtype t);
const quant_panel_kernels *quant_get_repack_at(ct_dtype t, quant_simd level);

#endif
