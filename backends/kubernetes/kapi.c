#include "kapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int kapi_open(struct kapi *a, struct kcreds *c, struct err *e)
{
	memset(a, 0, sizeof *a);
	a->creds = *c;
	memset(c, 0, sizeof *c);
	a->open = true;
	if (http_open(&a->http, NULL, e) < 0)
		return -1;
	const struct kcreds *k = &a->creds;
	if (http_tls(&a->http, k->ca, k->ca_len, k->cert, k->cert_len, k->key, k->key_len, e) < 0)
		return -1;
	if (k->token) {
		size_t n = strlen(k->token) + 32;
		char *h = malloc(n);
		if (!h)
			return err_set(e, "out of memory");
		snprintf(h, n, "Authorization: Bearer %s", k->token);
		int rc = http_header(&a->http, h, e);
		explicit_bzero(h, n);
		free(h);
		if (rc < 0)
			return -1;
	}
	return http_header(&a->http, "Accept: application/json", e);
}

int kapi_call(struct kapi *a, const char *method, const char *path, json_t *body, long timeout_ms,
	      size_t (*on_data)(const char *p, size_t n, void *ctx), void *ctx, struct http_resp *rs, struct err *e)
{
	size_t n = strlen(a->creds.server) + strlen(path) + 1;
	char *url = malloc(n);
	if (!url)
		return err_set(e, "out of memory");
	snprintf(url, n, "%s%s", a->creds.server, path);
	struct http_req rq = {.method = method, .url = url, .json = body, .timeout_ms = timeout_ms,
			      .max_body = KAPI_BODY_MAX, .retry = HTTP_RETRY_SAFE, .on_data = on_data, .ctx = ctx,
			      .fresh = !strcmp(method, "POST")};
	int rc = http_call(&a->http, &rq, rs, e);
	free(url);
	return rc;
}

int kapi_fail(const struct http_resp *rs, const char *what, struct err *e)
{
	const char *msg = json_string_value(json_object_get(rs->json, "message"));
	const char *reason = json_string_value(json_object_get(rs->json, "reason"));
	const char *hint = rs->status == 401 ? " (the credentials were not accepted)"
			 : rs->status == 403 ? " (the credentials may not do this: see --check's permissions)"
					     : "";
	return err_set(e, "%s: HTTP %ld%s%s: %.400s%s", what, rs->status, reason ? " " : "", reason ? reason : "",
		       msg ? msg : "(no message)", hint);
}

void kapi_close(struct kapi *a)
{
	if (!a->open)
		return;
	http_close(&a->http);
	kcreds_free(&a->creds);
	a->open = false;
}
