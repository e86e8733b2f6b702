/*
 * The result of an execute call: a CallToolResult with a text block (what a model reads) and
 * structuredContent (schemas/execution.output.json) that say the same, fitted into a size
 * budget. Hosts refuse or truncate large results (Claude Code warns past 10,000 tokens), so
 * the whole result, serialized, stays within `max` bytes: when the streams do not fit, each
 * keeps as much of its head and tail as fits, split fairly between the two, with a marker in
 * the middle that says how many bytes were left out and where the full text is.
 *
 * Sizes are counted as serialized JSON (a control byte costs six), never as raw bytes.
 */
#ifndef SANDBOX_RESULT_H
#define SANDBOX_RESULT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "output.h"

/* The smallest budget that always holds the fixed parts of a result. */
#define RESULT_MIN 4096

struct result_stream {
	const struct output *out;  /* the captured stream; NULL: the raw bytes below */
	const char *raw;           /* when out is NULL (may be NULL for none) */
	size_t raw_len;
	const char *file;          /* workspace file holding the full text, or NULL */
	const char *file_error;    /* why the full text could not be saved, or NULL */
};

struct result_facts {
	int exit_code;
	bool timed_out;
	double timeout_s;          /* for the timeout line */
	int64_t duration_ms;
	bool oom_killed;
	uint64_t memory_limit;     /* 0: unknown */
	const char *backend;       /* NULL: no sandbox could be made */
	const char *sandbox_id;
	const char *error;         /* why the sandbox could not run the code, or NULL */
	const char *notice;        /* or NULL */
	struct result_stream s[2]; /* stdout, stderr */
	const char *session;       /* a session call: its name (NULL: none), and its cell's value */
	const char *value;         /* (NULL: none; the caller keeps it within an eighth of max) */
	const char *process_id;    /* a background call still running: its id (exit_code means
	                            * nothing then); NULL for a call that ended */
};

/* Builds the result within max bytes (at least RESULT_MIN). cut (may be NULL) gets, per
 * stream, whether its text leaves bytes out. isError is set as the contract says. New
 * reference; NULL when out of memory. */
json_t *result_execution(const struct result_facts *f, size_t max, bool cut[2]);

/* The size of s (n bytes) once made valid UTF-8 and written as a JSON string's contents. */
size_t result_json_cost(const char *s, size_t n);

/* A result of one text block (refused arguments, cleanup_sandbox), isError when is_error; the
 * text made valid UTF-8. New reference; NULL when out of memory. */
json_t *result_text(const char *text, bool is_error);

#endif
