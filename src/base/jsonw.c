#include "jsonw.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a byte of a string becomes: 0 itself, else the length of its escape. */
static const unsigned char escape_len[256] = {
	6, 6, 6, 6, 6, 6, 6, 6, 2, 2, 2, 6, 2, 2, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6, 6,
	['"'] = 2, ['\\'] = 2,
};

/* 16 bytes as one vector (GCC's and Clang's vector extension: SSE2 on x86-64, NEON on Arm, plain
 * words elsewhere); a comparison gives each byte all ones or zero. */
typedef unsigned char u8x16 __attribute__((vector_size(16)));
typedef signed char mask16 __attribute__((vector_size(16)));

static u8x16 load16(const unsigned char *p)
{
	u8x16 v;
	memcpy(&v, p, sizeof v);
	return v;
}

/* Which bytes of v need an escape: control characters, '"' and '\\'. */
static mask16 needs_escape(u8x16 v)
{
	return (v < 0x20) | (v == '"') | (v == '\\');
}

/* The index of the first byte of m that is set, or 16 when none is. */
static size_t first_set(mask16 m)
{
	uint64_t w[2];
	memcpy(w, &m, sizeof w);
	for (int k = 0; k < 2; k++)
		if (w[k])
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
			return (size_t)k * 8 + (size_t)__builtin_ctzll(w[k]) / 8;
#else
			return (size_t)k * 8 + (size_t)__builtin_clzll(w[k]) / 8;
#endif
	return 16;
}

/* How many bytes from p on need no escape, 16 at a time (a megabyte of output is scanned
 * several times on its way into a result). */
static size_t clean_run(const unsigned char *p, size_t n)
{
	size_t i = 0;
	for (; i + 16 <= n; i += 16) {
		size_t k = first_set(needs_escape(load16(p + i)));
		if (k < 16)
			return i + k;
	}
	while (i < n && !escape_len[p[i]])
		i++;
	return i;
}

size_t jsonw_string_size(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t extra = 0;
	for (size_t i = clean_run(p, n); i < n; i += 1 + clean_run(p + i + 1, n - i - 1))
		extra += escape_len[p[i]] - 1u;
	return n + extra;
}

static void string(struct buf *b, const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t run = 0;
	buf_add(b, "\"", 1);
	for (size_t i = clean_run(p, n); i < n; i += 1 + clean_run(p + i + 1, n - i - 1)) {
		unsigned char c = p[i];
		buf_add(b, s + run, i - run);
		run = i + 1;
		char e[8];
		switch (c) {
		case '"': buf_add(b, "\\\"", 2); break;
		case '\\': buf_add(b, "\\\\", 2); break;
		case '\b': buf_add(b, "\\b", 2); break;
		case '\f': buf_add(b, "\\f", 2); break;
		case '\n': buf_add(b, "\\n", 2); break;
		case '\r': buf_add(b, "\\r", 2); break;
		case '\t': buf_add(b, "\\t", 2); break;
		default:
			snprintf(e, sizeof e, "\\u%04X", c);
			buf_add(b, e, 6);
		}
	}
	buf_add(b, s + run, n - run);
	buf_add(b, "\"", 1);
}

/* A value jansson writes itself: a real (its digits are jansson's). */
static void by_jansson(const json_t *j, struct buf *b)
{
	char *t = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
	if (!t) {
		b->oom = true;
		return;
	}
	buf_str(b, t);
	free(t);
}

json_t *jsonw_number(const char *text, size_t n)
{
	char *s = malloc(n + 1);
	if (!s)
		return NULL;
	s[0] = (char)0xff;
	memcpy(s + 1, text, n);
	json_t *j = json_stringn_nocheck(s, n + 1);
	free(s);
	return j;
}

const char *jsonw_number_text(const json_t *j, size_t *n)
{
	const char *s = json_string_value(j);
	if (!s || json_string_length(j) < 2 || (unsigned char)s[0] != 0xff)
		return NULL;
	*n = json_string_length(j) - 1;
	return s + 1;
}

/* An integer's decimal digits into num (at least 21 bytes, not terminated); their count.
 * snprintf costs as much as the rest of a small result's walk. */
static size_t int_text(json_int_t v, char *num)
{
	char t[24];
	size_t n = 0;
	unsigned long long u = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
	do
		t[n++] = (char)('0' + u % 10);
	while ((u /= 10));
	size_t k = 0;
	if (v < 0)
		num[k++] = '-';
	while (n)
		num[k++] = t[--n];
	return k;
}

void jsonw_dump(const json_t *j, struct buf *b)
{
	char num[32];
	const char *k;
	json_t *v;
	size_t i, n = 0;
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		buf_add(b, "{", 1);
		json_object_foreach((json_t *)j, k, v) {
			if (n++)
				buf_add(b, ",", 1);
			string(b, k, strlen(k));
			buf_add(b, ":", 1);
			jsonw_dump(v, b);
		}
		buf_add(b, "}", 1);
		break;
	case JSON_ARRAY:
		buf_add(b, "[", 1);
		json_array_foreach(j, i, v) {
			if (i)
				buf_add(b, ",", 1);
			jsonw_dump(v, b);
		}
		buf_add(b, "]", 1);
		break;
	case JSON_STRING:
		if ((k = jsonw_number_text(j, &n)))
			buf_add(b, k, n);
		else
			string(b, json_string_value(j), json_string_length(j));
		break;
	case JSON_INTEGER:
		buf_add(b, num, int_text(json_integer_value(j), num));
		break;
	case JSON_REAL:
		by_jansson(j, b);
		break;
	case JSON_TRUE:
		buf_add(b, "true", 4);
		break;
	case JSON_FALSE:
		buf_add(b, "false", 5);
		break;
	case JSON_NULL:
		buf_add(b, "null", 4);
		break;
	}
}

size_t jsonw_size(const json_t *j)
{
	const char *k;
	json_t *v;
	size_t i, n = 0;
	switch (json_typeof(j)) {
	case JSON_OBJECT:
		json_object_foreach((json_t *)j, k, v)
			n += 1 + (2 + jsonw_string_size(k, strlen(k))) + 1 + jsonw_size(v);
		return n ? n + 1 : 2; /* the braces and the commas: one per member, less one, plus two */
	case JSON_ARRAY:
		json_array_foreach(j, i, v)
			n += 1 + jsonw_size(v);
		return n ? n + 1 : 2;
	case JSON_STRING:
		if (jsonw_number_text(j, &n))
			return n;
		return 2 + jsonw_string_size(json_string_value(j), json_string_length(j));
	case JSON_INTEGER: {
		char num[32];
		return int_text(json_integer_value(j), num);
	}
	default:
		return json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	}
}
