/* dlopen of the ICD loader, once per process; the handle stays open until exit (the
 * drivers it loads keep threads that must not lose their code). */
#include "backends/opencl/loader.h"

#include <dlfcn.h>
#include <pthread.h>

#include "core/tensor.h"

ocl_api ocl_cl;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_loaded;

static void load_once(void)
{
    void *h = dlopen("libOpenCL.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libOpenCL.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        core_log(CT_LOG_DEBUG, "opencl: no ICD loader (%s): no OpenCL device", dlerror());
        return;
    }
    ocl_api api;
    /* POSIX: a function pointer may be read from dlsym's void * through memcpy-free cast */
#define OCL_SYM(f)                                                                                   \
    *(void **)(&api.f) = dlsym(h, #f);                                                                \
    if (!api.f) {                                                                                    \
        core_log(CT_LOG_DEBUG, "opencl: libOpenCL.so.1 lacks %s (OpenCL 1.2 needed): no OpenCL device", #f); \
        dlclose(h);                                                                                  \
        return;                                                                                      \
    }
    OCL_FUNCS(OCL_SYM)
#undef OCL_SYM
    ocl_cl = api;
    g_loaded = true;
}

bool ocl_load(void)
{
    pthread_once(&g_once, load_once);
    return g_loaded;
}
