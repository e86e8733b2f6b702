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

#include "err.h"

enum {
	RPC_PARSE_ERROR = -32700,
	RPC_INVALID_REQUEST = -32600,
	RPC_METHOD_NOT_FOUND = -32601,
	RPC_INVALID_PARAMS = -32602,
	RPC_INTERNAL_ERROR = -32603,
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

/* ---- writing */

/* Writes one message as one line on stdout. Stolen. Thread-safe. -1 once stdout is gone. */
int rpc_write(json_t *msg);

/* True once a write to stdout failed (the client is gone). */
bool rpc_output_closed(void);

/* A response object. result stolen; id borrowed (NULL means null). */
json_t *rpc_result(json_t *id, json_t *result);
/* An error response object; data stolen (may be NULL). */
json_t *rpc_error(json_t *id, int code, const char *message, json_t *data);

/* Sends a notification; params stolen. */
void rpc_notify(const char *method, json_t *params);

/* ---- batches: where a response goes */

/* Collects the responses of one batch and writes them as one array when the last arrives.
 * `expected` counts the members that will be answered (or dropped). */
struct rpc_batch;
struct rpc_batch *rpc_batch_new(size_t expected);

/* Sends a response: straight to stdout when batch is NULL, else into the batch. Stolen. */
void rpc_respond(struct rpc_batch *batch, json_t *response);

/* One expected member will not be answered (a cancelled call). */
void rpc_batch_drop(struct rpc_batch *batch);

#endif
