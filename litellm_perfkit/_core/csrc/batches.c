/* Batches: one event loop's batch clock, the C counterpart of
 * _steps._Batches (the specification and the fallback). A marker it queues
 * on the loop tells when each batch of ready callbacks begins, so that a
 * step's wait splits into the loop's queue and the step's own lateness; with
 * PERFKIT_STEPS=cpu it also charges the loop's CPU between steps to the
 * running request's event_loop stage. The StepClocks (steps.c) update it.
 */
#include "steps.h"

#include <structmember.h>

int64_t pk_loop_idle_ns;

/* loop.call_soon(self.mark, context=self.context): no copy of the current context per batch; or the queue
 * StepAccounting gave, which puts one handle made once on asyncio's ready queue */
static PyObject *
queue_mark(BatchesObject *self)
{
    if (pk_initialised(self->call_soon, (PyObject *)self) < 0) {
        return NULL;
    }
    if (self->queue != NULL && self->queue != Py_None) { /* a member set to None holds None */
        return PyObject_CallNoArgs(self->queue);
    }
    PyObject *args[2] = {self->mark, self->context};
    return PyObject_Vectorcall(self->call_soon, args, 1, pk_names.context_kwnames);
}

int
pk_batches_arm(BatchesObject *self, int64_t now)
{
    self->armed = 1;
    self->start_ns = self->previous_ns = now;
    self->steps = 0;
    PyObject *handle = queue_mark(self);
    if (handle == NULL) {
        self->armed = 0; /* the next step tries again */
        return -1;
    }
    Py_DECREF(handle);
    return 0;
}

static PyObject *
batches_mark(BatchesObject *self, PyObject *Py_UNUSED(ignored))
{
    if (!self->steps) {
        self->armed = 0;
        Py_RETURN_NONE;
    }
    int64_t now;
    if (pk_now(&now) < 0) {
        pk_report("steps.mark");
        self->armed = 0;
        Py_RETURN_NONE;
    }
    self->previous_ns = self->start_ns;
    self->start_ns = now;
    self->steps = 0;
    PyObject *handle = queue_mark(self);
    if (handle == NULL) {
        pk_report("steps.mark");
        self->armed = 0;
    }
    Py_XDECREF(handle);
    Py_RETURN_NONE;
}

static PyObject *
batches_arm_method(BatchesObject *self, PyObject *arg)
{
    int64_t now;
    if (pk_as_int64(arg, &now) < 0 || pk_batches_arm(self, now) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static int
batches_init(BatchesObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"loop", NULL};
    PyObject *loop;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Batches", keywords, &loop)) {
        return -1;
    }
    PyObject *call_soon = PyObject_GetAttr(loop, pk_names.call_soon);
    PyObject *mark = call_soon == NULL ? NULL : PyObject_GetAttr((PyObject *)self, pk_names.mark);
    PyObject *context = mark == NULL ? NULL : PyContext_New();
    if (context == NULL) {
        Py_XDECREF(call_soon);
        Py_XDECREF(mark);
        return -1;
    }
    Py_XSETREF(self->loop, Py_NewRef(loop));
    Py_XSETREF(self->call_soon, call_soon);
    Py_XSETREF(self->mark, mark);
    Py_XSETREF(self->context, context);
    self->start_ns = self->previous_ns = self->steps = 0;
    self->armed = 0;
    self->thread_cpu = 0;
    self->end_ns = self->claimed_ns = self->running = 0;
    self->cpu_end_ns = -1;
    return 0;
}

static int
batches_traverse(BatchesObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->loop);
    Py_VISIT(self->call_soon);
    Py_VISIT(self->mark);
    Py_VISIT(self->context);
    Py_VISIT(self->queue);
    return 0;
}

static int
batches_clear(BatchesObject *self)
{
    Py_CLEAR(self->queue);
    Py_CLEAR(self->loop);
    Py_CLEAR(self->call_soon);
    Py_CLEAR(self->mark);
    Py_CLEAR(self->context);
    return 0;
}

static void
batches_dealloc(BatchesObject *self)
{
    PyObject_GC_UnTrack(self);
    batches_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef batches_methods[] = {
    {"mark", (PyCFunction)batches_mark, METH_NOARGS, "The marker callback: stamps the start of each batch."},
    {"arm", (PyCFunction)batches_arm_method, METH_O, "arm(now): a busy period begins."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef batches_members[] = {
    {"loop", T_OBJECT, offsetof(BatchesObject, loop), READONLY, "the event loop"},
    {"context", T_OBJECT, offsetof(BatchesObject, context), READONLY, "the empty context perfkit's callbacks on the loop run in"},
    {"queue", T_OBJECT, offsetof(BatchesObject, queue), 0, "queues the marker instead of loop.call_soon, or None"},
    {"start_ns", T_LONGLONG, offsetof(BatchesObject, start_ns), 0, "when the current batch began"},
    {"previous_ns", T_LONGLONG, offsetof(BatchesObject, previous_ns), 0, "when the batch before began"},
    {"steps", T_LONGLONG, offsetof(BatchesObject, steps), 0, "request steps since the marker was queued"},
    {"armed", T_BOOL, offsetof(BatchesObject, armed), 0, "a marker is queued"},
    {"thread_cpu", T_BOOL, offsetof(BatchesObject, thread_cpu), 0, "each step's CPU from the thread's CPU clock"},
    {"end_ns", T_LONGLONG, offsetof(BatchesObject, end_ns), 0, "when the last step ended (PERFKIT_STEPS=cpu)"},
    {"cpu_end_ns", T_LONGLONG, offsetof(BatchesObject, cpu_end_ns), 0, "the thread's CPU clock then (-1: none yet)"},
    {"claimed_ns", T_LONGLONG, offsetof(BatchesObject, claimed_ns), 0, "the CPU a stage named since then"},
    {"running", T_LONGLONG, offsetof(BatchesObject, running), 0, "the steps running now"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PkBatches_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Batches",
    .tp_basicsize = sizeof(BatchesObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "One event loop's batch clock (see _steps._Batches).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)batches_init,
    .tp_dealloc = (destructor)batches_dealloc,
    .tp_traverse = (traverseproc)batches_traverse,
    .tp_clear = (inquiry)batches_clear,
    .tp_methods = batches_methods,
    .tp_members = batches_members,
};

/* The loop thread's CPU since the last step ended (cpu: its clock as this step starts), less what a stage
 * named, into the running request's event_loop stage; nothing after an idle gap (_steps._charge_gap). */
void
pk_batches_charge_gap(BatchesObject *batches, int64_t start, int64_t cpu)
{
    int64_t claimed = batches->claimed_ns;
    batches->claimed_ns = 0;
    if (batches->cpu_end_ns < 0 || start - batches->end_ns > pk_loop_idle_ns) {
        return;
    }
    int64_t gap = cpu - batches->cpu_end_ns - claimed;
    if (gap <= 0) {
        return;
    }
    PyObject *timeline = NULL, *generators = NULL, *entry = NULL, *total = NULL, *items = NULL, *last = NULL;
    if (PyContextVar_Get(pk_hooks.timeline_var, NULL, &timeline) < 0) {
        goto failed;
    }
    if (timeline == NULL || timeline == Py_None) {
        goto done;
    }
    PkTimelineObject *fields = pk_timeline(timeline);
    if (fields == NULL) {
        goto failed;
    }
    generators = pk_field(fields->generators, "generators");
    if (generators == NULL) {
        goto failed;
    }
    entry = PyDict_GetItemWithError(generators, pk_hooks.event_loop_stage); /* borrowed */
    if (entry == NULL) {
        if (PyErr_Occurred()) {
            goto failed;
        }
        entry = PyObject_CallFunction(pk_hooks.loop_entry, "OL", timeline, (long long)batches->end_ns);
        if (entry == NULL) {
            goto failed;
        }
    }
    else {
        Py_INCREF(entry);
    }
    if (!PyList_Check(entry) || PyList_GET_SIZE(entry) != PK_GENERATOR_SIZE) {
        PyErr_SetString(PyExc_TypeError, "event_loop: not a generator stage's entry");
        goto failed;
    }
    int64_t own, count;
    if (pk_as_int64(PyList_GET_ITEM(entry, PK_GENERATOR_SELF_NS), &own) < 0
        || pk_as_int64(PyList_GET_ITEM(entry, PK_GENERATOR_ITEMS), &count) < 0) {
        goto failed;
    }
    total = PyLong_FromLongLong(own + gap);
    items = PyLong_FromLongLong(count + 1);
    last = PyLong_FromLongLong(start);
    if (total == NULL || items == NULL || last == NULL) {
        goto failed;
    }
    PyList_SetItem(entry, PK_GENERATOR_SELF_NS, total); /* steals */
    PyList_SetItem(entry, PK_GENERATOR_ITEMS, items);
    PyList_SetItem(entry, PK_GENERATOR_LAST_NS, last);
    total = items = last = NULL;
    goto done;
failed:
    pk_report("steps.event_loop");
done:
    Py_XDECREF(total);
    Py_XDECREF(items);
    Py_XDECREF(last);
    Py_XDECREF(entry);
    Py_XDECREF(generators);
    Py_XDECREF(timeline);
}

int
pk_batches_ready(void)
{
    return PyType_Ready(&PkBatches_Type);
}
