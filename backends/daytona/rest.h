/*
 * A small REST client for Daytona's control-plane API and its toolbox proxy, with libcurl and
 * jansson. It reads the variables the official SDKs read (DAYTONA_API_KEY, DAYTONA_API_URL,
 * DAYTONA_TARGET) and sends the headers they send (see dt_http_open).
 *
 * The API key lives only in this struct's header list: it is never logged, never put into an
 * error text, never passed to a process. Every answer body is bounded (max_body); every call
 * has a timeout.
 *
 * Retries are limited to what cannot run a request twice: a failure to connect (nothing was
 * sent) for any method; a connection reset or an empty answer for idempotent methods only;
 * and 429, after Retry-After, for any method (the request was refused, not run). Everything
 * else, whatever the status, is handed to the caller.
 *
 * Not thread-safe: one struct dt_http per thread (the backend's calls all run on one thread).
 */
#ifndef SANDBOX_DAYTONA_HTTP_H
#define SANDBOX_DAYTONA_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../src/base/err.h"

#define DT_DEFAULT_API_URL "https://app.daytona.io/api"
/* The API revision this client follows. Sent as X-Daytona-SDK-Version: the toolbox daemon
 * compares it as semver and, from 0.167.0 on, answers session logs with stdout and stderr
 * apart instead of merged (API_NOTES.md §3.3). */
#define DT_API_REVISION "0.218.0"

struct dt_http {
	char api[1024];          /* API base URL, no trailing slash */
	char target[64];         /* DAYTONA_TARGET, "" for the organization's default */
	void *curl;              /* CURL *, reused for keep-alive; NULL when closed */
	void *headers;           /* struct curl_slist *: Authorization and the SDK headers */
	int cancel_fd;           /* while >= 0: a call ends at once when it turns readable */
	bool cancelled;          /* the last call ended so */
};

/* One file of a multipart bulk upload. */
struct dt_part {
	const char *path;        /* destination inside the sandbox */
	const void *data;        /* borrowed */
	size_t len;
};

struct dt_req {
	const char *method;      /* GET, POST, DELETE, PUT */
	const char *url;         /* absolute URL (dt_http_url builds API ones) */
	json_t *json;            /* JSON body, borrowed; NULL for none */
	const struct dt_part *parts; /* multipart files[i].path/files[i].file parts, or NULL */
	size_t nparts;
	long timeout_ms;         /* whole request, each attempt */
	size_t max_body;         /* largest answer accepted */
	int64_t deadline_ms;     /* monotonic; no retry wait goes past it; 0: timeout_ms from now */
};

struct dt_resp {
	long status;
	char *body;              /* NUL-terminated; owned, free with dt_resp_free */
	size_t len;
	json_t *json;            /* the body parsed, or NULL (not JSON, empty); owned */
};

/* Reads the environment and prepares the headers. -1 with e set when DAYTONA_API_KEY is
 * unset or empty, or the URL is not http(s). */
int dt_http_open(struct dt_http *h, struct err *e);
void dt_http_close(struct dt_http *h);

/* An API URL: base + path (path starts with '/', already escaped). Caller frees. */
char *dt_http_url(const struct dt_http *h, const char *path);

/* Escapes s for a query value or a path segment. Caller frees. NULL when out of memory. */
char *dt_http_escape(const char *s);

/*
 * One request, with the retries above. 0 when an answer came (any status; rs filled), -1 with
 * e set when none did (cannot connect, timed out, answer too large, or h->cancel_fd turned
 * readable: then h->cancelled is set, at once, with no retry). rs is always safe to
 * dt_resp_free afterwards.
 */
int dt_http_call(struct dt_http *h, const struct dt_req *rq, struct dt_resp *rs, struct err *e);

/* Sets e to "WHAT: HTTP <status>: <message of the answer>" with a hint for 401/403/404/429/5xx.
 * Returns -1. */
int dt_http_fail(const struct dt_resp *rs, const char *what, struct err *e);

void dt_resp_free(struct dt_resp *rs);

#endif
