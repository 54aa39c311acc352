/* Exchange: the send wrapper and per-response state of one request (the
 * counterpart of _middleware._PyExchange; the Python subclass adds receive). */
#include "speedups.h"

#include <string.h>
#include <structmember.h>

/* Whether a request header's name (data, size) is the header KEY: PK_HEADER_KEY
 * and its length, generated from _wire/_names.C_HEADERS. */
#define IS_HEADER(data, size, KEY) ((size) == KEY##_LEN && memcmp((data), KEY, KEY##_LEN) == 0)

/* message.get(key) as a new reference; NULL without an exception when missing. */
int
pk_get_item(PyObject *message, PyObject *key, PyObject **out)
{
    if (PyDict_CheckExact(message)) {
        *out = Py_XNewRef(PyDict_GetItemWithError(message, key));
        return *out == NULL && PyErr_Occurred() ? -1 : 0;
    }
    *out = PyObject_GetItem(message, key);
    if (*out == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_KeyError)) {
            return -1;
        }
        PyErr_Clear();
    }
    return 0;
}

/* type, body and more_body of an ASGI message, as new references (NULL when
 * missing). Servers and frameworks write these keys as literals, which
 * Python interns, so one pass over a small dict comparing pointers finds
 * them without hashing; any other key object falls back to lookups. */
static int
message_fields(PyObject *message, PyObject **type, PyObject **body, PyObject **more_body)
{
    *type = *body = *more_body = NULL;
    if (PyDict_CheckExact(message) && PyDict_GET_SIZE(message) <= 4) {
        PyObject *key, *value;
        Py_ssize_t position = 0;
        int found = 0;
        while (PyDict_Next(message, &position, &key, &value)) {
            PyObject **slot = key == pk_names.type ? type : key == pk_names.body ? body : key == pk_names.more_body ? more_body : NULL;
            if (slot != NULL) {
                *slot = Py_NewRef(value);
                found++;
            }
        }
        if (found == PyDict_GET_SIZE(message)) {
            return 0;
        }
        Py_CLEAR(*type);
        Py_CLEAR(*body);
        Py_CLEAR(*more_body);
    }
    if (pk_get_item(message, pk_names.type, type) < 0 || pk_get_item(message, pk_names.body, body) < 0 ||
        pk_get_item(message, pk_names.more_body, more_body) < 0) {
        Py_CLEAR(*type);
        Py_CLEAR(*body);
        Py_CLEAR(*more_body);
        return -1;
    }
    return 0;
}

static int
is_ascii_text(PyObject *value, const char *text, Py_ssize_t len)
{
    return PyUnicode_Check(value) && PyUnicode_GET_LENGTH(value) == len &&
           PyUnicode_CompareWithASCIIString(value, text) == 0;
}

int
pk_set_mark(ExchangeObject *self, PyObject *name, int64_t at)
{
    PyObject *marks = pk_field(FIELDS(self)->marks, "marks");
    if (marks == NULL) {
        return -1;
    }
    PyObject *value = PyLong_FromLongLong(at);
    int result = value == NULL ? -1 : PyDict_CheckExact(marks) ? PyDict_SetItem(marks, name, value) : PyObject_SetItem(marks, name, value);
    Py_XDECREF(value);
    Py_DECREF(marks);
    return result;
}

static int
mark_now(ExchangeObject *self, PyObject *name)
{
    int64_t now;
    return pk_now(&now) < 0 ? -1 : pk_set_mark(self, name, now);
}

static int
on_body(ExchangeObject *self, const char *data, Py_ssize_t len)
{
    if (!self->body_seen) {
        self->body_seen = 1;
        if (mark_now(self, pk_names.first_body_byte) < 0) {
            return -1;
        }
    }
    self->body_bytes += len;
    self->chunks += 1;
    if (self->streaming) {
        int token = 0;
        if (pk_sse_feed(&self->sse, data, len, &token) < 0) {
            return -1;
        }
        if (token && mark_now(self, pk_names.first_token) < 0) {
            return -1;
        }
    }
    return 0;
}

static int
on_body_message(ExchangeObject *self, PyObject *body, PyObject *more)
{
    int more_body = more == NULL ? 0 : PyObject_IsTrue(more);
    int result = more_body < 0 ? -1 : 0;
    if (result == 0 && body != NULL) {
        if (PyBytes_CheckExact(body)) {
            if (PyBytes_GET_SIZE(body) > 0) {
                result = on_body(self, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body));
            }
        }
        else { /* memoryview, bytearray */
            Py_buffer view;
            result = PyObject_GetBuffer(body, &view, PyBUF_SIMPLE);
            if (result == 0) {
                if (view.len > 0) {
                    result = on_body(self, view.buf, view.len);
                }
                PyBuffer_Release(&view);
            }
        }
    }
    if (result == 0 && !more_body) {
        result = pk_now(&self->last_byte_ns) < 0 ? -1 : pk_set_mark(self, pk_names.last_byte, self->last_byte_ns);
        self->complete = result == 0;
    }
    return result;
}

/* --- the type ------------------------------------------------------------ */

/* Record one message the app sends; returns what to hand the server: the
 * message itself, or the response start with perfkit's headers added. */
static PyObject *
exchange_record(ExchangeObject *self, PyObject *message)
{
    PyObject *forward = NULL, *type, *body, *more;
    if (pk_initialised(self->timeline, (PyObject *)self) < 0) {
        return NULL;
    }
    int failed = message_fields(message, &type, &body, &more) < 0;
    if (!failed && type != NULL) {
        if (is_ascii_text(type, "http.response.body", 18)) {
            failed = on_body_message(self, body, more) < 0;
        }
        else if (is_ascii_text(type, "http.response.start", 19)) {
            forward = pk_response_start(self, message);
            failed = forward == NULL && PyErr_Occurred();
        }
    }
    Py_XDECREF(type);
    Py_XDECREF(body);
    Py_XDECREF(more);
    if (failed) {
        pk_report("middleware.send"); /* perfkit's bug must never become the app's */
    }
    return forward != NULL ? forward : Py_NewRef(message);
}

static PyObject *
exchange_send(ExchangeObject *self, PyObject *message)
{
    PyObject *forward = exchange_record(self, message);
    if (forward == NULL) {
        return NULL;
    }
    PyObject *result = PyObject_CallOneArg(self->send, forward);
    Py_DECREF(forward);
    return result;
}

static PyObject *
exchange_finish(ExchangeObject *self, PyObject *Py_UNUSED(ignored))
{
    if (pk_initialised(self->timeline, (PyObject *)self) < 0) {
        return NULL;
    }
    PkTimelineObject *timeline = FIELDS(self);
    PyObject *sink = NULL, *result = NULL;
    int64_t end;
    if (pk_now(&end) < 0) {
        goto fail;
    }
    /* The request ends at its last byte; the app's time after it, to its
     * return (now), is its own part. Without a last byte it ends now. */
    if (self->complete) {
        timeline->end_ns = self->last_byte_ns;
        timeline->after_last_byte_ns = end - self->last_byte_ns;
    }
    else {
        timeline->end_ns = end;
    }
    int64_t paused_by_now;
    if (pk_int64_attribute(pk_hooks.gc_watch, pk_names.total_ns, &paused_by_now) < 0) {
        goto fail;
    }
    timeline->gc_pause_ns = paused_by_now - timeline->gc_pause_ns;
    timeline->body_bytes = self->body_bytes;
    timeline->chunks = self->streaming ? self->sse.events - self->sse.done_events : self->chunks;
    if (!self->complete && (timeline->error == NULL || timeline->error == Py_None)) {
        Py_XSETREF(timeline->error,
                  Py_NewRef(self->disconnected ? pk_names.client_disconnected : pk_names.incomplete_response));
    }
    sink = PyObject_GetAttr(pk_hooks.sink_module, pk_names.sink);
    if (sink == NULL || (result = PyObject_CallOneArg(sink, self->timeline)) == NULL) {
        goto fail;
    }
    goto done;

fail:
    pk_report("middleware.finish");
done:
    Py_XDECREF(sink);
    Py_XDECREF(result);
    Py_RETURN_NONE;
}

/* The request's side of the timeline: which stages wait upstream, the
 * collector's pause total at the start (finish makes it the difference) and
 * the caller's traceparent (_PyExchange.__init__ is the reference). */
static int
begin(PkTimelineObject *timeline, PyObject *middleware, PyObject *scope)
{
    PyObject *names = PyObject_GetAttr(middleware, pk_names.upstream_names);
    if (names == NULL) {
        return -1;
    }
    Py_XSETREF(timeline->upstream_stages, names);
    int64_t paused_so_far; /* the request's pause is what the collector adds from now on */
    if (pk_int64_attribute(pk_hooks.gc_watch, pk_names.total_ns, &paused_so_far) < 0) {
        return -1;
    }
    timeline->gc_pause_ns = paused_so_far;
    PyObject *headers = PyObject_GetItem(scope, pk_names.headers);
    PyObject *sequence = headers == NULL ? NULL : PySequence_Fast(headers, "the scope's headers are not a sequence");
    Py_XDECREF(headers);
    if (sequence == NULL) {
        Py_XDECREF(sequence);
        return -1;
    }
    int result = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence) && result == 0; i++) {
        PyObject *header = PySequence_Fast_GET_ITEM(sequence, i);
        PyObject *pair = PyTuple_CheckExact(header) ? Py_NewRef(header) : PySequence_Tuple(header);
        if (pair == NULL || PyTuple_GET_SIZE(pair) != 2) {
            if (pair != NULL) {
                PyErr_SetString(PyExc_ValueError, "a request header is not a (name, value) pair");
            }
            Py_XDECREF(pair);
            result = -1;
            break;
        }
        PyObject *name = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
        if (PyBytes_Check(name) && IS_HEADER(PyBytes_AS_STRING(name), PyBytes_GET_SIZE(name), PK_HEADER_TRACEPARENT)) {
            char *bytes;
            Py_ssize_t len;
            PyObject *text = PyBytes_AsStringAndSize(value, &bytes, &len) < 0 ? NULL : PyUnicode_DecodeLatin1(bytes, len, NULL);
            if (text == NULL) {
                result = -1;
            }
            else {
                Py_XSETREF(timeline->traceparent, text);
            }
            Py_DECREF(pair);
            break;
        }
        Py_DECREF(pair);
    }
    Py_DECREF(sequence);
    return result;
}

/* Bits of scan_headers' answer (_sampling.HeadersFound). */
#define PK_FOUND_SECRET 1 /* a PK_HEADER_SECRET header */
#define PK_FOUND_SAMPLED 2 /* a traceparent whose flags' last digit is odd */
#define PK_FOUND_UNREAD 4 /* a header this scan does not read: the reference reads them all */

static int
odd_hex(char digit)
{
    return digit != 0 && strchr("13579bdfBDF", digit) != NULL;
}

/* One pass over a request's headers on every request, recorded or not, with
 * no Python object made: the reference's loop cost ~500 instructions a
 * header (benchmarks/middleware_overhead.py --measure instructions). */
PyObject *
pk_scan_headers(PyObject *module, PyObject *headers)
{
    PyObject *sequence = PySequence_Fast(headers, "the scope's headers are not a sequence");
    if (sequence == NULL) {
        return NULL;
    }
    long found = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence); i++) {
        PyObject *header = PySequence_Fast_GET_ITEM(sequence, i);
        if (!PyTuple_CheckExact(header) || PyTuple_GET_SIZE(header) != 2 || !PyBytes_CheckExact(PyTuple_GET_ITEM(header, 0))) {
            found |= PK_FOUND_UNREAD;
            continue;
        }
        PyObject *name = PyTuple_GET_ITEM(header, 0), *value = PyTuple_GET_ITEM(header, 1);
        Py_ssize_t size = PyBytes_GET_SIZE(name);
        if (IS_HEADER(PyBytes_AS_STRING(name), size, PK_HEADER_SECRET)) {
            found |= PK_FOUND_SECRET;
        }
        else if (IS_HEADER(PyBytes_AS_STRING(name), size, PK_HEADER_TRACEPARENT)) {
            if (!PyBytes_CheckExact(value)) {
                found |= PK_FOUND_UNREAD;
            }
            else if (PyBytes_GET_SIZE(value) > 54 && odd_hex(PyBytes_AS_STRING(value)[54])) {
                found |= PK_FOUND_SAMPLED;
            }
        }
    }
    Py_DECREF(sequence);
    return PyLong_FromLong(found);
}

static int
exchange_init(ExchangeObject *self, PyObject *args, PyObject *kwargs)
{
    PyObject *middleware, *scope, *timeline, *receive, *send;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Exchange(middleware, scope, timeline, receive, send) takes no keywords");
        return -1;
    }
    if (!PyArg_UnpackTuple(args, "Exchange", 5, 5, &middleware, &scope, &timeline, &receive, &send) ||
        pk_timeline(timeline) == NULL) {
        return -1;
    }
    if (begin((PkTimelineObject *)timeline, middleware, scope) < 0) {
        pk_report("middleware.start"); /* the request goes on, without what could not be read */
    }
    Py_XSETREF(self->middleware, Py_NewRef(middleware));
    Py_XSETREF(self->timeline, Py_NewRef(timeline));
    Py_XSETREF(self->receive, Py_NewRef(receive));
    Py_XSETREF(self->send, Py_NewRef(send));
    pk_sse_clear(&self->sse);
    return 0;
}

static int
exchange_traverse(ExchangeObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->middleware);
    Py_VISIT(self->timeline);
    Py_VISIT(self->receive);
    Py_VISIT(self->send);
    Py_VISIT(self->sse.pending);
    return 0;
}

static int
exchange_clear(ExchangeObject *self)
{
    Py_CLEAR(self->middleware);
    Py_CLEAR(self->timeline);
    Py_CLEAR(self->receive);
    Py_CLEAR(self->send);
    pk_sse_clear(&self->sse);
    return 0;
}

PK_FREE_LIST_ALLOC(exchange_alloc, free_exchanges, &PkExchange_Type) /* a request's, for the next's */

static void
exchange_dealloc(ExchangeObject *self)
{
    PyObject_GC_UnTrack(self); /* subtype_dealloc drops a Python subclass's type reference */
    exchange_clear(self);
    pk_free_list_free(&free_exchanges, &PkExchange_Type, (PyObject *)self);
}

static PyMethodDef exchange_methods[] = {
    {"send", (PyCFunction)exchange_send, METH_O, "The app's send: records, then hands the message to the server."},
    {"record", (PyCFunction)exchange_record, METH_O, "Record a message; returns the one to hand the server."},
    {"finish", (PyCFunction)exchange_finish, METH_NOARGS, "Close the timeline and pass it to the sink."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef exchange_members[] = {
    {"_receive", T_OBJECT, offsetof(ExchangeObject, receive), READONLY, "the server's receive"},
    {"_timeline", T_OBJECT, offsetof(ExchangeObject, timeline), READONLY, NULL},
    {"_disconnected", T_BOOL, offsetof(ExchangeObject, disconnected), 0, "the client went away"},
    {"_complete", T_BOOL, offsetof(ExchangeObject, complete), 0, "the last body message was sent"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PkExchange_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Exchange",
    .tp_basicsize = sizeof(ExchangeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The send wrapper and response state of one request (see _middleware._PyExchange).",
    .tp_new = PyType_GenericNew,
    .tp_alloc = exchange_alloc,
    .tp_init = (initproc)exchange_init,
    .tp_dealloc = (destructor)exchange_dealloc,
    .tp_traverse = (traverseproc)exchange_traverse,
    .tp_clear = (inquiry)exchange_clear,
    .tp_methods = exchange_methods,
    .tp_members = exchange_members,
};
