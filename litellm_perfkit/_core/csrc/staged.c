/* StagedFunction: what _stage.Stage's decorator (and Stage._summed) makes of a function with the
 * accelerator; its async calls are StagedCalls (stagedcall.c).
 *
 * The decorator's Python wrappers (_stage.Stage.__call__ and Stage._summed, the reference) cost each
 * call a frame, and each async call a coroutine of its own and a Stage, every step of the call passing
 * through that coroutine's frame. A StagedFunction called outside a request returns what the function
 * returns, nothing added. In a request, a sync call runs inside a Stage made here (a sum stage's call
 * is timed and added to the stage's calls), and an async call returns a StagedCall. */
#include "speedups.h"

#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *function;
    PyObject *dict; /* functools.update_wrapper's attributes */
    vectorcallfunc vectorcall;
    char is_async;
    char sum; /* kind "sum": its calls summed into one stage (Timeline.add_generator_time), not a stage each */
} StagedFunctionObject;

static PyObject *minus_one, *sum_kind;

/* The open stage's index into *parent, -1 for none; -1 with an exception set. */
static int
open_parent(int64_t *parent)
{
    PyObject *enclosing = pk_open_stage();
    if (enclosing == NULL) {
        return -1;
    }
    int result = 0;
    *parent = -1;
    if (PyObject_TypeCheck(enclosing, &PkStage_Type) && ((PkStageObject *)enclosing)->index != NULL) {
        result = pk_as_int64(((PkStageObject *)enclosing)->index, parent);
    }
    else if (enclosing != Py_None) {
        PyObject *index = PyObject_GetAttrString(enclosing, "index");
        result = index == NULL ? -1 : pk_as_int64(index, parent);
        Py_XDECREF(index);
    }
    Py_DECREF(enclosing);
    return result;
}

/* One call (SUM_CALL: start, end, parent) appended raw to a sum stage's calls, the C timeline's Int64List:
 * 0, or -1 with an exception set and the calls as they were. */
static int
append_call(PyObject *intervals, int64_t start, int64_t end, int64_t parent)
{
    int64_t call[PK_SUM_CALL_SIZE];
    call[PK_SUM_CALL_START_NS] = start;
    call[PK_SUM_CALL_END_NS] = end;
    call[PK_SUM_CALL_PARENT] = parent;
    return pk_int64list_append(intervals, call, PK_SUM_CALL_SIZE);
}

/* A sum stage's entry's ints, updated for one more call from start to end; -1 with an exception set. */
static int
add_to_entry(PyObject *entry, int64_t start, int64_t end)
{
    int64_t self_ns, items, parent;
    if (pk_as_int64(PyList_GET_ITEM(entry, PK_GENERATOR_SELF_NS), &self_ns) < 0 ||
        pk_as_int64(PyList_GET_ITEM(entry, PK_GENERATOR_ITEMS), &items) < 0 || open_parent(&parent) < 0) {
        return -1;
    }
    /* The entry's time and count, as new ints first: only the call's append can fail after them, and it
     * leaves the calls as they were. The call's end is the entry's last end too. */
    PyObject *last = PyLong_FromLongLong(end), *own = PyLong_FromLongLong(self_ns + end - start);
    PyObject *count = PyLong_FromLongLong(items + 1);
    int result = last != NULL && own != NULL && count != NULL ? 0 : -1;
    if (result == 0) {
        result = append_call(PyList_GET_ITEM(entry, PK_GENERATOR_INTERVALS), start, end, parent);
    }
    if (result == 0) {
        PyList_SetItem(entry, PK_GENERATOR_LAST_NS, last); /* steals */
        PyList_SetItem(entry, PK_GENERATOR_SELF_NS, own);
        PyList_SetItem(entry, PK_GENERATOR_ITEMS, count);
        return 0;
    }
    Py_XDECREF(last);
    Py_XDECREF(own);
    Py_XDECREF(count);
    return -1;
}

/* A sum stage's entry made at its first call, from start to end (GeneratorEntry.new's, its calls an Int64List):
 * timeline.generators[name], at the timeline's next index. 0, or -1 with an exception set. */
static int
new_entry(PkTimelineObject *timeline, PyObject *generators, PyObject *name, int64_t start, int64_t end)
{
    int64_t parent;
    if (open_parent(&parent) < 0) {
        return -1;
    }
    PyObject *entry = PyList_New(PK_GENERATOR_SIZE);
    PyObject *intervals = entry == NULL ? NULL : PyObject_CallNoArgs((PyObject *)&PkInt64List_Type);
    if (intervals == NULL) {
        Py_XDECREF(entry);
        return -1;
    }
    PyList_SET_ITEM(entry, PK_GENERATOR_INTERVALS, intervals);
    PyList_SET_ITEM(entry, PK_GENERATOR_KIND, Py_NewRef(sum_kind));
    int64_t numbers[][2] = {
        {PK_GENERATOR_INDEX, (int64_t)timeline->next_index},
        {PK_GENERATOR_FIRST_NS, start},
        {PK_GENERATOR_LAST_NS, end},
        {PK_GENERATOR_PARENT, parent},
        {PK_GENERATOR_SELF_NS, end - start},
        {PK_GENERATOR_ITEMS, 1},
    };
    int result = append_call(intervals, start, end, parent);
    for (size_t i = 0; i < sizeof numbers / sizeof numbers[0] && result == 0; i++) {
        PyObject *number = PyLong_FromLongLong(numbers[i][1]);
        if (number == NULL) {
            result = -1;
        }
        else {
            PyList_SET_ITEM(entry, numbers[i][0], number);
        }
    }
    if (result == 0) {
        result = PyDict_SetItem(generators, name, entry);
    }
    if (result == 0) {
        timeline->next_index++;
    }
    Py_DECREF(entry); /* a list with NULL items left by a failure frees as such */
    return result;
}

/* One call of a sum stage, from start to now, into the timeline's entry for it (the reference:
 * Timeline.add_generator_time(name, start, end - start, 1, "sum")). Keeps the exception being raised;
 * perfkit's own failure is reported. */
void
pk_add_sum_call(PyObject *timeline, PyObject *name, int64_t start)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    int64_t end;
    PyObject *generators = ((PkTimelineObject *)timeline)->generators;
    int result = pk_now(&end);
    if (result == 0 && (generators == NULL || !PyDict_CheckExact(generators))) {
        PyErr_SetString(PyExc_TypeError, "the timeline's generators must be a dict");
        result = -1;
    }
    if (result == 0) {
        PyObject *entry = PyDict_GetItemWithError(generators, name); /* borrowed */
        if (entry == NULL) {
            result = PyErr_Occurred() ? -1 : new_entry((PkTimelineObject *)timeline, generators, name, start, end);
        }
        else if (PyList_CheckExact(entry) && PyList_GET_SIZE(entry) == PK_GENERATOR_SIZE &&
                 Py_IS_TYPE(PyList_GET_ITEM(entry, PK_GENERATOR_INTERVALS), &PkInt64List_Type)) {
            Py_INCREF(entry);
            result = add_to_entry(entry, start, end);
            Py_DECREF(entry);
        }
        else {
            PyErr_Format(PyExc_TypeError, "%R: not a sum stage's entry", name);
            result = -1;
        }
    }
    if (result < 0) {
        pk_report("stage.sum");
    }
    PyErr_Restore(type, value, traceback);
}

/* -- StagedFunction --------------------------------------------------------------------------------- */

PkStageObject *
pk_new_stage(PyTypeObject *type, PyObject *name)
{
    PkStageObject *stage = (PkStageObject *)type->tp_alloc(type, 0);
    if (stage != NULL) {
        stage->name = Py_NewRef(name);
        stage->index = Py_NewRef(minus_one);
    }
    return stage;
}

static PyObject *
function_vectorcall(StagedFunctionObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PyObject *timeline = NULL;
    if (PyContextVar_Get(pk_hooks.timeline_var, NULL, &timeline) < 0) {
        pk_report("stage.call"); /* called as if outside a request */
    }
    if (timeline == NULL || timeline == Py_None) {
        Py_XDECREF(timeline);
        return PyObject_Vectorcall(self->function, args, nargsf, kwnames);
    }
    PyObject *result = NULL;
    if (self->is_async) {
        PyObject *awaitable = PyObject_Vectorcall(self->function, args, nargsf, kwnames);
        result = awaitable == NULL ? NULL : pk_staged_call(self->name, awaitable, self->sum);
        if (result == NULL && awaitable != NULL) {
            pk_report("stage.call"); /* the call goes on unrecorded */
            result = Py_NewRef(awaitable);
        }
        Py_XDECREF(awaitable);
    }
    else if (self->sum) {
        int64_t start;
        if (pk_timeline(timeline) == NULL || pk_now(&start) < 0) {
            pk_report("stage.sum");
            result = PyObject_Vectorcall(self->function, args, nargsf, kwnames);
        }
        else {
            result = PyObject_Vectorcall(self->function, args, nargsf, kwnames);
            pk_add_sum_call(timeline, self->name, start);
        }
    }
    else {
        PkStageObject *stage = pk_new_stage(&PkStage_Type, self->name);
        if (stage == NULL) {
            pk_report("stage.call");
            result = PyObject_Vectorcall(self->function, args, nargsf, kwnames);
        }
        else {
            pk_stage_enter_in(stage, Py_NewRef(timeline));
            result = PyObject_Vectorcall(self->function, args, nargsf, kwnames);
            pk_stage_exit(stage, result == NULL ? PyErr_Occurred() : NULL);
            Py_DECREF(stage);
        }
    }
    Py_DECREF(timeline);
    return result;
}

static PyObject *
function_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"name", "function", "is_async", "kind", NULL};
    PyObject *name, *function, *kind = NULL;
    int is_async;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "UOp|U:StagedFunction", keywords, &name, &function, &is_async,
                                     &kind)) {
        return NULL;
    }
    int sum = kind != NULL && PyUnicode_CompareWithASCIIString(kind, "sum") == 0;
    if (kind != NULL && !sum && PyUnicode_CompareWithASCIIString(kind, "block") != 0) {
        PyErr_Format(PyExc_ValueError, "StagedFunction: kind must be 'block' or 'sum', not %R", kind);
        return NULL;
    }
    if (!PyCallable_Check(function)) {
        PyErr_SetString(PyExc_TypeError, "StagedFunction: function must be callable");
        return NULL;
    }
    StagedFunctionObject *self = (StagedFunctionObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        return NULL;
    }
    self->name = Py_NewRef(name);
    self->function = Py_NewRef(function);
    self->is_async = (char)is_async;
    self->sum = (char)sum;
    self->vectorcall = (vectorcallfunc)function_vectorcall;
    return (PyObject *)self;
}

/* A method: bound as a function is; LOAD_METHOD calls it unbound (Py_TPFLAGS_METHOD_DESCRIPTOR). */
static PyObject *
function_get(PyObject *self, PyObject *instance, PyObject *Py_UNUSED(owner))
{
    if (instance == NULL || instance == Py_None) {
        return Py_NewRef(self);
    }
    return PyMethod_New(self, instance);
}

static PyObject *
function_repr(StagedFunctionObject *self)
{
    return PyUnicode_FromFormat(self->sum ? "<sum stage %R of %R>" : "<stage %R of %R>", self->name, self->function);
}

static int
function_traverse(StagedFunctionObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->name);
    Py_VISIT(self->function);
    Py_VISIT(self->dict);
    return 0;
}

static int
function_clear(StagedFunctionObject *self)
{
    Py_CLEAR(self->name);
    Py_CLEAR(self->function);
    Py_CLEAR(self->dict);
    return 0;
}

static void
function_dealloc(StagedFunctionObject *self)
{
    PyObject_GC_UnTrack(self);
    function_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMemberDef function_members[] = {
    {"stage", T_OBJECT, offsetof(StagedFunctionObject, name), READONLY, "the stage's name"},
    {"function", T_OBJECT, offsetof(StagedFunctionObject, function), READONLY, "the function it calls"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef function_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL},
};

PyTypeObject PkStagedFunction_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.StagedFunction",
    .tp_basicsize = sizeof(StagedFunctionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "StagedFunction(name, function, is_async, kind='block'): function, each call in a request recorded as "
              "the stage name (kind 'sum': the calls summed into it).",
    .tp_new = function_new,
    .tp_dealloc = (destructor)function_dealloc,
    .tp_traverse = (traverseproc)function_traverse,
    .tp_clear = (inquiry)function_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(StagedFunctionObject, vectorcall),
    .tp_descr_get = function_get,
    .tp_dictoffset = offsetof(StagedFunctionObject, dict),
    .tp_repr = (reprfunc)function_repr,
    .tp_members = function_members,
    .tp_getset = function_getset,
};

int
pk_staged_ready(void)
{
    minus_one = PyLong_FromLong(-1);
    sum_kind = PyUnicode_InternFromString("sum");
    return minus_one == NULL || sum_kind == NULL || pk_staged_call_ready() < 0 || PyType_Ready(&PkStagedFunction_Type) < 0 ? -1 : 0;
}

