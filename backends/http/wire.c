#include "wire.h"

#include <errno.h>
#include <unistd.h>

static int read_all(int fd, void *p, size_t n)
{
	for (size_t got = 0; got < n;) {
		ssize_t r = read(fd, (char *)p + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return got || r < 0 ? -1 : 0;
		got += (size_t)r;
	}
	return 1;
}

int hw_send(int fd, struct ag_buf *b)
{
	if (ag_frame_end(b) < 0) {
		errno = b->oom ? ENOMEM : EMSGSIZE;
		return -1;
	}
	for (size_t off = 0; off < b->len;) {
		ssize_t w = write(fd, b->p + off, b->len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0)
			return -1;
		off += (size_t)w;
	}
	return 0;
}

int hw_recv(int fd, struct ag_buf *b, uint8_t *type, struct ag_cur *c)
{
	unsigned char hdr[5];
	int r = read_all(fd, hdr, 4);
	if (r <= 0)
		return r;
	uint32_t n = ag_le32(hdr);
	if (n < 1 || n > AG_MAX_FRAME || read_all(fd, hdr + 4, 1) <= 0)
		return -1;
	b->len = 0;
	b->oom = 0;
	ag_put(b, NULL, n - 1);
	if (b->oom || (n > 1 && read_all(fd, b->p, n - 1) <= 0))
		return -1;
	*type = hdr[4];
	*c = (struct ag_cur){b->p, n - 1, 0};
	return 1;
}
