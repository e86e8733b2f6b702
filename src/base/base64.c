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

/* Each byte's 6-bit value, -1 for a byte outside the alphabet. */
static const signed char values[256] = {
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 62, -1, -1, -1, 63,
	52, 53, 54, 55, 56, 57, 58, 59, 60, 61, -1, -1, -1, -1, -1, -1,
	-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14,
	15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, -1, -1, -1, -1, -1,
	-1, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40,
	41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
	-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,
};

long b64_decode(const char *s, size_t n, unsigned char *out)
{
	const unsigned char *u = (const unsigned char *)s;
	unsigned acc = 0, bits = 0;
	size_t i = 0, o = 0, pad = 0;
	while (i < n) {
		/* Whole groups of four plain characters, the bulk of any input, three bytes at a
		 * time, from a group's boundary (bits == 0); a space, a line break, padding or a
		 * short tail goes one character at a time below. */
		if (!bits && !pad && out) {
			for (; i + 4 <= n; i += 4, o += 3) {
				int a = values[u[i]], b = values[u[i + 1]], c = values[u[i + 2]], d = values[u[i + 3]];
				if ((a | b | c | d) < 0)
					break;
				unsigned v = (unsigned)a << 18 | (unsigned)b << 12 | (unsigned)c << 6 | (unsigned)d;
				out[o] = (unsigned char)(v >> 16);
				out[o + 1] = (unsigned char)(v >> 8);
				out[o + 2] = (unsigned char)v;
			}
		} else if (!bits && !pad) {
			/* Sizing only: eight characters a time are checked. */
			for (; i + 8 <= n; i += 8, o += 6)
				if ((values[u[i]] | values[u[i + 1]] | values[u[i + 2]] | values[u[i + 3]] | values[u[i + 4]] |
				     values[u[i + 5]] | values[u[i + 6]] | values[u[i + 7]]) < 0)
					break;
		}
		if (i >= n)
			break;
		unsigned char c = u[i++];
		if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
			continue;
		if (c == '=') {
			pad++;
			continue;
		}
		int v = values[c];
		if (v < 0 || pad)
			return -1; /* a foreign character, or data after the padding */
		acc = (acc << 6 | (unsigned)v) & 0xfff; /* at most 12 bits are ever pending */
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
