#include "curlhttp.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../src/base/clock.h"
#include "../../src/base/version.h"
#include "libcurl.h"

#define TRANSPORT_RETRIES 2
#define RATE_RETRIES 3
#define RETRY_AFTER_MAX_MS 10000
#define CONNECT_TIMEOUT_MS 5000L

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;
static char curl_why[256];

static void curl_init(void)
{
	if (libcurl_load(curl_why, sizeof curl_why) == 0)
		curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Frees a header list, wiping each entry first: one may hold a key. NULL is fine. */
static void wipe_free(struct curl_slist *list)
{
	for (struct curl_slist *l = list; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(list);
}

int curlhttp_open(struct curlhttp *h, const char *unix_socket, struct err *e)
{
	memset(h, 0, sizeof *h);
	h->cancel_fd = -1;
	if (unix_socket && strlen(unix_socket) >= sizeof h->unix_socket)
		return err_set(e, "the socket path %s is too long", unix_socket);
	snprintf(h->unix_socket, sizeof h->unix_socket, "%s", unix_socket ? unix_socket : "");
	pthread_once(&curl_once, curl_init);
	if (curl_why[0])
		return err_set(e, "%s", curl_why);
	if (curl_init_rc != CURLE_OK)
		return err_set(e, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	if (!(h->curl = curl_easy_init()) || !(h->multi = curl_multi_init())) {
		curlhttp_close(h);
		return err_set(e, "libcurl: cannot create a handle");
	}
	return 0;
}

int curlhttp_header(struct curlhttp *h, const char *line, struct err *e)
{
	struct curl_slist *n = curl_slist_append(h->headers, line);
	if (!n)
		return err_set(e, "out of memory");
	h->headers = n;
	return 0;
}

void curlhttp_close(struct curlhttp *h)
{
	if (h->tunnel)
		curl_easy_cleanup(h->tunnel);
	h->tunnel = NULL;
	for (int i = 0; i < 3; i++) {
		if (h->tls[i])
			explicit_bzero(h->tls[i], h->tls_len[i]);
		free(h->tls[i]);
		h->tls[i] = NULL;
	}
	if (h->curl)
		curl_easy_cleanup(h->curl);
	if (h->multi)
		curl_multi_cleanup(h->multi);
	h->curl = h->multi = NULL;
	wipe_free(h->headers);
	h->headers = NULL;
}

/* ---------------------------------------------------------------- one attempt */

/* What an attempt gathers besides the answer. */
struct attempt {
	const struct http_req *rq;
	char *buf;                /* the body, up to rq->max_body */
	size_t len, cap;
	bool overflow;
	long retry_after_ms;      /* -1: none */
	char errbuf[CURL_ERROR_SIZE];
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct attempt *a = ud;
	size_t n = size * nmemb;
	if (a->rq->on_data)
		return a->rq->on_data(p, n, a->rq->ctx);
	if (a->len + n > a->rq->max_body) {
		a->overflow = true;
		return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
	}
	if (a->len + n + 1 > a->cap) {
		size_t nc = a->cap ? a->cap : 4096;
		while (nc < a->len + n + 1)
			nc *= 2;
		nc = nc > a->rq->max_body + 1 ? a->rq->max_body + 1 : nc;
		char *nb = realloc(a->buf, nc);
		if (!nb)
			return 0;
		a->buf = nb;
		a->cap = nc;
	}
	memcpy(a->buf + a->len, p, n);
	a->len += n;
	a->buf[a->len] = '\0';
	return n;
}

/* Reads Retry-After (seconds; Daytona's rate limiter also sends Retry-After-<throttler>). */
static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct attempt *a = ud;
	size_t n = size * nmemb;
	const char *colon = n > 12 && !strncasecmp(p, "retry-after", 11) ? memchr(p, ':', n) : NULL;
	if (colon) {
		char v[32];
		size_t l = n - (size_t)(colon + 1 - p);
		l = l >= sizeof v ? sizeof v - 1 : l;
		memcpy(v, colon + 1, l);
		v[l] = '\0';
		char *end;
		double s = strtod(v, &end);
		long ms = (long)(s * 1000);
		if (end != v && s >= 0 && s < 86400 && ms > a->retry_after_ms)
			a->retry_after_ms = ms;
	}
	return n;
}

/* curl_easy_perform, but ended at once when h->cancel_fd turns readable. Every request goes
 * through the client's one multi handle, cancellable or not: connections live in a multi
 * handle's cache, so one made for a request alone would close its connection with it, and
 * the next request would connect (and shake hands) again. */
static CURLcode perform_cancellable(struct curlhttp *h)
{
	CURLM *m = h->multi;
	CURLcode rc = CURLE_OK;
	if (curl_multi_add_handle(m, h->curl) != CURLM_OK)
		return CURLE_FAILED_INIT;
	for (int running = 1; running;) {
		struct curl_waitfd w = {.fd = h->cancel_fd, .events = CURL_WAIT_POLLIN};
		if (curl_multi_perform(m, &running) != CURLM_OK)
			rc = CURLE_FAILED_INIT;
		else if (running && curl_multi_poll(m, &w, h->cancel_fd >= 0 ? 1 : 0, 1000, NULL) != CURLM_OK)
			rc = CURLE_FAILED_INIT;
		else if (running && w.revents)
			h->cancelled = true, rc = CURLE_ABORTED_BY_CALLBACK;
		if (rc != CURLE_OK)
			break;
	}
	int left;
	CURLMsg *msg;
	while (!h->cancelled && (msg = curl_multi_info_read(m, &left)))
		if (msg->msg == CURLMSG_DONE)
			rc = msg->data.result;
	curl_multi_remove_handle(m, h->curl);
	return rc;
}

/* The body as a multipart form, or NULL (then *rc says why). */
static curl_mime *make_mime(CURL *c, const struct http_req *rq, CURLcode *rc)
{
	curl_mime *mime = curl_mime_init(c);
	for (size_t i = 0; mime && i < rq->nparts; i++) {
		const struct http_part *pt = &rq->parts[i];
		curl_mimepart *p = curl_mime_addpart(mime);
		if (!p || (*rc = curl_mime_name(p, pt->name)) ||
		    (*rc = curl_mime_data(p, pt->len ? pt->data : "", pt->len)) ||
		    (pt->filename && ((*rc = curl_mime_filename(p, pt->filename)) ||
				      (*rc = curl_mime_type(p, "application/octet-stream"))))) {
			curl_mime_free(mime);
			return NULL;
		}
	}
	return mime;
}

int curlhttp_tls(struct curlhttp *h, const char *const v[3], const size_t n[3], struct err *e)
{
	for (int i = 0; i < 3; i++) {
		if (!n[i])
			continue;
		if (!(h->tls[i] = malloc(n[i])))
			return err_set(e, "out of memory");
		memcpy(h->tls[i], v[i], n[i]);
		h->tls_len[i] = n[i];
	}
	return 0;
}

/* The TLS material on handle c: the CA instead of the system's, the client certificate. */
static CURLcode tls_options(struct curlhttp *h, CURL *c)
{
	CURLcode rc = CURLE_OK;
	struct curl_blob ca = {h->tls[0], h->tls_len[0], CURL_BLOB_COPY}, cert = {h->tls[1], h->tls_len[1], CURL_BLOB_COPY},
			 key = {h->tls[2], h->tls_len[2], CURL_BLOB_COPY};
	if (h->tls[0] && ((rc = curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca)) ||
			  (rc = curl_easy_setopt(c, CURLOPT_CAPATH, NULL)) || (rc = curl_easy_setopt(c, CURLOPT_CAINFO, NULL))))
		return rc;
	if (h->tls[1] && ((rc = curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert)) ||
			  (rc = curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM"))))
		return rc;
	if (h->tls[2] && ((rc = curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key)) ||
			  (rc = curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM"))))
		return rc;
	return rc;
}

int curlhttp_tunnel(struct curlhttp *h, const char *url, long timeout_ms, struct err *e)
{
	char errbuf[CURL_ERROR_SIZE] = "";
	CURL *c = h->tunnel ? h->tunnel : curl_easy_init();
	if (!c)
		return err_set(e, "libcurl: cannot create a handle");
	h->tunnel = c;
	long connect_ms = timeout_ms < CONNECT_TIMEOUT_MS ? timeout_ms : CONNECT_TIMEOUT_MS;
	CURLcode rc;
	if ((rc = curl_easy_setopt(c, CURLOPT_URL, url)) || (rc = curl_easy_setopt(c, CURLOPT_CONNECT_ONLY, 1L)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L)) || (rc = curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https")) ||
	    (rc = curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf)) || (rc = tls_options(h, c)) ||
	    (rc = curl_easy_perform(c))) {
		err_set(e, "%s%s%s", curl_easy_strerror(rc), errbuf[0] ? ": " : "", errbuf);
		curl_easy_cleanup(c);
		h->tunnel = NULL;
		return -1;
	}
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, NULL);
	return 0;
}

#define PUMP_BUF (1 << 16)

/* One way of the pump: bytes taken, not yet passed on. */
struct way {
	char *p;
	size_t off, len;
};

void curlhttp_pump(struct curlhttp *h, int fd)
{
	CURL *c = h->tunnel;
	curl_socket_t s = CURL_SOCKET_BAD;
	if (!c || curl_easy_getinfo(c, CURLINFO_ACTIVESOCKET, &s) != CURLE_OK || s == CURL_SOCKET_BAD)
		return;
	/* Neither way waits on the other: a peer that reads only once its own send went through
	 * (the server's relay, sending while the pod prints) would otherwise wait on this one as
	 * this one waits on it. Each way holds at most one buffer; fd is written without waiting. */
	struct way down = {malloc(PUMP_BUF), 0, 0}, up = {malloc(PUMP_BUF), 0, 0};
	int fl = fcntl(fd, F_GETFL);
	if (!down.p || !up.p || fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		goto out;
	/* A far end that stops taking bytes (it closed after its last answer) ends the way up
	 * only: fd's peer then fails its sends, and what the far end said before it closed is
	 * still carried down, to the tunnel's end. */
	bool up_open = true;
	for (;;) {
		/* The tunnel to fd. What TLS has decrypted already is read before waiting: the socket
		 * may say nothing more while the library holds a whole record. */
		if (down.off == down.len) {
			size_t got = 0;
			CURLcode rc = curl_easy_recv(c, down.p, PUMP_BUF, &got);
			if (rc != CURLE_AGAIN && (rc != CURLE_OK || got == 0))
				break;
			down.off = 0;
			down.len = rc == CURLE_OK ? got : 0;
		}
		if (down.off < down.len) {
			ssize_t w = write(fd, down.p + down.off, down.len - down.off);
			if (w < 0 && errno != EINTR && errno != EAGAIN)
				break;
			if (w > 0)
				down.off += (size_t)w;
		}
		/* fd to the tunnel. */
		if (up_open && up.off == up.len) {
			ssize_t n = read(fd, up.p, PUMP_BUF);
			if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
				break;
			up.off = 0;
			up.len = n > 0 ? (size_t)n : 0;
		}
		if (up_open && up.off < up.len) {
			size_t sent = 0;
			CURLcode rc = curl_easy_send(c, up.p + up.off, up.len - up.off, &sent);
			if (rc == CURLE_OK)
				up.off += sent;
			else if (rc != CURLE_AGAIN) {
				up_open = false;
				up.off = up.len = 0;
				shutdown(fd, SHUT_RD);
			}
		}
		/* Wait only when neither way can move now. */
		bool down_room = down.off == down.len, up_room = up.off == up.len;
		struct pollfd p[2] = {{fd, (short)((up_open && up_room ? POLLIN : 0) | (down_room ? 0 : POLLOUT)), 0},
				      {s, (short)((down_room ? POLLIN : 0) | (up_room ? 0 : POLLOUT)), 0}};
		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		/* With the way up ended, fd's peer gone (hung up) would read nothing more: done, and
		 * no poll that returns at once for good. */
		if (!up_open && (p[0].revents & (POLLHUP | POLLERR)))
			break;
	}
out:
	if (down.p)
		explicit_bzero(down.p, PUMP_BUF);
	if (up.p)
		explicit_bzero(up.p, PUMP_BUF);
	free(down.p);
	free(up.p);
}

/* The options of one attempt. */
static CURLcode set_options(struct curlhttp *h, struct attempt *a, struct curl_slist *hl, const char *json,
			    curl_mime *mime)
{
	const struct http_req *rq = a->rq;
	CURL *c = h->curl;
	long connect_ms = rq->timeout_ms < CONNECT_TIMEOUT_MS ? rq->timeout_ms : CONNECT_TIMEOUT_MS;
	char ua[64];
	snprintf(ua, sizeof ua, "sandbox-mcp/%s", SANDBOX_MCP_VERSION);
	CURLcode rc;
	if ((rc = curl_easy_setopt(c, CURLOPT_URL, rq->url)) || (rc = curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl)) || (rc = curl_easy_setopt(c, CURLOPT_USERAGENT, ua)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L)) || (rc = curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, rq->timeout_ms)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, h->unix_socket[0] ? "http" : "http,https")) ||
	    (rc = curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L)) || (rc = curl_easy_setopt(c, CURLOPT_ERRORBUFFER, a->errbuf)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body)) || (rc = curl_easy_setopt(c, CURLOPT_WRITEDATA, a)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header)) || (rc = curl_easy_setopt(c, CURLOPT_HEADERDATA, a)))
		return rc;
	if (h->unix_socket[0] && (rc = curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, h->unix_socket)))
		return rc;
	if ((rc = tls_options(h, c)))
		return rc;
	if (rq->fresh && ((rc = curl_easy_setopt(c, CURLOPT_FRESH_CONNECT, 1L)) ||
			  (rc = curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L))))
		return rc;
	if (json && ((rc = curl_easy_setopt(c, CURLOPT_POSTFIELDS, json)) ||
		     (rc = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(json)))))
		return rc;
	if (!json && !mime && !strcmp(rq->method, "POST") && ((rc = curl_easy_setopt(c, CURLOPT_POSTFIELDS, "")) ||
							     (rc = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L))))
		return rc;
	if (mime && (rc = curl_easy_setopt(c, CURLOPT_MIMEPOST, mime)))
		return rc;
	if (!strcmp(rq->method, "GET"))
		return curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	return CURLE_OK;
}

/* What went wrong, in libcurl's words and the system's. */
static void failure(struct curlhttp *h, struct attempt *a, CURLcode rc, struct err *e)
{
	const char *what = curl_easy_strerror(rc);
	long oserr = 0;
	char os[128] = "";
	if (curl_easy_getinfo(h->curl, CURLINFO_OS_ERRNO, &oserr) == CURLE_OK && oserr)
		snprintf(os, sizeof os, " (%s)", strerror((int)oserr));
	if (a->overflow)
		err_set(e, "the answer was larger than %zu bytes", a->rq->max_body);
	else if (!a->errbuf[0])
		err_set(e, "%s%s", what, os);
	else if (strstr(a->errbuf, what))
		err_set(e, "%s%s", a->errbuf, os);
	else
		err_set(e, "%s: %s%s", what, a->errbuf, os);
}

/* One attempt. CURLE_OK with rs set, or the CURLcode (e set) when no answer came. */
static CURLcode attempt(struct curlhttp *h, struct attempt *a, struct http_resp *rs, struct err *e)
{
	const struct http_req *rq = a->rq;
	char *json = NULL;
	curl_mime *mime = NULL;
	struct curl_slist *hl = h->headers, *own = NULL;
	CURLcode rc = CURLE_OUT_OF_MEMORY;
	curl_easy_reset(h->curl);
	if (rq->json) {
		/* The shared list must not grow per request: a private copy, with the type. */
		if (!(json = json_dumps(rq->json, JSON_COMPACT)))
			goto out;
		for (struct curl_slist *p = h->headers;; p = p->next) {
			struct curl_slist *n = curl_slist_append(own, p ? p->data : "Content-Type: application/json");
			if (!n)
				goto out;
			hl = own = n;
			if (!p)
				break;
		}
	}
	if (rq->nparts && !(mime = make_mime(h->curl, rq, &rc)))
		goto out;
	if ((rc = set_options(h, a, hl, json, mime)) == CURLE_OK)
		rc = perform_cancellable(h);
	if (rc == CURLE_OK)
		rc = curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &rs->status);
	if (rc == CURLE_OK && !(rs->body = a->buf ? a->buf : strdup("")))
		rc = CURLE_OUT_OF_MEMORY;
	if (rc == CURLE_OK) {
		a->buf = NULL;
		rs->len = a->len;
	}
out:
	if (rc != CURLE_OK)
		failure(h, a, rc, e);
	free(json);
	curl_mime_free(mime);
	wipe_free(own);
	return rc;
}

/* ---------------------------------------------------------------- retries */

static bool idempotent(const char *method)
{
	return !strcmp(method, "GET") || !strcmp(method, "HEAD") || !strcmp(method, "PUT") ||
	       !strcmp(method, "DELETE") || !strcmp(method, "OPTIONS");
}

/* A failure before anything was sent (any method may go again), or after (idempotent ones). */
static bool may_retry(CURLcode rc, const char *method)
{
	if (rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY)
		return true;
	return (rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
		rc == CURLE_PARTIAL_FILE) && idempotent(method);
}

/* Sleeps ms, or less when h->cancel_fd turns readable (then h->cancelled is set). */
static void sleep_ms(struct curlhttp *h, int64_t ms)
{
	int64_t until = clock_ms() + ms;
	for (int64_t left = ms; left > 0 && !h->cancelled; left = until - clock_ms()) {
		struct pollfd p = {h->cancel_fd, POLLIN, 0};
		if (poll(&p, h->cancel_fd >= 0 ? 1 : 0, (int)left) > 0)
			h->cancelled = true;
	}
}

static unsigned jitter(void)
{
	unsigned r = 0;
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
		r = (unsigned)clock_ms();
	return r % 100;
}

/* How long to wait before trying again, or -1 to stop here. */
static int64_t next_wait(const struct http_req *rq, CURLcode rc, const struct http_resp *rs, long retry_after_ms,
			 int *transport, int *rate, int64_t deadline)
{
	int64_t wait = -1;
	if (rq->retry != HTTP_RETRY_SAFE)
		return -1;
	if (rc == CURLE_OK && rs->status == 429 && *rate < RATE_RETRIES) {
		wait = retry_after_ms >= 0 ? retry_after_ms : 1000L << *rate;
		wait = wait > RETRY_AFTER_MAX_MS ? -1 : wait;
		(*rate)++;
	} else if (rc != CURLE_OK && may_retry(rc, rq->method) && *transport < TRANSPORT_RETRIES) {
		wait = 250 * (*transport + 1) + jitter();
		(*transport)++;
	}
	return wait >= 0 && clock_ms() + wait < deadline ? wait : -1;
}

int curlhttp_call(struct curlhttp *h, const struct http_req *rq, struct http_resp *rs, struct err *e)
{
	memset(rs, 0, sizeof *rs);
	if (!h->curl)
		return err_set(e, "the HTTP client is closed");
	int64_t deadline = rq->deadline_ms ? rq->deadline_ms : clock_ms() + rq->timeout_ms;
	int transport = 0, rate = 0;
	h->cancelled = false;
	for (;;) {
		struct attempt a = {.rq = rq, .retry_after_ms = -1};
		struct err ae = {""};
		CURLcode rc = attempt(h, &a, rs, &ae);
		free(a.buf);
		if (h->cancelled)
			return err_set(e, "cancelled");
		int64_t wait = next_wait(rq, rc, rs, a.retry_after_ms, &transport, &rate, deadline);
		if (wait < 0)
			return rc == CURLE_OK ? 0 : err_set(e, "%s", ae.msg);
		http_resp_free(rs);
		sleep_ms(h, wait);
		if (h->cancelled)
			return err_set(e, "cancelled");
	}
}
