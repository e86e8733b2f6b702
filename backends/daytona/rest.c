#include "rest.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "../../src/base/version.h"
#include "../../src/base/clock.h"

/* Retries of transport failures (API_NOTES.md §6.3: the SDKs make 2, 250 ms x attempt + jitter). */
#define TRANSPORT_RETRIES 2
/* Retries of a 429 answer, each after its Retry-After (capped). */
#define RATE_RETRIES 3
#define RETRY_AFTER_MAX_MS 10000
#define CONNECT_TIMEOUT_MS 5000L

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* Frees a header list that holds the key, wiping every entry before it goes back to the
 * allocator. NULL is fine. */
static void wipe_free(struct curl_slist *list)
{
	for (struct curl_slist *l = list; l; l = l->next)
		explicit_bzero(l->data, strlen(l->data));
	curl_slist_free_all(list);
}

int dt_http_open(struct dt_http *h, struct err *e)
{
	memset(h, 0, sizeof *h);
	h->cancel_fd = -1;
	const char *key = getenv("DAYTONA_API_KEY");
	if (!key || !*key)
		return err_set(e, "DAYTONA_API_KEY is not set");
	if (strpbrk(key, "\r\n"))
		return err_set(e, "DAYTONA_API_KEY contains a line break");
	const char *url = getenv("DAYTONA_API_URL");
	if (!url || !*url)
		url = getenv("DAYTONA_SERVER_URL"); /* the SDKs' deprecated fallback */
	if (!url || !*url)
		url = DT_DEFAULT_API_URL;
	if (strncmp(url, "https://", 8) && strncmp(url, "http://", 7))
		return err_set(e, "DAYTONA_API_URL must start with https:// or http://");
	size_t n = strlen(url);
	while (n && url[n - 1] == '/')
		n--;
	if (n >= sizeof h->api)
		return err_set(e, "DAYTONA_API_URL is too long");
	memcpy(h->api, url, n);
	h->api[n] = '\0';
	const char *target = getenv("DAYTONA_TARGET");
	if (target && strlen(target) >= sizeof h->target)
		return err_set(e, "DAYTONA_TARGET is too long");
	snprintf(h->target, sizeof h->target, "%s", target ? target : "");

	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK)
		return err_set(e, "libcurl: %s", curl_easy_strerror(curl_init_rc));
	struct curl_slist *hl = NULL;
	size_t alen = strlen(key) + 32;
	char *auth = malloc(alen);
	if (!auth)
		return err_set(e, "out of memory");
	snprintf(auth, alen, "Authorization: Bearer %s", key);
	static const char *const fixed[] = {
		"X-Daytona-Source: sandbox-mcp",
		("X-Daytona-SDK-Version: " DT_API_REVISION),
		"Expect:",
	};
	struct curl_slist *t = curl_slist_append(hl, auth);
	/* The key is copied into the list; wipe our copy. explicit_bzero, not memset: a store to
	 * memory about to be freed is dead to the compiler, which may drop a memset. */
	explicit_bzero(auth, alen);
	free(auth);
	for (size_t i = 0; t && i < sizeof fixed / sizeof fixed[0]; i++) {
		hl = t;
		t = curl_slist_append(hl, fixed[i]);
	}
	if (!t) {
		wipe_free(hl);
		return err_set(e, "out of memory");
	}
	h->headers = t;
	h->curl = curl_easy_init();
	if (!h->curl) {
		dt_http_close(h);
		return err_set(e, "libcurl: cannot create a handle");
	}
	return 0;
}

void dt_http_close(struct dt_http *h)
{
	if (h->curl)
		curl_easy_cleanup(h->curl);
	h->curl = NULL;
	wipe_free(h->headers);
	h->headers = NULL;
}

char *dt_http_url(const struct dt_http *h, const char *path)
{
	size_t n = strlen(h->api) + strlen(path) + 1;
	char *u = malloc(n);
	if (u)
		snprintf(u, n, "%s%s", h->api, path);
	return u;
}

char *dt_http_escape(const char *s)
{
	char *c = curl_easy_escape(NULL, s, 0);
	if (!c)
		return NULL;
	char *r = strdup(c);
	curl_free(c);
	return r;
}

void dt_resp_free(struct dt_resp *rs)
{
	free(rs->body);
	json_decref(rs->json);
	memset(rs, 0, sizeof *rs);
}

struct sink {
	char *buf;
	size_t len, cap, max;
	bool overflow;
};

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
	struct sink *s = ud;
	size_t n = size * nmemb;
	if (s->len + n > s->max) {
		s->overflow = true;
		return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
	}
	if (s->len + n + 1 > s->cap) {
		size_t nc = s->cap ? s->cap : 4096;
		while (nc < s->len + n + 1)
			nc *= 2;
		if (nc > s->max + 1)
			nc = s->max + 1;
		char *nb = realloc(s->buf, nc);
		if (!nb)
			return 0;
		s->buf = nb;
		s->cap = nc;
	}
	memcpy(s->buf + s->len, p, n);
	s->len += n;
	s->buf[s->len] = '\0';
	return n;
}

struct hdrs {
	long retry_after_ms; /* -1: none */
};

/* Reads Retry-After (seconds; the rate limiter also sends Retry-After-<throttler>). */
static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
	struct hdrs *hd = ud;
	size_t n = size * nmemb;
	if (n > 12 && !strncasecmp(p, "retry-after", 11)) {
		const char *colon = memchr(p, ':', n);
		if (colon) {
			char v[32];
			size_t l = n - (size_t)(colon + 1 - p);
			if (l >= sizeof v)
				l = sizeof v - 1;
			memcpy(v, colon + 1, l);
			v[l] = '\0';
			char *end;
			double s = strtod(v, &end);
			if (end != v && s >= 0 && s < 86400) {
				long ms = (long)(s * 1000);
				if (hd->retry_after_ms < 0 || ms > hd->retry_after_ms)
					hd->retry_after_ms = ms;
			}
		}
	}
	return n;
}

static bool idempotent(const char *method)
{
	return !strcmp(method, "GET") || !strcmp(method, "HEAD") || !strcmp(method, "PUT") ||
	       !strcmp(method, "DELETE") || !strcmp(method, "OPTIONS");
}

/* Connect-phase failures: the request never left, so any method may be sent again. */
static bool connect_failure(CURLcode rc)
{
	return rc == CURLE_COULDNT_CONNECT || rc == CURLE_COULDNT_RESOLVE_HOST ||
	       rc == CURLE_COULDNT_RESOLVE_PROXY;
}

/* Failures after sending: safe to repeat only for idempotent methods. */
static bool reset_failure(CURLcode rc)
{
	return rc == CURLE_SEND_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_GOT_NOTHING ||
	       rc == CURLE_PARTIAL_FILE;
}

/* Sleeps ms, or less when h->cancel_fd turns readable (then h->cancelled is set). */
static void sleep_ms(struct dt_http *h, int64_t ms)
{
	int64_t until = clock_ms() + ms;
	for (int64_t left = ms; left > 0; left = until - clock_ms()) {
		struct pollfd p = {h->cancel_fd, POLLIN, 0};
		int r = poll(&p, h->cancel_fd >= 0 ? 1 : 0, (int)left);
		if (r > 0) {
			h->cancelled = true;
			return;
		}
	}
}

/* curl_easy_perform, but ended at once when h->cancel_fd turns readable. */
static CURLcode perform_cancellable(struct dt_http *h)
{
	if (h->cancel_fd < 0)
		return curl_easy_perform(h->curl);
	CURLM *m = curl_multi_init();
	if (!m)
		return CURLE_OUT_OF_MEMORY;
	CURLcode rc = CURLE_OK;
	if (curl_multi_add_handle(m, h->curl) != CURLM_OK) {
		curl_multi_cleanup(m);
		return CURLE_FAILED_INIT;
	}
	for (int running = 1; running;) {
		if (curl_multi_perform(m, &running) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		if (!running)
			break;
		struct curl_waitfd w = {.fd = h->cancel_fd, .events = CURL_WAIT_POLLIN};
		if (curl_multi_poll(m, &w, 1, 1000, NULL) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		if (w.revents) {
			h->cancelled = true;
			rc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
	}
	if (!h->cancelled) {
		int left;
		CURLMsg *msg;
		while ((msg = curl_multi_info_read(m, &left)))
			if (msg->msg == CURLMSG_DONE)
				rc = msg->data.result;
	}
	curl_multi_remove_handle(m, h->curl);
	curl_multi_cleanup(m);
	return rc;
}

static unsigned jitter(void)
{
	unsigned r = 0;
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
		r = (unsigned)clock_ms();
	return r % 100;
}

/* One attempt. 0 with rs set, or the CURLcode (e set) when no answer came. */
static CURLcode attempt(struct dt_http *h, const struct dt_req *rq, struct dt_resp *rs, struct hdrs *hd,
			struct err *e)
{
	CURL *c = h->curl;
	struct sink s = {.max = rq->max_body};
	char *body = NULL;
	curl_mime *mime = NULL;
	struct curl_slist *hl = h->headers, *extra = NULL;
	CURLcode rc = CURLE_OUT_OF_MEMORY;
	curl_easy_reset(c);
	hd->retry_after_ms = -1;
	if (rq->json) {
		body = json_dumps(rq->json, JSON_COMPACT);
		if (!body)
			goto out;
		/* The shared list must not grow per request: chain a private copy. */
		for (struct curl_slist *p = h->headers; p; p = p->next) {
			struct curl_slist *n = curl_slist_append(extra, p->data);
			if (!n)
				goto out;
			extra = n;
		}
		struct curl_slist *t = curl_slist_append(extra, "Content-Type: application/json");
		if (!t)
			goto out;
		extra = t;
		hl = extra;
	}
	if (rq->nparts) {
		mime = curl_mime_init(c);
		if (!mime)
			goto out;
		for (size_t i = 0; i < rq->nparts; i++) {
			char name[48];
			/* files[i].path first: the daemon streams parts and needs it before the file. */
			curl_mimepart *p = curl_mime_addpart(mime);
			snprintf(name, sizeof name, "files[%zu].path", i);
			if (!p || curl_mime_name(p, name) || curl_mime_data(p, rq->parts[i].path, CURL_ZERO_TERMINATED))
				goto out;
			p = curl_mime_addpart(mime);
			snprintf(name, sizeof name, "files[%zu].file", i);
			if (!p || curl_mime_name(p, name) ||
			    curl_mime_data(p, rq->parts[i].len ? rq->parts[i].data : "", rq->parts[i].len) ||
			    curl_mime_filename(p, rq->parts[i].path) || curl_mime_type(p, "application/octet-stream"))
				goto out;
		}
	}
	long connect_ms = rq->timeout_ms < CONNECT_TIMEOUT_MS ? rq->timeout_ms : CONNECT_TIMEOUT_MS;
	char ua[64];
	snprintf(ua, sizeof ua, "sandbox-mcp/%s", SANDBOX_MCP_VERSION);
	if ((rc = curl_easy_setopt(c, CURLOPT_URL, rq->url)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, rq->method)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_USERAGENT, ua)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, rq->timeout_ms)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, connect_ms)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https")) ||
	    (rc = curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_WRITEDATA, &s)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header)) ||
	    (rc = curl_easy_setopt(c, CURLOPT_HEADERDATA, hd)))
		goto fail;
	if (body && ((rc = curl_easy_setopt(c, CURLOPT_POSTFIELDS, body)) ||
		     (rc = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body)))))
		goto fail;
	if (mime && (rc = curl_easy_setopt(c, CURLOPT_MIMEPOST, mime)))
		goto fail;
	if (!strcmp(rq->method, "GET") && (rc = curl_easy_setopt(c, CURLOPT_HTTPGET, 1L)))
		goto fail;
	rc = perform_cancellable(h);
	if (s.overflow) {
		err_set(e, "the answer was larger than %zu bytes", rq->max_body);
		rc = CURLE_WRITE_ERROR;
		goto out;
	}
	if (rc)
		goto fail;
	if ((rc = curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &rs->status)))
		goto fail;
	rs->body = s.buf ? s.buf : strdup("");
	s.buf = NULL;
	rs->len = s.len;
	if (!rs->body) {
		rc = CURLE_OUT_OF_MEMORY;
		goto fail;
	}
	if (rs->len)
		rs->json = json_loadb(rs->body, rs->len, JSON_DECODE_ANY, NULL);
	rc = CURLE_OK;
	goto out;
fail:
	err_set(e, "%s", curl_easy_strerror(rc));
out:
	if (rc == CURLE_OUT_OF_MEMORY)
		err_set(e, "out of memory");
	free(s.buf);
	free(body);
	curl_mime_free(mime);
	wipe_free(extra);
	return rc;
}

int dt_http_call(struct dt_http *h, const struct dt_req *rq, struct dt_resp *rs, struct err *e)
{
	memset(rs, 0, sizeof *rs);
	if (!h->curl)
		return err_set(e, "the Daytona client is closed");
	int64_t deadline = rq->deadline_ms ? rq->deadline_ms : clock_ms() + rq->timeout_ms;
	int transport = 0, rate = 0;
	h->cancelled = false;
	for (;;) {
		struct err ae = {""};
		struct hdrs hd;
		CURLcode rc = attempt(h, rq, rs, &hd, &ae);
		if (h->cancelled)
			return err_set(e, "cancelled");
		if (rc == CURLE_OK) {
			if (rs->status != 429 || rate >= RATE_RETRIES)
				return 0;
			long wait = hd.retry_after_ms >= 0 ? hd.retry_after_ms : 1000L << rate;
			if (wait > RETRY_AFTER_MAX_MS || clock_ms() + wait >= deadline)
				return 0; /* the caller reports the 429 */
			rate++;
			dt_resp_free(rs);
			sleep_ms(h, wait);
			if (h->cancelled)
				return err_set(e, "cancelled");
			continue;
		}
		bool retry = (connect_failure(rc) || (reset_failure(rc) && idempotent(rq->method))) &&
			     transport < TRANSPORT_RETRIES;
		int64_t wait = 250 * (transport + 1) + jitter();
		if (!retry || clock_ms() + wait >= deadline)
			return err_set(e, "%s", ae.msg);
		transport++;
		sleep_ms(h, wait);
		if (h->cancelled)
			return err_set(e, "cancelled");
	}
}

int dt_http_fail(const struct dt_resp *rs, const char *what, struct err *e)
{
	const char *msg = NULL;
	if (json_is_object(rs->json)) {
		json_t *m = json_object_get(rs->json, "message");
		if (json_is_array(m))
			m = json_array_get(m, 0);
		msg = json_string_value(m);
		if (!msg)
			msg = json_string_value(json_object_get(rs->json, "error"));
	}
	char body[200] = "";
	if (!msg && rs->body && rs->len) {
		/* A short excerpt of a non-JSON answer, on one line. */
		size_t n = rs->len < sizeof body - 1 ? rs->len : sizeof body - 1;
		for (size_t i = 0; i < n; i++)
			body[i] = (rs->body[i] == '\n' || rs->body[i] == '\r') ? ' ' : rs->body[i];
		body[n] = '\0';
		msg = body;
	}
	const char *hint = "";
	switch (rs->status) {
	case 401: hint = " (the API key was refused: check DAYTONA_API_KEY)"; break;
	case 403: hint = " (the API key may not do this)"; break;
	case 404: hint = " (not found: check DAYTONA_API_URL, or the sandbox is gone)"; break;
	case 429: hint = " (rate limited; retried until the wait became too long)"; break;
	default:
		if (rs->status >= 500)
			hint = " (the Daytona service failed)";
	}
	return err_set(e, "%s: HTTP %ld%s%s%s", what, rs->status, msg && *msg ? ": " : "", msg ? msg : "", hint);
}
