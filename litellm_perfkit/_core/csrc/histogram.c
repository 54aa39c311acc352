/* Histogram: one of the export agent's explicit-bucket histograms, the C
 * counterpart of _export/_metrics._PyHistogram (the reference, and the
 * fallback), with the same members; and observe_stages, which adds a
 * record's stages to theirs. The agent observes about twenty stages a
 * record: in Python each was a property call for its duration, a bisect and
 * five attribute updates, some 25 us a LiteLLM record
 * (benchmarks/agent_cost.py).
 *
 * Counts and extremes are int64. The total of weighted durations can pass
 * int64 within weeks on a busy proxy (ten thousand one-second requests a
 * second), so it is unbounded as the reference's Python int is: what does
 * not fit is folded into a Python int (total_base).
 */
#include "speedups.h"

#include <string.h>
#include <structmember.h>

#define NO_MINIMUM ((int64_t)1 << 62) /* the reference's minimum before any value */

typedef struct {
    PyObject_HEAD
    long long count, minimum_ns, maximum_ns;
    int64_t total_ns;      /* with total_base, the total */
    PyObject *total_base;  /* a Python int, or NULL: 0 */
    int64_t counts[PK_BUCKETS];
} HistogramObject;

static PyObject *
histogram_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Histogram() takes no arguments");
        return NULL;
    }
    HistogramObject *self = (HistogramObject *)type->tp_alloc(type, 0); /* zeroed */
    if (self != NULL) {
        self->minimum_ns = NO_MINIMUM;
    }
    return (PyObject *)self;
}

static void
histogram_dealloc(HistogramObject *self)
{
    Py_CLEAR(self->total_base);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* total_ns + value * weight, in Python ints: total_base takes it all. */
static int
fold_total(HistogramObject *self, int64_t value, int64_t weight)
{
    PyObject *parts[3] = {PyLong_FromLongLong(value), PyLong_FromLongLong(weight), PyLong_FromLongLong(self->total_ns)};
    PyObject *product = NULL, *sum = NULL, *total = NULL;
    if (parts[0] != NULL && parts[1] != NULL && parts[2] != NULL && (product = PyNumber_Multiply(parts[0], parts[1])) &&
        (sum = PyNumber_Add(product, parts[2]))) {
        total = self->total_base == NULL ? Py_NewRef(sum) : PyNumber_Add(self->total_base, sum);
    }
    for (int i = 0; i < 3; i++) {
        Py_XDECREF(parts[i]);
    }
    Py_XDECREF(product);
    Py_XDECREF(sum);
    if (total == NULL) {
        return -1;
    }
    Py_XSETREF(self->total_base, total);
    self->total_ns = 0;
    return 0;
}

/* One value standing for weight requests; -1 with an exception set. */
static int
histogram_add(HistogramObject *self, int64_t value, int64_t weight)
{
    Py_ssize_t bucket = pk_bucket_of(value);
    int64_t counted, count, product, total;
    if (__builtin_add_overflow(self->counts[bucket], weight, &counted) ||
        __builtin_add_overflow((int64_t)self->count, weight, &count)) {
        PyErr_SetString(PyExc_OverflowError, "a histogram's count passed 2**63");
        return -1;
    }
    if (__builtin_mul_overflow(value, weight, &product) || __builtin_add_overflow(self->total_ns, product, &total)) {
        if (fold_total(self, value, weight) < 0) {
            return -1;
        }
    }
    else {
        self->total_ns = total;
    }
    self->counts[bucket] = counted;
    self->count = count;
    if (value < self->minimum_ns) {
        self->minimum_ns = value;
    }
    if (value > self->maximum_ns) {
        self->maximum_ns = value;
    }
    return 0;
}

static PyObject *
histogram_record(HistogramObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t value, weight = 1;
    if (nargs < 1 || nargs > 2) {
        PyErr_SetString(PyExc_TypeError, "record(value_ns, weight=1)");
        return NULL;
    }
    if (pk_as_int64(args[0], &value) < 0 || (nargs == 2 && pk_as_int64(args[1], &weight) < 0) ||
        histogram_add(self, value, weight) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
histogram_copy(HistogramObject *self, PyObject *Py_UNUSED(ignored))
{
    HistogramObject *twin = (HistogramObject *)Py_TYPE(self)->tp_alloc(Py_TYPE(self), 0);
    if (twin == NULL) {
        return NULL;
    }
    twin->count = self->count;
    twin->minimum_ns = self->minimum_ns;
    twin->maximum_ns = self->maximum_ns;
    twin->total_ns = self->total_ns;
    twin->total_base = Py_XNewRef(self->total_base);
    memcpy(twin->counts, self->counts, sizeof(self->counts));
    return (PyObject *)twin;
}

static PyObject *
get_total(HistogramObject *self, void *Py_UNUSED(closure))
{
    PyObject *total = PyLong_FromLongLong(self->total_ns);
    if (total == NULL || self->total_base == NULL) {
        return total;
    }
    Py_SETREF(total, PyNumber_Add(self->total_base, total));
    return total;
}

static int
set_total(HistogramObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL || !PyLong_Check(value)) {
        PyErr_SetString(PyExc_TypeError, "total_ns is an int");
        return -1;
    }
    int64_t total;
    if (pk_as_int64(value, &total) == 0) {
        self->total_ns = total;
        Py_CLEAR(self->total_base);
        return 0;
    }
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) {
        return -1;
    }
    PyErr_Clear();
    self->total_ns = 0;
    Py_XSETREF(self->total_base, Py_NewRef(value));
    return 0;
}

static PyObject *
get_counts(HistogramObject *self, void *Py_UNUSED(closure))
{
    PyObject *list = PyList_New(PK_BUCKETS);
    for (Py_ssize_t i = 0; list != NULL && i < PK_BUCKETS; i++) {
        PyObject *count = PyLong_FromLongLong(self->counts[i]);
        if (count == NULL) {
            Py_CLEAR(list);
            break;
        }
        PyList_SET_ITEM(list, i, count);
    }
    return list;
}

static int
set_counts(HistogramObject *self, PyObject *value, void *Py_UNUSED(closure))
{
    if (value == NULL) {
        PyErr_SetString(PyExc_TypeError, "counts cannot be deleted");
        return -1;
    }
    PyObject *sequence = PySequence_Fast(value, "counts is a sequence of ints");
    if (sequence == NULL) {
        return -1;
    }
    int64_t counts[PK_BUCKETS];
    int result = 0;
    if (PySequence_Fast_GET_SIZE(sequence) != PK_BUCKETS) {
        PyErr_Format(PyExc_ValueError, "counts has one count a bucket: %d", PK_BUCKETS);
        result = -1;
    }
    for (Py_ssize_t i = 0; result == 0 && i < PK_BUCKETS; i++) {
        result = pk_as_int64(PySequence_Fast_GET_ITEM(sequence, i), &counts[i]);
    }
    Py_DECREF(sequence);
    if (result == 0) {
        memcpy(self->counts, counts, sizeof(counts));
    }
    return result;
}

static PyMethodDef histogram_methods[] = {
    {"record", (PyCFunction)(void (*)(void))histogram_record, METH_FASTCALL,
     "record(value_ns, weight=1): one value, standing for weight requests."},
    {"copy", (PyCFunction)histogram_copy, METH_NOARGS, "copy() -> Histogram: a snapshot of this one."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef histogram_members[] = {
    {"count", T_LONGLONG, offsetof(HistogramObject, count), 0, NULL},
    {"minimum_ns", T_LONGLONG, offsetof(HistogramObject, minimum_ns), 0, NULL},
    {"maximum_ns", T_LONGLONG, offsetof(HistogramObject, maximum_ns), 0, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef histogram_getset[] = {
    {"total_ns", (getter)get_total, (setter)set_total, "The values' sum, each times its weight.", NULL},
    {"counts", (getter)get_counts, (setter)set_counts, "Each bucket's count, as a new list.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject PkHistogram_Type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "litellm_perfkit._core._speedups.Histogram",
    .tp_basicsize = sizeof(HistogramObject),
    .tp_dealloc = (destructor)histogram_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An explicit-bucket histogram of int64 ns values (_export/_metrics._PyHistogram).",
    .tp_methods = histogram_methods,
    .tp_members = histogram_members,
    .tp_getset = histogram_getset,
    .tp_new = histogram_new,
};

/* observe_stages(histograms, stages, durations, weight, make): each stage's
 * duration (durations[i], by position) into histograms[stage.name], made by
 * make(name) (which adds it) the first time a name comes. Exactly Histogram's. */
PyObject *
pk_observe_stages(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 5 || !PyDict_CheckExact(args[0]) || !PyTuple_Check(args[1]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "observe_stages(histograms: dict, stages: tuple, durations: list, weight, make)");
        return NULL;
    }
    PyObject *histograms = args[0], *stages = args[1], *durations = args[2], *make = args[4];
    int64_t weight;
    if (pk_as_int64(args[3], &weight) < 0) {
        return NULL;
    }
    if (PyList_GET_SIZE(durations) != PyTuple_GET_SIZE(stages)) {
        PyErr_SetString(PyExc_ValueError, "observe_stages: one duration a stage");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(stages); i++) {
        int64_t value;
        if (pk_as_int64(PyList_GET_ITEM(durations, i), &value) < 0) {
            return NULL;
        }
        PyObject *name = PyObject_GetAttr(PyTuple_GET_ITEM(stages, i), pk_names.name);
        if (name == NULL) {
            return NULL;
        }
        PyObject *histogram = PyDict_GetItemWithError(histograms, name); /* borrowed */
        if (histogram != NULL) {
            Py_INCREF(histogram);
        }
        else if (!PyErr_Occurred()) {
            histogram = PyObject_CallOneArg(make, name);
        }
        Py_DECREF(name);
        if (histogram == NULL) {
            return NULL;
        }
        int result = Py_IS_TYPE(histogram, &PkHistogram_Type) ? histogram_add((HistogramObject *)histogram, value, weight)
                                                               : (PyErr_SetString(PyExc_TypeError, "not a Histogram"), -1);
        Py_DECREF(histogram);
        if (result < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
}
