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
	if (p->nhosts >= NETPOLICY_MAX_HOSTS)
		return err_set(e, "at most %d index hosts", NETPOLICY_MAX_HOSTS);
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
		if (!strcasecmp(p->hosts[i], host))
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
