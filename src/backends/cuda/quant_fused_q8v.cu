/* The fused job kernel for vocabulary-sized Q8_0 products at decode: the output projection
 * of tied Q8_0 embeddings (Gemma 3 270M: 262,144 x 640, 178 MB a token; SmolLM2 135M:
 * 49,152 x 576, below V8_MIN_N), M = 1, one weight, no epilogue, x's q8 form given.
 *
 * A 34-byte Q8_0 block is only 2-byte aligned, so the generic kernel's chunk path reads it
 * in 2-byte loads, a warp's loads spread over many sectors. Here the rows are one
 * contiguous span: a warp takes V8_ROWS consecutive rows a round, copies their bytes into
 * one of its two shared-memory buffers with 16-byte asynchronous copies of consecutive
 * lanes (every sector read once, bypassing L1; the next round's copies are issued before
 * this round is decoded, so the warp's loads never stop), then V8_LANES lanes per row each
 * decode every V8_LANES-th block of it from shared memory (aligned words, shifted into place
 * where a block sits 2 bytes off) against x's quants for those blocks, which the lane
 * loaded once for every row. Each block is one integer dot of 32 quants (8 dp4a) and one scale
 * product, as the CPU's Q8_0 x Q8_0 dot; the lanes' sums meet by shuffles. The grid is one
 * wave, warps looping over the rounds. CTORCH_CUDA_MVQ8V=0 sends these jobs back to the
 * generic kernel. */
#include "backends/cuda/quant_fused.cuh"

namespace cufu {
namespace {

constexpr int V8_BYTES = 34, V8_ROWS = 4, V8_LANES = 32 / V8_ROWS;
constexpr int V8_MAX_NB = 32;                            /* blocks a row: K up to 1,024 */
constexpr int V8_KB = V8_MAX_NB / V8_LANES;              /* blocks a lane a row */
constexpr int V8_SPAN = V8_ROWS * V8_MAX_NB * V8_BYTES;  /* a round's bytes at most */
constexpr int V8_BUF = (V8_SPAN + 15 + 15) / 16 * 16;    /* a warp's buffer */
/* Rows from which a job takes it. Measured on the H200 (tg128 -r 3, three rounds alternated
 * with CTORCH_CUDA_MVQ8V=0 in one call, the real files): Gemma 3 270M (262,144 rows) 1,459-1,462
 * against 1,401-1,403 t/s, its output projection 66 us of the step on the device (2.7 TB/s); SmolLM2 135M
 * (49,152 rows) 1,377-1,382 against 1,384-1,386, so that one stays on the generic kernel. With the
 * second buffer (session 44) Gemma's projection takes 48 us (3.7 TB/s), tg128 1,569-1,571
 * against 1,552-1,554 t/s. */
constexpr int64_t V8_MIN_N = 65536;

/* x's quants and scale for block j of a row (j < nb), in registers for every row. */
struct XBlock {
    int4 lo, hi;
    float d;
};

/* Block j's products with x: the 32 quants (2-byte aligned at p) against xb's. */
__device__ __forceinline__ float block_dot(const uint8_t *blk, const XBlock &xb)
{
    bool mis = ((uintptr_t)(blk + 2) & 2) != 0;
    Words<8> q;
    load_words<8>(blk + 2, mis, q);
    int x[8] = {xb.lo.x, xb.lo.y, xb.lo.z, xb.lo.w, xb.hi.x, xb.hi.y, xb.hi.z, xb.hi.w};
    int si = 0;
#pragma unroll
    for (int i = 0; i < 8; i++) si = __dp4a((int)word_at(q, mis, i), x[i], si);
    float d = cuq::h2f(*(const uint16_t *)blk);
    return d * xb.d * (float)si;
}

/* 16-byte asynchronous copies global -> shared, around L1 (cp.async.cg), in groups */
__device__ __forceinline__ void v8_cp16(void *dst, const void *src)
{
    unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void v8_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void v8_wait_older() { asm volatile("cp.async.wait_group 1;\n" ::: "memory"); }

/* Where round r's rows sit: their first byte's offset in its 16-byte granule, the row count
 * and the granules to copy */
struct V8Round {
    const uint8_t *g0;
    int off, nr, ng;
};
__device__ __forceinline__ V8Round v8_round(const FuPart &P, int64_t r)
{
    const int64_t row0 = r * V8_ROWS;
    const uint8_t *p0 = P.w + (size_t)row0 * P.w_row;
    V8Round q;
    q.g0 = (const uint8_t *)((uintptr_t)p0 & ~(uintptr_t)15);
    q.off = (int)(p0 - q.g0);
    q.nr = (int)min((int64_t)V8_ROWS, P.N - row0);
    q.ng = (q.off + q.nr * (int)P.w_row + 15) / 16;
    return q;
}

/* Round r's granules into a warp's buffer, one group (empty past the last round, so that
 * every iteration commits one and the wait below always means "this round's") */
__device__ __forceinline__ void v8_issue(const FuPart &P, int64_t r, int64_t rounds, uint8_t *dst, int lane)
{
    if (r < rounds) {
        const V8Round q = v8_round(P, r);
        for (int i = lane; i < q.ng; i += 32) v8_cp16(dst + 16 * i, q.g0 + 16 * i);
    }
    v8_commit();
}

/* Two buffers a warp: round r + stride's copies are in flight while round r is decoded. */
__global__ void __launch_bounds__(FU_THREADS) q8v_kernel(const FuArgs a)
{
    extern __shared__ __align__(16) uint8_t v8_buf[];
    cupdl::pdl_launch_next();
    const FuPart &P = a.p[0];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, rr = lane / V8_LANES, jl = lane % V8_LANES;
    const int nb = (int)(a.K / 32);
    const int64_t rounds = (P.N + V8_ROWS - 1) / V8_ROWS, stride = (int64_t)gridDim.x * FU_WARPS;
    uint8_t *const wb = v8_buf + 2 * warp * V8_BUF; /* buffer b at wb + b * V8_BUF */
    cupdl::pdl_wait();
    int64_t r = (int64_t)blockIdx.x * FU_WARPS + warp;
    v8_issue(P, r, rounds, wb, lane);
    XBlock xb[V8_KB];
#pragma unroll
    for (int k = 0; k < V8_KB; k++) {
        int j = jl + V8_LANES * k;
        if (j < nb) {
            xb[k].lo = cupdl::ld_act((const int4 *)(a.xq + 32 * j));
            xb[k].hi = cupdl::ld_act((const int4 *)(a.xq + 32 * j + 16));
            xb[k].d = cupdl::ld_act(a.xd + j);
        }
    }
    for (int b = 0; r < rounds; r += stride, b ^= 1) {
        v8_issue(P, r + stride, rounds, wb + (b ^ 1) * V8_BUF, lane);
        v8_wait_older(); /* this lane's copies of round r are in */
        __syncwarp();    /* and every lane's */
        const V8Round q = v8_round(P, r);
        float acc = 0.f;
        if (rr < q.nr) {
            const uint8_t *row = wb + b * V8_BUF + q.off + rr * P.w_row;
#pragma unroll
            for (int k = 0; k < V8_KB; k++) {
                int j = jl + V8_LANES * k;
                if (j < nb) acc += block_dot(row + V8_BYTES * j, xb[k]);
            }
        }
#pragma unroll
        for (int o = V8_LANES / 2; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
        if (jl == 0 && rr < q.nr) P.out[r * V8_ROWS + rr] = acc;
        __syncwarp(); /* buffer b is read: the next iteration may refill it */
    }
}

} // namespace

bool launch_q8v_job(FuArgs &a, int64_t M, bool glu, int sm_count, cudaStream_t st)
{
    const char *e = getenv("CTORCH_CUDA_MVQ8V"); /* read at each launch: a test runs both ways */
    const FuPart &P = a.p[0];
    if ((e && e[0] == '0') || M != 1 || glu || a.n_parts != 1 || a.stage || a.rp || !a.xq || P.wt != CT_Q8_0 || P.add ||
        P.N < V8_MIN_N || a.K % 32 != 0 || a.K / 32 > V8_MAX_NB || P.w_row != (size_t)(a.K / 32) * V8_BYTES)
        return false;
    constexpr unsigned smem = 2 * FU_WARPS * V8_BUF; /* past the 48 KB a launch gets unasked */
    static int occ; /* blocks an SM; -1: the kernel cannot have its buffers, the generic one takes the jobs */
    if (occ == 0) {
        int nb = 0;
        occ = cudaFuncSetAttribute(q8v_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem) == cudaSuccess &&
                      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&nb, q8v_kernel, FU_THREADS, smem) == cudaSuccess &&
                      nb >= 1
                  ? nb
                  : -1;
    }
    if (occ < 0) return false;
    int64_t rounds = (P.N + V8_ROWS - 1) / V8_ROWS, blocks = (rounds + FU_WARPS - 1) / FU_WARPS;
    int64_t wave = (int64_t)sm_count * occ;
    launch_smem(q8v_kernel, (unsigned)(blocks < wave ? blocks : wave), smem, st, a);
    return true;
}

} // namespace cufu
