/* A first look at ctorch: tensors, ops through the hybrid executor, and where each op ran.
 * Build against an installed ctorch:  cc hello.c $(pkg-config --cflags --libs ctorch) */
#include <stdio.h>

#include <ctorch/ctorch.h>

#define TRY(call)                                                                   \
    do {                                                                            \
        ct_status s_ = (call);                                                      \
        if (s_ != CT_OK) {                                                          \
            fprintf(stderr, "%s failed: %s\n", #call, ct_last_error());             \
            return 1;                                                               \
        }                                                                           \
    } while (0)

int main(void)
{
    int64_t shape[2] = {2, 3};
    ct_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *bt = NULL;
    TRY(ct_randn(2, shape, CT_F32, 42, &a));
    TRY(ct_arange(0, 6, 1, CT_F32, &b));
    TRY(ct_view(b, 2, shape, &bt)); /* a view: no copy */
    TRY(ct_add(a, bt, &c));
    TRY(ct_softmax(c, -1, &d));

    char buf[256];
    printf("a + b      = %s\n", ct_tensor_format(c, 6, buf, sizeof buf));
    printf("softmax    = %s\n", ct_tensor_format(d, 6, buf, sizeof buf));

    ct_exec_record rec;
    TRY(ct_exec_last(&rec));
    printf("last op    = %s on %s (reason: %s)\n", rec.op, rec.device, ct_route_reason_name(rec.reason));

    /* A shape error is reported, never retried on another device. */
    int64_t bad[1] = {4};
    ct_tensor *e = NULL, *f = NULL;
    TRY(ct_ones(1, bad, CT_F32, &e));
    if (ct_add(a, e, &f) != CT_OK) printf("error      = %s\n", ct_last_error());

    ct_tensor_free(a); ct_tensor_free(b); ct_tensor_free(bt);
    ct_tensor_free(c); ct_tensor_free(d); ct_tensor_free(e);
    return 0;
}
