/* The CUDA ew group's reductions (SUM MEAN PROD MAX MIN VAR STD NORM ARGMAX ARGMIN), with
 * the CPU's semantics (src/backends/cpu/reduce.c): floating sources accumulate in double,
 * integer sums/products wrap in 64 bits, NaN propagates through max/min, argmax/argmin
 * take the first NaN and the lowest index among ties. var/std combine partial (count,
 * mean, M2) triples (Chan et al.), which in double stays within rounding of the CPU's
 * two passes. Three schedules:
 *  - one thread per output, when outputs are many and short, or when the kept inner dim
 *    is contiguous and the reduced one is not (adjacent threads then read adjacent
 *    elements);
 *  - one block per output, threads striding over its reduced elements;
 *  - few outputs of many elements: G blocks per output write partials, a second kernel
 *    combines them (the partials live in a temporary the caller provides). */
#include "backends/cuda/ew_device.cuh"

using namespace ew;

namespace {

struct Acc {
    double s, best, mean, m2;
    int64_t cnt, idx, ib;
    uint64_t u;
    bool have;
};

struct Red {
    ew_red_plan p;
    __device__ bool is_max() const { return p.op == EW_R_MAX || p.op == EW_R_ARGMAX; }

    __device__ void init(Acc &a) const
    {
        a.s = p.op == EW_R_PROD ? 1.0 : 0.0;
        a.u = p.op == EW_R_PROD ? 1 : 0;
        a.best = p.op == EW_R_NORM ? 0.0 : is_max() ? -INFINITY : INFINITY;
        a.ib = is_max() ? INT64_MIN : INT64_MAX;
        a.mean = a.m2 = 0.0;
        a.cnt = a.idx = 0;
        a.have = false;
    }

    /* x is element number q (row-major within the output's reduced elements) */
    __device__ void add_f(Acc &a, double x, int64_t q) const
    {
        switch (p.op) {
        case EW_R_SUM: case EW_R_MEAN: a.s += x; break;
        case EW_R_PROD: a.s *= x; break;
        case EW_R_MAX: if (x > a.best || x != x) a.best = a.best != a.best ? a.best : x; break;
        case EW_R_MIN: if (x < a.best || x != x) a.best = a.best != a.best ? a.best : x; break;
        case EW_R_VAR: case EW_R_STD: {
            a.cnt++;
            double d = x - a.mean;
            a.mean += d / (double)a.cnt;
            a.m2 += d * (x - a.mean);
            break;
        }
        case EW_R_NORM:
            if (isinf(p.p)) {
                double v = fabs(x);
                if (v > a.best || v != v) a.best = a.best != a.best ? a.best : v;
            } else {
                a.s += p.p == 1.0 ? fabs(x) : p.p == 2.0 ? x * x : pow(fabs(x), p.p);
            }
            break;
        default: { /* ARGMAX / ARGMIN: a thread sees its elements in increasing q */
            bool mx = p.op == EW_R_ARGMAX;
            if (!a.have || (x != x && a.best == a.best) || (a.best == a.best && (mx ? x > a.best : x < a.best)))
                a.best = x, a.idx = q, a.have = true;
            break;
        }
        }
    }

    __device__ void add_i(Acc &a, int64_t v, int64_t q) const
    {
        switch (p.op) {
        case EW_R_SUM: case EW_R_MEAN: a.u += (uint64_t)v; break;
        case EW_R_PROD: a.u *= (uint64_t)v; break;
        case EW_R_MAX: if (v > a.ib) a.ib = v; break;
        case EW_R_MIN: if (v < a.ib) a.ib = v; break;
        case EW_R_ARGMAX: if (!a.have || v > a.ib) a.ib = v, a.idx = q, a.have = true; break;
        case EW_R_ARGMIN: if (!a.have || v < a.ib) a.ib = v, a.idx = q, a.have = true; break;
        default: break;
        }
    }

    /* a := a + b, in either order of their elements */
    __device__ void combine(Acc &a, const Acc &b) const
    {
        if (p.exact_int) {
            switch (p.op) {
            case EW_R_SUM: case EW_R_MEAN: a.u += b.u; return;
            case EW_R_PROD: a.u *= b.u; return;
            case EW_R_MAX: if (b.ib > a.ib) a.ib = b.ib; return;
            case EW_R_MIN: if (b.ib < a.ib) a.ib = b.ib; return;
            default: {
                if (!b.have) return;
                bool mx = p.op == EW_R_ARGMAX;
                if (!a.have || (mx ? b.ib > a.ib : b.ib < a.ib) || (b.ib == a.ib && b.idx < a.idx)) {
                    a.ib = b.ib, a.idx = b.idx, a.have = true;
                }
                return;
            }
            }
        }
        switch (p.op) {
        case EW_R_SUM: case EW_R_MEAN: a.s += b.s; return;
        case EW_R_PROD: a.s *= b.s; return;
        case EW_R_MAX: case EW_R_MIN: case EW_R_NORM:
            if (p.op == EW_R_NORM && !isinf(p.p)) {
                a.s += b.s;
                return;
            }
            if (a.best != a.best) return;
            if (b.best != b.best || (p.op == EW_R_MIN ? b.best < a.best : b.best > a.best)) a.best = b.best;
            return;
        case EW_R_VAR: case EW_R_STD: {
            if (!b.cnt) return;
            if (!a.cnt) {
                a.cnt = b.cnt, a.mean = b.mean, a.m2 = b.m2;
                return;
            }
            double n = (double)(a.cnt + b.cnt), d = b.mean - a.mean;
            a.mean += d * (double)b.cnt / n;
            a.m2 += b.m2 + d * d * (double)a.cnt * (double)b.cnt / n;
            a.cnt += b.cnt;
            return;
        }
        default: {
            if (!b.have) return;
            if (!a.have) {
                a.best = b.best, a.idx = b.idx, a.have = true;
                return;
            }
            bool mx = p.op == EW_R_ARGMAX, an = a.best != a.best, bn = b.best != b.best;
            bool take = an || bn ? (bn && (!an || b.idx < a.idx))
                                 : (mx ? b.best > a.best : b.best < a.best) || (b.best == a.best && b.idx < a.idx);
            if (take) a.best = b.best, a.idx = b.idx;
            return;
        }
        }
    }

    __device__ int64_t kept_offset(int64_t o) const
    {
        int64_t off = 0;
        for (int d = p.nk - 1; d >= 0; d--) {
            off += (o % p.kshape[d]) * p.kstride[d];
            o /= p.kshape[d];
        }
        return off;
    }
    __device__ int64_t red_offset(int64_t q) const
    {
        int64_t off = 0;
        for (int d = p.nr - 1; d >= 0; d--) {
            off += (q % p.rshape[d]) * p.rstride[d];
            q /= p.rshape[d];
        }
        return off;
    }

    template <class T> __device__ void add(Acc &a, const T *base, int64_t q) const
    {
        T v = base[red_offset(q)];
        if (p.exact_int) add_i(a, (int64_t)ld(v), q);
        else add_f(a, (double)ld(v), q);
    }

    __device__ void store(void *dst, int64_t o, const Acc &a) const
    {
        double n = (double)p.nred, v = 0.0;
        if (p.op == EW_R_ARGMAX || p.op == EW_R_ARGMIN) {
            ((int64_t *)dst)[o] = a.idx;
            return;
        }
        if (p.exact_int) {
            switch (p.op) {
            case EW_R_SUM: case EW_R_PROD: ((int64_t *)dst)[o] = (int64_t)a.u; return;
            case EW_R_MEAN: v = (double)(int64_t)a.u / n; break;
            default: /* MAX / MIN keep the dtype */
                switch (p.dt) {
                case CT_I64: ((int64_t *)dst)[o] = a.ib; return;
                case CT_I32: ((int32_t *)dst)[o] = (int32_t)a.ib; return;
                case CT_I8: ((int8_t *)dst)[o] = (int8_t)a.ib; return;
                default: ((bool *)dst)[o] = a.ib != 0; return;
                }
            }
        } else {
            switch (p.op) {
            case EW_R_SUM: case EW_R_PROD: v = a.s; break;
            case EW_R_MEAN: v = a.s / n; break;
            case EW_R_MAX: case EW_R_MIN: v = a.best; break;
            case EW_R_VAR: case EW_R_STD:
                v = a.m2 / (n - (p.unbiased ? 1.0 : 0.0));
                if (p.nred == 0 || (p.unbiased && p.nred == 1)) v = NAN;
                if (p.op == EW_R_STD) v = sqrt(v);
                break;
            default: /* NORM */
                v = isinf(p.p) ? a.best : p.p == 1.0 ? a.s : p.p == 2.0 ? sqrt(a.s) : pow(a.s, 1.0 / p.p);
                break;
            }
        }
        switch (p.dt) {
        case CT_F32: ((float *)dst)[o] = (float)v; break;
        case CT_F64: ((double *)dst)[o] = v; break;
        case CT_F16: ((__half *)dst)[o] = __float2half_rn((float)v); break;
        case CT_BF16: ((__nv_bfloat16 *)dst)[o] = __float2bfloat16_rn((float)v); break;
        case CT_I32: ((int32_t *)dst)[o] = (int32_t)v; break;
        case CT_I64: ((int64_t *)dst)[o] = (int64_t)v; break;
        case CT_I8: ((int8_t *)dst)[o] = (int8_t)v; break;
        default: ((bool *)dst)[o] = v != 0.0; break;
        }
    }
};

template <class T> __global__ void k_red_thread(Red r, void *dst, const T *src)
{
    EW_GRID_LOOP(o, r.p.nout) {
        Acc a;
        r.init(a);
        const T *base = src + r.kept_offset(o);
        for (int64_t q = 0; q < r.p.nred; q++) r.add(a, base, q);
        r.store(dst, o, a);
    }
}

/* Block tree over shared memory; the result lands in sh[0]. */
__device__ void block_combine(const Red &r, Acc *sh, Acc a)
{
    sh[threadIdx.x] = a;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) r.combine(sh[threadIdx.x], sh[threadIdx.x + w]);
        __syncthreads();
    }
}

/* Blocks (x: part, y..: output) each reduce elements [part * chunk, ...) of one output;
 * with one part they store the result, else they write their partial. */
template <class T> __global__ void k_red_block(Red r, void *dst, const T *src, Acc *parts, int64_t chunk)
{
    __shared__ Acc sh[kThreads];
    int64_t o = (int64_t)blockIdx.y + (int64_t)blockIdx.z * gridDim.y;
    if (o >= r.p.nout) return;
    const T *base = src + r.kept_offset(o);
    int64_t q0 = (int64_t)blockIdx.x * chunk, q1 = q0 + chunk < r.p.nred ? q0 + chunk : r.p.nred;
    Acc a;
    r.init(a);
    for (int64_t q = q0 + threadIdx.x; q < q1; q += blockDim.x) r.add(a, base, q);
    block_combine(r, sh, a);
    if (threadIdx.x) return;
    if (gridDim.x == 1) r.store(dst, o, sh[0]);
    else parts[o * gridDim.x + blockIdx.x] = sh[0];
}

__global__ void k_red_finish(Red r, void *dst, const Acc *parts, int n_parts)
{
    __shared__ Acc sh[kThreads];
    int64_t o = blockIdx.x;
    Acc a;
    r.init(a);
    for (int i = threadIdx.x; i < n_parts; i += blockDim.x) r.combine(a, parts[o * n_parts + i]);
    block_combine(r, sh, a);
    if (!threadIdx.x) r.store(dst, o, sh[0]);
}

struct Schedule {
    bool per_thread;
    int parts;
};

Schedule schedule(const ew_red_plan *p, int sm_count)
{
    bool inner_red = p->nr > 0 && p->rstride[p->nr - 1] == 1;
    bool inner_kept = p->nk > 0 && p->kstride[p->nk - 1] == 1;
    if (p->nred <= 32 || (inner_kept && !inner_red && p->nout >= 2048)) return {true, 1};
    int parts = 1;
    int64_t want = 4 * (int64_t)(sm_count > 0 ? sm_count : 100);
    if (p->nout < want && p->nred >= 64 * kThreads) {
        int64_t by_len = p->nred / (16 * kThreads), by_sm = (want + p->nout - 1) / p->nout;
        int64_t g = by_len < by_sm ? by_len : by_sm;
        parts = (int)(g > 1024 ? 1024 : g < 1 ? 1 : g);
    }
    return {false, parts};
}

template <class T>
cudaError_t reduce_t(const ew_red_plan *p, void *dst, const void *src, void *tmp, int sm_count, cudaStream_t s)
{
    Red r{*p};
    Schedule sc = schedule(p, sm_count);
    if (sc.per_thread) {
        k_red_thread<T><<<blocks_for(p->nout), kThreads, 0, s>>>(r, dst, (const T *)src);
        return cudaGetLastError();
    }
    int64_t chunk = (p->nred + sc.parts - 1) / sc.parts;
    int64_t gy = p->nout < 65535 ? p->nout : 65535, gz = (p->nout + gy - 1) / gy;
    if (sc.parts > 1 && !tmp) return cudaErrorInvalidValue;
    dim3 grid((unsigned)sc.parts, (unsigned)gy, (unsigned)gz);
    k_red_block<T><<<grid, kThreads, 0, s>>>(r, dst, (const T *)src, (Acc *)tmp, chunk);
    if (sc.parts > 1) k_red_finish<<<(unsigned)p->nout, kThreads, 0, s>>>(r, dst, (const Acc *)tmp, sc.parts);
    return cudaGetLastError();
}

} // namespace

extern "C" size_t ew_reduce_tmp_bytes(const ew_red_plan *p, int sm_count)
{
    Schedule sc = schedule(p, sm_count);
    return sc.per_thread || sc.parts == 1 ? 0 : (size_t)p->nout * (size_t)sc.parts * sizeof(Acc);
}

extern "C" cudaError_t ew_launch_reduce(const ew_red_plan *p, void *dst, const void *src, void *tmp, int sm_count,
                                        cudaStream_t s)
{
    if (p->nout <= 0) return cudaSuccess;
    EW_DISPATCH(p->st, return reduce_t<T>(p, dst, src, tmp, sm_count, s))
}
