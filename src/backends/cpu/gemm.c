/* GEMM for the CPU: OpenBLAS dispatch (strided views mapped onto its Trans/ld
 * layouts, packing only what cannot be mapped) and the built-in blocked f32
 * GEMM with AVX2 / AVX-512 FMA micro-kernels chosen by cpu_simd_level(). */
#include <limits.h>
#include <stdlib.h>

#include "backends/cpu/gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define GEMM_X86 1
#endif
#ifdef CTORCH_HAVE_BLAS
#include <cblas.h>
#endif


/* ---------------- f16 / bf16 row conversion ---------------- */
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

void cpu_bf16_to_f32_row(const uint16_t *src, float *dst, int64_t n)
{
    /* bf16 is the top half of an f32: a shift, which compilers vectorize as is */
    for (int64_t i = 0; i < n; i++) {
        uint32_t u = (uint32_t)src[i] << 16;
        memcpy(&dst[i], &u, sizeof u);
    }
}

/* ---------------- built-in blocked f32 GEMM ---------------- */
#define GEMM_MR 6
#define GEMM_KC 256
#define GEMM_MC 96   /* multiple of GEMM_MR */
#define GEMM_NC 4096
#define GEMM_NR_MAX 32

/* c[i*ldc + j] (+)= sum_k a[k*MR + i] * b[k*nr + j] over one full MR x nr tile. */
typedef void (*gemm_ukernel)(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool acc);

static void uk_portable(int64_t kc, const float *a, const float *b, float *c, int64_t ldc, bool acc)
{
    float t[GEMM_MR][16] = {{0}};
    for (int64_t k = 0; k < kc; k++, a += GEMM_MR, b += 16)
        for (int i = 0; i < GEMM_MR; i++)
            for (int j = 0; j < 16; j++) t[i][j] += a[i] * b[j];
    for (int i = 0; i < GEMM_MR; i++)
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
#define UK_BODY                                                                                                        \
    V c00 = ZERO(), c01 = ZERO(), c10 = ZERO(), c11 = ZERO(), c20 = ZERO(), c21 = ZERO(), c30 = ZERO(),              \
      c31 = ZERO(), c40 = ZERO(), c41 = ZERO(), c50 = ZERO(), c51 = ZERO();                                          \
    for (int64_t k = 0; k < kc; k++, a += GEMM_MR, b += 2 * W) {                                                      \
        V b0 = LOAD(b), b1 = LOAD(b + W);                                                                              \
        UK_ROW(0); UK_ROW(1); UK_ROW(2); UK_ROW(3); UK_ROW(4); UK_ROW(5);                                              \
    }                                                                                                                  \
    UK_STORE(0); UK_STORE(1); UK_STORE(2); UK_STORE(3); UK_STORE(4); UK_STORE(5);

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
    UK_BODY
#undef V
#undef W
#undef SET1
#undef FMA
#undef ADD
#undef LOAD
#undef STORE
#undef ZERO
}

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
    UK_BODY
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
    const float *A, *B;
    int64_t rsa, csa, rsb, csb;
    float *C;
    int64_t ldc;
    bool accumulate;
    /* current block */
    int64_t jc, nc, pc, kc;
    float *bp;          /* packed B: [nc/nr panels][kc][nr] */
    int nr;
    gemm_ukernel uk;
    int64_t n_jchunks;  /* task = (ic block, column chunk) */
    int64_t jchunk;     /* columns per chunk (multiple of nr) */
    bool oom;
} gemm_job;

static void pack_b_panels(void *vctx, int64_t p0, int64_t p1)
{
    gemm_job *g = vctx;
    int nr = g->nr;
    for (int64_t p = p0; p < p1; p++) {
        float *dst = g->bp + p * g->kc * nr;
        int64_t j0 = g->jc + p * nr, nj = min64(nr, g->jc + g->nc - j0);
        for (int64_t k = 0; k < g->kc; k++) {
            const float *src = g->B + (g->pc + k) * g->rsb + j0 * g->csb;
            float *d = dst + k * nr;
            if (g->csb == 1) memcpy(d, src, sizeof(float) * (size_t)nj);
            else
                for (int64_t j = 0; j < nj; j++) d[j] = src[j * g->csb];
            for (int64_t j = nj; j < nr; j++) d[j] = 0.0f;
        }
    }
}

static void pack_a(const gemm_job *g, int64_t i0, int64_t mc, float *ap)
{
    for (int64_t ip = 0; ip < mc; ip += GEMM_MR) {
        int64_t mi = min64(GEMM_MR, mc - ip);
        float *d = ap + ip * g->kc;
        for (int64_t k = 0; k < g->kc; k++) {
            const float *src = g->A + (i0 + ip) * g->rsa + (g->pc + k) * g->csa;
            for (int64_t i = 0; i < mi; i++) d[k * GEMM_MR + i] = src[i * g->rsa];
            for (int64_t i = mi; i < GEMM_MR; i++) d[k * GEMM_MR + i] = 0.0f;
        }
    }
}

static void gemm_tasks(void *vctx, int64_t t0, int64_t t1)
{
    gemm_job *g = vctx;
    float *ap = malloc(sizeof(float) * GEMM_MC * GEMM_KC);
    if (!ap) {
        __atomic_store_n(&g->oom, true, __ATOMIC_RELAXED);
        return;
    }
    int nr = g->nr;
    bool acc = g->pc > 0 || g->accumulate;
    int64_t last_ic = -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t ic = (t / g->n_jchunks) * GEMM_MC, jq = t % g->n_jchunks;
        int64_t mc = min64(GEMM_MC, g->M - ic);
        if (ic != last_ic) {
            pack_a(g, ic, mc, ap);
            last_ic = ic;
        }
        int64_t jb = jq * g->jchunk, je = min64(jb + g->jchunk, g->nc);
        for (int64_t jr = jb; jr < je; jr += nr) {
            int64_t nj = min64(nr, g->nc - jr);
            const float *bpan = g->bp + (jr / nr) * g->kc * nr;
            for (int64_t ir = 0; ir < mc; ir += GEMM_MR) {
                int64_t mi = min64(GEMM_MR, mc - ir);
                float *c = g->C + (ic + ir) * g->ldc + g->jc + jr;
                if (mi == GEMM_MR && nj == nr) {
                    g->uk(g->kc, ap + ir * g->kc, bpan, c, g->ldc, acc);
                    continue;
                }
                float tile[GEMM_MR * GEMM_NR_MAX];
                g->uk(g->kc, ap + ir * g->kc, bpan, tile, nr, false);
                for (int64_t i = 0; i < mi; i++)
                    for (int64_t j = 0; j < nj; j++)
                        c[i * g->ldc + j] = acc ? c[i * g->ldc + j] + tile[i * nr + j] : tile[i * nr + j];
            }
        }
    }
    free(ap);
}

ct_status cpu_gemm_f32_builtin(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa,
                               const float *B, int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate)
{
    if (M <= 0 || N <= 0) return CT_OK;
    if (K <= 0) {
        if (!accumulate)
            for (int64_t i = 0; i < M; i++) memset(C + i * ldc, 0, sizeof(float) * (size_t)N);
        return CT_OK;
    }
    gemm_job g = {M, N, K, A, B, rsa, csa, rsb, csb, C, ldc, accumulate, 0, 0, 0, 0, NULL, 16, uk_portable, 0, 0, false};
#ifdef GEMM_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX512) {
        g.nr = 32;
        g.uk = uk_avx512;
    } else if (lvl >= CPU_SIMD_AVX2) {
        g.uk = uk_avx2;
    }
#endif
    int64_t ncmax = min64(N, GEMM_NC), panels = (ncmax + g.nr - 1) / g.nr;
    g.bp = malloc(sizeof(float) * (size_t)(panels * g.nr * min64(K, GEMM_KC)));
    if (!g.bp) return core_err(CT_ERR_OOM, "matmul: no memory for a packed %lld x %lld block", (long long)K, (long long)N);
    for (g.jc = 0; g.jc < N; g.jc += GEMM_NC) {
        g.nc = min64(GEMM_NC, N - g.jc);
        int64_t np = (g.nc + g.nr - 1) / g.nr;
        /* enough column chunks to keep every thread busy when M is small */
        int64_t m_blocks = (M + GEMM_MC - 1) / GEMM_MC, want = 4 * cpu_num_threads();
        int64_t chunks = m_blocks >= want ? 1 : min64(np, (want + m_blocks - 1) / m_blocks);
        g.jchunk = ((np + chunks - 1) / chunks) * g.nr;
        g.n_jchunks = (g.nc + g.jchunk - 1) / g.jchunk;
        for (g.pc = 0; g.pc < K; g.pc += GEMM_KC) {
            g.kc = min64(GEMM_KC, K - g.pc);
            cpu_parallel_for(np, max64(1, 64 / g.kc), pack_b_panels, &g);
            cpu_parallel_for(m_blocks * g.n_jchunks, 1, gemm_tasks, &g);
        }
    }
    free(g.bp);
    if (g.oom) return core_err(CT_ERR_OOM, "matmul: no memory for a packed A block");
    return CT_OK;
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

ct_status cpu_gemm_f32(int64_t M, int64_t N, int64_t K, const float *A, int64_t rsa, int64_t csa, const float *B,
                       int64_t rsb, int64_t csb, float *C, int64_t ldc, bool accumulate)
{
#ifdef CTORCH_HAVE_BLAS
    if (M > 0 && N > 0 && K > 0 && blas_dims_ok(M, N, K, ldc))
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
