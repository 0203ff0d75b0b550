/* Prefill attention tiles on AVX2: attention_tile.c's scheme on 8-lane vectors. A task's
 * 16 query rows run as two halves of 8 rows, each against all its keys in chunks of 8:
 * a key's 8 scores are D FMAs with its elements broadcast, the online softmax is lane-wise
 * (compare results as lane masks in place of AVX-512's mask registers), and P . V
 * accumulates acc transposed ([Dv][8]). 16 ymm registers hold a chunk's 8 score vectors,
 * or its 8 probability vectors and the accumulator being updated. */
#include <math.h>
#include <string.h>

#include "backends/cpu/attention.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define T2_TARGET __attribute__((target("avx2,fma")))
#define T2_INLINE static inline __attribute__((always_inline, target("avx2,fma")))

/* exp for x <= 0 (0 below FLT_MIN, NaN for NaN): simd_exp.h on AVX2 */
#define EWS(name) t2_##name
#define EWS_FN T2_INLINE
#include "backends/cpu/simd_vocab_avx2.h"
#include "backends/cpu/simd_exp.h"
#include "backends/cpu/simd_vocab_undef.h"
#undef EWS
#undef EWS_FN

typedef struct t2_state {
    __m256 m, l, nan;   /* running max and sum; all-ones lanes: a NaN score was seen */
    __m256i lo, hi;     /* each row's key range */
} t2_state;

/* sc[u] lane r = q_r . k_u * scale for the 8 keys in kbuf; qt rows are 16 floats apart */
T2_INLINE void t2_scores(const float *qt, const float *kbuf, int64_t D, float scale, __m256 sc[8])
{
#pragma GCC unroll 8
    for (int u = 0; u < 8; u++) sc[u] = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d++) {
        __m256 qv = _mm256_load_ps(qt + d * 16);
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) sc[u] = _mm256_fmadd_ps(qv, _mm256_broadcast_ss(kbuf + u * D + d), sc[u]);
    }
    __m256 vs = _mm256_set1_ps(scale);
#pragma GCC unroll 8
    for (int u = 0; u < 8; u++) sc[u] = _mm256_mul_ps(sc[u], vs);
}

/* Probabilities against the new running max (0 outside a row's range); returns the factor
 * the old acc and l take. As tile_softmax in attention_tile.c. */
T2_INLINE __m256 t2_softmax(t2_state *st, __m256 sc[8], int64_t j0)
{
    __m256 in[8], mc = _mm256_set1_ps(-INFINITY);
#pragma GCC unroll 8
    for (int u = 0; u < 8; u++) {
        __m256i j = _mm256_set1_epi32((int)(j0 + u));
        __m256i out = _mm256_or_si256(_mm256_cmpgt_epi32(st->lo, j), _mm256_cmpgt_epi32(j, st->hi));
        in[u] = _mm256_castsi256_ps(_mm256_xor_si256(out, _mm256_set1_epi32(-1)));
        st->nan = _mm256_or_ps(st->nan, _mm256_and_ps(in[u], _mm256_cmp_ps(sc[u], sc[u], _CMP_UNORD_Q)));
        mc = _mm256_blendv_ps(mc, _mm256_max_ps(mc, sc[u]), in[u]); /* max returns a NaN second operand */
    }
    __m256 mnew = _mm256_max_ps(st->m, mc);
    __m256 live = _mm256_cmp_ps(mnew, _mm256_set1_ps(-INFINITY), _CMP_NEQ_OQ);
    __m256 alpha = _mm256_blendv_ps(_mm256_set1_ps(1.0f), t2_v_exp_neg(_mm256_sub_ps(st->m, mnew)), live);
    __m256 sum = _mm256_setzero_ps();
#pragma GCC unroll 8
    for (int u = 0; u < 8; u++) {
        sc[u] = _mm256_and_ps(_mm256_and_ps(in[u], live), t2_v_exp_neg(_mm256_sub_ps(sc[u], mnew)));
        sum = _mm256_add_ps(sum, sc[u]);
    }
    st->l = _mm256_fmadd_ps(st->l, alpha, sum);
    st->m = mnew;
    return alpha;
}

/* acc[dv] = acc[dv] * alpha + sum_u p[u] * v_u[dv], lane r for row r */
T2_INLINE void t2_pv(float *acc, const __m256 p[8], __m256 alpha, const float *vbuf, int64_t Dv)
{
    for (int64_t dv = 0; dv < Dv; dv++) {
        __m256 a = _mm256_mul_ps(_mm256_load_ps(acc + dv * 8), alpha);
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) a = _mm256_fmadd_ps(p[u], _mm256_broadcast_ss(vbuf + u * Dv + dv), a);
        _mm256_store_ps(acc + dv * 8, a);
    }
}

/* Rows 8h .. 8h+7 of the task (those below R) against their keys. */
T2_TARGET static void t2_half(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb,
                              const sdpa_tile_rows *tr, int h)
{
    int64_t D = c->D, Dv = c->Dv, tlo = INT64_MAX, thi = -1;
    for (int r = 8 * h; r < 8 * h + 8; r++)
        if (tr->lo[r] <= tr->hi[r]) {
            if (tr->lo[r] < tlo) tlo = tr->lo[r];
            if (tr->hi[r] > thi) thi = tr->hi[r];
        }
    float *acc = s->acct;
    t2_state st = {_mm256_set1_ps(-INFINITY), _mm256_setzero_ps(), _mm256_setzero_ps(),
                   _mm256_loadu_si256((const __m256i *)(tr->lo + 8 * h)), _mm256_loadu_si256((const __m256i *)(tr->hi + 8 * h))};
    memset(acc, 0, sizeof(float) * (size_t)(8 * Dv));
    for (int64_t j0 = tlo; j0 <= thi; j0 += 8) {
        int64_t n = thi - j0 + 1 < 8 ? thi - j0 + 1 : 8;
        __m256 p[8];
        sdpa_tile_load(kb, c->ks[2], c->kdt, j0, n, D, 8, s->kbuf);
        t2_scores(s->qt + 8 * h, s->kbuf, D, c->scale, p);
        __m256 alpha = t2_softmax(&st, p, j0);
        sdpa_tile_load(vb, c->vs[2], c->vdt, j0, n, Dv, 8, s->vbuf);
        t2_pv(acc, p, alpha, s->vbuf, Dv);
    }
    float l[8];
    _mm256_storeu_ps(l, st.l);
    int nan = _mm256_movemask_ps(st.nan);
    for (int r = 8 * h; r < 8 * h + 8 && r < R; r++) {
        float inv = l[r - 8 * h] > 0 ? 1.0f / l[r - 8 * h] : 0.0f;
        bool nan_row = (nan >> (r - 8 * h)) & 1;
        for (int64_t dv = 0; dv < Dv; dv++) s->o[r][dv] = nan_row ? NAN : acc[dv * 8 + r - 8 * h] * inv;
    }
}

void sdpa_tile_avx2(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb)
{
    sdpa_tile_rows tr;
    sdpa_tile_setup(c, s, R, &tr);
    for (int h = 0; h < 2 && 8 * h < R; h++) t2_half(c, s, R, kb, vb, &tr, h);
}
#else
void sdpa_tile_avx2(const sdpa_ctx *c, sdpa_scratch *s, int64_t R, const char *kb, const char *vb)
{
    (void)c, (void)s, (void)R, (void)kb, (void)vb;
}
#endif
