/* Free lists for the objects a request makes and drops: a task's StepClock, a wrapped call's Stage or
 * StagedCall, the timeline's Int64List and StageList. An object freed here keeps its memory for the next
 * one of its type, as CPython keeps tuples and frames: the next one costs no allocator call and does not
 * count toward generation 0 of the cyclic collector, whose count of new tracked objects triggers
 * collections. A request's Timeline, Exchange and the Stages of its `with` blocks are instances of
 * _backend's Python subclasses of the C types: CPython gives a Python class PyType_GenericAlloc, and
 * share_free_list gives them their C type's allocator. */
#include "speedups.h"

#include <string.h>

PyObject *
pk_free_list_take(PkFreeList *list, PyTypeObject *type)
{
    if (list->size == 0) {
        return NULL;
    }
    PyObject *self = list->items[--list->size];
    PyObject_Init(self, type);
    return self;
}

int
pk_free_list_keep(PkFreeList *list, PyTypeObject *type, PyObject *self)
{
    /* A finalized object keeps its collector flag (CPython clears it only for new memory): its
     * successor's finalizer would never run, so it goes back to the allocator. */
    if (!pk_same_layout(Py_TYPE(self), type) || list->size >= list->limit || list->size >= PK_FREE_LIST_MAX
        || (PyType_IS_GC(type) && PyObject_GC_IsFinalized(self))) {
        return 0;
    }
    list->items[list->size++] = self;
    return 1;
}

PyObject *
pk_free_list_new(PkFreeList *list, PyTypeObject *type)
{
    PyObject *self = pk_free_list_take(list, type);
    if (self == NULL) {
        return PyType_GenericAlloc(type, 0); /* zeroed and tracked */
    }
    memset((char *)self + sizeof(PyObject), 0, (size_t)type->tp_basicsize - sizeof(PyObject));
    PyObject_GC_Track(self);
    return self;
}

void
pk_free_list_free(PkFreeList *list, PyTypeObject *type, PyObject *self)
{
    if (!pk_free_list_keep(list, type, self)) {
        Py_TYPE(self)->tp_free(self);
    }
}

int
pk_same_layout(PyTypeObject *type, PyTypeObject *own)
{
    if (type == own) {
        return 1;
    }
    unsigned long added = 0;
#ifdef Py_TPFLAGS_MANAGED_DICT
    added |= Py_TPFLAGS_MANAGED_DICT;
#endif
#ifdef Py_TPFLAGS_MANAGED_WEAKREF
    added |= Py_TPFLAGS_MANAGED_WEAKREF;
#endif
#ifdef Py_TPFLAGS_INLINE_VALUES
    added |= Py_TPFLAGS_INLINE_VALUES;
#endif
    return type->tp_basicsize == own->tp_basicsize && type->tp_itemsize == own->tp_itemsize &&
           type->tp_dictoffset == own->tp_dictoffset && type->tp_weaklistoffset == own->tp_weaklistoffset &&
           (type->tp_flags & added) == (own->tp_flags & added) && PyType_IsSubtype(type, own);
}

PyObject *
pk_share_free_list(PyObject *Py_UNUSED(module), PyObject *cls)
{
    if (!PyType_Check(cls)) {
        PyErr_SetString(PyExc_TypeError, "share_free_list(cls): cls must be a class");
        return NULL;
    }
    PyTypeObject *type = (PyTypeObject *)cls;
    PyTypeObject *own = type->tp_base;
    while (own != NULL && (own->tp_flags & Py_TPFLAGS_HEAPTYPE)) {
        own = own->tp_base;
    }
    if (own == NULL || own->tp_alloc == PyType_GenericAlloc || !pk_same_layout(type, own)) {
        Py_RETURN_FALSE;
    }
    type->tp_alloc = own->tp_alloc;
    Py_RETURN_TRUE;
}
