#include "stdiorelay.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_MAX (64u << 10)

static void set_why(struct stdiorelay *r, const char *why)
{
	pthread_mutex_lock(&r->mu);
	if (!r->why[0])
		snprintf(r->why, sizeof r->why, "%s", why);
	pthread_mutex_unlock(&r->mu);
}

void stdiorelay_why(struct stdiorelay *r, char *out, size_t n)
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

void chunk_sink_init(struct chunk_sink *k, const int fd[AG_MUX_STREAMS])
{
	memset(k, 0, sizeof *k);
	for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
		k->fd[sid] = fd[sid];
	k->chan_open = true;
}

int chunk_sink_take(struct chunk_sink *k, const unsigned char *p, size_t n, const char **why)
{
	uint32_t sid;
	const unsigned char *d;
	size_t len;
	int rc;
	*why = "";
	while ((rc = ag_chunks_next(&k->ch, &p, &n, &sid, &d, &len)) == 1) {
		if (sid == 0 && len == 0) {
			*why = "the agent ended its side of the stream";
			return 0;
		}
		if (sid == 0 && write_all(k->fd[0], d, len) < 0)
			return 0; /* the link closed its end */
		if (sid == 1 && len == 0 && k->chan_open)
			shutdown(k->fd[1], SHUT_WR);
		if (sid == 1 && (len == 0 || (k->chan_open && write_all(k->fd[1], d, len) < 0)))
			k->chan_open = false;
	}
	if (rc < 0) {
		*why = "the agent's stream broke its format";
		return 0;
	}
	return 1;
}

/* What came from the agent: the engine's frames, and the chunks in their payload. */
struct in_state {
	unsigned char eh[8];       /* an engine frame's header, as far as it came */
	size_t eh_len;
	uint32_t e_left;           /* that frame's payload still to come */
	struct chunk_sink sink;
};

/* n bytes read from the stream: the engine's frames taken apart. 1 to go on, 0 when it ended. */
static int from_stream(struct stdiorelay *r, struct in_state *s, const unsigned char *p, size_t n)
{
	while (n) {
		if (s->e_left == 0) {
			size_t t = sizeof s->eh - s->eh_len < n ? sizeof s->eh - s->eh_len : n;
			memcpy(s->eh + s->eh_len, p, t);
			s->eh_len += t;
			p += t;
			n -= t;
			if (s->eh_len < sizeof s->eh)
				return 1;
			s->eh_len = 0;
			if (s->eh[0] != 1 || s->eh[1] || s->eh[2] || s->eh[3]) {
				set_why(r, "the container engine sent a malformed stream frame");
				return 0;
			}
			s->e_left = (uint32_t)s->eh[4] << 24 | (uint32_t)s->eh[5] << 16 | (uint32_t)s->eh[6] << 8 | s->eh[7];
			continue;
		}
		size_t k = s->e_left < n ? s->e_left : n;
		const char *why;
		if (!chunk_sink_take(&s->sink, p, k, &why)) {
			if (*why)
				set_why(r, why);
			return 0;
		}
		p += k;
		n -= k;
		s->e_left -= (uint32_t)k;
	}
	return 1;
}

static void *relay(void *arg)
{
	struct stdiorelay *r = arg;
	unsigned char *buf = malloc(AG_MUX_HDR + (READ_MAX > AG_MUX_CHUNK ? READ_MAX : AG_MUX_CHUNK));
	struct in_state s = {0};
	chunk_sink_init(&s.sink, r->pfd);
	if (!buf) {
		set_why(r, "out of memory");
		goto out;
	}
	bool chan_in = true; /* the channel's pair is read (until the server closes it) */
	for (;;) {
		struct pollfd p[3] = {{r->fd, POLLIN, 0}, {r->pfd[0], POLLIN, 0}, {chan_in ? r->pfd[1] : -1, POLLIN, 0}};
		if (poll(p, 3, -1) < 0) {
			if (errno == EINTR)
				continue;
			set_why(r, "poll failed");
			break;
		}
		if (p[0].revents) {
			ssize_t got = read(r->fd, buf, READ_MAX);
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0) {
				set_why(r, got == 0 ? "the stream ended" : strerror(errno));
				break;
			}
			if (!from_stream(r, &s, buf, (size_t)got))
				break;
		}
		for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++) {
			if (!p[1 + sid].revents)
				continue;
			ssize_t got = read(r->pfd[sid], buf + AG_MUX_HDR, AG_MUX_CHUNK);
			if (got < 0 && (errno == EINTR || errno == EAGAIN))
				continue;
			if (got <= 0 && sid == 0) {
				/* The link closed: the agent's stdin ends (StdinOnce), and with it the agent. */
				set_why(r, "the server closed the stream");
				shutdown(r->fd, SHUT_WR);
				goto out;
			}
			if (got <= 0) {
				got = 0;
				chan_in = false;
			}
			ag_put_le32(buf, sid);
			ag_put_le32(buf + 4, (uint32_t)got);
			if (write_all(r->fd, buf, AG_MUX_HDR + (size_t)got) < 0) {
				set_why(r, "the stream took no more");
				goto out;
			}
		}
	}
out:
	free(buf);
	/* The link sees the agent's end. */
	for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
		shutdown(r->pfd[sid], SHUT_RDWR);
	return NULL;
}

void stdiorelay_init(struct stdiorelay *r)
{
	memset(r, 0, sizeof *r);
	r->fd = -1;
	for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
		r->pfd[sid] = -1;
	pthread_mutex_init(&r->mu, NULL);
}

int stdiorelay_start(struct stdiorelay *r, int fd, int link_fd[AG_MUX_STREAMS], struct err *e)
{
	stdiorelay_init(r);
	r->fd = fd;
	int made = 0, sv[AG_MUX_STREAMS][2];
	for (; made < (int)AG_MUX_STREAMS; made++)
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv[made]) < 0)
			break;
	int rc = made == (int)AG_MUX_STREAMS ? 0 : errno;
	if (!rc) {
		for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
			r->pfd[sid] = sv[sid][1];
		rc = pthread_create(&r->thread, NULL, relay, r);
	}
	if (rc) {
		for (int i = 0; i < made; i++) {
			close(sv[i][0]);
			close(sv[i][1]);
		}
		stdiorelay_init(r);
		close(fd);
		return err_set(e, "cannot start the agent's stream relay: %s", strerror(rc));
	}
	r->running = true;
	for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
		link_fd[sid] = sv[sid][0];
	return 0;
}

void stdiorelay_stop(struct stdiorelay *r)
{
	if (r->running) {
		/* Each end reads its close; a relay blocked writing sees EPIPE, on a pair or on the
		 * stream (an engine that stopped reading). */
		for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
			shutdown(r->pfd[sid], SHUT_RDWR);
		shutdown(r->fd, SHUT_RDWR);
		pthread_join(r->thread, NULL);
		r->running = false;
	}
	for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
		if (r->pfd[sid] >= 0)
			close(r->pfd[sid]);
	if (r->fd >= 0)
		close(r->fd);
	r->fd = -1;
	for (uint32_t sid = 0; sid < AG_MUX_STREAMS; sid++)
		r->pfd[sid] = -1;
}
