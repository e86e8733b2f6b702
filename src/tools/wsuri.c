#include "wsuri.h"

#include <stdlib.h>
#include <string.h>

static int keep(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
	       c == '_' || c == '~' || c == '/';
}

char *wsuri_from_path(const char *rel)
{
	size_t n = strlen(rel), pl = strlen(WSURI_PREFIX);
	char *u = malloc(pl + 3 * n + 1);
	if (!u)
		return NULL;
	memcpy(u, WSURI_PREFIX, pl);
	char *o = u + pl;
	for (const unsigned char *p = (const unsigned char *)rel; *p; p++) {
		if (keep(*p)) {
			*o++ = (char)*p;
		} else {
			*o++ = '%';
			*o++ = "0123456789ABCDEF"[*p >> 4];
			*o++ = "0123456789ABCDEF"[*p & 15];
		}
	}
	*o = '\0';
	return u;
}

static int hex(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int wsuri_to_path(const char *uri, char *out, size_t n)
{
	size_t pl = strlen(WSURI_PREFIX);
	if (strncmp(uri, WSURI_PREFIX, pl) || !n)
		return -1;
	size_t o = 0;
	for (const char *p = uri + pl; *p; p++) {
		char c = *p;
		if (c == '%') {
			int h = hex(p[1]), l = h < 0 ? -1 : hex(p[2]);
			if (l < 0 || (h == 0 && l == 0))
				return -1;
			c = (char)(h << 4 | l);
			p += 2;
		} else if (c == '?' || c == '#') {
			return -1; /* no query or fragment names a file */
		}
		if (o + 1 >= n)
			return -1;
		out[o++] = c;
	}
	out[o] = '\0';
	return 0;
}
