/* The CPU thread pool: every index of [0, n) runs exactly once and is finished
 * when cpu_parallel_for returns, for any n/grain, across thousands of back-to-back
 * jobs, after the workers have gone to sleep, nested, and from racing callers. */
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/cpu/cpu.h"
#include "exec/exec.h"
#include "harness.h"

typedef struct hits {
    int64_t n;
    unsigned char *count; /* per index; > 1 means run twice */
    int64_t bad;          /* ranges outside [0, n) or empty */
} hits;

static void mark(void *vctx, int64_t b, int64_t e)
{
    hits *h = vctx;
    if (b < 0 || e > h->n || b >= e) {
        __atomic_fetch_add(&h->bad, 1, __ATOMIC_RELAXED);
        return;
    }
    for (int64_t i = b; i < e; i++) __atomic_fetch_add(&h->count[i], 1, __ATOMIC_RELAXED);
}

/* Runs one job and checks it: returns true when every index ran exactly once. */
static bool run_checked(int64_t n, int64_t grain)
{
    hits h = {n, calloc((size_t)(n > 0 ? n : 1), 1), 0};
    if (!h.count) return false;
    cpu_parallel_for(n, grain, mark, &h);
    bool ok = h.bad == 0;
    for (int64_t i = 0; i < n && ok; i++) ok = h.count[i] == 1;
    free(h.count);
    return ok;
}

static void test_coverage(void)
{
    /* sizes around the chunking edges, grains below, at and above n, and a size whose
     * chunk count would pass the pool's cap without it */
    static const int64_t ns[] = {0, 1, 2, 3, 7, 8, 9, 63, 64, 65, 1000, 4097, 70001, 300007};
    static const int64_t grains[] = {0, 1, 2, 5, 64, 100000, 1000000};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++)
        for (size_t j = 0; j < sizeof grains / sizeof grains[0]; j++)
            CHECK_MSG(run_checked(ns[i], grains[j]), "n=%lld grain=%lld", (long long)ns[i], (long long)grains[j]);
}

typedef struct sum_ctx { int64_t *v; } sum_ctx;

static void write_idx(void *vctx, int64_t b, int64_t e)
{
    sum_ctx *c = vctx;
    for (int64_t i = b; i < e; i++) c->v[i] = i + 1;
}

/* Many short jobs in a row, as in decode: each must be complete on return. */
static void test_back_to_back(void)
{
    enum { N = 64, JOBS = 20000 };
    int64_t v[N];
    sum_ctx c = {v};
    int64_t wrong = 0;
    for (int j = 0; j < JOBS; j++) {
        memset(v, 0, sizeof v);
        cpu_parallel_for(N, 1, write_idx, &c);
        for (int i = 0; i < N; i++) wrong += v[i] != i + 1;
    }
    CHECK_MSG(wrong == 0, "%lld indices unwritten after return", (long long)wrong);
}

/* Workers that have gone to sleep (no job for a while) must wake for the next one. */
static void test_after_idle(void)
{
    for (int k = 0; k < 4; k++) {
        struct timespec ts = {0, 8 * 1000 * 1000};
        nanosleep(&ts, NULL);
        CHECK_MSG(run_checked(5000, 1), "job %d after idling", k);
    }
}

static void nested(void *vctx, int64_t b, int64_t e)
{
    hits *h = vctx;
    for (int64_t i = b; i < e; i++) {
        hits inner = {4, calloc(4, 1), 0};
        if (!inner.count) continue;
        cpu_parallel_for(4, 1, mark, &inner); /* runs inline on this thread */
        if (inner.bad == 0 && inner.count[0] == 1 && inner.count[1] == 1 && inner.count[2] == 1 && inner.count[3] == 1)
            __atomic_fetch_add(&h->count[i], 1, __ATOMIC_RELAXED);
        free(inner.count);
    }
}

static void test_nested(void)
{
    hits h = {200, calloc(200, 1), 0};
    if (!h.count) return;
    cpu_parallel_for(200, 1, nested, &h);
    int ok = 1;
    for (int i = 0; i < 200; i++) ok &= h.count[i] == 1;
    CHECK(ok);
    free(h.count);
}

static void *racer(void *arg)
{
    int *fails = arg;
    for (int j = 0; j < 300; j++)
        if (!run_checked(1000 + j, 1)) (*fails)++;
    return NULL;
}

/* Callers on other threads either get the pool or run inline; all finish correctly. */
static void test_racing_callers(void)
{
    pthread_t th[3];
    int fails[3] = {0, 0, 0}, started = 0;
    for (int i = 0; i < 3; i++) started += pthread_create(&th[i], NULL, racer, &fails[i]) == 0;
    int main_fails = 0;
    for (int j = 0; j < 300; j++) main_fails += !run_checked(777 + j, 2);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    CHECK(started == 3);
    CHECK_MSG(fails[0] + fails[1] + fails[2] + main_fails == 0, "%d/%d/%d/%d failed jobs", fails[0], fails[1], fails[2],
              main_fails);
}

static void test_thread_count(void)
{
    int n0 = ct_get_num_threads();
    CHECK(n0 >= 1);
    ct_set_num_threads(1);
    CHECK(ct_get_num_threads() == 1);
    CHECK(run_checked(10000, 1));
    ct_set_num_threads(0); /* below 1 means 1 */
    CHECK(ct_get_num_threads() == 1);
    ct_set_num_threads(n0 + 1000); /* capped at the pool's size */
    CHECK(ct_get_num_threads() == n0);
    CHECK(run_checked(10000, 1));
    ct_set_num_threads(n0);
}

static int count_tasks(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* cpu_pool_shutdown joins the 3 workers (valgrind then sees no thread left at exit);
 * the next job starts them again with the requested count. */
static void test_shutdown(void)
{
    /* the executor first: device drivers (PoCL) start threads of their own at discovery,
     * and keep them for the process */
    CHECK_OK(ct_exec_init());
    CHECK(run_checked(100000, 1));
    int before = count_tasks();
    if (before < 0) {
        th_skip("no /proc/self/task to count threads");
        return;
    }
    cpu_pool_shutdown();
    CHECK_MSG(count_tasks() == before - 3, "%d threads after shutdown, %d before", count_tasks(), before);
    cpu_pool_shutdown(); /* twice is harmless */
    CHECK(ct_get_num_threads() == 4);
    CHECK(run_checked(100000, 1));
    CHECK_MSG(count_tasks() == before, "%d threads after restart, %d before", count_tasks(), before);
    /* the executor's teardown releases the CPU device, which stops the pool too; ops
     * afterwards bring both back (tensors are freed first: their storage refers to the
     * devices ct_exec_shutdown frees) */
    int64_t shape[1] = {4096};
    ct_tensor *a = NULL, *b = NULL, *c = NULL;
    CHECK_OK(ct_ones(1, shape, CT_F32, &a));
    CHECK_OK(ct_add(a, a, &b));
    ct_tensor_free(a);
    ct_tensor_free(b);
    a = b = NULL;
    ct_exec_shutdown();
    CHECK_MSG(count_tasks() == before - 3, "%d threads after ct_exec_shutdown, %d before", count_tasks(), before);
    CHECK_OK(ct_ones(1, shape, CT_F32, &a));
    CHECK_OK(ct_add(a, a, &b));
    CHECK_OK(ct_add(b, a, &c));
    double v = 0;
    if (c) CHECK_OK(ct_tensor_item(c, 4095, &v));
    CHECK(v == 3.0);
    ct_tensor_free(a);
    ct_tensor_free(b);
    ct_tensor_free(c);
    CHECK(run_checked(100000, 1));
}

int main(void)
{
    /* threads are counted: a GPU runtime's own threads (CUDA starts some) would blur it */
    exec_hide_builtin_accelerators(true);
    unsetenv("CTORCH_DEVICES"); /* it could name one of them */
    /* before the pool starts: workers even on a one-core machine, so the hand-off is exercised */
    ct_set_num_threads(4);
    RUN(test_coverage);
    RUN(test_back_to_back);
    RUN(test_after_idle);
    RUN(test_nested);
    RUN(test_racing_callers);
    RUN(test_thread_count);
    RUN(test_shutdown);
    return th_finish();
}
