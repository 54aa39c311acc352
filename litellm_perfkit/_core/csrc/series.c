/* A tally's series (the Tally type is in tally.c): each one's row of counts,
 * found by its labels through a shortcut for the few recent keys, then the
 * index; past max_series the rest fold into one series.
 */
#include "traffic.h"

#include <string.h>

static void
observe(uint64_t *row, int at, int buckets_at, int64_t value)
{
    row[buckets_at + pk_bucket_of(value)]++;
    if (!row[at] || (uint64_t)value < row[at + 2]) {
        row[at + 2] = (uint64_t)value;
    }
    if ((uint64_t)value > row[at + 3]) {
        row[at + 3] = (uint64_t)value;
    }
    row[at]++;
    row[at + 1] += (uint64_t)value;
}

/* The row of a key (a new reference to the tuple is taken when it is new), or -1 with an exception set. */
static Py_ssize_t
row_of(TallyObject *self, PyObject *key)
{
    PyObject *found = PyDict_GetItemWithError(self->index, key);
    if (found != NULL) {
        return PyLong_AsSsize_t(found);
    }
    if (PyErr_Occurred()) {
        return -1;
    }
    Py_ssize_t row = PyList_GET_SIZE(self->keys);
    if (row == self->capacity) {
        Py_ssize_t capacity = self->capacity ? self->capacity * 2 : 16;
        uint64_t *rows = PyMem_Realloc(self->rows, (size_t)capacity * ROW * sizeof(uint64_t));
        if (rows == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memset(rows + self->capacity * ROW, 0, (size_t)(capacity - self->capacity) * ROW * sizeof(uint64_t));
        self->rows = rows;
        self->capacity = capacity;
    }
    PyObject *number = PyLong_FromSsize_t(row);
    int failed = number == NULL || PyDict_SetItem(self->index, key, number) < 0 || PyList_Append(self->keys, key) < 0;
    Py_XDECREF(number);
    return failed ? -1 : row;
}

/* Whether two exact str hold the same text (ready strings of equal text
 * have the same kind in CPython); 0 also when one cannot be read so. */
static int
same_text(PyObject *a, PyObject *b)
{
    if (a == b) {
        return 1;
    }
    if (!PyUnicode_IS_READY(a) || !PyUnicode_IS_READY(b)) {
        return 0;
    }
    Py_ssize_t len = PyUnicode_GET_LENGTH(a);
    int kind = PyUnicode_KIND(a);
    return len == PyUnicode_GET_LENGTH(b) && kind == (int)PyUnicode_KIND(b) &&
           memcmp(PyUnicode_DATA(a), PyUnicode_DATA(b), (size_t)len * (size_t)kind) == 0;
}

/* The row of a recently added key, or -1. */
static Py_ssize_t
recent_row(TallyObject *self, PyObject *method, PyObject *route, int64_t status, PyObject *error, char streaming,
           char recorded)
{
    if (!PyUnicode_CheckExact(method) || !PyUnicode_CheckExact(route) || !PyUnicode_CheckExact(error)) {
        return -1;
    }
    for (int i = 0; i < RECENT; i++) {
        Recent *recent = &self->recent[i];
        if (recent->method != NULL && recent->status == status && recent->streaming == streaming &&
            recent->recorded == recorded && same_text(recent->route, route) && same_text(recent->method, method) &&
            same_text(recent->error, error)) {
            return recent->row;
        }
    }
    return -1;
}

static void
remember(TallyObject *self, PyObject *method, PyObject *route, int64_t status, PyObject *error, char streaming,
         char recorded, Py_ssize_t row)
{
    if (!PyUnicode_CheckExact(method) || !PyUnicode_CheckExact(route) || !PyUnicode_CheckExact(error)) {
        return;
    }
    Recent *recent = &self->recent[self->recent_next];
    self->recent_next = (self->recent_next + 1) % RECENT;
    Py_XSETREF(recent->method, Py_NewRef(method));
    Py_XSETREF(recent->route, Py_NewRef(route));
    Py_XSETREF(recent->error, Py_NewRef(error));
    recent->status = status;
    recent->streaming = streaming;
    recent->recorded = recorded;
    recent->row = row;
}

void
pk_tally_forget_recent(TallyObject *self)
{
    for (int i = 0; i < RECENT; i++) {
        Py_CLEAR(self->recent[i].method);
        Py_CLEAR(self->recent[i].route);
        Py_CLEAR(self->recent[i].error);
    }
    self->recent_next = 0;
}

/* The row of a key not among the recent ones: the series' index (a new
 * series when new, or the folded one past the cap); -1 with an exception set. */
static Py_ssize_t
indexed_row(TallyObject *self, PyObject *method, PyObject *route, int64_t status, PyObject *error, int streaming,
            int recorded)
{
    int known = PySet_Contains(self->known_methods, method);
    if (known < 0) {
        return -1;
    }
    PyObject *code = PyLong_FromLongLong(status);
    if (code == NULL) {
        return -1;
    }
    PyObject *key = PyTuple_Pack(6, known ? method : self->other, route, code, error, streaming ? Py_True : Py_False,
                                 recorded ? Py_True : Py_False);
    Py_DECREF(code);
    if (key == NULL) {
        return -1;
    }
    PyObject *found = PyDict_GetItemWithError(self->index, key);
    if (found == NULL && !PyErr_Occurred() && PyList_GET_SIZE(self->keys) >= self->max_series) {
        /* past the cap: one series for the rest, its labels all "_OTHER" */
        PyObject *zero = PyLong_FromLong(0);
        Py_SETREF(key, zero == NULL ? NULL
                                    : PyTuple_Pack(6, self->other, self->other, zero, self->other,
                                                   streaming ? Py_True : Py_False, recorded ? Py_True : Py_False));
        Py_XDECREF(zero);
        if (key == NULL) {
            return -1;
        }
    }
    Py_ssize_t row = found != NULL ? PyLong_AsSsize_t(found) : PyErr_Occurred() ? -1 : row_of(self, key);
    Py_DECREF(key);
    return row;
}

int
pk_tally_add_values(TallyObject *self, PyObject *method, PyObject *route, int64_t status, PyObject *error, int streaming,
                 int recorded, int64_t duration, int64_t ttft)
{
    char is_streaming = streaming != 0, is_recorded = recorded != 0;
    Py_ssize_t row = recent_row(self, method, route, status, error, is_streaming, is_recorded);
    if (row < 0) {
        row = indexed_row(self, method, route, status, error, is_streaming, is_recorded);
        if (row < 0) {
            return -1;
        }
        remember(self, method, route, status, error, is_streaming, is_recorded, row);
    }
    uint64_t *counts = self->rows + row * ROW;
    observe(counts, 0, PK_TRAFFIC_HEAD_COUNTS, duration < 0 ? 0 : duration);
    if (ttft >= 0) {
        observe(counts, 4, PK_TRAFFIC_HEAD_COUNTS + BUCKETS, ttft);
    }
    self->requests++;
    return 0;
}
