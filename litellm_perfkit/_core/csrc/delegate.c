/* perfkit's C coroutines, StepClock (steps.c) and StagedCall (stagedcall.c): each
 * drives another awaitable as `await` (a generator's `yield from`) does, and has the methods of a
 * coroutine, made here from its type's step and close. */
#include "speedups.h"

PyObject *
pk_awaitable_iterator(PyObject *awaitable, const char *who)
{
    if (PyCoro_CheckExact(awaitable)) {
        return Py_NewRef(awaitable);
    }
    PyAsyncMethods *async = Py_TYPE(awaitable)->tp_as_async;
    if (async == NULL || async->am_await == NULL) {
        PyErr_Format(PyExc_TypeError, "%s: %.100s can't be awaited", who, Py_TYPE(awaitable)->tp_name);
        return NULL;
    }
    PyObject *iterator = async->am_await(awaitable);
    if (iterator != NULL && !PyIter_Check(iterator)) {
        PyErr_Format(PyExc_TypeError, "__await__() returned non-iterator of type '%.100s'", Py_TYPE(iterator)->tp_name);
        Py_CLEAR(iterator);
    }
    return iterator;
}

PyObject *
pk_forward(PyObject *inner, void *closure)
{
    PyObject *name = *(PyObject **)closure;
    if (inner == NULL) {
        PyErr_SetObject(PyExc_AttributeError, name);
        return NULL;
    }
    return PyObject_GetAttr(inner, name);
}

/* throw's outcome as a send result: what it yielded, or returned (StopIteration's value), or raised. */
static PySendResult
throw_outcome(PyObject **result)
{
    if (*result != NULL) {
        return PYGEN_NEXT;
    }
    if (!PyErr_ExceptionMatches(PyExc_StopIteration)) {
        return PYGEN_ERROR;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    *result = value == NULL ? NULL : PyObject_GetAttr(value, pk_names.value);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return *result == NULL ? PYGEN_ERROR : PYGEN_RETURN;
}

PySendResult
pk_throw_into(PyObject *iterator, PyObject *exc, PyObject **result)
{
    if (PyCoro_CheckExact(iterator) || PyGen_CheckExact(iterator)) {
        /* they have throw: called unbound (a bound method is an object made per throw) */
        PyObject *args[] = {NULL, iterator, exc};
        *result = PyObject_VectorcallMethod(pk_names.throw_, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        return throw_outcome(result);
    }
    PyObject *throw = PyObject_GetAttr(iterator, pk_names.throw_);
    if (throw == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
            return PYGEN_ERROR;
        }
        PyErr_Clear(); /* an iterator without throw: the exception is raised here, as `yield from` does */
        PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        *result = NULL;
        return PYGEN_ERROR;
    }
    *result = PyObject_CallOneArg(throw, exc);
    Py_DECREF(throw);
    return throw_outcome(result);
}

/* A send result as an iterator's: the value yielded, or NULL with StopIteration(value) or the error. */
static PyObject *
as_iteration(PySendResult status, PyObject *result)
{
    if (status != PYGEN_RETURN) {
        return result;
    }
    if (result == Py_None) {
        PyErr_SetNone(PyExc_StopIteration);
    }
    else {
        PyObject *stop = PyObject_CallOneArg(PyExc_StopIteration, result);
        if (stop != NULL) {
            PyErr_SetObject(PyExc_StopIteration, stop);
            Py_DECREF(stop);
        }
    }
    Py_DECREF(result);
    return NULL;
}

/* The exception throw(type[, value[, traceback]]) raises, or NULL with TypeError. */
static PyObject *
thrown(PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs < 1 || nargs > 3) {
        PyErr_SetString(PyExc_TypeError, "throw() takes 1 to 3 arguments");
        return NULL;
    }
    PyObject *type = args[0];
    PyObject *value = nargs > 1 && args[1] != Py_None ? args[1] : NULL;
    PyObject *traceback = nargs > 2 && args[2] != Py_None ? args[2] : NULL;
    PyObject *exc;
    if (PyExceptionInstance_Check(type)) {
        if (value != NULL) {
            PyErr_SetString(PyExc_TypeError, "instance exception may not have a separate value");
            return NULL;
        }
        exc = Py_NewRef(type);
    }
    else if (PyExceptionClass_Check(type)) {
        if (value != NULL && PyObject_TypeCheck(value, (PyTypeObject *)type)) {
            exc = Py_NewRef(value);
        }
        else {
            exc = value == NULL ? PyObject_CallNoArgs(type) : PyObject_CallOneArg(type, value);
            if (exc == NULL) {
                return NULL;
            }
        }
    }
    else {
        PyErr_SetString(PyExc_TypeError, "exceptions must be classes or instances deriving from BaseException");
        return NULL;
    }
    if (traceback != NULL && PyException_SetTraceback(exc, traceback) < 0) {
        Py_DECREF(exc);
        return NULL;
    }
    return exc;
}

int
pk_close_awaitable(PyObject *awaitable)
{
    PyObject *close = PyObject_GetAttr(awaitable, pk_names.close);
    if (close == NULL) {
        if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
            PyErr_Clear();
            return 0;
        }
        return -1;
    }
    PyObject *result = PyObject_CallNoArgs(close);
    Py_DECREF(close);
    Py_XDECREF(result);
    return result == NULL ? -1 : 0;
}

int
pk_refuse_reentry(int running)
{
    if (running) {
        PyErr_SetString(PyExc_ValueError, "coroutine already executing");
    }
    return running != 0;
}

/* -- the C coroutines' methods ---------------------------------------------------------------------- */

#define PK_MAX_COROUTINE_TYPES 4
static PkCoroutineOps coroutine_types[PK_MAX_COROUTINE_TYPES];
static int coroutine_count;

int
pk_coroutine_ready(const PkCoroutineOps *ops)
{
    if (coroutine_count == PK_MAX_COROUTINE_TYPES) {
        PyErr_SetString(PyExc_RuntimeError, "pk_coroutine_ready: PK_MAX_COROUTINE_TYPES is too small");
        return -1;
    }
    coroutine_types[coroutine_count++] = *ops;
    return PyType_Ready(ops->type);
}

/* The operations of a registered type: only its instances have these methods. */
static const PkCoroutineOps *
ops_of(PyObject *self)
{
    int i = 0;
    while (i < coroutine_count - 1 && coroutine_types[i].type != Py_TYPE(self)) {
        i++;
    }
    return &coroutine_types[i];
}

static PySendResult
coroutine_am_send(PyObject *self, PyObject *value, PyObject **result)
{
    return ops_of(self)->step(self, value, NULL, result);
}

static PyObject *
coroutine_await(PyObject *self)
{
    return Py_NewRef(self);
}

PyAsyncMethods pk_coroutine_async = {
    .am_await = coroutine_await,
    .am_send = coroutine_am_send,
};

PyObject *
pk_coroutine_iternext(PyObject *self)
{
    PyObject *result;
    PySendResult status = ops_of(self)->step(self, Py_None, NULL, &result);
    return as_iteration(status, result);
}

static PyObject *
coroutine_send(PyObject *self, PyObject *value)
{
    PyObject *result;
    PySendResult status = ops_of(self)->step(self, value, NULL, &result);
    return as_iteration(status, result);
}

static PyObject *
coroutine_throw(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    const PkCoroutineOps *ops = ops_of(self);
    PyObject *exc = thrown(args, nargs);
    if (exc == NULL) {
        return NULL;
    }
    PyObject *result = NULL;
    if (ops->closes_first(self, exc)) {
        if (ops->close(self) == 0) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        }
    }
    else {
        PySendResult status = ops->step(self, NULL, exc, &result);
        result = as_iteration(status, result);
    }
    Py_DECREF(exc);
    return result;
}

static PyObject *
coroutine_close(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (ops_of(self)->close(self) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

PyMethodDef pk_coroutine_methods[] = {
    {"send", (PyCFunction)coroutine_send, METH_O, NULL},
    {"throw", (PyCFunction)(void (*)(void))coroutine_throw, METH_FASTCALL, NULL},
    {"close", (PyCFunction)coroutine_close, METH_NOARGS, NULL},
    {NULL, NULL, 0, NULL},
};
