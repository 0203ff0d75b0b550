/* Scaled dot-product attention (OpenCL C 1.2), the CPU's attention.c semantics: causal
 * (query i of Tq sees keys j <= i + L - Tq), a sliding window, an additive f32 mask,
 * grouped-query heads, and the attended length L read here from a tensor, so one
 * recorded decode step serves every position over a preallocated cache.
 *
 * One work-group per (batch, query head, query row, key segment): its work-items score
 * one chunk of keys at a time (a key each), then fold the chunk into an online softmax
 * (running max m, sum l, f32 accumulators spread over the work-items by value dim), so
 * the score matrix is never materialized. Prefill runs one segment per row; decode (one
 * query row) splits the keys into segments whose partial (acc, m, l) att_combine merges.
 * A row that sees no key yields zeros; a NaN score yields a NaN row; an L outside
 * [0, Tk] yields NaN rows (the device cannot raise the CPU's range error). */
#define ATT_F32 0
#define ATT_F16 1
#define ATT_ACC 8 /* value dims per work-item: Dv <= 8 * local size */

inline float att_ld(global const uchar *p, long i, int dt)
{
    return dt == ATT_F16 ? vload_half(i, (global const half *)p) : ((global const float *)p)[i];
}

inline float att_wg_reduce(local float *red, float v, int is_max)
{
    int l = get_local_id(0);
    red[l] = v;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int s = get_local_size(0) / 2; s > 0; s >>= 1) {
        if (l < s) red[l] = is_max ? fmax(red[l], red[l + s]) : red[l] + red[l + s];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    float r = red[0];
    barrier(CLK_LOCAL_MEM_FENCE);
    return r;
}

/* part (nseg > 1): [group][Dv + 2] = acc, m (NaN: a NaN score), l */
kernel void att_sdpa(global const uchar *qb, ulong qo, global const uchar *kb, ulong ko, global const uchar *vb,
                     ulong vo, global const uchar *mb, ulong mo, global const uchar *lb, ulong lo_, global uchar *ob,
                     ulong oo, global float *part, long Hq, long Hkv, long Tq, long Tk, long D, long Dv, long4 qs,
                     long4 ks, long4 vs, long4 ms, int dtk, int dtv, int has_mask, int has_len, int len64, int causal,
                     long window, float scale, int nseg, local float *qloc, local float *sc, local float *red)
{
    long grp = get_group_id(0);
    int l = get_local_id(0), ls = get_local_size(0);
    int seg = (int)(grp % nseg);
    long row = grp / nseg; /* (b * Hq + h) * Tq + qi */
    long qi = row % Tq, h = (row / Tq) % Hq, b = row / (Tq * Hq), g = h / (Hq / Hkv);
    global const float *q = (global const float *)(qb + qo) + b * qs.s0 + h * qs.s1 + qi * qs.s2;
    global const uchar *k = kb + ko, *v = vb + vo;
    long kbase = b * ks.s0 + g * ks.s1, vbase = b * vs.s0 + g * vs.s1;
    global const float *mrow = (global const float *)(mb + mo) + b * ms.s0 + h * ms.s1 + qi * ms.s2;

    long L = Tk;
    if (has_len) L = len64 ? *(global const long *)(lb + lo_) : (long)*(global const int *)(lb + lo_);
    bool bad = L < 0 || L > Tk;
    long off = L - Tq;
    long hi = causal ? min(qi + off, L - 1) : L - 1, lo = window > 0 ? max(qi + off - window + 1, 0L) : 0L;
    long s0 = seg * Tk / nseg, s1 = (seg + 1) * Tk / nseg - 1;
    long a = max(lo, s0), z = min(hi, s1);
    if (bad) a = 0, z = -1;

    for (long d = l; d < D; d += ls) qloc[d] = q[d];
    barrier(CLK_LOCAL_MEM_FENCE);
    float acc[ATT_ACC];
    for (int i = 0; i < ATT_ACC; i++) acc[i] = 0.0f;
    float m = -INFINITY, lsum = 0.0f, nan_seen = 0.0f;
    for (long j0 = a; j0 <= z; j0 += ls) {
        long j = j0 + l;
        float s = -INFINITY;
        if (j <= z) {
            global const uchar *kr = k;
            long kr0 = kbase + j * ks.s2;
            float dot = 0.0f;
            for (long d = 0; d < D; d++) dot = fma(qloc[d], att_ld(kr, kr0 + d, dtk), dot);
            s = dot * scale;
            if (has_mask) s += mrow[j * ms.s3];
        }
        nan_seen = fmax(nan_seen, isnan(s) ? 1.0f : 0.0f);
        float mc = att_wg_reduce(red, s, 1); /* fmax skips NaN: those rows end NaN anyway */
        if (mc == -INFINITY) continue;        /* uniform: every work-item got the same mc */
        float mn = fmax(m, mc), alpha = exp(m - mn);
        float p = (j <= z && !isnan(s)) ? exp(s - mn) : 0.0f;
        sc[l] = p;
        lsum = lsum * alpha + att_wg_reduce(red, p, 0); /* its barriers publish sc */
        m = mn;
        long cnt = min((long)ls, z - j0 + 1);
        for (int i = 0; i < ATT_ACC; i++) {
            long d = l + (long)i * ls;
            if (d >= Dv) break;
            float o = acc[i] * alpha;
            for (long jj = 0; jj < cnt; jj++) o = fma(sc[jj], att_ld(v, vbase + (j0 + jj) * vs.s2 + d, dtv), o);
            acc[i] = o;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    bool nan_row = att_wg_reduce(red, nan_seen, 1) > 0.0f || bad;
    if (nseg == 1) {
        global float *o = (global float *)(ob + oo) + row * Dv;
        float inv = lsum > 0.0f ? 1.0f / lsum : 0.0f;
        for (int i = 0; i < ATT_ACC; i++) {
            long d = l + (long)i * ls;
            if (d < Dv) o[d] = nan_row ? NAN : acc[i] * inv;
        }
        return;
    }
    global float *pp = part + grp * (Dv + 2);
    for (int i = 0; i < ATT_ACC; i++) {
        long d = l + (long)i * ls;
        if (d < Dv) pp[d] = acc[i];
    }
    if (l == 0) {
        pp[Dv] = nan_row ? NAN : m;
        pp[Dv + 1] = lsum;
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
