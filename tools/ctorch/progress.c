#include "progress.h"

#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

double progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void progress_begin(progress *p, const char *label)
{
    p->label = label;
    p->quiet = !cli_log_enabled(CT_LOG_INFO);
    p->tty = !p->quiet && isatty(fileno(stderr));
    p->last_pct = -1;
    p->t0 = progress_now();
}

void progress_update(progress *p, int64_t done, int64_t total, const char *what)
{
    if (p->quiet) return;
    /* a log shows when the work began (the first report may come late, at 84%),
     * not only its first quarter mark; nothing before, so a file that fails to
     * open gives one error line */
    if (!p->tty && p->last_pct < 0) {
        fprintf(stderr, "%s: 0%%\n", p->label);
        p->last_pct = 0;
    }
    int pct = total > 0 ? (int)(100 * done / total) : 100;
    if (pct == p->last_pct) return;
    if (p->tty) {
        int filled = pct * 30 / 100;
        fprintf(stderr, "\r%s [", p->label);
        for (int i = 0; i < 30; i++) fputc(i < filled ? '#' : '.', stderr);
        fprintf(stderr, "] %3d%% %-40.40s", pct, what ? what : "");
        fflush(stderr);
    } else if (pct / 25 == p->last_pct / 25) {
        return; /* plain lines only when a quarter mark is passed */
    } else {
        fprintf(stderr, "%s: %d%%%s%s\n", p->label, pct, what && *what ? " " : "", what ? what : "");
    }
    p->last_pct = pct;
}

void progress_abort(progress *p)
{
    if (p->tty && p->last_pct >= 0) fputc('\n', stderr);
}

void progress_end(progress *p, const char *summary)
{
    if (p->quiet) return;
    if (p->tty) fprintf(stderr, "\r%-100s\r", "");
    fprintf(stderr, "%s: %s (%.2f s)\n", p->label, summary ? summary : "done", progress_now() - p->t0);
}
