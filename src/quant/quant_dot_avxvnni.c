/* AVX-VNNI vec dots: the shared 256-bit kernels of quant_dot_x86.inc built for AVX-VNNI. Only the
 * kernels carry the target; the table fill stays generic, since it runs on every CPU. */
#include "quant/quant_impl.h"
#include "quant/quant_target.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

QUANT_TARGET_BEGIN("avx2,fma,f16c,avxvnni")
#define QD(name) avxvnni_##name
#define QD_VNNI 1
#include "quant_dot_x86.inc"
QUANT_TARGET_END

void quant_dot_fill_avxvnni(quant_dot_table tab)
{
    tab[CT_Q4_0] = avxvnni_dot_q4_0;
    tab[CT_Q4_1] = avxvnni_dot_q4_1;
    tab[CT_Q5_0] = avxvnni_dot_q5_0;
    tab[CT_Q5_1] = avxvnni_dot_q5_1;
    tab[CT_Q8_1] = avxvnni_dot_q8_1;
    tab[CT_Q8_0] = avxvnni_dot_q8_0;
    tab[CT_Q2_K] = avxvnni_dot_q2_k;
    tab[CT_Q3_K] = avxvnni_dot_q3_k;
    tab[CT_Q4_K] = avxvnni_dot_q4_k;
    tab[CT_Q5_K] = avxvnni_dot_q5_k;
    tab[CT_Q6_K] = avxvnni_dot_q6_k;
    tab[CT_Q8_K] = avxvnni_dot_q8_k;
}
#else
void quant_dot_fill_avxvnni(quant_dot_table tab) { (void)tab; }
#endif
