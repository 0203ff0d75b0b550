/* An in-order work queue run by one worker thread, and events signalled from it:
 * the simulated accelerator's stream. */
#ifndef CTORCH_TEST_QUEUE_H
#define CTORCH_TEST_QUEUE_H

#include <stdbool.h>
#include <stddef.h>

#include "ctorch/core.h"

typedef struct tq tq;
typedef void (*tq_fn)(void *arg); /* runs one command on the worker; frees arg */

tq *tq_new(void);
/* Runs what is queued, then stops the worker and frees the queue. */
void tq_free(tq *q);
/* false when out of memory (nothing queued). */
bool tq_push(tq *q, tq_fn fn, void *arg);

typedef struct tq_event tq_event;
/* A new event with two references: the caller's and the signal's. */
tq_event *tq_event_new(void);
void tq_event_signal(tq_event *e, ct_status err, const char *msg); /* drops the signal's reference */
/* Blocks until signalled; the status it was signalled with (msg gets its message). */
ct_status tq_event_wait(tq_event *e, char *msg, size_t len);
void tq_event_unref(tq_event *e);
tq_event *tq_event_ref(tq_event *e);

#endif
