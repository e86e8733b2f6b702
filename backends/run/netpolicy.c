#include "netpolicy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool valid_host(const char *h)
{
	size_t n = strlen(h);
	return n > 0 && n < 256 && strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789.-:") == n;
}

int netpolicy_add_host(struct netpolicy *p, const char *host, struct err *e)
{
	char h[256];
	size_t n = strlen(host);
	if (n >= sizeof h)
		return err_set(e, "index host '%.60s...' is too long", host);
	for (size_t i = 0; i <= n; i++)
		h[i] = (char)tolower((unsigned char)host[i]);
	if (!valid_host(h))
		return err_set(e, "'%s' is not a host name or address", host);
	for (size_t i = 0; i < p->nhosts; i++)
		if (!strcmp(p->hosts[i], h))
			return 0;
	if (p->nhosts >= NETPOLICY_MAX_INDEX_HOSTS)
		return err_set(e, "at most %d index hosts", NETPOLICY_MAX_INDEX_HOSTS);
	memcpy(p->hosts[p->nhosts++], h, n + 1);
	return 0;
}

int netpolicy_add_url(struct netpolicy *p, const char *url, struct err *e)
{
	const char *rest;
	if (!strncasecmp(url, "https://", 8))
		rest = url + 8;
	else if (!strncasecmp(url, "http://", 7))
		rest = url + 7;
	else
		return err_set(e, "'%s' is not an http:// or https:// URL", url);
	size_t n = strcspn(rest, "/?#");
	char host[256];
	unsigned port;
	if (!n || memchr(rest, '@', n) || netpolicy_split_hostport(rest, n, host, sizeof host, &port, 0) < 0)
		return err_set(e, "'%s' has no plain host and port", url);
	if (netpolicy_add_host(p, host, e) < 0)
		return -1;
	if (port && port != 80 && port != 443) {
		for (size_t i = 0; i < p->nports; i++)
			if (p->ports[i] == port)
				return 0;
		if (p->nports >= sizeof p->ports / sizeof p->ports[0])
			return err_set(e, "too many index ports");
		p->ports[p->nports++] = (uint16_t)port;
	}
	return 0;
}

int netpolicy_split_hostport(const char *s, size_t len, char *host, size_t n, unsigned *port, unsigned dflt)
{
	char tmp[300];
	if (!len || len >= sizeof tmp)
		return -1;
	memcpy(tmp, s, len);
	tmp[len] = '\0';
	char *h = tmp, *colon;
	if (h[0] == '[') {
		char *close = strchr(h, ']');
		if (!close)
			return -1;
		*close = '\0';
		colon = close[1] == ':' ? close + 1 : NULL;
		h++;
	} else {
		colon = strrchr(h, ':');
		if (colon)
			*colon = '\0';
	}
	*port = dflt;
	if (colon) {
		char *end;
		/* Digits alone: strtoul would take "-18446744073709543536" for 8080. */
		if (!colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
			return -1;
		unsigned long v = strtoul(colon + 1, &end, 10);
		if (*end || !v || v > 65535)
			return -1;
		*port = (unsigned)v;
	}
	if (strlen(h) >= n || !*h)
		return -1;
	for (size_t i = 0; h[i]; i++)
		host[i] = (char)tolower((unsigned char)h[i]);
	host[strlen(h)] = '\0';
	return 0;
}

int netpolicy_for_index(struct netpolicy *p, const char *index_url, const char *more_hosts, struct err *e)
{
	memset(p, 0, sizeof *p);
	if (netpolicy_add_url(p, index_url, e) < 0)
		return -1;
	if (!strcmp(p->hosts[0], "pypi.org") && netpolicy_add_host(p, "files.pythonhosted.org", e) < 0)
		return -1;
	for (const char *h = more_hosts; h && *h;) {
		size_t n = strcspn(h, ", ");
		char one[256];
		if (n >= sizeof one)
			return err_set(e, "index host '%.60s...' is too long", h);
		if (n) {
			memcpy(one, h, n);
			one[n] = '\0';
			if ((strstr(one, "://") ? netpolicy_add_url(p, one, e) : netpolicy_add_host(p, one, e)) < 0)
				return -1;
		}
		h += n;
		h += strspn(h, ", ");
	}
	return 0;
}

bool netpolicy_port_allowed(const struct netpolicy *p, unsigned port)
{
	if (port == 80 || port == 443)
		return true;
	for (size_t i = 0; i < p->nports; i++)
		if (p->ports[i] == port)
			return true;
	return false;
}

bool netpolicy_host_allowed(const struct netpolicy *p, const char *host)
{
	for (size_t i = 0; i < p->nhosts; i++)
		if (!p->wild[i] && !strcasecmp(p->hosts[i], host))
			return true;
	return false;
}

/* Within prefix bits of net? (a, net: 4 or 16 bytes) */
static bool in_net(const unsigned char *a, const unsigned char *net, unsigned bits)
{
	unsigned bytes = bits / 8, rem = bits % 8;
	if (memcmp(a, net, bytes))
		return false;
	return !rem || ((a[bytes] ^ net[bytes]) & (0xff << (8 - rem))) == 0;
}

static bool v4_local(const unsigned char *a)
{
	static const struct { unsigned char net[4]; unsigned bits; } nets[] = {
		{{0, 0, 0, 0}, 8},       /* "this network" */
		{{10, 0, 0, 0}, 8},      /* private */
		{{100, 64, 0, 0}, 10},   /* carrier-grade NAT */
		{{127, 0, 0, 0}, 8},     /* loopback */
		{{169, 254, 0, 0}, 16},  /* link-local: cloud metadata services live here */
		{{172, 16, 0, 0}, 12},   /* private */
		{{192, 0, 0, 0}, 24},    /* protocol assignments */
		{{192, 168, 0, 0}, 16},  /* private */
		{{198, 18, 0, 0}, 15},   /* benchmarking */
		{{224, 0, 0, 0}, 4},     /* multicast */
		{{240, 0, 0, 0}, 4},     /* reserved, broadcast */
	};
	for (size_t i = 0; i < sizeof nets / sizeof nets[0]; i++)
		if (in_net(a, nets[i].net, nets[i].bits))
			return true;
	return false;
}

static bool v6_local(const unsigned char *a)
{
	static const unsigned char zero[16], mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	static const unsigned char nat64[12] = {0, 0x64, 0xff, 0x9b};
	if (!memcmp(a, zero, 15) && (a[15] == 0 || a[15] == 1))
		return true;                          /* unspecified, loopback */
	if (!memcmp(a, mapped, 12) || !memcmp(a, nat64, 12) || !memcmp(a, zero, 12))
		return v4_local(a + 12);              /* IPv4 inside IPv6 */
	if ((a[0] & 0xfe) == 0xfc)
		return true;                          /* unique local fc00::/7 */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
		return true;                          /* link-local fe80::/10 */
	if (a[0] == 0xfe && (a[1] & 0xc0) == 0xc0)
		return true;                          /* site-local (deprecated) */
	return a[0] == 0xff;                          /* multicast */
}

bool netpolicy_addr_allowed(const struct netpolicy *p, const char *host, const struct sockaddr *sa)
{
	char lit[INET6_ADDRSTRLEN];
	bool local;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
		local = v4_local((const unsigned char *)&in->sin_addr);
		inet_ntop(AF_INET, &in->sin_addr, lit, sizeof lit);
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
		local = v6_local((const unsigned char *)&in6->sin6_addr);
		inet_ntop(AF_INET6, &in6->sin6_addr, lit, sizeof lit);
	} else {
		return false;
	}
	/* A local address only when the allowed host is that very address, given as such. */
	return !local || (!strcasecmp(host, lit) && netpolicy_host_allowed(p, lit));
}

/* ---------------------------------------------------------------- --allow-hosts */

/* Does the name (lowercase, no trailing dot) end in a label that is a number, or could an
 * address parser take it for one (0x7f, 017)? */
static bool numeric_tail(const char *h)
{
	const char *last = strrchr(h, '.');
	last = last ? last + 1 : h;
	if (!*last)
		return false;
	if (strspn(last, "0123456789") == strlen(last))
		return true;
	return last[0] == '0' && last[1] == 'x' && strspn(last + 2, "0123456789abcdef") == strlen(last + 2);
}

int netpolicy_canon_host(const char *host, char *out, size_t n, const char **why)
{
	char h[256];
	size_t len = strlen(host);
	if (!len || len >= sizeof h || len >= n)
		return *why = len ? "the host name is too long" : "the host is empty", -1;
	for (size_t i = 0; i <= len; i++)
		h[i] = (char)tolower((unsigned char)host[i]);
	if (strchr(h, ':')) {
		struct in6_addr a6;
		if (inet_pton(AF_INET6, h, &a6) != 1 || !inet_ntop(AF_INET6, &a6, out, (socklen_t)n))
			return *why = "not an IPv6 address", -1;
		return 0;
	}
	if (strspn(h, "abcdefghijklmnopqrstuvwxyz0123456789.-") != len)
		return *why = "a host name has only letters, digits, '-' and '.' (an IDN goes in its xn-- form)", -1;
	if (h[len - 1] == '.')
		return *why = "a host name is written without a trailing dot", -1;
	if (len > 253)
		return *why = "the host name is over 253 bytes", -1;
	for (const char *l = h; *l;) {
		size_t ll = strcspn(l, ".");
		if (!ll)
			return *why = "the host name has an empty label", -1;
		if (ll > 63)
			return *why = "a label of the host name is over 63 bytes", -1;
		if (l[0] == '-' || l[ll - 1] == '-')
			return *why = "a label of the host name begins or ends with '-'", -1;
		l += ll + (l[ll] == '.');
	}
	struct in_addr a4;
	if (inet_pton(AF_INET, h, &a4) == 1) {
		char canon[INET_ADDRSTRLEN];
		if (!inet_ntop(AF_INET, &a4, canon, sizeof canon) || strcmp(canon, h))
			return *why = "an IPv4 address is written as a plain dotted quad", -1;
	} else if (numeric_tail(h) || inet_aton(h, &a4)) {
		return *why = "an IPv4 address is written as a plain dotted quad (no decimal, octal, hex or short forms)",
		       -1;
	}
	memcpy(out, h, len + 1);
	return 0;
}

/* One entry of an --allow-hosts list, len bytes at s, into p. */
static int add_allow(struct netpolicy *p, const char *s, size_t len, struct err *e)
{
	char ent[300], host[256];
	const char *why = NULL;
	unsigned port = 0;
	bool wild = false;
	if (len >= sizeof ent)
		return err_set(e, "--allow-hosts: the entry '%.40s...' is too long", s);
	memcpy(ent, s, len);
	ent[len] = '\0';
	char *h = ent, *portp = NULL;
	if (h[0] == '[') {
		char *close = strchr(h, ']');
		if (!close || (close[1] && close[1] != ':'))
			return err_set(e, "--allow-hosts: '%s': an IPv6 address goes in brackets, then :PORT if any", ent);
		*close = '\0';
		portp = close[1] ? close + 2 : NULL;
		h++;
	} else {
		char *c = strchr(h, ':');
		if (c && !strchr(c + 1, ':')) {
			*c = '\0';
			portp = c + 1;
		}
	}
	if (portp) {
		char *end;
		unsigned long v = strtoul(portp, &end, 10);
		if (!*portp || *end || !isdigit((unsigned char)*portp) || !v || v > 65535)
			return err_set(e, "--allow-hosts: '%.*s': the port is a number from 1 to 65535", (int)len, s);
		port = (unsigned)v;
	}
	if (!strncmp(h, "*.", 2)) {
		wild = true;
		h += 2;
	}
	if (strchr(h, '*'))
		return err_set(e, "--allow-hosts: '%.*s': a wildcard is '*.' before a name, and only there", (int)len, s);
	if (netpolicy_canon_host(h, host, sizeof host, &why) < 0)
		return err_set(e, "--allow-hosts: '%.*s': %s", (int)len, s, why);
	bool addr = strchr(host, ':') || strspn(host, "0123456789.") == strlen(host);
	if (wild && addr)
		return err_set(e, "--allow-hosts: '%.*s': a wildcard covers names, not addresses", (int)len, s);
	if (wild && !strchr(host, '.'))
		return err_set(e, "--allow-hosts: '%.*s': a wildcard needs a name of two labels at least (not a "
				  "whole top-level domain)", (int)len, s);
	for (size_t i = 0; i < p->nhosts; i++)
		if (!strcmp(p->hosts[i], host) && p->wild[i] == wild && p->port[i] == port)
			return 0;
	if (p->nhosts >= NETPOLICY_MAX_HOSTS)
		return err_set(e, "--allow-hosts: at most %d entries", NETPOLICY_MAX_HOSTS);
	snprintf(p->hosts[p->nhosts], sizeof p->hosts[0], "%s", host);
	p->wild[p->nhosts] = wild;
	p->port[p->nhosts] = (uint16_t)port;
	p->nhosts++;
	return 0;
}

int netpolicy_parse_allow(struct netpolicy *p, const char *list, struct err *e)
{
	memset(p, 0, sizeof *p);
	if (strlen(list) >= NETPOLICY_LIST_MAX)
		return err_set(e, "--allow-hosts: the list is over %d bytes", NETPOLICY_LIST_MAX - 1);
	if (!*list)
		return 0;
	for (const char *s = list;;) {
		size_t n = strcspn(s, ",");
		const char *a = s, *b = s + n;
		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (a == b)
			return err_set(e, "--allow-hosts: an empty entry (two commas, or one at an end)");
		if (add_allow(p, a, (size_t)(b - a), e) < 0)
			return -1;
		if (!s[n])
			return 0;
		s += n + 1;
	}
}

/* Does the entry i cover name (exactly, or a subdomain for a wildcard)? */
static bool entry_names(const struct netpolicy *p, size_t i, const char *name)
{
	size_t hl = strlen(name), nl = strlen(p->hosts[i]);
	if (!p->wild[i])
		return !strcmp(name, p->hosts[i]);
	return hl > nl + 1 && name[hl - nl - 1] == '.' && !strcmp(name + hl - nl, p->hosts[i]);
}

bool netpolicy_allows(const struct netpolicy *p, const char *host, unsigned port)
{
	for (size_t i = 0; i < p->nhosts; i++)
		if (entry_names(p, i, host) && (p->port[i] ? p->port[i] == port : netpolicy_port_allowed(p, port)))
			return true;
	return false;
}

const char *netpolicy_describe(const struct netpolicy *p, char *buf, size_t n)
{
	size_t o = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < p->nhosts && o < n; i++) {
		bool v6 = strchr(p->hosts[i], ':') != NULL;
		char port[8] = "";
		if (p->port[i])
			snprintf(port, sizeof port, ":%u", p->port[i]);
		int w = snprintf(buf + o, n - o, "%s%s%s%s%s%s", i ? ", " : "", p->wild[i] ? "*." : "",
				 v6 && p->port[i] ? "[" : "", p->hosts[i], v6 && p->port[i] ? "]" : "", port);
		if (w < 0)
			break;
		o += (size_t)w;
	}
	return buf;
}

bool netpolicy_is_subset(const struct netpolicy *sub, const struct netpolicy *p)
{
	for (size_t i = 0; i < sub->nhosts; i++) {
		unsigned ports[2] = {sub->port[i] ? sub->port[i] : 443u, sub->port[i] ? sub->port[i] : 80u};
		bool ok = false;
		for (size_t j = 0; j < p->nhosts && !ok; j++) {
			/* A wildcard within p's: p's is one too, for the same name or one it ends in. */
			if (sub->wild[i]) {
				if (!p->wild[j] || (strcmp(sub->hosts[i], p->hosts[j]) && !entry_names(p, j, sub->hosts[i])))
					continue;
			} else if (!entry_names(p, j, sub->hosts[i])) {
				continue;
			}
			ok = true;
			for (int k = 0; k < 2; k++)
				ok = ok && (p->port[j] ? p->port[j] == ports[k] : netpolicy_port_allowed(p, ports[k]));
		}
		if (!ok)
			return false;
	}
	return true;
}

int netpolicy_narrow(struct netpolicy *out, const struct netpolicy *all, const char *call, struct err *e)
{
	struct err pe = {""};
	memset(out, 0, sizeof *out);
	if (!strcmp(call, "none"))
		return 0;
	if (netpolicy_parse_allow(out, call, &pe) < 0)
		return err_set(e, "network: %s", pe.msg + (strncmp(pe.msg, "--allow-hosts: ", 15) ? 0 : 15));
	if (!netpolicy_is_subset(out, all)) {
		char list[1024];
		return err_set(e, "network: a call may narrow --allow-hosts, never widen it: '%.200s' is not within %s", call,
			       all->nhosts ? netpolicy_describe(all, list, sizeof list) : "an empty list (none given)");
	}
	return 0;
}
