/* A fixed pool of worker threads. The caller takes part in the work; workers
 * spin briefly before sleeping, because LLM decode issues many short ops. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"

#define POOL_MAX 256
#define SPIN_ITERS 20000

typedef struct pool {
    int n_threads; /* including the caller */
    int active;    /* threads a job may use (ct_set_num_threads), <= n_threads */
    int job_threads;
    pthread_t th[POOL_MAX];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t submit; /* one job at a time */
    atomic_uint gen;        /* bumped per job */
    atomic_int stop;
    /* current job */
    cpu_range_fn fn;
    void *ctx;
    int64_t n, chunk, n_chunks;
    atomic_llong next;
    atomic_int pending; /* workers still inside the job */
} pool;

static pool g_pool;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static _Thread_local int t_in_pool;

static void run_chunks(pool *p)
{
    for (;;) {
        long long c = atomic_fetch_add(&p->next, 1);
        if (c >= p->n_chunks) break;
        int64_t b = c * p->chunk, e = b + p->chunk < p->n ? b + p->chunk : p->n;
        p->fn(p->ctx, b, e);
    }
}

typedef struct worker_arg { pool *p; int idx; } worker_arg;
static worker_arg g_args[POOL_MAX];
static int g_requested; /* ct_set_num_threads before the pool exists */

static void *worker(void *arg)
{
    pool *p = ((worker_arg *)arg)->p;
    int idx = ((worker_arg *)arg)->idx;
    t_in_pool = 1;
    /* gen is 0 until the first job, which can be submitted before this thread first
     * runs: starting from 0 (not from the current value) makes sure it is not missed. */
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen && !atomic_load(&p->stop)) {
            if (++spins < SPIN_ITERS) continue;
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->stop)) pthread_cond_wait(&p->cv, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        if (idx >= p->job_threads) continue; /* not part of this job */
        run_chunks(p);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_release);
    }
}

static void pool_init(void)
{
    pool *p = &g_pool;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    const char *e = getenv("CTORCH_THREADS");
    if (e && atoi(e) > 0) n = atoi(e);
    if (g_requested > 0) n = g_requested;
    if (n < 1) n = 1;
    if (n > POOL_MAX) n = POOL_MAX;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    pthread_mutex_init(&p->submit, NULL);
    p->n_threads = 1;
    for (int i = 1; i < n; i++) {
        g_args[i] = (worker_arg){p, i};
        if (pthread_create(&p->th[i], NULL, worker, &g_args[i]) != 0) break;
        pthread_detach(p->th[i]);
        p->n_threads++;
    }
    p->active = p->n_threads;
}

void ct_set_num_threads(int n)
{
    if (n < 1) n = 1;
    g_requested = n;
    pthread_once(&g_once, pool_init);
    /* the pool never grows after start-up; more threads than it has are capped */
    __atomic_store_n(&g_pool.active, n < g_pool.n_threads ? n : g_pool.n_threads, __ATOMIC_RELAXED);
}

int ct_get_num_threads(void)
{
    pthread_once(&g_once, pool_init);
    return __atomic_load_n(&g_pool.active, __ATOMIC_RELAXED);
}

int cpu_num_threads(void) { return ct_get_num_threads(); }

void cpu_parallel_for(int64_t n, int64_t grain, cpu_range_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int nt = cpu_num_threads();
    pool *p = &g_pool;
    if (nt == 1 || n <= grain || t_in_pool || pthread_mutex_trylock(&p->submit) != 0) {
        fn(ctx, 0, n);
        return;
    }
    int64_t max_chunks = (int64_t)nt * 4, chunk = (n + max_chunks - 1) / max_chunks;
    if (chunk < grain) chunk = grain;
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    p->n_chunks = (n + chunk - 1) / chunk;
    p->job_threads = nt;
    atomic_store(&p->next, 0);
    atomic_store(&p->pending, nt - 1);
    pthread_mutex_lock(&p->mu);
    atomic_fetch_add_explicit(&p->gen, 1, memory_order_release);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    t_in_pool = 1;
    run_chunks(p);
    t_in_pool = 0;
    while (atomic_load_explicit(&p->pending, memory_order_acquire) > 0) { /* workers finish their last chunk */
    }
    pthread_mutex_unlock(&p->submit);
}
