/*
 * One output stream of a call, kept within a fixed bound whatever the code prints: everything
 * up to the cap, and past it the first and the last half of the cap. Text handed out is
 * always valid UTF-8 (invalid bytes become U+FFFD), so it can go into JSON as it is.
 */
#ifndef SANDBOX_OUTPUT_H
#define SANDBOX_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/utf8.h"

struct output {
	size_t cap;
	char *head;          /* first min(total, cap) bytes */
	size_t head_len;
	char *tail;          /* ring of the last cap/2 bytes, used once total > cap */
	size_t tail_pos;     /* next write position in the ring */
	bool ring_live;      /* the ring follows the stream: total passed the cap */
	uint64_t total;
};

/* 0, or -1 when out of memory. */
int output_init(struct output *o, size_t cap);
void output_add(struct output *o, const char *buf, size_t len);
/* Counts len bytes that passed unseen (between the kept head and tail). */
void output_skip(struct output *o, uint64_t len);
int output_cut(const struct output *o);

/* The kept text, with a marker where bytes were left out naming `full_path` (may be NULL).
 * Valid UTF-8. Caller frees; *len gets its length. NULL when out of memory. */
char *output_text(const struct output *o, const char *full_path, size_t *len);

/* The raw bytes kept: all of them (head) when the stream was not cut; else its first cap bytes
 * (head) and its last cap/2 bytes (tail, in order: tail1 then tail2). Borrowed. */
struct output_view {
	const char *head;
	size_t head_len;
	const char *tail1, *tail2;
	size_t tail1_len, tail2_len;
	uint64_t total;
	int cut;
};
void output_view(const struct output *o, struct output_view *v);

void output_free(struct output *o);

/* A call's two streams as they come (stdout, stderr), each kept within the cap, and shown to a
 * hook (progress) as they pass. */
struct capture {
	struct output out[2];
	void (*on_output)(void *ctx, int stream, const char *buf, size_t len); /* may be NULL */
	void *ctx;
};

/* 0, or -1 when out of memory (nothing to free then). */
int capture_init(struct capture *c, size_t cap, void (*on_output)(void *, int, const char *, size_t), void *ctx);
/* A run_req's on_output (backends/run/run.h), ctx being the capture. */
void capture_add(void *ctx, int stream, const char *buf, size_t len);
void capture_free(struct capture *c);

#endif
