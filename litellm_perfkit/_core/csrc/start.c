/* The response start: the content type (is it a stream?), the status, and
 * perfkit's headers: Server-Timing with the stages finished so far, and the
 * overhead header (_middleware._PyExchange._on_start is the reference). */
#include "speedups.h"

#include <string.h>
#include <strings.h>

typedef struct {
    char *data;
    Py_ssize_t len, capacity;
    char inline_space[256];
} Buffer;

static int
buffer_add(Buffer *buffer, const char *text, Py_ssize_t len)
{
    if (buffer->len + len > buffer->capacity) {
        Py_ssize_t capacity = (buffer->len + len) * 2;
        char *data = PyMem_Malloc((size_t)capacity);
        if (data == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(data, buffer->data, (size_t)buffer->len);
        if (buffer->data != buffer->inline_space) {
            PyMem_Free(buffer->data);
        }
        buffer->data = data;
        buffer->capacity = capacity;
    }
    memcpy(buffer->data + buffer->len, text, (size_t)len);
    buffer->len += len;
    return 0;
}

/* ", name;dur=12.345": one Server-Timing entry (server_timing_entry in _headers.py). */
static int
add_entry(Buffer *buffer, PyObject *name, int64_t duration_ns)
{
    PyObject *prefix = Py_XNewRef(PyDict_GetItemWithError(pk_hooks.entry_prefixes, name));
    if (prefix == NULL) {
        if (PyErr_Occurred()) {
            return -1;
        }
        prefix = PyObject_CallOneArg(pk_hooks.entry_prefix, name);
        if (prefix == NULL) {
            return -1;
        }
    }
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(prefix, &len);
    char ms[24];
    int ms_len = pk_format_ms(ms, duration_ns);
    int result = text == NULL || (buffer->len && buffer_add(buffer, ", ", 2) < 0) || buffer_add(buffer, text, len) < 0 ||
                         buffer_add(buffer, ms, ms_len) < 0
                     ? -1
                     : 0;
    Py_DECREF(prefix);
    return result;
}

static int
int64_item(PyObject *sequence, Py_ssize_t index, int64_t *out)
{
    PyObject *item = PySequence_GetItem(sequence, index);
    if (item == NULL) {
        return -1;
    }
    int result = pk_as_int64(item, out);
    Py_DECREF(item);
    return result;
}

/* One named stage's entry, its time added to *upstream when it waited on the upstream. */
static int
add_stage(Buffer *buffer, PyObject *upstream_names, PyObject *name, int64_t duration_ns, int64_t *upstream)
{
    int upstream_stage = PySet_Contains(upstream_names, name);
    if (upstream_stage < 0 || add_entry(buffer, name, duration_ns) < 0) {
        return -1;
    }
    if (upstream_stage) {
        *upstream += duration_ns;
    }
    return 0;
}

/* The i-th finished stage, from a StageList or a list of tuples; 1 past the end, -1 with an exception set. */
static int
finished_stage(PyObject *finished, Py_ssize_t i, PkFinishedStage *stage)
{
    if (Py_IS_TYPE(finished, &PkStageList_Type)) {
        Py_ssize_t size; /* read again each time: the list may have changed while an entry was written */
        const PkFinishedStage *stages = pk_stagelist_stages(finished, &size);
        if (i >= size) {
            return 1;
        }
        *stage = stages[i];
        return 0;
    }
    if (!PyList_Check(finished)) {
        PyErr_SetString(PyExc_TypeError, "timeline.finished is not a StageList or a list");
        return -1;
    }
    return i >= PyList_GET_SIZE(finished) ? 1 : pk_finished_from_tuple(PyList_GET_ITEM(finished, i), stage);
}

static int
server_timing(ExchangeObject *self, PyObject *upstream_names, Buffer *buffer, int64_t *upstream)
{
    PyObject *finished = pk_field(FIELDS(self)->finished, "finished");
    if (finished == NULL) {
        return -1;
    }
    PkFinishedStage stage;
    int found;
    for (Py_ssize_t i = 0; (found = finished_stage(finished, i, &stage)) == 0; i++) {
        Py_INCREF(stage.name); /* borrowed from the list, which writing the entry may change */
        found = add_stage(buffer, upstream_names, stage.name,
                          stage.numbers[PK_FINISHED_END_NS] - stage.numbers[PK_FINISHED_START_NS], upstream);
        Py_DECREF(stage.name);
        if (found < 0) {
            break;
        }
    }
    Py_DECREF(finished);
    if (found < 0) {
        return -1;
    }

    PyObject *generators = pk_field(FIELDS(self)->generators, "generators");
    if (generators == NULL) {
        return -1;
    }
    if (!PyDict_Check(generators)) {
        PyErr_SetString(PyExc_TypeError, "timeline.generators is not a dict");
        Py_DECREF(generators);
        return -1;
    }
    PyObject *name, *entry;
    Py_ssize_t position = 0;
    while (PyDict_Next(generators, &position, &name, &entry)) {
        int64_t own;
        if (int64_item(entry, PK_GENERATOR_SELF_NS, &own) < 0 || add_stage(buffer, upstream_names, name, own, upstream) < 0) {
            Py_DECREF(generators);
            return -1;
        }
    }
    Py_DECREF(generators);

    int64_t paused;
    if (pk_int64_attribute(pk_hooks.gc_watch, pk_names.total_ns, &paused) < 0) {
        return -1;
    }
    paused -= FIELDS(self)->gc_pause_ns;
    if (paused && add_entry(buffer, pk_names.gc, paused) < 0) {
        return -1;
    }
    return 0;
}

static int
append_header(PyObject *headers, PyObject *name, const char *value, Py_ssize_t len)
{
    PyObject *text = PyBytes_FromStringAndSize(value, len);
    PyObject *header = text == NULL ? NULL : PyTuple_Pack(2, name, text);
    int result = header == NULL ? -1 : PyList_Append(headers, header);
    Py_XDECREF(text);
    Py_XDECREF(header);
    return result;
}

int
pk_is_event_stream(PyObject *header)
{
    PyObject *name, *value;
    if (PyTuple_Check(header) && PyTuple_GET_SIZE(header) == 2) {
        name = PyTuple_GET_ITEM(header, 0);
        value = PyTuple_GET_ITEM(header, 1);
    }
    else if (PyList_Check(header) && PyList_GET_SIZE(header) == 2) {
        name = PyList_GET_ITEM(header, 0);
        value = PyList_GET_ITEM(header, 1);
    }
    else {
        PyErr_SetString(PyExc_ValueError, "a response header is not a (name, value) pair");
        return -1;
    }
    return PyBytes_Check(name) && PyBytes_GET_SIZE(name) == PK_HEADER_CONTENT_TYPE_LEN &&
           strncasecmp(PyBytes_AS_STRING(name), PK_HEADER_CONTENT_TYPE, PK_HEADER_CONTENT_TYPE_LEN) == 0 &&
           PyBytes_Check(value) && PyBytes_GET_SIZE(value) >= PK_CONTENT_TYPE_EVENT_STREAM_LEN &&
           memcmp(PyBytes_AS_STRING(value), PK_CONTENT_TYPE_EVENT_STREAM, PK_CONTENT_TYPE_EVENT_STREAM_LEN) == 0;
}

/* http.response.start: marks, status, streaming; the message with perfkit's
 * headers added (a new message and header list), or NULL and *unchanged. */
PyObject *
pk_response_start(ExchangeObject *self, PyObject *message)
{
    int64_t now;
    PyObject *status = NULL, *headers = NULL, *flag = NULL, *upstream_names = NULL, *copy = NULL, *list = NULL;
    Buffer buffer = {.len = 0, .capacity = sizeof(buffer.inline_space)};
    buffer.data = buffer.inline_space;
    if (pk_now(&now) < 0 || pk_set_mark(self, pk_names.headers_sent, now) < 0 ||
        pk_get_item(message, pk_names.status, &status) < 0) {
        goto fail;
    }
    if (status == NULL) {
        PyErr_SetString(PyExc_KeyError, "status");
        goto fail;
    }
    int64_t code;
    if (pk_as_int64(status, &code) < 0) {
        goto fail;
    }
    FIELDS(self)->status = code;
    if (pk_get_item(message, pk_names.headers, &headers) < 0) {
        goto fail;
    }
    if (headers == NULL) {
        headers = PyList_New(0);
    }
    list = PySequence_List(headers);
    if (list == NULL) {
        goto fail;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(list); i++) {
        int found = pk_is_event_stream(PyList_GET_ITEM(list, i));
        if (found < 0) {
            goto fail;
        }
        if (found) {
            FIELDS(self)->streaming = 1;
            self->streaming = 1;
            pk_sse_init(&self->sse);
            break;
        }
    }
    flag = PyObject_GetAttr(self->middleware, pk_names.server_timing);
    int with_timing = flag == NULL ? -1 : PyObject_IsTrue(flag);
    Py_XSETREF(flag, PyObject_GetAttr(self->middleware, pk_names.overhead_header));
    int with_overhead = flag == NULL ? -1 : PyObject_IsTrue(flag);
    if (with_timing < 0 || with_overhead < 0) {
        goto fail;
    }
    if (!with_timing && !with_overhead) {
        goto done; /* NULL without an exception: the message goes on unchanged */
    }
    upstream_names = PyObject_GetAttr(self->middleware, pk_names.upstream_stages);
    int64_t upstream = 0;
    if (upstream_names == NULL || server_timing(self, upstream_names, &buffer, &upstream) < 0) {
        goto fail;
    }
    if (with_timing && buffer.len && append_header(list, pk_names.server_timing_header, buffer.data, buffer.len) < 0) {
        goto fail;
    }
    if (with_overhead) {
        char ms[24];
        int ms_len = pk_format_ms(ms, now - FIELDS(self)->start_ns - upstream);
        if (append_header(list, pk_names.overhead_header_name, ms, ms_len) < 0) {
            goto fail;
        }
    }
    copy = PyDict_New(); /* the app's own message and header list stay as they were */
    if (copy == NULL || PyDict_Merge(copy, message, 1) < 0 || PyDict_SetItem(copy, pk_names.headers, list) < 0) {
        goto fail;
    }
    goto done;

fail:
    Py_CLEAR(copy);
done:
    Py_XDECREF(status);
    Py_XDECREF(headers);
    Py_XDECREF(flag);
    Py_XDECREF(upstream_names);
    Py_XDECREF(list);
    if (buffer.data != buffer.inline_space) {
        PyMem_Free(buffer.data);
    }
    return copy;
}
