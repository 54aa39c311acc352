/* Step accounting: StepClock drives one awaitable step by step, the C
 * counterpart of _steps.StepClock, which is the specification and the
 * fallback; its loop's batch clock is a Batches (batches.c).
 *
 * StepClock is an iterator with am_send, so the awaiting frame's SEND and
 * the Task's step reach it without a method lookup, and a step costs two
 * clock reads and five appends (four reads with Batches.thread_cpu). It is also a task's coroutine (the task
 * factory's, tasks.c): registered as a collections.abc.Coroutine
 * (_backend.py), it answers the cr_* attributes, __name__ and __qualname__
 * with its coroutine's, so code that inspects a task's coroutine (anyio's
 * getcoroutinestate, a task's repr) sees the one it drives. */
#include "steps.h"

#include <structmember.h>
#include <time.h>

Py_ssize_t pk_step_values;


static PyObject *one;


typedef struct {
    PyObject_HEAD
    PyObject *awaitable;     /* until the first step */
    PyObject *inner;         /* the awaitable, kept for the attributes it answers for */
    PyObject *iterator;      /* its iterator, from the first step until it finishes */
    PyObject *steps;         /* the timeline's steps: an Int64List (the C timeline's) or a list */
    BatchesObject *batches;
    int64_t previous;        /* when the last step ended, or the first became ready */
    int64_t created;         /* when the first step became ready, if known; 0 after it */
    PyObject *held;          /* a task's: the request it holds (_after.hold) until it finishes, then releases */
    PyObject *open_stage;    /* the stage open in the task it drives (pk_open_stage), None for none */
    char running;            /* inside a step: driving it again is refused, as a running coroutine refuses it */
} StepClockObject;

/* Where the code this thread runs keeps its open stage: the running StepClock's field during its step,
 * a thread call's (pk_run_under_stage), or NULL: OPEN_STAGE then. */
static _Thread_local PyObject **open_slot;

/* Inside a clocked step the open stage is the clock's: entering and leaving a stage swaps one pointer.
 * A ContextVar set allocates a HAMT node and a token, twice per stage, which a served proxy's collections
 * promote (docs/overhead.md#allocations). A clock starts with the stage open where it was made, as a
 * task's context copy would hold it; code outside every clock keeps OPEN_STAGE. */
PyObject *
pk_open_stage(void)
{
    if (open_slot != NULL) {
        return Py_NewRef(*open_slot != NULL ? *open_slot : Py_None);
    }
    PyObject *value = NULL;
    return PyContextVar_Get(pk_hooks.open_stage_var, Py_None, &value) < 0 ? NULL : value;
}

/* The open stage set: the running clock's, else OPEN_STAGE with the collector off (collector.c). The
 * token is dropped at once: exit sets the enclosing stage back, which is what a reset would restore. */
int
pk_set_open_stage(PyObject *stage)
{
    if (open_slot != NULL) {
        Py_XSETREF(*open_slot, Py_NewRef(stage));
        return 0;
    }
    PyObject *token = pk_set_outside_collection(pk_hooks.open_stage_var, stage);
    Py_XDECREF(token);
    return token == NULL ? -1 : 0;
}

/* run_under_stage(stage, function, *args, **kwargs): a thread's call of work a request handed over
 * (_threads.in_thread), with that C stage open in it. The thread's context may be a copy made inside a
 * clocked step, whose OPEN_STAGE is not the stage. */
PyObject *
pk_run_under_stage(PyObject *Py_UNUSED(module), PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (nargs < 2) {
        PyErr_SetString(PyExc_TypeError, "run_under_stage(stage, function, *args, **kwargs)");
        return NULL;
    }
    if (!PyObject_TypeCheck(args[0], &PkStage_Type)) { /* none, or a Python stage: its context holds it */
        return PyObject_Vectorcall(args[1], args + 2, nargs - 2, kwnames);
    }
    PyObject *stage = Py_NewRef(args[0]);
    PyObject **outer = open_slot;
    open_slot = &stage;
    PyObject *result = PyObject_Vectorcall(args[1], args + 2, nargs - 2, kwnames);
    open_slot = outer;
    Py_XDECREF(stage);
    return result;
}

PyObject *
pk_open_stage_function(PyObject *Py_UNUSED(module), PyObject *Py_UNUSED(ignored))
{
    return pk_open_stage();
}

/* The fields of a StepClock about to drive ``awaitable``: 0, or -1 with an exception set. */
static int
clock_set(StepClockObject *self, PyObject *awaitable, PyObject *steps, PyObject *batches, int64_t ready,
          PyObject *held)
{
    if (!PyList_Check(steps) && !Py_IS_TYPE(steps, &PkInt64List_Type)) {
        PyErr_Format(PyExc_TypeError, "StepClock: steps must be a list or an Int64List, not %.100s",
                     Py_TYPE(steps)->tp_name);
        return -1;
    }
    if (!Py_IS_TYPE(batches, &PkBatches_Type)) {
        PyErr_Format(PyExc_TypeError, "StepClock: batches must be a Batches, not %.100s", Py_TYPE(batches)->tp_name);
        return -1;
    }
    PyObject *open_stage = pk_open_stage();
    if (open_stage == NULL) { /* before the hold is taken over: a caller that fails releases it */
        return -1;
    }
    Py_XSETREF(self->open_stage, open_stage);
    Py_XSETREF(self->held, held == Py_None ? NULL : Py_NewRef(held));
    Py_XSETREF(self->awaitable, Py_NewRef(awaitable));
    Py_XSETREF(self->inner, Py_NewRef(awaitable));
    Py_CLEAR(self->iterator);
    Py_XSETREF(self->steps, Py_NewRef(steps));
    Py_XSETREF(self->batches, (BatchesObject *)Py_NewRef(batches));
    self->previous = self->created = ready;
    return 0;
}

static int
clock_init(StepClockObject *self, PyObject *args, PyObject *kwargs)
{
    static char *keywords[] = {"awaitable", "steps", "batches", "ready_ns", "held", NULL};
    PyObject *awaitable, *steps, *batches, *held = Py_None;
    long long ready = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OOO|LO:StepClock", keywords, &awaitable, &steps, &batches,
                                     &ready, &held)) {
        return -1;
    }
    return clock_set(self, awaitable, steps, batches, ready, held);
}

/* StepClock(awaitable, steps, batches, ready, held) for the task factory, which makes one per task a
 * request starts: no arguments packed and parsed, no int boxed for the clock's reading. */
PyObject *
pk_new_step_clock(PyObject *awaitable, PyObject *steps, PyObject *batches, int64_t ready, PyObject *held)
{
    PyObject *self = PkStepClock_Type.tp_alloc(&PkStepClock_Type, 0);
    if (self != NULL && clock_set((StepClockObject *)self, awaitable, steps, batches, ready, held) < 0) {
        Py_CLEAR(self);
    }
    return self;
}

/* The calling thread's CPU clock (time.thread_time_ns()), or -1 where it cannot be read (the step stays wall-timed). */
static int64_t
thread_cpu_now(void)
{
#ifdef CLOCK_THREAD_CPUTIME_ID
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) == 0) {
        return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
    }
#endif
    return -1;
}


/* Append a finished step, keeping the exception the step raised, if any.
 * cpu_start: the thread's CPU clock as the step began (-1: not read). */
static void
record_step(StepClockObject *self, int64_t early, int64_t late, int64_t start, int64_t cpu_start)
{
    PyObject *type, *value, *traceback;
    PyErr_Fetch(&type, &value, &traceback);
    int64_t end, cpu_end = cpu_start < 0 ? -1 : thread_cpu_now();
    int ended = pk_now(&end) == 0;
    if (cpu_start >= 0) {
        BatchesObject *batches = self->batches;
        if (--batches->running <= 0) {
            batches->running = 0;
            batches->end_ns = ended ? end : 0;
            batches->cpu_end_ns = ended ? cpu_end : -1; /* -1: the next gap is charged to no one */
        }
    }
    if (!ended) {
        pk_report("steps.record");
        goto done;
    }
    self->previous = end;
    int raw = Py_IS_TYPE(self->steps, &PkInt64List_Type);
    Py_ssize_t held;
    if (raw) {
        pk_int64list_values(self->steps, &held);
    }
    else {
        held = PyList_GET_SIZE(self->steps);
    }
    if (held < pk_step_values) {
        int64_t values[5] = {early, late, start, end, cpu_end < 0 ? -1 : cpu_end - cpu_start};
        if (raw) {
            if (pk_int64list_append(self->steps, values, 5) < 0) {
                pk_report("steps.record");
            }
            goto done;
        }
        /* -1 (CPU not read: the step's wall time) is a small int: no object per step */
        for (int i = 0; i < 5; i++) {
            PyObject *number = PyLong_FromLongLong(values[i]);
            if (number == NULL || PyList_Append(self->steps, number) < 0) {
                Py_XDECREF(number);
                pk_report("steps.record");
                goto done;
            }
            Py_DECREF(number);
        }
    }
    else {
        PyObject *timeline = NULL;
        if (PyContextVar_Get(pk_hooks.timeline_var, NULL, &timeline) == 0 && timeline != NULL && timeline != Py_None) {
            PyObject *dropped = PyObject_GetAttr(timeline, pk_names.steps_dropped);
            PyObject *more = dropped == NULL ? NULL : PyNumber_Add(dropped, one);
            if (more == NULL || PyObject_SetAttr(timeline, pk_names.steps_dropped, more) < 0) {
                pk_report("steps.record");
            }
            Py_XDECREF(dropped);
            Py_XDECREF(more);
        }
        else if (PyErr_Occurred()) {
            pk_report("steps.record");
        }
        Py_XDECREF(timeline);
    }
done:
    PyErr_Restore(type, value, traceback);
}

/* The task's coroutine has finished (returned, raised, or closed): its request's hold ends here, once, after
 * its last step is recorded. No done callback per task, and nothing queued on the loop. */
void
pk_clock_release(PyObject *clock)
{
    StepClockObject *self = (StepClockObject *)clock;
    PyObject *held = self->held;
    if (held != NULL) {
        self->held = NULL;
        pk_release(held);
        Py_DECREF(held);
    }
}

/* One step: send value (or throw exc) into the awaitable, clocked. */
static PySendResult
clock_step(StepClockObject *self, PyObject *value, PyObject *exc, PyObject **result)
{
    *result = NULL;
    if (pk_refuse_reentry(self->running)) {
        return PYGEN_ERROR;
    }
    if (self->iterator == NULL) {
        if (self->awaitable == NULL) {
            PyErr_SetString(PyExc_RuntimeError, "cannot reuse already awaited StepClock");
            return PYGEN_ERROR;
        }
        /* __await__ runs Python: driving the clock from there is refused too. */
        PyObject *awaitable = Py_NewRef(self->awaitable);
        PyObject **outer = open_slot;
        open_slot = &self->open_stage;
        self->running = 1;
        PyObject *iterator = pk_awaitable_iterator(awaitable, "StepClock");
        self->running = 0;
        open_slot = outer;
        Py_DECREF(awaitable);
        Py_CLEAR(self->awaitable);
        Py_XSETREF(self->iterator, iterator);
        if (iterator == NULL) { /* it can never run: finished */
            pk_clock_release((PyObject *)self);
            return PYGEN_ERROR;
        }
    }
    int64_t start, early = 0, late = 0, cpu_start = -1;
    int clocked = pk_now(&start) == 0;
    if (!clocked) {
        pk_report("steps.clock"); /* this step goes unrecorded */
    }
    else {
        BatchesObject *batches = self->batches;
        int64_t previous = self->previous;
        if (batches->armed) {
            batches->steps++;
            late = previous > batches->start_ns ? previous : batches->start_ns;
            early = previous > batches->previous_ns ? previous : batches->previous_ns;
        }
        else {
            if (pk_batches_arm(batches, start) < 0) {
                pk_report("steps.arm");
            }
            early = late = start;
        }
        if (self->created) {
            early = late = self->created;
            self->created = 0;
        }
        if (batches->thread_cpu) {
            cpu_start = thread_cpu_now();
            if (cpu_start >= 0) {
                if (!batches->running) {
                    pk_batches_charge_gap(batches, start, cpu_start);
                }
                batches->running++;
            }
        }
    }
    /* The iterator is held for the step: nothing it runs can free it under itself. */
    PyObject *iterator = Py_NewRef(self->iterator);
    PyObject **outer = open_slot; /* an eager task's first step runs inside its maker's */
    open_slot = &self->open_stage;
    self->running = 1;
    PySendResult status = exc == NULL ? PyIter_Send(iterator, value, result) : pk_throw_into(iterator, exc, result);
    self->running = 0;
    open_slot = outer;
    Py_DECREF(iterator);
    if (clocked) {
        record_step(self, early, late, start, cpu_start);
    }
    if (status != PYGEN_NEXT) {
        Py_CLEAR(self->iterator);
        Py_CLEAR(self->open_stage); /* a done task kept by its app holds no stage, nor its request */
        pk_clock_release((PyObject *)self);
    }
    return status;
}

/* Close the iterator (or the awaitable never started), as a generator closes what it delegates to. */
static int
close_inner(StepClockObject *self)
{
    if (pk_refuse_reentry(self->running)) {
        return -1;
    }
    PyObject *inner = self->iterator != NULL ? self->iterator : self->awaitable;
    if (inner == NULL) {
        return 0;
    }
    Py_INCREF(inner);
    Py_CLEAR(self->iterator);
    Py_CLEAR(self->awaitable);
    PyObject **outer = open_slot; /* the stages it leaves are its task's */
    open_slot = &self->open_stage;
    int closed = pk_close_awaitable(inner);
    open_slot = outer;
    Py_DECREF(inner);
    return closed;
}

/* close(): what it drives closed, and its request's hold ended (not while a step runs: refused, it goes on). */
static int
clock_close(StepClockObject *self)
{
    int running = self->running;
    int closed = close_inner(self);
    if (!running) {
        pk_clock_release((PyObject *)self);
    }
    return closed;
}

/* Not started (a generator raises at once) or closing: what it drives is closed, then the exception raised. */
static int
clock_closes_first(StepClockObject *self, PyObject *exc)
{
    return self->iterator == NULL || PyErr_GivenExceptionMatches(exc, PyExc_GeneratorExit);
}

static int
clock_traverse(StepClockObject *self, visitproc visit, void *arg)
{
    Py_VISIT(self->awaitable);
    Py_VISIT(self->inner);
    Py_VISIT(self->iterator);
    Py_VISIT(self->steps);
    Py_VISIT(self->batches);
    Py_VISIT(self->held);
    Py_VISIT(self->open_stage);
    return 0;
}

/* A clock freed while it still holds a request was never run to its end by its task: a host's task
 * factory that wraps it in a coroutine of its own, cancelled before its first step, never reaches it.
 * The hold ends here; during a collection, only the count (_after.tasks_ended touches nothing then, and
 * the deadline sweep hands the request off). */
static void
clock_finalize(StepClockObject *self)
{
    pk_clock_release((PyObject *)self);
}

static int
clock_clear(StepClockObject *self)
{
    Py_CLEAR(self->awaitable);
    Py_CLEAR(self->inner);
    Py_CLEAR(self->iterator);
    Py_CLEAR(self->steps);
    Py_CLEAR(self->batches);
    Py_CLEAR(self->held);
    Py_CLEAR(self->open_stage);
    return 0;
}

/* The driven awaitable's attribute ``closure`` names (cr_frame, __qualname__...). */
static PyObject *
clock_forward(StepClockObject *self, void *closure)
{
    return pk_forward(self->inner, closure);
}

PK_FREE_LIST_ALLOC(clock_alloc, free_clocks, &PkStepClock_Type) /* a request's tasks' clocks, for the next's */

static void
clock_dealloc(StepClockObject *self)
{
    if (self->held != NULL && PyObject_CallFinalizerFromDealloc((PyObject *)self) < 0) {
        return; /* resurrected */
    }
    PyObject_GC_UnTrack(self);
    clock_clear(self);
    pk_free_list_free(&free_clocks, &PkStepClock_Type, (PyObject *)self);
}

#define FORWARD(name) {#name, (getter)clock_forward, NULL, NULL, &pk_names.forwarded_##name},
static PyGetSetDef clock_getset[] = {PK_FORWARDED(FORWARD){NULL}};
#undef FORWARD

PyTypeObject PkStepClock_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "litellm_perfkit._core._speedups.StepClock",
    .tp_basicsize = sizeof(StepClockObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_alloc = clock_alloc,
    .tp_doc = "Drives one awaitable step by step, appending early, late, start, end, cpu per step (see _steps.StepClock).",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)clock_init,
    .tp_dealloc = (destructor)clock_dealloc,
    .tp_finalize = (destructor)clock_finalize,
    .tp_traverse = (traverseproc)clock_traverse,
    .tp_clear = (inquiry)clock_clear,
    .tp_as_async = &pk_coroutine_async,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = pk_coroutine_iternext,
    .tp_methods = pk_coroutine_methods,
    .tp_getset = clock_getset,
};

int
pk_steps_ready(void)
{
    one = PyLong_FromLong(1);
    static const PkCoroutineOps ops = {
        .type = &PkStepClock_Type,
        .step = (PySendResult(*)(PyObject *, PyObject *, PyObject *, PyObject **))clock_step,
        .close = (int (*)(PyObject *))clock_close,
        .closes_first = (int (*)(PyObject *, PyObject *))clock_closes_first,
    };
    return one == NULL || pk_batches_ready() < 0 || pk_coroutine_ready(&ops) < 0 ? -1 : 0;
}
