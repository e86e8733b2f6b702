/*
 * JSON text of a jansson value, byte for byte what json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY)
 * writes, made for the long strings of results: a run of characters that need no escape is
 * copied or counted whole, where jansson goes a character at a time (a 1 MB result was most of
 * a call's time). Strings in jansson values are valid UTF-8, so only '"', '\\' and control
 * characters are escaped, as jansson escapes them. Reals are written by jansson itself.
 */
#ifndef SANDBOX_JSONW_H
#define SANDBOX_JSONW_H

#include <jansson.h>
#include <stddef.h>

#include "buf.h"

/* A JSON number jansson cannot hold (an integer past 64 bits, a real past a double's range),
 * kept as the text the client wrote it in, so that an id or a progress token goes back digit
 * for digit: jsonw writes it as that number. It is a jansson string whose first byte is 0xFF,
 * which no JSON text can put in a string (jansson's strings are valid UTF-8): no string a
 * client sends is ever taken for one. New reference; NULL when out of memory. */
json_t *jsonw_number(const char *text, size_t n);
/* The number's text (borrowed) when j is a jsonw_number, else NULL; *n its length. */
const char *jsonw_number_text(const json_t *j, size_t *n);

/* Appends j's JSON text to b (b->oom when memory ran out). */
void jsonw_dump(const json_t *j, struct buf *b);

/* The length of j's JSON text, without writing it. */
size_t jsonw_size(const json_t *j);

/* The length of the JSON string text of s (n bytes of valid UTF-8), quotes left out. */
size_t jsonw_string_size(const char *s, size_t n);

#endif
