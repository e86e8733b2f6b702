#include "proxy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/base/clock.h"
#include "../../src/base/log.h"

/* ---------------------------------------------------------------- the server */

/* A connection's thread is detached: one stuck in the resolver must not hold up a shutdown.
 * So the proxy is freed by whoever drops the last reference, proxy_stop or the last thread. */
struct conn {
	struct proxy *px;
	int client, upstream;       /* -1 when closed */
	bool used;
};

struct proxy {
	struct netpolicy pol;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd, stop_fd;
	pthread_t acceptor;
	pthread_mutex_t mu;
	unsigned refs;              /* proxy_stop's, and one per running connection */
	bool stopped;               /* proxy_stop was called: the call it served is over */
	struct conn conns[PROXY_MAX_CONN];
	unsigned allowed, refused;
	int unreachable_fd;         /* eventfd: readable once an index host could not be reached */
	char unreachable[PROXY_WHY_MAX]; /* the first such failure, "host:port: why"; "" for none */
	bool reached;               /* an index host answered: a later failure may pass, pip retries */
};

static void release(struct proxy *px)
{
	pthread_mutex_lock(&px->mu);
	bool last = --px->refs == 0;
	pthread_mutex_unlock(&px->mu);
	if (!last)
		return;
	close(px->stop_fd);
	close(px->unreachable_fd);
	pthread_mutex_destroy(&px->mu);
	free(px);
}

/* A connection's line: logged for the call while the proxy serves it; to stderr alone once the
 * call stopped the proxy (a connection that outlived it, say in a slow name lookup, must not
 * speak of a call that ended or was cancelled). */
__attribute__((format(printf, 3, 4))) static void px_log(struct proxy *px, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&px->mu);
	if (px->stopped)
		log_local(level, "%s", msg);
	else
		log_msg(level, "%s", msg);
	pthread_mutex_unlock(&px->mu);
}

static void reply(int fd, const char *status, const char *why)
{
	char msg[600];
	int n = snprintf(msg, sizeof msg,
			 "HTTP/1.1 %s\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: %zu\r\n\r\n%s\n",
			 status, strlen(why) + 1, why);
	if (n > 0)
		(void)!write(fd, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg);
}

/* Waits until fd has `events` or stop_fd fires or ms pass. 1 ready, 0 timed out / stopped. */
static int wait_fd(struct proxy *px, int fd, short events, int ms)
{
	struct pollfd p[2] = {{fd, events, 0}, {px->stop_fd, POLLIN, 0}};
	int r;
	do
		r = poll(p, 2, ms);
	while (r < 0 && errno == EINTR);
	return r > 0 && !p[1].revents && p[0].revents ? 1 : 0;
}

static int write_all(struct proxy *px, int fd, const char *buf, size_t n)
{
	while (n) {
		ssize_t w = write(fd, buf, n);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (!wait_fd(px, fd, POLLOUT, PROXY_IDLE_MS))
				return -1;
			continue;
		}
		if (w <= 0)
			return -1;
		buf += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads the request head (through "\r\n\r\n") into buf; returns its total bytes read (the
 * head and whatever followed), *head_len the head's length; -1 on timeout, EOF or overlong. */
static ssize_t read_head(struct proxy *px, int fd, char *buf, size_t cap, size_t *head_len)
{
	size_t len = 0;
	int64_t deadline = clock_ms() + PROXY_HEAD_MS;
	while (len < cap) {
		int64_t left = deadline - clock_ms();
		if (left <= 0 || !wait_fd(px, fd, POLLIN, (int)left))
			return -1;
		ssize_t r = read(fd, buf + len, cap - len);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return -1;
		len += (size_t)r;
		char *end = memmem(buf, len, "\r\n\r\n", 4);
		if (end) {
			*head_len = (size_t)(end - buf) + 4;
			return (ssize_t)len;
		}
	}
	return -1;
}

/* Connects to one address within PROXY_CONNECT_MS. The fd, or -1 with *err the errno
 * (ETIMEDOUT when no answer came in time). */
static int dial(struct proxy *px, const struct addrinfo *ai, int *err)
{
	int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
	if (fd < 0) {
		*err = errno;
		return -1;
	}
	if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
		return fd;
	*err = errno;
	if (*err == EINPROGRESS) {
		socklen_t el = sizeof *err;
		*err = ETIMEDOUT;
		if (wait_fd(px, fd, POLLOUT, PROXY_CONNECT_MS) &&
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &el) == 0 && *err == 0)
			return fd;
	}
	close(fd);
	return -1;
}

/* The first index host that could not be reached, while none has answered yet, is kept, and
 * unreachable_fd fired: the install step is hopeless, and whoever runs it stops it rather than
 * let pip retry. Once a host answered, a failure may be passing: pip's retries are left to it. */
static void note_unreachable(struct proxy *px, const char *host, unsigned port, const char *why)
{
	pthread_mutex_lock(&px->mu);
	bool first = !px->unreachable[0] && !px->stopped && !px->reached;
	if (first)
		snprintf(px->unreachable, sizeof px->unreachable, "%.200s:%u: %s", host, port, why);
	pthread_mutex_unlock(&px->mu);
	uint64_t one = 1;
	if (first)
		(void)!write(px->unreachable_fd, &one, sizeof one);
}

/* Resolves host:port and connects to its first allowed address. The fd, or -1 with *why. */
static int open_upstream(struct proxy *px, const char *host, unsigned port, const char **why)
{
	char service[8], detail[160];
	snprintf(service, sizeof service, "%u", port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	int gai = getaddrinfo(host, service, &hints, &res);
	if (gai != 0) {
		*why = "the index host does not resolve";
		snprintf(detail, sizeof detail, "name resolution failed (%s)", gai_strerror(gai));
		note_unreachable(px, host, port, detail);
		return -1;
	}
	int fd = -1, err = 0;
	bool any_allowed = false;
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		if (!netpolicy_addr_allowed(&px->pol, host, ai->ai_addr))
			continue;
		any_allowed = true;
		fd = dial(px, ai, &err);
	}
	freeaddrinfo(res);
	if (fd >= 0) {
		pthread_mutex_lock(&px->mu);
		px->reached = true;
		pthread_mutex_unlock(&px->mu);
		return fd;
	}
	if (!any_allowed) {
		*why = "the index host resolves to a local or private address, which the install step may not reach";
		return -1;
	}
	*why = "the index host does not answer";
	if (err == ECONNREFUSED)
		snprintf(detail, sizeof detail, "connection refused");
	else if (err == ETIMEDOUT)
		snprintf(detail, sizeof detail, "connecting timed out after %d s", PROXY_CONNECT_MS / 1000);
	else
		snprintf(detail, sizeof detail, "cannot connect (%s)", strerror(err));
	note_unreachable(px, host, port, detail);
	return -1;
}

/* Copies both ways until both sides are done or PROXY_IDLE_MS pass without a byte. */
static void splice_both(struct proxy *px, int a, int b)
{
	char buf[65536];
	bool open_a = true, open_b = true;
	while (open_a || open_b) {
		struct pollfd p[3] = {{open_a ? a : -1, POLLIN, 0}, {open_b ? b : -1, POLLIN, 0}, {px->stop_fd, POLLIN, 0}};
		int r = poll(p, 3, PROXY_IDLE_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || p[2].revents)
			return;
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			int from = i ? b : a, to = i ? a : b;
			ssize_t n = read(from, buf, sizeof buf);
			if (n < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			if (n <= 0) {
				shutdown(to, SHUT_WR);
				if (i)
					open_b = false;
				else
					open_a = false;
				continue;
			}
			if (write_all(px, to, buf, (size_t)n) < 0)
				return;
		}
	}
}

/*
 * The plain-HTTP request to send upstream: the request line in origin form, the client's
 * headers but Proxy-* and Connection ones, and "Connection: close" -- the client must open a
 * new connection (and so come through the policy again) for every request. Caller frees.
 */
static char *origin_request(const char *head, size_t head_len, const char *method, const char *path,
			    const char *version, size_t *out_len)
{
	char *out = malloc(head_len + strlen(path) + 64);
	if (!out)
		return NULL;
	size_t o = (size_t)sprintf(out, "%s %s %s\r\n", method, path, version);
	const char *line = memchr(head, '\n', head_len);
	const char *end = head + head_len;
	for (line = line ? line + 1 : end; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t l = nl ? (size_t)(nl - line) + 1 : (size_t)(end - line);
		bool drop = l <= 2 || !strncasecmp(line, "proxy-", 6) || !strncasecmp(line, "connection:", 11) ||
			    !strncasecmp(line, "keep-alive:", 11);
		if (!drop) {
			memcpy(out + o, line, l);
			o += l;
		}
		line += l;
	}
	o += (size_t)sprintf(out + o, "Connection: close\r\n\r\n");
	*out_len = o;
	return out;
}

/* A request's head, as far as the proxy needs it. */
struct head {
	char method[16], target[2048], version[16];
	char host[256];
	unsigned port;
	const char *path;        /* in target; "/" for CONNECT */
	bool ok;                 /* an HTTP/1 request line */
	bool tunnel;             /* CONNECT */
};

/* Parses the request line of buf and checks it against the policy. NULL when the request may
 * go on, else why not. */
static const char *parse_head(const struct proxy *px, const char *buf, size_t head_len, struct head *h)
{
	const char *sp1 = memchr(buf, ' ', head_len);
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', head_len - (size_t)(sp1 + 1 - buf)) : NULL;
	const char *eol = memchr(buf, '\r', head_len);
	h->path = "/";
	h->ok = sp1 && sp2 && eol && sp2 < eol && (size_t)(sp1 - buf) < sizeof h->method &&
		(size_t)(sp2 - sp1 - 1) < sizeof h->target && (size_t)(eol - sp2 - 1) < sizeof h->version;
	if (h->ok) {
		snprintf(h->method, sizeof h->method, "%.*s", (int)(sp1 - buf), buf);
		snprintf(h->target, sizeof h->target, "%.*s", (int)(sp2 - sp1 - 1), sp1 + 1);
		snprintf(h->version, sizeof h->version, "%.*s", (int)(eol - sp2 - 1), sp2 + 1);
		h->ok = !strncmp(h->version, "HTTP/1.", 7);
	}
	h->tunnel = h->ok && !strcmp(h->method, "CONNECT");
	if (!h->ok)
		return "not an HTTP/1 proxy request";
	if (h->tunnel && netpolicy_split_hostport(h->target, strlen(h->target), h->host, sizeof h->host, &h->port, 443) < 0)
		return "a CONNECT needs host:port";
	if (!h->tunnel && strncasecmp(h->target, "http://", 7))
		return "only CONNECT and absolute http:// requests go through this proxy";
	if (!h->tunnel) {
		const char *hp = h->target + 7;
		size_t n = strcspn(hp, "/?#");
		h->path = hp[n] ? hp + n : "/";
		if (memchr(hp, '@', n) || netpolicy_split_hostport(hp, n, h->host, sizeof h->host, &h->port, 80) < 0)
			return "a request needs a plain http://host/ URL";
	}
	if (!netpolicy_host_allowed(&px->pol, h->host))
		return "not a package index host: the install step reaches the package index only";
	if (!netpolicy_port_allowed(&px->pol, h->port))
		return "not a port of the package index";
	return NULL;
}

/* Counts a connection let through or refused. */
static void count(struct proxy *px, bool allowed)
{
	pthread_mutex_lock(&px->mu);
	if (allowed)
		px->allowed++;
	else
		px->refused++;
	pthread_mutex_unlock(&px->mu);
}

/* Opens the way to the index on up: the tunnel's answer, or the request in origin form; then
 * what the client sent after the head. 0, or -1 when a write failed. */
static int forward(struct proxy *px, struct conn *c, int up, const struct head *h, const char *buf, size_t head_len,
		   size_t got)
{
	int rc;
	if (h->tunnel) {
		static const char est[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		rc = write_all(px, c->client, est, sizeof est - 1);
	} else {
		size_t rl;
		char *rq = origin_request(buf, head_len, h->method, h->path, h->version, &rl);
		rc = rq ? write_all(px, up, rq, rl) : -1;
		free(rq);
	}
	/* Bytes the client sent after the head (a TLS hello, a request body) go on first. */
	if (rc == 0 && got > head_len)
		rc = write_all(px, up, buf + head_len, got - head_len);
	return rc;
}

/* A request the policy allows: connected to the index (at an address the policy allows too)
 * and relayed both ways. */
static void relay(struct proxy *px, struct conn *c, const struct head *h, const char *buf, size_t head_len,
		  size_t got)
{
	const char *why = NULL;
	int up = open_upstream(px, h->host, h->port, &why);
	pthread_mutex_lock(&px->mu);
	c->upstream = up;
	pthread_mutex_unlock(&px->mu);
	count(px, up >= 0);
	if (up < 0) {
		px_log(px, LOG_NOTICE, "install step: refused %s:%u: %s", h->host, h->port, why);
		reply(c->client, strstr(why, "local") ? "403 Forbidden" : "502 Bad Gateway", why);
		return;
	}
	px_log(px, LOG_DEBUG, "install step: %s %s:%u", h->method, h->host, h->port);
	if (forward(px, c, up, h, buf, head_len, got) == 0)
		splice_both(px, c->client, up);
}

static void serve(struct conn *c)
{
	struct proxy *px = c->px;
	char *buf = malloc(PROXY_HEAD_MAX);
	size_t head_len = 0;
	ssize_t got = buf ? read_head(px, c->client, buf, PROXY_HEAD_MAX, &head_len) : -1;
	struct head h;
	const char *why = got < 0 ? NULL : parse_head(px, buf, head_len, &h);
	if (got >= 0 && why) {
		px_log(px, LOG_NOTICE, "install step: refused %s %.300s: %s", h.ok ? h.method : "?", h.ok ? h.target : "",
		       why);
		count(px, false);
		reply(c->client, h.ok ? "403 Forbidden" : "400 Bad Request", why);
	} else if (got >= 0) {
		relay(px, c, &h, buf, head_len, (size_t)got);
	}
	free(buf);
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct proxy *px = c->px;
	serve(c);
	pthread_mutex_lock(&px->mu);
	close(c->client);
	c->client = -1;
	if (c->upstream >= 0)
		close(c->upstream);
	c->upstream = -1;
	c->used = false;
	pthread_mutex_unlock(&px->mu);
	release(px);
	return NULL;
}

/* A free connection slot, or NULL. Called with mu held. */
static struct conn *free_slot(struct proxy *px)
{
	for (int i = 0; i < PROXY_MAX_CONN; i++)
		if (!px->conns[i].used)
			return &px->conns[i];
	return NULL;
}

/* How long the listener is left alone when no descriptor (or memory) is left to accept with:
 * the connection stays in the backlog, and polling the listener meanwhile would only spin. */
#define ACCEPT_BACKOFF_MS 100

static void *accept_main(void *arg)
{
	struct proxy *px = arg;
	bool starved = false;
	for (;;) {
		struct pollfd p[2] = {{px->stop_fd, POLLIN, 0}, {px->listen_fd, POLLIN, 0}};
		if (poll(p, starved ? 1 : 2, starved ? ACCEPT_BACKOFF_MS : -1) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		starved = false;
		if (!p[1].revents)
			continue;
		int fd = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			starved = errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM;
			continue;
		}
		pthread_mutex_lock(&px->mu);
		struct conn *c = free_slot(px);
		if (c) {
			pthread_t t;
			pthread_attr_t a;
			*c = (struct conn){.px = px, .client = fd, .upstream = -1, .used = true};
			px->refs++;
			bool started = pthread_attr_init(&a) == 0 &&
				       pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
				       pthread_create(&t, &a, conn_main, c) == 0;
			pthread_attr_destroy(&a);
			if (!started) {
				px->refs--;
				c->used = false;
				c = NULL;
			}
		}
		pthread_mutex_unlock(&px->mu);
		if (!c) {
			reply(fd, "503 Service Unavailable", "too many connections at once");
			close(fd);
		}
	}
	return NULL;
}

int proxy_start(struct proxy **out, const char *path, const struct netpolicy *pol, struct err *e)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return err_set(e, "the proxy socket path %s is too long", path);
	struct proxy *px = calloc(1, sizeof *px);
	if (!px)
		return err_set(e, "out of memory");
	px->pol = *pol;
	px->listen_fd = px->stop_fd = px->unreachable_fd = -1;
	px->refs = 1;
	snprintf(px->path, sizeof px->path, "%s", path);
	strcpy(sa.sun_path, path);
	pthread_mutex_init(&px->mu, NULL);
	px->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	px->unreachable_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	px->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (px->stop_fd < 0 || px->unreachable_fd < 0 || px->listen_fd < 0) {
		err_sys(e, "the install step's proxy");
		goto fail;
	}
	unlink(path);
	if (bind(px->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(path, 0666) < 0 ||
	    listen(px->listen_fd, 64) < 0) {
		err_sys(e, "the install step's proxy at %s", path);
		goto fail;
	}
	if (pthread_create(&px->acceptor, NULL, accept_main, px) != 0) {
		err_set(e, "the install step's proxy: cannot start its thread");
		goto fail;
	}
	*out = px;
	return 0;
fail:
	if (px->listen_fd >= 0) {
		close(px->listen_fd);
		unlink(path);
	}
	if (px->stop_fd >= 0)
		close(px->stop_fd);
	if (px->unreachable_fd >= 0)
		close(px->unreachable_fd);
	pthread_mutex_destroy(&px->mu);
	free(px);
	return -1;
}

void proxy_stop(struct proxy *px)
{
	if (!px)
		return;
	uint64_t one = 1;
	(void)!write(px->stop_fd, &one, sizeof one);
	pthread_join(px->acceptor, NULL);
	close(px->listen_fd);
	unlink(px->path);
	/* Every wait of a connection also watches stop_fd: the threads end on their own. */
	pthread_mutex_lock(&px->mu);
	px->stopped = true;
	for (int i = 0; i < PROXY_MAX_CONN; i++) {
		struct conn *c = &px->conns[i];
		if (c->used && c->client >= 0)
			shutdown(c->client, SHUT_RDWR);
		if (c->used && c->upstream >= 0)
			shutdown(c->upstream, SHUT_RDWR);
	}
	pthread_mutex_unlock(&px->mu);
	release(px);
}

void proxy_counts(const struct proxy *px, unsigned *allowed, unsigned *refused)
{
	pthread_mutex_lock((pthread_mutex_t *)&px->mu);
	*allowed = px->allowed;
	*refused = px->refused;
	pthread_mutex_unlock((pthread_mutex_t *)&px->mu);
}

int proxy_unreachable_fd(const struct proxy *px)
{
	return px->unreachable_fd;
}

bool proxy_unreachable(struct proxy *px, char *buf, size_t n)
{
	pthread_mutex_lock(&px->mu);
	snprintf(buf, n, "%s", px->unreachable);
	pthread_mutex_unlock(&px->mu);
	return buf[0] != '\0';
}
