/* Copy-based ops: contiguous, clone, cast between every plain dtype, copy_ with
 * broadcast into strided views, concat, stack, to_host. The test values are
 * exact in every dtype involved (or converted by the rules written here), so
 * comparisons are exact unless stated. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "quant/quant.h"

static const ct_dtype g_plain[] = {CT_F32, CT_F64, CT_F16, CT_BF16, CT_I32, CT_I64, CT_BOOL, CT_C64, CT_I8};
#define N_PLAIN (int)(sizeof g_plain / sizeof g_plain[0])

/* Values chosen so that f16/bf16 hold them exactly or by a single rounding the reference repeats. */
static const double g_vals[] = {0, 1, -1, 2.5, -3.75, 100, -100, 0.1, 7, 0.5, -0.0, 64.25};
#define N_VALS (int)(sizeof g_vals / sizeof g_vals[0])

/* What storing v into dtype t keeps (float->int truncates toward zero, like C and PyTorch). */
static double ref_store(double v, ct_dtype t)
{
    switch (t) {
    case CT_F32: case CT_C64: return (float)v;
    case CT_F64: return v;
    case CT_F16: return ct_f16_to_f32(ct_f32_to_f16((float)v));
    case CT_BF16: return ct_bf16_to_f32(ct_f32_to_bf16((float)v));
    case CT_I32: case CT_I64: case CT_I8: return trunc(v);
    case CT_BOOL: return v != 0;
    default: return NAN;
    }
}

/* Raw bytes of v in dtype t (c64: imaginary part `im`). */
static void encode(void *p, ct_dtype t, double v, float im)
{
    switch (t) {
    case CT_F32: *(float *)p = (float)v; break;
    case CT_F64: *(double *)p = v; break;
    case CT_F16: *(uint16_t *)p = ct_f32_to_f16((float)v); break;
    case CT_BF16: *(uint16_t *)p = ct_f32_to_bf16((float)v); break;
    case CT_I32: *(int32_t *)p = (int32_t)trunc(v); break;
    case CT_I64: *(int64_t *)p = (int64_t)trunc(v); break;
    case CT_I8: *(int8_t *)p = (int8_t)trunc(v); break;
    case CT_BOOL: *(uint8_t *)p = v != 0; break;
    case CT_C64: ((float *)p)[0] = (float)v; ((float *)p)[1] = im; break;
    default: break;
    }
}

static ct_tensor *make(ct_dtype t, int ndim, const int64_t *shape, const double *vals)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    size_t es = ct_dtype_block_bytes(t);
    char *buf = calloc((size_t)(n ? n : 1), es);
    for (int64_t i = 0; i < n; i++) encode(buf + i * (int64_t)es, t, vals[i], (float)i);
    ct_tensor *x = NULL;
    CHECK_OK(ct_tensor_from_data(ndim, shape, t, buf, &x));
    free(buf);
    return x;
}

static double item(const ct_tensor *t, int64_t i)
{
    double v = NAN;
    CHECK_OK(ct_tensor_item(t, i, &v));
    return v;
}

static bool same_storage(const ct_tensor *a, const ct_tensor *b)
{
    const void *pa, *pb;
    if (ct_tensor_data(a, &pa) != CT_OK || ct_tensor_data(b, &pb) != CT_OK) return false;
    size_t es = ct_dtype_block_bytes(ct_tensor_dtype(a));
    return (const char *)pa - ct_tensor_offset(a) * (int64_t)es == (const char *)pb - ct_tensor_offset(b) * (int64_t)es;
}

static void test_cast_all_pairs(void)
{
    int64_t shape[1] = {N_VALS};
    for (int i = 0; i < N_PLAIN; i++) {
        ct_dtype from = g_plain[i];
        double src_vals[N_VALS];
        for (int k = 0; k < N_VALS; k++) src_vals[k] = from == CT_BOOL ? (double)(k % 2) : g_vals[k];
        ct_tensor *src = make(from, 1, shape, src_vals);
        for (int j = 0; j < N_PLAIN; j++) {
            ct_dtype to = g_plain[j];
            ct_tensor *dst = NULL;
            CHECK_OK(ct_cast(src, to, &dst));
            if (!dst) continue;
            CHECK(ct_tensor_dtype(dst) == to && ct_tensor_numel(dst) == N_VALS && ct_tensor_is_contiguous(dst));
            int bad = 0;
            for (int k = 0; k < N_VALS; k++) {
                double want = ref_store(ref_store(src_vals[k], from), to), got = item(dst, k);
                if (got != want && bad++ < 2)
                    fprintf(stderr, "  %s -> %s: %g gave %g want %g\n", ct_dtype_name(from), ct_dtype_name(to), src_vals[k], got, want);
            }
            if (to == CT_C64) {
                /* imaginary parts: kept from a c64 source, zero from a real one */
                const float *p = NULL;
                CHECK_OK(ct_tensor_data(dst, (const void **)&p));
                for (int k = 0; p && k < N_VALS; k++) {
                    float want = from == CT_C64 ? (float)k : 0.0f;
                    if (p[2 * k + 1] != want && bad++ < 2) fprintf(stderr, "  %s -> c64: imag %g\n", ct_dtype_name(from), p[2 * k + 1]);
                }
            }
            CHECK_MSG(bad == 0, "%s -> %s", ct_dtype_name(from), ct_dtype_name(to));
            ct_tensor_free(dst);
        }
        ct_tensor_free(src);
    }
    /* casting a strided view: transposed f16 -> f64 */
    int64_t s23[2] = {2, 3};
    double v[6] = {1, 2, 3, 4, 5, 6};
    ct_tensor *a = make(CT_F16, 2, s23, v), *t = NULL, *c = NULL;
    CHECK_OK(ct_transpose(a, 0, 1, &t));
    CHECK_OK(ct_cast(t, CT_F64, &c));
    double want[6] = {1, 4, 2, 5, 3, 6};
    for (int k = 0; c && k < 6; k++) CHECK(item(c, k) == want[k]);
    ct_tensor_free(a);
    ct_tensor_free(t);
    ct_tensor_free(c);
}

static void test_contiguous_clone(void)
{
    th_rng r = {3};
    int64_t shape[3] = {3, 4, 5};
    ct_tensor *a = th_random(&r, 3, shape, CT_F32, -1, 1), *c = NULL, *p = NULL, *pc = NULL, *cl = NULL, *sl = NULL, *slc = NULL;
    /* already contiguous: same storage */
    CHECK_OK(ct_contiguous(a, &c));
    CHECK(c && same_storage(a, c));
    int perm[3] = {2, 0, 1};
    CHECK_OK(ct_permute(a, perm, &p));
    CHECK_OK(ct_contiguous(p, &pc));
    CHECK(pc && ct_tensor_is_contiguous(pc) && !same_storage(p, pc));
    if (pc) {
        double *got = th_values(pc), *want = th_values(p);
        CHECK(th_allclose(got, want, 60, 0, 0));
        free(got);
        free(want);
    }
    /* stepped slice with an offset */
    CHECK_OK(ct_slice(a, 2, 1, 5, 2, &sl));
    CHECK_OK(ct_contiguous(sl, &slc));
    if (slc) {
        double *got = th_values(slc), *want = th_values(sl);
        CHECK(ct_tensor_numel(slc) == 24 && th_allclose(got, want, 24, 0, 0));
        free(got);
        free(want);
    }
    /* clone: a new storage with equal values; writing it leaves the source alone */
    CHECK_OK(ct_clone(a, &cl));
    if (cl) {
        CHECK(!same_storage(a, cl));
        double before = item(a, 7);
        float *w = NULL;
        CHECK_OK(ct_tensor_data_mut(cl, (void **)&w));
        if (w) w[7] = 42.0f;
        CHECK(item(a, 7) == before && item(cl, 7) == 42.0);
    }
    /* size-0 and scalar */
    int64_t z[2] = {0, 3};
    ct_tensor *e = NULL, *ec = NULL, *s = NULL, *sc = NULL;
    CHECK_OK(ct_zeros(2, z, CT_F32, &e));
    CHECK_OK(ct_clone(e, &ec));
    CHECK(ec && ct_tensor_numel(ec) == 0 && ct_tensor_shape(ec)[1] == 3);
    CHECK_OK(ct_full(0, NULL, CT_I64, -9, &s));
    CHECK_OK(ct_clone(s, &sc));
    CHECK(sc && ct_tensor_ndim(sc) == 0 && item(sc, 0) == -9);
    CHECK_STATUS(ct_clone(NULL, &cl), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_contiguous(a, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_cast(a, CT_Q4_K, &c), CT_ERR_DTYPE);
    CHECK_STATUS(ct_cast(a, CT_DTYPE_COUNT, &c), CT_ERR_DTYPE);
    CHECK_STATUS(ct_cast(NULL, CT_F32, &c), CT_ERR_INVALID_ARG);
    ct_tensor *tensors[] = {a, c, p, pc, cl, sl, slc, e, ec, s, sc};
    for (size_t i = 0; i < sizeof tensors / sizeof tensors[0]; i++) ct_tensor_free(tensors[i]);
}

static void test_copy_broadcast_strided(void)
{
    int64_t s45[2] = {4, 5};
    ct_tensor *dst = NULL, *tr = NULL, *part = NULL;
    CHECK_OK(ct_zeros(2, s45, CT_F32, &dst));
    CHECK_OK(ct_transpose(dst, 0, 1, &tr));           /* [5, 4], strides (1, 5) */
    CHECK_OK(ct_slice(tr, 0, 1, 5, 2, &part));        /* rows 1 and 3 of tr = columns 1, 3 of dst: [2, 4] */
    double sv[4] = {10, 20, 30, 40};
    int64_t s4[1] = {4};
    ct_tensor *src = make(CT_F64, 1, s4, sv);         /* f64 [4] broadcast over [2, 4], cast to f32 */
    CHECK_OK(ct_copy_(part, src));
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            double want = (j == 1 || j == 3) ? sv[i] : 0;
            CHECK_MSG(item(dst, i * 5 + j) == want, "dst[%d][%d] = %g want %g", i, j, item(dst, i * 5 + j), want);
        }
    /* a scalar broadcast everywhere, into a permuted int view */
    ct_tensor *idst = NULL, *itr = NULL, *sc = NULL;
    int64_t s234[3] = {2, 3, 4};
    CHECK_OK(ct_zeros(3, s234, CT_I32, &idst));
    int perm[3] = {1, 2, 0};
    CHECK_OK(ct_permute(idst, perm, &itr));
    CHECK_OK(ct_full(0, NULL, CT_F32, -3.9, &sc));
    CHECK_OK(ct_copy_(itr, sc));
    for (int i = 0; i < 24; i++) CHECK(item(idst, i) == -3);
    /* errors: not broadcastable, broadcast the wrong way, expanded destination, NULLs */
    int64_t s3[1] = {3}, s1x4[2] = {1, 4};
    double v3[3] = {1, 2, 3};
    ct_tensor *bad = make(CT_F32, 1, s3, v3), *row = NULL, *ex = NULL;
    CHECK_STATUS(ct_copy_(part, bad), CT_ERR_SHAPE);
    CHECK_OK(ct_zeros(2, s1x4, CT_F32, &row));
    CHECK_STATUS(ct_copy_(row, part), CT_ERR_SHAPE);
    int64_t s34[2] = {3, 4};
    CHECK_OK(ct_expand(row, 2, s34, &ex));
    CHECK_STATUS(ct_copy_(ex, src), CT_ERR_SHAPE);
    CHECK_STATUS(ct_copy_(NULL, src), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_copy_(part, NULL), CT_ERR_INVALID_ARG);
    ct_tensor *all[] = {dst, tr, part, src, idst, itr, sc, bad, row, ex};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_concat_stack(void)
{
    th_rng r = {11};
    int64_t sa[3] = {2, 1, 3}, sc[3] = {2, 0, 3}, sbt[3] = {2, 3, 4};
    ct_tensor *a = th_random(&r, 3, sa, CT_F32, -5, 5), *bt = th_random(&r, 3, sbt, CT_F32, -5, 5), *b = NULL;
    ct_tensor *c = NULL, *out = NULL;
    CHECK_OK(ct_transpose(bt, 1, 2, &b)); /* strided [2, 4, 3] */
    CHECK_OK(ct_zeros(3, sc, CT_I32, &c)); /* empty part, promotes to f32 */
    const ct_tensor *parts[3] = {a, b, c};
    CHECK_OK(ct_concat(parts, 3, 1, &out));
    if (out) {
        CHECK(ct_tensor_dtype(out) == CT_F32 && ct_tensor_shape(out)[1] == 5 && ct_tensor_numel(out) == 30);
        double *va = th_values(a), *vb = th_values(b), *vo = th_values(out);
        int bad = 0;
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 5; j++)
                for (int k = 0; k < 3; k++) {
                    double want = j == 0 ? va[i * 3 + k] : vb[(i * 4 + j - 1) * 3 + k];
                    bad += (float)want != (float)vo[(i * 5 + j) * 3 + k];
                }
        CHECK(bad == 0);
        free(va);
        free(vb);
        free(vo);
    }
    ct_tensor_free(out);
    out = NULL;
    /* negative dim; i32 + f64 promotes to f64 */
    int64_t s22[2] = {2, 2};
    double v1[4] = {1, 2, 3, 4}, v2[4] = {5.5, 6.5, 7.5, 8.5};
    ct_tensor *i1 = make(CT_I32, 2, s22, v1), *f2 = make(CT_F64, 2, s22, v2);
    const ct_tensor *p2[2] = {i1, f2};
    CHECK_OK(ct_concat(p2, 2, -1, &out));
    double want_c[8] = {1, 2, 5.5, 6.5, 3, 4, 7.5, 8.5};
    if (out) {
        CHECK(ct_tensor_dtype(out) == CT_F64);
        for (int k = 0; k < 8; k++) CHECK(item(out, k) == want_c[k]);
    }
    ct_tensor_free(out);
    out = NULL;
    /* stack on a new leading, middle and trailing dim */
    static const int dims[3] = {0, 1, -1};
    for (int d = 0; d < 3; d++) {
        CHECK_OK(ct_stack(p2, 2, dims[d], &out));
        if (!out) continue;
        CHECK(ct_tensor_ndim(out) == 3);
        int64_t idx[3];
        for (int64_t f = 0; f < 8; f++) {
            const int64_t *sh = ct_tensor_shape(out);
            idx[2] = f % sh[2];
            idx[1] = (f / sh[2]) % sh[1];
            idx[0] = f / (sh[1] * sh[2]);
            int nd = dims[d] < 0 ? 2 : dims[d];
            int64_t which = idx[nd], rest[2], m = 0;
            for (int q = 0; q < 3; q++)
                if (q != nd) rest[m++] = idx[q];
            double want = which == 0 ? v1[rest[0] * 2 + rest[1]] : v2[rest[0] * 2 + rest[1]];
            CHECK_MSG(item(out, f) == want, "stack dim %d element %lld", dims[d], (long long)f);
        }
        ct_tensor_free(out);
        out = NULL;
    }
    /* errors */
    int64_t s23[2] = {2, 3};
    ct_tensor *m = NULL;
    CHECK_OK(ct_zeros(2, s23, CT_F32, &m));
    const ct_tensor *mism[2] = {i1, m}, *withnull[2] = {i1, NULL};
    CHECK_STATUS(ct_concat(mism, 2, 0, &out), CT_ERR_SHAPE);
    CHECK_STATUS(ct_concat(p2, 2, 2, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_concat(p2, 0, 0, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_concat(NULL, 2, 0, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_concat(withnull, 2, 0, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_concat(p2, 2, 0, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_stack(mism, 2, 0, &out), CT_ERR_SHAPE);
    CHECK_STATUS(ct_stack(withnull, 2, 0, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_stack(p2, 2, 3, &out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_stack(p2, 0, 0, &out), CT_ERR_INVALID_ARG);
    CHECK(out == NULL);
    ct_tensor *all[] = {a, bt, b, c, i1, f2, m};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

static void test_to_host(void)
{
    int64_t s23[2] = {2, 3};
    double v[6] = {1, 2, 3, 4, 5, 6};
    ct_tensor *a = make(CT_I64, 2, s23, v), *t = NULL;
    CHECK_OK(ct_transpose(a, 0, 1, &t));
    int64_t out[6] = {0}, want[6] = {1, 4, 2, 5, 3, 6};
    CHECK_OK(ct_tensor_to_host(t, out, sizeof out));
    CHECK(memcmp(out, want, sizeof out) == 0);
    CHECK_STATUS(ct_tensor_to_host(t, out, sizeof out - 1), CT_ERR_RANGE);
    CHECK_STATUS(ct_tensor_to_host(t, NULL, sizeof out), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_tensor_to_host(NULL, out, sizeof out), CT_ERR_INVALID_ARG);
    ct_tensor_free(a);
    ct_tensor_free(t);
}

/* Casting a quantized tensor of several rows (and a row slice of one) to f32 must
 * give each row's own dequantized values: COPY walks quantized rows in blocks. */
static void test_cast_quantized_rows(void)
{
    enum { ROWS = 5, COLS = 64 };
    float src[ROWS * COLS], want[ROWS * COLS];
    th_rng r = {77};
    for (int i = 0; i < ROWS * COLS; i++) src[i] = (float)th_uniform(&r, -2, 2);
    uint8_t q[ROWS * (COLS / 32) * 34];
    for (int i = 0; i < ROWS; i++) {
        CHECK_OK(quant_quantize_row(CT_Q8_0, src + i * COLS, q + i * (COLS / 32) * 34, COLS));
        CHECK_OK(quant_dequantize_row(CT_Q8_0, q + i * (COLS / 32) * 34, want + i * COLS, COLS));
    }
    int64_t shape[2] = {ROWS, COLS};
    ct_tensor *t = NULL, *f = NULL, *rows = NULL, *fr = NULL;
    CHECK_OK(ct_tensor_from_data(2, shape, CT_Q8_0, q, &t));
    CHECK_OK(ct_cast(t, CT_F32, &f));
    double got[ROWS * COLS], wantd[ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++) {
        CHECK_OK(ct_tensor_item(f, i, &got[i]));
        wantd[i] = want[i];
    }
    CHECK(th_allclose(got, wantd, ROWS * COLS, 0, 0)); /* same dequantizer: exact */
    CHECK_OK(ct_narrow(t, 0, 2, 3, &rows));
    CHECK_OK(ct_cast(rows, CT_F32, &fr));
    for (int i = 0; i < 3 * COLS; i++) CHECK_OK(ct_tensor_item(fr, i, &got[i]));
    CHECK(th_allclose(got, wantd + 2 * COLS, 3 * COLS, 0, 0));
    ct_tensor_free(t);
    ct_tensor_free(f);
    ct_tensor_free(rows);
    ct_tensor_free(fr);
}

int main(void)
{
    RUN(test_cast_all_pairs);
    RUN(test_cast_quantized_rows);
    RUN(test_contiguous_clone);
    RUN(test_copy_broadcast_strided);
    RUN(test_concat_stack);
    RUN(test_to_host);
    return th_finish();
}
