/* encode_spans(spans) -> bytes | None: the export agent's OTLP protobuf
 * encoding of spans, the counterpart of _export/_otlp._span_protobuf (the
 * specification, and what runs when this declines). Each span is the
 * _spans.Span tuple, or bytes: spans already encoded, copied as they are;
 * the result is the spans as ScopeSpans.spans fields (field 2), concatenated. None when a value is one this does not write (an
 * attribute that is not bool, int, float or str, an int past 64 bits, an id
 * that is not hex of its size): Python then encodes the batch. */
#include "protobuf.h"

/* One KeyValue as Span.attributes (field 9). */
static int
put_attribute(Buffer *buffer, PyObject *pair)
{
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2 || !PyUnicode_Check(PyTuple_GET_ITEM(pair, 0))) {
        return DECLINED;
    }
    PyObject *value = PyTuple_GET_ITEM(pair, 1);
    Py_ssize_t key_size;
    const char *key = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &key_size);
    if (key == NULL) {
        return -1;
    }
    /* AnyValue: bool_value (2, varint), int_value (3, varint), double_value (4, fixed64), string_value (1). */
    char scalar[11];
    size_t scalar_size = 0;
    const char *text = NULL;
    Py_ssize_t text_size = 0;
    if (PyBool_Check(value)) {
        scalar[0] = 0x10;
        scalar[1] = value == Py_True;
        scalar_size = 2;
    }
    else if (PyLong_CheckExact(value)) {
        int overflow;
        long long number = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (overflow) {
            return DECLINED;
        }
        if (number == -1 && PyErr_Occurred()) {
            return -1;
        }
        scalar_size = int_value(scalar, number);
    }
    else if (PyFloat_CheckExact(value)) {
        scalar_size = double_value(scalar, PyFloat_AS_DOUBLE(value));
    }
    else if (PyUnicode_CheckExact(value)) {
        text = PyUnicode_AsUTF8AndSize(value, &text_size);
        if (text == NULL) {
            return -1;
        }
    }
    else {
        return DECLINED;
    }
    return put_key_value(buffer, 9, key, (size_t)key_size, scalar, scalar_size, text, (size_t)text_size);
}

static int
as_uint64(PyObject *value, uint64_t *out)
{
    if (!PyLong_Check(value)) {
        return DECLINED;
    }
    int64_t number;
    if (pk_as_int64(value, &number) < 0) {
        if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
            PyErr_Clear();
            return DECLINED;
        }
        return -1;
    }
    *out = (uint64_t)number;
    return 0;
}

/* One span's body (the Span message's fields) into body. */
static int
put_span_body(Buffer *body, PyObject *span)
{
    if (!PyTuple_Check(span) || PyTuple_GET_SIZE(span) != PK_SPAN_SIZE) {
        return DECLINED;
    }
#define FIELD(field) PyTuple_GET_ITEM(span, PK_SPAN_##field) /* _layouts.Span's positions */
    PyObject *parent = FIELD(PARENT_SPAN_ID), *name = FIELD(NAME), *attributes = FIELD(ATTRIBUTES), *message = FIELD(STATUS_MESSAGE);
    uint64_t kind, start, end, code;
    int result;
    if ((result = as_uint64(FIELD(KIND), &kind)) || (result = as_uint64(FIELD(START_UNIX_NS), &start)) ||
        (result = as_uint64(FIELD(END_UNIX_NS), &end)) || (result = as_uint64(FIELD(STATUS_CODE), &code))) {
        return result;
    }
    if (!PyUnicode_Check(name) || !PyUnicode_Check(message) || !PyList_Check(attributes)) {
        return DECLINED;
    }
    if ((result = put_id(body, 0x0A, FIELD(TRACE_ID), 16)) || (result = put_id(body, 0x12, FIELD(SPAN_ID), 8))) {
        return result;
    }
    int has_parent = PyObject_IsTrue(parent);
    if (has_parent < 0) {
        return -1;
    }
    if (has_parent && (result = put_id(body, 0x22, parent, 8))) {
        return result;
    }
    Py_ssize_t name_size, message_size;
    const char *name_text = PyUnicode_AsUTF8AndSize(name, &name_size);
    const char *message_text = name_text == NULL ? NULL : PyUnicode_AsUTF8AndSize(message, &message_size);
    if (message_text == NULL || put_field(body, 5, name_text, (size_t)name_size) < 0 || reserve(body, 1 + 10 + 2 * 9) < 0) {
        return -1;
    }
    body->data[body->len++] = 0x30;
    put_varint(body, kind);
    body->data[body->len++] = 0x39;
    put_fixed64(body, start);
    body->data[body->len++] = 0x41;
    put_fixed64(body, end);
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(attributes); i++) {
        if ((result = put_attribute(body, PyList_GET_ITEM(attributes, i)))) {
            return result;
        }
    }
    /* Status (15): message (2) if any, code (3) if not unset; always present, maybe empty. */
    size_t message_field = message_size ? 1 + varint_size((uint64_t)message_size) + (size_t)message_size : 0;
    size_t status_size = message_field + (code ? 1 + varint_size(code) : 0);
    if (reserve(body, 1 + 10 + status_size) < 0) {
        return -1;
    }
    body->data[body->len++] = (char)(15 << 3 | 2);
    put_varint(body, status_size);
    if (message_size) {
        body->data[body->len++] = 2 << 3 | 2;
        put_varint(body, (uint64_t)message_size);
        put_bytes(body, message_text, (size_t)message_size);
    }
    if (code) {
        body->data[body->len++] = 0x18;
        put_varint(body, code);
    }
    return 0;
#undef FIELD
}

PyObject *
pk_encode_spans(PyObject *module, PyObject *spans)
{
    if (!PyList_Check(spans)) {
        PyErr_SetString(PyExc_TypeError, "encode_spans: a list of spans");
        return NULL;
    }
    Buffer out = {0}, body = {0};
    int status = 0;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(spans); i++) {
        PyObject *span = PyList_GET_ITEM(spans, i);
        if (PyBytes_Check(span)) { /* spans already encoded (stage_spans_protobuf) */
            status = reserve(&out, (size_t)PyBytes_GET_SIZE(span));
            if (status == 0) {
                put_bytes(&out, PyBytes_AS_STRING(span), (size_t)PyBytes_GET_SIZE(span));
            }
        }
        else {
            body.len = 0;
            status = put_span_body(&body, span);
            if (status == 0) {
                status = put_field(&out, 2, body.data, body.len);
            }
        }
        if (status) {
            break;
        }
    }
    return written_spans(&out, &body, status);
}
