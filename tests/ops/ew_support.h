/* Helpers shared by the element-wise op tests: inputs in several memory
 * layouts, values read back as doubles, broadcast indexing for the double
 * references, and the SIMD levels to run every case at. */
#ifndef CTORCH_TEST_EW_SUPPORT_H
#define CTORCH_TEST_EW_SUPPORT_H

#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu.h"
#include "harness.h"

typedef enum ew_layout { EW_CONTIG, EW_TRANSPOSED, EW_SLICED, EW_EXPANDED, EW_LAYOUTS } ew_layout;
static const char *const ew_layout_names[] = {"contiguous", "transposed", "sliced", "expanded"};

/* Setup calls that must work (a failure here is a bug elsewhere). */
static inline void ew_ok(ct_status s)
{
    if (s != CT_OK) {
        fprintf(stderr, "test setup failed: %s\n", ct_last_error());
        abort();
    }
}

/* A random tensor of logical shape `shape` in layout `lay`: transposed (a
 * transpose of a contiguous tensor), sliced (every other element from offset
 * 1 of a wider tensor) or expanded (dim 0 broadcast from 1). Layouts that do
 * not fit the shape fall back to contiguous. `integral` rounds the values. */
static inline ct_tensor *ew_make(th_rng *r, int ndim, const int64_t *shape, ct_dtype dt, double lo, double hi,
                                 ew_layout lay, bool integral)
{
    int64_t base[CT_MAX_DIMS];
    if (ndim) memcpy(base, shape, sizeof(int64_t) * (size_t)ndim);
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    if (n == 0 || ndim == 0) lay = EW_CONTIG;
    if (lay == EW_TRANSPOSED && ndim < 2) lay = EW_SLICED;
    if (lay == EW_TRANSPOSED) {
        base[ndim - 1] = shape[ndim - 2];
        base[ndim - 2] = shape[ndim - 1];
    } else if (lay == EW_SLICED) {
        base[ndim - 1] = 2 * shape[ndim - 1] + 1;
    } else if (lay == EW_EXPANDED) {
        base[0] = 1;
    }
    int64_t bn = 1;
    for (int i = 0; i < ndim; i++) bn *= base[i];
    double *v = malloc(sizeof(double) * (size_t)(bn ? bn : 1));
    for (int64_t i = 0; i < bn; i++) {
        v[i] = th_uniform(r, lo, hi);
        if (integral) v[i] = floor(v[i]);
    }
    ct_tensor *d, *b, *out = NULL;
    ew_ok(ct_tensor_from_data(ndim, base, CT_F64, v, &d));
    free(v);
    ew_ok(ct_cast(d, dt, &b));
    ct_tensor_free(d);
    switch (lay) {
    case EW_TRANSPOSED: ew_ok(ct_transpose(b, ndim - 2, ndim - 1, &out)); break;
    case EW_SLICED: ew_ok(ct_slice(b, ndim - 1, 1, base[ndim - 1], 2, &out)); break;
    case EW_EXPANDED: ew_ok(ct_expand(b, ndim, shape, &out)); break;
    default: return b;
    }
    ct_tensor_free(b);
    return out;
}

/* Elements of a real tensor as doubles, row-major (caller frees). */
static inline double *ew_values(const ct_tensor *t)
{
    int64_t n = ct_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    ct_tensor *c;
    ew_ok(ct_cast(t, CT_F64, &c));
    ew_ok(ct_tensor_to_host(c, v, sizeof(double) * (size_t)n));
    ct_tensor_free(c);
    return v;
}

/* Row-major index into a tensor of shape `is` broadcast to `os` for output element i. */
static inline int64_t ew_bidx(int64_t i, int on, const int64_t *os, int in, const int64_t *is)
{
    int64_t idx = 0, mul = 1;
    for (int d = on - 1; d >= 0; d--) {
        int64_t c = i % os[d];
        i /= os[d];
        int id = d - (on - in);
        if (id < 0) continue;
        if (is[id] != 1) idx += c * mul;
        mul *= is[id];
    }
    return idx;
}

/* Tolerances for results rounded once or twice into dt: a few units in the
 * last place of the type, plus a small absolute floor for values near 0. */
static inline double ew_rtol(ct_dtype dt)
{
    switch (dt) {
    case CT_F64: return 1e-12;
    case CT_F16: return 2e-3;
    case CT_BF16: return 1.6e-2;
    case CT_I32: case CT_I64: case CT_BOOL: case CT_I8: return 0;
    default: return 2e-6;
    }
}
static inline double ew_atol(ct_dtype dt)
{
    switch (dt) {
    case CT_F64: return 1e-14;
    case CT_F16: return 1e-3;
    case CT_BF16: return 1e-2;
    case CT_I32: case CT_I64: case CT_BOOL: case CT_I8: return 0;
    default: return 1e-6;
    }
}

/* Checks t (dtype want_dt) against want[n]; label names the case on failure. */
static inline void ew_check(const ct_tensor *t, ct_dtype want_dt, const double *want, int64_t n, double atol,
                            double rtol, const char *label)
{
    CHECK_MSG(t != NULL, "%s: no result", label);
    if (!t) return;
    CHECK_MSG(ct_tensor_dtype(t) == want_dt, "%s: dtype %s, expected %s", label, ct_dtype_name(ct_tensor_dtype(t)),
              ct_dtype_name(want_dt));
    CHECK_MSG(ct_tensor_numel(t) == n, "%s: %lld elements, expected %lld", label, (long long)ct_tensor_numel(t),
              (long long)n);
    if (ct_tensor_numel(t) != n) return;
    double *got = ew_values(t);
    CHECK_MSG(th_allclose(got, want, n, atol, rtol), "%s", label);
    free(got);
}

static const cpu_simd ew_levels[] = {CPU_SIMD_PORTABLE, CPU_SIMD_AVX2, CPU_SIMD_AVX512};
static const char *const ew_level_names[] = {"portable", "avx2", "avx512"};

/* Selects level; false (after a note) if this CPU lacks it. */
static inline bool ew_set_level(cpu_simd lvl)
{
    cpu_simd_set_level(CPU_SIMD_AVX512);
    cpu_simd hw = cpu_simd_level();
    cpu_simd_set_level(lvl);
    if (lvl > hw) {
        static int noted;
        if (!noted++) fprintf(stderr, "note: this CPU lacks %s; that level is not tested\n", ew_level_names[lvl]);
        return false;
    }
    return true;
}

#endif
