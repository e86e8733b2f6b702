/*
 * MCP protocol eras. Legacy revisions (2024-11-05 to 2025-11-25) open a session with
 * initialize; the modern revision (2026-07-28) is stateless: each request names its revision,
 * the client's capabilities and an optional log level in params._meta, and each result says
 * its resultType and the server's identity. An era is only how a request is read and its
 * result written: the engine, the tools and the sandbox are the same for both.
 */
#ifndef SANDBOX_ERA_H
#define SANDBOX_ERA_H

#include <jansson.h>
#include <stdbool.h>

#define ERA_MODERN_VERSION "2026-07-28"
#define ERA_LEGACY_NEWEST "2025-11-25"

/* How one request is served. */
struct era {
	bool modern;     /* its _meta named 2026-07-28 */
	int log_level;   /* enum log_level: the logs it asked for (modern), LOG_OFF for none */
	bool links;      /* its revision has resource_link content (2025-06-18 on) */
};

/* Every revision served, newest first, NULL-ended: 2026-07-28, then the legacy ones. */
extern const char *const era_versions[];
/* The legacy revisions, newest first, NULL-ended: what initialize negotiates. */
#define era_legacy_versions (era_versions + 1)

/* era_versions as a JSON array (new reference). */
json_t *era_supported(void);

/* Reads the era of a request from its params (either may be NULL). 0; or -1 with *error set
 * to the JSON-RPC error response to send (id borrowed): a modern request with a missing or
 * malformed _meta field (-32602), or a revision this server does not speak (-32022). */
int era_read(json_t *id, const json_t *params, struct era *out, json_t **error);

/* The result as the request's era writes it: a modern result gains resultType "complete" and
 * _meta's serverInfo. Stolen and returned (NULL stays NULL). */
json_t *era_result(const struct era *e, json_t *result);

/* A modern result of a cacheable method (tools/list, resources/list, resources/read,
 * resources/templates/list) says how long the client may keep it: ttlMs (ms; 0: not at all)
 * and cacheScope "private" (it describes this user's sandbox and configuration). Legacy
 * results are left as they are. result stolen and returned. */
json_t *era_cacheable(const struct era *e, json_t *result, long ttl_ms);

/* The server's identity (new reference); `title` is left out for revisions before 2025-06-18. */
json_t *era_server_info(bool with_title);

/* Sends one log line to the client as notifications/message (either era). */
void era_send_log(int level, const char *msg);

#endif
