/* The module: setup(), the clock, error reporting, number formatting. */
#include "speedups.h"

#include <string.h>
#include <time.h>

PkHooks pk_hooks;
PkNames pk_names;

int
pk_now(int64_t *out)
{
    PyObject *clock = pk_hooks.clock;
#if defined(__linux__)
    if (clock == NULL) {
        /* time.perf_counter_ns() is CLOCK_MONOTONIC on Linux (CPython's
         * pytime.c), so both sides of perfkit share one clock. */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        *out = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
        return 0;
    }
#else
    if (clock == NULL) {
        clock = pk_hooks.default_clock;
    }
#endif
    PyObject *value = PyObject_CallNoArgs(clock);
    if (value == NULL) {
        return -1;
    }
    int result = pk_as_int64(value, out);
    Py_DECREF(value);
    return result;
}

int
pk_reserve(void **data, size_t *capacity, size_t needed, size_t first)
{
    if (needed <= *capacity) {
        return 0;
    }
    size_t size = *capacity ? *capacity : first;
    while (size < needed) {
        size *= 2;
    }
    void *grown = PyMem_Realloc(*data, size);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *data = grown;
    *capacity = size;
    return 0;
}

PyObject *
pk_raw_list_tolist(PyObject *self, PyObject *Py_UNUSED(ignored))
{
    return PySequence_List(self);
}

PyObject *
pk_raw_list_compare(PyObject *self, PyObject *other, int op)
{
    if ((op != Py_EQ && op != Py_NE) || !(PyList_Check(other) || Py_IS_TYPE(other, Py_TYPE(self)))) {
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *mine = PySequence_List(self);
    PyObject *theirs = mine == NULL ? NULL : PyList_Check(other) ? Py_NewRef(other) : PySequence_List(other);
    PyObject *result = theirs == NULL ? NULL : PyObject_RichCompare(mine, theirs, op);
    Py_XDECREF(mine);
    Py_XDECREF(theirs);
    return result;
}

PyObject *
pk_raw_list_repr(PyObject *self)
{
    const char *name = strrchr(Py_TYPE(self)->tp_name, '.');
    PyObject *list = PySequence_List(self);
    PyObject *text = list == NULL ? NULL
                                  : PyUnicode_FromFormat("%s(%R)", name ? name + 1 : Py_TYPE(self)->tp_name, list);
    Py_XDECREF(list);
    return text;
}

int
pk_as_int64(PyObject *value, int64_t *out)
{
    int overflow;
    long long result = PyLong_AsLongLongAndOverflow(value, &overflow);
    if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "a perfkit time or count past 64 bits");
        return -1;
    }
    if (result == -1 && PyErr_Occurred()) {
        return -1;
    }
    *out = result;
    return 0;
}

int
pk_initialised(PyObject *field, PyObject *object)
{
    if (field == NULL) {
        PyErr_Format(PyExc_RuntimeError, "%.100s: __init__ was not called", Py_TYPE(object)->tp_name);
        return -1;
    }
    return 0;
}

void
pk_report(const char *where)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    PyErr_NormalizeException(&type, &value, &traceback);
    if (value != NULL && pk_hooks.internal_error != NULL) {
        PyObject *result = PyObject_CallFunction(pk_hooks.internal_error, "sO", where, value);
        if (result == NULL) {
            PyErr_Clear(); /* the error counter failed too: nothing left to tell */
        }
        Py_XDECREF(result);
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(traceback);
}

int
pk_format_ms(char *out, int64_t duration_ns)
{
    /* By hand: snprintf costs more than the rest of a Server-Timing entry. */
    int64_t us = duration_ns > 0 ? (duration_ns + 500) / 1000 : 0;
    uint64_t ms = (uint64_t)(us / 1000);
    int fraction = (int)(us % 1000);
    char digits[20];
    int count = 0, len = 0;
    do {
        digits[count++] = (char)('0' + ms % 10);
        ms /= 10;
    } while (ms);
    while (count) {
        out[len++] = digits[--count];
    }
    out[len++] = '.';
    out[len++] = (char)('0' + fraction / 100);
    out[len++] = (char)('0' + fraction / 10 % 10);
    out[len++] = (char)('0' + fraction % 10);
    return len;
}

static PyObject *
setup(PyObject *module, PyObject *args, PyObject *kwargs)
{
#define NAME(hook) #hook,
    static char *keywords[] = {PK_HOOKS(NAME) NULL};
#undef NAME
    if (pk_hooks.timeline_var != NULL) {
        PyErr_SetString(PyExc_RuntimeError, "setup() runs once, from _backend.py");
        return NULL;
    }
    PkHooks hooks = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, PK_HOOKS_FORMAT, keywords, PK_HOOKS_PARSE_ARGS(hooks))) {
        return NULL;
    }
    /* stage_spans allocates spans as this tuple subclass (a NamedTuple: no fields of its own). */
    if (!PyType_Check(hooks.span_type) || !PyType_IsSubtype((PyTypeObject *)hooks.span_type, &PyTuple_Type) ||
        ((PyTypeObject *)hooks.span_type)->tp_basicsize != PyTuple_Type.tp_basicsize) {
        PyErr_SetString(PyExc_TypeError, "setup: span_type must be a NamedTuple");
        return NULL;
    }
    if (!PyContextVar_CheckExact(hooks.timeline_var) || !PyContextVar_CheckExact(hooks.open_stage_var)) {
        PyErr_SetString(PyExc_TypeError, "setup: timeline_var and open_stage_var must be ContextVars");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hooks.token_hints); i++) {
        PyObject *hint = PyTuple_GET_ITEM(hooks.token_hints, i);
        if (!PyBytes_Check(hint) || PyBytes_GET_SIZE(hint) == 0) {
            PyErr_SetString(PyExc_TypeError, "setup: token_hints must be non-empty bytes");
            return NULL;
        }
    }
    if (PyTuple_GET_SIZE(hooks.timeline_defaults) != PK_TIMELINE_OBJECT_COUNT) {
        PyErr_SetString(PyExc_ValueError, "setup: timeline_defaults does not match perfkit_fields.h (rebuild the accelerator)");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PK_TIMELINE_OBJECT_COUNT; i++) {
        PyObject *pair = PyTuple_GET_ITEM(hooks.timeline_defaults, i);
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "setup: timeline_defaults holds (factory, value) pairs");
            return NULL;
        }
    }
    if (PyTuple_GET_SIZE(hooks.chat_output_keys) > PK_MAX_OUTPUT_KEYS) {
        PyErr_SetString(PyExc_ValueError, "setup: too many chat_output_keys");
        return NULL;
    }
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hooks.chat_output_keys); i++) {
        if (!PyUnicode_Check(PyTuple_GET_ITEM(hooks.chat_output_keys, i))) {
            PyErr_SetString(PyExc_TypeError, "setup: chat_output_keys must be str");
            return NULL;
        }
    }
    Py_ssize_t step_values = PyLong_AsSsize_t(hooks.step_values);
    if (step_values < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "setup: step_values must be >= 0");
        }
        return NULL;
    }
    pk_step_values = step_values;
    long long idle = PyLong_AsLongLong(hooks.loop_idle_ns);
    if (idle < 0) {
        if (!PyErr_Occurred()) {
            PyErr_SetString(PyExc_ValueError, "setup: loop_idle_ns must be >= 0");
        }
        return NULL;
    }
    pk_loop_idle_ns = idle;
#define KEEP(hook) Py_INCREF(hooks.hook);
    PK_HOOKS(KEEP)
#undef KEEP
    pk_hooks = hooks;
    Py_RETURN_NONE;
}

static PyObject *
set_clock(PyObject *module, PyObject *clock)
{
    /* Returns the previous clock (None: the real one). */
    if (clock != Py_None && !PyCallable_Check(clock)) {
        PyErr_SetString(PyExc_TypeError, "set_clock: a callable returning int nanoseconds, or None");
        return NULL;
    }
    PyObject *previous = pk_hooks.clock != NULL ? pk_hooks.clock : Py_NewRef(Py_None);
    pk_hooks.clock = clock == Py_None ? NULL : Py_NewRef(clock);
    return previous;
}

static PyObject *
now_ns(PyObject *module, PyObject *unused)
{
    int64_t now;
    if (pk_now(&now) < 0) {
        return NULL;
    }
    return PyLong_FromLongLong(now);
}

static PyObject *
format_ms(PyObject *module, PyObject *arg)
{
    long long ns = PyLong_AsLongLong(arg);
    if (ns == -1 && PyErr_Occurred()) {
        return NULL;
    }
    char text[24];
    int len = pk_format_ms(text, ns);
    return PyUnicode_FromStringAndSize(text, len);
}

static PyObject *
json_has_token(PyObject *module, PyObject *arg)
{
    char *data;
    Py_ssize_t len;
    if (PyBytes_AsStringAndSize(arg, &data, &len) < 0) {
        return NULL;
    }
    int found = pk_json_has_token(data, len);
    if (found < 0) {
        Py_RETURN_NONE;
    }
    return PyBool_FromLong(found);
}

static PyObject *
encode_record(PyObject *module, PyObject *timeline)
{
    PkTimelineObject *fields = pk_timeline(timeline);
    if (fields == NULL) {
        return NULL;
    }
    char out[1 << 16];
    Py_ssize_t len;
    int result = pk_encode_timeline(fields, out, sizeof(out), &len);
    if (result < 0) {
        return NULL;
    }
    return result == 0 ? PyBytes_FromStringAndSize(out, len) : Py_NewRef(Py_None);
}

/* instances(cls, fields, rows) -> tuple: one cls per row, each field set to
 * the row's value as object.__setattr__ would (past a frozen dataclass's
 * __setattr__), __init__ not called. The export agent decodes ~22
 * StageRecords a request, and the dataclass's __init__ (a Python frame and
 * a setattr call per field) was most of that. Attributes set one by one
 * keep the instance's shared-key layout, which a __dict__ assigned whole
 * loses (every later attribute read was slower). */
int
pk_int64_attribute(PyObject *object, PyObject *name, int64_t *out)
{
    PyObject *value = PyObject_GetAttr(object, name);
    if (value == NULL) {
        return -1;
    }
    int result = pk_as_int64(value, out);
    Py_DECREF(value);
    return result;
}

PyObject *
pk_new_instance(PyTypeObject *cls, PyObject *empty, PyObject *fields, PyObject *const *values)
{
    /* tp_new (object.__new__), not tp_alloc: it lays out the instance's values as a call of the class would */
    PyObject *instance = cls->tp_new(cls, empty, NULL);
    if (instance == NULL) {
        return NULL;
    }
    for (Py_ssize_t f = 0; f < PyTuple_GET_SIZE(fields); f++) {
        if (PyObject_GenericSetAttr(instance, PyTuple_GET_ITEM(fields, f), values[f]) < 0) {
            Py_DECREF(instance);
            return NULL;
        }
    }
    return instance;
}

static PyMethodDef methods[] = {
    {"setup", (PyCFunction)(void (*)(void))setup, METH_VARARGS | METH_KEYWORDS,
     "setup(*, timeline_var, open_stage_var, ...): hand over the Python side (once, from _backend.py)."},
    {"set_clock", set_clock, METH_O, "set_clock(clock | None) -> previous: a fake clock for tests."},
    {"now_ns", now_ns, METH_NOARGS, "now_ns() -> int: the clock the C side reads."},
    {"open_stage", pk_open_stage_function, METH_NOARGS,
     "open_stage() -> Stage | None: the stage open in the running task (its StepClock's), else OPEN_STAGE's."},
    {"run_under_stage", (PyCFunction)(void (*)(void))pk_run_under_stage, METH_FASTCALL | METH_KEYWORDS,
     "run_under_stage(stage, function, *args, **kwargs): function's call with that C stage open in it (a thread's)."},
    {"set_outside_collection", (PyCFunction)(void (*)(void))pk_set_outside_collection_function, METH_FASTCALL,
     "set_outside_collection(var, value) -> Token: var.set(value) with the collector off (_collector.py)."},
    {"reset_outside_collection", (PyCFunction)(void (*)(void))pk_reset_outside_collection_function, METH_FASTCALL,
     "reset_outside_collection(var, token): var.reset(token) with the collector off (_collector.py)."},
    {"reset_unless_collected", (PyCFunction)(void (*)(void))pk_reset_unless_collected_function, METH_FASTCALL,
     "reset_unless_collected(var, token): the reset, unless the collector is closing the caller as garbage (_collector.py)."},
    {"summed_call", (PyCFunction)(void (*)(void))pk_summed_call_function, METH_FASTCALL,
     "summed_call(name, awaitable, flag) -> StagedCall: awaitable as one call of the sum stage name, flag (a ContextVar) "
     "True from its first step to its last (_stage.summed_call)."},
    {"format_ms", format_ms, METH_O, "format_ms(ns) -> str: as _headers.format_ms."},
    {"encode_record", encode_record, METH_O, "encode_record(timeline) -> bytes | None: the hand-off's record (None: declined)."},
    {"json_has_token", json_has_token, METH_O, "json_has_token(data) -> bool | None: the C reader's answer (None: undecided)."},
    {"split_windows", (PyCFunction)(void (*)(void))pk_split_windows, METH_FASTCALL,
     "split_windows(steps, windows[, calls[, cls]]) -> [cls(cpu, queue, io, uncertain)]: _export/_split.py's split of each (start, end) "
     "window, with the CPU of the thread calls (start, end, cpu; flat) inside it moved from I/O wait to CPU."},
    {"time_split", (PyCFunction)(void (*)(void))pk_time_split, METH_FASTCALL,
     "time_split(stages, steps, start_ns, end_ns, after_last_byte_ns, outside, protocol, split_cls, time_split_cls) -> "
     "time_split_cls: _export/_split.py's time_split of a record's fields."},
    {"stage_records", (PyCFunction)(void (*)(void))pk_stage_records, METH_FASTCALL,
     "stage_records(finished, generators, cls, fields) -> tuple: _core/_timeline.py's stage_records, each a cls, __init__ not called."},
    {"stage_spans", (PyCFunction)(void (*)(void))pk_stage_spans, METH_FASTCALL,
     "stage_spans(stages, durations, own, splits, ids, trace_id, server_id, anchor_ns, end_ns, keys) -> [span]: "
     "_export/_spans.py's span of each stage."},
    {"stage_spans_protobuf", (PyCFunction)(void (*)(void))pk_stage_spans_protobuf, METH_FASTCALL,
     "stage_spans_protobuf(stages, durations, own, splits, ids, trace_id, server_id, anchor_ns, end_ns, keys) -> bytes | None: "
     "encode_spans(stage_spans(...)) with no span built (None: declined)."},
    {"observe_stages", (PyCFunction)(void (*)(void))pk_observe_stages, METH_FASTCALL,
     "observe_stages(histograms, stages, durations, weight, make): each stage's duration, by position, into "
     "histograms[stage.name] (a Histogram; make(name) makes and adds a missing one), standing for weight requests."},
    {"share_free_list", pk_share_free_list, METH_O,
     "share_free_list(cls) -> bool: cls, a Python subclass of a C type with a free list that adds nothing to its "
     "layout, allocates from that free list."},
    {"scan_headers", pk_scan_headers, METH_O,
     "scan_headers(headers) -> int: _sampling.scan_headers's answer (HeadersFound bits)."},
    {"encode_spans", pk_encode_spans, METH_O,
     "encode_spans(spans) -> bytes | None: _export/_otlp.py's protobuf of each span (bytes: spans already encoded), "
     "concatenated (None: declined)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "_speedups", "C versions of perfkit's request path (see _backend.py).", -1, methods,
};

static int
intern_names(void)
{
    struct {
        PyObject **slot;
        const char *text;
    } table[] = {
        {&pk_names.status, "status"}, {&pk_names.total_ns, "total_ns"}, {&pk_names.sink, "sink"},
        {&pk_names.type, "type"}, {&pk_names.body, "body"},
        {&pk_names.more_body, "more_body"}, {&pk_names.headers, "headers"},
        {&pk_names.server_timing, "server_timing"}, {&pk_names.overhead_header, "overhead_header"},
        {&pk_names.upstream_stages, "upstream_stages"}, {&pk_names.upstream_names, "_upstream_names"},
        {&pk_names.headers_sent, "headers_sent"},
        {&pk_names.first_body_byte, "first_body_byte"}, {&pk_names.first_token, "first_token"},
        {&pk_names.last_byte, "last_byte"}, {&pk_names.client_disconnected, "client_disconnected"},
        {&pk_names.incomplete_response, "incomplete_response"}, {&pk_names.gc, "gc"},
        {&pk_names.mark, "mark"}, {&pk_names.call_soon, "call_soon"}, {&pk_names.throw_, "throw"},
        {&pk_names.close, "close"}, {&pk_names.steps_dropped, "steps_dropped"},
        {&pk_names.loop, "loop"}, {&pk_names.context, "context"},
        {&pk_names.name, "name"}, {&pk_names.kind, "kind"}, {&pk_names.parent, "parent"},
        {&pk_names.start_ns, "start_ns"}, {&pk_names.end_ns, "end_ns"}, {&pk_names.items, "items"},
        {&pk_names.intervals, "intervals"}, {&pk_names.self_ns, "self_ns"},
        {&pk_names.block, "block"}, {&pk_names.empty, ""}, {&pk_names.value, "value"},
#define FORWARDED_NAME(name) {&pk_names.forwarded_##name, #name},
        PK_FORWARDED(FORWARDED_NAME)
#undef FORWARDED_NAME
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        *table[i].slot = PyUnicode_InternFromString(table[i].text);
        if (*table[i].slot == NULL) {
            return -1;
        }
    }
    pk_names.context_kwnames = PyTuple_Pack(1, pk_names.context);
    if (pk_names.context_kwnames == NULL) {
        return -1;
    }
    pk_names.server_timing_header = PyBytes_FromStringAndSize(PK_HEADER_SERVER_TIMING, PK_HEADER_SERVER_TIMING_LEN);
    pk_names.overhead_header_name = PyBytes_FromStringAndSize(PK_HEADER_OVERHEAD, PK_HEADER_OVERHEAD_LEN);
    if (!pk_names.server_timing_header || !pk_names.overhead_header_name) {
        return -1;
    }
    return 0;
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if (intern_names() < 0 || PyType_Ready(&PkTimeline_Type) < 0 || PyType_Ready(&PkStage_Type) < 0 ||
        PyType_Ready(&PkInt64List_Type) < 0 || PyType_Ready(&PkStageList_Type) < 0 ||
        PyType_Ready(&PkExchange_Type) < 0 || PyType_Ready(&PkHistogram_Type) < 0 ||
        PyType_Ready(&PkHandoff_Type) < 0 || pk_steps_ready() < 0 || pk_tasks_ready() < 0 ||
        pk_traffic_ready() < 0 || pk_staged_ready() < 0 || pk_own_time_ready() < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&module_def);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "Timeline", (PyObject *)&PkTimeline_Type) < 0 ||
        PyModule_AddObjectRef(module, "Stage", (PyObject *)&PkStage_Type) < 0 ||
        PyModule_AddObjectRef(module, "Int64List", (PyObject *)&PkInt64List_Type) < 0 ||
        PyModule_AddObjectRef(module, "StageList", (PyObject *)&PkStageList_Type) < 0 ||
        PyModule_AddObjectRef(module, "Exchange", (PyObject *)&PkExchange_Type) < 0 ||
        PyModule_AddObjectRef(module, "Handoff", (PyObject *)&PkHandoff_Type) < 0 ||
        PyModule_AddObjectRef(module, "Batches", (PyObject *)&PkBatches_Type) < 0 ||
        PyModule_AddObjectRef(module, "StepClock", (PyObject *)&PkStepClock_Type) < 0 ||
        PyModule_AddObjectRef(module, "TaskFactory", (PyObject *)&PkTaskFactory_Type) < 0 ||
        PyModule_AddObjectRef(module, "Tally", (PyObject *)&PkTally_Type) < 0 ||
        PyModule_AddObjectRef(module, "Passage", (PyObject *)&PkPassage_Type) < 0 ||
        PyModule_AddObjectRef(module, "StagedFunction", (PyObject *)&PkStagedFunction_Type) < 0 ||
        PyModule_AddObjectRef(module, "StagedCall", (PyObject *)&PkStagedCall_Type) < 0 ||
        PyModule_AddObjectRef(module, "OwnTime", (PyObject *)&PkOwnTime_Type) < 0 ||
        PyModule_AddObjectRef(module, "Histogram", (PyObject *)&PkHistogram_Type) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
