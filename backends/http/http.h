/*
 * The one HTTP client of the backends that speak HTTP (Docker's Engine API on its unix socket,
 * Daytona's REST API over TCP):
 *
 *  - every answer is bounded (max_body), or streamed to the caller (on_data);
 *  - every request has a timeout, and ends at once when the cancel fd turns readable;
 *  - a failure says what libcurl saw ("Failed to connect to 127.0.0.1 port 9 after 0 ms:
 *    Couldn't connect to server (Connection refused)"), never just a code;
 *  - retries are the request's choice (enum http_retry), and never repeat what may have run
 *    (a request that must not run twice goes on a connection of its own: fresh).
 *
 * The requests run in a helper process (helper.h) with libcurl, so that the server never maps
 * libcurl and the libraries below it. A client starts its helper at its first request, and
 * the helper ends once idle for HTTP_LINGER_UNIX_MS (a unix socket: a new connection costs
 * nothing) or HTTP_LINGER_TCP_MS (TCP: it keeps the connections, and their TLS sessions, for
 * the requests that follow); the next request starts another. A helper that ends, or is
 * killed, before it takes a request is started again for it; a request it took and did not
 * answer fails. Cancelling a request ends its helper. A helper that ended is reaped at the
 * client's next request or at its close.
 *
 * Headers given with http_header go with every request; they go to the helper over its socket,
 * never through its command line or environment, and are wiped from memory when the client
 * closes (they may hold a key). Not thread-safe: one struct http per thread.
 */
#ifndef SANDBOX_HTTP_H
#define SANDBOX_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../src/base/err.h"

#define HTTP_LINGER_UNIX_MS 1000
#define HTTP_LINGER_TCP_MS 60000

struct http {
	bool open;
	char unix_socket[108];   /* the server's socket; "" for TCP */
	char **headers;          /* sent with every request */
	size_t nheaders;
	int fd;                  /* the helper's socket; -1 while none runs */
	pid_t pid;               /* the helper; 0 while none runs */
	bool stale;              /* the headers changed since the helper started */
	int cancel_fd;           /* while >= 0: a request ends at once when it turns readable */
	bool cancelled;          /* the last request ended so */
	char *tls[3];            /* PEM: the CA, the client certificate, its key; NULL: none.
	                          * Owned, wiped at close */
	size_t tls_len[3];
	bool tunnel;             /* fd is a tunnel (http_tunnel): no more requests */
};

enum http_retry {
	HTTP_ONCE,               /* one attempt, whatever happens */
	/* Again only what cannot run twice: a failure to connect (nothing was sent; any method, 2
	 * more tries, 250 ms x try + jitter apart), a reset or empty answer (GET, HEAD, PUT,
	 * DELETE, OPTIONS only), and 429 after its Retry-After (3 more, each wait at most 10 s). */
	HTTP_RETRY_SAFE,
};

/* One part of a multipart/form-data body. */
struct http_part {
	const char *name;
	const char *filename;    /* NULL: a plain field */
	const void *data;        /* borrowed */
	size_t len;
};

struct http_req {
	const char *method;      /* GET, POST, PUT, DELETE ... */
	const char *url;         /* absolute; for a unix socket, http://localhost/PATH */
	json_t *json;            /* JSON body, borrowed; NULL for none */
	const struct http_part *parts; /* a multipart body instead, or NULL */
	size_t nparts;
	long timeout_ms;         /* each attempt, whole */
	size_t max_body;         /* largest answer kept */
	int64_t deadline_ms;     /* monotonic: no retry wait goes past it; 0: timeout_ms from now */
	enum http_retry retry;
	/* A connection of its own, closed after the answer: for a request that must not run twice.
	 * libcurl sends a request again, by itself, when a reused connection dies before any answer
	 * came, which may be after the server did the work (a reset after processing); on a new
	 * connection it never does. */
	bool fresh;
	/* The answer's body in chunks instead of kept (rs->body stays empty). Returns n to go on. */
	size_t (*on_data)(const char *p, size_t n, void *ctx);
	void *ctx;
};

struct http_resp {
	long status;
	char *body;              /* NUL-terminated; owned, free with http_resp_free */
	size_t len;
	json_t *json;            /* the body parsed (any JSON value), or NULL; owned */
};

/* A client of the server at unix_socket (NULL or "": TCP, by each request's URL). 0, or -1
 * (a socket path too long). Nothing starts until the first request. */
int http_open(struct http *h, const char *unix_socket, struct err *e);

/* Adds a header line ("Name: value") sent with every request. 0, or -1 when out of memory. */
int http_header(struct http *h, const char *line, struct err *e);

/* TLS for every request and tunnel: the CA that signs the server's certificate (PEM, instead
 * of the system's; NULL: the system's), and a client certificate with its key (PEM; NULL:
 * none). Copied (and wiped at close); they reach the helper over its socket only. 0, or -1
 * when out of memory. */
int http_tls(struct http *h, const char *ca, size_t ca_len, const char *cert, size_t cert_len, const char *key,
	     size_t key_len, struct err *e);

/* Turns the client into a tunnel: its helper connects to url's host (TLS for https://, with
 * http_tls's material; the path is not requested) within timeout_ms, and then h->fd carries
 * the connection's plain bytes both ways: the caller speaks HTTP on it (an Upgrade to a
 * WebSocket), the helper encrypts. The client takes no request after it; http_close ends the
 * connection. 0, or -1 with e saying why no connection was made (h is then closed as by
 * http_close's helper end, and may tunnel again). */
int http_tunnel(struct http *h, const char *url, long timeout_ms, struct err *e);

/*
 * One request, with the retries rq->retry allows. 0 when an answer came (any status; rs
 * filled), -1 with e set when none did (no connection, timed out, too large an answer, or the
 * cancel fd turned readable: then h->cancelled is set, at once, with no retry). rs is always
 * safe to http_resp_free afterwards.
 */
int http_call(struct http *h, const struct http_req *rq, struct http_resp *rs, struct err *e);

/* s escaped for a URL's query value or path segment. Caller frees; NULL when out of memory. */
char *http_escape(const char *s);

void http_resp_free(struct http_resp *rs);

/* Ends the helper (and with it the connections) and wipes the headers. Idempotent. */
void http_close(struct http *h);

#endif
