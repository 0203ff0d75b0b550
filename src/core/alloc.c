/* Host memory: 64-byte aligned blocks. Small blocks are kept on per-size free
 * lists so the eager path (one output tensor per op) avoids malloc/free churn. */
#include <pthread.h>
#include <stdlib.h>

#include "core/tensor.h"

#define HOST_ALIGN 64
#define CACHE_CLASSES 8      /* 64 B .. 8 KiB, powers of two */
#define CACHE_PER_CLASS 64

typedef struct free_block { struct free_block *next; } free_block;

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *g_free[CACHE_CLASSES];
static int g_free_count[CACHE_CLASSES];

static int size_class(size_t bytes)
{
    size_t sz = HOST_ALIGN;
    for (int c = 0; c < CACHE_CLASSES; c++, sz <<= 1)
        if (bytes <= sz) return c;
    return -1;
}

void *host_alloc(size_t bytes)
{
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
    }
    free(p);
}
