/* stage_spans(...): the export agent's span of each stage of a request, the
 * counterpart of _export/_spans._stage_spans_python (the specification, and
 * what runs without the accelerator). A request has ~22 stages; building
 * their attribute lists and span tuples in Python was about a seventh of
 * the agent's CPU per request, twice what this takes (docs/overhead.md).
 *
 * stage_spans_protobuf(...) writes the same spans straight to OTLP protobuf,
 * the bytes encode_spans (otlp.c) would make of them, with no Python object
 * per span: what an exporter that posts protobuf takes. Its ids may also be
 * bytes, 8 a stage, which it copies as they are. */
#include "protobuf.h"

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

/* What a stage's span is made of, read once for either form. */
typedef struct {
    int64_t duration, own, start, end, parent;
    PyObject *name, *kind, *items; /* new references; items only when the stage is not a block */
    PyObject *split;               /* borrowed: a 4-tuple, or None */
} StageParts;

static void
release_parts(StageParts *parts)
{
    Py_CLEAR(parts->name);
    Py_CLEAR(parts->kind);
    Py_CLEAR(parts->items);
}

/* Stage n's parts; -1 with an exception set (nothing held). */
static int
read_stage(PyObject *const *args, Py_ssize_t n, PyObject *stage, int64_t request_end, StageParts *parts)
{
    PyObject *durations = args[1], *own = args[2], *splits = args[3];
    *parts = (StageParts){0};
    if (pk_as_int64(PyList_GET_ITEM(durations, n), &parts->duration) < 0 || pk_as_int64(PyList_GET_ITEM(own, n), &parts->own) < 0 ||
        pk_int64_attribute(stage, pk_names.start_ns, &parts->start) < 0 || pk_int64_attribute(stage, pk_names.end_ns, &parts->end) < 0 ||
        pk_int64_attribute(stage, pk_names.parent, &parts->parent) < 0) {
        return -1;
    }
    if (parts->parent >= PyTuple_GET_SIZE(args[0])) {
        PyErr_SetString(PyExc_ValueError, "stage_spans: a stage's parent is past the stages");
        return -1;
    }
    if (parts->end == 0) { /* still open at the response's end */
        parts->end = request_end;
    }
    parts->split = splits == Py_None ? Py_None : PyList_GET_ITEM(splits, n);
    if (parts->split != Py_None && (!PyTuple_Check(parts->split) || PyTuple_GET_SIZE(parts->split) != 4)) {
        PyErr_SetString(PyExc_TypeError, "stage_spans: each split must be a 4-tuple");
        return -1;
    }
    parts->kind = PyObject_GetAttr(stage, pk_names.kind);
    parts->name = parts->kind == NULL ? NULL : PyObject_GetAttr(stage, pk_names.name);
    if (parts->name == NULL) {
        release_parts(parts);
        return -1;
    }
    int is_block = PyUnicode_Compare(parts->kind, pk_names.block);
    if (is_block == -1 && PyErr_Occurred()) {
        release_parts(parts);
        return -1;
    }
    if (is_block != 0 && (parts->items = PyObject_GetAttr(stage, pk_names.items)) == NULL) {
        release_parts(parts);
        return -1;
    }
    return 0;
}

/* The attributes of one stage's span. */
static PyObject *
stage_attributes(PyObject *const *keys, const StageParts *parts)
{
    PyObject *attributes = PyList_New(0);
    if (attributes == NULL || append_ms(attributes, keys[DURATION], parts->duration) < 0 ||
        append_ms(attributes, keys[SELF], parts->own) < 0) {
        goto fail;
    }
    if (parts->split != Py_None) {
        for (int part = 0; part < 4; part++) { /* cpu, queue, io, uncertain: a zero part is left out */
            int64_t ns;
            if (pk_as_int64(PyTuple_GET_ITEM(parts->split, part), &ns) < 0) {
                goto fail;
            }
            if (ns != 0 && append_ms(attributes, keys[CPU + part], ns) < 0) {
                goto fail;
            }
        }
    }
    if (parts->items != NULL && (append_pair(attributes, keys[KIND], parts->kind) < 0 || append_pair(attributes, keys[ITEMS], parts->items) < 0)) {
        goto fail;
    }
    return attributes;
fail:
    Py_XDECREF(attributes);
    return NULL;
}

/* One stage's span tuple (_spans.Span). */
static PyObject *
stage_span(PyObject *const *args, PyObject *const *keys, Py_ssize_t n, StageParts *parts, int64_t anchor)
{
    PyObject *ids = args[4];
    PyObject *attributes = stage_attributes(keys, parts);
    if (attributes == NULL) {
        return NULL;
    }
    PyTypeObject *span_type = (PyTypeObject *)pk_hooks.span_type;
    PyObject *span = span_type->tp_alloc(span_type, PK_SPAN_SIZE);
    PyObject *start_at = PyLong_FromLongLong(parts->start + anchor);
    PyObject *end_at = PyLong_FromLongLong(parts->end + anchor);
    PyObject *internal = PyLong_FromLong(1), *unset = PyLong_FromLong(0); /* SPAN_KIND_INTERNAL, STATUS_UNSET */
    if (span == NULL || start_at == NULL || end_at == NULL || internal == NULL || unset == NULL) {
        Py_XDECREF(span);
        Py_XDECREF(start_at);
        Py_XDECREF(end_at);
        Py_XDECREF(internal);
        Py_XDECREF(unset);
        Py_DECREF(attributes);
        return NULL;
    }
    PyObject *parent_id = parts->parent >= 0 ? PyList_GET_ITEM(ids, parts->parent) : args[6];
    PyTuple_SET_ITEM(span, PK_SPAN_TRACE_ID, Py_NewRef(args[5]));
    PyTuple_SET_ITEM(span, PK_SPAN_SPAN_ID, Py_NewRef(PyList_GET_ITEM(ids, n)));
    PyTuple_SET_ITEM(span, PK_SPAN_PARENT_SPAN_ID, Py_NewRef(parent_id));
    PyTuple_SET_ITEM(span, PK_SPAN_NAME, Py_NewRef(parts->name));
    PyTuple_SET_ITEM(span, PK_SPAN_KIND, internal);
    PyTuple_SET_ITEM(span, PK_SPAN_START_UNIX_NS, start_at);
    PyTuple_SET_ITEM(span, PK_SPAN_END_UNIX_NS, end_at);
    PyTuple_SET_ITEM(span, PK_SPAN_ATTRIBUTES, attributes);
    PyTuple_SET_ITEM(span, PK_SPAN_STATUS_CODE, unset);
    PyTuple_SET_ITEM(span, PK_SPAN_STATUS_MESSAGE, Py_NewRef(pk_names.empty));
    return span;
}

/* A span attribute (field 9) of a float value, ns / 1e6, as _otlp._pattributes writes a float. */
static int
put_ms(Buffer *buffer, PyObject *key, int64_t ns)
{
    Py_ssize_t key_size;
    const char *key_text = PyUnicode_AsUTF8AndSize(key, &key_size);
    char scalar[9];
    if (key_text == NULL) {
        return -1;
    }
    return put_key_value(buffer, 9, key_text, (size_t)key_size, scalar, double_value(scalar, (double)ns / 1e6), NULL, 0);
}

/* Stage n's id, from ids: 8 raw bytes of a bytes object, or hex in a list. */
static int
put_stage_id(Buffer *body, char tag, PyObject *ids, Py_ssize_t n)
{
    if (!PyBytes_Check(ids)) {
        return put_id(body, tag, PyList_GET_ITEM(ids, n), 8);
    }
    if (reserve(body, 2 + 8) < 0) {
        return -1;
    }
    body->data[body->len++] = tag;
    body->data[body->len++] = 8;
    put_bytes(body, PyBytes_AS_STRING(ids) + 8 * n, 8);
    return 0;
}

/* One stage's span body (the Span message's fields), as put_span_body (otlp.c) writes stage_span's tuple;
 * DECLINED when an id is not hex of its size. */
static int
put_stage_span(Buffer *body, PyObject *const *args, PyObject *const *keys, Py_ssize_t n, const StageParts *parts, int64_t anchor)
{
    PyObject *ids = args[4];
    int result;
    if ((result = put_id(body, 0x0A, args[5], 16)) || (result = put_stage_id(body, 0x12, ids, n))) {
        return result;
    }
    if (parts->parent >= 0) {
        if ((result = put_stage_id(body, 0x22, ids, parts->parent))) {
            return result;
        }
    }
    else {
        int has_parent = PyObject_IsTrue(args[6]);
        if (has_parent < 0) {
            return -1;
        }
        if (has_parent && (result = put_id(body, 0x22, args[6], 8))) {
            return result;
        }
    }
    Py_ssize_t name_size;
    const char *name = PyUnicode_Check(parts->name) ? PyUnicode_AsUTF8AndSize(parts->name, &name_size) : NULL;
    if (name == NULL) {
        return PyErr_Occurred() ? -1 : DECLINED;
    }
    if (put_field(body, 5, name, (size_t)name_size) < 0 || reserve(body, 2 + 2 * 9) < 0) {
        return -1;
    }
    body->data[body->len++] = 0x30;
    body->data[body->len++] = 1; /* SPAN_KIND_INTERNAL */
    body->data[body->len++] = 0x39;
    put_fixed64(body, (uint64_t)(parts->start + anchor));
    body->data[body->len++] = 0x41;
    put_fixed64(body, (uint64_t)(parts->end + anchor));
    if (put_ms(body, keys[DURATION], parts->duration) < 0 || put_ms(body, keys[SELF], parts->own) < 0) {
        return -1;
    }
    if (parts->split != Py_None) {
        for (int part = 0; part < 4; part++) { /* cpu, queue, io, uncertain: a zero part is left out */
            int64_t ns;
            if (pk_as_int64(PyTuple_GET_ITEM(parts->split, part), &ns) < 0) {
                return -1;
            }
            if (ns != 0 && put_ms(body, keys[CPU + part], ns) < 0) {
                return -1;
            }
        }
    }
    if (parts->items != NULL) {
        Py_ssize_t key_size, kind_size, items_key_size;
        const char *key = PyUnicode_AsUTF8AndSize(keys[KIND], &key_size);
        const char *kind = key == NULL || !PyUnicode_Check(parts->kind) ? NULL : PyUnicode_AsUTF8AndSize(parts->kind, &kind_size);
        const char *items_key = kind == NULL ? NULL : PyUnicode_AsUTF8AndSize(keys[ITEMS], &items_key_size);
        if (items_key == NULL) {
            return PyErr_Occurred() ? -1 : DECLINED;
        }
        if (!PyLong_CheckExact(parts->items)) {
            return DECLINED;
        }
        int64_t items;
        char scalar[11] = {0};
        if (pk_as_int64(parts->items, &items) < 0) {
            return -1;
        }
        if (put_key_value(body, 9, key, (size_t)key_size, scalar, 0, kind, (size_t)kind_size) < 0 ||
            put_key_value(body, 9, items_key, (size_t)items_key_size, scalar, int_value(scalar, items), NULL, 0) < 0) {
            return -1;
        }
    }
    if (reserve(body, 2) < 0) {
        return -1;
    }
    body->data[body->len++] = (char)(15 << 3 | 2); /* Status: unset, no message, present and empty */
    body->data[body->len++] = 0;
    return 0;
}

/* The arguments both forms take, checked; their keys; -1 with TypeError or ValueError set. */
static int
check_arguments(PyObject *const *args, Py_ssize_t nargs, const char *name, int raw_ids, int64_t *anchor, int64_t *request_end)
{
    PyObject *ids = nargs == 10 ? args[4] : NULL;
    if (nargs != 10 || !PyTuple_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[2]) ||
        !(args[3] == Py_None || PyList_Check(args[3])) || !(PyList_Check(ids) || (raw_ids && PyBytes_Check(ids))) ||
        !PyTuple_Check(args[9]) || PyTuple_GET_SIZE(args[9]) != NKEYS) {
        PyErr_Format(PyExc_TypeError, "%s(stages: tuple, durations: list, own: list, splits: list | None, ids: %s, "
                                      "trace_id, server_id, anchor_ns, end_ns, keys: 8-tuple)", name, raw_ids ? "bytes | list" : "list");
        return -1;
    }
    Py_ssize_t count = PyTuple_GET_SIZE(args[0]);
    Py_ssize_t id_count = PyBytes_Check(ids) ? (PyBytes_GET_SIZE(ids) % 8 ? -1 : PyBytes_GET_SIZE(ids) / 8) : PyList_GET_SIZE(ids);
    if (PyList_GET_SIZE(args[1]) != count || PyList_GET_SIZE(args[2]) != count || id_count != count ||
        (args[3] != Py_None && PyList_GET_SIZE(args[3]) != count)) {
        PyErr_SetString(PyExc_ValueError, "stage_spans: durations, own, splits and ids need one entry per stage");
        return -1;
    }
    return pk_as_int64(args[7], anchor) < 0 || pk_as_int64(args[8], request_end) < 0 ? -1 : 0;
}

/* stage_spans(stages, durations, own, splits, ids, trace_id, server_id, anchor_ns, end_ns, keys) -> [span] */
PyObject *
pk_stage_spans(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t anchor, request_end;
    if (check_arguments(args, nargs, "stage_spans", 0, &anchor, &request_end) < 0) {
        return NULL;
    }
    PyObject *stages = args[0];
    PyObject *const *keys = ((PyTupleObject *)args[9])->ob_item;
    PyObject *spans = PyList_New(PyTuple_GET_SIZE(stages));
    if (spans == NULL) {
        return NULL;
    }
    for (Py_ssize_t n = 0; n < PyTuple_GET_SIZE(stages); n++) {
        StageParts parts;
        if (read_stage(args, n, PyTuple_GET_ITEM(stages, n), request_end, &parts) < 0) {
            Py_DECREF(spans);
            return NULL;
        }
        PyObject *span = stage_span(args, keys, n, &parts, anchor);
        release_parts(&parts);
        if (span == NULL) {
            Py_DECREF(spans);
            return NULL;
        }
        PyList_SET_ITEM(spans, n, span);
    }
    return spans;
}

/* stage_spans_protobuf(the same) -> bytes | None: encode_spans(stage_spans(...)), with no span built. */
PyObject *
pk_stage_spans_protobuf(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t anchor, request_end;
    if (check_arguments(args, nargs, "stage_spans_protobuf", 1, &anchor, &request_end) < 0) {
        return NULL;
    }
    PyObject *stages = args[0];
    PyObject *const *keys = ((PyTupleObject *)args[9])->ob_item;
    Buffer out = {0}, body = {0};
    int status = 0;
    for (Py_ssize_t n = 0; n < PyTuple_GET_SIZE(stages); n++) {
        StageParts parts;
        if (read_stage(args, n, PyTuple_GET_ITEM(stages, n), request_end, &parts) < 0) {
            status = -1;
            break;
        }
        body.len = 0;
        status = put_stage_span(&body, args, keys, n, &parts, anchor);
        release_parts(&parts);
        if (status == 0) {
            status = put_field(&out, 2, body.data, body.len);
        }
        if (status) {
            break;
        }
    }
    return written_spans(&out, &body, status);
}
