#include "utf8.h"

#include <jansson.h>

#include <stdlib.h>
#include <string.h>

static size_t utf8_seq(const unsigned char *s, size_t n);

size_t utf8_char_len(const char *s, size_t n)
{
	return n ? utf8_seq((const unsigned char *)s, n) : 0;
}

/* Length of a valid UTF-8 sequence at s (at most n bytes), or 0 if invalid. */
static size_t utf8_seq(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	if (c < 0x80)
		return 1;
	size_t len;
	unsigned min;
	unsigned cp;
	if ((c & 0xe0) == 0xc0)
		len = 2, min = 0x80, cp = c & 0x1f;
	else if ((c & 0xf0) == 0xe0)
		len = 3, min = 0x800, cp = c & 0x0f;
	else if ((c & 0xf8) == 0xf0)
		len = 4, min = 0x10000, cp = c & 0x07;
	else
		return 0;
	if (n < len)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

size_t utf8_ascii_run(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0;
	/* 32 bytes at a time, in a shape compilers make vector instructions of: output is mostly
	 * ASCII, and a megabyte of it is scanned several times on its way into a result. */
	for (; i + 32 <= n; i += 32) {
		unsigned char high = 0;
		for (size_t k = 0; k < 32; k++)
			high |= p[i + k];
		if (high & 0x80)
			break;
	}
	while (i < n && p[i] < 0x80)
		i++;
	return i;
}

char *utf8_sanitize(const char *s, size_t n, size_t *outlen)
{
	/* Each bad byte grows to 3 bytes at most. */
	char *out = malloc(n * 3 + 1);
	if (!out)
		return NULL;
	const unsigned char *p = (const unsigned char *)s;
	size_t i = 0, o = 0;
	while (i < n) {
		size_t run = i + utf8_ascii_run(s + i, n - i);
		memcpy(out + o, p + i, run - i); /* ASCII, as it is */
		o += run - i;
		i = run;
		if (i == n)
			break;
		size_t l = utf8_seq(p + i, n - i);
		if (l) {
			memcpy(out + o, p + i, l);
			o += l;
			i += l;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	*outlen = o;
	return out;
}

json_t *utf8_json_string(const char *s, size_t n)
{
	size_t cl;
	char *clean = utf8_sanitize(s, n, &cl);
	json_t *j = clean ? json_stringn_nocheck(clean, cl) : NULL;
	free(clean);
	return j;
}
