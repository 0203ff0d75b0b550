/* Scaled dot-product attention (OpenCL C 1.2), the CPU's attention.c semantics: causal
 * (query i of Tq sees keys j <= i + L - Tq), a sliding window, an additive f32 mask,
 * grouped-query heads, and the attended length L read here from a tensor, so one
 * recorded decode step serves every position over a preallocated cache.
 *
 * Keys are walked in chunks with an online softmax (running max m, sum l, f32
 * accumulators spread over the work-items by value dim): the score matrix is never
 * materialized. Prefill runs one key segment per row; decode (one query row) splits the
 * keys into segments whose partial (acc, m, l) att_combine merges.
 * A row that sees no key yields zeros; a NaN score yields a NaN row; an L outside
 * [0, Tk] yields NaN rows (the device cannot raise the CPU's range error). */
#define ATT_F32 0
#define ATT_F16 1
#define ATT_ACC 8 /* value dims per work-item: Dv <= 8 * local size */

#define ATT_QB 8 /* query rows per work-group, at most */

/* One work-group per block of R <= ATT_QB query rows that share a key/value head: R
 * consecutive positions of one head (prefill), or the R query heads of one kv head (decode,
 * decode_rows), so every K and V row a work-group loads serves R queries. Per key chunk
 * (one key per work-item): every work-item scores its key against the R rows, turns its
 * scores into probabilities against each row's running max, and updates the accumulators
 * of its value dims. part (nseg > 1): per row and segment, acc[Dv], m (NaN:
 * a NaN score), l. */
kernel void att_sdpa(global const uchar *qb, ulong qo, global const uchar *kb, ulong ko, global const uchar *vb,
                     ulong vo, global const uchar *mb, ulong mo, global const uchar *lb, ulong lo_, global uchar *ob,
                     ulong oo, global float *part, long Hq, long Hkv, long Tq, long Tk, long D, long Dv, long4 qs,
                     long4 ks, long4 vs, long4 ms, int dtk, int dtv, int has_mask, int has_len, int len64, int causal,
                     long window, float scale, int nseg, int rows_per_blk, int decode_rows, local float *qloc,
                     local float *sc)
{
    /* Every work-item keeps the whole block's row state (key range, m, l) and computes it
     * identically from the shared scores. A version where one work-item per row owned that
     * state in local memory gave wrong rows on PoCL 3.1, and right ones once a printf was
     * added inside that branch: as far as we could tell a miscompile, so no branch on the
     * work-item id holds state across barriers here. */
    long lo_r[ATT_QB], hi_r[ATT_QB];
    float m_r[ATT_QB], l_r[ATT_QB];
    uint nan_rows = 0;
    long grp = get_group_id(0);
    int l = get_local_id(0), ls = get_local_size(0);
    int seg = (int)(grp % nseg);
    long blk = grp / nseg, G = Hq / Hkv, b, h0, qi0, dh, dq;
    int R;
    if (decode_rows) {
        long nhb = (G + rows_per_blk - 1) / rows_per_blk, hb = blk % nhb, g = (blk / nhb) % Hkv;
        b = blk / (nhb * Hkv), h0 = g * G + hb * rows_per_blk, qi0 = 0, dh = 1, dq = 0;
        R = (int)min((long)rows_per_blk, G - hb * rows_per_blk);
    } else {
        long nqb = (Tq + rows_per_blk - 1) / rows_per_blk, qbi = blk % nqb, h = (blk / nqb) % Hq;
        b = blk / (nqb * Hq), h0 = h, qi0 = qbi * rows_per_blk, dh = 0, dq = 1;
        R = (int)min((long)rows_per_blk, Tq - qi0);
    }
    long g = h0 / G;
    global const uchar *k = kb + ko, *v = vb + vo;
    long kbase = b * ks.s0 + g * ks.s1, vbase = b * vs.s0 + g * vs.s1;
    global const float *q = (global const float *)(qb + qo);
    global const float *mask = (global const float *)(mb + mo);

    long L = Tk;
    if (has_len) L = len64 ? *(global const long *)(lb + lo_) : (long)*(global const int *)(lb + lo_);
    bool bad = L < 0 || L > Tk;
    long off = L - Tq, s0 = seg * Tk / nseg, s1 = (seg + 1) * Tk / nseg - 1;
    for (int r = 0; r < R; r++) {
        long qi = qi0 + r * dq;
        long hi = causal ? min(qi + off, L - 1) : L - 1, lo = window > 0 ? max(qi + off - window + 1, 0L) : 0L;
        lo_r[r] = bad ? 0 : max(lo, s0);
        hi_r[r] = bad ? -1 : min(hi, s1);
    }
    for (int r = 0; r < ATT_QB; r++) m_r[r] = -INFINITY, l_r[r] = 0.0f;
    for (long i = l; i < R * D; i += ls) {
        long r = i / D, d = i - r * D;
        qloc[i] = q[b * qs.s0 + (h0 + r * dh) * qs.s1 + (qi0 + r * dq) * qs.s2 + d];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    long a = lo_r[0], z = hi_r[0];
    for (int r = 1; r < R; r++) a = min(a, lo_r[r]), z = max(z, hi_r[r]);

    float acc[ATT_QB][ATT_ACC];
    for (int r = 0; r < ATT_QB; r++)
        for (int i = 0; i < ATT_ACC; i++) acc[r][i] = 0.0f;
    for (long j0 = a; j0 <= z; j0 += ls) {
        long j = j0 + l, cnt = min((long)ls, z - j0 + 1);
        float dot[ATT_QB];
        for (int r = 0; r < ATT_QB; r++) dot[r] = 0.0f;
        if (j <= z) {
            long kr = kbase + j * ks.s2;
            for (long d = 0; d < D; d++) {
                float kv = dtk == ATT_F16 ? vload_half(kr + d, (global const half *)k) : ((global const float *)k)[kr + d];
                for (int r = 0; r < R; r++) dot[r] = fma(qloc[r * D + d], kv, dot[r]);
            }
        }
        for (int r = 0; r < R; r++) {
            float s = -INFINITY;
            if (j >= lo_r[r] && j <= hi_r[r]) {
                s = dot[r] * scale;
                if (has_mask) s += mask[b * ms.s0 + (h0 + r * dh) * ms.s1 + (qi0 + r * dq) * ms.s2 + j * ms.s3];
            }
            sc[r * ls + l] = s;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        /* each row's max over the chunk, then its probabilities (a column per work-item),
         * then their sum: the online-softmax step */
        float alpha[ATT_QB];
        for (int r = 0; r < R; r++) {
            float mc = -INFINITY;
            for (long jj = 0; jj < cnt; jj++) {
                float s = sc[r * ls + jj];
                if (isnan(s)) nan_rows |= 1u << r;
                else mc = fmax(mc, s);
            }
            float mn = fmax(m_r[r], mc);
            alpha[r] = mn == -INFINITY ? 1.0f : exp(m_r[r] - mn); /* exp(-inf - -inf) would be NaN */
            m_r[r] = mn;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int r = 0; r < R; r++) {
            float s = sc[r * ls + l];
            sc[r * ls + l] = (l < cnt && !isnan(s) && m_r[r] != -INFINITY) ? exp(s - m_r[r]) : 0.0f;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int r = 0; r < R; r++) {
            float sum = 0.0f;
            for (long jj = 0; jj < cnt; jj++) sum += sc[r * ls + jj];
            l_r[r] = l_r[r] * alpha[r] + sum;
        }
        for (int i = 0; i < ATT_ACC; i++) {
            long d = l + (long)i * ls;
            if (d >= Dv) break;
            for (int r = 0; r < R; r++) acc[r][i] *= alpha[r];
            for (long jj = 0; jj < cnt; jj++) {
                long vi = vbase + (j0 + jj) * vs.s2 + d;
                float vv = dtv == ATT_F16 ? vload_half(vi, (global const half *)v) : ((global const float *)v)[vi];
                for (int r = 0; r < R; r++) acc[r][i] = fma(sc[r * ls + jj], vv, acc[r][i]);
            }
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    for (int r = 0; r < R; r++) {
        long row = (b * Hq + h0 + r * dh) * Tq + qi0 + r * dq;
        bool nan_row = (nan_rows >> r & 1u) || bad;
        if (nseg == 1) {
            global float *o = (global float *)(ob + oo) + row * Dv;
            float inv = l_r[r] > 0.0f ? 1.0f / l_r[r] : 0.0f;
            for (int i = 0; i < ATT_ACC; i++) {
                long d = l + (long)i * ls;
                if (d < Dv) o[d] = nan_row ? NAN : acc[r][i] * inv;
            }
            continue;
        }
        global float *pp = part + (row * nseg + seg) * (Dv + 2);
        for (int i = 0; i < ATT_ACC; i++) {
            long d = l + (long)i * ls;
            if (d < Dv) pp[d] = acc[r][i];
        }
        if (l == 0) {
            pp[Dv] = nan_row ? NAN : m_r[r];
            pp[Dv + 1] = l_r[r];
        }
    }
}

/* Merges the key segments of each row: every partial rescaled to the common max. */
kernel void att_combine(global const float *part, global uchar *ob, ulong oo, long Dv, int nseg)
{
    long row = get_group_id(0);
    int l = get_local_id(0), ls = get_local_size(0);
    global const float *pr = part + row * nseg * (Dv + 2);
    float mx = -INFINITY;
    bool nan_row = false;
    for (int s = 0; s < nseg; s++) {
        float ms = pr[s * (Dv + 2) + Dv];
        if (isnan(ms)) nan_row = true;
        else mx = fmax(mx, ms);
    }
    global float *o = (global float *)(ob + oo) + row * Dv;
    for (long d = l; d < Dv; d += ls) {
        float acc = 0.0f, lsum = 0.0f;
        for (int s = 0; s < nseg && mx > -INFINITY; s++) {
            global const float *pp = pr + s * (Dv + 2);
            if (!(pp[Dv + 1] > 0.0f)) continue;
            float w = exp(pp[Dv] - mx);
            lsum += pp[Dv + 1] * w;
            acc += pp[d] * w;
        }
        o[d] = nan_row ? NAN : (lsum > 0.0f ? acc / lsum : 0.0f);
    }
}
