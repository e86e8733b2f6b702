/*
 * The libcurl client that does the work of http.h, in the HTTP helper process only (helper.h):
 * the server process itself never loads libcurl. Requests and answers as http.h says, but for
 * two things: an answer's body is not parsed (rs->json stays NULL), and the cancel fd is the
 * helper's control socket.
 *
 * Not thread-safe: the helper has one thread.
 */
#ifndef SANDBOX_HTTP_CURLHTTP_H
#define SANDBOX_HTTP_CURLHTTP_H

#include <stdbool.h>

#include "../../src/base/err.h"
#include "http.h"

struct curlhttp {
	void *curl;              /* CURL *, reused; NULL when closed */
	void *multi;             /* CURLM * every request goes through: its connections are kept
	                          * alive between requests; NULL when closed */
	void *headers;           /* struct curl_slist *: sent with every request */
	char unix_socket[108];   /* the server's socket; "" for TCP */
	int cancel_fd;           /* while >= 0: a request ends at once when it turns readable */
	bool cancelled;          /* the last request ended so */
	char *tls[3];            /* PEM: CA, client certificate, key (curlhttp_tls); owned, wiped */
	size_t tls_len[3];
	void *tunnel;            /* CURL * of the tunnel (curlhttp_tunnel); NULL when none */
};

/* Loads libcurl (once for the process) and makes a client. 0, or -1 with e saying why. */
int curlhttp_open(struct curlhttp *h, const char *unix_socket, struct err *e);

/* Adds a header line sent with every request. 0, or -1 when out of memory. */
int curlhttp_header(struct curlhttp *h, const char *line, struct err *e);

/* The TLS material of http_tls, copied: used by every request and the tunnel. 0, or -1. */
int curlhttp_tls(struct curlhttp *h, const char *const v[3], const size_t n[3], struct err *e);

/* Connects to url's host (http_tunnel) within timeout_ms. 0, or -1 with e set. */
int curlhttp_tunnel(struct curlhttp *h, const char *url, long timeout_ms, struct err *e);

/* Carries bytes between fd and the tunnel, both ways, until either ends (or fails); a far end
 * that stops taking bytes ends the way up alone (fd's reads are shut), the way down goes on. */
void curlhttp_pump(struct curlhttp *h, int fd);

/* One request with its retries, as http_call. */
int curlhttp_call(struct curlhttp *h, const struct http_req *rq, struct http_resp *rs, struct err *e);

/* Closes the connections and wipes the headers. Idempotent. */
void curlhttp_close(struct curlhttp *h);

#endif
