/* Progress reporting on stderr: a redrawn bar on a terminal, otherwise plain
 * lines at 0% and at each quarter mark (logs and CI stay readable). Silent when
 * CTORCH_LOG hides info lines. stdout is never touched. */
#ifndef CTORCH_TOOLS_PROGRESS_H
#define CTORCH_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct progress {
    const char *label;
    bool tty;
    bool quiet;     /* CTORCH_LOG above info: nothing printed */
    int last_pct;   /* last percentage printed (plain mode prints every 25%) */
    double t0;      /* seconds */
} progress;

void progress_begin(progress *p, const char *label);
/* done/total in any unit; `what` names the current item (may be NULL). */
void progress_update(progress *p, int64_t done, int64_t total, const char *what);
void progress_end(progress *p, const char *summary);
/* Ends a bar cut short by an error, so the error starts on its own line. */
void progress_abort(progress *p);
double progress_now(void);

#endif
