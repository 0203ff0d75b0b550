/* GEMM for the CPU: OpenBLAS dispatch (strided views mapped onto its Trans/ld
 * layouts, packing only what cannot be mapped) and the built-in blocked GEMM (f32
 * A; f32, f16 or bf16 B) with AVX2 / AVX-512 FMA micro-kernels chosen by
 * cpu_simd_level(). f32 products go to the built-in one when OpenBLAS runs
 * narrower kernels than the CPU's AVX-512: there it is ~1.7-2x faster. */
#include <limits.h>
#include <string.h>
#include <stdlib.h>

#include "backends/cpu/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "backends/cpu/gemm_avx512.h"
#define GEMM_X86 1
#endif
#ifdef CTORCH_HAVE_BLAS
#include <cblas.h>
#endif


/* ---------------- f16 row conversion (attention's f16 K/V rows) ---------------- */
#ifdef GEMM_X86
__attribute__((target("avx512f"))) static int64_t f16_row_avx512(const uint16_t *s, float *d, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    return i;
}
__attribute__((target("avx2,f16c"))) static int64_t f16_row_avx2(const uint16_t *s, float *d, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    return i;
}
#endif

#ifdef GEMM_X86
/* vcvtps2ph rounds to nearest even as ct_f32_to_f16 does; NaNs keep their payload there,
 * so groups holding one go through ct_f32_to_f16 (one quiet NaN per sign). */
__attribute__((target("avx512f"))) static int64_t f32_row_avx512(const float *s, uint16_t *d, int64_t n)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(s + i);
        if (_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q)) {
            for (int k = 0; k < 16; k++) d[i + k] = ct_f32_to_f16(s[i + k]);
            continue;
        }
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}
__attribute__((target("avx2,f16c"))) static int64_t f32_row_avx2(const float *s, uint16_t *d, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(s + i);
        if (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q))) {
            for (int k = 0; k < 8; k++) d[i + k] = ct_f32_to_f16(s[i + k]);
            continue;
        }
        _mm_storeu_si128((__m128i *)(d + i), _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
    return i;
}
#endif

void cpu_f32_to_f16_row(const float *src, uint16_t *dst, int64_t n)
{
    int64_t i = 0;
#ifdef GEMM_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX512) i = f32_row_avx512(src, dst, n);
    else if (lvl >= CPU_SIMD_AVX2) i = f32_row_avx2(src, dst, n);
#endif
    for (; i < n; i++) dst[i] = ct_f32_to_f16(src[i]);
}

void cpu_f16_to_f32_row(const uint16_t *src, float *dst, int64_t n)
{
    int64_t i = 0;
#ifdef GEMM_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX512) i = f16_row_avx512(src, dst, n);
    else if (lvl >= CPU_SIMD_AVX2) i = f16_row_avx2(src, dst, n);
#endif
    for (; i < n; i++) dst[i] = ct_f16_to_f32(src[i]);
}

/* ---------------- built-in blocked GEMM (f32 A, f32 / f16 / bf16 B) ---------------- */
/* B is converted to f32 while its panels are packed, so a half weight element is
 * widened once per (kc, nc) block and the micro-kernels only ever see f32. */
#define GEMM_KC 256
#define GEMM_MC_MAX 128 /* rows of A packed per task (rounded down to a multiple of mr) */
#define GEMM_NC 4096
#define GEMM_MR_MAX 8
#define GEMM_NR_MAX 32
#define GEMM_FUSED_M 256              /* up to this many rows: one task per B panel (fused_tasks) */
#define GEMM_FUSED_A ((int64_t)1 << 22) /* ... if all of A packed stays under 16 MiB */

typedef enum gemm_btype { GEMM_B_F32, GEMM_B_F16, GEMM_B_BF16 } gemm_btype;

/* c[i*ldc + j] (+)= sum_k a[k*mr + i] * b[k*nr + j] over one full mr x nr tile. */
typedef void (*gemm_ukernel)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool acc);

/* 6 x 16 */
static void uk_portable(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool acc)
{
    float t[6][16] = {{0}};
    for (int64_t k = 0; k < kc; k++, a += 6, b += 16)
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 16; j++) t[i][j] += a[i] * b[j];
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 16; j++) c[i * ldc + j] = acc ? c[i * ldc + j] + t[i][j] : t[i][j];
}

#ifdef GEMM_X86
#define UK_ROW(i)                                                                                                      \
    do {                                                                                                               \
        V ai_ = SET1(a[i]);                                                                                            \
        c##i##0 = FMA(ai_, b0, c##i##0);                                                                               \
        c##i##1 = FMA(ai_, b1, c##i##1);                                                                               \
    } while (0)
#define UK_STORE(i)                                                                                                    \
    do {                                                                                                               \
        float *ci_ = c + (i) * ldc;                                                                                    \
        if (acc) {                                                                                                     \
            c##i##0 = ADD(c##i##0, LOAD(ci_));                                                                         \
            c##i##1 = ADD(c##i##1, LOAD(ci_ + W));                                                                     \
        }                                                                                                              \
        STORE(ci_, c##i##0);                                                                                           \
        STORE(ci_ + W, c##i##1);                                                                                       \
    } while (0)
#define UK_DECL(i) V c##i##0 = ZERO(), c##i##1 = ZERO()

/* AVX2: 6 x 16 (12 accumulators + 2 B vectors + 1 broadcast of 16 ymm registers) */
__attribute__((target("avx2,fma"))) static void uk_avx2(int64_t kc, const float *a, const float *b, float *c,
                                                        int64_t ldc, bool acc)
{
#define V __m256
#define W 8
#define SET1 _mm256_set1_ps
#define FMA _mm256_fmadd_ps
#define ADD _mm256_add_ps
#define LOAD _mm256_loadu_ps
#define STORE _mm256_storeu_ps
#define ZERO _mm256_setzero_ps
    UK_DECL(0); UK_DECL(1); UK_DECL(2); UK_DECL(3); UK_DECL(4); UK_DECL(5);
    for (int64_t k = 0; k < kc; k++, a += 6, b += 2 * W) {
        V b0 = LOAD(b), b1 = LOAD(b + W);
        UK_ROW(0); UK_ROW(1); UK_ROW(2); UK_ROW(3); UK_ROW(4); UK_ROW(5);
    }
    UK_STORE(0); UK_STORE(1); UK_STORE(2); UK_STORE(3); UK_STORE(4); UK_STORE(5);
#undef V
#undef W
#undef SET1
#undef FMA
#undef ADD
#undef LOAD
#undef STORE
#undef ZERO
}

/* AVX-512: 8 x 32 (16 accumulators of 32 zmm registers); 8 rows divide the usual
 * power-of-two prompt lengths, so no tile is computed half empty */
__attribute__((target("avx512f"))) static void uk_avx512(int64_t kc, const float *a, const float *b, float *c,
                                                         int64_t ldc, bool acc)
{
#define V __m512
#define W 16
#define SET1 _mm512_set1_ps
#define FMA _mm512_fmadd_ps
#define ADD _mm512_add_ps
#define LOAD _mm512_loadu_ps
#define STORE _mm512_storeu_ps
#define ZERO _mm512_setzero_ps
    UK_DECL(0); UK_DECL(1); UK_DECL(2); UK_DECL(3); UK_DECL(4); UK_DECL(5); UK_DECL(6); UK_DECL(7);
    for (int64_t k = 0; k < kc; k++, a += 8, b += 2 * W) {
        V b0 = LOAD(b), b1 = LOAD(b + W);
        UK_ROW(0); UK_ROW(1); UK_ROW(2); UK_ROW(3); UK_ROW(4); UK_ROW(5); UK_ROW(6); UK_ROW(7);
    }
    UK_STORE(0); UK_STORE(1); UK_STORE(2); UK_STORE(3); UK_STORE(4); UK_STORE(5); UK_STORE(6); UK_STORE(7);
#undef V
#undef W
#undef SET1
#undef FMA
#undef ADD
#undef LOAD
#undef STORE
#undef ZERO
}
#endif

typedef struct gemm_job {
    int64_t M, N, K;
    const float *A;
    const void *B;      /* f32, f16 or bf16 elements (btype) */
    gemm_btype btype;
    int64_t rsa, csa, rsb, csb;
    float *C;
    int64_t ldc;
    bool accumulate;
    /* current block */
    int64_t jc, nc, pc, kc;
    float *bp;          /* packed B: [nc/nr panels][kc][nr] */
    int mr, nr;
    int64_t mc;         /* rows per A block (multiple of mr) */
    gemm_ukernel uk;
    /* the SIMD level's transposing panel packer where columns of B are contiguous (rsb == 1),
     * else NULL (pack_b_generic) */
    void (*pack_cols)(const struct gemm_job *g, float *dst, int64_t pc, int64_t kc, int64_t jp, int64_t nj);
    /* fused mode */
    float *ap_all;      /* all of A packed */
    int64_t mpad;       /* M rounded up to mr */
    int64_t m_chunks;   /* task = (B panel, range of row tiles) */
    int64_t tiles_per_chunk;
    int64_t n_jchunks;  /* task = (ic block, column chunk) */
    int64_t jchunk;     /* columns per chunk (multiple of nr) */
    bool oom;
} gemm_job;

static inline float b_elem(const gemm_job *g, int64_t off)
{
    switch (g->btype) {
    case GEMM_B_F16: return ct_f16_to_f32(((const uint16_t *)g->B)[off]);
    case GEMM_B_BF16: return ct_bf16_to_f32(((const uint16_t *)g->B)[off]);
    default: return ((const float *)g->B)[off];
    }
}

/* Any strides: rows k0..k1, columns j0..j1 of the panel (panel-relative), walking
 * B in whichever order reads it with the smaller stride. */
static void pack_b_generic(const gemm_job *g, float *dst, int64_t pc, int64_t jp, int64_t k0, int64_t k1, int64_t j0,
                           int64_t j1)
{
    int nr = g->nr;
    int64_t base = pc * g->rsb + jp * g->csb;
    if (g->btype == GEMM_B_F32 && g->csb == 1) {
        for (int64_t k = k0; k < k1; k++)
            memcpy(dst + k * nr + j0, (const float *)g->B + base + k * g->rsb + j0, sizeof(float) * (size_t)(j1 - j0));
    } else if (llabs(g->rsb) < llabs(g->csb)) {
        for (int64_t j = j0; j < j1; j++)
            for (int64_t k = k0; k < k1; k++) dst[k * nr + j] = b_elem(g, base + k * g->rsb + j * g->csb);
    } else {
        for (int64_t k = k0; k < k1; k++)
            for (int64_t j = j0; j < j1; j++) dst[k * nr + j] = b_elem(g, base + k * g->rsb + j * g->csb);
    }
}

#ifdef GEMM_X86
/* 16 consecutive k of one column of B (rsb == 1) as f32 */
static inline __attribute__((always_inline, target("avx512f"))) __m512 load_col16(const void *p, gemm_btype t)
{
    if (t == GEMM_B_F32) return _mm512_loadu_ps(p);
    __m256i h = _mm256_loadu_si256((const __m256i *)p);
    if (t == GEMM_B_F16) return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); /* bf16: the top half of an f32 */
}

/* Columns of B are contiguous (B = w^T): take 16 columns x 16 k, widen, transpose
 * in registers and store 16 rows of the panel. */
static inline __attribute__((always_inline, target("avx512f"))) void pack16x16(const gemm_job *g, float *dst,
                                                                              const char *src, size_t col_bytes,
                                                                              gemm_btype t)
{
    __m512i r[16];
    for (int i = 0; i < 16; i++) r[i] = _mm512_castps_si512(load_col16(src + (size_t)i * col_bytes, t));
    gemm_store_tr16(r, (uint32_t *)dst, g->nr);
}

__attribute__((target("avx512f"))) static void pack_b_cols(const gemm_job *g, float *dst, int64_t pc, int64_t kc,
                                                           int64_t jp, int64_t nj)
{
    size_t es = g->btype == GEMM_B_F32 ? sizeof(float) : sizeof(uint16_t);
    size_t col_bytes = (size_t)g->csb * es;
    const char *base = (const char *)g->B + (size_t)(pc + jp * g->csb) * es;
    int64_t k16 = kc & ~(int64_t)15, j16 = nj & ~(int64_t)15;
    for (int64_t j = 0; j < j16; j += 16)
        for (int64_t k = 0; k < k16; k += 16) {
            const char *s = base + (size_t)j * col_bytes + (size_t)k * es;
            switch (g->btype) { /* constant per call of the inlined body */
            case GEMM_B_F16: pack16x16(g, dst + k * g->nr + j, s, col_bytes, GEMM_B_F16); break;
            case GEMM_B_BF16: pack16x16(g, dst + k * g->nr + j, s, col_bytes, GEMM_B_BF16); break;
            default: pack16x16(g, dst + k * g->nr + j, s, col_bytes, GEMM_B_F32); break;
            }
        }
    if (k16 < kc) pack_b_generic(g, dst, pc, jp, k16, kc, 0, j16);
    if (j16 < nj) pack_b_generic(g, dst, pc, jp, 0, kc, j16, nj);
}

/* AVX2: the same for 8 columns x 8 k (the 6 x 16 kernel's panels hold two such column
 * groups). The generic packer widens one element at a time through ct_f16_to_f32, which
 * costs an f16 prompt about as much as its FMAs. */
static inline __attribute__((always_inline, target("avx2,f16c"))) __m256 load_col8(const void *p, gemm_btype t)
{
    if (t == GEMM_B_F32) return _mm256_loadu_ps(p);
    __m128i h = _mm_loadu_si128((const __m128i *)p);
    if (t == GEMM_B_F16) return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* r[i] holds 8 floats of source row i; dst row j (rows `stride` floats apart) gets element j
 * of every source row: unpacks, then shuffles, then the 128-bit halves. */
static inline __attribute__((always_inline, target("avx2"))) void gemm_store_tr8(const __m256 r[8], float *dst,
                                                                              int64_t stride)
{
    __m256 u[8], v[8];
    for (int i = 0; i < 8; i += 2) {
        u[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        u[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int h = 0; h < 8; h += 4) { /* rows h..h+3: v[h + c] holds element c (low lane) and c + 4 */
        v[h + 0] = _mm256_shuffle_ps(u[h], u[h + 2], 0x44);
        v[h + 1] = _mm256_shuffle_ps(u[h], u[h + 2], 0xEE);
        v[h + 2] = _mm256_shuffle_ps(u[h + 1], u[h + 3], 0x44);
        v[h + 3] = _mm256_shuffle_ps(u[h + 1], u[h + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        _mm256_storeu_ps(dst + c * stride, _mm256_permute2f128_ps(v[c], v[4 + c], 0x20));
        _mm256_storeu_ps(dst + (c + 4) * stride, _mm256_permute2f128_ps(v[c], v[4 + c], 0x31));
    }
}

static inline __attribute__((always_inline, target("avx2,f16c"))) void pack8x8(float *dst, int64_t nr, const char *src,
                                                                             size_t col_bytes, gemm_btype t)
{
    __m256 r[8];
    for (int i = 0; i < 8; i++) r[i] = load_col8(src + (size_t)i * col_bytes, t);
    gemm_store_tr8(r, dst, nr);
}

__attribute__((target("avx2,f16c"))) static void pack_b_cols8(const gemm_job *g, float *dst, int64_t pc, int64_t kc,
                                                              int64_t jp, int64_t nj)
{
    size_t es = g->btype == GEMM_B_F32 ? sizeof(float) : sizeof(uint16_t);
    size_t col_bytes = (size_t)g->csb * es;
    const char *base = (const char *)g->B + (size_t)(pc + jp * g->csb) * es;
    int64_t k8 = kc & ~(int64_t)7, j8 = nj & ~(int64_t)7;
    for (int64_t j = 0; j < j8; j += 8)
        for (int64_t k = 0; k < k8; k += 8) {
            const char *s = base + (size_t)j * col_bytes + (size_t)k * es;
            switch (g->btype) {
            case GEMM_B_F16: pack8x8(dst + k * g->nr + j, g->nr, s, col_bytes, GEMM_B_F16); break;
            case GEMM_B_BF16: pack8x8(dst + k * g->nr + j, g->nr, s, col_bytes, GEMM_B_BF16); break;
            default: pack8x8(dst + k * g->nr + j, g->nr, s, col_bytes, GEMM_B_F32); break;
            }
        }
    if (k8 < kc) pack_b_generic(g, dst, pc, jp, k8, kc, 0, j8);
    if (j8 < nj) pack_b_generic(g, dst, pc, jp, 0, kc, j8, nj);
}
#endif

/* One [kc][nr] panel: rows pc.., columns jp..jp+nj of B, zero past nj. */
static void pack_panel(const gemm_job *g, float *dst, int64_t pc, int64_t kc, int64_t jp, int64_t nj)
{
    int nr = g->nr;
    if (g->pack_cols)
        g->pack_cols(g, dst, pc, kc, jp, nj);
    else
        pack_b_generic(g, dst, pc, jp, 0, kc, 0, nj);
    if (nj < nr)
        for (int64_t k = 0; k < kc; k++) memset(dst + k * nr + nj, 0, sizeof(float) * (size_t)(nr - nj));
}

static void pack_b_panels(void *vctx, int64_t p0, int64_t p1)
{
    gemm_job *g = vctx;
    for (int64_t p = p0; p < p1; p++) {
        int64_t jp = g->jc + p * g->nr;
        pack_panel(g, g->bp + p * g->kc * g->nr, g->pc, g->kc, jp, min64(g->nr, g->jc + g->nc - jp));
    }
}

#ifdef GEMM_X86
/* 8 rows of A (csa == 1) x 8 k, transposed in registers into 8 k-rows of the
 * micro-panel: the scalar gather costs as much as the GEMM itself when N is small. */
__attribute__((target("avx2"))) static int64_t pack_a8_rows(const float *src, int64_t rsa, int64_t kc, float *d)
{
    int64_t k = 0;
    for (; k + 8 <= kc; k += 8) {
        __m256 r[8];
        for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(src + i * rsa + k);
        gemm_store_tr8(r, d + k * 8, 8);
    }
    return k;
}
#endif

/* A rows i0..i0+mc, k = pc..pc+kc as [mc/mr][kc][mr] micro-panels, zero rows past mc. */
static void pack_a(const gemm_job *g, int64_t i0, int64_t mc, int64_t pc, int64_t kc, float *ap)
{
    int mr = g->mr;
    for (int64_t ip = 0; ip < mc; ip += mr) {
        int64_t mi = min64(mr, mc - ip);
        float *d = ap + ip * kc;
        int64_t k0 = 0;
#ifdef GEMM_X86
        if (mr == 8 && mi == 8 && g->csa == 1) /* mr 8 only at the AVX-512 level */
            k0 = pack_a8_rows(g->A + (i0 + ip) * g->rsa + pc, g->rsa, kc, d);
#endif
        for (int64_t k = k0; k < kc; k++) {
            const float *src = g->A + (i0 + ip) * g->rsa + (pc + k) * g->csa;
            for (int64_t i = 0; i < mi; i++) d[k * mr + i] = src[i * g->rsa];
            for (int64_t i = mi; i < mr; i++) d[k * mr + i] = 0.0f;
        }
    }
}

/* C tile (ic, jc) (+)= packed A micro-panel x packed B panel, clipped to mi x nj. */
static inline void run_tile(const gemm_job *g, const float *ap, const float *bpan, int64_t kc, int64_t ic, int64_t mi,
                            int64_t jc, int64_t nj, bool acc)
{
    int nr = g->nr;
    float *c = g->C + ic * g->ldc + jc;
    if (mi == g->mr && nj == nr) {
        g->uk(kc, ap, bpan, c, g->ldc, acc);
        return;
    }
    float tile[GEMM_MR_MAX * GEMM_NR_MAX];
    g->uk(kc, ap, bpan, tile, nr, false);
    for (int64_t i = 0; i < mi; i++)
        for (int64_t j = 0; j < nj; j++) c[i * g->ldc + j] = acc ? c[i * g->ldc + j] + tile[i * nr + j] : tile[i * nr + j];
}

static void gemm_tasks(void *vctx, int64_t t0, int64_t t1)
{
    gemm_job *g = vctx;
    float *ap = malloc(sizeof(float) * GEMM_MC_MAX * GEMM_KC);
    if (!ap) {
        __atomic_store_n(&g->oom, true, __ATOMIC_RELAXED);
        return;
    }
    int mr = g->mr, nr = g->nr;
    bool acc = g->pc > 0 || g->accumulate;
    int64_t last_ic = -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t ic = (t / g->n_jchunks) * g->mc, jq = t % g->n_jchunks;
        int64_t mc = min64(g->mc, g->M - ic);
        if (ic != last_ic) {
            pack_a(g, ic, mc, g->pc, g->kc, ap);
            last_ic = ic;
        }
        int64_t jb = jq * g->jchunk, je = min64(jb + g->jchunk, g->nc);
        for (int64_t jr = jb; jr < je; jr += nr) {
            const float *bpan = g->bp + (jr / nr) * g->kc * nr;
            for (int64_t ir = 0; ir < mc; ir += mr)
                run_tile(g, ap + ir * g->kc, bpan, g->kc, ic + ir, min64(mr, mc - ir), g->jc + jr,
                         min64(nr, g->nc - jr), acc);
        }
    }
    free(ap);
}

/* ---- few rows (prefill): one task per B panel, packed just before use ----
 * All of A is packed once ([K blocks][Mpad/mr][kc][mr], A is small); each task packs
 * its own [kc][nr] panel of B into a buffer that stays in L1 and runs every row
 * tile against it, so B is read and converted exactly once, with no shared packed-B
 * block and no barrier between packing and computing. */
static void fused_pack_a(void *vctx, int64_t t0, int64_t t1)
{
    const gemm_job *g = vctx;
    for (int64_t t = t0; t < t1; t++) { /* one micro-panel of rows, every K block */
        int64_t ir = t * g->mr, mi = min64(g->mr, g->M - ir);
        for (int64_t pc = 0; pc < g->K; pc += GEMM_KC) {
            int64_t kc = min64(GEMM_KC, g->K - pc);
            pack_a(g, ir, mi, pc, kc, g->ap_all + pc * g->mpad + ir * kc);
        }
    }
}

static inline void prefetch_panel(const gemm_job *g, int64_t pc, int64_t kc, int64_t jp, int64_t j0, int64_t j1)
{
    /* the next K block of columns jp+j0..jp+j1, when they are contiguous (B = w^T) */
    size_t es = g->btype == GEMM_B_F32 ? sizeof(float) : sizeof(uint16_t);
    for (int64_t j = j0; j < j1; j++) {
        const char *p = (const char *)g->B + (size_t)(pc + (jp + j) * g->csb) * es;
        for (size_t off = 0; off < (size_t)kc * es; off += 64) __builtin_prefetch(p + off, 0, 3);
    }
}

static void fused_tasks(void *vctx, int64_t t0, int64_t t1)
{
    gemm_job *g = vctx;
    int mr = g->mr, nr = g->nr;
    float *bpan = malloc(sizeof(float) * GEMM_KC * GEMM_NR_MAX);
    if (!bpan) {
        __atomic_store_n(&g->oom, true, __ATOMIC_RELAXED);
        return;
    }
    int64_t ntiles = g->mpad / mr;
    for (int64_t t = t0; t < t1; t++) {
        int64_t jp = (t / g->m_chunks) * nr, nj = min64(nr, g->N - jp), mq = t % g->m_chunks;
        int64_t tile0 = mq * g->tiles_per_chunk, tile1 = min64(ntiles, tile0 + g->tiles_per_chunk);
        for (int64_t pc = 0; pc < g->K; pc += GEMM_KC) {
            int64_t kc = min64(GEMM_KC, g->K - pc), next = pc + GEMM_KC, nkc = min64(GEMM_KC, g->K - next);
            pack_panel(g, bpan, pc, kc, jp, nj);
            bool acc = pc > 0 || g->accumulate, pf = g->pack_cols && next < g->K;
            const float *ap = g->ap_all + pc * g->mpad;
            for (int64_t tl = tile0; tl < tile1; tl++) {
                /* spread the next block's prefetches over this block's tiles */
                if (pf) {
                    int64_t n = tile1 - tile0, i = tl - tile0;
                    prefetch_panel(g, next, nkc, jp, i * nj / n, (i + 1) * nj / n);
                }
                run_tile(g, ap + tl * mr * kc, bpan, kc, tl * mr, min64(mr, g->M - tl * mr), jp, nj, acc);
            }
        }
    }
    free(bpan);
}

static ct_status gemm_run(gemm_job *g)
{
    int64_t M = g->M, N = g->N, K = g->K;
    if (M <= 0 || N <= 0) return CT_OK;
    if (K <= 0) {
        if (!g->accumulate)
            for (int64_t i = 0; i < M; i++) memset(g->C + i * g->ldc, 0, sizeof(float) * (size_t)N);
        return CT_OK;
    }
    g->mr = 6;
    g->nr = 16;
    g->uk = uk_portable;
#ifdef GEMM_X86
    cpu_simd lvl = cpu_simd_level();
    bool cols = g->rsb == 1 && g->csb >= 0 && K > 1;
    if (lvl >= CPU_SIMD_AVX512) {
        g->mr = 8;
        g->nr = 32;
        g->uk = uk_avx512;
        g->pack_cols = cols ? pack_b_cols : NULL;
    } else if (lvl >= CPU_SIMD_AVX2) {
        g->uk = uk_avx2;
        g->pack_cols = cols ? pack_b_cols8 : NULL;
    }
#endif
    g->mpad = (M + g->mr - 1) / g->mr * g->mr;
    if (M <= GEMM_FUSED_M && g->mpad * K <= GEMM_FUSED_A) {
        g->ap_all = malloc(sizeof(float) * (size_t)(g->mpad * K));
        if (!g->ap_all)
            return core_err(CT_ERR_OOM, "matmul: no memory for a packed %lld x %lld operand", (long long)M, (long long)K);
        int64_t np = (N + g->nr - 1) / g->nr, ntiles = g->mpad / g->mr, want = 4 * cpu_num_threads();
        /* split the rows too when there are too few panels to share out */
        g->m_chunks = np >= want ? 1 : min64(ntiles, (want + np - 1) / np);
        g->tiles_per_chunk = (ntiles + g->m_chunks - 1) / g->m_chunks;
        g->m_chunks = (ntiles + g->tiles_per_chunk - 1) / g->tiles_per_chunk;
        cpu_parallel_for(ntiles, max64(1, 4096 / K), fused_pack_a, g);
        cpu_parallel_for(np * g->m_chunks, 1, fused_tasks, g);
        free(g->ap_all);
        if (g->oom) return core_err(CT_ERR_OOM, "matmul: no memory for a packed B panel");
        return CT_OK;
    }
    /* equal A blocks (rounded up to whole micro-tiles), so tasks cost the same */
    int64_t mc_max = (GEMM_MC_MAX / g->mr) * g->mr, m_blocks = (M + mc_max - 1) / mc_max;
    g->mc = min64(mc_max, ((M + m_blocks - 1) / m_blocks + g->mr - 1) / g->mr * g->mr);
    m_blocks = (M + g->mc - 1) / g->mc;
    int64_t ncmax = min64(N, GEMM_NC), panels = (ncmax + g->nr - 1) / g->nr;
    g->bp = malloc(sizeof(float) * (size_t)(panels * g->nr * min64(K, GEMM_KC)));
    if (!g->bp) return core_err(CT_ERR_OOM, "matmul: no memory for a packed %lld x %lld block", (long long)K, (long long)N);
    for (g->jc = 0; g->jc < N; g->jc += GEMM_NC) {
        g->nc = min64(GEMM_NC, N - g->jc);
        int64_t np = (g->nc + g->nr - 1) / g->nr;
        /* enough column chunks to keep every thread busy when M is small */
        int64_t want = 4 * cpu_num_threads();
        int64_t chunks = m_blocks >= want ? 1 : min64(np, (want + m_blocks - 1) / m_blocks);
        g->jchunk = ((np + chunks - 1) / chunks) * g->nr;
        g->n_jchunks = (g->nc + g->jchunk - 1) / g->jchunk;
        for (g->pc = 0; g->pc < K; g->pc += GEMM_KC) {
            g->kc = min64(GEMM_KC, K - g->pc);
            cpu_parallel_for(np, max64(1, 64 / g->kc), pack_b_panels, g);
            cpu_parallel_for(m_blocks * g->n_jchunks, 1, gemm_tasks, g);
        }
    }
    free(g->bp);
    if (g->oom) return core_err(CT_ERR_OOM, "matmul: no memory for a packed A block");
    return CT_OK;
}

ct_status cpu_gemm_f32_builtin(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                               const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate)
{
    gemm_job g = {.M = M, .N = N, .K = K, .A = A, .B = B, .btype = GEMM_B_F32, .rsa = rsa, .csa = csa, .rsb = rsb,
                  .csb = csb, .C = C, .ldc = ldc, .accumulate = accumulate};
    return gemm_run(&g);
}

ct_status cpu_gemm_f32_bhalf(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                             const uint16_t *B, int64_t rsb, int64_t csb, bool bf16, float *C, int64_t ldc,
                             bool accumulate)
{
    if (rsb == 1 && M > 0 && N > 0 && K > 0 && cpu_gemm_amx_on())
        return cpu_gemm_amx_half(M, N, K, A, rsa, csa, B, csb, bf16, C, ldc, accumulate);
    return cpu_gemm_f32_bhalf_vec(M, N, K, A, rsa, csa, B, rsb, csb, bf16, C, ldc, accumulate);
}

ct_status cpu_gemm_f32_bhalf_vec(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                                 const uint16_t *B, int64_t rsb, int64_t csb, bool bf16, float *C, int64_t ldc,
                                 bool accumulate)
{
    if (bf16 && rsb == 1 && M > 0 && N > 0 && K > 0 && cpu_gemm_bf16_dot_on())
        return cpu_gemm_bf16_dot(M, N, K, A, rsa, csa, B, csb, C, ldc, accumulate);
    gemm_job g = {.M = M, .N = N, .K = K, .A = A, .B = B, .btype = bf16 ? GEMM_B_BF16 : GEMM_B_F16, .rsa = rsa,
                  .csa = csa, .rsb = rsb, .csb = csb, .C = C, .ldc = ldc, .accumulate = accumulate};
    return gemm_run(&g);
}

/* ---------------- simple kernels: f64 and c64 without BLAS ---------------- */
typedef struct simple_job {
    int64_t N, K;
    const void *A, *B;
    int64_t rsa, csa, rsb, csb, ldc;
    void *C;
    bool accumulate;
} simple_job;

static void f64_rows(void *vctx, int64_t i0, int64_t i1)
{
    const simple_job *g = vctx;
    const double *A = g->A, *B = g->B;
    for (int64_t i = i0; i < i1; i++) {
        double *c = (double *)g->C + i * g->ldc;
        if (!g->accumulate) memset(c, 0, sizeof(double) * (size_t)g->N);
        for (int64_t k = 0; k < g->K; k++) {
            double a = A[i * g->rsa + k * g->csa];
            const double *b = B + k * g->rsb;
            if (g->csb == 1)
                for (int64_t j = 0; j < g->N; j++) c[j] += a * b[j];
            else
                for (int64_t j = 0; j < g->N; j++) c[j] += a * b[j * g->csb];
        }
    }
}

static void c64_rows(void *vctx, int64_t i0, int64_t i1)
{
    const simple_job *g = vctx;
    const float *A = g->A, *B = g->B;
    for (int64_t i = i0; i < i1; i++)
        for (int64_t j = 0; j < g->N; j++) {
            double re = 0, im = 0;
            for (int64_t k = 0; k < g->K; k++) {
                const float *a = A + 2 * (i * g->rsa + k * g->csa), *b = B + 2 * (k * g->rsb + j * g->csb);
                re += (double)a[0] * b[0] - (double)a[1] * b[1];
                im += (double)a[0] * b[1] + (double)a[1] * b[0];
            }
            float *c = (float *)g->C + 2 * (i * g->ldc + j);
            c[0] = (float)re;
            c[1] = (float)im;
        }
}

static ct_status simple_gemm(cpu_range_fn fn, int64_t M, int64_t N, int64_t K, const void *A, int64_t rsa, int64_t csa,
                             const void *B, int64_t rsb, int64_t csb, void *C, int64_t ldc, bool accumulate)
{
    if (M <= 0 || N <= 0) return CT_OK;
    simple_job g = {N, K, A, B, rsa, csa, rsb, csb, ldc, C, accumulate};
    int64_t work = max64(1, N * max64(K, 1));
    cpu_parallel_for(M, max64(1, 65536 / work), fn, &g);
    return CT_OK;
}

#ifdef CTORCH_HAVE_BLAS
/* Can a rows x cols matrix with these strides be handed to BLAS, and how? */
static bool blas_layout(int64_t r, int64_t c, int64_t rs, int64_t cs, enum CBLAS_TRANSPOSE *tr, int64_t *ld)
{
    if ((c == 1 || cs == 1) && (r == 1 || rs >= max64(c, 1))) {
        *tr = CblasNoTrans;
        *ld = r == 1 ? max64(c, 1) : rs;
        return *ld <= INT_MAX;
    }
    if ((r == 1 || rs == 1) && (c == 1 || cs >= max64(r, 1))) {
        *tr = CblasTrans;
        *ld = c == 1 ? max64(r, 1) : cs;
        return *ld <= INT_MAX;
    }
    return false;
}

/* Contiguous copy of a strided matrix (esize bytes per element). */
static void *pack_matrix(const void *p, int64_t r, int64_t c, int64_t rs, int64_t cs, size_t esize)
{
    char *d = malloc(esize * (size_t)max64(1, r * c));
    if (!d) return NULL;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) memcpy(d + (size_t)(i * c + j) * esize, (const char *)p + (size_t)(i * rs + j * cs) * esize, esize);
    return d;
}

#define BLAS_GEMM(NAME, T, GEMV, GEMM)                                                                               \
    static ct_status NAME(int64_t M, int64_t N, int64_t K, const T *A, int64_t rsa, int64_t csa, const T *B,         \
                          int64_t rsb, int64_t csb, T *C, int64_t ldc, bool accumulate)                             \
    {                                                                                                                \
        T beta = accumulate ? 1 : 0;                                                                                 \
        enum CBLAS_TRANSPOSE ta, tb;                                                                                 \
        int64_t lda, ldb;                                                                                            \
        /* one output row or column: gemv streams the matrix once */                                                 \
        if (M == 1 && csa != 0 && blas_layout(N, K, csb, rsb, &tb, &ldb)) {                                          \
            if (tb == CblasNoTrans)                                                                                  \
                GEMV(CblasRowMajor, CblasNoTrans, (int)N, (int)K, 1, B, (int)ldb, A, (int)csa, beta, C, 1);          \
            else                                                                                                     \
                GEMV(CblasRowMajor, CblasTrans, (int)K, (int)N, 1, B, (int)ldb, A, (int)csa, beta, C, 1);            \
            return CT_OK;                                                                                            \
        }                                                                                                            \
        if (N == 1 && rsb != 0 && blas_layout(M, K, rsa, csa, &ta, &lda)) {                                          \
            if (ta == CblasNoTrans)                                                                                  \
                GEMV(CblasRowMajor, CblasNoTrans, (int)M, (int)K, 1, A, (int)lda, B, (int)rsb, beta, C, (int)ldc);   \
            else                                                                                                     \
                GEMV(CblasRowMajor, CblasTrans, (int)K, (int)M, 1, A, (int)lda, B, (int)rsb, beta, C, (int)ldc);     \
            return CT_OK;                                                                                            \
        }                                                                                                            \
        T *pa = NULL, *pb = NULL;                                                                                    \
        if (!blas_layout(M, K, rsa, csa, &ta, &lda)) {                                                               \
            if (!(pa = pack_matrix(A, M, K, rsa, csa, sizeof(T))))                                                   \
                return core_err(CT_ERR_OOM, "matmul: no memory to pack a %lld x %lld operand", (long long)M,         \
                                (long long)K);                                                                       \
            A = pa, ta = CblasNoTrans, lda = max64(K, 1);                                                            \
        }                                                                                                            \
        if (!blas_layout(K, N, rsb, csb, &tb, &ldb)) {                                                               \
            if (!(pb = pack_matrix(B, K, N, rsb, csb, sizeof(T)))) {                                                 \
                free(pa);                                                                                            \
                return core_err(CT_ERR_OOM, "matmul: no memory to pack a %lld x %lld operand", (long long)K,         \
                                (long long)N);                                                                       \
            }                                                                                                        \
            B = pb, tb = CblasNoTrans, ldb = max64(N, 1);                                                            \
        }                                                                                                            \
        if ((double)M * (double)N * (double)K >= 4e6) cpu_pool_park(); /* OpenBLAS threads need the cores */  \
        GEMM(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, 1, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);         \
        free(pa);                                                                                                    \
        free(pb);                                                                                                    \
        return CT_OK;                                                                                                \
    }

BLAS_GEMM(blas_f32, float, cblas_sgemv, cblas_sgemm)
BLAS_GEMM(blas_f64, double, cblas_dgemv, cblas_dgemm)

static bool blas_dims_ok(int64_t M, int64_t N, int64_t K, int64_t ldc)
{
    return M <= INT_MAX && N <= INT_MAX && K <= INT_MAX && ldc <= INT_MAX;
}
#endif

#ifdef CTORCH_HAVE_BLAS
char *openblas_get_corename(void); /* OpenBLAS's cblas.h declares it in some releases only */

/* Is OpenBLAS running kernels narrower than the CPU's AVX-512 (e.g. forced to
 * Haswell by OPENBLAS_CORETYPE)? Then the built-in AVX-512 GEMM is the faster one.
 * Computed once; a race recomputes the same answer. */
static bool blas_lacks_avx512(void)
{
    static int cached = -1;
    int v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v < 0) {
        v = 0;
        if (cpu_simd_level() >= CPU_SIMD_AVX512) {
            const char *name = openblas_get_corename();
            static const char *const wide[] = {"skylakex", "cooperlake", "sapphirerapids", "zen4", "zen5"};
            v = 1;
            for (size_t i = 0; name && i < sizeof wide / sizeof wide[0]; i++)
                if (strcasestr(name, wide[i])) v = 0;
        }
        __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    }
    return v == 1;
}
#endif

ct_status cpu_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                       int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate)
{
#ifdef CTORCH_HAVE_BLAS
    /* gemv shapes and small products stay with BLAS: its setup cost is lower */
    bool builtin = M > 1 && N > 1 && (double)M * (double)N * (double)K >= 1e6 && blas_lacks_avx512();
    if (!builtin && M > 0 && N > 0 && K > 0 && blas_dims_ok(M, N, K, ldc))
        return blas_f32(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
#endif
    return cpu_gemm_f32_builtin(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
}

ct_status cpu_gemm_f64(int64_t M, int64_t N, int64_t K, const double *A, int64_t rsa, int64_t csa, const double *B,
                       int64_t rsb, int64_t csb, double *C, int64_t ldc, bool accumulate)
{
#ifdef CTORCH_HAVE_BLAS
    if (M > 0 && N > 0 && K > 0 && blas_dims_ok(M, N, K, ldc))
        return blas_f64(M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
#endif
    return simple_gemm(f64_rows, M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, accumulate);
}

ct_status cpu_gemm_c64(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                       int64_t rsb, int64_t csb, float *C, int64_t ldc)
{
#ifdef CTORCH_HAVE_BLAS
    enum CBLAS_TRANSPOSE ta, tb;
    int64_t lda, ldb;
    if (M > 0 && N > 0 && K > 0 && blas_dims_ok(M, N, K, ldc) && blas_layout(M, K, rsa, csa, &ta, &lda) &&
        blas_layout(K, N, rsb, csb, &tb, &ldb)) {
        const float one[2] = {1, 0}, zero[2] = {0, 0};
        cblas_cgemm(CblasRowMajor, ta, tb, (int)M, (int)N, (int)K, one, A, (int)lda, B, (int)ldb, zero, C, (int)ldc);
        return CT_OK;
    }
#endif
    return simple_gemm(c64_rows, M, N, K, A, rsa, csa, B, rsb, csb, C, ldc, false);
}
