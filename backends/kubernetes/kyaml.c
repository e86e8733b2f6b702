#include "kyaml.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* One line of the document that holds something: its indentation and its text, comments and
 * trailing spaces off (a copy, owned by the parser; an item's line is re-pointed at its
 * content as it is read). */
struct line {
	size_t indent;
	char *text;
	size_t no;               /* 1-based, for messages */
};

struct parser {
	struct line *ln;
	size_t n, cur;
	struct err *e;
	bool failed;
};

static json_t *fail(struct parser *P, size_t no, const char *what)
{
	if (!P->failed)
		err_set(P->e, "line %zu: %s", no, what);
	P->failed = true;
	return NULL;
}

/* Cuts a comment off s (a '#' at the start or after a space, outside a quoted scalar) and
 * the spaces before it. */
static void strip_comment(char *s)
{
	char q = 0;
	for (size_t i = 0; s[i]; i++) {
		char c = s[i];
		if (q == '"') {
			if (c == '\\' && s[i + 1])
				i++;
			else if (c == '"')
				q = 0;
		} else if (q == '\'') {
			if (c == '\'' && s[i + 1] == '\'')
				i++;
			else if (c == '\'')
				q = 0;
		} else if ((c == '"' || c == '\'') && (i == 0 || s[i - 1] == ' ')) {
			q = c;
		} else if (c == '#' && (i == 0 || s[i - 1] == ' ')) {
			s[i] = '\0';
			break;
		}
	}
	size_t l = strlen(s);
	while (l && (s[l - 1] == ' ' || s[l - 1] == '\t' || s[l - 1] == '\r'))
		s[--l] = '\0';
}

static bool is_item(const char *t)
{
	return t[0] == '-' && (t[1] == ' ' || t[1] == '\0');
}

/* Appends the UTF-8 of code point cp to *d. */
static void put_utf8(char **d, unsigned cp)
{
	char *p = *d;
	if (cp < 0x80) {
		*p++ = (char)cp;
	} else if (cp < 0x800) {
		*p++ = (char)(0xc0 | cp >> 6);
		*p++ = (char)(0x80 | (cp & 0x3f));
	} else {
		*p++ = (char)(0xe0 | cp >> 12);
		*p++ = (char)(0x80 | (cp >> 6 & 0x3f));
		*p++ = (char)(0x80 | (cp & 0x3f));
	}
	*d = p;
}

/* A quoted scalar at s (its opening quote); *end past its closing quote. A new string (caller
 * frees), or NULL with why set. */
static char *quoted(const char *s, const char **end, const char **why)
{
	char q = s[0];
	char *out = malloc(strlen(s) + 1), *d = out;
	if (!out)
		return *why = "out of memory", NULL;
	for (const char *p = s + 1; *p; p++) {
		if (*p == q && q == '\'' && p[1] == '\'') {
			*d++ = '\'';
			p++;
		} else if (*p == q) {
			*d = '\0';
			*end = p + 1;
			if (memchr(out, '\0', (size_t)(d - out)))
				break;
			return out;
		} else if (*p == '\\' && q == '"') {
			p++;
			switch (*p) {
			case '\\': case '"': case '/': *d++ = *p; break;
			case 'n': *d++ = '\n'; break;
			case 't': *d++ = '\t'; break;
			case 'r': *d++ = '\r'; break;
			case 'u': {
				unsigned cp = 0;
				for (int i = 1; i <= 4; i++) {
					char c = p[i];
					int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
						: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
					if (v < 0) {
						free(out);
						return *why = "a bad \\u escape", NULL;
					}
					cp = cp << 4 | (unsigned)v;
				}
				/* No NUL and no lone surrogate halves in a credential's text. */
				if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff)) {
					free(out);
					return *why = "a \\u escape of a NUL or a surrogate", NULL;
				}
				put_utf8(&d, cp);
				p += 4;
				break;
			}
			default:
				free(out);
				return *why = "an escape this reader does not take", NULL;
			}
		} else {
			*d++ = *p;
		}
	}
	free(out);
	return *why = "a quoted scalar that does not end on its line", NULL;
}

static json_t *scalar(struct parser *P, const char *t, size_t no);

/* A flow collection or scalar at *pp, on one line: [a, "b"], {k: v}, nested. *pp moves past
 * it. NULL with the parser failed. */
static json_t *flow(struct parser *P, const char **pp, size_t no, int depth, bool key)
{
	const char *p = *pp + strspn(*pp, " ");
	if (depth > KYAML_DEPTH)
		return fail(P, no, "nested too deep");
	if (*p == '[' || *p == '{') {
		bool map = *p == '{';
		json_t *v = map ? json_object() : json_array();
		if (!v)
			return fail(P, no, "out of memory");
		p++;
		for (bool first = true;; first = false) {
			p += strspn(p, " ");
			if (*p == (map ? '}' : ']')) {
				*pp = p + 1;
				return v;
			}
			if (!first) {
				if (*p != ',')
					break;
				p += 1 + strspn(p + 1, " ");
			}
			json_t *k = NULL, *item;
			if (map) {
				if (!(k = flow(P, &p, no, depth + 1, true)))
					break;
				p += strspn(p, " ");
				if (*p != ':' || !json_is_string(k)) {
					json_decref(k);
					break;
				}
				p++;
			}
			if (!(item = flow(P, &p, no, depth + 1, false))) {
				json_decref(k);
				break;
			}
			int rc;
			if (map && json_object_get(v, json_string_value(k))) {
				json_decref(item);
				json_decref(k);
				json_decref(v);
				return fail(P, no, "a key given twice");
			}
			rc = map ? json_object_set_new(v, json_string_value(k), item) : json_array_append_new(v, item);
			json_decref(k);
			if (rc < 0)
				break;
		}
		json_decref(v);
		return fail(P, no, "a flow collection this reader cannot read");
	}
	if (*p == '"' || *p == '\'') {
		const char *why = NULL, *end = NULL;
		char *s = quoted(p, &end, &why);
		if (!s)
			return fail(P, no, why);
		json_t *v = json_string(s);
		free(s);
		*pp = end;
		return v ? v : fail(P, no, "not UTF-8");
	}
	const char *stop = key ? ",:]}[{" : ",]}[{";
	size_t l = strcspn(p, stop);
	while (l && p[l - 1] == ' ')
		l--;
	if (!l || strchr("&*!|>%@`#", p[0]))
		return fail(P, no, "a flow collection this reader cannot read");
	char *s = strndup(p, l);
	json_t *v = s ? json_string(s) : NULL;
	free(s);
	*pp = p + l;
	return v ? v : fail(P, no, "not UTF-8");
}

/* The scalar (or flow collection) of text t. NULL with the parser failed. */
static json_t *scalar(struct parser *P, const char *t, size_t no)
{
	if (t[0] == '"' || t[0] == '\'') {
		const char *why = NULL, *end = NULL;
		char *s = quoted(t, &end, &why);
		if (!s)
			return fail(P, no, why);
		if (end[strspn(end, " ")]) {
			free(s);
			return fail(P, no, "text after a quoted scalar");
		}
		json_t *v = json_string(s);
		free(s);
		return v ? v : fail(P, no, "not UTF-8");
	}
	if (strchr("&*!", t[0]))
		return fail(P, no, "anchors, aliases and tags are not read");
	if (t[0] == '|' || t[0] == '>')
		return fail(P, no, "block scalars (| and >) are not read");
	if (t[0] == '{' || t[0] == '[') {
		const char *p = t;
		json_t *v = flow(P, &p, no, 0, false);
		if (v && p[strspn(p, " ")]) {
			json_decref(v);
			return fail(P, no, "text after a flow collection");
		}
		return v;
	}
	if (strchr("%@`", t[0]))
		return fail(P, no, "a plain scalar may not start with that character");
	json_t *v = json_string(t);
	return v ? v : fail(P, no, "not UTF-8");
}

/* Whether t is a mapping entry "key: value" or "key:"; then *key (caller frees) and *rest
 * (within t, spaces skipped). -1 with the parser failed when its quoted key is bad. */
static int entry(struct parser *P, const char *t, size_t no, char **key, const char **rest)
{
	*key = NULL;
	if (t[0] == '"' || t[0] == '\'') {
		const char *why = NULL, *end = NULL;
		char *k = quoted(t, &end, &why);
		if (!k)
			return 0; /* a quoted scalar, perhaps: the caller says what is wrong */
		if (end[0] != ':' || (end[1] && end[1] != ' ')) {
			free(k);
			return 0;
		}
		*key = k;
		*rest = end + 1 + strspn(end + 1, " ");
		return 1;
	}
	if (strchr("{[&*!|>", t[0]))
		return 0;
	for (const char *p = t; *p; p++) {
		if (*p == ':' && (p[1] == ' ' || p[1] == '\0')) {
			if (p == t) {
				fail(P, no, "an empty key");
				return -1;
			}
			*key = strndup(t, (size_t)(p - t));
			if (!*key) {
				fail(P, no, "out of memory");
				return -1;
			}
			*rest = p + 1 + strspn(p + 1, " ");
			return 1;
		}
	}
	return 0;
}

static json_t *node(struct parser *P, int depth);

/* After a scalar value: a deeper line would continue it, which is not read. */
static bool continues(struct parser *P, size_t ind)
{
	if (P->cur < P->n && P->ln[P->cur].indent > ind) {
		fail(P, P->ln[P->cur].no, "a value continued on a further line (or misplaced indentation)");
		return true;
	}
	return false;
}

/* The value of an entry or item whose own line had nothing after it. */
static json_t *child(struct parser *P, size_t ind, bool seq_same, int depth)
{
	if (P->cur < P->n && (P->ln[P->cur].indent > ind ||
			      (seq_same && P->ln[P->cur].indent == ind && is_item(P->ln[P->cur].text))))
		return node(P, depth + 1);
	return json_null();
}

static json_t *mapping(struct parser *P, size_t ind, int depth)
{
	json_t *obj = json_object();
	if (!obj)
		return fail(P, P->ln[P->cur].no, "out of memory");
	while (!P->failed && P->cur < P->n && P->ln[P->cur].indent == ind && !is_item(P->ln[P->cur].text)) {
		struct line *L = &P->ln[P->cur];
		char *key = NULL;
		const char *rest = NULL;
		int is = entry(P, L->text, L->no, &key, &rest);
		if (is <= 0) {
			if (is == 0)
				fail(P, L->no, "a mapping's line without \"key:\"");
			break;
		}
		P->cur++;
		json_t *v = rest[0] ? scalar(P, rest, L->no) : child(P, ind, true, depth);
		if (v && rest[0] && continues(P, ind)) {
			json_decref(v);
			v = NULL;
		}
		if (v && json_object_get(obj, key)) {
			json_decref(v);
			v = fail(P, L->no, "a key given twice");
		}
		if (v && json_object_set_new(obj, key, v) < 0)
			fail(P, L->no, "a key that is not UTF-8");
		free(key);
	}
	if (P->failed) {
		json_decref(obj);
		return NULL;
	}
	return obj;
}

static json_t *sequence(struct parser *P, size_t ind, int depth)
{
	json_t *arr = json_array();
	if (!arr)
		return fail(P, P->ln[P->cur].no, "out of memory");
	while (!P->failed && P->cur < P->n && P->ln[P->cur].indent == ind && is_item(P->ln[P->cur].text)) {
		struct line *L = &P->ln[P->cur];
		const char *sub = L->text + 1 + strspn(L->text + 1, " ");
		json_t *v;
		char *key = NULL;
		const char *rest;
		int is = sub[0] ? entry(P, sub, L->no, &key, &rest) : 0;
		free(key);
		if (is < 0)
			break;
		if (!sub[0]) {
			P->cur++;
			v = child(P, ind, false, depth);
		} else if (is || is_item(sub)) {
			/* "- key: value" or "- - x": the item is a collection whose first line is the
			 * rest of this one, at the column where that rest starts. */
			L->indent += (size_t)(sub - L->text);
			L->text = (char *)sub;
			v = node(P, depth + 1);
		} else {
			P->cur++;
			v = scalar(P, sub, L->no);
			if (v && continues(P, ind)) {
				json_decref(v);
				v = NULL;
			}
		}
		if (v && json_array_append_new(arr, v) < 0)
			fail(P, L->no, "out of memory");
	}
	if (P->failed) {
		json_decref(arr);
		return NULL;
	}
	return arr;
}

static json_t *node(struct parser *P, int depth)
{
	struct line *L = &P->ln[P->cur];
	if (depth > KYAML_DEPTH)
		return fail(P, L->no, "nested too deep");
	if (is_item(L->text))
		return sequence(P, L->indent, depth);
	char *key = NULL;
	const char *rest;
	int is = entry(P, L->text, L->no, &key, &rest);
	free(key);
	if (is > 0)
		return mapping(P, L->indent, depth);
	if (is < 0)
		return NULL;
	/* A document, or an item's value, that is one scalar. */
	P->cur++;
	json_t *v = scalar(P, L->text, L->no);
	if (v && continues(P, L->indent)) {
		json_decref(v);
		return NULL;
	}
	return v;
}

/* Whether the document is JSON: its first character that is not a space or a comment. */
static bool is_json(const char *t, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (t[i] == '#') {
			while (i < n && t[i] != '\n')
				i++;
		} else if (!strchr(" \t\r\n", t[i])) {
			return t[i] == '{' || t[i] == '[';
		}
	}
	return false;
}

json_t *kyaml_parse(const char *text, size_t n, struct err *e)
{
	if (n > KYAML_MAX)
		return err_set(e, "larger than %u bytes", KYAML_MAX), NULL;
	if (memchr(text, '\0', n))
		return err_set(e, "holds a NUL byte"), NULL;
	if (is_json(text, n)) {
		json_error_t je;
		json_t *v = json_loadb(text, n, JSON_REJECT_DUPLICATES, &je);
		if (!v)
			err_set(e, "line %d: %s", je.line, je.text);
		return v;
	}
	struct parser P = {.e = e};
	char *copy = malloc(n + 1);
	size_t cap = 1;
	for (size_t i = 0; i < n; i++)
		cap += text[i] == '\n';
	P.ln = calloc(cap, sizeof *P.ln);
	json_t *doc = NULL;
	if (!copy || !P.ln) {
		err_set(e, "out of memory");
		goto out;
	}
	memcpy(copy, text, n);
	copy[n] = '\0';
	size_t no = 0;
	bool body = false;
	for (char *s = copy, *nl; s; s = nl) {
		nl = strchr(s, '\n');
		if (nl)
			*nl++ = '\0';
		no++;
		size_t ind = strspn(s, " ");
		if (s[ind] == '\t') {
			fail(&P, no, "a tab in the indentation");
			goto out;
		}
		strip_comment(s + ind);
		if (!s[ind])
			continue;
		if (!strncmp(s, "---", 3) && (s[3] == '\0' || s[3] == ' ')) {
			if (body || s[3 + strspn(s + 3, " ")]) {
				fail(&P, no, "only one document, \"---\" alone on its line, is read");
				goto out;
			}
			body = true;
			continue;
		}
		if (!strncmp(s, "...", 3) || s[0] == '%') {
			fail(&P, no, "directives and document ends are not read");
			goto out;
		}
		body = true;
		P.ln[P.n++] = (struct line){ind, s + ind, no};
	}
	if (!P.n) {
		err_set(e, "empty");
		goto out;
	}
	doc = node(&P, 0);
	if (doc && P.cur < P.n) {
		fail(&P, P.ln[P.cur].no, "misplaced indentation");
		json_decref(doc);
		doc = NULL;
	}
out:
	free(P.ln);
	free(copy);
	return doc;
}
