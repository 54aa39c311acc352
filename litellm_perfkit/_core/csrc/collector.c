/* ContextVar sets and resets with the cyclic collector off: _collector.py's
 * set_outside_collection, reset_outside_collection and reset_unless_collected
 * (the reference, and the pure-Python path's), which the LiteLLM
 * instrumentation calls for each outbound wait and each chunk of a relayed
 * stream. A collection that starts inside a ContextVar.set, and whose
 * finalizers set a ContextVar of the same context, crashes CPython < 3.12
 * (gh-148891): one due then starts at the next allocation instead. */
#include "speedups.h"

PyObject *
pk_set_outside_collection(PyObject *var, PyObject *value)
{
    int enabled = PyGC_Disable();
    PyObject *token = PyContextVar_Set(var, value);
    if (enabled) {
        PyGC_Enable();
    }
    return token;
}

int
pk_reset_outside_collection(PyObject *var, PyObject *token)
{
    int enabled = PyGC_Disable();
    int result = PyContextVar_Reset(var, token);
    if (enabled) {
        PyGC_Enable();
    }
    return result;
}

static int
var_and_other(const char *name, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2 || !PyContextVar_CheckExact(args[0])) {
        PyErr_Format(PyExc_TypeError, "%s(var: ContextVar, value_or_token)", name);
        return -1;
    }
    return 0;
}

PyObject *
pk_set_outside_collection_function(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (var_and_other("set_outside_collection", args, nargs) < 0) {
        return NULL;
    }
    return pk_set_outside_collection(args[0], args[1]);
}

PyObject *
pk_reset_outside_collection_function(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (var_and_other("reset_outside_collection", args, nargs) < 0 || pk_reset_outside_collection(args[0], args[1]) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

int
pk_closed_by_collector(PyObject *exc_type)
{
    if (exc_type != PyExc_GeneratorExit || pk_hooks.closed_by_collector == NULL) {
        return 0;
    }
    PyObject *answer = PyObject_CallOneArg(pk_hooks.closed_by_collector, exc_type);
    int collected = answer == NULL ? -1 : PyObject_IsTrue(answer);
    Py_XDECREF(answer);
    return collected;
}

/* 1 if the exception being handled (sys.exc_info()) is the collector's GeneratorExit closing garbage,
 * 0 if not, -1 with an exception set. */
static int
closing_garbage(void)
{
#if PY_VERSION_HEX >= 0x030B0000
    PyObject *handled = PyErr_GetHandledException();
    PyObject *type = handled == NULL ? NULL : Py_NewRef(Py_TYPE(handled));
    Py_XDECREF(handled);
#else
    PyObject *type, *value, *traceback;
    PyErr_GetExcInfo(&type, &value, &traceback);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
#endif
    int collected = pk_closed_by_collector(type);
    Py_XDECREF(type);
    return collected;
}

PyObject *
pk_reset_unless_collected_function(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (var_and_other("reset_unless_collected", args, nargs) < 0) {
        return NULL;
    }
    int collected = closing_garbage();
    if (collected < 0 || (collected == 0 && pk_reset_outside_collection(args[0], args[1]) < 0)) {
        return NULL;
    }
    Py_RETURN_NONE;
}
