/* Server-sent-event scanning: the counterpart of _core._sse.SseScanner.
 *
 * Events are counted at every "\ndata:" of the stream (the stream's start
 * counts as a newline); "[DONE]" sentinels are counted apart. The last
 * PK_TAIL bytes of the stream are kept, so a pattern split across two body
 * messages is counted once, when its last byte arrives. Before the first
 * content token, complete events ("\n\n"-terminated, CRLF read as LF) that
 * may carry output (they hold one of _wire._events.TOKEN_HINTS) are handed to
 * pk_json_has_token, and what it leaves undecided to Python's data_has_token():
 * one definition of what a token is, for every reader.
 */
#include "speedups.h"

#include <string.h>

static const char EVENT[] = "\ndata:";
static const char DONE_SPACED[] = "\ndata: [DONE]";
static const char DONE_TIGHT[] = "\ndata:[DONE]";
#define EVENT_LEN 6
#define DONE_SPACED_LEN 13
#define DONE_TIGHT_LEN 12


void
pk_sse_init(PkSse *sse)
{
    sse->events = 0;
    sse->done_events = 0;
    sse->tail[0] = '\n'; /* the first event of a stream has no newline before it */
    sse->tail_len = 1;
    sse->token_seen = 0;
    Py_CLEAR(sse->pending);
}

void
pk_sse_clear(PkSse *sse)
{
    Py_CLEAR(sse->pending);
}

static Py_ssize_t
find(const char *haystack, Py_ssize_t size, const char *needle, Py_ssize_t len, Py_ssize_t from)
{
    while (from + len <= size) {
        const char *hit = memchr(haystack + from, needle[0], (size_t)(size - len + 1 - from));
        if (hit == NULL) {
            return -1;
        }
        from = hit - haystack;
        if (memcmp(hit, needle, (size_t)len) == 0) {
            return from;
        }
        from++;
    }
    return -1;
}

/* Count the patterns that start at p (a newline) and end past `tail_end`
 * bytes from p: patterns that end inside the tail were counted before.
 * Every pattern starts with EVENT, so one memcmp rules all three out. */
static void
count_at(PkSse *sse, const char *p, Py_ssize_t available, Py_ssize_t tail_end)
{
    if (available < EVENT_LEN || memcmp(p, EVENT, EVENT_LEN) != 0) {
        return;
    }
    if (EVENT_LEN > tail_end) {
        sse->events++;
    }
    if (available >= DONE_SPACED_LEN && DONE_SPACED_LEN > tail_end && memcmp(p, DONE_SPACED, DONE_SPACED_LEN) == 0) {
        sse->done_events++;
    }
    else if (available >= DONE_TIGHT_LEN && DONE_TIGHT_LEN > tail_end && memcmp(p, DONE_TIGHT, DONE_TIGHT_LEN) == 0) {
        sse->done_events++;
    }
}

static void
count_events(PkSse *sse, const char *body, Py_ssize_t len)
{
    /* Patterns that start in the tail: matched in tail + the body's first
     * bytes, copied together (at most 2 * PK_TAIL bytes). */
    char edge[2 * PK_TAIL];
    int head = len < PK_TAIL ? (int)len : PK_TAIL;
    int edge_len = sse->tail_len + head;
    memcpy(edge, sse->tail, (size_t)sse->tail_len);
    memcpy(edge + sse->tail_len, body, (size_t)head);
    for (int at = 0; at < sse->tail_len; at++) {
        if (edge[at] == '\n') {
            count_at(sse, edge + at, edge_len - at, sse->tail_len - at);
        }
    }
    /* Patterns that start in the body; one that does not fit is counted
     * with the next message, from the tail. */
    const char *p = body, *end = body + len;
    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        count_at(sse, p, end - p, 0);
        p++;
    }
    if (len > 0 && body[len - 1] == '\n') {
        sse->tail[0] = '\n';
        sse->tail_len = 1;
        return;
    }
    /* The new tail: the last PK_TAIL bytes of tail + body. */
    char window[PK_TAIL];
    int keep_body = len < PK_TAIL ? (int)len : PK_TAIL;
    int keep_tail = PK_TAIL - keep_body < sse->tail_len ? PK_TAIL - keep_body : sse->tail_len;
    memcpy(window, sse->tail + sse->tail_len - keep_tail, (size_t)keep_tail);
    memcpy(window + keep_tail, body + len - keep_body, (size_t)keep_body);
    memcpy(sse->tail, window, (size_t)(keep_tail + keep_body));
    sse->tail_len = keep_tail + keep_body;
}

/* The data of one event: its "data:" lines' values, leading spaces
 * stripped, joined by newlines, written to `out` (at least len bytes). */
static Py_ssize_t
event_data(const char *event, Py_ssize_t len, char *out)
{
    Py_ssize_t size = 0, start = 0;
    int lines = 0;
    while (start <= len) {
        const char *newline = memchr(event + start, '\n', (size_t)(len - start));
        Py_ssize_t stop = newline == NULL ? len : newline - event;
        if (stop - start >= 5 && memcmp(event + start, "data:", 5) == 0) {
            Py_ssize_t from = start + 5;
            while (from < stop && event[from] == ' ') {
                from++;
            }
            if (lines++) {
                out[size++] = '\n';
            }
            memcpy(out + size, event + from, (size_t)(stop - from));
            size += stop - from;
        }
        start = stop + 1;
    }
    return size;
}

static int
data_has_token(const char *data, Py_ssize_t len)
{
    int found = pk_json_has_token(data, len);
    if (found >= 0) {
        return found;
    }
    /* Outside what the C reader decides: Python's definition answers. */
    PyObject *bytes = PyBytes_FromStringAndSize(data, len);
    if (bytes == NULL) {
        return -1;
    }
    PyObject *result = PyObject_CallOneArg(pk_hooks.data_has_token, bytes);
    Py_DECREF(bytes);
    if (result == NULL) {
        return -1;
    }
    found = PyObject_IsTrue(result);
    Py_DECREF(result);
    return found;
}

static int
event_has_token(const char *event, Py_ssize_t len)
{
    /* _wire._events.TOKEN_HINTS, a tuple of bytes (checked by setup()). */
    PyObject *hints = pk_hooks.token_hints;
    int hinted = 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(hints) && !hinted; i++) {
        PyObject *hint = PyTuple_GET_ITEM(hints, i);
        hinted = find(event, len, PyBytes_AS_STRING(hint), PyBytes_GET_SIZE(hint), 0) >= 0;
    }
    if (!hinted) {
        return 0; /* cannot carry output: not worth parsing */
    }
    if (len >= 5 && memcmp(event, "data:", 5) == 0 && memchr(event, '\n', (size_t)len) == NULL) {
        return data_has_token(event + 5, len - 5); /* one line, the usual event */
    }
    char *data = PyMem_Malloc((size_t)len + 1);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    int found = data_has_token(data, event_data(event, len, data));
    PyMem_Free(data);
    return found;
}

/* pending + body with CRLF read as LF, as a new bytes object. */
static PyObject *
joined_window(PyObject *pending, const char *body, Py_ssize_t len)
{
    Py_ssize_t before = pending == NULL ? 0 : PyBytes_GET_SIZE(pending);
    PyObject *window = PyBytes_FromStringAndSize(NULL, before + len);
    if (window == NULL) {
        return NULL;
    }
    char *out = PyBytes_AS_STRING(window);
    if (before) {
        memcpy(out, PyBytes_AS_STRING(pending), (size_t)before);
    }
    memcpy(out + before, body, (size_t)len);
    Py_ssize_t size = before + len, write = 0;
    if (memchr(out, '\r', (size_t)size) == NULL) {
        return window;
    }
    for (Py_ssize_t read = 0; read < size; read++) {
        if (!(out[read] == '\r' && read + 1 < size && out[read + 1] == '\n')) {
            out[write++] = out[read];
        }
    }
    if (_PyBytes_Resize(&window, write) < 0) {
        return NULL;
    }
    return window;
}

static int
find_token(PkSse *sse, const char *body, Py_ssize_t len, int *token)
{
    PyObject *window = NULL;
    const char *text = body;
    Py_ssize_t size = len;
    if (sse->pending != NULL || memchr(body, '\r', (size_t)len) != NULL) {
        window = joined_window(sse->pending, body, len);
        if (window == NULL) {
            return -1;
        }
        text = PyBytes_AS_STRING(window);
        size = PyBytes_GET_SIZE(window);
    }
    Py_ssize_t start = 0, stop;
    int found = 0;
    while (!found && (stop = find(text, size, "\n\n", 2, start)) >= 0) {
        found = event_has_token(text + start, stop - start);
        if (found < 0) {
            Py_XDECREF(window);
            return -1;
        }
        start = stop + 2;
    }
    Py_CLEAR(sse->pending);
    if (found) {
        sse->token_seen = 1;
        *token = 1;
    }
    else if (start < size) {
        sse->pending = PyBytes_FromStringAndSize(text + start, size - start);
        if (sse->pending == NULL) {
            Py_XDECREF(window);
            return -1;
        }
    }
    Py_XDECREF(window);
    return 0;
}

int
pk_sse_feed(PkSse *sse, const char *body, Py_ssize_t len, int *token)
{
    count_events(sse, body, len);
    if (sse->token_seen) {
        return 0;
    }
    return find_token(sse, body, len, token);
}

int
pk_sse_find_token(PkSse *sse, const char *body, Py_ssize_t len, int *token)
{
    return sse->token_seen ? 0 : find_token(sse, body, len, token);
}
