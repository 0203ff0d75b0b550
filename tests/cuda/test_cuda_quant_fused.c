/* The fused decode kernels (quant_kernels.h, "Fused decode"; quant_fused.cu) against
 * host references, on raw device memory:
 * - cuq_quantize_q8: bit-exact against the same rounding on the host (d = amax / 127,
 *   q = round-half-even(v / d), s8 = d * sum of 8 quants; IEEE division on both sides);
 * - cuq_rms_norm_q8 (f32 / f16 / bf16 weight, none): y against a double evaluation of the
 *   CPU's formula x * (1 / sqrt(mean(x^2) + eps)) * w, NMSE <= 1e-11 (f32 roundings of a
 *   sum of K squares and two products: ~1e-14), and its q8 form bit-exact against the host
 *   rounding of the GPU's own y;
 * - cuq_mv_run: every weight format (ten block formats, f16, bf16, f32), M = 1..8, K = 576
 *   and 640 (legacy and float formats), 768, 2048, 5632, strided x, one to four parts with different
 *   formats in one job, the add epilogue, the gated epilogue (SWIGLU, GEGLU), x's q8 form
 *   given by the caller or made by the run (staged in the kernel's shared memory, or by a
 *   quantize kernel first where it does not fit), or (one row of x, a small weight, no q8 form
 *   given) the quantized weight dequantized and multiplied with f32 x; the job's own RMS
 *   norm of x (weight f32 / f16 / bf16 / none), its y against double (NMSE <= 1e-11, as
 *   above) and the products against references on the host's normed x; vocabulary-sized
 *   Q8_0 jobs on their own kernel and on the generic one. Outputs start NaN-poisoned with a poisoned
 *   guard after them: an element left unwritten fails, and so does one written past the end.
 *
 * Tolerances (normalized MSE, sum (gpu - ref)^2 / sum ref^2):
 * - quantized weights against the exact product of the dequantized weight (double): the
 *   GPU rounds x to 8 bits per 32 elements like the CPU's Q8_0 for its dots. One rounding
 *   of uniform x in [-1, 1) (step amax/127, amax ~ 1) has error variance step^2/12 = 5.2e-6
 *   against E[x^2] = 1/3: 1.6e-5 relative per element, and the dot's NMSE is the same
 *   (independent errors). Bound 1e-4 (6x margin).
 * - quantized weights against the CPU's own quantized dot (quant_get_vec_dot, x rounded by
 *   the CPU to Q8_0 / Q8_1 / Q8_K): two independent roundings, 3.2e-5. Bound 2e-4. A wrong
 *   scale on one 16-element group in 32 gives ~1e-2.
 * - quantized weights with x's q8 form given against the exact product (double) of the
 *   dequantized weight with that q8 form as the GPU holds it (read back): the integer dots
 *   are exact, so only the f32 sums of K / 16 chunk products (and of the offset terms, which
 *   partly cancel them) remain, NMSE ~1e-12. Bound 1e-9; one wrong 16-element chunk in a
 *   2048-element row gives ~1e-2.
 * - f16 / bf16 / f32 weights, and quantized ones on the dequantizing path, read x in f32: only f32 accumulation, relative ~eps * sqrt(K)
 *   = 4.5e-6 at K = 5632, NMSE ~2e-11. Bound 1e-9.
 * - gated output against act(g) * u in double of the exact g, u: the q8 errors of both
 *   products, ~3e-5 each. Bound 2e-4; and against act(g) * u in f32 of the GPU's own g, u
 *   (the epilogue formula alone): 1e-10.
 * - add epilogue: out2 against add + the GPU's out, both f32: one rounding, 1e-12. */
#include <stdlib.h>
#include <string.h>

#include "devcheck.h"
#include "quant/quant.h"

#ifdef CTORCH_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "backends/cuda/quant_kernels.h"

static char dev_name[32];

static bool have_dev(void) { return devcheck_device("cuda", dev_name, sizeof dev_name) != NULL; }

#define CHECK_CUDA(x) CHECK_MSG((x) == cudaSuccess, "%s", cudaGetErrorString(cudaGetLastError()))

static int sm_count(void)
{
    int dev = 0, n = 0;
    cudaGetDevice(&dev);
    cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev);
    return n > 0 ? n : 1;
}

#define GUARD 64 /* poisoned floats after every output */

/* Device memory of `bytes` (+ a guard), every byte 0xFF: a float NaN. */
static void *dev_poisoned(size_t bytes)
{
    void *p = NULL;
    CHECK_CUDA(cudaMalloc(&p, bytes + GUARD * sizeof(float)));
    if (p) CHECK_CUDA(cudaMemset(p, 0xFF, bytes + GUARD * sizeof(float)));
    return p;
}

static void *dev_copy(const void *h, size_t bytes)
{
    void *p = NULL;
    CHECK_CUDA(cudaMalloc(&p, bytes));
    if (p) CHECK_CUDA(cudaMemcpy(p, h, bytes, cudaMemcpyHostToDevice));
    return p;
}

/* n floats of an output, and whether its guard is still poisoned. */
static float *fetch(const float *d, int64_t n, bool *guard_ok)
{
    float *h = malloc(sizeof(float) * (size_t)(n + GUARD));
    CHECK_CUDA(cudaMemcpy(h, d, sizeof(float) * (size_t)(n + GUARD), cudaMemcpyDeviceToHost));
    const unsigned char *g = (const unsigned char *)(h + n);
    *guard_ok = true;
    for (size_t i = 0; i < GUARD * sizeof(float); i++)
        if (g[i] != 0xFF) *guard_ok = false;
    return h;
}

static double nmse_f(const float *got, const double *ref, int64_t n)
{
    double *g = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) g[i] = got[i];
    int bad = 0;
    double e = devcheck_nmse(g, ref, n, &bad);
    free(g);
    return bad ? INFINITY : e;
}

/* ---- host rounding of x into the q8 form ---- */

typedef struct host_q8 {
    int8_t *q;
    float *d, *s8;
} host_q8;

/* gs: elements a scale (32; 8 for the d8 form) */
static void host_quantize_gs(const float *y, int64_t M, int64_t K, int gs, host_q8 *h)
{
    h->q = malloc((size_t)(M * K));
    h->d = malloc(sizeof(float) * (size_t)(M * K / gs));
    h->s8 = malloc(sizeof(float) * (size_t)(M * K / 8));
    for (int64_t b = 0; b < M * K / gs; b++) {
        const float *v = y + b * gs;
        float amax = 0.f;
        for (int i = 0; i < gs; i++) amax = fmaxf(amax, fabsf(v[i]));
        float d = amax / 127.f, id = d != 0.f ? 1.f / d : 0.f;
        h->d[b] = d;
        for (int i = 0; i < gs; i++) {
            float r = nearbyintf(v[i] * id);
            h->q[b * gs + i] = (int8_t)(r > 127.f ? 127 : r < -127.f ? -127 : r);
        }
        for (int j = 0; j < gs / 8; j++) {
            int s = 0;
            for (int i = 0; i < 8; i++) s += h->q[b * gs + 8 * j + i];
            h->s8[b * gs / 8 + j] = d * (float)s;
        }
    }
}


static void host_q8_free(host_q8 *h)
{
    free(h->q);
    free(h->d);
    free(h->s8);
}

/* The device q8 form (either kind, dq->d8) equals the host's rounding of y, bit for bit. */
static void check_q8(const cuq_q8 *dq, const float *y, int64_t M, int64_t K, const char *what)
{
    int gs = dq->d8 ? 8 : 32;
    host_q8 h;
    host_quantize_gs(y, M, K, gs, &h);
    int8_t *q = malloc((size_t)(M * K));
    float *d = malloc(sizeof(float) * (size_t)(M * K / gs)), *s8 = malloc(sizeof(float) * (size_t)(M * K / 8));
    CHECK_CUDA(cudaMemcpy(q, dq->q, (size_t)(M * K), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(d, dq->d, sizeof(float) * (size_t)(M * K / gs), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(s8, dq->s8, sizeof(float) * (size_t)(M * K / 8), cudaMemcpyDeviceToHost));
    CHECK_MSG(memcmp(q, h.q, (size_t)(M * K)) == 0, "%s: quants differ (M %lld K %lld)", what, (long long)M,
              (long long)K);
    CHECK_MSG(memcmp(d, h.d, sizeof(float) * (size_t)(M * K / gs)) == 0, "%s: scales differ", what);
    CHECK_MSG(memcmp(s8, h.s8, sizeof(float) * (size_t)(M * K / 8)) == 0, "%s: sums of 8 differ", what);
    free(q);
    free(d);
    free(s8);
    host_q8_free(&h);
}

static float *random_f(th_rng *r, int64_t n, double lo, double hi)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (float)th_uniform(r, lo, hi);
    return v;
}

static void test_quantize_q8(void)
{
    if (!have_dev()) return;
    th_rng r = {11};
    const int64_t Ms[] = {1, 3, 8}, Ks[] = {32, 640, 5632};
    for (int im = 0; im < 3; im++)
        for (int ik = 0; ik < 3; ik++) {
            int64_t M = Ms[im], K = Ks[ik], xr = K + 8;
            float *x = random_f(&r, M * xr, -3, 3);
            for (int64_t k = 0; k < 32; k++) x[k] = 0.f; /* an all-zero block: d = 0, q = 0 */
            float *dx = dev_copy(x, sizeof(float) * (size_t)(M * xr));
            void *mem = dev_poisoned(cuq_q8_bytes(M, K));
            cuq_q8 q = cuq_q8_at(mem, M, K);
            CHECK(cuq_quantize_q8(dx, xr, M, K, &q, 0));
            CHECK_CUDA(cudaDeviceSynchronize());
            float *packed = malloc(sizeof(float) * (size_t)(M * K));
            for (int64_t m = 0; m < M; m++) memcpy(packed + m * K, x + m * xr, sizeof(float) * (size_t)K);
            check_q8(&q, packed, M, K, "quantize_q8");
            CHECK(!cuq_quantize_q8(dx, xr, M, K + 16, &q, 0)); /* K not a multiple of 32 / not q's */
            free(packed);
            free(x);
            cudaFree(dx);
            cudaFree(mem);
        }
}

/* ---- rms_norm + q8 ---- */

static void weight_as(const float *w, int64_t n, ct_dtype t, void **host)
{
    size_t es = ct_dtype_block_bytes(t);
    char *h = malloc(es * (size_t)n);
    for (int64_t i = 0; i < n; i++) {
        if (t == CT_F32) memcpy(h + i * 4, &w[i], 4);
        else {
            uint16_t v = t == CT_F16 ? ct_f32_to_f16(w[i]) : ct_f32_to_bf16(w[i]);
            memcpy(h + i * 2, &v, 2);
        }
    }
    *host = h;
}

static void test_rms_norm_q8(void)
{
    if (!have_dev()) return;
    th_rng r = {22};
    const ct_dtype wts[] = {CT_F32, CT_F16, CT_BF16, CT_F32};
    const int64_t Ms[] = {1, 2, 8}, Ks[] = {64, 2048, 5632};
    const float eps = 1e-5f;
    for (int iw = 0; iw < 4; iw++)
        for (int im = 0; im < 3; im++)
            for (int ik = 0; ik < 3; ik++) {
                bool no_w = iw == 3, with_q = !(im == 1 && ik == 0);
                int64_t M = Ms[im], K = Ks[ik], xr = K + 4;
                float *x = random_f(&r, M * xr, -2, 2), *w = random_f(&r, K, 0.5, 1.5);
                void *hw;
                weight_as(w, K, wts[iw], &hw);
                float *wv = malloc(sizeof(float) * (size_t)K); /* the weight as the kernel sees it */
                CHECK_OK(quant_dequantize_row(wts[iw], hw, wv, K));
                float *dx = dev_copy(x, sizeof(float) * (size_t)(M * xr));
                void *dw = dev_copy(hw, ct_dtype_block_bytes(wts[iw]) * (size_t)K);
                float *dy = dev_poisoned(sizeof(float) * (size_t)(M * K));
                void *mem = dev_poisoned(cuq_q8_bytes(M, K));
                cuq_q8 q = cuq_q8_at(mem, M, K);
                /* half the runs read w before the PDL wait (nothing here writes it) */
                CHECK(cuq_rms_norm_q8(dx, xr, M, K, no_w ? NULL : dw, wts[iw], (iw + M) % 2 == 0, eps, dy,
                                      with_q ? &q : NULL, 0));
                CHECK_CUDA(cudaDeviceSynchronize());
                bool guard;
                float *y = fetch(dy, M * K, &guard);
                CHECK_MSG(guard, "rms_norm_q8 wrote past y");
                double *ref = malloc(sizeof(double) * (size_t)(M * K));
                for (int64_t m = 0; m < M; m++) {
                    double ss = 0;
                    for (int64_t k = 0; k < K; k++) ss += (double)x[m * xr + k] * x[m * xr + k];
                    double s = 1.0 / sqrt(ss / (double)K + eps);
                    for (int64_t k = 0; k < K; k++) ref[m * K + k] = x[m * xr + k] * s * (no_w ? 1.0 : wv[k]);
                }
                double e = nmse_f(y, ref, M * K);
                CHECK_MSG(e <= 1e-11, "rms_norm_q8 %s M %lld K %lld: nmse %g", no_w ? "no weight" : ct_dtype_name(wts[iw]),
                          (long long)M, (long long)K, e);
                if (with_q) check_q8(&q, y, M, K, "rms_norm_q8");
                free(x);
                free(w);
                free(hw);
                free(wv);
                free(y);
                free(ref);
                cudaFree(dx);
                cudaFree(dw);
                cudaFree(dy);
                cudaFree(mem);
            }
}

/* ---- jobs ---- */

static const ct_dtype all_formats[] = {CT_Q4_0, CT_Q4_1, CT_Q5_0, CT_Q5_1, CT_Q8_0, CT_Q2_K, CT_Q3_K,
                                       CT_Q4_K, CT_Q5_K, CT_Q6_K, CT_F16,  CT_BF16, CT_F32};
#define N_ALL (int)(sizeof all_formats / sizeof all_formats[0])

static bool is_float(ct_dtype t) { return t == CT_F16 || t == CT_BF16 || t == CT_F32; }

/* A weight [N, K] of format t on the device (rows padded to 16 bytes), its dequantized
 * values on the host, and the CPU's quantized dot for each (row, x row). */
typedef struct weight {
    ct_dtype t;
    int64_t N, K;
    size_t row;
    void *host, *dev;
    float *deq;
} weight;

static void weight_make(weight *w, th_rng *r, ct_dtype t, int64_t N, int64_t K)
{
    w->t = t;
    w->N = N;
    w->K = K;
    w->row = (ct_dtype_row_bytes(t, K) + 15) & ~(size_t)15;
    if (!is_float(t) && cuq_align(t) < 16) w->row = ct_dtype_row_bytes(t, K); /* packed rows, as GGUF has them */
    w->host = calloc((size_t)N, w->row);
    w->deq = malloc(sizeof(float) * (size_t)(N * K));
    float *f = random_f(r, K, -1, 1);
    for (int64_t n = 0; n < N; n++) {
        for (int64_t k = 0; k < K; k++) f[k] = (float)th_uniform(r, -1, 1);
        char *dst = (char *)w->host + (size_t)n * w->row;
        if (is_float(t)) {
            void *hw;
            weight_as(f, K, t, &hw);
            memcpy(dst, hw, ct_dtype_row_bytes(t, K));
            free(hw);
        } else {
            CHECK_OK(quant_quantize_row(t, f, dst, K));
        }
        CHECK_OK(quant_dequantize_row(t, dst, w->deq + n * K, K));
    }
    free(f);
    w->dev = dev_copy(w->host, w->row * (size_t)N);
}

static void weight_free(weight *w)
{
    free(w->host);
    free(w->deq);
    cudaFree(w->dev);
}

/* exact [M, N] = x . deq^T in double; cpu [M, N] the CPU's quantized dots (NULL for floats) */
static void weight_refs(const weight *w, const float *x, int64_t xr, int64_t M, double *exact, double *cpu)
{
    ct_dtype vt = is_float(w->t) ? CT_F32 : quant_vec_dot_type(w->t);
    quant_vec_dot_fn dot = is_float(w->t) ? NULL : quant_get_vec_dot(w->t);
    void *xq = malloc(ct_dtype_row_bytes(vt, w->K) + 64);
    for (int64_t m = 0; m < M; m++) {
        if (dot) CHECK_OK(quant_quantize_row(vt, x + m * xr, xq, w->K));
        for (int64_t n = 0; n < w->N; n++) {
            double s = 0;
            for (int64_t k = 0; k < w->K; k++) s += (double)w->deq[n * w->K + k] * x[m * xr + k];
            exact[m * w->N + n] = s;
            if (dot) {
                float c;
                dot(w->K, &c, (const char *)w->host + (size_t)n * w->row, xq);
                cpu[m * w->N + n] = c;
            }
        }
    }
    free(xq);
}

static double act_d(int glu, double g)
{
    if (glu == 1) return g / (1.0 + exp(-g));
    return g / (1.0 + exp(-2.0 * 0.7978845608028654 * (g + 0.044715 * g * g * g)));
}

typedef struct job_spec {
    int n_parts;
    ct_dtype t[CUQ_MV_MAX_PARTS];
    int64_t N[CUQ_MV_MAX_PARTS];
    bool add[CUQ_MV_MAX_PARTS];
    int glu;
    int64_t M, K;
    bool strided_x, caller_q8;
    int norm; /* the job's own RMS norm of x: 0 none, else its weight: 1 f32, 2 f16, 3 bf16, 4 none */
    bool no_y; /* norm without y (the run keeps the normed rows to itself) */
    bool d8; /* x's form with a scale per 8 given (rounded on the host: a gated job's output form) */
    bool glu_d8; /* the gated job also writes its output's d8 form (cuq_mv_job::glu_q8) */
} job_spec;

static void job_name(const job_spec *s, char *buf, size_t len)
{
    static const char *nn[] = {"", " norm(f32)", " norm(f16)", " norm(bf16)", " norm(no weight)"};
    int o = snprintf(buf, len, "M %lld K %lld%s%s%s%s glu %d:", (long long)s->M, (long long)s->K,
                     s->strided_x ? " strided" : "", s->caller_q8 ? " q8-given" : "", nn[s->norm],
                     s->norm && s->no_y ? " no-y" : "", s->glu);
    for (int i = 0; i < s->n_parts && o > 0 && (size_t)o < len; i++)
        o += snprintf(buf + o, len - (size_t)o, " %s[%lld]%s", ct_dtype_name(s->t[i]), (long long)s->N[i],
                      s->add[i] ? "+add" : "");
}

static void check_nmse(const float *got, const double *ref, int64_t n, double tol, const char *what, const char *name)
{
    double e = nmse_f(got, ref, n);
    CHECK_MSG(e <= tol, "%s: %s nmse %g > %g", name, what, e, tol);
}

static const ct_dtype norm_dt[] = {CT_F32, CT_F32, CT_F16, CT_BF16, CT_F32};

/* The job's norm on the host: xn (rows xr apart) = x * s * w in f32, the CPU's order, s =
 * 1 / sqrt(mean(x^2) + eps) (double sum here, f32 on the GPU: xn may differ in the last
 * bit, which the tolerances cover); ref [M, K] the same in double, for y. The weight goes
 * to the device in *dw. */
static float *host_norm(const job_spec *s, th_rng *r, const float *x, int64_t xr, float eps, void **dw, double *ref)
{
    int64_t M = s->M, K = s->K;
    float *xn = malloc(sizeof(float) * (size_t)(M * xr)), *wv = NULL;
    *dw = NULL;
    if (s->norm != 4) {
        float *w = random_f(r, K, 0.5, 1.5);
        void *hw;
        weight_as(w, K, norm_dt[s->norm], &hw);
        wv = malloc(sizeof(float) * (size_t)K); /* the weight as the kernel sees it */
        CHECK_OK(quant_dequantize_row(norm_dt[s->norm], hw, wv, K));
        *dw = dev_copy(hw, ct_dtype_block_bytes(norm_dt[s->norm]) * (size_t)K);
        free(w);
        free(hw);
    }
    for (int64_t m = 0; m < M; m++) {
        double ss = 0;
        for (int64_t k = 0; k < K; k++) ss += (double)x[m * xr + k] * x[m * xr + k];
        double sd = 1.0 / sqrt(ss / (double)K + eps);
        float sf = (float)sd;
        for (int64_t k = 0; k < K; k++) {
            float v = x[m * xr + k] * sf;
            xn[m * xr + k] = wv ? v * wv[k] : v;
            ref[m * K + k] = x[m * xr + k] * sd * (wv ? wv[k] : 1.0);
        }
    }
    free(wv);
    return xn;
}

/* Whether a job goes to a kernel of one format where x's q8 form is not staged: all Q4_K
 * (quant_fused_q4k.cu; CTORCH_CUDA_MVQ4K=0 turns it off; such jobs then also quantize a
 * one-row x rather than dequantize), or all Q6_K, or Q4_K and Q6_K (quant_fused_q6k.cu;
 * CTORCH_CUDA_MVQ6K=0 turns both off, =4 the second). */
static bool q4k_job(const cuq_mv_job *job)
{
    const char *e = getenv("CTORCH_CUDA_MVQ4K");
    if (job->M != 1 || (e && e[0] == '0')) return false;
    for (int i = 0; i < job->n_parts; i++)
        if (job->part[i].wt != CT_Q4_K) return false;
    return true;
}
static bool q6k_job(const cuq_mv_job *job)
{
    const char *e = getenv("CTORCH_CUDA_MVQ6K");
    if (job->M != 1 || (e && e[0] == '0')) return false;
    bool q4 = false;
    for (int i = 0; i < job->n_parts; i++) {
        if (job->part[i].wt == CT_Q4_K) q4 = true;
        else if (job->part[i].wt != CT_Q6_K) return false;
    }
    return !q4 || (!job->glu && !(e && e[0] == '4'));
}

/* got against ref (f32) as the reference. */
static void check_close(const float *got, const float *ref, int64_t n, double tol, const char *what, const char *name)
{
    double *r = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) r[i] = ref[i];
    check_nmse(got, r, n, tol, what, name);
    free(r);
}

/* A job with its own norm gives bit for bit what the separate kernels give: the norm's y
 * and q8 form by cuq_rms_norm_q8, then the same job reading them (the prologue keeps that
 * kernel's order of sums and rounding; the dots read the same values). Where the separate
 * run takes a one-format kernel and the staged one the generic kernel, the two add the same
 * products in another order: equal within f32 rounding (nmse 1e-12; one x quant off by one
 * step moves a dot by ~1e-4 of its size, nmse ~1e-8). */
static void same_as_separate(const cuq_mv_job *job, const char *name)
{
    bool reorder = q4k_job(job) || q6k_job(job);
    int64_t M = job->M, K = job->K;
    float *y = dev_poisoned(sizeof(float) * (size_t)(M * K));
    void *qmem = dev_poisoned(cuq_q8_bytes(M, K));
    cuq_q8 q = cuq_q8_at(qmem, M, K);
    CHECK(cuq_rms_norm_q8(job->x, job->x_row, M, K, job->norm.w, job->norm.wdt, false, job->norm.eps, y, &q, 0));
    cuq_mv_job sep = *job;
    memset(&sep.norm, 0, sizeof sep.norm);
    sep.x = y;
    sep.x_row = K;
    sep.xq = &q;
    float *outs[CUQ_MV_MAX_PARTS] = {0}, *glu = NULL;
    for (int i = 0; i < job->n_parts; i++) {
        sep.part[i].out = outs[i] = dev_poisoned(sizeof(float) * (size_t)(M * job->part[i].N));
        if (job->part[i].add) sep.part[i].out2 = dev_poisoned(sizeof(float) * (size_t)(M * job->part[i].N));
    }
    if (job->glu) sep.glu_out = glu = dev_poisoned(sizeof(float) * (size_t)(M * job->part[0].N));
    CHECK_MSG(cuq_mv_run(&sep, NULL, sm_count(), 0), "%s: separate kernels not run", name);
    CHECK_CUDA(cudaDeviceSynchronize());
    bool g1, g2;
    if (job->norm.y) {
        float *a = fetch(job->norm.y, M * K, &g1), *b = fetch(y, M * K, &g2);
        CHECK_MSG(memcmp(a, b, sizeof(float) * (size_t)(M * K)) == 0, "%s: y differs from cuq_rms_norm_q8's", name);
        free(a);
        free(b);
    }
    for (int i = 0; i < job->n_parts; i++) {
        int64_t n = M * job->part[i].N;
        float *a = fetch(job->part[i].out, n, &g1), *b = fetch(outs[i], n, &g2);
        if (reorder) check_close(a, b, n, 1e-12, "vs the separate kernels, reordered", name);
        else CHECK_MSG(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "%s: part %d differs from the separate kernels'", name, i);
        free(a);
        free(b);
        cudaFree(outs[i]);
        cudaFree(sep.part[i].out2);
    }
    if (glu) {
        int64_t n = M * job->part[0].N;
        float *a = fetch(job->glu_out, n, &g1), *b = fetch(glu, n, &g2);
        if (reorder) check_close(a, b, n, 1e-12, "gated output vs the separate kernels, reordered", name);
        else CHECK_MSG(memcmp(a, b, sizeof(float) * (size_t)n) == 0, "%s: gated output differs from the separate kernels'", name);
        free(a);
        free(b);
        cudaFree(glu);
    }
    cudaFree(y);
    cudaFree(qmem);
}

/* ref [M, N] = x's q8 form as the GPU holds it (quants times their block's d) . deq^T, in
 * double: the quantized products exactly, so only the GPU's f32 sums differ. */
static void q8_refs(const weight *w, const cuq_q8 *dq, double *ref)
{
    int64_t M = dq->M, K = dq->K, gs = dq->d8 ? 8 : 32;
    int8_t *q = malloc((size_t)(M * K));
    float *d = malloc(sizeof(float) * (size_t)(M * K / gs));
    CHECK_CUDA(cudaMemcpy(q, dq->q, (size_t)(M * K), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(d, dq->d, sizeof(float) * (size_t)(M * K / gs), cudaMemcpyDeviceToHost));
    for (int64_t m = 0; m < M; m++)
        for (int64_t n = 0; n < w->N; n++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) s += (double)w->deq[n * K + k] * ((double)q[m * K + k] * d[m * (K / gs) + k / gs]);
            ref[m * w->N + n] = s;
        }
    free(q);
    free(d);
}

static void run_job(const job_spec *s, th_rng *r)
{
    char name[256];
    job_name(s, name, sizeof name);
    int64_t M = s->M, K = s->K, xr = s->strided_x ? K + 12 : K;
    float *x = random_f(r, M * xr, -1, 1);
    float *dx = dev_copy(x, sizeof(float) * (size_t)(M * xr));
    void *dnw = NULL;
    float *dy = NULL;
    double *yref = NULL;
    if (s->norm) { /* x given raw; the references read the normed rows */
        for (int64_t i = 0; i < M * xr; i++) x[i] *= 3.f; /* not unit scale already */
        CHECK_CUDA(cudaMemcpy(dx, x, sizeof(float) * (size_t)(M * xr), cudaMemcpyHostToDevice));
        yref = malloc(sizeof(double) * (size_t)(M * K));
        float *xn = host_norm(s, r, x, xr, 1e-5f, &dnw, yref);
        free(x);
        x = xn;
        if (!s->no_y) dy = dev_poisoned(sizeof(float) * (size_t)(M * K));
    }
    weight w[CUQ_MV_MAX_PARTS];
    float *dadd[CUQ_MV_MAX_PARTS] = {0}, *hadd[CUQ_MV_MAX_PARTS] = {0};
    cuq_mv_job job = {.M = M, .K = K, .x = dx, .x_row = xr, .n_parts = s->n_parts, .glu = s->glu};
    for (int i = 0; i < s->n_parts; i++) {
        weight_make(&w[i], r, s->t[i], s->N[i], K);
        cuq_mv_part *p = &job.part[i];
        p->wt = s->t[i];
        p->w = w[i].dev;
        p->w_row = w[i].row;
        p->N = s->N[i];
        p->out = dev_poisoned(sizeof(float) * (size_t)(M * s->N[i]));
        if (s->add[i]) {
            hadd[i] = random_f(r, M * s->N[i], -4, 4);
            dadd[i] = dev_copy(hadd[i], sizeof(float) * (size_t)(M * s->N[i]));
            p->add = dadd[i];
            p->out2 = dev_poisoned(sizeof(float) * (size_t)(M * s->N[i]));
        }
    }
    if (s->glu) job.glu_out = dev_poisoned(sizeof(float) * (size_t)(M * s->N[0]));
    void *qmem = NULL;
    cuq_q8 q = {0};
    if (s->caller_q8 && s->d8) { /* rounded here, rows of x packed */
        qmem = dev_poisoned(cuq_q8_bytes8(M, K));
        q = cuq_q8_at8(qmem, M, K);
        float *xp = malloc(sizeof(float) * (size_t)(M * K));
        for (int64_t m = 0; m < M; m++) memcpy(xp + m * K, x + m * xr, sizeof(float) * (size_t)K);
        host_q8 h;
        host_quantize_gs(xp, M, K, 8, &h);
        CHECK_CUDA(cudaMemcpy(q.q, h.q, (size_t)(M * K), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(q.d, h.d, sizeof(float) * (size_t)(M * K / 8), cudaMemcpyHostToDevice));
        CHECK_CUDA(cudaMemcpy(q.s8, h.s8, sizeof(float) * (size_t)(M * K / 8), cudaMemcpyHostToDevice));
        host_q8_free(&h);
        free(xp);
        job.xq = &q;
    } else if (s->caller_q8) {
        qmem = dev_poisoned(cuq_q8_bytes(M, K));
        q = cuq_q8_at(qmem, M, K);
        CHECK(cuq_quantize_q8(dx, xr, M, K, &q, 0));
        job.xq = &q;
    }
    void *gmem = NULL;
    cuq_q8 gq = {0};
    if (s->glu_d8) {
        gmem = dev_poisoned(cuq_q8_bytes8(M, s->N[0]));
        gq = cuq_q8_at8(gmem, M, s->N[0]);
        job.glu_q8 = &gq;
    }
    if (s->norm)
        /* half the norms read their weight before the PDL wait (a separate norm kernel's w_early) */
        job.norm = (cuq_mv_norm){.on = true, .w = dnw, .wdt = norm_dt[s->norm], .eps = 1e-5f, .y = dy,
                                 .w_early = (s->norm + s->M) % 2 == 0};
    CHECK_MSG(cuq_mv_ok(&job), "%s: refused", name);
    size_t tb = cuq_mv_tmp_bytes(&job);
    void *tmp = tb ? dev_poisoned(tb) : NULL;
    CHECK_MSG(cuq_mv_run(&job, tmp, sm_count(), 0), "%s: not run", name);
    CHECK_CUDA(cudaDeviceSynchronize());

    /* one row of x, no q8 form, a small job: the dequantizing path, x exact (quant_fused.cu's FU_FMA_MAX_ELEMS) */
    int64_t rows = 0;
    for (int i = 0; i < s->n_parts; i++) rows += s->N[i];
    bool exact_x = M == 1 && !s->caller_q8 && !s->norm && rows * K <= ((int64_t)1 << 22) && !q4k_job(&job);
    if (dy) { /* the norm's rows, written once and whole */
        bool guard;
        float *y = fetch(dy, M * K, &guard);
        CHECK_MSG(guard, "%s: wrote past y", name);
        check_nmse(y, yref, M * K, 1e-11, "norm's y vs double", name);
        free(y);
    }
    float *outs[CUQ_MV_MAX_PARTS] = {0};
    if (s->norm) same_as_separate(&job, name);
    for (int i = 0; i < s->n_parts; i++) {
        int64_t n = M * s->N[i];
        double *exact = malloc(sizeof(double) * (size_t)n), *cpu = malloc(sizeof(double) * (size_t)n);
        weight_refs(&w[i], x, xr, M, exact, cpu);
        bool guard;
        outs[i] = fetch(job.part[i].out, n, &guard);
        CHECK_MSG(guard, "%s: part %d wrote past out", name, i);
        if (is_float(s->t[i]) || exact_x) {
            check_nmse(outs[i], exact, n, 1e-9, "f32 x vs exact", name);
        } else {
            check_nmse(outs[i], exact, n, 1e-4, "vs exact", name);
            check_nmse(outs[i], cpu, n, 2e-4, "vs the CPU's dots", name);
            if (s->caller_q8) {
                q8_refs(&w[i], &q, exact);
                check_nmse(outs[i], exact, n, 1e-9, "vs its own q8 x, exact", name);
            }
        }
        if (s->add[i]) {
            float *o2 = fetch(job.part[i].out2, n, &guard);
            CHECK_MSG(guard, "%s: part %d wrote past out2", name, i);
            double *want = malloc(sizeof(double) * (size_t)n);
            for (int64_t j = 0; j < n; j++) want[j] = (double)(hadd[i][j] + outs[i][j]);
            check_nmse(o2, want, n, 1e-12, "add epilogue", name);
            free(o2);
            free(want);
        }
        free(exact);
        free(cpu);
    }
    if (s->glu) {
        int64_t n = M * s->N[0];
        bool guard;
        float *g = fetch(job.glu_out, n, &guard);
        CHECK_MSG(guard, "%s: wrote past glu_out", name);
        double *own = malloc(sizeof(double) * (size_t)n), *ex = malloc(sizeof(double) * (size_t)n);
        double *eg = malloc(sizeof(double) * (size_t)n), *eu = malloc(sizeof(double) * (size_t)n);
        weight_refs(&w[0], x, xr, M, eg, eu); /* eu: scratch for the CPU dots */
        double *cu = malloc(sizeof(double) * (size_t)n);
        weight_refs(&w[1], x, xr, M, eu, cu);
        for (int64_t j = 0; j < n; j++) {
            own[j] = act_d(s->glu, outs[0][j]) * outs[1][j];
            ex[j] = act_d(s->glu, eg[j]) * eu[j];
        }
        check_nmse(g, own, n, 1e-10, "gated epilogue vs the GPU's own products", name);
        check_nmse(g, ex, n, 2e-4, "gated epilogue vs exact", name);
        if (s->glu_d8) check_q8(&gq, g, M, s->N[0], "the gated job's d8 form of its output");
        free(g);
        free(own);
        free(ex);
        free(eg);
        free(eu);
        free(cu);
        cudaFree(job.glu_out);
    }
    for (int i = 0; i < s->n_parts; i++) {
        free(outs[i]);
        free(hadd[i]);
        cudaFree(dadd[i]);
        cudaFree(job.part[i].out);
        cudaFree(job.part[i].out2);
        weight_free(&w[i]);
    }
    free(x);
    free(yref);
    cudaFree(dx);
    cudaFree(dnw);
    cudaFree(dy);
    cudaFree(tmp);
    cudaFree(qmem);
    cudaFree(gmem);
}

static bool format_fits(ct_dtype t, int64_t K) { return K % ct_dtype_block_size(t) == 0; }

/* Every format alone, M 1..8 on K 640 and 2048, M 1 and 8 on the others: 576 (SmolLM2's
 * Q4_1 rows), 768 (Q6_K rows of 630 bytes: every other row starts 2 bytes off a 4-byte
 * word) and 5632 (the segment path splits a row over warps). */
static void test_single_parts(void)
{
    if (!have_dev()) return;
    th_rng r = {33};
    const int64_t Ks[] = {640, 2048, 576, 768, 5632};
    for (int f = 0; f < N_ALL; f++)
        for (int ik = 0; ik < 5; ik++) {
            if (!format_fits(all_formats[f], Ks[ik])) continue;
            for (int64_t M = 1; M <= CUQ_MV_MAX_ROWS; M++) {
                if (ik >= 2 && M != 1 && M != 8) continue; /* the other K at the ends of M */
                /* M = 1 twice: f32 x dequantizing (no q8 form given, small weight) and integer dots */
                for (int given = 0; given < (M == 1 ? 2 : 1); given++) {
                    job_spec s = {.n_parts = 1, .t = {all_formats[f]}, .N = {ik == 4 ? 40 : 67}, .M = M, .K = Ks[ik],
                                  .strided_x = (M & 1) != 0, .caller_q8 = M == 3 || given};
                    run_job(&s, &r);
                }
                /* and with the job's own norm, its weight's dtype in turn (x staged in
                 * shared memory, or at M 8 K 5632 and float weights at M 8 too large:
                 * the separate norm kernel first) */
                job_spec n = {.n_parts = 1, .t = {all_formats[f]}, .N = {ik == 4 ? 40 : 67}, .M = M, .K = Ks[ik],
                              .strided_x = (M & 1) != 0, .norm = 1 + (int)((f + M + ik) % 4), .no_y = M == 2};
                run_job(&n, &r);
            }
        }
}

/* Several parts of different formats in one job (the qkv shape), with add epilogues. */
static void test_mixed_parts(void)
{
    if (!have_dev()) return;
    th_rng r = {44};
    job_spec a = {.n_parts = 3, .t = {CT_Q4_K, CT_Q6_K, CT_Q8_0}, .N = {256, 32, 32}, .M = 1, .K = 2048};
    run_job(&a, &r);
    job_spec b = {.n_parts = 4, .t = {CT_F16, CT_Q5_0, CT_Q4_K, CT_BF16}, .N = {33, 200, 7, 64}, .add = {true, false, false, true},
                  .M = 5, .K = 2048, .strided_x = true};
    run_job(&b, &r);
    job_spec c = {.n_parts = 2, .t = {CT_Q4_1, CT_F32}, .N = {1, 300}, .add = {true, true}, .M = 8, .K = 640,
                  .caller_q8 = true};
    run_job(&c, &r);
    job_spec d = {.n_parts = 4, .t = {CT_Q2_K, CT_Q3_K, CT_Q5_K, CT_Q5_1}, .N = {50, 51, 52, 53}, .M = 2, .K = 5632};
    run_job(&d, &r);
    /* many rows: the grid spans several waves */
    job_spec e = {.n_parts = 2, .t = {CT_Q4_K, CT_Q6_K}, .N = {4096, 1000}, .add = {false, true}, .M = 1, .K = 2048};
    run_job(&e, &r);
    /* the decode step's norm + qkv, quantized and float weights in one staged x */
    job_spec f = {.n_parts = 3, .t = {CT_Q4_K, CT_Q4_K, CT_Q6_K}, .N = {2048, 256, 256}, .M = 1, .K = 2048, .norm = 1};
    run_job(&f, &r);
    job_spec g = {.n_parts = 3, .t = {CT_F16, CT_Q8_0, CT_BF16}, .N = {300, 64, 64}, .add = {true, false, false},
                  .M = 2, .K = 2048, .strided_x = true, .norm = 3};
    run_job(&g, &r);
    /* all Q4_K (quant_fused_q4k.cu): the qkv shape with x's q8 form given, then rows split
     * over 2 and 4 warps (K 5632, 8192) across parts of odd lengths, and f32 x */
    job_spec h = {.n_parts = 3, .t = {CT_Q4_K, CT_Q4_K, CT_Q4_K}, .N = {2048, 256, 256}, .add = {false, false, true},
                  .M = 1, .K = 2048, .caller_q8 = true};
    run_job(&h, &r);
    job_spec i = {.n_parts = 2, .t = {CT_Q4_K, CT_Q4_K}, .N = {37, 101}, .add = {true, false}, .M = 1, .K = 5632,
                  .caller_q8 = true};
    run_job(&i, &r);
    job_spec j = {.n_parts = 3, .t = {CT_Q4_K, CT_Q4_K, CT_Q4_K}, .N = {9, 3, 21}, .M = 1, .K = 8192,
                  .strided_x = true};
    run_job(&j, &r);
    job_spec k = {.n_parts = 2, .t = {CT_Q4_K, CT_Q4_K}, .N = {5, 60}, .M = 1, .K = 8192, .strided_x = true,
                  .caller_q8 = true};
    run_job(&k, &r);
}

/* gate and up through the gated epilogue, SWIGLU and GEGLU. */
static void test_gated(void)
{
    if (!have_dev()) return;
    th_rng r = {55};
    for (int glu = 1; glu <= 2; glu++) {
        job_spec a = {.n_parts = 2, .t = {CT_Q4_K, CT_Q4_K}, .N = {300, 300}, .glu = glu, .M = 1, .K = 2048};
        run_job(&a, &r);
        job_spec b = {.n_parts = 2, .t = {CT_Q6_K, CT_F16}, .N = {97, 97}, .glu = glu, .M = 4, .K = 2048,
                      .strided_x = true, .caller_q8 = true};
        run_job(&b, &r);
        job_spec c = {.n_parts = 2, .t = {CT_Q8_0, CT_Q4_0}, .N = {2000, 2000}, .glu = glu, .M = 8, .K = 640};
        run_job(&c, &r);
        /* both rows through the segment path, a row split over warps */
        job_spec d = {.n_parts = 2, .t = {CT_Q6_K, CT_Q6_K}, .N = {130, 130}, .glu = glu, .M = glu, .K = 5632,
                      .caller_q8 = true};
        run_job(&d, &r);
        /* the decode step's norm + gate/up; the down job's x (no norm) staged, segments */
        job_spec e = {.n_parts = 2, .t = {CT_Q4_K, CT_Q4_K}, .N = {700, 700}, .glu = glu, .M = 1, .K = 2048,
                      .norm = 1 + glu};
        run_job(&e, &r);
        job_spec f = {.n_parts = 2, .t = {CT_Q6_K, CT_Q6_K}, .N = {130, 130}, .glu = glu, .M = glu, .K = 5632};
        run_job(&f, &r);
        job_spec h = {.n_parts = 2, .t = {CT_F16, CT_F16}, .N = {500, 500}, .glu = glu, .M = 1, .K = 2048, .norm = 1};
        run_job(&h, &r);
        /* the Q4_K kernel's gated rows split over warps, x's q8 form given */
        job_spec q = {.n_parts = 2, .t = {CT_Q4_K, CT_Q4_K}, .N = {77, 77}, .glu = glu, .M = 1, .K = 5632,
                      .caller_q8 = true};
        run_job(&q, &r);
    }
}

/* All-Q6_K jobs at M = 1 (quant_fused_q6k.cu where x's q8 form is given or made by a
 * quantize kernel; the generic kernel where it is staged): TinyLlama's down and output
 * shapes, rows not a multiple of a block's 8, K 768 (630-byte rows: every other row 2 bytes
 * off a 4-byte word, blocks at every even offset in a 16-byte granule) and 8192 (a row split
 * over 4 warps), several parts with the add epilogue, gated rows; and jobs of Q4_K and Q6_K
 * parts (the same kernel, a format per row): the qkv shape, rows split over warps. */
static void test_q6k_jobs(void)
{
    if (!have_dev()) return;
    th_rng r = {66};
    for (int given = 0; given < 2; given++) {
        job_spec a = {.n_parts = 1, .t = {CT_Q6_K}, .N = {2047}, .M = 1, .K = 5632, .caller_q8 = given};
        run_job(&a, &r);
        job_spec b = {.n_parts = 1, .t = {CT_Q6_K}, .N = {101}, .M = 1, .K = 5632, .caller_q8 = given, .strided_x = true};
        run_job(&b, &r);
        job_spec c = {.n_parts = 3, .t = {CT_Q6_K, CT_Q6_K, CT_Q6_K}, .N = {2048, 255, 9}, .add = {true, false, true},
                      .M = 1, .K = 2048, .caller_q8 = given};
        run_job(&c, &r);
        job_spec d = {.n_parts = 2, .t = {CT_Q6_K, CT_Q6_K}, .N = {333, 3}, .M = 1, .K = 768, .caller_q8 = given};
        run_job(&d, &r);
        job_spec e = {.n_parts = 2, .t = {CT_Q6_K, CT_Q6_K}, .N = {21, 5}, .add = {false, true}, .M = 1, .K = 8192,
                      .caller_q8 = given};
        run_job(&e, &r);
        for (int glu = 1; glu <= 2; glu++) {
            job_spec g = {.n_parts = 2, .t = {CT_Q6_K, CT_Q6_K}, .N = {701, 701}, .glu = glu, .M = 1, .K = 2048,
                          .caller_q8 = given};
            run_job(&g, &r);
        }
        job_spec q = {.n_parts = 3, .t = {CT_Q4_K, CT_Q4_K, CT_Q6_K}, .N = {2048, 256, 256}, .add = {false, true, false},
                      .M = 1, .K = 2048, .caller_q8 = given};
        run_job(&q, &r);
        job_spec m = {.n_parts = 3, .t = {CT_Q6_K, CT_Q4_K, CT_Q6_K}, .N = {77, 300, 5}, .add = {true, false, false},
                      .M = 1, .K = 8192, .caller_q8 = given, .strided_x = true};
        run_job(&m, &r);
    }
    /* the output projection's shape, x's q8 form given */
    job_spec o = {.n_parts = 1, .t = {CT_Q6_K}, .N = {32000}, .M = 1, .K = 2048, .caller_q8 = true};
    run_job(&o, &r);
}

/* The d8 form (a scale per 8 elements): written by a gated job on a one-format kernel
 * (bit for bit the host's rounding of its output, run_job's check_q8), read by the Q4_K and
 * Q6_K kernels' plain jobs (against the exact products of that form, 1e-9: a scale taken
 * from the wrong run of 8 moves a product by O(its size)). TinyLlama's gate/up and down
 * shapes, with and without the norm before them; rows not a multiple of a unit's 8 where
 * the form is only read. */
static void test_d8(void)
{
    if (!have_dev()) return;
    th_rng r = {99};
    /* the decode step's norm + gate/up where the norm is a kernel of its own (the job
     * kernel staging x writes no d8 form: cuq_mv_ok refuses it) */
    const char *st = getenv("CTORCH_CUDA_MVSTAGE");
    bool staged = st && st[0] != '0';
    for (int glu = 1; glu <= 2; glu++) {
        job_spec a = {.n_parts = 2, .t = {CT_Q4_K, CT_Q4_K}, .N = {5632, 5632}, .glu = glu, .M = 1, .K = 2048,
                      .norm = staged ? 0 : 1, .caller_q8 = staged, .glu_d8 = true};
        run_job(&a, &r);
        job_spec b = {.n_parts = 2, .t = {CT_Q6_K, CT_Q6_K}, .N = {136, 136}, .glu = glu, .M = 1, .K = 2048,
                      .caller_q8 = true, .glu_d8 = true};
        run_job(&b, &r);
    }
    static const ct_dtype fmt[] = {CT_Q4_K, CT_Q6_K};
    for (int f = 0; f < 2; f++) {
        job_spec d = {.n_parts = 1, .t = {fmt[f]}, .N = {2048}, .add = {true}, .M = 1, .K = 5632, .caller_q8 = true,
                      .d8 = true};
        run_job(&d, &r);
        job_spec e = {.n_parts = 2, .t = {fmt[f], fmt[f]}, .N = {300, 7}, .M = 1, .K = 2048, .caller_q8 = true,
                      .d8 = true, .strided_x = true};
        run_job(&e, &r);
    }
}

/* Device scratch for the jobs only cuq_mv_ok looks at: a weight, x, an output, and room for
 * x's q8 forms (qbytes; 0: none). */
typedef struct scratch {
    void *w, *x, *o, *qb;
} scratch;

static scratch scratch_alloc(size_t qbytes)
{
    scratch sc = {0};
    CHECK_CUDA(cudaMalloc(&sc.w, 1 << 20));
    CHECK_CUDA(cudaMalloc(&sc.x, 1 << 16));
    CHECK_CUDA(cudaMalloc(&sc.o, 1 << 16));
    if (qbytes) CHECK_CUDA(cudaMalloc(&sc.qb, qbytes));
    return sc;
}

static void scratch_free(scratch *sc)
{
    cudaFree(sc->w);
    cudaFree(sc->x);
    cudaFree(sc->o);
    cudaFree(sc->qb);
}

/* A job of two parts of 8 rows each, of formats kind[0] and kind[1], K 2048, on sc. */
static cuq_mv_job two_parts(const scratch *sc, const ct_dtype kind[2], int64_t M, const cuq_q8 *xq)
{
    cuq_mv_job j = {.M = M, .K = 2048, .x = sc->x, .x_row = 2048, .xq = xq, .n_parts = 2};
    for (int i = 0; i < 2; i++)
        j.part[i] = (cuq_mv_part){.wt = kind[i], .w = sc->w, .w_row = ct_dtype_row_bytes(kind[i], 2048), .N = 8,
                                  .out = sc->o};
    return j;
}

/* Jobs that cannot take the d8 form, or write it, are refused (cuq_mv_ok). */
static void test_d8_refused(void)
{
    if (!have_dev()) return;
    scratch sc = scratch_alloc(cuq_q8_bytes8(2, 2048));
    cuq_q8 q8 = cuq_q8_at8(sc.qb, 1, 2048), q32 = cuq_q8_at(sc.qb, 1, 2048), q8m2 = cuq_q8_at8(sc.qb, 2, 2048);
    cuq_q8 x32 = cuq_q8_at(sc.qb, 1, 2048); /* a gated job's own x form (nothing staged) */
    static const ct_dtype kinds[][2] = {{CT_Q4_K, CT_Q4_K}, {CT_Q6_K, CT_Q6_K}, {CT_Q4_K, CT_Q6_K},
                                        {CT_Q5_0, CT_Q5_0}, {CT_F16, CT_F16}};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        cuq_mv_job j = two_parts(&sc, kinds[k], 1, &q8);
        bool want = (q4k_job(&j) || q6k_job(&j)) && kinds[k][0] == kinds[k][1];
        CHECK_MSG(cuq_mv_ok(&j) == want, "%s + %s reading the d8 form: ok %d, expected %d", ct_dtype_name(kinds[k][0]),
                  ct_dtype_name(kinds[k][1]), cuq_mv_ok(&j), want);
        j.glu = 1; /* a gated job never reads it */
        j.glu_out = sc.o;
        CHECK_MSG(!cuq_mv_ok(&j), "%s: a gated job reading the d8 form", ct_dtype_name(kinds[k][0]));
        j.xq = &x32; /* and writes it on one-format kernels only, N a multiple of 8, M 1 */
        j.glu_q8 = &q8;
        for (int n = 8; n <= 9; n++) {
            j.part[0].N = j.part[1].N = n;
            q8.K = n; /* the form of glu_out [1, N] */
            bool ok = cuq_mv_ok(&j), wgl = want && n == 8;
            CHECK_MSG(ok == wgl, "%s gated, N %d, writing the d8 form: ok %d, expected %d", ct_dtype_name(kinds[k][0]), n,
                      ok, wgl);
        }
        q8.K = 2048;
        q32.K = 8;
        j.part[0].N = j.part[1].N = 8;
        j.glu_q8 = &q32; /* the per-32 form is not what the epilogue writes */
        CHECK(!cuq_mv_ok(&j));
        q32.K = 2048;
    }
    cuq_mv_job m2 = two_parts(&sc, kinds[0], 2, &q8m2);
    m2.n_parts = 1;
    CHECK_MSG(!cuq_mv_ok(&m2), "M 2 reading the d8 form");
    CHECK(!cuq_quantize_q8(sc.x, 2048, 1, 2048, &q8, 0)); /* the separate kernels write the per-32 form only */
    CHECK(!cuq_rms_norm_q8(sc.x, 2048, 1, 2048, NULL, CT_F32, false, 1e-6f, sc.o, &q8, 0));
    scratch_free(&sc);
}

/* Vocabulary-sized Q8_0 products (quant_fused_q8v.cu: tied embeddings' output projection),
 * x's q8 form given: Gemma 3's and SmolLM2's widths with 65,536 rows, a last round of fewer
 * than 4 rows, the widest K the kernel takes and a one-block row; then the same jobs on
 * the generic kernel (CTORCH_CUDA_MVQ8V=0). The bounds are run_job's. */
static void test_q8v_jobs(void)
{
    if (!have_dev()) return;
    th_rng r = {88};
    static const int64_t shape[][2] = {{65536, 640}, {65539, 576}, {65536, 1024}, {65541, 32}};
    for (int generic = 0; generic < 2; generic++) {
        if (generic) setenv("CTORCH_CUDA_MVQ8V", "0", 1);
        for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++) {
            job_spec s = {.n_parts = 1, .t = {CT_Q8_0}, .N = {shape[i][0]}, .M = 1, .K = shape[i][1], .caller_q8 = true};
            run_job(&s, &r);
        }
        unsetenv("CTORCH_CUDA_MVQ8V");
    }
}

/* Jobs the kernels cannot run are refused (cuq_mv_ok and cuq_mv_run both). */
static void test_refused(void)
{
    if (!have_dev()) return;
    scratch sc = scratch_alloc(0);
    void *w = sc.w, *x = sc.x, *o = sc.o;
    cuq_mv_job ok = two_parts(&sc, (const ct_dtype[]){CT_Q4_K, CT_Q4_K}, 1, NULL);
    CHECK(cuq_mv_ok(&ok));
    cuq_mv_job j = ok;
    j.M = CUQ_MV_MAX_ROWS + 1;
    CHECK(!cuq_mv_ok(&j) && !cuq_mv_run(&j, NULL, 1, 0));
    j = ok;
    j.K = 640; /* not whole Q4_K blocks */
    CHECK(!cuq_mv_ok(&j));
    j = ok;
    j.part[0].w = (char *)w + 2; /* misaligned for 16-byte loads */
    CHECK(!cuq_mv_ok(&j));
    j = ok;
    j.part[1].wt = CT_F64;
    CHECK(!cuq_mv_ok(&j));
    j = ok;
    j.glu = 1; /* no glu_out */
    CHECK(!cuq_mv_ok(&j));
    j.glu_out = o;
    CHECK(cuq_mv_ok(&j));
    j.part[1].N = 9; /* unequal N */
    CHECK(!cuq_mv_ok(&j));
    j = ok;
    j.part[0].add = o; /* add without out2 */
    CHECK(!cuq_mv_ok(&j));
    j = ok;
    j.n_parts = CUQ_MV_MAX_PARTS + 1;
    CHECK(!cuq_mv_ok(&j));
    j = ok;
    j.x = NULL; /* quantized parts, no q8 form given: x is needed */
    CHECK(!cuq_mv_ok(&j));
    j = ok;
    j.x = (float *)x + 1; /* x misaligned */
    CHECK(!cuq_mv_ok(&j));
    CHECK(!cuq_rms_norm_q8(x, 2048, 1, 2048, w, CT_F64, false, 1e-6f, o, NULL, 0));
    j = ok;
    j.norm = (cuq_mv_norm){.on = true, .w = w, .wdt = CT_F64, .eps = 1e-6f}; /* a norm weight of no float dtype */
    CHECK(!cuq_mv_ok(&j) && !cuq_mv_run(&j, NULL, 1, 0));
    j.norm.wdt = CT_F16;
    CHECK(cuq_mv_ok(&j));
    cuq_q8 q = cuq_q8_at(o, 1, 2048);
    j.xq = &q; /* a norm and a given q8 form */
    CHECK(!cuq_mv_ok(&j));
    scratch_free(&sc);
}

/* cuq_mv_one_format (the step planner lets decode attention start such a job early): exactly
 * the jobs with x's q8 form given that q4k_job / q6k_job send to a one-format kernel. */
static void test_one_format(void)
{
    if (!have_dev()) return;
    scratch sc = scratch_alloc(cuq_q8_bytes(2, 2048));
    static const ct_dtype kinds[][2] = {{CT_Q4_K, CT_Q4_K}, {CT_Q6_K, CT_Q6_K}, {CT_Q4_K, CT_Q6_K},
                                        {CT_Q4_K, CT_Q5_0}, {CT_Q8_0, CT_Q8_0}, {CT_F16, CT_F16}};
    for (int M = 1; M <= 2; M++) {
        cuq_q8 q = cuq_q8_at(sc.qb, M, 2048);
        for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
            cuq_mv_job j = two_parts(&sc, kinds[k], M, &q);
            bool want = q4k_job(&j) || q6k_job(&j);
            CHECK_MSG(cuq_mv_ok(&j) && cuq_mv_one_format(&j) == want, "M %d, %s + %s: one format %d, expected %d", M,
                      ct_dtype_name(kinds[k][0]), ct_dtype_name(kinds[k][1]), cuq_mv_one_format(&j), want);
        }
    }
    scratch_free(&sc);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    /* every job that can stage x does (the default stages only some): the staged paths
     * here, the default ones in the LLM tests; a setting given outside wins */
    setenv("CTORCH_CUDA_MVSTAGE", "all", 0);
    RUN(test_quantize_q8);
    RUN(test_rms_norm_q8);
    RUN(test_single_parts);
    RUN(test_mixed_parts);
    RUN(test_gated);
    RUN(test_q6k_jobs);
    RUN(test_q8v_jobs);
    RUN(test_refused);
    RUN(test_one_format);
    RUN(test_d8);
    RUN(test_d8_refused);
    return th_finish();
}

#else

static void test_no_cuda(void) { th_skip("the CUDA backend is not built"); }

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_no_cuda);
    return th_finish();
}

#endif
