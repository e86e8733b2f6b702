/*
 * One output stream of a call, kept within a fixed bound whatever the code prints: everything
 * up to the cap, and past it the first and the last half of the cap. Text handed out is
 * always valid UTF-8 (invalid bytes become U+FFFD), so it can go into JSON as it is.
 */
#ifndef SANDBOX_OUTPUT_H
#define SANDBOX_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

struct output {
	size_t cap;
	char *head;          /* first min(total, cap) bytes */
	size_t head_len;
	char *tail;          /* ring of the last cap/2 bytes, used once total > cap */
	size_t tail_pos;     /* next write position in the ring */
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

void output_free(struct output *o);

/* Copies s (n bytes) with every invalid UTF-8 sequence replaced by U+FFFD. Caller frees. */
char *utf8_sanitize(const char *s, size_t n, size_t *outlen);

#endif
