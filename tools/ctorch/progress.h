/* Progress reporting on stderr: a redrawn bar on a terminal, a few plain lines
 * otherwise (logs and CI stay readable). stdout is never touched. */
#ifndef CTORCH_TOOLS_PROGRESS_H
#define CTORCH_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct progress {
    const char *label;
    bool tty;
    int last_pct;   /* last percentage printed (plain mode prints every 25%) */
    double t0;      /* seconds */
} progress;

void progress_begin(progress *p, const char *label);
/* done/total in any unit; `what` names the current item (may be NULL). */
void progress_update(progress *p, int64_t done, int64_t total, const char *what);
void progress_end(progress *p, const char *summary);
double progress_now(void);

#endif
