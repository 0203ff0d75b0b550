/* The CPU backend's f32 row kernels (ew_f32_table) at every SIMD level this CPU has,
 * called directly so both store forms run on small rows: plain stores and the
 * streaming stores that ct_* ops use only for outputs of 16 MB and more (with their
 * unaligned head and masked tail). Each result is checked against a double-precision
 * reference written here, and the streamed result must equal the plain one bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "backends/cpu/elementwise.h"
#include "harness.h"

/* Reference forms in double, from the textbook definitions. */
static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static double ref_unary(ct_op_kind k, double x, double p0, double p1)
{
    switch (k) {
    case CT_OP_NEG: return -x;
    case CT_OP_ABS: return fabs(x);
    case CT_OP_EXP: return exp(x);
    case CT_OP_SQRT: return sqrt(x);
    case CT_OP_RSQRT: return 1.0 / sqrt(x);
    case CT_OP_RELU: return x > 0 ? x : 0.0;
    case CT_OP_CLAMP: return x < p0 ? p0 : x > p1 ? p1 : x;
    case CT_OP_SIGMOID: return ref_sigmoid(x);
    case CT_OP_SILU: return x * ref_sigmoid(x);
    case CT_OP_TANH: return tanh(x);
    case CT_OP_GELU:
        if (p0 != 0) return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
        return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    default: return NAN;
    }
}

static double ref_binary(ct_op_kind k, double a, double b)
{
    switch (k) {
    case CT_OP_ADD: return a + b;
    case CT_OP_SUB: return a - b;
    case CT_OP_MUL: return a * b;
    case CT_OP_DIV: return a / b;
    case CT_OP_MAXIMUM: return a > b ? a : b;
    case CT_OP_MINIMUM: return a < b ? a : b;
    case CT_OP_SWIGLU: return a * ref_sigmoid(a) * b;
    case CT_OP_GEGLU: return ref_unary(CT_OP_GELU, a, 1, 0) * b;
    default: return NAN;
    }
}

/* Exact ops get one f32 rounding; the vector exp/tanh/erf forms a few ulp more. */
static bool exact_kind(ct_op_kind k)
{
    return k == CT_OP_ADD || k == CT_OP_SUB || k == CT_OP_MUL || k == CT_OP_DIV || k == CT_OP_MAXIMUM ||
           k == CT_OP_MINIMUM || k == CT_OP_NEG || k == CT_OP_ABS || k == CT_OP_SQRT || k == CT_OP_RELU ||
           k == CT_OP_CLAMP;
}

#define NMAX 203
static const int64_t k_lens[] = {0, 5, 16, 37, NMAX};

typedef struct bufs {
    float *a, *b, *plain, *streamed; /* the outputs start `off` floats past a 64-byte boundary */
    float *plain_base, *streamed_base;
} bufs;

static void fill(th_rng *r, float *v, int64_t n, double lo, double hi, bool away_from_zero)
{
    for (int64_t i = 0; i < n; i++) {
        double x = th_uniform(r, lo, hi);
        if (away_from_zero) x = (x < 0 ? -0.5 : 0.5) + x; /* |x| >= 0.5 for divisors */
        v[i] = (float)x;
    }
}

/* Compares d[0..n) with want (tolerance by kind) and the streamed copy with the plain one. */
static void compare(const char *what, int lvl, ct_op_kind k, const float *plain, const float *streamed,
                    const double *want, int64_t n)
{
    double rtol = exact_kind(k) ? 6e-8 : 4e-6, atol = exact_kind(k) ? 0 : 2e-7;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs((double)plain[i] - want[i]);
        if (!(e <= atol + rtol * fabs(want[i]))) {
            CHECK_MSG(0, "level %d %s kind %d n %lld [%lld]: %.9g vs %.9g", lvl, what, (int)k, (long long)n,
                      (long long)i, (double)plain[i], want[i]);
            return;
        }
    }
    CHECK_MSG(n == 0 || memcmp(plain, streamed, sizeof(float) * (size_t)n) == 0,
              "level %d %s kind %d n %lld: streamed result differs from the plain one", lvl, what, (int)k, (long long)n);
}

static const ct_op_kind k_vv[] = {CT_OP_ADD, CT_OP_SUB, CT_OP_MUL, CT_OP_DIV,
                                  CT_OP_MAXIMUM, CT_OP_MINIMUM, CT_OP_SWIGLU, CT_OP_GEGLU};
static const ct_op_kind k_vs[] = {CT_OP_ADD, CT_OP_SUB, CT_OP_MUL, CT_OP_DIV, CT_OP_MAXIMUM, CT_OP_MINIMUM};
static const ct_op_kind k_un[] = {CT_OP_NEG, CT_OP_ABS, CT_OP_EXP, CT_OP_SQRT, CT_OP_RSQRT, CT_OP_RELU,
                                  CT_OP_CLAMP, CT_OP_SIGMOID, CT_OP_SILU, CT_OP_TANH, CT_OP_GELU, CT_OP_GELU};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void run_level(int lvl, const bufs *B, th_rng *r)
{
    const ew_f32_kernels *t = ew_f32_table((cpu_simd)lvl);
    double want[NMAX];
    for (size_t li = 0; li < COUNT(k_lens); li++) {
        int64_t n = k_lens[li];
        for (size_t i = 0; i < COUNT(k_vv); i++) {
            ct_op_kind k = k_vv[i];
            fill(r, B->a, n, -4, 4, false);
            fill(r, B->b, n, -2, 2, k == CT_OP_DIV);
            t->vv(k, B->plain, B->a, B->b, n, false);
            t->vv(k, B->streamed, B->a, B->b, n, true);
            for (int64_t e = 0; e < n; e++) want[e] = ref_binary(k, B->a[e], B->b[e]);
            compare("vv", lvl, k, B->plain, B->streamed, want, n);
        }
        for (size_t i = 0; i < COUNT(k_vs); i++)
            for (int rev = 0; rev < 2; rev++) {
                ct_op_kind k = k_vs[i];
                fill(r, B->a, n, -4, 4, k == CT_OP_DIV && rev);
                float s = k == CT_OP_DIV && !rev ? -1.75f : 0.625f;
                t->vs(k, B->plain, B->a, s, rev, n, false);
                t->vs(k, B->streamed, B->a, s, rev, n, true);
                for (int64_t e = 0; e < n; e++) want[e] = rev ? ref_binary(k, s, B->a[e]) : ref_binary(k, B->a[e], s);
                compare(rev ? "sv" : "vs", lvl, k, B->plain, B->streamed, want, n);
            }
        for (size_t i = 0; i < COUNT(k_un); i++) {
            ct_op_kind k = k_un[i];
            /* the second GELU entry is the erf form (p0 = 0) */
            float p0 = k == CT_OP_CLAMP ? -1.5f : k == CT_OP_GELU && i + 1 < COUNT(k_un) ? 1.0f : 0.0f;
            float p1 = k == CT_OP_CLAMP ? 0.75f : 0.0f;
            bool pos = k == CT_OP_SQRT || k == CT_OP_RSQRT;
            fill(r, B->a, n, pos ? 0.01 : -6, pos ? 9 : 6, false);
            t->unary(k, B->plain, B->a, n, p0, p1, false);
            t->unary(k, B->streamed, B->a, n, p0, p1, true);
            for (int64_t e = 0; e < n; e++) want[e] = ref_unary(k, B->a[e], p0, p1);
            compare("unary", lvl, k, B->plain, B->streamed, want, n);
        }
    }
}

static void test_row_kernels(void)
{
    th_rng r = {0xe1e};
    bufs B;
    B.a = malloc(sizeof(float) * NMAX);
    B.b = malloc(sizeof(float) * NMAX);
    /* aligned_alloc wants a size that is a multiple of the alignment */
    size_t bytes = (sizeof(float) * (NMAX + 64) + 63) & ~(size_t)63;
    B.plain_base = aligned_alloc(64, bytes);
    B.streamed_base = aligned_alloc(64, bytes);
    cpu_simd saved = cpu_simd_level();
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) {
            fprintf(stderr, "  skipped SIMD level %d: this CPU lacks it (or CTORCH_SIMD caps it)\n", lvl);
            continue;
        }
        /* aligned outputs, and outputs with an unaligned head of 1 and 13 floats */
        static const int offs[] = {0, 1, 3};
        for (size_t o = 0; o < COUNT(offs); o++) {
            B.plain = B.plain_base + offs[o];
            B.streamed = B.streamed_base + offs[o] * 5 % 16;
            run_level(lvl, &B, &r);
        }
    }
    cpu_simd_set_level(saved);
    free(B.a);
    free(B.b);
    free(B.plain_base);
    free(B.streamed_base);
}

/* max and exp_sum over rows that end inside a vector and span the 1024-element blocks. */
static void test_max_exp_sum(void)
{
    th_rng r = {0x5a};
    static const int64_t lens[] = {0, 1, 7, 17, 1030, 2100};
    float *a = malloc(sizeof(float) * 2100), *d = malloc(sizeof(float) * 2100);
    cpu_simd saved = cpu_simd_level();
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) continue;
        const ew_f32_kernels *t = ew_f32_table((cpu_simd)lvl);
        for (size_t li = 0; li < COUNT(lens); li++) {
            int64_t n = lens[li];
            fill(&r, a, n, -8, 8, false);
            double m = -INFINITY;
            for (int64_t i = 0; i < n; i++) m = a[i] > m ? a[i] : m;
            CHECK_MSG(t->max(a, n) == (float)m, "level %d n %lld: max %g vs %g", lvl, (long long)n, (double)t->max(a, n), m);
            if (n == 0) continue;
            double want = 0;
            for (int64_t i = 0; i < n; i++) want += exp((double)a[i] - m);
            double got = t->exp_sum(d, a, (float)m, n), got_nod = t->exp_sum(NULL, a, (float)m, n);
            CHECK_NEAR(got, want, 1e-5 * want);
            CHECK(got == got_nod);
            double worst = 0;
            for (int64_t i = 0; i < n; i++) {
                double e = fabs(d[i] - exp((double)a[i] - m));
                worst = e > worst ? e : worst;
            }
            CHECK_MSG(worst <= 4e-7, "level %d n %lld: exp error %g", lvl, (long long)n, worst);
        }
    }
    cpu_simd_set_level(saved);
    free(a);
    free(d);
}

/* cpu_f32_to_f16_row (the f32 -> f16 copies into a KV cache) at every level, bit for bit
 * ct_f32_to_f16 (itself checked on every f16 value in tests/core): rounding ties, f16
 * subnormals, the overflow edge, f32 subnormals, infinities and NaNs of both signs with
 * several payloads, in rows whose NaNs sit in the SIMD body and in the scalar tail. */
static void test_f32_to_f16_rows(void)
{
    th_rng r = {0xf16};
    enum { N = 200 };
    static const uint32_t special[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u,
                                       0x7f800001u, 0x7fbfffffu, 0xffc12345u, 0x477fefffu, 0x477ff000u, 0x477fffffu,
                                       0x38800000u, 0x387fffffu, 0x33800000u, 0x33000000u, 0x33000001u, 0x00000001u,
                                       0x3f801000u, 0x3f803000u, 0x3f800fffu, 0xc7800000u};
    float *src = malloc(sizeof(float) * N);
    uint16_t *got = malloc(sizeof(uint16_t) * N);
    cpu_simd saved = cpu_simd_level();
    for (int lvl = 0; lvl <= 2; lvl++) {
        cpu_simd_set_level((cpu_simd)lvl);
        if ((int)cpu_simd_level() != lvl) continue;
        for (int rep = 0; rep < 8; rep++) {
            for (int i = 0; i < N; i++) {
                double mag = pow(2.0, th_uniform(&r, -30.0, 18.0)); /* f16 subnormals to overflow */
                src[i] = (float)(th_uniform(&r, 0, 1) < 0.5 ? -mag : mag);
            }
            /* specials at positions that move between the 16-wide body and the tail */
            for (size_t k = 0; k < COUNT(special); k++) {
                int at = (int)((k * 37 + (size_t)rep * 11) % N);
                memcpy(&src[at], &special[k], sizeof(float));
            }
            if (rep == 0) /* one row with no NaN at all: only the vector conversion runs */
                for (int i = 0; i < N; i++)
                    if (src[i] != src[i]) src[i] = 1.0f;
            static const int64_t lens[] = {0, 1, 15, 16, 17, 40, N};
            for (size_t li = 0; li < COUNT(lens); li++) {
                int64_t n = lens[li];
                memset(got, 0xAB, sizeof(uint16_t) * N);
                cpu_f32_to_f16_row(src, got, n);
                int bad = -1;
                for (int64_t i = 0; i < n && bad < 0; i++)
                    if (got[i] != ct_f32_to_f16(src[i])) bad = (int)i;
                CHECK_MSG(bad < 0, "level %d rep %d n %lld: element %d", lvl, rep, (long long)n, bad);
                CHECK_MSG(n == N || got[n] == 0xABAB, "level %d n %lld: wrote past the row", lvl, (long long)n);
            }
        }
    }
    cpu_simd_set_level(saved);
    free(src);
    free(got);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_row_kernels);
    RUN(test_max_exp_sum);
    RUN(test_f32_to_f16_rows);
    return th_finish();
}
