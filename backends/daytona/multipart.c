#include "multipart.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define BOUNDARY_MAX 200

/* The line at p (up to end): its length without the line break; *next the line after it, or
 * NULL when no line break comes. */
static size_t line_at(const char *p, const char *end, const char **next)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));
	if (!nl) {
		*next = NULL;
		return (size_t)(end - p);
	}
	*next = nl + 1;
	return (size_t)(nl - p) - (nl > p && nl[-1] == '\r');
}

/* Copies the value of the parameter `key` of a header's value (v, n bytes) into out (size
 * bytes): quoted (backslash escapes undone) or a plain token. Whether it was there. */
static bool param(const char *v, size_t n, const char *key, char *out, size_t size)
{
	size_t kl = strlen(key), i = 0;
	while (i < n) {
		while (i < n && (v[i] == ';' || v[i] == ' ' || v[i] == '\t'))
			i++;
		size_t s = i;
		while (i < n && v[i] != '=' && v[i] != ';')
			i++;
		bool match = i - s == kl && !strncasecmp(v + s, key, kl) && i < n && v[i] == '=';
		size_t o = 0;
		if (i < n && v[i] == '=' && ++i < n && v[i] == '"') {
			for (i++; i < n && v[i] != '"'; i++) {
				if (v[i] == '\\' && i + 1 < n)
					i++;
				if (match && o + 1 < size)
					out[o++] = v[i];
			}
			i++;
		} else {
			for (; i < n && v[i] != ';'; i++)
				if (match && o + 1 < size)
					out[o++] = v[i];
		}
		if (match) {
			out[o] = '\0';
			return true;
		}
	}
	return false;
}

/* Reads a part's headers from *pp: its name, filename and Content-Length (-1: none). *pp goes
 * past the blank line. 0, or -1 when they end before it. */
static int headers(const char **pp, const char *end, struct multipart_part *part, long long *clen)
{
	const char *p = *pp, *next;
	*clen = -1;
	for (;;) {
		size_t n = line_at(p, end, &next);
		if (!next)
			return -1;
		if (n == 0)
			break;
		const char *colon = memchr(p, ':', n);
		size_t hl = colon ? (size_t)(colon - p) : 0, vo = hl + 1;
		while (colon && vo < n && (p[vo] == ' ' || p[vo] == '\t'))
			vo++;
		if (colon && hl == 19 && !strncasecmp(p, "Content-Disposition", 19)) {
			param(p + vo, n - vo, "name", part->name, sizeof part->name);
			param(p + vo, n - vo, "filename", part->filename, sizeof part->filename);
		} else if (colon && hl == 14 && !strncasecmp(p, "Content-Length", 14)) {
			char num[24] = "";
			size_t k = n - vo < sizeof num - 1 ? n - vo : sizeof num - 1;
			memcpy(num, p + vo, k);
			char *e;
			*clen = strtoll(num, &e, 10);
			if (e == num || *clen < 0)
				return -1;
		}
		p = next;
	}
	*pp = next;
	return 0;
}

int multipart_each(const char *body, size_t len, int (*fn)(void *ctx, const struct multipart_part *p), void *ctx)
{
	const char *p = body, *end = body + len, *next;
	while (p < end && (*p == '\r' || *p == '\n'))
		p++;
	size_t bl = line_at(p, end, &next);
	if (!next || bl < 3 || bl > BOUNDARY_MAX + 2 || p[0] != '-' || p[1] != '-')
		return -1;
	char delim[BOUNDARY_MAX + 8] = "\r\n";
	memcpy(delim + 2, p, bl);
	size_t dl = bl + 2;
	struct multipart_part *part = malloc(sizeof *part);
	if (!part)
		return -1;
	int rc = 0;
	for (p = next; rc == 0;) {
		memset(part, 0, sizeof *part);
		long long clen;
		if (headers(&p, end, part, &clen) < 0) {
			rc = -1;
			break;
		}
		const char *stop;
		if (clen >= 0 && (size_t)clen <= (size_t)(end - p) && (size_t)(end - p) - (size_t)clen >= dl &&
		    !memcmp(p + clen, delim, dl))
			stop = p + clen;
		else if (!(stop = memmem(p, (size_t)(end - p), delim, dl))) {
			rc = -1;
			break;
		}
		part->data = p;
		part->len = (size_t)(stop - p);
		rc = fn(ctx, part);
		p = stop + dl;
		if (end - p >= 2 && p[0] == '-' && p[1] == '-')
			break; /* the closing delimiter */
		line_at(p, end, &next);
		if (!next)
			rc = rc ? rc : -1;
		p = next;
	}
	free(part);
	return rc;
}
