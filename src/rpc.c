#include "rpc.h"

#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static bool out_closed;

bool rpc_output_closed(void)
{
	pthread_mutex_lock(&out_lock);
	bool c = out_closed;
	pthread_mutex_unlock(&out_lock);
	return c;
}

int rpc_write(json_t *msg)
{
	if (!msg) {
		/* Only out of memory gets here: the client would wait forever, so say so. */
		fprintf(stderr, "sandbox-mcp: error: a message could not be built and was not sent\n");
		return -1;
	}
	/* Compact JSON never contains a raw newline: strings escape theirs. */
	char *s = json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
	json_decref(msg);
	if (!s)
		return -1;
	size_t n = strlen(s);
	s[n] = '\n'; /* json_dumps allocates n + 1: reuse the terminator's byte */
	int rc = 0;
	pthread_mutex_lock(&out_lock);
	const char *p = s;
	size_t left = n + 1;
	while (!out_closed && left) {
		ssize_t w = write(STDOUT_FILENO, p, left);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			out_closed = true;
			rc = -1;
			break;
		}
		p += w;
		left -= (size_t)w;
	}
	if (out_closed)
		rc = -1;
	pthread_mutex_unlock(&out_lock);
	free(s);
	return rc;
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

void rpc_notify(const char *method, json_t *params)
{
	rpc_write(json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method", method, "params", params));
}

struct rpc_batch {
	pthread_mutex_t lock;
	json_t *responses;
	size_t pending;
};

struct rpc_batch *rpc_batch_new(size_t expected)
{
	struct rpc_batch *b = calloc(1, sizeof *b);
	if (!b)
		return NULL;
	pthread_mutex_init(&b->lock, NULL);
	b->responses = json_array();
	b->pending = expected;
	return b;
}

/* Called with one member settled; writes and frees the batch after the last. */
static void batch_settle(struct rpc_batch *b, json_t *response)
{
	pthread_mutex_lock(&b->lock);
	if (response)
		json_array_append_new(b->responses, response);
	bool done = --b->pending == 0;
	pthread_mutex_unlock(&b->lock);
	if (!done)
		return;
	/* A batch whose members were all dropped gets no answer at all. */
	if (json_array_size(b->responses))
		rpc_write(b->responses);
	else
		json_decref(b->responses);
	pthread_mutex_destroy(&b->lock);
	free(b);
}

void rpc_respond(struct rpc_batch *batch, json_t *response)
{
	if (!batch)
		rpc_write(response);
	else
		batch_settle(batch, response);
}

void rpc_batch_drop(struct rpc_batch *batch)
{
	if (batch)
		batch_settle(batch, NULL);
}
