#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_begin(progress *p, const char *label)
{
    p->label = label;
    p->tty = isatty(fileno(stderr));
    p->last_pct = -1;
    p->t0 = progress_now();
}

void progress_update(progress *p, int64_t done, int64_t total, const char *what)
{
    int pct = total > 0 ? (int)(100 * done / total) : 100;
    if (pct == p->last_pct) return;
    if (p->tty) {
        int filled = pct * 30 / 100;
        fprintf(stderr, "\r%s [", p->label);
        for (int i = 0; i < 30; i++) fputc(i < filled ? '#' : '.', stderr);
        fprintf(stderr, "] %3d%% %-40.40s", pct, what ? what : "");
        fflush(stderr);
    } else if (p->last_pct < 0 || pct / 25 != p->last_pct / 25) {
        fprintf(stderr, "%s: %d%%%s%s\n", p->label, pct, what && *what ? " " : "", what ? what : "");
    }
    p->last_pct = pct;
}

void progress_end(progress *p, const char *summary)
{
    if (p->tty) fprintf(stderr, "\r%-100s\r", "");
    fprintf(stderr, "%s: %s (%.2f s)\n", p->label, summary ? summary : "done", progress_now() - p->t0);
}
