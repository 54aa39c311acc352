/* stage_records(finished, generators, cls, fields) -> (cls, ...): the
 * export agent's stages of a decoded record, the counterpart of
 * _core/_timeline.stage_records (the reference). Each stage becomes one
 * row, a sum or thread stage one row per parent its calls ran under; the
 * rows are ordered by when they started (a call group after its parent),
 * parents become positions, and each row is built once as a cls. In Python,
 * gathering and ordering the rows cost the agent twice what building the
 * instances does. */
#include "speedups.h"

typedef struct {
    int64_t key;    /* twice the stage's index; a call group's, at least twice its parent plus one */
    int64_t parent; /* its parent's index (-1: none) */
    int64_t start, end, own, items;
    PyObject *name, *kind; /* borrowed from the record's fields, which outlive the call */
    PyObject *intervals;   /* new reference */
} Row;

typedef struct {
    Row *v;
    Py_ssize_t n, cap;
} Rows;

/* Appends a row (intervals: a new reference, stolen; NULL: the call fails, its error set). */
static int
add_row(Rows *rows, int64_t key, int64_t parent, PyObject *name, int64_t start, int64_t end, PyObject *kind, int64_t own,
        int64_t items, PyObject *intervals)
{
    if (intervals == NULL) {
        return -1;
    }
    if (rows->n == rows->cap) {
        void *data = rows->v;
        size_t capacity = (size_t)rows->cap * sizeof(Row);
        if (pk_reserve(&data, &capacity, (size_t)(rows->n + 1) * sizeof(Row), 32 * sizeof(Row)) < 0) {
            Py_DECREF(intervals);
            return -1;
        }
        rows->v = data;
        rows->cap = (Py_ssize_t)(capacity / sizeof(Row));
    }
    rows->v[rows->n++] = (Row){key, parent, start, end, own, items, name, kind, intervals};
    return 0;
}

/* The row as a cls: its parent given as a position. */
static PyObject *
row_instance(const Row *row, int64_t parent, PyTypeObject *cls, PyObject *empty, PyObject *fields)
{
    /* In StageRecord's field order: name, start_ns, end_ns, parent, kind, self_ns, items, intervals. */
    PyObject *values[8] = {row->name, PyLong_FromLongLong((long long)row->start), PyLong_FromLongLong((long long)row->end),
                           PyLong_FromLongLong((long long)parent), row->kind, PyLong_FromLongLong((long long)row->own),
                           PyLong_FromLongLong((long long)row->items), row->intervals};
    PyObject *instance = NULL;
    if (values[1] != NULL && values[2] != NULL && values[3] != NULL && values[5] != NULL && values[6] != NULL) {
        instance = pk_new_instance(cls, empty, fields, values);
    }
    for (int i = 1; i < 7; i++) {
        if (i != 4) {
            Py_XDECREF(values[i]);
        }
    }
    return instance;
}

static int
item_int64(PyObject *sequence, Py_ssize_t i, int64_t *out)
{
    return pk_as_int64(PySequence_Fast_GET_ITEM(sequence, i), out);
}

/* A sum or thread stage's calls (size values each, the parent last), one row per parent, in the order each
 * parent first appears: its calls' other values flat, its start the earliest start, its end the latest end. */
static int
add_call_rows(Rows *rows, int64_t index, PyObject *name, PyObject *kind, PyObject *calls, Py_ssize_t size, int thread)
{
    Py_ssize_t ncalls = PySequence_Fast_GET_SIZE(calls) / size, width = size - 1;
    int64_t *parents = PyMem_Malloc(sizeof(int64_t) * (size_t)(ncalls + 1));
    int result = -1;
    if (parents == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t c = 0; c < ncalls; c++) {
        if (item_int64(calls, c * size + width, &parents[c]) < 0) {
            goto done;
        }
    }
    for (Py_ssize_t c = 0; c < ncalls; c++) {
        int first = 1;
        for (Py_ssize_t b = 0; b < c && first; b++) {
            first = parents[b] != parents[c];
        }
        if (!first) {
            continue; /* its group is made at its parent's first call */
        }
        Py_ssize_t count = 0;
        for (Py_ssize_t d = c; d < ncalls; d++) {
            count += parents[d] == parents[c];
        }
        PyObject *flat = PyTuple_New(count * width);
        if (flat == NULL) {
            goto done;
        }
        int64_t start = 0, end = 0, own = 0;
        Py_ssize_t at = 0;
        for (Py_ssize_t d = c; d < ncalls; d++) {
            if (parents[d] != parents[c]) {
                continue;
            }
            int64_t call_start, call_end, cpu = 0;
            if (item_int64(calls, d * size, &call_start) < 0 || item_int64(calls, d * size + 1, &call_end) < 0 ||
                (thread && item_int64(calls, d * size + 2, &cpu) < 0)) {
                Py_DECREF(flat);
                goto done;
            }
            start = at == 0 || call_start < start ? call_start : start;
            end = at == 0 || call_end > end ? call_end : end;
            own += thread ? cpu : call_end - call_start; /* a thread stage's own time is its threads' CPU */
            for (Py_ssize_t v = 0; v < width; v++) {
                PyTuple_SET_ITEM(flat, at++, Py_NewRef(PySequence_Fast_GET_ITEM(calls, d * size + v)));
            }
        }
        int64_t key = 2 * parents[c] + 1 > 2 * index ? 2 * parents[c] + 1 : 2 * index; /* after its parent */
        if (add_row(rows, key, parents[c], name, start, end, kind, own, count, flat) < 0) {
            goto done;
        }
    }
    result = 0;
done:
    PyMem_Free(parents);
    return result;
}

static int
add_generator(Rows *rows, PyObject *name, PyObject *entry)
{
    PyObject *fast = PySequence_Fast(entry, "stage_records: a generator stage's entry must be a sequence");
    int result = -1;
    if (fast == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != PK_GENERATOR_SIZE) {
        PyErr_SetString(PyExc_ValueError, "stage_records: a generator stage's entry has the wrong size");
        goto done;
    }
    int64_t index, first, last, parent, own, items;
    if (item_int64(fast, PK_GENERATOR_INDEX, &index) < 0 || item_int64(fast, PK_GENERATOR_FIRST_NS, &first) < 0 ||
        item_int64(fast, PK_GENERATOR_LAST_NS, &last) < 0 || item_int64(fast, PK_GENERATOR_PARENT, &parent) < 0 ||
        item_int64(fast, PK_GENERATOR_SELF_NS, &own) < 0 || item_int64(fast, PK_GENERATOR_ITEMS, &items) < 0) {
        goto done;
    }
    PyObject *kind = PySequence_Fast_GET_ITEM(fast, PK_GENERATOR_KIND);
    PyObject *intervals = PySequence_Fast(PySequence_Fast_GET_ITEM(fast, PK_GENERATOR_INTERVALS),
                                          "stage_records: a stage's intervals must be a sequence");
    if (intervals == NULL) {
        goto done;
    }
    int sum = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "sum") == 0;
    int thread = PyUnicode_Check(kind) && PyUnicode_CompareWithASCIIString(kind, "thread") == 0;
    if (sum || thread) {
        result = add_call_rows(rows, index, name, kind, intervals, thread ? PK_THREAD_CALL_SIZE : PK_SUM_CALL_SIZE, thread);
    }
    else {
        result = add_row(rows, 2 * index, parent, name, first, last, kind, own, items, PySequence_Tuple(intervals));
    }
    Py_DECREF(intervals);
done:
    Py_DECREF(fast);
    return result;
}

/* The position of the last row whose key is twice index, or -1 (the reference's dict of positions). */
static int64_t
position_of(const Rows *rows, int64_t index)
{
    Py_ssize_t lo = 0, hi = rows->n;
    while (lo < hi) { /* the first row whose key is past it */
        Py_ssize_t mid = (lo + hi) / 2;
        if (rows->v[mid].key <= 2 * index) {
            lo = mid + 1;
        }
        else {
            hi = mid;
        }
    }
    return lo > 0 && rows->v[lo - 1].key == 2 * index ? lo - 1 : -1;
}

PyObject *
pk_stage_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 4 || !PyList_Check(args[0]) || !PyDict_Check(args[1]) || !PyType_Check(args[2]) || !PyTuple_Check(args[3]) ||
        PyTuple_GET_SIZE(args[3]) != 8) {
        PyErr_SetString(PyExc_TypeError, "stage_records(finished: list, generators: dict, cls, fields: 8-tuple)");
        return NULL;
    }
    PyObject *finished = args[0], *generators = args[1], *fields = args[3];
    Rows rows = {0};
    PyObject *result = NULL, *empty = PyTuple_New(0);
    if (empty == NULL) {
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(finished); i++) {
        PyObject *stage = PySequence_Fast(PyList_GET_ITEM(finished, i), "stage_records: a finished stage must be a sequence");
        if (stage == NULL) {
            goto done;
        }
        int64_t index, start, end, parent;
        int failed = PySequence_Fast_GET_SIZE(stage) != PK_FINISHED_SIZE;
        if (failed) {
            PyErr_SetString(PyExc_ValueError, "stage_records: a finished stage has the wrong size");
        }
        failed = failed || item_int64(stage, PK_FINISHED_INDEX, &index) < 0 || item_int64(stage, PK_FINISHED_START_NS, &start) < 0 ||
                 item_int64(stage, PK_FINISHED_END_NS, &end) < 0 || item_int64(stage, PK_FINISHED_PARENT, &parent) < 0 ||
                 add_row(&rows, 2 * index, parent, PySequence_Fast_GET_ITEM(stage, PK_FINISHED_NAME), start, end, pk_names.block, 0,
                         0, Py_NewRef(empty)) < 0;
        Py_DECREF(stage);
        if (failed) {
            goto done;
        }
    }
    Py_ssize_t at = 0;
    PyObject *name, *entry;
    while (PyDict_Next(generators, &at, &name, &entry)) {
        if (add_generator(&rows, name, entry) < 0) {
            goto done;
        }
    }
    for (Py_ssize_t i = 1; i < rows.n; i++) { /* by key, ties in the order they came (a stable insertion sort: a few dozen rows) */
        Row row = rows.v[i];
        Py_ssize_t j = i;
        for (; j > 0 && rows.v[j - 1].key > row.key; j--) {
            rows.v[j] = rows.v[j - 1];
        }
        rows.v[j] = row;
    }
    result = PyTuple_New(rows.n);
    if (result == NULL) {
        goto done;
    }
    for (Py_ssize_t n = 0; n < rows.n; n++) {
        int64_t parent = rows.v[n].parent < 0 ? rows.v[n].parent : position_of(&rows, rows.v[n].parent);
        PyObject *instance = row_instance(&rows.v[n], parent, (PyTypeObject *)args[2], empty, fields);
        if (instance == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyTuple_SET_ITEM(result, n, instance);
    }
done:
    for (Py_ssize_t n = 0; n < rows.n; n++) {
        Py_DECREF(rows.v[n].intervals);
    }
    PyMem_Free(rows.v);
    Py_DECREF(empty);
    return result;
}
