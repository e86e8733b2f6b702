/*
 * JSON-RPC 2.0 over stdio: the bounded line reader, the one writer of stdout, and the making
 * of responses and errors (all JSON-RPC errors are made here).
 *
 * Ownership: functions taking a json_t "stolen" own it afterwards (also on failure); ids are
 * borrowed and copied when kept.
 */
#ifndef SANDBOX_RPC_H
#define SANDBOX_RPC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../base/err.h"

enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL_ERROR = -32603,
	RPC_UNSUPPORTED_VERSION = -32022, /* MCP 2026-07-28: a revision the server does not speak */
};

/* ---- reading */

struct rpc_reader {
	int fd;
	size_t max;          /* longest line accepted, without its newline */
	char *buf;
	size_t len, cap;
	bool skipping;       /* inside a line that is too long: drop until its newline */
	bool eof;
	size_t consumed;      /* bytes of the line handed out last, dropped at the next call */
};

enum rpc_read { RPC_LINE, RPC_TOO_LONG, RPC_NEED_MORE, RPC_EOF };

int rpc_reader_init(struct rpc_reader *r, int fd, size_t max);
void rpc_reader_free(struct rpc_reader *r);

/* Reads what is available (one read(2): call when fd is readable). 0, or -1 on a read error. */
int rpc_reader_fill(struct rpc_reader *r);

/* Takes the next line out of the buffer. On RPC_LINE, *line (borrowed until the next call)
 * has no "\n" or "\r\n"; blank lines are skipped. RPC_TOO_LONG is reported once per line. */
enum rpc_read rpc_reader_next(struct rpc_reader *r, const char **line, size_t *len);

/* ---- writing
 *
 * Messages are queued in the order they are handed over and written to stdout by a writer
 * thread of their own, so no other thread ever waits for a client that stops reading: the
 * reader keeps answering (its answers queue up) and shutdown is never held up. */

/* Starts the writer on fd; call it before anything is queued. 0 or -1. */
int rpc_writer_start(int fd);

/* Waits until everything queued was written, the client is gone, or deadline_ms (monotonic)
 * passes; -1 when something was left unwritten. The writer may stay blocked in a write: the
 * process is about to exit. */
int rpc_writer_flush(int64_t deadline_ms);

/* Queues one message as one line on stdout. Stolen. Thread-safe, never blocks on the client.
 * -1 once stdout is gone. */
int rpc_write(json_t *msg);

/* Like rpc_write, for messages a client can do without (progress, logs): dropped rather than
 * queued while the client is not reading (more than RPC_OPTIONAL_MAX bytes wait). */
int rpc_write_optional(json_t *msg);
#define RPC_OPTIONAL_MAX (1u << 20)

/* True while more than RPC_BACKLOG_MAX bytes wait for the client: the reader stops taking new
 * requests until it catches up, so the queue stays bounded. */
bool rpc_output_backlog(void);
#define RPC_BACKLOG_MAX (64u << 20)

/* True once a write to stdout failed (the client is gone). */
bool rpc_output_closed(void);

/* A response object. result stolen; id borrowed (NULL means null). */
json_t *rpc_result(json_t *id, json_t *result);
/* An error response object; data stolen (may be NULL). */
json_t *rpc_error(json_t *id, int code, const char *message, json_t *data);

/* Sends a notification (as rpc_write_optional: one the client can do without); params stolen. */
void rpc_notify(const char *method, json_t *params);
/* A notification message, for rpc_batch_release; params stolen. */
json_t *rpc_notification(const char *method, json_t *params);

/* ---- batches: where a response goes */

/* Collects the responses of one batch and writes them as one array when the last arrives.
 * `expected` counts the members that will be answered (or dropped). */
struct rpc_batch;
struct rpc_batch *rpc_batch_new(size_t expected);

/* Sends a response: straight to stdout when batch is NULL, else into the batch. Stolen. */
void rpc_respond(struct rpc_batch *batch, json_t *response);

/* One expected member will not be answered (a cancelled call). */
void rpc_batch_drop(struct rpc_batch *batch);

/* Keeps a batch open past a member's response, until rpc_batch_release: a notification the
 * member causes then follows the batch's array, as it follows a lone response. NULL: nothing. */
void rpc_batch_hold(struct rpc_batch *batch);
/* Ends a hold. note (a notification message, stolen; NULL for none) is written (as optional)
 * after the batch's array, or at once when batch is NULL. */
void rpc_batch_release(struct rpc_batch *batch, json_t *note);

#endif
