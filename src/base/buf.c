#include "buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Room for n more bytes and the NUL: false once memory ran out. */
static bool room(struct buf *b, size_t n, bool exact)
{
	if (b->oom)
		return false;
	if (b->len + n + 1 > b->cap) {
		size_t nc = exact ? b->len + n + 1 : b->cap ? b->cap : 256;
		while (nc < b->len + n + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np) {
			b->oom = true;
			return false;
		}
		b->p = np;
		b->cap = nc;
	}
	return true;
}

void buf_reserve(struct buf *b, size_t n)
{
	if (room(b, n, true) && !b->len)
		b->p[0] = '\0';
}

void buf_add(struct buf *b, const void *d, size_t n)
{
	if (!room(b, n, false))
		return;
	if (n)
		memcpy(b->p + b->len, d, n);
	b->len += n;
	b->p[b->len] = '\0';
}

void buf_str(struct buf *b, const char *s)
{
	buf_add(b, s, strlen(s));
}

void buf_fmt(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	char *s = NULL;
	int n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		b->oom = true;
	else
		buf_add(b, s, (size_t)n);
	free(s);
}

char *buf_take(struct buf *b, size_t *len)
{
	if (!b->oom && !b->p)
		buf_add(b, "", 0);
	char *p = b->oom ? NULL : b->p;
	if (len)
		*len = p ? b->len : 0;
	if (!p)
		free(b->p);
	*b = (struct buf){0};
	return p;
}

void buf_free(struct buf *b)
{
	free(b->p);
	*b = (struct buf){0};
}
