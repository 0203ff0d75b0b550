/* The vector vocabulary of simd_exp.h and elementwise_simd.h for AVX2 + FMA (8 lanes) (see the list at the
 * top of elementwise_simd.h); the includer defines EWS(name) and EWS_FN, and
 * simd_vocab_undef.h takes all of it back. No include guard on purpose. */
#define W 8
#define V __m256
#define VI __m256i
#define LD _mm256_loadu_ps
#define ST _mm256_storeu_ps
#define STNT _mm256_stream_ps
#define SET1 _mm256_set1_ps
#define ZERO _mm256_setzero_ps
#define ADD _mm256_add_ps
#define SUB _mm256_sub_ps
#define MUL _mm256_mul_ps
#define DIV _mm256_div_ps
#define MAXV _mm256_max_ps
#define MINV _mm256_min_ps
#define FMA _mm256_fmadd_ps
#define FNMA _mm256_fnmadd_ps
#define FMS _mm256_fmsub_ps
#define SQRT _mm256_sqrt_ps
#define ANDV _mm256_and_ps
#define ANDNOTV _mm256_andnot_ps
#define XORV _mm256_xor_ps
#define ROUND(x) _mm256_round_ps((x), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)
#define CVTI _mm256_cvtps_epi32
#define IADD _mm256_add_epi32
#define ISUB _mm256_sub_epi32
#define ISRAI _mm256_srai_epi32
#define ISLLI _mm256_slli_epi32
#define ISET1 _mm256_set1_epi32
#define ITOF _mm256_castsi256_ps
#define SEL_LT(a, b, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (b), _CMP_LT_OQ))
#define SEL_UNORD(a, x, y) _mm256_blendv_ps((y), (x), _mm256_cmp_ps((a), (a), _CMP_UNORD_Q))
