#include "knet.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "../../src/base/clock.h"
#include "../../src/base/log.h"
#include "kexec.h"
#include "krelay.h"

#define OPEN_MS 5000L     /* for a taker's exec to open */
#define WAIT_MS 100       /* how long the thread waits on a taker before it looks at the rest */
#define BACKOFF_MAX_MS 1000
#define TRIES 5           /* takers in a row that fail to open before the step is hopeless */
#define LOGGED_MAX 5      /* lines of takers' stderr logged in a step */
#define BURST 32          /* takers opened at once at most, then RATE a second */
#define RATE 20
#define FIRST_SEND_MS 2000

/* The taker, run as `PYTHON -I -S -c TAKER @NAME` (isolated: no environment, no user or site
 * folder, no current folder on its path): the image's Python and its standard library, on the
 * pod's read-only root, so nothing the code can write runs in it (the pod's copy of the agent
 * is in the code's reach). It connects to the relay's socket NAME (for up to 10 s, while the
 * relay is not there yet), waits for a connection there, says so with one byte (1) on stdout,
 * then carries the connection: stdin to it, it to stdout, until it ends. The end of its stdin
 * (the server closed the exec) ends a taker still waiting, and passes on as the connection's
 * end of writing once it carries one. */
static const char TAKER[] =
	"import os,select,socket,sys\n"
	"def main(n):\n"
	"    s=None\n"
	"    for _ in range(500):\n"
	"        s=socket.socket(socket.AF_UNIX,socket.SOCK_STREAM)\n"
	"        try:\n"
	"            s.connect(\"\\0\"+n[1:])\n"
	"            break\n"
	"        except ConnectionRefusedError:\n"
	"            s.close()\n"
	"            s=None\n"
	"            if select.select([0],[],[],0.02)[0]:\n"
	"                return 1\n"
	"    if s is None:\n"
	"        return 1\n"
	"    while True:\n"
	"        r=select.select([s,0],[],[])[0]\n"
	"        if s in r:\n"
	"            break\n"
	"        if r:\n"
	"            return 1\n"
	"    _,a,_,_=s.recvmsg(1,socket.CMSG_SPACE(4))\n"
	"    s.close()\n"
	"    f=[d for l,t,d in a if l==socket.SOL_SOCKET and t==socket.SCM_RIGHTS and len(d)==4]\n"
	"    if len(f)!=1:\n"
	"        return 1\n"
	"    c=socket.socket(fileno=int.from_bytes(f[0],sys.byteorder))\n"
	"    os.write(1,b\"\\1\")\n"
	"    i=True\n"
	"    while True:\n"
	"        r=select.select([0,c] if i else [c],[],[])[0]\n"
	"        if 0 in r:\n"
	"            d=os.read(0,65536)\n"
	"            if d:\n"
	"                c.sendall(d)\n"
	"            else:\n"
	"                i=False\n"
	"                c.shutdown(socket.SHUT_WR)\n"
	"        if c in r:\n"
	"            d=c.recv(65536)\n"
	"            if not d:\n"
	"                return 0\n"
	"            while d:\n"
	"                d=d[os.write(1,d):]\n"
	"try:\n"
	"    sys.exit(main(sys.argv[1]))\n"
	"except OSError:\n"
	"    sys.exit(0)\n";

struct conn {
	struct kexec x;
	struct krelay r;
	bool relayed;            /* r runs */
	struct conn *next;
};

struct knet {
	const struct kcreds *creds;
	char *path;              /* the takers' exec */
	char sock[108];
	char take[40];           /* the takers' socket: "@sandbox-mcp-take-" and 16 hex digits */
	pthread_t thread;
	pthread_mutex_t mu;
	bool stop;               /* under mu */
	unsigned carried;        /* under mu */
	char why[256];           /* under mu: the last failure to open a taker */
	bool hopeless;           /* under mu */
	int hopeless_fd;         /* eventfd: readable once no taker can be opened */
	int stop_fd;             /* eventfd: readable once knet_stop began (ends an exec's opening) */
	struct conn *live;       /* the thread's alone */
	unsigned n_live;
	unsigned logged;
	double tokens;           /* takers that may be opened now (BURST, refilled at RATE a second) */
	int64_t refilled;
};

static bool stopping(struct knet *k)
{
	pthread_mutex_lock(&k->mu);
	bool s = k->stop;
	pthread_mutex_unlock(&k->mu);
	return s;
}

static void conn_free(struct conn *c)
{
	if (c->relayed)
		krelay_stop(&c->r);
	kexec_close(&c->x);
	free(c);
}

/* Frees the connections whose stream or proxy side ended. */
static void reap(struct knet *k)
{
	for (struct conn **pp = &k->live; *pp;) {
		struct conn *c = *pp;
		char why[8];
		krelay_why(&c->r, why, sizeof why);
		if (!why[0]) {
			pp = &c->next;
			continue;
		}
		*pp = c->next;
		k->n_live--;
		conn_free(c);
	}
}

static int proxy_connect(const char *path)
{
	struct sockaddr_un su = {.sun_family = AF_UNIX};
	snprintf(su.sun_path, sizeof su.sun_path, "%s", path);
	int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (u >= 0 && connect(u, (struct sockaddr *)&su, sizeof su) < 0) {
		close(u);
		u = -1;
	}
	return u;
}

/* The first bytes, within FIRST_SEND_MS (a proxy that takes nothing holds up no other). */
static int send_all(int fd, const unsigned char *p, size_t n)
{
	int64_t by = clock_ms() + FIRST_SEND_MS;
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0 && (errno == EINTR || errno == EAGAIN)) {
			int64_t left = by - clock_ms();
			if (left <= 0 || (errno == EAGAIN && poll(&(struct pollfd){fd, POLLOUT, 0}, 1, (int)left) == 0))
				return errno = ETIMEDOUT, -1;
			continue;
		}
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A line of a taker's stderr: its first, at most 200 bytes, each byte not printable ASCII shown
 * as '?'. The taker's binary is in the code's reach, so what it says is the code's (LOGGED_MAX
 * lines a step). */
static void log_taker(struct knet *k, const unsigned char *p, size_t n)
{
	if (k->logged == LOGGED_MAX)
		return;
	char line[201];
	size_t i = 0;
	for (; i < n && i < sizeof line - 1 && p[i] != '\n'; i++)
		line[i] = p[i] < 0x20 || p[i] >= 0x7f ? '?' : (char)p[i];
	line[i] = '\0';
	if (++k->logged == LOGGED_MAX)
		log_msg(LOG_WARNING, "kubernetes: an install step's taker says: %s (no more of takers' words logged)", line);
	else
		log_msg(LOG_WARNING, "kubernetes: an install step's taker says: %s", line);
}

/* Whether a taker may be opened now (BURST at once, RATE a second after). */
static bool may_open(struct knet *k)
{
	int64_t now = clock_ms();
	k->tokens += (double)(now - k->refilled) * RATE / 1000.0;
	if (k->tokens > BURST)
		k->tokens = BURST;
	k->refilled = now;
	if (k->tokens < 1)
		return false;
	k->tokens -= 1;
	return true;
}

/* A taker that said it holds a connection: joined to a new connection to the proxy. The first
 * message's bytes after the taker's one byte are the connection's first. */
static void carry(struct knet *k, struct conn *c, const unsigned char *rest, size_t n)
{
	struct err e = {""};
	int u = proxy_connect(k->sock);
	if (u < 0 || (n && send_all(u, rest, n) < 0)) {
		log_msg(LOG_WARNING, "kubernetes: the install step's connection could not reach the proxy: %s",
			strerror(errno));
		if (u >= 0)
			close(u);
		conn_free(c);
		return;
	}
	if (krelay_start_on(&c->r, &c->x, u, &e) < 0) {
		log_msg(LOG_WARNING, "kubernetes: the install step's connection: %s", e.msg);
		conn_free(c);
		return;
	}
	c->relayed = true;
	c->next = k->live;
	k->live = c;
	k->n_live++;
	pthread_mutex_lock(&k->mu);
	k->carried++;
	pthread_mutex_unlock(&k->mu);
}

/* Waits ms, or less once stopping. */
static void pause_ms(struct knet *k, int ms)
{
	for (int t = 0; t < ms && !stopping(k); t += 20)
		poll(NULL, 0, 20);
}

static void *run(void *arg)
{
	struct knet *k = arg;
	struct conn *spare = NULL;
	int backoff = 0, failed = 0;
	while (!stopping(k)) {
		reap(k);
		if (failed == TRIES) {
			pause_ms(k, WAIT_MS);
			continue;
		}
		if (!spare) {
			if (k->n_live >= KNET_MAX || !may_open(k)) {
				pause_ms(k, k->n_live >= KNET_MAX ? WAIT_MS : 1000 / RATE);
				continue;
			}
			struct err e = {""};
			if (!(spare = calloc(1, sizeof *spare)))
				break;
			kexec_init(&spare->x);
			spare->x.cancel_fd = k->stop_fd;
			if (kexec_open(&spare->x, k->creds, k->path, OPEN_MS, &e) < 0) {
				if (stopping(k)) /* the step ended: the opening was cancelled */
					break;
				log_msg(LOG_WARNING, "kubernetes: the install step's taker did not open: %s", e.msg);
				/* Refused (no exec allowed, the pod gone): so will the next be. */
				long st = spare->x.http_status;
				bool refused = st >= 400 && st < 500 && st != 408 && st != 429;
				pthread_mutex_lock(&k->mu);
				snprintf(k->why, sizeof k->why, "%s", e.msg);
				k->hopeless = ++failed == TRIES || refused;
				pthread_mutex_unlock(&k->mu);
				if (failed == TRIES || refused) {
					failed = TRIES;
					uint64_t one = 1;
					(void)!write(k->hopeless_fd, &one, sizeof one);
				}
				conn_free(spare);
				spare = NULL;
				backoff = backoff ? (backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2) : 50;
				pause_ms(k, backoff);
				continue;
			}
		}
		unsigned ch;
		const unsigned char *p;
		size_t n;
		struct err e = {""};
		int rc = kexec_recv(&spare->x, WAIT_MS, &ch, &p, &n, &e);
		if (rc == KEXEC_TIMEOUT)
			continue;
		if (rc == 1 && ch == KEXEC_STDERR) {
			log_taker(k, p, n);
			continue;
		}
		if (rc == 1 && ch == KEXEC_STDOUT && n && p[0] == 1) {
			backoff = failed = 0;
			carry(k, spare, p + 1, n - 1);
			spare = NULL;
			continue;
		}
		/* It ended without a connection (no relay to take from, within its wait), or said
		 * what a taker does not say: another one, a little later. */
		conn_free(spare);
		spare = NULL;
		backoff = backoff ? (backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2) : 50;
		pause_ms(k, backoff);
	}
	if (spare)
		conn_free(spare);
	while (k->live) {
		struct conn *c = k->live;
		k->live = c->next;
		conn_free(c);
	}
	k->n_live = 0;
	return NULL;
}

struct knet *knet_start(const struct kcreds *c, const char *ns, const char *pod, const char *python,
			const char *proxy_path, struct err *e)
{
	struct knet *k = calloc(1, sizeof *k);
	unsigned char rnd[8];
	if (!k)
		return err_set(e, "out of memory"), NULL;
	if (getrandom(rnd, sizeof rnd, 0) != sizeof rnd) {
		free(k);
		return err_sys(e, "getrandom"), NULL;
	}
	snprintf(k->take, sizeof k->take, "@sandbox-mcp-take-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2],
		 rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
	const char *argv[] = {python, "-I", "-S", "-c", TAKER, k->take};
	if (strlen(proxy_path) >= sizeof k->sock) {
		free(k);
		return err_set(e, "the proxy's socket path is too long"), NULL;
	}
	snprintf(k->sock, sizeof k->sock, "%s", proxy_path);
	k->creds = c;
	k->tokens = BURST;
	k->refilled = clock_ms();
	pthread_mutex_init(&k->mu, NULL);
	k->stop_fd = -1;
	if ((k->hopeless_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0 ||
	    (k->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) < 0) {
		err_sys(e, "eventfd");
		if (k->hopeless_fd >= 0)
			close(k->hopeless_fd);
		free(k);
		return NULL;
	}
	if (!(k->path = kexec_exec_path(ns, pod, NULL, argv, sizeof argv / sizeof argv[0], true))) {
		close(k->hopeless_fd);
		close(k->stop_fd);
		free(k);
		return err_set(e, "out of memory"), NULL;
	}
	int rc = pthread_create(&k->thread, NULL, run, k);
	if (rc) {
		close(k->hopeless_fd);
		close(k->stop_fd);
		free(k->path);
		free(k);
		return err_set(e, "cannot start the install step's relay: %s", strerror(rc)), NULL;
	}
	return k;
}

unsigned knet_carried(struct knet *k, char *why, size_t n)
{
	pthread_mutex_lock(&k->mu);
	unsigned c = k->carried;
	snprintf(why, n, "%s", k->hopeless ? k->why : "");
	pthread_mutex_unlock(&k->mu);
	return c;
}

const char *knet_socket(const struct knet *k)
{
	return k->take;
}

int knet_hopeless_fd(const struct knet *k)
{
	return k->hopeless_fd;
}

void knet_stop(struct knet *k)
{
	if (!k)
		return;
	pthread_mutex_lock(&k->mu);
	k->stop = true;
	pthread_mutex_unlock(&k->mu);
	uint64_t one = 1;
	(void)!write(k->stop_fd, &one, sizeof one);
	pthread_join(k->thread, NULL);
	pthread_mutex_destroy(&k->mu);
	close(k->hopeless_fd);
	close(k->stop_fd);
	free(k->path);
	free(k);
}
