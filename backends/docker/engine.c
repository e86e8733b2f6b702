/* The Docker Engine API client (see dkapi.h). */
#include "engine.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* A bounded answer body. */
struct body {
	char *p;
	size_t len, cap;
	bool over;
};

static size_t body_write(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct body *b = ctx;
	size_t n = size * nmemb;
	if (b->len + n + 1 > DKAPI_BODY_MAX) {
		b->over = true;
		return 0; /* CURLE_WRITE_ERROR */
	}
	if (b->len + n + 1 > b->cap) {
		size_t nc = b->cap ? b->cap : 4096;
		while (nc < b->len + n + 1)
			nc *= 2;
		char *np = realloc(b->p, nc);
		if (!np) {
			b->over = true;
			return 0;
		}
		b->p = np;
		b->cap = nc;
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
	b->p[b->len] = '\0';
	return n;
}

static bool is_socket(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

static int set_sock(struct dkapi *d, const char *path, struct err *e)
{
	if (path[0] != '/' || strlen(path) >= sizeof d->sock)
		return err_set(e, "the engine socket path '%s' must be absolute and at most %zu bytes", path,
			       sizeof d->sock - 1);
	snprintf(d->sock, sizeof d->sock, "%s", path);
	return 0;
}

int dkapi_locate(struct dkapi *d, struct err *e)
{
	const char *host = getenv("DOCKER_HOST");
	if (host && *host) {
		if (strncmp(host, "unix://", 7) != 0)
			return err_set(e, "DOCKER_HOST=%s is not supported: the Docker backend needs the engine's unix "
					  "socket on this machine (DOCKER_HOST=unix:///PATH)", host);
		return set_sock(d, host + 7, e);
	}
	char cand[4][sizeof d->sock];
	size_t n = 0;
	snprintf(cand[n++], sizeof cand[0], "/var/run/docker.sock");
	const char *xdg = getenv("XDG_RUNTIME_DIR");
	if (xdg && *xdg) {
		snprintf(cand[n++], sizeof cand[0], "%s/docker.sock", xdg);
		snprintf(cand[n++], sizeof cand[0], "%s/podman/podman.sock", xdg);
	}
	snprintf(cand[n++], sizeof cand[0], "/run/podman/podman.sock");
	for (size_t i = 0; i < n; i++)
		if (is_socket(cand[i]))
			return set_sock(d, cand[i], e);
	return err_set(e, "no Docker engine socket found (tried /var/run/docker.sock%s and "
			  "/run/podman/podman.sock): start the engine (e.g. systemctl start docker) or set "
			  "DOCKER_HOST=unix:///PATH", xdg && *xdg ? ", $XDG_RUNTIME_DIR/docker.sock, "
						     "$XDG_RUNTIME_DIR/podman/podman.sock" : "");
}

/* A plain connect, for a precise reason (refused, permission) before libcurl's vaguer one. */
static int try_connect(const struct dkapi *d, struct err *e)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_sys(e, "socket");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	memcpy(sa.sun_path, d->sock, strlen(d->sock) + 1);
	int r = connect(fd, (struct sockaddr *)&sa, sizeof sa);
	int saved = errno;
	close(fd);
	if (r == 0)
		return 0;
	errno = saved;
	if (saved == EACCES || saved == EPERM)
		return err_sys(e, "cannot use the Docker engine socket %s (add this user to the docker group, or "
				  "set DOCKER_HOST to a socket it may use)", d->sock);
	if (saved == ENOENT)
		return err_set(e, "no Docker engine socket at %s: start the engine (e.g. systemctl start docker) or "
				  "set DOCKER_HOST=unix:///PATH", d->sock);
	return err_sys(e, "the Docker engine at unix://%s is not running", d->sock);
}

static int ensure_curl(struct dkapi *d, struct err *e)
{
	if (d->curl)
		return 0;
	d->curl = curl_easy_init();
	if (!d->curl)
		return err_set(e, "libcurl could not be initialised");
	return 0;
}

/* Sets the options every request shares. */
static int prepare(struct dkapi *d, const char *url, long timeout_ms, struct err *e)
{
	CURL *c = d->curl;
	curl_easy_reset(c);
	if (curl_easy_setopt(c, CURLOPT_UNIX_SOCKET_PATH, d->sock) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_URL, url) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http") != CURLE_OK)
		return err_set(e, "libcurl refused an option");
	return 0;
}

void dkapi_init(struct dkapi *d)
{
	memset(d, 0, sizeof *d);
	d->cancel_fd = -1;
}

/* curl_easy_perform, but ended at once when d->cancel_fd turns readable (a pull can take
 * minutes; a cancelled call or a shutdown must not wait for it). */
static CURLcode perform_cancellable(struct dkapi *d)
{
	d->cancelled = false;
	if (d->cancel_fd < 0)
		return curl_easy_perform(d->curl);
	CURLM *m = curl_multi_init();
	if (!m)
		return CURLE_OUT_OF_MEMORY;
	CURLcode rc = CURLE_OK;
	if (curl_multi_add_handle(m, d->curl) != CURLM_OK) {
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
		struct curl_waitfd w = {.fd = d->cancel_fd, .events = CURL_WAIT_POLLIN};
		if (curl_multi_poll(m, &w, 1, 1000, NULL) != CURLM_OK) {
			rc = CURLE_FAILED_INIT;
			break;
		}
		if (w.revents) {
			d->cancelled = true;
			rc = CURLE_ABORTED_BY_CALLBACK;
			break;
		}
	}
	if (!d->cancelled) {
		int left;
		CURLMsg *msg;
		while ((msg = curl_multi_info_read(m, &left)))
			if (msg->msg == CURLMSG_DONE)
				rc = msg->data.result;
	}
	curl_multi_remove_handle(m, d->curl);
	curl_multi_cleanup(m);
	return rc;
}

static int perform(struct dkapi *d, const char *what, long *status, struct err *e)
{
	CURLcode rc = perform_cancellable(d);
	if (d->cancelled)
		return err_set(e, "cancelled");
	if (rc != CURLE_OK) {
		if (rc == CURLE_COULDNT_CONNECT && try_connect(d, e) < 0)
			return -1;
		return err_set(e, "the Docker engine at unix://%s did not answer %s: %s", d->sock, what,
			       curl_easy_strerror(rc));
	}
	if (curl_easy_getinfo(d->curl, CURLINFO_RESPONSE_CODE, status) != CURLE_OK)
		return err_set(e, "libcurl gave no HTTP status");
	return 0;
}

int dkapi_open(struct dkapi *d, long timeout_ms, struct err *e)
{
	if (!d->sock[0] && dkapi_locate(d, e) < 0)
		return -1;
	if (try_connect(d, e) < 0 || ensure_curl(d, e) < 0)
		return -1;
	d->api[0] = '\0';
	long status = 0;
	json_t *v = NULL;
	if (dkapi_call(d, "GET", "/version", NULL, timeout_ms, &status, &v, e) < 0)
		return -1;
	const char *api = json_string_value(json_object_get(v, "ApiVersion"));
	const char *ver = json_string_value(json_object_get(v, "Version"));
	if (status != 200 || !api || strlen(api) > 10 || strspn(api, "0123456789.") != strlen(api)) {
		json_decref(v);
		return err_set(e, "unix://%s does not look like a Docker engine (GET /version: HTTP %ld)", d->sock,
			       status);
	}
	snprintf(d->api, sizeof d->api, "/v%s", api);
	snprintf(d->version, sizeof d->version, "%s", ver ? ver : "?");
	snprintf(d->name, sizeof d->name, "Docker Engine");
	size_t i;
	json_t *comp;
	json_array_foreach(json_object_get(v, "Components"), i, comp) {
		const char *n = json_string_value(json_object_get(comp, "Name"));
		if (n && strstr(n, "Podman"))
			snprintf(d->name, sizeof d->name, "Podman Engine");
	}
	json_decref(v);
	return 0;
}

int dkapi_call(struct dkapi *d, const char *method, const char *path, json_t *body, long timeout_ms,
	    long *status, json_t **out, struct err *e)
{
	if (out)
		*out = NULL;
	if (ensure_curl(d, e) < 0)
		return -1;
	char url[2048];
	int n = snprintf(url, sizeof url, "http://localhost%s%s", d->api, path);
	if (n < 0 || (size_t)n >= sizeof url)
		return err_set(e, "Docker API path too long");
	char *json = NULL;
	if (body && !(json = json_dumps(body, JSON_COMPACT)))
		return err_set(e, "out of memory");
	struct curl_slist *hdr = NULL;
	struct body b = {0};
	int rc = -1;
	if (prepare(d, url, timeout_ms, e) < 0)
		goto out;
	CURL *c = d->curl;
	CURLcode sr = curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (sr == CURLE_OK && !strcmp(method, "POST")) {
		sr = curl_easy_setopt(c, CURLOPT_POSTFIELDS, json ? json : "");
		if (sr == CURLE_OK)
			sr = curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)(json ? strlen(json) : 0));
		struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
		if (!h) {
			err_set(e, "out of memory");
			goto out;
		}
		hdr = h;
		if (sr == CURLE_OK)
			sr = curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
	}
	if (sr == CURLE_OK)
		sr = curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_write);
	if (sr == CURLE_OK)
		sr = curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	if (sr != CURLE_OK) {
		err_set(e, "libcurl refused an option: %s", curl_easy_strerror(sr));
		goto out;
	}
	if (perform(d, path, status, e) < 0) {
		if (b.over)
			err_set(e, "the Docker engine's answer to %s %s was larger than %u bytes", method, path,
				DKAPI_BODY_MAX);
		goto out;
	}
	if (out && b.len)
		*out = json_loadb(b.p, b.len, 0, NULL);
	rc = 0;
out:
	curl_slist_free_all(hdr);
	free(json);
	free(b.p);
	return rc;
}

const char *dkapi_message(const json_t *answer, const char *fallback)
{
	const char *m = json_string_value(json_object_get(answer, "message"));
	return m && *m ? m : fallback;
}

/* The pull answer is a stream of JSON lines; an error can arrive in any of them. */
struct pull {
	char line[65536];
	size_t len;
	bool overlong;      /* the current line passed the buffer: skipped */
	char error[512];    /* the last error the engine reported */
};

static void pull_line(struct pull *p)
{
	json_t *j = json_loadb(p->line, p->len, 0, NULL);
	const char *m = json_string_value(json_object_get(j, "error"));
	if (!m)
		m = json_string_value(json_object_get(json_object_get(j, "errorDetail"), "message"));
	if (!m)
		m = json_string_value(json_object_get(j, "message"));
	if (m && json_object_get(j, "status") == NULL)
		snprintf(p->error, sizeof p->error, "%s", m);
	json_decref(j);
}

static size_t pull_write(char *data, size_t size, size_t nmemb, void *ctx)
{
	struct pull *p = ctx;
	size_t n = size * nmemb;
	for (size_t i = 0; i < n; i++) {
		if (data[i] == '\n') {
			if (!p->overlong && p->len)
				pull_line(p);
			p->len = 0;
			p->overlong = false;
		} else if (p->len < sizeof p->line) {
			p->line[p->len++] = data[i];
		} else {
			p->overlong = true;
		}
	}
	return n;
}

int dkapi_escape(struct dkapi *d, const char *s, char *buf, size_t n)
{
	char *x = d->curl ? curl_easy_escape(d->curl, s, 0) : NULL;
	if (!x)
		return -1;
	int r = snprintf(buf, n, "%s", x);
	curl_free(x);
	return r < 0 || (size_t)r >= n ? -1 : 0;
}

int dkapi_pull(struct dkapi *d, const char *image, long timeout_ms, struct err *e)
{
	if (ensure_curl(d, e) < 0)
		return -1;
	/* name[:tag] or name@digest; a tag is after the last '/'. Without one: latest (an empty tag
	 * would pull every tag). */
	char name[512], tag[160] = "";
	snprintf(name, sizeof name, "%s", image);
	const char *slash = strrchr(name, '/');
	char *colon = strrchr(slash ? slash : name, ':');
	if (!strchr(name, '@')) {
		if (colon) {
			*colon = '\0';
			snprintf(tag, sizeof tag, "%s", colon + 1);
		} else {
			snprintf(tag, sizeof tag, "latest");
		}
	}
	char en[1024], et[512], path[2048];
	if (dkapi_escape(d, name, en, sizeof en) < 0 || dkapi_escape(d, tag, et, sizeof et) < 0)
		return err_set(e, "image name too long");
	snprintf(path, sizeof path, "/images/create?fromImage=%s%s%s", en, tag[0] ? "&tag=" : "", et);
	char url[2200];
	snprintf(url, sizeof url, "http://localhost%s%s", d->api, path);
	struct pull *p = calloc(1, sizeof *p);
	if (!p)
		return err_set(e, "out of memory");
	int rc = -1;
	long status = 0;
	if (prepare(d, url, timeout_ms, e) < 0)
		goto out;
	if (curl_easy_setopt(d->curl, CURLOPT_POST, 1L) != CURLE_OK ||
	    curl_easy_setopt(d->curl, CURLOPT_POSTFIELDS, "") != CURLE_OK ||
	    curl_easy_setopt(d->curl, CURLOPT_WRITEFUNCTION, pull_write) != CURLE_OK ||
	    curl_easy_setopt(d->curl, CURLOPT_WRITEDATA, p) != CURLE_OK) {
		err_set(e, "libcurl refused an option");
		goto out;
	}
	if (perform(d, "the pull", &status, e) < 0)
		goto out;
	if (p->len && !p->overlong)
		pull_line(p);
	if (status != 200 || p->error[0]) {
		err_set(e, "%s", p->error[0] ? p->error : "the engine refused the pull");
		goto out;
	}
	rc = 0;
out:
	free(p);
	return rc;
}

void dkapi_close(struct dkapi *d)
{
	if (d->curl)
		curl_easy_cleanup(d->curl);
	d->curl = NULL;
}
