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

#define NETPOLICY_MAX_HOSTS 64
#define NETPOLICY_MAX_INDEX_HOSTS 16

/* What the install step (or, with --allow-hosts, the code) may reach. Hosts are names or
 * address literals ("10.1.2.3", "::1" without brackets), lowercase; ports besides 443 and 80
 * that an index URL names go in `ports`. An --allow-hosts entry may be a wildcard (wild[i]:
 * hosts[i] is the part after "*.", and only its subdomains match) and may name its own port
 * (port[i]; 0: 443 and 80). */
struct netpolicy {
	char hosts[NETPOLICY_MAX_HOSTS][256];
	bool wild[NETPOLICY_MAX_HOSTS];
	uint16_t port[NETPOLICY_MAX_HOSTS];
	size_t nhosts;
	uint16_t ports[4];
	size_t nports;
};

/* The longest --allow-hosts list. */
#define NETPOLICY_LIST_MAX 4096

/* Parses an --allow-hosts list into p (emptied first): comma-separated entries, each a host
 * name (lowercased), "*.NAME" (NAME's subdomains, at least two labels in NAME), an IPv4
 * address in dotted-quad form or an IPv6 one (bare or in brackets), each optionally with
 * ":PORT". Refused (-1, e naming the entry): empty entries or labels, labels over 63 bytes,
 * names over 253, a trailing dot, anything but letters, digits and '-' in a label (an IDN
 * goes in its xn-- form), a name whose last label is all digits or looks like a number
 * (2130706433, 0x7f.1: an address in disguise), a wildcard of an address, a bad port. */
int netpolicy_parse_allow(struct netpolicy *p, const char *list, struct err *e);

/* The canonical form of a host a request names (lowercase; an IPv6 address without brackets,
 * as inet_ntop writes it) into out (n bytes). 0, or -1 with *why when it is no plain host: a
 * trailing dot, a character no host name has, an IPv4 address in any form but the dotted quad
 * (decimal, octal, hex, short forms). */
int netpolicy_canon_host(const char *host, char *out, size_t n, const char **why);

/* May a request for host:port (canonical, netpolicy_canon_host) go on? Entries with a port
 * allow that port alone; the others 443, 80 and `ports`. */
bool netpolicy_allows(const struct netpolicy *p, const char *host, unsigned port);

/* The policy's entries as a list ("a.example, *.b.example:8443"), into buf; returns buf. */
const char *netpolicy_describe(const struct netpolicy *p, char *buf, size_t n);

/* Is every entry of sub within p's (a name p names or a wildcard of p covers; a wildcard of
 * p's or under one; the ports p allows it)? */
bool netpolicy_is_subset(const struct netpolicy *sub, const struct netpolicy *p);

/* A call's narrowing of the --allow-hosts policy all: "none" (nothing), or a list parsed as
 * --allow-hosts is, every entry within all's. 0 with *out set, or -1 with e saying why. */
int netpolicy_narrow(struct netpolicy *out, const struct netpolicy *all, const char *call, struct err *e);

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
