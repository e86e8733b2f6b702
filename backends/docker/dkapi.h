/*
 * A small client of the Docker Engine API over the engine's unix socket, on the backends' HTTP
 * client (http.h). Podman's Docker-compatible socket speaks the same API. Only unix sockets are supported: the Docker
 * backend talks to its agents through host folders, so the engine must run on this machine.
 *
 * The socket comes from DOCKER_HOST (unix://PATH only); without it the usual places are tried:
 * /var/run/docker.sock, $XDG_RUNTIME_DIR/docker.sock (rootless Docker),
 * $XDG_RUNTIME_DIR/podman/podman.sock and /run/podman/podman.sock. dkapi_open asks GET /version
 * and then uses the engine's own API version in every path (/v<ApiVersion>/...).
 *
 * Every answer body is bounded (DKAPI_BODY_MAX); every call has a timeout. Not thread-safe: one
 * struct dkapi per thread.
 */
#ifndef SANDBOX_DOCKER_DKAPI_H
#define SANDBOX_DOCKER_DKAPI_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/un.h>

#include "../../src/base/err.h"
#include "../http/http.h"

#define DKAPI_BODY_MAX (8u << 20)

struct dkapi {
	char sock[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* the engine's socket */
	char api[24];       /* "/v1.41" once negotiated */
	char version[64];   /* the engine's version, for --check */
	char name[32];      /* "Docker Engine" or "Podman Engine", for messages */
	struct http http;   /* its cancel_fd: while >= 0, a call ends at once when it turns readable */
	bool open;          /* http is usable */
};

/* A closed client: no socket chosen, no cancel fd. */
void dkapi_init(struct dkapi *d);

/* Finds the socket (see above) without connecting. 0, or -1 with e saying why (DOCKER_HOST
 * not unix://, no socket found). */
int dkapi_locate(struct dkapi *d, struct err *e);

/* dkapi_locate, then GET /version within timeout_ms; negotiates the API version. */
int dkapi_open(struct dkapi *d, long timeout_ms, struct err *e);

/*
 * Calls give up at once when d->http.cancel_fd turns readable: -1 with d->http.cancelled set.
 *
 * One API call: METHOD /v<api>PATH (path starts with '/', query included, already escaped),
 * with body as JSON when not NULL. *status gets the HTTP status; *out (may be NULL) the answer
 * parsed as JSON, or NULL when it was empty or not JSON. Returns 0 when the engine answered
 * (whatever the status), -1 with e set when it could not be reached or the answer was too large.
 */
int dkapi_call(struct dkapi *d, const char *method, const char *path, json_t *body, long timeout_ms,
	    long *status, json_t **out, struct err *e);

/* Calls that must run whatever the caller's cancellation says (removing what a cancelled
 * making left): dkapi_hold_cancel turns d->http.cancel_fd off, dkapi_release_cancel puts it and
 * d->http.cancelled back as they were, so that the caller still sees its cancellation. */
struct dkapi_held {
	int cancel_fd;
	bool cancelled;
};
struct dkapi_held dkapi_hold_cancel(struct dkapi *d);
void dkapi_release_cancel(struct dkapi *d, struct dkapi_held held);

/* The engine's error text of a failed call ("message" of the answer), or a fallback. */
const char *dkapi_message(const json_t *answer, const char *fallback);

/* Pulls image (name[:tag] or name@digest), waiting up to timeout_ms. 0, or -1 with the
 * engine's reason in e. */
int dkapi_pull(struct dkapi *d, const char *image, long timeout_ms, struct err *e);

void dkapi_close(struct dkapi *d);

#endif
