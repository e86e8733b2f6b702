/*
 * Daytona's REST API and its toolbox proxy, on the backends' HTTP client (http.h): the
 * variables the official SDKs read (DAYTONA_API_KEY, DAYTONA_API_URL, DAYTONA_TARGET), the
 * headers they send, the toolbox's bulk upload, and Daytona's error texts.
 *
 * The API key lives only in the client's header list: it is never logged, never put into an
 * error text, never passed to a process but the server's own HTTP helper (http.h), over its
 * socket, and it is wiped when the client closes.
 *
 * Every request retries what cannot run twice (HTTP_RETRY_SAFE); everything else, whatever the
 * status, is handed to the caller. Not thread-safe: one struct rest per thread.
 */
#ifndef SANDBOX_DAYTONA_REST_H
#define SANDBOX_DAYTONA_REST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../src/base/err.h"
#include "../http/http.h"

#define DT_DEFAULT_API_URL "https://app.daytona.io/api"
/* The API revision this client follows. Sent as X-Daytona-SDK-Version: the toolbox daemon
 * compares it as semver and, from 0.167.0 on, answers session logs with stdout and stderr
 * apart instead of merged (API_NOTES.md §3.3). */
#define DT_API_REVISION "0.218.0"

struct rest {
	char api[1024];          /* API base URL, no trailing slash */
	char target[64];         /* DAYTONA_TARGET, "" for the organization's default */
	struct http http;        /* its cancel_fd: while >= 0, a request ends when it turns readable */
};

/* One file of a toolbox bulk upload (multipart files[i].path and files[i].file). */
struct rest_file {
	const char *path;        /* destination inside the sandbox */
	const void *data;        /* borrowed */
	size_t len;
};

struct rest_req {
	const char *method;      /* GET, POST, DELETE, PUT */
	const char *url;         /* absolute URL (rest_url builds API ones) */
	json_t *json;            /* JSON body, borrowed; NULL for none */
	const struct rest_file *files; /* a bulk upload's files instead, or NULL */
	size_t nfiles;
	long timeout_ms;         /* whole request, each attempt */
	size_t max_body;         /* largest answer accepted */
	int64_t deadline_ms;     /* monotonic; no retry wait goes past it; 0: timeout_ms from now */
	bool fresh;              /* a connection of its own: a request that must not run twice (http.h) */
};

/* Reads the environment and prepares the headers. -1 with e set when DAYTONA_API_KEY is
 * unset or empty, or the URL is not http(s). */
int rest_open(struct rest *r, struct err *e);
void rest_close(struct rest *r);

/* An API URL: base + path (path starts with '/', already escaped). Caller frees. */
char *rest_url(const struct rest *r, const char *path);

/* One request (see http_call). */
int rest_call(struct rest *r, const struct rest_req *rq, struct http_resp *rs, struct err *e);

/* Whether the name s travels as it is in the toolbox's JSON and multipart fields: UTF-8, no
 * control byte. */
bool rest_name_ok(const char *s);

/* Sets e to "WHAT: HTTP <status>: <message of the answer>" with a hint for 401/403/404/429/5xx.
 * Returns -1. */
int rest_fail(const struct http_resp *rs, const char *what, struct err *e);

#endif
