/* ct_set_rows: rows written at indices held in a tensor, against a plain loop in the
 * test; f32/f16/bf16/f64 destinations, i32/i64 indices, strided views, bad indices
 * (nothing written) and argument errors. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define R 8
#define C 16

static ct_tensor *indices(ct_dtype dt, int n, const int64_t *v)
{
    int64_t shape[1] = {n};
    int32_t v32[8];
    for (int i = 0; i < n; i++) v32[i] = (int32_t)v[i];
    ct_tensor *t = NULL;
    CHECK_OK(ct_tensor_from_data(1, shape, dt, dt == CT_I32 ? (const void *)v32 : (const void *)v, &t));
    return t;
}

/* dst values after the write, as the reference computes them: rows replaced by src
 * values rounded to dst's dtype (a later index wins, as a loop in order does). */
static double *reference(const double *dst0, const double *src, const int64_t *idx, int n, int cols, ct_dtype dt)
{
    double *want = malloc(sizeof(double) * R * C);
    memcpy(want, dst0, sizeof(double) * R * C);
    for (int i = 0; i < n; i++)
        for (int c = 0; c < cols; c++) {
            double v = src[i * cols + c];
            if (dt == CT_F16) v = ct_f16_to_f32(ct_f32_to_f16((float)v));
            else if (dt == CT_BF16) v = ct_bf16_to_f32(ct_f32_to_bf16((float)v));
            else if (dt == CT_F32) v = (float)v;
            want[idx[i] * C + c] = v;
        }
    return want;
}

static void check_case(ct_dtype dst_dt, ct_dtype src_dt, ct_dtype idx_dt)
{
    th_rng rng = {(uint64_t)(dst_dt * 31 + src_dt * 7 + idx_dt)};
    int64_t dshape[2] = {R, C}, sshape[2] = {3, C};
    ct_tensor *dst = th_random(&rng, 2, dshape, dst_dt, -1, 1), *src = th_random(&rng, 2, sshape, src_dt, -1, 1);
    const int64_t idx[3] = {5, 0, 7};
    ct_tensor *ix = indices(idx_dt, 3, idx);
    double *d0 = th_values(dst), *sv = th_values(src);
    CHECK_OK(ct_set_rows(dst, src, ix));
    double *got = th_values(dst), *want = reference(d0, sv, idx, 3, C, dst_dt);
    CHECK_MSG(memcmp(got, want, sizeof(double) * R * C) == 0, "dst %s src %s index %s", ct_dtype_name(dst_dt),
              ct_dtype_name(src_dt), ct_dtype_name(idx_dt));
    free(d0), free(sv), free(got), free(want);
    ct_tensor_free(dst), ct_tensor_free(src), ct_tensor_free(ix);
}

static void test_dtypes(void)
{
    check_case(CT_F32, CT_F32, CT_I64);
    check_case(CT_F32, CT_F32, CT_I32);
    check_case(CT_F16, CT_F32, CT_I32); /* an f16 KV cache fed f32 rows */
    check_case(CT_F16, CT_F16, CT_I64);
    check_case(CT_BF16, CT_F32, CT_I64);
    check_case(CT_F64, CT_F64, CT_I32);
}

/* dst a column window of a larger cache, src a transposed view. */
static void test_strided(void)
{
    th_rng rng = {99};
    int64_t cshape[2] = {R, C}, tshape[2] = {8, 3};
    ct_tensor *cache = th_random(&rng, 2, cshape, CT_F32, -1, 1), *srcT = th_random(&rng, 2, tshape, CT_F32, -1, 1);
    ct_tensor *dst = NULL, *src = NULL;
    CHECK_OK(ct_narrow(cache, 1, 4, 8, &dst));
    CHECK_OK(ct_transpose(srcT, 0, 1, &src)); /* [3, 8], strides (1, 3) */
    const int64_t idx[3] = {2, 6, 1};
    ct_tensor *ix = indices(CT_I64, 3, idx);
    double *c0 = th_values(cache), *sv = th_values(src);
    CHECK_OK(ct_set_rows(dst, src, ix));
    double *got = th_values(cache);
    int bad = 0;
    for (int r = 0; r < R; r++)
        for (int c = 0; c < C; c++) {
            double want = c0[r * C + c];
            for (int i = 0; i < 3; i++)
                if (idx[i] == r && c >= 4 && c < 12) want = sv[i * 8 + (c - 4)];
            bad += got[r * C + c] != want;
        }
    CHECK_MSG(bad == 0, "%d elements differ", bad);
    free(c0), free(sv), free(got);
    ct_tensor_free(cache), ct_tensor_free(srcT), ct_tensor_free(dst), ct_tensor_free(src), ct_tensor_free(ix);
}

static void test_errors(void)
{
    int64_t dshape[2] = {R, C}, sshape[2] = {2, C}, bad_shape[2] = {2, C + 1};
    ct_tensor *dst = NULL, *src = NULL, *wide = NULL, *fidx = NULL;
    CHECK_OK(ct_zeros(2, dshape, CT_F32, &dst));
    CHECK_OK(ct_ones(2, sshape, CT_F32, &src));
    CHECK_OK(ct_ones(2, bad_shape, CT_F32, &wide));
    const int64_t out_of_range[2] = {1, R}, negative[2] = {-1, 0}, ok[2] = {0, 1};
    ct_tensor *i1 = indices(CT_I64, 2, out_of_range), *i2 = indices(CT_I32, 2, negative), *i3 = indices(CT_I64, 2, ok);
    CHECK_STATUS(ct_set_rows(dst, src, i1), CT_ERR_RANGE);
    CHECK_STATUS(ct_set_rows(dst, src, i2), CT_ERR_RANGE);
    double v = -1;
    CHECK_OK(ct_tensor_item(dst, 1 * C, &v)); /* row 1 of the first call was not written */
    CHECK(v == 0);
    CHECK_STATUS(ct_set_rows(dst, wide, i3), CT_ERR_SHAPE);
    CHECK_STATUS(ct_set_rows(NULL, src, i3), CT_ERR_INVALID_ARG);
    int64_t fshape[1] = {2};
    CHECK_OK(ct_zeros(1, fshape, CT_F32, &fidx));
    CHECK_STATUS(ct_set_rows(dst, src, fidx), CT_ERR_DTYPE);
    ct_tensor *short_idx = indices(CT_I64, 1, ok);
    CHECK_STATUS(ct_set_rows(dst, src, short_idx), CT_ERR_SHAPE);
    ct_tensor *all[] = {dst, src, wide, fidx, i1, i2, i3, short_idx};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) ct_tensor_free(all[i]);
}

int main(void)
{
    RUN(test_dtypes);
    RUN(test_strided);
    RUN(test_errors);
    return th_finish();
}
