/*
 * The agent's stdio carrying more than one stream (proto.h's AG_MUX): a thread of the agent's
 * own joins stdin and stdout, now in chunks, to one end of a socket pair per stream, whose
 * other ends the agent then uses as it would the sockets of a local server: the main
 * connection, and the background processes' channel.
 *
 * A thread and not a process: a call's end kills every process of the sandbox but the agent
 * (kill(-1) from its PID 1 on Kubernetes), and the streams must outlive calls. It only moves
 * bytes with read, write and poll on descriptors it alone uses (no lock, no allocation past
 * its start), so a fork of the agent's main thread finds nothing of it half done.
 *
 * Neither way waits on the other: what comes on stdin for a stream whose socket is full is
 * kept in memory (at most one frame and a chunk more a stream: the server sends a stream's
 * next request only once its answer came, so no more is ever pending), and stdout is written
 * as it drains. A peer that breaks the format, or sends past that bound, ends the agent's link.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "agent.h"

/* What one stream has pending toward its socket. */
struct queue {
	unsigned char *p;
	size_t off, len, cap;
};

struct mux {
	int in, out;                   /* stdin and stdout (the link) */
	int fd[AG_MUX_STREAMS];        /* the thread's ends of the pairs; -1 once closed */
	bool closed[AG_MUX_STREAMS];   /* the server said the stream ended (a chunk of 0 bytes) */
	struct queue q[AG_MUX_STREAMS];
	struct ag_chunks ch;           /* stdin's chunks, as far as they came */
	unsigned char *ob;             /* one chunk toward stdout: header and payload */
	size_t ob_off, ob_len;
	uint32_t next;                 /* the stream read first next time (each in turn) */
};

/* Room for n more bytes in q; false past the bound. */
static bool q_room(struct queue *q, size_t n)
{
	if (q->off == q->len)
		q->off = q->len = 0;
	if (q->len + n <= q->cap)
		return true;
	if (q->off) {
		memmove(q->p, q->p + q->off, q->len - q->off);
		q->len -= q->off;
		q->off = 0;
		if (q->len + n <= q->cap)
			return true;
	}
	size_t want = q->len + n;
	if (want > AG_MAX_FRAME + AG_MUX_CHUNK)
		return false;
	size_t cap = q->cap ? q->cap : AG_MUX_CHUNK;
	while (cap < want)
		cap *= 2;
	unsigned char *p = realloc(q->p, cap);
	if (!p)
		return false;
	q->p = p;
	q->cap = cap;
	return true;
}

/* Moves what stream s has pending into its socket, as far as it takes without waiting; when
 * that socket is gone, what is pending for it is dropped. */
static void q_flush(struct mux *m, uint32_t s)
{
	struct queue *q = &m->q[s];
	while (q->off < q->len && m->fd[s] >= 0) {
		ssize_t w = send(m->fd[s], q->p + q->off, q->len - q->off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (w < 0) {
			q->off = q->len = 0;
			return;
		}
		q->off += (size_t)w;
	}
	if (q->off == q->len && m->closed[s] && m->fd[s] >= 0)
		shutdown(m->fd[s], SHUT_WR);
}

/* Takes n bytes of stdin: chunk headers and payloads. 0, or -1 when the format broke. */
static int take(struct mux *m, const unsigned char *b, size_t n)
{
	uint32_t sid;
	const unsigned char *d;
	size_t k;
	int rc;
	while ((rc = ag_chunks_next(&m->ch, &b, &n, &sid, &d, &k)) == 1) {
		if (m->closed[sid])
			return -1;
		if (k == 0) {
			/* The server ended the stream: its socket is shut once what is pending is in. */
			m->closed[sid] = true;
			q_flush(m, sid);
			continue;
		}
		struct queue *q = &m->q[sid];
		if (m->fd[sid] < 0)
			continue;
		if (!q_room(q, k))
			return -1;
		memcpy(q->p + q->len, d, k);
		q->len += k;
	}
	return rc < 0 ? -1 : 0;
}

/* Reads what stream s has for the server into one chunk. 1 with a chunk, 0 with none (it ended:
 * the chunk of 0 bytes that says so), -1 when nothing was there. */
static int fill(struct mux *m, uint32_t s)
{
	ssize_t r;
	do
		r = recv(m->fd[s], m->ob + AG_MUX_HDR, AG_MUX_CHUNK, MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return -1;
	if (r < 0)
		r = 0;
	ag_put_le32(m->ob, s);
	ag_put_le32(m->ob + 4, (uint32_t)r);
	m->ob_off = 0;
	m->ob_len = AG_MUX_HDR + (size_t)r;
	if (r == 0) {
		/* The agent closed its end: said once, then nothing more is read from it. */
		close(m->fd[s]);
		m->fd[s] = -1;
		m->q[s].off = m->q[s].len = 0;
	}
	return r > 0;
}

static void *mux_main(void *arg)
{
	struct mux *m = arg;
	static unsigned char ib[AG_MUX_CHUNK];
	for (;;) {
		struct pollfd p[2 + AG_MUX_STREAMS];
		int n = 0, at_in = -1, at_out = -1, at[AG_MUX_STREAMS];
		if (m->ob_off < m->ob_len) {
			at_out = n;
			p[n++] = (struct pollfd){m->out, POLLOUT, 0};
		}
		/* stdin is always read: what a full socket cannot take yet is kept (take, within
		 * its bound), so a full socket holds up only its own stream. */
		at_in = n;
		p[n++] = (struct pollfd){m->in, POLLIN, 0};
		for (uint32_t s = 0; s < AG_MUX_STREAMS; s++) {
			at[s] = -1;
			if (m->fd[s] < 0)
				continue;
			short ev = 0;
			if (m->ob_off >= m->ob_len)
				ev |= POLLIN;
			if (m->q[s].off < m->q[s].len)
				ev |= POLLOUT;
			if (ev) {
				at[s] = n;
				p[n++] = (struct pollfd){m->fd[s], ev, 0};
			}
		}
		if (poll(p, (nfds_t)n, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (at_out >= 0 && p[at_out].revents) {
			ssize_t w = write(m->out, m->ob + m->ob_off, m->ob_len - m->ob_off);
			if (w < 0 && errno != EINTR && errno != EAGAIN)
				break; /* the server is gone */
			if (w > 0)
				m->ob_off += (size_t)w;
		}
		/* A stream whose socket is gone drops what comes for it from now on (q_flush). */
		for (uint32_t s = 0; s < AG_MUX_STREAMS; s++)
			if (at[s] >= 0 && (p[at[s]].revents & (POLLOUT | POLLERR | POLLHUP)))
				q_flush(m, s);
		if (m->ob_off >= m->ob_len) {
			for (uint32_t k = 0; k < AG_MUX_STREAMS; k++) {
				uint32_t s = (m->next + k) % AG_MUX_STREAMS;
				if (at[s] < 0 || !(p[at[s]].revents & (POLLIN | POLLHUP | POLLERR)) || m->fd[s] < 0)
					continue;
				if (fill(m, s) >= 0) {
					m->next = (s + 1) % AG_MUX_STREAMS;
					break;
				}
			}
		}
		if (p[at_in].revents) {
			ssize_t r = read(m->in, ib, sizeof ib);
			if (r < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (r <= 0 || take(m, ib, (size_t)r) < 0)
				break; /* the server ended the link, or broke its format */
			for (uint32_t s = 0; s < AG_MUX_STREAMS; s++)
				q_flush(m, s);
		}
	}
	/* The link is over: every stream sees its end, the main one ends the agent. */
	for (uint32_t s = 0; s < AG_MUX_STREAMS; s++)
		if (m->fd[s] >= 0)
			shutdown(m->fd[s], SHUT_RDWR);
	return NULL;
}

static struct mux m;

int mux_prepare(int in, int to, int fds[AG_MUX_STREAMS])
{
	int pairs[AG_MUX_STREAMS][2];
	unsigned made = 0;
	for (; made < AG_MUX_STREAMS; made++)
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pairs[made]) < 0)
			goto fail;
	if (!(m.ob = malloc(AG_MUX_HDR + AG_MUX_CHUNK)))
		goto fail;
	m.in = in;
	m.out = to;
	for (unsigned s = 0; s < AG_MUX_STREAMS; s++) {
		m.fd[s] = pairs[s][1];
		fds[s] = pairs[s][0];
	}
	return 0;
fail:;
	int err = errno;
	for (unsigned s = 0; s < made; s++) {
		close(pairs[s][0]);
		close(pairs[s][1]);
	}
	errno = err;
	return -1;
}

int mux_go(void)
{
	if (fcntl(m.out, F_SETFL, fcntl(m.out, F_GETFL) | O_NONBLOCK) < 0 ||
	    fcntl(m.in, F_SETFL, fcntl(m.in, F_GETFL) | O_NONBLOCK) < 0)
		return -1;
	/* The thread takes no signal: the agent's are read through its signalfd, which a thread
	 * that could take one would only race. */
	sigset_t all, was;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &was);
	pthread_t t;
	pthread_attr_t a;
	int rc = pthread_attr_init(&a);
	if (!rc)
		rc = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (!rc)
		rc = pthread_create(&t, &a, mux_main, &m);
	pthread_attr_destroy(&a);
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (rc) {
		errno = rc;
		return -1;
	}
	return 0;
}
