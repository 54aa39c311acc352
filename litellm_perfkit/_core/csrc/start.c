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

static int
server_timing(ExchangeObject *self, PyObject *upstream_names, Buffer *buffer, int64_t *upstream)
{
    PyObject *finished = pk_field(FIELDS(self)->finished, "finished");
    if (finished == NULL) {
        return -1;
    }
    if (!PyList_Check(finished)) {
        Py_DECREF(finished);
        PyErr_SetString(PyExc_TypeError, "timeline.finished is not a list");
        return -1;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(finished); i++) {
        PyObject *stage = PyList_GET_ITEM(finished, i);
        int64_t start, end;
        if (!PyTuple_Check(stage) || PyTuple_GET_SIZE(stage) != PK_FINISHED_SIZE) {
            PyErr_SetString(PyExc_TypeError, "a finished stage is not a tuple of PK_FINISHED_SIZE");
            Py_DECREF(finished);
            return -1;
        }
        PyObject *name = PyTuple_GET_ITEM(stage, PK_FINISHED_NAME);
        int upstream_stage = int64_item(stage, PK_FINISHED_START_NS, &start) < 0 || int64_item(stage, PK_FINISHED_END_NS, &end) < 0
                                 ? -1
                                 : PySet_Contains(upstream_names, name);
        if (upstream_stage < 0 || add_entry(buffer, name, end - start) < 0) {
            Py_DECREF(finished);
            return -1;
        }
        if (upstream_stage) {
            *upstream += end - start;
        }
    }
    Py_DECREF(finished);

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
        int upstream_stage = int64_item(entry, PK_GENERATOR_SELF_NS, &own) < 0 ? -1 : PySet_Contains(upstream_names, name);
        if (upstream_stage < 0 || add_entry(buffer, name, own) < 0) {
            Py_DECREF(generators);
            return -1;
        }
        if (upstream_stage) {
            *upstream += own;
        }
    }
    Py_DECREF(generators);

    int failed = 0;
    int64_t paused = pk_int64_attribute(pk_hooks.gc_watch, pk_names.total_ns, &failed) - FIELDS(self)->gc_pause_ns;
    if (failed || (paused && add_entry(buffer, pk_names.gc, paused) < 0)) {
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
