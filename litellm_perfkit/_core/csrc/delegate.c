/* What a C awaitable that drives another one needs, as `await` (a generator's `yield from`) does it:
 * StepClock (steps.c) and StagedCall (staged.c). */
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

PySendResult
pk_throw_into(PyObject *iterator, PyObject *exc, PyObject **result)
{
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
    if (*result != NULL) {
        return PYGEN_NEXT;
    }
    if (!PyErr_ExceptionMatches(PyExc_StopIteration)) {
        return PYGEN_ERROR;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    *result = value == NULL ? NULL : PyObject_GetAttrString(value, "value");
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
    return *result == NULL ? PYGEN_ERROR : PYGEN_RETURN;
}

PyObject *
pk_as_iteration(PySendResult status, PyObject *result)
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

PyObject *
pk_thrown(PyObject *const *args, Py_ssize_t nargs)
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
