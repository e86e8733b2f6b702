/*
 * The install step's only way out: an HTTP proxy the server runs on a unix socket, which the
 * install sandbox (no network of its own) reaches through a bind mount. It lets through only
 * what pip needs from the package index and nothing else:
 *
 *   - CONNECT host:port (HTTPS) and plain-HTTP requests in absolute form, nothing else; a
 *     request head of plain lines (CRLF, no folding, no NUL), one Host header, if any, that
 *     names the target, no Transfer-Encoding (a body is Content-Length bytes, and nothing of
 *     the client's after it goes on: no second request rides on the first's connection);
 *   - a tunnel's first bytes, when they are a TLS record or the port is 443, a ClientHello
 *     (parsed here, in one record) whose server name is the CONNECT host (a request by
 *     address: none, or that address); no CONNECT to port 80, whose plain HTTP goes as an
 *     absolute-form request with its Host checked;
 *   - to the hosts, ports and addresses the install step's policy allows (run/netpolicy.h):
 *     the index hosts by name, never a local address unless named as one (the server host's
 *     own addresses, whatever their range, count as local: an address its kernel delivers to
 *     itself, an interface's or a local route's; a connection there reaches its services as
 *     loopback would).
 *
 * So code that runs during the install step (a build backend, anything pip is talked into)
 * reaches the index and nothing else: not the host's loopback or its abstract unix sockets
 * (the install sandbox has a network namespace of its own), not a cloud metadata service, not
 * the host's private networks.
 *
 * A connection on the socket may hand the proxy the client's own socket instead of speaking:
 * its first message is one byte 0 with that socket as SCM_RIGHTS, and the proxy serves it as
 * if it had accepted it (the sandbox's relay for --allow-hosts does so, so that no process of
 * the sandbox stands between the code's bytes and the proxy's). Anything else on the socket is
 * a client speaking itself. What is handed over must be one connected TCP socket (anything else
 * sent is closed, and the connection dropped); the proxy only reads and writes it, as the code
 * could, replies on it without waiting, and never lingers closing it. No close of the proxy
 * waits on the code: every descriptor sent on the socket, in any message (or queued in a unix
 * socket sent, a few deep), is taken and closed without lingering before what held it is.
 *
 * Each connection has a thread of its own: the one that accepted it, which first hands the
 * accepting on to one of a few threads kept waiting (or a new one), so that no thread's start
 * stands between a connection and its answer (at most PROXY_MAX_CONN at once, fewer where the
 * server's open-file limit would not back them); one past them is told 503 on the socket it
 * hands over (up to 8 at a time waited on for it, 2 s each, without holding up the others;
 * the rest told at once); every wait is
 * bounded (the request head by PROXY_HEAD_MS, connecting by PROXY_CONNECT_MS, a tunnel by
 * PROXY_IDLE_MS of silence).
 */
#ifndef SANDBOX_PROXY_H
#define SANDBOX_PROXY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../src/base/err.h"
#include "../run/netpolicy.h"

#define PROXY_MAX_CONN 32
#define PROXY_HEAD_MAX 16384
#define PROXY_HEAD_MS 15000
#define PROXY_CONNECT_MS 15000
#define PROXY_IDLE_MS 120000
#define PROXY_WHY_MAX 300

#define PROXY_NOTE_MAX 640

struct proxy;

/* Whom a proxy serves: the install step (the package index), or the code (--allow-hosts). It
 * shows in its logs and refusals; only the install step's proxy says an index is unreachable. */
enum proxy_for { PROXY_INSTALL, PROXY_CODE };

/* Listens on a new unix socket at path (mode 0666: the sandbox's user connects) and serves
 * until proxy_stop. The policy is copied. Caller frees with proxy_stop. */
int proxy_start(struct proxy **out, const char *path, const struct netpolicy *p, enum proxy_for who,
		struct err *e);

/* Replaces the policy (a call narrowing it for itself): connections made from now on follow
 * it; one made before and not yet accepted is closed unread (each connection follows the
 * policy it was accepted under). The policy is copied. */
void proxy_set_policy(struct proxy *p, const struct netpolicy *pol);

/* The connections refused since the last call of this, "host:port (why); ..." (cut to n,
 * with how many more), into buf, and forgets them; whether there were any. */
bool proxy_take_refusals(struct proxy *p, char *buf, size_t n);

/* Closes the socket (removing its file) and ends every connection at once; one still waiting
 * for the resolver ends on its own, and the last one frees what is left. NULL is fine. */
void proxy_stop(struct proxy *p);

/* An fd that turns readable once an index host could not be reached (it does not resolve, it
 * refused, it did not answer in time) while none has answered yet: pip would only retry in
 * vain. After a host answered, failures are pip's to retry and fire nothing. Borrowed; valid
 * until proxy_stop. */
int proxy_unreachable_fd(const struct proxy *p);

/* The first such failure, "host:port: why" (name resolution failed (...) / connection refused
 * / connecting timed out after 15 s), into buf; whether there was one. */
bool proxy_unreachable(struct proxy *p, char *buf, size_t n);

/* Connections let through and refused so far, for logs and tests. */
void proxy_counts(const struct proxy *p, unsigned *allowed, unsigned *refused);

#endif
