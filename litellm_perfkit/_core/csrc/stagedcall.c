/* StagedCall: one async call of a StagedFunction (staged.c) in a request. One object that is the call's
 * stage and drives the function's coroutine: it enters the stage at the call's first step and leaves it
 * at its last, as the reference's wrapper coroutine did (_stage.Stage.__call__). A served proxy's
 * collections promote one tracked object per open stage, not two (docs/overhead.md#allocations). A sum
 * stage's call is timed from its first step to its last and added to the stage's calls, and is never
 * the open stage. */
#include "speedups.h"

typedef struct {
    PkStageObject stage; /* a sum stage's call keeps its timeline in stage.timeline, and its start */
    PyObject *inner;     /* the function's awaitable: its attributes are the call's (cr_frame, __qualname__) */
    PyObject *iterator;  /* the awaitable's iterator from the first step to the last */
    PyObject *flag;      /* a sum stage's call: a ContextVar True from its first step to its last, or NULL */
    PyObject *flag_token; /* the flag's set, reset at the last step */
    char sum;            /* a call of a sum stage: timed, added to the stage's calls, never the open stage */
    char started, done;
    char running; /* inside a step: driving it again is refused, as a running coroutine refuses it */
} StagedCallObject;

/* The first step: a block stage entered; a sum stage's call timed from here, in the request (if any)
 * whose timeline it keeps until the last. */
static void
call_begin(StagedCallObject *self)
{
    if (!self->sum) {
        pk_stage_enter(&self->stage);
        return;
    }
    PyObject *timeline = NULL;
    int64_t start;
    if (PyContextVar_Get(pk_hooks.timeline_var, NULL, &timeline) < 0 || timeline == NULL || timeline == Py_None ||
        pk_timeline(timeline) == NULL || pk_now(&start) < 0) {
        if (PyErr_Occurred()) {
            pk_report("stage.sum"); /* the call goes unrecorded */
        }
        Py_XDECREF(timeline);
        return;
    }
    self->stage.start = start;
    self->stage.timeline = timeline;
    if (self->flag != NULL) {
        self->flag_token = pk_set_outside_collection(self->flag, Py_True);
        if (self->flag_token == NULL) {
            pk_report("stage.flag"); /* the call is timed all the same */
        }
    }
}

/* The flag set at the first step reset, unless the collector is closing the call as garbage (exc_type
 * GeneratorExit while it runs): a reset there can crash CPython < 3.12 (_collector.py). */
static void
call_unflag(StagedCallObject *self, PyObject *exc_type)
{
    PyObject *token = self->flag_token;
    if (token == NULL) {
        return;
    }
    self->flag_token = NULL;
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    int collected = pk_closed_by_collector(exc_type);
    if (collected < 0 || (collected == 0 && pk_reset_outside_collection(self->flag, token) < 0)) {
        pk_report("stage.flag");
    }
    Py_DECREF(token);
    PyErr_Restore(type, value, traceback);
}

/* The stage ends (a sum stage's call is added) with the exception being raised, of type exc_type. */
static void
call_end(StagedCallObject *self, PyObject *exc_type)
{
    if (!self->sum) {
        pk_stage_exit(&self->stage, exc_type);
        return;
    }
    PyObject *timeline = self->stage.timeline;
    if (timeline != NULL) {
        self->stage.timeline = NULL;
        pk_add_sum_call(timeline, self->stage.name, self->stage.start);
        Py_DECREF(timeline);
    }
    call_unflag(self, exc_type);
}

/* The last step: the stage ends with the exception being raised, if any. */
static void
call_done(StagedCallObject *self, PySendResult status)
{
    self->done = 1;
    Py_CLEAR(self->iterator);
    call_end(self, status == PYGEN_ERROR ? PyErr_Occurred() : NULL);
}

/* One step: send value (or throw exc) into the function's awaitable, the stage entered at the first. */
static PySendResult
call_step(StagedCallObject *self, PyObject *value, PyObject *exc, PyObject **result)
{
    *result = NULL;
    if (pk_refuse_reentry(self->running)) {
        return PYGEN_ERROR;
    }
    if (self->done) {
        if (exc != NULL) {
            PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
        }
        else {
            PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited coroutine");
        }
        return PYGEN_ERROR;
    }
    if (!self->started) {
        self->started = 1;
        if (exc != NULL) { /* thrown in before its first step, as into a coroutine that never ran: no stage */
            self->done = 1;
            if (pk_close_awaitable(self->inner) == 0) {
                PyErr_SetObject((PyObject *)Py_TYPE(exc), exc);
            }
            return PYGEN_ERROR;
        }
        call_begin(self);
        self->iterator = pk_awaitable_iterator(self->inner, "StagedCall");
        if (self->iterator == NULL) {
            call_done(self, PYGEN_ERROR);
            return PYGEN_ERROR;
        }
    }
    PyObject *iterator = Py_NewRef(self->iterator);
    self->running = 1;
    PySendResult status = exc == NULL ? PyIter_Send(iterator, value, result) : pk_throw_into(iterator, exc, result);
    self->running = 0;
    Py_DECREF(iterator);
    if (status != PYGEN_NEXT) {
        call_done(self, status);
    }
    return status;
}

/* close(): the function's awaitable closed; a started call's stage ends as it ends (GeneratorExit, or
 * what closing raised), which the stage reads as a collection's when one is running (_collector.py). */
static int
call_close(StagedCallObject *self)
{
    if (self->done) {
        return 0;
    }
    if (pk_refuse_reentry(self->running)) {
        return -1;
    }
    int started = self->started;
    self->started = self->done = 1;
    PyObject *closing = self->iterator != NULL ? self->iterator : self->inner;
    Py_INCREF(closing);
    Py_CLEAR(self->iterator);
    int closed = pk_close_awaitable(closing);
    Py_DECREF(closing);
    if (started) {
        call_end(self, closed == 0 ? PyExc_GeneratorExit : PyErr_Occurred());
    }
    return closed;
}

static int
call_closes_first(StagedCallObject *self, PyObject *exc)
{
    return self->started && !self->done && PyErr_GivenExceptionMatches(exc, PyExc_GeneratorExit);
}

/* A call dropped while it runs is closed, as a coroutine is when it is freed. */
static void
call_finalize(StagedCallObject *self)
{
    if (!self->started || self->done) {
        return;
    }
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    if (call_close(self) < 0) {
        PyErr_WriteUnraisable((PyObject *)self);
    }
    PyErr_Restore(type, value, traceback);
}

static int
call_traverse(StagedCallObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->inner);
    Py_VISIT(self->iterator);
    Py_VISIT(self->flag);
    Py_VISIT(self->flag_token);
    return PkStage_Type.tp_traverse((PyObject *)self, visit, arg);
}

static int
call_clear(StagedCallObject *self)
{
    Py_CLEAR(self->inner);
    Py_CLEAR(self->iterator);
    Py_CLEAR(self->flag);
    Py_CLEAR(self->flag_token);
    return PkStage_Type.tp_clear((PyObject *)self);
}

PK_FREE_LIST_ALLOC(call_alloc, free_calls, &PkStagedCall_Type)

static void
call_dealloc(StagedCallObject *self)
{
    if (self->started && !self->done && PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0) {
        return; /* resurrected */
    }
    PyObject_GC_UnTrack(self);
    call_clear(self);
    pk_free_list_free(&free_calls, &PkStagedCall_Type, (PyObject *)self);
}

/* The function's awaitable's attribute ``closure`` names (cr_frame, __qualname__...). */
static PyObject *
call_forward(StagedCallObject *self, void *closure)
{
    return pk_forward(self->inner, closure);
}

#define FORWARD(name) {#name, (getter)call_forward, NULL, NULL, &pk_names.forwarded_##name},
static PyGetSetDef call_getset[] = {PK_FORWARDED(FORWARD){NULL}};
#undef FORWARD

PyTypeObject PkStagedCall_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.StagedCall",
    .tp_basicsize = sizeof(StagedCallObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "One async call of a StagedFunction in a request: its stage, driving the function's coroutine.",
    .tp_base = &PkStage_Type,
    .tp_alloc = call_alloc,
    .tp_dealloc = (destructor)call_dealloc,
    .tp_finalize = (destructor)call_finalize,
    .tp_traverse = (traverseproc)call_traverse,
    .tp_clear = (inquiry)call_clear,
    .tp_as_async = &pk_coroutine_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = pk_coroutine_iternext,
    .tp_methods = pk_coroutine_methods,
    .tp_getset = call_getset,
};

PyObject *
pk_staged_call(PyObject *name, PyObject *awaitable, int sum)
{
    StagedCallObject *call = (StagedCallObject *)pk_new_stage(&PkStagedCall_Type, name);
    if (call != NULL) {
        call->inner = Py_NewRef(awaitable);
        call->sum = (char)sum;
    }
    return (PyObject *)call;
}

PyObject *
pk_summed_call_function(PyObject *Py_UNUSED(module), PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyUnicode_Check(args[0]) || !PyContextVar_CheckExact(args[2])) {
        PyErr_SetString(PyExc_TypeError, "summed_call(name: str, awaitable, flag: ContextVar)");
        return NULL;
    }
    StagedCallObject *call = (StagedCallObject *)pk_staged_call(args[0], args[1], 1);
    if (call != NULL) {
        call->flag = Py_NewRef(args[2]);
    }
    return (PyObject *)call;
}

int
pk_staged_call_ready(void)
{
    static const PkCoroutineOps ops = {
        .type = &PkStagedCall_Type,
        .step = (PySendResult(*)(PyObject *, PyObject *, PyObject *, PyObject **))call_step,
        .close = (int (*)(PyObject *))call_close,
        .closes_first = (int (*)(PyObject *, PyObject *))call_closes_first,
    };
    return pk_coroutine_ready(&ops);
}
