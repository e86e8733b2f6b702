#include "mcp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bignum.h"
#include "era.h"
#include "../base/jsonw.h"
#include "../base/log.h"
#include "rpc.h"
#include "writer.h"
#include "../tools/tools.h"

/* A JSON string as the client sent it: not a number kept as its text (bignum.h). */
static bool is_text(const json_t *j)
{
	size_t n;
	return json_is_string(j) && !jsonw_number_text(j, &n);
}

/* The string value of j when it is a JSON string without NUL characters, else NULL: such a
 * string cannot equal any name we know, and must not compare equal to a prefix of one. */
static const char *plain_string(const json_t *j)
{
	const char *v = is_text(j) ? json_string_value(j) : NULL;
	return v && strlen(v) == json_string_length(j) ? v : NULL;
}

static const char instructions[] =
	"Runs Python (execute_python) and shell commands (execute_bash_commands) in an isolated "
	"sandbox whose /workspace persists between calls until cleanup_sandbox. Calls run one at "
	"a time. Each call starts fresh processes: keep state in files.";

/* How long a client may cache server/discover, tools/list and resources/templates/list: they
 * are fixed for the life of the process. "private": they describe this user's configuration
 * (network policy, wheelhouse). The workspace's list and its files change with every call:
 * resources/list and resources/read are not to be cached (0). */
#define CACHE_TTL_MS 3600000
#define WORKSPACE_TTL_MS 0

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
	if (j->kind != JOB_TOOL)
		result = era_cacheable(&MJ(j)->era, result, WORKSPACE_TTL_MS);
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

/* One request being handled: what it asked, how it is served, where its answer goes. */
struct request {
	json_t *id;                /* borrowed from the message */
	json_t *params;            /* borrowed; may be NULL */
	struct era era;
	struct rpc_batch *batch;   /* NULL: straight out */
};

static void answer(const struct request *rq, json_t *result)
{
	if (result)
		rpc_respond(rq->batch, rpc_result(rq->id, era_result(&rq->era, result)));
	else
		rpc_respond(rq->batch, rpc_error(rq->id, RPC_INTERNAL_ERROR, "Internal error", NULL));
}

static void refuse(const struct request *rq, int code, const char *msg)
{
	rpc_respond(rq->batch, rpc_error(rq->id, code, msg, NULL));
}

static void m_initialize(struct mcp *m, struct request *rq)
{
	json_t *asked_j = json_object_get(rq->params, "protocolVersion");
	const char *asked = plain_string(asked_j);
	if (rq->batch) {
		refuse(rq, RPC_INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch");
		return;
	}
	if (!json_is_object(rq->params) || !json_is_string(asked_j)) {
		refuse(rq, RPC_INVALID_PARAMS, "initialize needs params.protocolVersion");
		return;
	}
	const char *v = ERA_LEGACY_NEWEST;
	for (size_t i = 0; asked && era_legacy_versions[i]; i++)
		if (!strcmp(asked, era_legacy_versions[i]))
			v = era_legacy_versions[i];
	snprintf(m->version, sizeof m->version, "%s", v);
	/* Revisions before 2025-06-18 have no title here. */
	answer(rq, json_pack("{s:s, s:{s:{s:b}, s:{s:b}, s:{}}, s:o, s:s}", "protocolVersion", v, "capabilities",
			     "tools", "listChanged", 0, "resources", "listChanged", 1, "logging", "serverInfo",
			     era_server_info(strcmp(v, "2025-06-18") >= 0), "instructions", instructions));
}

/* server/discover (2026-07-28): what a client needs before its first request. */
static void m_discover(struct mcp *m, struct request *rq)
{
	(void)m;
	/* A client that speaks only the legacy revisions never sends this; a dual-era client's
	 * probe always names its revision. This error is not a modern one, so such a client falls
	 * back to initialize. */
	if (!rq->era.modern) {
		refuse(rq, RPC_INVALID_PARAMS,
			      "Invalid params: server/discover needs _meta[\"io.modelcontextprotocol/protocolVersion\"] "
			      "(" ERA_MODERN_VERSION "); clients of earlier revisions start with initialize");
		return;
	}
	answer(rq, json_pack("{s:o, s:{s:{}, s:{}, s:{}}, s:s, s:i, s:s}", "supportedVersions", era_supported(),
			     "capabilities", "tools", "resources", "logging", "instructions", instructions, "ttlMs",
			     CACHE_TTL_MS, "cacheScope", "private"));
}

static void m_ping(struct mcp *m, struct request *rq)
{
	(void)m;
	answer(rq, json_object());
}

static void m_tools_list(struct mcp *m, struct request *rq)
{
	(void)m;
	json_t *cursor = json_object_get(rq->params, "cursor");
	if (cursor && !json_is_null(cursor)) {
		refuse(rq, RPC_INVALID_PARAMS, "Invalid params: unknown cursor (the tool list has one page)");
		return;
	}
	answer(rq, era_cacheable(&rq->era, json_pack("{s:o}", "tools", tools_list()), CACHE_TTL_MS));
}

static void m_tools_call(struct mcp *m, struct request *rq)
{
	const char *name = NULL;
	json_t *args = NULL;
	json_error_t je;
	if (json_unpack_ex(rq->params, &je, 0, "{s:s, s?o}", "name", &name, "arguments", &args) < 0) {
		refuse(rq, RPC_INVALID_PARAMS, "tools/call needs params.name");
		return;
	}
	int tool = plain_string(json_object_get(rq->params, "name")) ? tools_find(name) : -1;
	if (tool < 0) {
		char msg[400];
		snprintf(msg, sizeof msg, "Unknown tool: %.200s (the tools are %s)", name, tools_names());
		refuse(rq, RPC_INVALID_PARAMS, msg);
		return;
	}
	if (args && !json_is_object(args) && !json_is_null(args)) {
		refuse(rq, RPC_INVALID_PARAMS, "tools/call params.arguments must be an object");
		return;
	}
	args = json_is_object(args) ? json_incref(args) : json_object();
	json_t *why;
	if (tools_check(tool, args, &why) < 0) {
		json_decref(args);
		if (!why) {
			refuse(rq, RPC_INTERNAL_ERROR, "out of memory");
			return;
		}
		answer(rq, why);
		return;
	}
	submit(m, JOB_TOOL, tool, rq->id, args, rq->params, &rq->era, rq->batch);
}

/* resources/list and resources/read wait their turn in the engine: they read the sandbox. */
static void m_resources(struct mcp *m, struct request *rq, bool read)
{
	if (read && !json_is_string(json_object_get(rq->params, "uri"))) {
		refuse(rq, RPC_INVALID_PARAMS, "Invalid params: resources/read needs params.uri");
		return;
	}
	json_t *params = json_is_object(rq->params) ? json_incref(rq->params) : json_object();
	submit(m, read ? JOB_RESOURCES_READ : JOB_RESOURCES_LIST, -1, rq->id, params, rq->params, &rq->era, rq->batch);
}

static void m_resources_list(struct mcp *m, struct request *rq)
{
	m_resources(m, rq, false);
}

static void m_resources_read(struct mcp *m, struct request *rq)
{
	m_resources(m, rq, true);
}

static void m_templates_list(struct mcp *m, struct request *rq)
{
	(void)m;
	answer(rq, era_cacheable(&rq->era, json_pack("{s:[]}", "resourceTemplates"), CACHE_TTL_MS));
}

static void m_set_level(struct mcp *m, struct request *rq)
{
	(void)m;
	if (rq->era.modern) {
		refuse(rq, RPC_METHOD_NOT_FOUND,
			      "Method not found: logging/setLevel (in " ERA_MODERN_VERSION " each request sets its own "
			      "level in _meta[\"io.modelcontextprotocol/logLevel\"])");
		return;
	}
	const char *lv = plain_string(json_object_get(rq->params, "level"));
	int level = lv ? log_level_parse(lv) : -1;
	if (level < 0) {
		refuse(rq, RPC_INVALID_PARAMS, "Invalid params: level must be one of debug, info, notice, warning, "
						      "error, critical, alert, emergency");
		return;
	}
	log_set_client(era_send_log, level);
	answer(rq, json_object());
}

static const struct {
	const char *name;
	void (*fn)(struct mcp *m, struct request *rq);
} methods[] = {
	{"initialize", m_initialize},
	{"server/discover", m_discover},
	{"ping", m_ping},
	{"tools/list", m_tools_list},
	{"tools/call", m_tools_call},
	{"resources/list", m_resources_list},
	{"resources/read", m_resources_read},
	{"resources/templates/list", m_templates_list},
	{"logging/setLevel", m_set_level},
};

/* A notification (no id): never answered. */
static void notification(struct mcp *m, const char *meth, const json_t *params, struct rpc_batch *batch)
{
	if (!strcmp(meth, "notifications/cancelled"))
		engine_cancel(m->eng, json_object_get(params, "requestId"));
	else if (!strcmp(meth, "notifications/initialized"))
		log_msg(LOG_DEBUG, "client initialized (protocol %s)", m->version);
	rpc_batch_drop(batch);
}

/* Checks a message's envelope. 0 with *meth set ("" for a name holding a NUL: it matches no
 * method), or -1 when it was answered (or dropped) already. */
static int envelope(json_t *msg, struct rpc_batch *batch, const char **meth)
{
	json_t *id = json_object_get(msg, "id"), *method = json_object_get(msg, "method");
	json_t *params = json_object_get(msg, "params");
	bool id_ok = json_is_string(id) || json_is_integer(id);
	bool params_ok = !params || json_is_object(params) || json_is_array(params);
	const char *ver = plain_string(json_object_get(msg, "jsonrpc")), *bad = NULL;
	bool response = !is_text(method) && (json_object_get(msg, "result") || json_object_get(msg, "error"));
	/* A response to us (we send no requests), or a notification with bad params: dropped. */
	if (json_is_object(msg) && (response || (!params_ok && !id && is_text(method) && ver &&
						 !strcmp(ver, "2.0")))) {
		rpc_batch_drop(batch);
		return -1;
	}
	if (!json_is_object(msg))
		bad = "Invalid Request: not a JSON-RPC object";
	else if (!is_text(method))
		bad = "Invalid Request: no method";
	else if (!ver || strcmp(ver, "2.0"))
		bad = "Invalid Request: jsonrpc must be \"2.0\"";
	else if (id && !id_ok)
		bad = "Invalid Request: id must be a string or an integer";
	else if (!params_ok)
		bad = "Invalid Request: params must be an object";
	if (bad) {
		rpc_respond(batch, rpc_error(id_ok ? id : NULL, RPC_INVALID_REQUEST, bad, NULL));
		return -1;
	}
	*meth = plain_string(method) ? json_string_value(method) : "";
	return 0;
}

/* Handles one message; `batch` is where its response goes. */
static void handle_message(struct mcp *m, json_t *msg, struct rpc_batch *batch)
{
	const char *meth;
	if (envelope(msg, batch, &meth) < 0)
		return;
	struct request rq = {.id = json_object_get(msg, "id"), .params = json_object_get(msg, "params"),
			     .era = {.modern = false, .log_level = LOG_OFF}, .batch = batch};
	/* Numbers past what jansson holds stay as sent where they are echoed; elsewhere they are
	 * doubles, and one past a double's range is refused. */
	char why[200];
	if (bignum_settle(msg, why, sizeof why) < 0) {
		if (rq.id)
			refuse(&rq, RPC_INVALID_PARAMS, why);
		else
			rpc_batch_drop(batch);
		return;
	}
	rq.params = json_object_get(msg, "params");
	if (!rq.id) {
		notification(m, meth, rq.params, batch);
		return;
	}
	/* initialize is the legacy revisions' own: whatever its _meta says, it is served as one. */
	json_t *bad;
	if (strcmp(meth, "initialize") && era_read(rq.id, rq.params, &rq.era, &bad) < 0) {
		rpc_respond(batch, bad);
		return;
	}
	rq.era.links = rq.era.modern || strcmp(m->version, "2025-06-18") >= 0;
	for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++)
		if (!strcmp(meth, methods[i].name)) {
			methods[i].fn(m, &rq);
			return;
		}
	char text[300];
	snprintf(text, sizeof text, "Method not found: %.200s", json_string_value(json_object_get(msg, "method")));
	refuse(&rq, RPC_METHOD_NOT_FOUND, text);
}

/* Batches are JSON-RPC 2.0 but MCP allowed them only up to revision 2025-03-26. */
static bool batches_allowed(const struct mcp *m)
{
	return m->version[0] && strcmp(m->version, "2025-03-26") <= 0;
}

void mcp_handle_line(struct mcp *m, const char *line, size_t len)
{
	json_error_t je;
	json_t *msg = bignum_loadb(line, len, &je);
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
