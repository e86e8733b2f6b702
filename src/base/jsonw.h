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

/* Appends j's JSON text to b (b->oom when memory ran out). */
void jsonw_dump(const json_t *j, struct buf *b);

/* The length of j's JSON text, without writing it. */
size_t jsonw_size(const json_t *j);

/* The length of the JSON string text of s (n bytes of valid UTF-8), quotes left out. */
size_t jsonw_string_size(const char *s, size_t n);

#endif
