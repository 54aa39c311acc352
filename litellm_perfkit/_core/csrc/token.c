/* Whether one SSE event's data carries output, without building Python
 * objects: the answer of _wire._events.carries_output(orjson.loads(data))
 * for OpenAI chunks. An event with a "type" key (Anthropic, Responses) is
 * left undecided: Python answers it.
 *
 * A strict reader for a subset of JSON: ASCII only, no escapes in keys, no
 * exponents, at most 18 digits in a number, nesting at most 64 deep. A
 * document inside that subset is valid JSON, and the reader gives the
 * Python answer for it, duplicate keys included (the last one wins, as in
 * a dict). Anything outside it (and any document that is not valid JSON)
 * is "undecided": the caller asks Python, so the definition stays there.
 */
#include "speedups.h"

#include <string.h>

enum { UNDECIDED = -1 };
enum role { NONE, EVENT, CHOICES, CHOICE, DELTA };
#define MAX_DEPTH 64

typedef struct {
    const char *p, *end;
} Reader;

static void
skip_space(Reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\t' || *r->p == '\n' || *r->p == '\r')) {
        r->p++;
    }
}

/* A string at r->p (the opening quote). start and len: the raw text between
 * the quotes; escaped: whether it holds an escape. */
static int
read_string(Reader *r, const char **start, Py_ssize_t *len, int *escaped)
{
    r->p++;
    *start = r->p;
    *escaped = 0;
    while (r->p < r->end) {
        unsigned char c = (unsigned char)*r->p;
        if (c == '"') {
            *len = r->p - *start;
            r->p++;
            return 0;
        }
        if (c < 0x20 || c >= 0x80) {
            return UNDECIDED; /* invalid JSON, or UTF-8 this reader does not check */
        }
        if (c == '\\') {
            if (r->p + 1 >= r->end || strchr("\"\\/bfnrt", r->p[1]) == NULL || r->p[1] == '\0') {
                return UNDECIDED; /* \u escapes (surrogates) and invalid ones: Python */
            }
            *escaped = 1;
            r->p++;
        }
        r->p++;
    }
    return UNDECIDED;
}

/* A number: its truthiness (not zero). */
static int
read_number(Reader *r, int *truthy)
{
    const char *start = r->p;
    int digits = 0;
    *truthy = 0;
    if (*r->p == '-') {
        r->p++;
    }
    if (r->p >= r->end || *r->p < '0' || *r->p > '9' || (*r->p == '0' && r->p + 1 < r->end && r->p[1] >= '0' && r->p[1] <= '9')) {
        return UNDECIDED; /* leading zeros and a bare "-" are not JSON */
    }
    int fraction = 0;
    while (r->p < r->end) {
        char c = *r->p;
        if (c >= '0' && c <= '9') {
            digits++;
            *truthy |= c != '0';
        }
        else if (c == '.' && !fraction && r->p > start && r->p[-1] >= '0' && r->p[-1] <= '9') {
            fraction = 1;
            if (r->p + 1 >= r->end || r->p[1] < '0' || r->p[1] > '9') {
                return UNDECIDED;
            }
        }
        else if (c == 'e' || c == 'E') {
            return UNDECIDED; /* 1e-400 is 0.0, 1e400 is out of range: Python */
        }
        else {
            break;
        }
        r->p++;
    }
    return digits > 18 ? UNDECIDED : 0;
}

static int
key_is(const char *key, Py_ssize_t len, const char *name)
{
    return (size_t)len == strlen(name) && memcmp(key, name, (size_t)len) == 0;
}

/* The position of key among _wire._events's chat delta keys that carry
 * output (setup()'s chat_output_keys, at most PK_MAX_OUTPUT_KEYS), or -1. */
static int
output_key(const char *key, Py_ssize_t len)
{
    PyObject *keys = pk_hooks.chat_output_keys;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(keys); i++) {
        Py_ssize_t name_len;
        const char *name = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(keys, i), &name_len); /* cached by CPython */
        if (name != NULL && name_len == len && memcmp(name, key, (size_t)len) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static int read_value(Reader *r, enum role role, int depth, int *truthy, int *token);

/* An object; for EVENT, CHOICE and DELTA, *token is what carries_output
 * concludes from this object's (last) relevant keys. */
static int
read_object(Reader *r, enum role role, int depth, int *truthy, int *token)
{
    int choices = 0, text = 0, delta = 0, typed = 0, output[PK_MAX_OUTPUT_KEYS] = {0};
    r->p++;
    skip_space(r);
    *truthy = 0;
    if (r->p < r->end && *r->p == '}') {
        r->p++;
    }
    else {
        for (;;) {
            const char *key;
            Py_ssize_t len;
            int escaped, value_truthy, value_token;
            skip_space(r);
            if (r->p >= r->end || *r->p != '"' || read_string(r, &key, &len, &escaped) < 0 || escaped) {
                return UNDECIDED;
            }
            skip_space(r);
            if (r->p >= r->end || *r->p != ':') {
                return UNDECIDED;
            }
            r->p++;
            enum role child = NONE;
            if (role == EVENT && key_is(key, len, "choices")) {
                child = CHOICES;
            }
            else if (role == EVENT && key_is(key, len, "type")) {
                typed = 1;
            }
            else if (role == CHOICE && key_is(key, len, "delta")) {
                child = DELTA;
            }
            if (read_value(r, child, depth + 1, &value_truthy, &value_token) < 0) {
                return UNDECIDED;
            }
            *truthy = 1;
            if (child == CHOICES) {
                choices = value_token;
            }
            else if (child == DELTA) {
                delta = value_token;
            }
            else if (role == CHOICE && key_is(key, len, "text")) {
                text = value_truthy;
            }
            else if (role == DELTA) {
                int position = output_key(key, len);
                if (position >= 0) {
                    output[position] = value_truthy; /* a repeated key: the last one wins, as in a dict */
                }
            }
            skip_space(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == '}') {
                r->p++;
                break;
            }
            return UNDECIDED;
        }
    }
    if (role == EVENT) {
        if (typed) {
            return UNDECIDED;
        }
        *token = choices;
    }
    else if (role == CHOICE) {
        *token = text || delta;
    }
    else if (role == DELTA) {
        *token = 0;
        for (int i = 0; i < PK_MAX_OUTPUT_KEYS; i++) {
            *token = *token || output[i];
        }
    }
    return 0;
}

static int
read_array(Reader *r, enum role role, int depth, int *truthy, int *token)
{
    r->p++;
    skip_space(r);
    *truthy = 0;
    if (r->p < r->end && *r->p == ']') {
        r->p++;
        return 0;
    }
    for (;;) {
        int item_truthy, item_token;
        if (read_value(r, role == CHOICES ? CHOICE : NONE, depth + 1, &item_truthy, &item_token) < 0) {
            return UNDECIDED;
        }
        *truthy = 1;
        if (role == CHOICES && item_token) {
            *token = 1;
        }
        skip_space(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == ']') {
            r->p++;
            return 0;
        }
        return UNDECIDED;
    }
}

static int
read_literal(Reader *r, const char *word, int value, int *truthy)
{
    size_t len = strlen(word);
    if ((size_t)(r->end - r->p) < len || memcmp(r->p, word, len) != 0) {
        return UNDECIDED;
    }
    r->p += len;
    *truthy = value;
    return 0;
}

/* One value. *token: for the roles above, whether it carries output (a
 * value of the wrong type, e.g. "choices": 3, carries none). */
static int
read_value(Reader *r, enum role role, int depth, int *truthy, int *token)
{
    *token = 0;
    if (depth > MAX_DEPTH) {
        return UNDECIDED;
    }
    skip_space(r);
    if (r->p >= r->end) {
        return UNDECIDED;
    }
    const char *start;
    Py_ssize_t len;
    int escaped;
    switch (*r->p) {
    case '{':
        return read_object(r, role, depth, truthy, token);
    case '[':
        return read_array(r, role, depth, truthy, token);
    case '"':
        if (read_string(r, &start, &len, &escaped) < 0) {
            return UNDECIDED;
        }
        *truthy = len > 0;
        return 0;
    case 't':
        return read_literal(r, "true", 1, truthy);
    case 'f':
        return read_literal(r, "false", 0, truthy);
    case 'n':
        return read_literal(r, "null", 0, truthy);
    default:
        return read_number(r, truthy);
    }
}

int
pk_json_has_token(const char *data, Py_ssize_t len)
{
    Reader r = {data, data + len};
    int truthy, token;
    if (read_value(&r, EVENT, 0, &truthy, &token) < 0) {
        return UNDECIDED;
    }
    skip_space(&r);
    return r.p == r.end ? token : UNDECIDED;
}
