#include "wsframe.h"

#include <string.h>
#include <sys/random.h>

#include "../../src/base/base64.h"

#include <stdlib.h>

#define GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

static uint32_t rol(uint32_t x, int k)
{
	return x << k | x >> (32 - k);
}

static void sha1_block(uint32_t h[5], const unsigned char *b)
{
	uint32_t w[80];
	for (int i = 0; i < 16; i++)
		w[i] = (uint32_t)b[4 * i] << 24 | (uint32_t)b[4 * i + 1] << 16 | (uint32_t)b[4 * i + 2] << 8 | b[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	uint32_t a = h[0], bb = h[1], c = h[2], d = h[3], e = h[4];
	for (int i = 0; i < 80; i++) {
		uint32_t f, k;
		if (i < 20)
			f = (bb & c) | (~bb & d), k = 0x5a827999;
		else if (i < 40)
			f = bb ^ c ^ d, k = 0x6ed9eba1;
		else if (i < 60)
			f = (bb & c) | (bb & d) | (c & d), k = 0x8f1bbcdc;
		else
			f = bb ^ c ^ d, k = 0xca62c1d6;
		uint32_t t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(bb, 30);
		bb = a;
		a = t;
	}
	h[0] += a;
	h[1] += bb;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

void ws_sha1(const void *data, size_t n, unsigned char out[20])
{
	uint32_t h[5] = {0x67452301, 0xefcdab89, 0x98badcfe, 0x10325476, 0xc3d2e1f0};
	const unsigned char *p = data;
	size_t left = n;
	for (; left >= 64; left -= 64, p += 64)
		sha1_block(h, p);
	unsigned char last[128] = {0};
	memcpy(last, p, left);
	last[left] = 0x80;
	size_t blocks = left + 9 > 64 ? 2 : 1;
	uint64_t bits = (uint64_t)n * 8;
	for (int i = 0; i < 8; i++)
		last[blocks * 64 - 1 - i] = (unsigned char)(bits >> (8 * i));
	for (size_t i = 0; i < blocks; i++)
		sha1_block(h, last + 64 * i);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 4; j++)
			out[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

int ws_key(char out[WS_KEY_LEN + 1])
{
	unsigned char r[16];
	if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
		return -1;
	char *b = b64_encode(r, sizeof r, NULL);
	if (!b)
		return -1;
	memcpy(out, b, WS_KEY_LEN + 1);
	free(b);
	return 0;
}

void ws_accept(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	char in[128];
	unsigned char d[20];
	size_t l = strlen(key);
	l = l > sizeof in - sizeof GUID ? sizeof in - sizeof GUID : l;
	memcpy(in, key, l);
	memcpy(in + l, GUID, sizeof GUID - 1);
	ws_sha1(in, l + sizeof GUID - 1, d);
	char *b = b64_encode(d, sizeof d, NULL);
	if (b)
		memcpy(out, b, WS_ACCEPT_LEN + 1);
	else
		out[0] = '\0';
	free(b);
}

size_t ws_frame_head(unsigned char head[WS_HEAD_MAX], enum ws_op op, bool fin, uint64_t n, unsigned char mask[4])
{
	size_t i = 0;
	head[i++] = (unsigned char)((fin ? 0x80 : 0) | op);
	if (n < 126) {
		head[i++] = (unsigned char)(0x80 | n);
	} else if (n <= 0xffff) {
		head[i++] = 0x80 | 126;
		head[i++] = (unsigned char)(n >> 8);
		head[i++] = (unsigned char)n;
	} else {
		head[i++] = 0x80 | 127;
		for (int k = 7; k >= 0; k--)
			head[i++] = (unsigned char)(n >> (8 * k));
	}
	/* The mask need not be secret from us, only unpredictable to the page's script (a proxy
	 * cache attack): random all the same, as the RFC asks. */
	if (getrandom(mask, 4, GRND_NONBLOCK) != 4)
		memset(mask, 0x5a, 4);
	memcpy(head + i, mask, 4);
	return i + 4;
}

void ws_mask(unsigned char *p, size_t n, const unsigned char mask[4], uint64_t off)
{
	for (size_t i = 0; i < n; i++)
		p[i] ^= mask[(off + i) & 3];
}

int ws_frame_parse(const unsigned char *p, size_t n, uint64_t max, struct ws_frame *f, const char **why, int *code)
{
	*code = 1002;
	if (n < 2)
		return 0;
	f->fin = p[0] & 0x80;
	f->op = (enum ws_op)(p[0] & 0x0f);
	if (p[0] & 0x70)
		return *why = "reserved bits set", -1;
	if (!(f->op <= WS_BINARY || (f->op >= WS_CLOSE && f->op <= WS_PONG)))
		return *why = "a reserved opcode", -1;
	if (p[1] & 0x80)
		return *why = "a masked frame from the server", -1;
	uint64_t len = p[1] & 0x7f;
	size_t head = 2;
	if (len == 126) {
		if (n < 4)
			return 0;
		len = (uint64_t)p[2] << 8 | p[3];
		head = 4;
		if (len < 126)
			return *why = "a length not in its shortest form", -1;
	} else if (len == 127) {
		if (n < 10)
			return 0;
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | p[2 + i];
		head = 10;
		if (len >> 63)
			return *why = "a length with its top bit set", -1;
		if (len <= 0xffff)
			return *why = "a length not in its shortest form", -1;
	}
	if (f->op >= WS_CLOSE && (!f->fin || len > 125))
		return *why = "a control frame fragmented or over 125 bytes", -1;
	if (len > max)
		return *code = 1009, *why = "a frame larger than this client takes", -1;
	f->head = head;
	f->len = len;
	return 1;
}
