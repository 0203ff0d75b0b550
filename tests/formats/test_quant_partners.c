/* Each GGUF weight type's activation partner for the dot products, as llama.cpp's
 * type traits define vec_dot_type: the 32-blocks without a minimum pair with Q8_0,
 * those with one with Q8_1, the K-quants with Q8_K; a plain type is its own partner. */
#include "harness.h"
#include "quant/quant.h"

static void test_partners(void)
{
    static const struct {
        ct_dtype w, a;
    } pairs[] = {{CT_Q4_0, CT_Q8_0}, {CT_Q5_0, CT_Q8_0}, {CT_Q8_0, CT_Q8_0}, {CT_Q4_1, CT_Q8_1}, {CT_Q5_1, CT_Q8_1},
                 {CT_Q8_1, CT_Q8_1}, {CT_Q2_K, CT_Q8_K}, {CT_Q3_K, CT_Q8_K}, {CT_Q4_K, CT_Q8_K}, {CT_Q5_K, CT_Q8_K},
                 {CT_Q6_K, CT_Q8_K}, {CT_Q8_K, CT_Q8_K}, {CT_F32, CT_F32},   {CT_F16, CT_F16},   {CT_BF16, CT_BF16}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
        CHECK_MSG(quant_vec_dot_type(pairs[i].w) == pairs[i].a, "%s pairs with %s", ct_dtype_name(pairs[i].w),
                  ct_dtype_name(quant_vec_dot_type(pairs[i].w)));
}

int main(int argc, char **argv)
{
    th_args(argc, argv);
    RUN(test_partners);
    return th_finish();
}
