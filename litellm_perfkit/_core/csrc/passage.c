/* Passage: an unrecorded request's send (the counterpart of
 * _traffic._PyPassage, the reference). It reads the response start and, for
 * an event stream, the bodies until the first content token (it is
 * "watching"); after that it reads no message as it passes, only holds the
 * last one, which says at close whether the response finished, and adds the
 * request to its Tally (tally.c) when the middleware closes it.
 * Not tracked by the collector: it holds the tally, the server's send, the
 * method and the last message the app sent, none of which refers back to it
 * (a message is made of texts, bytes and flags).
 */
#include "traffic.h"

#include <stddef.h>

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    TallyObject *tally;
    PyObject *send;
    PyObject *method;
    PyObject *last;             /* the last message passed, unread (NULL: none, or read) */
    int64_t start_ns, ttft_ns, status;
    int64_t last_ns;            /* when the last message passed: the last byte's time, once the response finished */
    char watching;              /* every message is read: until the response start, and a stream's first token */
    char started, streaming, scanning, complete;
    PkSse sse;
} PassageObject;

static PyObject *response_body, *response_start, *response_trailers;
static PyObject *seen_body, *seen_start; /* message_kind's last matches */

static PyObject *passage_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);

enum { OTHER_MESSAGE, BODY_MESSAGE, START_MESSAGE, TRAILERS_MESSAGE };

/* Which message a type names. A message type is a literal of the server's
 * or framework's code, the same object every time but not interned (it has
 * dots): the last object that matched each type is kept, so that the next
 * message is told by pointers alone, without comparing text. */
static int
message_kind(PyObject *type)
{
    if (type == seen_body || type == response_body) {
        return BODY_MESSAGE;
    }
    if (type == seen_start || type == response_start) {
        return START_MESSAGE;
    }
    if (!PyUnicode_Check(type)) {
        return OTHER_MESSAGE;
    }
    if (PyUnicode_Compare(type, response_body) == 0) {
        Py_XSETREF(seen_body, Py_NewRef(type));
        return BODY_MESSAGE;
    }
    if (PyUnicode_Compare(type, response_start) == 0) {
        Py_XSETREF(seen_start, Py_NewRef(type));
        return START_MESSAGE;
    }
    return PyUnicode_Compare(type, response_trailers) == 0 ? TRAILERS_MESSAGE : OTHER_MESSAGE;
}

static int
on_start(PassageObject *self, PyObject *status, PyObject *headers)
{
    self->started = 1;
    self->watching = 0; /* unless the body is an event stream */
    if (status == NULL) {
        PyErr_SetString(PyExc_KeyError, "status");
        return -1;
    }
    if (pk_as_int64(status, &self->status) < 0) {
        return -1;
    }
    if (headers == NULL || headers == Py_None) {
        return 0;
    }
    PyObject *sequence = PySequence_Fast(headers, "the response headers are not a sequence");
    if (sequence == NULL) {
        return -1;
    }
    int result = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence); i++) {
        int found = pk_is_event_stream(PySequence_Fast_GET_ITEM(sequence, i));
        if (found) {
            if (found > 0) {
                self->streaming = self->scanning = self->watching = 1;
                pk_sse_init(&self->sse);
            }
            result = found < 0 ? -1 : 0;
            break;
        }
    }
    Py_DECREF(sequence);
    return result;
}

/* A stream's body before its first token: looked for the token in place
 * (the passage needs no event count). */
static int
scan(PassageObject *self, PyObject *body)
{
    int token = 0, result;
    if (PyBytes_CheckExact(body)) {
        result = PyBytes_GET_SIZE(body) > 0
                     ? pk_sse_find_token(&self->sse, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body), &token)
                     : 0;
    }
    else { /* memoryview, bytearray */
        Py_buffer view;
        if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
            return -1;
        }
        result = view.len > 0 ? pk_sse_find_token(&self->sse, view.buf, view.len, &token) : 0;
        PyBuffer_Release(&view);
    }
    if (result == 0 && token) {
        int64_t now;
        if (pk_now(&now) < 0) {
            return -1;
        }
        self->ttft_ns = now - self->start_ns;
        self->scanning = 0;
        self->watching = !self->started;
        pk_sse_clear(&self->sse);
    }
    return result;
}

/* A body message: a stream's body until its first token, and whether it ends the response. */
static int
on_body(PassageObject *self, PyObject *body, PyObject *more)
{
    if (self->scanning && body != NULL && body != Py_None && scan(self, body) < 0) {
        return -1;
    }
    int more_body = more == NULL ? 0 : PyObject_IsTrue(more);
    if (more_body < 0) {
        return -1;
    }
    if (!more_body) {
        self->complete = 1;
    }
    return 0;
}

/* A message the app sends while watching: the response start's status and
 * whether the body is an event stream, a stream's bodies until the first
 * token, whether a body ends the response. Or, at close, the last message:
 * the response finished if it is a body with no more to come, or trailers,
 * which follow the last body. Only the keys needed are looked up (a lookup
 * costs about 120 instructions). 0, or -1 with an exception set. */
static int
read_message(PassageObject *self, PyObject *message, int last)
{
    PyObject *type, *first = NULL, *second = NULL;
    if (pk_get_item(message, pk_names.type, &type) < 0) {
        return -1;
    }
    if (type == NULL) {
        return 0;
    }
    int result = 0;
    switch (message_kind(type)) {
    case BODY_MESSAGE:
        if ((self->scanning && pk_get_item(message, pk_names.body, &first) < 0) ||
            pk_get_item(message, pk_names.more_body, &second) < 0) {
            result = -1;
        }
        else {
            result = on_body(self, first, second);
        }
        break;
    case START_MESSAGE:
        if (!last) {
            if (pk_get_item(message, pk_names.status, &first) < 0 ||
                pk_get_item(message, pk_names.headers, &second) < 0) {
                result = -1;
            }
            else {
                result = on_start(self, first, second);
            }
        }
        break;
    case TRAILERS_MESSAGE:
        if (last) {
            self->complete = 1;
        }
        break;
    }
    Py_XDECREF(first);
    Py_XDECREF(second);
    Py_DECREF(type);
    return result;
}

/* One message as it passes: its time, and read while watching, else kept. */
static inline void
pass_message(PassageObject *self, PyObject *message)
{
    if (pk_now(&self->last_ns) < 0) {
        pk_report("middleware.passage"); /* a test's fake clock failed: this message's time is unknown */
    }
    if (self->watching) {
        if (read_message(self, message, 0) < 0) {
            pk_report("middleware.passage"); /* perfkit's bug must never become the app's */
        }
    }
    else {
        /* Most messages of a stream: nothing read, the last one kept for close. */
        Py_XSETREF(self->last, Py_NewRef(message));
    }
}

/* send(message), the passage's bound method that the middleware hands the
 * app: CPython's bytecode calls a METH_O builtin method directly
 * (3.11's PRECALL_NO_KW_BUILTIN_O, CALL_BUILTIN_O since 3.12), about 117
 * instructions a message fewer than calling this object through its
 * vectorcall (benchmarks/middleware_overhead.py, --measure instructions). */
static PyObject *
passage_send(PassageObject *self, PyObject *message)
{
    pass_message(self, message);
    /* The server's send gets one argument, with a slot before it lent. */
    PyObject *stack[2] = {NULL, message};
    vectorcallfunc send = PyVectorcall_Function(self->send);
    size_t nargsf = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
    return send != NULL ? send(self->send, stack + 1, nargsf, NULL)
                        : PyObject_Vectorcall(self->send, stack + 1, nargsf, NULL);
}

static PyObject *
passage_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PassageObject *self = (PassageObject *)callable;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "send(message) takes one argument");
        return NULL;
    }
    pass_message(self, args[0]);
    /* The app's own arguments handed on as they came (with the slot before
     * them, when the app's call lent it): the server's send is called as the
     * app called this one. Its result is checked once, by the app's call. */
    vectorcallfunc send = PyVectorcall_Function(self->send);
    return send != NULL ? send(self->send, args, nargsf, NULL) : PyObject_Vectorcall(self->send, args, nargsf, NULL);
}

static PyObject *
passage_close(PassageObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t end;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "close(scope, error) takes 2 arguments");
        return NULL;
    }
    PyObject *error = args[1], *route = NULL, *last = self->last;
    if (pk_now(&end) < 0) {
        goto fail;
    }
    if (last != NULL) {
        self->last = NULL;
        int failed = read_message(self, last, 1) < 0;
        Py_DECREF(last);
        if (failed) {
            goto fail;
        }
    }
    if (self->complete) {
        end = self->last_ns; /* the request ends at its last byte, as a recorded one's */
    }
    if (error == Py_None) {
        error = self->complete ? pk_empty_text : self->tally->incomplete;
    }
    else if (!PyUnicode_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "close: error must be str or None");
        goto fail;
    }
    route = pk_tally_route_of(self->tally, args[0]);
    if (route == NULL || pk_tally_add_values(self->tally, self->method, route, self->status, error, self->streaming, 0,
                                          end - self->start_ns, self->ttft_ns) < 0) {
        goto fail;
    }
    Py_DECREF(route);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(route);
    pk_report("middleware.passage");
    Py_RETURN_NONE;
}

static void
passage_dealloc(PassageObject *self)
{
    Py_XDECREF(self->tally);
    Py_XDECREF(self->send);
    Py_XDECREF(self->method);
    Py_XDECREF(self->last);
    pk_sse_clear(&self->sse);
    PyObject_Free(self);
}

static PyMethodDef passage_methods[] = {
    {"send", (PyCFunction)passage_send, METH_O,
     "send(message): the same as calling the passage; the middleware hands the app this bound method."},
    {"close", (PyCFunction)(void (*)(void))passage_close, METH_FASTCALL,
     "close(scope, error): the app returned (error None) or raised (its type's name); add the request to the tally."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject PkPassage_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Passage",
    .tp_basicsize = sizeof(PassageObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "An unrecorded request's send (see _traffic._PyPassage); made by Tally.passage.",
    .tp_vectorcall_offset = offsetof(PassageObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)passage_dealloc,
    .tp_methods = passage_methods,
};

PyObject *
pk_new_passage(TallyObject *tally, PyObject *method, PyObject *send)
{
    PassageObject *passage = PyObject_New(PassageObject, &PkPassage_Type);
    if (passage == NULL) {
        return NULL;
    }
    passage->vectorcall = passage_vectorcall;
    passage->tally = (TallyObject *)Py_NewRef(tally);
    passage->method = Py_NewRef(method);
    passage->send = Py_NewRef(send);
    passage->last = NULL;
    passage->sse.pending = NULL;
    passage->ttft_ns = -1;
    passage->status = 0;
    passage->last_ns = 0;
    passage->watching = 1;
    passage->started = passage->streaming = passage->scanning = passage->complete = 0;
    if (pk_now(&passage->start_ns) < 0) {
        Py_DECREF(passage);
        return NULL;
    }
    return (PyObject *)passage;
}

int
pk_passage_ready(void)
{
    response_body = PyUnicode_InternFromString("http.response.body");
    response_start = PyUnicode_InternFromString("http.response.start");
    response_trailers = PyUnicode_InternFromString("http.response.trailers");
    if (!response_body || !response_start || !response_trailers) {
        return -1;
    }
    return PyType_Ready(&PkPassage_Type);
}
