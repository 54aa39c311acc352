/* Int64List: a list of int64s kept raw in one C array, the C timeline's
 * ``steps`` (a Python list in the reference timeline). A step appends five
 * values; as ints in a list, four of them were new objects each step, which
 * on a LiteLLM request (about thirty steps) was most of what perfkit
 * allocated on the request path (docs/overhead.md#allocations).
 *
 * Read from Python as a sequence of ints (len, index, iteration, == with a
 * list; append and += add to it); the hand-off encoder writes it as a list (encode.c). It holds no
 * objects, so the collector never tracks it, and freed lists wait in a free
 * list with their arrays for the next requests: a worker serving requests
 * allocates none after its first few. */
#include "speedups.h"

#include <string.h>

#define FIRST_CAPACITY 160   /* values: 32 steps, a LiteLLM request's */
#define KEPT_CAPACITY 4096   /* a longer array is given back before its list is kept for reuse */

typedef struct {
    PyObject_HEAD
    int64_t *values;
    Py_ssize_t size, capacity;
} Int64ListObject;

static PkFreeList free_lists = {.limit = 64};

static PyObject *
int64list_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Int64List() takes no arguments");
        return NULL;
    }
    Int64ListObject *self = (Int64ListObject *)pk_free_list_take(&free_lists, type); /* its array kept */
    if (self != NULL) {
        self->size = 0;
        return (PyObject *)self;
    }
    self = (Int64ListObject *)type->tp_alloc(type, 0);
    if (self != NULL) {
        self->values = NULL;
        self->size = self->capacity = 0;
    }
    return (PyObject *)self;
}

static void
int64list_dealloc(Int64ListObject *self)
{
    if (self->capacity > KEPT_CAPACITY) {
        PyMem_Free(self->values);
        self->values = NULL;
        self->capacity = 0;
    }
    if (!pk_free_list_keep(&free_lists, &PkInt64List_Type, (PyObject *)self)) {
        PyMem_Free(self->values);
        Py_TYPE(self)->tp_free((PyObject *)self);
    }
}

static int
reserve(Int64ListObject *self, Py_ssize_t needed)
{
    size_t bytes = (size_t)self->capacity * sizeof(int64_t);
    void *values = self->values;
    if (pk_reserve(&values, &bytes, (size_t)needed * sizeof(int64_t), FIRST_CAPACITY * sizeof(int64_t)) < 0) {
        return -1;
    }
    self->values = values;
    self->capacity = (Py_ssize_t)(bytes / sizeof(int64_t));
    return 0;
}

int
pk_int64list_append(PyObject *list, const int64_t *values, Py_ssize_t count)
{
    Int64ListObject *self = (Int64ListObject *)list;
    if (reserve(self, self->size + count) < 0) {
        return -1;
    }
    memcpy(self->values + self->size, values, (size_t)count * sizeof(int64_t));
    self->size += count;
    return 0;
}

const int64_t *
pk_int64list_values(PyObject *list, Py_ssize_t *size)
{
    *size = ((Int64ListObject *)list)->size;
    return ((Int64ListObject *)list)->values;
}

static PyObject *
int64list_append(Int64ListObject *self, PyObject *value)
{
    int64_t number;
    if (pk_as_int64(value, &number) < 0 || pk_int64list_append((PyObject *)self, &number, 1) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static Py_ssize_t
int64list_length(Int64ListObject *self)
{
    return self->size;
}

static PyObject *
int64list_item(Int64ListObject *self, Py_ssize_t index)
{
    if (index < 0 || index >= self->size) {
        PyErr_SetString(PyExc_IndexError, "Int64List index out of range");
        return NULL;
    }
    return PyLong_FromLongLong(self->values[index]);
}

/* list += values: each int appended (a sum stage's call, as the reference timeline adds one); all or none. */
static PyObject *
int64list_inplace_concat(Int64ListObject *self, PyObject *values)
{
    PyObject *sequence = PySequence_Fast(values, "Int64List += takes a sequence of ints");
    if (sequence == NULL) {
        return NULL;
    }
    Py_ssize_t size = self->size, count = PySequence_Fast_GET_SIZE(sequence);
    int result = 0;
    for (Py_ssize_t i = 0; i < count && result == 0; i++) {
        int64_t number;
        result = pk_as_int64(PySequence_Fast_GET_ITEM(sequence, i), &number) < 0 ||
                         pk_int64list_append((PyObject *)self, &number, 1) < 0
                     ? -1
                     : 0;
    }
    Py_DECREF(sequence);
    if (result < 0) {
        self->size = size;
        return NULL;
    }
    return Py_NewRef(self);
}

static PySequenceMethods int64list_sequence = {
    .sq_length = (lenfunc)int64list_length,
    .sq_item = (ssizeargfunc)int64list_item,
    .sq_inplace_concat = (binaryfunc)int64list_inplace_concat,
};

static PyMethodDef int64list_methods[] = {
    {"append", (PyCFunction)int64list_append, METH_O, "Append one int (64-bit)."},
    {"tolist", (PyCFunction)pk_raw_list_tolist, METH_NOARGS, "The values as a list."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject PkInt64List_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Int64List",
    .tp_basicsize = sizeof(Int64ListObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Int64List(): a list of 64-bit ints kept raw, the C timeline's steps.",
    .tp_new = int64list_new,
    .tp_dealloc = (destructor)int64list_dealloc,
    .tp_as_sequence = &int64list_sequence,
    .tp_richcompare = pk_raw_list_compare,
    .tp_repr = pk_raw_list_repr,
    .tp_hash = PyObject_HashNotImplemented,
    .tp_methods = int64list_methods,
};
