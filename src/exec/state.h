/* The executor's global state (one per process). */
#ifndef CT_EXEC_STATE_H
#define CT_EXEC_STATE_H

#include "exec/exec.h"

typedef struct exec_dev_stats {
    uint64_t ops, time_ns, bytes_in, bytes_out, fallbacks, decomposed;
} exec_dev_stats;

typedef struct exec_state {
    bool ready;             /* initialized (successfully or not: see init_status) */
    ct_status init_status;  /* the settings' verdict; ops fail with it until fixed */
    char init_error[512];
    ct_device *devs[EXEC_MAX_DEVICES];
    int n_devs;
    int chain[EXEC_MAX_DEVICES];
    int n_chain;
    /* settings, written by init and the setters, read by every op: atomic accesses */
    bool strict;
    bool timing;            /* measure op times for ct_exec_stats (CTORCH_STATS=1 or tracing) */
    bool sync;              /* CTORCH_SYNC: sync the device after every op */
    size_t small_bytes;
    exec_dev_stats stats[EXEC_MAX_DEVICES]; /* updated with atomic adds */
    ct_transfer_stats xfer[CT_TRANSFER_METHOD_COUNT]; /* likewise */
    uint8_t logged[EXEC_MAX_DEVICES][CT_OP_COUNT]; /* failure already logged for (device, op) */
} exec_state;

/* Initializes on first use (which may fail: exec_ready tells). */
exec_state *exec_state_get(void);
/* The storage transfer hook (stats.c), installed at initialization. */
void exec_count_transfer(const ct_device *src, const ct_device *dst, uint64_t bytes, int method);
void exec_stat_add(uint64_t *p, uint64_t v);

#endif
