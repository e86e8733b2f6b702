#include "reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define READ_CHUNK 65536

int reader_init(struct reader *r, int fd, size_t max)
{
	memset(r, 0, sizeof *r);
	r->fd = fd;
	r->max = max;
	r->cap = READ_CHUNK * 2;
	r->buf = malloc(r->cap);
	return r->buf ? 0 : -1;
}

void reader_free(struct reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

int reader_fill(struct reader *r)
{
	/* Room for one more chunk; the buffer never holds more than max + a chunk. */
	if (r->cap - r->len < READ_CHUNK) {
		size_t nc = r->cap * 2;
		char *nb = realloc(r->buf, nc);
		if (!nb)
			return -1;
		r->buf = nb;
		r->cap = nc;
	}
	ssize_t n;
	do
		n = read(r->fd, r->buf + r->len, READ_CHUNK);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? 0 : -1;
	if (n == 0)
		r->eof = true;
	r->len += (size_t)n;
	return 0;
}

enum reader_got reader_next(struct reader *r, const char **line, size_t *len)
{
	if (r->consumed) {
		memmove(r->buf, r->buf + r->consumed, r->len - r->consumed);
		r->len -= r->consumed;
		r->consumed = 0;
		r->scanned = 0;
	}
	for (;;) {
		/* A long line comes a chunk at a time: look for its newline in the new bytes only,
		 * not again from the start each time (which was quadratic in the line's length). */
		char *nl = memchr(r->buf + r->scanned, '\n', r->len - r->scanned);
		r->scanned = nl ? 0 : r->len;
		if (r->skipping) {
			if (!nl) {
				r->len = 0;
				r->scanned = 0;
				return r->eof ? READER_EOF : READER_NEED_MORE;
			}
			r->consumed = (size_t)(nl - r->buf) + 1;
			r->skipping = false;
			memmove(r->buf, r->buf + r->consumed, r->len - r->consumed);
			r->len -= r->consumed;
			r->consumed = 0;
			continue;
		}
		if (!nl) {
			/* A "\r" waiting for its "\n" does not count against the limit. */
			if (r->len > r->max + 1 || (r->len == r->max + 1 && r->buf[r->len - 1] != '\r')) {
				/* Too long already: report now, drop the rest as it comes. */
				r->skipping = true;
				r->len = 0;
				r->scanned = 0;
				return READER_TOO_LONG;
			}
			if (r->eof && r->len) {
				/* A last line without its newline still counts. */
				nl = r->buf + r->len;
			} else {
				return r->eof ? READER_EOF : READER_NEED_MORE;
			}
		}
		size_t l = (size_t)(nl - r->buf);
		r->consumed = l < r->len ? l + 1 : l;
		if (l && r->buf[l - 1] == '\r')
			l--;
		if (l > r->max)
			return READER_TOO_LONG;
		/* Blank lines (only whitespace) are tolerated and skipped. */
		size_t i = 0;
		while (i < l && (r->buf[i] == ' ' || r->buf[i] == '\t' || r->buf[i] == '\r'))
			i++;
		if (i == l) {
			memmove(r->buf, r->buf + r->consumed, r->len - r->consumed);
			r->len -= r->consumed;
			r->consumed = 0;
			continue;
		}
		*line = r->buf;
		*len = l;
		return READER_LINE;
	}
}
