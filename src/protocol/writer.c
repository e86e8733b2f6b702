#include "writer.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../base/buf.h"
#include "../base/clock.h"
#include "../base/heap.h"
#include "../base/jsonw.h"

/* One line waiting for the client. */
struct out_msg {
	struct out_msg *next;
	size_t len;
	char *line; /* ends with its newline; owned */
};

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cv;         /* something queued, or the queue emptied */
	struct out_msg *head, *tail;
	size_t bytes;              /* queued, not yet written */
	bool writing;              /* the writer holds a message it took off the queue */
	bool closed;               /* a write failed: the client is gone */
	bool wrote;                /* written since the heap was last given back */
	bool handing_writes;       /* a short line may be written by the thread that hands it over */
	bool sock;                 /* fd is a socket */
	uint64_t direct, partial;  /* writer_counts */
	int fd;
	void (*on_drained)(void *);
	void *on_drained_ctx;
} out = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1}; /* cv: made by writer_start */

/* The longest line written by the thread that hands it over, when nothing waits ahead of it:
 * a pipe takes up to PIPE_BUF bytes in one slot, whole or not at all. */
#define DIRECT_MAX 4096

/* The most one write hands the kernel. */
#define WRITE_PIECE (16u << 10)

/* When the last write that moved bytes to the client returned (clock_ms); kept apart from
 * out.lock, which the writer does not hold while it writes. */
static _Atomic int64_t wrote_at;

bool writer_closed(void)
{
	pthread_mutex_lock(&out.lock);
	bool c = out.closed;
	pthread_mutex_unlock(&out.lock);
	return c;
}

/* Something still waits to reach a client that is there. Under out.lock. */
static bool pending(void)
{
	return (out.head || out.writing) && !out.closed;
}

bool writer_drained(void)
{
	pthread_mutex_lock(&out.lock);
	bool d = !pending();
	pthread_mutex_unlock(&out.lock);
	return d;
}

void writer_on_drained(void (*fn)(void *ctx), void *ctx)
{
	pthread_mutex_lock(&out.lock);
	out.on_drained = fn;
	out.on_drained_ctx = ctx;
	pthread_mutex_unlock(&out.lock);
}

bool writer_backlog(void)
{
	pthread_mutex_lock(&out.lock);
	bool b = out.bytes > WRITER_BACKLOG_MAX;
	pthread_mutex_unlock(&out.lock);
	return b;
}

static void free_queue(struct out_msg *m)
{
	while (m) {
		struct out_msg *n = m->next;
		free(m->line);
		free(m);
		m = n;
	}
}

/* stdout may be non-blocking: O_NONBLOCK belongs to the open file, which a parent can share
 * with us (its own pipe or socket, made non-blocking). A full pipe is then EAGAIN, not a
 * client that went away: wait until it drains. 0 once writable (or once the write itself will
 * tell), -1 when poll fails. */
static int wait_writable(int fd)
{
	struct pollfd p = {fd, POLLOUT, 0};
	int r;
	do
		r = poll(&p, 1, -1);
	while (r < 0 && errno == EINTR);
	return r < 0 ? -1 : 0;
}

static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&out.lock);
	for (;;) {
		while (!out.head) {
			if (!out.wrote) {
				pthread_cond_wait(&out.cv, &out.lock);
				continue;
			}
			/* What the last answers used is freed by now: once nothing more comes for a
			 * while, the server is idle and gives it back. */
			struct timespec ts = clock_at(clock_ms() + HEAP_IDLE_MS);
			if (pthread_cond_timedwait(&out.cv, &out.lock, &ts) == ETIMEDOUT && !out.head) {
				out.wrote = false;
				pthread_mutex_unlock(&out.lock);
				heap_release();
				pthread_mutex_lock(&out.lock);
			}
		}
		struct out_msg *m = out.head;
		out.head = m->next;
		if (!out.head)
			out.tail = NULL;
		out.writing = true;
		pthread_mutex_unlock(&out.lock);
		const char *p = m->line;
		size_t left = m->len;
		bool failed = false;
		while (left) {
			/* A piece at a time: a blocking write returns once all it was given is taken,
			 * and each return tells writer_stalled that the client is reading. */
			ssize_t w = write(out.fd, p, left < WRITE_PIECE ? left : WRITE_PIECE);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_writable(out.fd) == 0)
				continue;
			if (w <= 0) {
				failed = true;
				break;
			}
			atomic_store_explicit(&wrote_at, clock_ms(), memory_order_relaxed);
			p += w;
			left -= (size_t)w;
		}
		pthread_mutex_lock(&out.lock);
		out.bytes -= m->len;
		out.writing = false;
		out.wrote = true;
		free(m->line);
		free(m);
		if (failed && !out.closed) {
			/* Nobody reads any more: what waits is dropped, and later messages with it. */
			out.closed = true;
			free_queue(out.head);
			out.head = out.tail = NULL;
			out.bytes = 0;
		}
		pthread_cond_broadcast(&out.cv);
		/* Under the lock: once writer_on_drained(NULL, NULL) returns, no call is under way. */
		if (!out.head && out.on_drained)
			out.on_drained(out.on_drained_ctx);
	}
	return NULL;
}

/* Whether a short line can be written on fd without ever waiting for the client: a socket,
 * which takes MSG_DONTWAIT, or a pipe that nothing else of this process writes to (stderr
 * shared with it could fill the slot that poll found free). */
static bool direct_ok(int fd)
{
	struct stat st, er;
	if (fstat(fd, &st) < 0)
		return false;
	out.sock = S_ISSOCK(st.st_mode);
	if (out.sock)
		return true;
	bool shared = fstat(STDERR_FILENO, &er) == 0 && er.st_dev == st.st_dev && er.st_ino == st.st_ino;
	return S_ISFIFO(st.st_mode) && !shared;
}

/* With out.lock held and nothing queued or being written: writes what of line the client
 * takes at once, without waiting, from the caller's thread, which spares a wake-up of the
 * writer on the way of an answer. How many bytes went; 0 when none could. */
static size_t write_now(const char *line, size_t len)
{
	ssize_t w;
	if (out.sock) {
		do
			w = send(out.fd, line, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		while (w < 0 && errno == EINTR);
	} else {
		/* A free slot: a write of up to PIPE_BUF bytes fits it whole, at once. */
		struct pollfd p = {out.fd, POLLOUT, 0};
		if (poll(&p, 1, 0) != 1 || p.revents != POLLOUT)
			return 0;
		do
			w = write(out.fd, line, len);
		while (w < 0 && errno == EINTR);
	}
	if (w <= 0)
		return 0; /* EAGAIN, or a failure the writer meets and reports */
	atomic_store_explicit(&wrote_at, clock_ms(), memory_order_relaxed);
	if (!out.wrote) {
		out.wrote = true;
		pthread_cond_broadcast(&out.cv); /* the writer times the heap's release from now */
	}
	return (size_t)w;
}

int writer_start(int fd)
{
	pthread_t t;
	pthread_attr_t a;
	pthread_condattr_t ca;
	out.fd = fd;
	/* When stdout is a socket (Node's child processes get socketpairs, so the SDK's client and
	 * the hosts built on Node start servers that way), its send buffer is set explicitly. With
	 * the default one, Linux (6.18 here) let about 146 KB wait: a client reading a 2 MB line
	 * got it in 41 reads (64, 64, then 15 KB, over and over), and Node's client copies all it
	 * holds at each read. Once set, even to the default's size, some 580 KB wait and the line
	 * comes in 31 reads of 64 KiB. A pipe refuses the option (ENOTSOCK): nothing changes. */
	int sndbuf = WRITER_SNDBUF;
	(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
	out.handing_writes = direct_ok(fd);
	if (pthread_condattr_init(&ca) != 0 || pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) != 0 ||
	    pthread_cond_init(&out.cv, &ca) != 0)
		return -1;
	pthread_condattr_destroy(&ca);
	if (pthread_attr_init(&a) != 0)
		return -1;
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	int rc = pthread_create(&t, &a, writer_main, NULL);
	pthread_attr_destroy(&a);
	return rc == 0 ? 0 : -1;
}

bool writer_stalled(int64_t since_ms, int stall_ms)
{
	int64_t last = atomic_load_explicit(&wrote_at, memory_order_relaxed);
	pthread_mutex_lock(&out.lock);
	bool stalled = pending() && clock_ms() - (last > since_ms ? last : since_ms) >= stall_ms;
	pthread_mutex_unlock(&out.lock);
	return stalled;
}

int writer_flush(int64_t deadline_ms)
{
	pthread_mutex_lock(&out.lock);
	while (pending()) {
		int64_t left = deadline_ms - clock_ms();
		if (left <= 0)
			break;
		struct timespec ts = clock_at(deadline_ms);
		pthread_cond_timedwait(&out.cv, &out.lock, &ts);
	}
	int rc = pending() ? -1 : 0;
	pthread_mutex_unlock(&out.lock);
	return rc;
}

/* Queues msg (stolen); optional messages only while the client keeps up. */
static int enqueue(json_t *msg, bool optional)
{
	if (!msg) {
		/* Only out of memory gets here: the client would wait forever, so say so. */
		fprintf(stderr, "sandbox-mcp: error: a message could not be built and was not sent\n");
		return -1;
	}
	if (optional) {
		pthread_mutex_lock(&out.lock);
		bool busy = out.bytes > WRITER_OPTIONAL_MAX || out.closed;
		pthread_mutex_unlock(&out.lock);
		if (busy) {
			json_decref(msg);
			return -1;
		}
	}
	/* Compact JSON never contains a raw newline: strings escape theirs. */
	struct buf b = {0};
	buf_reserve(&b, 2048); /* most messages: one allocation */
	jsonw_dump(msg, &b);
	buf_add(&b, "\n", 1);
	json_decref(msg);
	size_t len;
	char *s = buf_take(&b, &len);
	struct out_msg *m = s ? malloc(sizeof *m) : NULL;
	if (!m) {
		free(s);
		fprintf(stderr, "sandbox-mcp: error: out of memory: a message was not sent\n");
		return -1;
	}
	m->len = len;
	m->line = s;
	m->next = NULL;
	pthread_mutex_lock(&out.lock);
	int rc = 0;
	if (out.handing_writes && !out.closed && !out.head && !out.writing && len <= DIRECT_MAX) {
		size_t w = write_now(s, len);
		out.direct += w > 0;
		out.partial += w > 0 && w < len;
		if (w == len) {
			free(s);
			free(m);
			if (out.on_drained)
				out.on_drained(out.on_drained_ctx);
			pthread_mutex_unlock(&out.lock);
			return 0;
		}
		if (w) {
			/* The rest waits for the writer, ahead of anything later. */
			memmove(s, s + w, len - w);
			m->len = len -= w;
		}
	}
	if (out.closed) {
		free(s);
		free(m);
		rc = -1;
	} else {
		if (out.tail)
			out.tail->next = m;
		else
			out.head = m;
		out.tail = m;
		out.bytes += m->len;
		pthread_cond_broadcast(&out.cv);
	}
	pthread_mutex_unlock(&out.lock);
	return rc;
}

int writer_send(json_t *msg)
{
	return enqueue(msg, false);
}

int writer_send_optional(json_t *msg)
{
	return enqueue(msg, true);
}

void writer_counts(uint64_t *direct, uint64_t *partial)
{
	pthread_mutex_lock(&out.lock);
	*direct = out.direct;
	*partial = out.partial;
	pthread_mutex_unlock(&out.lock);
}
