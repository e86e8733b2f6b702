#include "rpc.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../base/utf8.h"
#include "writer.h"

/* Member by member, not json_pack: parsing its format cost more than the rest of it. */
json_t *rpc_result(json_t *id, json_t *result)
{
	json_t *r = json_object(), *res = result ? result : json_object();
	bool ok = r && res && json_object_set_new_nocheck(r, "jsonrpc", json_string_nocheck("2.0")) == 0 &&
		  json_object_set_nocheck(r, "id", id ? id : json_null()) == 0;
	if (!ok) {
		json_decref(res);
		json_decref(r);
		return NULL;
	}
	if (json_object_set_new_nocheck(r, "result", res) < 0) {
		json_decref(r);
		return NULL;
	}
	return r;
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
	writer_send_optional(rpc_notification(method, params));
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
		writer_send(b->responses);
	else
		json_decref(b->responses);
	size_t i;
	json_t *n;
	json_array_foreach(b->after, i, n)
		writer_send_optional(json_incref(n));
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
		writer_send_optional(note);
}

void rpc_respond(struct rpc_batch *batch, json_t *response)
{
	if (!batch)
		writer_send(response);
	else
		batch_settle(batch, response, NULL);
}

void rpc_batch_drop(struct rpc_batch *batch)
{
	if (batch)
		batch_settle(batch, NULL, NULL);
}
