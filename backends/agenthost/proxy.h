/*
 * The install step's only way out: an HTTP proxy the server runs on a unix socket, which the
 * install sandbox (no network of its own) reaches through a bind mount. It lets through only
 * what pip needs from the package index and nothing else:
 *
 *   - CONNECT host:port (HTTPS) and plain-HTTP requests in absolute form, nothing else;
 *   - host: one of the index hosts, compared by name (case-insensitive, exact);
 *   - port: 443, or 80, or the port an index URL names;
 *   - the addresses the host resolves to (resolved here, on the host): never loopback,
 *     link-local (169.254.169.254 and the like), private networks, carrier-grade NAT,
 *     multicast or unspecified ones -- unless the allowed host was given as that very
 *     address, which is how an index on a private network is named.
 *
 * So code that runs during the install step (a build backend, anything pip is talked into)
 * reaches the index and nothing else: not the host's loopback or its abstract unix sockets
 * (the install sandbox has a network namespace of its own), not a cloud metadata service, not
 * the host's private networks.
 *
 * Each connection has a thread of its own (at most PROXY_MAX_CONN at once); every wait is
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

#define PROXY_MAX_HOSTS 16
#define PROXY_MAX_CONN 32
#define PROXY_HEAD_MAX 16384
#define PROXY_HEAD_MS 15000
#define PROXY_CONNECT_MS 15000
#define PROXY_IDLE_MS 120000

/* What the proxy lets through. Hosts are names or address literals ("10.1.2.3", "::1" without
 * brackets), lowercase; ports besides 443 and 80 that an index URL names go in `ports`. */
struct proxy_policy {
	char hosts[PROXY_MAX_HOSTS][256];
	size_t nhosts;
	uint16_t ports[4];
	size_t nports;
};

/* Adds the host (and its port, when not 80 or 443) of an http(s) URL to the policy. 0, or -1
 * with e set (not http(s), too many hosts, a host that is not a plain name or address). */
int proxy_policy_add_url(struct proxy_policy *p, const char *url, struct err *e);

/* Adds a host name or address literal. 0 or -1 with e set. */
int proxy_policy_add_host(struct proxy_policy *p, const char *host, struct err *e);

/* The policy of an index URL (and, for PyPI's, files.pythonhosted.org, where its files are)
 * and a comma-separated list of more hosts (may be empty). 0, or -1 with e set. */
int proxy_policy_for_index(struct proxy_policy *p, const char *index_url, const char *more_hosts, struct err *e);

/* May a connection go to sa, which `host` resolved to? (The address rule above.) */
bool proxy_addr_allowed(const struct proxy_policy *p, const char *host, const struct sockaddr *sa);

struct proxy;

/* Listens on a new unix socket at path (mode 0666: the sandbox's user connects) and serves
 * until proxy_stop. The policy is copied. Caller frees with proxy_stop. */
int proxy_start(struct proxy **out, const char *path, const struct proxy_policy *p, struct err *e);

/* Closes the socket (removing its file) and ends every connection at once; one still waiting
 * for the resolver ends on its own, and the last one frees what is left. NULL is fine. */
void proxy_stop(struct proxy *p);

/* Connections let through and refused so far, for logs and tests. */
void proxy_counts(const struct proxy *p, unsigned *allowed, unsigned *refused);

#endif
