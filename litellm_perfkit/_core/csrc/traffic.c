/* Tally and Passage: every request counted, recorded or not (the
 * counterparts of _traffic._PyTally and _traffic._PyPassage, the reference).
 *
 * A series is keyed by the tuple (method, route, status, error, streaming,
 * recorded) in a dict that maps it to its row; the rows are one array of
 * u64 counts (PK_TRAFFIC_HEAD_COUNTS, then the duration's buckets and the
 * TTFT's), grown by doubling. A Passage is an unrecorded request's send: it
 * reads the response start and, for an event stream, the bodies until the
 * first content token (it is "watching"); after that it reads no message as
 * it passes, only holds the last one, which says at close whether the
 * response finished, and adds the request when the middleware closes it.
 * Not tracked by the collector: it holds the tally, the server's send, the
 * method and the last message the app sent, none of which refers back to it
 * (a message is made of texts, bytes and flags).
 */
#include "speedups.h"

#include <string.h>
#include <structmember.h>

#define BUCKETS (PK_BOUNDARY_COUNT + 1)
#define ROW (PK_TRAFFIC_HEAD_COUNTS + 2 * BUCKETS)

static const long long bounds[PK_BOUNDARY_COUNT] = PK_BOUNDARIES_NS;

/* A key recently added and its row: most requests repeat one of a few
 * series, and comparing the key's parts to a recent one's costs far less
 * than making the key tuple, hashing it and looking it up (about 500
 * instructions a request: benchmarks/middleware_overhead.py). The texts are
 * exact str, held. The row a key maps to never changes until clear(). */
#define RECENT 4

typedef struct {
    PyObject *method, *route, *error; /* NULL: an empty entry */
    int64_t status;
    char streaming, recorded;
    Py_ssize_t row;
} Recent;

typedef struct {
    PyObject_HEAD
    PyObject *index;            /* dict: key tuple -> row number (int) */
    PyObject *keys;             /* list: each row's key, in order */
    PyObject *known_methods;    /* frozenset of method names kept as they are */
    PyObject *other;            /* "_OTHER" */
    PyObject *unmatched_route;  /* the route of a request no route matched */
    PyObject *incomplete;       /* the error type of a response the app never finished */
    uint64_t *rows;
    Py_ssize_t capacity;        /* rows allocated */
    Py_ssize_t max_series;
    unsigned long long requests;
    Recent recent[RECENT];      /* the rows of the last keys added */
    int recent_next;            /* the entry the next new key replaces */
} TallyObject;

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    TallyObject *tally;
    PyObject *send;
    PyObject *method;
    PyObject *last;             /* the last message passed, unread (NULL: none, or read) */
    int64_t start_ns, ttft_ns, status;
    int64_t last_ns;            /* when the last message passed: the last byte's time, once the response finished */
    char watching;              /* every message is read: until the response start, and a stream's first token */
    char started, streaming, scanning, complete;
    PkSse sse;
} PassageObject;

static PyObject *passage_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames);
static PyObject *route_name, *path_name, *response_body, *response_start, *response_trailers, *empty_text;
static PyObject *seen_body, *seen_start; /* message_kind's last matches */

static Py_ssize_t
bucket_of(int64_t value)
{
    /* bisect_left: the first bound >= value. */
    Py_ssize_t low = 0, high = PK_BOUNDARY_COUNT;
    while (low < high) {
        Py_ssize_t middle = (low + high) / 2;
        if (bounds[middle] < value) {
            low = middle + 1;
        }
        else {
            high = middle;
        }
    }
    return low;
}

static void
observe(uint64_t *row, int at, int buckets_at, int64_t value)
{
    row[buckets_at + bucket_of(value)]++;
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

static void
forget_recent(TallyObject *self)
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

/* One finished request; ttft < 0: none. 0, or -1 with an exception set. */
static int
tally_add_values(TallyObject *self, PyObject *method, PyObject *route, int64_t status, PyObject *error, int streaming,
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

/* --- Tally ---------------------------------------------------------------- */

static PyObject *
tally_add(TallyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    int64_t status, duration, ttft;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "add(method, route, status, error, streaming, recorded, duration_ns, ttft_ns) takes 8 arguments");
        return NULL;
    }
    if (!PyUnicode_Check(args[0]) || !PyUnicode_Check(args[1]) || !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "add: method, route and error must be str");
        return NULL;
    }
    int streaming = PyObject_IsTrue(args[4]), recorded = PyObject_IsTrue(args[5]);
    if (streaming < 0 || recorded < 0 || pk_as_int64(args[2], &status) < 0 || pk_as_int64(args[6], &duration) < 0 ||
        pk_as_int64(args[7], &ttft) < 0 ||
        tally_add_values(self, args[0], args[1], status, args[3], streaming, recorded, duration, ttft) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* message[key] or scope[key] (a new reference), None when missing. */
static PyObject *
get(PyObject *message, PyObject *key)
{
    PyObject *value;
    return pk_get_item(message, key, &value) < 0 ? NULL : value != NULL ? value : Py_NewRef(Py_None);
}

/* The matched route's template (a new reference), or the unmatched route's label. */
static PyObject *
route_of(TallyObject *tally, PyObject *scope)
{
    PyObject *route = get(scope, route_name);
    if (route == NULL) {
        return NULL;
    }
    PyObject *path = route == Py_None ? NULL : PyObject_GetAttr(route, path_name);
    Py_DECREF(route);
    if (path == NULL) {
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) {
                return NULL;
            }
            PyErr_Clear();
        }
    }
    else if (PyUnicode_Check(path) && PyUnicode_GET_LENGTH(path) > 0) {
        return path;
    }
    Py_XDECREF(path);
    return Py_NewRef(tally->unmatched_route);
}

/* A recorded request, once its exchange has finished the timeline (tally_recorded's reference,
 * _PyTally.add_recorded): read from the C timeline's fields, no int made. */
static PyObject *
tally_add_recorded(TallyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "add_recorded(timeline, scope) takes 2 arguments");
        return NULL;
    }
    PkTimelineObject *timeline = pk_timeline(args[0]);
    if (timeline == NULL) {
        return NULL;
    }
    PyObject *error = timeline->error, *method = timeline->method, *marks = timeline->marks;
    if (error == NULL || method == NULL || marks == NULL || !PyDict_Check(marks)) {
        PyErr_SetString(PyExc_TypeError, "add_recorded: the timeline's error, method or marks is missing");
        return NULL;
    }
    if (error == Py_None) {
        error = empty_text;
    }
    else if (PyUnicode_Check(error) && PyUnicode_Compare(error, pk_names.client_disconnected) == 0) {
        error = self->incomplete; /* as an unrecorded request's would be: its passage does not watch receive */
    }
    int64_t ttft = -1;
    PyObject *first = PyDict_GetItemWithError(marks, pk_names.first_token);
    if (first == NULL ? PyErr_Occurred() != NULL : pk_as_int64(first, &ttft) < 0) {
        return NULL;
    }
    if (first != NULL) {
        ttft -= timeline->start_ns;
    }
    if (!PyUnicode_Check(method) || !PyUnicode_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "add_recorded: the timeline's method and error must be str");
        return NULL;
    }
    PyObject *route = route_of(self, args[1]);
    int failed = route == NULL || tally_add_values(self, method, route, timeline->status, error, timeline->streaming, 1,
                                                   timeline->end_ns - timeline->start_ns, ttft) < 0;
    Py_XDECREF(route);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
tally_series(TallyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    Py_ssize_t count = PyList_GET_SIZE(self->keys);
    PyObject *out = PyList_New(count);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t r = 0; r < count; r++) {
        PyObject *counts = PyTuple_New(ROW);
        if (counts == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        for (int i = 0; i < ROW; i++) {
            PyObject *value = PyLong_FromUnsignedLongLong(self->rows[r * ROW + i]);
            if (value == NULL) {
                Py_DECREF(counts);
                Py_DECREF(out);
                return NULL;
            }
            PyTuple_SET_ITEM(counts, i, value);
        }
        PyObject *pair = PyTuple_Pack(2, PyList_GET_ITEM(self->keys, r), counts);
        Py_DECREF(counts);
        if (pair == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, r, pair);
    }
    return out;
}

static PyObject *
tally_clear_series(TallyObject *self, PyObject *Py_UNUSED(ignored))
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    PyDict_Clear(self->index);
    if (PyList_SetSlice(self->keys, 0, PyList_GET_SIZE(self->keys), NULL) < 0) {
        return NULL;
    }
    if (self->rows != NULL) {
        memset(self->rows, 0, (size_t)self->capacity * ROW * sizeof(uint64_t));
    }
    forget_recent(self);
    self->requests = 0;
    Py_RETURN_NONE;
}

static PyObject *
tally_passage(TallyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (pk_initialised(self->index, (PyObject *)self) < 0) {
        return NULL;
    }
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "passage(method, send) takes 2 arguments");
        return NULL;
    }
    PassageObject *passage = PyObject_New(PassageObject, &PkPassage_Type);
    if (passage == NULL) {
        return NULL;
    }
    passage->vectorcall = passage_vectorcall;
    passage->tally = (TallyObject *)Py_NewRef(self);
    passage->method = Py_NewRef(args[0]);
    passage->send = Py_NewRef(args[1]);
    passage->last = NULL;
    passage->sse.pending = NULL;
    passage->ttft_ns = -1;
    passage->status = 0;
    passage->last_ns = 0;
    passage->watching = 1;
    passage->started = passage->streaming = passage->scanning = passage->complete = 0;
    if (pk_now(&passage->start_ns) < 0) {
        Py_DECREF(passage);
        return NULL;
    }
    return (PyObject *)passage;
}

static int
tally_init(TallyObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"known_methods", "other", "unmatched_route", "incomplete_response", "max_series", NULL};
    PyObject *known, *other, *unmatched, *incomplete;
    Py_ssize_t max_series;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!UUUn:Tally", keywords, &PyFrozenSet_Type, &known, &other,
                                     &unmatched, &incomplete, &max_series)) {
        return -1;
    }
    if (self->index != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "Tally is initialized once");
        return -1;
    }
    self->index = PyDict_New();
    self->keys = PyList_New(0);
    if (self->index == NULL || self->keys == NULL) {
        return -1;
    }
    self->known_methods = Py_NewRef(known);
    self->other = Py_NewRef(other);
    self->unmatched_route = Py_NewRef(unmatched);
    self->incomplete = Py_NewRef(incomplete);
    self->max_series = max_series;
    return 0;
}

static int
tally_traverse(TallyObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->index);
    Py_VISIT(self->keys);
    return 0;
}

static int
tally_clear(TallyObject *self)
{
    Py_CLEAR(self->index);
    Py_CLEAR(self->keys);
    Py_CLEAR(self->known_methods);
    Py_CLEAR(self->other);
    Py_CLEAR(self->unmatched_route);
    Py_CLEAR(self->incomplete);
    forget_recent(self);
    return 0;
}

static void
tally_dealloc(TallyObject *self)
{
    PyObject_GC_UnTrack(self);
    tally_clear(self);
    PyMem_Free(self->rows);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyMethodDef tally_methods[] = {
    {"add", (PyCFunction)(void (*)(void))tally_add, METH_FASTCALL,
     "add(method, route, status, error, streaming, recorded, duration_ns, ttft_ns): one finished request (ttft_ns < 0: none)."},
    {"add_recorded", (PyCFunction)(void (*)(void))tally_add_recorded, METH_FASTCALL,
     "add_recorded(timeline, scope): a recorded request, once its exchange has finished the timeline."},
    {"passage", (PyCFunction)(void (*)(void))tally_passage, METH_FASTCALL,
     "passage(method, send) -> Passage: the send of an unrecorded request that starts now."},
    {"series", (PyCFunction)tally_series, METH_NOARGS, "series() -> [(key, counts)]: every series, in the order each began."},
    {"clear", (PyCFunction)tally_clear_series, METH_NOARGS, "clear(): forget every series (tests start from nothing)."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef tally_members[] = {
    {"requests", T_ULONGLONG, offsetof(TallyObject, requests), READONLY, "requests added so far"},
    {"max_series", T_PYSSIZET, offsetof(TallyObject, max_series), 0, "series kept apart; the rest fold into one"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject PkTally_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Tally",
    .tp_basicsize = sizeof(TallyObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "Tally(known_methods, other, unmatched_route, incomplete_response, max_series): every request's "
              "count and histograms by series (see _traffic._PyTally).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)tally_init,
    .tp_dealloc = (destructor)tally_dealloc,
    .tp_traverse = (traverseproc)tally_traverse,
    .tp_clear = (inquiry)tally_clear,
    .tp_methods = tally_methods,
    .tp_members = tally_members,
};

/* --- Passage -------------------------------------------------------------- */

enum { OTHER_MESSAGE, BODY_MESSAGE, START_MESSAGE, TRAILERS_MESSAGE };

/* Which message a type names. A message type is a literal of the server's
 * or framework's code, the same object every time but not interned (it has
 * dots): the last object that matched each type is kept, so that the next
 * message is told by pointers alone, without comparing text. */
static int
message_kind(PyObject *type)
{
    if (type == seen_body || type == response_body) {
        return BODY_MESSAGE;
    }
    if (type == seen_start || type == response_start) {
        return START_MESSAGE;
    }
    if (!PyUnicode_Check(type)) {
        return OTHER_MESSAGE;
    }
    if (PyUnicode_Compare(type, response_body) == 0) {
        Py_XSETREF(seen_body, Py_NewRef(type));
        return BODY_MESSAGE;
    }
    if (PyUnicode_Compare(type, response_start) == 0) {
        Py_XSETREF(seen_start, Py_NewRef(type));
        return START_MESSAGE;
    }
    return PyUnicode_Compare(type, response_trailers) == 0 ? TRAILERS_MESSAGE : OTHER_MESSAGE;
}

static int
on_start(PassageObject *self, PyObject *status, PyObject *headers)
{
    self->started = 1;
    self->watching = 0; /* unless the body is an event stream */
    if (status == NULL) {
        PyErr_SetString(PyExc_KeyError, "status");
        return -1;
    }
    if (pk_as_int64(status, &self->status) < 0) {
        return -1;
    }
    if (headers == NULL || headers == Py_None) {
        return 0;
    }
    PyObject *sequence = PySequence_Fast(headers, "the response headers are not a sequence");
    if (sequence == NULL) {
        return -1;
    }
    int result = 0;
    for (Py_ssize_t i = 0; i < PySequence_Fast_GET_SIZE(sequence); i++) {
        int found = pk_is_event_stream(PySequence_Fast_GET_ITEM(sequence, i));
        if (found) {
            if (found > 0) {
                self->streaming = self->scanning = self->watching = 1;
                pk_sse_init(&self->sse);
            }
            result = found < 0 ? -1 : 0;
            break;
        }
    }
    Py_DECREF(sequence);
    return result;
}

/* A stream's body before its first token: looked for the token in place
 * (the passage needs no event count). */
static int
scan(PassageObject *self, PyObject *body)
{
    int token = 0, result;
    if (PyBytes_CheckExact(body)) {
        result = PyBytes_GET_SIZE(body) > 0
                     ? pk_sse_find_token(&self->sse, PyBytes_AS_STRING(body), PyBytes_GET_SIZE(body), &token)
                     : 0;
    }
    else { /* memoryview, bytearray */
        Py_buffer view;
        if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
            return -1;
        }
        result = view.len > 0 ? pk_sse_find_token(&self->sse, view.buf, view.len, &token) : 0;
        PyBuffer_Release(&view);
    }
    if (result == 0 && token) {
        int64_t now;
        if (pk_now(&now) < 0) {
            return -1;
        }
        self->ttft_ns = now - self->start_ns;
        self->scanning = 0;
        self->watching = !self->started;
        pk_sse_clear(&self->sse);
    }
    return result;
}

/* A body message: a stream's body until its first token, and whether it ends the response. */
static int
on_body(PassageObject *self, PyObject *body, PyObject *more)
{
    if (self->scanning && body != NULL && body != Py_None && scan(self, body) < 0) {
        return -1;
    }
    int more_body = more == NULL ? 0 : PyObject_IsTrue(more);
    if (more_body < 0) {
        return -1;
    }
    if (!more_body) {
        self->complete = 1;
    }
    return 0;
}

/* A message the app sends while watching: the response start's status and
 * whether the body is an event stream, a stream's bodies until the first
 * token, whether a body ends the response. Or, at close, the last message:
 * the response finished if it is a body with no more to come, or trailers,
 * which follow the last body. Only the keys needed are looked up (a lookup
 * costs about 120 instructions). 0, or -1 with an exception set. */
static int
read_message(PassageObject *self, PyObject *message, int last)
{
    PyObject *type, *first = NULL, *second = NULL;
    if (pk_get_item(message, pk_names.type, &type) < 0) {
        return -1;
    }
    if (type == NULL) {
        return 0;
    }
    int result = 0;
    switch (message_kind(type)) {
    case BODY_MESSAGE:
        if ((self->scanning && pk_get_item(message, pk_names.body, &first) < 0) ||
            pk_get_item(message, pk_names.more_body, &second) < 0) {
            result = -1;
        }
        else {
            result = on_body(self, first, second);
        }
        break;
    case START_MESSAGE:
        if (!last) {
            if (pk_get_item(message, pk_names.status, &first) < 0 ||
                pk_get_item(message, pk_names.headers, &second) < 0) {
                result = -1;
            }
            else {
                result = on_start(self, first, second);
            }
        }
        break;
    case TRAILERS_MESSAGE:
        if (last) {
            self->complete = 1;
        }
        break;
    }
    Py_XDECREF(first);
    Py_XDECREF(second);
    Py_DECREF(type);
    return result;
}

/* One message as it passes: its time, and read while watching, else kept. */
static inline void
pass_message(PassageObject *self, PyObject *message)
{
    if (pk_now(&self->last_ns) < 0) {
        pk_report("middleware.passage"); /* a test's fake clock failed: this message's time is unknown */
    }
    if (self->watching) {
        if (read_message(self, message, 0) < 0) {
            pk_report("middleware.passage"); /* perfkit's bug must never become the app's */
        }
    }
    else {
        /* Most messages of a stream: nothing read, the last one kept for close. */
        Py_XSETREF(self->last, Py_NewRef(message));
    }
}

/* send(message), the passage's bound method that the middleware hands the
 * app: CPython's bytecode calls a METH_O builtin method directly
 * (3.11's PRECALL_NO_KW_BUILTIN_O, CALL_BUILTIN_O since 3.12), about 117
 * instructions a message fewer than calling this object through its
 * vectorcall (benchmarks/middleware_overhead.py, --measure instructions). */
static PyObject *
passage_send(PassageObject *self, PyObject *message)
{
    pass_message(self, message);
    /* The server's send gets one argument, with a slot before it lent. */
    PyObject *stack[2] = {NULL, message};
    vectorcallfunc send = PyVectorcall_Function(self->send);
    size_t nargsf = 1 | PY_VECTORCALL_ARGUMENTS_OFFSET;
    return send != NULL ? send(self->send, stack + 1, nargsf, NULL)
                        : PyObject_Vectorcall(self->send, stack + 1, nargsf, NULL);
}

static PyObject *
passage_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    PassageObject *self = (PassageObject *)callable;
    if (PyVectorcall_NARGS(nargsf) != 1 || kwnames != NULL) {
        PyErr_SetString(PyExc_TypeError, "send(message) takes one argument");
        return NULL;
    }
    pass_message(self, args[0]);
    /* The app's own arguments handed on as they came (with the slot before
     * them, when the app's call lent it): the server's send is called as the
     * app called this one. Its result is checked once, by the app's call. */
    vectorcallfunc send = PyVectorcall_Function(self->send);
    return send != NULL ? send(self->send, args, nargsf, NULL) : PyObject_Vectorcall(self->send, args, nargsf, NULL);
}

static PyObject *
passage_close(PassageObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    int64_t end;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "close(scope, error) takes 2 arguments");
        return NULL;
    }
    PyObject *error = args[1], *route = NULL, *last = self->last;
    if (pk_now(&end) < 0) {
        goto fail;
    }
    if (last != NULL) {
        self->last = NULL;
        int failed = read_message(self, last, 1) < 0;
        Py_DECREF(last);
        if (failed) {
            goto fail;
        }
    }
    if (self->complete) {
        end = self->last_ns; /* the request ends at its last byte, as a recorded one's */
    }
    if (error == Py_None) {
        error = self->complete ? empty_text : self->tally->incomplete;
    }
    else if (!PyUnicode_Check(error)) {
        PyErr_SetString(PyExc_TypeError, "close: error must be str or None");
        goto fail;
    }
    route = route_of(self->tally, args[0]);
    if (route == NULL || tally_add_values(self->tally, self->method, route, self->status, error, self->streaming, 0,
                                          end - self->start_ns, self->ttft_ns) < 0) {
        goto fail;
    }
    Py_DECREF(route);
    Py_RETURN_NONE;
fail:
    Py_XDECREF(route);
    pk_report("middleware.passage");
    Py_RETURN_NONE;
}

static void
passage_dealloc(PassageObject *self)
{
    Py_XDECREF(self->tally);
    Py_XDECREF(self->send);
    Py_XDECREF(self->method);
    Py_XDECREF(self->last);
    pk_sse_clear(&self->sse);
    PyObject_Free(self);
}

static PyMethodDef passage_methods[] = {
    {"send", (PyCFunction)passage_send, METH_O,
     "send(message): the same as calling the passage; the middleware hands the app this bound method."},
    {"close", (PyCFunction)(void (*)(void))passage_close, METH_FASTCALL,
     "close(scope, error): the app returned (error None) or raised (its type's name); add the request to the tally."},
    {NULL, NULL, 0, NULL},
};

PyTypeObject PkPassage_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.Passage",
    .tp_basicsize = sizeof(PassageObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "An unrecorded request's send (see _traffic._PyPassage); made by Tally.passage.",
    .tp_vectorcall_offset = offsetof(PassageObject, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_dealloc = (destructor)passage_dealloc,
    .tp_methods = passage_methods,
};

int
pk_traffic_ready(void)
{
    route_name = PyUnicode_InternFromString("route");
    path_name = PyUnicode_InternFromString("path");
    response_body = PyUnicode_InternFromString("http.response.body");
    response_start = PyUnicode_InternFromString("http.response.start");
    response_trailers = PyUnicode_InternFromString("http.response.trailers");
    empty_text = PyUnicode_InternFromString("");
    if (!route_name || !path_name || !response_body || !response_start || !response_trailers || !empty_text) {
        return -1;
    }
    return PyType_Ready(&PkTally_Type) < 0 || PyType_Ready(&PkPassage_Type) < 0 ? -1 : 0;
}
