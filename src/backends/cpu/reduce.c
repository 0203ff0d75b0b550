/* Reductions on the CPU: SUM MEAN PROD MAX MIN VAR STD NORM ARGMAX ARGMIN.
 *
 * src's dims are split into kept dims (row-major order = dst order, dst being
 * contiguous) and reduced dims, size-1 dims dropped and adjacent dims merged
 * where the strides allow. Two schedules:
 *  - per output (parallel over outputs): the reduced elements of one output are
 *    visited in row-major order (so a running count is the argmax index), as
 *    runs along the innermost reduced dim; contiguous f32 runs use SIMD helpers;
 *  - column-wise, when the innermost kept dim is contiguous and the reduced ones
 *    are not (reducing outer dims): blocks of adjacent outputs accumulate side by
 *    side, vectorized across the contiguous dim.
 * Accuracy: floating inputs accumulate in double, so an f32 sum of n values has
 * |error| <= n * 2^-53 * sum|x| before the final rounding to f32 (half an ulp);
 * integer and bool sums/products/extremes are exact (sums and products wrap
 * modulo 2^64 like torch's int64). var/std use two passes (mean, then squared
 * deviations). NaN propagates through max/min; argmax/argmin treat NaN as the
 * extreme (first NaN wins) and ties take the lowest index. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define RED_X86 1
#endif

#define RED_CHUNK 256
#define RED_COLS 64 /* columns per block in the column-wise schedule */

typedef struct red_plan {
    ct_op_kind kind;
    ct_dtype st, dt;
    bool unbiased, exact_int, cplx;
    double p;
    const char *src;
    char *dst;
    size_t ses, des;
    int nk, nr;
    int64_t kshape[CT_MAX_DIMS], kstride[CT_MAX_DIMS];
    int64_t rshape[CT_MAX_DIMS], rstride[CT_MAX_DIMS];
    int64_t nout, nred;
} red_plan;

typedef struct red_acc {
    double s, best, mean, re, im;
    uint64_t u;
    int64_t ibest, idx, count;
    bool have;
} red_acc;

static bool is_max_kind(ct_op_kind k) { return k == CT_OP_MAX || k == CT_OP_ARGMAX; }

/* ---------------- contiguous f32 helpers ---------------- */
#ifdef RED_X86
__attribute__((target("avx512f"))) static double sum_f32_avx512(const float *x, int64_t n, int64_t *done)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm256_loadu_ps(x + i)));
        a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)));
    }
    *done = i;
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

__attribute__((target("avx2"))) static double sum_f32_avx2(const float *x, int64_t n, int64_t *done)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm_loadu_ps(x + i)));
        a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)));
    }
    *done = i;
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(a0, a1));
    return (t[0] + t[1]) + (t[2] + t[3]);
}

/* sum of (x - mean)^2, the second pass of var/std */
__attribute__((target("avx512f"))) static double sqdev_f32_avx512(const float *x, int64_t n, double mean, int64_t *done)
{
    __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd(), mu = _mm512_set1_pd(mean);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512d d0 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i)), mu);
        __m512d d1 = _mm512_sub_pd(_mm512_cvtps_pd(_mm256_loadu_ps(x + i + 8)), mu);
        a0 = _mm512_fmadd_pd(d0, d0, a0);
        a1 = _mm512_fmadd_pd(d1, d1, a1);
    }
    *done = i;
    return _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
}

__attribute__((target("avx2,fma"))) static double sqdev_f32_avx2(const float *x, int64_t n, double mean, int64_t *done)
{
    __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd(), mu = _mm256_set1_pd(mean);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256d d0 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i)), mu);
        __m256d d1 = _mm256_sub_pd(_mm256_cvtps_pd(_mm_loadu_ps(x + i + 4)), mu);
        a0 = _mm256_fmadd_pd(d0, d0, a0);
        a1 = _mm256_fmadd_pd(d1, d1, a1);
    }
    *done = i;
    double t[4];
    _mm256_storeu_pd(t, _mm256_add_pd(a0, a1));
    return (t[0] + t[1]) + (t[2] + t[3]);
}

/* max (or min) of x[0..n); *nan set when any element is NaN. */
__attribute__((target("avx512f"))) static float ext_f32_avx512(const float *x, int64_t n, bool mx, bool *nan,
                                                               int64_t *done)
{
    __m512 b = _mm512_set1_ps(mx ? -INFINITY : INFINITY);
    __mmask16 un = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 v = _mm512_loadu_ps(x + i);
        un |= _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
        b = mx ? _mm512_max_ps(b, v) : _mm512_min_ps(b, v);
    }
    *done = i;
    *nan = un != 0;
    return mx ? _mm512_reduce_max_ps(b) : _mm512_reduce_min_ps(b);
}

__attribute__((target("avx2"))) static float ext_f32_avx2(const float *x, int64_t n, bool mx, bool *nan, int64_t *done)
{
    __m256 b = _mm256_set1_ps(mx ? -INFINITY : INFINITY), un = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        un = _mm256_or_ps(un, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        b = mx ? _mm256_max_ps(b, v) : _mm256_min_ps(b, v);
    }
    *done = i;
    *nan = _mm256_movemask_ps(un) != 0;
    float t[8], r;
    _mm256_storeu_ps(t, b);
    r = t[0];
    for (int k = 1; k < 8; k++) r = mx ? (t[k] > r ? t[k] : r) : (t[k] < r ? t[k] : r);
    return r;
}
#endif

static double sum_f32(const float *x, int64_t n)
{
    int64_t i = 0;
    double s = 0;
#ifdef RED_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX512) s = sum_f32_avx512(x, n, &i);
    else if (lvl >= CPU_SIMD_AVX2) s = sum_f32_avx2(x, n, &i);
#endif
    for (; i < n; i++) s += x[i];
    return s;
}

static double sqdev_f32(const float *x, int64_t n, double mean)
{
    int64_t i = 0;
    double s = 0;
#ifdef RED_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX512) s = sqdev_f32_avx512(x, n, mean, &i);
    else if (lvl >= CPU_SIMD_AVX2) s = sqdev_f32_avx2(x, n, mean, &i);
#endif
    for (; i < n; i++) s += (x[i] - mean) * (x[i] - mean);
    return s;
}

static float ext_f32(const float *x, int64_t n, bool mx, bool *nan)
{
    int64_t i = 0;
    float b = mx ? -INFINITY : INFINITY;
    *nan = false;
#ifdef RED_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX512) b = ext_f32_avx512(x, n, mx, nan, &i);
    else if (lvl >= CPU_SIMD_AVX2) b = ext_f32_avx2(x, n, mx, nan, &i);
#endif
    for (; i < n; i++) {
        if (x[i] != x[i]) *nan = true;
        else if (mx ? x[i] > b : x[i] < b) b = x[i];
    }
    return *nan ? NAN : b;
}

/* ---------------- generic accumulation ---------------- */
static void acc_init(const red_plan *p, red_acc *a)
{
    memset(a, 0, sizeof *a);
    if (p->kind == CT_OP_PROD) {
        a->s = 1.0;
        a->u = 1;
        a->re = 1.0;
    }
    a->best = is_max_kind(p->kind) ? -INFINITY : INFINITY;
    if (p->kind == CT_OP_NORM) a->best = 0.0;
    a->ibest = is_max_kind(p->kind) ? INT64_MIN : INT64_MAX;
}

static void load_f64_chunk(const char *src, ct_dtype t, int64_t stride, size_t es, int64_t n, double *d)
{
    switch (t) {
    case CT_F32:
        for (int64_t i = 0; i < n; i++) d[i] = *(const float *)(src + (size_t)(i * stride) * es);
        break;
    case CT_F64:
        for (int64_t i = 0; i < n; i++) d[i] = *(const double *)(src + (size_t)(i * stride) * es);
        break;
    default:
        for (int64_t i = 0; i < n; i++) d[i] = cpu_load_f64(src + (size_t)(i * stride) * es, t);
        break;
    }
}

static int64_t load_i64(const char *p, ct_dtype t)
{
    switch (t) {
    case CT_I64: return *(const int64_t *)p;
    case CT_I32: return *(const int32_t *)p;
    case CT_I8: return *(const int8_t *)p;
    case CT_BOOL: return *(const uint8_t *)p != 0;
    default: return 0;
    }
}

/* Exact integer path: sums/products wrap (unsigned), extremes compare as int64. */
static void run_int(const red_plan *p, red_acc *a, const char *src, int64_t n, int64_t stride)
{
    for (int64_t i = 0; i < n; i++) {
        int64_t v = load_i64(src + (size_t)(i * stride) * p->ses, p->st);
        switch (p->kind) {
        case CT_OP_SUM: case CT_OP_MEAN: a->u += (uint64_t)v; break;
        case CT_OP_PROD: a->u *= (uint64_t)v; break;
        case CT_OP_MAX: if (v > a->ibest) a->ibest = v; break;
        case CT_OP_MIN: if (v < a->ibest) a->ibest = v; break;
        case CT_OP_ARGMAX:
            if (!a->have || v > a->ibest) a->ibest = v, a->idx = a->count + i, a->have = true;
            break;
        case CT_OP_ARGMIN:
            if (!a->have || v < a->ibest) a->ibest = v, a->idx = a->count + i, a->have = true;
            break;
        default: break;
        }
    }
    a->count += n;
}

static void run_complex(const red_plan *p, red_acc *a, const char *src, int64_t n, int64_t stride)
{
    for (int64_t i = 0; i < n; i++) {
        const float *z = (const float *)(src + (size_t)(i * stride) * p->ses);
        if (p->kind == CT_OP_PROD) {
            double re = a->re * z[0] - a->im * z[1], im = a->re * z[1] + a->im * z[0];
            a->re = re;
            a->im = im;
        } else {
            a->re += z[0];
            a->im += z[1];
        }
    }
    a->count += n;
}

/* Contiguous f32 runs through the SIMD helpers; true if handled. */
static bool run_f32_fast(const red_plan *p, red_acc *a, const float *x, int64_t n, int pass)
{
    switch (p->kind) {
    case CT_OP_SUM: case CT_OP_MEAN: a->s += sum_f32(x, n); break;
    case CT_OP_VAR: case CT_OP_STD: a->s += pass == 0 ? sum_f32(x, n) : sqdev_f32(x, n, a->mean); break;
    case CT_OP_MAX: case CT_OP_MIN: {
        bool nan, mx = p->kind == CT_OP_MAX;
        float b = ext_f32(x, n, mx, &nan);
        if (nan) a->best = NAN;
        else if (mx ? b > a->best : b < a->best) a->best = b;
        break;
    }
    case CT_OP_ARGMAX: case CT_OP_ARGMIN: {
        bool nan, mx = p->kind == CT_OP_ARGMAX;
        float b = ext_f32(x, n, mx, &nan);
        int64_t i = 0;
        if (nan)
            while (x[i] == x[i]) i++;
        else
            while (x[i] != b) i++;
        double v = x[i];
        bool take = !a->have || (v != v && a->best == a->best) || (mx ? v > a->best : v < a->best);
        if (take) a->best = v, a->idx = a->count + i, a->have = true;
        break;
    }
    default: return false;
    }
    a->count += n;
    return true;
}

static void run_f64(const red_plan *p, red_acc *a, const char *src, int64_t n, int64_t stride, int pass)
{
    if (p->st == CT_F32 && stride == 1 && n >= 16 && run_f32_fast(p, a, (const float *)src, n, pass)) return;
    double t[RED_CHUNK];
    for (int64_t c0 = 0; c0 < n; c0 += RED_CHUNK) {
        int64_t m = n - c0 < RED_CHUNK ? n - c0 : RED_CHUNK;
        load_f64_chunk(src + (size_t)(c0 * stride) * p->ses, p->st, stride, p->ses, m, t);
        switch (p->kind) {
        case CT_OP_SUM: case CT_OP_MEAN:
            for (int64_t i = 0; i < m; i++) a->s += t[i];
            break;
        case CT_OP_PROD:
            for (int64_t i = 0; i < m; i++) a->s *= t[i];
            break;
        case CT_OP_MAX:
            for (int64_t i = 0; i < m; i++)
                if (t[i] > a->best || t[i] != t[i]) a->best = t[i];
            break;
        case CT_OP_MIN:
            for (int64_t i = 0; i < m; i++)
                if (t[i] < a->best || t[i] != t[i]) a->best = t[i];
            break;
        case CT_OP_ARGMAX: case CT_OP_ARGMIN: {
            bool mx = p->kind == CT_OP_ARGMAX;
            for (int64_t i = 0; i < m; i++) {
                double v = t[i];
                if (!a->have || (v != v && a->best == a->best) || (mx ? v > a->best : v < a->best))
                    a->best = v, a->idx = a->count + c0 + i, a->have = true;
            }
            break;
        }
        case CT_OP_VAR: case CT_OP_STD:
            if (pass == 0)
                for (int64_t i = 0; i < m; i++) a->s += t[i];
            else
                for (int64_t i = 0; i < m; i++) a->s += (t[i] - a->mean) * (t[i] - a->mean);
            break;
        case CT_OP_NORM:
            if (isinf(p->p)) {
                for (int64_t i = 0; i < m; i++) {
                    double v = fabs(t[i]);
                    if (v > a->best || v != v) a->best = v;
                }
            } else if (p->p == 1.0) {
                for (int64_t i = 0; i < m; i++) a->s += fabs(t[i]);
            } else if (p->p == 2.0) {
                for (int64_t i = 0; i < m; i++) a->s += t[i] * t[i];
            } else {
                for (int64_t i = 0; i < m; i++) a->s += pow(fabs(t[i]), p->p);
            }
            break;
        default: break;
        }
    }
    a->count += n;
}

/* Every reduced element of the output whose first element is at `base`, in row-major order. */
static void visit(const red_plan *p, int64_t base, red_acc *a, int pass)
{
    if (p->nred == 0) return;
    int64_t len = p->nr ? p->rshape[p->nr - 1] : 1, rs = p->nr ? p->rstride[p->nr - 1] : 0;
    int64_t nruns = p->nred / len;
    a->count = 0;
    for (int64_t q = 0; q < nruns; q++) {
        int64_t off = base, idx = q;
        for (int d = p->nr - 2; d >= 0; d--) {
            off += (idx % p->rshape[d]) * p->rstride[d];
            idx /= p->rshape[d];
        }
        const char *src = p->src + (size_t)off * p->ses;
        if (p->cplx) run_complex(p, a, src, len, rs);
        else if (p->exact_int) run_int(p, a, src, len, rs);
        else run_f64(p, a, src, len, rs, pass);
    }
}

static void store(const red_plan *p, int64_t o, const red_acc *a)
{
    char *d = p->dst + (size_t)o * p->des;
    double n = (double)p->nred, v = 0;
    if (p->cplx) {
        float *z = (float *)d;
        double k = p->kind == CT_OP_MEAN ? n : 1.0;
        z[0] = (float)(a->re / k);
        z[1] = (float)(a->im / k);
        return;
    }
    if (p->exact_int) {
        switch (p->kind) {
        case CT_OP_SUM: case CT_OP_PROD: *(int64_t *)d = (int64_t)a->u; return;
        case CT_OP_MEAN: v = (double)(int64_t)a->u / n; break;
        case CT_OP_MAX: case CT_OP_MIN:
            switch (p->dt) {
            case CT_I64: *(int64_t *)d = a->ibest; return;
            case CT_I32: *(int32_t *)d = (int32_t)a->ibest; return;
            case CT_I8: *(int8_t *)d = (int8_t)a->ibest; return;
            default: *(uint8_t *)d = a->ibest != 0; return;
            }
        default: *(int64_t *)d = a->idx; return; /* ARGMAX / ARGMIN */
        }
        cpu_store_f64(d, p->dt, v);
        return;
    }
    switch (p->kind) {
    case CT_OP_SUM: case CT_OP_PROD: v = a->s; break;
    case CT_OP_MEAN: v = a->s / n; break;
    case CT_OP_MAX: case CT_OP_MIN: v = a->best; break;
    case CT_OP_ARGMAX: case CT_OP_ARGMIN: *(int64_t *)d = a->idx; return;
    case CT_OP_VAR: case CT_OP_STD:
        v = a->s / (n - (p->unbiased ? 1.0 : 0.0));
        if (p->nred == 0 || (p->unbiased && p->nred == 1)) v = NAN;
        if (p->kind == CT_OP_STD) v = sqrt(v);
        break;
    case CT_OP_NORM:
        v = isinf(p->p) ? a->best : p->p == 1.0 ? a->s : p->p == 2.0 ? sqrt(a->s) : pow(a->s, 1.0 / p->p);
        break;
    default: break;
    }
    cpu_store_f64(d, p->dt, v);
}

static int64_t kept_offset(const red_plan *p, int64_t o)
{
    int64_t off = 0;
    for (int d = p->nk - 1; d >= 0; d--) {
        off += (o % p->kshape[d]) * p->kstride[d];
        o /= p->kshape[d];
    }
    return off;
}

static void per_output(void *vctx, int64_t o0, int64_t o1)
{
    const red_plan *p = vctx;
    for (int64_t o = o0; o < o1; o++) {
        int64_t base = kept_offset(p, o);
        red_acc a;
        acc_init(p, &a);
        visit(p, base, &a, 0);
        if (p->kind == CT_OP_VAR || p->kind == CT_OP_STD) {
            a.mean = p->nred ? a.s / (double)p->nred : 0.0;
            a.s = 0;
            visit(p, base, &a, 1);
        }
        store(p, o, &a);
    }
}

/* ---------------- column-wise schedule (outer dims reduced) ---------------- */
/* One source row of a full f32 column block. The trip count is a constant, so the
 * compiler vectorizes it for each target below; op 0 = sum (double), 1 = max, 2 = min. */
#define COL_BODY                                                                                                       \
    if (op == 0)                                                                                                       \
        for (int j = 0; j < RED_COLS; j++) sacc[j] += x[j];                                                            \
    else if (op == 1)                                                                                                  \
        for (int j = 0; j < RED_COLS; j++) facc[j] = (x[j] > facc[j] || x[j] != x[j]) ? x[j] : facc[j];                \
    else                                                                                                               \
        for (int j = 0; j < RED_COLS; j++) facc[j] = (x[j] < facc[j] || x[j] != x[j]) ? x[j] : facc[j];

typedef void (*col_fn)(int op, const float *restrict x, double *restrict sacc, float *restrict facc);
static void col_portable(int op, const float *restrict x, double *restrict sacc, float *restrict facc) { COL_BODY }
#ifdef RED_X86
__attribute__((target("avx2"))) static void col_avx2(int op, const float *restrict x, double *restrict sacc,
                                                     float *restrict facc)
{
    COL_BODY
}
__attribute__((target("avx512f"))) static void col_avx512(int op, const float *restrict x, double *restrict sacc,
                                                          float *restrict facc)
{
    COL_BODY
}
#endif

static void columns(void *vctx, int64_t t0, int64_t t1)
{
    const red_plan *p = vctx;
    int64_t L = p->kshape[p->nk - 1], nblk = (L + RED_COLS - 1) / RED_COLS;
    bool mx = p->kind == CT_OP_MAX, sum = p->kind == CT_OP_SUM || p->kind == CT_OP_MEAN;
    int op = sum ? 0 : mx ? 1 : 2;
    col_fn fn = col_portable;
#ifdef RED_X86
    cpu_simd lvl = cpu_simd_level();
    fn = lvl >= CPU_SIMD_AVX512 ? col_avx512 : lvl >= CPU_SIMD_AVX2 ? col_avx2 : col_portable;
#endif
    double acc[RED_COLS], t[RED_COLS];
    float facc[RED_COLS];
    for (int64_t task = t0; task < t1; task++) {
        int64_t row = task / nblk, c0 = (task % nblk) * RED_COLS, m = L - c0 < RED_COLS ? L - c0 : RED_COLS;
        int64_t base = kept_offset(p, row * L) + c0;
        bool fast = p->st == CT_F32 && m == RED_COLS;
        for (int64_t j = 0; j < m; j++) {
            acc[j] = sum ? 0.0 : mx ? -INFINITY : INFINITY;
            facc[j] = mx ? -INFINITY : INFINITY;
        }
        for (int64_t q = 0; q < p->nred; q++) {
            int64_t off = base, idx = q;
            for (int d = p->nr - 1; d >= 0; d--) {
                off += (idx % p->rshape[d]) * p->rstride[d];
                idx /= p->rshape[d];
            }
            const char *src = p->src + (size_t)off * p->ses;
            if (fast) {
                fn(op, (const float *)src, acc, facc);
                continue;
            }
            load_f64_chunk(src, p->st, 1, p->ses, m, t);
            for (int64_t j = 0; j < m; j++) {
                if (sum) acc[j] += t[j];
                else if (mx ? (t[j] > acc[j] || t[j] != t[j]) : (t[j] < acc[j] || t[j] != t[j])) acc[j] = t[j];
            }
        }
        for (int64_t j = 0; j < m; j++) {
            double v = sum ? acc[j] : fast ? facc[j] : acc[j];
            if (p->kind == CT_OP_MEAN) v /= (double)p->nred;
            cpu_store_f64(p->dst + (size_t)(row * L + c0 + j) * p->des, p->dt, v);
        }
    }
}

/* ---------------- one long contiguous run split across threads ---------------- */
#define SPLIT_MAX 64
#define SPLIT_MIN 16384 /* elements per part at least */

typedef struct split_job {
    const red_plan *p;
    int64_t chunk;
    red_acc parts[SPLIT_MAX];
} split_job;

static void split_parts(void *vctx, int64_t c0, int64_t c1)
{
    split_job *s = vctx;
    const red_plan *p = s->p;
    for (int64_t c = c0; c < c1; c++) {
        int64_t b = c * s->chunk, n = p->nred - b < s->chunk ? p->nred - b : s->chunk;
        red_acc *a = &s->parts[c];
        acc_init(p, a);
        a->count = b; /* argmax indices continue from the part's start */
        run_f64(p, a, p->src + (size_t)b * p->ses, n, 1, 0);
    }
}

static void reduce_split(const red_plan *p)
{
    split_job s = {.p = p};
    /* as many parts as the length calls for, whatever the thread count, so the sum rounds the same way */
    int64_t parts = p->nred / SPLIT_MIN;
    if (parts > SPLIT_MAX) parts = SPLIT_MAX;
    if (parts < 1) parts = 1;
    s.chunk = (p->nred + parts - 1) / parts;
    parts = (p->nred + s.chunk - 1) / s.chunk;
    cpu_parallel_for(parts, 1, split_parts, &s);
    red_acc a;
    acc_init(p, &a);
    bool mx = is_max_kind(p->kind);
    for (int64_t c = 0; c < parts; c++) {
        const red_acc *q = &s.parts[c];
        switch (p->kind) {
        case CT_OP_SUM: case CT_OP_MEAN: a.s += q->s; break;
        case CT_OP_MAX: case CT_OP_MIN:
            if (q->best != q->best || (mx ? q->best > a.best : q->best < a.best)) a.best = q->best;
            break;
        default: /* ARGMAX / ARGMIN: earlier parts win ties */
            if (!a.have || (q->best != q->best && a.best == a.best) || (mx ? q->best > a.best : q->best < a.best))
                a.best = q->best, a.idx = q->idx, a.have = true;
            break;
        }
        if (a.best != a.best && (p->kind == CT_OP_MAX || p->kind == CT_OP_MIN)) break;
    }
    store(p, 0, &a);
}

/* Drops size-1 dims and merges dims that are contiguous with each other. */
static int coalesce(int n, int64_t *shape, int64_t *stride)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (shape[i] == 1) continue;
        if (m > 0 && stride[m - 1] == stride[i] * shape[i]) {
            shape[m - 1] *= shape[i];
            stride[m - 1] = stride[i];
        } else {
            shape[m] = shape[i];
            stride[m] = stride[i];
            m++;
        }
    }
    return m;
}

ct_status cpu_run_reduce(ct_device *dev, const ct_op *op)
{
    const ct_tensor *a = op->src[0];
    red_plan p = {.kind = op->kind, .st = a->dtype, .dt = op->dst->dtype, .unbiased = op->p.red.unbiased,
                  .p = op->p.red.p};
    p.cplx = ct_dtype_is_complex(a->dtype);
    bool intlike = ct_dtype_is_int(a->dtype) || a->dtype == CT_BOOL;
    p.exact_int = intlike && (p.kind == CT_OP_SUM || p.kind == CT_OP_MEAN || p.kind == CT_OP_PROD ||
                              p.kind == CT_OP_MAX || p.kind == CT_OP_MIN || p.kind == CT_OP_ARGMAX ||
                              p.kind == CT_OP_ARGMIN);
    if (p.cplx && p.kind != CT_OP_SUM && p.kind != CT_OP_MEAN && p.kind != CT_OP_PROD)
        return core_err(CT_ERR_DTYPE, "%s: no CPU kernel for %s", op_kind_name(op->kind), ct_dtype_name(a->dtype));
    p.nout = ct_tensor_numel(op->dst);
    p.nred = 1;
    for (int d = 0; d < a->ndim; d++) {
        bool red = op->p.red.mask & (1u << d);
        if (red) {
            p.rshape[p.nr] = a->shape[d];
            p.rstride[p.nr++] = a->stride[d];
            p.nred *= a->shape[d];
        } else {
            p.kshape[p.nk] = a->shape[d];
            p.kstride[p.nk++] = a->stride[d];
        }
    }
    if (p.nout == 0) return CT_OK;
    p.nk = coalesce(p.nk, p.kshape, p.kstride);
    p.nr = coalesce(p.nr, p.rshape, p.rstride);
    p.src = op_data(a, dev);
    p.dst = op_data(op->dst, dev);
    p.ses = ct_dtype_block_bytes(a->dtype);
    p.des = ct_dtype_block_bytes(p.dt);
    bool inner_run = p.nr > 0 && p.rstride[p.nr - 1] == 1;
    bool col_kind = p.kind == CT_OP_SUM || p.kind == CT_OP_MEAN || p.kind == CT_OP_MAX || p.kind == CT_OP_MIN;
    if (p.nred > 0 && p.nk > 0 && p.kstride[p.nk - 1] == 1 && p.kshape[p.nk - 1] >= 8 && !inner_run && col_kind &&
        ct_dtype_is_float(a->dtype)) {
        int64_t L = p.kshape[p.nk - 1], tasks = (p.nout / L) * ((L + RED_COLS - 1) / RED_COLS);
        cpu_parallel_for(tasks, 1 + 32768 / (p.nred * RED_COLS), columns, &p);
        return CT_OK;
    }
    bool split_kind = p.kind == CT_OP_SUM || p.kind == CT_OP_MEAN || col_kind || p.kind == CT_OP_ARGMAX ||
                      p.kind == CT_OP_ARGMIN;
    if (p.nout == 1 && p.nr == 1 && inner_run && p.nred >= 4 * SPLIT_MIN && split_kind && !p.exact_int && !p.cplx) {
        reduce_split(&p);
        return CT_OK;
    }
    cpu_parallel_for(p.nout, 1 + 32768 / (p.nred + 1), per_output, &p);
    return CT_OK;
}
