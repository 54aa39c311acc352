/* Timeline: the fields of one request's timeline as a C struct, so the C
 * side reads and writes them without attribute lookups. The fields, their
 * defaults and the constructor's arguments come from perfkit_fields.h
 * (generated from types.RequestRecord); the Python subclass
 * _timeline.Timeline adds the methods. */
#include "speedups.h"

#include <structmember.h>

PkTimelineObject *
pk_timeline(PyObject *object)
{
    if (object == NULL || !PyObject_TypeCheck(object, &PkTimeline_Type)) {
        PyErr_Format(PyExc_TypeError, "expected a perfkit Timeline, got %s",
                     object == NULL ? "nothing" : Py_TYPE(object)->tp_name);
        return NULL;
    }
    return (PkTimelineObject *)object;
}

PyObject *
pk_field(PyObject *value, const char *name)
{
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "'Timeline' object has no attribute '%s'", name);
        return NULL;
    }
    return Py_NewRef(value);
}

/* A new value for an object field: its default, or a new one from its factory. */
static PyObject *
default_value(Py_ssize_t position)
{
    PyObject *pair = PyTuple_GET_ITEM(pk_hooks.timeline_defaults, position); /* checked by setup() */
    PyObject *value = PyTuple_GET_ITEM(pair, 1);
    if (!PyObject_IsTrue(PyTuple_GET_ITEM(pair, 0))) {
        return Py_NewRef(value);
    }
    if (value == (PyObject *)&PyDict_Type) {
        return PyDict_New();
    }
    if (value == (PyObject *)&PyList_Type) {
        return PyList_New(0);
    }
    return PyObject_CallNoArgs(value);
}

static int
set_object(PyObject **slot, PyObject *value)
{
    Py_XSETREF(*slot, Py_NewRef(value));
    return 0;
}

#define SET_INT64(field, value) (pk_as_int64((value), &number) < 0 ? -1 : (self->field = number, 0))
#define SET_OBJECT(field, value) set_object(&self->field, (value))

static int
timeline_init(PkTimelineObject *self, PyObject *args, PyObject *kwargs)
{
#define NAME(field, kind) #field,
    static const char *names[] = {PK_TIMELINE_CONSTRUCTOR(NAME)};
#undef NAME
    PyObject *given[PK_TIMELINE_CONSTRUCTOR_COUNT] = {NULL};
    Py_ssize_t count = PyTuple_GET_SIZE(args), used = 0;
    if (count > PK_TIMELINE_CONSTRUCTOR_COUNT) {
        PyErr_Format(PyExc_TypeError, "Timeline() takes at most %d arguments", PK_TIMELINE_CONSTRUCTOR_COUNT);
        return -1;
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        given[i] = PyTuple_GET_ITEM(args, i);
    }
    for (Py_ssize_t i = 0; kwargs != NULL && i < PK_TIMELINE_CONSTRUCTOR_COUNT; i++) {
        PyObject *value = PyDict_GetItemString(kwargs, names[i]);
        if (value != NULL) {
            if (given[i] != NULL) {
                PyErr_Format(PyExc_TypeError, "Timeline() got multiple values for %s", names[i]);
                return -1;
            }
            given[i] = value;
            used++;
        }
    }
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != used) {
        PyErr_SetString(PyExc_TypeError, "Timeline() got an unexpected keyword argument");
        return -1;
    }
    if (given[0] == NULL) {
        PyErr_Format(PyExc_TypeError, "Timeline() missing its first argument, %s", names[0]);
        return -1;
    }
#define ZERO(field, ctype, member) self->field = 0;
    PK_TIMELINE_SCALARS(ZERO)
#undef ZERO
#define DEFAULT(field, position, member)                                                                 \
    Py_XSETREF(self->field, default_value(position));                                                  \
    if (self->field == NULL) {                                                                         \
        return -1;                                                                                     \
    }
    PK_TIMELINE_OBJECTS(DEFAULT)
#undef DEFAULT
    int64_t number;
    int position = 0;
#define GIVEN(field, kind)                                                                               \
    if (given[position] != NULL && SET_##kind(field, given[position]) < 0) {                          \
        return -1;                                                                                     \
    }                                                                                                  \
    position++;
    PK_TIMELINE_CONSTRUCTOR(GIVEN)
#undef GIVEN
    return 0;
}

static int
timeline_traverse(PkTimelineObject *self, visitproc visit, void *arg)
{
#define VISIT(field, position, member) Py_VISIT(self->field);
    PK_TIMELINE_OBJECTS(VISIT)
#undef VISIT
    return 0;
}

static int
timeline_clear(PkTimelineObject *self)
{
#define CLEAR(field, position, member) Py_CLEAR(self->field);
    PK_TIMELINE_OBJECTS(CLEAR)
#undef CLEAR
    return 0;
}

PK_FREE_LIST_ALLOC(timeline_alloc, free_timelines, &PkTimeline_Type) /* a request's, for the next's */

static void
timeline_dealloc(PkTimelineObject *self)
{
    PyObject_GC_UnTrack(self); /* subtype_dealloc drops a Python subclass's type reference */
    timeline_clear(self);
    pk_free_list_free(&free_timelines, &PkTimeline_Type, (PyObject *)self);
}

#define FIELD(name) offsetof(PkTimelineObject, name)

static PyMemberDef timeline_members[] = {
#define SCALAR(field, ctype, member) {#field, member, FIELD(field), 0, NULL},
    PK_TIMELINE_SCALARS(SCALAR)
#undef SCALAR
#define OBJECT(field, position, member) {#field, member, FIELD(field), 0, NULL},
    PK_TIMELINE_OBJECTS(OBJECT)
#undef OBJECT
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PkTimeline_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Timeline",
    .tp_basicsize = sizeof(PkTimelineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Timeline(start_ns, method='', path=''): the fields of one request's timeline (types.RequestRecord).",
    .tp_new = PyType_GenericNew,
    .tp_alloc = timeline_alloc,
    .tp_init = (initproc)timeline_init,
    .tp_dealloc = (destructor)timeline_dealloc,
    .tp_traverse = (traverseproc)timeline_traverse,
    .tp_clear = (inquiry)timeline_clear,
    .tp_members = timeline_members,
};

/* A task of the request is about to start: its hand-off waits (_after.hold). 0, or -1 with an exception set. */
int
pk_hold(PyObject *timeline)
{
    PkTimelineObject *fields = pk_timeline(timeline);
    if (fields == NULL) {
        return -1;
    }
    fields->held_tasks++;
    return 0;
}

/* A task of the request ended (_after.release): Python runs only for the last one of a request handed off
 * while held. Keeps any exception being raised; perfkit's own failure is reported, never raised. */
void
pk_release(PyObject *timeline)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PkTimelineObject *fields = pk_timeline(timeline);
    if (fields == NULL) {
        pk_report("steps.release");
    }
    else if (--fields->held_tasks <= 0) {
        fields->held_tasks = 0;
        if (fields->waiting) {
            PyObject *ended = PyObject_CallOneArg(pk_hooks.tasks_ended, timeline);
            if (ended == NULL) {
                pk_report("steps.release"); /* perfkit's bug must never become the app's */
            }
            Py_XDECREF(ended);
        }
    }
    PyErr_Restore(type, value, traceback);
}
