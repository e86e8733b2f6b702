/*
 * Standard base64 (RFC 4648 section 4), both ways.
 */
#ifndef SANDBOX_BASE64_H
#define SANDBOX_BASE64_H

#include <stddef.h>

/* The base64 of n bytes, NUL-terminated, with padding; *outlen (may be NULL) its length.
 * Caller frees; NULL when out of memory. */
char *b64_encode(const void *data, size_t n, size_t *outlen);

/* Decodes s (n chars; line breaks and spaces skipped, padding optional) into out, which holds
 * at least n / 4 * 3 + 3 bytes; out NULL only counts. The decoded length, or -1 when s is not
 * base64. */
long b64_decode(const char *s, size_t n, unsigned char *out);

#endif
