/* Helpers shared by the executor tests: ops built as records and submitted to
 * the executor directly, so routing is tested apart from the op frontends
 * (tests/ops covers those), and the last-route query as one call. */
#ifndef CTORCH_TEST_EXEC_UTIL_H
#define CTORCH_TEST_EXEC_UTIL_H

#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/frontend.h"
#include "test_backend.h"

/* Same-shape f32 binary op (ADD, SUB, MUL). */
static inline ct_status xu_binary(ct_op_kind k, const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    ct_op op = {.kind = k, .n_src = 2, .src = {a, b}};
    ct_status s = ops_new_dst(ct_tensor_ndim(a), ct_tensor_shape(a), ct_tensor_dtype(a), &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

static inline ct_status xu_unary(ct_op_kind k, const ct_tensor *a, ct_tensor **out)
{
    ct_op op = {.kind = k, .n_src = 1, .src = {a}};
    ct_status s = ops_new_dst(ct_tensor_ndim(a), ct_tensor_shape(a), ct_tensor_dtype(a), &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

/* Sum of every element into a 0-d tensor. */
static inline ct_status xu_sum_all(const ct_tensor *a, ct_tensor **out)
{
    ct_op op = {.kind = CT_OP_SUM, .n_src = 1, .src = {a}};
    op.p.red.mask = (1u << ct_tensor_ndim(a)) - 1;
    ct_status s = ops_new_dst(0, NULL, ct_tensor_dtype(a), &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

/* [M, K] @ [K, N] without batch dims. */
static inline ct_status xu_matmul(const ct_tensor *a, const ct_tensor *b, ct_tensor **out)
{
    ct_op op = {.kind = CT_OP_MATMUL, .n_src = 2, .src = {a, b}};
    int64_t shape[2] = {ct_tensor_shape(a)[0], ct_tensor_shape(b)[1]};
    ct_status s = ops_new_dst(2, shape, ct_tensor_dtype(a), &op);
    if (s != CT_OK) return s;
    return ops_submit(&op, out);
}

/* Elements of t that differ from f(i), i its row-major index; -1 if t cannot be read. */
static inline int xu_count_wrong(const ct_tensor *t, double (*f)(int64_t i))
{
    double *v = th_values(t);
    int bad = 0;
    for (int64_t i = 0; v && i < ct_tensor_numel(t); i++) bad += v[i] != f(i);
    free(v);
    return v ? bad : -1;
}

/* The op forced onto dev (unary when b is NULL); its result. */
static inline ct_tensor *xu_run_on(const char *dev, ct_op_kind k, const ct_tensor *a, const ct_tensor *b)
{
    ct_tensor *r = NULL;
    CHECK_OK(ct_exec_force_device(dev));
    CHECK_OK(b ? xu_binary(k, a, b, &r) : xu_unary(k, a, &r));
    ct_exec_force_device(NULL);
    return r;
}

/* A fresh executor: no fault, no forced device, not strict, `n_test` test devices
 * supporting `ops`, the given small-op threshold, zeroed statistics. */
static inline void xu_reset(int n_test, const char *ops, size_t small_bytes)
{
    ct_exec_set_fault(NULL);
    ct_exec_force_device(NULL);
    ct_exec_set_strict(false);
    CHECK_OK(test_backend_install(n_test, ops));
    ct_exec_set_small_bytes(small_bytes);
    ct_exec_stats_reset();
}

/* Statistics of one device by name. */
static inline bool xu_device_stats(const char *dev, ct_device_stats *out)
{
    ct_device_stats s[EXEC_MAX_DEVICES];
    int n = ct_exec_stats(s, EXEC_MAX_DEVICES);
    for (int i = 0; i < n; i++)
        if (!strcmp(s[i].device, dev)) {
            *out = s[i];
            return true;
        }
    return false;
}

/* The last route of this thread; "op@device/reason" is compared by the tests. */
static inline const char *xu_last(char *buf, size_t len)
{
    ct_exec_record r;
    if (ct_exec_last(&r) != CT_OK) {
        snprintf(buf, len, "(none)");
        return buf;
    }
    snprintf(buf, len, "%s@%s/%s", r.op, r.device, ct_route_reason_name(r.reason));
    return buf;
}

#define CHECK_LAST(want)                                                                 \
    do {                                                                                 \
        char lb__[128];                                                                  \
        const char *got__ = xu_last(lb__, sizeof lb__);                                  \
        CHECK_MSG(!strcmp(got__, want), "last route %s, want %s", got__, want);          \
    } while (0)

static inline const char *xu_residency(const ct_tensor *t)
{
    static _Thread_local char buf[96];
    return ct_tensor_residency(t, buf, sizeof buf);
}

/* Host f32 tensor of `n` elements with values i * scale + bias. */
static inline ct_tensor *xu_host_f32(int ndim, const int64_t *shape, float scale, float bias)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    float *v = malloc(sizeof(float) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = (float)(i % 1000) * scale + bias;
    ct_tensor *t = NULL;
    CHECK_OK(ct_tensor_from_data(ndim, shape, CT_F32, v, &t));
    free(v);
    return t;
}

/* Copies every element out as double (host copy made valid). */
static inline bool xu_equal(const ct_tensor *a, const ct_tensor *b)
{
    int64_t n = ct_tensor_numel(a);
    if (n != ct_tensor_numel(b)) return false;
    double *va = th_values(a), *vb = th_values(b);
    bool eq = memcmp(va, vb, sizeof(double) * (size_t)n) == 0;
    free(va);
    free(vb);
    return eq;
}

#endif
