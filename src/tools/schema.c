#include "schema.h"

#include "../base/embed.h"

#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>

json_t *schema_load(const char *name, struct err *e)
{
	size_t len;
	const unsigned char *data = embed_find(name, &len);
	if (!data) {
		err_set(e, "%s is not embedded in this build", name);
		return NULL;
	}
	json_error_t je;
	json_t *j = json_loadb((const char *)data, len, 0, &je);
	if (!j)
		err_set(e, "%s:%d: %s", name, je.line, je.text);
	return j;
}

static const char *type_of(const json_t *j)
{
	switch (json_typeof(j)) {
	case JSON_OBJECT: return "object";
	case JSON_ARRAY: return "array";
	case JSON_STRING: return "string";
	case JSON_INTEGER: return "integer";
	case JSON_REAL: return "number";
	case JSON_TRUE:
	case JSON_FALSE: return "boolean";
	default: return "null";
	}
}

static int type_matches(const char *want, const json_t *j)
{
	const char *have = type_of(j);
	if (!strcmp(want, have))
		return 1;
	/* Every integer is a number, and so is a real with no fraction for "integer". */
	if (!strcmp(want, "number") && json_is_integer(j))
		return 1;
	if (!strcmp(want, "integer") && json_is_real(j)) {
		double d = json_real_value(j);
		return d == floor(d) && fabs(d) < 9007199254740992.0;
	}
	return 0;
}

static size_t utf8_chars(const char *s, size_t n)
{
	size_t c = 0;
	for (size_t i = 0; i < n; i++)
		if (((unsigned char)s[i] & 0xc0) != 0x80)
			c++;
	return c;
}

const char *schema_entry_name(char *buf, size_t n, const char *at, const char *k, bool chosen)
{
	if (!chosen) {
		snprintf(buf, n, "%s%s%.200s", at, *at ? "." : "", k);
		return buf;
	}
	size_t used = (size_t)snprintf(buf, n, "%s[\"", at);
	for (size_t i = 0; k[i] && i < 200 && used + 8 < n; i++) {
		unsigned char c = (unsigned char)k[i];
		if (c == '"' || c == '\\')
			used += (size_t)snprintf(buf + used, n - used, "\\%c", c);
		else if (c < 0x20 || c == 0x7f)
			used += (size_t)snprintf(buf + used, n - used, "\\u%04x", c);
		else
			buf[used++] = (char)c;
	}
	if (used + 3 > n)
		used = n - 3;
	snprintf(buf + used, n - used, "\"]");
	return buf;
}

static const char *name_or(const char *at, const char *dflt)
{
	return *at ? at : dflt;
}

/* type and enum. */
static int check_type(const json_t *schema, const json_t *inst, const char *at, struct err *e)
{
	const json_t *t = json_object_get(schema, "type");
	if (json_is_string(t) && !type_matches(json_string_value(t), inst))
		return err_set(e, "%s: must be %s %s", name_or(at, "arguments"),
			       strchr("aeiou", json_string_value(t)[0]) ? "an" : "a", json_string_value(t));
	size_t i;
	const json_t *v;
	if (json_is_array(t)) {
		int ok = 0;
		char types[128] = "";
		json_array_foreach(t, i, v) {
			ok |= json_is_string(v) && type_matches(json_string_value(v), inst);
			size_t l = strlen(types);
			snprintf(types + l, sizeof types - l, "%s%s", i ? " or " : "", json_string_value(v));
		}
		if (!ok)
			return err_set(e, "%s: must be %s, not %s", name_or(at, "arguments"), types, type_of(inst));
	}
	const json_t *en = json_object_get(schema, "enum");
	if (json_is_array(en)) {
		int ok = 0;
		json_array_foreach(en, i, v) ok |= json_equal(v, inst);
		if (!ok)
			return err_set(e, "%s: is not one of the allowed values", name_or(at, "value"));
	}
	return 0;
}

static int check_string(const json_t *schema, const json_t *inst, const char *at, struct err *e)
{
	const json_t *mn = json_object_get(schema, "minLength"), *mx = json_object_get(schema, "maxLength");
	/* A string of len bytes has between len / 4 (rounded up) and len characters: they are
	 * counted only when that leaves the answer open, not for every long input. */
	size_t len = json_string_length(inst), n = len;
	if ((json_is_integer(mx) && len > (size_t)json_integer_value(mx)) ||
	    (json_is_integer(mn) && (len + 3) / 4 < (size_t)json_integer_value(mn)))
		n = utf8_chars(json_string_value(inst), len);
	if (json_is_integer(mn) && n < (size_t)json_integer_value(mn))
		return err_set(e, "%s: must not be empty", name_or(at, "value"));
	if (json_is_integer(mx) && n > (size_t)json_integer_value(mx))
		return err_set(e, "%s: is longer than %lld characters", name_or(at, "value"), (long long)json_integer_value(mx));
	const json_t *pat = json_object_get(schema, "pattern");
	if (!json_is_string(pat))
		return 0;
	regex_t re;
	if (regcomp(&re, json_string_value(pat), REG_EXTENDED | REG_NOSUB) != 0)
		return err_set(e, "%s: the schema's pattern does not compile", name_or(at, "value"));
	int m = regexec(&re, json_string_value(inst), 0, NULL, 0);
	regfree(&re);
	if (m == 0)
		return 0;
	const json_t *msg = json_object_get(schema, "x-pattern-message");
	return err_set(e, "%s: %s", name_or(at, "value"), json_is_string(msg) ? json_string_value(msg) : "has the wrong form");
}

static int check_number(const json_t *schema, const json_t *inst, const char *at, struct err *e)
{
	double v = json_number_value(inst);
	const json_t *b;
	if ((b = json_object_get(schema, "minimum")) && json_is_number(b) && v < json_number_value(b))
		return err_set(e, "%s: must be at least %g", name_or(at, "value"), json_number_value(b));
	if ((b = json_object_get(schema, "exclusiveMinimum")) && json_is_number(b) && v <= json_number_value(b))
		return err_set(e, "%s: must be above %g", name_or(at, "value"), json_number_value(b));
	if ((b = json_object_get(schema, "maximum")) && json_is_number(b) && v > json_number_value(b))
		return err_set(e, "%s: must be at most %g", name_or(at, "value"), json_number_value(b));
	return 0;
}

static int check_array(const json_t *schema, const json_t *inst, const char *at, struct err *e)
{
	const json_t *mn = json_object_get(schema, "minItems"), *mx = json_object_get(schema, "maxItems");
	size_t n = json_array_size(inst);
	if (json_is_integer(mn) && n < (size_t)json_integer_value(mn))
		return err_set(e, "%s: needs at least %lld items", name_or(at, "value"), (long long)json_integer_value(mn));
	if (json_is_integer(mx) && n > (size_t)json_integer_value(mx))
		return err_set(e, "%s: has more than %lld items", name_or(at, "value"), (long long)json_integer_value(mx));
	const json_t *items = json_object_get(schema, "items");
	size_t i;
	const json_t *v;
	json_array_foreach(json_is_object(items) ? inst : NULL, i, v) {
		char sub[256];
		snprintf(sub, sizeof sub, "%s[%zu]", name_or(at, "value"), i);
		if (schema_validate(items, v, sub, e) < 0)
			return -1;
	}
	return 0;
}

/* One entry k: val of an object: its name (propertyNames), then its value (its property's
 * schema, or additionalProperties). */
static int check_entry(const json_t *schema, const char *k, const json_t *val, const char *at, struct err *e)
{
	const json_t *names = json_object_get(schema, "propertyNames");
	const json_t *extra = json_object_get(schema, "additionalProperties");
	const json_t *ps = json_object_get(json_object_get(schema, "properties"), k);
	char sub[320];
	/* The names of a map (files, env) are the caller's; an unknown argument's is not. */
	schema_entry_name(sub, sizeof sub, at, k, !ps && (json_is_object(extra) || json_is_object(names)));
	if (json_is_object(names)) {
		json_t *key = json_string(k);
		int rc = key ? schema_validate(names, key, sub, e) : err_set(e, "out of memory");
		json_decref(key);
		if (rc < 0)
			return -1;
	}
	if (!ps && json_is_object(extra))
		ps = extra;
	if (ps)
		return schema_validate(ps, val, sub, e);
	if (json_is_false(extra))
		return err_set(e, "%s: is not a known argument", sub);
	return 0;
}

static int check_object(const json_t *schema, const json_t *inst, const char *at, struct err *e)
{
	size_t i;
	const json_t *v;
	json_array_foreach(json_object_get(schema, "required"), i, v) {
		if (!json_is_string(v) || json_object_get(inst, json_string_value(v)))
			continue;
		if (*at)
			return err_set(e, "%s.%s: is required", at, json_string_value(v));
		return err_set(e, "%s: is required", json_string_value(v));
	}
	const json_t *mx = json_object_get(schema, "maxProperties");
	if (json_is_integer(mx) && json_object_size(inst) > (size_t)json_integer_value(mx))
		return err_set(e, "%s: has more than %lld entries", name_or(at, "value"), (long long)json_integer_value(mx));
	const char *k;
	json_t *val;
	json_object_foreach((json_t *)inst, k, val)
		if (check_entry(schema, k, val, at, e) < 0)
			return -1;
	return 0;
}

int schema_validate(const json_t *schema, const json_t *inst, const char *at, struct err *e)
{
	if (check_type(schema, inst, at, e) < 0)
		return -1;
	if (json_is_string(inst))
		return check_string(schema, inst, at, e);
	if (json_is_number(inst))
		return check_number(schema, inst, at, e);
	if (json_is_array(inst))
		return check_array(schema, inst, at, e);
	if (json_is_object(inst))
		return check_object(schema, inst, at, e);
	return 0;
}
