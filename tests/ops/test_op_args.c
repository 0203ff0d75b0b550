/* Argument checks of the op frontends that the per-op tests leave out: convolution
 * and pooling parameters, the norms' eps / weight / shape rules, embedding, RoPE and
 * attention, casts, copies and stacks. Each bad call must fail before any device
 * is involved, with the documented status and a message naming the operand or
 * parameter. The layouts that the frontends convert before the kernel (a
 * non-dense layer-norm input, f64 / f16 / strided attention operands, an f16 mask)
 * must give the same numbers as the plain layout. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static bool msg_has(const char *needle)
{
    bool ok = strstr(ct_last_error(), needle) != NULL;
    if (!ok) fprintf(stderr, "  message \"%s\" lacks \"%s\"\n", ct_last_error(), needle);
    return ok;
}

#define EXPECT(call, status, needle)   \
    do {                               \
        CHECK_STATUS(call, status);    \
        CHECK(msg_has(needle));        \
    } while (0)

static th_rng g_r = {0x0a};

static ct_tensor *rnd(int nd, const int64_t *s, ct_dtype dt) { return th_random(&g_r, nd, s, dt, -1, 1); }

/* bitwise-equal values (same shape assumed) */
static bool same_values(const ct_tensor *a, const ct_tensor *b)
{
    if (!a || !b || ct_tensor_numel(a) != ct_tensor_numel(b)) return false;
    double *x = th_values(a), *y = th_values(b);
    bool eq = !memcmp(x, y, sizeof(double) * (size_t)ct_tensor_numel(a));
    free(x), free(y);
    return eq;
}

static void test_conv_pool(void)
{
    int64_t sx[4] = {1, 2, 5, 5}, sw[4] = {3, 2, 3, 3}, sw3[3] = {3, 2, 3}, swe[4] = {3, 2, 0, 3}, sb[1] = {3};
    ct_tensor *x = rnd(4, sx, CT_F32), *w = rnd(4, sw, CT_F32), *w3 = rnd(3, sw3, CT_F32), *bi = rnd(1, sb, CT_I32);
    ct_tensor *we = NULL, *y = NULL;
    CHECK_OK(ct_zeros(4, swe, CT_F32, &we));
    ct_conv2d_params p = {0};
    EXPECT(ct_conv2d(x, NULL, NULL, &p, &y), CT_ERR_INVALID_ARG, "ct_conv2d");
    EXPECT(ct_conv2d(x, w3, NULL, &p, &y), CT_ERR_SHAPE, "must both be 4-D");
    EXPECT(ct_conv2d(x, we, NULL, &p, &y), CT_ERR_SHAPE, "empty kernel");
    EXPECT(ct_conv2d(x, w, bi, &p, &y), CT_ERR_DTYPE, "bias must be f32/f64/f16/bf16, got i32");
    p.dilation[1] = -1;
    EXPECT(ct_conv2d(x, w, NULL, &p, &y), CT_ERR_INVALID_ARG, "dilation (1, -1)");
    p = (ct_conv2d_params){.output_padding = {0, 1}};
    EXPECT(ct_conv2d(x, w, NULL, &p, &y), CT_ERR_INVALID_ARG, "output_padding is only for conv_transpose2d");
    p = (ct_conv2d_params){.stride = {2, 2}, .output_padding = {2, 0}};
    int64_t swt[4] = {2, 3, 3, 3};
    ct_tensor *wt = rnd(4, swt, CT_F32);
    EXPECT(ct_conv_transpose2d(x, wt, NULL, &p, &y), CT_ERR_INVALID_ARG,
           "output_padding 2 (dim 0) must be smaller than the stride (2) or the dilation (1)");
    p.output_padding[0] = 1; /* smaller than the stride: fine */
    CHECK_OK(ct_conv_transpose2d(x, wt, NULL, &p, &y));
    if (y) CHECK(ct_tensor_dim(y, 2) == (5 - 1) * 2 + 3 + 1 && ct_tensor_dim(y, 3) == (5 - 1) * 2 + 3);
    ct_tensor_free(y);
    y = NULL;

    ct_pool2d_params pp = {.kernel = {2, 2}};
    EXPECT(ct_max_pool2d(x, NULL, &y), CT_ERR_INVALID_ARG, "params is NULL");
    CHECK_STATUS(ct_avg_pool2d(x, &pp, NULL), CT_ERR_INVALID_ARG);
    pp.stride[1] = -1;
    EXPECT(ct_max_pool2d(x, &pp, &y), CT_ERR_INVALID_ARG, "stride (2, -1) must be positive");
    pp = (ct_pool2d_params){.kernel = {3, 3}, .padding = {2, 0}};
    EXPECT(ct_avg_pool2d(x, &pp, &y), CT_ERR_INVALID_ARG, "padding 2 on dim 0 must be at most half the kernel size 3");
    CHECK(y == NULL);
    ct_tensor *all[] = {x, w, w3, bi, we, wt};
    for (int i = 0; i < 6; i++) ct_tensor_free(all[i]);
}

static void test_norms(void)
{
    int64_t sx[3] = {2, 3, 4}, s3[1] = {3}, s4[1] = {4}, s13[2] = {1, 3}, s1[1] = {5};
    ct_tensor *x = rnd(3, sx, CT_F32), *v3 = rnd(1, s3, CT_F32), *v4 = rnd(1, s4, CT_F32), *m13 = rnd(2, s13, CT_F32);
    ct_tensor *i4 = rnd(1, s4, CT_I32), *x1 = rnd(1, s1, CT_F32), *sc = NULL, *y = NULL;
    CHECK_OK(ct_full(0, NULL, CT_F32, 2.0, &sc));
    EXPECT(ct_batch_norm(x, v3, v3, m13, NULL, 1e-5, &y), CT_ERR_SHAPE, "weight has shape [1, 3], expected [3]");
    EXPECT(ct_batch_norm(x, NULL, v3, NULL, NULL, 1e-5, &y), CT_ERR_INVALID_ARG, "ct_batch_norm");
    EXPECT(ct_batch_norm(x, v3, v3, NULL, NULL, NAN, &y), CT_ERR_INVALID_ARG, "eps must be finite and >= 0");
    EXPECT(ct_batch_norm(x1, v3, v3, NULL, NULL, 1e-5, &y), CT_ERR_SHAPE, "must be [N, C, ...]");
    EXPECT(ct_layer_norm(x, 1, v4, NULL, INFINITY, &y), CT_ERR_INVALID_ARG, "eps must be finite");
    EXPECT(ct_layer_norm(x, 0, NULL, NULL, 1e-5, &y), CT_ERR_INVALID_ARG, "norm_ndim 0 must be in [1, 3]");
    EXPECT(ct_layer_norm(x, 4, NULL, NULL, 1e-5, &y), CT_ERR_INVALID_ARG, "norm_ndim 4");
    EXPECT(ct_layer_norm(x, 1, v3, NULL, 1e-5, &y), CT_ERR_SHAPE, "weight has shape [3], expected [4]");
    EXPECT(ct_layer_norm(x, 1, NULL, i4, 1e-5, &y), CT_ERR_DTYPE, "bias must be f32/f64/f16/bf16");
    CHECK_STATUS(ct_layer_norm(x, 1, NULL, NULL, 1e-5, NULL), CT_ERR_INVALID_ARG);
    EXPECT(ct_rms_norm(x, NULL, -1.0, &y), CT_ERR_INVALID_ARG, "ct_rms_norm: eps");
    EXPECT(ct_rms_norm(sc, NULL, 1e-6, &y), CT_ERR_SHAPE, "at least one dim");
    EXPECT(ct_rms_norm(x, i4, 1e-6, &y), CT_ERR_DTYPE, "weight must be f32/f64/f16/bf16, got i32");
    CHECK(y == NULL);
    /* a layer norm over a non-dense view equals the one over its contiguous copy */
    ct_tensor *xt = NULL, *xc = NULL, *ya = NULL, *yb = NULL;
    int64_t st[3] = {2, 4, 3};
    ct_tensor *x0 = rnd(3, st, CT_F32);
    CHECK_OK(ct_transpose(x0, 1, 2, &xt)); /* [2, 3, 4], last dim strided */
    CHECK_OK(ct_contiguous(xt, &xc));
    CHECK_OK(ct_layer_norm(xt, 1, v4, v4, 1e-5, &ya));
    CHECK_OK(ct_layer_norm(xc, 1, v4, v4, 1e-5, &yb));
    CHECK(same_values(ya, yb));
    ct_tensor *all[] = {x, v3, v4, m13, i4, x1, sc, xt, xc, ya, yb, x0};
    for (int i = 0; i < 12; i++) ct_tensor_free(all[i]);
}

static void test_embedding(void)
{
    int64_t sw[2] = {5, 4}, s1[1] = {5}, sid[1] = {3}, s8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    ct_tensor *w = rnd(2, sw, CT_F32), *w1 = rnd(1, s1, CT_F32), *wi = rnd(2, sw, CT_I32), *idf = rnd(1, sid, CT_F32);
    ct_tensor *id8 = NULL, *y = NULL;
    CHECK_OK(ct_zeros(8, s8, CT_I32, &id8));
    ct_tensor *ids = NULL;
    CHECK_OK(ct_zeros(1, sid, CT_I64, &ids));
    EXPECT(ct_embedding(w1, ids, &y), CT_ERR_SHAPE, "must be [V, D]");
    EXPECT(ct_embedding(wi, ids, &y), CT_ERR_DTYPE, "weight must be a float or quantized dtype, got i32");
    EXPECT(ct_embedding(w, idf, &y), CT_ERR_DTYPE, "ids must be i32 or i64, got f32");
    EXPECT(ct_embedding(w, id8, &y), CT_ERR_SHAPE, "too many dims");
    CHECK_STATUS(ct_embedding(w, NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_embedding(w, ids, NULL), CT_ERR_INVALID_ARG);
    CHECK(y == NULL);
    ct_tensor *all[] = {w, w1, wi, idf, id8, ids};
    for (int i = 0; i < 6; i++) ct_tensor_free(all[i]);
}

static void test_rope(void)
{
    int64_t sx[3] = {3, 2, 8}, s2[2] = {3, 8}, sp[1] = {3}, sp4[1] = {4};
    ct_tensor *x = rnd(3, sx, CT_F32), *x2 = rnd(2, s2, CT_F32), *xi = rnd(3, sx, CT_I32);
    ct_tensor *pos = NULL, *pos4 = NULL, *posf = rnd(1, sp, CT_F32), *y = NULL;
    CHECK_OK(ct_arange(0, 3, 1, CT_I32, &pos));
    CHECK_OK(ct_zeros(1, sp4, CT_I64, &pos4));
    ct_rope_params p = {0};
    CHECK_STATUS(ct_rope(x, NULL, &p, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_rope(x, pos, &p, NULL), CT_ERR_INVALID_ARG);
    EXPECT(ct_rope(x, pos, NULL, &y), CT_ERR_INVALID_ARG, "params is NULL");
    EXPECT(ct_rope(xi, pos, &p, &y), CT_ERR_DTYPE, "x must be f32/f64/f16/bf16, got i32");
    EXPECT(ct_rope(x, posf, &p, &y), CT_ERR_DTYPE, "positions must be i32 or i64, got f32");
    EXPECT(ct_rope(x2, pos, &p, &y), CT_ERR_SHAPE, "must be [..., T, H, D]");
    EXPECT(ct_rope(x, pos4, &p, &y), CT_ERR_SHAPE, "positions [4] must be [T] = [3]");
    p.n_dims = 3;
    EXPECT(ct_rope(x, pos, &p, &y), CT_ERR_INVALID_ARG, "n_dims 3 must be even");
    p.n_dims = 10;
    EXPECT(ct_rope(x, pos, &p, &y), CT_ERR_INVALID_ARG, "n_dims 10");
    p.n_dims = -2;
    EXPECT(ct_rope(x, pos, &p, &y), CT_ERR_INVALID_ARG, "n_dims -2");
    p = (ct_rope_params){.freq_base = -5};
    EXPECT(ct_rope(x, pos, &p, &y), CT_ERR_INVALID_ARG, "freq_base -5 must be positive");
    p = (ct_rope_params){.freq_base = INFINITY};
    EXPECT(ct_rope(x, pos, &p, &y), CT_ERR_INVALID_ARG, "freq_base inf");
    p = (ct_rope_params){.freq_scale = NAN};
    EXPECT(ct_rope(x, pos, &p, &y), CT_ERR_INVALID_ARG, "freq_scale nan finite");
    p = (ct_rope_params){.mode = (ct_rope_mode)5};
    EXPECT(ct_rope(x, pos, &p, &y), CT_ERR_INVALID_ARG, "unknown mode 5");
    CHECK(y == NULL);
    ct_tensor *all[] = {x, x2, xi, pos, pos4, posf};
    for (int i = 0; i < 6; i++) ct_tensor_free(all[i]);
}

static void test_sdpa(void)
{
    int64_t sq[4] = {1, 4, 3, 8}, sk[4] = {1, 2, 5, 8}, sv[4] = {1, 2, 5, 6}, s3[3] = {4, 3, 8};
    int64_t skb[4] = {2, 2, 5, 8}, sk3[4] = {1, 3, 5, 8}, sm[2] = {3, 5}, smb[2] = {3, 4}, skt[4] = {1, 2, 8, 5};
    ct_tensor *q = rnd(4, sq, CT_F32), *k = rnd(4, sk, CT_F32), *v = rnd(4, sv, CT_F32), *q3 = rnd(3, s3, CT_F32);
    ct_tensor *kb = rnd(4, skb, CT_F32), *k3 = rnd(4, sk3, CT_F32), *v3 = NULL, *m = rnd(2, sm, CT_F32);
    ct_tensor *mb = rnd(2, smb, CT_F32), *y = NULL;
    int64_t sv3[4] = {1, 3, 5, 6};
    v3 = rnd(4, sv3, CT_F32);
    ct_sdpa_params p = {0};
    CHECK_STATUS(ct_sdpa(NULL, k, v, NULL, &p, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_sdpa(q, k, NULL, NULL, &p, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_sdpa(q, k, v, NULL, &p, NULL), CT_ERR_INVALID_ARG);
    EXPECT(ct_sdpa(q3, k, v, NULL, &p, &y), CT_ERR_SHAPE, "ct_sdpa");
    EXPECT(ct_sdpa(q, kb, v, NULL, &p, &y), CT_ERR_SHAPE, "ct_sdpa");
    EXPECT(ct_sdpa(q, k3, v3, NULL, &p, &y), CT_ERR_SHAPE, "query heads 4 must be a multiple of key/value heads 3");
    p.scale = INFINITY;
    EXPECT(ct_sdpa(q, k, v, NULL, &p, &y), CT_ERR_INVALID_ARG, "scale inf is not finite");
    p = (ct_sdpa_params){.window = -1};
    EXPECT(ct_sdpa(q, k, v, NULL, &p, &y), CT_ERR_INVALID_ARG, "window -1 must be >= 0");
    p = (ct_sdpa_params){0};
    EXPECT(ct_sdpa(q, k, v, mb, &p, &y), CT_ERR_SHAPE, "ct_sdpa");
    CHECK(y == NULL);
    /* converted operands give the plain result: q in f64 (cast once), k read through a
     * transposed view (made contiguous), v in f16 against its f32 values, the mask in f16 */
    ct_tensor *ref = NULL, *q64 = NULL, *kt0 = rnd(4, skt, CT_F32), *kt = NULL, *kc = NULL, *v16 = NULL, *v16f = NULL;
    ct_tensor *m16 = NULL, *m16f = NULL, *got = NULL;
    CHECK_OK(ct_transpose(kt0, 2, 3, &kt));
    CHECK_OK(ct_contiguous(kt, &kc));
    CHECK_OK(ct_cast(v, CT_F16, &v16));
    CHECK_OK(ct_cast(v16, CT_F32, &v16f));
    CHECK_OK(ct_cast(m, CT_F16, &m16));
    CHECK_OK(ct_cast(m16, CT_F32, &m16f));
    CHECK_OK(ct_cast(q, CT_F64, &q64));
    CHECK_OK(ct_sdpa(q, kc, v16f, m16f, &p, &ref));
    CHECK_OK(ct_sdpa(q64, kt, v16, m16, &p, &got));
    if (ref && got) {
        double *a = th_values(got), *b = th_values(ref);
        CHECK(th_allclose(a, b, ct_tensor_numel(ref), 1e-6, 1e-5)); /* the f16 V path accumulates in f32 too */
        free(a), free(b);
    }
    ct_tensor *all[] = {q, k, v, q3, kb, k3, v3, m, mb, ref, q64, kt0, kt, kc, v16, v16f, m16, m16f, got};
    for (int i = 0; i < 19; i++) ct_tensor_free(all[i]);
}

static void test_copies(void)
{
    int64_t s2[2] = {2, 32}, s1[1] = {32}, sb[2] = {3, 32};
    ct_tensor *a = rnd(2, s2, CT_F32), *row = rnd(1, s1, CT_F32), *y = NULL, *ex = NULL;
    EXPECT(ct_cast(a, CT_Q8_0, &y), CT_ERR_DTYPE, "cannot convert f32 to q8_0 by casting; use the quantizer");
    CHECK_STATUS(ct_cast(a, CT_F16, NULL), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_contiguous(NULL, &y), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_reshape(a, 1, (int64_t[]){64}, NULL), CT_ERR_INVALID_ARG);
    CHECK_OK(ct_expand(row, 2, sb, &ex));
    EXPECT(ct_copy_(ex, a), CT_ERR_SHAPE, "ct_copy_");
    ct_tensor *b3 = rnd(2, sb, CT_F32);
    EXPECT(ct_copy_(ex, b3), CT_ERR_SHAPE, "is an expanded view (stride 0 on dim 0)");
    const ct_tensor *many[65];
    for (int i = 0; i < 65; i++) many[i] = row;
    EXPECT(ct_stack(many, 65, 0, &y), CT_ERR_INVALID_ARG, "at most 64 tensors, got 65");
    CHECK_STATUS(ct_stack(many, 2, 0, NULL), CT_ERR_INVALID_ARG);
    CHECK_OK(ct_stack(many, 64, 1, &y));
    if (y) {
        CHECK(ct_tensor_dim(y, 0) == 32 && ct_tensor_dim(y, 1) == 64);
        double *v = th_values(y), *r = th_values(row);
        bool ok = true;
        for (int i = 0; i < 32; i++)
            for (int j = 0; j < 64; j++) ok = ok && v[i * 64 + j] == r[i];
        CHECK(ok);
        free(v), free(r);
    }
    ct_tensor *all[] = {a, row, y, ex, b3};
    for (int i = 0; i < 5; i++) ct_tensor_free(all[i]);
}

/* Element-wise odds and ends: where's condition dtype, complex parts of real tensors,
 * integer clamp bounds that are not whole (the result is float then, as in torch). */
static void test_elementwise(void)
{
    int64_t s[1] = {4};
    ct_tensor *a = NULL, *ai = NULL, *cf = rnd(1, s, CT_F32), *y = NULL, *ri = NULL;
    CHECK_OK(ct_arange(-2, 2, 1, CT_F32, &a));
    CHECK_OK(ct_arange(-2, 2, 1, CT_I32, &ai));
    EXPECT(ct_where(cf, a, a, &y), CT_ERR_DTYPE, "condition [4] must be bool, got f32");
    CHECK_STATUS(ct_where(cf, a, NULL, &y), CT_ERR_INVALID_ARG);
    EXPECT(ct_complex(ai, a, &y), CT_ERR_DTYPE, "real and imaginary parts must be float");
    CHECK_STATUS(ct_complex(a, NULL, &y), CT_ERR_INVALID_ARG);
    EXPECT(ct_imag(a, &y), CT_ERR_DTYPE, "has no imaginary part");
    CHECK_OK(ct_real(a, &ri)); /* a real tensor is its own real part */
    CHECK(same_values(ri, a));
    CHECK_OK(ct_clamp(ai, -0.5, 1.5, &y));
    if (y) {
        CHECK(ct_tensor_dtype(y) == CT_F32);
        double *v = th_values(y);
        CHECK(v[0] == -0.5 && v[1] == -0.5 && v[2] == 0 && v[3] == 1);
        free(v);
    }
    ct_tensor *all[] = {a, ai, cf, y, ri};
    for (int i = 0; i < 5; i++) ct_tensor_free(all[i]);
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_conv_pool);
    RUN(test_norms);
    RUN(test_embedding);
    RUN(test_rope);
    RUN(test_sdpa);
    RUN(test_copies);
    RUN(test_elementwise);
    return th_finish();
}
