/* Scaled dot-product attention on the CPU: the task layout and scratch shared by the
 * general kernel (attention.c) and the prefill tile kernel (attention_tile.c). */
#ifndef CTORCH_CPU_ATTENTION_H
#define CTORCH_CPU_ATTENTION_H

#include "backends/cpu/cpu.h"

#define SDPA_QB 16  /* query rows per task (Tq > 1) */
#define SDPA_KC 128 /* keys per chunk */

typedef struct att_vec {
    float (*dot)(const float *a, const float *b, int64_t n);
    /* q . k_u for the 4 rows k + u * ks: q is loaded once for four keys */
    void (*dot4)(const float *q, const float *k, int64_t ks, int64_t n, float *out);
    /* y += sum_u p[u] * v_u for the 4 rows v + u * vs: y is loaded and stored once */
    void (*axpy4)(float *y, const float *p, const float *v, int64_t vs, int64_t n);
    void (*axpy)(float *y, float a, const float *x, int64_t n); /* y += a * x */
    void (*scal)(float *y, float a, int64_t n);
} att_vec;

typedef struct sdpa_ctx {
    const char *q, *k, *v, *mask; /* first elements */
    float *out;                   /* contiguous [B, Hq, Tq, Dv] */
    int64_t qs[4], ks[4], vs[4], ms[4];
    ct_dtype kdt, vdt;
    int64_t B, Hq, Hkv, G, Tq, Tk, D, Dv;
    int64_t n_qblk, rows_max;     /* query blocks per head (Tq > 1); rows per task */
    int64_t n_seg;                /* key segments per task (decode split), 1 = none */
    float scale;
    bool causal, decode;
    bool tile;                    /* prefill through sdpa_tile (attention_tile.c) */
    int64_t window;
    att_vec f;
    float *part;                  /* n_seg > 1: [task][seg][row][Dv + 2] partial (acc, m, l) */
    ct_status status;
} sdpa_ctx;

typedef struct sdpa_scratch {
    const float **q;
    float **o;
    const float **mrow;
    int64_t *lo, *hi;
    float *m, *l, *acc, *sc, *kbuf, *vbuf;
    float *qt, *acct;             /* sdpa_tile: q and acc transposed, [D][16] and [Dv][16], 64-byte aligned */
    bool *nan;
} sdpa_scratch;

/* Whether sdpa_tile can take this prefill (AVX2 or AVX-512, no explicit mask). */
bool sdpa_tile_fits(const sdpa_ctx *c);
/* The R <= SDPA_QB rows set up in s (sdpa_rows) against all their keys; writes their
 * outputs. */
void sdpa_tile(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb);

/* What sdpa_tile's AVX-512 and AVX2 kernels share (attention_tile.c, attention_tile_avx2.c). */
typedef struct sdpa_tile_rows {
    int32_t lo[16], hi[16]; /* each row's key range, empty past R */
    int64_t tlo, thi;       /* the range all rows span */
} sdpa_tile_rows;
void sdpa_tile_setup(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, sdpa_tile_rows *tr);
void sdpa_tile_load(const char *base, int64_t stride, ct_dtype dt, int64_t j0, int64_t n, int64_t w, int64_t pad, float *buf);
void sdpa_tile_avx2(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb);

#endif
