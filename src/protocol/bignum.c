#include "bignum.h"

#include <bsd/stdlib.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/buf.h"
#include "../base/jsonw.h"

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

/* Where a number jansson refuses stands in the line given to jansson: a string of a prefix no
 * client can know (a fresh random one per line) and the number's index. */
struct subst {
	char prefix[40];           /* U+FDD0 and 32 random hex digits */
	size_t n, cap;
	size_t (*at)[2];           /* offset and length of each number in the line */
};

static void replace_all(json_t *j, const struct subst *sb, const char *line);

/* The number a placeholder stands for, or NULL (v is no placeholder). New reference. */
static json_t *number_of(const json_t *v, const struct subst *sb, const char *line)
{
	const char *s = json_string_value(v);
	size_t pl = strlen(sb->prefix);
	if (!s || strncmp(s, sb->prefix, pl))
		return NULL;
	char *end;
	unsigned long long k = strtoull(s + pl, &end, 10);
	if (*end || k >= sb->n)
		return NULL;
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
	bool in_str = false;
	for (size_t i = 0; i < len;) {
		char c = s[i];
		if (in_str) {
			if (c == '"')
				in_str = false;
			i += c == '\\' ? 2 : 1;
			continue;
		}
		if (c == '"') {
			in_str = true;
			i++;
			continue;
		}
		size_t j = c == '-' || digit(c) ? number_end(s, i, len) : i;
		if (j == i) {
			i++;
			continue;
		}
		if (too_big(s + i, j - i)) {
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
	if (!sb.n)
		return json_loadb(s, len, flags, je);
	unsigned char rnd[16];
	arc4random_buf(rnd, sizeof rnd);
	memcpy(sb.prefix, "\xef\xb7\x90", 3);
	for (size_t i = 0; i < sizeof rnd; i++)
		snprintf(sb.prefix + 3 + 2 * i, 3, "%02x", rnd[i]);
	struct buf b = {0};
	size_t from = 0;
	for (size_t k = 0; k < sb.n; k++) {
		char ph[64];
		int pn = snprintf(ph, sizeof ph, "\"%s%zu\"", sb.prefix, k);
		buf_add(&b, s + from, sb.at[k][0] - from);
		buf_add(&b, ph, (size_t)pn);
		from = sb.at[k][0] + sb.at[k][1];
	}
	buf_add(&b, s + from, len - from);
	json_t *j = NULL;
	if (b.oom) {
		snprintf(je->text, sizeof je->text, "out of memory");
		je->position = 0;
	} else {
		j = json_loadb(b.p, b.len, flags, je);
		replace_all(j, &sb, s);
	}
	buf_free(&b);
	free(sb.at);
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
