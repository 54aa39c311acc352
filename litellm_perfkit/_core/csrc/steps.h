/* Step accounting's shared object (batches.c, steps.c): one event loop's
 * batch clock, which the StepClocks of the tasks on that loop update.
 */
#ifndef PERFKIT_STEPS_H
#define PERFKIT_STEPS_H
#include "speedups.h"

typedef struct {
    PyObject_HEAD
    PyObject *loop;
    PyObject *call_soon; /* loop.call_soon, bound once */
    PyObject *mark;      /* self.mark, bound once (a cycle the collector sees) */
    PyObject *context;   /* empty: the context perfkit's callbacks on this loop run in (_steps._Batches) */
    PyObject *queue;     /* queues the marker without call_soon, or NULL (_steps.marker_queue) */
    int64_t start_ns;    /* when the current batch of ready callbacks began */
    int64_t previous_ns; /* when the batch before it began */
    int64_t steps;       /* request steps since the marker was queued */
    int armed;           /* a marker is queued */
    char thread_cpu;     /* PERFKIT_STEPS=cpu: each step's CPU from the thread's CPU clock */
    /* PERFKIT_STEPS=cpu: when the last step ended, by the wall clock and the thread's CPU clock (-1: none yet),
     * the CPU a stage named since then (the server's parsing), and the steps running now. */
    int64_t end_ns, cpu_end_ns, claimed_ns;
    int64_t running;
} BatchesObject;

/* A step ran while no marker was queued: a busy period begins, in a batch that started about now.
 * 0, or -1 with an exception set (the next step tries again). */
int pk_batches_arm(BatchesObject *self, int64_t now);
/* PERFKIT_STEPS=cpu: the loop thread's CPU between two steps into the running request's event_loop stage
 * (cpu: the thread's clock as the step at start begins). Reports its own failure. */
void pk_batches_charge_gap(BatchesObject *batches, int64_t start, int64_t cpu);
/* Batches' type ready; -1 with an exception set. */
int pk_batches_ready(void);

#endif
