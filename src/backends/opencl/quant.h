/* The quant group's test hooks (the group's entry points are in ocl_internal.h). */
#ifndef CT_OCL_QUANT_H
#define CT_OCL_QUANT_H

#include <stdbool.h>

/* Which kernels LINEAR uses: by device type (GROUPS on GPUs and accelerators: a work-group
 * per output row for decode, tiles for prompts; ROWS on CPU devices: a work-item per
 * weight row for any number of rows of x), or one family everywhere, so tests cover both
 * on whatever device they have; TILE32: the GPU kernels with prompts kept on the 32 x 32
 * tiles (the 64 x 64 kernel's partner). Not thread-safe. */
typedef enum ocl_q_matvec { OCL_Q_MATVEC_AUTO, OCL_Q_MATVEC_GROUPS, OCL_Q_MATVEC_ROWS, OCL_Q_MATVEC_TILE32 } ocl_q_matvec;
void ocl_quant_test_matvec(ocl_q_matvec mode);
/* Whether captured steps fuse quant patterns (ocl_quant_fuse); on by default. */
void ocl_quant_test_fuse(bool on);
/* Tests: the norm + q, k, v + RoPE + KV-row launch off (false) or on, the rest of the planner as it is. */
void ocl_quant_test_fuse_rope(bool on);
/* Ops covered by fused launches since start (tests: the planner did fuse). */
int ocl_quant_fused_total(void);
/* Fused launches that took a packed kernel since start, and packing on
 * (the default) or off (ocl_pack_bufs in ocl_internal.h). */
int ocl_quant_packed_total(void);
void ocl_quant_test_pack(bool on);
/* The one-row products' x as bytes (quant_mv1.c): -1 by size and device (the default),
 * 0 never, 1 always from a launch of their own (mv1_q8x), 2 always made in the product's
 * work-items (mv1xi); and the launches that read x so since start. */
void ocl_quant_test_q8(int mode);
int ocl_quant_q8_total(void);
/* Launches of the one-row kernels (mv1x*, fused or not) since start. */
int ocl_quant_mv1_total(void);

#endif
