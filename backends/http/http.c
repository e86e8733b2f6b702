#include "http.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../src/base/clock.h"
#include "helper.h"
#include "wire.h"

/* Past a request's own bounds (its deadline, then one more attempt's timeout), a helper that
 * has not answered is stuck: it is killed. */
#define STUCK_MS 5000

extern char **environ;

/* This program, to start as the helper: its path read once from /proc/self/exe (under valgrind
 * that path is the tool's, its readlink the program's), or that link itself when the path
 * cannot be reached (gone, or in a folder this user cannot enter). */
static char exe[4096] = "/proc/self/exe";
static pthread_once_t exe_once = PTHREAD_ONCE_INIT;

static void find_exe(void)
{
	char p[sizeof exe];
	ssize_t n = readlink("/proc/self/exe", p, sizeof p - 1);
	if (n <= 0 || n >= (ssize_t)sizeof p - 1)
		return;
	p[n] = '\0';
	struct stat a;
	if (stat(p, &a) == 0 && S_ISREG(a.st_mode))
		memcpy(exe, p, (size_t)n + 1);
}

int http_open(struct http *h, const char *unix_socket, struct err *e)
{
	memset(h, 0, sizeof *h);
	h->fd = -1;
	h->cancel_fd = -1;
	if (unix_socket && strlen(unix_socket) >= sizeof h->unix_socket)
		return err_set(e, "the socket path %s is too long", unix_socket);
	snprintf(h->unix_socket, sizeof h->unix_socket, "%s", unix_socket ? unix_socket : "");
	h->open = true;
	return 0;
}

int http_header(struct http *h, const char *line, struct err *e)
{
	char **n = realloc(h->headers, (h->nheaders + 1) * sizeof *n);
	if (n)
		h->headers = n;
	if (!n || !(h->headers[h->nheaders] = strdup(line)))
		return err_set(e, "out of memory");
	h->nheaders++;
	h->stale = true;
	return 0;
}

/* Every helper started and not yet reaped, so that the server's exit reaps them: one left to
 * end by itself would outlive the server a moment, and as a zombie be init's to reap. */
#define LIVE_MAX 16
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static pid_t live[LIVE_MAX];
static pthread_once_t live_once = PTHREAD_ONCE_INIT;

static void reap_live(void)
{
	pthread_mutex_lock(&live_mu);
	for (int i = 0; i < LIVE_MAX; i++)
		if (live[i] > 0) {
			kill(live[i], SIGKILL);
			while (waitpid(live[i], NULL, 0) < 0 && errno == EINTR)
				;
			live[i] = 0;
		}
	pthread_mutex_unlock(&live_mu);
}

static void at_exit_reap(void)
{
	atexit(reap_live);
}

/* Adds pid to the helpers reaped at exit (when there is room), or with gone, takes it out. */
static void live_note(pid_t pid, bool gone)
{
	pthread_once(&live_once, at_exit_reap);
	pthread_mutex_lock(&live_mu);
	for (int i = 0; i < LIVE_MAX; i++)
		if (gone ? live[i] == pid : live[i] == 0) {
			live[i] = gone ? 0 : pid;
			break;
		}
	pthread_mutex_unlock(&live_mu);
}

/* How the helper ended, when it has (its socket ended: it is exiting, so a moment is given):
 * " (killed by signal 9: Killed)", " (exit status 1)", or "". */
static void helper_how(struct http *h, char *how, size_t n)
{
	int st;
	how[0] = '\0';
	if (h->pid <= 0)
		return;
	int pfd = (int)syscall(SYS_pidfd_open, h->pid, 0);
	if (pfd >= 0) {
		poll(&(struct pollfd){pfd, POLLIN, 0}, 1, 100);
		close(pfd);
	}
	if (waitpid(h->pid, &st, WNOHANG) != h->pid)
		return;
	live_note(h->pid, true);
	h->pid = 0;
	if (WIFSIGNALED(st))
		snprintf(how, n, " (killed by signal %d: %s)", WTERMSIG(st), strsignal(WTERMSIG(st)));
	else if (WIFEXITED(st))
		snprintf(how, n, " (exit status %d)", WEXITSTATUS(st));
}

/* Ends the helper, if one runs or ran, and reaps it. */
static void helper_end(struct http *h)
{
	if (h->fd >= 0)
		close(h->fd);
	h->fd = -1;
	if (h->pid > 0) {
		kill(h->pid, SIGKILL);
		while (waitpid(h->pid, NULL, 0) < 0 && errno == EINTR)
			;
		live_note(h->pid, true);
	}
	h->pid = 0;
}

void http_close(struct http *h)
{
	if (!h->open)
		return;
	helper_end(h);
	for (int i = 0; i < 3; i++) {
		if (h->tls[i])
			explicit_bzero(h->tls[i], h->tls_len[i]);
		free(h->tls[i]);
		h->tls[i] = NULL;
		h->tls_len[i] = 0;
	}
	h->tunnel = false;
	for (size_t i = 0; i < h->nheaders; i++) {
		explicit_bzero(h->headers[i], strlen(h->headers[i]));
		free(h->headers[i]);
	}
	free(h->headers);
	h->headers = NULL;
	h->nheaders = 0;
	h->open = false;
}

/* The server's environment but DAYTONA_API_KEY, which the helper has no use for (the key it
 * sends comes in a header line). Caller frees the array only. */
static char **helper_env(void)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = calloc(n + 1, sizeof *env);
	for (size_t i = 0, j = 0; env && i < n; i++)
		if (strncmp(environ[i], "DAYTONA_API_KEY=", 16))
			env[j++] = environ[i];
	return env;
}

/* Starts a helper and tells it the server and the headers. 0, or -1 with e set. */
static int helper_start(struct http *h, struct err *e)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
		return err_set(e, "cannot start the HTTP helper: socketpair: %s", strerror(errno));
	/* dup2 onto the same number would leave close-on-exec set. */
	if (sv[1] == HTTP_HELPER_FD) {
		int d = fcntl(sv[1], F_DUPFD_CLOEXEC, HTTP_HELPER_FD + 1);
		close(sv[1]);
		sv[1] = d;
	}
	pthread_once(&exe_once, find_exe);
	char **env = helper_env();
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t at;
	sigset_t none, def;
	sigemptyset(&none);
	sigemptyset(&def);
	sigaddset(&def, SIGTERM);
	sigaddset(&def, SIGINT);
	sigaddset(&def, SIGHUP);
	char *argv[] = {"sandbox-mcp", HTTP_HELPER_ARG, NULL};
	int rc = sv[1] < 0 || !env ? ENOMEM : 0;
	if (!rc && !(rc = posix_spawn_file_actions_init(&fa))) {
		if (!(rc = posix_spawnattr_init(&at))) {
			if (!(rc = posix_spawn_file_actions_adddup2(&fa, sv[1], HTTP_HELPER_FD)) &&
			    !(rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
			    !(rc = posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0)) &&
			    !(rc = posix_spawn_file_actions_addclosefrom_np(&fa, HTTP_HELPER_FD + 1)) &&
			    !(rc = posix_spawnattr_setsigmask(&at, &none)) && !(rc = posix_spawnattr_setsigdefault(&at, &def)) &&
			    !(rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)))
				rc = posix_spawn(&h->pid, exe, &fa, &at, argv, env);
			posix_spawnattr_destroy(&at);
		}
		posix_spawn_file_actions_destroy(&fa);
	}
	free(env);
	if (sv[1] >= 0)
		close(sv[1]);
	if (rc) {
		close(sv[0]);
		h->pid = 0;
		return err_set(e, "cannot start the HTTP helper: %s", strerror(rc));
	}
	live_note(h->pid, false);
	h->fd = sv[0];
	h->stale = false;
	/* Room for the whole frame first: a buffer grown by realloc would leave copies of the header
	 * lines, which may hold a key, in freed memory. */
	size_t need = 64 + strlen(h->unix_socket) + h->tls_len[0] + h->tls_len[1] + h->tls_len[2];
	for (size_t i = 0; i < h->nheaders; i++)
		need += 4 + strlen(h->headers[i]);
	struct ag_buf b = {0};
	ag_put(&b, NULL, need);
	ag_frame_begin(&b, HW_OPEN);
	ag_put_u32(&b, h->unix_socket[0] ? HTTP_LINGER_UNIX_MS : HTTP_LINGER_TCP_MS);
	ag_put_str(&b, h->unix_socket, strlen(h->unix_socket));
	ag_put_u32(&b, (uint32_t)h->nheaders);
	for (size_t i = 0; i < h->nheaders; i++)
		ag_put_str(&b, h->headers[i], strlen(h->headers[i]));
	for (int i = 0; i < 3; i++)
		ag_put_str(&b, h->tls[i] ? h->tls[i] : "", h->tls_len[i]);
	hw_send(h->fd, &b);
	explicit_bzero(b.p, b.cap);
	free(b.p);
	/* A helper that ended at once says nothing yet: the request finds it gone. */
	return 0;
}

/* Sends the request (HW_REQ, then the parts' bytes). 0, or -1 when the helper is gone. */
static int send_request(struct http *h, const struct http_req *rq, const char *json, struct ag_buf *b)
{
	ag_frame_begin(b, HW_REQ);
	ag_put_str(b, rq->method, strlen(rq->method));
	ag_put_str(b, rq->url, strlen(rq->url));
	ag_put_u8(b, json != NULL);
	ag_put_str(b, json ? json : "", json ? strlen(json) : 0);
	ag_put_u32(b, (uint32_t)rq->nparts);
	for (size_t i = 0; i < rq->nparts; i++) {
		const struct http_part *p = &rq->parts[i];
		ag_put_str(b, p->name, strlen(p->name));
		ag_put_u8(b, p->filename != NULL);
		ag_put_str(b, p->filename ? p->filename : "", p->filename ? strlen(p->filename) : 0);
		ag_put_u64(b, p->len);
	}
	ag_put_u64(b, (uint64_t)rq->timeout_ms);
	ag_put_u64(b, rq->max_body);
	ag_put_u64(b, (uint64_t)rq->deadline_ms);
	ag_put_u8(b, rq->retry == HTTP_RETRY_SAFE);
	ag_put_u8(b, rq->on_data != NULL);
	ag_put_u8(b, rq->fresh);
	if (hw_send(h->fd, b) < 0)
		return -1;
	for (size_t i = 0; i < rq->nparts; i++)
		for (size_t off = 0; off < rq->parts[i].len; off += HW_CHUNK) {
			size_t n = rq->parts[i].len - off;
			ag_frame_begin(b, HW_BYTES);
			ag_put(b, (const char *)rq->parts[i].data + off, n < HW_CHUNK ? n : HW_CHUNK);
			if (hw_send(h->fd, b) < 0)
				return -1;
		}
	return 0;
}

/* Waits for the helper's next frame until give_up. 1 with the frame, 0 when the cancel fd
 * turned readable (h->cancelled set), -1 when the helper ended or broke, -2 at give_up. */
static int next_frame(struct http *h, int64_t give_up, struct ag_buf *b, uint8_t *type, struct ag_cur *c)
{
	for (;;) {
		int64_t left = give_up - clock_ms();
		if (left <= 0)
			return -2;
		struct pollfd p[2] = {{h->fd, POLLIN, 0}, {h->cancel_fd, POLLIN, 0}};
		int r = poll(p, h->cancel_fd >= 0 ? 2 : 1, left > 1000 ? 1000 : (int)left);
		if (r < 0 && errno != EINTR)
			return -1;
		if (r > 0 && h->cancel_fd >= 0 && p[1].revents) {
			h->cancelled = true;
			return 0;
		}
		if (r > 0 && p[0].revents)
			return hw_recv(h->fd, b, type, c) > 0 ? 1 : -1;
	}
}

/* The helper's answer after HW_TAKEN. 0 with rs filled, or -1 with e set (the helper ended,
 * then, with no way to know what it did). */
static int take_answer(struct http *h, const struct http_req *rq, int64_t give_up, struct ag_buf *b,
		       struct http_resp *rs, struct err *e)
{
	char *body = NULL;
	size_t len = 0, cap = 0;
	int rc;
	for (;;) {
		uint8_t type;
		struct ag_cur c;
		int r = next_frame(h, give_up, b, &type, &c);
		if (r <= 0) {
			char how[96] = "";
			if (r == -1)
				helper_how(h, how, sizeof how);
			rc = r == 0 ? err_set(e, "cancelled")
			   : r == -2 ? err_set(e, "the HTTP helper (" HTTP_HELPER_NAME ") did not answer, long past the request's timeout")
				     : err_set(e, "the HTTP helper (" HTTP_HELPER_NAME ") ended during the request%s; what "
						  "the request did is not known", how);
			break;
		}
		if (type == HW_BODY && rq->on_data) {
			if (rq->on_data((const char *)c.p, c.left, rq->ctx) != c.left) {
				rc = err_set(e, "the answer's reader stopped it");
				break;
			}
		} else if (type == HW_BODY) {
			if (len + c.left > rq->max_body) {
				rc = err_set(e, "the answer was larger than %zu bytes", rq->max_body);
				break;
			}
			if (len + c.left + 1 > cap) {
				size_t nc = cap ? cap * 2 : 4096;
				while (nc < len + c.left + 1)
					nc *= 2;
				char *nb = realloc(body, nc);
				if (!nb) {
					rc = err_set(e, "out of memory");
					break;
				}
				body = nb;
				cap = nc;
			}
			memcpy(body + len, c.p, c.left);
			len += c.left;
		} else if (type == HW_DONE) {
			const uint8_t *ok = ag_get(&c, 1);
			uint64_t status = ag_get_u64(&c);
			size_t n;
			const char *why = ag_get_str(&c, &n);
			if (c.bad || !ok) {
				rc = err_set(e, "the HTTP helper broke the protocol");
				break;
			}
			if (!*ok) {
				free(body);
				return err_set(e, "%.*s", (int)n, why ? why : "");
			}
			if (!body && !(body = malloc(1))) {
				rc = err_set(e, "out of memory");
				break;
			}
			body[len] = '\0';
			rs->status = (long)status;
			rs->body = body;
			rs->len = len;
			rs->json = len ? json_loadb(body, len, JSON_DECODE_ANY, NULL) : NULL;
			return 0;
		} else {
			rc = err_set(e, "the HTTP helper broke the protocol");
			break;
		}
	}
	/* The request is left half done: its helper goes with it. */
	free(body);
	helper_end(h);
	return rc;
}

/* What the wire cannot carry: the request's own frame past AG_MAX_FRAME, a part past what the
 * helper takes. 0, or -1 with e set. */
static int too_large(const struct http_req *rq, const char *json, struct err *e)
{
	size_t n = strlen(rq->method) + strlen(rq->url) + (json ? strlen(json) : 0) + 64;
	for (size_t i = 0; i < rq->nparts; i++) {
		n += strlen(rq->parts[i].name) + (rq->parts[i].filename ? strlen(rq->parts[i].filename) : 0) + 17;
		if (rq->parts[i].len > HW_PART_MAX)
			return err_set(e, "a part of the request is larger than %llu bytes", (unsigned long long)HW_PART_MAX);
	}
	return n > AG_MAX_FRAME ? err_set(e, "the request is larger than %u bytes", AG_MAX_FRAME) : 0;
}

int http_tls(struct http *h, const char *ca, size_t ca_len, const char *cert, size_t cert_len, const char *key,
	     size_t key_len, struct err *e)
{
	const char *v[3] = {ca, cert, key};
	size_t n[3] = {ca_len, cert_len, key_len};
	for (int i = 0; i < 3; i++) {
		if (h->tls[i])
			explicit_bzero(h->tls[i], h->tls_len[i]);
		free(h->tls[i]);
		h->tls[i] = NULL;
		h->tls_len[i] = 0;
		if (!v[i] || !n[i])
			continue;
		if (n[i] > AG_MAX_FRAME / 4 || !(h->tls[i] = malloc(n[i])))
			return err_set(e, n[i] > AG_MAX_FRAME / 4 ? "TLS material too large" : "out of memory");
		memcpy(h->tls[i], v[i], n[i]);
		h->tls_len[i] = n[i];
	}
	h->stale = true;
	return 0;
}

int http_tunnel(struct http *h, const char *url, long timeout_ms, struct err *e)
{
	if (!h->open || h->tunnel)
		return err_set(e, h->open ? "the HTTP client is a tunnel already" : "the HTTP client is closed");
	/* A helper of its own: one that served requests keeps their connections, not this one. */
	helper_end(h);
	if (helper_start(h, e) < 0)
		return -1;
	struct ag_buf b = {0};
	ag_frame_begin(&b, HW_TUNNEL);
	ag_put_str(&b, url, strlen(url));
	ag_put_u64(&b, (uint64_t)timeout_ms);
	uint8_t type = 0;
	struct ag_cur c;
	int r = hw_send(h->fd, &b) < 0 ? -1 : next_frame(h, clock_ms() + timeout_ms + STUCK_MS, &b, &type, &c);
	int rc = -1;
	if (r == 1 && type == HW_DONE) {
		const uint8_t *ok = ag_get(&c, 1);
		ag_get_u64(&c);
		size_t n;
		const char *why = ag_get_str(&c, &n);
		if (c.bad || !ok)
			err_set(e, "the HTTP helper broke the protocol");
		else if (!*ok)
			err_set(e, "%.*s", (int)n, why ? why : "");
		else
			rc = 0;
	} else {
		err_set(e, r == 0 ? "cancelled" : r == -2 ? "the HTTP helper (" HTTP_HELPER_NAME ") did not connect in time"
							: "the HTTP helper (" HTTP_HELPER_NAME ") ended before it connected");
	}
	free(b.p);
	if (rc < 0)
		helper_end(h);
	else
		h->tunnel = true;
	return rc;
}

int http_call(struct http *h, const struct http_req *rq, struct http_resp *rs, struct err *e)
{
	memset(rs, 0, sizeof *rs);
	h->cancelled = false;
	if (!h->open)
		return err_set(e, "the HTTP client is closed");
	if (h->tunnel)
		return err_set(e, "the HTTP client is a tunnel");
	int64_t deadline = rq->deadline_ms ? rq->deadline_ms : clock_ms() + rq->timeout_ms;
	int64_t give_up = deadline + rq->timeout_ms + STUCK_MS;
	char *json = rq->json ? json_dumps(rq->json, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
	if (rq->json && !json)
		return err_set(e, "out of memory");
	struct ag_buf b = {0};
	struct err te = {""};
	int rc = too_large(rq, json, &te);
	/* Twice at most: a helper that was ending as the request came took none of it. */
	for (int tries = 0; rc == 0; tries++) {
		te.msg[0] = '\0';
		rc = -1;
		if (h->pid && h->stale)
			helper_end(h);
		if (!h->pid && helper_start(h, &te) < 0)
			break;
		uint8_t type = 0;
		struct ag_cur c;
		int r = send_request(h, rq, json, &b) < 0 ? -1 : next_frame(h, give_up, &b, &type, &c);
		if (r == 1 && type == HW_TAKEN) {
			rc = take_answer(h, rq, give_up, &b, rs, &te);
			break;
		}
		char how[96] = "";
		if (r == -1) /* its socket ended: it is exiting */
			helper_how(h, how, sizeof how);
		helper_end(h);
		if (r == 0) {
			err_set(&te, "cancelled");
			break;
		}
		err_set(&te, "the HTTP helper (" HTTP_HELPER_NAME ") %s%s",
			r == -2 ? "did not take the request in time" : "ended before it took the request", how);
		if (r == -2 || tries == 1) /* it may have taken it after all; or twice is enough */
			break;
		rc = 0; /* nothing was sent: once more */
	}
	if (rc < 0)
		err_set(e, "%s", te.msg);
	free(json);
	free(b.p);
	return rc;
}

char *http_escape(const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(s);
	char *r = malloc(3 * n + 1), *d = r;
	for (; r && *s; s++) {
		unsigned char ch = (unsigned char)*s;
		if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || strchr("-._~", ch)) {
			*d++ = (char)ch;
		} else {
			*d++ = '%';
			*d++ = hex[ch >> 4];
			*d++ = hex[ch & 15];
		}
	}
	if (r)
		*d = '\0';
	return r;
}

void http_resp_free(struct http_resp *rs)
{
	free(rs->body);
	json_decref(rs->json);
	memset(rs, 0, sizeof *rs);
}
