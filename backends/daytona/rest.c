#include "rest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/base/utf8.h"

int rest_open(struct rest *r, struct err *e)
{
	memset(r, 0, sizeof *r);
	r->http.cancel_fd = -1;
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
	if (n >= sizeof r->api)
		return err_set(e, "DAYTONA_API_URL is too long");
	memcpy(r->api, url, n);
	r->api[n] = '\0';
	const char *target = getenv("DAYTONA_TARGET");
	if (target && strlen(target) >= sizeof r->target)
		return err_set(e, "DAYTONA_TARGET is too long");
	snprintf(r->target, sizeof r->target, "%s", target ? target : "");
	if (http_open(&r->http, NULL, e) < 0)
		return -1;
	size_t alen = strlen(key) + 32;
	char *auth = malloc(alen);
	if (!auth) {
		rest_close(r);
		return err_set(e, "out of memory");
	}
	snprintf(auth, alen, "Authorization: Bearer %s", key);
	int rc = http_header(&r->http, auth, e);
	/* The key is copied into the list; wipe our copy. explicit_bzero, not memset: a store to
	 * memory about to be freed is dead to the compiler, which may drop a memset. */
	explicit_bzero(auth, alen);
	free(auth);
	static const char *const fixed[] = {"X-Daytona-Source: sandbox-mcp", ("X-Daytona-SDK-Version: " DT_API_REVISION),
					    "Expect:"};
	for (size_t i = 0; rc == 0 && i < sizeof fixed / sizeof fixed[0]; i++)
		rc = http_header(&r->http, fixed[i], e);
	if (rc < 0)
		rest_close(r);
	return rc;
}

void rest_close(struct rest *r)
{
	http_close(&r->http);
}

char *rest_url(const struct rest *r, const char *path)
{
	size_t n = strlen(r->api) + strlen(path) + 1;
	char *u = malloc(n);
	if (u)
		snprintf(u, n, "%s%s", r->api, path);
	return u;
}

int rest_call(struct rest *r, const struct rest_req *rq, struct http_resp *rs, struct err *e)
{
	struct http_req hr = {.method = rq->method, .url = rq->url, .json = rq->json, .timeout_ms = rq->timeout_ms,
			      .max_body = rq->max_body, .deadline_ms = rq->deadline_ms, .retry = HTTP_RETRY_SAFE,
			      .fresh = rq->fresh};
	struct http_part *parts = rq->nfiles ? calloc(2 * rq->nfiles, sizeof *parts) : NULL;
	char (*names)[2][40] = rq->nfiles ? calloc(rq->nfiles, sizeof *names) : NULL;
	if (rq->nfiles && (!parts || !names)) {
		free(parts);
		free(names);
		memset(rs, 0, sizeof *rs);
		return err_set(e, "out of memory");
	}
	/* files[i].path first: the daemon streams parts and needs it before the file. */
	for (size_t i = 0; i < rq->nfiles; i++) {
		const struct rest_file *f = &rq->files[i];
		snprintf(names[i][0], sizeof names[i][0], "files[%zu].path", i);
		snprintf(names[i][1], sizeof names[i][1], "files[%zu].file", i);
		parts[2 * i] = (struct http_part){names[i][0], NULL, f->path, strlen(f->path)};
		parts[2 * i + 1] = (struct http_part){names[i][1], f->path, f->data, f->len};
	}
	hr.parts = parts;
	hr.nparts = 2 * rq->nfiles;
	int rc = http_call(&r->http, &hr, rs, e);
	free(parts);
	free(names);
	return rc;
}

int rest_fail(const struct http_resp *rs, const char *what, struct err *e)
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

bool rest_name_ok(const char *s)
{
	for (size_t n = strlen(s), i = 0; i < n;) {
		size_t k = utf8_char_len(s + i, n - i);
		if (!k || (unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			return false;
		i += k;
	}
	return true;
}
