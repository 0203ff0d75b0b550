/* ROPE and scaled dot-product attention.
 *
 * ROPE angles: theta_i = pos * freq_scale * freq_base^(-2i/n_dims) is evaluated
 * in double for every (position, pair) and its cos/sin rounded once to f32; the
 * rotation itself is f32. This is the exactly-rounded version of what llama.cpp
 * computes (it builds the angle by repeated f32 multiplication), so the two agree
 * to f32 rounding of the angle.
 *
 * SDPA is flash-attention style: each task owns a block of query rows that share
 * one key/value head, walks the keys in chunks with an online softmax (running
 * max m, sum l, f32 accumulator), and never materializes [Tq, Tk]. Decode
 * (Tq = 1) groups the query heads of one kv head into a task so each K/V row is
 * read once per group, and splits long key ranges into segments merged at the end
 * when there are fewer (batch, kv head) pairs than threads. f16 K/V chunks are
 * converted to f32 once per chunk. A row that sees no key (causal/window/mask all
 * exclude it, or Tk = 0) yields zeros; a NaN score yields a NaN row. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define ATT_X86 1
#endif

#define SDPA_DECODE_TASKS 16 /* decode tasks to aim for (heads x key segments): 2 per thread up to 8 */

static void set_status(ct_status *dst, ct_status s)
{
    ct_status ok = CT_OK;
    __atomic_compare_exchange_n(dst, &ok, s, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* ---- ROPE ---- */

typedef struct rope_ctx {
    cpu_nd it;          /* 0 = dst, 1 = x; rows are (..., t, h) */
    const float *cs;    /* [T][half][2] = cos, sin */
    int64_t T, H, D, half;
    bool neox, fast;
    ct_dtype xdt, ydt;
} rope_ctx;

static void rope_rows(void *vctx, int64_t b, int64_t e)
{
    const rope_ctx *c = vctx;
    int64_t xs = cpu_nd_inner(&c->it, 1), ys = cpu_nd_inner(&c->it, 0), half = c->half;
    size_t xe = c->it.esize[1], ye = c->it.esize[0];
    int64_t step = c->neox ? 1 : 2, other = c->neox ? half : 1;
    for (int64_t r = b; r < e; r++) {
        const char *x = cpu_nd_row(&c->it, 1, r);
        char *y = cpu_nd_row(&c->it, 0, r);
        const float *cs = c->cs + ((r / c->H) % c->T) * half * 2;
        if (c->fast) {
            const float *xf = (const float *)x;
            float *yf = (float *)y;
            for (int64_t i = 0; i < half; i++) {
                int64_t i0 = i * step, i1 = i0 + other;
                float x0 = xf[i0], x1 = xf[i1], co = cs[2 * i], si = cs[2 * i + 1];
                yf[i0] = x0 * co - x1 * si;
                yf[i1] = x0 * si + x1 * co;
            }
            for (int64_t i = 2 * half; i < c->D; i++) yf[i] = xf[i];
            continue;
        }
        for (int64_t i = 0; i < half; i++) {
            int64_t i0 = i * step, i1 = i0 + other;
            float x0 = cpu_load_f32(x + i0 * xs * (int64_t)xe, c->xdt), x1 = cpu_load_f32(x + i1 * xs * (int64_t)xe, c->xdt);
            float co = cs[2 * i], si = cs[2 * i + 1];
            cpu_store_f64(y + i0 * ys * (int64_t)ye, c->ydt, x0 * co - x1 * si);
            cpu_store_f64(y + i1 * ys * (int64_t)ye, c->ydt, x0 * si + x1 * co);
        }
        for (int64_t i = 2 * half; i < c->D; i++)
            cpu_store_f64(y + i * ys * (int64_t)ye, c->ydt, cpu_load_f64(x + i * xs * (int64_t)xe, c->xdt));
    }
}

typedef struct rope_table_ctx {
    float *cs;
    const double *inv_freq; /* base^(-2i/n_dims) */
    const char *pos;
    ct_dtype pdt;
    int64_t pstride, half;
    double scale;
} rope_table_ctx;

static void rope_table(void *vctx, int64_t b, int64_t e)
{
    const rope_table_ctx *c = vctx;
    for (int64_t t = b; t < e; t++) {
        const char *pp = c->pos + t * c->pstride * (int64_t)ct_dtype_block_bytes(c->pdt);
        double pos = c->pdt == CT_I32 ? (double)*(const int32_t *)pp : (double)*(const int64_t *)pp;
        for (int64_t i = 0; i < c->half; i++) {
            double theta = pos * c->scale * c->inv_freq[i];
            c->cs[(t * c->half + i) * 2] = (float)cos(theta);
            c->cs[(t * c->half + i) * 2 + 1] = (float)sin(theta);
        }
    }
}

/* The angle table of this thread's last rope: the q and k ropes of every layer of a step
 * share positions and parameters, so a prompt's 2 x n_layer ropes make it once (made
 * per rope, cos/sin of 4096 angles took ~0.13 ms whatever the thread count, 4% of a
 * TinyLlama-shaped pp128 at 16 threads on the GPU host's Xeon). */
typedef struct rope_key {
    const float *cs;
    const int64_t *pos; /* the positions it was made for (scratch) */
    int64_t T, half;
    double base, scale;
} rope_key;
static _Thread_local rope_key t_rope_key;

/* Whether cs already holds the angles for these positions; records them if not. */
static bool rope_table_kept(const rope_key *k, int64_t *pc, const char *pos, ct_dtype pdt, int64_t pstride)
{
    const rope_key *o = &t_rope_key;
    bool same = o->cs == k->cs && o->pos == pc && o->T == k->T && o->half == k->half && o->base == k->base &&
                o->scale == k->scale;
    for (int64_t t = 0; t < k->T; t++) {
        const char *pp = pos + t * pstride * (int64_t)ct_dtype_block_bytes(pdt);
        int64_t v = pdt == CT_I32 ? (int64_t)*(const int32_t *)pp : *(const int64_t *)pp;
        if (!same || pc[t] != v) same = false, pc[t] = v;
    }
    t_rope_key = *k;
    return same;
}

static ct_status run_rope(ct_device *dev, const ct_op *op)
{
    const ct_tensor *x = op->src[0], *pos = op->src[1];
    const ct_rope_params *p = &op->p.rope;
    int nd = x->ndim;
    rope_ctx c = {.T = x->shape[nd - 3], .H = x->shape[nd - 2], .D = x->shape[nd - 1], .half = p->n_dims / 2,
                  .neox = p->mode == CT_ROPE_NEOX, .xdt = x->dtype, .ydt = op->dst->dtype};
    if (ct_tensor_numel(x) == 0) return CT_OK;
    float *cs = cpu_scratch(CPU_SCRATCH_ROPE_CS, sizeof(float) * 2 * (size_t)(c.T * c.half + 1));
    double *inv = cpu_scratch(CPU_SCRATCH_ROPE_INV, sizeof(double) * (size_t)(c.half + 1));
    int64_t *pc = cpu_scratch(CPU_SCRATCH_ROPE_POS, sizeof(int64_t) * (size_t)(c.T + 1));
    if (!cs || !inv || !pc) {
        t_rope_key = (rope_key){0};
        return core_err(CT_ERR_OOM, "rope: no memory for a %lld x %lld angle table", (long long)c.T, (long long)c.half);
    }
    rope_key key = {cs, pc, c.T, c.half, p->freq_base, p->freq_scale};
    if (!rope_table_kept(&key, pc, op_data(pos, dev), pos->dtype, pos->stride[0])) {
        for (int64_t i = 0; i < c.half; i++) inv[i] = pow(p->freq_base, -(double)i / (double)c.half);
        rope_table_ctx tc = {cs, inv, op_data(pos, dev), pos->dtype, pos->stride[0], c.half, p->freq_scale};
        /* ~40 ns per angle (double cos and sin): chunks of ~512 angles */
        cpu_parallel_for(c.T, 512 / (c.half + 1) + 1, rope_table, &tc);
    }
    c.cs = cs;
    cpu_nd_init(&c.it, nd, x->shape);
    cpu_nd_add(&c.it, op->dst, dev);
    cpu_nd_add(&c.it, x, dev);
    c.fast = x->dtype == CT_F32 && op->dst->dtype == CT_F32 && (cpu_nd_inner(&c.it, 1) == 1 || c.D == 1);
    cpu_parallel_for(cpu_nd_rows(&c.it), 16384 / (c.D + 1) + 1, rope_rows, &c);
    return CT_OK;
}

/* ---- vector kernels for SDPA ---- */


static float dot_portable(const float *a, const float *b, int64_t n)
{
    float s[4] = {0};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int j = 0; j < 4; j++) s[j] += a[i + j] * b[i + j];
    for (; i < n; i++) s[0] += a[i] * b[i];
    return (s[0] + s[1]) + (s[2] + s[3]);
}
static void axpy_portable(float *y, float a, const float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += a * x[i];
}
static void dot4_portable(const float *q, const float *k, int64_t ks, int64_t n, float *out)
{
    for (int u = 0; u < 4; u++) out[u] = dot_portable(q, k + u * ks, n);
}
static void axpy4_portable(float *y, const float *p, const float *v, int64_t vs, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] += p[0] * v[i] + p[1] * v[vs + i] + p[2] * v[2 * vs + i] + p[3] * v[3 * vs + i];
}
static void scal_portable(float *y, float a, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] *= a;
}

#ifdef ATT_X86
__attribute__((target("avx2,fma"))) static float dot_avx2(const float *a, const float *b, int64_t n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i + 8 <= n; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    __m256 s = _mm256_add_ps(s0, s1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    float r = _mm_cvtss_f32(h);
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}
__attribute__((target("avx2,fma"))) static void axpy_avx2(float *y, float a, const float *x, int64_t n)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
__attribute__((target("avx2,fma"))) static float hsum_avx2(__m256 s)
{
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}
__attribute__((target("avx2,fma"))) static void dot4_avx2(const float *q, const float *k, int64_t ks, int64_t n, float *out)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps(), s2 = _mm256_setzero_ps(), s3 = _mm256_setzero_ps();
    const float *k0 = k, *k1 = k + ks, *k2 = k + 2 * ks, *k3 = k + 3 * ks;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 qv = _mm256_loadu_ps(q + i);
        s0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k0 + i), s0);
        s1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k1 + i), s1);
        s2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k2 + i), s2);
        s3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k3 + i), s3);
    }
    out[0] = hsum_avx2(s0), out[1] = hsum_avx2(s1), out[2] = hsum_avx2(s2), out[3] = hsum_avx2(s3);
    for (; i < n; i++) out[0] += q[i] * k0[i], out[1] += q[i] * k1[i], out[2] += q[i] * k2[i], out[3] += q[i] * k3[i];
}
__attribute__((target("avx2,fma"))) static void axpy4_avx2(float *y, const float *p, const float *v, int64_t vs, int64_t n)
{
    __m256 p0 = _mm256_set1_ps(p[0]), p1 = _mm256_set1_ps(p[1]), p2 = _mm256_set1_ps(p[2]), p3 = _mm256_set1_ps(p[3]);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 acc = _mm256_fmadd_ps(p0, _mm256_loadu_ps(v + i), _mm256_loadu_ps(y + i));
        acc = _mm256_fmadd_ps(p1, _mm256_loadu_ps(v + vs + i), acc);
        acc = _mm256_fmadd_ps(p2, _mm256_loadu_ps(v + 2 * vs + i), acc);
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(p3, _mm256_loadu_ps(v + 3 * vs + i), acc));
    }
    for (; i < n; i++) y[i] += p[0] * v[i] + p[1] * v[vs + i] + p[2] * v[2 * vs + i] + p[3] * v[3 * vs + i];
}
__attribute__((target("avx2,fma"))) static void scal_avx2(float *y, float a, int64_t n)
{
    __m256 va = _mm256_set1_ps(a);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(y + i, _mm256_mul_ps(va, _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] *= a;
}

__attribute__((target("avx512f"))) static float dot_avx512(const float *a, const float *b, int64_t n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        s0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), s0);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
}
__attribute__((target("avx512f"))) static void axpy_avx512(float *y, float a, const float *x, int64_t n)
{
    __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(va, _mm512_maskz_loadu_ps(m, x + i), _mm512_maskz_loadu_ps(m, y + i)));
    }
}
__attribute__((target("avx512f"))) static void dot4_avx512(const float *q, const float *k, int64_t ks, int64_t n, float *out)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(), s3 = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 qv = _mm512_maskz_loadu_ps(m, q + i);
        s0 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k + i), s0);
        s1 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k + ks + i), s1);
        s2 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k + 2 * ks + i), s2);
        s3 = _mm512_fmadd_ps(qv, _mm512_maskz_loadu_ps(m, k + 3 * ks + i), s3);
    }
    out[0] = _mm512_reduce_add_ps(s0), out[1] = _mm512_reduce_add_ps(s1);
    out[2] = _mm512_reduce_add_ps(s2), out[3] = _mm512_reduce_add_ps(s3);
}
__attribute__((target("avx512f"))) static void axpy4_avx512(float *y, const float *p, const float *v, int64_t vs, int64_t n)
{
    __m512 p0 = _mm512_set1_ps(p[0]), p1 = _mm512_set1_ps(p[1]), p2 = _mm512_set1_ps(p[2]), p3 = _mm512_set1_ps(p[3]);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        __m512 acc = _mm512_fmadd_ps(p0, _mm512_maskz_loadu_ps(m, v + i), _mm512_maskz_loadu_ps(m, y + i));
        acc = _mm512_fmadd_ps(p1, _mm512_maskz_loadu_ps(m, v + vs + i), acc);
        acc = _mm512_fmadd_ps(p2, _mm512_maskz_loadu_ps(m, v + 2 * vs + i), acc);
        _mm512_mask_storeu_ps(y + i, m, _mm512_fmadd_ps(p3, _mm512_maskz_loadu_ps(m, v + 3 * vs + i), acc));
    }
}
__attribute__((target("avx512f"))) static void scal_avx512(float *y, float a, int64_t n)
{
    __m512 va = _mm512_set1_ps(a);
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 m = n - i >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(va, _mm512_maskz_loadu_ps(m, y + i)));
    }
}
#endif

static att_vec att_vec_select(void)
{
    att_vec v = {dot_portable, dot4_portable, axpy4_portable, axpy_portable, scal_portable};
#ifdef ATT_X86
    cpu_simd lvl = cpu_simd_level();
    if (lvl >= CPU_SIMD_AVX2) v = (att_vec){dot_avx2, dot4_avx2, axpy4_avx2, axpy_avx2, scal_avx2};
    if (lvl >= CPU_SIMD_AVX512) v = (att_vec){dot_avx512, dot4_avx512, axpy4_avx512, axpy_avx512, scal_avx512};
#endif
    return v;
}

/* ---- SDPA ---- */


static void *scratch_alloc(const sdpa_ctx *c, sdpa_scratch *s)
{
    int64_t R = c->rows_max;
    size_t bytes = (size_t)R * (3 * sizeof(void *) + 2 * sizeof(int64_t) + 2 * sizeof(float) + sizeof(bool)) +
                   sizeof(float) * (size_t)(R * c->Dv + SDPA_KC + SDPA_KC * (c->D + c->Dv)) + 64;
    if (c->tile) bytes += sizeof(float) * (size_t)(SDPA_QB * (c->D + c->Dv)) + 64;
    char *p = cpu_scratch(CPU_SCRATCH_SDPA_TASK, bytes); /* per thread: each worker has its own */
    if (!p) return NULL;
    char *at = p;
#define TAKE(field, type, n) (s->field = (type *)(void *)at, at += sizeof(type) * (size_t)(n))
    TAKE(q, const float *, R);
    TAKE(o, float *, R);
    TAKE(mrow, const float *, R);
    TAKE(lo, int64_t, R);
    TAKE(hi, int64_t, R);
    TAKE(m, float, R);
    TAKE(l, float, R);
    TAKE(acc, float, R * c->Dv);
    TAKE(sc, float, SDPA_KC);
    TAKE(kbuf, float, SDPA_KC * c->D);
    TAKE(vbuf, float, SDPA_KC * c->Dv);
    if (c->tile) {
        at = (char *)(((uintptr_t)at + 63) & ~(uintptr_t)63);
        TAKE(qt, float, SDPA_QB * c->D);
        TAKE(acct, float, SDPA_QB * c->Dv);
    }
    TAKE(nan, bool, R);
#undef TAKE
    return p;
}

/* Online softmax over keys [jlo, jhi] (clipped per row) for rows 0..R-1. */
static void sdpa_block(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb, int64_t jlo,
                       int64_t jhi)
{
    size_t ke = ct_dtype_block_bytes(c->kdt), ve = ct_dtype_block_bytes(c->vdt);
    int64_t D = c->D, Dv = c->Dv;
    for (int64_t r = 0; r < R; r++) {
        s->m[r] = -INFINITY;
        s->l[r] = 0;
        s->nan[r] = false;
        for (int64_t i = 0; i < Dv; i++) s->acc[r * Dv + i] = 0;
    }
    int64_t tlo = INT64_MAX, thi = -1;
    for (int64_t r = 0; r < R; r++) {
        int64_t a = s->lo[r] > jlo ? s->lo[r] : jlo, z = s->hi[r] < jhi ? s->hi[r] : jhi;
        if (a > z) continue;
        if (a < tlo) tlo = a;
        if (z > thi) thi = z;
    }
    for (int64_t j0 = tlo; j0 <= thi; j0 += SDPA_KC) {
        int64_t j1 = j0 + SDPA_KC - 1 < thi ? j0 + SDPA_KC - 1 : thi; /* inclusive */
        bool kdone = false, vdone = false;
        for (int64_t r = 0; r < R; r++) {
            int64_t a = s->lo[r] > j0 ? s->lo[r] : j0, z = s->hi[r] < j1 ? s->hi[r] : j1;
            if (a < jlo) a = jlo;
            if (z > jhi) z = jhi;
            if (a > z) continue;
            const float *kp;
            int64_t kst;
            if (c->kdt == CT_F16) {
                if (!kdone)
                    for (int64_t j = j0; j <= j1; j++)
                        cpu_f16_to_f32_row((const uint16_t *)(kb + j * c->ks[2] * (int64_t)ke), s->kbuf + (j - j0) * D, D);
                kdone = true;
                kp = s->kbuf + (a - j0) * D, kst = D;
            } else {
                kp = (const float *)kb + a * c->ks[2], kst = c->ks[2];
            }
            const float *qr = s->q[r], *mr = s->mrow[r];
            float mc = -INFINITY;
            int64_t j = a;
            for (; j + 4 <= z + 1; j += 4) c->f.dot4(qr, kp + (j - a) * kst, kst, D, s->sc + (j - a));
            for (; j <= z; j++) s->sc[j - a] = c->f.dot(qr, kp + (j - a) * kst, D);
            for (j = a; j <= z; j++) {
                float sv = s->sc[j - a] * c->scale;
                if (mr) sv += mr[j * c->ms[3]];
                s->sc[j - a] = sv;
                if (sv > mc) mc = sv;
                else if (sv != sv) s->nan[r] = true;
            }
            if (mc == -INFINITY) continue;
            float *acc = s->acc + r * Dv;
            if (mc > s->m[r]) {
                float alpha = expf(s->m[r] - mc);
                if (s->l[r] > 0) {
                    c->f.scal(acc, alpha, Dv);
                    s->l[r] *= alpha;
                }
                s->m[r] = mc;
            }
            const float *vp;
            int64_t vst;
            if (c->vdt == CT_F16) {
                if (!vdone)
                    for (int64_t j = j0; j <= j1; j++)
                        cpu_f16_to_f32_row((const uint16_t *)(vb + j * c->vs[2] * (int64_t)ve), s->vbuf + (j - j0) * Dv, Dv);
                vdone = true;
                vp = s->vbuf + (a - j0) * Dv, vst = Dv;
            } else {
                vp = (const float *)vb + a * c->vs[2], vst = c->vs[2];
            }
            float m = s->m[r], l = s->l[r];
            for (j = a; j <= z; j++) l += s->sc[j - a] = expf(s->sc[j - a] - m);
            s->l[r] = l;
            for (j = a; j + 4 <= z + 1; j += 4) c->f.axpy4(acc, s->sc + (j - a), vp + (j - a) * vst, vst, Dv);
            for (; j <= z; j++) c->f.axpy(acc, s->sc[j - a], vp + (j - a) * vst, Dv);
        }
    }
}

/* Sets up rows of task `t` (without the segment index); returns the row count. */
static int64_t sdpa_rows(const sdpa_ctx *c, sdpa_scratch *s, int64_t t, const char **kb, const char **vb)
{
    int64_t b, g, R, h0, qi0;
    if (c->decode) {
        b = t / c->Hkv, g = t % c->Hkv, R = c->G, h0 = g * c->G, qi0 = 0;
    } else {
        int64_t qb = t % c->n_qblk, h = (t / c->n_qblk) % c->Hq;
        b = t / (c->n_qblk * c->Hq), g = h / c->G, h0 = h, qi0 = qb * SDPA_QB;
        R = c->Tq - qi0 < SDPA_QB ? c->Tq - qi0 : SDPA_QB;
    }
    *kb = c->k + (b * c->ks[0] + g * c->ks[1]) * (int64_t)ct_dtype_block_bytes(c->kdt);
    *vb = c->v + (b * c->vs[0] + g * c->vs[1]) * (int64_t)ct_dtype_block_bytes(c->vdt);
    int64_t off = c->Tk - c->Tq;
    for (int64_t r = 0; r < R; r++) {
        int64_t h = c->decode ? h0 + r : h0, qi = c->decode ? 0 : qi0 + r;
        s->q[r] = (const float *)c->q + b * c->qs[0] + h * c->qs[1] + qi * c->qs[2];
        s->o[r] = c->out + ((b * c->Hq + h) * c->Tq + qi) * c->Dv;
        s->mrow[r] = c->mask ? (const float *)c->mask + b * c->ms[0] + h * c->ms[1] + qi * c->ms[2] : NULL;
        int64_t hi = c->causal ? qi + off : c->Tk - 1, lo = c->window > 0 ? qi + off - c->window + 1 : 0;
        s->hi[r] = hi < c->Tk - 1 ? hi : c->Tk - 1;
        s->lo[r] = lo > 0 ? lo : 0;
    }
    return R;
}

static void sdpa_finish_row(float *o, const float *acc, float l, bool nan, int64_t Dv)
{
    float inv = l > 0 ? 1.0f / l : 0.0f;
    for (int64_t i = 0; i < Dv; i++) o[i] = nan ? NAN : acc[i] * inv;
}

static void sdpa_tasks(void *vctx, int64_t b, int64_t e)
{
    sdpa_ctx *c = vctx;
    sdpa_scratch s;
    void *mem = scratch_alloc(c, &s);
    if (!mem) {
        set_status(&c->status, core_err(CT_ERR_OOM, "sdpa: no memory for attention scratch"));
        return;
    }
    for (int64_t t = b; t < e; t++) {
        int64_t task = t / c->n_seg, seg = t % c->n_seg;
        const char *kb, *vb;
        int64_t R = sdpa_rows(c, &s, task, &kb, &vb);
        if (c->tile) {
            sdpa_tile(c, &s, R, kb, vb);
            continue;
        }
        int64_t jlo = seg * c->Tk / c->n_seg, jhi = (seg + 1) * c->Tk / c->n_seg - 1;
        sdpa_block(c, &s, R, kb, vb, jlo, jhi);
        for (int64_t r = 0; r < R; r++) {
            if (c->n_seg == 1) {
                sdpa_finish_row(s.o[r], s.acc + r * c->Dv, s.l[r], s.nan[r], c->Dv);
                continue;
            }
            float *pp = c->part + (t * c->rows_max + r) * (c->Dv + 2);
            memcpy(pp, s.acc + r * c->Dv, sizeof(float) * (size_t)c->Dv);
            pp[c->Dv] = s.nan[r] ? NAN : s.m[r];
            pp[c->Dv + 1] = s.l[r];
        }
    }
}

/* Combines the key segments of decode tasks: rescale each to the common max. */
static void sdpa_merge(void *vctx, int64_t b, int64_t e)
{
    sdpa_ctx *c = vctx;
    int64_t Dv = c->Dv, S = c->n_seg;
    for (int64_t task = b; task < e; task++) {
        int64_t bb = task / c->Hkv, g = task % c->Hkv;
        for (int64_t r = 0; r < c->G; r++) {
            float *o = c->out + (bb * c->Hq + g * c->G + r) * Dv;
            float mx = -INFINITY, l = 0;
            bool nan = false;
            for (int64_t sg = 0; sg < S; sg++) {
                const float *pp = c->part + ((task * S + sg) * c->rows_max + r) * (Dv + 2);
                if (pp[Dv] != pp[Dv]) nan = true;
                else if (pp[Dv] > mx) mx = pp[Dv];
            }
            for (int64_t i = 0; i < Dv; i++) o[i] = 0;
            for (int64_t sg = 0; sg < S && mx > -INFINITY; sg++) {
                const float *pp = c->part + ((task * S + sg) * c->rows_max + r) * (Dv + 2);
                if (!(pp[Dv + 1] > 0)) continue;
                float w = expf(pp[Dv] - mx);
                l += pp[Dv + 1] * w;
                c->f.axpy(o, w, pp, Dv);
            }
            sdpa_finish_row(o, o, l, nan, Dv);
        }
    }
}

static ct_status run_sdpa(ct_device *dev, const ct_op *op)
{
    const ct_tensor *q = op->src[0], *k = op->src[1], *v = op->src[2], *mask = op->src[3], *y = op->dst;
    sdpa_ctx c = {.q = op_data(q, dev), .k = op_data(k, dev), .v = op_data(v, dev),
                  .mask = mask ? op_data(mask, dev) : NULL, .out = op_data(y, dev), .kdt = k->dtype, .vdt = v->dtype,
                  .B = q->shape[0], .Hq = q->shape[1], .Hkv = k->shape[1], .Tq = q->shape[2], .Tk = k->shape[2],
                  .D = q->shape[3], .Dv = v->shape[3], .scale = (float)op->p.attn.scale, .causal = op->p.attn.causal,
                  .window = op->p.attn.window, .f = att_vec_select(), .status = CT_OK};
    if (op->n_src > 4 && op->src[4]) { /* the attended length, read now: it changes per decode step */
        const ct_tensor *lt = op->src[4];
        const void *pl = op_data(lt, dev);
        int64_t L = lt->dtype == CT_I32 ? *(const int32_t *)pl : *(const int64_t *)pl;
        if (L < 0 || L > c.Tk)
            return core_err(CT_ERR_RANGE, "sdpa: attended length %lld is outside [0, %lld] (k %s)", (long long)L,
                            (long long)c.Tk, SHAPE_STR(k));
        c.Tk = L;
    }
    if (ct_tensor_numel(y) == 0) return CT_OK;
    for (int i = 0; i < 4; i++) {
        c.qs[i] = q->stride[i], c.ks[i] = k->stride[i], c.vs[i] = v->stride[i];
        c.ms[i] = mask ? mask->stride[i] : 0;
    }
    c.G = c.Hq / c.Hkv;
    c.decode = c.Tq == 1;
    c.n_qblk = (c.Tq + SDPA_QB - 1) / SDPA_QB;
    c.rows_max = c.decode ? c.G : SDPA_QB;
    c.tile = sdpa_tile_fits(&c);
    int64_t n_tasks = c.decode ? c.B * c.Hkv : c.B * c.Hq * c.n_qblk;
    /* Decode with few KV heads splits the keys into segments so every thread has work. The split
     * depends on the sizes only, never on the thread count: merging segments rounds differently from
     * one pass, and sampled text at a fixed seed must not change with -t. */
    c.n_seg = 1;
    if (c.decode && n_tasks < SDPA_DECODE_TASKS && c.Tk >= 2 * SDPA_KC) {
        c.n_seg = (SDPA_DECODE_TASKS + n_tasks - 1) / n_tasks;
        if (c.n_seg > c.Tk / SDPA_KC) c.n_seg = c.Tk / SDPA_KC;
    }
    if (c.n_seg > 1) {
        c.part = cpu_scratch(CPU_SCRATCH_SDPA_PART, sizeof(float) * (size_t)(n_tasks * c.n_seg * c.rows_max * (c.Dv + 2)));
        if (!c.part) return core_err(CT_ERR_OOM, "sdpa: no memory for %lld partial results", (long long)(n_tasks * c.n_seg));
    }
    cpu_parallel_for(n_tasks * c.n_seg, 1, sdpa_tasks, &c);
    if (c.n_seg > 1 && c.status == CT_OK) cpu_parallel_for(n_tasks, 1, sdpa_merge, &c);
    return c.status;
}

ct_status cpu_run_attention(ct_device *dev, const ct_op *op)
{
    switch (op->kind) {
    case CT_OP_ROPE: return run_rope(dev, op);
    case CT_OP_SDPA: return run_sdpa(dev, op);
    default: break;
    }
    return core_err(CT_ERR_UNSUPPORTED, "cpu: %s is not an attention op", op_kind_name(op->kind));
}
