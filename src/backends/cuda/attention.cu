/* Scaled dot-product attention, flash-attention style: no [Tq, Tk] score matrix.
 *
 * A block owns up to SD_RB query rows that share one key/value head: row i of head group
 * (b, g) is query head g*G + i % G at position i / G, so decode (Tq = 1) puts the G query
 * heads of a KV head in one block and prefill puts neighbouring positions of all G heads
 * there; each K/V tile is loaded once into shared memory (as f32) for all of them. A warp
 * owns SD_RB / 4 rows; lane j scores key j of a SD_BK-key tile, and the online softmax
 * (running max m, sum l, f32 accumulator split over lanes along Dv) folds the tile in.
 *
 * Long key ranges with few blocks (decode) are split over gridDim.y segments, each writing
 * a partial (acc, m, l), merged by sdpa_combine. The split depends on the shape and the
 * full Tk only, never on the attended length read from the device, so a captured graph is
 * valid at every step; segments past the length do nothing.
 *
 * Semantics are the CPU's: query qi sees keys j in [qi + off - window + 1, qi + off] with
 * off = L - Tq (causal/window), a row that sees no key is zeros, a NaN score makes the row
 * NaN. A length outside [0, Tk] cannot be reported from here: the output is all NaN. */
#include <cuda_fp16.h>
#include <math.h>

#include "backends/cuda/attention_dec.h"
#include "backends/cuda/nn_kernels.h"

namespace {

constexpr int SD_RB = 16;  /* query rows per block */
constexpr int SD_BK = 32;  /* keys per tile (one per lane) */
constexpr int SD_WARPS = 4;
constexpr int SD_RW = SD_RB / SD_WARPS; /* rows per warp */
constexpr int SD_MAXV = 8; /* Dv <= 32 * SD_MAXV */

template <typename T> __device__ __forceinline__ float ldf(const T *p, int64_t i);
template <> __device__ __forceinline__ float ldf<float>(const float *p, int64_t i) { return p[i]; }
template <> __device__ __forceinline__ float ldf<__half>(const __half *p, int64_t i) { return __half2float(p[i]); }

__device__ __forceinline__ float wsum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float wmax(float v)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* The attended length, or -1 when it is out of range. */
__device__ __forceinline__ int64_t attended(const nn_sdpa &a)
{
    if (!a.len) return a.Tk;
    int64_t L = a.ldt == CT_I32 ? (int64_t) * (const int32_t *)a.len : *(const int64_t *)a.len;
    return L < 0 || L > a.Tk ? -1 : L;
}

struct row_id {
    int64_t h, qi, lo, hi; /* keys [lo, hi] visible; lo > hi: none */
    bool live;
};

__device__ __forceinline__ row_id row_of(const nn_sdpa &a, int64_t g, int64_t i, int64_t G, int64_t L)
{
    row_id r;
    r.live = i < G * a.Tq && L >= 0;
    r.h = g * G + i % G;
    r.qi = i / G;
    int64_t off = L - a.Tq;
    int64_t hi = a.causal ? r.qi + off : L - 1, lo = a.window > 0 ? r.qi + off - a.window + 1 : 0;
    r.hi = hi < L - 1 ? hi : L - 1;
    r.lo = lo > 0 ? lo : 0;
    if (!r.live) r.lo = 1, r.hi = 0;
    return r;
}

template <typename KT, typename VT> __global__ void __launch_bounds__(SD_WARPS * 32) sdpa_kernel(nn_sdpa a)
{
    extern __shared__ float sm[];
    const int64_t D = a.D, Dv = a.Dv, G = a.Hq / a.Hkv, rows = G * a.Tq;
    const int64_t nrb = (rows + SD_RB - 1) / SD_RB;
    const int64_t rb = blockIdx.x % nrb, g = (blockIdx.x / nrb) % a.Hkv, b = blockIdx.x / (nrb * a.Hkv);
    float *Qs = sm, *Ks = Qs + SD_RB * D, *Vs = Ks + SD_BK * (D + 1);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int64_t L = attended(a);

    /* this block's key range: the union of its rows' ranges within its segment */
    int64_t seg = (a.Tk + a.n_split - 1) / a.n_split;
    int64_t jlo = (int64_t)blockIdx.y * seg, jhi = jlo + seg - 1;
    if (jhi > L - 1) jhi = L - 1;
    int64_t blo = INT64_MAX, bhi = -1;
    for (int r = 0; r < SD_RB; r++) {
        row_id id = row_of(a, g, rb * SD_RB + r, G, L);
        if (id.lo > id.hi) continue;
        blo = id.lo < blo ? id.lo : blo;
        bhi = id.hi > bhi ? id.hi : bhi;
    }
    if (blo < jlo) blo = jlo;
    if (bhi > jhi) bhi = jhi;

    for (int64_t t = threadIdx.x; t < SD_RB * D; t += blockDim.x) {
        row_id id = row_of(a, g, rb * SD_RB + t / D, G, L);
        Qs[t] = id.live ? a.q[b * a.qs[0] + id.h * a.qs[1] + id.qi * a.qs[2] + t % D] : 0.0f;
    }
    row_id my[SD_RW];
    float m[SD_RW], l[SD_RW], acc[SD_RW][SD_MAXV];
    bool nan[SD_RW];
#pragma unroll
    for (int u = 0; u < SD_RW; u++) {
        my[u] = row_of(a, g, rb * SD_RB + warp + SD_WARPS * u, G, L);
        m[u] = -INFINITY, l[u] = 0.0f, nan[u] = false;
#pragma unroll
        for (int c = 0; c < SD_MAXV; c++) acc[u][c] = 0.0f;
    }
    const KT *kb = (const KT *)a.k + b * a.ks[0] + g * a.ks[1];
    const VT *vb = (const VT *)a.v + b * a.vs[0] + g * a.vs[1];
    for (int64_t j0 = blo; j0 <= bhi; j0 += SD_BK) {
        __syncthreads(); /* the previous tile (and Qs on the first pass) */
        for (int64_t t = threadIdx.x; t < SD_BK * D; t += blockDim.x) {
            int64_t jj = t / D, d = t % D;
            Ks[jj * (D + 1) + d] = j0 + jj <= bhi ? ldf(kb, (j0 + jj) * a.ks[2] + d) : 0.0f;
        }
        for (int64_t t = threadIdx.x; t < SD_BK * Dv; t += blockDim.x) {
            int64_t jj = t / Dv, d = t % Dv;
            Vs[t] = j0 + jj <= bhi ? ldf(vb, (j0 + jj) * a.vs[2] + d) : 0.0f;
        }
        __syncthreads();
        float s[SD_RW];
#pragma unroll
        for (int u = 0; u < SD_RW; u++) s[u] = 0.0f;
        const float *kr = Ks + lane * (D + 1);
        for (int64_t d = 0; d < D; d++) {
            float kd = kr[d];
#pragma unroll
            for (int u = 0; u < SD_RW; u++) s[u] += Qs[(warp + SD_WARPS * u) * D + d] * kd;
        }
        int64_t j = j0 + lane;
#pragma unroll
        for (int u = 0; u < SD_RW; u++) {
            bool valid = j <= bhi && j >= my[u].lo && j <= my[u].hi;
            float sc = -INFINITY;
            if (valid) {
                sc = s[u] * a.scale;
                if (a.mask) sc += a.mask[b * a.ms[0] + my[u].h * a.ms[1] + my[u].qi * a.ms[2] + j * a.ms[3]];
                if (sc != sc) nan[u] = true, sc = -INFINITY;
            }
            float mt = wmax(sc);
            if (mt == -INFINITY) continue;
            float mn = fmaxf(m[u], mt);
            float alpha = m[u] == -INFINITY ? 0.0f : expf(m[u] - mn);
            float p = sc == -INFINITY ? 0.0f : expf(sc - mn);
            l[u] = l[u] * alpha + wsum(p);
            m[u] = mn;
#pragma unroll
            for (int c = 0; c < SD_MAXV; c++) acc[u][c] *= alpha;
            for (int jj = 0; jj < SD_BK; jj++) {
                float pj = __shfl_sync(0xffffffffu, p, jj);
                if (pj == 0.0f) continue;
#pragma unroll
                for (int c = 0; c < SD_MAXV; c++) {
                    int64_t idx = lane + 32 * c;
                    if (idx < Dv) acc[u][c] += pj * Vs[jj * Dv + idx];
                }
            }
        }
    }
#pragma unroll
    for (int u = 0; u < SD_RW; u++) {
        int64_t i = rb * SD_RB + warp + SD_WARPS * u;
        if (i >= rows) continue;
        int64_t h = g * G + i % G, qi = i / G, orow = (b * a.Hq + h) * a.Tq + qi;
        bool bad = __any_sync(0xffffffffu, nan[u]) || L < 0;
        if (a.n_split == 1) {
            float inv = l[u] > 0 ? 1.0f / l[u] : 0.0f;
#pragma unroll
            for (int c = 0; c < SD_MAXV; c++) {
                int64_t idx = lane + 32 * c;
                if (idx < Dv) a.out[orow * Dv + idx] = bad ? NAN : acc[u][c] * inv;
            }
            continue;
        }
        float *pp = a.part + ((int64_t)blockIdx.y * a.B * a.Hq * a.Tq + orow) * (Dv + 2);
#pragma unroll
        for (int c = 0; c < SD_MAXV; c++) {
            int64_t idx = lane + 32 * c;
            if (idx < Dv) pp[idx] = acc[u][c];
        }
        if (lane == 0) pp[Dv] = bad ? NAN : m[u], pp[Dv + 1] = l[u];
    }
}

/* One warp per output row: rescale each segment's partial to the common max. */
__global__ void sdpa_combine(nn_sdpa a)
{
    int64_t R = a.B * a.Hq * a.Tq, row = (int64_t)blockIdx.x * 4 + (threadIdx.x >> 5);
    int lane = threadIdx.x & 31;
    if (row >= R) return;
    int64_t Dv = a.Dv, S = a.n_split;
    float mx = -INFINITY;
    bool nan = false;
    for (int64_t sg = 0; sg < S; sg++) {
        float ms = a.part[(sg * R + row) * (Dv + 2) + Dv];
        if (ms != ms) nan = true;
        else mx = fmaxf(mx, ms);
    }
    float w[64];
    float l = 0.0f;
    for (int64_t sg = 0; sg < S; sg++) {
        const float *pp = a.part + (sg * R + row) * (Dv + 2);
        w[sg] = pp[Dv + 1] > 0 && mx > -INFINITY ? expf(pp[Dv] - mx) : 0.0f;
        l += pp[Dv + 1] * w[sg];
    }
    float inv = l > 0 ? 1.0f / l : 0.0f;
    for (int64_t idx = lane; idx < Dv; idx += 32) {
        float o = 0.0f;
        for (int64_t sg = 0; sg < S; sg++)
            if (w[sg] != 0.0f) o += w[sg] * a.part[(sg * R + row) * (Dv + 2) + idx];
        a.out[row * Dv + idx] = nan ? NAN : o * inv;
    }
}

constexpr int SD_MAX_SPLIT = NN_SDPA_MAX_SPLIT;

template <typename KT, typename VT> cudaError_t sdpa_launch(const nn_sdpa *a, cudaStream_t s)
{
    size_t sm = nn_sdpa_smem(a->D, a->Dv);
    if (sm > 48 * 1024) {
        /* once, for the largest head dims supports() lets through (never inside a capture) */
        static const cudaError_t once = cudaFuncSetAttribute(sdpa_kernel<KT, VT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                             (int)nn_sdpa_smem(32 * SD_MAXV, 32 * SD_MAXV));
        if (once != cudaSuccess) return once;
    }
    int64_t G = a->Hq / a->Hkv, nrb = (G * a->Tq + SD_RB - 1) / SD_RB;
    dim3 grid((unsigned)(a->B * a->Hkv * nrb), (unsigned)a->n_split);
    sdpa_kernel<KT, VT><<<grid, SD_WARPS * 32, sm, s>>>(*a);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess || a->n_split == 1) return e;
    int64_t R = a->B * a->Hq * a->Tq;
    sdpa_combine<<<(unsigned)((R + 3) / 4), 128, 0, s>>>(*a);
    return cudaGetLastError();
}

} // namespace

extern "C" size_t nn_sdpa_smem(int64_t D, int64_t Dv)
{
    return sizeof(float) * (size_t)(SD_RB * D + SD_BK * (D + 1) + SD_BK * Dv);
}

extern "C" int nn_sdpa_splits(int64_t B, int64_t Hq, int64_t Hkv, int64_t Tq, int64_t Tk, int sm_count)
{
    int64_t G = Hq / Hkv, blocks = B * Hkv * ((G * Tq + SD_RB - 1) / SD_RB);
    const int64_t min_keys = 64; /* below this a segment costs more to merge than it saves */
    if (blocks >= sm_count || Tk < 2 * min_keys) return 1;
    int64_t n = (2 * (int64_t)sm_count + blocks - 1) / blocks;
    if (n > Tk / min_keys) n = Tk / min_keys;
    if (n > SD_MAX_SPLIT) n = SD_MAX_SPLIT;
    return n < 1 ? 1 : (int)n;
}

static bool dec_path(const nn_sdpa *a)
{
    return nn_sdpa_dec_ok(a->Hq, a->Hkv, a->Tq, a->D, a->Dv) && a->kdt == a->vdt && a->B * a->Hkv <= 65535;
}

extern "C" int nn_sdpa_plan(const nn_sdpa *a, int sm_count)
{
    if (nn_sdpa_tc_ok(a->Tq, a->D, a->Dv)) return 1;
    if (dec_path(a)) return nn_sdpa_dec_splits(a, sm_count);
    return nn_sdpa_splits(a->B, a->Hq, a->Hkv, a->Tq, a->Tk, sm_count);
}

static bool dec_runs(const nn_sdpa *a) { return dec_path(a) && a->n_split >= 1 && (a->n_split == 1 || a->count); }

extern "C" int nn_sdpa_q8_ok(const nn_sdpa *a)
{
    return !nn_sdpa_tc_ok(a->Tq, a->D, a->Dv) && dec_path(a) && a->n_split >= 1 && nn_sdpa_dec_tc_ok(a);
}

extern "C" cudaError_t nn_sdpa_run(const nn_sdpa *a, cudaStream_t s)
{
    if (a->oq && !(nn_sdpa_q8_ok(a) && dec_runs(a))) return cudaErrorInvalidValue; /* never a q8 form left unwritten */
    if (a->B * a->Hq * a->Tq == 0 || a->Dv == 0) return cudaSuccess;
    if (nn_sdpa_tc_ok(a->Tq, a->D, a->Dv)) return nn_sdpa_tc_run(a, s);
    if (dec_runs(a)) return nn_sdpa_dec_run(a, s);
    if (a->D > 32 * SD_MAXV || a->Dv > 32 * SD_MAXV || a->n_split < 1 || a->n_split > SD_MAX_SPLIT)
        return cudaErrorInvalidValue;
    bool kh = a->kdt == CT_F16, vh = a->vdt == CT_F16;
    if (kh && vh) return sdpa_launch<__half, __half>(a, s);
    if (kh) return sdpa_launch<__half, float>(a, s);
    if (vh) return sdpa_launch<float, __half>(a, s);
    return sdpa_launch<float, float>(a, s);
}
