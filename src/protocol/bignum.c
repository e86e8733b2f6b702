#include "bignum.h"

#include <bsd/stdlib.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/jsonw.h"
#include "../base/utf8.h"

static bool digit(char c)
{
	return c >= '0' && c <= '9';
}

/* The end of the JSON number that starts at s[i] (RFC 8259's grammar), or i when none does. */
static size_t number_end(const char *s, size_t i, size_t n)
{
	size_t j = i;
	if (j < n && s[j] == '-')
		j++;
	if (j >= n || !digit(s[j]))
		return i;
	if (s[j] == '0')
		j++;
	else
		while (j < n && digit(s[j]))
			j++;
	if (j < n && s[j] == '.') {
		size_t k = j + 1;
		while (k < n && digit(s[k]))
			k++;
		if (k == j + 1)
			return i;
		j = k;
	}
	if (j < n && (s[j] == 'e' || s[j] == 'E')) {
		size_t k = j + 1;
		if (k < n && (s[k] == '+' || s[k] == '-'))
			k++;
		size_t d = k;
		while (k < n && digit(s[k]))
			k++;
		if (k == d)
			return i;
		j = k;
	}
	return j;
}

/* strtod of t (n bytes, a JSON number): copied, as the line goes on past it. */
static double to_double(const char *t, size_t n, bool *range)
{
	char small[64], *c = n < sizeof small ? small : malloc(n + 1);
	*range = false;
	if (!c)
		return 0;
	memcpy(c, t, n);
	c[n] = 0;
	errno = 0;
	double v = strtod(c, NULL);
	*range = errno == ERANGE && isinf(v);
	if (c != small)
		free(c);
	return v;
}

/* A JSON number jansson refuses: an integer outside int64_t, or a real past a double. */
static bool too_big(const char *t, size_t n)
{
	bool neg = t[0] == '-';
	const char *d = t + neg;
	size_t dn = n - neg;
	if (!memchr(d, '.', dn) && !memchr(d, 'e', dn) && !memchr(d, 'E', dn)) {
		if (dn != 19)
			return dn > 19;
		return memcmp(d, neg ? "9223372036854775808" : "9223372036854775807", 19) > 0;
	}
	bool range;
	to_double(t, n, &range);
	return range;
}

/* Where a number jansson refuses, or a long string, stands in the line given to jansson: a
 * string of a prefix no client can know (a fresh random one per line), "n" or "s", and the
 * index. */
struct subst {
	char prefix[40];           /* U+FDD0 and 32 random hex digits */
	size_t n, cap;
	size_t (*at)[2];           /* offset and length of each number in the line */
	size_t ns, scap;
	struct long_str {
		size_t at, len;    /* the literal in the line, quotes included */
		char *text;        /* its decoded bytes; owned */
		size_t tn;
	} *str;
};

/* jansson reads a string one character at a time through a stream, about 30 ns a byte: a files
 * input of 8 MiB took a quarter of a second there. So a long string value is decoded here, in
 * a loop that copies runs of plain bytes, and jansson reads a short placeholder instead. */
#define LONG_STRING 1024

static int hex4(const char *s, unsigned *v)
{
	*v = 0;
	for (int k = 0; k < 4; k++) {
		char c = s[k];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
						   : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
		if (d < 0)
			return -1;
		*v = *v << 4 | (unsigned)d;
	}
	return 0;
}

/* Decodes the string literal whose opening quote is s[i] into out (room for its length):
 * the index past its closing quote and *tn, or 0 for anything jansson would refuse (a control
 * byte, a bad escape, a lone surrogate, invalid UTF-8, no closing quote), which jansson then
 * reads and reports as it always did. */
static size_t decode_string(const char *s, size_t i, size_t n, char *out, size_t *tn)
{
	size_t o = 0, j = i + 1;
	while (j < n) {
		/* A run of plain ASCII, copied at once; found eight bytes at a time while none of the
		 * eight is a control character, non-ASCII, a quote or a backslash. */
		size_t k = j;
		for (; k + 8 <= n; k += 8) {
			uint64_t w;
			memcpy(&w, s + k, 8);
			const uint64_t ones = 0x0101010101010101u, high = 0x8080808080808080u;
			uint64_t q = w ^ (ones * '"'), b = w ^ (ones * '\\');
			if ((w | ((w - ones * 0x20) & ~w) | ((q - ones) & ~q) | ((b - ones) & ~b)) & high)
				break;
		}
		while (k < n && (unsigned char)s[k] >= 0x20 && (unsigned char)s[k] < 0x80 && s[k] != '"' && s[k] != '\\')
			k++;
		memcpy(out + o, s + j, k - j);
		o += k - j;
		j = k;
		if (j >= n)
			return 0;
		unsigned char c = (unsigned char)s[j];
		if (c == '"') {
			*tn = o;
			return j + 1;
		}
		if (c < 0x20)
			return 0;
		if (c >= 0x80) {
			size_t l = utf8_char_len(s + j, n - j);
			if (!l)
				return 0;
			memcpy(out + o, s + j, l);
			o += l;
			j += l;
			continue;
		}
		/* An escape. */
		if (j + 1 >= n)
			return 0;
		char e = s[j + 1];
		const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
		const char *at = e ? strchr(from, e) : NULL;
		if (at) {
			out[o++] = to[at - from];
			j += 2;
			continue;
		}
		unsigned u, lo;
		if (e != 'u' || j + 6 > n || hex4(s + j + 2, &u) < 0)
			return 0;
		j += 6;
		if (u >= 0xdc00 && u <= 0xdfff)
			return 0;
		if (u >= 0xd800 && u <= 0xdbff) {
			if (j + 6 > n || s[j] != '\\' || s[j + 1] != 'u' || hex4(s + j + 2, &lo) < 0 || lo < 0xdc00 ||
			    lo > 0xdfff)
				return 0;
			j += 6;
			u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
		}
		if (u < 0x80) {
			out[o++] = (char)u;
		} else if (u < 0x800) {
			out[o++] = (char)(0xc0 | u >> 6);
			out[o++] = (char)(0x80 | (u & 0x3f));
		} else if (u < 0x10000) {
			out[o++] = (char)(0xe0 | u >> 12);
			out[o++] = (char)(0x80 | (u >> 6 & 0x3f));
			out[o++] = (char)(0x80 | (u & 0x3f));
		} else {
			out[o++] = (char)(0xf0 | u >> 18);
			out[o++] = (char)(0x80 | (u >> 12 & 0x3f));
			out[o++] = (char)(0x80 | (u >> 6 & 0x3f));
			out[o++] = (char)(0x80 | (u & 0x3f));
		}
	}
	return 0;
}

/* The end of the string literal whose opening quote is s[i] (past its closing quote), or n. */
static size_t string_end(const char *s, size_t i, size_t n)
{
	for (size_t j = i + 1; j < n;) {
		const char *q = memchr(s + j, '"', n - j);
		if (!q)
			return n;
		size_t k = (size_t)(q - s), b = k;
		while (b > i + 1 && s[b - 1] == '\\')
			b--;
		if ((k - b) % 2 == 0)
			return k + 1;
		j = k + 1;
	}
	return n;
}

/* Takes the string literal at s[i] into sb when it is long, a value (not a key), and decoded
 * whole; else leaves it to jansson. Where the scan goes on: past the literal. */
static size_t take_string(const char *s, size_t i, size_t n, struct subst *sb)
{
	size_t end = string_end(s, i, n);
	if (end - i < LONG_STRING)
		return end;
	size_t k = end;
	while (k < n && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r'))
		k++;
	if (k < n && s[k] == ':')
		return end; /* a key: jansson keeps it */
	if (sb->ns == sb->scap) {
		size_t nc = sb->scap ? sb->scap * 2 : 4;
		void *na = realloc(sb->str, nc * sizeof *sb->str);
		if (!na)
			return end;
		sb->str = na;
		sb->scap = nc;
	}
	struct long_str *ls = &sb->str[sb->ns];
	*ls = (struct long_str){.at = i, .len = end - i, .text = malloc(end - i)};
	if (ls->text && decode_string(s, i, n, ls->text, &ls->tn) == end)
		sb->ns++;
	else
		free(ls->text);
	return end;
}

static void replace_all(json_t *j, const struct subst *sb, const char *line);

/* The number a placeholder stands for, or NULL (v is no placeholder). New reference. */
static json_t *number_of(const json_t *v, const struct subst *sb, const char *line)
{
	const char *s = json_string_value(v);
	size_t pl = strlen(sb->prefix);
	if (!s || strncmp(s, sb->prefix, pl) || (s[pl] != 'n' && s[pl] != 's'))
		return NULL;
	char *end;
	unsigned long long k = strtoull(s + pl + 1, &end, 10);
	if (*end || k >= (s[pl] == 'n' ? sb->n : sb->ns))
		return NULL;
	if (s[pl] == 's')
		return json_stringn_nocheck(sb->str[k].text, sb->str[k].tn);
	return jsonw_number(line + sb->at[k][0], sb->at[k][1]);
}

static void replace_all(json_t *j, const struct subst *sb, const char *line)
{
	if (json_is_object(j)) {
		for (void *it = json_object_iter(j); it; it = json_object_iter_next(j, it)) {
			json_t *v = json_object_iter_value(it), *num = number_of(v, sb, line);
			if (num)
				json_object_iter_set_new(j, it, num);
			else
				replace_all(v, sb, line);
		}
	} else if (json_is_array(j)) {
		for (size_t i = 0; i < json_array_size(j); i++) {
			json_t *v = json_array_get(j, i), *num = number_of(v, sb, line);
			if (num)
				json_array_set_new(j, i, num);
			else
				replace_all(v, sb, line);
		}
	}
}

json_t *bignum_loadb(const char *s, size_t len, json_error_t *je)
{
	const size_t flags = JSON_ALLOW_NUL | JSON_DECODE_ANY;
	struct subst sb = {.n = 0};
	for (size_t i = 0; i < len;) {
		char c = s[i];
		if (c == '"') {
			i = take_string(s, i, len, &sb);
			continue;
		}
		size_t j = c == '-' || digit(c) ? number_end(s, i, len) : i;
		if (j == i) {
			i++;
			continue;
		}
		/* One followed by a ':' stands where JSON has a key: left to jansson, which refuses
		 * it as it refuses any number there (a placeholder would be taken as a key). */
		size_t k = j;
		while (k < len && (s[k] == ' ' || s[k] == '\t' || s[k] == '\n' || s[k] == '\r'))
			k++;
		if ((k >= len || s[k] != ':') && too_big(s + i, j - i)) {
			if (sb.n == sb.cap) {
				size_t nc = sb.cap ? sb.cap * 2 : 8;
				void *na = realloc(sb.at, nc * sizeof *sb.at);
				if (!na)
					break; /* jansson reports the number, as it did */
				sb.at = na;
				sb.cap = nc;
			}
			sb.at[sb.n][0] = i;
			sb.at[sb.n][1] = j - i;
			sb.n++;
		}
		i = j;
	}
	if (!sb.n && !sb.ns) {
		free(sb.at);
		free(sb.str);
		return json_loadb(s, len, flags, je);
	}
	unsigned char rnd[16];
	arc4random_buf(rnd, sizeof rnd);
	memcpy(sb.prefix, "\xef\xb7\x90", 3);
	for (size_t i = 0; i < sizeof rnd; i++)
		snprintf(sb.prefix + 3 + 2 * i, 3, "%02x", rnd[i]);
	struct buf b = {0};
	size_t from = 0;
	/* Numbers and strings, each list in line order, merged. */
	for (size_t k = 0, q = 0; k < sb.n || q < sb.ns;) {
		bool num = q >= sb.ns || (k < sb.n && sb.at[k][0] < sb.str[q].at);
		size_t at = num ? sb.at[k][0] : sb.str[q].at, l = num ? sb.at[k][1] : sb.str[q].len;
		char ph[64];
		int pn = snprintf(ph, sizeof ph, "\"%s%c%zu\"", sb.prefix, num ? 'n' : 's', num ? k : q);
		buf_add(&b, s + from, at - from);
		buf_add(&b, ph, (size_t)pn);
		from = at + l;
		k += num;
		q += !num;
	}
	buf_add(&b, s + from, len - from);
	json_t *j = NULL;
	if (b.oom) {
		snprintf(je->text, sizeof je->text, "out of memory");
		je->position = 0;
	} else {
		j = json_loadb(b.p, b.len, flags, je);
		if (!j && sb.ns)
			j = json_loadb(s, len, flags, je); /* what is wrong, said of the line as sent */
		json_t *top = j ? number_of(j, &sb, s) : NULL; /* the whole message one long string */
		if (top) {
			json_decref(j);
			j = top;
		}
		replace_all(j, &sb, s);
	}
	buf_free(&b);
	free(sb.at);
	for (size_t q = 0; q < sb.ns; q++)
		free(sb.str[q].text);
	free(sb.str);
	return j;
}

static int to_reals(json_t *j, const char *keep, char *why, size_t n);

/* v itself, when it is a jsonw_number: *out is the real it becomes (else NULL, and what v holds
 * was settled). -1 at a number past a double's range. */
static int settle_value(json_t *v, json_t **out, char *why, size_t n)
{
	size_t tl;
	const char *t = jsonw_number_text(v, &tl);
	*out = NULL;
	if (!t)
		return to_reals(v, NULL, why, n);
	bool range;
	double d = to_double(t, tl, &range);
	if (range) {
		snprintf(why, n, "Invalid params: the number %.*s is past the range of a double", (int)(tl > 100 ? 100 : tl), t);
		return -1;
	}
	*out = json_real(d);
	return 0;
}

/* Every jsonw_number in j becomes a real, but the member named keep (NULL: none) of j. */
static int to_reals(json_t *j, const char *keep, char *why, size_t n)
{
	json_t *r;
	if (json_is_object(j)) {
		for (void *it = json_object_iter(j); it; it = json_object_iter_next(j, it)) {
			if (keep && !strcmp(json_object_iter_key(it), keep))
				continue;
			if (settle_value(json_object_iter_value(it), &r, why, n) < 0)
				return -1;
			if (r)
				json_object_iter_set_new(j, it, r);
		}
	} else if (json_is_array(j)) {
		for (size_t i = 0; i < json_array_size(j); i++) {
			if (settle_value(json_array_get(j, i), &r, why, n) < 0)
				return -1;
			if (r)
				json_array_set_new(j, i, r);
		}
	}
	return 0;
}

int bignum_settle(json_t *msg, char *why, size_t n)
{
	if (!json_is_object(msg))
		return to_reals(msg, NULL, why, n);
	json_t *params = json_object_get(msg, "params"), *r;
	for (void *it = json_object_iter(msg); it; it = json_object_iter_next(msg, it)) {
		const char *k = json_object_iter_key(it);
		json_t *v = json_object_iter_value(it);
		if (!strcmp(k, "id") || v == params)
			continue;
		if (settle_value(v, &r, why, n) < 0)
			return -1;
		if (r)
			json_object_iter_set_new(msg, it, r);
	}
	if (!json_is_object(params))
		return params ? to_reals(params, NULL, why, n) : 0;
	json_t *meta = json_object_get(params, "_meta");
	for (void *it = json_object_iter(params); it; it = json_object_iter_next(params, it)) {
		const char *k = json_object_iter_key(it);
		json_t *v = json_object_iter_value(it);
		if (!strcmp(k, "requestId"))
			continue;
		if (v == meta && json_is_object(meta)) {
			if (to_reals(meta, "progressToken", why, n) < 0)
				return -1;
			continue;
		}
		if (settle_value(v, &r, why, n) < 0)
			return -1;
		if (r)
			json_object_iter_set_new(params, it, r);
	}
	return 0;
}
