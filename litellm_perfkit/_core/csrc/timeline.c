/* Timeline: the fields of one request's timeline as a C struct, so the C
 * side reads and writes them without attribute lookups. The Python subclass
 * _timeline.Timeline adds the methods; _timeline._PyTimelineFields is the
 * reference for what __init__ sets. */
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

static int
timeline_init(PkTimelineObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"start_ns", "method", "path", NULL};
    PyObject *start, *method = NULL, *path = NULL;
    Py_ssize_t count = PyTuple_GET_SIZE(args);
    if (kwargs == NULL && count >= 1 && count <= 3) {
        start = PyTuple_GET_ITEM(args, 0);
        method = count > 1 ? PyTuple_GET_ITEM(args, 1) : NULL;
        path = count > 2 ? PyTuple_GET_ITEM(args, 2) : NULL;
    }
    else if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:Timeline", keywords, &start, &method, &path)) {
        return -1;
    }
    int64_t start_ns;
    if (pk_as_int64(start, &start_ns) < 0) {
        return -1;
    }
    PyObject *empty = PyUnicode_New(0, 0);
    PyObject *finished = PyList_New(0), *generators = PyDict_New(), *marks = PyDict_New(), *attributes = PyDict_New();
    PyObject *status = PyLong_FromLong(0);
    if (empty == NULL || finished == NULL || generators == NULL || marks == NULL || attributes == NULL ||
        status == NULL || PyDict_SetItem(marks, pk_names.received, start) < 0) {
        Py_XDECREF(empty);
        Py_XDECREF(finished);
        Py_XDECREF(generators);
        Py_XDECREF(marks);
        Py_XDECREF(attributes);
        Py_XDECREF(status);
        return -1;
    }
    self->start_ns = start_ns;
    self->end_ns = self->chunks = self->body_bytes = self->gc_ns = 0;
    self->next_index = 0;
    self->streaming = 0;
    Py_XSETREF(self->finished, finished);
    Py_XSETREF(self->generators, generators);
    Py_XSETREF(self->marks, marks);
    Py_XSETREF(self->attributes, attributes);
    Py_XSETREF(self->method, Py_NewRef(method != NULL ? method : empty));
    Py_XSETREF(self->path, Py_NewRef(path != NULL ? path : empty));
    Py_XSETREF(self->status, status);
    Py_XSETREF(self->traceparent, Py_NewRef(Py_None));
    Py_XSETREF(self->error, Py_NewRef(Py_None));
    Py_XSETREF(self->upstream, Py_NewRef(pk_hooks.default_upstream != NULL ? pk_hooks.default_upstream : Py_None));
    Py_XSETREF(self->entries, Py_NewRef(Py_None));
    Py_DECREF(empty);
    return 0;
}

#define OBJECTS(apply)                                                                                   \
    apply(finished) apply(generators) apply(marks) apply(attributes) apply(method) apply(path)          \
    apply(status) apply(traceparent) apply(error) apply(upstream) apply(entries)

static int
timeline_traverse(PkTimelineObject *self, visitproc visit, void *arg)
{
#define VISIT(field) Py_VISIT(self->field);
    OBJECTS(VISIT)
#undef VISIT
    return 0;
}

static int
timeline_clear(PkTimelineObject *self)
{
#define CLEAR(field) Py_CLEAR(self->field);
    OBJECTS(CLEAR)
#undef CLEAR
    return 0;
}

static void
timeline_dealloc(PkTimelineObject *self)
{
    PyObject_GC_UnTrack(self); /* subtype_dealloc drops a Python subclass's type reference */
    timeline_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

#define FIELD(name) offsetof(PkTimelineObject, name)

static PyMemberDef timeline_members[] = {
    {"start_ns", T_LONGLONG, FIELD(start_ns), 0, NULL},
    {"end_ns", T_LONGLONG, FIELD(end_ns), 0, NULL},
    {"chunks", T_LONGLONG, FIELD(chunks), 0, NULL},
    {"body_bytes", T_LONGLONG, FIELD(body_bytes), 0, NULL},
    {"gc_ns", T_LONGLONG, FIELD(gc_ns), 0, NULL},
    {"next_index", T_PYSSIZET, FIELD(next_index), 0, NULL},
    {"finished", T_OBJECT_EX, FIELD(finished), 0, NULL},
    {"generators", T_OBJECT_EX, FIELD(generators), 0, NULL},
    {"marks", T_OBJECT_EX, FIELD(marks), 0, NULL},
    {"attributes", T_OBJECT_EX, FIELD(attributes), 0, NULL},
    {"method", T_OBJECT_EX, FIELD(method), 0, NULL},
    {"path", T_OBJECT_EX, FIELD(path), 0, NULL},
    {"status", T_OBJECT_EX, FIELD(status), 0, NULL},
    {"traceparent", T_OBJECT, FIELD(traceparent), 0, NULL},
    {"error", T_OBJECT, FIELD(error), 0, NULL},
    {"upstream", T_OBJECT_EX, FIELD(upstream), 0, NULL},
    {"_entries", T_OBJECT, FIELD(entries), 0, NULL},
    {"streaming", T_BOOL, FIELD(streaming), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PkTimeline_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Timeline",
    .tp_basicsize = sizeof(PkTimelineObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Timeline(start_ns, method='', path=''): the fields of one request's timeline.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)timeline_init,
    .tp_dealloc = (destructor)timeline_dealloc,
    .tp_traverse = (traverseproc)timeline_traverse,
    .tp_clear = (inquiry)timeline_clear,
    .tp_members = timeline_members,
};
