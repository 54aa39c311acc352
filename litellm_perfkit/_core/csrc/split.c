/* split_windows: the export side's time split (_export/_split.py, the
 * reference) in C. From a request's steps (early, late, start, end, cpu
 * each), the time any step ran, was surely ready, or may have been ready, as
 * disjoint interval sets, then each window's overlap with each set, the
 * steps' CPU in it (each step's spread over it; the rest of the time it ran
 * is queueing), and the CPU of thread calls inside a window moved from its
 * I/O wait to its CPU. In Python it cost the export agent ~100 us a request, as much as
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

/* How many of ``n`` records ``stride`` bytes apart have their int64 field at
 * ``offset`` (an interval's start or end) at most ``bound``: bisect_right over
 * that sorted field, for both kinds of interval set. */
static Py_ssize_t
count_at_most(const void *records, Py_ssize_t n, size_t stride, size_t offset, int64_t bound)
{
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (*(const int64_t *)((const char *)records + (size_t)mid * stride + offset) <= bound) {
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
    /* the first interval ending after a; the intervals starting at or before b */
    Py_ssize_t first = count_at_most(set->v, set->n, sizeof(Interval), offsetof(Interval, e), a);
    Py_ssize_t last = count_at_most(set->v, set->n, sizeof(Interval), offsetof(Interval, s), b);
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

/* The steps' CPU (_split._CpuIntervals): disjoint, sorted, each with its step's CPU spread over it. */
typedef struct {
    int64_t s, e, cpu;
} CpuInterval;

typedef struct {
    CpuInterval *v;
    int64_t *before; /* before[i]: the CPU of v[0..i) */
    Py_ssize_t n;
} CpuSet;

static int
cpu_by_start(const void *a, const void *b)
{
    const CpuInterval *x = a, *y = b;
    if (x->s != y->s) {
        return x->s < y->s ? -1 : 1;
    }
    if (x->e != y->e) {
        return x->e < y->e ? -1 : 1;
    }
    return x->cpu < y->cpu ? -1 : (x->cpu > y->cpu);
}

/* cpu * length / span, rounded down, without overflow (all non-negative, span > 0). */
static int64_t
scaled(int64_t cpu, int64_t length, int64_t span)
{
#ifdef __SIZEOF_INT128__
    return (int64_t)((__int128)cpu * length / span);
#else
    return (int64_t)((long double)cpu * (long double)length / (long double)span);
#endif
}

/* Sorted, overlaps cut (the later step keeps its CPU in proportion), empty ones dropped, in place. */
static int
cpu_set_init(CpuSet *set, CpuInterval *v, Py_ssize_t n)
{
    qsort(v, (size_t)n, sizeof(CpuInterval), cpu_by_start);
    Py_ssize_t k = 0;
    int64_t last_end = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = v[i].s, e = v[i].e, cpu = v[i].cpu;
        int64_t cut = k == 0 || s >= last_end ? s : last_end;
        if (e <= cut) {
            continue;
        }
        cpu = cpu < 0 ? e - s : (cpu < e - s ? cpu : e - s); /* -1: the wall clock's step */
        if (cut > s) {
            cpu = scaled(cpu, e - cut, e - s);
        }
        v[k++] = (CpuInterval){cut, e, cpu};
        last_end = e;
    }
    set->v = v;
    set->n = k;
    set->before = PyMem_Malloc(sizeof(int64_t) * (size_t)(k + 1));
    if (set->before == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    set->before[0] = 0;
    for (Py_ssize_t i = 0; i < k; i++) {
        set->before[i + 1] = set->before[i] + v[i].cpu;
    }
    return 0;
}

/* The steps' CPU inside [a, b). */
static int64_t
cpu_measure(const CpuSet *set, int64_t a, int64_t b)
{
    if (b <= a || set->n == 0) {
        return 0;
    }
    Py_ssize_t first = count_at_most(set->v, set->n, sizeof(CpuInterval), offsetof(CpuInterval, e), a);
    Py_ssize_t last = count_at_most(set->v, set->n, sizeof(CpuInterval), offsetof(CpuInterval, s), b);
    if (first >= last) {
        return 0;
    }
    int64_t inside = set->before[last] - set->before[first];
    const CpuInterval *f = &set->v[first], *l = &set->v[last - 1];
    if (a > f->s) {
        inside -= scaled(f->cpu, a - f->s, f->e - f->s);
    }
    if (l->e > b) {
        inside -= scaled(l->cpu, l->e - b, l->e - l->s);
    }
    return inside > 0 ? inside : 0;
}

Py_ssize_t
pk_union(int64_t *pairs, Py_ssize_t n)
{
    return n == 0 ? 0 : merge((Interval *)pairs, n); /* Interval is two int64_t: the pairs' layout */
}

int
pk_read_ints(PyObject *list, const char *what, int64_t **out, Py_ssize_t *n)
{
    *out = NULL;
    if (!PyList_Check(list)) {
        PyErr_Format(PyExc_TypeError, "%s must be a list of ints", what);
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

PyObject *
pk_four(PyTypeObject *cls, int64_t a, int64_t b, int64_t c, int64_t d)
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

int
pk_split_core(const int64_t *steps, Py_ssize_t nsteps, const int64_t *windows, Py_ssize_t nwindows, const int64_t *calls,
              Py_ssize_t ncalls, int64_t *out)
{
    Interval *memory = NULL;
    CpuInterval *cpu_v = NULL;
    Set running = {0}, queued = {0}, maybe = {0};
    CpuSet stepped = {0};
    int result = -1;
    Py_ssize_t n = nsteps / 5;
    /* The raw running, ready and maybe-ready intervals (n each), then queued
     * (ready less running: at most 2n), maybe less running (2n) and less
     * queued (4n). */
    memory = PyMem_Malloc(sizeof(Interval) * (size_t)(11 * n + 1));
    cpu_v = PyMem_Malloc(sizeof(CpuInterval) * (size_t)(n + 1));
    if (memory == NULL || cpu_v == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Interval *run = memory, *ready = memory + n, *may = memory + 2 * n, *queued_v = memory + 3 * n, *tmp = memory + 5 * n;
    Interval *maybe_v = memory + 7 * n;
    for (Py_ssize_t i = 0; i < n; i++) {
        const int64_t *step = steps + 5 * i; /* early, late, start, end, cpu */
        run[i] = (Interval){step[2], step[3]};
        cpu_v[i] = (CpuInterval){step[2], step[3], step[4]};
        ready[i] = (Interval){step[1], step[2]};
        may[i] = (Interval){step[0], step[1]};
    }
    Py_ssize_t nrun = merge(run, n), nready = merge(ready, n), nmay = merge(may, n);
    Py_ssize_t nqueued = minus(ready, nready, run, nrun, queued_v);
    Py_ssize_t ntmp = minus(may, nmay, run, nrun, tmp);
    Py_ssize_t nmaybe = minus(tmp, ntmp, queued_v, nqueued, maybe_v);
    if (set_init(&running, run, nrun) < 0 || set_init(&queued, queued_v, nqueued) < 0 || set_init(&maybe, maybe_v, nmaybe) < 0
        || cpu_set_init(&stepped, cpu_v, n) < 0) {
        goto done;
    }
    for (Py_ssize_t w = 0; w + 1 < nwindows; w += 2) {
        int64_t a = windows[w], b = windows[w + 1];
        int64_t ran = measure(&running, a, b), queue = measure(&queued, a, b), unsure = measure(&maybe, a, b);
        int64_t cpu = cpu_measure(&stepped, a, b);
        if (cpu > ran) {
            cpu = ran;
        }
        queue += ran - cpu + unsure / 2; /* a step's wall time off the CPU: ready, not running */
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
        int64_t *part = out + 2 * w; /* 4 per window */
        part[0] = cpu;
        part[1] = queue;
        part[2] = io;
        part[3] = unsure - unsure / 2;
    }
    result = 0;
done:
    PyMem_Free(memory);
    PyMem_Free(cpu_v);
    PyMem_Free(stepped.before);
    PyMem_Free(running.before);
    PyMem_Free(queued.before);
    PyMem_Free(maybe.before);
    return result;
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
    int64_t *steps = NULL, *windows = NULL, *calls = NULL, *parts = NULL;
    PyObject *result = NULL;
    Py_ssize_t nsteps, nwindows, ncalls = 0;
    if (pk_read_ints(args[0], "split_windows: steps", &steps, &nsteps) < 0 || pk_read_ints(args[1], "split_windows: windows", &windows, &nwindows) < 0) {
        goto done;
    }
    if (nargs >= 3 && args[2] != Py_None && pk_read_ints(args[2], "split_windows: calls", &calls, &ncalls) < 0) {
        goto done;
    }
    parts = PyMem_Malloc(sizeof(int64_t) * (size_t)(2 * nwindows + 4));
    if (parts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (pk_split_core(steps, nsteps, windows, nwindows, calls, ncalls, parts) < 0) {
        goto done;
    }
    result = PyList_New(nwindows / 2);
    if (result == NULL) {
        goto done;
    }
    for (Py_ssize_t w = 0; w < nwindows / 2; w++) {
        const int64_t *part = parts + 4 * w;
        PyObject *split = pk_four(cls, part[0], part[1], part[2], part[3]);
        if (split == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, w, split);
    }
done:
    PyMem_Free(steps);
    PyMem_Free(windows);
    PyMem_Free(calls);
    PyMem_Free(parts);
    return result;
}
