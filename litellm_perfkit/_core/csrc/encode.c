/* A finished timeline for the export agent, written straight into the
 * hand-off's buffer: the tuple of the encoded fields (perfkit_fields.h, in
 * _timeline.ENCODED_FIELDS's order) in marshal's format, which the export
 * side decodes (marshal.loads). Binary, so no digits
 * are formatted and no strings escaped: a JSON writer here cost 10k
 * instructions a timeline, most of them decimal digits.
 *
 * The type codes used (N T F i l g z a u ) ( [ { 0) are marshal's since
 * Python 3.4; the app and its agent run the same interpreter anyway. It
 * writes None, bool, int (64-bit), float, str, tuple, list, dict, Int64List (as a list) and
 * StageList (as a list of tuples). Anything
 * else (a bigger int, a lone surrogate, another type, deep nesting, no room)
 * makes it decline: the caller then uses Timeline.encode() (orjson, or
 * marshal.dumps), and the agent decodes the same either way
 * (tests/core/test_speedups.py).
 */
#include "speedups.h"

#include <string.h>

#define MAX_DEPTH 8

typedef struct {
    char *p, *end;
} Writer;

/* 0: written; 1: declined (unsupported, or out of room); -1: error set. */
enum { WRITTEN = 0, DECLINED = 1 };

static inline int
room(Writer *w, size_t len)
{
    return (size_t)(w->end - w->p) >= len;
}

static inline void
put_u32(Writer *w, uint32_t value)
{
    for (int i = 0; i < 4; i++) {
        *w->p++ = (char)(value >> (8 * i));
    }
}

static int
put_int(Writer *w, long long value)
{
    if (value >= INT32_MIN && value <= INT32_MAX) {
        if (!room(w, 5)) {
            return DECLINED;
        }
        *w->p++ = 'i';
        put_u32(w, (uint32_t)(int32_t)value);
        return WRITTEN;
    }
    /* TYPE_LONG: a signed count of 15-bit digits, least significant first. */
    unsigned long long magnitude = value < 0 ? 0ULL - (unsigned long long)value : (unsigned long long)value;
    char digits[10];
    int count = 0;
    while (magnitude) {
        unsigned digit = (unsigned)(magnitude & 0x7fff);
        digits[2 * count] = (char)(digit & 0xff);
        digits[2 * count + 1] = (char)(digit >> 8);
        count++;
        magnitude >>= 15;
    }
    if (!room(w, 5 + 2 * (size_t)count)) {
        return DECLINED;
    }
    *w->p++ = 'l';
    put_u32(w, (uint32_t)(value < 0 ? -count : count));
    memcpy(w->p, digits, 2 * (size_t)count);
    w->p += 2 * count;
    return WRITTEN;
}

static int
put_str(Writer *w, PyObject *text)
{
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, &len);
    if (utf8 == NULL) {
        PyErr_Clear(); /* a lone surrogate: Timeline.encode() decides */
        return DECLINED;
    }
    int ascii = PyUnicode_IS_ASCII(text);
    if (!room(w, 5 + (size_t)len) || len > INT32_MAX) {
        return DECLINED;
    }
    if (ascii && len < 256) {
        *w->p++ = 'z'; /* TYPE_SHORT_ASCII */
        *w->p++ = (char)len;
    }
    else {
        *w->p++ = ascii ? 'a' : 'u'; /* TYPE_ASCII, TYPE_UNICODE (UTF-8) */
        put_u32(w, (uint32_t)len);
    }
    memcpy(w->p, utf8, (size_t)len);
    w->p += len;
    return WRITTEN;
}

static int put_value(Writer *w, PyObject *value, int depth);

static int
put_items(Writer *w, PyObject *sequence, int depth)
{
    Py_ssize_t size = PySequence_Fast_GET_SIZE(sequence);
    PyObject **items = PySequence_Fast_ITEMS(sequence);
    if (!room(w, 5) || size > INT32_MAX) {
        return DECLINED;
    }
    if (PyTuple_Check(sequence) && size < 256) {
        *w->p++ = ')'; /* TYPE_SMALL_TUPLE */
        *w->p++ = (char)size;
    }
    else {
        *w->p++ = PyTuple_Check(sequence) ? '(' : '[';
        put_u32(w, (uint32_t)size);
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        int result = put_value(w, items[i], depth + 1);
        if (result != WRITTEN) {
            return result;
        }
    }
    return WRITTEN;
}

static int
put_dict(Writer *w, PyObject *dict, int depth)
{
    PyObject *key, *value;
    Py_ssize_t position = 0;
    if (!room(w, 1)) {
        return DECLINED;
    }
    *w->p++ = '{';
    while (PyDict_Next(dict, &position, &key, &value)) {
        int result = put_value(w, key, depth + 1);
        if (result == WRITTEN) {
            result = put_value(w, value, depth + 1);
        }
        if (result != WRITTEN) {
            return result;
        }
    }
    if (!room(w, 1)) {
        return DECLINED;
    }
    *w->p++ = '0'; /* TYPE_NULL: the end of a dict */
    return WRITTEN;
}

/* A list's header, '[' and its size: 0 when there is no room or it is too long for marshal. */
static int
list_header(Writer *w, Py_ssize_t size)
{
    if (!room(w, 5) || size > INT32_MAX) {
        return 0;
    }
    *w->p++ = '[';
    put_u32(w, (uint32_t)size);
    return 1;
}

/* A StageList, written as the list of tuples it stands for (_fields.FINISHED). */
static int
put_stages(Writer *w, PyObject *list, int depth)
{
    Py_ssize_t size;
    const PkFinishedStage *stages = pk_stagelist_stages(list, &size);
    if (!list_header(w, size)) {
        return DECLINED;
    }
    for (Py_ssize_t i = 0; i < size; i++) {
        if (!room(w, 2)) {
            return DECLINED;
        }
        *w->p++ = ')'; /* TYPE_SMALL_TUPLE */
        *w->p++ = PK_FINISHED_SIZE;
        for (int position = 0; position < PK_FINISHED_SIZE; position++) {
            int result = position == PK_FINISHED_NAME ? put_value(w, stages[i].name, depth + 2)
                                                      : put_int(w, stages[i].numbers[position]);
            if (result != WRITTEN) {
                return result;
            }
        }
    }
    return WRITTEN;
}

static int
put_value(Writer *w, PyObject *value, int depth)
{
    if (depth > MAX_DEPTH || !room(w, 1)) {
        return DECLINED;
    }
    if (value == Py_None || value == Py_True || value == Py_False) {
        *w->p++ = value == Py_None ? 'N' : value == Py_True ? 'T' : 'F';
        return WRITTEN;
    }
    if (PyLong_CheckExact(value)) {
        int overflow;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) {
            return DECLINED;
        }
        return number == -1 && PyErr_Occurred() ? -1 : put_int(w, number);
    }
    if (PyUnicode_CheckExact(value)) {
        return put_str(w, value);
    }
    if (PyFloat_CheckExact(value)) {
        if (!room(w, 9)) {
            return DECLINED;
        }
        *w->p++ = 'g'; /* TYPE_BINARY_FLOAT: the IEEE 754 double, little-endian */
        double number = PyFloat_AS_DOUBLE(value);
        uint64_t bits;
        memcpy(&bits, &number, 8);
        put_u32(w, (uint32_t)bits);
        put_u32(w, (uint32_t)(bits >> 32));
        return WRITTEN;
    }
    if (PyList_CheckExact(value) || PyTuple_CheckExact(value)) {
        return put_items(w, value, depth);
    }
    if (PyDict_CheckExact(value)) {
        return put_dict(w, value, depth);
    }
    if (Py_IS_TYPE(value, &PkInt64List_Type)) { /* written as the list it stands for */
        Py_ssize_t size;
        const int64_t *values = pk_int64list_values(value, &size);
        if (!list_header(w, size)) {
            return DECLINED;
        }
        for (Py_ssize_t i = 0; i < size; i++) {
            int result = put_int(w, values[i]);
            if (result != WRITTEN) {
                return result;
            }
        }
        return WRITTEN;
    }
    if (Py_IS_TYPE(value, &PkStageList_Type)) {
        return put_stages(w, value, depth);
    }
    return DECLINED; /* a subclass or another type: marshal.dumps decides */
}

#define ENCODE_INT64(field) put_int(&w, t->field)
#define ENCODE_BOOL(field) put_value(&w, t->field ? Py_True : Py_False, 0)
#define ENCODE_OBJECT(field) (t->field == NULL ? DECLINED : put_value(&w, t->field, 0))

int
pk_encode_timeline(PkTimelineObject *t, char *out, Py_ssize_t size, Py_ssize_t *len)
{
    Writer w = {out, out + size};
    if (!room(&w, 2)) {
        return DECLINED;
    }
    *w.p++ = ')'; /* a small tuple of the encoded fields, in perfkit_fields.h's order */
    *w.p++ = PK_TIMELINE_ENCODED_COUNT;
    int result = WRITTEN;
    /* A deleted field declines: Timeline.encode() then fails the same way. */
#define ENCODE(field, kind)                                                                               \
    if (result == WRITTEN) {                                                                           \
        result = ENCODE_##kind(field);                                                                 \
    }
    PK_TIMELINE_ENCODED(ENCODE)
#undef ENCODE
    *len = w.p - out;
    return result;
}
