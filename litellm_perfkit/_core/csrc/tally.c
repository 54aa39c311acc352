/* Tally: every request counted, recorded or not (the counterpart of
 * _traffic._PyTally, the reference).
 *
 * A series is keyed by the tuple (method, route, status, error, streaming,
 * recorded) in a dict that maps it to its row; the rows are one array of
 * u64 counts (PK_TRAFFIC_HEAD_COUNTS, then the duration's buckets and the
 * TTFT's), grown by doubling (series.c). An unrecorded request reaches it
 * through its Passage (passage.c); a recorded one through add_recorded.
 */
#include "traffic.h"

#include <string.h>
#include <structmember.h>

static PyObject *route_name, *path_name;
PyObject *pk_empty_text;

static PyObject *
tally_add(TallyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    int64_t status, duration, ttft;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "add(method, route, status, error, streaming, recorded, duration_ns, ttft_ns) takes 8 arguments");
        return NULL;
    }
    if (!PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "add: method, route and error must be str");
        return NULL;
    }
    int streaming = PyObject_IsTrue(args[4]), recorded = PyObject_IsTrue(args[5]);
    if (streaming < 0 || recorded < 0 || pk_as_int64(args[2], &status) < 0 || pk_as_int64(args[6], &duration) < 0 ||
        pk_as_int64(args[7], &ttft) < 0 ||
        pk_tally_add_values(self, args[0], args[1], status, args[3], streaming, recorded, duration, ttft) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* message[key] or scope[key] (a new reference), None when missing. */
static PyObject *
get(PyObject *message, PyObject *key)
{
    PyObject *value;
    return pk_get_item(message, key, &value) < 0 ? NULL : value != NULL ? value : Py_NewRef(Py_None);
}

PyObject *
pk_tally_route_of(TallyObject *tally, PyObject *scope)
{
    PyObject *route = get(scope, route_name);
    if (route == NULL) {
        return NULL;
    }
    PyObject *path = route == Py_None ? NULL : PyObject_GetAttr(route, path_name);
    Py_DECREF(route);
    if (path == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                return NULL;
            }
            PyErr_Clear();
        }
    }
    else if (PyUnicode_Check(path) && PyUnicode_GET_LENGTH(path) > 0) {
        return path;
    }
    Py_XDECREF(path);
    return Py_NewRef(tally->unmatched_route);
}

/* A recorded request, once its exchange has finished the timeline (tally_recorded's reference,
 * _PyTally.add_recorded): read from the C timeline's fields, no int made. */
static PyObject *
tally_add_recorded(TallyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add_recorded(timeline, scope) takes 2 arguments");
        return NULL;
    }
    PkTimelineObject *timeline = pk_timeline(args[0]);
    if (timeline == NULL) {
        return NULL;
    }
    PyObject *error = timeline->error, *method = timeline->method, *marks = timeline->marks;
    if (error == NULL || method == NULL || marks == NULL || !PyDict_Check(marks)) {
        PyErr_SetString(PyExc_TypeError, "add_recorded: the timeline's error, method or marks is missing");
        return NULL;
    }
    if (error == Py_None) {
        error = pk_empty_text;
    }
    else if (PyUnicode_Check(error) && PyUnicode_Compare(error, pk_names.client_disconnected) == 0) {
        error = self->incomplete; /* as an unrecorded request's would be: its passage does not watch receive */
    }
    int64_t ttft = -1;
    PyObject *first = PyDict_GetItemWithError(marks, pk_names.first_token);
    if (first == NULL ? PyErr_Occurred() != NULL : pk_as_int64(first, &ttft) < 0) {
        return NULL;
    }
    if (first != NULL) {
        ttft -= timeline->start_ns;
    }
    if (!PyUnicode_Check(method) || !PyUnicode_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "add_recorded: the timeline's method and error must be str");
        return NULL;
    }
    PyObject *route = pk_tally_route_of(self, args[1]);
    int failed = route == NULL || pk_tally_add_values(self, method, route, timeline->status, error, timeline->streaming, 1,
                                                   timeline->end_ns - timeline->start_ns, ttft) < 0;
    Py_XDECREF(route);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
tally_series(TallyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(self->keys);
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *counts = PyTuple_New(ROW);
        if (counts == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        for (int i = 0; i < ROW; i++) {
            PyObject *value = PyLong_FromUnsignedLongLong(self->rows[r * ROW + i]);
            if (value == NULL) {
                Py_DECREF(counts);
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(counts, i, value);
        }
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(self->keys, r), counts);
        Py_DECREF(counts);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, r, pair);
    }
    return out;
}

static PyObject *
tally_clear_series(TallyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    PyDict_Clear(self->index);
    if (PyList_SetSlice(self->keys, 0, PyList_GET_SIZE(self->keys), NULL) < 0) {
        return NULL;
    }
    if (self->rows != NULL) {
        memset(self->rows, 0, (size_t)self->capacity * ROW * sizeof(uint64_t));
    }
    pk_tally_forget_recent(self);
    self->requests = 0;
    Py_RETURN_NONE;
}

static PyObject *
tally_passage(TallyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "passage(method, send) takes 2 arguments");
        return NULL;
    }
    return pk_new_passage(self, args[0], args[1]);
}

static int
tally_init(TallyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"known_methods", "other", "unmatched_route", "incomplete_response", "max_series", NULL};
    PyObject *known, *other, *unmatched, *incomplete;
    Py_ssize_t max_series;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!UUUn:Tally", keywords, &PyFrozenSet_Type, &known, &other,
                                     &unmatched, &incomplete, &max_series)) {
        return -1;
    }
    if (self->index != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Tally is initialized once");
        return -1;
    }
    self->index = PyDict_New();
    self->keys = PyList_New(0);
    if (self->index == NULL || self->keys == NULL) {
        return -1;
    }
    self->known_methods = Py_NewRef(known);
    self->other = Py_NewRef(other);
    self->unmatched_route = Py_NewRef(unmatched);
    self->incomplete = Py_NewRef(incomplete);
    self->max_series = max_series;
    return 0;
}

static int
tally_traverse(TallyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->index);
    Py_VISIT(self->keys);
    return 0;
}

static int
tally_clear(TallyObject *self)
{
    Py_CLEAR(self->index);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->known_methods);
    Py_CLEAR(self->other);
    Py_CLEAR(self->unmatched_route);
    Py_CLEAR(self->incomplete);
    pk_tally_forget_recent(self);
    return 0;
}

static void
tally_dealloc(TallyObject *self)
{
    PyObject_GC_UnTrack(self);
    tally_clear(self);
    PyMem_Free(self->rows);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef tally_methods[] = {
    {"add", (PyCFunction)(void (*)(void))tally_add, METH_FASTCALL,
     "add(method, route, status, error, streaming, recorded, duration_ns, ttft_ns): one finished request (ttft_ns < 0: none)."},
    {"add_recorded", (PyCFunction)(void (*)(void))tally_add_recorded, METH_FASTCALL,
     "add_recorded(timeline, scope): a recorded request, once its exchange has finished the timeline."},
    {"passage", (PyCFunction)(void (*)(void))tally_passage, METH_FASTCALL,
     "passage(method, send) -> Passage: the send of an unrecorded request that starts now."},
    {"series", (PyCFunction)tally_series, METH_NOARGS, "series() -> [(key, counts)]: every series, in the order each began."},
    {"clear", (PyCFunction)tally_clear_series, METH_NOARGS, "clear(): forget every series (tests start from nothing)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef tally_members[] = {
    {"requests", T_ULONGLONG, offsetof(TallyObject, requests), READONLY, "requests added so far"},
    {"max_series", T_PYSSIZET, offsetof(TallyObject, max_series), 0, "series kept apart; the rest fold into one"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PkTally_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Tally",
    .tp_basicsize = sizeof(TallyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Tally(known_methods, other, unmatched_route, incomplete_response, max_series): every request's "
              "count and histograms by series (see _traffic._PyTally).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)tally_init,
    .tp_dealloc = (destructor)tally_dealloc,
    .tp_traverse = (traverseproc)tally_traverse,
    .tp_clear = (inquiry)tally_clear,
    .tp_methods = tally_methods,
    .tp_members = tally_members,
};

int
pk_traffic_ready(void)
{
    route_name = PyUnicode_InternFromString("route");
    path_name = PyUnicode_InternFromString("path");
    pk_empty_text = PyUnicode_InternFromString("");
    if (!route_name || !path_name || !pk_empty_text || pk_passage_ready() < 0) {
        return -1;
    }
    return PyType_Ready(&PkTally_Type);
}
