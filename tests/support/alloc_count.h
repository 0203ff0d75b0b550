/* Counts the process's malloc/calloc/realloc/aligned_alloc calls by interposing them
 * (glibc; the real ones come from dlsym(RTLD_NEXT)). Include it in one test program
 * only. Under AddressSanitizer, which owns malloc, ac_available() is false. */
#ifndef CTORCH_TEST_ALLOC_COUNT_H
#define CTORCH_TEST_ALLOC_COUNT_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__)
#define AC_NO_INTERPOSE 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define AC_NO_INTERPOSE 1
#endif
#endif

#ifdef AC_NO_INTERPOSE
static inline bool ac_available(void) { return false; }
static inline uint64_t ac_count(void) { return 0; }
#else
#include <dlfcn.h>
#include <string.h>

static void *(*ac_malloc)(size_t);
static void *(*ac_calloc)(size_t, size_t);
static void *(*ac_realloc)(void *, size_t);
static void *(*ac_aligned)(size_t, size_t);
static void (*ac_free)(void *);
static uint64_t ac_n;
/* dlsym may allocate before the real functions are known: served from here, never freed */
static _Alignas(64) char ac_boot[1 << 16];
static size_t ac_boot_off;
static int ac_resolving;

static void *ac_boot_take(size_t n)
{
    size_t at = ac_boot_off;
    ac_boot_off += (n + 63) & ~(size_t)63;
    return ac_boot_off <= sizeof ac_boot ? ac_boot + at : NULL;
}

static bool ac_resolve(void)
{
    if (ac_free) return true;
    if (ac_resolving) return false;
    ac_resolving = 1;
    ac_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    ac_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    ac_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    ac_aligned = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    ac_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    ac_resolving = 0;
    return true;
}

void *malloc(size_t n)
{
    if (!ac_resolve()) return ac_boot_take(n);
    __atomic_add_fetch(&ac_n, 1, __ATOMIC_RELAXED);
    return ac_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    if (!ac_resolve()) return ac_boot_take(a * b); /* static memory: already zero */
    __atomic_add_fetch(&ac_n, 1, __ATOMIC_RELAXED);
    return ac_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    ac_resolve();
    __atomic_add_fetch(&ac_n, 1, __ATOMIC_RELAXED);
    return ac_realloc(p, n);
}
void *aligned_alloc(size_t a, size_t n)
{
    ac_resolve();
    __atomic_add_fetch(&ac_n, 1, __ATOMIC_RELAXED);
    return ac_aligned(a, n);
}
void free(void *p)
{
    if ((char *)p >= ac_boot && (char *)p < ac_boot + sizeof ac_boot) return;
    if (p && ac_resolve()) ac_free(p);
}

static inline bool ac_available(void) { return true; }
static inline uint64_t ac_count(void) { return __atomic_load_n(&ac_n, __ATOMIC_RELAXED); }
#endif

#endif
