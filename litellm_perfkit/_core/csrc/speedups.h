/* The C accelerator of perfkit's request path (litellm_perfkit._core._speedups).
 *
 * It implements the same behaviour as the pure-Python reference in
 * _stage.py, _middleware.py and _sse.py, which stays the fallback and the
 * specification (tests compare the two). Everything it needs from Python
 * (the context variables, the error counter, the sink, the token check) is
 * handed over once by _native.py through setup().
 *
 * Never break the host: every function that the application calls catches
 * its own failures, reports them through internal_error() and carries on
 * as if perfkit were not there.
 */
#ifndef PERFKIT_SPEEDUPS_H
#define PERFKIT_SPEEDUPS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* Python objects handed over by setup(). */
typedef struct {
    PyObject *timeline_var;        /* ContextVar[Timeline | None] */
    PyObject *open_stage_var;      /* ContextVar[int], default -1 */
    PyObject *internal_error;      /* internal_error(where: str, exc) */
    PyObject *closed_by_collector; /* closed_by_collector(exc_type) -> bool */
    PyObject *gc_watch;            /* .total_ns: the collector's running pause total */
    PyObject *entry_prefixes;      /* dict: stage name -> "token;dur=" */
    PyObject *entry_prefix;        /* entry_prefix(name) -> str, fills entry_prefixes */
    PyObject *data_has_token;      /* data_has_token(data: bytes) -> bool */
    PyObject *token_hints;         /* tuple of bytes: an event without any of them carries no output */
    PyObject *chat_output_keys;    /* tuple of str: the chat delta keys that carry output */
    PyObject *sink_module;         /* its .sink(timeline) takes finished timelines */
    PyObject *default_clock;       /* time.perf_counter_ns, where C has no equal clock */
    PyObject *default_upstream;    /* _context.DEFAULT_UPSTREAM: a new timeline's upstream stages */
    PyObject *clock;               /* a test's fake clock, or NULL */
} PkHooks;

extern PkHooks pk_hooks;

/* Interned attribute names and dictionary keys. */
typedef struct {
    PyObject *status, *total_ns, *sink, *type, *body, *more_body, *headers;
    PyObject *server_timing, *overhead_header, *upstream_stages, *upstream_names, *received;
    PyObject *headers_sent, *first_body_byte, *first_token, *last_byte;
    PyObject *client_disconnected, *incomplete_response, *gc;
    PyObject *server_timing_header, *overhead_header_name;
} PkNames;

extern PkNames pk_names;

/* The time now in ns, the same clock as time.perf_counter_ns(). -1 with an
 * exception set only when a test's fake clock fails. */
int pk_now(int64_t *out);

/* An int as int64 without PyLong_AsLongLong's slow path for big ints.
 * -1 with OverflowError or TypeError set. */
int pk_as_int64(PyObject *value, int64_t *out);

/* Report the exception being raised to internal_error(where) and clear it. */
void pk_report(const char *where);

/* "12.345": nanoseconds as milliseconds with 3 decimals, rounded half up
 * (format_ms in _headers.py). Writes at most 24 bytes; returns the length. */
int pk_format_ms(char *out, int64_t duration_ns);

/* The timeline's fields (_timeline._PyTimelineFields is their reference);
 * the Python subclass _timeline.Timeline adds the methods. */
typedef struct {
    PyObject_HEAD
    long long start_ns, end_ns, chunks, body_bytes, gc_ns;
    Py_ssize_t next_index;
    PyObject *finished;    /* list of (index, name, start_ns, end_ns, parent) */
    PyObject *generators;  /* dict: name -> [index, first_ns, last_ns, parent, self_ns, items, kind] */
    PyObject *marks;       /* dict: mark -> ns */
    PyObject *attributes;  /* dict */
    PyObject *method, *path, *status, *traceparent, *error, *upstream, *entries;
    char streaming;
} PkTimelineObject;

extern PyTypeObject PkTimeline_Type;

/* The timeline as PkTimelineObject, or NULL with a TypeError set. */
PkTimelineObject *pk_timeline(PyObject *object);

/* The timeline as a record Timeline.decode reads (marshal's format), into
 * out (room bytes): 0 and *len when written; 1 when declined (a value it
 * does not write, or no room: use Timeline.encode()); -1 with an exception set. */
int pk_encode_timeline(PkTimelineObject *timeline, char *out, Py_ssize_t room, Py_ssize_t *len);

extern PyTypeObject PkStage_Type;
extern PyTypeObject PkExchange_Type;
extern PyTypeObject PkHandoff_Type;

/* SSE scanning state of one response (the counterpart of _sse.SseScanner). */
#define PK_TAIL 12 /* longest pattern ("\ndata: [DONE]") minus one */

typedef struct {
    int64_t events, done_events;
    char tail[PK_TAIL];
    int tail_len;
    int token_seen;
    PyObject *pending; /* an unfinished event before the first token, or NULL */
} PkSse;

void pk_sse_init(PkSse *sse);
void pk_sse_clear(PkSse *sse);
/* Count the events in one body message; *token is set to 1 if it completes
 * the first event that carries output. -1 with an exception set on failure. */
int pk_sse_feed(PkSse *sse, const char *data, Py_ssize_t len, int *token);

/* The send wrapper and response state of one request (exchange.c; the
 * response start is in start.c). */
typedef struct {
    PyObject_HEAD
    PyObject *middleware;
    PyObject *timeline; /* a PkTimelineObject (checked by __init__) */
    PyObject *receive;
    PyObject *send;
    PkSse sse;
    int64_t body_bytes;
    int64_t chunks; /* non-empty body messages (SSE: replaced by the event count) */
    char streaming;
    char complete;
    char disconnected;
    char body_seen;
} ExchangeObject;

/* The exchange's timeline as its struct (checked when the exchange is made). */
#define FIELDS(self) ((PkTimelineObject *)(self)->timeline)

/* message.get(key) as a new reference; NULL without an exception when missing. */
int pk_get_item(PyObject *message, PyObject *key, PyObject **out);
int pk_set_mark(ExchangeObject *self, PyObject *name, int64_t at);
/* An int attribute; *failed = 1 (exception set) when it is not one. */
int64_t pk_int64_attribute(PyObject *object, PyObject *name, int *failed);
/* http.response.start: marks, status, streaming; the message with perfkit's
 * headers added (a new message and header list), or NULL: unchanged when no
 * exception is set. */
PyObject *pk_response_start(ExchangeObject *self, PyObject *message);

#define PK_MAX_OUTPUT_KEYS 16 /* the most chat_output_keys setup() takes */

/* 1 or 0: whether one event's data carries output (carries_output of
 * the parsed JSON); -1 (no exception) when the C reader cannot decide. */
int pk_json_has_token(const char *data, Py_ssize_t len);

#endif
