#include "artifacts.h"

/* Only vis() is used: the NetBSD strnvis() is the one to get should it ever be. */
#define LIBBSD_NETBSD_VIS 1
#include <bsd/vis.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../base/base64.h"
#include "filekind.h"
#include "../base/utf8.h"
#include "result.h"
#include "wsuri.h"

#define CLOSING_MAX 400 /* bytes kept for the closing line */

struct cand {
	char *path;             /* relative to /workspace; owned */
	const struct ws_entry *seen; /* from the outputs/ listing, or NULL (collect) */
};

static int by_path(const void *a, const void *b)
{
	return strcmp(((const struct cand *)a)->path, ((const struct cand *)b)->path);
}

static const char *kind_of(unsigned mode)
{
	if (S_ISDIR(mode))
		return "a folder: name the files in it";
	if (S_ISFIFO(mode))
		return "a FIFO, not a regular file: not read";
	if (S_ISSOCK(mode))
		return "a socket, not a regular file: not read";
	if (S_ISLNK(mode))
		return "a symlink: not followed";
	return "not a regular file: not read";
}

static size_t cost_of(const json_t *j)
{
	char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
	size_t n = s ? strlen(s) + 1 : 0;
	free(s);
	return n;
}

/* One file's entry, its line and its block, as it will be shown. */
struct shown {
	json_t *entry, *block;
	char *line;
	size_t cost;
};

static void shown_free(struct shown *s)
{
	json_decref(s->entry);
	json_decref(s->block);
	free(s->line);
	memset(s, 0, sizeof *s);
}

/* A name for the text block: its control bytes and backslashes as C escapes (vis(3): \n, \t,
 * \001, \\), so that a name cannot break the block's one-line-per-file form; other bytes as
 * they are (UTF-8 stays readable). The entry keeps the exact path. Caller frees. */
static char *line_name(const char *p)
{
	char *out = malloc(strlen(p) * 4 + 1), *o = out;
	for (; out && *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c < 0x20 || c == 0x7f || c == '\\')
			o = vis(o, c, VIS_CSTYLE | VIS_OCTAL | VIS_NL | VIS_TAB, (unsigned char)p[1]);
		else
			*o++ = (char)c;
	}
	if (out)
		*o = '\0';
	return out;
}

/* What a file's text-block line says after its name. */
static const char *line_says(const char *how, const struct ws_file *f, const char *uri)
{
	if (!strcmp(how, "image"))
		return "shown as an image";
	if (!strcmp(how, "text"))
		return f->len ? "its text follows" : "empty";
	if (!strcmp(how, "base64"))
		return "binary; its base64 is in structuredContent.artifacts";
	if (!strcmp(how, "link"))
		return uri;
	return "";
}

/* The file's line in the text block: name, kind and size, how it is shown, a note; the text
 * itself after it when shown as text. Caller frees; NULL when out of memory. */
static char *show_line(const char *path, const struct ws_file *f, bool have_size, const char *mime, const char *how,
		       const char *note, const char *uri)
{
	char size[64] = "";
	if (have_size)
		snprintf(size, sizeof size, "%s%s%" PRIu64 " bytes", mime ? mime : "", mime ? ", " : "", f->size);
	char *name = line_name(path);
	bool text = !strcmp(how, "text"), none = !strcmp(how, "none");
	size_t ll = (name ? strlen(name) : 0) + strlen(size) + strlen(uri) + (note ? strlen(note) : 0) + 128 +
		    (text ? f->len : 0);
	char *line = name ? malloc(ll) : NULL;
	if (!line) {
		free(name);
		return NULL;
	}
	int o = snprintf(line, ll, "%s%s%s%s: %s%s%s%s\n", name, *size ? " (" : "", size, *size ? ")" : "",
			 line_says(how, f, uri), note && !none ? " (" : "", note ? note : "", note && !none ? ")" : "");
	free(name);
	if (text) {
		memcpy(line + o, f->data, f->len);
		o += (int)f->len;
		if (f->len && f->data[f->len - 1] != '\n')
			line[o++] = '\n';
		line[o] = '\0';
	}
	return line;
}

/* The content block that goes with the file: an image, or a link. NULL with 0 for none. */
static int show_block(struct shown *s, const struct ws_file *f, const char *mime, const char *how, json_t *jp,
		      const char *uri, bool links)
{
	if (!strcmp(how, "image")) {
		char *b = b64_encode(f->data, f->len, NULL);
		s->block = b ? json_pack("{s:s, s:s, s:s}", "type", "image", "data", b, "mimeType", mime) : NULL;
		free(b);
		return s->block ? 0 : -1;
	}
	if (strcmp(how, "link") || !links)
		return 0;
	s->block = json_pack("{s:s, s:s, s:O}", "type", "resource_link", "uri", uri, "name", jp);
	if (!s->block)
		return -1;
	if (mime)
		json_object_set_new(s->block, "mimeType", json_string(mime));
	json_object_set_new(s->block, "size", json_integer((json_int_t)f->size));
	return 0;
}

/* how: "image", "text", "base64", "link" or "none". */
static int show(struct shown *s, const char *path, const struct ws_file *f, bool have_size, const char *mime,
		const char *how, const char *note, bool links)
{
	memset(s, 0, sizeof *s);
	char *uri = wsuri_from_path(path), *b = NULL;
	json_t *jp = utf8_json_string(path, strlen(path));
	if (uri && jp)
		s->entry = json_pack("{s:O, s:s, s:o, s:o, s:s, s:o}", "path", jp, "uri", uri, "size",
				     have_size ? json_integer((json_int_t)f->size) : json_null(), "mime_type",
				     mime ? json_string(mime) : json_null(), "shown", how, "note",
				     note ? json_string(note) : json_null());
	if (s->entry)
		s->line = show_line(json_string_value(jp), f, have_size, mime, how, note, uri);
	int rc = s->line ? show_block(s, f, mime, how, jp, uri, links) : -1;
	if (rc == 0 && !strcmp(how, "text"))
		json_object_set_new(s->entry, "text", json_stringn((const char *)f->data, f->len));
	if (rc == 0 && !strcmp(how, "base64") && (b = b64_encode(f->data, f->len, NULL)))
		json_object_set_new(s->entry, "base64", json_string(b));
	else if (rc == 0 && !strcmp(how, "base64"))
		rc = -1;
	free(b);
	free(uri);
	json_decref(jp);
	if (rc < 0) {
		shown_free(s);
		return -1;
	}
	/* Image data counts apart: hosts take images beside the text budget. */
	s->cost = cost_of(s->entry) + result_json_cost(s->line, strlen(s->line)) +
		  (s->block && strcmp(how, "image") ? cost_of(s->block) : 0) + 16;
	return 0;
}

/* Reads one candidate and decides how it is shown; inline false: never inline. */
static int present(struct sandbox *sb, const struct cand *c, bool links, bool inline_ok, int *images,
		   struct shown *s)
{
	char abs[sizeof WORKSPACE + sizeof ARTIFACTS_DIR + 4200]; /* a listed name is at most 4,095 bytes */
	snprintf(abs, sizeof abs, "%s/%s", WORKSPACE, c->path);
	/* A known large file: its first bytes tell an image; a file of unknown size is read up to
	 * the image cap. */
	size_t want = c->seen && S_ISREG(c->seen->mode) && c->seen->size > ARTIFACTS_IMAGE_MAX ? FILEKIND_SNIFF
												: ARTIFACTS_IMAGE_MAX;
	struct ws_file f;
	struct err e = {""};
	int rc = sandbox_get(sb, abs, want, &f, &e);
	char note[sizeof e.msg + 64];
	if (rc < 0) {
		snprintf(note, sizeof note, "could not be read: %s", e.msg);
		rc = show(s, c->path, &f, false, NULL, "none", note, links);
	} else if (f.err) {
		const char *why = f.err == ENOENT   ? "no such file"
				  : f.err == ELOOP  ? "a symlink (at the path or on its way): not followed"
				  : f.err == ENOTDIR ? "a name on its way is not a folder"
						     : strerror(f.err);
		rc = show(s, c->path, &f, false, NULL, "none", why, links);
	} else if (!S_ISREG(f.mode)) {
		rc = show(s, c->path, &f, false, NULL, "none", kind_of(f.mode), links);
	} else {
		bool whole = f.len == f.size;
		const char *img = filekind_image(f.data, f.len);
		const char *mime = filekind_mime(c->path, f.data, f.len, !whole);
		if (img && whole && *images < ARTIFACTS_IMAGES) {
			(*images)++;
			rc = show(s, c->path, &f, true, mime, "image", NULL, links);
		} else if (img) {
			rc = show(s, c->path, &f, true, mime, "link",
				  whole ? "more images than one result shows (4): read it as a resource"
					: "an image over 1 MiB is not shown: read it as a resource", links);
		} else if (whole && f.size <= ARTIFACTS_INLINE_MAX && inline_ok) {
			rc = show(s, c->path, &f, true, mime, filekind_is_text(f.data, f.len) ? "text" : "base64", NULL, links);
		} else if (whole && f.size <= ARTIFACTS_INLINE_MAX) {
			rc = show(s, c->path, &f, true, mime, "link", "the result has no room to show it inline", links);
		} else {
			rc = show(s, c->path, &f, true, mime, "link", NULL, links);
		}
	}
	ws_file_free(&f);
	return rc;
}

void artifacts_free(struct artifacts *a)
{
	json_decref(a->list);
	json_decref(a->blocks);
	free(a->text);
	memset(a, 0, sizeof *a);
}

static int add_text(char **text, const char *line)
{
	size_t o = *text ? strlen(*text) : 0, n = strlen(line);
	char *t = realloc(*text, o + n + 1);
	if (!t)
		return -1;
	memcpy(t + o, line, n + 1);
	*text = t;
	return 0;
}

/* The files to return: what the call changed under outputs/ (told from ls), then the paths
 * of `collect`, each once. Remembers outputs/ as the call left it. 0 with cs[0..*n) set (paths
 * owned), or -1 when out of memory. */
static int candidates(struct sandbox *sb, const struct ws_list *ls, const json_t *collect, int64_t since_ns,
		      int changed, struct cand *cs, size_t *n)
{
	/* A file the last call left as it is now was not changed by this one, whatever the clock
	 * says: its ctime may fall after since_ns when the two calls were within a clock tick. */
	json_auto_t *seen = since_ns > 0 && changed != 0 ? json_object() : NULL;
	*n = 0;
	for (size_t i = 0; i < ls->n; i++) {
		const struct ws_entry *w = &ls->v[i];
		char stamp[48];
		snprintf(stamp, sizeof stamp, "%lld:%llu", (long long)w->ctime_ns, (unsigned long long)w->size);
		const char *before = json_string_value(json_object_get(sb->outputs_seen, w->path));
		if (seen)
			json_object_set_new(seen, w->path, json_string(stamp));
		if (w->ctime_ns < since_ns || (before && !strcmp(before, stamp)))
			continue;
		cs[*n].seen = w;
		if (asprintf(&cs[*n].path, "%s/%s", ARTIFACTS_DIR, w->path) < 0) {
			cs[*n].path = NULL;
			return -1;
		}
		(*n)++;
	}
	for (size_t i = 0; i < json_array_size(collect); i++) {
		const char *p = json_string_value(json_array_get(collect, i));
		bool dup = false;
		for (size_t k = 0; k < *n && !dup; k++)
			dup = !strcmp(cs[k].path, p);
		if (!dup && !(cs[(*n)++].path = strdup(p)))
			return -1;
	}
	if (seen && sb->outputs_seen) {
		json_object_clear(sb->outputs_seen);
		json_object_update(sb->outputs_seen, seen);
	}
	qsort(cs, *n, sizeof *cs, by_path);
	return 0;
}

/* Takes s into out (its entry, line and block). 0, or -1 when out of memory. */
static int add_shown(struct artifacts *out, struct shown *s)
{
	if ((!out->list && !(out->list = json_array())) || json_array_append(out->list, s->entry) < 0 ||
	    add_text(&out->text, s->line) < 0)
		return -1;
	if (s->block && ((!out->blocks && !(out->blocks = json_array())) || json_array_append(out->blocks, s->block) < 0))
		return -1;
	return 0;
}

/* The closing lines: what was not returned, and what of outputs/ was not looked at. A listing
 * is cut short by its size or, on a backend whose walk has a time bound (Daytona's runner, 5 s),
 * by its time: a slow disk cuts a small folder short too. */
static void closing_lines(char *closing, size_t cn, size_t n, size_t shown, size_t tried, const struct ws_list *ls)
{
	closing[0] = '\0';
	if (shown < n)
		snprintf(closing, cn, "%zu more file%s not returned (%s); resources/list lists the workspace.\n",
			 n - shown, n - shown == 1 ? " is" : "s are",
			 shown == tried ? "at most 20 per call"
			 : tried == n   ? "the result has no room for more"
					: "the result has no room for more, and at most 20 per call");
	if (ls->truncated)
		snprintf(closing + strlen(closing), cn - strlen(closing),
			 "%s holds more than %d files (or 100000 names), or took too long to walk: only part of it "
			 "was looked at.\n",
			 ARTIFACTS_DIR "/", ARTIFACTS_SCAN_MAX);
	if (ls->skipped)
		snprintf(closing + strlen(closing), cn - strlen(closing),
			 "A folder in %s that is too deep (%d levels) or unreadable was not looked at.\n",
			 ARTIFACTS_DIR "/", WS_LIST_DEPTH);
}

/* Shows the first ARTIFACTS_MAX candidates in path order within the budget: one that does not
 * fit inline is linked, and one that does not fit even so is counted out, leaving room for
 * the next. 0, or -1 when out of memory. */
static int present_all(struct sandbox *sb, const struct cand *cs, size_t n, size_t budget, bool links,
		       struct artifacts *out, size_t *shown, size_t *tried)
{
	size_t used = 0;
	int images = 0, rc = 0;
	for (*shown = *tried = 0; rc == 0 && *tried < n && *tried < ARTIFACTS_MAX; (*tried)++) {
		struct shown s;
		if (present(sb, &cs[*tried], links, true, &images, &s) < 0)
			return -1;
		const char *how = json_string_value(json_object_get(s.entry, "shown"));
		bool inlined = how && (!strcmp(how, "text") || !strcmp(how, "base64"));
		if (used + s.cost + CLOSING_MAX > budget && inlined) {
			shown_free(&s);
			if (present(sb, &cs[*tried], links, false, &images, &s) < 0)
				return -1;
		}
		how = json_string_value(json_object_get(s.entry, "shown"));
		if (used + s.cost + CLOSING_MAX > budget) {
			images -= how && !strcmp(how, "image");
		} else {
			rc = add_shown(out, &s);
			used += s.cost;
			(*shown)++;
		}
		shown_free(&s);
	}
	out->cost = used;
	return rc;
}

int artifacts_collect(struct sandbox *sb, const json_t *collect, int64_t since_ns, int changed, size_t budget,
		      bool links, struct artifacts *out)
{
	memset(out, 0, sizeof *out);
	struct ws_list ls = {0};
	struct err e = {""};
	if (since_ns > 0 && changed != 0 && sandbox_list(sb, WORKSPACE "/" ARTIFACTS_DIR, NULL, ARTIFACTS_SCAN_MAX, &ls, &e) < 0)
		ls = (struct ws_list){0}; /* the sandbox is gone: nothing to collect there */
	size_t n = 0, shown = 0, tried = 0;
	struct cand *cs = calloc(ls.n + json_array_size(collect) + 1, sizeof *cs);
	int rc = cs ? 0 : -1;
	if (rc == 0)
		rc = candidates(sb, &ls, collect, since_ns, changed, cs, &n);
	if (rc == 0)
		rc = present_all(sb, cs, n, budget, links, out, &shown, &tried);
	char closing[CLOSING_MAX];
	closing_lines(closing, sizeof closing, n, shown, tried, &ls);
	if (rc == 0 && *closing && add_text(&out->text, closing) < 0)
		rc = -1;
	out->cost += *closing ? result_json_cost(closing, strlen(closing)) : 0;
	for (size_t i = 0; cs && i < ls.n + json_array_size(collect); i++)
		free(cs[i].path);
	free(cs);
	ws_list_free(&ls);
	if (rc < 0)
		artifacts_free(out);
	return rc;
}
