/* Smoke test of the foundation: creation, views, copies, executor bookkeeping. */
#include <stdlib.h>

#include "harness.h"

static void test_full_and_views(void)
{
    int64_t shape[2] = {2, 3};
    ct_tensor *t = NULL, *tt = NULL, *c = NULL;
    CHECK_OK(ct_arange(0, 6, 1, CT_F32, &t));
    ct_tensor *v = NULL;
    CHECK_OK(ct_view(t, 2, shape, &v));
    CHECK_OK(ct_transpose(v, 0, 1, &tt));
    CHECK(!ct_tensor_is_contiguous(tt));
    CHECK_OK(ct_contiguous(tt, &c));
    double want[6] = {0, 3, 1, 4, 2, 5};
    double *got = th_values(c);
    CHECK(th_allclose(got, want, 6, 0, 0));
    free(got);
    ct_tensor_free(t);
    ct_tensor_free(v);
    ct_tensor_free(tt);
    ct_tensor_free(c);
}

int main(void)
{
    RUN(test_full_and_views);
    return th_finish();
}
