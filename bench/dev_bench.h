/* Timing ops forced onto one device for the device benches (cuda_nn.c, ocl_ops.c): inputs
 * placed there first so no transfer is timed; each figure is the best of 5 rounds of
 * `iters` back-to-back ops ended by a device sync (round 0 warms up). Header-only: each
 * bench is one program; static inline, so a bench that uses part of it still builds with -Werror. */
#ifndef CT_BENCH_DEV_BENCH_H
#define CT_BENCH_DEV_BENCH_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctorch/ctorch.h"

static inline double db_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline void db_die(const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, ct_last_error());
    exit(1);
}

typedef ct_status (*db_op_fn)(ct_tensor *const *in, ct_tensor **out);

/* Seconds per op on dev. dst: the output of an `out` form (kept), else NULL (each op
 * allocates its result, freed at once). Exits if an op ran anywhere else. */
static inline double db_time(const char *dev, db_op_fn fn, ct_tensor *const *in, ct_tensor *dst, int iters)
{
    double best = 1e30;
    if (ct_exec_force_device(dev) != CT_OK) db_die(dev);
    for (int round = 0; round < 6; round++) {
        if (ct_device_sync(dev) != CT_OK) db_die("sync");
        double t0 = db_now();
        for (int i = 0; i < iters; i++) {
            ct_tensor *y = dst;
            if (fn(in, &y) != CT_OK) db_die("op");
            ct_exec_record rec;
            if (ct_exec_last(&rec) != CT_OK || strcmp(rec.device, dev) != 0) {
                fprintf(stderr, "bench: the op ran on %s, not %s\n", rec.device, dev);
                exit(1);
            }
            if (!dst) ct_tensor_free(y);
        }
        if (ct_device_sync(dev) != CT_OK) db_die("sync");
        double t = (db_now() - t0) / iters;
        if (round > 0 && t < best) best = t; /* round 0 warms up (allocator, library heuristics) */
    }
    ct_exec_force_device(NULL);
    return best;
}

/* Normal values (seeded) of dtype dt, placed on dev. */
static inline ct_tensor *db_placed_randn(const char *dev, int nd, const int64_t *shape, ct_dtype dt, uint64_t seed)
{
    ct_tensor *f = NULL, *t = NULL;
    if (ct_randn(nd, shape, CT_F32, seed, &f) != CT_OK) db_die("randn");
    if (dt != CT_F32) {
        if (ct_cast(f, dt, &t) != CT_OK) db_die("cast");
        ct_tensor_free(f);
    } else {
        t = f;
    }
    if (ct_tensor_place(t, dev) != CT_OK) db_die("place");
    return t;
}

#endif
