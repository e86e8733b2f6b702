#include "base64.h"

#include <stdlib.h>

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

char *b64_encode(const void *data, size_t n, size_t *outlen)
{
	const unsigned char *d = data;
	size_t len = (n + 2) / 3 * 4;
	char *o = malloc(len + 1);
	if (!o)
		return NULL;
	size_t j = 0;
	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)d[i] << 16 | (i + 1 < n ? (unsigned)d[i + 1] << 8 : 0) | (i + 2 < n ? d[i + 2] : 0);
		o[j++] = alphabet[v >> 18 & 63];
		o[j++] = alphabet[v >> 12 & 63];
		o[j++] = i + 1 < n ? alphabet[v >> 6 & 63] : '=';
		o[j++] = i + 2 < n ? alphabet[v & 63] : '=';
	}
	o[j] = '\0';
	if (outlen)
		*outlen = j;
	return o;
}

static int b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

long b64_decode(const char *s, size_t n, unsigned char *out)
{
	unsigned acc = 0, bits = 0;
	size_t o = 0, pad = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		int v = b64_value(c);
		if (v < 0 || pad)
			return -1; /* a foreign character, or data after the padding */
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			if (out)
				out[o] = (unsigned char)(acc >> bits);
			o++;
		}
	}
	/* Leftover bits: 0 (whole groups), 2 or 4 (one or two bytes short of a group); 6 never. */
	if (bits >= 6 || pad > 2 || (acc & ((1u << bits) - 1)))
		return -1;
	return (long)o;
}
