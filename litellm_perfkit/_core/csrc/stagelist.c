/* StageList: the C timeline's finished block stages (``finished``; a list of
 * tuples in the reference timeline), each kept raw: its name and its ints
 * (_fields.FINISHED, by the PK_FINISHED_* positions). As a tuple of ints, a
 * stage made its tuple and its start and end as objects: three of what a
 * recorded request allocated on its path for each stage
 * (docs/overhead.md#allocations).
 *
 * Read from Python as a sequence of those tuples (len, index, iteration, ==
 * with a list), built when read; the hand-off encoder writes it as the list of
 * tuples it stands for (encode.c). It holds the names, so the collector
 * tracks it as it tracked the list. Freed lists wait in a free list with
 * their arrays for the next requests, as Int64Lists do. */
#include "speedups.h"

#define FIRST_CAPACITY 32  /* stages: a LiteLLM request's 21, and room */
#define KEPT_CAPACITY 1024 /* a longer array is given back before its list is kept for reuse */

typedef struct {
    PyObject_HEAD
    PkFinishedStage *stages;
    Py_ssize_t size, capacity;
} StageListObject;

static PkFreeList free_lists = {.limit = 64};

static void
release_names(StageListObject *self)
{
    Py_ssize_t size = self->size;
    self->size = 0; /* first: a name's release runs no code that reads this list, but stay safe */
    for (Py_ssize_t i = 0; i < size; i++) {
        Py_DECREF(self->stages[i].name);
    }
}

static PyObject *
stagelist_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "StageList() takes no arguments");
        return NULL;
    }
    StageListObject *self = (StageListObject *)pk_free_list_take(&free_lists, type); /* its array kept */
    if (self == NULL) {
        self = PyObject_GC_New(StageListObject, type);
        if (self == NULL) {
            return NULL;
        }
        self->stages = NULL;
        self->capacity = 0;
    }
    self->size = 0;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}

static void
stagelist_dealloc(StageListObject *self)
{
    PyObject_GC_UnTrack(self);
    release_names(self);
    if (self->capacity > KEPT_CAPACITY) {
        PyMem_Free(self->stages);
        self->stages = NULL;
        self->capacity = 0;
    }
    if (!pk_free_list_keep(&free_lists, &PkStageList_Type, (PyObject *)self)) {
        PyMem_Free(self->stages);
        PyObject_GC_Del(self);
    }
}

static int
stagelist_traverse(StageListObject *self, visitproc visit, void *arg)
{
    for (Py_ssize_t i = 0; i < self->size; i++) {
        Py_VISIT(self->stages[i].name);
    }
    return 0;
}

static int
stagelist_clear(StageListObject *self)
{
    release_names(self);
    return 0;
}

int
pk_stagelist_append(PyObject *list, const PkFinishedStage *stage)
{
    StageListObject *self = (StageListObject *)list;
    if (self->size == self->capacity) {
        size_t bytes = (size_t)self->capacity * sizeof(PkFinishedStage);
        void *stages = self->stages;
        if (pk_reserve(&stages, &bytes, (size_t)(self->size + 1) * sizeof(PkFinishedStage),
                       FIRST_CAPACITY * sizeof(PkFinishedStage)) < 0) {
            return -1;
        }
        self->stages = stages;
        self->capacity = (Py_ssize_t)(bytes / sizeof(PkFinishedStage));
    }
    PkFinishedStage *slot = &self->stages[self->size++];
    *slot = *stage;
    Py_INCREF(slot->name);
    return 0;
}

const PkFinishedStage *
pk_stagelist_stages(PyObject *list, Py_ssize_t *size)
{
    *size = ((StageListObject *)list)->size;
    return ((StageListObject *)list)->stages;
}

PyObject *
pk_finished_tuple(const PkFinishedStage *stage)
{
    PyObject *tuple = PyTuple_New(PK_FINISHED_SIZE);
    for (int position = 0; tuple != NULL && position < PK_FINISHED_SIZE; position++) {
        PyObject *value = position == PK_FINISHED_NAME ? Py_NewRef(stage->name)
                                                       : PyLong_FromLongLong(stage->numbers[position]);
        if (value == NULL) {
            Py_CLEAR(tuple);
            break;
        }
        PyTuple_SET_ITEM(tuple, position, value);
    }
    return tuple;
}

int
pk_finished_from_tuple(PyObject *tuple, PkFinishedStage *stage)
{
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != PK_FINISHED_SIZE) {
        PyErr_SetString(PyExc_TypeError, "a finished stage is a tuple of (index, name, start_ns, end_ns, parent)");
        return -1;
    }
    for (int position = 0; position < PK_FINISHED_SIZE; position++) {
        PyObject *value = PyTuple_GET_ITEM(tuple, position);
        if (position == PK_FINISHED_NAME) {
            stage->name = value;
            stage->numbers[position] = 0;
        }
        else if (pk_as_int64(value, &stage->numbers[position]) < 0) {
            return -1;
        }
    }
    return 0;
}

static PyObject *
stagelist_append(StageListObject *self, PyObject *tuple)
{
    PkFinishedStage stage;
    if (pk_finished_from_tuple(tuple, &stage) < 0 || pk_stagelist_append((PyObject *)self, &stage) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* Whether a stage named name has an index of at least since: read in place, no tuple built. */
static PyObject *
stagelist_has(StageListObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t since;
    if (nargs != 2 || pk_as_int64(args[1], &since) < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_TypeError, "has(name, since_index) takes 2 arguments");
        }
        return NULL;
    }
    for (Py_ssize_t i = 0; i < self->size; i++) {
        if (self->stages[i].numbers[PK_FINISHED_INDEX] < since) {
            continue;
        }
        int same = PyObject_RichCompareBool(self->stages[i].name, args[0], Py_EQ);
        if (same != 0) {
            return same < 0 ? NULL : Py_NewRef(Py_True);
        }
    }
    Py_RETURN_FALSE;
}

static Py_ssize_t
stagelist_length(StageListObject *self)
{
    return self->size;
}

static PyObject *
stagelist_item(StageListObject *self, Py_ssize_t index)
{
    if (index < 0 || index >= self->size) {
        PyErr_SetString(PyExc_IndexError, "StageList index out of range");
        return NULL;
    }
    return pk_finished_tuple(&self->stages[index]);
}

static PySequenceMethods stagelist_sequence = {
    .sq_length = (lenfunc)stagelist_length,
    .sq_item = (ssizeargfunc)stagelist_item,
};

static PyMethodDef stagelist_methods[] = {
    {"append", (PyCFunction)stagelist_append, METH_O, "Append one finished stage: (index, name, start_ns, end_ns, parent)."},
    {"tolist", (PyCFunction)pk_raw_list_tolist, METH_NOARGS, "The stages as a list of tuples."},
    {"has", (PyCFunction)(void (*)(void))stagelist_has, METH_FASTCALL,
     "has(name, since_index): whether a stage of that name has an index of at least since_index."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject PkStageList_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.StageList",
    .tp_basicsize = sizeof(StageListObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "StageList(): the finished block stages of a C timeline, kept raw; read as tuples.",
    .tp_new = stagelist_new,
    .tp_dealloc = (destructor)stagelist_dealloc,
    .tp_traverse = (traverseproc)stagelist_traverse,
    .tp_clear = (inquiry)stagelist_clear,
    .tp_as_sequence = &stagelist_sequence,
    .tp_richcompare = pk_raw_list_compare,
    .tp_repr = pk_raw_list_repr,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_methods = stagelist_methods,
};
