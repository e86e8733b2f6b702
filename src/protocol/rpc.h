/*
 * JSON-RPC 2.0 messages: responses, errors (all JSON-RPC errors are made here) and
 * notifications, and batches, whose responses go out as one array. Everything goes out through
 * the writer (writer.h).
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

/* A response object. result stolen; id borrowed (NULL means null). */
json_t *rpc_result(json_t *id, json_t *result);
/* An error response object; data stolen (may be NULL). */
json_t *rpc_error(json_t *id, int code, const char *message, json_t *data);

/* Sends a notification (as writer_send_optional: one the client can do without); params stolen. */
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
