/* The library's decode attention kernel built without staging its first chunk before the
 * length is known (DN_SPEC 0), for `ctorch-bench-cuda-nn dec`: entry points with a _nospec
 * suffix, not part of the library. */
#define DN_SPEC 0
#define nn_sdpa_dec_run nn_sdpa_dec_run_nospec
#define nn_sdpa_dec_ok nn_sdpa_dec_ok_nospec
#define nn_sdpa_dec_splits nn_sdpa_dec_splits_nospec
#include "backends/cuda/attention_dec.cu"
