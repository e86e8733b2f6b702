#include "era.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/log.h"
#include "rpc.h"
#include "../base/version.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_LOG "io.modelcontextprotocol/logLevel"
#define META_SERVER "io.modelcontextprotocol/serverInfo"

const char *const era_versions[] = {ERA_MODERN_VERSION, ERA_LEGACY_NEWEST, "2025-06-18", "2025-03-26", "2024-11-05", NULL};

static json_t *invalid(json_t *id, const char *msg)
{
	return rpc_error(id, RPC_INVALID_PARAMS, msg, NULL);
}

static json_t *unsupported(json_t *id, const json_t *asked)
{
	char list[200] = "";
	for (int i = 0; era_versions[i]; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", era_versions[i]);
	/* Quoted as JSON, so that a NUL or a control character in it shows. */
	char *shown = json_dumps(asked, JSON_ENCODE_ANY);
	char msg[400];
	snprintf(msg, sizeof msg, "Unsupported protocol version: %.100s (supported: %s)", shown ? shown : "?", list);
	free(shown);
	return rpc_error(id, RPC_UNSUPPORTED_VERSION, msg,
			 json_pack("{s:o, s:O}", "supported", era_supported(), "requested", (json_t *)asked));
}

json_t *era_supported(void)
{
	json_t *a = json_array();
	for (int i = 0; era_versions[i]; i++)
		json_array_append_new(a, json_string(era_versions[i]));
	return a;
}

int era_read(json_t *id, const json_t *params, struct era *out, json_t **error)
{
	*out = (struct era){.modern = false, .log_level = LOG_OFF};
	json_t *meta = json_object_get(params, "_meta");
	json_t *v = json_object_get(meta, META_VERSION);
	if (!v)
		return 0; /* no revision named: a legacy request */
	const char *ver = json_string_value(v);
	if (!ver) {
		*error = invalid(id, "Invalid params: _meta[\"" META_VERSION "\"] must be a protocol revision string");
		return -1;
	}
	/* A string with a NUL in it is no revision of ours: compared whole, it matches none. */
	bool known = false;
	for (int i = 0; era_versions[i] && !known && strlen(ver) == json_string_length(v); i++)
		known = !strcmp(ver, era_versions[i]);
	if (!known) {
		*error = unsupported(id, v);
		return -1;
	}
	if (strcmp(ver, ERA_MODERN_VERSION))
		return 0; /* a legacy revision named per request: served as that revision */
	if (!json_is_object(json_object_get(meta, META_CAPS))) {
		*error = invalid(id, "Invalid params: a " ERA_MODERN_VERSION " request needs _meta[\"" META_CAPS
				     "\"] (an object; {} for none)");
		return -1;
	}
	json_t *lv = json_object_get(meta, META_LOG);
	if (lv) {
		const char *name = json_string_value(lv);
		int level = name && strlen(name) == json_string_length(lv) ? log_level_parse(name) : -1;
		if (level < 0) {
			*error = invalid(id, "Invalid params: _meta[\"" META_LOG "\"] must be one of debug, info, notice, "
					     "warning, error, critical, alert, emergency");
			return -1;
		}
		out->log_level = level;
	}
	out->modern = true;
	return 0;
}

json_t *era_cacheable(const struct era *e, json_t *result, long ttl_ms)
{
	if (result && e->modern) {
		json_object_set_new(result, "ttlMs", json_integer(ttl_ms));
		json_object_set_new(result, "cacheScope", json_string("private"));
	}
	return result;
}

json_t *era_server_info(bool with_title)
{
	json_t *info = json_pack("{s:s, s:s, s:s}", "name", "sandbox-mcp", "title", "Sandbox MCP", "version",
				 SANDBOX_MCP_VERSION);
	if (info && !with_title)
		json_object_del(info, "title");
	return info;
}

json_t *era_result(const struct era *e, json_t *result)
{
	if (!result || !e->modern)
		return result;
	json_t *meta = json_object_get(result, "_meta");
	if (!json_is_object(meta)) {
		meta = json_object();
		json_object_set_new(result, "_meta", meta);
	}
	json_object_set_new(meta, META_SERVER, era_server_info(true));
	json_object_set_new(result, "resultType", json_string("complete"));
	return result;
}

void era_send_log(int level, const char *msg)
{
	rpc_notify("notifications/message",
		   json_pack("{s:s, s:s, s:s}", "level", log_level_name(level), "logger", "sandbox-mcp", "data", msg));
}
