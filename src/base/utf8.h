/*
 * UTF-8: every text the server hands a client is valid UTF-8, whatever bytes code or a client
 * gave it; an invalid byte becomes U+FFFD.
 */
#ifndef SANDBOX_UTF8_H
#define SANDBOX_UTF8_H

#include <jansson.h>
#include <stddef.h>

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0 when the byte at s starts
 * none (utf8_sanitize replaces such a byte by U+FFFD). */
size_t utf8_char_len(const char *s, size_t n);

/* How many bytes from s on are ASCII (below 0x80), of at most n. */
size_t utf8_ascii_run(const char *s, size_t n);

/* Copies s (n bytes) with every invalid UTF-8 sequence replaced by U+FFFD. Caller frees. */
char *utf8_sanitize(const char *s, size_t n, size_t *outlen);

/* A JSON string of s (n bytes), made valid UTF-8 first. New reference; NULL when out of memory. */
json_t *utf8_json_string(const char *s, size_t n);

#endif
