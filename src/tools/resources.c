#include "resources.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/base64.h"
#include "filekind.h"
#include "inputs.h"
#include "../base/utf8.h"
#include "wsuri.h"

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct ws_entry *)a)->path, ((const struct ws_entry *)b)->path);
}

/* The workspace's regular files that resources/read takes (sorted when asked); *unreadable counts the
 * names it would refuse (control bytes, too long), which are left out. Every walk of the
 * workspace watches it from then on (resources_maybe_changed). */
static int list_files(struct sandbox *sb, struct ws_list *ls, size_t *unreadable, bool sorted, struct err *e)
{
	if (sandbox_list_watch(sb, WORKSPACE, ".sandbox", RESOURCES_LIST_MAX, ls, e) < 0)
		return -1;
	size_t k = 0;
	*unreadable = 0;
	for (size_t i = 0; i < ls->n; i++) {
		bool reg = S_ISREG(ls->v[i].mode), ok = reg && !inputs_path_problem(ls->v[i].path, true);
		*unreadable += reg && !ok;
		if (ok)
			ls->v[k++] = ls->v[i];
		else
			free(ls->v[i].path);
	}
	ls->n = k;
	if (sorted && ls->n > 1)
		qsort(ls->v, ls->n, sizeof *ls->v, by_path);
	return 0;
}

/* A sum of per-file hashes of path, size, change time and mode: the order the folders were
 * read in does not matter. */
static uint64_t digest_of(const struct ws_list *ls)
{
	uint64_t d = ls->n;
	for (size_t i = 0; i < ls->n; i++) {
		uint64_t h = 1469598103934665603ull;
		for (const unsigned char *p = (const unsigned char *)ls->v[i].path; *p; p++)
			h = (h ^ *p) * 1099511628211ull;
		h ^= ls->v[i].size * 0x9e3779b97f4a7c15ull;
		h ^= (uint64_t)ls->v[i].ctime_ns * 0xc2b2ae3d27d4eb4full;
		h ^= (uint64_t)ls->v[i].mode;
		d += h * 0xff51afd7ed558ccdull;
	}
	return d;
}

/* The media type of a listed file (filekind_mime), from its first FILEKIND_SNIFF bytes: one
 * bounded read per file of the page. NULL when it cannot be read now (gone since the listing,
 * say): the entry goes without one. */
static const char *sniff(struct sandbox *sb, const char *path)
{
	char abs[sizeof WORKSPACE + INPUTS_PATH_MAX + 8];
	if ((size_t)snprintf(abs, sizeof abs, "%s/%s", WORKSPACE, path) >= sizeof abs)
		return NULL;
	struct ws_file f;
	struct err e = {""};
	if (sandbox_get(sb, abs, FILEKIND_SNIFF, &f, &e) < 0)
		return NULL;
	const char *mime = !f.err && S_ISREG(f.mode) ? filekind_mime(path, f.data, f.len, f.len < f.size)
						      : NULL;
	ws_file_free(&f);
	return mime;
}

static uint64_t path_hash(const char *path)
{
	uint64_t h = 1469598103934665603ull;
	for (const unsigned char *p = (const unsigned char *)path; *p; p++)
		h = (h ^ *p) * 1099511628211ull;
	return h ^ (h >> 29);
}

/* "a" + 16 hex digits of the path's hash + the path in base64: opaque to a client, and a
 * cursor the server did not make (a typo, a guess, another server's index) fails the check. */
char *resources_cursor_make(const char *path)
{
	size_t bl;
	char *b = b64_encode(path, strlen(path), &bl);
	char *c = b ? malloc(bl + 18) : NULL;
	if (c)
		snprintf(c, bl + 18, "a%016" PRIx64 "%s", path_hash(path), b);
	free(b);
	return c;
}

int resources_cursor_parse(const char *s, char *out, size_t n)
{
	size_t len = s ? strlen(s) : 0;
	if (len < 18 || s[0] != 'a' || n < 4)
		return -1;
	uint64_t h = 0;
	for (int i = 1; i <= 16; i++) {
		char c = s[i];
		int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
		if (v < 0)
			return -1;
		h = h << 4 | (uint64_t)v;
	}
	size_t bl = len - 17;
	if (bl % 4 || bl / 4 * 3 >= n)
		return -1;
	for (size_t i = 17; i < len; i++)
		if (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n')
			return -1; /* one spelling per cursor */
	long pl = b64_decode(s + 17, bl, (unsigned char *)out);
	if (pl <= 0 || (size_t)pl >= n)
		return -1;
	out[pl] = 0;
	if (strlen(out) != (size_t)pl || inputs_path_problem(out, true) || path_hash(out) != h)
		return -1;
	return 0;
}

void resources_pager_drop(struct resources_pager *p)
{
	if (p && p->live)
		ws_list_free(&p->ls);
	if (p)
		*p = (struct resources_pager){0};
}

json_t *resources_list(struct sandbox *sb, struct resources_pager *pager, const json_t *params, int *code, char *msg,
		       size_t n)
{
	uint64_t d;
	return resources_list_digest(sb, pager, params, &d, code, msg, n);
}

/* The first entry of the sorted ls after path. */
static size_t seek_after(const struct ws_list *ls, const char *path)
{
	size_t lo = 0, hi = ls->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(ls->v[mid].path, path) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

json_t *resources_list_digest(struct sandbox *sb, struct resources_pager *pager, const json_t *params,
			      uint64_t *digest, int *code, char *msg, size_t n)
{
	const json_t *cur = json_object_get(params, "cursor");
	char after[INPUTS_PATH_MAX + 8];
	bool seek = cur && !json_is_null(cur);
	if (seek && (!json_is_string(cur) || strlen(json_string_value(cur)) != json_string_length(cur) ||
		     resources_cursor_parse(json_string_value(cur), after, sizeof after) < 0)) {
		*code = RESOURCES_INVALID_PARAMS;
		snprintf(msg, n, "Invalid params: unknown cursor");
		return NULL;
	}
	struct resources_pager none = {0}, *pg = pager ? pager : &none;
	if (!seek)
		resources_pager_drop(pg); /* a new listing sees the tree as it is now */
	if (!pg->live) {
		struct err e = {""};
		if (list_files(sb, &pg->ls, &pg->unreadable, true, &e) < 0) {
			*code = RESOURCES_INTERNAL_ERROR;
			snprintf(msg, n, "Internal error: listing the workspace: %s", e.msg);
			return NULL;
		}
		pg->live = true;
		pg->digest = digest_of(&pg->ls);
	}
	struct ws_list ls = pg->ls;
	size_t unreadable = pg->unreadable;
	size_t from = seek ? seek_after(&ls, after) : 0;
	*digest = pg->digest;
	json_t *arr = json_array(), *r = json_pack("{s:o}", "resources", arr);
	size_t i = from, bytes = 0;
	for (; r && i < ls.n && i < from + RESOURCES_PAGE && bytes < RESOURCES_PAGE_BYTES; i++) {
		char *uri = wsuri_from_path(ls.v[i].path);
		size_t cl;
		char *name = utf8_sanitize(ls.v[i].path, strlen(ls.v[i].path), &cl);
		json_t *res = uri && name ? json_pack("{s:s, s:s%, s:I}", "uri", uri, "name", name, cl, "size",
						      (json_int_t)ls.v[i].size)
					  : NULL;
		/* An empty file has no bytes to read: its type is its name's (or text/plain). */
		const char *mime = !res ? NULL : ls.v[i].size ? sniff(sb, ls.v[i].path)
							       : filekind_mime(ls.v[i].path, (const unsigned char *)"", 0, false);
		if (mime)
			json_object_set_new(res, "mimeType", json_string(mime));
		bytes += (uri ? strlen(uri) : 0) + cl + 64;
		free(uri);
		free(name);
		if (!res || json_array_append_new(arr, res) < 0) {
			json_decref(r);
			r = NULL;
		}
	}
	if (r && i < ls.n) {
		char *next = i ? resources_cursor_make(ls.v[i - 1].path) : NULL;
		if (!next || json_object_set_new(r, "nextCursor", json_string(next)) < 0) {
			json_decref(r);
			r = NULL;
		}
		free(next);
	}
	/* What the list leaves out, said on its last page (the spec's result has no field for it). */
	char part[300] = "";
	if (ls.truncated)
		snprintf(part, sizeof part, "the workspace holds more than %d files (or 100000 names); only part of it is "
					    "listed. ", RESOURCES_LIST_MAX);
	if (ls.skipped)
		snprintf(part + strlen(part), sizeof part - strlen(part), "A folder too deep (%d levels) or unreadable "
									  "was not walked. ", WS_LIST_DEPTH);
	if (unreadable)
		snprintf(part + strlen(part), sizeof part - strlen(part), "%zu file%s with control bytes or over 1024 "
									  "bytes in %s path %s left out.", unreadable,
			 unreadable == 1 ? "" : "s", unreadable == 1 ? "its" : "their", unreadable == 1 ? "is" : "are");
	if (r && *part && i >= ls.n)
		json_object_set_new(r, "_meta", json_pack("{s:s}", "sandbox-mcp/partial", part));
	/* Kept for the next page only while there is one, and only in the caller's pager. */
	if (pg == &none || !r || i >= ls.n)
		resources_pager_drop(pg);
	if (!r) {
		*code = RESOURCES_INTERNAL_ERROR;
		snprintf(msg, n, "Internal error: out of memory");
	}
	return r;
}

json_t *resources_read(struct sandbox *sb, const json_t *params, int *code, char *msg, size_t n)
{
	const json_t *u = json_object_get(params, "uri");
	const char *uri = json_string_value(u);
	char path[INPUTS_PATH_MAX + 8];
	*code = RESOURCES_INVALID_PARAMS;
	if (!uri || strlen(uri) != json_string_length(u)) {
		snprintf(msg, n, "Invalid params: resources/read needs params.uri");
		return NULL;
	}
	if (wsuri_to_path(uri, path, sizeof path) < 0) {
		snprintf(msg, n, "Invalid params: %.300s is not a workspace resource (%sPATH, PATH relative to /workspace)",
			 uri, WSURI_PREFIX);
		return NULL;
	}
	const char *why = inputs_path_problem(path, true);
	if (why) {
		snprintf(msg, n, "Invalid params: %.300s: the path %s", uri, why);
		return NULL;
	}
	char abs[sizeof path + sizeof WORKSPACE + 1];
	snprintf(abs, sizeof abs, "%s/%s", WORKSPACE, path);
	struct ws_file f;
	struct err e = {""};
	if (sandbox_get(sb, abs, RESOURCES_READ_MAX, &f, &e) < 0) {
		*code = RESOURCES_INTERNAL_ERROR;
		snprintf(msg, n, "Internal error: reading %.300s: %s", uri, e.msg);
		return NULL;
	}
	json_t *r = NULL;
	*code = RESOURCES_NOT_FOUND;
	if (f.err == ENOENT || f.err == ENOTDIR)
		snprintf(msg, n, "Resource not found: %.300s", uri);
	else if (f.err == ELOOP)
		snprintf(msg, n, "Resource not found: %.300s (a symlink, at the path or on its way, is not followed)", uri);
	else if (f.err)
		snprintf(msg, n, "Resource not found: %.300s (%s)", uri, strerror(f.err));
	else if (!S_ISREG(f.mode))
		snprintf(msg, n, "Resource not found: %.300s is not a regular file", uri);
	else if (f.size > RESOURCES_READ_MAX || f.len != f.size) {
		*code = RESOURCES_INVALID_PARAMS;
		snprintf(msg, n, "Invalid params: %.300s is %" PRIu64 " bytes, over the %u MiB one read returns; read part of "
			 "it with execute_bash_commands (head -c, split)", uri, f.size, RESOURCES_READ_MAX >> 20);
	} else {
		const char *mime = filekind_mime(path, f.data, f.len, false);
		bool text = filekind_is_text(f.data, f.len);
		json_t *c = json_pack("{s:s}", "uri", uri);
		if (c && text) {
			json_object_set_new(c, "text", json_stringn((const char *)f.data, f.len));
		} else if (c) {
			char *b = b64_encode(f.data, f.len, NULL);
			json_object_set_new(c, "blob", b ? json_string(b) : NULL);
			free(b);
		}
		if (c)
			json_object_set_new(c, "mimeType", json_string(mime));
		r = c ? json_pack("{s:[o]}", "contents", c) : NULL;
		if (!r) {
			*code = RESOURCES_INTERNAL_ERROR;
			snprintf(msg, n, "Internal error: out of memory");
		}
	}
	ws_file_free(&f);
	return r;
}

bool resources_maybe_changed(struct sandbox *sb)
{
	return sandbox_changes(sb) != WS_CHANGES_NONE;
}

uint64_t resources_digest(struct sandbox *sb)
{
	struct ws_list ls;
	struct err e = {""};
	size_t unreadable;
	if (list_files(sb, &ls, &unreadable, false, &e) < 0) /* the digest takes any order */
		return 0;
	uint64_t d = digest_of(&ls);
	ws_list_free(&ls);
	return d;
}
