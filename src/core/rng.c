/* Philox4x32-10 (Salmon et al., SC'11): a counter-based generator, so element i
 * of a seeded stream is a pure function of (seed, i) on every device. */
#include <math.h>

#include "core/tensor.h"

void rng_philox(uint64_t seed, uint64_t ctr, uint32_t out[4])
{
    uint32_t c0 = (uint32_t)ctr, c1 = (uint32_t)(ctr >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0; out[1] = c1; out[2] = c2; out[3] = c3;
}

static float u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

float rng_uniform(uint64_t seed, uint64_t i)
{
    uint32_t w[4];
    rng_philox(seed, i, w);
    return u32_to_unit(w[0]);
}

/* Box-Muller on two words of the same counter: one normal per element keeps
 * the element -> counter mapping trivial for every backend. */
float rng_normal(uint64_t seed, uint64_t i)
{
    uint32_t w[4];
    rng_philox(seed, i, w);
    float u1 = ((float)(w[0] >> 8) + 1.0f) * (1.0f / 16777217.0f); /* (0,1] never 0 */
    float u2 = u32_to_unit(w[1]);
    return sqrtf(-2.0f * logf(u1)) * cosf(6.28318530717958647692f * u2);
}
