#include "output.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int output_init(struct output *o, size_t cap)
{
	memset(o, 0, sizeof *o);
	o->cap = cap;
	o->head = malloc(cap);
	o->tail = malloc(cap / 2 + 1);
	if (!o->head || !o->tail) {
		output_free(o);
		return -1;
	}
	return 0;
}

void output_free(struct output *o)
{
	free(o->head);
	free(o->tail);
	o->head = o->tail = NULL;
}

/* The ring follows the stream from when it passes the cap: until then the head holds every byte
 * added, so the ring starts as the head's last half cap, and a stream within the cap is copied
 * once, not twice. */
static void ring_start(struct output *o, uint64_t more)
{
	if (o->ring_live || o->total + more <= o->cap)
		return;
	size_t rc = o->cap / 2;
	size_t k = o->head_len < rc ? o->head_len : rc;
	memcpy(o->tail, o->head + o->head_len - k, k);
	o->tail_pos = rc ? k % rc : 0;
	o->ring_live = true;
}

void output_skip(struct output *o, uint64_t len)
{
	ring_start(o, len);
	o->total += len;
}

int output_cut(const struct output *o)
{
	return o->total > o->cap;
}

void output_add(struct output *o, const char *buf, size_t len)
{
	ring_start(o, len);
	o->total += len;
	if (o->head_len < o->cap) {
		size_t n = o->cap - o->head_len < len ? o->cap - o->head_len : len;
		memcpy(o->head + o->head_len, buf, n);
		o->head_len += n;
	}
	if (!o->ring_live)
		return;
	size_t rc = o->cap / 2;
	if (len > rc) {
		buf += len - rc;
		len = rc;
	}
	while (len) {
		size_t n = rc - o->tail_pos < len ? rc - o->tail_pos : len;
		memcpy(o->tail + o->tail_pos, buf, n);
		o->tail_pos = (o->tail_pos + n) % rc;
		buf += n;
		len -= n;
	}
}

void output_view(const struct output *o, struct output_view *v)
{
	memset(v, 0, sizeof *v);
	v->total = o->total;
	v->head = o->head;
	v->head_len = o->head_len;
	v->cut = output_cut(o);
	if (v->cut) {
		size_t half = o->cap / 2;
		v->tail1 = o->tail + o->tail_pos;
		v->tail1_len = half - o->tail_pos;
		v->tail2 = o->tail;
		v->tail2_len = o->tail_pos;
	}
}

char *output_text(const struct output *o, const char *full_path, size_t *len)
{
	if (!output_cut(o))
		return utf8_sanitize(o->head, o->head_len, len);
	size_t half = o->cap / 2;
	/* Cut on character boundaries: end the head before a partial character, start the tail after one. */
	size_t hl = half;
	while (hl > 0 && hl > half - 3 && ((unsigned char)o->head[hl] & 0xc0) == 0x80)
		hl--;
	char *tail = malloc(half);
	if (!tail)
		return NULL;
	memcpy(tail, o->tail + o->tail_pos, half - o->tail_pos);
	memcpy(tail + half - o->tail_pos, o->tail, o->tail_pos);
	size_t ts = 0;
	while (ts < 3 && ts < half && ((unsigned char)tail[ts] & 0xc0) == 0x80)
		ts++;
	char marker[512];
	unsigned long long omitted = o->total - hl - (half - ts);
	if (full_path)
		snprintf(marker, sizeof marker, "\n[... %llu bytes left out here; the full output is in %s ...]\n",
			 omitted, full_path);
	else
		snprintf(marker, sizeof marker, "\n[... %llu bytes left out here ...]\n", omitted);
	size_t ml = strlen(marker), n = hl + ml + half - ts;
	char *raw = malloc(n);
	if (!raw) {
		free(tail);
		return NULL;
	}
	memcpy(raw, o->head, hl);
	memcpy(raw + hl, marker, ml);
	memcpy(raw + hl + ml, tail + ts, half - ts);
	free(tail);
	char *res = utf8_sanitize(raw, n, len);
	free(raw);
	return res;
}

int capture_init(struct capture *c, size_t cap, void (*on_output)(void *, int, const char *, size_t), void *ctx)
{
	c->on_output = on_output;
	c->ctx = ctx;
	if (output_init(&c->out[0], cap) < 0)
		return -1;
	if (output_init(&c->out[1], cap) < 0) {
		output_free(&c->out[0]);
		return -1;
	}
	return 0;
}

void capture_add(void *ctx, int stream, const char *buf, size_t len)
{
	struct capture *c = ctx;
	if ((stream == 1 || stream == 2) && buf)
		output_add(&c->out[stream - 1], buf, len);
	else if (stream == 1 || stream == 2)
		output_skip(&c->out[stream - 1], len);
	if (c->on_output)
		c->on_output(c->ctx, stream, buf, len);
}

void capture_free(struct capture *c)
{
	output_free(&c->out[0]);
	output_free(&c->out[1]);
}
