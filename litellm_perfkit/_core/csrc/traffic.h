/* The traffic tally (tally.c, its series in series.c) and an unrecorded
 * request's send (passage.c): the tally's object and what each file calls
 * of another's.
 */
#ifndef PERFKIT_TRAFFIC_H
#define PERFKIT_TRAFFIC_H
#include "speedups.h"

#define BUCKETS PK_BUCKETS
#define ROW (PK_TRAFFIC_HEAD_COUNTS + 2 * BUCKETS) /* a series' counts: its head, then both histograms' buckets */

/* A key recently added and its row: most requests repeat one of a few
 * series, and comparing the key's parts to a recent one's costs far less
 * than making the key tuple, hashing it and looking it up (about 500
 * instructions a request: benchmarks/middleware_overhead.py). The texts are
 * exact str, held. The row a key maps to never changes until clear(). */
#define RECENT 4

typedef struct {
    PyObject *method, *route, *error; /* NULL: an empty entry */
    int64_t status;
    char streaming, recorded;
    Py_ssize_t row;
} Recent;

typedef struct {
    PyObject_HEAD
    PyObject *index;            /* dict: key tuple -> row number (int) */
    PyObject *keys;             /* list: each row's key, in order */
    PyObject *known_methods;    /* frozenset of method names kept as they are */
    PyObject *other;            /* "_OTHER" */
    PyObject *unmatched_route;  /* the route of a request no route matched */
    PyObject *incomplete;       /* the error type of a response the app never finished */
    uint64_t *rows;
    Py_ssize_t capacity;        /* rows allocated */
    Py_ssize_t max_series;
    unsigned long long requests;
    Recent recent[RECENT];      /* the rows of the last keys added */
    int recent_next;            /* the entry the next new key replaces */
} TallyObject;

/* One finished request into its series; ttft < 0: none. 0, or -1 with an exception set (series.c). */
int pk_tally_add_values(TallyObject *self, PyObject *method, PyObject *route, int64_t status, PyObject *error,
                        int streaming, int recorded, int64_t duration, int64_t ttft);
/* The matched route's template in scope (a new reference), or the unmatched route's label (tally.c). */
PyObject *pk_tally_route_of(TallyObject *tally, PyObject *scope);
/* The recent keys forgotten (tally.c clears its series; series.c). */
void pk_tally_forget_recent(TallyObject *self);
/* "", the error type of a request that ended well (tally.c). */
extern PyObject *pk_empty_text;
/* tally's send of a request that starts now, the app's method and the server's send (passage.c). */
PyObject *pk_new_passage(TallyObject *tally, PyObject *method, PyObject *send);
/* Passage's type and names ready; -1 with an exception set (passage.c). */
int pk_passage_ready(void);

#endif
