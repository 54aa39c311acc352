/* Exchange.receive: the app's receive, the counterpart of _middleware._PyExchange.receive. That one is a
 * coroutine (`message = await self._receive()`, then whether the client went away); this returns a
 * Receiving, a C coroutine that does the same: it calls the server's receive at its first step, drives
 * what that returns, and reads the message it ends with. No Python frame per message received
 * (docs/overhead.md: "the server's own receive" in where the time goes). */
#include "speedups.h"

typedef struct {
    PyObject_HEAD
    PyObject *exchange; /* an ExchangeObject */
    PyObject *iterator; /* what the server's receive returned, as `await` drives it */
    char started, done;
    char running; /* inside a step: driving it again is refused, as a running coroutine refuses it */
} ReceivingObject;

static PyObject *disconnect_type;

/* The message the server's receive returned: an http.disconnect means the client went away. Perfkit's
 * failure to read it is reported, never raised: the app gets the message. */
static void
read_message(ReceivingObject *self, PyObject *message)
{
    PyObject *type = NULL;
    if (pk_get_item(message, pk_names.type, &type) == 0 && type != NULL) {
        int equal = PyObject_RichCompareBool(type, disconnect_type, Py_EQ);
        if (equal > 0) {
            ((ExchangeObject *)self->exchange)->disconnected = 1;
        }
    }
    Py_XDECREF(type);
    if (PyErr_Occurred()) {
        pk_report("middleware.receive");
    }
}

static PySendResult
receiving_step(ReceivingObject *self, PyObject *value, PyObject *exc, PyObject **result)
{
    *result = NULL;
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "coroutine already executing");
        return PYGEN_ERROR;
    }
    if (self->done || (!self->started && exc != NULL)) {
        self->started = self->done = 1; /* thrown in before its first step: the server is never asked */
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        }
        else {
            PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        }
        return PYGEN_ERROR;
    }
    if (!self->started) {
        self->started = 1;
        PyObject *awaitable = PyObject_CallNoArgs(((ExchangeObject *)self->exchange)->receive);
        self->iterator = awaitable == NULL ? NULL : pk_awaitable_iterator(awaitable, "receive");
        Py_XDECREF(awaitable);
        if (self->iterator == NULL) {
            self->done = 1;
            return PYGEN_ERROR;
        }
    }
    PyObject *iterator = Py_NewRef(self->iterator);
    self->running = 1;
    PySendResult status = exc == NULL ? PyIter_Send(iterator, value, result) : pk_throw_into(iterator, exc, result);
    self->running = 0;
    Py_DECREF(iterator);
    if (status != PYGEN_NEXT) {
        self->done = 1;
        Py_CLEAR(self->iterator);
        if (status == PYGEN_RETURN) {
            read_message(self, *result);
        }
    }
    return status;
}

/* close(): what it drives is closed, as `await` closes it. */
static int
receiving_close(ReceivingObject *self)
{
    if (self->running) {
        PyErr_SetString(PyExc_ValueError, "coroutine already executing");
        return -1;
    }
    self->started = self->done = 1;
    PyObject *iterator = self->iterator;
    self->iterator = NULL;
    int closed = iterator == NULL ? 0 : pk_close_awaitable(iterator);
    Py_XDECREF(iterator);
    return closed;
}

static int
receiving_closes_first(ReceivingObject *self, PyObject *exc)
{
    return self->iterator != NULL && PyErr_GivenExceptionMatches(exc, PyExc_GeneratorExit);
}

static int
receiving_traverse(ReceivingObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->exchange);
    Py_VISIT(self->iterator);
    return 0;
}

static int
receiving_clear(ReceivingObject *self)
{
    Py_CLEAR(self->exchange);
    Py_CLEAR(self->iterator);
    return 0;
}

static void
receiving_dealloc(ReceivingObject *self)
{
    PyObject_GC_UnTrack(self);
    receiving_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyTypeObject PkReceiving_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Receiving",
    .tp_basicsize = sizeof(ReceivingObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "One call of an Exchange's receive: the server's receive, driven, its message read.",
    .tp_dealloc = (destructor)receiving_dealloc,
    .tp_traverse = (traverseproc)receiving_traverse,
    .tp_clear = (inquiry)receiving_clear,
    .tp_as_async = &pk_coroutine_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = pk_coroutine_iternext,
    .tp_methods = pk_coroutine_methods,
};

PyObject *
pk_exchange_receive(PyObject *exchange, PyObject *Py_UNUSED(ignored))
{
    ReceivingObject *self = PyObject_GC_New(ReceivingObject, &PkReceiving_Type);
    if (self == NULL) {
        return NULL;
    }
    self->exchange = Py_NewRef(exchange);
    self->iterator = NULL;
    self->started = self->done = self->running = 0;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

int
pk_receiving_ready(void)
{
    static const PkCoroutineOps ops = {
        .type = &PkReceiving_Type,
        .step = (PySendResult(*)(PyObject *, PyObject *, PyObject *, PyObject **))receiving_step,
        .close = (int (*)(PyObject *))receiving_close,
        .closes_first = (int (*)(PyObject *, PyObject *))receiving_closes_first,
    };
    disconnect_type = PyUnicode_InternFromString("http.disconnect");
    return disconnect_type == NULL || pk_coroutine_ready(&ops) < 0 ? -1 : 0;
}
