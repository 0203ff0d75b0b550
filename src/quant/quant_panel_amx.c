/* Prompts on AMX-INT8 tiles (Sapphire Rapids and later): Q6_K, Q4_K and Q5_K with their sub-block
 * scales folded into the weights, and the 32-element formats (end of the file) scaled per block.
 *
 * A tile product (tdpb*d) sums 64 k at a time, so a scale that changes every 16 k (Q6_K's
 * sub-blocks) cannot be applied between its products. Storing each sub-block's sums and
 * scaling them in f32 made the tiles no faster than the VNNI panels (measured on the GPU
 * machine's Xeon: a 16 x 16 x 16 group stored and scaled took 33.5 ns against 5.9 ns for
 * its loads and product, ~122 multiply-adds a ns against VNNI's ~133). Here the packer
 * folds the sub-block scale into the weight instead: w' = (q - 32) * scale is an integer
 * of at most 13 bits, split as w' = 64 hi + lo with hi in [-64, 64] (signed bytes) and lo
 * in [0, 63] (unsigned bytes). Two products per 64 k (tdpbssd on hi, tdpbsud on lo) then
 * give the exact integer sum of a whole 256-element block, scaled once per block by the
 * activation's d and the weight's d. (Micro-benchmark: ~660 useful multiply-adds a ns.)
 *
 * Panel block (16 weight rows, 256 k): 64 rows of hi (row t: bytes 4t..4t+3 of the 16
 * weight rows, a tile of B for 64 k every 16 rows), 64 rows of lo, then the 16 rows' d in
 * f32. One gemm call takes up to 128 activation rows, 32 (two tiles of A: the Q8_K quants
 * copied into the rows' aux, qa_aux_q8) a step; sums in four tiles (hi / lo x two row tiles).
 *
 * Integer sums are exact (|sum| <= 4096 * 127 * 256 < 2^31); results agree with the row
 * dots to f32 rounding.
 *
 * Q4_K and Q5_K (w = d sc_j q - dmin m_j over sub-blocks j of 32) fold their sub-block
 * scales the same way: sc_j q <= 63 * 31 splits into hi in [0, 30] and lo in [0, 63]. The
 * mins' part, sum_j m_j bsum_j with bsum_j the activation's sum over sub-block j (an
 * integer, |.| <= 8 * 63 * 4064), takes four vpdpwssd a row on the vector unit: int16
 * pairs of mins [pair][weight row] in the panel against the activation's bsum pairs. */
#include <stddef.h>
#include <string.h>

#include "core/cpuid.h"
#include "quant/quant_impl.h"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include "quant/quant_avx512_isa.h"
#include "quant/quant_panel_avx512.h"
#define QA_X86 1
#endif

#define QA_GROUP 32                      /* activation rows a step takes: two row tiles */
#define QA_MAX_A 128                     /* activation rows a gemm call takes: four groups */
#define QA_KB 4                          /* blocks a k-chunk */
#define QA_TERM (64 * 64)                /* bytes of hi (or lo) per block */
#define QA_BLOCK_BYTES (2 * QA_TERM + 64) /* hi, lo, 16 f32 d */
#define QA_K4_BLOCK_BYTES (2 * QA_TERM + 128 + 256) /* hi, lo, 16 f32 d, 16 f32 dmin, 4 x 16 min pairs */
#define QA_AUX (QKK + 64) /* aux bytes a block: quants, bsum pairs, d (qa_aux_q8) */

#ifdef QA_X86
#define QA_ATTR target("amx-tile,amx-int8,avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#define QA_FN static __attribute__((QA_ATTR))
#define QA_INLINE static inline __attribute__((always_inline, QA_ATTR))

/* Terms of 64 transposed quant bytes q (dword lane i: 4 quants of weight row i, unsigned)
 * times row i's scale: se holds (s_i, 0, s_i, 0) as bytes in lane i, so the even and the odd
 * quants' products come out of two vpmaddubsw as int16 (|v| < 2^13, no saturation), less
 * off (Q6_K: 32 s_i in each int16; the quants' offset). hi = v >> 6 and lo = v & 63 are
 * put back in byte order with a bitwise select, without narrowing ops, which run on one
 * port only (the first packer narrowed 16-bit products and transposed both results: its
 * packing took a third of a K = 5632 product's time on the GPU host's Xeon). */
QA_INLINE void qa_terms(__m512i q, __m512i se, __m512i off, const bool offset, __m512i *hi, __m512i *lo)
{
    const __m512i even = _mm512_set1_epi16(0x00FF);
    __m512i ve = _mm512_maddubs_epi16(q, se), vo = _mm512_maddubs_epi16(q, _mm512_slli_epi16(se, 8));
    if (offset) ve = _mm512_sub_epi16(ve, off), vo = _mm512_sub_epi16(vo, off);
    *hi = _mm512_ternarylogic_epi32(even, _mm512_srai_epi16(ve, 6), _mm512_slli_epi16(_mm512_srai_epi16(vo, 6), 8), 0xCA);
    *lo = _mm512_and_si512(_mm512_ternarylogic_epi32(even, ve, _mm512_slli_epi16(vo, 8), 0xCA), _mm512_set1_epi8(63));
}

/* Chunk c of block b of the 16 rows (zero rows past nw) as hi and lo B-tile rows: vector j
 * (quants 64c + 4j .. +3 of each row) scaled by sub-block vector se[sub(j)]. */
QA_INLINE void qa_pack_chunk(const void *vw, size_t ws, int nw, int64_t b, int c, const p_kquant t, const __m512i *se,
                             const __m512i *off, uint8_t *dst)
{
    __m512i r[16];
    p_kchunk_rows(vw, ws, nw, b, c, t, r);
    for (int j = 0; j < 16; j++) {
        int sub = t == P_Q6_K ? 4 * c + j / 4 : 2 * c + j / 8; /* 16 or 32 quants a sub-block */
        __m512i hi, lo;
        qa_terms(r[j], se[sub], t == P_Q6_K ? off[sub] : se[sub], t == P_Q6_K, &hi, &lo);
        _mm512_storeu_si512(dst + (size_t)(16 * c + j) * 64, hi);
        _mm512_storeu_si512(dst + QA_TERM + (size_t)(16 * c + j) * 64, lo);
    }
}

/* Sub-block scale vectors from 16 rows' scale bytes sc[row] (signed: Q6_K): se[s] holds
 * (s_i, 0, s_i, 0) as bytes in lane i, off[s] (when asked) 32 s_i in both int16 halves. */
QA_INLINE void qa_scale_vectors(__m128i sc[16], int n, __m512i *se, __m512i *off)
{
    qx_transpose16_bytes(sc);
    for (int s = 0; s < n; s++) {
        __m512i u = _mm512_cvtepu8_epi32(sc[s]);
        se[s] = _mm512_or_si512(u, _mm512_slli_epi32(u, 16));
        if (off) {
            __m512i o = _mm512_and_si512(_mm512_slli_epi32(_mm512_cvtepi8_epi32(sc[s]), 5), _mm512_set1_epi32(0xFFFF));
            off[s] = _mm512_or_si512(o, _mm512_slli_epi32(o, 16));
        }
    }
}

QA_FN void qa_pack_q6_k(const void *vw, size_t ws, int nw, int64_t K, void *vpanel)
{
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * QA_BLOCK_BYTES;
        float *d = (float *)(dst + 2 * QA_TERM);
        __m128i sc[16];
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * sizeof(blk_q6_k), sizeof(blk_q6_k));
        for (int i = 0; i < 16; i++) {
            const blk_q6_k *w = i < nw ? (const blk_q6_k *)((const char *)vw + (size_t)i * ws) + b : NULL;
            d[i] = w ? qf16(w->d) : 0.0f;
            sc[i] = w ? _mm_loadu_si128((const __m128i *)w->scales) : _mm_setzero_si128();
        }
        __m512i sv[16], ov[16];
        qa_scale_vectors(sc, 16, sv, ov);
        for (int c = 0; c < 4; c++) qa_pack_chunk(vw, ws, nw, b, c, P_Q6_K, sv, ov, dst);
    }
}

/* Q4_K / Q5_K panel block: hi, lo, the 16 rows' d and dmin (f32), then the mins as int16
 * pairs, vector p holding (m_2p, m_2p+1) of each row. */
QA_INLINE void qa_pack_k4(const void *vw, size_t ws, int nw, int64_t K, void *vpanel, const bool five)
{
    const size_t bsz = five ? sizeof(blk_q5_k) : sizeof(blk_q4_k);
    uint8_t *panel = vpanel;
    for (int64_t b = 0; b < K / QKK; b++) {
        uint8_t *dst = panel + (size_t)b * QA_K4_BLOCK_BYTES;
        float *d = (float *)(dst + 2 * QA_TERM), *dmin = d + 16;
        int32_t *mins = (int32_t *)(dmin + 16);
        uint8_t sm[16][16]; /* row: 8 scales, 8 mins */
        if (b + 1 < K / QKK) p_prefetch_rows(vw, ws, nw, (size_t)(b + 1) * bsz, bsz);
        p_k4_heads(vw, ws, nw, b, bsz, sm, d, dmin);
        __m128i sc[16];
        for (int i = 0; i < 16; i++) sc[i] = _mm_loadu_si128((const __m128i *)sm[i]);
        __m512i sv[8];
        qa_scale_vectors(sc, 8, sv, NULL);
        for (int c = 0; c < 4; c++) qa_pack_chunk(vw, ws, nw, b, c, five ? P_Q5_K : P_Q4_K, sv, NULL, dst);
        p_k4_min_pairs((const uint8_t(*)[16])sm, mins);
    }
}


QA_FN void qa_pack_q4_k(const void *vw, size_t ws, int nw, int64_t K, void *panel) { qa_pack_k4(vw, ws, nw, K, panel, false); }
QA_FN void qa_pack_q5_k(const void *vw, size_t ws, int nw, int64_t K, void *panel) { qa_pack_k4(vw, ws, nw, K, panel, true); }

/* The activation row in its aux, block after block (QA_AUX bytes each): the Q8_K quants,
 * then the block's bsum pairs (four int32, p_bsum_pairs) and d. Aux rows are 64-byte
 * aligned, so a tile row is one cache line; read in place, a Q8_K row's 64 quants straddle
 * two lines (blocks are 292 bytes), and the tiles loaded them from there at a fraction of
 * the rate. The pairs and d are made here once per activation row: made in the gemm, they
 * cost every 16-row panel ~5 vector ops per row and block, on the vector unit that scales
 * the tiles' sums and bounds a Q4_K / Q5_K step. */
QA_FN void qa_aux_q8(const void *va, int64_t K, float *aux)
{
    const blk_q8_k *a = va;
    for (int64_t b = 0; b < K / QKK; b++) {
        char *o = (char *)aux + b * QA_AUX;
        memcpy(o, a[b].qs, QKK);
        memset(o + QKK, 0, QA_AUX - QKK);
        p_bsum_pairs(&a[b], (int32_t *)(o + QKK));
        memcpy(o + QKK + 16, &a[b].d, sizeof(float));
    }
}

/* Tiles 0, 1: rows 0-15's hi and lo sums; 2, 3: rows 16-31's; 4, 5: the two row tiles of
 * activation quants (64 bytes a row); 6, 7: hi and lo weights (16 rows of 64 bytes). With
 * na <= 16 the second row tile repeats the first (its sums are not used). The config
 * goes through memory the compiler must keep: GCC 12 drops stores that only ldtilecfg
 * reads. */
QA_FN void qa_configure(int na)
{
    cpu_amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    int r0 = na < 16 ? na : 16, r1 = na <= 16 ? r0 : na - 16;
    for (int t = 0; t < 8; t++) c.colsb[t] = 64;
    c.rows[0] = c.rows[1] = c.rows[4] = (uint8_t)r0;
    c.rows[2] = c.rows[3] = c.rows[5] = (uint8_t)r1;
    c.rows[6] = c.rows[7] = 16;
    __asm__ volatile("" : : "m"(c) : "memory");
    _tile_loadconfig(&c);
}

/* The block's integer sums per activation row: 64 hi + lo of the weights' terms. */
QA_INLINE __m512i qa_sum(const int32_t (*buf)[16][16], int m)
{
    int t = m >> 4, r = m & 15;
    return _mm512_add_epi32(_mm512_slli_epi32(_mm512_load_si512(buf[2 * t][r]), 6), _mm512_load_si512(buf[2 * t + 1][r]));
}

/* A step row's bsum pairs and d in its aux (ax: row 0's, rows row bytes apart). */
#define QA_BP(ax, row, m) ((const int32_t *)((ax) + (size_t)(m) * (row)))
#define QA_DA(ax, row, m) (*(const float *)((ax) + (size_t)(m) * (row) + 16))

/* Q6_K: acc[m] += d_a[m] * d_w * (64 hi + lo) for the block whose sums are in buf (rows
 * past na are zero in buf and add nothing that is stored). */
QA_INLINE void qa_scale(const int32_t (*buf)[16][16], const uint8_t *pq, const char *ax, size_t row, int na,
                        float (*acc)[16])
{
    __m512 w = _mm512_loadu_ps((const float *)(pq + 2 * QA_TERM));
    for (int m = 0; m < na; m++) {
        __m512 p = _mm512_mul_ps(_mm512_cvtepi32_ps(qa_sum(buf, m)), w);
        _mm512_store_ps(acc[m], _mm512_fmadd_ps(p, _mm512_set1_ps(QA_DA(ax, row, m)), _mm512_load_ps(acc[m])));
    }
}

/* Q4_K / Q5_K: acc[m] += d_a[m] (d_w (64 hi + lo) - dmin_w sum_j m_j bsum_j), the mins'
 * sum from the panel's min pairs and the activation row's bsum pairs. */
QA_INLINE void qa_scale_k4(const int32_t (*buf)[16][16], const uint8_t *pq, const char *ax, size_t row, int na,
                           float (*acc)[16])
{
    const float *d = (const float *)(pq + 2 * QA_TERM);
    const __m512i *mp = (const __m512i *)(d + 32);
    __m512 w = _mm512_loadu_ps(d), wm = _mm512_loadu_ps(d + 16);
    __m512i m0 = _mm512_loadu_si512(mp), m1 = _mm512_loadu_si512(mp + 1), m2 = _mm512_loadu_si512(mp + 2),
            m3 = _mm512_loadu_si512(mp + 3);
    for (int m = 0; m < na; m++) {
        const int32_t *bp = QA_BP(ax, row, m);
        __m512i mn = _mm512_dpwssd_epi32(_mm512_setzero_si512(), m0, _mm512_set1_epi32(bp[0]));
        mn = _mm512_dpwssd_epi32(mn, m1, _mm512_set1_epi32(bp[1]));
        mn = _mm512_dpwssd_epi32(mn, m2, _mm512_set1_epi32(bp[2]));
        mn = _mm512_dpwssd_epi32(mn, m3, _mm512_set1_epi32(bp[3]));
        __m512 p = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(mn), wm, _mm512_mul_ps(_mm512_cvtepi32_ps(qa_sum(buf, m)), w));
        _mm512_store_ps(acc[m], _mm512_fmadd_ps(p, _mm512_set1_ps(QA_DA(ax, row, m)), _mm512_load_ps(acc[m])));
    }
}

/* The step (row group g, block b): its tile products into tiles 0-3. */
typedef struct qa_step {
    int g, nr; /* row group (32 activation rows) and its rows */
    int64_t b;
} qa_step;

/* Scales the sums of step st (in buf) into its row group's accumulators; the activation
 * rows' scales and bsum pairs come from their aux (aq, rows row bytes apart). */
QA_INLINE void qa_scale_step(int32_t (*buf)[16][16], const void *panel, size_t bb, qa_step st, const char *aq,
                             size_t row, float (*acc)[16], const bool k4)
{
    const uint8_t *pq = (const uint8_t *)panel + (size_t)st.b * bb;
    const int32_t(*sums)[16][16] = (const int32_t(*)[16][16])buf;
    const char *ax = aq + (size_t)QA_GROUP * st.g * row + (size_t)st.b * QA_AUX + QKK;
    if (k4) qa_scale_k4(sums, pq, ax, row, st.nr, acc + QA_GROUP * st.g);
    else qa_scale(sums, pq, ax, row, st.nr, acc + QA_GROUP * st.g);
}

QA_INLINE void qa_products(const uint8_t *pq, const char *qs, size_t row, int nr)
{
    size_t second = nr > 16 ? 16 * row : 0; /* the second row tile, or the first again */
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int st = 0; st < 4; st++) {
        _tile_loadd(4, qs + 64 * st, (long)row);
        _tile_loadd(5, qs + second + 64 * st, (long)row);
        _tile_loadd(6, pq + (size_t)st * 1024, 64);
        _tile_loadd(7, pq + QA_TERM + (size_t)st * 1024, 64);
        _tile_dpbssd(0, 4, 6);
        _tile_dpbsud(1, 4, 7);
        _tile_dpbssd(2, 5, 6);
        _tile_dpbsud(3, 5, 7);
    }
}

/* One gemm of up to QA_MAX_A activation rows, in steps (row group of 32, block): the blocks
 * of a k-chunk of QA_KB blocks (~34 KB of panel) go past every row group before the next
 * chunk, so the panel's tiles come from L1 and only the activations' from L2 (with each
 * group streaming the whole panel, both came from L2, and the tile products ran at a
 * third of their rate: 16 rows x 5632 of panel and 32 x 5632 of activations are 180 KB
 * each). Each step's products run while the vector unit scales the step before (k4: the
 * Q4_K / Q5_K layout and min term). */
QA_INLINE void qa_gemm(int64_t K, const void *panel, const void *va, size_t as, const float *aux, size_t xs, int na,
                       float *s, size_t ss, int nw, const bool k4)
{
    const char *aq = (const char *)aux;
    (void)va, (void)as; /* the activation's quants, scales and sums are all in its aux */
    const size_t bb = k4 ? QA_K4_BLOCK_BYTES : QA_BLOCK_BYTES, row = xs * sizeof(float);
    int32_t buf[2][4][16][16] __attribute__((aligned(64)));
    float acc[QA_MAX_A][16] __attribute__((aligned(64)));
    memset(acc, 0, sizeof(acc[0]) * (size_t)na);
    int64_t nb = K / QKK;
    int ng = (na + QA_GROUP - 1) / QA_GROUP, cfg = 0, cur = 0;
    qa_step prev = {-1, 0, 0};
    for (int64_t c0 = 0; c0 < nb; c0 += QA_KB)
        for (int g = 0; g < ng; g++) {
            qa_step st = {g, na - QA_GROUP * g < QA_GROUP ? na - QA_GROUP * g : QA_GROUP, 0};
            if (st.nr != cfg) qa_configure(cfg = st.nr); /* only the last group can be short */
            for (st.b = c0; st.b < nb && st.b < c0 + QA_KB; st.b++) {
                qa_products((const uint8_t *)panel + (size_t)st.b * bb, aq + (size_t)QA_GROUP * g * row + (size_t)st.b * QA_AUX, row, st.nr);
                if (prev.g >= 0) qa_scale_step(buf[cur ^ 1], panel, bb, prev, aq, row, acc, k4);
                _tile_stored(0, buf[cur][0], 64);
                _tile_stored(1, buf[cur][1], 64);
                _tile_stored(2, buf[cur][2], 64);
                _tile_stored(3, buf[cur][3], 64);
                prev = st;
                cur ^= 1;
            }
        }
    if (prev.g >= 0) qa_scale_step(buf[cur ^ 1], panel, bb, prev, aq, row, acc, k4);
    _tile_release();
    __mmask16 mask = (__mmask16)((1u << nw) - 1u);
    for (int m = 0; m < na; m++) _mm512_mask_storeu_ps(s + (size_t)m * ss, mask, _mm512_load_ps(acc[m]));
}

QA_FN void qa_gemm_q6_k(int64_t K, const void *panel, const void *va, size_t as, const float *aux, size_t xs, int na,
                        float *s, size_t ss, int nw)
{
    qa_gemm(K, panel, va, as, aux, xs, na, s, ss, nw, false);
}

QA_FN void qa_gemm_k4(int64_t K, const void *panel, const void *va, size_t as, const float *aux, size_t xs, int na,
                      float *s, size_t ss, int nw)
{
    qa_gemm(K, panel, va, as, aux, xs, na, s, ss, nw, true);
}

/* ---- The 32-element formats (Q4_0, Q5_0, Q8_0, Q4_1, Q5_1): a float scale every 32 quants on
 * both sides, which no integer folding removes, so each block's sums leave the tiles (a tile
 * store a block) and are scaled on the vector unit; tiles of 32 k, the A tile 32 bytes a row.
 * The panel is the AVX-512 VNNI panel of the same format (per block 8 rows of 64 bytes, row t
 * holding quants 4t..4t+3 of the 16 weight rows, then the rows' d in f32 and, for Q4_1 /
 * Q5_1, their m): one block is a B tile as it stands. Its unsigned quants are made signed
 * where the format has a zero point (tdpbssd), and stay unsigned beside a min (tdpbsud). The
 * activation aux is that panel's own (two floats a block) followed by the quants copied out
 * of the Q8_0 / Q8_1 blocks, so a tile row is 32 contiguous bytes (read in place, most of the
 * 34- or 36-byte blocks' quants straddle a cache line).
 * Measured on a 2-core Sapphire Rapids VM (ctorch-bench-quant --panels, one thread, 128 x
 * 5632 x 2048): Q4_0 9.04 -> 7.33 ms with the per-call packing (1.2-1.4 ms), Q8_0 8.81 ->
 * 7.13, Q5_0 9.11 -> 7.12, Q4_1 9.53 -> 8.62. Taken apart, the tile side (loads, products,
 * stores) took 3.3 ms and the scaling 2.75, and together their sum: the vector work did not
 * run beside the tiles in any order tried (stores before or after the scaling, products
 * two steps ahead of the stores), so the gain is the scaling's, not the products'. ---- */
#define QA_L_BYTES_D (8 * 64 + 64)   /* the VNNI panel block of Q4_0, Q5_0, Q8_0: quants, d */
#define QA_L_BYTES_DM (8 * 64 + 128) /* Q4_1, Q5_1: quants, d, m */
#define QA_L_AUX 10                  /* aux floats a block: the VNNI panel's two, 32 quant bytes */

static bool qa_l_min(ct_dtype t) { return t == CT_Q4_1 || t == CT_Q5_1; }

static const quant_panel_kernels *qa_l_vnni(ct_dtype t) { return quant_get_panel_at(t, QUANT_SIMD_AVX512_VNNI); }

static void qa_l_aux(ct_dtype t, const void *va, int64_t K, float *aux)
{
    int64_t nb = K / QK;
    qa_l_vnni(t)->act_aux(va, K, aux);
    uint8_t *q = (uint8_t *)(aux + 2 * nb);
    const bool one = qa_l_min(t);
    const size_t bs = one ? sizeof(blk_q8_1) : sizeof(blk_q8_0), qo = one ? offsetof(blk_q8_1, qs) : offsetof(blk_q8_0, qs);
    for (int64_t b = 0; b < nb; b++) memcpy(q + QK * b, (const char *)va + (size_t)b * bs + qo, QK);
}

/* Tiles 0-3: block sums (block j's in tile j % 4); 4, 5: activation quants, 32 bytes a row
 * (block j's in 4 + j % 2); 6, 7: panel blocks (block j's in 6 + j % 2). A gemm works on 16
 * activation rows at a time. */
QA_FN void qa_l_configure(int nr)
{
    cpu_amx_tilecfg c;
    memset(&c, 0, sizeof c);
    c.palette = 1;
    for (int t = 0; t < 8; t++) {
        c.colsb[t] = t == 4 || t == 5 ? 32 : 64;
        c.rows[t] = (uint8_t)(t >= 6 ? 8 : nr);
    }
    __asm__ volatile("" : : "m"(c) : "memory");
    _tile_loadconfig(&c);
}

/* acc[r] += the terms of one block for row r (sums c[r], aux ax + r * xs): d_w d_a sum, where
 * the panel's quants were made signed (Q4_0, Q5_0, Q8_0; the aux holds the zero point's
 * term, unused, then d_a), or d_w d_a sum + m_w (d_a sum(a)) (Q4_1, Q5_1; the aux holds d_a,
 * then d_a sum(a)). All 16 rows are computed (rows past nr read row nr - 1's aux and are
 * never stored), so the loop has no branch and the accumulators stay in registers. */
QA_INLINE void qa_l_scale(const int32_t (*c)[16], const float *d, const float *ax, size_t xs, int nr, __m512 acc[16],
                          const bool one)
{
    __m512 dw = _mm512_loadu_ps(d), mw = one ? _mm512_loadu_ps(d + 16) : dw;
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
        const float *x = ax + (size_t)(r < nr ? r : nr - 1) * xs;
        __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_load_si512(c[r])), dw);
        acc[r] = _mm512_fmadd_ps(v, _mm512_set1_ps(x[one ? 0 : 1]), acc[r]);
        if (one) acc[r] = _mm512_fmadd_ps(mw, _mm512_set1_ps(x[1]), acc[r]);
    }
}

/* Step j of the pipeline: block j's product into tile CT (A and B tiles AT, BT), block j - 3's
 * sums (stored a step ago into buf[(j - 3) % 2]) scaled on the vector unit while it runs, then
 * block j - 2's tile (ST, its product two steps old) stored into buf[j % 2]. */
#define QA_L_STEP(j, CT, AT, BT, ST)                                                                                  \
    do {                                                                                                              \
        int64_t j_ = (j);                                                                                             \
        if (j_ < nb) {                                                                                                \
            _tile_zero(CT);                                                                                           \
            _tile_loadd(AT, q + QK * j_, (long)row);                                                                  \
            _tile_loadd(BT, panel + (size_t)j_ * bb, 64);                                                             \
            if (one) _tile_dpbsud(CT, AT, BT);                                                                        \
            else _tile_dpbssd(CT, AT, BT);                                                                            \
        }                                                                                                             \
        if (j_ >= 3 && j_ - 3 < nb)                                                                                   \
            qa_l_scale((const int32_t(*)[16])buf[(j_ - 3) & 1], (const float *)(panel + (size_t)(j_ - 3) * bb + 512), \
                       ax + 2 * (j_ - 3), xs, nr, acc, one);                                                          \
        if (j_ >= 2 && j_ - 2 < nb) _tile_stored(ST, buf[j_ & 1], 64);                                               \
    } while (0)

/* 16 activation rows at a time over every block, the products two blocks ahead of the
 * stores and three ahead of the scaling, so that neither should wait on a product's latency
 * (what the tiles and the vector unit did instead is measured in the section's header). */
QA_INLINE void qa_l_gemm(int64_t K, const void *vpanel, const float *aux, size_t xs, int na, float *s, size_t ss, int nw,
                         const size_t bb, const bool one)
{
    const uint8_t *panel = vpanel;
    const size_t row = xs * sizeof(float);
    int64_t nb = K / QK;
    int32_t buf[2][16][16] __attribute__((aligned(64)));
    memset(buf, 0, sizeof buf); /* rows past nr are scaled too, never stored */
    __mmask16 mask = (__mmask16)((1u << nw) - 1u);
    int cfg = 0;
    for (int g = 0; g < na; g += 16) {
        int nr = na - g < 16 ? na - g : 16;
        if (nr != cfg) qa_l_configure(cfg = nr);
        const char *q = (const char *)(aux + 2 * nb) + (size_t)g * row;
        const float *ax = aux + (size_t)g * xs;
        __m512 acc[16];
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++) acc[r] = _mm512_setzero_ps();
        for (int64_t j = 0; j < nb + 3; j += 4) {
            QA_L_STEP(j, 0, 4, 6, 2);
            QA_L_STEP(j + 1, 1, 5, 7, 3);
            QA_L_STEP(j + 2, 2, 4, 6, 0);
            QA_L_STEP(j + 3, 3, 5, 7, 1);
        }
#pragma GCC unroll 16
        for (int r = 0; r < 16; r++)
            if (r < nr) _mm512_mask_storeu_ps(s + (size_t)(g + r) * ss, mask, acc[r]);
    }
    _tile_release();
}

/* The VNNI panel of t, its unsigned quants made signed where t has a zero point (tdpbssd then
 * needs no term for it): Q4_0 - 8, Q5_0 - 16, Q8_0 (stored q + 128) back to q. */
QA_INLINE void qa_l_pack(ct_dtype t, const void *w, size_t ws, int nw, int64_t K, void *vpanel, size_t bb)
{
    qa_l_vnni(t)->pack(w, ws, nw, K, vpanel);
    if (qa_l_min(t)) return;
    uint8_t *panel = vpanel;
    const __m512i off = _mm512_set1_epi8((char)(t == CT_Q4_0 ? 8 : t == CT_Q5_0 ? 16 : 128));
    for (int64_t b = 0; b < K / QK; b++)
        for (int j = 0; j < 8; j++) {
            uint8_t *p = panel + (size_t)b * bb + (size_t)j * 64;
            _mm512_storeu_si512(p, _mm512_sub_epi8(_mm512_loadu_si512(p), off));
        }
}

#define QA_L_ENTRY(T, t, bytes, one)                                                                               \
    QA_FN void qa_l_pack_##t(const void *w, size_t ws, int nw, int64_t K, void *panel)                            \
    {                                                                                                              \
        qa_l_pack(T, w, ws, nw, K, panel, bytes);                                                                  \
    }                                                                                                              \
    QA_FN void qa_l_aux_##t(const void *va, int64_t K, float *aux) { qa_l_aux(T, va, K, aux); }                   \
    QA_FN void qa_l_gemm_##t(int64_t K, const void *panel, const void *va, size_t as, const float *aux, size_t xs, \
                             int na, float *s, size_t ss, int nw)                                                  \
    {                                                                                                              \
        (void)va, (void)as; /* the quants and the block terms are all in the aux */                               \
        qa_l_gemm(K, panel, aux, xs, na, s, ss, nw, bytes, one);                                                   \
    }                                                                                                              \
    static const quant_panel_kernels g_amx_##t = {bytes, QA_L_AUX, qa_l_pack_##t, qa_l_aux_##t, qa_l_gemm_##t, QA_MAX_A};

QA_L_ENTRY(CT_Q4_0, q4_0, QA_L_BYTES_D, false)
QA_L_ENTRY(CT_Q5_0, q5_0, QA_L_BYTES_D, false)
QA_L_ENTRY(CT_Q8_0, q8_0, QA_L_BYTES_D, false)
QA_L_ENTRY(CT_Q4_1, q4_1, QA_L_BYTES_DM, true)
QA_L_ENTRY(CT_Q5_1, q5_1, QA_L_BYTES_DM, true)

static const quant_panel_kernels g_amx_q6_k = {QA_BLOCK_BYTES, QA_AUX / 4, qa_pack_q6_k, qa_aux_q8, qa_gemm_q6_k, QA_MAX_A};
static const quant_panel_kernels g_amx_q4_k = {QA_K4_BLOCK_BYTES, QA_AUX / 4, qa_pack_q4_k, qa_aux_q8, qa_gemm_k4, QA_MAX_A};
static const quant_panel_kernels g_amx_q5_k = {QA_K4_BLOCK_BYTES, QA_AUX / 4, qa_pack_q5_k, qa_aux_q8, qa_gemm_k4, QA_MAX_A};
#endif

/* t's AMX panel kernels where this CPU runs the packer (AVX-512 VNNI), or NULL. */
static const quant_panel_kernels *amx_kernels(ct_dtype t)
{
#ifdef QA_X86
    if (!quant_simd_supported(QUANT_SIMD_AVX512_VNNI)) return NULL;
    const quant_panel_kernels *k;
    switch (t) {
    case CT_Q6_K: return &g_amx_q6_k;
    case CT_Q4_K: return &g_amx_q4_k;
    case CT_Q5_K: return &g_amx_q5_k;
    case CT_Q4_0: k = &g_amx_q4_0; break;
    case CT_Q5_0: k = &g_amx_q5_0; break;
    case CT_Q8_0: k = &g_amx_q8_0; break;
    case CT_Q4_1: k = &g_amx_q4_1; break;
    case CT_Q5_1: k = &g_amx_q5_1; break;
    default: return NULL;
    }
    /* the 32-element kernels read the VNNI panel's blocks: only where that layout is theirs */
    const quant_panel_kernels *vnni = qa_l_vnni(t);
    return vnni && vnni->block_bytes == k->block_bytes ? k : NULL;
#else
    (void)t;
    return NULL;
#endif
}

const quant_panel_kernels *quant_get_panel_amx(ct_dtype t) { return cpu_amx_usable(CPU_AMX_INT8) ? amx_kernels(t) : NULL; }

quant_panel_pack_fn quant_get_amx_packer(ct_dtype t, size_t *block_bytes)
{
    const quant_panel_kernels *k = amx_kernels(t);
    if (k && block_bytes) *block_bytes = k->block_bytes;
    return k ? k->pack : NULL;
}
