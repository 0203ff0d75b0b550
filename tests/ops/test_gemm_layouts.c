/* The CPU GEMM entries (cpu_gemm_f32 / f64 / c64) with every operand layout the
 * op frontends can hand them: row-major, column-major (transposed views), strided
 * with no unit stride (packed before BLAS), and stride 0 (expanded views); one-row
 * and one-column products (the gemv shortcuts), accumulation, and K = 0. Checked
 * against a double-precision product of the same strided operands. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/gemm.h"
#include "harness.h"

typedef struct layout {
    int64_t rs, cs;
} layout;

/* The strides of an r x c operand in layout kind: 0 row-major, 1 column-major,
 * 2 both strides 2 (no unit stride), 3 stride 0 along the columns (each row one value). */
static layout make_layout(int kind, int64_t r, int64_t c)
{
    switch (kind) {
    case 0: return (layout){c, 1};
    case 1: return (layout){1, r};
    case 2: return (layout){2 * c, 2};
    default: return (layout){1, 0};
    }
}

#define MAXE 4096

static double ref_at(const double *a, layout l, int64_t i, int64_t j) { return a[i * l.rs + j * l.cs]; }

static void run_case(bool f64, int64_t M, int64_t N, int64_t K, int la, int lb, bool acc, th_rng *r)
{
    layout a = make_layout(la, M, K), b = make_layout(lb, K, N);
    double *av = malloc(sizeof(double) * MAXE), *bv = malloc(sizeof(double) * MAXE), *cv = malloc(sizeof(double) * MAXE);
    float *af = malloc(sizeof(float) * MAXE), *bf = malloc(sizeof(float) * MAXE), *cf = malloc(sizeof(float) * MAXE);
    for (int i = 0; i < MAXE; i++) {
        af[i] = (float)th_uniform(r, -1, 1), av[i] = af[i];
        bf[i] = (float)th_uniform(r, -1, 1), bv[i] = bf[i];
        cf[i] = (float)th_uniform(r, -1, 1), cv[i] = cf[i];
    }
    int64_t ldc = N + 1;
    double *c0 = malloc(sizeof(double) * (size_t)(M * ldc));
    memcpy(c0, cv, sizeof(double) * (size_t)(M * ldc));
    if (f64) CHECK_OK(cpu_gemm_f64(M, N, K, av, a.rs, a.cs, bv, b.rs, b.cs, cv, ldc, acc));
    else CHECK_OK(cpu_gemm_f32(M, N, K, af, a.rs, a.cs, bf, b.rs, b.cs, cf, ldc, acc));
    double worst = 0;
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < ldc; j++) {
            double got = f64 ? cv[i * ldc + j] : cf[i * ldc + j];
            if (j == N) { /* the column past N is never written */
                if (got != c0[i * ldc + j]) worst = 1e9;
                continue;
            }
            double s = acc ? c0[i * ldc + j] : 0, sabs = fabs(s);
            for (int64_t k = 0; k < K; k++) {
                double t = ref_at(av, a, i, k) * ref_at(bv, b, k, j);
                s += t;
                sabs += fabs(t);
            }
            double e = fabs(got - s) / ((K + 2) * (f64 ? 0x1p-52 : 0x1p-23) * sabs + 1e-300);
            if (!(e <= worst)) worst = e;
        }
    CHECK_MSG(worst <= 1.0, "%s M %lld N %lld K %lld layouts %d/%d acc %d: error %.3g of the bound", f64 ? "f64" : "f32",
              (long long)M, (long long)N, (long long)K, la, lb, acc, worst);
    free(av), free(bv), free(cv), free(af), free(bf), free(cf), free(c0);
}

static void test_real_layouts(void)
{
    th_rng r = {0x6e33};
    static const int64_t shapes[][3] = {{1, 7, 9}, {6, 1, 9}, {5, 6, 7}, {1, 1, 5}};
    for (int f64 = 0; f64 < 2; f64++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
            for (int la = 0; la < 4; la++)
                for (int lb = 0; lb < 4; lb++)
                    for (int acc = 0; acc < 2; acc++)
                        run_case(f64, shapes[s][0], shapes[s][1], shapes[s][2], la, lb, acc, &r);
}

/* K = 0: C = 0, or unchanged when accumulating. */
static void test_k_zero(void)
{
    double a[1] = {5}, b[1] = {7}, c[6];
    for (int acc = 0; acc < 2; acc++) {
        for (int i = 0; i < 6; i++) c[i] = 1.5;
        CHECK_OK(cpu_gemm_f64(2, 3, 0, a, 0, 1, b, 3, 1, c, 3, acc));
        for (int i = 0; i < 6; i++) CHECK(c[i] == (acc ? 1.5 : 0.0));
    }
    float cz[4] = {9, 9, 9, 9}, cf[2] = {1, 2};
    CHECK_OK(cpu_gemm_c64(1, 2, 0, cf, 1, 1, cf, 1, 1, cz, 2));
    for (int i = 0; i < 4; i++) CHECK(cz[i] == 0.0f);
}

/* complex64 with operands BLAS cannot take (no unit stride) and with plain ones. */
static void test_c64(void)
{
    th_rng r = {0xc64};
    enum { M = 3, N = 4, K = 5 };
    float *A = malloc(sizeof(float) * 2 * 4 * M * K), *B = malloc(sizeof(float) * 2 * 4 * K * N);
    float C[2 * M * N];
    for (int i = 0; i < 2 * 4 * M * K; i++) A[i] = (float)th_uniform(&r, -1, 1);
    for (int i = 0; i < 2 * 4 * K * N; i++) B[i] = (float)th_uniform(&r, -1, 1);
    for (int kind = 0; kind < 3; kind++) {
        layout a = make_layout(kind, M, K), b = make_layout(kind == 2 ? 2 : 0, K, N);
        CHECK_OK(cpu_gemm_c64(M, N, K, A, a.rs, a.cs, B, b.rs, b.cs, C, N));
        double worst = 0;
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                double re = 0, im = 0;
                for (int k = 0; k < K; k++) {
                    const float *x = A + 2 * (i * a.rs + k * a.cs), *y = B + 2 * (k * b.rs + j * b.cs);
                    re += (double)x[0] * y[0] - (double)x[1] * y[1];
                    im += (double)x[0] * y[1] + (double)x[1] * y[0];
                }
                double e = fabs(C[2 * (i * N + j)] - re) + fabs(C[2 * (i * N + j) + 1] - im);
                worst = e > worst ? e : worst;
            }
        CHECK_MSG(worst <= 1e-5, "layout %d: error %g", kind, worst);
    }
    free(A), free(B);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_real_layouts);
    RUN(test_k_zero);
    RUN(test_c64);
    return th_finish();
}
