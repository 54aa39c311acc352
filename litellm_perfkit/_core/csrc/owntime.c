/* OwnTime: _stage._Timed in C. Awaited once per item of a timed async generator (its awaitable is the
 * item's __anext__()), it drives that awaitable step by step and adds each step's time to own_ns: time
 * suspended is not the generator's own. It keeps the longest gap between items too. The reference's
 * await made a generator, its steps two ints and, at each item's end, a StopIteration with its
 * traceback; a LiteLLM stream runs it per chunk (docs/overhead.md#allocations). */
#include "speedups.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *awaitable;  /* what the next await drives: set before each */
    PyObject *iterator;   /* its iterator, from the await's first step to its last */
    long long own_ns;     /* the steps' time, every await's */
    long long last_ns;    /* when the last await returned (an item), or when made */
    long long max_gap_ns; /* the longest time from one item (or the start) to the next */
    char running;         /* inside a step: driving it again is refused, as a running coroutine refuses it */
} OwnTimeObject;

/* One step of the current await: send value (or throw exc) into its awaitable, timed. */
static PySendResult
own_step(OwnTimeObject *self, PyObject *value, PyObject *exc, PyObject **result)
{
    *result = NULL;
    if (pk_refuse_reentry(self->running)) {
        return PYGEN_ERROR;
    }
    if (self->iterator == NULL) {
        if (self->awaitable == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "OwnTime awaited with no awaitable");
            return PYGEN_ERROR;
        }
        if (exc != NULL) { /* thrown in before the first step, as into a coroutine that never ran */
            PyObject *awaitable = self->awaitable;
            self->awaitable = NULL;
            int closed = pk_close_awaitable(awaitable);
            Py_DECREF(awaitable);
            if (closed == 0) {
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            }
            return PYGEN_ERROR;
        }
        self->iterator = pk_awaitable_iterator(self->awaitable, "OwnTime");
        Py_CLEAR(self->awaitable);
        if (self->iterator == NULL) {
            return PYGEN_ERROR;
        }
    }
    int64_t start, end;
    if (pk_now(&start) < 0) {
        return PYGEN_ERROR;
    }
    PyObject *iterator = Py_NewRef(self->iterator);
    self->running = 1;
    PySendResult status = exc == NULL ? PyIter_Send(iterator, value, result) : pk_throw_into(iterator, exc, result);
    self->running = 0;
    Py_DECREF(iterator);
    PyObject *type, *raised, *traceback;
    PyErr_Fetch(&type, &raised, &traceback); /* a test's fake clock is Python: read with no exception set */
    if (pk_now(&end) < 0) {                  /* only that clock fails: what the step made is dropped */
        Py_XDECREF(type);
        Py_XDECREF(raised);
        Py_XDECREF(traceback);
        Py_CLEAR(*result);
        return PYGEN_ERROR;
    }
    PyErr_Restore(type, raised, traceback);
    self->own_ns += end - start;
    if (status != PYGEN_NEXT) {
        Py_CLEAR(self->iterator); /* the next await starts on the next awaitable */
    }
    if (status == PYGEN_RETURN) {
        if (end - self->last_ns > self->max_gap_ns) {
            self->max_gap_ns = end - self->last_ns;
        }
        self->last_ns = end;
    }
    return status;
}

static int
own_init(OwnTimeObject *self, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) || (kwargs != NULL && PyDict_GET_SIZE(kwargs))) {
        PyErr_SetString(PyExc_TypeError, "OwnTime() takes no arguments");
        return -1;
    }
    int64_t now;
    if (pk_now(&now) < 0) {
        return -1;
    }
    self->own_ns = self->max_gap_ns = 0;
    self->last_ns = now;
    return 0;
}

static int
own_close(OwnTimeObject *self)
{
    if (pk_refuse_reentry(self->running)) {
        return -1;
    }
    PyObject *closing = self->iterator != NULL ? self->iterator : self->awaitable;
    self->iterator = self->awaitable = NULL;
    if (closing == NULL) {
        return 0;
    }
    int closed = pk_close_awaitable(closing);
    Py_DECREF(closing);
    return closed;
}

static int
own_closes_first(OwnTimeObject *self, PyObject *exc)
{
    return self->iterator != NULL && PyErr_GivenExceptionMatches(exc, PyExc_GeneratorExit);
}

static int
own_traverse(OwnTimeObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->awaitable);
    Py_VISIT(self->iterator);
    return 0;
}

static int
own_clear(OwnTimeObject *self)
{
    Py_CLEAR(self->awaitable);
    Py_CLEAR(self->iterator);
    return 0;
}

static void
own_dealloc(OwnTimeObject *self)
{
    PyObject_GC_UnTrack(self);
    own_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef own_members[] = {
    {"awaitable", T_OBJECT, offsetof(OwnTimeObject, awaitable), 0, "what the next await drives"},
    {"own_ns", T_LONGLONG, offsetof(OwnTimeObject, own_ns), READONLY, "the steps' time, in ns"},
    {"max_gap_ns", T_LONGLONG, offsetof(OwnTimeObject, max_gap_ns), READONLY,
     "the longest time from one item (or the start) to the next, in ns"},
    {NULL},
};

PyTypeObject PkOwnTime_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.OwnTime",
    .tp_basicsize = sizeof(OwnTimeObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "OwnTime()\n--\n\nDrives its awaitable step by step when awaited, adding each step's time to own_ns (see _stage._Timed).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)own_init,
    .tp_dealloc = (destructor)own_dealloc,
    .tp_traverse = (traverseproc)own_traverse,
    .tp_clear = (inquiry)own_clear,
    .tp_as_async = &pk_coroutine_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = pk_coroutine_iternext,
    .tp_methods = pk_coroutine_methods,
    .tp_members = own_members,
};

int
pk_own_time_ready(void)
{
    static const PkCoroutineOps ops = {
        .type = &PkOwnTime_Type,
        .step = (PySendResult(*)(PyObject *, PyObject *, PyObject *, PyObject **))own_step,
        .close = (int (*)(PyObject *))own_close,
        .closes_first = (int (*)(PyObject *, PyObject *))own_closes_first,
    };
    return pk_coroutine_ready(&ops);
}
