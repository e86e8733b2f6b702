#include "krelay.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/base/log.h"

#define CHUNK (1u << 20)
#define STDERR_LOG_MAX 4096 /* bytes of the agent's stderr logged, at most */

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

/* What came from the stream, until none is waiting. 1 to go on, 0 when it (or the link) ended. */
static int from_stream(struct krelay *r, size_t *logged)
{
	for (;;) {
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
		if (ch == KEXEC_STDOUT && write_all(r->fd, p, n) < 0)
			return 0; /* the link closed its end */
		if (ch == KEXEC_STDERR && *logged < STDERR_LOG_MAX) {
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

static void *relay(void *arg)
{
	struct krelay *r = arg;
	unsigned char *buf = malloc(CHUNK);
	size_t logged = 0;
	while (buf && from_stream(r, &logged)) {
		struct pollfd p[2] = {{r->x->fd, POLLIN, 0}, {r->fd, POLLIN, 0}};
		int n = poll(p, 2, -1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		if (p[1].revents) {
			ssize_t got = read(r->fd, buf, CHUNK);
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			struct err e = {""};
			if (got <= 0) {
				set_why(r, "the server closed the stream");
				kexec_close_stdin(r->x, &e);
				break;
			}
			if (kexec_send(r->x, KEXEC_STDIN, buf, (size_t)got, &e) < 0) {
				set_why(r, e.msg);
				break;
			}
		}
	}
	free(buf);
	/* The link sees the agent's end. */
	shutdown(r->fd, SHUT_RDWR);
	return NULL;
}

int krelay_start(struct krelay *r, struct kexec *x, int *link_fd, struct err *e)
{
	memset(r, 0, sizeof *r);
	r->fd = -1;
	r->x = x;
	pthread_mutex_init(&r->mu, NULL);
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return err_sys(e, "socketpair");
	r->fd = sv[1];
	int rc = pthread_create(&r->thread, NULL, relay, r);
	if (rc) {
		close(sv[0]);
		close(sv[1]);
		r->fd = -1;
		return err_set(e, "cannot start the stream's relay: %s", strerror(rc));
	}
	r->running = true;
	*link_fd = sv[0];
	return 0;
}

void krelay_stop(struct krelay *r)
{
	if (r->running) {
		/* Its end of the pair reads the link's close; a relay blocked writing sees EPIPE, on
		 * the pair or on the stream (an API server that stopped reading, its buffers full:
		 * nothing else would end that send). The stream is not used after this. */
		shutdown(r->fd, SHUT_RD);
		if (r->x->fd >= 0)
			shutdown(r->x->fd, SHUT_RDWR);
		pthread_join(r->thread, NULL);
		r->running = false;
	}
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
}
