/* stage_spans(...): the export agent's span of each stage of a request, the
 * counterpart of _export/_spans._stage_spans_python (the specification, and
 * what runs without the accelerator). A request has ~22 stages; building
 * their attribute lists and span tuples in Python was about a seventh of
 * the agent's CPU per request, twice what this takes (docs/overhead.md). */
#include "speedups.h"

enum { DURATION, SELF, CPU, QUEUE, IO, UNCERTAIN, KIND, ITEMS, NKEYS };

static int
append_pair(PyObject *attributes, PyObject *key, PyObject *value)
{
    PyObject *pair = PyTuple_Pack(2, key, value);
    if (pair == NULL) {
        return -1;
    }
    int result = PyList_Append(attributes, pair);
    Py_DECREF(pair);
    return result;
}

/* Append (key, ns / 1e6) to attributes. */
static int
append_ms(PyObject *attributes, PyObject *key, int64_t ns)
{
    PyObject *value = PyFloat_FromDouble((double)ns / 1e6);
    if (value == NULL) {
        return -1;
    }
    int result = append_pair(attributes, key, value);
    Py_DECREF(value);
    return result;
}

static int
int64_attr(PyObject *object, PyObject *name, int64_t *out)
{
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL) {
        return -1;
    }
    int result = pk_as_int64(value, out);
    Py_DECREF(value);
    return result;
}

/* The attributes of one stage's span. */
static PyObject *
stage_attributes(PyObject *const *keys, PyObject *stage, PyObject *kind, int64_t duration, int64_t own, PyObject *split)
{
    PyObject *attributes = PyList_New(0);
    if (attributes == NULL || append_ms(attributes, keys[DURATION], duration) < 0 || append_ms(attributes, keys[SELF], own) < 0) {
        goto fail;
    }
    if (split != Py_None) {
        if (!PyTuple_Check(split) || PyTuple_GET_SIZE(split) != 4) {
            PyErr_SetString(PyExc_TypeError, "stage_spans: each split must be a 4-tuple");
            goto fail;
        }
        for (int part = 0; part < 4; part++) { /* cpu, queue, io, uncertain: a zero part is left out */
            int64_t ns;
            if (pk_as_int64(PyTuple_GET_ITEM(split, part), &ns) < 0) {
                goto fail;
            }
            if (ns != 0 && append_ms(attributes, keys[CPU + part], ns) < 0) {
                goto fail;
            }
        }
    }
    int is_block = PyUnicode_Compare(kind, pk_names.block);
    if (is_block == -1 && PyErr_Occurred()) {
        goto fail;
    }
    if (is_block != 0) {
        PyObject *items = PyObject_GetAttr(stage, pk_names.items);
        int failed = items == NULL || append_pair(attributes, keys[KIND], kind) < 0 || append_pair(attributes, keys[ITEMS], items) < 0;
        Py_XDECREF(items);
        if (failed) {
            goto fail;
        }
    }
    return attributes;
fail:
    Py_XDECREF(attributes);
    return NULL;
}

/* One stage's span tuple (_spans.Span). */
static PyObject *
stage_span(PyObject *const *args, PyObject *const *keys, Py_ssize_t n, PyObject *stage, int64_t anchor, int64_t request_end)
{
    PyObject *durations = args[1], *own = args[2], *splits = args[3], *ids = args[4];
    int64_t duration, own_ns, start, end, parent;
    if (pk_as_int64(PyList_GET_ITEM(durations, n), &duration) < 0 || pk_as_int64(PyList_GET_ITEM(own, n), &own_ns) < 0 ||
        int64_attr(stage, pk_names.start_ns, &start) < 0 || int64_attr(stage, pk_names.end_ns, &end) < 0 || int64_attr(stage, pk_names.parent, &parent) < 0) {
        return NULL;
    }
    if (parent >= PyList_GET_SIZE(ids)) {
        PyErr_SetString(PyExc_ValueError, "stage_spans: a stage's parent is past the stages");
        return NULL;
    }
    PyObject *kind = PyObject_GetAttr(stage, pk_names.kind);
    if (kind == NULL) {
        return NULL;
    }
    PyObject *split = splits == Py_None ? Py_None : PyList_GET_ITEM(splits, n);
    PyObject *attributes = stage_attributes(keys, stage, kind, duration, own_ns, split);
    Py_DECREF(kind);
    if (attributes == NULL) {
        return NULL;
    }
    PyTypeObject *span_type = (PyTypeObject *)pk_hooks.span_type;
    PyObject *span = span_type->tp_alloc(span_type, PK_SPAN_SIZE);
    PyObject *name = PyObject_GetAttr(stage, pk_names.name);
    PyObject *start_at = PyLong_FromLongLong(start + anchor);
    PyObject *end_at = PyLong_FromLongLong((end != 0 ? end : request_end) + anchor);
    PyObject *internal = PyLong_FromLong(1), *unset = PyLong_FromLong(0); /* SPAN_KIND_INTERNAL, STATUS_UNSET */
    if (span == NULL || name == NULL || start_at == NULL || end_at == NULL || internal == NULL || unset == NULL) {
        Py_XDECREF(span);
        Py_XDECREF(name);
        Py_XDECREF(start_at);
        Py_XDECREF(end_at);
        Py_XDECREF(internal);
        Py_XDECREF(unset);
        Py_DECREF(attributes);
        return NULL;
    }
    PyObject *parent_id = parent >= 0 ? PyList_GET_ITEM(ids, parent) : args[6];
    PyTuple_SET_ITEM(span, PK_SPAN_TRACE_ID, Py_NewRef(args[5]));
    PyTuple_SET_ITEM(span, PK_SPAN_SPAN_ID, Py_NewRef(PyList_GET_ITEM(ids, n)));
    PyTuple_SET_ITEM(span, PK_SPAN_PARENT_SPAN_ID, Py_NewRef(parent_id));
    PyTuple_SET_ITEM(span, PK_SPAN_NAME, name);
    PyTuple_SET_ITEM(span, PK_SPAN_KIND, internal);
    PyTuple_SET_ITEM(span, PK_SPAN_START_UNIX_NS, start_at);
    PyTuple_SET_ITEM(span, PK_SPAN_END_UNIX_NS, end_at);
    PyTuple_SET_ITEM(span, PK_SPAN_ATTRIBUTES, attributes);
    PyTuple_SET_ITEM(span, PK_SPAN_STATUS_CODE, unset);
    PyTuple_SET_ITEM(span, PK_SPAN_STATUS_MESSAGE, Py_NewRef(pk_names.empty));
    return span;
}

/* stage_spans(stages, durations, own, splits, ids, trace_id, server_id, anchor_ns, end_ns, keys) -> [span] */
PyObject *
pk_stage_spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 10 || !PyTuple_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[2]) ||
        !(args[3] == Py_None || PyList_Check(args[3])) || !PyList_Check(args[4]) || !PyTuple_Check(args[9]) ||
        PyTuple_GET_SIZE(args[9]) != NKEYS) {
        PyErr_SetString(PyExc_TypeError, "stage_spans(stages: tuple, durations: list, own: list, splits: list | None, ids: list, "
                                         "trace_id, server_id, anchor_ns, end_ns, keys: 8-tuple)");
        return NULL;
    }
    PyObject *stages = args[0];
    Py_ssize_t count = PyTuple_GET_SIZE(stages);
    if (PyList_GET_SIZE(args[1]) != count || PyList_GET_SIZE(args[2]) != count || PyList_GET_SIZE(args[4]) != count ||
        (args[3] != Py_None && PyList_GET_SIZE(args[3]) != count)) {
        PyErr_SetString(PyExc_ValueError, "stage_spans: durations, own, splits and ids need one entry per stage");
        return NULL;
    }
    int64_t anchor, request_end;
    if (pk_as_int64(args[7], &anchor) < 0 || pk_as_int64(args[8], &request_end) < 0) {
        return NULL;
    }
    PyObject *const *keys = ((PyTupleObject *)args[9])->ob_item;
    PyObject *spans = PyList_New(count);
    if (spans == NULL) {
        return NULL;
    }
    for (Py_ssize_t n = 0; n < count; n++) {
        PyObject *span = stage_span(args, keys, n, PyTuple_GET_ITEM(stages, n), anchor, request_end);
        if (span == NULL) {
            Py_DECREF(spans);
            return NULL;
        }
        PyList_SET_ITEM(spans, n, span);
    }
    return spans;
}
