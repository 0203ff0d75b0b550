#include "harness.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int th_checks_failed, th_tests_passed, th_tests_failed;
static int th_tests_skipped, th_skipped_now;
/* A program whose refdata tests have their own ctest entries runs once per such test
 * (th_only) and once for the rest (th_except, a comma-separated list). */
static const char *th_only, *th_except;
static int th_only_found;
const char *th_current = "";

void th_args(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "--except") == 0) th_except = argv[2];
    else if (argc > 1) th_only = argv[1];
}

static int th_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)) != NULL; p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == '\0')) return 1;
    return 0;
}

void th_run(const char *name, th_fn fn)
{
    if (th_only && strcmp(name, th_only) != 0) return;
    if (th_except && th_listed(th_except, name)) return;
    th_only_found = 1;
    int before = th_checks_failed;
    th_current = name;
    th_skipped_now = 0;
    ct_clear_error();
    fn();
    /* A failed check outranks a skip: CTORCH_REQUIRE_SHARED turns a missing refdata into one. */
    if (th_skipped_now && th_checks_failed == before) {
        th_tests_skipped++;
        fprintf(stderr, "SKIP %s\n", name);
    } else if (th_checks_failed == before) {
        th_tests_passed++;
        fprintf(stderr, "ok   %s\n", name);
    } else {
        th_tests_failed++;
        fprintf(stderr, "FAIL %s\n", name);
    }
}

void th_skip(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "skipped %s: ", th_current);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    th_skipped_now = 1;
}

int th_finish(void)
{
    if (th_only && !th_only_found) {
        /* A misspelt sub-test in tests/CMakeLists.txt must not pass as "0 passed". */
        fprintf(stderr, "no test named %s in this program\n", th_only);
        return 1;
    }
    printf("%d passed, %d failed, %d skipped\n", th_tests_passed, th_tests_failed, th_tests_skipped);
    if (th_tests_failed) return 1;
    if (th_tests_passed == 0 && th_tests_skipped > 0) return 77;
    return 0;
}

static uint64_t splitmix(th_rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double th_uniform(th_rng *r, double lo, double hi) { return lo + (hi - lo) * (double)(splitmix(r) >> 11) / 9007199254740992.0; }

ct_tensor *th_random(th_rng *r, int ndim, const int64_t *shape, ct_dtype dtype, double lo, double hi)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = th_uniform(r, lo, hi);
    ct_tensor *d = NULL, *t = NULL;
    if (ct_tensor_from_data(ndim, shape, CT_F64, v, &d) != CT_OK || ct_cast(d, dtype, &t) != CT_OK) {
        fprintf(stderr, "th_random: %s\n", ct_last_error());
        abort();
    }
    ct_tensor_free(d);
    free(v);
    return t;
}

double *th_values(const ct_tensor *t)
{
    int64_t n = ct_tensor_numel(t);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        if (ct_tensor_item(t, i, &v[i]) != CT_OK) {
            fprintf(stderr, "th_values: %s\n", ct_last_error());
            abort();
        }
    return v;
}

int th_allclose(const double *got, const double *want, int64_t n, double atol, double rtol)
{
    for (int64_t i = 0; i < n; i++) {
        double g = got[i], w = want[i];
        if (isnan(w) && isnan(g)) continue;
        if (isinf(w) && g == w) continue;
        if (!(fabs(g - w) <= atol + rtol * fabs(w))) {
            fprintf(stderr, "  mismatch at %lld: got %.9g want %.9g (atol %g rtol %g)\n", (long long)i, g, w, atol, rtol);
            return 0;
        }
    }
    return 1;
}

int th_require_shared(void)
{
    const char *v = getenv("CTORCH_REQUIRE_SHARED");
    return v && strcmp(v, "1") == 0;
}

const char *th_refdata(void)
{
    const char *p = getenv("CTORCH_REFDATA");
    struct stat st;
    if (!p || stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
        /* CI must not go green on a checkout that silently lost ../shared. */
        if (th_require_shared()) {
            th_checks_failed++;
            fprintf(stderr, "%s: CTORCH_REQUIRE_SHARED=1 but the refdata folder %s is missing\n", th_current,
                    p ? p : "(CTORCH_REFDATA unset)");
        }
        return NULL;
    }
    return p;
}

int th_argmax_f32(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b]) b = i;
    return b;
}

double th_nmse_f32(const float *got, const float *ref, int n)
{
    double e = 0, r = 0;
    for (int i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        e += d * d;
        r += (double)ref[i] * ref[i];
    }
    return r > 0 ? e / r : e;
}

char *th_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
        free(b);
        b = NULL;
    }
    fclose(f);
    if (b) b[n] = 0;
    if (len) *len = b ? (size_t)n : 0;
    return b;
}

static char th_log_buf[8192];

static void th_log_hook(ct_log_level level, const char *msg, void *ctx)
{
    (void)level;
    (void)ctx;
    size_t w = strlen(th_log_buf);
    snprintf(th_log_buf + w, sizeof th_log_buf - w, "%s\n", msg);
}

void th_log_capture(bool on)
{
    if (on) th_log_buf[0] = 0;
    ct_set_log_callback(on ? th_log_hook : NULL, NULL);
}

const char *th_log(void) { return th_log_buf; }

int th_count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}
