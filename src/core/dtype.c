/* The dtype table and half-precision conversions. Quantized types follow GGUF's
 * block layouts (block size in elements, bytes per block). */
#include <string.h>
#include <strings.h>

#include "core/tensor.h"

typedef struct dtype_traits {
    const char *name;
    int64_t block;
    size_t bytes;
    unsigned flags;
} dtype_traits;

enum { DT_FLOAT = 1, DT_INT = 2, DT_COMPLEX = 4, DT_QUANT = 8 };

static const dtype_traits g_traits[CT_DTYPE_COUNT] = {
    [CT_F32] = {"f32", 1, 4, DT_FLOAT},      [CT_F64] = {"f64", 1, 8, DT_FLOAT},
    [CT_F16] = {"f16", 1, 2, DT_FLOAT},      [CT_BF16] = {"bf16", 1, 2, DT_FLOAT},
    [CT_I32] = {"i32", 1, 4, DT_INT},        [CT_I64] = {"i64", 1, 8, DT_INT},
    [CT_BOOL] = {"bool", 1, 1, 0},           [CT_C64] = {"c64", 1, 8, DT_COMPLEX},
    [CT_I8] = {"i8", 1, 1, DT_INT},
    [CT_Q4_0] = {"q4_0", 32, 18, DT_QUANT},  [CT_Q4_1] = {"q4_1", 32, 20, DT_QUANT},
    [CT_Q5_0] = {"q5_0", 32, 22, DT_QUANT},  [CT_Q5_1] = {"q5_1", 32, 24, DT_QUANT},
    [CT_Q8_0] = {"q8_0", 32, 34, DT_QUANT},  [CT_Q8_1] = {"q8_1", 32, 36, DT_QUANT},
    [CT_Q2_K] = {"q2_k", 256, 84, DT_QUANT}, [CT_Q3_K] = {"q3_k", 256, 110, DT_QUANT},
    [CT_Q4_K] = {"q4_k", 256, 144, DT_QUANT}, [CT_Q5_K] = {"q5_k", 256, 176, DT_QUANT},
    [CT_Q6_K] = {"q6_k", 256, 210, DT_QUANT}, [CT_Q8_K] = {"q8_k", 256, 292, DT_QUANT},
};

static bool valid(ct_dtype t) { return (unsigned)t < CT_DTYPE_COUNT; }

const char *ct_dtype_name(ct_dtype t) { return valid(t) ? g_traits[t].name : "invalid"; }
int64_t ct_dtype_block_size(ct_dtype t) { return valid(t) ? g_traits[t].block : 0; }
size_t ct_dtype_block_bytes(ct_dtype t) { return valid(t) ? g_traits[t].bytes : 0; }
bool ct_dtype_is_float(ct_dtype t) { return valid(t) && (g_traits[t].flags & DT_FLOAT); }
bool ct_dtype_is_int(ct_dtype t) { return valid(t) && (g_traits[t].flags & DT_INT); }
bool ct_dtype_is_complex(ct_dtype t) { return valid(t) && (g_traits[t].flags & DT_COMPLEX); }
bool ct_dtype_is_quantized(ct_dtype t) { return valid(t) && (g_traits[t].flags & DT_QUANT); }

size_t ct_dtype_row_bytes(ct_dtype t, int64_t n)
{
    if (!valid(t) || n < 0) return 0;
    return (size_t)(n / g_traits[t].block) * g_traits[t].bytes;
}

ct_status ct_dtype_from_name(const char *name, ct_dtype *out)
{
    if (!name || !out) return core_err(CT_ERR_INVALID_ARG, "ct_dtype_from_name: null argument");
    for (int i = 0; i < CT_DTYPE_COUNT; i++)
        if (!strcasecmp(name, g_traits[i].name)) {
            *out = (ct_dtype)i;
            return CT_OK;
        }
    return core_err(CT_ERR_NOT_FOUND, "unknown dtype '%s'", name);
}

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

float ct_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (exp == 0x1f) return bits_f32(sign | 0x7f800000u | (man << 13)); /* inf / nan */
    if (exp == 0) {
        /* zero or subnormal: value = man * 2^-24 exactly representable in f32 */
        float v = (float)man * (1.0f / 16777216.0f);
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t ct_f32_to_f16(float f)
{
    uint32_t x = f32_bits(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0); /* inf/nan */
    if (ax >= 0x477ff000u) return sign | 0x7c00;                                   /* rounds to inf */
    if (ax < 0x38800000u) {
        /* subnormal or zero in f16: scale so that rounding happens at the f16 ulp (2^-24) */
        float v = bits_f32(ax) * 16777216.0f; /* exact */
        uint32_t m = (uint32_t)v;
        float rem = v - (float)m;
        if (rem > 0.5f || (rem == 0.5f && (m & 1))) m++;
        return sign | (uint16_t)m;
    }
    uint32_t r = ax + 0xfff + ((ax >> 13) & 1); /* round to nearest even at bit 13 */
    return sign | (uint16_t)((r - 0x38000000u) >> 13);
}

float ct_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t ct_f32_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40); /* quiet nan */
    return (uint16_t)((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}
