/*
 * What the install step may reach (--network install): the package index hosts, by name, on
 * their ports, at addresses that are never local. The filtering proxy of the backends that run
 * the agent (backends/agenthost/proxy.h) enforces it connection by connection; Daytona opens
 * the sandbox's network to the addresses it allows.
 *
 *   - host: one of the index hosts, compared by name (case-insensitive, exact);
 *   - port: 443, or 80, or the port an index URL names;
 *   - the addresses the host resolves to (resolved on the host): never loopback, link-local
 *     (169.254.169.254 and the like), private networks, carrier-grade NAT, multicast or
 *     unspecified ones -- unless the allowed host was given as that very address, which is how
 *     an index on a private network is named.
 */
#ifndef SANDBOX_NETPOLICY_H
#define SANDBOX_NETPOLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../../src/base/err.h"

#define NETPOLICY_MAX_HOSTS 16

/* What the install step may reach. Hosts are names or address literals ("10.1.2.3", "::1" without
 * brackets), lowercase; ports besides 443 and 80 that an index URL names go in `ports`. */
struct netpolicy {
	char hosts[NETPOLICY_MAX_HOSTS][256];
	size_t nhosts;
	uint16_t ports[4];
	size_t nports;
};

/* Adds the host (and its port, when not 80 or 443) of an http(s) URL to the policy. 0, or -1
 * with e set (not http(s), too many hosts, a host that is not a plain name or address). */
int netpolicy_add_url(struct netpolicy *p, const char *url, struct err *e);

/* Adds a host name or address literal. 0 or -1 with e set. */
int netpolicy_add_host(struct netpolicy *p, const char *host, struct err *e);

/* The policy of an index URL (and, for PyPI's, files.pythonhosted.org, where its files are)
 * and a comma-separated list of more hosts (may be empty). 0, or -1 with e set. */
int netpolicy_for_index(struct netpolicy *p, const char *index_url, const char *more_hosts, struct err *e);

/* May a connection go to sa, which `host` resolved to? (The address rule above.) */
bool netpolicy_addr_allowed(const struct netpolicy *p, const char *host, const struct sockaddr *sa);

/* Is host one of the policy's hosts (case-insensitive)? Is port one it allows? */
bool netpolicy_host_allowed(const struct netpolicy *p, const char *host);
bool netpolicy_port_allowed(const struct netpolicy *p, unsigned port);

/* Splits "host[:port]" or "[v6addr][:port]" (len bytes of s) into host (lowercase, n bytes)
 * and *port (dflt when none). 0, or -1 when it is not one. */
int netpolicy_split_hostport(const char *s, size_t len, char *host, size_t n, unsigned *port, unsigned dflt);

#endif
