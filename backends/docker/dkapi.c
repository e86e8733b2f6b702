/* The Docker Engine API client (see dkapi.h): the engine's socket, its API version, and calls
 * on the backends' HTTP client. */
#include "dkapi.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

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

void dkapi_init(struct dkapi *d)
{
	memset(d, 0, sizeof *d);
	d->http.cancel_fd = -1;
}

/* The HTTP client on the engine's socket, made once. */
static int ensure_http(struct dkapi *d, struct err *e)
{
	if (d->open)
		return 0;
	int fd = d->http.cancel_fd;
	if (http_open(&d->http, d->sock, e) < 0)
		return -1;
	d->http.cancel_fd = fd;
	d->open = true;
	return 0;
}

int dkapi_open(struct dkapi *d, long timeout_ms, struct err *e)
{
	if (!d->sock[0] && dkapi_locate(d, e) < 0)
		return -1;
	if (try_connect(d, e) < 0 || ensure_http(d, e) < 0)
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

/* One request on the socket; when it cannot connect, a plain connect says precisely why. */
static int request(struct dkapi *d, struct http_req *rq, const char *path, struct http_resp *rs, struct err *e)
{
	char url[2200];
	if (ensure_http(d, e) < 0)
		return -1;
	if ((size_t)snprintf(url, sizeof url, "http://localhost%s%s", d->api, path) >= sizeof url)
		return err_set(e, "Docker API path too long");
	rq->url = url;
	struct err he = {""};
	if (http_call(&d->http, rq, rs, &he) == 0)
		return 0;
	if (d->http.cancelled)
		return err_set(e, "cancelled");
	if (try_connect(d, e) < 0)
		return -1;
	return err_set(e, "the Docker engine at unix://%s did not answer %s %s: %s", d->sock, rq->method, path, he.msg);
}

int dkapi_call(struct dkapi *d, const char *method, const char *path, json_t *body, long timeout_ms,
	    long *status, json_t **out, struct err *e)
{
	struct http_req rq = {.method = method, .json = body, .timeout_ms = timeout_ms, .max_body = DKAPI_BODY_MAX};
	struct http_resp rs;
	if (out)
		*out = NULL;
	int rc = request(d, &rq, path, &rs, e);
	if (rc == 0) {
		*status = rs.status;
		if (out) {
			*out = rs.json;
			rs.json = NULL;
		}
	}
	http_resp_free(&rs);
	return rc;
}

struct dkapi_held dkapi_hold_cancel(struct dkapi *d)
{
	struct dkapi_held held = {d->http.cancel_fd, d->http.cancelled};
	d->http.cancel_fd = -1;
	return held;
}

void dkapi_release_cancel(struct dkapi *d, struct dkapi_held held)
{
	d->http.cancel_fd = held.cancel_fd;
	d->http.cancelled = held.cancelled;
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

/* Takes the pull's answer, a stream of JSON lines, a line at a time. */
static size_t pull_data(const char *data, size_t n, void *ctx)
{
	struct pull *p = ctx;
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

int dkapi_pull(struct dkapi *d, const char *image, long timeout_ms, struct err *e)
{
	/* name[:tag] or name@digest; a tag is after the last '/'. Without one: latest (an empty tag
	 * would pull every tag). */
	char name[512], tag[160] = "", path[2048];
	snprintf(name, sizeof name, "%s", image);
	const char *slash = strrchr(name, '/');
	char *colon = strrchr(slash ? slash : name, ':');
	if (!strchr(name, '@'))
		snprintf(tag, sizeof tag, "%s", colon ? colon + 1 : "latest");
	if (colon && !strchr(name, '@'))
		*colon = '\0';
	char *en = http_escape(name), *et = http_escape(tag);
	struct pull *p = calloc(1, sizeof *p);
	int rc = -1;
	if (!en || !et || !p) {
		err_set(e, "out of memory");
	} else {
		snprintf(path, sizeof path, "/images/create?fromImage=%s%s%s", en, tag[0] ? "&tag=" : "", et);
		struct http_req rq = {.method = "POST", .timeout_ms = timeout_ms, .on_data = pull_data, .ctx = p};
		struct http_resp rs;
		rc = request(d, &rq, path, &rs, e);
		if (rc == 0 && p->len && !p->overlong)
			pull_line(p);
		if (rc == 0 && (rs.status != 200 || p->error[0]))
			rc = err_set(e, "%s", p->error[0] ? p->error : "the engine refused the pull");
		http_resp_free(&rs);
	}
	free(en);
	free(et);
	free(p);
	return rc;
}

void dkapi_close(struct dkapi *d)
{
	if (d->open)
		http_close(&d->http);
	d->open = false;
}
