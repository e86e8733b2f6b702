#include "rpc.h"

#include "../base/utf8.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../base/clock.h"

#define READ_CHUNK 65536

int rpc_reader_init(struct rpc_reader *r, int fd, size_t max)
{
	memset(r, 0, sizeof *r);
	r->fd = fd;
	r->max = max;
	r->cap = READ_CHUNK * 2;
	r->buf = malloc(r->cap);
	return r->buf ? 0 : -1;
}

void rpc_reader_free(struct rpc_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

int rpc_reader_fill(struct rpc_reader *r)
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

enum rpc_read rpc_reader_next(struct rpc_reader *r, const char **line, size_t *len)
{
	if (r->consumed) {
		memmove(r->buf, r->buf + r->consumed, r->len - r->consumed);
		r->len -= r->consumed;
		r->consumed = 0;
	}
	for (;;) {
		char *nl = memchr(r->buf, '\n', r->len);
		if (r->skipping) {
			if (!nl) {
				r->len = 0;
				return r->eof ? RPC_EOF : RPC_NEED_MORE;
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
				return RPC_TOO_LONG;
			}
			if (r->eof && r->len) {
				/* A last line without its newline still counts. */
				nl = r->buf + r->len;
			} else {
				return r->eof ? RPC_EOF : RPC_NEED_MORE;
			}
		}
		size_t l = (size_t)(nl - r->buf);
		r->consumed = l < r->len ? l + 1 : l;
		if (l && r->buf[l - 1] == '\r')
			l--;
		if (l > r->max)
			return RPC_TOO_LONG;
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
		return RPC_LINE;
	}
}

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
	int fd;
} out = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1}; /* cv: made by rpc_writer_start */

bool rpc_output_closed(void)
{
	pthread_mutex_lock(&out.lock);
	bool c = out.closed;
	pthread_mutex_unlock(&out.lock);
	return c;
}

bool rpc_output_backlog(void)
{
	pthread_mutex_lock(&out.lock);
	bool b = out.bytes > RPC_BACKLOG_MAX;
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

static void *writer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&out.lock);
	for (;;) {
		while (!out.head)
			pthread_cond_wait(&out.cv, &out.lock);
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
			ssize_t w = write(out.fd, p, left);
			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0) {
				failed = true;
				break;
			}
			p += w;
			left -= (size_t)w;
		}
		pthread_mutex_lock(&out.lock);
		out.bytes -= m->len;
		out.writing = false;
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
	}
	return NULL;
}

int rpc_writer_start(int fd)
{
	pthread_t t;
	pthread_attr_t a;
	pthread_condattr_t ca;
	out.fd = fd;
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

int rpc_writer_flush(int64_t deadline_ms)
{
	pthread_mutex_lock(&out.lock);
	while ((out.head || out.writing) && !out.closed) {
		int64_t left = deadline_ms - clock_ms();
		if (left <= 0)
			break;
		struct timespec ts = clock_at(deadline_ms);
		pthread_cond_timedwait(&out.cv, &out.lock, &ts);
	}
	int rc = (out.head || out.writing) && !out.closed ? -1 : 0;
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
		bool busy = out.bytes > RPC_OPTIONAL_MAX || out.closed;
		pthread_mutex_unlock(&out.lock);
		if (busy) {
			json_decref(msg);
			return -1;
		}
	}
	/* Compact JSON never contains a raw newline: strings escape theirs. */
	char *s = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(msg);
	struct out_msg *m = s ? malloc(sizeof *m) : NULL;
	if (!m) {
		free(s);
		fprintf(stderr, "sandbox-mcp: error: out of memory: a message was not sent\n");
		return -1;
	}
	m->len = strlen(s);
	s[m->len++] = '\n'; /* json_dumps allocates len + 1: reuse the terminator's byte */
	m->line = s;
	m->next = NULL;
	pthread_mutex_lock(&out.lock);
	int rc = 0;
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

int rpc_write(json_t *msg)
{
	return enqueue(msg, false);
}

int rpc_write_optional(json_t *msg)
{
	return enqueue(msg, true);
}

json_t *rpc_result(json_t *id, json_t *result)
{
	return json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
			 result ? result : json_object());
}

json_t *rpc_error(json_t *id, int code, const char *message, json_t *data)
{
	/* Messages quote what the client sent, maybe cut inside a character: repair them. */
	size_t n;
	char *clean = utf8_sanitize(message, strlen(message), &n);
	json_t *err = json_pack("{s:i, s:s}", "code", code, "message", clean ? clean : "error");
	free(clean);
	if (data && err)
		json_object_set_new(err, "data", data);
	else if (data)
		json_decref(data);
	return json_pack("{s:s, s:O?, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", err);
}

json_t *rpc_notification(const char *method, json_t *params)
{
	return json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params);
}

void rpc_notify(const char *method, json_t *params)
{
	rpc_write_optional(rpc_notification(method, params));
}

struct rpc_batch {
	pthread_mutex_t lock;
	json_t *responses;
	json_t *after;        /* notifications to follow the array */
	size_t pending;
};

struct rpc_batch *rpc_batch_new(size_t expected)
{
	struct rpc_batch *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	b->responses = json_array();
	b->after = json_array();
	b->pending = expected;
	return b;
}

/* Called with one member (or hold) settled; writes and frees the batch after the last. */
static void batch_settle(struct rpc_batch *b, json_t *response, json_t *note)
{
	pthread_mutex_lock(&b->lock);
	if (response)
		json_array_append_new(b->responses, response);
	if (note)
		json_array_append_new(b->after, note);
	bool done = --b->pending == 0;
	pthread_mutex_unlock(&b->lock);
	if (!done)
		return;
	/* A batch whose members were all dropped gets no answer at all. */
	if (json_array_size(b->responses))
		rpc_write(b->responses);
	else
		json_decref(b->responses);
	size_t i;
	json_t *n;
	json_array_foreach(b->after, i, n)
		rpc_write_optional(json_incref(n));
	json_decref(b->after);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void rpc_batch_hold(struct rpc_batch *batch)
{
	if (!batch)
		return;
	pthread_mutex_lock(&batch->lock);
	batch->pending++;
	pthread_mutex_unlock(&batch->lock);
}

void rpc_batch_release(struct rpc_batch *batch, json_t *note)
{
	if (batch)
		batch_settle(batch, NULL, note);
	else if (note)
		rpc_write_optional(note);
}

void rpc_respond(struct rpc_batch *batch, json_t *response)
{
	if (!batch)
		rpc_write(response);
	else
		batch_settle(batch, response, NULL);
}

void rpc_batch_drop(struct rpc_batch *batch)
{
	if (batch)
		batch_settle(batch, NULL, NULL);
}
