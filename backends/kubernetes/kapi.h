/*
 * The Kubernetes API's REST side on the backends' HTTP client (http.h): the credentials of
 * kcreds.h (the bearer token in the client's header list, the CA and client certificate in its
 * TLS material: both reach the HTTP helper over its socket alone and are wiped at close), JSON
 * requests on paths of the API, and the API's errors (a metav1.Status) in words.
 *
 * Not thread-safe: one struct kapi per thread.
 */
#ifndef SANDBOX_KUBERNETES_KAPI_H
#define SANDBOX_KUBERNETES_KAPI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "../../src/base/err.h"
#include "../http/http.h"
#include "kcreds.h"

#define KAPI_BODY_MAX (4u << 20)

struct kapi {
	struct kcreds creds;     /* owned */
	struct http http;        /* its cancel_fd: while >= 0, a request ends when it turns readable */
	bool open;
};

/* Takes c (c is left empty) and prepares the client. 0, or -1 with e set. */
int kapi_open(struct kapi *a, struct kcreds *c, struct err *e);

/* One request on path (from "/api" or "/apis", escaped) with body (borrowed; NULL: none),
 * timeout_ms in all. on_data: the answer's body streamed to it instead of kept (http.h).
 * Reads are retried (HTTP_RETRY_SAFE); a POST is sent once. 0 with rs set (any status), -1
 * with e set when no answer came. */
int kapi_call(struct kapi *a, const char *method, const char *path, json_t *body, long timeout_ms,
	      size_t (*on_data)(const char *p, size_t n, void *ctx), void *ctx, struct http_resp *rs, struct err *e);

/* Sets e to "WHAT: HTTP <status> <reason>: <message>" from the metav1.Status in rs. -1. */
int kapi_fail(const struct http_resp *rs, const char *what, struct err *e);

void kapi_close(struct kapi *a);

#endif
