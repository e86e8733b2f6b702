/*
 * Numbers jansson cannot hold: an integer past 64 bits (2^63, 2^64, 123456789012345678901234567890)
 * or a real past a double's range (1e400). jansson refuses the whole message for one, so the
 * request would get a parse error with a null id and never its answer. Read here, each becomes
 * a jsonw_number (base/jsonw.h) that keeps its text: an id or a progress token goes back to the
 * client digit for digit as sent. Anywhere else in a message such a number is read as a double
 * (the nearest one), as most JSON readers do; one past a double's range is refused there.
 */
#ifndef SANDBOX_BIGNUM_H
#define SANDBOX_BIGNUM_H

#include <jansson.h>
#include <stddef.h>

/* json_loadb (JSON_ALLOW_NUL | JSON_DECODE_ANY) of s, with numbers jansson cannot hold kept as
 * jsonw_numbers. New reference, or NULL with *je set. */
json_t *bignum_loadb(const char *s, size_t len, json_error_t *je);

/* Within one message: keeps jsonw_numbers where they are echoed (id, params.requestId,
 * params._meta.progressToken) and turns every other one into a real. 0; or -1, with why
 * (n bytes) saying which number, when one has no double (it is past the range). */
int bignum_settle(json_t *msg, char *why, size_t n);

#endif
