/* split_windows: the export side's time split (_export/_split.py, the
 * reference) in C. From a request's steps (early, late, start, end each),
 * the time any step ran, was surely ready, or may have been ready, as
 * disjoint interval sets, then each window's overlap with each set, and
 * the CPU of thread calls inside a window moved from its I/O wait to its
 * CPU. In Python it cost the export agent ~100 us a request, as much as
 * building and encoding all its spans. Needs nothing from setup(). */
#include "speedups.h"

#include <stddef.h>
#include <stdlib.h>

typedef struct {
    int64_t s, e;
} Interval;

typedef struct {
    Interval *v;
    int64_t *before; /* before[i]: the total length of v[0..i) */
    Py_ssize_t n;
} Set;

static int
by_start(const void *a, const void *b)
{
    const Interval *x = a, *y = b;
    if (x->s != y->s) {
        return x->s < y->s ? -1 : 1;
    }
    return x->e < y->e ? -1 : (x->e > y->e);
}

/* Sorted and merged in place (empty ones dropped); the new count. */
static Py_ssize_t
merge(Interval *v, Py_ssize_t n)
{
    qsort(v, (size_t)n, sizeof(Interval), by_start);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (v[i].e <= v[i].s) {
            continue;
        }
        if (k > 0 && v[i].s <= v[k - 1].e) {
            if (v[i].e > v[k - 1].e) {
                v[k - 1].e = v[i].e;
            }
        }
        else {
            v[k++] = v[i];
        }
    }
    return k;
}

/* out = a less r (both sorted and disjoint); out has room for na + nr. */
static Py_ssize_t
minus(const Interval *a, Py_ssize_t na, const Interval *r, Py_ssize_t nr, Interval *out)
{
    Py_ssize_t n = 0, k = 0;
    for (Py_ssize_t i = 0; i < na; i++) {
        int64_t s = a[i].s, e = a[i].e;
        while (k < nr && r[k].e <= s) {
            k++;
        }
        for (Py_ssize_t j = k; s < e && j < nr && r[j].s < e; j++) {
            if (r[j].s > s) {
                out[n++] = (Interval){s, r[j].s};
            }
            if (r[j].e > s) {
                s = r[j].e;
            }
        }
        if (s < e) {
            out[n++] = (Interval){s, e};
        }
    }
    return n;
}

static int
set_init(Set *set, Interval *v, Py_ssize_t n)
{
    set->v = v;
    set->n = n;
    set->before = PyMem_Malloc(sizeof(int64_t) * (size_t)(n + 1));
    if (set->before == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    set->before[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        set->before[i + 1] = set->before[i] + (v[i].e - v[i].s);
    }
    return 0;
}

/* How many of the set's intervals have their field (start or end, at
 * ``offset``) at most ``bound``: bisect_right over that sorted field. */
static Py_ssize_t
count_at_most(const Set *set, size_t offset, int64_t bound)
{
    Py_ssize_t lo = 0, hi = set->n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (*(const int64_t *)((const char *)&set->v[mid] + offset) <= bound) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo;
}

/* The length of [a, b) inside the set. */
static int64_t
measure(const Set *set, int64_t a, int64_t b)
{
    if (b <= a || set->n == 0) {
        return 0;
    }
    Py_ssize_t first = count_at_most(set, offsetof(Interval, e), a); /* the first interval ending after a */
    Py_ssize_t last = count_at_most(set, offsetof(Interval, s), b);  /* intervals starting at or before b */
    if (first >= last) {
        return 0;
    }
    int64_t inside = set->before[last] - set->before[first];
    if (a > set->v[first].s) {
        inside -= a - set->v[first].s;
    }
    if (set->v[last - 1].e > b) {
        inside -= set->v[last - 1].e - b;
    }
    return inside;
}

static int
read_ints(PyObject *list, const char *what, int64_t **out, Py_ssize_t *n)
{
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "split_windows: %s must be a list of ints", what);
        return -1;
    }
    *n = PyList_GET_SIZE(list);
    *out = PyMem_Malloc(sizeof(int64_t) * (size_t)(*n + 1));
    if (*out == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t i = 0; i < *n; i++) {
        if (pk_as_int64(PyList_GET_ITEM(list, i), &(*out)[i]) < 0) {
            return -1;
        }
    }
    return 0;
}

/* A 4-tuple of ``cls`` (a tuple subclass, such as a NamedTuple), or a tuple. */
static PyObject *
four(PyTypeObject *cls, int64_t a, int64_t b, int64_t c, int64_t d)
{
    PyObject *out = cls == NULL ? PyTuple_New(4) : cls->tp_alloc(cls, 4);
    if (out == NULL) {
        return NULL;
    }
    int64_t values[4] = {a, b, c, d};
    for (Py_ssize_t i = 0; i < 4; i++) {
        PyObject *value = PyLong_FromLongLong((long long)values[i]);
        if (value == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyTuple_SET_ITEM(out, i, value);
    }
    return out;
}

PyObject *
pk_split_windows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 2 || nargs > 4) {
        PyErr_SetString(PyExc_TypeError, "split_windows(steps, windows[, calls[, cls]]) takes 2 to 4 arguments");
        return NULL;
    }
    PyTypeObject *cls = NULL;
    if (nargs == 4 && args[3] != Py_None) {
        if (!PyType_Check(args[3]) || !PyType_IsSubtype((PyTypeObject *)args[3], &PyTuple_Type)) {
            PyErr_SetString(PyExc_TypeError, "split_windows: cls must be a subclass of tuple");
            return NULL;
        }
        cls = (PyTypeObject *)args[3];
    }
    int64_t *steps = NULL, *windows = NULL, *calls = NULL;
    Interval *memory = NULL;
    Set running = {0}, queued = {0}, maybe = {0};
    PyObject *result = NULL;
    Py_ssize_t nsteps, nwindows, ncalls = 0;
    if (read_ints(args[0], "steps", &steps, &nsteps) < 0 || read_ints(args[1], "windows", &windows, &nwindows) < 0) {
        goto done;
    }
    if (nargs >= 3 && args[2] != Py_None && read_ints(args[2], "calls", &calls, &ncalls) < 0) {
        goto done;
    }
    Py_ssize_t n = nsteps / 4;
    /* The raw running, ready and maybe-ready intervals (n each), then queued
     * (ready less running: at most 2n), maybe less running (2n) and less
     * queued (4n). */
    memory = PyMem_Malloc(sizeof(Interval) * (size_t)(11 * n + 1));
    if (memory == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Interval *run = memory, *ready = memory + n, *may = memory + 2 * n, *queued_v = memory + 3 * n, *tmp = memory + 5 * n;
    Interval *maybe_v = memory + 7 * n;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t *step = steps + 4 * i; /* early, late, start, end */
        run[i] = (Interval){step[2], step[3]};
        ready[i] = (Interval){step[1], step[2]};
        may[i] = (Interval){step[0], step[1]};
    }
    Py_ssize_t nrun = merge(run, n), nready = merge(ready, n), nmay = merge(may, n);
    Py_ssize_t nqueued = minus(ready, nready, run, nrun, queued_v);
    Py_ssize_t ntmp = minus(may, nmay, run, nrun, tmp);
    Py_ssize_t nmaybe = minus(tmp, ntmp, queued_v, nqueued, maybe_v);
    if (set_init(&running, run, nrun) < 0 || set_init(&queued, queued_v, nqueued) < 0 || set_init(&maybe, maybe_v, nmaybe) < 0) {
        goto done;
    }
    result = PyList_New(nwindows / 2);
    if (result == NULL) {
        goto done;
    }
    for (Py_ssize_t w = 0; w + 1 < nwindows; w += 2) {
        int64_t a = windows[w], b = windows[w + 1];
        int64_t cpu = measure(&running, a, b), queue = measure(&queued, a, b), unsure = measure(&maybe, a, b);
        queue += unsure / 2;
        int64_t io = b - a - cpu - queue;
        if (io < 0) {
            io = 0;
        }
        for (Py_ssize_t c = 0; c + 2 < ncalls; c += 3) { /* start, end, the thread's CPU */
            if (a <= calls[c] && calls[c + 1] <= b) {
                int64_t shift = calls[c + 2] < io ? calls[c + 2] : io;
                cpu += shift;
                io -= shift;
            }
        }
        PyObject *part = four(cls, cpu, queue, io, unsure - unsure / 2);
        if (part == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, w / 2, part);
    }
done:
    PyMem_Free(steps);
    PyMem_Free(windows);
    PyMem_Free(calls);
    PyMem_Free(memory);
    PyMem_Free(running.before);
    PyMem_Free(queued.before);
    PyMem_Free(maybe.before);
    return result;
}
