#include "kexec.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "../../src/base/clock.h"
#include "wsframe.h"

#define BODY_MAX 65536

void kexec_init(struct kexec *x)
{
	memset(x, 0, sizeof *x);
	x->fd = -1;
	x->tun.fd = -1;
	x->tun.cancel_fd = -1;
	x->cancel_fd = -1;
	x->max_msg = KEXEC_MSG_MAX;
	x->send_deadline = -1;
}

char *kexec_exec_path(const char *ns, const char *pod, const char *container, const char *const *argv, size_t n,
		      bool with_stdin)
{
	char *ens = http_escape(ns), *epod = http_escape(pod), *ec = container ? http_escape(container) : NULL;
	size_t need = 128 + (ens ? strlen(ens) : 0) + (epod ? strlen(epod) : 0) + (ec ? strlen(ec) : 0);
	for (size_t i = 0; i < n; i++)
		need += 9 + 3 * strlen(argv[i]);
	char *out = ens && epod && (!container || ec) ? malloc(need) : NULL;
	if (out) {
		size_t l = (size_t)snprintf(out, need, "/api/v1/namespaces/%s/pods/%s/exec?", ens, epod);
		for (size_t i = 0; out && i < n; i++) {
			char *a = http_escape(argv[i]);
			if (!a) {
				free(out);
				out = NULL;
				break;
			}
			l += (size_t)snprintf(out + l, need - l, "command=%s&", a);
			free(a);
		}
		if (out)
			snprintf(out + l, need - l, "%s%s%sstdout=true&stderr=true%s", ec ? "container=" : "", ec ? ec : "",
				 ec ? "&" : "", with_stdin ? "&stdin=true" : "");
	}
	free(ens);
	free(epod);
	free(ec);
	return out;
}

/* Sends n bytes of p whole, by deadline (-1: none). A server that stops reading fills the
 * buffers: the send then fails at the deadline rather than waiting for good. */
static int send_all(int fd, const void *p, size_t n, int64_t deadline, struct err *e)
{
	const char *c = p;
	while (n) {
		ssize_t w = send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			int64_t left = deadline < 0 ? 1000 : deadline - clock_ms();
			if (left <= 0)
				return err_set(e, "the API server took no more of the stream's bytes in time");
			poll(&(struct pollfd){fd, POLLOUT, 0}, 1, left > 1000 ? 1000 : (int)left);
			continue;
		}
		if (w <= 0)
			return err_sys(e, "the connection to the API server");
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads what is there (waiting until deadline, -1: none) into the buffer, growing it up to
 * room more bytes. 1 read, 0 at the connection's end, KEXEC_TIMEOUT, -1 with e set. */
static int fill(struct kexec *x, size_t room, int64_t deadline, struct err *e)
{
	if (x->cap - x->len < room) {
		size_t nc = x->len + room;
		unsigned char *nb = realloc(x->buf, nc);
		if (!nb)
			return err_set(e, "out of memory");
		x->buf = nb;
		x->cap = nc;
	}
	for (;;) {
		int ms = -1;
		int64_t left = 0;
		if (deadline >= 0) {
			/* Past the deadline, what is there already is still read: a wait of 0 reads. */
			left = deadline - clock_ms();
			ms = left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
		}
		struct pollfd p[2] = {{x->fd, POLLIN, 0}, {x->cancel_fd, POLLIN, 0}};
		int r = poll(p, x->cancel_fd >= 0 ? 2 : 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return err_sys(e, "poll");
		if (r > 0 && x->cancel_fd >= 0 && p[1].revents)
			return err_set(e, "cancelled");
		if (r == 0 && deadline >= 0 && left <= 0)
			return KEXEC_TIMEOUT;
		if (r == 0)
			continue;
		ssize_t got = read(x->fd, x->buf + x->len, x->cap - x->len);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return err_sys(e, "reading from the API server");
		x->len += (size_t)got;
		return got > 0;
	}
}

/* The value of header name in head (a NUL-terminated answer head), copied to out. */
static bool header(const char *head, const char *name, char *out, size_t n)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l; l = strstr(l, "\r\n")) {
		l += 2;
		if (!strncasecmp(l, name, nl) && l[nl] == ':') {
			const char *v = l + nl + 1;
			v += strspn(v, " \t");
			size_t vl = strcspn(v, "\r");
			while (vl && (v[vl - 1] == ' ' || v[vl - 1] == '\t'))
				vl--;
			snprintf(out, n, "%.*s", (int)vl, v);
			return true;
		}
	}
	return false;
}

/* Whether the comma-separated list holds token (case-insensitive). */
static bool has_token(const char *list, const char *token)
{
	size_t tl = strlen(token);
	for (const char *p = list; *p;) {
		p += strspn(p, " ,");
		size_t l = strcspn(p, ",");
		size_t t = l;
		while (t && p[t - 1] == ' ')
			t--;
		if (t == tl && !strncasecmp(p, token, tl))
			return true;
		p += l;
	}
	return false;
}

/* Not an upgrade: the body (a metav1.Status) read within deadline, and its message in e. */
static int refused(struct kexec *x, size_t head_len, const char *head, int64_t deadline, struct err *e)
{
	char cl[32] = "";
	long want = header(head, "Content-Length", cl, sizeof cl) ? strtol(cl, NULL, 10) : BODY_MAX;
	if (want < 0 || want > BODY_MAX)
		want = BODY_MAX;
	while (x->len - head_len < (size_t)want && fill(x, 4096, deadline, e) == 1)
		;
	size_t bl = x->len - head_len < (size_t)want ? x->len - head_len : (size_t)want;
	x->http_body = strndup((const char *)x->buf + head_len, bl);
	json_t *st = json_loadb((const char *)x->buf + head_len, bl, 0, NULL);
	const char *msg = json_string_value(json_object_get(st, "message"));
	err_clear(e);
	err_set(e, "the API server refused the stream (HTTP %ld)%s%.300s", x->http_status, msg ? ": " : "",
		msg ? msg : "");
	json_decref(st);
	return -1;
}

int kexec_open(struct kexec *x, const struct kcreds *c, const char *path, long timeout_ms, struct err *e)
{
	int64_t deadline = clock_ms() + timeout_ms;
	const char *hp = strstr(c->server, "://");
	if (!hp)
		return err_set(e, "the server %s is not a URL", c->server);
	hp += 3;
	size_t hl = strcspn(hp, "/");
	const char *prefix = hp + hl;
	if (http_open(&x->tun, NULL, e) < 0)
		return -1;
	x->tun.cancel_fd = x->cancel_fd;
	if (http_tls(&x->tun, c->ca, c->ca_len, c->cert, c->cert_len, c->key, c->key_len, e) < 0 ||
	    http_tunnel(&x->tun, c->server, timeout_ms, e) < 0)
		return -1;
	x->fd = x->tun.fd;
	char key[WS_KEY_LEN + 1], accept[WS_ACCEPT_LEN + 1];
	if (ws_key(key) < 0)
		return err_set(e, "no randomness for the WebSocket key");
	ws_accept(key, accept);
	size_t need = 512 + strlen(prefix) + strlen(path) + hl + (c->token ? strlen(c->token) : 0);
	char *rq = malloc(need);
	if (!rq)
		return err_set(e, "out of memory");
	int n = snprintf(rq, need,
			 "GET %s%s HTTP/1.1\r\nHost: %.*s\r\nUser-Agent: sandbox-mcp\r\nUpgrade: websocket\r\n"
			 "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
			 "Sec-WebSocket-Protocol: " KEXEC_V5 ", " KEXEC_V4 "\r\n%s%s%s\r\n",
			 prefix, path, (int)hl, hp, key, c->token ? "Authorization: Bearer " : "", c->token ? c->token : "",
			 c->token ? "\r\n" : "");
	int rc = send_all(x->fd, rq, (size_t)n, deadline, e);
	explicit_bzero(rq, need);
	free(rq);
	if (rc < 0)
		return -1;
	/* The answer's head, bounded. */
	char *end = NULL;
	while (!end) {
		if (x->len >= KEXEC_HEAD_MAX)
			return err_set(e, "the API server's answer has a head over %d bytes", KEXEC_HEAD_MAX);
		int r = fill(x, KEXEC_HEAD_MAX + 1 - x->len, deadline, e);
		if (r == KEXEC_TIMEOUT)
			return err_set(e, "the API server did not answer the exec within %ld ms", timeout_ms);
		if (r <= 0)
			return err_set(e, "the API server closed the connection before it answered the exec");
		/* The first frames may come in the same read: the head ends at its blank line. */
		end = memmem(x->buf, x->len, "\r\n\r\n", 4);
	}
	size_t head_len = (size_t)(end + 4 - (char *)x->buf);
	if (memchr(x->buf, '\0', head_len))
		return err_set(e, "the API server's answer head holds a NUL byte");
	end[2] = '\0';
	const char *head = (const char *)x->buf;
	if (strncmp(head, "HTTP/1.1 ", 9) || (x->http_status = strtol(head + 9, NULL, 10)) < 100)
		return err_set(e, "the API server's answer is not HTTP/1.1");
	if (x->http_status != 101)
		return refused(x, head_len, head, deadline, e);
	char v[128];
	if (!header(head, "Upgrade", v, sizeof v) || strcasecmp(v, "websocket") ||
	    !header(head, "Connection", v, sizeof v) || !has_token(v, "upgrade"))
		return err_set(e, "the API server answered 101 without upgrading to a WebSocket");
	if (!header(head, "Sec-WebSocket-Accept", v, sizeof v) || strcmp(v, accept))
		return err_set(e, "the API server's Sec-WebSocket-Accept is wrong");
	if (!header(head, "Sec-WebSocket-Protocol", v, sizeof v) || (strcmp(v, KEXEC_V5) && strcmp(v, KEXEC_V4)))
		return err_set(e, "the API server chose no subprotocol this client offered");
	x->v5 = !strcmp(v, KEXEC_V5);
	snprintf(x->proto, sizeof x->proto, "%s", x->v5 ? KEXEC_V5 : KEXEC_V4);
	/* What came after the head is the first frames'. */
	x->off = head_len;
	return 0;
}

/* One frame of ours, masked, sent by deadline (-1: none). */
static int send_frame(struct kexec *x, enum ws_op op, const void *pre, size_t pn, const void *p, size_t n,
		      int64_t deadline, struct err *e)
{
	if (x->fd < 0)
		return err_set(e, "the stream is closed");
	unsigned char head[WS_HEAD_MAX], mask[4];
	size_t h = ws_frame_head(head, op, true, pn + n, mask);
	unsigned char *f = malloc(h + pn + n);
	if (!f)
		return err_set(e, "out of memory");
	memcpy(f, head, h);
	if (pn)
		memcpy(f + h, pre, pn);
	if (n)
		memcpy(f + h + pn, p, n);
	ws_mask(f + h, pn + n, mask, 0);
	int rc = send_all(x->fd, f, h + pn + n, deadline, e);
	free(f);
	return rc;
}

int kexec_send(struct kexec *x, unsigned ch, const void *p, size_t n, struct err *e)
{
	unsigned char c = (unsigned char)ch;
	return send_frame(x, WS_BINARY, &c, 1, p, n, x->send_deadline, e);
}

int kexec_close_stdin(struct kexec *x, struct err *e)
{
	if (!x->v5)
		return 1;
	unsigned char m[2] = {KEXEC_CLOSE, KEXEC_STDIN};
	return send_frame(x, WS_BINARY, m, 2, NULL, 0, x->send_deadline, e);
}

/* Our close with code, once; the connection stays for the caller to end. */
static void send_close(struct kexec *x, int code)
{
	struct err ignored = {""};
	unsigned char c[2] = {(unsigned char)(code >> 8), (unsigned char)code};
	/* A courtesy: a second at most, whatever the stream's deadline. */
	int64_t by = clock_ms() + 1000;
	if (x->send_deadline >= 0 && x->send_deadline < by)
		by = x->send_deadline;
	if (x->fd >= 0 && !x->close_code && !x->close_sent)
		send_frame(x, WS_CLOSE, c, 2, NULL, 0, by, &ignored);
	x->close_sent = true;
}

void kexec_close_send(struct kexec *x)
{
	send_close(x, 1000);
}

int kexec_recv(struct kexec *x, int timeout_ms, unsigned *ch, const unsigned char **p, size_t *n, struct err *e)
{
	int64_t deadline = timeout_ms < 0 ? -1 : clock_ms() + timeout_ms;
	if (x->fd < 0 || x->close_code)
		return 0;
	for (;;) {
		/* What was taken goes: the unread bytes move to the buffer's start. */
		if (x->off) {
			memmove(x->buf, x->buf + x->off, x->len - x->off);
			x->len -= x->off;
			x->off = 0;
		}
		struct ws_frame f;
		const char *why = NULL;
		int code = 0;
		int r = ws_frame_parse(x->buf, x->len, x->max_msg, &f, &why, &code);
		if (r < 0) {
			send_close(x, code);
			return err_set(e, "the API server broke the WebSocket protocol: %s", why);
		}
		if (r == 0 || x->len - f.head < f.len) {
			size_t want = r == 0 ? 4096 : (size_t)(f.head + f.len - x->len);
			int fr = fill(x, want > 65536 ? want : 65536, deadline, e);
			if (fr == 0) {
				x->close_code = 1006;
				return 0;
			}
			if (fr < 0)
				return fr;
			continue;
		}
		const unsigned char *pl = x->buf + f.head;
		size_t len = (size_t)f.len;
		x->off = f.head + len;
		switch (f.op) {
		case WS_PING:
			if (send_frame(x, WS_PONG, pl, len, NULL, 0, x->send_deadline, e) < 0)
				return -1;
			/* A flood of pings is no data, and ends no wait later than its time. */
			if (deadline >= 0 && clock_ms() >= deadline)
				return KEXEC_TIMEOUT;
			continue;
		case WS_PONG:
			if (deadline >= 0 && clock_ms() >= deadline)
				return KEXEC_TIMEOUT;
			continue;
		case WS_CLOSE:
			send_close(x, 1000);
			x->close_code = len >= 2 ? pl[0] << 8 | pl[1] : 1005;
			return 0;
		case WS_TEXT:
			send_close(x, 1003);
			return err_set(e, "the API server sent a text message (no base64 subprotocol was offered)");
		case WS_BINARY:
		case WS_CONT:
			break;
		}
		if ((f.op == WS_CONT) != x->in_msg) {
			send_close(x, 1002);
			return err_set(e, "the API server broke the WebSocket protocol: %s",
				       x->in_msg ? "a new message before the last one ended" : "a continuation of no message");
		}
		if (f.op == WS_BINARY && f.fin) {
			if (!len)
				continue; /* no channel: nothing to take */
			*ch = pl[0];
			*p = pl + 1;
			*n = len - 1;
			return 1;
		}
		if (x->msg_len + len > x->max_msg) {
			send_close(x, 1009);
			return err_set(e, "the API server sent a message larger than %zu bytes", x->max_msg);
		}
		if (x->msg_len + len > x->msg_cap) {
			size_t nc = x->msg_len + len;
			unsigned char *nb = realloc(x->msg, nc);
			if (!nb)
				return err_set(e, "out of memory");
			x->msg = nb;
			x->msg_cap = nc;
		}
		memcpy(x->msg + x->msg_len, pl, len);
		x->msg_len += len;
		x->in_msg = !f.fin;
		if (f.fin) {
			size_t ml = x->msg_len;
			x->msg_len = 0;
			if (!ml)
				continue;
			*ch = x->msg[0];
			*p = x->msg + 1;
			*n = ml - 1;
			return 1;
		}
	}
}

int kexec_exit_code(const unsigned char *p, size_t n, char *why, size_t why_n)
{
	json_t *st = json_loadb((const char *)p, n, 0, NULL);
	const char *status = json_string_value(json_object_get(st, "status"));
	const char *reason = json_string_value(json_object_get(st, "reason"));
	const char *msg = json_string_value(json_object_get(st, "message"));
	int code = -1;
	if (status && !strcmp(status, "Success")) {
		code = 0;
	} else if (reason && !strcmp(reason, "NonZeroExitCode")) {
		json_t *causes = json_object_get(json_object_get(st, "details"), "causes"), *cause;
		size_t i;
		json_array_foreach(causes, i, cause) {
			const char *r = json_string_value(json_object_get(cause, "reason"));
			const char *m = json_string_value(json_object_get(cause, "message"));
			char *end;
			long v = m ? strtol(m, &end, 10) : -1;
			if (r && !strcmp(r, "ExitCode") && m && !*end && end != m && v >= 0 && v <= 255)
				code = (int)v;
		}
	}
	if (code < 0)
		snprintf(why, why_n, "%s", msg ? msg : st ? "a status without a message" : "a status that is not JSON");
	json_decref(st);
	return code;
}

void kexec_close(struct kexec *x)
{
	if (x->fd >= 0 && !x->close_code)
		send_close(x, 1000);
	http_close(&x->tun);
	x->fd = -1;
	free(x->buf);
	free(x->msg);
	free(x->http_body);
	x->buf = x->msg = NULL;
	x->http_body = NULL;
	x->len = x->cap = x->off = x->msg_len = x->msg_cap = 0;
}
