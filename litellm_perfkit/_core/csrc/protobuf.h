/* Protobuf's wire format, as the OTLP writers (otlp.c, spans.c) write it:
 * a growing buffer, varints, fixed64, length-delimited fields, ids from hex
 * and OTLP's KeyValue. */
#ifndef PERFKIT_PROTOBUF_H
#define PERFKIT_PROTOBUF_H

#include "speedups.h"

#include <string.h>

typedef struct {
    char *data;
    size_t len, cap;
} Buffer;

static inline int
reserve(Buffer *buffer, size_t more)
{
    void *data = buffer->data;
    int result = pk_reserve(&data, &buffer->cap, buffer->len + more, 4096);
    buffer->data = data;
    return result;
}

static inline size_t
varint_size(uint64_t value)
{
    size_t size = 1;
    while (value > 0x7F) {
        value >>= 7;
        size++;
    }
    return size;
}

/* Callers reserve first; these only write. */
static inline void
put_varint(Buffer *buffer, uint64_t value)
{
    while (value > 0x7F) {
        buffer->data[buffer->len++] = (char)((value & 0x7F) | 0x80);
        value >>= 7;
    }
    buffer->data[buffer->len++] = (char)value;
}

static inline void
put_bytes(Buffer *buffer, const char *data, size_t size)
{
    memcpy(buffer->data + buffer->len, data, size);
    buffer->len += size;
}

static inline void
put_fixed64(Buffer *buffer, uint64_t value)
{
    for (int i = 0; i < 8; i++) {
        buffer->data[buffer->len++] = (char)(value >> (8 * i));
    }
}

/* What a writer returns for a value it does not write: the caller falls back to Python. */
#define DECLINED 1

/* A length-delimited field: tag, length, bytes. */
static inline int
put_field(Buffer *buffer, int number, const char *data, size_t size)
{
    if (reserve(buffer, 2 + 10 + size) < 0) {
        return -1;
    }
    put_varint(buffer, (uint64_t)number << 3 | 2);
    put_varint(buffer, size);
    put_bytes(buffer, data, size);
    return 0;
}

static inline int
hex_digit(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    if (c >= 'A' && c <= 'F') {
        return c - 'A' + 10;
    }
    return -1;
}

/* An id as tag, size and its bytes from hex; DECLINED unless it is `size` bytes of hex. */
static inline int
put_id(Buffer *buffer, char tag, PyObject *hex, size_t size)
{
    Py_ssize_t length;
    const char *text = PyUnicode_Check(hex) ? PyUnicode_AsUTF8AndSize(hex, &length) : NULL;
    if (text == NULL) {
        return PyErr_Occurred() ? -1 : DECLINED;
    }
    if ((size_t)length != 2 * size || reserve(buffer, 2 + size) < 0) {
        return PyErr_Occurred() ? -1 : DECLINED;
    }
    buffer->data[buffer->len++] = tag;
    buffer->data[buffer->len++] = (char)size;
    for (size_t i = 0; i < size; i++) {
        int high = hex_digit((unsigned char)text[2 * i]), low = hex_digit((unsigned char)text[2 * i + 1]);
        if (high < 0 || low < 0) {
            return DECLINED;
        }
        buffer->data[buffer->len++] = (char)(high << 4 | low);
    }
    return 0;
}

/* A KeyValue as field `number` (Span.attributes is 9): the key, then its
 * AnyValue, either `scalar` (already a tagged value: bool, int or double) or,
 * when text is not NULL, text as string_value (1). */
static inline int
put_key_value(Buffer *buffer, int number, const char *key, size_t key_size, const char *scalar, size_t scalar_size,
              const char *text, size_t text_size)
{
    if (text != NULL) {
        scalar_size = 1 + varint_size(text_size) + text_size;
    }
    size_t key_field = 1 + varint_size(key_size) + key_size;
    size_t value_field = 1 + varint_size(scalar_size) + scalar_size;
    size_t pair_size = key_field + value_field;
    if (reserve(buffer, 1 + 10 + pair_size) < 0) {
        return -1;
    }
    put_varint(buffer, (uint64_t)number << 3 | 2);
    put_varint(buffer, pair_size);
    buffer->data[buffer->len++] = 1 << 3 | 2;
    put_varint(buffer, key_size);
    put_bytes(buffer, key, key_size);
    buffer->data[buffer->len++] = 2 << 3 | 2;
    put_varint(buffer, scalar_size);
    if (text != NULL) {
        buffer->data[buffer->len++] = 1 << 3 | 2;
        put_varint(buffer, text_size);
        put_bytes(buffer, text, text_size);
    }
    else {
        put_bytes(buffer, scalar, scalar_size);
    }
    return 0;
}

/* AnyValue.double_value (4, fixed64) into scalar (9 bytes); its size. */
static inline size_t
double_value(char *scalar, double number)
{
    uint64_t bits;
    memcpy(&bits, &number, 8);
    scalar[0] = 0x21;
    for (int i = 0; i < 8; i++) {
        scalar[1 + i] = (char)(bits >> (8 * i));
    }
    return 9;
}

/* AnyValue.int_value (3, varint; int64 as two's complement) into scalar (11 bytes); its size. */
static inline size_t
int_value(char *scalar, int64_t number)
{
    Buffer small = {scalar, 1, 11};
    scalar[0] = 0x18;
    put_varint(&small, (uint64_t)number);
    return small.len;
}

/* What a writer of spans returns once its loop ends with status: the bytes
 * written (0), None (DECLINED: Python writes them), or NULL (-1: an error
 * set). Frees both buffers. */
static inline PyObject *
written_spans(Buffer *out, Buffer *body, int status)
{
    PyObject *result = status == 0 ? PyBytes_FromStringAndSize(out->data, (Py_ssize_t)out->len)
                       : status == DECLINED ? Py_NewRef(Py_None)
                                            : NULL;
    PyMem_Free(out->data);
    PyMem_Free(body->data);
    return result;
}

#endif
