/* The Engine API's tar and attach streams (see dkstream.h), on raw HTTP/1.1 connections. */
#include "dkstream.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/base/clock.h"

#define TAR_BLOCK 512

static int tar_room(struct dktar *t, size_t n, struct err *e)
{
	if (t->len + n <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap : 65536;
	while (cap < t->len + n)
		cap *= 2;
	unsigned char *p = realloc(t->p, cap);
	if (!p)
		return err_set(e, "out of memory");
	t->p = p;
	t->cap = cap;
	return 0;
}

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	return n && n < 100 && strcmp(s, ".") && strcmp(s, "..") &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == n;
}

int dktar_file(struct dktar *t, const char *name, const void *data, size_t n, unsigned mode, struct err *e)
{
	if (!name_ok(name))
		return err_set(e, "'%s' is not a plain file name for the sandbox's files", name);
	if (n >= 077777777777ULL)
		return err_set(e, "%s is too large", name);
	size_t body = (n + TAR_BLOCK - 1) / TAR_BLOCK * TAR_BLOCK;
	if (tar_room(t, TAR_BLOCK + body, e) < 0)
		return -1;
	unsigned char *h = t->p + t->len;
	memset(h, 0, TAR_BLOCK + body);
	memcpy(h, name, strlen(name));
	snprintf((char *)h + 100, 8, "%07o", mode & 0777);
	snprintf((char *)h + 108, 8, "%07o", 0);
	snprintf((char *)h + 116, 8, "%07o", 0);
	snprintf((char *)h + 124, 12, "%011llo", (unsigned long long)n);
	snprintf((char *)h + 136, 12, "%011o", 0);
	h[156] = '0';
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (int i = 0; i < TAR_BLOCK; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	if (n)
		memcpy(h + TAR_BLOCK, data, n);
	t->len += TAR_BLOCK + body;
	return 0;
}

int dktar_end(struct dktar *t, struct err *e)
{
	if (tar_room(t, 2 * TAR_BLOCK, e) < 0)
		return -1;
	memset(t->p + t->len, 0, 2 * TAR_BLOCK);
	t->len += 2 * TAR_BLOCK;
	return 0;
}

void dktar_free(struct dktar *t)
{
	free(t->p);
	t->p = NULL;
	t->len = t->cap = 0;
}

/* A connection of its own to the engine. */
static int connect_engine(const struct dkapi *d, struct err *e)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	snprintf(sa.sun_path, sizeof sa.sun_path, "%s", d->sock);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_sys(e, "socket");
	if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
		err_sys(e, "connecting to the engine at %s", d->sock);
		close(fd);
		return -1;
	}
	return fd;
}

static int send_until(int fd, const void *buf, size_t n, int64_t until, struct err *e)
{
	const char *p = buf;
	while (n) {
		int left = (int)(until - clock_ms());
		struct pollfd pf = {fd, POLLOUT, 0};
		if (left <= 0 || poll(&pf, 1, left) == 0)
			return err_set(e, "the engine did not take the request in time");
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (w < 0)
			return err_sys(e, "writing to the engine");
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads the answer's status line and headers, byte by byte so that nothing after them is
 * taken (on an attach, the stream follows). The status, or -1 with e set; head gets them. */
static long read_head(int fd, char *head, size_t cap, int64_t until, struct err *e)
{
	size_t n = 0;
	while (n < 4 || memcmp(head + n - 4, "\r\n\r\n", 4)) {
		if (n + 1 >= cap)
			return err_set(e, "the engine's answer header is too long");
		int left = (int)(until - clock_ms());
		struct pollfd pf = {fd, POLLIN, 0};
		if (left <= 0 || poll(&pf, 1, left) == 0)
			return err_set(e, "the engine did not answer in time");
		ssize_t r = recv(fd, head + n, 1, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			return r < 0 ? err_sys(e, "reading the engine's answer") : err_set(e, "the engine closed the connection");
		n++;
	}
	head[n] = '\0';
	long status;
	if (sscanf(head, "HTTP/1.%*[01] %ld", &status) != 1)
		return err_set(e, "the engine's answer is not HTTP");
	return status;
}

/* The engine's reason in an error answer's body (bounded), into e. */
static int answer_error(int fd, const char *what, long status, int64_t until, struct err *e)
{
	char body[1024];
	size_t n = 0;
	while (n + 1 < sizeof body) {
		int left = (int)(until - clock_ms());
		struct pollfd pf = {fd, POLLIN, 0};
		if (left <= 0 || poll(&pf, 1, left < 1000 ? left : 1000) == 0)
			break;
		ssize_t r = recv(fd, body + n, sizeof body - 1 - n, MSG_DONTWAIT);
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	body[n] = '\0';
	json_t *j = json_loads(body, 0, NULL);
	err_set(e, "%s: %s (HTTP %ld)", what, dkapi_message(j, "no reason given"), status);
	json_decref(j);
	return -1;
}

int dkstream_put(struct dkapi *d, const char *id, const char *dir, const struct dktar *t, long timeout_ms,
		 struct err *e)
{
	int64_t until = clock_ms() + timeout_ms;
	char *q = http_escape(dir), req[1024], head[DKSTREAM_HEAD_MAX];
	if (!q)
		return err_set(e, "out of memory");
	int n = snprintf(req, sizeof req,
			 "PUT %s/containers/%s/archive?path=%s&noOverwriteDirNonDir=1 HTTP/1.1\r\nHost: docker\r\n"
			 "Content-Type: application/x-tar\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
			 d->api, id, q, t->len);
	free(q);
	if (n < 0 || (size_t)n >= sizeof req)
		return err_set(e, "the container's id is too long");
	int fd = connect_engine(d, e);
	if (fd < 0)
		return -1;
	int rc = send_until(fd, req, (size_t)n, until, e);
	if (rc == 0)
		rc = send_until(fd, t->p, t->len, until, e);
	long status = rc == 0 ? read_head(fd, head, sizeof head, until, e) : -1;
	if (status >= 0 && status != 200)
		rc = answer_error(fd, "the engine would not take the sandbox's files", status, until, e);
	else if (status < 0)
		rc = -1;
	close(fd);
	return rc;
}

int dkstream_attach(struct dkapi *d, const char *id, long timeout_ms, struct err *e)
{
	int64_t until = clock_ms() + timeout_ms;
	char req[512], head[DKSTREAM_HEAD_MAX];
	int n = snprintf(req, sizeof req,
			 "POST %s/containers/%s/attach?stream=1&stdin=1&stdout=1&stderr=0 HTTP/1.1\r\nHost: docker\r\n"
			 "Content-Length: 0\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
			 d->api, id);
	if (n < 0 || (size_t)n >= sizeof req)
		return err_set(e, "the container's id is too long");
	int fd = connect_engine(d, e);
	if (fd < 0)
		return -1;
	long status = send_until(fd, req, (size_t)n, until, e) == 0 ? read_head(fd, head, sizeof head, until, e) : -1;
	/* 101 where the engine upgrades, 200 from engines that just hand the connection over. */
	if (status == 101 || status == 200)
		return fd;
	if (status >= 0)
		answer_error(fd, "the engine would not attach to the sandbox container", status, until, e);
	close(fd);
	return -1;
}
