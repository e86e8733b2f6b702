/*
 * Reading requests: one JSON-RPC message per line of stdin, each line bounded (--max-message);
 * a longer line is reported once and dropped as it comes, without being buffered.
 */
#ifndef SANDBOX_READER_H
#define SANDBOX_READER_H

#include <stdbool.h>
#include <stddef.h>

struct reader {
	int fd;
	size_t max;          /* longest line accepted, without its newline */
	char *buf;
	size_t len, cap;
	bool skipping;       /* inside a line that is too long: drop until its newline */
	bool eof;
	size_t consumed;      /* bytes of the line handed out last, dropped at the next call */
	size_t scanned;       /* bytes at the start of buf known to hold no newline */
};

enum reader_got { READER_LINE, READER_TOO_LONG, READER_NEED_MORE, READER_EOF };

int reader_init(struct reader *r, int fd, size_t max);
void reader_free(struct reader *r);

/* Reads what is available (one read(2): call when fd is readable). 0, or -1 on a read error. */
int reader_fill(struct reader *r);

/* Takes the next line out of the buffer. On READER_LINE, *line (borrowed until the next call)
 * has no "\n" or "\r\n"; blank lines are skipped. READER_TOO_LONG is reported once per line. */
enum reader_got reader_next(struct reader *r, const char **line, size_t *len);

#endif
