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

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL

/* Whether any of 8 bytes is zero (exact as a yes or no). */
static uint64_t any_zero(uint64_t x)
{
	return (x - ONES) & ~x & HIGHS;
}

/* How many bytes from p on need no escape: 32 at a time (in a shape compilers make vector
 * instructions of), then 8, while none of them is a control character, '"' or '\\'. */
static size_t clean_run(const unsigned char *p, size_t n)
{
	size_t i = 0;
	for (; i + 32 <= n; i += 32) {
		unsigned char bad = 0;
		for (size_t k = 0; k < 32; k++) {
			unsigned char c = p[i + k];
			bad |= (unsigned char)((c < 0x20) | (c == '"') | (c == '\\'));
		}
		if (bad)
			break;
	}
	for (; i + 8 <= n; i += 8) {
		uint64_t x;
		memcpy(&x, p + i, 8);
		if (((x - 0x20 * ONES) & ~x & HIGHS) | any_zero(x ^ ('"' * ONES)) | any_zero(x ^ ('\\' * ONES)))
			break;
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
		string(b, json_string_value(j), json_string_length(j));
		break;
	case JSON_INTEGER:
		buf_add(b, num, (size_t)snprintf(num, sizeof num, "%" JSON_INTEGER_FORMAT, json_integer_value(j)));
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
		return 2 + jsonw_string_size(json_string_value(j), json_string_length(j));
	default:
		return json_dumpb(j, NULL, 0, JSON_COMPACT | JSON_ENCODE_ANY);
	}
}
