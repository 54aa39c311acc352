/* time_split: a request's time and each stage's, split into CPU, queueing
 * and I/O wait, the counterpart of _export/_split.time_split (the
 * reference). It gathers every window (the request, the app's time after
 * its last byte, each block stage, each sum stage's calls, the top-level
 * block stages' union), splits them all in one pass (pk_split_core) and
 * assembles the parts. In Python, gathering and assembling cost the export
 * agent about four times the split itself. */
#include "speedups.h"

#include <string.h>

typedef enum { BLOCK, SUM, THREAD, GENERATOR } Kind;

typedef struct {
    Kind kind;
    int outside;  /* before the app or after the response: outside the request's wall time */
    int protocol; /* the server's protocol work: a thread call whose CPU is not the request's */
    int64_t start, end, parent, own;
    int64_t *intervals;
    Py_ssize_t nintervals;
} StageTimes;

typedef struct {
    int64_t *v;
    Py_ssize_t n, cap;
} Ints;

static int
push(Ints *ints, int64_t a, int64_t b)
{
    if (ints->n + 2 > ints->cap) {
        void *data = ints->v;
        size_t capacity = (size_t)ints->cap * sizeof(int64_t);
        if (pk_reserve(&data, &capacity, (size_t)(ints->n + 2) * sizeof(int64_t), 64 * sizeof(int64_t)) < 0) {
            return -1;
        }
        ints->v = data;
        ints->cap = (Py_ssize_t)(capacity / sizeof(int64_t));
    }
    ints->v[ints->n++] = a;
    ints->v[ints->n++] = b;
    return 0;
}

/* A stage record's fields that the split reads; -1 with an exception set. */
static int
read_stage(PyObject *stage, PyObject *outside, PyObject *protocol, StageTimes *out)
{
    PyObject *kind = PyObject_GetAttr(stage, pk_names.kind);
    PyObject *name = kind == NULL ? NULL : PyObject_GetAttr(stage, pk_names.name);
    PyObject *intervals = name == NULL ? NULL : PyObject_GetAttr(stage, pk_names.intervals);
    int result = -1;
    if (intervals == NULL) {
        goto done;
    }
    if (!PyUnicode_Check(kind) || !PyTuple_Check(intervals)) {
        PyErr_SetString(PyExc_TypeError, "time_split: a stage's kind is a str and its intervals a tuple");
        goto done;
    }
    out->kind = PyUnicode_CompareWithASCIIString(kind, "block") == 0    ? BLOCK
                : PyUnicode_CompareWithASCIIString(kind, "thread") == 0 ? THREAD
                : PyUnicode_CompareWithASCIIString(kind, "generator") == 0 ? GENERATOR
                                                                           : SUM; /* the reference's last branch */
    out->outside = PySet_Contains(outside, name);
    out->protocol = out->outside < 0 ? -1 : PyObject_RichCompareBool(name, protocol, Py_EQ);
    if (out->protocol < 0 || pk_int64_attribute(stage, pk_names.start_ns, &out->start) < 0 ||
        pk_int64_attribute(stage, pk_names.end_ns, &out->end) < 0 || pk_int64_attribute(stage, pk_names.parent, &out->parent) < 0 ||
        pk_int64_attribute(stage, pk_names.self_ns, &out->own) < 0) {
        goto done;
    }
    out->nintervals = PyTuple_GET_SIZE(intervals);
    out->intervals = PyMem_Malloc(sizeof(int64_t) * (size_t)(out->nintervals + 1));
    if (out->intervals == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < out->nintervals; i++) {
        if (pk_as_int64(PyTuple_GET_ITEM(intervals, i), &out->intervals[i]) < 0) {
            goto done;
        }
    }
    result = 0;
done:
    Py_XDECREF(kind);
    Py_XDECREF(name);
    Py_XDECREF(intervals);
    return result;
}

static PyObject *
split_of(PyTypeObject *cls, const int64_t *part)
{
    return pk_four(cls, part[0], part[1], part[2], part[3]);
}

/* time_split(stages, steps, start_ns, end_ns, after_last_byte_ns, outside, protocol, split_cls, time_split_cls) */
PyObject *
pk_time_split(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 || !PyTuple_Check(args[0]) || !PyList_Check(args[1]) || !PyAnySet_Check(args[5]) || !PyType_Check(args[7]) ||
        !PyType_IsSubtype((PyTypeObject *)args[7], &PyTuple_Type) || !PyType_Check(args[8]) ||
        !PyType_IsSubtype((PyTypeObject *)args[8], &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "time_split(stages: tuple, steps: list, start_ns, end_ns, after_last_byte_ns, "
                                         "outside: frozenset, protocol: str, split_cls, time_split_cls)");
        return NULL;
    }
    PyObject *stages = args[0], *outside = args[5], *protocol = args[6];
    PyTypeObject *split_cls = (PyTypeObject *)args[7], *time_split_cls = (PyTypeObject *)args[8];
    Py_ssize_t count = PyTuple_GET_SIZE(stages), nsteps;
    int64_t start, wall_end, after;
    if (pk_as_int64(args[2], &start) < 0 || pk_as_int64(args[3], &wall_end) < 0 || pk_as_int64(args[4], &after) < 0) {
        return NULL;
    }
    StageTimes *times = PyMem_Calloc((size_t)count + 1, sizeof(StageTimes));
    int64_t *steps = NULL;
    int64_t *stage_parts = PyMem_Malloc(sizeof(int64_t) * (size_t)(4 * count + 4));
    Ints windows = {0}, top = {0}, calls = {0};
    int64_t *parts = NULL;
    PyObject *result = NULL, *stage_splits = NULL;
    if (times == NULL || stage_parts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (pk_read_ints(args[1], "time_split: steps", &steps, &nsteps) < 0) {
        goto done;
    }
    if (push(&windows, start, wall_end) < 0 || push(&windows, wall_end, wall_end + after) < 0) {
        goto done;
    }
    for (Py_ssize_t n = 0; n < count; n++) {
        StageTimes *stage = &times[n];
        if (read_stage(PyTuple_GET_ITEM(stages, n), outside, protocol, stage) < 0) {
            goto done;
        }
        if (stage->kind == BLOCK) {
            int64_t end = stage->end ? stage->end : wall_end;
            if (push(&windows, stage->start, end) < 0 ||
                (stage->parent < 0 && !stage->outside && push(&top, stage->start, end < wall_end ? end : wall_end) < 0)) {
                goto done;
            }
        }
        else if (stage->kind == SUM) {
            for (Py_ssize_t i = 0; i + 1 < stage->nintervals; i += 2) {
                if (push(&windows, stage->intervals[i], stage->intervals[i + 1]) < 0) {
                    goto done;
                }
            }
        }
        else if (stage->kind == THREAD) {
            /* The request's thread calls, not the server's protocol work (its CPU is the protocol stage's). */
            for (Py_ssize_t i = 0; !stage->protocol && i + 2 < stage->nintervals; i += 3) {
                if (push(&calls, stage->intervals[i], stage->intervals[i + 1]) < 0 || push(&calls, stage->intervals[i + 2], 0) < 0) {
                    goto done;
                }
                calls.n--; /* three a call: the pad is dropped */
            }
        }
    }
    Py_ssize_t nblocks = pk_union(top.v, top.n / 2);
    for (Py_ssize_t b = 0; b < nblocks; b++) {
        if (push(&windows, top.v[2 * b], top.v[2 * b + 1]) < 0) {
            goto done;
        }
    }
    parts = PyMem_Malloc(sizeof(int64_t) * (size_t)(2 * windows.n + 4));
    if (parts == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (pk_split_core(steps, nsteps - nsteps % 5, windows.v, windows.n, calls.v, calls.n, parts) < 0) {
        goto done;
    }
    const int64_t *request = parts, *after_part = parts + 4;
    Py_ssize_t next = 2; /* the next window's part */
    int64_t covered[4] = {0, 0, 0, 0};
    for (Py_ssize_t n = 0; n < count; n++) {
        const StageTimes *stage = &times[n];
        int64_t *part = stage_parts + 4 * n;
        part[0] = part[1] = part[2] = part[3] = 0;
        if (stage->kind == BLOCK) {
            memcpy(part, parts + 4 * next++, 4 * sizeof(int64_t));
            continue;
        }
        if (stage->kind == GENERATOR) { /* its own time is its code running: CPU */
            part[0] = stage->own;
        }
        else if (stage->kind == THREAD) {
            int64_t duration = 0;
            for (Py_ssize_t i = 0; i < stage->nintervals; i++) {
                duration += i % 3 == 1 ? stage->intervals[i] : i % 3 == 0 ? -stage->intervals[i] : 0;
            }
            part[0] = stage->own;
            part[2] = duration - stage->own > 0 ? duration - stage->own : 0;
        }
        else if (stage->nintervals / 2 == 0) {
            part[2] = stage->own;
        }
        else {
            for (Py_ssize_t call = 0; call < stage->nintervals / 2; call++, next++) {
                for (int i = 0; i < 4; i++) {
                    part[i] += parts[4 * next + i];
                }
            }
        }
        /* Outside every top-level block stage (a stream's loop after the LLM call returned): its own part of the remainder. */
        int inside = 0;
        for (Py_ssize_t b = 0; b < nblocks && !inside; b++) {
            inside = top.v[2 * b] <= stage->start && stage->end <= top.v[2 * b + 1];
        }
        if (!stage->outside && stage->start < wall_end && !inside) {
            for (int i = 0; i < 4; i++) {
                covered[i] += part[i];
            }
        }
    }
    for (; next < windows.n / 2; next++) { /* the top-level block stages' union */
        for (int i = 0; i < 4; i++) {
            covered[i] += parts[4 * next + i];
        }
    }
    int64_t remainder[4];
    for (int i = 0; i < 4; i++) {
        remainder[i] = request[i] - covered[i] > 0 ? request[i] - covered[i] : 0;
    }
    stage_splits = PyList_New(count);
    if (stage_splits == NULL) {
        goto done;
    }
    for (Py_ssize_t n = 0; n < count; n++) {
        PyObject *split = split_of(split_cls, stage_parts + 4 * n);
        if (split == NULL) {
            goto done;
        }
        PyList_SET_ITEM(stage_splits, n, split);
    }
    PyObject *whole = split_of(split_cls, request), *rest = split_of(split_cls, remainder);
    PyObject *after_split = after > 0 ? split_of(split_cls, after_part) : Py_NewRef(Py_None);
    result = whole == NULL || rest == NULL || after_split == NULL ? NULL : time_split_cls->tp_alloc(time_split_cls, 4);
    if (result == NULL) {
        Py_XDECREF(whole);
        Py_XDECREF(rest);
        Py_XDECREF(after_split);
        goto done;
    }
    PyTuple_SET_ITEM(result, 0, whole);
    PyTuple_SET_ITEM(result, 1, Py_NewRef(stage_splits));
    PyTuple_SET_ITEM(result, 2, rest);
    PyTuple_SET_ITEM(result, 3, after_split);
done:
    if (times != NULL) {
        for (Py_ssize_t n = 0; n < count; n++) {
            PyMem_Free(times[n].intervals);
        }
    }
    Py_XDECREF(stage_splits);
    PyMem_Free(times);
    PyMem_Free(steps);
    PyMem_Free(stage_parts);
    PyMem_Free(windows.v);
    PyMem_Free(top.v);
    PyMem_Free(calls.v);
    PyMem_Free(parts);
    return result;
}
