/* ctorch-bench-bandwidth: STREAM-style memory bandwidth, the ceiling for
 * LLM decode (every weight byte is read once per token).
 *   read : XOR-reduce one array                   (bytes = array size)
 *   triad: a[i] = b[i] + s * c[i] over three arrays (bytes = 3 x array size,
 *          write-allocate traffic not counted, as in STREAM)
 * Median of the repetitions, in GB/s (1e9 bytes).
 * Usage: ctorch-bench-bandwidth [-t THREADS=2] [-s MiB=1024] [-r REPS=5] [-o text|json] */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { K_INIT, K_READ, K_TRIAD };

typedef struct job {
    int kind;
    double *a, *b, *c;
    size_t begin, end;
    uint64_t sink;
} job;

static void *work(void *arg)
{
    job *j = arg;
    if (j->kind == K_INIT) {
        /* first touch by the thread that later reads the range */
        for (size_t i = j->begin; i < j->end; i++) {
            j->a[i] = 0.0;
            j->b[i] = 1.0;
            j->c[i] = 2.0;
        }
    } else if (j->kind == K_READ) {
        /* Four sub-streams per thread keep more cache-line misses in flight
         * than one (a decode kernel also walks several weight rows at once);
         * integer XOR vectorizes without -ffast-math. */
        const uint64_t *p = (const uint64_t *)j->b;
        size_t len = (j->end - j->begin) / 4 / 4 * 4;
        const uint64_t *q0 = p + j->begin, *q1 = q0 + len, *q2 = q1 + len, *q3 = q2 + len;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = 0; i < len; i += 4) {
            s0 ^= q0[i] ^ q0[i + 1] ^ q0[i + 2] ^ q0[i + 3];
            s1 ^= q1[i] ^ q1[i + 1] ^ q1[i + 2] ^ q1[i + 3];
            s2 ^= q2[i] ^ q2[i + 1] ^ q2[i + 2] ^ q2[i + 3];
            s3 ^= q3[i] ^ q3[i + 1] ^ q3[i + 2] ^ q3[i + 3];
        }
        for (size_t i = j->begin + 4 * len; i < j->end; i++) s0 ^= p[i];
        j->sink = s0 ^ s1 ^ s2 ^ s3;
    } else {
        const double s = 3.0;
        double *restrict a = j->a;
        const double *restrict b = j->b, *restrict c = j->c;
        for (size_t i = j->begin; i < j->end; i++) a[i] = b[i] + s * c[i];
    }
    return NULL;
}

static double run(int kind, int threads, double *a, double *b, double *c, size_t n, uint64_t *sink)
{
    job jobs[64];
    pthread_t tid[64];
    int started[64] = {0};
    double t0 = now_s();
    for (int t = 0; t < threads; t++) {
        jobs[t] = (job){kind, a, b, c, n * (size_t)t / (size_t)threads, n * (size_t)(t + 1) / (size_t)threads, 0};
        if (t > 0) started[t] = pthread_create(&tid[t], NULL, work, &jobs[t]) == 0;
    }
    work(&jobs[0]);
    for (int t = 1; t < threads; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else work(&jobs[t]);
    }
    double dt = now_s() - t0;
    for (int t = 0; t < threads; t++) *sink ^= jobs[t].sink;
    return dt;
}

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
    int threads = 2, mib = 1024, reps = 5, json = 0;
    for (int i = 1; i < argc; i++) {
        if (i + 1 >= argc) goto usage;
        const char *a = argv[i], *v = argv[++i];
        if (!strcmp(a, "-t")) threads = atoi(v);
        else if (!strcmp(a, "-s")) mib = atoi(v);
        else if (!strcmp(a, "-r")) reps = atoi(v);
        else if (!strcmp(a, "-o")) json = !strcmp(v, "json");
        else goto usage;
    }
    if (threads < 1 || threads > 64 || mib < 1 || reps < 1 || reps > 100) goto usage;

    size_t n = (size_t)mib * 1048576 / sizeof(double);
    /* aligned_alloc wants a size that is a multiple of the alignment */
    size_t bytes = (n * sizeof(double) + (2u << 20) - 1) / (2u << 20) * (2u << 20);
    double *a = aligned_alloc(2 << 20, bytes), *b = aligned_alloc(2 << 20, bytes), *c = aligned_alloc(2 << 20, bytes);
    if (!a || !b || !c) {
        fprintf(stderr, "ctorch-bench-bandwidth: cannot allocate 3 x %d MiB\n", mib);
        return 1;
    }
    /* Large pages where the kernel offers them (THP "madvise" mode): TLB misses
     * on 4 KiB pages cost a few GB/s, and a real model's weights can use them too. */
    madvise(a, bytes, MADV_HUGEPAGE);
    madvise(b, bytes, MADV_HUGEPAGE);
    madvise(c, bytes, MADV_HUGEPAGE);
    uint64_t sink = 0;
    run(K_INIT, threads, a, b, c, n, &sink);
    double rd[100], tr[100];
    run(K_READ, threads, a, b, c, n, &sink); /* warm-up */
    for (int r = 0; r < reps; r++) {
        rd[r] = (double)(n * sizeof(double)) / run(K_READ, threads, a, b, c, n, &sink) / 1e9;
        tr[r] = 3.0 * (double)(n * sizeof(double)) / run(K_TRIAD, threads, a, b, c, n, &sink) / 1e9;
    }
    qsort(rd, (size_t)reps, sizeof(double), cmp_d);
    qsort(tr, (size_t)reps, sizeof(double), cmp_d);
    double mr = rd[reps / 2], mt = tr[reps / 2];
    if (json)
        printf("{\"threads\": %d, \"array_mib\": %d, \"reps\": %d, \"read_gbs\": %.2f, \"triad_gbs\": %.2f, \"check\": %u}\n",
               threads, mib, reps, mr, mt, (unsigned)(sink & 1));
    else
        printf("threads %d, arrays %d MiB, median of %d: read %.1f GB/s, triad %.1f GB/s\n", threads, mib, reps, mr, mt);
    free(a);
    free(b);
    free(c);
    return 0;
usage:
    fprintf(stderr, "usage: ctorch-bench-bandwidth [-t THREADS=2] [-s MiB=1024] [-r REPS=5] [-o text|json]\n");
    return 2;
}
