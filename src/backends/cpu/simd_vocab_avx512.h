/* The vector vocabulary of simd_exp.h and elementwise_simd.h for AVX-512 (16 lanes; bitwise float ops through the integer forms, so no AVX512DQ) (see the list at the
 * top of elementwise_simd.h); the includer defines EWS(name) and EWS_FN, and
 * simd_vocab_undef.h takes all of it back. No include guard on purpose. */
#define W 16
#define V __m512
#define VI __m512i
#define LD _mm512_loadu_ps
#define ST _mm512_storeu_ps
#define STNT _mm512_stream_ps
#define SET1 _mm512_set1_ps
#define ZERO _mm512_setzero_ps
#define ADD _mm512_add_ps
#define SUB _mm512_sub_ps
#define MUL _mm512_mul_ps
#define DIV _mm512_div_ps
#define MAXV _mm512_max_ps
#define MINV _mm512_min_ps
#define FMA _mm512_fmadd_ps
#define FNMA _mm512_fnmadd_ps
#define FMS _mm512_fmsub_ps
#define SQRT _mm512_sqrt_ps
#define EWS_BITS(op, a, b) _mm512_castsi512_ps(op(_mm512_castps_si512(a), _mm512_castps_si512(b)))
#define ANDV(a, b) EWS_BITS(_mm512_and_si512, a, b)
#define ANDNOTV(a, b) EWS_BITS(_mm512_andnot_si512, a, b)
#define XORV(a, b) EWS_BITS(_mm512_xor_si512, a, b)
#define ROUND(x) _mm512_roundscale_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define CVTI _mm512_cvtps_epi32
#define IADD _mm512_add_epi32
#define ISUB _mm512_sub_epi32
#define ISRAI _mm512_srai_epi32
#define ISLLI _mm512_slli_epi32
#define ISET1 _mm512_set1_epi32
#define ITOF _mm512_castsi512_ps
#define SEL_LT(a, b, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (b), _CMP_LT_OQ), (y), (x))
#define SEL_UNORD(a, x, y) _mm512_mask_blend_ps(_mm512_cmp_ps_mask((a), (a), _CMP_UNORD_Q), (y), (x))
#define EWS_SCALEF _mm512_scalef_ps
