/* A fixed pool of worker threads. The caller takes part in the work. LLM decode
 * issues a few hundred short ops per token, so workers spin (with a pause
 * instruction) for a while before sleeping, and handing out a job costs no system
 * call while they spin.
 *
 * Chunks are claimed from one 64-bit word: job tag (32 bits) | chunk count (16) |
 * next chunk (16). The caller waits for finished chunks, not for every worker to
 * check in, so a worker that is descheduled (the machine may be shared) does not
 * hold a job up: the caller does its share, and a worker that sees the job late
 * claims nothing, because its compare-and-swap carries the job's tag. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "backends/cpu/cpu.h"
#include "core/config.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define cpu_relax() _mm_pause()
#else
#define cpu_relax() ((void)0)
#endif

#define POOL_MAX 256
#define CHUNKS_PER_THREAD 4   /* dynamic balance for threads slowed by other processes */
#define MAX_CHUNKS 0xFFFF     /* the claim word's 16-bit fields */
#define SPIN_NS 2000000       /* workers spin this long after a job before sleeping */
#define CALLER_SPINS 4096     /* pause loops before a waiting caller yields its core */

typedef struct pool {
    _Alignas(64) _Atomic uint64_t claim; /* tag | chunk count | next chunk */
    _Alignas(64) atomic_int done;        /* chunks finished in the current job */
    _Alignas(64) atomic_int sleepers;    /* workers in (or going into) cond_wait */
    atomic_int park;                     /* set: spinning workers sleep now (cpu_pool_park) */
    atomic_int stop;                     /* set: workers return (cpu_pool_shutdown) */
    /* the current job: written by the caller before it publishes claim, read by a
     * worker only after it has claimed a chunk, so never while being rewritten */
    cpu_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_int job_threads;
    uint32_t tag; /* last job's tag; under submit */
    int n_threads; /* including the caller */
    int active;    /* threads a job may use (ct_set_num_threads), <= n_threads */
    pthread_t th[POOL_MAX];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t submit; /* one job at a time */
} pool;

static pool g_pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER,
                      .submit = PTHREAD_MUTEX_INITIALIZER};
/* Not pthread_once: the pool is torn down by cpu_pool_shutdown and may start again. */
static atomic_int g_ready;
static pthread_mutex_t g_init_mu = PTHREAD_MUTEX_INITIALIZER;
static bool g_exiting, g_atexit;
static _Thread_local int t_in_pool;

static uint64_t pack_claim(uint32_t tag, uint64_t n_chunks, uint64_t next)
{
    return (uint64_t)tag << 32 | n_chunks << 16 | next;
}

static uint32_t claim_tag(uint64_t v) { return (uint32_t)(v >> 32); }

static bool claim_chunk(pool *p, uint32_t tag, int64_t *c)
{
    uint64_t v = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        uint64_t next = v & 0xFFFF, n_chunks = (v >> 16) & 0xFFFF;
        if (claim_tag(v) != tag || next >= n_chunks) return false;
        if (atomic_compare_exchange_weak_explicit(&p->claim, &v, v + 1, memory_order_acq_rel, memory_order_acquire)) {
            *c = (int64_t)next;
            return true;
        }
    }
}

static void run_chunks(pool *p, uint32_t tag)
{
    int64_t c;
    while (claim_chunk(p, tag, &c)) {
        int64_t b = c * p->chunk, e = b + p->chunk < p->n ? b + p->chunk : p->n;
        p->fn(p->ctx, b, e);
        atomic_fetch_add_explicit(&p->done, 1, memory_order_release);
    }
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Returns the tag of the first job after `seen`. */
static uint32_t wait_job(pool *p, uint32_t seen)
{
    uint32_t t;
    uint64_t t0 = 0;
    for (unsigned spins = 1;; spins++) {
        if ((t = claim_tag(atomic_load_explicit(&p->claim, memory_order_acquire))) != seen) return t;
        if (atomic_load_explicit(&p->park, memory_order_relaxed)) break;
        cpu_relax();
        if (spins % 256 == 0) { /* reading the clock is cheap, but not free */
            uint64_t now = now_ns();
            if (!t0)
                t0 = now;
            else if (now - t0 > SPIN_NS)
                break;
        }
    }
    pthread_mutex_lock(&p->mu);
    /* seq_cst on both sides: either this thread sees the new claim, or the caller sees sleepers > 0 */
    atomic_fetch_add(&p->sleepers, 1);
    while ((t = claim_tag(atomic_load(&p->claim))) == seen) pthread_cond_wait(&p->cv, &p->mu);
    atomic_fetch_sub(&p->sleepers, 1);
    pthread_mutex_unlock(&p->mu);
    return t;
}

typedef struct worker_arg { pool *p; int idx; } worker_arg;
static worker_arg g_args[POOL_MAX];
static int g_requested; /* ct_set_num_threads before the pool exists */

static void *worker(void *arg)
{
    pool *p = ((worker_arg *)arg)->p;
    int idx = ((worker_arg *)arg)->idx;
    t_in_pool = 1;
    /* tag 0 is never a job's, and a job submitted before this thread first runs is
     * still seen: its tag differs from 0 */
    uint32_t seen = 0;
    for (;;) {
        seen = wait_job(p, seen);
        if (atomic_load_explicit(&p->stop, memory_order_acquire)) break;
        /* job_threads may already be a later job's: then the claims below fail on the tag */
        if (idx < atomic_load_explicit(&p->job_threads, memory_order_relaxed)) run_chunks(p, seen);
    }
    return NULL;
}

static void pool_stop(bool wait);

static void pool_at_exit(void)
{
    g_exiting = true; /* work done by later exit handlers runs on the calling thread */
    /* exit() from a signal handler may interrupt this very thread inside a job: then
     * the workers are left running rather than waiting on a lock we hold. */
    pool_stop(false);
}

/* Caller holds g_init_mu. */
static void pool_init(void)
{
    pool *p = &g_pool;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (config_current()->threads > 0) n = config_current()->threads;
    if (g_requested > 0) n = g_requested;
    if (n < 1 || g_exiting) n = 1;
    if (n > POOL_MAX) n = POOL_MAX;
    atomic_store(&p->stop, 0);
    p->n_threads = 1;
    for (int i = 1; i < n; i++) {
        g_args[i] = (worker_arg){p, i};
        if (pthread_create(&p->th[i], NULL, worker, &g_args[i]) != 0) break;
        p->n_threads++;
    }
    p->active = p->n_threads;
    /* Workers are joined at exit so that leak checkers (valgrind) see no thread left
     * running; the executor registers its own exit handler the same way. */
    if (p->n_threads > 1 && !g_atexit) {
        atexit(pool_at_exit);
        g_atexit = true;
    }
}

static void pool_ensure(void)
{
    if (atomic_load_explicit(&g_ready, memory_order_acquire)) return;
    pthread_mutex_lock(&g_init_mu);
    if (!atomic_load_explicit(&g_ready, memory_order_relaxed)) {
        pool_init();
        atomic_store_explicit(&g_ready, 1, memory_order_release);
    }
    pthread_mutex_unlock(&g_init_mu);
}

static void pool_stop(bool wait)
{
    pool *p = &g_pool;
    if (wait) pthread_mutex_lock(&g_init_mu);
    else if (pthread_mutex_trylock(&g_init_mu) != 0) return;
    if (!atomic_load_explicit(&g_ready, memory_order_relaxed)) {
        pthread_mutex_unlock(&g_init_mu);
        return;
    }
    if (wait) pthread_mutex_lock(&p->submit); /* a running job finishes first */
    else if (pthread_mutex_trylock(&p->submit) != 0) {
        pthread_mutex_unlock(&g_init_mu);
        return;
    }
    atomic_store(&p->stop, 1);
    /* A tag no worker has seen wakes spinning workers; the broadcast wakes sleeping ones.
     * Its zero chunks make any claim fail, so no worker runs stale work. */
    uint32_t tag = ++p->tag;
    if (tag == 0) tag = ++p->tag;
    atomic_store(&p->claim, pack_claim(tag, 0, 0));
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n_threads; i++) pthread_join(p->th[i], NULL);
    p->n_threads = p->active = 1;
    atomic_store_explicit(&g_ready, 0, memory_order_release);
    pthread_mutex_unlock(&p->submit);
    pthread_mutex_unlock(&g_init_mu);
}

void cpu_pool_shutdown(void) { pool_stop(true); }

void ct_set_num_threads(int n)
{
    if (n < 1) n = 1;
    g_requested = n;
    pool_ensure();
    /* the pool never grows after start-up; more threads than it has are capped */
    __atomic_store_n(&g_pool.active, n < g_pool.n_threads ? n : g_pool.n_threads, __ATOMIC_RELAXED);
}

int ct_get_num_threads(void)
{
    pool_ensure();
    return __atomic_load_n(&g_pool.active, __ATOMIC_RELAXED);
}

int cpu_num_threads(void) { return ct_get_num_threads(); }

void cpu_pool_park(void)
{
    pool_ensure();
    atomic_store_explicit(&g_pool.park, 1, memory_order_relaxed);
}

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
    int64_t max_chunks = (int64_t)nt * CHUNKS_PER_THREAD;
    if (max_chunks > MAX_CHUNKS) max_chunks = MAX_CHUNKS;
    int64_t chunk = (n + max_chunks - 1) / max_chunks;
    if (chunk < grain) chunk = grain;
    int64_t n_chunks = (n + chunk - 1) / chunk;
    uint32_t tag = ++p->tag;
    if (tag == 0) tag = ++p->tag; /* 0 is the workers' "none seen yet" */
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->chunk = chunk;
    atomic_store_explicit(&p->job_threads, nt, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->park, 0, memory_order_relaxed);
    atomic_store(&p->claim, pack_claim(tag, (uint64_t)n_chunks, 0)); /* publishes the fields above */
    if (atomic_load(&p->sleepers) > 0) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->cv);
        pthread_mutex_unlock(&p->mu);
    }
    t_in_pool = 1;
    run_chunks(p, tag);
    t_in_pool = 0;
    /* the rest are in workers' hands; one that shares this core needs it to finish */
    for (unsigned spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < n_chunks; spins++) {
        if (spins < CALLER_SPINS)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&p->submit);
}
