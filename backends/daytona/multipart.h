/*
 * Reading a multipart/form-data answer: the toolbox's files/bulk-download, one part per file
 * asked for (name "file", filename its path) or per file that could not be read (name
 * "error", a JSON error). The boundary is taken from the body's first line, so no header is
 * needed. A part's bytes are its Content-Length when it has one (what the daemon sends: a
 * file may hold anything, the boundary too), else those up to the next boundary. Nothing is
 * copied: parts point into the body.
 */
#ifndef SANDBOX_MULTIPART_H
#define SANDBOX_MULTIPART_H

#include <stddef.h>

struct multipart_part {
	char name[64];           /* Content-Disposition's name; "" when none */
	char filename[4096];     /* its filename, unescaped; "" when none */
	const char *data;        /* borrowed from the body */
	size_t len;
};

/* Calls fn(ctx, part) for each part of body, in order, until fn returns non-zero, which is
 * returned. 0 when every part was read, -1 when the body is not multipart or a part is cut
 * short or malformed (the parts before it were given). */
int multipart_each(const char *body, size_t len, int (*fn)(void *ctx, const struct multipart_part *p), void *ctx);

#endif
