/* Stage: __init__, __enter__ and __exit__ of _stage.Stage (the Python
 * subclass adds the async forms and the decorator). */
#include "speedups.h"

#include <structmember.h>

typedef PkStageObject StageObject;

static int
stage_init(StageObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"name", NULL};
    PyObject *name;
    if (kwargs == NULL && PyTuple_GET_SIZE(args) == 1) {
        name = PyTuple_GET_ITEM(args, 0);
    }
    else if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Stage", keywords, &name)) {
        return -1;
    }
    PyObject *unset = PyLong_FromLong(-1);
    if (unset == NULL) {
        return -1;
    }
    Py_XSETREF(self->name, Py_NewRef(name));
    Py_XSETREF(self->index, unset);
    Py_CLEAR(self->timeline);
    return 0;
}

static void
stage_close(StageObject *self)
{
    Py_CLEAR(self->timeline);
    Py_CLEAR(self->parent);
    Py_CLEAR(self->enclosing);
    Py_CLEAR(self->host);
}

void
pk_stage_enter(PkStageObject *self)
{
    PyObject *timeline = NULL;
    if (PyContextVar_Get(pk_hooks.timeline_var, NULL, &timeline) < 0) {
        pk_report("stage.enter"); /* the stage is not recorded; the app goes on */
        stage_close(self);
        return;
    }
    if (timeline == NULL || timeline == Py_None) {
        Py_XDECREF(timeline);
        return; /* outside a request: nothing to record */
    }
    pk_stage_enter_in(self, timeline);
}

void
pk_stage_enter_in(PkStageObject *self, PyObject *timeline)
{
    PyObject *index = NULL, *parent = NULL, *enclosing = NULL;
    PkTimelineObject *fields = pk_timeline(timeline);
    if (fields == NULL || (index = PyLong_FromSsize_t(fields->next_index)) == NULL) {
        goto fail;
    }
    fields->next_index++;
    if ((enclosing = pk_open_stage()) == NULL) {
        goto fail;
    }
    if (PyObject_TypeCheck(enclosing, &PkStage_Type) && ((StageObject *)enclosing)->index != NULL) {
        parent = Py_NewRef(((StageObject *)enclosing)->index);
    }
    else {
        parent = PyLong_FromLong(-1);
    }
    int64_t start;
    if (parent == NULL || pk_now(&start) < 0) {
        goto fail;
    }
    self->start = start;
    /* Last, so that a failure above leaves the context as it was. */
    if (pk_set_open_stage((PyObject *)self) < 0) {
        goto fail;
    }
    Py_XSETREF(self->timeline, timeline);
    Py_XSETREF(self->index, index);
    Py_XSETREF(self->parent, parent);
    Py_XSETREF(self->enclosing, enclosing);
    if (fields->span_context != NULL && fields->span_context != Py_None) {
        /* The host traces this request: the stage is its current span while open. */
        PyObject *host = PyObject_CallOneArg(pk_hooks.host_stage_enter, (PyObject *)self);
        if (host == NULL) {
            pk_report("stage.host");
        }
        Py_XSETREF(self->host, host);
    }
    return;

fail:
    pk_report("stage.enter"); /* the stage is not recorded; the app goes on */
    Py_XDECREF(timeline);
    Py_XDECREF(index);
    Py_XDECREF(parent);
    Py_XDECREF(enclosing);
    stage_close(self);
}

static PyObject *
stage_enter(StageObject *self, PyObject *Py_UNUSED(ignored))
{
    if (pk_initialised(self->name, (PyObject *)self) < 0) {
        return NULL;
    }
    pk_stage_enter(self);
    return Py_NewRef(self);
}

/* Append a finished stage (PK_FINISHED_*: index, name, start, end, parent) to the timeline's
 * StageList, raw; or, when the timeline's ``finished`` was set to a list, as a tuple. */
static int
record_stage(StageObject *self)
{
    PkFinishedStage stage = {.name = self->name};
    stage.numbers[PK_FINISHED_START_NS] = self->start;
    if (pk_now(&stage.numbers[PK_FINISHED_END_NS]) < 0 ||
        pk_as_int64(self->index, &stage.numbers[PK_FINISHED_INDEX]) < 0 ||
        pk_as_int64(self->parent, &stage.numbers[PK_FINISHED_PARENT]) < 0) {
        return -1;
    }
    PyObject *finished = ((PkTimelineObject *)self->timeline)->finished; /* checked at enter */
    if (finished != NULL && Py_IS_TYPE(finished, &PkStageList_Type)) {
        return pk_stagelist_append(finished, &stage);
    }
    if (finished == NULL || !PyList_Check(finished)) {
        PyErr_SetString(PyExc_TypeError, "timeline.finished is not a StageList or a list");
        return -1;
    }
    PyObject *record = pk_finished_tuple(&stage);
    int result = record == NULL ? -1 : PyList_Append(finished, record);
    Py_XDECREF(record);
    return result;
}

void
pk_stage_exit(PkStageObject *self, PyObject *exc_type)
{
    if (self->timeline == NULL) {
        return;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    /* Garbage being closed by the collector, in another context: touch
     * nothing (see _collector.py). */
    int collected = pk_closed_by_collector(exc_type);
    if (collected != 0) {
        if (collected < 0) {
            pk_report("stage.exit");
        }
        stage_close(self);
        PyErr_Restore(type, value, traceback);
        return;
    }
    if (record_stage(self) < 0) {
        pk_report("stage.exit"); /* clears the exception before the context is touched */
    }
    if (self->host != NULL && self->host != Py_None) {
        PyObject *result = PyObject_CallOneArg(pk_hooks.host_stage_exit, self->host);
        if (result == NULL) {
            pk_report("stage.host");
        }
        Py_XDECREF(result);
    }
    /* The enclosing stage is open again, recorded or not; in the task the stage exits in, which is
     * another than it entered in when a generator moved between tasks. */
    if (pk_set_open_stage(self->enclosing) < 0) {
        pk_report("stage.exit");
    }
    stage_close(self);
    PyErr_Restore(type, value, traceback);
}

static PyObject *
stage_exit(StageObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    pk_stage_exit(self, nargs > 0 ? args[0] : NULL);
    Py_RETURN_NONE;
}

static int
stage_traverse(StageObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->name);
    Py_VISIT(self->timeline);
    Py_VISIT(self->index);
    Py_VISIT(self->parent);
    Py_VISIT(self->enclosing);
    Py_VISIT(self->host);
    return 0;
}

static int
stage_clear(StageObject *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->index);
    stage_close(self);
    return 0;
}

PK_FREE_LIST_ALLOC(stage_alloc, free_stages, &PkStage_Type)

static void
stage_dealloc(StageObject *self)
{
    /* A Python subclass's instance is freed by subtype_dealloc, which calls
     * this and then drops its reference to the (heap) subclass itself. */
    PyObject_GC_UnTrack(self);
    stage_clear(self);
    pk_free_list_free(&free_stages, &PkStage_Type, (PyObject *)self);
}

static PyMethodDef stage_methods[] = {
    {"__enter__", (PyCFunction)stage_enter, METH_NOARGS, NULL},
    {"__exit__", (PyCFunction)(void (*)(void))stage_exit, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef stage_members[] = {
    {"name", T_OBJECT_EX, offsetof(StageObject, name), 0, "the stage's name"},
    {"index", T_OBJECT, offsetof(StageObject, index), READONLY, "its index in the request, -1 until recorded"},
    {"start_ns", T_LONGLONG, offsetof(StageObject, start), READONLY, "when it was entered (perf_counter_ns)"},
    {"_timeline", T_OBJECT, offsetof(StageObject, timeline), READONLY, "the timeline while open, else None"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PkStage_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Stage",
    .tp_basicsize = sizeof(StageObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Records one named stage of the current request (see _stage.Stage).",
    .tp_alloc = stage_alloc,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)stage_init,
    .tp_dealloc = (destructor)stage_dealloc,
    .tp_traverse = (traverseproc)stage_traverse,
    .tp_clear = (inquiry)stage_clear,
    .tp_methods = stage_methods,
    .tp_members = stage_members,
};
