#include "krelay.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../agent/proto.h"
#include "../../src/base/log.h"

#define CHUNK (1u << 20)
#define STDERR_LOG_MAX 4096 /* bytes of the agent's stderr logged, at most */
#define ROUND_MAX 16        /* messages taken from the stream before the pairs' turn */

static void set_why(struct krelay *r, const char *why)
{
	pthread_mutex_lock(&r->mu);
	if (!r->why[0])
		snprintf(r->why, sizeof r->why, "%s", why);
	pthread_mutex_unlock(&r->mu);
}

void krelay_why(struct krelay *r, char *out, size_t n)
{
	pthread_mutex_lock(&r->mu);
	snprintf(out, n, "%s", r->why);
	pthread_mutex_unlock(&r->mu);
}

static int write_all(int fd, const unsigned char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static bool in_chunks(struct krelay *r)
{
	pthread_mutex_lock(&r->mu);
	bool m = r->mux;
	pthread_mutex_unlock(&r->mu);
	return m;
}

/* What came from the stream, until none is waiting or ROUND_MAX messages were taken (*more:
 * then more may be waiting, and the pairs get their turn before it: a stream that never stops
 * coming holds up no process request, no AG_KILL). 1 to go on, 0 when it (or the link) ended. */
static int from_stream(struct krelay *r, size_t *logged, bool *more)
{
	*more = false;
	for (int taken = 0;; taken++) {
		if (taken == ROUND_MAX) {
			*more = true;
			return 1;
		}
		unsigned ch;
		const unsigned char *p;
		size_t n;
		struct err e = {""};
		int rc = kexec_recv(r->x, 0, &ch, &p, &n, &e);
		if (rc == KEXEC_TIMEOUT)
			return 1;
		if (rc == 0) {
			char w[64];
			snprintf(w, sizeof w, "the stream ended (close code %d)", r->x->close_code);
			set_why(r, w);
			return 0;
		}
		if (rc < 0) {
			set_why(r, e.msg);
			return 0;
		}
		const char *how;
		if (ch == KEXEC_STDOUT && in_chunks(r) && !chunk_sink_take(&r->sink, p, n, &how)) {
			if (*how)
				set_why(r, how);
			return 0;
		}
		else if (ch == KEXEC_STDOUT && !in_chunks(r) && write_all(r->fd, p, n) < 0) {
			if (r->own)
				set_why(r, "the connection's other side ended");
			return 0; /* the link closed its end */
		}
		/* A taker's (own) is not logged: its binary is in the code's reach. */
		if (ch == KEXEC_STDERR && !r->own && *logged < STDERR_LOG_MAX) {
			/* Its first line, bounded: p is not NUL-terminated. */
			size_t k = n < STDERR_LOG_MAX - *logged ? n : STDERR_LOG_MAX - *logged;
			const unsigned char *nl = memchr(p, '\n', k);
			*logged += k;
			log_msg(LOG_WARNING, "kubernetes: the agent says: %.*s", (int)(nl ? (size_t)(nl - p) : k), (const char *)p);
		}
		if (ch == KEXEC_STATUS) {
			char why[200] = "", w[256];
			int code = kexec_exit_code(p, n, why, sizeof why);
			if (code >= 0)
				snprintf(w, sizeof w, "the agent ended with exit status %d", code);
			else
				snprintf(w, sizeof w, "the agent ended: %s", why);
			set_why(r, w);
			return 0;
		}
	}
}

/* One read of the pair's end fd, sent on as is or, in chunks, as stream sid's. 1 to go on, 0 when
 * the pair ended (got: 0) or the send failed. */
static int to_stream(struct krelay *r, int fd, uint32_t sid, unsigned char *buf, ssize_t *got)
{
	bool mux = in_chunks(r);
	size_t at = mux ? AG_MUX_HDR : 0;
	*got = read(fd, buf + at, mux ? AG_MUX_CHUNK : CHUNK);
	if (*got < 0 && (errno == EINTR || errno == EAGAIN))
		return 1;
	if (*got < 0)
		*got = 0;
	if (*got == 0 && !mux)
		return 0;
	struct err e = {""};
	if (mux) {
		ag_put_le32(buf, sid);
		ag_put_le32(buf + 4, (uint32_t)*got);
	}
	if (kexec_send(r->x, KEXEC_STDIN, buf, at + (size_t)*got, &e) < 0) {
		set_why(r, e.msg);
		return 0;
	}
	return 1;
}

static void *relay(void *arg)
{
	struct krelay *r = arg;
	unsigned char *buf = malloc(CHUNK + AG_MUX_HDR);
	size_t logged = 0;
	bool c_in = true; /* the channel's end is read (until the server closes it) */
	bool fd_in = true; /* fd is read (until its side ends: then, given, the stream is read on) */
	bool more;
	while (buf && from_stream(r, &logged, &more)) {
		struct pollfd p[3] = {{r->x->fd, POLLIN, 0}, {fd_in ? r->fd : -1, POLLIN, 0},
				      {c_in ? r->cfd : -1, POLLIN, 0}};
		int n = poll(p, 3, more ? 0 : -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			set_why(r, "the relay could not wait (poll failed)");
			break;
		}
		ssize_t got;
		if (p[1].revents) {
			if (!to_stream(r, r->fd, 0, buf, &got)) {
				if (r->own && got == 0) {
					/* Its side ended: so does the command's stdin, and what the command
					 * still says is read to the stream's end. */
					struct err e = {""};
					int rc = kexec_close_stdin(r->x, &e);
					if (rc == 1)
						kexec_close_send(r->x);
					else if (rc < 0) {
						set_why(r, e.msg);
						break;
					}
					fd_in = false;
					continue;
				}
				break;
			}
			if (got == 0) {
				struct err e = {""};
				set_why(r, "the server closed the stream");
				kexec_close_stdin(r->x, &e);
				break;
			}
		}
		/* Only ever readable once handed out (krelay_mux), so in chunks; its end is told to
		 * the agent as a chunk of 0 bytes. */
		if (p[2].revents) {
			if (!to_stream(r, r->cfd, 1, buf, &got))
				break;
			if (got == 0)
				c_in = false;
		}
	}
	if (!buf)
		set_why(r, "out of memory");
	free(buf);
	/* The link sees the agent's end. */
	shutdown(r->fd, SHUT_RDWR);
	shutdown(r->cfd, SHUT_RDWR);
	return NULL;
}

void krelay_init(struct krelay *r)
{
	memset(r, 0, sizeof *r);
	r->fd = r->cfd = r->cfd_peer = -1;
}

int krelay_start_on(struct krelay *r, struct kexec *x, int fd, struct err *e)
{
	krelay_init(r);
	r->x = x;
	pthread_mutex_init(&r->mu, NULL);
	r->fd = fd;
	r->own = true;
	chunk_sink_init(&r->sink, (int[]){r->fd, r->cfd});
	int rc = pthread_create(&r->thread, NULL, relay, r);
	if (rc) {
		r->fd = -1;
		close(fd);
		return err_set(e, "cannot start the stream's relay: %s", strerror(rc));
	}
	r->running = true;
	return 0;
}

int krelay_start(struct krelay *r, struct kexec *x, int *link_fd, struct err *e)
{
	krelay_init(r);
	r->x = x;
	pthread_mutex_init(&r->mu, NULL);
	r->cfd = r->cfd_peer = -1;
	int sv[2], cv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return err_sys(e, "socketpair");
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cv) < 0) {
		err_sys(e, "socketpair");
		close(sv[0]);
		close(sv[1]);
		return -1;
	}
	r->fd = sv[1];
	r->cfd = cv[1];
	r->cfd_peer = cv[0];
	chunk_sink_init(&r->sink, (int[]){r->fd, r->cfd});
	int rc = pthread_create(&r->thread, NULL, relay, r);
	if (rc) {
		close(sv[0]);
		close(sv[1]);
		close(cv[0]);
		close(cv[1]);
		r->fd = r->cfd = r->cfd_peer = -1;
		return err_set(e, "cannot start the stream's relay: %s", strerror(rc));
	}
	r->running = true;
	*link_fd = sv[0];
	return 0;
}

void krelay_mux(struct krelay *r, int *chan_fd)
{
	pthread_mutex_lock(&r->mu);
	r->mux = true;
	*chan_fd = r->cfd_peer;
	r->cfd_peer = -1;
	pthread_mutex_unlock(&r->mu);
}

void krelay_stop(struct krelay *r)
{
	if (r->running) {
		/* Its end of the pair reads the link's close; a relay blocked writing sees EPIPE, on
		 * the pair or on the stream (an API server that stopped reading, its buffers full:
		 * nothing else would end that send). The stream is not used after this. */
		shutdown(r->fd, r->own ? SHUT_RDWR : SHUT_RD); /* a send to a given fd ends too */
		shutdown(r->cfd, SHUT_RDWR);
		if (r->x->fd >= 0)
			shutdown(r->x->fd, SHUT_RDWR);
		pthread_join(r->thread, NULL);
		r->running = false;
	}
	if (r->fd >= 0)
		close(r->fd);
	if (r->cfd >= 0)
		close(r->cfd);
	if (r->cfd_peer >= 0)
		close(r->cfd_peer);
	r->fd = r->cfd = r->cfd_peer = -1;
}
