/* Host memory: 64-byte aligned blocks. Small blocks are kept on per-size free
 * lists so the eager path (one output tensor per op) avoids malloc/free churn. */
#include <pthread.h>
#include <stdlib.h>

#include "core/config.h"

#define HOST_ALIGN 64
#define CACHE_CLASSES 8      /* 64 B .. 8 KiB, powers of two */
#define CACHE_PER_CLASS 64

/* Large blocks: a few recently freed ones are kept for reuse at the same size.
 * Eager ops allocate one output per call; without this every large output is a
 * fresh mmap whose page faults cost more than the op itself. Bounded by
 * CTORCH_HOST_CACHE_MB (default 256; 0 disables). */
#define BIG_MIN (64u * 1024u)
#define BIG_SLOTS 16

typedef struct free_block { struct free_block *next; } free_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *g_free[CACHE_CLASSES];
static int g_free_count[CACHE_CLASSES];

static struct { void *p; size_t bytes; } g_big[BIG_SLOTS];
static size_t g_big_total;

static size_t big_limit(void) { return config_current()->host_cache_bytes; }

static void *big_take(size_t rounded)
{
    void *p = NULL;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < BIG_SLOTS; i++)
        if (g_big[i].p && g_big[i].bytes == rounded) {
            p = g_big[i].p;
            g_big[i].p = NULL;
            g_big_total -= rounded;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    return p;
}

/* true if the cache kept p */
static bool big_put(void *p, size_t rounded)
{
    bool kept = false;
    pthread_mutex_lock(&g_lock);
    if (g_big_total + rounded <= big_limit())
        for (int i = 0; i < BIG_SLOTS; i++)
            if (!g_big[i].p) {
                g_big[i].p = p;
                g_big[i].bytes = rounded;
                g_big_total += rounded;
                kept = true;
                break;
            }
    pthread_mutex_unlock(&g_lock);
    return kept;
}

static int size_class(size_t bytes)
{
    size_t sz = HOST_ALIGN;
    for (int c = 0; c < CACHE_CLASSES; c++, sz <<= 1)
        if (bytes <= sz) return c;
    return -1;
}

static uint64_t g_alloc_count;

uint64_t host_alloc_count(void) { return __atomic_load_n(&g_alloc_count, __ATOMIC_RELAXED); }

void *host_alloc(size_t bytes)
{
    __atomic_add_fetch(&g_alloc_count, 1, __ATOMIC_RELAXED);
    int c = size_class(bytes);
    if (c >= 0) {
        pthread_mutex_lock(&g_lock);
        free_block *b = g_free[c];
        if (b) {
            g_free[c] = b->next;
            g_free_count[c]--;
        }
        pthread_mutex_unlock(&g_lock);
        if (b) return b;
        bytes = (size_t)HOST_ALIGN << c;
    }
    size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
    if (rounded >= BIG_MIN) {
        void *p = big_take(rounded);
        if (p) return p;
    }
    return aligned_alloc(HOST_ALIGN, rounded ? rounded : HOST_ALIGN);
}

void host_free(void *p, size_t bytes)
{
    if (!p) return;
    int c = size_class(bytes);
    if (c >= 0) {
        pthread_mutex_lock(&g_lock);
        if (g_free_count[c] < CACHE_PER_CLASS) {
            free_block *b = p;
            b->next = g_free[c];
            g_free[c] = b;
            g_free_count[c]++;
            p = NULL;
        }
        pthread_mutex_unlock(&g_lock);
    } else {
        size_t rounded = (bytes + HOST_ALIGN - 1) / HOST_ALIGN * HOST_ALIGN;
        if (rounded >= BIG_MIN && big_put(p, rounded)) p = NULL;
    }
    free(p);
}
