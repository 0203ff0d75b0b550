/* Prefill attention as 16 x 16 tiles (AVX-512): the task's 16 query rows sit in the
 * lanes of every vector, so nothing is ever summed across lanes.
 *
 * The general kernel (attention.c) dots one query row with four keys at a time and
 * reduces each dot across the lanes (~10 instructions a score), then takes a scalar
 * expf per score: 35-45 GFLOP/s on 2 threads for TinyLlama's prompts. Here q is
 * transposed once per task (qt[d] holds element d of the 16 rows), so a key's 16 scores
 * are D FMAs with the key's elements broadcast; the online softmax runs on those
 * vectors (a key's max, exp and sum are lane-wise: one row per lane); and P . V
 * accumulates acc transposed (acc[dv] holds output element dv of the 16 rows) with V's
 * elements broadcast. The output is transposed back once per task.
 *
 * AVX2 machines run the same scheme on 8-lane vectors (attention_tile_avx2.c).
 *
 * Same results as the general kernel up to f32 rounding: another summation order, and
 * exp from a degree-7 polynomial after range reduction (error ~2e-7 relative, against
 * expf's 1 ulp). Rows with no key give zeros and a NaN score gives a NaN row, as there. */
#include <math.h>
#include <string.h>

#include "backends/cpu/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define TILE_TARGET __attribute__((target("avx512f")))
#define TILE_INLINE static inline __attribute__((always_inline, target("avx512f")))

bool sdpa_tile_fits(const sdpa_ctx *c)
{
    return cpu_simd_level() >= CPU_SIMD_AVX2 && !c->decode && !c->mask && c->Tk <= INT32_MAX &&
           (c->kdt == CT_F32 || c->kdt == CT_F16) && (c->vdt == CT_F32 || c->vdt == CT_F16);
}

/* exp: the element-wise ops' polynomial (simd_exp.h), instantiated for AVX-512 here;
 * v_exp_neg takes x <= 0 (0 below -104, NaN for NaN). */
#define EWS(name) tile_##name
#define EWS_FN TILE_INLINE
#include "backends/cpu/simd_vocab_avx512.h"
#include "backends/cpu/simd_exp.h"
#include "backends/cpu/simd_vocab_undef.h"
#undef EWS
#undef EWS_FN
#define exp_le0 tile_v_exp_neg

/* Keys (or values) j0 .. j0+n-1 as f32 rows of width `w` in buf, zero rows up to `pad`:
 * padding must be finite, since it is multiplied by probabilities of 0. */
void sdpa_tile_load(const char *base, int64_t stride, ct_dtype dt, int64_t j0, int64_t n, int64_t w, int64_t pad, float *buf)
{
    size_t es = ct_dtype_block_bytes(dt);
    for (int64_t j = 0; j < n; j++) {
        const char *row = base + (j0 + j) * stride * (int64_t)es;
        if (dt == CT_F16) cpu_f16_to_f32_row((const uint16_t *)row, buf + j * w, w);
        else memcpy(buf + j * w, row, sizeof(float) * (size_t)w);
    }
    if (n < pad) memset(buf + n * w, 0, sizeof(float) * (size_t)((pad - n) * w));
}

/* q of the task's rows transposed into s->qt ([D][16], zero past R), each row's key range
 * (empty past R) and the range all rows span. */
void sdpa_tile_setup(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, sdpa_tile_rows *tr)
{
    tr->tlo = INT64_MAX, tr->thi = -1;
    for (int r = 0; r < 16; r++) {
        bool live = r < R && s->lo[r] <= s->hi[r];
        tr->lo[r] = live ? (int32_t)s->lo[r] : INT32_MAX;
        tr->hi[r] = live ? (int32_t)s->hi[r] : -1;
        if (live && s->lo[r] < tr->tlo) tr->tlo = s->lo[r];
        if (live && s->hi[r] > tr->thi) tr->thi = s->hi[r];
        for (int64_t d = 0; d < c->D; d++) s->qt[d * 16 + r] = r < R ? s->q[r][d * c->qs[3]] : 0.0f;
    }
}

/* Scores of the 16 keys in kbuf against the 16 rows of qt, scaled: sc[u] lane r = q_r . k_u * scale. */
TILE_INLINE void tile_scores(const float *qt, const float *kbuf, int64_t D, float scale, __m512 sc[16])
{
#pragma GCC unroll 16
    for (int u = 0; u < 16; u++) sc[u] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
        __m512 qv = _mm512_load_ps(qt + d * 16);
#pragma GCC unroll 16
        for (int u = 0; u < 16; u++) sc[u] = _mm512_fmadd_ps(qv, _mm512_set1_ps(kbuf[u * D + d]), sc[u]);
    }
    __m512 vs = _mm512_set1_ps(scale);
#pragma GCC unroll 16
    for (int u = 0; u < 16; u++) sc[u] = _mm512_mul_ps(sc[u], vs);
}

/* Running softmax state of the 16 rows, one per lane. */
typedef struct tile_state {
    __m512 m, l;
    __m512i lo, hi;     /* each row's key range */
    __mmask16 nan;
} tile_state;

/* Turns the chunk's scores into probabilities against the new running max (sc[u] = 0 where
 * key j0+u is outside a row's range); returns the factor the old acc and l take. */
TILE_INLINE __m512 tile_softmax(tile_state *st, __m512 sc[16], int64_t j0)
{
    __mmask16 in[16];
    __m512 mc = _mm512_set1_ps(-INFINITY);
#pragma GCC unroll 16
    for (int u = 0; u < 16; u++) {
        __m512i j = _mm512_set1_epi32((int)(j0 + u));
        in[u] = _mm512_cmp_epi32_mask(st->lo, j, _MM_CMPINT_LE) & _mm512_cmp_epi32_mask(j, st->hi, _MM_CMPINT_LE);
        st->nan |= _mm512_mask_cmp_ps_mask(in[u], sc[u], sc[u], _CMP_UNORD_Q);
        mc = _mm512_mask_max_ps(mc, in[u], mc, sc[u]);
    }
    __m512 mnew = _mm512_max_ps(st->m, mc);
    __mmask16 live = _mm512_cmp_ps_mask(mnew, _mm512_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    /* rows with no key yet keep alpha 1 (their acc and l are 0); exp(-inf) lanes give 0 */
    __m512 alpha = _mm512_mask_blend_ps(live, _mm512_set1_ps(1.0f), exp_le0(_mm512_sub_ps(st->m, mnew)));
    __m512 sum = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int u = 0; u < 16; u++) {
        sc[u] = _mm512_maskz_mov_ps(in[u] & live, exp_le0(_mm512_sub_ps(sc[u], mnew)));
        sum = _mm512_add_ps(sum, sc[u]);
    }
    st->l = _mm512_fmadd_ps(st->l, alpha, sum);
    st->m = mnew;
    return alpha;
}

/* acc[dv] = acc[dv] * alpha + sum_u p[u] * v_u[dv], lane r for row r. */
TILE_INLINE void tile_pv(float *acc, const __m512 p[16], __m512 alpha, const float *vbuf, int64_t Dv)
{
    for (int64_t dv = 0; dv < Dv; dv++) {
        __m512 a = _mm512_mul_ps(_mm512_load_ps(acc + dv * 16), alpha);
#pragma GCC unroll 16
        for (int u = 0; u < 16; u++) a = _mm512_fmadd_ps(p[u], _mm512_set1_ps(vbuf[u * Dv + dv]), a);
        _mm512_store_ps(acc + dv * 16, a);
    }
}

TILE_TARGET static void tile512(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb)
{
    int64_t D = c->D, Dv = c->Dv;
    float *acc = s->acct;
    sdpa_tile_rows tr;
    sdpa_tile_setup(c, s, R, &tr);
    tile_state st = {_mm512_set1_ps(-INFINITY), _mm512_setzero_ps(), _mm512_loadu_si512(tr.lo), _mm512_loadu_si512(tr.hi), 0};
    memset(acc, 0, sizeof(float) * (size_t)(16 * Dv));
    for (int64_t j0 = tr.tlo; j0 <= tr.thi; j0 += 16) {
        int64_t n = tr.thi - j0 + 1 < 16 ? tr.thi - j0 + 1 : 16;
        __m512 p[16];
        sdpa_tile_load(kb, c->ks[2], c->kdt, j0, n, D, 16, s->kbuf);
        tile_scores(s->qt, s->kbuf, D, c->scale, p);
        __m512 alpha = tile_softmax(&st, p, j0);
        sdpa_tile_load(vb, c->vs[2], c->vdt, j0, n, Dv, 16, s->vbuf);
        tile_pv(acc, p, alpha, s->vbuf, Dv);
    }
    float l[16], inv[16];
    _mm512_storeu_ps(l, st.l);
    for (int r = 0; r < 16; r++) inv[r] = l[r] > 0 ? 1.0f / l[r] : 0.0f;
    for (int64_t r = 0; r < R; r++) {
        bool nan = (st.nan >> r) & 1;
        for (int64_t dv = 0; dv < Dv; dv++) s->o[r][dv] = nan ? NAN : acc[dv * 16 + r] * inv[r];
    }
}

void sdpa_tile(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb)
{
    if (cpu_simd_level() >= CPU_SIMD_AVX512) tile512(c, s, R, kb, vb);
    else sdpa_tile_avx2(c, s, R, kb, vb);
}
#else
bool sdpa_tile_fits(const sdpa_ctx *c)
{
    (void)c;
    return false;
}

void sdpa_tile(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb)
{
    (void)c, (void)s, (void)R, (void)kb, (void)vb;
}
#endif
