/*
 * A growable byte buffer, always NUL-terminated. Once memory runs out it stays out of memory
 * (oom) and every later add does nothing, so a caller adds freely and checks once at the end.
 */
#ifndef SANDBOX_BUF_H
#define SANDBOX_BUF_H

#include <stdbool.h>
#include <stddef.h>

struct buf {
	char *p;           /* NULL until something is added; owned */
	size_t len, cap;
	bool oom;
};

void buf_add(struct buf *b, const void *d, size_t n);
/* Makes room for n more bytes at once, so a buffer whose size is known is not grown step by
 * step (each step a copy of what it holds). */
void buf_reserve(struct buf *b, size_t n);
void buf_str(struct buf *b, const char *s);
void buf_fmt(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The bytes (caller frees; "" when nothing was added) and their length, leaving b empty; NULL
 * when memory ran out (b is freed then). */
char *buf_take(struct buf *b, size_t *len);

void buf_free(struct buf *b);

#endif
