/* A small test harness: CHECK macros count failures; each test program ends
 * with th_finish(), which prints "N passed, N failed" and returns the exit code
 * (77 = skipped, for ctest's SKIP_RETURN_CODE). */
#ifndef CTORCH_TEST_HARNESS_H
#define CTORCH_TEST_HARNESS_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "ctorch/ctorch.h"

extern int th_checks_failed;
extern int th_tests_passed, th_tests_failed;
extern const char *th_current;

#define CHECK(cond)                                                                                  \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            th_checks_failed++;                                                                      \
            fprintf(stderr, "%s:%d: %s: CHECK failed: %s\n", __FILE__, __LINE__, th_current, #cond); \
        }                                                                                            \
    } while (0)

#define CHECK_MSG(cond, ...)                                                                         \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            th_checks_failed++;                                                                      \
            fprintf(stderr, "%s:%d: %s: CHECK failed: %s: ", __FILE__, __LINE__, th_current, #cond); \
            fprintf(stderr, __VA_ARGS__);                                                            \
            fputc('\n', stderr);                                                                     \
        }                                                                                            \
    } while (0)

/* A ct_status call that must succeed. */
#define CHECK_OK(expr)                                                                                       \
    do {                                                                                                     \
        ct_status st_ = (expr);                                                                              \
        CHECK_MSG(st_ == CT_OK, "%s returned %s: %s", #expr, ct_status_name(st_), ct_last_error());           \
    } while (0)

/* A ct_status call that must fail with `want` and leave a message. */
#define CHECK_STATUS(expr, want)                                                                             \
    do {                                                                                                     \
        ct_status st_ = (expr);                                                                              \
        CHECK_MSG(st_ == (want), "%s returned %s, expected %s (%s)", #expr, ct_status_name(st_),             \
                  ct_status_name(want), ct_last_error());                                                    \
        CHECK_MSG(st_ == CT_OK || ct_last_error()[0], "%s failed without a message", #expr);                 \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                                        \
    do {                                                                                             \
        double a_ = (a), b_ = (b);                                                                   \
        CHECK_MSG(fabs(a_ - b_) <= (tol), "%.9g vs %.9g (tol %g)", a_, b_, (double)(tol));           \
    } while (0)

typedef void (*th_fn)(void);
void th_run(const char *name, th_fn fn);
#define RUN(fn) th_run(#fn, fn)
/* Command line of a test program: `NAME` runs only that test, `--except A,B` all but
 * those (tests/CMakeLists.txt gives tests that need ../shared their own ctest entries). */
void th_args(int argc, char **argv);
/* Prints the summary; returns 0, 1, or 77 when every test skipped. */
int th_finish(void);
/* Marks the current test skipped with a reason (printed). */
void th_skip(const char *fmt, ...);

/* Deterministic inputs: splitmix64 stream. */
typedef struct th_rng { uint64_t s; } th_rng;
double th_uniform(th_rng *r, double lo, double hi);
/* A tensor of shape with uniform values in [lo, hi) of dtype (generated in double). */
ct_tensor *th_random(th_rng *r, int ndim, const int64_t *shape, ct_dtype dtype, double lo, double hi);
/* Reads every element of t as double (row-major), caller frees. */
double *th_values(const ct_tensor *t);
/* Max |a-b| / (atol + rtol*|b|) style comparison: true if all within. Prints the first miss. */
int th_allclose(const double *got, const double *want, int64_t n, double atol, double rtol);
/* The index of the largest of n floats (the first on ties): a greedy token. */
int th_argmax_f32(const float *x, int n);
/* sum (got - ref)^2 / sum ref^2 in double (the plain sum of squares when ref is all zero). */
double th_nmse_f32(const float *got, const float *ref, int n);
/* A whole file, NUL-terminated, malloc'ed (*len = its size; NULL when unreadable). */
char *th_read_file(const char *path, size_t *len);

/* The library's log lines, collected: th_log_capture(true) empties the buffer and installs
 * the hook, false removes it (the lines stay readable through th_log()). */
void th_log_capture(bool on);
const char *th_log(void);
/* Occurrences of needle in hay. */
int th_count(const char *hay, const char *needle);
/* Path of ../shared/refdata (CTORCH_REFDATA), or NULL when absent; absent under
 * CTORCH_REQUIRE_SHARED=1 also counts as a failed check of the current test. */
const char *th_refdata(void);
/* True when CTORCH_REQUIRE_SHARED=1 (CI): missing refdata is a failure, not a skip. */
int th_require_shared(void);

#endif
