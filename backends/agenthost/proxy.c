#include "proxy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/base/clock.h"
#include "../../src/base/log.h"

/* ---------------------------------------------------------------- the server */

/* How long the listener is left alone when no descriptor (or memory) is left to accept with:
 * the connection stays in the backlog, and polling the listener meanwhile would only spin. */
#define ACCEPT_BACKOFF_MS 100
/* How long a connection refused for want of a slot is waited on for the socket it hands over
 * (the relay sends it at once after connecting, but a loaded machine may keep it from running
 * a while), and how many such connections are waited on at once: each holds a descriptor. */
#define HANDOVER_WAIT_MS 2000
#define REFUSED_WAITING 8
/* The listening socket's backlog. */
#define PROXY_BACKLOG 64

/* A connection's thread is detached: one stuck in the resolver must not hold up a shutdown.
 * So the proxy is freed by whoever drops the last reference, proxy_stop or the last thread. */
struct conn {
	struct proxy *px;
	struct netpolicy *pol;      /* the policy when it was accepted (owned by its thread) */
	int client, upstream;       /* -1 when closed */
	bool used;
};

struct proxy {
	struct netpolicy pol;       /* under mu: a call may narrow it */
	enum proxy_for who;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd, stop_fd;
	pthread_mutex_t mu;
	/* The proxy's threads (proxy_main), each holding a reference: one at a time leads, taking
	 * connections; the one that takes a connection hands the lead to a follower (or a thread
	 * started for it when none waits) and serves the connection itself, so that no thread's
	 * start or wake-up stands between a connection and its answer; done, it follows again, up to
	 * PROXY_FOLLOWERS of them, or ends. Under mu: the lead's state, the followers waiting on
	 * follow (proxy_stop waits there too, for LEAD_NONE and no follower), and whether
	 * proxy_stop was called. */
	enum { LEAD_HELD, LEAD_FREE, LEAD_NONE } lead;
	pthread_cond_t follow;
	unsigned followers;
	bool stopping;
	/* The leader's own, handed on with the lead: connections refused for want of a slot, each
	 * waited on for what it hands over until its time is up (told 503 then, or once it came,
	 * even when a slot frees meanwhile); and until when the listener is left alone. */
	struct refused_conn {
		int fd;
		int64_t until;
	} waiting[REFUSED_WAITING];
	size_t nw;
	int64_t starved_until;
	unsigned refs;              /* proxy_stop's, and one per thread of the proxy's */
	bool stopped;               /* proxy_stop was called: the call it served is over */
	struct conn conns[PROXY_MAX_CONN];
	int max_conn;               /* the slots used of conns: what the descriptors back (budget_take) */
	bool pipes;                 /* a tunnel may take two pipes to splice through */
	long fds;                   /* the descriptors its slots may hold, counted in budget_held */
	unsigned allowed, refused;
	int unreachable_fd;         /* eventfd: readable once an index host could not be reached */
	char unreachable[PROXY_WHY_MAX]; /* the first such failure, "host:port: why"; "" for none */
	bool reached;               /* an index host answered: a later failure may pass, pip retries */
	char refusals[PROXY_NOTE_MAX]; /* refused since proxy_take_refusals, "host:port (why); " */
	unsigned more_refusals;     /* those that did not fit */
};

/* How the proxy's lines name whom it serves. */
static const char *who_name(const struct proxy *px)
{
	return px->who == PROXY_CODE ? "code (--allow-hosts)" : "install step";
}

static void budget_give(struct proxy *px);

static void release(struct proxy *px)
{
	pthread_mutex_lock(&px->mu);
	bool last = --px->refs == 0;
	pthread_mutex_unlock(&px->mu);
	if (!last)
		return;
	budget_give(px);
	close(px->stop_fd);
	close(px->unreachable_fd);
	pthread_cond_destroy(&px->follow);
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
	/* Never waits, whatever O_NONBLOCK a handed-over socket's code set on it since: the
	 * acceptor tells a 503 too, and a wait there would hold up every connection and the stop. */
	if (n > 0)
		(void)!send(fd, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* The most descriptors one message on a unix socket carries (the kernel's SCM_MAX_FD). */
#define MSG_FDS_MAX 253
/* How deep drop_fd looks into unix sockets queued inside unix sockets, and how many messages
 * it takes from each. */
#define DROP_DEPTH 4
#define DROP_MSGS 1024

static void drop_fd(int fd, int depth);

/* Drops the descriptors that came with message m (drop_fd); how many. */
static size_t drop_rights(struct msghdr *m, int depth)
{
	size_t n = 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(m); h; h = CMSG_NXTHDR(m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS || h->cmsg_len < CMSG_LEN(0))
			continue;
		for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++, n++) {
			int one;
			memcpy(&one, CMSG_DATA(h) + i * sizeof(int), sizeof one);
			drop_fd(one, depth);
		}
	}
	return n;
}

/* Takes the messages queued on the unix socket fd (of type `type`, shut: no more come, none is
 * waited for), dropping the descriptors they carry. */
static void drain(int fd, int type, int depth)
{
	char data[4096];
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * MSG_FDS_MAX)];
	} cm;
	for (int i = 0; i < DROP_MSGS; i++) {
		struct iovec iov = {data, sizeof data};
		struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
		ssize_t r = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			break;
		/* Nothing, and nothing carried: a stream's end (a datagram may be empty). */
		if (drop_rights(&m, depth) == 0 && r == 0 && type == SOCK_STREAM)
			break;
	}
}

/*
 * Closes a descriptor the code gave (or could have given) the proxy, without the close waiting
 * on the code. A socket's close would wait as long as the code asked (SO_LINGER) for its peer
 * to take what is queued, and a unix socket's close closes, in the closing thread, every
 * descriptor still queued in it (a listening one's: in the connections it did not accept): so
 * a socket is told not to linger, and a unix socket is shut (nothing more comes) and emptied
 * first, what it held dropped the same way, DROP_DEPTH deep.
 */
static void drop_fd(int fd, int depth)
{
	int dom = 0, type = 0, listening = 0;
	socklen_t l1 = sizeof dom, l2 = sizeof type, l3 = sizeof listening;
	if (fd < 0)
		return;
	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &dom, &l1) == 0) {
		(void)setsockopt(fd, SOL_SOCKET, SO_LINGER, &(struct linger){0, 0}, sizeof(struct linger));
		if (dom == AF_UNIX && depth < DROP_DEPTH && getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &l2) == 0 &&
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &l3) == 0) {
			/* Once shut, accept and recvmsg wait no more: an empty queue is the end. */
			shutdown(fd, SHUT_RDWR);
			for (int c, i = 0; listening && i < DROP_MSGS && (c = accept4(fd, NULL, NULL, SOCK_CLOEXEC)) >= 0; i++)
				drop_fd(c, depth + 1);
			if (!listening)
				drain(fd, type, depth + 1);
		}
	}
	close(fd);
}

/* Reads what a client's socket has, as read(2) would; any descriptors sent along (a client
 * speaking on the proxy's socket itself may send them) are dropped (drop_fd), not left for the
 * kernel to close here, lingering as the code set them. */
static ssize_t client_read(int fd, void *buf, size_t n)
{
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * MSG_FDS_MAX)];
	} cm;
	struct iovec iov = {buf, n};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
	ssize_t r = recvmsg(fd, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (r >= 0)
		drop_rights(&m, 0);
	return r;
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

/* Reads the request head (through "\r\n\r\n") into buf, after the len bytes already there;
 * returns its total bytes read (the head and whatever followed), *head_len the head's length;
 * -1 on timeout or EOF, -2 when cap bytes came with no end of the head. */
static ssize_t read_head(struct proxy *px, int fd, char *buf, size_t len, size_t cap, size_t *head_len)
{
	int64_t deadline = clock_ms() + PROXY_HEAD_MS;
	while (len < cap) {
		int64_t left = deadline - clock_ms();
		if (left <= 0 || !wait_fd(px, fd, POLLIN, (int)left))
			return -1;
		ssize_t r = client_read(fd, buf + len, cap - len);
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
	return -2;
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
	/* A tunnel's small TLS records go on at once, as the client wrote them (the clients
	 * that talk to a server directly set the same). */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
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

/* Whether this network namespace lets a socket bind an address it does not deliver locally
 * (net.ipv{4,6}.ip_nonlocal_bind), per family: read once, when the first proxy starts. Turned
 * on later, every address looks local (refused unless allowed as that address): that fails
 * closed. */
static bool nonlocal_bind[2];
static pthread_once_t nonlocal_once = PTHREAD_ONCE_INIT;

static bool sysctl_on(const char *path)
{
	char c = '0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	bool on = fd < 0 || read(fd, &c, 1) != 1 || c != '0'; /* unknown: as on */
	if (fd >= 0)
		close(fd);
	return on;
}

static void read_nonlocal(void)
{
	nonlocal_bind[0] = sysctl_on("/proc/sys/net/ipv4/ip_nonlocal_bind");
	nonlocal_bind[1] = sysctl_on("/proc/sys/net/ipv6/ip_nonlocal_bind");
}

/* Is a (4 or 16 bytes of family fam) one of the interfaces' addresses in getifaddrs's list? */
static bool listed(const struct ifaddrs *ifs, int fam, const unsigned char *a)
{
	for (const struct ifaddrs *i = ifs; i; i = i->ifa_next) {
		if (!i->ifa_addr || i->ifa_addr->sa_family != fam)
			continue;
		if (fam == AF_INET && !memcmp(a, &((const struct sockaddr_in *)i->ifa_addr)->sin_addr, 4))
			return true;
		if (fam == AF_INET6 && !memcmp(a, &((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, 16))
			return true;
	}
	return false;
}

/* Does the kernel's route to a (4 or 16 bytes of family fam) deliver it here: a route of type
 * local (an interface's address, a local route's range), broadcast, anycast or multicast, as
 * `ip route get` tells? 1, 0 (a unicast route away, or none), -1 when it cannot be told. One
 * RTM_GETROUTE, answered by the kernel before the send returns. */
static int routed_here(int fam, const unsigned char *a)
{
	struct {
		struct nlmsghdr nh;
		struct rtmsg rt;
		struct rtattr ra;
		unsigned char addr[16];
	} rq;
	memset(&rq, 0, sizeof rq);
	size_t alen = fam == AF_INET ? 4 : 16;
	rq.nh.nlmsg_len = (uint32_t)NLMSG_LENGTH(sizeof rq.rt + RTA_LENGTH(alen));
	rq.nh.nlmsg_type = RTM_GETROUTE;
	rq.nh.nlmsg_flags = NLM_F_REQUEST;
	rq.nh.nlmsg_seq = 1;
	rq.rt.rtm_family = (unsigned char)fam;
	rq.rt.rtm_dst_len = (unsigned char)(alen * 8);
	rq.ra.rta_type = RTA_DST;
	rq.ra.rta_len = (unsigned short)RTA_LENGTH(alen);
	memcpy(rq.addr, a, alen);
	int fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return -1;
	struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
	union {
		struct nlmsghdr nh;
		char b[4096];
	} rs;
	int r = -1;
	ssize_t n = -1;
	if (sendto(fd, &rq, rq.nh.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof kernel) == (ssize_t)rq.nh.nlmsg_len)
		n = recv(fd, &rs, sizeof rs, MSG_DONTWAIT);
	close(fd);
	if (n < (ssize_t)sizeof rs.nh || !NLMSG_OK(&rs.nh, (size_t)n))
		return -1;
	if (rs.nh.nlmsg_type == NLMSG_ERROR && rs.nh.nlmsg_len >= NLMSG_LENGTH(sizeof(struct nlmsgerr))) {
		int err = -((const struct nlmsgerr *)NLMSG_DATA(&rs.nh))->error;
		/* No route: nothing delivers it, here or elsewhere (the connect fails). */
		r = err == ENETUNREACH || err == EHOSTUNREACH ? 0 : -1;
	} else if (rs.nh.nlmsg_type == RTM_NEWROUTE && rs.nh.nlmsg_len >= NLMSG_LENGTH(sizeof(struct rtmsg))) {
		unsigned char t = ((const struct rtmsg *)NLMSG_DATA(&rs.nh))->rtm_type;
		r = t == RTN_LOCAL || t == RTN_BROADCAST || t == RTN_ANYCAST || t == RTN_MULTICAST;
	}
	return r;
}

/* Is sa delivered on this host (in the server's network namespace; an IPv4-mapped IPv6 address
 * as its IPv4)? A connection there reaches the host's own services as loopback would, whatever
 * range the address is in. The kernel says so at the cost of a bind: a socket binds only an
 * address that its local routing table delivers here (an interface's, loopback's, a local
 * route's). Where nonlocal binds are allowed, a bind tells nothing: the kernel's route to the
 * address is asked instead (routed_here), and the interfaces' addresses are read too.
 * 1, 0, or -1 when it cannot be told (then no address is taken for granted). */
static int own_address(const struct sockaddr *sa)
{
	static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const unsigned char *a = sa->sa_family == AF_INET ? (const unsigned char *)&((const struct sockaddr_in *)sa)->sin_addr
							  : (const unsigned char *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
	int fam = sa->sa_family;
	if (fam == AF_INET6 && !memcmp(a, mapped, sizeof mapped)) {
		fam = AF_INET;
		a += sizeof mapped;
	}
	if (nonlocal_bind[fam == AF_INET6]) {
		struct ifaddrs *ifs = NULL;
		if (getifaddrs(&ifs) < 0)
			return -1;
		bool own = listed(ifs, fam, a);
		freeifaddrs(ifs);
		return own ? 1 : routed_here(fam, a);
	}
	struct sockaddr_in v4 = {.sin_family = AF_INET};
	struct sockaddr_in6 v6 = {.sin6_family = AF_INET6};
	if (fam == AF_INET)
		memcpy(&v4.sin_addr, a, 4);
	else
		memcpy(&v6.sin6_addr, a, 16);
	int fd = socket(fam, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	int r = fam == AF_INET ? bind(fd, (struct sockaddr *)&v4, sizeof v4) : bind(fd, (struct sockaddr *)&v6, sizeof v6);
	int err = errno;
	close(fd);
	return r == 0 ? 1 : err == EADDRNOTAVAIL ? 0 : -1;
}

/* May a connection go to sa, which host resolved to? pol's address rule (netpolicy.h), with
 * the host's own addresses local too: reached only when allowed as that very address. */
static bool addr_ok(const struct netpolicy *pol, const char *host, const struct sockaddr *sa)
{
	char lit[INET6_ADDRSTRLEN] = "";
	if (!netpolicy_addr_allowed(pol, host, sa))
		return false;
	if (sa->sa_family != AF_INET && sa->sa_family != AF_INET6)
		return false;
	if (own_address(sa) == 0)
		return true;
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, lit, sizeof lit);
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, lit, sizeof lit);
	return !strcasecmp(host, lit) && netpolicy_host_allowed(pol, lit);
}

/* Resolves host:port and connects to its first address that pol allows. The fd, or -1 with
 * *why. */
static int open_upstream(struct proxy *px, const struct netpolicy *pol, const char *host, unsigned port,
			 const char **why)
{
	bool install = px->who == PROXY_INSTALL;
	char service[8], detail[160];
	snprintf(service, sizeof service, "%u", port);
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
	int gai = getaddrinfo(host, service, &hints, &res);
	if (gai != 0) {
		*why = install ? "the index host does not resolve" : "the host does not resolve";
		snprintf(detail, sizeof detail, "name resolution failed (%s)", gai_strerror(gai));
		if (install)
			note_unreachable(px, host, port, detail);
		return -1;
	}
	int fd = -1, err = 0;
	bool any_allowed = false;
	for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
		if (!addr_ok(pol, host, ai->ai_addr))
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
		*why = install ? "the index host resolves to a local or private address, which the install step may not reach"
			       : "the host resolves to a local or private address (loopback, the host's own, link-local, "
				 "private, carrier-grade NAT, multicast), which is never reached unless allowed as that address";
		return -1;
	}
	*why = install ? "the index host does not answer" : "the host does not answer";
	if (err == ECONNREFUSED)
		snprintf(detail, sizeof detail, "connection refused");
	else if (err == ETIMEDOUT)
		snprintf(detail, sizeof detail, "connecting timed out after %d s", PROXY_CONNECT_MS / 1000);
	else
		snprintf(detail, sizeof detail, "cannot connect (%s)", strerror(err));
	if (install)
		note_unreachable(px, host, port, detail);
	return -1;
}

/* What one way of splice_both moved: a count, 0 at the end of `from`, MOVE_NONE when it had
 * nothing after all, MOVE_STOP when `to` takes no more or the proxy stops, MOVE_BUF when the
 * kernel cannot splice these two (nothing moved: go on through the buffer). */
#define MOVE_NONE (-2)
#define MOVE_STOP (-1)
#define MOVE_BUF (-3)

/* Moves what `from` has now, at most want bytes, to `to`: through the pipe p in the kernel
 * (splice), or through buf (n bytes) when p[0] < 0. */
static ssize_t move(struct proxy *px, int from, int to, const int p[2], char *buf, size_t n, size_t want)
{
	if (p[0] < 0) {
		ssize_t r = client_read(from, buf, want < n ? want : n);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			return MOVE_NONE;
		if (r <= 0)
			return 0;
		return write_all(px, to, buf, (size_t)r) < 0 ? MOVE_STOP : r;
	}
	ssize_t r = splice(from, NULL, p[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	if (r < 0 && (errno == EAGAIN || errno == EINTR))
		return MOVE_NONE;
	if (r < 0 && (errno == EINVAL || errno == ENOSYS || errno == EPERM))
		return MOVE_BUF;
	if (r <= 0)
		return 0;
	for (ssize_t left = r; left > 0;) {
		ssize_t w = splice(p[0], NULL, to, NULL, (size_t)left, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
		if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (!wait_fd(px, to, POLLOUT, PROXY_IDLE_MS))
				return MOVE_STOP;
			continue;
		}
		if (w <= 0)
			return MOVE_STOP;
		left -= w;
	}
	return r;
}

/* Copies both ways until both sides are done or PROXY_IDLE_MS pass without a byte; of the
 * client's (a), a_left bytes at most: past them it is no longer read. The bytes move in the
 * kernel (a pipe a way, splice) where it can, else through a buffer (no pipe to be had, as at
 * the open files limit, or sockets the kernel cannot splice). */
static void splice_both(struct proxy *px, int a, int b, uint64_t a_left)
{
	char buf[65536];
	int pipes[2][2] = {{-1, -1}, {-1, -1}}, dom = -1;
	socklen_t dl = sizeof dom;
	/* A client on the proxy's socket itself is read through the buffer (client_read): a splice
	 * would close here what descriptors it sent along. No pipes either where the open-file
	 * limit does not back them for every slot (budget_take). */
	bool unix_a = getsockopt(a, SOL_SOCKET, SO_DOMAIN, &dom, &dl) < 0 || dom == AF_UNIX;
	for (int i = unix_a ? 1 : 0; i < 2 && px->pipes; i++)
		if (pipe2(pipes[i], O_CLOEXEC | O_NONBLOCK) == 0)
			(void)fcntl(pipes[i][0], F_SETPIPE_SZ, 1 << 18); /* fewer, larger moves where allowed */
	bool open_a = a_left > 0, open_b = true;
	while (open_a || open_b) {
		struct pollfd p[3] = {{open_a ? a : -1, POLLIN, 0}, {open_b ? b : -1, POLLIN, 0}, {px->stop_fd, POLLIN, 0}};
		int r = poll(p, 3, PROXY_IDLE_MS);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0 || p[2].revents)
			break;
		for (int i = 0; i < 2; i++) {
			if (!p[i].revents)
				continue;
			int from = i ? b : a, to = i ? a : b;
			size_t want = i || a_left > sizeof buf * 4 ? sizeof buf * 4 : (size_t)a_left;
			ssize_t n = move(px, from, to, pipes[i], buf, sizeof buf, want);
			if (n == MOVE_BUF) {
				close(pipes[i][0]);
				close(pipes[i][1]);
				pipes[i][0] = pipes[i][1] = -1;
				n = move(px, from, to, pipes[i], buf, sizeof buf, want);
			}
			if (n == MOVE_NONE)
				continue;
			if (n == 0) {
				shutdown(to, SHUT_WR);
				if (i)
					open_b = false;
				else
					open_a = false;
				continue;
			}
			if (n < 0)
				goto out;
			if (!i && (a_left -= (uint64_t)n) == 0)
				open_a = false;
		}
	}
out:
	for (int i = 0; i < 2; i++)
		for (int j = 0; j < 2; j++)
			if (pipes[i][j] >= 0)
				close(pipes[i][j]);
}

/* A request's head, as far as the proxy needs it. */
struct head {
	char method[16], target[2048], version[16];
	char host[256];
	unsigned port;
	const char *path;        /* in target; "/" for CONNECT */
	bool ok;                 /* an HTTP/1 request line */
	bool tunnel;             /* CONNECT */
	uint64_t body;           /* Content-Length; 0 when none */
};

/*
 * The plain-HTTP request to send upstream: the request line in origin form, the client's
 * headers but Proxy-*, Connection and Host ones, a Host of the target's, and "Connection:
 * close" -- the client must open a new connection (and so come through the policy again) for
 * every request. Caller frees.
 */
static char *origin_request(const char *head, size_t head_len, const struct head *h, size_t *out_len)
{
	char *out = malloc(head_len + strlen(h->path) + 2 * sizeof h->host + 64);
	if (!out)
		return NULL;
	bool v6 = strchr(h->host, ':') != NULL;
	size_t o = (size_t)sprintf(out, "%s %s %s\r\nHost: %s%s%s", h->method, h->path, h->version, v6 ? "[" : "",
				   h->host, v6 ? "]" : "");
	if (h->port != 80)
		o += (size_t)sprintf(out + o, ":%u", h->port);
	o += (size_t)sprintf(out + o, "\r\n");
	const char *line = memchr(head, '\n', head_len);
	const char *end = head + head_len;
	for (line = line ? line + 1 : end; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		size_t l = nl ? (size_t)(nl - line) + 1 : (size_t)(end - line);
		bool drop = l <= 2 || !strncasecmp(line, "proxy-", 6) || !strncasecmp(line, "connection:", 11) ||
			    !strncasecmp(line, "keep-alive:", 11) || !strncasecmp(line, "host:", 5);
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

/* The characters of a header's name (RFC 9110's token). */
#define TOKEN_CHARS "!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

/* Checks the header lines of the head (after the request line) and reads what the proxy
 * needs of them: the Host value (host_val, "" when none) and the body's length. NULL, or why
 * the head is refused. */
static const char *check_headers(const char *buf, size_t head_len, struct head *h, char *host_val, size_t hn)
{
	const char *line = memchr(buf, '\n', head_len) + 1, *end = buf + head_len - 2;
	unsigned hosts = 0, lengths = 0;
	host_val[0] = '\0';
	h->body = 0;
	while (line < end) {
		const char *nl = memchr(line, '\n', (size_t)(end - line) + 2);
		size_t l = (size_t)(nl - line);
		if (!l || line[l - 1] != '\r' || memchr(line, '\r', l - 1))
			return "a header line ends in a bare CR or LF";
		l--;
		if (line[0] == ' ' || line[0] == '\t')
			return "a folded header line (obsolete line folding is not accepted)";
		size_t name = strspn(line, TOKEN_CHARS);
		if (!name || name >= l || line[name] != ':')
			return "a header line that is not NAME: VALUE";
		const char *v = line + name + 1, *ve = line + l;
		while (v < ve && (*v == ' ' || *v == '\t'))
			v++;
		while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
			ve--;
		for (const char *c = v; c < ve; c++)
			if ((unsigned char)*c < 0x20 && *c != '\t')
				return "a control character in a header";
		if (name == 4 && !strncasecmp(line, "host", 4)) {
			if (hosts++ || (size_t)(ve - v) >= hn)
				return "more than one Host header, or one too long";
			memcpy(host_val, v, (size_t)(ve - v));
			host_val[ve - v] = '\0';
		} else if (name == 17 && !strncasecmp(line, "transfer-encoding", 17) && !h->tunnel) {
			return "Transfer-Encoding is not accepted in a request (send Content-Length)";
		} else if (name == 14 && !strncasecmp(line, "content-length", 14) && !h->tunnel) {
			char *e2;
			if (lengths++ || v == ve || (size_t)(ve - v) > 15 || strspn(v, "0123456789") != (size_t)(ve - v))
				return "a Content-Length that is not one plain number";
			h->body = strtoull(v, &e2, 10);
		}
		line = nl + 1;
	}
	return NULL;
}

/* Parses the head of buf and checks it against pol. NULL when the request may go on, else why
 * not. */
static const char *parse_head(const struct proxy *px, const struct netpolicy *pol, const char *buf, size_t head_len,
			      struct head *h)
{
	const char *sp1 = memchr(buf, ' ', head_len);
	const char *sp2 = sp1 ? memchr(sp1 + 1, ' ', head_len - (size_t)(sp1 + 1 - buf)) : NULL;
	const char *eol = memchr(buf, '\r', head_len);
	const char *why = NULL;
	char canon[256], host_val[300];
	h->path = "/";
	h->ok = sp1 && sp2 && eol && sp2 < eol && (size_t)(sp1 - buf) < sizeof h->method &&
		(size_t)(sp2 - sp1 - 1) < sizeof h->target && (size_t)(eol - sp2 - 1) < sizeof h->version &&
		!memchr(buf, '\0', head_len) && eol[1] == '\n';
	if (h->ok) {
		snprintf(h->method, sizeof h->method, "%.*s", (int)(sp1 - buf), buf);
		snprintf(h->target, sizeof h->target, "%.*s", (int)(sp2 - sp1 - 1), sp1 + 1);
		snprintf(h->version, sizeof h->version, "%.*s", (int)(eol - sp2 - 1), sp2 + 1);
		h->ok = (!strcmp(h->version, "HTTP/1.1") || !strcmp(h->version, "HTTP/1.0")) && h->method[0] &&
			strspn(h->method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") == strlen(h->method);
		for (const char *c = h->target; h->ok && *c; c++)
			h->ok = (unsigned char)*c > 0x20 && (unsigned char)*c < 0x7f;
	}
	h->tunnel = h->ok && !strcmp(h->method, "CONNECT");
	if (!h->ok)
		return "not an HTTP/1 proxy request";
	if ((why = check_headers(buf, head_len, h, host_val, sizeof host_val)))
		return why;
	if (h->tunnel && (strchr(h->target, '@') ||
			  netpolicy_split_hostport(h->target, strlen(h->target), h->host, sizeof h->host, &h->port, 443) < 0))
		return "a CONNECT needs host:port";
	if (!h->tunnel && strncasecmp(h->target, "http://", 7))
		return "only CONNECT and absolute http:// requests go through this proxy";
	if (!h->tunnel) {
		const char *hp = h->target + 7;
		size_t n = strcspn(hp, "/?#");
		h->path = hp[n] == '/' ? hp + n : "/";
		if (hp[n] && hp[n] != '/')
			return "a request needs a plain http://host/path URL";
		if (memchr(hp, '@', n) || netpolicy_split_hostport(hp, n, h->host, sizeof h->host, &h->port, 80) < 0)
			return "a request needs a plain http://host/ URL (no user@)";
	}
	if (netpolicy_canon_host(h->host, canon, sizeof canon, &why) < 0)
		return why;
	snprintf(h->host, sizeof h->host, "%s", canon);
	if (!h->tunnel && host_val[0]) {
		char hh[256];
		unsigned hport;
		if (netpolicy_split_hostport(host_val, strlen(host_val), hh, sizeof hh, &hport, 80) < 0 ||
		    netpolicy_canon_host(hh, canon, sizeof canon, &why) < 0 || strcmp(canon, h->host) || hport != h->port)
			return "the Host header names another host than the request's URL";
	}
	if (h->tunnel && h->port == 80)
		return "no CONNECT to port 80: plain HTTP goes as an absolute-form request (http://host/path)";
	if (px->who == PROXY_INSTALL) {
		if (!netpolicy_host_allowed(pol, h->host))
			return "not a package index host: the install step reaches the package index only";
		if (!netpolicy_port_allowed(pol, h->port))
			return "not a port of the package index";
	} else if (!netpolicy_allows(pol, h->host, h->port)) {
		return "not an allowed host and port (--allow-hosts)";
	}
	return NULL;
}

/* Counts a connection let through or refused; a refusal is logged and kept for the call's
 * notice. */
static void count(struct proxy *px, bool allowed)
{
	pthread_mutex_lock(&px->mu);
	if (allowed)
		px->allowed++;
	else
		px->refused++;
	pthread_mutex_unlock(&px->mu);
}

static void refused(struct proxy *px, const char *what, const char *why)
{
	char one[PROXY_NOTE_MAX];
	px_log(px, LOG_NOTICE, "%s: refused %s: %s", who_name(px), what, why);
	snprintf(one, sizeof one, "%.300s (%s); ", what, why);
	pthread_mutex_lock(&px->mu);
	px->refused++;
	size_t l = strlen(px->refusals);
	if (!px->stopped && l + strlen(one) < sizeof px->refusals - 40)
		memcpy(px->refusals + l, one, strlen(one) + 1);
	else if (!px->stopped)
		px->more_refusals++;
	pthread_mutex_unlock(&px->mu);
}

/* ------------------------------------------------------------- a tunnel's TLS hello */

/* TLS's limit on a record's plaintext; a ClientHello that needs more than one record is
 * refused (no client's does). */
#define TLS_RECORD_MAX (16384 + 5)

/* The server name of the ClientHello that is the whole of rec (one TLS record), into sni (""
 * when it names none). NULL, or why it is no ClientHello this proxy accepts. */
static const char *hello_sni(const unsigned char *rec, size_t len, char *sni, size_t n)
{
	sni[0] = '\0';
	if (len < 5 || rec[0] != 0x16 || rec[1] != 3)
		return "the tunnel's first bytes are not a TLS handshake record";
	size_t rl = (size_t)rec[3] << 8 | rec[4];
	if (rl + 5 != len || rl < 4 || rec[5] != 1)
		return "the tunnel's first TLS record is not a ClientHello";
	size_t hl = (size_t)rec[6] << 16 | (size_t)rec[7] << 8 | rec[8];
	if (hl + 4 != rl)
		return "the ClientHello is not whole in the first TLS record";
	const unsigned char *p = rec + 9, *end = p + hl;
#define NEED(k) do { if ((size_t)(end - p) < (size_t)(k)) return "a malformed ClientHello"; } while (0)
	NEED(34);
	p += 34;                                       /* version, random */
	NEED(1);
	size_t l = *p++;
	NEED(l);
	p += l;                                        /* session id */
	NEED(2);
	l = (size_t)p[0] << 8 | p[1];
	p += 2;
	NEED(l);
	p += l;                                        /* cipher suites */
	NEED(1);
	l = *p++;
	NEED(l);
	p += l;                                        /* compression methods */
	if (p == end)
		return NULL;                           /* no extensions: no name */
	NEED(2);
	l = (size_t)p[0] << 8 | p[1];
	p += 2;
	if ((size_t)(end - p) != l)
		return "a malformed ClientHello";
	bool seen = false;
	while (p < end) {
		NEED(4);
		unsigned type = (unsigned)p[0] << 8 | p[1];
		size_t el = (size_t)p[2] << 8 | p[3];
		p += 4;
		NEED(el);
		if (type == 0) {
			const unsigned char *q = p, *qe = p + el;
			if (seen || el < 5 || ((size_t)q[0] << 8 | q[1]) + 2 != el)
				return "a malformed server name in the ClientHello";
			q += 2;
			seen = true;
			/* One host_name entry, and nothing else. */
			size_t nl = (size_t)q[1] << 8 | q[2];
			if (q[0] != 0 || q + 3 + nl != qe || !nl || nl >= n || memchr(q + 3, '\0', nl))
				return "a server name in the ClientHello that is not one host name";
			memcpy(sni, q + 3, nl);
			sni[nl] = '\0';
		}
		p += el;
	}
#undef NEED
	return NULL;
}

/* A tunnel's first bytes, when they are a TLS record or the port is 443: a ClientHello in one
 * record, naming h's host (a host given as an address: no name, or that address). Reads the
 * record whole into rec (have: the bytes already there), *len what rec holds. NULL, or why
 * the tunnel is refused. */
static const char *check_hello(struct proxy *px, int fd, const struct head *h, unsigned char *rec, size_t *len)
{
	int64_t deadline = clock_ms() + PROXY_HEAD_MS;
	for (;;) {
		if (*len >= 1 && rec[0] != 0x16)
			break;
		if (*len >= 5) {
			size_t want = ((size_t)rec[3] << 8 | rec[4]) + 5;
			if (want > TLS_RECORD_MAX)
				return "the tunnel's first TLS record is over 16 KiB";
			if (*len >= want)
				break;
		}
		int64_t left = deadline - clock_ms();
		if (left <= 0 || !wait_fd(px, fd, POLLIN, (int)left))
			return "no TLS hello came in time";
		ssize_t r = client_read(fd, rec + *len, TLS_RECORD_MAX - *len);
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r <= 0)
			return "the tunnel closed before its first bytes";
		*len += (size_t)r;
	}
	if (rec[0] != 0x16) {
		if (h->port == 443)
			return "the tunnel to port 443 does not begin with a TLS ClientHello";
		return NULL;
	}
	size_t rl = ((size_t)rec[3] << 8 | rec[4]) + 5;
	char sni[256], canon[256];
	const char *why = hello_sni(rec, rl, sni, sizeof sni);
	bool addr = strchr(h->host, ':') || strspn(h->host, "0123456789.") == strlen(h->host);
	if (why)
		return why;
	if (!sni[0])
		return addr ? NULL : "the ClientHello names no server (SNI), and the CONNECT named one";
	if (netpolicy_canon_host(sni, canon, sizeof canon, &why) < 0 || strcmp(canon, h->host))
		return "the ClientHello's server name (SNI) is not the CONNECT's host";
	return NULL;
}

/* A request the policy allows: connected to the host (at an address the policy allows too)
 * and relayed both ways. got: the bytes of buf read (the head's head_len, then what followed);
 * buf has room for a TLS record. */
static void relay(struct proxy *px, struct conn *c, const struct netpolicy *pol, const struct head *h, char *buf,
		  size_t head_len, size_t got)
{
	const char *why = NULL;
	char what[300];
	bool v6 = strchr(h->host, ':') != NULL;
	snprintf(what, sizeof what, "%s%s%s:%u", v6 ? "[" : "", h->host, v6 ? "]" : "", h->port);
	int up = open_upstream(px, pol, h->host, h->port, &why);
	pthread_mutex_lock(&px->mu);
	c->upstream = up;
	pthread_mutex_unlock(&px->mu);
	if (up < 0) {
		refused(px, what, why);
		reply(c->client, strstr(why, "local") ? "403 Forbidden" : "502 Bad Gateway", why);
		return;
	}
	px_log(px, LOG_DEBUG, "%s: %s %s", who_name(px), h->method, what);
	int rc = 0;
	uint64_t client_left = UINT64_MAX;
	size_t extra = got - head_len;
	if (h->tunnel) {
		static const char est[] = "HTTP/1.1 200 Connection established\r\n\r\n";
		unsigned char *rec = (unsigned char *)buf + head_len;
		rc = write_all(px, c->client, est, sizeof est - 1);
		/* Off 443, a protocol where the server speaks first (SSH, SMTP) is no TLS hello: the
		 * client's first bytes are looked at only when they come before the server's. */
		bool server_first = false;
		if (rc == 0 && h->port != 443 && !extra) {
			struct pollfd p[3] = {{c->client, POLLIN, 0}, {up, POLLIN, 0}, {px->stop_fd, POLLIN, 0}};
			int r;
			do
				r = poll(p, 3, PROXY_HEAD_MS);
			while (r < 0 && errno == EINTR);
			server_first = r > 0 && !p[0].revents && p[1].revents && !p[2].revents;
		}
		if (rc == 0 && !server_first && (why = check_hello(px, c->client, h, rec, &extra))) {
			refused(px, what, why);
			return;
		}
		if (rc == 0 && extra)
			rc = write_all(px, up, (const char *)rec, extra);
	} else {
		size_t rl;
		char *rq = origin_request(buf, head_len, h, &rl);
		rc = rq ? write_all(px, up, rq, rl) : -1;
		free(rq);
		/* The body, and nothing after it: a second request never rides on this one. */
		size_t now = extra < h->body ? extra : (size_t)h->body;
		if (rc == 0 && now)
			rc = write_all(px, up, buf + head_len, now);
		client_left = h->body - now;
	}
	count(px, true);
	if (rc == 0)
		splice_both(px, c->client, up, client_left);
}

/* Closes a client's socket without a lingering close, whatever the code set on it or sent on it. */
static void close_client(int fd)
{
	drop_fd(fd, 0);
}

/* Whether fd is a TCP connection (the relay hands over only those): not a file, pipe or other
 * socket, on which the proxy's writes would be a process of the server's speaking (a unix
 * peer would see its credentials, a netlink socket's kernel would act for it). */
static bool tcp_connection(int fd)
{
	int v[4];
	socklen_t l[4] = {sizeof v[0], sizeof v[0], sizeof v[0], sizeof v[0]};
	return getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v[0], &l[0]) == 0 && (v[0] == AF_INET || v[0] == AF_INET6) &&
	       getsockopt(fd, SOL_SOCKET, SO_TYPE, &v[1], &l[1]) == 0 && v[1] == SOCK_STREAM &&
	       getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v[2], &l[2]) == 0 && v[2] == IPPROTO_TCP &&
	       getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &v[3], &l[3]) == 0 && v[3] == 0;
}

/* What a connection's first message was (recv_first). */
#define FIRST_BYTE (-1)  /* a client speaking itself: its request's first byte */
#define FIRST_BAD (-2)   /* nothing, EOF, or a handover that is not one socket */

/* Reads a connection's first message, once it is there: the socket it hands over (one byte 0
 * with it as SCM_RIGHTS: proxy.h), set non-blocking and without a lingering close; or
 * FIRST_BYTE with that byte in *first; or FIRST_BAD. What is handed over gets nothing it
 * could not have had from the code itself: the proxy reads and writes it. */
static int recv_first(int fd, char *first)
{
	/* Room for as many as a message carries: whatever came is dropped (drop_fd) unless it is
	 * exactly one socket (the kernel would close what did not fit here, lingering as the code
	 * set it). */
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int) * MSG_FDS_MAX)];
	} cm;
	struct iovec iov = {first, 1};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof cm.b};
	ssize_t r;
	do
		r = recvmsg(fd, &m, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	while (r < 0 && errno == EINTR);
	if (r <= 0)
		return FIRST_BAD;
	int got = -1;
	size_t fds = 0;
	for (struct cmsghdr *h = CMSG_FIRSTHDR(&m); h; h = CMSG_NXTHDR(&m, h)) {
		if (h->cmsg_level != SOL_SOCKET || h->cmsg_type != SCM_RIGHTS || h->cmsg_len < CMSG_LEN(0))
			continue;
		for (size_t i = 0; i < (h->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++, fds++) {
			int one;
			memcpy(&one, CMSG_DATA(h) + i * sizeof(int), sizeof one);
			if (fds == 0)
				got = one;
			else
				drop_fd(one, 0);
		}
	}
	if (fds == 0 && !(m.msg_flags & MSG_CTRUNC))
		return FIRST_BYTE;
	int fl;
	if (fds != 1 || *first != 0 || (m.msg_flags & MSG_CTRUNC) || !tcp_connection(got) ||
	    (fl = fcntl(got, F_GETFL)) < 0 || fcntl(got, F_SETFL, fl | O_NONBLOCK) < 0) {
		drop_fd(got, 0);
		return FIRST_BAD;
	}
	/* No lingering close for a thread of the proxy, whatever the code set. */
	(void)setsockopt(got, SOL_SOCKET, SO_LINGER, &(struct linger){0, 0}, sizeof(struct linger));
	/* What the proxy relays to the code goes on at once, as the server sent it. */
	(void)setsockopt(got, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int));
	return got;
}

/*
 * The sandbox's relay hands over the code's own connection (proxy.h): the proxy then serves
 * that socket itself, so no process of the sandbox stands between the code's bytes and the
 * proxy's. A client that speaks on this socket itself (the code may connect to it) has its
 * first byte left in buf. The bytes left in buf (0 or 1), or -1 to drop the connection (no
 * message within PROXY_HEAD_MS, or a bad one).
 */
static ssize_t take_client(struct proxy *px, struct conn *c, char *buf)
{
	if (!wait_fd(px, c->client, POLLIN, PROXY_HEAD_MS))
		return -1;
	int fd = recv_first(c->client, buf);
	if (fd == FIRST_BYTE)
		return 1;
	if (fd == FIRST_BAD)
		return -1;
	pthread_mutex_lock(&px->mu);
	int was = c->client;
	c->client = fd;
	bool stopped = px->stopped;
	pthread_mutex_unlock(&px->mu);
	/* With mu released, and emptied first: what the code queued behind the handover is closed
	 * here. */
	close_client(was);
	return stopped ? -1 : 0;
}

static void serve(struct conn *c)
{
	struct proxy *px = c->px;
	struct netpolicy *pol = c->pol;
	/* The head, and room after it for a tunnel's first TLS record. */
	char *buf = malloc(PROXY_HEAD_MAX + TLS_RECORD_MAX);
	size_t head_len = 0;
	if (!buf)
		goto out;
	ssize_t pre = take_client(px, c, buf);
	if (pre < 0)
		goto out;
	ssize_t got = read_head(px, c->client, buf, (size_t)pre, PROXY_HEAD_MAX, &head_len);
	if (got == -2) {
		refused(px, "?", "a request head over 16 KiB");
		reply(c->client, "431 Request Header Fields Too Large", "a request head over 16 KiB");
		goto out;
	}
	if (got < 0)
		goto out;
	struct head h = {0};
	const char *why = parse_head(px, pol, buf, head_len, &h);
	if (why) {
		char what[320];
		snprintf(what, sizeof what, "%s%s%.300s", h.ok ? h.method : "?", h.ok ? " " : "", h.ok ? h.target : "");
		refused(px, what, why);
		reply(c->client, h.ok ? "403 Forbidden" : "400 Bad Request", why);
	} else {
		relay(px, c, pol, &h, buf, head_len, (size_t)got);
	}
out:
	free(buf);
	free(pol);
	c->pol = NULL;
}

/* Serves connection c, then frees its slot. */
static void serve_conn(struct conn *c)
{
	struct proxy *px = c->px;
	serve(c);
	pthread_mutex_lock(&px->mu);
	int client = c->client, upstream = c->upstream;
	c->client = c->upstream = -1;
	c->used = false;
	pthread_mutex_unlock(&px->mu);
	/* Closed with mu released: a handed-over socket is shared with the code, which may have
	 * asked for a lingering close since recv_first; that close waits on the code's peer, so it
	 * must hold up no one but this thread, and is asked not to linger again first. */
	close_client(client);
	if (upstream >= 0)
		close(upstream);
}

/* A free connection slot, or NULL. Called with mu held. */
static struct conn *free_slot(struct proxy *px)
{
	for (int i = 0; i < px->max_conn; i++)
		if (!px->conns[i].used)
			return &px->conns[i];
	return NULL;
}


/* Tells a connection refused for want of a slot so: a 503 on the socket it handed over, or on
 * its own when it handed none over (nothing came, or it speaks on this socket itself). Never
 * waits: recv_first and reply do not. */
static void tell_busy(int fd)
{
	char first;
	int to = recv_first(fd, &first);
	reply(to >= 0 ? to : fd, "503 Service Unavailable", "too many connections at once");
	if (to >= 0)
		close_client(to);
	close_client(fd);
}

/* Idle threads kept waiting for the lead: one serves a connection at a time with no thread
 * started; a few connections at once, as pip and browsers open, with none either. */
#define PROXY_FOLLOWERS 4

static void *proxy_main(void *arg);

/* Starts a thread of the proxy's, detached, with a reference of its own: whether it started.
 * Called with mu held. */
static bool start_thread(struct proxy *px)
{
	pthread_t t;
	pthread_attr_t a;
	if (pthread_attr_init(&a) != 0)
		return false;
	px->refs++;
	bool started = pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED) == 0 &&
		       pthread_create(&t, &a, proxy_main, px) == 0;
	pthread_attr_destroy(&a);
	if (!started)
		px->refs--;
	return started;
}

/*
 * Leads: takes connections until it takes one and hands the lead on (that connection, to be
 * served by this thread), or the proxy stops (NULL: the lead and this thread's reference are
 * given up, and it may touch px no more). Each one taken gets a slot and the policy at once.
 * The lead goes to a waiting follower, or to a thread started for it; where neither can be
 * had, the connection is refused as one past the slots is, and this thread goes on leading.
 */
static struct conn *lead(struct proxy *px)
{
	for (;;) {
		struct pollfd p[2 + REFUSED_WAITING] = {{px->stop_fd, POLLIN, 0}, {px->listen_fd, POLLIN, 0}};
		int64_t now = clock_ms(), next = -1;
		if (now < px->starved_until) {
			p[1].fd = -1;
			next = px->starved_until;
		}
		for (size_t i = 0; i < px->nw; i++) {
			p[2 + i] = (struct pollfd){px->waiting[i].fd, POLLIN, 0};
			if (next < 0 || px->waiting[i].until < next)
				next = px->waiting[i].until;
		}
		int to = next < 0 ? -1 : next > now ? (int)(next - now) : 0;
		if (poll(p, 2 + px->nw, to) < 0 && errno != EINTR)
			break;
		if (p[0].revents)
			break;
		/* From the last: one taken out is replaced by the last, already looked at. */
		now = clock_ms();
		for (size_t i = px->nw; i-- > 0;)
			if (p[2 + i].revents || px->waiting[i].until <= now) {
				tell_busy(px->waiting[i].fd);
				px->waiting[i] = px->waiting[--px->nw];
			}
		if (!p[1].revents)
			continue;
		/* Accepted and given the policy at once, under mu: a connection is served by the
		 * policy of the call that made it, or dropped by proxy_set_policy (a thread that
		 * read the policy later would serve a narrowed call's request with the whole list). */
		struct netpolicy *pol = malloc(sizeof *pol);
		if (!pol) {
			px->starved_until = now + ACCEPT_BACKOFF_MS;
			continue;
		}
		pthread_mutex_lock(&px->mu);
		if (px->stopping) {
			pthread_mutex_unlock(&px->mu);
			free(pol);
			break;
		}
		int fd = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
		if (fd < 0) {
			int err = errno;
			pthread_mutex_unlock(&px->mu);
			free(pol);
			if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM)
				px->starved_until = now + ACCEPT_BACKOFF_MS;
			continue;
		}
		*pol = px->pol;
		struct conn *c = free_slot(px);
		if (c) {
			*c = (struct conn){.px = px, .pol = pol, .client = fd, .upstream = -1, .used = true};
			/* Past this, nothing of the lead's is this thread's to touch. */
			if (px->followers) {
				/* One wakes: proxy_stop, the other waiter on follow, waits only once
				 * stopping is set, and then no lead is handed on. */
				px->lead = LEAD_FREE;
				pthread_cond_signal(&px->follow);
			} else if (!start_thread(px)) {
				c->used = false;
				c = NULL;
			}
		}
		pthread_mutex_unlock(&px->mu);
		if (c)
			return c;
		free(pol);
		char why[64];
		snprintf(why, sizeof why, "too many connections at once (%d)", px->max_conn);
		refused(px, "a connection", why);
		/* Told at once when REFUSED_WAITING are waited on already: what it handed over by now,
		 * or on its own socket. */
		if (px->nw < REFUSED_WAITING)
			px->waiting[px->nw++] = (struct refused_conn){fd, now + HANDOVER_WAIT_MS};
		else
			tell_busy(fd);
	}
	/* Stopped: the connections still waited on are told now. proxy_stop, whose reference
	 * outlives this one, goes on. */
	for (size_t i = 0; i < px->nw; i++)
		tell_busy(px->waiting[i].fd);
	px->nw = 0;
	pthread_mutex_lock(&px->mu);
	px->lead = LEAD_NONE;
	px->refs--;
	pthread_cond_broadcast(&px->follow);
	pthread_mutex_unlock(&px->mu);
	return NULL;
}

/* A thread of the proxy's: leads, serves the connection it took, follows until the lead is
 * handed to it; ends when the proxy stops, or when enough others follow already. */
static void *proxy_main(void *arg)
{
	struct proxy *px = arg;
	for (struct conn *c; (c = lead(px));) {
		serve_conn(c);
		pthread_mutex_lock(&px->mu);
		/* A lead handed on and not yet taken (the follower woken has not run): kept; that
		 * follower goes on waiting. */
		if (px->lead == LEAD_FREE) {
			px->lead = LEAD_HELD;
			pthread_mutex_unlock(&px->mu);
			continue;
		}
		if (px->stopping || px->followers >= PROXY_FOLLOWERS) {
			pthread_mutex_unlock(&px->mu);
			release(px);
			return NULL;
		}
		px->followers++;
		while (px->lead != LEAD_FREE && !px->stopping)
			pthread_cond_wait(&px->follow, &px->mu);
		px->followers--;
		if (px->lead == LEAD_FREE) {
			/* Taken even as the proxy stops: lead() then sees stop_fd, tells the
			 * connections the leader before waited on, and ends the lead. */
			px->lead = LEAD_HELD;
			pthread_mutex_unlock(&px->mu);
			continue;
		}
		/* Stopped: proxy_stop waits for the followers too, its reference outliving this one,
		 * so that a proxy with no connection left is gone when it returns. */
		px->refs--;
		pthread_cond_broadcast(&px->follow);
		pthread_mutex_unlock(&px->mu);
		return NULL;
	}
	return NULL;
}

/* Descriptors left aside for the rest of the server while the proxy runs (a call's pipes and
 * files), and for the acceptor (a connection refused and what it hands over, and those waited
 * on). */
#define PROXY_FD_SPARE (16 + 2 + REFUSED_WAITING)
/* Descriptors a slot holds at most: its socket and the one handed over (until the first is
 * closed), or the client's and the upstream one; and a tunnel's two pipes where it has them. */
#define SLOT_FDS 2
#define SLOT_PIPE_FDS 4
/* A limit that backs every slot of two proxies with pipes beside any server's own: not counted. */
#define FD_LIMIT_AMPLE 4096

/* The descriptors the slots of the proxies running in this process may hold (the code's, and an
 * install step's beside it): each sizes itself to what the others left. */
static pthread_mutex_t budget_mu = PTHREAD_MUTEX_INITIALIZER;
static long budget_held;

/*
 * Sizes px to the server's open-file limit: PROXY_MAX_CONN slots, or as many as the
 * descriptors left (by what is open, PROXY_FD_SPARE and the other proxies' slots) back, with
 * pipes only where they are backed too. A slot the descriptors could not back would turn a
 * handover into a connection lost (the kernel closes a descriptor that no room is left to
 * receive) rather than the 503 a connection past the slots gets; a tunnel without pipes
 * moves its bytes through a buffer.
 */
static void budget_take(struct proxy *px)
{
	struct rlimit r;
	px->max_conn = PROXY_MAX_CONN;
	px->pipes = true;
	px->fds = 0;
	if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur != RLIM_INFINITY && r.rlim_cur < FD_LIMIT_AMPLE) {
		/* What is open; where that cannot be read, half the limit, taken as used. */
		long open_now = (long)r.rlim_cur / 2;
		DIR *d = opendir("/proc/self/fd");
		if (d) {
			open_now = -1; /* its own */
			for (struct dirent *de; (de = readdir(d));)
				open_now += de->d_name[0] != '.';
			closedir(d);
		}
		pthread_mutex_lock(&budget_mu);
		long left = (long)r.rlim_cur - open_now - PROXY_FD_SPARE - budget_held;
		long n = left / SLOT_FDS;
		px->max_conn = n < 1 ? 1 : n > PROXY_MAX_CONN ? PROXY_MAX_CONN : (int)n;
		px->pipes = left >= (long)px->max_conn * (SLOT_FDS + SLOT_PIPE_FDS);
		px->fds = (long)px->max_conn * (SLOT_FDS + (px->pipes ? SLOT_PIPE_FDS : 0));
		budget_held += px->fds;
		pthread_mutex_unlock(&budget_mu);
	}
}

static void budget_give(struct proxy *px)
{
	pthread_mutex_lock(&budget_mu);
	budget_held -= px->fds;
	px->fds = 0;
	pthread_mutex_unlock(&budget_mu);
}

int proxy_start(struct proxy **out, const char *path, const struct netpolicy *pol, enum proxy_for who,
		struct err *e)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	if (strlen(path) >= sizeof sa.sun_path)
		return err_set(e, "the proxy socket path %s is too long", path);
	struct proxy *px = calloc(1, sizeof *px);
	if (!px)
		return err_set(e, "out of memory");
	px->pol = *pol;
	px->who = who;
	pthread_once(&nonlocal_once, read_nonlocal);
	px->listen_fd = px->stop_fd = px->unreachable_fd = -1;
	px->refs = 1;
	snprintf(px->path, sizeof px->path, "%s", path);
	strcpy(sa.sun_path, path);
	pthread_mutex_init(&px->mu, NULL);
	pthread_cond_init(&px->follow, NULL);
	px->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	px->unreachable_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	px->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (px->stop_fd < 0 || px->unreachable_fd < 0 || px->listen_fd < 0) {
		err_sys(e, "the %s's proxy", who_name(px));
		goto fail;
	}
	unlink(path);
	if (bind(px->listen_fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(path, 0666) < 0 ||
	    listen(px->listen_fd, PROXY_BACKLOG) < 0) {
		err_sys(e, "the %s's proxy at %s", who_name(px), path);
		goto fail;
	}
	budget_take(px);
	px->lead = LEAD_HELD;
	if (!start_thread(px)) {
		err_set(e, "the %s's proxy: cannot start its thread", who_name(px));
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
	budget_give(px);
	pthread_cond_destroy(&px->follow);
	pthread_mutex_destroy(&px->mu);
	free(px);
	return -1;
}

void proxy_stop(struct proxy *px)
{
	if (!px)
		return;
	uint64_t one = 1;
	/* The followers end; the leader sees stop_fd, tells those it waited on, and ends the lead
	 * (or whoever it was handed to does). No thread touches the listener after, and no
	 * reference is left but this one and those of connections still served. */
	pthread_mutex_lock(&px->mu);
	px->stopping = true;
	pthread_cond_broadcast(&px->follow);
	pthread_mutex_unlock(&px->mu);
	(void)!write(px->stop_fd, &one, sizeof one);
	pthread_mutex_lock(&px->mu);
	while (px->lead != LEAD_NONE || px->followers)
		pthread_cond_wait(&px->follow, &px->mu);
	pthread_mutex_unlock(&px->mu);
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

void proxy_set_policy(struct proxy *px, const struct netpolicy *pol)
{
	unsigned dropped = 0;
	int gone[2 * PROXY_BACKLOG];
	pthread_mutex_lock(&px->mu);
	/* What waits to be accepted was made under the policy before (the call that ended, whose
	 * processes are gone): it goes, unserved; closed once mu is released (close_client: what
	 * the code queued on it is closed here). The backlog holds no more than fit in gone. */
	for (int fd; (fd = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0; dropped++)
		if (dropped < sizeof gone / sizeof gone[0])
			gone[dropped] = fd;
		else
			close_client(fd);
	px->pol = *pol;
	pthread_mutex_unlock(&px->mu);
	for (unsigned i = 0; i < dropped && i < sizeof gone / sizeof gone[0]; i++)
		close_client(gone[i]);
	if (dropped)
		px_log(px, LOG_INFO, "%s: dropped %u connection(s) made under the list before", who_name(px), dropped);
}

bool proxy_take_refusals(struct proxy *px, char *buf, size_t n)
{
	pthread_mutex_lock(&px->mu);
	size_t l = strlen(px->refusals);
	if (l >= 2)
		l -= 2; /* the last "; " */
	if (px->more_refusals)
		snprintf(buf, n, "%.*s; and %u more", (int)l, px->refusals, px->more_refusals);
	else
		snprintf(buf, n, "%.*s", (int)l, px->refusals);
	px->refusals[0] = '\0';
	px->more_refusals = 0;
	pthread_mutex_unlock(&px->mu);
	return buf[0] != '\0';
}
