/* Handoff: finished timelines, encoded, on their way to the export agent.
 *
 * Two buffers, each allocated once and never shrunk: the request side
 * appends to one (under the GIL, so no lock), the export thread swaps them
 * and writes the full one to the agent's pipe with the GIL released. A
 * queue of per-request bytes objects, freed a drain at a time, made the
 * allocator hand ~600 KB back to the kernel at every drain and fault it in
 * again (0.9 page faults and 5 us of system time per streamed request,
 * docs/overhead.md). A record that does not fit is dropped and counted.
 *
 * The frame written is the agent's batch frame, as _layouts.py declares it
 * (PK_FRAME_*, PK_BATCH_*, PK_RECORD_HEAD_SIZE in the generated
 * perfkit_layouts.h): kind, payload length, anchor, the app's drop count,
 * then each record's length and the bytes of Timeline.encode.
 */
#include "speedups.h"

#include <errno.h>
#include <string.h>
#ifndef _WIN32
#include <unistd.h>
#endif

typedef struct {
    char *data;
    Py_ssize_t len;
    Py_ssize_t records;
} Side;

typedef struct {
    PyObject_HEAD
    Side sides[2];
    int active;
    Py_ssize_t capacity;   /* bytes per side, frame header included */
    Py_ssize_t max_records, wake_at;
    unsigned long long dropped;
    PyObject *wake;        /* called once a side is 3/4 full: drain now, not at the next tick */
} HandoffObject;

static void
put_u32(char *out, uint32_t value)
{
    for (int i = 0; i < 4; i++) {
        out[i] = (char)(value >> (8 * i));
    }
}

static void
put_u64(char *out, uint64_t value)
{
    for (int i = 0; i < 8; i++) {
        out[i] = (char)(value >> (8 * i));
    }
}

/* The active side with room for one more record, or NULL: full (the
 * record is dropped and counted) or no memory (an exception is set). */
static Side *
reserve(HandoffObject *self)
{
    Side *side = &self->sides[self->active];
    if (side->data == NULL) {
        side->data = PyMem_RawMalloc((size_t)self->capacity);
        if (side->data == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
        side->len = PK_BATCH_HEADER_SIZE;
    }
    if (side->records >= self->max_records || side->len + PK_RECORD_HEAD_SIZE >= self->capacity) {
        self->dropped++; /* full: drop and count, never wait */
        return NULL;
    }
    return side;
}

/* The record of len bytes at side->data + side->len + PK_RECORD_HEAD_SIZE is complete. */
static int
commit(HandoffObject *self, Side *side, Py_ssize_t len)
{
    Py_ssize_t before = side->len, three_quarters = self->capacity / 4 * 3;
    put_u32(side->data + side->len, (uint32_t)len);
    side->len += PK_RECORD_HEAD_SIZE + len;
    side->records++;
    if (side->records == self->wake_at || (before < three_quarters && side->len >= three_quarters)) {
        PyObject *result = PyObject_CallNoArgs(self->wake);
        if (result == NULL) {
            return -1;
        }
        Py_DECREF(result);
    }
    return 0;
}

static int
append(HandoffObject *self, const char *data, Py_ssize_t len)
{
    Side *side = reserve(self);
    if (side == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (side->len + PK_RECORD_HEAD_SIZE + len > self->capacity) {
        self->dropped++;
        return 0;
    }
    memcpy(side->data + side->len + PK_RECORD_HEAD_SIZE, data, (size_t)len);
    return commit(self, side, len);
}

/* The sink: called with each finished timeline. It is written in place
 * (encode.c); a timeline the C writer declines goes through Timeline.encode(). */
static PyObject *
handoff_submit(HandoffObject *self, PyObject *timeline)
{
    int result = 1;
    if (PyObject_TypeCheck(timeline, &PkTimeline_Type)) {
        Side *side = reserve(self);
        if (side == NULL) {
            result = PyErr_Occurred() ? -1 : 0;
        }
        else {
            Py_ssize_t len, room = self->capacity - side->len - PK_RECORD_HEAD_SIZE;
            result = pk_encode_timeline((PkTimelineObject *)timeline, side->data + side->len + PK_RECORD_HEAD_SIZE, room, &len);
            if (result == 0) {
                result = commit(self, side, len);
            }
        }
    }
    if (result == 1) {
        PyObject *encoded = PyObject_CallMethod(timeline, "encode", NULL);
        if (encoded != NULL && !PyBytes_Check(encoded)) {
            Py_CLEAR(encoded);
            PyErr_SetString(PyExc_TypeError, "Timeline.encode() did not return bytes");
        }
        result = encoded == NULL ? -1 : append(self, PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded));
        Py_XDECREF(encoded);
    }
    if (result < 0) {
        pk_report("export.handoff");
    }
    Py_RETURN_NONE;
}

static PyObject *
handoff_append(HandoffObject *self, PyObject *record)
{
    char *data;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(record, &data, &len) < 0 || append(self, data, len) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* write_frame(fd, anchor) -> records: swap the sides and write the full one.
 * Only one thread may call it at a time (the pipeline's drain lock). */
static PyObject *
handoff_write_frame(HandoffObject *self, PyObject *args)
{
    int fd;
    long long anchor;
    if (!PyArg_ParseTuple(args, "iL:write_frame", &fd, &anchor)) {
        return NULL;
    }
    Side *side = &self->sides[self->active];
    if (side->records == 0) {
        return PyLong_FromLong(0);
    }
    self->active ^= 1; /* requests go on into the other side meanwhile */
    Py_ssize_t records = side->records;
    side->data[0] = PK_FRAME_BATCH;
    put_u32(side->data + PK_FRAME_LENGTH_AT, (uint32_t)(side->len - PK_FRAME_HEAD_SIZE));
    put_u64(side->data + PK_BATCH_ANCHOR_AT, (uint64_t)anchor);
    put_u64(side->data + PK_BATCH_DROPPED_AT, self->dropped);
    Py_ssize_t written = 0;
    int error = 0;
    Py_BEGIN_ALLOW_THREADS
    while (written < side->len) {
#ifdef _WIN32
        Py_ssize_t n = _write(fd, side->data + written, (unsigned int)(side->len - written));
#else
        Py_ssize_t n = write(fd, side->data + written, (size_t)(side->len - written));
#endif
        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            error = errno;
            break;
        }
        written += n;
    }
    Py_END_ALLOW_THREADS
    side->len = PK_BATCH_HEADER_SIZE;
    side->records = 0;
    if (error) {
        self->dropped += (unsigned long long)records;
        errno = error;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(records);
}

static PyObject *
handoff_get_pending(HandoffObject *self, void *closure)
{
    return PyLong_FromSsize_t(self->sides[self->active].records);
}

static PyObject *
handoff_get_dropped(HandoffObject *self, void *closure)
{
    return PyLong_FromUnsignedLongLong(self->dropped);
}

static int
handoff_init(HandoffObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"max_records", "capacity", "wake", NULL};
    Py_ssize_t max_records, capacity;
    PyObject *wake;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnO:Handoff", keywords, &max_records, &capacity, &wake)) {
        return -1;
    }
    if (max_records < 1 || capacity < PK_BATCH_HEADER_SIZE + 64 || capacity > 0x7fffffff) {
        PyErr_SetString(PyExc_ValueError, "Handoff: max_records >= 1 and 85 <= capacity < 2 GiB");
        return -1;
    }
    self->max_records = max_records;
    self->wake_at = 3 * max_records / 4 > 0 ? 3 * max_records / 4 : 1;
    self->capacity = capacity;
    Py_XSETREF(self->wake, Py_NewRef(wake));
    return 0;
}

static int
handoff_traverse(HandoffObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->wake);
    return 0;
}

static int
handoff_clear(HandoffObject *self)
{
    Py_CLEAR(self->wake);
    return 0;
}

static void
handoff_dealloc(HandoffObject *self)
{
    PyObject_GC_UnTrack(self);
    handoff_clear(self);
    for (int i = 0; i < 2; i++) {
        PyMem_RawFree(self->sides[i].data);
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef handoff_methods[] = {
    {"submit", (PyCFunction)handoff_submit, METH_O, "The sink: encode a finished timeline and queue it."},
    {"append", (PyCFunction)handoff_append, METH_O, "Queue one encoded record (bytes)."},
    {"write_frame", (PyCFunction)handoff_write_frame, METH_VARARGS,
     "write_frame(fd, anchor) -> records written (0: nothing queued). OSError: the records are dropped and counted."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef handoff_getset[] = {
    {"pending", (getter)handoff_get_pending, NULL, "records waiting for the next write", NULL},
    {"dropped", (getter)handoff_get_dropped, NULL, "records dropped: full, or the write failed", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject PkHandoff_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Handoff",
    .tp_basicsize = sizeof(HandoffObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Handoff(max_records, capacity, wake): encoded timelines for the export agent.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)handoff_init,
    .tp_dealloc = (destructor)handoff_dealloc,
    .tp_traverse = (traverseproc)handoff_traverse,
    .tp_clear = (inquiry)handoff_clear,
    .tp_methods = handoff_methods,
    .tp_getset = handoff_getset,
};
