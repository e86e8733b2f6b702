#include "wire.h"

#include <errno.h>

int hw_send(int fd, struct ag_buf *b)
{
	if (ag_frame_end(b) < 0) {
		errno = b->oom ? ENOMEM : EMSGSIZE;
		return -1;
	}
	return ag_write_full(fd, b->p, b->len);
}

int hw_recv(int fd, struct ag_buf *b, uint8_t *type, struct ag_cur *c)
{
	unsigned char hdr[5];
	int r = ag_read_full(fd, hdr, 4);
	if (r <= 0)
		return r;
	uint32_t n = ag_le32(hdr);
	if (n < 1 || n > AG_MAX_FRAME || ag_read_full(fd, hdr + 4, 1) <= 0)
		return -1;
	b->len = 0;
	b->oom = 0;
	ag_put(b, NULL, n - 1);
	if (b->oom || (n > 1 && ag_read_full(fd, b->p, n - 1) <= 0))
		return -1;
	*type = hdr[4];
	*c = (struct ag_cur){b->p, n - 1, 0};
	return 1;
}
