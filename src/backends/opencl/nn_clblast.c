/* f32 GEMM through CLBlast, loaded with dlopen like the OpenCL library itself (no build or
 * run-time dependency: without libclblast.so.1 the own kernels serve). CLBlast enqueues on
 * the device's in-order queue, so it is ordered with our kernels with no host wait.
 *
 * The queue is not in ocl_internal.h's accessors: nn_queue reads it from the core's device
 * state (ocl_dev.h), the one place the nn group looks inside it. */
#include <dlfcn.h>
#include <pthread.h>

#include "backends/opencl/nn_internal.h"
#include "backends/opencl/ocl_dev.h"

/* CLBlast's C API (clblast_c.h): enums are ints, 0 is success */
enum { CLB_ROW_MAJOR = 101, CLB_NO_TRANS = 111, CLB_TRANS = 112 };
typedef int (*clb_sgemm_fn)(int layout, int ta, int tb, size_t m, size_t n, size_t k, float alpha, cl_mem a,
                            size_t a_off, size_t lda, cl_mem b, size_t b_off, size_t ldb, float beta, cl_mem c,
                            size_t c_off, size_t ldc, cl_command_queue *queue, cl_event *event);

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static clb_sgemm_fn g_sgemm;
static bool g_enabled = true;

static void clb_load(void)
{
    void *h = dlopen("libclblast.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libclblast.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        core_log(CT_LOG_DEBUG, "opencl: no CLBlast (%s): own GEMM kernels only", dlerror());
        return;
    }
    *(void **)&g_sgemm = dlsym(h, "CLBlastSgemm");
    if (!g_sgemm) core_log(CT_LOG_DEBUG, "opencl: libclblast has no CLBlastSgemm: own GEMM kernels only");
}

void nn_clblast_enable(bool on) { g_enabled = on; }

bool nn_clblast_available(void)
{
    pthread_once(&g_once, clb_load);
    return g_enabled && g_sgemm != NULL;
}

/* One stride for `n` dims walked as one (size-1 dims skipped); false when they do not fold. */
static bool fold_stride(int n, const cl_long *shape, const cl_long *stride, cl_long *out)
{
    cl_long expect = -1, span = 1;
    for (int d = n - 1; d >= 0; d--) {
        if (shape[d] == 1) continue;
        if (expect == -1) expect = stride[d];
        else if (stride[d] != expect * span) return false;
        span *= shape[d];
    }
    *out = expect;
    return true;
}

/* A matrix (r, c) at off + r * rs + c * cs as CLBlast sees it: row-major, maybe transposed. */
static bool clb_layout(cl_long rows, cl_long cols, cl_long rs, cl_long cs, int *trans, size_t *ld)
{
    if (rows == 1) rs = cols; /* a single row: its stride is free */
    if (cols == 1) cs = 1;
    if (cs == 1 && rs >= cols && rs > 0) {
        *trans = CLB_NO_TRANS, *ld = (size_t)rs;
        return true;
    }
    if (rs == 1 && cs >= rows && cs > 0) {
        *trans = CLB_TRANS, *ld = (size_t)cs;
        return true;
    }
    return false;
}

ct_status nn_clblast_gemm(ct_device *dev, const nn_gemm_desc *g, bool *done)
{
    *done = false;
    /* CLBlast enqueues its own kernels: a step being captured records only ocl_launch's */
    if (!nn_clblast_available() || g->batches != 1 || g->bias || ocl_capturing(dev)) return CT_OK;
    if (g->a->dtype != CT_F32 || g->b->dtype != CT_F32 || g->c->dtype != CT_F32) return CT_OK;
    cl_long sam;
    if (!fold_stride(8, g->ash.s, g->ast.s, &sam)) return CT_OK;
    if (sam == -1) sam = g->K; /* one row */
    int ta, tb;
    size_t lda, ldb;
    if (!clb_layout(g->M, g->K, sam, g->sak, &ta, &lda) || !clb_layout(g->K, g->N, g->sbk, g->sbn, &tb, &ldb))
        return CT_OK;
    cl_mem am, bm, cm;
    cl_ulong ao, bo, co;
    ct_status s = nn_mem(g->a, dev, "gemm", &am, &ao);
    if (s == CT_OK) s = nn_mem(g->b, dev, "gemm", &bm, &bo);
    if (s == CT_OK) s = nn_mem(g->c, dev, "gemm", &cm, &co);
    if (s != CT_OK) return s;
    cl_command_queue q = ocl_dev_of(dev)->q;
    int rc = g_sgemm(CLB_ROW_MAJOR, ta, tb, (size_t)g->M, (size_t)g->N, (size_t)g->K, 1.0f, am, ao / sizeof(float),
                     lda, bm, bo / sizeof(float), ldb, 0.0f, cm, co / sizeof(float), (size_t)g->N, &q, NULL);
    if (rc != 0) {
        /* CLBlast refused (a size or layout it does not take, a kernel that does not build):
         * the own kernel runs instead */
        core_log(CT_LOG_DEBUG, "opencl: CLBlastSgemm %lldx%lldx%lld returned %d: own kernel instead", (long long)g->M,
                 (long long)g->N, (long long)g->K, rc);
        return CT_OK;
    }
    *done = true;
    return CT_OK;
}
