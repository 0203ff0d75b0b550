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

/* Decode attention (one query row per head) split over the attended keys. One work-group
 * per (batch, kv head, split): its G query heads share every K and V load. The attended
 * range [lo, L) is read here and cut into up to nsplit equal segments of min_keys keys or
 * more, so the grid depends only on the cache's shape (a recorded step replays it at every
 * position) while a short length needs no merge. A segment (at most segmax keys) is walked
 * in chunks of C keys: first K into local memory and the G x segment scores, then one softmax over the segment
 * (no online rescaling: the scores all fit), then V chunk by chunk into the G x Dv
 * accumulators, ATT_DACC (head, dim) pairs per work-item. Each group writes its partial
 * (acc[Dv], m, l per head); the last group of a (batch, kv head) to finish, found with an
 * atomic counter that it then re-zeroes for the next launch, merges them into the output.
 * OpenCL C 1.2: reductions through local memory, no subgroups. Indices inside a segment
 * are int (64-bit division is slow on GPUs); tensor offsets stay long. */
#define ATT_DACC 8

/* A fence that orders this work-item's global writes before its later ones for every
 * work-group on the device. OpenCL C 1.2's mem_fence on NVIDIA compiles to membar.cta
 * (the work-group only), which does not order a partial's stores before the counter's
 * atomic as another SM sees them; NVIDIA's compiler (cl_nv_pragma_unroll marks it) takes
 * inline PTX (membar.gl; measured on the H100: about 1 us of a 28 us call). */
#ifdef cl_nv_pragma_unroll
#define ATT_FENCE_GLOBAL() asm volatile("membar.gl;" ::: "memory")
#else
#define ATT_FENCE_GLOBAL() mem_fence(CLK_GLOBAL_MEM_FENCE)
#endif

/* n rows of w floats from a K or V cache into local rows of pitch lw: four elements per
 * load where rows allow it (vload*4 needs only element alignment), several loads in flight
 * per work-item. */
static void att_rows_to_local(global const uchar *base, long first, long rs, int n, int w, int dt, local float *dst,
                              int lw, int l, int ls)
{
    if ((w & 3) == 0 && (rs & 3) == 0) {
        int w4 = w >> 2;
#pragma unroll 4
        for (int i = l; i < n * w4; i += ls) {
            int j = i / w4, d = (i - j * w4) << 2;
            long e = first + j * rs + d;
            float4 x = dt == ATT_F16 ? vload_half4(0, (global const half *)base + e) : vload4(0, (global const float *)base + e);
            local float *o = dst + j * lw + d;
            o[0] = x.s0, o[1] = x.s1, o[2] = x.s2, o[3] = x.s3;
        }
        return;
    }
    for (int i = l; i < n * w; i += ls) {
        int j = i / w, d = i - j * w;
        long e = first + j * rs + d;
        dst[j * lw + d] = dt == ATT_F16 ? vload_half(0, (global const half *)base + e) : ((global const float *)base)[e];
    }
}

kernel void att_decode(global const uchar *qb, ulong qo, global const uchar *kb, ulong ko, global const uchar *vb,
                       ulong vo, global const uchar *mb, ulong mo, global const uchar *lb, ulong lo_, global uchar *ob,
                       ulong oo, global float *part, ulong cnt_off, long Hq, long Hkv, long Tk, int D, int Dv,
                       long4 qs, long4 ks, long4 vs, long4 ms, int dtk, int dtv, int has_mask, int has_len, int len64,
                       long window, float scale, int nsplit, int C, int segmax, int min_keys, int pitch, local float *qloc,
                       local float *kv, local float *sc, local float *red)
{
    local int last;
    global int *counters = (global int *)((global uchar *)part + cnt_off);
    int l = get_local_id(0), ls = get_local_size(0);
    long grp = get_group_id(0), bh = grp / nsplit;
    int seg = (int)(grp % nsplit), G = (int)(Hq / Hkv), GD = G * Dv;
    long b = bh / Hkv, g = bh % Hkv, h0 = g * G;
    global const float *q = (global const float *)(qb + qo);
    global const float *mask = (global const float *)(mb + mo);
    /* red: per head m, NaN flag, l; then per (head, split) m and l for the merge */
    local float *rm = red, *rnan = red + G, *rl = red + 2 * G, *pm = red + 3 * G, *pl = pm + G * nsplit;

    long L = Tk;
    if (has_len) L = len64 ? *(global const long *)(lb + lo_) : (long)*(global const int *)(lb + lo_);
    bool bad = L < 0 || L > Tk;
    long lo = window > 0 ? max(L - window, 0L) : 0L, n = bad ? 0 : max(L - lo, 0L);
    /* splits in use at this length: at least min_keys keys each (the host keeps that within
     * segmax), so a short prefix is one work-group's with no merge, and the groups past
     * them leave at once; every group computes the same ne from L */
    int ne = (int)clamp((n + min_keys - 1) / min_keys, 1L, (long)nsplit);
    if (seg >= ne) return;
    long seglen = (n + ne - 1) / ne, s0 = lo + seg * seglen;
    int ns = (int)clamp(lo + n - s0, 0L, seglen);

    for (int i = l; i < G * D; i += ls) {
        int r = i / D, d = i - r * D;
        qloc[i] = q[b * qs.s0 + (h0 + r) * qs.s1 + d];
    }
    /* scores of the segment, a chunk of keys at a time (K rows padded to D + 1 floats:
     * work-items on consecutive keys hit distinct banks) */
    for (int c0 = 0; c0 < ns; c0 += C) {
        int cn = min(C, ns - c0);
        barrier(CLK_LOCAL_MEM_FENCE);
        att_rows_to_local(kb + ko, b * ks.s0 + g * ks.s1 + (s0 + c0) * ks.s2, ks.s2, cn, D, dtk, kv, D + 1, l, ls);
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int p = l; p < G * C; p += ls) {
            int r = p / C, j = p - r * C;
            if (j >= cn) continue;
            float dot = 0.0f;
            for (int d = 0; d < D; d++) dot = fma(qloc[r * D + d], kv[j * (D + 1) + d], dot);
            float s = dot * scale;
            if (has_mask) s += mask[b * ms.s0 + (h0 + r) * ms.s1 + (s0 + c0 + j) * ms.s3];
            sc[r * segmax + c0 + j] = s;
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < G) { /* each head's max over the segment (a NaN score marks the head) */
        float m = -INFINITY, nan_row = bad;
        for (int j = 0; j < ns; j++) {
            float s = sc[l * segmax + j];
            if (isnan(s)) nan_row = 1.0f;
            else m = fmax(m, s);
        }
        rm[l] = m;
        rnan[l] = nan_row;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int p = l; p < G * ns; p += ls) {
        int r = p / ns, j = p - r * ns;
        float s = sc[r * segmax + j], m = rm[r];
        sc[r * segmax + j] = (m == -INFINITY || isnan(s)) ? 0.0f : exp(s - m);
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < G) {
        float sum = 0.0f;
        for (int j = 0; j < ns; j++) sum += sc[l * segmax + j];
        rl[l] = sum;
    }
    float acc[ATT_DACC];
    for (int i = 0; i < ATT_DACC; i++) acc[i] = 0.0f;
    for (int c0 = 0; c0 < ns; c0 += C) {
        int cn = min(C, ns - c0);
        barrier(CLK_LOCAL_MEM_FENCE);
        att_rows_to_local(vb + vo, b * vs.s0 + g * vs.s1 + (s0 + c0) * vs.s2, vs.s2, cn, Dv, dtv, kv, Dv, l, ls);
        barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
        for (int i = 0; i < ATT_DACC; i++) {
            int p = l + i * ls;
            if (p < GD) {
                int r = p / Dv, d = p - r * Dv;
                float a = acc[i];
                for (int j = 0; j < cn; j++) a = fma(sc[r * segmax + c0 + j], kv[j * Dv + d], a);
                acc[i] = a;
            }
        }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    global float *o = (global float *)(ob + oo) + (b * Hq + h0) * Dv;
    if (ne == 1) {
#pragma unroll
        for (int i = 0; i < ATT_DACC; i++) {
            int p = l + i * ls;
            if (p < GD) {
                int r = p / Dv;
                o[p] = rnan[r] != 0.0f ? NAN : (rl[r] > 0.0f ? acc[i] / rl[r] : 0.0f);
            }
        }
        return;
    }
    /* the partial of this split: per head acc[Dv], m (NaN: a NaN row), l; a kv head's
     * partials start on a fresh 256-byte line (pitch floats each), so no cache line read
     * by one head's merge holds another's */
    global float *all = part + bh * (long)pitch, *pp = all + seg * GD;
#pragma unroll
    for (int i = 0; i < ATT_DACC; i++) {
        int p = l + i * ls;
        if (p < GD) pp[p] = acc[i];
    }
    if (l < G) {
        global float *st = all + nsplit * GD + 2 * (seg * G + l);
        st[0] = rnan[l] != 0.0f ? NAN : rm[l];
        st[1] = rl[l];
    }
    /* publish the partial before counting this split in */
    ATT_FENCE_GLOBAL();
    barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
    if (l == 0) last = atomic_inc(counters + bh) == ne - 1;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (!last) return;
    if (l == 0) atomic_xchg(counters + bh, 0); /* ready for the next launch */
    ATT_FENCE_GLOBAL();
    /* the merge: every split's partial rescaled to the head's common max */
    for (int p = l; p < G * ne; p += ls) {
        int s = p / G, r = p - s * G;
        pm[r * nsplit + s] = all[nsplit * GD + 2 * p];
        pl[r * nsplit + s] = all[nsplit * GD + 2 * p + 1];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < G) {
        float mx = -INFINITY, nan_row = 0.0f;
        for (int s = 0; s < ne; s++) {
            float m = pm[l * nsplit + s];
            if (isnan(m)) nan_row = 1.0f;
            else if (pl[l * nsplit + s] > 0.0f) mx = fmax(mx, m);
        }
        rm[l] = mx;
        rnan[l] = nan_row;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int p = l; p < G * ne; p += ls) { /* pm becomes each split's weight */
        int r = p / ne, i = r * nsplit + (p - r * ne);
        float m = pm[i], mx = rm[r];
        pm[i] = (pl[i] > 0.0f && mx > -INFINITY) ? exp(m - mx) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if (l < G) {
        float sum = 0.0f;
        for (int s = 0; s < ne; s++) sum += pm[l * nsplit + s] * pl[l * nsplit + s];
        rl[l] = sum;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    /* every split wrote its acc (zeros where it had no keys): no branch, loads in flight */
#pragma unroll
    for (int i = 0; i < ATT_DACC; i++) {
        int p = l + i * ls;
        if (p < GD) {
            int r = p / Dv;
            float a = 0.0f;
#pragma unroll 8
            for (int s = 0; s < ne; s++) a = fma(pm[r * nsplit + s], all[s * GD + p], a);
            o[p] = rnan[r] != 0.0f ? NAN : (rl[r] > 0.0f ? a / rl[r] : 0.0f);
        }
    }
}
