/* Free lists for the objects a request makes and drops: a task's StepClock, a wrapped call's Stage or
 * StagedCall, the timeline's Int64List and StageList. An object freed here keeps its memory for the next
 * one of its type, as CPython keeps tuples and frames: the next one costs no allocator call and does not
 * count toward generation 0 of the cyclic collector, whose count of new tracked objects triggers
 * collections. Not the Timeline or the Exchange: a request's are instances of _backend's Python
 * subclasses, which CPython allocates itself. */
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
    if (!Py_IS_TYPE(self, type) || list->size >= list->limit || list->size >= PK_FREE_LIST_MAX
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
