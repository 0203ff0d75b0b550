/* The dtype table and the half-precision conversions, checked against an
 * independent double-precision reference (exact: every f32 is exact in double,
 * and rint() rounds half to even in the default rounding mode). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "core/tensor.h"
#include "harness.h"

static uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Decodes IEEE binary16 by its definition. */
static double ref_f16_decode(uint16_t h)
{
    int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    double v;
    if (exp == 0x1f) v = man ? NAN : INFINITY;
    else if (exp == 0) v = ldexp(man, -24);
    else v = ldexp(1024 + man, exp - 25);
    return sign ? -v : v;
}

/* Nearest value with `mbits` explicit mantissa bits and minimum normal exponent
 * `emin` (subnormals below), ties to even; returns +-inf past `max_exp`. */
static double ref_round(double x, int mbits, int emin, int max_exp)
{
    if (x == 0 || isnan(x) || isinf(x)) return x;
    double a = fabs(x);
    int e;
    frexp(a, &e);
    e -= 1; /* a in [2^e, 2^(e+1)) */
    if (e < emin) e = emin;
    double ulp = ldexp(1.0, e - mbits);
    double v = rint(a / ulp) * ulp;
    if (v >= ldexp(1.0, max_exp)) v = INFINITY;
    return x < 0 ? -v : v;
}

/* binary16 bits of a double that is exactly representable (or inf), by definition. */
static uint16_t ref_f16_encode(double v)
{
    uint16_t sign = signbit(v) ? 0x8000 : 0;
    double a = fabs(v);
    if (isinf(a)) return sign | 0x7c00;
    if (a < ldexp(1.0, -14)) return sign | (uint16_t)(a / ldexp(1.0, -24));
    int e;
    double m = frexp(a, &e); /* a = m * 2^e, m in [0.5, 1) */
    int exp = e - 1 + 15;
    return sign | (uint16_t)(exp << 10) | (uint16_t)((m * 2 - 1) * 1024);
}

static void test_dtype_table(void)
{
    static const struct { ct_dtype t; const char *name; int64_t block; size_t bytes; } want[] = {
        {CT_F32, "f32", 1, 4},      {CT_F64, "f64", 1, 8},      {CT_F16, "f16", 1, 2},
        {CT_BF16, "bf16", 1, 2},    {CT_I32, "i32", 1, 4},      {CT_I64, "i64", 1, 8},
        {CT_BOOL, "bool", 1, 1},    {CT_C64, "c64", 1, 8},      {CT_I8, "i8", 1, 1},
        {CT_Q4_0, "q4_0", 32, 18},  {CT_Q4_1, "q4_1", 32, 20},  {CT_Q5_0, "q5_0", 32, 22},
        {CT_Q5_1, "q5_1", 32, 24},  {CT_Q8_0, "q8_0", 32, 34},  {CT_Q8_1, "q8_1", 32, 36},
        {CT_Q2_K, "q2_k", 256, 84}, {CT_Q3_K, "q3_k", 256, 110}, {CT_Q4_K, "q4_k", 256, 144},
        {CT_Q5_K, "q5_k", 256, 176}, {CT_Q6_K, "q6_k", 256, 210}, {CT_Q8_K, "q8_k", 256, 292},
    };
    CHECK(sizeof want / sizeof want[0] == CT_DTYPE_COUNT);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        ct_dtype t = want[i].t;
        CHECK_MSG(!strcmp(ct_dtype_name(t), want[i].name), "%s vs %s", ct_dtype_name(t), want[i].name);
        CHECK(ct_dtype_block_size(t) == want[i].block);
        CHECK(ct_dtype_block_bytes(t) == want[i].bytes);
        CHECK(ct_dtype_is_quantized(t) == (want[i].block > 1));
        CHECK(ct_dtype_row_bytes(t, want[i].block * 3) == want[i].bytes * 3);
        ct_dtype back = CT_DTYPE_COUNT;
        CHECK_OK(ct_dtype_from_name(want[i].name, &back));
        CHECK(back == t);
        char upper[16];
        size_t n = strlen(want[i].name);
        for (size_t k = 0; k <= n; k++) upper[k] = (char)(want[i].name[k] >= 'a' && want[i].name[k] <= 'z' ? want[i].name[k] - 32 : want[i].name[k]);
        CHECK_OK(ct_dtype_from_name(upper, &back));
        CHECK(back == t);
    }
    CHECK(ct_dtype_is_float(CT_F32) && ct_dtype_is_float(CT_F64) && ct_dtype_is_float(CT_F16) && ct_dtype_is_float(CT_BF16));
    CHECK(!ct_dtype_is_float(CT_I32) && !ct_dtype_is_float(CT_C64) && !ct_dtype_is_float(CT_Q4_K) && !ct_dtype_is_float(CT_BOOL));
    CHECK(ct_dtype_is_int(CT_I8) && ct_dtype_is_int(CT_I32) && ct_dtype_is_int(CT_I64));
    CHECK(!ct_dtype_is_int(CT_BOOL) && !ct_dtype_is_int(CT_F32));
    CHECK(ct_dtype_is_complex(CT_C64) && !ct_dtype_is_complex(CT_F32));
    CHECK(ct_dtype_row_bytes(CT_F32, 0) == 0);
    CHECK(ct_dtype_row_bytes(CT_F32, -1) == 0);
    /* invalid dtypes: no crash, neutral answers */
    CHECK(!strcmp(ct_dtype_name(CT_DTYPE_COUNT), "invalid"));
    CHECK(!strcmp(ct_dtype_name((ct_dtype)-1), "invalid"));
    CHECK(ct_dtype_block_size(CT_DTYPE_COUNT) == 0 && ct_dtype_block_bytes(CT_DTYPE_COUNT) == 0);
    CHECK(!ct_dtype_is_float(CT_DTYPE_COUNT) && !ct_dtype_is_quantized(CT_DTYPE_COUNT));
    CHECK(ct_dtype_row_bytes(CT_DTYPE_COUNT, 4) == 0);
    ct_dtype d;
    CHECK_STATUS(ct_dtype_from_name("f33", &d), CT_ERR_NOT_FOUND);
    CHECK(strstr(ct_last_error(), "f33") != NULL);
    CHECK_STATUS(ct_dtype_from_name("", &d), CT_ERR_NOT_FOUND);
    CHECK_STATUS(ct_dtype_from_name(NULL, &d), CT_ERR_INVALID_ARG);
    CHECK_STATUS(ct_dtype_from_name("f32", NULL), CT_ERR_INVALID_ARG);
}

static void test_status_names(void)
{
    for (int s = CT_OK; s <= CT_ERR_RANGE; s++) CHECK(ct_status_name((ct_status)s)[0] && strcmp(ct_status_name((ct_status)s), "unknown status"));
    CHECK(!strcmp(ct_status_name((ct_status)999), "unknown status"));
    ct_dtype d;
    ct_dtype_from_name("nope", &d);
    CHECK(ct_last_error()[0]);
    ct_clear_error();
    CHECK(ct_last_error()[0] == 0);
    /* a message that wraps the last one (the library's "what: why" pattern) */
    core_err(CT_ERR_IO, "inner %d", 7);
    core_err(CT_ERR_IO, "outer (%s), again %s", ct_last_error(), ct_last_error());
    CHECK_MSG(!strcmp(ct_last_error(), "outer (inner 7), again inner 7"), "got '%s'", ct_last_error());
}

/* Every binary16 pattern decodes exactly and re-encodes to itself (NaNs stay NaN). */
static void test_f16_all_patterns(void)
{
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = ct_f16_to_f32((uint16_t)h);
        double want = ref_f16_decode((uint16_t)h);
        bool is_nan = ((h >> 10) & 0x1f) == 0x1f && (h & 0x3ff);
        if (is_nan) {
            if (!isnan(f) || (signbit(f) != 0) != ((h >> 15) != 0)) bad++;
            uint16_t back = ct_f32_to_f16(f);
            if ((back & 0x7c00) != 0x7c00 || !(back & 0x3ff) || (back & 0x8000) != (h & 0x8000)) bad++;
            continue;
        }
        if ((double)f != want || !signbit(f) != !signbit(want)) {
            if (bad++ < 5) fprintf(stderr, "  f16 %04x -> %.9g want %.9g\n", h, f, want);
        }
        uint16_t back = ct_f32_to_f16(f);
        if (back != h && bad++ < 5) fprintf(stderr, "  f16 %04x round-trips to %04x\n", h, back);
    }
    CHECK_MSG(bad == 0, "%d mismatches", bad);
}

static bool check_f16(float f)
{
    uint16_t got = ct_f32_to_f16(f);
    if (isnan(f)) return ((got & 0x7c00) == 0x7c00) && (got & 0x3ff);
    uint16_t want = ref_f16_encode(ref_round(f, 10, -14, 16));
    if (got != want) fprintf(stderr, "  f32 %.9g (%08x) -> f16 %04x, want %04x\n", f, f32_bits(f), got, want);
    return got == want;
}

static bool check_bf16(float f)
{
    uint16_t got = ct_f32_to_bf16(f);
    if (isnan(f)) return ((got & 0x7f80) == 0x7f80) && (got & 0x7f) && (got & 0x8000) == (f32_bits(f) >> 16 & 0x8000);
    double r = ref_round(f, 7, -126, 128);
    uint16_t want = (uint16_t)(f32_bits((float)r) >> 16); /* r is exact in f32 (or inf) */
    if (got != want) fprintf(stderr, "  f32 %.9g (%08x) -> bf16 %04x, want %04x\n", f, f32_bits(f), got, want);
    bool ok = got == want;
    /* decoding is a shift */
    if (ok && !isinf(r)) ok = (double)ct_bf16_to_f32(got) == r;
    return ok;
}

static void test_f32_to_half_rounding(void)
{
    const float edges[] = {
        0.0f, -0.0f, 1.0f, -1.0f, 65504.0f, 65519.99f, 65520.0f, 65536.0f, 1e10f, -1e10f, FLT_MAX, -FLT_MAX,
        INFINITY, -INFINITY, NAN, -NAN,
        (float)ldexp(1, -14), (float)ldexp(1, -15), (float)ldexp(1, -24), (float)ldexp(1, -25), (float)ldexp(3, -25),
        (float)ldexp(1, -26), (float)ldexp(1.0000001, -25), (float)ldexp(1023, -24), (float)ldexp(2047, -25),
        1.0f + (float)ldexp(1, -11), 1.0f + (float)ldexp(3, -11), 1.0f + (float)ldexp(1, -11) + (float)ldexp(1, -20),
        2049.0f, 2051.0f, 4097.0f, FLT_MIN, FLT_TRUE_MIN, -FLT_TRUE_MIN, 1e-30f,
        /* bf16 specifics */
        1.0f + (float)ldexp(1, -8), 1.0f + (float)ldexp(3, -8), (float)ldexp(255, 120), 3.3895314e38f,
        (float)ldexp(1, -133), (float)ldexp(3, -149), 0.1f, 3.14159265f,
    };
    int bad16 = 0, bad_b = 0;
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        bad16 += !check_f16(edges[i]);
        bad_b += !check_bf16(edges[i]);
    }
    th_rng r = {42};
    for (int i = 0; i < 200000; i++) {
        uint32_t bits = (uint32_t)(th_uniform(&r, 0, 4294967296.0));
        float any = bits_f32(bits);
        /* exponents around the f16 range: 2^-27 .. 2^17 */
        uint32_t e = 100 + (uint32_t)th_uniform(&r, 0, 44);
        float near16 = bits_f32((bits & 0x807fffffu) | (e << 23));
        /* exact halfway points of f16: a random f16 plus half its ulp */
        uint16_t h = (uint16_t)th_uniform(&r, 0, 0x7c00);
        double hv = ref_f16_decode(h), ulp = ldexp(1.0, ((h >> 10) ? (h >> 10) : 1) - 25);
        float tie = (float)(hv + ulp / 2);
        bad16 += !check_f16(any) + !check_f16(near16) + !check_f16(tie) + !check_f16(-tie);
        bad_b += !check_bf16(any) + !check_bf16(near16);
        if (bad16 + bad_b > 10) break;
    }
    CHECK_MSG(bad16 == 0, "%d f16 mismatches", bad16);
    CHECK_MSG(bad_b == 0, "%d bf16 mismatches", bad_b);
    /* spot values stated directly */
    CHECK(ct_f32_to_f16(1.0f) == 0x3c00);
    CHECK(ct_f32_to_f16(-2.0f) == 0xc000);
    CHECK(ct_f32_to_f16(65504.0f) == 0x7bff);
    CHECK(ct_f32_to_f16(65520.0f) == 0x7c00);
    CHECK(ct_f32_to_f16((float)ldexp(1, -24)) == 0x0001);
    CHECK(ct_f32_to_f16((float)ldexp(1, -25)) == 0x0000);
    CHECK(ct_f32_to_f16(-0.0f) == 0x8000);
    CHECK(ct_f32_to_bf16(1.0f) == 0x3f80);
    CHECK(ct_f32_to_bf16(FLT_MAX) == 0x7f80);
    CHECK(ct_bf16_to_f32(0xc000) == -2.0f);
    CHECK(isnan(ct_bf16_to_f32(ct_f32_to_bf16(NAN))));
}

int main(void)
{
    RUN(test_dtype_table);
    RUN(test_status_names);
    RUN(test_f16_all_patterns);
    RUN(test_f32_to_half_rounding);
    return th_finish();
}
