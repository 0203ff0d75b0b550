/* Kernels' temporary tables (RoPE angles, quantized activations, attention partials)
 * from per-thread buffers that grow and are kept, so a replayed step's kernels
 * allocate nothing once the first run has sized them. */
#include <pthread.h>
#include <stdlib.h>

#include "backends/cpu/cpu.h"

typedef struct scratch {
    void *p[CPU_SCRATCH_SLOTS];
    size_t n[CPU_SCRATCH_SLOTS];
} scratch;

static _Thread_local scratch *t_scratch;
static pthread_key_t g_key;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void scratch_free(void *v)
{
    scratch *s = v;
    for (int i = 0; i < CPU_SCRATCH_SLOTS; i++) free(s->p[i]);
    free(s);
}

static void make_key(void) { pthread_key_create(&g_key, scratch_free); }

void *cpu_scratch(cpu_scratch_slot slot, size_t bytes)
{
    if (!t_scratch) {
        pthread_once(&g_once, make_key);
        if (!(t_scratch = calloc(1, sizeof *t_scratch))) return NULL;
        pthread_setspecific(g_key, t_scratch); /* freed when the thread ends */
    }
    scratch *s = t_scratch;
    if (s->n[slot] < bytes) {
        size_t want = bytes < 4096 ? 4096 : bytes + bytes / 4;
        void *p = aligned_alloc(64, (want + 63) & ~(size_t)63);
        if (!p) return NULL;
        free(s->p[slot]);
        s->p[slot] = p;
        s->n[slot] = want;
    }
    return s->p[slot];
}
