/* MATMUL on the CPU: a [..., M, K] @ b [..., K, N] -> dst [..., M, N] (contiguous),
 * batch shapes equal (the frontend expanded them, so batch strides may be 0).
 * f32/f64/c64 go through the GEMM layer with the views' own strides (no copies
 * for contiguous or transposed operands); f16/bf16 are widened to f32 per batch;
 * integer types use exact wrap-around loops. */
#include <stdlib.h>

#include "backends/cpu/gemm.h"

/* Batch index -> element offsets of a, b (dst is contiguous: offset = idx * M * N). */
static void batch_offsets(const ct_tensor *a, const ct_tensor *b, int nb, int64_t idx, int64_t *oa, int64_t *ob)
{
    *oa = *ob = 0;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t i = idx % a->shape[d];
        idx /= a->shape[d];
        *oa += i * a->stride[d];
        *ob += i * b->stride[d];
    }
}

/* When b is shared by every batch (all batch strides 0) and a's batch dims fold into
 * its rows, the whole product is one [B*M, K] @ [K, N] GEMM. */
static bool fold_batch(const ct_tensor *a, const ct_tensor *b, int nb, int64_t *rows_stride)
{
    for (int d = 0; d < nb; d++)
        if (b->stride[d] != 0 && b->shape[d] != 1) return false;
    int64_t M = a->shape[nb];
    int64_t expect = M == 1 ? -1 : a->stride[nb]; /* -1: row stride still free */
    int64_t span = M;                             /* rows covered so far */
    for (int d = nb - 1; d >= 0; d--) {
        if (a->shape[d] == 1) continue;
        if (expect == -1) expect = a->stride[d];
        if (a->stride[d] != expect * span) return false;
        span *= a->shape[d];
    }
    *rows_stride = expect == -1 ? a->shape[nb + 1] : expect;
    return true;
}

typedef struct int_job {
    const ct_tensor *a, *b;
    const char *pa, *pb;
    char *pc;
    int nb;
    int64_t M, N, K;
    bool oom;
} int_job;

static inline uint64_t load_u64(const char *p, ct_dtype t)
{
    return t == CT_I64 ? (uint64_t) * (const int64_t *)p : (uint64_t)(int64_t) * (const int32_t *)p;
}

/* Integer matmul wraps around like torch's (unsigned arithmetic: no UB). */
static void int_rows(void *vctx, int64_t r0, int64_t r1)
{
    const int_job *j = vctx;
    ct_dtype dt = j->a->dtype;
    size_t es = ct_dtype_block_bytes(dt);
    int nb = j->nb;
    int64_t sam = j->a->stride[nb], sak = j->a->stride[nb + 1], sbk = j->b->stride[nb], sbn = j->b->stride[nb + 1];
    uint64_t *acc = malloc(sizeof(uint64_t) * (size_t)(j->N ? j->N : 1));
    if (!acc) {
        __atomic_store_n(&((int_job *)vctx)->oom, true, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        int64_t bi = r / j->M, m = r % j->M, oa, ob;
        batch_offsets(j->a, j->b, nb, bi, &oa, &ob);
        memset(acc, 0, sizeof(uint64_t) * (size_t)j->N);
        for (int64_t k = 0; k < j->K; k++) {
            uint64_t av = load_u64(j->pa + (size_t)(oa + m * sam + k * sak) * es, dt);
            const char *brow = j->pb + (size_t)(ob + k * sbk) * es;
            for (int64_t n = 0; n < j->N; n++) acc[n] += av * load_u64(brow + (size_t)(n * sbn) * es, dt);
        }
        char *c = j->pc + (size_t)(r * j->N) * es;
        for (int64_t n = 0; n < j->N; n++) {
            if (dt == CT_I64) ((int64_t *)c)[n] = (int64_t)acc[n];
            else ((int32_t *)c)[n] = (int32_t)(uint32_t)acc[n];
        }
    }
    free(acc);
}

/* f16/bf16: widen both operands of one batch to f32, sgemm, narrow the result. */
static ct_status half_matmul(const ct_tensor *a, const ct_tensor *b, const char *pa, const char *pb, uint16_t *pc,
                             int nb, int64_t nbatch, int64_t M, int64_t N, int64_t K)
{
    ct_dtype dt = a->dtype;
    float *fa = malloc(sizeof(float) * (size_t)(M * K + K * N + M * N + 1));
    if (!fa) return core_err(CT_ERR_OOM, "matmul: no memory for f32 copies of %s operands", ct_dtype_name(dt));
    float *fb = fa + M * K, *fc = fb + K * N;
    int64_t sam = a->stride[nb], sak = a->stride[nb + 1], sbk = b->stride[nb], sbn = b->stride[nb + 1];
    ct_status s = CT_OK;
    for (int64_t bi = 0; bi < nbatch && s == CT_OK; bi++) {
        int64_t oa, ob;
        batch_offsets(a, b, nb, bi, &oa, &ob);
        const uint16_t *ha = (const uint16_t *)pa + oa, *hb = (const uint16_t *)pb + ob;
        for (int64_t m = 0; m < M; m++)
            for (int64_t k = 0; k < K; k++) {
                uint16_t h = ha[m * sam + k * sak];
                fa[m * K + k] = dt == CT_F16 ? ct_f16_to_f32(h) : ct_bf16_to_f32(h);
            }
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++) {
                uint16_t h = hb[k * sbk + n * sbn];
                fb[k * N + n] = dt == CT_F16 ? ct_f16_to_f32(h) : ct_bf16_to_f32(h);
            }
        s = cpu_gemm_f32(M, N, K, fa, K, 1, fb, N, 1, fc, N, false);
        uint16_t *c = pc + bi * M * N;
        for (int64_t i = 0; s == CT_OK && i < M * N; i++) c[i] = dt == CT_F16 ? ct_f32_to_f16(fc[i]) : ct_f32_to_bf16(fc[i]);
    }
    free(fa);
    return s;
}

ct_status cpu_run_matmul(ct_device *dev, const ct_op *op)
{
    const ct_tensor *a = op->src[0], *b = op->src[1];
    ct_tensor *dst = op->dst;
    int nb = a->ndim - 2;
    if (nb < 0 || b->ndim != a->ndim || dst->ndim != a->ndim || b->dtype != a->dtype || dst->dtype != a->dtype)
        return core_err(CT_ERR_SHAPE, "matmul: kernel needs a [..., M, K], b [..., K, N] of one dtype, got %s and %s",
                        SHAPE_STR(a), SHAPE_STR(b));
    int64_t M = a->shape[nb], K = a->shape[nb + 1], N = b->shape[nb + 1];
    int64_t nbatch = shape_numel(nb, a->shape);
    if (nbatch == 0 || M == 0 || N == 0) return CT_OK;
    const char *pa = op_data(a, dev), *pb = op_data(b, dev);
    char *pc = op_data(dst, dev);
    if (K == 0) {
        memset(pc, 0, ct_tensor_nbytes(dst));
        return CT_OK;
    }
    int64_t sam = a->stride[nb], sak = a->stride[nb + 1], sbk = b->stride[nb], sbn = b->stride[nb + 1];
    ct_dtype dt = a->dtype;
    if (dt == CT_F32 || dt == CT_F64) {
        int64_t rs;
        if (nbatch > 1 && fold_batch(a, b, nb, &rs) && (sak == 1 || K == 1)) {
            if (dt == CT_F32)
                return cpu_gemm_f32(nbatch * M, N, K, (const float *)pa, rs, sak, (const float *)pb, sbk, sbn,
                                    (float *)pc, N, false);
            return cpu_gemm_f64(nbatch * M, N, K, (const double *)pa, rs, sak, (const double *)pb, sbk, sbn,
                                (double *)pc, N, false);
        }
        for (int64_t bi = 0; bi < nbatch; bi++) {
            int64_t oa, ob;
            batch_offsets(a, b, nb, bi, &oa, &ob);
            ct_status s = dt == CT_F32
                              ? cpu_gemm_f32(M, N, K, (const float *)pa + oa, sam, sak, (const float *)pb + ob, sbk,
                                             sbn, (float *)pc + bi * M * N, N, false)
                              : cpu_gemm_f64(M, N, K, (const double *)pa + oa, sam, sak, (const double *)pb + ob, sbk,
                                             sbn, (double *)pc + bi * M * N, N, false);
            if (s != CT_OK) return s;
        }
        return CT_OK;
    }
    if (dt == CT_C64) {
        for (int64_t bi = 0; bi < nbatch; bi++) {
            int64_t oa, ob;
            batch_offsets(a, b, nb, bi, &oa, &ob);
            ct_status s = cpu_gemm_c64(M, N, K, (const float *)pa + 2 * oa, sam, sak, (const float *)pb + 2 * ob, sbk,
                                       sbn, (float *)pc + 2 * bi * M * N, N);
            if (s != CT_OK) return s;
        }
        return CT_OK;
    }
    if (dt == CT_F16 || dt == CT_BF16) return half_matmul(a, b, pa, pb, (uint16_t *)pc, nb, nbatch, M, N, K);
    if (dt == CT_I32 || dt == CT_I64) {
        int_job j = {a, b, pa, pb, pc, nb, M, N, K, false};
        cpu_parallel_for(nbatch * M, (65536 + N * K) / (N * K + 1), int_rows, &j);
        if (j.oom) return core_err(CT_ERR_OOM, "matmul: no memory for a row of %lld accumulators", (long long)N);
        return CT_OK;
    }
    return core_err(CT_ERR_DTYPE, "matmul: no CPU kernel for %s", ct_dtype_name(dt));
}
