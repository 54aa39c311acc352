/* TaskFactory: the event loop's task factory that clocks the tasks a request
 * starts, the C counterpart of _steps.TaskFactory (the specification and
 * the fallback). A LiteLLM request starts 20-30 tasks, so the factory runs
 * that often per request: here it costs no Python frame. The task holds its
 * request's hand-off (_after.hold) from before it is made (an eager task may
 * finish inside its making) until its coroutine, the StepClock, finishes and
 * releases it, or is freed unfinished (steps.c): no done callback, no loop
 * callback per task. */
#include "speedups.h"

#include <stddef.h>

#define MAX_KEYWORDS 8 /* asyncio passes at most name, context and eager_start */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *previous; /* the factory the host had set, or NULL */
    PyObject *batches;
} TaskFactoryObject;

/* The request whose context the task runs in (a new reference), or NULL
 * without an exception when there is none. */
static PyObject *
request_of(PyObject *context)
{
    PyObject *timeline = NULL;
    if (context == NULL) {
        if (PyContextVar_Get(pk_hooks.timeline_var, NULL, &timeline) < 0) {
            return NULL;
        }
    }
    else {
        timeline = PyObject_GetItem(context, pk_hooks.timeline_var);
        if (timeline == NULL && PyErr_ExceptionMatches(PyExc_KeyError)) {
            PyErr_Clear();
        }
    }
    if (timeline == Py_None || (timeline != NULL && !PyObject_TypeCheck(timeline, &PkTimeline_Type))) {
        /* none, or a request of the pure-Python path (a process that runs both, as the benchmarks do): the
         * Python task factory clocks its tasks */
        Py_CLEAR(timeline);
    }
    return timeline;
}

/* The request that queued ``coroutine`` for this task (_after.claim: the task takes over its hold), a new
 * reference; NULL if none (or with an exception set). _after.expect keys it by the native coroutine itself. */
static PyObject *
claim(PyObject *coroutine)
{
    if (!PyCoro_CheckExact(coroutine)) {
        return NULL;
    }
    PyObject *timeline = PyDict_GetItemWithError(pk_hooks.expected, coroutine); /* borrowed */
    if (timeline == NULL) {
        return NULL;
    }
    Py_INCREF(timeline);
    if (PyDict_DelItem(pk_hooks.expected, coroutine) < 0) {
        Py_CLEAR(timeline);
    }
    return timeline;
}

/* 1 if asyncio would call it a coroutine, 0 if not, -1 with an exception set. */
static int
is_coroutine(PyObject *object)
{
    if (PyCoro_CheckExact(object)) {
        return 1;
    }
    PyObject *answer = PyObject_CallOneArg(pk_hooks.iscoroutine, object);
    if (answer == NULL) {
        return -1;
    }
    int result = PyObject_IsTrue(answer);
    Py_DECREF(answer);
    return result;
}

/* The coroutine clocked into the timeline's steps, holding the request until it finishes (a new
 * reference), or NULL with an exception set (and no hold taken). */
static PyObject *
clocked(TaskFactoryObject *self, PyObject *coroutine, PyObject *timeline)
{
    if (pk_hold(timeline) < 0) {
        return NULL;
    }
    int64_t now;
    PyObject *steps = NULL, *result = NULL;
    /* request_of gave a C timeline: its steps field read directly, as the other C readers do */
    if (pk_now(&now) == 0 && (steps = pk_field(((PkTimelineObject *)timeline)->steps, "steps")) != NULL) {
        /* The StepClock itself is the task's coroutine (steps.c): no native coroutine around it */
        result = pk_new_step_clock(coroutine, steps, self->batches, now, timeline);
    }
    Py_XDECREF(steps);
    if (result == NULL) { /* no clock to release it: the hold just taken ends */
        pk_release(timeline);
    }
    return result;
}

/* The task, as the host's factory or asyncio.Task makes it, for ``coroutine``. */
static PyObject *
make_task(TaskFactoryObject *self, PyObject *loop, PyObject *coroutine, PyObject *const *keywords, PyObject *kwnames)
{
    Py_ssize_t count = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    PyObject *stack[2 + MAX_KEYWORDS];
    if (self->previous != NULL) {
        stack[0] = loop;
        stack[1] = coroutine;
        for (Py_ssize_t i = 0; i < count; i++) {
            stack[2 + i] = keywords[i];
        }
        return PyObject_Vectorcall(self->previous, stack, 2, kwnames);
    }
    /* asyncio.Task(coroutine, loop=loop, **keywords), as the default factory does */
    PyObject *names = PyTuple_New(1 + count);
    if (names == NULL) {
        return NULL;
    }
    PyTuple_SET_ITEM(names, 0, Py_NewRef(pk_names.loop));
    stack[0] = coroutine;
    stack[1] = loop;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyTuple_SET_ITEM(names, 1 + i, Py_NewRef(PyTuple_GET_ITEM(kwnames, i)));
        stack[2 + i] = keywords[i];
    }
    PyObject *task = PyObject_Vectorcall(pk_hooks.task_type, stack, 1, names);
    Py_DECREF(names);
    return task;
}

static PyObject *
factory_vectorcall(TaskFactoryObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t count = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (PyVectorcall_NARGS(nargsf) != 2 || count > MAX_KEYWORDS) {
        PyErr_SetString(PyExc_TypeError, "task factory: (loop, coroutine, **keywords)");
        return NULL;
    }
    PyObject *loop = args[0], *coroutine = args[1];
    PyObject *context = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i), pk_names.context) == 0 && args[2 + i] != Py_None) {
            context = args[2 + i];
        }
    }
    /* perfkit's part: its failures are reported, and the task is made as without it */
    PyObject *queued_by = NULL, *timeline = NULL, *wrapped = NULL;
    if (PyDict_GET_SIZE(pk_hooks.expected) > 0) {
        queued_by = claim(coroutine);
        if (queued_by == NULL && PyErr_Occurred()) {
            pk_report("steps.task_factory");
        }
    }
    timeline = request_of(context);
    if (timeline != NULL && is_coroutine(coroutine) > 0) {
        wrapped = clocked(self, coroutine, timeline);
    }
    if (wrapped == NULL) {
        if (PyErr_Occurred()) {
            pk_report("steps.task_factory");
        }
        Py_CLEAR(timeline);
    }
    PyObject *task = make_task(self, loop, wrapped != NULL ? wrapped : coroutine, args + 2, kwnames);
    if (task == NULL && wrapped != NULL) {
        pk_clock_release(wrapped); /* no task will run it */
    }
    Py_XDECREF(wrapped);
    if (task != NULL) {
        if (queued_by != NULL) {
            pk_release(queued_by);
        }
    }
    Py_XDECREF(timeline);
    Py_XDECREF(queued_by);
    return task;
}

static int
factory_init(TaskFactoryObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"previous", "batches", "clock_class", NULL};
    PyObject *previous, *batches, *clock_class;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO!:TaskFactory", keywords, &previous, &batches, &PyType_Type, &clock_class)) {
        return -1;
    }
    if (clock_class != (PyObject *)&PkStepClock_Type) { /* made in C, without a call of the class */
        PyErr_SetString(PyExc_TypeError, "TaskFactory: clock_class must be the C StepClock, which is a task's coroutine itself");
        return -1;
    }
    if (pk_hooks.task_type == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TaskFactory: setup() has not run");
        return -1;
    }
    Py_XSETREF(self->previous, previous == Py_None ? NULL : Py_NewRef(previous));
    Py_XSETREF(self->batches, Py_NewRef(batches));
    self->vectorcall = (vectorcallfunc)factory_vectorcall;
    return 0;
}

static int
factory_traverse(TaskFactoryObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->previous);
    Py_VISIT(self->batches);
    return 0;
}

static int
factory_clear(TaskFactoryObject *self)
{
    Py_CLEAR(self->previous);
    Py_CLEAR(self->batches);
    return 0;
}

static void
factory_dealloc(TaskFactoryObject *self)
{
    PyObject_GC_UnTrack(self);
    factory_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
factory_call(TaskFactoryObject *self, PyObject *args, PyObject *kwargs)
{
    if (self->vectorcall == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "TaskFactory: not initialised");
        return NULL;
    }
    return PyVectorcall_Call((PyObject *)self, args, kwargs);
}

PyTypeObject PkTaskFactory_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.TaskFactory",
    .tp_basicsize = sizeof(TaskFactoryObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "TaskFactory(previous, batches, clock_class): clocks the tasks a request starts (see _steps.TaskFactory).",
    .tp_vectorcall_offset = offsetof(TaskFactoryObject, vectorcall),
    .tp_call = (ternaryfunc)factory_call,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)factory_init,
    .tp_dealloc = (destructor)factory_dealloc,
    .tp_traverse = (traverseproc)factory_traverse,
    .tp_clear = (inquiry)factory_clear,
};

int
pk_tasks_ready(void)
{
    return PyType_Ready(&PkTaskFactory_Type) < 0 ? -1 : 0;
}
