/* CTORCH_OPENCL_PROFILE=1: where a decode token's time goes on an OpenCL device. The
 * queue is created with profiling on and every kernel launch gets an event; device times
 * are summed per kernel name, next to the host time of the enqueue call itself and of the
 * backend's other host work (markers + flushes, waits, op dispatch, step launches,
 * transfers). Events are harvested in batches (a host wait every OCL_PROF_BATCH launches,
 * which profiling accepts), and the table is printed to stderr when the device is
 * released or at exit. Off (the default), a launch costs one pointer test.
 * CTORCH_OPENCL_PROFILE=host keeps the host times only: a plain queue and no events, so
 * the host's cost per launch is what it is in an ordinary run. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backends/opencl/ocl_dev.h"

#define OCL_PROF_BATCH 4096
#define OCL_PROF_ROWS 256
#define OCL_PROF_DEVS 16

typedef struct prof_row {
    char name[64];
    uint64_t calls;
    double dev_ns, host_ns;
} prof_row;

typedef struct ocl_prof {
    char dev_name[300];
    cl_event ev[OCL_PROF_BATCH];
    int ev_row[OCL_PROF_BATCH];
    int n_ev;
    prof_row rows[OCL_PROF_ROWS];
    int n_rows;
    uint64_t host_ns[OCL_PROF_N], host_n[OCL_PROF_N];
    cl_ulong first_start, last_end; /* device clock: the span the kernels covered */
    /* Between consecutive launches (device clock, enqueue order): the device idle before a
     * kernel's start, counted apart when short (inside a step: the host or the queue's
     * submission did not keep up) from long (between steps); and how long kernels waited
     * from submission to start (queued behind earlier work: the device bounds the step). */
    cl_ulong prev_end;
    double idle_short_ns, idle_long_ns, queued_ns;
    uint64_t n_short, n_long, n_queued;
    uint64_t wall0;
    bool host_only; /* CTORCH_OPENCL_PROFILE=host: no events (a plain queue), host times only */
} ocl_prof;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static ocl_dev *g_devs[OCL_PROF_DEVS];
static bool g_atexit;

uint64_t ocl_prof_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int ocl_prof_wanted(void)
{
    const char *e = getenv("CTORCH_OPENCL_PROFILE"); /* a diagnostic switch: not a library setting */
    if (!e || !e[0] || !strcmp(e, "0")) return 0;
    return strcmp(e, "host") ? 1 : 2;
}

/* A gap longer than this between two launches is taken to be between steps. */
#define OCL_PROF_STEP_GAP_NS 100000.0

static void gaps(ocl_prof *p, cl_event ev, cl_ulong start, cl_ulong end)
{
    cl_ulong sub = 0;
    if (ocl_cl.clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_SUBMIT, sizeof sub, &sub, NULL) == CL_SUCCESS && sub &&
        start >= sub) {
        p->queued_ns += (double)(start - sub);
        p->n_queued++;
    }
    if (p->prev_end && start >= p->prev_end) {
        double idle = (double)(start - p->prev_end);
        if (idle < OCL_PROF_STEP_GAP_NS) p->idle_short_ns += idle, p->n_short++;
        else p->idle_long_ns += idle, p->n_long++;
    }
    p->prev_end = end;
}

static void harvest(ocl_prof *p)
{
    if (!p->n_ev) return;
    ocl_cl.clWaitForEvents((cl_uint)p->n_ev, p->ev);
    for (int i = 0; i < p->n_ev; i++) {
        cl_ulong a = 0, b = 0;
        if (ocl_cl.clGetEventProfilingInfo(p->ev[i], CL_PROFILING_COMMAND_START, sizeof a, &a, NULL) == CL_SUCCESS &&
            ocl_cl.clGetEventProfilingInfo(p->ev[i], CL_PROFILING_COMMAND_END, sizeof b, &b, NULL) == CL_SUCCESS &&
            b >= a) {
            p->rows[p->ev_row[i]].dev_ns += (double)(b - a);
            if (!p->first_start || a < p->first_start) p->first_start = a;
            if (b > p->last_end) p->last_end = b;
            gaps(p, p->ev[i], a, b);
        }
        ocl_cl.clReleaseEvent(p->ev[i]);
    }
    p->n_ev = 0;
}

static int cmp_rows(const void *a, const void *b)
{
    double x = ((const prof_row *)a)->dev_ns, y = ((const prof_row *)b)->dev_ns;
    return x < y ? 1 : x > y ? -1 : 0;
}

static void print(ocl_prof *p)
{
    harvest(p);
    qsort(p->rows, (size_t)p->n_rows, sizeof p->rows[0], cmp_rows);
    double total = 0, host = 0;
    uint64_t calls = 0;
    for (int i = 0; i < p->n_rows; i++) total += p->rows[i].dev_ns, host += p->rows[i].host_ns, calls += p->rows[i].calls;
    double wall = (double)(ocl_prof_now() - p->wall0), span = (double)(p->last_end - p->first_start);
    fprintf(stderr, "opencl profile: %s\n", p->dev_name);
    fprintf(stderr, "  %-28s %10s %12s %9s %5s %11s\n", "kernel", "calls", "device ms", "avg us", "%", "enqueue us");
    for (int i = 0; i < p->n_rows; i++) {
        const prof_row *r = &p->rows[i];
        fprintf(stderr, "  %-28s %10llu %12.3f %9.2f %5.1f %11.2f\n", r->name, (unsigned long long)r->calls,
                r->dev_ns / 1e6, r->dev_ns / 1e3 / (double)r->calls, total > 0 ? 100 * r->dev_ns / total : 0,
                r->host_ns / 1e3 / (double)r->calls);
    }
    fprintf(stderr, "  kernels: %llu launches, %.3f ms on the device (%.2f us each), %.3f ms enqueueing (%.2f us each)\n",
            (unsigned long long)calls, total / 1e6, calls ? total / 1e3 / (double)calls : 0, host / 1e6,
            calls ? host / 1e3 / (double)calls : 0);
    fprintf(stderr, "  device span first start..last end %.3f ms, busy %.1f%%; wall since init %.3f ms\n", span / 1e6,
            span > 0 ? 100 * total / span : 0, wall / 1e6);
    if (p->n_short || p->n_long)
        fprintf(stderr,
                "  device idle before a launch: %llu x %.2f us within steps (gaps < %.0f us), %llu x %.1f us longer;"
                " submitted to started %.2f us a launch\n",
                (unsigned long long)p->n_short, p->n_short ? p->idle_short_ns / 1e3 / (double)p->n_short : 0,
                OCL_PROF_STEP_GAP_NS / 1e3, (unsigned long long)p->n_long,
                p->n_long ? p->idle_long_ns / 1e3 / (double)p->n_long : 0,
                p->n_queued ? p->queued_ns / 1e3 / (double)p->n_queued : 0);
    static const char *what[OCL_PROF_N] = {"event markers+flush", "host waits", "op dispatch (run)",
                                           "step launches", "uploads", "downloads"};
    for (int i = 0; i < OCL_PROF_N; i++)
        if (p->host_n[i])
            fprintf(stderr, "  host %-22s %10llu x %9.2f us = %10.3f ms\n", what[i], (unsigned long long)p->host_n[i],
                    (double)p->host_ns[i] / 1e3 / (double)p->host_n[i], (double)p->host_ns[i] / 1e6);
}

static void at_exit(void)
{
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < OCL_PROF_DEVS; i++)
        if (g_devs[i] && g_devs[i]->prof) {
            print(g_devs[i]->prof);
            g_devs[i] = NULL;
        }
    pthread_mutex_unlock(&g_mu);
}

void ocl_prof_init(ocl_dev *od)
{
    ocl_prof *p = calloc(1, sizeof *p);
    if (!p) return; /* no profile, nothing else lost */
    snprintf(p->dev_name, sizeof p->dev_name, "%s (%s)", od->name, od->platform_name);
    p->wall0 = ocl_prof_now();
    p->host_only = ocl_prof_wanted() == 2;
    od->prof = p;
    pthread_mutex_lock(&g_mu);
    for (int i = 0; i < OCL_PROF_DEVS; i++)
        if (!g_devs[i]) {
            g_devs[i] = od;
            break;
        }
    if (!g_atexit) atexit(at_exit);
    g_atexit = true;
    pthread_mutex_unlock(&g_mu);
}

void ocl_prof_release(ocl_dev *od)
{
    if (!od->prof) return;
    pthread_mutex_lock(&g_mu);
    print(od->prof);
    for (int i = 0; i < OCL_PROF_DEVS; i++)
        if (g_devs[i] == od) g_devs[i] = NULL;
    pthread_mutex_unlock(&g_mu);
    free(od->prof);
    od->prof = NULL;
}

static int row_of(ocl_prof *p, const char *name)
{
    for (int i = 0; i < p->n_rows; i++)
        if (!strcmp(p->rows[i].name, name)) return i;
    if (p->n_rows == OCL_PROF_ROWS) return OCL_PROF_ROWS - 1; /* the last row collects the rest */
    snprintf(p->rows[p->n_rows].name, sizeof p->rows[0].name, "%s", name);
    return p->n_rows++;
}

cl_int ocl_prof_enqueue(ocl_dev *od, cl_kernel k, const char *name, cl_uint dims, const size_t *global,
                        const size_t *local)
{
    ocl_prof *p = od->prof;
    if (!p) return ocl_cl.clEnqueueNDRangeKernel(od->q, k, dims, NULL, global, local, 0, NULL, NULL);
    cl_event ev = NULL;
    uint64_t t0 = ocl_prof_now();
    cl_int err = ocl_cl.clEnqueueNDRangeKernel(od->q, k, dims, NULL, global, local, 0, NULL, p->host_only ? NULL : &ev);
    uint64_t t1 = ocl_prof_now();
    pthread_mutex_lock(&g_mu);
    int r = row_of(p, name);
    p->rows[r].calls++;
    p->rows[r].host_ns += (double)(t1 - t0);
    if (err == CL_SUCCESS && ev) {
        if (p->n_ev == OCL_PROF_BATCH) harvest(p);
        p->ev[p->n_ev] = ev;
        p->ev_row[p->n_ev++] = r;
    }
    pthread_mutex_unlock(&g_mu);
    return err;
}

void ocl_prof_host(ocl_dev *od, int what, uint64_t ns)
{
    ocl_prof *p = od->prof;
    if (!p || what < 0 || what >= OCL_PROF_N) return;
    __atomic_fetch_add(&p->host_ns[what], ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&p->host_n[what], 1, __ATOMIC_RELAXED);
}
