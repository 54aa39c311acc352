/* Free lists for the objects a request makes and drops by the dozen: a task's StepClock, a wrapped
 * call's Stage or StagedCall. An object freed here keeps its memory for the next one of its type, as
 * CPython keeps tuples and frames: the next one costs no allocator call and does not count toward
 * generation 0 of the cyclic collector, whose count of new tracked objects triggers collections. */
#include "speedups.h"

#include <string.h>

PyObject *
pk_free_list_new(PkFreeList *list, PyTypeObject *type)
{
    if (list->size == 0) {
        return type->tp_alloc(type, 0); /* zeroed and tracked */
    }
    PyObject *self = list->items[--list->size];
    memset((char *)self + sizeof(PyObject), 0, (size_t)type->tp_basicsize - sizeof(PyObject));
    PyObject_Init(self, type);
    PyObject_GC_Track(self);
    return self;
}

void
pk_free_list_free(PkFreeList *list, PyTypeObject *type, PyObject *self)
{
    /* A finalized object keeps its collector flag (CPython clears it only for new memory): its
     * successor's finalizer would never run, so it goes back to the allocator. */
    if (Py_IS_TYPE(self, type) && list->size < PK_FREE_LIST_SIZE && !PyObject_GC_IsFinalized(self)) {
        list->items[list->size++] = self;
        return;
    }
    Py_TYPE(self)->tp_free(self);
}
