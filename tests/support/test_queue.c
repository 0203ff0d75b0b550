#include "test_queue.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct tq_item {
    tq_fn fn;
    void *arg;
    struct tq_item *next;
} tq_item;

struct tq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    tq_item *head, *tail;
    bool stop;
    pthread_t th;
};

static void *worker(void *arg)
{
    tq *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        tq_item *it = q->head;
        if (!it) break; /* stopping and drained */
        q->head = it->next;
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        it->fn(it->arg);
        free(it);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

tq *tq_new(void)
{
    tq *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    if (pthread_create(&q->th, NULL, worker, q) != 0) {
        free(q);
        return NULL;
    }
    return q;
}

void tq_free(tq *q)
{
    if (!q) return;
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
    free(q);
}

bool tq_push(tq *q, tq_fn fn, void *arg)
{
    tq_item *it = malloc(sizeof *it);
    if (!it) return false;
    it->fn = fn, it->arg = arg, it->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->tail) q->tail->next = it;
    else q->head = it;
    q->tail = it;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return true;
}

struct tq_event {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    ct_status err;
    char msg[200];
    int refcnt;
};

tq_event *tq_event_new(void)
{
    tq_event *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    e->refcnt = 2;
    return e;
}

tq_event *tq_event_ref(tq_event *e)
{
    __atomic_fetch_add(&e->refcnt, 1, __ATOMIC_RELAXED);
    return e;
}

void tq_event_unref(tq_event *e)
{
    if (!e || __atomic_fetch_sub(&e->refcnt, 1, __ATOMIC_ACQ_REL) != 1) return;
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e);
}

void tq_event_signal(tq_event *e, ct_status err, const char *msg)
{
    pthread_mutex_lock(&e->mu);
    e->done = true;
    e->err = err;
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "");
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    tq_event_unref(e);
}

ct_status tq_event_wait(tq_event *e, char *msg, size_t len)
{
    pthread_mutex_lock(&e->mu);
    while (!e->done) pthread_cond_wait(&e->cv, &e->mu);
    ct_status err = e->err;
    if (msg && len) snprintf(msg, len, "%s", e->msg);
    pthread_mutex_unlock(&e->mu);
    return err;
}
