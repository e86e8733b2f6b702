#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "era.h"
#include "../base/log.h"
#include "rpc.h"
#include "writer.h"
#include "../tools/tools.h"

/* The string value of j when it is a JSON string without NUL characters, else NULL: such a
 * string cannot equal any name we know, and must not compare equal to a prefix of one. */
static const char *plain_string(const json_t *j)
{
	const char *v = json_string_value(j);
	return v && strlen(v) == json_string_length(j) ? v : NULL;
}

static const char instructions[] =
	"Runs Python (execute_python) and shell commands (execute_bash_commands) in an isolated "
	"sandbox whose /workspace persists between calls until cleanup_sandbox. Calls run one at "
	"a time. Each call starts fresh processes: keep state in files.";

/* How long a client may cache server/discover and tools/list: both are fixed for the life of
 * the process. "private": they describe this user's configuration (network policy, wheelhouse). */
#define CACHE_TTL_MS 3600000

struct mcp {
	const struct config *cfg;
	struct engine *eng;
	char version[16];   /* negotiated protocol revision; "" before initialize */
};

struct mcp *mcp_new(const struct config *cfg, struct engine *eng)
{
	struct mcp *m = calloc(1, sizeof *m);
	if (m) {
		m->cfg = cfg;
		m->eng = eng;
	}
	return m;
}

void mcp_free(struct mcp *m)
{
	free(m);
}

static json_t *initialize(struct mcp *m, json_t *params, int *code, const char **err)
{
	json_t *asked_j = json_object_get(params, "protocolVersion");
	const char *asked = plain_string(asked_j);
	if (!json_is_object(params) || !json_is_string(asked_j)) {
		*code = RPC_INVALID_PARAMS;
		*err = "initialize needs params.protocolVersion";
		return NULL;
	}
	const char *v = ERA_LEGACY_NEWEST;
	for (size_t i = 0; asked && era_legacy_versions[i]; i++)
		if (!strcmp(asked, era_legacy_versions[i]))
			v = era_legacy_versions[i];
	snprintf(m->version, sizeof m->version, "%s", v);
	/* Revisions before 2025-06-18 have no title here. */
	return json_pack("{s:s, s:{s:{s:b}, s:{s:b}, s:{}}, s:o, s:s}", "protocolVersion", v, "capabilities", "tools",
			 "listChanged", 0, "resources", "listChanged", 1, "logging", "serverInfo",
			 era_server_info(strcmp(v, "2025-06-18") >= 0), "instructions", instructions);
}

/* server/discover (2026-07-28): what a client needs before its first request. */
static json_t *discover(void)
{
	return json_pack("{s:o, s:{s:{}, s:{}, s:{}}, s:s, s:i, s:s}", "supportedVersions", era_supported(),
			 "capabilities", "tools", "resources", "logging", "instructions", instructions, "ttlMs", CACHE_TTL_MS,
			 "cacheScope", "private");
}

/* A job as the protocol keeps it: where its answer goes and how it is written. */
struct mcp_job {
	struct job job;
	struct rpc_batch *batch;   /* NULL: straight out */
	struct era era;
	json_t *progress_token;    /* NULL when the client asked for no progress */
};

#define MJ(j) ((struct mcp_job *)(void *)(j))

static void job_result(struct job *j, json_t *result)
{
	/* What the job changed is told after its response, and after its batch's. */
	rpc_batch_hold(MJ(j)->batch);
	rpc_respond(MJ(j)->batch, rpc_result(j->id, era_result(&MJ(j)->era, result)));
}

static void job_after(struct job *j, bool changed)
{
	rpc_batch_release(MJ(j)->batch,
			  changed ? rpc_notification("notifications/resources/list_changed", json_object()) : NULL);
}

static void job_error(struct job *j, int code, const char *msg)
{
	rpc_respond(MJ(j)->batch, rpc_error(j->id, code ? code : RPC_INTERNAL_ERROR, msg, NULL));
}

static void job_drop(struct job *j)
{
	rpc_batch_drop(MJ(j)->batch);
}

static void job_progress(struct job *j, long n, const char *msg)
{
	rpc_notify("notifications/progress", json_pack("{s:O, s:I, s:s}", "progressToken", MJ(j)->progress_token,
							  "progress", (json_int_t)n, "message", msg));
}

static void job_log(struct job *j, int level, const char *msg)
{
	(void)j;
	era_send_log(level, msg);
}

static void job_free(struct job *j)
{
	if (!j)
		return;
	json_decref(j->id);
	json_decref(j->args);
	json_decref(MJ(j)->progress_token);
	free(MJ(j));
}

static const struct job_reply mcp_reply = {
	.result = job_result,
	.after = job_after,
	.error = job_error,
	.drop = job_drop,
	.progress = job_progress,
	.log = job_log,
	.free = job_free,
};

/* Queues a job for the engine (taking args) and answers when the queue is full. */
static void submit(struct mcp *m, enum job_kind kind, int tool, json_t *id, json_t *args, json_t *params,
		   const struct era *era, struct rpc_batch *batch)
{
	struct mcp_job *mj = calloc(1, sizeof *mj);
	if (!mj) {
		json_decref(args);
		rpc_respond(batch, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory", NULL));
		return;
	}
	struct job *j = &mj->job;
	j->reply = &mcp_reply;
	j->kind = kind;
	j->id = json_incref(id);
	j->tool = tool;
	j->args = args;
	j->links = era->links;
	/* The 2026-07-28 revision has no session to send a notification in. */
	j->notes = !era->modern;
	j->log_level = era->modern ? era->log_level : LOG_AS_CLIENT;
	mj->batch = batch;
	mj->era = *era;
	json_t *tok = json_object_get(json_object_get(params, "_meta"), "progressToken");
	if (kind == JOB_TOOL && (json_is_string(tok) || json_is_integer(tok))) {
		mj->progress_token = json_incref(tok);
		j->progress = true;
	}
	if (engine_submit(m->eng, j) < 0) {
		job_free(j);
		char msg[256];
		unsigned long long q = (unsigned long long)m->cfg->queue_max;
		snprintf(msg, sizeof msg, "The server is busy: %llu %s already waiting to run. Retry once earlier calls finish.",
			 q, q == 1 ? "call is" : "calls are");
		if (kind != JOB_TOOL) {
			rpc_respond(batch, rpc_error(id, RPC_INTERNAL_ERROR, msg, NULL));
			return;
		}
		json_t *r = json_pack("{s:[{s:s, s:s}], s:b}", "content", "type", "text", "text", msg, "isError", 1);
		rpc_respond(batch, rpc_result(id, era_result(era, r)));
	}
}

static void tools_call(struct mcp *m, json_t *id, json_t *params, const struct era *era, struct rpc_batch *batch)
{
	json_t *name_j = json_object_get(params, "name");
	const char *name = json_string_value(name_j);
	if (!json_is_object(params) || !name) {
		rpc_respond(batch, rpc_error(id, RPC_INVALID_PARAMS, "tools/call needs params.name", NULL));
		return;
	}
	int tool = plain_string(name_j) ? tools_find(name) : -1;
	if (tool < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "Unknown tool: %.200s (the tools are %s)", name, tools_names());
		rpc_respond(batch, rpc_error(id, RPC_INVALID_PARAMS, msg, NULL));
		return;
	}
	json_t *args = json_object_get(params, "arguments");
	if (args && !json_is_object(args) && !json_is_null(args)) {
		rpc_respond(batch, rpc_error(id, RPC_INVALID_PARAMS, "tools/call params.arguments must be an object", NULL));
		return;
	}
	args = json_is_object(args) ? json_incref(args) : json_object();
	json_t *why;
	if (tools_check(tool, args, &why) < 0) {
		json_decref(args);
		if (why)
			rpc_respond(batch, rpc_result(id, era_result(era, why)));
		else
			rpc_respond(batch, rpc_error(id, RPC_INTERNAL_ERROR, "out of memory", NULL));
		return;
	}
	submit(m, JOB_TOOL, tool, id, args, params, era, batch);
}

/* Handles one message; `batch` is where its response goes. */
static void handle_message(struct mcp *m, json_t *msg, struct rpc_batch *batch)
{
	if (!json_is_object(msg)) {
		rpc_respond(batch, rpc_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: not a JSON-RPC object", NULL));
		return;
	}
	json_t *id = json_object_get(msg, "id");
	json_t *method = json_object_get(msg, "method");
	bool has_id = id != NULL;
	bool id_ok = json_is_string(id) || json_is_integer(id);
	if (!json_is_string(method)) {
		if (json_object_get(msg, "result") || json_object_get(msg, "error")) {
			rpc_batch_drop(batch); /* a response to us: we send no requests, so nothing to do */
			return;
		}
		rpc_respond(batch, rpc_error(id_ok ? id : NULL, RPC_INVALID_REQUEST, "Invalid Request: no method", NULL));
		return;
	}
	const char *ver = plain_string(json_object_get(msg, "jsonrpc"));
	if (!ver || strcmp(ver, "2.0")) {
		rpc_respond(batch, rpc_error(id_ok ? id : NULL, RPC_INVALID_REQUEST, "Invalid Request: jsonrpc must be \"2.0\"", NULL));
		return;
	}
	if (has_id && !id_ok) {
		rpc_respond(batch, rpc_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: id must be a string or an integer", NULL));
		return;
	}
	/* A method with a NUL in it matches nothing: "" makes it unknown. */
	const char *meth = plain_string(method) ? json_string_value(method) : "";
	json_t *params = json_object_get(msg, "params");
	if (params && !json_is_object(params) && !json_is_array(params)) {
		if (has_id)
			rpc_respond(batch, rpc_error(id, RPC_INVALID_REQUEST, "Invalid Request: params must be an object", NULL));
		else
			rpc_batch_drop(batch);
		return;
	}
	if (!has_id) {
		/* Notifications are never answered. */
		if (!strcmp(meth, "notifications/cancelled"))
			engine_cancel(m->eng, json_object_get(params, "requestId"));
		else if (!strcmp(meth, "notifications/initialized"))
			log_msg(LOG_DEBUG, "client initialized (protocol %s)", m->version);
		rpc_batch_drop(batch);
		return;
	}
	/* initialize is the legacy revisions' own: whatever its _meta says, it is served as one. */
	struct era era = {.modern = false, .log_level = LOG_OFF};
	json_t *bad;
	if (strcmp(meth, "initialize") && era_read(id, params, &era, &bad) < 0) {
		rpc_respond(batch, bad);
		return;
	}
	era.links = era.modern || strcmp(m->version, "2025-06-18") >= 0;
	int code = 0;
	const char *err = NULL;
	json_t *result = NULL;
	if (!strcmp(meth, "server/discover")) {
		if (era.modern) {
			result = discover();
		} else {
			/* A client that speaks only the legacy revisions never sends this; a dual-era
			 * client's probe always names its revision. This error is not a modern one,
			 * so such a client falls back to initialize. */
			code = RPC_INVALID_PARAMS;
			err = "Invalid params: server/discover needs _meta[\"io.modelcontextprotocol/protocolVersion\"] "
			      "(" ERA_MODERN_VERSION "); clients of earlier revisions start with initialize";
		}
	} else if (!strcmp(meth, "initialize")) {
		if (batch) {
			code = RPC_INVALID_REQUEST;
			err = "Invalid Request: initialize must not be part of a batch";
		} else {
			result = initialize(m, params, &code, &err);
		}
	} else if (!strcmp(meth, "ping")) {
		result = json_object();
	} else if (!strcmp(meth, "tools/list")) {
		if (json_object_get(params, "cursor") && !json_is_null(json_object_get(params, "cursor"))) {
			code = RPC_INVALID_PARAMS;
			err = "Invalid params: unknown cursor (the tool list has one page)";
		} else {
			result = json_pack("{s:o}", "tools", tools_list());
			if (era.modern) {
				json_object_set_new(result, "ttlMs", json_integer(CACHE_TTL_MS));
				json_object_set_new(result, "cacheScope", json_string("private"));
			}
		}
	} else if (!strcmp(meth, "tools/call")) {
		tools_call(m, id, params, &era, batch);
		return;
	} else if (!strcmp(meth, "resources/list") || !strcmp(meth, "resources/read")) {
		bool read = !strcmp(meth, "resources/read");
		if (read && !json_is_string(json_object_get(params, "uri"))) {
			code = RPC_INVALID_PARAMS;
			err = "Invalid params: resources/read needs params.uri";
		} else {
			submit(m, read ? JOB_RESOURCES_READ : JOB_RESOURCES_LIST, -1, id,
			       json_is_object(params) ? json_incref(params) : json_object(), params, &era, batch);
			return;
		}
	} else if (!strcmp(meth, "resources/templates/list")) {
		result = json_pack("{s:[]}", "resourceTemplates");
	} else if (!strcmp(meth, "logging/setLevel") && era.modern) {
		rpc_respond(batch, rpc_error(id, RPC_METHOD_NOT_FOUND,
					     "Method not found: logging/setLevel (in " ERA_MODERN_VERSION " each request "
					     "sets its own level in _meta[\"io.modelcontextprotocol/logLevel\"])", NULL));
		return;
	} else if (!strcmp(meth, "logging/setLevel")) {
		const char *lv = plain_string(json_object_get(params, "level"));
		int level = lv ? log_level_parse(lv) : -1;
		if (level < 0) {
			code = RPC_INVALID_PARAMS;
			err = "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency";
		} else {
			log_set_client(era_send_log, level);
			result = json_object();
		}
	} else {
		char text[300];
		snprintf(text, sizeof text, "Method not found: %.200s", json_string_value(method));
		rpc_respond(batch, rpc_error(id, RPC_METHOD_NOT_FOUND, text, NULL));
		return;
	}
	if (result)
		rpc_respond(batch, rpc_result(id, era_result(&era, result)));
	else
		rpc_respond(batch, rpc_error(id, code ? code : RPC_INTERNAL_ERROR, err ? err : "Internal error", NULL));
}

/* Batches are JSON-RPC 2.0 but MCP allowed them only up to revision 2025-03-26. */
static bool batches_allowed(const struct mcp *m)
{
	return m->version[0] && strcmp(m->version, "2025-03-26") <= 0;
}

void mcp_handle_line(struct mcp *m, const char *line, size_t len)
{
	json_error_t je;
	json_t *msg = json_loadb(line, len, JSON_ALLOW_NUL | JSON_DECODE_ANY, &je);
	if (!msg) {
		char text[300];
		snprintf(text, sizeof text, "Parse error: %s (at character %d)", je.text, je.position);
		writer_send(rpc_error(NULL, RPC_PARSE_ERROR, text, NULL));
		return;
	}
	if (!json_is_array(msg)) {
		handle_message(m, msg, NULL);
		json_decref(msg);
		return;
	}
	if (!batches_allowed(m)) {
		char text[200];
		snprintf(text, sizeof text, "Invalid Request: batches are not accepted in protocol revision %s",
			 m->version[0] ? m->version : "(none negotiated yet)");
		writer_send(rpc_error(NULL, RPC_INVALID_REQUEST, text, NULL));
		json_decref(msg);
		return;
	}
	if (!json_array_size(msg)) {
		writer_send(rpc_error(NULL, RPC_INVALID_REQUEST, "Invalid Request: empty batch", NULL));
		json_decref(msg);
		return;
	}
	/* Every member settles its slot once (answer or drop); the extra slot keeps the batch
	 * open until all members were handed out. */
	size_t i;
	json_t *el;
	struct rpc_batch *b = rpc_batch_new(json_array_size(msg) + 1);
	if (!b) {
		writer_send(rpc_error(NULL, RPC_INTERNAL_ERROR, "out of memory", NULL));
		json_decref(msg);
		return;
	}
	json_array_foreach(msg, i, el) handle_message(m, el, b);
	/* The extra count keeps the batch open until every member was handed out. */
	rpc_batch_drop(b);
	json_decref(msg);
}

void mcp_line_too_long(struct mcp *m)
{
	char text[200];
	snprintf(text, sizeof text, "Invalid Request: message longer than %llu bytes (--max-message)",
		 (unsigned long long)m->cfg->max_message);
	writer_send(rpc_error(NULL, RPC_INVALID_REQUEST, text, NULL));
}

enum reader_got mcp_handle_input(struct mcp *m, struct reader *rd)
{
	const char *line;
	size_t len;
	enum reader_got k;
	while ((k = reader_next(rd, &line, &len)) == READER_LINE || k == READER_TOO_LONG) {
		if (k == READER_TOO_LONG)
			mcp_line_too_long(m);
		else
			mcp_handle_line(m, line, len);
	}
	return k;
}
